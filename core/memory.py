"""Memory per worker, estimated before launch from a run's config and its model's architecture.

MindSpore-free (the console imports it): the model comes in as `core.model_args.ModelArgs`, the
run as `core.config.Config`. Everything is per worker, in MB (2**20 bytes):

- weights: every parameter in `model.dtype` (LoRA adapters are always float32), plus the
  low-precision copies AMP makes. MindSpore keeps no persistent fp16/bf16 copy of the weights:
  `amp.auto_mixed_precision` (mindspore/train/amp.py) casts each cell's inputs and parameters at
  every call (O1: `nn.Dense`, LoRA layers included; O2: everything outside the norm black list),
  and each cast copy lives until the backward pass has used it, so it counts once.
- gradients: one float32 buffer per trainable parameter (LoRA: the adapters; full: every weight).
- optimizer: AdamW's two float32 moments per trainable parameter and its step counter. Sharding
  them across workers (`parallel.optimizer_shard`) is Ascend-only.
- activations: one micro batch's forward and backward. Counted in units of the tensor shapes this
  architecture makes (`activation_units`): hidden states B·T·h, key/value heads B·T·kv, SwiGLU
  B·T·intermediate, attention scores B·heads·T·T (softmax in float32), logits B·T·vocab in float32
  (with the loss's log-softmax), LoRA branch outputs. How many tensors of each shape are held at
  the peak depends on the runtime: measured on the CPU (`CPU_*`), textbook on GPU/Ascend
  (`SAVED_COPIES`, where a recomputed layer keeps only its input).
- runtime: the framework's own footprint (imports, kernels, compiled graphs).

On the CPU the worker's peak is its resident set size, which `core.train` reports as `peak_mem_mb`.
The train and eval steps are `ms.jit` graphs sharing MindSpore's memory pool. Two CPU kernels keep
memory of their own for as long as a graph lives, outside the pool: a binary op whose inputs differ
in shape (a broadcasting Mul or Add) keeps 16 bytes of indices per output element, and Transpose 8.
`core.model` broadcasts explicitly (`core.ops.full`) so the first costs nothing; the Transposes
of the attention heads remain (the "hidden" count absorbs them). Identical decoder layers share
one compiled graph (`core.model.share_layer_graphs`), so the graph memory per layer is small.
Attention, the norms, the MLP gates and the loss run as fused kernels when the CPU has a C++
compiler (`core.fused`), which keep no (B, heads, T, T) tensors, no broadcast copies, no gate
intermediates and one float per row of logits; otherwise, and under AMP, as MindSpore's composed
ops: two sets of constants (`CPU_FUSED`, `CPU_COMPOSED`), chosen by `cpu_fit`. Recompute moves the
CPU peak a little (fused: full -8%, MLP -3%, attention -1%); AMP raises it (casts keep both
copies); both save more memory on GPU/Ascend.

Calibration: `python bench/memory_fit.py --fit` runs `python -m core.train` (fp32, 10 steps with an
evaluation at step 10, 256+-token text) over a grid of 15 shapes (layers 2-8, hidden 256-512,
intermediate 688-2752, heads 8-16, grouped-query, vocab 1k-16k, batch 4-8, sequence 64-256, LoRA
and full) and fits the `CpuFit` counts. With the fused kernels (bench/memory_fit_rows.json) every
row is within ±1.5% (mean 0.6%); config (b) of bench/train_step.py (Llama 25M, h512 L6 vocab 8k,
batch 8 × 256): LoRA r8 measured 1,289 MB against 1,309 MB estimated (+1.5%), full 1,625 against
1,620 MB (-0.3%). Before the attention kernel read the heads in place the same runs peaked at
1,901 and 2,228 MB; with the fused attention kernel alone (norms, gates and loss composed) at
2,409 and 2,795 MB; with the composed ops (bench/memory_fit_rows_composed.json, ±1.0%)
at 2,500 and 2,905 MB; before the layers shared one graph at 2,607 and 3,001 MB, before the
train step's tuple work went through HyperMap (core/train_step.py) at 2,960 and 3,204 MB, and
before the explicit broadcasts at 6,561 and 6,800 MB. Outside the fit (growth and AMP factors from
these rows):

    run (peak RSS, final.peak_mem_mb)                  measured   estimate
    grid base (h256 L4, LoRA: 861 MB), recompute full    790 MB     790 MB  +0%
      recompute mlp / attention                   812 / 886 MB    812 / 885 MB  +0% / -0%
    grid base, AMP O2 (composed), LoRA / full  2339 / 2082 MB    2271 / 2068 MB  -3% / -1%
    configs/lora_demo.yaml, 300 steps (r16, 128 tokens)  863 MB     864 MB  +0%   (composed: 903 / 902 MB)

Families: what a family adds to a Llama layer is counted in two more units, `norm_extra` (the
width of norms beyond two hidden-wide ones: GLM-4's and Gemma's extra norms, QK-norm) and
`q_extra` (q wider than hidden: an explicit head_dim). Their counts come from the family rows of
bench/memory_fit.py (Qwen3 with head_dim 48, Mistral with a 64-token window at sequence 128,
GLM-4, OLMo 2, at the grid base shape, LoRA and full), each against the base Llama row measured in
the same session (bench/memory_fit_rows_families*.json): fused 2.43 / 3.42, composed 7.26 / 15.24
(q_extra from Qwen3 alone). Every family row is then as close as its session's base row (fused:
LoRA -6%, full -1%; composed -2% to -4%); the window costs nothing measurable (Mistral = base).
The base LoRA row measured 730 MB in that session against 687 MB in the grid's: the fused
constants want a refit on today's engine (`--fit`, in a quiet phase).

Not measured: AMP O1 (the engine could not run it), GPU and Ascend (textbook figures, no such
device here).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from core import fused
from core.config import Config
from core.model_args import ModelArgs, match_lora_targets

MB = float(2**20)
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}
FP32 = 4
OPTIMIZER_STEP_BYTES = 4  # AdamWeightDecay's int32 global_step

# ---- CPU: measured with MindSpore 2.10 (2-core x86, PyNative worker with jit-compiled steps) ----
# A worker's resident set after `import mindspore` (~400 MB), core.train's other imports and a
# first small jit-compiled function.
CPU_BASELINE_RSS_MB = 430.0


@dataclass(frozen=True)
class CpuFit:
    """What bench/memory_fit.py fits for one attention implementation of the CPU worker.

    activation_copies: tensors of each unit shape (see `activation_units`) the compiled graphs hold
    at their peak, effective counts (non-negative least squares over the grid). graph_fixed_mb,
    graph_per_layer_mb: graph memory that does not grow with the batch (compiled kernels,
    workspaces). grad_work_copies: gradient work buffers of the compiled train step (squared-norm
    inputs, clipped copies) in float32 gradient-sized buffers. recompute_growth: what recompute does
    to a recomputed layer's activations (bench/memory_fit.py base-recompute* rows, 4 layers, LoRA)."""
    activation_copies: dict[str, float]
    graph_fixed_mb: float
    graph_per_layer_mb: float
    grad_work_copies: float
    recompute_growth: dict[str, float]


