"""The console's side of cluster runs (issue 25) without a browser or a cluster: the
--cluster-shared-dir gate, "Where to run", the form's Slurm fields, Start through the backend (one
job for two clicks, Slurm's queue instead of the console's), cancel = the backend's stop, the
Monitor's job line (id, nodes, state, pending reason), a dead rank named with its node, cancelled
shown as cancelled, and reattach. Two tabs' Starts, Slurm's queue, a console restarted while a job
is pending and the cancel of that job run against the real test cluster with a held job (`--hold`:
no CPU; marked `slurm`, skipped without the cluster). The other cases need states the cluster cannot
give in seconds (running, a dead rank, a time limit): there Slurm is the recording `FakeSlurm` below,
which writes what core.run.slurm writes into the run folder (tests/app/test_cluster_browser.py drives the
real ones)."""
from __future__ import annotations

import functools
import os
import re
import subprocess
import threading
import time

import pytest

from core.run.records import TERMINAL_STATES, ClusterJob, Status
from core.run.rundir import RunDir
from core.run.runs import list_runs
from core.run.slurm import Partition, QueueEntry

from app.tabs import form, monitor_callbacks, runs_callbacks
from app.tabs import train_callbacks as cb
from app.runs.cluster import SLURM_ENDS, ClusterOffer, ClusterOffers, cluster_html, read_offer, shared_dir_refusal, where_choices
from app.context import Console
from app.i18n import action_text
from app.runs.jobs import JobError, JobManager
from app.runs.run_status import failure_html
from app.settings import SettingsError, parse_settings

from tests.slurm_fixtures import require_slurm, wait_for


class FakeSlurm:
    """Stands in for core.run.slurm.SlurmBackend: each submission is a job pending for Resources on
    partition debug; stop cancels it (scancel); records every call."""
    name, uses_own_queue, can_queue = "slurm", False, True

    def __init__(self):
        self.submitted: list[str] = []
        self.stops: list[tuple[str, bool]] = []
        self.job_ids = iter(range(101, 1000))

    def launch(self, run: RunDir, env=None) -> None:
        self.submitted.append(run.run_id)
        run.write_status(cluster=ClusterJob(job_id=str(next(self.job_ids)), state="PENDING", reason="Resources",
                                            partition="debug", submitted_at=time.time(), script="job.sbatch"))

    def refresh(self, run: RunDir):
        return run.read_status()

    def stop(self, run: RunDir, graceful: bool = True):
        self.stops.append((run.run_id, graceful))
        job = run.read_status().cluster
        return run.write_status(state="stopped", reason=f"Slurm job {job.job_id} cancelled (scancel)",
                                cluster=job.replace(state="CANCELLED", reason=None))

    def queue(self, runs_dir):
        return [QueueEntry(s.run_id, s.status.cluster.job_id, "PENDING", s.status.cluster.reason, 1)
                for s in reversed(list_runs(runs_dir)) if s.status.cluster is not None and s.state == "queued"]

    def active(self, runs_dir):
        return [RunDir(s.path) for s in list_runs(runs_dir)
                if s.status.cluster is not None and s.state not in TERMINAL_STATES]


def offer_of(*partitions: Partition):
    return functools.partial(read_offer, available=lambda: None, partitions=lambda: list(partitions))


@pytest.fixture
def slurm() -> FakeSlurm:
    return FakeSlurm()


@pytest.fixture
def cluster_console(workspace, fake_launcher, slurm, tmp_path) -> Console:
    """A console whose runs folder is under --cluster-shared-dir, with Slurm partition debug (2 nodes)."""
    settings = workspace.__class__(**{**workspace.__dict__, "cluster_shared_dir": tmp_path})
    console = Console.create(settings, create_run=fake_launcher.create_run, launch=fake_launcher.launch,
                             stop=fake_launcher.stop, reconcile=fake_launcher.reconcile,
                             backend_for=lambda name: slurm if name == "slurm" else None, cluster_every_s=0.05)
    console.cluster = ClusterOffers(settings.runs_dir, tmp_path, reader=offer_of(Partition("debug", 2, "UP")),
                                    check_submission=lambda config: None)  # what Slurm says is tested on the real one
    return console


def slurm_values(console, nodes: int = 2, **changes) -> dict:
    values = form.to_values(cb.starter_config(console))
    values.update({form.WHERE: "slurm:debug", "launch.nodes": nodes, "launch.workers_per_node": 1,
                   "train.max_steps": 4})
    values.update({k.replace("__", "."): v for k, v in changes.items()})
    return values


