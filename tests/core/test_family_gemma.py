"""Gemma 2 and Gemma 3 (text, and the language model of Gemma3ForConditionalGeneration) against
transformers on tiny random checkpoints: fp32 logits, every feature mattering, both config.json
spellings, the hub's own config files, half-precision and sharded weights, and generation."""
import json

import numpy as np
import pytest

import mindspore as ms

from core.engine.checkpoint import load_hf_model
from core.engine.generate import SamplingSettings, generate
from core.spec.model_args import ModelArgs
from core.spec.families import FULL, SLIDING
from core.spec.errors import ModelConfigError

from tests import skips
from tests.core.family_fixtures import (GEMMA2_2B, GEMMA3_1B, GEMMA3_4B, ID_LIMIT, make_model, rewrite_config,
                                        save_model, v4_spelling)
from tests.core.hf_fixtures import assert_logit_parity, random_ids, save_hf_model

torch = skips.module("torch")
transformers = skips.module("transformers")

TOLERANCE = 1e-4
GEMMAS = ["gemma2", "gemma3", "gemma3-vision"]


def ids_for(batch=2, length=24, seed=1):
    return random_ids(batch, length, seed) % ID_LIMIT


def hf_logits(model, ids) -> np.ndarray:
    with torch.no_grad():
        return model.float()(torch.tensor(ids, dtype=torch.long)).logits.float().numpy()


def ours_logits(folder, ids, dtype="float32") -> np.ndarray:
    return load_hf_model(folder, dtype).construct(ms.Tensor(ids)).asnumpy()


@pytest.mark.parametrize("name", GEMMAS)
def test_fp32_logits_match_transformers(name, tmp_path):
    hf, folder = save_model(name, tmp_path)
    ids = ids_for()
    ours, ref = ours_logits(folder, ids), hf_logits(hf, ids)
    assert ours.shape == ref.shape == (2, 24, 97)
    assert_logit_parity(ours, ref)


@pytest.mark.slow
@pytest.mark.parametrize("name, change", [
    ("gemma2", dict(attn_logit_softcapping=None)),
    ("gemma2", dict(final_logit_softcapping=None)),
    ("gemma2", dict(query_pre_attn_scalar=16)),
    ("gemma2", dict(sliding_window=64)),
    ("gemma3", dict(rope_local_base_freq=50000.0)),
    ("gemma3", dict(rope_scaling=None)),
    ("gemma3", dict(sliding_window_pattern=1)),
])
def test_each_feature_changes_the_logits(name, change):
    """The fixtures are sized so that a model leaving a feature out would fail the parity test:
    the same weights without the feature give logits more than 100x the tolerance away."""
    ids = ids_for()
    assert np.abs(hf_logits(make_model(name), ids) - hf_logits(make_model(name, **change), ids)).max() > 100 * TOLERANCE


@pytest.mark.parametrize("name", GEMMAS)
def test_transformers_4_config_spelling_reads_the_same(name, tmp_path):
    hf, folder = save_model(name, tmp_path)
    v5 = ModelArgs.from_dir(folder)
    cfg = rewrite_config(folder, v4_spelling)
    assert "layer_types" not in json.dumps(cfg) and "rope_parameters" not in json.dumps(cfg)
    assert ModelArgs.from_dir(folder) == v5
    ids = ids_for(batch=1)
    assert_logit_parity(ours_logits(folder, ids), hf_logits(hf, ids))


def test_gemma_args_from_the_tiny_configs(tmp_path):
    g2 = ModelArgs.from_dir(save_model("gemma2", tmp_path / "g2")[1])
    assert (g2.family, g2.spec.norm, g2.activation, g2.spec.embedding_scale) == ("gemma2", "rms_offset", "gelu_tanh", True)
    assert g2.layer_types == (SLIDING, FULL, SLIDING) and g2.sliding_window == 7
    assert (g2.attention_scale, g2.attn_softcap, g2.final_softcap) == (24 ** -0.5, 0.8, 1.2)
    g3 = ModelArgs.from_dir(save_model("gemma3-vision", tmp_path / "g3")[1])
    assert (g3.family, g3.architecture, g3.spec.qk_norm) == ("gemma3", "Gemma3ForConditionalGeneration", "head")
    assert g3.layer_types == (SLIDING, SLIDING, FULL)
    assert (g3.rope_theta, g3.local_rope_theta, g3.rope_scaling) == (
        50000.0, 1000.0, {"rope_type": "linear", "factor": 2.0})
    assert (g3.attn_softcap, g3.final_softcap) == (None, None)


