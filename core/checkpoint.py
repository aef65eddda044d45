"""Checkpoints: Hugging Face safetensors folders (single file or sharded) -> MindSpore parameters.

Only safetensors are read: pickle checkpoints (`pytorch_model.bin`, `*.pt`) can execute code when
loaded and are refused with a message that says how to convert them. Every mismatch between the
files and the model (missing, extra or mis-shaped tensor) is an error naming the tensor, so a model
is never half-loaded silently.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

import mindspore as ms  # noqa: F401  (importing mindspore registers numpy's bfloat16 dtype)
from mindspore import Tensor
from safetensors import SafetensorError, safe_open

from core.model import CausalLM, DTYPES, ModelArgs, ModelConfigError

WEIGHTS_NAME = "model.safetensors"
INDEX_NAME = "model.safetensors.index.json"
PICKLE_GLOBS = ("pytorch_model*.bin", "*.pt", "*.pth", "*.bin")
# Buffers some older checkpoints carry that are recomputed, not learned.
IGNORED_KEYS = re.compile(r"\.rotary_emb\.inv_freq$")
SUPPORTED = "a Hugging Face folder with config.json and model.safetensors (or a sharded model.safetensors.index.json)"


class CheckpointError(ValueError):
    """A checkpoint that cannot be loaded; the message names the file or tensor and what is supported."""


def weight_files(model_dir: str | Path) -> list[Path]:
    """The safetensors files of a model folder, in a stable order; refuses pickle-only folders."""
    folder = _require_folder(model_dir)
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


def _require_folder(model_dir: str | Path) -> Path:
    folder = Path(model_dir)
    if not folder.is_dir():
        raise CheckpointError(f"{folder}: not a folder. Expected {SUPPORTED}.")
    return folder


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


def read_safetensors(files: list[Path]) -> dict[str, np.ndarray]:
    """All tensors of the given safetensors files as numpy arrays (bf16 stays bf16)."""
    tensors: dict[str, np.ndarray] = {}
    for path in files:
        try:
            with safe_open(str(path), framework="numpy") as handle:
                for key in handle.keys():
                    if key in tensors:
                        raise CheckpointError(f"{path}: tensor {key} appears in more than one shard.")
                    tensors[key] = handle.get_tensor(key)
        except (SafetensorError, OSError, ValueError) as exc:
            if isinstance(exc, CheckpointError):
                raise
            raise CheckpointError(f"{path}: cannot read safetensors file (truncated or corrupt?): {exc}") from exc
    return tensors


def load_hf_weights(model: CausalLM, tensors: dict[str, np.ndarray], source: str) -> None:
    """Copy Hugging Face tensors into the model's parameters, cast to each parameter's dtype.
    Every parameter must be present with the right shape and every tensor must be used."""
    params = {p.name: p for p in model.get_parameters()}
    unused = {k for k in tensors if k not in params and not IGNORED_KEYS.search(k)}
    if model.tied:
        unused.discard("lm_head.weight")  # some tied checkpoints still store the shared matrix
    missing = sorted(k for k in params if k not in tensors)
    if missing:
        raise CheckpointError(f"{source}: missing tensor {missing[0]}" +
                              (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "") +
                              f" required by {model.args.architecture}.")
    if unused:
        extra = sorted(unused)
        raise CheckpointError(f"{source}: unexpected tensor {extra[0]}" +
                              (f" (and {len(extra) - 1} more)" if len(extra) > 1 else "") +
                              f" that {model.args.architecture} with this config.json does not have.")
    for name, param in params.items():
        array = tensors[name]
        if tuple(array.shape) != tuple(param.shape):
            raise CheckpointError(f"{source}: tensor {name} has shape {tuple(array.shape)}, "
                                  f"config.json implies {tuple(param.shape)}.")
    for name, param in params.items():
        param.set_data(Tensor(tensors[name].astype(np.float32), dtype=param.dtype))


def check_dtype_supported(dtype: str) -> None:
    """bf16 has no CPU kernels in MindSpore 2.10: refuse it up front with what to use instead."""
    if dtype not in DTYPES:
        raise CheckpointError(f"dtype {dtype!r} is not supported; use one of {', '.join(DTYPES)}.")
    if dtype == "bfloat16" and ms.get_context("device_target") == "CPU":
        raise CheckpointError("dtype bfloat16: MindSpore's CPU kernels do not support bf16 compute; "
                              "load as float32 (or float16) on the CPU, or use a GPU/Ascend device.")


def load_hf_model(model_dir: str | Path, dtype: str = "float32") -> CausalLM:
    """Build the model a Hugging Face folder describes and load its weights in `dtype`."""
    check_dtype_supported(dtype)
    _require_folder(model_dir)
    try:
        args = ModelArgs.from_dir(model_dir)
    except ModelConfigError as exc:
        raise CheckpointError(str(exc)) from exc
    files = weight_files(model_dir)
    tensors = read_safetensors(files)
    model = CausalLM(args, dtype)
    load_hf_weights(model, tensors, source=str(files[0] if len(files) == 1 else Path(model_dir) / INDEX_NAME))
    model.set_train(False)
    return model
