"""core.engine.lora: the LoRA layer's maths against numpy, injection, freezing, merge, graph modes, and the
PEFT adapter layout (round trip here, and against peft + transformers when peft is installed)."""
import json
import re
from types import SimpleNamespace

import numpy as np
import pytest

import mindspore as ms
from mindspore import nn

import core.engine.lora as lora
from core.engine.lora import LoRADense, LoraError
from core.engine.model import CausalLM, ModelArgs
from core.spec.families import PROJECTION_NAMES

from tests import skips

LLAMA = dict(architectures=["LlamaForCausalLM"], vocab_size=61, hidden_size=32, intermediate_size=48,
             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
QWEN2 = dict(LLAMA, architectures=["Qwen2ForCausalLM"], tie_word_embeddings=True)  # q/k/v biases
ALL_PROJECTIONS = list(PROJECTION_NAMES)
RANK, ALPHA = 4, 8.0


def tiny_model(cfg=LLAMA) -> CausalLM:
    model = CausalLM(ModelArgs.from_hf_config(cfg))
    model.set_train(False)
    return model


def clone_base(model: CausalLM, cfg=LLAMA) -> CausalLM:
    """A fresh model with the same base weights (copied by name)."""
    other = tiny_model(cfg)
    values = {p.name: p.asnumpy() for p in model.get_parameters()}
    for param in other.get_parameters():
        param.set_data(ms.Tensor(values[param.name]))
    return other


def randomize_lora(model: CausalLM, seed: int = 0) -> None:
    """Nonzero A and B so the adapter changes the output."""
    rng = np.random.default_rng(seed)
    for cell in lora.lora_modules(model).values():
        cell.lora_a.set_data(ms.Tensor(rng.normal(0, 0.2, cell.lora_a.shape).astype(np.float32)))
        cell.lora_b.set_data(ms.Tensor(rng.normal(0, 0.2, cell.lora_b.shape).astype(np.float32)))


def ids(batch: int = 2, length: int = 8, seed: int = 1) -> ms.Tensor:
    return ms.Tensor(np.random.default_rng(seed).integers(0, LLAMA["vocab_size"], (batch, length)).astype(np.int32))


def logits(model, tokens) -> np.ndarray:
    return model(tokens).asnumpy()


def params_by_name(model) -> dict:
    return {p.name: p for p in model.get_parameters()}


def snapshot(model) -> dict:
    return {p.name: p.asnumpy().copy() for p in model.get_parameters()}


@pytest.fixture
def graph_mode():
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        yield
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)


# --- the layer's maths -----------------------------------------------------------------------

@pytest.mark.slow
def test_untrained_adapter_leaves_logits_unchanged():
    model = tiny_model()
    tokens = ids()
    before = logits(model, tokens)
    lora.inject_lora(model, RANK, ALPHA, 0.0, ALL_PROJECTIONS)
    cell = lora.lora_modules(model)["model.layers.0.self_attn.q_proj"]
    assert not cell.lora_b.asnumpy().any()  # B = 0
    bound = 1 / np.sqrt(cell.in_channels)  # PEFT's kaiming-uniform(a=√5) bound
    assert 0 < np.abs(cell.lora_a.asnumpy()).max() <= bound
    np.testing.assert_array_equal(logits(model, tokens), before)


@pytest.mark.slow
@pytest.mark.parametrize("cfg", [LLAMA, QWEN2], ids=["llama", "qwen2-bias"])
def test_forward_equals_base_model_with_numpy_merged_weights(cfg):
    model = tiny_model(cfg)
    reference = clone_base(model, cfg)
    lora.inject_lora(model, RANK, ALPHA, 0.0, ALL_PROJECTIONS)
    randomize_lora(model)
    ref_params = params_by_name(reference)
    for name, cell in lora.lora_modules(model).items():
        w, a, b = cell.weight.asnumpy(), cell.lora_a.asnumpy(), cell.lora_b.asnumpy()
        ref_params[f"{name}.weight"].set_data(ms.Tensor(w + (ALPHA / RANK) * (b @ a)))
    tokens = ids()
    assert np.abs(logits(model, tokens) - logits(reference, tokens)).max() <= 1e-5


