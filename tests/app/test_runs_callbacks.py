"""app.runs_callbacks: the runs table, configs side by side, overlays and deletion."""
from __future__ import annotations

import os

from core.rundir import FinalFigures, finalize_name

from app import runs_callbacks as cb

from tests.app.test_metrics import evaluation, train
from tests.app.test_monitor_callbacks import make_run


def test_table_lists_every_run_with_its_figures(console):
    live = make_run(console, "20261129-000001_a_lora-r8_fp32_dp1")
    live.append_metrics(train(3, 2.0))
    live.write_status(step=3, total_steps=20)
    done = make_run(console, "20261129-000002_b_lora-r8_fp32_dp1")
    done.write_status(state="finished", final=FinalFigures(best_val_ppl=12.345, tokens_per_s=850.2, peak_mem_mb=730.0))
    table = cb.runs_table(console)
    assert list(table.columns) == cb.TABLE_HEADERS
    rows = {r["run"]: r for r in table.to_dict("records")}
    assert rows[live.run_id]["state"] == "running" and rows[live.run_id]["step"] == "3/20"
    assert rows[live.run_id]["tokens/s"] == "900"
    assert rows[done.run_id]["best val ppl"] == "12.35" and rows[done.run_id]["peak MB"] == "730"


def test_a_resumed_run_shows_no_figures_of_its_previous_attempt(console):
    run = make_run(console, "20261129-000003_c_lora-r8_fp32_dp1")
    run.append_metrics(train(9, 2.0, generation=1, tokens_per_s=700.0))  # past the step-5 checkpoint; then killed
    run.write_status(attempt=2, step=5)  # attempt 2 resumed from step 5 and has logged nothing yet
    row = {r["run"]: r for r in cb.runs_table(console).to_dict("records")}[run.run_id]
    assert row["step"] == "5/20" and row["tokens/s"] == "-" and row["peak MB"] == "-"
    run.append_metrics(train(6, 2.1, generation=2, tokens_per_s=800.0))
    row = {r["run"]: r for r in cb.runs_table(console).to_dict("records")}[run.run_id]
    assert row["tokens/s"] == "800"


def test_the_folder_key_changes_when_a_run_or_its_curves_change(console):
    empty = cb.folder_key(console)
    run = make_run(console, "20261129-000001_a_lora-r8_fp32_dp1")
    started = cb.folder_key(console)
    assert started != empty and cb.folder_key(console) == started  # nothing changed: the same key
    run.append_metrics(train(1, 3.0))
    grown = cb.folder_key(console)
    assert grown != started
    run.write_status(state="finished")
    assert cb.folder_key(console) != grown


def test_config_diff_highlights_differing_settings(console):
    a = make_run(console, "20261129-000001_a_lora-r8_fp32_dp1", **{"lora.rank": 8})
    b = make_run(console, "20261129-000002_b_lora-r8_fp32_dp1", **{"lora.rank": 16})
    columns, rows, differing = cb.config_diff(console, [a.run_id, b.run_id])
    assert columns == ["setting", a.run_id, b.run_id]
    keys = [r[0] for r in rows]
    assert {keys[i] for i in differing} == {"lora.rank"}
    html = cb.config_diff_html(console, [a.run_id, b.run_id], only_differences=True)
    assert html.count('class="mt-diff"') == 1 and "lora.rank" in html and "train.learning_rate" not in html


def test_overlay_has_one_series_per_run(console):
    a = make_run(console, "20261129-000001_a_lora-r8_fp32_dp1")
    b = make_run(console, "20261129-000002_b_lora-r8_fp32_dp1")
    a.append_metrics([evaluation(10, 2.0, 2.0), evaluation(20, 1.5, 1.5)])
    b.append_metrics(evaluation(10, 2.5, 2.5))
    cache = cb.OverlayCache()
    frame = cache.frame(console, [a.run_id, b.run_id], "val loss")
    assert frame.groupby("run").size().to_dict() == {a.run_id: 2, b.run_id: 1}
    b.append_metrics(evaluation(20, 2.2, 2.2))
    assert len(cache.frame(console, [a.run_id, b.run_id], "val loss")) == 4


def test_delete_refuses_a_running_run(console):
    run = make_run(console)
    ok, message = cb.delete_check(console, [run.run_id])
    assert not ok and "stop it before deleting" in message
    assert "stop it" in cb.delete(console, [run.run_id]) and run.path.is_dir()


def test_delete_removes_a_finished_run_and_its_old_name(console):
    run = make_run(console)
    run.write_status(state="finished")
    renamed = finalize_name(run, 10.0, 100)
    ok, question = cb.delete_check(console, [renamed.run_id])
    assert ok and "cannot be undone" in question
    assert "deleted" in cb.delete(console, [renamed.run_id])
    assert os.listdir(console.runs_dir) == []


def test_resume_needs_exactly_one_run(console):
    assert cb.resume(console, [])[0] is None
    assert "exactly one" in cb.resume(console, ["a", "b"])[1]