def _hf_text_parameters(cfg: dict) -> int:
    """Parameters of transformers' language model for a hub config.json (built on the meta device)."""
    with torch.device("meta"):
        if "text_config" in cfg:
            model = transformers.Gemma3ForConditionalGeneration(transformers.Gemma3Config(**cfg))
            return sum(p.numel() for p in model.model.language_model.parameters())
        config = transformers.AutoConfig.for_model(**cfg)
        return transformers.AutoModelForCausalLM.from_config(config).num_parameters()


@pytest.mark.parametrize("cfg, expected", [
    (GEMMA2_2B, dict(num_layers=26, head_dim=256, num_kv_heads=4, tie_word_embeddings=True, sliding_window=4096,
                     attn_softcap=50.0, final_softcap=30.0, attention_scale=1 / 16, stored_dtype="float32")),
    (GEMMA3_1B, dict(num_layers=26, num_kv_heads=1, sliding_window=512, local_rope_theta=10000.0,
                     rope_theta=1000000.0, rope_scaling=None, final_softcap=None, eos_token_ids=(1, 106),
                     stored_dtype="bfloat16")),
    (GEMMA3_4B, dict(num_layers=34, vocab_size=262208, hidden_size=2560, num_heads=8, num_kv_heads=4, head_dim=256,
                     sliding_window=1024, local_rope_theta=10000.0, rope_theta=1000000.0,
                     rope_scaling={"rope_type": "linear", "factor": 8.0}, tie_word_embeddings=True,
                     attention_scale=1 / 16, eos_token_ids=(1, 106), stored_dtype="bfloat16",
                     max_position_embeddings=131072, activation="gelu_tanh")),
])
def test_hub_config_files_read_as_transformers_reads_them(cfg, expected):
    """The hub's own config.json files, whose omitted keys take the transformers config class's
    defaults (Gemma 3 4B's text_config lists six keys): the parameter count equals transformers'."""
    args = ModelArgs.from_hf_config(json.loads(json.dumps(cfg)))
    assert {k: getattr(args, k) for k in expected} == expected
    layers = args.num_layers
    every = 2 if args.family == "gemma2" else 6
    assert args.layer_types == tuple(FULL if (n + 1) % every == 0 else SLIDING for n in range(layers))
    assert args.num_parameters() == _hf_text_parameters(cfg)


@pytest.mark.parametrize("change, fragment", [
    ({"use_bidirectional_attention": True}, "use_bidirectional_attention"),
    ({"query_pre_attn_scalar": 0}, "query_pre_attn_scalar"),
    ({"attn_logit_softcapping": "50"}, "attn_logit_softcapping"),
    ({"hidden_activation": "gelu"}, "hidden_activation"),
    ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, "yarn"),
])
def test_bad_gemma_configs_name_the_key(change, fragment):
    with pytest.raises(ModelConfigError, match=fragment):
        ModelArgs.from_hf_config({**GEMMA2_2B, **change}, source="x/config.json")


def test_vision_config_without_text_config_is_refused():
    cfg = {k: v for k, v in GEMMA3_4B.items() if k != "text_config"}
    with pytest.raises(ModelConfigError, match="text_config"):
        ModelArgs.from_hf_config(cfg, source="x/config.json")


@pytest.mark.slow
@pytest.mark.parametrize("stored", ["float16", "bfloat16"])
def test_half_precision_checkpoints_load(stored, tmp_path):
    folder = save_hf_model(make_model("gemma2"), tmp_path, dtype=getattr(torch, stored))
    assert ModelArgs.from_dir(folder).stored_dtype == stored
    # the reference reads the same rounded weights into float32 (a model cast in place would also
    # round its RoPE buffers)
    hf = transformers.AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    ids = ids_for(batch=1)
    assert_logit_parity(ours_logits(folder, ids), hf_logits(hf, ids))