@pytest.mark.slow
def test_merge_matches_adapter_is_idempotent_and_unmerge_restores():
    model = tiny_model()
    base = snapshot(model)
    lora.inject_lora(model, RANK, ALPHA, 0.0, ALL_PROJECTIONS)
    randomize_lora(model)
    tokens = ids()
    unmerged = logits(model, tokens)
    assert len(lora.merge_lora(model)) == 7 * LLAMA["num_hidden_layers"]
    merged_weights = snapshot(model)
    assert np.abs(logits(model, tokens) - unmerged).max() <= 1e-5
    assert lora.merge_lora(model) == []  # second merge: no-op
    for name, value in snapshot(model).items():
        np.testing.assert_array_equal(value, merged_weights[name])
    assert len(lora.unmerge_lora(model)) == 7 * LLAMA["num_hidden_layers"]
    for name, value in base.items():
        assert np.abs(params_by_name(model)[name].asnumpy() - value).max() <= 1e-6, name
    assert np.abs(logits(model, tokens) - unmerged).max() <= 1e-5


def test_lora_merged_block_folds_adapters_and_restores_them():
    # a fresh adapter (B = 0), as at the trainer's base evaluation: weights come back bit for bit
    model = tiny_model()
    lora.inject_lora(model, RANK, ALPHA, 0.0, ALL_PROJECTIONS)
    fresh = snapshot(model)
    with lora.lora_merged(model) as merged:
        assert len(merged) == 7 * LLAMA["num_hidden_layers"]
        assert all(cell.merged for cell in lora.lora_modules(model).values())
    assert not any(cell.merged for cell in lora.lora_modules(model).values())
    for name, value in snapshot(model).items():
        np.testing.assert_array_equal(value, fresh[name])
    # a trained adapter: the merged weights give the adapter's logits; an error inside still unmerges
    randomize_lora(model)
    tokens = ids()
    unmerged, before = logits(model, tokens), snapshot(model)
    cell = lora.lora_modules(model)["model.layers.1.mlp.down_proj"]
    with pytest.raises(RuntimeError, match="inside"):
        with lora.lora_merged(model):
            np.testing.assert_allclose(cell.weight.asnumpy(), before[cell.weight.name] + (ALPHA / RANK)
                                       * before[cell.lora_b.name] @ before[cell.lora_a.name], atol=1e-6)
            assert np.abs(logits(model, tokens) - unmerged).max() <= 1e-5
            raise RuntimeError("inside")
    assert not cell.merged
    for name, value in before.items():
        assert np.abs(params_by_name(model)[name].asnumpy() - value).max() <= 1e-6, name


def test_merge_weight_is_pure_and_keeps_dtype():
    rng = np.random.default_rng(0)
    w = rng.normal(size=(6, 5)).astype(np.float16)
    a, b = rng.normal(size=(2, 5)).astype(np.float32), rng.normal(size=(6, 2)).astype(np.float32)
    w_copy = w.copy()
    merged = lora.merge_weight(w, a, b, 0.5)
    np.testing.assert_array_equal(w, w_copy)
    assert merged.dtype == np.float16
    # one rounding of the float32 sum to float16: at most half an ulp, 2^-10 ≈ 1e-3 for |values| < 4,
    # 2e-3 below 8 (these reach 2.7; measured 8.5e-4)
    print(f"\nmerged float16 weight: max |error| {np.abs(merged.astype(np.float32) - (w.astype(np.float32) + 0.5 * b @ a)).max():.2e}"
          f" on values up to {np.abs(merged.astype(np.float32)).max():.2f}")
    np.testing.assert_allclose(merged.astype(np.float32), w.astype(np.float32) + 0.5 * b @ a, atol=2e-3)


