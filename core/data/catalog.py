"""Dataset catalogues: a folder with a `dataset_info.json` as LLaMA-Factory lays it out.

    {"alpaca_en_demo": {"file_name": "alpaca_en_demo.json"},
     "glaive_toolcall": {"file_name": "glaive.json", "formatting": "sharegpt",
                         "columns": {"messages": "conversations", "tools": "tools"}},
     "my_qa": {"file_name": ["qa_1.jsonl", "qa_2.jsonl"], "columns": {"prompt": "question", "response": "answer"},
               "num_samples": 500}}

`data.train_file` names the folder and `data.dataset` one or several of its datasets by name.
Each entry's `formatting` (alpaca, the default, or sharegpt) is its format; its `columns`
(alpaca: prompt, query, response, history, system, tools; sharegpt: messages, system, tools; both:
images, videos, audios, and for preference data chosen, rejected, kto_tag) and `tags` (role_tag,
content_tag, user_tag, assistant_tag, observation_tag, function_tag, system_tag) become the
format's column mapping; `file_name` may be a file, a folder or a list of them (inside the
catalogue folder); `num_samples` draws that many records (seeded; repeated when more than the
file holds). Entries that live on a hub (`hf_hub_url`, `ms_hub_url`, `om_hub_url`) or in a
loading script (`script_url`) are listed with the reason they cannot load here.

A broken entry (unknown formatting, missing file, unknown column key) carries its problem, naming
the entry, field and file; the other entries stay usable. Entries with `ranking: true` (chosen /
rejected) or a `kto_tag` column are preference data: `preference_refusal` says so for supervised
fine-tuning. Imports core.data.files only.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from core.data.files import CATALOG_FILE, DataError, DataFile, at, concat_files, read_data_file
from core.spec.places import Where, line_of
from core.spec.errors import said_of
from core.spec.messages import Message

FORMATTINGS = ("alpaca", "sharegpt")  # an entry's 'formatting'; a pretraining entry (no formatting, prompt only) is read as text
HUB_KEYS = {"hf_hub_url": "the Hugging Face hub", "ms_hub_url": "the ModelScope hub", "om_hub_url": "the Modelers hub",
            "cloud_file_name": "cloud storage"}
# dataset_info.json column names -> the format field names of core.data.formats
COLUMN_NAMES = {"alpaca": {"prompt": "instruction", "query": "input", "response": "output", "history": "history",
                           "system": "system", "tools": "tools"},
                "sharegpt": {"messages": "messages", "system": "system", "tools": "tools"}}
SHARED_COLUMNS = {"images": "images", "videos": "videos", "audios": "audios", "chosen": "chosen",
                  "rejected": "rejected", "kto_tag": "label"}
TAG_NAMES = ("role_tag", "content_tag", "user_tag", "assistant_tag", "observation_tag", "function_tag",
             "system_tag")
SAMPLE_STREAM = 2  # random stream of num_samples draws, apart from the validation split's


@dataclass
class CatalogEntry:
    """One dataset of a catalogue: its files, format and column mapping, or the `problem` that
    keeps it from loading."""
    name: str
    catalog: Path
    files: list[Path] = field(default_factory=list)
    formatting: str = "alpaca"
    columns: dict[str, str] = field(default_factory=dict)
    preference: str | None = None  # "ranking" (chosen/rejected) or "kto" (a label column)
    num_samples: int | None = None
    problem: str | None = None  # a core Message (core.spec.messages), said at the entry
    keys: dict[str, str] = field(default_factory=dict)  # format field -> where the catalogue maps it ('columns.prompt')

    @property
    def loadable(self) -> bool:
        return self.problem is None

    @property
    def where(self) -> Where:
        return Where("data.at_entry", file=str(self.catalog / CATALOG_FILE), name=repr(self.name))

    @property
    def size_bytes(self) -> int:
        return sum(_size(p) for p in self.files)


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else 0


def read_catalog(folder: str | Path) -> list[CatalogEntry]:
    """Every entry of `folder`/dataset_info.json, in its order, each checked without reading its
    data (a column the data lacks is found when the entry loads). A file that is not a JSON object
    of entries is a DataError naming it."""
    folder = Path(folder)
    path = folder / CATALOG_FILE
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise DataError(at(line_of(path, err.lineno), Message("data.catalogue_not_json", json_says=err.msg,
                                                              column=err.colno))) from None
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(Message("data.unreadable", file=str(path), os_error=str(err))) from None
    if not isinstance(value, dict):
        raise DataError(Message("data.catalogue_not_object", file=str(path), py_type=type(value).__name__))
    return [_entry(folder, str(name), spec) for name, spec in value.items()]


def _entry(folder: Path, name: str, spec: object) -> CatalogEntry:
    entry = CatalogEntry(name, folder)
    if not isinstance(spec, dict):
        entry.problem = at(entry.where, Message("data.entry_not_object", got_json=json.dumps(spec)[:60]))
        return entry
    try:
        _fill(entry, spec)
    except DataError as err:
        entry.problem = said_of(err)
    return entry


def _fill(entry: CatalogEntry, spec: dict) -> None:
    where = entry.where
    if "file_name" not in spec:
        for key, place in HUB_KEYS.items():
            if spec.get(key):
                raise DataError(at(where, Message("data.entry_on_hub", field=repr(key), url=str(spec[key]),
                                                  hub_place=place)))
        if spec.get("script_url"):
            raise DataError(at(where, Message("data.entry_script", url=str(spec["script_url"]))))
        raise DataError(at(where, Message("data.entry_no_file", folder=str(entry.catalog))))
    entry.formatting = spec.get("formatting", "alpaca")
    if entry.formatting not in FORMATTINGS:
        raise DataError(at(where, Message("data.entry_formatting", value=repr(entry.formatting),
                                          valid_names=", ".join(FORMATTINGS))))
    names = spec["file_name"] if isinstance(spec["file_name"], list) else [spec["file_name"]]
    for name in names:
        if not isinstance(name, str) or not name.strip():
            raise DataError(at(where, Message("data.entry_bad_file_name", value=repr(name))))
        path = (entry.catalog / name).resolve()
        if not path.is_relative_to(entry.catalog.resolve()):
            raise DataError(at(where, Message("data.entry_outside", given=name, folder=str(entry.catalog))))
        if not path.exists():
            raise DataError(at(where, Message("data.entry_file_missing", file=str(entry.catalog / name))))
        entry.files.append(entry.catalog / name)
    entry.columns = _mapping(entry, spec.get("columns") or {}, COLUMN_NAMES[entry.formatting] | SHARED_COLUMNS,
                             "columns")
    if "formatting" not in spec and set(entry.columns) == {"instruction"}:
        entry.formatting = "text"  # a pretraining corpus (see `entry_format`)
    if entry.formatting == "sharegpt":
        entry.columns |= _mapping(entry, spec.get("tags") or {}, {t: t for t in TAG_NAMES}, "tags")
    elif spec.get("tags"):
        raise DataError(at(where, Message("data.entry_tags_alpaca")))
    if spec.get("ranking"):
        entry.preference = "ranking"
    elif "label" in entry.columns:
        entry.preference = "kto"
    samples = spec.get("num_samples")
    if samples is not None and (not isinstance(samples, int) or isinstance(samples, bool) or samples < 1):
        raise DataError(at(where, Message("data.entry_num_samples", value=repr(samples))))
    entry.num_samples = samples


def entry_format(entry: CatalogEntry, data: DataFile) -> tuple[str, dict[str, str]]:
    """The format and column mapping an entry's records are read with. An entry without
    'formatting' that maps only `prompt` (LLaMA-Factory's wiki_demo and c4_demo:
    {"columns": {"prompt": "text"}}) is a pretraining corpus, which LLaMA-Factory reads as plain
    text: read as `text` from that column, unless its records have alpaca's default answer column
    'output' (an alpaca dataset that renamed only its prompt column)."""
    if entry.formatting != "text":
        return entry.formatting, entry.columns
    if data.records and "output" in data.records[0].fields:
        return "alpaca", entry.columns
    return "text", {"text": entry.columns["instruction"]}


def _mapping(entry: CatalogEntry, spec: object, names: dict[str, str], key: str) -> dict[str, str]:
    if not isinstance(spec, dict):
        raise DataError(at(entry.where, Message("data.entry_not_mapping", field=repr(key), got_json=json.dumps(spec)[:60])))
    out = {}
    for name, column in spec.items():
        if name not in names:
            raise DataError(at(entry.where, Message("data.entry_unknown_name", field=f"'{key}.{name}'",
                                                    mapping_kind=key[:-1], fmt=entry.formatting,
                                                    valid_names=", ".join(names))))
        if not isinstance(column, str) or not column:
            raise DataError(at(entry.where, Message("data.entry_not_column", field=f"'{key}.{name}'", value=repr(column))))
        out[names[name]] = column
        entry.keys[names[name]] = f"{key}.{name}"
    return out


def preference_refusal(entry: CatalogEntry) -> DataError:
    """What supervised fine-tuning says of a preference entry: it is never trained as plain answers."""
    return DataError(at(entry.where, Message("data.entry_ranking") if entry.preference == "ranking"
                        else Message("data.entry_kto", column_shown=repr(entry.columns["label"]))))


def select(entries: list[CatalogEntry], names: list[str] | None, folder: Path) -> list[CatalogEntry]:
    """The entries `names` picks (data.dataset), each loadable."""
    known = {e.name: e for e in entries}
    if not names:
        listed = ", ".join(e.name for e in entries if e.loadable) or "none loadable"
        raise DataError(Message("data.catalogue_choose", file=str(folder), dataset_names=listed))
    chosen = []
    for name in names:
        if name not in known:
            raise DataError(Message("data.no_such_dataset", name=repr(name), file=str(folder / CATALOG_FILE),
                                    dataset_names=", ".join(known) or "none"))
        if known[name].problem:
            raise DataError(known[name].problem)
        chosen.append(known[name])
    return chosen


def load_entry(entry: CatalogEntry, seed: int, text_split: str = "line") -> DataFile:
    """The records of an entry's files (in order), drawn down or up to `num_samples` (seeded)."""
    records = concat_files(entry.catalog, [read_data_file(path, text_split=text_split) for path in entry.files]).records
    if entry.num_samples is not None:
        rng = np.random.default_rng([SAMPLE_STREAM, seed])
        whole, rest = divmod(entry.num_samples, len(records))
        picks = [i for _ in range(whole) for i in range(len(records))]
        picks += sorted(rng.permutation(len(records))[:rest].tolist())
        records = [records[i] for i in picks]
    return DataFile(entry.catalog / CATALOG_FILE, records)


def check_columns(entry: CatalogEntry, data: DataFile) -> None:
    """Every column the entry maps exists in some record of its data."""
    keys = set(data.columns or []) | {k for r in data.records for k in r.fields}
    for name, column in entry.columns.items():
        if name.endswith("_tag") or column in keys:
            continue
        files = ", ".join(str(p) for p in entry.files)
        raise DataError(at(entry.where, Message("data.entry_column_missing", field=f"'{entry.keys.get(name, name)}'",
                                                column_shown=repr(column), files=files,
                                                field_names=", ".join(sorted(map(str, keys))))))