@pytest.mark.parametrize("name", ["gemma3", "gemma3-vision"])
def test_sharded_checkpoints_load(name, tmp_path):
    hf, folder = save_model(name, tmp_path, max_shard_size="30KB")
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 2
    ids = ids_for(batch=1)
    assert_logit_parity(ours_logits(folder, ids), hf_logits(hf, ids))


@pytest.mark.parametrize("layout", ["transformers 4.50", "transformers 4.52+"])
def test_vision_checkpoint_key_layouts(layout, tmp_path):
    """Gemma3ForConditionalGeneration's language model under either key layout: transformers 4.50
    and 5 save `language_model.model.*` and `vision_tower.*`; 4.52-4.57 saved `model.language_model.*`
    and `model.vision_tower.*`. The vision tensors are not loaded and not reported as unexpected."""
    from safetensors.numpy import load_file, save_file
    hf, folder = save_model("gemma3-vision", tmp_path)
    tensors = load_file(str(folder / "model.safetensors"))
    assert any(k.startswith("language_model.model.layers.") for k in tensors)
    assert any(k.startswith("vision_tower.") for k in tensors)
    if layout == "transformers 4.52+":
        tensors = {("model." + k.replace("language_model.model.", "language_model.", 1)
                    if not k.startswith("lm_head") else k): v for k, v in tensors.items()}
        save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    model = load_hf_model(folder)
    assert sorted(model.hub_names.values()) == sorted(k for k in tensors if "vision" not in k and "multi_modal" not in k)
    ids = ids_for(batch=1)
    assert_logit_parity(model.construct(ms.Tensor(ids)).asnumpy(), hf_logits(hf, ids))


def test_missing_text_tensor_is_named(tmp_path):
    from safetensors.numpy import load_file, save_file
    _, folder = save_model("gemma3-vision", tmp_path)
    tensors = load_file(str(folder / "model.safetensors"))
    del tensors["language_model.model.layers.1.self_attn.k_norm.weight"]
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(ValueError, match=r"missing tensor model\.layers\.1\.self_attn\.k_norm\.weight"):
        load_hf_model(folder)


@pytest.mark.slow
@pytest.mark.parametrize("name", GEMMAS)
def test_generation_with_cache_equals_no_cache_and_transformers(name, tmp_path):
    """Greedy continuations past the window (7) through soft-capped, windowed layers: with the KV
    cache, without it, and transformers' generate; a left-padded batch equals each prompt alone."""
    hf, folder = save_model(name, tmp_path)
    ours = load_hf_model(folder)
    prompt = ids_for(batch=1, length=7)[0].tolist()
    settings = SamplingSettings(max_new_tokens=12)
    cached = generate(ours, [prompt], settings)[0]
    uncached = generate(ours, [prompt], settings, use_cache=False)[0]
    with torch.no_grad():
        ref = hf.generate(torch.tensor([prompt]), max_new_tokens=12, do_sample=False, pad_token_id=0,
                          eos_token_id=None)[0, len(prompt):].tolist()
    assert cached == uncached == ref and len(cached) == 12
    prompts = [prompt[:3], prompt, prompt[:5]]
    short = SamplingSettings(max_new_tokens=9)
    assert generate(ours, prompts, short) == [generate(ours, [p], short)[0] for p in prompts]


def fused_generations(name, tmp_path, prompt_length, new_tokens):
    """Greedy continuations of one prompt with the fused kernels on (the prefill runs the attention
    kernel with its window, soft-cap and partial rotary; the cached decoding steps run composed, the
    uncached path runs the kernel at every step), the composed path's, and transformers'; and a
    left-padded batch with the kernels, cached and uncached, and each of its prompts alone."""
    import core.engine.fused as fused
    hf, folder = save_model(name, tmp_path)
    model = load_hf_model(folder)
    prompt = ids_for(batch=1, length=prompt_length)[0].tolist()
    settings = SamplingSettings(max_new_tokens=new_tokens)
    composed = generate(model, [prompt], settings)[0]
    how = fused.enable(model)
    if how.startswith("composed"):
        skips.skip("kernels", how)
    assert how == "fused"
    cached = generate(model, [prompt], settings)[0]
    uncached = generate(model, [prompt], settings, use_cache=False)[0]
    with torch.no_grad():
        ref = hf.generate(torch.tensor([prompt]), max_new_tokens=new_tokens, do_sample=False, pad_token_id=0,
                          eos_token_id=None)[0, len(prompt):].tolist()
    prompts = [prompt[:3], prompt, prompt[:prompt_length - 2]]
    batch = generate(model, prompts, settings), generate(model, prompts, settings, use_cache=False)
    alone = [generate(model, [p], settings)[0] for p in prompts]
    return cached, uncached, composed, ref, batch, alone


