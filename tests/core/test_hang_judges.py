"""The judges of a hung rank (each rank's supervisor, a failing rank's worker, the console's
watcher) against what made one CI run report "rank 0 is gone" 34 s after rank 1 was stopped
instead of rank 1's hang after 6 s: a judge that claimed the hang and died before writing it, a
checkpoint listing that changes while a verdict names the newest one, a beat that names a phase
without a hang watch. Real processes (a stopped `sleep`), hand-written rank records; no MindSpore,
except in one slow test whose real worker hangs in its second step."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import psutil
import pytest

import core.run.launcher as launcher
import core.run.ranks as ranks
from core.run.rundir import RunDir

TIMEOUT_S = 6.0


@pytest.fixture
def run(tmp_path: Path) -> RunDir:
    run = RunDir.create(tmp_path / "runs", "20261201-210000_tiny-demo_lora-r8_fp32_dp2", "method: lora\n")
    run.write_status(state="starting")
    run.write_status(state="running", pid=os.getpid(), create_time=psutil.Process().create_time())
    return run


@pytest.fixture
def sleepers():
    started = []

    def start() -> subprocess.Popen:
        process = subprocess.Popen(["sleep", "60"])
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()
        process.wait()


def rank_record(run: RunDir, rank: int, process: subprocess.Popen | None, *, phase: str, beat_age_s: float,
                state: str = "running", step: int = 7) -> None:
    """What rank `rank`'s supervisor and worker would have written: its record and its last beat."""
    pid = process.pid if process is not None else 999_999_999
    created = psutil.Process(pid).create_time() if process is not None else 1.0
    run.ranks_dir.mkdir(exist_ok=True)
    record = {"rank": rank, "world": 2, "attempt": 1, "pid": pid, "supervisor_pid": 999_999_998,
              "hostname": socket.gethostname(), "create_time": created, "started_at": time.time() - 60,
              "state": state}
    if state == "exited":
        record.update(exit_signal=signal.SIGKILL, ended_at=time.time() - 2)
    ranks.rank_file(run, rank).write_text(json.dumps(record))
    ranks.beat_file(run, rank).write_text(json.dumps({"rank": rank, "attempt": 1, "pid": pid, "step": step,
                                                      "phase": phase, "time": time.time() - beat_age_s,
                                                      "timeout_s": TIMEOUT_S}))


def freeze(process: subprocess.Popen) -> None:
    """SIGSTOP, and wait until the kernel shows it stopped (the signal is delivered asynchronously)."""
    os.kill(process.pid, signal.SIGSTOP)
    deadline = time.monotonic() + 5
    while not ranks.process_state(process.pid).startswith("stopped"):
        assert time.monotonic() < deadline, ranks.process_state(process.pid)
        time.sleep(0.005)


def dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def test_a_stopped_rank_is_hung_in_any_phase_a_running_one_only_in_a_watched_phase(run, sleepers):
    """A beat that says `compile` (or `setup`) keeps the hang watch off while the process works;
    a process that is stopped (SIGSTOP) makes no progress whatever its beat says."""
    one, two = sleepers(), sleepers()
    rank_record(run, 0, one, phase="compile", beat_age_s=30)
    rank_record(run, 1, two, phase="setup", beat_age_s=30)
    assert ranks.hung_rank(run, 1) is None  # long compile / setup: no verdict
    freeze(two)
    hung = ranks.hung_rank(run, 1)
    assert hung is not None and hung["rank"] == 1
    rank_record(run, 1, two, phase="setup", beat_age_s=TIMEOUT_S - 2)
    assert ranks.hung_rank(run, 1) is None  # stopped, but not for longer than the timeout yet
    rank_record(run, 0, one, phase="train", beat_age_s=TIMEOUT_S + 1)
    assert ranks.hung_rank(run, 1)["rank"] == 1  # the stopped one is blamed, not the one waiting for it