def test_fp16_input_runs_adapter_in_fp16():
    rng = np.random.default_rng(0)
    layer = LoRADense(nn.Dense(8, 6, dtype=ms.float16), rank=2, alpha=4.0)
    layer.lora_b.set_data(ms.Tensor(rng.normal(0, 0.5, (6, 2)).astype(np.float32)))
    assert layer.lora_a.dtype == ms.float32  # adapter parameters stay fp32
    x = rng.normal(size=(3, 8)).astype(np.float16)
    out = layer(ms.Tensor(x))
    assert out.dtype == ms.float16
    w, bias = layer.weight.asnumpy().astype(np.float32), layer.bias.asnumpy().astype(np.float32)
    a, b = layer.lora_a.asnumpy(), layer.lora_b.asnumpy()
    x32 = x.astype(np.float32)
    expected = x32 @ w.T + bias + 2.0 * (x32 @ a.T @ b.T)
    error = np.abs(out.asnumpy().astype(np.float32) - expected).max()
    print(f"\nfloat16 LoRA layer: max |error| {error:.2e} on outputs up to {np.abs(expected).max():.2f}")
    # the base product, x·Aᵀ, its product with Bᵀ, the scaling and the two sums each round to
    # float16 (half an ulp each: 2^-11 ≈ 5e-4 at |values| < 2, 1e-3 below 4; these reach 2.7):
    # 1e-2 allows the six roundings at their largest (measured 1.1e-3)
    assert error <= 1e-2


@pytest.mark.slow
def test_dropout_is_active_in_training_only():
    model = tiny_model()
    lora.inject_lora(model, RANK, ALPHA, 0.5, ["q_proj", "down_proj"])
    randomize_lora(model)
    tokens = ids()
    model.set_train(True)
    first, second = logits(model, tokens), logits(model, tokens)
    assert np.abs(first - second).max() > 1e-4  # fresh dropout masks
    model.set_train(False)
    eval_1, eval_2 = logits(model, tokens), logits(model, tokens)
    np.testing.assert_array_equal(eval_1, eval_2)
    assert np.abs(first - eval_1).max() > 1e-4
    for cell in lora.lora_modules(model).values():  # eval equals the adapter without dropout
        cell.lora_dropout.p = 0.0
    np.testing.assert_array_equal(logits(model, tokens), eval_1)


# --- injection -------------------------------------------------------------------------------

def test_inject_list_form_touches_every_projection_and_keeps_hf_names():
    model = tiny_model()
    base_names = [p.name for p in model.get_parameters()]
    replaced = lora.inject_lora(model, RANK, ALPHA, 0.0, ALL_PROJECTIONS)
    layers = LLAMA["num_hidden_layers"]
    assert len(replaced) == 7 * layers
    assert {name.rsplit(".", 1)[1] for name in replaced} == set(PROJECTION_NAMES)  # not lm_head
    names = [p.name for p in model.get_parameters()]
    assert set(base_names) <= set(names)
    assert "model.layers.1.mlp.down_proj.weight" in names
    lora_names = sorted(set(names) - set(base_names))
    assert lora_names == sorted(f"{m}.{p}" for m in replaced for p in ("lora_a", "lora_b"))
    assert len(names) == len(set(names))
    assert all(isinstance(cell, LoRADense) for cell in lora.lora_modules(model).values())


def test_inject_regex_form_uses_fullmatch_on_dotted_names():
    model = tiny_model()
    replaced = lora.inject_lora(model, RANK, ALPHA, 0.0, r".*\.(q_proj|v_proj)")
    assert len(replaced) == 2 * LLAMA["num_hidden_layers"]
    assert all(re.fullmatch(r"model\.layers\.\d\.self_attn\.[qv]_proj", name) for name in replaced)


def test_target_names_match_by_last_name():
    names = ["model.layers.0.self_attn.q_proj", "v_proj", "model.layers.0.self_attn.o_proj",
             "model.layers.0.self_attn.q_proj_extra"]
    chosen = lora.select_target_modules(dict.fromkeys(names), ["q_proj", "v_proj"])
    assert chosen == ["model.layers.0.self_attn.q_proj", "v_proj"]  # not o_proj, not q_proj_extra


