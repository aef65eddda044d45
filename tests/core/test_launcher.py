"""core.run.launcher: argv shapes, and a fake worker launched, stopped, crashed and reconciled for real."""
from __future__ import annotations

import datetime as dt
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from core.spec.config import Config, ConfigError
from core.run.launcher import (
    CRASH_REASON, ENV_RUN_DIR, REPO_ROOT, LaunchError, build_argv, check_workers_available,
    command_preview, create_run, find_orphans, free_port, is_alive, launch, multi_host_commands,
    process_fields, reconcile, run_id_for, run_processes, stop,
)
from core.run.records import TERMINAL_STATES, Status
from core.run.rundir import RunDir, atomic_write_json

from tests import skips

# A stand-in for `python -m core.train`: launched as the "python" of build_argv, so its argv is
# [fake, "-m", "core.train", "--run-dir", RUN]. It starts a child in its group and one that leaves
# the group (as msrun's workers do) and ignores SIGTERM; FAKE_MODE picks how it reacts to stops.
FAKE_WORKER = """\
#!{python}
import os, signal, subprocess, sys, time
from core.run.rundir import ControlPoller, RunDir

run = RunDir(sys.argv[sys.argv.index("--run-dir") + 1])
mode = os.environ.get("FAKE_MODE", "obey")

def on_sigterm(signum, frame):
    if mode == "stubborn":
        return
    run.write_status(state="stopped", reason="worker got SIGTERM")
    sys.exit(143)

signal.signal(signal.SIGTERM, on_sigterm)
children = []
if mode != "lonely":
    sleeper = [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"]
    children = [subprocess.Popen(sleeper[:2] + ["import time; time.sleep(60)"]),
                subprocess.Popen(sleeper, start_new_session=True)]
print("fake worker running", flush=True)
print("Traceback (most recent call last):", flush=True)
print("ValueError: fake failure for the log", flush=True)
run.write_status(state="running", step=0, worker_pids=[os.getpid()] + [c.pid for c in children])
poller = ControlPoller(run)
for _ in range(1200):
    control = poller.poll() if mode in ("obey", "lonely") else None
    if control and control.stop:
        run.write_status(state="stopped", reason=f"stop {{control.stop}} requested")
        sys.exit(0)  # leaves its children behind: stop() must clean them up
    time.sleep(0.02)
"""


@pytest.fixture
def fake_python(tmp_path: Path) -> str:
    path = tmp_path / "fake_python"
    path.write_text(FAKE_WORKER.format(python=sys.executable))
    path.chmod(0o755)
    return str(path)


@pytest.fixture
def run(tmp_path: Path) -> RunDir:
    return RunDir.create(tmp_path / "runs", "20261129-101500_tiny-demo_lora-r8_fp32_dp1", "method: lora\n")


@pytest.fixture(autouse=True)
def no_leftover_processes(tmp_path):
    """Fail a test that leaves a process of its runs behind, after killing them."""
    yield
    leftovers = _processes_with_run_dir_under(tmp_path)
    for process in leftovers:
        try:
            process.kill()
        except psutil.Error:
            pass
    assert not leftovers, f"processes left behind: {leftovers}"


def _processes_with_run_dir_under(root: Path) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter():
        try:
            value = process.environ().get(ENV_RUN_DIR, "")
            if value.startswith(str(root)) and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except psutil.Error:
            pass
    return found


