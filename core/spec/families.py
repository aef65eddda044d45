"""The model families mindtune builds, each described declaratively (MindSpore-free: the console
imports it to describe checkpoints).

A `FamilySpec` says what a family's decoder layer is made of — which norms sit where
(`BlockLayout`), the norm's formula, the MLP's activation and whether its projections are fused,
QK-norm, fused q/k/v, biases, the RoPE layout, embedding scaling, soft-caps, the window pattern —
and how its hub tensor names map to ours (`KeyMap`). `core.spec.model_args.ModelArgs` reads a
config.json through the spec into the per-checkpoint numbers; `core.engine.model` composes the layers
from both. Adding a family is a spec here, its key mapping, and a parity test against transformers
(tests/core/test_model.py); nothing in the forward pass names a family.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

import core.spec.moe_args as moe_args
from core.spec.errors import check
from core.spec.messages import Message

# Our parameter names are transformers' module paths for the text model, so LoRA adapters keep
# PEFT's names and most families map one to one.
ATTENTION_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP_PROJECTIONS = ("gate_proj", "up_proj", "down_proj")
PROJECTION_NAMES = ATTENTION_PROJECTIONS + MLP_PROJECTIONS

NORM_KINDS = ("rms", "rms_offset")  # x/rms(x)·w, or x/rms(x)·(1 + w) with w stored zero-centred (Gemma)
QK_NORMS = ("none", "head", "projection")  # RMSNorm on q and k per head (Qwen3, Gemma 3) or over the whole projection (OLMo 2)
ROTARY_STYLES = ("half", "interleaved")  # rotate (x₁, x₂) halves (Llama) or (x₂ᵢ, x₂ᵢ₊₁) pairs (GLM-4)
# hub activation name -> ours; a gated MLP computes down(act(gate(x)) · up(x))
ACTIVATIONS = {"silu": "silu", "swish": "silu", "gelu_pytorch_tanh": "gelu_tanh", "gelu_tanh": "gelu_tanh"}
# Which layers use a sliding window when config.json has no `layer_types`:
#   none: no layer; all: every layer (Mistral); after_max_window_layers: layers >= max_window_layers
#   when use_sliding_window (Qwen2/3); alternate: even layers (Gemma 2); pattern: all but every
#   `sliding_window_pattern`-th layer (Gemma 3).
WINDOW_PATTERNS = ("none", "all", "after_max_window_layers", "alternate", "pattern")
FULL, SLIDING = "full_attention", "sliding_attention"  # transformers' layer_types spellings
ROPE_TYPES = ("default", "linear", "llama3")  # every family; "longrope" where a spec adds it (Phi-3)
ROPE_TYPE_ALIASES = {"su": "longrope"}  # older hub spellings (Phi-3-128k's "su"), as transformers reads them


@dataclass(frozen=True)
class BlockLayout:
    """The hub names of the RMSNorms around a layer's two sub-blocks ('' where there is none):
    x = x + post(attention(pre(x))), then the same around the MLP."""
    attn_pre: str = "input_layernorm"
    attn_post: str = ""
    mlp_pre: str = "post_attention_layernorm"
    mlp_post: str = ""

    def names(self) -> tuple[str, ...]:
        return tuple(n for n in (self.attn_pre, self.attn_post, self.mlp_pre, self.mlp_post) if n)


PRE_NORM = BlockLayout()  # Llama and most others
SANDWICH_NORM = BlockLayout("input_layernorm", "post_attention_layernorm",  # Gemma 2 / 3
                            "pre_feedforward_layernorm", "post_feedforward_layernorm")
POST_NORM = BlockLayout("", "post_attention_layernorm", "", "post_feedforward_layernorm")  # OLMo 2
GLM4_NORM = BlockLayout("input_layernorm", "post_self_attn_layernorm",
                        "post_attention_layernorm", "post_mlp_layernorm")


Tensors = dict  # name -> numpy array


@dataclass(frozen=True)
class KeyMap:
    """Hub tensor names <-> our parameter names for one family.

    renames: (hub regex, our replacement) pairs, the first that matches wins (e.g. a multimodal
      checkpoint's `^language_model\\.model\\.` -> `model.`); a name no pair matches is ours as is.
    ignored: regexes of hub tensors that are not part of our model (rotary buffers, a vision tower);
      they are neither loaded nor reported as unexpected.
    convert_in / convert_out: tensor-level conversions after renaming (in) and before it (out), for
      tensors stored split or stacked differently from our parameters (MoE experts); each takes and
      returns a name -> array dict and receives the ModelArgs.
    passthrough: regexes of ignored hub tensors that belong to the checkpoint all the same (a vision
      tower beside the language model): a merged export copies them back unchanged, so the folder
      keeps the base's architecture.
    """
    renames: tuple[tuple[str, str], ...] = ()
    ignored: tuple[str, ...] = (r"\.rotary_emb\.inv_freq$",)
    convert_in: Callable | None = None
    convert_out: Callable | None = None
    passthrough: tuple[str, ...] = ()

    def is_ignored(self, hub_name: str) -> bool:
        return any(re.search(pattern, hub_name) for pattern in self.ignored)

    def is_passthrough(self, hub_name: str) -> bool:
        return any(re.search(pattern, hub_name) for pattern in self.passthrough)

    def our_name(self, hub_name: str) -> str:
        for pattern, replacement in self.renames:
            if re.search(pattern, hub_name):
                return re.sub(pattern, replacement, hub_name, count=1)
        return hub_name

    def to_ours(self, tensors: Tensors, args) -> tuple[Tensors, dict[str, str]]:
        """(our name -> array, our name -> hub name). Ignored tensors are left out; two hub names
        that map to one of ours are an error naming both."""
        ours: Tensors = {}
        hub_names: dict[str, str] = {}
        for hub_name, array in tensors.items():
            if self.is_ignored(hub_name):
                continue
            name = self.our_name(hub_name)
            if name in ours:
                raise KeyError(Message("family.keys_collide", name=hub_names[name], other=hub_name, target=name))
            ours[name], hub_names[name] = array, hub_name
        if self.convert_in is not None:
            ours = self.convert_in(ours, args)
        return ours, hub_names

    def to_hub(self, tensors: Tensors, args, hub_names: dict[str, str] | None = None) -> Tensors:
        """Our tensors under the hub's names: those recorded when the checkpoint was read
        (`hub_names`, so an export keeps the base's layout), else our own names."""
        if self.convert_out is not None:
            tensors = self.convert_out(dict(tensors), args)
        hub_names = hub_names or {}
        return {hub_names.get(name, name): array for name, array in tensors.items()}


@dataclass(frozen=True)
class FamilySpec:
    """What one model family's layers are made of; see the module docstring.

    Fields that say `None: config` take the value from config.json (`attention_bias`, `mlp_bias`);
    a bool fixes it for the family (Qwen2 always has q/k/v biases, whatever the config says).
    `extra_args(cfg, source) -> dict` returns family-specific ModelArgs fields read from the config
    (soft-caps; `moe`, which makes the layers it names mixtures of experts) and may raise
    ModelConfigError for values the family cannot take.
    """
    name: str
    architectures: tuple[str, ...]
    model_types: tuple[str, ...] = ()
    layout: BlockLayout = PRE_NORM
    norm: str = "rms"
    norm_eps_key: str = "rms_norm_eps"
    qk_norm: str = "none"
    fused_qkv: bool = False  # one `qkv_proj` (Phi-3) instead of q_proj, k_proj, v_proj
    fused_gate_up: bool = False  # one `gate_up_proj` (Phi-3, GLM-4): gate then up along the output axis
    activation_keys: tuple[str, ...] = ("hidden_act",)  # first present wins (Gemma: hidden_activation)
    qkv_bias: bool | None = None  # None: config's attention_bias
    o_bias: bool | None = None  # None: config's attention_bias
    mlp_bias: bool | None = None  # None: config's mlp_bias
    embedding_scale: bool = False  # embeddings multiplied by √hidden_size (Gemma)
    rotary_style: str = "half"
    windows: str = "none"
    rope_types: tuple[str, ...] = ROPE_TYPES
    key_map: KeyMap = field(default_factory=KeyMap)
    lora_targets: tuple[str, ...] | None = None  # default LoRA target_modules; None: every projection
    extra_args: Callable | None = None
    # config.json values the family's transformers config class assumes when a hub file omits them
    # (Gemma 3's text_config lists only what differs from Gemma3TextConfig's defaults)
    config_defaults: dict = field(default_factory=dict)
    # architectures that wrap the language model (text + vision): architecture -> the decoder's
    # module path in transformers 5 (what PEFT adapter keys name). Their config.json nests the
    # language model's config under `text_config`; the key map says where its tensors are.
    wrapped: dict = field(default_factory=dict)

    def __post_init__(self):
        for value, allowed in ((self.norm, NORM_KINDS), (self.qk_norm, QK_NORMS),
                               (self.rotary_style, ROTARY_STYLES), (self.windows, WINDOW_PATTERNS)):
            if value not in allowed:
                raise ValueError(f"family {self.name}: {value!r} is not one of {allowed}")

    @property
    def attention_projections(self) -> tuple[str, ...]:
        return ("qkv_proj", "o_proj") if self.fused_qkv else ATTENTION_PROJECTIONS

    @property
    def mlp_projections(self) -> tuple[str, ...]:
        return ("gate_up_proj", "down_proj") if self.fused_gate_up else MLP_PROJECTIONS

    @property
    def projections(self) -> tuple[str, ...]:
        """The Dense layers of a decoder layer in model order: what LoRA can target."""
        return self.attention_projections + self.mlp_projections

    @property
    def default_lora_targets(self) -> tuple[str, ...]:
        return self.projections if self.lora_targets is None else self.lora_targets


FAMILIES: dict[str, FamilySpec] = {}


def register(spec: FamilySpec) -> FamilySpec:
    """Add a family (its architectures and model types must not be claimed by another)."""
    for other in FAMILIES.values():
        if other.name == spec.name:
            continue
        clash = (set(spec.architectures) & set(other.architectures)) | (set(spec.model_types) & set(other.model_types))
        if clash:
            raise ValueError(f"family {spec.name}: {sorted(clash)} already belong to {other.name}")
    FAMILIES[spec.name] = spec
    return spec


register(FamilySpec("llama", ("LlamaForCausalLM",), ("llama",)))
register(FamilySpec("mistral", ("MistralForCausalLM",), ("mistral",), qkv_bias=False, o_bias=False, mlp_bias=False,
                    windows="all"))
register(FamilySpec("qwen2", ("Qwen2ForCausalLM",), ("qwen2",), qkv_bias=True, o_bias=False, mlp_bias=False,
                    windows="after_max_window_layers"))
register(FamilySpec("qwen3", ("Qwen3ForCausalLM",), ("qwen3",), qk_norm="head", mlp_bias=False,
                    windows="after_max_window_layers"))
# GLM-4 (Glm4ForCausalLM, GLM-4-0414): sandwich-like extra norms, fused gate/up, RoPE on the first
# half of each head with interleaved pairs (modeling_glm4.apply_rotary_pos_emb)
register(FamilySpec("glm4", ("Glm4ForCausalLM",), ("glm4",), layout=GLM4_NORM, fused_gate_up=True,
                    o_bias=False, mlp_bias=False, rotary_style="interleaved"))
# OLMo 2: norms after attention and MLP (none before), QK-norm over the whole q and k projections
register(FamilySpec("olmo2", ("Olmo2ForCausalLM",), ("olmo2",), layout=POST_NORM, qk_norm="projection",
                    mlp_bias=False))
# Mixtures of experts (core/engine/moe.py, core/spec/moe_args.py): the sparse layers' MLP is a router `gate`
# and stacked experts `experts.gate_up_proj` / `experts.down_proj` (transformers 5's names); the
# hub's per-expert tensors are stacked on load and written back per expert. LoRA's default targets
# are attention and the experts, never the router.
_MOE_KEYS = dict(convert_in=moe_args.convert_in, convert_out=moe_args.convert_out)
_MOE_LORA = ATTENTION_PROJECTIONS + ("gate_up_proj", "down_proj")
# Mixtral: Mistral's attention (a window on every layer when sliding_window is set), every layer sparse
register(FamilySpec("mixtral", ("MixtralForCausalLM",), ("mixtral",), qkv_bias=False, o_bias=False, mlp_bias=False,
                    windows="all", key_map=KeyMap(renames=((r"\.block_sparse_moe\.", ".mlp."),), **_MOE_KEYS),
                    lora_targets=_MOE_LORA, extra_args=moe_args.mixtral_extra_args))
# Qwen3-MoE: Qwen3's attention (QK-norm per head, attention_bias for q/k/v/o), dense MLPs where
# mlp_only_layers / decoder_sparse_step say so
register(FamilySpec("qwen3_moe", ("Qwen3MoeForCausalLM",), ("qwen3_moe",), qk_norm="head", mlp_bias=False,
                    key_map=KeyMap(**_MOE_KEYS), lora_targets=_MOE_LORA, extra_args=moe_args.qwen3_moe_extra_args))



def _positive_or_none(cfg: dict, key: str, source: str) -> float | None:
    value = cfg.get(key)
    check(value is None or (isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0),
           source, key, Message("model.positive_or_null", py_value=repr(value)))
    return None if value is None else float(value)


def _gemma_extra_args(cfg: dict, source: str) -> dict:
    """Gemma 2 / 3: scores scaled by query_pre_attn_scalar ** -0.5 (not head_dim's), tanh
    soft-capping of the scores and of the final logits where the config sets them."""
    check(not cfg.get("use_bidirectional_attention"), source, "use_bidirectional_attention",
           Message("model.bidirectional"))
    scalar = _positive_or_none(cfg, "query_pre_attn_scalar", source)
    return {"attention_scale": None if scalar is None else scalar ** -0.5,
            "attn_softcap": _positive_or_none(cfg, "attn_logit_softcapping", source),
            "final_softcap": _positive_or_none(cfg, "final_logit_softcapping", source)}


# Gemma 2 / 3: RMSNorm x·(1 + w), a norm before and after attention and MLP, GeGLU (tanh GELU),
# embeddings × √hidden, query_pre_attn_scalar; Gemma 2 soft-caps scores and logits, alternates
# sliding (even) and global layers; Gemma 3 drops the caps, adds QK-norm (1 + w, per head), five
# local layers per global one, a RoPE base of its own for the local layers (rope_local_base_freq) and
# RoPE scaling for the global ones only.
_GEMMA = dict(layout=SANDWICH_NORM, norm="rms_offset", activation_keys=("hidden_activation", "hidden_act"),
              embedding_scale=True, mlp_bias=False, extra_args=_gemma_extra_args)
_GEMMA_DEFAULTS = dict(num_attention_heads=8, num_key_value_heads=4, head_dim=256,
                       hidden_activation="gelu_pytorch_tanh", rms_norm_eps=1e-6, tie_word_embeddings=True,
                       query_pre_attn_scalar=256, sliding_window=4096, pad_token_id=0, eos_token_id=1,
                       bos_token_id=2)
register(FamilySpec("gemma2", ("Gemma2ForCausalLM",), ("gemma2",), windows="alternate",
                    config_defaults=dict(_GEMMA_DEFAULTS, vocab_size=256000, hidden_size=2304, intermediate_size=9216,
                                         num_hidden_layers=26, max_position_embeddings=8192,
                                         final_logit_softcapping=30.0, attn_logit_softcapping=50.0),
                    **_GEMMA))
# Gemma 3 of 4B and up is Gemma3ForConditionalGeneration (text + SigLIP vision): its language model
# is loaded for text fine-tuning (transformers 4.50-4.51 saved it as `language_model.model.*` and
# `language_model.lm_head`, later versions as `model.language_model.*`); the vision tower and the
# projector are not part of our model and are copied back unchanged by a merged export.
_VISION = (r"^(model\.)?vision_tower\.", r"^(model\.)?multi_modal_projector\.")
register(FamilySpec("gemma3", ("Gemma3ForCausalLM", "Gemma3ForConditionalGeneration"), ("gemma3_text", "gemma3"),
                    qk_norm="head", windows="pattern",
                    config_defaults=dict(_GEMMA_DEFAULTS, vocab_size=262208, hidden_size=2304, intermediate_size=9216,
                                         num_hidden_layers=26, max_position_embeddings=131072, rope_theta=1000000.0,
                                         rope_local_base_freq=10000.0, sliding_window_pattern=6),
                    wrapped={"Gemma3ForConditionalGeneration": "model.language_model."},
                    key_map=KeyMap(renames=((r"^model\.language_model\.", "model."),
                                            (r"^language_model\.model\.", "model."),
                                            (r"^language_model\.lm_head\.", "lm_head.")),
                                   ignored=(r"\.rotary_emb\.inv_freq$",) + _VISION, passthrough=_VISION),
                    **_GEMMA))
# Phi-3 / Phi-4 (Phi3ForCausalLM): q, k, v in one `qkv_proj` and gate, up in one `gate_up_proj`, as
# the hub stores them (and PEFT targets them); no biases; RoPE on the first partial_rotary_factor of
# each head (Phi-4-mini); LongRoPE (Phi-3-128k, Phi-3.5, Phi-4-mini: short/long factors); a sliding
# window on every layer where the config sets one (Phi-3-mini-4k: 2047).
register(FamilySpec("phi3", ("Phi3ForCausalLM",), ("phi3",), fused_qkv=True, fused_gate_up=True,
                    qkv_bias=False, o_bias=False, mlp_bias=False, windows="all",
                    rope_types=ROPE_TYPES + ("longrope",),
                    config_defaults=dict(vocab_size=32064, hidden_size=3072, intermediate_size=8192,
                                         num_hidden_layers=32, num_attention_heads=32, hidden_act="silu",
                                         max_position_embeddings=4096, original_max_position_embeddings=4096,
                                         rms_norm_eps=1e-5, tie_word_embeddings=False, bos_token_id=1,
                                         eos_token_id=32000, pad_token_id=32000)))


def architectures() -> dict[str, str]:
    """Hub architecture name -> family name, for every registered family."""
    return {arch: spec.name for spec in FAMILIES.values() for arch in spec.architectures}


def model_types() -> dict[str, str]:
    return {mt: spec.name for spec in FAMILIES.values() for mt in spec.model_types}


# Architectures people will try that mindtune does not build, and why (the error says so).
NOT_SUPPORTED = {
    "DeepseekV3ForCausalLM": Message("model.mla_moe", name="DeepSeek-V3"),
    "DeepseekV2ForCausalLM": Message("model.mla", name="DeepSeek-V2"),
    "Llama4ForCausalLM": Message("model.chunked_nope_moe", name="Llama 4"),
    "Llama4ForConditionalGeneration": Message("model.chunked_nope_moe", name="Llama 4"),
}
