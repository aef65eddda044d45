"""A preference run end to end on the tiny workspace: DPO with LoRA (the reference is the base with
the adapter off), its validation figures every eval, resume exactness, and a DPO run forked from an
SFT checkpoint, whose reference is the SFT model (rewards exactly 0 at the fork point)."""
from __future__ import annotations

import random

import numpy as np
import pytest

from core.run.rundir import display_name
from tests.core.test_train import losses, records, run_cli
from tests.core.tiny_setup import make_rows, make_workspace, write_jsonl

pytestmark = pytest.mark.slow  # three tiny runs and a resume: ~40 s each on a loaded 2-core machine


def _pairs(n: int, seed: int) -> list[dict]:
    """The tiny task as pairs: the right word chosen, another word of the input rejected."""
    rng = random.Random(seed)
    out = []
    for row in make_rows(n, seed):
        wrong = rng.choice([w for w in row["input"].split() if w != row["output"]])
        out.append({"instruction": row["instruction"], "input": row["input"], "chosen": row["output"],
                    "rejected": wrong})
    return out


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    root = tmp_path_factory.mktemp("pref-ws")
    config = make_workspace(root)
    write_jsonl(root / "data" / "pairs-train.jsonl", _pairs(48, 1))
    write_jsonl(root / "data" / "pairs-val.jsonl", _pairs(8, 2))
    return config


def _dpo(workspace, *overrides):
    data = workspace.parent / "data"
    return run_cli(workspace, "train.objective=dpo", "preference.beta=0.5", f"data.train_file={data / 'pairs-train.jsonl'}",
                   f"data.validation_file={data / 'pairs-val.jsonl'}", "data.test_file=null", *overrides)


@pytest.fixture(scope="module")
def dpo_run(workspace):
    return _dpo(workspace)


def test_dpo_run_logs_reward_figures_and_raises_reward_accuracy(dpo_run):
    status = dpo_run.read_status()
    assert status.state == "finished"
    evals = records(dpo_run, "eval")
    assert [r["step"] for r in evals] == [0, 4, 8]
    base, last = evals[0], evals[-1]
    # before the first step the policy is the reference: every reward is 0, the loss is log 2
    assert base["chosen_reward"] == base["rejected_reward"] == 0.0 and base["val_loss"] == pytest.approx(np.log(2))
    assert last["reward_margin"] > 0 and last["reward_accuracy"] > 0.5
    assert all(r["chosen_reward"] - r["rejected_reward"] == pytest.approx(r["reward_margin"]) for r in evals)
    assert status.final.reward_accuracy is not None and "reward acc" in display_name(dpo_run.run_id, status.final)
    setup = next(r for r in records(dpo_run, "event") if r["event"] == "setup")
    assert "objective dpo, reference adapter_off" in setup["message"]
    assert setup["data"]["train"]["pairs"] == 48


def test_dpo_resume_matches_uninterrupted_run(dpo_run, workspace):
    resumed = _dpo(workspace, f"run.resume={dpo_run.checkpoints_dir / 'step-4'}")
    full, tail = losses(dpo_run), losses(resumed)
    assert sorted(tail) == [5, 6, 7, 8]
    for step in tail:
        assert abs(tail[step] - full[step]) <= 1e-6, (step, tail[step], full[step])
    last_full, last_resumed = records(dpo_run, "eval")[-1], records(resumed, "eval")[-1]
    assert last_resumed["reward_accuracy"] == last_full["reward_accuracy"]
    assert last_resumed["reward_margin"] == pytest.approx(last_full["reward_margin"], abs=1e-6)


def test_dpo_forked_from_an_sft_checkpoint_takes_the_sft_model_as_reference(workspace):
    sft = run_cli(workspace, "train.max_steps=4", "eval.downstream=false")
    fork = _dpo(workspace, f"run.fork_from={sft.checkpoints_dir / 'step-4'}", "train.max_steps=6",
                "train.eval_every=2")
    base = records(fork, "eval")[0]
    assert base["step"] == 4 and base.get("base")
    # the policy starts as the SFT model and the reference is the SFT model: rewards exactly 0
    assert abs(base["chosen_reward"]) < 1e-6 and abs(base["rejected_reward"]) < 1e-6
    assert base["val_loss_ema"] == base["val_loss"]  # the SFT run's loss EMA is another loss: not carried
    assert any("fork point's model" in r["message"] for r in records(fork, "event"))
    assert fork.read_status().state == "finished"