@pytest.mark.slow
@pytest.mark.parametrize("name", GEMMAS)
def test_fused_generation_with_cache_equals_no_cache_and_transformers(name, tmp_path):
    """A prompt longer than the window (10 > 7) prefilled by the kernel, then 10 cached steps through
    the windowed, soft-capped layers: equal to the uncached kernel path, composed ops and transformers."""
    cached, uncached, composed, ref, batch, alone = fused_generations(name, tmp_path, 10, 10)
    assert cached == uncached == composed == ref and len(cached) == 10
    assert batch[0] == batch[1] == alone


@pytest.mark.slow
def test_fused_kernels_run_the_vision_checkpoints_language_model(tmp_path):
    """All-fused (attention with its scale and window, (1 + w) norms and QK-norm, GeGLU) and
    compiled: the logits still equal transformers' (test_model covers the text-only fixtures)."""
    import core.engine.fused as fused
    hf, folder = save_model("gemma3-vision", tmp_path)
    model = load_hf_model(folder)
    how = fused.enable(model)
    if how.startswith("composed"):
        skips.skip("kernels", how)
    assert how == "fused"
    ids = ids_for()
    assert_logit_parity(ms.jit(model.construct)(ms.Tensor(ids)).asnumpy(), hf_logits(hf, ids))


def _loss_and_grads(model, ids, labels, mask):
    from core.engine.train_step import forward, loss_cell
    loss = loss_cell(model)
    params = list(model.trainable_params())

    def mean_nll(input_ids, target, attention_mask):
        nll, tokens = loss(forward(model, input_ids, attention_mask), target)
        return nll / tokens
    value, grads = ms.jit(ms.value_and_grad(mean_nll, None, weights=params))(
        ms.Tensor(ids), ms.Tensor(labels), ms.Tensor(mask))
    return float(value.asnumpy()), {p.name: g.asnumpy() for p, g in zip(params, grads)}


@pytest.mark.slow
def test_loss_kernel_soft_caps_the_logits_itself(tmp_path):
    """Gemma 2's final-logit cap moves into the cross-entropy kernel (it was the one composed part:
    a tanh over the (B, T, vocab) logits and its gradient): the train and eval steps hand it the
    logits uncapped, and loss and gradients equal the composed path's; the model's own logits
    stay capped (generation, parity). Then a model without a cap trains alike in the same process
    (the capped and plain kernels share their forward symbol)."""
    import core.engine.fused as fused
    from core.engine.train_step import EvalStep
    ids = ids_for(batch=2, length=20)
    mask = np.ones_like(ids)
    mask[1, 15:] = 0
    labels = np.where(mask == 1, ids, -100).astype(np.int32)
    for name in ("gemma2", "gemma3"):
        hf, folder = save_model(name, tmp_path / name)
        results = {}
        for mode in ("composed", "fused"):
            model = load_hf_model(folder)
            if mode == "fused":
                how = fused.enable(model)
                if how.startswith("composed"):
                    skips.skip("kernels", how)
                assert how == "fused" and model.cap_in_loss == (name == "gemma2")
                assert_logit_parity(ms.jit(model.construct)(ms.Tensor(ids)).asnumpy(), hf_logits(hf, ids))
            results[mode] = _loss_and_grads(model, ids, labels, mask), EvalStep(model)(ids, labels, mask)
        (loss_c, grads_c), eval_c = results["composed"]
        (loss_f, grads_f), eval_f = results["fused"]
        assert loss_f == pytest.approx(loss_c, rel=1e-5) and eval_f[0] == pytest.approx(eval_c[0], rel=1e-5)
        for key, grad in grads_c.items():
            assert np.abs(grads_f[key] - grad).max() <= 1e-5 * max(1.0, np.abs(grad).max()), key
