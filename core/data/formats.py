"""Record formats: detect them, map column names, and turn each record into the messages a chat
template renders (or the text of a raw-text record).

Formats (the field names are the defaults; `data.columns` maps them to a dataset's own names):
- alpaca: `instruction`, `output`; optional `input` (appended to the instruction after a blank
  line), `system`, and `history` (earlier `[prompt, response]` pairs, rendered before this turn).
- sharegpt: `conversations` (or `messages`) of `{from, value}` turns; roles `human`/`user`,
  `gpt`/`assistant`, `system`, `function_call` (an assistant tool call, the value JSON
  `{"name", "arguments"}` or a list of them) and `observation` (a tool result); optional
  top-level `system` and `tools`. The tags map too: `role_tag`, `content_tag`, `user_tag`,
  `assistant_tag`, `system_tag`, `function_tag`, `observation_tag`.
- chat: `messages` of `{role, content}` with roles system/user/assistant/tool, assistant
  `tool_calls` passed to the template as written; optional top-level `tools`.
- text: `text`, trained on every token.
A record's fields that its format does not use are counted (`ignored_fields`) and reported, never
dropped in silence. Imports core.data.files only.
"""
from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from core.data.content import MEDIA_COLUMNS, content_text, media_columns, media_fields, strip_placeholders
from core.data.files import DataError, DataFile, Record, at, json_type
from core.spec.messages import Message

FORMATS = ("alpaca", "sharegpt", "chat", "text")
# format -> (required fields, optional fields), by their default names
FORMAT_FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "alpaca": (("instruction", "output"), ("input", "system", "history", "tools")),
    "sharegpt": (("messages",), ("system", "tools")),
    "chat": (("messages",), ("tools",)),
    "text": (("text",), ()),
}
PREFERENCE_KEYS = ("prompt", "completion", "chosen", "rejected", "label")  # core.data.preference's fields
COLUMN_KEYS = ("instruction", "input", "output", "system", "history", "messages", "tools", "text", *MEDIA_COLUMNS)
# LLaMA-Factory's dataset_info.json names for alpaca's fields (core.spec.config.DATA_COLUMN_SYNONYMS)
COLUMN_SYNONYMS = {"prompt": "instruction", "query": "input", "response": "output", "kto_tag": "label"}
TAG_DEFAULTS = {"role_tag": "from", "content_tag": "value", "user_tag": "human", "assistant_tag": "gpt",
                "system_tag": "system", "function_tag": "function_call", "observation_tag": "observation"}
MAPPING_KEYS = COLUMN_KEYS + tuple(TAG_DEFAULTS) + PREFERENCE_KEYS
SHAREGPT_TURNS = ("conversations", "messages")  # where a ShareGPT record keeps its turns, unmapped
CHAT_ROLES = ("system", "user", "assistant", "tool")
# the names other datasets give alpaca's fields, for a hint when a format cannot be told
COLUMN_ALIASES = {"instruction": ("question", "prompt", "query", "problem", "instruction_text"),
                  "output": ("answer", "completion", "response", "chosen", "solution", "target")}


def format_help() -> str:
    """'alpaca: instruction, output (input, system, history optional); sharegpt: ...'."""
    parts = []
    for fmt in FORMATS:
        required, optional = FORMAT_FIELDS[fmt]
        required = ["conversations" if (fmt, n) == ("sharegpt", "messages") else n for n in required]
        extra = f" ({', '.join(optional)} optional)" if optional else ""
        parts.append(f"{fmt}: {', '.join(required)}{extra}")
    return "; ".join(parts)


@dataclass(frozen=True)
class Columns:
    """`data.columns`: format field -> the dataset's column (and ShareGPT tag -> its value)."""
    mapping: Mapping[str, str] = field(default_factory=dict)

    def source(self, name: str, record: Mapping | None = None) -> str:
        """The record field that holds format field `name`."""
        if name in self.mapping:
            return self.mapping[name]
        if name == "messages" and record is not None and "messages" not in record:
            return "conversations"  # ShareGPT's usual name; chat records use `messages`
        return name

    def tag(self, name: str) -> str:
        return self.mapping.get(name, TAG_DEFAULTS[name])

    def shown(self, name: str, record: Mapping | None = None) -> str:
        """How errors name a field: 'question' (data.columns.instruction) when mapped."""
        source = self.source(name, record)
        return f"{source!r} (data.columns.{name})" if name in self.mapping else repr(source)


