"""Monitor tab callbacks: each poll of the page turns a run's files into chart data and words.

The page polls `feed` twice a second while a run is active (through a Gradio server function, not
a Gradio event: see app/tabs/monitor_tab.py for why). A page keeps a `MonitorSession` here, keyed by a
token the page made up: the run it watches, that run's `RunCharts` (which read the metrics file
incrementally; one per run, shared by all pages through the console's `SharedCharts`, with each
chart drawn once per change for all of them), and what was last sent, so each poll sends only what
changed. The controls that are
Gradio components (run picker, stop buttons, downloads, early-stopping fields) are brought up to
date by `controls`, which the page calls only when the feed says they changed. Nothing here holds a
process: stopping and early-stopping changes go through the job manager and the run's control file.
"""
from __future__ import annotations

import functools
import html
import os
import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import core.run.tracking as tracking
from core.spec.config import ConfigError, EarlyStoppingSettings, load_config
from core.spec.objectives import ObjectiveSpec
from core.run.launcher import LaunchError
from core.run.records import TERMINAL_STATES, EvalRecord, RunDirError, Status
from core.run.rundir import RunDir

from app.auth.access import SINGLE_USER, Viewer
from app.background import run_with_ticks
from app.runs.cluster import cancelled, cluster_html, is_cluster, rank_node, shown_state
from app.context import Console
from app.auth.sessions import most_recent, session_lock
from app.runs.exports import FORMATS, ExportFailed, check_summary, export_target, run_export
from app.i18n import TEXTS, Said, problem_text, text
from core.spec.errors import said_of
from core.spec.messages import Message
from app.charts.metrics import RunCharts
from app.runs.run_status import failure_html, phase, reached_step, state_html, status_html, status_line
from app.charts.svg_chart import line_chart

RUN_LIST_EVERY_TICKS = 5
ACTIVE_POLL_S = 0.5   # how often a page polls while its run is going
IDLE_POLL_S = 2.0     # ... and while it is over (a new run started elsewhere still shows within this)


@dataclass(eq=False)  # hashed by identity, for `session_lock`
class MonitorSession:
    """What one page watches and was last sent: kept per page token by `FeedPages` for the feed,
    and as Gradio state for the controls (`controls`)."""
    run_id: str | None = None
    charts: RunCharts | None = None  # shared with the other pages on this run (console.charts)
    chart_revs: dict[str, int] = field(default_factory=dict)  # RunCharts.revision as last sent
    log_key: tuple | None = None
    run_ids: tuple[str, ...] = ()
    viewer: Viewer = SINGLE_USER  # whose runs this page may show (set from its request)
    ticks: int = 0
    es_loaded_for: str | None = None
    downloads_sent: dict[str, tuple] = field(default_factory=dict)
    es_caption: str | None = None
    sent: dict[str, Any] = field(default_factory=dict)  # last value sent per output (unchanged ones are skipped)


def changed_only(session: MonitorSession, **values: Any) -> dict[str, bool]:
    """Which of `values` differ from what this tab was last sent (and remember them): an unchanged
    output is skipped, so the browser re-renders nothing for it (every update costs the browser
    CPU, which on a small machine is taken from training)."""
    fresh = {name: session.sent.get(name, _UNSENT) != value for name, value in values.items()}
    session.sent.update(values)
    return fresh


_UNSENT = object()


@dataclass
class Tick:
    """What one tick changes on the page; None means 'leave it as it is'."""
    run_id: str | None
    run_choices: list[str] | None
    charts: dict[str, str]      # chart name -> SVG, for the charts that changed
    state: str
    status: str
    failure: str
    log: str | None
    es_status: str
    es_values: dict[str, Any] | None
    downloads: dict[str, tuple[str, str | None, bool]]   # fmt -> (label, file, clickable)
    active: bool


def run_ids(console: Console, viewer: Viewer = SINGLE_USER) -> list[str]:
    return [s.run_id for s in console.jobs.runs(viewer)]


def _valid_run_id(console: Console, run_id: str | None, viewer: Viewer = SINGLE_USER) -> str | None:
    """`run_id` if it names a folder directly inside the runs folder that `viewer` may see, else
    None (the picker accepts typed text, which must not reach files elsewhere or other users' runs)."""
    try:
        return console.jobs.run_dir(run_id, viewer) and run_id
    except ValueError:
        return None


def _follow_rename(console: Console, run_id: str) -> str:
    """A run renamed when it ended leaves a symlink under its old id: return the new id."""
    path = console.runs_dir / run_id
    return Path(os.readlink(path)).name if path.is_symlink() else run_id


