"""Run ids and the runs folder's listing: the id a new run gets (model, method, precision, width,
time), the name a run is shown by once it ended, and every run folder of a runs folder with its
status (`RunSummary`). Knows `core.run.records` and `core.run.rundir`.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.run.records import GENERATION_FIELDS, STATES, FinalFigures, RunDirError, Status
from core.run.rundir import RunDir

__all__ = [
    "SCORE_LABELS", "RunSummary", "make_run_id", "display_name", "next_free_run_id", "list_runs",
]


# ---- run ids --------------------------------------------------------------------------------

_PRECISION_TAGS = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}


def _slug(text: Any) -> str:
    """Text reduced to run-id characters: [A-Za-z0-9._-]."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", str(text)).strip("-.")
    return re.sub(r"-{2,}", "-", slug)


def make_run_id(model_name: str, method: str, lora_rank: int | None, precision: str,
                data_parallel: int, now: dt.datetime | None = None, name: str | None = None) -> str:
    """E.g. '20261129-101500_tiny-demo_lora-r8_fp32_dp1': timestamp first, so ids sort by time.

    `model_name` may be a path (its last part is used); `name` is an optional prefix placed after
    the timestamp; precision names like 'float16' are shortened to 'fp16'.
    """
    stamp = (now or dt.datetime.now()).strftime("%Y%m%d-%H%M%S")
    model = _slug(Path(str(model_name).rstrip("/\\")).name or model_name) or "model"
    method_tag = f"lora-r{lora_rank}" if method == "lora" else _slug(method)
    parts = [stamp, _slug(name) if name else "", model, method_tag,
             _PRECISION_TAGS.get(precision, _slug(precision)), f"dp{int(data_parallel)}"]
    return "_".join(p for p in parts if p)


def _format_ppl(value: float) -> str:
    return f"{value:.2f}" if value < 10 else f"{value:.1f}" if value < 1000 else f"{value:.0f}"


SCORE_LABELS = {"exact_match": "EM", "bleu": "BLEU", "rouge1": "ROUGE-1", "rouge2": "ROUGE-2", "rougeL": "ROUGE-L"}


def display_name(run_id: str, final: FinalFigures | None) -> str:
    """What a run is shown as: its id, which never changes, followed by what came out when it
    ended, e.g. '20261129-101500_tiny-demo_lora-r8_fp32_dp1 · ppl 12.3 · EM 39.5% · 850 tok/s' (a part
    is left out when its figure is missing or not finite; no results: the id alone). The answer score
    shown is the one early stopping watched (e.g. 'BLEU 23.4'), else exact match."""
    parts = [run_id]
    ppl = final.best_val_ppl if final else None
    if ppl is not None and math.isfinite(ppl) and ppl >= 0:
        parts.append(f"ppl {_format_ppl(float(ppl))}")
    watched = final.monitor if final and final.monitor in GENERATION_FIELDS else "exact_match"
    score = getattr(final, watched) if final else None
    if score is not None and math.isfinite(score):
        parts.append(f"{SCORE_LABELS[watched]} {100 * score:.1f}" + ("%" if watched == "exact_match" else ""))
    if final and final.reward_accuracy is not None and math.isfinite(final.reward_accuracy):
        parts.append(f"reward acc {100 * final.reward_accuracy:.1f}%")
    tps = final.tokens_per_s if final else None
    if tps is not None and math.isfinite(tps) and tps >= 0:
        parts.append(f"{round(tps)} tok/s")
    return " · ".join(parts)


def next_free_run_id(runs_dir: str | os.PathLike, run_id: str) -> str:
    """`run_id`, or `run_id-2`, `-3`, ... whichever does not exist in runs_dir yet."""
    candidate, n = run_id, 1
    while os.path.lexists(Path(runs_dir) / candidate):
        n += 1
        candidate = f"{run_id}-{n}"
    return candidate


# ---- listing ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class RunSummary:
    """One row of the runs list. `state` is 'unknown' (with `reason`) when status.json is unreadable."""
    run_id: str
    path: Path
    state: str
    reason: str | None
    status: Status = field(compare=False)
    sort_time: float = 0.0

    @property
    def run(self) -> RunDir:
        return RunDir(self.path)


def list_runs(runs_dir: str | os.PathLike) -> list[RunSummary]:
    """Real run folders (not symlinks, with a status.json), newest first; never raises for one run."""
    root = Path(runs_dir)
    try:
        entries = [e for e in os.scandir(root) if not e.is_symlink() and e.is_dir(follow_symlinks=False)]
    except (FileNotFoundError, NotADirectoryError):
        return []
    runs = [RunDir(e.path) for e in entries]
    summaries = [_summarize(run) for run in runs if os.path.lexists(run.status_path)]
    return sorted(summaries, key=lambda s: (s.sort_time, s.run_id), reverse=True)


def _summarize(run: RunDir) -> RunSummary:
    try:
        status = run.read_status()
    except (RunDirError, OSError) as err:
        status, state, reason = Status(), "unknown", str(err)
    else:
        state, reason = status.state, status.reason
        if state not in STATES:
            state, reason = "unknown", f"{run.status_path}: unknown state {state!r}"
    created = status.created_at
    if created is None:
        with contextlib.suppress(OSError):
            created = run.path.stat().st_mtime
    return RunSummary(run.run_id, run.path, state, reason, status, float(created or 0.0))
