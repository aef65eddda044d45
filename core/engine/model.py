"""A decoder-only transformer in MindSpore, composed from a family spec (`core.spec.families`) and a
checkpoint's numbers (`core.spec.model_args.ModelArgs`): RMSNorm (or Gemma's 1 + w) where the family's
layout puts norms, grouped-query attention with optional fused q/k/v, biases, QK-norm, soft-capped
scores and sliding windows, RoPE (default, linear, Llama-3 scaling; partial and interleaved), and a
gated MLP (SwiGLU or GeGLU, optionally one fused gate/up projection). Parameter names are Hugging
Face's own keys (`model.layers.0.self_attn.q_proj.weight`), so checkpoints map one to one (a
family's `KeyMap` covers the exceptions).

`CausalLM.construct` is the full-sequence forward used by training and evaluation (graph-mode
friendly; packed batches pass `position_ids` and `segment_ids`); `CausalLM.forward_cached` is the
incremental forward with a key/value cache used by `generate`. The CPU-specific workarounds live
in `core.engine.ops`; the fused CPU kernels (`core.engine.fused`) replace attention, the norms, the MLP gate and
the loss where they compute the same maths (`CausalLM.use_kernels`).
"""
from __future__ import annotations

import hashlib
import math

import mindspore as ms
from mindspore import Parameter, Tensor, nn, ops

from core.spec.model_args import ModelArgs, rope_attention_factor, rope_inverse_frequencies, rope_long_after
import core.engine.devices as devices
from core.spec.device_paths import explicit_broadcasts
from core.engine.layers import DTYPES, Embedding, FrozenMatmul, Precision, RMSNorm, dense
from core.engine.moe import SparseMoE
from core.engine.ops import MASK_MIN, Softmax, apply_rotary, full, gelu_tanh, rope_table, soft_cap


