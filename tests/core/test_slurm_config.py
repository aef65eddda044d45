"""The `launch` config section and the Slurm backend's parts that need no cluster: every refusal
names its field, the batch script, the shared-storage check, the backend seam."""
from __future__ import annotations

from pathlib import Path

import pytest

import core.run.launcher as launcher
import core.run.slurm as slurm
from core.spec.config import Config, ConfigError, load_config
import core.run.backends as backends
from core.run.backends import LocalBackend, backend_for
from core.run.launcher import LaunchError
from core.run.records import ClusterJob, Status
from core.run.rundir import RunDir

ROOT = Path(__file__).resolve().parents[2]
SLURM2 = {"launch.backend": "slurm", "launch.nodes": 2, "parallel.data_parallel": 2}


def refusal(updates: dict) -> dict[str, str]:
    with pytest.raises(ConfigError) as info:
        Config().with_updates(updates)
    return info.value.errors


def test_launch_defaults_are_local_and_slurm_fields_round_trip(tmp_path):
    assert Config().launch.backend == "local" and Config().launch.nodes == 1
    config = Config().with_updates({**SLURM2, "launch.partition": "debug", "launch.account": "ml-team",
                                    "launch.time_limit": "1-02:30", "launch.sbatch_options": "--mem=4G --qos=high",
                                    "launch.env": "HF_HOME: /data/hf, OMP_NUM_THREADS: 4"})
    assert config.launch.sbatch_options == ["--mem=4G", "--qos=high"]
    assert config.launch.env == {"HF_HOME": "/data/hf", "OMP_NUM_THREADS": "4"}
    path = tmp_path / "c.yaml"
    path.write_text(config.to_yaml())
    assert load_config(path) == config


@pytest.mark.parametrize("limit,minutes", [("30", 30), ("30:30", 30.5), ("1:30:00", 90), ("2-12", 3600),
                                           ("2-12:30", 3630), ("0-00:01:30", 1.5)])
def test_time_limit_forms(limit, minutes):
    from core.spec.config import time_limit_minutes
    assert Config().with_updates({"launch.time_limit": limit}).launch.time_limit == limit
    assert time_limit_minutes(limit) == minutes


@pytest.mark.parametrize("limit", ["1:99", "25:61:00", "1-24", "1h", "-5", "0", "1:2:3:4"])
def test_bad_time_limit_is_refused_naming_the_field(limit):
    errors = refusal({"launch.time_limit": limit})
    assert list(errors) == ["launch.time_limit"]


@pytest.mark.parametrize("option,says", [
    ("--output=/tmp/x", "sets --output"), ("--out=/tmp/x", "sets --output"), ("--error=e", "sets --error"),
    ("--chdir=/", "sets --chdir"), ("--wrap=rm -rf /", "sets --wrap"), ("--wrap=ls", "sets --wrap"),
    ("--parsable", "sets --parsable"), ("-o", "long form"), ("-D/tmp", "long form"), ("--mem=1G;reboot", "';'"),
    ("--comment=$(id)", "'$'"), ("--comment=a\nb", "'\\n'"), ("--comment=`id`", "'`'"),
    ("--nodes=8", "use launch.nodes"), ("--partition=x", "use launch.partition"), ("--time=5", "use launch.time_limit"),
    ("--export=NONE", "use launch.env"), ("--mem 4G", "one '--name=value' item"), ("mem=4G", "one '--name=value' item"),
])
def test_injected_sbatch_options_are_refused(option, says):
    errors = refusal({"launch.sbatch_options": [option]})
    assert list(errors) == ["launch.sbatch_options"] and says in errors["launch.sbatch_options"]


@pytest.mark.parametrize("env,says", [({"1X": "a"}, "'1X'"), ({"A-B": "a"}, "'A-B'"), ({"A": "x\ny"}, "newline"),
                                      ({"A": [1]}, "a string")])
def test_bad_env_is_refused(env, says):
    errors = refusal({"launch.env": env})
    assert list(errors) == ["launch.env"] and says in errors["launch.env"]


def test_partition_and_account_names_are_checked():
    assert list(refusal({"launch.partition": "debug; rm"})) == ["launch.partition"]
    assert list(refusal({"launch.account": "a b"})) == ["launch.account"]


def test_nodes_times_workers_must_equal_data_parallel():
    errors = refusal({"launch.backend": "slurm", "launch.nodes": 2, "launch.workers_per_node": 2,
                      "parallel.data_parallel": 2})
    assert "(2 x 2 = 4) must equal parallel.data_parallel (2)" in errors["launch.nodes"]
    assert Config().with_updates({"launch.nodes": 3}).launch.nodes == 3  # local: nodes is not used


