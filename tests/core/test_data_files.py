"""core.data.files: Hugging Face dataset folders and compressed files, read with pyarrow only.

`datasets` is not installed here, so the folders are written with pyarrow exactly as its
`save_to_disk` lays them out (huggingface/datasets, src/datasets/arrow_dataset.py `save_to_disk`
and arrow_writer.py `ArrowWriter`): Arrow IPC *stream* shards `data-{i:05d}-of-{n:05d}.arrow`
whose schema carries `{"huggingface": {"info": {"features": ...}}}` metadata, a `state.json`
listing the shards under `_data_files`, a `dataset_info.json`; a DatasetDict adds
`dataset_dict.json` ({"splits": [...]}) with one such folder per split. When `datasets` is
installed, one test also checks a folder it wrote itself."""
import gzip
import json
from pathlib import Path

import numpy as np
import pytest

import core.data.pipeline as data
from core.spec.config import DataSettings
from core.data.files import DataError, dataset_splits

from tests import skips
from tests.core.test_data import ROWS, make_tokenizer_dir, raises, write_jsonl
from core.data.tokenizer import Tokenizer

pa = skips.module("pyarrow")
pq = skips.module("pyarrow.parquet")

CHAT_ROWS = [{"conversations": [{"from": "human", "value": f"Question {i}?"}, {"from": "gpt", "value": f"Answer {i}."}],
              "system": "Be brief."} for i in range(10)]


@pytest.fixture(scope="module")
def tok(tmp_path_factory) -> Tokenizer:
    return Tokenizer.from_dir(make_tokenizer_dir(tmp_path_factory.mktemp("tok")))


def save_to_disk(folder: Path, rows: list[dict], shards: int = 1, split: str | None = "train") -> Path:
    """A folder laid out as datasets.Dataset.save_to_disk writes it."""
    folder.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist(rows)
    features = {name: {"dtype": "string", "_type": "Value"} for name in table.column_names}
    schema = table.schema.with_metadata({"huggingface": json.dumps({"info": {"features": features}})})
    bounds = np.linspace(0, len(rows), shards + 1).astype(int)
    names = [f"data-{i:05d}-of-{shards:05d}.arrow" for i in range(shards)]
    for name, lo, hi in zip(names, bounds, bounds[1:]):
        with pa.OSFile(str(folder / name), "wb") as sink, pa.ipc.new_stream(sink, schema) as writer:
            writer.write_table(table.slice(lo, hi - lo).cast(schema))
    state = {"_data_files": [{"filename": n} for n in names], "_fingerprint": "0123456789abcdef",
             "_format_columns": None, "_format_kwargs": {}, "_format_type": None, "_output_all_columns": False,
             "_split": split}
    (folder / "state.json").write_text(json.dumps(state, indent=2, sort_keys=True))
    (folder / "dataset_info.json").write_text(json.dumps({"citation": "", "description": "", "features": features}))
    return folder


