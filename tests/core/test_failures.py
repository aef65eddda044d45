"""Failures injected into real workers, each named for what it is: a stopped (SIGSTOP) worker, a
worker killed by the kernel's OOM killer in a memory cgroup, a full disk (a tiny tmpfs) during a
save, a flipped byte in the checkpoint a resume loads, fp16 gradients that keep overflowing, Stop
now, and a hung data-parallel rank. Every run is launched as the console launches it (under its
rank supervisor) and watched with `core.run.launcher.watch` every half second, as the console does."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
import yaml

import core.run.ckpt_store as ckpt_store
import core.run.launcher as launcher
import core.run.ranks as ranks
from core.spec.config import load_config
from core.run.records import TERMINAL_STATES
from core.run.rundir import RunDir
from core.train import main as train_main

from tests import skips
from tests.core.tiny_setup import make_workspace
from tests.waiting import wait_for_run

pytestmark = pytest.mark.slow
LONG = ("train.max_steps=100000", "train.eval_every=100000", "eval.downstream=false", "train.log_every=1")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    return make_workspace(tmp_path_factory.mktemp("ws"))


@pytest.fixture(autouse=True)
def nothing_left_behind(workspace):
    yield
    runs = Path(yaml.safe_load(workspace.read_text())["run"]["runs_dir"])
    for run in runs.iterdir() if runs.is_dir() else []:
        if (run / "status.json").is_file() and not run.is_symlink():
            left = launcher.run_processes(run)
            if left:
                launcher.teardown(run)
            assert not left, f"{run.name} left {left}"


def create(workspace: Path, *overrides: str) -> RunDir:
    return launcher.create_run(load_config(workspace, list(overrides)))


def watch_until_over(run: RunDir, launched, timeout_s: float = 300.0) -> dict:
    """What the console does: launcher.watch every half second until the run is over and nothing of it is left."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = launcher.watch(run)
        if status.state in TERMINAL_STATES and launched.process.poll() is not None \
                and not launcher.run_processes(run):
            return run.read_status()
        time.sleep(launcher.WATCH_EVERY_S)
    raise AssertionError(f"run not over within {timeout_s} s: {run.read_status()}\n{run.log_path.read_text()[-3000:]}")


def wait_until(run: RunDir, predicate, what: str, timeout_s: float = 240.0):
    """`predicate()` while the run goes on: a run that ends first fails the wait with its own reason."""
    return wait_for_run(run, predicate, what, timeout_s, every_s=0.1)


def newest_run(workspace: Path) -> RunDir:
    """The run that `python -m core.train --config workspace` made last (older versions' symlinks aside)."""
    runs = Path(yaml.safe_load(workspace.read_text())["run"]["runs_dir"])
    return RunDir(max((p for p in runs.iterdir() if not p.is_symlink()), key=os.path.getmtime))


def trained(run: RunDir, steps: int = 1) -> bool:
    if not run.metrics_path.exists():
        return False
    return sum(1 for line in run.metrics_path.read_text().splitlines() if '"kind":"train"' in line) >= steps


def worker_pid(run: RunDir, rank: int = 0) -> int:
    record = wait_until(run, lambda: ranks.read_json(ranks.rank_file(run, rank)), f"rank {rank} record", 120)
    return record["pid"]


# ---- a hung worker ----------------------------------------------------------------------------------

def test_a_stopped_worker_is_named_as_making_no_progress(workspace):
    run = create(workspace, *LONG, "parallel.hang_timeout_s=3")
    launched = launcher.launch(run)
    wait_until(run, lambda: trained(run, 3), "three steps")
    pid = worker_pid(run)
    os.kill(pid, signal.SIGSTOP)
    stopped_at = time.monotonic()
    status = watch_until_over(run, launched)
    detected = status.ended_at - (time.time() - (time.monotonic() - stopped_at))
    print(f"\nhang detected {detected:.1f} s after SIGSTOP (hang_timeout_s 3): {status.reason}")
    assert status.state == "failed" and status.failure_kind == "hang"
    assert status.reason.startswith("the worker stopped making progress: no step for ")
    assert "(parallel.hang_timeout_s = 3)" in status.reason and "process state: stopped (SIGSTOP" in status.reason
    # not before hang_timeout_s (its last beat was up to a step before the SIGSTOP); the upper bound is
    # the timeout plus the watcher's latency on a loaded 2-core machine (~1 s quiet, printed above)
    assert 2.5 <= detected <= 15.0
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


# ---- out of memory ------------------------------------------------------------------------------------

