"""The memory estimator against real runs: peak RSS of `python -m core.train` on a grid of model
shapes, batch sizes, sequence lengths and methods, next to `core.memory.estimate_memory`'s total,
and (with --fit) the CPU constants a non-negative least-squares fit of the grid gives.

Each run is a real worker: a Llama-architecture model (the *-lora/-full family rows: Qwen3, Mistral
with a window, GLM-4, OLMo 2 at the base shape) with seeded random weights made here
(Hugging Face keys, the demo tokenizer), 256+-token paragraphs of the demo stories as plain text,
fp32, 10 optimizer steps with an evaluation at step 10 (train and eval graphs both compiled, as in
every real run). The estimate's target is the worker's `final.peak_mem_mb`.

    .venv/bin/python bench/memory_fit.py                 # the grid, measured vs estimated (~25 min)
    .venv/bin/python bench/memory_fit.py --fit           # also fit the CPU constants to the grid
    .venv/bin/python bench/memory_fit.py --only 25m-lora,25m-full
    .venv/bin/python bench/memory_fit.py --only qwen3-lora,qwen3-full,mistral-lora,mistral-full,glm4-lora,glm4-full,olmo2-lora,olmo2-full
    .venv/bin/python bench/memory_fit.py --rows bench/memory_fit_rows.json --fit   # no runs

bench/memory_fit_rows.json holds the rows behind core/memory.py's constants (measured on the
2-core CPU this project is developed on, MindSpore 2.10, with the fused attention kernel);
bench/memory_fit_rows_composed.json those behind `CPU_COMPOSED` (MindSpore's composed attention
ops, what runs without a C++ compiler: rerun with MINDTUNE_FUSED_KERNELS=0). With --rows they are
estimated again with the current constants and refitted, without rerunning them.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from demo_finetune import run_training  # noqa: E402  (bench/, this script's folder, is on sys.path)

STEPS = 10
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")

# name: model shape (hidden, intermediate, layers, heads, kv heads, vocab), method, batch, sequence
# [, extra overrides]. Shapes vary one factor at a time around a small base so the fit can tell the
# unit shapes apart; "25m-*" are config (b) of bench/train_step.py (25M, batch 8 × 256). Rows with
# extra overrides (recompute, AMP) are checked against the estimate but not fitted: their own
# factors (CpuFit.recompute_growth, CPU_AMP_ACTIVATION_FACTOR) scale the fitted counts.
GRID = {
    "base-lora":      ((256, 688, 4, 8, 8, 1024), "lora", 8, 128),
    "base-full":      ((256, 688, 4, 8, 8, 1024), "full", 8, 128),
    "base-b4":        ((256, 688, 4, 8, 8, 1024), "lora", 4, 128),
    "base-s256":      ((256, 688, 4, 8, 8, 1024), "lora", 8, 256),
    "base-s64":       ((256, 688, 4, 8, 8, 1024), "full", 8, 64),
    "base-L2":        ((256, 688, 2, 8, 8, 1024), "lora", 8, 128),
    "base-L8":        ((256, 688, 8, 8, 8, 1024), "full", 8, 128),
    "base-mlp2752":   ((256, 2752, 4, 8, 8, 1024), "lora", 8, 128),
    "base-h512":      ((512, 688, 4, 8, 8, 1024), "lora", 8, 128),
    "base-heads16":   ((256, 688, 4, 16, 16, 1024), "lora", 8, 128),
    "base-gqa":       ((256, 688, 4, 8, 2, 1024), "lora", 8, 128),
    "base-vocab16k":  ((256, 688, 4, 8, 8, 16384), "lora", 8, 128),
    "demo-shape":     ((256, 688, 4, 8, 4, 1024), "lora", 8, 128),
    "25m-lora":       ((512, 1536, 6, 8, 8, 8192), "lora", 8, 256),
    "25m-full":       ((512, 1536, 6, 8, 8, 8192), "full", 8, 256),
    "base-recompute": ((256, 688, 4, 8, 8, 1024), "lora", 8, 128, ("recompute.policy=full",)),
    "base-amp-o2":    ((256, 688, 4, 8, 8, 1024), "lora", 8, 128, ("precision.amp_level=O2",)),
    "base-amp-o2-full": ((256, 688, 4, 8, 8, 1024), "full", 8, 128, ("precision.amp_level=O2",)),
    "base-recompute-mlp": ((256, 688, 4, 8, 8, 1024), "lora", 8, 128, ("recompute.policy=mlp",)),
    "base-recompute-attn": ((256, 688, 4, 8, 8, 1024), "lora", 8, 128, ("recompute.policy=attention",)),
}
# the dense families at the base shape (checked against the estimate, not fitted): what each adds to
# a Llama layer — QK-norm and head_dim != hidden/heads (Qwen3), a window shorter than the sequence
# (Mistral), partial interleaved RoPE, fused gate_up and two extra norms (GLM-4), post-norms and
# QK-norm over the projections (OLMo 2)
FAMILIES = {
    "qwen3": {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "head_dim": 48},
    "mistral": {"architectures": ["MistralForCausalLM"], "model_type": "mistral", "sliding_window": 64},
    "glm4": {"architectures": ["Glm4ForCausalLM"], "model_type": "glm4", "partial_rotary_factor": 0.5,
             "attention_bias": True},
    "olmo2": {"architectures": ["Olmo2ForCausalLM"], "model_type": "olmo2"},
}
FAMILY_UNITS = ("norm_extra", "q_extra")  # core.memory units only the family rows have (not fitted here)
for _family in FAMILIES:
    for _method in ("lora", "full"):
        GRID[f"{_family}-{_method}"] = ((256, 688, 4, 8, 8, 1024), _method, 8, 128, (), _family)


def model_config(shape: tuple[int, ...], family: str | None = None) -> dict:
    """The Hugging Face config.json of a grid shape (a Llama, or one of FAMILIES)."""
    h, inter, layers, heads, kv, vocab = shape
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": vocab,
            "hidden_size": h, "intermediate_size": inter, "num_hidden_layers": layers,
            "num_attention_heads": heads, "num_key_value_heads": kv, "max_position_embeddings": 1024,
            "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": True, "hidden_act": "silu",
            "attention_bias": False, "mlp_bias": False, "torch_dtype": "float32",
            "bos_token_id": 1, "eos_token_id": 2, **FAMILIES.get(family, {})}


def make_model(folder: Path, shape: tuple[int, ...], family: str | None = None) -> Path:
    """config.json + model.safetensors (seeded N(0, 0.02), norms 1: every tensor
    `ModelArgs.parameter_shapes` lists) + the demo tokenizer."""
    import numpy as np
    from safetensors.numpy import save_file
    from core.model_args import ModelArgs
    config = model_config(shape, family)
    rng = np.random.default_rng(0)
    tensors = {name: np.ones(dims, np.float32) if name.endswith("norm.weight")
               else rng.standard_normal(dims, dtype=np.float32) * 0.02
               for name, dims in ModelArgs.from_hf_config(config).parameter_shapes().items()}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    save_file(tensors, str(folder / "model.safetensors"))
    for name in TOKENIZER_FILES:
        shutil.copy(ROOT / "models" / "tiny-demo" / name, folder / name)
    return folder


def make_text(path: Path) -> Path:
    """Plain-text paragraphs of ~600 demo-tokenizer tokens (longer than any sequence in the grid,
    so every sample is truncated to exactly `data.max_seq_len`)."""
    stories = [json.loads(line)["input"] for line in (ROOT / "data" / "demo" / "train.jsonl").read_text().splitlines()]
    paragraphs = [" ".join(stories[i:i + 4]) for i in range(0, len(stories) - 4, 4)]
    path.write_text("\n\n".join(paragraphs[:200]) + "\n")
    return path


def overrides(model: Path, text: Path, method: str, batch: int, seq: int, extra: tuple[str, ...] = ()) -> list[str]:
    return [*extra, f"model.path={model}", f"method={method}", f"train.micro_batch_size={batch}",
            f"data.max_seq_len={seq}", f"data.train_file={text}", "data.format=text",
            "data.validation_file=null", "data.test_file=null", "data.validation_fraction=0.1",
            f"train.max_steps={STEPS}", "train.warmup_steps=2", "train.log_every=5",
            f"train.eval_every={STEPS}", f"train.save_every={STEPS}", "eval.downstream=false",
            "eval.max_eval_samples=16", "early_stopping.enabled=false"]


def measure(model: Path, text: Path, method: str, batch: int, seq: int, runs: Path, extra: tuple[str, ...]) -> float:
    """final.peak_mem_mb of one `python -m core.train` run."""
    run = run_training(str(ROOT / "configs" / "defaults.yaml"), runs, *overrides(model, text, method, batch, seq, extra))
    return max(m.peak_mem_mb for m in run["metrics"] if getattr(m, "peak_mem_mb", None) is not None)


def parts(model: Path, text: Path, method: str, batch: int, seq: int, extra: tuple[str, ...]):
    """The estimate for one grid row, and what the fit needs: its activation units, layers, the
    trainable parameter count and the fixed components (weights, gradients, optimizer)."""
    from core import memory
    from core.config import load_config
    from core.model_args import read_model_args
    config = load_config(ROOT / "configs" / "defaults.yaml", overrides(model, text, method, batch, seq, extra))
    args = read_model_args(model)
    estimate = memory.estimate_memory(config, args, seq)
    lora = memory.lora_targets(config, args) if method == "lora" else {}
    units = memory.activation_units(args, batch, seq, lora)
    fixed = estimate.weights_mb + estimate.gradients_mb + estimate.optimizer_mb + memory.CPU_BASELINE_RSS_MB
    return estimate, units, args.num_layers, estimate.trainable_parameters, fixed


def fit(rows) -> dict:
    """Non-negative least squares of (measured − fixed parts) on: graph MB fixed and per layer,
    gradient work copies, and the tensors held per activation unit shape (float32)."""
    import numpy as np
    from scipy.optimize import nnls
    from core import memory
    names = [n for n in memory.CPU_FUSED.activation_copies if n not in FAMILY_UNITS]  # zero on a Llama
    matrix, target = [], []
    rows = [r for r in rows if not r.get("extra") and not r.get("family")]
    for r in rows:
        matrix.append([1.0, r["layers"], r["trainable"] * 4 / memory.MB] +
                      [r["units"][n] * 4 / memory.MB for n in names])
        target.append(r["measured"] - r["fixed"])
    # rows weighted by 1/measured: relative error is what the estimate is judged on
    weights = 1.0 / np.array([r["measured"] for r in rows])
    solution, _ = nnls(np.array(matrix) * weights[:, None], np.array(target) * weights)
    return {"graph_fixed_mb": solution[0], "graph_per_layer_mb": solution[1], "grad_work_copies": solution[2],
            "copies": dict(zip(names, solution[3:])), "predict": (np.array(matrix) @ solution).tolist(), "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma list of grid rows")
    parser.add_argument("--fit", action="store_true", help="fit the CPU constants to the rows run")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--rows", action="append", default=[],
                        help="rows written by --json earlier: reported and fitted with the new ones, not rerun")
    opts = parser.parse_args()
    rows = [row for path in opts.rows for row in json.loads(Path(path).read_text())]
    names = opts.only.split(",") if opts.only else [] if rows else list(GRID)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        text = make_text(tmp / "stories.txt")
        for name in names:
            shape, method, batch, seq, *rest = GRID[name]
            extra = tuple(rest[0]) if rest else ()
            family = rest[1] if len(rest) > 1 else None
            model = tmp / "model-{}{}".format("-".join(map(str, shape)), f"-{family}" if family else "")
            if not model.exists():
                make_model(model, shape, family)
            t = time.time()
            measured = measure(model, text, method, batch, seq, tmp / "runs", extra)
            estimate, units, layers, trainable, fixed = parts(model, text, method, batch, seq, extra)
            row = {"name": name, "shape": shape, "family": family, "method": method, "batch": batch, "seq": seq, "extra": extra,
                   "measured": measured, "estimate": estimate.total_mb, "units": units, "layers": layers,
                   "trainable": trainable, "fixed": fixed, "wall_s": time.time() - t}
            rows.append(row)
            print(f"{name:19s} h{shape[0]} i{shape[1]} L{shape[2]} H{shape[3]}/{shape[4]} V{shape[5]} "
                  f"{method:4s} b{batch} s{seq}{' ' + ' '.join(extra) if extra else ''}: measured {measured:7,.0f} MB, estimate {estimate.total_mb:7,.0f} MB "
                  f"({(estimate.total_mb / measured - 1) * 100:+.0f}%)  [{row['wall_s']:.0f} s]", flush=True)
        for r in rows[:len(rows) - len(names)]:  # rows from --rows: estimated again with today's constants
            folder = tmp / "config-{}-{}".format("-".join(map(str, r["shape"])), r.get("family") or "llama")
            folder.mkdir(exist_ok=True)
            (folder / "config.json").write_text(json.dumps(model_config(tuple(r["shape"]), r.get("family"))))
            estimate, r["units"], r["layers"], r["trainable"], r["fixed"] = parts(
                folder, text, r["method"], r["batch"], r["seq"], tuple(r.get("extra", ())))
            r["estimate"] = estimate.total_mb
            print(f"{r['name']:19s} (from --rows): measured {r['measured']:7,.0f} MB, estimate "
                  f"{r['estimate']:7,.0f} MB ({(r['estimate'] / r['measured'] - 1) * 100:+.0f}%)")
    errors = [abs(r["estimate"] / r["measured"] - 1) for r in rows]
    print(f"\nestimate vs measured: mean |error| {100 * sum(errors) / len(errors):.1f}%, max {100 * max(errors):.1f}%")
    if opts.json:
        Path(opts.json).write_text(json.dumps(rows, indent=1))
    if opts.fit:
        result = fit(rows)
        from core import fused
        which = "CPU_FUSED" if fused.expected("cpu", "float32", "O0") else "CPU_COMPOSED"
        print(f"\nfitted CPU constants (core/memory.py, {which}; the recompute growth is read off the "
              "base-recompute* rows):")
        print(f"  graph_fixed_mb={result['graph_fixed_mb']:.1f}, graph_per_layer_mb={result['graph_per_layer_mb']:.1f}, "
              f"grad_work_copies={result['grad_work_copies']:.2f},")
        print("  activation_copies={" + ", ".join(f'"{k}": {v:.2f}' for k, v in result["copies"].items()) + "}")
        fitted_rows = result["rows"]
        fitted = [r["fixed"] + p for r, p in zip(fitted_rows, result["predict"])]
        errors = [abs(f / r["measured"] - 1) for f, r in zip(fitted, fitted_rows)]
        for r, f in zip(fitted_rows, fitted):
            print(f"  {r['name']:14s} measured {r['measured']:7,.0f} MB, fitted {f:7,.0f} MB ({(f / r['measured'] - 1) * 100:+.1f}%)")
        print(f"fitted: mean |error| {100 * sum(errors) / len(errors):.1f}%, max {100 * max(errors):.1f}%")


if __name__ == "__main__":
    main()
