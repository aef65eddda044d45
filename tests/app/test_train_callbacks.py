"""app.tabs.train_callbacks: the form gate, the preview of what will run, save/load, and Start."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import threading
import types

import core.run.launcher as launcher
from core.spec.config import Config, ConfigError

from app.tabs import form
from app.tabs import train_callbacks as cb

from tests import skips


def form_values(console, **changes) -> dict:
    values = form.to_values(cb.starter_config(console))
    values.update({k.replace("__", "."): v for k, v in changes.items()})
    return values


def test_starter_config_uses_what_this_console_has(console):
    config = cb.starter_config(console)
    assert config.model.path.endswith("tiny")
    assert config.data.train_file.endswith("demo/train.jsonl")
    assert config.data.validation_file.endswith("demo/validation.jsonl")
    assert config.run.runs_dir == console.runs_dir_for_config


def test_valid_form_passes_the_gate(console):
    check = cb.check_form(form_values(console), console)
    assert check.ok, check.errors


def test_model_outside_the_catalog_and_data_outside_the_roots_are_errors(console, tmp_path):
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_text("{}\n")
    check = cb.check_form(form_values(console, model__path="/nonexistent/model", data__test_file=str(outside)),
                          console)
    assert not check.ok
    assert "not a model folder" in check.errors["model.path"]
    assert "outside the folders" in check.errors["data.test_file"]


def test_settings_the_model_cannot_take_are_errors_on_their_fields(console):
    """Checked against the picked model's config.json before anything runs: a sequence length
    beyond its context, LoRA targets it does not have."""
    context = cb.catalog.find(console.models(), cb.starter_config(console).model.path).context_length
    check = cb.check_form(form_values(console, data__max_seq_len=context + 1), console)
    assert f"above the model's context of {context} tokens" in check.errors["data.max_seq_len"]
    check = cb.check_form(form_values(console, **{"lora.target_names": ["qkv_proj"], "lora.target_regex": ""}), console)
    assert "qkv_proj match no projection" in check.errors["lora.target_regex"]
    assert cb.check_form(form_values(console, data__max_seq_len=context), console).ok


def test_too_many_workers_is_an_error_on_the_slider(console):
    check = cb.check_form(form_values(console, parallel__data_parallel=10_000), console)
    assert "CPU cores" in check.errors["parallel.data_parallel"]


def test_command_preview_is_the_launchers_argv(console):
    config = cb.check_form(form_values(console), console).config
    expected = launcher.build_argv(console.runs_dir / launcher.run_id_for(config), 1)
    assert cb.command_argv(config, console) == expected
    assert cb.command_text(config, console) == launcher.command_preview(expected)
    dp2 = config.with_updates({"parallel.data_parallel": 2})
    assert cb.command_argv(dp2, console) == launcher.build_argv(
        console.runs_dir / launcher.run_id_for(dp2), 2, master_port=cb.PREVIEW_MASTER_PORT)


def test_preview_of_an_invalid_form_shows_errors_not_yaml(console):
    result = cb.preview(form_values(console, train__learning_rate=5), console)
    assert result.check.config is None and result.command == "-"
    assert "train.learning_rate" in result.errors and "not valid" in result.yaml_text


def test_preview_yaml_round_trips(console):
    result = cb.preview(form_values(console), console)
    assert Config.from_dict(__import__("yaml").safe_load(result.yaml_text)) == result.check.config


def test_the_workers_slider_shows_nodes_times_workers_per_node_on_a_slurm_partition(monkeypatch):
    from app.runs import devices
    monkeypatch.setattr(devices, "max_workers", lambda device: {"cpu": 2, "gpu": 8}[device])
    assert cb.workers_field("slurm:debug", 3, 2, 1, "cpu") == {"value": 6, "maximum": 6, "interactive": False}
    assert cb.workers_field("slurm:debug", 2, 4, 1, "gpu") == {"value": 8, "maximum": 8, "interactive": False}
    assert cb.workers_field("slurm:debug", None, 2, 5, "cpu")["value"] == 2  # nodes being typed: 1 node
    # back on this machine: the user's own value again, no more than the device holds
    assert cb.workers_field(form.LOCAL, 3, 2, 6, "cpu") == {"value": 2, "maximum": 2, "interactive": True}
    assert cb.workers_field(None, 3, 2, 1, "cpu") == {"value": 1, "maximum": 2, "interactive": True}
    # what the slider then shows is what the YAML holds
    values = {**form.to_values(Config()), form.WHERE: "slurm:debug", "launch.nodes": 3, "launch.workers_per_node": 2}
    assert form.to_flat(values)["parallel.data_parallel"] == cb.workers_field("slurm:debug", 3, 2, 1, "cpu")["value"]


def test_the_train_tab_wires_where_nodes_and_workers_per_node_to_the_workers_slider(console):
    """As the page builds it: a change of "Where to run", nodes or workers per node updates the slider."""
    import gradio as gr

    from app.tabs import train_tab
    from app.i18n import Labels

    labels = Labels("en")
    with gr.Blocks() as demo:
        labels.toggle = gr.Radio(choices=["en", "zh"], value="en")
        tab = train_tab.build(console, labels, cb.starter_config(console))
    slider = tab.fields["parallel.data_parallel"]
    sources = {tab.fields[k]._id: k for k in (form.WHERE, "launch.nodes", "launch.workers_per_node")}
    wired = {}
    for fn in demo.fns.values():
        if [o._id for o in fn.outputs] == [slider._id]:
            for target_id, _ in fn.targets:
                if target_id in sources:
                    wired[sources[target_id]] = fn
    assert sorted(wired) == sorted(sources.values())
    fn = wired["launch.nodes"]
    assert [i._id for i in fn.inputs] == [tab.fields[k]._id for k in (form.WHERE, "launch.nodes", "launch.workers_per_node",
                                                                      "parallel.data_parallel", "parallel.device")]
    update = fn.fn("slurm:debug", 2, 3, 1, "cpu")
    assert (update["value"], update["interactive"]) == (6, False)
    assert fn.fn(form.LOCAL, 2, 3, 1, "cpu")["interactive"] is True


def test_global_batch_is_the_product(console):
    text = cb.global_batch_text({"train.micro_batch_size": 4, "train.grad_accum_steps": 2,
                                 "parallel.data_parallel": 3}, "en")
    assert "24" in text and "micro 4" in text
    assert "-" in cb.global_batch_text({"train.micro_batch_size": None}, "en")


def test_multi_host_commands_one_per_node(console):
    config = cb.check_form(form_values(console, parallel__data_parallel=2), console).config
    text = cb.multi_host_text(config, 3, "10.0.0.1", 29500)
    assert text.count("msrun") == 3 and "--node_rank=2" in text and "--worker_num=6" in text


def test_memory_estimate_unavailable_without_core_memory(console, monkeypatch):
    import core
    monkeypatch.delattr(core, "memory", raising=False)
    monkeypatch.setitem(sys.modules, "core.spec.memory", None)  # import fails
    config = cb.check_form(form_values(console), console).config
    assert "estimate unavailable" in cb.memory_html(config, console)


@pytest.fixture
def fake_memory(monkeypatch) -> dict:
    """Replace core.spec.memory with a fake whose estimate_memory records the sequence length it got."""
    calls = {}

    def estimate_memory(config, model_args, seq_len, device_memory_mb=None, **device):  # soc, unknown_why
        calls["seq_len"] = seq_len
        return types.SimpleNamespace(weights_mb=1.0, gradients_mb=2.0, optimizer_mb=3.0, activations_mb=4.0,
                                     total_mb=10.0, device_memory_mb=device_memory_mb, fits=True, notes=["a note"])

    fake = types.SimpleNamespace(estimate_memory=estimate_memory, device_memory_mb=lambda device: 1000.0)
    monkeypatch.setitem(sys.modules, "core.spec.memory", fake)
    monkeypatch.setattr("core.spec.memory", fake, raising=False)
    return calls


def test_memory_estimate_table_from_core_memory(console, fake_memory):
    calls = fake_memory
    config = cb.check_form(form_values(console), console).config
    html = cb.memory_html(config, console)
    assert "optimizer state" in html and "10.0 MB" in html and "fits" in html and "a note" in html
    assert "framework runtime" not in html  # a field the estimate does not have is left out
    # the worker's batch length: the longest sample (train or validation) rounded up to 16, not max_seq_len
    from core.data.pipeline import load_splits
    from core.data.tokenizer import Tokenizer
    samples = load_splits(config.data, Tokenizer.from_dir(config.model.path), config.run.seed)
    longest = max(len(s) for s in samples.train + samples.validation)
    assert longest < config.data.max_seq_len
    assert calls["seq_len"] == -(-longest // 16) * 16
    assert f"sequence length {calls['seq_len']}" in html


def test_memory_estimate_falls_back_to_max_seq_len_when_data_is_unreadable(console, fake_memory):
    calls = fake_memory
    config = cb.check_form(form_values(console), console).config
    Path(config.data.train_file).write_text('{"instruction": "q", "output": "a"}\nnot json\n')
    html = cb.memory_html(config, console)
    assert calls["seq_len"] == config.data.max_seq_len
    assert "data not readable" in html and "line 2" in html


def test_memory_estimate_from_the_real_core_memory(console):
    config = cb.check_form(form_values(console), console).config
    html = cb.memory_html(config, console)
    assert "estimate unavailable" not in html and "total per worker" in html and "trainable parameters" in html


def test_save_and_load_yaml_round_trip(console):
    values = form_values(console, train__learning_rate=0.0005, lora__rank=4)
    path = cb.save_yaml(values, console)
    assert path.parent == console.settings.uploads_dir / "configs"
    loaded = cb.load_yaml(path, console)
    assert loaded["train.learning_rate"] == 0.0005 and loaded["lora.rank"] == 4


def test_an_invalid_config_never_launches(console, fake_launcher):
    outcome = cb.start(form_values(console, train__warmup_steps=10_000), console)
    assert outcome.run_id is None and "train.warmup_steps" in outcome.errors
    assert fake_launcher.launched == [] and not console.runs_dir.exists()


def test_start_launches_the_form_config(console, fake_launcher):
    outcome = cb.start(form_values(console, train__learning_rate=0.001), console)
    assert outcome.run_id and fake_launcher.launched[0].run_id == outcome.run_id
    written = fake_launcher.launched[0].config_path.read_text()
    assert "learning_rate: 0.001" in written


def test_double_start_launches_one_run(console, fake_launcher):
    values = form_values(console)
    outcomes = []
    threads = [threading.Thread(target=lambda: outcomes.append(cb.start(values, console))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(fake_launcher.launched) == 1
    assert {o.run_id for o in outcomes} == {fake_launcher.launched[0].run_id}
    assert sum("already started" in o.message for o in outcomes) == 3


def test_target_choices_follow_the_model(console):
    assert cb.target_choices(cb.starter_config(console).model.path, console)[0] == "q_proj"


def test_an_uploaded_config_may_only_inherit_shipped_configs(console, tmp_path):
    shipped = console.settings.configs_dir / "base.yaml"
    shipped.write_text("train:\n  learning_rate: 0.0007\n")
    upload = tmp_path / "mine.yaml"
    upload.write_text("base: base.yaml\nlora:\n  rank: 2\n")
    values = cb.load_yaml(upload, console)
    assert values["train.learning_rate"] == 0.0007 and values["lora.rank"] == 2
    (tmp_path / "secret.yaml").write_text("train: {learning_rate: 0.5}\n")
    upload.write_text(f"base: {tmp_path / 'secret.yaml'}\n")
    with pytest.raises(ConfigError, match="outside the folders"):
        cb.load_yaml(upload, console)
    upload.write_text("- not a mapping\n")
    with pytest.raises(ConfigError, match="mapping"):
        cb.load_yaml(upload, console)


def test_the_starters_run_name_does_not_follow_into_a_full_run(console):
    """Issue 20 bug 9: the shipped lora_demo.yaml's run.name "demo-lora" ended up in a full run's id."""
    (console.settings.configs_dir / cb.STARTER_CONFIG).write_text("run:\n  name: demo-lora\nmethod: lora\n")
    values = form_values(console, method="full")
    assert values["run.name"] in ("", None)
    config = cb.check_form(values, console).config
    assert "demo-lora" not in launcher.run_id_for(config) and "_full_" in launcher.run_id_for(config)


def test_the_trainable_share_reads_as_a_percentage(console):
    """Issue 20 bug 9: a full run showed "trainable parameters: … (1e+02%)"."""
    assert [cb.percent(*p) for p in ((3_200_000, 3_200_000), (52, 100), (52, 10_000), (31, 1_000_000))] == \
        ["100%", "52%", "0.52%", "0.0031%"]
    config = cb.check_form(form_values(console, method="full"), console).config
    html = cb.memory_html(config, console)
    assert "trainable parameters" in html and "(100%)" in html and "e+" not in html


def finished_parent(console, **changes):
    """A finished LoRA run made by the console, with checkpoints at steps 10 and 20."""
    import os

    from core.run.rundir import RunDir

    outcome = cb.start(form_values(console, **changes), console)
    run = RunDir(console.runs_dir / outcome.run_id)
    for step in (10, 20):
        (run.checkpoints_dir / f"step-{step}").mkdir()
    os.symlink("step-20", run.checkpoints_dir / "last")
    run.write_status(state="running")
    run.write_status(state="finished")
    return run


def test_new_run_from_this_one_shows_and_records_what_changed(console, fake_launcher):
    """Issue 20 item 13: the exact config in the form, the values that differ marked while editing,
    and the launch saying "lora.rank 8 → 16"."""
    parent = finished_parent(console, lora__rank=8, train__learning_rate=0.0003)
    values, reference = cb.new_from_run(console, parent.run_id)
    assert reference.run_id == parent.run_id and not reference.is_fork
    assert values["lora.rank"] == 8 and values["train.learning_rate"] == 0.0003
    check = cb.check_form(values, console)
    assert cb.form_changes(check.config, reference) == []
    values.update({"lora.rank": 16, "method": "lora"})
    found = cb.form_changes(cb.check_form(values, console).config, reference)
    assert [c.text() for c in found] == ["lora.rank 8 → 16"]
    assert cb.changed_widgets(found) == {"lora.rank": 8}
    assert "lora.rank 8 → 16" in cb.changes_html(found, reference)
    outcome = cb.start(values, console, reference=reference)
    assert outcome.run_id and outcome.run_id != parent.run_id and "lora.rank 8 → 16" in outcome.message
    status = (console.runs_dir / outcome.run_id / "status.json").read_text()
    assert f'"parent_run": "{parent.run_id}"' in status and '"parent_step": null' in status
    # switching LoRA off is one change, not one per lora.* setting as well
    full = cb.form_changes(cb.check_form({**values, "method": "full"}, console).config, reference)
    assert [c.key for c in full] == ["method"]


def test_a_fork_starts_from_the_checkpoint_and_keeps_what_its_weights_need(console, fake_launcher):
    """Issue 20 item 14: fork from step-N of a run: the new run's config carries run.fork_from and its
    status the parent (run, step); what the checkpoint's weights fix cannot change."""
    parent = finished_parent(console, lora__rank=8, train__length=20, train__warmup_steps=2)
    values, reference = cb.new_from_run(console, parent.run_id, step=20)
    assert reference.is_fork and reference.checkpoint == str(parent.checkpoint(20))
    assert values["train.length"] == 40  # the parent ended at 20: a fork counts on from there
    assert cb.fork_errors(cb.check_form({**values, "lora.rank": 16}, console).config, reference) == {
        "lora.rank": f"a fork keeps lora.rank of {parent.run_id} (8): its checkpoint holds weights of that shape"}
    assert "more than 20" in cb.start({**values, "train.length": 20}, console, reference=reference).errors["train.length"]
    outcome = cb.start({**values, "train.learning_rate": 0.0001}, console, reference=reference)
    assert outcome.run_id and "forked from" in outcome.message and "train.learning_rate" in outcome.message
    from core.spec.config import load_config
    from core.run.rundir import RunDir
    fork = RunDir(console.runs_dir / outcome.run_id)
    assert load_config(fork.config_path).run.fork_from == str(parent.checkpoint(20))
    status = fork.read_status()
    assert (status.parent_run, status.parent_step) == (parent.run_id, 20)
    with pytest.raises(ConfigError, match="no checkpoint step-15"):
        cb.new_from_run(console, parent.run_id, step=15)


