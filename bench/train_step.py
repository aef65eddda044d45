"""Training-step throughput of mindtune against a PyTorch eager reference, side by side in one run.

For each model config (the shipped demo model; ~25M-parameter Llama, Qwen3, Gemma 2, Gemma 3 and
Phi-4-mini-shaped Phi-3 models and a Qwen3-MoE of ~26M parameters, 12M active per token (4 layers,
8 experts, top 2), made here with random weights; `0.5b`: a Qwen2.5-0.5B-shaped checkpoint, the
hub's config.json with random bf16 weights, bench/real_models.py) and each method (LoRA r=8 on every
projection of the family: on the MoE attention and both expert stacks, not the router; full
fine-tuning), fp32 compute, micro batch 8 (0.5b: 2), sequence 256, every token labelled:

- mindtune: `core.engine.model.CausalLM` + `core.engine.lora` + `core.engine.train_step.TrainStep` (the engine's own
  compiled step: loss, AdamW, clipping), exactly what `python -m core.train` runs;
- PyTorch 2.13 eager: `transformers`' model of the family (LlamaForCausalLM, Qwen3ForCausalLM,
  Gemma2ForCausalLM, Qwen3MoeForCausalLM with transformers' default experts implementation, ...) on
  the same weights, SDPA attention where transformers offers it for the family (Gemma 2's soft-capped
  attention is eager only), PEFT LoRA on the same modules (MoE experts through PEFT's
  `target_parameters`), `torch.optim.AdamW`, the same clipping.

Each measurement runs in a fresh subprocess (so imports, compilation and peak RSS are its own):
warm-up steps, then the median step time of the timed steps. It prints tokens/s of both and the
ratio, the achieved FLOP rate against this machine's matmul peak (a large fp32 matmul timed in
the same run, before and after the steps, the higher taken), peak RSS and the memory estimator's prediction, time to the first step with its
phases, and the first-step losses of both frameworks (same weights, same batch: they must agree).

    .venv/bin/pip install -r requirements-bench.txt
    .venv/bin/python bench/train_step.py                    # all configs, both methods
    .venv/bin/python bench/train_step.py --configs qwen3-25m --methods lora --steps 6
    .venv/bin/python bench/train_step.py --configs qwen3-moe          # the mixture of experts
    .venv/bin/python bench/train_step.py --configs 0.5b --steps 4 --warmup 2   # ~10 GB for full
    .venv/bin/python bench/train_step.py --configs 0.5b --methods lora --storage bfloat16  # bf16 frozen
    .venv/bin/python bench/train_step.py --configs gemma2-25m,gemma3-25m,phi4-mini-25m
    .venv/bin/python bench/train_step.py --configs qwen3-25m --rounds 3   # a loaded machine

It also prints the CPU-time ratio (process CPU seconds per step, all threads): on a shared
machine it moves less with the load than the wall ratio; `--rounds` interleaves the workers.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BATCH, SEQ = 8, 256
CONFIG_25M = {  # Llama architecture, ~25M parameters (tied embeddings)
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 8192, "hidden_size": 512,
    "intermediate_size": 1536, "num_hidden_layers": 6, "num_attention_heads": 8, "num_key_value_heads": 8,
    "max_position_embeddings": 512, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": True,
    "hidden_act": "silu", "attention_bias": False, "mlp_bias": False, "torch_dtype": "float32",
    "bos_token_id": 1, "eos_token_id": 2,
}
CONFIG_QWEN3_25M = {  # Qwen3 architecture, ~25M parameters: QK-norm, GQA, explicit head_dim, tied
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 8192, "hidden_size": 512,
    "intermediate_size": 1664, "num_hidden_layers": 6, "num_attention_heads": 8, "num_key_value_heads": 4,
    "head_dim": 64, "max_position_embeddings": 512, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
    "tie_word_embeddings": True, "hidden_act": "silu", "attention_bias": False, "torch_dtype": "float32",
    "bos_token_id": 1, "eos_token_id": 2,
}
CONFIG_QWEN3_MOE = {  # Qwen3-MoE architecture, ~26M parameters (12M active per token), every layer sparse
    "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "vocab_size": 8192, "hidden_size": 512,
    "intermediate_size": 1536, "moe_intermediate_size": 384, "num_hidden_layers": 4, "num_attention_heads": 8,
    "num_key_value_heads": 4, "head_dim": 64, "num_experts": 8, "num_experts_per_tok": 2, "norm_topk_prob": True,
    "decoder_sparse_step": 1, "mlp_only_layers": [], "max_position_embeddings": 512, "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0, "tie_word_embeddings": True, "hidden_act": "silu", "attention_bias": False,
    "router_aux_loss_coef": 0.001, "torch_dtype": "float32", "bos_token_id": 1, "eos_token_id": 2,
}
_GEMMA_25M = {  # the Gemma layout at ~25M parameters (23M): GQA 8/4 heads of 64, windows of 128 < SEQ
    "vocab_size": 8192, "hidden_size": 512, "intermediate_size": 1536, "num_hidden_layers": 6,
    "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 64, "query_pre_attn_scalar": 64,
    "max_position_embeddings": 512, "rms_norm_eps": 1e-6, "sliding_window": 128, "tie_word_embeddings": True,
    "hidden_activation": "gelu_pytorch_tanh", "attention_bias": False, "torch_dtype": "float32",
    "bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0,
}
CONFIG_GEMMA2_25M = {  # sliding and global layers alternating, attention and final-logit soft-caps
    "architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", **_GEMMA_25M, "rope_theta": 10000.0,
    "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0,
}
CONFIG_GEMMA3_25M = {  # 5 sliding : 1 global, QK-norm, a local RoPE base beside the global one
    "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", **_GEMMA_25M, "rope_theta": 1000000.0,
    "rope_local_base_freq": 10000.0, "sliding_window_pattern": 6,
}
CONFIG_PHI4_MINI_25M = {  # Phi-4-mini's layout: fused qkv_proj / gate_up_proj, partial rotary 0.75, LongRoPE
    # whose original context (128) is shorter than SEQ (the long factors apply), tied embeddings
    "architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "vocab_size": 8192, "hidden_size": 512,
    "intermediate_size": 1536, "num_hidden_layers": 6, "num_attention_heads": 8, "num_key_value_heads": 4,
    "max_position_embeddings": 512, "original_max_position_embeddings": 128, "partial_rotary_factor": 0.75,
    "rope_theta": 10000.0, "rope_scaling": {"type": "longrope", "short_factor": [1.0] * 24,
                                             "long_factor": [1.0 + 0.25 * i for i in range(24)]},
    "rms_norm_eps": 1e-5, "tie_word_embeddings": True, "hidden_act": "silu", "torch_dtype": "float32",
    "bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0,
}
MADE = {"25m": CONFIG_25M, "qwen3-25m": CONFIG_QWEN3_25M, "gemma2-25m": CONFIG_GEMMA2_25M,
        "gemma3-25m": CONFIG_GEMMA3_25M, "phi4-mini-25m": CONFIG_PHI4_MINI_25M,
        "qwen3-moe": CONFIG_QWEN3_MOE}  # config name -> config.json of a model made here
ROUTER_STD = 0.3  # a MoE router's weights: N(0, 0.3), so that the routing is not near-uniform
REAL = ("0.5b",)  # bench/real_models.py's sizes (Qwen2ForCausalLM in PyTorch)
SHAPES = {"0.5b": (2, 256)}  # config -> (micro batch, sequence); the others BATCH x SEQ


# ---- model folders -----------------------------------------------------------------------------

def make_checkpoint(folder: Path, config: dict) -> Path:
    """config.json + model.safetensors with seeded N(0, 0.02) weights (norms 1; an MoE router
    N(0, ROUTER_STD)), Hugging Face keys: every tensor `core.spec.model_args.ModelArgs.parameter_shapes`
    lists for the config's family, in the hub's layout (its key map: MoE experts one per tensor)."""
    import numpy as np
    from safetensors.numpy import save_file
    from core.spec.model_args import ModelArgs
    rng = np.random.default_rng(0)
    args = ModelArgs.from_hf_config(config)
    tensors = {}
    for name, shape in args.parameter_shapes().items():
        norm = name.endswith("norm.weight")
        std = ROUTER_STD if args.moe is not None and name.endswith("mlp.gate.weight") else 0.02
        tensors[name] = np.ones(shape, np.float32) if norm else rng.standard_normal(shape, dtype=np.float32) * std
    tensors = args.spec.key_map.to_hub(tensors, args)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    save_file(tensors, str(folder / "model.safetensors"))
    return folder


def lora_targets(model_dir: Path) -> list[str]:
    """LoRA r=8 on every projection of the model's family (what 'all-linear' selects)."""
    from core.spec.model_args import read_model_args
    return list(read_model_args(model_dir).spec.default_lora_targets)


