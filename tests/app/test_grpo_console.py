"""GRPO in the console, below the browser: the Train form's grpo.rewards as YAML text (one reward a
line) and back, the monitor that follows the objective, the data preview of prompts with the columns the
rewards get, the Monitor's reward, reward-function and KL charts and its completions table drawn from a
real GRPO run's metrics, the Runs overlay of rewards, and Start refusing a column the data lacks, a
reward file outside --rewards-dir and, with logins, a file reward started by a user who is no admin."""
from __future__ import annotations

import dataclasses
import json
import re
import shutil

import pytest

from core.run.records import CompletionsEvent
from core.run.rundir import RunDir
from core.spec.config import Config, load_config

from app.tabs import form, monitor_callbacks as mon
from app.tabs import train_callbacks as cb
from app.auth.access import Viewer
from app.context import Console
from app.tabs.data_callbacks import preview_view, stats_view
from app.charts.metrics import RunCharts
from app.tabs.runs_callbacks import OVERLAY_METRICS
from tests.app.test_train_callbacks import form_values

REWARDS = [{"function": "exact_match", "column": "output"},
           {"function": "regex", "pattern": "^\\d+ <b>'x'$", "weight": 0.2}]


def grpo_values(console, rewards: str | None = None, **changes) -> dict:
    values = form_values(console, **{"train.objective": "grpo", "early_stopping.monitor": "val_reward",
                                     "grpo.max_new_tokens": 8, "grpo.max_prompt_len": 48, **changes})
    values["grpo.rewards"] = rewards if rewards is not None else form.yaml_text(REWARDS)
    return values


def test_the_form_shows_grpo_rewards_as_yaml_lines_and_reads_them_back(console):
    config = Config().with_updates({"train.objective": "grpo", "early_stopping.monitor": "val_reward",
                                    "grpo.rewards": REWARDS})
    values = form.to_values(config)
    lines = values["grpo.rewards"].splitlines()
    assert lines[0] == "- {function: exact_match, column: output, weight: 1.0}"
    assert len(lines) == 2 and lines[1].startswith("- {function: regex, pattern:")
    back, errors = form.to_config(values, "runs")
    assert errors == {} and back.grpo.rewards == [{**REWARDS[0], "weight": 1.0}, REWARDS[1]]
    # a text typed by hand: block style, a bare function name
    values["grpo.rewards"] = "- function: length\n  max_tokens: 4\n- math"
    typed, errors = form.to_config(values, "runs")
    assert errors == {} and [r["function"] for r in typed.grpo.rewards] == ["length", "math"]
    values["grpo.rewards"] = "- {function: exact_matsh}"
    _, errors = form.to_config(values, "runs")
    assert set(errors) == {"grpo.rewards"} and "exact_match" in str(errors["grpo.rewards"])
    # switching the objective: a monitor the objective does not log becomes its default
    assert cb.monitor_for("grpo", "val_loss") == "val_reward" and cb.monitor_for("dpo", "val_reward") == "reward_accuracy"
    assert cb.monitor_for("sft", "bleu") == "bleu" and cb.monitor_for("sft", "val_reward") == "val_loss"


def test_the_data_preview_shows_prompts_and_the_columns_the_rewards_get(console):
    values = grpo_values(console)
    shown = preview_view(values, console)
    assert "GRPO prompts: the first 3 of 32 records" in shown
    prompts = re.findall(r'<pre class="mt-prompt-text">(.*?)</pre>', shown, flags=re.S)
    assert len(prompts) == 3 and all("Which word is number" in p for p in prompts)
    columns = re.findall(r"<tr><td><code>(\w+)</code></td>", shown)
    assert columns == ["output", "answer"] * 3  # alpaca: the instruction is the prompt; output is also the answer
    assert "mt-trained" not in shown  # no SFT sample with trained tokens
    _, stats = stats_view(values, console)
    assert "**train**: 32 prompts of 32 records" in stats and "`output`" in stats
    assert "提示词" in preview_view(values, console, "zh")