# ---- the gate: --cluster-shared-dir ------------------------------------------------------------

def test_slurm_is_refused_naming_the_setting_unless_the_runs_folder_is_under_the_shared_dir(tmp_path, console):
    runs, shared = tmp_path / "shared" / "runs", tmp_path / "shared"
    shared.mkdir()
    assert "--cluster-shared-dir" in shared_dir_refusal(runs, None)
    assert "--cluster-shared-dir" in shared_dir_refusal(tmp_path / "elsewhere" / "runs", shared)
    assert shared_dir_refusal(runs, shared) is None
    with pytest.raises(SettingsError, match="--cluster-shared-dir .*not a folder"):
        parse_settings(["--cluster-shared-dir", str(tmp_path / "missing")])
    assert parse_settings(["--cluster-shared-dir", str(shared), "--runs-dir", str(runs)]).cluster_shared_dir == shared
    # the console fixture has no --cluster-shared-dir: the Slurm choice is refused before submission
    console.cluster = ClusterOffers(console.runs_dir, None, reader=offer_of(Partition("debug", 2, "UP")))
    check = cb.check_form(slurm_values(console), console, data=False)
    assert check.config is None and "--cluster-shared-dir" in check.errors[form.WHERE]
    assert [value for _, value in where_choices(console.cluster_offer())] == ["local"]


def test_where_to_run_lists_each_partition_with_its_nodes_in_both_languages():
    offer = ClusterOffer((Partition("debug", 2, "UP"), Partition("big", 8, "DRAIN")))
    assert where_choices(offer, "en") == [("This machine", "local"), ("Slurm partition debug (2 nodes)", "slurm:debug"),
                                          ("Slurm partition big (8 nodes) [DRAIN]", "slurm:big")]
    assert where_choices(offer, "zh")[1] == ("Slurm 分区 debug（2 个节点）", "slurm:debug")
    refused = ClusterOffer(refusal="Slurm does not answer: sinfo: no controller")
    assert where_choices(refused, "en", current="slurm:debug")[-1][1] == "slurm:debug"  # a loaded config keeps its choice


# ---- the form ----------------------------------------------------------------------------------

def test_a_slurm_form_is_one_config_whose_workers_are_nodes_times_workers_per_node(cluster_console):
    values = slurm_values(cluster_console, launch__time_limit="0:30:00", launch__sbatch_options="--mem=2G --qos=normal",
                          launch__env="OMP_NUM_THREADS: 1, HF_HOME: /shared/hf")
    check = cb.check_form(values, cluster_console, data=False)
    assert check.ok, check.errors
    launch = check.config.launch
    assert (launch.backend, launch.partition, launch.nodes, check.config.parallel.data_parallel) == ("slurm", "debug", 2, 2)
    assert launch.sbatch_options == ["--mem=2G", "--qos=normal"] and launch.env["OMP_NUM_THREADS"] == "1"
    shown = form.to_values(check.config)
    assert shown[form.WHERE] == "slurm:debug" and shown["launch.sbatch_options"] == "--mem=2G --qos=normal"


def test_bad_slurm_fields_are_refused_on_their_fields_before_submission(cluster_console, slurm):
    inject = cb.check_form(slurm_values(cluster_console, launch__sbatch_options="--output=/tmp/x"), cluster_console,
                           data=False)
    assert "--output" in inject.errors["launch.sbatch_options"]
    bad_time = cb.check_form(slurm_values(cluster_console, launch__time_limit="1h"), cluster_console, data=False)
    assert "launch.time_limit" in bad_time.errors
    outcome = cb.start(slurm_values(cluster_console, launch__time_limit="1h"), cluster_console)
    assert outcome.run_id is None and slurm.submitted == [] and not cluster_console.runs_dir.exists()


# ---- Start, the queue, cancel --------------------------------------------------------------------

@pytest.fixture
def real_cluster_console(workspace, fake_launcher, tmp_path):
    """A console on the real Slurm test cluster (local runs still go to the fake launcher), its runs
    folder under --cluster-shared-dir; every Slurm job it made is cancelled at the end."""
    require_slurm()
    settings = workspace.__class__(**{**workspace.__dict__, "cluster_shared_dir": tmp_path})
    make = functools.partial(Console.create, settings, create_run=fake_launcher.create_run, launch=fake_launcher.launch,
                             stop=fake_launcher.stop, reconcile=fake_launcher.reconcile, cluster_every_s=0.2)
    console = make()
    console.restart = make
    yield console
    for summary in list_runs(settings.runs_dir):
        if summary.status.cluster is not None and summary.status.cluster.job_id:
            subprocess.run(["scancel", summary.status.cluster.job_id], check=False)


