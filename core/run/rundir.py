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

Every record is a typed dataclass of `core.run.records`, which the worker writes and the console
reads; `RunDir` owns every file name and the checkpoint pointers; `core.run.runs` names and lists
run folders.

Whole files are written atomically (temp file, fsync, rename, fsync the folder), so a reader never
sees half a status; status and control updates are read-merge-write under a lock on `.lock`, so
the console and the worker never lose each other's fields. Metrics are read incrementally by byte
offset. Imports nothing else from `core` but the stdlib-only `core.run.atomic`, `core.spec.config`
(whose early-stopping fields are what a control request may change, checked by the config's rules)
and `core.spec.messages` (a reason's id is kept beside its English).
"""
from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import re
import time
import typing
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from core.run.atomic import atomic_write
from core.run.records import (STOP_REQUESTS, TERMINAL_STATES, Attempt, ControlRequest, MetricRecord, ProfileSummary,
                              RunDirError, Status, can_transition, parse_metric, transition_error)
from core.spec.config import ConfigError, EarlyStoppingSettings
from core.spec.messages import Message

__all__ = [
    "atomic_write_json", "POINTERS", "STEP_FOLDER", "parse_step_folder", "step_folder_name",
    "checkpoint_folders", "RunDir", "MetricsReader", "ControlPoller", "resolve_inside",
]


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
        raise RunDirError(Message("rundir.no_folder", folder=str(folder))) from None
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
    """`what`: the file's kind, rundir.what.<what> ('status', 'control', 'profile')."""
    kind = Message(f"rundir.what.{what}")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RunDirError(Message("rundir.no_file", file=str(path), what=kind)) from None
    except OSError as err:
        raise RunDirError(Message("rundir.unreadable", file=str(path), what=kind,
                                  os_says=str(err.strerror or err))) from None
    try:
        data = json.loads(text)
    except ValueError as err:
        raise RunDirError(Message("rundir.invalid_json", file=str(path), what=kind, json_says=str(err))) from None
    if not isinstance(data, dict):
        raise RunDirError(Message("rundir.not_object", file=str(path), what=kind, py_type=type(data).__name__))
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
    def create(cls, runs_dir: str | os.PathLike, run_id: str, config_yaml: str, training: bool = True) -> RunDir:
        """Make runs_dir/run_id with its config and status `queued`; refuses a non-empty folder. A
        training run gets its checkpoints/ and export/ folders; an evaluation (`training` False) none."""
        if not _RUN_ID.fullmatch(run_id) or run_id in (".", ".."):
            raise RunDirError(Message("rundir.bad_run_id", run=repr(run_id)))
        run = cls(Path(runs_dir) / run_id)
        run.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            run.path.mkdir()
        except FileExistsError:
            if run.path.is_symlink() or not run.path.is_dir() or any(run.path.iterdir()):
                raise RunDirError(Message("rundir.exists", folder=str(run.path))) from None
        if training:
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
                raise transition_error(self.status_path, old, new)
            stamps = {"updated_at": time.time()}
            if new != old and new == "starting" and "started_at" not in fields:
                stamps["started_at"] = stamps["updated_at"]
            if new != old and new in TERMINAL_STATES and "ended_at" not in fields:
                stamps["ended_at"] = stamps["updated_at"]
            if "extra" in fields:
                fields["extra"] = {**current.extra, **fields["extra"]}
            if "reason" in fields and "reason_message" not in fields:  # the id beside the English, or none
                reason = fields["reason"]
                fields["reason_message"] = reason.to_json() if isinstance(reason, Message) else None
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
                raise RunDirError(Message("rundir.not_over", file=str(self.status_path), state=repr(current.state)))
            previous = Attempt(state=current.state, reason=current.reason, started_at=current.started_at,
                               ended_at=current.ended_at, step=current.step)
            cleared = {name: _default_of(Status, name) for name in (
                "pid", "pgid", "create_time", "worker_pids", "started_at", "ended_at", "reason", "reason_message",
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
            return ProfileSummary.from_json(_read_json_object(self.profile_summary_path, "profile"))
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
        refused = RunDirError(f"{path}: {err}")
        refused.said = [Message("problem.at_key", setting=str(path), reason=line) if i == 0 and isinstance(line, Message)
                        else f"{path}: {line}" if i == 0 else line for i, line in enumerate(err.said)]
        raise refused from None
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


# ---- paths ------------------------------------------------------------------------------------

def resolve_inside(root: str | os.PathLike, path: str | os.PathLike) -> Path:
    """`path` (relative to root, or absolute) with symlinks resolved; raises if it leaves root."""
    try:
        real_root = Path(os.path.realpath(root))
        candidate = Path(path)
        real = Path(os.path.realpath(candidate if candidate.is_absolute() else real_root / candidate))
    except (ValueError, OSError) as err:
        raise RunDirError(Message("rundir.unusable_path", path=str(path), error=str(err))) from None
    if real != real_root and real_root not in real.parents:
        raise RunDirError(Message("rundir.outside", path=str(path), real=str(real), root=str(real_root)))
    return real
