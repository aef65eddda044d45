"""Preference data: pairs (a prompt, a chosen and a rejected answer) and KTO answers (a prompt, one
answer and a boolean `label`: desirable or not), read into samples for core.preference.

Layouts (field names are the defaults; `data.columns` maps `prompt`, `chosen`, `rejected`, `label`,
`completion` and the usual format fields to a dataset's own names):
- `prompt` / `chosen` / `rejected` as strings, or as message lists (TRL's layout: the prompt's
  messages, each answer a list ending with the assistant message; without `prompt`, each answer is
  the whole conversation and the prompt is their shared beginning); optional `system`;
- `conversations` ({from, value}) or `messages` ({role, content}) with `chosen` and `rejected` final
  answers as strings, {from, value} or {role, content} (LLaMA-Factory's pairwise layout);
- alpaca `instruction` (+ `input`, `system`) with `chosen` / `rejected`;
- KTO: any of the prompts above with `completion` (or alpaca `output`, or the conversation's final
  assistant turn) and a boolean `label`.

Each answer is rendered through the chat template after its prompt as SFT data is (core.data): the
prompt masked, the answer labelled through its end-of-turn token. Both sides of a pair share the
prompt's tokens exactly. A pair whose answers are identical carries no preference: it is dropped and
counted (`identical_pairs`, reported as a warning). A pair with an empty or missing answer, a prompt
that alone fills data.max_seq_len, a label that is not a boolean, or a file mixing layouts is an
error naming the file, the record and the field.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Iterator, Sequence

import numpy as np

from core.data import (IGNORE_INDEX, BatchIterator, Sample, _chat_segments, _encode_segments, _join_pieces,
                       padded_length)
from core.data_files import DataError, DataFile, Record, json_type, read_data_file
from core.data_formats import Columns, Conversation, _sharegpt_roles, preference_layout
from core.tokenizer import Tokenizer

KINDS = ("pairs", "kto")


@dataclass
class PreferenceRecord:
    """One record as a prompt conversation plus its answer(s): `chosen` / `rejected` for a pair, or
    `chosen` with `label` for a KTO answer; `*_field` name where each came from."""
    where: str
    prompt: Conversation
    chosen: str
    rejected: str | None = None
    label: bool | None = None
    chosen_field: str = "chosen"
    rejected_field: str = "rejected"


@dataclass
class PreferencePair:
    """Samples of one record: `chosen` (a KTO answer) and `rejected` (None for KTO), each a
    core.data.Sample (prompt + answer, prompt masked); `label` 1.0 desirable / 0.0 undesirable (KTO)."""
    chosen: Sample
    rejected: Sample | None = None
    label: float = 1.0

    def __len__(self) -> int:
        return max(len(self.chosen), len(self.rejected) if self.rejected is not None else 0)


# ---------------------------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------------------------

def _messages(value: list, record: Record, name: str, columns: Columns) -> list[dict]:
    """A list of {role, content} or {from, value} turns as chat messages."""
    roles = _sharegpt_roles(columns)
    out = []
    for i, turn in enumerate(value):
        where = f"{record.where}: field '{name}[{i}]'"
        if not isinstance(turn, dict):
            raise DataError(f"{where}: expected a message object, got {json_type(turn)}")
        if "role" in turn:
            role, content = turn.get("role"), turn.get("content")
        else:
            role, content = roles.get(turn.get(columns.tag("role_tag"))), turn.get(columns.tag("content_tag"))
        if role not in ("system", "user", "assistant"):
            raise DataError(f"{where}: role {turn.get('role', turn.get(columns.tag('role_tag')))!r} is not "
                            "system, user or assistant")
        if not isinstance(content, str):
            raise DataError(f"{where}: the content must be a string, got {json_type(content)}")
        out.append({"role": role, "content": content})
    return out


def _answer(record: Record, name: str, columns: Columns) -> tuple[str, list[dict] | None]:
    """An answer field as its text, and the messages before it when the field is a whole conversation."""
    source = columns.source(name)
    value = record.fields.get(source)
    where = f"{record.where}: field '{source}'"
    if value is None:
        raise DataError(f"{where}: the answer is missing")
    before = None
    if isinstance(value, dict):
        value = _messages([value], record, source, columns)[0]["content"]
    elif isinstance(value, list):
        messages = _messages(value, record, source, columns)
        if not messages or messages[-1]["role"] != "assistant":
            raise DataError(f"{where}: a message list must end with the assistant's answer")
        value, before = messages[-1]["content"], messages[:-1]
    if not isinstance(value, str):
        raise DataError(f"{where}: expected a string or messages, got {json_type(value)}")
    if not value.strip():
        raise DataError(f"{where}: the answer is empty")
    return value, before


def _system(record: Record, columns: Columns) -> list[dict]:
    system = record.fields.get(columns.source("system"))
    return [{"role": "system", "content": system}] if isinstance(system, str) and system.strip() else []


def _prompt(record: Record, columns: Columns, answer_before: list[dict] | None) -> tuple[list[dict], list[str]]:
    """The prompt's messages and the field each came from."""
    f = record.fields
    prompt, turns = columns.source("prompt"), columns.source("messages", f)
    if prompt in f and f[prompt] is not None:
        value = f[prompt]
        if isinstance(value, str):
            if not value.strip():
                raise DataError(f"{record.where}: field '{prompt}': the prompt is empty")
            system = _system(record, columns)
            return system + [{"role": "user", "content": value}], [columns.source("system")] * len(system) + [prompt]
        if isinstance(value, list):
            messages = _messages(value, record, prompt, columns)
            return messages, [f"{prompt}[{i}]" for i in range(len(messages))]
        raise DataError(f"{record.where}: field '{prompt}': expected a string or messages, got {json_type(value)}")
    if turns in f and isinstance(f[turns], list):
        messages = _messages(f[turns], record, turns, columns)
        fields = [f"{turns}[{i}]" for i in range(len(messages))]
        if not any(m["role"] == "system" for m in messages):
            system = _system(record, columns)
            messages, fields = system + messages, [columns.source("system")] * len(system) + fields
        return messages, fields
    instruction = columns.source("instruction")
    if isinstance(f.get(instruction), str):
        text = f[instruction]
        extra = f.get(columns.source("input"))
        if isinstance(extra, str) and extra.strip():
            text = f"{text}\n\n{extra}"
        system = _system(record, columns)
        return system + [{"role": "user", "content": text}], [columns.source("system")] * len(system) + [instruction]
    if answer_before:
        return answer_before, [f"{columns.source('chosen')}[{i}]" for i in range(len(answer_before))]
    raise DataError(f"{record.where}: no prompt: expected 'prompt', 'conversations'/'messages' or 'instruction' "
                    "(map other names with data.columns)")


