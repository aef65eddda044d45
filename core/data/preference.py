"""Preference data: pairs (a prompt, a chosen and a rejected answer) and KTO answers (a prompt, one
answer and a boolean `label`: desirable or not), read into samples for core.engine.preference.

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

Each answer is rendered through the chat template after its prompt as SFT data is (core.data.pipeline): the
prompt masked, the answer labelled through its end-of-turn token. Both sides of a pair share the
prompt's tokens exactly. A pair whose answers are identical carries no preference: it is dropped and
counted (`identical_pairs`, reported as a warning). A pair with an empty or missing answer, a prompt
that alone fills data.max_seq_len, a label that is not a boolean, or a file mixing layouts is an
error naming the file, the record and the field.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Sequence

import numpy as np

from core.spec.stats import PreferenceSplitStats, PreferenceStats
from core.spec.messages import Message
from core.data.catalog import check_columns, is_catalog, load_entry, read_catalog, select
from core.data.pipeline import (IGNORE_INDEX, BatchIterator, Sample, _chat_segments, _columns, _encode_segments, _held_out,
                                _join_pieces, collate, padded_length)
from core.data.files import DataError, DataFile, Record, at, concat_files, read_data_file, split_path
from core.data.formats import Columns, Conversation
from core.data.pairs import (KINDS, PreferenceRecord, file_kind, preference_record,  # noqa: F401 (re-exported)
                             sft_columns, sft_view)
from core.data.tokenizer import Tokenizer

@dataclass
class PreferencePair:
    """Samples of one record: `chosen` (a KTO answer) and `rejected` (None for KTO), each a
    core.data.pipeline.Sample (prompt + answer, prompt masked); `label` 1.0 desirable / 0.0 undesirable (KTO)."""
    chosen: Sample
    rejected: Sample | None = None
    label: float = 1.0

    def __len__(self) -> int:
        return max(len(self.chosen), len(self.rejected) if self.rejected is not None else 0)


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
        raise DataError(at(where, Message("data.prompt_fills", field=f"'{answer_field}'", count=first,
                                          max_seq_len=max_seq_len)))
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
                raise DataError(Message("data.supervised_not_preference", entry=entry.where))
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
        raise DataError(at(data.records[0].where, Message("data.objective_needs", field=f"'{field_name}'",
                                                          objective=objective, wanted=what[want], held_by=str(source.where),
                                                          held=what[kind])))
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
    kind = objective_kind(objective)
    train = _read_records(settings, "train", objective, seed)
    if settings.validation_file:
        val = _read_records(settings, "validation", objective, seed)
    elif settings.validation_fraction > 0:  # the same seeded hold-out as core.data.pipeline.split_records
        held_out = _held_out(len(train), settings.validation_fraction, seed, settings.train_file)
        train, val = ([r for i, r in enumerate(train) if i not in held_out],
                      [r for i, r in enumerate(train) if i in held_out])
    else:
        raise DataError(Message("data.no_validation_data"))
    train_pairs, train_stats = tokenize_preference([preference_record(r, kind, c) for r, c in train], kind,
                                                   tokenizer, settings.max_seq_len)
    val_pairs, val_stats = tokenize_preference([preference_record(r, kind, c) for r, c in val], kind,
                                               tokenizer, settings.max_seq_len)
    if not train_pairs or not val_pairs:
        raise DataError(Message("data.no_pairs_left",
                                file=str(settings.train_file if not train_pairs else settings.validation_file)))
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
    """core.data.pipeline.BatchIterator over pairs: the same shuffling, sharding across data-parallel ranks
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
