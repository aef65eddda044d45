"""The run directory: the only channel between the console and a training worker.

    runs/<run-id>/
      config.yaml     resolved config, written before launch
      status.json     a `Status`: state, processes, progress, best so far, final figures
      metrics.jsonl   one record per line (`TrainRecord`, `EvalRecord`, events), appended by rank 0
      control.json    a `ControlRequest` from the console (stop, early-stopping overrides, seq)
      train.log       stdout/stderr of the worker(s)
      checkpoints/    step-<N>/, best -> step-<N>, last -> step-<N>
      export/         <which>-step-<N>-<format>/ and .zip
      logs/           worker_<rank>.log: msrun's log of each worker of a data-parallel run
      ranks/          the rank supervisors' records, heartbeats and claims (core.run.ranks)
      profile/        MindSpore's profiler output (train.profile_steps) and summary.json, a `ProfileSummary`

Every record is a typed dataclass defined here, which the worker writes and the console reads;
`RunDir` owns every file name and the checkpoint pointers.

Whole files are written atomically (temp file, fsync, rename, fsync the folder), so a reader never
sees half a status; status and control updates are read-merge-write under a lock on `.lock`, so
the console and the worker never lose each other's fields. Metrics are read incrementally by byte
offset. Imports nothing else from `core` but the stdlib-only `core.run.atomic` and `core.spec.config`
(whose early-stopping fields are what a control request may change, checked by the config's rules).
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import fcntl
import functools
import json
import math
import os
import re
import time
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Iterable, Iterator, Mapping, Self

from core.run.atomic import atomic_write
from core.spec.config import ConfigError, EarlyStoppingSettings

__all__ = [
    "RunDirError", "STATES", "TERMINAL_STATES", "can_transition", "FAILURE_KINDS", "STOP_REQUESTS",
    "Record", "Status", "ClusterJob", "SLURM_ACTIVE_STATES", "BestSoFar", "GenerationFigures", "GENERATION_FIELDS",
    "SCORE_LABELS", "FinalFigures", "Attempt", "ControlRequest",
    "MetricRecord", "TrainRecord", "ValidationFigures", "EvalRecord", "EventRecord", "SetupEvent",
    "BaselineEvent", "TrackerEvent", "ResumeEvent", "ForkEvent", "ControlEvent", "EndEvent", "METRIC_KINDS", "EVENT_KINDS",
    "ProfiledOperator", "ProfileSummary",
    "parse_metric", "resume_point", "current_records", "atomic_write_json", "POINTERS", "STEP_FOLDER", "parse_step_folder", "step_folder_name", "checkpoint_folders", "RunDir", "MetricsReader", "ControlPoller", "RunSummary",
    "make_run_id", "display_name", "next_free_run_id", "list_runs", "resolve_inside",
]


class RunDirError(ValueError):
    """A run directory that cannot be read or changed as asked; the message names the file."""


# ---- states --------------------------------------------------------------------------------

STATES = ("queued", "starting", "running", "stopping",
          "finished", "early_stopped", "stopped", "failed")
TERMINAL_STATES = frozenset({"finished", "early_stopped", "stopped", "failed"})
_NEXT_STATES: dict[str, frozenset[str]] = {
    "queued": frozenset({"starting", "stopped", "failed"}),
    "starting": frozenset({"running", "stopping", "stopped", "failed"}),
    "running": frozenset({"stopping"}) | TERMINAL_STATES,
    "stopping": TERMINAL_STATES,
    **{state: frozenset() for state in TERMINAL_STATES},
}


def can_transition(old: str | None, new: str) -> bool:
    """Whether a status may go from `old` to `new`; rewriting the same state is always allowed."""
    return new in STATES and (old == new or new in _NEXT_STATES.get(old, frozenset()))


def _transition_error(path: Path, old: str | None, new: str) -> RunDirError:
    if new not in STATES:
        return RunDirError(f"{path}: unknown state {new!r}; valid states: {', '.join(STATES)}")
    if old in TERMINAL_STATES:
        return RunDirError(f"{path}: cannot change state from {old!r} to {new!r}: the run is over; "
                           "use RunDir.restart_for_resume() to start a new attempt")
    allowed = ", ".join(sorted(_NEXT_STATES.get(old, ()))) or "none"
    return RunDirError(f"{path}: cannot change state from {old!r} to {new!r}; "
                       f"allowed next states: {allowed}")


# ---- typed records -----------------------------------------------------------------------------
#
# Every record in the run directory is one frozen dataclass below: status.json is a `Status`,
# control.json a `ControlRequest`, each line of metrics.jsonl a `TrainRecord`, an `EvalRecord` or
# an event (`SetupEvent`, `EndEvent`, ...), profile/summary.json a `ProfileSummary`. Both the
# worker and the console use them, so a field is named once. Reading tolerates other versions: a
# key this code does not know (a newer writer's) is kept in `extra` and written back unchanged, a
# missing key (an older run) reads as the field's default, and so does a value of the wrong type.
# Building a record checks each value's type.
# To add a field: one line in the dataclass, with a default (None for "not written by older runs").

_INVALID = object()


def _plain(value: Any) -> Any:
    """NumPy / MindSpore scalars as Python numbers; everything else as it is."""
    if hasattr(value, "item") and not isinstance(value, (list, dict, str, bytes)):
        with contextlib.suppress(TypeError, ValueError):
            return value.item()
    return value


def _decode(value: Any, hint: Any, reading: bool = False) -> Any:
    """`value` as the field type `hint` wants, or _INVALID. Ints widen to floats and integral
    floats narrow to ints; when `reading` a file, a mapping becomes its Record and list items (and
    dict values) of the wrong type are left out (a writer must pass records and right lists)."""
    value = _plain(value)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        if value is None and type(None) in typing.get_args(hint):
            return None
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    origin = typing.get_origin(hint) or hint
    if hint is Any:
        return value
    if isinstance(hint, type) and issubclass(hint, Record):
        if isinstance(value, hint):
            return value
        return hint.from_json(value) if reading and isinstance(value, Mapping) else _INVALID
    if origin is list:
        if not isinstance(value, (list, tuple)):
            return _INVALID
        item = (typing.get_args(hint) or (Any,))[0]
        items = [_decode(x, item, reading) for x in value]
        if not reading and any(v is _INVALID for v in items):
            return _INVALID
        return [v for v in items if v is not _INVALID]
    if origin is dict:
        if not isinstance(value, Mapping):
            return _INVALID
        item = (typing.get_args(hint) or (str, Any))[1]
        items = {k: _decode(v, item, reading) for k, v in value.items()}
        if not reading and any(v is _INVALID for v in items.values()):
            return _INVALID
        return {k: v for k, v in items.items() if v is not _INVALID}
    if isinstance(value, bool) or hint is bool:
        return value if isinstance(value, bool) and hint is bool else _INVALID
    if hint is int:
        integral = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
        return int(value) if integral else _INVALID
    if hint is float:
        return float(value) if isinstance(value, (int, float)) else _INVALID
    return value if isinstance(value, hint) else _INVALID


def _encode(value: Any) -> Any:
    if isinstance(value, Record):
        return value.to_json()
    if isinstance(value, list):
        return [_encode(v) for v in value]
    return _plain(value)


@functools.cache
def _record_fields(cls: type) -> dict[str, Any]:
    """A record class's fields -> resolved type hints (cached: resolving them is slow)."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls) if f.name != "extra"}


