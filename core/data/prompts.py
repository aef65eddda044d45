"""GRPO's prompt sets (train.objective grpo): records read as prompts plus the columns the reward
functions use, rendered through the model's chat template with the generation prompt, and batched
whole prompts at a time for core.engine.objectives' rollouts.

Layouts, detected per record in this order (field names are the defaults; `data.columns` maps the
usual format fields to a dataset's own names):
- `prompt`: a string (the user's turn; an optional `system` leads it) or a list of messages
  ({role, content} or {from, value}), which must end with a user turn;
- `messages` / `conversations` (chat or ShareGPT): the conversation before the answer. A conversation
  that ends with an assistant turn has that turn taken off: its text becomes the `answer` column
  when the record has none; when the record has its own `answer`, the turn is dropped and counted
  (`final_turns_dropped`, said as a warning);
- alpaca `instruction` (+ `input`, `system`, `history`, `tools`).
A record's reference answer, when it has no `answer` column, comes from its alpaca `output`, its
`completion`, or the conversation's final assistant turn (counted in `answers_from`); `output` and
`completion` also stay columns under their own names. Every field that does not make the prompt
(not `prompt`, the turns, `instruction`, `input`, `system`, `history`, `tools`, media) is a column
handed to the reward functions by name (core.eval.rewards): `answer`, `solution`, tests, an id.

A prompt is rendered as core.engine.generate's chat mode and the console's Try tab render one: the
chat template applied to its messages with `add_generation_prompt=True`, encoded without special
tokens (the template writes its own). A prompt over `grpo.max_prompt_len` tokens follows
`data.overlong`: truncate cuts it from the left (its end, the question and the generation prompt,
is what the model answers), skip leaves it out, error refuses the set; all are counted and the first
few named. Preference pairs or KTO answers, raw text, and a record with no prompt field are errors
naming the file, the record and the field.

Pure numpy and the tokenizer (no MindSpore), like core.data.pipeline.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

import numpy as np

from core.data.catalog import check_columns, load_entry, read_catalog, select
from core.data.files import is_catalog
from core.data.content import media_columns, media_fields
from core.data.files import DataError, DataFile, Record, at, concat_files, json_type, read_data_file, split_path
from core.data.formats import (Columns, Conversation, _check_mapped_columns_exist, _sharegpt_roles, _tools,
                               _turn_list, conversation, detect_format, preference_layout)
from core.data.overlong import check_policy
from core.data.pairs import _messages, _system
from core.data.pipeline import BatchIterator, _columns, _held_out, check_rendered, render
from core.data.tokenizer import Tokenizer
from core.spec.messages import Message
from core.spec.stats import LISTED, PromptSplitStats, PromptStats, listing

ANSWER_COLUMN = "answer"  # the column a record's reference answer is handed to the rewards under
PROMPT_LAYOUTS = ("prompt", "messages", "alpaca")
_PLACEHOLDER = "·"  # an answer turn added to read a prompt with the SFT converters, then taken off


# ---------------------------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------------------------

@dataclass
class PromptConversation:
    """One record read as a prompt, before any tokenizer: its conversation (the turns before the
    answer), the columns handed to the rewards, the field its `answer` came from (None: its own
    column, or none) and whether a final assistant turn was dropped (the record had its own answer)."""
    where: str
    conversation: Conversation
    columns: dict[str, Any]
    answer_from: str | None = None
    dropped_turn: bool = False


def _refuse_preference(record: Record, columns: Columns) -> None:
    kind = preference_layout(record, columns)
    if kind == "pairs":
        raise DataError(at(record.where, Message("data.grpo_pairs", field=f"'{columns.source('chosen')}'")))
    if kind == "kto":
        raise DataError(at(record.where, Message("data.grpo_kto", field=f"'{columns.source('label')}'")))


def _layout(record: Record, columns: Columns, fmt: str) -> str:
    """Which layout gives the record's prompt ('prompt', 'messages' or 'alpaca'); `fmt` is
    data.format (auto detects it per record; text has no prompt)."""
    f = record.fields
    if fmt == "text":
        raise DataError(at(record.where, Message("data.grpo_text")))
    if fmt == "auto" and f.get(columns.source("prompt")) is not None:
        return "prompt"
    if fmt in ("auto", "chat", "sharegpt") and f.get(columns.source("messages", f)) is not None:
        return "messages"
    if fmt in ("auto", "alpaca") and f.get(columns.source("instruction")) is not None:
        return "alpaca"
    expected = {"auto": "prompt", "chat": "messages", "sharegpt": "conversations", "alpaca": "instruction"}[fmt]
    source = columns.source(expected) if expected != "conversations" else columns.source("messages", f)
    raise DataError(at(record.where, Message("data.grpo_no_prompt", field=f"'{source}'",
                                             field_names=", ".join(map(str, f)) or "none")))


def _ends_with_user(where: str, conv: Conversation) -> Conversation:
    """A prompt must end where the model answers: after a user (or tool) turn."""
    if not conv.messages or conv.messages[-1]["role"] not in ("user", "tool"):
        name = conv.fields[-1] if conv.fields else "prompt"
        raise DataError(at(where, Message("data.prompt_not_user", field=f"'{name}'")))
    last = conv.messages[-1].get("content")
    if conv.messages[-1]["role"] == "user" and isinstance(last, str) and not last.strip():
        raise DataError(at(where, Message("data.prompt_empty", field=f"'{conv.fields[-1]}'")))
    return conv


def _prompt_layout(record: Record, columns: Columns, media: str) -> Conversation:
    """A `prompt` field: its text as the user's turn, or its messages; media columns refused (or
    dropped, data.media) as the other layouts' converters do."""
    media_columns(record, columns.mapping, media)
    source = columns.source("prompt")
    value = record.fields[source]
    tools, tools_field = _tools(record, columns)
    if isinstance(value, str):
        if not value.strip():
            raise DataError(at(record.where, Message("data.prompt_empty", field=f"'{source}'")))
        system = _system(record, columns)
        return Conversation(record.where, system + [{"role": "user", "content": value}],
                            [columns.source("system")] * len(system) + [source], tools, tools_field)
    if isinstance(value, list):
        messages = _messages(value, record, source, columns)
        fields = [f"{source}[{i}]" for i in range(len(messages))]
        if messages and not any(m["role"] == "system" for m in messages):
            system = _system(record, columns)
            messages, fields = system + messages, [columns.source("system")] * len(system) + fields
        return Conversation(record.where, messages, fields or [source], tools, tools_field)
    raise DataError(at(record.where, Message("data.not_text_or_messages", field=f"'{source}'",
                                             json_type=json_type(value))))


