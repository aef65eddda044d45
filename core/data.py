"""Training data: read files, check their format, render them into token ids with loss labels,
split, cache, and batch them in fixed shapes for a compiled train step.

Pipeline (each stage is a function you can call on its own):
    read_data_file(path)         JSONL / JSON / CSV / Parquet / TXT  -> DataFile of Records
    resolve_format(data, fmt)    "auto" | alpaca | chat | text       -> the file's format
    tokenize_records(...)        chat template + prompt masking      -> Samples (input_ids, labels)
    load_splits(settings, ...)   train / validation / test + stats, cached on disk
    BatchIterator, eval_batches  (B, L) int32 arrays of one fixed L per run

Formats:
- alpaca: `instruction`, optional `input`, `output`; rendered as one user turn
  (instruction + "\\n\\n" + input) and one assistant turn (output) through the chat template.
- chat: `messages`, a list of {role, content} with roles system/user/assistant and at least one
  assistant turn.
- text: `text`, encoded with the tokenizer's special tokens and an EOS appended; all tokens trained.

Pure numpy: this module never imports mindspore, and inside core it depends on core.tokenizer only.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, NamedTuple, Sequence

import numpy as np

from core.atomic import atomic_open
from core.tokenizer import Tokenizer, TokenizerError

if TYPE_CHECKING:  # for annotations only; core.data does not depend on core.config at run time
    from core.config import DataSettings

IGNORE_INDEX = -100  # label of a position that carries no loss (same value as core.train_step)
DEFAULT_CACHE_DIR = Path(".mindtune-cache") / "data"
CACHE_VERSION = 1  # bump when the tokenization or the cache layout changes
HISTOGRAM_BINS = 16
SPLIT_STREAM = 1  # random stream of the validation split, kept apart from the epoch shuffles

# format -> (required fields, optional fields)
FORMAT_FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "chat": (("messages",), ()),
    "alpaca": (("instruction", "output"), ("input",)),
    "text": (("text",), ()),
}
CHAT_ROLES = ("system", "user", "assistant")


class DataError(ValueError):
    """A data file cannot be used as given. The message names the file and line (or record/row
    index, or field) and says what would be valid."""


# ---------------------------------------------------------------------------------------------
# Reading files
# ---------------------------------------------------------------------------------------------

class Record(NamedTuple):
    """One record of a data file: its fields, and where it is ("data/train.jsonl line 3"), which
    every message about it starts with."""
    where: str
    fields: dict


@dataclass
class DataFile:
    """The records of one file; `columns` is the header of a table (CSV/Parquet/TXT), else None."""
    path: Path
    records: list[Record]
    columns: list[str] | None = None


def _format_help() -> str:
    """'alpaca: instruction, output (input optional); chat: messages; text: text'."""
    parts = []
    for fmt in ("alpaca", "chat", "text"):
        required, optional = FORMAT_FIELDS[fmt]
        extra = f" ({', '.join(optional)} optional)" if optional else ""
        parts.append(f"{fmt}: {', '.join(required)}{extra}")
    return "; ".join(parts)


def _decode_utf8(path: Path, raw: bytes) -> str:
    """The file's text (a UTF-8 BOM dropped); a DataError naming the line of the first bad byte."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = raw[:err.start].count(b"\n") + 1
        raise DataError(f"{path} line {line}: not UTF-8 text ({err.reason}); save the file as UTF-8") from None


def _read_bytes(path: Path) -> bytes:
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    try:
        return path.read_bytes()
    except OSError as err:
        raise DataError(f"{path}: cannot read ({err.strerror or err})") from None


def _object_record(value: Any, where: str) -> Record:
    if not isinstance(value, dict):
        raise DataError(f"{where}: expected a JSON object with named fields, got {_json_type(value)}; "
                        f"fields by format: {_format_help()}")
    return Record(where, value)


def _json_type(value: Any) -> str:
    names = {list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number",
             type(None): "null", dict: "an object"}
    return names.get(type(value), type(value).__name__)


def _read_jsonl(path: Path) -> DataFile:
    """One JSON object per line; blank lines are skipped; lines are counted from 1."""
    text = _decode_utf8(path, _read_bytes(path))
    records = []
    # split on "\n" only: str.splitlines would also split on U+2028, which JSON strings may hold
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        where = f"{path} line {number}"
        try:
            value = json.loads(line)
        except json.JSONDecodeError as err:
            raise DataError(f"{where}: invalid JSON ({err.msg} at column {err.colno}); "
                            "each line must be one JSON object") from None
        records.append(_object_record(value, where))
    return DataFile(path, records)