@dataclass(frozen=True, kw_only=True)
class Record:
    """Base of every run-directory record: typed fields, JSON in and out, unknown keys kept."""
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for name, hint in _record_fields(type(self)).items():
            value = _decode(getattr(self, name), hint)
            if value is _INVALID:
                raise RunDirError(f"{type(self).__name__}.{name} = {getattr(self, name)!r}: must be "
                                  f"{_type_text(hint)}")
            object.__setattr__(self, name, value)

    def to_json(self) -> dict[str, Any]:
        """The record as a JSON object; keys from `extra` first, so a known field always wins."""
        return {**self.extra, **{name: _encode(value) for name, value in self.values().items()}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        known = _record_fields(cls)
        values, extra = {}, {}
        for key, value in data.items():
            if key not in known:
                extra[key] = value
            elif (decoded := _decode(value, known[key], reading=True)) is not _INVALID:
                values[key] = decoded
        return cls(**values, extra=extra)

    def values(self) -> dict[str, Any]:
        """The fields' values by name (nested records as records, `extra` left out)."""
        return {name: getattr(self, name) for name in _record_fields(type(self))}

    def replace(self, **changes: Any) -> Self:
        """A copy with `changes`; an unknown field name is an error that lists the valid ones."""
        unknown = sorted(set(changes) - set(_record_fields(type(self))) - {"extra"})
        if unknown:
            raise RunDirError(f"{type(self).__name__} has no field {', '.join(unknown)}; valid fields: "
                              f"{', '.join(_record_fields(type(self)))}")
        return dataclasses.replace(self, **changes)


def _type_text(hint: Any) -> str:
    """'FinalFigures | None', 'list[int]', 'float'."""
    text = str(hint) if typing.get_args(hint) else getattr(hint, "__name__", str(hint))
    return re.sub(r"\b(?:[A-Za-z_]\w*\.)+(\w+)", r"\1", text)


# -- status.json --

@dataclass(frozen=True, kw_only=True)
class BestSoFar(Record):
    """The best evaluation so far: the monitored metric's value and step, and its perplexity."""
    metric: str | None = None
    value: float | None = None
    step: int | None = None
    val_ppl: float | None = None
    reward_accuracy: float | None = None


@dataclass(frozen=True, kw_only=True)
class GenerationFigures(Record):
    """Scores of the greedy answers to the test prompts against their references, each a share in
    [0, 1] (core.eval.generation_metrics): exact match, corpus BLEU-4 (sacrebleu), mean ROUGE-1/2/L F1
    (rouge-score), on words or, for Chinese/Japanese references, characters (`segmentation`)."""
    exact_match: float | None = None
    bleu: float | None = None
    rouge1: float | None = None
    rouge2: float | None = None
    rougeL: float | None = None  # noqa: N815 — rouge-score's name
    segmentation: str | None = None      # "words", "characters" or "words+characters"


GENERATION_FIELDS = ("exact_match", "bleu", "rouge1", "rouge2", "rougeL")


@dataclass(frozen=True, kw_only=True)
class FinalFigures(GenerationFigures):
    """What a run came to (status.json's `final`, and the `end` event); the generation figures are
    the best checkpoint's, `monitor` the metric early stopping watched."""
    best_val_ppl: float | None = None
    monitor: str | None = None
    reward_accuracy: float | None = None  # preference objectives: at the best evaluation
    tokens_per_s: float | None = None
    peak_mem_mb: float | None = None
    wall_s: float | None = None
    steps: int | None = None
    overflow_steps: int | None = None
    tokens_seen: int | None = None


@dataclass(frozen=True, kw_only=True)
class Attempt(Record):
    """An earlier attempt of a resumed run (status.json's `history`)."""
    state: str | None = None
    reason: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    step: int | None = None


# status.failure_kind, when the worker, a rank supervisor (core.run.ranks) or the launcher knew
FAILURE_KINDS = ("data", "config", "nonfinite", "oom", "crash", "disk_full", "checkpoint", "loss_scale", "hang",
                 "rank_died", "cluster")  # cluster: the scheduler ended the job (time limit, node failure; core.run.slurm)


# cluster job states as Slurm reports them (squeue/scontrol/sacct), for Status.cluster.state
SLURM_ACTIVE_STATES = ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING")


@dataclass(frozen=True, kw_only=True)
class ClusterJob(Record):
    """status.json's `cluster`: the scheduler job a cluster run is (None for a local run).
    `state` and `reason` are the scheduler's words (Slurm: PENDING / Resources, RUNNING, CANCELLED,
    TIMEOUT, NODE_FAIL, OUT_OF_MEMORY, ...); `script` is the batch script's file name in the run folder."""
    backend: str = "slurm"
    job_id: str | None = None
    state: str | None = None
    reason: str | None = None
    nodes: list[str] = field(default_factory=list)
    partition: str | None = None
    submitted_at: float | None = None
    script: str | None = None
    exit_code: str | None = None         # Slurm's ExitCode, e.g. "0:0" or "1:0"
    checked_at: float | None = None      # when the scheduler was last asked


@dataclass(frozen=True, kw_only=True)
class Status(Record):
    """status.json: where a run is (`state`, one of STATES), its processes, progress and results.
    Times are epoch seconds."""
    run_id: str | None = None
    state: str | None = None
    attempt: int = 1
    created_at: float | None = None
    updated_at: float | None = None
    started_at: float | None = None
    ended_at: float | None = None
    reason: str | None = None
    failure_kind: str | None = None      # one of FAILURE_KINDS, written by the worker
    error_lines: list[str] = field(default_factory=list)   # from train.log, when the console found a crash
    pid: int | None = None
    pgid: int | None = None
    create_time: float | None = None     # the worker process's, so a reused pid is not mistaken for it
    hostname: str | None = None
    command: list[str] = field(default_factory=list)
    data_parallel: int | None = None
    rank_count: int | None = None
    worker_pids: list[int] = field(default_factory=list)
    step: int | None = None
    total_steps: int | None = None
    best: BestSoFar | None = None
    final: FinalFigures | None = None
    history: list[Attempt] = field(default_factory=list)
    owner: str | None = None             # the console user who started it (None: started from a shell)
    failed_rank: int | None = None       # the data-parallel rank a failure is blamed on
    exit_signal: str | None = None       # how that worker ended, e.g. "SIGKILL" (core.run.ranks)
    exit_code: int | None = None
    resumable_checkpoint: str | None = None  # the checkpoint folder a resume would start from, when it ended
    # the console's job queue: the order among queued runs (smaller first), and where a run runs
    queue_position: float | None = None
    device: str | None = None            # "cpu", "gpu" or "ascend" (parallel.device)
    device_ids: list[int] = field(default_factory=list)   # GPU/Ascend ids the console gave the run
    # a fork: the run and checkpoint step this run started from (its curve continues the parent's)
    parent_run: str | None = None
    parent_step: int | None = None
    # a cluster run: its scheduler job (core.run.slurm); None for a run on this machine
    cluster: ClusterJob | None = None


# -- control.json --

STOP_REQUESTS = ("graceful", "now")


@dataclass(frozen=True, kw_only=True)
class ControlRequest(Record):
    """control.json: the console's requests. `stop` is None, 'graceful' or 'now'; `early_stopping`
    holds overrides of some `early_stopping` config fields; `seq` grows with every request, so the
    worker applies each one once."""
    stop: str | None = None
    early_stopping: dict[str, Any] | None = None
    seq: int = 0
    requested_at: float | None = None

    def early_stopping_over(self, settings: EarlyStoppingSettings) -> EarlyStoppingSettings:
        """`settings` with this request's overrides on top, checked by the config's own rules
        (raises ConfigError naming the field)."""
        overrides = {k: v for k, v in (self.early_stopping or {}).items() if v is not None}
        return EarlyStoppingSettings.from_dict({**settings.to_dict(), **overrides})


# -- metrics.jsonl --

METRIC_KINDS: dict[str, type[MetricRecord]] = {}   # "train" -> TrainRecord, ... (filled by subclassing)
EVENT_KINDS: dict[str, type[EventRecord]] = {}     # "setup" -> SetupEvent, ...


@dataclass(frozen=True, kw_only=True)
class MetricRecord(Record):
    """One line of metrics.jsonl. A subclass with its own `kind` is what `parse_metric` makes of
    lines of that kind; a line of an unknown kind reads as this class (its kind kept in `extra`)."""
    kind: ClassVar[str] = ""
    step: int | None = None
    time: float | None = None
    generation: int | None = None        # the attempt that wrote it (status.json's `attempt`: 1, 2 after a resume)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "kind" in cls.__dict__:
            METRIC_KINDS[cls.kind] = cls

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, **super().to_json()} if self.kind else super().to_json()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        return super().from_json({k: v for k, v in data.items() if k != "kind" or not cls.kind})