def _messages_layout(record: Record, columns: Columns, fmt: str, media: str) -> tuple[Conversation, Any, str | None]:
    """The conversation before its answer, and the final assistant turn's text and field (None when
    the conversation ends with a user turn). Read by the SFT converters (every check of theirs
    applies), with a placeholder answer added where the conversation has none."""
    fmt = detect_format(record, columns) if fmt == "auto" else fmt
    source, turns = _turn_list(record, columns, fmt)
    last = turns[-1] if isinstance(turns[-1], dict) else {}
    if fmt == "sharegpt":
        role_tag, content_tag = columns.tag("role_tag"), columns.tag("content_tag")
        ends_with_answer = _sharegpt_roles(columns).get(last.get(role_tag)) == "assistant"
        placeholder = {role_tag: columns.tag("assistant_tag"), content_tag: _PLACEHOLDER}
    else:
        ends_with_answer = last.get("role") == "assistant"
        placeholder = {"role": "assistant", "content": _PLACEHOLDER}
    fields = dict(record.fields)
    fields[source] = turns if ends_with_answer else turns + [placeholder]
    conv = conversation(Record(record.where, fields), fmt, columns, media)
    answer = conv.messages.pop()
    answer_field = conv.fields.pop()
    if not ends_with_answer:
        return conv, None, None
    text = answer.get("content")
    if not isinstance(text, str) or not text.strip():
        raise DataError(at(record.where, Message("data.answer_empty", field=f"'{answer_field}'")))
    return conv, text, answer_field


