"""Memory per worker, estimated before launch from a run's config and its model's architecture.

MindSpore-free (the console imports it): the model comes in as `core.spec.model_args.ModelArgs`, the
run as `core.spec.config.Config`. Everything is per worker, in MB (2**20 bytes):

- weights: every parameter in `model.dtype` (LoRA adapters are always float32), plus the
  low-precision copies AMP makes. MindSpore keeps no persistent fp16/bf16 copy of the weights:
  `amp.auto_mixed_precision` (mindspore/train/amp.py) casts each cell's inputs and parameters at
  every call (O1: `nn.Dense`, LoRA layers included; O2: everything outside the norm black list),
  and each cast copy lives until the backward pass has used it, so it counts once.
- gradients: one float32 buffer per trainable parameter (LoRA: the adapters; full: every weight).
- optimizer: AdamW's two float32 moments per trainable parameter and its step counter, on every
  worker (`parallel.optimizer_shard` is refused: see core.spec.config.OPTIMIZER_SHARD_REFUSAL).
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
`core.engine.model` broadcasts explicitly (`core.engine.ops.full`) so the first costs nothing; the Transposes
of the attention heads remain (the "hidden" count absorbs them). Identical decoder layers share
one compiled graph (`core.engine.model.share_layer_graphs`), so the graph memory per layer is small.
Attention, the norms, the MLP gates and the loss run as fused kernels when the CPU has a C++
compiler (`core.engine.fused`), which keep no (B, heads, T, T) tensors, no broadcast copies, no gate
intermediates and one float per row of logits; otherwise, and under AMP, as MindSpore's composed
ops: two sets of constants (`CPU_FUSED`, `CPU_COMPOSED`), chosen by `cpu_fit`. With 16-bit frozen
weights (LoRA) the head and its loss are one kernel on the hidden states: no logits at all
(`head_loss_on_hidden`). Recompute moves the CPU peak a little (fused: full -8%, MLP -4%;
attention +11%, its layers compiled one by one); AMP raises it (casts keep both copies); both save
more memory on GPU/Ascend.

Calibration: `python bench/memory_fit.py --fit` runs `python -m core.train` (fp32, 10 steps with an
evaluation at step 10, 256+-token text) over a grid of 15 shapes (layers 2-8, hidden 256-512,
intermediate 688-2752, heads 8-16, grouped-query, vocab 1k-16k, batch 4-8, sequence 64-256, LoRA
and full) and the real sizes (Qwen2.5-0.5B LoRA with bf16 and float32 frozen weights and full,
1.5B LoRA: vocab 151,936, 24-28 layers; bench/memory_fit_rows_real.json), and fits the `CpuFit`
counts over all 19 rows. Refitted 2026-12-02 on an AMD EPYC (AVX2, 2 cores) after the LoRA
backward stopped holding the base projections' outputs (core/engine/kernels/lora.cc): every row within
±3.6% (mean 1.0%); 0.5B LoRA bf16 2,374 MB measured vs 2,347 estimated, float32 frozen 3,567 vs
3,644, full 10,477 vs 10,457 (the final save included), 1.5B LoRA 5,052 vs 5,057; the 25M
(bench/train_step.py's config (b), h512 L6 vocab 8k, 8 × 256) LoRA 1,297 vs 1,322, full 1,451
vs 1,447. Earlier the 25M peaked at 1,901 / 2,228 MB before the attention kernel read the heads in
place, 2,500 / 2,905 MB composed (bench/memory_fit_rows_composed.json, ±1.0%), 2,607 / 3,001 MB
before the layers shared one graph, and 6,561 / 6,800 MB before the explicit broadcasts. Outside
the fit (growth and inlined-layer figures read off them; AMP rows composed):

    run (peak RSS, final.peak_mem_mb)                    measured         estimate
    grid base (h256 L4, LoRA: 711 MB), recompute full    653 MB           652 MB    -0%
      recompute mlp / attention (layers inlined)         686 / 790 MB     686 / 790 MB
    grid base, AMP O2 (composed), LoRA / full            2444 / 2128 MB   2271 / 2068 MB  -7% / -3%
    grid base, AMP O1, LoRA / full                       1321 / 989 MB    1344 / 1016 MB  +2% / +3%

Families: what a family adds to a Llama layer is counted in two more units, `norm_extra` (the
width of norms beyond two hidden-wide ones: GLM-4's and Gemma's extra norms, QK-norm) and
`q_extra` (q wider than hidden: an explicit head_dim). Their counts come from the family rows of
bench/memory_fit.py (Qwen3 with head_dim 48, Mistral with a 64-token window at sequence 128,
GLM-4, OLMo 2, at the grid base shape, LoRA and full; bench/memory_fit_rows_families*.json), by
non-negative least squares on what the dense constants leave: fused 1.69 / 0.00 (re-measured with
the grid, every family row within ±0.9%), composed 7.26 / 15.24 (q_extra from Qwen3 alone). The
window costs nothing measurable (Mistral = base).

Mixtures of experts (core/engine/moe.py): the weights are every expert's; a sparse layer's activations
are counted in units of its token copies through the experts (tokens·top_k with the grouped kernel,
tokens·experts composed, every expert on every token) times the hidden size (`expert_h`: gathered
rows, outputs and their gradients; the router's sort and scatter) and times the expert width
(`expert_i`). Their counts are fitted on the moe-* rows of bench/memory_fit.py over the dense
constants' residual (a tiny Mixtral, h256 L4, 8-16 experts, top 2-4, LoRA with and without the
experts, full; bench/memory_fit_rows_moe.json, every row within ±2.6%; composed:
bench/memory_fit_rows_moe_composed.json, ±1.8%).

Not measured: GPU and Ascend (textbook figures, no such device here).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from core.spec.device_paths import LOSS_CHUNK_TOKENS, attention_dtype, attention_path, head_in_loss, kernels_expected
from core.spec.config import Config
from core.spec.messages import Message
from core.spec.model_args import ModelArgs, match_lora_targets
from core.spec.objectives import spec_of

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
    to a recomputed layer's activations (bench/memory_fit.py base-recompute* rows, 4 layers, LoRA).
    inlined_layer_mb: graph memory each decoder layer adds when the layers' graphs are not shared
    (`layers_inlined`: `core.engine.model.share_layer_graphs` leaves them inlined), read off the
    base-recompute-attn row."""
    activation_copies: dict[str, float]
    graph_fixed_mb: float
    graph_per_layer_mb: float
    grad_work_copies: float
    recompute_growth: dict[str, float]
    inlined_layer_mb: float = 0.0