def test_check_shared_names_the_setting(tmp_path):
    shared = tmp_path / "shared"
    (shared / "runs").mkdir(parents=True)
    slurm.check_shared(shared / "runs", shared)
    for runs, setting in [(tmp_path / "elsewhere", shared), (shared / "runs", None),
                          (shared / "runs", tmp_path / "missing")]:
        with pytest.raises(LaunchError, match="--cluster-shared-dir"):
            slurm.check_shared(runs, setting)
    (tmp_path / "link").symlink_to(tmp_path)  # a link out of the shared folder is outside it
    (shared / "out").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    with pytest.raises(LaunchError, match="not inside"):
        slurm.check_shared(shared / "out", shared)


def test_batch_script_runs_one_msrun_per_node(tmp_path):
    config = Config().with_updates({**SLURM2, "launch.partition": "debug", "launch.time_limit": "10",
                                    "launch.sbatch_options": ["--mem=2G"], "launch.env": {"A_B": "it's $HOME"}})
    run = launcher.create_run(config.with_updates({"run.runs_dir": str(tmp_path)}))
    script = slurm.build_script(run, config, 29500, python="/venv/bin/python")
    lines = script.splitlines()
    assert lines[0] == "#!/bin/bash"
    for line in ["#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=1", "#SBATCH --partition=debug",
                 "#SBATCH --time=10", f"#SBATCH --output={run.slurm_output}", f"#SBATCH --chdir={launcher.REPO_ROOT}",
                 "export A_B='it'\"'\"'s $HOME'", f"export MINDTUNE_RUN_DIR={run.path}"]:
        assert line in lines, line
    assert lines[-1] == ("srun --nodes=2 --ntasks-per-node=1 --kill-on-bad-exit=1 /venv/bin/python -m core.slurm_node "
                         f"--run-dir {run.path} --master-port=29500 --workers-per-node=1")
    assert slurm.sbatch_argv(run, config) == ["sbatch", "--parsable", "--mem=2G", str(run.sbatch_script)]


def test_msrun_per_node_command():
    from core.run.slurm_node import msrun_argv
    argv = msrun_argv(RunDir("/shared/runs/r1"), 1, 2, 1, "10.0.0.5", 29500, python="py")
    assert argv[:4] == ["py", "-m", "core.slurm_node", "--msrun"]
    assert argv[5:11] == ["--worker_num=2", "--local_worker_num=1", "--node_rank=1", "--master_addr=10.0.0.5",
                          "--master_port=29500", "--join=True"]


def test_backend_seam(tmp_path):
    assert isinstance(backend_for(Config()), LocalBackend) and backend_for(None).uses_own_queue
    cluster = backend_for(Config().with_updates(SLURM2))
    assert cluster.name == "slurm" and not cluster.uses_own_queue
    assert isinstance(cluster, backends.Backend) and isinstance(LocalBackend(), backends.Backend)
    assert backend_for(Status(cluster=ClusterJob(job_id="7"))).name == "slurm"
    with pytest.raises(LaunchError, match="unknown"):
        backend_for("kubernetes")
    run = launcher.create_run(Config().with_updates({"run.runs_dir": str(tmp_path)}))
    assert backend_for(run).name == "local" and LocalBackend().active(tmp_path) == []
    run.write_status(state="starting")
    assert LocalBackend().active(tmp_path) == [RunDir(run.path)]


def test_cluster_job_round_trips_in_status(tmp_path):
    run = launcher.create_run(Config().with_updates({"run.runs_dir": str(tmp_path)}))
    run.write_status(cluster=ClusterJob(job_id="12", state="PENDING", reason="Resources", nodes=["node1"]))
    job = run.read_status().cluster
    assert (job.job_id, job.state, job.reason, job.nodes, job.backend) == ("12", "PENDING", "Resources", ["node1"], "slurm")
    run.write_status(state="stopped")
    assert run.restart_for_resume().cluster is None  # a resume is submitted afresh


def test_local_watcher_leaves_a_cluster_run_to_its_backend(tmp_path):
    """A console still polling launcher.watch/reconcile must not call a cluster run crashed because
    no process of it lives on this machine (its nodes are elsewhere)."""
    run = launcher.create_run(Config().with_updates({"run.runs_dir": str(tmp_path)}))
    run.write_status(state="starting", pid=4_000_000, create_time=1.0, cluster=ClusterJob(partition="debug"))
    assert launcher.reconcile(run).state == "starting" and launcher.watch(run).state == "starting"
    local = launcher.create_run(Config().with_updates({"run.runs_dir": str(tmp_path), "run.name": "local"}))
    local.write_status(state="starting", pid=4_000_000, create_time=1.0)
    assert launcher.reconcile(local).state == "failed"  # the same on this machine is a crash


# ---- how a job Slurm ended is judged, and the partition's limits (no cluster: Slurm's own answers) ----

