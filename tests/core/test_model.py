"""Numerical parity of core.engine.model with Hugging Face transformers (PyTorch) on tiny random checkpoints."""
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

import mindspore as ms

from core.engine.checkpoint import load_hf_model
from core.spec.errors import ModelConfigError
from core.engine.model import CausalLM, ModelArgs, rope_inverse_frequencies

from tests import skips
from tests.core.hf_fixtures import (ARCHITECTURES, assert_logit_parity, make_hf_model, random_ids,
                                    reference_logits, save_hf_model)

torch = skips.module("torch")


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ARCHITECTURES))
def test_fp32_logits_match_transformers(name, tmp_path):
    hf = make_hf_model(name)
    save_hf_model(hf, tmp_path)
    ids = random_ids()
    ours = load_hf_model(tmp_path).construct(ms.Tensor(ids)).asnumpy()
    ref = reference_logits(hf, ids)
    assert ours.shape == ref.shape == (2, 24, 97)
    assert_logit_parity(ours, ref, name)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ARCHITECTURES))
def test_fused_kernels_serve_every_family_with_parity(name, tmp_path):
    """The fused CPU kernels compute each family's maths (windows, QK-norm, partial and interleaved
    RoPE, ...): every part runs fused, compiled logits equal transformers'."""
    import core.engine.fused as fused
    hf = make_hf_model(name)
    save_hf_model(hf, tmp_path)
    model = load_hf_model(tmp_path)
    how = fused.enable(model)
    if how.startswith("composed"):
        skips.skip("kernels", how)
    assert how == "fused"
    ids = random_ids()
    assert_logit_parity(ms.jit(model.construct)(ms.Tensor(ids)).asnumpy(), reference_logits(hf, ids), f"{name} fused")


@pytest.mark.parametrize("name", sorted(ARCHITECTURES))
def test_parameter_count_matches_transformers(name, tmp_path):
    hf = make_hf_model(name)
    save_hf_model(hf, tmp_path)
    args = ModelArgs.from_dir(tmp_path)
    ours = sum(int(np.prod(p.shape)) for p in load_hf_model(tmp_path).get_parameters())
    assert args.num_parameters() == ours == hf.num_parameters()


@pytest.mark.parametrize("stored", ["float16", "bfloat16"])
def test_half_precision_checkpoint_loads_into_fp32(stored, tmp_path):
    hf = make_hf_model("llama-gqa-llama3-rope")
    save_hf_model(hf, tmp_path, dtype=getattr(torch, stored))
    assert ModelArgs.from_dir(tmp_path).stored_dtype == stored
    ids = random_ids()
    ours = load_hf_model(tmp_path, "float32").construct(ms.Tensor(ids)).asnumpy()
    # the reference upcasts the same rounded weights to fp32
    assert_logit_parity(ours, reference_logits(hf, ids), f"{stored} stored")


@pytest.mark.parametrize("name", ["qwen3-untied", "mistral-window", "glm4", "olmo2"])
def test_family_fp16_checkpoint_matches_transformers_on_the_same_weights(name, tmp_path):
    """An fp16 folder of each family (bf16 ones: the transformers 4.x test below) computes in fp32:
    logits equal transformers' reading the same folder in fp32."""
    from transformers import AutoModelForCausalLM
    save_hf_model(make_hf_model(name), tmp_path, dtype=torch.float16)
    assert ModelArgs.from_dir(tmp_path).stored_dtype == "float16"
    reference = AutoModelForCausalLM.from_pretrained(str(tmp_path), dtype=torch.float32).eval()
    ids = random_ids()
    ours = load_hf_model(tmp_path, "float32").construct(ms.Tensor(ids)).asnumpy()
    assert_logit_parity(ours, reference_logits(reference, ids), f"{name} fp16 folder")


def test_sharded_checkpoint_matches_single_file(tmp_path):
    hf = make_hf_model("qwen2-tied")
    save_hf_model(hf, tmp_path, max_shard_size="40KB")
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 1
    ids = random_ids()
    ours = load_hf_model(tmp_path).construct(ms.Tensor(ids)).asnumpy()
    assert_logit_parity(ours, reference_logits(hf, ids), "sharded")


