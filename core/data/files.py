"""Reading training data: one file or a Hugging Face dataset folder -> records with their place.

    read_data_file(path, split=None) -> DataFile of Records, each named by where it is
                                        ("data/train.jsonl line 3", "ds/train-00000-of-00002.parquet row index 7")

Files: JSONL, JSON (an array, or an object with the array under "data"), CSV, Parquet, Arrow (an
IPC stream, as `datasets` writes it), plain text; `.gz` on any of the text ones (`.jsonl.gz`).
Folders:
- `datasets.Dataset.save_to_disk`: `state.json` lists the Arrow shards (`data-00000-of-00002.arrow`);
  `datasets.DatasetDict.save_to_disk`: `dataset_dict.json` lists the splits, one such folder each;
- any other folder: its data files (Parquet shards as the hub's `refs/convert/parquet` or a snapshot
  download lays them out, `train-00000-of-00003.parquet`, `default/train/0000.parquet`, or plain
  `train.jsonl` + `test.jsonl`), grouped into splits by file or folder name.
A split is chosen by `split` or by `path#split`; without one, "train" (or the only split).
Everything is read with pyarrow and the standard library: `datasets` is not needed.
"""
from __future__ import annotations

import csv
import gzip
import io
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from core.spec.messages import Message
from core.spec.places import Where, line_of

SPLIT_SEPARATOR = "#"  # "data/my_dataset#train_sft" names a split of a folder
# split name keywords of each role, as `datasets` matches them in file and folder names
SPLIT_KEYWORDS = {"train": ("train", "training"), "validation": ("validation", "valid", "val", "dev"),
                  "test": ("test", "testing", "eval", "evaluation")}
STATE_FILE, DATASET_DICT_FILE = "state.json", "dataset_dict.json"  # written by datasets' save_to_disk
CATALOG_FILE = "dataset_info.json"  # a LLaMA-Factory dataset catalogue (core.data.catalog)
FOLDER_SCAN_DEPTH = 3
_SHARD = re.compile(r"^(?P<split>.+?)-(?P<index>\d{5})-of-(?P<count>\d{5})(?:[-.].*)?$")


class DataError(ValueError):
    """A data file cannot be used as given. The message names the file and line (or record/row
    index, or field) and says what would be valid. Where it is a core message (core.spec.messages,
    ids data.*), `said` keeps it, so the console says it in the page's language by its id."""

    @property
    def said(self) -> list[Message] | None:
        message = self.args[0] if self.args else None
        return [message] if isinstance(message, Message) else None


def at(where: Any, reason: Message) -> Message:
    """`reason` said at `where` (a record's Where, or a file, a setting, a catalogue entry)."""
    if isinstance(where, Where):
        return Message(where.key, **where.params, reason=reason)
    return Message("data.at", file=str(where), reason=reason)


class Record(NamedTuple):
    """One record of a data file: its fields, and where it is ("data/train.jsonl line 3"), which
    every message about it starts with."""
    where: str
    fields: dict


@dataclass
class DataFile:
    """The records of one file or dataset split; `columns` is the header of a table (CSV,
    Parquet, Arrow, TXT), else None; `split` the split read from a folder."""
    path: Path
    records: list[Record]
    columns: list[str] | None = None
    split: str | None = None


# ---------------------------------------------------------------------------------------------
# Bytes and text
# ---------------------------------------------------------------------------------------------

def _read_bytes(path: Path) -> bytes:
    """The file's bytes, gunzipped for a `.gz` name."""
    if not path.is_file():
        raise DataError(Message("data.file_not_found", file=str(path)))
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise DataError(Message("data.unreadable", file=str(path), os_error=err.strerror or str(err))) from None
    if path.suffix.lower() == ".gz":
        try:
            return gzip.decompress(raw)
        except (OSError, EOFError, ValueError) as err:
            raise DataError(Message("data.not_readable", file=str(path), file_type="gzip",
                                    reader_says=str(err))) from None
    return raw


def _decode_utf8(path: Path, raw: bytes) -> str:
    """The file's text (a UTF-8 BOM dropped); a DataError naming the line of the first bad byte."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = raw[:err.start].count(b"\n") + 1
        raise DataError(at(line_of(path, line), Message("data.not_utf8", codec_says=err.reason))) from None


def _text(path: Path) -> str:
    return _decode_utf8(path, _read_bytes(path))


def json_type(value: Any) -> str:
    """A JSON value's kind in words ("an array", "a string", ...), for messages."""
    names = {list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number",
             type(None): "null", dict: "an object"}
    return names.get(type(value), type(value).__name__)


