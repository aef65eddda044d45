"""The training worker's command line: LoRA or full fine-tuning of a Hugging Face checkpoint on MindSpore.

    python -m core.train --config configs/lora_demo.yaml [key=value ...]   # new run under runs/
    python -m core.train --run-dir runs/<id>                                # a run the console created

It writes the run directory described in DESIGN.md (status.json, metrics.jsonl, checkpoints/)
and polls control.json. With `parallel.data_parallel = N > 1` the command line relaunches itself
through `msrun` (N workers; rank 0 writes metrics and checkpoints). The loop itself is
core.engine.trainer; this module starts it, and turns what ends a worker into the run's status.
"""
from __future__ import annotations

import argparse
import errno
import os
import signal
import sys
import time
import traceback
from pathlib import Path

if __package__ in (None, ""):  # run as a script by msrun: make `core` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import core.run.ckpt_store as ckpt_store
import core.engine.devices as devices
import core.run.accelerators as accelerators
import core.run.backends as backends
import core.run.launcher as launcher
import core.run.ranks as ranks
import core.run.slurm as slurm
import core.spec.memory as memory
from core.data.pipeline import check_explicit_format
from core.data.files import DataError
from core.data.tokenizer import TokenizerError
from core.spec.errors import CheckpointError
from core.engine.generate import use_device
from core.engine.trainer import USER_ERRORS, Cluster, Trainer, TrainingFailed
from core.run.records import TERMINAL_STATES
from core.run.rundir import RunDir
from core.spec.config import Config, ConfigError, load_config
from core.spec.errors import said_of
from core.spec.messages import Message
from core.spec.model_args import read_model_args
from core.spec.objectives import spec_of
from core.data.prompts import reward_columns
from core.eval.rewards import check_rewards


# ---- entry points --------------------------------------------------------------------------

