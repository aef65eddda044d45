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

import core.run.launcher as launcher
from core.eval.eval_tasks import EVALS_DIR, RESULTS_FILE
from core.run.records import GENERATION_FIELDS, TERMINAL_STATES, EvalRecord, RunDirError, Status, TrainRecord
from core.run.rundir import POINTERS, RunDir, resolve_inside
from core.run.runs import RunSummary, display_name

from app.access import SINGLE_USER, Viewer
from app.cluster import queue_label, shown_state
from app.changes import BOOKKEEPING, Change, applies, changes, changes_text, differing_keys, flat_config, show
from app.context import Console
from app.i18n import TEXTS, Said, action_text, problem_text, reason_text, text
from app.metrics import RunCharts
from app.run_status import fmt_duration, reached_step, state_word, total_elapsed_s
from app.svg_chart import line_chart

TABLE_HEADERS = ["run", "state", "step", "best val ppl", "EM %", "BLEU", "ROUGE-1", "ROUGE-2", "ROUGE-L", "tokens/s",
                 "peak MB", "duration", "reason", "parent"]
# share of the table's width per column (TABLE_HEADERS' order): the ids and the reason wrap
TABLE_WIDTHS = ["19%", "7%", "5%", "6%", "4%", "5%", "6%", "6%", "6%", "6%", "5%", "6%", "10%", "9%"]
OVERLAY_METRICS = {"train loss": ("loss", "loss"), "train loss EMA": ("loss", "loss EMA"),
                   "val loss": ("val_loss", "val loss"), "val ppl": ("val_ppl", "val ppl"),
                   "tokens/s": ("tokens_per_s", "tokens/s")}
MAX_OVERLAY = 8


# One format per column, in the table and in the comparison's deltas (issue 31 item 6: "+486",
# "+594.3" and "557.5" in one column of whole numbers): perplexity with two decimals, the answer
# scores (x100) with one, tokens/s and megabytes whole.
PPL, SCORE, WHOLE = ".2f", ".1f", ".0f"


def _number(value: Any, spec: str = WHOLE) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return format(value, spec)
    return "-"


def table_row(summary: RunSummary, now: float | None = None, lang: str = "en") -> list[str]:
    """One run's row: final figures when it is over, the latest logged ones while it runs."""
    status = reached_step(summary.status, summary.run.checkpoint_steps())
    final, best = status.final, status.best
    latest = None if final else summary.run.last_metric(TrainRecord)
    if latest is not None and latest.generation not in (None, status.attempt):
        latest = None  # the previous attempt's, logged past the checkpoint this one resumed from
    step, total = status.step, status.total_steps
    reason = (reason_text(summary.reason, lang, summary.status.reason_message).splitlines()[0][:120]
              if summary.reason else "")
    if final:
        ppl, tokens_per_s, peak_mem_mb = final.best_val_ppl, final.tokens_per_s, final.peak_mem_mb
    else:
        ppl = best.val_ppl if best else None
        tokens_per_s, peak_mem_mb = (latest.tokens_per_s, latest.peak_mem_mb) if latest else (None, None)
    # the best checkpoint's answer scores (x100, as BLEU and ROUGE are usually quoted) once the run is over
    scores = [_number(100 * getattr(final, name), SCORE) if final and getattr(final, name) is not None else "-"
              for name in GENERATION_FIELDS]
    state = shown_state(summary.status) if summary.status.state == summary.state else summary.state
    return [summary.run_id, state_word(state, lang),
            f"{step}/{total}" if step is not None and total else _number(step),
            _number(ppl, PPL), *scores, _number(tokens_per_s), _number(peak_mem_mb),
            fmt_duration(total_elapsed_s(status, now)), reason, parent_text(status, lang)]


def parent_text(status: Status, lang: str = "en") -> str:
    """The run this one was forked or made from, with the fork's step: 'run-id · step 40' ('' for none)."""
    if not status.parent_run:
        return ""
    if status.parent_step is None:
        return status.parent_run
    return text("runs.parent_step", lang).format(run=status.parent_run, step=status.parent_step)


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
            parts.append(_stat_key(path))
    # the evaluations (<runs_dir>/evals/<id>/): their progress and results redraw the Evaluate panel
    try:
        evals = sorted(os.scandir(os.path.join(console.runs_dir, EVALS_DIR)), key=lambda e: e.name)
    except OSError:
        evals = []
    for entry in evals:
        parts += [entry.name, _stat_key(os.path.join(entry.path, "status.json")),
                  _stat_key(os.path.join(entry.path, RESULTS_FILE))]
    return str(hash("|".join(parts)))