def _default_run(console: Console, viewer: Viewer = SINGLE_USER) -> str | None:
    """The newest run that is training (starting, running, stopping), else the newest run that has
    points to draw, else the newest run (of those `viewer` may see). A queued run, or one cancelled
    before it started, has empty charts: a reload opened it (issue 31 item 2)."""
    runs = console.jobs.runs(viewer)
    active = [r for r in runs if r.state in ("starting", "running", "stopping")]
    drawn = [r for r in runs if _has_points(r.path)]
    candidates = active or drawn or runs
    return candidates[0].run_id if candidates else None


def _has_points(path: Path) -> bool:
    try:
        return RunDir(path).metrics_path.stat().st_size > 0
    except OSError:
        return False


def _select(session: MonitorSession, console: Console, wanted: str | None) -> str | None:
    """Point the session at `wanted` (or a default); a rename keeps the chart data."""
    viewer = session.viewer
    wanted = (_valid_run_id(console, wanted, viewer) or _valid_run_id(console, session.run_id, viewer)
              or _default_run(console, viewer))
    wanted = _follow_rename(console, wanted) if wanted else None
    if wanted and session.run_id and _follow_rename(console, session.run_id) == wanted:
        session.run_id = wanted  # the same run, under its final name: keep its chart data
        return wanted
    if wanted != session.run_id:
        session.run_id, session.charts, session.log_key = wanted, None, None
        session.downloads_sent, session.es_caption = {}, None
    return wanted


def tick(session: MonitorSession, wanted: str | None, console: Console, lang: str = "en",
         log_scale: bool = False, full: bool = False, ppl_log_scale: bool = True) -> Tick:
    """Bring the session's run up to date: new metric points, status, log tail, downloads
    (`full`: every chart and the log, as for a page that lost what it was sent). `log_scale`: the
    loss charts on a log axis; `ppl_log_scale`: the perplexity chart (on by default: the base
    model's perplexity is often 1000x the trained one's, which flattens a linear axis)."""
    session.ticks += 1
    if full:
        session.log_key = None
        session.sent.clear()
    run_id = _select(session, console, wanted)
    choices = _choices_if_changed(session, console, run_id)
    run = RunDir(console.runs_dir / run_id) if run_id else None
    if run is None or not run.exists():
        return _no_run(run_id, choices, lang)
    status = reached_step(_status(run), run.checkpoint_steps())
    fresh = session.charts is None
    if fresh:  # another run than the charts showed: every chart is sent, empty ones too
        session.charts = console.charts.get(run.path, workers=_workers(run, status))
        if is_cluster(status):
            console.jobs.follow(RunDir(run.path.resolve()))  # a job submitted elsewhere is watched too
    svgs = _chart_updates(session, log_axes(log_scale, ppl_log_scale), everything=full or fresh, lang=lang)
    log = _log_if_changed(session, run)
    es_values = None
    if session.es_loaded_for != run_id:
        es_values, session.es_loaded_for = early_stopping_settings(run), run_id
    failure = "" if cancelled(status) else failure_html(status, log or "", lang, rank_node(status, status.failed_rank, run))
    return Tick(run_id, choices, svgs, state_html(shown_state(status), lang),
                _status_text(status, session.charts, lang), failure,
                text("mon.no_log", lang) if log == "" else log, session.es_caption or "", es_values,
                _downloads_if_changed(session, console, run, lang), status.state not in TERMINAL_STATES)


def _chart_updates(session: MonitorSession, log: frozenset[str], everything: bool = False,
                   lang: str = "en") -> dict[str, str]:
    """SVGs of the charts that got points (and of the validation charts when the caption changed,
    a chart whose axis scale changed; all of them when `everything` or another language)."""
    charts = session.charts
    with charts.lock:  # shared with the other pages on this run
        now = time.monotonic()
        if session.chart_revs in ({}, charts.revision) or now - charts.read_at >= ACTIVE_POLL_S:
            charts.update()  # a page behind the others first gets what they got (drawn once for all)
            charts.read_at = now
        changed = {name for name, revision in charts.revision.items() if session.chart_revs.get(name) != revision}
        session.chart_revs = dict(charts.revision)
        if everything or session.sent.get("lang", lang) != lang:
            changed |= set(Y_TITLES)
        session.sent["lang"] = lang
        changed |= session.sent.get("log_axes", log) ^ log
        session.sent["log_axes"] = log
        caption = es_caption(charts.last_eval, lang)
        if caption != session.es_caption:
            changed |= set(VALIDATION_CHARTS)
            session.es_caption = caption
        return {name: drawn_chart(charts, name, log, caption, session.run_id, lang) for name in changed}


