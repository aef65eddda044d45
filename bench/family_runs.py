"""Tiny LoRA fine-tunes of the Gemma 2, Gemma 3 (text, and the language model of a text + vision
Gemma3ForConditionalGeneration checkpoint), Phi-3 and Phi-4-mini fixtures through `python -m core.train`,
one worker process each (tests/core/family_fixtures.FamilyRuns, as the slow harness test runs them):
validation loss before and after 8 steps, what the setup event says ran fused or composed, and the
worker's peak RSS (VmHWM) against core.spec.memory's estimate for the same config.

    .venv/bin/python bench/family_runs.py                      # fused kernels, as core.train runs
    MINDTUNE_FUSED_KERNELS=0 .venv/bin/python bench/family_runs.py --only gemma2   # composed ops
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.core.family_fixtures import FamilyRuns, run_records  # noqa: E402

PHI_TARGETS = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")
FAMILIES = {"gemma2": None, "gemma3": None, "gemma3-vision": None, "phi3": PHI_TARGETS, "phi4-mini": PHI_TARGETS}


def measure(name: str, root: Path) -> dict:
    import core.spec.memory as memory
    from core.spec.config import load_config
    from core.spec.model_args import ModelArgs
    runs = FamilyRuns(root, name, FAMILIES[name])
    start = time.time()
    run = runs.run("lora")
    wall = time.time() - start
    setup = next(r for r in run_records(run, "event") if r["event"] == "setup")
    evals = run_records(run, "eval")
    peak = json.loads((run / "status.json").read_text())["final"]["peak_mem_mb"]
    estimate = memory.estimate_memory(load_config(runs.config, runs.overrides), ModelArgs.from_dir(runs.model_dir),
                                      setup["seq_len"]).total_mb
    return {"kernels": setup["kernels"], "lora_modules": setup["lora_modules"], "peak": peak, "estimate": estimate,
            "val": (evals[0]["val_loss"], evals[-1]["val_loss"]), "wall": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma list of " + ", ".join(FAMILIES))
    names = (parser.parse_args().only or ",".join(FAMILIES)).split(",")
    unknown = [n for n in names if n not in FAMILIES]
    if unknown:
        parser.error(f"unknown family fixture(s) {', '.join(unknown)}; known: {', '.join(FAMILIES)}")
    print("tiny LoRA run (rank 4, 8 steps, micro batch 4, fp32) through python -m core.train, one worker each")
    print("| fixture | val loss step 0 -> 8 | LoRA modules | peak RSS | estimate | estimate / peak | kernels | run wall |")
    print("|---|---|---|---|---|---|---|---|")
    for name in names:
        with tempfile.TemporaryDirectory() as tmp:
            d = measure(name, Path(tmp))
        print(f"| {name} | {d['val'][0]:.3f} -> {d['val'][1]:.3f} | {d['lora_modules']} | {d['peak']:.0f} MB "
              f"| {d['estimate']:.0f} MB | {d['estimate'] / d['peak']:.2f} | {d['kernels']} | {d['wall']:.0f} s |",
              flush=True)


if __name__ == "__main__":
    main()