def _object_record(value: Any, where: str) -> Record:
    if not isinstance(value, dict):
        raise DataError(at(where, Message("data.not_an_object", json_type=json_type(value))))
    return Record(where, value)


# ---------------------------------------------------------------------------------------------
# One file
# ---------------------------------------------------------------------------------------------

def _read_jsonl(path: Path) -> DataFile:
    """One JSON object per line; blank lines are skipped; lines are counted from 1."""
    records = []
    # split on "\n" only: str.splitlines would also split on U+2028, which JSON strings may hold
    for number, line in enumerate(_text(path).split("\n"), start=1):
        if not line.strip():
            continue
        where = line_of(path, number)
        try:
            value = json.loads(line)
        except json.JSONDecodeError as err:
            raise DataError(at(where, Message("data.invalid_json_line", json_says=err.msg, column=err.colno))) from None
        records.append(_object_record(value, where))
    return DataFile(path, records)


def _read_json(path: Path) -> DataFile:
    """An array of objects, or an object with the array under "data"; records are named by their
    0-based index, as in JSON paths ("record [3]", "record data[3]")."""
    text = _text(path)
    if not text.strip():
        return DataFile(path, [])
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        said = "data.invalid_json_lines" if err.msg == "Extra data" else "data.invalid_json"
        raise DataError(at(line_of(path, err.lineno), Message(said, json_says=err.msg, column=err.colno))) from None
    prefix = ""
    if isinstance(value, dict) and isinstance(value.get("data"), list):
        value, prefix = value["data"], "data"
    if not isinstance(value, list):
        raise DataError(Message("data.not_an_array_keys", file=str(path), keys=str(sorted(value)))
                        if isinstance(value, dict) else Message("data.not_an_array", file=str(path),
                                                                json_type=json_type(value)))
    return DataFile(path, [_object_record(v, Where("data.at_record", file=str(path), prefix=prefix, index=i))
                           for i, v in enumerate(value)])


def _read_csv(path: Path) -> DataFile:
    """A header row, then one record per row; every value is a string. Records are named by the
    line they start on (the header is line 1); a chat's `messages` cell holds a JSON list."""
    text = _text(path)
    if not text.strip():
        return DataFile(path, [], [])
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
        if header is None:
            return DataFile(path, [], [])
        _check_header(path, header)
        records, last_line = [], reader.line_num
        for row in reader:
            where, last_line = line_of(path, last_line + 1), reader.line_num
            if not any(value.strip() for value in row):
                continue  # a blank line
            if len(row) != len(header):
                raise DataError(at(where, Message("data.csv_values", count=len(row), columns=len(header),
                                                  header_names=", ".join(header))))
            records.append(Record(where, dict(zip(header, row))))
    except csv.Error as err:
        raise DataError(at(line_of(path, reader.line_num), Message("data.csv_malformed", csv_says=str(err)))) from None
    return DataFile(path, records, header)


def _check_header(path: Path, header: list[str]) -> None:
    blank = [i + 1 for i, name in enumerate(header) if not name.strip()]
    if blank:
        raise DataError(at(line_of(path, 1), Message("data.csv_unnamed", column=blank[0])))
    duplicates = sorted({name for name in header if header.count(name) > 1})
    if duplicates:
        raise DataError(at(line_of(path, 1), Message("data.csv_duplicates", duplicates=str(duplicates))))


def _table_file(path: Path, table: Any) -> DataFile:
    """A pyarrow table's rows as records named by their 0-based row index."""
    rows = table.to_pylist()
    records = [Record(Where("data.at_row", file=str(path), row=i), _plain(row)) for i, row in enumerate(rows)]
    return DataFile(path, records, [str(name) for name in table.column_names])


def _pyarrow(path: Path, what: str):
    try:
        import pyarrow  # noqa: F401  (imported here: only tables need it)
    except ImportError as err:
        raise DataError(Message("data.needs_pyarrow", file=str(path), file_type=what, reader_says=str(err))) from None