def _stat_key(path) -> str:
    try:
        st = os.stat(path)
    except OSError:
        return "-"
    return f"{st.st_size}:{st.st_mtime_ns}"


def runs_table(console: Console, viewer: Viewer = SINGLE_USER, lang: str = "en") -> pd.DataFrame:
    """Every run `viewer` may see, newest first; a queued run's state says its place in the queue.
    The headers are in `lang`; states stay the run directory contract's words."""
    places = {e.run_id: e.position for e in console.jobs.queue(viewer)}
    slurm = {e.run_id: e.position for e in console.jobs.cluster_queue(viewer)}
    rows = []
    for summary in console.jobs.runs(viewer):
        row = table_row(summary, lang=lang)
        if summary.run_id in places:
            row[1] = text("runs.queued_n", lang).format(n=places[summary.run_id])
        elif summary.run_id in slurm:
            row[1] = text("runs.pending_n", lang).format(n=slurm[summary.run_id])
        rows.append(row)
    return pd.DataFrame(rows, columns=[text(f"runs.col.{h}", lang) for h in TABLE_HEADERS])


def queue_html(console: Console, viewer: Viewer = SINGLE_USER, lang: str = "en") -> str:
    """The queued runs in order (their place in their device's queue), or a note that there are
    none; then the cluster runs pending in Slurm, in Slurm's order, each with Slurm's reason."""
    entries = console.jobs.queue(viewer)
    pending = console.jobs.cluster_queue(viewer)
    if not entries and not pending:
        return f'<div class="mt-note" id="queue-empty">{html.escape(text("runs.queue_empty", lang))}</div>'
    shown = ""
    if entries:
        items = "".join(f'<li data-run="{html.escape(e.run_id)}"><b>#{e.position}</b> <code>{html.escape(e.run_id)}</code>'
                        f' ({html.escape(e.device)}{", " + html.escape(e.owner) if e.owner else ""})</li>' for e in entries)
        shown = f'<ol class="mt-queue">{items}</ol>'
    if pending:
        items = "".join(f'<li data-run="{html.escape(e.run_id)}"><b>#{e.position}</b> <code>{html.escape(e.run_id)}</code>'
                        f' ({html.escape(_pending_label(console, e.run_id, viewer, lang))}'
                        f'{", " + html.escape(e.owner) if e.owner else ""})</li>' for e in pending)
        shown += (f'<div class="mt-note">{html.escape(text("runs.slurm_queue", lang).replace("**", ""))}</div>'
                  f'<ol class="mt-queue" id="slurm-queue">{items}</ol>')
    return shown


def _pending_label(console: Console, run_id: str, viewer: Viewer, lang: str) -> str:
    try:
        return queue_label(console.jobs.run_dir(run_id, viewer).read_status(), lang)
    except (ValueError, RunDirError):
        return "Slurm"


def queue_action(console: Console, run_ids: list[str], action: str, viewer: Viewer = SINGLE_USER) -> str:
    """Move the one selected queued run up or down, or cancel it."""
    if len(run_ids) != 1:
        return Said("act.select_one_queued")
    try:
        if action == "cancel":
            return console.jobs.cancel(run_ids[0], viewer)
        return console.jobs.move(run_ids[0], -1 if action == "up" else +1, viewer)
    except (ValueError, RunDirError, launcher.LaunchError) as err:  # scancel of a pending cluster run refused
        return Said("check.warn", problem=err)


def run_choices(console: Console, viewer: Viewer = SINGLE_USER) -> list[tuple[str, str]]:
    """(display name, run id) of every run `viewer` may see: the stable id, and what came out of
    the run once it ended ('… · ppl 3.06 · 2800 tok/s')."""
    return [(display_name(s.run_id, s.status.final), s.run_id) for s in console.jobs.runs(viewer)]


