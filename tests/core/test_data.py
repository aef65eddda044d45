"""core.data.pipeline: readers, formats, prompt masking, truncation, splits, stats, cache and batching.

A tiny ChatML tokenizer folder is built here (byte-level BPE trained in well under a second), so
no test depends on the shipped demo files except the one optional check at the end."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer as BackendTokenizer
from tokenizers import decoders, models, pre_tokenizers, processors, trainers

import core.data.pipeline as data
from core.spec.config import DataSettings
from core.data.pipeline import IGNORE_INDEX, BatchIterator, Sample
from core.data.files import DataError
from core.data.tokenizer import Tokenizer

from tests import skips

REPO_ROOT = Path(__file__).resolve().parents[2]
CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content']"
    " + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
SENTENCES = [
    "Translate to French: the cat sleeps. Le chat dort.",
    "What is the capital of France? Paris is the capital of France.",
    "Summarise: a long story about a fox and a dog. A fox met a dog.",
    "system user assistant: you are a helpful assistant.",
    "Numbers 0123456789 and symbols #$%&*()[]{} appear too.",
]
ROWS = [
    {"instruction": "What is the capital of France?", "input": "", "output": "Paris."},
    {"instruction": "Translate to French.", "input": "the cat sleeps", "output": "Le chat dort."},
    {"instruction": "Add the numbers.", "input": "2 and 3", "output": "5"},
    {"instruction": "Summarise.", "input": "A fox met a dog.", "output": "Fox meets dog."},
]


# --- tokenizer folder and file helpers -----------------------------------------------------------

def make_tokenizer_dir(path: Path, chat_template: str = CHATML) -> Path:
    """A ChatML tokenizer folder: <|endoftext|>=0 (pad), <|im_start|>=1, <|im_end|>=2 (eos)."""
    backend = BackendTokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    backend.train_from_iterator(SENTENCES * 3, trainer)
    backend.post_processor = processors.ByteLevel(trim_offsets=False)
    path.mkdir(parents=True, exist_ok=True)
    backend.save(str(path / "tokenizer.json"))
    config = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "bos_token": None,
              "chat_template": chat_template}
    (path / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def tok(tmp_path_factory) -> Tokenizer:
    return Tokenizer.from_dir(make_tokenizer_dir(tmp_path_factory.mktemp("tok")))


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_csv(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    import csv
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def write_parquet(path: Path, rows) -> Path:
    pd = skips.module("pandas")
    skips.module("pyarrow")
    pd.DataFrame(rows).to_parquet(path)
    return path


def settings(train: Path, validation: Path | None = None, test: Path | None = None, **changes) -> DataSettings:
    base = dict(train_file=str(train), validation_file=str(validation) if validation else None,
                test_file=str(test) if test else None, validation_fraction=0.0 if validation else 0.25,
                max_seq_len=64)
    return DataSettings(**{**base, **changes})


def labelled_text(tok: Tokenizer, sample: Sample) -> str:
    return tok.decode(sample.input_ids[sample.labels != IGNORE_INDEX], skip_special_tokens=False)


def raises(match_parts: list[str], func, *args, **kwargs) -> str:
    """Call and return the DataError message, asserting it contains every part."""
    with pytest.raises(DataError) as info:
        func(*args, **kwargs)
    message = str(info.value)
    for part in match_parts:
        assert part in message, f"{part!r} not in {message!r}"
    return message


def read_alpaca_samples(path: Path, tok: Tokenizer, fmt: str = "auto") -> list[Sample]:
    file = data.read_data_file(path)
    return data.tokenize_records(file.records, data.resolve_format(file, fmt), tok, 64).samples


# --- readers -------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["jsonl", "json", "json_data", "csv", "parquet"])
def test_every_reader_yields_the_same_alpaca_samples(tmp_path, tok, kind):
    reference = read_alpaca_samples(write_jsonl(tmp_path / "ref.jsonl", ROWS), tok)
    if kind == "jsonl":
        path = write_jsonl(tmp_path / "t.jsonl", ROWS)
    elif kind == "json":
        path = tmp_path / "t.json"
        path.write_text(json.dumps(ROWS, indent=2), encoding="utf-8")
    elif kind == "json_data":
        path = tmp_path / "t.json"
        path.write_text(json.dumps({"data": ROWS, "version": 1}), encoding="utf-8")
    elif kind == "csv":
        path = write_csv(tmp_path / "t.csv", ["instruction", "input", "output"],
                         [[r["instruction"], r["input"], r["output"]] for r in ROWS])
    else:
        path = write_parquet(tmp_path / "t.parquet", ROWS)
    samples = read_alpaca_samples(path, tok)
    assert len(samples) == len(ROWS)
    for got, want in zip(samples, reference):
        np.testing.assert_array_equal(got.input_ids, want.input_ids)
        np.testing.assert_array_equal(got.labels, want.labels)


@pytest.mark.parametrize("split, texts, lines", [
    ("line", ["First doc line one.", "line two.", "Second doc.", "Third."], ["1", "2", "6", "8"]),
    ("paragraph", ["First doc line one.\nline two.", "Second doc.", "Third."], ["1", "6", "8"]),
    ("document", ["First doc line one.\nline two.\n\n\n  \nSecond doc.\n\nThird."], ["1"]),
])
def test_txt_records_follow_text_split_named_by_first_line(tmp_path, split, texts, lines):
    path = tmp_path / "corpus.txt"
    path.write_text("First doc line one.\nline two.\n\n\n  \nSecond doc.\n\nThird.", encoding="utf-8")
    file = data.read_data_file(path, text_split=split)
    assert [r.fields["text"] for r in file.records] == texts
    assert [r.where.split()[-1] for r in file.records] == lines
    assert data.resolve_format(file, "auto") == "text"


def test_txt_of_blank_lines_only_is_named(tmp_path):
    path = tmp_path / "blank.txt"
    path.write_text("\n  \n\n", encoding="utf-8")
    raises([str(path), "no text left after splitting by line", "data.text_split"], data.read_data_file, path)


def test_chat_in_csv_cells_and_parquet_structs(tmp_path, tok):
    chat = [{"role": "user", "content": "Capital of France?"}, {"role": "assistant", "content": "Paris."}]
    reference = read_alpaca_samples(write_jsonl(tmp_path / "c.jsonl", [{"messages": chat}]), tok)[0]
    csv_path = write_csv(tmp_path / "c.csv", ["messages"], [[json.dumps(chat)]])
    parquet_path = write_parquet(tmp_path / "c.parquet", [{"messages": chat}])
    for path in (csv_path, parquet_path):
        sample = read_alpaca_samples(path, tok)[0]
        np.testing.assert_array_equal(sample.input_ids, reference.input_ids)
        np.testing.assert_array_equal(sample.labels, reference.labels)


def test_parquet_null_input_counts_as_absent(tmp_path, tok):
    rows = [{"instruction": "What is the capital of France?", "input": None, "output": "Paris."}]
    sample = read_alpaca_samples(write_parquet(tmp_path / "n.parquet", rows), tok)[0]
    reference = read_alpaca_samples(write_jsonl(tmp_path / "n.jsonl", ROWS[:1]), tok)[0]
    assert sample.input_ids.tolist() == reference.input_ids.tolist()


# --- bad input: every message names the file and the line / record / field --------------------------

def test_malformed_jsonl_line_names_line_and_json_error(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(ROWS[0]) + "\n\n" + '{"instruction": "x", "output": }\n', encoding="utf-8")
    raises([str(path), "line 3", "invalid JSON", "column"], data.read_data_file, path)


def test_jsonl_record_that_is_not_an_object(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(ROWS[0]) + "\n[1, 2]\n", encoding="utf-8")
    raises([str(path), "line 2", "JSON object", "an array"], data.read_data_file, path)


def test_json_array_names_the_record_index(tmp_path, tok):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([ROWS[0], "oops"]), encoding="utf-8")
    raises([str(path), "record [1]", "JSON object"], data.read_data_file, path)
    path.write_text(json.dumps({"data": [ROWS[0], {"instruction": "x", "output": 5}]}), encoding="utf-8")
    file = data.read_data_file(path)
    raises([str(path), "record data[1]", "'output'", "must be a string"],
           data.tokenize_records, file.records, "alpaca", tok, 64)


def test_invalid_json_file_names_the_line_and_hints_at_jsonl(tmp_path):
    path = tmp_path / "lines.json"
    write_jsonl(path, ROWS[:2])
    raises([str(path), "line 2", "Extra data", ".jsonl"], data.read_data_file, path)
    path.write_text(json.dumps({"rows": ROWS}), encoding="utf-8")
    raises([str(path), "array of objects", "'rows'"], data.read_data_file, path)


@pytest.mark.parametrize("name", ["e.jsonl", "e.json", "e.csv"])  # .txt: test_txt_of_blank_lines_only_is_named
def test_empty_file_is_an_error(tmp_path, name):
    path = tmp_path / name
    path.write_text("\n  \n", encoding="utf-8")
    raises([str(path), "no records", "instruction", "conversations"], data.read_data_file, path)


def test_unknown_extension_lists_supported_ones(tmp_path):
    path = tmp_path / "rows.xlsx"
    path.write_bytes(b"")
    raises([str(path), "'.xlsx'", ".jsonl", ".json", ".csv", ".parquet", ".txt"], data.read_data_file, path)


def test_missing_file_is_named(tmp_path):
    raises([str(tmp_path / "nope.jsonl"), "not found"], data.read_data_file, tmp_path / "nope.jsonl")


def test_non_utf8_names_the_line(tmp_path):
    path = tmp_path / "latin.jsonl"
    path.write_bytes(json.dumps(ROWS[0]).encode() + b"\n" + '{"text": "caf\xe9"}'.encode("latin-1") + b"\n")
    raises([str(path), "line 2", "UTF-8"], data.read_data_file, path)


def test_csv_wrong_columns_lists_found_and_expected(tmp_path):
    path = write_csv(tmp_path / "bad.csv", ["question", "answer"], [["q", "a"]])
    raises([str(path), "['question', 'answer']", "alpaca: instruction, output", "chat: messages", "text: text"],
           data.resolve_format, data.read_data_file(path), "auto")
    raises([str(path), "found columns ['question', 'answer']", "'alpaca' needs instruction, output"],
           data.resolve_format, data.read_data_file(path), "alpaca")


def test_parquet_wrong_columns_lists_found_and_expected(tmp_path):
    path = write_parquet(tmp_path / "bad.parquet", [{"prompt": "p", "completion": "c"}])
    raises([str(path), "columns ['prompt', 'completion']", "alpaca: instruction, output"],
           data.resolve_format, data.read_data_file(path), "auto")


def test_csv_row_with_wrong_number_of_values_names_its_line(tmp_path):
    path = tmp_path / "ragged.csv"
    path.write_text('instruction,output\n"multi\nline",ok\nx,y,z\n', encoding="utf-8")
    raises([str(path), "line 4", "3 values", "2 columns"], data.read_data_file, path)


def test_csv_records_are_named_by_the_line_they_start_on(tmp_path, tok):
    path = tmp_path / "multi.csv"
    path.write_text('instruction,output\n"multi\nline",ok\n\nx,\n', encoding="utf-8")
    file = data.read_data_file(path)
    assert [r.where.split()[-1] for r in file.records] == ["2", "5"]
    raises([str(path), "line 5", "'output' is empty"], data.tokenize_records, file.records, "alpaca", tok, 64)


def test_missing_required_field_names_line_and_field(tmp_path, tok):
    path = write_jsonl(tmp_path / "m.jsonl", [ROWS[0], {"instruction": "no output here"}])
    file = data.read_data_file(path)
    raises([str(path), "line 2", "missing field 'output'", "'instruction' and 'output'"],
           data.tokenize_records, file.records, "alpaca", tok, 64)


def test_non_string_field_names_line_and_field(tmp_path, tok):
    path = write_jsonl(tmp_path / "n.jsonl", [{"instruction": ["a", "list"], "output": "x"}])
    file = data.read_data_file(path)
    raises([str(path), "line 1", "field 'instruction' must be a string", "an array"],
           data.tokenize_records, file.records, "alpaca", tok, 64)


@pytest.mark.parametrize("messages, parts", [
    ([{"role": "user", "content": "hi"}, {"role": "bot", "content": "yo"}],
     ["field 'messages[1].role' is 'bot'", "system, user, assistant"]),
    ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": 3}],
     ["field 'messages[1].content' must be a string"]),
    ([{"role": "user", "content": "hi"}], ["no assistant turn"]),
    ([], ["field 'messages' is empty"]),
    ([{"role": "assistant", "content": "first"}], ["field 'messages[0]' is an assistant turn", "system or user"]),
    (["hi"], ["field 'messages[0]' must be an object"]),
])
def test_bad_chat_records_name_line_and_field(tmp_path, tok, messages, parts):
    good = {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}
    path = write_jsonl(tmp_path / "chat.jsonl", [good, good, {"messages": messages}])
    file = data.read_data_file(path)
    raises([str(path), "line 3", *parts], data.tokenize_records, file.records, "chat", tok, 64)


def test_auto_detects_from_first_record_then_requires_all_to_match(tmp_path, tok):
    path = write_jsonl(tmp_path / "mixed.jsonl", [ROWS[0], ROWS[1], {"text": "raw text"}])
    file = data.read_data_file(path)
    assert data.resolve_format(file, "auto") == "alpaca"
    raises([str(path), "line 3", "missing field 'instruction'"],
           data.tokenize_records, file.records, "alpaca", tok, 64)
    for name, first in (("chat", {"messages": []}), ("text", {"text": "x"})):
        file = data.read_data_file(write_jsonl(tmp_path / f"{name}.jsonl", [first]))
        assert data.resolve_format(file, "auto") == name


def test_auto_with_unknown_keys_lists_what_is_expected(tmp_path):
    path = write_jsonl(tmp_path / "u.jsonl", [{"prompt": "p", "completion": "c"}])
    raises([str(path), "line 1", "['prompt', 'completion']",
            "alpaca: instruction, output (input, system, history, tools optional)", "sharegpt: conversations",
            "data.columns={instruction: prompt, output: completion}"],
           data.resolve_format, data.read_data_file(path), "auto")


# --- rendering and masking -----------------------------------------------------------------------

def test_alpaca_labels_are_exactly_output_and_im_end(tmp_path, tok):
    path = write_jsonl(tmp_path / "a.jsonl", ROWS)
    for row, sample in zip(ROWS, read_alpaca_samples(path, tok)):
        assert sample.input_ids.dtype == np.int32 and sample.labels.dtype == np.int32
        assert len(sample.labels) == len(sample.input_ids)
        assert labelled_text(tok, sample) == row["output"] + "<|im_end|>"
        labelled = sample.labels != IGNORE_INDEX
        np.testing.assert_array_equal(sample.labels[labelled], sample.input_ids[labelled])
        user = row["instruction"] + ("\n\n" + row["input"] if row["input"] else "")
        prompt = tok.apply_chat_template([{"role": "user", "content": user}], add_generation_prompt=True)
        first = int(np.argmax(labelled))
        assert tok.decode(sample.input_ids[:first], skip_special_tokens=False) == prompt
        # the "\n" ChatML writes after <|im_end|> is in the input but not trained
        assert tok.decode(sample.input_ids[-1:]) == "\n" and sample.labels[-1] == IGNORE_INDEX


def test_multi_turn_chat_labels_every_assistant_turn_only(tmp_path, tok):
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Capital of France?"},
        {"role": "assistant", "content": "Paris."},
        {"role": "user", "content": "And Italy?"},
        {"role": "assistant", "content": "Rome."},
    ]
    sample = read_alpaca_samples(write_jsonl(tmp_path / "c.jsonl", [{"messages": messages}]), tok)[0]
    labelled = (sample.labels != IGNORE_INDEX).astype(int)
    spans = np.flatnonzero(np.diff(np.concatenate([[0], labelled, [0]])))  # starts and ends of runs
    texts = [tok.decode(sample.input_ids[a:b], skip_special_tokens=False) for a, b in zip(spans[::2], spans[1::2])]
    assert texts == ["Paris.<|im_end|>", "Rome.<|im_end|>"]
    full = tok.apply_chat_template(messages)
    assert tok.decode(sample.input_ids, skip_special_tokens=False) == full


def test_without_mask_prompt_every_token_is_labelled(tmp_path, tok):
    file = data.read_data_file(write_jsonl(tmp_path / "a.jsonl", ROWS))
    sample = data.tokenize_records(file.records, "alpaca", tok, 64, mask_prompt=False).samples[0]
    np.testing.assert_array_equal(sample.labels, sample.input_ids)


def test_text_is_encoded_with_eos_and_fully_labelled(tmp_path, tok):
    path = write_jsonl(tmp_path / "t.jsonl", [{"text": "The cat sleeps."}])
    sample = read_alpaca_samples(path, tok)[0]
    assert sample.input_ids.tolist() == tok.encode("The cat sleeps.") + [tok.eos_token_id]
    np.testing.assert_array_equal(sample.labels, sample.input_ids)


def test_other_template_styles_label_the_answer_turn(tmp_path):
    """A Llama-2-like template (no newline after EOS) and one without an end token in the turn."""
    eos_after = ("{% for m in messages %}{% if m['role'] == 'user' %}{{ '[INST] ' + m['content'] + ' [/INST]' }}"
                 "{% else %}{{ ' ' + m['content'] + '<|im_end|>' }}{% endif %}{% endfor %}")
    no_end = ("{% for m in messages %}{{ m['role'] + ': ' + m['content'] + '\\n' }}{% endfor %}"
              "{% if add_generation_prompt %}{{ 'assistant: ' }}{% endif %}")
    messages = [{"role": "user", "content": "Capital of France?"}, {"role": "assistant", "content": "Paris."}]
    record = data.Record("mem line 1", {"messages": messages})
    for name, template, want in (("eos", eos_after, " Paris.<|im_end|>"), ("plain", no_end, "Paris.\n")):
        tok = Tokenizer.from_dir(make_tokenizer_dir(tmp_path / name, template))
        sample = data.tokenize_records([record], "chat", tok, 64).samples[0]
        assert labelled_text(tok, sample) == want


def test_template_that_rewrites_the_prompt_is_a_clear_error(tmp_path):
    rewriting = CHATML.replace("'<|im_start|>assistant\\n'", "'<|im_start|>assistant\\nThinking: '")
    tok = Tokenizer.from_dir(make_tokenizer_dir(tmp_path / "rw", rewriting))
    file = data.read_data_file(write_jsonl(tmp_path / "a.jsonl", ROWS))
    raises([str(file.path), "line 1", "assistant turn 'output'", "not a prefix", "mask_prompt=false"],
           data.tokenize_records, file.records, "alpaca", tok, 64)
    data.tokenize_records(file.records, "alpaca", tok, 64, mask_prompt=False)  # the fallback works


# --- truncation ----------------------------------------------------------------------------------

def test_long_text_is_cut_into_max_seq_len_chunks_not_truncated(tmp_path, tok):
    texts = ["The cat sleeps.", "What is the capital of France? " * 5, "A fox met a dog. " * 6]
    file = data.read_data_file(write_jsonl(tmp_path / "t.jsonl", [{"text": t} for t in texts]))
    full = data.tokenize_records(file.records, "text", tok, 512)
    cut = data.tokenize_records(file.records, "text", tok, 12)
    assert full.truncated == cut.truncated == 0
    assert cut.chunked == sum(len(s) > 12 for s in full.samples) == 2
    assert cut.full_lengths == [len(s) for s in full.samples]
    for index, whole in enumerate(full.samples):  # the chunks of a record are the record, in order
        chunks = [s for s, source in zip(cut.samples, cut.sources) if source == index]
        ids = whole.input_ids.tolist()
        kept = [t for c in chunks for t in c.input_ids.tolist()]
        assert kept == ids[:len(kept)] and len(ids) - len(kept) <= 1  # a one-token tail trains nothing
        assert all(len(c) <= 12 and (c.labels == c.input_ids).all() for c in chunks)


# --- splits, stats, test records -----------------------------------------------------------------

def many_rows(n: int) -> list[dict]:
    return [{"instruction": f"Add {i} and {i + 1}.", "output": str(2 * i + 1)} for i in range(n)]


def train_ids(splits) -> list[list[int]]:
    return [s.input_ids.tolist() for s in splits.train]


def test_fraction_split_is_seeded_and_stable(tmp_path, tok):
    config = settings(write_jsonl(tmp_path / "train.jsonl", many_rows(20)), validation_fraction=0.25)
    first = data.load_splits(config, tok, seed=3, cache_dir=None)
    again = data.load_splits(config, tok, seed=3, cache_dir=None)
    other = data.load_splits(config, tok, seed=4, cache_dir=None)
    assert (len(first.train), len(first.validation)) == (15, 5)
    assert train_ids(first) == train_ids(again)
    assert train_ids(first) != train_ids(other)
    assert first.stats.validation_source == "fraction" and first.stats.validation_in_train == 0


def test_zero_validation_samples_is_an_error(tmp_path, tok):
    path = write_jsonl(tmp_path / "train.jsonl", many_rows(4))
    raises([str(path), "validation_fraction=0.1", "0 validation samples"],
           data.load_splits, settings(path, validation_fraction=0.1), tok, 0, cache_dir=None)
    raises(["data.validation_file", "no validation data"],
           data.load_splits, settings(path, validation_fraction=0.0), tok, 0, cache_dir=None)


def test_overlap_counts_validation_samples_also_in_train(tmp_path, tok):
    train = write_jsonl(tmp_path / "train.jsonl", many_rows(6))
    rows = [many_rows(6)[1], many_rows(6)[4], {"instruction": "New.", "output": "x"}]
    validation = write_jsonl(tmp_path / "val.jsonl", rows)
    splits = data.load_splits(settings(train, validation), tok, 0, cache_dir=None)
    assert splits.stats.validation_in_train == 2
    assert splits.stats.validation_source == "file"


def test_stats_count_lengths_labels_and_truncation(tmp_path, tok):
    rows = many_rows(8) + [{"instruction": "Summarise.", "output": "A fox met a dog. " * 4}]
    splits = data.load_splits(settings(write_jsonl(tmp_path / "train.jsonl", rows), validation_fraction=0.25,
                                       max_seq_len=32), tok, 0, cache_dir=None)
    stats = splits.stats
    every = splits.train + splits.validation
    assert stats.train.samples + stats.validation.samples == len(rows)
    assert stats.train.truncated + stats.validation.truncated == 1
    split = stats.train if stats.train.truncated else stats.validation
    assert split.overlong_records == 1 and split.overlong_listed[0][0].endswith("train.jsonl line 9")
    assert stats.train.labelled_tokens == sum(int((s.labels != IGNORE_INDEX).sum()) for s in splits.train)
    assert sum(stats.train.histogram_counts) == stats.train.samples
    train = stats.train
    assert train.histogram_edges[-1] > train.max_length >= train.mean_length >= train.min_length
    assert train.histogram_edges[0] == train.min_length and len(train.histogram_counts) == 16
    assert max(len(s) for s in every) == 32 < max(stats.train.max_length, stats.validation.max_length)
    json.dumps(stats.to_dict())  # JSON-able for the console


def test_test_records_hold_generation_prompt_ids_and_answer(tmp_path, tok):
    train = write_jsonl(tmp_path / "train.jsonl", many_rows(8))
    chat = {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
                         {"role": "user", "content": "Capital of France?"},
                         {"role": "assistant", "content": "Paris."}]}
    test_path = write_jsonl(tmp_path / "test.jsonl", [chat])
    splits = data.load_splits(settings(train, test=test_path, validation_fraction=0.25), tok, 0, cache_dir=None)
    record = splits.test_records[0]
    assert record.answer == "Paris."
    want = tok.apply_chat_template(chat["messages"][:3], add_generation_prompt=True, tokenize=True)
    assert record.prompt_ids == want
    assert tok.decode(record.prompt_ids, skip_special_tokens=False).endswith("<|im_start|>assistant\n")
    assert splits.stats.test_records == 1


def test_raw_text_test_file_is_an_error(tmp_path, tok):
    train = write_jsonl(tmp_path / "train.jsonl", many_rows(8))
    test_path = write_jsonl(tmp_path / "test.jsonl", [{"text": "just text"}])
    raises([str(test_path), "alpaca, sharegpt or chat"], data.load_splits,
           settings(train, test=test_path, validation_fraction=0.25), tok, 0, cache_dir=None)


# --- cache ---------------------------------------------------------------------------------------

def test_cache_hits_on_second_load_and_misses_when_a_file_changes(tmp_path, tok):
    cache = tmp_path / "cache"
    train = write_jsonl(tmp_path / "train.jsonl", many_rows(8))
    test_path = write_jsonl(tmp_path / "test.jsonl", ROWS)
    config = settings(train, test=test_path, validation_fraction=0.25)
    first = data.load_splits(config, tok, 0, cache_dir=cache)
    second = data.load_splits(config, tok, 0, cache_dir=cache)
    assert (first.from_cache, second.from_cache) == (False, True)
    assert [p.suffix for p in cache.iterdir()] == [".npz"]  # no temp file left behind
    for name in ("train", "validation"):
        for a, b in zip(getattr(first, name), getattr(second, name), strict=True):
            np.testing.assert_array_equal(a.input_ids, b.input_ids)
            np.testing.assert_array_equal(a.labels, b.labels)
    assert second.test_records == first.test_records
    assert second.stats == first.stats

    write_jsonl(train, many_rows(9))
    assert not data.load_splits(config, tok, 0, cache_dir=cache).from_cache
    assert not data.load_splits(settings(train, test=test_path, validation_fraction=0.25, max_seq_len=32),
                                tok, 0, cache_dir=cache).from_cache
    assert not data.load_splits(config, tok, 1, cache_dir=cache).from_cache  # the seed picks the split
    assert data.load_splits(config, tok, 0, cache_dir=cache).from_cache


def test_cache_misses_for_another_tokenizer_and_survives_corruption(tmp_path, tok):
    cache = tmp_path / "cache"
    config = settings(write_jsonl(tmp_path / "train.jsonl", many_rows(8)), validation_fraction=0.25)
    data.load_splits(config, tok, 0, cache_dir=cache)
    other = Tokenizer.from_dir(make_tokenizer_dir(tmp_path / "other", CHATML.replace("\\n", " ")))
    assert not data.load_splits(config, other, 0, cache_dir=cache).from_cache
    for path in cache.iterdir():
        path.write_bytes(b"not a zip")
    assert not data.load_splits(config, tok, 0, cache_dir=cache).from_cache


# --- batching ------------------------------------------------------------------------------------

def toy_samples(n: int, seed: int = 0) -> list[Sample]:
    """n distinct samples of 5..40 tokens; sample i starts with token i + 10, the first 2 unlabelled."""
    rng = np.random.default_rng(seed)
    samples = []
    for i in range(n):
        ids = np.concatenate([[i + 10], rng.integers(10, 500, rng.integers(4, 40))]).astype(np.int32)
        labels = ids.copy()
        labels[:2] = IGNORE_INDEX
        samples.append(Sample(ids, labels))
    return samples


def first_tokens(batch) -> list[int]:
    return (batch["input_ids"][:, 0] - 10).tolist()


def test_batches_have_fixed_shape_and_masked_padding():
    samples = toy_samples(30)
    iterator = BatchIterator(samples, 4, max_seq_len=256, pad_id=0)
    assert iterator.length == 48  # longest (<= 40) rounded up to 16, shorter than 256
    for _ in range(10):  # crosses an epoch boundary (7 batches per epoch)
        batch = next(iterator)
        assert set(batch) == {"input_ids", "labels", "attention_mask"}
        for array in batch.values():
            assert array.shape == (4, 48) and array.dtype == np.int32
        padding = batch["attention_mask"] == 0
        assert (batch["labels"][padding] == IGNORE_INDEX).all() and (batch["input_ids"][padding] == 0).all()
        for row, index in enumerate(first_tokens(batch)):
            n = len(samples[index])
            assert batch["attention_mask"][row].sum() == n
            np.testing.assert_array_equal(batch["labels"][row, :n], samples[index].labels)


def test_padded_length_rule():
    samples = toy_samples(5)
    longest = max(len(s) for s in samples)
    assert data.padded_length(20, samples) == 24  # max_seq_len 20 -> multiple of 8
    assert data.padded_length(1000, samples) == -(-longest // 16) * 16
    assert data.padded_length(1000, samples, [Sample(np.zeros(70, np.int32), np.zeros(70, np.int32))]) == 80


def test_epoch_is_a_seeded_shuffle_dropping_the_last_incomplete_global_batch():
    iterator = BatchIterator(toy_samples(30), 4, grad_accum_steps=2, seed=5)
    assert iterator.steps_per_epoch == 3 and iterator.micro_batches_per_epoch == 6  # 30 // 8; 6 dropped
    epoch0 = [i for _ in range(6) for i in first_tokens(next(iterator))]
    assert iterator.state() == {"epoch": 1, "index": 0}
    epoch1 = [i for _ in range(6) for i in first_tokens(next(iterator))]
    assert len(set(epoch0)) == 24 and epoch0 != epoch1
    assert epoch0 == np.random.default_rng(5).permutation(30)[:24].tolist()


def test_data_parallel_ranks_together_see_the_dp1_global_batch():
    samples = toy_samples(50)
    micro, accum, world = 2, 3, 2
    single = BatchIterator(samples, micro, grad_accum_steps=accum * world, seed=7)
    ranks = [BatchIterator(samples, micro, grad_accum_steps=accum, world_size=world, rank=r, seed=7)
             for r in range(world)]
    assert single.steps_per_epoch == ranks[0].steps_per_epoch == 50 // 12
    for _ in range(6):  # crosses into the second epoch
        want = [i for _ in range(accum * world) for i in first_tokens(next(single))]
        got = [i for it in ranks for _ in range(accum) for i in first_tokens(next(it))]
        assert got == want


def test_resume_from_state_continues_with_the_next_batch():
    samples = toy_samples(21)
    kwargs = dict(grad_accum_steps=2, seed=11, max_seq_len=64)
    iterator = BatchIterator(samples, 3, **kwargs)
    batches, state = [], None
    for step in range(7):  # 3 micro batches per epoch: crosses two epoch boundaries
        if step == 3:
            state = json.loads(json.dumps(iterator.state()))
        batches.append(next(iterator))
    resumed = BatchIterator.from_state(state, samples, 3, **kwargs)
    for want in batches[3:]:
        got = next(resumed)
        for key in want:
            np.testing.assert_array_equal(got[key], want[key])
    with pytest.raises(ValueError, match="outside"):
        BatchIterator.from_state({"epoch": 0, "index": 99}, samples, 3, **kwargs)


def test_too_few_samples_for_one_global_batch_is_an_error():
    raises(["5 samples", "global batch of 8", "micro_batch_size"], BatchIterator, toy_samples(5), 4,
           grad_accum_steps=1, world_size=2)


def test_eval_batches_cover_every_sample_once_with_masked_padding_rows():
    samples = toy_samples(11)
    batches = list(data.eval_batches(samples, 4, length=48))
    assert len(batches) == 3 and all(b["input_ids"].shape == (4, 48) for b in batches)
    real = [i for b in batches for i, mask in zip(first_tokens(b), b["attention_mask"]) if mask.any()]
    assert real == list(range(11))
    last = batches[-1]
    assert (last["attention_mask"][3:] == 0).all() and (last["labels"][3:] == IGNORE_INDEX).all()
    labelled = sum(int((b["labels"] != IGNORE_INDEX).sum()) for b in batches)
    assert labelled == sum(int((s.labels != IGNORE_INDEX).sum()) for s in samples)


# --- module rules and the shipped demo -----------------------------------------------------------

def test_core_data_does_not_import_mindspore():
    code = ("import sys, core.data.pipeline; bad = [m for m in sys.modules if m.startswith('mindspore')]; "
            "print(bad); sys.exit(bool(bad))")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_shipped_demo_data_loads_with_the_demo_tokenizer(tmp_path):
    tok = Tokenizer.from_dir(REPO_ROOT / "models/tiny-demo")
    demo = REPO_ROOT / "data/demo"
    splits = data.load_splits(settings(demo / "train.jsonl", demo / "validation.jsonl", demo / "test.jsonl",
                                       max_seq_len=512), tok, 0, cache_dir=tmp_path)
    assert splits.stats.train.format == "alpaca" and splits.train and splits.validation and splits.test_records
    row = json.loads((demo / "train.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert labelled_text(tok, splits.train[0]) == row["output"] + "<|im_end|>"
