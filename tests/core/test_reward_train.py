"""A reward-model run (train.objective reward) end to end on the tiny workspace: its validation pair
figures, the head saved with the adapters, resume exactness, a fork from an SFT checkpoint (the head
keeps its seeded start) and the finished run scoring completions as GRPO's reward function."""
from __future__ import annotations

import numpy as np
import pytest

from core.engine.checkpoint import load_train_checkpoint
from core.spec.objectives import REWARD_HEAD
from tests.core.test_preference_train import workspace  # noqa: F401 — the tiny workspace with pairs
from tests.core.test_train import assert_same_losses, records, run_cli

pytestmark = pytest.mark.slow  # two tiny runs and a resume


def _reward(workspace, *overrides):  # noqa: F811
    data = workspace.parent / "data"
    return run_cli(workspace, "train.objective=reward", "early_stopping.monitor=reward_accuracy",
                   "train.learning_rate=5e-3", f"data.train_file={data / 'pairs-train.jsonl'}",
                   f"data.validation_file={data / 'pairs-val.jsonl'}", "data.test_file=null", *overrides)


@pytest.fixture(scope="module")
def reward_run(workspace):  # noqa: F811
    return _reward(workspace)


def test_reward_run_trains_a_head_and_logs_pair_figures(reward_run):
    status = reward_run.read_status()
    assert status.state == "finished", status.reason
    evals = records(reward_run, "eval")
    assert [r["step"] for r in evals] == [0, 4, 8]
    for r in evals:  # the pair figures agree with each other; no perplexity for a reward model
        assert r["reward_margin"] == pytest.approx(r["chosen_reward"] - r["rejected_reward"], abs=1e-6)
        assert r["val_ppl"] is None and 0.0 <= r["reward_accuracy"] <= 1.0
    assert evals[-1]["val_loss"] < evals[0]["val_loss"]  # Bradley-Terry on the validation pairs falls
    assert status.final.reward_accuracy is not None and status.final.monitor == "reward_accuracy"
    setup = next(r for r in records(reward_run, "event") if r["event"] == "setup")
    assert "objective reward" in setup["message"]
    weights, _, state = load_train_checkpoint(reward_run.checkpoints_dir / "last")
    assert weights[REWARD_HEAD].shape == (1, 32) and any(k.endswith("lora_a") for k in weights)
    assert state["config"]["train"]["objective"] == "reward"


def test_reward_resume_matches_uninterrupted_run(reward_run, workspace):  # noqa: F811
    resumed = _reward(workspace, f"run.resume={reward_run.checkpoints_dir / 'step-4'}")
    assert_same_losses(reward_run, resumed, [5, 6, 7, 8], 1e-6)
    assert records(resumed, "eval")[-1]["reward_accuracy"] == records(reward_run, "eval")[-1]["reward_accuracy"]


def test_reward_run_forked_from_sft_and_scoring_completions(reward_run, workspace):  # noqa: F811
    from core.engine.reward_scorer import RewardModelScorer
    sft = run_cli(workspace, "train.max_steps=4", "eval.downstream=false")
    fork = _reward(workspace, f"run.fork_from={sft.checkpoints_dir / 'step-4'}", "train.max_steps=6",
                   "train.eval_every=2")
    assert fork.read_status().state == "finished", fork.read_status().reason
    assert records(fork, "eval")[0]["step"] == 4
    scorer = RewardModelScorer(str(reward_run.path))
    scores = scorer(["What is 2 + 2?", "What is 2 + 2?"], ["4", "five"])
    assert len(scores) == 2 and all(np.isfinite(scores))
    assert scorer(["What is 2 + 2?"], ["4"])[0] == pytest.approx(scores[0], abs=1e-5)  # batch-independent
