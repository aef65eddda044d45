"""The job queue (issue 20 item 12): a run whose devices are busy waits as `queued` in its run
folder; the next one starts when a device frees; the queue can be reordered and cancelled, survives
a console restart, hands GPU ids out per data-parallel width, and respects run owners."""
from __future__ import annotations

import time

import pytest

import core.run.launcher as launcher
from core.spec.config import Config
from core.run.launcher import ActiveRun, DeviceSlots, Launch, QueuedRun, device_env, plan_launches
from core.run.rundir import RunDir

from app.auth.access import Viewer
from app.context import Console
from app.runs.jobs import JobError, JobManager
from tests.waiting import wait_for

ALICE, BOB = Viewer("alice", False), Viewer("bob", False)


def config_for(runs_dir, **changes) -> Config:
    return Config().with_updates({"run.runs_dir": str(runs_dir), **changes})


def wait_until(condition, what: str, timeout_s: float = 10.0):
    wait_for(condition, what, timeout_s, every_s=0.02)


@pytest.fixture
def jobs(tmp_path, fake_launcher) -> JobManager:
    return JobManager(tmp_path / "runs", create_run=fake_launcher.create_run, launch=fake_launcher.launch,
                      stop=fake_launcher.stop, reconcile=fake_launcher.reconcile, dedupe_window_s=0.0, poll_s=0.02)


def state(jobs: JobManager, run_id: str) -> str:
    return RunDir(jobs.runs_dir / run_id).read_status().state


def finish(jobs: JobManager, run_id: str) -> None:
    run = RunDir(jobs.runs_dir / run_id)
    run.write_status(state="running")
    run.write_status(state="finished", reason="reached the end")


# ---- the plan (pure) ---------------------------------------------------------------------------

def test_cpu_runs_one_at_a_time_unless_more_are_allowed():
    queued = [QueuedRun("b", "cpu", 1, 2.0), QueuedRun("a", "cpu", 1, 1.0), QueuedRun("c", "cpu", 1, 3.0)]
    assert plan_launches(queued, [], DeviceSlots()) == [Launch("a", ())]
    assert plan_launches(queued, [ActiveRun("x", "cpu", 1)], DeviceSlots()) == []
    assert plan_launches(queued, [ActiveRun("x", "cpu", 1)], DeviceSlots(max_runs=3)) == [Launch("a", ()), Launch("b", ())]


def test_gpu_runs_take_free_ids_per_data_parallel_width_in_queue_order():
    slots = DeviceSlots({"gpu": (0, 1, 2, 3)})
    active = [ActiveRun("x", "gpu", 2, (1, 2))]
    queued = [QueuedRun("wide", "gpu", 2, 1.0), QueuedRun("narrow", "gpu", 1, 2.0), QueuedRun("cpu", "cpu", 1, 3.0)]
    # ids 0 and 3 are free: the wide run gets them; the narrow one waits behind it (no overtaking);
    # the CPU queue is a queue of its own
    assert plan_launches(queued, active, slots) == [Launch("wide", (0, 3)), Launch("cpu", ())]
    assert plan_launches(queued[1:], active, slots) == [Launch("narrow", (0,)), Launch("cpu", ())]
    # a run started outside the queue (no ids recorded) holds the first ids of its width
    assert plan_launches([QueuedRun("n", "gpu", 2, 1.0)], [ActiveRun("shell", "gpu", 2)], slots) == [Launch("n", (2, 3))]
    assert plan_launches(queued, active, DeviceSlots({"gpu": (0, 1, 2, 3)}, max_runs=1)) == []
    assert device_env("gpu", (0, 3)) == {"CUDA_VISIBLE_DEVICES": "0,3"}
    assert device_env("ascend", (5,)) == {"ASCEND_RT_VISIBLE_DEVICES": "5"} and device_env("cpu", ()) == {}


# ---- the job manager ---------------------------------------------------------------------------

