"""dataset_info.json catalogues (LLaMA-Factory's layout): datasets chosen by name, their columns and
tags honoured, lists of files, num_samples, preference entries refused under SFT, and broken entries
named (entry, field, file) while the others stay usable."""
import json
from pathlib import Path

import numpy as np
import pytest

import core.data.pipeline as data
from core.spec.config import DataSettings
from core.data.files import DataError
from core.data.catalog import read_catalog
from core.data.tokenizer import Tokenizer
from tests.core.test_data import make_tokenizer_dir, raises, write_jsonl

QA = [{"question": f"Add {i} and 2.", "context": f"{i} apples", "answer": f"{i + 2}", "sys": "Be brief.",
       "hist": [["Hi", "Hello"]]} for i in range(6)]
CHAT = [{"messages": [{"role": "system", "content": "Be kind."}, {"role": "user", "content": f"Who is {i}?"},
                      {"role": "assistant", "content": f"Number {i}."}]} for i in range(4)]
INFO = {
    "qa": {"file_name": "qa.json", "columns": {"prompt": "question", "query": "context", "response": "answer",
                                               "system": "sys", "history": "hist"}},
    "chat": {"file_name": "chat.jsonl", "formatting": "sharegpt", "columns": {"messages": "messages"},
             "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user",
                      "assistant_tag": "assistant", "system_tag": "system"}},
    "two_files": {"file_name": ["part_a.jsonl", "part_b.jsonl"], "num_samples": 5},
    "pairs": {"file_name": "pairs.jsonl", "ranking": True,
              "columns": {"prompt": "instruction", "chosen": "chosen", "rejected": "rejected"}},
    "kto": {"file_name": "kto.jsonl", "columns": {"prompt": "instruction", "response": "output", "kto_tag": "label"}},
    "hub": {"hf_hub_url": "someone/dataset"},
    "script": {"script_url": "my_loader"},
    "missing": {"file_name": "nope.json"},
    "odd": {"file_name": "qa.json", "formatting": "openai"},
    "bad_key": {"file_name": "qa.json", "columns": {"question": "question"}},
    "bad_column": {"file_name": "qa.json", "columns": {"prompt": "questoin", "response": "answer"}},
}


@pytest.fixture(scope="module")
def tok(tmp_path_factory) -> Tokenizer:
    return Tokenizer.from_dir(make_tokenizer_dir(tmp_path_factory.mktemp("tok")))


