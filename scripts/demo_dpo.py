"""The demo DPO run as the guide measures it, in one command (`make demo-dpo`): the demo SFT run
(configs/lora_demo.yaml), then configs/dpo_demo.yaml forked from that run's best checkpoint (DPO
starts from a model that already does the task; from the untrained demo model it learns nothing).

    python scripts/demo_dpo.py [--sft runs/<id>] [--config configs/grpo_demo.yaml] [key=value ...]

`--sft` reuses a finished SFT run instead of training one; key=value overrides go to the DPO run;
`--config` forks another demo from the SFT run (`make demo-grpo`: configs/grpo_demo.yaml).
Both runs are ordinary run folders under runs/ (the console's Monitor and Runs tabs show them).
Prints each run's folder and, at the end, the DPO run's validation reward accuracy and the time taken.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SFT_CONFIG = "configs/lora_demo.yaml"
DPO_CONFIG = "configs/dpo_demo.yaml"
MARK = "run directory: "


def train(config: str, overrides: list[str]) -> Path:
    """`python -m core.train --config config overrides...`, its output passed through; its run folder."""
    argv = [sys.executable, "-m", "core.train", "--config", config, *overrides]
    print("$ " + " ".join(argv[1:]), flush=True)
    process = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    folder = None
    for line in process.stdout:
        sys.stdout.write(line)
        if line.startswith(MARK):
            folder = Path(line[len(MARK):].strip())
    if process.wait() != 0 or folder is None:
        raise SystemExit(f"{config} did not finish (exit code {process.returncode}); its folder: {folder}")
    return folder if folder.is_absolute() else ROOT / folder


def final_figures(folder: Path) -> dict:
    status = json.loads((folder / "status.json").read_text(encoding="utf-8"))
    return {"state": status.get("state"), **(status.get("final") or {})}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/demo_dpo.py", description=__doc__.splitlines()[0])
    parser.add_argument("--sft", help="a finished SFT run folder to fork from (default: train one)")
    parser.add_argument("--config", default=DPO_CONFIG, help=f"the run forked from the SFT run (default {DPO_CONFIG})")
    parser.add_argument("overrides", nargs="*", help="key=value overrides of the DPO run")
    args = parser.parse_args(argv)
    started = time.monotonic()
    sft = Path(args.sft).resolve() if args.sft else train(SFT_CONFIG, [])
    best = sft / "checkpoints" / "best"
    if not best.exists():
        raise SystemExit(f"{sft} has no best checkpoint ({best}): run the SFT run to its end first")
    sft_s = time.monotonic() - started
    dpo = train(args.config, [f"run.fork_from={best}", *args.overrides])
    figures = final_figures(dpo)
    total_s = time.monotonic() - started
    monitor = figures.get("monitor") or "reward_accuracy"  # reward_accuracy (DPO), val_reward (GRPO)
    accuracy = figures.get(monitor)
    print(f"\nSFT run: {sft}\nforked run: {dpo} ({figures.get('state')})\n"
          f"best {monitor}: {accuracy if accuracy is None else f'{accuracy:.3f}'}\n"
          f"time: SFT {sft_s / 60:.1f} min, fork {(total_s - sft_s) / 60:.1f} min, total {total_s / 60:.1f} min",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
