"""The console's side of preference tuning: reward accuracy and margin charts from the eval records,
and Δreward accuracy / Δmargin in the Runs comparison (only where a run has them)."""
from __future__ import annotations

import re

from core.run.records import FinalFigures

from app.tabs import runs_callbacks as cb
from app.charts.metrics import RunCharts
from app.tabs.monitor_callbacks import hidden_parts
from tests.app.test_metrics import evaluation, train
from tests.app.test_monitor_callbacks import make_run

GRPO_CHARTS = ("reward", "reward_functions", "kl", "completions")  # grpo's (tests/app/test_grpo_console.py)


def test_reward_charts_and_deltas(console):
    parent = make_run(console, "20261202-000001_dpo_lora-r8_fp32_dp1", **{"train.objective": "dpo"})
    parent.append_metrics([evaluation(4, 0.6, 0.6, reward_accuracy=0.5, reward_margin=0.1)])
    parent.write_status(state="finished", final=FinalFigures(best_val_ppl=3.0, tokens_per_s=900.0, peak_mem_mb=700.0,
                                                             reward_accuracy=0.5))
    child = make_run(console, "20261202-000002_dpo_lora-r8_fp32_dp1", **{"train.objective": "dpo",
                                                                          "preference.beta": 0.5})
    child.append_metrics([train(1, 0.69), evaluation(0, 0.69, 0.69, reward_accuracy=0.0, reward_margin=0.0,
                                                     chosen_reward=0.0, rejected_reward=0.0),
                          evaluation(4, 0.5, 0.5, reward_accuracy=0.75, reward_margin=0.4, chosen_reward=0.1,
                                     rejected_reward=-0.3, chosen_logp=-7.5, rejected_logp=-11.25,
                                     monitor="reward_accuracy", best_value=0.75)])
    child.write_status(state="finished", parent_run=parent.run_id,
                       final=FinalFigures(best_val_ppl=3.1, tokens_per_s=800.0, peak_mem_mb=750.0,
                                          reward_accuracy=0.75))
    charts = RunCharts(child.path)
    charts.update()
    accuracy = charts.frames["reward_accuracy"]
    assert accuracy[accuracy.series == "reward accuracy"].value.tolist() == [0.0, 0.75]
    assert accuracy[accuracy.series == "best reward_accuracy"].value.tolist() == [0.75]
    margin = charts.frames["reward_margin"]
    assert margin[margin.series == "rejected reward"].value.tolist() == [0.0, -0.3]
    logps = charts.frames["logps"]
    assert logps[logps.series == "chosen log-prob"].value.tolist() == [-7.5]
    assert logps[logps.series == "rejected log-prob"].value.tolist() == [-11.25]
    # no perplexity nor answer scores for a preference objective: those charts (and the perplexity's log
    # scale) are hidden, an SFT run's reward charts likewise (issue 37)
    assert not charts.spec.has_perplexity and charts.frames["val_ppl"].empty and len(charts.frames["val_loss"]) == 5
    assert set(hidden_parts(charts.spec)) == {"val_ppl", "answers", "ppl-log-scale", *GRPO_CHARTS}
    html = cb.config_diff_html(console, [child.run_id, parent.run_id])
    cells = dict(re.findall(r'data-figure="(\w+)">([^<]+)<', html))
    assert cells["reward_accuracy"] == "+25.0 pts" and cells["reward_margin"] == "+0.300 (+300.0%)"
    assert "preference.beta 0.1 → 0.5" in html and "Δreward accuracy" in html
    # an SFT comparison has no reward columns
    sft = [make_run(console, f"20261202-00001{i}_sft_lora-r8_fp32_dp1") for i in range(2)]
    for run in sft:
        run.write_status(state="finished", final=FinalFigures(best_val_ppl=3.0))
    assert "reward_accuracy" not in cb.config_diff_html(console, [r.run_id for r in sft])
    sft[0].append_metrics([evaluation(2, 1.0, 1.0)])  # an SFT evaluation: perplexity drawn, no log-probs
    plain = RunCharts(sft[0].path)
    plain.update()
    assert plain.spec.has_perplexity and plain.frames["val_ppl"].series.tolist() == ["val ppl", "val ppl EMA"]
    assert plain.frames["logps"].empty
    assert set(hidden_parts(plain.spec)) == {"reward_accuracy", "reward_margin", "logps", *GRPO_CHARTS}


def _pair_rows(n: int, identical: int = 0) -> list[dict]:
    rows = [{"instruction": f"Which word is number {1 + i % 3}?", "input": "apple pear plum",
             "chosen": ["apple", "pear", "plum"][i % 3], "rejected": "kite " * (1 + i)} for i in range(n)]
    return rows + [{"instruction": "Same?", "input": "a", "chosen": "yes", "rejected": "yes"}] * identical


