"""Cluster runs against the real two-node Slurm test cluster (scripts/slurm_cluster.sh: node1 and
node2, both this machine, partition `debug`), through the real sbatch/squeue/scontrol/scancel.

The training jobs are submitted together when the module starts (they start up while the cheap
tests run): a 4-step run compared with a local data-parallel-2 run of the same config, one stopped
gracefully and then resumed and stopped at once, one whose rank on node2 is killed, one cancelled
with scancel from outside, one that Slurm ends at its one-minute time limit."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

import core.run.launcher as launcher
from core.spec.config import ConfigError, load_config
from core.run.launcher import LaunchError
from core.run.records import TERMINAL_STATES, Status
from core.run.rundir import RunDir
from core.run.runs import list_runs
from core.run.slurm import SlurmBackend, check_submission, job_info
from tests.slurm_fixtures import PARTITION, refreshed_until_over, require_slurm, wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "configs" / "lora_demo.yaml"
COMMON = ["launch.backend=slurm", "launch.nodes=2", "launch.workers_per_node=1", f"launch.partition={PARTITION}",
          "parallel.data_parallel=2", "train.micro_batch_size=4", "train.warmup_steps=1", "train.log_every=1", "eval.downstream=false",
          "eval.baseline=false"]
PARITY = ["train.max_steps=4", "train.eval_every=2"]
LONG = ["train.max_steps=60", "train.eval_every=1000", "train.save_every=1000"]
PAST_A_MINUTE = ["train.max_steps=5000", "train.eval_every=100000", "train.save_every=100000", "launch.time_limit=1"]
START_S, END_S = 400.0, 240.0  # a loaded 2-core machine starts 5 MindSpore processes at once


def submit(runs_dir: Path, *overrides: str) -> RunDir:
    run = launcher.create_run(load_config(DEMO, [*COMMON, f"run.runs_dir={runs_dir}", *overrides]))
    SlurmBackend().launch(run)
    return run


def refreshed_until(run: RunDir, done, timeout_s: float, what: str) -> Status:
    backend = SlurmBackend()
    return wait_for(lambda: (lambda s: s if done(s) else None)(backend.refresh(run)), timeout_s, 1.0, what)


def ranks_started(run: RunDir, n: int = 2) -> dict[int, dict]:
    out = {}
    for rank in range(n):
        try:
            out[rank] = json.loads((run.ranks_dir / f"rank-{rank}.json").read_text())
        except (OSError, ValueError):
            return {}
    return out


def train_records(run: RunDir) -> list[dict]:
    if not run.metrics_path.exists():
        return []
    return [r for r in map(json.loads, run.metrics_path.read_text().splitlines()) if r.get("kind") == "train"]


def nothing_left(run: RunDir) -> bool:
    job = run.read_status().cluster
    info = job_info(job.job_id)
    return not launcher.run_processes(run) and (info is None or info.state not in ("RUNNING", "COMPLETING", "PENDING"))


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory) -> Path:
    require_slurm()
    return tmp_path_factory.mktemp("slurm-runs")


@pytest.fixture(scope="module", autouse=True)
def jobs(runs_dir):
    """The training jobs, submitted at once; every job of the module is cancelled at the end."""
    started = {"parity": submit(runs_dir, *PARITY), "graceful": submit(runs_dir, *LONG),
               "kill": submit(runs_dir, *LONG), "scancel": submit(runs_dir, *LONG),
               "time_limit": submit(runs_dir, *PAST_A_MINUTE)}
    local = launcher.create_run(load_config(DEMO, [*COMMON, *PARITY, f"run.runs_dir={runs_dir / 'local'}",
                                                   "launch.backend=local"]))
    started["local"] = (time.time(), launcher.launch(local))  # the same config on this machine, DP=2
    yield started
    if started["local"][1].poll() is None:
        launcher.stop(local, graceful=False)
    for summary in list_runs(runs_dir):
        job = summary.status.cluster
        if job is not None and job.job_id:
            subprocess.run(["scancel", job.job_id], check=False)


def test_refused_before_submission_naming_the_field(runs_dir, capsys):
    for overrides, field, says in [(["launch.partition=nope"], "launch.partition", "its partitions: debug"),
                                   (["launch.nodes=3", "parallel.data_parallel=3"], "launch.nodes",
                                    "partition debug has 2 node(s)")]:
        with pytest.raises(ConfigError) as info:
            check_submission(load_config(DEMO, [*COMMON, *overrides]))
        assert list(info.value.errors) == [field] and says in info.value.errors[field]
    before = set(runs_dir.iterdir())
    from core.train import main as train_main
    assert train_main(["--config", str(DEMO), *COMMON, f"run.runs_dir={runs_dir}", "launch.partition=nope"]) == 2
    assert "launch.partition" in capsys.readouterr().err and set(runs_dir.iterdir()) == before  # no run made


def test_sbatch_refusal_leaves_the_run_saying_why(runs_dir):
    run = launcher.create_run(load_config(DEMO, [*COMMON, f"run.runs_dir={runs_dir}", "launch.sbatch_options=[--gres=gpu:1]"]))
    with pytest.raises(LaunchError, match="sbatch refused"):
        SlurmBackend().launch(run)
    status = run.read_status()
    assert status.state == "failed" and status.reason.startswith("sbatch refused the job: sbatch: error:")
    assert "gres" in status.reason.lower() and status.cluster.job_id is None and run.sbatch_script.is_file()


def test_held_job_shows_slurms_reason_is_found_again_and_never_submitted_twice(runs_dir):
    run = launcher.create_run(load_config(DEMO, [*COMMON, f"run.runs_dir={runs_dir}", "launch.sbatch_options=[--hold]"]))
    errors = []

    def start():
        try:
            SlurmBackend().launch(run)
        except LaunchError as err:
            errors.append(str(err))

    threads = [threading.Thread(target=start) for _ in range(2)]  # two tabs, a double click
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    job_id = run.read_status().cluster.job_id
    assert len(errors) == 1 and f"already Slurm job {job_id}" in errors[0]
    # every job and its name, compared here: the module's other runs, made in the same second, have
    # this run's id as a prefix (run ids -2, -3...), and squeue's own --name filter is not exact on them
    queue = subprocess.run(["squeue", "-h", "-o", "%i %j"], capture_output=True, text=True, check=True)
    named = [job for job, name in (line.split(None, 1) for line in queue.stdout.splitlines())
             if name == f"mindtune-{run.run_id}"]
    assert named == [job_id], (run.run_id, queue.stdout)
    status = refreshed_until(run, lambda s: s.cluster.reason, 30, "Slurm's pending reason")
    assert (status.state, status.cluster.state, status.cluster.reason) == ("queued", "PENDING", "JobHeldUser")
    assert RunDir(run.path) in SlurmBackend().active(runs_dir)  # a restarted console finds it
    # in Slurm's queue once, pending (the module's training jobs may be pending too, for resources)
    assert [e.job_id for e in SlurmBackend().queue(runs_dir) if e.state == "PENDING"].count(job_id) == 1
    final = SlurmBackend().stop(run)
    assert final.state == "stopped" and "cancelled while pending" in final.reason
    assert final.cluster.state == "CANCELLED" and RunDir(run.path) not in SlurmBackend().active(runs_dir)


def test_scancel_from_outside_is_reported_as_cancelled(jobs):
    run = jobs["scancel"]
    wait_for(lambda: ranks_started(run), START_S, 1.0, "the ranks to start")
    subprocess.run(["scancel", run.read_status().cluster.job_id], check=True)
    status = refreshed_until_over(run, END_S, "the cancelled run")
    assert status.cluster.state == "CANCELLED", (status.cluster, status.reason)
    assert status.state == "stopped" and "cancelled outside the console (scancel)" in status.reason, status.reason
    assert status.failure_kind is None
    wait_for(lambda: nothing_left(run), 60, 1.0, "nothing of the run left")


def test_worker_killed_on_node2_is_named_with_its_node(jobs):
    run = jobs["kill"]
    records = wait_for(lambda: ranks_started(run), START_S, 1.0, "the ranks to start")
    assert {r["node"] for r in records.values()} == {"node1", "node2"}
    victim = next(r for r in records.values() if r["node"] == "node2")
    log = run.worker_log(victim["rank"])  # msrun's log of that rank, whose tail the verdict carries
    wait_for(lambda: log.exists() and f"rank {victim['rank']} of 2" in log.read_text(errors="replace"), START_S, 1.0,
             "the rank's first words")
    os.kill(victim["pid"], signal.SIGKILL)
    status = refreshed_until(run, lambda s: s.state in TERMINAL_STATES, END_S, "the failure")
    assert status.state == "failed" and status.failed_rank == victim["rank"], status.reason
    assert f"rank {victim['rank']} on node node2 was killed by SIGKILL" in status.reason
    assert status.failure_kind == "rank_died" and any(f"rank {victim['rank']} of 2" in ln for ln in status.error_lines)
    wait_for(lambda: nothing_left(run), 90, 1.0, "nothing of the run left")


def test_graceful_stop_checkpoints_then_resume_on_the_cluster_and_stop_now(jobs):
    run = jobs["graceful"]
    refreshed_until(run, lambda s: train_records(run) or s.state in TERMINAL_STATES, START_S, "the first step")
    status = SlurmBackend().stop(run, graceful=True)
    assert status.state == "stopped" and status.reason.startswith("stopped by the user"), status.reason
    stopped_at = status.step
    assert status.resumable_checkpoint and run.checkpoint_step("last") == stopped_at >= 1
    assert nothing_left(run)
    # resume it on the cluster from the same checkpoint files (as the console's Resume does)
    config = load_config(run.config_path).with_updates({"run.resume": str(run.checkpoint("last").absolute())})
    run.restart_for_resume()
    (run.config_path).write_text(config.to_yaml())
    SlurmBackend().launch(run)
    refreshed_until(run, lambda s: [r for r in train_records(run) if r.get("generation") == 2] or s.state in TERMINAL_STATES,
                    START_S, "a resumed step")
    assert min(r["step"] for r in train_records(run) if r.get("generation") == 2) == stopped_at + 1
    resumed = [json.loads(line) for line in run.metrics_path.read_text().splitlines() if '"resume"' in line]
    assert [(r["step"], r["generation"]) for r in resumed] == [(stopped_at, 2)]
    final = SlurmBackend().stop(run, graceful=False)
    assert final.state == "stopped" and final.reason.startswith(launcher.FORCED_STOP_REASON), final.reason
    assert final.cluster.state in ("CANCELLED", "COMPLETED") and nothing_left(run)


def test_two_node_run_equals_local_data_parallel_2_and_exports(jobs):
    cluster = jobs["parity"]
    status = refreshed_until_over(cluster, START_S + END_S, "the 2-node run")
    assert status.state == "finished" and status.cluster.state == "COMPLETED", (status.cluster, status.reason)
    assert status.cluster.nodes == ["node1", "node2"], status.reason
    local_start, launched = jobs["local"]
    local = launched.run_dir
    wait_for(lambda: launcher.watch(local).state in TERMINAL_STATES and launched.poll() is not None, END_S, 0.5,
             "the local data-parallel run's end")
    assert local.read_status().state == "finished", local.read_status().reason
    two_nodes = {r["step"]: r["loss"] for r in train_records(cluster)}
    one_node = {r["step"]: r["loss"] for r in train_records(local)}
    assert sorted(two_nodes) == sorted(one_node) == [1, 2, 3, 4]
    difference = max(abs(two_nodes[s] - one_node[s]) for s in one_node)
    assert difference <= 1e-5
    from core.engine.export import export_run
    exported = export_run(cluster.path, "best", "peft")
    assert (Path(exported) / "adapter_model.safetensors").is_file()
    submit_to_step = train_records(cluster)[0]["time"] - status.cluster.submitted_at
    launch_to_step = train_records(local)[0]["time"] - local_start
    print(f"\n2-node vs local DP=2: max loss difference {difference:.2e}; submit-to-first-step "
          f"{submit_to_step:.1f} s on the cluster, launch-to-first-step {launch_to_step:.1f} s locally")


def test_a_job_past_its_time_limit_is_ended_by_slurm(jobs):
    """Slurm's TIMEOUT (the console's words for it: tests/app/test_cluster_console.py); Slurm sends
    SIGTERM first, so the worker may stop with a checkpoint or fail. Last in the module: its minute
    has passed while the other tests ran."""
    run = jobs["time_limit"]
    status = refreshed_until_over(run, START_S + END_S, "the job at its time limit")
    print(f"time limit: the run is {status.state} ({status.reason}); Slurm says {status.cluster.state}")
    assert status.cluster.state == "TIMEOUT" and status.state in ("stopped", "failed"), (status.cluster, status.reason)
    wait_for(lambda: nothing_left(run), 90, 1.0, "nothing of the run left")
