"""The CPU's fused kernels (core/engine/kernels/*.cc): attention, RMSNorm and cross-entropy against float64
NumPy references of their values and textbook gradients, the model with them against transformers
and against its composed ops, training and evaluation with them, and their fallbacks."""
import os

import numpy as np
import pytest

import mindspore as ms
from mindspore import Tensor, ops

import core.engine.fused as fused
from core.engine.checkpoint import load_hf_model
from core.engine.lora import inject_lora, mark_only_lora_trainable
from core.engine.model import MASK_MIN, share_layer_graphs
from core.engine.train_step import (CausalLMLoss, EvalStep, FusedCausalLMLoss, TrainStep, WarmupDecaySchedule, adamw,
                              loss_cell)

from tests import skips
from tests.core.hf_fixtures import make_hf_model, random_ids, reference_logits, save_hf_model

try:
    KERNEL = fused.build()
except fused.KernelUnavailable as exc:  # no C++ compiler: the engine runs composed ops
    KERNEL, WHY = None, str(exc)
needs_kernel = skips.unless(KERNEL is not None, "kernels", "fused kernels unavailable here")


def rotate_half(x):
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], -1)


def rotate_pairs(x):
    """GLM-4's interleaved rotate: (−x₁, x₀) for each pair (2i, 2i+1)."""
    out = np.empty_like(x)
    out[..., 0::2], out[..., 1::2] = -x[..., 1::2], x[..., 0::2]
    return out


def rope_tables(batch, t, d, offsets=None, positions=None, base=10000):
    """cos, sin (B|1, 1, T, d) as core.engine.model.CausalLM.rope makes them, cat(freqs, freqs) (per-row
    offsets: left padding; positions (B, T): restarted per packed sample)."""
    inv = 1.0 / base ** (np.arange(0, d, 2) / d)
    if positions is None:
        positions = np.arange(t)[None, :] - (np.zeros((1, 1)) if offsets is None else np.asarray(offsets)[:, None])
    freqs = np.asarray(positions, np.float64)[..., None] * inv
    emb = np.concatenate([freqs, freqs], -1)[:, None]
    return np.cos(emb).astype(np.float32), np.sin(emb).astype(np.float32)