def _alpaca_layout(record: Record, columns: Columns, media: str) -> Conversation:
    """system, history pairs and the user turn (instruction, and input after a blank line), read by
    the alpaca converter with a placeholder for `output` (the real output, any type, stays a column)."""
    fields = dict(record.fields)
    fields[columns.source("output")] = _PLACEHOLDER
    conv = conversation(Record(record.where, fields), "alpaca", columns, media)
    conv.messages.pop()
    conv.fields.pop()
    return conv


def _prompt_fields(record: Record, columns: Columns) -> set[str]:
    """The record's fields that make its prompt (the rest are the rewards' columns)."""
    f = record.fields
    names = {columns.source(n, f) for n in ("prompt", "messages", "instruction", "input", "system", "history",
                                            "tools")}
    return names | media_fields(f, columns.mapping)


def prompt_conversation(record: Record, columns: Columns | None = None, fmt: str = "auto",
                        media: str = "refuse") -> PromptConversation:
    """`record` as a prompt and its reward columns; every field checked (see the module's layouts)."""
    columns = columns or Columns()
    _refuse_preference(record, columns)
    layout = _layout(record, columns, fmt)
    answer, answer_field = None, None
    if layout == "prompt":
        conv = _prompt_layout(record, columns, media)
    elif layout == "messages":
        conv, answer, answer_field = _messages_layout(record, columns, fmt, media)
    else:
        conv = _alpaca_layout(record, columns, media)
    _ends_with_user(record.where, conv)
    used = _prompt_fields(record, columns)
    reward_columns = {k: v for k, v in record.fields.items() if k not in used}
    out = PromptConversation(record.where, conv, reward_columns)
    if reward_columns.get(ANSWER_COLUMN) is not None:
        out.dropped_turn = answer is not None
        return out
    for name in (columns.source("output"), columns.source("completion")):
        if reward_columns.get(name) is not None and name != ANSWER_COLUMN:
            answer, answer_field = reward_columns[name], name
            break
    if answer is not None:
        reward_columns[ANSWER_COLUMN] = answer
        out.answer_from = answer_field.split("[")[0] + ("[-1]" if "[" in answer_field else "")
    return out


# ---------------------------------------------------------------------------------------------
# Rendering and the prompt limit
# ---------------------------------------------------------------------------------------------

@dataclass
class PromptRecord:
    """One prompt as the rollouts use it: `text` (the chat template with the generation prompt),
    `ids` (its tokens after the cut, int32), `columns` (handed to the rewards by name), the token
    count before the cut and where the record is."""
    where: str
    text: str
    ids: np.ndarray
    columns: dict[str, Any]
    full_length: int

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def truncated(self) -> bool:
        return self.full_length > len(self.ids)


def column_counts(items: Sequence[PromptConversation | PromptRecord]) -> dict[str, int]:
    """{column: records that have a value for it} (a null value counts as none)."""
    counts: dict[str, int] = {}
    for item in items:
        for name, value in item.columns.items():
            if value is not None:
                counts[name] = counts.get(name, 0) + 1
    return counts


def _split_stats(convs: Sequence[PromptConversation], kept: list[PromptRecord], lengths: list[int],
                 overlong: list[tuple[str, int]], policy: str) -> PromptSplitStats:
    counts = column_counts(convs)
    answers_from: dict[str, int] = {}
    for c in convs:
        if c.answer_from:
            answers_from[c.answer_from] = answers_from.get(c.answer_from, 0) + 1
    n = len(convs)
    return PromptSplitStats(
        records=n, prompts=len(kept), truncated=len(overlong) if policy == "truncate" else 0,
        skipped=len(overlong) if policy == "skip" else 0, overlong_listed=[[w, t] for w, t in overlong[:LISTED]],
        min_length=min(lengths, default=0), mean_length=round(float(np.mean(lengths)), 2) if lengths else 0.0,
        max_length=max(lengths, default=0), columns=sorted(k for k, v in counts.items() if v == n),
        partial_columns={k: v for k, v in sorted(counts.items()) if v < n}, answers_from=answers_from,
        final_turns_dropped=sum(c.dropped_turn for c in convs))


