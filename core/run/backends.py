"""The launcher backend seam: where a run runs.

The console, the CLI and reattach talk to a `Backend` only: `local` (core.run.launcher) runs the
worker as processes of this machine, `slurm` (core.run.slurm) submits a batch job that runs msrun
on every node. docs/launcher_backends.md says how a third one (Kubernetes) would fit.

This module sits above both: it imports core.run.launcher and core.run.slurm, and neither imports
it, so the Slurm backend can use the launcher's process helpers without a circle. The launcher's
own functions (stop, reconcile, watch) are local only: they leave a run with a scheduler's job
(`status.cluster`) to its backend.
"""
from __future__ import annotations

import os
from typing import Callable, Mapping, Protocol, runtime_checkable

import core.run.launcher as launcher
from core.run.launcher import LaunchedRun, LaunchError
from core.run.records import RunDirError, Status
from core.run.rundir import RunDir
from core.run.runs import list_runs
from core.run.slurm import SlurmBackend
from core.spec.config import Config
from core.spec.errors import said_of

__all__ = ["Backend", "LocalBackend", "SlurmBackend", "REGISTRY", "ACTIVE_STATES", "register", "backend",
           "backend_for"]

ACTIVE_STATES = ("starting", "running", "stopping")


@runtime_checkable
class Backend(Protocol):
    """One way of running a run folder's worker(s). The run folder is the contract: every backend
    starts from a `queued` run, and its workers write the same status, metrics, ranks/ and
    checkpoints, so the Monitor, resume and fork do not care where a run ran."""
    name: str                # its key in REGISTRY: "local" | "slurm"
    uses_own_queue: bool     # True: the console's queue decides when a run starts; False: the scheduler's
    can_queue: bool          # True: `queue(runs_dir)` lists the scheduler's queue of this runs folder, in its order

    def launch(self, run: RunDir, env: Mapping[str, str] | None = None) -> LaunchedRun | None:
        """Start (or submit) a queued run; raises LaunchError (the run folder says why when it failed)."""

    def refresh(self, run: RunDir) -> Status:
        """The run's status, reconciled: its folder first, the processes / scheduler second."""

    def stop(self, run: RunDir, graceful: bool = True) -> Status:
        """Graceful: the control request every rank reads (a checkpoint, then the end), with the
        backend's own fallback; not graceful: at once. Nothing of the run keeps running."""

    def active(self, runs_dir: str | os.PathLike) -> list[RunDir]:
        """This backend's runs that are pending or running (what a restarted console reattaches to)."""


class LocalBackend:
    """Processes on this machine (core.run.launcher's functions, unchanged)."""
    name = "local"
    uses_own_queue = True
    can_queue = False  # its queue is the console's (core.run.launcher.plan_launches), not a scheduler's

    def launch(self, run: RunDir, env: Mapping[str, str] | None = None) -> LaunchedRun:
        return launcher.launch(run, env=env)

    def refresh(self, run: RunDir) -> Status:
        return launcher.watch(run)

    def stop(self, run: RunDir, graceful: bool = True) -> Status:
        return launcher.stop(run, graceful=graceful)

    def active(self, runs_dir: str | os.PathLike) -> list[RunDir]:
        return [RunDir(s.path) for s in list_runs(runs_dir)
                if s.status.state in ACTIVE_STATES and s.status.cluster is None]


# name -> the backend's constructor; a third backend (docs/launcher_backends.md) registers itself here
REGISTRY: dict[str, Callable[[], Backend]] = {}


def register(name: str, make: Callable[[], Backend]) -> None:
    """Make `launch.backend: <name>` (and a run folder whose cluster job says `name`) run on `make()`."""
    REGISTRY[name] = make


register("local", LocalBackend)
register("slurm", SlurmBackend)


def backend(name: str | None) -> Backend:
    """The backend registered as `name` (None: local); LaunchError for a name no backend has."""
    make = REGISTRY.get(name or "local")
    if make is None:
        raise LaunchError(f"launch.backend {name!r}: unknown; use one of {', '.join(REGISTRY)}")
    return make()


def backend_for(what: Config | RunDir | Status | str | None = None) -> Backend:
    """The backend of a config (`launch.backend`), of a run folder or status (a run with a
    `cluster` job is its scheduler's), or by name; None is local."""
    name = what
    if isinstance(what, Config):
        name = what.launch.backend
    elif isinstance(what, RunDir):
        try:
            name = what.read_status()
        except RunDirError as err:
            raise LaunchError(said_of(err)) from None
    if isinstance(name, Status):
        name = name.cluster.backend if name.cluster is not None else None
    return backend(name)