@dataclass
class OverlayCache:
    """Chart data of the runs being compared, read incrementally like the Monitor's (per session)."""
    charts: dict[str, RunCharts] = field(default_factory=dict)

    def frame(self, console: Console, run_ids: list[str], metric: str,
              viewer: Viewer = SINGLE_USER, lang: str = "en") -> pd.DataFrame:
        """step, value, run (the run's short label in `lang`, see `short_labels`) and run_id of each point."""
        chart, series = OVERLAY_METRICS.get(metric, OVERLAY_METRICS["train loss"])
        run_ids = [r for r in run_ids[:MAX_OVERLAY] if _sees(console, r, viewer)]
        labels = short_labels(console, run_ids, viewer, lang)
        parts = []
        for run_id in run_ids:
            charts = self.charts.setdefault(run_id, RunCharts(console.jobs.run_dir(run_id, viewer).path))
            charts.update()
            data = charts.frames[chart]
            data = data[data["series"] == series]
            parts.append(pd.DataFrame({"step": data["step"], "value": data["value"], "run": labels[run_id],
                                       "run_id": run_id}))
        for gone in set(self.charts) - set(run_ids):
            del self.charts[gone]
        if not parts:
            return _empty_overlay()
        return pd.concat(parts, ignore_index=True)


def _empty_overlay() -> pd.DataFrame:
    return pd.DataFrame({"step": pd.Series(dtype="int64"), "value": pd.Series(dtype="float64"),
                         "run": pd.Series(dtype="str"), "run_id": pd.Series(dtype="str")})


LOG_BY_DEFAULT = ("val ppl",)  # overlay metrics drawn on a log axis unless the user says otherwise


def overlay_log_default(metric: str) -> bool:
    return metric in LOG_BY_DEFAULT


def overlay_svg(frame: pd.DataFrame, metric: str, log_y: bool | None = None, lang: str = "en") -> str:
    """The compared runs' curves of `metric` in one chart, a line per run, labelled by what sets the
    runs apart (the full id on hover); perplexity on a log axis by default."""
    if frame.empty:
        frame = _empty_overlay()
    titles = dict(zip(frame["run"], frame["run_id"])) if "run_id" in frame else {}
    return line_chart(frame, text(f"overlay.{metric}", lang), color_column="run",
                      log_y=overlay_log_default(metric) if log_y is None else log_y,
                      legend_titles=titles, empty_text=text("chart.overlay_empty", lang), x_title=text("chart.step", lang),
                      log_mark=text("chart.log", lang), series_word=text("chart.series", lang))


LABEL_IGNORED = ("run.name", "run.runs_dir", "run.resume", "run.fork_from")
MAX_LABEL_SETTINGS = 3


def short_key(key: str, lang: str = "en") -> str:
    """What a run's short label calls a setting: its `short.<key>` text ('lr', '学习率'), else the
    last part of its key in English and the whole key (what the YAML says) in 中文."""
    if f"short.{key}" in TEXTS:
        return text(f"short.{key}", lang)
    return key if lang == "zh" else key.rsplit(".", 1)[-1]


def short_labels(console: Console, run_ids: list[str], viewer: Viewer = SINGLE_USER,
                 lang: str = "en") -> dict[str, str]:
    """A short, distinct label per run for legends: the settings that set it apart from the other
    runs shown ('rank 16 · lr 0.0001'), else the time in its id; the full id stays on hover."""
    configs = _configs(console, run_ids)
    differing = [k for k in differing_keys(configs) if k not in LABEL_IGNORED][:MAX_LABEL_SETTINGS]
    labels = {}
    for run_id, flat in configs.items():
        parts = [f"{short_key(k, lang)} {_short_value(flat.get(k))}"
                 for k in differing if applies(flat, k)]
        labels[run_id] = " · ".join(parts) or _id_time(run_id)
    totals = {label: list(labels.values()).count(label) for label in labels.values()}
    counts: dict[str, int] = {}
    for run_id in run_ids:  # runs that differ only in settings left out (or not at all): numbered
        label = labels[run_id]
        counts[label] = counts.get(label, 0) + 1
        if totals[label] > 1:
            labels[run_id] = f"{label} #{counts[label]}"
    return labels


def _short_value(value: Any) -> str:
    text = _show(value)
    if isinstance(value, str) and "/" in value:
        text = value.rstrip("/").rsplit("/", 1)[-1]
    return text if len(text) <= 24 else text[:23] + "…"


