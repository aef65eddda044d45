"""app.tabs.runs_callbacks: the runs table, configs side by side, overlays and deletion."""
from __future__ import annotations

import os
import re

import time

from core.run.records import Attempt, FinalFigures
from core.run.rundir import RunDir

from app.tabs import runs_callbacks as cb

from tests.app.test_metrics import evaluation, train
from tests.app.test_monitor_callbacks import make_run, rename_like_older_versions


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
    finished = cb.folder_key(console)
    assert finished != grown
    # an evaluation's progress and results (runs/evals/<id>/) redraw the Evaluate panel too
    evaluation = RunDir.create(console.runs_dir / "evals", "eval_a_base_20261129-000002", "model: x\n")
    queued = cb.folder_key(console)
    assert queued != finished
    evaluation.write_status(state="starting")
    progressed = cb.folder_key(console)
    assert progressed != queued
    (evaluation.path / "results.json").write_text("{}")
    assert cb.folder_key(console) != progressed


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
    assert frame.groupby("run_id").size().to_dict() == {a.run_id: 2, b.run_id: 1}
    b.append_metrics(evaluation(20, 2.2, 2.2))
    assert len(cache.frame(console, [a.run_id, b.run_id], "val loss")) == 4


def test_delete_refuses_a_running_run(console):
    run = make_run(console)
    ok, message = cb.delete_check(console, [run.run_id])
    assert not ok and "stop it before deleting" in message
    assert "stop it" in cb.delete(console, [run.run_id]) and run.path.is_dir()


def test_delete_removes_a_finished_run_and_the_link_an_older_version_left(console):
    run = make_run(console)
    run.write_status(state="finished")
    renamed = rename_like_older_versions(run, "_ppl10.0_tps100")
    ok, question = cb.delete_check(console, [renamed.run_id])
    assert ok and "cannot be undone" in question
    assert "deleted" in cb.delete(console, [renamed.run_id])
    assert os.listdir(console.runs_dir) == []


def test_resume_needs_exactly_one_run(console):
    assert cb.resume(console, [])[0] is None
    assert "exactly one" in cb.resume(console, ["a", "b"])[1]


def test_lora_settings_of_a_full_run_are_not_a_difference(console):
    """Issue 20 bug 9: the config diff flagged lora.* as differing for a full run."""
    lora = make_run(console, "20261129-000001_a_lora-r8_fp32_dp1", **{"lora.rank": 8})
    full = make_run(console, "20261129-000002_b_full_fp32_dp1", method="full", **{"lora.rank": 16})
    columns, rows, differing = cb.config_diff(console, [lora.run_id, full.run_id])
    flagged = {rows[i][0] for i in differing}
    assert flagged == {"method"}, flagged
    by_key = {r[0]: r[1:] for r in rows}
    assert by_key["lora.rank"] == [8, "n/a"] and by_key["train.learning_rate"][0] == by_key["train.learning_rate"][1]
    other_lora = make_run(console, "20261129-000003_c_lora-r16_fp32_dp1", **{"lora.rank": 16})
    _, rows, differing = cb.config_diff(console, [lora.run_id, full.run_id, other_lora.run_id])
    assert {rows[i][0] for i in differing} == {"method", "lora.rank"}  # the two LoRA runs disagree


def test_overlay_legend_names_runs_by_what_sets_them_apart(console):
    """Issue 20 bug 8: short labels (the distinguishing settings), the full id on hover."""
    a = make_run(console, "20261129-000001_demo-lora_tiny-demo_lora-r8_fp32_dp1", **{"lora.rank": 8})
    b = make_run(console, "20261129-000002_demo-lora_tiny-demo_lora-r16_fp32_dp1",
                 **{"lora.rank": 16, "train.learning_rate": 0.0001})
    c = make_run(console, "20261129-000003_demo-lora_tiny-demo_lora-r8_fp32_dp1", **{"lora.rank": 8})
    labels = cb.short_labels(console, [a.run_id, b.run_id, c.run_id])
    assert labels[b.run_id] == "rank 16 · lr 0.0001"
    assert labels[a.run_id] == "rank 8 · lr 0.002 #1" and labels[c.run_id] == "rank 8 · lr 0.002 #2"
    for run in (a, b, c):
        run.append_metrics([evaluation(10, 2.0, 2.0)])
    svg = cb.overlay_svg(cb.OverlayCache().frame(console, [a.run_id, b.run_id, c.run_id], "val ppl"), "val ppl")
    for run in (a, b, c):
        assert f'data-series="{labels[run.run_id]}"><title>{run.run_id}</title>' in svg
    assert "val ppl (log)" in svg  # perplexity overlays default to a log axis (bug 7)
    assert "val ppl (log)" not in cb.overlay_svg(cb.OverlayCache().frame(console, [a.run_id], "val ppl"),
                                                 "val ppl", log_y=False)


def test_the_runs_duration_counts_every_attempt(console):
    """Issue 20 bug 9: the Runs tab's duration counted only the last attempt of a resumed run."""
    run = make_run(console)
    now = time.time()
    run.write_status(state="finished", started_at=now - 60, ended_at=now,
                     history=[Attempt(state="stopped", started_at=now - 500, ended_at=now - 380)])
    row = dict(zip(cb.TABLE_HEADERS, cb.table_row(next(s for s in console.jobs.runs()))))
    assert row["duration"] == "3m 00s"


