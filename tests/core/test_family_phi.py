"""Phi-3 / Phi-4 (Phi3ForCausalLM) against transformers on tiny random checkpoints: fused qkv_proj
and gate_up_proj, partial rotary, LongRoPE on short and long inputs, the sliding window, both
config.json spellings, the hub's own config files (with their auto_map), and generation."""
import json

import numpy as np
import pytest

import mindspore as ms

from core.engine.checkpoint import load_hf_model
from core.engine.generate import SamplingSettings, generate
from core.spec.model_args import ModelArgs
from core.spec.errors import ModelConfigError

from tests import skips
from tests.core.family_fixtures import (PHI3_MINI_4K, PHI4, PHI4_MINI_INSTRUCT, make_model, rewrite_config,
                                        save_model, v4_spelling)
from tests.core.hf_fixtures import assert_logit_parity, random_ids, save_hf_model
from tests.core.test_family_gemma import fused_generations, hf_logits, ours_logits

torch = skips.module("torch")
transformers = skips.module("transformers")

TOLERANCE = 1e-4
PHIS = ["phi3", "phi4-mini"]


@pytest.mark.parametrize("name", PHIS)
@pytest.mark.parametrize("length", [12, 24])  # phi4-mini: within its original context (16) and beyond
def test_fp32_logits_match_transformers(name, length, tmp_path):
    hf, folder = save_model(name, tmp_path)
    ids = random_ids(length=length)
    ours, ref = ours_logits(folder, ids), hf_logits(hf, ids)
    assert ours.shape == ref.shape == (2, length, 97)
    assert_logit_parity(ours, ref)


def test_phi_layers_keep_the_hub_fused_projections(tmp_path):
    _, folder = save_model("phi3", tmp_path)
    model = load_hf_model(folder)
    names = {p.name for p in model.get_parameters()}
    assert {"model.layers.0.self_attn.qkv_proj.weight", "model.layers.0.mlp.gate_up_proj.weight"} <= names
    assert not {n.split(".")[-2] for n in names} & {"q_proj", "k_proj", "v_proj", "gate_proj", "up_proj"}
    args = model.args
    assert args.spec.projections == ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")
    assert args.parameter_shapes()["model.layers.0.self_attn.qkv_proj.weight"] == (64 + 2 * 32, 64)
    assert (args.layer_types, args.sliding_window) == (("sliding_attention",) * 2, 9)


@pytest.mark.parametrize("name, length, change", [
    ("phi4-mini", 24, dict(partial_rotary_factor=1.0, rope_scaling=None)),  # partial rotary (and LongRoPE) matter
    ("phi4-mini", 24, dict(original_max_position_embeddings=64)),  # long factors beyond the original context
    ("phi4-mini", 12, dict(rope_scaling=None, partial_rotary_factor=0.75)),  # short factors and attention factor
    ("phi3", 24, dict(sliding_window=None)),
])
def test_each_feature_changes_the_logits(name, length, change):
    ids = random_ids(length=length)
    assert np.abs(hf_logits(make_model(name), ids) - hf_logits(make_model(name, **change), ids)).max() > 100 * TOLERANCE


@pytest.mark.parametrize("name", PHIS)
@pytest.mark.parametrize("rope_type", ["longrope", "su"])
def test_transformers_4_config_spelling_reads_the_same(name, rope_type, tmp_path):
    hf, folder = save_model(name, tmp_path)
    v5 = ModelArgs.from_dir(folder)

    def v4(cfg):
        cfg = v4_spelling(cfg)
        if cfg["rope_scaling"]:
            cfg["rope_scaling"]["type"] = rope_type
        return cfg
    cfg = rewrite_config(folder, v4)
    assert "rope_parameters" not in cfg and cfg["original_max_position_embeddings"]
    assert ModelArgs.from_dir(folder) == v5
    ids = random_ids(batch=1, length=20)
    assert_logit_parity(ours_logits(folder, ids), hf_logits(hf, ids))