@pytest.mark.slow
def test_fp16_compute_stays_close_to_fp32(tmp_path):
    save_hf_model(make_hf_model("llama-gqa-llama3-rope"), tmp_path)
    ids = random_ids()
    fp32 = load_hf_model(tmp_path, "float32").construct(ms.Tensor(ids)).asnumpy()
    model16 = load_hf_model(tmp_path, "float16")
    assert all(p.dtype == ms.float16 for p in model16.get_parameters())
    fp16 = model16.construct(ms.Tensor(ids)).asnumpy()
    difference = np.abs(fp16 - fp32).max()
    print(f"\nfp16 vs fp32 logits: max |difference| {difference:.2e} on logits up to {np.abs(fp32).max():.3f}")
    # float16 keeps 11 significant bits (unit roundoff u = 2^-11 = 4.9e-4): every weight and
    # activation is rounded to it, through 2 layers of 64/96-wide dot products into the LM head's.
    # Measured 4.8e-4 on logits up to 0.66 (the CPU sums the products in float32). A kernel that
    # accumulates in float16 adds ~sqrt(n)·u ≈ 5e-3 of the values per n = 64..96-wide sum (n·u ≈ 5e-2
    # at worst): 2e-2 admits that, and stays well below what a wrong op (a mask, a RoPE) does.
    assert 0 < difference < 2e-2


def test_right_padding_does_not_change_real_positions(tmp_path):
    save_hf_model(make_hf_model("llama-gqa-llama3-rope"), tmp_path)
    model = load_hf_model(tmp_path)
    ids = random_ids(batch=1, length=10)
    padded = np.concatenate([ids, np.zeros((1, 6), np.int32)], axis=1)
    mask = np.concatenate([np.ones((1, 10)), np.zeros((1, 6))], axis=1).astype(np.int32)
    alone = model.construct(ms.Tensor(ids)).asnumpy()
    with_pad = model.construct(ms.Tensor(padded), ms.Tensor(mask)).asnumpy()
    assert np.abs(with_pad[:, :10] - alone).max() < 1e-5


@pytest.mark.slow
def test_jit_forward_equals_pynative(tmp_path):
    save_hf_model(make_hf_model("qwen2-tied"), tmp_path)
    model = load_hf_model(tmp_path)
    ids = ms.Tensor(random_ids())
    eager = model.construct(ids).asnumpy()
    compiled = ms.jit(model.construct)(ids).asnumpy()
    assert np.abs(compiled - eager).max() < 1e-5


def test_llama3_rope_frequencies_match_transformers():
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 64}
    config = LlamaConfig(hidden_size=256, num_attention_heads=2, rope_theta=500000.0, rope_scaling=scaling)
    ref, _ = ROPE_INIT_FUNCTIONS["llama3"](config, "cpu")
    ours = rope_inverse_frequencies(ModelArgs.from_hf_config(config.to_dict()))
    assert ours.shape == (64,)
    np.testing.assert_allclose(ours, ref.numpy(), rtol=1e-6)
    assert not np.allclose(ours, rope_inverse_frequencies(ModelArgs.from_hf_config(
        LlamaConfig(hidden_size=256, num_attention_heads=2, rope_theta=500000.0).to_dict())))


def _config(**changes):
    base = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 10,
            "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2}
    base.update(changes)
    return base


