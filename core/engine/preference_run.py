"""A preference run's pieces for the worker (core.train): its data, its step, its reference and its
validation figures. core.train calls these where train.objective is not sft; the formulas are in
core.engine.preference, the data in core.data.preference.

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
from core.engine.preference import Objective, PreferenceStep, reference_kind, summarize


def load_data(cfg, tokenizer, seed: int):
    return load_preference_splits(cfg.data, tokenizer, seed, cfg.train.objective)


def batches(cfg, splits, cluster, seed: int, pad_id: int) -> PreferenceBatches:
    return PreferenceBatches(splits.train, cfg.train.micro_batch_size, grad_accum_steps=cfg.train.grad_accum_steps,
                             world_size=cluster.world, rank=cluster.rank, seed=seed, length=splits.stats.seq_len,
                             pad_id=pad_id)


def build_step(cfg, model, optimizer, loss_scaler, reducer) -> PreferenceStep:
    """The train step; with full fine-tuning and a reference, a frozen copy of the starting model."""
    reference = None
    if reference_kind(cfg) == "frozen_copy":
        reference = ckpt.load_hf_model(cfg.model.path, cfg.compute_dtype, storage_dtype=cfg.model.dtype)
        for param in reference.get_parameters():
            param.requires_grad = False
        reference.set_train(False)
    return PreferenceStep(model, optimizer, cfg.train.max_grad_norm, loss_scaler, Objective.from_config(cfg),
                          reducer, reference)


def set_reference_from_fork(cfg, step: PreferenceStep, model, path: str) -> str | None:
    """A forked run's reference is the fork point's model: LoRA, a frozen copy of its adapter; full,
    its weights in the reference copy. Returns what was set, for the fork event, or None."""
    kind = reference_kind(cfg)
    if kind is None:
        return None
    weights, _, _ = ckpt.load_train_checkpoint(path)
    if kind == "frozen_copy":
        params = {p.name: p for p in step.reference_model.get_parameters()}
        ckpt.set_parameters(params, {k: v for k, v in weights.items() if k in params}, str(path))
        return "the reference is the fork point's model (a frozen copy of its weights)"
    for name, cell in lora_modules(model).items():
        a, b = weights.get(f"{name}.lora_a"), weights.get(f"{name}.lora_b")
        if a is None or b is None:
            return None
        cell.set_reference_adapter(name, a, b)
    return "the reference is the fork point's model (the base plus a frozen copy of its adapter)"


def evaluate(step: PreferenceStep, pairs, batch_size: int, length: int, pad_id: int, heartbeat=None) -> dict:
    """The objective's loss (mean over pairs or answers), reward figures and the chosen answers'
    perplexity on the validation pairs."""
    losses, weights, figures, nll, tokens = [], [], [], 0.0, 0.0
    for batch in pair_eval_batches(pairs, batch_size, length, pad_id):
        if heartbeat is not None:
            heartbeat()
        loss, fig = step.evaluate(batch["input_ids"], batch["labels"], batch["attention_mask"], batch["kto_labels"])
        losses.append(loss)
        weights.append(fig.shape[1])
        figures.append(fig)
        rows = fig.shape[1]
        chosen_logp, chosen_tokens = fig[2 if step.objective.paired else 1], batch["labels"][:rows, 1:] != -100
        nll -= float(chosen_logp.sum())
        tokens += float(chosen_tokens.sum())
    values = summarize(step.objective, np.concatenate(figures, axis=1))
    loss = float(np.average(losses, weights=weights))
    return {"val_loss": loss, "chosen_ppl": math.exp(min(nll / max(tokens, 1.0), 50.0)), **values}


def baseline_text(cfg, figures) -> str:
    """The baseline event's words for a preference run: the objective's loss and the reward figures
    (no perplexity: the objective is not a language-model loss). When the policy is the reference
    (dpo, kto before training) every reward is 0, so reward accuracy starts at 0, and it says so."""
    text = (f"{cfg.train.objective} loss {figures.val_loss:.4f}, reward accuracy {figures.reward_accuracy:.3f}, "
            f"margin {figures.reward_margin:+.4f}, chosen log-prob {figures.chosen_logp:.2f}, "
            f"rejected log-prob {figures.rejected_logp:.2f}")
    if reference_kind(cfg) is not None and abs(figures.chosen_reward) < 1e-6 and abs(figures.rejected_reward) < 1e-6:
        text += " (the policy is the reference: every reward is 0, so no pair is ranked yet)"
    return text
