"""The interface every objective implements for the training loop (core.engine.trainer).

An objective owns what differs between SFT, preference tuning, GRPO and a reward model: the data it
reads and how it batches it, the compiled step (its loss and the figures it logs), its validation
figures, the words of its baseline and setup lines, what it takes from a fork point, and any state
of its own a checkpoint must keep (GRPO's sampler). Everything else — the optimizer and schedule,
AMP, recompute, data parallelism, checkpoints, resume and fork, early stopping, the run folder — is
the trainer's and knows no objective by name. `core.spec.objectives` holds the MindSpore-free half
(monitors, headline, charts, config rules, memory terms) under the same names.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from core.engine.checkpoint import set_parameters
from core.run.records import ValidationFigures
from core.spec.objectives import ObjectiveSpec, spec_of

if TYPE_CHECKING:  # the trainer hands itself over; objectives read its model, tokenizer, cluster, heartbeat
    from core.engine.trainer import Trainer


def ema(previous: float | None, value: float, alpha: float) -> float:
    return value if previous is None else alpha * value + (1 - alpha) * previous


def ppl(loss: float) -> float:
    return math.exp(min(loss, 50.0))


class Objective:
    """One `train.objective`'s part of a run. Built by `core.engine.objectives.build(trainer)` before
    the trainer's setup; the hooks are called in this order: load_data, sequence_length, batches,
    build_step (after the model, optimizer and loss scaler exist), then per step `step`, per
    evaluation `evaluate`."""

    def __init__(self, trainer: Trainer):
        self.trainer = trainer
        self.cfg = trainer.cfg
        self.spec: ObjectiveSpec = spec_of(self.cfg.train.objective)

    # ---- data -------------------------------------------------------------------------------
    def load_data(self, tokenizer, seed: int):
        """The run's splits (`.train`, `.validation`, `.stats`, `.test_records`)."""
        raise NotImplementedError

    def sequence_length(self, splits) -> int:
        """The padded length of a training row (compiled shapes)."""
        raise NotImplementedError

    def batches(self, splits, seed: int, pad_id: int):
        """The training batches: an iterator with steps_per_epoch, epoch, state() and load_state()."""
        raise NotImplementedError

    def trainable(self, model, params: list) -> list:
        """The parameters the optimizer trains, given the method's (LoRA's adapters or every weight)."""
        return params

    def take_forked(self, trainable: dict, weights, source: str) -> None:
        """Load a fork point's weights into the trainable parameters (every one must be there)."""
        set_parameters(trainable, weights, source)

    # ---- the step ---------------------------------------------------------------------------
    def build_step(self, optimizer, loss_scaler, reducer, aux_coef: float):
        """The compiled train step for the trainer's compute model."""
        raise NotImplementedError

    def draw(self, batches) -> list:
        """The micro batches of the next optimizer step (train.grad_accum_steps of them)."""
        return [next(batches) for _ in range(self.cfg.train.grad_accum_steps)]

    def step(self, micro_batches: list) -> dict[str, Any]:
        """One optimizer step over the micro batches the trainer drew: a dict with loss, grad_norm,
        applied, loss_scale, tokens and any figures of the objective's own (`train_figures`)."""
        tokens = sum(int(b["attention_mask"].sum()) for b in micro_batches)
        loss, grad_norm, applied, scale = self.trainer.train_step([self.inputs(b) for b in micro_batches])
        return {"loss": loss, "grad_norm": grad_norm, "applied": applied, "loss_scale": scale, "tokens": tokens}

    def inputs(self, batch: dict) -> tuple:
        raise NotImplementedError

    def train_figures(self, out: dict) -> dict[str, Any]:
        """Extra TrainRecord fields of a logged step (none by default)."""
        return {}

    # ---- evaluation -------------------------------------------------------------------------
    def evaluate(self, max_tokens: int | None = None) -> ValidationFigures:
        raise NotImplementedError

    def baseline_text(self, figures: ValidationFigures) -> str:
        return f"val_loss {figures.val_loss:.4f}, val_ppl {figures.val_ppl:.3f}"

    def describe(self) -> str:
        """What the setup event adds for this objective ('' for SFT)."""
        return f"; objective {self.spec.name}"

    # ---- forks and checkpoints --------------------------------------------------------------
    def after_fork(self, path: str) -> str | None:
        """Anything the objective takes from the fork point (a reference model); said in an event."""
        return None

    def state(self) -> dict | None:
        """The objective's own state for a checkpoint (None: nothing)."""
        return None

    def load_state(self, state: dict | None) -> None:
        pass
