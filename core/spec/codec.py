"""One codec between dataclasses and the plain values of JSON and YAML (issue 29 item 3).

The config's sections (YAML), the run directory's records (JSON), the data statistics a run and
the data cache keep, and a checkpoint's loop state are dataclasses with type hints; this module
is the one walk over those hints that types a plain value or refuses it, and the one way back.

- `decode(value, hint)` -> the value as `hint` wants it, or `INVALID`. Two number policies:
  `text=False` (JSON: an int widens to a float, an integral float narrows to an int, NaN is a
  float) and `text=True` (YAML and key=value overrides: `yaml.safe_load` reads 1e-4 as a string,
  so numeric strings are numbers, numbers are strings where a string is wanted, and a float must
  be finite). `reading=True` reads a file another version may have written: a mapping becomes
  its dataclass, and list items or dict values of the wrong type are left out.
- `build(cls, mapping, where)` -> a dataclass from a mapping, raising `CodecError` that names
  `where` and the field (`DataStats.train.samples = 'x': must be int`).
- `read(cls, mapping)` -> the tolerant read: a key this code does not know is kept in the
  dataclass's `extra` field when it has one, a value of the wrong type reads as the default.
- `encode(value)` -> plain JSON values (dataclasses as mappings, `extra` first so a field wins); a value
  with `to_record()` (a record's place, core.spec.places.Where) as its record, and in a field marked
  `metadata={"records": True}` a message as its record ({"id", "params"}, core.spec.messages), so
  that both come back with their ids (a plain text field keeps a message's English only).

A dataclass with its own `from_dict` classmethod (a config section, which reports every problem
with the YAML's words) builds itself from a mapping. Stdlib only.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import re
import types
import typing
from typing import Any, Literal, Mapping

__all__ = ["INVALID", "CodecError", "decode", "build", "read", "encode", "field_hints", "split_optional",
           "choices", "type_text", "plain"]

INVALID = object()  # what `decode` returns for a value it cannot type


class CodecError(ValueError):
    """A mapping that does not fit its dataclass; the message names where and the field."""


def plain(value: Any) -> Any:
    """NumPy / MindSpore scalars as Python numbers; everything else as it is."""
    if hasattr(value, "item") and not isinstance(value, (list, dict, str, bytes)):
        with contextlib.suppress(TypeError, ValueError):
            return value.item()
    return value


def split_optional(hint: Any) -> tuple[Any, bool]:
    """`X | None` -> (X, True); any other hint -> (hint, False)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in typing.get_args(hint):
        rest = [a for a in typing.get_args(hint) if a is not type(None)]
        return (rest[0] if len(rest) == 1 else typing.Union[tuple(rest)]), True
    return hint, False


def choices(hint: Any) -> tuple:
    """A `Literal[...]` hint's values; () for any other hint."""
    return typing.get_args(hint) if typing.get_origin(hint) is Literal else ()


def type_text(hint: Any) -> str:
    """'FinalFigures | None', 'list[int]', 'float'."""
    text = str(hint) if typing.get_args(hint) else getattr(hint, "__name__", str(hint))
    return re.sub(r"\b(?:[A-Za-z_]\w*\.)+(\w+)", r"\1", text)


