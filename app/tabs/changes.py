"""What differs between run configs, counting only the settings that apply to each run.

"Change one thing at a time" is how a fine-tuning change is judged, so the console says what
changed wherever two configs meet: the Runs tab's side-by-side configs and legends, the Train tab
while a run made from another one is edited, and the message Start answers with
("lora.rank 8 → 16"). A setting that does not apply to a run (the LoRA settings of a full
fine-tune, the loss scale of an fp32 run) is shown as not applicable and never counts as a
difference. Configs are compared as flat {dotted key: value} mappings read as plain YAML, so an old
or hand-edited config still compares.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import yaml

from core.spec.objectives import spec_of

# the keys the console sets itself: never a "change" a user made
BOOKKEEPING = ("run.runs_dir", "run.resume", "run.fork_from", "run.name")

_RULES: tuple[tuple[str, Callable[[Mapping[str, Any]], bool]], ...] = (
    ("lora.", lambda flat: flat.get("method", "lora") == "lora"),
    ("precision.compute_dtype", lambda flat: flat.get("precision.amp_level", "O0") != "O0"),
    ("precision.loss_scale", lambda flat: flat.get("precision.amp_level", "O0") != "O0"
     and flat.get("precision.compute_dtype") == "float16"),
    ("precision.initial_loss_scale", lambda flat: flat.get("precision.amp_level", "O0") != "O0"
     and flat.get("precision.compute_dtype") == "float16" and flat.get("precision.loss_scale") != "none"),
    ("recompute.layer_fraction", lambda flat: flat.get("recompute.policy", "none") != "none"),
    ("parallel.optimizer_shard", lambda flat: False),  # refused (core.spec.config.OPTIMIZER_SHARD_REFUSAL)
    ("eval.max_new_tokens", lambda flat: bool(flat.get("eval.downstream", True))),
)


def applies(flat: Mapping[str, Any], key: str) -> bool:
    """Whether setting `key` has any effect in the run `flat` describes (an objective's own settings,
    preference.* or grpo.*, only where the run's objective reads them: core.spec.objectives)."""
    if not spec_of(flat.get("train.objective")).reads(key):
        return False
    for prefix, rule in _RULES:
        if key == prefix or (prefix.endswith(".") and key.startswith(prefix)):
            return rule(flat)
    return True


def flat_config(path: str | Path) -> dict[str, Any]:
    """A config.yaml as {dotted key: value}; an unreadable one as {"(config)": why}."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as err:
        return {"(config)": f"unreadable: {err}"}
    if not isinstance(data, dict):
        return {"(config)": "not a mapping"}
    return flatten(data)


def flatten(data: Mapping[str, Any]) -> dict[str, Any]:
    """{section: {name: value}} -> {"section.name": value} (one level, as configs are)."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            flat.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            flat[key] = value
    return flat


def same(a: Any, b: Any) -> bool:
    """Equal as YAML values (1 and 1.0 are the same learning rate; [a, b] is not [b, a])."""
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) \
            and not isinstance(b, bool):
        return float(a) == float(b)
    return yaml.safe_dump(a) == yaml.safe_dump(b)


def differing_keys(configs: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The keys, in file order, whose values differ between two or more of the runs they apply to."""
    keys = list(dict.fromkeys(k for flat in configs.values() for k in flat))
    out = []
    for key in keys:
        values = [flat.get(key) for flat in configs.values() if applies(flat, key)]
        if len(values) > 1 and any(not same(values[0], v) for v in values[1:]):
            out.append(key)
    return out


@dataclass(frozen=True)
class Change:
    """One setting that differs from the reference config."""
    key: str
    old: Any
    new: Any

    def text(self) -> str:
        return f"{self.key} {show(self.old)} → {show(self.new)}"


def changes(reference: Mapping[str, Any], current: Mapping[str, Any],
            ignored: Iterable[str] = BOOKKEEPING) -> list[Change]:
    """The settings of `current` that differ from `reference` (in `current`'s order), among those
    that apply to both runs: turning LoRA off (method lora -> full) is the change of `method`
    alone, not of every lora.* setting too."""
    skip = set(ignored)
    return [Change(key, reference[key], value) for key, value in current.items()
            if key not in skip and key in reference and applies(current, key) and applies(reference, key)
            and not same(reference[key], value)]


def show(value: Any) -> str:
    """A value as YAML writes it inline: 0.0002, true, null, [q_proj, v_proj]."""
    if isinstance(value, (list, dict)) or value is None or isinstance(value, bool):
        return yaml.safe_dump(value, default_flow_style=True).removesuffix("\n...\n").strip()
    return str(value)


def changes_text(found: list[Change], limit: int = 6) -> str:
    """'lora.rank 8 → 16, train.learning_rate 0.0002 → 0.0001' (and 'and N more')."""
    shown = ", ".join(c.text() for c in found[:limit])
    return shown + (f" and {len(found) - limit} more" if len(found) > limit else "")
