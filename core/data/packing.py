"""Sequence packing and length grouping: fewer padded tokens in fixed-shape batches.

- `pack_rows`: several samples share one row of `row_length` tokens (best-fit decreasing, so rows
  come out nearly full); `collate_packed` lays them out with `position_ids` restarting at 0 for
  each sample and `segment_ids` 1, 2, ... per sample (0 = padding), so the model's attention never
  crosses a sample boundary and each sample's loss is what it would be alone.
- `length_groups`: batches of samples of similar length, each padded only to its own bucket
  (a few fixed lengths, so a compiled step compiles a few shapes, not one per batch).
Pure numpy, no MindSpore.
"""
from __future__ import annotations

import bisect
from typing import Sequence

import numpy as np

IGNORE_INDEX = -100


def pack_rows(lengths: Sequence[int], row_length: int, order: Sequence[int] | None = None) -> list[list[int]]:
    """Sample indices grouped into rows whose lengths sum to at most `row_length`.

    Best-fit decreasing: samples are taken longest first (ties in `order`, e.g. an epoch's
    shuffle) and each goes into the fullest row it still fits, else a new row. Every index
    appears exactly once; a sample longer than the row gets a row of its own (the caller
    truncates it, as without packing)."""
    order = range(len(lengths)) if order is None else order
    by_length = sorted(order, key=lambda i: -int(lengths[i]))  # stable: equal lengths keep `order`
    rows: list[list[int]] = []
    spaces: list[tuple[int, int]] = []  # (free tokens, row) sorted, for the best fit by bisection
    for index in by_length:
        need = min(int(lengths[index]), row_length)
        at = bisect.bisect_left(spaces, (need, -1))
        if at < len(spaces):
            free, row = spaces.pop(at)
            rows[row].append(index)
            bisect.insort(spaces, (free - need, row))
        else:
            rows.append([index])
            bisect.insort(spaces, (row_length - need, len(rows) - 1))
    return rows


def packing_efficiency(lengths: Sequence[int], row_length: int) -> float:
    """Real tokens / padded tokens when `lengths` are packed into rows of `row_length`."""
    if not len(lengths):
        return 0.0
    rows = pack_rows(lengths, row_length)
    return float(sum(min(int(n), row_length) for n in lengths)) / (len(rows) * row_length)


def padding_efficiency(lengths: Sequence[int], row_length: int) -> float:
    """Real tokens / padded tokens with one sample per row of `row_length`."""
    if not len(lengths):
        return 0.0
    return float(sum(min(int(n), row_length) for n in lengths)) / (len(lengths) * row_length)


def collate_packed(rows: Sequence[Sequence[tuple[np.ndarray, np.ndarray]] | None], length: int,
                   pad_id: int = 0) -> dict[str, np.ndarray]:
    """Rows of (input_ids, labels) samples laid end to end, each (B, length) int32:
    `input_ids`, `labels` (IGNORE_INDEX on padding and on each sample's first token, which is
    never a target unpacked either), `attention_mask` (1 on real tokens), `position_ids` (0, 1,
    ... within each sample) and `segment_ids` (1, 2, ... per sample in its row; 0 on padding). A None row is padding only. A sample longer than what is left of the row
    is an error: rows come from `pack_rows`."""
    batch = len(rows)
    input_ids = np.full((batch, length), pad_id, dtype=np.int32)  # (B, L)
    labels = np.full((batch, length), IGNORE_INDEX, dtype=np.int32)  # (B, L)
    position_ids = np.zeros((batch, length), dtype=np.int32)  # (B, L)
    segment_ids = np.zeros((batch, length), dtype=np.int32)  # (B, L)
    for r, samples in enumerate(rows):
        cursor = 0
        for segment, (ids, sample_labels) in enumerate(samples or (), start=1):
            n = len(ids)
            if cursor + n > length:
                raise ValueError(f"row {r}: samples of {cursor + n} tokens do not fit the row length {length}")
            input_ids[r, cursor:cursor + n] = ids
            labels[r, cursor:cursor + n] = sample_labels
            # the loss takes position t's target from label t+1, so a sample's first label would be
            # the previous sample's last target; alone in a row it is never a target: the same here
            labels[r, cursor] = IGNORE_INDEX
            position_ids[r, cursor:cursor + n] = np.arange(n, dtype=np.int32)
            segment_ids[r, cursor:cursor + n] = segment
            cursor += n
    attention_mask = (segment_ids > 0).astype(np.int32)
    return {"input_ids": input_ids, "labels": labels, "attention_mask": attention_mask,
            "position_ids": position_ids, "segment_ids": segment_ids}


def bucket_length(longest: int, max_length: int, buckets: int = 8) -> int:
    """The padded length of a length-grouped batch whose longest sample has `longest` tokens:
    the next of `buckets` evenly spaced lengths up to `max_length` (multiples of 16)."""
    step = max(16, -(-max_length // buckets // 16) * 16)
    return min(max_length, -(-max(longest, 1) // step) * step)


def length_groups(lengths: Sequence[int], batch_size: int, order: Sequence[int],
                  window: int = 64) -> list[list[int]]:
    """`order` cut into batches of `batch_size` samples of similar length: each window of
    `window` batches is sorted by length and cut; the batches keep the window's place, so the
    epoch's shuffle still decides which samples meet when (as transformers' group_by_length
    does with its mega-batches). Incomplete trailing batches are kept (the caller drops them)."""
    order = list(order)
    span = batch_size * window
    groups: list[list[int]] = []
    for start in range(0, len(order), span):
        chunk = sorted(order[start:start + span], key=lambda i: -int(lengths[i]))
        groups += [chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size)]
    return groups
