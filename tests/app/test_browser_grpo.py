"""GRPO in a real browser: pick the demo model and data, set Objective = grpo (its settings appear, early
stopping then watches val_reward, the preview shows prompts with the columns the rewards get), type two
reward functions as YAML lines, start a short LoRA run and see the Monitor's reward chart get its
baseline and evaluation points, each reward function's curve and the completions table, until the run
finishes.

Reuses test_browser's page helpers and browser_fixtures' console and page; skips as they do.
"""
from __future__ import annotations

import pytest

import core.run.launcher as launcher
from core.run.records import TERMINAL_STATES, CompletionsEvent, EvalRecord
from core.run.rundir import MetricsReader
from tests.app.test_browser import choose, only_run, plot_points, reveal, run_state, set_number, wait_for

pytest_plugins = ["tests.app.browser_fixtures"]
pytestmark = [pytest.mark.slow, pytest.mark.browser]

MAX_STEPS, EVAL_EVERY, PROMPTS_PER_BATCH, EVAL_PROMPTS, GENERATIONS, NEW_TOKENS = 4, 2, 2, 4, 2, 8
TIMEOUT_S = 300
REWARDS = "- {function: regex, pattern: '.*e.*'}\n- {function: length, soft_tokens: 2, weight: 0.5}"


def test_grpo_run_from_the_browser(console_server, page, screenshot):
    page.goto(console_server.url)
    page.wait_for_selector("#start-button", timeout=TIMEOUT_S * 1000)
    choose(page, "model-picker", "tiny-demo")
    choose(page, "dataset-picker", "demo")
    choose(page, "method", "lora")
    assert not page.locator("#grpo-settings").is_visible()  # GRPO's settings only for grpo
    choose(page, "cfg-train-objective", "grpo")
    page.locator("#grpo-settings").wait_for(state="visible", timeout=30_000)
    reveal(page, "#cfg-early-stopping-monitor")
    wait_for(lambda: "val_reward" in page.locator("#cfg-early-stopping-monitor input").input_value(),
             "early stopping to watch val_reward", timeout_s=60)
    # the preview shows prompts as the rollouts get them, with the columns the rewards read
    wait_for(lambda: "GRPO prompts" in page.inner_text("#data-preview"), "the preview of prompts", timeout_s=120)
    assert page.locator("#data-preview .mt-prompt-text").count() == 3
    set_number(page, "train-length", MAX_STEPS)
    set_number(page, "cfg-train-eval-every", EVAL_EVERY)
    set_number(page, "cfg-train-log-every", 1)
    set_number(page, "cfg-train-warmup-steps", 0)
    set_number(page, "cfg-train-micro-batch-size", PROMPTS_PER_BATCH)
    set_number(page, "cfg-eval-max-eval-samples", EVAL_PROMPTS)
    set_number(page, "cfg-grpo-num-generations", GENERATIONS)
    set_number(page, "cfg-grpo-max-new-tokens", NEW_TOKENS)
    reveal(page, "#cfg-grpo-rewards")
    page.locator("#cfg-grpo-rewards textarea").fill(REWARDS)
    reveal(page, "#cfg-eval-downstream")
    page.locator("#cfg-eval-downstream input[type=checkbox]").set_checked(False)
    expected = ["objective: grpo", f"max_steps: {MAX_STEPS}", f"num_generations: {GENERATIONS}",
                "function: regex", "soft_tokens: 2", "monitor: val_reward", f"max_eval_samples: {EVAL_PROMPTS}"]
    wait_for(lambda: all(e in page.inner_text("#config-yaml") for e in expected),
             f"the YAML preview to show {expected}", timeout_s=60,
             explain=lambda: page.inner_text("#config-yaml") + page.inner_text("#config-errors"))

    page.click("#start-button")
    wait_for(lambda: page.is_visible("#tab-monitor") and page.query_selector("#reward-plot"),
             "the Monitor tab to open", timeout_s=60, explain=lambda: page.inner_text("#start-message"))
    # the reward chart: the baseline's and each evaluation's val reward (or the run ended: its reason below)
    wait_for(lambda: len(plot_points(page, "reward-plot").get("val reward", {})) >= 2
             or run_state(page) in TERMINAL_STATES, "two val reward points or the run's end", timeout_s=TIMEOUT_S)
    wait_for(lambda: run_state(page) in TERMINAL_STATES, "the run to end", timeout_s=TIMEOUT_S)
    run_dir = only_run(console_server.runs_dir)
    assert run_state(page) == "finished", (run_state(page), (run_dir / "train.log").read_text()[-2000:])
    records = MetricsReader(run_dir / "metrics.jsonl").read_new()
    evals = [r for r in records if isinstance(r, EvalRecord)]
    wait_for(lambda: len(plot_points(page, "reward-plot").get("val reward", {})) == len(evals),
             "every evaluation in the reward chart", timeout_s=30)
    drawn = plot_points(page, "reward-plot")["val reward"]
    assert sorted(drawn) == [r.step for r in evals] == [0, 2, 4], (drawn, evals)
    for record in evals:  # each point is the worker's figure
        assert float(drawn[record.step]) == pytest.approx(record.val_reward, abs=1e-3)
    assert len(plot_points(page, "reward-plot").get("reward", {})) == MAX_STEPS  # one per logged step
    functions = plot_points(page, "reward-functions-plot")
    assert {"regex", "length", "val regex", "val length"} <= set(functions), functions
    # the completions table: the newest evaluation's samples, each reward and the total
    shown = [r for r in records if isinstance(r, CompletionsEvent)][-1]
    table = page.locator("#completions-table table")
    table.wait_for(state="visible", timeout=30_000)
    assert table.locator("th").all_inner_texts() == ["prompt", "completion", "regex", "length", "total"]
    rows = table.locator("tr:has(td)")
    assert rows.count() == len(shown.samples) >= 1
    assert rows.first.locator("td.mt-completion").inner_text().strip() == shown.samples[0]["completion"].strip()
    # no perplexity, no preference charts for GRPO
    for hidden in ("#ppl-plot", "#reward-accuracy-plot", "#answers-plot"):
        assert not page.locator(hidden).first.is_visible(), hidden
    screenshot(page, "grpo-monitor")
    wait_for(lambda: not launcher.run_processes(run_dir), "the finished run's processes to exit", timeout_s=60)
