"""app.charts.metrics: chart data appended from only the bytes the worker wrote since the last read."""
from __future__ import annotations

import os

import pytest

from core.run.records import EvalRecord, TrainRecord
from core.run.rundir import RunDir

from app.charts.metrics import RunCharts


@pytest.fixture
def run(tmp_path) -> RunDir:
    return RunDir.create(tmp_path / "runs", "r1", "method: lora\n")


def train(step, loss, **changes) -> TrainRecord:
    return TrainRecord(**{"step": step, "time": 100.0 + step, "loss": loss, "loss_ema": loss + 0.1, "lr": 0.001,
                          "grad_norm": 0.5, "loss_scale": 1.0, "tokens_per_s": 900.0, "peak_mem_mb": 700.0, **changes})


def evaluation(step, loss, best, **changes) -> EvalRecord:
    return EvalRecord(**{"step": step, "val_loss": loss, "val_ppl": 2.718 ** loss, "val_loss_ema": loss,
                         "val_ppl_ema": 2.718 ** loss, "best_value": best, "best_step": step, "monitor": "val_loss",
                         "patience_left": 3, **changes})


def test_update_reads_only_the_new_bytes(run):
    charts = RunCharts(run.path)
    run.append_metrics([train(1, 3.0), train(2, 2.5)])
    first_size = os.path.getsize(run.metrics_path)
    assert charts.update() == {"loss", "memory", "tokens_per_s", "lr", "grad_norm", "loss_scale"}
    assert charts.reader.bytes_read == first_size
    assert charts.update() == set() and charts.reader.bytes_read == first_size  # nothing new: nothing read
    run.append_metrics(train(3, 2.0))
    charts.update()
    assert charts.reader.bytes_read == os.path.getsize(run.metrics_path)  # the old bytes were not read again
    loss = charts.frames["loss"]
    assert list(loss[loss.series == "loss"]["value"]) == [3.0, 2.5, 2.0]
    assert list(loss[loss.series == "loss EMA"]["step"]) == [1, 2, 3]


def test_a_half_written_line_waits_for_its_end(run):
    charts = RunCharts(run.path)
    run.append_metrics(train(1, 3.0))
    with open(run.metrics_path, "a") as handle:
        handle.write('{"kind": "train", "step": 2, "loss": 2.')
    charts.update()
    assert len(charts.frames["loss"]) == 2  # step 1: loss and EMA
    with open(run.metrics_path, "a") as handle:
        handle.write('5}\n')
    charts.update()
    assert list(charts.frames["loss"]["step"]) == [1, 1, 2]


def test_evaluations_with_the_best_line_and_baseline(run):
    charts = RunCharts(run.path)
    run.append_metrics([evaluation(0, 5.0, None, base=True), evaluation(10, 4.0, 4.0),
                        evaluation(20, 4.5, 4.0, monitor="val_ppl", best_value=50.0)])
    charts.update()
    val = charts.frames["val_loss"]
    assert set(val.series) == {"val loss", "val loss EMA", "best val_loss"}
    assert list(val[val.series == "val loss"]["step"]) == [0, 10, 20]
    ppl = charts.frames["val_ppl"]
    assert list(ppl[ppl.series == "best val_ppl"]["value"]) == [50.0]
    assert charts.last_eval.step == 20


def test_non_finite_points_are_left_out_and_memory_is_per_worker(run):
    charts = RunCharts(run.path, workers=2)
    run.append_metrics([train(1, float("nan")), train(2, 2.0)])
    charts.update()
    loss = charts.frames["loss"]
    assert list(loss[loss.series == "loss"]["step"]) == [2]
    assert list(charts.frames["memory"]["value"]) == [350.0, 350.0]


def test_take_changed_hands_each_change_out_once(run):
    charts = RunCharts(run.path)
    run.append_metrics(train(1, 3.0))
    charts.update()
    assert "loss" in charts.take_changed() and charts.take_changed() == set()