def _memory_cgroup(limit_bytes: int, name: str) -> tuple[Path, Path] | None:
    """A child memory cgroup of this process's own (v1 or v2) with `limit_bytes`; (folder, procs file)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            base, limit_file = Path("/sys/fs/cgroup/memory") / path.lstrip("/"), "memory.limit_in_bytes"
        elif controllers == "" and (Path("/sys/fs/cgroup") / path.lstrip("/") / "memory.max").exists():
            base, limit_file = Path("/sys/fs/cgroup") / path.lstrip("/"), "memory.max"
        else:
            continue
        folder = base / name
        try:
            folder.mkdir(exist_ok=True)
            (folder / limit_file).write_text(str(limit_bytes))
        except OSError:
            continue
        return folder, folder / "cgroup.procs"
    return None


def test_an_oom_kill_in_a_memory_cgroup_is_named_with_advice(workspace, tmp_path):
    limit = 250 * 2**20  # this run's private memory peaks at ~285 MB (its RSS, shared libraries included, ~560 MB)
    cgroup = _memory_cgroup(limit, f"mindtune-test-oom-{os.getpid()}")
    if cgroup is None:
        skips.skip("root", "no memory cgroup can be made here (root and a memory controller)")
    folder, procs = cgroup
    wrapper = tmp_path / "python"  # enters the cgroup, then becomes the real interpreter
    wrapper.write_text(f"#!{sys.executable}\nimport os, sys\nopen({str(procs)!r}, 'w').write(str(os.getpid()))\n"
                       f"os.execv({sys.executable!r}, [{sys.executable!r}] + sys.argv[1:])\n")
    wrapper.chmod(0o755)
    try:
        run = create(workspace, *LONG)
        launched = launcher.launch(run, python=str(wrapper))
        status = watch_until_over(run, launched)
    finally:
        for _ in range(50):
            try:
                folder.rmdir()
                break
            except OSError:
                time.sleep(0.1)
    print(f"\nOOM: {status.reason}")
    record = ranks.read_json(ranks.rank_file(run, 0))
    assert record["exit_signal"] == signal.SIGKILL and record["memory_limit_mb"] == 250.0
    assert status.state == "failed" and status.failure_kind == "oom"
    assert status.reason.startswith("out of memory: the worker was killed by SIGKILL, by the kernel's "
                                       "out-of-memory killer (the memory cgroup ")
    assert "counted 1 OOM kill(s) while it ran" in status.reason
    assert "lower train.micro_batch_size" in status.reason and "method=lora" in status.reason


# ---- a full disk ------------------------------------------------------------------------------------------

def test_a_full_disk_during_a_save_is_disk_full_and_keeps_the_checkpoint_before(workspace):
    run = create(workspace, *LONG, "train.save_every=2")
    # a 128 KiB tmpfs holds one checkpoint of this run (~70 KiB of pages) but not two
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=128k", "tmpfs", str(run.checkpoints_dir)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        skips.skip("root", f"cannot mount a tmpfs here ({mounted.stderr.strip() or 'not root'})")
    try:
        launched = launcher.launch(run)
        status = watch_until_over(run, launched)
        print(f"\ndisk full: {status.reason}")
        assert status.state == "failed" and status.failure_kind == "disk_full"
        assert status.reason.startswith(f"disk full: saving checkpoint step 4 in {run.checkpoints_dir} needs ")
        assert "earlier checkpoints are intact (last -> step-2)" in status.reason
        assert sorted(p.name for p in run.checkpoints_dir.iterdir()) == ["last", "step-2"]
        assert ckpt_store.verify_checkpoint(run.checkpoints_dir / "last") == "verified"
        assert status.resumable_checkpoint == "step-2"
    finally:
        subprocess.run(["umount", "-l", str(run.checkpoints_dir)], check=False)


# ---- a corrupt checkpoint ------------------------------------------------------------------------------

def test_resume_refuses_a_flipped_byte_and_names_the_good_checkpoint(workspace):
    done = create(workspace, "train.max_steps=4", "train.save_every=2", "train.eval_every=100", "eval.downstream=false")
    done = RunDir(watch_until_over(done, launcher.launch(done)) and Path(os.path.realpath(done.path)))  # renamed at its end
    target = done.checkpoints_dir / "step-4" / ckpt_store.WEIGHTS_FILE
    data = bytearray(target.read_bytes())
    data[-5] ^= 0x10
    target.write_bytes(bytes(data))
    code = train_main(["--config", str(workspace), f"run.resume={done.checkpoints_dir / 'step-4'}", "train.max_steps=6"])
    assert code == 1
    resumed = newest_run(workspace)
    status = resumed.read_status()
    print(f"\ncorrupt checkpoint: {status.reason}")
    assert status.state == "failed" and status.failure_kind == "checkpoint"
    assert status.reason.startswith(f"{target}: sha256 ")
    assert f"Checkpoints that verify: step-2; to resume from one, name it exactly: " \
           f"run.resume={done.checkpoints_dir / 'step-2'}" in status.reason
    assert not resumed.metrics_path.exists() or '"kind":"train"' not in resumed.metrics_path.read_text()
    # an export of it is refused alike, and leaves no export behind
    from core.engine.export import export_run
    for fmt in ("peft", "merged"):
        with pytest.raises(ckpt_store.CheckpointCorrupt, match=f"^{target}: sha256 "):
            export_run(done.path, "last", fmt)
    assert not list(done.export_dir.iterdir())
    # naming the good one, as the message says, resumes
    assert train_main(["--config", str(workspace), f"run.resume={done.checkpoints_dir / 'step-2'}",
                       "train.max_steps=3", "eval.downstream=false"]) == 0


def test_leftovers_of_a_killed_save_are_swept_when_the_worker_starts(workspace):
    run = create(workspace, "train.max_steps=3", "train.eval_every=100", "eval.downstream=false")
    leftover = run.checkpoints_dir / ".tmp-step-6-999999"
    leftover.mkdir()
    (leftover / ckpt_store.WEIGHTS_FILE).write_bytes(b"\0" * 5000)
    (run.checkpoints_dir / ".old-step-2-999998").mkdir()
    status = watch_until_over(run, launcher.launch(run))
    assert status.state == "finished"
    assert not [p for p in Path(run.checkpoints_dir).iterdir() if p.name.startswith(".")]
    log = RunDir(run.path.parent / status.run_id).log_path.read_text()
    assert "checkpoints: swept checkpoints/.old-step-2-999998 (" in log
    assert "checkpoints: swept checkpoints/.tmp-step-6-999999 (4.9 KB, left by an interrupted write)" in log


# ---- fp16 loss scale ------------------------------------------------------------------------------

def test_fp16_gradients_overflowing_every_step_say_so(workspace):
    code = train_main(["--config", str(workspace), "precision.amp_level=O2", "precision.compute_dtype=float16",
                       "precision.initial_loss_scale=1e30", "train.max_steps=60", "train.eval_every=1000",
                       "eval.downstream=false"])
    assert code == 1
    run = newest_run(workspace)
    status = run.read_status()
    print(f"\nloss scale: {status.reason}")
    assert status.state == "failed" and status.failure_kind == "loss_scale"
    assert status.reason.startswith("fp16 loss scale collapse: the gradients overflowed 25 times in a row "
                                       "(steps 1-25), every loss was finite; the dynamic loss scale fell from 1e+30 to ")
    assert "Use fp32 (precision.amp_level=O0) or a lower train.learning_rate." in status.reason
    losses = [json.loads(line)["loss"] for line in run.metrics_path.read_text().splitlines() if '"kind":"train"' in line]
    assert losses and all(abs(loss) < 100 for loss in losses)  # finite all along


# ---- Stop now ----------------------------------------------------------------------------------------------

def test_stop_now_of_a_worker_that_cannot_answer_is_stopped_not_failed(workspace):
    """The worker is frozen (SIGSTOP) so SIGTERM cannot save anything: Stop now escalates to
    SIGKILL. The console's watcher runs all along (it used to mark the run failed first)."""
    run = create(workspace, *LONG, "train.save_every=2")
    launched = launcher.launch(run)
    wait_until(run, lambda: (run.checkpoints_dir / "last").exists() and trained(run, 3), "a checkpoint")
    os.kill(worker_pid(run), signal.SIGSTOP)
    watcher_done = threading.Event()

    def console_watcher():
        while not watcher_done.is_set():
            launcher.watch(run)
            time.sleep(launcher.WATCH_EVERY_S)

    thread = threading.Thread(target=console_watcher, daemon=True)
    thread.start()
    try:
        final = launcher.stop(run, graceful=False)
    finally:
        watcher_done.set()
        thread.join()
    launched.process.wait(timeout=30)
    status = run.read_status()
    last = os.readlink(run.checkpoints_dir / "last")
    print(f"\nstop now: {status.reason}")
    assert final.state == status.state == "stopped"
    assert status.reason == f"stopped by the user (forced); newest resumable checkpoint: {last}"
    assert status.resumable_checkpoint == last and status.failure_kind is None
    assert ckpt_store.verify_checkpoint(run.checkpoints_dir / last) == "verified"


