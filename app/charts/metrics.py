"""A run's metrics as chart data, kept current by reading only what the worker appended.

`RunCharts.update()` asks `core.run.rundir.MetricsReader` for the records written since the last call
(it keeps the byte offset) and appends them to one small long-format DataFrame per chart
(step, value, series). Nothing is re-read: the cost of a tick is the new bytes, not the file.

A resumed run logs again the steps its previous attempt logged past its last checkpoint: the
charts keep the latest value per step (`core.run.records.resume_point`/`value_key`, the rule
`current_records` applies to a whole file): a resume drops the points past the step it resumed
from, and a record of a step seen before replaces that step's points.
"""
from __future__ import annotations

import math
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from core.run.records import (GENERATION_FIELDS, BaselineEvent, CompletionsEvent, ControlEvent, EndEvent, EvalRecord,
    MetricRecord, RunDirError, SetupEvent, TrainRecord, resume_point, value_key)
from core.run.rundir import MetricsReader, RunDir
from core.run.runs import SCORE_LABELS
from core.spec.objectives import ObjectiveSpec

from app.charts.figures import run_spec
from app.i18n import TEXTS, Said
from app.auth.sessions import most_recent

CHARTS = ("loss", "val_loss", "val_ppl", "memory", "tokens_per_s", "lr", "grad_norm", "loss_scale", "answers",
          "reward_accuracy", "reward_margin", "logps", "reward", "reward_functions", "kl", "completions")
# grpo (core.engine.objectives.grpo): the step's rewards and the validation's; each reward function's mean
# (its label: 'exact_match', 'regex'; the validation's 'val exact_match'); the KL and the clipped share.
# "completions" has no points: its revision moves when a newer CompletionsEvent is read (the table)
# preference objectives (core.engine.preference): chart -> the eval record's fields and their series names
_REWARD_SERIES = {"reward_accuracy": (("reward_accuracy", "reward accuracy"),),
                  "reward_margin": (("reward_margin", "reward margin"), ("chosen_reward", "chosen reward"),
                                    ("rejected_reward", "rejected reward")),
                  "logps": (("chosen_logp", "chosen log-prob"), ("rejected_logp", "rejected log-prob"))}
# chart -> (train record field, series name) for the one-line train charts
_TRAIN_SERIES = {"tokens_per_s": ("tokens_per_s", "tokens/s"), "lr": ("lr", "learning rate"),
                 "grad_norm": ("grad_norm", "grad norm"), "loss_scale": ("loss_scale", "loss scale")}
_LOSS_MONITORS = ("val_loss", "val_loss_ema")
_GRPO_TRAIN_SERIES = {"kl": (("kl", "kl"), ("clip_ratio", "clip ratio"))}
_CHARTS_OF = {"train": ("loss", "memory", *_TRAIN_SERIES, "reward", "reward_functions", *_GRPO_TRAIN_SERIES),
              "eval": ("val_loss", "val_ppl", "answers", *_REWARD_SERIES, "reward", "reward_functions")}  # by record kind
# the series of an evaluation in a chart that also draws the steps' (grpo), by their texts' keys
_EVAL_KEYS = ("series.val", "series.best")
PARENT_KEY = "series.parent"  # the series a fork's charts draw from its parent run


def series_name(label: str, **params) -> str:
    """A series named by its text's key ('series.<label>' in app.i18n.TEXTS): a Said, whose English
    is the name in the frame and which the page says in its language by that key
    (app.tabs.monitor_callbacks.series_text); a name no text has (a reward function's label, a
    score's) as it is."""
    key = f"series.{label}"
    return Said(key, **params) if key in TEXTS else label