def test_progress_times_steps_after_compilation(run):
    charts = RunCharts(run.path)
    run.append_metrics([train(1, 3.0, time=50.0), train(5, 2.0, time=100.0), train(10, 1.0, time=110.0)])
    charts.update()
    assert charts.progress.seconds_per_step() == pytest.approx(2.0)


def test_read_tail_and_last_record(tmp_path, run):
    run.log_path.write_text("".join(f"line {i}\n" for i in range(5000)))
    tail = run.log_tail(100)
    assert tail.endswith("line 4999\n") and tail.startswith("line ") and len(tail) <= 100
    assert RunDir(tmp_path / "missing").log_tail() == ""
    run.append_metrics([train(1, 3.0), evaluation(2, 2.0, 2.0), train(3, 1.5)])
    assert run.last_metric(TrainRecord).step == 3
    assert run.last_metric(EvalRecord).step == 2


def test_a_resume_keeps_the_latest_value_per_step(run):
    """Attempt 1 logs steps 1-6 and dies; attempt 2 resumes from the step-4 checkpoint and logs 5-8.
    Read in pieces that split the attempts, the charts hold each step once, with attempt 2's values."""
    from core.run.records import ResumeEvent, SetupEvent, current_records
    charts = RunCharts(run.path)
    first = [train(s, 10.0 - s, generation=1) for s in range(1, 7)] + [evaluation(4, 5.0, 5.0, generation=1)]
    run.append_metrics(first[:5])
    charts.update()
    run.append_metrics(first[5:])
    charts.update()
    assert charts.last_train.step == 6 and charts.progress.last == (6, 106.0)
    second = [SetupEvent(step=0, generation=2), ResumeEvent(step=4, generation=2)]
    second += [train(s, 20.0 - s, generation=2, time=200.0 + s) for s in range(5, 9)]
    run.append_metrics(second[:3])  # the resume and step 5 in one read
    assert charts.update() >= {"loss", "memory", "tokens_per_s", "lr", "grad_norm", "loss_scale"}
    loss = charts.frames["loss"][lambda f: f.series == "loss"]
    assert list(loss.step) == [1, 2, 3, 4, 5] and list(loss.value) == [9.0, 8.0, 7.0, 6.0, 15.0]
    assert charts.progress.first is None and charts.progress.last == (5, 205.0)  # attempt 2's timing only
    run.append_metrics(second[3:])
    charts.update()
    loss = charts.frames["loss"][lambda f: f.series == "loss"]
    assert list(loss.step) == [1, 2, 3, 4, 5, 6, 7, 8]
    assert list(loss.value) == [9.0, 8.0, 7.0, 6.0, 15.0, 14.0, 13.0, 12.0]
    assert list(charts.frames["val_loss"][lambda f: f.series == "val loss"].step) == [4]  # at the checkpoint: kept
    for name in ("memory", "lr", "tokens_per_s"):
        assert charts.frames[name].step.is_unique, name
    assert charts.generation == 2
    # the same rule over the whole file, and a fresh reader of it, agree
    records = current_records(run.metrics_reader().read_new())
    trains = [(r.step, r.loss, r.generation) for r in records if isinstance(r, TrainRecord)]
    assert trains == [(1, 9.0, 1), (2, 8.0, 1), (3, 7.0, 1), (4, 6.0, 1), (5, 15.0, 2), (6, 14.0, 2),
                      (7, 13.0, 2), (8, 12.0, 2)]
    fresh = RunCharts(run.path)
    fresh.update()
    assert fresh.frames["loss"].equals(charts.frames["loss"])


def test_a_step_logged_again_replaces_its_points(run):
    charts = RunCharts(run.path)
    run.append_metrics([train(1, 3.0), train(2, 2.5)])
    charts.update()
    run.append_metrics(train(2, 2.0, loss_ema=float("nan")))  # no EMA this time: the old EMA point goes too
    charts.update()
    loss = charts.frames["loss"]
    assert list(zip(loss.step, loss.series, loss.value)) == [(1, "loss", 3.0), (1, "loss EMA", 3.1), (2, "loss", 2.0)]


