"""The Train form as plain values: widget values <-> Config, and errors per widget.

The form has one widget per config field (`describe_fields`), except for a few that read better
as a pair of widgets: the LoRA targets are checkboxes plus a regex field, and the training length
is a unit (steps or epochs) plus a number. Everything here is plain data, so it is tested without
a browser; `train_tab` only turns these values into widgets.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

import yaml

from core.spec.config import Config, ConfigError, FieldInfo, describe_fields, joined
from core.spec.messages import Message

# config keys the console sets itself rather than the user
HIDDEN_KEYS = ("run.runs_dir", "run.resume", "run.fork_from")
# widget keys that stand for a config key in a different shape
TARGET_NAMES, TARGET_REGEX = "lora.target_names", "lora.target_regex"
LENGTH_UNIT, LENGTH = "train.length_unit", "train.length"
# "Where to run": this machine, or a Slurm partition (launch.backend and launch.partition in one choice)
WHERE = "launch.where"
LOCAL, SLURM, SLURM_PREFIX = "local", "slurm", "slurm:"   # its values: "local", "slurm:debug", "slurm" (default partition)
PAIRED = {"lora.target_modules": (TARGET_NAMES, TARGET_REGEX),
          "train.max_steps": (LENGTH_UNIT, LENGTH), "train.epochs": (LENGTH_UNIT, LENGTH),
          "launch.backend": (WHERE,), "launch.partition": (WHERE,)}
GENERAL = ""  # errors that belong to no widget


def fields() -> dict[str, FieldInfo]:
    """Config fields with a widget of their own, in file order."""
    return {k: f for k, f in describe_fields().items() if k not in HIDDEN_KEYS and k not in PAIRED}


def widget_keys() -> list[str]:
    """Every widget key of the form, in file order (pairs where their config key would be)."""
    keys: list[str] = []
    for key in describe_fields():
        if key in HIDDEN_KEYS:
            continue
        for widget in PAIRED.get(key, (key,)):
            if widget not in keys:
                keys.append(widget)
    return keys


def widget_for_error(config_key: str) -> str:
    """The widget that shows an error about `config_key` ('' when no widget does)."""
    if config_key in PAIRED:
        return PAIRED[config_key][-1]
    return config_key if config_key in fields() else GENERAL


def where_value(backend: str | None, partition: str | None) -> str:
    """The "Where to run" value of a config's launch section."""
    if backend != SLURM:
        return LOCAL
    return f"{SLURM_PREFIX}{partition}" if partition else SLURM


def parse_where(value: str | None) -> tuple[str, str | None]:
    """(launch.backend, launch.partition) of a "Where to run" value."""
    value = (value or LOCAL).strip()
    if value.startswith(SLURM_PREFIX):
        return SLURM, value[len(SLURM_PREFIX):] or None
    return value, None


def mapping_text(mapping: Mapping[str, str] | None) -> str:
    """A mapping field as its text box shows it: 'instruction: question, output: answer'."""
    return ", ".join(f"{k}: {v}" for k, v in (mapping or {}).items())


def yaml_text(items: Any) -> str:
    """A YAML field (grpo.rewards: a list of mappings) as its text box shows it: one item a line, each
    in flow style ('- {function: exact_match, column: answer, weight: 1.0}'); the config's coercer
    reads the text back."""
    if isinstance(items, str):
        return items
    if not isinstance(items, (list, tuple)):
        items = [] if items is None else [items]
    return "\n".join("- " + yaml.safe_dump(item, default_flow_style=True, sort_keys=False, allow_unicode=True,
                                            width=10_000).strip() for item in items)


def to_values(config: Config) -> dict[str, Any]:
    """The widget values that show `config`."""
    flat = config.to_flat()
    info = fields()
    values = {k: mapping_text(flat[k]) if info[k].kind == "mapping" else flat[k] for k in info}
    for key in info:  # a list in a text field (train.profile_steps [3, 5]) as its text: '3,5'
        if info[key].kind == "str" and isinstance(values[key], list):
            values[key] = ",".join(str(v) for v in values[key])
        elif info[key].kind == "list":  # sbatch options: one argv item each, separated by spaces
            values[key] = " ".join(str(v) for v in values[key] or [])
        elif info[key].kind == "yaml":  # grpo.rewards: a list of mappings, one a line
            values[key] = yaml_text(values[key])
    values[WHERE] = where_value(flat.get("launch.backend"), flat.get("launch.partition"))
    targets = flat["lora.target_modules"]
    values[TARGET_NAMES] = list(targets) if isinstance(targets, list) else []
    values[TARGET_REGEX] = targets if isinstance(targets, str) else ""
    epochs = flat["train.epochs"]
    values[LENGTH_UNIT] = "epochs" if epochs is not None and flat["train.max_steps"] is None else "steps"
    values[LENGTH] = epochs if values[LENGTH_UNIT] == "epochs" else flat["train.max_steps"]
    return values


