"""Starting, resuming and stopping runs for every browser tab at once.

The console owns no training process: it creates a run folder, hands it to `core.launcher`, and
from then on reads the folder. What it keeps in memory is only what keeps two clicks from doing
the same thing twice: a lock around starting, the recent start requests (so a double-click on
Start launches one run), and the stops under way. A thread per launched worker reaps it when it
exits and reconciles the run, so a crash is marked `failed` even if no browser is open.
"""
from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from core import launcher
from core.config import Config, load_config
from core.atomic import atomic_write
from core.rundir import TERMINAL_STATES, RunDir, RunDirError, RunSummary, Status, list_runs

from app.access import SINGLE_USER, Viewer, read_owner, visible

DEDUPE_WINDOW_S = 10.0  # the same config submitted again within this window is the same request


class JobError(ValueError):
    """A start, resume or stop the console refuses; the message says why."""


@dataclass(frozen=True)
class StartResult:
    run_id: str
    started: bool   # False when this request repeated one already handled (double-click)
    message: str


@dataclass(frozen=True)
class ReattachReport:
    """What startup found: runs still alive (reattached), runs marked failed, and orphan processes."""
    alive: list[str]
    failed: list[str]
    orphans: list[str]


class JobManager:
    """Shared by every session of one console. Launcher functions are injectable for tests."""

    def __init__(self, runs_dir: Path, *, create_run: Callable = launcher.create_run,
                 launch: Callable = launcher.launch, stop: Callable = launcher.stop,
                 reconcile: Callable = launcher.reconcile, dedupe_window_s: float = DEDUPE_WINDOW_S,
                 on_end: Callable[[RunDir], None] | None = None, watch: Callable | None = None,
                 watch_every_s: float = launcher.WATCH_EVERY_S):
        self.runs_dir = Path(runs_dir)
        self._create_run, self._launch, self._stop, self._reconcile = create_run, launch, stop, reconcile
        self._watch_once = watch or (launcher.watch if reconcile is launcher.reconcile else reconcile)
        self._watch_every_s = watch_every_s
        self._watching: dict[str, threading.Thread] = {}
        self._on_end = on_end
        self._window = dedupe_window_s
        self._lock = threading.Lock()
        self._recent: dict[str, tuple[float, str]] = {}  # request fingerprint -> (time, run id)
        self._stopping: dict[str, threading.Thread] = {}

    # -- starting --

    def start(self, config: Config, owner: str | None = None) -> StartResult:
        """Create and launch a run for `config`, once: a repeat of the same request within the
        window returns the run already started instead of a second one. `owner` (the logged-in
        user) is recorded in the run's status before the worker starts."""
        config.validate()
        launcher.check_workers_available(config.parallel.data_parallel, config.parallel.device)
        key = hashlib.sha256(f"{owner}\n{config.to_yaml()}".encode()).hexdigest()
        with self._lock:
            now = time.monotonic()
            self._recent = {k: v for k, v in self._recent.items() if now - v[0] < self._window}
            if key in self._recent:
                run_id = self._recent[key][1]
                return StartResult(run_id, False, f"already started as {run_id}")
            run = self._create_run(config)
            if owner is not None:
                run.write_status(owner=owner)
            self._launch_and_watch(run)
            self._recent[key] = (now, run.run_id)
        return StartResult(run.run_id, True, f"started {run.run_id}")

    def resume(self, run_id: str, viewer: Viewer = SINGLE_USER, checkpoint: str | None = None) -> StartResult:
        """Start a new attempt of a stopped or failed run from its last checkpoint, or from the
        one the user names (`checkpoint`: a folder name in its checkpoints/, e.g. 'step-4'): a
        resume never falls back to another checkpoint by itself."""
        run = self.run_dir(run_id, viewer)
        with self._lock:
            state = self._reconcile(run).state
            if state not in ("stopped", "failed"):
                raise JobError(f"{run_id} is {state}; only a stopped or failed run can be resumed")
            name = checkpoint or "last"
            last = run.checkpoints_dir / name
            if "/" in name or "\\" in name or name.startswith(".") or not last.is_dir():
                if checkpoint:
                    raise JobError(f"{run_id} has no checkpoint {checkpoint!r} (its checkpoints/ holds "
                                   f"{', '.join(sorted(p.name for p in run.checkpoints_dir.iterdir())) or 'nothing'})")
                raise JobError(f"{run_id} saved no checkpoint to resume from; start a new run instead")
            config = load_config(run.config_path).with_updates({"run.resume": str(last.absolute())})
            run.restart_for_resume()
            atomic_write(run.config_path, config.to_yaml())
            self._launch_and_watch(run)
        return StartResult(run.run_id, True, f"resumed {run.run_id} from {last.resolve().name}")

    def _launch_and_watch(self, run: RunDir) -> None:
        launched = self._launch(run)
        process = getattr(launched, "process", None)
        if process is not None:
            self._start_watching(run, process)

    def _start_watching(self, run: RunDir, process=None) -> None:
        worker = threading.Thread(target=self._watch, args=(run, process), daemon=True, name=f"watch-{run.run_id}")
        self._watching[run.run_id] = worker
        worker.start()

    def _watch(self, run: RunDir, process=None) -> None:
        """The console's watcher of one run, every watch_every_s until it is over and nothing of it
        is left: reaps our child (no zombie), sees a rank that died or hung (core.launcher.watch)
        and tears down what a finished run left; then the end-of-run hook."""
        while True:
            exited = process is not None and process.poll() is not None
            try:
                status = self._watch_once(RunDir(run.path.resolve()))
            except (RunDirError, launcher.LaunchError, OSError):
                return
            over = status.state in TERMINAL_STATES
            if over and (process is None or exited) and not self._processes_left(run):
                self._ended(run, status)
                return
            time.sleep(self._watch_every_s)

    def _processes_left(self, run: RunDir) -> bool:
        if self._watch_once is self._reconcile:  # no real launcher (tests): no processes to wait for
            return False
        try:
            return bool(launcher.run_processes(RunDir(run.path.resolve())))
        except (RunDirError, launcher.LaunchError, OSError):
            return False

    def wait_for_watchers(self, timeout_s: float = 60.0) -> None:
        """Block until the watched runs are over and their end hooks ran (tests and shutdown)."""
        for worker in list(self._watching.values()):
            worker.join(timeout_s)

    def _ended(self, run: RunDir, status: Status) -> None:
        if self._on_end is not None and status.state in TERMINAL_STATES:
            try:
                self._on_end(RunDir(run.path.resolve()))
            except (RunDirError, OSError) as err:
                print(f"mindtune: after {run.run_id} ended: {err}", flush=True)

    # -- stopping --

    def request_stop(self, run_id: str, graceful: bool, viewer: Viewer = SINGLE_USER) -> str:
        """Stop a run in the background (a graceful stop may wait for a checkpoint); the run's
        status shows the progress. A second request while one is under way is ignored."""
        run = self.run_dir(run_id, viewer)
        with self._lock:
            worker = self._stopping.get(run_id)
            if worker is not None and worker.is_alive() and graceful:
                return f"{run_id}: a stop is already under way"
            worker = threading.Thread(target=self._stop_quietly, args=(run, graceful), daemon=True,
                                      name=f"stop-{run_id}")
            self._stopping[run_id] = worker
            worker.start()
        return f"{run_id}: {'stopping (saving a checkpoint first)' if graceful else 'stopping now'}"

    def _stop_quietly(self, run: RunDir, graceful: bool) -> None:
        try:
            self._stop(run, graceful=graceful)
        except (launcher.LaunchError, RunDirError, OSError) as err:
            print(f"mindtune: stopping {run.run_id} failed: {err}", flush=True)

    def wait_for_stops(self, timeout_s: float = 60.0) -> None:
        """Block until the stops under way are done (tests and shutdown)."""
        for worker in list(self._stopping.values()):
            worker.join(timeout_s)

    # -- finding runs --

    def run_dir(self, run_id: str, viewer: Viewer = SINGLE_USER) -> RunDir:
        """The run folder of `run_id` inside the runs folder (a renamed run is followed), if
        `viewer` may see it; another user's run is answered as if it did not exist."""
        if not run_id or "/" in run_id or "\\" in run_id or run_id in (".", ".."):
            raise JobError(f"{run_id!r} is not a run id")
        run = RunDir(self.runs_dir / run_id)
        if not run.exists() or not viewer.may_see(read_owner(run.path)):
            raise JobError(f"no run {run_id} in {self.runs_dir}")
        return RunDir(run.path.resolve())

    def runs(self, viewer: Viewer = SINGLE_USER) -> list[RunSummary]:
        """The runs `viewer` may see, newest first."""
        return visible(viewer, list_runs(self.runs_dir))

    def current_status(self, run_id: str, viewer: Viewer = SINGLE_USER) -> Status:
        """The run's status after checking that an active run still has a process."""
        return self._reconcile(self.run_dir(run_id, viewer))

    def reattach(self) -> ReattachReport:
        """At startup: reconcile every run that says it is active; keep watching the live ones
        (through their files), mark the dead ones failed, and list orphan processes."""
        alive, failed = [], []
        for summary in list_runs(self.runs_dir):
            if summary.state in TERMINAL_STATES or summary.state == "unknown":
                continue
            try:
                status = self._reconcile(RunDir(summary.path))
            except (RunDirError, launcher.LaunchError) as err:
                print(f"mindtune: cannot check {summary.run_id}: {err}", flush=True)
                continue
            (failed if status.state == "failed" else alive).append(summary.run_id)
            if status.state not in TERMINAL_STATES:
                self._start_watching(RunDir(summary.path))
        orphans = [f"pid {o.pid} of {o.run_dir.name} ({o.state})" for o in launcher.find_orphans(self.runs_dir)]
        return ReattachReport(alive, failed, orphans)

