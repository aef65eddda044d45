"""The page: a language toggle and four tabs (Train, Monitor, Runs, Try it), and the launch.

`build_app` assembles the tabs and the events that cross them (Start opens the new run in
Monitor, Resume and Open do the same); `serve` reattaches to runs still going and starts Gradio
with the safety settings (auth, no share link without it, no /monitoring, upload limit, served
folders, and app/auth/access.py's origin and run-file guards).
"""
from __future__ import annotations

import inspect
from pathlib import Path

import gradio as gr

from app.auth import access
from app.tabs import monitor_tab, runs_tab, train_tab, try_tab
from app.tabs import runs_callbacks
from app.tabs import train_callbacks
from app.context import Console
from app.tabs.early_script import status_timer_middleware
from app.i18n import LANG_CHOICES, Labels, Said, action_text, problem_text, text
from app.settings import Settings, check_safe

CSS_PATH = Path(__file__).with_name("style.css")
TAB_IDS = {"train": "tab-train", "monitor": "tab-monitor", "runs": "tab-runs", "try": "tab-try"}


def build_app(console: Console) -> gr.Blocks:
    """The whole console as a gr.Blocks (not launched), for `serve` and for tests."""
    labels = Labels(console.settings.lang)
    initial = train_callbacks.starter_config(console)
    with gr.Blocks(title="mindtune", analytics_enabled=False) as demo:
        with gr.Row(equal_height=True):
            labels.bind(gr.Markdown(elem_id="app-title"), value="app.title")
            # its (hidden, screen-reader) label names both languages: it is how either reader finds the other
            labels.toggle = gr.Radio(choices=LANG_CHOICES, value=labels.lang, elem_id="lang-toggle",
                                     label=text("lang.toggle", "en"), show_label=False, container=False, scale=0,
                                     min_width=180)
        labels.bind(gr.Markdown(elem_id="app-subtitle"), value="app.subtitle")
        with gr.Tabs(selected="train", elem_id="tabs") as tabs:
            with gr.Tab(labels("tab.train"), id="train", elem_id=TAB_IDS["train"]) as tab:
                train = train_tab.build(console, labels, initial)
            labels.bind(tab, label="tab.train")
            with gr.Tab(labels("tab.monitor"), id="monitor", elem_id=TAB_IDS["monitor"]) as tab:
                monitor = monitor_tab.build(console, labels)
            labels.bind(tab, label="tab.monitor")
            with gr.Tab(labels("tab.runs"), id="runs", elem_id=TAB_IDS["runs"]) as tab:
                runs = runs_tab.build(console, labels)
            labels.bind(tab, label="tab.runs")
            with gr.Tab(labels("tab.try"), id="try", elem_id=TAB_IDS["try"]) as tab:
                tried = try_tab.build(console, labels)
            labels.bind(tab, label="tab.try")
            fn, inputs, outputs = tried["refresh"]
            tab.select(fn, inputs, outputs, show_progress="hidden", api_visibility="private")
        _wire_start(console, train, monitor, tabs)
        _wire_runs_navigation(console, runs, monitor, tabs)
        _wire_made_from(console, runs, train, tabs, labels)
        _wire_language(labels)
        _wire_page_load(demo, train, monitor, tried)
    return demo


# After an event that points the Monitor at a run (given the run it picked, which the page's picker
# may show a moment later): the feed polls at once and clears another run's charts, badge and status
# from the page before the answer comes (app/tabs/monitor_feed.js), instead of at its next poll.
SHOW_NOW = {"fn": None, "js": monitor_tab.SHOW_NOW_JS,
            "show_progress": "hidden", "api_visibility": "private"}


def _wire_start(console: Console, train: train_tab.TrainTab, monitor: monitor_tab.MonitorTab, tabs: gr.Tabs) -> None:
    """Start: validate, launch once (a double-click launches one run), then show it in Monitor."""
    reference = train.out["reference"]
    inputs = set(train.fields.values()) | {reference, train.lang}

    def start(data: dict, request: gr.Request, confirmed: bool = False):
        viewer = console.viewer(request)
        outcome = train_callbacks.start(train.values(data), console, owner=viewer.owner,
                                        reference=train_callbacks.Reference.from_state(data[reference]),
                                        confirmed=confirmed, lang=data[train.lang], viewer=viewer)
        language = data[train.lang]
        if outcome.run_id is None:
            return (gr.skip(), gr.skip(), action_text(Said("act.warn", message=outcome.message), language),
                    train_callbacks.errors_html(outcome.errors, language), gr.update(visible=outcome.needs_confirmation))
        return (gr.update(selected="monitor"), gr.update(value=outcome.run_id),
                action_text(Said("act.done", message=outcome.message), language), "", gr.update(visible=False))

    def start_anyway(data: dict, request: gr.Request):
        return start(data, request, confirmed=True)

    outputs = [tabs, monitor.out["run"], train.out["start_message"], train.out["errors"], train.out["start_anyway"]]
    train.out["start"].click(start, inputs, outputs, trigger_mode="once", concurrency_limit=1,
                             api_visibility="private").then(inputs=monitor.out["run"], **SHOW_NOW)
    train.out["start_anyway"].click(start_anyway, inputs, outputs, trigger_mode="once", concurrency_limit=1,
                                    api_visibility="private").then(inputs=monitor.out["run"], **SHOW_NOW)


