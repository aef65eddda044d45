"""Every worker process of a run under a small supervisor that knows how it ended.

    python -m core.ranks --run-dir runs/<id>     # what core.run.launcher starts for one worker
    msrun ... core/ranks.py --run-dir runs/<id>  # msrun runs it once per rank (and for its scheduler)

(core.ranks is the command line; the supervisor is here.)

The supervisor is a stdlib-only parent of the real worker (`core/train.py`, which imports
MindSpore): it records the worker's pid in `ranks/rank-<R>.json`, samples its memory, checks the
heartbeat the worker writes as it makes progress, and when the worker ends it records the exit
code or signal. If the worker died without writing a final status (a kill, the kernel's
out-of-memory killer, a segfault) or stopped making progress for `parallel.hang_timeout_s`, the
supervisor writes the run's failure itself, naming the rank, the signal and the evidence, with
the tail of that rank's log; it then exits the way the worker did (same signal), so msrun sees
the same death. The first verdict wins: a status that is already terminal is never overwritten.

    ranks/rank-<R>.json   {rank, world, attempt, pid, supervisor_pid, hostname, node, create_time,
                           started_at, state: running|exited, exit_code, exit_signal, ended_at,
                           last_rss_mb, peak_rss_mb, memory_limit_mb, memory: {...}}
    ranks/rank-<R>.beat   {rank, attempt, pid, step, phase, time, timeout_s}  (the worker's heartbeat)

The console's watcher (`core.run.launcher.watch`) reads the same files, so it sees a dead rank even if
its supervisor died too, and tears the rest of the group down.
"""
from __future__ import annotations

import json
import os
import psutil
import signal
import socket
import subprocess
import sys
import time
import traceback
from pathlib import Path

from core.spec.messages import Message
from core.run.records import TERMINAL_STATES, RunDirError, Status
from core.run.rundir import RunDir, atomic_write_json, parse_step_folder

REPO_ROOT = Path(os.path.abspath(__file__)).parents[2]  # not resolved: a linked copy runs its own train.py
POLL_S = 0.2
BEAT_EVERY_S = 1.0
HANG_PHASES = ("train", "eval", "save")  # phases whose silence means a hang (setup, compiling, generating may be long)
OOM_NEAR_LIMIT = 0.9              # last RSS at >= 90% of the memory limit counts as evidence of an OOM kill
OOM_ADVICE = Message("advice.oom")
LOG_TAIL_LINES = 20
ENV_NODE = "MINDTUNE_NODE"  # the cluster node a rank runs on (core.run.slurm_node sets Slurm's node name)
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rank_file(run: RunDir, rank: int) -> Path:
    return run.ranks_dir / f"rank-{rank}.json"


def beat_file(run: RunDir, rank: int) -> Path:
    return run.ranks_dir / f"rank-{rank}.beat"


def env_rank() -> int:
    """This process's data-parallel rank as msrun numbers it (RANK_ID), 0 without msrun."""
    try:
        return int(os.environ.get("RANK_ID", "0"))
    except ValueError:
        return 0


def env_world() -> int:
    try:
        return max(1, int(os.environ.get("MS_WORKER_NUM", "1")))
    except ValueError:
        return 1


def signal_name(number: int | None) -> str:
    if not number:
        return ""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def rank_records(run: RunDir, attempt: int | None = None) -> dict[int, dict]:
    """The rank records of the run (of `attempt` only, when given), by rank."""
    records = {}
    folder = run.ranks_dir
    if not folder.is_dir():
        return records
    for path in folder.glob("rank-*.json"):
        record = read_json(path)
        if record is None or not isinstance(record.get("rank"), int):
            continue
        if attempt is not None and record.get("attempt") != attempt:
            continue
        record["beat"] = read_json(beat_file(run, record["rank"]))
        records[record["rank"]] = record
    return dict(sorted(records.items()))


# ---- the heartbeat (written by the worker) ------------------------------------------------------

