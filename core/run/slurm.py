"""Runs on a Slurm cluster: the `slurm` launcher backend (core.run.backends.Backend).

A cluster run is a run folder like any other, on storage every node sees. Submitting it writes
`job.sbatch` into the folder and runs `sbatch --parsable` (argv lists only, never a shell); the
script's `srun` starts one `python -m core.slurm_node` per node, which starts msrun with
`--node_rank` from SLURM_NODEID, `--master_addr` the first host of the allocation and
`--worker_num = nodes x workers_per_node`. The run's state comes from its folder first (rank 0's
status, every rank's record in ranks/) and from Slurm (`squeue`, `scontrol show job`, `sacct`) for
what the folder cannot say: pending and why, the nodes, a job Slurm cancelled or killed.

    python -m core.train --config configs/lora_demo.yaml launch.backend=slurm launch.nodes=2 \\
        parallel.data_parallel=2 launch.partition=debug      # submits, prints the job id and run folder

Knows `core.spec.config`, `core.run.rundir`, `core.run.ranks` and `core.run.launcher` (all MindSpore-free).
"""
from __future__ import annotations

import fcntl
import os
import re
import shlex
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Mapping

import core.run.ranks as ranks
from core.run.atomic import atomic_write
from core.spec.config import Config, ConfigError, Problem, load_config, time_limit_minutes
from core.spec.errors import said_of
from core.spec.messages import Message
from core.run.launcher import _read_status as _read, _wait_until  # noqa: PLC2701 (the launcher's own helpers)
from core.run.launcher import (
    CANCELLED_REASON, ENV_RUN_DIR, FORCED_STOP_REASON, REPO_ROOT, LaunchError, command_preview, free_port,
    log_header, teardown,
)
from core.run.records import SLURM_ACTIVE_STATES, TERMINAL_STATES, ClusterJob, RunDirError, Status
from core.run.rundir import RunDir
from core.run.runs import list_runs

__all__ = ["SlurmBackend", "SlurmError", "Partition", "JobInfo", "QueueEntry", "available", "partitions",
           "check_shared", "check_submission", "job_info", "build_script", "sbatch_argv", "SHARED_DIR_OPTION"]

SHARED_DIR_OPTION = "--cluster-shared-dir"
SLURM_TIMEOUT_S = 30.0
SCRIPT_NAME = "job.sbatch"
GRACEFUL_TIMEOUT_S = 120.0   # a graceful stop waits this long for the checkpoint before scancel --signal=TERM
TERM_TIMEOUT_S = 30.0        # ... and this long after it before scancel
JOB_GONE_TIMEOUT_S = 90.0    # how long stop waits for Slurm to end the job
POLL_S = 0.5                 # how often stop asks Slurm
# Slurm's final job states and what they mean for the run (when its folder has no verdict)
ENDED_STATES = ("COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY",
                "BOOT_FAIL", "DEADLINE", "REVOKED", "SPECIAL_EXIT")


class SlurmError(LaunchError):
    """Slurm did not answer or refused; the message has its own words."""


# ---- talking to Slurm -----------------------------------------------------------------------

