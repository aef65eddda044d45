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
from core.data.catalog import check_columns, load_entry, read_catalog, select
from core.data.files import is_catalog
from core.data.pipeline import (IGNORE_INDEX, BatchIterator, Sample, _chat_segments, _columns, _encode_segments, _held_out,
                                _join_pieces, collate, padded_length)
from core.data.files import DataError, DataFile, at, concat_files, read_data_file, split_path
from core.data.formats import Columns, Conversation
from core.data.overlong import check_policy, cutoff_lengths, overlong_error
from core.spec.stats import LISTED
from core.data.pairs import PreferenceRecord, file_kind, preference_records
from core.data.tokenizer import Tokenizer

@dataclass
class PreferencePair:
    """Samples of one record: `chosen` (a KTO answer) and `rejected` (None for KTO), each a
    core.data.pipeline.Sample (prompt + answer, prompt masked); `label` 1.0 desirable / 0.0 undesirable (KTO)."""
    chosen: Sample
    rejected: Sample | None = None
    label: float = 1.0
    where: str = ""  # the record's place (file and line)

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


def _parts(pieces, end_ids) -> tuple[list[int], list[int], list[int]]:
    """A rendered prompt + answer as (prompt ids, answer ids, answer labels): the prompt is what comes
    before the first labelled token, the answer (through its end-of-turn, and the template's closing
    text, unlabelled) the rest."""
    ids, labels = _join_pieces(pieces, end_ids, True)
    first = next((i for i, label in enumerate(labels) if label != IGNORE_INDEX), len(ids))
    return ids[:first], ids[first:], labels[first:]


def _sample(ids: list[int], answer_labels: list[int]) -> Sample:
    """prompt + answer ids, the prompt masked (the answer's labels are the last ones)."""
    return Sample(np.asarray(ids, np.int32),
                  np.asarray([IGNORE_INDEX] * (len(ids) - len(answer_labels)) + answer_labels, np.int32))


@dataclass
class _Overlong:
    """What data.overlong did to a split's records: (where, tokens) of each over-long record (the
    longer side of a pair, prompt included), and how many were skipped or truncated."""
    policy: str
    max_seq_len: int
    listed: list[tuple[str, int]] = field(default_factory=list)
    prompt_fills: list[tuple[str, str, int]] = field(default_factory=list)  # (where, field, prompt tokens)

    def fit(self, where: str, prompt: list[int], answers: list[tuple[list[int], list[int]]],
            answer_field: str) -> list[tuple[list[int], list[int]]] | None:
        """Prompt + each answer within max_seq_len by the policy: None when the record is skipped;
        `truncate` keeps the end of the prompt (its last turns) and cuts every answer to the length
        LLaMA-Factory's cutoff (core.data.overlong.cutoff_lengths) gives the longest one."""
        longest = max(len(ids) for ids, _ in answers)
        if len(prompt) + longest <= self.max_seq_len:
            return [(prompt + ids, labels) for ids, labels in answers]
        self.listed.append((where, len(prompt) + longest))
        if self.policy != "truncate":
            if self.policy == "error" and len(prompt) >= self.max_seq_len:
                self.prompt_fills.append((where, answer_field, len(prompt)))
            return None
        keep_prompt, keep_answer = cutoff_lengths(len(prompt), longest, self.max_seq_len)
        keep_answer = max(keep_answer, 1)  # a sample trains its answer's first token at least
        keep_prompt = min(keep_prompt, self.max_seq_len - keep_answer)
        kept = prompt[len(prompt) - keep_prompt:] if keep_prompt else []
        return [(kept + ids[:keep_answer], labels[:keep_answer]) for ids, labels in answers]

    def check(self) -> None:
        """data.overlong: error refuses every over-long record (a prompt that alone fills data.max_seq_len
        is named by its field, as before the policy applied to preference data)."""
        if self.policy != "error":
            return
        if self.prompt_fills:
            where, answer_field, count = self.prompt_fills[0]
            raise DataError(at(where, Message("data.prompt_fills", field=f"'{answer_field}'", count=count,
                                              max_seq_len=self.max_seq_len)))
        if self.listed:
            raise overlong_error(self.listed, self.max_seq_len)