# The fused kernels (core.fused, the default on the CPU): attention keeps no score tensors and
# reads the heads in place (no Transposes, whose CPU kernel keeps 8 bytes of indices per element),
# the norms keep no broadcast copies, the MLP gate nothing but its inputs, the loss one float per row.
# The family units (norm_extra, q_extra) are not in the Llama grid: their counts come from the
# bench/memory_fit.py family rows (Qwen3, GLM-4, OLMo 2 at the base shape, LoRA and full), each
# against the base row measured in the same session (see the module docstring).
CPU_FUSED = CpuFit(
    activation_copies={"hidden": 4.57, "kv": 1.80, "mlp": 4.05, "scores": 0.05, "logits": 2.31, "lora": 0.0,
                       "norm_extra": 2.43, "q_extra": 3.42},
    graph_fixed_mb=124.0, graph_per_layer_mb=9.1, grad_work_copies=0.40,
    recompute_growth={"mlp": -0.27, "attention": -0.08, "full": -0.77})
# MindSpore's composed ops (no C++ compiler, MINDTUNE_FUSED_KERNELS=0, AMP): the fit of
# bench/memory_fit_rows_composed.json, measured before the kernels existed.
CPU_COMPOSED = CpuFit(
    activation_copies={"hidden": 27.06, "kv": 9.97, "mlp": 5.87, "scores": 1.38, "logits": 5.14, "lora": 0.0,
                       "norm_extra": 7.26, "q_extra": 15.24},
    graph_fixed_mb=148.6, graph_per_layer_mb=11.3, grad_work_copies=1.10,
    recompute_growth={"mlp": -0.20, "attention": 0.12, "full": -0.29})
