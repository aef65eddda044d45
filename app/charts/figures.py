"""The figures that judge a run, as the console names and formats them: the run's objective
(core.spec.objectives: its headline, the figures it compares) read from its config, each figure's
label in the page's language ("figure.<name>" texts) and its number format, and a run's label
('… · ppl 3.06 · 2800 tok/s'; a DPO run's '… · reward accuracy 78.0%'). The Monitor, the Runs tab and
the Try tab ask here, never test an objective's name.
"""
from __future__ import annotations

import functools
import math
import os
from pathlib import Path
from typing import Any

import yaml

from core.run.records import FinalFigures
from core.spec.objectives import ObjectiveSpec, spec_of

from app.i18n import TEXTS, text

SHARES = frozenset({"exact_match", "bleu", "rouge1", "rouge2", "rougeL", "reward_accuracy"})  # shown x100
FORMATS = {"best_val_ppl": ".2f", "val_ppl": ".3g", "reward_margin": ".3f", "tokens_per_s": ".0f",
           "peak_mem_mb": ".0f", "val_reward": ".3f"}


def objective_of(config_path: str | os.PathLike) -> str:
    """`train.objective` of a run's config.yaml ('sft' when unreadable or unset: runs written before
    objectives existed), read as plain YAML so that an old or hand-edited config still answers."""
    try:
        stat = os.stat(config_path)
    except OSError:
        return "sft"
    return _objective(str(config_path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=512)
def _objective(path: str, mtime_ns: int, size: int) -> str:
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return "sft"
    train = data.get("train") if isinstance(data, dict) else None
    objective = train.get("objective") if isinstance(train, dict) else None
    return objective if isinstance(objective, str) and objective else "sft"


def run_spec(run_path: str | os.PathLike) -> ObjectiveSpec:
    """The objective spec of the run in folder `run_path`."""
    return spec_of(objective_of(Path(run_path) / "config.yaml"))


def figure_label(name: str, lang: str = "en") -> str:
    """'reward accuracy', 'ppl', '奖励准确率': a figure's name as the page says it (its own name when
    no text names it)."""
    key = f"figure.{name}"
    return text(key, lang) if key in TEXTS else name


def figure_value(name: str, value: Any) -> str:
    """A figure's number: shares as percents ('78.0%'), the rest in the figure's own format; '-'
    for a missing or non-finite one."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        return "-"
    if name in SHARES:
        return f"{100 * value:.1f}%"
    return format(value, FORMATS.get(name, ".4g"))


def compared_name(headline: str) -> str:
    """The final figure that holds a headline: the best evaluation's perplexity is `best_val_ppl`."""
    return "best_val_ppl" if headline == "val_ppl" else headline


def final_value(final: FinalFigures | None, name: str) -> Any:
    """A compared figure of a run's final figures (`best_val_ppl`, `reward_accuracy`, ...), None when
    the figures do not hold it."""
    return getattr(final, name, None) if final is not None else None


def run_label(run_id: str, final: FinalFigures | None, spec: ObjectiveSpec, lang: str = "en") -> str:
    """What a run is shown as in the pickers: its id, then what came out when it ended, by its
    objective: its headline figure (ppl for SFT, reward accuracy for a preference run), the answer
    score early stopping watched (else exact match) where the objective compares answer scores,
    and tokens/s: '20261129-101500_tiny-demo_lora-r8_fp32_dp1 · ppl 12.3 · EM 39.5% · 850 tok/s'."""
    parts = [run_id]
    if final is None:
        return run_id
    value = final_value(final, compared_name(spec.headline))
    if figure_value(spec.headline, value) != "-":
        parts.append(f"{figure_label(spec.headline, lang)} {figure_value(spec.headline, value)}")
    watched = final.monitor if final.monitor in spec.compare and final.monitor in SHARES else "exact_match"
    if watched != spec.headline and watched in spec.compare and figure_value(watched, final_value(final, watched)) != "-":
        parts.append(f"{figure_label(watched, lang)} {figure_value(watched, final_value(final, watched))}")
    if figure_value("tokens_per_s", final.tokens_per_s) != "-":
        parts.append(text("figure.tok_s", lang).format(n=round(final.tokens_per_s)))
    return " · ".join(parts)
