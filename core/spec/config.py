"""A run's settings: one source of truth for the console form, the YAML files and the CLI.

Every section is a dataclass whose fields carry their default, valid range and a help line;
values are coerced and range-checked on construction, `Config.validate()` adds the checks that
span fields, and `load_config` resolves `base:` inheritance and `key=value` overrides. Every
problem raises `ConfigError`, whose `errors` maps each dotted field to its message.
Imports nothing else from `core` but the codec (stdlib and PyYAML only).
Its command line is core.config (`python -m core.config --config FILE [key=value ...]`).
"""
from __future__ import annotations

import copy
import difflib
import functools
import math
import re
import typing
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, Literal, Mapping, NamedTuple, Sequence

import yaml

from core.spec.codec import INVALID, choices, decode, encode, split_optional
from core.spec.messages import Message
from core.spec.objectives import spec_of

__all__ = [
    "ConfigError", "Config", "RunSettings", "ModelSettings", "LoraSettings", "DataSettings",
    "TrainSettings", "PrecisionSettings", "RecomputeSettings", "ParallelSettings",
    "EvalSettings", "EarlyStoppingSettings", "LaunchSettings", "MlflowSettings", "SwanlabSettings", "TRACKERS",
    "FieldInfo", "describe_fields", "load_config",
]

_NO_VALUE = object()  # a problem that is about a file or a field pair, not one value


class Problem(NamedTuple):
    """One thing wrong with a config: the dotted key, the bad value, why, and where it was set.
    `reason` is a core.spec.messages.Message where the catalogue has it (the console says it in the
    page's language by its id), else its English."""
    key: str
    value: Any
    reason: str
    source: str | None = None


class ConfigError(ValueError):
    """A config that cannot be used; lists every problem found, one per line.

    `errors` maps each dotted field to its message, so the console can show it next to the field;
    problems that belong to no field (an unreadable file) use the key "".
    """

    def __init__(self, problems: str | Sequence[Problem]):
        self.problems = [Problem("", _NO_VALUE, problems)] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(_format_problem(p) for p in self.problems))

    @property
    def errors(self) -> dict[str, str]:
        """{dotted key: why, with the value it has} (Messages where the reasons are)."""
        out: dict[str, str] = {}
        for p in self.problems:
            message = p.reason if p.value is _NO_VALUE else Message("problem.got", reason=p.reason,
                                                                         value=_show(p.value))
            out[p.key] = joined(out[p.key], message) if p.key in out else message
        return out

    @property
    def said(self) -> list[str]:
        """The lines of str(self), each a Message where its reason is one (what the console renders
        in the page's language; str(self) is their English)."""
        return [_problem_message(p) for p in self.problems]

    def located(self, origins: Mapping[str, str], default: str | None) -> ConfigError:
        """The same problems, each naming the file (or "overrides") that set its key."""
        return ConfigError([p if p.source else p._replace(source=_origin_of(p.key, origins, default))
                            for p in self.problems])


def _format_problem(p: Problem) -> str:
    return str(_problem_message(p))


def _problem_message(p: Problem) -> Message | str:
    """'key = value in file: reason', each part there when the problem has it."""
    if not p.key:
        return p.reason
    where = {"setting": p.key, "reason": p.reason}
    if p.value is not _NO_VALUE:
        where["value"] = _show(p.value)
    if p.source:
        where["source"] = p.source
    shape = ("problem.at_value" if "value" in where else "problem.at_key") + ("_in" if p.source else "")
    return Message(shape, **where)


def joined(first: str, second: str) -> str:
    """Two problems of one setting (or one form widget) as one: 'first; second', a Message when
    either is one."""
    return Message("problem.and", reason=first, note=second)


def _show(value: Any) -> str:
    """A value as a user would write it in YAML."""
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    return repr(value)


def _origin_of(key: str, origins: Mapping[str, str], default: str | None) -> str | None:
    if key in origins:
        return origins[key]
    inside = [src for k, src in origins.items() if k.startswith(key + ".")]
    parents = [origins[k] for k in _prefixes(key) if k in origins]
    return (inside or parents or [default])[0]


def _prefixes(key: str) -> list[str]:
    parts = key.split(".")
    return [".".join(parts[:i]) for i in range(len(parts) - 1, 0, -1)]


def _close(word: str, options: Sequence[str]) -> str | None:
    """The option close to `word` as a user would quote it ('x'), or None; compares case-insensitively."""
    lowered = {o.lower(): o for o in options}
    close = difflib.get_close_matches(str(word).lower(), list(lowered), n=1, cutoff=0.5)
    return repr(lowered[close[0]]) if close else None


def _suggesting(key: str, word: str, options: Sequence[str], **params: Any) -> Message:
    """Message `key`, or its `key`_suggest twin that asks 'did you mean ...?' when a close option exists."""
    close = _close(word, options)
    return Message(f"{key}_suggest", suggestion=close, **params) if close else Message(key, **params)


def _unknown_key(key: str, value: Any, valid: Sequence[str]) -> Problem:
    name = key.rsplit(".", 1)[-1]
    return Problem(key, value, _suggesting("field.unknown_key", name, valid, valid_names=", ".join(valid)))


# ---- field specs: default, valid range, help ------------------------------------------------

class _Invalid(Exception):
    """Raised by a custom coercer with the full reason."""


def _field(default: Any, help: str, *, gt=None, ge=None, lt=None, le=None, coerce=None, rule=None, kind=None,
           choices=()):
    """A dataclass field with its help line and valid range (bounds apply when not null);
    `kind` names the FieldInfo kind of a field with its own coercer (and `choices` its options)."""
    meta = {"help": help, "gt": gt, "ge": ge, "lt": lt, "le": le, "coerce": coerce, "rule": rule, "kind": kind,
            "choices": tuple(choices)}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: copy.deepcopy(default), metadata=meta)
    return field(default=default, metadata=meta)


def _bounded(kind: str, meta: Mapping) -> Message:
    """'an integer >= 8', 'a number in [0, 1)', 'an integer' (`kind`: integer or number) as a message."""
    lo = ("(", meta["gt"]) if meta["gt"] is not None else ("[", meta["ge"])
    hi = (")", meta["lt"]) if meta["lt"] is not None else ("]", meta["le"])
    if lo[1] is not None and hi[1] is not None:
        return Message(f"field.rule.{kind}_in", range=f"{lo[0]}{lo[1]:g}, {hi[1]:g}{hi[0]}")
    if lo[1] is not None:
        return Message(f"field.rule.{kind}_bound", op=">" if lo[0] == "(" else ">=", bound=f"{lo[1]:g}")
    if hi[1] is not None:
        return Message(f"field.rule.{kind}_bound", op="<" if hi[0] == ")" else "<=", bound=f"{hi[1]:g}")
    return Message(f"field.rule.{kind}")


def _in_bounds(x: float, meta: Mapping) -> bool:
    return ((meta["gt"] is None or x > meta["gt"]) and (meta["ge"] is None or x >= meta["ge"])
            and (meta["lt"] is None or x < meta["lt"]) and (meta["le"] is None or x <= meta["le"]))


