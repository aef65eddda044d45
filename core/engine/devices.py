"""The device a worker runs on, in one place, and what runs there that the CPU does not (issue 30).

`target()` is the one place the engine reads MindSpore's device target; the functions that choose a
path take the device from it (or as an argument: `core.spec.device_paths`, MindSpore-free). Tests fake
"gpu" or "ascend" with `faked(...)`, which changes what `target()` answers and nothing else, so a
model built inside it takes the device's path on the CPU.

What the devices get (`enable_kernels`, called by `core.train` where the CPU gets `core.engine.fused`):
- Ascend: attention through MindSpore's FlashAttentionScore (`FlashAttention`), causal by its
  sparse mode, no mask tensor, where `core.spec.device_paths.attention_path` allows it: an Atlas
  A2/A3 chip (the SoC read by `soc_version`, as the bf16 rule reads it), half-precision attention,
  a head size that is a multiple of 16.
- GPU and Ascend: the LM head and its cross-entropy in chunks (`ChunkedHeadLoss`), or the
  cross-entropy alone in chunks on existing logits (`ChunkedLogitsLoss`): no (B, T, vocab)
  softmax or one-hot.
- data parallel with loss scaling: the overflow flag summed over the ranks before a step is skipped
  (`overflow_reducer`), as MindSpore's own loss-scale cell does (mindspore/nn/wrap/loss_scale.py:
  `self.allreduce(flag_sum)`); `amp.all_finite` alone reads this rank's status only.
- the device's total memory (`total_memory_mb`), its SoC (`soc_version`), an allocator's
  out-of-memory figures (`memory_figures`) and the fit check of the estimate against the device
  (`fit_check`), said whatever its answer (over, fits, or why the memory is unknown).
- `injected_overflow`: a test's fault (MINDTUNE_TEST_OVERFLOW_AT=rank:step), one rank's gradients
  overflowing at one step, so tests/device sees every rank skip it.
"""
from __future__ import annotations

import contextlib
import os

import numpy as np

import mindspore as ms
from mindspore import Tensor, nn, ops

from core.spec.device_paths import (LOSS_CHUNK_TOKENS, TARGETS, attention_dtype, attention_path, bf16_problem,
                               head_in_loss)
from core.spec.config import ConfigError
from core.spec.messages import Message
from core.run.records import EventRecord
from core.engine.fused import enable as enable_fused
from core.spec.memory import estimate_memory
from core.engine.ops import apply_rotary
from core.engine.target import target

# ---- attention ------------------------------------------------------------------------------------

# FlashAttentionScore's compressed causal mask: sparse_mode 2 (leftUpCausal) takes this (2048, 2048)
# matrix, 1 = discard (mindspore/ops/operations/manually_defined/ops_def.py, flash_attention_score)
CAUSAL_SPARSE_MODE = 2
_CAUSAL_MASK = np.triu(np.ones((2048, 2048), np.uint8), 1)