def _parse(argv):
    parser = argparse.ArgumentParser(prog="python -m core.train", description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--config", help="YAML config (creates a new run under run.runs_dir)")
    source.add_argument("--run-dir", help="an existing run folder with config.yaml (made by the console)")
    parser.add_argument("overrides", nargs="*", help="key=value overrides, e.g. train.max_steps=50")
    return parser.parse_args(argv)


def run_worker(run_dir: str) -> int:
    """Train the run in `run_dir` in this process (one rank). Returns the exit code."""
    run = RunDir(run_dir)
    if os.environ.get("MS_ROLE") == "MS_SCHED":
        return run_scheduler(run)
    cluster = config = None
    try:
        config = load_config(run.config_path)
        use_device(config.parallel.device)
        devices.check_bf16(config)  # bf16 on a device without it (Ascend 910A): refused by name
        cluster = Cluster(config.parallel.data_parallel)
        trainer = Trainer(config, run, cluster)
        signal.signal(signal.SIGTERM, lambda *_: setattr(trainer, "stop_signal", True))
        resume = config.run.resume
        trainer.execute(resume)
        return 0
    except USER_ERRORS + (TrainingFailed,) as exc:
        if getattr(exc, "traceback", None):  # a reward function's own traceback (core.eval.rewards)
            print(exc.traceback, file=sys.stderr, flush=True)
        _fail(run, cluster, said_of(exc), failure_kind_of(exc))
        return 1
    except MemoryError as exc:
        traceback.print_exc()
        _fail(run, cluster, Message("train.out_of_memory", error=str(exc), advice=OOM_ADVICE), "oom")
        return 1
    except OSError as exc:
        traceback.print_exc()
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            where = Path(exc.filename).parent if exc.filename else run.path
            said = dict(os_says=str(exc.strerror), free=ckpt_store.format_bytes(ckpt_store.free_bytes(where)), folder=str(where))
            _fail(run, cluster, Message("train.disk_full", file=str(exc.filename), **said) if exc.filename
                  else Message("train.disk_full_run_file", **said), "disk_full")
        else:
            _fail(run, cluster, Message("train.crashed", error=f"{type(exc).__name__}: {exc}"), "crash")
        return 1
    except Exception as exc:  # noqa: BLE001 — every crash must end in a readable status
        traceback.print_exc()
        device = config.parallel.device if config is not None else "cpu"
        oom = ranks.device_oom_reason(exc, device, devices.memory_figures() if device != "cpu" else "")
        if oom is not None:
            said = "train.device_out_of_memory_figures" if "figures" in oom.params else "train.device_out_of_memory"
            _fail(run, cluster, Message(said, **oom.params, advice=OOM_ADVICE), "oom")
        else:
            _fail(run, cluster, Message("train.crashed", error=f"{type(exc).__name__}: {exc}"), "crash")
        return 1


OOM_ADVICE = ranks.OOM_ADVICE


def failure_kind_of(exc: BaseException) -> str:
    """status.json's `failure_kind` for an error the worker understood: `data` (a data file or the
    tokenizer), `config` (settings, a checkpoint that does not fit, LoRA targets), `checkpoint` (a
    checkpoint whose bytes differ from its manifest), `disk_full`, `nonfinite` (the loss diverged)
    or `loss_scale` (fp16 gradients kept overflowing although the loss was finite)."""
    if isinstance(exc, TrainingFailed):
        return exc.kind
    if isinstance(exc, ckpt_store.DiskFull):
        return "disk_full"
    if isinstance(exc, ckpt_store.CheckpointCorrupt):
        return "checkpoint"
    if isinstance(exc, (DataError, TokenizerError)):
        return "data"
    return "config"


def run_scheduler(run: RunDir) -> int:
    """msrun runs this script for its scheduler too, which only hosts the workers' rendezvous. It
    never writes the run's status: when a rank dies the scheduler sees only a heartbeat timeout
    ("worker N timed out") some 30 s later; that rank's supervisor (core.run.ranks) names the death."""
    try:
        config = load_config(run.config_path)
        use_device(config.parallel.device)
        Cluster(config.parallel.data_parallel)
    except Exception as exc:  # noqa: BLE001 — printed to logs/scheduler.log, nothing else
        print(f"scheduler: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return 1
    return 0


PEER_WAIT_S = 3.0  # how long a failing rank waits for news of a peer before blaming itself


def _fail(run: RunDir, cluster: Cluster | None, reason: str, kind: str) -> None:
    """Record the run's failure unless it already ended (the first verdict wins: a rank that fails
    because a peer died or hung must not replace the supervisor's account of that peer). With
    several ranks, a failure that follows a peer's death or hang is reported as that."""
    print(f"error: {reason}", file=sys.stderr, flush=True)
    rank, world = ranks.env_rank(), ranks.env_world()
    try:
        status = run.read_status()
        attempt = status.attempt
        # a crash in a collective is often a peer's death seen from here: wait a moment for its news
        deadline = time.monotonic() + (PEER_WAIT_S if world > 1 and kind == "crash" else 0.0)
        while True:
            if status.state in TERMINAL_STATES:
                return
            trouble = ranks.peer_trouble(run, rank, attempt) if world > 1 else None
            if trouble is not None and trouble[0] == "hang" and trouble[2].get("beat"):
                ranks.judge_hang(run, trouble[2])  # the same account as its supervisor gives
                return
            if trouble is not None:
                kind, reason = trouble[0], Message("rank.then_failed", note=trouble[1], rank=rank, reason=reason)
                rank = trouble[2]["rank"]
                break
            if time.monotonic() >= deadline:
                break
            time.sleep(0.2)
            status = run.read_status()
        if world > 1 and trouble is None:
            reason = Message("rank.said", rank=rank, reason=reason)
        note = ranks.resumable_note(run)
        run.write_status(state="failed", reason=reason, failure_kind=kind, ended_at=time.time(),
                         resumable_checkpoint=note["resumable_checkpoint"],
                         **({"failed_rank": rank} if world > 1 else {}))
    except Exception:  # noqa: BLE001
        traceback.print_exc()


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    if args.run_dir:
        return run_worker(args.run_dir)
    try:
        config = load_config(args.config, args.overrides)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if config.launch.backend != "local":
        return _submit(config)
    try:
        launcher.check_workers_available(config.parallel.data_parallel, config.parallel.device)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:  # a data.format the data contradicts, named with the file that set it, before a run is made
        check_explicit_format(config.data, getattr(config, "origins", {}).get("data.format"))
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    problems = reward_problems(config)
    if problems:  # grpo: a column a reward reads that the data lacks, a reward file or run that cannot run
        print(f"error: {ConfigError(problems)}", file=sys.stderr)
        return 2
    warning = memory_warning(config)
    if warning:
        print(f"warning: {warning}", file=sys.stderr, flush=True)
    run = launcher.create_run(config)
    if config.parallel.data_parallel > 1:
        print(f"run directory: {run.path}", flush=True)
        return _follow(launcher.launch(run))
    with launcher.TeeToLog(run.log_path, ["python", "-m", "core.train", *(argv if argv is not None else sys.argv[1:])]):
        print(f"run directory: {run.path}", flush=True)
        return run_worker(str(run.path))


def _submit(config: Config) -> int:
    """launch.backend slurm: check what Slurm would refuse, create the run, submit it, print the job
    id and the run folder, and return (the job runs on the cluster; the Monitor, or
    `python -m core.slurm --run-dir <run>`, watches it)."""
    try:
        slurm.check_submission(config)
    except (ConfigError, launcher.LaunchError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    run = launcher.create_run(config)
    try:
        backends.backend_for(config).launch(run)
    except (ConfigError, launcher.LaunchError) as exc:
        print(f"error: {exc}\nrun directory: {run.path}", file=sys.stderr)
        return 1
    print(f"submitted Slurm job {run.read_status().cluster.job_id}\nrun directory: {run.path}", flush=True)
    return 0


def reward_problems(config: Config) -> list:
    """grpo: what keeps the reward functions from running on this data, before a run is made (a
    command-line user may run reward code from any folder; the console allows only its own)."""
    if not spec_of(config.train.objective).rewards:
        return []
    try:
        columns = reward_columns(config.data, config.run.seed)
    except DataError:
        return []  # the worker says what is wrong with the data, by file and line
    return check_rewards(config, columns)


def memory_warning(config: Config) -> str | None:
    """What to tell a shell user whose run is estimated not to fit this machine's memory, or each
    GPU/Ascend device's as nvidia-smi / npu-smi report it (the console refuses such a run unless
    confirmed; here it only warns), or that a device's memory is unknown before launch; None when it
    fits. The estimate pads every batch to data.max_seq_len, the most a batch can take."""
    device = accelerators.ask(config.parallel.device)  # GPU/Ascend: nvidia-smi / npu-smi
    device_mb = memory.device_memory_mb("cpu") if device.device == "cpu" else device.memory_mb
    try:
        estimate = memory.estimate_memory(config, read_model_args(config.model.path), config.data.max_seq_len,
                                          device_memory_mb=device_mb, soc=device.soc, unknown_why=device.why)
    except (CheckpointError, ConfigError, ValueError, TypeError, OSError):
        return None
    if estimate.device_memory_mb is None and device.why is not None:  # unknown: said, never skipped silently
        return Message("memory.device_unknown", device=config.parallel.device, why=device.why)
    if estimate.fits or estimate.device_memory_mb is None:
        return None
    if config.parallel.device != "cpu":
        return Message("memory.fit_over", device=config.parallel.device, needed=f"{estimate.total_mb:,.0f}",
                       has=f"{estimate.device_memory_mb:,.0f}")
    workers = config.parallel.data_parallel
    need = f"{estimate.total_mb:,.0f} MB per worker" + (f" x {workers} workers" if workers > 1 else "")
    return (f"the memory estimate ({need}) is more than this machine's {estimate.device_memory_mb:,.0f} MB, "
            "so the run may fail out of memory; lower train.micro_batch_size (raising train.grad_accum_steps "
            "keeps the global batch) or data.max_seq_len, set recompute.policy=full, or use method=lora "
            "(python -m core.dry_run --config ... measures it in two steps)")


def _follow(launched) -> int:
    """Run msrun in the background as the console would, watch it as the console does (a dead or
    hung rank ends the run at once, core.run.launcher.watch), and echo train.log until it exits."""
    offset = 0
    while True:
        done = launched.process.poll() is not None
        if not done:
            launcher.watch(launched.run_dir)
        log = launched.run_dir.log_path
        if log.exists():
            with open(log, "rb") as handle:
                handle.seek(offset)
                chunk = handle.read()
                offset += len(chunk)
            sys.stdout.write(chunk.decode("utf-8", "replace"))
            sys.stdout.flush()
        if done:
            launcher.reconcile(launched.run_dir)
            state = launched.run_dir.read_status().state
            return 0 if state in ("finished", "early_stopped", "stopped") else 1
        time.sleep(launcher.WATCH_EVERY_S)


if __name__ == "__main__":
    sys.exit(main())