def test_a_busy_cpu_queues_the_next_run_and_starts_it_when_the_first_ends(jobs, fake_launcher):
    runs = jobs.runs_dir
    first = jobs.start(config_for(runs))
    second = jobs.start(config_for(runs, **{"train.learning_rate": 0.001}))
    third = jobs.start(config_for(runs, **{"train.learning_rate": 0.002}))
    assert not first.queued and second.queued and third.queued
    assert "#1 in the cpu queue" in second.message and first.run_id in second.message
    assert [r.run_id for r in fake_launcher.launched] == [first.run_id]
    assert [(e.run_id, e.position) for e in jobs.queue()] == [(second.run_id, 1), (third.run_id, 2)]
    finish(jobs, first.run_id)
    jobs.poke()
    wait_until(lambda: state(jobs, second.run_id) == "starting", "the second run to start")
    assert state(jobs, third.run_id) == "queued" and [e.run_id for e in jobs.queue()] == [third.run_id]
    assert RunDir(runs / second.run_id).read_status().queue_position is None


def test_a_run_started_outside_the_console_is_waited_for_too(jobs, fake_launcher, tmp_path):
    shell = launcher.create_run(config_for(jobs.runs_dir, **{"train.learning_rate": 0.003}))
    shell.write_status(state="starting")  # a `python -m core.train` from a shell
    queued = jobs.start(config_for(jobs.runs_dir))
    assert queued.queued and fake_launcher.launched == []
    shell.write_status(state="failed", reason="killed")  # its process went away: the scheduler sees it
    wait_until(lambda: state(jobs, queued.run_id) == "starting", "the queued run to start by itself")


def test_the_queue_can_be_reordered_and_cancelled(jobs, fake_launcher):
    runs = jobs.runs_dir
    first = jobs.start(config_for(runs))
    b = jobs.start(config_for(runs, **{"train.learning_rate": 0.001}))
    c = jobs.start(config_for(runs, **{"train.learning_rate": 0.002}))
    d = jobs.start(config_for(runs, **{"train.learning_rate": 0.003}))
    assert "up to place 2" in jobs.move(d.run_id, -1)
    assert [e.run_id for e in jobs.queue()] == [b.run_id, d.run_id, c.run_id]
    assert "up to place 1" in jobs.move(d.run_id, -1)
    assert [e.run_id for e in jobs.queue()] == [d.run_id, b.run_id, c.run_id]
    assert "already first" in jobs.move(d.run_id, -1)
    jobs.move(b.run_id, +1)
    assert [e.run_id for e in jobs.queue()] == [d.run_id, c.run_id, b.run_id]
    assert "cancelled" in jobs.cancel(c.run_id)
    status = RunDir(runs / c.run_id).read_status()
    assert status.state == "stopped" and status.reason == "cancelled before it started"
    assert [e.run_id for e in jobs.queue()] == [d.run_id, b.run_id]
    with pytest.raises(JobError, match="not queued"):
        jobs.cancel(first.run_id)
    assert "cancelled" in jobs.request_stop(b.run_id, graceful=True)  # Stop on a queued run cancels it
    finish(jobs, first.run_id)
    jobs.poke()
    wait_until(lambda: state(jobs, d.run_id) == "starting", "the run moved to the front to start next")
    assert [r.run_id for r in fake_launcher.launched] == [first.run_id, d.run_id]


def test_the_queue_survives_a_console_restart(tmp_path, fake_launcher, workspace):
    kwargs = dict(create_run=fake_launcher.create_run, launch=fake_launcher.launch, stop=fake_launcher.stop,
                  reconcile=fake_launcher.reconcile, dedupe_window_s=0.0, poll_s=0.02)
    before = JobManager(tmp_path / "runs", **kwargs)
    first = before.start(config_for(tmp_path / "runs"))
    waiting = before.start(config_for(tmp_path / "runs", **{"train.learning_rate": 0.001}))
    assert waiting.queued
    before.close()  # the console goes away
    finish(before, first.run_id)  # the run ends while no console is watching
    time.sleep(0.1)
    assert state(before, waiting.run_id) == "queued"
    after = JobManager(tmp_path / "runs", **kwargs)
    report = after.reattach()
    assert report.queued == [waiting.run_id] and waiting.run_id not in report.alive
    assert state(after, waiting.run_id) == "starting"


