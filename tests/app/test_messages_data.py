"""Issue 29 item 2, the data's messages by id (core.data, ids data.*) and the console's own words
about uploads (app.data.datasets, TEXTS keys upload.*): each one made by the code that makes it, from
real files with the mistakes people make, then said in 中文 from MESSAGES_ZH (no pattern over the
English) with every fact of the English kept (tests.app.test_problem_text.assert_chinese). The
English is the catalogue's and stays what core wrote before the ids (the CLI, the logs, the tests
of core.data read it)."""
from __future__ import annotations

import html
import json
import types
import zipfile
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from core.data import files as data_files
from core.data import formats, pipeline
from core.data.files import DataError, read_data_file
from core.data.catalog import read_catalog
from core.data.formats import Columns, resolve_format
from core.data.overlong import check_policy
from core.spec.config import DataSettings
from core.spec.errors import said_of
from core.spec.messages import CATALOGUE, Message

from app.tabs import data_callbacks
from app.data import datasets
from app.tabs import train_callbacks as cb
from app.i18n import MESSAGES_ZH, TEXTS, action_text, problem_text, reason_text
from tests.app.english import english_words
from tests.app.test_problem_text import assert_chinese
from tests.app.test_train_callbacks import form_values


def _write(folder: Path, name: str, content: str | bytes) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def _jsonl(folder: Path, name: str, *records) -> Path:
    return _write(folder, name, "\n".join(r if isinstance(r, str) else json.dumps(r) for r in records) + "\n")


def _read(folder: Path, name: str, *records, fmt: str = "auto", columns: dict | None = None):
    """Read a JSONL file of `records` and resolve its format (the reading the worker does)."""
    data = read_data_file(_jsonl(folder, name, *records))
    fmt = resolve_format(data, fmt, Columns(columns or {}))
    return data, fmt


def _convert(folder: Path, fmt: str, record: dict):
    data = read_data_file(_jsonl(folder, f"{fmt}.jsonl", record))
    return formats.conversation(data.records[0], fmt)


def _parquet(folder: Path, name: str, rows: dict) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = folder / name
    pq.write_table(pa.table(rows), path)
    return path


def _unreadable(folder: Path, monkeypatch: pytest.MonkeyPatch):
    path = _jsonl(folder, "locked.jsonl", {"text": "x"})

    def refuse(self):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "read_bytes", refuse)
    return read_data_file(path)


def _long_csv_field(folder: Path):
    """A cell over Python's csv field limit (its default: Gradio raises it when imported)."""
    import csv

    limit = csv.field_size_limit(131_072)
    try:
        return read_data_file(_write(folder, "long.csv", 'text\n"' + "x" * 200_000 + '"\n'))
    finally:
        csv.field_size_limit(limit)


def _no_validation(folder: Path):
    settings = DataSettings.from_dict({"train_file": str(_jsonl(folder, "t.jsonl", {"text": "x"})),
                                       "validation_file": None, "validation_fraction": 0.0})
    return pipeline._build_splits(settings, None, 0)


def _files_unreadable(folder: Path):
    from app.data import data_preview

    settings = DataSettings.from_dict({"train_file": str(folder / "gone.jsonl"), "validation_fraction": 0.1})
    return data_preview.data_stats(str(folder), settings, 0)


def _few_samples(packing: bool):
    samples = [pipeline.Sample(np.arange(8, dtype=np.int32), np.arange(8, dtype=np.int32)) for _ in range(3)]
    return pipeline.BatchIterator(samples, 8, grad_accum_steps=2, max_seq_len=16, packing=packing)


CHAT = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
SHAREGPT = {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]}


def _catalogue(folder: Path, records: list[dict], entry: dict | None = None) -> Path:
    _jsonl(folder, "t.jsonl", *records)
    _write(folder, "dataset_info.json", json.dumps({"demo": {"file_name": "t.jsonl", **(entry or {})}}))
    return folder


def _settings(train, **changes) -> DataSettings:
    return DataSettings.from_dict({"train_file": train, "validation_file": None, "test_file": None,
                                   "validation_fraction": 0.5, **changes})


class _Template:
    """A tokenizer whose chat template renders each turn's text, or refuses, as told."""

    def __init__(self, refuse: str | None = None, rewrite_at: int | None = None):
        self._source, self.refuse, self.rewrite_at = "models/tiny", refuse, rewrite_at

    def apply_chat_template(self, messages, add_generation_prompt=False, **extra):
        from core.data.tokenizer import TokenizerError

        if self.refuse:
            raise TokenizerError(self.refuse)
        text = "".join(m.get("content") or "" for m in messages)
        return text + ("!" if len(messages) == self.rewrite_at else "")  # no generation prompt


def _segments(folder: Path, rewrite_at: int | None):
    conv = _convert(folder, "chat", {"messages": CHAT["messages"] * 2})
    return pipeline._chat_segments(_Template(rewrite_at=rewrite_at), conv, True, "all_assistant")