@pytest.mark.slow
def test_the_second_step_is_watched(tmp_path):
    """The worker beats `compile` before its first step (no hang watch while its graph compiles) and
    `train` after every step, so a hang in the second step is seen. A real worker whose second step
    never returns (core.train's test hook: it sleeps there, so the process is running, not stopped,
    and only its beat's phase can get it judged) is ended as hung, its last beat step 1's `train`.
    A build that kept beating `compile` into the second step would never judge it: the run would
    still be running at the deadline."""
    from core.spec.config import load_config
    from core.run.records import TERMINAL_STATES
    from core.engine.trainer import ENV_TEST_HANG_AT_STEP
    from tests.core.tiny_setup import make_workspace
    config = load_config(make_workspace(tmp_path), ["train.max_steps=1000", "train.eval_every=1000",
                                                    "eval.downstream=false", "train.log_every=1",
                                                    f"parallel.hang_timeout_s={TIMEOUT_S:g}"])
    run = launcher.create_run(config)
    launched = launcher.launch(run, env={ENV_TEST_HANG_AT_STEP: "2"})
    try:
        deadline, status = time.monotonic() + 240, run.read_status()
        while time.monotonic() < deadline and not (status.state in TERMINAL_STATES and launched.poll() is not None):
            status = launcher.watch(run)  # as the console does, every half second
            time.sleep(launcher.WATCH_EVERY_S)
    finally:
        left = launcher.run_processes(run)
        if left:
            launcher.teardown(run)
    assert status.state == "failed" and status.failure_kind == "hang", (status, run.log_path.read_text()[-3000:])
    assert status.reason.startswith("the worker stopped making progress: no step for ")
    assert "its last step was 1 (train)" in status.reason and "process state: stopped" not in status.reason
    steps = [json.loads(line)["step"] for line in run.metrics_path.read_text().splitlines() if '"kind":"train"' in line]
    assert steps == [1]  # step 1 ran and was logged; step 2 never ended
    assert not left, left


def test_a_beat_is_replaced_whole(tmp_path):
    run = RunDir.create(tmp_path / "runs", "20261201-210000_tiny-demo_lora-r8_fp32_dp1", "method: lora\n")
    beat = ranks.Heartbeat(run, 0, 1, TIMEOUT_S)
    beat.beat(3, "train")
    first = ranks.beat_file(run, 0).stat().st_ino
    beat.beat(4, "save")
    # a new file renamed over the old one (not the old one truncated and rewritten, which a SIGSTOP
    # in between would leave empty for good)
    assert ranks.beat_file(run, 0).stat().st_ino != first
    assert json.loads(ranks.beat_file(run, 0).read_text())["step"] == 4
    assert sorted(p.name for p in run.ranks_dir.iterdir()) == ["rank-0.beat"]  # no temp left


def test_a_judge_that_died_after_claiming_is_taken_over_by_the_watcher(run, sleepers):
    """The judge (rank 1's supervisor) claimed rank 1's hang, killed it and died before writing the
    verdict: rank 1's record says killed by SIGKILL, rank 0 waits for it. The console's watcher
    takes the claim over and reports rank 1's hang, not rank 0's, and not a death by SIGKILL."""
    waiting = sleepers()
    rank_record(run, 0, waiting, phase="train", beat_age_s=TIMEOUT_S + 10)
    rank_record(run, 1, None, phase="train", beat_age_s=TIMEOUT_S + 10, state="exited", step=5)
    claim = run.ranks_dir / ".hang-verdict-1"
    claim.write_text(json.dumps({"pid": dead_pid(), "rank": 1}))
    os.utime(claim, (time.time() - 3, time.time() - 3))
    assert launcher._rank_death_verdict(run, run.read_status()) is None  # claimed: not a death to report
    status = launcher.watch(run)
    assert status.state == "failed" and status.failure_kind == "hang" and status.failed_rank == 1, status
    assert status.reason.startswith("rank 1 stopped making progress: no step for ")
    assert "its last step was 5 (train)" in status.reason


def test_a_taken_over_verdict_is_in_the_dead_judges_words(run, sleepers):
    """The claim holds the verdict as its judge saw it (rank 1 stopped by SIGSTOP, 6 s without a
    step): the taker writes that, not rank 1's state after the judge killed it ("gone")."""
    waiting = sleepers()
    rank_record(run, 0, waiting, phase="train", beat_age_s=TIMEOUT_S + 10)
    rank_record(run, 1, None, phase="train", beat_age_s=TIMEOUT_S + 10, state="exited", step=5)
    words = ranks.hang_verdict(1, 2, {"step": 5, "phase": "train", "timeout_s": TIMEOUT_S}, 6.2,
                               "stopped (SIGSTOP or a debugger)")
    claim = run.ranks_dir / ".hang-verdict-1"
    claim.write_text(json.dumps({"pid": dead_pid(), "rank": 1, "reason": words}))
    os.utime(claim, (time.time() - 3, time.time() - 3))
    status = launcher.watch(run)
    assert status.failure_kind == "hang" and status.failed_rank == 1, status
    assert status.reason.startswith("rank 1 stopped making progress: no step for 6 s (parallel.hang_timeout_s = 6)")
    assert "process state: stopped (SIGSTOP or a debugger)" in status.reason