def tokenize_prompts(convs: Sequence[PromptConversation], tokenizer: Tokenizer, max_prompt_len: int,
                     overlong: str = "truncate") -> tuple[list[PromptRecord], PromptSplitStats]:
    """The prompts of `convs` rendered and encoded, those over `max_prompt_len` cut from the left
    (truncate), left out (skip) or refused (error, naming them), and the split's statistics."""
    check_policy(overlong)
    texts = []
    for c in convs:
        text = render(tokenizer, c.conversation, add_generation_prompt=True)
        check_rendered(tokenizer, c.conversation, text)
        texts.append(text)
    encoded = tokenizer.encode_batch(texts, add_special_tokens=False) if texts else []
    kept, lengths, too_long = [], [], []
    for c, text, ids in zip(convs, texts, encoded):
        lengths.append(len(ids))
        if len(ids) > max_prompt_len:
            too_long.append((c.where, len(ids)))
            if overlong != "truncate":
                continue
        kept.append(PromptRecord(c.where, text, np.asarray(ids[-max_prompt_len:], np.int32), c.columns, len(ids)))
    if too_long and overlong == "error":
        raise DataError(Message("data.prompts_overlong", count=len(too_long), max_prompt_len=max_prompt_len,
                                listed=listing(too_long, len(too_long))))
    return kept, _split_stats(convs, kept, lengths, too_long, overlong)


# ---------------------------------------------------------------------------------------------
# Sources and splits
# ---------------------------------------------------------------------------------------------

@dataclass
class PromptSource:
    """Records to read as prompts: a file's (a list's, a catalogue dataset's), with its mapping and format."""
    data: DataFile
    columns: Columns
    fmt: str


def prompt_sources(settings, role: str = "train", seed: int = 0) -> list[PromptSource]:
    """The data `settings` (a DataSettings) names for `role` ("train", "validation"): a file, a list
    of files, or the datasets of a `dataset_info.json` catalogue that `data.dataset` picks (a
    preference entry is refused)."""
    name = getattr(settings, f"{role}_file")
    columns, fmt = _columns(settings), getattr(settings, "format", "auto")
    if isinstance(name, list):
        parts = [read_data_file(item, role=role) for item in name]
        data = concat_files(parts[0].path, parts)
    elif role == "train" and is_catalog(split_path(name)[0]):
        path = split_path(name)[0]
        sources = []
        for entry in select(read_catalog(path), getattr(settings, "dataset", None), path):
            if entry.preference:
                raise DataError(at(entry.where, Message("data.grpo_preference_entry")))
            data = load_entry(entry, seed)
            check_columns(entry, data)
            sources.append(PromptSource(data, Columns(entry.columns), entry.formatting))
        return sources
    else:
        data = read_data_file(name, role=role)
    _check_mapped_columns_exist(data, columns)
    return [PromptSource(data, columns, fmt)]


def read_prompts(sources: Sequence[PromptSource], media: str = "refuse") -> list[PromptConversation]:
    return [prompt_conversation(record, s.columns, s.fmt, media) for s in sources for record in s.data.records]


@dataclass
class PromptSplits:
    """Train and validation prompts and their statistics (GRPO has no test records: its validation
    figures are the rewards of the validation prompts' completions)."""
    train: list[PromptRecord]
    validation: list[PromptRecord]
    stats: PromptStats
    test_records: list = field(default_factory=list)


def read_prompt_splits(settings, seed: int = 0) -> tuple[list[PromptConversation], list[PromptConversation], str]:
    """Train and validation prompts before any tokenizer (what the console's checks read: the
    columns the rewards will get) and where validation came from ("file" or "fraction")."""
    media = getattr(settings, "media", "refuse")
    train = read_prompts(prompt_sources(settings, "train", seed), media)
    if settings.validation_file:
        return train, read_prompts(prompt_sources(settings, "validation", seed), media), "file"
    if settings.validation_fraction > 0:  # the same seeded hold-out as core.data.pipeline.split_records
        held_out = _held_out(len(train), settings.validation_fraction, seed, settings.train_file)
        return ([c for i, c in enumerate(train) if i not in held_out],
                [c for i, c in enumerate(train) if i in held_out], "fraction")
    raise DataError(Message("data.no_validation_data"))


