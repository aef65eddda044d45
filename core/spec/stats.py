"""What the data pipeline found in a dataset, as the console, the run's setup record and the data
cache keep it: `DataStats` (supervised data, `SplitStats` per split) and `PreferenceStats`
(preference pairs or KTO answers, `PreferenceSplitStats` per split) and `PromptStats` (GRPO's prompt
sets, `PromptSplitStats` per split). Plain dataclasses, read and
written by core.spec.codec (`build(DataStats, mapping)`, `.to_dict()`); core.data fills them in,
core.run.records names them in `SetupEvent.data`. Stdlib only.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from core.spec.codec import encode
from core.spec.messages import Message
from core.spec.places import Where

__all__ = ["LISTED", "listing", "SplitStats", "DataStats", "PreferenceSplitStats", "PreferenceStats",
           "PromptSplitStats", "PromptStats"]

LISTED = 20  # over-long records named in a message or kept in the statistics


def listing(records: list[tuple[str, int]], total: int) -> Message:
    """'data/a.jsonl line 160 (463 tokens), ... and 3 more' for the first LISTED records, each an
    item of its own (stats.listed_record: the record's place as core.data.files.Where, or the text a
    cache kept of it)."""
    items = [Message("stats.listed_record", record_at=Where.from_record(where), tokens=length)
             for where, length in records[:LISTED]]
    if total > LISTED:
        return Message("stats.listing_more", items=items, more=total - LISTED)
    return Message("stats.listing", items=items)



def _notes(notes: list) -> list:
    """The notes as messages, where a cache kept their records (a text an older cache kept: as it is)."""
    return [(Message.from_json(note) or str(note)) if isinstance(note, dict) else note for note in notes]


@dataclass
class SplitStats:
    """One split: format, samples, truncated samples, labelled tokens, token lengths before
    truncation (min/mean/max and a histogram with integer bin edges, to help choose max_seq_len),
    the fields its format ignored ({field: records}), and the padding efficiency (real tokens /
    padded tokens) one sample per row and packed."""
    format: str
    samples: int
    truncated: int
    labelled_tokens: int
    min_length: int
    mean_length: float
    max_length: int
    histogram_edges: list[int]
    histogram_counts: list[int]
    ignored_fields: dict[str, int] = field(default_factory=dict)
    padding_efficiency: float = 0.0
    packed_efficiency: float = 0.0
    records: int = 0  # records read (a skipped record has no sample, a chunked text record several)
    overlong_policy: str = "truncate"
    overlong_records: int = 0  # records over max_seq_len (truncated or skipped by the policy)
    overlong_listed: list[list] = field(default_factory=list)  # [where, tokens] of the first LISTED
    skipped: int = 0
    chunked: int = 0  # text records cut into max_seq_len chunks
    media_dropped: int = 0  # records whose media were dropped (data.media: drop)

    def notes(self, name: str, max_seq_len: int) -> list[str]:
        """What happened to this split's records beyond plain tokenizing, one line each."""
        lines = []
        if self.overlong_records:
            lines.append(Message("stats.overlong_truncated" if self.overlong_policy == "truncate"
                                 else "stats.overlong_skipped", split_role=name, count=self.overlong_records,
                                 records=self.records, max_seq_len=max_seq_len, policy=self.overlong_policy,
                                 listed=listing([tuple(x) for x in self.overlong_listed], self.overlong_records)))
        if self.chunked:
            lines.append(Message("stats.chunked", split_role=name, count=self.chunked, max_seq_len=max_seq_len,
                                 samples=self.samples, records=self.records))
        if self.media_dropped:
            lines.append(Message("stats.media_dropped", split_role=name, count=self.media_dropped))
        return lines


@dataclass
class DataStats:
    """What the console shows about the data; `validation_in_train` counts validation samples
    whose token ids also occur in training (reported, not an error). `seq_len` is the row length
    without packing, `packed_seq_len` with it."""
    train: SplitStats
    validation: SplitStats
    validation_source: str  # "file" or "fraction"
    test_records: int
    validation_in_train: int
    seq_len: int = 0
    packed_seq_len: int = 0
    max_seq_len: int = 0
    # e.g. preference data read as SFT (core.data.preference.sft_view): messages, kept as records
    notes: list[Any] = field(default_factory=list, metadata={"records": True})

    def to_dict(self) -> dict:
        return encode(self)

    def warnings(self) -> list[str]:
        """'train: field `history` ignored in 12 of 40 records', one line per field and split."""
        splits = (("train", self.train), ("validation", self.validation))
        return [Message("stats.ignored_field", split_role=name, field=field_name, count=count,
                        records=split.records or split.samples)
                for name, split in splits for field_name, count in split.ignored_fields.items()
                ] + [line for name, split in splits for line in split.notes(name, self.max_seq_len)] \
            + _notes(self.notes)



