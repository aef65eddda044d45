"""The Runs tab's Evaluate action (app/tabs/eval_callbacks.py): core.evaluate started through
core.run.launcher in its own folder, its progress and results, stop, and base vs fine-tuned with Δ."""
from __future__ import annotations

import json
import shutil
import time

import pytest

from tests import skips

skips.module("lm_eval")

import core.run.launcher as launcher  # noqa: E402
from core.eval.eval_tasks import EvalSettings, create_eval_run  # noqa: E402
from core.run.records import TERMINAL_STATES
from core.run.rundir import RunDir

from app.tabs import eval_callbacks as ev  # noqa: E402
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


@pytest.mark.slow
def test_evaluate_runs_in_the_background_and_shows_base_vs_fine_tuned(console, trained, model_root):
    message = ev.start(console, [trained.run_id], ["tiny_pick_mc"], ["base"], limit=4)
    # the folder is named by the run it belongs to (issue 37: eval_best_best_<time> said whose it was not)
    assert message.startswith(f"Evaluation started: eval_{trained.run_id}_base_"), message
    (base, settings), = ev.evaluations(console, trained.run_id)
    assert settings.model.endswith("tiny") and settings.limit == 4 and settings.source_run == trained.run_id
    assert base.read_status().command[1:3] == ["-m", "core.evaluate"]
    assert _wait(base) == "finished", base.log_tail()
    status = base.read_status()
    assert status.step == status.total_steps == 12  # 4 items x 3 choices
    assert not (base.path / "checkpoints").exists() and not (base.path / "export").exists()
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


def _two_queued(console, trained, model_root, tasks):
    """Two evaluations of the run queued in one worker, as start() queues base and best."""
    runs = [create_eval_run(console.runs_dir, EvalSettings(
        model=str(model_root / "tiny"), tasks=tasks, include_path=[str(d) for d in ev.task_dirs(console)],
        label=label, source_run=trained.run_id)) for label in ("base", "best")]
    ev._launch_queue(runs)
    return runs


@pytest.mark.slow
def test_base_and_best_run_one_after_the_other_in_one_worker(console, trained, model_root):
    first, second = _two_queued(console, trained, model_root, ["tiny_pick_mc"])
    assert first.read_status().command[3:] == ["--run-dir", str(first.path), "--run-dir", str(second.path)]
    seen_together = []
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and second.read_status().state not in TERMINAL_STATES:
        waiting = second.read_status().state  # read before the first: if the first still runs
        if first.read_status().state == "running":  # now, it ran when `waiting` was read
            seen_together.append(waiting)
        time.sleep(0.2)
    assert _wait(first) == "finished" and _wait(second) == "finished", second.log_tail()
    assert seen_together and set(seen_together) == {"queued"}  # the second waited while the first ran
    a, b = first.read_status(), second.read_status()
    assert b.started_at >= a.ended_at
    assert a.pid == b.pid  # the same worker: MindSpore and lm-eval load once
    assert a.step == a.total_steps == b.step == b.total_steps == 36  # 12 items x 3 choices each
    # each keeps its own output
    assert "next in the queue: " + second.run_id in first.log_path.read_text()
    assert '"tiny_pick_mc"' in second.log_path.read_text() and '"tiny_pick_mc"' not in first.log_path.read_text().split(
        "next in the queue")[-1]
    assert json.loads((first.path / "results.json").read_text())["tasks"] == \
        json.loads((second.path / "results.json").read_text())["tasks"]  # the same model twice


@pytest.mark.slow
def test_stop_ends_the_running_evaluation_and_the_one_queued_behind_it(console, trained, model_root):
    first, second = _two_queued(console, trained, model_root, ["tiny_pick_mc", "tiny_pick_gen"])
    deadline = time.monotonic() + 120
    while first.read_status().state not in ("running", *TERMINAL_STATES) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert second.read_status().state == "queued"
    message = ev.stop(console, [trained.run_id])
    assert message == f"Stopped: {second.run_id}, {first.run_id}"  # the waiting one first
    assert first.read_status().state == second.read_status().state == "stopped"
    assert second.read_status().pid is None  # it never started
    assert not launcher.run_processes(first) and not launcher.run_processes(second)
    time.sleep(1.0)  # the reaper starts nothing for a stopped queue
    assert second.read_status().state == "stopped"


@pytest.mark.slow  # one evaluation in a subprocess (~30 s on a loaded 2-core machine)
def test_a_shell_evaluation_keeps_its_log_and_says_each_phases_progress(console, model_root, tmp_path):
    """Issue 37: `python -m core.evaluate` from a shell writes train.log like the console's (the guide
    says every evaluation folder has one), makes no empty checkpoints/ or export/, and its progress
    counts every phase of lm-eval's requests (log-likelihoods, then generations), not the last one's."""
    import subprocess
    import sys
    tasks = console.settings.data_dirs[0] / "eval_tasks"
    _write_tasks(tasks)
    runs = tmp_path / "shell-runs"
    done = subprocess.run([sys.executable, "-m", "core.evaluate", "--model", str(model_root / "tiny"), "--tasks",
                           "tiny_pick_mc,tiny_pick_gen", "--include-path", str(tasks), "--limit", "2", "--runs-dir",
                           str(runs)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    (folder,) = (runs / "evals").iterdir()
    assert folder.name.startswith("eval_tiny_")  # no training run: named by its model
    run = RunDir(folder)
    log = run.log_path.read_text()
    assert f"evaluation folder: {folder}" in log and '"tiny_pick_mc"' in log
    assert f"evaluation folder: {folder}" in done.stdout  # and the terminal still sees it
    assert not (folder / "checkpoints").exists() and not (folder / "export").exists()
    status = run.read_status()
    phases = status.extra["phases"]
    assert phases == {"loglikelihood": [6, 6], "generate_until": [2, 2]}  # 2 items x 3 choices; 2 generations
    assert status.step == status.total_steps == 8
    shown = ev._progress(run, "en")
    assert shown == "finished · 8/8 requests"
    going = create_eval_run(runs, EvalSettings(model=str(model_root / "tiny"), tasks=["tiny_pick_mc"]))
    going.write_status(state="starting")
    going.write_status(state="running", step=7, total_steps=8,
                       extra={"phases": {"loglikelihood": [6, 6], "generate_until": [1, 2]}})
    assert ev._progress(going, "en") == "running · log-likelihoods 6/6, generation 1/2"
    assert ev._progress(going, "zh") == "运行中 · 对数似然 6/6，生成 1/2"