def drawn_chart(charts: RunCharts, name: str, log: frozenset[str], caption: str, run_id: str | None,
                lang: str) -> str:
    """`chart_svg`, drawn once per revision of the chart and way of drawing it for all the pages
    that share `charts` (the caller holds `charts.lock`); older drawings are dropped."""
    caption = caption if name in ("val_loss", "val_ppl") else ""
    key = (name, charts.revision[name], name in log, caption, run_id, lang)
    svg = charts.drawn.get(key)
    if svg is None:
        charts.drawn = {k: v for k, v in charts.drawn.items() if k[1] == charts.revision[k[0]]}
        svg = charts.drawn[key] = chart_svg(charts, name, log, caption, run_id, lang)
    return svg


def _status_text(status: Status, charts: RunCharts, lang: str) -> str:
    """Step / total, elapsed, ETA, best, and what a starting run is busy with."""
    if not status.total_steps and charts.setup:
        status = status.replace(total_steps=charts.setup.total_steps)
    line = status_line(status, charts.progress.seconds_per_step(), spec=charts.spec, lang=lang)
    busy = phase(line.state, charts.setup is not None, charts.last_eval is not None, charts.last_train is not None)
    if busy == "phase.queued" and is_cluster(status):
        busy = "phase.pending"
    return status_html(line, lang, busy) + cluster_html(status, lang) + trackers_html(charts.path, lang)


def _no_run(run_id: str | None, choices: list[str] | None, lang: str) -> Tick:
    return Tick(run_id, choices, {}, state_html("unknown", lang), html.escape(text("mon.no_run", lang)), "", None,
                "", None, {}, False)


def _status(run: RunDir) -> Status:
    try:
        return run.read_status()
    except RunDirError as err:
        said = said_of(err)
        return Status(state="unknown", reason=str(said),
                      reason_message=said.to_json() if isinstance(said, Message) else None)


def _workers(run: RunDir, status: Status) -> int:
    count = status.rank_count or status.data_parallel
    return count if count and count > 0 else 1


def _choices_if_changed(session: MonitorSession, console: Console, run_id: str | None) -> list[str] | None:
    """The run list, re-read every few ticks (or when the selected run is new to it)."""
    if session.ticks % RUN_LIST_EVERY_TICKS != 1 and (run_id is None or run_id in session.run_ids):
        return None
    ids = tuple(run_ids(console, session.viewer))
    if ids == session.run_ids:
        return None
    session.run_ids = ids
    return list(ids)


def _log_if_changed(session: MonitorSession, run: RunDir) -> str | None:
    """The tail of train.log when the file grew or changed since the last tick, else None."""
    try:
        st = os.stat(run.log_path)
        key = (st.st_ino, st.st_size, st.st_mtime_ns)
    except OSError:
        key = None
    if key == session.log_key:
        return None
    session.log_key = key
    return run.log_tail() if key else ""


# chart -> its y-axis title in English (app.i18n "ytitle.<chart>" holds both languages)
Y_TITLES = {name: text(f"ytitle.{name}", "en") for name in ("loss", "val_loss", "val_ppl", "memory", "tokens_per_s",
                                                             "lr", "grad_norm", "loss_scale", "answers",
                                                             "reward_accuracy", "reward_margin", "logps",
                                                             "reward", "reward_functions", "kl", "completions")}
VALIDATION_CHARTS = ("val_loss", "val_ppl", "reward")  # drawn with the early-stopping caption


LOSS_CHARTS = ("loss", "val_loss")  # what the loss log-scale box switches
DEFAULT_LOG_AXES = frozenset({"val_ppl"})


def log_axes(log_scale: bool = False, ppl_log_scale: bool = True) -> frozenset[str]:
    """The charts drawn on a log y axis: the loss charts when `log_scale`, perplexity when
    `ppl_log_scale`."""
    return frozenset((LOSS_CHARTS if log_scale else ()) + (("val_ppl",) if ppl_log_scale else ()))


