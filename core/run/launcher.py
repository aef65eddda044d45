"""Start, stop and watch a run's worker process.

A worker is started as an argv (never a shell string) in its own session and process group, with
its output appended to the run's train.log, so it survives the console and can be signalled as a
whole. Each worker runs under its rank supervisor (`core.run.ranks`), which records its pid, exit
status and heartbeat in `ranks/`. msrun starts each data-parallel worker in a session of its own,
so a run's processes are found three ways: the recorded process group, the leader's descendants,
and any process whose environment has MINDTUNE_RUN_DIR naming the run.

`watch` is the console's watcher (and the headless data-parallel CLI's): called every half second,
it sees a rank that died or stopped making progress from the rank files, ends the run with that
rank's account if its supervisor could not, and tears down the processes of a run that is over
(msrun would otherwise wait some 30 s for its scheduler to time out). Knows `core.spec.config`,
`core.run.rundir`, `core.run.ranks` and `core.run.ckpt_store` (the last two are MindSpore-free).
"""
from __future__ import annotations

import datetime as dt
import ipaddress
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

import psutil

import core.run.ranks as ranks
from core.spec.config import Config, ConfigError, Problem, load_config
from core.spec.errors import said_of
from core.spec.messages import Message
from core.run.records import TERMINAL_STATES, RunDirError, Status, can_transition
from core.run.rundir import RunDir
from core.run.runs import make_run_id, next_free_run_id

__all__ = [
    "ENV_RUN_DIR", "REPO_ROOT", "CRASH_REASON", "FORCED_STOP_REASON", "CANCELLED_REASON", "LaunchError", "LaunchedRun", "Orphan",
    "free_port", "build_argv", "command_preview", "multi_host_commands", "check_workers_available",
    "run_id_for", "create_run", "launch", "process_fields", "is_alive", "run_processes", "stop",
    "reconcile", "find_orphans", "watch", "teardown", "DeviceSlots", "QueuedRun", "ActiveRun", "Launch", "plan_launches",
    "device_env", "VISIBLE_DEVICES_ENV",
]

ENV_RUN_DIR = "MINDTUNE_RUN_DIR"
REPO_ROOT = Path(__file__).resolve().parents[2]
CRASH_REASON = Message("run.crash")
FORCED_STOP_REASON = Message("run.stopped_forced")
CANCELLED_REASON = Message("run.cancelled")
_POLL_S = 0.05
_CREATE_TIME_TOLERANCE_S = 0.05  # psutil's create_time has clock-tick (10 ms) resolution
_LAUNCH_GRACE_S = 30.0           # a `starting` status without a pid yet: launch still under way
_LOG_HEADER = "=== mindtune launch"  # starts the line launch() writes to train.log per start


class LaunchError(RuntimeError):
    """A run that cannot be started or stopped as asked; the message says why and what to do (a
    core.spec.messages.Message where the catalogue has it: `said`)."""

    @property
    def said(self) -> list[Message] | None:
        return [self.args[0]] if self.args and isinstance(self.args[0], Message) else None


def log_header(argv: Sequence[str]) -> str:
    """The line that opens each start's part of train.log (readers take the latest part)."""
    return (f"{_LOG_HEADER} {dt.datetime.now().isoformat(timespec='seconds')} "
            f"on {socket.gethostname()}: {command_preview(argv)}\n")


class TeeToLog:
    """Copy what this process prints (stdout and stderr, tracebacks included) into a run's train.log
    as well as the terminal, so a run or an evaluation started from a shell has the same log as one
    the console launched. MindSpore's own C++ logging bypasses Python's streams and is not copied."""

    def __init__(self, log_path: Path, argv: list[str]):
        self.log_path, self.argv = log_path, argv

    def __enter__(self):
        self.log = open(self.log_path, "a", encoding="utf-8", buffering=1)
        self.log.write(log_header(self.argv))
        self.saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = _Tee(sys.stdout, self.log), _Tee(sys.stderr, self.log)
        return self

    def __exit__(self, *exc):
        sys.stdout, sys.stderr = self.saved
        self.log.close()