def _read_parquet(path: Path) -> DataFile:
    _pyarrow(path, "Parquet")
    import pyarrow.parquet as pq

    if not path.is_file():
        raise DataError(Message("data.file_not_found", file=str(path)))
    try:
        table = pq.read_table(path)
    except Exception as err:  # pyarrow raises several unrelated types for unreadable files
        raise DataError(Message("data.not_readable", file=str(path), file_type="Parquet",
                                reader_says=str(err))) from None
    return _table_file(path, table)


def _read_arrow(path: Path) -> DataFile:
    """An Arrow IPC stream (what `datasets` writes) or an Arrow IPC file."""
    _pyarrow(path, "Arrow")
    import pyarrow as pa

    if not path.is_file():
        raise DataError(Message("data.file_not_found", file=str(path)))
    errors = []
    for opener in (pa.ipc.open_stream, pa.ipc.open_file):
        try:
            with pa.memory_map(str(path)) as source:
                return _table_file(path, opener(source).read_all())
        except Exception as err:  # noqa: BLE001 — try the other layout, report both
            errors.append(str(err))
    raise DataError(Message("data.not_readable", file=str(path), file_type="Arrow", reader_says="; ".join(errors)))


def _plain(value: Any) -> Any:
    """Table values as JSON-like Python values: arrays -> lists, numpy scalars -> Python, and a
    missing value (None/NaN) -> None."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


TEXT_SPLITS = ("line", "paragraph", "document")


def _read_txt(path: Path, text_split: str = "line") -> DataFile:
    """Plain text as `text` records named by the line they start on (`data.text_split`): one per
    non-blank line (`line`, the default, as toolkits read .txt), one per blank-line-separated
    paragraph (`paragraph`), or the whole file as one (`document`). Empty after splitting is an
    error naming the file."""
    if text_split not in TEXT_SPLITS:
        raise DataError(Message("data.not_valid", setting="data.text_split", value=repr(text_split),
                                valid_names=", ".join(TEXT_SPLITS)))
    text = _text(path)
    records, lines, start = [], [], 0
    if text_split == "document":
        if text.strip():
            first = next(n for n, line in enumerate(text.split("\n"), start=1) if line.strip())
            records.append(Record(line_of(path, first), {"text": text.strip("\n").replace("\r\n", "\n")}))
    for number, line in enumerate(text.split("\n") + [""] if text_split != "document" else [], start=1):
        if text_split == "line":
            if line.strip():
                records.append(Record(line_of(path, number), {"text": line.rstrip("\r")}))
        elif line.strip():
            start = start or number
            lines.append(line.rstrip("\r"))
        elif lines:
            records.append(Record(line_of(path, start), {"text": "\n".join(lines)}))
            lines, start = [], 0
    if not records and text:
        raise DataError(Message("data.only_blank_lines", file=str(path), text_split=text_split))
    return DataFile(path, records, ["text"])


READERS = {".jsonl": _read_jsonl, ".json": _read_json, ".csv": _read_csv, ".parquet": _read_parquet,
           ".arrow": _read_arrow, ".txt": _read_txt}
GZIP_READABLE = (".jsonl", ".json", ".csv", ".txt")
DATA_EXTENSIONS = (*READERS, *(f"{ext}.gz" for ext in GZIP_READABLE))


def data_extension(path: Path) -> str | None:
    """'.jsonl', '.jsonl.gz', ... for a data file name this module reads, else None."""
    name = path.name.lower()
    return next((ext for ext in sorted(DATA_EXTENSIONS, key=len, reverse=True) if name.endswith(ext)), None)


def _reader(path: Path, text_split: str = "line"):
    ext = data_extension(path)
    if ext is None:
        shown = "".join(path.suffixes[-2:]) or "(no extension)"
        raise DataError(Message("data.unsupported_type", file=str(path), suffix=repr(shown),
                                supported=", ".join(DATA_EXTENSIONS)))
    reader = READERS[ext.removesuffix(".gz")]
    return (lambda p: _read_txt(p, text_split)) if reader is _read_txt else reader


# ---------------------------------------------------------------------------------------------
# Dataset folders
# ---------------------------------------------------------------------------------------------

def file_names(name: str | Path | list) -> list:
    """The names a data setting holds: its list of files (data.train_file may be one), or itself."""
    return list(name) if isinstance(name, (list, tuple)) else [name]


def split_path(name: str | Path) -> tuple[Path, str | None]:
    """'data/ds#train_sft' -> (Path('data/ds'), 'train_sft'); a name without '#' has no split."""
    text = str(name)
    if SPLIT_SEPARATOR in text:
        folder, split = text.rsplit(SPLIT_SEPARATOR, 1)
        return Path(folder), split or None
    return Path(text), None


def _json_file(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DataError(Message("data.unreadable", file=str(path), os_error=str(err))) from None


def _saved_dataset_files(folder: Path) -> list[Path]:
    """The Arrow shards `state.json` of a save_to_disk folder lists, each checked to exist."""
    state_path = folder / STATE_FILE
    state = _json_file(state_path)
    entries = state.get("_data_files") if isinstance(state, dict) else None
    if not isinstance(entries, list) or not entries:
        raise DataError(Message("data.state_no_files", file=str(state_path)))
    files = []
    for index, entry in enumerate(entries):
        name = entry.get("filename") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name or Path(name).name != name:
            raise DataError(Message("data.state_bad_name", file=str(state_path), index=index, value=repr(name)))
        if not (folder / name).is_file():
            raise DataError(Message("data.shard_missing", file=str(folder), shard=name, count=len(entries),
                                    shard_names=", ".join(e.get("filename", "?") for e in entries
                                                          if isinstance(e, dict))))
        files.append(folder / name)
    return files


def _split_of(relative: Path) -> str:
    """The split a data file belongs to: the name before '-00000-of-00003' or the extension
    ('train-00000-of-00003.parquet', 'train.jsonl'), or for numbered files ('0000.parquet') the
    folder they are in ('default/train/0000.parquet')."""
    ext = data_extension(relative) or ""
    stem = relative.name[:len(relative.name) - len(ext)]
    match = _SHARD.match(stem)
    if match:
        return match["split"]
    if re.fullmatch(r"[\d_-]*", stem) and len(relative.parts) > 1:
        return relative.parts[-2]
    return stem


def _check_shards(folder: Path, split: str, files: list[Path]) -> None:
    """Every shard of a 'name-00000-of-00003' series is present."""
    series: dict[int, set[int]] = {}
    for path in files:
        ext = data_extension(path) or ""
        match = _SHARD.match(path.name[:len(path.name) - len(ext)])
        if match:
            series.setdefault(int(match["count"]), set()).add(int(match["index"]))
    for count, present in series.items():
        missing = sorted(set(range(count)) - present)
        if missing:
            example = next(p for p in files if _SHARD.match(p.name))
            name = re.sub(r"-\d{5}-of-", f"-{missing[0]:05d}-of-", example.name, count=1)
            raise DataError(Message("data.split_shard_missing", file=str(folder), split=repr(split), shard=name,
                                    missing=len(missing), total=count))


def _folder_splits(folder: Path) -> dict[str, list[Path]]:
    """{split name: its files} of a dataset folder, in file-name order."""
    dict_file = folder / DATASET_DICT_FILE
    if dict_file.is_file():
        value = _json_file(dict_file)
        splits = value.get("splits") if isinstance(value, dict) else None
        if not isinstance(splits, list) or not all(isinstance(s, str) for s in splits):
            raise DataError(Message("data.bad_dataset_dict", file=str(dict_file)))
        return {s: [folder / s] for s in splits}  # each a save_to_disk folder, read on demand
    if (folder / STATE_FILE).is_file():
        state = _json_file(folder / STATE_FILE)
        name = (state.get("_split") if isinstance(state, dict) else None) or "train"
        return {str(name): [folder]}
    splits: dict[str, list[Path]] = {}
    for path in _data_files_under(folder, FOLDER_SCAN_DEPTH):
        splits.setdefault(_split_of(path.relative_to(folder)), []).append(path)
    for name, files in splits.items():
        _check_shards(folder, name, files)
    return splits


def _data_files_under(folder: Path, depth: int) -> list[Path]:
    out = []
    try:
        children = sorted(folder.iterdir())
    except OSError as err:
        raise DataError(Message("data.cannot_list", file=str(folder), os_error=err.strerror or str(err))) from None
    for child in children:
        if child.name.startswith((".", "__")):
            continue
        if child.is_dir() and depth > 1:
            out += _data_files_under(child, depth - 1)
        elif child.is_file() and data_extension(child):
            out.append(child)
    return out


def dataset_splits(folder: str | Path) -> list[str]:
    """The split names of a dataset folder (empty when it holds no data)."""
    return list(_folder_splits(Path(folder)))


def role_split(splits: list[str], role: str) -> str | None:
    """The split that serves `role` ("train", "validation", "test"): a split named exactly by one
    of the role's keywords, else the one split whose name starts with a keyword; None if none or
    ambiguous."""
    keywords = SPLIT_KEYWORDS[role]
    exact = [s for s in splits if s.lower() in keywords]
    if exact:
        return exact[0]
    starts = [s for s in splits if re.match(rf"({'|'.join(keywords)})([^a-z]|$)", s.lower())]
    return starts[0] if len(starts) == 1 else None


def choose_split(folder: Path, splits: list[str], requested: str | None, role: str = "train") -> str:
    """The split to read: `requested`, else the role's split, else the only one."""
    if requested is not None:
        if requested not in splits:
            raise DataError(Message("data.no_split", file=str(folder), split=repr(requested),
                                    split_names=", ".join(splits) or "none"))
        return requested
    picked = role_split(splits, role) or (splits[0] if len(splits) == 1 else None)
    if picked is not None:
        return picked
    keywords = SPLIT_KEYWORDS[role]
    candidates = [s for s in splits if any(s.lower().startswith(k) for k in keywords)]
    if candidates:
        raise DataError(Message("data.which_split", file=str(folder), split_role=role,
                                split_names=", ".join(candidates)))
    if role == "validation":
        raise DataError(Message("data.no_validation_split", file=str(folder), split_names=", ".join(splits)))
    raise DataError(Message("data.no_role_split", file=str(folder), split_role=role, split_names=", ".join(splits)))


