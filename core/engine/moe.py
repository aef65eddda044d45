"""The sparse mixture-of-experts feed-forward of Mixtral and Qwen3-MoE in MindSpore, and the
router's load-balancing loss.

A router (`gate`, a Dense H -> E) scores every token; softmax over the E experts, the top k kept
(Mixtral renormalises them to sum to 1, Qwen3-MoE only with `norm_topk_prob`); each of the k
experts runs its SwiGLU, down(silu(g)·u) with (g, u) = gate_up(x), and the outputs are summed
with the router's weights. Shapes are static (graph mode): the n·k (token, expert) pairs are
sorted by expert, so each expert's rows are one contiguous group, and then

- grouped (the CPU kernel, core/engine/kernels/grouped_matmul.cc): one product per group, over exactly
  the rows routed there, forward and backward;
- composed (elsewhere: GPU/Ascend, float16, no compiler): every expert on every token as two
  BatchMatMuls, weighted by the router (zero for experts not chosen). Same result, E/k times the
  products, no Python loop over tokens or experts.

The experts are stacked parameters (`StackedLinear`, (E, out, in)); LoRA on them
(`LoRAStackedLinear`) adds A (E, r, in) and B (E, out, r) through the same grouped product.
Checkpoint layouts and parameter counts live in core/spec/moe_args.py (MindSpore-free).
"""
from __future__ import annotations

import math

import numpy as np

import mindspore as ms
from mindspore import Parameter, Tensor, nn, ops
from mindspore.common.initializer import HeUniform, initializer

from core.engine.fused import FusedGluHalves, FusedGroupedMatmul
from core.engine.layers import dense, weight_init
from core.spec.errors import MessageError
from core.spec.messages import Message
from core.spec.moe_args import MoeArgs
from core.engine.ops import full


class StackedLinear(nn.Cell):
    """E linear maps without bias, stacked: weight (E, out, in).

    grouped (set by `SparseMoE.enable_grouped`): x (M, in) rows sorted by expert, ids (M,)
    int32 their experts -> (M, out), row i through weight[ids[i]]. Composed: x (E, n, in) -> (E, n, out),
    expert e on its own slice."""

    def __init__(self, experts: int, in_features: int, out_features: int, dtype=ms.float32, weight=None,
                 random_init: bool = True):
        """weight: an existing Parameter to adopt (LoRA's wrapper), else a new one initialised as
        the model's other weights (random_init: see core.engine.model.CausalLM)."""
        super().__init__()
        self.experts, self.in_features, self.out_features = experts, in_features, out_features
        if weight is None:
            weight = Parameter(initializer(weight_init(random_init), (experts, out_features, in_features), dtype), name="weight")
        self.weight = weight
        self.bmm_bt = ops.BatchMatMul(transpose_b=True)
        self.grouped = None  # core.engine.fused.FusedGroupedMatmul(...).op for this weight
        self.grouped_trained = None  # the same product with a weight gradient (for LoRA's A and B)

    def product(self, x, weight, ids, grouped):
        if grouped is not None:
            return grouped(x, weight, ids)
        return self.bmm_bt(x, ops.cast(weight, x.dtype))

    def construct(self, x, ids):
        return self.product(x, self.weight, ids, self.grouped)


