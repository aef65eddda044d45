"""The sparse mixture-of-experts block (core/engine/moe.py), its grouped CPU kernel and the expert key
mapping (core/spec/moe_args.py) against transformers' Mixtral and Qwen3-MoE."""
from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import mindspore as ms
from mindspore import Tensor, nn

import core.engine.fused as fused
from core.engine.lora import LoraError, inject_lora, mark_only_lora_trainable, merge_lora
from core.engine.moe import LoadBalancingLoss, LoRAStackedLinear, SparseMoE
from core.spec.moe_args import MoeArgs, MoeConfigError, experts_in, experts_out, mixtral_args, qwen3_moe_args

from tests import skips

H, I, E, K = 32, 24, 6, 2


def kernel_or_skip():
    try:
        return fused.build()
    except fused.KernelUnavailable as exc:  # no compiler here: the composed path is tested alone
        skips.skip("kernels", f"no fused kernels: {exc}")


def hf_block(family: str, normalize: bool = True, seed: int = 0):
    """A transformers sparse block with non-trivial random weights."""
    torch.manual_seed(seed)
    if family == "mixtral":
        from transformers import MixtralConfig
        from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock
        block = MixtralSparseMoeBlock(MixtralConfig(hidden_size=H, intermediate_size=I, num_local_experts=E,
                                                    num_experts_per_tok=K))
    else:
        from transformers import Qwen3MoeConfig
        from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeSparseMoeBlock
        block = Qwen3MoeSparseMoeBlock(Qwen3MoeConfig(hidden_size=H, moe_intermediate_size=I, num_experts=E,
                                                      num_experts_per_tok=K, norm_topk_prob=normalize))
    block.experts.config._experts_implementation = "eager"
    with torch.no_grad():
        block.gate.weight.normal_(0, 0.5)
        block.experts.gate_up_proj.normal_(0, 0.2)
        block.experts.down_proj.normal_(0, 0.2)
    return block


def ms_block(ref, normalize: bool, layout: str, grouped: bool):
    block = SparseMoE(SimpleNamespace(hidden_size=H, moe=MoeArgs(E, K, I, normalize, (0,), 0.01, layout)))
    block.gate.weight.set_data(Tensor(ref.gate.weight.detach().numpy()))
    block.experts.gate_up_proj.weight.set_data(Tensor(ref.experts.gate_up_proj.detach().numpy()))
    block.experts.down_proj.weight.set_data(Tensor(ref.experts.down_proj.detach().numpy()))
    if grouped:
        block.enable_grouped(kernel_or_skip())
    return block


def close(a, b, tol: float = 1e-5) -> bool:
    """max |a − b| within tol, relative to b's scale where that exceeds 1 (float32 sums)."""
    b = np.asarray(b)
    return float(np.abs(np.asarray(a) - b).max()) <= tol * max(1.0, float(np.abs(b).max()))


def grads(block, x, weights):
    """Loss Σ y·weights under jit: (loss, dx, the parameters' gradients by name)."""
    params = [p for p in block.get_parameters() if p.requires_grad]

    def loss(x):
        y, _ = block(x)
        return (y * weights).sum()

    value, (dx, dparams) = ms.jit(ms.value_and_grad(loss, 0, params))(x)
    return float(value.asnumpy()), dx.asnumpy(), {p.name: g.asnumpy() for p, g in zip(params, dparams)}


