"""Measure a run's memory before launching it: set it up as the worker would, run two training
steps and one evaluation batch, and report the peak.

    python -m core.dry_run --config FILE [key=value ...] [--steps 2]

Prints one JSON line last: {"peak_mem_mb", "steps", "step_time_s", "setup_s", "seq_len", "kernels",
"device", "device_memory_mb", "soc"} (on GPU/Ascend the device's total memory, read after the steps,
when MindSpore reports it for an initialised device, and the Ascend chip; null elsewhere or when it
does not say), and for a preference objective its "objective", "reference" and "reference_mb" (the frozen
reference copy, held and measured as in the run). The estimate of core.spec.memory is fitted on a grid of shapes; this is the measurement, on
this machine, of this config: the same model, data, sequence length, kernels and compiled steps as
the real worker (the evaluation batch compiles the evaluation graph, which the worker holds too).
A data-parallel run is measured with one worker: per-worker memory does not depend on the width
(each worker holds its own micro batch). Nothing is written outside a temporary run folder, and no
checkpoint is saved.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import core.run.launcher as launcher
from core.spec.config import Config, ConfigError, load_config
from core.spec.errors import report
from core.spec.messages import Message
from core.spec.objectives import reference_kind, spec_of
from core.run.records import SetupEvent

DEFAULT_STEPS = 2


def dry_run_config(config: Config, runs_dir: str, steps: int = DEFAULT_STEPS) -> Config:
    """The config a dry run trains: one worker, `steps` steps, one evaluation batch, no generation."""
    return config.with_updates({
        "run.runs_dir": runs_dir, "run.resume": None, "run.fork_from": None, "parallel.data_parallel": 1,
        "train.max_steps": steps, "train.epochs": None, "train.warmup_steps": 0,
        "eval.max_eval_samples": config.train.micro_batch_size, "eval.downstream": False,
        "early_stopping.enabled": False})


def dry_run(config: Config, steps: int = DEFAULT_STEPS) -> dict:
    """Set up `config`'s worker in this process, train `steps` steps and evaluate one batch; return
    the measured peak memory (MB per worker) and timings."""
    # MindSpore loads here, after main() has answered a config error without it (in ~1 s, not ~5)
    import core.engine.devices as devices
    from core.engine.generate import use_device
    from core.engine.trainer import Cluster, Trainer, peak_memory_mb

    with tempfile.TemporaryDirectory(prefix="mindtune-dry-run-") as folder:
        trial = dry_run_config(config, folder, steps)
        use_device(trial.parallel.device)
        devices.check_bf16(trial)  # as the worker does: bf16 on a device without it (Ascend 910A) refused by name
        run = launcher.create_run(trial)
        trainer = Trainer(trial, run, Cluster(1))
        start = time.perf_counter()
        trainer.setup()
        setup_s = time.perf_counter() - start
        trainer.model.set_train(True)
        times = [trainer.train_one_step()["step_time_s"] for _ in range(steps)]
        trainer.evaluate()
        setup = run.last_metric(SetupEvent, max_bytes=65536)
        return {"peak_mem_mb": round(peak_memory_mb(trial.parallel.device), 1), "steps": steps,
                "step_time_s": [round(t, 3) for t in times], "setup_s": round(setup_s, 2),
                "seq_len": trainer.length, "kernels": setup.kernels if setup else None,
                "device": trial.parallel.device, **_device_figures(trial.parallel.device, devices),
                **_reference(trial, trainer)}


def _device_figures(device: str, devices) -> dict:
    """The device's total memory (MB) and chip as MindSpore reports them once the steps ran (None on
    the CPU, whose RAM the console knows, or when MindSpore does not say)."""
    if device == "cpu":
        return {"device_memory_mb": None, "soc": None}
    try:
        total = devices.total_memory_mb(device)
    except Exception:  # noqa: BLE001 — the measurement stands without the device's size
        total = None
    return {"device_memory_mb": round(total, 1) if total else None, "soc": devices.soc_version()}


def _reference(config: Config, trainer) -> dict:
    """A preference run's objective and reference as the dry run held it (the measured peak includes
    it): `reference` (adapter_off, frozen_copy or None) and `reference_mb`, the bytes of a frozen
    reference copy's weights (0 for the adapter switched off: no second copy exists)."""
    if spec_of(config.train.objective).kind == "sft":
        return {}
    model = getattr(trainer.train_step, "reference_model", None)
    size = sum(p.nbytes for p in model.get_parameters()) if model is not None else 0
    return {"objective": config.train.objective, "reference": reference_kind(config),
            "reference_mb": round(size / 2**20, 3)}


def _parse(argv):
    parser = argparse.ArgumentParser(prog="python -m core.dry_run", description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="the run's YAML config")
    parser.add_argument("--steps", type=int, default=DEFAULT_STEPS, help="training steps to run (default 2)")
    parser.add_argument("overrides", nargs="*", help="key=value overrides")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    try:
        config = load_config(args.config, args.overrides)
        if args.steps < 1:
            raise ConfigError(Message("train.dry_steps", steps=args.steps))
    except ConfigError as err:
        report(err)
        return 2
    from core.engine.trainer import USER_ERRORS, TrainingFailed  # MindSpore: only once the config is valid

    try:
        result = dry_run(config, args.steps)
    except USER_ERRORS + (TrainingFailed,) as err:
        report(err)
        return 1
    except MemoryError as err:
        report(Message("train.dry_out_of_memory", error=str(err)))
        return 1
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
