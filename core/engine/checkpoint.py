"""Checkpoints: Hugging Face safetensors folders (single file or sharded) -> MindSpore parameters,
and the training checkpoints of a run (weights, optimizer state, trainer state), written atomically.

Only safetensors are read: pickle checkpoints (`pytorch_model.bin`, `*.pt`) can execute code when
loaded and are refused with a message that says how to convert them. Every mismatch between the
files and the model (missing, extra or mis-shaped tensor) is an error naming the tensor, so a model
is never half-loaded silently.
"""
from __future__ import annotations

import contextlib
import importlib
import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np

import mindspore as ms  # noqa: F401  (importing mindspore registers numpy's bfloat16 dtype)
from mindspore import Tensor, ops
from safetensors.numpy import save_file

from core.run.atomic import atomic_folder
from core.spec.messages import Message
from core.spec.errors import first_of
from core.run.ckpt_store import OPTIMIZER_FILE, STATE_FILE, WEIGHTS_FILE, resolve_checkpoint, verified_folder
from core.engine.model import CausalLM, DTYPES
from core.weights.safetensors_io import SafetensorsFormatError, SafetensorsReader
from core.spec.model_args import copy_tokenizer_files, INDEX_NAME, WEIGHTS_NAME, read_model_args, weight_files
from core.spec.errors import CheckpointError

def _reader_says(exc: OSError | ValueError) -> str:
    """Why SafetensorsReader could not read a file: its own message, else the OS's reason."""
    if isinstance(exc, SafetensorsFormatError):
        return exc.message
    return Message("weights.os_error", os_error=str(exc)) if isinstance(exc, OSError) else str(exc)


def read_safetensors(files: list[Path], only: set[str] | None = None) -> dict[str, np.ndarray]:
    """All tensors of the given safetensors files (or those named in `only`) as numpy arrays (bf16
    stays bf16)."""
    with SafetensorsFiles(files) as tensors:
        return {key: tensors[key] for key in tensors if only is None or key in only}


class SafetensorsFiles(Mapping):
    """The tensors of safetensors files by name, each read from disk when it is asked for (a 0.5B
    model is then never in memory twice while it loads; `core.weights.safetensors_io.SafetensorsReader`,
    plain reads, no mmap). Names, shapes and dtypes come from the headers; a name in two files, or
    a file that is not safetensors, is a CheckpointError naming it. Use as a context manager (the
    files stay open inside it)."""

    def __init__(self, files: list[Path]):
        self.files = [Path(f) for f in files]
        self._readers: list[SafetensorsReader] = []
        self._where: dict[str, SafetensorsReader] = {}

    def __enter__(self) -> SafetensorsFiles:
        for path in self.files:
            try:
                reader = SafetensorsReader(path)
            except (OSError, ValueError) as exc:
                self.__exit__()
                raise CheckpointError(Message("weights.unreadable", file=str(path), reason=_reader_says(exc))) from exc
            self._readers.append(reader)
            for key in reader.tensors:
                if key in self._where:
                    self.__exit__()
                    raise CheckpointError(Message("weights.two_shards", file=str(path), name=key))
                self._where[key] = reader
        return self

    def __exit__(self, *exc) -> None:
        for reader in self._readers:
            reader.close()
        self._readers = []

    def __getitem__(self, key: str) -> np.ndarray:
        reader = self._where[key]
        try:
            return reader.read(key)
        except (OSError, ValueError) as exc:
            raise CheckpointError(Message("weights.unreadable_tensor", file=str(reader.path), name=key,
                                          reason=_reader_says(exc))) from exc

    def read_into(self, key: str, out: np.ndarray) -> None:
        """Tensor `key` written into the array `out` (see SafetensorsReader.read_into)."""
        reader = self._where[key]
        try:
            reader.read_into(key, out)
        except (OSError, ValueError) as exc:
            raise CheckpointError(Message("weights.unreadable_tensor", file=str(reader.path), name=key,
                                          reason=_reader_says(exc))) from exc

    def __iter__(self):
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)

    def only(self, keys) -> SafetensorsFiles:
        """A view of these files limited to `keys` (still read on access; the same open files)."""
        view = SafetensorsFiles(self.files)
        view._where = {key: self._where[key] for key in keys}
        return view

    def file_of(self, key: str) -> Path:
        return self._where[key].path

    def shape(self, key: str) -> tuple[int, ...]:
        return self._where[key].tensors[key].shape

    def dtype(self, key: str) -> str:
        """The stored dtype as a numpy name: "bfloat16", "float32", ..."""
        return self._where[key].tensors[key].dtype

    def metadata(self, key: str) -> dict:
        return self._where[key].metadata


