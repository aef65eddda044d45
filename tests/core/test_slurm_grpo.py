"""GRPO on the real two-node Slurm test cluster (scripts/slurm_cluster.sh: node1 and node2, partition
`debug`): a 3-step GRPO run with one worker on each node equals the same global batch on one process
(gradient accumulation 2): every reward of every step identical (each prompt's completions are sampled
by a generator seeded by the step and the prompt's place, whichever worker draws it) and the losses
equal to 1e-5. Nothing in the Slurm path is objective-specific; this shows it."""
from __future__ import annotations

import subprocess

import pytest

import core.run.launcher as launcher
from core.run.records import TERMINAL_STATES
from core.run.slurm import SlurmBackend
from core.spec.config import load_config
from tests.core.test_grpo_train import GRPO
from tests.core.test_slurm import START_S, END_S
from tests.core.test_train import losses, records, run_cli
from tests.core.tiny_setup import make_workspace
from tests.slurm_fixtures import PARTITION, refreshed_until_over, require_slurm

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

STEPS = ("train.max_steps=3", "train.eval_every=3", "train.save_every=100", "train.log_every=1")
CLUSTER = ("launch.backend=slurm", "launch.nodes=2", "launch.workers_per_node=1", f"launch.partition={PARTITION}",
           "parallel.data_parallel=2")


def test_grpo_on_two_nodes_equals_one_process_with_the_same_global_batch(tmp_path_factory):
    require_slurm()
    workspace = make_workspace(tmp_path_factory.mktemp("grpo-slurm-ws"))
    runs_dir = tmp_path_factory.mktemp("grpo-slurm-runs")
    cluster = launcher.create_run(load_config(workspace, [*GRPO, *STEPS, *CLUSTER, f"run.runs_dir={runs_dir}"]))
    SlurmBackend().launch(cluster)
    try:
        # the single-process run meanwhile (the cluster's workers start up while it trains)
        single = run_cli(workspace, *GRPO, *STEPS, "train.grad_accum_steps=2")
        status = refreshed_until_over(cluster, START_S + END_S, "the 2-node GRPO run")
    finally:
        job = cluster.read_status().cluster
        if job is not None and job.job_id and cluster.read_status().state not in TERMINAL_STATES:
            subprocess.run(["scancel", job.job_id], check=False)
    assert status.state == "finished", status.reason
    assert status.cluster.state == "COMPLETED" and status.cluster.nodes == ["node1", "node2"], status.cluster
    assert single.read_status().state == "finished", single.read_status().reason
    one, two = records(single, "train"), records(cluster, "train")
    assert [r["step"] for r in two] == [r["step"] for r in one] == [1, 2, 3]
    assert [r["reward"] for r in two] == pytest.approx([r["reward"] for r in one], abs=1e-9)
    for step, loss in losses(single).items():
        assert losses(cluster)[step] == pytest.approx(loss, abs=1e-5), step
    assert [r["val_reward"] for r in records(cluster, "eval")] == pytest.approx(
        [r["val_reward"] for r in records(single, "eval")], abs=1e-9)
