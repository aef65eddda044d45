"""The objectives a run can minimise, one module each behind `core.engine.objectives.base.Objective`,
and the registry that maps `train.objective` to them (the MindSpore-free half of each is
core.spec.objectives' ObjectiveSpec under the same name)."""
from __future__ import annotations

from core.engine.objectives.base import Objective
from core.engine.objectives.grpo import Grpo
from core.engine.objectives.preference import Preference
from core.engine.objectives.reward import Reward
from core.engine.objectives.sft import Sft

REGISTRY: dict[str, type[Objective]] = {"sft": Sft, "dpo": Preference, "simpo": Preference, "orpo": Preference,
                                        "kto": Preference, "grpo": Grpo, "reward": Reward}


def build(trainer) -> Objective:
    """The objective of the trainer's run (train.objective)."""
    return REGISTRY[trainer.cfg.train.objective](trainer)