def _read_json(path: Path) -> DataFile:
    """An array of objects, or an object with the array under "data"; records are named by their
    0-based index, as in JSON paths ("record [3]", "record data[3]")."""
    text = _decode_utf8(path, _read_bytes(path))
    if not text.strip():
        return DataFile(path, [])
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        hint = "; one object per line is JSON Lines: name the file .jsonl" if err.msg == "Extra data" else ""
        raise DataError(f"{path} line {err.lineno}: invalid JSON ({err.msg} at column {err.colno})"
                        f"{hint}") from None
    prefix = ""
    if isinstance(value, dict) and isinstance(value.get("data"), list):
        value, prefix = value["data"], "data"
    if not isinstance(value, list):
        found = f"an object with keys {sorted(value)}" if isinstance(value, dict) else _json_type(value)
        raise DataError(f"{path}: expected an array of objects, or an object with a list under \"data\"; "
                        f"found {found}")
    return DataFile(path, [_object_record(v, f"{path} record {prefix}[{i}]") for i, v in enumerate(value)])


def _read_csv(path: Path) -> DataFile:
    """A header row, then one record per row; every value is a string. Records are named by the
    line they start on (the header is line 1); a chat's `messages` cell holds a JSON list."""
    text = _decode_utf8(path, _read_bytes(path))
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
            where, last_line = f"{path} line {last_line + 1}", reader.line_num
            if not any(value.strip() for value in row):
                continue  # a blank line
            if len(row) != len(header):
                raise DataError(f"{where}: {len(row)} values but the header has {len(header)} columns "
                                f"({', '.join(header)}); quote values that contain commas")
            records.append(Record(where, dict(zip(header, row))))
    except csv.Error as err:
        raise DataError(f"{path} line {reader.line_num}: malformed CSV ({err})") from None
    return DataFile(path, records, header)


def _check_header(path: Path, header: list[str]) -> None:
    blank = [i + 1 for i, name in enumerate(header) if not name.strip()]
    if blank:
        raise DataError(f"{path} line 1: column {blank[0]} of the header has no name; "
                        f"name every column ({_format_help()})")
    duplicates = sorted({name for name in header if header.count(name) > 1})
    if duplicates:
        raise DataError(f"{path} line 1: duplicate column names {duplicates}")


def _read_parquet(path: Path) -> DataFile:
    """A Parquet table (through pandas and pyarrow); rows are named by their 0-based index."""
    _read_bytes(path)  # the same "file not found" message as every other reader
    try:
        import pandas as pd  # imported here: only Parquet needs it

        frame = pd.read_parquet(path)
    except ImportError as err:
        raise DataError(f"{path}: reading Parquet needs pyarrow (pip install 'pyarrow<26'); "
                        f"or convert the file to JSONL ({err})") from None
    except Exception as err:  # pyarrow raises several unrelated types for unreadable files
        raise DataError(f"{path}: not a readable Parquet file ({err})") from None
    columns = [str(c) for c in frame.columns]
    rows = frame.to_dict("records")
    return DataFile(path, [Record(f"{path} row index {i}", _plain(row)) for i, row in enumerate(rows)], columns)


def _plain(value: Any) -> Any:
    """Parquet values as JSON-like Python values: arrays -> lists, numpy scalars -> Python, and a
    missing value (None/NaN/NA) -> None."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    if value is not None and type(value).__name__ in ("NAType", "NaTType"):
        return None
    return value


def _read_txt(path: Path) -> DataFile:
    """Plain text: one `text` record per paragraph (paragraphs are separated by blank lines),
    named by the line the paragraph starts on."""
    text = _decode_utf8(path, _read_bytes(path))
    records, lines, start = [], [], 0
    for number, line in enumerate(text.split("\n") + [""], start=1):
        if line.strip():
            start = start or number
            lines.append(line.rstrip("\r"))
        elif lines:
            records.append(Record(f"{path} line {start}", {"text": "\n".join(lines)}))
            lines, start = [], 0
    return DataFile(path, records, ["text"])


READERS = {".jsonl": _read_jsonl, ".json": _read_json, ".csv": _read_csv,
           ".parquet": _read_parquet, ".txt": _read_txt}


def read_data_file(path: str | Path) -> DataFile:
    """The records of a data file, the reader chosen by extension; never empty."""
    path = Path(path)
    reader = READERS.get(path.suffix.lower())
    if reader is None:
        raise DataError(f"{path}: unsupported file type {path.suffix or '(no extension)'!r}; "
                        f"supported: {', '.join(READERS)}")
    data = reader(path)
    if not data.records:
        raise DataError(f"{path}: no records (the file is empty); expected records with fields "
                        f"{_format_help()}")
    return data


# ---------------------------------------------------------------------------------------------
# Formats: detect, check, normalise to messages or text
# ---------------------------------------------------------------------------------------------

def resolve_format(data: DataFile, requested: str = "auto") -> str:
    """The file's format: `requested`, or for "auto" the one whose required fields the first
    record has (chat, then alpaca, then text). A table's columns must fit the format."""
    if requested not in ("auto", *FORMAT_FIELDS):
        raise DataError(f"data.format: {requested!r} is not a format; valid: auto, {', '.join(FORMAT_FIELDS)}")
    first = data.records[0]
    fmt = requested
    if fmt == "auto":
        fmt = next((f for f, (required, _) in FORMAT_FIELDS.items()
                    if all(name in first.fields for name in required)), None)
        if fmt is None:
            what, where = (("columns", data.path) if data.columns is not None else ("keys", first.where))
            raise DataError(f"{where}: cannot tell the format from the {what} {list(first.fields)}; "
                            f"expected {_format_help()}")
    required, optional = FORMAT_FIELDS[fmt]
    if data.columns is not None and not all(name in data.columns for name in required):
        extra = f" ({', '.join(optional)} optional)" if optional else ""
        raise DataError(f"{data.path}: found columns {data.columns}; format {fmt!r} needs "
                        f"{', '.join(required)}{extra}. Columns by format: {_format_help()}")
    return fmt