class FlashAttention(nn.Cell):
    """A layer's attention through `ops.flash_attention_score`, with the interface of core.engine.fused's
    attention op (`Attention.fused`): q (B, T, H, D), k and v (B, T, KV, D) as projected, the mask,
    RoPE tables cos/sin (B|1, 1, T, R) -> out (B, T, H, D), None, rotated k (B, T, KV, D).

    RoPE is applied here with `core.engine.ops.apply_rotary` (the tables moved to the heads' layout), then
    the kernel runs in "BSND" layout with grouped-query heads as they are (N2 divides N1). Training
    and evaluation pass mask None: the causal mode masks (right padding only ever hides keys after
    a query, which the causal mode hides anyway). The cached prefill of generation passes its
    additive mask (left padding), which goes in as the kernel's full attn_mask (sparse_mode 0).
    `kernel`: the attention function (default MindSpore's, Ascend-only); a CPU test passes a
    composed reference of the same signature to check everything around it."""

    def __init__(self, scale: float | None = None, interleaved: bool = False, kernel=None,
                 dtypes=(ms.float16, ms.bfloat16)):
        super().__init__()
        self.scale, self.interleaved = scale, interleaved
        self.kernel = kernel if kernel is not None else ops.flash_attention_score
        self.dtypes = tuple(dtypes)  # what Attention.uses_kernel accepts
        self.causal = Tensor(_CAUSAL_MASK)
        self.needs_mask = False  # CausalLM.construct builds no mask for a model whose layers all run this

    def construct(self, q, k, v, mask, cos, sin, segment_ids=None):
        heads, d = q.shape[2], q.shape[3]
        scale = d ** -0.5 if self.scale is None else self.scale
        cos, sin = cos.transpose(0, 2, 1, 3), sin.transpose(0, 2, 1, 3)  # (B|1, T, 1, R)
        q = apply_rotary(q, cos, sin, self.interleaved, False)
        k = apply_rotary(k, cos, sin, self.interleaved, False)
        if mask is None:
            out = self.kernel(q, k, v, heads, attn_mask=self.causal, scalar_value=scale, input_layout="BSND",
                              sparse_mode=CAUSAL_SPARSE_MODE)
        else:  # (B|1, 1, T, S) additive -> uint8, 1 where masked
            out = self.kernel(q, k, v, heads, attn_mask=ops.cast(mask < 0, ms.uint8), scalar_value=scale,
                              input_layout="BSND", sparse_mode=0)
        return out, None, k


def flash_variants(packed: bool, dtype: str, head_dim: int, soc: str | None):
    """`CausalLM.use_kernels`' attention factory on Ascend: a FlashAttention per layer variant, or
    LookupError with `core.spec.device_paths.attention_path`'s reason (the chip `soc`, the dtype, the
    head size `head_dim`, the layer's needs, packing)."""
    def build(**needs):
        path, why = attention_path("ascend", dtype, head_dim=head_dim, soc=soc, needs=needs, packed=packed)
        if path != "flash":
            raise LookupError(why)
        return FlashAttention(needs.get("scale"), needs.get("rotary_style") == "interleaved")
    return build


# ---- the loss in chunks ---------------------------------------------------------------------------
# A Cell with a bprop compiles under jit only when its construct and bprop call no methods of its own,
# no sub-Cells and no functional ops, only primitives (MindSpore 2.10: "The parameters number of the
# function is 3, but the number of provided arguments is 2"; "func graph is empty" for builtins such
# as min()): the chunks are written out inline.
#
# The chunks are ordered: everything a chunk computes waits (Depend) for the previous chunk's results,
# so the graph cannot run the chunks side by side and keep every chunk's (chunk, vocab) blocks at once
# (left free, MindSpore's scheduler ran every chunk's tiled row weights first, and held a block per
# chunk). No binary op meets a (chunk, vocab) block with a (chunk, 1) operand: the log-sum-exp comes
# from LogSoftmax, the row weights are tiled to the block first and the one-hot is a scatter, because
# MindSpore's CPU kernels keep 16 bytes of indices per output element of a broadcast for as long as
# the graph lives (core.engine.ops.full). Measured on the CPU (tests/core/chunked_loss_probe.py: 4,096
# rows, vocabulary 16,384, 8 chunks of a 32 MB block; the peak RSS growth of one compiled forward and
# backward): 167-176 MB, against 1,033 MB for the unchunked loss; with the broadcasts 3,888 MB; without
# them but unordered 592 MB, with only the rows ordered 367 MB.

class _Chunks(nn.Cell):
    """The primitives of a chunked cross-entropy (see above)."""

    def __init__(self, chunk: int):
        super().__init__()
        self.chunk = int(chunk)
        self.cast, self.softmax, self.log_softmax = ops.Cast(), ops.Softmax(-1), ops.LogSoftmax(-1)
        self.matmul, self.matmul_bt, self.matmul_at = ops.MatMul(), ops.MatMul(transpose_b=True), ops.MatMul(transpose_a=True)
        self.maximum, self.ge, self.expand = ops.Maximum(), ops.GreaterEqual(), ops.ExpandDims()
        self.concat0, self.slice, self.reshape, self.add = ops.Concat(0), ops.Slice(), ops.Reshape(), ops.Add()
        self.zeros_like, self.depend, self.tile = ops.ZerosLike(), ops.Depend(), ops.Tile()
        self.stack, self.gather = ops.Stack(-1), ops.GatherD()
        self.scatter_add = ops.TensorScatterElements(axis=1, reduction="add")