@pytest.mark.slow
@pytest.mark.parametrize("grouped", [False, True], ids=["composed", "grouped"])
@pytest.mark.parametrize("family,normalize", [("mixtral", True), ("qwen3_moe", False), ("qwen3_moe", True)])
def test_block_matches_transformers_forward_and_backward(family, normalize, grouped):
    ref = hf_block(family, normalize)
    block = ms_block(ref, normalize, "mixtral" if family == "mixtral" else "qwen", grouped)
    torch.manual_seed(1)
    x = torch.randn(3, 7, H, requires_grad=True)
    weights = torch.randn(3, 7, H)
    out = ref(x)
    (out * weights).sum().backward()
    y, logits = block(Tensor(x.detach().numpy()))
    assert close(y.asnumpy(), out.detach().numpy())
    assert close(logits.asnumpy(), ref.gate(x.reshape(-1, H))[0].detach().numpy())
    _, dx, dparams = grads(block, Tensor(x.detach().numpy()), Tensor(weights.numpy()))
    assert close(dx, x.grad.numpy())
    expected = {"gate.weight": ref.gate.weight.grad, "experts.gate_up_proj.weight": ref.experts.gate_up_proj.grad,
                "experts.down_proj.weight": ref.experts.down_proj.grad}
    assert set(dparams) == set(expected)
    for name, grad in expected.items():
        assert close(dparams[name], grad.numpy()), name


class Holder(nn.Cell):
    """A block under the dotted name `model.layers.0.mlp`, as in a model (LoRA injects by name)."""

    def __init__(self, block):
        super().__init__()
        self.mlp = block


def lora_holder(grouped: bool, seed: int = 3):
    ref = hf_block("qwen3_moe")
    holder = Holder(ms_block(ref, True, "qwen", False))
    names = inject_lora(holder, 4, 8, 0.0, ["gate_up_proj", "down_proj"])
    rng = np.random.default_rng(seed)
    for p in holder.get_parameters():
        if p.name.endswith(("lora_a", "lora_b")):  # a trained adapter (B != 0), the same in every build
            p.set_data(Tensor((rng.standard_normal(p.shape) * 0.3).astype(np.float32)))
    mark_only_lora_trainable(holder)
    if grouped:
        holder.mlp.enable_grouped(kernel_or_skip())
    return holder, names


@pytest.mark.slow
def test_lora_on_experts_grouped_equals_composed_and_merges():
    composed, names = lora_holder(False)
    grouped, _ = lora_holder(True)
    assert names == ["mlp.experts.gate_up_proj", "mlp.experts.down_proj"]
    cell = grouped.mlp.experts.gate_up_proj
    assert isinstance(cell, LoRAStackedLinear)
    assert tuple(cell.lora_a.shape) == (E, 4, H) and tuple(cell.lora_b.shape) == (E, 2 * I, 4)
    rng = np.random.default_rng(5)
    x = Tensor(rng.standard_normal((2, 9, H)).astype(np.float32))
    weights = Tensor(rng.standard_normal((2, 9, H)).astype(np.float32))
    loss_c, dx_c, d_c = grads(composed.mlp, x, weights)
    loss_g, dx_g, d_g = grads(grouped.mlp, x, weights)
    assert sorted(d_c) == sorted(d_g) == sorted(f"mlp.experts.{p}.lora_{m}" for p in ("gate_up_proj", "down_proj")
                                                for m in "ab")
    assert close(loss_g, loss_c) and close(dx_g, dx_c)
    for name in d_c:  # the frozen experts' variant skips dW; A and B still get theirs
        assert np.abs(d_g[name]).max() > 1e-3
        assert close(d_g[name], d_c[name]), name
    before = grouped.mlp(x)[0].asnumpy()
    plain = ms_block(hf_block("qwen3_moe"), True, "qwen", False)(x)[0].asnumpy()
    effect = np.abs(before - plain).max()
    assert effect > 1e-3  # the adapter changes the output
    assert merge_lora(grouped) == names
    # W + s·B·A rounds differently from W·x + s·B·(A·x): float32 noise on outputs of magnitude ~20
    # (measured 2.3e-05 on an AVX2 CPU, below 1e-05 on AVX-512), far below the adapter's own effect
    error = np.abs(grouped.mlp(x)[0].asnumpy() - before).max()
    print(f"merge error {error:.2e}, adapter effect {effect:.2e}, output scale {np.abs(before).max():.1f}")
    assert error <= 1e-4 and error <= 0.01 * effect


