"""Issue 30: the GPU/Ascend paths, chosen where the device is read (core.engine.devices.target, faked here)
and pinned on the CPU: attention and loss paths with their numbers against the composed CPU path,
the reduction ops, the overflow flag reduced across ranks, the per-device peak, a device OOM, the
profiler's activities and tables, the bf16 rule, the dry run's device and the estimate's device
branch. Issue 40: Ascend's attention by chip (the SoC faked where MindSpore reports it) and head
size, the estimate's flash and composed branches to the byte, the fit check's three answers, the
chunked loss's peak against the unchunked one (tests/core/chunked_loss_probe.py). Where the worker,
the Trainer and the dry run make these choices: tests/core/test_device_worker.py. Everything that
needs a device is in tests/device/."""
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import mindspore as ms
from mindspore import Tensor, amp, nn, ops

import core.spec.device_paths as device_paths
import core.engine.devices as devices
from core.engine.target import faked
import core.run.launcher as launcher
import core.engine.profiling as profiling
import core.run.ranks as ranks
from core.spec.config import Config, ConfigError
from core.spec.memory import estimate_memory
from core.engine.model import CausalLM, ModelArgs
from core.engine.ops import LastAxisMean, Softmax
from core.run.records import TrainRecord
from core.engine.train_step import (CausalLMLoss, EvalStep, TrainStep, WarmupDecaySchedule, adamw, global_norm,
                             next_token_targets)
from tests.core.fake_device import FakeDevice, fake_device, fake_soc

HF = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 61, "hidden_size": 32,
      "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
      "max_position_embeddings": 128, "tie_word_embeddings": True, "rms_norm_eps": 1e-5}


def tiny(device: str | None = None, **changes) -> CausalLM:
    """The tiny Llama, same weights every time, built as `device` would build it."""
    args = ModelArgs.from_hf_config({**HF, **changes})
    ms.set_seed(0)
    np.random.seed(0)
    if device is None:
        return CausalLM(args)
    with faked(device):
        return CausalLM(args)


def batch(b=2, t=12, vocab=61, seed=3):
    rng = np.random.RandomState(seed)
    ids = rng.randint(0, vocab, (b, t)).astype(np.int32)
    labels = ids.copy()
    labels[:, :4] = -100  # the prompt
    mask = np.ones((b, t), np.int32)
    mask[1, -3:] = 0  # right padding
    labels[1, -3:] = -100
    return ids, labels, mask


# ---- the one place ----------------------------------------------------------------------------------

def test_the_target_is_read_in_one_place_and_a_test_can_fake_it():
    assert devices.target() == "cpu"
    with faked("ascend"):
        assert devices.target() == "ascend"
        with faked("gpu"):
            assert devices.target() == "gpu"
        assert devices.target() == "ascend"
    assert devices.target() == "cpu"
    with pytest.raises(ValueError):
        faked("tpu").__enter__()
    assert device_paths.device_of("Ascend") == "ascend" and device_paths.device_of("GPU") == "gpu"


# ---- item 1: attention and loss ---------------------------------------------------------------------

def test_attention_path_per_device_dtype_and_layer_needs():
    def path(device, dtype, needs=None, packed=False, head_dim=64, soc="ascend910b"):
        return device_paths.attention_path(device, dtype, head_dim=head_dim, soc=soc, needs=needs, packed=packed)
    assert path("cpu", "float32")[0] == "cpu-kernel"
    assert path("gpu", "float16")[0] == "composed"
    assert path("ascend", "float16")[0] == "flash" and path("ascend", "bfloat16")[0] == "flash"
    assert path("ascend", "float16", {"scale": 0.1, "rotary_dim": 8})[0] == "flash"  # given to the kernel
    why = path("ascend", "float32")
    assert why[0] == "composed" and "float16/bfloat16" in why[1] and "O2" in why[1]
    assert "softcap" in path("ascend", "float16", {"softcap": 50.0})[1]
    assert "window" in path("ascend", "float16", {"window": 64})[1]
    assert "packed" in path("ascend", "float16", packed=True)[1]
    assert device_paths.attention_dtype("O2", "float16", "float32") == "float16"
    assert device_paths.attention_dtype("O1", "float16", "float32") == "float32"  # amp_dense casts back