def test_longrope_args(tmp_path):
    args = ModelArgs.from_dir(save_model("phi4-mini", tmp_path)[1])
    assert args.rotary_dim == 12 and args.partial_rotary_factor == 0.75
    scaling = args.rope_scaling
    assert scaling["rope_type"] == "longrope" and scaling["original_max_position_embeddings"] == 16
    assert scaling["attention_factor"] == pytest.approx(np.sqrt(1 + np.log(128 / 16) / np.log(16)))
    assert len(scaling["short_factor"]) == len(scaling["long_factor"]) == 6


def _hf_parameters(cfg: dict) -> int:
    with torch.device("meta"):
        config = transformers.AutoConfig.for_model(**{k: v for k, v in cfg.items() if k != "auto_map"})
        return transformers.AutoModelForCausalLM.from_config(config).num_parameters()


@pytest.mark.parametrize("cfg, expected", [
    (PHI3_MINI_4K, dict(num_layers=32, num_kv_heads=32, head_dim=96, sliding_window=2047, rope_scaling=None,
                        tie_word_embeddings=False, rotary_dim=96)),
    (PHI4_MINI_INSTRUCT, dict(num_layers=32, num_kv_heads=8, head_dim=128, rotary_dim=96, tie_word_embeddings=True,
                              sliding_window=262144, max_position_embeddings=131072)),
    (PHI4, dict(num_layers=40, num_kv_heads=10, head_dim=128, sliding_window=None, rope_theta=250000.0,
                max_position_embeddings=16384)),
])
def test_hub_config_files_read_as_transformers_reads_them(cfg, expected):
    """The hub's config.json files; Phi-3-mini and Phi-4-mini carry an auto_map naming their own copy
    of modeling_phi3.Phi3ForCausalLM, which transformers ignores for its native class (so do we)."""
    args = ModelArgs.from_hf_config(json.loads(json.dumps(cfg)))
    assert {k: getattr(args, k) for k in expected} == expected
    assert args.num_parameters() == _hf_parameters(cfg)
    if cfg is PHI4_MINI_INSTRUCT:
        assert args.rope_scaling["original_max_position_embeddings"] == 4096
        assert args.rope_scaling["attention_factor"] == pytest.approx(np.sqrt(1 + np.log(32) / np.log(4096)))


@pytest.mark.parametrize("change, fragment", [
    ({"rope_scaling": {"type": "yarn", "factor": 4.0}}, r"rope_scaling\.rope_type: 'yarn' is not supported for phi3; "
                                                        r"supported: default, linear, llama3, longrope"),
    ({"rope_scaling": {"type": "dynamic", "factor": 2.0}}, "'dynamic' is not supported"),
    ({"rope_scaling": {"type": "longrope", "short_factor": [1.0] * 48}}, r"rope_scaling\.long_factor"),
    ({"rope_scaling": {"type": "longrope", "short_factor": [1.0] * 47, "long_factor": [1.0] * 48}},
     r"rope_scaling\.short_factor: must list one factor per rotary frequency \(48"),
    ({"auto_map": {"AutoModelForCausalLM": "modeling_phi3_custom.MyPhi"}}, "auto_map"),
])
def test_bad_phi_configs_name_the_key(change, fragment):
    with pytest.raises(ModelConfigError, match=fragment):
        ModelArgs.from_hf_config({**PHI4_MINI_INSTRUCT, **change}, source="x/config.json")


@pytest.mark.parametrize("stored", ["float16", "bfloat16"])
def test_half_precision_checkpoints_load(stored, tmp_path):
    folder = save_hf_model(make_model("phi4-mini"), tmp_path, dtype=getattr(torch, stored))
    hf = transformers.AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    ids = random_ids(batch=1)
    assert_logit_parity(ours_logits(folder, ids), hf_logits(hf, ids))