# Mixtures of experts (core/engine/moe.py), per sparse layer: expert_h is (token copies through the experts,
# hidden) and expert_i (token copies, expert width), where the token copies are tokens·top_k with the
# grouped kernel and tokens·experts composed (every expert on every token). Fitted apart from the
# dense grid, on its residuals (bench/memory_fit.py --fit-moe, the moe-* rows).
CPU_FUSED_EXPERTS = {"expert_h": 3.04, "expert_i": 2.44}  # bench/memory_fit_rows_moe.json: rows within ±2.6%
CPU_COMPOSED_EXPERTS = {"expert_h": 14.81, "expert_i": 0.0}  # bench/memory_fit_rows_moe_composed.json: ±1.8%
EXPERT_UNITS = tuple(CPU_FUSED_EXPERTS)

# The fused kernels (core.engine.fused, the default on the CPU): attention keeps no score tensors and
# reads the heads in place (no Transposes, whose CPU kernel keeps 8 bytes of indices per element),
# the norms keep no broadcast copies, the MLP gate nothing but its inputs, the loss one float per row.
# The family units (norm_extra, q_extra) are not in the Llama grid: their counts come from the
# bench/memory_fit.py family rows (Qwen3, GLM-4, OLMo 2 at the base shape, LoRA and full), each
# against the base row measured in the same session (see the module docstring).
CPU_FUSED = CpuFit(
    activation_copies={"hidden": 0.04, "kv": 0.0, "mlp": 2.31, "scores": 0.48, "logits": 2.39, "lora": 0.84,
                       "norm_extra": 1.69, "q_extra": 0.0, **CPU_FUSED_EXPERTS},
    graph_fixed_mb=147.2, graph_per_layer_mb=8.9, grad_work_copies=0.79,
    # attention: its layers cannot share a graph, and that row cannot tell the recompute's own
    # effect from the inlined layers' graph memory: all of it is counted as the latter
    recompute_growth={"mlp": -0.29, "attention": 0.0, "full": -0.78}, inlined_layer_mb=21.1)