class LoRAStackedLinear(StackedLinear):
    """`StackedLinear` plus a low-rank update per expert: y = x·W[e]ᵀ + (x·A[e]ᵀ)·B[e]ᵀ · alpha/rank,
    A (E, rank, in) initialised like PEFT (kaiming-uniform, a=√5, per expert), B (E, out, rank) zero.
    Reuses the base layer's weight Parameter (same object). No dropout: PEFT's LoRA on expert
    parameters (`target_parameters`) has none either, so an adapter exported here means the same."""

    def __init__(self, base: StackedLinear, rank: int, alpha: float):
        super().__init__(base.experts, base.in_features, base.out_features, weight=base.weight)
        self.rank, self.alpha = int(rank), float(alpha)
        self.scaling = self.alpha / self.rank
        e = base.experts
        # HeUniform over (E·rank, in) draws each expert's A with fan_in = in, as PEFT's per-expert init
        a = initializer(HeUniform(math.sqrt(5)), (e * self.rank, self.in_features), ms.float32).init_data()
        self.lora_a = Parameter(a.reshape(e, self.rank, self.in_features), name="lora_a")
        self.lora_b = Parameter(initializer("zeros", (e, self.out_features, self.rank), ms.float32), name="lora_b")
        self.merged = False
        self.adapter_off = False  # a reference pass (core.engine.preference.adapters_off): the base alone
        self.grouped, self.grouped_trained = base.grouped, base.grouped_trained

    def construct(self, x, ids):
        out = self.product(x, self.weight, ids, self.grouped)
        if self.merged or self.adapter_off:
            return out
        hidden = self.product(x, ops.cast(self.lora_a, x.dtype), ids, self.grouped_trained)  # (M, rank) | (E, n, rank)
        # scaling folded into B, not applied to the (rows, out) product
        return out + self.product(hidden, ops.cast(self.lora_b * self.scaling, x.dtype), ids, self.grouped_trained)

    def extend_repr(self):
        return f"experts={self.experts}, rank={self.rank}, alpha={self.alpha}, merged={self.merged}"


class Experts(nn.Cell):
    """A layer's experts: `gate_up_proj` (E, 2I, H), gate rows first, and `down_proj` (E, H, I),
    transformers 5's names (`mlp.experts.gate_up_proj`)."""

    def __init__(self, experts: int, hidden: int, intermediate: int, dtype=ms.float32, random_init: bool = True):
        super().__init__()
        self.gate_up_proj = StackedLinear(experts, hidden, 2 * intermediate, dtype, random_init=random_init)
        self.down_proj = StackedLinear(experts, intermediate, hidden, dtype, random_init=random_init)
        self.intermediate = intermediate
        self.glu = None  # core.engine.fused.FusedGluHalves(...).op: silu(g)·u of the halves in one pass

    def construct(self, x, ids):
        h = self.gate_up_proj(x, ids)  # (..., 2I)
        if self.glu is not None:
            a = self.glu(h)
        else:
            a = ops.silu(h[..., :self.intermediate]) * h[..., self.intermediate:]
        return self.down_proj(a, ids)  # (..., H)


