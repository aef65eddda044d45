"""The layers every block of the engine is built from (`core.engine.model`'s attention, MLP and decoder,
`core.engine.moe`'s experts and router, `core.engine.lora`): the Dense projection whose weight may be stored in 16
bits (`Precision`, `FrozenMatmul`), AMP O1 for it, the weight initialisation, the token embedding
and RMSNorm. MindSpore; the CPU workarounds they use are core.engine.ops'.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import mindspore as ms
from mindspore import Parameter, Tensor, nn, ops
from mindspore.common.initializer import Initializer, Normal, initializer

from core.engine.ops import LastAxisMean, full

DTYPES = {"float32": ms.float32, "float16": ms.float16, "bfloat16": ms.bfloat16}


class _SeedOnly(Initializer):
    """Stands in for Normal(0.02) while a model whose every weight is about to be loaded is built
    (`CausalLM(..., random_init=False)`): it draws the one seed Normal draws from NumPy's global
    generator, so whatever is initialised afterwards (LoRA's A matrices) gets the values it always
    got, and fills zeros instead of sampling (the 25M model: 0.85 s of a 1.4 s load)."""

    def _initialize(self, arr):
        np.random.randint(low=1, high=1 << 63, dtype=np.int64)  # as mindspore's initializer._numpy_seed
        arr.fill(0)


def weight_init(random_init: bool) -> Initializer:
    """Each weight's initializer: sampled, or (random_init=False) zeros that keep the seed draws."""
    return Normal(0.02) if random_init else _SeedOnly()


@dataclass(frozen=True)
class Precision:
    """Parameter dtypes of a model whose matrices are stored in a different dtype than it computes
    in: LoRA on the CPU with model.dtype bfloat16 | float16 keeps the frozen Dense weights and the
    embedding in 16 bits (`weights`) and computes in float32 (`compute`: activations, norms,
    biases, LoRA adapters). The blocks pass it down where they pass a dtype; `compute_dtype` and
    `weight_dtype` read either."""
    compute: ms.Type
    weights: ms.Type


def compute_dtype(dtype):
    """The dtype a block computes in and keeps its norms and biases in (a dtype or a Precision)."""
    return dtype.compute if isinstance(dtype, Precision) else dtype


def weight_dtype(dtype):
    """The dtype of a block's matrices (a dtype or a Precision)."""
    return dtype.weights if isinstance(dtype, Precision) else dtype


class FrozenMatmul(nn.Cell):
    """x (N, in) · Wᵀ for a frozen weight W (out, in) stored in 16 bits, in x's float32, with no
    gradient for W. With core.engine.fused's kernels (`fused`, set by `CausalLM.use_frozen_kernels`) W is
    converted a block at a time inside the product and again inside its backward: no float32 copy
    of W exists. Without them MindSpore's Cast upcasts W whole; the CPU runtime schedules a Cast of a
    weight as soon as the step starts (it depends on nothing else), so every layer's copy is held
    at once: correct, but no memory saved (measured)."""

    def __init__(self):
        super().__init__()
        self.matmul_bt = ops.MatMul(transpose_b=True)
        self.matmul = ops.MatMul()
        self.cast = ops.Cast()
        self.zeros_like = ops.ZerosLike()
        self.fused = None  # core.engine.fused.FusedFrozenWeights

    def construct(self, x, w):
        if self.fused is not None:
            return self.fused.matmul(x, w)  # (N, out)
        return self.matmul_bt(x, self.cast(w, ms.float32))

    def bprop(self, x, w, out, dout):
        if self.fused is not None:
            return self.fused.matmul_backward(dout, w), self.zeros_like(w)  # dx (N, in); W frozen
        return self.matmul(dout, self.cast(w, ms.float32)), self.zeros_like(w)


class Dense(nn.Dense):
    """nn.Dense (weight (out, in), bias (out,)) whose weight may be stored in 16 bits while it
    computes in float32 (`Precision`): then the bias is float32 and the product a FrozenMatmul."""

    def __init__(self, in_features: int, out_features: int, bias: bool, dtype, random_init: bool = True):
        storage, compute = weight_dtype(dtype), compute_dtype(dtype)
        super().__init__(in_features, out_features, weight_init=weight_init(random_init), bias_init="zeros",
                         has_bias=bias, dtype=storage)
        self.frozen = None
        self.amp = None  # AMP O1 (`use_amp_o1`): the 16-bit dtype this product runs in
        if storage != compute:
            self.frozen = FrozenMatmul()
            if bias:
                self.bias = Parameter(initializer("zeros", (out_features,), compute), name="bias")

    def construct(self, x):
        if self.amp is not None:
            return amp_dense(self, x, self.amp)
        if self.frozen is None:
            return super().construct(x)
        shape = x.shape
        out = self.frozen(x.reshape(-1, shape[-1]), self.weight)  # (N, out)
        if self.has_bias:
            out = self.bias_add(out, self.bias)
        return out.reshape(shape[:-1] + (self.out_channels,))


def amp_dense(cell: nn.Dense, x, dtype):
    """AMP O1 for one Dense layer: x and the weight cast to `dtype` (float16), the product (and
    bias) in it, the result cast back to x's dtype, so everything around the projections (norms,
    rotary, attention, the KV cache's concatenation, the loss) stays float32. MindSpore's own O1
    rewrites every construct's source instead (mindspore.rewrite: it writes ./rewritten_network/,
    hoists lazy imports, and failed on this model)."""
    shape = x.shape
    out = cell.matmul(ops.cast(x.reshape(-1, shape[-1]), dtype), ops.cast(cell.weight, dtype))
    if cell.has_bias:
        out = cell.bias_add(out, ops.cast(cell.bias, dtype))
    return ops.cast(out, x.dtype).reshape(shape[:-1] + (cell.out_channels,))


def use_amp_o1(model: nn.Cell, dtype) -> int:
    """AMP O1: every Dense layer (the projections, LoRA layers and an untied LM head) computes in
    `dtype`; returns how many. Call before the first compile."""
    count = 0
    for _, cell in model.cells_and_names():
        if isinstance(cell, nn.Dense) and hasattr(cell, "amp"):
            cell.amp = dtype
            count += 1
    return count


def dense(in_features: int, out_features: int, bias: bool, dtype, random_init: bool = True) -> nn.Dense:
    """A Dense layer (`Dense`), as every block of core.engine.model and core.engine.moe builds its projections."""
    return Dense(in_features, out_features, bias, dtype, random_init)


class Embedding(nn.Cell):
    """Token embedding whose parameter is called `weight`, as in Hugging Face. A 16-bit table of a
    float32 model (`Precision`) returns float32 rows: MindSpore's CPU Gather has no bf16 kernel,
    so core.engine.fused's gather kernel reads the rows (`gather`, set by `CausalLM.use_upcast`), else the
    table is cast whole (correct, a float32 copy of the vocabulary per call)."""

    def __init__(self, vocab_size: int, hidden_size: int, dtype=ms.float32, random_init: bool = True):
        super().__init__()
        self.weight = Parameter(initializer(weight_init(random_init), (vocab_size, hidden_size), weight_dtype(dtype)),
                                name="weight")
        self.compute = compute_dtype(dtype)
        self.upcast_rows = weight_dtype(dtype) != self.compute
        self.gather = None

    def construct(self, input_ids):
        if not self.upcast_rows:
            return ops.gather(self.weight, input_ids, 0)
        if self.gather is not None:
            return self.gather(self.weight, input_ids)  # (B, T, hidden) float32
        return ops.gather(ops.cast(self.weight, self.compute), input_ids, 0)


class RMSNorm(nn.Cell):
    """x / rms(x) · weight, normalised in float32 and cast back (as Hugging Face does). With
    `offset` (Gemma) the weight is stored zero-centred and applied as 1 + weight."""

    def __init__(self, size: int, eps: float, dtype=ms.float32, offset: bool = False):
        super().__init__()
        self.weight = Parameter(initializer("zeros" if offset else "ones", (size,), compute_dtype(dtype)),
                                name="weight")
        self.eps = eps
        self.offset = offset
        self.mean = LastAxisMean(size)
        self.eps_tensor = Tensor([eps], ms.float32)
        self.fused = None  # core.engine.fused: the CPU kernel (forward and backward in one pass each)

    def construct(self, x, expand=True):
        """expand=False (decoding steps, op by op) leaves the broadcasts to the Mul kernels."""
        dtype = x.dtype
        weight = self.weight + 1 if self.offset else self.weight
        if expand and self.fused is not None and dtype == ms.float32:
            return self.fused(x, weight, self.eps_tensor)[0]
        x32 = ops.cast(x, ms.float32)
        scale = ops.rsqrt(self.mean(ops.square(x32), dtype == ms.float32) + self.eps)
        if expand:  # explicit broadcasts (see core.engine.ops.full), in the order Hugging Face computes: (x·r)·w
            scale, weight = full(scale, x.shape), full(weight, x.shape)
        return weight * ops.cast(x32 * scale, dtype)
