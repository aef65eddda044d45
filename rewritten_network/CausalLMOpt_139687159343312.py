import sys
import mindspore
from mindspore import nn
from mindspore.nn import Cell
from mindspore.ops import functional as F
#
#
sys.path.insert(0, '/work/main/.venv/lib/python3.11/site-packages/mindspore/ops/auto_generate')
from mindspore.ops.auto_generate.gen_ops_prim import *
from mindspore.ops.auto_generate.pyboost_inner_prim import *
from mindspore.ops.operations.manually_defined.ops_def import *
from mindspore.ops.auto_generate.gen_ops_def import tanh_op

def tanh_opt(input):
    tanh_op_var = tanh_op(input)
    return tanh_op_var
#
sys.path.insert(0, '/work/wt/scale/core')

def soft_cap(x, cap):
    div_var = x / cap
    tanh_var = tanh_opt(div_var)
    mult_var_2 = tanh_var * cap
    return mult_var_2
#
sys.path.insert(0, '/work/main/.venv/lib/python3.11/site-packages/mindspore/ops/auto_generate')
from mindspore.ops.auto_generate.gen_ops_def import sin_op

def sin_opt(input):
    sin_op_var = sin_op(input)
    return sin_op_var
#
sys.path.insert(0, '/work/main/.venv/lib/python3.11/site-packages/mindspore/ops/auto_generate')
from mindspore.ops.auto_generate.gen_ops_def import cos_op

def cos_opt(input):
    cos_op_var = cos_op(input)
    return cos_op_var
#
sys.path.insert(0, '/work/main/.venv/lib/python3.11/site-packages/mindspore/ops/auto_generate')

def cat_opt(tensors, axis=0):
    concat_impl_var = concat_impl(tensors, axis)
    return concat_impl_var
#
sys.path.insert(0, '/work/main/.venv/lib/python3.11/site-packages/mindspore/ops/auto_generate')
from mindspore.ops.auto_generate.gen_ops_def import expand_dims_op

def expand_dims_opt(input_x, axis):
    expand_dims_op_var = expand_dims_op(input_x, axis)
    return expand_dims_op_var
#
sys.path.insert(0, '/work/wt/scale/core')
import mindspore as ms

def rope_table(positions, inv_freq, dtype):
    usub_var_1 = -1
    cast_var_3 = cast_opt(positions, ms.float32)
    expand_dims_var = expand_dims_opt(cast_var_3, usub_var_1)
    freqs = expand_dims_var * inv_freq
    usub_var = -1
    tuple_var_2 = (freqs, freqs)
    emb = cat_opt(tuple_var_2, usub_var)
    cos_var = cos_opt(emb)
    cast_var_2 = cast_opt(cos_var, dtype)
    cos = expand_dims_opt(cast_var_2, 1)
    sin_var = sin_opt(emb)
    cast_var_1 = cast_opt(sin_var, dtype)
    sin = expand_dims_opt(cast_var_1, 1)
    tuple_var_1 = (cos, sin)
    return tuple_var_1
#
sys.path.insert(0, '/work/main/.venv/lib/python3.11/site-packages/mindspore/ops/function')
from mindspore.ops.function.math_func import logical_and_

def logical_and_opt(input, other):
    logical_and__var = logical_and_(input, other)
    return logical_and__var
#
sys.path.insert(0, '/work/main/.venv/lib/python3.11/site-packages/mindspore/ops/auto_generate')
from mindspore.ops.auto_generate.gen_ops_def import ones_op

def ones_opt(shape, dtype=None):
    ones_op_var = ones_op(shape, dtype)
    return ones_op_var
#
sys.path.insert(0, '/work/main/.venv/lib/python3.11/site-packages/mindspore/ops/auto_generate')
from mindspore.ops.auto_generate.gen_ops_def import cast_op

def cast_opt(input, dtype):
    cast_op_var = cast_op(input, dtype)
    return cast_op_var
#
sys.path.insert(0, '/work/wt/scale/core')
from mindspore import nn, ops
from core.ops import MASK_MIN, full
from core.model import CausalLM
from mindspore.train.amp import amp_cast