class Heartbeat:
    """What the worker calls as it makes progress; writes at most once a second, and always when
    the phase changes. Writes are plain (no fsync, no rename): only their timing matters."""

    def __init__(self, run: RunDir, rank: int, attempt: int, timeout_s: float):
        self.path = beat_file(run, rank)
        self.tmp = self.path.with_name(f".{self.path.name}.tmp")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fields = {"rank": rank, "attempt": attempt, "pid": os.getpid(), "timeout_s": float(timeout_s)}
        self.last_write, self.phase = 0.0, None

    def beat(self, step: int, phase: str) -> None:
        now = time.time()
        if phase == self.phase and now - self.last_write < BEAT_EVERY_S:
            return
        self.phase, self.last_write = phase, now
        try:  # a temp name and a rename (no fsync: only timing matters), so a worker stopped (SIGSTOP)
            # in the middle of a write never leaves a half-written beat for its judges to read forever
            self.tmp.write_text(json.dumps({**self.fields, "step": int(step), "phase": phase, "time": now}),
                                encoding="utf-8")
            os.replace(self.tmp, self.path)
        except OSError:
            pass  # a full disk must not kill training here; the save will say so


def stale_beat(beat: dict | None, now: float | None = None, stopped: bool = False) -> float | None:
    """Seconds without progress if the heartbeat is older than its timeout in a phase that should
    keep beating (in any phase when the process is `stopped`: SIGSTOP or a debugger), else None."""
    if not beat or (beat.get("phase") not in HANG_PHASES and not stopped):
        return None
    age = (now or time.time()) - float(beat.get("time") or 0)
    return age if age > float(beat.get("timeout_s") or 120.0) else None


def overdue(beat: dict | None, pid, local: bool = True, now: float | None = None) -> bool:
    """Whether a rank with this heartbeat stopped making progress: `stale_beat`, where the process
    state (`pid` on this host) is read only once the beat is older than its timeout."""
    if stale_beat(beat, now, stopped=True) is None:
        return False
    return stale_beat(beat, now) is not None or (local and _stopped(pid))


def _stopped(pid) -> bool:
    return isinstance(pid, int) and process_state(pid).startswith("stopped")


# ---- memory evidence ------------------------------------------------------------------------------

def _cgroup_dirs(pid: int) -> tuple[Path | None, Path | None]:
    """(cgroup v1 memory folder, cgroup v2 folder) of a process, where they exist."""
    v1 = v2 = None
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None, None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            for root in (Path("/sys/fs/cgroup/memory"), Path("/sys/fs/cgroup")):
                folder = root / path.lstrip("/")
                if (folder / "memory.oom_control").exists():
                    v1 = folder
                    break
        elif controllers == "":
            folder = Path("/sys/fs/cgroup") / path.lstrip("/")
            if (folder / "memory.events").exists():
                v2 = folder
    return v1, v2


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _counter(path: Path, key: str) -> int | None:
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        return None
    return None


def memory_snapshot(pid: int) -> dict:
    """OOM counters and the memory limit that apply to `pid`: its memory cgroup's (v1
    memory.oom_control / memory.limit_in_bytes, v2 memory.events / memory.max) and the machine's
    (/proc/vmstat oom_kill, MemTotal)."""
    v1, v2 = _cgroup_dirs(pid)
    snap: dict = {"vmstat_oom_kill": _counter(Path("/proc/vmstat"), "oom_kill")}
    try:
        total = int(Path("/proc/meminfo").read_text().split("MemTotal:")[1].split()[0]) * 1024
    except (OSError, IndexError, ValueError):
        total = None
    limit = None
    if v2 is not None:
        snap["cgroup"] = str(v2)
        snap["cgroup_oom_kill"] = _counter(v2 / "memory.events", "oom_kill")
        raw = (v2 / "memory.max").read_text().strip() if (v2 / "memory.max").exists() else "max"
        limit = int(raw) if raw.isdigit() else None
    if v1 is not None:
        snap["cgroup"] = str(v1)
        snap["cgroup_oom_kill"] = _counter(v1 / "memory.oom_control", "oom_kill")
        limit = _read_int(v1 / "memory.limit_in_bytes")
    if limit is None or (total is not None and limit >= total):
        limit, snap["limit_from"] = total, "machine"
    else:
        snap["limit_from"] = "cgroup"
    snap["limit_bytes"] = limit
    return snap


def rss_bytes(pid: int) -> int | None:
    """The process's private resident memory (resident minus file-backed shared pages: what a
    memory limit really charges it; the shared libraries' pages can be dropped and read again)."""
    try:
        fields = Path(f"/proc/{pid}/statm").read_text().split()
        return (int(fields[1]) - int(fields[2])) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


