"""The run-directory records end to end: the real worker (core.train) writes every kind of record
of a tiny LoRA run, and the console's readers (charts, status line, runs table, early-stopping
fields) read them back. Slow: it trains a tiny model on the CPU in this process."""
from __future__ import annotations

import pytest

import core.run.launcher as launcher
from core.spec.config import load_config
from core.run.records import BaselineEvent, ControlEvent, EndEvent, EvalRecord, SetupEvent, TrainRecord
from core.run.rundir import RunDir
from core.run.runs import list_runs
from core.train import run_worker

from app.tabs import monitor_callbacks, runs_callbacks
from app.charts.metrics import RunCharts
from app.runs.run_status import best_text, failure_kind, status_line

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> RunDir:
    from tests.core.tiny_setup import make_workspace  # builds the model with MindSpore (test side only)

    config_path = make_workspace(tmp_path_factory.mktemp("ws"))
    config = load_config(config_path, ["train.max_steps=6", "train.eval_every=3", "train.log_every=2",
                                       "early_stopping.patience=2"])
    run = launcher.create_run(config)
    run.write_control(early_stopping={"patience": 4})  # before the worker starts: applied at its first poll
    assert run_worker(str(run.path)) == 0
    return RunDir(list_runs(config.run.runs_dir)[0].path)


def test_every_record_the_worker_writes_is_typed_and_complete(finished_run):
    records = finished_run.metrics_reader().read_new()
    kinds = {type(r) for r in records}
    assert {SetupEvent, EvalRecord, BaselineEvent, ControlEvent, TrainRecord, EndEvent} <= kinds
    assert all(r.extra == {} and r.time is not None and r.step is not None for r in records)
    assert [r.step for r in records if isinstance(r, TrainRecord)] == [1, 2, 4, 6]
    assert [(r.step, r.base) for r in records if isinstance(r, EvalRecord)] == [(0, True), (3, False), (6, False)]
    status = finished_run.read_status()
    assert status.extra == {} and status.best.extra == {} and status.final.extra == {}
    assert finished_run.read_control().extra == {}


def test_the_console_reads_what_the_worker_wrote(finished_run):
    status = finished_run.read_status()
    charts = RunCharts(finished_run.path)
    charts.update()
    assert status.state == "finished" and status.final.steps == 6 and failure_kind(status) is None
    assert charts.setup.total_steps == 6 and charts.setup.trainable_params > 0
    assert charts.end.tokens_seen == status.final.tokens_seen > 0
    assert [c.early_stopping["patience"] for c in charts.controls] == [4]
    assert charts.last_eval.patience_left == 4 - (0 if charts.last_eval.best_step == 6 else 1)
    assert charts.last_eval.best_value == status.best.value and charts.last_eval.monitor == status.best.metric
    loss = charts.frames["loss"]
    assert list(loss[loss.series == "loss"]["step"]) == [1, 2, 4, 6]
    line = status_line(status, charts.progress.seconds_per_step())
    assert (line.state, line.step, line.total_steps) == ("finished", 6, 6) and line.eta == "-"
    assert best_text(status).startswith(f"val_loss {status.best.value:.4g} at step {status.best.step} (ppl ")
    assert "patience left" in monitor_callbacks.es_caption(charts.last_eval)
    assert monitor_callbacks.early_stopping_settings(finished_run)["patience"] == 4
    row = runs_callbacks.table_row(list_runs(finished_run.path.parent)[0])
    assert row[:3] == [finished_run.run_id, "finished", "6/6"]
    cells = dict(zip(runs_callbacks.TABLE_HEADERS, row))
    assert cells["best val ppl"] == f"{status.final.best_val_ppl:.2f}"  # one format per column (issue 31 item 6)
    assert cells["tokens/s"] == f"{status.final.tokens_per_s:.0f}"
    if status.final.exact_match is not None:  # the best checkpoint's answers, x100
        assert cells["EM %"] == f"{100 * status.final.exact_match:.1f}" and cells["BLEU"] == f"{100 * status.final.bleu:.1f}"
