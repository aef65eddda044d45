"""Issue 20 in a real browser, driven as a person would: a refused Start's warning goes once the
form is fixed, check memory by a dry run, double-click
Start, start two more runs while the CPU is busy (they queue), reorder and cancel the queue in the
Runs tab, see the next run start by itself when the first ends, make a new run from the first one
with one change (highlighted while editing, named by Start, its results beside the change in the
Runs comparison), fork the first run from a checkpoint and watch its curve continue the parent's,
reload the page and open a second tab.

Also measures what the issue asks for: the first chart point after Start, and how long the previous
run's drawings stay after another run is shown (target 0 s). Drives headless Chromium through
Playwright (fixtures in `browser_fixtures`); skips without the console, the demo model, Playwright or
Chromium. Slow: it trains the demo model four times (short runs).
"""
from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from core.spec.config import load_config
from core.run.records import ForkEvent
from core.run.rundir import RunDir
from core.run.runs import list_runs

from tests.app.test_browser import PHASE_TIMEOUT_S, choose, plot_points, reveal, run_state, set_number, wait_for

pytest_plugins = ["tests.app.browser_fixtures"]
pytestmark = [pytest.mark.slow, pytest.mark.browser]

STEPS, EVAL_EVERY, SAVE_EVERY, LOG_EVERY, EVAL_SAMPLES = 20, 10, 10, 2, 24
# The first run trains long enough that the two runs started after it are still queued while the
# test reorders and cancels them, on a fast machine too; the runs after it train STEPS.
FIRST_STEPS = 60
FORK_STEP, FORK_LENGTH = 50, 5000  # a checkpoint A keeps (keep_last_n 2: steps 50 and 60)
# Generous bounds on measured figures: the first logged step of a demo LoRA run comes ~24 s after
# launch on a quiet 2-core machine (docs/performance.md), its chart point half a second later; the
# dry run reads a few percent below the run it measures (no final save, no generation) and its
# estimate within a few percent of it (tests/core/test_dry_run.py holds the same bounds on a tiny model).
FIRST_POINT_MAX_S = 240.0  # a loaded 2-core machine starts MindSpore several times slower
DRY_VS_ESTIMATE, DRY_VS_RUN = 0.20, 0.15

# Samples every 10 ms, from the moment it is installed, the run the picker names and the runs the
# charts draw: the previous run's drawings count as "stale" while the picker already names another.
WATCH_SWITCH_JS = """
() => {
  const log = window.__switch = [];
  window.__switchTimer = setInterval(() => {
    const picker = document.querySelector('#run-picker input');
    const drawn = Array.from(document.querySelectorAll('[data-mt-slot] svg.mt-chart[data-run]'))
      .filter(svg => Number(svg.dataset.points) > 0).map(svg => svg.dataset.run);
    log.push([Date.now(), picker ? picker.value : '', drawn]);
  }, 10);
}
"""
# When the loss chart first draws a point of the run the picker names (Date.now(), per run).
WATCH_FIRST_POINT_JS = """
() => {
  window.__firstPoint = window.__firstPoint || {};
  setInterval(() => {
    const svg = document.querySelector('#loss-plot svg.mt-chart[data-run]');
    const picker = document.querySelector('#run-picker input');
    if (svg && picker && svg.dataset.run === picker.value && Number(svg.dataset.points) > 0
        && !(svg.dataset.run in window.__firstPoint)) window.__firstPoint[svg.dataset.run] = Date.now();
  }, 20);
}
"""


def stale_seconds(page, old: str, new: str) -> float:
    """After WATCH_SWITCH_JS was installed and the picker moved from `old` to `new`: wait a second,
    then how long any chart still drew `old` once the picker named `new`."""
    time.sleep(1.0)
    page.evaluate("clearInterval(window.__switchTimer)")
    samples = page.evaluate("window.__switch")
    shown = [t for t, picked, _ in samples if picked == new]
    stale = [t for t, picked, drawn in samples if picked == new and old in drawn]
    assert shown, "the picker never named the new run"
    return (max(stale) - min(shown)) / 1000 if stale else 0.0


def picker_value(page) -> str:
    return page.eval_on_selector("#run-picker input", "e => e.value").strip()


def runs_by_state(runs_dir: Path) -> dict[str, str]:
    return {s.run_id: s.state for s in list_runs(runs_dir)}


