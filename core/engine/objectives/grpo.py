"""GRPO (train.objective grpo): each step samples grpo.num_generations completions per prompt, scores
them with the run's reward functions, turns the rewards into group-relative advantages and takes a
clipped policy-gradient step (core.engine.grpo: the loss in the forms TRL's GRPOTrainer computes).

- Data: prompts (core.data.prompts) with the columns the rewards read; a micro batch is
  train.micro_batch_size prompts, so it trains micro × num_generations completion rows. Each worker
  samples the completions of its own prompts: a group is never split across workers.
- Sampling: a step's prompts on a worker (all its micro batches) are sampled in one rollout call, so each
  decoding step reads the weights once for all the rows (several calls only past the memory budget of
  core.spec.objectives.rollout_prompts). Every completion row draws from a generator seeded by (run seed,
  step, the prompt's place in the global batch), so the draws do not depend on the number of workers, the
  calls or a resume: a resumed run samples what the uninterrupted one did, and DP=2 samples what DP=1
  samples for the same global batch up to the logits' rounding (a worker's call holds fewer rows: its
  products, padding and shared prefix differ, ~1e-6, which moves a draw only at a boundary of its row's
  distribution). Rollouts run in the model's inference mode (core.engine.grpo.rollout: the
  fused inference kernel where the model allows, with the adapter merged into the kernel's own copy).
- Rewards: core.eval.rewards (built-ins, a user's file in a child process, a reward model run).
- num_iterations > 1: a batch of rollouts is trained on for that many optimizer steps, its sampling
  policy's log-probabilities kept as the old policy; the loop's step counts optimizer steps.
- Validation: one completion per validation prompt at grpo.eval_temperature (greedy by default, so the
  same weights give the same completions), the mean total reward (`val_reward`, what early stopping
  watches), each function's mean, and a few prompts with their completions (a `completions` event).
"""
from __future__ import annotations

import time
import zlib

import numpy as np

from core.data.prompts import PromptBatch, PromptBatches, load_prompt_splits, prompt_eval_batches
from core.engine.grpo import (STD_EPSILON, GrpoBatch, GrpoObjective, GrpoStep, advantages, dapo_normalizer,
                              grpo_batch, rollout, sampling_settings, summarize)
from core.engine.objectives.base import Objective
from core.engine.objectives.preference import frozen_reference, reference_from_fork
from core.engine.reward_scorer import RewardModelScorer
from core.eval.rewards import RewardSet
from core.run.records import CompletionsEvent, ValidationFigures
from core.spec.objectives import reference_kind, rollout_prompts

SHOWN_COMPLETIONS = 4  # validation prompts shown with their completions at each evaluation


def prompt_seed(seed: int, step: int, index: int) -> np.random.SeedSequence:
    """The sampler of one prompt at one step: the same on any number of workers and after a resume."""
    return np.random.SeedSequence([int(seed), int(step), int(index)])


class RowGenerators:
    """One generator per completion row, behind the one `random(n)` call the samplers make per decoding
    step (core.engine.generate.sample_next: one uniform draw per row)."""

    def __init__(self, seeds: list[np.random.SeedSequence]):
        self.rows = [np.random.default_rng(seed) for seed in seeds]

    def random(self, n: int) -> np.ndarray:
        if n != len(self.rows):
            raise ValueError(f"the sampler asked for {n} draws for {len(self.rows)} rows")
        return np.array([row.random() for row in self.rows])


def _place_key(where: str) -> int:
    """A record's place as a number for its sampler's seed (stable across processes)."""
    return zlib.crc32(where.encode("utf-8"))


