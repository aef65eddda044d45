"""Runs tab callbacks: the table of every run on disk, curves and configs of several runs side by
side, resume and delete. Runs started from a shell appear like any other: the folder is the record.
"""
from __future__ import annotations

import html
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from core import launcher
from core.rundir import TERMINAL_STATES, RunDir, RunDirError, RunSummary, TrainRecord, resolve_inside

from app.access import SINGLE_USER, Viewer
from app.context import Console
from app.metrics import RunCharts
from app.run_status import elapsed_s, fmt_duration
from app.svg_chart import line_chart

TABLE_HEADERS = ["run", "state", "step", "best val ppl", "tokens/s", "peak MB", "duration", "reason"]
OVERLAY_METRICS = {"train loss": ("loss", "loss"), "train loss EMA": ("loss", "loss EMA"),
                   "val loss": ("val_loss", "val loss"), "val ppl": ("val_ppl", "val ppl"),
                   "tokens/s": ("tokens_per_s", "tokens/s")}
MAX_OVERLAY = 8


def _number(value: Any, digits: int = 3) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:.{digits}g}" if isinstance(value, float) else str(value)
    return "-"


def table_row(summary: RunSummary, now: float | None = None) -> list[str]:
    """One run's row: final figures when it is over, the latest logged ones while it runs."""
    status = summary.status
    final, best = status.final, status.best
    latest = None if final else summary.run.last_metric(TrainRecord)
    if latest is not None and latest.generation not in (None, status.attempt):
        latest = None  # the previous attempt's, logged past the checkpoint this one resumed from
    step, total = status.step, status.total_steps
    reason = (summary.reason or "").splitlines()[0][:120] if summary.reason else ""
    if final:
        ppl, tokens_per_s, peak_mem_mb = final.best_val_ppl, final.tokens_per_s, final.peak_mem_mb
    else:
        ppl = best.val_ppl if best else None
        tokens_per_s, peak_mem_mb = (latest.tokens_per_s, latest.peak_mem_mb) if latest else (None, None)
    return [summary.run_id, summary.state,
            f"{step}/{total}" if step is not None and total else _number(step),
            _number(ppl, 4), _number(tokens_per_s, 4), _number(peak_mem_mb, 5),
            fmt_duration(elapsed_s(status, now)), reason]


def folder_key(console: Console, viewer: Viewer = SINGLE_USER) -> str:
    """A fingerprint of every run's status and metrics files (names, sizes, times): it changes when
    the runs table or a compared run's curves would (only the runs `viewer` may see count)."""
    parts = [viewer.user or ""]
    try:
        entries = sorted(os.scandir(console.runs_dir), key=lambda e: e.name)
    except OSError:
        return ""
    if not viewer.admin:
        mine = {s.run_id for s in console.jobs.runs(viewer)}
        entries = [e for e in entries if e.name in mine]
    for entry in entries:
        parts.append(entry.name)
        run = RunDir(entry.path)
        for path in (run.status_path, run.metrics_path):
            try:
                st = os.stat(path)
                parts.append(f"{st.st_size}:{st.st_mtime_ns}")
            except OSError:
                parts.append("-")
    return str(hash("|".join(parts)))


def runs_table(console: Console, viewer: Viewer = SINGLE_USER) -> pd.DataFrame:
    rows = [table_row(s) for s in console.jobs.runs(viewer)]
    return pd.DataFrame(rows, columns=TABLE_HEADERS)


@dataclass
class OverlayCache:
    """Chart data of the runs being compared, read incrementally like the Monitor's (per session)."""
    charts: dict[str, RunCharts] = field(default_factory=dict)

    def frame(self, console: Console, run_ids: list[str], metric: str,
              viewer: Viewer = SINGLE_USER) -> pd.DataFrame:
        chart, series = OVERLAY_METRICS.get(metric, OVERLAY_METRICS["train loss"])
        parts = []
        for run_id in run_ids[:MAX_OVERLAY]:
            try:
                run = console.jobs.run_dir(run_id, viewer)
            except ValueError:
                continue
            charts = self.charts.setdefault(run_id, RunCharts(run.path))
            charts.update()
            data = charts.frames[chart]
            data = data[data["series"] == series]
            parts.append(pd.DataFrame({"step": data["step"], "value": data["value"], "run": run_id}))
        for gone in set(self.charts) - set(run_ids):
            del self.charts[gone]
        if not parts:
            return pd.DataFrame({"step": pd.Series(dtype="int64"), "value": pd.Series(dtype="float64"),
                                 "run": pd.Series(dtype="str")})
        return pd.concat(parts, ignore_index=True)


def overlay_svg(frame: pd.DataFrame, metric: str) -> str:
    """The compared runs' curves of `metric` in one chart, a line per run."""
    if frame.empty:
        frame = pd.DataFrame({"step": pd.Series(dtype="int64"), "value": pd.Series(dtype="float64"),
                              "run": pd.Series(dtype="str")})
    return line_chart(frame, metric, color_column="run", empty_text="select runs to compare their curves")