def _string_field(record: Record, name: str, fmt: str, *, required: bool, non_empty: bool = False) -> str:
    """`record.fields[name]` as a string; "" for an absent or null optional field."""
    value = record.fields.get(name)
    needs = " and ".join(repr(n) for n in FORMAT_FIELDS[fmt][0])
    if value is None:
        if required:
            raise DataError(f"{record.where}: missing field {name!r}; {fmt} records need {needs} (strings)")
        return ""
    if not isinstance(value, str):
        raise DataError(f"{record.where}: field {name!r} must be a string, got {_json_type(value)}")
    if non_empty and not value.strip():
        raise DataError(f"{record.where}: field {name!r} is empty; nothing to learn from")
    return value


def alpaca_messages(record: Record) -> list[dict]:
    """An alpaca record as a user turn (instruction, then "\\n\\n" and input if any) and an assistant turn."""
    instruction = _string_field(record, "instruction", "alpaca", required=True)
    output = _string_field(record, "output", "alpaca", required=True, non_empty=True)
    extra = _string_field(record, "input", "alpaca", required=False)
    user = instruction + ("\n\n" + extra if extra else "")
    return [{"role": "user", "content": user}, {"role": "assistant", "content": output}]


def chat_messages(record: Record) -> list[dict]:
    """A chat record's messages, checked: roles system/user/assistant, string content, starts with a
    system or user turn, at least one assistant turn. A string value is parsed as JSON (CSV cells)."""
    messages = record.fields.get("messages")
    if messages is None:
        raise DataError(f"{record.where}: missing field 'messages'; chat records need a list of "
                        "{role, content} objects")
    if isinstance(messages, str):
        try:
            messages = json.loads(messages)
        except json.JSONDecodeError as err:
            raise DataError(f"{record.where}: field 'messages' is text but not JSON ({err.msg}); "
                            "expected a JSON list of {role, content} objects") from None
    if not isinstance(messages, list) or not messages:
        raise DataError(f"{record.where}: field 'messages' must be a non-empty list of {{role, content}} "
                        f"objects, got {_json_type(messages)}")
    checked = [_checked_message(record.where, index, m) for index, m in enumerate(messages)]
    if checked[0]["role"] == "assistant":
        raise DataError(f"{record.where}: field 'messages[0].role' is 'assistant'; a chat starts with "
                        "a system or user turn")
    if not any(m["role"] == "assistant" for m in checked):
        raise DataError(f"{record.where}: field 'messages' has no assistant turn; a chat needs at least "
                        "one to learn from")
    return checked


def _checked_message(where: str, index: int, message: Any) -> dict:
    name = f"messages[{index}]"
    if not isinstance(message, dict):
        raise DataError(f"{where}: field '{name}' must be an object with 'role' and 'content', "
                        f"got {_json_type(message)}")
    if message.get("role") not in CHAT_ROLES:
        raise DataError(f"{where}: field '{name}.role' is {message.get('role')!r}; valid roles: "
                        f"{', '.join(CHAT_ROLES)}")
    if not isinstance(message.get("content"), str):
        raise DataError(f"{where}: field '{name}.content' must be a string, "
                        f"got {_json_type(message.get('content'))}")
    return dict(message)


# ---------------------------------------------------------------------------------------------
# Rendering to token ids and labels
# ---------------------------------------------------------------------------------------------

@dataclass
class Sample:
    """One training example: `input_ids` (T,) int32 and `labels` (T,) int32 aligned with them
    (IGNORE_INDEX where no loss; the next-token shift happens in the loss)."""
    input_ids: np.ndarray
    labels: np.ndarray

    def __len__(self) -> int:
        return len(self.input_ids)


Pieces = list[tuple[list[int], bool]]  # one sample's (token ids, is_answer) pieces, in order