def chart_svg(charts: RunCharts, name: str, log: frozenset[str] = DEFAULT_LOG_AXES, caption: str = "",
              run_id: str | None = None, lang: str = "en") -> str:
    """One chart of the run as SVG (on a log axis when `name` is in `log`), the validation
    charts with the early-stopping caption (current best, patience left). The <svg> names the run
    it draws (`data-run`), so the page can tell another run's drawings from this one's."""
    if name == "completions":
        return completions_html(charts.completions, run_id or charts.path.name, lang)
    words = chart_words(lang)
    if name == "answers" and not scores_expected(charts.path):
        words["empty_text"] = text("chart.no_scores", lang)
    svg = line_chart(charts.frames[name], chart_title(name, lang), log_y=name in log,
                     caption=caption if name in VALIDATION_CHARTS else "", **words)
    return svg.replace("<svg ", f'<svg data-run="{html.escape(run_id or charts.path.name)}" ', 1)


PROMPT_SHOWN = 300  # characters of a prompt's end the completions table shows (all of it on hover)


def completions_html(event, run_id: str, lang: str = "en") -> str:
    """grpo: the newest evaluation's completions (core.run.records.CompletionsEvent) as a table: the
    prompt (its end; the whole on hover), the completion, each reward function's value and the
    weighted total. Everything from the run is escaped."""
    run = html.escape(run_id, quote=True)
    if event is None or not event.samples:
        return (f'<div class="mt-completions" data-run="{run}" data-points="0"><div class="mt-note '
                f'mt-completions-empty">{html.escape(text("mon.completions_none", lang))}</div></div>')
    labels = list(dict.fromkeys(label for sample in event.samples for label in (sample.get("rewards") or {})))

    def number(value) -> str:
        return f"{value:.3g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "–"

    head = "".join(f"<th>{html.escape(text(f'mon.completions_col.{c}', lang))}</th>" for c in ("prompt", "completion"))
    head += "".join(f"<th>{html.escape(label)}</th>" for label in labels)
    head += f"<th>{html.escape(text('mon.completions_col.total', lang))}</th>"
    rows = []
    for sample in event.samples:
        prompt = str(sample.get("prompt", ""))
        shown = prompt if len(prompt) <= PROMPT_SHOWN else "…" + prompt[-PROMPT_SHOWN:]
        rewards = sample.get("rewards") or {}
        cells = "".join(f"<td class='mt-num'>{number(rewards.get(label))}</td>" for label in labels)
        rows.append(f"<tr><td class='mt-prompt' title=\"{html.escape(prompt, quote=True)}\"><pre>{html.escape(shown)}"
                    f"</pre></td><td class='mt-completion'><pre>{html.escape(str(sample.get('completion', '')))}</pre>"
                    f"</td>{cells}<td class='mt-num'><b>{number(sample.get('total'))}</b></td></tr>")
    caption = text("mon.completions_head", lang).format(n=len(event.samples), step=event.step)
    return (f'<div class="mt-completions" data-run="{run}" data-step="{event.step}" data-points="{len(rows)}">'
            f"<div class='mt-note'>{html.escape(caption)}</div>"
            f"<table><tr>{head}</tr>{''.join(rows)}</table></div>")


# the Monitor's charts of each chart an objective may offer (core.spec.objectives ObjectiveSpec.charts)
SPEC_CHARTS = {"loss": ("loss", "val_loss"), "ppl": ("val_ppl",), "scores": ("answers",),
               "rewards": ("reward_accuracy", "reward_margin", "logps"), "memory": ("memory",),
               "throughput": ("tokens_per_s",), "lr": ("lr",), "grad_norm": ("grad_norm",),
               "loss_scale": ("loss_scale",), "reward": ("reward",), "reward_functions": ("reward_functions",),
               "kl": ("kl",), "completions": ("completions",)}
# the controls that belong to a chart: shown with it
CHART_CONTROLS = {"val_ppl": ("ppl-log-scale",)}


def hidden_parts(spec: ObjectiveSpec) -> list[str]:
    """The chart names (and the controls that go with them: the perplexity's log scale) the run's
    objective does not draw: a preference run has no perplexity nor answer scores, an SFT run no
    reward figures. The page hides them (monitor_feed.js)."""
    shown = {chart for name in spec.charts for chart in SPEC_CHARTS.get(name, ())}
    hidden = [name for name in Y_TITLES if name not in shown]
    return hidden + [control for name in hidden for control in CHART_CONTROLS.get(name, ())]