def _flat_config(path: Path) -> dict[str, Any]:
    """A run's config.yaml as {dotted key: value}, read as plain YAML (an old or odd config still shows)."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as err:
        return {"(config)": f"unreadable: {err}"}
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            flat.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            flat[key] = value
    return flat


def config_diff(console: Console, run_ids: list[str],
                viewer: Viewer = SINGLE_USER) -> tuple[list[str], list[list[Any]], set[int]]:
    """(columns, rows, indexes of rows whose values differ) for the selected runs' configs."""
    run_ids = [r for r in run_ids if _sees(console, r, viewer)]
    configs = {r: _flat_config(RunDir(console.runs_dir / r).config_path) for r in run_ids}
    keys = list(dict.fromkeys(k for flat in configs.values() for k in flat))
    rows, differing = [], set()
    for index, key in enumerate(keys):
        values = [configs[r].get(key, "—") for r in run_ids]
        rows.append([key, *values])
        if len({yaml.safe_dump(v) for v in values}) > 1:
            differing.add(index)
    return ["setting", *run_ids], rows, differing


def _sees(console: Console, run_id: str, viewer: Viewer) -> bool:
    try:
        return bool(console.jobs.run_dir(run_id, viewer))
    except ValueError:
        return False


def config_diff_html(console: Console, run_ids: list[str], only_differences: bool = False,
                     viewer: Viewer = SINGLE_USER) -> str:
    """The configs side by side as an HTML table; rows that differ carry class `mt-diff`."""
    run_ids = [r for r in run_ids or [] if _sees(console, r, viewer)]
    if not run_ids:
        return '<div class="mt-note">select runs to compare their configs</div>'
    columns, rows, differing = config_diff(console, run_ids, viewer)
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in columns)
    body = []
    for index, row in enumerate(rows):
        if only_differences and index not in differing:
            continue
        css = ' class="mt-diff"' if index in differing else ""
        cells = "".join(f"<td>{html.escape(_show(v))}</td>" for v in row)
        body.append(f"<tr{css}>{cells}</tr>")
    return f'<div class="mt-table-wrap"><table class="mt-config-diff"><tr>{head}</tr>{"".join(body)}</table></div>'


def _show(value: Any) -> str:
    if isinstance(value, (list, dict)) or value is None or isinstance(value, bool):
        return yaml.safe_dump(value, default_flow_style=True).removesuffix("\n...\n").strip()
    return str(value)


def resume(console: Console, run_ids: list[str], viewer: Viewer = SINGLE_USER) -> tuple[str | None, str]:
    """Resume the one selected run; returns (run id to watch, message)."""
    if len(run_ids) != 1:
        return None, "⚠ select exactly one stopped or failed run to resume"
    try:
        result = console.jobs.resume(run_ids[0], viewer)
    except (ValueError, RunDirError, launcher.LaunchError, OSError) as err:
        return None, f"⚠ {err}"
    return result.run_id, result.message


def delete_check(console: Console, run_ids: list[str], viewer: Viewer = SINGLE_USER) -> tuple[bool, str]:
    """Whether the selected runs may be deleted (all over, no process left), and the question to ask."""
    if not run_ids:
        return False, "⚠ select the runs to delete"
    for run_id in run_ids:
        try:
            status = console.jobs.current_status(run_id, viewer)
        except (ValueError, RunDirError, launcher.LaunchError) as err:
            return False, f"⚠ {err}"
        if status.state not in TERMINAL_STATES:
            return False, f"⚠ {run_id} is {status.state}: stop it before deleting it"
    names = ", ".join(f"`{r}`" for r in run_ids)
    return True, f"Delete {names} with all checkpoints and exports? This cannot be undone."


def delete(console: Console, run_ids: list[str], viewer: Viewer = SINGLE_USER) -> str:
    """Delete finished runs (their folders, and the links left by renames) inside the runs folder."""
    ok, message = delete_check(console, run_ids, viewer)
    if not ok:
        return message
    deleted = []
    for run_id in run_ids:
        real = resolve_inside(console.runs_dir, console.runs_dir / run_id)
        if real == Path(os.path.realpath(console.runs_dir)):
            return f"⚠ {run_id}: refusing to delete the runs folder itself"
        if launcher.run_processes(real):
            return f"⚠ {run_id}: a process of this run is still alive; stop it first"
        _remove_links_to(console.runs_dir, real)
        shutil.rmtree(real)
        deleted.append(run_id)
    return f"deleted {', '.join(deleted)} at {time.strftime('%H:%M:%S')}"


def _remove_links_to(runs_dir: Path, real: Path) -> None:
    for entry in os.scandir(runs_dir):
        if entry.is_symlink() and Path(os.path.realpath(entry.path)) == real:
            os.unlink(entry.path)