def _shape_of(tensors: Mapping, key: str) -> tuple[int, ...]:
    return tensors.shape(key) if isinstance(tensors, SafetensorsFiles) else tuple(np.shape(tensors[key]))


def _host_view(param) -> np.ndarray | None:
    """A writable numpy view of a CPU parameter's own storage, or None where asnumpy() copies."""
    view = param.asnumpy()
    again = param.asnumpy()
    if view.flags.writeable and view.__array_interface__["data"][0] == again.__array_interface__["data"][0]:
        return view
    return None


def copy_into_parameter(param, tensors: Mapping, key: str) -> None:
    """Tensor `key` of `tensors` into `param`, converted to its dtype: read straight into the
    parameter's storage where MindSpore exposes it (the CPU: no second copy of the largest tensor,
    the embedding), else through a new Tensor."""
    view = _host_view(param)
    if view is not None:
        if isinstance(tensors, SafetensorsFiles):
            tensors.read_into(key, view)
        else:
            np.copyto(view, tensors[key], casting="unsafe")
        return
    array = tensors[key]
    if array.dtype != ms.dtype_to_nptype(param.dtype):
        array = array.astype(np.float32)  # every stored dtype converts to float32 exactly
    param.set_data(Tensor(np.ascontiguousarray(array), dtype=param.dtype))


def load_hf_weights(model: CausalLM, tensors: Mapping[str, np.ndarray], source: str) -> None:
    """Copy Hugging Face tensors into the model's parameters, cast to each parameter's dtype. The
    family's key map (`core.spec.families.KeyMap`) turns hub names into ours and says which tensors are
    not the model's (rotary buffers, a vision tower); every parameter must be present with the
    right shape and every other tensor must be used. Errors name the tensor as the file has it.
    The hub names are kept on the model (`hub_names`) so an export writes the base's layout, and so
    are the names of the tensors that are not ours but belong to the checkpoint (`passthrough_names`,
    a vision tower: `KeyMap.passthrough`), which an export copies back from the base's files.
    `tensors` may be a SafetensorsFiles: every check runs on the headers, then one tensor at a time
    is read and copied (a key map with tensor conversions, MoE experts, reads them all first)."""
    args = model.args
    key_map = args.spec.key_map
    model.passthrough_names = sorted(k for k in tensors if key_map.is_passthrough(k))
    try:
        if key_map.convert_in is None:  # names only: map the keys, read the arrays later
            hub_key, hub_names = key_map.to_ours({key: key for key in tensors}, args)
        else:
            tensors, hub_names = key_map.to_ours(dict(tensors.items()), args)
            hub_key = {name: name for name in tensors}
    except (KeyError, ValueError) as exc:
        raise CheckpointError(Message("model.at", where=source, reason=exc.args[0])) from exc
    params = {p.name: p for p in model.get_parameters()}
    unused = {k for k in hub_key if k not in params}
    if model.tied:
        unused.discard("lm_head.weight")  # some tied checkpoints still store the shared matrix
    missing = sorted(k for k in params if k not in hub_key)
    if missing:
        raise CheckpointError(first_of("weights.missing_tensor", missing, source=source,
                                        architecture=args.architecture))
    if unused:
        extra = sorted(hub_names.get(k, k) for k in unused)
        raise CheckpointError(first_of("weights.unexpected_tensor", extra, source=source,
                                        architecture=args.architecture))
    for name, param in params.items():
        shape = _shape_of(tensors, hub_key[name])
        if shape != tuple(param.shape):
            raise CheckpointError(Message("weights.shape", source=source, name=hub_names.get(name, name),
                                          shape=str(shape), expected=str(tuple(param.shape))))
    for name, param in params.items():
        copy_into_parameter(param, tensors, hub_key[name])
    model.hub_names = {name: hub_names.get(name, name) for name in params}