@dataclass
class TokenizedFile:
    """A file's samples, how many were truncated, and every sample's length before truncation."""
    samples: list[Sample]
    truncated: int
    full_lengths: list[int]


def _render(tokenizer: Tokenizer, messages: list[dict], add_generation_prompt: bool, where: str) -> str:
    try:
        return tokenizer.apply_chat_template(messages, add_generation_prompt=add_generation_prompt)
    except TokenizerError as err:
        raise DataError(f"{where}: {err}") from None


def _chat_segments(tokenizer: Tokenizer, messages: list[dict], mask_prompt: bool,
                   where: str) -> list[tuple[str, bool]]:
    """The rendered chat cut into (text, is_answer) pieces, so that any template works.

    For each assistant turn i, rendering messages[:i] with the generation prompt ends where the
    answer starts, and rendering messages[:i+1] ends where the turn ends; both must be prefixes
    of the whole rendering. Without `mask_prompt` the whole text is one answer piece."""
    full = _render(tokenizer, messages, False, where)
    if not mask_prompt:
        return [(full, True)]
    segments, cursor = [], 0
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        prompt = _render(tokenizer, messages[:i], True, where)
        through = full if i == len(messages) - 1 else _render(tokenizer, messages[:i + 1], False, where)
        for text, rendering in ((prompt, f"messages[:{i}] with the generation prompt"),
                                (through, f"messages[:{i + 1}]")):
            if not full.startswith(text) or len(text) < cursor:
                raise DataError(
                    f"{where}: cannot locate assistant turn messages[{i}]: the chat template renders "
                    f"{rendering} as text that is not a prefix of the whole conversation (it rewrites "
                    "earlier turns or the generation prompt). Use a template whose renderings only "
                    "append, or set data.mask_prompt=false to train on every token")
        segments += [(full[cursor:len(prompt)], False), (full[len(prompt):len(through)], True)]
        cursor = len(through)
    segments.append((full[cursor:], False))
    return segments


def _answer_labels(ids: list[int], end_ids: frozenset[int], mask_prompt: bool) -> list[int]:
    """Labels of an answer piece: its tokens through the last end-of-turn token (e.g. <|im_end|>).

    What a template writes after that token (ChatML's "\\n") is never generated at inference, since
    generation stops at the end-of-turn token, so it is not trained. A piece without an end token is
    labelled whole; without `mask_prompt` everything is labelled."""
    if not mask_prompt:
        return list(ids)
    last_end = max((k for k, token in enumerate(ids) if token in end_ids), default=len(ids) - 1)
    return list(ids[:last_end + 1]) + [IGNORE_INDEX] * (len(ids) - last_end - 1)


def _join_pieces(pieces: Pieces, end_ids: frozenset[int], mask_prompt: bool) -> tuple[list[int], list[int]]:
    """A sample's ids and labels: answer pieces labelled (see `_answer_labels`), the rest not."""
    ids, labels = [], []
    for piece_ids, is_answer in pieces:
        ids += piece_ids
        labels += (_answer_labels(piece_ids, end_ids, mask_prompt) if is_answer
                   else [IGNORE_INDEX] * len(piece_ids))
    return ids, labels


def _text_ids(ids: list[int], eos_id: int | None) -> list[int]:
    """Raw-text ids with an EOS at the end (unless the post-processor already put one there), so
    the model learns where a document stops."""
    return ids + [eos_id] if eos_id is not None and (not ids or ids[-1] != eos_id) else ids


def _truncated_sample(ids: list[int], labels: list[int], max_seq_len: int, where: str) -> Sample:
    """The sample cut to `max_seq_len` tokens (the beginning kept). Position 0 is never a target
    (the loss predicts token t+1 from t), so at least one labelled token after it must remain."""
    kept_labels = np.asarray(labels[:max_seq_len], dtype=np.int32)
    if not (kept_labels[1:] != IGNORE_INDEX).any():
        raise DataError(f"{where}: the sample is {len(ids)} tokens; with max_seq_len={max_seq_len} nothing of "
                        "the answer remains — raise data.max_seq_len or shorten the prompt")
    return Sample(np.asarray(ids[:max_seq_len], dtype=np.int32), kept_labels)