class SparseMoE(nn.Cell):
    """The sparse MoE feed-forward of a decoder layer: x (B, T, H) -> (output (B, T, H), router
    logits (B·T, E)). `args` needs `hidden_size` and `moe` (a core.spec.moe_args.MoeArgs): ModelArgs."""

    def __init__(self, args, dtype=ms.float32, random_init: bool = True):
        super().__init__()
        hidden, moe = args.hidden_size, args.moe
        self.num_experts, self.top_k, self.normalize = moe.num_experts, moe.top_k, moe.normalize_top_k
        self.hub_layout = moe.hub_layout
        self.gate = dense(hidden, moe.num_experts, False, dtype, random_init)  # the router; no LoRA by default
        self.experts = Experts(moe.num_experts, hidden, moe.expert_intermediate_size, dtype, random_init)
        self.grouped = False
        self.bmm = ops.BatchMatMul()
        self.one_hot = ops.OneHot()
        self.on, self.off = Tensor(1.0, ms.float32), Tensor(0.0, ms.float32)

    def enable_grouped(self, kernel) -> None:
        """Route the experts through the grouped CPU kernels (core.engine.fused), after LoRA and freezing
        have shaped the model: the experts' own weights get a gradient only when they are trained
        then (`requires_grad`; full fine-tuning), LoRA's A and B always."""
        trained, frozen = FusedGroupedMatmul(kernel, weight_grad=True).op, FusedGroupedMatmul(kernel, weight_grad=False).op
        for proj in (self.experts.gate_up_proj, self.experts.down_proj):
            proj.grouped = trained if proj.weight.requires_grad else frozen
            proj.grouped_trained = trained
        self.experts.glu = FusedGluHalves(kernel).op
        self.grouped = True

    def route(self, x2):
        """x2 (n, H) -> router logits (n, E), the top-k weights (n, k) and experts (n, k) int32."""
        logits = self.gate(x2)
        probs = ops.softmax(ops.cast(logits, ms.float32), -1)
        weights, experts = ops.topk(probs, self.top_k)
        if self.normalize:
            weights = weights / weights.sum(-1, keepdims=True)
        return logits, ops.cast(weights, x2.dtype), ops.cast(experts, ms.int32)

    def construct(self, x):
        b, t, h = x.shape
        n = b * t
        x2 = x.reshape(n, h)
        logits, weights, experts = self.route(x2)
        if self.grouped:
            out = self._grouped(x2, weights, experts)
        else:
            out = self._composed(x2, weights, experts)
        return out.reshape(b, t, h), logits

    def _grouped(self, x2, weights, experts):
        """The n·k (token, expert) pairs sorted by expert (ties in token order), each expert's rows
        through its weights by the grouped kernel, weighted, summed back per token."""
        n, h = x2.shape
        pairs = n * self.top_k
        key = experts.reshape(-1) * pairs + ops.arange(pairs, dtype=ms.int32)  # unique: a stable sort
        sorted_key, order = ops.sort(key)
        ids = sorted_key // pairs  # (M,) expert of each sorted row, nondecreasing
        token = order // self.top_k  # (M,) the token each row copies
        rows = ops.gather(x2, token, 0)  # (M, H)
        y = self.experts(rows, ids)  # (M, H)
        w = ops.gather(weights.reshape(-1), order, 0).reshape(pairs, 1)
        return ops.unsorted_segment_sum(y * full(w, y.shape), token, n)  # (n, H)

    def _composed(self, x2, weights, experts):
        """Every expert on every token, then the router's weights (n, E), zero where not chosen."""
        n, h = x2.shape
        e = self.num_experts
        y = self.experts(full(x2.reshape(1, n, h), (e, n, h)), None)  # (E, n, H)
        chosen = self.one_hot(experts, e, self.on, self.off)  # (n, k, E)
        combine = (ops.cast(chosen, weights.dtype) * full(weights.reshape(n, self.top_k, 1), chosen.shape)).sum(1)
        out = self.bmm(combine.reshape(n, 1, e), y.transpose(1, 0, 2))  # (n, 1, E) · (n, E, H)
        return out.reshape(n, h)


class LoadBalancingLoss(nn.Cell):
    """transformers' `load_balancing_loss_func` (Switch Transformer, eqs. 4-6): over every sparse
    layer's router logits, E · Σ_e f_e · P_e, f_e the fraction of (token, top-k slot) assignments to
    expert e and P_e its mean router probability, both pooled over the layers before the product,
    padding tokens left out (`token_mask`)."""

    def __init__(self, num_experts: int, top_k: int):
        super().__init__()
        self.num_experts, self.top_k = num_experts, top_k
        self.one_hot = ops.OneHot()
        self.on, self.off = Tensor(1.0, ms.float32), Tensor(0.0, ms.float32)

    def construct(self, router_logits, token_mask):
        """router_logits: tuple of (n, E) per sparse layer; token_mask (n,) float32, 1 = real token."""
        e = self.num_experts
        mask = token_mask.reshape(-1, 1)  # (n, 1)
        counts, probs, rows = 0.0, 0.0, 0.0
        for logits in router_logits:
            p = ops.softmax(ops.cast(logits, ms.float32), -1)  # (n, E)
            _, chosen = ops.topk(p, self.top_k)
            hits = self.one_hot(chosen, e, self.on, self.off).sum(1)  # (n, E): 1 where chosen
            counts = counts + (ops.stop_gradient(hits) * full(mask, hits.shape)).sum(0)
            probs = probs + (p * full(mask, p.shape)).sum(0)
            rows = rows + mask.sum()
        return (counts / rows * (probs / rows)).sum() * e


