"""The console's side of cluster runs: whether the Train tab may offer a Slurm partition, the
"Where to run" choices, and a Slurm job in words for the Monitor and Runs tabs.

Slurm itself (sbatch, squeue, sacct, scancel, scontrol) is core.run.slurm's; the console only asks it
what partitions there are and reads `Status.cluster` (core.run.records.ClusterJob) from the run folder.
Plain values in and out, so the tests need neither a browser nor a cluster.
"""
from __future__ import annotations

import html
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import core.run.slurm as slurm
from core.spec.config import ConfigError
from core.run.launcher import LaunchError
from core.spec.errors import said_of
from core.run.records import TERMINAL_STATES, RunDirError, Status
from core.run.rundir import RunDir

from app.tabs.form import LOCAL, SLURM_PREFIX, parse_where
from app.i18n import problem_text, text

OFFER_TTL_S = 30.0        # sinfo is asked at most this often for the choices
# Slurm's end states the console shows as what they are, not as a crash
SLURM_ENDS = ("CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE")


@dataclass(frozen=True)
class ClusterOffer:
    """What the Train tab may offer: Slurm's partitions, or why Slurm is not offered (English;
    `problem_text` translates it)."""
    partitions: tuple[slurm.Partition, ...] = ()
    refusal: str | None = None

    @property
    def offered(self) -> bool:
        return self.refusal is None and bool(self.partitions)


def shared_dir_refusal(runs_dir: Path, shared_dir: Path | None) -> str | None:
    """Why a cluster run cannot use `runs_dir` (every node must see it, so it must lie under the
    console's --cluster-shared-dir; core.run.slurm's message names the option), or None when it can."""
    try:
        slurm.check_shared(runs_dir, shared_dir)
    except LaunchError as err:
        return said_of(err)  # core's message, said in the page's language by its id
    return None


def read_offer(runs_dir: Path, shared_dir: Path | None, available: Callable[[], str | None] = slurm.available,
               partitions: Callable[[], list[slurm.Partition]] = slurm.partitions) -> ClusterOffer:
    """Ask Slurm (core.run.slurm) once: its partitions, or why none is offered (the runs folder is not
    shared; no controller answers; no partition)."""
    refusal = shared_dir_refusal(runs_dir, shared_dir)
    if refusal:
        return ClusterOffer(refusal=refusal)
    why = available()
    if why:
        return ClusterOffer(refusal=f"Slurm does not answer: {why}")
    found = tuple(partitions())
    if not found:
        return ClusterOffer(refusal="Slurm answers but has no partition")
    return ClusterOffer(found)


@dataclass
class ClusterOffers:
    """The console's cached answer of `read_offer` (every page shares it; re-read after OFFER_TTL_S)."""
    runs_dir: Path
    shared_dir: Path | None
    reader: Callable[..., ClusterOffer] = read_offer
    check_submission: Callable | None = None  # what Slurm would refuse (None: core.run.slurm.check_submission)
    ttl_s: float = OFFER_TTL_S
    _cached: tuple[float, ClusterOffer] | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def get(self, refresh: bool = False) -> ClusterOffer:
        with self._lock:
            now = time.monotonic()
            if refresh or self._cached is None or now - self._cached[0] > self.ttl_s:
                try:
                    offer = self.reader(self.runs_dir, self.shared_dir)
                except (OSError, LaunchError) as err:  # Slurm missing or unreadable: local runs still work
                    offer = ClusterOffer(refusal=f"Slurm does not answer: {err}")
                self._cached = (now, offer)
            return self._cached[1]


# ---- "Where to run" ---------------------------------------------------------------------------

def where_choices(offer: ClusterOffer, lang: str = "en", current: str | None = None) -> list[tuple[str, str]]:
    """(label, value): this machine, then each partition Slurm offers ("Slurm partition debug (2
    nodes)"); a current Slurm choice no longer offered stays listed, so a loaded config shows it."""
    choices = [(text("where.local", lang), LOCAL)]
    for part in offer.partitions if offer.refusal is None else ():
        label = text("where.partition", lang).format(name=part.name, n=part.nodes)
        if part.state.lower() not in ("up", "up*"):
            label += f" [{part.state}]"
        choices.append((label, f"{SLURM_PREFIX}{part.name}"))
    if current and current != LOCAL and current not in [v for _, v in choices]:
        choices.append((text("where.partition_unknown", lang).format(name=parse_where(current)[1] or "-"), current))
    return choices


def where_note(offer: ClusterOffer, lang: str = "en") -> str:
    """The help line under "Where to run": why no partition is offered, or what a Slurm run needs."""
    if offer.refusal:
        return text("where.refused", lang).format(why=problem_text(offer.refusal, lang))
    return text("help.where", lang)


