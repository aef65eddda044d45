"""A run's metrics as chart data, kept current by reading only what the worker appended.

`RunCharts.update()` asks `core.rundir.MetricsReader` for the records written since the last call
(it keeps the byte offset) and appends them to one small long-format DataFrame per chart
(step, value, series). Nothing is re-read: the cost of a tick is the new bytes, not the file.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from core.rundir import MetricsReader

CHARTS = ("loss", "val_loss", "val_ppl", "memory", "tokens_per_s", "lr", "grad_norm", "loss_scale")
# chart -> (train record field, series name) for the one-line train charts
_TRAIN_SERIES = {"tokens_per_s": ("tokens_per_s", "tokens/s"), "lr": ("lr", "learning rate"),
                 "grad_norm": ("grad_norm", "grad norm"), "loss_scale": ("loss_scale", "loss scale")}
_LOSS_MONITORS = ("val_loss", "val_loss_ema")
LOG_TAIL_BYTES = 16 * 1024


def empty_frame() -> pd.DataFrame:
    """A chart's data with no points yet (typed, so the plot knows its axes)."""
    return pd.DataFrame({"step": pd.Series(dtype="int64"), "value": pd.Series(dtype="float64"),
                         "series": pd.Series(dtype="str")})


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass
class Progress:
    """Timing of the training steps, for the ETA: the first timed step after compilation and the latest."""
    first: tuple[int, float] | None = None
    last: tuple[int, float] | None = None
    train_lines: int = 0

    def add(self, step: int, time_s: float) -> None:
        self.train_lines += 1
        if self.train_lines == 2:  # the first line includes the graph compilation
            self.first = (step, time_s)
        self.last = (step, time_s)

    def seconds_per_step(self) -> float | None:
        if not self.first or not self.last or self.last[0] <= self.first[0]:
            return None
        return (self.last[1] - self.first[1]) / (self.last[0] - self.first[0])


@dataclass
class RunCharts:
    """Chart data of one run and the latest values the status line needs."""
    path: Path
    workers: int = 1
    reader: MetricsReader = field(init=False)
    frames: dict[str, pd.DataFrame] = field(init=False)
    changed: set[str] = field(default_factory=set)
    last_train: dict | None = None
    last_eval: dict | None = None
    setup: dict | None = None
    end: dict | None = None
    controls: list[dict] = field(default_factory=list)
    progress: Progress = field(default_factory=Progress)

    def __post_init__(self) -> None:
        self.reader = MetricsReader(Path(self.path) / "metrics.jsonl")
        self.frames = {name: empty_frame() for name in CHARTS}

    def update(self) -> set[str]:
        """Read the new records; returns the charts that got points (also kept in `changed`)."""
        records = self.reader.read_new()
        rows: dict[str, list[dict]] = {name: [] for name in CHARTS}
        for record in records:
            self._add(record, rows)
        fresh = {name for name, new in rows.items() if new}
        for name in fresh:
            self.frames[name] = pd.concat([self.frames[name], pd.DataFrame(rows[name])], ignore_index=True)
        self.changed |= fresh
        return fresh

    def take_changed(self) -> set[str]:
        """The charts changed since the last call (each is sent to the browser once)."""
        changed, self.changed = self.changed, set()
        return changed

    def _add(self, record: dict, rows: dict[str, list[dict]]) -> None:
        kind, step = record.get("kind"), record.get("step")
        if not isinstance(step, int):
            return
        if kind == "train":
            self._add_train(record, step, rows)
        elif kind == "eval":
            self._add_eval(record, step, rows)
        elif kind == "event":
            self._add_event(record)

    def _add_train(self, record: dict, step: int, rows: dict[str, list[dict]]) -> None:
        self.last_train = record
        if _finite(record.get("time")):
            self.progress.add(step, float(record["time"]))
        for name, series in (("loss", "loss"), ("loss_ema", "loss EMA")):
            if _finite(record.get(name)):
                rows["loss"].append({"step": step, "value": float(record[name]), "series": series})
        if _finite(record.get("peak_mem_mb")):
            rows["memory"].append({"step": step, "value": record["peak_mem_mb"] / max(self.workers, 1),
                                   "series": "peak MB per worker"})
        for chart, (name, series) in _TRAIN_SERIES.items():
            if _finite(record.get(name)):
                rows[chart].append({"step": step, "value": float(record[name]), "series": series})

    def _add_eval(self, record: dict, step: int, rows: dict[str, list[dict]]) -> None:
        self.last_eval = record
        for chart, names in (("val_loss", ("val_loss", "val_loss_ema")), ("val_ppl", ("val_ppl", "val_ppl_ema"))):
            for name in names:
                if _finite(record.get(name)):
                    label = name.replace("_ema", " EMA").replace("_", " ")
                    rows[chart].append({"step": step, "value": float(record[name]), "series": label})
        best, monitor = record.get("best_value"), record.get("monitor")
        if _finite(best) and monitor:
            chart = "val_loss" if monitor in _LOSS_MONITORS else "val_ppl"
            rows[chart].append({"step": step, "value": float(best), "series": f"best {monitor}"})

    def _add_event(self, record: dict) -> None:
        event = record.get("event")
        if event == "setup":
            self.setup = record
        elif event == "end":
            self.end = record
        elif event == "control":
            self.controls.append(record)


def read_tail(path: str | os.PathLike, max_bytes: int = LOG_TAIL_BYTES) -> str:
    """The last `max_bytes` of a text file (starting at a line boundary), '' if there is none."""
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - max_bytes))
            data = handle.read(max_bytes)
    except OSError:
        return ""
    if size > max_bytes and b"\n" in data:
        data = data[data.index(b"\n") + 1:]
    return data.decode("utf-8", errors="replace")


def last_record(path: str | os.PathLike, kind: str, max_bytes: int = 8192) -> dict | None:
    """The newest metrics record of `kind`, from the end of the file only (for the runs table)."""
    import json

    for line in reversed(read_tail(path, max_bytes).splitlines()):
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("kind") == kind:
            return record
    return None