class ChunkedHeadLoss(_Chunks):
    """The LM head and its cross-entropy, `LOSS_CHUNK_TOKENS` rows at a time (the device's
    `CausalLM.head_loss`): hidden (N, h), weight (V, h), targets (N,) int32 (below 0: ignored) ->
    (N, 2): each row's NLL (0 where ignored) and log-sum-exp, as core.engine.fused's head kernel returns
    them. The backward recomputes each chunk's logits: one chunk's (chunk, V) float32 blocks (logits,
    softmax, the gradient) exist at a time, in order (see above), no (N, V) tensor at all. The product
    runs in the weight's dtype, the logits in float32 (as transformers upcasts them).
    `weight_grad=False` (a frozen head) returns a zero gradient for the weight; compiled, the graph
    then drops its products."""

    def __init__(self, chunk: int = LOSS_CHUNK_TOKENS, weight_grad: bool = True):
        super().__init__(chunk)
        self.weight_grad = weight_grad

    def construct(self, hidden, weight, targets):
        n, width = hidden.shape
        chunk = self.chunk
        parts, done = (), targets
        for start in range(0, n, chunk):
            size = chunk if start + chunk <= n else n - start
            rows = self.depend(self.slice(hidden, (start, 0), (size, width)), done)  # after the previous chunk
            logits = self.cast(self.matmul_bt(self.cast(rows, weight.dtype), weight), ms.float32)
            picked = self.slice(targets, (start,), (size,))
            index = self.expand(self.maximum(picked, 0), -1)  # (C, 1)
            chosen_logp = self.reshape(self.gather(self.log_softmax(logits), 1, index), (size,))
            lse = self.reshape(self.gather(logits, 1, index), (size,)) - chosen_logp  # logit − log p = log Σ exp
            done = self.stack((-chosen_logp * self.cast(self.ge(picked, 0), ms.float32), lse))
            parts = parts + (done,)
        return self.concat0(parts)

    def bprop(self, hidden, weight, targets, out, dout):
        # d(Σ d_nll·nll + d_lse·lse)/d logits = softmax·(d_nll·valid + d_lse) − onehot·d_nll·valid
        n, width = hidden.shape
        vocab = weight.shape[0]
        chunk = self.chunk
        dh, dw = (), self.zeros_like(weight)
        done = dout
        for start in range(0, n, chunk):
            size = chunk if start + chunk <= n else n - start
            # everything of this chunk after the previous one (also what the rows do not feed: the tiled
            # row weights, scheduled first otherwise, all chunks' at once)
            rows = self.depend(self.slice(hidden, (start, 0), (size, width)), done)
            picked = self.depend(self.slice(targets, (start,), (size,)), done)
            d_nll = self.depend(self.slice(dout, (start, 0), (size, 1)), done)  # (C, 1)
            d_lse = self.depend(self.slice(dout, (start, 1), (size, 1)), done)
            logits = self.cast(self.matmul_bt(self.cast(rows, weight.dtype), weight), ms.float32)
            w = d_nll * self.expand(self.cast(self.ge(picked, 0), ms.float32), -1)  # (C, 1)
            g = self.softmax(logits) * self.tile(w + d_lse, (1, vocab))
            g = self.cast(self.scatter_add(g, self.expand(self.maximum(picked, 0), -1), -w), weight.dtype)
            part = self.cast(self.matmul(g, weight), hidden.dtype)
            dh = dh + (part,)
            # (an `if` here fails to compile under jit, as above; unused, the graph drops these products)
            dw = self.add(dw, self.matmul_at(g, self.cast(rows, weight.dtype)))  # (V, h)
            done = self.depend(part, dw) if self.weight_grad else part  # the next chunk after both products
        return self.concat0(dh), dw if self.weight_grad else self.zeros_like(weight), self.zeros_like(targets)