def ended_run(tmp_path) -> RunDir:
    run = launcher.create_run(Config().with_updates({"run.runs_dir": str(tmp_path), **SLURM2}))
    run.write_status(state="starting", cluster=ClusterJob(job_id="41", state="RUNNING", nodes=["node1", "node2"]))
    run.write_status(state="running", step=3)
    run.slurm_output.write_text("step 3\nslurmstepd: error: *** JOB 41 ON node2 CANCELLED AT 12:00 ***\n")
    return run


@pytest.mark.parametrize("state, verdict, says, kind", [
    ("TIMEOUT", "failed", "Slurm job 41 on node1, node2 reached its time limit and Slurm ended it (launch.time_limit)",
     "cluster"),
    ("NODE_FAIL", "failed", "Slurm job 41 on node1, node2: a node failed (NODE_FAIL) and Slurm ended the job", "cluster"),
    ("OUT_OF_MEMORY", "failed", "out of memory: Slurm ended Slurm job 41 on node1, node2 (OUT_OF_MEMORY). To fit in "
     "memory, lower train.micro_batch_size", "oom"),
    ("PREEMPTED", "stopped", "Slurm job 41 on node1, node2 was preempted by Slurm (a higher-priority job took its "
     "nodes)", None),
    ("CANCELLED", "stopped", "Slurm job 41 on node1, node2 was cancelled outside the console (scancel); the run did "
     "not crash", None),
    ("FAILED", "failed", "Slurm job 41 on node1, node2 ended (FAILED, exit code 1:0) without the run's final status; "
     "see slurm.out and logs/", "cluster"),
])
def test_each_way_slurm_ends_a_job_has_its_verdict(tmp_path, state, verdict, says, kind):
    run = ended_run(tmp_path)
    info = slurm.JobInfo("41", state, None, ("node1", "node2"), exit_code="1:0")
    got, reason, fields = slurm._job_verdict(run, run.read_status(), info)
    assert (got, fields.get("failure_kind")) == (verdict, kind)
    assert reason.startswith(says)
    if verdict == "failed":  # the job's own output says what Slurm did
        assert fields["error_lines"] == ["slurmstepd: error: *** JOB 41 ON node2 CANCELLED AT 12:00 ***"]


def test_a_cancel_the_user_asked_for_is_their_stop(tmp_path):
    run = ended_run(tmp_path)
    info = slurm.JobInfo("41", "CANCELLED", None, ("node1", "node2"))
    run.write_control(stop="graceful")
    assert slurm._job_verdict(run, run.read_status(), info)[:2] == ("stopped", "stopped by the user")
    run.write_control(stop="now")
    assert slurm._job_verdict(run, run.read_status(), info)[:2] == ("stopped", launcher.FORCED_STOP_REASON)


SCONTROL = ("PartitionName=debug AllowGroups=ALL Default=YES MaxNodes=2 MaxTime=00:30:00 State=UP TotalNodes=2\n"
            "PartitionName=long Default=NO MaxNodes=UNLIMITED MaxTime=2-00:00:00 State=UP TotalNodes=4\n"
            "PartitionName=maint Default=NO MaxNodes=UNLIMITED MaxTime=UNLIMITED State=DOWN TotalNodes=1\n")


def test_the_partitions_limits_are_checked_before_submission(monkeypatch):
    """`scontrol show partition -o` as Slurm answers it: a time limit over the partition's MaxTime, more
    nodes than it allows per job, and a partition that is down are refused naming the field."""
    import subprocess

    def scontrol(argv, *args, **kwargs):
        assert argv == ["scontrol", "show", "partition", "-o"]
        return subprocess.CompletedProcess(argv, 0, SCONTROL, "")

    monkeypatch.setattr(slurm, "_slurm", scontrol)
    assert [(p.name, p.max_time, p.max_nodes, p.default) for p in slurm.partitions()] == [
        ("debug", "00:30:00", 2, True), ("long", "2-00:00:00", None, False), ("maint", "UNLIMITED", None, False)]

    def errors(**launch) -> dict[str, str]:
        config = Config().with_updates({**SLURM2, **{f"launch.{k}": v for k, v in launch.items()}})
        with pytest.raises(ConfigError) as info:
            slurm.check_submission(config)
        return info.value.errors

    assert errors(time_limit="45") == {"launch.time_limit": "is over partition debug's limit of 00:30:00 (got '45')"}
    assert slurm.check_submission(Config().with_updates({**SLURM2, "launch.time_limit": "30"})).name == "debug"
    assert slurm.check_submission(Config().with_updates({**SLURM2, "launch.partition": "long",
                                                        "launch.time_limit": "1-12"})).name == "long"
    assert errors(partition="long", time_limit="3-00") == {
        "launch.time_limit": "is over partition long's limit of 2-00:00:00 (got '3-00')"}
    assert errors(partition="maint") == {  # every refusal at once
        "launch.partition": "the partition is DOWN in Slurm; jobs cannot start there (got 'maint')",
        "launch.nodes": "partition maint has 1 node(s); ask for at most 1 (got 2)"}