def test_inject_from_config_style_settings():
    model = tiny_model()
    settings = SimpleNamespace(rank=2, alpha=4.0, dropout=0.1, target_modules=r"model\.layers\.\d+\.mlp\..*")
    replaced = lora.inject_lora(model, settings.rank, settings.alpha, settings.dropout, settings.target_modules)
    assert len(replaced) == 3 * LLAMA["num_hidden_layers"]
    cell = lora.lora_modules(model)["model.layers.0.mlp.up_proj"]
    assert (cell.rank, cell.scaling, cell.lora_dropout.p) == (2, 2.0, 0.1)


@pytest.mark.parametrize("targets", [["qkv_proj"], r".*\.c_attn", "q_proj"], ids=["list", "regex", "bare-regex"])
def test_pattern_matching_nothing_names_it_and_lists_projections(targets):
    model = tiny_model()
    with pytest.raises(LoraError) as err:
        lora.inject_lora(model, RANK, ALPHA, 0.0, targets)
    message = str(err.value)
    assert (targets[0] if isinstance(targets, list) else targets) in message
    assert all(name in message for name in PROJECTION_NAMES + ("lm_head",))
    assert not lora.lora_modules(model)  # nothing half-injected


def test_inject_twice_and_bad_hyperparameters_are_errors():
    model = tiny_model()
    lora.inject_lora(model, RANK, ALPHA, 0.0, ["q_proj"])
    with pytest.raises(LoraError, match="already has a LoRA adapter"):
        lora.inject_lora(model, RANK, ALPHA, 0.0, ["q_proj"])
    with pytest.raises(LoraError, match="rank"):
        lora.inject_lora(tiny_model(), 0, ALPHA, 0.0, ["q_proj"])
    with pytest.raises(LoraError, match="dropout"):
        lora.inject_lora(tiny_model(), RANK, ALPHA, 1.0, ["q_proj"])


# --- training --------------------------------------------------------------------------------

def test_only_lora_parameters_are_trainable():
    model = tiny_model()
    replaced = lora.inject_lora(model, RANK, ALPHA, 0.0, ALL_PROJECTIONS)
    trainable = lora.mark_only_lora_trainable(model)
    assert sorted(p.name for p in trainable) == sorted(f"{m}.{p}" for m in replaced for p in ("lora_a", "lora_b"))
    assert [p.name for p in model.trainable_params()] == [p.name for p in trainable]
    expected = sum(RANK * (cell.in_channels + cell.out_channels) for cell in lora.lora_modules(model).values())
    assert lora.trainable_parameter_count(model) == expected


@pytest.mark.parametrize("compiled", [pytest.param(False, id="pynative"),
                                      pytest.param(True, id="jit", marks=pytest.mark.slow)])
def test_one_gradient_step_changes_lora_only(compiled):
    model = tiny_model()
    lora.inject_lora(model, RANK, ALPHA, 0.0, ["q_proj", "down_proj"])
    randomize_lora(model)  # B != 0 so A gets a gradient too
    lora.mark_only_lora_trainable(model)
    optimizer = nn.SGD(model.trainable_params(), learning_rate=0.1)
    tokens = ids()

    def loss_fn(input_ids):
        return model(input_ids).mean()

    grad_fn = ms.value_and_grad(loss_fn, None, optimizer.parameters)

    def train_step(input_ids):
        loss, grads = grad_fn(input_ids)
        optimizer(grads)
        return loss

    step = ms.jit(train_step) if compiled else train_step
    before = snapshot(model)
    step(tokens)
    after = snapshot(model)
    for name in before:
        changed = not np.array_equal(before[name], after[name])
        assert changed == name.endswith((".lora_a", ".lora_b")), name


# --- graph modes -----------------------------------------------------------------------------

@pytest.mark.slow
def test_graph_mode_forward_matches_pynative(graph_mode):
    model = tiny_model(QWEN2)
    lora.inject_lora(model, RANK, ALPHA, 0.0, r".*_proj")
    randomize_lora(model)
    tokens = ids()
    graph_logits = logits(model, tokens)  # compiled: GRAPH_MODE is on
    ms.set_context(mode=ms.PYNATIVE_MODE)
    np.testing.assert_allclose(graph_logits, logits(model, tokens), atol=1e-5)