def oom_evidence(before: dict, after: dict, last_rss: int | None) -> str | None:
    """Why a SIGKILL looks like the kernel's OOM killer, or None when nothing says so."""
    reasons = []
    for key, where in (("cgroup_oom_kill", f"the memory cgroup {after.get('cgroup')}"),
                       ("vmstat_oom_kill", "the kernel (/proc/vmstat)")):
        if after.get(key) is not None and before.get(key) is not None and after[key] > before[key]:
            reasons.append(f"{where} counted {after[key] - before[key]} OOM kill(s) while it ran")
    limit = after.get("limit_bytes")
    if last_rss and limit and last_rss >= OOM_NEAR_LIMIT * limit:
        reasons.append(f"its last private RSS {last_rss / 2**20:.0f} MB was {100 * last_rss / limit:.0f}% of the "
                       f"{after.get('limit_from')} limit {limit / 2**20:.0f} MB")
    elif last_rss and limit and reasons:
        reasons.append(f"last private RSS {last_rss / 2**20:.0f} MB, {after.get('limit_from')} limit "
                       f"{limit / 2**20:.0f} MB")
    return "; ".join(reasons) or None


# ---- verdicts ---------------------------------------------------------------------------------------

# What MindSpore 2.10's device allocators put in the RuntimeError they raise when device memory runs
# out (read from the wheel's libmindspore_ms_backend.so / libmindspore_memory_pool.so /
# libmindspore_hardware_abstract.so strings): "Device(id:0) memory isn't enough and alloc failed,
# kernel name: ..., alloc size: ...", "Memory not enough: ...", "Allocate memory failed ...".
DEVICE_OOM_MARKERS = ("memory isn't enough", "memory not enough", "allocate memory failed", "out of memory",
                      "malloc device memory failed")


def device_oom_reason(exc: BaseException, device: str, figures: str = "") -> Message | None:
    """The `oom` account of an exception a GPU/Ascend worker raised, or None when it is not a device
    out-of-memory (on the CPU a MemoryError is the only one, handled by the worker). `figures`: the
    device allocator's peak and total (core.engine.devices.memory_figures)."""
    if device == "cpu" or isinstance(exc, MemoryError) or not isinstance(exc, RuntimeError):
        return None
    text = str(exc)
    lowered = text.lower()
    if not any(marker in lowered for marker in DEVICE_OOM_MARKERS):
        return None
    line = next((ln.strip() for ln in text.splitlines() if any(m in ln.lower() for m in DEVICE_OOM_MARKERS)),
                text.strip())
    if figures:
        return Message("rank.device_oom_figures", device=device, error=line[:300], figures=figures)
    return Message("rank.device_oom", device=device, error=line[:300])


def log_of(run: RunDir, rank: int, world: int) -> Path:
    """Where a rank's output goes: msrun's per-worker log for a data-parallel run, else train.log."""
    return run.worker_log(rank) if world > 1 else run.log_path


def read_tail(path: Path, max_bytes: int) -> str | None:
    """The last `max_bytes` of a log file as text (undecodable bytes replaced); None if unreadable."""
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - max_bytes))
            return handle.read().decode("utf-8", errors="replace")
    except OSError:
        return None


def log_tail(path: Path, lines: int = LOG_TAIL_LINES, max_bytes: int = 32768) -> list[str]:
    text = read_tail(path, max_bytes)
    if text is None:
        return []
    return [line.rstrip() for line in text.splitlines() if line.strip()][-lines:]


def resumable_note(run: RunDir) -> dict:
    """{'resumable_checkpoint': name} and a sentence for the reason, naming the newest checkpoint a
    resume would use (complete by its manifest), or saying there is none."""
    from core.run.ckpt_store import newest_resumable  # NumPy: only when a verdict is written

    folder = newest_resumable(run.checkpoints_dir, contents=False)
    if folder is None:
        return {"resumable_checkpoint": None, "note": Message("run.no_resumable")}
    return {"resumable_checkpoint": folder.name, "note": Message("run.resumable", checkpoint=folder.name)}