def wait_for_state(run: RunDir, state: str, timeout_s: float = 15.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = run.read_status()
        if status.state == state and status.pid:
            return status
        if status.state in TERMINAL_STATES:  # over without reaching it: said at once, with its reason
            raise AssertionError(f"run ended {status.state} before {state!r}: {status.reason}\n{run.log_path.read_text()}")
        time.sleep(0.02)
    raise AssertionError(f"run never reached {state!r}: {run.read_status()}\n{run.log_path.read_text()}")


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def start(run: RunDir, fake_python: str, mode: str) -> dict:
    launch(run, 1, env={"FAKE_MODE": mode}, python=fake_python)
    return wait_for_state(run, "running")


# ---- commands ---------------------------------------------------------------------------------

def test_argv_single_worker_runs_the_rank_supervisor(run):
    assert build_argv(run, 1, python="/py/bin/python") == \
        ["/py/bin/python", "-m", "core.ranks", "--run-dir", str(run.path)]


def test_argv_data_parallel_uses_msrun_next_to_python(run):
    argv = build_argv(run, 2, master_port=29123)
    msrun = Path(sys.executable).parent / "msrun"
    assert argv == [str(msrun), "--worker_num=2", "--local_worker_num=2", "--master_port=29123",
                    "--join=True", f"--log_dir={run.path}/logs", str(REPO_ROOT / "core" / "ranks.py"),
                    "--run-dir", str(run.path)]
    assert msrun.exists()


def test_argv_picks_a_free_port_when_none_given(run):
    port_arg = next(a for a in build_argv(run, 2) if a.startswith("--master_port="))
    assert 1024 <= int(port_arg.split("=")[1]) <= 65535


def test_argv_is_absolute_for_a_relative_run_dir(run, monkeypatch):
    monkeypatch.chdir(run.path.parent)
    assert build_argv(run.run_id, 1)[-1] == str(run.path)


def test_command_preview_round_trips_through_a_shell_split(tmp_path):
    argv = build_argv(tmp_path / "runs with space" / "it's", 2, master_port=29000)
    assert shlex.split(command_preview(argv)) == argv


def test_free_port_is_bindable():
    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def test_multi_host_commands_one_per_node():
    commands = multi_host_commands(4, 2, "10.0.0.1", 29500, run_dir="/shared/runs/r1")
    assert len(commands) == 2
    for rank, command in enumerate(commands):
        argv = shlex.split(command)
        assert argv[0] == "msrun"
        assert {"--worker_num=8", "--local_worker_num=4", "--master_addr=10.0.0.1",
                "--master_port=29500", f"--node_rank={rank}"} <= set(argv)
        assert argv[-2:] == ["--run-dir", "/shared/runs/r1"]
    with pytest.raises(LaunchError, match="port"):
        multi_host_commands(1, 2, "h", 80)


def test_too_many_cpu_workers_names_the_field_and_maximum():
    cores = os.cpu_count()
    check_workers_available(cores)
    with pytest.raises(ConfigError) as info:
        check_workers_available(cores + 1)
    assert "parallel.data_parallel" in info.value.errors
    assert f"at most {cores}" in info.value.errors["parallel.data_parallel"]
    check_workers_available(cores + 1, device="gpu")


def test_run_id_and_create_run_from_config(tmp_path):
    config = Config.from_dict({"run": {"runs_dir": str(tmp_path / "runs")}, "parallel": {"data_parallel": 2},
                               "precision": {"amp_level": "O1"}})
    now = dt.datetime(2026, 11, 29, 10, 15)
    assert run_id_for(config, now) == "20261129-101500_tiny-demo_lora-r8_fp16-O1_dp2"
    first, second = create_run(config, now), create_run(config, now)
    assert second.run_id == first.run_id + "-2"
    assert first.read_status().state == "queued" and "data_parallel: 2" in first.config_path.read_text()


# ---- launching ----------------------------------------------------------------------------------

def test_launch_starts_own_process_group_with_env_and_log(run, fake_python):
    launched = launch(run, 1, env={"FAKE_MODE": "lonely"}, python=fake_python)
    status = wait_for_state(run, "running")
    assert status.pid == launched.pid == status.pgid == os.getpgid(launched.pid)
    assert os.getpgid(launched.pid) != os.getpgrp() and os.getsid(launched.pid) == launched.pid
    assert status.create_time == psutil.Process(launched.pid).create_time()
    assert status.hostname == socket.gethostname() and status.started_at <= status.updated_at
    env = psutil.Process(launched.pid).environ()
    assert env[ENV_RUN_DIR] == str(run.path) and env["PYTHONUNBUFFERED"] == "1" and env["GLOG_v"] == "3"
    assert env["PATH"].split(os.pathsep)[0] == str(Path(fake_python).parent)  # msrun's `python`
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(REPO_ROOT)
    assert launched.argv[:3] == (fake_python, "-m", "core.ranks")
    stop(run, graceful=True, timeout_s=10)
    log = run.log_path.read_text()
    assert log.startswith("=== mindtune launch") and "fake worker running" in log


def test_launch_reads_data_parallel_from_the_config(tmp_path, fake_python):
    config = Config.from_dict({"run": {"runs_dir": str(tmp_path / "runs")}})
    run = create_run(config)
    launched = launch(run, env={"FAKE_MODE": "lonely"}, python=fake_python)
    assert wait_for_state(run, "running").data_parallel == 1 and launched.argv[-1] == str(run.path)
    stop(run, timeout_s=10)


def test_launch_refuses_a_run_that_is_not_queued(run, fake_python):
    run.write_status(state="starting")
    run.write_status(state="failed", reason="earlier attempt")
    with pytest.raises(LaunchError, match="only a queued run"):
        launch(run, 1, python=fake_python)


def test_launch_refuses_a_missing_program(run, tmp_path):
    with pytest.raises(LaunchError, match="not found or not executable"):
        launch(run, 1, python=str(tmp_path / "no-such-python"))
    assert run.read_status().state == "queued"  # refused before anything started


def test_launch_failure_marks_the_run_failed(run, tmp_path):
    not_a_program = tmp_path / "python"
    not_a_program.write_text("this is not a script\n")
    not_a_program.chmod(0o755)
    with pytest.raises(LaunchError, match="could not start"):
        launch(run, 1, python=str(not_a_program))
    status = run.read_status()
    assert status.state == "failed" and "could not start the worker" in status.reason


# ---- stopping -------------------------------------------------------------------------------------

@pytest.mark.slow
def test_graceful_stop_through_control_file_leaves_nothing(run, fake_python):
    status = start(run, fake_python, "obey")
    final = stop(run, graceful=True, timeout_s=10, kill_after_s=0.5)
    assert final.state == "stopped" and final.reason == "stop graceful requested"
    assert run.read_control().stop == "graceful"
    assert all(gone(pid) for pid in status.worker_pids)  # incl. the child that left the group
    assert run_processes(run) == []


@pytest.mark.slow
def test_stop_now_kills_group_and_children(run, fake_python):
    status = start(run, fake_python, "deaf")
    final = stop(run, graceful=False, kill_after_s=0.5)
    assert final.state == "stopped" and final.reason == "worker got SIGTERM"
    assert all(gone(pid) for pid in status.worker_pids)


@pytest.mark.slow
def test_stop_now_records_stopped_when_worker_ignores_sigterm(run, fake_python):
    status = start(run, fake_python, "stubborn")
    began = time.monotonic()
    final = stop(run, graceful=False, kill_after_s=0.5)
    assert time.monotonic() - began < 15  # kill_after_s 0.5, then SIGKILL: ~1 s, more on a loaded machine
    assert final.state == "stopped" and final.reason == "stopped by the user (forced); no checkpoint to resume from"
    assert all(gone(pid) for pid in status.worker_pids)


@pytest.mark.slow
def test_a_forced_stop_records_the_step_of_the_checkpoint_saved_after_the_last_status_line(run, fake_python):
    """Issue 20: Stop now killed the worker after it saved step-3 but before its next status line;
    status.json said step 0 while the console showed the checkpoint's step 3."""
    import numpy as np

    import core.run.ckpt_store as ckpt_store

    start(run, fake_python, "stubborn")  # its last status line: step 0
    weights = {"layer.w": np.ones((4, 4), np.float32)}
    ckpt_store.save_train_checkpoint(run.checkpoints_dir, 3, weights, {"global_step": np.array(3, np.int32)},
                                     {"step": 3}, ("last",))
    final = stop(run, graceful=False, kill_after_s=0.5)
    assert final.state == "stopped" and final.step == 3 and run.read_status().step == 3
    assert final.reason == "stopped by the user (forced); newest resumable checkpoint: step-3"


@pytest.mark.slow
def test_graceful_stop_times_out_then_terminates(run, fake_python):
    status = start(run, fake_python, "stubborn")
    final = stop(run, graceful=True, timeout_s=0.5, kill_after_s=0.5)
    assert final.state == "stopped" and "timed out after 0.5 s" in final.reason
    assert all(gone(pid) for pid in status.worker_pids)


def test_stop_cancels_a_queued_run(run):
    assert stop(run).state == "stopped"


def test_stop_cleans_up_orphans_of_a_finished_run(run):
    for state in ("starting", "running", "finished"):
        run.write_status(state=state)
    orphan = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                              env={**os.environ, ENV_RUN_DIR: str(run.path)}, start_new_session=True)
    try:
        wait_for_env(orphan.pid)
        assert [o.pid for o in find_orphans(run.path.parent)] == [orphan.pid]
        assert stop(run).state == "finished"
        assert orphan.wait(timeout=5) == -signal.SIGTERM
    finally:
        orphan.kill()
        orphan.wait()


