"""The run directory: the only channel between the console and a training worker.

    runs/<run-id>/
      config.yaml     resolved config, written before launch
      status.json     {state, pid, pgid, create_time, started_at, ended_at, reason, failure_kind, step, best, ...}
      metrics.jsonl   one JSON object per line, appended by rank 0 only
      control.json    requests from the console ({stop, early_stopping, seq}); the worker polls it
      train.log       stdout/stderr of the worker(s)
      checkpoints/    export/

Whole files are written atomically (temp file, fsync, rename, fsync the folder), so a reader never
sees half a status; status and control updates are read-merge-write under a lock on `.lock`, so
the console and the worker never lose each other's fields. Metrics are read incrementally by byte
offset. Imports nothing else from `core` but the stdlib-only `core.atomic`.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import math
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from core.atomic import atomic_write, fsync_dir

__all__ = [
    "RunDirError", "STATES", "TERMINAL_STATES", "can_transition",
    "atomic_write_json", "RunDir", "MetricsReader", "ControlPoller", "RunSummary", "make_run_id",
    "final_run_id", "next_free_run_id", "finalize_name", "list_runs", "resolve_inside",
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


# ---- atomic files ----------------------------------------------------------------------------

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
_STOP_REQUESTS = (None, "graceful", "now")
_EARLY_STOPPING_KEYS = ("enabled", "monitor", "patience", "min_delta")
_RUN_ID = re.compile(r"[A-Za-z0-9._-]+")


class RunDir:
    """One run's folder: typed readers and writers for the files of the contract."""

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
        atomic_write_json(run.control_path, {"stop": None, "early_stopping": None, "seq": 0})
        now = time.time()
        atomic_write_json(run.status_path, {"run_id": run_id, "state": "queued", "attempt": 1,
                                            "created_at": now, "updated_at": now})
        return run

    # -- status --

    def read_status(self) -> dict:
        return _read_json_object(self.status_path, "status")

    def write_status(self, **fields: Any) -> dict:
        """Merge `fields` into status.json and return the result; refuses an illegal state change.

        Entering `starting` stamps `started_at`, entering a terminal state stamps `ended_at`
        (unless given); every write stamps `updated_at` (epoch seconds).
        """
        with _locked(self.path):
            current = self.read_status()
            old, new = current.get("state"), fields.get("state", current.get("state"))
            if "state" in fields and not can_transition(old, new):
                raise _transition_error(self.status_path, old, new)
            merged = {**current, **fields, "updated_at": time.time()}
            if new != old and new == "starting" and "started_at" not in fields:
                merged["started_at"] = merged["updated_at"]
            if new != old and new in TERMINAL_STATES and "ended_at" not in fields:
                merged["ended_at"] = merged["updated_at"]
            atomic_write_json(self.status_path, merged)
            return merged

    def restart_for_resume(self) -> dict:
        """Begin a new attempt of a run that is over: state back to `queued`, process fields cleared.

        The previous attempt is kept in `history`; step and best stay (the worker resumes from its
        checkpoint); a pending stop request is withdrawn so the new worker does not stop at once.
        """
        with _locked(self.path):
            current = self.read_status()
            if current.get("state") not in TERMINAL_STATES:
                raise RunDirError(f"{self.status_path}: only a run that is over can be resumed "
                                  f"(state is {current.get('state')!r}); stop it first")
            previous = {k: current.get(k) for k in ("state", "reason", "started_at", "ended_at", "step")}
            cleared = ("pid", "pgid", "create_time", "worker_pids", "started_at", "ended_at",
                       "reason", "failure_kind", "error_lines", "hostname")
            status = {k: v for k, v in current.items() if k not in cleared}
            status.update(state="queued", attempt=int(current.get("attempt", 1)) + 1,
                          history=[*current.get("history", []), previous], updated_at=time.time())
            atomic_write_json(self.status_path, status)
        self.write_control(stop=None)
        return status

    # -- metrics --

    def append_metrics(self, records: Mapping | Iterable[Mapping]) -> int:
        """Append records as JSON lines, flushed one by one (rank 0 only); returns how many.

        A record without `time` gets the current epoch seconds. If an earlier writer died in the
        middle of a line, a newline is written first so the torn line stays alone (and is skipped).
        """
        batch = [records] if isinstance(records, Mapping) else list(records)
        with open(self.metrics_path, "a+b") as handle:
            if handle.seek(0, os.SEEK_END) > 0:
                handle.seek(-1, os.SEEK_END)
                if handle.read(1) != b"\n":
                    handle.write(b"\n")
            for record in batch:
                if not isinstance(record, Mapping):
                    raise RunDirError(f"{self.metrics_path}: a metrics record must be a mapping, "
                                      f"not {type(record).__name__}")
                line = json.dumps({**record, "time": record.get("time", time.time())},
                                  default=_json_default, separators=(",", ":"))
                handle.write(line.encode("utf-8") + b"\n")
                handle.flush()
        return len(batch)

    def metrics_reader(self) -> MetricsReader:
        return MetricsReader(self.metrics_path)

    # -- control --

    def read_control(self) -> dict:
        """The console's requests: {"stop": None|"graceful"|"now", "early_stopping": {...}|None, "seq": N}."""
        if not self.control_path.exists():
            return {"stop": None, "early_stopping": None, "seq": 0}
        control = _read_json_object(self.control_path, "control")
        return {"stop": None, "early_stopping": None, "seq": 0, **control}

    def write_control(self, **changes: Any) -> dict:
        """Merge a request into control.json and bump `seq`, so the worker applies it once.

        `early_stopping` merges key by key (e.g. only `patience`); `early_stopping=None` drops
        every override.
        """
        _check_control(self.control_path, changes)
        with _locked(self.path):
            control = self.read_control()
            if "stop" in changes:
                control["stop"] = changes["stop"]
            if "early_stopping" in changes:
                update = changes["early_stopping"]
                control["early_stopping"] = None if update is None else \
                    {**(control.get("early_stopping") or {}), **update}
            control.update(seq=int(control.get("seq", 0)) + 1, requested_at=time.time())
            atomic_write_json(self.control_path, control)
            return control


