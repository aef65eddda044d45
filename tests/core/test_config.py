"""core.spec.config: defaults, YAML inheritance, overrides, validation messages, shipped configs, CLI."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from core.spec.config import (
    Config, ConfigError, LoraSettings, TrainSettings, describe_fields, load_config,
)

ROOT = Path(__file__).resolve().parents[2]
CONFIG_FILES = sorted((ROOT / "configs").rglob("*.yaml"))


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def load_error(path: Path, overrides=()) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_config(path, overrides)
    return info.value


# ---- defaults and round trips ----------------------------------------------------------------

@pytest.mark.parametrize("comments", [False, True])
def test_defaults_round_trip_through_yaml(comments):
    config = Config()
    text = config.to_yaml(comments=comments)
    assert Config.from_dict(yaml.safe_load(text)) == config
    assert Config.from_dict(config.to_dict()) == config


def test_non_default_config_round_trips(tmp_path):
    config = Config().with_updates({"method": "full", "train.epochs": 2, "train.max_steps": None,
                                    "lora.target_modules": r"model\.layers\.\d+\.mlp\..*",
                                    "data.validation_file": None, "data.validation_fraction": 0.1})
    path = write(tmp_path / "c.yaml", config.to_yaml())
    assert load_config(path) == config
    assert load_config(path).train.epochs == 2.0


def test_defaults_yaml_lists_every_field_with_its_default():
    raw = yaml.safe_load((ROOT / "configs" / "defaults.yaml").read_text())
    flat = {f"{s}.{k}" for s, sec in raw.items() if isinstance(sec, dict) for k in sec}
    flat |= {s for s, sec in raw.items() if not isinstance(sec, dict)}
    assert flat == set(describe_fields())
    assert load_config(ROOT / "configs" / "defaults.yaml") == Config()


def test_defaults_yaml_has_a_comment_on_every_field():
    lines = (ROOT / "configs" / "defaults.yaml").read_text().splitlines()
    field_lines = [ln for ln in lines if ln.startswith("  ") or ln.startswith(("method:", "tracking:"))]
    assert len(field_lines) == len(describe_fields())
    assert all("  # " in ln for ln in field_lines)


def test_sections_coerce_on_construction():
    assert LoraSettings(alpha=16).alpha == 16.0 and isinstance(LoraSettings(alpha=16).alpha, float)
    assert TrainSettings(learning_rate="1e-4").learning_rate == pytest.approx(1e-4)
    with pytest.raises(ConfigError) as info:
        TrainSettings(learning_rate=0)
    assert list(info.value.errors) == ["train.learning_rate"]


def test_global_batch_size_multiplies_micro_accum_and_workers():
    config = Config().with_updates({"train.micro_batch_size": 3, "train.grad_accum_steps": 5,
                                    "parallel.data_parallel": 2})
    assert config.global_batch_size == 30
    assert Config().global_batch_size == 8


def test_lora_scaling_is_alpha_over_rank():
    assert LoraSettings(alpha=32, rank=8).scaling == 4.0  # target-name matching: test_lora


def test_describe_fields_gives_choices_and_rules():
    info = describe_fields()
    assert info["precision.amp_level"].choices == ("O0", "O1", "O2")
    assert info["train.learning_rate"].rule == "a number in (0, 1]"
    assert info["train.max_steps"].optional and info["train.max_steps"].kind == "int"
    assert info["lora.target_modules"].kind == "modules"
    assert Config().to_flat() == {k: i.default for k, i in info.items()}


# ---- shipped configs ---------------------------------------------------------------------------

def test_configs_folder_is_not_empty():
    names = {p.relative_to(ROOT / "configs").as_posix() for p in CONFIG_FILES}
    assert {"defaults.yaml", "lora_demo.yaml", "full_demo.yaml", "dp2_demo.yaml",
            "families/llama.yaml", "families/qwen2.yaml"} <= names


@pytest.mark.parametrize("path", CONFIG_FILES, ids=lambda p: p.relative_to(ROOT / "configs").as_posix())
def test_every_config_file_loads_and_validates(path):
    config = load_config(path)
    config.validate()
    assert Config.from_dict(yaml.safe_load(config.to_yaml())) == config


def test_demo_configs_say_what_they_are_for():
    assert load_config(ROOT / "configs" / "full_demo.yaml").method == "full"
    assert load_config(ROOT / "configs" / "full_demo.yaml").train.learning_rate < 1e-3
    dp2 = load_config(ROOT / "configs" / "dp2_demo.yaml")
    assert dp2.parallel.data_parallel == 2
    assert dp2.global_batch_size == load_config(ROOT / "configs" / "lora_demo.yaml").global_batch_size
    assert isinstance(load_config(ROOT / "configs" / "families" / "qwen2.yaml").lora.target_modules, str)


# ---- base inheritance ----------------------------------------------------------------------------

def test_base_deep_merges_dicts_and_replaces_lists(tmp_path):
    write(tmp_path / "base.yaml", """
        train: {max_steps: 100, learning_rate: 0.01}
        lora: {rank: 4, target_modules: [q_proj, k_proj, v_proj]}
    """)
    child = write(tmp_path / "child.yaml", """
        base: base.yaml
        train: {learning_rate: 0.001}
        lora: {target_modules: [o_proj]}
    """)
    config = load_config(child)
    assert config.train.max_steps == 100          # kept from base
    assert config.train.learning_rate == 0.001    # replaced by child
    assert config.lora.rank == 4
    assert config.lora.target_modules == ["o_proj"]  # list replaced, not appended


def test_base_path_is_relative_to_the_file_not_the_cwd(tmp_path, monkeypatch):
    write(tmp_path / "shared" / "base.yaml", "train: {max_steps: 77}\n")
    child = write(tmp_path / "runs" / "child.yaml", "base: ../shared/base.yaml\n")
    monkeypatch.chdir(tmp_path / "shared")
    assert load_config(child).train.max_steps == 77


def test_chain_of_two_bases(tmp_path):
    write(tmp_path / "a.yaml", "train: {max_steps: 10, warmup_steps: 2}\nlora: {rank: 2}\n")
    write(tmp_path / "b.yaml", "base: a.yaml\nlora: {rank: 3, alpha: 6}\n")
    c = write(tmp_path / "c.yaml", "base: b.yaml\nlora: {alpha: 9}\n")
    config = load_config(c)
    assert (config.train.max_steps, config.lora.rank, config.lora.alpha) == (10, 3, 9.0)


def test_list_of_bases_applies_in_order(tmp_path):
    write(tmp_path / "one.yaml", "train: {max_steps: 10, warmup_steps: 1}\n")
    write(tmp_path / "two.yaml", "train: {max_steps: 20}\n")
    both = write(tmp_path / "both.yaml", "base: [one.yaml, two.yaml]\n")
    config = load_config(both)
    assert (config.train.max_steps, config.train.warmup_steps) == (20, 1)


def test_empty_section_in_child_keeps_base_values(tmp_path):
    write(tmp_path / "base.yaml", "lora: {rank: 4}\n")
    child = write(tmp_path / "child.yaml", "base: base.yaml\nlora:\n  # nothing changed\n")
    assert load_config(child).lora.rank == 4


def test_base_cycle_is_reported_with_the_chain(tmp_path):
    write(tmp_path / "first.yaml", "base: second.yaml\n")
    write(tmp_path / "second.yaml", "base: first.yaml\n")
    err = load_error(tmp_path / "first.yaml")
    assert "cycle" in str(err)
    assert "first.yaml" in str(err) and "second.yaml" in str(err)
    assert "base" in err.errors


def test_self_base_is_a_cycle(tmp_path):
    err = load_error(write(tmp_path / "me.yaml", "base: me.yaml\n"))
    assert "cycle" in err.errors["base"]


def test_missing_base_names_the_file_that_asked_for_it(tmp_path):
    err = load_error(write(tmp_path / "child.yaml", "base: nowhere.yaml\n"))
    assert "nowhere.yaml" in str(err) and "child.yaml" in str(err) and "not found" in str(err)


def test_bad_value_in_base_names_the_base_file(tmp_path):
    write(tmp_path / "base.yaml", "train: {learning_rate: -1.0}\n")
    err = load_error(write(tmp_path / "child.yaml", "base: base.yaml\nlora: {rank: 4}\n"))
    assert "base.yaml" in str(err) and "child.yaml" not in str(err)


def test_yaml_syntax_error_names_file_and_line(tmp_path):
    err = load_error(write(tmp_path / "broken.yaml", "train:\n  max_steps: [1, 2\n"))
    assert "broken.yaml" in str(err) and "line" in str(err)


def test_missing_file_and_non_mapping_file(tmp_path):
    assert "missing.yaml" in str(load_error(tmp_path / "missing.yaml"))
    assert "mapping" in str(load_error(write(tmp_path / "list.yaml", "- 1\n- 2\n")))


# ---- overrides ---------------------------------------------------------------------------------

@pytest.fixture
def demo(tmp_path) -> Path:
    return write(tmp_path / "demo.yaml", "run: {name: demo}\n")


def test_overrides_parse_types(demo):
    config = load_config(demo, ["train.learning_rate=1e-4", "train.max_steps=50", "method=full",
                                "data.mask_prompt=false", "lora.alpha=8", "run.name=007"])
    assert config.train.learning_rate == pytest.approx(1e-4) and isinstance(config.train.learning_rate, float)
    assert config.train.max_steps == 50 and isinstance(config.train.max_steps, int)
    assert config.method == "full"
    assert config.data.mask_prompt is False
    assert config.lora.alpha == 8.0 and isinstance(config.lora.alpha, float)
    assert config.run.name == "007"  # a string field keeps the text, not the number 7


def test_override_null_and_comma_list_and_regex(demo):
    config = load_config(demo, ["data.validation_file=null", "data.validation_fraction=0.2",
                                "lora.target_modules=q_proj, v_proj", "train.max_grad_norm=~"])
    assert config.data.validation_file is None
    assert config.train.max_grad_norm is None
    assert config.lora.target_modules == ["q_proj", "v_proj"]
    regex = load_config(demo, [r"lora.target_modules=.*\.(q|v)_proj"]).lora.target_modules
    assert regex == r".*\.(q|v)_proj"
    braces = load_config(demo, [r"lora.target_modules=(q|v){1,2}_proj"]).lora.target_modules
    assert braces == "(q|v){1,2}_proj"  # a regex with a comma is not split


def test_override_unknown_key_names_it_and_suggests(demo):
    err = load_error(demo, ["train.learnig_rate=1e-4"])
    assert "train.learnig_rate" in err.errors
    assert "did you mean 'train.learning_rate'" in str(err)
    assert "overrides" in str(err)
    err = load_error(demo, ["trian.max_steps=5"])
    assert "did you mean 'train.max_steps'" in err.errors["trian.max_steps"]


def test_override_without_equals_is_an_error(demo):
    err = load_error(demo, ["train.max_steps"])
    assert "key=value" in str(err)


def test_override_errors_and_file_errors_are_reported_together(tmp_path):
    path = write(tmp_path / "x.yaml", "lora: {rank: 0}\n")
    err = load_error(path, ["train.learning_rate=2", "nope=1"])
    assert {"lora.rank", "train.learning_rate", "nope"} <= set(err.errors)


def test_with_updates_unknown_key():
    with pytest.raises(ConfigError) as info:
        Config().with_updates({"lora.rnak": 4})
    assert "did you mean 'lora.rank'" in info.value.errors["lora.rnak"]


# ---- bad values: the dotted key, the value and what is valid ------------------------------------

BAD_VALUES = [
    ("train.learning_rate", -1.0, "-1.0", "(0, 1]"),
    ("train.learning_rate", 3, "3", "(0, 1]"),
    ("train.max_steps", "abc", "'abc'", "an integer > 0"),
    ("train.micro_batch_size", 2.5, "2.5", "an integer >= 1"),
    ("train.epochs", -1, "-1", "> 0"),
    ("train.warmup_steps", -5, "-5", ">= 0"),
    ("train.log_every", 0, "0", ">= 1"),
    ("train.eval_every", 0, "0", ">= 1"),
    ("train.save_every", 0, "0", ">= 1"),
    ("train.schedule", "cosin", "'cosin'", "did you mean 'cosine'"),
    ("lora.rank", 0, "0", "> 0"),
    ("lora.rank", True, "true", "an integer"),
    ("lora.alpha", "many", "'many'", "a number > 0"),
    ("lora.dropout", 1.0, "1.0", "[0, 1)"),
    ("lora.target_modules", "(q|v", "'(q|v'", "regular expression"),
    ("lora.target_modules", [], "[]", "non-empty list"),
    ("lora.target_modules", [1, 2], "[1, 2]", "list of module names"),
    ("data.validation_fraction", 0.6, "0.6", "[0, 0.5]"),
    ("data.max_seq_len", 4, "4", ">= 8"),
    ("data.mask_prompt", "yes", "'yes'", "true or false"),
    ("data.format", "json", "'json'", "'auto', 'alpaca', 'sharegpt', 'chat', 'text'"),
    ("model.dtype", "fp16", "'fp16'", "'float32', 'float16', 'bfloat16'"),
    ("model.path", None, "null", "a string"),
    ("precision.amp_level", "O3", "'O3'", "'O0', 'O1', 'O2'"),
    ("precision.loss_scale", "auto", "'auto'", "'dynamic', 'static', 'none'"),
    ("recompute.policy", "some", "'some'", "'none', 'mlp', 'attention', 'full'"),
    ("recompute.layer_fraction", 0, "0", "(0, 1]"),
    ("parallel.data_parallel", 0, "0", ">= 1"),
    ("parallel.optimizer_shard", "true", "'true'", "true or false"),
    ("parallel.device", "tpu", "'tpu'", "'cpu', 'gpu', 'ascend'"),
    ("eval.ema_alpha", 0, "0", "(0, 1]"),
    ("eval.max_eval_samples", 0, "0", ">= 1, or null"),
    ("early_stopping.patience", 0, "0", ">= 1"),
    ("early_stopping.min_delta", -0.1, "-0.1", ">= 0"),
    ("early_stopping.monitor", "loss", "'loss'", "'val_loss', 'val_ppl'"),
    ("method", "adapter", "'adapter'", "'lora', 'full'"),
]


@pytest.mark.parametrize("key,value,shown,valid", BAD_VALUES, ids=[f"{k}={v!r}" for k, v, *_ in BAD_VALUES])
def test_bad_value_names_field_file_value_and_what_is_valid(tmp_path, key, value, shown, valid):
    section, _, name = key.rpartition(".")
    data = {section: {name: value}} if section else {key: value}
    path = write(tmp_path / "bad.yaml", yaml.safe_dump(data))
    err = load_error(path)
    assert list(err.errors) == [key]
    assert valid in err.errors[key]
    assert f"{key} = {shown} in " in str(err) and "bad.yaml" in str(err)


def test_all_field_errors_are_reported_together(tmp_path):
    path = write(tmp_path / "x.yaml", """
        train: {learning_rate: -1.0, max_steps: abc, learnig_rate: 0.1}
        lora: {dropout: 2}
        trian: {}
    """)
    err = load_error(path)
    assert set(err.errors) == {"train.learning_rate", "train.max_steps", "train.learnig_rate",
                               "lora.dropout", "trian"}
    assert len(str(err).splitlines()) == 5
    assert "did you mean 'learning_rate'" in err.errors["train.learnig_rate"]
    assert "did you mean 'train'" in err.errors["trian"]


def test_section_must_be_a_mapping():
    with pytest.raises(ConfigError) as info:
        Config.from_dict({"train": [1, 2]})
    assert "mapping" in info.value.errors["train"]


def test_numbers_coerce_but_not_to_bool():
    config = Config.from_dict({"lora": {"alpha": 32}, "train": {"max_steps": 100.0, "learning_rate": "3e-4"}})
    assert config.lora.alpha == 32.0 and config.train.max_steps == 100
    assert isinstance(config.train.max_steps, int)
    with pytest.raises(ConfigError):
        Config.from_dict({"train": {"max_steps": True}})


# ---- cross-field checks --------------------------------------------------------------------------

def updates_error(updates: dict) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        Config().with_updates(updates)
    return info.value


def test_bf16_compute_on_cpu_is_rejected_with_advice():
    err = updates_error({"precision.amp_level": "O2", "precision.compute_dtype": "bfloat16"})
    message = err.errors["precision.compute_dtype"]
    assert "CPU" in message and "float16" in message and "O0" in message and "gpu" in message.lower()
    # the same precision is fine on GPU, and bf16 is irrelevant at O0
    Config().with_updates({"precision.amp_level": "O2", "precision.compute_dtype": "bfloat16",
                           "parallel.device": "gpu"})
    Config().with_updates({"precision.compute_dtype": "bfloat16"})


@pytest.mark.parametrize("device", ["cpu", "gpu", "ascend"])
def test_optimizer_shard_is_refused_on_every_device_with_the_reason(device):
    """Issue 30, item 2: MindSpore's parallel optimizer shards only Lamb/AdamWeightDecay/AdaFactor and
    the engine trains with Adam; a setting that would only change the estimate is refused."""
    err = updates_error({"parallel.optimizer_shard": True, "parallel.data_parallel": 2, "parallel.device": device})
    message = err.errors["parallel.optimizer_shard"]
    assert "AdamWeightDecay" in message and "bias correction" in message and "set it to false" in message


def test_bf16_full_fine_tuning_is_refused_on_devices_with_the_mixed_precision_way():
    """Issue 30, item 7: bf16 parameters would go to nn.Adam; fp32 master weights + bf16 compute is the way."""
    for device in ("gpu", "ascend"):
        err = updates_error({"model.dtype": "bfloat16", "method": "full", "parallel.device": device})
        assert "master weights" in err.errors["model.dtype"] and "amp_level O2" in err.errors["model.dtype"]
        Config().with_updates({"model.dtype": "float32", "method": "full", "parallel.device": device,
                               "precision.amp_level": "O2", "precision.compute_dtype": "bfloat16"})
        Config().with_updates({"model.dtype": "bfloat16", "method": "lora", "parallel.device": device})


@pytest.mark.parametrize("max_steps,epochs", [(None, None), (100, 2.0)])
def test_exactly_one_of_max_steps_and_epochs(max_steps, epochs):
    err = updates_error({"train.max_steps": max_steps, "train.epochs": epochs})
    assert "exactly one" in err.errors["train.max_steps"]


def test_epochs_alone_is_fine():
    assert Config().with_updates({"train.max_steps": None, "train.epochs": 1.5}).train.epochs == 1.5


def test_warmup_must_be_shorter_than_max_steps():
    err = updates_error({"train.max_steps": 20, "train.warmup_steps": 20})
    assert "< train.max_steps (20)" in err.errors["train.warmup_steps"]


def test_validation_needs_a_file_or_a_fraction():
    err = updates_error({"data.validation_file": None})
    assert "validation_fraction" in err.errors["data.validation_file"]
    config = Config().with_updates({"data.validation_file": None, "data.validation_fraction": 0.1})
    assert config.data.validation_fraction == 0.1


def test_validate_catches_mutation_after_construction():
    config = Config()
    config.train.learning_rate = -1
    with pytest.raises(ConfigError) as info:
        config.validate()
    assert "train.learning_rate" in info.value.errors


def test_cross_field_error_names_the_file(tmp_path):
    path = write(tmp_path / "cpu_bf16.yaml", "precision: {amp_level: O1, compute_dtype: bfloat16}\n")
    err = load_error(path)
    assert "precision.compute_dtype = 'bfloat16' in" in str(err) and "cpu_bf16.yaml" in str(err)


# ---- CLI ---------------------------------------------------------------------------------------------

def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "core.config", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def test_cli_prints_resolved_yaml_for_a_good_file():
    result = run_cli("--config", "configs/lora_demo.yaml", "train.max_steps=40")
    assert result.returncode == 0, result.stderr
    printed = Config.from_dict(yaml.safe_load(result.stdout))
    assert printed == load_config(ROOT / "configs" / "lora_demo.yaml", ["train.max_steps=40"])
    assert printed.train.max_steps == 40


def test_cli_exits_2_with_the_message_for_a_bad_file(tmp_path):
    bad = write(tmp_path / "bad.yaml", "base: %s\ntrain: {learning_rate: -1.0}\n"
                % (ROOT / "configs" / "defaults.yaml"))
    result = run_cli("--config", str(bad))
    assert result.returncode == 2
    assert "train.learning_rate = -1.0 in" in result.stderr and "bad.yaml" in result.stderr
    assert "(0, 1]" in result.stderr
    assert result.stdout == ""


def test_cli_exits_2_for_a_bad_override():
    result = run_cli("--config", "configs/lora_demo.yaml", "train.learnig_rate=1")
    assert result.returncode == 2
    assert "did you mean 'train.learning_rate'" in result.stderr


def test_an_answer_score_monitor_needs_the_test_answers():
    assert Config.from_dict({"early_stopping": {"monitor": "bleu"}}).early_stopping.monitor == "bleu"
    with pytest.raises(ConfigError) as info:
        Config.from_dict({"early_stopping": {"monitor": "rougeL"}, "eval": {"downstream": False}})
    assert "needs eval.downstream true" in info.value.errors["early_stopping.monitor"]
    with pytest.raises(ConfigError) as info:
        Config.from_dict({"early_stopping": {"monitor": "exact_match"}, "data": {"test_file": None}})
    assert "early_stopping.monitor" in info.value.errors


def test_answer_score_names_agree_with_the_run_records():
    from core.run.records import GENERATION_FIELDS
    from core.spec.config import _ANSWER_SCORES
    assert _ANSWER_SCORES == GENERATION_FIELDS
    assert set(GENERATION_FIELDS) <= set(describe_fields()["early_stopping.monitor"].choices)


@pytest.mark.parametrize("monitor", ["val_ppl", "val_ppl_ema"])
def test_a_preference_objective_has_no_perplexity_to_watch(monitor):
    """Issue 26: exp of a DPO loss is no perplexity; early stopping watches the loss or reward accuracy."""
    with pytest.raises(ConfigError) as info:
        Config().with_updates({"train.objective": "dpo", "early_stopping.monitor": monitor})
    assert "train.objective dpo has no perplexity to watch" in info.value.errors["early_stopping.monitor"]
    for fine in ("reward_accuracy", "val_loss", "val_loss_ema"):
        assert Config().with_updates({"train.objective": "dpo", "early_stopping.monitor": fine}).train.objective == "dpo"
    assert Config().with_updates({"early_stopping.monitor": monitor}).early_stopping.monitor == monitor  # sft: fine
