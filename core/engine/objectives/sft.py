"""SFT: next-token cross-entropy on the trained tokens (the answers; every token of plain text)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from core.data.pipeline import BatchIterator, eval_batches, load_splits, packed_length, padded_length
from core.engine.objectives.base import Objective, ema, ppl
from core.engine.train_step import EvalStep, TrainStep, step_inputs
from core.run.records import ValidationFigures


class Sft(Objective):
    def load_data(self, tokenizer, seed: int):
        return load_splits(self.cfg.data, tokenizer, seed, cache_dir=Path(".mindtune-cache") / "data")

    def sequence_length(self, splits) -> int:
        data = self.cfg.data
        return packed_length(data.max_seq_len) if data.packing else padded_length(data.max_seq_len, splits.train,
                                                                                  splits.validation)

    def batches(self, splits, seed: int, pad_id: int):
        cfg, cluster = self.cfg, self.trainer.cluster
        return BatchIterator(splits.train, cfg.train.micro_batch_size, grad_accum_steps=cfg.train.grad_accum_steps,
                             world_size=cluster.world, rank=cluster.rank, seed=seed, length=self.trainer.length,
                             pad_id=pad_id, packing=cfg.data.packing, group_by_length=cfg.data.group_by_length)

    def build_step(self, optimizer, loss_scaler, reducer, aux_coef: float):
        t = self.trainer
        self.eval_step = EvalStep(t.compute_model)
        return TrainStep(t.compute_model, optimizer, self.cfg.train.max_grad_norm, loss_scaler, reducer, aux_coef,
                         t.model.args.moe)

    def inputs(self, batch: dict) -> tuple:
        return step_inputs(batch)

    def step(self, micro_batches: list) -> dict:
        out = super().step(micro_batches)
        if getattr(self.trainer.train_step, "last_aux_loss", None) is not None:
            out["aux_loss"] = self.trainer.train_step.last_aux_loss  # this rank's (the main rank logs it)
        return out

    def describe(self) -> str:
        return ""

    def evaluate(self, max_tokens: int | None = None) -> ValidationFigures:
        """One pass over the validation set (max_eval_samples of it); `max_tokens` stops after the
        batch whose real (unpadded) tokens reach it."""
        t = self.trainer
        nll, tokens, read = 0.0, 0.0, 0
        samples = t.splits.validation
        if self.cfg.eval.max_eval_samples:
            samples = samples[: self.cfg.eval.max_eval_samples]
        phase = "eval" if t.evals_here else "compile"  # the first evaluation compiles its graph
        for b in eval_batches(samples, self.cfg.train.micro_batch_size, t.length, t.tokenizer.pad_token_id or 0,
                              packing=self.cfg.data.packing):
            t.heartbeat.beat(t.state.step, phase)
            inputs = step_inputs(b)
            n, k = self.eval_step(*inputs)
            nll, tokens = nll + n, tokens + k
            read += int(np.asarray(inputs[2]).sum())
            if max_tokens is not None and read >= max_tokens:
                break
        loss = nll / max(tokens, 1.0)
        t.state.val_loss_ema = ema(t.state.val_loss_ema, loss, self.cfg.eval.ema_alpha)
        return ValidationFigures(val_loss=loss, val_ppl=ppl(loss), val_loss_ema=t.state.val_loss_ema,
                                 val_ppl_ema=ppl(t.state.val_loss_ema), val_tokens=int(tokens))