@pytest.mark.parametrize("soc, head_dim, path, said", [
    ("ascend910b", 64, "flash", "path.ascend_flash"),          # Atlas A2 (910B), head size 64
    ("Ascend910B3", 64, "flash", "path.ascend_flash"),         # the chip as ACL / npu-smi name it
    ("ascend910_93", 128, "flash", "path.ascend_flash"),       # Atlas A3 (910C)
    ("ascend910b", 8, "composed", "path.ascend_head_dim"),     # the tiny models' head size
    ("ascend910b", 24, "composed", "path.ascend_head_dim"),    # not a multiple of 16
    ("ascend910b", 576, "composed", "path.ascend_head_dim"),   # over 512
    ("ascend910", 64, "composed", "path.ascend_chip"),         # 910A: the Atlas training series
    ("ascend910", 8, "composed", "path.ascend_chip"),          # the chip is said first
    ("ascend310p", 64, "composed", "path.ascend_chip"),
    (None, 64, "composed", "path.ascend_chip_unknown"),        # the console, npu-smi silent
    ("", 64, "composed", "path.ascend_chip_unknown"),          # MindSpore's CPU build answers ''
])
def test_ascend_attention_by_chip_and_head_size(soc, head_dim, path, said):
    chosen, why = device_paths.attention_path("ascend", "float16", head_dim=head_dim, soc=soc)
    assert (chosen, why.key) == (path, said)
    if said == "path.ascend_head_dim":
        assert f"this model's is {head_dim}" in why
    if said == "path.ascend_chip":
        assert soc in why and "910B" in why
    # the chip rule the console's device line reads is the same
    assert device_paths.flash_chip(soc) is (None if not soc else soc.lower().startswith(("ascend910b", "ascend910_93")))


def test_npu_smi_and_acl_chip_names_read_as_mindspores_soc_names():
    names = {"910B3": "ascend910b", "Ascend 910B1": "ascend910b", "ascend910b": "ascend910b",
             "Ascend910_9391": "ascend910_93", "910A": "ascend910", "910ProA": "ascend910", "910PremiumA": "ascend910",
             "Ascend910": "ascend910", "310P3": "ascend310p", "ascend310b": "ascend310b", "Mcu": None, "": None}
    assert {name: device_paths.soc_name(name) for name in names} == names


def test_gpu_build_holds_no_head_broadcast_mask_and_matches_the_cpu_logits():
    ref, dev = tiny(), tiny("gpu")
    assert ref.explicit_broadcast and not dev.explicit_broadcast
    assert all(not layer.self_attn.explicit_broadcast for layer in dev.model.layers)
    ids, _, mask = batch()
    np.testing.assert_allclose(dev(Tensor(ids), Tensor(mask)).asnumpy(), ref(Tensor(ids), Tensor(mask)).asnumpy(),
                               atol=2e-6)


@pytest.fixture(scope="module")
def gpu_pair():
    """The CPU's composed model and the same weights as a GPU worker sets them up (chunked head loss)."""
    ref, dev = tiny(), tiny("gpu")
    with faked("gpu"):
        kernels = devices.enable_kernels(dev)
    return ref, dev, kernels


def test_gpu_runs_the_head_and_loss_in_chunks_with_no_logits(gpu_pair):
    _, dev, kernels = gpu_pair
    assert isinstance(dev.head_loss, devices.ChunkedHeadLoss) and dev.head_loss.weight_grad  # full: the head trains
    assert isinstance(dev.fused_loss, devices.ChunkedLogitsLoss)
    assert not dev.fused_attention and not dev.mask_free
    assert kernels.startswith("gpu: LM head + loss chunked") and "no fused attention for GPU" in kernels


@pytest.mark.slow
def test_chunked_head_loss_trains_exactly_as_the_composed_loss(gpu_pair):
    """The device's jitted micro step (forward and backward through the chunked head loss, split into
    5-token chunks: 24 tokens, the last chunk partial, ignored rows among them) against the CPU's
    composed loss: the loss and every gradient agree; so does the evaluation step."""
    ref, dev, _ = gpu_pair
    dev.head_loss.chunk = 5
    ids, labels, mask = batch()
    steps = []
    for model, device in ((ref, "cpu"), (dev, "gpu")):
        with faked(device):
            params = list(model.trainable_params())
            steps.append(TrainStep(model, adamw(params, WarmupDecaySchedule(1e-2, 0, 10, "constant", 0.0), 0.0),
                                   1.0, None))
    assert steps[1].on_hidden and not steps[0].on_hidden
    tensors = [Tensor(a) for a in (ids, labels, mask)]
    ref_loss, ref_grads, _ = steps[0]._micro_step(*tensors)  # PyNative
    dev_loss, dev_grads, _ = steps[1]._micro(*tensors)  # compiled, as the worker runs it
    assert float(dev_loss.asnumpy()) == pytest.approx(float(ref_loss.asnumpy()), abs=1e-6)
    for param, want, got in zip(steps[0].optimizer.parameters, ref_grads, dev_grads):
        np.testing.assert_allclose(got.asnumpy(), want.asnumpy(), atol=2e-6, err_msg=param.name)
    ref_eval, dev_eval = EvalStep(ref)._nll(*tensors), EvalStep(dev)._nll(*tensors)  # PyNative (the
    # compiled forward is the micro step's)
    assert float(dev_eval[1].asnumpy()) == float(ref_eval[1].asnumpy())
    assert float(dev_eval[0].asnumpy()) == pytest.approx(float(ref_eval[0].asnumpy()), rel=1e-6)