class _Tee:
    def __init__(self, stream, log):
        self.stream, self.log = stream, log

    def write(self, text):
        self.log.write(text)
        return self.stream.write(text)

    def flush(self):
        self.log.flush()
        self.stream.flush()

    def __getattr__(self, name):
        return getattr(self.stream, name)


# ---- commands -------------------------------------------------------------------------------

def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and 'localhost'; anything else may be reachable from outside (the
    console's and the endpoint's rule: such an address needs a login)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (bind port 0, read it, close)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _msrun_next_to(python: str) -> str:
    """msrun from the same environment as `python` (no symlink resolving: venvs link python)."""
    beside = Path(python).parent / "msrun"
    return str(beside) if beside.exists() or os.sep in python else shutil.which("msrun") or "msrun"


def build_argv(run_dir: RunDir | str | os.PathLike, data_parallel: int,
               master_port: int | None = None, python: str = sys.executable) -> list[str]:
    """The worker's command: `python -m core.ranks` (the rank supervisor, which runs core/train.py)
    for one worker, msrun running core/ranks.py per rank for several."""
    run = os.path.abspath(os.fspath(run_dir))
    if data_parallel <= 1:
        return [python, "-m", "core.ranks", "--run-dir", run]
    port = master_port if master_port is not None else free_port()
    return [_msrun_next_to(python), f"--worker_num={data_parallel}",
            f"--local_worker_num={data_parallel}", f"--master_port={port}", "--join=True",
            f"--log_dir={RunDir(run).logs_dir}", str(REPO_ROOT / "core" / "ranks.py"), "--run-dir", run]


def command_preview(argv: Sequence[str]) -> str:
    """The argv as one line a user can paste into a shell."""
    return shlex.join(argv)


def multi_host_commands(n_per_node: int, nodes: int, master_addr: str, port: int,
                        run_dir: str = "runs/<run-id>") -> list[str]:
    """One msrun command per node, for display; each runs in the repository root of its node.

    The run folder must be on storage every node shares (rank 0 writes metrics and checkpoints).
    """
    if n_per_node < 1 or nodes < 1:
        raise LaunchError(Message("launch.workers_nodes", per_node=n_per_node, node_count=nodes))
    if not 1024 <= port <= 65535:
        raise LaunchError(Message("launch.master_port", port=port))
    commands = []
    for rank in range(nodes):
        argv = ["msrun", f"--worker_num={n_per_node * nodes}", f"--local_worker_num={n_per_node}",
                f"--master_addr={master_addr}", f"--master_port={port}", f"--node_rank={rank}",
                "--join=True", f"--log_dir={RunDir(run_dir).logs_dir}", "core/ranks.py", "--run-dir", run_dir]
        commands.append(command_preview(argv))
    return commands


def check_workers_available(n: int, device: str = "cpu") -> None:
    """On the CPU each worker is a process of its own: refuse more workers than CPU cores."""
    if n < 1:
        raise ConfigError([Problem("parallel.data_parallel", n, Message(
            "field.must_be", reason=Message("field.rule.integer_bound", op=">=", bound="1")))])
    cores = os.cpu_count() or 1
    if device == "cpu" and n > cores:
        raise ConfigError([Problem("parallel.data_parallel", n, Message("run.check.cores", cores=cores))])


# ---- creating and launching -----------------------------------------------------------------

def run_id_for(config: Config, now: dt.datetime | None = None) -> str:
    """The run id that names what a config changes: model, method, precision, workers."""
    tags = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}
    if config.precision.amp_level == "O0":
        precision = tags[config.model.dtype]
    else:
        precision = f"{tags[config.precision.compute_dtype]}-{config.precision.amp_level}"
    return make_run_id(config.model.path, config.method, config.lora.rank, precision,
                       config.parallel.data_parallel, now=now, name=config.run.name)


def create_run(config: Config, now: dt.datetime | None = None) -> RunDir:
    """A new `queued` run folder under config.run.runs_dir holding the resolved config."""
    run_id = next_free_run_id(config.run.runs_dir, run_id_for(config, now))
    return RunDir.create(config.run.runs_dir, run_id, config.to_yaml())