def tokenize_records(records: Sequence[Record], fmt: str, tokenizer: Tokenizer, max_seq_len: int,
                     mask_prompt: bool = True) -> TokenizedFile:
    """Samples of `records` in format `fmt`: chat/alpaca through the chat template with the
    prompt masked, text with all tokens labelled; truncated to `max_seq_len`."""
    if fmt == "text":
        texts = [_string_field(r, "text", "text", required=True, non_empty=True) for r in records]
        encoded = [[(_text_ids(ids, tokenizer.eos_token_id), True)]
                   for ids in tokenizer.encode_batch(texts, add_special_tokens=True)]
    else:
        to_messages = alpaca_messages if fmt == "alpaca" else chat_messages
        segments = [_chat_segments(tokenizer, to_messages(r), mask_prompt, r.where) for r in records]
        encoded = _encode_segments(tokenizer, segments)
    samples, lengths, truncated = [], [], 0
    for record, pieces in zip(records, encoded):
        ids, labels = _join_pieces(pieces, tokenizer.eos_token_ids, mask_prompt and fmt != "text")
        samples.append(_truncated_sample(ids, labels, max_seq_len, record.where))
        lengths.append(len(ids))
        truncated += len(ids) > max_seq_len
    return TokenizedFile(samples, truncated, lengths)


def _encode_segments(tokenizer: Tokenizer, segments: list[list[tuple[str, bool]]]) -> list[Pieces]:
    """Encode every piece of every sample in one batch call (the backend runs it in parallel).
    Pieces are encoded on their own, so a prompt's ids are exactly what generation will see."""
    flat = [text for pieces in segments for text, _ in pieces]
    ids = iter(tokenizer.encode_batch(flat, add_special_tokens=False))
    return [[(next(ids), is_answer) for _, is_answer in pieces] for pieces in segments]


@dataclass
class TestRecord:
    """A held-out example for exact-match scoring: the prompt (rendered with the generation prompt)
    as text and token ids, and the reference answer string."""
    __test__ = False  # not a pytest test class despite the name

    prompt: str
    prompt_ids: list[int]
    answer: str


def build_test_records(data: DataFile, fmt: str, tokenizer: Tokenizer) -> list[TestRecord]:
    """Prompt/answer pairs of a test file: the answer is the last assistant turn, the prompt all
    turns before it."""
    if fmt == "text":
        raise DataError(f"{data.path}: a test file needs prompts and reference answers (alpaca or chat "
                        "format); this one is raw text")
    to_messages = alpaca_messages if fmt == "alpaca" else chat_messages
    prompts, answers = [], []
    for record in data.records:
        messages = to_messages(record)
        last = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
        prompts.append(_render(tokenizer, messages[:last], True, record.where))
        answers.append(messages[last]["content"])
    ids = tokenizer.encode_batch(prompts, add_special_tokens=False)
    return [TestRecord(p, i, a) for p, i, a in zip(prompts, ids, answers)]


# ---------------------------------------------------------------------------------------------
# Splits and statistics
# ---------------------------------------------------------------------------------------------

@dataclass
class SplitStats:
    """One split: format, samples, truncated samples, labelled tokens, and token lengths before
    truncation (min/mean/max and a histogram with integer bin edges), to help choose max_seq_len."""
    format: str
    samples: int
    truncated: int
    labelled_tokens: int
    min_length: int
    mean_length: float
    max_length: int
    histogram_edges: list[int]
    histogram_counts: list[int]


@dataclass
class DataStats:
    """What the console shows about the data; `validation_in_train` counts validation samples
    whose token ids also occur in training (reported, not an error)."""
    train: SplitStats
    validation: SplitStats
    validation_source: str  # "file" or "fraction"
    test_records: int
    validation_in_train: int

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> DataStats:
        splits = {name: SplitStats(**data[name]) for name in ("train", "validation")}
        return cls(**{**data, **splits})


@dataclass
class DataSplits:
    """Tokenized train and validation samples, test records, stats; `from_cache` says whether
    they were read from the cache instead of tokenized."""
    train: list[Sample]
    validation: list[Sample]
    test_records: list[TestRecord]
    stats: DataStats
    from_cache: bool = False


def _split_stats(fmt: str, tokenized: TokenizedFile) -> SplitStats:
    lengths = np.asarray(tokenized.full_lengths)
    shortest = int(lengths.min())
    width = max(1, math.ceil((lengths.max() - shortest + 1) / HISTOGRAM_BINS))
    edges = shortest + np.arange(HISTOGRAM_BINS + 1) * width  # integer bins from the shortest up
    counts, _ = np.histogram(lengths, bins=edges)
    return SplitStats(
        format=fmt, samples=len(tokenized.samples), truncated=tokenized.truncated,
        labelled_tokens=int(sum((s.labels != IGNORE_INDEX).sum() for s in tokenized.samples)),
        min_length=shortest, mean_length=round(float(lengths.mean()), 2), max_length=int(lengths.max()),
        histogram_edges=edges.tolist(), histogram_counts=counts.tolist(),
    )


def overlap_count(train: Sequence[Sample], validation: Sequence[Sample]) -> int:
    """How many validation samples have token ids identical to some training sample."""
    seen = {s.input_ids.tobytes() for s in train}
    return sum(s.input_ids.tobytes() in seen for s in validation)


