"""The CPU's fused kernels (core/kernels/*.cc): attention, RMSNorm and cross-entropy against float64
NumPy references of their values and textbook gradients, the model with them against transformers
and against its composed ops, training and evaluation with them, and their fallbacks."""
import os

import numpy as np
import pytest

import mindspore as ms
from mindspore import Tensor, ops

from core import fused
from core.checkpoint import load_hf_model
from core.lora import inject_lora, mark_only_lora_trainable
from core.model import MASK_MIN, share_layer_graphs
from core.train_step import (CausalLMLoss, EvalStep, FusedCausalLMLoss, TrainStep, WarmupDecaySchedule, adamw,
                              loss_cell)
from tests.core.hf_fixtures import make_hf_model, random_ids, reference_logits, save_hf_model

try:
    KERNEL = fused.build()
except fused.KernelUnavailable as exc:  # no C++ compiler: the engine runs composed ops
    KERNEL, WHY = None, str(exc)
needs_kernel = pytest.mark.skipif(KERNEL is None, reason="fused kernels unavailable here")


def rotate_half(x):
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], -1)


def rope_tables(batch, t, d, offsets=None):
    """cos, sin (B|1, 1, T, D) as core.model.CausalLM.rope makes them (per-row offsets: left padding)."""
    inv = 1.0 / 10000 ** (np.arange(0, d, 2) / d)
    pos = np.arange(t)[None, :] - (np.zeros((1, 1)) if offsets is None else np.asarray(offsets)[:, None])
    freqs = pos[..., None] * inv
    emb = np.concatenate([freqs, freqs], -1)[:, None]
    return np.cos(emb).astype(np.float32), np.sin(emb).astype(np.float32)


def reference(q, k, v, mask, cos, sin, dout):
    """float64 RoPE + attention and its gradients (softmax backward as P∘(dP − Σ P∘dP)), k/v
    repeated to the query heads (Hugging Face's repeat_kv) and their gradients summed back."""
    q, k, v, mask, cos, sin, dout = (np.asarray(a, np.float64) for a in (q, k, v, mask, cos, sin, dout))
    qr, kr0 = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
    rep = q.shape[1] // k.shape[1]
    kr, vr = np.repeat(kr0, rep, axis=1), np.repeat(v, rep, axis=1)
    scale = q.shape[-1] ** -0.5
    scores = qr @ kr.transpose(0, 1, 3, 2) * scale + mask
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    out = probs @ vr
    dv = probs.transpose(0, 1, 3, 2) @ dout
    dp = dout @ vr.transpose(0, 1, 3, 2)
    ds = probs * (dp - (probs * dp).sum(-1, keepdims=True))
    dqr = ds @ kr * scale
    dkr = ds.transpose(0, 1, 3, 2) @ qr * scale
    group = lambda g: g.reshape(g.shape[0], k.shape[1], rep, *g.shape[2:]).sum(2)  # noqa: E731
    # through the rotation: x·cos + rotate_half(x)·sin is linear in x; the gradient of
    # sum(rotate_half(x)·z) with respect to x is (z₂, −z₁) = −rotate_half(z)
    unrotate = lambda g: g * cos - rotate_half(g * sin)  # noqa: E731
    return out, unrotate(dqr), unrotate(group(dkr)), group(dv), kr0


def causal_mask(batch, t, pad_right=(), per_head=1):
    mask = np.triu(np.full((t, t), MASK_MIN, np.float32), 1)[None, None].repeat(batch, 0).repeat(per_head, 1)
    for row, n in pad_right:
        mask[row, :, :, t - n:] = MASK_MIN  # padding keys: nobody sees them
    return mask


@needs_kernel
@pytest.mark.parametrize("heads, kv_heads, head_dim, t, per_head, row_tables",
                         [(4, 2, 16, 100, 1, False), (3, 3, 8, 64, 3, True), (2, 1, 32, 7, 1, False)])