@functools.cache
def field_hints(cls: type) -> dict[str, Any]:
    """A dataclass's fields -> resolved type hints, `extra` left out (cached: resolving is slow)."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls) if f.name != "extra"}


@functools.cache
def _has_extra(cls: type) -> bool:
    return any(f.name == "extra" for f in dataclasses.fields(cls))


@functools.cache
def _required(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls)
                     if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)


def _scalar(value: Any, hint: type, text: bool) -> Any:
    if hint is bool or isinstance(value, bool):
        return value if isinstance(value, bool) and hint is bool else INVALID
    if hint in (int, float) and text and isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return INVALID
    if hint is int:
        integral = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
        return int(value) if integral else INVALID
    if hint is float:
        if not isinstance(value, (int, float)):
            return INVALID
        return float(value) if not text or math.isfinite(value) else INVALID
    if hint is str and text and isinstance(value, (int, float)):
        return str(value)
    return value if isinstance(value, hint) else INVALID


class _Shape(typing.NamedTuple):
    """What `decode` needs to know of a hint, worked out once per hint."""
    kind: str        # any, union, literal, dataclass, list, tuple, dict, scalar, other
    inner: Any       # the hint without None
    optional: bool
    args: tuple      # union members, literal values, or the item hint (list/tuple/dict values)


@functools.cache
def _shape(hint: Any) -> _Shape:
    if hint is Any:
        return _Shape("any", hint, True, ())
    inner, optional = split_optional(hint)
    origin = typing.get_origin(inner) or inner
    if origin in (typing.Union, types.UnionType):
        return _Shape("union", inner, optional, typing.get_args(inner))
    if origin is Literal:
        return _Shape("literal", inner, optional, typing.get_args(inner))
    if dataclasses.is_dataclass(inner) and isinstance(inner, type):
        return _Shape("dataclass", inner, optional, ())
    if origin in (list, tuple):
        return _Shape(origin.__name__, inner, optional, ((typing.get_args(inner) or (Any,))[0],))
    if origin is dict:
        return _Shape("dict", inner, optional, ((typing.get_args(inner) or (str, Any))[1],))
    return _Shape("scalar" if isinstance(inner, type) else "other", inner, optional, ())


def decode(value: Any, hint: Any, *, text: bool = False, reading: bool = False, _member: bool = False) -> Any:
    """`value` as the type `hint` wants, or INVALID (see the module's docstring). A mapping read
    for a union of dataclasses becomes the first member whose fields it fits."""
    value = plain(value)
    shape = _shape(hint)
    kind, inner = shape.kind, shape.inner
    if kind == "any":
        return value
    if value is None:
        return None if shape.optional else INVALID
    if kind == "scalar":
        return _scalar(value, inner, text)
    if kind == "union":  # the first member that fits
        for member in shape.args:
            if (decoded := decode(value, member, text=text, reading=reading, _member=True)) is not INVALID:
                return decoded
        return INVALID
    if kind == "literal":
        return value if value in shape.args else INVALID
    if kind == "dataclass":
        if isinstance(value, inner):
            return value
        if not (reading and isinstance(value, Mapping)):
            return INVALID
        try:
            return read(inner, value, strict=_member)
        except (CodecError, ValueError, TypeError):
            return INVALID
    if kind in ("list", "tuple"):
        if not isinstance(value, (list, tuple)):
            return INVALID
        items = [decode(x, shape.args[0], text=text, reading=reading) for x in value]
        if not reading and any(v is INVALID for v in items):
            return INVALID
        kept = [v for v in items if v is not INVALID]
        return tuple(kept) if kind == "tuple" else kept
    if kind == "dict":
        if not isinstance(value, Mapping):
            return INVALID
        values = {k: decode(v, shape.args[0], text=text, reading=reading) for k, v in value.items()}
        if not reading and any(v is INVALID for v in values.values()):
            return INVALID
        return {k: v for k, v in values.items() if v is not INVALID}
    return value


def read(cls: type, data: Mapping[str, Any], *, strict: bool = False) -> Any:
    """A dataclass from what a file holds. Unknown keys go to `extra` (or are left out when the
    class has none); a value of the wrong type reads as the field's default. With `strict`
    (a member of a union being tried), a missing required field or a wrong type is an error."""
    if not _has_extra(cls) and hasattr(cls, "from_dict"):
        return cls.from_dict(data)
    known, required = field_hints(cls), _required(cls)
    if strict and not required <= set(data):
        raise CodecError(f"{cls.__name__}: missing {', '.join(sorted(required - set(data)))}")
    values, extra = {}, {}
    for key, value in data.items():
        if key not in known:
            extra[key] = value
        elif (decoded := decode(value, known[key], reading=True)) is not INVALID:
            values[key] = decoded
        elif strict or key in required:
            raise CodecError(f"{cls.__name__}.{key} = {value!r}: must be {type_text(known[key])}")
    return cls(**values, extra=extra) if _has_extra(cls) else cls(**values)


def build(cls: type, data: Any, where: str = "") -> Any:
    """A dataclass from a mapping written by this code (a cache, a checkpoint's state): every
    field must have its type; a problem raises CodecError naming `where` and the field path."""
    label = f"{where}: " if where else ""
    if not isinstance(data, Mapping):
        raise CodecError(f"{label}{cls.__name__} must be a mapping, got {type(data).__name__}")
    if hasattr(cls, "from_dict") and not _has_extra(cls):
        return cls.from_dict(data)
    known = field_hints(cls)
    unknown = sorted(set(data) - set(known) - ({"extra"} if _has_extra(cls) else set()))
    if unknown and not _has_extra(cls):
        raise CodecError(f"{label}{cls.__name__} has no field {', '.join(unknown)}; its fields: {', '.join(known)}")
    values = {}
    for key, value in data.items():
        if key not in known:
            continue
        inner, _ = split_optional(known[key])
        if dataclasses.is_dataclass(inner) and isinstance(value, Mapping):
            values[key] = build(inner, value, f"{where}.{key}" if where else f"{cls.__name__}.{key}")
            continue
        decoded = decode(value, known[key])
        if decoded is INVALID:
            raise CodecError(f"{label}{cls.__name__}.{key} = {value!r}: must be {type_text(known[key])}")
        values[key] = decoded
    if _has_extra(cls):
        values["extra"] = {k: v for k, v in data.items() if k not in known}
    try:
        return cls(**values)
    except TypeError as err:  # a required field missing
        raise CodecError(f"{label}{cls.__name__}: {err}") from None


def encode(value: Any, records: bool = False) -> Any:
    """Plain JSON values: a dataclass as a mapping (its `extra` keys first, so a field always
    wins), tuples as lists, NumPy scalars as numbers; containers copied."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        kept = [(f.name, f.metadata.get("records", False)) for f in dataclasses.fields(value) if f.name != "extra"]
        return {**dict(getattr(value, "extra", None) or {}),
                **{n: encode(getattr(value, n), records) for n, records in kept}}
    if isinstance(value, (list, tuple)):
        return [encode(v, records) for v in value]
    if isinstance(value, dict):
        return {k: encode(v, records) for k, v in value.items()}
    if hasattr(value, "to_record"):
        return value.to_record()
    if records and hasattr(value, "to_json") and isinstance(value, str):
        return value.to_json()
    return plain(value)