def fill_form(page, learning_rate: float | None = None, steps: int = STEPS) -> None:
    choose(page, "model-picker", "tiny-demo")
    choose(page, "dataset-picker", "demo")
    choose(page, "method", "lora")
    set_number(page, "train-length", steps)
    set_number(page, "cfg-train-warmup-steps", 2)
    set_number(page, "cfg-train-eval-every", EVAL_EVERY)
    set_number(page, "cfg-train-save-every", SAVE_EVERY)
    set_number(page, "cfg-train-log-every", LOG_EVERY)
    set_number(page, "cfg-eval-max-eval-samples", EVAL_SAMPLES)
    reveal(page, "#cfg-eval-downstream")
    page.locator("#cfg-eval-downstream input[type=checkbox]").set_checked(False)
    if learning_rate is not None:
        set_number(page, "cfg-train-learning-rate", learning_rate)
    wait_for(lambda: f"max_steps: {steps}" in page.inner_text("#config-yaml")
             and (learning_rate is None or f"learning_rate: {learning_rate}" in page.inner_text("#config-yaml")),
             "the YAML preview to follow the form", timeout_s=60)


def start(page) -> str:
    """Press Start; returns the message under it once the Monitor shows the new run."""
    before = picker_value(page) if page.query_selector("#run-picker input") else ""
    page.click("#tab-train-button")
    page.click("#start-button")
    wait_for(lambda: page.is_visible("#tab-monitor") and picker_value(page) not in ("", before),
             "the Monitor to show the new run", timeout_s=60)
    return page.inner_text("#start-message")


def select_runs(page, run_ids: list[str]) -> None:
    """Tick exactly `run_ids` in the Runs tab's selection (labels start with the id)."""
    page.click("#tab-runs-button")
    for run_id in run_ids:  # the selection is refreshed with the table: wait until each run is offered
        wait_for(lambda: page.locator("#runs-select label", has_text=run_id).count() > 0,
                 f"{run_id} in the Runs selection", timeout_s=30)
    # each box found by its run's id, not by its place: a refresh may re-render the list meanwhile.
    # The boxes' labels are the ids alone, which never change (issue 37: a label that changed as a run
    # ended re-rendered its box, and a tick landing in that moment was lost): one tick is enough.
    for text in [label.inner_text().strip() for label in page.locator("#runs-select label").all()]:
        wanted = text in run_ids
        box = page.locator("#runs-select label").filter(has=page.get_by_text(text, exact=True)).first.locator("input")
        if box.is_checked() != wanted:
            box.set_checked(wanted)


def queue_order(page) -> list[str]:
    return page.eval_on_selector_all("#runs-queue li[data-run]", "items => items.map(i => i.dataset.run)")