@dataclass(frozen=True, kw_only=True)
class TrainRecord(MetricRecord):
    """A training step's figures, every `train.log_every` steps (times and rates over the window)."""
    kind: ClassVar[str] = "train"
    loss: float | None = None
    loss_ema: float | None = None
    lr: float | None = None
    grad_norm: float | None = None
    loss_scale: float | None = None
    tokens_per_s: float | None = None
    step_time_s: float | None = None
    peak_mem_mb: float | None = None     # CPU: summed over the workers; GPU/Ascend: the largest device's
    peak_mem_ranks_mb: list[float] | None = None  # GPU/Ascend with several ranks: each rank's peak
    overflow_steps: int | None = None
    epoch: int | None = None
    total_steps: int | None = None
    aux_loss: float | None = None        # a mixture of experts' router load-balancing loss, when trained with it


@dataclass(frozen=True, kw_only=True)
class ValidationFigures(Record):
    """One pass over the validation set (EMA over the evaluations so far)."""
    val_loss: float | None = None
    val_ppl: float | None = None
    val_loss_ema: float | None = None
    val_ppl_ema: float | None = None
    val_tokens: int | None = None
    # preference objectives (core.engine.preference.summarize) on the validation pairs; val_loss is the
    # objective's loss there, val_ppl the perplexity of the chosen answers
    reward_accuracy: float | None = None
    reward_margin: float | None = None
    chosen_logp: float | None = None
    rejected_logp: float | None = None
    chosen_reward: float | None = None
    rejected_reward: float | None = None


@dataclass(frozen=True, kw_only=True)
class EvalRecord(MetricRecord, ValidationFigures, GenerationFigures):
    """An evaluation and where early stopping stands after it (`base`: the model before training);
    the generation figures when this evaluation scored the test answers (eval.downstream_every_eval,
    or early stopping watching one of them)."""
    kind: ClassVar[str] = "eval"
    base: bool = False
    best_value: float | None = None
    best_step: int | None = None
    monitor: str | None = None
    patience_left: int | None = None
    early_stopping_enabled: bool | None = None