def _number(value: Any, info: FieldInfo) -> Any:
    """A Number widget's value for the config: blank -> null, 3.0 -> 3 for integer fields."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if info.optional and value == 0:  # an empty Number widget sends 0; every optional field's 0 means off
        return None
    if info.kind == "int" and isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return value


def _text(value: Any, info: FieldInfo) -> Any:
    if value is None:
        return None if info.optional else ""
    text = str(value).strip()
    return None if (not text and info.optional) else text


def _convert(value: Any, info: FieldInfo) -> Any:
    if info.kind in ("int", "float"):
        return _number(value, info)
    if info.kind == "str":
        return _text(value, info)
    if info.kind == "yaml":  # the text as typed: the config's coercer parses it (and says where it is wrong)
        return value if isinstance(value, (list, dict)) else str(value or "")
    return value


def to_flat(values: Mapping[str, Any]) -> dict[str, Any]:
    """Widget values -> {dotted config key: value} (unchecked; Config does the checking)."""
    info = fields()
    flat = {k: _convert(values[k], info[k]) for k in info if k in values}
    regex = (values.get(TARGET_REGEX) or "").strip()
    flat["lora.target_modules"] = regex or list(values.get(TARGET_NAMES) or [])
    length = values.get(LENGTH)
    if isinstance(length, float) and length.is_integer() and values.get(LENGTH_UNIT) != "epochs":
        length = int(length)
    steps = values.get(LENGTH_UNIT) != "epochs"
    flat["train.max_steps"], flat["train.epochs"] = (length, None) if steps else (None, length)
    flat["launch.backend"], flat["launch.partition"] = parse_where(values.get(WHERE))
    nodes, per_node = flat.get("launch.nodes"), flat.get("launch.workers_per_node")
    if flat["launch.backend"] == SLURM and isinstance(nodes, int) and isinstance(per_node, int):
        flat["parallel.data_parallel"] = nodes * per_node  # a cluster run's workers are all its nodes'
    return flat


def to_config(values: Mapping[str, Any], runs_dir: str) -> tuple[Config | None, dict[str, str]]:
    """The config the form describes, or None and the errors keyed by widget key."""
    flat = {**to_flat(values), "run.runs_dir": runs_dir, "run.resume": None, "run.fork_from": None}
    data = Config().to_dict()
    for key, value in flat.items():
        section, _, name = key.partition(".")
        if name:
            data[section][name] = value
        else:
            data[section] = value
    try:
        return Config.from_dict(data), {}
    except ConfigError as err:
        return None, errors_by_widget(err.errors)


# what a paired widget calls the config key behind it, in its own error line
PAIRED_NAMES = {"train.max_steps": "steps", "train.epochs": "epochs", "lora.target_modules": "target modules",
                "launch.backend": "where to run", "launch.partition": "partition"}


def form_message(config_key: str, message: str) -> str:
    """A config error as the form's widget says it: an empty widget is "empty", not YAML's
    "null"; a paired widget names its part in words (steps, epochs), not a second dotted key.
    A core message (core.spec.messages) stays one, so the page says it in its language."""
    if config_key in ("train.max_steps", "train.epochs") and "set exactly one of" in message:
        return Message("problem.empty", reason=Message("field.give_length"))
    if isinstance(message, Message):
        if message.key == "problem.got" and message.params["value"] == "null":
            message = Message("problem.empty", reason=message.params["reason"])
        if config_key in PAIRED:
            return Message("field.named", widget=PAIRED_NAMES.get(config_key, config_key),
                           reason=_without_or_null(message))
        return message
    message = message.replace("(got null)", "(the field is empty)")
    if config_key in PAIRED:
        message = message.replace(", or null", "")
        return f"{PAIRED_NAMES.get(config_key, config_key)} {message}"
    return message


def errors_by_widget(errors: Mapping[str, str]) -> dict[str, str]:
    """ConfigError.errors (dotted config key -> message) regrouped by the widget that shows them."""
    out: dict[str, str] = {}
    for key, message in errors.items():
        widget = widget_for_error(key)
        text = form_message(key, message) if widget == key or not key or key in PAIRED else _at(key, message)
        out[widget] = joined(out[widget], text) if widget in out else text
    return out


def _at(key: str, message: str) -> str:
    return Message("problem.at_key", setting=key, reason=message) if isinstance(message, Message) else f"{key}: {message}"


def _without_or_null(message: Message) -> Message:
    """`message` without its rules' ", or null" (a paired widget is never null: it is empty)."""
    if message.key == "field.rule.or_null":
        return _without_or_null(message.params["reason"])
    return Message(message.key, **{name: _without_or_null(value) if isinstance(value, Message) else value
                                   for name, value in message.params.items()})