def test_start_refuses_a_column_the_data_lacks_and_starts_with_one_it_has(console, fake_launcher):
    missing = cb.start(grpo_values(console, "- {function: exact_match, column: solution}"), console)
    assert missing.run_id is None and set(missing.errors) == {"grpo.rewards"}
    said = cb.problem_text(missing.errors["grpo.rewards"], "en")
    assert "'solution'" in said and "output" in said
    assert "'solution'" in cb.problem_text(missing.errors["grpo.rewards"], "zh")
    started = cb.start(grpo_values(console), console)
    assert started.run_id is not None, started.errors
    saved = load_config(RunDir(console.runs_dir / started.run_id).config_path)
    assert saved.train.objective == "grpo" and saved.grpo.rewards[1]["pattern"] == REWARDS[1]["pattern"]


def _reward_file(folder, name="reward"):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "score.py"
    path.write_text(f"def {name}(completions, **columns):\n    return [float(len(c)) for c in completions]\n")
    return path


def test_start_refuses_a_reward_file_outside_the_rewards_folders(console, workspace, fake_launcher, tmp_path):
    allowed = tmp_path / "rewards"
    inside, outside = _reward_file(allowed), _reward_file(tmp_path / "elsewhere")
    here = Console.create(dataclasses.replace(workspace, rewards_dirs=(allowed,)), create_run=fake_launcher.create_run,
                          launch=fake_launcher.launch, stop=fake_launcher.stop, reconcile=fake_launcher.reconcile)
    refused = cb.start(grpo_values(here, f"- {{function: file, path: {outside}}}"), here)
    assert refused.run_id is None and "outside the folders reward code may run from" in \
        cb.problem_text(refused.errors["grpo.rewards"], "en")
    assert str(allowed) in cb.problem_text(refused.errors["grpo.rewards"], "en")
    assert cb.start(grpo_values(here, f"- {{function: file, path: {inside}}}"), here).run_id is not None


def test_with_logins_only_an_admin_starts_a_file_reward(workspace, fake_launcher, tmp_path):
    allowed = tmp_path / "rewards"
    path = _reward_file(allowed)
    settings = dataclasses.replace(workspace, rewards_dirs=(allowed,), auth=(("alice", "pw"), ("bob", "pw")),
                                   admins=("alice",))
    here = Console.create(settings, create_run=fake_launcher.create_run, launch=fake_launcher.launch,
                          stop=fake_launcher.stop, reconcile=fake_launcher.reconcile)
    values = grpo_values(here, f"- {{function: file, path: {path}}}")
    bob = cb.start(values, here, owner="bob", viewer=Viewer("bob", False))
    assert bob.run_id is None and set(bob.errors) == {"grpo.rewards"}
    assert "only an administrator (--admin) may start such a run" in cb.problem_text(bob.errors["grpo.rewards"], "en")
    assert "只有管理员" in cb.problem_text(bob.errors["grpo.rewards"], "zh")
    # bob's run of a built-in reward starts; alice (an admin) starts the file's
    assert cb.start(grpo_values(here), here, owner="bob", viewer=Viewer("bob", False)).run_id is not None
    assert cb.start(values, here, owner="alice", viewer=Viewer("alice", True)).run_id is not None


def test_the_completions_table_escapes_and_lists_each_reward():
    event = CompletionsEvent(step=6, samples=[
        {"prompt": "<|im_start|>user\nWhat is 2+2?", "completion": "<script>alert(1)</script> 4",
         "rewards": {"exact_match": 1.0, "length": -0.25}, "total": 0.95},
        {"prompt": "x" * 500, "completion": "five", "rewards": {"exact_match": 0.0}, "total": 0.0}])
    shown = mon.completions_html(event, "run-1")
    assert "<script>" not in shown and "&lt;script&gt;alert(1)&lt;/script&gt; 4" in shown
    assert re.findall(r"<th>([^<]+)</th>", shown) == ["prompt", "completion", "exact_match", "length", "total"]
    rows = re.findall(r"<tr><td class='mt-prompt'.*?</tr>", shown, flags=re.S)
    assert len(rows) == 2
    assert re.findall(r"<td class='mt-num'>(?:<b>)?([^<]+)", rows[0]) == ["1", "-0.25", "0.95"]
    assert re.findall(r"<td class='mt-num'>(?:<b>)?([^<]+)", rows[1]) == ["0", "–", "0"]  # no length: a dash
    assert "…" + "x" * mon.PROMPT_SHOWN + "</pre>" in rows[1]  # a long prompt: its end
    assert "2 validation prompts at step 6" in shown and "第 6 步" in mon.completions_html(event, "run-1", "zh")
    assert "No completions yet" in mon.completions_html(None, "run-1")


