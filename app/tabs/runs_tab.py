"""Runs tab layout and wiring: the runs table, compare (curves and configs), resume, delete.

The table refreshes when the runs folder changed: a small script (runs_watch.js) asks the server
function `runs_callbacks.folder_key` every few seconds while the tab is on screen and fires the
"refresh" event only when the answer differs (see app/tabs/monitor_tab.py for why not a gr.Timer).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gradio as gr
import pandas as pd

from app.tabs import form_sync
from app.tabs import eval_callbacks as ev
from app.tabs import runs_callbacks as cb
from app.context import Console
from app.i18n import Labels, action_text, text
from app.auth.sessions import session_lock

REFRESH_S = 3.0
WATCH_JS = Path(__file__).with_name("runs_watch.js").read_text(encoding="utf-8").replace(
    "WATCH_MS", str(int(REFRESH_S * 1000)))


@dataclass
class RunsTab:
    out: dict[str, Any] = field(default_factory=dict)
    lang: Any = None  # the language toggle (an input of the callbacks that write text)


@dataclass(eq=False)  # hashed by identity, for session_lock
class RunsSession:
    """Per browser tab: the table last sent, and the compared runs' chart readers."""
    table_key: str = ""
    choices: list | None = None  # the selection's choices last sent (sent again only when they change)
    overlay: cb.OverlayCache = field(default_factory=cb.OverlayCache)


def build(console: Console, labels: Labels) -> RunsTab:
    tab = RunsTab()
    out = tab.out
    out["session"] = gr.State(RunsSession())
    tab.lang = labels.toggle
    table = cb.runs_table(console, console.page_viewer, labels.lang)
    # every column within the page's width, the run id and the reason wrapped (issue 31 item 6: the
    # table scrolled sideways and cut the reason column at 1366 px)
    out["table"] = labels.bind(gr.Dataframe(value=table, interactive=False, wrap=True, elem_id="runs-table",
                                            max_height=360, column_widths=cb.table_widths_of(table)),
                               label="runs.table")
    with gr.Row():
        out["select"] = labels.bind(gr.CheckboxGroup(choices=cb.run_choices(console, console.page_viewer), value=[],
                                                     elem_id="runs-select", scale=4), label="runs.select")
        out["refresh"] = labels.bind(gr.Button(size="sm", scale=1, elem_id="runs-refresh"), value="runs.refresh")
    with gr.Row():
        out["open"] = labels.bind(gr.Button(elem_id="runs-open"), value="runs.open")
        out["resume"] = labels.bind(gr.Button(elem_id="resume-button"), value="runs.resume")
        out["resume_here"] = labels.bind(gr.Button(elem_id="resume-here-button"), value="runs.resume_here")
        out["delete"] = labels.bind(gr.Button(variant="stop", elem_id="delete-button"), value="runs.delete")
    with gr.Row(equal_height=True):
        out["new_from"] = labels.bind(gr.Button(elem_id="runs-new-from"), value="runs.new_from")
        out["fork_step"] = labels.bind(gr.Dropdown(choices=[], value=None, elem_id="runs-fork-step", scale=2),
                                       label="runs.fork_step")
        out["fork"] = labels.bind(gr.Button(elem_id="runs-fork"), value="runs.fork")
    with gr.Group():
        labels.bind(gr.Markdown(), value="runs.queue")
        out["queue"] = gr.HTML(cb.queue_html(console, console.page_viewer, labels.lang), elem_id="runs-queue")
        with gr.Row():
            out["queue_up"] = labels.bind(gr.Button(size="sm", elem_id="queue-up"), value="runs.queue_up")
            out["queue_down"] = labels.bind(gr.Button(size="sm", elem_id="queue-down"), value="runs.queue_down")
            out["queue_cancel"] = labels.bind(gr.Button(size="sm", variant="stop", elem_id="queue-cancel"),
                                              value="runs.queue_cancel")
    with gr.Row(visible=False) as confirm_row:
        out["confirm_text"] = gr.Markdown(elem_id="delete-question")
        out["confirm"] = labels.bind(gr.Button(variant="stop", elem_id="delete-confirm"), value="runs.delete_confirm")
        out["cancel"] = labels.bind(gr.Button(elem_id="delete-cancel"), value="runs.delete_cancel")
    out["confirm_row"] = confirm_row
    out["message"] = gr.Markdown(elem_id="runs-message")
    _build_evaluate(out, console, labels)
    with gr.Row():
        out["metric"] = labels.bind(gr.Dropdown(choices=list(cb.OVERLAY_METRICS), value="val ppl", elem_id="runs-metric",
                                                scale=3), label="runs.metric",
                                    choices=[(f"overlay.{metric}", metric) for metric in cb.OVERLAY_METRICS])
        out["log_scale"] = labels.bind(gr.Checkbox(value=cb.overlay_log_default("val ppl"), elem_id="runs-log-scale",
                                                   scale=1), label="runs.log_scale")
    out["overlay"] = labels.bind(gr.HTML(cb.overlay_svg(pd.DataFrame(), "val ppl", lang=labels.lang), elem_id="runs-overlay-plot",
                                         elem_classes=["mt-chart-box"], show_label=True, container=True),
                                 label="runs.overlay")
    out["only_diff"] = labels.bind(gr.Checkbox(value=False, elem_id="runs-only-diff"), label="runs.only_diff")
    out["diff"] = gr.HTML(elem_id="runs-config-diff")

    def key(_args=None, request: gr.Request = None) -> str:
        """Fingerprint of the runs folder (the watcher's poll; a server function, not an event)."""
        return cb.folder_key(console, console.viewer(request))

    out["watch"] = gr.HTML("", elem_id="runs-watch", js_on_load=WATCH_JS, server_functions=[key])
    _wire(tab, console)
    _wire_evaluate(tab, console)
    return tab