@dataclass(frozen=True)
class LaunchedRun:
    """A started worker. `process` is only meaningful to the console that started it."""
    run_dir: RunDir
    argv: tuple[str, ...]
    pid: int
    pgid: int
    create_time: float
    process: subprocess.Popen = field(compare=False, repr=False)

    def poll(self) -> int | None:
        """The exit code once the worker has ended (and is reaped), else None."""
        return self.process.poll()


def launch(run_dir: RunDir | str | os.PathLike, data_parallel: int | None = None,
           env: Mapping[str, str] | None = None, python: str = sys.executable,
           master_port: int | None = None, worker: Sequence[str] | None = None) -> LaunchedRun:
    """Start a queued run's worker in its own process group, output appended to train.log.

    `data_parallel` defaults to the run's config.yaml. `worker` runs another module instead of the
    training worker, as `python -m <worker...>` (an evaluation: `core.evaluate --run-dir <run>`). Status goes to `starting` before the
    process exists (so a fast worker's `running` is never overwritten), then gets pid, pgid and
    the process create_time that `is_alive` checks. Whether this machine holds the workers was checked
    once, before the run folder was made (`check_workers_available`: the console's Start, core.train).
    """
    run = RunDir(os.path.abspath(os.fspath(run_dir)))
    state = _read_status(run).state
    if not can_transition(state, "starting") or state == "starting":
        raise LaunchError(Message("run.launch.not_queued", run=run.run_id, state=repr(state)))
    if data_parallel is None:
        data_parallel = load_config(run.config_path).parallel.data_parallel
    argv = [python, "-m", *worker] if worker else build_argv(run, data_parallel, master_port, python)
    if os.sep in argv[0] and not os.access(argv[0], os.X_OK):
        raise LaunchError(Message("run.launch.msrun_missing" if data_parallel > 1 else "run.launch.not_executable",
                                  program=argv[0]))
    shutil.rmtree(run.ranks_dir, ignore_errors=True)  # the previous attempt's rank records
    run.write_status(state="starting", pid=None, pgid=None, create_time=None, reason=None,
                     hostname=socket.gethostname(), command=argv, data_parallel=data_parallel)
    try:
        with open(run.log_path, "ab") as log:
            log.write(log_header(argv).encode())
            log.flush()
            process = subprocess.Popen(argv, cwd=REPO_ROOT, env=_child_env(run, env, python),
                                       stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                       start_new_session=True, close_fds=True)
    except OSError as err:
        run.write_status(state="failed", reason=Message("run.launch.worker_not_started", error=str(err)))
        raise LaunchError(Message("run.launch.could_not_start", command=command_preview(argv), error=str(err))) from err
    identity = process_fields(process.pid)  # unreaped, so readable even if it exited already
    run.write_status(**identity)
    return LaunchedRun(run, tuple(argv), process.pid, identity["pgid"], identity["create_time"], process)


def process_fields(pid: int | None = None) -> dict:
    """pid, pgid, create_time and hostname of a process (default: this one), as status.json
    records them for `is_alive`; a worker started headless writes these about itself."""
    process = psutil.Process(pid)
    return {"pid": process.pid, "pgid": os.getpgid(process.pid), "create_time": process.create_time(),
            "hostname": socket.gethostname()}


def _child_env(run: RunDir, extra: Mapping[str, str] | None, python: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "GLOG_v": "3", **(extra or {})}
    # msrun starts each worker as `python core/train.py ...`, taking `python` from PATH: put the
    # launching interpreter's folder first (a venv is rarely activated), and the repo root on
    # PYTHONPATH so the script can import core.
    env["PATH"] = os.pathsep.join(p for p in (os.path.dirname(python), env.get("PATH")) if p)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    env[ENV_RUN_DIR] = str(run.path)
    return env


def _read_status(run: RunDir) -> Status:
    try:
        return run.read_status()
    except RunDirError as err:
        raise LaunchError(said_of(err)) from None


