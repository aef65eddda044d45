"""A model folder's architecture, read without MindSpore: the Hugging Face `config.json` normalised
into `ModelArgs` through its family's spec (`core.spec.families`), and the weight files that go with it.
The console imports this module to list and describe checkpoints (it never imports MindSpore);
`core.engine.model` builds the network from it.

Both spellings of config.json are read: transformers 4.x (`rope_theta` and `rope_scaling` at the top
level, `torch_dtype`) and transformers 5 (`rope_parameters`, per layer type where a family has
two, `dtype`, `layer_types`). Only safetensors are accepted: pickle checkpoints
(`pytorch_model.bin`, `*.pt`) can execute code when loaded and are refused with a message that says
how to convert them.
"""
from __future__ import annotations

import hashlib
import json
import math
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from core.spec.config import ConfigError, Problem
from core.spec.messages import Message
from core.spec.errors import CheckpointError, ModelConfigError, check
from core.spec.families import (ACTIVATIONS, FAMILIES, FULL, NOT_SUPPORTED, ROPE_TYPE_ALIASES, SLIDING, FamilySpec,
                                architectures, model_types)

ARCHITECTURES = architectures()  # hub architecture name -> family (as registered when imported)
MODEL_TYPES = model_types()


@dataclass(frozen=True)
class ModelArgs:
    """The architecture hyper-parameters of one checkpoint, normalised from its config.json. What a
    family's layers are made of lives in its spec (`self.spec`); these are the numbers."""

    family: str
    architecture: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    max_position_embeddings: int
    rms_norm_eps: float
    rope_theta: float
    rope_scaling: dict | None
    tie_word_embeddings: bool
    qkv_bias: bool
    o_bias: bool
    mlp_bias: bool
    stored_dtype: str | None = None
    bos_token_id: int | None = None
    eos_token_ids: tuple[int, ...] = ()
    pad_token_id: int | None = None
    activation: str = "silu"  # the gated MLP's: "silu" (SwiGLU) or "gelu_tanh" (GeGLU)
    partial_rotary_factor: float = 1.0  # RoPE on the first int(head_dim · factor) dims of a head
    attention_scale: float | None = None  # scores are q·k · this; None: head_dim ** -0.5
    attn_softcap: float | None = None  # scores -> cap · tanh(scores / cap) before the mask
    final_softcap: float | None = None  # logits -> cap · tanh(logits / cap)
    sliding_window: int | None = None  # key j visible to query i iff 0 <= pos(i) - pos(j) < window
    layer_types: tuple[str, ...] = ()  # per layer, FULL or SLIDING; () = all FULL
    local_rope_theta: float | None = None  # RoPE base of the sliding layers when it differs (Gemma 3)
    # mixture of experts (core/spec/moe_args.py MoeArgs, set by the family's extra_args): is_sparse(layer),
    # parameter_shapes(args, prefix) and dense_shapes(args, prefix) describe a sparse layer's `mlp`
    moe: object | None = None

    @property
    def spec(self) -> FamilySpec:
        return FAMILIES[self.family]

    @property
    def rotary_dim(self) -> int:
        return int(self.head_dim * self.partial_rotary_factor)

    @property
    def scale(self) -> float:
        return self.head_dim ** -0.5 if self.attention_scale is None else self.attention_scale

    def layer_window(self, layer: int) -> int | None:
        """The sliding window of decoder layer `layer`, None for full causal attention."""
        if self.layer_types and self.layer_types[layer] == SLIDING:
            return self.sliding_window
        return None

    def layer_rope_theta(self, layer: int) -> float:
        if self.local_rope_theta is not None and self.layer_window(layer) is not None:
            return self.local_rope_theta
        return self.rope_theta

    @classmethod
    def from_dir(cls, model_dir: str | Path) -> "ModelArgs":
        path = Path(model_dir) / "config.json"
        if not path.is_file():
            raise ModelConfigError(_at(path, Message("model.no_config", architectures=", ".join(ARCHITECTURES))))
        try:
            cfg = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ModelConfigError(_at(path, Message("model.invalid_json", json_says=str(exc)))) from exc
        check(isinstance(cfg, dict), str(path), "config.json", Message("model.not_object"))
        return cls.from_hf_config(cfg, source=str(path))

    @classmethod
    def from_hf_config(cls, cfg: dict, source: str = "config.json") -> "ModelArgs":
        spec = FAMILIES[_family_of(cfg, source)]
        cfg = _language_model_config(cfg, spec, source)
        required = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                    "num_attention_heads")
        for key in required:
            check(isinstance(cfg.get(key), int) and cfg[key] > 0, source, key,
                   Message("model.positive_int", py_value=repr(cfg.get(key))))
        heads = cfg["num_attention_heads"]
        kv_heads = cfg.get("num_key_value_heads") or heads
        check(heads % kv_heads == 0, source, "num_key_value_heads",
               Message("model.kv_heads", kv_heads=kv_heads, heads=heads))
        head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
        rope = _rope_settings(cfg, spec, source)
        layers = cfg["num_hidden_layers"]
        window, layer_types = _windows(cfg, spec, layers, source)
        eos = cfg.get("eos_token_id")
        eos_ids = tuple(eos) if isinstance(eos, list) else (() if eos is None else (int(eos),))
        attention_bias = bool(cfg.get("attention_bias", False))
        fields = dict(
            family=spec.name,
            architecture=(cfg.get("architectures") or ["?"])[0],
            vocab_size=cfg["vocab_size"],
            hidden_size=cfg["hidden_size"],
            intermediate_size=cfg["intermediate_size"],
            num_layers=layers,
            num_heads=heads,
            num_kv_heads=kv_heads,
            head_dim=head_dim,
            max_position_embeddings=int(cfg.get("max_position_embeddings", 2048)),
            rms_norm_eps=float(cfg.get(spec.norm_eps_key, 1e-6)),
            rope_theta=rope["theta"],
            rope_scaling=rope["scaling"],
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            qkv_bias=attention_bias if spec.qkv_bias is None else spec.qkv_bias,
            o_bias=attention_bias if spec.o_bias is None else spec.o_bias,
            mlp_bias=bool(cfg.get("mlp_bias", False)) if spec.mlp_bias is None else spec.mlp_bias,
            stored_dtype=cfg.get("dtype") or cfg.get("torch_dtype"),
            bos_token_id=cfg.get("bos_token_id"),
            eos_token_ids=eos_ids,
            pad_token_id=cfg.get("pad_token_id"),
            activation=_activation(cfg, spec, source),
            partial_rotary_factor=rope["partial_rotary_factor"],
            sliding_window=window,
            layer_types=layer_types,
            local_rope_theta=rope["local_theta"],
        )
        if spec.extra_args is not None:
            fields.update(spec.extra_args(cfg, source))
        scaling = rope["scaling"] or {}
        for name in ("short_factor", "long_factor"):
            if name in scaling:
                half = int(head_dim * rope["partial_rotary_factor"]) // 2
                check(len(scaling[name]) == half, source, f"rope_scaling.{name}",
                       Message("model.factor_count", half=half, count=len(scaling[name])))
        return cls(**fields)

    def parameter_shapes(self) -> dict[str, tuple[int, ...]]:
        """Every parameter of the model under its Hugging Face name, with its shape, in model order
        (the tied output matrix is the embedding's, so it has no entry of its own)."""
        h, d, spec = self.hidden_size, self.head_dim, self.spec
        q, kv = self.num_heads * d, self.num_kv_heads * d
        shapes = {"model.embed_tokens.weight": (self.vocab_size, h)}
        for n in range(self.num_layers):
            p = f"model.layers.{n}."
            for name in spec.layout.names():
                shapes[p + name + ".weight"] = (h,)
            shapes.update(_dense_shapes(p + "self_attn.", self._attention_dense(q, kv)))
            if spec.qk_norm != "none":
                per_head = spec.qk_norm == "head"
                shapes[p + "self_attn.q_norm.weight"] = (d,) if per_head else (q,)
                shapes[p + "self_attn.k_norm.weight"] = (d,) if per_head else (kv,)
            if self.is_sparse(n):
                shapes.update(self.moe.parameter_shapes(self, p + "mlp."))
            else:
                shapes.update(_dense_shapes(p + "mlp.", self._mlp_dense()))
        shapes["model.norm.weight"] = (h,)
        if not self.tie_word_embeddings:
            shapes["lm_head.weight"] = (self.vocab_size, h)
        return shapes

    def _attention_dense(self, q: int, kv: int) -> list[tuple[str, int, int, bool]]:
        """(name, in, out, bias) of the attention's Dense layers."""
        h = self.hidden_size
        if self.spec.fused_qkv:
            inputs = [("qkv_proj", h, q + 2 * kv, self.qkv_bias)]
        else:
            inputs = [("q_proj", h, q, self.qkv_bias), ("k_proj", h, kv, self.qkv_bias),
                      ("v_proj", h, kv, self.qkv_bias)]
        return inputs + [("o_proj", q, h, self.o_bias)]

    def _mlp_dense(self) -> list[tuple[str, int, int, bool]]:
        h, i, bias = self.hidden_size, self.intermediate_size, self.mlp_bias
        if self.spec.fused_gate_up:
            return [("gate_up_proj", h, 2 * i, bias), ("down_proj", i, h, bias)]
        return [("gate_proj", h, i, bias), ("up_proj", h, i, bias), ("down_proj", i, h, bias)]

    def dense_shapes(self) -> dict[str, tuple[int, int]]:
        """Dotted module name -> (in, out) of every Dense layer inside the decoder layers (what LoRA
        can target)."""
        q, kv = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        shapes = {}
        for n in range(self.num_layers):
            p = f"model.layers.{n}."
            shapes.update({f"{p}self_attn.{name}": (fan_in, fan_out)
                           for name, fan_in, fan_out, _ in self._attention_dense(q, kv)})
            if self.is_sparse(n):
                shapes.update(self.moe.dense_shapes(self, p + "mlp."))
            else:
                shapes.update({f"{p}mlp.{name}": (fan_in, fan_out) for name, fan_in, fan_out, _ in self._mlp_dense()})
        return shapes

    def is_sparse(self, layer: int) -> bool:
        """Whether decoder layer `layer`'s MLP is a mixture of experts."""
        return self.moe is not None and self.moe.is_sparse(layer)

    def num_parameters(self) -> int:
        """Parameter count computed from the shapes (tied embeddings counted once)."""
        return sum(math.prod(shape) for shape in self.parameter_shapes().values())

    def active_parameters(self) -> int:
        """The parameters one token computes with: all of a dense model's; a mixture of experts
        counts its routed top-k experts only (`moe.active_parameters(args)`)."""
        return self.num_parameters() if self.moe is None else self.moe.active_parameters(self)

    def lora_target_names(self) -> tuple[str, ...]:
        """The module names LoRA can target, in model order: the family's projections; a mixture of
        experts has its expert stacks instead of the sparse layers' MLP projections, and no router
        (`moe.lora_target_names(args)`)."""
        return self.spec.projections if self.moe is None else self.moe.lora_target_names(self)


