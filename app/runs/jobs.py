"""Starting, queueing, resuming and stopping runs for every browser tab at once.

The console owns no training process: it creates a run folder, hands it to `core.run.launcher`, and
from then on reads the folder. What it keeps in memory is only what keeps two clicks from doing
the same thing twice: a lock around starting, the recent start requests (so a double-click on
Start launches one run), and the stops under way. A thread per launched worker reaps it when it
exits and reconciles the run, so a crash is marked `failed` even if no browser is open.

The job queue lives in the run folders: a run that cannot start because its devices are busy
stays `queued` with a `queue_position` in its status, so the queue survives a console restart
(`reattach` picks it up). A scheduler thread starts the next queued runs when a worker exits (or,
for runs this console did not start, when it sees them gone; it looks every `poll_s`), through
`core.run.launcher.plan_launches`: on the CPU one run at a time by default, on GPU/Ascend one run per
free set of `data_parallel` device ids, and never more than `--max-concurrent-runs`.

A cluster run (`launch.backend: slurm`) is submitted at Start through its backend
(`core.run.backends.backend_for`): the console's own queue is not used for it, since Slurm queues it
(queued == pending in Slurm, in Slurm's order), and a thread per run refreshes its state from the
run folder and Slurm (`Backend.refresh`) until it is over. Stop, cancel and reattach go through the
same backend; the double-click guard is the same for both, and it also looks at the run folders
made within the window, so a console restarted between two clicks submits no second Slurm job.
"""
from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import core.run.backends as backends
import core.run.launcher as launcher
from core.spec.config import Config, ConfigError, load_config
from core.run.atomic import atomic_write
from core.run.records import TERMINAL_STATES, RunDirError, Status
from core.run.rundir import RunDir
from core.run.runs import RunSummary, list_runs
from core.run.slurm import ENDED_STATES

from app.auth.access import SINGLE_USER, Viewer, read_owner, visible
from app.runs.cluster import LOCAL, cluster_of
from app.i18n import Said

DEDUPE_WINDOW_S = 10.0  # the same config submitted again within this window is the same request


class JobError(ValueError):
    """A start, resume or stop the console refuses; the message says why (`said`: the console's own
    words, app.i18n.Said, when it is one)."""

    @property
    def said(self) -> list[str] | None:
        return [self.args[0]] if self.args and isinstance(self.args[0], Said) else None


@dataclass(frozen=True)
class StartResult:
    run_id: str
    started: bool   # False when this request repeated one already handled (double-click)
    message: str
    queued: bool = False  # True when the run waits in the queue for its devices


@dataclass(frozen=True)
class QueueEntry:
    """A queued run as the Runs tab lists it: its place in its device's queue (1 = next)."""
    run_id: str
    position: int
    device: str
    owner: str | None


@dataclass(frozen=True)
class ReattachReport:
    """What startup found: runs still alive (reattached), runs marked failed, and orphan processes."""
    alive: list[str]
    failed: list[str]
    orphans: list[str]
    queued: list[str] = ()