@dataclass
class Conversation:
    """A record as the chat template sees it: `messages`, and for each the record field it came
    from ("conversations[2]", "output") so errors can name it; `tools` (JSON schemas) or None."""
    where: str
    messages: list[dict]
    fields: list[str]
    tools: list[dict] | None = None
    tools_field: str | None = None
    media_dropped: int = 0  # media parts and column items dropped (data.media: drop)


# ---------------------------------------------------------------------------------------------
# Detecting the format
# ---------------------------------------------------------------------------------------------

def _first_turn(value: Any) -> dict | None:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return None
    return value[0] if isinstance(value, list) and value and isinstance(value[0], dict) else None


def detect_format(record: Record, columns: Columns) -> str | None:
    """The format whose fields `record` has: chat ({role, content} turns), sharegpt ({from,
    value} turns), alpaca, text; None if none fits."""
    fields = record.fields
    turns_key = columns.source("messages", fields)
    if turns_key in fields:
        first = _first_turn(fields[turns_key])
        tags_mapped = any(tag in columns.mapping for tag in TAG_DEFAULTS)
        if first is not None and columns.tag("role_tag") in first and ("role" not in first or tags_mapped):
            return "sharegpt"
        if first is not None and "role" in first:
            return "chat"
        return "sharegpt" if turns_key == "conversations" else "chat"
    if all(columns.source(n) in fields for n in FORMAT_FIELDS["alpaca"][0]):
        return "alpaca"
    if columns.source("text") in fields:
        return "text"
    return None


def preference_layout(record: Record, columns: Columns) -> str | None:
    """'pairs' for a record with `chosen` and `rejected` answers, 'kto' for one with a boolean
    `label` (or a `label` beside a `completion`), None for plain SFT data (core.data.preference
    reads the first two)."""
    f = record.fields
    if columns.source("chosen") in f and columns.source("rejected") in f:
        return "pairs"
    label = columns.source("label")
    if label in f and (isinstance(f[label], bool) or columns.source("completion") in f):
        return "kto"
    return None


def _mapping_hint(keys: Sequence[str]) -> Message:
    found = {name: next((k for k in keys if k.lower() in aliases), None) for name, aliases in COLUMN_ALIASES.items()}
    if all(found.values()):
        return Message("data.map_these", pairs=", ".join(f"{name}: {source}" for name, source in found.items()))
    return Message("data.map_others")


def resolve_format(data: DataFile, requested: str = "auto", columns: Columns | None = None) -> str:
    """The file's format: `requested`, or for "auto" the one the first record fits. A table's
    columns must hold the format's required fields, and every mapped column must exist."""
    columns = columns or Columns()
    if requested not in ("auto", *FORMATS):
        raise DataError(Message("data.not_a_format", value=repr(requested),
                                valid_names=", ".join(("auto", *FORMATS))))
    _check_mapped_columns_exist(data, columns)
    first = data.records[0]
    fmt = detect_format(first, columns) if requested == "auto" else requested
    if requested != "auto":
        _check_requested(first, requested, columns)
    if fmt is None:
        what, where = ("columns", data.path) if data.columns is not None else ("keys", first.where)
        keys = list(first.fields)
        raise DataError(at(where, Message(f"data.unknown_format_{what}", keys=str(keys), formats=format_help(),
                                          note=_mapping_hint(keys))))
    required, optional = FORMAT_FIELDS[fmt]
    if data.columns is not None:
        missing = [columns.source(n, dict.fromkeys(data.columns)) for n in required
                   if columns.source(n, dict.fromkeys(data.columns)) not in data.columns]
        if missing:
            said = {"file": str(data.path), "found": str(data.columns), "fmt": repr(fmt),
                    "required_names": ", ".join(required), "missing_names": ", ".join(missing),
                    "formats": format_help(), "note": _mapping_hint(data.columns)}
            raise DataError(Message("data.missing_columns_optional", **said, optional_names=", ".join(optional))
                            if optional else Message("data.missing_columns", **said))
    check_mapping(data, fmt, columns)
    return fmt