def test_train_tab_statistics_follow_the_objective(console):
    """Issue 26: with train.objective dpo the Train tab counts pairs, both sides' lengths and the
    identical pairs dropped (the worker's own figures), KTO its desirable and undesirable answers;
    with sft the same file shows the SFT view (chosen answers only, said); plain data under dpo blocks
    Start on the data field."""
    from core.data.preference import load_preference_splits
    from core.data.tokenizer import Tokenizer
    from tests.app.test_data_preview import form_values
    from tests.core.tiny_setup import write_jsonl
    from app.tabs import data_callbacks
    from app.tabs import train_callbacks as tcb
    data = console.settings.data_dirs[0]
    train = write_jsonl(data / "pairs-train.jsonl", _pair_rows(6, identical=1))
    val = write_jsonl(data / "pairs-val.jsonl", _pair_rows(2))
    values = form_values(console, data__train_file=str(train), data__validation_file=str(val), data__format="auto",
                         data__test_file="", train__objective="dpo")
    histogram, stats = data_callbacks.stats_view(values, console)
    settings = data_callbacks.data_settings(values, console)
    model = tcb.starter_config(console).model.path
    worker = load_preference_splits(settings, Tokenizer.from_dir(model), 0, "dpo").stats
    t = worker.train
    assert (t.pairs, t.identical_dropped) == (6, 1) and t.rejected_max_length > t.chosen_max_length
    assert histogram == ""
    assert (f"- **train**: 6 pairs; chosen {t.chosen_mean_length:g} tokens on average (longest {t.chosen_max_length}), "
            f"rejected {t.rejected_mean_length:g} (longest {t.rejected_max_length})") in stats
    assert "- **validation**: 2 pairs" in stats
    assert "- **identical pairs dropped** (no preference to learn): 1 train, 0 validation" in stats
    assert f"- **rows**: 2 per pair, {worker.seq_len} tokens each (dpo: " in stats
    assert "训练集" in data_callbacks.stats_view(values, console, "zh")[1]
    # the same file under sft: the SFT view, which says what it trains
    histogram, stats = data_callbacks.stats_view({**values, "train.objective": "sft"}, console)
    assert histogram and "chosen answers only" in stats and "pairs;" not in stats

    kto = write_jsonl(data / "kto.jsonl", [{"prompt": f"q{i}", "completion": f"answer {i}", "label": i % 3 != 0}
                                           for i in range(9)])
    kto_values = {**values, "data.train_file": str(kto), "data.validation_file": str(kto), "train.objective": "kto"}
    stats = data_callbacks.stats_view(kto_values, console)[1]
    assert "- **train**: 9 KTO answers: 6 desirable" in stats and ", 3 undesirable (" in stats
    assert "identical pairs" not in stats and "- **rows**: one per answer" in stats
    # KTO data under dpo, plain data under dpo: Start is blocked on the data field, naming the file
    errors = data_callbacks.data_problems(tcb.check_form({**kto_values, "train.objective": "dpo"}, console).config
                                          or tcb.starter_config(console).with_updates(
                                              {"data.train_file": str(kto), "train.objective": "dpo"}), console)
    assert "train.objective dpo needs preference pairs" in errors.get("data.train_file", ""), errors
    plain = form_values(console, train__objective="dpo")
    assert "holds plain conversations" in tcb.check_form(plain, console).errors.get("data.train_file", "")


def test_a_catalogue_preference_dataset_previews_and_counts_as_pairs(console):
    """A dataset_info.json entry with ranking: true: the preview shows its pairs side by side and
    the statistics count them under dpo (the worker reads it the same way, tests/core)."""
    from tests.app.test_data_preview import form_values
    from tests.core.tiny_setup import write_jsonl
    from app.tabs import data_callbacks
    folder = console.settings.data_dirs[0] / "catalog"
    folder.mkdir()
    write_jsonl(folder / "pairs.jsonl", [{"question": r["instruction"], "good": r["chosen"], "bad": r["rejected"]}
                                         for r in _pair_rows(5)])
    (folder / "dataset_info.json").write_text(
        '{"ranked": {"file_name": "pairs.jsonl", "ranking": true, '
        '"columns": {"prompt": "question", "chosen": "good", "rejected": "bad"}}}')
    values = form_values(console, data__train_file=str(folder), data__dataset="ranked", data__validation_file="",
                         data__validation_fraction=0.2, data__test_file="", data__format="auto", train__objective="dpo")
    preview = data_callbacks.preview_view(values, console)
    assert preview.count('class="mt-pair"') == 3 and "mt-rejected" in preview, preview[:500]
    stats = data_callbacks.stats_view(values, console)[1]
    assert "- **train**: 4 pairs" in stats and "- **validation**: 1 pair;" in stats and "1 pairs" not in stats


def test_the_dry_run_line_names_a_preference_runs_reference():
    from app.tabs.train_callbacks import DryRun, dry_run_html
    frozen = DryRun(812.0, 31.0, {"steps": 2, "objective": "dpo", "reference": "frozen_copy", "reference_mb": 94.25})
    shown = dry_run_html(frozen, None)
    assert "measured <b data-mb=\"812.0\">812 MB</b>" in shown
    assert "dpo: the frozen reference copy held and measured (94.2 MB of weights)" in shown
    lora = dry_run_html(DryRun(700.0, 20.0, {"steps": 2, "objective": "kto", "reference": "adapter_off",
                                             "reference_mb": 0.0}), None, lang="zh")
    assert "kto：参考模型为关闭适配器的基座" in lora
    assert "reference" not in dry_run_html(DryRun(700.0, 20.0, {"steps": 2}), None)  # SFT: nothing added