def test_kernel_matches_float64_reference(heads, kv_heads, head_dim, t, per_head, row_tables):
    rng = np.random.default_rng(0)
    b = 3
    q = rng.standard_normal((b, heads, t, head_dim)).astype(np.float32)
    k, v = (rng.standard_normal((b, kv_heads, t, head_dim)).astype(np.float32) for _ in range(2))
    mask = causal_mask(b, t, pad_right=[(1, 5)], per_head=per_head if per_head == 1 else heads)
    cos, sin = rope_tables(b, t, head_dim, offsets=[0, 2, 5] if row_tables else None)
    dout = rng.standard_normal(q.shape).astype(np.float32)
    attention = fused.FusedAttention(KERNEL)
    tensors = [Tensor(a) for a in (mask, cos, sin)]
    # the kernel takes and returns the heads as the projections lay them out: (B, T, heads, D)
    bthd = lambda a: Tensor(np.ascontiguousarray(a.transpose(0, 2, 1, 3)))  # noqa: E731
    grad = ms.grad(lambda q_, k_, v_: (attention(q_, k_, v_, *tensors)[0] * bthd(dout)).sum(), grad_position=(0, 1, 2))
    out, key = (a.asnumpy().transpose(0, 2, 1, 3) for a in attention(bthd(q), bthd(k), bthd(v), *tensors))
    dq, dk, dv = (g.asnumpy().transpose(0, 2, 1, 3) for g in grad(bthd(q), bthd(k), bthd(v)))
    for ours, ref in zip((out, dq, dk, dv, key), reference(q, k, v, mask, cos, sin, dout)):
        assert ours.shape == ref.shape
        np.testing.assert_allclose(ours, ref, rtol=1e-4, atol=2e-5)


@needs_kernel
def test_kernel_refuses_a_mask_of_the_wrong_shape():
    q = Tensor(np.zeros((1, 8, 2, 4), np.float32))  # (B, T, heads, D)
    kv = Tensor(np.zeros((1, 8, 2, 4), np.float32))
    cos, sin = (Tensor(a) for a in rope_tables(1, 8, 4))
    with pytest.raises(RuntimeError):
        fused.FusedAttention(KERNEL)(q, kv, kv, Tensor(np.zeros((1, 1, 8, 7), np.float32)), cos, sin)[0].asnumpy()


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


@pytest.mark.skipif(not os.path.exists("/usr/bin/g++") and "CXX" not in os.environ, reason="no C++ compiler")
def test_failed_build_says_why_and_leaves_no_library(tmp_path, monkeypatch):
    broken = tmp_path / "attention.cc"
    broken.write_text("int mindtune_attention_forward( {\n")
    monkeypatch.setattr(fused, "SOURCES", (broken, fused.SOURCES[1]))
    monkeypatch.setenv(fused.ENV_CACHE, str(tmp_path / "kernels"))
    with pytest.raises(fused.KernelUnavailable, match=r"building attention.cc, rmsnorm.cc failed .*attention.cc:1"):
        fused.build()
    assert list((tmp_path / "kernels").iterdir()) == []  # no partial .so under any name


@needs_kernel
def test_built_kernel_is_reused_from_the_cache():
    again = fused.build()
    assert again.path == KERNEL.path and again.seconds == 0.0


