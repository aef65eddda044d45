"""Preference objectives (dpo, simpo, orpo, kto): their pairs, their step, their reference and their
validation figures. The formulas are in core.engine.preference, the data in core.data.preference.

The reference (dpo, kto):
- LoRA (`adapter_off`): the base with the adapter switched off. A run forked from a LoRA checkpoint
  (the usual path: SFT, then DPO from its best checkpoint) keeps training that adapter, and its
  reference is the base plus a frozen copy of the forked adapter (`LoRADense.set_reference_adapter`: the
  adapter's size, not the model's), so the SFT model is the reference.
- Full fine-tuning (`frozen_copy`): a second model with the starting weights (the base, or the
  fork's weights), frozen, in the model's dtype (float32 on the CPU); core.spec.memory counts it.
"""
from __future__ import annotations

import math

import numpy as np

import core.engine.checkpoint as ckpt
from core.data.preference import PreferenceBatches, load_preference_splits, pair_eval_batches
from core.engine.lora import lora_modules
from core.engine.objectives.base import Objective as ObjectiveBase, ema
from core.engine.preference import Objective, PreferenceStep, preference_inputs, summarize
from core.run.records import ValidationFigures
from core.spec.objectives import reference_kind


def frozen_reference(cfg):
    """A frozen copy of the starting model (full fine-tuning's reference), or None where the
    objective uses none or switches the adapter off."""
    if reference_kind(cfg) != "frozen_copy":
        return None
    reference = ckpt.load_hf_model(cfg.model.path, cfg.compute_dtype, storage_dtype=cfg.model.dtype)
    for param in reference.get_parameters():
        param.requires_grad = False
    reference.set_train(False)
    return reference


def reference_from_fork(cfg, reference_model, model, path: str) -> str | None:
    """A forked run's reference is the fork point's model: LoRA, a frozen copy of its adapter; full,
    its weights in the reference copy. Returns what was set, for the fork event, or None."""
    kind = reference_kind(cfg)
    if kind is None:
        return None
    weights, _, _ = ckpt.load_train_checkpoint(path)
    if kind == "frozen_copy":
        params = {p.name: p for p in reference_model.get_parameters()}
        ckpt.set_parameters(params, {k: v for k, v in weights.items() if k in params}, str(path))
        return "the reference is the fork point's model (a frozen copy of its weights)"
    for name, cell in lora_modules(model).items():
        a, b = weights.get(f"{name}.lora_a"), weights.get(f"{name}.lora_b")
        if a is None or b is None:
            return None
        cell.set_reference_adapter(name, a, b)
    return "the reference is the fork point's model (the base plus a frozen copy of its adapter)"


class Pairs(ObjectiveBase):
    """The data of the objectives that read preference pairs or KTO answers (preference tuning, a
    reward model): core.data.preference's splits and batches, a pair never split across workers."""

    def load_data(self, tokenizer, seed: int):
        return load_preference_splits(self.cfg.data, tokenizer, seed, self.cfg.train.objective)

    def sequence_length(self, splits) -> int:
        return splits.stats.seq_len

    def batches(self, splits, seed: int, pad_id: int) -> PreferenceBatches:
        cfg, cluster = self.cfg, self.trainer.cluster
        return PreferenceBatches(splits.train, cfg.train.micro_batch_size, grad_accum_steps=cfg.train.grad_accum_steps,
                                 world_size=cluster.world, rank=cluster.rank, seed=seed, length=splits.stats.seq_len,
                                 pad_id=pad_id)


class Preference(Pairs):
    def build_step(self, optimizer, loss_scaler, reducer, aux_coef: float) -> PreferenceStep:
        """The train step; with full fine-tuning and a reference, a frozen copy of the starting model."""
        return PreferenceStep(self.trainer.compute_model, optimizer, self.cfg.train.max_grad_norm, loss_scaler,
                              Objective.from_config(self.cfg), reducer, frozen_reference(self.cfg))

    def inputs(self, batch: dict) -> tuple:
        return preference_inputs(batch)

    def describe(self) -> str:
        kind = reference_kind(self.cfg)
        return f"; objective {self.cfg.train.objective}" + (f", reference {kind}" if kind else "")

    def after_fork(self, path: str) -> str | None:
        step = self.trainer.train_step
        return reference_from_fork(self.cfg, step.reference_model, self.trainer.model, path)

    def evaluate(self, max_tokens: int | None = None) -> ValidationFigures:
        """The objective's loss (mean over pairs or answers), reward figures and the chosen answers'
        perplexity on every validation pair (max_eval_samples of them)."""
        t = self.trainer
        step = t.train_step
        pairs = t.splits.validation[: self.cfg.eval.max_eval_samples or None]
        phase = "eval" if t.evals_here else "compile"
        losses, weights, figures, nll, tokens = [], [], [], 0.0, 0.0
        for batch in pair_eval_batches(pairs, self.cfg.train.micro_batch_size, t.length,
                                       t.tokenizer.pad_token_id or 0):
            t.heartbeat.beat(t.state.step, phase)
            loss, fig = step.evaluate(batch["input_ids"], batch["labels"], batch["attention_mask"],
                                      batch["kto_labels"])
            losses.append(loss)
            weights.append(fig.shape[1])
            figures.append(fig)
            rows = fig.shape[1]
            chosen_logp, chosen_tokens = fig[2 if step.objective.paired else 1], batch["labels"][:rows, 1:] != -100
            nll -= float(chosen_logp.sum())
            tokens += float(chosen_tokens.sum())
        values = summarize(step.objective, np.concatenate(figures, axis=1))
        loss = float(np.average(losses, weights=weights))
        t.state.val_loss_ema = ema(t.state.val_loss_ema, loss, self.cfg.eval.ema_alpha)
        # val_ppl: the chosen answers' perplexity; no val_ppl_ema (exp of the objective's loss means nothing)
        return ValidationFigures(val_loss=loss, val_ppl=math.exp(min(nll / max(tokens, 1.0), 50.0)),
                                 val_loss_ema=t.state.val_loss_ema, **values)

    def baseline_text(self, figures: ValidationFigures) -> str:
        """The objective's loss and the reward figures (no perplexity: the objective is not a
        language-model loss). When the policy is the reference (dpo, kto before training) every reward
        is 0, so reward accuracy starts at 0, and it says so."""
        text = (f"{self.cfg.train.objective} loss {figures.val_loss:.4f}, reward accuracy "
                f"{figures.reward_accuracy:.3f}, margin {figures.reward_margin:+.4f}, chosen log-prob "
                f"{figures.chosen_logp:.2f}, rejected log-prob {figures.rejected_logp:.2f}")
        if reference_kind(self.cfg) is not None and abs(figures.chosen_reward) < 1e-6 \
                and abs(figures.rejected_reward) < 1e-6:
            text += " (the policy is the reference: every reward is 0, so no pair is ranked yet)"
        return text
