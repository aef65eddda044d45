"""app.tabs.form: widget values <-> Config, with every problem attached to the widget that shows it."""
from __future__ import annotations

from core.spec.config import Config

from app.tabs import form


def values(**changes) -> dict:
    base = form.to_values(Config())
    base.update({k.replace("__", "."): v for k, v in changes.items()})
    return base


def test_round_trip_of_the_defaults():
    config, errors = form.to_config(values(), "runs")
    assert errors == {}
    assert config.to_dict() == Config().to_dict()


def test_every_config_field_has_a_widget_except_the_hidden_ones():
    keys = form.widget_keys()
    assert "lora.target_names" in keys and "train.length" in keys
    assert "run.runs_dir" not in keys and "run.resume" not in keys
    assert "train.learning_rate" in keys and "early_stopping.patience" in keys


def test_field_errors_are_keyed_by_widget():
    config, errors = form.to_config(values(train__learning_rate=0, lora__rank=0), "runs")
    assert config is None
    assert "train.learning_rate" in errors and "(0, 1]" in errors["train.learning_rate"]
    assert "lora.rank" in errors


def test_cross_field_error_lands_on_its_field():
    config, errors = form.to_config(values(precision__amp_level="O1", precision__compute_dtype="bfloat16"), "runs")
    assert config is None and "CPU" in errors["precision.compute_dtype"]


def test_training_length_in_steps_or_epochs():
    config, _ = form.to_config(values(**{"train.length_unit": "epochs", "train.length": 2.5}), "runs")
    assert config.train.epochs == 2.5 and config.train.max_steps is None
    config, _ = form.to_config(values(**{"train.length_unit": "steps", "train.length": 40.0}), "runs")
    assert config.train.max_steps == 40 and config.train.epochs is None
    _, errors = form.to_config(values(**{"train.length_unit": "steps", "train.length": None}), "runs")
    assert "train.length" in errors


def test_lora_targets_from_boxes_or_regex():
    config, _ = form.to_config(values(**{"lora.target_names": ["q_proj", "v_proj"], "lora.target_regex": ""}), "runs")
    assert config.lora.target_modules == ["q_proj", "v_proj"]
    config, _ = form.to_config(values(**{"lora.target_regex": r".*\.(q|v)_proj"}), "runs")
    assert config.lora.target_modules == r".*\.(q|v)_proj"
    _, errors = form.to_config(values(**{"lora.target_names": [], "lora.target_regex": ""}), "runs")
    assert "lora.target_regex" in errors
    _, errors = form.to_config(values(**{"lora.target_regex": "(unclosed"}), "runs")
    assert "regular expression" in errors["lora.target_regex"]


def test_empty_number_widgets_mean_null_for_optional_fields():
    config, errors = form.to_config(values(train__max_grad_norm=0, eval__max_eval_samples=0, run__name=""), "runs")
    assert errors == {}
    assert config.train.max_grad_norm is None and config.eval.max_eval_samples is None and config.run.name is None


def test_integer_fields_accept_whole_floats_from_number_widgets():
    config, _ = form.to_config(values(train__micro_batch_size=4.0), "r")
    assert config.train.micro_batch_size == 4 and isinstance(config.train.micro_batch_size, int)
    assert config.run.runs_dir == "r"


def test_field_errors_read_as_the_form_shows_the_fields():
    """Issue 20 bug 9: "(got null)" for an empty field, and "train.length: train.max_steps: ..."
    (a second dotted key inside a widget's error)."""
    _, errors = form.to_config(values(train__learning_rate=None), "runs")
    assert errors["train.learning_rate"] == "must be a number in (0, 1] (the field is empty)"
    _, errors = form.to_config(values(**{"train.length_unit": "steps", "train.length": -3}), "runs")
    assert errors["train.length"] == "steps must be an integer > 0 (got -3)"
    _, errors = form.to_config(values(**{"train.length_unit": "epochs", "train.length": -1}), "runs")
    assert errors["train.length"] == "epochs must be a number > 0 (got -1)"
    _, errors = form.to_config(values(**{"train.length_unit": "steps", "train.length": None}), "runs")
    assert errors["train.length"] == "give the number of steps or epochs (the field is empty)"
    assert not any("null" in e or "train.max_steps" in e for e in errors.values())