def _describe(hint: Any, meta: Mapping) -> Message:
    """What a field accepts (a message): 'an integer >= 8', "one of 'O0', 'O1', 'O2'", ..."""
    inner, optional = split_optional(hint)
    if meta["rule"]:
        rule = meta["rule"]
    elif choices(inner):
        rule = Message("field.rule.one_of", options=", ".join(repr(c) for c in choices(inner)))
    elif inner in (int, float):
        rule = _bounded("integer" if inner is int else "number", meta)
    else:
        rule = Message({bool: "field.rule.bool", str: "field.rule.string"}[inner])
    return _or_null(rule) if optional else rule


def _or_null(rule: Message) -> Message:
    return Message("field.rule.or_null", reason=rule)


def _must_be(rule: Message) -> _Invalid:
    return _Invalid(Message("field.must_be", reason=rule))


def _coerce(value: Any, hint: Any, meta: Mapping) -> Any:
    """`value` converted to the field's type; raises _Invalid with the reason when it cannot be."""
    inner, optional = split_optional(hint)
    if value is None and optional:
        return None
    if meta["coerce"]:
        return meta["coerce"](value)
    if choices(inner):
        if value not in choices(inner):
            raise _Invalid(_suggesting("field.must_be", str(value), choices(inner), reason=_describe(hint, meta)))
        return value
    # core.spec.codec's text policy: yaml.safe_load reads 1e-4 (no dot) as a string, so numeric
    # strings are numbers; a float must be finite; a bool is never a number
    converted = decode(value, inner, text=True)
    if converted is INVALID:
        raise _must_be(_describe(hint, meta))
    if inner in (int, float) and not _in_bounds(converted, meta):
        raise _must_be(_describe(hint, meta))
    return converted


def _coerce_target_modules(value: Any) -> list[str] | str:
    """A list of module names, 'q_proj,v_proj' (split into a list), or one regular expression."""
    if isinstance(value, str) and "," in value:
        parts = [p.strip() for p in value.split(",")]
        if all(re.fullmatch(r"[\w.]+", p) for p in parts):  # a list of names, not a regex like a{1,2}
            return parts
    if isinstance(value, str):
        if not value.strip():
            raise _Invalid(Message("field.not_empty"))
        try:
            re.compile(value)
        except re.error as err:
            raise _Invalid(Message("field.bad_regex", re_says=str(err))) from None
        return value
    if isinstance(value, list) and value and all(isinstance(v, str) and v.strip() for v in value):
        return [v.strip() for v in value]
    raise _must_be(_TARGET_RULE)


_TARGET_RULE = Message("field.rule.target_modules")
_STEPS_RULE = _or_null(Message("field.rule.profile_steps"))


def _coerce_step_range(value: Any) -> list[int] | None:
    """[start, end] optimizer steps (1-based, inclusive), from a list or its text ('3,5', '[3, 5]');
    an empty text or null is none."""
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip().strip("[]")
        if not text:
            return None
        try:
            value = [int(part) for part in text.replace(" ", "").split(",")]
        except ValueError:
            raise _must_be(_STEPS_RULE) from None
    if (not isinstance(value, (list, tuple)) or len(value) != 2 or
            not all(isinstance(v, int) and not isinstance(v, bool) for v in value) or not 1 <= value[0] <= value[1]):
        raise _must_be(_STEPS_RULE)
    return [int(value[0]), int(value[1])]

# the experiment trackers a run can mirror its metrics to (core.run.tracking)
TRACKERS = ("tensorboard", "mlflow", "swanlab")
_TRACKING_RULE = Message("field.rule.trackers", trackers=", ".join(TRACKERS))


def _coerce_trackers(value: Any) -> list[str]:
    """A list of tracker names, or their text ('tensorboard, mlflow'); null or '' is none."""
    if value is None:
        return []
    if isinstance(value, str):
        value = [part.strip() for part in value.strip().strip("[]").split(",") if part.strip()]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise _must_be(_TRACKING_RULE)
    unknown = [v for v in value if v not in TRACKERS]
    if unknown:
        raise _Invalid(_suggesting("field.unknown_tracker", unknown[0], TRACKERS, name=repr(unknown[0]),
                                   reason=_TRACKING_RULE))
    if len(set(value)) != len(value):
        raise _Invalid(Message("field.tracker_twice", reason=_TRACKING_RULE))
    return [t for t in TRACKERS if t in value]  # one order, whatever the order given


# data.columns keys: a format's fields and ShareGPT's tags (core.data.formats.MAPPING_KEYS; config
# imports nothing else of core, so they are repeated here and a test keeps the two equal)
DATA_COLUMN_KEYS = ("instruction", "input", "output", "system", "history", "messages", "tools", "text",
                    "images", "audios", "videos",
                    "role_tag", "content_tag", "user_tag", "assistant_tag", "system_tag", "function_tag",
                    "observation_tag", "prompt", "completion", "chosen", "rejected", "label")
# LLaMA-Factory's dataset_info.json names for alpaca's fields (core.data.formats.COLUMN_SYNONYMS)
DATA_COLUMN_SYNONYMS = {"prompt": "instruction", "query": "input", "response": "output", "kto_tag": "label"}
_COLUMNS_RULE = Message("field.rule.columns")


def _mapping(value: Any, rule: Message) -> Mapping:
    """A mapping field's value: a mapping, or its YAML text ('a: 1, b: x', braces optional); an
    empty text or null is {}. Raises _Invalid with `rule` for anything else."""
    if value is None:
        return {}
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return {}
        try:
            value = yaml.safe_load(text if text.startswith("{") else "{" + text + "}")
        except yaml.YAMLError:
            raise _must_be(rule) from None
    if not isinstance(value, Mapping):
        raise _must_be(rule)
    return value


def _coerce_columns(value: Any) -> dict[str, str]:
    """{field: column}, from a mapping or its YAML text ('instruction: question, output: answer',
    braces optional); an empty text or null is no mapping."""
    value = _mapping(value, _COLUMNS_RULE)
    out: dict[str, str] = {}
    for key, column in value.items():
        key = DATA_COLUMN_SYNONYMS.get(key, key)
        if key not in DATA_COLUMN_KEYS:
            raise _Invalid(_suggesting("field.unknown_column_field", str(key), DATA_COLUMN_KEYS, name=repr(key),
                                       valid_names=", ".join(DATA_COLUMN_KEYS)))
        if isinstance(column, bool) or not isinstance(column, (str, int)) or not str(column).strip():
            raise _Invalid(Message("field.column_not_string", name=repr(key), column=repr(column)))
        out[str(key)] = str(column).strip()
    return out


_DATASET_RULE = _or_null(Message("field.rule.dataset"))


def _coerce_dataset_names(value: Any) -> list[str] | None:
    """Names of catalogue datasets, from a name, a list, or their text ('a, b'); empty is none."""
    if value is None:
        return None
    if isinstance(value, str):
        value = [part.strip() for part in value.strip().strip("[]").split(",")]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise _must_be(_DATASET_RULE)
    names = [v.strip() for v in value if v.strip()]
    return names or None


_DATA_FILES_RULE = Message("field.rule.data_files")


