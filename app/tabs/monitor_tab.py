"""Monitor tab layout and wiring: a run picker, status, live charts, early stopping, stop, downloads.

The live parts (state badge, status line, failure, the charts, the early-stopping caption, the log)
are slots: `gr.HTML` blocks whose inner element the page's feed script (monitor_feed.js) fills. The
script polls `monitor_callbacks.feed` through a Gradio server function, twice a second while the run
is going and every 2 s after, only while the tab is on screen, and is sent only what changed. It is
not a `gr.Timer`: every Gradio event makes the page re-send a loading status to every component that
ever took part in an event (Gradio 6's frontend), which at two ticks a second cost a headless
Chromium 60% of a core (`bench/console_overhead.py`) and so slowed training on the same machine. The
Gradio controls (picker, stop buttons, downloads, early-stopping fields) change through the "sync"
event, which the feed fires only when they changed. Closing the page stops the polls and nothing
else: the run goes on.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import gradio as gr

from core.spec.config import describe_fields

from app.tabs import monitor_callbacks as cb
from app.context import Console
from app.runs.exports import GGUF_FORMATS, ZIP_FORMATS
from app.i18n import Labels, action_text, text
from app.charts.metrics import empty_frame
from app.runs.run_status import state_html
from app.auth.sessions import session_lock
from app.charts.svg_chart import line_chart
from app.tabs.widgets import field_widget

FEED_JS = Path(__file__).with_name("monitor_feed.js").read_text(encoding="utf-8")
SHOW_NOW_JS = "(run) => { if (window.mindtuneMonitorNow) window.mindtuneMonitorNow(run); }"
# chart -> elem_id; the charts are server-drawn SVG (see app/charts/svg_chart.py for why)
CHARTS = {"loss": "loss-plot", "val_loss": "val-loss-plot", "val_ppl": "ppl-plot", "memory": "memory-plot",
          "tokens_per_s": "tps-plot", "lr": "lr-plot", "grad_norm": "grad-norm-plot", "loss_scale": "loss-scale-plot",
          "answers": "answers-plot", "reward_accuracy": "reward-accuracy-plot",
          "reward_margin": "reward-margin-plot", "logps": "logps-plot", "reward": "reward-plot",
          "reward_functions": "reward-functions-plot", "kl": "kl-plot", "completions": "completions-table"}
DOWNLOAD_IDS = {"peft": "download-adapter", "merged": "download-merged", "mindspore": "download-mindspore",
                "gguf-f16": "download-gguf-f16", "gguf-q4_k_m": "download-gguf-q4", "ollama": "download-ollama",
                "gguf-lora": "download-gguf-lora"}
# The download the page starts itself once the export is made (from the file's URL: clicking the
# button again could meet it disabled by a controls update that crossed this answer)
DOWNLOAD_JS = """(url) => {
  if (!url) return;
  const link = document.createElement('a');
  link.href = url;
  link.download = decodeURIComponent(url.split('/').pop());
  document.body.appendChild(link);
  link.click();
  link.remove();
}"""


def file_url(path: str) -> str:
    """Gradio's URL of a file it may serve (the runs folder is an allowed path), relative to the page."""
    return "gradio_api/file=" + quote(str(path))


ES_IDS = {"enabled": "es-enabled", "monitor": "es-monitor", "patience": "patience", "min_delta": "es-min-delta"}


@dataclass
class MonitorTab:
    out: dict[str, Any] = field(default_factory=dict)
    plots: dict[str, Any] = field(default_factory=dict)
    downloads: dict[str, Any] = field(default_factory=dict)
    es: dict[str, Any] = field(default_factory=dict)


def _slot(name: str, value: str = "", tag: str = "div", **kwargs: Any) -> gr.HTML:
    """A block whose inner element (data-mt-slot=name) the feed script fills; Gradio itself never
    updates it after the page loads."""
    kwargs.setdefault("js_on_load", None)
    template = f'<{tag} class="mt-slot mt-slot-{name}" data-mt-slot="{name}">${{value}}</{tag}>'
    return gr.HTML(value, html_template=template, **kwargs)