def split_records(data: DataFile, fraction: float, seed: int) -> tuple[list[Record], list[Record]]:
    """(train, validation): a seeded `fraction` of the records held out, the same on every run
    with the same seed; both keep file order."""
    n = len(data.records)
    n_val = int(fraction * n + 0.5)
    if n_val == 0:
        raise DataError(f"{data.path}: data.validation_fraction={fraction} of {n} records is 0 validation "
                        "samples; raise data.validation_fraction or set data.validation_file")
    if n_val >= n:
        raise DataError(f"{data.path}: data.validation_fraction={fraction} of {n} records leaves nothing "
                        "to train on; lower it or set data.validation_file")
    held_out = set(np.random.default_rng([SPLIT_STREAM, seed]).permutation(n)[:n_val].tolist())
    train = [r for i, r in enumerate(data.records) if i not in held_out]
    return train, [r for i, r in enumerate(data.records) if i in held_out]


def _build_splits(settings: DataSettings, tokenizer: Tokenizer, seed: int) -> DataSplits:
    """Read, split and tokenize every file named in `settings` (no cache)."""
    train_file = read_data_file(settings.train_file)
    train_fmt = resolve_format(train_file, settings.format)
    if settings.validation_file:
        val_file = read_data_file(settings.validation_file)
        val_fmt = resolve_format(val_file, settings.format)
        train_records, val_records = train_file.records, val_file.records
    elif settings.validation_fraction > 0:
        val_fmt = train_fmt
        train_records, val_records = split_records(train_file, settings.validation_fraction, seed)
    else:
        raise DataError("data.validation_file: no validation data; set data.validation_file or "
                        "data.validation_fraction in (0, 0.5]")
    train = tokenize_records(train_records, train_fmt, tokenizer, settings.max_seq_len, settings.mask_prompt)
    val = tokenize_records(val_records, val_fmt, tokenizer, settings.max_seq_len, settings.mask_prompt)
    tests = []
    if settings.test_file:
        test_file = read_data_file(settings.test_file)
        tests = build_test_records(test_file, resolve_format(test_file, settings.format), tokenizer)
    stats = DataStats(
        train=_split_stats(train_fmt, train), validation=_split_stats(val_fmt, val),
        validation_source="file" if settings.validation_file else "fraction",
        test_records=len(tests), validation_in_train=overlap_count(train.samples, val.samples),
    )
    return DataSplits(train.samples, val.samples, tests, stats)


def load_splits(settings: DataSettings, tokenizer: Tokenizer, seed: int,
                cache_dir: str | Path | None = DEFAULT_CACHE_DIR) -> DataSplits:
    """Train/validation samples, test records and stats for `settings` (a DataSettings), read
    from `cache_dir` when the same files, tokenizer and settings were tokenized before.
    `cache_dir=None` disables the cache. Relative paths are taken from the working directory.
    Data-parallel ranks may call this at once: each writes the same cache file by atomic rename."""
    if cache_dir is None:
        return _build_splits(settings, tokenizer, seed)
    path = Path(cache_dir) / f"{cache_key(settings, tokenizer, seed)}.npz"
    cached = _load_cache(path)
    if cached is not None:
        return cached
    splits = _build_splits(settings, tokenizer, seed)
    _save_cache(path, splits)
    return splits


# ---------------------------------------------------------------------------------------------
# Cache
# ---------------------------------------------------------------------------------------------

def _tokenizer_bytes(tokenizer: Tokenizer) -> bytes:
    """What identifies the tokenizer: its folder's tokenizer.json bytes, or (for a tokenizer not
    loaded from a folder) the backend's serialization. Both are private details of core.tokenizer."""
    source = Path(getattr(tokenizer, "_source", "")) / "tokenizer.json"
    if source.is_file():
        return source.read_bytes()
    return getattr(tokenizer, "_backend").to_str().encode("utf-8")


def cache_key(settings: DataSettings, tokenizer: Tokenizer, seed: int) -> str:
    """A hash of everything the tokenized splits depend on: the files' bytes and extensions, the
    tokenizer, its chat template and special tokens, and the data settings (and the seed when it
    chooses the validation split)."""
    digest = hashlib.sha256()

    def add(label: str, data: bytes) -> None:
        digest.update(f"{label}:{len(data)}:".encode() + data)

    add("version", str(CACHE_VERSION).encode())
    for role in ("train_file", "validation_file", "test_file"):
        name = getattr(settings, role)
        add(role, b"" if not name else Path(name).suffix.lower().encode() + b"\0" + _read_bytes(Path(name)))
    add("tokenizer", _tokenizer_bytes(tokenizer))
    add("chat_template", (tokenizer.chat_template() if tokenizer.has_chat_template else "").encode())
    specials = [tokenizer.special_tokens, sorted(tokenizer.eos_token_ids)]
    add("special_tokens", json.dumps(specials, sort_keys=True).encode())
    knobs = {k: getattr(settings, k) for k in ("format", "validation_fraction", "max_seq_len", "mask_prompt")}
    knobs["seed"] = None if settings.validation_file else seed
    add("settings", json.dumps(knobs, sort_keys=True).encode())
    return digest.hexdigest()[:32]


