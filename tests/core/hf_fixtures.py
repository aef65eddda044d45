"""Tiny random Hugging Face checkpoints made with transformers (a test-only dependency), and their
reference logits, so mindtune's model can be compared with the PyTorch implementation."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from tests import skips

torch = skips.module("torch")
transformers = skips.module("transformers")

VOCAB = 97
COMMON = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
              num_attention_heads=4, max_position_embeddings=128)

# name -> (config class name, model class name, config overrides)
ARCHITECTURES = {
    "llama-gqa-llama3-rope": ("LlamaConfig", "LlamaForCausalLM", dict(
        num_key_value_heads=2, rope_theta=500000.0, tie_word_embeddings=False,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 32})),
    "llama-tied-bias-linear-rope": ("LlamaConfig", "LlamaForCausalLM", dict(
        num_key_value_heads=4, tie_word_embeddings=True, attention_bias=True, mlp_bias=True,
        rope_scaling={"rope_type": "linear", "factor": 2.0})),
    "qwen2-tied": ("Qwen2Config", "Qwen2ForCausalLM", dict(
        num_key_value_heads=2, tie_word_embeddings=True, rope_theta=1000000.0)),
    "mistral": ("MistralConfig", "MistralForCausalLM", dict(
        num_key_value_heads=2, sliding_window=None, head_dim=16)),
    # a window shorter than the test inputs (24 tokens), so the mask matters
    "mistral-window": ("MistralConfig", "MistralForCausalLM", dict(
        num_key_value_heads=2, sliding_window=7, head_dim=16)),
    # head_dim 24 != hidden / heads: the explicit head_dim is honoured
    "qwen3-untied": ("Qwen3Config", "Qwen3ForCausalLM", dict(
        num_key_value_heads=2, head_dim=24, tie_word_embeddings=False, rope_theta=1000000.0)),
    "qwen3-tied-window": ("Qwen3Config", "Qwen3ForCausalLM", dict(
        num_key_value_heads=2, tie_word_embeddings=True, use_sliding_window=True, sliding_window=6,
        max_window_layers=1)),
    "glm4": ("Glm4Config", "Glm4ForCausalLM", dict(
        num_key_value_heads=2, head_dim=16, partial_rotary_factor=0.5, attention_bias=True, pad_token_id=0,
        eos_token_id=1)),
    "olmo2": ("Olmo2Config", "Olmo2ForCausalLM", dict(num_key_value_heads=2, attention_bias=False, pad_token_id=0,
                                                       eos_token_id=1)),
    # mixtures of experts (core/engine/moe.py): Mixtral's renormalised top-2 of 4; Qwen3-MoE's plain top-2
    # of 8 with QK-norm and a dense first layer (mlp_only_layers)
    "mixtral": ("MixtralConfig", "MixtralForCausalLM", dict(
        num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2, sliding_window=None)),
    "qwen3-moe-dense-layer": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", dict(
        num_key_value_heads=2, head_dim=16, num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
        mlp_only_layers=[0], norm_topk_prob=False)),
}

# Gemma 2 / 3 and Phi-3 / 4 (tests/core/test_family_gemma.py, test_family_phi.py, family_fixtures.py).
# Every feature is on and sized so that leaving it out shows in the logits: 3 layers (sliding and
# global), a window (7) shorter than the inputs, soft-caps that bite, query_pre_attn_scalar other
# than head_dim, separate RoPE bases, attention biases; weights drawn with std 0.1.
_GEMMA = dict(num_hidden_layers=3, num_key_value_heads=2, head_dim=16, query_pre_attn_scalar=24, sliding_window=7,
              attention_bias=True, initializer_range=0.1)
_PHI = dict(num_key_value_heads=2, pad_token_id=0, eos_token_id=1, bos_token_id=2, initializer_range=0.1)
ARCHITECTURES.update({
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", dict(_GEMMA, attn_logit_softcapping=0.8,
                                                         final_logit_softcapping=1.2)),
    "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM", dict(
        _GEMMA, sliding_window_pattern=3, rope_theta=50000.0, rope_local_base_freq=1000.0,
        rope_scaling={"rope_type": "linear", "factor": 2.0})),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", dict(_PHI, sliding_window=9)),
    # Phi-4-mini in small: partial rotary 0.75, LongRoPE whose original context (16) is shorter than
    # the long inputs, tied embeddings
    "phi4-mini": ("Phi3Config", "Phi3ForCausalLM", dict(
        _PHI, partial_rotary_factor=0.75, tie_word_embeddings=True, original_max_position_embeddings=16,
        rope_scaling={"rope_type": "longrope", "short_factor": [1.0 + 0.1 * i for i in range(6)],
                      "long_factor": [2.0 + 0.7 * i for i in range(6)]})),
})


def make_hf_model(name: str, seed: int = 0, **sizes):
    """The fixture `name` as a transformers model with random weights; `sizes` replace COMMON's."""
    config_cls, model_cls, overrides = ARCHITECTURES[name]
    return build_hf_model(config_cls, model_cls, {**COMMON, **overrides, **sizes}, seed)


