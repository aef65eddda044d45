"""The errors a model's config.json and checkpoint files raise, and the one check that raises the
first: MindSpore-free and importing no other module of core, so the family specs
(`core.spec.families`, `core.spec.moe_args`) and `core.spec.model_args` share them without importing each other."""
from __future__ import annotations


class ModelConfigError(ValueError):
    """A config.json that mindtune cannot build a model from; the message names file and key."""


class CheckpointError(ValueError):
    """A checkpoint that cannot be loaded; the message names the file or tensor and what is supported."""


def check(ok: bool, source: str, key: str, message: str) -> None:
    """Raise ModelConfigError "<source>: <key>: <message>." unless `ok`."""
    if not ok:
        raise ModelConfigError(f"{source}: {key}: {message}.")