def test_lora_on_experts_refuses_dropout():
    holder = Holder(ms_block(hf_block("mixtral"), True, "mixtral", False))
    with pytest.raises(LoraError, match=r"dropout 0.1 with target mlp.experts.gate_up_proj.*set dropout"):
        inject_lora(holder, 4, 8, 0.1, ["gate_up_proj"])


def test_grouped_kernel_rejects_unsorted_experts():
    kernel = kernel_or_skip()
    op = fused.FusedGroupedMatmul(kernel).op
    x, w = Tensor(np.ones((3, 4), np.float32)), Tensor(np.ones((2, 5, 4), np.float32))
    assert op(x, w, Tensor(np.array([0, 1, 1], np.int32))).shape == (3, 5)
    with pytest.raises(RuntimeError, match="is 41"):
        op(x, w, Tensor(np.array([1, 0, 1], np.int32))).asnumpy()


def test_grouped_kernel_expert_without_rows_gets_zero_gradient():
    kernel = kernel_or_skip()
    op = fused.FusedGroupedMatmul(kernel).op
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((5, 3)).astype(np.float32), rng.standard_normal((3, 4, 3)).astype(np.float32)
    ids = np.array([0, 0, 2, 2, 2], np.int32)  # expert 1 gets no row
    dy = rng.standard_normal((5, 4)).astype(np.float32)
    y = op(Tensor(x), Tensor(w), Tensor(ids)).asnumpy()
    assert np.abs(y - np.einsum("mk,mnk->mn", x, w[ids])).max() <= 1e-5

    def loss(x, w):
        return (op(x, w, Tensor(ids)) * Tensor(dy)).sum()

    dx, dw = ms.grad(loss, (0, 1))(Tensor(x), Tensor(w))
    assert np.abs(dx.asnumpy() - np.einsum("mn,mnk->mk", dy, w[ids])).max() <= 1e-5
    expected = np.zeros_like(w)
    for i, e in enumerate(ids):
        expected[e] += np.outer(dy[i], x[i])
    assert np.abs(dw.asnumpy() - expected).max() <= 1e-5 and not dw.asnumpy()[1].any()


def test_load_balancing_loss_matches_transformers_with_padding():
    from transformers.models.mixtral.modeling_mixtral import load_balancing_loss_func
    rng = np.random.default_rng(0)
    logits = [rng.standard_normal((2 * 5, E)).astype(np.float32) * 2 for _ in range(3)]
    mask = np.array([[1, 1, 1, 1, 0], [1, 1, 0, 0, 0]], np.int64)
    expected = load_balancing_loss_func(tuple(torch.tensor(a) for a in logits), E, K, torch.tensor(mask))
    ours = LoadBalancingLoss(E, K)(tuple(Tensor(a) for a in logits), Tensor(mask.reshape(-1).astype(np.float32)))
    assert abs(float(ours.asnumpy()) - float(expected)) <= 1e-5
    unmasked = load_balancing_loss_func(tuple(torch.tensor(a) for a in logits), E, K)
    ones = LoadBalancingLoss(E, K)(tuple(Tensor(a) for a in logits), Tensor(np.ones(10, np.float32)))
    assert abs(float(ones.asnumpy()) - float(unmasked)) <= 1e-5 and abs(float(unmasked) - float(expected)) > 1e-3


# ---- config and key mapping (MindSpore-free) ------------------------------------------------------

