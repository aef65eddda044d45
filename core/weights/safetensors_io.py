"""Safetensors read and written one tensor at a time, NumPy only (no MindSpore: core.engine.export's
PEFT and merged exports and the benchmarks' model maker run without it).

Reading (`SafetensorsReader`) uses plain reads, not the `safetensors` library's mmap: every page of
a mapped file that a read touches counts in the process's resident set while the file is open
(loading a 0.5B bf16 model through safe_open peaked at 2.3 GB for 1.35 GB of model). Writing
(`write_file`) puts the header (names, dtypes, shapes, offsets) first, then each tensor's bytes as it
is produced, so an export holds one tensor, not the whole model. The files are the format's own
layout (an 8-byte little-endian header length, the JSON header padded with spaces to a multiple of
8, the tensors back to back), so `safetensors`, transformers and PEFT read them as any other.
bfloat16 arrays are the kind that importing MindSpore registers with NumPy; without MindSpore a
bfloat16 tensor is read and written as its raw uint16 bits (`read(raw=True)`, `to_float32`,
`from_float32`).
"""
from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from core.spec.errors import MessageError
from core.spec.messages import Message


class SafetensorsFormatError(MessageError):
    """A file that is not valid safetensors (a ValueError); its message is the reader's own (weights.*)."""


# numpy dtype name -> safetensors dtype (and back)
DTYPE_CODES = {"float64": "F64", "float32": "F32", "float16": "F16", "bfloat16": "BF16", "int64": "I64",
               "int32": "I32", "int16": "I16", "int8": "I8", "uint64": "U64", "uint32": "U32", "uint16": "U16",
               "uint8": "U8", "bool": "BOOL"}
CODE_DTYPES = {code: name for name, code in DTYPE_CODES.items()}
# bytes per element by numpy dtype name (bfloat16 is known to numpy only once MindSpore is imported)
ITEMSIZE = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int16": 2,
            "int8": 1, "uint64": 8, "uint32": 4, "uint16": 2, "uint8": 1, "bool": 1}
# a numpy dtype that holds the same bytes where numpy itself may not know the dtype (no MindSpore)
RAW_DTYPE = {"bfloat16": "uint16"}
FLOAT_DTYPES = ("float64", "float32", "float16", "bfloat16")
_CHUNK = 1 << 22  # elements converted at a time (bounds the float32/uint32 temporaries)


def raw_dtype(dtype: str) -> np.dtype:
    """The numpy dtype a tensor of `dtype` is read into by `SafetensorsReader.read(raw=True)`."""
    return np.dtype(RAW_DTYPE.get(dtype, dtype))


def to_float32(raw: np.ndarray, dtype: str) -> np.ndarray:
    """A tensor read raw (see `raw_dtype`) as float32, exactly (every float dtype here converts
    exactly; bfloat16 is the upper half of a float32's bits)."""
    if dtype == "bfloat16":  # a chunk at a time: no uint32 temporaries the size of the tensor
        out = np.empty(raw.shape, np.uint32)
        flat_in, flat_out = raw.reshape(-1), out.reshape(-1)
        for start in range(0, flat_in.size, _CHUNK):
            flat_out[start:start + _CHUNK] = flat_in[start:start + _CHUNK]
            flat_out[start:start + _CHUNK] <<= np.uint32(16)
        return out.view(np.float32)
    return raw.astype(np.float32)


def from_float32(values: np.ndarray, dtype: str) -> np.ndarray:
    """float32 values in `dtype`, raw (bfloat16 as its uint16 bits): rounded to nearest, ties to
    even (as torch's and MindSpore's casts), NaN kept NaN; converted a chunk at a time."""
    values = np.ascontiguousarray(values, dtype=np.float32)
    if dtype != "bfloat16":
        return values.astype(raw_dtype(dtype))
    out = np.empty(values.shape, np.uint16)
    flat_in, flat_out = values.reshape(-1), out.reshape(-1)
    for start in range(0, flat_in.size, _CHUNK):
        part = flat_in[start:start + _CHUNK]
        bits = part.view(np.uint32)
        rounded = (bits + (np.uint32(0x7FFF) + ((bits >> 16) & np.uint32(1)))) >> 16
        nan = np.isnan(part)
        if nan.any():
            rounded[nan] = (bits[nan] >> 16) | np.uint32(0x0040)  # a quiet NaN of the same sign
        flat_out[start:start + _CHUNK] = rounded
    return out


