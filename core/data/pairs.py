"""Preference records: a data file's records read as pairs (a prompt, a chosen and a rejected
answer) or KTO answers (a prompt, one answer and a boolean `label`), before any tokenizer: which
layout a file has (`file_kind`), each record as a `PreferenceRecord` (`preference_record`), and
preference data read as SFT chat records (`sft_view`). The layouts are listed in
core.data.preference, which tokenizes these records; core.data.pipeline reads SFT data through `sft_view`.
"""
from __future__ import annotations

from dataclasses import dataclass

from core.data.files import DataError, DataFile, Record, at, json_type
from core.spec.messages import Message
from core.spec.stats import LISTED
from core.data.formats import Columns, Conversation, _sharegpt_roles, preference_layout

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


# ---------------------------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------------------------

def _messages(value: list, record: Record, name: str, columns: Columns) -> list[dict]:
    """A list of {role, content} or {from, value} turns as chat messages."""
    roles = _sharegpt_roles(columns)
    out = []
    for i, turn in enumerate(value):
        field = f"'{name}[{i}]'"
        if not isinstance(turn, dict):
            raise DataError(at(record.where, Message("data.pair_not_message", field=field, json_type=json_type(turn))))
        if "role" in turn:
            role, content = turn.get("role"), turn.get("content")
        else:
            role, content = roles.get(turn.get(columns.tag("role_tag"))), turn.get(columns.tag("content_tag"))
        if role not in ("system", "user", "assistant"):
            raise DataError(at(record.where, Message("data.pair_bad_role", field=field,
                                                     role=repr(turn.get("role", turn.get(columns.tag("role_tag")))))))
        if not isinstance(content, str):
            raise DataError(at(record.where, Message("data.pair_content", field=field, json_type=json_type(content))))
        out.append({"role": role, "content": content})
    return out


def _answer(record: Record, name: str, columns: Columns) -> tuple[str, list[dict] | None]:
    """An answer field as its text, and the messages before it when the field is a whole conversation."""
    source = columns.source(name)
    value = record.fields.get(source)
    field = f"'{source}'"
    if value is None:
        raise DataError(at(record.where, Message("data.answer_missing", field=field)))
    before = None
    if isinstance(value, dict):
        value = _messages([value], record, source, columns)[0]["content"]
    elif isinstance(value, list):
        messages = _messages(value, record, source, columns)
        if not messages or messages[-1]["role"] != "assistant":
            raise DataError(at(record.where, Message("data.answer_not_last", field=field)))
        value, before = messages[-1]["content"], messages[:-1]
    if not isinstance(value, str):
        raise DataError(at(record.where, Message("data.not_text_or_messages", field=field, json_type=json_type(value))))
    if not value.strip():
        raise DataError(at(record.where, Message("data.answer_empty", field=field)))
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
                raise DataError(at(record.where, Message("data.prompt_empty", field=f"'{prompt}'")))
            system = _system(record, columns)
            return system + [{"role": "user", "content": value}], [columns.source("system")] * len(system) + [prompt]
        if isinstance(value, list):
            messages = _messages(value, record, prompt, columns)
            return messages, [f"{prompt}[{i}]" for i in range(len(messages))]
        raise DataError(at(record.where, Message("data.not_text_or_messages", field=f"'{prompt}'",
                                                 json_type=json_type(value))))
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
    raise DataError(at(record.where, Message("data.no_prompt")))


def _conversation(record: Record, messages: list[dict], fields: list[str]) -> Conversation:
    if not messages or messages[-1]["role"] != "user":
        raise DataError(at(record.where, Message("data.prompt_not_user", field=f"'{fields[-1] if fields else 'prompt'}'")))
    return Conversation(record.where, messages, fields)


def preference_record(record: Record, kind: str, columns: Columns | None = None) -> PreferenceRecord:
    """A pair (kind "pairs") or a KTO answer (kind "kto") of `record`, every field checked."""
    columns = columns or Columns()
    if kind == "pairs":
        chosen, before_c = _answer(record, "chosen", columns)
        rejected, before_r = _answer(record, "rejected", columns)
        if before_c is not None and before_r is not None and before_c != before_r and \
                columns.source("prompt") not in record.fields:
            raise DataError(at(record.where, Message("data.prompts_differ", field=f"'{columns.source('rejected')}'",
                                                     chosen_field=columns.source("chosen"))))
        messages, fields = _prompt(record, columns, before_c)
        return PreferenceRecord(record.where, _conversation(record, messages, fields), chosen, rejected,
                                chosen_field=columns.source("chosen"), rejected_field=columns.source("rejected"))
    label_field = columns.source("label")
    label = record.fields.get(label_field)
    if not isinstance(label, bool):
        raise DataError(at(record.where, Message("data.kto_label", field=f"'{label_field}'", value=repr(label),
                                                 json_type=json_type(label))))
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
            raise DataError(at(record.where, Message("data.kto_conversation_end",
                                                     field=f"'{turns}[{len(messages) - 1}]'")))
        answer = messages[-1]["content"]
        fields = [f"{turns}[{i}]" for i in range(len(messages) - 1)]
        messages = messages[:-1]
        if not any(m["role"] == "system" for m in messages):
            system = _system(record, columns)
            messages, fields = system + messages, [columns.source("system")] * len(system) + fields
        return PreferenceRecord(record.where, _conversation(record, messages, fields), answer, label=label,
                                chosen_field=f"{turns}[{len(f[turns]) - 1}]")
    raise DataError(at(record.where, Message("data.kto_no_answer")))