def write_verdict(run: RunDir, state: str, reason: str, **fields) -> dict | None:
    """Write the run's end unless another process already did (the first verdict wins); adds the
    newest resumable checkpoint, and its step when the worker saved it after its last status line
    (Stop now kills it in between: status step 30 beside step-31). Returns the status written, or None."""
    try:
        status = run.read_status()
        if status.state in TERMINAL_STATES:
            return None
    except RunDirError:
        return None
    try:
        note = resumable_note(run)
    except Exception as exc:  # noqa: BLE001 — e.g. a checkpoint being pruned while it is read
        note = {"resumable_checkpoint": None,
                "note": Message("rank.resumable_unknown", error=f"{type(exc).__name__}: {exc}")}
    saved = parse_step_folder(note["resumable_checkpoint"] or "")
    if saved and saved[0] > (status.step or 0):
        fields.setdefault("step", saved[0])
    try:
        reason = reason if isinstance(reason, Message) else reason.rstrip(".")
        return run.write_status(state=state, reason=Message("run.with_note", reason=reason, note=note["note"]),
                                resumable_checkpoint=note["resumable_checkpoint"], ended_at=time.time(), **fields)
    except RunDirError:
        return None


def rank_label(rank: int, world: int, node: str | None = None) -> str:
    """'rank 1', 'rank 1 on node node2' (a cluster run), or 'the worker' (one process)."""
    who = Message("rank.rank", rank=rank) if world > 1 else Message("rank.worker")
    return Message("rank.on_node", who=who, node=node) if node else who


def death_verdict(rank: int, world: int, exit_code: int | None, exit_signal: int | None,
                  evidence: str | None, stopping: bool, node: str | None = None) -> tuple[str, str, str]:
    """(state, failure_kind, reason) for a worker that ended without writing a final status."""
    who = rank_label(rank, world, node)
    if stopping:
        return "stopped", "", Message("run.stopped_forced")
    if exit_signal:
        name = signal_name(exit_signal)
        if exit_signal == signal.SIGKILL and evidence:
            return "failed", "oom", Message("rank.oom_killed", who=who, signal=name, evidence=evidence, advice=OOM_ADVICE)
        kind = "rank_died" if world > 1 else "crash"
        return "failed", kind, Message("rank.killed_no_oom" if exit_signal == signal.SIGKILL else "rank.killed",
                                       who=who, signal=name)
    kind = "rank_died" if world > 1 else "crash"
    return "failed", kind, Message("rank.exited", who=who, code=exit_code)


def hang_verdict(rank: int, world: int, beat: dict, age: float, process_state: str, node: str | None = None) -> str:
    who = rank_label(rank, world, node)
    return Message("rank.hung", who=who, age=f"{age:.0f}", timeout=f"{float(beat.get('timeout_s') or 0):g}",
                   step=beat.get("step"), phase=beat.get("phase"), state=process_state)


def hung_rank(run: RunDir, attempt: int, now: float | None = None) -> dict | None:
    """The rank to blame when a rank's heartbeat went stale: one whose process is stopped (as
    SIGSTOP leaves it) if any, else the one that beat last longest ago (the others are most likely
    waiting for it in a collective); None while no rank is stale. Every detector (each rank's
    supervisor, the console's watcher) picks the same one."""
    now = now or time.time()
    records = [r for r in rank_records(run, attempt).values() if r.get("state") == "running" and r.get("beat")]
    local = socket.gethostname()
    stale = [r for r in records if overdue(r["beat"], r.get("pid"), r.get("hostname") == local, now)]
    if not stale:
        return None
    for record in records:
        if record.get("hostname") == local and _stopped(record.get("pid")):
            return record
    return min(stale, key=lambda r: (r["beat"].get("step", 0), r["beat"].get("time", 0), r["rank"]))


def _claim_path(run: RunDir, what: str, attempt) -> Path:
    return run.ranks_dir / f".{what}-{attempt}"