def _check_requested(first: Record, requested: str, columns: Columns) -> None:
    """A format set explicitly whose fields the first record lacks, while it has another format's:
    say what auto-detection would have chosen."""
    detected = detect_format(first, columns)
    lacks = [columns.source(n, first.fields) for n in FORMAT_FIELDS[requested][0]
             if columns.source(n, first.fields) not in first.fields]
    if detected is not None and detected != requested and lacks:
        raise DataError(Message("data.looks_like", reason=Message("data.format_is", value=repr(requested)),
                                detected=detected, record_at=first.where, field_names=", ".join(map(str, first.fields)),
                                lacks_names=", ".join(lacks)))


def check_mapping(data: DataFile, fmt: str, columns: Columns) -> None:
    """Every key of `data.columns` is one format `fmt` uses, and names a column that exists."""
    required, optional = FORMAT_FIELDS[fmt]
    used = set(required) | set(optional) | (set(TAG_DEFAULTS) if fmt == "sharegpt" else set()) | set(MEDIA_COLUMNS)
    for name in columns.mapping:
        if name in PREFERENCE_KEYS:
            raise DataError(Message("data.preference_column", column=name))
        if name not in used:
            raise DataError(Message("data.column_not_used", column=name, fmt=fmt, column_shown=repr(name),
                                    read_names=", ".join(sorted(used))))
    _check_mapped_columns_exist(data, columns)


def _check_mapped_columns_exist(data: DataFile, columns: Columns) -> None:
    """Every column `data.columns` names exists: in the table's header, or in some record."""
    keys: list[str] | None = None
    for name, source in columns.mapping.items():
        if name in TAG_DEFAULTS:
            continue
        if keys is None:
            keys = data.columns if data.columns is not None else list(dict.fromkeys(
                k for r in data.records for k in r.fields))
        if source not in keys:
            close = difflib.get_close_matches(source, keys, n=1)
            said = {"column": name, "source": repr(source), "field_names": ", ".join(map(str, keys))}
            where = data.path if data.columns is not None else data.records[0].where
            raise DataError(at(where, Message("data.mapped_column_missing_close", **said, close=repr(close[0]))
                               if close else Message("data.mapped_column_missing", **said)))


# ---------------------------------------------------------------------------------------------
# Fields of one record
# ---------------------------------------------------------------------------------------------

def _needs(fmt: str) -> str:
    return " and ".join(repr(n) for n in FORMAT_FIELDS[fmt][0])


def _string_field(record: Record, name: str, fmt: str, columns: Columns, *, required: bool,
                  non_empty: bool = False) -> str:
    """Format field `name` of the record as a string; "" for an absent or null optional field."""
    source = columns.source(name, record.fields)
    value = record.fields.get(source)
    if value is None:
        if required:
            raise DataError(at(record.where, Message("data.missing_field", field=columns.shown(name, record.fields),
                                                     fmt=fmt, needs_fields=_needs(fmt))))
        return ""
    if not isinstance(value, str):
        raise DataError(at(record.where, Message("data.not_a_string", field=columns.shown(name, record.fields),
                                                 json_type=json_type(value))))
    if non_empty and not value.strip():
        raise DataError(at(record.where, Message("data.empty_field", field=columns.shown(name, record.fields))))
    return value