def build_hf_model(config_cls: str, model_cls: str, config: dict, seed: int = 0):
    """transformers' `model_cls` for `config_cls(**config)`, randomly initialised from `seed`, with
    random non-trivial norms and biases."""
    torch.manual_seed(seed)
    config = getattr(transformers, config_cls)(**config)
    model = getattr(transformers, model_cls)(config).eval()
    with torch.no_grad():  # random, non-trivial norms and biases so every tensor matters
        for pname, param in model.named_parameters():
            if pname.endswith("norm.weight") or pname.endswith(".bias"):
                param.add_(0.1 * torch.randn_like(param))
    return model


def save_hf_model(model, folder: Path, dtype=None, **kwargs) -> Path:
    if dtype is not None:
        model = model.to(dtype)
    model.save_pretrained(str(folder), safe_serialization=True, **kwargs)
    return folder


def reference_logits(model, ids: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return model.float()(torch.tensor(ids, dtype=torch.long)).logits.float().numpy()


# Logit parity with transformers in float32. The absolute 1e-4 the suite has always held is loose on
# these tiny random models, whose logits are of scale ~0.1-1 (1e-4 absolute would let 0.1% through
# on 0.1): the error is also bounded RELATIVE to the reference's largest |logit|. Both sides compute
# in float32 (eps 1.2e-7) through a few layers of 64-96-wide dot products, RMS norms and a softmax,
# summed in a different order (MindSpore's kernels vs PyTorch's). Measured over the 15 architectures
# of ARCHITECTURES and the Gemma and Phi tests (composed ops and fused kernels alike): 1.3e-7..4.1e-6
# absolute on logits of scale 0.4..3.9, 2.2e-7..2.1e-6 relative (at most ~18 eps; Gemma the
# largest). The bound, 1e-5 (~84 eps), leaves that rounding ~5x room; an error in the maths (a
# RoPE, a norm, a mask) is orders of magnitude more.
PARITY_TOLERANCE = 1e-4
PARITY_RELATIVE = 1e-5


def assert_logit_parity(ours: np.ndarray, reference: np.ndarray, what: str = "") -> float:
    """max |ours - reference| within PARITY_TOLERANCE and PARITY_RELATIVE × max |reference|; prints
    the measured error (pytest -s shows it) and returns it relative."""
    error = float(np.abs(ours - reference).max())
    scale = float(np.abs(reference).max())
    relative = error / scale
    print(f"\nlogit parity{' ' + what if what else ''}: max |error| {error:.2e} on logits up to {scale:.3f} ({relative:.2e} relative)")
    assert error <= PARITY_TOLERANCE and relative <= PARITY_RELATIVE, (what, error, scale, relative)
    return relative


def random_ids(batch: int = 2, length: int = 24, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, VOCAB, (batch, length)).astype(np.int32)


def as_transformers4_config(cfg: dict) -> dict:
    """A config.json that transformers 5 wrote, spelled as transformers 4.x-era hub checkpoints are:
    `rope_theta` / `rope_scaling` / `partial_rotary_factor` (Gemma 3: `rope_local_base_freq`) at the
    top level instead of `rope_parameters`, `torch_dtype` instead of `dtype`, no `layer_types`
    (the family's window pattern then applies, `sliding_window_pattern` for Gemma 3)."""
    old = {k: v for k, v in cfg.items() if k not in ("rope_parameters", "dtype", "layer_types")}
    rope = dict(cfg.get("rope_parameters") or {})
    if "full_attention" in rope:
        old["rope_local_base_freq"] = rope.get("sliding_attention", {}).get("rope_theta")
        rope = dict(rope["full_attention"])
    if "rope_theta" in rope:
        old["rope_theta"] = rope.pop("rope_theta")
    if "partial_rotary_factor" in rope:
        old["partial_rotary_factor"] = rope.pop("partial_rotary_factor")
    if rope.get("rope_type", "default") != "default":
        old["rope_scaling"] = rope
    if "_sliding_window_pattern" in cfg:
        old["sliding_window_pattern"] = old.pop("_sliding_window_pattern")
    if "dtype" in cfg:
        old["torch_dtype"] = cfg["dtype"]
    return old


def copy_lora_to_peft(ours, reference) -> dict:
    """Our LoRA layers' A and B (core.engine.lora) into a PEFT model of the same targets; returns its
    parameters by name (for their gradients)."""
    from core.engine.lora import lora_modules
    params = dict(reference.named_parameters())
    for cell_name, cell in lora_modules(ours).items():
        for which, key in (("lora_a", "lora_A"), ("lora_b", "lora_B")):
            with torch.no_grad():
                params[f"base_model.model.{cell_name}.{key}.default.weight"].copy_(
                    torch.tensor(getattr(cell, which).asnumpy()))
    return params