def _coerce_data_files(value: Any) -> str | list[str] | None:
    """One data file (or folder, folder#split), or a list of them, from a YAML list or its text
    ('[a.jsonl, b.jsonl]', 'a.jsonl, b.jsonl'); a list of one is that file."""
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("[") and text.endswith("]"):
            try:
                value = yaml.safe_load(text)
            except yaml.YAMLError:
                raise _must_be(_DATA_FILES_RULE) from None
        elif "," in text:
            value = [part.strip() for part in text.split(",")]
    if isinstance(value, (list, tuple)):
        if not value or not all(isinstance(v, str) and v.strip() for v in value):
            raise _Invalid(Message("field.data_file_items", reason=_DATA_FILES_RULE))
        names = [v.strip() for v in value]
        return names[0] if len(names) == 1 else names
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise _must_be(_DATA_FILES_RULE)
    return str(value).strip()


# ---- sections -----------------------------------------------------------------------------

class _Section:
    """One `key:` block of the config; coerces and range-checks its fields on construction."""
    KEY: ClassVar[str] = ""

    def __post_init__(self) -> None:
        problems = _check_fields(self, self.KEY)
        if problems:
            raise ConfigError(problems)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None):
        """Build from a mapping; unknown keys and bad values are reported together."""
        data = dict(data or {})
        names = [f.name for f in fields(cls)]
        problems = [_unknown_key(f"{cls.KEY}.{k}", v, names) for k, v in data.items() if k not in names]
        try:
            section = cls(**{k: v for k, v in data.items() if k in names})
        except ConfigError as err:
            problems += err.problems
        if problems:
            raise ConfigError(problems)
        return section

    def to_dict(self) -> dict[str, Any]:
        return {f.name: encode(getattr(self, f.name)) for f in fields(self)}


def _check_fields(obj: Any, prefix: str) -> list[Problem]:
    """Coerce each plain field of a dataclass in place; return the problems found."""
    hints, problems = _hints(type(obj)), []
    for f in fields(obj):
        if "help" not in f.metadata:
            continue  # a nested section, checked by its own class
        value = getattr(obj, f.name)
        try:
            setattr(obj, f.name, _coerce(value, hints[f.name], f.metadata))
        except _Invalid as err:
            problems.append(Problem(f"{prefix}.{f.name}".lstrip("."), value, err.args[0]))
    return problems


@dataclass
class RunSettings(_Section):
    """Where the run lives and how it starts."""
    KEY: ClassVar[str] = "run"
    name: str | None = _field(None, "optional prefix for the run id")
    runs_dir: str = _field("runs", "folder holding one sub-folder per run")
    seed: int = _field(42, "seed for initialisation, data order and dropout", ge=0)
    resume: str | None = _field(None, "run or checkpoint folder to resume from; null starts fresh")
    fork_from: str | None = _field(None, "checkpoint a new run starts from (weights, and optimizer state "
                                         "if it fits); steps continue from its step")


@dataclass
class ModelSettings(_Section):
    """The base model."""
    KEY: ClassVar[str] = "model"
    path: str = _field("models/tiny-demo", "Hugging Face model folder (config.json, weights, tokenizer)")
    dtype: Literal["float32", "float16", "bfloat16"] = _field(
        "float32", "parameter dtype; LoRA on the CPU: bfloat16/float16 keep the frozen base weights in 16 bits "
                   "(computed in float32, half the memory)")


@dataclass
class LoraSettings(_Section):
    """LoRA adapters (used when method is lora)."""
    KEY: ClassVar[str] = "lora"
    rank: int = _field(8, "rank r of the low-rank update", gt=0)
    alpha: float = _field(16.0, "scale numerator: the update is scaled by alpha / rank", gt=0)
    dropout: float = _field(0.0, "dropout on the adapter input (PEFT default 0; on the CPU 0.05 made a LoRA step ~5x slower)", ge=0, lt=1)
    target_modules: list[str] | str = _field(
        "all-linear",
        "module names (suffix match), one regex (full match), or all-linear: the model family's projections",
        coerce=_coerce_target_modules, rule=_TARGET_RULE)

    @property
    def scaling(self) -> float:
        return self.alpha / self.rank


@dataclass
class DataSettings(_Section):
    """Datasets and tokenisation."""
    KEY: ClassVar[str] = "data"
    train_file: str | list[str] = _field("data/demo/train.jsonl",
                                         "training data: a file, a dataset folder, folder#split or a list of files",
                                         coerce=_coerce_data_files, rule=_DATA_FILES_RULE, kind="str")
    validation_file: str | list[str] | None = _field("data/demo/validation.jsonl",
                                                     "validation data (a file, folder or list); null splits it off train",
                                                     coerce=_coerce_data_files, rule=_DATA_FILES_RULE, kind="str")
    test_file: str | None = _field("data/demo/test.jsonl", "held-out test data for downstream eval")
    dataset: list[str] | None = _field(None, "datasets of a dataset_info.json catalogue in train_file, by name",
                                       coerce=_coerce_dataset_names, rule=_DATASET_RULE, kind="str")
    format: Literal["auto", "alpaca", "sharegpt", "chat", "text"] = _field("auto", "record format; auto detects it")
    columns: dict[str, str] = _field({}, "the dataset's names for format fields, e.g. {instruction: question}",
                                     coerce=_coerce_columns, rule=_COLUMNS_RULE, kind="mapping")
    validation_fraction: float = _field(0.0, "share of train held out when validation_file is null",
                                        ge=0, le=0.5)
    max_seq_len: int = _field(256, "tokens per example; see overlong for longer ones", ge=8)
    overlong: Literal["truncate", "skip", "error"] = _field(
        "truncate", "records over max_seq_len: cut (prompt and answer in proportion), drop, or refuse all")
    text_split: Literal["line", "paragraph", "document"] = _field(
        "line", ".txt files: one record per line, per blank-line paragraph, or the whole file")
    media: Literal["refuse", "drop"] = _field(
        "refuse", "records with images, audio or video: refuse, or drop the media and their placeholders")
    mask_prompt: bool = _field(True, "train on the response only (prompt tokens carry no loss)")
    train_on: Literal["all_assistant", "last"] = _field("all_assistant",
                                                        "assistant turns that carry loss: every one, or the last")
    packing: bool = _field(False, "pack several samples into each row (attention stays within a sample)")
    group_by_length: bool = _field(False, "batch samples of similar length (fewer padded tokens)")


@dataclass
class TrainSettings(_Section):
    """The optimisation loop."""
    KEY: ClassVar[str] = "train"
    max_steps: int | None = _field(300, "optimizer steps; set this or epochs", gt=0)
    epochs: float | None = _field(None, "passes over the training data; set this or max_steps", gt=0)
    micro_batch_size: int = _field(8, "examples per device per forward pass", ge=1)
    grad_accum_steps: int = _field(1, "micro-batches accumulated per optimizer step", ge=1)
    learning_rate: float = _field(2e-3, "peak learning rate (AdamW)", gt=0, le=1)
    weight_decay: float = _field(0.0, "AdamW decoupled weight decay", ge=0)
    schedule: Literal["cosine", "linear", "constant"] = _field("cosine", "decay after warmup")
    warmup_steps: int = _field(20, "linear warmup steps from 0 to learning_rate", ge=0)
    min_lr_ratio: float = _field(0.1, "final learning rate as a share of the peak", ge=0, le=1)
    max_grad_norm: float | None = _field(1.0, "gradient clipping norm; null disables", gt=0)
    log_every: int = _field(5, "steps between train metric lines", ge=1)
    eval_every: int = _field(50, "steps between validation runs", ge=1)
    save_every: int = _field(100, "steps between checkpoints", ge=1)
    keep_last_n: int = _field(2, "step checkpoints kept (best is always kept)", ge=1)
    objective: Literal["sft", "dpo", "simpo", "orpo", "kto", "grpo", "reward"] = _field(
        "sft", "sft: next-token loss on the answers; dpo/simpo/orpo: chosen vs rejected pairs; kto: answers "
               "labelled desirable or undesirable (the preference: section holds their settings); grpo: "
               "completions sampled for each prompt and scored by reward functions (the grpo: section); "
               "reward: a reward model (a sequence score) trained on chosen vs rejected pairs")
    router_aux_loss: bool = _field(False, "mixture-of-experts models: add the router's load-balancing loss")
    router_aux_loss_coef: float | None = _field(
        None, "its weight; null: the model config.json's router_aux_loss_coef", ge=0)
    profile_steps: list[int] | None = _field(None, "[start, end]: run MindSpore's profiler for these steps on "
                                             "rank 0 (runs/<id>/profile/; the Monitor shows the top operators)",
                                             coerce=_coerce_step_range, rule=_STEPS_RULE, kind="str")