def run_config(run_path: Path):
    """The run's config (None when unreadable), read again only when config.yaml changed: the status
    line asks for it at every poll."""
    path = Path(run_path) / "config.yaml"
    try:
        stat = path.stat()
    except OSError:
        return None
    return _config(str(path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=64)
def _config(path: str, mtime_ns: int, size: int):
    try:
        return load_config(path)
    except (ConfigError, OSError):
        return None


def scores_expected(run_path: Path) -> bool:
    """Whether the run scores answers at its evaluations (eval.downstream with a data.test_file)."""
    config = run_config(run_path)
    return config is None or bool(config.eval.downstream and config.data.test_file)


def trackers_html(run_path: Path, lang: str = "en") -> str:
    """Where the run's trackers write, each with the command that shows it ('' without trackers)."""
    config = run_config(run_path)
    lines = tracker_lines(config, Path(run_path), lang) if config is not None else []
    if not lines:
        return ""
    items = "".join(f"<li>{line}</li>" for line in lines)
    return f'<div class="mt-trackers" id="run-trackers">{html.escape(text("track.head", lang))}<ul>{items}</ul></div>'


def tracker_lines(config, run_path: Path, lang: str = "en") -> list[str]:
    """One HTML line per tracker of `config`: where it writes (folder or URI) and how to look."""
    out = []
    for place in tracking.destinations(config, run_path):
        said = {"where": f"<code>{html.escape(place.where)}</code>",
                "command": f"<code>{html.escape(place.command)}</code>" if place.command else ""}
        out.append(text(f"track.{place.kind}", lang).format(**said))
    return out


def chart_title(name: str, lang: str = "en") -> str:
    """The y-axis title of the Monitor chart `name`."""
    return text(f"ytitle.{name}", lang)


def chart_words(lang: str = "en") -> dict[str, Any]:
    """The words every chart writes (x axis, log mark, the empty chart's line, the series' names
    and the points' labels), for svg_chart.line_chart."""
    return {"x_title": text("chart.step", lang), "log_mark": text("chart.log", lang),
            "empty_text": text("chart.empty", lang), "series_word": text("chart.series", lang),
            "series_text": lambda name: series_text(name, lang)}


def series_text(name: str, lang: str = "en") -> str:
    """A Monitor chart's series in `lang`: app.charts.metrics names them by the series.* texts' keys
    (a Said: 'val loss EMA', 'best val_loss', 'rank 1', a fork's 'loss (parent)'); a name without a
    key (a reward function's label) as it is."""
    return name.in_lang(lang) if isinstance(name, Said) else str(name)


def es_caption(last_eval: EvalRecord | None, lang: str = "en") -> str:
    """'best val_loss 1.234 at step 200 · patience left 2' from the newest evaluation."""
    if last_eval is None or last_eval.best_value is None:
        return ""
    parts = [text("es.best", lang).format(monitor=last_eval.monitor or "?", value=f"{last_eval.best_value:.4g}",
                                          step=last_eval.best_step)]
    if last_eval.patience_left is not None:
        enabled = last_eval.early_stopping_enabled is not False
        parts.append(text("es.patience", lang).format(n=last_eval.patience_left) + ("" if enabled else text("es.off", lang)))
    return " · ".join(parts)


def early_stopping_settings(run: RunDir) -> dict[str, Any]:
    """The early-stopping settings in force, by field name: the run's config (the config's
    defaults if it cannot be read) with the console's overrides on top."""
    try:
        settings = load_config(run.config_path).early_stopping
    except (ConfigError, OSError):
        settings = EarlyStoppingSettings()
    try:
        return run.read_control().early_stopping_over(settings).to_dict()
    except (RunDirError, ConfigError):
        return settings.to_dict()


def apply_early_stopping(console: Console, run_id: str | None, enabled: bool, monitor: str,
                         patience: float | None, min_delta: float | None, viewer: Viewer = SINGLE_USER) -> str:
    """Send new early-stopping settings to a running job through its control file."""
    if not run_id:
        return Said("act.no_run")
    request = {"enabled": bool(enabled), "monitor": monitor, "patience": patience, "min_delta": min_delta}
    try:
        run = console.jobs.run_dir(run_id, viewer)
        if run.read_status().state in TERMINAL_STATES:
            return Said("act.es_over", run=run_id)
        control = run.write_control(early_stopping=request)  # checked by the config's rules
    except (ValueError, RunDirError) as err:
        return Said("check.warn", problem=err)
    shown = ", ".join(f"early_stopping.{k} {control.early_stopping[k]}" for k in request)  # the keys as typed
    return Said("act.es_sent", seq=control.seq, settings=shown)


def stop(console: Console, run_id: str | None, graceful: bool, viewer: Viewer = SINGLE_USER) -> str:
    if not run_id:
        return Said("act.no_run")
    try:
        return console.jobs.request_stop(run_id, graceful, viewer)
    except (ValueError, LaunchError) as err:  # LaunchError: a pending cluster job's scancel refused
        return Said("check.warn", problem=err)


# ---- Serve: an OpenAI-compatible endpoint for a finished run (app/runs/serving.py) -------------------

SERVABLE_STATES = ("finished", "early_stopped", "stopped")


def _run_or_said(console: Console, run_id: str | None, viewer: Viewer) -> RunDir | Said:
    if not run_id:
        return Said("act.no_run")
    try:
        return console.jobs.run_dir(run_id, viewer)
    except ValueError as err:
        return Said("check.warn", problem=err)


def serve(console: Console, run_id: str | None, viewer: Viewer = SINGLE_USER,
          on_wait: Callable[[float], None] | None = None) -> str:
    """Start (or find) the run's endpoint and wait until it answers; says its address."""
    run = _run_or_said(console, run_id, viewer)
    if isinstance(run, Said):
        return run
    state = run.read_status().state
    if state not in SERVABLE_STATES or run.checkpoint_step("best") is None:
        return Said("act.serve_not_over", run=run_id, state=state)
    endpoint = console.endpoints.start(run.path)
    kind, detail = console.endpoints.wait_ready(endpoint, on_wait=on_wait)
    if kind == "serving":
        return Said("act.serving", run=run_id, where=detail)
    if kind == "ended":
        console.endpoints.stop(run.path)
        return Said("act.serve_failed", problem=detail)
    return Said("act.serve_starting", run=run_id)


def stop_serving(console: Console, run_id: str | None, viewer: Viewer = SINGLE_USER) -> str:
    run = _run_or_said(console, run_id, viewer)
    if isinstance(run, Said):
        return run
    return Said("act.serve_stopped", run=run_id) if console.endpoints.stop(run.path) else \
        Said("act.not_serving", run=run_id)


# ---- the page's feed and its controls --------------------------------------------------------

_TOKEN = re.compile(r"[A-Za-z0-9_-]{8,64}")
_LANGS = ("en", "zh")


@dataclass(eq=False)  # hashed by identity, for `session_lock`
class FeedPage:
    """One open page: what it watches and was sent (a MonitorSession), and a counter that moves
    when the Gradio controls (picker, buttons, downloads) need a refresh."""
    monitor: MonitorSession = field(default_factory=MonitorSession)
    controls_key: tuple | None = None
    controls_rev: int = 0
    seen: float = 0.0


class FeedPages:
    """The open pages of one console, by the token each page made up (and the user it belongs
    to: another user's token is another page); a page not heard from for `idle_s` is forgotten
    (it starts over, with everything sent again, if it comes back)."""

    def __init__(self, max_pages: int = 64, idle_s: float = 600.0):
        self.max_pages, self.idle_s = max_pages, idle_s
        self._pages: OrderedDict[str, FeedPage] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, token: str, viewer: Viewer = SINGLE_USER) -> FeedPage:
        now = time.monotonic()
        key = (viewer.user, token)
        with self._lock:
            for old in [t for t, p in self._pages.items() if now - p.seen > self.idle_s]:
                del self._pages[old]
            page = most_recent(self._pages, key, lambda: FeedPage(MonitorSession(viewer=viewer)), self.max_pages)
            page.seen = now
            return page

    def __len__(self) -> int:
        return len(self._pages)