# ---- a real GRPO run's metrics (core.train on the tiny workspace) ----------------------------------

GRPO = ("train.objective=grpo", "early_stopping.monitor=val_reward", "grpo.num_generations=4",
        "grpo.max_prompt_len=48", "grpo.max_new_tokens=8", "eval.max_eval_samples=4", "train.micro_batch_size=2",
        "train.max_steps=4", "train.eval_every=2", "train.save_every=4", "eval.downstream=false",
        "grpo.rewards=[{function: regex, pattern: '.*e.*'}, {function: length, soft_tokens: 2, weight: 0.5}]")


@pytest.fixture(scope="module")
def grpo_run(tmp_path_factory):
    from tests.core.test_train import run_cli
    from tests.core.tiny_setup import make_workspace
    run = run_cli(make_workspace(tmp_path_factory.mktemp("grpo-console")), *GRPO)
    assert run.read_status().state == "finished", run.read_status().reason
    return run


def _records(run: RunDir, kind: str) -> list[dict]:
    return [r for r in map(json.loads, run.metrics_path.read_text().splitlines()) if r["kind"] == kind]


def _series(frame, name: str) -> dict[int, float]:
    rows = frame[frame.series == name]
    return dict(zip(rows.step.tolist(), rows.value.tolist()))


@pytest.mark.slow  # one tiny GRPO run (~30 s on a loaded 2-core machine), shared by the module
def test_the_monitor_charts_a_real_grpo_run(grpo_run, console):
    train, evals = _records(grpo_run, "train"), _records(grpo_run, "eval")
    charts = RunCharts(grpo_run.path)
    charts.update()
    reward = charts.frames["reward"]
    assert _series(reward, "reward") == {r["step"]: r["reward"] for r in train}
    assert _series(reward, "val reward") == {r["step"]: r["val_reward"] for r in evals} and len(evals) == 3
    best = [r for r in evals if r["best_value"] is not None]
    assert _series(reward, "best val_reward") == {r["step"]: r["best_value"] for r in best}
    functions = charts.frames["reward_functions"]
    assert set(functions.series) == {"regex", "length", "val regex", "val length"}
    assert _series(functions, "val length") == {r["step"]: r["val_rewards"]["length"] for r in evals}
    assert _series(charts.frames["kl"], "clip ratio") == {r["step"]: r["clip_ratio"] for r in train}
    assert "kl" not in set(charts.frames["kl"].series)  # grpo.beta 0: no KL term logged
    # the table: the newest evaluation's samples, every reward function's column
    shown = [r for r in _records(grpo_run, "event") if r["event"] == "completions"][-1]
    table = mon.chart_svg(charts, "completions", run_id=grpo_run.run_id)
    assert f'data-step="{shown["step"]}"' in table and shown["step"] == 4
    assert len(re.findall(r"<tr><td class='mt-prompt'", table)) == len(shown["samples"]) == 4
    assert re.findall(r"<th>([^<]+)</th>", table)[2:] == ["regex", "length", "total"]
    # the objective's charts are shown, the others hidden; the page is sent them
    hidden = set(mon.hidden_parts(charts.spec))
    assert {"reward", "reward_functions", "kl", "completions"}.isdisjoint(hidden)
    assert {"val_ppl", "answers", "reward_accuracy", "ppl-log-scale"} <= hidden
    shutil.copytree(grpo_run.path, console.runs_dir / grpo_run.run_id)
    tick = mon.tick(mon.MonitorSession(), grpo_run.run_id, console)
    assert "mt-completions" in tick.charts["completions"] and "<svg" in tick.charts["reward"]
    # an SFT run hides them
    assert {"reward", "reward_functions", "kl", "completions"} <= set(mon.hidden_parts(RunCharts(
        _sft_run(console).path).spec))
    assert OVERLAY_METRICS["val reward"] == ("reward", "val reward")


def _sft_run(console) -> RunDir:
    run = RunDir.create(console.runs_dir, "20261205-000001_sft_lora-r8_fp32_dp1", Config().to_yaml())
    run.write_status(state="starting")
    return run