# ---- a hung data-parallel rank ------------------------------------------------------------------------------

def test_a_stopped_data_parallel_rank_is_named_and_the_group_torn_down(workspace):
    if os.cpu_count() < 2:
        skips.skip("machine", "2 CPU cores")
    run = create(workspace, *LONG, "parallel.data_parallel=2", "train.micro_batch_size=2", "parallel.hang_timeout_s=6")
    launched = launcher.launch(run)
    wait_until(run, lambda: trained(run, 3), "three steps", 300)
    pid = worker_pid(run, 1)
    os.kill(pid, signal.SIGSTOP)
    stopped = time.time()
    status = watch_until_over(run, launched)
    print(f"\nDP hang detected {status.ended_at - stopped:.1f} s after SIGSTOP, all processes gone "
          f"{time.time() - stopped:.1f} s after: {status.reason}")
    assert status.state == "failed" and status.failure_kind == "hang" and status.failed_rank == 1
    assert status.reason.startswith("rank 1 stopped making progress: no step for ")
    assert "process state: stopped (SIGSTOP" in status.reason
    assert 5.0 <= status.ended_at - stopped <= 20.0  # before MindSpore's own ~30 s timeout (its last beat was
    # up to a step before the SIGSTOP), with room for the watcher's latency on a loaded 2-core machine