def series_keys(frame: pd.DataFrame) -> pd.Series:
    """Each row's series by its text's key ('' for a name without one)."""
    return frame["series"].map(lambda name: getattr(name, "key", "")).astype(object)


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
    """Chart data of one run and the latest records the status line needs."""
    path: Path
    workers: int = 1
    reader: MetricsReader = field(init=False)
    frames: dict[str, pd.DataFrame] = field(init=False)
    changed: set[str] = field(default_factory=set)
    last_train: TrainRecord | None = None
    last_eval: EvalRecord | None = None
    setup: SetupEvent | None = None
    end: EndEvent | None = None
    controls: list[ControlEvent] = field(default_factory=list)
    progress: Progress = field(default_factory=Progress)
    generation: int | None = None      # of the newest record read
    seen: set = field(default_factory=set)   # value_key of every train/eval record charted
    completions: CompletionsEvent | None = None  # grpo: the newest evaluation's completions (the Monitor's table)
    spec: ObjectiveSpec = field(init=False)  # the run's objective (core.spec.objectives): what it charts

    parent: tuple[str, int] | None = None  # (run id, step) of a fork's parent, drawn up to that step
    # per chart, a counter that moves whenever its points change: pages that share these charts
    # (SharedCharts) each remember the revisions they were sent
    revision: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CHARTS, 0))
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    drawn: dict = field(default_factory=dict, repr=False, compare=False)  # the pages' drawings (app.tabs.monitor_callbacks)
    read_at: float = 0.0  # time.monotonic() of the pages' last update()

    def __post_init__(self) -> None:
        self.reader = RunDir(self.path).metrics_reader()
        self.spec = run_spec(self.path)
        self.frames = {name: empty_frame() for name in CHARTS}
        self._add_parent()

    def _add_parent(self) -> None:
        """A fork's charts begin with its parent's curves up to the fork step (series '… (parent)'),
        so the new run reads as a continuation. Only a parent with the same owner whose losses are
        comparable (core.spec.objectives) is drawn: an SFT parent's language-model loss is another
        quantity than a DPO fork's preference loss, and one axis would set them side by side."""
        run = RunDir(self.path)
        try:
            status = run.read_status()
        except RunDirError:
            return
        if not status.parent_run or status.parent_step is None:
            return
        parent = RunDir(self.path.parent / status.parent_run)
        try:
            if not parent.exists() or parent.read_status().owner != status.owner:
                return
            if not run_spec(parent.path).comparable(self.spec):
                return
        except RunDirError:
            return
        self.parent = (status.parent_run, status.parent_step)
        rows: dict[str, list[dict]] = {name: [] for name in CHARTS}
        keep = (TrainRecord, EvalRecord)
        for record in parent.metrics_reader().read_new():
            if isinstance(record, keep) and record.step is not None and record.step <= status.parent_step:
                self._add(record, rows)
        # the parent's records set no status of this run
        self.last_train = self.last_eval = None
        self.progress = Progress()
        for name, new in rows.items():
            if new:
                self.frames[name] = pd.DataFrame([{**row, "series": series_name("parent", name=row["series"])}
                                                  for row in new])

    def update(self) -> set[str]:
        """Read the new records; returns the charts that changed (also kept in `changed`)."""
        records = self.reader.read_new()
        rows: dict[str, list[dict]] = {name: [] for name in CHARTS}
        fresh: set[str] = set()
        for record in records:
            point, key = resume_point(record), value_key(record)
            if point is not None and self.seen:
                fresh |= self._flush(rows) | self._cut(point)
            elif key is not None and key in self.seen:
                fresh |= self._flush(rows) | self._drop(key)
            if key is not None:
                self.seen.add(key)
            if record.generation is not None:
                self.generation = record.generation
            self._add(record, rows)
        fresh |= self._flush(rows)
        self.changed |= fresh
        for name in fresh:
            self.revision[name] += 1
        return fresh

    def _flush(self, rows: dict[str, list[dict]]) -> set[str]:
        """Pending rows into the frames (emptied); the charts that got points."""
        fresh = {name for name, new in rows.items() if new}
        for name in fresh:
            self.frames[name] = pd.concat([self.frames[name], pd.DataFrame(rows[name])], ignore_index=True)
            rows[name] = []
        return fresh

    def _cut(self, step: int) -> set[str]:
        """A new attempt resumed from `step`: what the earlier one logged after it is superseded."""
        self.seen = {key for key in self.seen if key[2] <= step}
        self.progress = Progress()  # the new process compiles again; its step times are its own
        self.end = None
        if self.last_train is not None and self.last_train.step > step:
            self.last_train = None
        if self.last_eval is not None and (self.last_eval.step or 0) > step:
            self.last_eval = None
        dropped = set()
        if self.completions is not None and (self.completions.step or 0) > step:
            self.completions, dropped = None, {"completions"}
        return self._keep(lambda frame: frame["step"] <= step, CHARTS) | dropped

    def _drop(self, key: tuple[str, bool, int]) -> set[str]:
        """A later value of a step seen before: that step's points of its kind go (the new ones follow)."""
        self.seen.discard(key)
        mixed = set(_CHARTS_OF["train"]) & set(_CHARTS_OF["eval"])  # a step's train and eval points in one chart
        evaluation = key[0] == "eval"
        kept = self._keep(lambda frame: frame["step"] != key[2], [c for c in _CHARTS_OF[key[0]] if c not in mixed])
        return kept | self._keep(lambda frame: (frame["step"] != key[2])
                                 | (series_keys(frame).str.startswith(_EVAL_KEYS) != evaluation),
                                 [c for c in _CHARTS_OF[key[0]] if c in mixed])

    def _keep(self, which, charts) -> set[str]:
        changed = set()
        for name in charts:
            frame = self.frames[name]
            keep = which(frame) | (series_keys(frame) == PARENT_KEY)  # a fork's parent curve stays
            if not keep.all():
                self.frames[name] = frame[keep].reset_index(drop=True)
                changed.add(name)
        return changed

    def take_changed(self) -> set[str]:
        """The charts changed since the last call (each is sent to the browser once)."""
        changed, self.changed = self.changed, set()
        return changed

    def _add(self, record: MetricRecord, rows: dict[str, list[dict]]) -> None:
        if record.step is None:
            return
        if isinstance(record, TrainRecord):
            self._add_train(record, rows)
        elif isinstance(record, EvalRecord):
            self._add_eval(record, rows)
        elif isinstance(record, SetupEvent):
            self.setup = record
        elif isinstance(record, BaselineEvent):
            self._add_scores(record, rows)  # the model before training: the answers chart's first points
        elif isinstance(record, EndEvent):
            self.end = record
        elif isinstance(record, CompletionsEvent):
            self.completions = record
            rows["completions"].append({"step": record.step, "value": float(len(record.samples)), "series": ""})
        elif isinstance(record, ControlEvent):
            self.controls.append(record)

    def _add_train(self, record: TrainRecord, rows: dict[str, list[dict]]) -> None:
        self.last_train, step = record, record.step
        if _finite(record.time):
            self.progress.add(step, record.time)
        for name, series in (("loss", "loss"), ("loss_ema", "loss EMA")):
            if _finite(getattr(record, name)):
                rows["loss"].append({"step": step, "value": getattr(record, name), "series": series_name(series)})
        if record.peak_mem_ranks_mb:  # GPU/Ascend: the largest device's peak, each rank's on hover
            rows["memory"].append({"step": step, "value": record.peak_mem_mb,
                                   "series": series_name("peak MB, largest device")})
            for rank, value in enumerate(record.peak_mem_ranks_mb):
                rows["memory"].append({"step": step, "value": value, "series": series_name("rank", n=rank)})
        elif _finite(record.peak_mem_mb):
            rows["memory"].append({"step": step, "value": record.peak_mem_mb / max(self.workers, 1),
                                   "series": series_name("peak MB per worker")})
        for chart, (name, series) in _TRAIN_SERIES.items():
            if _finite(getattr(record, name)):
                rows[chart].append({"step": step, "value": getattr(record, name), "series": series_name(series)})
        self._add_rewards(step, record.reward, record.rewards, "", rows)
        for chart, fields in _GRPO_TRAIN_SERIES.items():
            for name, series in fields:
                if _finite(getattr(record, name)):
                    rows[chart].append({"step": step, "value": getattr(record, name), "series": series_name(series)})

    @staticmethod
    def _add_rewards(step: int, total, each: dict | None, prefix: str, rows: dict[str, list[dict]]) -> None:
        """grpo: the mean total reward ('reward', 'val reward') and each function's mean (its label,
        'val <label>') of a step or an evaluation."""
        if _finite(total):
            rows["reward"].append({"step": step, "value": total, "series": series_name(f"{prefix}reward")})
        for label, value in (each or {}).items():
            if _finite(value):
                rows["reward_functions"].append({"step": step, "value": value,
                                                 "series": series_name("val", name=label) if prefix else label})

    def _add_eval(self, record: EvalRecord, rows: dict[str, list[dict]]) -> None:
        self.last_eval, step = record, record.step
        for chart, names in (("val_loss", ("val_loss", "val_loss_ema")), ("val_ppl", ("val_ppl", "val_ppl_ema"))):
            if chart == "val_ppl" and not self.spec.has_perplexity:  # a preference loss is no language-model loss
                continue
            for name in names:
                if _finite(getattr(record, name)):
                    label = name.replace("_ema", " EMA").replace("_", " ")
                    rows[chart].append({"step": step, "value": getattr(record, name), "series": series_name(label)})
        self._add_scores(record, rows)
        self._add_rewards(step, record.val_reward, record.val_rewards, "val ", rows)
        for chart, fields in _REWARD_SERIES.items():
            for name, label in fields:
                if _finite(getattr(record, name)):
                    rows[chart].append({"step": step, "value": getattr(record, name), "series": series_name(label)})
        if _finite(record.best_value) and record.monitor:
            scale = 100 if record.monitor in GENERATION_FIELDS else 1
            chart = ("answers" if scale == 100 else "val_loss" if record.monitor in _LOSS_MONITORS else
                     "reward_accuracy" if record.monitor == "reward_accuracy" else
                    "reward" if record.monitor == "val_reward" else "val_ppl")
            rows[chart].append({"step": step, "value": scale * record.best_value,
                                "series": series_name("best", monitor=record.monitor)})

    @staticmethod
    def _add_scores(record: EvalRecord | BaselineEvent, rows: dict[str, list[dict]]) -> None:
        """Exact match, BLEU and ROUGE of an evaluation that scored the test answers, x100."""
        for name in GENERATION_FIELDS:
            if _finite(getattr(record, name)):
                rows["answers"].append({"step": record.step, "value": 100 * getattr(record, name),
                                        "series": SCORE_LABELS[name]})


class SharedCharts:
    """The live charts of one console: one `RunCharts` per run folder, shared by every page that
    shows the run (each page remembers the `revision`s it was sent). With a RunCharts per page, ten
    pages on one run held ten copies of its points and rebuilt and redrew each chart ten times per
    new point; that churn of ever-larger arrays grew the console's memory by megabytes a minute
    (bench/soak.py). The `max_runs` runs used last are kept; a page keeps its own reference."""

    def __init__(self, max_runs: int = 16):
        self.max_runs = max_runs
        self._charts: OrderedDict[str, RunCharts] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, path: Path, workers: int = 1) -> RunCharts:
        key = os.path.realpath(path)
        with self._lock:
            return most_recent(self._charts, key, lambda: RunCharts(Path(path), workers=workers), self.max_runs)

    def __len__(self) -> int:
        return len(self._charts)