@dataclass(frozen=True, kw_only=True)
class EventRecord(MetricRecord):
    """Something that happened, in words (`message`) and, in the subclass for its `event`, in fields.
    A subclass that sets its own `event` default registers that event name."""
    kind: ClassVar[str] = "event"
    event: str = "info"
    message: str = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if isinstance(cls.__dict__.get("event"), str):
            EVENT_KINDS[cls.__dict__["event"]] = cls


@dataclass(frozen=True, kw_only=True)
class SetupEvent(EventRecord):
    """The worker is set up: batch, steps, sizes, the data's statistics, which kernels run."""
    event: str = "setup"
    global_batch_size: int | None = None
    total_steps: int | None = None
    trainable_params: int | None = None
    total_params: int | None = None
    seq_len: int | None = None
    data: dict[str, Any] | None = None   # core.data.pipeline's DataStats.to_dict()
    lora_modules: int | None = None
    layer_graphs: int | None = None
    kernels: str | None = None           # "fused", or "composed: <why>"
    frozen_weights: str | None = None    # LoRA with 16-bit frozen base weights: their dtype and upcast path
    setup_s: float | None = None


@dataclass(frozen=True, kw_only=True)
class BaselineEvent(EventRecord, ValidationFigures, GenerationFigures):
    """The base model's validation figures and answer scores, before training."""
    event: str = "baseline"


@dataclass(frozen=True, kw_only=True)
class TrackerEvent(EventRecord):
    """An experiment tracker (core.run.tracking) could not start or stopped working; the run goes on
    without it. `setting` names what to change (`tracking`, `mlflow.tracking_uri`, ...)."""
    event: str = "tracker"
    tracker: str | None = None
    setting: str | None = None


@dataclass(frozen=True, kw_only=True)
class ResumeEvent(EventRecord):
    event: str = "resume"
    source: str | None = None            # the checkpoint resumed from


@dataclass(frozen=True, kw_only=True)
class ForkEvent(EventRecord):
    """A new run started from another run's checkpoint (`run.fork_from`): what it took over."""
    event: str = "fork"
    source: str | None = None            # the checkpoint folder
    parent_run: str | None = None
    parent_step: int | None = None
    optimizer_state: bool | None = None  # AdamW moments (and the loss scale) taken over
    data_position: bool | None = None    # the data order carried on (same data and batch settings)


@dataclass(frozen=True, kw_only=True)
class ControlEvent(EventRecord):
    """The worker applied a control request: the early-stopping settings now in force."""
    event: str = "control"
    early_stopping: dict[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class EndEvent(EventRecord, FinalFigures):
    """The run ended (state and reason in `message`, figures as in status.json's `final`)."""
    event: str = "end"


def parse_metric(data: Mapping[str, Any]) -> MetricRecord:
    """One metrics.jsonl object as its record class (by `kind`, and `event` for events)."""
    kind = data.get("kind")
    if kind == EventRecord.kind:
        return EVENT_KINDS.get(data.get("event"), EventRecord).from_json(data)
    return METRIC_KINDS.get(kind, MetricRecord).from_json(data)


# -- profile/summary.json --

@dataclass(frozen=True, kw_only=True)
class ProfiledOperator(Record):
    """One operator type of a profile in one phase, over the profiled steps."""
    op_type: str = ""
    phase: str = ""                      # core.engine.profiling's BACKWARD or FORWARD
    ms: float = 0.0
    share: float = 0.0                   # of the kernels' total time
    calls: int = 0


@dataclass(frozen=True, kw_only=True)
class ProfileSummary(Record):
    """profile/summary.json (train.profile_steps), written by core.engine.profiling on rank 0 and shown
    by the Monitor: the steps profiled ([first, last]), the kernels' time in all and by phase, the
    operators that took most of it, and the files MindSpore wrote (relative to profile/)."""
    steps: list[int] = field(default_factory=list)
    total_ms: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)
    top: list[ProfiledOperator] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    note: str = ""


# ---- JSON files ----------------------------------------------------------------------------

def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    """`obj` as indented JSON, written atomically (NumPy scalars and paths are converted)."""
    atomic_write(path, json.dumps(obj, indent=2, default=_json_default) + "\n")


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):  # NumPy / MindSpore scalars
        return value.item()
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


LOCK_WAIT_S = 5.0  # a holder that keeps the lock this long is frozen (SIGSTOP) or hung: go on without it


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """An exclusive lock on the run folder for one read-merge-write, across processes. A holder
    never keeps it more than a few milliseconds; one that keeps it LOCK_WAIT_S was stopped or hung
    while writing (a frozen worker must not freeze the console and the watcher with it), so the
    write goes ahead unlocked."""
    try:
        fd = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    except FileNotFoundError:
        raise RunDirError(f"{folder}: run directory does not exist") from None
    try:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    break
                time.sleep(0.005)
            except OSError:  # a filesystem without flock: go on unlocked
                break
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _read_json_object(path: Path, what: str) -> dict:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RunDirError(f"{path}: no {what} file") from None
    except OSError as err:
        raise RunDirError(f"{path}: cannot read {what} ({err.strerror or err})") from None
    try:
        data = json.loads(text)
    except ValueError as err:
        raise RunDirError(f"{path}: {what} is not valid JSON ({err})") from None
    if not isinstance(data, dict):
        raise RunDirError(f"{path}: {what} must be a JSON object, not {type(data).__name__}")
    return data


# ---- the run directory ---------------------------------------------------------------------------

_CONTROL_KEYS = ("stop", "early_stopping")
_RUN_ID = re.compile(r"[A-Za-z0-9._-]+")
POINTERS = ("best", "last")
# a checkpoint folder: `step-N`, or `step-N-rK` (revision K >= 2) when step N was saved again
STEP_FOLDER = re.compile(r"step-(\d+)(?:-r(\d+))?")