def wait_for_env(pid: int) -> None:
    """Wait until a new process's environment can be read (right after exec it may be empty)."""
    deadline = time.monotonic() + 5
    while ENV_RUN_DIR not in psutil.Process(pid).environ() and time.monotonic() < deadline:
        time.sleep(0.01)


# ---- crashes, liveness, orphans -------------------------------------------------------------------

def test_reconcile_marks_a_killed_worker_failed_with_log_errors(run, fake_python):
    status = start(run, fake_python, "lonely")
    assert reconcile(run).state == "running"  # alive: untouched
    os.killpg(status.pgid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while is_alive(status) and time.monotonic() < deadline:
        time.sleep(0.02)
    final = reconcile(run)
    assert final.state == "failed" and final.reason.startswith(CRASH_REASON)
    assert "ValueError: fake failure for the log" in final.reason
    assert final.error_lines == ["Traceback (most recent call last):",
                                    "ValueError: fake failure for the log"]


def test_reconcile_leaves_a_launch_in_progress_alone(run):
    status = run.write_status(state="starting")  # no pid yet: launch() is between status and Popen
    assert reconcile(run).state == "starting"
    atomic_write_json(run.status_path, status.replace(updated_at=time.time() - 60).to_json())
    assert reconcile(run).state == "failed"  # a launch never takes that long


def test_reconcile_reports_errors_of_the_latest_attempt_only(run):
    run.log_path.write_text("=== mindtune launch 1\nRuntimeError: old attempt\n"
                            "=== mindtune launch 2\nstep 5\nMemoryError: out of memory\n")
    run.write_status(state="starting", pid=999999999, create_time=1.0)
    final = reconcile(run)
    assert final.state == "failed" and final.error_lines == ["MemoryError: out of memory"]


def test_reconcile_ignores_runs_on_other_hosts(run):
    run.write_status(state="starting", pid=999999999, create_time=1.0, hostname="elsewhere")
    assert reconcile(run).state == "starting"


def test_is_alive_checks_create_time():
    me = psutil.Process()
    assert is_alive(Status(**process_fields()))
    assert is_alive(Status(pid=me.pid, create_time=me.create_time()))
    assert not is_alive(Status(pid=me.pid, create_time=me.create_time() - 100))
    assert not is_alive(Status(pid=me.pid))
    assert not is_alive(Status())


def test_find_orphans_only_lists_processes_of_runs_that_are_over(tmp_path):
    runs = tmp_path / "runs"
    active, over = RunDir.create(runs, "active", ""), RunDir.create(runs, "over", "")
    for state in ("starting", "running"):
        active.write_status(state=state)
    over.write_status(state="failed")
    procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                              env={**os.environ, ENV_RUN_DIR: str(r.path)}) for r in (active, over)]
    try:
        for p in procs:
            wait_for_env(p.pid)
        orphans = find_orphans(runs)
        assert [(o.pid, o.run_dir.name, o.state) for o in orphans] == [(procs[1].pid, "over", "failed")]
        assert "time.sleep" in orphans[0].cmdline
    finally:
        for p in procs:
            p.kill()
            p.wait()