def _rendered(folder: Path, record: dict):
    conv = _convert(folder, "chat", record)
    return pipeline.check_rendered(_Template(), conv, "")


def _tokenizer(folder: Path):
    from core.data.tokenizer import Tokenizer
    from tests.core.test_data import make_tokenizer_dir

    return Tokenizer.from_dir(make_tokenizer_dir(folder / "tok"))


def _entry(folder: Path, spec, names: list[str] | None = ["demo"], files: dict | None = None):
    """The catalogue's dataset 'demo' (`spec`) picked by data.dataset (core.data.catalog.select)."""
    from core.data.catalog import read_catalog, select

    cat = folder / "cat"
    for name, records in (files or {"t.jsonl": [{"instruction": "a", "output": "b"}]}).items():
        _jsonl(cat, name, *records)
    _write(cat, "dataset_info.json", json.dumps({"demo": spec}))
    return select(read_catalog(cat), names, cat)


def _entry_loaded(folder: Path, spec: dict, records: list[dict]):
    from core.data.catalog import check_columns, load_entry, preference_refusal

    entry = _entry(folder, spec, files={"t.jsonl": records})[0]
    if entry.preference:
        raise preference_refusal(entry)
    return check_columns(entry, load_entry(entry, 0))


def _pair(folder: Path, record: dict, kind: str = "pairs"):
    from core.data.pairs import preference_record

    return preference_record(read_data_file(_jsonl(folder, "pairs.jsonl", record)).records[0], kind, Columns())


def _no_pairs(folder: Path):
    from core.data.preference import load_preference_splits

    same = {"prompt": "hi", "chosen": "hello", "rejected": "hello"}
    settings = _settings(str(_jsonl(folder, "pairs.jsonl", same, same)))
    return load_preference_splits(settings, _tokenizer(folder), 0, "dpo")


def _prompt_fills(folder: Path):
    from core.data.preference import _Overlong

    where = read_data_file(_jsonl(folder, "pairs.jsonl", {"text": "x"})).records[0].where
    policy = _Overlong("error", 8)
    policy.fit(where, [5] * 10, [([6, 7], [6, 7])], "chosen")
    policy.check()

def _grpo_prompts(folder: Path, *records, **changes):
    """GRPO's prompt sets (core.data.prompts) read from a file of `records`."""
    from core.data.prompts import read_prompt_splits
    return read_prompt_splits(_settings(str(_jsonl(folder, "prompts.jsonl", *records)), **changes), 0)


def _grpo_overlong(folder: Path, policy: str):
    """Prompts over grpo.max_prompt_len refused (error), or every one skipped (skip)."""
    from core.data.prompts import load_prompt_splits
    long = {"prompt": " ".join(["story"] * 80), "answer": "x"}
    settings = _settings(str(_jsonl(folder, "long.jsonl", long, long, long, long)), overlong=policy)
    return load_prompt_splits(settings, _tokenizer(folder), 0, 16)


def _grpo_preference_entry(folder: Path):
    from core.data.prompts import read_prompt_splits
    entry = {"ranking": True, "columns": {"prompt": "instruction", "chosen": "chosen", "rejected": "rejected"}}
    cat = _catalogue(folder / "cat", [{"instruction": "a", "chosen": "b", "rejected": "c"}] * 2, entry)
    return read_prompt_splits(_settings(str(cat), dataset=["demo"]), 0)


