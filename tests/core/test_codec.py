"""core.spec.codec: the one walk over type hints that the config, the run records, the data
statistics and a checkpoint's loop state share (issue 29 item 3)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pytest

from core.run.records import Record, RunDirError, SetupEvent, parse_metric
from core.spec.codec import INVALID, CodecError, build, decode, encode, read
from core.spec.stats import DataStats, PreferenceSplitStats, PreferenceStats, SplitStats


@pytest.mark.parametrize("value, hint, json_policy, text_policy", [
    (3, float, 3.0, 3.0),                       # an int widens to a float
    (4.0, int, 4, 4),                           # an integral float narrows to an int
    (4.5, int, INVALID, INVALID),
    (True, int, INVALID, INVALID),              # a bool is never a number
    (1, bool, INVALID, INVALID),
    ("1e-4", float, INVALID, 1e-4),             # yaml.safe_load's 1e-4 is a string
    ("8", int, INVALID, 8),
    ("eight", int, INVALID, INVALID),
    (float("nan"), float, "nan", INVALID),      # a NaN loss is a float in a record, never a setting
    (float("inf"), float, float("inf"), INVALID),
    (7, str, INVALID, "7"),
    (["a"], str, INVALID, INVALID),
    (None, int | None, None, None),
    (None, int, INVALID, INVALID),
    ("O1", Literal["O0", "O1"], "O1", "O1"),
    ("O3", Literal["O0", "O1"], INVALID, INVALID),
    (np.float32(0.5), float, 0.5, 0.5),         # NumPy scalars are plain numbers
    ([1, 2.0], list[int], [1, 2], [1, 2]),
    ([1, "x"], list[int], INVALID, INVALID),
    ({"a": 1}, dict[str, float], {"a": 1.0}, {"a": 1.0}),
])
def test_both_number_policies(value, hint, json_policy, text_policy):
    for policy, expected in ((False, json_policy), (True, text_policy)):
        got = decode(value, hint, text=policy)
        if expected == "nan":
            assert isinstance(got, float) and got != got
        else:
            assert got is expected if expected is INVALID else got == expected and type(got) is type(expected)


def test_reading_a_file_leaves_out_only_the_wrong_items():
    assert decode([1, "x", 3], list[int], reading=True) == [1, 3]
    assert decode({"a": 1, "b": "x"}, dict[str, int], reading=True) == {"a": 1}


@dataclass(frozen=True, kw_only=True)
class Inner(Record):
    value: float | None = None


@dataclass(frozen=True, kw_only=True)
class Outer(Record):
    name: str | None = None
    inner: Inner | None = None
    steps: list[int] = field(default_factory=list)


def test_a_record_keeps_unknown_keys_and_reads_a_wrong_value_as_its_default():
    record = read(Outer, {"name": 5, "inner": {"value": 2, "newer": "kept"}, "steps": [1, "2", 3], "later": [1]})
    assert record == Outer(name=None, inner=Inner(value=2.0, extra={"newer": "kept"}), steps=[1, 3],
                           extra={"later": [1]})
    assert encode(record) == {"later": [1], "name": None, "inner": {"newer": "kept", "value": 2.0}, "steps": [1, 3]}
    assert encode(Outer(extra={"name": "old"}, name="new"))["name"] == "new"  # a field wins over extra
    with pytest.raises(RunDirError, match=r"Outer.steps = \[1, 'x'\]: must be list\[int\]"):
        Outer(steps=[1, "x"])  # building checks every value


def stats_of_both_kinds() -> tuple[DataStats, PreferenceStats]:
    split = SplitStats(format="alpaca", samples=96, truncated=1, labelled_tokens=378, min_length=5, mean_length=9.5,
                       max_length=40, histogram_edges=[0, 20, 40], histogram_counts=[50, 46],
                       ignored_fields={"history": 3}, overlong_listed=[["a.jsonl line 2", 300]])
    data = DataStats(train=split, validation=SplitStats(**{**split.__dict__, "samples": 16}), validation_source="file",
                     test_records=16, validation_in_train=0, seq_len=48, notes=["read as SFT"])
    pairs = PreferenceSplitStats(kind="pairwise", pairs=40, identical_dropped=1, truncated=0, desirable=0,
                                 chosen_mean_length=30.5, chosen_max_length=60, rejected_mean_length=28.0,
                                 rejected_max_length=55)
    return data, PreferenceStats(train=pairs, validation=pairs, seq_len=64)


def test_setup_event_data_is_typed_stats_of_either_kind_and_round_trips():
    for stats in stats_of_both_kinds():
        event = SetupEvent(data=stats, seq_len=48)
        line = json.loads(json.dumps(event.to_json()))
        assert line["data"] == stats.to_dict()
        again = parse_metric(line)
        assert type(again.data) is type(stats) and again.data == stats
    data, _ = stats_of_both_kinds()
    assert parse_metric(SetupEvent(data=data).to_json()).data.train.overlong_listed == [["a.jsonl line 2", 300]]
    with pytest.raises(RunDirError, match="SetupEvent.data"):
        SetupEvent(data={"train": {}})  # a writer passes the stats, not a dict


def test_build_names_where_and_the_field():
    data, _ = stats_of_both_kinds()
    raw = data.to_dict()
    assert build(DataStats, raw, "cache.npz") == data
    raw["train"]["samples"] = "many"
    with pytest.raises(CodecError, match=r"^cache.npz.train: SplitStats.samples = 'many': must be int$"):
        build(DataStats, raw, "cache.npz")
    with pytest.raises(CodecError, match=r"cache.npz: DataStats has no field rows; its fields: train, "):
        build(DataStats, {**data.to_dict(), "rows": 1}, "cache.npz")


def test_a_checkpoint_loop_state_with_a_bad_field_is_named():
    from core.engine.trainer import LoopState
    state = LoopState(step=8, best_value=1.5, best_step=6)
    assert LoopState.from_checkpoint(json.loads(json.dumps(state.to_dict())), "x") == state
    with pytest.raises(CodecError, match=r"trainer_state.json: loop: LoopState.best_step = 'six': must be int \| None"):
        LoopState.from_checkpoint({**state.to_dict(), "best_step": "six"}, "trainer_state.json: loop")


def test_any_passes_through():
    value: Any = {"x": [1, object]}
    assert decode(value, Any) is value


def test_evaluation_settings_are_typed_and_a_bad_one_is_named():
    from core.eval.eval_tasks import EvalError, EvalSettings
    settings = EvalSettings(model="models/tiny-demo", tasks=["demo_story_mc"], limit=5)
    assert EvalSettings.from_yaml(settings.to_yaml()) == settings
    with pytest.raises(EvalError, match=r"^runs/e1/config.yaml: EvalSettings.limit = 'five': must be int \| None$"):
        EvalSettings.from_yaml(settings.to_yaml().replace("limit: 5", "limit: five"), "runs/e1/config.yaml")
    with pytest.raises(EvalError, match="unknown setting"):
        EvalSettings.from_yaml(settings.to_yaml() + "shots: 3\n")
