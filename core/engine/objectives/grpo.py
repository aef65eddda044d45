"""GRPO (train.objective grpo): each step samples grpo.num_generations completions per prompt, scores
them with the run's reward functions, turns the rewards into group-relative advantages and takes a
clipped policy-gradient step (core.engine.grpo: the loss in the forms TRL's GRPOTrainer computes).

- Data: prompts (core.data.prompts) with the columns the rewards read; a micro batch is
  train.micro_batch_size prompts, so it trains micro × num_generations completion rows. Each worker
  samples the completions of its own prompts: a group is never split across workers.
- Sampling: every prompt's completions come from a generator seeded by (run seed, step, the prompt's
  place in the global batch), so they do not depend on the number of workers or on a resume: DP=2
  samples what DP=1 samples for the same global batch, and a resumed run samples what the
  uninterrupted one did. Rollouts run in the model's inference mode (core.engine.grpo.rollout: the
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

import numpy as np

from core.engine.objectives.base import Objective
from core.engine.objectives.preference import frozen_reference, reference_from_fork
from core.run.records import CompletionsEvent, ValidationFigures
from core.spec.objectives import reference_kind

SHOWN_COMPLETIONS = 4  # validation prompts shown with their completions at each evaluation


def prompt_seed(seed: int, step: int, index: int) -> np.random.SeedSequence:
    """The sampler of one prompt at one step: the same on any number of workers and after a resume."""
    return np.random.SeedSequence([int(seed), int(step), int(index)])