def _wire_runs_navigation(console: Console, runs: runs_tab.RunsTab, monitor: monitor_tab.MonitorTab,
                          tabs: gr.Tabs) -> None:
    def open_run(selected: list[str], language: str, request: gr.Request):
        if len(selected or []) != 1:
            return gr.skip(), gr.skip(), text("runs.msg.select_open", language)
        try:
            console.jobs.run_dir(selected[0], console.viewer(request))
        except ValueError as err:
            return gr.skip(), gr.skip(), f"⚠ {problem_text(err, language)}"
        return gr.update(selected="monitor"), gr.update(value=selected[0]), ""

    def resume(selected: list[str], language: str, request: gr.Request, backend: str | None = None):
        run_id, message = runs_callbacks.resume(console, selected or [], console.viewer(request), language, backend)
        if run_id is None:
            return gr.skip(), gr.skip(), message, gr.skip()
        # the Monitor's message answers the resume: its "stopping (saving a checkpoint first)" was about
        # the run before it stopped, and the run id, unchanged, does not clear it (issue 31 item 5)
        return gr.update(selected="monitor"), gr.update(value=run_id), message, message

    def resume_here(selected: list[str], language: str, request: gr.Request):
        return resume(selected, language, request, backend="local")

    outputs = [tabs, monitor.out["run"], runs.out["message"]]
    runs.out["open"].click(open_run, [runs.out["select"], runs.lang], outputs,
                           api_visibility="private").then(inputs=monitor.out["run"], **SHOW_NOW)
    runs.out["resume"].click(resume, [runs.out["select"], runs.lang], [*outputs, monitor.out["message"]],
                             concurrency_limit=1, api_visibility="private").then(inputs=monitor.out["run"], **SHOW_NOW)
    runs.out["resume_here"].click(resume_here, [runs.out["select"], runs.lang], [*outputs, monitor.out["message"]],
                                  concurrency_limit=1, api_visibility="private").then(inputs=monitor.out["run"], **SHOW_NOW)


def _wire_made_from(console: Console, runs: runs_tab.RunsTab, train: train_tab.TrainTab, tabs: gr.Tabs,
                    labels: Labels) -> None:
    """New run from this one, and fork from a checkpoint: the selected run's exact config fills the
    Train tab, which then highlights what the user changes and Start records where it came from."""
    keys = list(train.fields)
    outputs = [tabs, *[train.fields[k] for k in keys], train.out["reference"], train.out["reference_row"],
               train.out["reference_banner"], train.out["start_message"], runs.out["message"]]

    def fill(selected: list[str], step, language: str, request: gr.Request, fork: bool = False):
        if len(selected or []) != 1:
            return [gr.skip()] * (len(outputs) - 1) + [action_text(Said("act.select_one"), language)]
        if fork and step is None:
            return [gr.skip()] * (len(outputs) - 1) + [action_text(Said("act.pick_checkpoint"), language)]
        try:
            values, reference = train_callbacks.new_from_run(console, selected[0], console.viewer(request),
                                                             step=int(step) if fork else None)
        except (ValueError, OSError) as err:
            return [gr.skip()] * (len(outputs) - 1) + [action_text(Said("check.warn", problem=err), language)]
        # the previous launch's "✓ started …" is about another run: it goes (issue 31 item 4)
        return [gr.update(selected="train"), *[values.get(k, gr.skip()) for k in keys], reference.to_state(),
                gr.update(visible=True), train_callbacks.reference_html(reference, language), "", ""]

    def new_from(selected: list[str], step, language: str, request: gr.Request):
        return fill(selected, step, language, request)

    def fork(selected: list[str], step, language: str, request: gr.Request):
        return fill(selected, step, language, request, fork=True)

    inputs = [runs.out["select"], runs.out["fork_step"], labels.toggle]
    runs.out["new_from"].click(new_from, inputs, outputs, api_visibility="private")
    runs.out["fork"].click(fork, inputs, outputs, api_visibility="private")


def _wire_language(labels: Labels) -> None:
    components = labels.components

    def switch(lang: str):
        return [gr.update(**props) for props in labels.values(lang)]

    labels.toggle.change(switch, labels.toggle, components, show_progress="hidden", api_visibility="private")