def parse_step_folder(name: str) -> tuple[int, int] | None:
    """'step-8' -> (8, 1), 'step-8-r3' -> (8, 3), anything else -> None."""
    match = STEP_FOLDER.fullmatch(name)
    return (int(match.group(1)), int(match.group(2) or 1)) if match else None


def step_folder_name(step: int, revision: int = 1) -> str:
    """(8, 1) -> 'step-8', (8, 3) -> 'step-8-r3': what `parse_step_folder` reads."""
    return f"step-{step}" if revision == 1 else f"step-{step}-r{revision}"


def checkpoint_folders(checkpoints_dir: str | os.PathLike) -> dict[int, list[Path]]:
    """Each saved step's folders in a checkpoints folder, steps in order, oldest revision first."""
    found: dict[int, list[tuple[int, Path]]] = {}
    try:
        entries = list(os.scandir(checkpoints_dir))
    except (FileNotFoundError, NotADirectoryError):
        return {}
    for entry in entries:
        parsed = parse_step_folder(entry.name)
        if parsed and entry.is_dir(follow_symlinks=False):
            found.setdefault(parsed[0], []).append((parsed[1], Path(entry.path)))
    return {step: [p for _, p in sorted(revs)] for step, revs in sorted(found.items())}


LOG_TAIL_BYTES = 16 * 1024