def _check_control(path: Path, changes: Mapping[str, Any]) -> None:
    unknown = [k for k in changes if k not in _CONTROL_KEYS]
    if unknown:
        raise RunDirError(f"{path}: unknown control request {', '.join(unknown)}; "
                          f"valid: {', '.join(_CONTROL_KEYS)}")
    if changes.get("stop") not in _STOP_REQUESTS:
        raise RunDirError(f"{path}: stop = {changes['stop']!r}: must be 'graceful', 'now' or None")
    early = changes.get("early_stopping")
    if early is None:
        return
    if not isinstance(early, Mapping) or any(k not in _EARLY_STOPPING_KEYS for k in early):
        raise RunDirError(f"{path}: early_stopping must be a mapping with keys among "
                          f"{', '.join(_EARLY_STOPPING_KEYS)} (got {early!r})")
    checks = {"enabled": lambda v: isinstance(v, bool), "monitor": lambda v: isinstance(v, str),
              "patience": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1,
              "min_delta": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0}
    rules = {"enabled": "true or false", "monitor": "a metric name", "patience": "an integer >= 1",
             "min_delta": "a number >= 0"}
    for key, value in early.items():
        if not checks[key](value):
            raise RunDirError(f"{path}: early_stopping.{key} = {value!r}: must be {rules[key]}")


class ControlPoller:
    """For the worker: returns control.json once per new `seq` and None otherwise; cheap per step.

    Starts at seq 0, so requests written before the worker started (a stop, early-stopping
    changes) are applied on the first poll.
    """

    def __init__(self, run_dir: RunDir | str | os.PathLike, last_seq: int = 0):
        self.run_dir = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
        self.last_seq = last_seq
        self._seen: tuple | None = None

    def poll(self) -> dict | None:
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
        if int(control.get("seq", 0)) <= self.last_seq:
            return None
        self.last_seq = int(control["seq"])
        return control


# ---- metrics reader --------------------------------------------------------------------------