def _id_time(run_id: str) -> str:
    """'20261129-101500_tiny-demo_...' -> '11-29 10:15:00' (the id itself when it has no time)."""
    stamp = run_id.split("_", 1)[0]
    if len(stamp) == 15 and stamp[8] == "-" and stamp.replace("-", "").isdigit():
        return f"{stamp[4:6]}-{stamp[6:8]} {stamp[9:11]}:{stamp[11:13]}:{stamp[13:15]}"
    return run_id if len(run_id) <= 24 else run_id[:23] + "…"


def _configs(console: Console, run_ids: list[str]) -> dict[str, dict[str, Any]]:
    return {r: flat_config(RunDir(console.runs_dir / r).config_path) for r in run_ids}


NOT_APPLICABLE = "n/a"


def config_diff(console: Console, run_ids: list[str],
                viewer: Viewer = SINGLE_USER) -> tuple[list[str], list[list[Any]], set[int]]:
    """(columns, rows, indexes of rows whose values differ) for the selected runs' configs. A
    setting that does not apply to a run (lora.* of a full fine-tune) shows as n/a there and
    differs only if the runs it applies to disagree."""
    run_ids = [r for r in run_ids if _sees(console, r, viewer)]
    configs = _configs(console, run_ids)
    keys = list(dict.fromkeys(k for flat in configs.values() for k in flat))
    differing_set = set(differing_keys(configs))
    rows, differing = [], set()
    for index, key in enumerate(keys):
        values = [(configs[r].get(key, "—") if applies(configs[r], key) else NOT_APPLICABLE) for r in run_ids]
        rows.append([key, *values])
        if key in differing_set:
            differing.add(index)
    return ["setting", *run_ids], rows, differing


def _sees(console: Console, run_id: str, viewer: Viewer) -> bool:
    try:
        return bool(console.jobs.run_dir(run_id, viewer))
    except ValueError:
        return False


def config_diff_html(console: Console, run_ids: list[str], only_differences: bool = False,
                     viewer: Viewer = SINGLE_USER, lang: str = "en") -> str:
    """The results against a reference run (see `result_deltas`), then the configs side by side as
    an HTML table; rows that differ carry class `mt-diff`. Keys and values are the YAML's, as
    code; the words around them are in `lang`."""
    run_ids = [r for r in run_ids or [] if _sees(console, r, viewer)]
    if not run_ids:
        return f'<div class="mt-note">{html.escape(text("runs.diff_empty", lang))}</div>'
    columns, rows, differing = config_diff(console, run_ids, viewer)
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in [text("runs.diff_setting", lang), *columns[1:]])
    body = []
    for index, row in enumerate(rows):
        if only_differences and index not in differing:
            continue
        css = ' class="mt-diff"' if index in differing else ""
        cells = "".join(f"<td>{html.escape(text('runs.na', lang))}</td>" if v == NOT_APPLICABLE and i else
                        f"<td><code>{html.escape(_show(v))}</code></td>" for i, v in enumerate(row))
        body.append(f"<tr{css}>{cells}</tr>")
    table = f'<div class="mt-table-wrap"><table class="mt-config-diff"><tr>{head}</tr>{"".join(body)}</table></div>'
    return deltas_html(result_deltas(console, run_ids, viewer), lang) + table


def _show(value: Any) -> str:
    return show(value)


# ---- results against a reference run ---------------------------------------------------------

@dataclass(frozen=True)
class Figures:
    """What a run came to (its final figures; the latest ones while it runs)."""
    val_ppl: float | None
    exact_match: float | None
    tokens_per_s: float | None
    peak_mem_mb: float | None
    bleu: float | None = None
    rouge1: float | None = None
    rouge2: float | None = None
    rougeL: float | None = None  # noqa: N815
    reward_accuracy: float | None = None  # preference objectives: at the best evaluation
    reward_margin: float | None = None    # ... and the newest evaluation's margin


def run_figures(run: RunDir, status: Status) -> Figures:
    final, best = status.final, status.best
    evaluation = run.last_metric(EvalRecord)
    margin = evaluation.reward_margin if evaluation else None
    if final is not None:
        return Figures(final.best_val_ppl, final.exact_match, final.tokens_per_s, final.peak_mem_mb,
                       final.bleu, final.rouge1, final.rouge2, final.rougeL, final.reward_accuracy, margin)
    latest = run.last_metric(TrainRecord)
    return Figures(best.val_ppl if best else None, None, latest.tokens_per_s if latest else None,
                   latest.peak_mem_mb if latest else None,
                   reward_accuracy=best.reward_accuracy if best else None, reward_margin=margin)