# id -> how its real producer is made to say it (tmp folder, monkeypatch)
MISTAKES: dict[str, Callable[[Path, pytest.MonkeyPatch], object]] = {
    "data.file_not_found": lambda d, m: read_data_file(d / "nowhere.jsonl"),
    "data.unreadable": _unreadable,
    "data.files_unreadable": lambda d, m: _files_unreadable(d),
    "data.not_readable": lambda d, m: read_data_file(_write(d, "broken.parquet", b"not parquet at all")),
    "data.not_utf8": lambda d, m: read_data_file(_write(d, "latin1.jsonl", b'{"text": "caf\xe9"}\n')),
    "data.invalid_json_line": lambda d, m: read_data_file(_jsonl(d, "broken.jsonl", {"text": "x"}, '{"text": ')),
    "data.invalid_json": lambda d, m: read_data_file(_write(d, "broken.json", "[{'text': 'x'}]")),
    "data.invalid_json_lines": lambda d, m: read_data_file(_write(d, "lines.json", '{"text": "a"}\n{"text": "b"}\n')),
    "data.not_an_object": lambda d, m: read_data_file(_write(d, "numbers.json", '[{"text": "a"}, 3]')),
    "data.not_an_array": lambda d, m: read_data_file(_write(d, "string.json", '"text"')),
    "data.not_an_array_keys": lambda d, m: read_data_file(_write(d, "rows.json", '{"rows": [{"text": "a"}]}')),
    "data.csv_values": lambda d, m: read_data_file(_write(d, "commas.csv", "instruction,output\nhi, there,x\n")),
    "data.csv_malformed": lambda d, m: _long_csv_field(d),
    "data.csv_unnamed": lambda d, m: read_data_file(_write(d, "blank.csv", "instruction,,output\na,b,c\n")),
    "data.csv_duplicates": lambda d, m: read_data_file(_write(d, "twice.csv", "output,output\na,b\n")),
    "data.unsupported_type": lambda d, m: read_data_file(_write(d, "sheet.xlsx", "x")),
    "data.no_split": lambda d, m: (_jsonl(d, "ds/train.jsonl", {"text": "x"}),
                                   read_data_file(f"{d / 'ds'}#dev"))[1],
    "data.no_records": lambda d, m: read_data_file(_write(d, "empty.jsonl", "\n")),
    "data.not_valid": lambda d, m: check_policy("cut"),
    "data.not_a_format": lambda d, m: _read(d, "xml.jsonl", {"text": "x"}, fmt="xml"),
    "data.unknown_format_keys": lambda d, m: _read(d, "weird.jsonl", {"foo": 1, "bar": 2}),
    "data.map_others": lambda d, m: _read(d, "weird.jsonl", {"foo": 1, "bar": 2}),
    "data.unknown_format_columns": lambda d, m: resolve_format(read_data_file(
        _write(d, "qa.csv", "question,answer\nhi,hello\n"))),
    "data.map_these": lambda d, m: resolve_format(read_data_file(_write(d, "qa.csv", "question,answer\nhi,hello\n"))),
    "data.missing_columns": lambda d, m: resolve_format(read_data_file(_write(d, "body.csv", "body\nhi\n")), "text"),
    "data.missing_columns_optional": lambda d, m: resolve_format(read_data_file(
        _write(d, "half.csv", "instruction,answer2\nhi,hello\n")), "alpaca"),
    "data.column_not_used": lambda d, m: _read(d, "alpaca.jsonl", {"instruction": "a", "output": "b"},
                                               fmt="alpaca", columns={"text": "instruction"}),
    "data.mapped_column_missing": lambda d, m: _read(d, "alpaca.jsonl", {"instruction": "a", "output": "b"},
                                                     columns={"instruction": "zzz"}),
    "data.mapped_column_missing_close": lambda d, m: _read(d, "alpaca.jsonl", {"instruction": "a", "output": "b"},
                                                           columns={"instruction": "instructio"}),
    "data.missing_field": lambda d, m: _convert(d, "alpaca", {"instruction": "a"}),
    "data.missing_turns": lambda d, m: _convert(d, "chat", {"turns": []}),
    "data.not_a_string": lambda d, m: _convert(d, "alpaca", {"instruction": "a", "output": 3}),
    "data.not_a_string_or_calls": lambda d, m: _convert(d, "chat", {"messages": [
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": 3}]}),
    "data.not_turns": lambda d, m: _convert(d, "chat", {"messages": 5}),
    "data.not_tools": lambda d, m: _convert(d, "chat", {**CHAT, "tools": 5}),
    "data.not_history": lambda d, m: _convert(d, "alpaca", {"instruction": "a", "output": "b", "history": 5}),
    "data.not_calls": lambda d, m: _convert(d, "chat", {"messages": [
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": "x", "tool_calls": 5}]}),
    "data.not_a_turn": lambda d, m: _convert(d, "chat", {"messages": [5]}),
    "data.empty_field": lambda d, m: _convert(d, "alpaca", {"instruction": "a", "output": " "}),
    "data.empty_conversation": lambda d, m: _convert(d, "chat", {"messages": []}),
    "data.assistant_first": lambda d, m: _convert(d, "chat", {"messages": CHAT["messages"][::-1]}),
    "data.no_assistant": lambda d, m: _convert(d, "chat", {"messages": CHAT["messages"][:1]}),
    "data.bad_role": lambda d, m: _convert(d, "chat", {"messages": [{"role": "bot", "content": "x"}]}),
    "data.bad_role_tags": lambda d, m: _convert(d, "sharegpt", {"conversations": [{"from": "bot", "value": "x"}]}),
    "data.nothing_of_the_answer": lambda d, m: pipeline._checked_sample(
        [1, 2, 3], [pipeline.IGNORE_INDEX] * 3, read_data_file(_jsonl(d, "t.jsonl", {"text": "x"})).records[0].where,
        40, 3),
    "data.test_raw_text": lambda d, m: pipeline.build_test_records(
        read_data_file(_jsonl(d, "test.jsonl", {"text": "x"})), "text", None),
    "data.no_validation_samples": lambda d, m: pipeline.split_records(
        read_data_file(_jsonl(d, "few.jsonl", *[{"text": str(i)} for i in range(20)])), 0.01, 0),
    "data.nothing_to_train": lambda d, m: pipeline.split_records(
        read_data_file(_jsonl(d, "few.jsonl", *[{"text": str(i)} for i in range(2)])), 0.9, 0),
    "data.no_validation_data": lambda d, m: _no_validation(d),
    "data.fewer_samples_than_a_batch": lambda d, m: _few_samples(packing=False),
    "data.fewer_rows_than_a_batch": lambda d, m: _few_samples(packing=True),
    "data.needs_pyarrow": lambda d, m: (m.setitem(__import__("sys").modules, "pyarrow", None), read_data_file(
        _write(d, "t.parquet", b"PAR1")))[1],
    "data.only_blank_lines": lambda d, m: read_data_file(_write(d, "blank.txt", "  \n\n\t\n")),
    "data.catalogue_as_file": lambda d, m: read_data_file(_catalogue(d / "cat", [{"text": "x"}])),
    "data.state_no_files": lambda d, m: read_data_file(_write(d, "saved/state.json", "{}").parent),
    "data.state_bad_name": lambda d, m: read_data_file(_write(d, "saved/state.json", '{"_data_files": [{"filename": 3}]}'
                                                              ).parent),
    "data.shard_missing": lambda d, m: read_data_file(_write(d, "saved/state.json", json.dumps(
        {"_data_files": [{"filename": "data-00000-of-00001.arrow"}]})).parent),
    "data.split_shard_missing": lambda d, m: read_data_file(_parquet(
        d / "hub", "train-00000-of-00002.parquet", {"text": ["a"]}).parent) if (d / "hub").mkdir() is None else None,
    "data.bad_dataset_dict": lambda d, m: read_data_file(_write(d, "dict/dataset_dict.json", '{"x": 1}').parent),
    "data.cannot_list": lambda d, m: (_jsonl(d, "ds/train.jsonl", {"text": "x"}),
                                      m.setattr(Path, "iterdir", lambda self: (_ for _ in ()).throw(
                                          PermissionError(13, "Permission denied"))),
                                      read_data_file(d / "ds"))[2],
    "data.which_split": lambda d, m: (_jsonl(d, "ds/train_a.jsonl", {"text": "x"}),
                                      _jsonl(d, "ds/train_b.jsonl", {"text": "x"}), read_data_file(d / "ds"))[2],
    "data.no_role_split": lambda d, m: (_jsonl(d, "ds/foo.jsonl", {"text": "x"}), _jsonl(d, "ds/bar.jsonl", {"text": "x"}),
                                        read_data_file(d / "ds"))[2],
    "data.no_validation_split": lambda d, m: (_jsonl(d, "ds/foo.jsonl", {"text": "x"}),
                                              _jsonl(d, "ds/bar.jsonl", {"text": "x"}),
                                              read_data_file(d / "ds", role="validation"))[2],
    "data.no_data_files": lambda d, m: read_data_file(_write(d, "notes/readme.md", "hi").parent),
    "data.looks_like": lambda d, m: _read(d, "sharegpt.jsonl", SHAREGPT, fmt="alpaca"),
    "data.format_is": lambda d, m: _read(d, "sharegpt.jsonl", SHAREGPT, fmt="alpaca"),
    "data.format_set_in": lambda d, m: pipeline.check_explicit_format(
        _settings(str(_jsonl(d, "sharegpt.jsonl", SHAREGPT)), format="alpaca"), "configs/mine.yaml"),
    "data.formatting_is": lambda d, m: pipeline.data_sources(_settings(str(_catalogue(d / "cat", [SHAREGPT])),
                                                                       dataset=["demo"]), "train"),
    "data.preference_column": lambda d, m: _read(d, "alpaca.jsonl", {"instruction": "a", "output": "b"},
                                                 columns={"chosen": "output"}),
    "data.mixed_formats": lambda d, m: pipeline.data_sources(_settings([
        str(_jsonl(d, "a.jsonl", {"instruction": "a", "output": "b"})), str(_jsonl(d, "b.jsonl", {"text": "x"}))]),
        "train"),
    "data.text_not_json_tools": lambda d, m: _convert(d, "chat", {**CHAT, "tools": "[oops"}),
    "data.text_not_json_history": lambda d, m: _convert(d, "alpaca", {"instruction": "a", "output": "b",
                                                                      "history": "[oops"}),
    "data.text_not_json_turns": lambda d, m: _convert(d, "chat", {"messages": "[oops"}),
    "data.tool_no_name": lambda d, m: _convert(d, "chat", {**CHAT, "tools": [{"description": "x"}]}),
    "data.bad_history_pair": lambda d, m: _convert(d, "alpaca", {"instruction": "a", "output": "b", "history": [["a"]]}),
    "data.call_not_json": lambda d, m: _convert(d, "sharegpt", {"conversations": [
        {"from": "human", "value": "hi"}, {"from": "function_call", "value": "{oops"}]}),
    "data.call_shape": lambda d, m: _convert(d, "sharegpt", {"conversations": [
        {"from": "human", "value": "hi"}, {"from": "function_call", "value": "[1]"}]}),
    "data.two_assistant_turns": lambda d, m: pipeline.render(
        _Template(refuse="models/tiny/tokenizer_config.json: the chat template refused these messages: Conversation "
                         "roles must alternate"),
        _convert(d, "chat", {"messages": CHAT["messages"] + [{"role": "assistant", "content": "again"}]})),
    "data.template_no_tools": lambda d, m: _rendered(d, {**CHAT, "tools": [{"name": "get_weather"}]}),
    "data.template_no_calls": lambda d, m: _rendered(d, {"messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "get_weather"}}]},
        {"role": "assistant", "content": "x"}]}),
    "data.template_drops_turns": lambda d, m: _rendered(d, {"messages": [{"role": "system", "content": "be kind"},
                                                                         *CHAT["messages"]]}),
    "data.template_rewrites": lambda d, m: _segments(d, rewrite_at=2),
    "data.turns_through": lambda d, m: _segments(d, rewrite_at=2),
    "data.turns_before": lambda d, m: _segments(d, rewrite_at=1),
    "data.test_answer_not_text": lambda d, m: pipeline.build_test_records(read_data_file(_jsonl(d, "test.jsonl", {
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": " "}]})), "chat", None),
    "data.overlong_one": lambda d, m: (_ for _ in ()).throw(__import__("core.data.overlong").data.overlong.overlong_error(
        [(read_data_file(_jsonl(d, "t.jsonl", {"text": "x"})).records[0].where, 300)], 256)),
    "data.overlong_many": lambda d, m: (_ for _ in ()).throw(__import__("core.data.overlong").data.overlong.overlong_error(
        [(r.where, 300) for r in read_data_file(_jsonl(d, "t.jsonl", *[{"text": "x"}] * 12)).records], 256)),
    "data.prompt_fills": lambda d, m: _prompt_fills(d),
    "data.grpo_pairs": lambda d, m: _grpo_prompts(d, {"prompt": "q", "chosen": "a", "rejected": "b"}),
    "data.grpo_kto": lambda d, m: _grpo_prompts(d, {"prompt": "q", "completion": "a", "label": True}),
    "data.grpo_text": lambda d, m: _grpo_prompts(d, {"text": "Mia has a kite."}, {"text": "Tom too."}, format="text"),
    "data.grpo_no_prompt": lambda d, m: _grpo_prompts(d, {"question": "q", "answer": "a"}),
    "data.grpo_preference_entry": lambda d, m: _grpo_preference_entry(d),
    "data.prompts_overlong": lambda d, m: _grpo_overlong(d, "error"),
    "data.no_prompts_left": lambda d, m: _grpo_overlong(d, "skip"),
    "data.supervised_not_preference": lambda d, m: __import__("core.data.preference").data.preference.preference_sources(
        _settings(str(_catalogue(d / "cat", [{"instruction": "a", "output": "b"}])), dataset=["demo"]), "train"),
    "data.objective_needs": lambda d, m: __import__("core.data.preference").data.preference.load_preference_splits(
        _settings(str(_jsonl(d, "a.jsonl", {"instruction": "a", "output": "b"}))), None, 0, "dpo"),
    "data.no_pairs_left": lambda d, m: _no_pairs(d),
    "data.at_entry": lambda d, m: _entry(d, {"file_name": "t.jsonl", "formatting": "csv"}),
    "data.catalogue_not_json": lambda d, m: read_catalog(_write(d, "cat/dataset_info.json", '{"demo": }').parent),
    "data.catalogue_not_object": lambda d, m: read_catalog(_write(d, "cat/dataset_info.json", "[1]").parent),
    "data.catalogue_choose": lambda d, m: _entry(d, {"file_name": "t.jsonl"}, names=None),
    "data.no_such_dataset": lambda d, m: _entry(d, {"file_name": "t.jsonl"}, names=["other"]),
    "data.entry_not_object": lambda d, m: _entry(d, "t.jsonl"),
    "data.entry_on_hub": lambda d, m: _entry(d, {"hf_hub_url": "tatsu-lab/alpaca"}),
    "data.entry_script": lambda d, m: _entry(d, {"script_url": "loader.py"}),
    "data.entry_no_file": lambda d, m: _entry(d, {"formatting": "alpaca"}),
    "data.entry_formatting": lambda d, m: _entry(d, {"file_name": "t.jsonl", "formatting": "csv"}),
    "data.entry_bad_file_name": lambda d, m: _entry(d, {"file_name": 3}),
    "data.entry_outside": lambda d, m: _entry(d, {"file_name": "../outside.jsonl"}),
    "data.entry_file_missing": lambda d, m: _entry(d, {"file_name": "gone.jsonl"}),
    "data.entry_tags_alpaca": lambda d, m: _entry(d, {"file_name": "t.jsonl", "tags": {"role_tag": "from"}}),
    "data.entry_num_samples": lambda d, m: _entry(d, {"file_name": "t.jsonl", "num_samples": 0}),
    "data.entry_not_mapping": lambda d, m: _entry(d, {"file_name": "t.jsonl", "columns": 5}),
    "data.entry_unknown_name": lambda d, m: _entry(d, {"file_name": "t.jsonl", "columns": {"question": "q"}}),
    "data.entry_not_column": lambda d, m: _entry(d, {"file_name": "t.jsonl", "columns": {"prompt": 3}}),
    "data.entry_ranking": lambda d, m: _entry_loaded(d, {"file_name": "t.jsonl", "ranking": True},
                                                     [{"instruction": "a", "chosen": "b", "rejected": "c"}]),
    "data.entry_kto": lambda d, m: _entry_loaded(d, {"file_name": "t.jsonl", "columns": {"kto_tag": "ok"}},
                                                 [{"instruction": "a", "output": "b", "ok": True}]),
    "data.entry_column_missing": lambda d, m: _entry_loaded(d, {"file_name": "t.jsonl", "columns": {"prompt": "q"}},
                                                            [{"instruction": "a", "output": "b"}]),
    "data.media_refused": lambda d, m: _convert(d, "chat", {"messages": [
        {"role": "user", "content": [{"type": "image_url", "image_url": "x.png"}]}, CHAT["messages"][1]]}),
    "data.media_part": lambda d, m: _convert(d, "chat", {"messages": [
        {"role": "user", "content": [{"type": "image_url", "image_url": "x.png"}]}, CHAT["messages"][1]]}),
    "data.media_column": lambda d, m: _convert(d, "chat", {**CHAT, "images": ["a.png", "b.png"]}),
    "data.bad_part": lambda d, m: _convert(d, "chat", {"messages": [
        {"role": "user", "content": [{"type": "input_file", "file": "x"}]}, CHAT["messages"][1]]}),
    "data.pair_not_message": lambda d, m: _pair(d, {"prompt": [5], "chosen": "a", "rejected": "b"}),
    "data.pair_bad_role": lambda d, m: _pair(d, {"prompt": [{"role": "bot", "content": "x"}], "chosen": "a",
                                                 "rejected": "b"}),
    "data.pair_content": lambda d, m: _pair(d, {"prompt": [{"role": "user", "content": 5}], "chosen": "a",
                                                "rejected": "b"}),
    "data.answer_missing": lambda d, m: _pair(d, {"prompt": "hi", "chosen": "a", "rejected": None}),
    "data.answer_not_last": lambda d, m: _pair(d, {"prompt": "hi", "chosen": [{"role": "user", "content": "x"}],
                                                   "rejected": "b"}),
    "data.not_text_or_messages": lambda d, m: _pair(d, {"prompt": "hi", "chosen": 5, "rejected": "b"}),
    "data.answer_empty": lambda d, m: _pair(d, {"prompt": "hi", "chosen": " ", "rejected": "b"}),
    "data.prompt_empty": lambda d, m: _pair(d, {"prompt": " ", "chosen": "a", "rejected": "b"}),
    "data.no_prompt": lambda d, m: _pair(d, {"question": "hi", "chosen": "a", "rejected": "b"}),
    "data.prompt_not_user": lambda d, m: _pair(d, {"prompt": [{"role": "system", "content": "x"}], "chosen": "a",
                                                   "rejected": "b"}),
    "data.prompts_differ": lambda d, m: _pair(d, {
        "chosen": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "a"}],
        "rejected": [{"role": "user", "content": "ho"}, {"role": "assistant", "content": "b"}]}),
    "data.kto_label": lambda d, m: _pair(d, {"prompt": "hi", "completion": "a", "label": "yes"}, "kto"),
    "data.kto_conversation_end": lambda d, m: _pair(d, {"messages": [{"role": "user", "content": "hi"}],
                                                        "label": True}, "kto"),
    "data.kto_no_answer": lambda d, m: _pair(d, {"prompt": "hi", "label": True}, "kto"),
    "data.mixed_kinds": lambda d, m: __import__("core.data.pairs").data.pairs.file_kind(read_data_file(_jsonl(
        d, "mixed.jsonl", {"prompt": "hi", "completion": "a"}, {"prompt": "hi", "chosen": "a", "rejected": "b"}))),
    "data.problems": lambda d, m: __import__("core.data.pairs").data.pairs.preference_records(read_data_file(_jsonl(
        d, "two.jsonl", {"prompt": "hi", "chosen": "a", "rejected": "b"}, {"prompt": "hi", "chosen": "", "rejected": "b"},
        {"prompt": "hi", "completion": "a", "label": True})), "pairs"),
    "data.no_desirable": lambda d, m: __import__("core.data.pairs").data.pairs.sft_view(read_data_file(_jsonl(
        d, "kto.jsonl", {"prompt": "hi", "completion": "a", "label": False})), Columns()),
    # where: a record's line, its index in a JSON array, a table's row, or a file (a table's columns)
    "data.at_line": lambda d, m: read_data_file(_jsonl(d, "broken.jsonl", {"text": "x"}, '{"text": ')),
    "data.at_record": lambda d, m: read_data_file(_write(d, "numbers.json", '{"data": [{"text": "a"}, 3]}')),
    "data.at_row": lambda d, m: formats.conversation(read_data_file(_parquet(
        d, "rows.parquet", {"instruction": ["a"], "output": [""]})).records[0], "alpaca"),
    "data.at": lambda d, m: resolve_format(read_data_file(_write(d, "qa.csv", "question,answer\nhi,hello\n"))),
}
# the library's own words that stay as it said them (no table of them): gzip's, pyarrow's, csv's
LIBRARY_WORDS = {"data.not_readable": "reader_says", "data.csv_malformed": "csv_says", "data.needs_pyarrow": "reader_says",
                 "data.two_assistant_turns": "reason"}  # and the chat template's refusal (area B's words)


def _ids(message: Message) -> set[str]:
    """The ids of a message and of the messages it holds."""
    return {message.key} | {key for value in message.params.values() if isinstance(value, Message)
                            for key in _ids(value)}


def _made(key: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> DataError:
    with pytest.raises(DataError) as info:
        MISTAKES[key](tmp_path, monkeypatch)
    return info.value


@pytest.mark.parametrize("key", sorted(MISTAKES))
def test_every_data_message_is_said_by_its_id_in_chinese_with_its_facts(key, tmp_path, monkeypatch):
    err = _made(key, tmp_path, monkeypatch)
    message = err.said[0]
    assert isinstance(message, Message) and key in _ids(message), (key, str(err))
    assert str(message) == str(err)  # the English: what core.data wrote before the ids
    chinese = problem_text(err, "zh")
    assert chinese == problem_text(message, "zh") and problem_text(err, "en") == str(err)
    library = LIBRARY_WORDS.get(key)
    if library:  # the library's own words stay as it said them; the rest is 中文
        inner = next(m for m in [message, *message.params.values()] if isinstance(m, Message) and m.key == key)
        said = inner.params[library]
        shown = problem_text(said, "zh")  # as said (a library's words), or by its own table (a template's refusal)
        assert shown in chinese
        assert_chinese(str(err).replace(said, "…"), chinese.replace(shown, "…"))
    else:
        assert_chinese(str(err), chinese)


def test_every_data_id_of_the_catalogue_is_made_by_its_producer():
    assert {key for key in CATALOGUE if key.startswith("data.")} == set(MISTAKES)
    assert {key for key in CATALOGUE if key.startswith("data.")} <= set(MESSAGES_ZH)


def test_the_english_is_what_core_data_wrote_before_the_ids(tmp_path):
    broken = _jsonl(tmp_path, "broken.jsonl", {"text": "x"}, '{"text": ')
    with pytest.raises(DataError) as info:
        read_data_file(broken)
    assert str(info.value) == (f"{broken} line 2: invalid JSON (Expecting value at column 10); each line must be "
                               "one JSON object")
    assert problem_text(info.value, "zh") == f"{broken} 第 2 行：JSON 无效（“Expecting value”，第 10 列）；每行必须是一个 JSON 对象"
    record = read_data_file(_write(tmp_path, "rows.json", '{"data": [{"text": "a"}]}')).records[0]
    assert record.where == f"{tmp_path / 'rows.json'} record data[0]" and isinstance(record.where, data_files.Where)
    import copy
    import pickle

    assert pickle.loads(pickle.dumps(record)).where.params == copy.deepcopy(record).where.params == record.where.params


def test_a_data_error_keeps_its_id_on_the_way_to_the_page(console, workspace):
    """The box above Start and the data preview receive the message itself."""
    folder = workspace.data_dirs[0] / "demo"
    values = form_values(console, data__train_file=str(_jsonl(folder, "weird.jsonl", {"foo": 1, "bar": 2})))
    errors = cb.check_form(values, console).errors
    said = errors["data.train_file"]
    assert isinstance(said, Message) and said.key == "data.at_line", said
    assert said.params["reason"].key == "data.unknown_format_keys"
    assert_chinese(str(said), problem_text(said, "zh"))
    preview = data_callbacks.preview_view(values, console, "zh")
    assert problem_text(said, "zh").split("：", 1)[1].split("；")[0] in preview.replace("&#x27;", "'")
    nowhere = str(folder / "nowhere.jsonl")
    said = cb.check_form(form_values(console, data__train_file=nowhere), console).errors["data.train_file"]
    assert said.key == "data.file_not_found" and problem_text(said, "zh") == f"{nowhere}：文件不存在"


def test_a_data_error_that_fails_a_run_reads_in_chinese_by_its_record(tmp_path, monkeypatch):
    """The worker records a data error as the run's reason (status.json: its English and its record,
    core.train._fail with said_of): the console says it by the record; the English alone (a run folder
    written before the ids) is shown as it is, never read back."""
    from core.run.rundir import RunDir
    from core.spec.config import Config

    for key in ("data.fewer_samples_than_a_batch", "data.no_validation_samples", "data.no_validation_data"):
        err = _made(key, tmp_path, monkeypatch)
        run = RunDir.create(tmp_path / "runs", key.replace(".", "-"), Config().to_yaml())
        run.write_status(state="failed", reason=said_of(err), failure_kind="data")  # what the worker writes
        status = run.read_status()
        assert status.reason == str(err) and Message.from_json(status.reason_message).key == key
        chinese = reason_text(status.reason, "zh", status.reason_message)
        assert chinese == problem_text(err, "zh")
        assert_chinese(status.reason, chinese)
        assert reason_text(status.reason, "zh") == status.reason  # without its record: as it is


def test_a_data_error_of_a_dry_run_reads_in_chinese(console, tmp_path, monkeypatch):
    """A dry run's error comes from its process as its record (core.spec.errors.report) beside its English."""
    from tests.app.test_problem_text import error_lines
    err = _made("data.fewer_samples_than_a_batch", tmp_path, monkeypatch)
    _, failed = cb.dry_run(form_values(console), console, lang="zh", runner=lambda argv, **kw: types.SimpleNamespace(
        returncode=1, stdout="", stderr=error_lines(said_of(err))))
    assert problem_text(err, "zh") in html.unescape(failed)


def _zip(path: Path, members: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    return path


UPLOAD_MISTAKES: dict[str, Callable[[Path, pytest.MonkeyPatch], tuple[Path, str, int]]] = {
    "upload.unsupported": lambda d, m: (_write(d, "tool.sh", "echo hi"), "tool.sh", 1000),
    "upload.no_extension": lambda d, m: (_write(d, "README", "hi"), "README", 1000),
    "upload.too_big": lambda d, m: (_write(d, "big.jsonl", "x" * 2000), "big.jsonl", 1000),
    "upload.not_zip": lambda d, m: (_write(d, "data.zip", "not a zip"), "data.zip", 1000),
    "upload.zip.not_zip": lambda d, m: (_write(d, "data.zip", "not a zip"), "data.zip", 1000),
    "upload.too_many_files": lambda d, m: (m.setattr(datasets, "MAX_ZIP_MEMBERS", 1),
                                           _zip(d / "many.zip", {"a.jsonl": "1", "b.jsonl": "2"}), "many.zip", 1000)[1:],
    "upload.unpacks_too_big": lambda d, m: (_zip(d / "bomb.zip", {"train.jsonl": "x" * 5000}), "bomb.zip", 1000),
    "upload.refused_member": lambda d, m: (_zip(d / "evil.zip", {"../evil.jsonl": "x"}), "evil.zip", 1000),
    "upload.no_dataset": lambda d, m: (_zip(d / "notes.zip", {"notes/readme.md": "hi"}), "notes.zip", 1000),
}


def _keys(said) -> set[str]:
    return {said.key} | {key for value in said.params.values() if hasattr(value, "key") for key in _keys(value)}


@pytest.mark.parametrize("key", sorted(UPLOAD_MISTAKES))
def test_every_upload_refusal_is_the_consoles_own_words_in_chinese(key, tmp_path, monkeypatch):
    path, name, limit = UPLOAD_MISTAKES[key](tmp_path, monkeypatch)
    uploads = tmp_path / "uploads"
    with pytest.raises(datasets.UploadError) as info:
        saved = datasets.save_upload(path, name, uploads, limit)
        datasets.upload_dataset(saved)
    said = info.value.said
    assert key in _keys(said) and str(said) == str(info.value)
    assert_chinese(str(said), action_text(said, "zh"))


def test_every_upload_text_is_made():
    assert {key for key in TEXTS if key.startswith("upload.")} == set(UPLOAD_MISTAKES)
    assert english_words(TEXTS["upload.zip.not_zip"][1]) == []


def test_a_records_place_is_as_small_as_its_text_and_reads_its_parameters_back():
    """Every record keeps its place: a Where holds no attributes (its kind's class names the id, the
    text holds the parameters), so a million records do not carry a million parameter dicts (708
    bytes a place when it kept them, 133 now, 85 a plain str). A file whose name holds ' line ' reads back."""
    import copy
    import pickle
    import sys

    from core.data.files import Where, line_of
    place = line_of("data/a line of text.jsonl", 12)
    assert place == Where("data.at_line", file="data/a line of text.jsonl", line=12) == "data/a line of text.jsonl line 12"
    assert not hasattr(place, "__dict__") and sys.getsizeof(place) <= sys.getsizeof(str(place)) + 64
    assert place.key == "data.at_line" and place.params == {"file": "data/a line of text.jsonl", "line": 12}
    for again in (pickle.loads(pickle.dumps(place)), copy.deepcopy(place)):
        assert again == place and again.key == place.key and again.params == place.params
    record = Where("data.at_record", file="data/x.json", prefix="", index=3)
    assert str(record) == "data/x.json record [3]" and record.params == {"file": "data/x.json", "prefix": "", "index": 3}
