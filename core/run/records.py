"""The run directory's typed records and the run states: status.json is a `Status`, control.json a
`ControlRequest`, each line of metrics.jsonl a `TrainRecord`, an `EvalRecord` or an event
(`SetupEvent`, `EndEvent`, ...), profile/summary.json a `ProfileSummary`. Both the worker and the
console use them, so a field is named once; `core.run.rundir` reads and writes them in a run folder,
`core.run.runs` names and lists run folders. Knows the spec package only: its codec (every record's
JSON in and out), the config's early-stopping fields a control request may change, and the data
statistics a setup event carries.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Iterable, Mapping, Self

from core.spec.codec import INVALID, decode, encode, field_hints, read, type_text
from core.spec.config import EarlyStoppingSettings
from core.spec.stats import DataStats, PreferenceStats, PromptStats

__all__ = [
    "RunDirError", "STATES", "TERMINAL_STATES", "can_transition", "FAILURE_KINDS", "STOP_REQUESTS", "Record",
    "Status", "ClusterJob", "SLURM_ACTIVE_STATES", "BestSoFar", "GenerationFigures", "GENERATION_FIELDS",
    "FinalFigures", "Attempt", "ControlRequest", "MetricRecord", "TrainRecord", "ValidationFigures",
    "EvalRecord", "EventRecord", "SetupEvent", "BaselineEvent", "TrackerEvent", "ResumeEvent", "ForkEvent",
    "ControlEvent", "EndEvent", "METRIC_KINDS", "EVENT_KINDS", "ProfiledOperator", "ProfileSummary",
    "parse_metric", "resume_point", "current_records", "value_key", "transition_error",
]


class RunDirError(ValueError):
    """A run directory that cannot be read or changed as asked; the message names the file (a
    core.spec.messages.Message where the catalogue has it, kept as it was given: `said`, which a
    caller may set to the lines of the error it wraps)."""

    _said: list[str] | None = None

    @property
    def said(self) -> list[str]:
        if self._said is not None:
            return self._said
        return [self.args[0]] if len(self.args) == 1 and isinstance(self.args[0], str) else [str(self)]

    @said.setter
    def said(self, lines: list[str]) -> None:
        self._said = lines


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


def transition_error(path: Path, old: str | None, new: str) -> RunDirError:
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


@dataclass(frozen=True, kw_only=True)
class Record:
    """Base of every run-directory record: typed fields, JSON in and out, unknown keys kept
    (core.spec.codec types the values both ways)."""
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for name, hint in field_hints(type(self)).items():
            value = decode(getattr(self, name), hint)
            if value is INVALID:
                raise RunDirError(f"{type(self).__name__}.{name} = {getattr(self, name)!r}: must be "
                                  f"{type_text(hint)}")
            object.__setattr__(self, name, value)

    def to_json(self) -> dict[str, Any]:
        """The record as a JSON object; keys from `extra` first, so a known field always wins."""
        return encode(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        return read(cls, data)

    def values(self) -> dict[str, Any]:
        """The fields' values by name (nested records as records, `extra` left out)."""
        return {name: getattr(self, name) for name in field_hints(type(self))}

    def replace(self, **changes: Any) -> Self:
        """A copy with `changes`; an unknown field name is an error that lists the valid ones."""
        unknown = sorted(set(changes) - set(field_hints(type(self))) - {"extra"})
        if unknown:
            raise RunDirError(f"{type(self).__name__} has no field {', '.join(unknown)}; valid fields: "
                              f"{', '.join(field_hints(type(self)))}")
        return dataclasses.replace(self, **changes)


# -- status.json --

@dataclass(frozen=True, kw_only=True)
class BestSoFar(Record):
    """The best evaluation so far: the monitored metric's value and step, and its perplexity."""
    metric: str | None = None
    value: float | None = None
    step: int | None = None
    val_ppl: float | None = None
    reward_accuracy: float | None = None
    val_reward: float | None = None


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
    val_reward: float | None = None  # grpo: the mean validation reward at the best evaluation
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
    reason_message: dict[str, Any] | None = None  # the reason's id and parameters (core.spec.messages), when it has one
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
    # grpo (core.engine.objectives.grpo): the step's rollouts and their rewards
    reward: float | None = None          # mean weighted total reward of the step's completions
    reward_std: float | None = None      # its standard deviation
    rewards: dict[str, float] | None = None      # each reward function's mean (unweighted), by its label
    rewards_std: dict[str, float] | None = None  # ... and its standard deviation
    zero_std_share: float | None = None  # share of prompts whose completions all scored the same (no gradient)
    kl: float | None = None              # mean per-token KL to the reference (grpo.beta > 0)
    clip_ratio: float | None = None      # share of completion tokens whose ratio was clipped
    completion_len: float | None = None  # mean completion length (tokens)
    completion_len_max: int | None = None
    truncated_share: float | None = None  # share of completions cut at grpo.max_new_tokens
    entropy: float | None = None         # mean entropy of the policy over completion tokens
    rollout_s: float | None = None       # seconds the step spent sampling and scoring
    update_s: float | None = None        # ... and updating the weights


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
    # grpo: completions of the validation prompts (grpo.eval_temperature) and their rewards
    val_reward: float | None = None
    val_reward_std: float | None = None
    val_rewards: dict[str, float] | None = None  # each reward function's mean, by its label
    val_completion_len: float | None = None
    val_truncated: float | None = None


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
    data: DataStats | PreferenceStats | PromptStats | None = None   # what core.data found in the dataset
    lora_modules: int | None = None
    layer_graphs: int | None = None
    kernels: str | None = None           # "fused", or "composed: <why>"
    frozen_weights: str | None = None    # LoRA with 16-bit frozen base weights: their dtype and upcast path
    setup_s: float | None = None


@dataclass(frozen=True, kw_only=True)
class CompletionsEvent(EventRecord):
    """grpo: a few validation prompts with their completions and each reward, at an evaluation (the
    Monitor's completions table). Each sample: {prompt, completion, rewards: {label: value}, total}."""
    event: str = "completions"
    samples: list[dict] = field(default_factory=list)


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