def jobs_named(run_id: str) -> list[str]:
    return subprocess.run(["squeue", "-h", "-n", f"mindtune-{run_id}", "-o", "%i"], capture_output=True, text=True,
                          check=True).stdout.split()


@pytest.mark.slurm
def test_held_cluster_job_two_tabs_one_job_then_a_restarted_console_finds_it_pending_and_cancels_it(
        real_cluster_console, fake_launcher):
    """Held in Slurm (`--hold`: pending for JobHeldUser, costs no CPU): two tabs' Starts give one
    job; Slurm queues it, not the console; a restarted console finds it (backend.active), shows it
    queued with Slurm's reason, and a Start of the same form within the window gives no second job."""
    console = real_cluster_console
    values = slurm_values(console, launch__sbatch_options="--hold")
    results: list = []
    tabs = [threading.Thread(target=lambda: results.append(cb.start(values, console))) for _ in range(2)]
    for tab in tabs:
        tab.start()
    for tab in tabs:
        tab.join()
    run_id = results[0].run_id
    assert [r.run_id for r in results] == [run_id, run_id] and len(list_runs(console.runs_dir)) == 1
    job_id = RunDir(console.runs_dir / run_id).read_status().cluster.job_id
    assert jobs_named(run_id) == [job_id]
    first, second = sorted(results, key=lambda r: "already started" in r.message)
    assert first.queued and f"as Slurm job {job_id} (pending" in first.message, first.message
    assert "already started" in second.message
    # a local run starts at once: the pending cluster job holds none of this machine's devices
    local = cb.start(form.to_values(cb.starter_config(console)), console)
    assert not local.queued and [r.run_id for r in fake_launcher.launched] == [local.run_id]
    assert console.jobs.queue() == [] and [e.run_id for e in console.jobs.cluster_queue()] == [run_id]
    wait_for(lambda: "JobHeldUser" in runs_callbacks.queue_html(console), 30, 0.5, "Slurm's reason in the queue")
    table = runs_callbacks.runs_table(console)
    assert re.fullmatch(r"queued #\d+ in Slurm", table[table.iloc[:, 0] == run_id].iloc[0, 1])

    console.jobs.close()  # the console stops; the job stays held in Slurm
    restarted = console.restart()
    report = restarted.jobs.reattach()
    assert sorted(report.alive) == sorted([run_id, local.run_id]) and report.queued == []  # the local one: a fake
    tick = monitor_callbacks.tick(monitor_callbacks.MonitorSession(), run_id, restarted)
    assert ">queued<" in tick.state and f'<code id="cluster-job-id">{job_id}</code>' in tick.status
    assert "Pending because: <b>JobHeldUser" in tick.status, tick.status
    again = cb.start(values, restarted)
    assert again.run_id == run_id and "already started" in again.message and jobs_named(run_id) == [job_id]

    message = runs_callbacks.queue_action(restarted, [run_id], "cancel")
    assert f"scancel of Slurm job {job_id}" in message
    wait_for(lambda: not jobs_named(run_id), 30, 0.5, "the job gone from squeue")
    status = RunDir(console.runs_dir / run_id).read_status()
    assert (status.state, status.cluster.state) == ("stopped", "CANCELLED") and "cancelled while pending" in status.reason
    restarted.jobs.close()


def test_cancel_of_a_pending_cluster_run_is_the_backends_stop_and_shows_cancelled(cluster_console, slurm):
    run_id = cb.start(slurm_values(cluster_console), cluster_console).run_id
    message = runs_callbacks.queue_action(cluster_console, [run_id], "cancel")
    assert slurm.stops == [(run_id, False)] and "scancel of Slurm job 101" in message
    tick = monitor_callbacks.tick(monitor_callbacks.MonitorSession(), run_id, cluster_console)
    assert ">cancelled<" in tick.state and tick.failure == ""
    assert 'data-state="CANCELLED"' in tick.status and "no rank crashed" in tick.status
    assert runs_callbacks.runs_table(cluster_console).iloc[0, 1] == "cancelled"


# ---- the Monitor ---------------------------------------------------------------------------------

