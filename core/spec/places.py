"""Where a record is ('data/train.jsonl line 3', 'data/b.parquet row index 4', a catalogue's entry): a
str of its own kind per message id (core.data.files names every record by one, core.spec.stats keeps
the first over-long ones), and its record (`to_record`, `from_record`) for the caches and files that
keep a place, so that it comes back with its kind and is said in the page's language by its id.
Stdlib only (core.spec.stats rebuilds the places of a cache without importing core.data)."""
from __future__ import annotations

import functools
from typing import Any

from core.spec.catalogue import CATALOGUE

__all__ = ["PLACES", "Where", "line_of"]


class Where(str):
    """Where a record is, 'data/train.jsonl line 3', with the catalogue's message that says a
    problem there ('data.at_line': '{file} line {line}: {reason}'). Every record keeps one, so it is
    nearly as small as its text: a str with no attributes (133 bytes for a line's place against 85
    for a plain str, and 708 with its parameters kept beside it, measured), of a class per kind and
    fixed parameters (a file: `_where_kind`), which holds them; the one number that varies (a line,
    a row, an index) sits between the head and the tail that class wrote, so `params` takes it from
    there. Nothing reads the text back."""

    __slots__ = ()
    key: str = ""  # the class's message id (data.at_line, ...)
    fixed: tuple = ()  # the class's parameters, (name, value) pairs
    varying: str | None = None  # the number that varies by instance, between `head` and `tail`
    head: str = ""
    tail: str = ""

    def __new__(cls, key: str, **params: Any):
        varying = _VARYING.get(key)
        kind = _where_kind(key, tuple(sorted((n, v) for n, v in params.items() if n != varying)))
        return str.__new__(kind, CATALOGUE[key].removesuffix(": {reason}").format(**params))

    @property
    def params(self) -> dict[str, Any]:
        out = dict(self.fixed)
        if self.varying is not None:
            out[self.varying] = int(self[len(self.head):len(self) - len(self.tail)])
        return out

    def __reduce__(self):  # copies and pickles: the same kind, the same parameters
        return _where_again, (self.key, self.params)

    def to_record(self) -> dict[str, Any]:
        """{"place": its kind's id, "params"} (what a cache keeps: core.spec.codec.encode)."""
        return {"place": self.key, "params": self.params}

    @staticmethod
    def from_record(data: Any) -> Any:
        """The place a record keeps; anything else as it is (a text an older cache kept: shown as it is)."""
        if isinstance(data, dict) and data.get("place") in PLACES and isinstance(data.get("params"), dict):
            try:
                return Where(data["place"], **data["params"])
            except (KeyError, IndexError, ValueError, TypeError):
                return data
        return data


PLACES = ("data.at_line", "data.at_row", "data.at_record", "data.at_entry")  # the kinds of a record's place
_VARYING = {"data.at_line": "line", "data.at_row": "row", "data.at_record": "index"}  # (an entry: all fixed)
_MARK = "\x00"


@functools.cache
def _where_kind(key: str, fixed: tuple) -> type[Where]:
    """The class of `key`'s places with these fixed parameters (one per file: few), its head and tail
    the template's text around the varying number."""
    varying = _VARYING.get(key)
    head, tail = "", ""
    if varying is not None:
        head, _, tail = CATALOGUE[key].removesuffix(": {reason}").format(**dict(fixed), **{varying: _MARK}) \
            .partition(_MARK)
    return type(f"Where[{key}]", (Where,), {"__slots__": (), "key": key, "fixed": fixed, "varying": varying,
                                            "head": head, "tail": tail})


def _where_again(key: str, params: dict) -> Where:
    return Where(key, **params)


def line_of(path: Any, line: int) -> Where:
    """A line's place: data.at_line's own text, written directly (one per record of a JSONL file)."""
    return str.__new__(_where_kind("data.at_line", (("file", str(path)),)), f"{path} line {line}")