def test_qwen3_moe_args_sparse_layers_and_spellings():
    cfg = {"num_hidden_layers": 6, "num_local_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
           "decoder_sparse_step": 2, "mlp_only_layers": [3], "norm_topk_prob": True}
    moe = qwen3_moe_args(cfg, "config.json")
    assert moe.sparse_layers == (1, 5) and moe.num_experts == 8 and moe.normalize_top_k
    with pytest.raises(MoeConfigError, match=r"config.json: num_experts_per_tok: 9 exceeds the 8 experts"):
        qwen3_moe_args({**cfg, "num_experts_per_tok": 9}, "config.json")
    with pytest.raises(MoeConfigError, match=r"mlp_only_layers: must be a list of layer indices in \[0, 6\)"):
        qwen3_moe_args({**cfg, "mlp_only_layers": [7]}, "config.json")
    with pytest.raises(MoeConfigError, match="router_jitter_noise"):
        mixtral_args({"num_hidden_layers": 2, "num_local_experts": 4, "intermediate_size": 8,
                      "router_jitter_noise": 0.1}, "config.json")


@pytest.mark.parametrize("layout,projections", [("mixtral", ("w1", "w3", "w2")),
                                                ("qwen", ("gate_proj", "up_proj", "down_proj"))])
def test_expert_keys_round_trip_hub_layout(layout, projections):
    moe = MoeArgs(3, 2, 4, True, (0,), 0.0, layout)
    rng = np.random.default_rng(0)
    hub = {"model.layers.0.mlp.gate.weight": rng.standard_normal((3, 5)).astype(np.float32)}
    for e in range(3):
        gate, up, down = projections
        hub[f"model.layers.0.mlp.experts.{e}.{gate}.weight"] = rng.standard_normal((4, 5)).astype(np.float32)
        hub[f"model.layers.0.mlp.experts.{e}.{up}.weight"] = rng.standard_normal((4, 5)).astype(np.float32)
        hub[f"model.layers.0.mlp.experts.{e}.{down}.weight"] = rng.standard_normal((5, 4)).astype(np.float32)
    ours = experts_in(hub, moe)
    stacked = ours["model.layers.0.mlp.experts.gate_up_proj.weight"]
    assert stacked.shape == (3, 8, 5) and ours["model.layers.0.mlp.experts.down_proj.weight"].shape == (3, 5, 4)
    assert np.array_equal(stacked[1, 4:], hub[f"model.layers.0.mlp.experts.1.{projections[1]}.weight"])
    back = experts_out(ours, moe)
    block = "block_sparse_moe" if layout == "mixtral" else "mlp"
    assert sorted(back) == sorted(k.replace(".mlp.", f".{block}.") for k in hub)
    for key, array in hub.items():
        assert np.array_equal(back[key.replace(".mlp.", f".{block}.")], array)
    # transformers 5's stacked layout (a state dict saved from the model) reads to the same
    fused_layout = {"model.layers.0.mlp.gate.weight": hub["model.layers.0.mlp.gate.weight"],
                    "model.layers.0.mlp.experts.gate_up_proj": stacked,
                    "model.layers.0.mlp.experts.down_proj": ours["model.layers.0.mlp.experts.down_proj.weight"]}
    assert {k: v.tobytes() for k, v in experts_in(fused_layout, moe).items()} == {k: v.tobytes() for k, v in ours.items()}
    del hub[f"model.layers.0.mlp.experts.2.{projections[2]}.weight"]
    with pytest.raises(KeyError, match=rf"experts.2.{projections[2]}.weight is missing \(config.json says 3 experts\)"):
        experts_in(hub, moe)


# ---- whole models --------------------------------------------------------------------------------

def moe_hf_model(name: str, seed: int = 0, **changes):
    """hf_fixtures' tiny MoE checkpoint with a decisive router (std 0.6: each token's top-k is far
    from a tie, so a wrong normalisation or routing shows in the logits) and stronger experts."""
    from tests.core import hf_fixtures
    config_cls, model_cls, overrides = hf_fixtures.ARCHITECTURES[name]
    torch.manual_seed(seed)
    config = getattr(transformers_module(), config_cls)(**{**hf_fixtures.COMMON, **overrides, **changes})
    model = getattr(transformers_module(), model_cls)(config).eval()
    with torch.no_grad():
        for pname, param in model.named_parameters():
            if pname.endswith("norm.weight") or pname.endswith(".bias"):
                param.add_(0.1 * torch.randn_like(param))
            elif pname.endswith("mlp.gate.weight"):
                param.normal_(0, 0.6)
            elif ".experts." in pname:
                param.normal_(0, 0.08)
    return model