def _dense_shapes(prefix: str, dense: list[tuple[str, int, int, bool]]) -> dict[str, tuple[int, ...]]:
    shapes: dict[str, tuple[int, ...]] = {}
    for name, fan_in, fan_out, bias in dense:
        shapes[f"{prefix}{name}.weight"] = (fan_out, fan_in)
        if bias:
            shapes[f"{prefix}{name}.bias"] = (fan_out,)
    return shapes


def _family_of(cfg: dict, source: str) -> str:
    archs = cfg.get("architectures") or []
    if cfg.get("auto_map") and not _auto_map_is_native(cfg):
        raise ModelConfigError(_at(source, Message("model.remote_code", classes=", ".join(sorted(cfg["auto_map"])),
                                                   architectures=", ".join(ARCHITECTURES))))
    for arch in archs:
        if arch in ARCHITECTURES:
            return ARCHITECTURES[arch]
    for arch in archs:
        if arch in NOT_SUPPORTED:
            raise ModelConfigError(_at(source, Message("model.architecture_refused", architecture=arch,
                                                       why=NOT_SUPPORTED[arch], architectures=", ".join(ARCHITECTURES))))
    model_type = cfg.get("model_type")
    if not archs and model_type in MODEL_TYPES:
        return MODEL_TYPES[model_type]
    raise ModelConfigError(_at(source, Message("model.architecture_unknown", architecture=repr(archs or model_type),
                                               architectures=", ".join(ARCHITECTURES),
                                               model_types=", ".join(MODEL_TYPES))))