@pytest.mark.slow
def test_jit_sees_merge_and_loaded_weights():
    model = tiny_model()
    lora.inject_lora(model, RANK, ALPHA, 0.0, ["q_proj", "down_proj"])
    randomize_lora(model)
    tokens = ids()

    def forward(net, input_ids):
        return net(input_ids)

    def forward_closure(input_ids):
        return model(input_ids)

    jit_forward, jit_closure = ms.jit(forward), ms.jit(forward_closure)
    expected = logits(model, tokens)
    np.testing.assert_allclose(jit_forward(model, tokens).asnumpy(), expected, atol=1e-5)
    jit_closure(tokens)  # compiled before the weights below are loaded
    lora.merge_lora(model)  # the model passed as an argument re-specialises on the flag
    np.testing.assert_allclose(jit_forward(model, tokens).asnumpy(), expected, atol=1e-5)
    lora.unmerge_lora(model)
    state = {k: v * 2 for k, v in lora.lora_state_dict(model).items()}
    lora.load_lora_state_dict(model, state)  # written in place: graphs compiled earlier see it
    np.testing.assert_allclose(jit_closure(tokens).asnumpy(), logits(model, tokens), atol=1e-5)
    assert np.abs(logits(model, tokens) - expected).max() > 1e-3


# --- adapter state ---------------------------------------------------------------------------

@pytest.mark.slow
def test_lora_state_dict_round_trip_and_errors():
    model = tiny_model()
    replaced = lora.inject_lora(model, RANK, ALPHA, 0.0, ["q_proj", "v_proj"])
    randomize_lora(model)
    state = lora.lora_state_dict(model)
    assert sorted(state) == sorted(f"{m}.{p}" for m in replaced for p in ("lora_a", "lora_b"))
    other = clone_base(model)
    lora.inject_lora(other, RANK, ALPHA, 0.0, ["q_proj", "v_proj"])
    lora.load_lora_state_dict(other, state)
    tokens = ids()
    np.testing.assert_array_equal(logits(other, tokens), logits(model, tokens))

    key = "model.layers.0.self_attn.q_proj.lora_a"
    with pytest.raises(LoraError, match=re.escape(f"missing tensor {key}")):
        lora.load_lora_state_dict(other, {k: v for k, v in state.items() if k != key})
    with pytest.raises(LoraError, match=re.escape("unexpected tensor model.layers.0.mlp.up_proj.lora_a")):
        lora.load_lora_state_dict(other, {**state, "model.layers.0.mlp.up_proj.lora_a": state[key]})
    with pytest.raises(LoraError, match=re.escape(f"tensor {key} has shape (2, 32)")):
        lora.load_lora_state_dict(other, {**state, key: np.zeros((2, 32), np.float32)})


# --- PEFT layout -----------------------------------------------------------------------------

def save_adapter(model, folder, targets=ALL_PROJECTIONS, dropout=0.0):
    return lora.save_peft_adapter(model, folder, "tiny-base", RANK, ALPHA, dropout, targets)