# ---- metrics after a kill and a resume ------------------------------------------------------------------------

def test_steps_logged_again_after_a_kill_and_resume_count_once(workspace):
    """kill -9 of a worker some steps past its last checkpoint, then a resume from that checkpoint (as
    the console's Resume does): the lost steps are logged again by attempt 2; every record names its
    attempt, and the readers (the file's current records, the charts) hold each step once, attempt 2's."""
    from app.charts.metrics import RunCharts
    from core.run.atomic import atomic_write
    from core.run.records import EvalRecord, ResumeEvent, TrainRecord, current_records
    run = create(workspace, "train.max_steps=40", "train.save_every=5", "train.eval_every=10", "train.log_every=1",
                 "eval.downstream=false", "early_stopping.enabled=false")
    launched = launcher.launch(run)
    pid = worker_pid(run)
    while True:  # freeze it where steps past the last checkpoint are logged, then kill it there
        wait_until(run, lambda: run.checkpoint_step("last") and trained(run, run.checkpoint_step("last") + 2), "steps")
        os.kill(pid, signal.SIGSTOP)
        saved = run.checkpoint_step("last")
        logged = max(r.step for r in run.metrics_reader().read_new() if isinstance(r, TrainRecord))
        if saved and logged >= saved + 2 and not list(run.checkpoints_dir.glob(".tmp-*")):
            break
        os.kill(pid, signal.SIGCONT)
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    first = watch_until_over(run, launched)
    assert first.state == "failed" and first.exit_signal == "SIGKILL", first
    config = load_config(run.config_path).with_updates({"run.resume": str(run.checkpoints_dir / "last")})
    run.restart_for_resume()
    atomic_write(run.config_path, config.to_yaml())
    status = watch_until_over(run, launcher.launch(run))
    run = RunDir(Path(os.path.realpath(run.path)).parent / status.run_id)
    assert status.state == "finished" and status.attempt == 2, status
    records = run.metrics_reader().read_new()
    assert {r.generation for r in records} == {1, 2}
    resume = next(r for r in records if isinstance(r, ResumeEvent))
    assert resume.generation == 2 and resume.step == saved
    steps = {g: [r.step for r in records if isinstance(r, TrainRecord) and r.generation == g] for g in (1, 2)}
    assert steps[1] == list(range(1, logged + 1)) and steps[2] == list(range(saved + 1, 41))
    again = sorted(set(steps[1]) & set(steps[2]))
    assert again == list(range(saved + 1, logged + 1))  # logged twice in the file
    current = current_records(records)
    trains = [r for r in current if isinstance(r, TrainRecord)]
    assert [r.step for r in trains] == list(range(1, 41))
    assert all(r.generation == (2 if r.step > saved else 1) for r in trains)
    evals = [r.step for r in current if isinstance(r, EvalRecord) and not r.base]
    assert evals == [10, 20, 30, 40]
    charts = RunCharts(run.path)
    charts.update()
    for name in ("loss", "lr", "tokens_per_s", "memory", "val_loss"):
        frame = charts.frames[name]
        for series, points in frame.groupby("series"):
            assert points.step.is_unique, (name, series, list(points.step))
    loss = charts.frames["loss"][lambda f: f.series == "loss"]
    assert list(loss.step) == list(range(1, 41))
    by_step = {r.step: r.loss for r in trains}
    assert list(loss.value) == [by_step[s] for s in range(1, 41)]
    # resume is exact: attempt 2 computed the same losses for the steps attempt 1 had logged
    lost = {r.step: r.loss for r in records if isinstance(r, TrainRecord) and r.generation == 1 and r.step in again}
    print(f"\nkilled at step {logged} (checkpoint step-{saved}); steps {again} logged twice; "
          f"max |loss difference| {max(abs(lost[s] - by_step[s]) for s in again):.2e}")
    # to 1e-5, as every other resume test (tests/core/test_train.py): the same checkpoint, data
    # position and compiled step give the same losses (measured: bit-identical; it held 1e-4 x |loss|
    # before, with no reason)
    assert all(abs(lost[s] - by_step[s]) <= 1e-5 for s in again)
