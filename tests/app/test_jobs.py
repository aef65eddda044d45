"""app.runs.jobs: one launch per request, resume of a run that is over, stops in the background, reattach."""
from __future__ import annotations

import os
import threading
import time

import pytest

from core.spec.config import Config, ConfigError, load_config
from core.run.rundir import RunDir

from app.runs.jobs import JobError, JobManager

from tests.app.test_monitor_callbacks import make_run


def test_same_config_twice_quickly_is_one_run(console, fake_launcher):
    config = Config().with_updates({"run.runs_dir": str(console.runs_dir)})
    first, second = console.jobs.start(config), console.jobs.start(config)
    assert first.started and not second.started and first.run_id == second.run_id
    assert len(fake_launcher.launched) == 1
    other = console.jobs.start(config.with_updates({"train.learning_rate": 0.001}))
    assert other.started and other.run_id != first.run_id and other.queued  # the CPU is busy: it waits
    assert len(fake_launcher.launched) == 1 and RunDir(console.runs_dir / other.run_id).read_status().state == "queued"


def test_start_refuses_more_cpu_workers_than_cores_before_making_a_run(console, fake_launcher):
    """The one check of the workers (issue 38): before the run folder exists; the launch does not check again."""
    config = Config().with_updates({"run.runs_dir": str(console.runs_dir),
                                    "parallel.data_parallel": (os.cpu_count() or 1) + 1})
    with pytest.raises(ConfigError, match="parallel.data_parallel"):
        console.jobs.start(config)
    assert fake_launcher.created == [] and fake_launcher.launched == []


def test_a_repeat_after_the_window_is_a_new_run(tmp_path, fake_launcher):
    jobs = JobManager(tmp_path / "runs", create_run=fake_launcher.create_run, launch=fake_launcher.launch,
                      reconcile=fake_launcher.reconcile, dedupe_window_s=0.0)
    config = Config().with_updates({"run.runs_dir": str(tmp_path / "runs")})
    assert jobs.start(config).started and jobs.start(config).started
    assert len(fake_launcher.created) == 2 and len(fake_launcher.launched) == 1  # the second is queued


def test_concurrent_starts_launch_once(console, fake_launcher):
    config = Config().with_updates({"run.runs_dir": str(console.runs_dir)})
    barrier = threading.Barrier(6)

    def click():
        barrier.wait()
        console.jobs.start(config)

    threads = [threading.Thread(target=click) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(fake_launcher.launched) == 1


def test_resume_a_stopped_run_from_its_last_checkpoint(console, fake_launcher):
    run = make_run(console)
    (run.checkpoints_dir / "step-8").mkdir()
    os.symlink("step-8", run.checkpoints_dir / "last")
    run.write_status(state="stopped", reason="stopped by request")
    result = console.jobs.resume(run.run_id)
    assert result.started and "step-8" in result.message
    status = run.read_status()
    assert status.state == "starting" and status.attempt == 2
    assert load_config(run.config_path).run.resume == str(run.checkpoints_dir / "last")
    assert fake_launcher.launched[-1].run_id == run.run_id


def test_resume_refuses_a_running_run_or_one_without_checkpoint(console):
    running = make_run(console, "20261129-000001_a_lora-r8_fp32_dp1")
    with pytest.raises(JobError, match="only a stopped or failed run"):
        console.jobs.resume(running.run_id)
    failed = make_run(console, "20261129-000002_b_lora-r8_fp32_dp1")
    failed.write_status(state="failed", reason="x")
    with pytest.raises(JobError, match="no checkpoint"):
        console.jobs.resume(failed.run_id)


def test_run_ids_cannot_leave_the_runs_folder(console):
    for bad in ("..", "../x", "", "nope"):
        with pytest.raises(JobError):
            console.jobs.run_dir(bad)


def test_reattach_reconciles_active_runs(tmp_path):
    runs = tmp_path / "runs"
    alive = RunDir.create(runs, "a", "method: lora\n")
    alive.write_status(state="starting")
    dead = RunDir.create(runs, "b", "method: lora\n")
    dead.write_status(state="starting")
    done = RunDir.create(runs, "c", "method: lora\n")
    done.write_status(state="stopped")
    checked = []

    def reconcile(run):
        checked.append(run.run_id)
        if run.run_id == "b":
            return run.write_status(state="failed", reason="gone")
        return run.read_status()

    watched = []
    report = JobManager(runs, reconcile=reconcile, watch=lambda run: watched.append(run.run_id) or run.write_status(
        state="failed", reason="watched")).reattach()
    assert sorted(checked) == ["a", "b"] and report.alive == ["a"] and report.failed == ["b"]
    deadline = time.monotonic() + 10
    while not watched and time.monotonic() < deadline:
        time.sleep(0.05)
    assert watched == ["a"]  # the live run is watched from now on (until it is over)
