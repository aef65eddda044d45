"""The memory estimator against real runs: peak RSS of `python -m core.train` on a grid of model
shapes, batch sizes, sequence lengths and methods, next to `core.spec.memory.estimate_memory`'s total,
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
    .venv/bin/python bench/memory_fit.py --only qwen0.5b-lora,qwen0.5b-lora-fp32,qwen0.5b-full,qwen1.5b-lora \
        --json bench/memory_fit_rows_real.json                       # real sizes (~20 min, 11 GB)
    .venv/bin/python bench/memory_fit.py --rows bench/memory_fit_rows.json --rows bench/memory_fit_rows_real.json \
        --fit                                                        # the fit of core.spec.memory.CPU_FUSED, no runs
    .venv/bin/python bench/memory_fit.py --only moe-lora,moe-full,moe-e16,moe-k4-i512,moe-s256-full,moe-attn-only \
        --fit-moe --json bench/memory_fit_rows_moe.json              # the mixtures of experts (~8 min)

bench/memory_fit_rows.json holds the rows behind core/spec/memory.py's constants (measured on the
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

from bench.demo_finetune import run_training  # noqa: E402

STEPS = 10
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")

# name: model shape (hidden, intermediate, layers, heads, kv heads, vocab), method, batch, sequence
# [, extra overrides]. Shapes vary one factor at a time around a small base so the fit can tell the
# unit shapes apart; "25m-*" are config (b) of bench/train_step.py (25M, batch 8 × 256). Rows with
# extra overrides (recompute, AMP; model.dtype aside) are checked against the estimate but not fitted: their own
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
    "base-amp-o1":    ((256, 688, 4, 8, 8, 1024), "lora", 8, 128, ("precision.amp_level=O1",)),
    "base-amp-o1-full": ((256, 688, 4, 8, 8, 1024), "full", 8, 128, ("precision.amp_level=O1",)),
}
# Real sizes (issue 19): bench/real_models.py's Qwen2.5-0.5B / 1.5B-shaped checkpoints (hub config,
# vocab 151,936, 24 / 28 layers, random bf16 weights), micro batch 2 x 128. Not in the default grid
# (minutes and GBs each; 0.5b-full peaks at ~10 GB): name them with --only. Fitted with the grid
# when passed with --rows (their model.dtype changes only the weights, a fixed part).
REAL = {
    "qwen0.5b-lora":      ("0.5b", "lora", 2, 128, ("model.dtype=bfloat16",)),  # bf16 frozen weights
    "qwen0.5b-lora-fp32": ("0.5b", "lora", 2, 128, ("model.dtype=float32",)),   # frozen weights upcast at load
    "qwen0.5b-full":      ("0.5b", "full", 2, 128, ("model.dtype=float32",)),
    "qwen1.5b-lora":      ("1.5b", "lora", 2, 128, ("model.dtype=bfloat16",)),
}
# Mixtures of experts (Mixtral layout, every layer sparse): the shape gains (experts, top_k) and its
# intermediate is the experts' width. Their expert counts (core.spec.memory CPU_*_EXPERTS) are fitted
# on what the dense constants leave unexplained (--fit-moe), so these rows stay out of the dense fit.
MOE_TARGETS = "lora.target_modules=[q_proj,k_proj,v_proj,o_proj,gate_up_proj,down_proj]"
GRID.update({
    "moe-lora":     ((256, 256, 4, 8, 8, 1024, 8, 2), "lora", 8, 128, (MOE_TARGETS,)),
    "moe-full":     ((256, 256, 4, 8, 8, 1024, 8, 2), "full", 8, 128, (MOE_TARGETS,)),
    "moe-e16":      ((256, 256, 4, 8, 8, 1024, 16, 2), "lora", 8, 128, (MOE_TARGETS,)),
    "moe-k4-i512":  ((256, 512, 4, 8, 8, 1024, 8, 4), "lora", 8, 128, (MOE_TARGETS,)),
    "moe-s256-full": ((256, 256, 4, 8, 8, 1024, 8, 2), "full", 8, 256, (MOE_TARGETS,)),
    "moe-attn-only": ((256, 256, 4, 8, 8, 1024, 8, 2), "lora", 8, 128,
                      ("lora.target_modules=[q_proj,k_proj,v_proj,o_proj]",)),
})
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
FAMILY_UNITS = ("norm_extra", "q_extra")  # core.spec.memory units only the family rows have (not fitted here)
for _family in FAMILIES:
    for _method in ("lora", "full"):
        GRID[f"{_family}-{_method}"] = ((256, 688, 4, 8, 8, 1024), _method, 8, 128, (), _family)


def model_config(shape: tuple[int, ...] | str, family: str | None = None) -> dict:
    """The Hugging Face config.json of a grid shape (a Llama, one of FAMILIES, or with 8 numbers a
    Mixtral), or of a real size's name (bench/real_models.py)."""
    if isinstance(shape, str):
        from bench.real_models import CONFIGS
        return CONFIGS[shape]
    if len(shape) == 8:
        return {**model_config(shape[:6]), "architectures": ["MixtralForCausalLM"], "model_type": "mixtral",
                "num_local_experts": shape[6], "num_experts_per_tok": shape[7], "sliding_window": None}
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
    config = model_config(shape, family)
    rng = np.random.default_rng(0)
    if len(shape) == 8:  # a Mixtral in the hub's layout: per-expert tensors w1/w3/w2 and the router
        h, inter, layers, heads, kv, vocab = shape[:6]
        head_dim = h // heads
        normal = lambda *s: rng.standard_normal(s, dtype=np.float32) * 0.02  # noqa: E731
        tensors = {"model.embed_tokens.weight": normal(vocab, h), "model.norm.weight": np.ones(h, np.float32)}
        for n in range(layers):
            p = f"model.layers.{n}."
            tensors.update({
                p + "self_attn.q_proj.weight": normal(heads * head_dim, h),
                p + "self_attn.k_proj.weight": normal(kv * head_dim, h),
                p + "self_attn.v_proj.weight": normal(kv * head_dim, h),
                p + "self_attn.o_proj.weight": normal(h, heads * head_dim),
                p + "input_layernorm.weight": np.ones(h, np.float32),
                p + "post_attention_layernorm.weight": np.ones(h, np.float32),
                p + "block_sparse_moe.gate.weight": normal(shape[6], h)})
            for e in range(shape[6]):
                q = f"{p}block_sparse_moe.experts.{e}."
                tensors.update({q + "w1.weight": normal(inter, h), q + "w3.weight": normal(inter, h),
                                q + "w2.weight": normal(h, inter)})
    else:
        from core.spec.model_args import ModelArgs
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
    """final.peak_mem_mb of one `python -m core.train` run (the worker's VmHWM at its end: the final
    save included)."""
    run = run_training(str(ROOT / "configs" / "defaults.yaml"), runs, *overrides(model, text, method, batch, seq, extra))
    return run["status"].final.peak_mem_mb


