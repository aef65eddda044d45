"""A reward model (train.objective reward): a value head on the final hidden state, trained on
preference pairs with the Bradley–Terry loss; core.engine.reward_model holds the head, the step and the
figures. A finished reward run can score GRPO's completions (core.engine.reward_scorer)."""
from __future__ import annotations

from core.data.preference import PreferenceBatches, load_preference_splits
from core.engine.objectives.base import Objective, ema
from core.engine.reward_model import (RewardStep, ValueHead, baseline_text, evaluate, head_init_std, reward_inputs,
                                      reward_trainable, take_parameters)
from core.run.records import ValidationFigures


class Reward(Objective):
    def load_data(self, tokenizer, seed: int):
        return load_preference_splits(self.cfg.data, tokenizer, seed, "reward")

    def sequence_length(self, splits) -> int:
        return splits.stats.seq_len

    def batches(self, splits, seed: int, pad_id: int) -> PreferenceBatches:
        cfg, cluster = self.cfg, self.trainer.cluster
        return PreferenceBatches(splits.train, cfg.train.micro_batch_size, grad_accum_steps=cfg.train.grad_accum_steps,
                                 world_size=cluster.world, rank=cluster.rank, seed=seed, length=splits.stats.seq_len,
                                 pad_id=pad_id)

    def trainable(self, model, params: list) -> list:
        """The adapters (LoRA) or the model's weights but an untied LM head (full), then the head: made
        here, seeded by the run's seed as transformers initialises its `score` layer."""
        self.head = ValueHead(model.args.hidden_size, seed=self.cfg.run.seed, std=head_init_std(self.cfg.model.path))
        return reward_trainable(model, self.head, self.cfg.method)

    def take_forked(self, trainable: dict, weights, source: str) -> None:
        """A fork point's weights: an SFT checkpoint's leave the head at its seeded start."""
        take_parameters(trainable, weights, source)

    def build_step(self, optimizer, loss_scaler, reducer, aux_coef: float) -> RewardStep:
        return RewardStep(self.trainer.compute_model, self.head, optimizer, self.cfg.train.max_grad_norm, loss_scaler,
                          reducer)

    def inputs(self, batch: dict) -> tuple:
        return reward_inputs(batch)

    def describe(self) -> str:
        return "; objective reward (a value head on the final hidden state, Bradley-Terry loss)"

    def evaluate(self, max_tokens: int | None = None) -> ValidationFigures:
        t = self.trainer
        phase = "eval" if t.evals_here else "compile"
        pairs = t.splits.validation[: self.cfg.eval.max_eval_samples or None]
        figures = evaluate(t.train_step, pairs, self.cfg.train.micro_batch_size, t.length,
                           t.tokenizer.pad_token_id or 0, lambda: t.heartbeat.beat(t.state.step, phase))
        loss = figures.pop("val_loss")
        t.state.val_loss_ema = ema(t.state.val_loss_ema, loss, self.cfg.eval.ema_alpha)
        return ValidationFigures(val_loss=loss, val_loss_ema=t.state.val_loss_ema, **figures)

    def baseline_text(self, figures: ValidationFigures) -> str:
        return baseline_text(figures)