class Attention(nn.Cell):
    """Grouped-query self-attention of one layer, as its family and the checkpoint define it."""

    def __init__(self, args: ModelArgs, layer: int, dtype=ms.float32, random_init: bool = True):
        super().__init__()
        spec, h, d = args.spec, args.hidden_size, args.head_dim
        self.num_heads, self.num_kv_heads, self.head_dim = args.num_heads, args.num_kv_heads, d
        self.n_rep = args.num_heads // args.num_kv_heads
        q_width, kv_width = args.num_heads * d, args.num_kv_heads * d
        self.q_width, self.kv_width = q_width, kv_width
        self.fused_qkv = spec.fused_qkv
        if self.fused_qkv:
            self.qkv_proj = dense(h, q_width + 2 * kv_width, args.qkv_bias, dtype, random_init)
        else:
            self.q_proj = dense(h, q_width, args.qkv_bias, dtype, random_init)
            self.k_proj = dense(h, kv_width, args.qkv_bias, dtype, random_init)
            self.v_proj = dense(h, kv_width, args.qkv_bias, dtype, random_init)
        self.o_proj = dense(q_width, h, args.o_bias, dtype, random_init)
        self.qk_norm = spec.qk_norm  # "none" | "head" (over head_dim) | "projection" (over all heads)
        if self.qk_norm != "none":
            per_head = self.qk_norm == "head"
            self.q_norm = RMSNorm(d if per_head else q_width, args.rms_norm_eps, dtype, spec.norm == "rms_offset")
            self.k_norm = RMSNorm(d if per_head else kv_width, args.rms_norm_eps, dtype, spec.norm == "rms_offset")
        self.scale = args.scale
        self.softcap = args.attn_softcap
        self.rotary_dim = args.rotary_dim
        self.interleaved = spec.rotary_style == "interleaved"
        self.window = args.layer_window(layer)  # also in the mask; kept for the kernel's choice
        self.bmm_bt = ops.BatchMatMul(transpose_b=True)  # q·kᵀ without materialising kᵀ
        self.bmm = ops.BatchMatMul()
        self.softmax = Softmax()
        self.fused = None  # core.engine.fused: the CPU kernel for the full-sequence forward (see kernel_needs)
        self.explicit_broadcast = explicit_broadcasts(devices.target())  # core.engine.ops.full: the CPU only

    def kernel_needs(self) -> dict:
        """What this layer asks of a fused attention kernel beyond causal softmax(q·kᵀ/√D + mask)·v
        with half-style RoPE over the whole head (`CausalLM.use_kernels`): only what differs."""
        needs = {}
        if self.window is not None:  # the mask has it too; the kernel also skips the keys outside it
            needs["window"] = self.window
        if self.scale != self.head_dim ** -0.5:
            needs["scale"] = self.scale
        if self.softcap is not None:
            needs["softcap"] = self.softcap
        if self.rotary_dim != self.head_dim:
            needs["rotary_dim"] = self.rotary_dim
        if self.interleaved:
            needs["rotary_style"] = "interleaved"
        return needs

    def uses_kernel(self, dtype) -> bool:
        """Whether the fused op runs for inputs of `dtype`: core.engine.fused's in float32, a device's in
        the dtypes it lists (`core.engine.devices.FlashAttention.dtypes`)."""
        return self.fused is not None and dtype in getattr(self.fused, "dtypes", (ms.float32,))

    def project(self, x):
        """x (B, T, hidden) -> q (B, T, H·D), k and v (B, T, KV·D)."""
        if self.fused_qkv:
            qkv = self.qkv_proj(x)
            q_end, k_end = self.q_width, self.q_width + self.kv_width
            return qkv[..., :q_end], qkv[..., q_end:k_end], qkv[..., k_end:]
        return self.q_proj(x), self.k_proj(x), self.v_proj(x)

    def construct(self, x, cos, sin, mask, past_key=None, past_value=None, segment_ids=None):
        """x (B, T, hidden); cos/sin (B|1, 1, T, rotary_dim); mask (B|1, 1, T, S) additive float32;
        segment_ids (B, T) int32 of packed samples or None (the mask has them too; the fused kernel
        also skips the key blocks of other samples). Returns the output and this call's full
        keys/values (past + new) for the cache."""
        b, t, _ = x.shape
        expand = past_key is None
        q, k, v = self.project(x)
        if self.qk_norm == "projection":
            q, k = self.q_norm(q, expand), self.k_norm(k, expand)
        q = q.reshape(b, t, self.num_heads, self.head_dim)
        k = k.reshape(b, t, self.num_kv_heads, self.head_dim)
        v = v.reshape(b, t, self.num_kv_heads, self.head_dim)
        if self.qk_norm == "head":
            q, k = self.q_norm(q, expand), self.k_norm(k, expand)
        if expand and self.uses_kernel(q.dtype):
            # one kernel for RoPE, scores, mask, softmax and the weighted sum, forward and backward
            # (core/engine/fused.py); it reads the heads in place and returns the rotated keys. Keys and
            # values come back as (B, T, KV, D): forward_cached transposes them for the cache;
            # training never asks for them.
            out, _, k = self.fused(q, k, v, mask, cos, sin, segment_ids)  # (B, T, H, D), lse, (B, T, KV, D)
            return self.o_proj(out.reshape(b, t, self.num_heads * self.head_dim)), k, v
        q, k, v = q.transpose(0, 2, 1, 3), k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3)
        # q: (B, H, T, D); k, v: (B, KV, T, D)
        # the full-sequence forward (compiled for training and evaluation) broadcasts explicitly
        # (see core.engine.ops.full; no-ops when the caller already did); a decoding step with a cache runs
        # op by op, where every BroadcastTo is one more kernel launch per token (measured:
        # generation fell from 35 to 27 tokens/s with them) and saves nothing
        q = apply_rotary(q, cos, sin, self.interleaved, expand)
        k = apply_rotary(k, cos, sin, self.interleaved, expand)
        if past_key is not None:
            k = ops.cat((past_key, k), 2)
            v = ops.cat((past_value, v), 2)  # (B, KV, S, D), S = past + T
        # Grouped-query attention without repeating k/v: the n_rep query heads that share a kv
        # head are stacked along the sequence axis, (B, H, T, D) -> (B, KV, n_rep·T, D), so one
        # BatchMatMul per kv head serves them all (repeating k/v heads costs a broadcast copy forward
        # and a ReduceSum backward). The scale is applied to q (B·H·T·D values), not to the scores.
        s = k.shape[2]
        q = (q * self.scale).reshape(b, self.num_kv_heads, self.n_rep * t, self.head_dim)
        scores = self.bmm_bt(q, k).reshape(b, self.num_heads, t, s)  # (B, H, T, S)
        if expand and self.explicit_broadcast:
            mask = full(mask, scores.shape)
        scores = ops.cast(scores, ms.float32)  # capped, masked and normalised in float32, as in HF eager
        if self.softcap is not None:
            scores = soft_cap(scores, self.softcap)
        probs = ops.cast(self.softmax(scores + mask), v.dtype).reshape(b, self.num_kv_heads, self.n_rep * t, s)
        out = self.bmm(probs, v).reshape(b, self.num_heads, t, self.head_dim)  # (B, H, T, D)
        out = out.transpose(0, 2, 1, 3).reshape(b, t, self.num_heads * self.head_dim)
        return self.o_proj(out), k, v