def _ragged(prefix: str, arrays: Sequence[Sequence[int]]) -> dict[str, np.ndarray]:
    """Variable-length int arrays as one flat int32 array plus offsets (no pickle needed)."""
    offsets = np.cumsum([0] + [len(a) for a in arrays]).astype(np.int64)
    flat = np.concatenate([np.asarray(a, dtype=np.int32) for a in arrays]) if arrays else np.zeros(0, np.int32)
    return {f"{prefix}_flat": flat, f"{prefix}_offsets": offsets}


def _unragged(archive: Any, prefix: str) -> list[np.ndarray]:
    flat, offsets = archive[f"{prefix}_flat"], archive[f"{prefix}_offsets"]
    return [flat[offsets[i]:offsets[i + 1]] for i in range(len(offsets) - 1)]


def _save_cache(path: Path, splits: DataSplits) -> None:
    """Write the splits as one .npz atomically (temp file, fsync, rename): a crash never leaves a
    half-written cache that a later run would trust."""
    arrays: dict[str, np.ndarray] = {}
    for name in ("train", "validation"):
        samples = getattr(splits, name)
        arrays |= _ragged(f"{name}_ids", [s.input_ids for s in samples])
        arrays |= _ragged(f"{name}_labels", [s.labels for s in samples])
    arrays |= _ragged("test_prompt_ids", [r.prompt_ids for r in splits.test_records])
    meta = {"stats": splits.stats.to_dict(), "test_prompts": [r.prompt for r in splits.test_records],
            "test_answers": [r.answer for r in splits.test_records]}
    arrays["meta_json"] = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(path, "wb") as handle:
        np.savez(handle, **arrays)


def _load_cache(path: Path) -> DataSplits | None:
    """The cached splits, or None when absent or unreadable (then they are rebuilt)."""
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as archive:
            meta = json.loads(archive["meta_json"].tobytes().decode("utf-8"))
            train, val = ([Sample(ids, labels) for ids, labels in zip(_unragged(archive, f"{name}_ids"),
                                                                     _unragged(archive, f"{name}_labels"))]
                          for name in ("train", "validation"))
            prompt_ids = [ids.tolist() for ids in _unragged(archive, "test_prompt_ids")]
        tests = [TestRecord(p, i, a) for p, i, a in zip(meta["test_prompts"], prompt_ids, meta["test_answers"])]
        return DataSplits(train, val, tests, DataStats.from_dict(meta["stats"]), from_cache=True)
    except Exception:  # a corrupt or outdated cache file is never fatal: tokenize again
        return None


# ---------------------------------------------------------------------------------------------
# Batching in fixed shapes
# ---------------------------------------------------------------------------------------------

def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def padded_length(max_seq_len: int, *sample_lists: Sequence[Sample]) -> int:
    """The one sequence length of every batch in a run, so a compiled step never recompiles:
    `max_seq_len` rounded up to a multiple of 8, or, when every sample is shorter, the longest
    sample rounded up to a multiple of 16 (short datasets then do not pay for max_seq_len).
    Pass train and validation samples together to give evaluation the same shape."""
    return run_seq_len(max_seq_len, max((len(s) for samples in sample_lists for s in samples), default=1))


def run_seq_len(max_seq_len: int, longest: int) -> int:
    """`padded_length` from the longest sample's token count (before or after truncation)."""
    return min(_round_up(max_seq_len, 8), _round_up(max(longest, 1), 16))


def collate(samples: Sequence[Sample | None], length: int, pad_id: int = 0) -> dict[str, np.ndarray]:
    """Right-padded `input_ids`, `labels` (IGNORE_INDEX on padding) and `attention_mask`, each
    (B, length) int32. A None row is padding only (fully masked)."""
    batch = len(samples)
    input_ids = np.full((batch, length), pad_id, dtype=np.int32)  # (B, L)
    labels = np.full((batch, length), IGNORE_INDEX, dtype=np.int32)  # (B, L)
    attention_mask = np.zeros((batch, length), dtype=np.int32)  # (B, L)
    for row, sample in enumerate(samples):
        if sample is None:
            continue
        if len(sample) > length:
            raise ValueError(f"sample of {len(sample)} tokens does not fit the batch length {length}")
        input_ids[row, :len(sample)] = sample.input_ids
        labels[row, :len(sample)] = sample.labels
        attention_mask[row, :len(sample)] = 1
    return {"input_ids": input_ids, "labels": labels, "attention_mask": attention_mask}