def test_a_run_that_does_not_fit_is_refused_with_what_to_change_unless_confirmed(console, fake_launcher):
    """Issue 19 "bad input", in the console: the estimate and what to change, or a confirmed start."""
    huge = form_values(console, train__micro_batch_size=2_000_000, data__max_seq_len=512, method="full")
    outcome = cb.start(huge, console)
    assert outcome.run_id is None and outcome.needs_confirmation and fake_launcher.launched == []
    message = outcome.message
    assert "more than this machine's" in message and "MB per worker" in message
    for change in ("method full → lora", "train.micro_batch_size 2000000 → 1000000", "recompute.policy full",
                   "data.max_seq_len 512 → 256"):
        assert change in message, change
    confirmed = cb.start(huge, console, confirmed=True)
    assert confirmed.run_id and fake_launcher.launched[-1].run_id == confirmed.run_id
    assert cb.does_not_fit(cb.check_form(form_values(console), console).config, console) is None


def test_the_dry_run_reports_the_measured_peak_beside_the_estimate(console):
    """Issue 20 item 15, the console side (core.dry_run itself: tests/core/test_dry_run.py)."""
    calls = []

    def runner(argv, **kwargs):
        calls.append(argv)
        config = Config.from_dict(__import__("yaml").safe_load(Path(argv[-1]).read_text()))
        assert config.train.learning_rate == 0.0007  # the form's config, as Start would launch it
        return types.SimpleNamespace(returncode=0, stderr="", stdout='[step 0] setup\n{"peak_mem_mb": 812.5, "steps": 2, '
                                     '"step_time_s": [9.1, 0.4], "setup_s": 3.0, "seq_len": 64}\n')

    ticks = []
    measured, shown = cb.dry_run(form_values(console, train__learning_rate=0.0007), console, runner=runner,
                                 on_wait=ticks.append)
    assert calls[0][1:4] == ["-m", "core.dry_run", "--config"] and measured.peak_mem_mb == 812.5
    assert 'data-mb="812.5"' in shown and "2 training steps" in shown and "estimate" in shown and "% of the measured" in shown
    failed, shown = cb.dry_run(form_values(console), console, runner=lambda argv, **kw: types.SimpleNamespace(
        returncode=1, stdout="", stderr="Traceback ...\nerror: lora.target_modules: nope matches nothing\n"))
    assert failed.error == "lora.target_modules: nope matches nothing" and "dry run failed" in shown