class MLP(nn.Cell):
    """Gated MLP: down(act(gate(x)) · up(x)), act = SiLU (SwiGLU) or tanh-GELU (GeGLU); gate and up
    are one `gate_up_proj` (gate first) where the family stores them fused."""

    def __init__(self, args: ModelArgs, dtype=ms.float32, random_init: bool = True):
        super().__init__()
        h, i = args.hidden_size, args.intermediate_size
        self.intermediate = i
        self.fused_gate_up = args.spec.fused_gate_up
        if self.fused_gate_up:
            self.gate_up_proj = dense(h, 2 * i, args.mlp_bias, dtype, random_init)
        else:
            self.gate_proj = dense(h, i, args.mlp_bias, dtype, random_init)
            self.up_proj = dense(h, i, args.mlp_bias, dtype, random_init)
        self.down_proj = dense(i, h, args.mlp_bias, dtype, random_init)
        self.activation = args.activation
        self.fused = None  # core.engine.fused: the CPU kernel for silu(gate) · up

    def kernel_needs(self) -> dict:
        return {} if self.activation == "silu" else {"activation": self.activation}

    def construct(self, x):
        if self.fused_gate_up:
            gate_up = self.gate_up_proj(x)
            gate, up = gate_up[..., :self.intermediate], gate_up[..., self.intermediate:]
        else:
            gate, up = self.gate_proj(x), self.up_proj(x)
        if self.fused is not None and gate.dtype == ms.float32:
            return self.down_proj(self.fused(gate, up))
        if self.activation == "gelu_tanh":
            return self.down_proj(gelu_tanh(gate) * up)
        return self.down_proj(ops.silu(gate) * up)


def _mlp_class(args: ModelArgs, layer: int):
    """The MLP cell of decoder layer `layer`: a mixture of experts where the config makes it sparse
    (core/engine/moe.py; its construct returns (out, router_logits)), else the gated MLP."""
    if args.is_sparse(layer):
        return SparseMoE
    return MLP


class DecoderLayer(nn.Cell):
    """x = x + post(attention(pre(x))); x = x + post(mlp(pre(x))), with the family's norms (its
    `BlockLayout`; a name that is '' has no norm there). The norms carry their Hugging Face names."""

    def __init__(self, args: ModelArgs, layer: int, dtype=ms.float32, random_init: bool = True):
        super().__init__()
        spec = args.spec
        layout = spec.layout
        self.attn_pre, self.attn_post = layout.attn_pre, layout.attn_post
        self.mlp_pre, self.mlp_post = layout.mlp_pre, layout.mlp_post
        offset = spec.norm == "rms_offset"

        def add_norm(name):
            if name:
                setattr(self, name, RMSNorm(args.hidden_size, args.rms_norm_eps, dtype, offset))

        # created in the order the forward uses them, so parameters are listed as in transformers
        add_norm(self.attn_pre)
        self.self_attn = Attention(args, layer, dtype, random_init)
        add_norm(self.attn_post)
        add_norm(self.mlp_pre)
        self.sparse = args.is_sparse(layer)
        self.mlp = _mlp_class(args, layer)(args, dtype, random_init)
        add_norm(self.mlp_post)
        self.mask_index = 0  # which of the model's masks and RoPE tables the layer takes (CausalLM)
        self.rope_index = 0

    def norms(self) -> list[RMSNorm]:
        return [getattr(self, name) for name in (self.attn_pre, self.attn_post, self.mlp_pre, self.mlp_post) if name]

    def construct(self, x, cos, sin, mask, past_key=None, past_value=None, segment_ids=None):
        """Returns the layer's output, its keys and values (for the cache) and, for a sparse
        layer, the router's logits (B·T, experts) (None for a dense one)."""
        expand = past_key is None  # see Attention.construct
        h = getattr(self, self.attn_pre)(x, expand) if self.attn_pre else x
        h, k, v = self.self_attn(h, cos, sin, mask, past_key, past_value, segment_ids)
        if self.attn_post:
            h = getattr(self, self.attn_post)(h, expand)
        x = x + h
        h = self.mlp(getattr(self, self.mlp_pre)(x, expand) if self.mlp_pre else x)
        router_logits = None
        if self.sparse:
            h, router_logits = h
        if self.mlp_post:
            h = getattr(self, self.mlp_post)(h, expand)
        return x + h, k, v, router_logits