def cluster_errors(config: Any, offer: ClusterOffer, ask_slurm: bool = True,
                   check_submission: Callable | None = None) -> dict[str, str]:
    """What stops a cluster run before it is submitted, by config key: Slurm is not offered here
    (naming --cluster-shared-dir when that is why); with `ask_slurm`, what Slurm would refuse
    (core.run.slurm.check_submission: a partition or account it does not know, more nodes than the
    partition has, a time limit over the partition's)."""
    if offer.refusal:
        return {"launch.backend": offer.refusal}
    if not ask_slurm:
        return {}
    try:
        (check_submission or slurm.check_submission)(config)
    except ConfigError as err:
        return dict(err.errors)
    except LaunchError as err:  # Slurm did not answer
        return {"launch.backend": said_of(err)}
    return {}


# ---- a Slurm job in words -----------------------------------------------------------------------

def cluster_of(status: Status) -> Any | None:
    """The run's Slurm job record (core.run.records.ClusterJob), or None for a run on this machine."""
    return getattr(status, "cluster", None)


def is_cluster(status: Status) -> bool:
    return cluster_of(status) is not None


def cancelled(status: Status) -> bool:
    """A job cancelled in Slurm by scancel (while pending, or from outside the console): shown as
    cancelled, never as a crash. A Stop pressed in the console also ends in scancel, and stays
    'stopped' as a local run's would (core.run.slurm's reason then names no scancel)."""
    job = cluster_of(status)
    return (job is not None and (job.state or "").split(" ")[0] == "CANCELLED" and status.state == "stopped"
            and "scancel" in (status.reason or ""))


def shown_state(status: Status) -> str:
    """The state word of the badge: the run's own, except 'cancelled' for a job cancelled in Slurm."""
    return "cancelled" if cancelled(status) else (status.state or "unknown")


def reason_words(reason: str | None, lang: str = "en") -> str:
    """Slurm's pending reason with what it means: 'Resources (waiting for nodes to be free)'."""
    if not reason or reason == "None":
        return ""
    key = f"slurm.reason.{reason}"
    meaning = text(key, lang)
    return f"{reason} ({meaning})" if meaning != key else reason


def rank_node(status: Status, rank: int | None, run: RunDir | None = None) -> str | None:
    """The node a data-parallel rank ran on: its own record in ranks/ (core.run.ranks writes the
    Slurm node name), else from its number (msrun numbers ranks node by node: node_rank × workers
    per node + local rank, nodes in Slurm's order)."""
    job = cluster_of(status)
    if job is None or rank is None:
        return None
    if run is not None:
        import core.run.ranks as ranks
        try:
            node = ranks.rank_records(run, status.attempt).get(rank, {}).get("node")
        except (OSError, RunDirError, ValueError):
            node = None
        if node:
            return str(node)
    if not job.nodes:
        return None
    world = status.rank_count or status.data_parallel or len(job.nodes)
    per_node = max(world // len(job.nodes), 1)
    index = rank // per_node
    return job.nodes[index] if 0 <= index < len(job.nodes) else None


def cluster_html(status: Status, lang: str = "en") -> str:
    """The Monitor's line about the Slurm job: id, partition, nodes, Slurm's state and, while it
    is pending, Slurm's reason; after Slurm ended it (time limit, node failure, preemption, out of
    memory, scancel), what that means. '' for a run on this machine."""
    job = cluster_of(status)
    if job is None:
        return ""
    slurm_state = (job.state or "").split(" ")[0]
    parts = [f'{html.escape(text("cluster.job", lang))} <code id="cluster-job-id">{html.escape(job.job_id or "-")}</code>']
    if job.partition:
        parts.append(f'{html.escape(text("cluster.partition", lang))} <code>{html.escape(job.partition)}</code>')
    none = "cluster.never_ran" if status.state in TERMINAL_STATES else "cluster.no_nodes"
    nodes = ", ".join(job.nodes) if job.nodes else text(none, lang)
    parts.append(f'{html.escape(text("cluster.nodes", lang))} <span id="cluster-nodes">{html.escape(nodes)}</span>')
    parts.append(f'{html.escape(text("cluster.state", lang))} <b id="cluster-state">{html.escape(slurm_state or "-")}</b>')
    line = " · ".join(parts)
    reason = reason_words(job.reason, lang) if slurm_state == "PENDING" or status.state == "queued" else ""
    if reason:
        line += (f'<div class="mt-cluster-reason" id="cluster-reason">{html.escape(text("cluster.reason", lang))}: '
                 f'<b>{html.escape(reason)}</b></div>')
    if slurm_state in SLURM_ENDS and status.state in TERMINAL_STATES:
        line += f'<div class="mt-cluster-end" id="cluster-end">{html.escape(text(f"slurm.end.{slurm_state}", lang))}</div>'
    return f'<div class="mt-cluster" id="cluster-job" data-state="{html.escape(slurm_state)}">{line}</div>'


def queue_label(status: Status, lang: str = "en") -> str:
    """How the Runs tab's queue names a pending cluster run: 'Slurm job 42 on debug · Resources'."""
    job = cluster_of(status)
    if job is None:
        return ""
    label = text("cluster.queue_item", lang).format(job=job.job_id or "-", partition=job.partition or "-")
    reason = reason_words(job.reason, lang)
    return f"{label} · {reason}" if reason else label