def _claim(run: RunDir, what: str, attempt, about: dict | None = None,
           takeover_after_s: float | None = None) -> tuple[bool, dict | None]:
    """(True, None) for the first process that claims `what` for this attempt (several judges may
    see the same hang at once; one of them kills and reports); the claim file holds the claimer's
    pid and `about` (the rank blamed and the verdict's text). With `takeover_after_s`, a claim whose
    claimer is gone, or that is older than that and still has no verdict, is abandoned: one caller
    takes it over (the one whose rename of it wins) and gets (True, the abandoned claim)."""
    path = _claim_path(run, what, attempt)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        previous = _abandoned(path, takeover_after_s) if takeover_after_s is not None else None
        if previous is None:
            return False, None
        try:
            os.rename(path, path.with_name(f"{path.name}.abandoned-{os.getpid()}-{time.time():.3f}"))
        except OSError:
            return False, None  # another taker won
        return _claim(run, what, attempt, about)[0], previous
    except OSError:
        return True, None
    try:
        os.write(fd, json.dumps({**(about or {}), "pid": os.getpid()}).encode())
    finally:
        os.close(fd)
    return True, None


def _abandoned(claim: Path, after_s: float) -> dict | None:
    """The claim's contents if its claimer is gone or it is older than `after_s`, else None."""
    try:
        age = time.time() - claim.stat().st_mtime
        data = json.loads(claim.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return None
    data = data if isinstance(data, dict) else {}
    claimer = data.get("pid")
    gone = isinstance(claimer, int) and not psutil.pid_exists(claimer) and age > 1.0
    return data if age > after_s or gone else None


def _release(run: RunDir, what: str, attempt) -> None:
    try:
        os.unlink(_claim_path(run, what, attempt))
    except OSError:
        pass


def hang_claimed(run: RunDir, attempt) -> bool:
    """Whether a judge has claimed this attempt's hang (it kills the hung rank, then reports: that
    rank's death is its doing, not news)."""
    return _claim_path(run, "hang-verdict", attempt).exists()


CLAIM_TAKEOVER_S = 10.0  # a hang's judge that wrote no verdict this long after its claim is presumed dead


def judge_hang(run: RunDir, record: dict, takeover_after_s: float | None = None) -> dict | None:
    """Fail the run as `record`'s rank having stopped making progress (if nothing else ended it).
    `takeover_after_s`: also judge when another judge claimed the hang but wrote nothing for that
    long (it died: msrun tears a group down when one of its processes ends)."""
    attempt = record.get("attempt")
    reason = _hang_reason(record)
    claimed, abandoned = _claim(run, "hang-verdict", attempt, {"rank": record.get("rank"), "reason": reason},
                                takeover_after_s)
    if not claimed:
        return None
    try:
        if abandoned and isinstance(abandoned.get("rank"), int):
            # the dead judge may have killed the rank it blamed already: that one is still the culprit,
            # in the words it had for it (its process state then, not "gone" now)
            if abandoned["rank"] != record.get("rank"):
                record = {**record, **(rank_records(run, attempt).get(abandoned["rank"]) or {})}
                reason = _hang_reason(record)
            if isinstance(abandoned.get("reason"), str):
                reason = abandoned["reason"]
        world = int(record.get("world") or 1)
        if record.get("hostname") == socket.gethostname():
            _kill(record.get("pid"), record.get("create_time"))  # first: it may hold the run's lock, frozen
        written = write_verdict(run, "failed", reason, failure_kind="hang", failed_rank=record["rank"],
                                error_lines=log_tail(log_of(run, record["rank"], world)))
    except Exception:  # noqa: BLE001 — a judge that fails must not keep the claim: others judge instead
        _release(run, "hang-verdict", attempt)
        raise
    if written is not None:
        print(f"mindtune: {reason}", file=sys.stderr, flush=True)
    return written


def _hang_reason(record: dict) -> str:
    """The verdict on `record`'s rank as it is now: the age of its last beat, its process state."""
    beat = record.get("beat") or {}
    age = time.time() - float(beat.get("time") or 0)
    state = process_state(record.get("pid")) if record.get("hostname") == socket.gethostname() else "on another host"
    return hang_verdict(record["rank"], int(record.get("world") or 1), beat, age, state, record.get("node"))


def judge_abandoned_hang(run: RunDir, attempt) -> dict | None:
    """Write the hang a judge claimed and died before reporting (msrun ended the whole group after
    that judge's process ended), once nothing of the run is left to judge it again."""
    try:
        data = json.loads(_claim_path(run, "hang-verdict", attempt).read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return None
    record = rank_records(run, attempt).get(data.get("rank")) if isinstance(data, dict) else None
    if not record or not record.get("beat"):
        return None
    return judge_hang(run, record, takeover_after_s=0.0)


def _kill(pid, create_time) -> None:
    """SIGKILL `pid` if it still is the process recorded (a stopped process dies too)."""
    if not isinstance(pid, int):
        return
    try:
        process = psutil.Process(pid)
        if create_time is None or abs(process.create_time() - float(create_time)) < 0.05:
            process.kill()
    except psutil.Error:
        pass


def peer_trouble(run: RunDir, rank: int, attempt: int) -> tuple[str, str, dict] | None:
    """(failure_kind, sentence, its rank record) about another rank that died, is stopped or
    stopped beating well before this one: what a rank that fails in a collective should blame first."""
    records = rank_records(run, attempt)
    mine = (records.get(rank) or {}).get("beat") or {}
    for other, record in records.items():
        if other == rank:
            continue
        if record.get("state") == "exited" and (record.get("exit_signal") or record.get("exit_code")):
            who = Message("rank.rank", rank=other)
            how = (Message("rank.killed", who=who, signal=signal_name(record["exit_signal"])) if record.get("exit_signal")
                   else Message("rank.peer_exited", who=who, code=record["exit_code"]))
            return "rank_died", how, record
        pid = record.get("pid")
        if record.get("hostname") == socket.gethostname() and isinstance(pid, int):
            state = process_state(pid)
            if state.startswith("stopped"):
                return "hang", Message("rank.peer_stopped", who=Message("rank.rank", rank=other), state=state), record
        beat = record.get("beat") or {}
        if mine.get("time") and beat.get("time") and mine["time"] - beat["time"] > 10:
            return "hang", Message("rank.peer_behind", who=Message("rank.rank", rank=other), step=beat.get("step"),
                                   age=f"{mine['time'] - beat['time']:.0f}", rank=rank), record
    return None


def process_state(pid: int) -> str:
    """'stopped (SIGSTOP or a debugger)', 'sleeping', 'running', ... from /proc/<pid>/stat."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "gone"
    return {"T": "stopped (SIGSTOP or a debugger)", "t": "stopped by a debugger", "S": "sleeping",
            "R": "running", "D": "waiting on disk", "Z": "exited"}.get(state, state)


# ---- the supervisor ---------------------------------------------------------------------------------

class Supervisor:
    """Runs one rank's worker and records how it goes (see the module docstring)."""

    def __init__(self, run_dir: str, argv_tail: list[str]):
        self.run = RunDir(os.path.abspath(run_dir))
        self.argv_tail = argv_tail
        self.rank, self.world = env_rank(), env_world()
        self.node = os.environ.get(ENV_NODE) or None
        self.signalled: int | None = None  # a signal this supervisor got (and forwarded to its worker)
        self.attempt = self._status().attempt
        self.record: dict = {}
        self.check_failed = False

    def _status(self) -> Status:
        try:
            return self.run.read_status()
        except RunDirError:
            return Status()

    def _save_record(self, **fields) -> None:
        self.record.update(fields)
        try:
            self.run.ranks_dir.mkdir(exist_ok=True)
            atomic_write_json(rank_file(self.run, self.rank), self.record)
        except OSError:
            pass

    def start(self) -> subprocess.Popen:
        argv = [sys.executable, str(REPO_ROOT / "core" / "train.py"), *self.argv_tail]
        env = {**os.environ, "MINDTUNE_SUPERVISED": "1", "MINDTUNE_RANK": str(self.rank)}
        child = subprocess.Popen(argv, cwd=os.getcwd(), env=env, close_fds=True)
        try:
            created = psutil.Process(child.pid).create_time()
        except psutil.Error:
            created = None
        self.memory_before = memory_snapshot(child.pid)
        self._save_record(rank=self.rank, world=self.world, attempt=self.attempt, pid=child.pid,
                          supervisor_pid=os.getpid(), hostname=socket.gethostname(), node=self.node,
                          create_time=created,
                          started_at=time.time(), state="running", exit_code=None, exit_signal=None,
                          memory_limit_mb=_mb(self.memory_before.get("limit_bytes")))
        return child

    def supervise(self) -> int:
        child = self.start()
        def forward(number, _frame):
            self.signalled = number
            _forward(child, number)

        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, forward)
        last_rss = peak_rss = None
        last_sample = 0.0
        while True:
            try:
                pid, wait_status = os.waitpid(child.pid, os.WNOHANG)
            except ChildProcessError:
                pid, wait_status = child.pid, 0
            if pid == child.pid:
                break
            rss = rss_bytes(child.pid)
            if rss is not None:
                last_rss, peak_rss = rss, max(rss, peak_rss or 0)
            if time.monotonic() - last_sample > 5.0:
                last_sample = time.monotonic()
                self._save_record(last_rss_mb=_mb(last_rss), peak_rss_mb=_mb(peak_rss))
            self._check_progress(child)
            time.sleep(POLL_S)
        child.returncode = os.waitstatus_to_exitcode(wait_status)
        code = child.returncode
        exit_signal = -code if code < 0 else None
        after = memory_snapshot(os.getpid())
        evidence = oom_evidence(self.memory_before, after, last_rss) if exit_signal == signal.SIGKILL else None
        self._save_record(state="exited", exit_code=None if exit_signal else code, exit_signal=exit_signal,
                          signal_name=signal_name(exit_signal), ended_at=time.time(), last_rss_mb=_mb(last_rss),
                          peak_rss_mb=_mb(peak_rss), memory=after, oom_evidence=evidence)
        if code != 0:
            self._judge_death(code, exit_signal, evidence)
        return code

    def _judge_death(self, code: int, exit_signal: int | None, evidence: str | None) -> None:
        if hang_claimed(self.run, self.attempt):
            return  # killed by the judge of a hang, which reports it
        status = self._status()
        if status.state in TERMINAL_STATES:
            return  # the worker (or another rank's supervisor) already said how the run ended
        stopping = status.state == "stopping" and _stop_requested(self.run)
        state, kind, reason = death_verdict(self.rank, self.world, None if exit_signal else code, exit_signal,
                                            evidence, stopping, self.node)
        lines = log_tail(log_of(self.run, self.rank, self.world))
        fields = {"failure_kind": kind, "failed_rank": self.rank, "error_lines": lines,
                  "exit_signal": signal_name(exit_signal) or None, "exit_code": None if exit_signal else code}
        if os.environ.get("SLURM_JOB_ID") and exit_signal and exit_signal == self.signalled and not stopping:
            # a cluster run whose whole step got the signal from Slurm (scancel, a time limit,
            # preemption): not this rank's crash; core.run.slurm says which it was
            state, reason = "stopped", Message("rank.stopped_by_slurm", who=rank_label(self.rank, self.world, self.node),
                                               signal=signal_name(exit_signal), job_id=os.environ["SLURM_JOB_ID"])
        if state == "stopped":
            fields = {}
        write_verdict(self.run, state, reason, **fields)

    def _check_progress(self, child: subprocess.Popen) -> None:
        try:
            self._judge_progress(child)
        except Exception:  # noqa: BLE001 — the supervisor must outlive its own checks: if it ended,
            if not self.check_failed:  # msrun would tear the group down with no account of why
                self.check_failed = True
                traceback.print_exc()

    def _judge_progress(self, child: subprocess.Popen) -> None:
        beat = read_json(beat_file(self.run, self.rank))
        if not beat or beat.get("pid") != child.pid or not overdue(beat, child.pid):
            return
        culprit = hung_rank(self.run, self.attempt)
        if culprit is not None:
            judge_hang(self.run, culprit)
        if self._status().state in TERMINAL_STATES:
            try:
                os.kill(child.pid, signal.SIGKILL)  # works on a stopped process too
            except OSError:
                pass


def _stop_requested(run: RunDir) -> bool:
    try:
        return bool(run.read_control().stop)
    except RunDirError:
        return False


def _forward(child: subprocess.Popen, number: int) -> None:
    try:
        child.send_signal(number)
    except OSError:
        pass


def _mb(value: int | None) -> float | None:
    return round(value / 2**20, 1) if value else None


def exit_like(code: int) -> None:
    """Leave this process the way the worker left (its signal, or its exit code)."""
    if code < 0:
        if -code not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        time.sleep(1)
    sys.exit(code if code >= 0 else 128 - code)