def _composed_nll(logits, targets):
    log_probs = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True)) \
        - logits.max(-1, keepdims=True)
    picked = np.take_along_axis(log_probs, np.maximum(targets, 0)[..., None], -1)[..., 0]
    return np.where(targets >= 0, -picked, 0.0)


def test_chunked_losses_against_the_composed_gradient():
    rng = np.random.RandomState(0)
    hidden, weight = rng.randn(13, 8).astype(np.float32), rng.randn(17, 8).astype(np.float32)
    targets = rng.randint(0, 17, 13).astype(np.int32)
    targets[[2, 7]] = -100
    head = devices.ChunkedHeadLoss(chunk=4)

    def head_sum(h, w):
        return head(h, w, Tensor(targets))[:, 0].sum()
    value, (dh, dw) = ms.value_and_grad(head_sum, (0, 1))(Tensor(hidden), Tensor(weight))
    logits = hidden @ weight.T
    assert float(value) == pytest.approx(_composed_nll(logits, targets).sum(), rel=1e-5)
    # textbook gradient: (softmax − onehot) on labelled rows
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    g = probs.copy()
    g[np.arange(13), np.maximum(targets, 0)] -= 1
    g[targets < 0] = 0
    np.testing.assert_allclose(dh.asnumpy(), g @ weight, atol=1e-5)
    np.testing.assert_allclose(dw.asnumpy(), g.T @ hidden, atol=1e-5)
    frozen = devices.ChunkedHeadLoss(chunk=4, weight_grad=False)
    _, (dh2, dw2) = ms.value_and_grad(lambda h, w: frozen(h, w, Tensor(targets))[:, 0].sum(), (0, 1))(
        Tensor(hidden), Tensor(weight))
    np.testing.assert_allclose(dh2.asnumpy(), dh.asnumpy(), atol=1e-6)
    assert not dw2.asnumpy().any()

    # on existing logits (a LoRA or soft-capped head): the same as CausalLMLoss, value and gradient
    logits3 = Tensor(rng.randn(2, 7, 17).astype(np.float32))
    labels = Tensor(rng.randint(0, 17, (2, 7)).astype(np.int32))
    chunked = devices.ChunkedLogitsLoss(chunk=3)

    def chunked_sum(x):
        return chunked(x, next_token_targets(labels))[0].sum()
    composed = CausalLMLoss()
    v1, g1 = ms.value_and_grad(chunked_sum)(logits3)
    v2, g2 = ms.value_and_grad(lambda x: composed(x, labels)[0])(logits3)
    assert float(v1) == pytest.approx(float(v2), rel=1e-6)
    np.testing.assert_allclose(g1.asnumpy(), g2.asnumpy(), atol=1e-6)


def test_a_lora_or_soft_capped_head_keeps_its_logits_and_chunks_the_loss():
    assert device_paths.loss_path("gpu", None, False) == "chunked-head"
    assert device_paths.loss_path("ascend", 30.0, False) == "chunked-logits"
    assert device_paths.loss_path("gpu", None, True) == "chunked-logits"
    assert device_paths.loss_path("cpu", None, False) == "cpu-kernel"
    dev = tiny("gpu")
    dev.final_softcap = 30.0  # a capped head (Gemma 2): the chunked loss on the logits, the cap composed before it
    with faked("gpu"):
        kernels = devices.enable_kernels(dev)
    assert dev.head_loss is None and isinstance(dev.fused_loss, devices.ChunkedLogitsLoss)
    assert "loss chunked on the logits" in kernels