def check_dtype_supported(dtype: str) -> None:
    """bf16 has no CPU kernels in MindSpore 2.10: refuse it up front with what to use instead."""
    if dtype not in DTYPES:
        raise CheckpointError(Message("weights.dtype", py_value=repr(dtype), choices=", ".join(DTYPES)))
    if dtype == "bfloat16" and ms.get_context("device_target") == "CPU":
        raise CheckpointError(Message("weights.cpu_bf16"))


@contextlib.contextmanager
def without_hugepage_advice():
    """NumPy's large arrays allocated without `madvise(MADV_HUGEPAGE)` inside the block (restored after).

    NumPy advises transparent huge pages for every large array it allocates. Where the kernel's THP
    setting is `madvise` with `defrag` `madvise` (Debian's and Ubuntu's default), each first touch of
    such an array then tries to compact memory for a huge page, synchronously; on a long-running
    machine whose memory is fragmented that fails and is slow: building the Qwen2.5-0.5B shape's
    2 GB of float32 parameters (zeros, then the weights read into them) took 10-14 s here against
    3.3 s with 4 KiB pages, a 2 GB `np.empty(...).fill(0)` 5-7 s against 0.7 s (bench/train_step.py's
    "model load"; Intel Xeon, 2 CPUs, AnonHugePages 0). NumPy's own switch
    (`NUMPY_MADVISE_HUGEPAGE=0`) is read once at its import; this sets the same flag for the block."""
    switch = getattr(importlib.import_module("numpy._core.multiarray"), "_set_madvise_hugepage", None)
    if switch is None:  # a NumPy without the advice
        yield
        return
    before = switch(False)
    try:
        yield
    finally:
        switch(before)


def load_hf_model(model_dir: str | Path, dtype: str = "float32", storage_dtype: str | None = None) -> CausalLM:
    """Build the model a Hugging Face folder describes and load its weights in `dtype`, tensor by
    tensor. storage_dtype (default: dtype) keeps the Dense weights and the embedding in another
    dtype than the model computes in: bfloat16 | float16 frozen weights of a float32 LoRA model."""
    check_dtype_supported(dtype)
    if storage_dtype is not None and storage_dtype not in DTYPES:
        raise CheckpointError(Message("weights.storage_dtype", py_value=repr(storage_dtype), choices=", ".join(DTYPES)))
    args = read_model_args(model_dir)
    files = weight_files(model_dir)
    with without_hugepage_advice():
        model = CausalLM(args, dtype, random_init=False, storage_dtype=storage_dtype)  # every weight is loaded next
        with SafetensorsFiles(files) as tensors:
            load_hf_weights(model, tensors, source=str(files[0] if len(files) == 1 else Path(model_dir) / INDEX_NAME))
    model.weight_files = files  # where the passthrough tensors are read again for an export
    model.set_train(False)
    return model


# ---- training checkpoints: checkpoints/step-<N>/ (written, pointed, pruned, verified by core.run.ckpt_store)

def load_train_checkpoint(path: str | Path) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict]:
    """(weights, optimizer state, trainer state) of a checkpoint folder whose files match its
    manifest; corrupt files are errors naming the file (and the checkpoints that still verify)."""
    folder = verified_folder(path)
    weights = read_safetensors([folder / WEIGHTS_FILE])
    optimizer_state = read_safetensors([folder / OPTIMIZER_FILE])
    return weights, optimizer_state, read_trainer_state(folder)