def feed(pages: FeedPages, request: Any, console: Console, viewer: Viewer = SINGLE_USER) -> dict[str, Any]:
    """One poll of a page: {"run", "slots": {slot: HTML that changed}, "controls": counter,
    "interval": seconds to the next poll}. `request` comes from the browser and is checked:
    {"token", "run" (the picker's text), "lang", "log_scale" (loss charts), "ppl_log_scale"
    (perplexity chart, default true), "full" (resend everything)}. Every chart that changed is
    sent, in view or not: one held back while scrolled away was stale in view and in a screenshot."""
    if not isinstance(request, dict) or not isinstance(request.get("token"), str) \
            or not _TOKEN.fullmatch(request["token"]):
        return {"error": "bad request: a token of 8-64 letters, digits, - or _ is required"}
    wanted = request.get("run") if isinstance(request.get("run"), str) else None
    lang = request.get("lang") if request.get("lang") in _LANGS else "en"
    full = bool(request.get("full"))
    page = pages.get(request["token"], viewer)
    with session_lock(page):
        session = page.monitor
        log_scale = bool(request.get("log_scale"))
        ppl_log_scale = bool(request.get("ppl_log_scale", True))
        result = tick(session, wanted, console, lang, log_scale, full, ppl_log_scale)
        charts = result.charts
        slots = {"state": result.state, "status": result.status, "failure": result.failure,
                 "es_status": html.escape(result.es_status)}
        if result.log is not None:
            slots["log"] = html.escape(result.log)
        fresh = {name: slots[name] for name, changed in changed_only(session, **slots).items() if changed}
        key = (result.run_id, session.run_ids, result.active, tuple(sorted(session.downloads_sent.items())),
               session.es_loaded_for)
        if key != page.controls_key:
            page.controls_key, page.controls_rev = key, page.controls_rev + 1
        hidden = hidden_parts(session.charts.spec) if session.charts is not None else []
        return {"run": result.run_id, "slots": {**fresh, **charts}, "controls": page.controls_rev,
                "hide": hidden, "interval": ACTIVE_POLL_S if result.active else IDLE_POLL_S}


