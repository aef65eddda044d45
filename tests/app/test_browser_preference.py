"""Preference tuning in a real browser (issue 26): pick the demo model and the demo preference pairs,
see a pair side by side in the preview, set Objective = dpo (the statistics then count pairs), start
a short LoRA run and watch the Monitor's reward-accuracy chart get its baseline and evaluation points
until the run finishes; the log-probs are drawn, the perplexity chart says it has none.

Reuses test_browser's page helpers and browser_fixtures' console and page; skips as they do.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

import core.run.launcher as launcher
from core.run.records import TERMINAL_STATES, EvalRecord
from core.run.rundir import MetricsReader
from tests.app.test_browser import choose, only_run, plot_points, reveal, run_state, set_number, wait_for

pytest_plugins = ["tests.app.browser_fixtures"]
pytestmark = [pytest.mark.slow, pytest.mark.browser]

# Few, small steps: the run must finish on its own within the test (~2.5 min on a quiet machine).
MAX_STEPS, EVAL_EVERY, LOG_EVERY, WARMUP, PAIRS_PER_BATCH, EVAL_PAIRS = 20, 5, 5, 2, 2, 40
TIMEOUT_S = 300
# browser_fixtures' data folder (not imported from there: pytest_plugins loads it, rewriting its asserts)
DATA_DIR = Path(os.environ.get("MINDTUNE_TEST_DATA_DIR", Path(__file__).resolve().parents[2] / "data"))


def test_dpo_run_from_the_browser(console_server, page, screenshot):
    page.goto(console_server.url)
    page.wait_for_selector("#start-button", timeout=TIMEOUT_S * 1000)
    choose(page, "model-picker", "tiny-demo")
    choose(page, "dataset-picker", "demo-preference")
    choose(page, "method", "lora")
    # the preview renders preference data as pairs: chosen and rejected side by side (app.data.preference_preview)
    pair = page.locator("#data-preview .mt-pair").first
    pair.wait_for(state="visible", timeout=60_000)
    assert pair.locator(".mt-pair-side.mt-chosen").count() == 1
    assert pair.locator(".mt-pair-side.mt-rejected").count() == 1
    first = json.loads((DATA_DIR / "demo-preference" / "train.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert first["chosen"] in pair.locator(".mt-chosen").inner_text()
    assert first["rejected"] in pair.locator(".mt-rejected").inner_text()

    choose(page, "cfg-train-objective", "dpo")
    # the statistics follow the objective: pairs and both sides' lengths, not the SFT view
    wait_for(lambda: "pairs; chosen" in page.inner_text("#data-stats"), "the statistics to count pairs",
             timeout_s=120)
    assert "chosen answers only" not in page.inner_text("#data-stats")
    set_number(page, "train-length", MAX_STEPS)
    set_number(page, "cfg-train-eval-every", EVAL_EVERY)
    set_number(page, "cfg-train-log-every", LOG_EVERY)
    set_number(page, "cfg-train-warmup-steps", WARMUP)  # the default (20) must stay under max_steps
    set_number(page, "cfg-train-micro-batch-size", PAIRS_PER_BATCH)
    set_number(page, "cfg-eval-max-eval-samples", EVAL_PAIRS)  # of the 200 validation pairs: a short eval
    reveal(page, "#cfg-eval-downstream")
    page.locator("#cfg-eval-downstream input[type=checkbox]").set_checked(False)  # no generation: faster
    expected = ["objective: dpo", f"max_steps: {MAX_STEPS}", f"eval_every: {EVAL_EVERY}",
                f"micro_batch_size: {PAIRS_PER_BATCH}", "demo-preference/train.jsonl", "downstream: false",
                f"max_eval_samples: {EVAL_PAIRS}"]
    wait_for(lambda: all(e in page.inner_text("#config-yaml") for e in expected),
             f"the YAML preview to show {expected}", timeout_s=60)

    page.click("#start-button")
    wait_for(lambda: page.is_visible("#tab-monitor") and page.query_selector("#reward-accuracy-plot"),
             "the Monitor tab to open", timeout_s=60)
    wait_for(lambda: len(plot_points(page, "reward-accuracy-plot").get("reward accuracy", {})) >= 2,
             "two points in the reward-accuracy chart (baseline and first evaluation)", timeout_s=TIMEOUT_S)
    wait_for(lambda: run_state(page) in TERMINAL_STATES, "the run to end",
             timeout_s=TIMEOUT_S)
    assert run_state(page) == "finished", run_state(page)

    run_dir = only_run(console_server.runs_dir)
    evals = [r for r in MetricsReader(run_dir / "metrics.jsonl").read_new()
             if isinstance(r, EvalRecord)]
    drawn = plot_points(page, "reward-accuracy-plot")["reward accuracy"]
    assert sorted(drawn) == [r.step for r in evals] == [0, 5, 10, 15, 20][:len(evals)], (drawn, evals)
    for record in evals:  # each point is the worker's figure
        assert float(drawn[record.step]) == pytest.approx(record.reward_accuracy, abs=1e-3)
    assert plot_points(page, "reward-margin-plot").get("reward margin"), "no reward margin drawn"
    logps = plot_points(page, "logps-plot")
    assert sorted(logps.get("chosen log-prob", {})) == sorted(drawn), logps
    for record in evals:
        assert float(logps["chosen log-prob"][record.step]) == pytest.approx(record.chosen_logp, abs=1e-2)
    # no perplexity nor answer scores for DPO: those charts (and the perplexity's log scale) are hidden
    assert not plot_points(page, "ppl-plot")
    for hidden in ("#ppl-plot", "#ppl-log-scale", "#answers-plot"):
        assert not page.locator(hidden).first.is_visible(), hidden
    status = page.inner_text("#run-status")  # headed by reward accuracy, not a perplexity of the chosen answers
    assert re.search(r"reward[ _]accuracy", status) and "ppl" not in status, status
    screenshot(page, "dpo-monitor")
    wait_for(lambda: not launcher.run_processes(run_dir), "the finished run's processes to exit", timeout_s=60)