def transformers_module():
    return skips.module("transformers")


def save_stacked_layout(model, folder):
    """The checkpoint as transformers 5 holds it in memory (`mlp.experts.gate_up_proj`, no per-expert
    keys): a state dict written straight to safetensors, as some conversion scripts do."""
    from safetensors.torch import save_file
    model.config.save_pretrained(str(folder))
    state = {k: v.contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight" or
             not model.config.tie_word_embeddings}
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("kernels", ["composed", "fused"])
@pytest.mark.parametrize("name,changes", [("mixtral", {}), ("mixtral", {"sliding_window": 7}),
                                          ("qwen3-moe-dense-layer", {}),
                                          ("qwen3-moe-dense-layer", {"norm_topk_prob": True, "mlp_only_layers": []})],
                         ids=["mixtral", "mixtral-window", "qwen3-moe", "qwen3-moe-norm-all-sparse"])
def test_model_logits_match_transformers(name, changes, kernels, tmp_path):
    from core.engine.checkpoint import load_hf_model
    from tests.core.hf_fixtures import random_ids, reference_logits, save_hf_model
    hf = moe_hf_model(name, **changes)
    save_hf_model(hf, tmp_path)
    model = load_hf_model(tmp_path)
    if kernels == "fused":
        kernel_or_skip()
        assert fused.enable(model).startswith("fused")
        assert all(layer.mlp.grouped for layer in model.model.layers if layer.sparse)
    ids = random_ids()
    ours = ms.jit(model.construct)(Tensor(ids)).asnumpy()
    assert np.abs(ours - reference_logits(hf, ids)).max() <= 1e-4


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mixtral", "qwen3-moe-dense-layer"])
def test_stacked_layout_checkpoint_loads_and_exports_per_expert(name, tmp_path):
    from core.engine.checkpoint import hf_state_dict, load_hf_model
    from tests.core.hf_fixtures import random_ids, reference_logits, save_hf_model
    hf = moe_hf_model(name)
    hub = save_hf_model(hf, tmp_path / "hub")
    stacked = save_stacked_layout(hf, tmp_path / "stacked")
    from safetensors import safe_open
    with safe_open(str(stacked / "model.safetensors"), "np") as handle:
        assert "model.layers.1.mlp.experts.gate_up_proj" in set(handle.keys())
    with safe_open(str(hub / "model.safetensors"), "np") as handle:
        hub_keys = set(handle.keys())
    ids = random_ids()
    for folder in (hub, stacked):
        model = load_hf_model(folder)
        assert np.abs(model.construct(Tensor(ids)).asnumpy() - reference_logits(hf, ids)).max() <= 1e-4
        assert set(hf_state_dict(model)) == hub_keys  # written back per expert, as the hub ships it
    block = "block_sparse_moe" if name == "mixtral" else "mlp"
    proj = "w2" if name == "mixtral" else "down_proj"
    assert f"model.layers.1.{block}.experts.3.{proj}.weight" in hub_keys


@pytest.mark.slow
@pytest.mark.parametrize("name,changes", [("qwen3-moe-dense-layer", {}), ("mixtral", {"sliding_window": 5})],
                         ids=["qwen3-moe", "mixtral-window"])