def split_files(name: str | Path, role: str = "train") -> list[Path]:
    """The files whose contents make the data `name` (a file, a folder, or 'folder#split'): what
    a cache key must hash."""
    path, requested = split_path(name)
    if not path.is_dir():
        return [path]
    splits = _folder_splits(path)
    split = choose_split(path, list(splits), requested, role)
    files = splits[split]
    if len(files) == 1 and files[0].is_dir():  # a DatasetDict split or a save_to_disk folder
        return [files[0] / STATE_FILE, *_saved_dataset_files(files[0])]
    return files


def _read_folder(folder: Path, requested: str | None, role: str, text_split: str = "line") -> DataFile:
    splits = _folder_splits(folder)
    if not splits:
        raise DataError(Message("data.no_data_files", file=str(folder), depth=FOLDER_SCAN_DEPTH,
                                supported=", ".join(DATA_EXTENSIONS)))
    split = choose_split(folder, list(splits), requested, role)
    files = splits[split]
    if len(files) == 1 and files[0].is_dir():
        files = _saved_dataset_files(files[0])
    return concat_files(folder, [_reader(path, text_split)(path) for path in files], split)


def concat_files(path: Path, parts: list[DataFile], split: str | None = None) -> DataFile:
    """Several files' records as one DataFile, in order (each record keeps its own file and
    line): a folder's shards, a catalogue entry's `file_name` list, a list in data.train_file."""
    columns = list(parts[0].columns or []) if all(p.columns is not None for p in parts) else None
    return DataFile(path, [r for p in parts for r in p.records], columns, split)