class DecoderModel(nn.Cell):
    """The transformer body; attribute names give Hugging Face's `model.*` parameter keys."""

    def __init__(self, args: ModelArgs, dtype=ms.float32, random_init: bool = True):
        super().__init__()
        self.embed_tokens = Embedding(args.vocab_size, args.hidden_size, dtype, random_init)
        self.layers = nn.CellList([DecoderLayer(args, n, dtype, random_init) for n in range(args.num_layers)])
        self.norm = RMSNorm(args.hidden_size, args.rms_norm_eps, dtype, args.spec.norm == "rms_offset")


class CausalLM(nn.Cell):
    """Decoder-only language model: input ids (B, T) -> float32 logits (B, T, vocab)."""

    def __init__(self, args: ModelArgs, dtype: str | ms.Type = "float32", random_init: bool = True,
                 storage_dtype: str | ms.Type | None = None):
        """random_init=False when every weight is loaded next (`core.engine.checkpoint.load_hf_model`):
        the weights start as zeros, and the random draws that follow are the same either way.
        storage_dtype (default: dtype) stores the Dense weights and the embedding in another dtype
        than the model computes in (`Precision`: frozen 16-bit weights of a float32 LoRA model)."""
        super().__init__()
        self.args = args
        self.param_dtype = DTYPES[dtype] if isinstance(dtype, str) else dtype
        storage = DTYPES[storage_dtype] if isinstance(storage_dtype, str) else storage_dtype or self.param_dtype
        self.storage_dtype = storage
        blocks_dtype = self.param_dtype if storage == self.param_dtype else Precision(self.param_dtype, storage)
        self.model = DecoderModel(args, blocks_dtype, random_init)
        self.tied = args.tie_word_embeddings
        if not self.tied:
            self.lm_head = dense(args.hidden_size, args.vocab_size, False, blocks_dtype, random_init)
        # logits against a 16-bit tied embedding: upcast per call (see FrozenMatmul)
        self.tied_frozen = FrozenMatmul() if self.tied and storage != self.param_dtype else None
        # the distinct windows and RoPE bases among the layers: one mask / table each per forward
        windows = [args.layer_window(n) for n in range(args.num_layers)]
        thetas = [args.layer_rope_theta(n) for n in range(args.num_layers)]
        self.windows = tuple(dict.fromkeys(windows))  # (None,) without sliding windows
        self.local_theta = next((th for th in thetas if th != args.rope_theta), None)
        for layer, window, theta in zip(self.model.layers, windows, thetas):
            layer.mask_index = self.windows.index(window)
            layer.rope_index = 0 if theta == args.rope_theta else 1
        self.inv_freq = Tensor(rope_inverse_frequencies(args).reshape(1, -1), ms.float32)  # (1, R/2)
        self.local_inv_freq = None if self.local_theta is None else Tensor(
            rope_inverse_frequencies(args, self.local_theta).reshape(1, -1), ms.float32)
        # LongRoPE: the long factors' frequencies replace inv_freq in a forward whose positions go
        # beyond long_after; cos and sin are scaled by the attention factor (1: no scaling)
        self.long_after = rope_long_after(args)
        self.long_inv_freq = None if self.long_after is None else Tensor(
            rope_inverse_frequencies(args, long=True).reshape(1, -1), ms.float32)
        self.rope_scale = rope_attention_factor(args)
        self.embed_scale = Tensor(math.sqrt(args.hidden_size), ms.float32) if args.spec.embedding_scale else None
        self.final_softcap = args.final_softcap
        self.matmul_bt = ops.MatMul(transpose_b=True)
        self.num_heads, self.head_dim, self.rotary_dim = args.num_heads, args.head_dim, args.rotary_dim
        self.same_kv_heads = args.num_kv_heads == args.num_heads
        self.fused_attention = False  # set by use_kernels: some layer's attention runs the kernel
        self.mask_free = False  # set by use_kernels: every layer's kernel masks causally by itself (no mask)
        # core.engine.ops.full's broadcasts are a CPU workaround; on devices the (B|1, 1, T, S) mask stays that shape
        self.explicit_broadcast = explicit_broadcasts(devices.target())
        self.fused_loss = None  # set by use_kernels: the cross-entropy kernel (core.engine.train_step)
        # True: construct returns (logits, the sparse layers' router logits (B·T, experts) each), for
        # the router's load-balancing loss in training (core.engine.train_step); compiled graphs keep the value
        self.output_router_logits = False
        self.head_loss = None  # set by use_frozen_kernels: head + cross-entropy kernel (core.engine.train_step)
        self.cap_in_loss = False  # set by use_kernels: that kernel applies final_softcap itself
        # set by core.engine.fused.enable: the whole inference forward in one kernel (FusedInference), used by
        # generation and lm-eval where core.engine.fused.inference_problem(model) is None
        self.inference_kernel = None
        # set by core.engine.fused.enable: factory(softcap=None) -> the token-entropy kernel (core.engine.grpo's figure)
        self.token_entropy = None

    def rope(self, positions, dtype):
        """positions (B|1, T) int -> [(cos, sin)] per RoPE base, each (B|1, 1, T, rotary_dim) in `dtype`."""
        inv_freq = self.inv_freq
        if self.long_inv_freq is not None:  # one set for every position, as transformers chooses it
            beyond = ops.broadcast_to(positions.max() + 1 > self.long_after, inv_freq.shape)
            inv_freq = ops.select(beyond, self.long_inv_freq, inv_freq)
        tables = [rope_table(positions, inv_freq, dtype, self.rope_scale)]
        if self.local_inv_freq is not None:
            tables.append(rope_table(positions, self.local_inv_freq, dtype))
        return tables

    def attention_mask(self, query_index, key_valid, window=None, query_pos=None, key_pos=None, segments=None):
        """Additive float32 mask (B|1, 1, T, S): key j is visible to query i when j <= i (cache
        indices; query_index (B|1, T)) and the key is not padding (key_valid (B|1, S)); with a
        `window`, also when pos(i) − pos(j) < window (RoPE positions, so left padding does not
        narrow it); with `segments` (B, T = S), only within the query's own segment (packing).
        Masked scores get float32's minimum, so a fully masked (padding) row stays finite even when
        the model computes in float16."""
        s = key_valid.shape[-1]
        key_index = ops.arange(s).reshape(1, 1, s)
        allowed = ops.logical_and(key_index <= ops.expand_dims(query_index, -1),
                                  ops.expand_dims(key_valid, 1))  # (B, T, S)
        if window is not None:
            distance = ops.expand_dims(query_pos, -1) - ops.expand_dims(key_pos, 1)
            allowed = ops.logical_and(allowed, distance < window)
        if segments is not None:
            allowed = ops.logical_and(allowed, ops.expand_dims(segments, -1) == ops.expand_dims(segments, 1))
        mask = (1.0 - ops.cast(allowed, ms.float32)) * MASK_MIN
        return ops.expand_dims(mask, 1)

    def logits(self, hidden, expand=True, capped=True):
        """Float32 logits of the final hidden states; `capped=False` leaves out the final soft-cap
        (the loss kernel applies it: `cap_in_loss`)."""
        hidden = self.model.norm(hidden, expand)
        if self.tied:
            # A 2-D MatMul against the (vocab, hidden) embedding, transposed inside the kernel: a 3-D
            # `ops.matmul` would broadcast the whole embedding to every batch row (profiled: the
            # largest cost of a small model's step on the CPU, forward and backward).
            shape = hidden.shape
            if self.tied_frozen is not None:
                out = self.tied_frozen(hidden.reshape(-1, shape[-1]), self.model.embed_tokens.weight)
            else:
                out = self.matmul_bt(hidden.reshape(-1, shape[-1]), ops.cast(self.model.embed_tokens.weight, hidden.dtype))
            out = out.reshape(shape[:-1] + (out.shape[-1],))
        else:
            out = self.lm_head(hidden)
        out = ops.cast(out, ms.float32)
        if self.final_softcap is not None and capped:
            out = soft_cap(out, self.final_softcap)
        return out

    def embed(self, input_ids):
        x = self.model.embed_tokens(input_ids)
        if self.embed_scale is not None:  # Gemma: √hidden, in the embeddings' dtype
            x = x * ops.cast(self.embed_scale, x.dtype)
        return x

    def construct(self, input_ids, attention_mask=None, position_ids=None, segment_ids=None, targets=None,
                  capped=True, final_hidden=False, logits_from=0):
        """Full-sequence forward -> float32 logits (B, T, vocab), or with `targets` (B, T) int32 (the
        next-token targets, below 0 ignored; needs `head_loss`) each position's NLL (B, T), the LM
        head run inside the loss kernel (no logits tensor). attention_mask (B, T) 1/0 marks real
        tokens (right padding);
        position_ids (B, T) int32 are the RoPE positions (packed samples restart at 0); segment_ids
        (B, T) int32 number the packed samples: tokens attend only within their own segment, and
        segment 0 is padding. All None: one sample per row, positions 0..T-1. capped=False: the
        logits without the final soft-cap (for a loss kernel that applies it, `cap_in_loss`).
        final_hidden=True: the final hidden states after the final norm (B, T, hidden) in the compute
        dtype, no LM head (a sequence-scoring head reads them, core.engine.reward_model).
        logits_from=s (a constant): the logits, or the NLL of `targets` (B, T − s), of positions s.. only
        (GRPO's update reads only the completion's: the head is not run on the prompt's positions)."""
        b, t = input_ids.shape
        x = self.embed(input_ids)
        index = ops.arange(t).reshape(1, t)
        positions = index if position_ids is None else position_ids
        if attention_mask is None:
            key_valid = ops.ones((1, t), ms.bool_)
        else:
            key_valid = ops.cast(attention_mask, ms.bool_)
        if segment_ids is not None:
            key_valid = ops.logical_and(key_valid, segment_ids != 0)
        tables = self.rope(positions, x.dtype)
        if self.mask_free:  # core.engine.devices.FlashAttention: the kernel's causal mode, no mask tensor
            masks = [None for _ in self.windows]
        else:
            masks = [self.attention_mask(index, key_valid, window, positions, positions, segment_ids)
                     for window in self.windows]
        # broadcast once here rather than in every layer (see core.engine.ops.full); with grouped-query
        # attention the layers broadcast cos/sin to the query and key shapes themselves. The CPU
        # only: on devices a (B, H, T, T) mask held across the layers is what must not exist.
        if not self.fused_attention and self.explicit_broadcast:  # the kernel reads them as they are
            if self.same_kv_heads:
                shape = (b, self.num_heads, t, self.rotary_dim)
                tables = [(full(cos, shape), full(sin, shape)) for cos, sin in tables]
            masks = [full(mask, (b, self.num_heads, t, t)) for mask in masks]
        router_logits = ()
        for layer in self.model.layers:
            cos, sin = tables[layer.rope_index]
            x, _, _, routed = layer(x, cos, sin, masks[layer.mask_index], None, None, segment_ids)
            if layer.sparse:
                router_logits = router_logits + (routed,)
        if final_hidden:
            return self.model.norm(x)
        if logits_from:
            x = x[:, logits_from:]
        if targets is not None:
            nll = self.head_nll(self.model.norm(x), targets)
            return (nll, router_logits) if self.output_router_logits else nll
        if self.output_router_logits:  # a mixture of experts' load-balancing loss (core.engine.train_step)
            return self.logits(x, capped=capped), router_logits
        return self.logits(x, capped=capped)

    def forward_cached(self, input_ids, past, positions, key_valid, last_only=False):
        """Incremental forward for generation (PyNative). input_ids (B, T) are the new tokens;
        past is a list of (keys, values) per layer or None; positions (B, T) are the new tokens'
        RoPE positions; key_valid (B, past+T) marks non-padding cache slots (the keys' positions
        count them, for sliding windows).
        Returns logits (B, T, vocab) — (B, 1, vocab) for the last position only with `last_only`,
        which spares a prompt's (B, T, vocab) float32 logits — and the updated cache."""
        x = self.embed(input_ids)
        past_len = 0 if past is None else past[0][0].shape[2]
        t = input_ids.shape[1]
        cache_index = ops.arange(past_len, past_len + t).reshape(1, t)
        tables = self.rope(positions, x.dtype)
        key_pos = None
        if self.windows != (None,):
            key_pos = ops.cumsum(ops.cast(key_valid, ms.int32), 1) - 1
        masks = [self.attention_mask(cache_index, key_valid, window, positions, key_pos) for window in self.windows]
        new_past = []
        for i, layer in enumerate(self.model.layers):
            pk, pv = (None, None) if past is None else past[i]
            cos, sin = tables[layer.rope_index]
            x, k, v, _ = layer(x, cos, sin, masks[layer.mask_index], pk, pv)
            if past is None and layer.self_attn.uses_kernel(x.dtype):  # the fused prefill's (B, T, KV, D)
                k, v = k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3)
            new_past.append((k, v))  # (B, KV, S, D)
        if last_only and t > 1:
            x = x[:, -1:, :]
        return self.logits(x, past is None), new_past

    def use_frozen_kernels(self, frozen) -> int:
        """Compute with the 16-bit stored weights through core.engine.fused.FusedFrozenWeights instead of
        MindSpore's Cast, which keeps every layer's float32 copy at once (see FrozenMatmul): the
        frozen matmuls, the embedding's rows and, for a frozen head without soft-capping, the head
        and its loss in one kernel (`head_loss`; training and evaluation use it through
        core.engine.train_step). Returns the number of frozen matrices routed."""
        count = 0
        for _, cell in self.cells_and_names():
            if isinstance(cell, FrozenMatmul):
                cell.fused = frozen
                count += 1
            elif isinstance(cell, Embedding) and cell.upcast_rows:
                cell.gather = frozen.gather
                count += 1
        head = self.model.embed_tokens if self.tied else self.lm_head
        if getattr(head, "upcast_rows", False) or getattr(head, "frozen", None) is not None:
            if self.final_softcap is None and not getattr(head, "has_bias", False) and not hasattr(head, "lora_a"):
                self.head_loss = frozen.head_loss
        return count

    def head_weight(self):
        """The LM head's (vocab, hidden) matrix: the tied embedding or lm_head's weight."""
        return self.model.embed_tokens.weight if self.tied else self.lm_head.weight

    def head_nll(self, hidden, targets):
        """Each position's negative log-likelihood of its target through `head_loss` (the head's
        matmul inside the kernel, no logits tensor): hidden (B, T, h) after the final norm,
        targets (B, T) int32 (below 0: ignored, nll 0) -> (B, T)."""
        b, t, h = hidden.shape
        stats = self.head_loss(hidden.reshape(b * t, h), self.head_weight(), targets.reshape(b * t))  # (B·T, 2)
        return stats[:, 0].reshape(b, t)

    def use_kernels(self, attention=None, norm=None, gate=None, loss=None) -> list[str]:
        """Route the full-sequence forward through fused kernels (`core.engine.fused.enable`) where they
        compute this model's maths, and return what stays composed and why (one line per reason).
        attention(**needs) -> op builds the attention kernel for a layer's `kernel_needs()` (a
        variant) and raises LookupError naming what it cannot do; gate(**needs) likewise for the
        MLP gate; norm is the RMSNorm op; loss(**needs) the cross-entropy op (`softcap`: the final
        logits' cap, which the kernel then applies itself: `cap_in_loss`, and the train and eval
        steps take the logits uncapped). None leaves a part composed."""
        composed: dict[str, list[int]] = {}
        ops_by_needs: dict = {}

        def build(factory, needs, what, n):
            key = (what, tuple(sorted(needs.items())))
            if key not in ops_by_needs:
                try:
                    ops_by_needs[key] = factory(**needs)
                except LookupError as exc:
                    ops_by_needs[key] = None
                    ops_by_needs[key + ("why",)] = f"{what}: {exc}"
            if ops_by_needs[key] is None:
                composed.setdefault(ops_by_needs[key + ("why",)], []).append(n)
            return ops_by_needs[key]

        for n, layer in enumerate(self.model.layers):
            if attention is not None:
                layer.self_attn.fused = build(attention, layer.self_attn.kernel_needs(), "attention", n)
            if gate is not None and isinstance(layer.mlp, MLP):
                layer.mlp.fused = build(gate, layer.mlp.kernel_needs(), "MLP gate", n)
            if norm is not None:
                for cell in layer.norms() + [getattr(layer.self_attn, name) for name in ("q_norm", "k_norm")
                                             if layer.self_attn.qk_norm != "none"]:
                    cell.fused = norm
        if norm is not None:
            self.model.norm.fused = norm
        self.fused_loss, self.cap_in_loss = None, False
        if loss is not None:
            needs = {} if self.final_softcap is None else {"softcap": self.final_softcap}
            try:
                self.fused_loss, self.cap_in_loss = loss(**needs), bool(needs)
            except LookupError as exc:  # the cap stays composed, in front of the plain loss kernel
                self.fused_loss = loss()
                composed[f"final-logit soft-cap: {exc}"] = []
        self.fused_attention = any(layer.self_attn.fused is not None for layer in self.model.layers)
        self.mask_free = all(layer.self_attn.fused is not None and not getattr(layer.self_attn.fused, "needs_mask", True)
                             for layer in self.model.layers)
        return [f"{why} (layers {_ranges(layers)})" if layers else why for why, layers in composed.items()]