def test_a_forks_charts_continue_its_parents_curve(tmp_path):
    """Issue 20 item 14: a fork from step 4 of a run draws the parent's points up to step 4 (grey,
    dashed, '(parent)') and its own from there; the parent's later points and other users' runs
    stay out."""
    parent = RunDir.create(tmp_path / "runs", "parent", "method: lora\n")
    parent.append_metrics([train(s, 5.0 - s / 2) for s in (1, 2, 3, 4, 5, 6)] + [evaluation(4, 2.0, 2.0)])
    fork = RunDir.create(tmp_path / "runs", "fork", "method: lora\n")
    fork.write_status(parent_run="parent", parent_step=4)
    fork.append_metrics([evaluation(4, 2.0, 2.0, base=True), train(5, 2.4), train(6, 2.3)])
    charts = RunCharts(fork.path)
    charts.update()
    loss = charts.frames["loss"]
    assert list(loss[loss.series == "loss (parent)"]["step"]) == [1, 2, 3, 4]
    assert list(loss[loss.series == "loss"]["step"]) == [5, 6] and charts.parent == ("parent", 4)
    assert charts.last_train.step == 6 and charts.progress.train_lines == 2  # ETA from its own steps only
    from app.charts.svg_chart import PARENT_COLOR, line_chart
    svg = line_chart(loss, "loss")
    assert f'stroke="{PARENT_COLOR}" stroke-dasharray' in svg
    fork.write_status(owner="mallory")  # another user's parent is not drawn
    assert RunCharts(fork.path).parent is None


def test_shared_charts_hold_one_copy_per_run_and_a_bounded_number_of_runs(tmp_path):
    from app.charts.metrics import SharedCharts

    runs = [RunDir.create(tmp_path / "runs", f"r{n}", "method: lora\n") for n in range(4)]
    shared = SharedCharts(max_runs=2)
    first = shared.get(runs[0].path)
    assert shared.get(runs[0].path) is first
    os.symlink(runs[0].path.name, tmp_path / "runs" / "old-name")  # a run renamed by an older version
    assert shared.get(tmp_path / "runs" / "old-name") is first
    shared.get(runs[1].path), shared.get(runs[2].path), shared.get(runs[3].path)
    assert len(shared) == 2 and shared.get(runs[3].path) is not first
    assert shared.get(runs[0].path) is not first  # the least recently used run was let go


def test_a_chart_revision_moves_only_when_its_points_change(run):
    charts = RunCharts(run.path)
    assert set(charts.revision.values()) == {0}
    run.append_metrics([train(1, 3.0), train(2, 2.5)])
    charts.update()
    assert charts.revision["loss"] == 1 and charts.revision["val_loss"] == 0
    charts.update()
    assert charts.revision["loss"] == 1  # nothing new
    run.append_metrics([evaluation(2, 2.0, 2.0), train(3, 2.0)])
    charts.update()
    assert charts.revision["loss"] == 2 and charts.revision["val_loss"] == 1
    run.append_metrics(train(2, 2.4, generation=2))  # a later value of step 2 replaces the first
    charts.update()
    assert charts.revision["loss"] == 3


def test_answer_scores_chart_from_the_baseline_and_scored_evaluations(run):
    from core.run.records import BaselineEvent
    charts = RunCharts(run.path)
    run.append_metrics([BaselineEvent(step=0, val_loss=5.0, exact_match=0.0, bleu=0.0, rouge1=0.05, rouge2=0.0,
                                      rougeL=0.05),
                        evaluation(10, 4.0, 4.0),  # an evaluation that did not score the answers: no points
                        evaluation(20, 3.5, 0.4, monitor="rougeL", exact_match=0.375, bleu=0.125, rouge1=0.4,
                                   rouge2=0.0, rougeL=0.4)])
    assert "answers" in charts.update()
    frame = charts.frames["answers"]
    by_series = {s: dict(zip(g["step"], g["value"])) for s, g in frame.groupby("series")}
    assert by_series["EM"] == {0: 0.0, 20: 37.5} and by_series["BLEU"] == {0: 0.0, 20: 12.5}
    assert by_series["ROUGE-1"] == {0: 5.0, 20: 40.0} and by_series["ROUGE-L"] == {0: 5.0, 20: 40.0}
    assert by_series["best rougeL"] == {20: 40.0}  # a score monitor's best line is on this chart, x100
    assert "best rougeL" not in set(charts.frames["val_ppl"]["series"])


