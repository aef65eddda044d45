"""Runs tab callbacks: the table of every run on disk, curves and configs of several runs side by
side, resume and delete. Runs started from a shell appear like any other: the folder is the record.
"""
from __future__ import annotations

import functools
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
from core.run.runs import RunSummary
from core.spec.objectives import OBJECTIVES, SFT, ObjectiveSpec

from app.auth.access import SINGLE_USER, Viewer
from app.runs.cluster import queue_label, shown_state
from app.tabs.changes import BOOKKEEPING, Change, applies, changes, changes_text, differing_keys, flat_config, show
from app.context import Console
from app.charts.figures import SHARES, run_spec
from app.i18n import TEXTS, Said, action_text, problem_text, reason_text, text
from app.charts.metrics import RunCharts
from app.runs.run_status import fmt_duration, reached_step, state_word, total_elapsed_s
from app.charts.svg_chart import line_chart

# The table: the run, its state and step, the figures its objective compares (core.spec.objectives:
# perplexity and answer scores for SFT, reward accuracy and margin for a preference run...), then
# tokens/s, memory, duration, reason and parent. A figure column appears when a listed run has it;
# a run whose objective has no such figure says so ("n/a (sft run)").
HEAD_COLUMNS, TAIL_COLUMNS = ["run", "state", "step"], ["duration", "reason", "parent"]
# compared figure -> its column (runs.col.<column> in app.i18n)
FIGURE_COLUMNS = {"best_val_ppl": "best val ppl", "exact_match": "EM %", "bleu": "BLEU", "rouge1": "ROUGE-1",
                  "rouge2": "ROUGE-2", "rougeL": "ROUGE-L", "reward_accuracy": "reward accuracy %",
                  "reward_margin": "reward margin", "val_reward": "reward", "tokens_per_s": "tokens/s",
                  "peak_mem_mb": "peak MB"}
SYSTEM_FIGURES = ("tokens_per_s", "peak_mem_mb")  # what every run has, at the end of the figures
# every figure an objective compares, in the registry's order (the system figures last)
FIGURE_ORDER = [name for name in dict.fromkeys(n for spec in OBJECTIVES.values() for n in spec.compare)
                if name not in SYSTEM_FIGURES] + list(SYSTEM_FIGURES)
TABLE_HEADERS = HEAD_COLUMNS + [FIGURE_COLUMNS[n] for n in FIGURE_ORDER if n in SFT.compare] + TAIL_COLUMNS
# share of the table's width: the ids and the reason wrap; the figures share what is left
HEAD_WIDTHS, TAIL_WIDTHS, FIGURES_WIDTH = ["19%", "7%", "5%"], ["6%", "10%", "9%"], 44
OVERLAY_METRICS = {"train loss": ("loss", "loss"), "train loss EMA": ("loss", "loss EMA"),
                   "val loss": ("val_loss", "val loss"), "val ppl": ("val_ppl", "val ppl"),
                   "reward accuracy": ("reward_accuracy", "reward accuracy"),
                   "reward margin": ("reward_margin", "reward margin"),
                   "train reward": ("reward", "reward"), "val reward": ("reward", "val reward"),  # grpo
                   "tokens/s": ("tokens_per_s", "tokens/s")}
LOSS_METRICS = ("train loss", "train loss EMA", "val loss")  # drawn together only for comparable objectives
MAX_OVERLAY = 8


# One format per column, in the table and in the comparison's deltas (issue 31 item 6: "+486",
# "+594.3" and "557.5" in one column of whole numbers): perplexity with two decimals, the answer
# scores and reward accuracy (x100) with one, the margin with three, tokens/s and megabytes whole.
PPL, SCORE, WHOLE = ".2f", ".1f", ".0f"
FIGURE_FORMATS = {"best_val_ppl": PPL, "reward_margin": ".3f", "val_reward": ".3f"}


def _number(value: Any, spec: str = WHOLE) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return format(value, spec)
    return "-"


def figure_cell(name: str, value: Any) -> str:
    """A figure as the table shows it: shares x100 ('37.5'), the others in their column's format."""
    if name in SHARES:
        return _number(100 * value, SCORE) if isinstance(value, (int, float)) else "-"
    return _number(value, FIGURE_FORMATS.get(name, WHOLE))