class ChunkedLogitsLoss(_Chunks):
    """The cross-entropy of existing logits (B, T, V) float32 against targets (B, T) -> nll (B, T),
    logsumexp (B, T), with the interface of core.engine.fused's loss op (`CausalLM.fused_loss`). Softmax
    and the gradient's blocks exist for one chunk of rows at a time, in order (see above); only the
    gradient itself is logits-sized."""

    def __init__(self, chunk: int = LOSS_CHUNK_TOKENS):
        super().__init__(chunk)

    def construct(self, logits, targets):
        b, t, v = logits.shape
        n, chunk = b * t, self.chunk
        flat, labels = self.reshape(logits, (n, v)), self.reshape(targets, (n,))
        parts, done = (), labels
        for start in range(0, n, chunk):
            size = chunk if start + chunk <= n else n - start
            rows = self.depend(self.slice(flat, (start, 0), (size, v)), done)  # after the previous chunk
            picked = self.slice(labels, (start,), (size,))
            index = self.expand(self.maximum(picked, 0), -1)
            chosen_logp = self.reshape(self.gather(self.log_softmax(rows), 1, index), (size,))
            lse = self.reshape(self.gather(rows, 1, index), (size,)) - chosen_logp
            done = self.stack((-chosen_logp * self.cast(self.ge(picked, 0), ms.float32), lse))
            parts = parts + (done,)
        stats = self.concat0(parts)
        return (self.reshape(self.slice(stats, (0, 0), (n, 1)), (b, t)),
                self.reshape(self.slice(stats, (0, 1), (n, 1)), (b, t)))

    def bprop(self, logits, targets, out, dout):
        b, t, v = logits.shape
        n, chunk = b * t, self.chunk
        flat, labels = self.reshape(logits, (n, v)), self.reshape(targets, (n,))
        d_nll, d_lse = self.reshape(dout[0], (n, 1)), self.reshape(dout[1], (n, 1))
        parts, done = (), d_nll
        for start in range(0, n, chunk):
            size = chunk if start + chunk <= n else n - start
            rows = self.depend(self.slice(flat, (start, 0), (size, v)), done)  # all of it after the previous chunk
            picked = self.depend(self.slice(labels, (start,), (size,)), done)
            w = self.slice(d_nll, (start, 0), (size, 1)) * self.expand(self.cast(self.ge(picked, 0), ms.float32), -1)
            g = self.softmax(rows) * self.tile(w + self.depend(self.slice(d_lse, (start, 0), (size, 1)), done), (1, v))
            done = self.scatter_add(g, self.expand(self.maximum(picked, 0), -1), -w)
            parts = parts + (done,)
        return self.reshape(self.concat0(parts), (b, t, v)), self.zeros_like(targets)


def chunked_loss_variants(**needs):
    """`CausalLM.use_kernels`' loss factory on devices: the final soft-cap stays composed."""
    if needs:
        raise LookupError(f"the chunked loss does not apply {', '.join(sorted(needs))}")
    return ChunkedLogitsLoss()


def _head_cell(model):
    return model.model.embed_tokens if model.tied else model.lm_head