# MindSpore's composed ops (no C++ compiler, MINDTUNE_FUSED_KERNELS=0, AMP): the fit of
# bench/memory_fit_rows_composed.json, measured before the kernels existed and before the layers
# shared graphs (its per-layer graph memory is the inlined layers').
CPU_COMPOSED = CpuFit(
    activation_copies={"hidden": 27.06, "kv": 9.97, "mlp": 5.87, "scores": 1.38, "logits": 5.14, "lora": 0.0,
                       "norm_extra": 7.26, "q_extra": 15.24, **CPU_COMPOSED_EXPERTS},
    graph_fixed_mb=148.6, graph_per_layer_mb=11.3, grad_work_copies=1.10,
    recompute_growth={"mlp": -0.20, "attention": 0.12, "full": -0.29})
# Downstream evaluation (`eval.downstream` with a test file) generates with a KV cache in PyNative
# mode, outside the compiled graphs: its own kernels and cache (measured +26 MB on the demo run).
CPU_GENERATION_MB = 26.0
# AMP on the CPU: the inserted casts keep float16 and float32 copies side by side and the float16
# kernels' own buffers; at O2 (MindSpore's casts on every cell) the activations came out 5.4x (full)
# and 6.4x (LoRA) the float32 figure, at O1 (core.engine.layers.amp_dense: the Dense layers only) 1.26x and
# 2.75x (measured, bench/memory_fit.py base-amp-o2* and base-amp-o1* rows; read off those rows).
CPU_AMP_ACTIVATION_FACTOR = {"O2": {"full": 5.4, "lora": 6.4}, "O1": {"full": 1.26, "lora": 2.75}}

# ---- GPU/Ascend: textbook figures (no such device was measured in this project) ----------------
# Tensors the backward pass needs, per unit shape: norm inputs and outputs, q, k/v repeated to
# every head, o_proj input (hidden); k, v (kv); gate, up, silu, product (mlp); the softmax output
# (scores); logits and their log-softmax. A LoRA branch saves only x·Aᵀ (B, T, rank): negligible.
# A sparse MoE layer's expert rows (every expert's rows, composed): the gathered input and the
# output (expert_h), the gate/up output and the gate (expert_i, 2 + 1). norm_extra: a norm's input
# and output; q_extra: q, o_proj's input, the output.
SAVED_COPIES = {"hidden": 8.0, "kv": 2.0, "mlp": 4.0, "scores": 1.0, "logits": 2.0, "lora": 0.0,
                "norm_extra": 2.0, "q_extra": 3.0, "expert_h": 2.0, "expert_i": 3.0}
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
    """Every Dense layer of `core.engine.model.CausalLM` by dotted name: (in_features, out_features)."""
    shapes = args.dense_shapes()
    if not args.tie_word_embeddings:
        shapes["lm_head"] = (args.hidden_size, args.vocab_size)
    return shapes