class Grpo(Objective):
    def __init__(self, trainer):
        super().__init__(trainer)
        self.g = self.cfg.grpo
        self.buffer: list | None = None     # the rollouts being trained on (num_iterations > 1)
        self.iteration = 0                  # updates made on them so far
        self.rewards = None

    # ---- data -------------------------------------------------------------------------------
    def load_data(self, tokenizer, seed: int):
        return load_prompt_splits(self.cfg.data, tokenizer, seed, self.g.max_prompt_len)

    def sequence_length(self, splits) -> int:
        """Rows are a prompt (left-padded to the longest prompt of the data) then its completion
        (right-padded to grpo.max_new_tokens): one compiled shape for the whole run."""
        self.prompt_width = int(splits.stats.longest_prompt)
        return self.prompt_width + self.g.max_new_tokens

    def batches(self, splits, seed: int, pad_id: int):
        cfg, cluster = self.cfg, self.trainer.cluster
        return PromptBatches(splits.train, cfg.train.micro_batch_size, grad_accum_steps=cfg.train.grad_accum_steps,
                             world_size=cluster.world, rank=cluster.rank, seed=seed)

    # ---- the step ---------------------------------------------------------------------------
    def build_step(self, optimizer, loss_scaler, reducer, aux_coef: float) -> GrpoStep:
        t = self.trainer
        self.eos = set(t.tokenizer.eos_token_ids) | set(t.model.args.eos_token_ids)
        self.pad_id = t.tokenizer.pad_token_id or 0
        self.rewards = RewardSet.from_config(self.cfg, model_scorer=_reward_model_scorer)
        self.rewards.start()  # a reward file that does not import fails here, before the first step
        reference = frozen_reference(self.cfg)
        return GrpoStep(t.compute_model, optimizer, self.cfg.train.max_grad_norm, loss_scaler,
                        GrpoObjective.from_config(self.cfg), reducer, reference)

    def describe(self) -> str:
        kind = reference_kind(self.cfg)
        return (f"; objective grpo, {self.g.num_generations} completions per prompt, rewards "
                f"{', '.join(self.rewards.names)}" + (f", reference {kind}" if kind else ""))

    def after_fork(self, path: str) -> str | None:
        return reference_from_fork(self.cfg, self.trainer.train_step.reference_model, self.trainer.model, path)

    def draw(self, batches) -> list:
        """New prompts only when the rollouts in hand have had their num_iterations updates."""
        if self.buffer is not None and self.iteration < self.g.num_iterations:
            return []
        return [next(batches) for _ in range(self.cfg.train.grad_accum_steps)]

    def _texts(self, completions: list[list[int]]) -> list[str]:
        """The completions as the rewards read them: decoded without the end-of-turn token that ended them."""
        return [self.trainer.tokenizer.decode([tok for tok in c if tok not in self.eos]) for c in completions]

    def _sample(self, micro: list, step: int) -> tuple[list, dict]:
        """Rollouts and rewards of the step's prompts: the micro batches to train on and the figures. Every
        prompt of the step on this worker is sampled in one rollout call (each decoding step reads the weights
        once for all the rows), in several only past core.spec.objectives.rollout_prompts' memory budget; each
        row draws from its own generator, so how the prompts are split into calls changes no draw."""
        t, G = self.trainer, self.g.num_generations
        settings = sampling_settings(self.cfg)
        every = PromptBatch([record for batch in micro for record in batch.records])  # micro batches in order
        per_call = rollout_prompts(self.cfg, t.model.args)
        completions, truncated = [], []
        for start in range(0, len(every), per_call):
            part = PromptBatch(every.records[start:start + per_call])
            t.heartbeat.beat(t.state.step, "generate")
            seeds = [prompt_seed(self.cfg.run.seed, step, _place_key(where)).spawn(G) for where in part.where()]
            rng = RowGenerators([s for group in seeds for s in group])
            got, cut = rollout(t.model, part.prompt_ids, G, settings, self.eos, self.pad_id, rng)
            completions += got
            truncated += cut
        lengths = [len(c) for c in completions]
        scored = self.rewards.score(every.prompts(G), self._texts(completions), lengths, every.columns(G),
                                    every.where(G))
        totals = scored.total
        figures = self._reward_figures([scored], totals, lengths, truncated, len(every))
        if self.g.scale_rewards == "batch":  # the batch's spread over every worker's completions
            n, total, squares = t.cluster.sum([len(totals), float(totals.sum()), float((totals ** 2).sum())])
            spread = np.sqrt(max(squares - total * total / n, 0.0) / max(n - 1, 1))
        micro_batches, start = [], 0
        for batch in micro:
            end = start + len(batch) * G
            mine = totals[start:end]
            adv, _ = advantages(mine, G, "none" if self.g.scale_rewards == "batch" else self.g.scale_rewards)
            if self.g.scale_rewards == "batch":
                adv = (adv / (spread + STD_EPSILON)).astype(np.float32)
            micro_batches.append(grpo_batch(batch.prompt_ids, completions[start:end], truncated[start:end], adv, G,
                                            self.pad_id, self.g.mask_truncated_completions,
                                            widths=(self.prompt_width, self.g.max_new_tokens)))
            start = end
        step_tokens = t.cluster.sum([float(sum(b.tokens for b in micro_batches))])[0]
        if self.g.loss_type == "dapo":
            for b in micro_batches:
                b.normalizer = dapo_normalizer(int(step_tokens), len(micro_batches), t.cluster.world)
        return micro_batches, figures

    def _reward_figures(self, scores, totals, lengths, flags, groups) -> dict:
        """The step's reward figures over every worker's completions (sums all-reduced)."""
        names = self.rewards.names
        per = {name: np.concatenate([s.values[name] for s in scores]) for name in names}
        equal = sum(s.equal_groups(self.g.num_generations) * (len(s.total) // self.g.num_generations) for s in scores)
        vector = [len(totals), float(totals.sum()), float((totals ** 2).sum()), float(equal), float(groups),
                  float(sum(lengths)), float(sum(flags))]
        for name in names:
            vector += [float(per[name].sum()), float((per[name] ** 2).sum())]
        summed = self.trainer.cluster.sum(vector)
        n = max(summed[0], 1.0)

        def spread(total, squares):
            return float(np.sqrt(max(squares / n - (total / n) ** 2, 0.0)))
        return {"reward": summed[1] / n, "reward_std": spread(summed[1], summed[2]),
                "zero_std_share": summed[3] / max(summed[4], 1.0), "completion_len": summed[5] / n,
                "completion_len_max": int(max(lengths)), "truncated_share": summed[6] / n,
                "rewards": {name: summed[7 + 2 * i] / n for i, name in enumerate(names)},
                "rewards_std": {name: spread(summed[7 + 2 * i], summed[8 + 2 * i]) for i, name in enumerate(names)}}

    def step(self, micro: list) -> dict:
        t = self.trainer
        start = time.perf_counter()
        if micro:  # new rollouts (else the ones in hand, for another of their num_iterations updates)
            self.buffer, self.buffer_figures = self._sample(micro, t.state.step + 1)
            self.iteration = 0
        rollout_s = time.perf_counter() - start
        start = time.perf_counter()
        tokens = sum(int(b.attention_mask.sum()) for b in self.buffer)
        signal = t.cluster.sum([float(sum(np.abs(b.advantages).sum() for b in self.buffer))])[0]
        if signal == 0.0 and self.g.beta == 0:
            # every group on every worker scored alike: no gradient. Adam's moments would still move the
            # weights (measured on the demo: completions drifted to max_new_tokens and the reward to 0
            # over ~30 such steps), so there is no update, as with a skipped step
            self.iteration += 1
            scale = float(t.loss_scaler.scale_value.asnumpy()) if t.loss_scaler is not None else 1.0
            figures = {"kl": float("nan"), "clip_ratio/region_mean": 0.0, "entropy": float("nan")}
            return {"loss": 0.0, "grad_norm": 0.0, "applied": True, "loss_scale": scale,
                    "tokens": tokens, "rollout_s": rollout_s,
                    "update_s": time.perf_counter() - start, "figures": figures, "no_update": True,
                    **self.buffer_figures}
        loss, grad_norm, applied, scale = t.train_step(self.buffer)
        self.iteration += 1
        figures = summarize(t.cluster.sum(t.train_step.last_figures.sum(0).tolist()))
        return {"loss": loss, "grad_norm": grad_norm, "applied": applied, "loss_scale": scale, "tokens": tokens,
                "rollout_s": rollout_s, "update_s": time.perf_counter() - start, "figures": figures,
                **self.buffer_figures}

    def train_figures(self, out: dict) -> dict:
        f = out["figures"]
        kl = f["kl"] if self.g.beta > 0 else None
        entropy = f["entropy"] if np.isfinite(f["entropy"]) else None
        return {"reward": out["reward"], "reward_std": out["reward_std"], "rewards": out["rewards"],
                "rewards_std": out["rewards_std"], "zero_std_share": out["zero_std_share"], "kl": kl,
                "clip_ratio": f["clip_ratio/region_mean"], "completion_len": out["completion_len"],
                "completion_len_max": out["completion_len_max"], "truncated_share": out["truncated_share"],
                "entropy": entropy, "rollout_s": out["rollout_s"], "update_s": out["update_s"]}

    # ---- evaluation -------------------------------------------------------------------------
    def evaluate(self, max_tokens: int | None = None) -> ValidationFigures:
        """One completion per validation prompt (max_eval_samples of them) at grpo.eval_temperature,
        each sampler seeded by the prompt alone, so the same weights give the same completions."""
        t = self.trainer
        prompts = t.splits.validation[: self.cfg.eval.max_eval_samples or None]
        settings = sampling_settings(self.cfg, evaluation=True)
        totals, per, lengths, flags, shown = [], {n: [] for n in self.rewards.names}, [], [], []
        for batch in prompt_eval_batches(prompts, max(self.cfg.train.micro_batch_size * self.g.num_generations, 1)):
            t.heartbeat.beat(t.state.step, "eval")
            rng = RowGenerators([prompt_seed(self.cfg.run.seed, 0, _place_key(w)) for w in batch.where()])
            completions, truncated = rollout(t.model, batch.prompt_ids, 1, settings, self.eos, self.pad_id, rng)
            texts = self._texts(completions)
            scored = self.rewards.score(batch.prompts(), texts, [len(c) for c in completions], batch.columns(),
                                        batch.where())
            totals += scored.total.tolist()
            for name in per:
                per[name] += scored.values[name].tolist()
            lengths += [len(c) for c in completions]
            flags += list(truncated)
            for i in range(min(SHOWN_COMPLETIONS - len(shown), len(texts))):
                shown.append({"prompt": batch.records[i].text, "completion": texts[i], "total": float(scored.total[i]),
                              "rewards": {n: float(scored.values[n][i]) for n in per}})
        if t.cluster.is_main:
            t.emit(CompletionsEvent(message=f"{len(shown)} validation prompts and their completions", samples=shown))
        total = np.asarray(totals, np.float64)
        return ValidationFigures(val_reward=float(total.mean()), val_reward_std=float(total.std()),
                                 val_rewards={n: float(np.mean(v)) for n, v in per.items()},
                                 val_completion_len=float(np.mean(lengths)), val_truncated=float(np.mean(flags)))

    def baseline_text(self, figures: ValidationFigures) -> str:
        functions = ", ".join(f"{name} {value:.3f}" for name, value in (figures.val_rewards or {}).items())
        return (f"validation reward {figures.val_reward:.3f} ± {figures.val_reward_std:.3f} ({functions}), "
                f"completion length {figures.val_completion_len:.1f}")

    # ---- checkpoints ------------------------------------------------------------------------
    def state(self) -> dict | None:
        """Mid-way through num_iterations updates of one batch of rollouts: the rollouts themselves (a
        resumed run trains on the same ones); the samplers need nothing (seeded by step and prompt)."""
        if self.buffer is None or self.iteration >= self.g.num_iterations:
            return None
        return {"iteration": self.iteration, "figures": self.buffer_figures,
                "batches": [{name: (None if value is None else np.asarray(value).tolist())
                             for name, value in vars(b).items()} for b in self.buffer]}

    def load_state(self, state: dict | None) -> None:
        if not state:
            return
        dtypes = {"input_ids": np.int32, "attention_mask": np.int32, "labels": np.int32, "advantages": np.float32,
                  "old_logps": np.float32, "ref_logps": np.float32}
        self.buffer = [GrpoBatch(**{name: (value if name == "normalizer" or value is None
                                           else np.asarray(value, dtypes[name])) for name, value in b.items()})
                       for b in state["batches"]]
        self.iteration, self.buffer_figures = int(state["iteration"]), state["figures"]


def _reward_model_scorer(run: str):
    return RewardModelScorer(run)