def test_greedy_generation_with_cache_equals_no_cache_and_transformers(name, changes, tmp_path):
    """17 tokens in all: past Mixtral's 5-token window, so the cached steps must apply it too."""
    from core.engine.checkpoint import load_hf_model
    from core.engine.generate import SamplingSettings, generate
    from tests.core.hf_fixtures import save_hf_model
    hf = moe_hf_model(name, **changes)
    model = load_hf_model(save_hf_model(hf, tmp_path))
    prompt = [5, 17, 3, 44, 90, 12, 7]
    settings = SamplingSettings(max_new_tokens=10)
    cached = generate(model, [prompt], settings)[0]
    assert cached == generate(model, [prompt], settings, use_cache=False)[0]
    ref = hf.generate(torch.tensor([prompt]), max_new_tokens=10, do_sample=False, pad_token_id=0,
                      eos_token_id=None)[0, len(prompt):].tolist()
    assert cached == ref


@pytest.mark.slow
def test_train_step_balancing_loss_matches_transformers(tmp_path):
    """One step's loss terms against transformers' forward with output_router_logits and labels:
    its loss is cross-entropy + router_aux_loss_coef · aux_loss (padding masked out of both)."""
    from core.engine.checkpoint import load_hf_model
    from core.engine.train_step import IGNORE_INDEX, TrainStep, WarmupDecaySchedule, adamw
    from tests.core.hf_fixtures import random_ids, save_hf_model
    hf = moe_hf_model("mixtral", router_aux_loss_coef=0.3)
    model = load_hf_model(save_hf_model(hf, tmp_path))
    model.output_router_logits = True
    ids = random_ids(2, 12)
    mask = np.ones_like(ids)
    mask[1, 8:] = 0
    labels = np.where(mask == 1, ids, IGNORE_INDEX).astype(np.int32)
    params = list(model.trainable_params())
    step = TrainStep(model, adamw(params, WarmupDecaySchedule(1e-3, 0, 10, "constant", 1.0), 0.0), None, None,
                     router_aux_loss_coef=0.3, moe=model.args.moe)
    loss, _, applied, _ = step([(ids, labels, mask)])
    with torch.no_grad():
        out = hf(torch.tensor(ids, dtype=torch.long), attention_mask=torch.tensor(mask), output_router_logits=True,
                 labels=torch.tensor(labels, dtype=torch.long))
    assert applied and abs(step.last_aux_loss - float(out.aux_loss)) <= 1e-5
    assert abs(loss + 0.3 * step.last_aux_loss - float(out.loss)) <= 1e-4
    assert float(out.aux_loss) > 1.0  # E · Σ f·P is 1 at perfect balance, above it otherwise


# ---- training and export through the CLI ------------------------------------------------------------

MOE_TINY = {"qwen3_moe": dict(architectures=["Qwen3MoeForCausalLM"], model_type="qwen3_moe", num_experts=4,
                              num_experts_per_tok=2, moe_intermediate_size=32, head_dim=8, norm_topk_prob=True),
            "mixtral": dict(architectures=["MixtralForCausalLM"], model_type="mixtral", num_local_experts=4,
                            num_experts_per_tok=2, intermediate_size=32)}
MOE_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_up_proj", "down_proj"]


def moe_workspace(root, family: str, **changes):
    """tiny_setup's workspace (tokenizer, alpaca task, config) with a random tiny MoE as the base."""
    from core.data.tokenizer import Tokenizer
    from tests.core.tiny_setup import make_model, make_workspace
    config = make_workspace(root, lora__target_modules=MOE_TARGETS, **changes)
    model = root / "tiny-model"
    make_model(model, Tokenizer.from_dir(model).vocab_size, **MOE_TINY[family])
    return config


def run_once(config, *overrides):
    from tests.core.test_train import run_cli
    return run_cli(config, *overrides)


def train_records(run, kind):
    from tests.core.test_train import records
    return records(run, kind)


def run_worker(config, *overrides):
    """`python -m core.train` in a process of its own (its peak_mem_mb is the worker's alone)."""
    import subprocess
    import sys
    from pathlib import Path
    from core.run.rundir import RunDir
    runs = config.parent / "runs"
    before = set(runs.glob("*")) if runs.exists() else set()
    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-m", "core.train", "--config", str(config), *overrides], cwd=root,
                   check=True, capture_output=True, timeout=600)
    return RunDir(next(p for p in runs.iterdir() if p not in before and not p.is_symlink()))