def _at(where, reason: Message) -> Message:
    """'<where>: <reason>' (a file, or a file and its 'key'), the reason a message by id."""
    return Message("model.at", where=str(where), reason=reason)


def _auto_map_is_native(cfg: dict) -> bool:
    """Whether a config's `auto_map` only names a copy of an architecture transformers (and mindtune)
    implement natively, for the config's own model_type: Phi-3 and Phi-4-mini ship
    `modeling_phi3.Phi3ForCausalLM` as remote code, and transformers loads such folders with its own
    class unless told to trust remote code. mindtune never runs the remote code either way."""
    models = [v for k, v in cfg["auto_map"].items() if k.startswith("AutoModel")] if isinstance(
        cfg["auto_map"], dict) else [None]
    families = {ARCHITECTURES.get(v.rsplit(".", 1)[-1]) if isinstance(v, str) else None for v in models}
    return len(families) == 1 and None not in families and MODEL_TYPES.get(cfg.get("model_type")) in families


def _language_model_config(cfg: dict, spec: FamilySpec, source: str) -> dict:
    """The config the language model is built from: a wrapping architecture's `text_config` over its
    top-level keys (token ids, dtype, tying), then the family's defaults for whatever is absent."""
    arch = next((a for a in cfg.get("architectures") or [] if a in spec.wrapped), None)
    if arch is not None:
        text = cfg.get("text_config")
        check(isinstance(text, dict), source, "text_config",
               Message("model.text_config", architecture=arch, py_value=repr(text)))
        top = {k: v for k, v in cfg.items() if not k.endswith("_config")}
        cfg = {**top, **text, "architectures": cfg["architectures"]}
    return {**spec.config_defaults, **cfg}