# Downstream evaluation (`eval.downstream` with a test file) generates with a KV cache in PyNative
# mode, outside the compiled graphs: its own kernels and cache (measured +26 MB on the demo run).
CPU_GENERATION_MB = 26.0
# AMP on the CPU: the inserted casts keep float16 and float32 copies side by side and the float16
# kernels' own buffers; at O2 the activations came out 5.4x (full) and 6.4x (LoRA) the float32
# figure (measured, bench/memory_fit.py base-amp-o2* rows).
CPU_AMP_ACTIVATION_FACTOR = {"full": 5.4, "lora": 6.4}

# ---- GPU/Ascend: textbook figures (no such device was measured in this project) ----------------
# Tensors the backward pass needs, per unit shape: norm inputs and outputs, q, k/v repeated to
# every head, o_proj input (hidden); k, v (kv); gate, up, silu, product (mlp); the softmax output
# (scores); logits and their log-softmax. A LoRA branch saves only x·Aᵀ (B, T, rank): negligible.
SAVED_COPIES = {"hidden": 8.0, "kv": 2.0, "mlp": 4.0, "scores": 1.0, "logits": 2.0, "lora": 0.0,
                "norm_extra": 2.0, "q_extra": 3.0}  # a norm's input and output; q, o_proj's input, the output
POOL_OVERHEAD = 1.2  # fragmentation of a reusing memory pool
GPU_RUNTIME_MB = 1024.0  # device context, kernels and workspace


@dataclass(frozen=True)
class MemoryEstimate:
    """The memory one worker needs for a run, by component, in MB."""
    weights_mb: float
    gradients_mb: float
    optimizer_mb: float
    activations_mb: float
    runtime_mb: float
    total_mb: float
    device_memory_mb: float | None
    fits: bool
    notes: list[str] = field(default_factory=list)
    parameters: int = 0
    trainable_parameters: int = 0

    def to_rows(self) -> list[tuple[str, float | None]]:
        """(component, MB) rows for a table: the five components, the total, the device's memory."""
        rows = [("weights", self.weights_mb), ("gradients", self.gradients_mb),
                ("optimizer state", self.optimizer_mb), ("activations", self.activations_mb),
                ("runtime", self.runtime_mb), ("total", self.total_mb), ("device memory", self.device_memory_mb)]
        return [(name, None if mb is None else round(mb, 1)) for name, mb in rows]


# ---- parameters ------------------------------------------------------------------------------

def dense_shapes(args: ModelArgs) -> dict[str, tuple[int, int]]:
    """Every Dense layer of `core.model.CausalLM` by dotted name: (in_features, out_features)."""
    shapes = args.dense_shapes()
    if not args.tie_word_embeddings:
        shapes["lm_head"] = (args.hidden_size, args.vocab_size)
    return shapes


def lora_targets(config: Config, args: ModelArgs) -> dict[str, tuple[int, int]]:
    """The Dense layers `lora.target_modules` selects, as `core.lora.select_target_modules` does
    (`core.model_args.match_lora_targets`: names by suffix, one regex, or "all-linear")."""
    shapes = dense_shapes(args)
    chosen, _ = match_lora_targets(shapes, config.lora.target_modules, args.spec.default_lora_targets)
    return {name: shapes[name] for name in chosen}


def lora_parameters(config: Config, args: ModelArgs) -> int:
    """Adapter parameters: rank·(in + out) per adapted layer (`lora_a` (r, in), `lora_b` (out, r))."""
    return sum(config.lora.rank * (n_in + n_out) for n_in, n_out in lora_targets(config, args).values())


# ---- activations -----------------------------------------------------------------------------

def activation_units(args: ModelArgs, batch: int, seq_len: int,
                     lora: dict[str, tuple[int, int]] | None = None) -> dict[str, float]:
    """Elements of one tensor of each shape a micro batch makes, summed over the layers:
    hidden (B, T, h), kv (B, T, kv_heads·head_dim) and mlp (B, T, intermediate) per layer; scores
    (B, heads, T, T) per layer; logits (B, T, vocab) once; lora: every adapted layer's output."""
    tokens = batch * seq_len
    layers = args.num_layers
    return {
        "hidden": layers * tokens * args.hidden_size,
        "kv": layers * tokens * args.num_kv_heads * args.head_dim,
        "mlp": layers * tokens * args.intermediate_size,
        "scores": layers * batch * args.num_heads * seq_len * seq_len,
        "logits": tokens * args.vocab_size,
        "lora": tokens * sum(n_out for _, n_out in (lora or {}).values()),
        "norm_extra": layers * tokens * extra_norm_width(args),
        "q_extra": layers * tokens * max(0, args.num_heads * args.head_dim - args.hidden_size),
    }


