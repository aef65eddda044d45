"""Training data: read files, check their format, render them into token ids with loss labels,
split, cache, and batch them in fixed shapes for a compiled train step.

Pipeline (each stage is a function you can call on its own):
    read_data_file(path)         files and dataset folders (core.data.files)  -> DataFile of Records
    resolve_format(data, fmt)    "auto" | alpaca | sharegpt | chat | text (core.data.formats)
    tokenize_records(...)        chat template, labels on the assistant turns -> Samples (input_ids, labels)
    load_splits(settings, ...)   train / validation / test + stats, cached on disk
    BatchIterator, eval_batches  (B, L) int32 arrays; packed rows or length-grouped batches on request

Labels: chat-like records are rendered through the model's chat template as transformers renders
the same messages (tools included); `train_on="all_assistant"` labels every assistant turn,
`"last"` only the final one; system, user and tool turns never carry loss. Raw text is trained on
every token.

Pure numpy: this module never imports mindspore; inside core it depends on core.data.tokenizer and the
data_* modules only.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

import numpy as np

from core.run.atomic import atomic_open
from core.spec.codec import build
from core.spec.stats import DataStats, SplitStats
from core.data.catalog import check_columns, entry_format, load_entry, preference_refusal, read_catalog, select
from core.data.files import is_catalog
from core.data.files import DataError, DataFile, Record, at, concat_files, read_data_file, split_files, split_path
from core.spec.errors import said_of
from core.spec.messages import Message
from core.data.formats import Columns, Conversation, conversation, ignored_fields, resolve_format, text_of
from core.data.overlong import check_policy, overlong_error, text_chunks, truncate_pieces
from core.spec.stats import LISTED
from core.data.pairs import sft_columns, sft_view
from core.data.packing import (bucket_length, collate_packed, length_groups, pack_rows,
                               packing_efficiency, padding_efficiency)
from core.data.tokenizer import Tokenizer, TokenizerError

if TYPE_CHECKING:  # for annotations only; core.data.pipeline does not depend on core.spec.config at run time
    from core.spec.config import DataSettings

IGNORE_INDEX = -100  # label of a position that carries no loss (same value as core.engine.train_step)
DEFAULT_CACHE_DIR = Path(".mindtune-cache") / "data"
CACHE_VERSION = 3  # bump when the tokenization or the cache layout changes
HISTOGRAM_BINS = 16
SPLIT_STREAM = 1  # random stream of the validation split, kept apart from the epoch shuffles
TRAIN_ON = ("all_assistant", "last")


def _columns(settings: Any) -> Columns:
    return Columns(dict(getattr(settings, "columns", None) or {}))


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
    """A file's samples and what happened to its records: `full_lengths` is every record's length
    before truncation, `sources` each sample's record index (a skipped record has none, a chunked
    text record several); `overlong` lists (where, length) of every record over max_seq_len that
    was truncated or skipped; `media_dropped` counts records whose media were dropped."""
    samples: list[Sample] = field(default_factory=list)
    truncated: int = 0
    full_lengths: list[int] = field(default_factory=list)
    sources: list[int] = field(default_factory=list)
    skipped: int = 0
    chunked: int = 0
    overlong: list[tuple[str, int]] = field(default_factory=list)
    media_dropped: int = 0

    def add(self, source: int, sample: Sample) -> None:
        self.samples.append(sample)
        self.sources.append(source)

    def extend(self, other: TokenizedFile) -> None:
        """`other`'s samples and counts after these (its record indices shifted past these)."""
        offset = len(self.full_lengths)
        self.samples += other.samples
        self.sources += [offset + i for i in other.sources]
        self.full_lengths += other.full_lengths
        self.overlong += other.overlong
        for name in ("truncated", "skipped", "chunked", "media_dropped"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


def _consecutive_assistants(conv: Conversation) -> int | None:
    """The index of the second of two assistant turns in a row, if any."""
    roles = [m["role"] for m in conv.messages]
    return next((i for i in range(1, len(roles)) if roles[i] == roles[i - 1] == "assistant"), None)


def render(tokenizer: Tokenizer, conv: Conversation, upto: int | None = None,
           add_generation_prompt: bool = False) -> str:
    """`conv.messages[:upto]` through the chat template (with its tools), as transformers renders
    them; a template's refusal becomes a DataError naming the record and, where it can, the field."""
    messages = conv.messages if upto is None else conv.messages[:upto]
    extra = {"tools": conv.tools} if conv.tools else {}
    try:
        return tokenizer.apply_chat_template(messages, add_generation_prompt=add_generation_prompt, **extra)
    except TokenizerError as err:
        second = _consecutive_assistants(conv)
        if second is not None and "refused" in str(err):
            raise DataError(at(conv.where, Message("data.two_assistant_turns", field=f"'{conv.fields[second]}'",
                                                   first_field=f"'{conv.fields[second - 1]}'",
                                                   reason=said_of(err)))) from None
        raise DataError(at(conv.where, said_of(err))) from None


def _appears(text: str, rendered: str) -> bool:
    """Whether `text` is in the rendering, as written or JSON-quoted (templates that tojson it)."""
    text = text.strip()
    return not text or text in rendered or json.dumps(text, ensure_ascii=False)[1:-1] in rendered


def check_rendered(tokenizer: Tokenizer, conv: Conversation, rendered: str) -> None:
    """A template that cannot render part of the conversation says so instead of dropping it:
    every tool's name, every tool call's name, and every system and tool turn's text must appear
    in the rendering."""
    model = getattr(tokenizer, "_source", "the model")
    for index, tool in enumerate(conv.tools or []):
        name = (tool.get("function") or tool).get("name")
        if name not in rendered:
            raise DataError(at(conv.where, Message("data.template_no_tools", field=f"'{conv.tools_field}[{index}]'",
                                                   model=model, tool=repr(name))))
    for message, name in zip(conv.messages, conv.fields):
        for call in message.get("tool_calls") or []:
            call_name = (call.get("function") or call).get("name")
            if isinstance(call_name, str) and call_name not in rendered:
                raise DataError(at(conv.where, Message("data.template_no_calls", field=f"'{name}'", model=model,
                                                       tool=repr(call_name))))
        if message["role"] in ("system", "tool") and not _appears(message.get("content") or "", rendered):
            raise DataError(at(conv.where, Message("data.template_drops_turns", field=f"'{name}'", model=model,
                                                   turn_role=message["role"])))


def _chat_segments(tokenizer: Tokenizer, conv: Conversation, mask_prompt: bool,
                   train_on: str = "all_assistant") -> list[tuple[str, bool]]:
    """The rendered chat cut into (text, is_answer) pieces, so that any template works.

    For each trained assistant turn i (every one, or with `train_on="last"` the final one),
    rendering messages[:i] with the generation prompt ends where the answer starts, and rendering
    messages[:i+1] ends where the turn ends; both must be prefixes of the whole rendering.
    Without `mask_prompt` the whole text is one answer piece."""
    full = render(tokenizer, conv)
    check_rendered(tokenizer, conv, full)
    if not mask_prompt:
        return [(full, True)]
    assistant = [i for i, m in enumerate(conv.messages) if m["role"] == "assistant"]
    segments, cursor = [], 0
    for i in assistant if train_on == "all_assistant" else assistant[-1:]:
        prompt = render(tokenizer, conv, i, True)
        through = full if i == len(conv.messages) - 1 else render(tokenizer, conv, i + 1)
        field = f"'{conv.fields[i]}'"
        for text, rendering in ((prompt, Message("data.turns_before", field=field)),
                                (through, Message("data.turns_through", field=field))):
            if not full.startswith(text) or len(text) < cursor:
                raise DataError(at(conv.where, Message("data.template_rewrites", field=field, note=rendering)))
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


def _checked_sample(ids: list[int], labels: list[int], where: str, full: int, max_seq_len: int) -> Sample:
    """A sample that trains something: position 0 is never a target (the loss predicts token t+1
    from t), so at least one labelled token after it must remain."""
    kept_labels = np.asarray(labels, dtype=np.int32)
    if not (kept_labels[1:] != IGNORE_INDEX).any():
        raise DataError(at(where, Message("data.nothing_of_the_answer", tokens=full, max_seq_len=max_seq_len)))
    return Sample(np.asarray(ids, dtype=np.int32), kept_labels)


def tokenize_records(records: Sequence[Record], fmt: str, tokenizer: Tokenizer, max_seq_len: int,
                     mask_prompt: bool = True, *, columns: Columns | Mapping[str, str] | None = None,
                     train_on: str = "all_assistant", overlong: str = "truncate",
                     media: str = "refuse") -> TokenizedFile:
    """Samples of `records` in format `fmt`: alpaca/sharegpt/chat through the chat template with
    the assistant turns labelled (`train_on`), text with all tokens labelled. Records over
    `max_seq_len` follow `overlong` (core.data.overlong: truncate, skip or error); text longer than
    that is cut into max_seq_len chunks. `columns` is `data.columns`; `media` is `data.media`."""
    if train_on not in TRAIN_ON:
        raise DataError(Message("data.not_valid", setting="data.train_on", value=repr(train_on),
                                valid_names=", ".join(TRAIN_ON)))
    check_policy(overlong)
    columns = columns if isinstance(columns, Columns) else Columns(dict(columns or {}))
    out = TokenizedFile()
    if fmt == "text":
        texts = [text_of(r, columns) for r in records]
        encoded = [[(_text_ids(ids, tokenizer.eos_token_id), True)]
                   for ids in tokenizer.encode_batch(texts, add_special_tokens=True)]
    else:
        convs = [conversation(r, fmt, columns, media) for r in records]
        out.media_dropped = sum(c.media_dropped > 0 for c in convs)
        encoded = _encode_segments(tokenizer, [_chat_segments(tokenizer, c, mask_prompt, train_on) for c in convs])
    for index, (record, pieces) in enumerate(zip(records, encoded)):
        length = sum(len(ids) for ids, _ in pieces)
        out.full_lengths.append(length)
        if length > max_seq_len and fmt == "text":  # a long document: consecutive chunks, all trained
            out.chunked += 1
            for chunk in text_chunks(pieces[0][0], max_seq_len):
                out.add(index, Sample(np.asarray(chunk, dtype=np.int32), np.asarray(chunk, dtype=np.int32)))
            continue
        if length > max_seq_len:
            out.overlong.append((record.where, length))
            if overlong != "truncate":
                out.skipped += overlong == "skip"
                continue
            pieces = truncate_pieces(pieces, max_seq_len)
            out.truncated += 1
        ids, labels = _join_pieces(pieces, tokenizer.eos_token_ids, mask_prompt and fmt != "text")
        out.add(index, _checked_sample(ids, labels, record.where, length, max_seq_len))
    if out.overlong and overlong == "error":
        raise overlong_error(out.overlong, max_seq_len)
    return out


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


def build_test_records(data: DataFile, fmt: str, tokenizer: Tokenizer,
                       columns: Columns | Mapping[str, str] | None = None, media: str = "refuse") -> list[TestRecord]:
    """Prompt/answer pairs of a test file: the answer is the last assistant turn, the prompt all
    turns before it (with the conversation's tools)."""
    if fmt == "text":
        raise DataError(Message("data.test_raw_text", file=str(data.path)))
    columns = columns if isinstance(columns, Columns) else Columns(dict(columns or {}))
    prompts, answers = [], []
    for record in data.records:
        conv = conversation(record, fmt, columns, media)
        last = max(i for i, m in enumerate(conv.messages) if m["role"] == "assistant")
        answer = conv.messages[last].get("content") or ""
        if not answer.strip():
            raise DataError(at(record.where, Message("data.test_answer_not_text", field=f"'{conv.fields[last]}'")))
        prompts.append(render(tokenizer, conv, last, True))
        answers.append(answer)
    ids = tokenizer.encode_batch(prompts, add_special_tokens=False)
    return [TestRecord(p, i, a) for p, i, a in zip(prompts, ids, answers)]


# ---------------------------------------------------------------------------------------------
# Splits and statistics
# ---------------------------------------------------------------------------------------------

@dataclass
class DataSplits:
    """Tokenized train and validation samples, test records, stats; `from_cache` says whether
    they were read from the cache instead of tokenized."""
    train: list[Sample]
    validation: list[Sample]
    test_records: list[TestRecord]
    stats: DataStats
    from_cache: bool = False


def _split_stats(fmt: str, tokenized: TokenizedFile, ignored: dict[str, int], policy: str = "truncate") -> SplitStats:
    lengths = np.asarray(tokenized.full_lengths)
    shortest = int(lengths.min())
    width = max(1, math.ceil((lengths.max() - shortest + 1) / HISTOGRAM_BINS))
    edges = shortest + np.arange(HISTOGRAM_BINS + 1) * width  # integer bins from the shortest up
    counts, _ = np.histogram(lengths, bins=edges)
    return SplitStats(
        format=fmt, samples=len(tokenized.samples), truncated=tokenized.truncated,
        labelled_tokens=int(sum((s.labels != IGNORE_INDEX).sum() for s in tokenized.samples)),
        min_length=shortest, mean_length=round(float(lengths.mean()), 2), max_length=int(lengths.max()),
        histogram_edges=edges.tolist(), histogram_counts=counts.tolist(), ignored_fields=ignored,
        records=len(tokenized.full_lengths), overlong_policy=policy, overlong_records=len(tokenized.overlong),
        overlong_listed=[[w, n] for w, n in tokenized.overlong[:LISTED]], skipped=tokenized.skipped,
        chunked=tokenized.chunked, media_dropped=tokenized.media_dropped,
    )


def _with_efficiency(split: SplitStats, samples: Sequence[Sample], seq_len: int, packed_len: int) -> SplitStats:
    lengths = [len(s) for s in samples]
    split.padding_efficiency = round(padding_efficiency(lengths, seq_len), 4)
    split.packed_efficiency = round(packing_efficiency(lengths, packed_len), 4)
    return split


def overlap_count(train: Sequence[Sample], validation: Sequence[Sample]) -> int:
    """How many validation samples have token ids identical to some training sample."""
    seen = {s.input_ids.tobytes() for s in train}
    return sum(s.input_ids.tobytes() in seen for s in validation)


def split_records(data: DataFile, fraction: float, seed: int) -> tuple[list[Record], list[Record]]:
    """(train, validation): a seeded `fraction` of the records held out, the same on every run
    with the same seed; both keep file order."""
    held_out = _held_out(len(data.records), fraction, seed, data.path)
    train = [r for i, r in enumerate(data.records) if i not in held_out]
    return train, [r for i, r in enumerate(data.records) if i in held_out]


def _held_out(n: int, fraction: float, seed: int, path: Any) -> set[int]:
    """The indices of the `fraction` of `n` records held out for validation (seeded)."""
    n_val = int(fraction * n + 0.5)
    if n_val == 0:
        raise DataError(Message("data.no_validation_samples", file=str(path), fraction=fraction, records=n))
    if n_val >= n:
        raise DataError(Message("data.nothing_to_train", file=str(path), fraction=fraction, records=n))
    return set(np.random.default_rng([SPLIT_STREAM, seed]).permutation(n)[:n_val].tolist())


@dataclass
class Source:
    """Records to tokenize together: one file's (or catalogue dataset's), its format and mapping."""
    data: DataFile
    fmt: str
    columns: Columns
    note: str | None = None  # preference data read for SFT: what was trained (core.data.preference.sft_view)


def data_sources(settings: DataSettings, role: str = "train", seed: int = 0) -> list[Source]:
    """The data `settings` names for `role` ("train", "validation", "test"): its file or folder
    read and its format resolved; for a dataset catalogue (core.data.catalog) the datasets
    `data.dataset` picks, each with its own format and mapping."""
    name = getattr(settings, f"{role}_file")
    text_split = getattr(settings, "text_split", "line")
    if isinstance(name, list):
        return [_file_list(name, role, settings, _columns(settings), text_split)]
    path = split_path(name)[0]
    if role == "train" and is_catalog(path):
        sources = []
        for entry in select(read_catalog(path), getattr(settings, "dataset", None), path):
            if entry.preference:
                raise preference_refusal(entry)
            data = load_entry(entry, seed, text_split)
            check_columns(entry, data)
            formatting, mapping = entry_format(entry, data)
            columns = Columns(mapping)
            try:
                sources.append(Source(data, resolve_format(data, formatting, columns), columns))
            except DataError as err:  # the entry's 'formatting' is what set the format
                raise _format_said_by(err, Message("data.formatting_is", entry=entry.where,
                                                   value=repr(formatting))) from None
        return sources
    data = read_data_file(name, role=role, text_split=text_split)
    columns = _columns(settings)
    data, note = sft_view(data, columns)
    if note:  # preference data as chat records: only the chat format's mapping applies
        columns = sft_columns(columns)
        return [Source(data, resolve_format(data, "auto", columns), columns, note)]
    return [Source(data, resolve_format(data, settings.format, columns), columns)]


def _file_list(names: list[str], role: str, settings: DataSettings, columns: Columns, text_split: str) -> Source:
    """A list of files in data.{role}_file as one source: each read and its format resolved, the
    formats agreeing, the records concatenated in order (each keeps its file and line)."""
    parts = [read_data_file(name, role=role, text_split=text_split) for name in names]
    formats = [resolve_format(part, settings.format, columns) for part in parts]
    for part, fmt in zip(parts, formats):
        if fmt != formats[0]:
            raise DataError(Message("data.mixed_formats", file=str(part.path), fmt=fmt, first_file=str(parts[0].path),
                                    setting=f"data.{role}_file", first_fmt=formats[0]))
    return Source(concat_files(parts[0].path, parts), formats[0], columns)


def check_explicit_format(settings: DataSettings, origin: str | None) -> None:
    """A data.format set explicitly (not auto) that the training data contradicts, as a DataError
    that says where it was set ("data.format is 'alpaca' (set in configs/lora_demo.yaml); the data
    looks like sharegpt"). Other problems are left to the run to report."""
    if settings.format == "auto":
        return
    try:
        data_sources(settings, "train")
    except DataError as err:
        if _contradicted(err) and origin:
            raise _format_said_by(err, Message("data.format_set_in", value=repr(settings.format),
                                               origin=origin)) from None
        if _contradicted(err):
            raise


def _contradicted(err: DataError) -> bool:
    """Whether `err` is a format the data contradicts (data.looks_like)."""
    return bool(err.said) and err.said[0].key == "data.looks_like"


def _format_said_by(err: DataError, setting: Message) -> DataError:
    """A format the data contradicts said with the setting that chose it; `err` itself when it is
    another problem."""
    if not _contradicted(err):
        return err
    return DataError(Message("data.looks_like", **{**err.said[0].params, "reason": setting}))


def _formats(sources: Sequence[Source]) -> str:
    return "+".join(dict.fromkeys(s.fmt for s in sources))


def _tokenized_split(parts: Sequence[tuple[Source, Sequence[Record]]], tokenizer: Tokenizer,
                     settings: DataSettings) -> tuple[TokenizedFile, dict[str, int]]:
    """The records of every source tokenized (each with its format) and concatenated, and the
    fields their formats ignore."""
    tokenized, ignored = TokenizedFile(), {}
    for source, records in parts:
        tokenized.extend(tokenize_records(
            records, source.fmt, tokenizer, settings.max_seq_len, settings.mask_prompt, columns=source.columns,
            train_on=getattr(settings, "train_on", "all_assistant"), overlong=getattr(settings, "overlong", "truncate"),
            media=getattr(settings, "media", "refuse")))
        for name, count in ignored_fields(records, source.fmt, source.columns).items():
            ignored[name] = ignored.get(name, 0) + count
    return tokenized, ignored


def _split_sources(sources: list[Source], fraction: float, seed: int):
    """(train parts, validation parts): a seeded `fraction` of all the sources' records held out."""
    held_out = _held_out(sum(len(s.data.records) for s in sources), fraction, seed,
                         sources[0].data.path if len(sources) == 1 else "data.dataset")
    train, val, offset = [], [], 0
    for source in sources:
        records = source.data.records
        train.append((source, [r for i, r in enumerate(records) if offset + i not in held_out]))
        val.append((source, [r for i, r in enumerate(records) if offset + i in held_out]))
        offset += len(records)
    return train, val


def _build_splits(settings: DataSettings, tokenizer: Tokenizer, seed: int) -> DataSplits:
    """Read, split and tokenize every file named in `settings` (no cache)."""
    train_sources = data_sources(settings, "train", seed)
    if settings.validation_file:
        val_sources = data_sources(settings, "validation", seed)
        train_parts = [(s, s.data.records) for s in train_sources]
        val_parts = [(s, s.data.records) for s in val_sources]
    elif settings.validation_fraction > 0:
        val_sources = train_sources
        train_parts, val_parts = _split_sources(train_sources, settings.validation_fraction, seed)
    else:
        raise DataError(Message("data.no_validation_data"))
    train, train_ignored = _tokenized_split(train_parts, tokenizer, settings)
    val, val_ignored = _tokenized_split(val_parts, tokenizer, settings)
    tests = []
    if settings.test_file:
        test = data_sources(settings, "test", seed)[0]
        tests = build_test_records(test.data, test.fmt, tokenizer, test.columns, getattr(settings, "media", "refuse"))
    seq_len = padded_length(settings.max_seq_len, train.samples, val.samples)
    packed_len = packed_length(settings.max_seq_len)
    policy = getattr(settings, "overlong", "truncate")
    stats = DataStats(
        train=_with_efficiency(_split_stats(_formats(train_sources), train, train_ignored, policy), train.samples,
                               seq_len, packed_len),
        validation=_with_efficiency(_split_stats(_formats(val_sources), val, val_ignored, policy), val.samples,
                                    seq_len, packed_len),
        validation_source="file" if settings.validation_file else "fraction",
        test_records=len(tests), validation_in_train=overlap_count(train.samples, val.samples),
        seq_len=seq_len, packed_seq_len=packed_len, max_seq_len=settings.max_seq_len,
        notes=list(dict.fromkeys(s.note for s in (*train_sources, *val_sources) if s.note)),
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
    loaded from a folder) the backend's serialization. Both are private details of core.data.tokenizer."""
    source = Path(getattr(tokenizer, "_source", "")) / "tokenizer.json"
    if source.is_file():
        return source.read_bytes()
    return getattr(tokenizer, "_backend").to_str().encode("utf-8")


def _file_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as err:
        raise DataError(Message("data.unreadable", file=str(path), os_error=err.strerror or str(err))) from None


def cache_key(settings: DataSettings, tokenizer: Tokenizer, seed: int) -> str:
    """A hash of everything the tokenized splits depend on: the files' names and bytes (every
    shard of a dataset folder), the tokenizer, its chat template and special tokens, and the data
    settings (and the seed when it chooses the validation split)."""
    digest = hashlib.sha256()

    def add(label: str, data: bytes) -> None:
        digest.update(f"{label}:{len(data)}:".encode() + data)

    add("version", str(CACHE_VERSION).encode())
    for role, split in (("train_file", "train"), ("validation_file", "validation"), ("test_file", "test")):
        name = getattr(settings, role)
        if not name:
            add(role, b"")
            continue
        for path in source_files(settings, name, split):
            add(role, path.name.encode() + b"\0" + _file_bytes(path))
    add("tokenizer", _tokenizer_bytes(tokenizer))
    add("chat_templates", json.dumps(getattr(tokenizer, "_chat_templates", {}), sort_keys=True).encode())
    specials = [tokenizer.special_tokens, sorted(tokenizer.eos_token_ids)]
    add("special_tokens", json.dumps(specials, sort_keys=True).encode())
    knobs = {k: getattr(settings, k, None) for k in ("format", "validation_fraction", "max_seq_len", "mask_prompt",
                                                      "columns", "train_on", "dataset", "overlong", "text_split",
                                                      "media")}
    knobs["seed"] = None if settings.validation_file else seed
    add("settings", json.dumps(knobs, sort_keys=True).encode())
    return digest.hexdigest()[:32]


def source_files(settings: DataSettings, name: str, role: str) -> list[Path]:
    """The files a data setting reads: for a catalogue, its dataset_info.json and the files of the
    datasets data.dataset picks (broken picks are left to the build to report)."""
    if isinstance(name, list):
        return [path for item in name for path in split_files(item, role)]
    path = split_path(name)[0]
    if role != "train" or not is_catalog(path):
        return split_files(name, role)
    files = [path / "dataset_info.json"]
    try:
        entries = select(read_catalog(path), getattr(settings, "dataset", None), path)
    except DataError:
        return files
    for entry in entries:
        for item in entry.files:
            files += sorted(p for p in item.rglob("*") if p.is_file()) if item.is_dir() else [item]
    return files


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
        return DataSplits(train, val, tests, build(DataStats, meta["stats"], str(path)), from_cache=True)
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


def packed_length(max_seq_len: int) -> int:
    """The row length with packing: `max_seq_len` rounded up to a multiple of 8 (rows are filled
    with several samples, so short datasets still fill them)."""
    return _round_up(max_seq_len, 8)


def run_seq_len(max_seq_len: int, longest: int, packing: bool = False) -> int:
    """`padded_length` from the longest sample's token count (before or after truncation); with
    `packing`, the packed row length. This is the sequence length the memory estimate uses."""
    if packing:
        return packed_length(max_seq_len)
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


MicroBatch = list[list[int]]  # rows of sample indices (one per row without packing)


class BatchIterator:
    """Endless micro batches of the training samples for one data-parallel rank.

    Each epoch shuffles the samples with `np.random.default_rng(seed + epoch)` and cuts them into
    micro batches of `micro_batch_size` rows: one sample per row by default; with `packing`,
    rows of `length` tokens holding several samples (`pack_rows`, rows shuffled with the same
    generator), with `position_ids` and `segment_ids`; with `group_by_length`, samples of similar
    length together, each micro batch padded to its own bucket length (`bucket_length`). Global
    batches are micro × accum × world micro-batch rows; the last incomplete one of an epoch is
    dropped, so every optimizer step sees the same number of rows. Rank r takes micro batches
    r·accum ... r·accum + accum - 1 of each global batch, so the ranks together see exactly what
    one rank would with the same global batch. Every rank must be given the same samples and seed.
    `state()` is the position, {"epoch", "index"} with index counting this rank's micro batches
    within the epoch; `from_state` resumes at the next batch."""

    def __init__(self, samples: Sequence[Sample], micro_batch_size: int, *, grad_accum_steps: int = 1,
                 world_size: int = 1, rank: int = 0, seed: int = 0, length: int | None = None,
                 max_seq_len: int | None = None, pad_id: int = 0, packing: bool = False,
                 group_by_length: bool = False):
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is outside world_size {world_size}")
        if packing and group_by_length:
            raise ValueError("packing and group_by_length exclude each other: pick one")
        self.samples = list(samples)
        self.lengths = np.asarray([len(s) for s in self.samples], dtype=np.int64)
        self.micro_batch_size, self.grad_accum_steps = micro_batch_size, grad_accum_steps
        self.world_size, self.rank, self.seed, self.pad_id = world_size, rank, seed, pad_id
        self.packing, self.group_by_length = packing, group_by_length
        longest = int(self.lengths.max()) if len(self.lengths) else 1
        if length is None:
            length = packed_length(max_seq_len or longest) if packing else padded_length(max_seq_len or longest,
                                                                                          self.samples)
        self.length = length
        if longest > self.length:
            raise ValueError(f"a sample of {longest} tokens does not fit the batch length {self.length}")
        self.global_batch_size = micro_batch_size * grad_accum_steps * world_size
        self._plans: dict[int, list[MicroBatch]] = {}
        self.steps_per_epoch = self._steps(0)
        if self.steps_per_epoch == 0:
            said = "data.fewer_rows_than_a_batch" if packing else "data.fewer_samples_than_a_batch"
            count = len(self._plan(0)) * micro_batch_size if packing else len(self.samples)
            raise DataError(Message(said, count=count, batch=self.global_batch_size, micro=micro_batch_size,
                                    accum=grad_accum_steps, world=world_size))
        self.epoch, self.index = 0, 0

    # -- the plan of an epoch ------------------------------------------------------------------

    def _plan(self, epoch: int) -> list[MicroBatch]:
        """Every micro batch of `epoch` (all ranks), rows of sample indices; the last few may be
        incomplete and are never reached (see `_steps`)."""
        if epoch not in self._plans:
            self._plans = {epoch: self._make_plan(epoch)}  # keep one epoch: plans are rebuilt cheaply
        return self._plans[epoch]

    def _make_plan(self, epoch: int) -> list[MicroBatch]:
        rng = np.random.default_rng(self.seed + epoch)
        order = rng.permutation(len(self.samples))
        size = self.micro_batch_size
        if self.group_by_length:
            groups = [g for g in length_groups(self.lengths, size, order.tolist()) if len(g) == size]
            groups = [groups[i] for i in rng.permutation(len(groups))]
            return [[[i] for i in group] for group in groups]
        if self.packing:
            rows = pack_rows(self.lengths, self.length, order.tolist())
            rows = [rows[i] for i in rng.permutation(len(rows))]
        else:
            rows = [[int(i)] for i in order]
        return [rows[k:k + size] for k in range(0, len(rows) - size + 1, size)]

    def _steps(self, epoch: int) -> int:
        return len(self._plan(epoch)) // (self.grad_accum_steps * self.world_size)

    @property
    def micro_batches_per_epoch(self) -> int:
        """This rank's micro batches in the current epoch."""
        return self._steps(self.epoch) * self.grad_accum_steps

    def state(self) -> dict[str, int]:
        """The position: the next batch is micro batch `index` of `epoch` (JSON-able)."""
        return {"epoch": self.epoch, "index": self.index}

    def load_state(self, state: dict[str, int]) -> None:
        """Move to a position saved by `state()` (the next batch is the one after it was saved)."""
        epoch, index = int(state["epoch"]), int(state["index"])
        per_epoch = self._steps(epoch) * self.grad_accum_steps if epoch >= 0 else 0
        if epoch < 0 or not 0 <= index < per_epoch:
            raise ValueError(f"data position {state} is outside 0 <= index < {per_epoch}: "
                             "was the run resumed with another batch size or dataset?")
        self.epoch, self.index = epoch, index

    @classmethod
    def from_state(cls, state: dict[str, int], samples: Sequence[Sample], micro_batch_size: int,
                   **kwargs: Any) -> BatchIterator:
        """A new iterator (same arguments as the constructor) positioned at `state`."""
        iterator = cls(samples, micro_batch_size, **kwargs)
        iterator.load_state(state)
        return iterator

    # -- batches -------------------------------------------------------------------------------

    def collate(self, micro: MicroBatch) -> dict[str, np.ndarray]:
        """One micro batch as arrays: packed rows, a bucket-length batch, or plain rows."""
        if self.packing:
            rows = [[(self.samples[i].input_ids, self.samples[i].labels) for i in row] for row in micro]
            return collate_packed(rows, self.length, self.pad_id)
        samples = [self.samples[row[0]] for row in micro]
        length = self.length
        if self.group_by_length:
            length = bucket_length(max(len(s) for s in samples), self.length)
        return collate(samples, length, self.pad_id)

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        return self

    def __next__(self) -> dict[str, np.ndarray]:
        step, micro = divmod(self.index, self.grad_accum_steps)
        k = (step * self.world_size + self.rank) * self.grad_accum_steps + micro
        batch = self.collate(self._plan(self.epoch)[k])
        self.index += 1
        if self.index == self.micro_batches_per_epoch:
            self.epoch, self.index = self.epoch + 1, 0
        return batch


def eval_batches(samples: Sequence[Sample], batch_size: int, length: int | None = None,
                 pad_id: int = 0, packing: bool = False) -> Iterator[dict[str, np.ndarray]]:
    """Every sample exactly once, in order, in (batch_size, length) batches; the last batch is
    filled with fully masked padding rows, which add nothing to a summed loss or token count.
    With `packing`, rows of `length` tokens hold several samples (the same losses, fewer rows)."""
    if not samples:
        return
    if packing:
        length = length or packed_length(max(len(s) for s in samples))
        rows = pack_rows([len(s) for s in samples], length)
        for start in range(0, len(rows), batch_size):
            chunk: list[Any] = [[(samples[i].input_ids, samples[i].labels) for i in row]
                                for row in rows[start:start + batch_size]]
            yield collate_packed(chunk + [None] * (batch_size - len(chunk)), length, pad_id)
        return
    length = length or padded_length(max(len(s) for s in samples), samples)
    for start in range(0, len(samples), batch_size):
        batch: list[Sample | None] = list(samples[start:start + batch_size])
        yield collate(batch + [None] * (batch_size - len(batch)), length, pad_id)
