"""The console in a real browser: pick the demo model and dataset, start a short LoRA run, watch the
loss and perplexity charts fill, change early-stopping patience, stop, and download the adapter.

Drives headless Chromium through Playwright (fixtures in `browser_fixtures`); skips when the
console, the demo model, Playwright or Chromium is missing. Screenshots land in test-artifacts/.
Also measures the chart delay: from a metric line's timestamp in metrics.jsonl to its point drawn
in the loss chart.
"""
from __future__ import annotations

import os
import re
import statistics
import time
import zipfile
from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

pytest_plugins = ["tests.app.browser_fixtures"]
pytestmark = [pytest.mark.slow, pytest.mark.browser]

# Generous: CI machines are small and other jobs may share the cores.
PHASE_TIMEOUT_S = float(os.environ.get("MINDTUNE_BROWSER_PHASE_TIMEOUT_S", 420))
POLL_S = 0.25
# Short in wall time, not in steps: the test presses Stop after the first evaluation, and a run
# that could end on its own first (fast machine, tiny model) would make "stopped" a race.
# Patience starts high for the same reason (a tiny model stops improving within ~100 steps).
MAX_STEPS, EVAL_EVERY, LOG_EVERY, FORM_PATIENCE, NEW_PATIENCE = 5000, 10, 2, 100, 50
# Every drawn chart point is a symbol labelled "step: 12; loss: 3.4; series: loss" (the DOM of
# Gradio's Vega plots, which app/charts/svg_chart.py keeps for its server-drawn charts).
POINT_LABEL = re.compile(r"step: (?P<step>-?[\d.]+); [^;]+: (?P<value>[^;]+); series: (?P<series>.+)")
POINTS_JS = ("e => Array.from(e.querySelectorAll('g.mark-symbol.role-mark path[aria-label]'))"
             ".map(p => p.getAttribute('aria-label'))")


# ---- page helpers ----------------------------------------------------------------------------

# Opens the folded sections (Gradio accordions) around an element, outermost first, as a person
# would click their labels; returns how many were opened, or -1 when the element is not in the page
# (Gradio renders a section's widgets only once it is first opened).
REVEAL_JS = """
selector => {
  let box = document.querySelector(selector);
  if (!box) return -1;
  const closed = [];
  for (box = box.closest('[data-testid=accordion-content]'); box;
       box = box.parentElement.closest('[data-testid=accordion-content]'))
    if (getComputedStyle(box).display === 'none') closed.push(box.previousElementSibling);
  closed.reverse().forEach(label => label.click());
  return closed.length;
}
"""
CLOSED_SECTIONS = "#tab-train button.label-wrap:not(.open)"


def reveal(page, selector: str) -> None:
    """Open the Train tab's folded sections that hold `selector` (issue 20 bug 11 folds the form):
    the ones around it, or, while it is not in the page yet, each closed one until it shows."""
    opened = page.evaluate(REVEAL_JS, selector)
    closed = page.locator(f"{CLOSED_SECTIONS}:visible")
    # the first closed section each time: a section opened here no longer matches, so a list taken
    # once and read by position would skip every other one
    while opened == -1 and closed.count():
        closed.first.click()
        try:  # a section's content is rendered when it opens, a moment after the click
            page.locator(selector).first.wait_for(state="attached", timeout=3_000)
        except PlaywrightTimeoutError:
            continue
        opened = page.evaluate(REVEAL_JS, selector)
    if opened:
        page.locator(selector).first.wait_for(state="visible", timeout=30_000)


def choose(page, elem_id: str, text: str) -> None:
    """Pick the first option containing `text` in the Gradio dropdown `#elem_id`."""
    reveal(page, f"#{elem_id}")
    page.click(f"#{elem_id} input")
    page.locator("[role=option]", has_text=text).first.click()
    page.keyboard.press("Escape")


def set_number(page, elem_id: str, value: float) -> None:
    reveal(page, f"#{elem_id}")
    field = page.locator(f"#{elem_id} input[type=number]")
    field.fill(str(value))
    field.press("Tab")


def plot_points(page, elem_id: str) -> dict[str, dict[int, str]]:
    """{series: {step: value}} of the points a chart shows."""
    plot = page.query_selector(f"#{elem_id}")
    labels = plot.evaluate(POINTS_JS) if plot else []
    points: dict[str, dict[int, str]] = {}
    for label in labels:
        match = POINT_LABEL.fullmatch(label.strip())
        if match:
            points.setdefault(match["series"], {})[int(float(match["step"]))] = match["value"]
    return points