@pytest.mark.parametrize("targets", [ALL_PROJECTIONS, r".*\.(q_proj|v_proj)"], ids=["list", "regex"])
def test_peft_round_trip_gives_identical_logits(targets, tmp_path):
    model = tiny_model()
    fresh = clone_base(model)
    lora.inject_lora(model, RANK, ALPHA, 0.1, targets)
    randomize_lora(model)
    save_adapter(model, tmp_path, targets, dropout=0.1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adapter_config.json", "adapter_model.safetensors"]

    config = json.loads((tmp_path / "adapter_config.json").read_text())
    assert config["peft_type"] == "LORA" and config["task_type"] == "CAUSAL_LM"
    assert (config["r"], config["lora_alpha"], config["lora_dropout"]) == (RANK, ALPHA, 0.1)
    assert config["target_modules"] == targets and config["bias"] == "none"
    assert config["use_dora"] is False and config["fan_in_fan_out"] is False

    from safetensors.numpy import load_file
    tensors = load_file(str(tmp_path / "adapter_model.safetensors"))
    a_key = "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"
    b_key = "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight"
    assert tensors[a_key].shape == (RANK, 32) and tensors[b_key].shape == (32, RANK)
    assert all(re.fullmatch(r"base_model\.model\..+\.lora_[AB]\.weight", key) for key in tensors)
    assert len(tensors) == 2 * len(lora.lora_modules(model))

    loaded = lora.load_peft_adapter(fresh, tmp_path)  # injects from adapter_config.json
    assert loaded == list(lora.lora_modules(model))
    tokens = ids()
    np.testing.assert_array_equal(logits(fresh, tokens), logits(model, tokens))


def test_truncated_adapter_file_is_an_error(tmp_path):
    model = tiny_model()
    lora.inject_lora(model, RANK, ALPHA, 0.0, ["q_proj"])
    save_adapter(model, tmp_path, ["q_proj"])
    weights = tmp_path / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])
    with pytest.raises(LoraError, match="truncated or corrupt"):
        lora.load_peft_adapter(clone_base(model), tmp_path)


def test_unsupported_or_inconsistent_adapters_are_errors(tmp_path):
    model = tiny_model()
    lora.inject_lora(model, RANK, ALPHA, 0.0, ["q_proj"])
    with pytest.raises(LoraError, match="rank 4 and alpha 8.0"):
        lora.save_peft_adapter(model, tmp_path, "tiny-base", 8, ALPHA, 0.0, ["q_proj"])
    save_adapter(model, tmp_path, ["q_proj"])
    config_path = tmp_path / "adapter_config.json"
    config = json.loads(config_path.read_text())
    config_path.write_text(json.dumps({**config, "use_dora": True}))
    with pytest.raises(LoraError, match="use_dora=True is not supported"):
        lora.load_peft_adapter(clone_base(model), tmp_path)
    config_path.write_text(json.dumps({**config, "target_modules": ["k_proj"]}))
    with pytest.raises(LoraError, match="missing tensor model.layers.0.self_attn.k_proj.lora_a"):
        lora.load_peft_adapter(clone_base(model), tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("targets", [ALL_PROJECTIONS, r".*\.(q_proj|v_proj)"], ids=["list", "regex"])
def test_adapter_loads_into_peft_with_the_same_logits(targets, tmp_path):
    peft = skips.module("peft")
    torch = skips.module("torch")
    from core.engine.checkpoint import load_hf_model
    from tests.core.hf_fixtures import make_hf_model, random_ids, reference_logits, save_hf_model

    hf = make_hf_model("llama-gqa-llama3-rope")
    save_hf_model(hf, tmp_path / "base")
    model = load_hf_model(tmp_path / "base")
    lora.inject_lora(model, RANK, ALPHA, 0.0, targets)
    randomize_lora(model)
    lora.save_peft_adapter(model, tmp_path / "adapter", str(tmp_path / "base"), RANK, ALPHA, 0.0, targets)

    tokens = random_ids()
    without_adapter = reference_logits(hf, tokens)
    peft_model = peft.PeftModel.from_pretrained(hf, str(tmp_path / "adapter")).eval()
    with torch.no_grad():
        reference = peft_model(torch.tensor(tokens, dtype=torch.long)).logits.float().numpy()
    assert np.abs(reference - without_adapter).max() > 1e-3  # the adapter took effect in PEFT
    assert np.abs(model(ms.Tensor(tokens)).asnumpy() - reference).max() <= 1e-4

    peft_model.save_pretrained(str(tmp_path / "from_peft"))  # and back: PEFT's own files load here
    fresh = load_hf_model(tmp_path / "base")
    lora.load_peft_adapter(fresh, tmp_path / "from_peft")
    assert np.abs(fresh(ms.Tensor(tokens)).asnumpy() - reference).max() <= 1e-4