@dataclass
class PreferenceSettings(_Section):
    """Preference tuning (train.objective dpo, simpo, orpo or kto); core.engine.preference has the formulas."""
    KEY: ClassVar[str] = "preference"
    beta: float = _field(0.1, "dpo/kto: weight of the log-ratio to the reference; simpo: reward scale; "
                              "orpo: unused", gt=0)
    label_smoothing: float = _field(0.0, "dpo/simpo (sigmoid loss): assumed share of flipped labels", ge=0, lt=0.5)
    loss_type: Literal["sigmoid", "ipo"] = _field("sigmoid", "dpo: sigmoid (Rafailov et al.) or ipo (squared "
                                                             "loss on length-averaged log-ratios)")
    simpo_gamma: float = _field(0.5, "simpo: target reward margin gamma", ge=0)
    orpo_lambda: float = _field(0.1, "orpo: weight of the odds-ratio term added to the chosen answers' NLL", gt=0)
    kto_desirable_weight: float = _field(1.0, "kto: weight of the desirable answers' loss", gt=0)
    kto_undesirable_weight: float = _field(1.0, "kto: weight of the undesirable answers' loss", gt=0)
    reference: Literal["auto", "adapter_off", "frozen_copy"] = _field(
        "auto", "dpo/kto reference model: adapter_off (LoRA: the base with the adapter switched off, no second "
                "copy), frozen_copy (a frozen copy of the starting weights; full fine-tuning), auto picks by method")


# the reward functions grpo.rewards may name (core.eval.rewards implements them)
REWARD_FUNCTIONS = ("exact_match", "math", "regex", "length", "file", "reward_model")
# each function's settings besides `function` and `weight`: required ones first, then optional
REWARD_KEYS = {"exact_match": ((), ("column", "ignore_case")), "math": ((), ("column",)),
               "regex": (("pattern",), ("column",)), "length": ((), ("max_tokens", "soft_tokens")),
               "file": (("path",), ("name",)), "reward_model": (("run",), ())}
_REWARDS_RULE = Message("field.rule.rewards", functions=", ".join(REWARD_FUNCTIONS))


def _coerce_rewards(value: Any) -> list[dict]:
    """A list of reward functions, each a mapping {function: NAME, weight: W, ...its settings}, from a
    YAML list or its text; each checked here for its name, weight and keys (what a function does
    with them, core.eval.rewards)."""
    if isinstance(value, str):
        try:
            value = yaml.safe_load(value) if value.strip() else []
        except yaml.YAMLError:
            raise _must_be(_REWARDS_RULE) from None
    if value is None:
        value = []
    if isinstance(value, Mapping):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value:
        raise _Invalid(Message("field.rewards_empty", reason=_REWARDS_RULE))
    out = []
    for index, item in enumerate(value, 1):
        if isinstance(item, str):
            item = {"function": item}
        if not isinstance(item, Mapping):
            raise _Invalid(Message("field.reward_item", index=index, reason=_REWARDS_RULE))
        item = dict(item)
        name = item.get("function")
        if name not in REWARD_FUNCTIONS:
            raise _Invalid(_suggesting("field.reward_function", str(name), REWARD_FUNCTIONS, index=index,
                                       name=repr(name), functions=", ".join(REWARD_FUNCTIONS)))
        required, optional = REWARD_KEYS[name]
        for key in required:
            if not isinstance(item.get(key), str) or not item[key].strip():
                raise _Invalid(Message("field.reward_needs", index=index, function=name, setting=key))
        unknown = [k for k in item if k not in ("function", "weight", *required, *optional)]
        if unknown:
            raise _Invalid(Message("field.reward_unknown_key", index=index, function=name, setting=unknown[0],
                                   keys=", ".join(("weight", *required, *optional))))
        weight = item.get("weight", 1.0)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight):
            raise _Invalid(Message("field.reward_weight", index=index, function=name, value=repr(weight)))
        item["weight"] = float(weight)
        if name == "regex":
            try:
                re.compile(item["pattern"])
            except re.error as err:
                raise _Invalid(Message("field.reward_regex", index=index, re_says=str(err))) from None
        out.append(item)
    return out


@dataclass
class GrpoSettings(_Section):
    """GRPO (train.objective grpo): rollouts scored by reward functions; core.engine.objectives.grpo."""
    KEY: ClassVar[str] = "grpo"
    num_generations: int = _field(4, "completions sampled per prompt (the group whose rewards are compared)", ge=2)
    max_prompt_len: int = _field(192, "prompt tokens kept: a longer prompt is cut from the left (data.overlong "
                                      "truncate) or skipped (skip) or refused (error)", ge=8)
    max_new_tokens: int = _field(64, "most tokens a completion may have", ge=1)
    temperature: float = _field(1.0, "sampling temperature of the rollouts", gt=0)
    top_p: float = _field(1.0, "nucleus sampling of the rollouts", gt=0, le=1)
    top_k: int = _field(0, "sample among the k likeliest tokens only (0: all)", ge=0)
    beta: float = _field(0.0, "weight of the KL term to the reference model (0: none, as TRL's default)", ge=0)
    epsilon: float = _field(0.2, "clip range of the importance ratio (lower side, and upper when "
                                 "epsilon_high is null)", gt=0, lt=1)
    epsilon_high: float | None = _field(None, "upper clip range (DAPO's clip-higher); null: epsilon", gt=0)
    loss_type: Literal["grpo", "bnpo", "dr_grpo", "dapo"] = _field(
        "dapo", "how token losses are averaged: grpo (per completion, then over completions), bnpo (over the "
                "micro batch's tokens), dr_grpo (over batch × max_new_tokens), dapo (over the step's tokens)")
    scale_rewards: Literal["group", "batch", "none"] = _field(
        "group", "advantages divided by the rewards' standard deviation in the group, in the batch, or not")
    importance_sampling_level: Literal["token", "sequence"] = _field(
        "token", "the importance ratio per token (GRPO) or one per completion (GSPO)")
    num_iterations: int = _field(1, "updates per batch of rollouts; above 1 the sampling policy's "
                                    "log-probabilities are kept as the old policy", ge=1)
    mask_truncated_completions: bool = _field(False, "completions cut at max_new_tokens carry no loss")
    rewards: list[dict] = _field([{"function": "exact_match", "column": "answer", "weight": 1.0}],
                                 "reward functions and their weights, e.g. [{function: exact_match, column: "
                                 "answer}, {function: regex, pattern: '^\\d+$', weight: 0.2}]",
                                 coerce=_coerce_rewards, rule=_REWARDS_RULE, kind="yaml")
    reward_timeout_s: float = _field(30.0, "a reward function that runs longer on one batch fails the run", gt=0)
    eval_temperature: float = _field(0.0, "temperature of the validation completions (0: greedy, the same "
                                          "completions for the same weights)", ge=0)