def test_a_fork_with_another_objective_draws_none_of_its_parents_curves(tmp_path):
    """Issue 26: SFT, then DPO from its checkpoint: the SFT run's language-model loss is not the DPO
    loss, so the fork's loss charts do not begin with it (a fork with the parent's objective does)."""
    from core.spec.config import Config

    runs = tmp_path / "runs"
    sft = RunDir.create(runs, "sft", Config().with_updates({"train.objective": "sft"}).to_yaml())
    sft.append_metrics([train(s, 5.0 - s / 2) for s in (1, 2, 3, 4)] + [evaluation(4, 2.0, 2.0)])
    for name, objective, drawn in (("dpo", "dpo", False), ("sft-again", "sft", True)):
        fork = RunDir.create(runs, name, Config().with_updates({"train.objective": objective}).to_yaml())
        fork.write_status(parent_run="sft", parent_step=4)
        charts = RunCharts(fork.path)
        assert (charts.parent is not None) == drawn, name
        loss = charts.frames["loss"]
        parent_steps = sorted(set(loss[loss["series"].str.endswith("(parent)")]["step"]))
        assert parent_steps == ([1, 2, 3, 4] if drawn else []), (name, parent_steps)
        parents = {(series.key, series.params["name"].key) for series in loss["series"] if series.endswith("(parent)")}
        assert parents == ({("series.parent", "series.loss"), ("series.parent", "series.loss EMA")} if drawn else set())


def test_every_series_the_charts_name_is_said_in_chinese_by_its_text(tmp_path, run):
    """The charts name each series by its series.* text's key (a Said: app.charts.metrics.series_name)
    and the legends say it in the page's language from that key; nothing reads a name back (a name
    that came without its key stays as it is). A fork's parent curves too."""
    import re

    from app.charts.metrics import series_name
    from app.i18n import Said
    from app.tabs.monitor_callbacks import series_text

    charts = RunCharts(run.path, workers=2)
    run.append_metrics([train(1, 2.0, peak_mem_ranks_mb=[700.0, 650.0]), train(2, 1.9),
                        evaluation(2, 4.0, 4.0), evaluation(4, 4.5, 4.0, monitor="val_ppl", best_value=50.0)])
    charts.update()
    names = list(dict.fromkeys(name for frame in charts.frames.values() if len(frame) for name in frame["series"]))
    assert names and all(isinstance(name, Said) and name.key.startswith("series.") for name in names), names
    names += [series_name("parent", name=name) for name in names]
    assert {"rank 0", "best val_loss", "best val_ppl (parent)", "val loss EMA (parent)"} <= set(names)
    for name in names:
        zh = series_text(name, "zh")
        left = [w for w in re.findall(r"[A-Za-z_]{2,}", zh) if w not in {"EMA", "MB", "ppl", "val_loss", "val_ppl",
                                                                          "token", "worker", "rank"}]
        assert left == [] and series_text(name, "en") == name, (name, zh)
    parent_best = series_name("parent", name=series_name("best", monitor="val_loss"))
    assert parent_best == "best val_loss (parent)" and series_text(parent_best, "zh") == "最佳 val_loss（父运行）"
    assert series_text(series_name("rank", n=1), "zh") == "rank 1"
    assert series_text(series_name("parent", name=series_name("loss")), "zh") == "损失（父运行）"
    assert series_text("something else", "zh") == "something else"
    assert series_text("best val_loss (parent)", "zh") == "best val_loss (parent)"  # without its key: as it is
    assert series_name("exact_match") == "exact_match" and not isinstance(series_name("exact_match"), Said)