def enable_kernels(model, threads: int | None = None, amp_level: str = "O0", packed: bool = False,
                   compute_dtype: str = "float16") -> str:
    """Route `model` through this device's kernels: on the CPU core.engine.fused's (its answer returned);
    on GPU/Ascend the chunked loss, the head inside it where `core.spec.device_paths.head_in_loss`
    allows, and on Ascend FlashAttention where `attention_path` allows (for this chip, `soc_version`).
    Returns one line saying what runs and what stays composed and why, as core.engine.fused.enable
    does (the setup event's `kernels`)."""
    device = target()
    if device == "cpu":
        return enable_fused(model, threads, amp_level)
    model_dtype = {ms.float32: "float32", ms.float16: "float16", ms.bfloat16: "bfloat16"}[model.param_dtype]
    dtype = attention_dtype(amp_level, compute_dtype, model_dtype)
    soc = soc_version()
    head_dim = model.args.head_dim
    attention = flash_variants(packed, dtype, head_dim, soc) if device == "ascend" else None
    composed = model.use_kernels(attention=attention, loss=chunked_loss_variants)
    head = _head_cell(model)
    parts = []
    if head_in_loss(device, model.final_softcap, hasattr(head, "lora_a"), False):
        model.head_loss = ChunkedHeadLoss(weight_grad=bool(model.head_weight().requires_grad))
        parts.append("LM head + loss chunked (no logits)")
    else:
        parts.append("loss chunked on the logits")
    if model.fused_attention:
        parts.append("attention: FlashAttentionScore")
    else:
        why = attention_path(device, dtype, head_dim=head_dim, soc=soc, packed=packed)[1]
        composed = [why] + [c for c in composed if c != why and not c.startswith("final-logit")]
    chip = f" ({soc})" if device == "ascend" else ""
    return f"{device}{chip}: " + ", ".join(parts) + ("; composed: " + "; ".join(composed) if composed else "")


# ---- the device's figures --------------------------------------------------------------------------

def total_memory_mb(device: str | None = None) -> float | None:
    """The device's total memory in MB (GPU/Ascend: `mindspore.hal.get_device_properties`,
    mindspore/hal/device.py; on Ascend it is 0 until the device is initialised, then None here),
    or None on the CPU, whose RAM core.spec.memory reads itself."""
    device = device or target()
    if device == "cpu":
        return None
    props = ms.hal.get_device_properties(0, TARGETS[device])
    total = getattr(props, "total_memory", 0) or 0
    return total / 2**20 if total > 0 else None


def _device_total_mb(device: str) -> tuple[float | None, Message | None]:
    """(total MB, None) or (None, why not): on Ascend, where MindSpore reads 0 before the device is
    initialised, a first operator runs and it is asked again."""
    try:
        total = total_memory_mb(device)
        if total is None and device == "ascend":
            ops.add(Tensor(1.0, ms.float32), Tensor(1.0, ms.float32)).asnumpy()  # initialises the device
            total = total_memory_mb(device)
    except Exception as exc:  # noqa: BLE001 — the check says why it has no figure, it does not fail the run
        return None, Message("memory.no_properties", error=f"{type(exc).__name__}: {exc}")
    return (total, None) if total is not None else (None, Message("memory.not_initialised"))


def fit_check(config, model_args, seq_len: int, total_mb: float | None = None) -> EventRecord | None:
    """The estimate of `core.spec.memory` for this run against the GPU/Ascend device's total memory,
    as an event to log: a warning when it is more, an info line when it fits, a warning saying why
    when the device's memory cannot be read (never nothing). None on the CPU, which core.train and
    the console check against the RAM before launch. `total_mb`: the device's, default asked."""
    device = config.parallel.device
    if device == "cpu":
        return None
    why = None
    if total_mb is None:
        total_mb, why = _device_total_mb(device)
    estimate = estimate_memory(config, model_args, seq_len, device_memory_mb=total_mb, soc=soc_version())
    needed = f"{estimate.total_mb:,.0f}"
    if total_mb is None:
        return EventRecord(event="warning", message=Message("memory.fit_unknown", device=device, why=why,
                                                            needed=needed))
    has = f"{total_mb:,.0f}"
    if estimate.fits:
        return EventRecord(event="info", message=Message("memory.fit_ok", device=device, needed=needed, has=has))
    return EventRecord(event="warning", message=Message("memory.fit_over", device=device, needed=needed, has=has))


def soc_version() -> str | None:
    """The Ascend SoC MindSpore reports ("ascend910" is the 910A, "ascend910b" ...), None elsewhere
    (mindspore/train/model.py reads it the same way)."""
    if target() != "ascend":
        return None
    from mindspore._c_expression import MSContext
    return MSContext.get_instance().get_ascend_soc_version()