class JobManager:
    """Shared by every session of one console. Launcher functions are injectable for tests."""

    def __init__(self, runs_dir: Path, *, create_run: Callable = launcher.create_run,
                 launch: Callable = launcher.launch, stop: Callable = launcher.stop,
                 reconcile: Callable = launcher.reconcile, dedupe_window_s: float = DEDUPE_WINDOW_S,
                 on_end: Callable[[RunDir], None] | None = None, watch: Callable | None = None,
                 watch_every_s: float = launcher.WATCH_EVERY_S, slots: launcher.DeviceSlots | None = None,
                 poll_s: float = 2.0, backend_for: Callable | None = None, cluster_every_s: float = 2.0):
        self.runs_dir = Path(runs_dir)
        self._create_run, self._launch, self._stop, self._reconcile = create_run, launch, stop, reconcile
        self._watch_once = watch or (launcher.watch if reconcile is launcher.reconcile else reconcile)
        self._watch_every_s = watch_every_s
        self._watching: dict[str, threading.Thread] = {}
        self._on_end = on_end
        self._window = dedupe_window_s
        self._lock = threading.RLock()
        self._recent: dict[str, tuple[float, str]] = {}  # request fingerprint -> (time, run id)
        self._stopping: dict[str, threading.Thread] = {}
        self.slots = slots if slots is not None else launcher.DeviceSlots()
        self._poll_s = poll_s
        self._wake = threading.Event()
        self._scheduler: threading.Thread | None = None
        self._closed = False
        self._devices: dict[str, tuple[str, int]] = {}  # run id -> (device, data_parallel), from its config
        self._backend_for = backend_for  # None: core.run.backends.backend_for
        self._cluster_every_s = cluster_every_s
        self._cluster_runs: dict[str, str] = {}  # run id -> backend name, for runs submitted elsewhere than here

    # -- starting --

    def start(self, config: Config, owner: str | None = None, parent: tuple[str, int | None] | None = None,
              workers_checked: bool = False) -> StartResult:
        """Create a run for `config` and launch it now, or queue it when its devices are busy; once:
        a repeat of the same request within the window returns the run already made instead of a
        second one. `owner` (the logged-in user) and `parent` (the run, and checkpoint step of a
        fork, it was made from) are recorded in the run's status before the worker starts. Whether this
        machine holds the workers is checked here, once, before the run folder is made, unless the
        caller did (`workers_checked`: the Start button's form check); the launch does not check again."""
        config.validate()
        cluster = config.launch.backend != LOCAL
        if not cluster and not workers_checked:  # a cluster run's workers are on its nodes, not here
            launcher.check_workers_available(config.parallel.data_parallel, config.parallel.device)
        key = hashlib.sha256(f"{owner}\n{parent}\n{config.to_yaml()}".encode()).hexdigest()
        with self._lock:
            now = time.monotonic()
            self._recent = {k: v for k, v in self._recent.items() if now - v[0] < self._window}
            if key in self._recent:
                run_id = self._recent[key][1]
                return StartResult(run_id, False, Said("act.already_started", run=run_id))
            made = self._made_just_now(config, owner, parent)
            if made is not None:  # by a console before a restart: its memory is gone, the folder is not
                return StartResult(made, False, Said("act.already_started", run=made))
            run = self._create_run(config)
            fields: dict = {"queue_position": self._next_position(), "device": config.parallel.device,
                            "data_parallel": config.parallel.data_parallel}
            if owner is not None:
                fields["owner"] = owner
            if parent is not None:
                fields.update(parent_run=parent[0], parent_step=parent[1])
            if cluster:
                del fields["queue_position"]  # Slurm queues it
                self._cluster_runs[run.run_id] = config.launch.backend
            run.write_status(**fields)
            self._devices[run.run_id] = (config.parallel.device, config.parallel.data_parallel)
            self._recent[key] = (now, run.run_id)
            if cluster:
                try:
                    return self._submit(run, config.launch.backend)
                except (launcher.LaunchError, ConfigError, OSError):
                    del self._recent[key]  # a refused submission may be corrected and tried again at once
                    raise
            self._schedule()
            return self._start_result(run)

    def _made_just_now(self, config: Config, owner: str | None, parent: tuple[str, int | None] | None) -> str | None:
        """A run folder of the same request (config, owner, parent) created within the dedupe window,
        by this console or by one that was restarted since (a cluster job must not be submitted twice)."""
        if self._window <= 0:
            return None
        text, now = config.to_yaml(), time.time()
        for summary in list_runs(self.runs_dir):
            status = summary.status
            if now - summary.sort_time >= self._window:
                break  # newest first
            if summary.state == "failed":
                continue  # a refused submission may be tried again at once
            if (status.owner, status.parent_run, status.parent_step) != (owner, *(parent or (None, None))):
                continue
            try:
                if RunDir(summary.path).config_path.read_text() == text:
                    return summary.run_id
            except OSError:
                continue
        return None

    def backend(self, name: str):
        """The launcher backend called `name` ("local", "slurm")."""
        return (self._backend_for or backends.backend_for)(name)

    def _backend_name(self, summary_or_status) -> str:
        """The backend a run on disk belongs to: its Slurm job record, or what this console submitted."""
        status = getattr(summary_or_status, "status", summary_or_status)
        job = cluster_of(status)
        if job is not None:
            return job.backend or "slurm"
        return self._cluster_runs.get(status.run_id or "", LOCAL)

    def _submit(self, run: RunDir, backend_name: str) -> StartResult:
        """Hand a new run to its cluster backend (sbatch), then watch it. A refused submission
        leaves the run failed with the scheduler's own words, never half-made."""
        backend = self.backend(backend_name)
        try:
            backend.launch(run)
        except (launcher.LaunchError, ConfigError, OSError) as err:
            self._fail_queued(run, f"not submitted: {err}")
            raise
        self._start_watching(run, refresh=backend.refresh)
        status = run.read_status()
        job = cluster_of(status)
        job_id = job.job_id if job is not None else "?"
        if status.state == "queued":
            said = (Said("act.submitted_pending_reason", run=run.run_id, job=job_id, reason=job.reason)
                    if job is not None and job.reason else Said("act.submitted_pending", run=run.run_id, job=job_id))
            return StartResult(run.run_id, True, said, queued=True)
        return StartResult(run.run_id, True, Said("act.submitted", run=run.run_id, job=job_id,
                                                  state=Said(f"state.{status.state}")))

    def _start_result(self, run: RunDir) -> StartResult:
        status = run.read_status()
        if status.state != "queued":
            return StartResult(run.run_id, True, Said("act.started", run=run.run_id))
        entry = next((e for e in self.queue() if e.run_id == run.run_id), None)
        busy = ", ".join(self._active_ids(status.device or "cpu")) or Said("act.another_run")
        said = (Said("act.queued_place", run=run.run_id, place=entry.position, device=Said(f"act.queue.{entry.device}"),
                     busy=busy) if entry else Said("act.queued", run=run.run_id, busy=busy))
        return StartResult(run.run_id, True, said, queued=True)

    def resume(self, run_id: str, viewer: Viewer = SINGLE_USER, checkpoint: str | None = None,
               backend: str | None = None) -> StartResult:
        """Start a new attempt of a stopped or failed run from its last checkpoint, or from the
        one the user names (`checkpoint`: a folder name in its checkpoints/, e.g. 'step-4'): a
        resume never falls back to another checkpoint by itself. Through the queue: at once when
        its devices are free. `backend` ("local", "slurm") moves the run: a cluster run resumed
        with "local" goes on on this machine with the same data-parallel width (its checkpoint
        is the same files), refused with the reason when this machine cannot hold that many workers."""
        run = self.run_dir(run_id, viewer)
        with self._lock:
            state = self._refresh(run).state
            if state not in ("stopped", "failed"):
                raise JobError(Said("check.not_resumable", run=run_id, state=Said("check.state", state=state)))
            name = checkpoint or "last"
            last = run.checkpoints_dir / name
            if "/" in name or "\\" in name or name.startswith(".") or not last.is_dir():
                if checkpoint:
                    held = ", ".join(sorted(p.name for p in run.checkpoints_dir.iterdir())) or Said("check.nothing")
                    raise JobError(Said("check.no_such_checkpoint", run=run_id, checkpoint=repr(checkpoint), held=held))
                raise JobError(Said("check.no_checkpoint", run=run_id))
            config = load_config(run.config_path)
            if backend is not None and backend != config.launch.backend:
                config = self._moved(run_id, config, backend)
            config = config.with_updates({"run.resume": str(last.absolute())})
            run.restart_for_resume()
            atomic_write(run.config_path, config.to_yaml())
            self._devices[run.run_id] = (config.parallel.device, config.parallel.data_parallel)
            if config.launch.backend != LOCAL:  # a cluster run resumes as a new job of its backend
                self._cluster_runs[run.run_id] = config.launch.backend
                result = self._submit(run, config.launch.backend)
                job = cluster_of(run.read_status())
                return StartResult(run.run_id, True, Said("act.resumed_slurm", run=run.run_id, checkpoint=last.resolve().name,
                                                          job=job.job_id if job else "?"), queued=result.queued)
            self._cluster_runs.pop(run.run_id, None)
            run.write_status(queue_position=self._next_position(), device=config.parallel.device, device_ids=[])
            self._schedule()
            queued = run.read_status().state == "queued"
        return StartResult(run.run_id, True, Said("act.queued_to_resume" if queued else "act.resumed", run=run.run_id,
                                                  checkpoint=last.resolve().name), queued=queued)

    @staticmethod
    def _moved(run_id: str, config: Config, backend: str) -> Config:
        """`config` to go on under `backend`: the data-parallel width stays (a checkpoint holds no
        layout of nodes), so this machine must hold that many workers for a local resume."""
        width = config.parallel.data_parallel
        if backend == LOCAL:
            try:
                launcher.check_workers_available(width, config.parallel.device)
            except ConfigError as err:
                raise JobError(Said("check.resume_here", run=run_id, nodes=config.launch.nodes,
                                    per_node=config.launch.workers_per_node, width=width, problem=err)) from err
        return config.with_updates({"launch.backend": backend})

    # -- the queue --

    def _next_position(self) -> float:
        positions = [s.status.queue_position for s in list_runs(self.runs_dir)
                     if s.state == "queued" and s.status.queue_position is not None]
        return max(positions, default=0.0) + 1.0

    def _device_of(self, summary: RunSummary) -> tuple[str, int]:
        """(device, data_parallel) of a run: its status when the console recorded them, else its config."""
        status = summary.status
        if status.device and status.data_parallel:
            return status.device, status.data_parallel
        if summary.run_id not in self._devices:
            try:
                parallel = load_config(summary.run.config_path).parallel
                self._devices[summary.run_id] = (parallel.device, parallel.data_parallel)
            except (ConfigError, OSError):
                self._devices[summary.run_id] = (status.device or "cpu", status.data_parallel or 1)
        device, width = self._devices[summary.run_id]
        return status.device or device, status.data_parallel or width

    def _active(self, summaries: list[RunSummary]) -> list[launcher.ActiveRun]:
        active = []
        for summary in summaries:
            if summary.state in TERMINAL_STATES or summary.state in ("queued", "unknown"):
                continue
            if self._backend_name(summary) != LOCAL:  # its devices are the cluster's
                continue
            device, width = self._device_of(summary)
            active.append(launcher.ActiveRun(summary.run_id, device, width, tuple(summary.status.device_ids)))
        return active

    def dry_run_env(self, device: str) -> dict[str, str]:
        """The device assignment a dry run gets now (core.run.launcher.dry_run_env)."""
        with self._lock:
            return launcher.dry_run_env(device, self._active(self._reconciled()), self.slots)

    def _active_ids(self, device: str) -> list[str]:
        summaries = list_runs(self.runs_dir)
        return [a.run_id for a in self._active(summaries) if a.device == device]

    def _queued(self, summaries: list[RunSummary]) -> list[tuple[RunSummary, launcher.QueuedRun]]:
        out = []
        for summary in summaries:
            if summary.state != "queued" or self._backend_name(summary) != LOCAL:  # Slurm queues its own
                continue
            device, width = self._device_of(summary)
            position = summary.status.queue_position
            out.append((summary, launcher.QueuedRun(summary.run_id, device, width,
                                                    position if position is not None else summary.sort_time)))
        return sorted(out, key=lambda pair: pair[1].position)

    def _reconciled(self) -> list[RunSummary]:
        """Every run, with the active ones checked for a live process first (a run whose worker
        died, or one started from a shell that ended, frees its devices)."""
        summaries = list_runs(self.runs_dir)
        for summary in summaries:
            if summary.state in ("starting", "running", "stopping") and self._backend_name(summary) == LOCAL:
                try:
                    self._reconcile(RunDir(summary.path))
                except (RunDirError, launcher.LaunchError, OSError):
                    pass
        return list_runs(self.runs_dir)

    def _schedule(self) -> list[str]:
        """Launch the queued runs whose devices are free now; returns their ids. Keeps the scheduler
        thread going while runs are queued."""
        with self._lock:
            summaries = self._reconciled()
            queued = self._queued(summaries)
            plans = launcher.plan_launches([q for _, q in queued], self._active(summaries), self.slots)
            by_id = {s.run_id: s for s, _ in queued}
            started = []
            for plan in plans:
                summary = by_id[plan.run_id]
                device, _ = self._device_of(summary)
                run = RunDir(summary.path)
                try:
                    run.write_status(device_ids=list(plan.device_ids), queue_position=None)
                    self._launch_and_watch(run, launcher.device_env(device, plan.device_ids))
                    started.append(plan.run_id)
                except (launcher.LaunchError, ConfigError, RunDirError, OSError) as err:
                    self._fail_queued(run, f"could not start: {err}")
            if len(queued) > len(started):
                self._ensure_scheduler()
            return started

    def _fail_queued(self, run: RunDir, reason: str) -> None:
        try:
            if run.read_status().state == "queued":
                run.write_status(state="failed", reason=reason, failure_kind="config")
        except RunDirError:
            pass

    def _ensure_scheduler(self) -> None:
        if self._closed or (self._scheduler is not None and self._scheduler.is_alive()):
            return
        self._scheduler = threading.Thread(target=self._watch_queue, daemon=True, name="run-queue")
        self._scheduler.start()

    def _watch_queue(self) -> None:
        """Start queued runs as devices free up, until the queue is empty."""
        while True:
            self._wake.wait(self._poll_s)
            self._wake.clear()
            if self._closed:
                return
            try:
                with self._lock:
                    self._schedule()
                    if not any(s.state == "queued" for s in list_runs(self.runs_dir)):
                        self._scheduler = None
                        return
            except Exception as err:  # noqa: BLE001 — the queue must outlive one bad run folder
                print(f"mindtune: queue: {err}", flush=True)

    def close(self) -> None:
        """Stop starting queued runs (the queue stays on disk for the next console); for shutdown."""
        self._closed = True
        self._wake.set()
        if self._scheduler is not None:
            self._scheduler.join(5.0)

    def poke(self) -> None:
        """Look at the queue now (a worker exited, a run was cancelled or moved)."""
        self._wake.set()

    def queue(self, viewer: Viewer = SINGLE_USER) -> list[QueueEntry]:
        """The queued runs `viewer` may see, in order, each with its place in its device's queue
        (counting every user's runs ahead of it: that is how long it waits)."""
        entries, places = [], {}
        for summary, queued in self._queued(list_runs(self.runs_dir)):
            places[queued.device] = places.get(queued.device, 0) + 1
            if viewer.may_see(summary.status):
                entries.append(QueueEntry(summary.run_id, places[queued.device], queued.device, summary.status.owner))
        return entries

    def cluster_queue(self, viewer: Viewer = SINGLE_USER) -> list[QueueEntry]:
        """The cluster runs `viewer` may see that are pending in their scheduler, per backend in the
        scheduler's order when the backend can list its queue (`can_queue`: Slurm's by priority, then
        submission), else in the order they were submitted; each with its place among every pending job."""
        pending: dict[str, dict[str, RunSummary]] = {}
        for summary in list_runs(self.runs_dir):
            if summary.state == "queued" and (name := self._backend_name(summary)) != LOCAL:
                pending.setdefault(name, {})[summary.run_id] = summary
        entries = []
        for name, by_id in pending.items():
            for place, run_id in enumerate(self._scheduler_order(name, by_id), start=1):
                summary = by_id.get(run_id)
                if summary is not None and viewer.may_see(summary.status):
                    entries.append(QueueEntry(run_id, place, name, summary.status.owner))
        return entries

    def _scheduler_order(self, name: str, by_id: dict[str, RunSummary]) -> list[str]:
        """The pending runs' ids in the order backend `name`'s scheduler will start them."""
        backend = self.backend(name)
        if backend.can_queue:
            try:
                return [e.run_id for e in backend.queue(self.runs_dir) if e.state == "PENDING"]
            except (launcher.LaunchError, OSError) as err:  # the scheduler does not answer: submission order
                print(f"mindtune: {name} queue: {err}", flush=True)
        return sorted(by_id, key=lambda r: (by_id[r].status.cluster.submitted_at or 0.0, r))

    def move(self, run_id: str, offset: int, viewer: Viewer = SINGLE_USER) -> str:
        """Move a queued run `offset` places earlier (-1) or later (+1) among the queued runs
        `viewer` may see (a user reorders their own runs; an admin every run)."""
        self.run_dir(run_id, viewer)
        with self._lock:
            mine = [s for s, _ in self._queued(list_runs(self.runs_dir)) if viewer.may_see(s.status)]
            ids = [s.run_id for s in mine]
            if run_id not in ids:
                if run_id in [e.run_id for e in self.cluster_queue(viewer)]:
                    raise JobError(f"{run_id} is pending in Slurm, which orders its own queue (by priority)")
                raise JobError(f"{run_id} is not queued")
            index = ids.index(run_id)
            target = min(max(index + offset, 0), len(ids) - 1)
            if target == index:
                return Said("act.already_first" if index == 0 else "act.already_last", run=run_id)
            positions = [s.status.queue_position or s.sort_time for s in mine]
            order = ids[:index] + ids[index + 1:]
            order.insert(target, run_id)
            for new_id, position in zip(order, sorted(positions)):  # the same slots, in the new order
                RunDir(self.runs_dir / new_id).write_status(queue_position=position)
        self.poke()
        return Said("act.moved_up" if offset < 0 else "act.moved_down", run=run_id, place=target + 1)

    def cancel(self, run_id: str, viewer: Viewer = SINGLE_USER) -> str:
        """Take a queued run out of the queue (it ends `stopped`, 'cancelled before it started');
        a cluster run pending in Slurm is cancelled there (the backend's stop: scancel)."""
        run = self.run_dir(run_id, viewer)
        with self._lock:
            status = run.read_status()
            state = status.state
            if state != "queued":
                raise JobError(f"{run_id} is not queued (it is {state}); stop it instead")
            name = self._backend_name(status)
            if name != LOCAL:
                self.backend(name).stop(run, graceful=False)
                job = cluster_of(run.read_status())
                return Said("act.cancelled_slurm", run=run_id, job=job.job_id if job else "?")
            run.write_status(state="stopped", reason=launcher.CANCELLED_REASON, queue_position=None)
        self.poke()
        return Said("act.cancelled", run=run_id)

    def _launch_and_watch(self, run: RunDir, env: dict[str, str] | None = None) -> None:
        launched = self._launch(run, env=env) if env else self._launch(run)
        process = getattr(launched, "process", None)
        if process is not None:
            self._start_watching(run, process)

    def follow(self, run: RunDir) -> None:
        """Watch a cluster run this console did not submit (from a shell, or by another console)
        while a page shows it, so its Slurm state and an end Slurm caused reach its folder."""
        with self._lock:
            worker = self._watching.get(run.run_id)
            if self._closed or (worker is not None and worker.is_alive()):
                return
            try:
                status = run.read_status()
            except RunDirError:
                return
            job, name = cluster_of(status), self._backend_name(status)
            if name == LOCAL or job is None or not job.job_id or job.state in ENDED_STATES:
                return
            self._start_watching(run, refresh=self.backend(name).refresh)

    def _start_watching(self, run: RunDir, process=None, refresh: Callable | None = None) -> None:
        """Watch a run until it is over: a local one with the launcher's watch, a cluster one
        with its backend's `refresh` (run folder first, Slurm second)."""
        worker = threading.Thread(target=self._watch, args=(run, process, refresh), daemon=True,
                                  name=f"watch-{run.run_id}")
        self._watching[run.run_id] = worker
        worker.start()

    def _watch(self, run: RunDir, process=None, refresh: Callable | None = None) -> None:
        """The console's watcher of one run, every watch_every_s until it is over and nothing of it
        is left: reaps our child (no zombie), sees a rank that died or hung (core.run.launcher.watch)
        and tears down what a finished run left; then the end-of-run hook."""
        while True:
            exited = process is not None and process.poll() is not None
            try:
                status = (refresh or self._watch_once)(RunDir(run.path.resolve()))
            except (RunDirError, launcher.LaunchError, OSError) as err:
                if refresh is None:
                    return
                print(f"mindtune: watching {run.run_id}: {err}", flush=True)  # Slurm may answer next time
                time.sleep(self._cluster_every_s)
                continue
            over = status.state in TERMINAL_STATES
            if refresh is not None:  # a cluster run is over once its job is: until then its ranks may still exit
                job = cluster_of(status)
                over = over and (job is None or not job.job_id or job.state in ENDED_STATES)
            if over and (process is None or exited) and (refresh is not None or not self._processes_left(run)):
                self._ended(run, status)
                return
            time.sleep(self._cluster_every_s if refresh is not None else self._watch_every_s)

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
        self.poke()  # its devices are free: the next queued run may start
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
            status = run.read_status()
            if status.state == "queued":  # not started: leaves the queue at once (Slurm's: scancel)
                return self.cancel(run_id, viewer)
            name = self._backend_name(status)
            worker = self._stopping.get(run_id)
            if worker is not None and worker.is_alive() and graceful:
                return Said("act.stop_under_way", run=run_id)
            stop = self._stop if name == LOCAL else self.backend(name).stop
            worker = threading.Thread(target=self._stop_quietly, args=(run, graceful, stop), daemon=True,
                                      name=f"stop-{run_id}")
            self._stopping[run_id] = worker
            worker.start()
        return Said("act.stopping" if graceful else "act.stopping_now", run=run_id)

    def _stop_quietly(self, run: RunDir, graceful: bool, stop: Callable | None = None) -> None:
        try:
            (stop or self._stop)(run, graceful=graceful)
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
            raise JobError(Said("check.not_run_id", run=repr(run_id)))
        run = RunDir(self.runs_dir / run_id)
        if not run.exists() or not viewer.may_see(read_owner(run.path)):
            raise JobError(Said("check.no_run", run=run_id, folder=str(self.runs_dir)))
        return RunDir(run.path.resolve())

    def runs(self, viewer: Viewer = SINGLE_USER) -> list[RunSummary]:
        """The runs `viewer` may see, newest first."""
        return visible(viewer, list_runs(self.runs_dir))

    def current_status(self, run_id: str, viewer: Viewer = SINGLE_USER) -> Status:
        """The run's status after checking that an active run still has a process (a cluster
        run: its job, through its backend)."""
        return self._refresh(self.run_dir(run_id, viewer))

    def _refresh(self, run: RunDir) -> Status:
        """A run's status reconciled by its backend: a local run's processes, a cluster run's job."""
        name = self._backend_name(run.read_status())
        return self._reconcile(run) if name == LOCAL else self.backend(name).refresh(run)

    def reattach(self) -> ReattachReport:
        """At startup: reconcile every run that says it is active; keep watching the live ones
        (through their files), mark the dead ones failed, and list orphan processes."""
        alive, failed = self._reattach_cluster()
        for summary in list_runs(self.runs_dir):
            if summary.state in TERMINAL_STATES or summary.state in ("unknown", "queued"):
                continue
            if self._backend_name(summary) != LOCAL:
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
        queued = [s.run_id for s in list_runs(self.runs_dir) if s.state == "queued" and self._backend_name(s) == LOCAL]
        if queued:  # the queue survives a restart: carry on with it
            self._schedule()
        return ReattachReport(alive, failed, orphans, queued)

    def _reattach_cluster(self) -> tuple[list[str], list[str]]:
        """Cluster jobs that are pending or running (their job id is in their run folder; the
        backend's `active` finds them): watched again, through their backend. Slurm not answering
        leaves them as they are (the next console finds them again)."""
        alive: list[str] = []
        failed: list[str] = []
        names = {self._backend_name(s) for s in list_runs(self.runs_dir)} - {LOCAL}
        for name in sorted(names):
            backend = self.backend(name)
            try:
                runs = backend.active(self.runs_dir)
            except (launcher.LaunchError, OSError) as err:
                print(f"mindtune: cannot ask {name} for its jobs: {err}", flush=True)
                continue
            for run in runs:
                if run.run_id in self._watching and self._watching[run.run_id].is_alive():
                    continue
                try:
                    status = backend.refresh(run)
                except (RunDirError, launcher.LaunchError, OSError) as err:
                    print(f"mindtune: cannot check {run.run_id}: {err}", flush=True)
                    continue
                (failed if status.state == "failed" else alive).append(run.run_id)
                if status.state not in TERMINAL_STATES:
                    self._start_watching(run, refresh=backend.refresh)
        return alive, failed