def test_comparison_puts_result_deltas_beside_the_changed_settings(console):
    """Issue 20 item 13: ΔPPL, Δexact match, Δtokens/s and Δpeak memory beside what changed, against
    the run the other was made from."""
    parent = make_run(console, "20261129-000001_a_lora-r8_fp32_dp1", **{"lora.rank": 8})
    parent.write_status(state="finished", final=FinalFigures(best_val_ppl=3.2, exact_match=0.30, bleu=0.12,
                                                             rouge1=0.40, rouge2=0.20, rougeL=0.35,
                                                             tokens_per_s=2000.0, peak_mem_mb=800.0))
    child = make_run(console, "20261129-000002_b_lora-r16_fp32_dp1", **{"lora.rank": 16})
    child.write_status(state="finished", parent_run=parent.run_id,
                       final=FinalFigures(best_val_ppl=2.88, exact_match=0.375, bleu=0.2, rouge1=0.45, rouge2=0.18,
                                          rougeL=0.5, tokens_per_s=1800.0, peak_mem_mb=820.0))
    (delta,) = cb.result_deltas(console, [child.run_id, parent.run_id])
    assert delta.reference == parent.run_id and [c.text() for c in delta.changes] == ["lora.rank 8 → 16"]
    html = cb.config_diff_html(console, [child.run_id, parent.run_id])
    assert "lora.rank 8 → 16" in html
    cells = dict(re.findall(r'data-figure="(\w+)">([^<]+)<', html))
    assert cells == {"val_ppl": "-0.32 (-10.0%)", "exact_match": "+7.5 pts", "bleu": "+8.0 pts", "rouge1": "+5.0 pts",
                     "rouge2": "-2.0 pts", "rougeL": "+15.0 pts", "tokens_per_s": "-200 (-10.0%)",
                     "peak_mem_mb": "+20 (+2.5%)"}
    row = dict(zip(cb.TABLE_HEADERS, cb.table_row(next(s for s in console.jobs.runs() if s.run_id == child.run_id))))
    assert (row["EM %"], row["BLEU"], row["ROUGE-1"], row["ROUGE-2"], row["ROUGE-L"]) == ("37.5", "20.0", "45.0", "18.0", "50.0")


def test_one_format_per_column_in_the_table_and_the_deltas(console):
    """Issue 31 item 6: one table mixed "+486", "+594.3" and "557.5" in a column of whole numbers.
    Tokens/s and megabytes are whole everywhere, perplexity has two decimals, scores one."""
    parent = make_run(console, "20261129-000001_a_lora-r8_fp32_dp1", **{"lora.rank": 8})
    parent.write_status(state="finished", final=FinalFigures(best_val_ppl=12.0, tokens_per_s=557.5, peak_mem_mb=700.25,
                                                             bleu=0.2))
    children = []
    for n, (tps, mb, ppl) in enumerate(((1043.5, 1294.55, 3.5), (1151.8, 701.0, 123.456))):
        child = make_run(console, f"20261129-00000{n + 2}_b_lora-r16_fp32_dp1", **{"lora.rank": 16 + n})
        child.write_status(state="finished", parent_run=parent.run_id,
                           final=FinalFigures(best_val_ppl=ppl, tokens_per_s=tps, peak_mem_mb=mb, bleu=0.25))
        children.append(child.run_id)
    rows = {r["run"]: r for r in cb.runs_table(console).to_dict("records")}
    assert [rows[r]["tokens/s"] for r in [parent.run_id, *children]] == ["558", "1044", "1152"]
    assert [rows[r]["peak MB"] for r in [parent.run_id, *children]] == ["700", "1295", "701"]
    assert [rows[r]["best val ppl"] for r in [parent.run_id, *children]] == ["12.00", "3.50", "123.46"]
    assert [rows[r]["BLEU"] for r in [parent.run_id, *children]] == ["20.0", "25.0", "25.0"]
    html = cb.config_diff_html(console, [parent.run_id, *children])
    cells = re.findall(r'data-figure="(\w+)">([^<]+)<', html)
    column = lambda name: [v for k, v in cells if k == name]  # noqa: E731
    assert column("tokens_per_s") == ["+486 (+87.2%)", "+594 (+106.6%)"]
    assert column("peak_mem_mb") == ["+594 (+84.9%)", "+1 (+0.1%)"]
    assert column("val_ppl") == ["-8.50 (-70.8%)", "+111.46 (+928.8%)"]


def test_a_fork_names_its_checkpoint_in_the_comparison_and_its_parent_in_the_table(console):
    """Issue 31 item 4: the comparison's changed settings name the checkpoint a fork started from
    (`run.fork_from`), and the Runs table has a parent column (the run and the fork's step)."""
    parent = make_run(console, "20261129-000001_a_lora-r8_fp32_dp1")
    checkpoint = str(parent.checkpoints_dir / "step-10")
    fork = make_run(console, "20261129-000002_a_lora-r8_fp32_dp1",
                    **{"run.fork_from": checkpoint, "train.max_steps": 40})
    fork.write_status(parent_run=parent.run_id, parent_step=10)
    made = make_run(console, "20261129-000003_a_lora-r16_fp32_dp1", **{"lora.rank": 16})
    made.write_status(parent_run=parent.run_id)
    (delta,) = cb.result_deltas(console, [parent.run_id, fork.run_id])
    assert delta.reference == parent.run_id
    assert "run.fork_from null → " + checkpoint in [c.text() for c in delta.changes]
    rows = {r["run"]: r for r in cb.runs_table(console).to_dict("records")}
    assert rows[fork.run_id]["parent"] == f"{parent.run_id} · step 10"
    assert rows[made.run_id]["parent"] == parent.run_id and rows[parent.run_id]["parent"] == ""
    zh = cb.runs_table(console, lang="zh")
    assert f"{parent.run_id} · 第 10 步" in list(zh["来源运行"])