@pytest.fixture(scope="module")
def moe_lora(tmp_path_factory):
    root = tmp_path_factory.mktemp("moe-lora")
    config = moe_workspace(root, "qwen3_moe", train__router_aux_loss=True)
    return config, run_worker(config)


@pytest.mark.slow
def test_lora_on_experts_trains_with_balancing_loss_and_resumes_exactly(moe_lora):
    config, run = moe_lora
    setup = next(r for r in train_records(run, "event") if r.get("event") == "setup")
    assert setup["lora_modules"] == 2 * 6  # per layer: q, k, v, o and the two expert stacks (not the router)
    if fused.expected("cpu", "float32", "O0"):
        assert setup["kernels"].startswith("fused")
    evals = train_records(run, "eval")
    assert evals[-1]["val_loss"] < evals[0]["val_loss"]
    train = train_records(run, "train")
    assert all(r["aux_loss"] >= 1.0 for r in train)  # E·Σ f·P >= 1 (1 = perfectly balanced)
    resumed = run_worker(config, f"run.resume={run.checkpoints_dir / 'step-4'}")
    tail = {r["step"]: r for r in train_records(resumed, "train")}
    assert sorted(tail) == [5, 6, 7, 8]
    for r in train:
        if r["step"] in tail:
            assert abs(tail[r["step"]]["loss"] - r["loss"]) <= 1e-5
            assert abs(tail[r["step"]]["aux_loss"] - r["aux_loss"]) <= 1e-5


@pytest.mark.slow
def test_lora_export_loads_in_peft_and_merged_in_transformers(moe_lora):
    peft = skips.module("peft")
    transformers = transformers_module()
    from core.engine.export import export_run, load_trained_model
    _, run = moe_lora
    ids = np.random.default_rng(0).integers(3, 250, (2, 20)).astype(np.int32)
    model, _ = load_trained_model(run.checkpoints_dir / "best")
    ours = model.construct(Tensor(ids)).asnumpy()
    out = export_run(run.path, "best", "peft")
    config = json.loads((out / "adapter_config.json").read_text())
    assert config["target_modules"] == ["k_proj", "o_proj", "q_proj", "v_proj"]
    assert config["target_parameters"] == ["mlp.experts.gate_up_proj", "mlp.experts.down_proj"]
    base = transformers.AutoModelForCausalLM.from_pretrained(config["base_model_name_or_path"]).eval()
    with torch.no_grad():
        base_logits = base(torch.tensor(ids, dtype=torch.long)).logits.numpy()
        adapted = peft.PeftModel.from_pretrained(base, str(out)).eval()
        peft_logits = adapted(torch.tensor(ids, dtype=torch.long)).logits.numpy()
    assert np.abs(peft_logits - ours).max() <= 1e-4
    assert np.abs(base_logits - ours).max() > 1e-3, "the adapter must change the model"
    merged_dir = export_run(run.path, "best", "merged")
    merged = transformers.AutoModelForCausalLM.from_pretrained(str(merged_dir)).eval()
    with torch.no_grad():
        assert np.abs(merged(torch.tensor(ids, dtype=torch.long)).logits.numpy() - ours).max() <= 1e-4


@pytest.mark.slow
def test_lora_run_peak_memory_is_within_15_percent_of_the_estimate(moe_lora):
    """The worker's measured peak RSS (its own process) against core.spec.memory's estimate for the
    same config, model and padded length (all experts' weights, the routed tokens' activations)."""
    import core.spec.memory as memory
    from core.spec.config import load_config
    from core.spec.model_args import read_model_args
    config, run = moe_lora
    setup = next(r for r in train_records(run, "event") if r.get("event") == "setup")
    loaded = load_config(config)
    estimate = memory.estimate_memory(loaded, read_model_args(loaded.model.path), setup["seq_len"])
    measured = max(r["peak_mem_mb"] for r in train_records(run, "train"))
    assert abs(estimate.total_mb - measured) <= 0.15 * measured, (estimate.total_mb, measured)