def _json_value(record: Record, source: str, value: Any, expected: str, **said: Any) -> Any:
    """A field that may arrive as JSON text (CSV cells, `tools` columns) parsed; `expected` names
    what it should hold (the message data.text_not_json_<expected>)."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError as err:
        raise DataError(at(record.where, Message(f"data.text_not_json_{expected}", field=repr(source),
                                                 json_says=err.msg, **said))) from None


def text_of(record: Record, columns: Columns) -> str:
    return _string_field(record, "text", "text", columns, required=True, non_empty=True)


def _tools(record: Record, columns: Columns) -> tuple[list[dict] | None, str | None]:
    """Top-level `tools`: a list (or JSON text of one) of function schemas; a bare
    {name, description, parameters} is wrapped as {"type": "function", "function": ...}, the
    form chat templates read."""
    source = columns.source("tools")
    value = record.fields.get(source)
    if value is None or (isinstance(value, str) and not value.strip()):
        return None, None
    value = _json_value(record, source, value, "tools")
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(t, dict) for t in value):
        raise DataError(at(record.where, Message("data.not_tools", field=repr(source), json_type=json_type(value))))
    if not value:
        return None, None
    tools = []
    for index, tool in enumerate(value):
        if "type" not in tool and "name" in tool:
            tool = {"type": "function", "function": tool}
        if not isinstance((tool.get("function") or tool).get("name"), str):
            raise DataError(at(record.where, Message("data.tool_no_name", field=f"'{source}[{index}]'")))
        tools.append(tool)
    return tools, source


def alpaca_conversation(record: Record, columns: Columns | None = None, media: str = "refuse") -> Conversation:
    """system (if any), each `history` pair as a user and an assistant turn, then the user turn
    (instruction, and "\\n\\n" + input if any) and the assistant turn (output); `tools` (function
    schemas, as LLaMA-Factory's alpaca reads them) go to the chat template as ShareGPT's do."""
    columns = columns or Columns()
    instruction = _string_field(record, "instruction", "alpaca", columns, required=True)
    output = _string_field(record, "output", "alpaca", columns, required=True, non_empty=True)
    extra = _string_field(record, "input", "alpaca", columns, required=False)
    system = _string_field(record, "system", "alpaca", columns, required=False)
    messages, fields = [], []
    if system.strip():
        messages.append({"role": "system", "content": system})
        fields.append(columns.source("system"))
    history_key = columns.source("history")
    history = _json_value(record, history_key, record.fields.get(history_key), "history")
    if history is not None:
        if not isinstance(history, list):
            raise DataError(at(record.where, Message("data.not_history", field=repr(history_key),
                                                     json_type=json_type(history))))
        for index, pair in enumerate(history):
            if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(t, str) for t in pair)):
                raise DataError(at(record.where, Message("data.bad_history_pair", field=f"'{history_key}[{index}]'",
                                                         got_json=json.dumps(pair, ensure_ascii=False)[:80])))
            messages += [{"role": "user", "content": pair[0]}, {"role": "assistant", "content": pair[1]}]
            fields += [f"{history_key}[{index}][0]", f"{history_key}[{index}][1]"]
    messages += [{"role": "user", "content": instruction + ("\n\n" + extra if extra else "")},
                 {"role": "assistant", "content": output}]
    fields += [columns.source("instruction"), columns.source("output")]
    tools, tools_field = _tools(record, columns)
    return Conversation(record.where, messages, fields, tools, tools_field)


def _turn_list(record: Record, columns: Columns, fmt: str) -> tuple[str, list]:
    source = columns.source("messages", record.fields)
    turns = record.fields.get(source)
    item = "{from, value}" if fmt == "sharegpt" else "{role, content}"
    if turns is None:
        raise DataError(at(record.where, Message("data.missing_turns", field=columns.shown("messages", record.fields),
                                                 fmt=fmt, item=item)))
    turns = _json_value(record, source, turns, "turns", item=item)
    if not isinstance(turns, list):
        raise DataError(at(record.where, Message("data.not_turns", field=repr(source), item=item,
                                                 json_type=json_type(turns))))
    if not turns:
        raise DataError(at(record.where, Message("data.empty_conversation", field=repr(source))))
    return source, turns


def _check_turn_order(record: Record, messages: list[dict], fields: list[str]) -> None:
    """The conversation opens with a system or user turn and has an assistant turn to learn from."""
    first = next((i for i, m in enumerate(messages) if m["role"] != "system"), None)
    if first is not None and messages[first]["role"] == "assistant":
        raise DataError(at(record.where, Message("data.assistant_first", field=f"'{fields[first]}'")))
    if not any(m["role"] == "assistant" for m in messages):
        raise DataError(at(record.where, Message("data.no_assistant", field=f"'{fields[0].split('[')[0]}'")))


def _function_calls(record: Record, where_field: str, value: str) -> list[dict]:
    """A ShareGPT function_call value as chat-template tool calls, arguments as objects."""
    try:
        calls = json.loads(value)
    except json.JSONDecodeError as err:
        raise DataError(at(record.where, Message("data.call_not_json", field=f"'{where_field}'",
                                                 json_says=err.msg))) from None
    calls = calls if isinstance(calls, list) else [calls]
    out = []
    for call in calls:
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            raise DataError(at(record.where, Message("data.call_shape", field=f"'{where_field}'")))
        arguments = call.get("arguments", {})
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except json.JSONDecodeError:
                pass  # kept as text: some tools take a plain string
        out.append({"type": "function", "function": {"name": call["name"], "arguments": arguments}})
    return out


def _sharegpt_roles(columns: Columns) -> dict[str, str]:
    """ShareGPT role name -> chat role ('function_call' -> 'function', handled apart)."""
    roles = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant",
             "system": "system", "function_call": "function", "observation": "tool"}
    for tag, role in (("user_tag", "user"), ("assistant_tag", "assistant"), ("system_tag", "system"),
                      ("function_tag", "function"), ("observation_tag", "tool")):
        roles[columns.tag(tag)] = role
    return roles


def sharegpt_conversation(record: Record, columns: Columns | None = None, media: str = "refuse") -> Conversation:
    """`conversations` turns as chat messages; the top-level `system` leads unless the first turn
    is a system turn; `tools` are passed to the template."""
    columns = columns or Columns()
    source, turns = _turn_list(record, columns, "sharegpt")
    role_tag, content_tag = columns.tag("role_tag"), columns.tag("content_tag")
    roles = _sharegpt_roles(columns)
    messages, fields, media_dropped = [], [], 0
    for index, turn in enumerate(turns):
        name = f"{source}[{index}]"
        if not isinstance(turn, dict):
            raise DataError(at(record.where, Message("data.not_a_turn", field=f"'{name}'", role_tag=repr(role_tag),
                                                     content_tag=repr(content_tag), json_type=json_type(turn))))
        role = roles.get(turn.get(role_tag)) if isinstance(turn.get(role_tag), str) else None
        if role is None:
            raise DataError(at(record.where, Message("data.bad_role_tags", field=f"'{name}.{role_tag}'",
                                                     role=repr(turn.get(role_tag)),
                                                     role_names=", ".join(dict.fromkeys(roles)))))
        value, dropped = content_text(record, f"{name}.{content_tag}", turn.get(content_tag), media)
        media_dropped += dropped
        if not isinstance(value, str):
            raise DataError(at(record.where, Message("data.not_a_string", field=f"'{name}.{content_tag}'",
                                                     json_type=json_type(value))))
        if role == "function":
            messages.append({"role": "assistant", "content": "",
                             "tool_calls": _function_calls(record, f"{name}.{content_tag}", value)})
        else:
            messages.append({"role": role, "content": value})
        fields.append(name)
    system = _string_field(record, "system", "sharegpt", columns, required=False)
    if system.strip() and messages[0]["role"] != "system":
        messages.insert(0, {"role": "system", "content": system})
        fields.insert(0, columns.source("system"))
    _check_turn_order(record, messages, fields)
    tools, tools_field = _tools(record, columns)
    return Conversation(record.where, messages, fields, tools, tools_field, media_dropped)


def _checked_message(record: Record, name: str, message: Any, media: str = "refuse") -> tuple[dict, int]:
    if not isinstance(message, dict):
        raise DataError(at(record.where, Message("data.not_a_turn", field=f"'{name}'", role_tag="'role'",
                                                 content_tag="'content'", json_type=json_type(message))))
    if message.get("role") not in CHAT_ROLES:
        raise DataError(at(record.where, Message("data.bad_role", field=f"'{name}.role'", role=repr(message.get("role")),
                                                 role_names=", ".join(CHAT_ROLES))))
    calls = message.get("tool_calls")
    if calls is not None and not (isinstance(calls, list) and all(isinstance(c, dict) for c in calls)):
        raise DataError(at(record.where, Message("data.not_calls", field=f"'{name}.tool_calls'",
                                                 json_type=json_type(calls))))
    content, dropped = content_text(record, f"{name}.content", message.get("content"), media)
    if not isinstance(content, str) and not (content is None and calls):
        said = "data.not_a_string_or_calls" if message["role"] == "assistant" else "data.not_a_string"
        raise DataError(at(record.where, Message(said, field=f"'{name}.content'", json_type=json_type(content))))
    return {**message, "content": content}, dropped


def chat_conversation(record: Record, columns: Columns | None = None, media: str = "refuse") -> Conversation:
    """A chat record's messages, checked (roles, string content or tool calls, a user turn before
    the first assistant turn, at least one assistant turn) and otherwise passed on as written."""
    columns = columns or Columns()
    source, turns = _turn_list(record, columns, "chat")
    fields = [f"{source}[{i}]" for i in range(len(turns))]
    checked = [_checked_message(record, name, m, media) for name, m in zip(fields, turns)]
    messages = [m for m, _ in checked]
    _check_turn_order(record, messages, fields)
    tools, tools_field = _tools(record, columns)
    return Conversation(record.where, messages, fields, tools, tools_field, sum(n for _, n in checked))


CONVERTERS = {"alpaca": alpaca_conversation, "sharegpt": sharegpt_conversation, "chat": chat_conversation}


def conversation(record: Record, fmt: str, columns: Columns | None = None, media: str = "refuse") -> Conversation:
    """A record of a chat-like format (alpaca, sharegpt, chat) as a Conversation; media (content
    parts, `images`/`audios`/`videos` columns) refused by name, or with `media="drop"` dropped with
    their placeholders and counted in `media_dropped` (core.data.content)."""
    columns = columns or Columns()
    in_columns = media_columns(record, columns.mapping, media)
    conv = CONVERTERS[fmt](record, columns, media)
    conv.media_dropped += in_columns
    if conv.media_dropped:
        conv.messages = [{**m, "content": strip_placeholders(m["content"])} if isinstance(m.get("content"), str)
                         else m for m in conv.messages]
    return conv


# ---------------------------------------------------------------------------------------------
# Fields a format does not use
# ---------------------------------------------------------------------------------------------

def used_fields(record: Record, fmt: str, columns: Columns) -> set[str]:
    required, optional = FORMAT_FIELDS[fmt]
    return {columns.source(n, record.fields) for n in (*required, *optional)}


def ignored_fields(records: Sequence[Record], fmt: str, columns: Columns | None = None) -> dict[str, int]:
    """{field: number of records that have it} for the fields format `fmt` does not read (for
    sharegpt also keys of turns, as 'conversations[].weight'; a top-level `system` next to a
    system turn). Sorted by count, most frequent first."""
    columns = columns or Columns()
    counts: dict[str, int] = {}

    def count(name: str) -> None:
        counts[name] = counts.get(name, 0) + 1

    turn_keys = {columns.tag("role_tag"), columns.tag("content_tag")}
    for record in records:
        used = used_fields(record, fmt, columns) | media_fields(record.fields, columns.mapping)
        for name in record.fields:
            if name not in used and record.fields[name] is not None:
                count(name)
        if fmt != "sharegpt":
            continue
        source = columns.source("messages", record.fields)
        turns = record.fields.get(source)
        if isinstance(turns, list):
            extra = {k for t in turns if isinstance(t, dict) for k in t if k not in turn_keys}
            for key in sorted(extra):
                count(f"{source}[].{key}")
            first = turns[0] if turns and isinstance(turns[0], dict) else {}
            system = record.fields.get(columns.source("system"))
            if isinstance(system, str) and system.strip() and first.get(columns.tag("role_tag")) in (
                    "system", columns.tag("system_tag")):
                count(f"{columns.source('system')} (the conversation has its own system turn)")
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))
