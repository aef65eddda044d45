"""The console's watcher against real failures: a data-parallel rank killed with SIGKILL is seen
within 5 s (named with its signal and its own log's tail), the rest of the group is torn down, and
msrun's scheduler writes nothing after; Stop now ends a run as stopped, naming the checkpoint to
resume from. Slow: msrun starts two MindSpore workers."""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

import core.run.launcher as launcher
import core.run.ranks as ranks
from core.spec.config import load_config
from core.run.records import TERMINAL_STATES
from core.run.rundir import RunDir

from app.context import Console
from app.settings import Settings

from tests import skips
from tests.waiting import wait_for, wait_for_run

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def console(tmp_path_factory) -> Console:
    from tests.core.tiny_setup import make_workspace

    root = tmp_path_factory.mktemp("console")
    config = make_workspace(root)
    settings = Settings(models_dirs=(root,), data_dirs=(root / "data",), runs_dir=root / "runs",
                        configs_dir=root / "no-configs")
    console = Console.create(settings)
    console.workspace = config
    return console


def _start(console: Console, *overrides: str) -> RunDir:
    config = load_config(console.workspace, ["train.max_steps=100000", "train.eval_every=100000",
                                             "eval.downstream=false", "train.log_every=1", *overrides])
    return console.jobs.run_dir(console.jobs.start(config, owner=None).run_id)


def _wait(predicate, what: str, timeout_s: float = 300.0):
    return wait_for(predicate, what, timeout_s, every_s=0.05)


def _steps(run: RunDir) -> int:
    return run.metrics_path.read_text().count('"kind":"train"') if run.metrics_path.exists() else 0


def test_a_killed_data_parallel_rank_is_seen_within_seconds(console):
    if os.cpu_count() < 2:
        skips.skip("machine", "2 CPU cores")
    run = _start(console, "parallel.data_parallel=2", "train.micro_batch_size=2")
    wait_for_run(run, lambda: _steps(run) >= 3, "three steps", 300, every_s=0.05)
    record = ranks.read_json(ranks.rank_file(run, 1))
    scheduler = [p for p in launcher.run_processes(run) if "MS_SCHED" == p.environ().get("MS_ROLE")]
    assert len(scheduler) == 1
    os.kill(record["pid"], signal.SIGKILL)
    killed = time.time()
    status = _wait(lambda: (s := run.read_status()).state in TERMINAL_STATES and s, "the failure", 30)
    detected = time.time() - killed
    _wait(lambda: not launcher.run_processes(run), "the group torn down", 30)
    gone = time.time() - killed
    print(f"\nrank 1 SIGKILL: failed after {detected:.2f} s, no process left after {gone:.2f} s: {status.reason}")
    # the watchers see it in about a second on a quiet machine (printed above); 15 s holds on a loaded
    # 2-core one and still tells it from MindSpore's own ~30 s timeout
    assert detected < 15.0 and gone < 15.0
    assert status.state == "failed" and status.failure_kind == "rank_died" and status.failed_rank == 1
    last = os.readlink(run.checkpoints_dir / "last") if (run.checkpoints_dir / "last").is_symlink() else None
    assert status.reason == ("rank 1 was killed by SIGKILL (no sign of the out-of-memory killer); "
                                + (f"newest resumable checkpoint: {last}" if last else "no checkpoint to resume from"))
    assert status.exit_signal == "SIGKILL"
    worker_log = (run.path / "logs" / "worker_1.log").read_text().splitlines()
    assert status.error_lines == [line.rstrip() for line in worker_log if line.strip()][-20:]
    assert "rank 1 of 2: pid " in "\n".join(status.error_lines)
    assert not scheduler[0].is_running() or scheduler[0].status() == "zombie"
    time.sleep(3)  # what is left of msrun and its scheduler could only have written by now
    assert run.read_status() == status
    console.jobs.wait_for_watchers(30)


def test_stop_now_is_stopped_and_names_the_checkpoint(console):
    run = _start(console, "train.save_every=3")
    wait_for_run(run, lambda: (run.checkpoints_dir / "last").exists() and _steps(run) >= 4, "a checkpoint", 300, every_s=0.05)
    os.kill(ranks.read_json(ranks.rank_file(run, 0))["pid"], signal.SIGSTOP)  # it cannot save: escalation to SIGKILL
    message = console.jobs.request_stop(run.run_id, graceful=False)
    assert message == f"{run.run_id}: stopping now"
    console.jobs.wait_for_stops(30)
    console.jobs.wait_for_watchers(30)
    status = run.read_status()
    last = os.readlink(run.checkpoints_dir / "last")
    assert (status.state, status.failure_kind, status.reason) == (
        "stopped", None, f"stopped by the user (forced); newest resumable checkpoint: {last}")
    assert not launcher.run_processes(run)
