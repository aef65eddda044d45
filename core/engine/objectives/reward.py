"""A reward model (train.objective reward): a value head on the final hidden state, trained on
preference pairs with the Bradley–Terry loss; core.engine.reward_model holds the head, the step and the
figures. A finished reward run can score GRPO's completions (core.engine.reward_scorer)."""
from __future__ import annotations

from core.engine.objectives.base import ema
from core.engine.objectives.preference import Pairs
from core.engine.reward_model import (RewardStep, ValueHead, baseline_text, evaluate, head_init_std, reward_inputs,
                                      reward_trainable, take_parameters)
from core.run.records import ValidationFigures


class Reward(Pairs):
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