@dataclass
class Controls:
    """What the Gradio controls of the Monitor tab should show; None / {} means unchanged."""
    run_id: str | None
    run_choices: list[str] | None
    active: bool | None
    downloads: dict[str, tuple[str, str | None, bool]]
    es_values: dict[str, Any] | None
    profile: tuple[str, str | None] | None = None  # (HTML, trace file) of train.profile_steps, when it changed


def picker_change(result: Controls, wanted: str | None) -> dict[str, Any]:
    """What the run picker should change to after a sync that asked for `wanted`: new choices when
    the run list changed, and a value only when the server shows another run than the one asked for
    (a default for an empty pick, a run's final name). A sync answers a little later than it was
    asked: re-sending `wanted` as the value would undo a pick made by hand meanwhile (under load,
    the Monitor went back to the previously shown run and never drew the one picked)."""
    change: dict[str, Any] = {}
    if result.run_choices is not None:
        change["choices"] = result.run_choices
    if result.run_id != wanted:
        change["value"] = result.run_id
    return change


def controls(session: MonitorSession, wanted: str | None, console: Console, lang: str = "en",
             viewer: Viewer | None = None) -> Controls:
    """The run picker (choices and the run shown), whether Stop applies, the download buttons and,
    for a newly shown run, its early-stopping settings; each only when it changed for this page."""
    if viewer is not None:
        session.viewer = viewer
    run_id = _select(session, console, wanted)
    ids = tuple(run_ids(console, session.viewer))
    choices = list(ids) if ids != session.run_ids else None
    session.run_ids = ids
    run = RunDir(console.runs_dir / run_id) if run_id else None
    if run is None or not run.exists():
        fresh = changed_only(session, active=False)
        return Controls(run_id, choices, False if fresh["active"] else None, {}, None)
    active = _status(run).state not in TERMINAL_STATES
    es_values = None
    if session.es_loaded_for != run_id:
        es_values, session.es_loaded_for = early_stopping_settings(run), run_id
    downloads = _downloads_if_changed(session, console, run, lang)
    profile = profile_view(run, lang)
    fresh = changed_only(session, active=active, profile=profile)
    return Controls(run_id, choices, active if fresh["active"] else None, downloads, es_values,
                    profile if fresh["profile"] else None)


# ---- the profiler's summary (train.profile_steps) --------------------------------------------

def profile_view(run: RunDir, lang: str) -> tuple[str, str | None]:
    """The top operators of a profiled run as an HTML table (time, share, forward or backward),
    and its trace file (chrome://tracing / Perfetto) for the download button; ("", None) else."""
    summary = run.read_profile_summary()
    if summary is None:
        return "", None
    def phase_name(name: str) -> str:  # core.engine.profiling's phases: "backward", "forward + update"
        return text(f"mon.profile_phase.{name}", lang) if f"mon.profile_phase.{name}" in TEXTS else name

    rows = "".join(f"<tr><td>{html.escape(t.op_type)}</td><td>{html.escape(phase_name(t.phase))}</td>"
                   f"<td>{t.ms:.1f}</td><td>{100 * t.share:.1f}%</td><td>{t.calls}</td></tr>"
                   for t in summary.top)
    phase_text = ", ".join(f"{html.escape(phase_name(name))} {ms:.0f} ms" for name, ms in summary.phases.items())
    head = text("mon.profile_head", lang).format(steps="–".join(str(step) for step in summary.steps),
                                                 ms=f"{summary.total_ms:.0f}", phases=phase_text)
    columns = "".join(f"<th>{html.escape(text(f'mon.profile_col.{c}', lang))}</th>"
                      for c in ("operator", "phase", "ms", "share", "calls"))
    table = (f"<div class='mt-profile'><b>{html.escape(text('mon.profile', lang))}</b> · {head}"
             f"<table><tr>{columns}</tr>{rows}</table>"
             f"<small>{html.escape(summary.note)}</small></div>")
    trace = next((run.profile_dir / f for f in summary.files if f.endswith("trace_view.json")), None)
    return table, str(trace) if trace is not None and trace.is_file() else None