def _conversation(record: Record, messages: list[dict], fields: list[str]) -> Conversation:
    if not messages or messages[-1]["role"] != "user":
        raise DataError(f"{record.where}: the prompt must end with a user turn (field "
                        f"'{fields[-1] if fields else 'prompt'}')")
    return Conversation(record.where, messages, fields)


def preference_record(record: Record, kind: str, columns: Columns | None = None) -> PreferenceRecord:
    """A pair (kind "pairs") or a KTO answer (kind "kto") of `record`, every field checked."""
    columns = columns or Columns()
    if kind == "pairs":
        chosen, before_c = _answer(record, "chosen", columns)
        rejected, before_r = _answer(record, "rejected", columns)
        if before_c is not None and before_r is not None and before_c != before_r and \
                columns.source("prompt") not in record.fields:
            raise DataError(f"{record.where}: field '{columns.source('rejected')}': the conversation before the "
                            f"answer differs from '{columns.source('chosen')}'s; a pair shares its prompt")
        messages, fields = _prompt(record, columns, before_c)
        return PreferenceRecord(record.where, _conversation(record, messages, fields), chosen, rejected,
                                chosen_field=columns.source("chosen"), rejected_field=columns.source("rejected"))
    label_field = columns.source("label")
    label = record.fields.get(label_field)
    if not isinstance(label, bool):
        raise DataError(f"{record.where}: field '{label_field}': a KTO label must be true or false, got "
                        f"{label!r} ({json_type(label)})")
    f = record.fields
    for name in ("completion", "output"):
        if columns.source(name) in f:
            answer, before = _answer(record, name, columns)
            messages, fields = _prompt(record, columns, before)
            return PreferenceRecord(record.where, _conversation(record, messages, fields), answer, label=label,
                                    chosen_field=columns.source(name))
    turns = columns.source("messages", f)
    if isinstance(f.get(turns), list):
        messages = _messages(f[turns], record, turns, columns)
        if not messages or messages[-1]["role"] != "assistant" or not messages[-1]["content"].strip():
            raise DataError(f"{record.where}: field '{turns}[{len(messages) - 1}]': a KTO conversation must end "
                            "with a non-empty assistant answer")
        answer = messages[-1]["content"]
        fields = [f"{turns}[{i}]" for i in range(len(messages) - 1)]
        messages = messages[:-1]
        if not any(m["role"] == "system" for m in messages):
            system = _system(record, columns)
            messages, fields = system + messages, [columns.source("system")] * len(system) + fields
        return PreferenceRecord(record.where, _conversation(record, messages, fields), answer, label=label,
                                chosen_field=f"{turns}[{len(f[turns]) - 1}]")
    raise DataError(f"{record.where}: a KTO record needs its answer: 'completion', 'output' or a conversation "
                    "ending with the assistant's turn")