def apply_rope(x, cos, sin, style):
    """RoPE on the first cos.shape[-1] dims of x (the rest passed through), as Llama ("half") or
    GLM-4 ("interleaved": its cos[..., :r/2] repeat-interleaved) compute it."""
    r = cos.shape[-1]
    if style == "interleaved":
        cos, sin = np.repeat(cos[..., :r // 2], 2, -1), np.repeat(sin[..., :r // 2], 2, -1)
    turn = rotate_pairs if style == "interleaved" else rotate_half
    rot = x[..., :r]
    return np.concatenate([rot * cos + turn(rot) * sin, x[..., r:]], -1), (cos, sin, turn)


def unrope(g, rope):
    """The gradient through apply_rope: its rotation R is linear with Rᵀ = −R for both styles."""
    cos, sin, turn = rope
    r = cos.shape[-1]
    rot = g[..., :r]
    return np.concatenate([rot * cos - turn(rot * sin), g[..., r:]], -1)


def visible_keys(b, t, window=None, segments=None):
    """(B, 1, T, T) bool: key j visible to query i (causal; 0 <= i − j < window; same segment)."""
    i, j = np.arange(t)[:, None], np.arange(t)[None, :]
    seen = j <= i
    if window:
        seen = seen & (i - j < window)
    seen = np.broadcast_to(seen, (b, 1, t, t))
    if segments is not None:
        seen = seen & (segments[:, None, :, None] == segments[:, None, None, :])
    return seen


def reference(q, k, v, mask, cos, sin, dout, scale=None, softcap=None, window=None, style="half", segments=None):
    """float64 RoPE + attention and its gradients (softmax backward as P∘(dP − Σ P∘dP), through a
    soft cap c·tanh(s/c) by 1 − tanh²), k/v repeated to the query heads (Hugging Face's repeat_kv)
    and their gradients summed back. q (B, H, T, D), k, v (B, KV, T, D)."""
    q, k, v, mask, cos, sin, dout = (np.asarray(a, np.float64) for a in (q, k, v, mask, cos, sin, dout))
    qr, rope = apply_rope(q, cos, sin, style)
    kr0, _ = apply_rope(k, cos, sin, style)
    rep = q.shape[1] // k.shape[1]
    kr, vr = np.repeat(kr0, rep, axis=1), np.repeat(v, rep, axis=1)
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    scores = qr @ kr.transpose(0, 1, 3, 2) * scale
    if softcap:
        th = np.tanh(scores / softcap)
        scores = softcap * th
    seen = visible_keys(q.shape[0], q.shape[2], window, segments)
    scores = np.where(seen, scores + mask, -np.inf)
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    out = probs @ vr
    dv = probs.transpose(0, 1, 3, 2) @ dout
    dp = dout @ vr.transpose(0, 1, 3, 2)
    ds = probs * (dp - (probs * dp).sum(-1, keepdims=True))
    if softcap:
        ds = ds * (1 - th ** 2)
    dqr = ds @ kr * scale
    dkr = ds.transpose(0, 1, 3, 2) @ qr * scale
    group = lambda g: g.reshape(g.shape[0], k.shape[1], rep, *g.shape[2:]).sum(2)  # noqa: E731
    return out, unrope(dqr, rope), unrope(group(dkr), rope), group(dv), kr0


def causal_mask(batch, t, pad_right=(), per_head=1):
    mask = np.triu(np.full((t, t), MASK_MIN, np.float32), 1)[None, None].repeat(batch, 0).repeat(per_head, 1)
    for row, n in pad_right:
        mask[row, :, :, t - n:] = MASK_MIN  # padding keys: nobody sees them
    return mask


def run_attention(attention, q, k, v, mask, cos, sin, dout, segments=None):
    """The kernel's out, dq, dk, dv and rotated keys for q (B, H, T, D), k, v (B, KV, T, D): it
    takes and returns the heads as the projections lay them out, (B, T, heads, D)."""
    bthd = lambda a: Tensor(np.ascontiguousarray(a.transpose(0, 2, 1, 3)))  # noqa: E731
    tensors = [Tensor(a) for a in (mask, cos, sin)] + ([] if segments is None else [Tensor(segments)])
    grad = ms.grad(lambda q_, k_, v_: (attention(q_, k_, v_, *tensors)[0] * bthd(dout)).sum(), grad_position=(0, 1, 2))
    out, key = (a.asnumpy().transpose(0, 2, 1, 3) for a in attention(bthd(q), bthd(k), bthd(v), *tensors))
    dq, dk, dv = (g.asnumpy().transpose(0, 2, 1, 3) for g in grad(bthd(q), bthd(k), bthd(v)))
    return out, dq, dk, dv, key


def attention_inputs(b, heads, kv_heads, head_dim, t, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((b, heads, t, head_dim)).astype(np.float32)
    k, v = (rng.standard_normal((b, kv_heads, t, head_dim)).astype(np.float32) for _ in range(2))
    return q, k, v, rng.standard_normal(q.shape).astype(np.float32)


def assert_matches_reference(ours, ref):
    for name, a, r in zip(("out", "dq", "dk", "dv", "rotated keys"), ours, ref):
        assert a.shape == r.shape, name
        np.testing.assert_allclose(a, r, rtol=1e-4, atol=2e-5, err_msg=name)


@needs_kernel
@pytest.mark.parametrize("heads, kv_heads, head_dim, t, per_head, row_tables",
                         [(4, 2, 16, 100, 1, False), (3, 3, 8, 64, 3, True), (2, 1, 32, 7, 1, False)])
def test_kernel_matches_float64_reference(heads, kv_heads, head_dim, t, per_head, row_tables):
    b = 3
    q, k, v, dout = attention_inputs(b, heads, kv_heads, head_dim, t)
    mask = causal_mask(b, t, pad_right=[(1, 5)], per_head=per_head if per_head == 1 else heads)
    cos, sin = rope_tables(b, t, head_dim, offsets=[0, 2, 5] if row_tables else None)
    ours = run_attention(fused.FusedAttention(KERNEL), q, k, v, mask, cos, sin, dout)
    assert_matches_reference(ours, reference(q, k, v, mask, cos, sin, dout))


def packed_segments(t, lengths_per_row):
    """(B, T) int32 segment ids: samples 1, 2, … of the given lengths, then padding (0)."""
    seg = np.zeros((len(lengths_per_row), t), np.int32)
    positions = np.zeros((len(lengths_per_row), t), np.int64)
    for row, lengths in enumerate(lengths_per_row):
        at = 0
        for n, length in enumerate(lengths, 1):
            seg[row, at:at + length] = n
            positions[row, at:at + length] = np.arange(length)
            at += length
        positions[row, at:] = np.arange(t - at)
    return seg, positions


# the families' combinations: Gemma 2 (scale + softcap + window on alternate layers), Gemma 3
# (scale + window; its QK-norm is the RMSNorm kernel's), GLM-4 (partial interleaved rotary),
# Phi-3 (partial half rotary), packing with and without a window
OPTION_CASES = {
    "scale": dict(scale=0.3),
    "softcap": dict(softcap=2.0),
    "window": dict(window=23),
    "window-1": dict(window=1),
    "window-over-t": dict(window=500),
    "gemma2": dict(scale=256 ** -0.5, softcap=1.5, window=40),
    "gemma3": dict(scale=0.2, window=40),
    "glm4-partial-interleaved": dict(rotary_dim=8, rotary_style="interleaved"),
    "interleaved-full": dict(rotary_style="interleaved"),
    "phi3-partial-half": dict(rotary_dim=6),
    "packed": dict(segments=True),
    "packed-window": dict(segments=True, window=30),
    "packed-gemma2-glm": dict(segments=True, window=37, softcap=3.0, scale=0.4, rotary_dim=8,
                              rotary_style="interleaved"),
}


@needs_kernel
@pytest.mark.parametrize("case", list(OPTION_CASES))
def test_kernel_options_match_float64_reference(case):
    """Every option and the families' combinations, forward and backward, on 150 tokens (three
    blocks of 64 query rows, so key blocks outside a window or another sample are skipped) with
    grouped-query heads and one row right-padded; packed rows restart their positions per sample."""
    options = dict(OPTION_CASES[case])
    segments = options.pop("segments", False)
    b, t, head_dim = 2, 150, 16
    q, k, v, dout = attention_inputs(b, 4, 2, head_dim, t, seed=1)
    q, k = q * 2, k * 2  # scores of a few units: the caps and softmaxes are not all flat
    if segments:
        seg, positions = packed_segments(t, [[50, 30, 64], [6, 1, 100]])  # row 0: 6 padding tokens
        mask = np.zeros((1, 1, 1, t), np.float32)  # packing: the segment ids carry the padding
    else:
        seg, positions = None, None
        mask = causal_mask(b, t, pad_right=[(1, 9)])
    cos, sin = rope_tables(b if segments else 1, t, options.get("rotary_dim", head_dim), positions=positions)
    attention = fused.FusedAttention(KERNEL, head_dim=head_dim, **options)
    ours = run_attention(attention, q, k, v, mask, cos, sin, dout, seg)
    ref = reference(q, k, v, mask, cos, sin, dout, scale=options.get("scale"), softcap=options.get("softcap"),
                    window=options.get("window"), style=options.get("rotary_style", "half"), segments=seg)
    assert_matches_reference(ours, ref)


def test_reference_gradients_match_finite_differences():
    """The float64 reference's hand-written backward (every option at once) against central
    differences of its forward, so the kernel is checked against true gradients."""
    rng = np.random.default_rng(5)
    b, h, kv, t, d = 1, 2, 1, 9, 6
    q, k, v = (rng.standard_normal(shape) for shape in ((b, h, t, d), (b, kv, t, d), (b, kv, t, d)))
    dout = rng.standard_normal(q.shape)
    seg = np.array([[1, 1, 1, 1, 2, 2, 2, 1, 1]], np.int32)  # sample 1 resumes after 2: not one run
    cos, sin = (a.astype(np.float64) for a in rope_tables(1, t, 4))
    mask = np.zeros((1, 1, 1, t))
    opts = dict(scale=0.7, softcap=1.3, window=4, style="interleaved", segments=seg)
    _, dq, dk, dv, _ = reference(q, k, v, mask, cos, sin, dout, **opts)
    loss = lambda q_, k_, v_: (reference(q_, k_, v_, mask, cos, sin, dout, **opts)[0] * dout).sum()  # noqa: E731
    eps = 1e-6
    for which, analytic in enumerate((dq, dk, dv)):
        args = [q, k, v]
        numeric = np.zeros_like(args[which])
        for index in np.ndindex(*numeric.shape):
            plus, minus = (a.copy() for a in (args[which],) * 2)
            plus[index] += eps
            minus[index] -= eps
            numeric[index] = (loss(*[plus if n == which else a for n, a in enumerate(args)])
                              - loss(*[minus if n == which else a for n, a in enumerate(args)])) / (2 * eps)
        np.testing.assert_allclose(analytic, numeric, rtol=1e-6, atol=1e-8)


@needs_kernel
def test_kernel_with_segments_that_resume_and_threads():
    """A segment id that comes back after another sample (not one contiguous run) still sees its
    earlier keys; the outputs and gradients do not depend on the kernel's thread count."""
    b, t, head_dim = 2, 70, 8
    q, k, v, dout = attention_inputs(b, 2, 2, head_dim, t, seed=3)
    seg = np.ones((b, t), np.int32)
    seg[0, 10:30] = 2
    seg[0, 50:] = 3
    seg[1, ::3] = 7  # every third token its own interleaved "sample"
    mask = np.zeros((1, 1, 1, t), np.float32)
    cos, sin = rope_tables(1, t, head_dim)
    attention = fused.FusedAttention(KERNEL, window=40)
    runs = []
    for threads in (1, 2, 3):
        fused.set_threads(KERNEL, threads)
        runs.append(run_attention(attention, q, k, v, mask, cos, sin, dout, seg))
    fused.set_threads(KERNEL, 0)
    assert_matches_reference(runs[0], reference(q, k, v, mask, cos, sin, dout, window=40, segments=seg))
    for other in runs[1:]:
        assert all(np.array_equal(a, c) for a, c in zip(runs[0], other))


@needs_kernel
def test_kernel_refuses_tables_segments_and_options_that_do_not_fit():
    q = Tensor(np.zeros((1, 8, 2, 8), np.float32))  # (B, T, heads, D)
    mask = Tensor(np.zeros((1, 1, 8, 8), np.float32))
    cos, sin = (Tensor(a) for a in rope_tables(1, 8, 4))  # 4 wide: only for rotary_dim=4
    with pytest.raises(RuntimeError):
        fused.FusedAttention(KERNEL)(q, q, q, mask, cos, sin)[0].asnumpy()
    assert fused.FusedAttention(KERNEL, rotary_dim=4)(q, q, q, mask, cos, sin)[0].shape == (1, 8, 2, 8)
    with pytest.raises(RuntimeError):  # segment ids of another length
        fused.FusedAttention(KERNEL, rotary_dim=4)(q, q, q, mask, cos, sin, Tensor(np.ones((1, 7), np.int32)))[0].asnumpy()
    for bad, match in ((dict(window=0), "window"), (dict(softcap=-1.0), "softcap"), (dict(scale=0), "scale"),
                       (dict(rotary_dim=5), "rotary_dim"), (dict(rotary_style="neox"), "rotary_style")):
        with pytest.raises(ValueError, match=match):
            fused.FusedAttention(KERNEL, head_dim=8, **bad)
    with pytest.raises(ValueError, match="rotary_dim must be even and in \\[2, head_dim=8\\]"):
        fused.FusedAttention(KERNEL, head_dim=8, rotary_dim=10)


@needs_kernel
def test_variant_factories_share_ops_and_name_what_they_cannot_do():
    """`CausalLM.use_kernels` asks per layer: equal needs share one op, an unknown need is a
    LookupError naming it (the layer's part stays composed), a bad value is a ValueError."""
    attention, gate = fused.attention_variants(KERNEL), fused.gate_variants(KERNEL)
    plain, capped = attention(), attention(softcap=50.0, window=4096)
    assert attention() is plain and attention(window=4096, softcap=50.0) is capped and capped is not plain
    assert gate() is not gate(activation="gelu_tanh") and gate() is gate()
    with pytest.raises(LookupError, match="no kernel variant for alibi=True"):
        attention(alibi=True, window=8)
    with pytest.raises(ValueError, match="window"):
        attention(window=-3)
    with pytest.raises(ValueError, match="gate activation"):
        gate(activation="relu")


@needs_kernel
def test_kernel_refuses_a_mask_of_the_wrong_shape():
    q = Tensor(np.zeros((1, 8, 2, 4), np.float32))  # (B, T, heads, D)
    kv = Tensor(np.zeros((1, 8, 2, 4), np.float32))
    cos, sin = (Tensor(a) for a in rope_tables(1, 8, 4))
    with pytest.raises(RuntimeError):
        fused.FusedAttention(KERNEL)(q, kv, kv, Tensor(np.zeros((1, 1, 8, 7), np.float32)), cos, sin)[0].asnumpy()


@pytest.mark.slow
@needs_kernel
@pytest.mark.parametrize("name", ["llama-gqa-llama3-rope", "mistral", "qwen2-tied"])
def test_model_with_fused_attention_matches_transformers(name, tmp_path):
    hf = make_hf_model(name)
    save_hf_model(hf, tmp_path)
    model = load_hf_model(tmp_path)
    assert fused.enable(model) == "fused"
    ids = random_ids()
    ref = reference_logits(hf, ids)
    assert np.abs(model.construct(Tensor(ids)).asnumpy() - ref).max() <= 1e-4
    assert np.abs(ms.jit(model.construct)(Tensor(ids)).asnumpy() - ref).max() <= 1e-4


@pytest.mark.slow
@needs_kernel
@pytest.mark.parametrize("method", ["lora", "full"])
def test_training_with_fused_kernels_follows_composed_ops(method, tmp_path):
    """Same model, same batches (right padding in one row): the compiled train step gives the same
    losses and trained weights (LoRA adapters; every weight, norms included, in full fine-tuning)
    with the kernels as with MindSpore's composed ops."""
    save_hf_model(make_hf_model("llama-gqa-llama3-rope"), tmp_path)
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 97, (4, 32)).astype(np.int32)
    mask = np.ones_like(ids)
    mask[2, 25:] = 0
    labels = np.where(mask == 1, ids, -100).astype(np.int32)
    results = {}
    for mode in ("composed", "fused"):
        ms.set_seed(0)
        model = load_hf_model(tmp_path)
        if method == "lora":
            inject_lora(model, 4, 8, 0.0, ["q_proj", "k_proj", "v_proj", "o_proj"])
            params = mark_only_lora_trainable(model)
        else:
            params = list(model.trainable_params())
        if mode == "fused":
            assert fused.enable(model) == "fused"
            assert isinstance(loss_cell(model), FusedCausalLMLoss)
        share_layer_graphs(model)
        model.set_train(True)
        step = TrainStep(model, adamw(params, WarmupDecaySchedule(1e-2, 0, 100, "constant", 0.1), 0.0), 1.0, None)
        losses = [step([(ids, labels, mask)])[0] for _ in range(4)]
        results[mode] = losses, {p.name: p.asnumpy() for p in params}
    np.testing.assert_allclose(results["fused"][0], results["composed"][0], rtol=1e-5)
    assert results["fused"][0][-1] < results["fused"][0][0] - 0.1
    # Adam moves a weight by ~lr whatever its gradient's size: a gradient near 0 that rounds
    # differently moves it differently (full fine-tuning, lr 1e-2: up to 4e-5 seen on 1 of 4,096)
    atol = 1e-5 if method == "lora" else 1e-4
    for name, value in results["composed"][1].items():
        np.testing.assert_allclose(results["fused"][1][name], value, rtol=1e-3, atol=atol)


def test_switch_off_leaves_composed_ops(tmp_path, monkeypatch):
    save_hf_model(make_hf_model("qwen2-tied"), tmp_path)
    model = load_hf_model(tmp_path)
    monkeypatch.setenv(fused.ENV_SWITCH, "0")
    assert fused.enable(model) == "composed: MINDTUNE_FUSED_KERNELS=0"
    assert all(layer.self_attn.fused is None and layer.input_layernorm.fused is None and layer.mlp.fused is None
               for layer in model.model.layers)
    assert not model.fused_attention and model.fused_loss is None and model.model.norm.fused is None


def test_missing_compiler_is_reported_and_falls_back(tmp_path, monkeypatch):
    save_hf_model(make_hf_model("qwen2-tied"), tmp_path / "model")
    model = load_hf_model(tmp_path / "model")
    monkeypatch.setenv("CXX", "no-such-compiler")
    monkeypatch.setenv(fused.ENV_CACHE, str(tmp_path / "kernels"))
    why = fused.enable(model)
    assert why.startswith("composed: no C++ compiler ('no-such-compiler' not on PATH")
    assert all(layer.self_attn.fused is None for layer in model.model.layers)


@pytest.mark.slow
@skips.unless(os.path.exists("/usr/bin/g++") or "CXX" in os.environ, "kernels", "no C++ compiler")
def test_failed_build_says_why_and_leaves_no_library(tmp_path, monkeypatch):
    broken = tmp_path / "attention.cc"
    broken.write_text("int mindtune_attention_forward( {\n")
    monkeypatch.setattr(fused, "SOURCES", (broken, fused.KERNELS / "rmsnorm.cc"))
    monkeypatch.setenv(fused.ENV_CACHE, str(tmp_path / "kernels"))
    with pytest.raises(fused.KernelUnavailable, match=r"building attention.cc, rmsnorm.cc failed .*attention.cc:1"):
        fused.build()
    assert list((tmp_path / "kernels").iterdir()) == []  # no partial .so under any name


@needs_kernel
def test_built_kernel_is_reused_from_the_cache():
    again = fused.build()
    assert again.path == KERNEL.path and again.seconds == 0.0


@skips.unless(os.path.exists("/usr/bin/g++") or "CXX" in os.environ, "kernels", "no C++ compiler")
def test_unwritable_kernel_cache_is_reported(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder should be")
    monkeypatch.setenv(fused.ENV_CACHE, str(blocker / "kernels"))
    with pytest.raises(fused.KernelUnavailable, match=r"cannot write the kernel cache .*MINDTUNE_KERNEL_CACHE"):
        fused.build()


@pytest.mark.slow
@needs_kernel
def test_left_padded_generation_with_fused_prefill_matches_composed(tmp_path):
    """Prompts of different lengths are left-padded; the prefill rotates each row's keys from its
    own positions and caches them: the greedy answers equal the composed ops' answers."""
    from core.engine.generate import SamplingSettings, generate
    save_hf_model(make_hf_model("llama-gqa-llama3-rope"), tmp_path)
    prompts = [[5, 17, 33, 2, 9, 41, 8], [12, 4], [7, 7, 19, 60]]
    answers = {}
    for mode in ("composed", "fused"):
        model = load_hf_model(tmp_path)
        if mode == "fused":
            assert fused.enable(model) == "fused"
        answers[mode] = generate(model, prompts, SamplingSettings(max_new_tokens=6), set(), 0)
    assert answers["fused"] == answers["composed"]
    assert all(len(a) == 6 for a in answers["fused"])


@needs_kernel
@pytest.mark.parametrize("shape, gemma", [((3, 70, 48), False), ((2, 37, 4, 16), False), ((2, 37, 4, 16), True),
                                          ((3, 70, 48), True)])
def test_rmsnorm_kernel_matches_float64_reference(shape, gemma):
    """y = w·x/rms(x), dx and dw against float64, over the hidden axis (B, T, hidden) and per head
    (QK-norm: rows of head_dim inside (B, T, H, D)); Gemma's x·(1 + w) as the model passes it, the
    weight 1 + w (the gradient reaches w unchanged). The weight's gradient does not depend on the
    kernel's thread count (a data-parallel worker runs with fewer threads than a single one)."""
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 2).astype(np.float32)
    w = ((0 if gemma else 1) + 0.1 * rng.standard_normal(shape[-1])).astype(np.float32)
    dy = rng.standard_normal(x.shape).astype(np.float32)
    x64, w64, dy64 = (a.astype(np.float64) for a in (x, w, dy))
    scale64 = 1 + w64 if gemma else w64
    r = 1 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + 1e-5)
    t = x64 * r
    g = dy64 * scale64
    rows = tuple(range(len(shape) - 1))
    ref_y, ref_dw, ref_dx = scale64 * t, (dy64 * t).sum(rows), r * (g - t * (g * t).mean(-1, keepdims=True))
    norm = fused.FusedRMSNorm(KERNEL).op
    eps = Tensor([1e-5], ms.float32)
    weight = (lambda w_: 1 + w_) if gemma else (lambda w_: w_)  # noqa: E731
    grad = ms.grad(lambda x_, w_: (norm(x_, weight(w_), eps)[0] * Tensor(dy)).sum(), grad_position=(0, 1))
    y, rstd = (a.asnumpy() for a in norm(Tensor(x), weight(Tensor(w)), eps))
    np.testing.assert_allclose(y, ref_y, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rstd, r[..., 0], rtol=1e-5)
    dws = []
    for threads in (1, 2, 3):
        fused.set_threads(KERNEL, threads)
        dx, dw = (a.asnumpy() for a in grad(Tensor(x), Tensor(w)))
        np.testing.assert_allclose(dx, ref_dx, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(dw, ref_dw, rtol=1e-5, atol=1e-4)
        dws.append(dw)
    fused.set_threads(KERNEL, 0)
    assert all(np.array_equal(dws[0], other) for other in dws[1:])


@needs_kernel
@pytest.mark.parametrize("softcap", [None, 5.0])
def test_cross_entropy_kernel_matches_float64_reference(softcap):
    """Each row's NLL of its target and the gradient softmax − one-hot (scaled by the incoming
    gradient); ignored rows (target −100) give 0 and no gradient. softcap: Gemma 2's final-logit
    cap c·tanh(x/c) inside the kernel, its gradient through 1 − tanh²."""
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((2, 9, 50)) * 3).astype(np.float32)
    targets = rng.integers(0, 50, (2, 9)).astype(np.int32)
    targets[0, :3] = -100
    dnll = rng.standard_normal((2, 9)).astype(np.float32)
    x64 = x.astype(np.float64)
    slope = 1.0
    if softcap:
        th = np.tanh(x64 / softcap)
        x64, slope = softcap * th, 1 - th ** 2
    lse = np.log(np.exp(x64 - x64.max(-1, keepdims=True)).sum(-1)) + x64.max(-1)
    valid = targets >= 0
    picked = np.take_along_axis(x64, np.maximum(targets, 0)[..., None], -1)[..., 0]
    ref_nll = np.where(valid, lse - picked, 0.0)
    onehot = np.eye(50)[np.maximum(targets, 0)]
    ref_dx = (np.exp(x64 - lse[..., None]) - onehot) * (dnll * valid)[..., None] * slope
    ce = fused.FusedCrossEntropy(KERNEL, softcap=softcap).op
    nll, lse_out = (a.asnumpy() for a in ce(Tensor(x), Tensor(targets)))
    np.testing.assert_allclose(nll, ref_nll, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(lse_out, lse, rtol=1e-6)
    dx = ms.grad(lambda x_: (ce(x_, Tensor(targets))[0] * Tensor(dnll)).sum())(Tensor(x)).asnumpy()
    np.testing.assert_allclose(dx, ref_dx, rtol=1e-4, atol=1e-6)
    assert not dx[0, :3].any()
    with pytest.raises(ValueError, match="cross-entropy softcap must be > 0"):
        fused.FusedCrossEntropy(KERNEL, softcap=0.0)


@needs_kernel
@pytest.mark.parametrize("softcap", [None, 5.0])
def test_token_entropy_kernel_matches_float64_reference(softcap):
    """GRPO's entropy figure: −Σ p·log p of each row's softmax (of the capped logits with softcap), 0 where
    the target is ignored, and no gradient."""
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((2, 9, 50)) * 3).astype(np.float32)
    targets = rng.integers(0, 50, (2, 9)).astype(np.int32)
    targets[1, 4:] = -100
    x64 = x.astype(np.float64) if not softcap else softcap * np.tanh(x.astype(np.float64) / softcap)
    p = np.exp(x64 - x64.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    reference = np.where(targets >= 0, -(p * np.log(p)).sum(-1), 0.0)
    op = fused.FusedTokenEntropy(KERNEL, softcap).op
    np.testing.assert_allclose(op(Tensor(x), Tensor(targets)).asnumpy(), reference, rtol=1e-5, atol=1e-6)
    dx = ms.grad(lambda x_: (op(x_, Tensor(targets)) * 3.0).sum() + (x_ * 0.0).sum())(Tensor(x)).asnumpy()
    assert not dx.any()


@needs_kernel
def test_cross_entropy_kernel_refuses_targets_of_another_shape():
    ce = fused.FusedCrossEntropy(KERNEL).op
    with pytest.raises((RuntimeError, ValueError)):
        ce(Tensor(np.zeros((2, 9, 5), np.float32)), Tensor(np.zeros((2, 8), np.int32)))[0].asnumpy()


@pytest.mark.slow
@needs_kernel
def test_evaluation_with_fused_loss_equals_composed(tmp_path):
    """The evaluation step's summed NLL and token count (right padding as core.data.pipeline pads, a prompt
    left unscored) with the kernels as with the composed ops."""
    save_hf_model(make_hf_model("qwen2-tied"), tmp_path)
    rng = np.random.default_rng(2)
    ids = rng.integers(0, 97, (3, 20)).astype(np.int32)
    mask = np.ones_like(ids)
    mask[1, 14:] = 0
    labels = np.where(mask == 1, ids, -100).astype(np.int32)
    labels[2, :4] = -100  # a prompt: not scored
    results = {}
    for mode in ("composed", "fused"):
        model = load_hf_model(tmp_path)
        if mode == "fused":
            assert fused.enable(model) == "fused"
        step = EvalStep(model)
        assert isinstance(step.loss, FusedCausalLMLoss if mode == "fused" else CausalLMLoss)
        results[mode] = step(ids, labels, mask)
    assert results["fused"][1] == results["composed"][1] == float((labels[:, 1:] != -100).sum())
    assert results["fused"][0] == pytest.approx(results["composed"][0], rel=1e-5)


@needs_kernel
@pytest.mark.parametrize("activation", ["silu", "gelu_tanh"])
def test_gate_kernel_matches_float64_reference(activation):
    """SwiGLU silu(g)·u, dg = dy·u·σ(g)·(1 + g·(1 − σ(g))), du = dy·silu(g); GeGLU (Gemma)
    gelu_tanh(g)·u as transformers' gelu_pytorch_tanh, its gradient by the derivative of
    ½·g·(1 + tanh(√(2/π)(g + 0.044715 g³)))."""
    rng = np.random.default_rng(3)
    g, u, dy = ((rng.standard_normal((3, 50, 70)) * 3).astype(np.float32) for _ in range(3))
    g64, u64, dy64 = (a.astype(np.float64) for a in (g, u, dy))
    if activation == "silu":
        sig = 1 / (1 + np.exp(-g64))
        act, slope = g64 * sig, sig * (1 + g64 * (1 - sig))
    else:
        c = np.sqrt(2 / np.pi)
        th = np.tanh(c * (g64 + 0.044715 * g64 ** 3))
        act = 0.5 * g64 * (1 + th)
        slope = 0.5 * (1 + th) + 0.5 * g64 * (1 - th ** 2) * c * (1 + 3 * 0.044715 * g64 ** 2)
    gate = fused.FusedSwiGLU(KERNEL, activation).op
    y = gate(Tensor(g), Tensor(u)).asnumpy()
    dg, du = (a.asnumpy() for a in ms.grad(lambda a, b: (gate(a, b) * Tensor(dy)).sum(), grad_position=(0, 1))(
        Tensor(g), Tensor(u)))
    np.testing.assert_allclose(y, act * u64, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dg, dy64 * u64 * slope, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(du, dy64 * act, rtol=1e-5, atol=1e-5)
    with pytest.raises((RuntimeError, ValueError)):  # gate and up of different shapes
        gate(Tensor(g), Tensor(u[:, :49])).asnumpy()


@needs_kernel
def test_geglu_kernel_matches_transformers_gelu_tanh():
    """Against the activation Gemma's checkpoints name (`gelu_pytorch_tanh`), in float32."""
    import torch
    from transformers.activations import ACT2FN
    rng = np.random.default_rng(4)
    g, u = ((rng.standard_normal((4, 33, 40)) * 4).astype(np.float32) for _ in range(2))
    ref = (ACT2FN["gelu_pytorch_tanh"](torch.from_numpy(g)) * torch.from_numpy(u)).numpy()
    ours = fused.FusedSwiGLU(KERNEL, "gelu_tanh").op(Tensor(g), Tensor(u)).asnumpy()
    np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=2e-6)
    with pytest.raises(ValueError, match="gate activation must be one of silu, gelu_tanh"):
        fused.FusedSwiGLU(KERNEL, "gelu")


@pytest.mark.slow
@skips.unless(os.path.exists("/usr/bin/g++") or "CXX" in os.environ, "kernels", "no C++ compiler")
def test_a_build_prunes_libraries_earlier_sources_left(tmp_path, monkeypatch):
    """The old attention-only library goes, as does a kernels library not rebuilt for 30 days;
    a recent one (another installation's) and unrelated files stay."""
    import time
    cache = tmp_path / "kernels"
    cache.mkdir()
    monkeypatch.setenv(fused.ENV_CACHE, str(cache))
    old_name, stale, recent, other = (cache / n for n in ("attention-0123.so", "kernels-aaaa.so", "kernels-bbbb.so",
                                                             "notes.txt"))
    for path in (old_name, stale, recent, other):
        path.write_bytes(b"x")
    month_ago = time.time() - 31 * 86400
    os.utime(stale, (month_ago, month_ago))
    built = fused.build()
    assert built.seconds > 0
    assert sorted(p.name for p in cache.iterdir()) == sorted([built.path.name, "kernels-bbbb.so", "notes.txt"])


BASELINE = "9b5e824580e207a1b969895c72f348a45044b78f"  # main before the options for the new families


@pytest.fixture(scope="module")
def baseline_kernel(tmp_path_factory):
    """The library built from the kernel sources at BASELINE (skipped outside a git checkout that
    has that commit, e.g. a shallow clone)."""
    import subprocess
    try:
        return fused.build_revision(BASELINE, tmp_path_factory.mktemp("baseline"))
    except (fused.KernelUnavailable, subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        skips.skip("kernels", f"the baseline kernels cannot be built here: {exc}")


@pytest.mark.slow
@needs_kernel
def test_default_options_are_bit_identical_to_the_baseline_library(baseline_kernel):
    """Today's path of every kernel (no option set) gives the same bits as the library before the
    options, forward and backward, on a fixed input: the demo run's trajectory depends on it.
    Attention over 150 tokens (three query blocks), grouped-query heads, a right-padded row and
    per-row (left-padding) tables."""
    assert baseline_kernel.path != KERNEL.path
    rng = np.random.default_rng(7)
    b, t, heads, kv, d = 2, 150, 4, 2, 32
    q = rng.standard_normal((b, t, heads, d)).astype(np.float32)
    k, v = (rng.standard_normal((b, t, kv, d)).astype(np.float32) for _ in range(2))
    mask = causal_mask(b, t, pad_right=[(1, 11)])
    cos, sin = rope_tables(b, t, d, offsets=[0, 3])
    dout, dkey = rng.standard_normal(q.shape).astype(np.float32), rng.standard_normal(k.shape).astype(np.float32)
    inputs = [Tensor(a) for a in (q, k, v, mask, cos, sin)]
    options = [Tensor(fused.attention_options())]
    results = {}
    for name, kernel, extra in (("baseline", baseline_kernel, []), ("new", KERNEL, options)):
        forward = fused._aot(kernel, "attention_forward", lambda q_, k_, *rest: (q_, [q_[0], q_[2], q_[1]], k_), 3)
        backward = fused._aot(kernel, "attention_backward", lambda q_, k_, v_, *rest: (q_, k_, v_), 3)
        out, lse, key = forward(*inputs, *extra)
        grads = backward(*inputs, *extra, out, lse, Tensor(dout), Tensor(dkey))
        results[name] = [a.asnumpy() for a in (out, lse, key, *grads)]
    for name, old, new in zip(("out", "lse", "key", "dq", "dk", "dv"), results["baseline"], results["new"]):
        assert np.array_equal(old, new), name

    x = (rng.standard_normal((3, 70, 48)) * 2).astype(np.float32)
    w = (1 + 0.1 * rng.standard_normal(48)).astype(np.float32)
    logits = (rng.standard_normal((4, 33, 300)) * 3).astype(np.float32)
    targets = rng.integers(-1, 300, (4, 33)).astype(np.int32)
    gate, up = ((rng.standard_normal((3, 50, 70)) * 3).astype(np.float32) for _ in range(2))
    eps = Tensor([1e-5], ms.float32)
    for name, kernel in (("baseline", baseline_kernel), ("new", KERNEL)):
        norm, ce, swiglu = fused.FusedRMSNorm(kernel).op, fused.FusedCrossEntropy(kernel).op, fused.FusedSwiGLU(kernel).op
        outs = [*norm(Tensor(x), Tensor(w), eps), *ce(Tensor(logits), Tensor(targets)), swiglu(Tensor(gate), Tensor(up))]
        outs += ms.grad(lambda x_, w_: (norm(x_, w_, eps)[0] * Tensor(x)).sum(), grad_position=(0, 1))(Tensor(x), Tensor(w))
        outs.append(ms.grad(lambda a: (ce(a, Tensor(targets))[0] * 0.5).sum())(Tensor(logits)))
        outs += ms.grad(lambda a, u: (swiglu(a, u) * Tensor(gate)).sum(), grad_position=(0, 1))(Tensor(gate), Tensor(up))
        results[name] = [a.asnumpy() for a in outs]
    names = ("norm y", "norm r", "nll", "lse", "gate y", "norm dx", "norm dw", "ce dx", "gate dg", "gate du")
    for name, old, new in zip(names, results["baseline"], results["new"]):
        assert np.array_equal(old, new), name


@pytest.mark.slow
@needs_kernel
@pytest.mark.parametrize("n, d_in, d_out, r", [(300, 48, 40, 8), (4100, 1024, 1030, 8)])
def test_lora_kernel_matches_float64_reference(n, d_in, d_out, r):
    """y = base + (x·Aᵀ)·(s·B)ᵀ with its gradients (base: dy; x: dy·s·B·A; A: s·(dy·B)ᵀ·x;
    B: s·dyᵀ·x·Aᵀ) over row blocks (one partial); a call this small runs on one thread, the large
    one on several; the weights' gradients do not depend on the thread count."""
    rng = np.random.default_rng(8)
    s = 2.0
    base, x = rng.standard_normal((n, d_out)).astype(np.float32), rng.standard_normal((n, d_in)).astype(np.float32)
    a, b = (rng.standard_normal(shape).astype(np.float32) * 0.3 for shape in ((r, d_in), (d_out, r)))
    dy = rng.standard_normal((n, d_out)).astype(np.float32)
    x64, a64, b64, dy64 = (v.astype(np.float64) for v in (x, a, b, dy))
    h = x64 @ a64.T
    ref_y = base + s * h @ b64.T
    g = dy64 @ b64 * s
    ref = (dy64, g @ a64, g.T @ x64, s * dy64.T @ h)  # d base, dx, dA, dB
    lora = fused.FusedLoRA(KERNEL).op
    scale = Tensor([s], ms.float32)
    y, hidden = (v.asnumpy() for v in lora(*(Tensor(v) for v in (base, x, a, b)), scale))
    close = lambda ours, ref, tol, **kw: np.testing.assert_allclose(  # noqa: E731  float32 sums of d_in terms
        ours, ref, rtol=tol, atol=tol * np.abs(ref).max(), **kw)
    close(y, ref_y, 1e-5)
    close(hidden, h, 1e-5)
    grad = ms.grad(lambda *t: (lora(*t, scale)[0] * Tensor(dy)).sum(), grad_position=(0, 1, 2, 3))
    runs = []
    for threads in (1, 2, 3):
        fused.set_threads(KERNEL, threads)
        runs.append([v.asnumpy() for v in grad(*(Tensor(v) for v in (base, x, a, b)))])
    fused.set_threads(KERNEL, 0)
    for name, ours, expected in zip(("dbase", "dx", "dA", "dB"), runs[0], ref):
        close(ours, expected, 1e-5, err_msg=name)
    assert all(np.array_equal(u, v) for other in runs[1:] for u, v in zip(runs[0], other))
    with pytest.raises((RuntimeError, ValueError)):  # lora_b of another rank
        lora(*(Tensor(v) for v in (base, x, a, b[:, :4])), scale)[0].asnumpy()


@pytest.mark.slow
@needs_kernel
@pytest.mark.parametrize("n, d_in, d_out, r", [(300, 48, 40, 8), (64, 900, 1030, 8), (4100, 1024, 1030, 16)])
def test_lora_kernel_with_its_base_product_matches_float64_reference(n, d_in, d_out, r):
    """y = x·Wᵀ + (x·Aᵀ)·(s·B)ᵀ for a frozen float32 W, with dx = dy·W + dy·s·B·A, dA and dB, W's gradient
    zeros. The product splits by rows where there are more rows than the weight has rows (columns, for
    dx), else by the weight's: the shapes take both ways, on one thread and on several; every gradient is
    the same whatever the thread count."""
    rng = np.random.default_rng(9)
    s = 2.0
    w, x = (rng.standard_normal(shape).astype(np.float32) * 0.2 for shape in ((d_out, d_in), (n, d_in)))
    a, b = (rng.standard_normal(shape).astype(np.float32) * 0.3 for shape in ((r, d_in), (d_out, r)))
    dy = rng.standard_normal((n, d_out)).astype(np.float32)
    w64, x64, a64, b64, dy64 = (v.astype(np.float64) for v in (w, x, a, b, dy))
    h = x64 @ a64.T
    ref_y = x64 @ w64.T + s * h @ b64.T
    g = dy64 @ b64 * s
    ref = (np.zeros_like(w64), dy64 @ w64 + g @ a64, g.T @ x64, s * dy64.T @ h)  # dW, dx, dA, dB
    op = fused.FusedLoRA(KERNEL).with_base
    scale = Tensor([s], ms.float32)
    y, hidden = (v.asnumpy() for v in op(*(Tensor(v) for v in (w, x, a, b)), scale))
    close = lambda ours, ref, tol, **kw: np.testing.assert_allclose(  # noqa: E731  float32 sums of d_in terms
        ours, ref, rtol=tol, atol=tol * max(np.abs(ref).max(), 1.0), **kw)
    close(y, ref_y, 1e-5)
    close(hidden, h, 1e-5)
    grad = ms.grad(lambda *t: (op(*t, scale)[0] * Tensor(dy)).sum(), grad_position=(0, 1, 2, 3))
    runs = []
    for threads in (1, 2, 3):
        fused.set_threads(KERNEL, threads)
        runs.append([v.asnumpy() for v in grad(*(Tensor(v) for v in (w, x, a, b)))])
    fused.set_threads(KERNEL, 0)
    for name, ours, expected in zip(("dW", "dx", "dA", "dB"), runs[0], ref):
        close(ours, expected, 1e-5, err_msg=name)
    assert all(np.array_equal(u, v) for other in runs[1:] for u, v in zip(runs[0], other))
    with pytest.raises((RuntimeError, ValueError)):  # a weight of another width
        op(*(Tensor(v) for v in (w[:, :-1], x, a, b)), scale)[0].asnumpy()


@pytest.mark.slow
@needs_kernel
def test_the_lora_backward_does_not_hold_the_base_output():
    """The base projection's output is needed by nothing after the LoRA forward; an input of the
    backward kernel would be held from the forward on (0.5B LoRA at 2 × 128: ~300 MB). Measured in
    a process of its own (tests/core/lora_memory_probe.py): 16 layers of 64 MB base outputs grow
    the peak by ~600 MB without them and by ~1,570 MB when the backward took the base."""
    import json
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-m", "tests.core.lora_memory_probe"], cwd=root, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    probe = json.loads(done.stdout.strip().splitlines()[-1])
    assert probe["growth_mb"] < probe["base_outputs_mb"], probe


@needs_kernel
def test_enable_routes_lora_without_dropout_through_the_kernel(tmp_path):
    """LoRA layers get the kernel; with dropout they keep the composed ops (the kernel draws no
    masks); a merged layer runs its plain Dense. The fused forward equals the composed one."""
    save_hf_model(make_hf_model("qwen2-tied"), tmp_path)
    ids = Tensor(random_ids())
    outputs = {}
    for dropout in (0.0, 0.1):
        ms.set_seed(0)
        model = load_hf_model(tmp_path)
        inject_lora(model, 4, 8, dropout, ["q_proj", "v_proj", "down_proj"])
        for cell in model.cells_and_names():
            if hasattr(cell[1], "lora_b"):
                cell[1].lora_b.set_data(Tensor(np.full(cell[1].lora_b.shape, 0.05, np.float32)))
        if dropout == 0.0:
            outputs["composed"] = model.construct(ids).asnumpy()
        assert fused.enable(model) == "fused"
        layers = [cell for _, cell in model.cells_and_names() if hasattr(cell, "lora_a")]
        assert len(layers) == 6 and all((c.fused is not None) == (dropout == 0.0) for c in layers)
        # the float32 base products (q and v with their biases here) run inside the kernel too
        assert all((c.fused_base is not None) == (dropout == 0.0) for c in layers)
        if dropout == 0.0:
            outputs["fused"] = model.construct(ids).asnumpy()
    assert np.abs(outputs["fused"] - outputs["composed"]).max() <= 1e-5
    assert np.abs(outputs["fused"]).max() > 0.1


@needs_kernel
def test_packed_forward_hands_the_segment_ids_to_the_kernel(tmp_path):
    """With segment_ids the model's layers call the kernel with them (its block skipping); the
    packed logits equal each sample alone (tests/core/test_model.py checks that for more
    families); without them the kernel gets None."""
    from mindspore import nn
    save_hf_model(make_hf_model("qwen2-tied"), tmp_path)
    model = load_hf_model(tmp_path)
    assert fused.enable(model) == "fused"

    class Recording(nn.Cell):
        def __init__(self, inner):
            super().__init__()
            self.inner, self.seen = inner, []

        def construct(self, q, k, v, mask, cos, sin, segment_ids=None):  # PyNative: runs as Python
            self.seen.append(None if segment_ids is None else segment_ids.asnumpy().copy())
            return self.inner(q, k, v, mask, cos, sin, segment_ids)

    recorders = []
    for layer in model.model.layers:
        layer.self_attn.fused = Recording(layer.self_attn.fused)
        recorders.append(layer.self_attn.fused)
    first, second = random_ids(1, 10, seed=3), random_ids(1, 14, seed=4)
    ids = np.concatenate([first, second], 1)
    positions = np.array([list(range(10)) + list(range(14))], np.int32)
    segments = np.array([[1] * 10 + [2] * 14], np.int32)
    packed = model.construct(Tensor(ids), None, Tensor(positions), Tensor(segments)).asnumpy()
    assert all(len(r.seen) == 1 and np.array_equal(r.seen[0], segments) for r in recorders)
    assert np.abs(packed[0, 10:] - model.construct(Tensor(second)).asnumpy()[0]).max() < 1e-5
    assert all(r.seen[-1] is None for r in recorders)