def test_gpu_runs_get_their_own_device_ids_through_the_environment(tmp_path, fake_launcher):
    jobs = JobManager(tmp_path / "runs", create_run=fake_launcher.create_run, launch=fake_launcher.launch,
                      stop=fake_launcher.stop, reconcile=fake_launcher.reconcile, dedupe_window_s=0.0,
                      slots=DeviceSlots({"gpu": (0, 1, 2)}), poll_s=0.02)
    gpu = {"parallel.device": "gpu", "precision.amp_level": "O2", "precision.compute_dtype": "bfloat16"}
    wide = jobs.start(config_for(jobs.runs_dir, **gpu, **{"parallel.data_parallel": 2}))
    one = jobs.start(config_for(jobs.runs_dir, **gpu, **{"train.learning_rate": 0.001}))
    late = jobs.start(config_for(jobs.runs_dir, **gpu, **{"train.learning_rate": 0.002}))
    assert fake_launcher.envs[wide.run_id] == {"CUDA_VISIBLE_DEVICES": "0,1"}
    assert fake_launcher.envs[one.run_id] == {"CUDA_VISIBLE_DEVICES": "2"} and late.queued
    assert RunDir(jobs.runs_dir / wide.run_id).read_status().device_ids == [0, 1]
    finish(jobs, one.run_id)
    jobs.poke()
    wait_until(lambda: state(jobs, late.run_id) == "starting", "the queued GPU run to start")
    assert fake_launcher.envs[late.run_id] == {"CUDA_VISIBLE_DEVICES": "2"}


def test_each_user_sees_and_changes_only_their_own_queued_runs(tmp_path, fake_launcher):
    jobs = JobManager(tmp_path / "runs", create_run=fake_launcher.create_run, launch=fake_launcher.launch,
                      stop=fake_launcher.stop, reconcile=fake_launcher.reconcile, dedupe_window_s=0.0, poll_s=0.02)
    runs = jobs.runs_dir
    jobs.start(config_for(runs), owner="alice")
    alice_waits = jobs.start(config_for(runs, **{"train.learning_rate": 0.001}), owner="alice")
    bob_waits = jobs.start(config_for(runs, **{"train.learning_rate": 0.002}), owner="bob")
    bob_later = jobs.start(config_for(runs, **{"train.learning_rate": 0.003}), owner="bob")
    assert [(e.run_id, e.position) for e in jobs.queue(BOB)] == [(bob_waits.run_id, 2), (bob_later.run_id, 3)]
    assert [e.run_id for e in jobs.queue(ALICE)] == [alice_waits.run_id]
    with pytest.raises(JobError, match="no run"):
        jobs.cancel(alice_waits.run_id, BOB)
    with pytest.raises(JobError, match="no run"):
        jobs.move(alice_waits.run_id, +1, BOB)
    assert "already first" in jobs.move(bob_waits.run_id, -1, BOB)  # not ahead of alice's run
    jobs.move(bob_later.run_id, -1, BOB)
    assert [e.run_id for e in jobs.queue()] == [alice_waits.run_id, bob_later.run_id, bob_waits.run_id]


def test_the_console_takes_the_concurrency_from_its_settings(workspace, fake_launcher):
    from dataclasses import replace

    console = Console.create(replace(workspace, max_concurrent_runs=2), create_run=fake_launcher.create_run,
                             launch=fake_launcher.launch, stop=fake_launcher.stop, reconcile=fake_launcher.reconcile)
    first = console.jobs.start(config_for(console.runs_dir))
    second = console.jobs.start(config_for(console.runs_dir, **{"train.learning_rate": 0.001}))
    third = console.jobs.start(config_for(console.runs_dir, **{"train.learning_rate": 0.005}))
    assert not first.queued and not second.queued and third.queued
