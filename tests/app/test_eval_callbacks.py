"""The Runs tab's Evaluate action (app/eval_callbacks.py): core.evaluate started through
core.run.launcher in its own folder, its progress and results, stop, and base vs fine-tuned with Δ."""
from __future__ import annotations

import json
import shutil
import time

import pytest

pytest.importorskip("lm_eval")

import core.run.launcher as launcher  # noqa: E402
from core.eval.eval_tasks import EvalSettings, create_eval_run  # noqa: E402
from core.run.rundir import TERMINAL_STATES, RunDir  # noqa: E402

from app import eval_callbacks as ev  # noqa: E402
from tests.app.test_monitor_callbacks import make_run  # noqa: E402
from tests.core.test_lm_eval_model import _write_tasks  # noqa: E402


@pytest.fixture
def trained(console, model_root):
    _write_tasks(console.settings.data_dirs[0] / "eval_tasks")
    run = make_run(console, **{"model.path": str(model_root / "tiny")})
    run.write_status(state="finished")
    return run


def _wait(run: RunDir, timeout_s: float = 300.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        state = run.read_status().state
        if state in TERMINAL_STATES:
            return state
        time.sleep(0.5)
    raise AssertionError(f"{run.run_id} still {run.read_status().state} after {timeout_s} s")


def test_refusals_name_what_is_wrong(console, trained):
    assert ev.task_choices(console) == ["tiny_pick_gen", "tiny_pick_mc"]
    assert ev.start(console, [], ["tiny_pick_mc"]) == "Select exactly one run to evaluate."
    assert ev.start(console, [trained.run_id], [], lang="zh") == "请至少选择一个任务。"
    assert "task nope: not in the local task folders" in ev.start(console, [trained.run_id], ["nope"])
    assert f"run {trained.run_id} has no best checkpoint yet" in ev.start(console, [trained.run_id], ["tiny_pick_mc"],
                                                                         ["best"])
    assert not (console.runs_dir / "evals").exists() or not any((console.runs_dir / "evals").iterdir())


def test_evaluate_runs_in_the_background_and_shows_base_vs_fine_tuned(console, trained, model_root):
    message = ev.start(console, [trained.run_id], ["tiny_pick_mc"], ["base"], limit=4)
    assert message.startswith("Evaluation started: eval_tiny_base_"), message
    (base, settings), = ev.evaluations(console, trained.run_id)
    assert settings.model.endswith("tiny") and settings.limit == 4 and settings.source_run == trained.run_id
    assert base.read_status().command[1:3] == ["-m", "core.evaluate"]
    assert _wait(base) == "finished", base.log_tail()
    status = base.read_status()
    assert status.step == status.total_steps == 12  # 4 items x 3 choices
    base_acc = json.loads((base.path / "results.json").read_text())["tasks"]["tiny_pick_mc"]["acc"]
    # a fine-tuned evaluation's results beside it (written here: the run has no checkpoint to load)
    best = create_eval_run(console.runs_dir, EvalSettings(model=str(model_root / "tiny"), tasks=["tiny_pick_mc"], label="best",
                                                          source_run=trained.run_id))
    (best.path / "results.json").write_text(json.dumps({"tasks": {"tiny_pick_mc": {"acc": 1.0, "acc_stderr": 0.0}}}))
    best.write_status(state="starting")
    best.write_status(state="running")
    best.write_status(state="finished")
    assert ev.comparison(console, trained.run_id) == [("tiny_pick_mc/acc", base_acc, 1.0)]
    shown = ev.results_html(console, [trained.run_id], lang="zh")
    assert "基础模型" in shown and f"{1.0 - base_acc:+.4g}" in shown and "已完成" in shown


def test_stop_ends_a_running_evaluation(console, trained):
    ev.start(console, [trained.run_id], ["tiny_pick_mc", "tiny_pick_gen"], ["base"])
    (run, _), = ev.evaluations(console, trained.run_id)
    assert ev.stop(console, [trained.run_id]) == f"Stopped: {run.run_id}"
    assert run.read_status().state == "stopped"
    assert not launcher.run_processes(run)