def _ranges(numbers: list[int]) -> str:
    """[0, 1, 2, 5] -> '0-2, 5'."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)


# Per-instance bookkeeping of a Cell that says nothing about what its graph computes.
_NOT_STRUCTURE = frozenset({"_create_time", "_id", "cell_init_args", "_cell_init_args", "no_inline", "_jit_graph_name",
                            "_compiled", "arguments_key", "_phase_cache", "_compile_phase"})


def _layer_signature(layer: nn.Cell) -> str:
    """Everything about a decoder layer that shapes its compiled graph: each sub-cell's class and
    scalar settings (LoRA rank/scaling/merged, dropout, recompute scope, AMP type), its primitives'
    attributes, its constant tensors' values, and its parameters' names, shapes, dtypes and
    trainability (not their values: a shared graph takes each layer's own parameters)."""
    parts = []
    for name, cell in layer.cells_and_names():
        fields = []
        for key, value in sorted(vars(cell).items()):
            if key in _NOT_STRUCTURE:
                continue
            if isinstance(value, (bool, int, float, str, type(None))):
                fields.append(f"{key}={value!r}")
            elif isinstance(value, (tuple, list)) and all(isinstance(v, (bool, int, float, str)) for v in value):
                fields.append(f"{key}={tuple(value)!r}")
            elif isinstance(value, Parameter):
                pass  # below, with the cell's other parameters
            elif isinstance(value, Tensor):
                array = value.asnumpy()
                fields.append(f"{key}=tensor{array.shape}{array.dtype}:{hash(array.tobytes())}")
            elif isinstance(value, ops.Primitive):  # random seeds differ per instance; with
                # dropout off they draw nothing (and with it on, nothing is shared)
                attrs = sorted((k, v) for k, v in value.attrs.items() if not k.lower().startswith("seed"))
                fields.append(f"{key}={type(value).__name__}{attrs!r}")
        for key, param in sorted(cell._params.items()):  # attribute name -> Parameter (or None)
            if param is not None:
                fields.append(f"param {key}{tuple(param.shape)}{param.dtype}:{param.requires_grad}")
        parts.append(f"{name}:{type(cell).__qualname__}[{', '.join(fields)}]")
    return "\n".join(parts)


def recompute_blocks(model: CausalLM, policy: str, layers: int) -> None:
    """Mark `policy`'s block of the first `layers` decoder layers for recompute, as
    `recompute.policy` names them: "mlp", "attention" (self_attn) or "full" (the whole layer)."""
    for layer in list(model.model.layers)[:layers]:
        {"mlp": layer.mlp, "attention": layer.self_attn, "full": layer}[policy].recompute()


def _recomputed(cell: nn.Cell) -> bool:
    """Whether `cell.recompute()` was called on this cell itself (MindSpore marks the cell)."""
    return bool(vars(cell).get("_has_config_recompute", False))


def share_layer_graphs(model: CausalLM) -> int:
    """Let MindSpore compile one graph per distinct decoder layer and reuse it for every identical
    layer, instead of inlining every layer into the step's graph (`mindspore.lazy_inline`,
    policy "front", set on each layer instance once LoRA, recompute and AMP have shaped it; the
    decorator itself works per class, at `__init__`, before any of that). Layers share only when
    `_layer_signature` is equal, so a LoRA that targets some layers, or recompute on the first
    layers only, gives one graph per kind. Measured on the 25M Llama (6 layers, batch 8 × 256):
    the train step compiled 4-5 s faster (launch to first step 23.4 -> 19.3 s LoRA, 22.5 -> 18.5 s
    full) with 100 MB less peak RSS and identical losses.

    Not done when a layer draws random numbers (dropout > 0): a shared graph shares its dropout
    kernels' random state, so every layer would draw the same mask (measured). Nor when a layer's
    attention block alone is recomputed (`recompute.policy: attention`): MindSpore 2.10 fails to
    compile that step ("The pointer[manager] is null", parameter_eliminate.h), with the fused
    kernels or without; recomputing the MLP or the whole layer compiles shared. Returns the number
    of distinct layer graphs, or 0 when the layers are left inlined."""
    layers = list(model.model.layers)
    for layer in layers:
        if _recomputed(layer.self_attn) and not _recomputed(layer):
            return 0
        for _, cell in layer.cells_and_names():
            if isinstance(cell, nn.Dropout) and cell.p > 0:
                return 0
    kinds = set()
    for layer in layers:
        signature = _layer_signature(layer)
        kinds.add(signature)
        layer.no_inline = False  # what lazy_inline(policy="front") sets
        layer.cell_init_args = "lazy_inline_DecoderLayer_" + hashlib.sha1(signature.encode()).hexdigest()
    return len(kinds)
