"""Runs on a Slurm cluster: the `slurm` launcher backend (core.launcher.Backend).

A cluster run is a run folder like any other, on storage every node sees. Submitting it writes
`job.sbatch` into the folder and runs `sbatch --parsable` (argv lists only, never a shell); the
script's `srun` starts one `python -m core.slurm_node` per node, which starts msrun with
`--node_rank` from SLURM_NODEID, `--master_addr` the first host of the allocation and
`--worker_num = nodes x workers_per_node`. The run's state comes from its folder first (rank 0's
status, every rank's record in ranks/) and from Slurm (`squeue`, `scontrol show job`, `sacct`) for
what the folder cannot say: pending and why, the nodes, a job Slurm cancelled or killed.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

from core.launcher import LaunchError
from core.rundir import RunDir, Status

__all__ = ["SlurmBackend", "Partition", "available", "partitions", "check_shared"]


@dataclass(frozen=True)
class Partition:
    """A Slurm partition as the console's "Where to run" lists it."""
    name: str
    nodes: int
    state: str            # Slurm's: UP, DOWN, DRAIN, INACTIVE
    default: bool = False
    max_time: str | None = None


def available() -> str | None:
    """None when a Slurm controller answers, else why not (for disabling the choice)."""
    raise NotImplementedError


def partitions() -> list[Partition]:
    """The cluster's partitions (name, node count, state), the default first."""
    raise NotImplementedError


def check_shared(runs_dir: str | os.PathLike, shared_dir: str | os.PathLike | None) -> None:
    """Refuse (LaunchError naming --cluster-shared-dir) a runs folder the nodes may not see."""
    raise NotImplementedError


class SlurmBackend:
    name = "slurm"
    uses_own_queue = False

    def launch(self, run: RunDir, env: Mapping[str, str] | None = None) -> None:
        raise NotImplementedError

    def refresh(self, run: RunDir) -> Status:
        raise NotImplementedError

    def stop(self, run: RunDir, graceful: bool = True) -> Status:
        raise NotImplementedError

    def active(self, runs_dir: str | os.PathLike) -> list[RunDir]:
        raise NotImplementedError