# ---- watching --------------------------------------------------------------------------------

def _leader(status: Status, include_zombie: bool = False) -> psutil.Process | None:
    """The recorded worker process if it is still that process (pid and create_time match)."""
    pid, created = status.pid, status.create_time
    if pid is None or created is None:
        return None
    try:
        process = psutil.Process(pid)
        if abs(process.create_time() - created) > _CREATE_TIME_TOLERANCE_S:
            return None  # the pid was reused by another process
        if _is_zombie(process) and not include_zombie:
            return None
        return process
    except psutil.Error:
        return None


def _is_zombie(process: psutil.Process) -> bool:
    """True for a process that has exited but not been reaped (its parent reaps it, not us:
    reaping here would take the exit code from the console's Popen)."""
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
    except psutil.Error:
        return False


def _on_other_host(status: Status) -> bool:
    """Whether the run's worker was started on another machine (its pid means nothing here)."""
    host = status.hostname
    return bool(host) and host != socket.gethostname()


def is_alive(status: Status) -> bool:
    """The run's worker process exists and is the one that was started (pid reuse safe)."""
    return _leader(status) is not None


def _env_run_dir(process: psutil.Process) -> str | None:
    try:
        value = process.environ().get(ENV_RUN_DIR)
    except (psutil.Error, OSError):
        return None
    return os.path.realpath(value) if value else None


class _RunProcesses:
    """Every live process of one run: the verified group, the leader's descendants, and processes
    whose MINDTUNE_RUN_DIR names the run. Remembers what it has seen, so a child reparented to
    init after its parent died is still found."""

    def __init__(self, run: RunDir, status: Status):
        self.real_path = os.path.realpath(run.path)
        self.leader = _leader(status, include_zombie=True)
        if self.leader is not None and self.leader.pid == os.getpid():
            self.leader = None  # a run trained in this very process (the CLI in-process): not its children
        self.pgid = status.pgid if self.leader is not None else None
        if self.pgid == os.getpgrp():  # ... and never our own process group
            self.pgid = None
        self.leader_key = _key(self.leader) if self.leader is not None else None
        self.known: dict[tuple[int, float], psutil.Process] = {}
        self.signalled: dict[int, set[tuple[int, float]]] = {}

    def _check_group(self) -> None:
        """Forget the group if its number now belongs to a new process (the old group emptied:
        Linux never reuses a pid while a group still holds it)."""
        if self.pgid is None:
            return
        try:
            if _key(psutil.Process(self.pgid)) != (self.pgid, self.leader_key[1]):
                self.pgid = None
        except psutil.NoSuchProcess:
            pass
        except psutil.Error:
            self.pgid = None

    def scan(self) -> list[psutil.Process]:
        self._check_group()
        found = dict(self.known)
        for process in psutil.process_iter():
            if process.pid != os.getpid() and self._belongs(process):
                found[_key(process)] = process
                found.update({_key(c): c for c in _descendants(process)})
        if self.leader is not None:
            found.update({_key(c): c for c in _descendants(self.leader)})
        self.known = {k: p for k, p in found.items() if k[1] >= 0 and _running(p)}
        return list(self.known.values())

    def _belongs(self, process: psutil.Process) -> bool:
        if self.pgid is not None and _pgid(process) == self.pgid:
            return True
        return _env_run_dir(process) == self.real_path

    def signal(self, sig: int) -> None:
        """Send `sig` once to each process: to the group at once while its leader is verified
        (catching processes forked meanwhile), then to each process found outside it."""
        done = self.signalled.setdefault(sig, set())
        processes = self.scan()
        if self.pgid is not None and -1 not in done:
            done.add(-1)
            try:
                os.killpg(self.pgid, sig)
                done.update(_key(p) for p in processes if _pgid(p) == self.pgid)
            except OSError:
                pass
        for process in processes:
            if _key(process) not in done:
                done.add(_key(process))
                try:
                    process.send_signal(sig)  # psutil checks the pid still is this process
                except psutil.Error:
                    pass


