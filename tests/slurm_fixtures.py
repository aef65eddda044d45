"""The Slurm test cluster for tests that need one (`scripts/slurm_cluster.sh start`, which `make test`
runs as root): `require_slurm()` skips with the reason when no controller answers, or fails when
MINDTUNE_REQUIRE_SLURM=1 (as .ci/run sets: a silent skip would hide a broken setup). Tests that use
it are marked `slurm` (deselect with -m 'not slurm')."""
from __future__ import annotations

import os
import time

import pytest

from tests import skips

PARTITION = "debug"  # the test cluster's partition: node1 and node2, both on this machine


def require_slurm() -> None:
    import core.run.slurm as slurm

    reason = slurm.available()
    if reason is None:
        found = {p.name: p for p in slurm.partitions()}
        if PARTITION not in found or found[PARTITION].nodes < 2:
            reason = f"the Slurm cluster has no 2-node partition {PARTITION!r} (partitions: {', '.join(found) or 'none'})"
    if reason is None:
        return
    reason = f"no Slurm test cluster: {reason} (start one: sudo bash scripts/slurm_cluster.sh start)"
    if os.environ.get("MINDTUNE_REQUIRE_SLURM") == "1":
        pytest.fail(f"MINDTUNE_REQUIRE_SLURM=1 but {reason}")
    skips.skip("slurm", reason)


def wait_for(what, timeout_s: float, every_s: float = 0.5, message: str = ""):
    """Poll `what()` until it returns something truthy (returned), or fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = what()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s:g} s waiting for {message or what}")
        time.sleep(every_s)


ACTIVE = ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", None)


def refreshed_until_over(run, timeout_s: float, what: str):
    """The backend's refresh of a Slurm run until the run is over, in whatever end state (the caller
    asserts which, with the run's reason): a failed run ends the wait at once instead of the deadline;
    then until Slurm's own state of the job is over too (sacct can lag the run's status by seconds)."""
    from core.run.records import TERMINAL_STATES
    from core.run.slurm import SlurmBackend
    backend, seen = SlurmBackend(), []

    def refreshed(done):
        seen[:] = [backend.refresh(run)]
        return seen[0] if done(seen[0]) else None

    def where() -> str:
        s = seen[0] if seen else run.read_status()
        job = s.cluster
        return f"{s.state}, Slurm {job.state if job else None} ({job.reason if job else ''}): {s.reason}"

    deadline = time.monotonic() + timeout_s
    for done in (lambda s: s.state in TERMINAL_STATES, lambda s: s.cluster is None or s.cluster.state not in ACTIVE):
        while (status := refreshed(done)) is None:
            if time.monotonic() > deadline:
                pytest.fail(f"timed out after {timeout_s:g} s waiting for {what}; the run is {where()}")
            time.sleep(1.0)
        deadline = max(deadline, time.monotonic() + 60)  # Slurm's accounting catches up within a minute
    return status