def _plot(name: str, labels: Labels) -> gr.HTML:
    empty = line_chart(empty_frame(), cb.chart_title(name, labels.lang), **cb.chart_words(labels.lang))
    plot = _slot(name, empty, elem_id=CHARTS[name], show_label=True, container=True, elem_classes=["mt-chart-box"])
    return labels.bind(plot, label=f"chart.{name}")


def build(console: Console, labels: Labels) -> MonitorTab:
    assert labels.toggle is not None, "create the lang-toggle before the tabs"
    tab = MonitorTab()
    tab.out["session"] = gr.State(cb.MonitorSession())
    pages = cb.FeedPages()

    def feed(request, http: gr.Request = None):
        """The feed script's poll (a Gradio server function: login-checked, no Gradio event)."""
        return cb.feed(pages, request, console, console.viewer(http))

    with gr.Row():
        tab.out["run"] = labels.bind(gr.Dropdown(choices=cb.run_ids(console, console.page_viewer), value=None, allow_custom_value=True,
                                                 elem_id="run-picker", scale=4), label="mon.run")
        tab.out["state"] = _slot("state", state_html("unknown", labels.lang), tag="span", elem_id="run-state",
                                 js_on_load=FEED_JS, server_functions=[feed])
        tab.out["stop"] = labels.bind(gr.Button(variant="stop", elem_id="stop-button", scale=1), value="mon.stop")
        tab.out["stop_now"] = labels.bind(gr.Button(variant="stop", elem_id="stop-now-button", scale=1),
                                          value="mon.stop_now")
    tab.out["status"] = _slot("status", elem_id="run-status")
    tab.out["message"] = gr.Markdown(elem_id="monitor-message")
    tab.out["failure"] = _slot("failure", elem_id="run-failure")
    with gr.Row():
        tab.out["log_scale"] = labels.bind(gr.Checkbox(value=False, elem_id="loss-log-scale", scale=0, min_width=260),
                                           label="mon.log_scale")
        tab.out["ppl_log_scale"] = labels.bind(gr.Checkbox(value=True, elem_id="ppl-log-scale", scale=0,
                                                           min_width=260), label="mon.ppl_log_scale")
    with gr.Row():
        tab.plots["loss"] = _plot("loss", labels)
        tab.plots["val_loss"] = _plot("val_loss", labels)
        tab.plots["val_ppl"] = _plot("val_ppl", labels)
    with gr.Row():  # preference objectives (train.objective dpo/simpo/orpo/kto); empty for SFT
        for name in ("reward_accuracy", "reward_margin", "logps"):
            tab.plots[name] = _plot(name, labels)
    with gr.Row():  # grpo (train.objective grpo): rewards per step and at each evaluation; empty otherwise
        for name in ("reward", "reward_functions", "kl"):
            tab.plots[name] = _plot(name, labels)
    tab.plots["completions"] = labels.bind(_slot("completions", cb.completions_html(None, "", labels.lang),
                                                 elem_id=CHARTS["completions"], show_label=True, container=True),
                                           label="chart.completions")
    _early_stopping_box(tab, labels)
    with gr.Row():
        for name in ("memory", "tokens_per_s", "lr"):
            tab.plots[name] = _plot(name, labels)
    with gr.Row():
        for name in ("grad_norm", "loss_scale", "answers"):
            tab.plots[name] = _plot(name, labels)
    labels.bind(gr.Markdown(), value="mon.downloads")
    for row in (ZIP_FORMATS, tuple(GGUF_FORMATS)):  # the Hugging Face / MindSpore zips, then llama.cpp's files
        with gr.Row():
            for fmt in row:
                tab.downloads[fmt] = gr.DownloadButton(
                    label=f"{labels(f'download.{fmt}')} · {labels('download.none')}", value=None, interactive=False,
                    elem_id=DOWNLOAD_IDS[fmt])
    with gr.Row():  # a finished run as an OpenAI-compatible endpoint (app/runs/serving.py, core.serve)
        tab.out["serve"] = labels.bind(gr.Button(size="md", scale=0, min_width=200, elem_id="serve-button"),
                                       value="mon.serve")
        tab.out["serve_stop"] = labels.bind(gr.Button(size="md", scale=0, min_width=200, elem_id="serve-stop"),
                                            value="mon.serve_stop")
    tab.out["profile"] = _slot("profile", elem_id="run-profile")
    # shown only for a run that has a profiler trace (a greyed button on every run was noise: issue 31 item 6)
    tab.out["profile_trace"] = labels.bind(gr.DownloadButton(value=None, interactive=False, visible=False,
                                                             elem_id="profile-trace"), label="mon.profile_trace")
    tab.out["log"] = labels.bind(_slot("log", tag="pre", elem_id="run-log", show_label=True, container=True),
                                 label="mon.log")
    # the mark of the feed's last sync, once it answered: the feed script holds the run list closed until then
    tab.out["synced"] = gr.HTML("", elem_id="monitor-synced", elem_classes=["mt-hidden"], container=False)
    _wire(tab, console, labels)
    return tab