def check_bf16(config, soc: str | None = None) -> None:
    """Refuse bf16 by name on a device without it (`core.spec.device_paths.bf16_problem`); `soc`:
    default `soc_version()`."""
    # what computes in bf16: the model's dtype, except LoRA's 16-bit frozen weights on the CPU, which
    # are upcast to float32 (Config.compute_dtype), and AMP's low-precision dtype
    uses = config.compute_dtype == "bfloat16" or (config.precision.amp_level != "O0"
                                                  and config.precision.compute_dtype == "bfloat16")
    if not uses:
        return
    problem = bf16_problem(target(), soc if soc is not None else soc_version(), uses)
    if problem:
        raise ConfigError(Message("device.bf16_refused", dtype=config.model.dtype,
                                  compute_dtype=config.precision.compute_dtype, reason=problem))


def memory_figures() -> str:
    """This device's allocator figures for an out-of-memory report, or '' when unavailable."""
    try:
        used = ms.runtime.max_memory_allocated() / 2**20
        reserved = ms.runtime.max_memory_reserved() / 2**20
        total = total_memory_mb()
    except Exception:  # noqa: BLE001 — the report must not fail on its figures
        return ""
    return (f"peak allocated {used:,.0f} MB, reserved {reserved:,.0f} MB"
            + (f" of the device's {total:,.0f} MB" if total else ""))


# ---- data parallel ---------------------------------------------------------------------------------

class OverflowReducer(nn.Cell):
    """finite (bool) on this rank -> finite on every rank: the ranks' overflow flags summed by an
    AllReduce, finite only where no rank overflowed (mindspore/nn/wrap/loss_scale.py reduces its flag
    the same way). `reduce` is the collective (ops.AllReduce(); a test passes another rank's view)."""

    def __init__(self, reduce=None):
        super().__init__()
        self.reduce = reduce if reduce is not None else ops.AllReduce()

    def construct(self, finite):
        overflow = 1.0 - ops.cast(finite, ms.float32)
        return self.reduce(overflow.reshape((1,))).reshape(()) < 0.5


def overflow_reducer(world: int) -> OverflowReducer | None:
    """The overflow flag's reducer for `world` ranks (None for one)."""
    return OverflowReducer() if world > 1 else None


# ---- a test's fault: one rank's gradients overflow at one step ---------------------------------------

ENV_TEST_OVERFLOW_AT = "MINDTUNE_TEST_OVERFLOW_AT"  # "<rank>:<step>", tests only (tests/device, tests/core)
OVERFLOWING_SCALE = float("inf")  # every gradient of a loss scaled by it is inf or NaN, in fp16 and float32 alike


@contextlib.contextmanager
def injected_overflow(loss_scaler, rank: int, step: int):
    """Around one optimizer step: when MINDTUNE_TEST_OVERFLOW_AT names this rank and step (1-based) and
    the run scales its loss (fp16), this rank's loss scale is made infinite, so that its gradients
    overflow (the loss the step reports is the unscaled one, finite), and afterwards set to what the
    other ranks' scalers hold then (their scale halved by the overflow every rank skips, as
    `OverflowReducer` makes them). Anything else: nothing."""
    wanted = os.environ.get(ENV_TEST_OVERFLOW_AT, "")
    if loss_scaler is None or wanted != f"{rank}:{step}":
        yield
        return
    # ops.assign, not set_data: the compiled step holds the parameter's memory (set_data after the first
    # step had no effect on it, measured)
    before = float(loss_scaler.scale_value.asnumpy())
    ops.assign(loss_scaler.scale_value, Tensor(OVERFLOWING_SCALE, ms.float32))
    try:
        yield
    finally:
        factor = float(getattr(loss_scaler, "scale_factor", 2.0))
        ops.assign(loss_scaler.scale_value, Tensor(max(before / factor, 1.0), ms.float32))