def _slurm(argv: list[str], timeout_s: float = SLURM_TIMEOUT_S,
           env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run one Slurm client command (argv, no shell) and return its result."""
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL,
                              env=dict(env) if env is not None else None, check=False)
    except FileNotFoundError:
        raise SlurmError(Message("slurm.not_installed", program=argv[0])) from None
    except subprocess.TimeoutExpired:
        raise SlurmError(Message("slurm.no_answer", command=command_preview(argv), seconds=f"{timeout_s:g}")) from None


def _said(result: subprocess.CompletedProcess) -> str:
    """What a failed Slurm command said, in one line (its stderr, else stdout)."""
    text = (result.stderr or "").strip() or (result.stdout or "").strip() or f"exit status {result.returncode}"
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return " / ".join(lines[-3:])


_KEY = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_:/]*)=")


def _key_values(line: str) -> dict[str, str]:
    """`scontrol show ... -o` output ('JobId=5 JobName=x Reason=None ...') as a dict."""
    found = list(_KEY.finditer(line))
    return {m.group(1): line[m.end():(found[i + 1].start() if i + 1 < len(found) else len(line))].strip()
            for i, m in enumerate(found)}


def available() -> str | None:
    """None when a Slurm controller answers, else why not (the console disables Slurm with it)."""
    try:
        result = _slurm(["sinfo", "-h", "-o", "%P"], timeout_s=10.0)
    except SlurmError as err:
        return err.args[0]
    if result.returncode != 0:
        return Message("slurm.no_controller", slurm_says=_said(result))
    return None


@dataclass(frozen=True)
class Partition:
    """A Slurm partition as the console's "Where to run" lists it."""
    name: str
    nodes: int
    state: str                    # Slurm's: UP, DOWN, DRAIN, INACTIVE
    default: bool = False
    max_time: str | None = None   # Slurm's form, or UNLIMITED
    max_nodes: int | None = None  # per job, None when unlimited


def partitions() -> list[Partition]:
    """The cluster's partitions, the default first (raises SlurmError when Slurm does not answer)."""
    result = _slurm(["scontrol", "show", "partition", "-o"])
    if result.returncode != 0:
        raise SlurmError(Message("slurm.partitions_failed", slurm_says=_said(result)))
    out = []
    for line in result.stdout.splitlines():
        kv = _key_values(line)
        if "PartitionName" not in kv:
            continue
        max_nodes = kv.get("MaxNodes", "UNLIMITED")
        out.append(Partition(kv["PartitionName"], int(kv.get("TotalNodes") or 0), kv.get("State", "UNKNOWN"),
                             kv.get("Default") == "YES", kv.get("MaxTime") or None,
                             int(max_nodes) if max_nodes.isdigit() else None))
    return sorted(out, key=lambda p: (not p.default, p.name))


def check_shared(runs_dir: str | os.PathLike, shared_dir: str | os.PathLike | None) -> None:
    """Refuse a runs folder the nodes may not see: it must be inside the folder the console was told
    is on shared storage (`--cluster-shared-dir`). Raises LaunchError naming the setting."""
    if not shared_dir:
        raise LaunchError(Message("run.check.shared_needed", option=SHARED_DIR_OPTION))
    shared = os.path.realpath(shared_dir)
    runs = os.path.realpath(runs_dir)
    if not os.path.isdir(shared):
        raise LaunchError(Message("run.check.shared_missing", option=SHARED_DIR_OPTION, folder=str(shared_dir)))
    if os.path.commonpath([runs, shared]) != shared:
        raise LaunchError(Message("run.check.shared_outside", runs=runs, option=SHARED_DIR_OPTION, shared=shared))


def check_submission(config: Config) -> Partition | None:
    """What Slurm would refuse, said before submitting, naming the field: a partition or account it
    does not know, more nodes than the partition has, a time limit over the partition's. Returns the
    partition the job goes to (None when Slurm has no default). Raises ConfigError / SlurmError."""
    launch = config.launch
    problems = []
    if launch.nodes * launch.workers_per_node != config.parallel.data_parallel:
        config.validate()  # names launch.nodes and parallel.data_parallel
    found = partitions()
    if launch.partition:
        partition = next((p for p in found if p.name == launch.partition), None)
        if partition is None:
            names = ", ".join(p.name for p in found) or "none"
            raise ConfigError([Problem("launch.partition", launch.partition,
                                       Message("slurm.no_partition", partition_names=names))])
    else:
        partition = next((p for p in found if p.default), None)
    if partition is not None:
        if partition.state != "UP":
            problems.append(Problem("launch.partition", partition.name,
                                    Message("slurm.partition_state", state=partition.state)))
        limit = min(n for n in (partition.nodes, partition.max_nodes) if n is not None)
        if launch.nodes > limit:
            problems.append(Problem("launch.nodes", launch.nodes, Message(
                "slurm.partition_nodes_per_job", partition=partition.name, count=partition.nodes,
                max_nodes=partition.max_nodes, limit=limit) if partition.max_nodes else Message(
                "slurm.partition_nodes", partition=partition.name, count=partition.nodes, limit=limit)))
        if (launch.time_limit and launch.time_limit not in ("UNLIMITED", "INFINITE") and partition.max_time
                and partition.max_time not in ("UNLIMITED", "INFINITE")):
            try:
                over = time_limit_minutes(launch.time_limit) > time_limit_minutes(partition.max_time)
            except ValueError:
                over = False
            if over:
                problems.append(Problem("launch.time_limit", launch.time_limit, Message(
                    "slurm.partition_time", partition=partition.name, max_time=partition.max_time)))
    if launch.account:
        problems += _account_problems(launch.account)
    if problems:
        raise ConfigError(problems)
    return partition


def _account_problems(account: str) -> list[Problem]:
    """An account Slurm's accounting does not know; nothing when sacctmgr cannot tell (no slurmdbd):
    then sbatch's own message says it at submission."""
    try:
        result = _slurm(["sacctmgr", "-n", "-P", "show", "account", account, "format=Account"], timeout_s=10.0)
    except SlurmError:
        return []
    if result.returncode != 0:
        return []
    if account not in {ln.strip() for ln in result.stdout.splitlines()}:
        return [Problem("launch.account", account, Message("slurm.no_account"))]
    return []


# ---- the batch script -------------------------------------------------------------------------

def sbatch_argv(run: RunDir, config: Config) -> list[str]:
    """`sbatch --parsable <the extra options> <run>/job.sbatch`: each option one argv item."""
    return ["sbatch", "--parsable", *config.launch.sbatch_options, str(run.sbatch_script)]


def build_script(run: RunDir, config: Config, master_port: int, python: str = sys.executable) -> str:
    """The batch script: Slurm's settings as #SBATCH lines, the environment, and one srun that
    starts `python -m core.slurm_node` once per node (which starts msrun there)."""
    launch = config.launch
    path = str(run.path)
    lines = ["#!/bin/bash",
             f"# mindtune run {run.run_id}: {launch.nodes} node(s) x {launch.workers_per_node} worker(s), written by "
             "core.run.slurm and submitted with",
             f"#   {command_preview(sbatch_argv(run, config))}",
             f"#SBATCH --job-name=mindtune-{run.run_id}"[:200],
             f"#SBATCH --nodes={launch.nodes}",
             "#SBATCH --ntasks-per-node=1",
             f"#SBATCH --output={run.slurm_output}",
             "#SBATCH --open-mode=append",
             f"#SBATCH --chdir={REPO_ROOT}"]
    if launch.partition:
        lines.append(f"#SBATCH --partition={launch.partition}")
    if launch.account:
        lines.append(f"#SBATCH --account={launch.account}")
    if launch.time_limit:
        lines.append(f"#SBATCH --time={launch.time_limit}")
    env = {"PYTHONUNBUFFERED": "1", "GLOG_v": "3", ENV_RUN_DIR: path, **launch.env}
    lines += ["", "set -eu"]
    lines += [f"export {name}={shlex.quote(value)}" for name, value in env.items()]
    # msrun starts each worker as `python core/ranks.py`, taking python from PATH (see core.run.launcher)
    lines.append(f"export PATH={shlex.quote(os.path.dirname(python))}:\"$PATH\"")
    lines.append(f"export PYTHONPATH={shlex.quote(str(REPO_ROOT))}${{PYTHONPATH:+:$PYTHONPATH}}")
    node_argv = ["srun", f"--nodes={launch.nodes}", "--ntasks-per-node=1", "--kill-on-bad-exit=1",
                 python, "-m", "core.slurm_node", "--run-dir", path, f"--master-port={master_port}",
                 f"--workers-per-node={launch.workers_per_node}"]
    lines += ["", "# one msrun per node: node_rank from SLURM_NODEID, master = the first host of the allocation",
              shlex.join(node_argv), ""]
    return "\n".join(lines)


def _submit_env(extra: Mapping[str, str] | None) -> dict[str, str]:
    return {**os.environ, **(extra or {})}


@contextmanager
def _submit_lock(run: RunDir) -> Iterator[None]:
    """One submission at a time per run folder, across processes (two tabs, a double click)."""
    fd = os.open(run.path / ".submit.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


# ---- what Slurm says about a job -------------------------------------------------------------------

@dataclass(frozen=True)
class JobInfo:
    job_id: str
    state: str                 # PENDING, RUNNING, CANCELLED, ... (the first word: 'CANCELLED by 0' -> CANCELLED)
    reason: str | None         # the pending reason, or why it ended ('None' -> None)
    nodes: tuple[str, ...]
    exit_code: str | None = None
    partition: str | None = None


def _hostnames(nodelist: str) -> tuple[str, ...]:
    """node[1-2] -> ('node1', 'node2'), by `scontrol show hostnames` (the one who knows the syntax)."""
    if not nodelist or nodelist in ("(null)", "None"):
        return ()
    if nodelist in _HOSTNAMES:
        return _HOSTNAMES[nodelist]
    try:
        result = _slurm(["scontrol", "show", "hostnames", nodelist], timeout_s=10.0)
    except SlurmError:
        return (nodelist,)
    if result.returncode != 0:
        return (nodelist,)
    _HOSTNAMES[nodelist] = tuple(result.stdout.split())
    return _HOSTNAMES[nodelist]


_HOSTNAMES: dict[str, tuple[str, ...]] = {}
_RECENT: dict[str, tuple[float, JobInfo | None]] = {}
RECENT_S = 2.0  # a console polling many runs twice a second asks Slurm about each at most this often


def _recent_info(job_id: str) -> JobInfo | None:
    """job_info, reused for RECENT_S (refresh is polled; the stop path asks afresh)."""
    now = time.monotonic()
    cached = _RECENT.get(job_id)
    if cached is None or now - cached[0] > RECENT_S:
        cached = _RECENT[job_id] = (now, job_info(job_id))
    return cached[1]


def job_info(job_id: str) -> JobInfo | None:
    """The job as Slurm knows it: `scontrol show job` (pending, running, and for MinJobAge after
    the end), else `sacct` (when accounting keeps it); None when Slurm no longer knows the job."""
    result = _slurm(["scontrol", "show", "job", "-o", str(job_id)])
    if result.returncode == 0 and result.stdout.strip():
        kv = _key_values(result.stdout.splitlines()[0])
        state = (kv.get("JobState") or "UNKNOWN").split()[0]
        reason = kv.get("Reason")
        nodes = kv.get("NodeList") if kv.get("NodeList") not in (None, "(null)") else kv.get("SchedNodeList")
        return JobInfo(str(job_id), state, None if reason in (None, "None", "(null)") else reason,
                       _hostnames(nodes or ""), kv.get("ExitCode"), kv.get("Partition"))
    if "invalid job id" not in (result.stderr or "").lower():  # the controller did not answer: no news
        raise SlurmError(Message("slurm.job_query_failed", job_id=job_id, slurm_says=_said(result)))
    try:
        result = _slurm(["sacct", "-n", "-P", "-X", "-j", str(job_id), "-o", "JobID,State,Reason,NodeList,ExitCode,Partition"])
    except SlurmError:
        return None
    for line in result.stdout.splitlines() if result.returncode == 0 else []:
        parts = line.split("|")
        if len(parts) >= 6 and parts[0] == str(job_id):
            return JobInfo(str(job_id), parts[1].split()[0], None if parts[2] in ("", "None") else parts[2],
                           _hostnames(parts[3]), parts[4] or None, parts[5] or None)
    return None


@dataclass(frozen=True)
class QueueEntry:
    """One of our jobs in Slurm's queue, in Slurm's order."""
    run_id: str
    job_id: str
    state: str
    reason: str | None
    priority: int


# ---- the backend -----------------------------------------------------------------------------

class SlurmBackend:
    """Submit, watch and stop runs as Slurm batch jobs (the module docstring says how)."""
    name = "slurm"
    uses_own_queue = False
    can_queue = True  # `queue`: squeue's order of this runs folder's jobs

    def __init__(self, python: str = sys.executable):
        self.python = python

    # -- submission --

    def launch(self, run: RunDir, env: Mapping[str, str] | None = None) -> None:
        """Submit a queued run once; a run already submitted is never submitted again (LaunchError).
        A refusal (before or by sbatch) leaves the run `failed` with the reason, and is raised."""
        run = RunDir(os.path.abspath(os.fspath(run)))
        with _submit_lock(run):
            status = _read(run)
            if status.cluster is not None and status.cluster.job_id:
                raise LaunchError(Message("slurm.already_submitted", run=run.run_id, job_id=status.cluster.job_id))
            if status.state != "queued":
                raise LaunchError(Message("slurm.not_queued", run=run.run_id, state=repr(status.state)))
            config = load_config(run.config_path)
            try:
                partition = check_submission(config)
            except (ConfigError, LaunchError) as err:
                run.write_status(state="failed", reason=Message("slurm.not_submitted_config", reason=said_of(err)),
                                 failure_kind="config")
                raise
            script = build_script(run, config, free_port(), self.python)
            atomic_write(run.sbatch_script, script)
            argv = sbatch_argv(run, config)
            job = ClusterJob(backend="slurm", partition=config.launch.partition or (partition.name if partition else None),
                             script=run.sbatch_script.name, submitted_at=time.time())
            run.write_status(cluster=job, command=argv, data_parallel=config.parallel.data_parallel,
                             device=config.parallel.device, hostname=socket.gethostname())
            with open(run.log_path, "ab") as log:
                log.write(log_header(argv).encode())
            try:
                result = _slurm(argv, env=_submit_env(env))
            except SlurmError as err:
                run.write_status(state="failed", reason=Message("slurm.not_submitted", reason=said_of(err)),
                                 failure_kind="cluster")
                raise
            if result.returncode != 0:
                said = _said(result)
                run.write_status(state="failed", reason=Message("slurm.refused_job", slurm_says=said), failure_kind="config",
                                 error_lines=[ln for ln in (result.stderr or "").splitlines() if ln.strip()][-8:])
                raise SlurmError(Message("slurm.refused", run=run.run_id, slurm_says=said))
            job_id = result.stdout.strip().split(";")[0]
            run.write_status(cluster=job.replace(job_id=job_id, state="PENDING", checked_at=time.time()))
            with open(run.log_path, "ab") as log:
                log.write(f"submitted as Slurm job {job_id}; Slurm's output: {run.slurm_output}\n".encode())

    # -- watching --

    def refresh(self, run: RunDir) -> Status:
        """The run's status: its folder first; then Slurm, for pending (and why), the nodes, and a job
        that ended without the run saying how (cancelled, time limit, node failure, out of memory)."""
        run = run if isinstance(run, RunDir) else RunDir(run)
        status = _read(run)
        job = status.cluster
        if job is None or not job.job_id or job.state in ENDED_STATES:
            return status
        try:
            info = _recent_info(job.job_id)
        except SlurmError:
            return status  # Slurm did not answer this time: the run folder is all there is to say
        if info is None:
            if status.state in TERMINAL_STATES:
                return run.write_status(cluster=job.replace(state="COMPLETED", checked_at=time.time()))
            return self._ended(run, status, JobInfo(job.job_id, "UNKNOWN", "Slurm no longer knows the job", tuple(job.nodes)))
        status = _note(run, status, info)
        if info.state in ENDED_STATES:
            return self._ended(run, _read(run), info)
        if status.state in TERMINAL_STATES and status.ended_at and time.time() - status.ended_at > TERM_TIMEOUT_S:
            _scancel(job.job_id)  # the run said it is over; nothing of it may keep running
        return status

    def _ended(self, run: RunDir, status: Status, info: JobInfo) -> Status:
        """The job is over: the run's own verdict stands (except that workers stopped by Slurm's
        SIGTERM say why Slurm sent it); else say what Slurm says happened."""
        if status.state in TERMINAL_STATES:
            if (status.state == "stopped" and info.state in ("CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL")
                    and not _stop_request(run) and not (status.reason or "").startswith(f"Slurm job {info.job_id}")):
                cause = _job_verdict(run, status, info)[1]
                return run.write_status(reason=Message("slurm.sigterm_stop_saved", reason=cause,
                                                       checkpoint=status.resumable_checkpoint)
                                        if status.resumable_checkpoint else Message("slurm.sigterm_stop", reason=cause))
            return status
        if status.state == "queued":
            if info.state == "CANCELLED":
                return run.write_status(state="stopped", reason=Message(
                    "slurm.cancelled_while_pending", job=Message("slurm.job", id=info.job_id)))
        verdict = _job_verdict(run, status, info)
        return ranks.write_verdict(run, *verdict[:2], **verdict[2]) or _read(run)

    def queue(self, runs_dir: str | os.PathLike) -> list[QueueEntry]:
        """This runs folder's jobs in Slurm's queue, in Slurm's order (pending by priority)."""
        ids = {s.status.cluster.job_id: s.run_id for s in list_runs(runs_dir)
               if s.status.cluster is not None and s.status.cluster.job_id and s.state not in TERMINAL_STATES}
        if not ids:
            return []
        result = _slurm(["squeue", "-h", "-j", ",".join(ids), "-o", "%i|%T|%r|%Q", "--sort=-t,-p,i"])
        out = []
        for line in result.stdout.splitlines() if result.returncode == 0 else []:
            parts = line.split("|")
            if len(parts) == 4 and parts[0] in ids:
                out.append(QueueEntry(ids[parts[0]], parts[0], parts[1], None if parts[2] == "None" else parts[2],
                                      int(parts[3]) if parts[3].isdigit() else 0))
        return out

    def active(self, runs_dir: str | os.PathLike) -> list[RunDir]:
        """The runs submitted to Slurm that have not ended (a restarted console reattaches to them)."""
        return [RunDir(s.path) for s in list_runs(runs_dir)
                if s.status.cluster is not None and s.status.cluster.job_id and s.state not in TERMINAL_STATES]

    # -- stopping --

    def stop(self, run: RunDir, graceful: bool = True, timeout_s: float = GRACEFUL_TIMEOUT_S) -> Status:
        """Graceful: the control request every rank reads (rank 0 polls it and all ranks agree at the
        next step: a checkpoint, then the end), then `scancel --signal=TERM` (the workers take SIGTERM
        as a stop) after `timeout_s`, then `scancel`. Not graceful: `scancel` at once. A pending job
        is cancelled. Returns once Slurm has ended the job."""
        run = run if isinstance(run, RunDir) else RunDir(run)
        status = _read(run)
        job = status.cluster
        if job is None or not job.job_id:
            if status.state == "queued":
                return run.write_status(state="stopped", reason=CANCELLED_REASON)
            return status
        info = job_info(job.job_id)
        if info is not None and info.state == "PENDING" or status.state == "queued":
            run.write_control(stop="now")  # the user's: not "cancelled outside the console"
            _scancel(job.job_id)
            _wait_until(lambda: _job_over(job.job_id), JOB_GONE_TIMEOUT_S, POLL_S)
            if _read(run).state == "queued":
                run.write_status(state="stopped", reason=Message("slurm.cancelled_pending", reason=CANCELLED_REASON,
                                                                    job=Message("slurm.job", id=job.job_id)))
            _RECENT.pop(job.job_id, None)
            return self.refresh(run)
        if status.state not in TERMINAL_STATES:
            run.write_control(stop="graceful" if graceful else "now")
            try:
                run.write_status(state="stopping")
            except RunDirError:
                pass  # the worker changed state first
        if graceful:
            over = lambda: _read(run).state in TERMINAL_STATES or _job_over(job.job_id)  # noqa: E731
            if not _wait_until(over, timeout_s, POLL_S):
                _scancel(job.job_id, "--signal=TERM", "--full")
                if not _wait_until(over, TERM_TIMEOUT_S, POLL_S):
                    _scancel(job.job_id)
        else:
            _scancel(job.job_id)
        if not _wait_until(lambda: _job_over(job.job_id), JOB_GONE_TIMEOUT_S, POLL_S):
            _scancel(job.job_id, "--signal=KILL", "--full")
            _wait_until(lambda: _job_over(job.job_id), JOB_GONE_TIMEOUT_S, POLL_S)
        if socket.gethostname() == status.hostname or not status.hostname:
            teardown(run)  # a node on this machine: anything that escaped Slurm's process tracking
        _RECENT.pop(job.job_id, None)
        final = self.refresh(run)
        if final.state not in TERMINAL_STATES:  # Slurm forgot the job already: the user stopped it
            reason = FORCED_STOP_REASON if not graceful else Message("run.stopped_by_user")
            final = ranks.write_verdict(run, "stopped", reason) or _read(run)
        return final



def _note(run: RunDir, status: Status, info: JobInfo) -> Status:
    """Record what Slurm says in status.cluster (only when it changed: no write per poll)."""
    job = status.cluster
    nodes = list(info.nodes) or list(job.nodes)
    changed = (job.state, job.reason, list(job.nodes), job.exit_code) != (info.state, info.reason, nodes, info.exit_code)
    if not changed:
        return status
    try:
        return run.write_status(cluster=job.replace(state=info.state, reason=info.reason, nodes=nodes,
                                                    exit_code=info.exit_code, checked_at=time.time(),
                                                    partition=info.partition or job.partition))
    except RunDirError:
        return _read(run)


def _job_verdict(run: RunDir, status: Status, info: JobInfo) -> tuple[str, str, dict]:
    """(state, reason, fields) for a run whose job ended before the run wrote how it ended."""
    where = (Message("slurm.job_on", id=info.job_id, nodes=", ".join(info.nodes)) if info.nodes
             else Message("slurm.job", id=info.job_id))
    stop_asked = _stop_request(run)
    if info.state == "CANCELLED":
        if stop_asked:
            return "stopped", FORCED_STOP_REASON if stop_asked == "now" else Message("run.stopped_by_user"), {}
        return "stopped", Message("slurm.cancelled_outside", job=where), {}
    if info.state == "PREEMPTED":
        return "stopped", Message("slurm.preempted", job=where), {}
    lines = _slurm_output_errors(run)
    fields = {"failure_kind": "cluster", "error_lines": lines}
    if info.state == "TIMEOUT":
        return "failed", Message("slurm.timeout", job=where), fields
    if info.state == "NODE_FAIL":
        return "failed", Message("slurm.node_fail", job=where), fields
    if info.state == "OUT_OF_MEMORY":
        return "failed", Message("slurm.out_of_memory", job=where, advice=ranks.OOM_ADVICE), \
            {**fields, "failure_kind": "oom"}
    dead = _dead_rank(run, status)
    if dead is not None:
        return dead
    return "failed", Message("slurm.ended", job=where, state=info.state, code=info.exit_code or "?"), fields


def _dead_rank(run: RunDir, status: Status) -> tuple[str, str, dict] | None:
    """A rank whose record says it ended badly (its supervisor died before writing the verdict)."""
    for rank, record in ranks.rank_records(run, status.attempt).items():
        code, sig = record.get("exit_code"), record.get("exit_signal")
        if record.get("state") != "exited" or not (code or sig):
            continue
        world = int(record.get("world") or 1)
        state, kind, reason = ranks.death_verdict(rank, world, code, sig, record.get("oom_evidence"), False,
                                                  record.get("node"))
        return state, reason, {"failure_kind": kind, "failed_rank": rank,
                               "error_lines": ranks.log_tail(ranks.log_of(run, rank, world)),
                               "exit_signal": ranks.signal_name(sig) or None}
    return None


def _slurm_output_errors(run: RunDir, limit: int = 8) -> list[str]:
    text = ranks.read_tail(run.slurm_output, 32768) or ""
    return [ln for ln in text.splitlines() if re.search(r"(?i)error|killed|cancel|oom|fail", ln)][-limit:]


def _stop_request(run: RunDir) -> str | None:
    try:
        return run.read_control().stop
    except RunDirError:
        return None


def _scancel(job_id: str, *options: str) -> None:
    try:
        _slurm(["scancel", *options, str(job_id)])
    except SlurmError:
        pass


def _job_over(job_id: str) -> bool:
    try:
        info = job_info(job_id)
    except SlurmError:
        return False
    return info is None or info.state not in SLURM_ACTIVE_STATES



# ---- the command line ----------------------------------------------------------------------------

def describe(status: Status) -> str:
    """One line about a cluster run: state, job, nodes, Slurm's reason, step."""
    job = status.cluster
    parts = [status.state or "?"]
    if job is not None:
        parts.append(f"Slurm job {job.job_id or '(not submitted)'} {job.state or ''}".rstrip())
        if job.reason:
            parts.append(f"reason: {job.reason}")
        if job.nodes:
            parts.append(f"nodes: {','.join(job.nodes)}")
    if status.step is not None:
        parts.append(f"step {status.step}/{status.total_steps or '?'}")
    if status.reason and status.state in TERMINAL_STATES:
        parts.append(status.reason)
    return " · ".join(parts)
