"""The few MindSpore operations `core.engine.model` needs in a form that is fast on MindSpore 2.10's CPU
kernels, so the model itself reads like a reference transformer. Each workaround says what it
replaces and what was measured; on other devices they compute the same values.
"""
from __future__ import annotations

import numpy as np

import mindspore as ms
from mindspore import Tensor, nn, ops

from core.spec.device_paths import matmul_reductions
from core.engine.target import target

MASK_MIN = float(np.finfo(np.float32).min)  # masked scores: finite, so a fully masked row stays finite


def _matmul_reductions() -> bool:
    """Whether this process's device takes the MatMul workaround (read when a cell is built)."""
    return matmul_reductions(target())


def full(x, shape):
    """`x` broadcast to `shape` as a tensor of its own, before it meets a tensor of that shape.
    MindSpore 2.10's CPU kernels for a binary op whose inputs differ in shape (Mul, Add, Sub, ...)
    keep two 8-byte indices per output element for as long as the compiled graph lives: 16 bytes
    per element, 4× a float32 output, for every such op in the forward and the backward
    (measured: ~190 MB per layer of the 25M model at batch 8 × 256). BroadcastTo keeps nothing, and
    ops between equal shapes keep nothing. `shape` is static in graph mode, so the test costs
    nothing at run time."""
    if x.shape == shape:
        return x
    return ops.broadcast_to(x, shape)


class LastAxisMean(nn.Cell):
    """Mean over the last axis, keeping it (x (..., n) -> (..., 1)). In float32 it is a MatMul
    against a 1/n column: MindSpore's CPU ReduceMean (and its gradient) over the hidden axis cost
    ~4x more inside the train step. Under AMP, MindSpore casts a MatMul's inputs to the compute
    dtype, so a float16 input takes ReduceMean and the mean stays in float32 when x is.
    On GPU/Ascend ReduceMean always (`core.spec.device_paths.matmul_reductions`): Ascend's default
    precision mode may run a float32 MatMul in float16, where a mean of squares can overflow."""

    def __init__(self, width: int):
        super().__init__()
        self.matmul = ops.MatMul()
        self.column = Tensor(np.full((width, 1), 1.0 / width, np.float32))  # (n, 1)
        self.by_matmul = _matmul_reductions()

    def construct(self, x, x_is_float32):
        if x_is_float32 and self.by_matmul:
            return self.matmul(x.reshape(-1, x.shape[-1]), self.column).reshape(x.shape[:-1] + (1,))
        return ops.mean(x, -1, keep_dims=True)


class Softmax(nn.Cell):
    """Softmax over the last axis; its backward, (dy − Σ dy·y)·y, takes the row sums as one MatMul
    against a ones column: MindSpore's CPU ReduceSum over a short last axis was the slowest part
    of the attention backward (profiled: ~3× the MatMul). On GPU/Ascend a ReduceSum (see
    LastAxisMean)."""

    def __init__(self):
        super().__init__()
        self.softmax, self.matmul, self.ones, self.reshape = ops.Softmax(-1), ops.MatMul(), ops.Ones(), ops.Reshape()
        self.reduce_sum = ops.ReduceSum(keep_dims=True)
        self.by_matmul = _matmul_reductions()

    def construct(self, x):
        return self.softmax(x)

    def bprop(self, x, out, dout):
        # primitives only: functional ops inside a bprop fail to compile under jit (MindSpore 2.10)
        width = x.shape[-1]
        if self.by_matmul:
            prod = self.reshape(out * dout, (-1, width))
            row_sum = self.reshape(self.matmul(prod, self.ones((width, 1), prod.dtype)), x.shape[:-1] + (1,))
        else:
            row_sum = self.reduce_sum(out * dout, -1)
        return ((dout - full(row_sum, dout.shape)) * out,)


def rotate_half(x):
    """(x₁, x₂) -> (−x₂, x₁) over the two halves of the last axis (Llama-style RoPE)."""
    half = x.shape[-1] // 2
    return ops.cat((-x[..., half:], x[..., :half]), -1)


def rotate_pairs(x):
    """(x₀, x₁, x₂, x₃, ...) -> (−x₁, x₀, −x₃, x₂, ...): interleaved RoPE (GLM-4)."""
    pairs = x.reshape(x.shape[:-1] + (x.shape[-1] // 2, 2))
    return ops.stack((-pairs[..., 1], pairs[..., 0]), -1).reshape(x.shape)


def _pairwise(table):
    """(f₀ … fₙ, f₀ … fₙ) -> (f₀, f₀, f₁, f₁, …): a rope_table row as interleaved RoPE pairs it."""
    half = table[..., : table.shape[-1] // 2]
    return ops.stack((half, half), -1).reshape(table.shape)


def apply_rotary(x, cos, sin, interleaved: bool, expand: bool):
    """x·cos + rotate(x)·sin on the first cos.shape[-1] dims of x's last axis (partial rotary: the
    rest passes through). The tables are `rope_table`'s; interleaved RoPE pairs their frequencies
    as neighbours. `expand` broadcasts the tables to x's shape first (see `full`)."""
    width = cos.shape[-1]
    rest = None
    if width != x.shape[-1]:
        x, rest = x[..., :width], x[..., width:]
    if interleaved:
        cos, sin = _pairwise(cos), _pairwise(sin)
    if expand:
        cos, sin = full(cos, x.shape), full(sin, x.shape)
    rotated = x * cos + (rotate_pairs(x) if interleaved else rotate_half(x)) * sin
    if rest is None:
        return rotated
    return ops.cat((rotated, rest), -1)


def soft_cap(x, cap: float):
    """cap · tanh(x / cap): Gemma 2's soft-capping of attention scores and final logits."""
    return ops.tanh(x / cap) * cap


def gelu_tanh(x):
    """GELU with the tanh approximation (transformers' gelu_pytorch_tanh)."""
    return ops.gelu(x, approximate="tanh")


def rope_table(positions, inv_freq, dtype, scale: float = 1.0):
    """positions (B|1, T) int, inv_freq (1, R/2) -> cos, sin (B|1, 1, T, R) in `dtype`, each
    frequency twice as the two halves, cat(freqs, freqs), as transformers and the fused kernel
    lay them out for both RoPE styles; both multiplied by `scale` in float32 first where it is not
    1 (LongRoPE's attention factor)."""
    freqs = ops.expand_dims(ops.cast(positions, ms.float32), -1) * inv_freq  # (B, T, R/2)
    emb = ops.cat((freqs, freqs), -1)
    cos, sin = ops.cos(emb), ops.sin(emb)
    if scale != 1.0:
        cos, sin = cos * scale, sin * scale
    return ops.expand_dims(ops.cast(cos, dtype), 1), ops.expand_dims(ops.cast(sin, dtype), 1)