def extra_norm_width(args: ModelArgs) -> int:
    """Per token and layer, the width of the RMSNorms a family has beyond Llama's two: more norms
    around the sub-blocks (GLM-4, Gemma: four) and QK-norm (over q and k per head, Qwen3 and
    Gemma 3, or over the whole projections, OLMo 2: the same elements either way)."""
    spec = args.spec
    width = (len(spec.layout.names()) - 2) * args.hidden_size
    if spec.qk_norm != "none":
        width += (args.num_heads + args.num_kv_heads) * args.head_dim
    return max(width, 0)


PER_LAYER_UNITS = ("hidden", "kv", "mlp", "scores", "lora", "norm_extra", "q_extra")


def recomputed_layers(config: Config, args: ModelArgs) -> int:
    """How many layers `core.train` marks for recompute: the first ceil(fraction·layers), at least one."""
    if config.recompute.policy == "none":
        return 0
    return min(args.num_layers, max(1, math.ceil(config.recompute.layer_fraction * args.num_layers)))


def _weighted(units: dict[str, float], copies: dict[str, float]) -> dict[str, float]:
    return {name: units[name] * copies[name] for name in units}


def cpu_fit(config: Config) -> CpuFit:
    """The constants for the kernels a CPU worker of `config` will run (`core.fused`)."""
    kernels = fused.expected(config.parallel.device, config.model.dtype, config.precision.amp_level)
    return CPU_FUSED if kernels else CPU_COMPOSED


def cpu_activation_bytes(config: Config, args: ModelArgs, units: dict[str, float], elem_bytes: float,
                         fit: CpuFit) -> float:
    """Train step and eval graph on the CPU (one shared pool), recompute's growth included."""
    held = _weighted(units, fit.activation_copies)
    share = recomputed_layers(config, args) / args.num_layers
    if share:
        growth = fit.recompute_growth[config.recompute.policy] * share
        held = {k: v * (1 + growth) if k in PER_LAYER_UNITS else v for k, v in held.items()}
    return sum(held.values()) * elem_bytes


def textbook_activation_bytes(config: Config, args: ModelArgs, units: dict[str, float], elem_bytes: float) -> float:
    """What a reusing memory pool holds: the tensors the backward needs. A recomputed block keeps
    only its input (one hidden-state tensor) and rebuilds the rest during the backward."""
    saved = _weighted(units, SAVED_COPIES)
    layers = recomputed_layers(config, args)
    if layers:
        share = layers / args.num_layers
        dropped = {"mlp": ("mlp",), "attention": ("kv", "scores"),
                   "full": ("hidden", "kv", "mlp", "scores", "lora")}[config.recompute.policy]
        saved = {k: v * (1 - share) if k in dropped else v for k, v in saved.items()}
        if config.recompute.policy == "attention":  # q, repeated k/v, o_proj input: 4 of the 8 hidden
            saved["hidden"] -= units["hidden"] * 4 * share
        saved["hidden"] += units["hidden"] / args.num_layers * layers  # each recomputed block's input
    return sum(saved.values()) * elem_bytes * POOL_OVERHEAD


def _element_bytes(config: Config) -> float:
    """Bytes per activation element: the parameter dtype at O0. Under AMP most tensors are half
    precision but the softmax, norms and logits stay float32 (textbook: ~2.5 bytes on average);
    on the CPU, AMP's casts grow the compiled graphs instead (`CPU_AMP_ACTIVATION_FACTOR`)."""
    if config.precision.amp_level == "O0":
        return float(DTYPE_BYTES[config.model.dtype])
    if config.parallel.device == "cpu":
        return FP32 * CPU_AMP_ACTIVATION_FACTOR[config.method]
    return 2.5


# ---- the estimate ----------------------------------------------------------------------------

