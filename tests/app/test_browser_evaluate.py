"""The Runs tab's Evaluate panel in a real browser (issue 28): pick a finished run, choose the
local test tasks (tests/core/test_lm_eval_model.py's tiny_pick_mc and tiny_pick_gen, in a data
folder of the test's own), start; the panel shows one evaluation running while the
other waits queued behind it, then both finished, and the comparison gives base vs
fine-tuned scores with Δ = fine-tuned − base as results.json has them.

The run's `best` checkpoint here is a model folder (the demo model with its MLP weights scaled:
another model, so the scores differ), which the evaluation loads as it loads a merged export; a
training run would take minutes more and the panel does the same with it.
Drives headless Chromium through Playwright (fixtures in `browser_fixtures`).
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests import skips

skips.module("lm_eval")

from core.run.rundir import RunDir
from tests.app.browser_fixtures import MODELS_DIR  # noqa: E402
from tests.app.test_browser_console_state import SCREEN, fake_run  # noqa: E402
from tests.core.test_lm_eval_model import _write_tasks  # noqa: E402

pytest_plugins = ["tests.app.browser_fixtures"]
pytestmark = [pytest.mark.slow, pytest.mark.browser]

TIMEOUT_MS = float(os.environ.get("MINDTUNE_BROWSER_PHASE_TIMEOUT_S", 300)) * 1000
RUN_ID = "20261202-090000_tiny-demo_lora-r8_fp32_dp1"
PANEL_JS = "() => document.querySelector('#eval-results')?.innerText || ''"


@pytest.fixture
def eval_data(tmp_path) -> Path:
    folder = tmp_path / "evaldata"
    _write_tasks(folder / "eval_tasks")
    return folder


@pytest.fixture
def console_extra_dirs(eval_data) -> dict[str, list[Path]]:
    return {"data": [eval_data]}


def _best_model(run: RunDir) -> Path:
    """checkpoints/best -> step-4: the demo model with its MLP down-projections scaled by 0.5."""
    import numpy as np
    from safetensors.numpy import load_file, save_file
    step = run.path / "checkpoints" / "step-4"
    shutil.copytree(MODELS_DIR / "tiny-demo", step)
    weights = load_file(str(step / "model.safetensors"))
    for name in weights:
        if name.endswith("mlp.down_proj.weight"):
            weights[name] = (weights[name] * np.float32(0.5)).astype(weights[name].dtype)
    save_file(weights, str(step / "model.safetensors"), metadata={"format": "pt"})
    (run.path / "checkpoints" / "best").symlink_to("step-4")
    return step


def test_evaluate_panel_runs_base_then_best_and_shows_the_delta(console_server, browser, screenshot):
    run = fake_run(console_server.runs_dir, RUN_ID, "finished", steps=4, **{"model.path": str(MODELS_DIR / "tiny-demo")})
    _best_model(run)
    context = browser.new_context(viewport=SCREEN)
    context.set_default_timeout(60_000)
    page = context.new_page()
    try:
        page.goto(console_server.url)
        page.click("#tab-runs-button")
        page.wait_for_selector(f"#runs-select label:has-text('{RUN_ID}')", timeout=TIMEOUT_MS)
        page.locator("#runs-select label", has_text=RUN_ID).first.locator("input").set_checked(True)
        page.locator("#eval-panel button.label-wrap").first.click()  # opens the folded panel
        page.wait_for_selector("#eval-tasks label:has-text('tiny_pick_mc')", timeout=TIMEOUT_MS)
        page.wait_for_function(f"() => ({PANEL_JS})().includes('No evaluation of this run yet')", timeout=TIMEOUT_MS)
        for task in ("tiny_pick_mc", "tiny_pick_gen"):
            page.locator("#eval-tasks label", has_text=task).first.locator("input").set_checked(True)
        limit = page.locator("#eval-limit input[type=number]")
        limit.fill("6")
        limit.press("Tab")
        page.click("#eval-start")
        page.wait_for_function("() => document.querySelector('#runs-message')?.innerText.includes('Evaluation started')",
                               timeout=TIMEOUT_MS)
        # progress: one evaluation at a time, the other waiting in the queue
        page.wait_for_function(f"() => /(running|starting)/.test(({PANEL_JS})()) && ({PANEL_JS})().includes('queued')",
                               timeout=TIMEOUT_MS, polling=100)
        screenshot(page, "evaluate_running_en")
        # both finish, each showing its requests scored of all; the comparison's table appears
        page.wait_for_function(f"() => (({PANEL_JS})().match(/finished · \\d+\\/\\d+ requests/g) || []).length === 2 "
                               "&& !!document.querySelector('#eval-results table')", timeout=TIMEOUT_MS)
        evals = sorted((console_server.runs_dir / "evals").iterdir())
        # each folder named by the run it belongs to, with no empty checkpoints/ or export/ (issue 37)
        assert all(e.name.startswith(f"eval_{RUN_ID}_") for e in evals), [e.name for e in evals]
        assert not any((e / "checkpoints").exists() or (e / "export").exists() for e in evals)
        results = {json.loads((e / "results.json").read_text())["label"]: json.loads((e / "results.json").read_text())
                   for e in evals}
        assert set(results) == {"base", "best"}
        assert results["best"]["model"] == str(run.path / "checkpoints" / "best")
        status = {label: RunDir(e).read_status() for label, e in
                  ((json.loads((e / "results.json").read_text())["label"], e) for e in evals)}
        first, second = sorted(status.values(), key=lambda s: s.started_at)
        assert second.started_at >= first.ended_at  # one after the other
        panel = page.evaluate(PANEL_JS)
        for one in (first, second):
            assert one.step == one.total_steps > 0 and f"finished · {one.step}/{one.total_steps} requests" in panel, panel
            # every phase of lm-eval's requests counted: 6 items x 3 choices, then 6 generations
            assert one.extra["phases"] == {"loglikelihood": [18, 18], "generate_until": [6, 6]}, one.extra
        rows = page.locator("#eval-results table tr").all_inner_texts()
        shown = {r.split("\t")[0]: r.split("\t")[1:] for r in rows[1:]}
        for metric, key in (("tiny_pick_mc/acc", ("tiny_pick_mc", "acc")),
                            ("tiny_pick_gen/exact_match", ("tiny_pick_gen", "exact_match"))):
            base, best = (results[label]["tasks"][key[0]][key[1]] for label in ("base", "best"))
            assert shown[metric] == [f"{base:.4g}", f"{best:.4g}", f"{best - base:+.4g}"], (metric, shown)
        assert results["base"]["n_samples"] == {"tiny_pick_mc": 6, "tiny_pick_gen": 6}
        # the two models differ, so their per-item answers do
        samples = {label: (e / "samples.jsonl").read_text() for label, e in
                   ((json.loads((e / "results.json").read_text())["label"], e) for e in evals)}
        assert samples["base"] != samples["best"]
        screenshot(page, "evaluate_finished_en")
    finally:
        context.close()