def test_the_monitor_shows_the_job_its_nodes_slurm_state_and_why_it_is_pending(cluster_console):
    run_id = cb.start(slurm_values(cluster_console), cluster_console).run_id
    tick = monitor_callbacks.tick(monitor_callbacks.MonitorSession(), run_id, cluster_console)
    assert ">queued<" in tick.state and tick.active
    assert '<code id="cluster-job-id">101</code>' in tick.status and "not allocated yet" in tick.status
    assert "Pending because: <b>Resources (waiting for nodes to be free)</b>" in tick.status
    assert "pending in Slurm" in tick.status
    zh = monitor_callbacks.tick(monitor_callbacks.MonitorSession(), run_id, cluster_console, lang="zh")
    assert "等待原因" in zh.status and "等待节点空闲" in zh.status
    run = RunDir(cluster_console.runs_dir / run_id)
    run.write_status(state="starting")
    run.write_status(state="running", cluster=run.read_status().cluster.replace(state="RUNNING", reason=None,
                                                                                   nodes=["node1", "node2"]))
    running = monitor_callbacks.tick(monitor_callbacks.MonitorSession(), run_id, cluster_console)
    assert '<span id="cluster-nodes">node1, node2</span>' in running.status and "cluster-reason" not in running.status


def test_a_rank_that_died_on_node2_is_named_with_its_node(cluster_console):
    run_id = cb.start(slurm_values(cluster_console), cluster_console).run_id
    run = RunDir(cluster_console.runs_dir / run_id)
    run.write_status(state="starting")
    run.write_status(state="failed", failure_kind="rank_died", failed_rank=1, exit_signal="SIGKILL", rank_count=2,
                     reason="rank 1 died (SIGKILL)", error_lines=["Killed"],
                     cluster=run.read_status().cluster.replace(state="FAILED", reason=None, nodes=["node1", "node2"]))
    tick = monitor_callbacks.tick(monitor_callbacks.MonitorSession(), run_id, cluster_console)
    assert 'data-node="node2"' in tick.failure and "rank 1 on node node2" in tick.failure
    assert 'data-rank="rank 1 on node2"' in tick.failure
    assert "节点 node2 上的 rank 1" in failure_html(run.read_status(), "", "zh", "node2")


def test_a_job_slurm_ended_at_its_time_limit_says_so(cluster_console):
    run_id = cb.start(slurm_values(cluster_console), cluster_console).run_id
    run = RunDir(cluster_console.runs_dir / run_id)
    run.write_status(state="starting")
    run.write_status(state="failed", reason="Slurm ended the job: TIMEOUT", failure_kind="crash",
                     cluster=run.read_status().cluster.replace(state="TIMEOUT", reason=None, nodes=["node1", "node2"]))
    shown = cluster_html(run.read_status())
    assert 'data-state="TIMEOUT"' in shown and "at its time limit" in shown
    assert "达到时间限制" in cluster_html(run.read_status(), "zh")


@pytest.mark.parametrize("state", SLURM_ENDS)
def test_every_way_slurm_ends_a_job_is_said_in_both_languages(state):
    from app.i18n import text
    from tests.app.english import english_words
    status = Status(state="failed", cluster=ClusterJob(job_id="41", state=f"{state} by 0", nodes=["node1", "node2"]))
    shown = {lang: cluster_html(status, lang) for lang in ("en", "zh")}
    assert f'data-state="{state}"' in shown["en"] and text(f"slurm.end.{state}", "en") in shown["en"]
    said = text(f"slurm.end.{state}", "zh")
    assert said in shown["zh"] and said != text(f"slurm.end.{state}", "en") and english_words(said) == []
    running = Status(state="running", cluster=ClusterJob(job_id="41", state="RUNNING", nodes=["node1"]))
    assert 'id="cluster-end"' not in cluster_html(running)  # said only once the run is over


# ---- reattach ------------------------------------------------------------------------------------

def test_a_restarted_console_finds_the_running_cluster_job_and_watches_it_to_the_end(cluster_console, slurm):
    run_id = cb.start(slurm_values(cluster_console), cluster_console).run_id
    run = RunDir(cluster_console.runs_dir / run_id)
    run.write_status(state="starting")
    run.write_status(state="running", cluster=run.read_status().cluster.replace(state="RUNNING", nodes=["node1", "node2"]))
    cluster_console.jobs.close()
    ended: list[str] = []
    restarted = JobManager(cluster_console.runs_dir, reconcile=lambda r: RunDir(r.path).read_status(),
                           backend_for=lambda name: slurm, cluster_every_s=0.05, on_end=lambda r: ended.append(r.run_id))
    report = restarted.reattach()
    assert report.alive == [run_id] and report.queued == []
    assert slurm.submitted == [run_id]  # found again, never submitted twice
    run.write_status(state="finished", cluster=run.read_status().cluster.replace(state="COMPLETED"))
    restarted.wait_for_watchers(10)
    assert ended == [run_id]


