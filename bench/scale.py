"""Real-size runs end to end (issue 19): a Qwen2.5-0.5B / 1.5B-shaped checkpoint (hub config.json,
random bf16 weights, bench/real_models.py) fine-tuned through `python -m core.train` exactly as a
user runs it, then exported as PEFT and merged through `python -m core.export`. Printed:

- launch to the first logged step, split into start + setup (imports, model load, compile of
  nothing yet), baseline evaluation, and compile + first step (from metrics.jsonl's timestamps);
- the worker's peak RSS (its VmHWM, in status.json) against the console's estimate (core.spec.memory);
- each export's wall time and peak RSS (the export process's own maximum resident set).

    .venv/bin/python bench/scale.py                               # 0.5B LoRA, bf16 frozen weights
    .venv/bin/python bench/scale.py --model 1.5b                  # the 1.5B LoRA (peak must be <= 8 GB)
    .venv/bin/python bench/scale.py --method full --dtype float32 # 0.5B full fine-tune (~10-14 GB!)
    .venv/bin/python bench/scale.py --baseline true               # with the baseline evaluation

Each run takes one big process at a time (check `free -g` first on a shared machine).
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
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.real_models import make_model  # noqa: E402


HWM = ("import runpy, sys\n"
       "sys.argv = sys.argv[1:]\n"
       "try:\n"
       "    runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)\n"
       "finally:\n"
       "    hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1]\n"
       "    print(f'VmHWM {int(hwm) / 1024:.1f} MB', file=sys.stderr, flush=True)\n")


def timed_child(argv: list[str], log: Path) -> tuple[int, float, float]:
    """(exit code, wall seconds, peak RSS in MB) of `python -m <module> ...`: the process's own
    VmHWM at its exit (wait4's ru_maxrss would also count the forking parent's RSS)."""
    t = time.time()
    with open(log, "w") as handle:
        code = subprocess.run([sys.executable, "-c", HWM, *argv[2:]], cwd=ROOT, stdout=handle,
                              stderr=subprocess.STDOUT, env={**os.environ, "GLOG_v": "3"}).returncode
    wall = time.time() - t
    peaks = [float(line.split()[1]) for line in log.read_text().splitlines() if line.startswith("VmHWM ")]
    return code, wall, peaks[-1] if peaks else float("nan")


def write_config(folder: Path, model_dir: Path, args) -> Path:
    import yaml
    config = {
        "base": str(ROOT / "configs" / "defaults.yaml"),
        "run": {"runs_dir": str(folder / "runs"), "seed": 7},
        "model": {"path": str(model_dir), "dtype": args.dtype},
        "method": args.method,
        "lora": {"rank": 8, "alpha": 16, "dropout": 0.0},
        "data": {"train_file": str(ROOT / "data/demo/train.jsonl"),
                 "validation_file": str(ROOT / "data/demo/validation.jsonl"), "format": "alpaca",
                 "max_seq_len": args.seq},
        "train": {"max_steps": args.steps, "micro_batch_size": args.batch, "eval_every": args.steps,
                  "log_every": 1, "learning_rate": 1e-4, "warmup_steps": 0},
        "eval": {"downstream": False, "baseline": args.baseline == "true",
                 "baseline_max_tokens": args.baseline_tokens, "max_eval_samples": args.eval_samples},
    }
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def launch_breakdown(run: Path, t_launch: float) -> dict:
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    setup = next(r for r in records if r.get("event") == "setup")
    baseline = next((r for r in records if r.get("event") == "baseline"), None)
    first = next(r for r in records if r.get("kind") == "train")
    ready = baseline["time"] if baseline else setup["time"]
    return {"start + setup": setup["time"] - t_launch, "of which setup": setup.get("setup_s"),
            "baseline eval": (baseline["time"] - setup["time"]) if baseline else 0.0,
            "compile + first step": first["time"] - ready, "launch to first step": first["time"] - t_launch,
            "step times": [r.get("step_time_s") for r in records if r.get("kind") == "train"],
            "training peak": max((r.get("peak_mem_mb") or 0 for r in records if r.get("kind") == "train"), default=0)}


def estimate_mb(config_path: Path) -> float:
    from core.spec.config import load_config
    from core.spec.memory import estimate_memory
    from core.spec.model_args import read_model_args
    config = load_config(config_path)
    return estimate_memory(config, read_model_args(config.model.path), config.data.max_seq_len).total_mb


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="0.5b", choices=["0.5b", "1.5b"])
    parser.add_argument("--method", default="lora", choices=["lora", "full"])
    parser.add_argument("--dtype", default="bfloat16", help="model.dtype (LoRA: bf16 frozen weights)")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--baseline", default="false", choices=["true", "false"])
    parser.add_argument("--baseline-tokens", type=int, default=None, help="eval.baseline_max_tokens")
    parser.add_argument("--eval-samples", type=int, default=8, help="eval.max_eval_samples (the final evaluation)")
    parser.add_argument("--models-dir", default=os.path.join(tempfile.gettempdir(), "mindtune-bench"))
    parser.add_argument("--no-export", action="store_true")
    args = parser.parse_args()

    model_dir = make_model(Path(args.models_dir) / f"qwen2.5-{args.model}", args.model)
    base_mb = sum(p.stat().st_size for p in model_dir.glob("*.safetensors")) / 2**20
    with tempfile.TemporaryDirectory(prefix="mindtune-scale-") as tmp:
        folder = Path(tmp)
        config = write_config(folder, model_dir, args)
        estimate = estimate_mb(config)
        t_launch = time.time()
        code, wall, rss = timed_child([sys.executable, "-m", "core.train", "--config", str(config)], folder / "train.log")
        if code != 0:
            raise SystemExit(f"core.train failed ({code}):\n" + (folder / "train.log").read_text()[-4000:])
        run = next(p for p in (folder / "runs").iterdir() if not p.is_symlink())
        status = json.loads((run / "status.json").read_text())
        peak = status["final"]["peak_mem_mb"]
        launch = launch_breakdown(run, t_launch)
        print(f"[{args.model} {args.method}, model.dtype {args.dtype}, micro batch {args.batch} x {args.seq}, "
              f"{args.steps} steps, baseline {args.baseline}"
              + (f" (<= {args.baseline_tokens} tokens)" if args.baseline_tokens else "") + f"] wall {wall:.1f} s")
        print("  launch: " + ", ".join(f"{k} {v:.1f} s" for k, v in launch.items()
                                       if isinstance(v, (int, float)) and k != "training peak"))
        print("  step times: " + ", ".join(f"{s:.2f}" for s in launch["step times"] if s is not None) + " s")
        print(f"  peak RSS {peak:.0f} MB (worker's VmHWM at its end; {rss:.0f} MB for the CLI process), estimate "
              f"{estimate:.0f} MB ({100 * (estimate / peak - 1):+.1f}%); before the final evaluation and save (the last step's "
              f"record): {launch['training peak']:.0f} MB, so those added {peak - launch['training peak']:.0f} MB "
              f"({100 * (peak / max(launch['training peak'], 1) - 1):+.1f}%)")
        if args.no_export:
            return
        formats = ["peft", "merged"] if args.method == "lora" else ["merged"]
        for fmt in formats:
            code, wall, rss = timed_child([sys.executable, "-m", "core.export", "--run", str(run), "--which", "last",
                                           "--format", fmt], folder / f"export-{fmt}.log")
            if code != 0:
                raise SystemExit(f"export {fmt} failed:\n" + (folder / f"export-{fmt}.log").read_text()[-4000:])
            out = Path(next(line for line in (folder / f"export-{fmt}.log").read_text().splitlines()
                            if line.startswith("/")))
            size = sum(p.stat().st_size for p in out.glob("*.safetensors")) / 2**20
            print(f"  export {fmt}: {wall:.1f} s, peak RSS {rss:.0f} MB, wrote {size:.0f} MB "
                  f"(base {base_mb:.0f} MB; {len(list(out.glob('*.safetensors')))} safetensors files)")


if __name__ == "__main__":
    main()