@dataclass(frozen=True)
class TensorEntry:
    """One tensor to write: its name, shape and numpy dtype name up front (they go into the header),
    and `read()`, called once when its bytes are due, returning the array."""
    name: str
    shape: tuple[int, ...]
    dtype: str
    read: Callable[[], np.ndarray]

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * ITEMSIZE[self.dtype]


def entry_of(name: str, array: np.ndarray) -> TensorEntry:
    """An entry for an array already in memory."""
    return TensorEntry(name, tuple(array.shape), array.dtype.name, lambda: array)


def header_bytes(entries: list[TensorEntry], metadata: dict[str, str] | None = None) -> bytes:
    header: dict = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    offset = 0
    for entry in entries:
        if entry.dtype not in ITEMSIZE:
            raise ValueError(f"tensor {entry.name}: dtype {entry.dtype} has no safetensors code")
        if entry.name in header:
            raise ValueError(f"tensor {entry.name} is listed twice")
        header[entry.name] = {"dtype": DTYPE_CODES[entry.dtype], "shape": [int(n) for n in entry.shape],
                              "data_offsets": [offset, offset + entry.nbytes]}
        offset += entry.nbytes
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text


def write_entries(handle: BinaryIO, entries: Iterable[TensorEntry], metadata: dict[str, str] | None = None) -> int:
    """Write a safetensors file to an open binary handle, reading each entry's array only when its
    turn comes; returns the bytes written. An array whose shape or dtype differs from its entry is
    a ValueError (the header would lie); a bfloat16 entry may hand over its raw uint16 bits."""
    entries = list(entries)
    head = header_bytes(entries, metadata)
    handle.write(head)
    written = len(head)
    for entry in entries:
        array = np.asarray(entry.read(), order="C")  # (ascontiguousarray would make a 0-d array 1-d)
        if tuple(array.shape) != tuple(entry.shape) or array.dtype.name not in (entry.dtype, RAW_DTYPE.get(entry.dtype)):
            raise ValueError(f"tensor {entry.name}: got {array.dtype.name}{tuple(array.shape)}, the header says "
                             f"{entry.dtype}{tuple(entry.shape)}")
        handle.write(memoryview(array.reshape(-1).view(np.uint8)))
        written += array.nbytes
        del array
    return written


def write_file(path: str | Path, entries: Iterable[TensorEntry], metadata: dict[str, str] | None = None) -> int:
    """`write_entries` into a new file at `path` (inside a folder being written atomically, e.g.
    `core.run.atomic.atomic_folder`'s temporary one; use `atomic_open` for a file on its own)."""
    with open(path, "wb") as handle:
        return write_entries(handle, entries, metadata)


# ---- reading, without mmap -------------------------------------------------------------------

MAX_HEADER_BYTES = 100 * 2**20  # as the safetensors library: a larger header is not a safetensors file


@dataclass(frozen=True)
class TensorInfo:
    """Where one tensor lies in a file: numpy dtype name, shape, byte range after the header."""
    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int