def table_figures(specs: list[ObjectiveSpec]) -> list[str]:
    """The figure columns of a table of runs of these objectives (SFT's when there are none)."""
    wanted = {n for spec in (specs or [SFT]) for n in spec.compare}
    return [n for n in FIGURE_ORDER if n in wanted]


def table_widths_of(table: pd.DataFrame) -> list[str]:
    """The share of the page's width of each of the table's columns (its figure columns share theirs)."""
    figures = len(table.columns) - len(HEAD_COLUMNS) - len(TAIL_COLUMNS)
    share = f"{FIGURES_WIDTH / max(figures, 1):.1f}%"
    return HEAD_WIDTHS + [share] * figures + TAIL_WIDTHS


def not_applicable(spec: ObjectiveSpec, lang: str = "en") -> str:
    """'n/a (sft run)': the cell of a figure the run's objective does not have."""
    return text("runs.na_objective", lang).format(objective=spec.name)


def table_row(summary: RunSummary, now: float | None = None, lang: str = "en",
              figures: list[str] | None = None) -> list[str]:
    """One run's row: final figures when it is over, the latest logged ones while it runs; `figures`
    (default SFT's) the figure columns, each 'n/a (<objective> run)' where the run's objective has none."""
    status = reached_step(summary.status, summary.run.checkpoint_steps())
    step, total = status.step, status.total_steps
    reason = (reason_text(summary.reason, lang, summary.status.reason_message).splitlines()[0][:120]
              if summary.reason else "")
    spec = run_spec(summary.path)
    values = run_figures(summary.run, status, spec)
    cells = [figure_cell(name, values.get(name)) if name in spec.compare else not_applicable(spec, lang)
             for name in (figures if figures is not None else table_figures([SFT]))]
    state = shown_state(summary.status) if summary.status.state == summary.state else summary.state
    return [summary.run_id, state_word(state, lang),
            f"{step}/{total}" if step is not None and total else _number(step), *cells,
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
    The headers are in `lang`; states stay the run directory contract's words. The figure columns
    are those the listed runs' objectives compare (`table_figures`)."""
    places = {e.run_id: e.position for e in console.jobs.queue(viewer)}
    slurm = {e.run_id: e.position for e in console.jobs.cluster_queue(viewer)}
    summaries = console.jobs.runs(viewer)
    figures = table_figures([run_spec(s.path) for s in summaries])
    rows = []
    for summary in summaries:
        row = table_row(summary, lang=lang, figures=figures)
        if summary.run_id in places:
            row[1] = text("runs.queued_n", lang).format(n=places[summary.run_id])
        elif summary.run_id in slurm:
            row[1] = text("runs.pending_n", lang).format(n=slurm[summary.run_id])
        rows.append(row)
    headers = HEAD_COLUMNS + [FIGURE_COLUMNS.get(n, n) for n in figures] + TAIL_COLUMNS
    return pd.DataFrame(rows, columns=[text(f"runs.col.{h}", lang) if f"runs.col.{h}" in TEXTS else h
                                       for h in headers])


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
    """(label, run id) of every run `viewer` may see, for the selection's boxes: the run's id alone,
    which never changes. A label that changed when the run ended ('… · ppl 3.06') made the page
    draw that box anew, and a tick made in that moment was lost (issue 37); the table beside it
    has the figures."""
    return [(s.run_id, s.run_id) for s in console.jobs.runs(viewer)]


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


def overlay_svg(frame: pd.DataFrame, metric: str, log_y: bool | None = None, lang: str = "en",
                empty_text: str | None = None) -> str:
    """The compared runs' curves of `metric` in one chart, a line per run, labelled by what sets the
    runs apart (the full id on hover); perplexity on a log axis by default."""
    if frame.empty:
        frame = _empty_overlay()
    titles = dict(zip(frame["run"], frame["run_id"])) if "run_id" in frame else {}
    return line_chart(frame, text(f"overlay.{metric}", lang), color_column="run",
                      log_y=overlay_log_default(metric) if log_y is None else log_y,
                      legend_titles=titles, empty_text=empty_text or text("chart.overlay_empty", lang),
                      x_title=text("chart.step", lang), log_mark=text("chart.log", lang),
                      series_word=text("chart.series", lang))


def overlay_refusal(console: Console, run_ids: list[str], metric: str, viewer: Viewer = SINGLE_USER,
                    lang: str = "en") -> str | None:
    """Why the runs' `metric` is not drawn on one axis: a loss of objectives whose losses mean different
    things (an SFT run's language-model loss beside a DPO run's preference loss); None to draw it."""
    if metric not in LOSS_METRICS:
        return None
    specs = {r: run_spec(console.runs_dir / r) for r in run_ids[:MAX_OVERLAY] if _sees(console, r, viewer)}
    if len(comparable_groups(specs)) < 2:
        return None
    names = " / ".join(dict.fromkeys(spec.name for spec in specs.values()))
    return text("chart.overlay_mixed", lang).format(objectives=names)


def overlay_html(cache: OverlayCache, console: Console, run_ids: list[str], metric: str, log_y: bool | None,
                 viewer: Viewer = SINGLE_USER, lang: str = "en") -> str:
    """The overlay of the compared runs, or the empty chart with the reason it is not drawn."""
    refusal = overlay_refusal(console, run_ids, metric, viewer, lang)
    if refusal is None:
        return overlay_svg(cache.frame(console, run_ids, metric, viewer, lang), metric, log_y, lang)
    return (f'<div class="mt-warning mt-overlay-refusal">{html.escape(refusal)}</div>'
            + overlay_svg(_empty_overlay(), metric, log_y, lang, empty_text=text("chart.overlay_not_drawn", lang)))


LABEL_IGNORED = ("run.runs_dir", "run.resume", "run.fork_from")
LABEL_FIRST = ("run.name", "train.objective", "method")  # what tells runs apart first, when it differs
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
    runs shown, its name and objective first ('name demo-dpo · objective dpo · data demo-preference/train.jsonl'),
    else the time in its id; the full id stays on hover."""
    configs = _configs(console, run_ids)
    found = [k for k in differing_keys(configs) if k not in LABEL_IGNORED]
    ordered = [k for k in LABEL_FIRST if k in found] + [k for k in found if k not in LABEL_FIRST]
    shown = {k: _distinct_values([flat.get(k) for flat in configs.values()]) for k in ordered[:MAX_LABEL_SETTINGS]}

    def label(run_id: str, keys: list[str]) -> str:
        flat = configs[run_id]
        parts = [f"{short_key(k, lang)} {shown[k][_show(flat.get(k))]}" for k in keys if applies(flat, k)]
        return " · ".join(parts) or _id_time(run_id)

    # name and objective when they differ, then as many more settings as it takes to tell the runs
    # apart (at most MAX_LABEL_SETTINGS): a legend cuts long names
    differing = [k for k in ordered[:MAX_LABEL_SETTINGS] if k in LABEL_FIRST[:2]]
    for key in ordered[:MAX_LABEL_SETTINGS]:
        if differing and len({label(r, differing) for r in configs}) == len(configs):
            break
        if key not in differing:
            differing.append(key)
    labels = {run_id: label(run_id, differing) for run_id in configs}
    totals = {label: list(labels.values()).count(label) for label in labels.values()}
    counts: dict[str, int] = {}
    for run_id in run_ids:  # runs that differ only in settings left out (or not at all): numbered
        label = labels[run_id]
        counts[label] = counts.get(label, 0) + 1
        if totals[label] > 1:
            labels[run_id] = f"{label} #{counts[label]}"
    return labels


def _distinct_values(values: list[Any]) -> dict[str, str]:
    """Each value's short form, kept apart from the others': a path by as many of its last parts as
    tell it from the others' ('demo/train.jsonl', 'demo-preference/train.jsonl'), any text cut to 32
    characters only where the cut ones still differ."""
    texts = list(dict.fromkeys(_show(v) for v in values))
    out = {}
    for value in texts:
        short = value
        if "/" in value:
            parts = value.rstrip("/").split("/")
            for n in range(1, len(parts) + 1):
                tail = "/".join(parts[-n:])
                if all(not other.rstrip("/").endswith("/" + tail) and other.rstrip("/") != tail
                       for other in texts if other != value):
                    short = tail
                    break
        out[value] = short if len(short) <= 32 else short[:31] + "…"
    if len(set(out.values())) < len(out):  # cut to the same text: the whole values
        out = {value: value for value in texts}
    return out


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

def run_figures(run: RunDir, status: Status, spec: ObjectiveSpec = SFT) -> dict[str, Any]:
    """What a run came to, by the figures its objective compares (`spec.compare`): its final figures
    once it ended, else the best evaluation so far and the newest train record; a figure the status
    does not keep (a preference run's margin) from the evaluation of its best step."""
    final, best = status.final, status.best
    latest = None
    if final is None:
        latest = run.last_metric(TrainRecord)
        if latest is not None and latest.generation not in (None, status.attempt):
            latest = None  # the previous attempt's, logged past the checkpoint this one resumed from
    out: dict[str, Any] = {}
    evaluation = _UNREAD
    for name in spec.compare:
        if name in SYSTEM_FIGURES:
            value = getattr(final, name, None) if final is not None else getattr(latest, name, None)
        elif final is not None and getattr(final, name, None) is not None:
            value = getattr(final, name)
        elif name == "best_val_ppl":
            value = best.val_ppl if best else None
        elif best is not None and getattr(best, name, None) is not None:
            value = getattr(best, name)
        elif name in GENERATION_FIELDS:
            value = None  # the best checkpoint's answer scores come with the final figures
        else:
            if evaluation is _UNREAD:
                evaluation = best_evaluation(run, best.step if best else None)
            value = getattr(evaluation, name, None)
        out[name] = value
    return out


_UNREAD = object()


def best_evaluation(run: RunDir, step: int | None) -> EvalRecord | None:
    """The evaluation record of `step` (the best one), else the newest (not the base model's)."""
    try:
        size = run.metrics_path.stat().st_size
    except OSError:
        return None
    return _best_evaluation(str(run.path), size, step)


@functools.lru_cache(maxsize=256)
def _best_evaluation(path: str, size: int, step: int | None) -> EvalRecord | None:
    found = None
    for record in RunDir(path).metrics_reader().read_new():
        if isinstance(record, EvalRecord) and not record.base:
            if step is None or record.step == step:
                found = record
    return found


@dataclass(frozen=True)
class Delta:
    """One compared run against the reference run of its kind: its changed settings and the change of
    each figure its objective compares; `reference` None for a run no selected run of a comparable
    objective can be compared with (`spec` says which objective)."""
    run_id: str
    reference: str | None
    changes: list[Change]
    figures: dict[str, Any]
    reference_figures: dict[str, Any]
    spec: ObjectiveSpec = SFT


# the Δ column of each figure (app.i18n "delta.<name>"), where its name is not the figure's own
DELTA_NAMES = {"best_val_ppl": "val_ppl"}
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


def comparable_groups(specs: dict[str, ObjectiveSpec]) -> list[list[str]]:
    """The runs in groups whose losses and figures mean the same thing (ObjectiveSpec.comparable), in order."""
    groups: list[list[str]] = []
    for run_id, spec in specs.items():
        group = next((g for g in groups if specs[g[0]].comparable(spec)), None)
        if group is None:
            groups.append([run_id])
        else:
            group.append(run_id)
    return groups


def result_deltas(console: Console, run_ids: list[str], viewer: Viewer = SINGLE_USER) -> list[Delta]:
    """Each selected run against the reference run of its kind (`comparable_groups`): what changed and
    how its results moved. Runs of objectives whose figures are not comparable are never set against
    each other: a run alone of its kind gets a Delta without a reference."""
    run_ids = [r for r in run_ids if _sees(console, r, viewer)]
    if len(run_ids) < 2:
        return []
    configs = _configs(console, run_ids)
    specs = {r: run_spec(console.runs_dir / r) for r in run_ids}
    figures = {r: run_figures(RunDir(console.runs_dir / r), _status(console, r), specs[r]) for r in run_ids}
    out = []
    for group in comparable_groups(specs):
        if len(group) == 1:
            out.append(Delta(group[0], None, [], figures[group[0]], {}, specs[group[0]]))
            continue
        reference = reference_run(console, group)
        out += [Delta(r, reference, changes(configs[reference], configs[r], COMPARED_BOOKKEEPING), figures[r],
                      figures[reference], specs[r]) for r in group if r != reference]
    return out


def delta_text(new: float | None, old: float | None, spec: str, percent_points: bool = False,
               lang: str = "en") -> str:
    """'-0.15 (-4.9%)' with the change in format `spec` (one per column: '.2f', '.0f'); for a share
    (exact match, BLEU, ROUGE, reward accuracy) the difference in points: '+12.5 pts' ('+12.5 个百分点')."""
    if new is None or old is None:
        return "-"
    if percent_points:
        return text("runs.points", lang).format(n=f"{100 * (new - old):+.1f}")
    change = new - old
    relative = f" ({100 * change / old:+.1f}%)" if old else ""
    return f"{format(change, '+' + spec)}{relative}"


def deltas_html(deltas: list[Delta], lang: str = "en") -> str:
    """A table: each run's changed settings beside the change of every figure its objective compares
    (ΔPPL, Δexact match, ΔBLEU, ΔROUGE for SFT; Δreward accuracy, Δmargin for a preference run;
    Δtokens/s and Δpeak memory for all), against the reference run of its kind; a figure another
    objective has is 'n/a (<objective> run)', and a run no selected run compares with says why."""
    if not deltas:
        return ""
    names = [n for n in FIGURE_ORDER if any(n in d.spec.compare for d in deltas)]
    references = {d.reference for d in deltas}
    against = len(references) > 1  # several kinds of runs: each row names its reference
    head = "".join(f"<th>{html.escape(text(h, lang))}</th>" for h in
                   ("runs.col.run", *(("runs.delta_reference",) if against else ()), "runs.delta_changed",
                    *[f"delta.{DELTA_NAMES.get(n, n)}" for n in names]))
    rows = []
    for delta in deltas:
        cells = [f"<td><code>{html.escape(delta.run_id)}</code></td>"]
        if against:
            cells.append(f"<td><code>{html.escape(delta.reference or '')}</code></td>")
        if delta.reference is None:
            alone = text("runs.delta_alone", lang).format(objective=delta.spec.name)
            cells.append(f'<td class="mt-delta-alone" colspan="{len(names) + 1}">{html.escape(alone)}</td>')
            rows.append(f"<tr>{''.join(cells)}</tr>")
            continue
        changed = changes_text(delta.changes) or text("runs.delta_same", lang)
        cells.append(f"<td>{html.escape(changed)}</td>")
        for name in names:
            if name not in delta.spec.compare:
                value = not_applicable(delta.spec, lang)
            else:
                value = delta_text(delta.figures.get(name), delta.reference_figures.get(name),
                                   FIGURE_FORMATS.get(name, WHOLE), percent_points=name in SHARES, lang=lang)
            cells.append(f'<td class="mt-delta" data-figure="{DELTA_NAMES.get(name, name)}">{html.escape(value)}</td>')
        rows.append(f"<tr>{''.join(cells)}</tr>")
    caption = "" if against else html.escape(text("runs.delta_against", lang)).format(
        run=f"<code>{html.escape(next(iter(references)) or '')}</code>")
    return (f'<div class="mt-table-wrap mt-deltas"><p class="mt-note">{caption}</p>'
            f'<table class="mt-config-diff mt-delta-table"><tr>{head}</tr>{"".join(rows)}</table></div>')


def fork_choices(console: Console, run_ids: list[str], viewer: Viewer = SINGLE_USER,
                 lang: str = "en") -> list[tuple[str, int]]:
    """('step-20 (best)', 20) for each checkpoint the one selected run keeps, newest first; the
    pointer's word in `lang` ('step-30（最新）')."""
    if len(run_ids) != 1 or not _sees(console, run_ids[0], viewer):
        return []
    run = console.jobs.run_dir(run_ids[0], viewer)
    pointers = {run.checkpoint_step(p): p for p in POINTERS if run.checkpoint_step(p) is not None}
    steps = sorted(run.checkpoint_steps(), reverse=True)
    return [(text("runs.fork_choice_pointer", lang).format(step=n, pointer=text(f"try.pointer.{pointers[n]}", lang))
             if n in pointers else f"step-{n}", n) for n in steps]


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