class BatchIterator:
    """Endless micro batches of the training samples for one data-parallel rank.

    Each epoch shuffles the samples with `np.random.default_rng(seed + epoch)` and cuts them into
    global batches of micro × accum × world samples; the last incomplete global batch of an epoch
    is dropped, so every optimizer step sees the same number of samples. Rank r takes the r-th
    contiguous slice of each global batch and yields it as `grad_accum_steps` micro batches, so the
    ranks together see exactly what one rank would with the same global batch. Every batch has the
    same (micro_batch_size, length) shape (`length`, else `padded_length`). Every rank must be given
    the same samples and seed. `state()` is the position, {"epoch", "index"} with index
    counting this rank's micro batches within the epoch; `from_state` resumes at the next batch."""

    def __init__(self, samples: Sequence[Sample], micro_batch_size: int, *, grad_accum_steps: int = 1,
                 world_size: int = 1, rank: int = 0, seed: int = 0, length: int | None = None,
                 max_seq_len: int | None = None, pad_id: int = 0):
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is outside world_size {world_size}")
        self.samples = list(samples)
        self.micro_batch_size, self.grad_accum_steps = micro_batch_size, grad_accum_steps
        self.world_size, self.rank, self.seed, self.pad_id = world_size, rank, seed, pad_id
        longest = max(len(s) for s in self.samples) if self.samples else 1
        self.length = length or padded_length(max_seq_len or longest, self.samples)
        if longest > self.length:
            raise ValueError(f"a sample of {longest} tokens does not fit the batch length {self.length}")
        self.global_batch_size = micro_batch_size * grad_accum_steps * world_size
        self.steps_per_epoch = len(self.samples) // self.global_batch_size
        if self.steps_per_epoch == 0:
            raise DataError(f"train: {len(self.samples)} samples are fewer than one global batch of "
                            f"{self.global_batch_size} (train.micro_batch_size {micro_batch_size} × "
                            f"train.grad_accum_steps {grad_accum_steps} × data parallel {world_size}); "
                            "lower them or add data")
        self.epoch, self.index = 0, 0
        self._order_epoch, self._order = -1, np.zeros(0, dtype=np.int64)

    @property
    def micro_batches_per_epoch(self) -> int:
        return self.steps_per_epoch * self.grad_accum_steps

    def state(self) -> dict[str, int]:
        """The position: the next batch is micro batch `index` of `epoch` (JSON-able)."""
        return {"epoch": self.epoch, "index": self.index}

    def load_state(self, state: dict[str, int]) -> None:
        """Move to a position saved by `state()` (the next batch is the one after it was saved)."""
        epoch, index = int(state["epoch"]), int(state["index"])
        if epoch < 0 or not 0 <= index < self.micro_batches_per_epoch:
            raise ValueError(f"data position {state} is outside 0 <= index < {self.micro_batches_per_epoch}: "
                             "was the run resumed with another batch size or dataset?")
        self.epoch, self.index = epoch, index

    @classmethod
    def from_state(cls, state: dict[str, int], samples: Sequence[Sample], micro_batch_size: int,
                   **kwargs: Any) -> BatchIterator:
        """A new iterator (same arguments as the constructor) positioned at `state`."""
        iterator = cls(samples, micro_batch_size, **kwargs)
        iterator.load_state(state)
        return iterator

    def _epoch_order(self) -> np.ndarray:
        if self._order_epoch != self.epoch:
            self._order = np.random.default_rng(self.seed + self.epoch).permutation(len(self.samples))
            self._order_epoch = self.epoch
        return self._order

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        return self

    def __next__(self) -> dict[str, np.ndarray]:
        step, micro = divmod(self.index, self.grad_accum_steps)
        per_rank = self.micro_batch_size * self.grad_accum_steps
        start = step * self.global_batch_size + self.rank * per_rank + micro * self.micro_batch_size
        rows = self._epoch_order()[start:start + self.micro_batch_size]
        batch = collate([self.samples[i] for i in rows], self.length, self.pad_id)
        self.index += 1
        if self.index == self.micro_batches_per_epoch:
            self.epoch, self.index = self.epoch + 1, 0
        return batch


def eval_batches(samples: Sequence[Sample], batch_size: int, length: int | None = None,
                 pad_id: int = 0) -> Iterator[dict[str, np.ndarray]]:
    """Every sample exactly once, in order, in (batch_size, length) batches; the last batch is
    filled with fully masked padding rows, which add nothing to a summed loss or token count."""
    if not samples:
        return
    length = length or padded_length(max(len(s) for s in samples), samples)
    for start in range(0, len(samples), batch_size):
        rows: list[Sample | None] = list(samples[start:start + batch_size])
        yield collate(rows + [None] * (batch_size - len(rows)), length, pad_id)