_DATASETS_INFO_KEYS = {"features", "splits", "builder_name", "dataset_size"}  # datasets' own dataset_info.json


def is_catalog(folder: str | Path) -> bool:
    """Whether `folder` is a dataset catalogue: a `dataset_info.json` that is not the one
    `datasets` writes next to its Arrow shards (that one describes features and splits)."""
    folder = Path(folder)
    path = folder / CATALOG_FILE
    if not path.is_file() or (folder / STATE_FILE).is_file() or (folder / DATASET_DICT_FILE).is_file():
        return False
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return True  # a broken catalogue: reading it says why
    return not (isinstance(value, dict) and _DATASETS_INFO_KEYS & set(value))


def read_data_file(path: str | Path, split: str | None = None, role: str = "train",
                   text_split: str = "line") -> DataFile:
    """The records of a data file or dataset folder ('folder#split' picks a split; `role` picks
    one by name otherwise; `text_split` is how .txt files become records); never empty."""
    path, named = split_path(path)
    split = split or named
    if is_catalog(path):
        raise DataError(Message("data.catalogue_as_file", file=str(path)))
    data = _read_folder(path, split, role, text_split) if path.is_dir() else _reader(path, text_split)(path)
    if not data.records:
        raise DataError(Message("data.no_records", file=str(path)))
    return data