def estimate_memory(config: Config, model_args: ModelArgs, seq_len: int,
                    device_memory_mb: float | None = None) -> MemoryEstimate:
    """Memory per worker for `config` on a model of `model_args`, every batch padded to `seq_len`
    tokens (a run pads to `data.max_seq_len`, or less when every sample is shorter)."""
    args, device, notes = model_args, config.parallel.device, []
    total_params = args.num_parameters()
    lora = lora_targets(config, args) if config.method == "lora" else {}
    adapter_params = sum(config.lora.rank * (n_in + n_out) for n_in, n_out in lora.values())
    trainable = adapter_params if config.method == "lora" else total_params

    weights = total_params * DTYPE_BYTES[config.model.dtype] + adapter_params * FP32 + _amp_copies(config, args, lora)
    gradients = trainable * FP32 * (2 if config.train.grad_accum_steps > 1 else 1)
    optimizer = 2 * trainable * FP32 + OPTIMIZER_STEP_BYTES
    units = activation_units(args, config.train.micro_batch_size, seq_len, lora)
    if device == "cpu":
        fit = cpu_fit(config)
        activations = cpu_activation_bytes(config, args, units, _element_bytes(config), fit)
        activations += fit.grad_work_copies * trainable * FP32
        runtime = (CPU_BASELINE_RSS_MB + fit.graph_fixed_mb + fit.graph_per_layer_mb * args.num_layers
                   + (CPU_GENERATION_MB if config.eval.downstream and config.data.test_file else 0.0)) * MB
        notes.append("CPU: the peak is the worker's resident set size; the compiled train and eval "
                     "graphs share one memory pool")
        notes.append("CPU: attention, norms, MLP gates and loss run as fused kernels (no score tensors kept)"
                     if fit is CPU_FUSED else
                     "CPU: attention, norms, MLP gates and loss run as composed MindSpore ops (the fused kernels "
                     "need float32, no AMP and a C++ compiler), which keep score tensors")
        if config.recompute.policy != "none":
            notes.append("CPU: recompute moves the peak of a compiled step a little (measured: full -8%, "
                         "MLP -3%, attention -1%); it saves more on GPU/Ascend")
    else:
        activations = textbook_activation_bytes(config, args, units, _element_bytes(config))
        runtime = GPU_RUNTIME_MB * MB
        notes.append(f"{device}: activations are textbook figures, not measured on such a device")
    notes += _parallel_notes(config)
    if config.precision.amp_level != "O0":
        notes.append(f"AMP {config.precision.amp_level}: parameters are cast to {config.precision.compute_dtype} "
                     "at every call (no persistent copy); the cast copies are counted with the weights")
    if config.train.grad_accum_steps > 1:
        notes.append("gradient accumulation holds a second float32 gradient buffer (the running sum)")
    if config.parallel.optimizer_shard and device == "ascend" and config.parallel.data_parallel > 1:
        optimizer /= config.parallel.data_parallel

    mb = [weights / MB, gradients / MB, optimizer / MB, activations / MB, runtime / MB]
    total = sum(mb)
    # CPU workers of one machine share its RAM; each GPU/Ascend worker has a device of its own.
    sharing = config.parallel.data_parallel if device == "cpu" else 1
    fits = device_memory_mb is None or total * sharing <= device_memory_mb
    if sharing > 1:
        notes.append(f"CPU: the {sharing} workers share this machine's RAM ({sharing} × {total:,.0f} MB)")
    if device_memory_mb is None:
        notes.append("device memory unknown: the total is not checked against a limit")
    elif not fits:
        notes.append(f"needs {total * sharing:,.0f} MB, the device has {device_memory_mb:,.0f} MB: lower "
                     "train.micro_batch_size or data.max_seq_len, or use LoRA")
    return MemoryEstimate(*mb, total_mb=total, device_memory_mb=device_memory_mb, fits=fits, notes=notes,
                          parameters=total_params + adapter_params, trainable_parameters=trainable)


def _parallel_notes(config: Config) -> list[str]:
    p = config.parallel
    if p.data_parallel == 1:
        return []
    if p.optimizer_shard and p.device == "ascend":
        return [f"optimizer state sharded across {p.data_parallel} workers"]
    return [f"each of the {p.data_parallel} workers holds all of this (optimizer sharding is Ascend-only)"]


def _amp_copies(config: Config, args: ModelArgs, lora: dict[str, tuple[int, int]]) -> float:
    """Bytes of the half-precision parameter copies AMP casts at each call (none at O0, nor when
    the parameters are already stored in the compute dtype)."""
    level = config.precision.amp_level
    if level == "O0" or config.model.dtype == config.precision.compute_dtype:
        return 0.0
    half = DTYPE_BYTES[config.precision.compute_dtype]
    adapters = sum(config.lora.rank * (n_in + n_out) for n_in, n_out in lora.values())
    if level == "O1":  # nn.Dense only; LoRADense is one
        return (sum(n_in * n_out for n_in, n_out in dense_shapes(args).values()) + adapters) * half
    return (args.num_parameters() + adapters) * half  # O2: every cell (the norms too)


def device_memory_mb(device: str) -> float | None:
    """Memory one worker may use on `device`: the machine's RAM on the CPU (workers share it); None
    on GPU/Ascend, which the console cannot ask without importing MindSpore."""
    if device != "cpu":
        return None
    import psutil
    return psutil.virtual_memory().total / MB