def test_a_cluster_job_submitted_from_a_shell_is_watched_once_a_page_shows_it(cluster_console, slurm):
    run = RunDir.create(cluster_console.runs_dir, "20261202-080000_tiny_lora-r8_fp32_dp2", "run: {}\n")
    slurm.launch(run)  # what `python -m core.train ... launch.backend=slurm` leaves in the folder
    seen: list[str] = []
    slurm.refresh = lambda r: seen.append(r.run_id) or r.read_status()
    monitor_callbacks.tick(monitor_callbacks.MonitorSession(), run.run_id, cluster_console)
    wait_for(lambda: run.run_id in seen, 30, 0.05, "its watcher asking Slurm")
    run.write_status(state="stopped", reason="Slurm job 101 cancelled (scancel)",
                     cluster=run.read_status().cluster.replace(state="CANCELLED"))
    cluster_console.jobs.wait_for_watchers(10)
    assert not cluster_console.jobs._watching[run.run_id].is_alive()


def test_a_stopped_cluster_run_resumes_as_a_new_job_from_its_checkpoint(cluster_console, slurm):
    run_id = cb.start(slurm_values(cluster_console), cluster_console).run_id
    run = RunDir(cluster_console.runs_dir / run_id)
    (run.checkpoints_dir / "step-2").mkdir(parents=True)
    (run.checkpoints_dir / "last").symlink_to("step-2")
    slurm.stop(run, graceful=False)
    result = cluster_console.jobs.resume(run_id)
    assert result.message == f"resumed {run_id} from step-2 as Slurm job 102" and result.queued
    status = run.read_status()
    assert slurm.submitted == [run_id, run_id] and status.attempt == 2 and status.cluster.job_id == "102"
    assert "resume: " in run.config_path.read_text() and cluster_console.jobs.queue() == []


def test_a_stopped_cluster_run_resumes_on_this_machine_with_the_same_width_or_says_why_not(cluster_console, slurm,
                                                                                            fake_launcher):
    """Issue 25 item 7, "or locally": the same checkpoint files go on under the local launcher (verified by
    hand on the real cluster: a 2-node run's step-2 checkpoint resumed locally at DP=2 gave step 4's loss
    4.72381591796875, the very loss of the uninterrupted 2-node run)."""
    run_id = cb.start(slurm_values(cluster_console), cluster_console).run_id
    run = RunDir(cluster_console.runs_dir / run_id)
    (run.checkpoints_dir / "step-2").mkdir(parents=True)
    (run.checkpoints_dir / "last").symlink_to("step-2")
    slurm.stop(run, graceful=False)
    result = cluster_console.jobs.resume(run_id, backend="local")
    assert result.message == f"resumed {run_id} from step-2" and not result.queued
    assert slurm.submitted == [run_id] and [r.run_id for r in fake_launcher.launched] == [run_id]
    status = run.read_status()
    assert status.cluster is None and status.attempt == 2 and status.history[-1].state == "stopped"
    from core.spec.config import load_config
    config = load_config(run.config_path)
    assert (config.launch.backend, config.parallel.data_parallel) == ("local", 2) and config.run.resume.endswith("checkpoints/last")
    # wider than this machine: refused before anything changes, naming the width and the cores
    wide = cb.start(slurm_values(cluster_console, launch__workers_per_node=os.cpu_count()), cluster_console).run_id
    wide_run = RunDir(cluster_console.runs_dir / wide)
    (wide_run.checkpoints_dir / "step-2").mkdir(parents=True)
    (wide_run.checkpoints_dir / "last").symlink_to("step-2")
    slurm.stop(wide_run, graceful=False)
    with pytest.raises(JobError, match=rf"ran on 2 node\(s\) x {os.cpu_count()} worker\(s\) \(data parallel "
                                       rf"{2 * os.cpu_count()}\); resuming it on this machine needs .*CPU cores"):
        cluster_console.jobs.resume(wide, backend="local")
    assert wide_run.read_status().state == "stopped" and load_config(wide_run.config_path).launch.backend == "slurm"
    # the Runs tab's "Resume on this machine" says it in both languages
    _, message = runs_callbacks.resume(cluster_console, [wide], lang="zh", backend="local")
    assert message.startswith("⚠ ") and f"曾在 2 个节点 × 每节点 {os.cpu_count()} 个工作进程上运行" in message, message