def _pgid(process: psutil.Process) -> int | None:
    try:
        return os.getpgid(process.pid)
    except OSError:
        return None


def _key(process: psutil.Process) -> tuple[int, float]:
    try:
        return process.pid, process.create_time()
    except psutil.Error:
        return process.pid, -1.0


def _descendants(process: psutil.Process) -> list[psutil.Process]:
    try:
        return process.children(recursive=True)
    except psutil.Error:
        return []


def _running(process: psutil.Process) -> bool:
    try:
        return process.is_running() and not _is_zombie(process)
    except psutil.Error:
        return False


def run_processes(run_dir: RunDir | str | os.PathLike) -> list[psutil.Process]:
    """The run's live processes (worker, its children, msrun workers), found as `stop` finds them."""
    run = RunDir(run_dir) if not isinstance(run_dir, RunDir) else run_dir
    return _RunProcesses(run, _read_status(run)).scan()


def _wait_until(done: Callable[[], bool], timeout_s: float, poll_s: float = _POLL_S) -> bool:
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)
    return True


# ---- stopping --------------------------------------------------------------------------------

def stop(run_dir: RunDir | str | os.PathLike, graceful: bool = True, timeout_s: float = 30.0,
         kill_after_s: float | None = None) -> Status:
    """Stop a run and everything it started; returns the final status.

    graceful: ask the worker through control.json (it checkpoints and writes its final state),
    wait up to `timeout_s` for it to end, then terminate. Not graceful ("Stop now"): SIGTERM at
    once. Either way, processes still there `kill_after_s` after SIGTERM (default 5 s graceful,
    3 s now) get SIGKILL, and no process of the run is left when this returns.
    """
    run = RunDir(run_dir) if not isinstance(run_dir, RunDir) else run_dir
    status = _read_status(run)
    if status.cluster is not None:  # a scheduler's job: its backend stops it (scancel, ...)
        raise LaunchError(f"run {run.run_id} is a {status.cluster.backend} job: its backend stops it "
                          "(core.run.backends.backend_for(run).stop)")
    if status.state == "queued":
        return run.write_status(state="stopped", reason=CANCELLED_REASON)
    if _on_other_host(status):  # shared run folder: only the control file reaches that worker
        if status.state not in TERMINAL_STATES:
            run.write_control(stop="graceful" if graceful else "now")
        return _read_status(run)
    processes = _RunProcesses(run, status)
    leader_was_alive = is_alive(status)
    if status.state not in TERMINAL_STATES:
        run.write_control(stop="graceful" if graceful else "now")
        _try_write_status(run, state="stopping")
    ended_by_itself = graceful and _wait_until(lambda: _leader(status) is None, timeout_s)
    processes.signal(signal.SIGTERM)
    kill_after = kill_after_s if kill_after_s is not None else (5.0 if graceful else 3.0)
    if not _wait_until(lambda: not processes.scan(), kill_after):
        processes.signal(signal.SIGKILL)
        if not _wait_until(lambda: not processes.scan(), 5.0):
            left = ", ".join(str(p.pid) for p in processes.scan())
            raise LaunchError(Message("run.launch.survived_kill", run=run.run_id, pids=left))
    final = _read_status(run)
    if final.state in TERMINAL_STATES:
        return final
    if leader_was_alive and not ended_by_itself:
        reason = FORCED_STOP_REASON if not graceful else Message("run.stop_timed_out", seconds=f"{timeout_s:g}")
        return ranks.write_verdict(run, "stopped", reason) or _read_status(run)
    return reconcile(run)


def _try_write_status(run: RunDir, **fields) -> Status | None:
    """write_status, or None when the worker changed state first (it wins)."""
    try:
        return run.write_status(**fields)
    except RunDirError:
        return None


# ---- crashes and orphans ------------------------------------------------------------------

_ERROR_LINE = re.compile(r"(?i)(\b\w*(error|exception)\b|traceback|fatal|killed|abort|"
                         r"segmentation fault|out of memory|\boom\b)")