MOE_FULL = ("method=full", "train.learning_rate=0.003", "train.save_every=2")


@pytest.fixture(scope="module")
def moe_full(tmp_path_factory):
    """A Qwen3-MoE full fine-tune of 8 steps, saved every 2. Mixtral's full fine-tune runs in
    tests/core/test_family_training.py (FAMILIES); the experts' resume is checked here, once."""
    config = moe_workspace(tmp_path_factory.mktemp("moe-full"), "qwen3_moe")
    return config, run_once(config, *MOE_FULL)


@pytest.mark.slow
def test_full_finetune_of_qwen3_moe_lowers_validation_loss_and_merges(moe_full):
    transformers = transformers_module()
    from core.engine.export import export_run, load_trained_model
    _, run = moe_full
    evals = train_records(run, "eval")
    assert evals[-1]["val_loss"] < evals[0]["val_loss"]
    setup = next(r for r in train_records(run, "event") if r.get("event") == "setup")
    assert setup["trainable_params"] == setup["total_params"]
    ids = np.random.default_rng(1).integers(3, 250, (2, 20)).astype(np.int32)
    model, _ = load_trained_model(run.checkpoints_dir / "best")
    ours = model.construct(Tensor(ids)).asnumpy()
    merged = transformers.AutoModelForCausalLM.from_pretrained(str(export_run(run.path, "best", "merged"))).eval()
    with torch.no_grad():
        assert np.abs(merged(torch.tensor(ids, dtype=torch.long)).logits.numpy() - ours).max() <= 1e-4


@pytest.mark.slow
def test_full_finetune_of_qwen3_moe_resumes_exactly(moe_full):
    """Resumed from step 6: every weight (router and expert stacks included) and AdamW's moments
    come back, so steps 7 and 8 repeat the uninterrupted run's losses."""
    config, run = moe_full
    resumed = run_once(config, *MOE_FULL, f"run.resume={run.checkpoints_dir / 'step-6'}")
    first = {r["step"]: r["loss"] for r in train_records(run, "train")}
    tail = {r["step"]: r["loss"] for r in train_records(resumed, "train")}
    assert sorted(tail) == [7, 8]
    for step in tail:
        assert abs(tail[step] - first[step]) <= 1e-5, (step, tail[step], first[step])


def test_peft_export_refuses_what_peft_would_map_elsewhere(tmp_path):
    """PEFT 0.21 on transformers 5 reads gate_proj/up_proj/down_proj of a Qwen3-MoE as expert
    parameters, so LoRA on the dense layer's down_proj cannot round-trip: refused, naming it."""
    from core.engine.checkpoint import load_hf_model
    from core.engine.lora import save_peft_adapter
    from tests.core.hf_fixtures import save_hf_model
    model = load_hf_model(save_hf_model(moe_hf_model("qwen3-moe-dense-layer"), tmp_path / "base"))
    inject_lora(model, 4, 8, 0.0, ["q_proj", "down_proj"])
    with pytest.raises(LoraError, match=r"LoRA on down_proj of the dense layers: PEFT 0.21 .* Export 'merged'"):
        save_peft_adapter(model, tmp_path / "adapter", "base", 4, 8, 0.0, ["q_proj", "down_proj"])
    partial = load_hf_model(tmp_path / "base")
    inject_lora(partial, 4, 8, 0.0, r"model\.layers\.1\.self_attn\.q_proj")
    with pytest.raises(LoraError, match=r"would also adapt model.layers.0.self_attn.q_proj"):
        save_peft_adapter(partial, tmp_path / "adapter", "base", 4, 8, 0.0, r"model\.layers\.1\.self_attn\.q_proj")