@pytest.mark.parametrize("fixture, foreign", [
    ("qwen3-untied", "gate_up_proj"), ("glm4", "gate_proj"), ("mistral-window", "qkv_proj"), ("olmo2", "qkv_proj"),
    ("gemma2", "qkv_proj"), ("gemma3", "gate_up_proj"), ("gemma3-vision", "qkv_proj"), ("phi3", "q_proj"),
    ("phi4-mini", "gate_proj"), ("mixtral", "w1"), ("qwen3-moe-dense-layer", "qkv_proj")])
def test_a_family_checkpoint_passes_the_gate_and_its_limits_are_field_errors(fixture, foreign, workspace,
                                                                             fake_launcher, tmp_path):
    """A checkpoint of each family in the console's models folder, as transformers saves it: the
    form with it passes; its context (128) and a projection name of another family (Mixtral: its
    hub expert name w1, which LoRA names gate_up_proj) are errors on their fields, naming what this
    family has. A mixture of experts' router is no default target."""
    skips.module("torch")
    from dataclasses import replace
    from app.context import Console
    from tests.core.family_fixtures import make_any_model
    from tests.core.hf_fixtures import save_hf_model
    from tests.core.tiny_setup import make_tokenizer
    root = tmp_path / "family-models"
    folder = save_hf_model(make_any_model(fixture), root / fixture)
    make_tokenizer(folder, ["a b c d"] * 8)
    console = Console.create(replace(workspace, models_dirs=(root,)), create_run=fake_launcher.create_run,
                             launch=fake_launcher.launch, stop=fake_launcher.stop, reconcile=fake_launcher.reconcile)
    entry = cb.catalog.find(console.models(), str(folder))
    assert entry is not None and entry.loadable, entry and entry.reason
    assert "gate" not in entry.default_targets
    base = dict(model__path=str(folder), data__max_seq_len=128,
                **{"lora.target_names": list(entry.default_targets), "lora.target_regex": ""})
    check = cb.check_form(form_values(console, **base), console)
    assert check.ok, check.errors
    check = cb.check_form(form_values(console, **{**base, "data__max_seq_len": 129}), console)
    assert "above the model's context of 128 tokens" in check.errors["data.max_seq_len"]
    check = cb.check_form(form_values(console, **{**base, "lora.target_names": [foreign]}), console)
    assert f"{foreign} match no projection" in check.errors["lora.target_regex"]
    # the names it offers instead are the picker's boxes (a mixture of experts: its expert stacks)
    assert f"its projections are {', '.join(entry.projection_names)} (" in check.errors["lora.target_regex"]