def test_queue_new_run_from_this_one_fork_and_dry_run(console_server, page, screenshot, artifacts_dir):
    runs_dir = console_server.runs_dir
    page.goto(console_server.url)
    page.wait_for_selector("#start-button", timeout=PHASE_TIMEOUT_S * 1000)
    page.evaluate(WATCH_FIRST_POINT_JS)
    fill_form(page, steps=FIRST_STEPS)

    # ---- a refused Start's "⚠ not started" goes once the form is fixed (issue 20 bug 6)
    set_number(page, "train-length", 0)
    wait_for(lambda: page.inner_text("#config-errors").strip(), "the form's error", timeout_s=60)
    page.click("#start-button")
    wait_for(lambda: "not started" in page.inner_text("#start-message"), "Start refused", timeout_s=60)
    set_number(page, "train-length", FIRST_STEPS)
    wait_for(lambda: "not started" not in page.inner_text("#start-message")
             and not page.inner_text("#config-errors").strip(), "the stale warning to go", timeout_s=60)
    assert list_runs(runs_dir) == []

    # ---- check memory by dry run: the measured peak beside the estimate, before any launch
    page.click("#dry-run-button")
    wait_for(lambda: page.query_selector("#dry-run-result"), "the dry run's measurement", timeout_s=PHASE_TIMEOUT_S)
    result = page.inner_text("#dry-run-result")
    assert "dry run failed" not in result, result
    measured = float(page.get_attribute("#dry-run-result b[data-mb]", "data-mb"))
    assert 300 < measured < 8000 and "estimate" in result and list_runs(runs_dir) == []
    print(f"  dry run: {result}")
    # the estimate beside it, as the page says it ("estimate 702 MB (-1.3% of the measured)"): within
    # DRY_VS_ESTIMATE of the measurement (tests/core/test_dry_run.py says why the dry run reads lower)
    gap = float(re.search(r"estimate [\d,]+ MB \(([+-][\d.]+)% of the measured\)", result).group(1))
    assert abs(gap) <= 100 * DRY_VS_ESTIMATE, result
    # issue 31 item 6: after the dry run "Check memory" stays a button, not a tall grey block
    button = page.locator("#dry-run-button").bounding_box()
    assert button["height"] < 60, f"Check memory is {button['height']:.0f} px tall after the dry run"
    screenshot(page, "dry_run_result")

    # ---- a double-click on Start launches one run; the first chart point is timed from the click
    page.click("#tab-train-button")
    clicked = time.time()
    page.dblclick("#start-button")
    wait_for(lambda: page.is_visible("#tab-monitor") and picker_value(page), "the Monitor to open", timeout_s=60)
    run_a = picker_value(page)
    wait_for(lambda: len(plot_points(page, "loss-plot").get("loss", {})) >= 2, "A's first loss points")
    first_point_s = page.evaluate("window.__firstPoint")[run_a] / 1000 - clicked
    assert first_point_s < FIRST_POINT_MAX_S, f"A's first chart point {first_point_s:.1f} s after Start"
    time.sleep(1.0)
    assert list(runs_by_state(runs_dir)) == [run_a], runs_by_state(runs_dir)  # one run for two clicks

    # ---- while A trains, two more runs queue instead of sharing the CPU; the Monitor shows the
    # queued run at once, with none of A's drawings left
    page.click("#tab-train-button")
    set_number(page, "train-length", STEPS)
    set_number(page, "cfg-train-learning-rate", 0.002)
    page.evaluate(WATCH_SWITCH_JS)
    message_b = start(page)
    run_b = picker_value(page)
    assert "queued" in message_b and run_b != run_a, message_b
    wait_for(lambda: run_state(page).startswith("queued"), "B's state queued")
    stale_s = stale_seconds(page, run_a, run_b)
    assert stale_s < 0.1, f"A's drawings stayed {stale_s:.2f} s after the Monitor showed B"
    assert all(v == {} for v in plot_points(page, "loss-plot").values())
    page.click("#tab-train-button")
    set_number(page, "cfg-train-learning-rate", 0.004)
    message_c = start(page)
    run_c = picker_value(page)
    assert "queued" in message_c and "#2" in message_c, message_c

    # ---- the Runs tab lists the queue; move C before B, cancel B
    page.click("#tab-runs-button")
    wait_for(lambda: queue_order(page) == [run_b, run_c], "the queue B, C in the Runs tab", timeout_s=30)
    assert "queued #1" in page.inner_text("#runs-table")
    select_runs(page, [run_c])
    page.click("#queue-up")
    wait_for(lambda: queue_order(page) == [run_c, run_b], "C moved before B", timeout_s=30)
    screenshot(page, "runs_queue")
    select_runs(page, [run_b])
    page.click("#queue-cancel")
    # (A may end meanwhile, and C start: the queue is then empty)
    wait_for(lambda: run_b not in queue_order(page) and "cancelled" in page.inner_text("#runs-message"),
             "B cancelled", timeout_s=30)
    status_b = RunDir(runs_dir / run_b).read_status()
    assert (status_b.state, status_b.reason) == ("stopped", "cancelled before it started")

    # ---- a second tab shows the same runs
    second = page.context.new_page()
    second.goto(console_server.url)
    second.click("#tab-runs-button")
    wait_for(lambda: "cancelled before it started" in second.inner_text("#runs-table")
             and run_c in second.inner_text("#runs-table"), "the second tab to list the runs", timeout_s=60)
    second.close()

    # ---- when A ends, C starts by itself
    wait_for(lambda: runs_by_state(runs_dir)[run_a] == "finished", "A to finish")
    peak_a = RunDir(runs_dir / run_a).read_status().final.peak_mem_mb  # A is the config the dry run measured
    assert abs(measured / peak_a - 1) <= DRY_VS_RUN, f"dry run {measured} MB, A's peak {peak_a} MB"
    wait_for(lambda: runs_by_state(runs_dir)[run_c] in ("starting", "running"), "C to start when A ended",
             timeout_s=60)
    page.reload()
    page.wait_for_selector("#start-button", timeout=PHASE_TIMEOUT_S * 1000)
    page.evaluate(WATCH_FIRST_POINT_JS)

    # ---- new run from A with one change: highlighted while editing, named at launch
    select_runs(page, [run_a])
    page.click("#runs-new-from")
    wait_for(lambda: run_a in page.inner_text("#reference-banner"), "the Train tab filled from A", timeout_s=30)
    rank_a = load_config(runs_dir / run_a / "config.yaml").lora.rank
    new_rank = rank_a // 2
    assert page.query_selector("#cfg-lora-rank.mt-changed") is None
    set_number(page, "cfg-lora-rank", new_rank)
    wait_for(lambda: page.query_selector("#cfg-lora-rank.mt-changed") is not None, "lora.rank highlighted",
             timeout_s=30)
    assert f"lora.rank {rank_a} → {new_rank}" in page.inner_text("#reference-changes")
    assert f"was {rank_a}" in page.inner_text("#cfg-lora-rank")
    set_number(page, "train-length", STEPS)  # shorter than A: the test waits for D to end
    message_d = start(page)
    run_d = picker_value(page)
    # D queues behind C while C runs; on a quiet machine C (STEPS steps) may have ended first
    status_c, made_d = RunDir(runs_dir / run_c).read_status(), RunDir(runs_dir / run_d).read_status().created_at
    c_was_running = status_c.ended_at is None or (made_d is not None and status_c.ended_at > made_d)
    assert f"lora.rank {rank_a} → {new_rank}" in message_d, message_d
    assert ("queued" in message_d) == c_was_running, (message_d, status_c.state, status_c.ended_at, made_d)
    assert RunDir(runs_dir / run_d).read_status().parent_run == run_a
    screenshot(page, "new_run_from_this")

    # ---- fork A from its step-10 checkpoint with another learning rate
    select_runs(page, [run_a])
    wait_for(lambda: page.locator("#runs-fork-step input").input_value() != "", "A's checkpoints offered",
             timeout_s=30)
    choose(page, "runs-fork-step", f"step-{FORK_STEP}")
    page.click("#runs-fork")
    wait_for(lambda: f"step {FORK_STEP}" in page.inner_text("#reference-banner"), "the fork banner", timeout_s=30)
    set_number(page, "cfg-train-learning-rate", 0.001)
    set_number(page, "train-length", FORK_LENGTH)  # long: it is stopped by hand at the end
    message_e = start(page)
    run_e = picker_value(page)
    assert f"forked from {run_a} at step {FORK_STEP}" in message_e and "train.learning_rate" in message_e
    assert load_config(runs_dir / run_e / "config.yaml").run.fork_from.endswith(f"step-{FORK_STEP}")

    # ---- C ends, D starts; the comparison puts D's result deltas beside its one change
    wait_for(lambda: runs_by_state(runs_dir)[run_d] in ("starting", "running"), "D to start after C")
    wait_for(lambda: RunDir(runs_dir / run_d).read_status().best is not None, "D's first evaluation")
    select_runs(page, [run_a, run_d])
    # the table of this selection (D against A), not any table: issue 31 item 8 read one that was there
    try:
        wait_for(lambda: page.query_selector("#runs-config-diff .mt-delta-table")
                 and run_d in page.inner_text("#runs-config-diff .mt-delta-table"), "D's result deltas", timeout_s=30)
    except AssertionError as err:  # what the page showed: the ticks and the comparison's first lines
        ticked = page.eval_on_selector_all("#runs-select label", "ls => ls.filter(l => l.querySelector('input')"
                                           ".checked).map(l => l.innerText)")
        raise AssertionError(f"{err}; ticked {ticked}; shown: {page.inner_text('#runs-config-diff')[:400]!r}") from None
    assert page.eval_on_selector_all("#runs-select input:checked", "boxes => boxes.length") == 2
    deltas = page.inner_text("#runs-config-diff .mt-delta-table")
    assert f"lora.rank {rank_a} → {new_rank}" in deltas and "ΔPPL" in deltas
    ppl = page.inner_text("#runs-config-diff [data-figure=val_ppl]")
    assert re.fullmatch(r"[+-]\S+ \([+-][\d.]+%\)", ppl.strip()), ppl
    screenshot(page, "runs_deltas")

    # ---- D ends, E (the fork) starts: its chart continues A's curve from step 10
    wait_for(lambda: runs_by_state(runs_dir)[run_e] in ("starting", "running"), "E to start after D")
    page.click("#tab-monitor-button")
    choose(page, "run-picker", run_e)
    wait_for(lambda: len(plot_points(page, "loss-plot").get("loss", {})) >= 1, "E's first loss point")
    loss = plot_points(page, "loss-plot")
    parent_steps = sorted(loss.get("loss (parent)", {}))
    assert parent_steps and max(parent_steps) <= FORK_STEP and min(loss["loss"]) > FORK_STEP, loss.keys()
    fork_event = next(r for r in RunDir(runs_dir / run_e).metrics_reader().read_new() if isinstance(r, ForkEvent))
    assert fork_event.optimizer_state and fork_event.parent_run == run_a
    screenshot(page, "fork_monitor")

    # ---- Stop now on E; its "stopping now" does not stay when another run is shown
    wait_for(lambda: page.locator("#stop-now-button").is_enabled(), "Stop now to be enabled", timeout_s=30)
    page.click("#stop-now-button")
    wait_for(lambda: "stopping now" in page.inner_text("#monitor-message"), "the stop message")
    wait_for(lambda: runs_by_state(runs_dir)[run_e] == "stopped", "E stopped")
    choose(page, "run-picker", run_a)
    wait_for(lambda: "stopping" not in page.inner_text("#monitor-message"), "the stop message to go with E",
             timeout_s=30)

    summary = (f"first chart point after Start: {first_point_s:.1f} s (double-click, {run_a}); "
               f"previous run's drawings after another run is shown: {stale_s:.2f} s; "
               f"dry run: {measured:.0f} MB measured ({gap:+.1f}% estimate, A's peak {peak_a:.0f} MB)")
    print(summary)
    (artifacts_dir / "workflow_figures.txt").write_text(summary + "\n", encoding="utf-8")