def file_kind(data: DataFile, columns: Columns | None = None) -> str | None:
    """'pairs', 'kto' or None (plain SFT data) for the whole file; a file that mixes them is an
    error naming the first record that differs."""
    columns = columns or Columns()
    kinds = [preference_layout(r, columns) for r in data.records]
    first = kinds[0]
    for record, kind in zip(data.records, kinds):
        if kind != first:
            name = {"pairs": "a preference pair (chosen/rejected)", "kto": "a KTO answer (label)",
                    None: "a plain conversation"}
            raise DataError(f"{record.where}: this record is {name[kind]} but {data.records[0].where} is "
                            f"{name[first]}; a file holds one kind of data (field "
                            f"'{columns.source('rejected') if first == 'pairs' else columns.source('label')}')")
    return first


# ---------------------------------------------------------------------------------------------
# Samples
# ---------------------------------------------------------------------------------------------

@dataclass
class PreferenceSplitStats:
    """One split: its kind, pairs (or KTO answers), identical pairs dropped, truncated answers,
    desirable answers (KTO), and the token lengths of both sides (prompt + answer)."""
    kind: str
    pairs: int
    identical_dropped: int
    truncated: int
    desirable: int
    chosen_mean_length: float
    chosen_max_length: int
    rejected_mean_length: float
    rejected_max_length: int


@dataclass
class PreferenceStats:
    train: PreferenceSplitStats
    validation: PreferenceSplitStats
    seq_len: int = 0
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    def warnings(self) -> list[str]:
        out = [f"{name}: {split.identical_dropped} pairs with identical chosen and rejected answers dropped "
               "(no preference to learn)" for name, split in (("train", self.train), ("validation", self.validation))
               if split.identical_dropped]
        return out + list(self.notes)


@dataclass
class PreferenceSplits:
    train: list[PreferencePair]
    validation: list[PreferencePair]
    stats: PreferenceStats
    test_records: list = field(default_factory=list)


def _pieces(tokenizer: Tokenizer, prompt: Conversation, answer: str, answer_field: str) -> list[tuple[str, bool]]:
    conv = Conversation(prompt.where, prompt.messages + [{"role": "assistant", "content": answer}],
                        prompt.fields + [answer_field], prompt.tools, prompt.tools_field)
    return _chat_segments(tokenizer, conv, True, "last")


def _sample(pieces, end_ids, max_seq_len: int, where: str, answer_field: str) -> tuple[Sample, int, bool]:
    ids, labels = _join_pieces(pieces, end_ids, True)
    first = next((i for i, label in enumerate(labels) if label != IGNORE_INDEX), len(ids))
    if first >= max_seq_len:
        raise DataError(f"{where}: field '{answer_field}': the prompt alone is {first} tokens, which fills "
                        f"data.max_seq_len={max_seq_len}; raise data.max_seq_len or shorten the prompt")
    truncated = len(ids) > max_seq_len
    return (Sample(np.asarray(ids[:max_seq_len], np.int32), np.asarray(labels[:max_seq_len], np.int32)),
            len(ids), truncated)


