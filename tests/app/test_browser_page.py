"""Issue 20 bugs 1, 10 and 11 in a real browser: a run picked by hand in the Monitor shows none of
the previous run's drawings, not even in the charts scrolled out of view; the Train tab keeps what a
run needs in view and folds the rest into labelled sections; with 中文 picked, no English-only text
a user reads reaches the page (every tab, every folded section opened, a finished, a stopped and a
failed run in the tables).

Drives headless Chromium through Playwright (fixtures in `browser_fixtures`); skips without the
console, the demo model, Playwright or Chromium. No training: the runs are written as a worker
writes them (core.rundir), so both tests take seconds once the console is up.
"""
from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from core.config import Config
from core.rundir import FinalFigures, RunDir

from tests.app.english import english_words
from tests.app.test_browser import choose, wait_for
from tests.app.test_browser_workflows import WATCH_SWITCH_JS, stale_seconds
from tests.app.test_metrics import evaluation, train

pytest_plugins = ["tests.app.browser_fixtures"]
pytestmark = [pytest.mark.slow, pytest.mark.browser]
VIEWPORT = {"width": 1440, "height": 1000}  # browser_fixtures' page size (a laptop's screen)

# What a person sets for a run, in view at 1440 x 1000 without scrolling (issue 20 bug 11).
ESSENTIALS = ("model-picker", "method", "cfg-lora-rank", "cfg-lora-alpha", "dataset-picker", "train-length",
              "cfg-train-learning-rate", "start-button")
# The labelled folds of the rest, closed on a fresh page.
FOLDED = {"sec-data": "cfg-data-max-seq-len", "sec-model-table": "model-table", "sec-lora": "lora-targets",
          "sec-precision": "cfg-precision-amp-level", "sec-training": "cfg-train-warmup-steps",
          "sec-eval": "cfg-early-stopping-patience"}
TRAIN_TAB_MAX_PX = 2600  # the one long form was ~4,200 px tall


def bottom(page, elem_id: str) -> float:
    box = page.locator(f"#{elem_id}").first.bounding_box()
    assert box is not None, f"#{elem_id} is not shown"
    return box["y"] + box["height"]


def test_the_train_tab_keeps_the_essentials_in_view_and_folds_the_rest(console_server, page, screenshot):
    page.goto(console_server.url)
    page.wait_for_selector("#start-button")
    wait_for(lambda: "MB" in page.inner_text("#memory-estimate"), "the memory estimate", timeout_s=120)
    below = {e: round(bottom(page, e)) for e in ESSENTIALS if bottom(page, e) > VIEWPORT["height"]}
    assert not below, f"below the first screen ({VIEWPORT['height']} px): {below}"
    estimate_top = page.locator("#memory-estimate table").bounding_box()["y"]
    assert estimate_top < VIEWPORT["height"] - 100, f"the memory estimate starts at {estimate_top:.0f} px"
    height = page.evaluate("() => document.querySelector('#tab-train').getBoundingClientRect().height")
    assert height < TRAIN_TAB_MAX_PX, f"the Train tab is {height:.0f} px tall"
    screenshot(page, "train_tab_folded")
    print(f"  Train tab {height:.0f} px tall; essentials end at {max(bottom(page, e) for e in ESSENTIALS):.0f} px")
    for section, inside in FOLDED.items():
        label = page.locator(f"#{section} button.label-wrap").first
        assert label.inner_text().strip(), f"#{section} has no label"
        assert not page.locator(f"#{inside}").first.is_visible(), f"#{inside} is not folded away"
        label.click()  # as a person opens it
        page.locator(f"#{inside}").first.wait_for(state="visible", timeout=10_000)


# ---- 中文 everywhere ------------------------------------------------------------------------------

# The visible text nodes of the page, except what is shown verbatim: code, YAML and commands, the
# data samples, logs, field values the user typed (inputs), chart drawings; and the language
# switch itself, which names both languages so that either reader finds the other.
TEXT_NODES_JS = """
() => {
  const verbatim = 'pre, code, .cm-editor, textarea, input, svg, .mt-sample, [data-testid=textbox], #lang-toggle';
  const out = [];
  const walker = document.createTreeWalker(document.querySelector('.gradio-container'), NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const el = node.parentElement, text = node.textContent.trim();
    if (!text || !el || el.closest(verbatim) || !el.checkVisibility()) continue;
    const owner = el.closest('[id]');
    out.push([owner ? owner.id : '', text]);
  }
  return out;
}
"""
def english_on_page(page) -> list[str]:
    return [f"#{owner}: {text[:120]!r}" for owner, text in page.evaluate(TEXT_NODES_JS) if english_words(text)]


def test_english_words_are_found_and_names_are_kept():
    assert english_words("= micro 8 × accumulation 1 × workers 1") == ["accumulation"]
    assert english_words("format: alpaca (as set) · first 3 of 2000 records") == ["format", "as", "set", "first",
                                                                                 "of", "records"]
    assert english_words("LoRA 秩 r · AdamW · CPU：峰值 · models/tiny-demo · LlamaForCausalLM · q_proj · 708.9 MB") == []
    assert english_words("--models-dir 下的目录；⚠ 表示无法加载 · 例如 {instruction: question}") == []