@dataclass
class PreferenceSplitStats:
    """One split: its kind, pairs (or KTO answers), identical pairs dropped, truncated records,
    desirable answers (KTO), the token lengths of both sides (prompt + answer, before truncation),
    and what data.overlong did to the records over max_seq_len (as SplitStats says it)."""
    kind: str
    pairs: int
    identical_dropped: int
    truncated: int
    desirable: int
    chosen_mean_length: float
    chosen_max_length: int
    rejected_mean_length: float
    rejected_max_length: int
    records: int = 0
    overlong_policy: str = "truncate"
    overlong_records: int = 0
    overlong_listed: list[list] = field(default_factory=list)  # [where, tokens] of the first LISTED
    skipped: int = 0

    def notes(self, name: str, max_seq_len: int) -> list[str]:
        if not self.overlong_records:
            return []
        key = "stats.pairs_overlong_truncated" if self.overlong_policy == "truncate" else "stats.overlong_skipped"
        return [Message(key, split_role=name, count=self.overlong_records, records=self.records,
                        max_seq_len=max_seq_len, policy=self.overlong_policy,
                        listed=listing([tuple(x) for x in self.overlong_listed], self.overlong_records))]


@dataclass
class PreferenceStats:
    train: PreferenceSplitStats
    validation: PreferenceSplitStats
    seq_len: int = 0
    notes: list[Any] = field(default_factory=list, metadata={"records": True})  # messages, kept as records
    max_seq_len: int = 0

    def to_dict(self) -> dict:
        return encode(self)

    def warnings(self) -> list[str]:
        splits = (("train", self.train), ("validation", self.validation))
        out = [Message("stats.identical_pairs", split_role=name, count=split.identical_dropped)
               for name, split in splits if split.identical_dropped]
        out += [line for name, split in splits for line in split.notes(name, self.max_seq_len)]
        return out + _notes(self.notes)



@dataclass
class PromptSplitStats:
    """One split of a GRPO prompt set (core.data.prompts): records read, prompts kept, prompts over
    grpo.max_prompt_len (cut from the left or skipped, the first LISTED named), prompt token lengths
    before the cut, the columns every record hands the reward functions and those only some have
    ({column: records}), answers taken from another field ({field: records}: an alpaca 'output', a
    'completion', the conversation's final assistant turn) and final assistant turns dropped because
    the record has its own answer column."""
    records: int
    prompts: int
    truncated: int = 0
    skipped: int = 0
    overlong_listed: list[list] = field(default_factory=list)  # [where, tokens] of the first LISTED
    min_length: int = 0
    mean_length: float = 0.0
    max_length: int = 0
    columns: list[str] = field(default_factory=list)
    partial_columns: dict[str, int] = field(default_factory=dict)
    answers_from: dict[str, int] = field(default_factory=dict)
    final_turns_dropped: int = 0

    def notes(self, name: str, max_prompt_len: int, policy: str) -> list[str]:
        lines = []
        overlong = self.truncated + self.skipped
        if overlong:
            lines.append(Message("stats.prompts_cut" if self.truncated else "stats.prompts_skipped",
                                 split_role=name, count=overlong, records=self.records, max_prompt_len=max_prompt_len,
                                 policy=policy, listed=listing([tuple(x) for x in self.overlong_listed], overlong)))
        for column, count in self.partial_columns.items():
            lines.append(Message("stats.column_in_some", split_role=name, column=f"'{column}'", count=count,
                                 records=self.records))
        for source, count in self.answers_from.items():
            lines.append(Message("stats.answer_from", split_role=name, field=f"'{source}'", count=count,
                                 records=self.records))
        if self.final_turns_dropped:
            lines.append(Message("stats.final_turn_dropped", split_role=name, count=self.final_turns_dropped,
                                 records=self.records))
        return lines


@dataclass
class PromptStats:
    """A GRPO run's prompts: each split's statistics, where validation came from ("file" or
    "fraction"), the prompt limit and the policy over it, the longest prompt kept (tokens, what the
    rollouts' cache holds before the completions) and notes."""
    train: PromptSplitStats
    validation: PromptSplitStats
    validation_source: str
    max_prompt_len: int
    overlong_policy: str = "truncate"
    longest_prompt: int = 0
    notes: list[Any] = field(default_factory=list, metadata={"records": True})  # messages, kept as records

    def to_dict(self) -> dict:
        return encode(self)

    @property
    def columns(self) -> list[str]:
        """The columns every record of both splits hands the reward functions."""
        return [c for c in self.train.columns if c in self.validation.columns]

    def warnings(self) -> list[str]:
        return [line for name, split in (("train", self.train), ("validation", self.validation))
                for line in split.notes(name, self.max_prompt_len, self.overlong_policy)] + _notes(self.notes)