def run_state(page) -> str:
    """The state badge's text ("running", "stopped", ...), without Gradio's progress timer."""
    element = page.query_selector("#run-state .prose") or page.query_selector("#run-state")
    return element.inner_text().strip().lower() if element else ""


def wait_for(condition, what: str, timeout_s: float = PHASE_TIMEOUT_S, explain=None):
    """condition()'s first true value, polled until `timeout_s`; else an AssertionError naming `what`
    and, when given, `explain()`: what the page and the run said at the end."""
    start = time.monotonic()
    deadline = start + timeout_s
    while time.monotonic() < deadline:
        result = condition()
        if result:
            print(f"  {time.monotonic() - start:6.1f} s  {what}")
            return result
        time.sleep(POLL_S)
    said = f"; {explain()}" if explain is not None else ""
    raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}{said}")


def only_run(runs_dir: Path) -> Path:
    """The one run folder (a run keeps its id to the end: no rename, no link)."""
    runs = [p for p in runs_dir.iterdir() if (p / "status.json").is_file()]
    assert not any(p.is_symlink() for p in runs_dir.iterdir())
    assert len(runs) == 1, f"expected one run in {runs_dir}, found {[p.name for p in runs]}"
    return runs[0]


# In the page, a MutationObserver notes when each training step first shows in the loss chart
# (Date.now(), the same clock as the worker's time.time() on this machine), so the measurement
# does not depend on how fast this test can poll a busy browser.
WATCH_CHART_JS = """
elem_id => {
  const plot = document.getElementById(elem_id);
  window.__chartSeen = window.__chartSeen || {};
  let pending = false;
  const scan = () => {
    pending = false;
    const now = Date.now();
    for (const p of plot.querySelectorAll('g.mark-symbol.role-mark path[aria-label]')) {
      const m = /^step: (-?[\\d.]+); [^;]+: [^;]+; series: loss$/.exec(p.getAttribute('aria-label').trim());
      if (m && !(m[1] in window.__chartSeen)) window.__chartSeen[m[1]] = now;
    }
  };
  new MutationObserver(() => { if (!pending) { pending = true; setTimeout(scan, 0); } })
    .observe(plot, {subtree: true, childList: true, attributes: true});
  scan();
}
"""


class ChartDelay:
    """Time from a train metric line (its `time`, written by the worker) to its point in the chart."""

    def __init__(self, page, elem_id: str = "loss-plot"):
        self.page = page
        page.evaluate(WATCH_CHART_JS, elem_id)

    def delays(self, metrics_path: Path) -> dict[int, float]:
        seen = {int(float(step)): ms / 1000 for step, ms in self.page.evaluate("window.__chartSeen").items()}
        from core.run.records import TrainRecord
        from core.run.rundir import MetricsReader
        written = {r.step: r.time for r in MetricsReader(metrics_path).read_new()  # a half-written last line waits
                   if isinstance(r, TrainRecord) and r.loss is not None}
        return {step: seen[step] - written[step] for step in written if step in seen}

    def assert_bounded(self, metrics_path: Path) -> None:
        """A generous bound: the page polls twice a second (app.tabs.monitor_callbacks.ACTIVE_POLL_S), so
        a point is drawn ~0.5 s after its line is written; on a loaded CPU a few seconds."""
        values = sorted(self.delays(metrics_path).values())
        assert values, "no chart point measured"
        assert statistics.median(values) <= CHART_DELAY_MEDIAN_MAX_S and values[-1] <= CHART_DELAY_MAX_S, \
            self.summary(metrics_path)

    def summary(self, metrics_path: Path) -> str:
        values = sorted(self.delays(metrics_path).values())
        if not values:
            return "chart delay: no point measured"
        return (f"chart delay (metrics.jsonl line -> point drawn in the loss chart, {len(values)} points): "
                f"median {statistics.median(values):.2f} s, max {values[-1]:.2f} s")


CPU_WINDOW_S = 10.0
CHART_DELAY_MEDIAN_MAX_S, CHART_DELAY_MAX_S = 10.0, 30.0  # ~0.5 s quiet: printed in the summary
MERGED_DOWNLOAD_MAX_S = 60.0


