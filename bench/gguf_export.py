"""GGUF export at a real size (issue 39): a Qwen2.5-0.5B-shaped checkpoint (bench/real_models.py: hub
config.json, random bf16 weights, the demo tokenizer) with a random LoRA adapter (r8 on q, k, v, o) and
the demo task's validation set, exported to f16 and q4_k_m GGUF. Each phase runs as its own process;
printed: its wall time and peak RSS (VmHWM), beside the merged Hugging Face export's.

    .venv/bin/python bench/gguf_export.py            # ~1 GB model folder in $TMPDIR/mindtune-bench

Phases: merged (core.export --format merged, the reference for memory), write-f16 (the GGUF writer on
the checkpoint merged tensor by tensor: the export without its check), check-f16 (llama.cpp's reload and the
comparison), quantize-q4 (llama.cpp's quantizer from the f16 file), check-q4.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.real_models import make_model  # noqa: E402
from bench.scale import timed_child  # noqa: E402


def make_run(folder: Path, model_dir: Path, name: str = "bench-0.5b") -> Path:
    """A run folder with one checkpoint: a random LoRA adapter on the attention projections."""
    import numpy as np
    import yaml
    from core.run.ckpt_store import save_train_checkpoint
    from core.run.rundir import RunDir
    from core.spec.model_args import file_sha256, read_model_args, weight_files
    rng = np.random.default_rng(0)
    lora = {"rank": 8, "alpha": 16.0, "dropout": 0.0, "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"]}
    tensors = {}
    for tensor, shape in read_model_args(model_dir).parameter_shapes().items():
        if len(shape) == 2 and tensor.rsplit(".", 2)[-2] in lora["target_modules"]:
            module = tensor.removesuffix(".weight")
            tensors[f"{module}.lora_a"] = (0.02 * rng.standard_normal((8, shape[1]))).astype(np.float32)
            tensors[f"{module}.lora_b"] = (0.02 * rng.standard_normal((shape[0], 8))).astype(np.float32)
    config = {"model": {"path": str(model_dir)}, "method": "lora", "lora": lora, "run": {"seed": 7},
              "data": {"train_file": str(ROOT / "data/demo/train.jsonl"),
                       "validation_file": str(ROOT / "data/demo/validation.jsonl"), "format": "alpaca",
                       "max_seq_len": 256}}
    run = RunDir.create(folder / "runs", name, yaml.safe_dump(config))
    state = {"step": 1, "method": "lora", "lora": lora, "config": config,
             "base_model": {"path": str(model_dir), "sha256": file_sha256(weight_files(model_dir))}}
    save_train_checkpoint(run.checkpoints_dir, 1, tensors, {}, state, pointers=("best", "last"))
    return run.path


def phase(name: str, run: Path, work: Path) -> None:
    """One phase, in this process (run by main() as a child, for its own peak RSS)."""
    from core.engine.export import checkpoint_folder, read_state
    folder = checkpoint_folder(run / "checkpoints" / "best")
    state = read_state(folder)
    f16, q4 = work / "f16.gguf", work / "q4_k_m.gguf"
    start = time.perf_counter()
    if name == "write-f16":  # MindSpore-free, as the writer is (the check loads it)
        from core.engine.gguf_merge import write_checkpoint_gguf
        write_checkpoint_gguf(folder, state, Path(state["base_model"]["path"]), work, f16, "f16")
        print(f"PHASE {name} {time.perf_counter() - start:.2f}", flush=True)
        return
    from core.engine import gguf_run
    if name == "quantize-q4":
        gguf_run.quantize_with_llama_cpp(f16, q4)
    else:
        from core.data.tokenizer import Tokenizer
        path, quant = (f16, "f16") if name == "check-f16" else (q4, "q4_k_m")
        reference = {}
        if quant == "q4_k_m":  # as core.engine.gguf_run: the f16 file's figures, llama.cpp alone
            reference = json.loads((work / "check-f16.json").read_text())
        base = Path(state["base_model"]["path"])
        result = gguf_run.check_gguf(path, quant, lambda: gguf_run._our_model(folder, state), Tokenizer.from_dir(base),
                                     run, reference.get("perplexity"), model_dir=base,
                                     reference_answers=reference.get("greedy_answers"))
        (work / f"{name}.json").write_text(json.dumps(result.to_json(), indent=1))
    print(f"PHASE {name} {time.perf_counter() - start:.2f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models-dir", default=os.path.join(tempfile.gettempdir(), "mindtune-bench"))
    parser.add_argument("--weights", default="random", choices=("random", "tiled-demo"),
                        help="the 0.5B model's weights (bench/real_models.py)")
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    parser.add_argument("--run", help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        return phase(args.phase, Path(args.run), Path(args.work))
    model_dir = make_model(Path(args.models_dir) / ("qwen2.5-0.5b" if args.weights == "random" else
                                                    f"qwen2.5-0.5b-{args.weights}"), "0.5b", weights=args.weights)
    with tempfile.TemporaryDirectory(prefix="mindtune-gguf-") as tmp:
        folder = Path(tmp)
        run = make_run(folder, model_dir)
        rows = []
        code, wall, rss = timed_child([sys.executable, "-m", "core.export", "--run", str(run), "--format", "merged"],
                                      folder / "merged.log")
        rows.append(("merged export (HF folder, bf16)", wall, rss, code))
        for name in ("write-f16", "check-f16", "quantize-q4", "check-q4"):
            log = folder / f"{name}.log"
            code, wall, rss = timed_child([sys.executable, "-m", "bench.gguf_export", "--phase", name, "--run",
                                           str(run), "--work", str(folder)], log)
            inner = [float(line.split()[2]) for line in log.read_text().splitlines() if line.startswith("PHASE ")]
            if code != 0:
                raise SystemExit(f"{name} failed:\n" + log.read_text()[-4000:])
            rows.append((name, inner[0] if inner else wall, rss, code))
        print(f"[Qwen2.5-0.5B shape, {args.weights} bf16 weights, LoRA r8 on q/k/v/o; demo validation set; load "
              f"average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs]")
        for name, seconds, rss, code in rows:
            print(f"  {name:34s} {seconds:7.1f} s   peak RSS {rss:7.0f} MB" + ("" if code == 0 else f"  (exit {code})"))
        for quant in ("f16", "q4"):
            check = json.loads((folder / f"check-{quant}.json").read_text())
            print(f"  check {check['quant']}: passed {check['passed']} {check['reasons']}; tokenizer "
                  f"{check['tokenizer_equal']}/{check['prompts']}, greedy {check['greedy_equal']}+"
                  f"{check['greedy_ties']} ties/{check['prompts']} ({check['prompt_tokens']}-token prompts), logits "
                  f"{check['max_logit_diff']} (float32 model {check['max_logit_diff_float32']}), ppl "
                  f"{check['perplexity']:.3f} (ours {check['perplexity_ours']}, reference "
                  f"{check['perplexity_reference']}); {check['threads']} threads; "
                  f"seconds {check['seconds']}: " + ", ".join(f"{k} {v} (CPU {check['stage_cpu_seconds'][k]})"
                                                               for k, v in check["stage_seconds"].items()))
        sizes = {p.name: p.stat().st_size / 2**20 for p in folder.glob("*.gguf")}
        print("  files: " + ", ".join(f"{k} {v:.0f} MB" for k, v in sorted(sizes.items())))


if __name__ == "__main__":
    main()