def _activation(cfg: dict, spec: FamilySpec, source: str) -> str:
    key = next((k for k in spec.activation_keys if cfg.get(k) is not None), spec.activation_keys[0])
    name = cfg.get(key, "silu")
    check(name in ACTIVATIONS, source, key,
           Message("model.not_supported", py_value=repr(name), supported_names=", ".join(ACTIVATIONS)))
    return ACTIVATIONS[name]


def _rope_settings(cfg: dict, spec: FamilySpec, source: str) -> dict:
    """RoPE settings from either layout: transformers >=5 `rope_parameters` (theta inside, per
    layer type for families with two) or the classic top-level `rope_theta` + `rope_scaling`
    (+ `partial_rotary_factor`, `rope_local_base_freq`)."""
    params = dict(cfg.get("rope_parameters") or {})
    local: dict = {}
    if FULL in params or SLIDING in params:  # per layer type (transformers 5 Gemma 3)
        local = dict(params.get(SLIDING) or {})
        params = dict(params.get(FULL) or {})
    scaling = dict(cfg.get("rope_scaling") or {})
    theta = float(params.pop("rope_theta", cfg.get("rope_theta", 10000.0)))
    factor = float(params.pop("partial_rotary_factor", cfg.get("partial_rotary_factor", 1.0)))
    check(0 < factor <= 1, source, "partial_rotary_factor", Message("model.rotary_factor", factor=factor))
    merged = {**scaling, **params}
    where = "rope_parameters" if cfg.get("rope_parameters") else "rope_scaling"
    scaling_out = _rope_scaling(merged, spec, f"{where}.rope_type", source, cfg)
    local_theta = cfg.get("rope_local_base_freq")
    if local:
        check(_rope_scaling(local, spec, f"rope_parameters.{SLIDING}.rope_type", source) is None, source,
               f"rope_parameters.{SLIDING}.rope_type", Message("model.sliding_rope"))
        local_theta = local.get("rope_theta", local_theta)
    return {"theta": theta, "scaling": scaling_out, "partial_rotary_factor": factor,
            "local_theta": None if local_theta is None else float(local_theta)}