@pytest.mark.parametrize("changes, fragment", [
    ({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2"}, "GPT2LMHeadModel"),
    ({"hidden_act": "gelu"}, "hidden_act"),
    ({"num_key_value_heads": 3}, "num_key_value_heads"),
    ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, "yarn"),
    ({"rope_scaling": {"rope_type": "llama3", "factor": 8.0}}, "low_freq_factor"),
    ({"hidden_size": "8"}, "hidden_size"),
])
def test_unsupported_configs_name_the_key(changes, fragment):
    with pytest.raises(ModelConfigError, match=fragment):
        ModelArgs.from_hf_config(_config(**changes), source="x/config.json")


def test_classic_and_v5_rope_layouts_agree():
    classic = ModelArgs.from_hf_config(_config(rope_theta=1e6, rope_scaling={"type": "linear", "factor": 2.0}))
    v5 = ModelArgs.from_hf_config(_config(rope_parameters={"rope_theta": 1e6, "rope_type": "linear", "factor": 2.0}))
    assert classic.rope_theta == v5.rope_theta == 1e6
    assert classic.rope_scaling == v5.rope_scaling == {"rope_type": "linear", "factor": 2.0}


def test_mistral_sliding_window_is_a_mask_not_a_cap():
    args = ModelArgs.from_hf_config(_config(architectures=["MistralForCausalLM"], model_type="mistral",
                                            max_position_embeddings=4096, sliding_window=1024))
    assert args.family == "mistral" and args.max_position_embeddings == 4096
    assert [args.layer_window(n) for n in range(args.num_layers)] == [1024]


def test_qwen_window_applies_from_max_window_layers_when_enabled():
    base = _config(architectures=["Qwen3ForCausalLM"], model_type="qwen3", num_hidden_layers=4,
                   sliding_window=32, max_window_layers=2)
    unused = ModelArgs.from_hf_config(base)  # use_sliding_window false: the window is not used
    assert unused.sliding_window is None and unused.layer_window(3) is None
    used = ModelArgs.from_hf_config({**base, "use_sliding_window": True})
    assert [used.layer_window(n) for n in range(4)] == [None, None, 32, 32]
    listed = ModelArgs.from_hf_config({**base, "use_sliding_window": True, "layer_types": [
        "sliding_attention", "full_attention", "full_attention", "sliding_attention"]})
    assert [listed.layer_window(n) for n in range(4)] == [32, None, None, 32]


@pytest.mark.parametrize("name", sorted(ARCHITECTURES))
def test_parameter_shapes_name_every_parameter(name, tmp_path):
    save_hf_model(make_hf_model(name), tmp_path)
    model = load_hf_model(tmp_path)
    assert ModelArgs.from_dir(tmp_path).parameter_shapes() == {p.name: tuple(p.shape) for p in model.get_parameters()}


@pytest.mark.slow
@pytest.mark.parametrize("name", ["qwen3-untied", "mistral-window", "glm4"])
@pytest.mark.parametrize("kernels", ["composed", "fused"])
def test_packed_rows_equal_separate_forwards(name, kernels, tmp_path):
    """Two samples packed into one row (position_ids restart, segment_ids 1 and 2) and a sample
    followed by padding (segment 0) give each sample the logits it gets alone."""
    import core.engine.fused as fused
    save_hf_model(make_hf_model(name), tmp_path)
    model = load_hf_model(tmp_path)
    if kernels == "fused" and not fused.enable(model).startswith("fused"):
        skips.skip("kernels", "fused kernels unavailable")
    first, second = random_ids(1, 10, seed=3), random_ids(1, 14, seed=4)
    ids = np.concatenate([np.concatenate([first, second], 1), np.concatenate([first, second * 0], 1)])
    positions = np.array([list(range(10)) + list(range(14))] * 2, np.int32)
    segments = np.array([[1] * 10 + [2] * 14, [1] * 10 + [0] * 14], np.int32)
    packed = ms.jit(model.construct)(ms.Tensor(ids), None, ms.Tensor(positions), ms.Tensor(segments)).asnumpy()
    alone_first = model.construct(ms.Tensor(first)).asnumpy()[0]
    alone_second = model.construct(ms.Tensor(second)).asnumpy()[0]
    assert np.abs(packed[0, :10] - alone_first).max() < 1e-5
    assert np.abs(packed[0, 10:] - alone_second).max() < 1e-5
    assert np.abs(packed[1, :10] - alone_first).max() < 1e-5
    unpacked = model.construct(ms.Tensor(ids[:1])).asnumpy()[0]
    assert np.abs(unpacked[10:] - alone_second).max() > 1e-2  # without the inputs the samples would mix


@pytest.mark.parametrize("changes, fragment", [
    ({"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3"}, "multi-head latent attention"),
    ({"architectures": ["Llama4ForCausalLM"], "model_type": "llama4"}, "Llama 4"),
    ({"auto_map": {"AutoModelForCausalLM": "modeling_x.XForCausalLM"}}, "auto_map"),
    ({"rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}, "dynamic"),
    ({"rope_parameters": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e6}}, "rope_parameters.rope_type"),
    ({"sliding_window": 0, "architectures": ["MistralForCausalLM"]}, "sliding_window"),
])
def test_unsupported_models_are_refused_naming_the_key(changes, fragment):
    with pytest.raises(ModelConfigError, match=fragment):
        ModelArgs.from_hf_config(_config(**changes), source="x/config.json")


def test_randomly_initialised_model_has_hf_parameter_names():
    model = CausalLM(ModelArgs.from_hf_config(_config(tie_word_embeddings=True)))
    names = [p.name for p in model.get_parameters()]
    assert names[0] == "model.embed_tokens.weight"
    assert "model.layers.0.self_attn.q_proj.weight" in names
    assert "model.layers.0.mlp.down_proj.weight" in names
    assert "lm_head.weight" not in names


def test_run_settings_beyond_the_model_are_named_before_weights_are_read():
    from core.spec.model_args import run_problems
    args = ModelArgs.from_hf_config(_config(max_position_embeddings=64))
    assert run_problems(args, 64, "lora", "all-linear") == []
    (key, value, why), = run_problems(args, 65, "full", ["nothing"])  # targets only matter for LoRA
    assert key == "data.max_seq_len" and value == 65 and "context of 64 tokens" in why
    (key, _, why), = run_problems(args, 32, "lora", ["q_proj", "qkv_proj"])
    assert key == "lora.target_modules" and "qkv_proj" in why and "gate_proj" in why
    (key, _, _), = run_problems(args, 32, "lora", r".*\.nothing")
    assert key == "lora.target_modules"


def test_all_linear_targets_the_family_projections(tmp_path):
    from core.engine.lora import inject_lora
    save_hf_model(make_hf_model("glm4"), tmp_path)
    model = load_hf_model(tmp_path)
    names = inject_lora(model, 2, 4.0, 0.0, "all-linear")
    assert sorted({n.rsplit(".", 1)[1] for n in names}) == ["down_proj", "gate_up_proj", "k_proj", "o_proj",
                                                             "q_proj", "v_proj"]
    assert len(names) == 6 * 2 and not any("lm_head" in n for n in names)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ARCHITECTURES))