def test_the_baseline_and_profiler_fields_are_in_the_train_tab_and_reach_the_runs_config(console, fake_launcher):
    """Issue 20: eval.baseline, eval.baseline_max_tokens and train.profile_steps were YAML/CLI only.
    Built as the page builds the tab; the values the widgets send go into the launched config.yaml."""
    import gradio as gr
    import yaml

    from app.tabs import train_tab
    from app.i18n import Labels, text

    labels = Labels("en")
    with gr.Blocks():
        labels.toggle = gr.Radio(choices=["en", "zh"], value="en")
        tab = train_tab.build(console, labels, cb.starter_config(console))
    keys = ("eval.baseline", "eval.baseline_max_tokens", "train.profile_steps")
    widgets = {k: tab.fields[k] for k in keys}
    for key, widget in widgets.items():
        assert widget.elem_id == "cfg-" + key.replace(".", "-").replace("_", "-")
        assert widget.info == text(f"help.{key}", "en") and text(f"help.{key}", "zh") != widget.info
        assert widget.label == text(f"field.{key}", "en") and text(f"field.{key}", "zh") != widget.label
    assert isinstance(widgets["eval.baseline"], gr.Checkbox) and widgets["eval.baseline"].value is True
    assert isinstance(widgets["eval.baseline_max_tokens"], gr.Number)
    data = {widget: widget.value for widget in tab.fields.values()}
    data[widgets["eval.baseline"]] = False
    data[widgets["eval.baseline_max_tokens"]] = 256.0  # a Number widget sends a float
    data[widgets["train.profile_steps"]] = "2,3"
    outcome = cb.start(tab.values(data), console)
    assert outcome.run_id, outcome.errors
    written = yaml.safe_load(fake_launcher.launched[-1].config_path.read_text())
    assert written["eval"]["baseline"] is False and written["eval"]["baseline_max_tokens"] == 256
    assert written["train"]["profile_steps"] == [2, 3]
    # and back: the run's config shown in the form again (New run from this one, Load a config)
    values = form.to_values(Config.from_dict(written))
    assert (values["eval.baseline"], values["eval.baseline_max_tokens"], values["train.profile_steps"]) == (False, 256, "2,3")