def test_sharded_checkpoint_loads(tmp_path):
    hf, folder = save_model("phi3", tmp_path, max_shard_size="30KB")
    assert len(set(json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"].values())) > 2
    ids = random_ids(batch=1)
    assert_logit_parity(ours_logits(folder, ids), hf_logits(hf, ids))


def _greedy(hf, ours, prompt, new_tokens):
    settings = SamplingSettings(max_new_tokens=new_tokens)
    cached = generate(ours, [prompt], settings)[0]
    uncached = generate(ours, [prompt], settings, use_cache=False)[0]
    with torch.no_grad():
        ref = hf.generate(torch.tensor([prompt]), max_new_tokens=new_tokens, do_sample=False, pad_token_id=0,
                          eos_token_id=None)[0, len(prompt):].tolist()
    return cached, uncached, ref


@pytest.mark.slow
@pytest.mark.parametrize("name, prompt_length, new_tokens", [
    ("phi3", 7, 12),  # past the window (9)
    ("phi4-mini", 5, 9),  # within the original context (16): short factors throughout
    ("phi4-mini", 18, 8),  # beyond it from the prompt on: long factors throughout
])
def test_generation_with_cache_equals_no_cache_and_transformers(name, prompt_length, new_tokens, tmp_path):
    hf, folder = save_model(name, tmp_path)
    ours = load_hf_model(folder)
    prompt = random_ids(batch=1, length=prompt_length)[0].tolist()
    cached, uncached, ref = _greedy(hf, ours, prompt, new_tokens)
    assert cached == uncached == ref and len(cached) == new_tokens


@pytest.mark.slow
def test_generation_crossing_the_original_context_recomputes_the_cache(tmp_path):
    """LongRoPE switches every position to the long factors once a sequence outgrows the original
    context (16): when a cached generation crosses it, the cache (short-factor keys) is recomputed
    once, as transformers' Phi-3 does, so cached, uncached and transformers agree, for a left-padded
    batch too (the factors are chosen for the batch's longest row, as transformers chooses them)."""
    hf, folder = save_model("phi4-mini", tmp_path)
    ours = load_hf_model(folder)
    prompt = random_ids(batch=1, length=10)[0].tolist()
    cached, uncached, ref = _greedy(hf, ours, prompt, 12)
    assert cached == uncached == ref
    prompts, settings = [prompt[:4], prompt], SamplingSettings(max_new_tokens=10)
    assert generate(ours, prompts, settings) == generate(ours, prompts, settings, use_cache=False)


@pytest.mark.slow
@pytest.mark.parametrize("name, prompt_length, new_tokens", [
    ("phi3", 12, 8),  # the prompt is longer than the window (9)
    ("phi4-mini", 12, 8),  # crosses the original context (16): the cache is recomputed by the kernel
])
def test_fused_generation_with_cache_equals_no_cache_and_transformers(name, prompt_length, new_tokens, tmp_path):
    cached, uncached, composed, ref, batch, alone = fused_generations(name, tmp_path, prompt_length, new_tokens)
    assert cached == uncached == composed == ref and len(cached) == new_tokens
    assert batch[0] == batch[1]
    if name == "phi3":  # LongRoPE chooses the factors for the batch's longest row, as transformers does
        assert batch[0] == alone


@pytest.mark.slow
def test_fused_and_compiled_longrope_picks_the_factors_per_forward(tmp_path):
    """In a compiled graph the short/long choice is made from the positions at run time (one graph
    serves both lengths' shapes of the same model), with the fused attention's partial rotary."""
    import core.engine.fused as fused
    hf, folder = save_model("phi4-mini", tmp_path)
    model = load_hf_model(folder)
    how = fused.enable(model)
    if how.startswith("composed"):
        skips.skip("kernels", how)
    assert how == "fused"
    forward = ms.jit(model.construct)
    for length in (12, 24):
        ids = random_ids(length=length)
        assert_logit_parity(forward(ms.Tensor(ids)).asnumpy(), hf_logits(hf, ids))
    # packed rows restart their positions: the largest position decides, as in transformers
    ids = random_ids(batch=1, length=24)
    positions = np.concatenate([np.arange(10), np.arange(14)]).astype(np.int32)[None]
    segments = np.array([[1] * 10 + [2] * 14], np.int32)
    packed = forward(ms.Tensor(ids), None, ms.Tensor(positions), ms.Tensor(segments)).asnumpy()
    with torch.no_grad():
        alone = hf(torch.tensor(ids[:, 10:], dtype=torch.long)).logits.numpy()
    assert np.abs(packed[:, 10:] - alone).max() <= TOLERANCE  # 14 tokens: within the original 16