class ConsoleCpu:
    """The console process's own CPU time (user + system, not its workers') over a wall window."""

    def __init__(self, pid: int):
        import psutil
        self.process = psutil.Process(pid)
        self.start_wall, self.start_cpu = time.monotonic(), self._cpu()

    def _cpu(self) -> float:
        times = self.process.cpu_times()
        return times.user + times.system

    def summary(self) -> str:
        wall = time.monotonic() - self.start_wall
        share = (self._cpu() - self.start_cpu) / wall
        return (f"console CPU while the charts stream to one open browser tab: {100 * share:.1f}% of one core "
                f"over {wall:.1f} s")


# ---- the test, phase by phase -------------------------------------------------------------------

def fill_train_form(page) -> None:
    """Train tab: the demo model and dataset, a LoRA run with frequent logs and evaluations."""
    choose(page, "model-picker", "tiny-demo")
    choose(page, "dataset-picker", "demo")
    choose(page, "method", "lora")
    set_number(page, "train-length", MAX_STEPS)
    set_number(page, "cfg-train-eval-every", EVAL_EVERY)
    set_number(page, "cfg-train-log-every", LOG_EVERY)
    set_number(page, "cfg-early-stopping-patience", FORM_PATIENCE)
    reveal(page, "#cfg-eval-downstream")
    page.locator("#cfg-eval-downstream input[type=checkbox]").set_checked(False)  # no generation: faster
    expected = [f"max_steps: {MAX_STEPS}", f"eval_every: {EVAL_EVERY}", f"log_every: {LOG_EVERY}",
                f"patience: {FORM_PATIENCE}", "method: lora", "downstream: false", "tiny-demo"]
    wait_for(lambda: all(e in page.inner_text("#config-yaml") for e in expected),
             f"the YAML preview to show {expected}", timeout_s=60)
    assert "estimate unavailable" not in page.inner_text("#memory-estimate")


def wait_for_charts(page) -> None:
    """Monitor tab: the run starts and the loss and perplexity charts get points."""
    wait_for(lambda: run_state(page) == "running", "state running")
    wait_for(lambda: len(plot_points(page, "loss-plot").get("loss", {})) >= 3, "three points in the loss chart")
    wait_for(lambda: len(plot_points(page, "ppl-plot").get("val ppl", {})) >= 2,
             "two points in the perplexity chart (baseline and first evaluation)")


def change_patience(page, runs_dir: Path) -> None:
    """A new patience, applied to the running job, reaches the worker through control.json."""
    from core.run.rundir import RunDir
    set_number(page, "patience", NEW_PATIENCE)
    page.click("#es-apply")
    run = RunDir(only_run(runs_dir))
    wait_for(lambda: (run.read_control().early_stopping or {}).get("patience") == NEW_PATIENCE,
             f"control.json to carry patience {NEW_PATIENCE}", timeout_s=60)


def stop_run(page, runs_dir: Path) -> Path:
    """Stop (graceful): the state becomes stopped and no process of the run is left."""
    import core.run.launcher as launcher
    from core.run.rundir import RunDir
    assert run_state(page) == "running", \
        f"state {run_state(page)!r} before Stop was pressed (the run ended on its own? raise MAX_STEPS)"
    page.click("#stop-button")
    wait_for(lambda: run_state(page) == "stopped", "state stopped")
    run_dir = only_run(runs_dir)
    assert RunDir(run_dir).read_status().state == "stopped"
    wait_for(lambda: not launcher.run_processes(run_dir), "the run's processes to exit", timeout_s=30)
    assert not launcher.find_orphans(runs_dir)
    return run_dir


def resume_after_stop(page, run_dir: Path) -> None:
    """Issue 31 item 5: Stop, then Resume from the Runs tab: the badge says running again and the
    Monitor's message answers the resume; "stopping (saving a checkpoint first)" does not outlive it."""
    assert "stopping (saving a checkpoint first)" in page.inner_text("#monitor-message")
    page.click("#tab-runs-button")
    page.wait_for_selector(f"#runs-select label:has-text('{run_dir.name}')", timeout=30_000)
    box = page.locator("#runs-select label", has_text=run_dir.name).first.locator("input")
    if not box.is_checked():
        box.set_checked(True)
    page.click("#resume-button")
    wait_for(lambda: page.is_visible("#tab-monitor") and run_state(page) in ("starting", "running"),
             "the Monitor to show the resumed run", timeout_s=60)
    message = page.inner_text("#monitor-message")
    assert f"resumed {run_dir.name}" in message and "stopping" not in message, message
    wait_for(lambda: run_state(page) == "running", "the resumed run's badge to say running")
    assert "stopping" not in page.inner_text("#monitor-message")