def _wire_page_load(demo: gr.Blocks, train: train_tab.TrainTab, monitor: monitor_tab.MonitorTab,
                    tried: dict) -> None:
    """Fill the read-outs and the Monitor controls as soon as a page opens, instead of waiting for the
    first change; the dataset picker lists the datasets there are now (uploads included), the Try
    tab's checkpoint picker the runs' checkpoints and states now."""
    for fn, inputs, outputs in (train.out["refresh"], train.out["details"], train.out["dataset_choices"],
                                train.out["where_choices"], train.out["start_point_said"], monitor.out["sync"],
                                tried["refresh"]):
        demo.load(fn, inputs, outputs, show_progress="hidden", api_visibility="private")


QUEUE_IDLE_SLEEP_S = {"sleep_when_free": 0.02, "progress_update_sleep_when_free": 0.1}


def relax_queue_polling(demo: gr.Blocks) -> None:
    """Gradio's queue looks for new events every 1 ms and for progress messages every 10 ms when it
    has nothing to do, which kept an idle console at 9% of a core on a 2-core machine, taken from
    training. Every 20 ms and 100 ms are plenty: the page's live feed does not go through the queue,
    an event waits at most 20 ms more to start, and no handler here reports progress. (Private
    attributes: if a Gradio release renames them, nothing breaks and only the idle cost comes back.)"""
    queue = getattr(demo, "_queue", None)
    for name, seconds in QUEUE_IDLE_SLEEP_S.items():
        if queue is not None and isinstance(getattr(queue, name, None), (int, float)):
            setattr(queue, name, max(getattr(queue, name), seconds))


def serve(settings: Settings) -> None:
    """Reattach to runs still going, then serve the console until interrupted."""
    settings.runs_dir.mkdir(parents=True, exist_ok=True)
    console = Console.create(settings)
    report = console.jobs.reattach()
    if report.alive:
        print(f"mindtune: reattached to {len(report.alive)} running run(s): {', '.join(report.alive)}")
    if report.failed:
        print(f"mindtune: marked {len(report.failed)} run(s) failed (no process left): {', '.join(report.failed)}")
    for orphan in report.orphans:
        print(f"mindtune: warning: orphan process {orphan}; stop it from the Runs tab or with kill")
    demo = build_app(console)
    demo.queue(default_concurrency_limit=4)
    relax_queue_polling(demo)
    demo.launch(**launch_options(settings))


def launch_options(settings: Settings) -> dict:
    """Gradio's launch() arguments: the safety settings spelled out, never left to Gradio's defaults
    or its environment variables. A share link only with a login (check_safe refuses one without),
    no /monitoring endpoints, the origin and run-file guards in front of every route."""
    check_safe(settings)
    return dict(server_name=settings.host, server_port=settings.port, auth=list(settings.auth) or None,
                share=bool(settings.share and settings.auth), enable_monitoring=False,
                max_file_size=settings.max_upload_bytes,
                allowed_paths=[str(settings.runs_dir), str(settings.uploads_dir / "configs")],
                show_error=True, css_paths=[CSS_PATH], theme=console_theme(), footer_links=["settings"], quiet=False,
                app_kwargs={"middleware": [*access.middlewares(settings), status_timer_middleware()]},
                **_NO_SELF_CHECK)


def console_theme() -> gr.themes.Base:
    """Gradio's default theme with whole bold faces. Its bundled semi-bold faces are subsets (Source
    Sans Pro SemiBold holds "A" and "B" of the Latin letters, IBM Plex Mono SemiBold "a" and "b"),
    so every semi-bold or bold word was drawn in two fonts: "ETA" and "MB" ended in a smaller letter
    (issue 31 item 6). The bundled Bold files are complete; weight 600 maps to them. Nothing is
    downloaded: Gradio serves these files itself (static/fonts)."""
    sans = gr.themes.GoogleFont("Source Sans Pro", weights=(400, 700))
    mono = gr.themes.GoogleFont("IBM Plex Mono", weights=(400, 700))
    return gr.themes.Default(font=[sans, "ui-sans-serif", "system-ui", "sans-serif"],
                             font_mono=[mono, "ui-monospace", "Consolas", "monospace"])


# Gradio's launch() sends its own URL one HEAD request with a 3 s timeout and, when that times out,
# exits with "When localhost is not accessible, a shareable link must be created": a console
# restarted on a loaded machine while 10 pages polled it died so (bench/soak.py, twice in 12 min).
# Its only remedy is a share link, which this console never wants; the private `_frontend=False`
# skips just that check (if a Gradio release drops the parameter, the check simply comes back).
_NO_SELF_CHECK = {"_frontend": False} if "_frontend" in inspect.signature(gr.Blocks.launch).parameters else {}