def _error_lines(log_path: Path, limit: int = 8, tail_bytes: int = 65536) -> list[str]:
    """The last lines of train.log that look like errors, from the latest launch only."""
    text = ranks.read_tail(log_path, tail_bytes)
    if text is None:
        return []
    latest = text[text.rfind(_LOG_HEADER):] if _LOG_HEADER in text else text
    lines = [line.rstrip() for line in latest.splitlines()[1 if _LOG_HEADER in text else 0:]
             if _ERROR_LINE.search(line)]
    return lines[-limit:]


def reconcile(run_dir: RunDir | str | os.PathLike) -> Status:
    """Mark a run `failed` if its status says it is active but none of its processes is alive.

    Returns the (possibly updated) status. A run still being launched is left alone.
    """
    run = RunDir(run_dir) if not isinstance(run_dir, RunDir) else run_dir
    status = _read_status(run)
    state = status.state
    if status.cluster is not None:  # a scheduler's job: its processes are not this machine's to judge
        return status  # (its backend's refresh reconciles it with the scheduler)
    if state in TERMINAL_STATES or state == "queued" or _on_other_host(status):
        return status
    if (state == "starting" and status.pid is None
            and time.time() - (status.updated_at or 0.0) < _LAUNCH_GRACE_S):
        return status
    if is_alive(status) or _RunProcesses(run, status).scan():
        return status
    verdict = (_user_stop_verdict(run, status) or ranks.judge_abandoned_hang(run, status.attempt)
               or _rank_death_verdict(run, status, settle_s=0.0))
    if verdict is not None:
        return verdict
    lines = _error_lines(run.log_path)
    reason = Message("run.crash_lines", reason=CRASH_REASON, lines="\n".join(lines)) if lines else CRASH_REASON
    return ranks.write_verdict(run, "failed", reason, error_lines=lines) or _read_status(run)


def _user_stop_verdict(run: RunDir, status: Status) -> Status | None:
    """A run that was `stopping` at the user's request and whose processes are gone ended because
    the user stopped it, not because it crashed."""
    if status.state != "stopping":
        return None
    try:
        request = run.read_control().stop
    except RunDirError:
        request = None
    if not request:
        return None
    reason = FORCED_STOP_REASON if request == "now" else Message("run.stopped_before_status")
    return ranks.write_verdict(run, "stopped", reason) or _read_status(run)


def _alive(pid, create_time) -> bool:
    if not isinstance(pid, int) or not isinstance(create_time, (int, float)):
        return False
    return _leader(Status(pid=pid, create_time=create_time)) is not None


def _rank_death_verdict(run: RunDir, status: Status, settle_s: float = 2.0) -> Status | None:
    """End an active run whose rank died, from its rank record: what its supervisor would have
    written (it gets `settle_s` to do so itself), or, when the supervisor died too, that the rank
    is gone without a record. A run the user is stopping ends stopped: Stop now kills its ranks
    (their supervisors too, before they can say so), which is the stop, not a crash."""
    attempt = status.attempt
    local = socket.gethostname()
    if ranks.hang_claimed(run, attempt) and settle_s > 0:
        return None  # a hang's judge killed the rank and is writing why
    for rank, record in ranks.rank_records(run, attempt).items():
        world = int(record.get("world") or 1)
        lines = ranks.log_tail(ranks.log_of(run, rank, world))
        if record.get("state") == "exited":
            code, sig = record.get("exit_code"), record.get("exit_signal")
            if not (code or sig) or time.time() - float(record.get("ended_at") or 0) < settle_s:
                continue
            state, kind, reason = ranks.death_verdict(rank, world, code, sig, record.get("oom_evidence"), False)
        elif record.get("hostname") == local and not _alive(record.get("pid"), record.get("create_time")) \
                and not (isinstance(record.get("supervisor_pid"), int) and psutil.pid_exists(record["supervisor_pid"])):
            state, kind = "failed", "rank_died" if world > 1 else "crash"
            reason = Message("rank.gone", who=ranks.rank_label(rank, world))
        else:
            continue
        return _user_stop_verdict(run, status) or ranks.write_verdict(
            run, state, reason, failure_kind=kind, failed_rank=rank, error_lines=lines,
            exit_signal=ranks.signal_name(record.get("exit_signal")) or None) or _read_status(run)
    return None