class RunDir:
    """One run's folder: typed readers and writers for the files of the contract, and every
    file name in it."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    def __fspath__(self) -> str:
        return str(self.path)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RunDir) and self.path == other.path

    def __hash__(self) -> int:
        return hash(self.path)

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def config_path(self) -> Path:
        return self.path / "config.yaml"

    @property
    def status_path(self) -> Path:
        return self.path / "status.json"

    @property
    def metrics_path(self) -> Path:
        return self.path / "metrics.jsonl"

    @property
    def control_path(self) -> Path:
        return self.path / "control.json"

    @property
    def log_path(self) -> Path:
        return self.path / "train.log"

    @property
    def checkpoints_dir(self) -> Path:
        return self.path / "checkpoints"

    @property
    def export_dir(self) -> Path:
        return self.path / "export"

    @property
    def logs_dir(self) -> Path:
        """Per-worker logs that msrun writes for a data-parallel run."""
        return self.path / "logs"

    def worker_log(self, rank: int) -> Path:
        """msrun's log of data-parallel worker `rank`."""
        return self.logs_dir / f"worker_{rank}.log"

    @property
    def sbatch_script(self) -> Path:
        """The Slurm batch script a cluster run was submitted with (core.run.slurm writes it)."""
        return self.path / "job.sbatch"

    @property
    def slurm_output(self) -> Path:
        """Slurm's own output file of the batch job (srun's and the node entries' lines)."""
        return self.path / "slurm.out"

    @property
    def ranks_dir(self) -> Path:
        """The rank supervisors' records, heartbeats and claims (core.run.ranks names the files)."""
        return self.path / "ranks"

    @property
    def tracking_dir(self) -> Path:
        """What the experiment trackers keep in the run (core.run.tracking): TensorBoard event files,
        SwanLab's offline log, the MLflow run id a resumed run continues."""
        return self.path / "tracking"

    @property
    def profile_dir(self) -> Path:
        """MindSpore's profiler output for `train.profile_steps`, and the summary."""
        return self.path / "profile"

    @property
    def profile_summary_path(self) -> Path:
        return self.profile_dir / "summary.json"

    def exists(self) -> bool:
        """Whether this is a run folder (it has a status.json)."""
        return self.status_path.is_file()

    # -- checkpoints and exports --

    def checkpoint(self, which: str | int) -> Path:
        """`checkpoints/best` or `checkpoints/last` (the pointers), or step N's folder: its newest
        revision (`step-N-rK` when step N was saved again), `checkpoints/step-<N>` when none exists."""
        if isinstance(which, int) and not isinstance(which, bool):
            folders = self._checkpoint_folders().get(which)
            return folders[-1] if folders else self.checkpoints_dir / step_folder_name(which)
        if which not in POINTERS:
            raise RunDirError(f"{self.checkpoints_dir}: no checkpoint {which!r}; use "
                              f"{' or '.join(POINTERS)} or a step number")
        return self.checkpoints_dir / which

    def checkpoint_step(self, which: str) -> int | None:
        """N of `checkpoints/<which> -> step-N`, or None when there is no such checkpoint (no
        pointer, or one whose step folder is gone)."""
        pointer = self.checkpoint(which)
        try:
            target = os.readlink(pointer) if pointer.is_symlink() else pointer.resolve().name
        except OSError:
            return None
        parsed = parse_step_folder(Path(target).name)
        return parsed[0] if parsed and pointer.is_dir() else None

    def checkpoint_steps(self) -> list[int]:
        """The steps of the checkpoints kept (`step-<N>` / `step-<N>-r<K>` folders), oldest first."""
        return list(self._checkpoint_folders())

    def _checkpoint_folders(self) -> dict[int, list[Path]]:
        try:
            return checkpoint_folders(self.checkpoints_dir)
        except OSError:  # an unreadable folder: no checkpoints to show
            return {}

    def export_path(self, which: str, step: int, fmt: str) -> Path:
        """Where the `fmt` export of `which` (at `step`) goes: `export/<which>-step-<N>-<fmt>/`."""
        return self.export_dir / f"{which}-step-{step}-{fmt}"

    def export_zip(self, which: str, step: int, fmt: str) -> Path:
        """The download of that export: `export/<which>-step-<N>-<fmt>.zip`."""
        return self.export_dir / f"{which}-step-{step}-{fmt}.zip"

    # -- creation --

    @classmethod
    def create(cls, runs_dir: str | os.PathLike, run_id: str, config_yaml: str) -> RunDir:
        """Make runs_dir/run_id with its config and status `queued`; refuses a non-empty folder."""
        if not _RUN_ID.fullmatch(run_id) or run_id in (".", ".."):
            raise RunDirError(f"run id {run_id!r} may only use letters, digits, '.', '_' and '-'")
        run = cls(Path(runs_dir) / run_id)
        run.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            run.path.mkdir()
        except FileExistsError:
            if run.path.is_symlink() or not run.path.is_dir() or any(run.path.iterdir()):
                raise RunDirError(f"{run.path}: already exists and is not an empty folder; "
                                  "choose another run id") from None
        run.checkpoints_dir.mkdir()
        run.export_dir.mkdir()
        atomic_write(run.config_path, config_yaml)
        atomic_write_json(run.control_path, ControlRequest().to_json())
        now = time.time()
        status = Status(run_id=run_id, state="queued", created_at=now, updated_at=now)
        atomic_write_json(run.status_path, status.to_json())
        return run

    # -- status --

    def read_status(self) -> Status:
        return Status.from_json(_read_json_object(self.status_path, "status"))

    def write_status(self, **fields: Any) -> Status:
        """Change fields of status.json (Status's field names; `extra` merges into what is there)
        and return the result; refuses an illegal state change.

        Entering `starting` stamps `started_at`, entering a terminal state stamps `ended_at`
        (unless given); every write stamps `updated_at` (epoch seconds).
        """
        with _locked(self.path):
            current = self.read_status()
            old, new = current.state, fields.get("state", current.state)
            if "state" in fields and not can_transition(old, new):
                raise _transition_error(self.status_path, old, new)
            stamps = {"updated_at": time.time()}
            if new != old and new == "starting" and "started_at" not in fields:
                stamps["started_at"] = stamps["updated_at"]
            if new != old and new in TERMINAL_STATES and "ended_at" not in fields:
                stamps["ended_at"] = stamps["updated_at"]
            if "extra" in fields:
                fields["extra"] = {**current.extra, **fields["extra"]}
            status = current.replace(**{**fields, **stamps})
            atomic_write_json(self.status_path, status.to_json())
            return status

    def restart_for_resume(self) -> Status:
        """Begin a new attempt of a run that is over: state back to `queued`, process fields cleared.

        The previous attempt is kept in `history`; step and best stay (the worker resumes from its
        checkpoint); a pending stop request is withdrawn so the new worker does not stop at once.
        """
        with _locked(self.path):
            current = self.read_status()
            if current.state not in TERMINAL_STATES:
                raise RunDirError(f"{self.status_path}: only a run that is over can be resumed "
                                  f"(state is {current.state!r}); stop it first")
            previous = Attempt(state=current.state, reason=current.reason, started_at=current.started_at,
                               ended_at=current.ended_at, step=current.step)
            cleared = {name: _default_of(Status, name) for name in (
                "pid", "pgid", "create_time", "worker_pids", "started_at", "ended_at", "reason",
                "failure_kind", "error_lines", "hostname", "cluster")}
            status = current.replace(**cleared, state="queued", attempt=current.attempt + 1,
                                     history=[*current.history, previous], updated_at=time.time())
            atomic_write_json(self.status_path, status.to_json())
        self.write_control(stop=None)
        return status

    # -- metrics --

    def append_metrics(self, records: MetricRecord | Iterable[MetricRecord]) -> int:
        """Append records as JSON lines, flushed one by one (rank 0 only); returns how many.

        A record without `time` gets the current epoch seconds. If an earlier writer died in the
        middle of a line, a newline is written first so the torn line stays alone (and is skipped).
        """
        batch = [records] if isinstance(records, MetricRecord) else list(records)
        for record in batch:
            if not isinstance(record, MetricRecord):
                raise RunDirError(f"{self.metrics_path}: a metrics record must be a MetricRecord "
                                  f"(TrainRecord, EvalRecord, an EventRecord), not {type(record).__name__}")
        with open(self.metrics_path, "a+b") as handle:
            if handle.seek(0, os.SEEK_END) > 0:
                handle.seek(-1, os.SEEK_END)
                if handle.read(1) != b"\n":
                    handle.write(b"\n")
            for record in batch:
                if record.time is None:
                    record = record.replace(time=time.time())
                line = json.dumps(record.to_json(), default=_json_default, separators=(",", ":"))
                handle.write(line.encode("utf-8") + b"\n")
                handle.flush()
        return len(batch)

    def metrics_reader(self) -> MetricsReader:
        return MetricsReader(self.metrics_path)

    def last_metric(self, kind: type[M], max_bytes: int = 8192) -> M | None:
        """The newest record of class `kind` (e.g. TrainRecord), from the file's end only."""
        for line in reversed(_tail(self.metrics_path, max_bytes).splitlines()):
            try:
                data = json.loads(line)
            except ValueError:
                continue
            if isinstance(data, dict) and isinstance(record := parse_metric(data), kind):
                return record
        return None

    def log_tail(self, max_bytes: int = LOG_TAIL_BYTES) -> str:
        """The last `max_bytes` of train.log (from a line boundary), '' when there is none."""
        return _tail(self.log_path, max_bytes)

    # -- profile --

    def read_profile_summary(self) -> ProfileSummary | None:
        """The profile's summary, or None when the run was not profiled (or is still being
        profiled, or the file cannot be read)."""
        try:
            return ProfileSummary.from_json(_read_json_object(self.profile_summary_path, "profile summary"))
        except RunDirError:
            return None

    def write_profile_summary(self, summary: ProfileSummary) -> None:
        """Write profile/summary.json (atomically: the Monitor may be reading it)."""
        self.profile_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.profile_summary_path, summary.to_json())

    # -- control --

    def read_control(self) -> ControlRequest:
        """The console's requests (no control.json reads as no request)."""
        if not self.control_path.exists():
            return ControlRequest()
        return ControlRequest.from_json(_read_json_object(self.control_path, "control"))

    def write_control(self, **changes: Any) -> ControlRequest:
        """Merge a request into control.json and bump `seq`, so the worker applies it once.

        `stop` is None, 'graceful' or 'now'. `early_stopping` merges key by key (e.g. only
        `patience`), each value checked by the config's own rules; `early_stopping=None` drops
        every override.
        """
        changes = _checked_control(self.control_path, changes)
        with _locked(self.path):
            control = self.read_control()
            updates: dict[str, Any] = {}
            if "stop" in changes:
                updates["stop"] = changes["stop"]
            if "early_stopping" in changes:
                update = changes["early_stopping"]
                updates["early_stopping"] = None if update is None else {**(control.early_stopping or {}), **update}
            control = control.replace(**updates, seq=control.seq + 1, requested_at=time.time())
            atomic_write_json(self.control_path, control.to_json())
            return control