# ---- PEFT's layout for LoRA on experts ------------------------------------------------------------
# PEFT 0.21 on transformers 5 puts LoRA on the stacked expert tensors with `target_parameters`
# (`lora.ParamWrapper`): A as (E·r, in) (expert-major rows), B as (out, r·E) (rank-major columns).
# Two targeted parameters of one module nest, in the module's parameter order (gate_up_proj, then
# down_proj): the first becomes `experts.base_layer.lora_*`, the second `experts.lora_*`. Its config
# conversion for transformers 5 also reads these target_modules of an MoE model as expert
# parameters (peft/utils/transformers_weight_conversion.py), so a dense layer's LoRA on them cannot
# be expressed.
PEFT_REMAPPED = {"mixtral": ("gate", "w1", "w2", "w3"), "qwen": ("gate", "gate_proj", "up_proj", "down_proj")}
EXPERT_PROJECTIONS = ("gate_up_proj", "down_proj")  # transformers 5's parameter order in the experts module


class MoeExportError(MessageError):
    """An expert LoRA that PEFT's file layout cannot express; the message says what to do instead."""


def sparse_blocks(model: nn.Cell) -> dict[str, SparseMoE]:
    return {name: cell for name, cell in model.cells_and_names() if isinstance(cell, SparseMoE)}


def peft_moe_adapter(model: nn.Cell, lora_names: list[str], prefix: str) -> tuple[dict, list[str], list[str]]:
    """For a model with sparse MoE layers and LoRA on the modules `lora_names`: (the expert LoRA
    tensors under PEFT's keys and shapes, target_modules as module names for the Dense LoRA layers,
    target_parameters for the expert ones). Raises MoeExportError where PEFT would target other
    modules than those trained."""
    blocks = sparse_blocks(model)
    layout = next(iter(blocks.values())).hub_layout
    cells = dict(model.cells_and_names())
    experts = [n for n in lora_names if isinstance(cells[n], LoRAStackedLinear)]
    dense = [n for n in lora_names if n not in experts]
    leaves = sorted({n.rsplit(".", 1)[-1] for n in dense})
    remapped = [leaf for leaf in leaves if leaf in PEFT_REMAPPED[layout]]
    if remapped:
        raise MoeExportError(Message("lora.moe_remapped", names=", ".join(remapped)))
    selected = sorted(n for n, c in cells.items() if isinstance(c, nn.Dense) and n.rsplit(".", 1)[-1] in leaves)
    if selected != sorted(dense):
        missing = sorted(set(selected) - set(dense))
        raise MoeExportError(Message("lora.moe_modules", leaves=", ".join(leaves), module=missing[0]))
    parameters = []
    for proj in EXPERT_PROJECTIONS:
        trained = [f"{b}.experts.{proj}" for b in blocks if f"{b}.experts.{proj}" in experts]
        if trained and len(trained) != len(blocks):
            untrained = next(f"{b}.experts.{proj}" for b in blocks if f"{b}.experts.{proj}" not in experts)
            raise MoeExportError(Message("lora.moe_experts", projection=proj, module=untrained))
        if trained:
            parameters.append(f"mlp.experts.{proj}")
    tensors = {}
    for name in experts:
        cell, (owner, _, proj) = cells[name], name.rpartition(".")
        nested = proj == EXPERT_PROJECTIONS[0] and f"{owner}.{EXPERT_PROJECTIONS[1]}" in experts
        key = prefix + owner + (".base_layer" if nested else "")
        a, b = cell.lora_a.asnumpy(), cell.lora_b.asnumpy()  # (E, r, in), (E, out, r)
        e, r, _ = a.shape
        tensors[key + ".lora_A.weight"] = np.ascontiguousarray(a.reshape(e * r, -1), dtype=np.float32)
        tensors[key + ".lora_B.weight"] = np.ascontiguousarray(b.transpose(1, 2, 0).reshape(b.shape[1], r * e),
                                                               dtype=np.float32)
    return tensors, leaves, parameters