# ---- the watcher ----------------------------------------------------------------------------

WATCH_EVERY_S = 0.5
HANG_BACKSTOP_S = 5.0        # the watcher judges a hang this long after the supervisors should have
TEARDOWN_AFTER_S = {"failed": 0.5, "stopped": 3.0}  # processes left this long after the end are killed
TEARDOWN_AFTER_DEFAULT_S = 15.0  # (a finished run's processes exit by themselves within seconds)


def watch(run_dir: RunDir | str | os.PathLike) -> Status:
    """One look at a run, for a caller that polls it every WATCH_EVERY_S: end an active run whose
    rank died or stopped making progress (from `ranks/`), or whose processes are all gone; tear
    down the processes a run that is over left behind. Returns the status."""
    run = RunDir(run_dir) if not isinstance(run_dir, RunDir) else run_dir
    status = _read_status(run)
    state = status.state
    if status.cluster is not None:  # its backend's refresh watches it
        return status
    if state == "queued" or _on_other_host(status):
        return status
    if state not in TERMINAL_STATES:
        hung = ranks.hung_rank(run, status.attempt, now=time.time() - HANG_BACKSTOP_S)
        if hung is not None:  # also when a judge claimed the hang and died before writing it
            ranks.judge_hang(run, hung, takeover_after_s=ranks.CLAIM_TAKEOVER_S)
        else:
            _rank_death_verdict(run, status)
        status = reconcile(run)
    if status.state in TERMINAL_STATES:
        ended = status.ended_at or status.updated_at or 0.0
        if time.time() - ended >= TEARDOWN_AFTER_S.get(status.state, TEARDOWN_AFTER_DEFAULT_S):
            teardown(run, status)
    return status


def teardown(run_dir: RunDir | str | os.PathLike, status: Status | None = None, kill_after_s: float = 1.0) -> int:
    """SIGTERM, then SIGKILL after `kill_after_s`, every process left of a run; returns how many."""
    run = RunDir(run_dir) if not isinstance(run_dir, RunDir) else run_dir
    processes = _RunProcesses(run, status if status is not None else _read_status(run))
    found = processes.scan()
    if not found:
        return 0
    processes.signal(signal.SIGTERM)
    if not _wait_until(lambda: not processes.scan(), kill_after_s):
        processes.signal(signal.SIGKILL)
        _wait_until(lambda: not processes.scan(), 5.0)
    return len(found)


@dataclass(frozen=True)
class Orphan:
    """A live process whose run is already over (or whose run folder is gone)."""
    pid: int
    run_dir: Path
    state: str
    cmdline: str


def find_orphans(runs_dir: str | os.PathLike) -> list[Orphan]:
    """Processes with MINDTUNE_RUN_DIR inside runs_dir whose run is terminal or missing."""
    root = os.path.realpath(runs_dir)
    states: dict[str, str] = {}
    orphans = []
    for process in psutil.process_iter():
        path = _env_run_dir(process)
        if path is None or os.path.dirname(path) != root or not _running(process):
            continue
        if path not in states:
            try:
                states[path] = RunDir(path).read_status().state or "unknown"
            except RunDirError:
                states[path] = "missing" if not os.path.isdir(path) else "unknown"
        if states[path] in TERMINAL_STATES or states[path] == "missing":
            try:
                cmdline = shlex.join(process.cmdline())
            except psutil.Error:
                cmdline = ""
            orphans.append(Orphan(process.pid, Path(path), states[path], cmdline))
    return orphans


# ---- the job queue: what may start now --------------------------------------------------------
#
# The console queues a run (state `queued`) when the devices it needs are busy, instead of starting
# two jobs that halve each other's speed. "Busy" per device: on the CPU one run at a time by default
# (`max_runs`); on GPU/Ascend each run takes `data_parallel` device ids of its own, and the ids are
# handed to its workers through the runtime's visible-devices variable. Each device kind has its own
# queue, first in first out: a run never overtakes an earlier one that waits for the same devices.