def reward_columns(settings, seed: int = 0) -> list[str]:
    """The columns every train and validation record hands the reward functions (for
    core.eval.rewards.check_rewards before a launch)."""
    train, validation, _ = read_prompt_splits(settings, seed)
    counts = column_counts(train + validation)
    return sorted(name for name, count in counts.items() if count == len(train) + len(validation))


def load_prompt_splits(settings, tokenizer: Tokenizer, seed: int, max_prompt_len: int) -> PromptSplits:
    """Train and validation prompts of a DataSettings for train.objective grpo (`max_prompt_len` is
    grpo.max_prompt_len; data.overlong says what happens to a longer prompt)."""
    policy = getattr(settings, "overlong", "truncate")
    train_convs, val_convs, source = read_prompt_splits(settings, seed)
    train, train_stats = tokenize_prompts(train_convs, tokenizer, max_prompt_len, policy)
    validation, val_stats = tokenize_prompts(val_convs, tokenizer, max_prompt_len, policy)
    for prompts, role in ((train, "train_file"), (validation, "validation_file" if source == "file" else "train_file")):
        if not prompts:
            raise DataError(Message("data.no_prompts_left", file=str(getattr(settings, role)),
                                    max_prompt_len=max_prompt_len))
    stats = PromptStats(train_stats, val_stats, source, max_prompt_len, policy,
                        max(len(p) for p in train + validation))
    return PromptSplits(train, validation, stats)


# ---------------------------------------------------------------------------------------------
# Batches
# ---------------------------------------------------------------------------------------------

@dataclass
class PromptBatch:
    """Whole prompts of one micro batch. The rollouts sample G completions of each; `prompts(G)` and
    `columns(G)` repeat each prompt's text and columns G times in a row, in the order of those
    completions (prompt i's completions are rows i·G ... i·G + G - 1)."""
    records: list[PromptRecord]

    def __len__(self) -> int:
        return len(self.records)

    @property
    def prompt_ids(self) -> list[list[int]]:
        return [r.ids.tolist() for r in self.records]

    def prompts(self, repeat: int = 1) -> list[str]:
        return [r.text for r in self.records for _ in range(repeat)]

    def columns(self, repeat: int = 1) -> dict[str, list]:
        """{column: values, one per completion}; a record without a column gives None there (a
        reward that reads it says so)."""
        names = list(dict.fromkeys(k for r in self.records for k in r.columns))
        return {name: [r.columns.get(name) for r in self.records for _ in range(repeat)] for name in names}

    def where(self, repeat: int = 1) -> list[str]:
        """Each completion's record place (for a reward's message)."""
        return [r.where for r in self.records for _ in range(repeat)]


class PromptBatches(BatchIterator):
    """Endless micro batches of whole prompts for one data-parallel rank: core.data.pipeline.BatchIterator's
    shuffling (seed + epoch), accumulation, sharding and resumable `state()`, each micro batch a
    `PromptBatch` of `prompts_per_micro` prompts (train.micro_batch_size). Each rank samples its own
    prompts' completions, so a group is never split across workers, and the ranks together see the
    prompts one rank would with the same global batch."""

    def __init__(self, records: Sequence[PromptRecord], prompts_per_micro: int, grad_accum_steps: int = 1,
                 world_size: int = 1, rank: int = 0, seed: int = 0):
        super().__init__(records, prompts_per_micro, grad_accum_steps=grad_accum_steps, world_size=world_size,
                         rank=rank, seed=seed, length=max((len(r) for r in records), default=1))

    def collate(self, micro) -> PromptBatch:
        return PromptBatch([self.samples[row[0]] for row in micro])


def prompt_eval_batches(records: Sequence[PromptRecord], batch_size: int) -> Iterator[PromptBatch]:
    """Every prompt exactly once, in order; the last batch holds the rest (no padding prompts)."""
    for start in range(0, len(records), batch_size):
        yield PromptBatch(list(records[start:start + batch_size]))