M = typing.TypeVar("M", bound=MetricRecord)


def _default_of(cls: type, name: str) -> Any:
    spec = next(f for f in dataclasses.fields(cls) if f.name == name)
    return spec.default_factory() if spec.default_factory is not dataclasses.MISSING else spec.default


def _tail(path: Path, max_bytes: int) -> str:
    """The last `max_bytes` of a text file, starting at a line boundary; '' if there is none."""
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


def _checked_control(path: Path, changes: Mapping[str, Any]) -> dict[str, Any]:
    """The request with its early-stopping values as the config's fields hold them (7.0 -> 7);
    raises RunDirError naming the key and what is valid."""
    unknown = [k for k in changes if k not in _CONTROL_KEYS]
    if unknown:
        raise RunDirError(f"{path}: unknown control request {', '.join(unknown)}; "
                          f"valid: {', '.join(_CONTROL_KEYS)}")
    if changes.get("stop") not in (None, *STOP_REQUESTS):
        raise RunDirError(f"{path}: stop = {changes['stop']!r}: must be 'graceful', 'now' or None")
    early = changes.get("early_stopping")
    if early is None:
        return dict(changes)
    names = [f.name for f in dataclasses.fields(EarlyStoppingSettings)]
    if not isinstance(early, Mapping) or any(k not in names for k in early):
        raise RunDirError(f"{path}: early_stopping must be a mapping with keys among "
                          f"{', '.join(names)} (got {early!r})")
    try:
        settings = EarlyStoppingSettings.from_dict(early)
    except ConfigError as err:
        raise RunDirError(f"{path}: {err}") from None
    return {**changes, "early_stopping": {k: getattr(settings, k) for k in early}}


class ControlPoller:
    """For the worker: returns control.json once per new `seq` and None otherwise; costs one stat
    per call while nothing changed.

    Starts at seq 0, so requests written before the worker started (a stop, early-stopping
    changes) are applied on the first poll.
    """

    def __init__(self, run_dir: RunDir | str | os.PathLike, last_seq: int = 0):
        self.run_dir = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
        self.last_seq = last_seq
        self._seen: tuple | None = None

    def poll(self) -> ControlRequest | None:
        try:
            st = os.stat(self.run_dir.control_path)
        except OSError:
            return None
        key = (st.st_ino, st.st_mtime_ns, st.st_size)
        if key == self._seen:
            return None
        try:
            control = self.run_dir.read_control()
        except RunDirError:
            return None
        self._seen = key
        if control.seq <= self.last_seq:
            return None
        self.last_seq = control.seq
        return control


# ---- metrics reader --------------------------------------------------------------------------

class MetricsReader:
    """Reads metrics.jsonl incrementally: each call returns only records appended since the last,
    each as its record class (`parse_metric`).

    Bytes after the last newline (a line still being written) wait in a buffer for the next call;
    a line that is not a JSON object is skipped and counted in `corrupt_lines`. A file that does
    not exist yet reads as empty; one that was replaced or truncated is read again from the start.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.reset()

    def reset(self) -> None:
        self.offset = 0          # bytes of the file consumed (including the buffered partial line)
        self.bytes_read = 0      # total bytes read from disk, for callers watching the cost
        self.lines = 0           # complete lines seen
        self.corrupt_lines = 0
        self.last_error: str | None = None
        self._partial = b""
        self._inode: int | None = None

    def read_new(self) -> list[MetricRecord]:
        try:
            handle = open(self.path, "rb")
        except FileNotFoundError:
            return []
        with handle:
            st = os.fstat(handle.fileno())
            if (self._inode is not None and st.st_ino != self._inode) or st.st_size < self.offset:
                self.reset()
            self._inode = st.st_ino
            handle.seek(self.offset)
            data = handle.read()
        self.offset += len(data)
        self.bytes_read += len(data)
        data, self._partial = self._partial + data, b""
        *complete, self._partial = data.split(b"\n")
        return [record for line in complete if (record := self._parse(line)) is not None]

    def _parse(self, line: bytes) -> MetricRecord | None:
        self.lines += 1
        if not line.strip():
            return None
        try:
            record = json.loads(line)
        except ValueError as err:  # includes bad UTF-8
            record, reason = None, str(err)
        else:
            reason = f"a JSON {type(record).__name__}, not an object"
        if isinstance(record, dict):
            return parse_metric(record)
        self.corrupt_lines += 1
        self.last_error = f"{self.path} line {self.lines}: {reason}"
        return None


# ---- a resumed run's timeline ------------------------------------------------------------------
# An attempt that crashed logged steps past its last checkpoint; the next attempt (generation) logs
# them again from that checkpoint. Readers keep the latest value per step: what an attempt logged
# past the step the next one resumed from is superseded, and so is an earlier value of one kind at
# one step. Events (warnings, recoveries, ends) are what happened and all stay.

def resume_point(record: MetricRecord) -> int | None:
    """The step an attempt continues from, when `record` opens it (its ResumeEvent; a BaselineEvent
    when it started from the base model): values logged before it at a later step are superseded."""
    if isinstance(record, ResumeEvent) and record.step is not None:
        return record.step
    if isinstance(record, BaselineEvent):
        return record.step or 0
    return None


def value_key(record: MetricRecord) -> tuple[str, bool, int] | None:
    """(kind, base, step) of a train or eval record: at most one value per key counts."""
    if isinstance(record, (TrainRecord, EvalRecord)) and record.step is not None:
        return record.kind, bool(getattr(record, "base", False)), record.step
    return None


def current_records(records: Iterable[MetricRecord]) -> list[MetricRecord]:
    """`records` in file order without the superseded values (see above): one pass from the end."""
    kept: list[MetricRecord] = []
    seen: set[tuple[str, bool, int]] = set()
    cut = math.inf  # the lowest resume point after the record looked at
    for record in reversed(list(records)):
        key = value_key(record)
        if key is not None:
            if key[2] > cut or key in seen:
                continue
            seen.add(key)
        kept.append(record)
        point = resume_point(record)
        if point is not None:
            cut = min(cut, point)
    return kept[::-1]


# ---- run ids --------------------------------------------------------------------------------

_PRECISION_TAGS = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}


def _slug(text: Any) -> str:
    """Text reduced to run-id characters: [A-Za-z0-9._-]."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", str(text)).strip("-.")
    return re.sub(r"-{2,}", "-", slug)