_KIND_NAMES = {"pairs": "a preference pair (chosen/rejected)", "kto": "a KTO answer (label)",
               None: "a plain conversation"}


def _mixed(data: DataFile, record: Record, kind: str | None, first: str | None, columns: Columns) -> Message:
    field = columns.source("rejected") if first == "pairs" else columns.source("label")
    return at(record.where, Message("data.mixed_kinds", record_kind=_KIND_NAMES[kind], record_at=data.records[0].where,
                                    first_kind=_KIND_NAMES[first], field=f"'{field}'"))


def file_kind(data: DataFile, columns: Columns | None = None) -> str | None:
    """'pairs', 'kto' or None (plain SFT data): the layout of the file's first record. A plain file
    with preference records in it is an error naming every such record (`problems_error`); the
    records of a preference file are checked one by one by `preference_records`."""
    columns = columns or Columns()
    first = preference_layout(data.records[0], columns)
    if first is None:
        mixed = [_mixed(data, r, kind, first, columns) for r in data.records[1:]
                 if (kind := preference_layout(r, columns)) is not None]
        if mixed:
            raise problems_error(mixed, str(data.path))
    return first


def preference_records(data: DataFile, kind: str, columns: Columns | None = None) -> list[PreferenceRecord]:
    """Every record of `data` read as `kind` ('pairs' or 'kto'). Every problem is found in one pass
    (a record of another layout, a missing or empty answer, a bad label...): one error lists them."""
    columns = columns or Columns()
    out, problems = [], []
    for record in data.records:
        layout = preference_layout(record, columns)
        if layout != kind:
            problems.append(_mixed(data, record, layout, kind, columns))
            continue
        try:
            out.append(preference_record(record, kind, columns))
        except DataError as err:
            problems.append(err.args[0])
    if problems:
        raise problems_error(problems, str(data.path))
    return out


def problems_error(problems: list[Message], file: str) -> DataError:
    """One problem as itself; several as one error: their count, the first LISTED of them and how
    many more."""
    if len(problems) == 1:
        return DataError(problems[0])
    listed = (Message("stats.listing_more", items=problems[:LISTED], more=len(problems) - LISTED)
              if len(problems) > LISTED else Message("stats.listing", items=problems))
    return DataError(Message("data.problems", count=len(problems), file=file, listed=listed))


# ---------------------------------------------------------------------------------------------
# Samples
# ---------------------------------------------------------------------------------------------

def sft_view(data: DataFile, columns: Columns) -> tuple[DataFile, str | None]:
    """Preference data read for SFT: pairs as conversations ending with the chosen answer, KTO data
    as its desirable answers only (the undesirable ones are never targets); plain data unchanged.
    Returns the file (chat records, `messages`) and the note that says what was done, or None."""
    kind = file_kind(data, columns)
    if kind is None:
        return data, None
    records, skipped = [], 0
    for r in preference_records(data, kind, columns):
        if kind == "kto" and not r.label:
            skipped += 1
            continue
        messages = r.prompt.messages + [{"role": "assistant", "content": r.chosen}]
        records.append(Record(r.where, {columns.source("messages", {"messages": None}): messages}))
    if not records:
        raise DataError(Message("data.no_desirable", file=str(data.path)))
    if kind == "pairs":
        note = Message("stats.pairs_as_sft", file=str(data.path), count=len(records))
    else:
        note = Message("stats.kto_as_sft", file=str(data.path), count=len(records), skipped=skipped)
    return DataFile(data.path, records, None, data.split), note


def sft_columns(columns: Columns) -> Columns:
    """`data.columns` for the chat records `sft_view` makes: only `messages` still applies."""
    return Columns({k: v for k, v in columns.mapping.items() if k == "messages"})