VISIBLE_DEVICES_ENV = {"gpu": "CUDA_VISIBLE_DEVICES", "ascend": "ASCEND_RT_VISIBLE_DEVICES"}


@dataclass(frozen=True)
class DeviceSlots:
    """What one machine runs at once: its accelerator ids per device kind, and a cap on concurrent
    runs (None: on the CPU 1, on GPU/Ascend as many as the ids allow)."""
    device_ids: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    max_runs: int | None = None

    def ids(self, device: str) -> tuple[int, ...]:
        return tuple(self.device_ids.get(device, ()))


@dataclass(frozen=True)
class QueuedRun:
    run_id: str
    device: str
    data_parallel: int
    position: float


@dataclass(frozen=True)
class ActiveRun:
    """A run that holds devices: started by this console, another one, or a shell."""
    run_id: str
    device: str
    data_parallel: int
    device_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class Launch:
    run_id: str
    device_ids: tuple[int, ...]   # () on the CPU


def _held_ids(run: ActiveRun, ids: tuple[int, ...]) -> set[int]:
    """The ids an active run holds: those recorded for it, else (started without the console's
    queue, e.g. from a shell) the first `data_parallel` ids, as the runtime would give it."""
    if run.device_ids:
        return set(run.device_ids)
    return set(ids[:max(run.data_parallel, 1)])


def plan_launches(queued: Sequence[QueuedRun], active: Sequence[ActiveRun], slots: DeviceSlots) -> list[Launch]:
    """The queued runs that may start now, in queue order, with the device ids each gets."""
    running = len(active)
    held: dict[str, set[int]] = {}
    count: dict[str, int] = {}
    for run in active:
        held.setdefault(run.device, set()).update(_held_ids(run, slots.ids(run.device)))
        count[run.device] = count.get(run.device, 0) + 1
    blocked: set[str] = set()
    launches = []
    for run in sorted(queued, key=lambda r: r.position):
        if run.device in blocked:
            continue
        if slots.max_runs is not None and running >= slots.max_runs:
            break
        ids = slots.ids(run.device)
        if run.device == "cpu" or not ids:
            # one run at a time (or max_runs) on a device kind without ids to hand out
            cap = slots.max_runs if slots.max_runs is not None else 1
            if count.get(run.device, 0) >= cap:
                blocked.add(run.device)
                continue
            given: tuple[int, ...] = ()
        else:
            free = [i for i in ids if i not in held.get(run.device, set())]
            if len(free) < max(run.data_parallel, 1):
                blocked.add(run.device)
                continue
            given = tuple(free[:max(run.data_parallel, 1)])
            held.setdefault(run.device, set()).update(given)
        count[run.device] = count.get(run.device, 0) + 1
        running += 1
        launches.append(Launch(run.run_id, given))
    return launches


def dry_run_env(device: str, active: Sequence[ActiveRun], slots: DeviceSlots) -> dict[str, str]:
    """The environment of a dry run (`core.dry_run`, one worker) on `device`: the device id a
    one-worker run launched now would get (`plan_launches`), so a dry run never lands on a device
    a run holds ({} on the CPU, or where no ids are configured). LaunchError when every id is held."""
    if device == "cpu" or not slots.ids(device):
        return {}
    probe = QueuedRun("dry-run", device, 1, 0.0)
    plans = plan_launches([probe], active, DeviceSlots(slots.device_ids))  # the run cap does not apply
    if not plans:
        held = ", ".join(run.run_id for run in active if run.device == device)
        raise LaunchError(Message("run.check.devices_held", device=device, ids=", ".join(map(str, slots.ids(device))),
                                  held=held))
    return device_env(device, plans[0].device_ids)


def device_env(device: str, device_ids: Sequence[int]) -> dict[str, str]:
    """The environment that confines a run's workers to its device ids ({} on the CPU)."""
    name = VISIBLE_DEVICES_ENV.get(device)
    return {name: ",".join(str(i) for i in device_ids)} if name and device_ids else {}