# ---- downloads -----------------------------------------------------------------------------

def download_state(console: Console, run: RunDir, fmt: str, lang: str) -> tuple[str, str | None, bool]:
    """(button label, file to download or None, clickable) for one export format."""
    name = text(f"download.{fmt}", lang)
    target = export_target(run.path, fmt)
    if target is None:
        return f"{name} · {text('download.none', lang)}", None, False
    where = text("download.where", lang).format(which=text(f"try.pointer.{target.which}", lang), step=target.step)
    if target.ready:
        checked = check_words(check_summary(target), lang)
        return f"⬇ {name} · {where}{' · ' + checked if checked else ''}", str(target.zip_path), True
    if console.exports.busy(run.path, fmt):
        return f"{name} · {where} · {text('download.busy', lang)}", None, False
    failed = console.exports.failure(run.path, fmt)
    suffix = text("download.failed", lang).format(error=problem_text(failed, lang)[:80]) if failed else ""
    return f"{text('download.prepare', lang)} {name} · {where}{suffix}", None, True


def check_words(check: dict | None, lang: str) -> str:
    """What llama.cpp's reload of a GGUF download found (core.engine.gguf_check), in a few words."""
    if not check:
        return ""
    if check.get("perplexity_reference"):
        return text("download.check_ppl", lang).format(
            equal=check["greedy_equal"] + check["greedy_ties"], prompts=check["prompts"],
            before=f"{check['perplexity_reference']:.3f}", after=f"{check['perplexity']:.3f}",
            quant=check["quant"])
    return text("download.check_exact", lang).format(
        equal=check["greedy_equal"] + check["greedy_ties"], prompts=check["prompts"],
        diff=f"{check['max_logit_diff']:.1e}" if check.get("max_logit_diff") is not None else "?",
        ppl=f"{check['perplexity']:.3f}")


def _downloads_if_changed(session: MonitorSession, console: Console, run: RunDir,
                          lang: str) -> dict[str, tuple[str, str | None, bool]]:
    out = {}
    for fmt in FORMATS:
        state = download_state(console, run, fmt, lang)
        if session.downloads_sent.get(fmt) != state:
            session.downloads_sent[fmt] = out[fmt] = state
    return out


def prepare_download(console: Console, run_id: str | None, fmt: str, lang: str,
                     viewer: Viewer = SINGLE_USER, on_wait: Callable[[float], None] | None = None,
                     wait_every_s: float = 0.5) -> tuple[tuple, str]:
    """A click on a download button that has no file yet: export now, then offer it (the page
    then starts the download itself: one click). `on_wait(seconds so far)` is called while the
    export runs, for a progress line."""
    if not run_id:
        return ("", None, False), Said("act.no_run")
    try:
        run = console.jobs.run_dir(run_id, viewer)
    except ValueError as err:
        return ("", None, False), Said("check.warn", problem=err)
    try:
        run_with_ticks(lambda: run_export(run.path, fmt, console.runs_dir), on_wait, wait_every_s)
    except (ExportFailed, OSError) as err:
        return download_state(console, run, fmt, lang), Said("act.export_failed", problem=said_of(err))
    state = download_state(console, run, fmt, lang)
    return state, Said("act.ready", file=Path(state[1]).name)


def download_ready(console: Console, run_id: str | None, fmt: str, held: str | None,
                   viewer: Viewer = SINGLE_USER) -> bool:
    """Whether the click already downloaded the run's `fmt` zip: the zip exists and the page's button
    held it when clicked (`held`, the file the button sent). A zip the worker made a moment ago may
    not have reached the page yet (its controls update was still on the way): that click downloaded
    nothing, so it is not ready for this page."""
    try:
        run = console.jobs.run_dir(run_id, viewer)
    except ValueError:
        return False
    target = export_target(run.path, fmt)
    return (target is not None and target.ready and held is not None
            and Path(held).name == target.zip_path.name)