@dataclass(frozen=True)
class Delta:
    """One compared run against the reference: its changed settings and the change of each figure."""
    run_id: str
    reference: str
    changes: list[Change]
    figures: Figures
    reference_figures: Figures


# (figure, heading, format of its change); shares (exact match, BLEU, ROUGE, reward accuracy) in points
DELTA_FIGURES = (("val_ppl", "ΔPPL", PPL), ("exact_match", "Δexact match", SCORE), ("bleu", "ΔBLEU", SCORE),
                 ("rouge1", "ΔROUGE-1", SCORE), ("rouge2", "ΔROUGE-2", SCORE), ("rougeL", "ΔROUGE-L", SCORE),
                 ("tokens_per_s", "Δtokens/s", WHOLE), ("peak_mem_mb", "Δpeak MB", WHOLE),
                 ("reward_accuracy", "Δreward accuracy", SCORE), ("reward_margin", "Δmargin", ".3f"))
REWARD_FIGURES = ("reward_accuracy", "reward_margin")
# the comparison names the checkpoint a fork started from: it is what made the fork differ (issue 31 item 4)
COMPARED_BOOKKEEPING = tuple(k for k in BOOKKEEPING if k != "run.fork_from")


def reference_run(console: Console, run_ids: list[str]) -> str:
    """The run the others are compared with: one that another selected run was made from (new run
    from this one, or a fork), else the oldest selected."""
    statuses = {r: _status(console, r) for r in run_ids}
    parents = [s.parent_run for s in statuses.values() if s.parent_run in statuses]
    if parents:
        return parents[0]
    return min(run_ids, key=lambda r: (statuses[r].created_at or 0.0, r))


def _status(console: Console, run_id: str) -> Status:
    try:
        return RunDir(console.runs_dir / run_id).read_status()
    except RunDirError:
        return Status()


def result_deltas(console: Console, run_ids: list[str], viewer: Viewer = SINGLE_USER) -> list[Delta]:
    """Each selected run against the reference run: what changed and how its results moved."""
    run_ids = [r for r in run_ids if _sees(console, r, viewer)]
    if len(run_ids) < 2:
        return []
    reference = reference_run(console, run_ids)
    configs = _configs(console, run_ids)
    ref_run = RunDir(console.runs_dir / reference)
    ref_figures = run_figures(ref_run, _status(console, reference))
    out = []
    for run_id in run_ids:
        if run_id == reference:
            continue
        run = RunDir(console.runs_dir / run_id)
        out.append(Delta(run_id, reference, changes(configs[reference], configs[run_id], COMPARED_BOOKKEEPING),
                         run_figures(run, _status(console, run_id)), ref_figures))
    return out


def delta_text(new: float | None, old: float | None, spec: str, percent_points: bool = False) -> str:
    """'-0.15 (-4.9%)' with the change in format `spec` (one per column: '.2f', '.0f'); for a share
    (exact match, BLEU, ROUGE) the difference in points: '+12.5 pts'."""
    if new is None or old is None:
        return "-"
    if percent_points:
        return f"{100 * (new - old):+.1f} pts"
    change = new - old
    relative = f" ({100 * change / old:+.1f}%)" if old else ""
    return f"{format(change, '+' + spec)}{relative}"


