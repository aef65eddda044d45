"""A GRPO run's starting point, measured: the mean reward of a model's completions of a prompt set, greedy
(what a GRPO run's validation logs with grpo.eval_temperature 0) and sampled (what its rollouts get at
grpo.temperature), with the run's own reading of the prompts (core.data.prompts), generation
(core.engine.generate) and rewards (core.eval.rewards).

    .venv/bin/python bench/grpo_start_reward.py                                   # the shipped model
    .venv/bin/python bench/grpo_start_reward.py --checkpoint runs/<sft run>/checkpoints/best
    .venv/bin/python bench/grpo_start_reward.py --config configs/grpo_demo.yaml --split train
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core.data.prompts import load_prompt_splits, prompt_eval_batches  # noqa: E402
from core.data.tokenizer import Tokenizer  # noqa: E402
from core.engine.checkpoint import load_hf_model  # noqa: E402
from core.engine.export import load_trained_model  # noqa: E402
from core.engine.fused import enable  # noqa: E402
from core.engine.generate import SamplingSettings, generate, use_device  # noqa: E402
from core.eval.rewards import RewardSet  # noqa: E402
from core.spec.config import load_config  # noqa: E402


def mean_rewards(model, tokenizer, prompts, rewards: RewardSet, settings: SamplingSettings, repeat: int,
                 batch: int = 16) -> tuple[float, dict[str, float], float]:
    """(mean total reward, each function's mean, share of prompts with a completion scoring > 0) of
    `repeat` completions of every prompt."""
    eos = set(tokenizer.eos_token_ids) | set(model.args.eos_token_ids)
    totals, per_function, solved = [], {name: [] for name in rewards.names}, []
    for group in prompt_eval_batches(prompts, batch):
        ids = [p for p in group.prompt_ids for _ in range(repeat)]
        new = generate(model, ids, settings, eos, tokenizer.pad_token_id or 0)
        texts = [tokenizer.decode(n) for n in new]
        scores = rewards.score(group.prompts(repeat), texts, [len(n) for n in new], group.columns(repeat),
                               group.where(repeat))
        totals += scores.total.tolist()
        solved += (scores.total.reshape(-1, repeat) > 0).any(1).tolist()
        for name in rewards.names:
            per_function[name] += scores.values[name].tolist()
    return float(np.mean(totals)), {k: float(np.mean(v)) for k, v in per_function.items()}, float(np.mean(solved))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/grpo_demo.yaml")
    parser.add_argument("--checkpoint", help="a training checkpoint (default: the config's base model)")
    parser.add_argument("--split", default="validation", choices=("train", "validation"))
    parser.add_argument("--samples", type=int, default=4, help="sampled completions per prompt")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    use_device("cpu")
    config = load_config(args.config)
    g = config.grpo
    tokenizer = Tokenizer.from_dir(config.model.path)
    model = load_trained_model(args.checkpoint)[0] if args.checkpoint else load_hf_model(config.model.path)
    enable(model)
    splits = load_prompt_splits(config.data, tokenizer, config.run.seed, g.max_prompt_len)
    prompts = getattr(splits, args.split)
    with RewardSet.from_config(config) as rewards:
        for name, settings, repeat in (
                ("greedy", SamplingSettings(g.max_new_tokens, g.eval_temperature, 1.0, args.seed), 1),
                (f"sampled T={g.temperature:g} top_p={g.top_p:g} ×{args.samples}",
                 SamplingSettings(g.max_new_tokens, g.temperature, g.top_p, args.seed), args.samples)):
            start = time.perf_counter()
            total, functions, solved = mean_rewards(model, tokenizer, prompts, rewards, settings, repeat)
            shown = ", ".join(f"{k} {v:.3f}" for k, v in functions.items())
            print(f"{args.split} ({len(prompts)} prompts), {name}: mean reward {total:.3f} ({shown}); prompts with a "
                  f"rewarded completion {solved:.2f}; {time.perf_counter() - start:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