def _build_evaluate(out: dict, console: Console, labels: Labels) -> None:
    """The Evaluate action (app/tabs/eval_callbacks.py): tasks, targets, start, stop, base vs best scores."""
    with labels.bind(gr.Accordion(open=False, elem_id="eval-panel"), label="eval.start"):
        labels.bind(gr.Markdown(), value="eval.title")
        with gr.Row():
            out["eval_tasks"] = labels.bind(gr.CheckboxGroup(choices=ev.task_choices(console), value=[],
                                                             elem_id="eval-tasks", scale=3), label="eval.tasks")
            out["eval_targets"] = labels.bind(gr.CheckboxGroup(value=list(ev.TARGETS), elem_id="eval-targets", scale=2),
                                              label="eval.targets",
                                              choices=[(f"eval.target.{t}", t) for t in ev.TARGETS])
        with gr.Row():
            out["eval_limit"] = labels.bind(gr.Number(value=0, minimum=0, precision=0, elem_id="eval-limit"),
                                            label="eval.limit")
            out["eval_chat"] = labels.bind(gr.Checkbox(value=False, elem_id="eval-chat"), label="eval.chat")
            out["eval_start"] = labels.bind(gr.Button(elem_id="eval-start"), value="eval.start")
            out["eval_stop"] = labels.bind(gr.Button(variant="stop", elem_id="eval-stop"), value="eval.stop")
        out["eval_results"] = gr.HTML(elem_id="eval-results")


def _wire_evaluate(tab: RunsTab, console: Console) -> None:
    out = tab.out

    def shown(selected: list[str], language: str, request: gr.Request):
        return ev.results_html(console, selected or [], console.viewer(request), language)

    def start(selected, tasks, targets, limit, chat, language, request: gr.Request):
        viewer = console.viewer(request)
        message = ev.start(console, selected or [], tasks or [], targets or [], limit, chat, viewer, language)
        return message, ev.results_html(console, selected or [], viewer, language)

    def stop(selected, language, request: gr.Request):
        viewer = console.viewer(request)
        return ev.stop(console, selected or [], viewer, language), ev.results_html(console, selected or [], viewer, language)

    results = [out["select"], tab.lang]
    for trigger in (out["select"].input, out["watch"].refresh, out["refresh"].click):
        trigger(shown, results, out["eval_results"], show_progress="hidden", trigger_mode="always_last",
                api_visibility="private")
    out["eval_start"].click(start, [out["select"], out["eval_tasks"], out["eval_targets"], out["eval_limit"],
                                    out["eval_chat"], tab.lang], [out["message"], out["eval_results"]],
                            concurrency_limit=1, api_visibility="private")
    out["eval_stop"].click(stop, results, [out["message"], out["eval_results"]], concurrency_limit=1,
                           api_visibility="private")