class CausalLMOpt(CausalLM, nn.Cell):

    def __init__(self, obj):
        nn.Cell.__init__(self)
        for key, value in obj.__dict__.items():
            setattr(self, key, value)

    def rope(self, positions, dtype):
        rope_table_var = rope_table(positions, self.inv_freq, dtype)
        tables = [rope_table_var]
        compare_var_4 = self.local_inv_freq is not None
        if compare_var_4:
            rope_table_var_1 = rope_table(positions, self.local_inv_freq, dtype)
            tables.append(rope_table_var_1)
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
        allowed = ops.logical_and(key_index <= ops.expand_dims(query_index, -1), ops.expand_dims(key_valid, 1))
        if window is not None:
            distance = ops.expand_dims(query_pos, -1) - ops.expand_dims(key_pos, 1)
            allowed = ops.logical_and(allowed, distance < window)
        if segments is not None:
            allowed = ops.logical_and(allowed, ops.expand_dims(segments, -1) == ops.expand_dims(segments, 1))
        mask = (1.0 - ops.cast(allowed, ms.float32)) * MASK_MIN
        return ops.expand_dims(mask, 1)

    def logits(self, hidden, expand=True):
        hidden = self.model.norm(hidden, expand)
        if self.tied:
            shape = hidden.shape
            compare_var_6 = self.tied_frozen is not None
            if compare_var_6:
                subscript_var_4 = shape[-1]
                usub_var_2 = -1
                reshape_var_3 = hidden.reshape(usub_var_2, subscript_var_4)
                out = self.tied_frozen(reshape_var_3, self.model.embed_tokens.weight)
            else:
                cast_var_4 = cast_opt(self.model.embed_tokens.weight, hidden.dtype)
                subscript_var_5 = shape[-1]
                usub_var_3 = -1
                reshape_var_4 = hidden.reshape(usub_var_3, subscript_var_5)
                reshape_var_4 = amp_cast(reshape_var_4, mindspore.float16)
                cast_var_4 = amp_cast(cast_var_4, mindspore.float16)
                out = self.matmul_bt(reshape_var_4, cast_var_4)
                out = amp_cast(out, mindspore.float32)
            subscript_var_3 = out.shape[-1]
            tuple_var_3 = (subscript_var_3,)
            subscript_var_2 = shape[:-1]
            add_var = subscript_var_2 + tuple_var_3
            out = out.reshape(add_var)
        else:
            out = self.lm_head(hidden)
        out = cast_opt(out, ms.float32)
        compare_var_5 = self.final_softcap is not None
        if compare_var_5:
            out = soft_cap(out, self.final_softcap)
        return out

    def embed(self, input_ids):
        x = self.model.embed_tokens(input_ids)
        compare_var = self.embed_scale is not None
        if compare_var:
            cast_var = cast_opt(self.embed_scale, x.dtype)
            x = x * cast_var
        return x

    def construct(self, input_ids, attention_mask=None, position_ids=None, segment_ids=None, targets=None):
        b, t = input_ids.shape
        x = self.embed(input_ids)
        arange_var = ops.arange(t)
        index = arange_var.reshape(1, t)
        positions = index if position_ids is None else position_ids
        compare_var_2 = attention_mask is None
        if compare_var_2:
            tuple_var = (1, t)
            key_valid = ones_opt(tuple_var, ms.bool_)
        else:
            key_valid = cast_opt(attention_mask, ms.bool_)
        compare_var_1 = segment_ids is not None
        if compare_var_1:
            compare_var_3 = segment_ids != 0
            key_valid = logical_and_opt(key_valid, compare_var_3)
        tables = self.rope(positions, x.dtype)
        masks = [self.attention_mask(index, key_valid, window, positions, positions, segment_ids) for window in self.windows]
        not_var = not self.fused_attention
        if not_var:
            if self.same_kv_heads:
                shape = (b, self.num_heads, t, self.rotary_dim)
                tables = [(full(cos, shape), full(sin, shape)) for cos, sin in tables]
            masks = [full(mask, (b, self.num_heads, t, t)) for mask in masks]
        attribute_var = self.model.layers
        for layer in attribute_var:
            cos, sin = tables[layer.rope_index]
            subscript_var = masks[layer.mask_index]
            x, _, _, _ = layer(x, cos, sin, subscript_var)
        compare_var = targets is not None
        if compare_var:
            norm_var = self.model.norm(x)
            head_nll_var = self.head_nll(norm_var, targets)
            return head_nll_var
        logits_var = self.logits(x)
        return logits_var

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
            if past is None and layer.self_attn.uses_kernel(x.dtype):
                k, v = (k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3))
            new_past.append((k, v))
        if last_only and t > 1:
            x = x[:, -1:, :]
        return (self.logits(x, past is None), new_past)

    def use_frozen_kernels(self, frozen) -> int:
        """Compute with the 16-bit stored weights through core.fused.FusedFrozenWeights instead of
        MindSpore's Cast, which keeps every layer's float32 copy at once (see FrozenMatmul): the
        frozen matmuls, the embedding's rows and, for a frozen head without soft-capping, the head
        and its loss in one kernel (`head_loss`; training and evaluation use it through
        core.train_step). Returns the number of frozen matrices routed."""
        count = 0
        for _, cell in self.cells_and_names():
            if isinstance(cell, FrozenMatmul):
                cell.fused = frozen
                count += 1
            elif isinstance(cell, Embedding) and cell.upcast_rows:
                cell.gather = frozen.gather
                count += 1
        head = self.model.embed_tokens if self.tied else self.lm_head
        if getattr(head, 'upcast_rows', False) or getattr(head, 'frozen', None) is not None:
            if self.final_softcap is None and (not getattr(head, 'has_bias', False)) and (not hasattr(head, 'lora_a')):
                self.head_loss = frozen.head_loss
        return count

    def head_weight(self):
        ifexp_var = self.model.embed_tokens.weight if self.tied else self.lm_head.weight
        return ifexp_var

    def head_nll(self, hidden, targets):
        b, t, h = hidden.shape
        mult_var_1 = b * t
        reshape_var_2 = targets.reshape(mult_var_1)
        head_weight_var = self.head_weight()
        mult_var = b * t
        reshape_var_1 = hidden.reshape(mult_var, h)
        stats = self.head_loss(reshape_var_1, head_weight_var, reshape_var_2)
        subscript_var_1 = stats[:, 0]
        reshape_var = subscript_var_1.reshape(b, t)
        return reshape_var

    def use_kernels(self, attention=None, norm=None, gate=None, loss=None) -> list[str]:
        """Route the full-sequence forward through fused kernels (`core.fused.enable`) where they
        compute this model's maths, and return what stays composed and why (one line per reason).
        attention(**needs) -> op builds the attention kernel for a layer's `kernel_needs()` (a
        variant) and raises LookupError naming what it cannot do; gate(**needs) likewise for the
        MLP gate; norm is the RMSNorm op, loss the cross-entropy op. None leaves a part composed."""
        composed: dict[str, list[int]] = {}
        ops_by_needs: dict = {}

        def build(factory, needs, what, n):
            key = (what, tuple(sorted(needs.items())))
            if key not in ops_by_needs:
                try:
                    ops_by_needs[key] = factory(**needs)
                except LookupError as exc:
                    ops_by_needs[key] = None
                    ops_by_needs[key + ('why',)] = f'{what}: {exc}'
            if ops_by_needs[key] is None:
                composed.setdefault(ops_by_needs[key + ('why',)], []).append(n)
            return ops_by_needs[key]
        for n, layer in enumerate(self.model.layers):
            if attention is not None:
                layer.self_attn.fused = build(attention, layer.self_attn.kernel_needs(), 'attention', n)
            if gate is not None and isinstance(layer.mlp, MLP):
                layer.mlp.fused = build(gate, layer.mlp.kernel_needs(), 'MLP gate', n)
            if norm is not None:
                for cell in layer.norms() + [getattr(layer.self_attn, name) for name in ('q_norm', 'k_norm') if layer.self_attn.qk_norm != 'none']:
                    cell.fused = norm
        if norm is not None:
            self.model.norm.fused = norm
        self.fused_loss = loss
        self.fused_attention = any((layer.self_attn.fused is not None for layer in self.model.layers))
        return [f'{why} (layers {_ranges(layers)})' for why, layers in composed.items()]
#