def test_transformers4_config_and_sharded_half_weights_load_alike(name, tmp_path):
    """The same checkpoint as transformers 5 writes it (fp32, one file) and as older hub folders
    are (transformers 4.x config.json keys, bf16 in shards): the same architecture, and logits
    equal transformers' on the weights each holds (the bf16 folder read back by transformers in
    float32: a model cast to bf16 in memory would keep bf16-rounded RoPE buffers)."""
    from transformers import AutoModelForCausalLM
    from tests.core.hf_fixtures import as_transformers4_config
    hf = make_hf_model(name)
    v5, v4 = save_hf_model(hf, tmp_path / "v5"), tmp_path / "v4"
    save_hf_model(make_hf_model(name), v4, dtype=torch.bfloat16, max_shard_size="40KB")
    assert len(set(json.loads((v4 / "model.safetensors.index.json").read_text())["weight_map"].values())) > 1
    config = json.loads((v4 / "config.json").read_text())
    (v4 / "config.json").write_text(json.dumps(as_transformers4_config(config)))
    new, old = ModelArgs.from_dir(v5), ModelArgs.from_dir(v4)
    assert "rope_parameters" in config and "rope_parameters" not in as_transformers4_config(config)
    assert old == dataclasses.replace(new, stored_dtype="bfloat16")
    bf16 = AutoModelForCausalLM.from_pretrained(str(v4), dtype=torch.float32).eval()
    ids = random_ids()
    for folder, reference in ((v5, hf), (v4, bf16)):
        ours = load_hf_model(folder).construct(ms.Tensor(ids)).asnumpy()
        assert_logit_parity(ours, reference_logits(reference, ids), f"{name} {folder.name}")


FAMILY_CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs" / "families").glob("*.yaml"))


@pytest.mark.parametrize("path", FAMILY_CONFIGS, ids=lambda p: p.stem)
def test_family_example_configs_target_their_family_modules(path):
    """configs/families/<family>.yaml: its LoRA targets exist in a checkpoint of that family (a
    fixture's config), whatever its method."""
    from core.spec.config import load_config
    from core.spec.model_args import ARCHITECTURES as FAMILY_OF, run_problems
    from tests.core.hf_fixtures import COMMON
    fixture = next((n for n, (_, model_cls, _) in sorted(ARCHITECTURES.items())
                    if FAMILY_OF.get(model_cls) == path.stem), None)
    assert fixture is not None, f"no fixture of family {path.stem} in tests/core/hf_fixtures.py's ARCHITECTURES"
    config_cls, _, overrides = ARCHITECTURES[fixture]
    import transformers
    args = ModelArgs.from_hf_config(getattr(transformers, config_cls)(**{**COMMON, **overrides}).to_dict())
    assert run_problems(args, 1, "lora", load_config(path).lora.target_modules) == []