def make_runs(runs_dir: Path) -> dict[str, RunDir]:
    """A finished and a stopped run as the worker leaves them (status, metrics, checkpoints)."""
    runs = {}
    for name, state, reason in (("finished", "finished", "reached 20 steps"),
                                ("stopped", "stopped", "stopped by request")):
        run = RunDir.create(runs_dir, f"20261201-09000{len(runs)}_tiny-demo_lora-r8_fp32_dp1_{name}",
                            Config().with_updates({"train.max_steps": 20, "train.warmup_steps": 2}).to_yaml())
        run.write_status(state="starting")
        run.write_status(state="running", step=0, total_steps=20, rank_count=1)
        run.append_metrics([train(10, 2.0), evaluation(10, 1.9, 1.9), train(20, 1.5), evaluation(20, 1.4, 1.4)])
        final = FinalFigures(best_val_ppl=4.06, tokens_per_s=2800.0, peak_mem_mb=700.0, wall_s=60.0, steps=20)
        run.write_status(state=state, reason=reason, step=20, ended_at=time.time(), final=final)
        runs[name] = run
    return runs


def make_failed_run(runs_dir: Path) -> RunDir:
    run = RunDir.create(runs_dir, "20261201-090009_tiny-demo_full_fp32_dp1_failed", Config().to_yaml())
    run.write_status(state="starting")
    run.write_status(state="failed", reason="RuntimeError: Allocate memory failed", failure_kind="oom",
                     ended_at=time.time())
    run.log_path.write_text("RuntimeError: Allocate memory failed\n", encoding="utf-8")
    return run


def open_every_fold(page) -> None:
    page.evaluate("() => document.querySelectorAll('#tab-train button.label-wrap:not(.open)')"
                  ".forEach(b => b.checkVisibility() && b.click())")


def wait_chinese(page, where: str, timeout_s: float = 30) -> None:
    """Until no English-only text is shown (callbacks answer the switch asynchronously)."""
    deadline = time.monotonic() + timeout_s
    while (found := english_on_page(page)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not found, f"English in 中文 mode ({where}):\n" + "\n".join(found)


def test_in_chinese_no_english_only_text_reaches_the_page(console_server, browser, screenshot):
    runs = make_runs(console_server.runs_dir)
    # a Chinese browser: Gradio's own words (the upload box's "Drop File Here") follow its locale
    context = browser.new_context(viewport=VIEWPORT, locale="zh-CN")
    context.set_default_timeout(30_000)
    page = context.new_page()
    try:
        page.goto(console_server.url)
        page.wait_for_selector("#start-button")
        wait_for(lambda: "MB" in page.inner_text("#memory-estimate"), "the memory estimate", timeout_s=120)
        page.locator("#lang-toggle label", has_text="中文").click()  # as a person switches
        open_every_fold(page)
        wait_chinese(page, "Train tab, every section open")
        screenshot(page, "train_tab_zh")

        page.click("#tab-runs-button")
        wait_for(lambda: runs["finished"].run_id in page.inner_text("#runs-table"), "the runs table", timeout_s=60)
        wait_chinese(page, "Runs tab")

        failed = make_failed_run(console_server.runs_dir)
        page.click("#tab-monitor-button")
        for run in (runs["finished"], failed):
            choose(page, "run-picker", run.run_id)
            wait_for(lambda: run.run_id in page.input_value("#run-picker input"), f"the Monitor on {run.run_id}")
            wait_chinese(page, f"Monitor, {run.run_id}")
        screenshot(page, "monitor_failed_zh")

        page.click("#tab-try-button")
        wait_chinese(page, "Try tab")
    finally:
        context.close()


# ---- bug 1: picking a run by hand -----------------------------------------------------------------

CHARTS_JS = """() => Array.from(document.querySelectorAll('[data-mt-slot] svg.mt-chart'))
  .map(svg => [svg.closest('[data-mt-slot]').dataset.mtSlot, svg.dataset.run || '', Number(svg.dataset.points)])"""


def test_a_run_picked_by_hand_shows_none_of_the_previous_runs_drawings(console_server, page):
    """Run A drew every chart (also those below the first screen); picking B, which has no point
    yet, left A's curves in the charts out of view until they were scrolled to, and in view until
    the next poll (0.3-1 s)."""
    runs = make_runs(console_server.runs_dir)
    failed = make_failed_run(console_server.runs_dir)  # no metrics: a run with no points yet
    page.goto(console_server.url)
    page.wait_for_selector("#start-button")
    page.click("#tab-monitor-button")
    a, b = runs["finished"].run_id, failed.run_id
    choose(page, "run-picker", a)
    wait_for(lambda: all(run == a and points > 0 for _, run, points in page.evaluate(CHARTS_JS)),
             "every chart to draw A")
    page.evaluate(WATCH_SWITCH_JS)
    choose(page, "run-picker", b)
    wait_for(lambda: all(run in ("", b) for _, run, _ in page.evaluate(CHARTS_JS)), "no chart drawing A")
    stale_s = stale_seconds(page, a, b)
    print(f"  previous run's drawings after a pick by hand: {stale_s:.2f} s")
    assert stale_s < 0.1, f"A's drawings stayed {stale_s:.2f} s after B was picked"
    assert all(points == 0 for _, _, points in page.evaluate(CHARTS_JS))