def runs_table_shows(page, run_id: str, state: str) -> None:
    """The Runs tab's table (refreshed by its watcher when the runs folder changed) lists the run."""
    page.click("#tab-runs-button")  # Gradio gives a tab's button its elem_id + "-button"
    table = page.locator("#runs-table")
    wait_for(lambda: run_id in table.inner_text() and state in table.inner_text(),
             f"the Runs table to list {run_id} as {state}", timeout_s=30)
    page.click("#tab-monitor-button")


def download(page, elem_id: str, target: Path, timeout_s: float = 240) -> set[str]:
    """One click on a download button gives the file, whether its zip was ready (the adapter is
    exported when a LoRA run ends) or has to be made first (the merged model: the page shows the
    export's progress, then starts the download itself). Returns the names in the zip."""
    button = page.locator(f"#{elem_id}")
    wait_for(lambda: button.is_enabled(), f"#{elem_id} to become available", timeout_s=120)
    with page.expect_download(timeout=timeout_s * 1000) as info:
        button.click()
    info.value.save_as(target)
    with zipfile.ZipFile(target) as zipped:
        return {Path(name).name for name in zipped.namelist()}


# Counts the animation frames Gradio's status tracker asks the browser for. Installed before the
# page's own scripts, so app/tabs/status_timer.js (first in the page) wraps it: frames it paces through
# a timer never reach this counter.
COUNT_STATUS_FRAMES_JS = """
(() => {
  const frame = window.requestAnimationFrame.bind(window);
  window.statusFrames = 0;
  window.requestAnimationFrame = (callback) => {
    if ((new Error().stack || "").includes("/statustracker-")) window.statusFrames += 1;
    return frame(callback);
  };
})();
"""


def status_frames_in(page, seconds: float) -> int:
    first = page.evaluate("window.statusFrames")
    time.sleep(seconds)
    return page.evaluate("window.statusFrames") - first


def test_lora_run_from_the_browser(console_server, page, screenshot, artifacts_dir, tmp_path):
    page.add_init_script(COUNT_STATUS_FRAMES_JS)
    page.goto(console_server.url)
    page.wait_for_selector("#start-button", timeout=PHASE_TIMEOUT_S * 1000)
    # without app/tabs/status_timer.js an idle page drew ~130 status-tracker frames a second (measured)
    assert page.evaluate("window.mindtuneStatusFramesPaced"), "app/tabs/status_timer.js did not run first"
    idle_frames = status_frames_in(page, 2.0)
    assert idle_frames <= 4, f"the status tracker drew {idle_frames} frames in 2 s on an idle page"
    fill_train_form(page)
    screenshot(page, "train_tab")

    page.click("#start-button")
    wait_for(lambda: page.is_visible("#tab-monitor") and page.query_selector("#loss-plot"),
             "the Monitor tab to open", timeout_s=60)
    delay = ChartDelay(page)
    wait_for_charts(page)
    screenshot(page, "monitor_tab")
    console_cpu = ConsoleCpu(console_server.process.pid)
    time.sleep(CPU_WINDOW_S)  # the charts stream; the console's own CPU time is measured over this window
    cpu_summary = console_cpu.summary()

    change_patience(page, console_server.runs_dir)
    run_dir = stop_run(page, console_server.runs_dir)
    resume_after_stop(page, run_dir)
    run_dir = stop_run(page, console_server.runs_dir)
    runs_table_shows(page, run_dir.name, "stopped")
    names = download(page, "download-adapter", tmp_path / "adapter.zip")
    assert {"adapter_config.json", "adapter_model.safetensors"} <= names, sorted(names)
    # issue 20 bug 9: the merged model took two clicks about 4 s apart (prepare, then download)
    started = time.monotonic()
    names = download(page, "download-merged", tmp_path / "merged.zip")
    assert "config.json" in names and any(n.endswith(".safetensors") for n in names), sorted(names)
    merged_s = time.monotonic() - started
    print(f"  merged model: one click, downloaded after {merged_s:.1f} s")
    assert merged_s < MERGED_DOWNLOAD_MAX_S  # the 3.2M-parameter demo merges and zips in seconds

    summary = delay.summary(run_dir / "metrics.jsonl") + "\n" + cpu_summary
    print(summary)
    delay.assert_bounded(run_dir / "metrics.jsonl")
    (artifacts_dir / "chart_delay.txt").write_text(summary + "\n", encoding="utf-8")