# ---- a real msrun -----------------------------------------------------------------------------

FAKE_DP_WORKER = """\
import os, sys, time
from core.run.rundir import RunDir

run = RunDir(sys.argv[sys.argv.index("--run-dir") + 1])
if os.environ.get("MS_ROLE") == "MS_WORKER" and os.environ.get("RANK_ID") == "0":
    run.write_status(state="running", extra={"python": sys.executable}, worker_pids=[os.getpid()])
time.sleep(60)
"""


@pytest.mark.slow
def test_msrun_workers_in_their_own_sessions_are_stopped(tmp_path, run, monkeypatch):
    """msrun (which imports MindSpore: ~10 s) starts workers with setsid and `python` from PATH."""
    if os.cpu_count() < 2:
        skips.skip("machine", "2 CPU cores")
    repo = tmp_path / "repo"
    (repo / "core").mkdir(parents=True)
    (repo / "core" / "__init__.py").write_text("")
    for module in ("run", "spec"):  # core's packages used by the worker, linked whole
        (repo / "core" / module).symlink_to(REPO_ROOT / "core" / module)
    (repo / "core" / "ranks.py").symlink_to(REPO_ROOT / "core" / "ranks.py")  # the rank supervisor's entry
    (repo / "core" / "train.py").write_text(FAKE_DP_WORKER)
    monkeypatch.setattr("core.run.launcher.REPO_ROOT", repo)
    launched = launch(run, 2)
    assert Path(launched.argv[0]).name == "msrun"
    status = wait_for_state(run, "running", timeout_s=90)
    assert status.extra["python"] == sys.executable  # the venv's python, not whatever `python` is first on PATH
    processes = run_processes(run)
    sessions = {os.getsid(p.pid) for p in processes}
    assert len(processes) >= 4 and len(sessions) >= 3  # msrun's own + one per worker
    final = stop(run, graceful=False, kill_after_s=2)
    assert final.state == "stopped" and final.reason == "stopped by the user (forced); no checkpoint to resume from"
    assert all(gone(p.pid) for p in processes) and run_processes(run) == []
    assert {"worker_0.log", "worker_1.log"} <= {p.name for p in run.logs_dir.iterdir()}