class MetricsReader:
    """Reads metrics.jsonl incrementally: each call returns only records appended since the last.

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

    def read_new(self) -> list[dict]:
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

    def _parse(self, line: bytes) -> dict | None:
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
            return record
        self.corrupt_lines += 1
        self.last_error = f"{self.path} line {self.lines}: {reason}"
        return None


# ---- run ids --------------------------------------------------------------------------------

_PRECISION_TAGS = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}
_FINAL_SUFFIX = re.compile(r"(?:_ppl[0-9.]+)?(?:_tps[0-9]+)?$")


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


def final_run_id(run_id: str, val_ppl: float | None, tokens_per_s: float | None) -> str:
    """`run_id` + '_ppl12.3_tps850' (a part is left out when its value is missing or not finite).

    An id that already carries such a suffix has it replaced, so finalizing twice is harmless.
    """
    base = _FINAL_SUFFIX.sub("", run_id) or run_id
    parts = [base]
    if val_ppl is not None and math.isfinite(val_ppl) and val_ppl >= 0:
        parts.append(f"ppl{_format_ppl(float(val_ppl))}")
    if tokens_per_s is not None and math.isfinite(tokens_per_s) and tokens_per_s >= 0:
        parts.append(f"tps{round(tokens_per_s)}")
    return "_".join(parts)


def next_free_run_id(runs_dir: str | os.PathLike, run_id: str) -> str:
    """`run_id`, or `run_id-2`, `-3`, ... whichever does not exist in runs_dir yet."""
    candidate, n = run_id, 1
    while os.path.lexists(Path(runs_dir) / candidate):
        n += 1
        candidate = f"{run_id}-{n}"
    return candidate


def finalize_name(run_dir: RunDir | str | os.PathLike, val_ppl: float | None,
                  tokens_per_s: float | None) -> RunDir:
    """Rename the run folder to its final id and leave a relative symlink at the old name.

    Anyone holding the old path (a console, a shell, a worker's MINDTUNE_RUN_DIR) still reaches
    the run through the link. status.json's `run_id` is updated.
    """
    real = Path(os.path.realpath(os.fspath(run_dir)))
    if not (real / "status.json").is_file():
        raise RunDirError(f"{real}: not a run directory (no status.json)")
    wanted = final_run_id(real.name, val_ppl, tokens_per_s)
    if wanted == real.name:
        return RunDir(real)
    target = real.parent / next_free_run_id(real.parent, wanted)
    os.rename(real, target)
    os.symlink(target.name, real)  # relative: survives moving the whole runs folder
    fsync_dir(real.parent)
    run = RunDir(target)
    run.write_status(run_id=target.name)
    return run


# ---- listing ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class RunSummary:
    """One row of the runs list. `state` is 'unknown' (with `reason`) when status.json is unreadable."""
    run_id: str
    path: Path
    state: str
    reason: str | None
    status: dict = field(compare=False)
    sort_time: float = 0.0


def list_runs(runs_dir: str | os.PathLike) -> list[RunSummary]:
    """Real run folders (not symlinks, with a status.json), newest first; never raises for one run."""
    root = Path(runs_dir)
    try:
        entries = [e for e in os.scandir(root) if not e.is_symlink() and e.is_dir(follow_symlinks=False)]
    except (FileNotFoundError, NotADirectoryError):
        return []
    summaries = [_summarize(Path(e.path)) for e in entries if os.path.lexists(Path(e.path) / "status.json")]
    return sorted(summaries, key=lambda s: (s.sort_time, s.run_id), reverse=True)


def _summarize(path: Path) -> RunSummary:
    try:
        status = RunDir(path).read_status()
    except (RunDirError, OSError) as err:
        status, state, reason = {}, "unknown", str(err)
    else:
        state, reason = status.get("state"), status.get("reason")
        if state not in STATES:
            state, reason = "unknown", f"{path / 'status.json'}: unknown state {state!r}"
    created = status.get("created_at")
    if not isinstance(created, (int, float)) or isinstance(created, bool):
        with contextlib.suppress(OSError):
            created = path.stat().st_mtime
    return RunSummary(path.name, path, state, reason, status, float(created or 0.0))


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