def parts(model: Path, text: Path, method: str, batch: int, seq: int, extra: tuple[str, ...]):
    """The estimate for one grid row, and what the fit needs: its activation units, layers, the
    trainable parameter count and the fixed components (weights, gradients, optimizer)."""
    import core.spec.memory as memory
    from core.spec.config import load_config
    from core.spec.model_args import read_model_args
    config = load_config(ROOT / "configs" / "defaults.yaml", overrides(model, text, method, batch, seq, extra))
    args = read_model_args(model)
    estimate = memory.estimate_memory(config, args, seq)
    lora = memory.lora_targets(config, args) if method == "lora" else {}
    units = memory.cpu_activation_units(config, args, seq, lora, memory.cpu_fit(config))
    fixed = estimate.weights_mb + estimate.gradients_mb + estimate.optimizer_mb + memory.CPU_BASELINE_RSS_MB
    return estimate, units, args.num_layers, estimate.trainable_parameters, fixed


def fit(rows) -> dict:
    """Non-negative least squares of (measured − fixed parts) on: graph MB fixed and per layer,
    gradient work copies, and the tensors held per activation unit shape (float32)."""
    import numpy as np
    from scipy.optimize import nnls
    import core.spec.memory as memory
    names = [n for n in memory.CPU_FUSED.activation_copies  # FAMILY_UNITS: zero on a Llama
             if n not in memory.EXPERT_UNITS and n not in FAMILY_UNITS]
    matrix, target = [], []
    # the grid and the real sizes (whose model.dtype only changes the fixed part: weights)
    rows = [r for r in rows if all(e.startswith("model.dtype=") for e in r.get("extra", ())) and not r.get("family")]
    for r in rows:
        matrix.append([1.0, r["layers"], r["trainable"] * 4 / memory.MB] +
                      [r["units"][n] * 4 / memory.MB for n in names])
        target.append(r["measured"] - r["fixed"])
    # rows weighted by 1/measured: relative error is what the estimate is judged on
    weights = 1.0 / np.array([r["measured"] for r in rows])
    solution, _ = nnls(np.array(matrix) * weights[:, None], np.array(target) * weights)
    return {"graph_fixed_mb": solution[0], "graph_per_layer_mb": solution[1], "grad_work_copies": solution[2],
            "copies": dict(zip(names, solution[3:])), "predict": (np.array(matrix) @ solution).tolist(), "rows": rows}