def lora_targets(config: Config, args: ModelArgs) -> dict[str, tuple[int, int]]:
    """The Dense layers `lora.target_modules` selects, as `core.engine.lora.select_target_modules` does
    (`core.spec.model_args.match_lora_targets`: names by suffix, one regex, or "all-linear")."""
    shapes = dense_shapes(args)
    chosen, _ = match_lora_targets(shapes, config.lora.target_modules, args.spec.default_lora_targets)
    return {name: shapes[name] for name in chosen}


def lora_parameters(config: Config, args: ModelArgs) -> int:
    """Adapter parameters: rank·(in + out) per adapted layer (`lora_a` (r, in), `lora_b` (out, r))."""
    return adapter_parameters(config.lora.rank, args, lora_targets(config, args))


def adapter_parameters(rank: int, args: ModelArgs, lora: dict[str, tuple[int, int]]) -> int:
    """rank·(in + out) per adapted layer, once per expert for an MoE layer's stacked experts."""
    return sum(rank * (n_in + n_out) * _experts_of(args, name) for name, (n_in, n_out) in lora.items())


def _experts_of(args: ModelArgs, module: str) -> int:
    return 1 if args.moe is None else args.moe.experts_of(module)


# ---- activations -----------------------------------------------------------------------------

def activation_units(args: ModelArgs, batch: int, seq_len: int,
                     lora: dict[str, tuple[int, int]] | None = None, grouped_experts: bool = True) -> dict[str, float]:
    """Elements of one tensor of each shape a micro batch makes, summed over the layers:
    hidden (B, T, h), kv (B, T, kv_heads·head_dim) per layer, mlp (B, T, intermediate) per dense
    layer; scores (B, heads, T, T) per layer; logits (B, T, vocab) once; lora: every adapted
    layer's output. A mixture of experts' sparse layers add expert_h (copies, h) and expert_i
    (copies, expert width), the token copies through the experts being B·T·top_k with the grouped
    kernel (`grouped_experts`) and B·T·experts composed; an expert stack's LoRA outputs count per copy."""
    tokens = batch * seq_len
    layers, moe = args.num_layers, args.moe
    sparse = 0 if moe is None else len(moe.sparse_layers)
    copies = 0 if moe is None else tokens * (moe.top_k if grouped_experts else moe.num_experts)
    return {
        "hidden": layers * tokens * args.hidden_size,
        "kv": layers * tokens * args.num_kv_heads * args.head_dim,
        "mlp": (layers - sparse) * tokens * args.intermediate_size,
        "scores": layers * batch * args.num_heads * seq_len * seq_len,
        "logits": tokens * args.vocab_size,
        "lora": sum(n_out * (copies if _experts_of(args, name) > 1 else tokens)
                    for name, (_, n_out) in (lora or {}).items()),
        "norm_extra": layers * tokens * extra_norm_width(args),
        "q_extra": layers * tokens * max(0, args.num_heads * args.head_dim - args.hidden_size),
        "expert_h": sparse * copies * args.hidden_size,
        "expert_i": sparse * copies * (0 if moe is None else moe.expert_intermediate_size),
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


PER_LAYER_UNITS = ("hidden", "kv", "mlp", "scores", "lora", "norm_extra", "q_extra", *EXPERT_UNITS)


def recomputed_layers(config: Config, args: ModelArgs) -> int:
    """How many layers `core.train` marks for recompute: the first ceil(fraction·layers), at least one."""
    if config.recompute.policy == "none":
        return 0
    return min(args.num_layers, max(1, math.ceil(config.recompute.layer_fraction * args.num_layers)))


def _weighted(units: dict[str, float], copies: dict[str, float]) -> dict[str, float]:
    return {name: units[name] * copies[name] for name in units}


def cpu_fit(config: Config) -> CpuFit:
    """The constants for the kernels a CPU worker of `config` will run (`core.engine.fused`)."""
    kernels = kernels_expected(config.parallel.device, config.compute_dtype, config.precision.amp_level)
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
        dropped = {"mlp": ("mlp", *EXPERT_UNITS), "attention": ("kv", "scores"),
                   "full": ("hidden", "kv", "mlp", "scores", "lora", *EXPERT_UNITS)}[config.recompute.policy]
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
        return float(DTYPE_BYTES[config.compute_dtype])
    if config.parallel.device == "cpu":
        return FP32 * CPU_AMP_ACTIVATION_FACTOR[config.precision.amp_level][config.method]
    return 2.5


# ---- the estimate ----------------------------------------------------------------------------

def layers_inlined(config: Config) -> bool:
    """Whether the decoder layers compile one by one instead of sharing a graph (as
    `core.engine.model.share_layer_graphs` decides): the attention block recomputed alone (MindSpore 2.10
    cannot compile it shared), or LoRA dropout (a shared graph would share its masks)."""
    return config.recompute.policy == "attention" or (config.method == "lora" and config.lora.dropout > 0)


def cpu_activation_units(config: Config, args: ModelArgs, seq_len: int, lora: dict, fit: CpuFit) -> dict[str, float]:
    """`activation_units` of one micro batch as a CPU worker of `config` makes them: with the fused
    kernels and the head loss on the hidden states (`head_loss_on_hidden`) there are no logits."""
    units = activation_units(args, config.train.micro_batch_size, seq_len, lora, fit is CPU_FUSED)
    if fit is CPU_FUSED and head_loss_on_hidden(config, args, lora):
        units["logits"] = 0.0  # two floats per row: the logits are never materialised
    return units


def head_loss_on_hidden(config: Config, args: ModelArgs, lora: dict) -> bool:
    """Whether the LM head and its loss run as one kernel on the final hidden states, with no
    (B, T, vocab) logits tensor (core.engine.fused.FusedFrozenWeights.head_loss, as
    `CausalLM.use_frozen_kernels` routes it): LoRA with 16-bit frozen weights on the CPU, a head
    that is frozen, without soft-capping. At 0.5B (vocab 151,936, 2 × 128) the logits would be
    ~340 MB of the estimate."""
    return config.frozen_weights_16bit and args.final_softcap is None and "lm_head" not in lora


def device_activation_units(config: Config, args: ModelArgs, seq_len: int, lora: dict,
                            units: dict[str, float], soc: str | None = None) -> tuple[dict[str, float], float, list[str]]:
    """`activation_units` as a GPU/Ascend worker makes them, by the paths core.spec.device_paths chooses
    (and core.engine.devices runs; `soc`: the Ascend chip, None when not known): FlashAttentionScore keeps
    no scores; composed attention keeps its softmax per layer plus one float32 (B, 1, T, T) mask per
    distinct window (not broadcast to the heads); the chunked loss keeps no logits when the head runs
    inside it, and a (chunk, vocab) float32 workspace (logits, softmax, one-hot) either way. Returns
    the units, the extra bytes (masks, workspace) and a note per path."""
    device, batch = config.parallel.device, config.train.micro_batch_size
    units = dict(units)
    dtype = attention_dtype(config.precision.amp_level, config.precision.compute_dtype, config.compute_dtype)
    needs = {}
    if args.attn_softcap is not None:
        needs["softcap"] = args.attn_softcap
    windows = {args.layer_window(n) for n in range(args.num_layers)}
    if windows != {None}:
        needs["window"] = True
    path, why = attention_path(device, dtype, head_dim=args.head_dim, soc=soc, needs=needs, packed=config.data.packing)
    extra = 0.0
    if path == "flash":
        units["scores"] = 0.0
        notes = [Message("memory.flash", device=device)]
    else:
        masks = len(windows) * batch * seq_len * seq_len * FP32
        extra += masks
        scores = units["scores"] * SAVED_COPIES["scores"] * _element_bytes(config) * POOL_OVERHEAD
        notes = [Message("memory.composed_attention", device=device, why=why, scores_mb=f"{scores / MB:,.1f}",
                         mask_mb=f"{masks / MB:,.1f}")]
    rows = min(LOSS_CHUNK_TOKENS, batch * seq_len)
    extra += 3 * rows * args.vocab_size * FP32
    if head_in_loss(device, args.final_softcap, "lm_head" in lora, False):
        units["logits"] = 0.0
        notes.append(Message("memory.head_loss", device=device, tokens=LOSS_CHUNK_TOKENS))
    else:
        notes.append(Message("memory.chunked_loss", device=device, tokens=LOSS_CHUNK_TOKENS))
    return units, extra, notes


def estimate_memory(config: Config, model_args: ModelArgs, seq_len: int, device_memory_mb: float | None = None,
                    soc: str | None = None, unknown_why: str | None = None) -> MemoryEstimate:
    """Memory per worker for `config` on a model of `model_args`, every batch padded to `seq_len`
    tokens (a run pads to `data.max_seq_len`, or less when every sample is shorter). `soc`: the
    Ascend chip (MindSpore's SoC name), which decides its attention; None: not known (composed is
    assumed). `unknown_why`: why a GPU/Ascend device's memory is not known (a message), said in the
    notes when `device_memory_mb` is None."""
    args, device, notes = model_args, config.parallel.device, []
    total_params = args.num_parameters()
    lora = lora_targets(config, args) if config.method == "lora" else {}
    adapter_params = adapter_parameters(config.lora.rank, args, lora)
    trainable = adapter_params if config.method == "lora" else total_params

    terms = spec_of(config.train.objective).memory(config, args)  # a reference copy, rows per example, caches
    weights = _weight_bytes(config, args) + adapter_params * FP32 + _amp_copies(config, args, lora)
    gradients = trainable * FP32 * (2 if config.train.grad_accum_steps > 1 else 1)
    optimizer = 2 * trainable * FP32 + OPTIMIZER_STEP_BYTES
    if device == "cpu":
        fit = cpu_fit(config)
        units = _logits_positions(cpu_activation_units(config, args, seq_len, lora, fit), terms, seq_len)
        activations = cpu_activation_bytes(config, args, units, _element_bytes(config), fit)
        activations += fit.grad_work_copies * trainable * FP32
        inlined = fit.inlined_layer_mb * args.num_layers if layers_inlined(config) else 0.0
        runtime = (CPU_BASELINE_RSS_MB + fit.graph_fixed_mb + fit.graph_per_layer_mb * args.num_layers + inlined
                   + (CPU_GENERATION_MB if config.eval.downstream and config.data.test_file else 0.0)) * MB
        notes.append(Message("memory.cpu_rss"))
        notes.append(Message("memory.cpu_fused" if fit is CPU_FUSED else "memory.cpu_composed"))
        if config.recompute.policy != "none":
            notes.append(Message("memory.cpu_recompute"))
    else:  # the composed experts (core/engine/moe.py): the grouped kernel is the CPU's
        units = _logits_positions(activation_units(args, config.train.micro_batch_size, seq_len, lora,
                                                   grouped_experts=False), terms, seq_len)
        units, extra, path_notes = device_activation_units(config, args, seq_len, lora, units, soc)
        activations = textbook_activation_bytes(config, args, units, _element_bytes(config)) + extra
        runtime = GPU_RUNTIME_MB * MB
        notes.append(Message("memory.textbook", device=device))
        notes += path_notes
    notes += terms.notes
    weights += terms.extra_weight_bytes
    activations = activations * terms.activation_rows + terms.extra_bytes
    if terms.merged_adapter_copies and lora:  # a rollout's kernel weights: W + s·B·A of each adapted matrix
        copies = sum(n_in * n_out for n_in, n_out in lora.values()) * FP32
        activations += copies
        notes.append(Message("memory.grpo_merged", mb=f"{copies / MB:,.1f}"))
    notes += _parallel_notes(config)
    if config.precision.amp_level != "O0":
        notes.append(Message("memory.amp", level=config.precision.amp_level, dtype=config.precision.compute_dtype))
    if config.train.grad_accum_steps > 1:
        notes.append(Message("memory.accumulation"))

    mb = [weights / MB, gradients / MB, optimizer / MB, activations / MB, runtime / MB]
    total = sum(mb)
    # CPU workers of one machine share its RAM; each GPU/Ascend worker has a device of its own.
    sharing = config.parallel.data_parallel if device == "cpu" else 1
    fits = device_memory_mb is None or total * sharing <= device_memory_mb
    if sharing > 1:
        notes.append(Message("memory.shared_ram", workers=sharing, mb=f"{total:,.0f}"))
    if device_memory_mb is None and device != "cpu" and unknown_why is not None:
        notes.append(Message("memory.device_unknown", device=device, why=unknown_why))
    elif device_memory_mb is None:
        notes.append(Message("memory.unknown_device"))
    elif not fits:
        notes.append(Message("memory.too_big", needed=f"{total * sharing:,.0f}", has=f"{device_memory_mb:,.0f}"))
    return MemoryEstimate(*mb, total_mb=total, device_memory_mb=device_memory_mb, fits=fits, notes=notes,
                          parameters=total_params + adapter_params, trainable_parameters=trainable)


def _logits_positions(units: dict[str, float], terms, seq_len: int) -> dict[str, float]:
    """The logits of only `terms.logits_positions` positions a row, where the objective's step makes no more
    (GRPO: the completion's)."""
    if terms.logits_positions and terms.logits_positions < seq_len:
        units = {**units, "logits": units["logits"] * terms.logits_positions / seq_len}
    return units


def _weight_bytes(config: Config, args: ModelArgs) -> float:
    """The base model's parameters in memory: all in model.dtype, except with 16-bit frozen weights
    (`Config.frozen_weights_16bit`), where the matrices (2-D: Dense weights, the embedding) are
    16-bit and the norms and biases float32."""
    if not config.frozen_weights_16bit:
        return args.num_parameters() * DTYPE_BYTES[config.model.dtype]
    shapes = args.parameter_shapes()
    matrices = sum(math.prod(s) for s in shapes.values() if len(s) >= 2)
    vectors = sum(math.prod(s) for s in shapes.values() if len(s) < 2)
    return matrices * DTYPE_BYTES[config.model.dtype] + vectors * FP32


def _parallel_notes(config: Config) -> list[str]:
    p = config.parallel
    if p.data_parallel == 1:
        return []
    return [Message("memory.parallel", workers=p.data_parallel)]


def _amp_copies(config: Config, args: ModelArgs, lora: dict[str, tuple[int, int]]) -> float:
    """Bytes of the half-precision parameter copies AMP casts at each call (none at O0, nor when
    the parameters are already stored in the compute dtype)."""
    level = config.precision.amp_level
    if level == "O0" or config.model.dtype == config.precision.compute_dtype:
        return 0.0
    half = DTYPE_BYTES[config.precision.compute_dtype]
    adapters = adapter_parameters(config.lora.rank, args, lora)
    if level == "O1":  # nn.Dense only; LoRADense is one, an MoE layer's stacked experts are not
        return (sum(n_in * n_out for name, (n_in, n_out) in dense_shapes(args).items()
                    if _experts_of(args, name) == 1) + adapters) * half
    return (args.num_parameters() + adapters) * half  # O2: every cell (the norms too)


def device_memory_mb(device: str) -> float | None:
    """Memory one worker may use on `device`: the machine's RAM on the CPU (workers share it); None
    on GPU/Ascend, which the console cannot ask MindSpore for (core.run.accelerators asks the
    vendors' tools instead)."""
    if device != "cpu":
        return None
    import psutil
    return psutil.virtual_memory().total / MB