def _wire(tab: RunsTab, console: Console) -> None:
    out = tab.out

    def refresh(session: RunsSession, selected: list[str], metric: str, only_diff: bool, log_y: bool,
                language: str, request: gr.Request):
        with session_lock(session):
            return _refresh(session, selected, metric, log_y, console.viewer(request), language)

    def _refresh(session: RunsSession, selected: list[str], metric: str, log_y: bool, viewer, language: str):
        table = cb.runs_table(console, viewer, language)
        choices = cb.run_choices(console, viewer)
        queue = cb.queue_html(console, viewer, language)
        key = table.to_json() + repr(choices) + queue
        overlay = cb.overlay_html(session.overlay, console, selected or [], metric, log_y, viewer, language)
        if key == session.table_key:
            return gr.skip(), gr.skip(), overlay, gr.skip()
        session.table_key = key
        shown = gr.update(value=table, column_widths=cb.table_widths_of(table))
        ids = [run_id for _, run_id in choices]
        kept = [r for r in selected or [] if r in ids]
        # the value only when a selected run is gone: sending it always would undo a tick the user
        # made while this refresh was on its way (the selection is read when the refresh starts);
        # the choices only when the runs changed: a run's figures changing redraws no box (issue 37)
        if len(kept) != len(selected or []):
            select = gr.update(choices=choices, value=kept)
        elif choices != session.choices:
            select = gr.update(choices=choices)
        else:
            select = gr.skip()
        session.choices = choices
        return shown, select, overlay, queue

    inputs = [out["session"], out["select"], out["metric"], out["only_diff"], out["log_scale"], tab.lang]
    outputs = [out["table"], out["select"], out["overlay"], out["queue"]]
    out["watch"].refresh(refresh, inputs, outputs, show_progress="hidden", concurrency_limit=4,
                         trigger_mode="always_last", api_visibility="private")
    out["refresh"].click(refresh, inputs, outputs, api_visibility="private")

    # Each tick sends its own comparison; they run at once and may finish in any order, so the one of
    # an older selection could land last and stay (issue 31 item 8): only the newest tick answers.
    stamp, latest = form_sync.stamp_box(), form_sync.Latest()

    def compare_newest(session: RunsSession, selected: list[str], metric: str, only_diff: bool, log_y: bool,
                       language: str, mark: str, request: gr.Request):
        if not latest.admit("compare", mark):
            return gr.skip(), gr.skip()
        shown = compare(session, selected, metric, only_diff, log_y, language, request)
        return shown if latest.current("compare", mark) else (gr.skip(), gr.skip())

    def compare(session: RunsSession, selected: list[str], metric: str, only_diff: bool, log_y: bool, language: str,
                request: gr.Request):
        viewer = console.viewer(request)
        with session_lock(session):
            overlay = cb.overlay_html(session.overlay, console, selected or [], metric, log_y, viewer, language)
        return overlay, cb.config_diff_html(console, selected or [], only_diff, viewer, language)

    for trigger in (out["select"].input, out["only_diff"].change, out["log_scale"].input):
        # always_last, not .input's default "once": a tick made while the previous tick's comparison is
        # on its way must still get its own (with "once" it was dropped and the older selection stayed)
        trigger(compare_newest, [*inputs, stamp], [out["overlay"], out["diff"]], show_progress="hidden",
                js=form_sync.STAMP_JS, trigger_mode="always_last", concurrency_limit=1,
                concurrency_id="runs-compare", api_visibility="private")

    def steps_of(selected: list[str], language: str, request: gr.Request):
        """The checkpoints of the one selected run, newest first, for a fork."""
        choices = cb.fork_choices(console, selected or [], console.viewer(request), language)
        return gr.update(choices=choices, value=choices[0][1] if choices else None)

    out["select"].input(steps_of, [out["select"], tab.lang], out["fork_step"], show_progress="hidden",
                        trigger_mode="always_last", api_visibility="private")
    def step_words(selected: list[str], language: str, request: gr.Request):
        """The same checkpoints in the new language (the one picked stays picked)."""
        return gr.update(choices=cb.fork_choices(console, selected or [], console.viewer(request), language))

    tab.lang.change(step_words, [out["select"], tab.lang], out["fork_step"], show_progress="hidden",
                    api_visibility="private")

    def metric_changed(session: RunsSession, selected: list[str], metric: str, only_diff: bool, log_y: bool, language: str,
                       request: gr.Request):
        """Another curve: its default axis (log for perplexity), then the overlay on it."""
        log_y = cb.overlay_log_default(metric)
        return (gr.update(value=log_y), *compare(session, selected, metric, only_diff, log_y, language, request))

    out["metric"].change(metric_changed, inputs, [out["log_scale"], out["overlay"], out["diff"]],
                         show_progress="hidden", api_visibility="private")

    def ask(selected: list[str], language: str, request: gr.Request):
        ok, question = cb.delete_check(console, selected or [], console.viewer(request), language)
        return (gr.update(visible=True), question, "") if ok else (gr.update(visible=False), "", question)

    out["delete"].click(ask, [out["select"], tab.lang], [out["confirm_row"], out["confirm_text"], out["message"]],
                        api_visibility="private")
    out["cancel"].click(lambda language: (gr.update(visible=False), text("runs.msg.cancelled", language)), tab.lang,
                        [out["confirm_row"], out["message"]], api_visibility="private")

    def confirm(session: RunsSession, selected: list[str], metric: str, only_diff: bool, log_y: bool, language: str,
                request: gr.Request):
        message = cb.delete(console, selected or [], console.viewer(request), language)
        session.table_key = ""
        table, select, overlay, queue = refresh(session, [], metric, only_diff, log_y, language, request)
        return (gr.update(visible=False), message, table, select, overlay, queue,
                cb.config_diff_html(console, [], lang=language))

    out["confirm"].click(confirm, inputs, [out["confirm_row"], out["message"], out["table"], out["select"],
                                           out["overlay"], out["queue"], out["diff"]], api_visibility="private")

    for action in ("up", "down", "cancel"):
        def act(session: RunsSession, selected: list[str], metric: str, only_diff: bool, log_y: bool, language: str,
                request: gr.Request, action: str = action):
            """Reorder or cancel the selected queued run, then show the queue as it is now."""
            message = action_text(cb.queue_action(console, selected or [], action, console.viewer(request)), language)
            session.table_key = ""
            return message, *refresh(session, selected, metric, only_diff, log_y, language, request)

        out[f"queue_{action}"].click(act, inputs, [out["message"], *outputs], concurrency_limit=1,
                                     api_visibility="private")