def make_run_id(model_name: str, method: str, lora_rank: int | None, precision: str,
                data_parallel: int, now: dt.datetime | None = None, name: str | None = None) -> str:
    """E.g. '20261129-101500_tiny-demo_lora-r8_fp32_dp1': timestamp first, so ids sort by time.

    `model_name` may be a path (its last part is used); `name` is an optional prefix placed after
    the timestamp; precision names like 'float16' are shortened to 'fp16'.
    """
    stamp = (now or dt.datetime.now()).strftime("%Y%m%d-%H%M%S")
    model = _slug(Path(str(model_name).rstrip("/\\")).name or model_name) or "model"
    method_tag = f"lora-r{lora_rank}" if method == "lora" else _slug(method)
    parts = [stamp, _slug(name) if name else "", model, method_tag,
             _PRECISION_TAGS.get(precision, _slug(precision)), f"dp{int(data_parallel)}"]
    return "_".join(p for p in parts if p)


def _format_ppl(value: float) -> str:
    return f"{value:.2f}" if value < 10 else f"{value:.1f}" if value < 1000 else f"{value:.0f}"


SCORE_LABELS = {"exact_match": "EM", "bleu": "BLEU", "rouge1": "ROUGE-1", "rouge2": "ROUGE-2", "rougeL": "ROUGE-L"}


def display_name(run_id: str, final: FinalFigures | None) -> str:
    """What a run is shown as: its id, which never changes, followed by what came out when it
    ended, e.g. '20261129-101500_tiny-demo_lora-r8_fp32_dp1 · ppl 12.3 · EM 39.5% · 850 tok/s' (a part
    is left out when its figure is missing or not finite; no results: the id alone). The answer score
    shown is the one early stopping watched (e.g. 'BLEU 23.4'), else exact match."""
    parts = [run_id]
    ppl = final.best_val_ppl if final else None
    if ppl is not None and math.isfinite(ppl) and ppl >= 0:
        parts.append(f"ppl {_format_ppl(float(ppl))}")
    watched = final.monitor if final and final.monitor in GENERATION_FIELDS else "exact_match"
    score = getattr(final, watched) if final else None
    if score is not None and math.isfinite(score):
        parts.append(f"{SCORE_LABELS[watched]} {100 * score:.1f}" + ("%" if watched == "exact_match" else ""))
    if final and final.reward_accuracy is not None and math.isfinite(final.reward_accuracy):
        parts.append(f"reward acc {100 * final.reward_accuracy:.1f}%")
    tps = final.tokens_per_s if final else None
    if tps is not None and math.isfinite(tps) and tps >= 0:
        parts.append(f"{round(tps)} tok/s")
    return " · ".join(parts)


def next_free_run_id(runs_dir: str | os.PathLike, run_id: str) -> str:
    """`run_id`, or `run_id-2`, `-3`, ... whichever does not exist in runs_dir yet."""
    candidate, n = run_id, 1
    while os.path.lexists(Path(runs_dir) / candidate):
        n += 1
        candidate = f"{run_id}-{n}"
    return candidate


# ---- listing ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class RunSummary:
    """One row of the runs list. `state` is 'unknown' (with `reason`) when status.json is unreadable."""
    run_id: str
    path: Path
    state: str
    reason: str | None
    status: Status = field(compare=False)
    sort_time: float = 0.0

    @property
    def run(self) -> RunDir:
        return RunDir(self.path)


def list_runs(runs_dir: str | os.PathLike) -> list[RunSummary]:
    """Real run folders (not symlinks, with a status.json), newest first; never raises for one run."""
    root = Path(runs_dir)
    try:
        entries = [e for e in os.scandir(root) if not e.is_symlink() and e.is_dir(follow_symlinks=False)]
    except (FileNotFoundError, NotADirectoryError):
        return []
    runs = [RunDir(e.path) for e in entries]
    summaries = [_summarize(run) for run in runs if os.path.lexists(run.status_path)]
    return sorted(summaries, key=lambda s: (s.sort_time, s.run_id), reverse=True)


def _summarize(run: RunDir) -> RunSummary:
    try:
        status = run.read_status()
    except (RunDirError, OSError) as err:
        status, state, reason = Status(), "unknown", str(err)
    else:
        state, reason = status.state, status.reason
        if state not in STATES:
            state, reason = "unknown", f"{run.status_path}: unknown state {state!r}"
    created = status.created_at
    if created is None:
        with contextlib.suppress(OSError):
            created = run.path.stat().st_mtime
    return RunSummary(run.run_id, run.path, state, reason, status, float(created or 0.0))


# ---- paths ------------------------------------------------------------------------------------

def resolve_inside(root: str | os.PathLike, path: str | os.PathLike) -> Path:
    """`path` (relative to root, or absolute) with symlinks resolved; raises if it leaves root."""
    try:
        real_root = Path(os.path.realpath(root))
        candidate = Path(path)
        real = Path(os.path.realpath(candidate if candidate.is_absolute() else real_root / candidate))
    except (ValueError, OSError) as err:
        raise RunDirError(f"{path!s}: not a usable path ({err})") from None
    if real != real_root and real_root not in real.parents:
        raise RunDirError(f"{path!s}: resolves to {real}, outside {real_root}; "
                          "only paths inside that folder are allowed")
    return real
