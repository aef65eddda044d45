"""The console's "Check memory" against the real run: for each config, the dry run's measured peak
(`python -m core.dry_run`: two training steps and one evaluation batch), core.spec.memory's estimate,
and the peak of a real `python -m core.train` run of the same config (final.peak_mem_mb), with
the dry run's wall time.

    .venv/bin/python bench/dry_run.py                          # lora_demo and full_demo, 60 steps each
    .venv/bin/python bench/dry_run.py --steps 300 --configs configs/lora_demo.yaml

Each figure comes from its own process (a peak is a process's high-water mark); run it on a quiet
machine, one process at a time, as it does.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import core.spec.memory as memory  # noqa: E402
from core.spec.config import load_config  # noqa: E402
from core.spec.model_args import read_model_args  # noqa: E402
from core.run.rundir import RunDir

ENV = {**os.environ, "GLOG_v": "3"}


def dry(config: str, overrides: list[str]) -> tuple[dict, float]:
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "core.dry_run", "--config", config, *overrides], cwd=ROOT,
                          capture_output=True, text=True, env=ENV)
    if proc.returncode != 0:
        raise SystemExit(f"dry run of {config} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1]), time.monotonic() - start


def real(config: str, overrides: list[str], runs_dir: Path) -> float:
    proc = subprocess.run([sys.executable, "-m", "core.train", "--config", config, f"run.runs_dir={runs_dir}",
                           *overrides], cwd=ROOT, capture_output=True, text=True, env=ENV)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("run directory: ")]
    if not lines:
        raise SystemExit(f"run of {config} failed:\n{proc.stderr[-3000:]}")
    status = RunDir(lines[-1].split(": ", 1)[1]).read_status()
    if status.final is None:
        raise SystemExit(f"{config}: {status.state}: {status.reason}")
    return status.final.peak_mem_mb


def estimate(config_path: str, overrides: list[str], seq_len: int) -> float:
    config = load_config(config_path, overrides)
    return memory.estimate_memory(config, read_model_args(config.model.path), seq_len).total_mb


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", default=["configs/lora_demo.yaml", "configs/full_demo.yaml"])
    parser.add_argument("--steps", type=int, default=60, help="steps of each real run")
    args = parser.parse_args()
    print(f"{'config':28} {'dry run MB':>10} {'dry run s':>9} {'estimate MB':>11} {'real run MB':>11} "
          f"{'dry/real':>8} {'est/real':>8}")
    for config in args.configs:
        overrides = [f"train.max_steps={args.steps}", "train.warmup_steps=2"]
        measured, seconds = dry(config, overrides)
        with tempfile.TemporaryDirectory(prefix="bench-dry-run-") as runs:
            peak = real(config, overrides, Path(runs))
        guess = estimate(config, overrides, measured["seq_len"])
        print(f"{Path(config).name:28} {measured['peak_mem_mb']:>10.0f} {seconds:>9.1f} {guess:>11.0f} {peak:>11.0f} "
              f"{measured['peak_mem_mb'] / peak:>8.3f} {guess / peak:>8.3f}", flush=True)


if __name__ == "__main__":
    main()