@dataclass
class PrecisionSettings(_Section):
    """Mixed precision (MindSpore AMP levels)."""
    KEY: ClassVar[str] = "precision"
    amp_level: Literal["O0", "O1", "O2"] = _field("O0", "O0 fp32, O1 mixed ops, O2 mostly low precision")
    compute_dtype: Literal["float16", "bfloat16"] = _field("float16", "low-precision dtype if amp_level != O0")
    loss_scale: Literal["dynamic", "static", "none"] = _field("dynamic", "loss scaling for float16")
    initial_loss_scale: float = _field(65536.0, "starting (or fixed) loss scale", gt=0)


@dataclass
class RecomputeSettings(_Section):
    """Activation recomputation: trade compute for memory."""
    KEY: ClassVar[str] = "recompute"
    policy: Literal["none", "mlp", "attention", "full"] = _field("none", "blocks that recompute activations")
    layer_fraction: float = _field(1.0, "share of layers (from the first) that recompute", gt=0, le=1)


@dataclass
class ParallelSettings(_Section):
    """Devices and data parallelism (msrun workers)."""
    KEY: ClassVar[str] = "parallel"
    data_parallel: int = _field(1, "data-parallel workers", ge=1)
    optimizer_shard: bool = _field(False, "shard optimizer state across workers: not supported (must stay false; "
                                          "see the guide's Devices section)")
    device: Literal["cpu", "gpu", "ascend"] = _field("cpu", "MindSpore device target")
    hang_timeout_s: float = _field(120.0, "fail the run when a worker makes no step progress for this long (s)",
                                   gt=0)


@dataclass
class EvalSettings(_Section):
    """Evaluation during and after training."""
    KEY: ClassVar[str] = "eval"
    ema_alpha: float = _field(0.3, "weight of the newest value in EMA-smoothed metrics", gt=0, le=1)
    downstream: bool = _field(True, "generate on the test set and score the answers (exact match, BLEU-4, "
                              "ROUGE-1/2/L) before and after training")
    downstream_every_eval: bool = _field(False, "score the generated answers at every evaluation too (charts of "
                                         "BLEU/ROUGE; on by itself when early stopping watches one)")
    max_new_tokens: int = _field(16, "generation length for downstream eval", ge=1)
    max_eval_samples: int | None = _field(None, "cap on eval examples; null uses all", ge=1)
    baseline: bool = _field(True, "evaluate the base model before the first step (the Monitor's reference "
                            "line); false starts training at once")
    baseline_max_tokens: int | None = _field(None, "cap on the tokens the baseline evaluation reads "
                                             "(whole batches, at least one); null reads the whole validation set",
                                             ge=1)


@dataclass
class EarlyStoppingSettings(_Section):
    """Stop when the monitored validation metric stops improving."""
    KEY: ClassVar[str] = "early_stopping"
    enabled: bool = _field(True, "stop early when the monitor stops improving")
    monitor: Literal["val_loss", "val_ppl", "val_loss_ema", "val_ppl_ema", "exact_match", "bleu", "rouge1", "rouge2",
                     "rougeL", "reward_accuracy", "val_reward"] = _field(
        "val_loss", "metric watched: a validation loss or perplexity (lower is better), a score of the generated "
                    "test answers, reward_accuracy with a preference objective or a reward model, val_reward "
                    "with grpo (higher is better)")
    patience: int = _field(3, "evaluations without improvement before stopping", ge=1)
    min_delta: float = _field(0.0, "smallest improvement that counts (a decrease of a loss, an increase of a "
                              "score)", ge=0)


@dataclass
class MlflowSettings(_Section):
    """Where `tracking: [mlflow]` sends a run."""
    KEY: ClassVar[str] = "mlflow"
    tracking_uri: str | None = _field(None, "MLflow tracking URI (http://host:5000, sqlite:///file.db); null: "
                                      "$MLFLOW_TRACKING_URI, else sqlite:///<run.runs_dir>/mlflow.db")
    experiment: str = _field("mindtune", "MLflow experiment the runs go to")


@dataclass
class SwanlabSettings(_Section):
    """How `tracking: [swanlab]` records a run."""
    KEY: ClassVar[str] = "swanlab"
    mode: Literal["offline", "local", "cloud"] = _field("offline", "offline/local: files in the run folder "
                                                        "(swanlab watch shows them); cloud: SwanLab's server, "
                                                        "logged in with swanlab login")
    project: str = _field("mindtune", "SwanLab project the runs go to")


# launch: where a run runs (this machine, or a Slurm cluster). The Slurm forms are checked here;
# whether Slurm knows the partition/account is asked at submission (core.run.slurm).
_SLURM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_TIME_LIMIT_FORMS = ("MM", "MM:SS", "HH:MM:SS", "D-HH", "D-HH:MM", "D-HH:MM:SS")
_TIME_LIMIT = re.compile(r"(?:(?P<d>\d+)-(?P<dh>\d+)(?::(?P<dm>\d+)(?::(?P<ds>\d+))?)?"
                         r"|(?P<h>\d+):(?P<hm>\d+):(?P<hs>\d+)|(?P<m>\d+)(?::(?P<ms>\d+))?)")
_TIME_RULE = _or_null(Message("field.rule.time_limit", forms=", ".join(_TIME_LIMIT_FORMS)))
# sbatch options the launcher sets itself (and those that would break it): the field to use instead
SBATCH_RESERVED = {
    "output": "", "error": "", "input": "", "chdir": "", "wrap": "", "parsable": "", "open-mode": "",
    "export": "launch.env", "export-file": "launch.env", "array": "", "wait": "", "test-only": "",
    "nodes": "launch.nodes", "ntasks": "launch.nodes and launch.workers_per_node",
    "ntasks-per-node": "launch.workers_per_node", "partition": "launch.partition",
    "account": "launch.account", "time": "launch.time_limit", "job-name": "", "uid": "", "gid": "",
}
_SHELL_CHARS = set(";&|$`<>\\'\"\n\r\t\x00(){}*?!~#")
_SBATCH_OPTION = re.compile(r"--(?P<name>[A-Za-z][A-Za-z0-9-]*)(?:=(?P<value>.+))?")
_SBATCH_RULE = Message("field.rule.sbatch_options")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ENV_RULE = Message("field.rule.env")
_SLURM_NAME_RULE = _or_null(Message("field.rule.slurm_name"))


def _coerce_slurm_name(value: Any) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    text = decode(value, str, text=True)
    if text is INVALID or not _SLURM_NAME.fullmatch(text := text.strip()):
        raise _must_be(_SLURM_NAME_RULE)
    return text