def _rope_scaling(merged: dict, spec: FamilySpec, key: str, source: str, cfg: dict | None = None) -> dict | None:
    rope_type = merged.get("rope_type", merged.get("type", "default"))
    rope_type = ROPE_TYPE_ALIASES.get(rope_type, rope_type)
    check(rope_type in spec.rope_types, source, key,
           Message("model.rope_family", py_value=repr(rope_type), family=spec.name,
                   supported_names=", ".join(spec.rope_types)))
    if rope_type == "default":
        return None
    section = key.rsplit('.', 1)[0]
    if rope_type == "longrope":
        return _longrope(merged, cfg or {}, section, source)
    need = ("factor",) if rope_type == "linear" else (
        "factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")
    for name in need:
        check(name in merged, source, f"{section}.{name}", Message("model.rope_required", rope_type=repr(rope_type)))
    return {"rope_type": rope_type, **{k: merged[k] for k in need}}


def _longrope(merged: dict, cfg: dict, section: str, source: str) -> dict:
    """LongRoPE (Phi-3-128k, Phi-3.5, Phi-4-mini) as transformers computes it: inverse frequencies
    divided by `short_factor` while the positions stay within `original_max_position_embeddings`
    (the top-level key first, as Phi-3 saves it), by `long_factor` beyond; cos and sin multiplied by
    `attention_factor` (default √(1 + ln(factor) / ln(original)), factor = max_position_embeddings
    / original when the config gives none)."""
    for name in ("short_factor", "long_factor"):
        value = merged.get(name)
        check(isinstance(value, list) and value and all(isinstance(v, (int, float)) and v > 0 for v in value),
               source, f"{section}.{name}", Message("model.longrope_factors", py_value=repr(value)))
    original = cfg.get("original_max_position_embeddings") or merged.get("original_max_position_embeddings") \
        or cfg.get("max_position_embeddings")
    check(isinstance(original, int) and original > 1, source, "original_max_position_embeddings",
           Message("model.longrope_original", py_value=repr(original)))
    factor = merged.get("factor") or cfg.get("max_position_embeddings", original) / original
    attention = merged.get("attention_factor")
    if attention is None:
        attention = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(original))
    return {"rope_type": "longrope", "short_factor": tuple(float(v) for v in merged["short_factor"]),
            "long_factor": tuple(float(v) for v in merged["long_factor"]),
            "original_max_position_embeddings": int(original), "attention_factor": float(attention)}


def _windows(cfg: dict, spec: FamilySpec, layers: int, source: str) -> tuple[int | None, tuple[str, ...]]:
    """(sliding window, per-layer FULL/SLIDING): config.json's `layer_types` when it has them,
    else the family's pattern."""
    window = cfg.get("sliding_window")
    if spec.windows == "after_max_window_layers" and not cfg.get("use_sliding_window"):
        window = None  # Qwen2/3 configs carry a sliding_window they do not use
    if window is None or spec.windows == "none":
        return None, ()
    check(isinstance(window, int) and window > 0, source, "sliding_window",
           Message("model.positive_int_or_null", py_value=repr(window)))
    given = cfg.get("layer_types")
    if given is not None:
        check(isinstance(given, list) and len(given) == layers and set(given) <= {FULL, SLIDING}, source,
               "layer_types", Message("model.layer_types", full=repr(FULL), sliding=repr(SLIDING), layers=layers))
        types = tuple(given)
    elif spec.windows == "all":
        types = (SLIDING,) * layers
    elif spec.windows == "after_max_window_layers":
        first = int(cfg.get("max_window_layers", layers))
        types = tuple(SLIDING if n >= first else FULL for n in range(layers))
    elif spec.windows == "alternate":
        types = tuple(SLIDING if n % 2 == 0 else FULL for n in range(layers))
    else:  # pattern: every n-th layer global
        every = int(cfg.get("sliding_window_pattern") or cfg.get("_sliding_window_pattern") or 6)
        types = tuple(FULL if (n + 1) % every == 0 else SLIDING for n in range(layers))
    return (window, types) if SLIDING in types else (None, ())


