"""The demo fine-tune, measured: base vs fine-tuned validation perplexity and answer scores (exact
match, BLEU-4, ROUGE-L), wall
time, tokens/s and peak memory of LoRA and full fine-tuning, time from launch to the first logged
step, and peak memory with and without recompute. Every run is a real `python -m core.train`
process on the shipped demo model and data.

    .venv/bin/python bench/demo_finetune.py            # ~10 minutes on a 2-core CPU
    .venv/bin/python bench/demo_finetune.py --quick    # shorter runs, same figures
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core.run.records import BaselineEvent, EvalRecord, TrainRecord, current_records
from core.run.rundir import RunDir


def run_training(config: str, runs_dir: Path, *overrides: str) -> dict:
    """Run one training process; return its status, metrics and launch→first-step time."""
    start = time.time()
    proc = subprocess.run([sys.executable, "-m", "core.train", "--config", config, f"run.runs_dir={runs_dir}",
                           *overrides], cwd=ROOT, capture_output=True, text=True)
    wall = time.time() - start
    lines = [l for l in proc.stdout.splitlines() if l.startswith("run directory: ")]
    if not lines:
        raise SystemExit(f"training failed to start:\n{proc.stdout}\n{proc.stderr}")
    run = RunDir(lines[-1].split(": ", 1)[1])
    status = run.read_status()
    metrics = current_records(run.metrics_reader().read_new())
    if status.state not in ("finished", "early_stopped"):
        raise SystemExit(f"{run.path}: {status.state}: {status.reason}\n{proc.stderr[-3000:]}")
    first_train = next(m for m in metrics if isinstance(m, TrainRecord))
    return {"run": run.path, "status": status, "metrics": metrics, "wall_s": wall,
            "first_step_s": first_train.time - start}


def summary(result: dict) -> dict:
    metrics, status = result["metrics"], result["status"]
    final = status.final
    baseline = next(m for m in metrics if isinstance(m, BaselineEvent))
    evals = [m for m in metrics if isinstance(m, EvalRecord) and not m.base]
    best = min(evals, key=lambda m: m.val_loss) if evals else None
    return {
        "state": status.state, "steps": final.steps, "wall_s": round(result["wall_s"], 1),
        "first_step_s": round(result["first_step_s"], 1),
        "base_val_ppl": round(baseline.val_ppl, 3), "best_val_ppl": round(best.val_ppl, 3) if best else None,
        "ppl_drop_pct": round(100 * (1 - best.val_ppl / baseline.val_ppl), 1) if best else None,
        "base_exact_match": baseline.exact_match, "exact_match": final.exact_match,
        "base_bleu": baseline.bleu, "bleu": final.bleu, "base_rougeL": baseline.rougeL, "rougeL": final.rougeL,
        "tokens_per_s": round(final.tokens_per_s or 0, 1), "peak_mem_mb": final.peak_mem_mb,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter runs (for a smoke check)")
    args = parser.parse_args()
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(tmp)
        lora_steps = ["train.max_steps=40", "train.eval_every=20"] if args.quick else []
        rows["lora demo (configs/lora_demo.yaml)"] = summary(run_training("configs/lora_demo.yaml", runs, *lora_steps))
        short = ["train.max_steps=30", "train.eval_every=30", "train.warmup_steps=5", "eval.downstream=false",
                 "early_stopping.enabled=false"]
        rows["full fine-tune, 30 steps"] = summary(run_training("configs/full_demo.yaml", runs, *short))
        rows["lora, 30 steps, recompute none"] = summary(run_training("configs/lora_demo.yaml", runs, *short))
        rows["lora, 30 steps, recompute full"] = summary(run_training(
            "configs/lora_demo.yaml", runs, *short, "recompute.policy=full"))
        rows["full, 30 steps, recompute full"] = summary(run_training(
            "configs/full_demo.yaml", runs, *short, "recompute.policy=full"))
    keys = ["state", "steps", "wall_s", "first_step_s", "base_val_ppl", "best_val_ppl", "ppl_drop_pct",
            "base_exact_match", "exact_match", "base_bleu", "bleu", "base_rougeL", "rougeL", "tokens_per_s",
            "peak_mem_mb"]
    print("| run | " + " | ".join(keys) + " |")
    print("|---" * (len(keys) + 1) + "|")
    for name, row in rows.items():
        print(f"| {name} | " + " | ".join(str(row.get(k)) for k in keys) + " |")
    lora = rows["lora, 30 steps, recompute none"]
    full = rows["full fine-tune, 30 steps"]
    print(f"\nLoRA / full tokens/s: {lora['tokens_per_s'] / max(full['tokens_per_s'], 1e-9):.2f}; "
          f"LoRA / full peak memory: {lora['peak_mem_mb'] / full['peak_mem_mb']:.2f}; "
          f"recompute full / none peak memory (LoRA): "
          f"{rows['lora, 30 steps, recompute full']['peak_mem_mb'] / lora['peak_mem_mb']:.2f}")


if __name__ == "__main__":
    main()