def _early_stopping_box(tab: MonitorTab, labels: Labels) -> None:
    """The early-stopping fields of the config (kind, choices, default, lower bound from its
    field descriptions, as on the Train tab), to change a running job's settings."""
    fields = describe_fields()
    with gr.Group():
        labels.bind(gr.Markdown(), value="mon.es")
        tab.out["es_status"] = _slot("es_status", elem_id="es-status")
        with gr.Row():
            for name, elem_id in ES_IDS.items():
                info = fields[f"early_stopping.{name}"]
                bound = {"minimum": info.minimum} if info.kind in ("int", "float") else {}
                tab.es[name] = field_widget(info.key, info, info.default, labels, elem_id=elem_id, help_line=False,
                                            **bound)
            # a primary button: a secondary one inside the group's grey read as its heading (issue 31 item 6)
            tab.out["es_apply"] = labels.bind(gr.Button(variant="primary", size="md", min_width=240, elem_id="es-apply"),
                                              value="mon.es_apply")


def _wire(tab: MonitorTab, console: Console, labels: Labels) -> None:
    session, run = tab.out["session"], tab.out["run"]
    outputs = [run, tab.out["stop"], tab.out["stop_now"], *tab.downloads.values(), *tab.es.values(),
               tab.out["profile"], tab.out["profile_trace"], tab.out["synced"]]

    def on_sync(state: cb.MonitorSession, wanted: str | None, language: str, request: gr.Request,
                event: gr.EventData):
        with session_lock(state):
            result = cb.controls(state, wanted, console, language, console.viewer(request))
        change = cb.picker_change(result, wanted)
        picker = gr.update(**change) if change else gr.skip()
        active = gr.skip() if result.active is None else gr.update(interactive=result.active)
        downloads = [gr.update(label=d[0], value=d[1], interactive=d[2]) if (d := result.downloads.get(fmt))
                     else gr.skip() for fmt in tab.downloads]
        es = [result.es_values.get(k, gr.skip()) if result.es_values else gr.skip() for k in tab.es]
        profile = ([gr.update(value=result.profile[0]),
                    gr.update(value=result.profile[1], interactive=result.profile[1] is not None,
                              visible=result.profile[1] is not None)]
                   if result.profile is not None else [gr.skip(), gr.skip()])
        # the mark the feed's sync carried (app/tabs/monitor_feed.js waits for its own); other syncs leave it
        mark = event._data.get("mark") if event is not None and isinstance(event._data, dict) else None
        return [picker, active, active, *downloads, *es, *profile, mark if isinstance(mark, str) else gr.skip()]

    inputs = [session, run, labels.toggle]
    tab.out["state"].sync(on_sync, inputs, outputs, show_progress="hidden", concurrency_limit=4,
                          trigger_mode="always_last", api_visibility="private")
    # a pick by hand clears the other run's charts in the page at once (app/tabs/monitor_feed.js), then syncs;
    # it passes the run picked, which replaces one a Start/Open/Resume just picked: the hand's choice wins
    run.input(None, inputs=run, js=SHOW_NOW_JS, show_progress="hidden", api_visibility="private")
    run.input(on_sync, inputs, outputs, show_progress="hidden", trigger_mode="always_last", api_visibility="private")
    tab.out["sync"] = (on_sync, inputs, outputs)
    _wire_controls(tab, console, labels)


