"""Issue 37: a run is more than SFT everywhere in the console. The Monitor heads a run with its own
objective's figure (reward accuracy for DPO, not a perplexity of the chosen answers) and hides the
charts that do not apply; the Runs table shows the figures each run has ('n/a (sft run)' where one
does not apply), compares like with like, tells runs apart in the overlay's legend, overlays reward
curves and refuses to put losses of different objectives on one axis; the config comparison shows
an SFT run's preference settings as n/a; the trackers say where they write."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from core.run.records import BestSoFar, FinalFigures
from core.spec.config import Config

from app.tabs import monitor_callbacks as mcb
from app.tabs import runs_callbacks as cb
from app.charts.figures import run_label, run_spec
from tests.app.test_metrics import evaluation, train
from tests.app.test_monitor_callbacks import make_run

SFT_ID, DPO_ID = "20261205-000001_demo-lora_tiny-demo_lora-r16_fp32_dp1", "20261205-000002_demo-dpo_tiny-demo_lora-r16_fp32_dp1"


def made_pair(console):
    """An SFT run and the DPO run forked from it, as the worker leaves them (the figures the issue saw)."""
    sft = make_run(console, SFT_ID, **{"run.name": "demo-lora", "data.train_file": "data/demo/train.jsonl",
                                       "data.validation_file": "data/demo/validation.jsonl"})
    sft.append_metrics([train(10, 11.0), evaluation(10, 2.1, 2.1), train(20, 2.0), evaluation(20, 2.06, 2.06)])
    sft.write_status(state="finished", step=20, best=BestSoFar(metric="val_loss", value=2.06, step=20, val_ppl=7.88),
                     final=FinalFigures(best_val_ppl=7.88, exact_match=0.395, bleu=0.2, rouge1=0.4, rouge2=0.1,
                                        rougeL=0.4, tokens_per_s=2800.0, peak_mem_mb=700.0))
    dpo = make_run(console, DPO_ID, **{"run.name": "demo-dpo", "train.objective": "dpo",
                                       "early_stopping.monitor": "reward_accuracy",
                                       "data.train_file": "data/demo-preference/train.jsonl",
                                       "data.validation_file": "data/demo-preference/validation.jsonl"})
    dpo.append_metrics([train(11, 0.69), evaluation(10, 0.709, 0.5, reward_accuracy=0.5, reward_margin=-0.02,
                                                     monitor="reward_accuracy"),
                        train(20, 0.6), evaluation(20, 0.65, 0.78, reward_accuracy=0.78, reward_margin=0.101,
                                                   monitor="reward_accuracy")])
    dpo.write_status(state="finished", step=20, parent_run=sft.run_id, parent_step=10,
                     best=BestSoFar(metric="reward_accuracy", value=0.78, step=20, val_ppl=48701.72, reward_accuracy=0.78),
                     final=FinalFigures(best_val_ppl=48701.72, monitor="reward_accuracy", reward_accuracy=0.78,
                                        tokens_per_s=600.0, peak_mem_mb=780.0))
    return sft, dpo


@pytest.mark.slow
def test_the_monitor_heads_a_dpo_run_with_reward_accuracy_and_hides_what_does_not_apply(console):
    sft, dpo = made_pair(console)
    tick = mcb.tick(mcb.MonitorSession(), dpo.run_id, console)
    assert "reward_accuracy 0.78 at step 20" in tick.status and "ppl" not in tick.status
    assert "48701" not in tick.status and "4.87e+04" not in tick.status
    zh = mcb.tick(mcb.MonitorSession(), dpo.run_id, console, lang="zh").status
    assert "reward_accuracy 0.78（第 20 步）" in zh and "at step" not in zh
    line = mcb.tick(mcb.MonitorSession(), sft.run_id, console).status
    assert "val_loss 2.06 at step 20 (ppl 7.88)" in line
    assert "val_loss 2.06（第 20 步，困惑度 7.88）" in mcb.tick(mcb.MonitorSession(), sft.run_id, console, lang="zh").status
    # a DPO run watching its loss: the headline beside it is reward accuracy, not a perplexity
    dpo.write_status(best=BestSoFar(metric="val_loss", value=0.65, step=20, val_ppl=48701.72, reward_accuracy=0.78))
    assert "val_loss 0.65 at step 20 (reward accuracy 78.0%)" in mcb.tick(mcb.MonitorSession(), dpo.run_id, console).status
    # the page hides the charts the objective does not draw (and the perplexity's log-scale box)
    pages = mcb.FeedPages()
    reply = mcb.feed(pages, {"token": "a" * 12, "run": dpo.run_id}, console)
    assert set(reply["hide"]) == {"val_ppl", "answers", "ppl-log-scale", "reward", "reward_functions", "kl", "completions"}  # and GRPO's
    reply = mcb.feed(pages, {"token": "b" * 12, "run": sft.run_id}, console)
    assert set(reply["hide"]) == {"reward_accuracy", "reward_margin", "logps", "reward", "reward_functions", "kl", "completions"}


def test_an_answers_chart_without_test_answers_says_why(console):
    run = make_run(console, **{"data.test_file": None})
    run.append_metrics([train(1, 3.0), evaluation(1, 2.0, 2.0)])
    charts = mcb.tick(mcb.MonitorSession(), run.run_id, console).charts
    assert "no answer scores: this run has no data.test_file" in charts["answers"]
    other = make_run(console, "20261129-101501_tiny_lora-r8_fp32_dp1")
    assert "waiting for the first points" in mcb.tick(mcb.MonitorSession(), other.run_id, console).charts["answers"]


def test_the_runs_table_shows_each_runs_own_figures(console):
    sft, dpo = made_pair(console)
    table = cb.runs_table(console)
    assert list(table.columns) == ["run", "state", "step", "best val ppl", "EM %", "BLEU", "ROUGE-1", "ROUGE-2",
                                   "ROUGE-L", "reward accuracy %", "reward margin", "tokens/s", "peak MB", "duration",
                                   "reason", "parent"]
    rows = {r["run"]: r for r in table.to_dict("records")}
    assert rows[dpo.run_id]["best val ppl"] == "n/a (dpo run)" and rows[dpo.run_id]["EM %"] == "n/a (dpo run)"
    assert rows[dpo.run_id]["reward accuracy %"] == "78.0" and rows[dpo.run_id]["reward margin"] == "0.101"
    assert rows[sft.run_id]["reward accuracy %"] == "n/a (sft run)" and rows[sft.run_id]["best val ppl"] == "7.88"
    assert rows[sft.run_id]["tokens/s"] == "2800" and rows[dpo.run_id]["tokens/s"] == "600"
    zh = cb.runs_table(console, lang="zh")
    assert "不适用（dpo 运行）" in zh.to_dict("records")[0].values() and "奖励准确率 %" in zh.columns
    assert cb.table_widths_of(table)[3] == f"{44 / 10:.1f}%"
    # an SFT-only folder keeps the SFT columns
    assert list(cb.runs_table(console).columns) != cb.TABLE_HEADERS
    assert cb.TABLE_HEADERS[3:11] == ["best val ppl", "EM %", "BLEU", "ROUGE-1", "ROUGE-2", "ROUGE-L", "tokens/s",
                                      "peak MB"]


@pytest.mark.slow
def test_deltas_only_between_comparable_runs(console):
    sft, dpo = made_pair(console)
    html = cb.config_diff_html(console, [sft.run_id, dpo.run_id])
    assert "+48693" not in html and "618230" not in html and 'data-figure="val_ppl"' not in html
    assert "not compared: no other selected run measures what a dpo run does" in html
    assert "not compared: no other selected run measures what a sft run does" in html
    # a second DPO run: compared with the first DPO run, its reward figures; the SFT run stays apart
    other = make_run(console, "20261205-000003_demo-dpo_tiny-demo_lora-r16_fp32_dp1",
                     **{"run.name": "demo-dpo", "train.objective": "dpo", "preference.beta": 0.5,
                        "early_stopping.monitor": "reward_accuracy"})
    other.append_metrics([evaluation(20, 0.6, 0.7, reward_accuracy=0.7, reward_margin=0.2, monitor="reward_accuracy")])
    other.write_status(state="finished", best=BestSoFar(metric="reward_accuracy", value=0.7, step=20, reward_accuracy=0.7),
                       final=FinalFigures(monitor="reward_accuracy", reward_accuracy=0.7, tokens_per_s=620.0,
                                          peak_mem_mb=780.0))
    deltas = cb.result_deltas(console, [sft.run_id, dpo.run_id, other.run_id])
    paired = [d for d in deltas if d.reference is not None]
    assert [(d.run_id, d.reference) for d in paired] == [(other.run_id, dpo.run_id)]
    assert [d.run_id for d in deltas if d.reference is None] == [sft.run_id]
    html = cb.config_diff_html(console, [sft.run_id, dpo.run_id, other.run_id])
    row = html.split(f"<code>{other.run_id}</code>", 1)[1].split("</tr>", 1)[0]
    cells = dict(re.findall(r'data-figure="(\w+)">([^<]+)<', row))
    assert cells["reward_accuracy"] == "-8.0 pts" and cells["reward_margin"] == "+0.099 (+98.0%)"
    assert cells["val_ppl"] == "n/a (dpo run)" and cells["tokens_per_s"] == "+20 (+3.3%)"
    assert "-8.0 个百分点" in cb.config_diff_html(console, [dpo.run_id, other.run_id], lang="zh")


def test_the_config_comparison_shows_preference_settings_as_not_applicable_to_sft(console):
    sft, dpo = made_pair(console)
    columns, rows, differing = cb.config_diff(console, [sft.run_id, dpo.run_id])
    by_key = {row[0]: row[1:] for row in rows}
    assert by_key["preference.beta"] == [cb.NOT_APPLICABLE, 0.1]
    assert by_key["preference.loss_type"] == [cb.NOT_APPLICABLE, "sigmoid"]
    assert by_key["preference.simpo_gamma"] == [cb.NOT_APPLICABLE, cb.NOT_APPLICABLE]  # dpo reads no simpo setting
    assert by_key["grpo.num_generations"] == [cb.NOT_APPLICABLE, cb.NOT_APPLICABLE]


@pytest.mark.slow
def test_overlay_labels_tell_runs_apart_and_losses_of_other_objectives_are_refused(console):
    sft, dpo = made_pair(console)
    labels = cb.short_labels(console, [sft.run_id, dpo.run_id])
    # name and objective first; no more settings than it takes to tell them apart (a legend cuts long names)
    assert labels == {sft.run_id: "name demo-lora · objective sft", dpo.run_id: "name demo-dpo · objective dpo"}
    other = make_run(console, "20261205-000003_demo-dpo_tiny-demo_lora-r16_fp32_dp1",
                     **{"run.name": "demo-dpo", "train.objective": "dpo", "lora.rank": 32})
    three = cb.short_labels(console, [sft.run_id, dpo.run_id, other.run_id])
    assert three[other.run_id] == "name demo-dpo · objective dpo · rank 32" and len(set(three.values())) == 3
    cache = cb.OverlayCache()
    refused = cb.overlay_html(cache, console, [sft.run_id, dpo.run_id], "val loss", None)
    assert "not drawn: the losses of sft / dpo runs measure different things" in refused and "not drawn on one axis" in refused
    assert 'class="mt-series' not in refused
    assert "不同的东西" in cb.overlay_html(cache, console, [sft.run_id, dpo.run_id], "train loss", None, lang="zh")
    reward = cb.overlay_html(cache, console, [sft.run_id, dpo.run_id], "reward accuracy", None)
    frame = cache.frame(console, [sft.run_id, dpo.run_id], "reward accuracy")
    assert frame[frame.run_id == dpo.run_id].value.tolist() == [0.5, 0.78] and frame[frame.run_id == sft.run_id].empty
    assert "not drawn" not in reward
    assert "reward accuracy" in cb.OVERLAY_METRICS and "reward margin" in cb.OVERLAY_METRICS


def test_paths_are_shortened_to_what_tells_them_apart():
    shown = cb._distinct_values(["data/demo/train.jsonl", "data/demo-preference/train.jsonl"])
    assert shown == {"data/demo/train.jsonl": "demo/train.jsonl",
                     "data/demo-preference/train.jsonl": "demo-preference/train.jsonl"}


def test_run_labels_follow_the_objective_and_the_language(console):
    sft, dpo = made_pair(console)
    final = dpo.read_status().final
    assert run_label(dpo.run_id, final, run_spec(dpo.path)) == f"{dpo.run_id} · reward accuracy 78.0% · 600 tok/s"
    assert run_label(dpo.run_id, final, run_spec(dpo.path), "zh") == f"{dpo.run_id} · 奖励准确率 78.0% · 600 token/秒"
    sft_final = sft.read_status().final
    assert run_label(sft.run_id, sft_final, run_spec(sft.path)) == f"{sft.run_id} · ppl 7.88 · EM 39.5% · 2800 tok/s"
    # the Runs selection's boxes are the ids alone: a label that changed as a run ended lost a tick
    assert cb.run_choices(console) == [(r, r) for r in (dpo.run_id, sft.run_id)]


def test_fork_points_are_said_in_the_pages_language(console):
    run = make_run(console)
    for step in (10, 20):
        (run.checkpoints_dir / f"step-{step}").mkdir(parents=True)
    (run.checkpoints_dir / "last").symlink_to("step-20")
    (run.checkpoints_dir / "best").symlink_to("step-10")
    assert cb.fork_choices(console, [run.run_id]) == [("step-20 (last)", 20), ("step-10 (best)", 10)]
    assert cb.fork_choices(console, [run.run_id], lang="zh") == [("step-20（最新）", 20), ("step-10（最佳）", 10)]


def test_the_monitor_says_where_the_trackers_write(console):
    run = make_run(console, **{"tracking": ["tensorboard", "mlflow", "swanlab"], "swanlab.mode": "offline",
                               "mlflow.tracking_uri": "http://127.0.0.1:5999"})
    status = mcb.tick(mcb.MonitorSession(), run.run_id, console).status
    folder = run.path / "tracking" / "tensorboard"
    assert f"TensorBoard writes to <code>{folder}</code>; see it with <code>tensorboard --logdir {folder}</code>" in status
    assert "MLflow writes to the server <code>http://127.0.0.1:5999</code>" in status
    assert f"swanlab watch {run.path / 'tracking' / 'swanlab'}" in status
    assert "TensorBoard 写入" in mcb.tick(mcb.MonitorSession(), run.run_id, console, lang="zh").status
    plain = make_run(console, "20261129-101502_tiny_lora-r8_fp32_dp1")
    assert "run-trackers" not in mcb.tick(mcb.MonitorSession(), plain.run_id, console).status
    local = Config().with_updates({"tracking": ["mlflow"], "run.runs_dir": str(console.runs_dir)})
    (line,) = mcb.tracker_lines(local, Path("runs/x"))
    assert "MLflow writes to <code>sqlite:///" in line and "mlflow ui --backend-store-uri sqlite:///" in line


def test_start_says_where_the_trackers_write(console, fake_launcher):
    from app.tabs import train_callbacks as tcb
    from tests.app.test_data_preview import form_values
    values = form_values(console)
    values["tracking"] = ["tensorboard"]
    outcome = tcb.start(values, console)
    assert outcome.run_id, outcome
    folder = console.runs_dir / outcome.run_id / "tracking" / "tensorboard"
    assert outcome.message.endswith(f"TensorBoard writes to `{folder}`; see it with `tensorboard --logdir {folder}`")
    assert outcome.message.in_lang("zh").endswith(f"TensorBoard 写入 `{folder}`；用 `tensorboard --logdir {folder}` 查看")
    assert "tensorboard --logdir runs/" in tcb.text("help.tracking", "en")


def test_the_objective_section_offers_the_newest_finished_sft_run_of_the_model_as_the_start(console):
    from app.tabs import train_callbacks as tcb
    from tests.app.test_data_preview import form_values
    values = form_values(console, train__objective="dpo", train__length=100)
    model = tcb.starter_config(console).model.path
    note, point = tcb.starting_point_note(console, values, None)
    assert point is None and note.startswith("dpo usually starts from an SFT checkpoint") and "no finished SFT run" in note
    assert tcb.starting_point_note(console, form_values(console), None) == ("", None)  # an SFT run: nothing to say
    older, newer = (make_run(console, f"20261205-00000{i}_demo-lora_tiny-demo_lora-r16_fp32_dp1",
                             **{"model.path": model, "lora.rank": 16}) for i in (1, 2))
    running = make_run(console, "20261205-000009_demo-lora_tiny-demo_lora-r16_fp32_dp1", **{"model.path": model})
    dpo = make_run(console, "20261205-000008_demo-dpo_tiny-demo_lora-r16_fp32_dp1",
                   **{"model.path": model, "train.objective": "dpo"})
    for run in (older, newer, running, dpo):
        (run.checkpoints_dir / "step-300").mkdir(parents=True)
        (run.checkpoints_dir / "best").symlink_to("step-300")
    for run in (older, newer, dpo):
        run.write_status(state="finished", final=FinalFigures(best_val_ppl=3.05))
    note, point = tcb.starting_point_note(console, values, None)
    assert point.run_id == newer.run_id and point.step == 300  # not the running one, not the DPO run
    assert f"The newest finished SFT run of this model is `{newer.run_id}`, best checkpoint step 300 (ppl 3.05)" in note
    zh, _ = tcb.starting_point_note(console, values, None, lang="zh")
    assert "通常从 SFT 检查点开始" in zh and "困惑度 3.05" in zh
    changed, reference = tcb.fork_starting_point(console, values, point.run_id)
    assert reference.is_fork and reference.run_id == newer.run_id and reference.step == 300
    assert reference.checkpoint == str(newer.checkpoints_dir / "step-300")
    assert changed["lora.rank"] == 16 and changed["train.length"] == 400  # 100 DPO steps after step 300
    assert "train.objective" not in changed  # the form stays a DPO run
    note, point = tcb.starting_point_note(console, values, reference)
    assert point is None and note == f"dpo starts from `{newer.run_id}`, step 300 (its model is the reference)."
    # the fork's own check accepts the form as the offer leaves it (the demo data are SFT data: set pairs)
    filled = {**values, **changed, "train.objective": "sft"}
    assert tcb.fork_errors(tcb.check_form(filled, console).config, reference) == {}


def test_start_names_every_problem_of_a_pair_file_at_once(console):
    """Issue 37 data item 4: a mixed record on line 8 and an empty answer on line 4 are both named
    where Start is blocked (the first one found named alone made a person fix them one by one)."""
    import json
    from app.tabs import train_callbacks as tcb
    from tests.app.test_data_preview import form_values
    good = {"instruction": "Who?", "chosen": "Tom", "rejected": "Ann"}
    records = [good] * 10
    records[3] = {**good, "chosen": ""}
    records[7] = {"instruction": "Who?", "output": "Tom"}
    path = console.settings.data_dirs[0] / "two-problems.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    valid = console.settings.data_dirs[0] / "pairs-val.jsonl"
    valid.write_text(json.dumps(good) + "\n")
    values = form_values(console, data__train_file=str(path), data__validation_file=str(valid), data__test_file="",
                         data__format="auto", train__objective="dpo")
    said = tcb.check_form(values, console).errors.get("data.train_file", "")
    assert said.startswith(f"2 problems in {path}: {path} line 4: field 'chosen': ") and f"{path} line 8: " in said