def peft_targets(model_dir: Path) -> dict:
    """PEFT's LoraConfig targets for the same modules: on a mixture of experts the expert stacks
    are PEFT `target_parameters` (PEFT 0.21 with transformers 5), the rest `target_modules`."""
    targets = lora_targets(model_dir)
    if "num_experts_per_tok" not in json.loads((Path(model_dir) / "config.json").read_text()):
        return {"target_modules": targets}
    experts = [t for t in targets if t in ("gate_up_proj", "down_proj")]
    return {"target_modules": [t for t in targets if t not in experts],
            "target_parameters": [f"mlp.experts.{t}" for t in experts]}


def batch_arrays(vocab: int, batch: int = BATCH, seq: int = SEQ, seed: int = 0):
    """The benchmark's batch: random token ids, all labelled, no padding (same in both frameworks)."""
    import numpy as np
    rng = np.random.default_rng(seed)
    ids = rng.integers(3, vocab, size=(batch, seq), dtype=np.int64).astype(np.int32)
    return ids, ids.copy(), np.ones((batch, seq), np.int32)


def matmul_flops(model_dir: Path, method: str, batch: int = BATCH, seq: int = SEQ) -> dict:
    """FLOPs of one training step (forward + backward), counted from the matmuls.
    Dense weights (N_dense, lm_head included): forward 2·N per token; backward 2·N for the input
    gradient plus 2·N for the weight gradient (full only: LoRA's frozen weights need no weight
    gradient). Attention scores and values: forward 4·T·heads·head_dim per token per layer,
    backward twice that. LoRA's own matmuls (r = 8) are counted like dense weights that train. A
    mixture of experts' stacked experts count top_k times per token (the experts a token runs,
    its active parameters), their LoRA too."""
    from core.spec.model_args import read_model_args
    a = read_model_args(model_dir)
    shapes = a.dense_shapes()
    per_token = {name: a.moe.top_k if a.moe is not None and a.moe.experts_of(name) > 1 else 1 for name in shapes}
    dense = sum(n_in * n_out * per_token[name] for name, (n_in, n_out) in shapes.items()) + a.vocab_size * a.hidden_size
    tokens = batch * seq
    weight_grad = 2 * dense if method == "full" else 0
    targets = lora_targets(model_dir)
    lora = 0 if method != "lora" else sum(8 * (n_in + n_out) * per_token[name] for name, (n_in, n_out) in shapes.items()
                                          if name.rsplit(".", 1)[-1] in targets)
    dense_flops = tokens * (2 * dense + 2 * dense + weight_grad + 6 * lora)
    attention = a.num_layers * batch * (4 * seq * seq * a.num_heads * a.head_dim) * 3
    return {"dense": dense, "flops": dense_flops + attention}