def deltas_html(deltas: list[Delta], lang: str = "en") -> str:
    """A table: each run's changed settings beside ΔPPL, Δexact match, ΔBLEU, ΔROUGE-1/2/L, Δtokens/s,
    Δpeak memory and, for preference objectives, Δreward accuracy and Δmargin."""
    if not deltas:
        return ""
    # the reward columns only where a run has reward figures (a preference objective)
    shown = [d for d in DELTA_FIGURES if d[0] not in REWARD_FIGURES or any(
        getattr(x.figures, d[0]) is not None or getattr(x.reference_figures, d[0]) is not None for x in deltas)]
    head = "".join(f"<th>{html.escape(text(h, lang))}</th>" for h in
                   ("runs.col.run", "runs.delta_changed", *[f"delta.{d[0]}" for d in shown]))
    rows = []
    for delta in deltas:
        changed = changes_text(delta.changes) or text("runs.delta_same", lang)
        cells = [f"<td><code>{html.escape(delta.run_id)}</code></td>", f"<td>{html.escape(changed)}</td>"]
        for name, _, spec in shown:
            value = delta_text(getattr(delta.figures, name), getattr(delta.reference_figures, name), spec,
                               percent_points=name in GENERATION_FIELDS or name == "reward_accuracy")
            cells.append(f'<td class="mt-delta" data-figure="{name}">{html.escape(value)}</td>')
        rows.append(f"<tr>{''.join(cells)}</tr>")
    caption = html.escape(text("runs.delta_against", lang)).format(run=f"<code>{html.escape(deltas[0].reference)}</code>")
    return (f'<div class="mt-table-wrap mt-deltas"><p class="mt-note">{caption}</p>'
            f'<table class="mt-config-diff mt-delta-table"><tr>{head}</tr>{"".join(rows)}</table></div>')


def fork_choices(console: Console, run_ids: list[str], viewer: Viewer = SINGLE_USER) -> list[tuple[str, int]]:
    """('step-20 (best)', 20) for each checkpoint the one selected run keeps, newest first."""
    if len(run_ids) != 1 or not _sees(console, run_ids[0], viewer):
        return []
    run = console.jobs.run_dir(run_ids[0], viewer)
    pointers = {run.checkpoint_step(p): p for p in POINTERS if run.checkpoint_step(p) is not None}
    steps = sorted(run.checkpoint_steps(), reverse=True)
    return [(f"step-{n}" + (f" ({pointers[n]})" if n in pointers else ""), n) for n in steps]


def resume(console: Console, run_ids: list[str], viewer: Viewer = SINGLE_USER,
           lang: str = "en", backend: str | None = None) -> tuple[str | None, str]:
    """Resume the one selected run (`backend` "local": a cluster run on this machine); returns
    (run id to watch, message in `lang`)."""
    if len(run_ids) != 1:
        return None, text("runs.msg.select_resume", lang)
    try:
        result = console.jobs.resume(run_ids[0], viewer, backend=backend)
    except (ValueError, RunDirError, launcher.LaunchError, OSError) as err:
        return None, f"⚠ {problem_text(err, lang)}"
    return result.run_id, action_text(result.message, lang)


def delete_check(console: Console, run_ids: list[str], viewer: Viewer = SINGLE_USER,
                 lang: str = "en") -> tuple[bool, str]:
    """Whether the selected runs may be deleted (all over, no process left), and the question to
    ask (in `lang`)."""
    if not run_ids:
        return False, text("runs.msg.select_delete", lang)
    for run_id in run_ids:
        try:
            status = console.jobs.current_status(run_id, viewer)
        except (ValueError, RunDirError, launcher.LaunchError) as err:
            return False, f"⚠ {problem_text(err, lang)}"
        if status.state not in TERMINAL_STATES:
            state = text(f"state.{status.state}", lang) if lang == "zh" else status.state
            return False, text("runs.msg.busy", lang).format(run=run_id, state=state)
    names = ", ".join(f"`{r}`" for r in run_ids)
    return True, text("runs.msg.confirm", lang).format(names=names)


def delete(console: Console, run_ids: list[str], viewer: Viewer = SINGLE_USER, lang: str = "en") -> str:
    """Delete finished runs (their folders, and the links left by renames) inside the runs folder;
    the message in `lang`."""
    ok, message = delete_check(console, run_ids, viewer, lang)
    if not ok:
        return message
    deleted = []
    for run_id in run_ids:
        real = resolve_inside(console.runs_dir, console.runs_dir / run_id)
        if real == Path(os.path.realpath(console.runs_dir)):
            return text("runs.msg.root", lang).format(run=run_id)
        if launcher.run_processes(real):
            return text("runs.msg.alive", lang).format(run=run_id)
        _remove_links_to(console.runs_dir, real)
        shutil.rmtree(real)
        deleted.append(run_id)
    return text("runs.msg.deleted", lang).format(runs=", ".join(deleted), time=time.strftime("%H:%M:%S"))


def _remove_links_to(runs_dir: Path, real: Path) -> None:
    for entry in os.scandir(runs_dir):
        if entry.is_symlink() and Path(os.path.realpath(entry.path)) == real:
            os.unlink(entry.path)