def dataset_dict(folder: Path, splits: dict[str, list[dict]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "dataset_dict.json").write_text(json.dumps({"splits": list(splits)}))
    for name, rows in splits.items():
        save_to_disk(folder / name, rows, shards=2, split=name)
    return folder


def parquet_shards(folder: Path, name: str, rows: list[dict], shards: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    bounds = np.linspace(0, len(rows), shards + 1).astype(int)
    paths = []
    for i, (lo, hi) in enumerate(zip(bounds, bounds[1:])):
        path = folder / f"{name}-{i:05d}-of-{shards:05d}.parquet"
        pq.write_table(pa.Table.from_pylist(rows[lo:hi]), path)
        paths.append(path)
    return paths


def ids_of(file, tok) -> list[list[int]]:
    tokenized = data.tokenize_records(file.records, data.resolve_format(file), tok, 128)
    return [s.input_ids.tolist() for s in tokenized.samples]


def test_save_to_disk_folder_reads_every_shard_in_order(tmp_path, tok):
    folder = save_to_disk(tmp_path / "ds", CHAT_ROWS, shards=3)
    file = data.read_data_file(folder)
    assert [r.fields for r in file.records] == CHAT_ROWS
    assert file.split == "train" and file.columns == ["conversations", "system"]
    assert file.records[4].where == f"{folder / 'data-00001-of-00003.arrow'} row index 1"
    reference = data.read_data_file(write_jsonl(tmp_path / "ref.jsonl", CHAT_ROWS))
    assert ids_of(file, tok) == ids_of(reference, tok)


def test_save_to_disk_folder_with_a_missing_shard_names_it(tmp_path):
    folder = save_to_disk(tmp_path / "ds", CHAT_ROWS, shards=3)
    (folder / "data-00001-of-00003.arrow").unlink()
    raises([str(folder), "shard data-00001-of-00003.arrow is missing", "state.json lists 3 shards"],
           data.read_data_file, folder)


def test_dataset_dict_folder_serves_each_role_its_split(tmp_path, tok):
    folder = dataset_dict(tmp_path / "dd", {"train": CHAT_ROWS[:6], "validation": CHAT_ROWS[6:8],
                                            "test": CHAT_ROWS[8:]})
    assert dataset_splits(folder) == ["train", "validation", "test"]
    assert [r.fields for r in data.read_data_file(folder).records] == CHAT_ROWS[:6]
    assert [r.fields for r in data.read_data_file(folder, role="validation").records] == CHAT_ROWS[6:8]
    assert [r.fields for r in data.read_data_file(f"{folder}#test").records] == CHAT_ROWS[8:]
    settings = DataSettings(train_file=str(folder), validation_file=str(folder), test_file=str(folder))
    splits = data.load_splits(settings, tok, 0, cache_dir=None)
    assert (len(splits.train), len(splits.validation), len(splits.test_records)) == (6, 2, 2)
    assert splits.stats.train.format == "sharegpt"


def test_parquet_shard_folder_is_split_by_file_name(tmp_path, tok):
    rows = [dict(r) for r in ROWS * 3]
    parquet_shards(tmp_path / "hub" / "data", "train", rows, 3)
    parquet_shards(tmp_path / "hub" / "data", "test", ROWS[:2], 1)
    folder = tmp_path / "hub"
    assert dataset_splits(folder) == ["test", "train"]
    train = data.read_data_file(folder)
    assert [r.fields for r in train.records] == rows and train.split == "train"
    assert [r.fields for r in data.read_data_file(folder, role="test").records] == ROWS[:2]
    raises([str(folder), "no validation split", "splits: test, train"], data.read_data_file, folder, None, "validation")


def test_parquet_shard_folder_with_a_missing_shard_names_it(tmp_path):
    paths = parquet_shards(tmp_path / "hub", "train", ROWS * 3, 3)
    paths[2].unlink()
    raises([str(tmp_path / "hub"), "split 'train' is missing shard train-00002-of-00003.parquet"],
           data.read_data_file, tmp_path / "hub")


def test_refs_convert_parquet_layout_takes_the_split_from_the_folder(tmp_path):
    for split, rows in (("train", ROWS), ("validation", ROWS[:1])):
        (tmp_path / "conv" / "default" / split).mkdir(parents=True)
        pq.write_table(pa.Table.from_pylist(rows), tmp_path / "conv" / "default" / split / "0000.parquet")
    assert sorted(dataset_splits(tmp_path / "conv")) == ["train", "validation"]
    assert len(data.read_data_file(tmp_path / "conv", role="validation").records) == 1


def test_split_names_like_train_sft_and_the_hash_syntax(tmp_path):
    parquet_shards(tmp_path / "uc" / "data", "train_sft", ROWS, 1)
    parquet_shards(tmp_path / "uc" / "data", "train_gen", ROWS[:1], 1)
    parquet_shards(tmp_path / "uc" / "data", "test_sft", ROWS[:2], 1)
    raises(["cannot tell which split to use for train among", "train_sft", "#<split>"],
           data.read_data_file, tmp_path / "uc")
    assert len(data.read_data_file(f"{tmp_path / 'uc'}#train_sft").records) == len(ROWS)
    assert len(data.read_data_file(tmp_path / "uc", role="test").records) == 2  # the one test_* split
    raises(["no split 'dev'", "train_sft"], data.read_data_file, f"{tmp_path / 'uc'}#dev")


def test_plain_split_files_in_a_folder(tmp_path):
    (tmp_path / "f").mkdir()
    write_jsonl(tmp_path / "f" / "train.jsonl", ROWS)
    write_jsonl(tmp_path / "f" / "dev.jsonl", ROWS[:1])
    assert len(data.read_data_file(tmp_path / "f", role="validation").records) == 1


@pytest.mark.parametrize("name", ["t.jsonl.gz", "t.json.gz"])
def test_gzip_compressed_json(tmp_path, tok, name):
    text = "".join(json.dumps(r) + "\n" for r in ROWS) if name.startswith("t.jsonl") else json.dumps(ROWS)
    path = tmp_path / name
    path.write_bytes(gzip.compress(text.encode("utf-8")))
    file = data.read_data_file(path)
    assert [r.fields for r in file.records] == ROWS
    assert file.records[1].where == (f"{path} line 2" if name.startswith("t.jsonl") else f"{path} record [1]")
    reference = data.read_data_file(write_jsonl(tmp_path / "ref.jsonl", ROWS))
    assert ids_of(file, tok) == ids_of(reference, tok)


def test_malformed_gzip_line_names_the_line(tmp_path):
    path = tmp_path / "bad.jsonl.gz"
    path.write_bytes(gzip.compress(b'{"text": "a"}\n{"text": \n'))
    raises([str(path), "line 2", "invalid JSON"], data.read_data_file, path)
    broken = tmp_path / "broken.jsonl.gz"
    broken.write_bytes(b"not gzip at all")
    raises([str(broken), "not a readable gzip file"], data.read_data_file, broken)


def test_empty_folder_and_a_folder_file_are_explained(tmp_path):
    (tmp_path / "empty").mkdir()
    raises([str(tmp_path / "empty"), "no data files", "state.json"], data.read_data_file, tmp_path / "empty")


def test_cache_key_hashes_every_shard(tmp_path, tok):
    folder = save_to_disk(tmp_path / "ds", CHAT_ROWS, shards=2)
    settings = DataSettings(train_file=str(folder), validation_file=None, test_file=None, validation_fraction=0.2)
    before = data.cache_key(settings, tok, 0)
    save_to_disk(tmp_path / "ds", CHAT_ROWS[::-1], shards=2)
    assert data.cache_key(settings, tok, 0) != before


def test_a_folder_written_by_datasets_itself(tmp_path, tok):
    datasets = skips.module("datasets")
    ds = datasets.Dataset.from_list(CHAT_ROWS)
    ds.save_to_disk(str(tmp_path / "real"), num_shards=2)
    assert [r.fields for r in data.read_data_file(tmp_path / "real").records] == CHAT_ROWS


def test_unsupported_extension_mentions_folders(tmp_path):
    path = tmp_path / "x.xlsx"
    path.write_text("x")
    message = raises([str(path), "'.xlsx'", ".jsonl.gz", ".arrow", "dataset folder"], data.read_data_file, path)
    assert isinstance(message, str)
    with pytest.raises(DataError):
        data.read_data_file(tmp_path / "missing.jsonl")


# --- a list of files in data.train_file ---------------------------------------------------------

MORE_ROWS = [{"instruction": f"Count to {i}.", "input": "", "output": " ".join(map(str, range(1, i + 1)))}
             for i in range(1, 4)]


def test_a_list_of_train_files_trains_as_one_dataset_in_order(tmp_path, tok):
    first, second = write_jsonl(tmp_path / "a.jsonl", ROWS), write_jsonl(tmp_path / "b.jsonl", MORE_ROWS)
    settings = DataSettings(train_file=[str(first), str(second)], validation_file=str(first), test_file=None)
    source, = data.data_sources(settings, "train")
    assert source.fmt == "alpaca"
    assert [r.fields for r in source.data.records] == ROWS + MORE_ROWS
    assert source.data.records[4].where.startswith(f"{second} line 1")
    splits = data.load_splits(settings, tok, 0, cache_dir=tmp_path / "cache")
    assert (len(splits.train), len(splits.validation)) == (7, 4)
    assert splits.stats.train.format == "alpaca"
    before = data.cache_key(settings, tok, 0)
    write_jsonl(second, MORE_ROWS[:2])  # the second file is hashed too
    assert data.cache_key(settings, tok, 0) != before
    assert len(data.load_splits(settings, tok, 0, cache_dir=tmp_path / "cache").train) == 6


def test_a_list_of_files_from_yaml_and_from_an_override(tmp_path):
    from core.spec.config import load_config
    config = tmp_path / "c.yaml"
    config.write_text("data:\n  train_file: [a.jsonl, b.jsonl]\n  validation_file: [c.jsonl]\n", encoding="utf-8")
    assert load_config(config).data.train_file == ["a.jsonl", "b.jsonl"]
    assert load_config(config).data.validation_file == "c.jsonl"  # a list of one is that file
    for text in ("[x.jsonl, y/z.jsonl]", "x.jsonl, y/z.jsonl"):
        assert load_config(config, [f"data.train_file={text}"]).data.train_file == ["x.jsonl", "y/z.jsonl"]
    assert load_config(config, ["data.train_file=data/ds#train"]).data.train_file == "data/ds#train"


def test_a_list_of_files_names_the_file_whose_format_differs(tmp_path):
    first = write_jsonl(tmp_path / "a.jsonl", ROWS)
    chat = write_jsonl(tmp_path / "chat.jsonl", CHAT_ROWS)
    settings = DataSettings(train_file=[str(first), str(chat)], validation_file=None, validation_fraction=0.2)
    raises([f"{chat}: the records are sharegpt", f"{first} (the first file of data.train_file) is alpaca"],
           data.data_sources, settings, "train")


def test_a_list_of_files_names_a_missing_file_and_a_bad_line(tmp_path, tok):
    first = write_jsonl(tmp_path / "a.jsonl", ROWS)
    missing = tmp_path / "missing.jsonl"
    settings = DataSettings(train_file=[str(first), str(missing)], validation_file=str(first), test_file=None)
    raises([str(missing)], data.load_splits, settings, tok, 0, cache_dir=None)
    raises([str(missing)], data.load_splits, settings, tok, 0, cache_dir=tmp_path / "cache")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(ROWS[0]) + "\n{not json\n", encoding="utf-8")
    settings = DataSettings(train_file=[str(first), str(bad)], validation_file=str(first), test_file=None)
    raises([f"{bad} line 2"], data.load_splits, settings, tok, 0, cache_dir=None)