def tokenize_preference(records: Sequence[PreferenceRecord], kind: str, tokenizer: Tokenizer,
                        max_seq_len: int) -> tuple[list[PreferencePair], PreferenceSplitStats]:
    """Samples of the records (identical pairs dropped and counted) and the split's statistics."""
    segments, owners = [], []
    for r in records:
        segments.append(_pieces(tokenizer, r.prompt, r.chosen, r.chosen_field))
        if kind == "pairs":
            segments.append(_pieces(tokenizer, r.prompt, r.rejected, r.rejected_field))
    encoded = iter(_encode_segments(tokenizer, segments))
    pairs, identical, truncated, lengths_c, lengths_r = [], 0, 0, [], []
    for r in records:
        chosen, n_c, cut_c = _sample(next(encoded), tokenizer.eos_token_ids, max_seq_len, r.where, r.chosen_field)
        if kind == "kto":
            pairs.append(PreferencePair(chosen, None, 1.0 if r.label else 0.0))
            (lengths_c if r.label else lengths_r).append(n_c)
            truncated += cut_c
            continue
        rejected, n_r, cut_r = _sample(next(encoded), tokenizer.eos_token_ids, max_seq_len, r.where, r.rejected_field)
        if r.chosen.strip() == r.rejected.strip() or np.array_equal(chosen.input_ids, rejected.input_ids):
            identical += 1
            continue
        pairs.append(PreferencePair(chosen, rejected))
        lengths_c.append(n_c)
        lengths_r.append(n_r)
        truncated += cut_c + cut_r
    mean = (lambda a: round(float(np.mean(a)), 2) if a else 0.0)
    stats = PreferenceSplitStats(kind, len(pairs), identical, truncated,
                                 sum(p.label > 0.5 for p in pairs) if kind == "kto" else len(pairs),
                                 mean(lengths_c), max(lengths_c, default=0), mean(lengths_r), max(lengths_r, default=0))
    return pairs, stats


def objective_kind(objective: str) -> str:
    return "kto" if objective == "kto" else "pairs"


@dataclass
class PreferenceSource:
    """Records to read as pairs or KTO answers: one file's (or a list's, or a catalogue dataset's),
    with the column mapping that applies to them and `where` to name them (a path or a catalogue
    dataset)."""
    data: DataFile
    columns: Columns
    where: str


def preference_sources(settings, role: str, seed: int = 0) -> list[PreferenceSource]:
    """The data `settings` names for `role` ("train", "validation"): a file, a list of files, or the
    datasets of a `dataset_info.json` catalogue that `data.dataset` picks (each a preference entry,
    `ranking: true` or a `kto_tag` column, read with its own mapping)."""
    from core.data import _columns
    from core.data_catalog import check_columns, is_catalog, load_entry, read_catalog, select
    from core.data_files import concat_files, split_path
    name = getattr(settings, f"{role}_file")
    columns = _columns(settings)
    if isinstance(name, list):
        parts = [read_data_file(item, role=role) for item in name]
        return [PreferenceSource(concat_files(parts[0].path, parts), columns, str(parts[0].path))]
    path = split_path(name)[0]
    if role == "train" and is_catalog(path):
        sources = []
        for entry in select(read_catalog(path), getattr(settings, "dataset", None), path):
            if not entry.preference:
                raise DataError(f"{entry.where}: this dataset is supervised data (no 'ranking: true', no "
                                "'kto_tag' column); train.objective dpo, simpo, orpo or kto needs preference data. "
                                "Choose a preference dataset or set train.objective sft")
            data = load_entry(entry, seed)
            check_columns(entry, data)
            sources.append(PreferenceSource(data, Columns(entry.columns), entry.where))
        return sources
    data = read_data_file(name, role=role)
    return [PreferenceSource(data, columns, str(data.path))]


def _source_kind(source: PreferenceSource, objective: str) -> str:
    """The kind of a source's records ('pairs' or 'kto'), which the objective must want."""
    data, columns = source.data, source.columns
    kind = file_kind(data, columns)
    want = objective_kind(objective)
    if kind != want:
        what = {"pairs": "preference pairs ('chosen' and 'rejected')", "kto": "KTO answers (a boolean 'label')",
                None: "plain conversations without 'chosen'/'rejected' or 'label'"}
        field_name = columns.source("label" if want == "kto" else "rejected")
        raise DataError(f"{data.records[0].where}: field '{field_name}': train.objective {objective} needs "
                        f"{what[want]}, but {source.where} holds {what[kind]}")
    return kind


def _read_records(settings, role: str, objective: str, seed: int) -> list[tuple[Record, Columns]]:
    """Every record of `role`'s sources with its mapping, each source's kind checked."""
    out = []
    for source in preference_sources(settings, role, seed):
        _source_kind(source, objective)
        out += [(record, source.columns) for record in source.data.records]
    return out


