"""Where a record is ('data/train.jsonl line 3', 'data/b.parquet row index 4', a catalogue's entry): a
str of its own kind per message id (core.data.files names every record by one, core.spec.stats keeps
the first over-long ones), and its record (`to_record`, `from_record`) for the caches and files that
keep a place, so that it comes back with its kind and is said in the page's language by its id.
Stdlib only (core.spec.stats rebuilds the places of a cache without importing core.data)."""
from __future__ import annotations

import functools
import re
import string
from typing import Any

from core.spec.messages import CATALOGUE

__all__ = ["PLACES", "Where", "line_of"]


class Where(str):
    """Where a record is, 'data/train.jsonl line 3', with the catalogue's message that says a
    problem there ('data.at_line': '{file} line {line}: {reason}'). Every record keeps one, so it is
    nearly as small as its text (a str of a kind per message id, no attributes: 133 bytes for a line's
    place against 85 for a plain str, and 708 with its parameters kept beside it, measured); `params`
    reads them back from the text, which the id's own template wrote."""

    __slots__ = ()
    key: str = ""  # each kind's class (_where_kind) names its message id

    def __new__(cls, key: str, **params: Any):
        return str.__new__(_where_kind(key), CATALOGUE[key].removesuffix(": {reason}").format(**params))

    @property
    def params(self) -> dict[str, Any]:
        found = _where_pattern(self.key).fullmatch(self).groupdict()
        return {name: int(value) if name in _NUMBERED else value for name, value in found.items()}

    def __reduce__(self):  # copies and pickles: the same kind, the same text
        return _where_again, (self.key, str(self))

    def to_record(self) -> dict[str, Any]:
        """{"place": its kind's id, "params"} (what a cache keeps: core.spec.codec.encode)."""
        return {"place": self.key, "params": self.params}

    @staticmethod
    def from_record(data: Any) -> Any:
        """The place a record keeps; anything else as it is (a text an older cache kept: shown as it is)."""
        if isinstance(data, dict) and data.get("place") in PLACES and isinstance(data.get("params"), dict):
            try:
                return Where(data["place"], **data["params"])
            except (KeyError, IndexError, ValueError):
                return data
        return data


_NUMBERED = frozenset({"line", "index", "row"})  # the place's numbers, ints as the producers give them


@functools.cache
def _where_kind(key: str) -> type[Where]:
    return type(f"Where[{key}]", (Where,), {"__slots__": (), "key": key})


@functools.cache
def _where_pattern(key: str) -> re.Pattern:
    """The place's template as a pattern, each parameter greedy: a file whose name holds ' line ' still
    ends at the last one."""
    pattern = ""
    for literal, name, _, _ in string.Formatter().parse(CATALOGUE[key].removesuffix(": {reason}")):
        pattern += re.escape(literal) + (f"(?P<{name}>.*)" if name else "")
    return re.compile(pattern, re.S)


def _where_again(key: str, text: str) -> Where:
    return str.__new__(_where_kind(key), text)


PLACES = ("data.at_line", "data.at_row", "data.at_record", "data.at_entry")  # the kinds of a record's place


def line_of(path: Any, line: int) -> Where:
    """A line's place: data.at_line's own text, written directly (one per record of a JSONL file)."""
    return str.__new__(_where_kind("data.at_line"), f"{path} line {line}")