def test_a_tracker_not_installed_blocks_start_naming_the_setting(console, monkeypatch):
    import core.run.tracking as tracking
    from app.i18n import problem_text
    monkeypatch.setitem(tracking.PACKAGES, "swanlab", ("swanlab_missing_module", "swanlab"))
    config = cb.starter_config(console).with_updates({"tracking": ["tensorboard", "swanlab"]})
    errors = cb.console_errors(config, console, data=False)
    assert errors == {"tracking": "tracking: swanlab needs the swanlab package, which is not installed "
                                  "(pip install -r requirements-tracking.txt), or take swanlab out of tracking"}
    assert problem_text(errors["tracking"], "zh").startswith("tracking：swanlab 需要 swanlab 包，但尚未安装")
    assert cb.console_errors(config.with_updates({"tracking": ["tensorboard"]}), console, data=False) == {}


def test_every_file_of_a_train_file_list_must_lie_inside_the_roots(console, workspace, tmp_path):
    """data.train_file as a list (YAML or an override; the picker holds one dataset): each file is
    confined and checked, not only the first."""
    inside = str(workspace.data_dirs[0] / "demo" / "train.jsonl")
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_text("{}\n")
    assert cb._data_file_error([inside, inside], console) is None
    assert "outside the folders" in cb._data_file_error([inside, str(outside)], console)
    missing = str(workspace.data_dirs[0] / "demo" / "gone.jsonl")
    assert cb._data_file_error([inside, missing], console) == f"{missing}: file not found"


def test_one_start_checks_the_workers_once(console, fake_launcher, monkeypatch):
    """issue 38: the form's check on Start is the one; Jobs.start and the launch do not repeat it."""
    calls = []
    real = launcher.check_workers_available
    monkeypatch.setattr(launcher, "check_workers_available", lambda *a, **k: (calls.append(a), real(*a, **k))[1])
    outcome = cb.start(form_values(console, train__learning_rate=0.002), console)
    assert outcome.run_id is not None and len(fake_launcher.launched) == 1
    assert calls == [(1, "cpu")]
