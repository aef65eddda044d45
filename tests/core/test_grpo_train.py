"""GRPO runs end to end on the tiny workspace (train.objective grpo): its reward figures per step and at
every evaluation, the completions shown, resume equal to the uninterrupted run (the samplers are seeded by
step and prompt, so a resumed run samples what the uninterrupted one did), num_iterations' rollouts kept
in a checkpoint, two workers equal to one on the same global batch, and a reward function that fails
ending the run with its name and its last checkpoint intact."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from core.run.ckpt_store import verified_folder
from core.run.rundir import RunDir
from core.train import main as train_main
from tests.core.test_train import assert_same_losses, losses, records, run_cli
from tests.core.tiny_setup import make_workspace

pytestmark = pytest.mark.slow  # tiny GRPO runs: rollouts and updates, ~20-40 s each on a loaded 2-core machine

# a completion scores 1 when it holds an 'e' (random words: some do, some don't, so groups have a spread)
# and the soft length penalty past 6 of its 8 tokens
GRPO = ("train.objective=grpo", "early_stopping.monitor=val_reward", "grpo.num_generations=4",
        "grpo.max_prompt_len=48", "grpo.max_new_tokens=8", "eval.max_eval_samples=8", "train.micro_batch_size=2",
        "grpo.rewards=[{function: regex, pattern: '.*e.*'}, {function: length, soft_tokens: 2, weight: 0.5}]")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    return make_workspace(tmp_path_factory.mktemp("grpo-ws"))


@pytest.fixture(scope="module")
def grpo_run(workspace):
    return run_cli(workspace, *GRPO)


def test_grpo_run_logs_rewards_and_completions(grpo_run):
    status = grpo_run.read_status()
    assert status.state == "finished", status.reason
    train = records(grpo_run, "train")
    assert [r["step"] for r in train] == list(range(1, 9))
    for r in train:
        assert set(r["rewards"]) == {"regex", "length"}
        # the total is the weighted sum of the functions' means
        assert r["reward"] == pytest.approx(r["rewards"]["regex"] + 0.5 * r["rewards"]["length"], abs=1e-9)
        assert 0.0 <= r["zero_std_share"] <= 1.0 and 1 <= r["completion_len"] <= r["completion_len_max"] <= 8
        assert r["rollout_s"] > 0 and r["update_s"] > 0 and r["kl"] is None  # beta 0: no KL term
    assert any(r["loss"] != 0.0 for r in train)  # some groups have a spread: a gradient
    evals = records(grpo_run, "eval")
    assert [r["step"] for r in evals] == [0, 4, 8]
    for r in evals:
        assert r["val_reward"] == pytest.approx(r["val_rewards"]["regex"] + 0.5 * r["val_rewards"]["length"], abs=1e-9)
        assert r["val_ppl"] is None and r["monitor"] in (None, "val_reward")
    shown = [r for r in records(grpo_run, "event") if r["event"] == "completions"]
    assert len(shown) == 3 and len(shown[0]["samples"]) == 4
    sample = shown[0]["samples"][0]
    assert sample["prompt"] and set(sample["rewards"]) == {"regex", "length"}
    assert sample["total"] == pytest.approx(sample["rewards"]["regex"] + 0.5 * sample["rewards"]["length"])
    assert status.final.val_reward is not None and status.final.monitor == "val_reward"
    setup = next(r for r in records(grpo_run, "event") if r["event"] == "setup")
    assert "objective grpo, 4 completions per prompt, rewards regex, length" in setup["message"]


def test_grpo_resume_matches_uninterrupted_run(grpo_run, workspace):
    resumed = run_cli(workspace, *GRPO, f"run.resume={grpo_run.checkpoints_dir / 'step-4'}")
    assert_same_losses(grpo_run, resumed, [5, 6, 7, 8], 1e-6)
    full, again = records(grpo_run, "train"), records(resumed, "train")
    assert [r["reward"] for r in full[4:]] == [r["reward"] for r in again]  # the same completions sampled
    assert records(resumed, "eval")[-1]["val_reward"] == records(grpo_run, "eval")[-1]["val_reward"]


def test_num_iterations_keeps_the_rollouts_across_a_resume(workspace):
    """grpo.num_iterations 2: each batch of rollouts trains two steps; a checkpoint between them keeps
    the rollouts, so the resumed run's second update is the uninterrupted run's."""
    common = (*GRPO, "grpo.num_iterations=2", "train.max_steps=5", "train.save_every=3", "train.eval_every=5")
    full = run_cli(workspace, *common)
    train = records(full, "train")
    assert train[0]["reward"] == train[1]["reward"] and train[2]["reward"] == train[3]["reward"]
    resumed = run_cli(workspace, *common, f"run.resume={full.checkpoints_dir / 'step-3'}")
    assert_same_losses(full, resumed, [4, 5], 1e-6)


def test_grpo_on_two_workers_matches_one(workspace):
    """Same global batch (4 prompts × 4 completions) and seed: DP=2 × 2 prompts vs DP=1 × 2 prompts ×
    accumulation 2. Each prompt's completions are sampled from its own seeded generators, so both sample
    the same completions; dapo's denominator counts the step's tokens on every worker."""
    common = (*GRPO, "train.max_steps=3", "train.eval_every=3", "train.save_every=100")
    single = run_cli(workspace, *common, "train.grad_accum_steps=2")
    assert train_main(["--config", str(workspace), *common, "parallel.data_parallel=2"]) == 0
    runs_dir = Path(yaml.safe_load(workspace.read_text())["run"]["runs_dir"])
    double = RunDir(max((p for p in runs_dir.iterdir() if "_dp2" in p.name and not p.is_symlink()),
                        key=os.path.getmtime))
    assert double.read_status().state == "finished", double.read_status().reason
    one, two = records(single, "train"), records(double, "train")
    assert [r["reward"] for r in one] == pytest.approx([r["reward"] for r in two], abs=1e-9)
    for a, b in zip(losses(single).values(), losses(double).values()):
        assert a == pytest.approx(b, abs=1e-5)


def test_a_failing_reward_function_ends_the_run_with_its_name(workspace, tmp_path):
    """A user's reward file whose function raises at step 5 (its 7th call: the baseline, steps 1-4 and the
    evaluation at step 4 came first): the run fails naming the function and the error, its traceback is
    in train.log, and the checkpoint of step 4 is intact (its manifest verifies)."""
    rewards = tmp_path / "rewards.py"
    rewards.write_text("import pathlib\n"
                       "def judge(prompts, completions, **columns):\n"
                       "    calls = pathlib.Path(__file__).with_suffix('.calls')\n"
                       "    n = int(calls.read_text()) if calls.exists() else 0\n"
                       "    calls.write_text(str(n + 1))\n"
                       "    if n >= 6:\n"
                       "        raise ValueError('the judge is out')\n"
                       "    return [float('e' in c) for c in completions]\n")
    run = run_cli(workspace, *GRPO[:-1], f"grpo.rewards=[{{function: file, path: '{rewards}', name: judge}}]")
    status = run.read_status()
    assert status.state == "failed" and status.failure_kind == "config"
    assert "judge" in status.reason and "the judge is out" in status.reason
    log = run.log_path.read_text()
    assert "Traceback" in log and "raise ValueError('the judge is out')" in log
    assert [r["step"] for r in records(run, "train")] == [1, 2, 3, 4]
    verified_folder(run.checkpoints_dir / "step-4")  # raises if a file differs from its manifest