def load_preference_splits(settings, tokenizer: Tokenizer, seed: int, objective: str) -> PreferenceSplits:
    """Train and validation pairs (or KTO answers) of a DataSettings for a preference objective."""
    from core.data import _held_out
    kind = objective_kind(objective)
    train = _read_records(settings, "train", objective, seed)
    if settings.validation_file:
        val = _read_records(settings, "validation", objective, seed)
    elif settings.validation_fraction > 0:  # the same seeded hold-out as core.data.split_records
        held_out = _held_out(len(train), settings.validation_fraction, seed, settings.train_file)
        train, val = ([r for i, r in enumerate(train) if i not in held_out],
                      [r for i, r in enumerate(train) if i in held_out])
    else:
        raise DataError("data.validation_file: no validation data; set data.validation_file or "
                        "data.validation_fraction in (0, 0.5]")
    train_pairs, train_stats = tokenize_preference([preference_record(r, kind, c) for r, c in train], kind,
                                                   tokenizer, settings.max_seq_len)
    val_pairs, val_stats = tokenize_preference([preference_record(r, kind, c) for r, c in val], kind,
                                               tokenizer, settings.max_seq_len)
    if not train_pairs or not val_pairs:
        raise DataError(f"{settings.train_file if not train_pairs else settings.validation_file}: no pairs left "
                        "after dropping the identical ones")
    rows = [p.chosen for p in train_pairs + val_pairs] + [p.rejected for p in train_pairs + val_pairs if p.rejected]
    stats = PreferenceStats(train_stats, val_stats, padded_length(settings.max_seq_len, rows))
    return PreferenceSplits(train_pairs, val_pairs, stats)


# ---------------------------------------------------------------------------------------------
# Batches
# ---------------------------------------------------------------------------------------------

def collate_pairs(pairs: Sequence[PreferencePair], length: int, pad_id: int = 0) -> dict[str, np.ndarray]:
    """Rows of one preference micro batch: for pairs the chosen answers then the rejected ones
    (row i and row B + i are pair i), for KTO one row per answer; right-padded `input_ids`,
    `labels`, `attention_mask` (R, length) int32 and `kto_labels` (R,) float32."""
    from core.data import collate
    if pairs and pairs[0].rejected is not None:
        rows = [p.chosen for p in pairs] + [p.rejected for p in pairs]
        kto = np.zeros(len(rows), np.float32)
    else:
        rows = [p.chosen for p in pairs]
        kto = np.asarray([p.label for p in pairs], np.float32)
    batch = collate(rows, length, pad_id)
    batch["kto_labels"] = kto
    return batch


class PreferenceBatches(BatchIterator):
    """core.data.BatchIterator over pairs: the same shuffling, sharding across data-parallel ranks
    (whole pairs), accumulation and resumable position; each micro batch is `collate_pairs` of
    micro_batch_size pairs (2 × micro_batch_size rows) or KTO answers. No packing or length grouping."""

    def collate(self, micro) -> dict[str, np.ndarray]:
        return collate_pairs([self.samples[row[0]] for row in micro], self.length, self.pad_id)


def pair_eval_batches(pairs: Sequence[PreferencePair], batch_size: int, length: int,
                      pad_id: int = 0) -> Iterator[dict[str, np.ndarray]]:
    """Every pair exactly once, in order; the last batch holds the remaining pairs (no padding pairs,
    which would count in the objective's mean)."""
    for start in range(0, len(pairs), batch_size):
        yield collate_pairs(pairs[start:start + batch_size], length, pad_id)


# ---------------------------------------------------------------------------------------------
# Preference data under train.objective sft
# ---------------------------------------------------------------------------------------------

def sft_view(data: DataFile, columns: Columns) -> tuple[DataFile, str | None]:
    """Preference data read for SFT: pairs as conversations ending with the chosen answer, KTO data
    as its desirable answers only (the undesirable ones are never targets); plain data unchanged.
    Returns the file (chat records, `messages`) and the note that says what was done, or None."""
    kind = file_kind(data, columns)
    if kind is None:
        return data, None
    records, skipped = [], 0
    for record in data.records:
        r = preference_record(record, kind, columns)
        if kind == "kto" and not r.label:
            skipped += 1
            continue
        messages = r.prompt.messages + [{"role": "assistant", "content": r.chosen}]
        records.append(Record(record.where, {columns.source("messages", {"messages": None}): messages}))
    if not records:
        raise DataError(f"{data.path}: no desirable answer (label true) to train on with train.objective sft")
    if kind == "pairs":
        note = (f"{data.path}: preference pairs trained as SFT on the {len(records)} chosen answers only (the "
                "rejected ones are not used); set train.objective dpo, simpo or orpo to learn the preference")
    else:
        note = (f"{data.path}: KTO data trained as SFT on the {len(records)} desirable answers only ({skipped} "
                "undesirable answers not used); set train.objective kto to learn from both")
    return DataFile(data.path, records, None, data.split), note


def sft_columns(columns: Columns) -> Columns:
    """`data.columns` for the chat records `sft_view` makes: only `messages` still applies."""
    return Columns({k: v for k, v in columns.mapping.items() if k == "messages"})