def fit_moe(rows) -> dict:
    """The experts' counts (core.spec.memory CPU_*_EXPERTS): non-negative least squares, over the moe-*
    rows, of what the estimate without them leaves (measured − estimate + their current share) on
    the expert_h and expert_i units (float32), rows weighted by 1/measured."""
    import numpy as np
    from scipy.optimize import nnls
    import core.spec.device_paths as device_paths
    import core.spec.memory as memory
    current = (memory.CPU_FUSED_EXPERTS if device_paths.kernels_expected("cpu", "float32", "O0") else memory.CPU_COMPOSED_EXPERTS)
    rows = [r for r in rows if r["name"].startswith("moe-")]
    matrix = np.array([[r["units"][n] * 4 / memory.MB for n in memory.EXPERT_UNITS] for r in rows])
    target = np.array([r["measured"] - r["estimate"] + sum(r["units"][n] * 4 / memory.MB * current[n]
                                                           for n in memory.EXPERT_UNITS) for r in rows])
    weights = 1.0 / np.array([r["measured"] for r in rows])
    solution, _ = nnls(matrix * weights[:, None], target * weights)
    return {"copies": dict(zip(memory.EXPERT_UNITS, solution)), "rows": rows,
            "fitted": (np.array([r["estimate"] for r in rows]) - matrix @ np.array([current[n] for n in
                       memory.EXPERT_UNITS]) + matrix @ solution).tolist()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma list of grid rows")
    parser.add_argument("--fit", action="store_true", help="fit the CPU constants to the rows run")
    parser.add_argument("--fit-moe", action="store_true", help="fit the experts' counts to the moe-* rows run")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--rows", action="append", default=[],
                        help="rows written by --json earlier: reported and fitted with the new ones, not rerun")
    opts = parser.parse_args()
    rows = [row for path in opts.rows for row in json.loads(Path(path).read_text())]
    names = opts.only.split(",") if opts.only else [] if rows else [n for n in GRID if not n.startswith("moe-")]
    unknown = [n for n in names if n not in GRID and n not in REAL]
    if unknown:
        raise SystemExit(f"--only {unknown[0]}: not a row; rows: {', '.join([*GRID, *REAL])}")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        text = make_text(tmp / "stories.txt")
        for name in names:
            shape, method, batch, seq, *rest = GRID.get(name) or REAL[name]
            extra = tuple(rest[0]) if rest else ()
            family = rest[1] if len(rest) > 1 else None
            if isinstance(shape, str):  # a real size, kept between runs (~1 / 3 GB)
                from bench.real_models import make_model as make_real_model
                model = make_real_model(Path(tempfile.gettempdir()) / "mindtune-bench" / f"qwen2.5-{shape}", shape)
            else:
                model = tmp / "model-{}{}".format("-".join(map(str, shape)), f"-{family}" if family else "")
                if not model.exists():
                    make_model(model, shape, family)
            t = time.time()
            measured = measure(model, text, method, batch, seq, tmp / "runs", extra)
            estimate, units, layers, trainable, fixed = parts(model, text, method, batch, seq, extra)
            row = {"name": name, "shape": shape, "family": family, "config": model_config(shape, family),
                   "method": method, "batch": batch, "seq": seq, "extra": extra,
                   "measured": measured, "estimate": estimate.total_mb, "units": units, "layers": layers,
                   "trainable": trainable, "fixed": fixed, "wall_s": time.time() - t}
            rows.append(row)
            described = (f"Qwen2.5-{shape}" if isinstance(shape, str) else
                         f"h{shape[0]} i{shape[1]} L{shape[2]} H{shape[3]}/{shape[4]} V{shape[5]}")
            print(f"{name:19s} {described} "
                  f"{method:4s} b{batch} s{seq}{' ' + ' '.join(extra) if extra else ''}: measured {measured:7,.0f} MB, estimate {estimate.total_mb:7,.0f} MB "
                  f"({(estimate.total_mb / measured - 1) * 100:+.0f}%)  [{row['wall_s']:.0f} s]", flush=True)
        for r in rows[:len(rows) - len(names)]:  # rows from --rows: estimated again with today's constants
            shape = r["shape"] if isinstance(r["shape"], str) else tuple(r["shape"])
            folder = tmp / "config-{}-{}".format(shape if isinstance(shape, str) else "-".join(map(str, shape)),
                                                 r.get("family") or "llama")
            folder.mkdir(exist_ok=True)
            (folder / "config.json").write_text(json.dumps(model_config(shape, r.get("family"))))
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
        import core.spec.device_paths as device_paths
        which = "CPU_FUSED" if device_paths.kernels_expected("cpu", "float32", "O0") else "CPU_COMPOSED"
        print(f"\nfitted CPU constants (core/spec/memory.py, {which}; the recompute growth is read off the "
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
    if opts.fit_moe:
        result = fit_moe(rows)
        print("\nfitted expert counts (core/spec/memory.py CPU_FUSED_EXPERTS, or CPU_COMPOSED_EXPERTS with "
              "MINDTUNE_FUSED_KERNELS=0): {" + ", ".join(f'"{k}": {v:.2f}' for k, v in result["copies"].items()) + "}")
        for r, f in zip(result["rows"], result["fitted"]):
            print(f"  {r['name']:14s} measured {r['measured']:7,.0f} MB, fitted {f:7,.0f} MB ({(f / r['measured'] - 1) * 100:+.1f}%)")


if __name__ == "__main__":
    main()
