"""A model folder's architecture, read without MindSpore: the Hugging Face `config.json` normalised
into `ModelArgs`, and the weight files that go with it. The console imports this module to list and
describe checkpoints (it never imports MindSpore); `core.model` builds the network from it.

Only safetensors are accepted: pickle checkpoints (`pytorch_model.bin`, `*.pt`) can execute code
when loaded and are refused with a message that says how to convert them.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

# Hugging Face architecture name -> our family. Mistral without sliding-window attention is Llama.
ARCHITECTURES = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "llama",
    "Qwen2ForCausalLM": "qwen2",
}
MODEL_TYPES = {"llama": "llama", "mistral": "llama", "qwen2": "qwen2"}
ROPE_TYPES = ("default", "linear", "llama3")
PROJECTION_NAMES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class ModelConfigError(ValueError):
    """A config.json that mindtune cannot build a model from; the message names file and key."""


@dataclass(frozen=True)
class ModelArgs:
    """The architecture hyper-parameters, normalised from a Hugging Face config.json."""

    family: str  # "llama" | "qwen2"
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

    @classmethod
    def from_dir(cls, model_dir: str | Path) -> "ModelArgs":
        path = Path(model_dir) / "config.json"
        if not path.is_file():
            raise ModelConfigError(
                f"{path}: not found. A model folder needs a Hugging Face config.json "
                f"(supported architectures: {', '.join(ARCHITECTURES)})."
            )
        try:
            cfg = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ModelConfigError(f"{path}: not valid JSON ({exc}).") from exc
        return cls.from_hf_config(cfg, source=str(path))

    @classmethod
    def from_hf_config(cls, cfg: dict, source: str = "config.json") -> "ModelArgs":
        family = _family_of(cfg, source)
        _check(cfg.get("hidden_act", "silu") == "silu", source, "hidden_act",
               f"{cfg.get('hidden_act')!r} is not supported; Llama and Qwen2 use 'silu'")
        required = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                    "num_attention_heads")
        for key in required:
            _check(isinstance(cfg.get(key), int) and cfg[key] > 0, source, key,
                   f"must be a positive integer, got {cfg.get(key)!r}")
        heads = cfg["num_attention_heads"]
        kv_heads = cfg.get("num_key_value_heads") or heads
        _check(heads % kv_heads == 0, source, "num_key_value_heads",
               f"{kv_heads} must divide num_attention_heads={heads}")
        head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
        rope_theta, rope_scaling = _rope_settings(cfg, source)
        max_pos = int(cfg.get("max_position_embeddings", 2048))
        window = cfg.get("sliding_window")
        if window and (family == "llama" or cfg.get("use_sliding_window")):
            # Full causal attention equals sliding-window attention up to the window length.
            max_pos = min(max_pos, int(window))
        eos = cfg.get("eos_token_id")
        eos_ids = tuple(eos) if isinstance(eos, list) else (() if eos is None else (int(eos),))
        qwen = family == "qwen2"
        return cls(
            family=family,
            architecture=(cfg.get("architectures") or ["?"])[0],
            vocab_size=cfg["vocab_size"],
            hidden_size=cfg["hidden_size"],
            intermediate_size=cfg["intermediate_size"],
            num_layers=cfg["num_hidden_layers"],
            num_heads=heads,
            num_kv_heads=kv_heads,
            head_dim=head_dim,
            max_position_embeddings=max_pos,
            rms_norm_eps=float(cfg.get("rms_norm_eps", 1e-6)),
            rope_theta=rope_theta,
            rope_scaling=rope_scaling,
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            qkv_bias=True if qwen else bool(cfg.get("attention_bias", False)),
            o_bias=False if qwen else bool(cfg.get("attention_bias", False)),
            mlp_bias=False if qwen else bool(cfg.get("mlp_bias", False)),
            stored_dtype=cfg.get("dtype") or cfg.get("torch_dtype"),
            bos_token_id=cfg.get("bos_token_id"),
            eos_token_ids=eos_ids,
            pad_token_id=cfg.get("pad_token_id"),
        )

    def num_parameters(self) -> int:
        """Parameter count computed from the shapes (tied embeddings counted once)."""
        h, kv = self.hidden_size, self.num_kv_heads * self.head_dim
        q = self.num_heads * self.head_dim
        attn = h * q + 2 * h * kv + q * h
        attn += (q + 2 * kv) * self.qkv_bias + h * self.o_bias
        mlp = 3 * h * self.intermediate_size + (2 * self.intermediate_size + h) * self.mlp_bias
        per_layer = attn + mlp + 2 * h
        embed = self.vocab_size * h * (1 if self.tie_word_embeddings else 2)
        return self.num_layers * per_layer + embed + h

    def to_dict(self) -> dict:
        return asdict(self)


def _check(ok: bool, source: str, key: str, message: str) -> None:
    if not ok:
        raise ModelConfigError(f"{source}: {key}: {message}.")


def _family_of(cfg: dict, source: str) -> str:
    archs = cfg.get("architectures") or []
    for arch in archs:
        if arch in ARCHITECTURES:
            return ARCHITECTURES[arch]
    model_type = cfg.get("model_type")
    if not archs and model_type in MODEL_TYPES:
        return MODEL_TYPES[model_type]
    raise ModelConfigError(
        f"{source}: architecture {archs or model_type!r} is not supported; supported: "
        f"{', '.join(ARCHITECTURES)} (model_type {', '.join(MODEL_TYPES)})."
    )


def _rope_settings(cfg: dict, source: str) -> tuple[float, dict | None]:
    """Read RoPE settings from either layout: transformers ≥5 `rope_parameters` (theta inside)
    or the classic top-level `rope_theta` + `rope_scaling`."""
    params = dict(cfg.get("rope_parameters") or {})
    scaling = dict(cfg.get("rope_scaling") or {})
    theta = float(params.pop("rope_theta", cfg.get("rope_theta", 10000.0)))
    merged = {**scaling, **params}
    rope_type = merged.get("rope_type", merged.get("type", "default"))
    _check(rope_type in ROPE_TYPES, source, "rope_scaling.rope_type",
           f"{rope_type!r} is not supported; supported: {', '.join(ROPE_TYPES)}")
    if rope_type == "default":
        return theta, None
    need = ("factor",) if rope_type == "linear" else (
        "factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")
    for key in need:
        _check(key in merged, source, f"rope_scaling.{key}", f"required for rope_type {rope_type!r}")
    return theta, {"rope_type": rope_type, **{k: merged[k] for k in need}}


def rope_inverse_frequencies(args: ModelArgs) -> np.ndarray:
    """Inverse frequencies (head_dim/2,) in float32, computed the way Hugging Face does."""
    dim = args.head_dim
    exponents = np.arange(0, dim, 2, dtype=np.int64).astype(np.float32) / np.float32(dim)
    inv_freq = (1.0 / (np.float32(args.rope_theta) ** exponents)).astype(np.float32)
    scaling = args.rope_scaling
    if scaling is None:
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


# ---- weight files ---------------------------------------------------------------------------

WEIGHTS_NAME = "model.safetensors"
INDEX_NAME = "model.safetensors.index.json"
PICKLE_GLOBS = ("pytorch_model*.bin", "*.pt", "*.pth", "*.bin")
SUPPORTED = ("a Hugging Face folder with config.json and model.safetensors "
             "(or a sharded model.safetensors.index.json)")


class CheckpointError(ValueError):
    """A checkpoint that cannot be loaded; the message names the file or tensor and what is supported."""


def require_folder(model_dir: str | Path) -> Path:
    folder = Path(model_dir)
    if not folder.is_dir():
        raise CheckpointError(f"{folder}: not a folder. Expected {SUPPORTED}.")
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
        raise CheckpointError(
            f"{folder}: only pickle weights found ({', '.join(pickles)}). mindtune loads safetensors only "
            f"(pickle files can run code when loaded); convert with transformers: "
            f"`AutoModelForCausalLM.from_pretrained(dir).save_pretrained(dir, safe_serialization=True)`."
        )
    raise CheckpointError(f"{folder}: no {WEIGHTS_NAME} or {INDEX_NAME}. Expected {SUPPORTED}.")


def _shards_from_index(index: Path) -> list[Path]:
    try:
        weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise CheckpointError(f"{index}: not a valid safetensors index (needs a 'weight_map'): {exc}") from exc
    shards = []
    for name in dict.fromkeys(weight_map.values()):
        shard = index.parent / name
        if not shard.is_file():
            raise CheckpointError(f"{index}: shard {name} is listed but missing from {index.parent}.")
        shards.append(shard)
    return shards


def read_model_args(model_dir: str | Path) -> ModelArgs:
    """ModelArgs of a folder, with a missing folder or bad config.json as a CheckpointError."""
    require_folder(model_dir)
    try:
        return ModelArgs.from_dir(model_dir)
    except ModelConfigError as exc:
        raise CheckpointError(str(exc)) from exc