def _wire_controls(tab: MonitorTab, console: Console, labels: Labels) -> None:
    run, message = tab.out["run"], tab.out["message"]
    def stop(run_id: str | None, language: str, request: gr.Request):
        return action_text(cb.stop(console, run_id, True, console.viewer(request)), language)

    def stop_now(run_id: str | None, language: str, request: gr.Request):
        return action_text(cb.stop(console, run_id, False, console.viewer(request)), language)

    # a message about one run ("stopping now") must not stay when another run is shown
    run.change(lambda: "", None, message, show_progress="hidden", api_visibility="private")
    tab.out["stop"].click(stop, [run, labels.toggle], message, api_visibility="private")
    tab.out["stop_now"].click(stop_now, [run, labels.toggle], message, api_visibility="private")
    es_inputs = [run, tab.es["enabled"], tab.es["monitor"], tab.es["patience"], tab.es["min_delta"], labels.toggle]

    def apply(run_id, enabled, monitor, patience, min_delta, language, request: gr.Request):
        return action_text(cb.apply_early_stopping(console, run_id, enabled, monitor, patience, min_delta,
                                                   console.viewer(request)), language)
    tab.out["es_apply"].click(apply, es_inputs, message, api_visibility="private")
    tab.es["patience"].submit(apply, es_inputs, message, api_visibility="private")
    lang = labels.toggle

    def serve(run_id: str | None, language: str, request: gr.Request, progress=gr.Progress()):
        return action_text(cb.serve(console, run_id, console.viewer(request), on_wait=lambda s: progress(
            None, desc=f"{text('mon.serve_loading', language)}: {s:.0f} s")), language)

    def serve_stop(run_id: str | None, language: str, request: gr.Request):
        return action_text(cb.stop_serving(console, run_id, console.viewer(request)), language)

    tab.out["serve"].click(serve, [run, lang], message, concurrency_limit=2, show_progress_on=[message],
                           api_visibility="private")
    tab.out["serve_stop"].click(serve_stop, [run, lang], message, api_visibility="private")
    for fmt, button in tab.downloads.items():
        just_made = gr.Textbox(visible=False, elem_id=f"{DOWNLOAD_IDS[fmt]}-made")

        def prepare(run_id: str | None, language: str, held: str | None, request: gr.Request,
                    progress=gr.Progress(), fmt: str = fmt):
            """One click downloads: a button that held its zip (`held`) already downloaded it on this
            click; otherwise export if needed (with a progress line), then `just_made` has the page
            start the download itself."""
            viewer = console.viewer(request)
            if cb.download_ready(console, run_id, fmt, held, viewer):
                return gr.skip(), gr.skip(), ""
            name = text(f"download.{fmt}", language)
            (label, path, clickable), note = cb.prepare_download(
                console, run_id, fmt, language, viewer,
                on_wait=lambda s: progress(None, desc=f"{text('download.exporting', language)} {name}: {s:.0f} s"))
            return (gr.update(label=label, value=path, interactive=clickable), action_text(note, language),
                    file_url(path) if path else "")

        inputs = [run, lang, button]
        button.click(prepare, inputs, [button, message, just_made], concurrency_limit=2, show_progress_on=[message],
                     api_visibility="private").then(None, just_made, None, api_visibility="private", js=DOWNLOAD_JS)