def tokenize_preference(records: Sequence[PreferenceRecord], kind: str, tokenizer: Tokenizer,
                        max_seq_len: int, overlong: str = "error") -> tuple[list[PreferencePair], PreferenceSplitStats]:
    """Samples of the records (identical pairs dropped and counted) and the split's statistics.
    A record over `max_seq_len` (prompt and its longer answer) follows `overlong`: truncate, skip
    (the pair or KTO answer is left out) or error (core.data.overlong); each is counted and listed."""
    check_policy(overlong)
    segments = []
    for r in records:
        segments.append(_pieces(tokenizer, r.prompt, r.chosen, r.chosen_field))
        if kind == "pairs":
            segments.append(_pieces(tokenizer, r.prompt, r.rejected, r.rejected_field))
    encoded = iter(_encode_segments(tokenizer, segments))
    policy = _Overlong(overlong, max_seq_len)
    pairs, identical, lengths_c, lengths_r = [], 0, [], []
    end = tokenizer.eos_token_ids
    for r in records:
        prompt, *chosen = _parts(next(encoded), end)
        sides = [tuple(chosen)]
        if kind == "pairs":
            sides.append(tuple(_parts(next(encoded), end)[1:]))
        fitted = policy.fit(r.where, prompt, sides, r.chosen_field)
        if fitted is None:
            continue
        samples = [_sample(ids, labels) for ids, labels in fitted]
        n_c = len(prompt) + len(sides[0][0])
        if kind == "kto":
            pairs.append(PreferencePair(samples[0], None, 1.0 if r.label else 0.0, r.where))
            (lengths_c if r.label else lengths_r).append(n_c)
            continue
        if r.chosen.strip() == r.rejected.strip() or np.array_equal(samples[0].input_ids, samples[1].input_ids):
            identical += 1
            continue
        pairs.append(PreferencePair(samples[0], samples[1], where=r.where))
        lengths_c.append(n_c)
        lengths_r.append(len(prompt) + len(sides[1][0]))
    policy.check()
    mean = (lambda a: round(float(np.mean(a)), 2) if a else 0.0)
    over = len(policy.listed)
    stats = PreferenceSplitStats(kind, len(pairs), identical, over if overlong == "truncate" else 0,
                                 sum(p.label > 0.5 for p in pairs) if kind == "kto" else len(pairs),
                                 mean(lengths_c), max(lengths_c, default=0), mean(lengths_r), max(lengths_r, default=0),
                                 records=len(records), overlong_policy=overlong, overlong_records=over,
                                 overlong_listed=[[w, n] for w, n in policy.listed[:LISTED]],
                                 skipped=over if overlong == "skip" else 0)
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


def _read_records(settings, role: str, objective: str, seed: int) -> list[PreferenceRecord]:
    """Every record of `role`'s sources as pairs or KTO answers, each source's kind checked and
    every record's problems found in one pass."""
    out = []
    for source in preference_sources(settings, role, seed):
        out += preference_records(source.data, _source_kind(source, objective), source.columns)
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
    overlong = getattr(settings, "overlong", "truncate")
    train_pairs, train_stats = tokenize_preference(train, kind, tokenizer, settings.max_seq_len, overlong)
    val_pairs, val_stats = tokenize_preference(val, kind, tokenizer, settings.max_seq_len, overlong)
    if not train_pairs or not val_pairs:
        raise DataError(Message("data.no_pairs_left",
                                file=str(settings.train_file if not train_pairs else settings.validation_file)))
    rows = [p.chosen for p in train_pairs + val_pairs] + [p.rejected for p in train_pairs + val_pairs if p.rejected]
    stats = PreferenceStats(train_stats, val_stats, padded_length(settings.max_seq_len, rows),
                            max_seq_len=settings.max_seq_len)
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
