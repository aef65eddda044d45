"""Numerical parity of core.model with Hugging Face transformers (PyTorch) on tiny random checkpoints."""
import json

import numpy as np
import pytest

import mindspore as ms

from core.checkpoint import load_hf_model
from core.model import CausalLM, ModelArgs, ModelConfigError, rope_inverse_frequencies
from tests.core.hf_fixtures import ARCHITECTURES, make_hf_model, random_ids, reference_logits, save_hf_model

torch = pytest.importorskip("torch")

PARITY_TOLERANCE = 1e-4


@pytest.mark.parametrize("name", sorted(ARCHITECTURES))
def test_fp32_logits_match_transformers(name, tmp_path):
    hf = make_hf_model(name)
    save_hf_model(hf, tmp_path)
    ids = random_ids()
    ours = load_hf_model(tmp_path).construct(ms.Tensor(ids)).asnumpy()
    ref = reference_logits(hf, ids)
    assert ours.shape == ref.shape == (2, 24, 97)
    assert np.abs(ours - ref).max() <= PARITY_TOLERANCE


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
    assert np.abs(ours - reference_logits(hf, ids)).max() <= PARITY_TOLERANCE


def test_sharded_checkpoint_matches_single_file(tmp_path):
    hf = make_hf_model("qwen2-tied")
    save_hf_model(hf, tmp_path, max_shard_size="40KB")
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 1
    ids = random_ids()
    ours = load_hf_model(tmp_path).construct(ms.Tensor(ids)).asnumpy()
    assert np.abs(ours - reference_logits(hf, ids)).max() <= PARITY_TOLERANCE


def test_fp16_compute_stays_close_to_fp32(tmp_path):
    save_hf_model(make_hf_model("llama-gqa-llama3-rope"), tmp_path)
    ids = random_ids()
    fp32 = load_hf_model(tmp_path, "float32").construct(ms.Tensor(ids)).asnumpy()
    model16 = load_hf_model(tmp_path, "float16")
    assert all(p.dtype == ms.float16 for p in model16.get_parameters())
    fp16 = model16.construct(ms.Tensor(ids)).asnumpy()
    assert 0 < np.abs(fp16 - fp32).max() < 2e-2


def test_right_padding_does_not_change_real_positions(tmp_path):
    save_hf_model(make_hf_model("llama-gqa-llama3-rope"), tmp_path)
    model = load_hf_model(tmp_path)
    ids = random_ids(batch=1, length=10)
    padded = np.concatenate([ids, np.zeros((1, 6), np.int32)], axis=1)
    mask = np.concatenate([np.ones((1, 10)), np.zeros((1, 6))], axis=1).astype(np.int32)
    alone = model.construct(ms.Tensor(ids)).asnumpy()
    with_pad = model.construct(ms.Tensor(padded), ms.Tensor(mask)).asnumpy()
    assert np.abs(with_pad[:, :10] - alone).max() < 1e-5


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


def test_mistral_sliding_window_caps_context():
    args = ModelArgs.from_hf_config(_config(architectures=["MistralForCausalLM"], model_type="mistral",
                                            max_position_embeddings=4096, sliding_window=1024))
    assert args.family == "llama" and args.max_position_embeddings == 1024


def test_randomly_initialised_model_has_hf_parameter_names():
    model = CausalLM(ModelArgs.from_hf_config(_config(tie_word_embeddings=True)))
    names = [p.name for p in model.get_parameters()]
    assert names[0] == "model.embed_tokens.weight"
    assert "model.layers.0.self_attn.q_proj.weight" in names
    assert "model.layers.0.mlp.down_proj.weight" in names
    assert "lm_head.weight" not in names