def reference_flash(calls):
    """A composed stand-in for ops.flash_attention_score in BSND layout (the kernel is Ascend-only):
    records how it was called and computes softmax(q·kᵀ·scale + mask)·v with grouped heads."""
    def kernel(q, k, v, head_num, attn_mask=None, scalar_value=1.0, input_layout="BSH", sparse_mode=0):
        calls.append({"head_num": head_num, "layout": input_layout, "sparse_mode": sparse_mode,
                      "mask": attn_mask.asnumpy(), "scale": scalar_value})
        b, s, n, d = q.shape
        kv = k.shape[2]
        qh = q.transpose(0, 2, 1, 3)
        kh = ops.repeat_interleave(k.transpose(0, 2, 1, 3), n // kv, 1)
        vh = ops.repeat_interleave(v.transpose(0, 2, 1, 3), n // kv, 1)
        scores = ops.matmul(qh, kh.transpose(0, 1, 3, 2)) * scalar_value
        masked = attn_mask[:s, :s] if sparse_mode == 2 else attn_mask
        scores = ops.masked_fill(scores, ops.cast(masked, ms.bool_), float(np.finfo(np.float32).min))
        return ops.matmul(ops.softmax(scores, -1), vh).transpose(0, 2, 1, 3)
    return kernel


def test_ascend_chooses_flash_attention_in_half_precision_and_composed_in_float32(monkeypatch):
    fake_soc(monkeypatch, FakeDevice("ascend", soc="ascend910b"))  # the chip, as MindSpore reports it
    dev = tiny("ascend", hidden_size=64)  # head size 16
    with faked("ascend"):
        kernels = devices.enable_kernels(dev, amp_level="O2", compute_dtype="float16")
    ops_used = [layer.self_attn.fused for layer in dev.model.layers]
    assert all(isinstance(op, devices.FlashAttention) and op.kernel is ops.flash_attention_score for op in ops_used)
    assert all(op.dtypes == (ms.float16, ms.bfloat16) for op in ops_used)
    assert dev.fused_attention and dev.mask_free and "FlashAttentionScore" in kernels
    assert kernels.startswith("ascend (ascend910b): ")
    fp32 = tiny("ascend", hidden_size=64)
    with faked("ascend"):
        kernels = devices.enable_kernels(fp32)  # O0: attention computes in float32
    assert not fp32.fused_attention and "float16/bfloat16" in kernels
    packed = tiny("ascend", hidden_size=64)
    with faked("ascend"):
        kernels = devices.enable_kernels(packed, amp_level="O2", packed=True)
    assert not packed.fused_attention and "packed" in kernels


@pytest.mark.parametrize("soc, hidden, said", [("ascend910", 64, "not on this ascend910"),
                                               ("ascend910b", 32, "this model's is 8"),
                                               ("", 64, "the chip is not known here")])
def test_ascend_keeps_attention_composed_on_a_910a_a_head_size_of_8_or_an_unknown_chip(monkeypatch, soc, hidden, said):
    """A 910A user on AMP O2, or the tiny models' head size of 8: FlashAttentionScore would fail at the
    first step, so the worker builds the composed attention and the setup event's `kernels` says why."""
    fake_soc(monkeypatch, FakeDevice("ascend", soc=soc))
    model = tiny("ascend", hidden_size=hidden)
    with faked("ascend"):
        kernels = devices.enable_kernels(model, amp_level="O2", compute_dtype="float16")
    assert not model.fused_attention and not model.mask_free
    assert all(layer.self_attn.fused is None for layer in model.model.layers)
    assert said in kernels and "FlashAttentionScore" in kernels and "attention: FlashAttentionScore" not in kernels


def test_flash_attention_wiring_matches_the_composed_attention():
    """Everything around the kernel (RoPE in BSND, grouped heads, the causal mode without a mask,
    the cached prefill's mask) against the CPU's composed model, with a composed kernel in its place."""
    ref, dev = tiny(), tiny("ascend")
    calls = []
    op = devices.FlashAttention(kernel=reference_flash(calls), dtypes=(ms.float32,))
    dev.use_kernels(attention=lambda **needs: op)
    assert dev.mask_free
    ids, _, mask = batch()
    real = mask.astype(bool)  # right padding: the causal mode lets a padding query see padding keys, whose
    # outputs no loss reads; every real position sees exactly the keys the composed mask allows
    np.testing.assert_allclose(dev(Tensor(ids), Tensor(mask)).asnumpy()[real],
                               ref(Tensor(ids), Tensor(mask)).asnumpy()[real], atol=2e-5)
    first = calls[0]
    assert (first["layout"], first["sparse_mode"], first["head_num"]) == ("BSND", 2, 4)
    assert first["mask"].shape == (2048, 2048) and first["mask"][0, 1] == 1 and first["mask"][1, 0] == 0
    assert first["scale"] == pytest.approx(8 ** -0.5)
    # generation's prefill with left padding passes its mask (sparse_mode 0)
    calls.clear()
    left = np.array([[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]], np.int32)
    positions = Tensor(np.maximum(np.cumsum(left, 1) - 1, 0).astype(np.int32))
    ids6 = Tensor(ids[:, :6])
    out_dev, _ = dev.forward_cached(ids6, None, positions, Tensor(left.astype(bool)))
    out_ref, _ = ref.forward_cached(ids6, None, positions, Tensor(left.astype(bool)))
    assert calls[0]["sparse_mode"] == 0
    np.testing.assert_allclose(out_dev.asnumpy()[:, 2:], out_ref.asnumpy()[:, 2:], atol=2e-5)


# ---- item 9: reductions ------------------------------------------------------------------------------

def test_devices_take_reduction_ops_not_the_cpu_matmul_trick():
    with faked("ascend"):
        mean, softmax = LastAxisMean(8), Softmax()
    assert not mean.by_matmul and not softmax.by_matmul
    assert LastAxisMean(8).by_matmul and Softmax().by_matmul
    x = Tensor(np.random.RandomState(0).randn(3, 8).astype(np.float32))
    np.testing.assert_allclose(mean(x, True).asnumpy(), LastAxisMean(8)(x, True).asnumpy(), atol=1e-6)
    g1 = ms.grad(lambda y: (softmax(y) * y).sum())(x)
    g2 = ms.grad(lambda y: (Softmax()(y) * y).sum())(x)
    np.testing.assert_allclose(g1.asnumpy(), g2.asnumpy(), atol=1e-6)
    grads = (x, Tensor(np.arange(5, dtype=np.float32)))
    assert float(global_norm(grads, False)) == pytest.approx(float(global_norm(grads, True)), rel=1e-6)


# ---- item 3: the overflow flag across ranks ----------------------------------------------------------

class PeerOverflowed(nn.Cell):
    """The AllReduce as a rank sees it when one other rank overflowed: the sum of flags is one more."""

    def construct(self, x):
        return x + 1.0


class NoPeerOverflowed(nn.Cell):
    def construct(self, x):
        return x


class Identity(nn.Cell):
    def construct(self, grads):
        return grads


@pytest.mark.slow
def test_a_peers_overflow_skips_this_ranks_step_too():
    ids, labels, mask = batch()
    results = {}
    for name, peer in (("peer overflowed", PeerOverflowed()), ("all finite", NoPeerOverflowed())):
        model = tiny()
        params = list(model.trainable_params())
        before = params[0].asnumpy().copy()
        step = TrainStep(model, adamw(params, WarmupDecaySchedule(1e-2, 0, 10, "constant", 0.0), 0.0), 1.0,
                         amp.DynamicLossScaler(1024.0, 2, 1000), grad_reducer=Identity())
        assert isinstance(step.flag_reducer, devices.OverflowReducer)
        assert isinstance(step.flag_reducer.reduce, ops.AllReduce) and step.flag_reducer.reduce.op == "sum"
        step.flag_reducer = devices.OverflowReducer(peer)
        _, _, _, applied = step._single_step(*(Tensor(a) for a in (ids, labels, mask)))  # PyNative: no compile
        results[name] = (bool(applied.asnumpy()), not np.array_equal(params[0].asnumpy(), before),
                         float(step.loss_scaler.scale_value.asnumpy()))
    assert results["peer overflowed"] == (False, False, 512.0)  # skipped, scale halved, as the peer did
    assert results["all finite"] == (True, True, 1024.0)
    model = tiny()
    params = list(model.trainable_params())
    optimizer = adamw(params, WarmupDecaySchedule(1e-2, 0, 10, "constant", 0.0), 0.0)
    assert TrainStep(model, optimizer, 1.0, None, grad_reducer=Identity()).flag_reducer is None  # fp32
    assert TrainStep(model, optimizer, 1.0, amp.DynamicLossScaler(1024.0, 2, 1000)).flag_reducer is None  # one rank


# ---- item 4: peak memory and the device's size --------------------------------------------------------

def test_peak_is_summed_on_the_cpu_and_the_largest_device_elsewhere():
    from core.engine.trainer import Trainer
    assert device_paths.peak_over_ranks("cpu", [700.0, 500.0]) == 1200.0
    assert device_paths.peak_over_ranks("gpu", [700.0, 500.0]) == 700.0

    class OtherRank:  # rank 1 of 2: the AllReduce adds rank 0's 700 MB to this rank's slot
        rank, world = 1, 2

        def sum(self, values):
            return [700.0 + values[0], values[1]]
    for device, shown, per_rank in (("cpu", 700.0 + 0.0, None), ("gpu", 700.0, [700.0, 0.0])):
        trainer = SimpleNamespace(cfg=SimpleNamespace(parallel=SimpleNamespace(device=device)), cluster=OtherRank())
        mine, ranks_seen = Trainer.peak_memory(trainer)
        assert ranks_seen == per_rank or ranks_seen[0] == 700.0
        if device == "cpu":
            assert mine > 700.0  # this process's RSS added to the peer's
        else:
            assert mine == max(700.0, ranks_seen[1]) and len(ranks_seen) == 2


def test_the_monitor_charts_the_largest_device_and_each_rank(tmp_path):
    from app.charts.metrics import RunCharts
    from core.run.rundir import RunDir
    run = RunDir.create(tmp_path / "runs", "r1", "method: lora\n")
    run.append_metrics([TrainRecord(step=5, time=1.0, loss=1.0, peak_mem_mb=900.0, peak_mem_ranks_mb=[900.0, 850.0]),
                        TrainRecord(step=6, time=2.0, loss=1.0, peak_mem_mb=1400.0)])  # a CPU run: the sum
    charts = RunCharts(run.path, workers=2)
    charts.update()
    memory = charts.frames["memory"]
    assert dict(zip(memory[memory.step == 5].series, memory[memory.step == 5].value)) == {
        "peak MB, largest device": 900.0, "rank 0": 900.0, "rank 1": 850.0}
    assert dict(zip(memory[memory.step == 6].series, memory[memory.step == 6].value)) == {"peak MB per worker": 700.0}


def test_the_fit_check_compares_the_estimate_with_the_devices_memory(monkeypatch):
    from tests.core.test_memory import tiny_args
    config = Config().with_updates({"parallel.device": "gpu"})
    fits = devices.fit_check(config, tiny_args(), 16, total_mb=1e9)
    assert (fits.event, fits.message.key) == ("info", "memory.fit_ok")
    over = devices.fit_check(config, tiny_args(), 16, total_mb=10.0)
    assert (over.event, over.message.key) == ("warning", "memory.fit_over")
    assert "more than the gpu device's 10 MB" in over.message
    assert devices.fit_check(Config(), tiny_args(), 16, total_mb=10.0) is None  # the CPU: checked before launch
    assert devices.total_memory_mb("cpu") is None
    # asked of MindSpore: an Ascend device that reports 0 MB (not initialised) is said to be unknown, with why
    fake = fake_device(monkeypatch, "ascend", soc="ascend910b", total_mb=0.0)
    unknown = devices.fit_check(config.with_updates({"parallel.device": "ascend"}), tiny_args(), 16)
    assert (unknown.event, unknown.message.key) == ("warning", "memory.fit_unknown")
    assert unknown.message.params["why"].key == "memory.not_initialised" and "ascend device's total memory is unknown" in unknown.message
    fake.total_mb = 65536.0
    known = devices.fit_check(config.with_updates({"parallel.device": "ascend"}), tiny_args(), 16)
    assert known.message.key == "memory.fit_ok" and "ascend device's 65,536 MB" in known.message


# ---- item 5: a device out of memory -------------------------------------------------------------------

def test_a_device_allocator_error_is_classified_as_oom_with_the_figures():
    message = ("The pointer[device_address] is null.\n"
               "Device(id:0) memory isn't enough and alloc failed, kernel name: Default/MatMul-op12, "
               "alloc size: 4294967296B.")
    reason = ranks.device_oom_reason(RuntimeError(message), "gpu", "peak allocated 79,000 MB of the device's 81,000 MB")
    assert reason.startswith("out of gpu memory: Device(id:0) memory isn't enough and alloc failed")
    assert reason.endswith("(peak allocated 79,000 MB of the device's 81,000 MB)")
    assert ranks.device_oom_reason(RuntimeError("Memory not enough: alloc size[1024]"), "ascend").startswith(
        "out of ascend memory")
    assert ranks.device_oom_reason(RuntimeError(message), "cpu") is None  # MemoryError's job there
    assert ranks.device_oom_reason(RuntimeError("Select GPU operator[Gather] fail"), "gpu") is None
    assert ranks.device_oom_reason(ValueError(message), "gpu") is None


# ---- item 6: the profiler -----------------------------------------------------------------------------

def test_the_profiler_records_the_devices_activities_and_reads_its_kernel_table(tmp_path):
    from mindspore.profiler import ProfilerActivity
    assert [ProfilerActivity[a] for a in device_paths.profiler_activities("ascend")] == [ProfilerActivity.CPU,
                                                                                       ProfilerActivity.NPU]
    assert device_paths.profiler_activities("gpu") == ("CPU", "GPU") and device_paths.profiler_activities("cpu") == ("CPU",)
    table = tmp_path / "vm_1_2_ascend_ms" / "ASCEND_PROFILER_OUTPUT"
    table.mkdir(parents=True)
    (table / "kernel_details.csv").write_text(
        "Step Id,Name,Type,Accelerator Core,Start Time(us),Duration(us),Wait Time(us)\n"
        "1,Default/network/MatMul-op1,MatMul,AI_CORE,1.0,1500.0,0\n"
        "1,Gradients/Default/network/MatMul-op2,MatMul,AI_CORE,2.0,2500.0,0\n"
        "1,Default/network/FlashAttentionScore-op3,FlashAttentionScore,MIX_AIC,3.0,1000.0,0\n", encoding="utf-8")
    summary = profiling.summarize(tmp_path, [3, 4])
    assert summary.total_ms == pytest.approx(5.0)
    assert summary.phases == {"forward + update": 2.5, "backward": 2.5}
    assert summary.top[0].op_type == "MatMul" and summary.top[0].phase == "backward" and summary.top[0].ms == 2.5
    assert "kernel_details.csv" in summary.files[-1] and "Ascend kernels" in summary.note


GPU_DETAIL_HEADER = ("op_side,op_type,op_name,op_full_name,op_occurrences,op_total_time(us),op_avg_time(us),"
                     "total_proportion,cuda_activity_cost_time(us),cuda_activity_call_count")  # core/engine/profiling.py


def test_the_profiler_reads_the_gpus_operator_table(tmp_path):
    (tmp_path / "gpu_op_detail_info_0.csv").write_text(
        GPU_DETAIL_HEADER + "\n"
        "gpu,MatMul,MatMul-op1,Default/network/MatMul-op1,2,1500.0,750.0,0.3,1400.0,2\n"
        "gpu,MatMul,MatMul-op2,Gradients/Default/network/MatMul-op2,2,2500.0,1250.0,0.5,2400.0,2\n"
        "gpu,Softmax,Softmax-op3,Default/network/Softmax-op3,4,1000.0,250.0,0.2,900.0,4\n", encoding="utf-8")
    summary = profiling.summarize(tmp_path, [3, 4], "gpu")
    assert summary.total_ms == pytest.approx(5.0)
    assert summary.phases == {"forward + update": 2.5, "backward": 2.5}
    assert [(t.op_type, t.phase, t.ms, t.calls) for t in summary.top] == [
        ("MatMul", "backward", 2.5, 2), ("MatMul", "forward + update", 1.5, 2), ("Softmax", "forward + update", 1.0, 4)]
    assert summary.files == ["gpu_op_detail_info_0.csv"] and "gpu_op_detail_info" in summary.note
    assert profiling.summarize(tmp_path, [3, 4]).top == summary.top  # device None: whichever table is there
    # an Ascend run does not read a GPU table, and a GPU run without its table says so
    assert profiling.summarize(tmp_path, [3, 4], "ascend").top == []
    empty = profiling.summarize(tmp_path / "none", [3, 4], "gpu")
    assert empty.top == [] and "no gpu_op_detail_info" in empty.note


# ---- item 7: bf16 -------------------------------------------------------------------------------------

def test_bf16_is_refused_by_name_on_an_ascend_910a():
    assert "ascend910" in device_paths.bf16_problem("ascend", "ascend910", True)
    assert device_paths.bf16_problem("ascend", "ascend910b", True) is None
    assert device_paths.bf16_problem("gpu", None, True) is None
    config = Config().with_updates({"parallel.device": "ascend", "precision.amp_level": "O2",
                                    "precision.compute_dtype": "bfloat16"})
    with faked("ascend"):
        with pytest.raises(ConfigError, match="ascend910.*use float16"):
            devices.check_bf16(config, soc="ascend910")
        devices.check_bf16(config, soc="ascend910b")
        devices.check_bf16(Config().with_updates({"parallel.device": "ascend"}), soc="ascend910")  # no bf16 used


# ---- item 8: the dry run's device -----------------------------------------------------------------------

def test_the_dry_run_gets_the_device_a_launch_would_get():
    slots = launcher.DeviceSlots({"gpu": (0, 1, 2)})
    busy = [launcher.ActiveRun("r1", "gpu", 2, (0, 1))]
    assert launcher.dry_run_env("gpu", busy, slots) == {"CUDA_VISIBLE_DEVICES": "2"}
    assert launcher.dry_run_env("gpu", [], slots) == {"CUDA_VISIBLE_DEVICES": "0"}
    assert launcher.dry_run_env("ascend", [], launcher.DeviceSlots({"ascend": (4, 5)})) == \
        {"ASCEND_RT_VISIBLE_DEVICES": "4"}
    assert launcher.dry_run_env("cpu", busy, slots) == {}
    full = [launcher.ActiveRun("r1", "gpu", 3, (0, 1, 2))]
    with pytest.raises(launcher.LaunchError, match="every gpu device .* held by a run .r1."):
        launcher.dry_run_env("gpu", full, slots)


# ---- item 1: the estimate's device branch ---------------------------------------------------------------

def test_the_estimate_follows_the_device_paths():
    from tests.core.test_memory import tiny_args
    args = tiny_args()

    def units(soc="ascend910b", **updates):
        config = Config().with_updates({"parallel.device": "ascend", **updates})
        return estimate_memory(config, args, seq_len=256, soc=soc)
    flash = units(**{"precision.amp_level": "O2"})
    composed = units()
    assert any("FlashAttentionScore" in n for n in flash.notes)
    assert any("attention composed" in n and "float16/bfloat16" in n for n in composed.notes)
    assert any("no logits" in n for n in flash.notes)
    gpu = estimate_memory(Config().with_updates({"parallel.device": "gpu"}), args, seq_len=256)
    # composed keeps each layer's softmax (B, H, T, T) and one (B, 1, T, T) float32 mask; flash neither
    b, t = Config().train.micro_batch_size, 256
    scores = args.num_layers * b * args.num_heads * t * t * 4 * 1.2 / 2**20
    mask = b * t * t * 4 / 2**20
    assert gpu.activations_mb - composed.activations_mb == pytest.approx(0.0, abs=1e-6)
    assert gpu.activations_mb > scores + mask


def test_the_estimates_flash_branch_holds_no_scores_and_the_composed_one_says_its_memory():
    """AMP O2 on Ascend, the same config on a 910B (FlashAttentionScore) and a 910A (composed): the 910A
    estimate holds exactly each layer's (B, H, T, T) softmax (2.5 bytes an element under AMP, the
    pool's 1.2) and the (B, 1, T, T) float32 mask more, and its note says both sizes."""
    from tests.core.test_memory import tiny_args
    args = ModelArgs.from_hf_config({**HF, "hidden_size": 64, "num_attention_heads": 4})  # head size 16
    config = Config().with_updates({"parallel.device": "ascend", "precision.amp_level": "O2"})
    b, t = config.train.micro_batch_size, 256
    flash = estimate_memory(config, args, seq_len=t, soc="ascend910b")
    a910 = estimate_memory(config, args, seq_len=t, soc="ascend910")
    unknown = estimate_memory(config, args, seq_len=t, soc=None)  # the console, npu-smi silent: composed assumed
    scores = args.num_layers * b * args.num_heads * t * t * 2.5 * 1.2 / 2**20
    mask = b * t * t * 4 / 2**20
    assert a910.activations_mb - flash.activations_mb == pytest.approx(scores + mask, rel=1e-9)
    assert unknown.activations_mb == pytest.approx(a910.activations_mb, rel=1e-12)
    note = next(n for n in a910.notes if n.key == "memory.composed_attention")
    assert note.params["why"].key == "path.ascend_chip"
    assert note.params["scores_mb"] == f"{scores:,.1f}" and note.params["mask_mb"] == f"{mask:,.1f}"
    assert next(n for n in unknown.notes if n.key == "memory.composed_attention").params["why"].key == \
        "path.ascend_chip_unknown"
    assert any(n.key == "memory.flash" for n in flash.notes)
    # head size 8 (the tiny test model) on a 910B: composed as well
    small = estimate_memory(config, tiny_args(), seq_len=t, soc="ascend910b")
    assert next(n for n in small.notes if n.key == "memory.composed_attention").params["why"].key == \
        "path.ascend_head_dim"


# ---- issue 40: the chunked loss, ordered ----------------------------------------------------------------

PROBE = Path(__file__).with_name("chunked_loss_probe.py")


def _probe(mode: str) -> dict:
    done = subprocess.run([sys.executable, str(PROBE), mode], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "GLOG_v": "3"})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_the_chunked_loss_holds_a_few_chunks_not_the_vocabularys_logits():
    """The LM head and its loss on a vocabulary-sized head (4,096 rows, vocabulary 16,384: 256 MB of
    float32 logits), compiled, forward and backward, each in a process of its own: the peak RSS growth
    of the device's chunked loss (8 chunks of 512 rows, 32 MB blocks) against the unchunked one.
    Measured: 167-176 MB against 1,033 MB. Chunks that the graph may run side by side held a block per
    chunk more (367-592 MB); broadcasting (chunk, 1) weights against the blocks held 3.9 GB (the CPU's
    broadcast indices)."""
    chunked, unchunked = _probe("chunked"), _probe("unchunked")
    assert chunked["loss"] == pytest.approx(unchunked["loss"], rel=1e-5)
    block, logits = chunked["block_mb"], chunked["logits_mb"]
    assert unchunked["growth_mb"] >= 3 * logits, unchunked  # logits, log-softmax, gradient: all (N, vocab)
    assert chunked["growth_mb"] <= 8 * block, chunked  # one chunk's blocks at a time (measured ~5.4)
    assert unchunked["growth_mb"] - chunked["growth_mb"] >= 2 * logits, (chunked, unchunked)
