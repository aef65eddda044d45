"""The console's side of preference tuning: reward accuracy and margin charts from the eval records,
and Δreward accuracy / Δmargin in the Runs comparison (only where a run has them)."""
from __future__ import annotations

import re

from core.run.rundir import FinalFigures

from app import runs_callbacks as cb
from app.metrics import RunCharts
from tests.app.test_metrics import evaluation, train
from tests.app.test_monitor_callbacks import make_run


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
                                     rejected_reward=-0.3, monitor="reward_accuracy", best_value=0.75)])
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
    html = cb.config_diff_html(console, [child.run_id, parent.run_id])
    cells = dict(re.findall(r'data-figure="(\w+)">([^<]+)<', html))
    assert cells["reward_accuracy"] == "+25.0 pts" and cells["reward_margin"] == "+0.300 (+300.0%)"
    assert "preference.beta 0.1 → 0.5" in html and "Δreward accuracy" in html
    # an SFT comparison has no reward columns
    sft = [make_run(console, f"20261202-00001{i}_sft_lora-r8_fp32_dp1") for i in range(2)]
    for run in sft:
        run.write_status(state="finished", final=FinalFigures(best_val_ppl=3.0))
    assert "reward_accuracy" not in cb.config_diff_html(console, [r.run_id for r in sft])