# ---- what a run asks of the model, checked before any weight is read ---------------------------

ALL_LINEAR = "all-linear"  # lora.target_modules: the family's own projections (PEFT's keyword; never the MoE router)


def match_lora_targets(module_names, target_modules, family_targets) -> tuple[list[str], list[str]]:
    """(the module names `target_modules` selects in model order, the listed names that match
    nothing). A list matches a module by its dotted name or its `.<name>` suffix; a string is one
    regex for re.fullmatch on dotted names (as PEFT does), or ALL_LINEAR for `family_targets`."""
    import re
    names = list(module_names)
    if target_modules == ALL_LINEAR:
        target_modules = list(family_targets)
    if isinstance(target_modules, str):
        regex = re.compile(target_modules)
        return [n for n in names if regex.fullmatch(n)], []

    def hit(name, target):
        return name == target or name.endswith("." + target)
    chosen = [n for n in names if any(hit(n, t) for t in target_modules)]
    return chosen, [t for t in target_modules if not any(hit(n, t) for n in names)]


def run_problems(args: ModelArgs, max_seq_len: int, method: str, target_modules) -> list[tuple[str, object, str]]:
    """(config key, value, why) for the settings this model cannot take: a sequence length beyond
    its context (no silent extrapolation), LoRA targets that name no projection of the family."""
    problems = []
    if max_seq_len > args.max_position_embeddings:
        problems.append(("data.max_seq_len", max_seq_len, Message(
            "model.above_context", tokens=args.max_position_embeddings, architecture=args.architecture)))
    if method == "lora":
        chosen, unmatched = match_lora_targets(args.dense_shapes(), target_modules, args.spec.default_lora_targets)
        if unmatched or not chosen:
            said = dict(family=args.family, projections=", ".join(args.lora_target_names()))
            problems.append(("lora.target_modules", target_modules,
                             Message("model.targets_unmatched", names=", ".join(unmatched), **said) if unmatched
                             else Message("model.targets_none", **said)))
    return problems


def check_run_settings(config) -> ModelArgs:
    """The model's ModelArgs, after checking `config` (core.spec.config.Config) against it; raises
    core.spec.config.ConfigError naming each key (and CheckpointError for an unreadable model folder).
    The CLI, the console's form and the worker call it before any weight is read."""
    args = read_model_args(config.model.path)
    problems = run_problems(args, config.data.max_seq_len, config.method, config.lora.target_modules)
    if problems:
        raise ConfigError([Problem(key, value, why) for key, value, why in problems])
    return args


def rope_inverse_frequencies(args: ModelArgs, theta: float | None = None, long: bool = False) -> np.ndarray:
    """Inverse frequencies (rotary_dim/2,) in float32, computed the way Hugging Face does; `theta`
    overrides the base (a family's sliding layers), and their RoPE is then the default kind.
    LongRoPE: the short factors' frequencies, or with `long` the long factors' (see `rope_long_after`)."""
    dim = args.rotary_dim
    exponents = np.arange(0, dim, 2, dtype=np.int64).astype(np.float32) / np.float32(dim)
    base = args.rope_theta if theta is None else theta
    scaling = args.rope_scaling
    if scaling is not None and theta is None and scaling["rope_type"] == "longrope":
        factors = np.asarray(scaling["long_factor" if long else "short_factor"], np.float32)
        return (1.0 / (factors * np.float32(base) ** exponents)).astype(np.float32)
    inv_freq = (1.0 / (np.float32(base) ** exponents)).astype(np.float32)
    if scaling is None or theta is not None:
        return inv_freq
    factor = float(scaling["factor"])
    if scaling["rope_type"] == "linear":
        return (inv_freq / factor).astype(np.float32)
    # Llama 3: keep high frequencies, divide low ones by `factor`, blend the band in between.
    old_len = float(scaling["original_max_position_embeddings"])
    low, high = float(scaling["low_freq_factor"]), float(scaling["high_freq_factor"])
    wavelen = 2 * math.pi / inv_freq
    scaled = np.where(wavelen > old_len / low, inv_freq / factor, inv_freq)
    smooth = (old_len / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < old_len / high) & ~(wavelen > old_len / low)
    return np.where(medium, smoothed, scaled).astype(np.float32)