class SafetensorsReader:
    """One safetensors file read with plain reads (seek + readinto), one tensor at a time.

    Not the `safetensors` library's mmap: every page of a mapped file that a read touches counts in
    the process's resident set while the file stays open (loading a 0.5B bf16 model that way peaked
    at 2.3 GB for 1.4 GB of model). Raises SafetensorsFormatError (a ValueError) for a file that is not valid safetensors
    (truncated, a bad header, offsets outside the file, an unknown dtype)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._handle = open(self.path, "rb")
        try:
            self.metadata, self.tensors, self._data_start = self._read_header()
        except Exception:
            self._handle.close()
            raise

    def _read_header(self):
        size = self.path.stat().st_size
        head = self._handle.read(8)
        if len(head) < 8:
            raise SafetensorsFormatError(Message("weights.short_file"))
        (length,) = struct.unpack("<Q", head)
        if length > MAX_HEADER_BYTES or 8 + length > size:
            raise SafetensorsFormatError(Message("weights.header_length", length=length, size=size))
        try:
            header = json.loads(self._handle.read(length).decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise SafetensorsFormatError(_not_utf8(exc)) from exc
        except json.JSONDecodeError as exc:
            raise SafetensorsFormatError(Message("weights.header_json", json_says=str(exc))) from exc
        if not isinstance(header, dict):
            raise SafetensorsFormatError(Message("weights.header_not_object"))
        metadata = header.pop("__metadata__", None) or {}
        data_size = size - 8 - length
        tensors = {}
        for name, info in header.items():
            try:
                dtype = CODE_DTYPES[info["dtype"]]
                shape = tuple(int(n) for n in info["shape"])
                begin, end = (int(n) for n in info["data_offsets"])
            except (KeyError, TypeError, ValueError) as exc:
                raise SafetensorsFormatError(Message("weights.bad_entry", name=name, py_value=repr(info))) from exc
            expected = int(np.prod(shape, dtype=np.int64)) * ITEMSIZE[dtype]
            if not 0 <= begin <= end <= data_size or end - begin != expected:
                raise SafetensorsFormatError(Message("weights.bad_offsets", name=name, begin=begin, end=end,
                                                     dtype=dtype, shape=str(shape), data_bytes=data_size))
            tensors[name] = TensorInfo(dtype, shape, begin, end)
        return metadata, tensors, 8 + length

    def read(self, name: str, raw: bool = False) -> np.ndarray:
        """The tensor's values as a new array (the file's bytes copied once into it); raw: in
        `raw_dtype(dtype)` (bfloat16 as uint16 bits: no MindSpore needed)."""
        info = self.tensors[name]
        array = np.empty(info.shape, raw_dtype(info.dtype) if raw else np.dtype(info.dtype))
        self._handle.seek(self._data_start + info.begin)
        view = memoryview(array.reshape(-1).view(np.uint8))
        if self._handle.readinto(view) != info.end - info.begin:
            raise SafetensorsFormatError(Message("weights.ends_early", name=name))
        return array

    def read_rows(self, name: str, start: int, stop: int, raw: bool = False) -> np.ndarray:
        """Rows start..stop of the tensor's first axis (a large tensor read a block at a time)."""
        info = self.tensors[name]
        row = int(np.prod(info.shape[1:], dtype=np.int64)) * ITEMSIZE[info.dtype]
        stop = min(stop, info.shape[0])
        array = np.empty((stop - start, *info.shape[1:]), raw_dtype(info.dtype) if raw else np.dtype(info.dtype))
        self._handle.seek(self._data_start + info.begin + start * row)
        if self._handle.readinto(memoryview(array.reshape(-1).view(np.uint8))) != (stop - start) * row:
            raise SafetensorsFormatError(Message("weights.ends_early", name=name))
        return array

    def read_into(self, name: str, out: np.ndarray) -> None:
        """The tensor's values written into `out` (its shape; any dtype: the file's is read straight
        into it, another is converted from one temporary copy)."""
        info = self.tensors[name]
        if tuple(out.shape) != info.shape:
            raise ValueError(f"tensor {name}: shape {info.shape}, the target is {tuple(out.shape)}")
        if out.dtype.name != info.dtype or not out.flags.c_contiguous:
            np.copyto(out, self.read(name), casting="unsafe")
            return
        self._handle.seek(self._data_start + info.begin)
        if self._handle.readinto(memoryview(out.reshape(-1).view(np.uint8))) != info.end - info.begin:
            raise SafetensorsFormatError(Message("weights.ends_early", name=name))

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> SafetensorsReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _not_utf8(exc: UnicodeDecodeError) -> Message:
    """A header that is not UTF-8, in Python's decoder's words with its reason (`codec_says`) apart."""
    if exc.end - exc.start == 1:
        said = Message("weights.header_not_utf8", byte=f"0x{exc.object[exc.start]:02x}", position=exc.start,
                       codec_says=exc.reason)
    else:
        said = Message("weights.header_not_utf8_bytes", position=exc.start, last=exc.end - 1, codec_says=exc.reason)
    return said if said == f"header is not valid JSON: {exc}" else Message("weights.header_json", json_says=str(exc))