def time_limit_minutes(text: str) -> float:
    """Minutes of a Slurm time limit ('30', '1:30:00', '2-12', ...); raises ValueError for a bad form."""
    m = _TIME_LIMIT.fullmatch(text.strip())
    if not m:
        raise ValueError(text)
    g = {k: int(v) for k, v in m.groupdict().items() if v is not None}
    if "d" in g:
        if g["dh"] > 23 or g.get("dm", 0) > 59 or g.get("ds", 0) > 59:
            raise ValueError(text)
        return g["d"] * 1440 + g["dh"] * 60 + g.get("dm", 0) + g.get("ds", 0) / 60
    if "h" in g:
        if g["hm"] > 59 or g["hs"] > 59:
            raise ValueError(text)
        return g["h"] * 60 + g["hm"] + g["hs"] / 60
    if g.get("ms", 0) > 59:
        raise ValueError(text)
    return g["m"] + g.get("ms", 0) / 60


def _coerce_time_limit(value: Any) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise _must_be(_TIME_RULE)
    text = str(value).strip()
    if text.upper() in ("UNLIMITED", "INFINITE"):
        return text.upper()
    try:
        minutes = time_limit_minutes(text)
    except ValueError:
        raise _must_be(_TIME_RULE) from None
    if minutes <= 0:
        raise _Invalid(Message("field.time_limit_zero"))
    return text


def sbatch_option_problem(item: Any) -> Message | None:
    """Why one extra sbatch option is refused, or None when it may be passed to sbatch."""
    if not isinstance(item, str) or not item:
        return Message("field.sbatch_not_text", item=repr(item))
    bad = sorted({c for c in item if c in _SHELL_CHARS or not c.isprintable()})
    if bad:
        return Message("field.sbatch_shell", item=repr(item), characters=", ".join(repr(c) for c in bad))
    m = _SBATCH_OPTION.fullmatch(item)
    if not m:
        return Message("field.sbatch_form", item=repr(item))
    name = m["name"].lower()
    # sbatch accepts unambiguous abbreviations (--out = --output): refuse any prefix of a reserved name
    hit = next((r for r in SBATCH_RESERVED if r == name or (len(name) >= 2 and r.startswith(name))), None)
    if hit is not None:
        instead = SBATCH_RESERVED[hit]
        return (Message("field.sbatch_reserved_use", item=repr(item), option=f"--{hit}", instead=instead) if instead
                else Message("field.sbatch_reserved", item=repr(item), option=f"--{hit}"))
    return None


def _coerce_sbatch_options(value: Any) -> list[str]:
    """A list of '--name=value' items, or one text of them separated by spaces."""
    if value is None:
        return []
    if isinstance(value, str):
        value = value.split()
    if not isinstance(value, (list, tuple)):
        raise _must_be(_SBATCH_RULE)
    items = [v.strip() if isinstance(v, str) else v for v in value]
    for item in items:
        problem = sbatch_option_problem(item)
        if problem:
            raise _Invalid(problem)
    return list(items)


def _coerce_env(value: Any) -> dict[str, str]:
    """{NAME: value}, from a mapping or its YAML text ('A: 1, B: x', braces optional)."""
    value = _mapping(value, _ENV_RULE)
    out: dict[str, str] = {}
    for name, val in value.items():
        if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
            raise _Invalid(Message("field.env_name", name=repr(name)))
        if isinstance(val, (dict, list)) or val is None:
            raise _Invalid(Message("field.env_value", name=name, py_value=repr(val)))
        text = "true" if val is True else "false" if val is False else str(val)
        if "\n" in text or "\r" in text or "\x00" in text:
            raise _Invalid(Message("field.env_newline", name=name))
        out[name] = text
    return out


@dataclass
class LaunchSettings(_Section):
    """Where the run runs: this machine (local) or a Slurm cluster."""
    KEY: ClassVar[str] = "launch"
    backend: Literal["local", "slurm"] = _field("local", "local runs on this machine; slurm submits a batch job")
    nodes: int = _field(1, "Slurm nodes (msrun on each); nodes x workers_per_node = parallel.data_parallel",
                        ge=1)
    workers_per_node: int = _field(1, "workers msrun starts on each Slurm node", ge=1)
    partition: str | None = _field(None, "Slurm partition; null uses the cluster's default",
                                   coerce=_coerce_slurm_name, rule=_SLURM_NAME_RULE, kind="str")
    account: str | None = _field(None, "Slurm account to charge; null uses yours by default",
                                 coerce=_coerce_slurm_name, rule=_SLURM_NAME_RULE, kind="str")
    time_limit: str | None = _field(None, "Slurm time limit (30, 1:30:00, 2-12, ...); null uses the partition's",
                                    coerce=_coerce_time_limit, rule=_TIME_RULE, kind="str")
    sbatch_options: list[str] = _field([], "extra sbatch options, one '--name=value' item each",
                                       coerce=_coerce_sbatch_options, rule=_SBATCH_RULE, kind="list")
    env: dict[str, str] = _field({}, "environment variables set for the job on every node",
                                 coerce=_coerce_env, rule=_ENV_RULE, kind="mapping")


# ---- the whole config ------------------------------------------------------------------------