def rope_long_after(args: ModelArgs) -> int | None:
    """LongRoPE: a forward whose largest position + 1 exceeds this uses the long factors for every
    position (transformers' longrope_frequency_update); None for other RoPE types."""
    scaling = args.rope_scaling
    if scaling is None or scaling["rope_type"] != "longrope":
        return None
    return int(scaling["original_max_position_embeddings"])


def rope_attention_factor(args: ModelArgs) -> float:
    """What cos and sin are multiplied by (LongRoPE's attention factor; 1 otherwise)."""
    return float((args.rope_scaling or {}).get("attention_factor", 1.0))


# ---- weight files ---------------------------------------------------------------------------

WEIGHTS_NAME = "model.safetensors"
INDEX_NAME = "model.safetensors.index.json"
PICKLE_GLOBS = ("pytorch_model*.bin", "*.pt", "*.pth", "*.bin")
SUPPORTED = ("a Hugging Face folder with config.json and model.safetensors "
             "(or a sharded model.safetensors.index.json)")


def require_folder(model_dir: str | Path) -> Path:
    folder = Path(model_dir)
    if not folder.is_dir():
        raise CheckpointError(_at(folder, Message("model.not_a_folder")))
    return folder


def weight_files(model_dir: str | Path) -> list[Path]:
    """The safetensors files of a model folder, in a stable order; refuses pickle-only folders."""
    folder = require_folder(model_dir)
    index = folder / INDEX_NAME
    if index.is_file():
        return _shards_from_index(index)
    single = folder / WEIGHTS_NAME
    if single.is_file():
        return [single]
    pickles = sorted({p.name for pattern in PICKLE_GLOBS for p in folder.glob(pattern)})
    if pickles:
        raise CheckpointError(_at(folder, Message("model.pickle_only", files=", ".join(pickles))))
    raise CheckpointError(_at(folder, Message("model.no_weights")))


def file_sha256(paths: list[Path]) -> str:
    """One sha256 over the given files' bytes (the base model's identity for LoRA checkpoints)."""
    digest = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                   "generation_config.json", "chat_template.jinja")


def copy_tokenizer_files(source_dir: str | Path, dest_dir: str | Path) -> None:
    """Copy the tokenizer/generation files a Hugging Face folder carries, where they exist."""
    for name in TOKENIZER_FILES:
        source = Path(source_dir) / name
        if source.is_file():
            shutil.copyfile(source, Path(dest_dir) / name)


def _shards_from_index(index: Path) -> list[Path]:
    try:
        weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise CheckpointError(_at(index, Message("model.bad_index", json_says=str(exc)))) from exc
    shards = []
    for name in dict.fromkeys(weight_map.values()):
        shard = index.parent / name
        if not shard.is_file():
            raise CheckpointError(_at(index, Message("model.shard_missing", shard=name, folder=str(index.parent))))
        shards.append(shard)
    return shards


def read_model_args(model_dir: str | Path) -> ModelArgs:
    """ModelArgs of a folder, with a missing folder or bad config.json as a CheckpointError."""
    require_folder(model_dir)
    try:
        return ModelArgs.from_dir(model_dir)
    except ModelConfigError as exc:
        raise CheckpointError(exc.message) from exc