def test_a_live_judge_keeps_its_claim_until_the_takeover_time(run, sleepers):
    waiting = sleepers()
    rank_record(run, 0, waiting, phase="train", beat_age_s=TIMEOUT_S + 10)
    claim = run.ranks_dir / ".hang-verdict-1"
    claim.write_text(json.dumps({"pid": os.getpid(), "rank": 0}))  # alive, and just now
    launcher.watch(run)
    assert run.read_status().state == "running"
    os.utime(claim, (time.time() - ranks.CLAIM_TAKEOVER_S - 1,) * 2)
    assert launcher.watch(run).failure_kind == "hang"


def test_when_everything_is_gone_an_abandoned_claim_is_still_the_verdict(run):
    """msrun tore the group down after the judge died: no process is left. reconcile reports the
    claimed hang, not "rank 0 is gone and left no exit status"."""
    rank_record(run, 0, None, phase="train", beat_age_s=40)
    rank_record(run, 1, None, phase="train", beat_age_s=40, state="exited", step=5)
    (run.ranks_dir / ".hang-verdict-1").write_text(json.dumps({"pid": dead_pid(), "rank": 1}))
    run.write_status(pid=999_999_999, create_time=1.0)
    status = launcher.reconcile(run)
    assert status.state == "failed" and status.failure_kind == "hang" and status.failed_rank == 1, status


def test_a_verdict_is_written_when_the_newest_checkpoint_cannot_be_named(run, sleepers, monkeypatch):
    """A checkpoint pruned while the verdict lists them must not cost the verdict."""
    def listing_changed(_run):
        raise FileNotFoundError(2, "No such file or directory", "checkpoints/step-4/weights.safetensors")
    monkeypatch.setattr(ranks, "resumable_note", listing_changed)
    stopped = sleepers()
    rank_record(run, 1, stopped, phase="train", beat_age_s=TIMEOUT_S + 1)
    freeze(stopped)
    status = ranks.judge_hang(run, ranks.hung_rank(run, 1))
    assert status is not None and status.failure_kind == "hang" and status.failed_rank == 1
    assert "the newest resumable checkpoint could not be determined (FileNotFoundError" in status.reason
    assert stopped.wait(timeout=5) == -signal.SIGKILL


def test_a_judge_that_fails_gives_its_claim_back(run, sleepers, monkeypatch):
    def broken(*_args, **_kwargs):
        raise RuntimeError("disk vanished")
    monkeypatch.setattr(ranks, "write_verdict", broken)
    stopped = sleepers()
    rank_record(run, 1, stopped, phase="train", beat_age_s=TIMEOUT_S + 1)
    with pytest.raises(RuntimeError, match="disk vanished"):
        ranks.judge_hang(run, ranks.hung_rank(run, 1))
    assert not ranks.hang_claimed(run, 1)  # the next judge (the other supervisor, the console) can judge


def test_a_supervisor_outlives_a_failing_check(run, monkeypatch, capsys):
    monkeypatch.setenv("RANK_ID", "1")
    supervisor = ranks.Supervisor(str(run.path), ["--run-dir", str(run.path)])

    def broken(_child):
        raise ValueError("a beat from the future")
    monkeypatch.setattr(supervisor, "_judge_progress", broken)
    supervisor._check_progress(None)
    supervisor._check_progress(None)
    assert supervisor.check_failed
    assert capsys.readouterr().err.count("ValueError: a beat from the future") == 1  # said once, not every poll


@pytest.mark.parametrize("supervisor_wrote", [True, False], ids=["rank-exited", "rank-and-supervisor-gone"])
def test_ranks_killed_by_stop_now_end_the_run_stopped(run, supervisor_wrote):
    """Stop now SIGKILLs every process of the run; the console's watcher may look before the stop
    writes its verdict, and find a rank killed by SIGKILL (its supervisor recorded it) or a rank gone
    with its supervisor. Both are the user's stop, not a crash: a CI run once ended this 'failed'."""
    run.write_control(stop="now")
    run.write_status(state="stopping")
    rank_record(run, 0, None, phase="train", beat_age_s=1, state="exited" if supervisor_wrote else "running")
    status = launcher.watch(run)
    assert (status.state, status.failure_kind, status.reason) == (
        "stopped", None, "stopped by the user (forced); no checkpoint to resume from"), status
    run.write_control(stop=None)


def test_a_rank_that_dies_without_a_stop_request_is_still_a_failure(run):
    rank_record(run, 0, None, phase="train", beat_age_s=1, state="exited")
    status = launcher.watch(run)
    assert (status.state, status.failure_kind, status.exit_signal) == ("failed", "rank_died", "SIGKILL"), status