@dataclass
class Config:
    """Every setting of one run. Build with `from_dict` or `load_config` to get everything checked."""
    run: RunSettings = field(default_factory=RunSettings)
    model: ModelSettings = field(default_factory=ModelSettings)
    method: Literal["lora", "full"] = _field("lora", "lora trains adapters only; full trains every weight")
    lora: LoraSettings = field(default_factory=LoraSettings)
    data: DataSettings = field(default_factory=DataSettings)
    train: TrainSettings = field(default_factory=TrainSettings)
    preference: PreferenceSettings = field(default_factory=PreferenceSettings)
    grpo: GrpoSettings = field(default_factory=GrpoSettings)
    precision: PrecisionSettings = field(default_factory=PrecisionSettings)
    recompute: RecomputeSettings = field(default_factory=RecomputeSettings)
    parallel: ParallelSettings = field(default_factory=ParallelSettings)
    eval: EvalSettings = field(default_factory=EvalSettings)
    early_stopping: EarlyStoppingSettings = field(default_factory=EarlyStoppingSettings)
    launch: LaunchSettings = field(default_factory=LaunchSettings)
    tracking: list[str] = _field([], "experiment trackers that mirror the run's metrics (optional packages: "
                                 "requirements-tracking.txt): tensorboard writes to <run>/tracking/tensorboard "
                                 "(tensorboard --logdir runs/), mlflow to mlflow.tracking_uri, swanlab (offline) to "
                                 "<run>/tracking/swanlab (swanlab watch)",
                                 coerce=_coerce_trackers, rule=_TRACKING_RULE, kind="checks", choices=TRACKERS)
    mlflow: MlflowSettings = field(default_factory=MlflowSettings)
    swanlab: SwanlabSettings = field(default_factory=SwanlabSettings)

    def __post_init__(self) -> None:
        problems = _check_fields(self, "")
        if problems:
            raise ConfigError(problems)

    @property
    def frozen_weights_16bit(self) -> bool:
        """LoRA on the CPU with model.dtype bfloat16 | float16: the frozen base weights stay in that
        dtype and are upcast per layer inside the step; everything that computes or trains (the
        activations, norms, biases, adapters, optimizer) is float32."""
        return self.method == "lora" and self.parallel.device == "cpu" and self.model.dtype != "float32"

    @property
    def compute_dtype(self) -> str:
        """The dtype the model computes in and keeps its trained parameters in (AMP aside)."""
        return "float32" if self.frozen_weights_16bit else self.model.dtype

    @property
    def global_batch_size(self) -> int:
        """Examples per optimizer step across all workers."""
        return self.train.micro_batch_size * self.train.grad_accum_steps * self.parallel.data_parallel

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Config:
        """Build and fully validate; all field problems are reported in one ConfigError."""
        data = dict(data or {})
        valid = [f.name for f in fields(cls)]
        problems = [_unknown_key(str(k), v, valid) for k, v in data.items() if k not in valid]
        kwargs: dict[str, Any] = {}
        for name, section_cls in _sections().items():
            raw = data.get(name)
            if raw is not None and not isinstance(raw, Mapping):
                problems.append(Problem(name, raw, Message("field.section_mapping", section=name)))
                continue
            try:
                kwargs[name] = section_cls.from_dict(raw)
            except ConfigError as err:
                problems += err.problems
        try:
            config = cls(**kwargs, **{k: data[k] for k in valid if k in data and k not in _sections()})
        except ConfigError as err:
            problems += err.problems
        if problems:
            raise ConfigError(problems)
        config.validate()
        return config

    def to_dict(self) -> dict[str, Any]:
        return {f.name: (getattr(self, f.name).to_dict() if f.name in _sections()
                         else encode(getattr(self, f.name))) for f in fields(self)}

    def to_flat(self) -> dict[str, Any]:
        """{'train.learning_rate': 0.002, 'method': 'lora', ...}: the keys overrides and forms use."""
        return {f"{name}.{k}" if isinstance(section, dict) else name: v
                for name, section in self.to_dict().items()
                for k, v in (section.items() if isinstance(section, dict) else [(name, section)])}

    def with_updates(self, updates: Mapping[str, Any]) -> Config:
        """A new, validated config with dotted keys replaced, e.g. {'train.max_steps': 50}."""
        data = self.to_dict()
        problems = [p for key, value in updates.items() if (p := _set_dotted(data, key, value))]
        if problems:
            raise ConfigError(problems)
        return Config.from_dict(data)

    def to_yaml(self, comments: bool = False) -> str:
        """The config as YAML, sections in block style; with `comments`, each line has its help."""
        info, lines = _field_table(), []
        for name, value in self.to_dict().items():
            if not isinstance(value, dict):
                lines += ["", _yaml_line(name, value, comments and info[name].help)]
                continue
            doc = (_sections()[name].__doc__ or "").strip()
            lines += ["", f"# {doc}"] if comments else [""]
            lines += [f"{name}:"] + [_yaml_line(f"  {k}", v, comments and info[f"{name}.{k}"].help)
                                     for k, v in value.items()]
        return "\n".join(lines).lstrip("\n") + "\n"

    def validate(self) -> None:
        """Re-check every field, then the rules that span fields; raise ConfigError listing all."""
        problems = _check_fields(self, "")
        for name in _sections():
            problems += _check_fields(getattr(self, name), name)
        if problems:
            raise ConfigError(problems)
        problems = _cross_field_problems(self)
        if problems:
            raise ConfigError(problems)


def _yaml_line(key: str, value: Any, help: str | bool) -> str:
    """`key: value` with lists in flow style, and the help line as a trailing comment."""
    text = yaml.safe_dump(value, default_flow_style=True, width=1000).removesuffix("\n...\n").strip()
    return f"{key}: {text}".ljust(34) + f"  # {help}" if help else f"{key}: {text}"


_ANSWER_SCORES = ("exact_match", "bleu", "rouge1", "rouge2", "rougeL")  # core.run.records.GENERATION_FIELDS


def _cross_field_problems(c: Config) -> list[Problem]:
    """Rules that involve more than one field (the single-field ranges are checked on construction)."""
    t, problems = c.train, []
    if c.run.resume and c.run.fork_from:
        problems.append(Problem("run.fork_from", c.run.fork_from, Message("config.resume_and_fork")))
    if (t.max_steps is None) == (t.epochs is None):
        problems.append(Problem("train.max_steps", t.max_steps,
                                Message("config.steps_or_epochs", epochs=_show(t.epochs))))
    if t.max_steps is not None and t.warmup_steps >= t.max_steps:
        problems.append(Problem("train.warmup_steps", t.warmup_steps,
                                Message("config.below_max_steps", steps=t.max_steps)))
    if c.data.packing and c.data.group_by_length:
        problems.append(Problem("data.group_by_length", True, Message("config.packing_and_grouping")))
    if c.early_stopping.monitor in _ANSWER_SCORES and not (c.eval.downstream and c.data.test_file):
        problems.append(Problem("early_stopping.monitor", c.early_stopping.monitor, Message("config.score_needs_test")))
    if c.data.validation_file is None and c.data.validation_fraction == 0:
        problems.append(Problem("data.validation_file", None, Message("config.no_validation")))
    problems += _objective_problems(c)
    p = c.precision
    if p.amp_level != "O0" and p.compute_dtype == "bfloat16" and c.parallel.device == "cpu":
        problems.append(Problem("precision.compute_dtype", "bfloat16",
                                Message("config.cpu_bf16_compute", level=p.amp_level)))
    if c.model.dtype == "bfloat16" and c.method == "full" and c.parallel.device == "cpu":
        problems.append(Problem("model.dtype", "bfloat16", Message("config.cpu_bf16_full")))
    elif c.model.dtype == "bfloat16" and c.method == "full":
        # nn.Adam updates in float32 but writes the result back into the bf16 parameter
        # (mindspore/nn/optim/adam.py, _update_run_op: param_fp32 ... assign), so every update
        # smaller than bf16's precision of the weight is lost: no float32 master weights
        problems.append(Problem("model.dtype", "bfloat16", Message("config.bf16_full")))
    if c.frozen_weights_16bit and p.amp_level != "O0":
        problems.append(Problem("precision.amp_level", p.amp_level, Message("config.lora_16bit_amp", dtype=c.model.dtype)))
    if c.parallel.optimizer_shard:
        problems.append(Problem("parallel.optimizer_shard", True, OPTIMIZER_SHARD_REFUSAL))
    launch = c.launch
    if launch.backend == "slurm" and launch.nodes * launch.workers_per_node != c.parallel.data_parallel:
        problems.append(Problem("launch.nodes", launch.nodes, Message(
            "config.slurm_workers", nodes=launch.nodes, per_node=launch.workers_per_node,
            workers=launch.nodes * launch.workers_per_node, data_parallel=c.parallel.data_parallel)))
    return problems


def _objective_problems(c: Config) -> list[Problem]:
    """train.objective against the other settings, by the objective's own rules (core.spec.objectives)."""
    return [Problem(rule.key, rule.value, rule.message) for rule in spec_of(c.train.objective).rules(c)]


# Why parallel.optimizer_shard is refused (issue 30, item 2). MindSpore shards optimizer state only
# through its parallel optimizer (set_auto_parallel_context(enable_parallel_optimizer=True)), which
# supports Lamb, AdamWeightDecay and AdaFactor on Ascend in data-parallel mode
# (mindspore/nn/optim/optimizer.py: "parallel optimizer only support optimizer 'Lamb' and
# 'AdamWeightDecay' and 'AdaFactor'"; mindspore/context.py). This engine trains with nn.Adam, whose bias
# correction AdamWeightDecay lacks (core.engine.train_step.adamw: without it a LoRA fine-tune stalled,
# measured), so sharding would mean a different, worse optimizer; and nothing here could check it.
OPTIMIZER_SHARD_REFUSAL = Message("config.optimizer_shard")


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    """A dataclass's resolved field types (cached: resolving them is slow)."""
    return typing.get_type_hints(cls)