# ---- workers (one per subprocess) --------------------------------------------------------------

def peak_rss_mb() -> float:
    """This process's peak RSS: VmHWM (getrusage's ru_maxrss also keeps the launching process's
    high-water mark across exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024.0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def worker_mindtune(model_dir: Path, method: str, steps: int, warmup: int, t_launch: float,
                    batch: int = BATCH, seq: int = SEQ, storage: str | None = None) -> dict:
    phases = {"process start": time.time() - t_launch}
    t = time.time()
    import numpy as np
    import mindspore as ms
    from mindspore import Tensor
    from core.engine.checkpoint import load_hf_model
    from core.engine.fused import enable as enable_fused_kernels
    from core.engine.generate import use_device
    from core.engine.lora import inject_lora, mark_only_lora_trainable
    from core.engine.model import share_layer_graphs
    from core.engine.train_step import TrainStep, WarmupDecaySchedule, adamw
    use_device("cpu")  # as core.train's worker
    ms.set_seed(0)
    phases["imports"] = time.time() - t
    t = time.time()
    model = load_hf_model(model_dir, "float32", storage_dtype=storage if method == "lora" else None)
    if method == "lora":
        inject_lora(model, 8, 16.0, 0.0, lora_targets(model_dir))
        params = mark_only_lora_trainable(model)
    else:
        params = list(model.trainable_params())
    kernels = enable_fused_kernels(model)  # as core.train's worker (MINDTUNE_FUSED_KERNELS=0: composed)
    share_layer_graphs(model)  # as core.train's worker: one compiled graph per kind of layer
    model.set_train(True)
    schedule = WarmupDecaySchedule(1e-4, 0, 1000, "constant", 1.0)
    step = TrainStep(model, adamw(params, schedule, 0.0), 1.0, None)
    phases["model load"] = time.time() - t
    ids, labels, mask = batch_arrays(model.args.vocab_size, batch, seq)
    times, cpu, losses = [], [], []
    for n in range(warmup + steps):
        t, c = time.time(), time.process_time()
        loss, _, _, _ = step([(ids, labels, mask)])
        times.append(time.time() - t)
        cpu.append(time.process_time() - c)
        losses.append(loss)
        if n == 0:
            phases["first step (compile)"] = times[0]
    phases["total to first step"] = sum(v for k, v in phases.items() if k != "total to first step")
    return {"step_s": statistics.median(times[warmup:]), "step_cpu_s": statistics.median(cpu[warmup:]), "losses": losses[:3], "phases": phases,
            "peak_rss_mb": peak_rss_mb(), "trainable": int(sum(int(np.prod(p.shape)) for p in params)),
            "kernels": kernels}


def worker_torch(model_dir: Path, method: str, steps: int, warmup: int, t_launch: float,
                 batch: int = BATCH, seq: int = SEQ, storage: str | None = None) -> dict:
    phases = {"process start": time.time() - t_launch}
    t = time.time()
    import torch
    from transformers import AutoModelForCausalLM
    phases["imports"] = time.time() - t
    t = time.time()
    torch.manual_seed(0)
    attention = "sdpa"
    try:
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation=attention)
    except ValueError:  # the family has no SDPA path (Gemma 2: SDPA cannot soft-cap the scores)
        attention = "eager"
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation=attention)
    moe = "num_experts_per_tok" in json.loads((Path(model_dir) / "config.json").read_text())
    experts = getattr(model.config, "_experts_implementation", None) if moe else None  # transformers' choice
    if method == "lora":
        from peft import LoraConfig, get_peft_model
        model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, **peft_targets(model_dir)))
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.0)
    phases["model load"] = time.time() - t
    ids, labels, mask = (torch.from_numpy(a.astype("int64")) for a in batch_arrays(model.config.vocab_size, batch, seq))
    times, cpu, losses = [], [], []
    for n in range(warmup + steps):
        t, c = time.time(), time.process_time()
        out = model(input_ids=ids, attention_mask=mask, labels=labels)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(float(out.loss))
        times.append(time.time() - t)
        cpu.append(time.process_time() - c)
        if n == 0:
            phases["first step"] = times[0]
    phases["total to first step"] = sum(v for k, v in phases.items() if k != "total to first step")
    return {"step_s": statistics.median(times[warmup:]), "step_cpu_s": statistics.median(cpu[warmup:]), "losses": losses[:3], "phases": phases,
            "peak_rss_mb": peak_rss_mb(), "trainable": int(sum(p.numel() for p in params)),
            "threads": torch.get_num_threads(), "attention": attention, "experts_implementation": experts}


def matmul_peak(n: int = 2048, repeats: int = 5) -> dict:
    """GFLOP/s of an n×n fp32 matmul, best of `repeats`, in NumPy, PyTorch and MindSpore."""
    import numpy as np
    out = {}
    a = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
    best = min(_timed(lambda: a @ a) for _ in range(repeats))
    out["numpy"] = 2 * n**3 / best / 1e9
    try:
        import torch
        ta = torch.from_numpy(a)
        out["torch"] = 2 * n**3 / min(_timed(lambda: ta @ ta) for _ in range(repeats)) / 1e9
    except ImportError:
        pass
    return out


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def worker_ms_matmul(n: int = 2048, repeats: int = 5) -> dict:
    import numpy as np
    import mindspore as ms
    from mindspore import Tensor, ops
    ms.set_context(mode=ms.PYNATIVE_MODE, device_target="CPU")
    a = Tensor(np.random.default_rng(0).standard_normal((n, n), dtype=np.float32))
    ops.matmul(a, a).asnumpy()
    return {"mindspore": 2 * n**3 / min(_timed(lambda: ops.matmul(a, a).asnumpy()) for _ in range(repeats)) / 1e9}


# ---- orchestration -----------------------------------------------------------------------------

def run_worker(kind: str, **kwargs) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        out = Path(handle.name)
    argv = [sys.executable, __file__, "--worker", kind, "--out", str(out), "--t-launch", repr(time.time())]
    for key, value in kwargs.items():
        argv += [f"--{key.replace('_', '-')}", str(value)]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "GLOG_v": "3"})
    if proc.returncode != 0:
        raise SystemExit(f"{kind} worker failed:\n{proc.stderr[-4000:]}")
    result = json.loads(out.read_text())
    out.unlink()
    return result


def estimate(model_dir: Path, method: str, batch: int = BATCH, seq: int = SEQ, storage: str | None = None) -> float:
    from core.spec.config import load_config
    from core.spec.memory import estimate_memory
    from core.spec.model_args import read_model_args
    config = load_config(ROOT / "configs" / "defaults.yaml", [
        f"model.path={model_dir}", f"method={method}", f"train.micro_batch_size={batch}",
        f"data.max_seq_len={seq}", "eval.downstream=false",
        *([f"model.dtype={storage}"] if storage and method == "lora" else [])])
    return estimate_memory(config, read_model_args(model_dir), seq).total_mb


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default="demo,25m,qwen3-25m,qwen3-moe", help="comma list of demo, " + ", ".join([*MADE, *REAL]))
    parser.add_argument("--storage", default=None, choices=["bfloat16", "float16"],
                        help="mindtune LoRA: keep the frozen weights in this dtype (model.dtype; PyTorch stays float32)")
    parser.add_argument("--models-dir", default=os.path.join(tempfile.gettempdir(), "mindtune-bench"),
                        help="where the 0.5b checkpoint is made (kept: ~1 GB)")
    parser.add_argument("--methods", default="lora,full", help="comma list of lora, full")
    parser.add_argument("--steps", type=int, default=8, help="timed steps (median reported)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first (compilation)")
    parser.add_argument("--no-torch", action="store_true", help="mindtune only")
    parser.add_argument("--rounds", type=int, default=1,
                        help="mindtune/PyTorch worker pairs per row, order alternating (a loaded machine: "
                             "the median of the per-pair wall and CPU-time ratios is printed)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--t-launch", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--model-dir", help=argparse.SUPPRESS)
    parser.add_argument("--method", help=argparse.SUPPRESS)
    parser.add_argument("--batch", type=int, default=BATCH, help=argparse.SUPPRESS)
    parser.add_argument("--seq", type=int, default=SEQ, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        if args.worker == "matmul":
            result = {**matmul_peak(), **worker_ms_matmul()}
        else:
            fn = worker_mindtune if args.worker == "mindtune" else worker_torch
            result = fn(Path(args.model_dir), args.method, args.steps, args.warmup, args.t_launch,
                        args.batch, args.seq, args.storage)
        Path(args.out).write_text(json.dumps(result))
        return

    with tempfile.TemporaryDirectory() as tmp:
        models = {"demo": ROOT / "models" / "tiny-demo"}
        for name in args.configs.split(","):
            if name in MADE:
                models[name] = make_checkpoint(Path(tmp) / name, MADE[name])
            elif name in REAL:
                from bench.real_models import make_model
                models[name] = make_model(Path(args.models_dir) / f"qwen2.5-{name}", name)
        # the peak is measured before and after the steps and the higher taken: this shared
        # machine's speed drifts (one run measured 98.7 GFLOP/s before, others 124-132)
        peak = run_worker("matmul")
        print_peak("before the steps", peak)
        rows = []
        for name in args.configs.split(","):
            for method in args.methods.split(","):
                batch, seq = SHAPES.get(name, (BATCH, SEQ))
                common = dict(model_dir=models[name], method=method, steps=args.steps, warmup=args.warmup,
                              batch=batch, seq=seq)
                storage = dict(storage=args.storage) if args.storage and method == "lora" else {}
                ms_result, pt_result = run_pairs(common, storage, 1 if args.no_torch else args.rounds, args.no_torch)
                ms_result["tokens"] = batch * seq
                if pt_result:
                    pt_result["tokens"] = batch * seq
                flops = matmul_flops(models[name], method, batch, seq)["flops"]
                rows.append((name, method, ms_result, pt_result, flops,
                             estimate(models[name], method, batch, seq, args.storage)))
                print_row(rows[-1], max(peak.values()))
        after = run_worker("matmul")
        print_peak("after the steps", after)
        print_table(rows, max(*peak.values(), *after.values()))


def run_pairs(common: dict, storage: dict, rounds: int, no_torch: bool):
    """`rounds` mindtune and PyTorch workers interleaved (MT, PT, then PT, MT, ...): each pair ran
    under about the same load. Returns the pair of the median wall ratio; prints every pair's
    wall and CPU-time ratios (PyTorch / mindtune: above 1, mindtune is faster)."""
    pairs = []
    for n in range(rounds):
        if no_torch:
            pairs.append((run_worker("mindtune", **common, **storage), None))
        elif n % 2 == 0:
            ms_r = run_worker("mindtune", **common, **storage)
            pairs.append((ms_r, run_worker("torch", **common)))
        else:
            pt_r = run_worker("torch", **common)
            pairs.append((run_worker("mindtune", **common, **storage), pt_r))
    if no_torch:
        return pairs[0]
    wall = [pt["step_s"] / ms_r["step_s"] for ms_r, pt in pairs]
    cpu = [pt["step_cpu_s"] / ms_r["step_cpu_s"] for ms_r, pt in pairs]
    if rounds > 1:
        print(f"    interleaved pairs ({rounds}): wall ratio " + ", ".join(f"{r:.2f}" for r in wall)
              + f" (median {statistics.median(wall):.2f}); CPU-time ratio " + ", ".join(f"{r:.2f}" for r in cpu)
              + f" (median {statistics.median(cpu):.2f})", flush=True)
    return pairs[sorted(range(rounds), key=wall.__getitem__)[(rounds - 1) // 2]]


def print_peak(when: str, peak: dict) -> None:
    print(f"fp32 matmul peak {when} (2048³, best of 5): " + ", ".join(f"{k} {v:.1f}" for k, v in peak.items())
          + f" GFLOP/s -> {max(peak.values()):.1f} GFLOP/s", flush=True)


def print_row(row, peak_gflops):
    name, method, ms_r, pt_r, flops, est = row
    tokens = ms_r["tokens"]
    line = (f"[{name} {method}] mindtune {tokens / ms_r['step_s']:.0f} tok/s (step {ms_r['step_s']:.3f} s, "
            f"{flops / ms_r['step_s'] / 1e9:.0f} GFLOP/s of {peak_gflops:.0f})")
    if pt_r:
        line += f", pytorch {tokens / pt_r['step_s']:.0f} tok/s (step {pt_r['step_s']:.3f} s, " \
                f"{flops / pt_r['step_s'] / 1e9:.0f} GFLOP/s, {pt_r['threads']} threads" + \
                (f", experts {pt_r['experts_implementation']}" if pt_r.get("experts_implementation") else "") + \
                f"), ratio {pt_r['step_s'] / ms_r['step_s']:.2f}, CPU-time ratio {pt_r['step_cpu_s'] / ms_r['step_cpu_s']:.2f}"
        line += f"; first losses mindtune {ms_r['losses'][0]:.5f} pytorch {pt_r['losses'][0]:.5f}"
    print(line, flush=True)
    print("    mindtune phases: " + ", ".join(f"{k} {v:.1f} s" for k, v in ms_r["phases"].items())
          + f"; kernels {ms_r['kernels']}", flush=True)
    if pt_r:
        print("    pytorch phases:  " + ", ".join(f"{k} {v:.1f} s" for k, v in pt_r["phases"].items())
              + f"; attention {pt_r.get('attention', 'sdpa')}", flush=True)


def print_table(rows, peak_gflops):
    print(f"\nfp32 compute, micro batch {BATCH} (0.5b: {SHAPES['0.5b'][0]}), sequence {SEQ}; utilization = step FLOPs / "
          f"step time / matmul peak ({peak_gflops:.1f} GFLOP/s)")
    print("| config | method | mindtune tok/s | PyTorch tok/s | ratio | mindtune GFLOP/s (util.) | PyTorch GFLOP/s (util.) "
          "| mindtune peak RSS | PyTorch peak RSS | estimate (a core.train worker: train + eval graphs) "
          "| to first step (mindtune / PyTorch) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, method, ms_r, pt_r, flops, est in rows:
        tokens = ms_r["tokens"]
        cells = [name, method]
        for r in (ms_r, pt_r):
            cells.append(f"{tokens / r['step_s']:.0f}" if r else "-")
        cells.append(f"{pt_r['step_s'] / ms_r['step_s']:.2f}" if pt_r else "-")
        for r in (ms_r, pt_r):
            cells.append(f"{flops / r['step_s'] / 1e9:.0f} ({100 * flops / r['step_s'] / (peak_gflops * 1e9):.0f}%)"
                         if r else "-")
        for r in (ms_r, pt_r):
            cells.append(f"{r['peak_rss_mb']:.0f} MB" if r else "-")
        cells.append(f"{est:.0f} MB")
        cells.append(" / ".join(f"{r['phases']['total to first step']:.1f} s" if r else "-" for r in (ms_r, pt_r)))
        print("| " + " | ".join(cells) + " |")
    by = {(n, m): r for n, m, r, _, _, _ in rows}
    for name in dict.fromkeys(n for n, *_ in rows):
        if (name, "lora") in by and (name, "full") in by:
            ratio = by[(name, "lora")]["peak_rss_mb"] / by[(name, "full")]["peak_rss_mb"]
            print(f"{name}: mindtune LoRA / full peak RSS = {ratio:.2f}")


if __name__ == "__main__":
    main()
