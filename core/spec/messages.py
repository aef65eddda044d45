"""Core's messages by id: each has its English template in the catalogue; the CLI and the logs
print that English, and the console renders the same id in the page's language from the catalogue's
中文 (core.spec.catalogue.MESSAGES_ZH), never by re-reading the English.

A message is a `Message`: a str (its English) that also carries `key` and `params`, so every caller
that prints, logs, joins or compares it keeps working. A parameter may itself be a Message (it is
rendered in the same language). `RunDir.write_status(reason=Message(...))` records the id and the
parameters beside the English (`Status.reason_id`, `reason_params`).

A message crosses a process as its record (`Message.to_json`: {"id", "params"}): status.json's
`reason_message`, and the line an entry point prints on stderr for the console (core.spec.errors
`report`, `read_report`). Nothing reads the English back: a run folder written before the ids holds
only the English, which the console shows as it is. Stdlib only.

The catalogue is core.spec.catalogue: one module per domain (run, cluster, devices, config, data,
model, train, evaluation, export, serve, tracking), each id with its English and its 中文 side by side
and the kind of each parameter that is not plain text (`lines`: a list said one a line; `message`: a
message itself; a library's own words, PyYAML's, Python's json and re, jinja2's, the OS's, have a kind
of their own, which the console says through that library's table).
"""
from __future__ import annotations

import string
from typing import Any

from core.spec.catalogue import CATALOGUE, ENTRIES
from core.spec.places import Where

__all__ = ["CATALOGUE", "LIST_SEPARATOR", "Message", "ids_of", "placeholders"]

LIST_SEPARATOR = ", "  # between a list parameter's items; a parameter of kind `lines` is said one a line


def placeholders(template: str) -> set[str]:
    """The parameter names of a template: 'reached {steps} steps' -> {'steps'}."""
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


class Message(str):
    """`Message("run.reached_steps", steps=20)` is the str 'reached 20 steps' with `key` and `params`."""

    key: str
    params: dict[str, Any]

    def __new__(cls, key: str, **params: Any):
        if key not in CATALOGUE:
            raise KeyError(f"no message {key!r} in core.spec.messages.CATALOGUE")
        missing = placeholders(CATALOGUE[key]) - set(params)
        if missing:
            raise KeyError(f"message {key!r} needs {', '.join(sorted(missing))}")
        if any(isinstance(value, list | tuple) for value in params.values()):
            params = {name: list(value) if isinstance(value, list | tuple) else value for name, value in params.items()}
        kinds = ENTRIES[key].kinds
        shown = {name: ("\n" if kinds.get(name) == "lines" else LIST_SEPARATOR).join(map(str, value))
                 if isinstance(value, list) else value for name, value in params.items()}
        message = super().__new__(cls, CATALOGUE[key].format(**shown))
        message.key, message.params = key, params
        return message

    def __getnewargs_ex__(self):  # copies and pickles build it again from its key
        return (self.key,), self.params

    def render(self, templates: dict[str, str], separator: str = LIST_SEPARATOR) -> str:
        """The message from `templates` (another language's, by key; English where one is missing),
        its Message parameters rendered the same way, a list's items joined by `separator`."""
        kinds = ENTRIES[self.key].kinds

        def shown(name, value):
            if isinstance(value, list):
                return ("\n" if kinds.get(name) == "lines" else separator).join(shown("", item) for item in value)
            return value.render(templates, separator) if isinstance(value, Message) else value

        return templates.get(self.key, CATALOGUE[self.key]).format(
            **{name: shown(name, value) for name, value in self.params.items()})

    def to_json(self) -> dict[str, Any]:
        """{"id", "params"} with Message parameters nested the same way (what a record keeps)."""
        def kept(value):
            if isinstance(value, list):
                return [kept(item) for item in value]
            if hasattr(value, "to_record"):  # a record's place (core.spec.places.Where): its kind kept
                return value.to_record()
            return value.to_json() if isinstance(value, Message) else value

        return {"id": self.key, "params": {name: kept(value) for name, value in self.params.items()}}

    @classmethod
    def from_json(cls, data: Any) -> Message | None:
        """The message a record kept, or None when it does not fit the catalogue (a newer writer's)."""
        if not isinstance(data, dict) or data.get("id") not in CATALOGUE or not isinstance(data.get("params"), dict):
            return None
        def read(value):
            if isinstance(value, list):
                return [read(item) for item in value]
            if isinstance(value, dict) and "place" in value:
                return Where.from_record(value)
            return (cls.from_json(value) or value) if isinstance(value, dict) else value

        params = {name: read(value) for name, value in data["params"].items()}
        try:
            return cls(data["id"], **params)
        except (KeyError, ValueError, IndexError):
            return None


def ids_of(message) -> list[str]:
    """A message's id and the ids of the messages in its parameters (a list's items too), outermost
    first; [] for what is no message."""
    if not isinstance(message, Message):
        return []
    found = [message.key]
    for value in message.params.values():
        for item in value if isinstance(value, list) else [value]:
            found += ids_of(item)
    return found