@pytest.mark.skipif(not os.path.exists("/usr/bin/g++") and "CXX" not in os.environ, reason="no C++ compiler")
def test_unwritable_kernel_cache_is_reported(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder should be")
    monkeypatch.setenv(fused.ENV_CACHE, str(blocker / "kernels"))
    with pytest.raises(fused.KernelUnavailable, match=r"cannot write the kernel cache .*MINDTUNE_KERNEL_CACHE"):
        fused.build()


@needs_kernel
def test_left_padded_generation_with_fused_prefill_matches_composed(tmp_path):
    """Prompts of different lengths are left-padded; the prefill rotates each row's keys from its
    own positions and caches them: the greedy answers equal the composed ops' answers."""
    from core.generate import SamplingSettings, generate
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
def test_rmsnorm_kernel_matches_float64_reference():
    """y = w·x/rms(x), dx and dw against float64; the weight's gradient does not depend on the
    kernel's thread count (a data-parallel worker runs with fewer threads than a single one)."""
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((3, 70, 48)) * 2).astype(np.float32)
    w = (1 + 0.1 * rng.standard_normal(48)).astype(np.float32)
    dy = rng.standard_normal(x.shape).astype(np.float32)
    x64, w64, dy64 = (a.astype(np.float64) for a in (x, w, dy))
    r = 1 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + 1e-5)
    t = x64 * r
    g = dy64 * w64
    ref_y, ref_dw, ref_dx = w64 * t, (dy64 * t).sum((0, 1)), r * (g - t * (g * t).mean(-1, keepdims=True))
    norm = fused.FusedRMSNorm(KERNEL).op
    eps = Tensor([1e-5], ms.float32)
    grad = ms.grad(lambda x_, w_: (norm(x_, w_, eps)[0] * Tensor(dy)).sum(), grad_position=(0, 1))
    y, rstd = (a.asnumpy() for a in norm(Tensor(x), Tensor(w), eps))
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
def test_cross_entropy_kernel_matches_float64_reference():
    """Each row's NLL of its target and the gradient softmax − one-hot (scaled by the incoming
    gradient); ignored rows (target −100) give 0 and no gradient."""
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((2, 9, 50)) * 3).astype(np.float32)
    targets = rng.integers(0, 50, (2, 9)).astype(np.int32)
    targets[0, :3] = -100
    dnll = rng.standard_normal((2, 9)).astype(np.float32)
    x64 = x.astype(np.float64)
    lse = np.log(np.exp(x64 - x64.max(-1, keepdims=True)).sum(-1)) + x64.max(-1)
    valid = targets >= 0
    picked = np.take_along_axis(x64, np.maximum(targets, 0)[..., None], -1)[..., 0]
    ref_nll = np.where(valid, lse - picked, 0.0)
    onehot = np.eye(50)[np.maximum(targets, 0)]
    ref_dx = (np.exp(x64 - lse[..., None]) - onehot) * (dnll * valid)[..., None]
    ce = fused.FusedCrossEntropy(KERNEL).op
    nll, lse_out = (a.asnumpy() for a in ce(Tensor(x), Tensor(targets)))
    np.testing.assert_allclose(nll, ref_nll, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(lse_out, lse, rtol=1e-6)
    dx = ms.grad(lambda x_: (ce(x_, Tensor(targets))[0] * Tensor(dnll)).sum())(Tensor(x)).asnumpy()
    np.testing.assert_allclose(dx, ref_dx, rtol=1e-4, atol=1e-6)
    assert not dx[0, :3].any()


@needs_kernel
def test_cross_entropy_kernel_refuses_targets_of_another_shape():
    ce = fused.FusedCrossEntropy(KERNEL).op
    with pytest.raises((RuntimeError, ValueError)):
        ce(Tensor(np.zeros((2, 9, 5), np.float32)), Tensor(np.zeros((2, 8), np.int32)))[0].asnumpy()


@needs_kernel
def test_evaluation_with_fused_loss_equals_composed(tmp_path):
    """The evaluation step's summed NLL and token count (right padding as core.data pads, a prompt
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
def test_swiglu_kernel_matches_float64_reference():
    """silu(g)·u and its gradients dg = dy·u·σ(g)·(1 + g·(1 − σ(g))), du = dy·silu(g)."""
    rng = np.random.default_rng(3)
    g, u, dy = ((rng.standard_normal((3, 50, 70)) * 3).astype(np.float32) for _ in range(3))
    g64, u64, dy64 = (a.astype(np.float64) for a in (g, u, dy))
    sig = 1 / (1 + np.exp(-g64))
    gate = fused.FusedSwiGLU(KERNEL).op
    y = gate(Tensor(g), Tensor(u)).asnumpy()
    dg, du = (a.asnumpy() for a in ms.grad(lambda a, b: (gate(a, b) * Tensor(dy)).sum(), grad_position=(0, 1))(
        Tensor(g), Tensor(u)))
    np.testing.assert_allclose(y, g64 * sig * u64, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dg, dy64 * u64 * sig * (1 + g64 * (1 - sig)), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(du, dy64 * g64 * sig, rtol=1e-5, atol=1e-5)
    with pytest.raises((RuntimeError, ValueError)):  # gate and up of different shapes
        gate(Tensor(g), Tensor(u[:, :49])).asnumpy()


@pytest.mark.skipif(not os.path.exists("/usr/bin/g++") and "CXX" not in os.environ, reason="no C++ compiler")
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