def read_trainer_state(path: str | Path) -> dict:
    """trainer_state.json of a checkpoint folder (checked: a dict with a step)."""
    folder = resolve_checkpoint(path)
    try:
        trainer_state = json.loads((folder / STATE_FILE).read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(Message("model.at", where=str(folder / STATE_FILE),
                                      reason=Message("model.invalid_json", json_says=str(exc)))) from exc
    if not isinstance(trainer_state, dict) or "step" not in trainer_state:
        raise CheckpointError(Message("engine.state_no_step", file=str(folder / STATE_FILE)))
    return trainer_state


def train_checkpoint_file(path: str | Path, name: str = WEIGHTS_FILE) -> SafetensorsFiles:
    """One safetensors file of a checkpoint (weights or optimizer state), read tensor by tensor:
    `with train_checkpoint_file(step_dir) as weights: set_parameters(params, weights, ...)`."""
    return SafetensorsFiles([resolve_checkpoint(path) / name])


def set_parameters(params: dict, tensors: Mapping[str, np.ndarray], source: str) -> None:
    """Copy arrays into named parameters; every name must exist on both sides with equal shapes.
    `tensors` may be a SafetensorsFiles (checked on its headers, then read one tensor at a time)."""
    missing = sorted(set(params) - set(tensors))
    extra = sorted(set(tensors) - set(params))
    if missing or extra:
        raise CheckpointError(Message("engine.params_mismatch", source=source, missing_keys=str(missing[:3]),
                                      unexpected_keys=str(extra[:3])))
    for name, param in params.items():
        shape = _shape_of(tensors, name)
        if shape != tuple(param.shape):
            raise CheckpointError(Message("engine.param_shape", source=source, name=name, shape=str(shape),
                                          expected=str(tuple(param.shape))))
    for name, param in params.items():
        # ops.assign writes in place, so graphs compiled before the restore see the new values
        # (Parameter.set_data swaps the tensor behind their back).
        ops.assign(param, Tensor(np.asarray(tensors[name]), dtype=param.dtype))


# ---- writing Hugging Face folders ------------------------------------------------------------

def hf_state_dict(model: CausalLM) -> dict[str, np.ndarray]:
    """The model's weights in float32 under the hub names of the checkpoint it was loaded from
    (its family's key map; our own names for a model built from scratch), plus the checkpoint's
    tensors that are not the model's (a vision tower), read again from its files as stored. LoRA
    tensors are excluded: merge first."""
    ours = {p.name: p.asnumpy().astype(np.float32) for p in model.get_parameters()
            if not p.name.endswith((".lora_a", ".lora_b"))}
    state = model.args.spec.key_map.to_hub(ours, model.args, getattr(model, "hub_names", None))
    passthrough = set(getattr(model, "passthrough_names", ()))
    if passthrough:
        kept = read_safetensors(model.weight_files, only=passthrough)
        missing = sorted(passthrough - set(kept))
        if missing:
            raise CheckpointError(Message("weights.base_tensor_gone", folder=str(model.weight_files[0].parent),
                                          name=missing[0]))
        state.update(kept)
    return state


def save_hf_folder(model: CausalLM, hf_config: dict, out_dir: str | Path,
                   tokenizer_dir: str | Path | None = None) -> Path:
    """Write a Hugging Face model folder (config.json, model.safetensors, tokenizer files copied
    from `tokenizer_dir`) under a temporary name and rename it into place when complete."""
    with atomic_folder(out_dir) as tmp:
        config = dict(hf_config)
        config["dtype"] = "float32"
        config.pop("torch_dtype", None)
        (tmp / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True), encoding="utf-8")
        save_file(hf_state_dict(model), str(tmp / WEIGHTS_NAME), metadata={"format": "pt"})
        if tokenizer_dir is not None:
            copy_tokenizer_files(tokenizer_dir, tmp)
    return Path(out_dir)