@functools.cache
def _sections() -> dict[str, type[_Section]]:
    hints = _hints(Config)
    return {f.name: hints[f.name] for f in fields(Config)
            if isinstance(hints[f.name], type) and issubclass(hints[f.name], _Section)}


class FieldInfo(NamedTuple):
    """What the console needs to draw one field: its kind, default, choices, rule and help line."""
    key: str
    kind: str  # "str", "int", "float", "bool", "choice", "modules" (names or a regex), "mapping", "list" or "checks"
    optional: bool
    default: Any
    choices: tuple[str, ...]
    rule: str
    help: str
    minimum: float | None = None  # the inclusive lower bound of a number field, if it has one


def describe_fields() -> dict[str, FieldInfo]:
    """Every dotted key in file order, with its default, choices (for dropdowns) and valid range."""
    return {k: info._replace(default=copy.deepcopy(info.default)) for k, info in _field_table().items()}


@functools.cache
def _field_table() -> dict[str, FieldInfo]:
    out: dict[str, FieldInfo] = {}
    defaults = Config().to_flat()
    for prefix, cls in [*_sections().items(), ("", Config)]:
        hints = _hints(cls)
        for f in fields(cls):
            if "help" not in f.metadata:
                continue
            key = f"{prefix}.{f.name}".lstrip(".")
            inner, optional = split_optional(hints[f.name])
            options = choices(inner) or f.metadata["choices"]
            kind = f.metadata["kind"] or ("modules" if f.metadata["coerce"] else "choice" if options
                                          else inner.__name__)
            out[key] = FieldInfo(key, kind, optional, defaults[key], options,
                                 _describe(hints[f.name], f.metadata), f.metadata["help"], f.metadata["ge"])
    return {k: out[k] for k in defaults}


# ---- loading: files, bases, overrides -----------------------------------------------------------

def load_config(path: str | Path, overrides: Sequence[str] = ()) -> Config:
    """Read a YAML config with its `base:` files, apply `key=value` overrides, and validate.

    Errors name the file (or "overrides") that set the offending key.
    """
    path = Path(path).resolve()
    data, origins = _read_tree(path, ())
    problems = [p for text in overrides if (p := _apply_override(data, origins, text))]
    try:
        config = Config.from_dict(data)
    except ConfigError as err:
        problems += err.located(origins, _display(path)).problems
    if problems:
        raise ConfigError(problems)
    config.origins = origins  # which file set each key, for messages about a setting's value
    return config


def _display(path: Path) -> str:
    """A path as short as it can be said: relative to the working directory when inside it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _read_tree(path: Path, chain: tuple[Path, ...]) -> tuple[dict, dict[str, str]]:
    """A file merged over its bases (in order), and which file set each dotted key."""
    raw = read_config_file(path)
    bases = raw.pop("base", None)
    bases = [bases] if isinstance(bases, str) else bases if bases is not None else []
    if not isinstance(bases, list) or not all(isinstance(b, str) for b in bases):
        raise ConfigError([Problem("base", bases, Message("config.bad_base"), _display(path))])
    merged: dict = {}
    origins: dict[str, str] = {}
    for base in bases:
        base_path = (path.parent / base).resolve()
        if base_path in chain + (path,):
            cycle = " -> ".join(_display(p) for p in chain + (path, base_path))
            raise ConfigError([Problem("base", base, Message("config.base_cycle", cycle=cycle), _display(path))])
        if not base_path.is_file():
            raise ConfigError([Problem("base", base, Message("config.base_missing", file=_display(base_path)),
                                       _display(path))])
        base_data, base_origins = _read_tree(base_path, chain + (path,))
        merged = deep_merge(merged, base_data)
        origins.update(base_origins)
    origins.update({key: _display(path) for key in _leaf_keys(raw)})
    return deep_merge(merged, raw), origins


def read_config_file(path: Path) -> dict:
    """One file's mapping as written (`base:` not followed), parsed with yaml.safe_load;
    ConfigError names the file (and line). An empty file is an empty mapping."""
    name = _display(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(Message("config.unreadable", file=name, os_says=err.strerror or str(err))) from None
    except UnicodeDecodeError as err:
        raise ConfigError(Message("config.not_utf8", file=name, codec_says=err.reason)) from None
    try:
        data = yaml.safe_load(text)
    except yaml.reader.ReaderError as err:  # a control character: PyYAML says where only as an offset
        line = text[:err.position].count("\n") + 1
        character = f"#x{err.character:04x}" if isinstance(err.character, int) else repr(err.character)
        raise ConfigError(Message("config.yaml_character", file=name, line=line, character=character)) from None
    except yaml.YAMLError as err:
        mark, says = getattr(err, "problem_mark", None), str(getattr(err, "problem", None) or err)
        raise ConfigError(Message("config.invalid_yaml_line", file=name, line=mark.line + 1, yaml_says=says) if mark
                          else Message("config.invalid_yaml", file=name, yaml_says=says)) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(Message("config.not_sections", file=name, py_type=type(data).__name__))
    return data


def deep_merge(base: dict, update: dict) -> dict:
    """Dicts merge key by key; lists and scalars in `update` replace. An empty section
    (`lora:` with nothing under it, read as null) keeps what the base had."""
    out = dict(base)
    for key, value in update.items():
        if isinstance(out.get(key), dict) and isinstance(value, dict):
            out[key] = deep_merge(out[key], value)
        elif not (isinstance(out.get(key), dict) and value is None):
            out[key] = copy.deepcopy(value)
    return out


def _leaf_keys(data: Mapping, prefix: str = "") -> list[str]:
    keys = []
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        keys += _leaf_keys(value, dotted + ".") if isinstance(value, dict) and value else [dotted]
    return keys


def _apply_override(data: dict, origins: dict[str, str], text: str) -> Problem | None:
    """Apply one `dotted.key=value` (value parsed as YAML); return the problem, if any."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        return Problem("", _NO_VALUE, Message("config.bad_override", text=repr(text)))
    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError:
        value = raw  # e.g. 'a: b' is not YAML on one line; take the text as written
    info = _field_table().get(key)
    if info and info.kind == "str" and value is not None and not isinstance(value, str):
        value = raw.strip()  # a string field keeps 007 as '007', not the number 7
    problem = _set_dotted(data, key, value)
    origins[key] = "overrides"
    return problem._replace(source="overrides") if problem else None


def _set_dotted(data: dict, key: str, value: Any) -> Problem | None:
    """Set data[section][field] (or data[key] for top-level keys); unknown keys are a Problem."""
    info = _field_table()
    if key not in info:
        section = key.split(".")[0]
        siblings = [k for k in info if k.startswith(section + ".")]
        valid = siblings or list(dict.fromkeys(k.split(".")[0] for k in info))
        return Problem(key, value, _suggesting("field.unknown_key", key, list(info), valid_names=", ".join(valid)))
    if "." not in key:
        data[key] = value
        return None
    section, name = key.split(".", 1)
    if not isinstance(data.get(section), dict):
        data[section] = {}
    data[section][name] = value
    return None