@pytest.fixture(scope="module")
def catalog(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("catalog")
    (folder / "qa.json").write_text(json.dumps(QA), encoding="utf-8")
    write_jsonl(folder / "chat.jsonl", CHAT)
    write_jsonl(folder / "part_a.jsonl", [{"instruction": f"A{i}", "output": f"a{i}"} for i in range(3)])
    write_jsonl(folder / "part_b.jsonl", [{"instruction": f"B{i}", "output": f"b{i}"} for i in range(3)])
    write_jsonl(folder / "pairs.jsonl", [{"instruction": "Hi", "chosen": "Hello", "rejected": "Go away"}])
    write_jsonl(folder / "kto.jsonl", [{"instruction": "Hi", "output": "Hello", "label": True}])
    (folder / "dataset_info.json").write_text(json.dumps(INFO, indent=2), encoding="utf-8")
    return folder


def settings(catalog: Path, dataset, **changes) -> DataSettings:
    return DataSettings(**{"train_file": str(catalog), "dataset": dataset, "validation_file": None,
                           "test_file": None, "validation_fraction": 0.2, **changes})


def train_samples(tok, config: DataSettings):
    splits = data.load_splits(config, tok, 0, cache_dir=None)
    return splits.train + splits.validation, splits.stats


def test_entries_are_listed_with_their_problems(catalog):
    entries = {e.name: e for e in read_catalog(catalog)}
    assert list(entries) == list(INFO)
    assert [n for n, e in entries.items() if e.loadable] == ["qa", "chat", "two_files", "pairs", "kto", "bad_column"]
    info = catalog / "dataset_info.json"
    assert entries["qa"].formatting == "alpaca" and entries["chat"].formatting == "sharegpt"
    assert entries["two_files"].size_bytes == (catalog / "part_a.jsonl").stat().st_size * 2
    assert entries["hub"].problem == (f"{info}: dataset 'hub': field 'hf_hub_url': someone/dataset is on the Hugging Face "
                                      "hub; this console reads local files only; download it and name it in 'file_name'")
    assert entries["script"].problem == (f"{info}: dataset 'script': field 'script_url': my_loader is a loading "
                                         "script; scripts are not run here; convert its data to a file and name it in "
                                         "'file_name'")
    assert entries["missing"].problem == f"{info}: dataset 'missing': field 'file_name': {catalog / 'nope.json'} not found"
    assert entries["odd"].problem == f"{info}: dataset 'odd': field 'formatting' is 'openai'; valid: alpaca, sharegpt"
    assert entries["bad_key"].problem.startswith(f"{info}: dataset 'bad_key': field 'columns.question' is not a "
                                                 "column name of alpaca formatting; valid: prompt, query, response")
    assert entries["pairs"].preference == "ranking" and entries["pairs"].columns["chosen"] == "chosen"
    assert entries["kto"].preference == "kto" and entries["kto"].columns["label"] == "label"


def test_mapped_alpaca_columns_train_as_the_plain_names_do(tmp_path, tok, catalog):
    plain = write_jsonl(tmp_path / "plain.jsonl", [{"instruction": r["question"], "input": r["context"],
                                                    "output": r["answer"], "system": r["sys"], "history": r["hist"]}
                                                   for r in QA])
    mapped, stats = train_samples(tok, settings(catalog, "qa"))
    expected, _ = train_samples(tok, DataSettings(train_file=str(plain), validation_file=None, test_file=None,
                                                  validation_fraction=0.2))
    assert stats.train.format == "alpaca" and len(mapped) == 6 and stats.train.ignored_fields == {}
    assert [s.input_ids.tolist() for s in mapped] == [s.input_ids.tolist() for s in expected]


def test_sharegpt_tags_map_openai_style_turns(tmp_path, tok, catalog):
    mapped, stats = train_samples(tok, settings(catalog, "chat"))
    expected, _ = train_samples(tok, DataSettings(train_file=str(write_jsonl(tmp_path / "c.jsonl", CHAT)),
                                                  validation_file=None, test_file=None, validation_fraction=0.2))
    assert stats.train.format == "sharegpt"
    assert all(np.array_equal(a.labels, b.labels) and np.array_equal(a.input_ids, b.input_ids)
               for a, b in zip(mapped, expected)) and len(mapped) == 4


def test_several_datasets_a_file_list_and_num_samples(tok, catalog):
    both, stats = train_samples(tok, settings(catalog, ["qa", "chat"]))
    assert len(both) == 10 and stats.train.format == "alpaca+sharegpt"
    drawn, stats = train_samples(tok, settings(catalog, "two_files"))
    assert stats.train.records + stats.validation.records == 5  # num_samples of the 6 records in two files
    again, _ = train_samples(tok, settings(catalog, "two_files"))
    assert [s.input_ids.tolist() for s in drawn] == [s.input_ids.tolist() for s in again]  # seeded


def test_a_missing_column_names_entry_field_and_file_and_others_still_load(tok, catalog):
    raises([f"{catalog / 'dataset_info.json'}: dataset 'bad_column'", "field 'columns.prompt' names the column 'questoin'",
            str(catalog / "qa.json"), "lacks"], data.load_splits, settings(catalog, "bad_column"), tok, 0, cache_dir=None)
    raises(["dataset 'missing'", "field 'file_name'", "nope.json not found"], data.load_splits,
           settings(catalog, ["qa", "missing"]), tok, 0, cache_dir=None)
    assert len(train_samples(tok, settings(catalog, "qa"))[0]) == 6


@pytest.mark.parametrize("name, what", [("pairs", "chosen/rejected pairs (ranking: true)"),
                                        ("kto", "KTO data (a 'label' label column)")])
def test_preference_entries_are_never_trained_as_plain_answers(tok, catalog, name, what):
    message = raises([f"dataset {name!r}", f"this is preference data, {what}", "train.objective dpo, simpo, orpo or kto"],
                     data.load_splits, settings(catalog, name), tok, 0, cache_dir=None)
    assert "Choose another dataset" in message


def test_catalogue_without_a_choice_or_with_an_unknown_one(tok, catalog):
    raises([f"{catalog}: a dataset catalogue (dataset_info.json)", "data.dataset", "qa, chat, two_files"],
           data.load_splits, settings(catalog, None), tok, 0, cache_dir=None)
    raises(["data.dataset: no dataset 'nope'", "datasets: qa, chat"], data.load_splits, settings(catalog, "nope"),
           tok, 0, cache_dir=None)


def test_catalogue_that_is_not_json_names_file_and_line(tmp_path):
    (tmp_path / "dataset_info.json").write_text('{\n  "a": {"file_name": "a.json"},\n  oops\n}', encoding="utf-8")
    raises([f"{tmp_path / 'dataset_info.json'} line 3: not JSON"], read_catalog, tmp_path)


def test_cache_follows_the_chosen_dataset(tmp_path, tok, catalog):
    first = data.load_splits(settings(catalog, "qa"), tok, 0, cache_dir=tmp_path)
    other = data.load_splits(settings(catalog, "chat"), tok, 0, cache_dir=tmp_path)
    again = data.load_splits(settings(catalog, "qa"), tok, 0, cache_dir=tmp_path)
    assert not other.from_cache and again.from_cache
    assert (first.stats.train.format, other.stats.train.format) == ("alpaca", "sharegpt")


TOOLS = [{"name": "weather", "description": "today's weather", "parameters": {"type": "object"}}]
CALL = {"name": "weather", "arguments": {"city": "Paris"}}
TOOL_TEMPLATE = ("{% if tools %}<|im_start|>system\nTools: {{ tools | tojson }}<|im_end|>\n{% endif %}"
                 "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{% if m.get('tool_calls') %}"
                 "{{ m['tool_calls'] | tojson }}{% else %}{{ m['content'] }}{% endif %}<|im_end|>\n{% endfor %}"
                 "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def test_function_and_observation_tags_and_the_tools_column_train_as_the_plain_names_do(tmp_path):
    """LLaMA-Factory's tool-calling layout under other names (a `tool_call` / `tool_result` role, the
    tools in a `functions` column): the same tokens and labels as plain ShareGPT's `function_call`,
    `observation` and `tools`; an alpaca entry's `tools` column reaches the template too."""
    tok = Tokenizer.from_dir(make_tokenizer_dir(tmp_path / "tok", TOOL_TEMPLATE))
    plain = [{"conversations": [{"from": "human", "value": f"Weather in city {i}?"},
                                {"from": "function_call", "value": json.dumps(CALL)},
                                {"from": "observation", "value": "sunny"}, {"from": "gpt", "value": "It is sunny."}],
              "tools": json.dumps(TOOLS)} for i in range(5)]
    mapped = [{"msgs": [{"role": "user", "content": f"Weather in city {i}?"},
                        {"role": "tool_call", "content": json.dumps(CALL)}, {"role": "tool_result", "content": "sunny"},
                        {"role": "assistant", "content": "It is sunny."}], "functions": json.dumps(TOOLS)}
              for i in range(5)]
    folder = tmp_path / "catalog"
    folder.mkdir()
    write_jsonl(folder / "calls.jsonl", mapped)
    write_jsonl(folder / "qa.jsonl", [{"q": f"Weather {i}?", "a": "Sunny.", "functions": TOOLS} for i in range(5)])
    (folder / "dataset_info.json").write_text(json.dumps({
        "calls": {"file_name": "calls.jsonl", "formatting": "sharegpt",
                  "columns": {"messages": "msgs", "tools": "functions"},
                  "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user",
                           "assistant_tag": "assistant", "function_tag": "tool_call", "observation_tag": "tool_result"}},
        "qa_tools": {"file_name": "qa.jsonl", "columns": {"prompt": "q", "response": "a", "tools": "functions"}}}),
        encoding="utf-8")
    got, stats = train_samples(tok, settings(folder, "calls"))
    expected, _ = train_samples(tok, DataSettings(train_file=str(write_jsonl(tmp_path / "plain.jsonl", plain)),
                                                  validation_file=None, test_file=None, validation_fraction=0.2))
    assert stats.train.ignored_fields == {} and len(got) == 5
    assert all(np.array_equal(a.input_ids, b.input_ids) and np.array_equal(a.labels, b.labels)
               for a, b in zip(got, expected))
    shown = tok.decode(got[0].input_ids.tolist())
    assert '"name": "weather", "arguments": {"city": "Paris"}' in shown and "tool\nsunny" in shown
    assert 'Tools: [{"type": "function", "function": {"name": "weather"' in shown
    qa, stats = train_samples(tok, settings(folder, "qa_tools"))
    assert stats.train.format == "alpaca" and stats.train.ignored_fields == {}
    assert tok.decode(qa[0].input_ids.tolist()).startswith('system\nTools: [{"type": "function"')
