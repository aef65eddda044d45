"""Export a run's checkpoint for download: a PEFT LoRA adapter, a merged Hugging Face model
folder, or a MindSpore `.ckpt`; each also as a zip.

    python -m core.export --run runs/<id> [--which best|last] --format peft|merged|mindspore [--zip]
                          [--dtype stored|float32|bfloat16|float16]
    python -m core.export --run runs/<id> [--which best|last] --format gguf|gguf-lora|ollama
                          [--quant f32|f16|bf16|q8_0|q4_k_m]

The command line is core.export's. The GGUF formats (llama.cpp, Ollama) are
core.engine.gguf_run's: each file is reloaded with llama.cpp and checked against this engine before it
is offered (`<file>.check.json` beside it).

Outputs go to `runs/<id>/export/<which>-step-<N>-<format>/` (and `.zip`; `RunDir.export_path`),
written under a temporary name and renamed when complete, so a download never sees half an export.

The PEFT and merged exports never build the model and never import MindSpore (`import mindspore`
alone is ~400 MB and seconds): they stream safetensors one tensor at a time (core.weights.safetensors_io).
- peft: the checkpoint's adapter tensors (weights.safetensors of a LoRA run holds only A and B)
  are copied under PEFT's key names; the base model is not read.
- merged: each shard of the base is read tensor by tensor and written again under the same file
  name with the same tensors (W + (alpha/r)·B·A for an adapted weight, the trained weight of a full
  fine-tune, the base's bytes for the rest), in the base's stored dtype unless `--dtype` says
  otherwise, with `model.safetensors.index.json` when the base has one. The peak memory is about
  one tensor (the embedding) beside the interpreter, whatever the model's size.
- mindspore: builds the model (MindSpore's own checkpoint writer needs its Parameters).
"""
from __future__ import annotations

import json
import shutil
import sys
import zipfile
from pathlib import Path

import numpy as np

from core.data.tokenizer import Tokenizer
from core.run.atomic import atomic_folder, atomic_open
from core.spec.errors import MessageError, said_of
from core.spec.messages import Message
from core.run.ckpt_store import verified_folder
from core.spec.model_args import (ALL_LINEAR, INDEX_NAME, copy_tokenizer_files, file_sha256, read_model_args, weight_files)
from core.spec.errors import CheckpointError
from core.weights.peft_format import (ADAPTER_CONFIG_NAME, ADAPTER_WEIGHTS_NAME, PEFT_PREFIX, peft_adapter_config,
                               to_module_path, to_peft_key)
from core.run.rundir import POINTERS, RunDir
from core.spec.objectives import REWARD_HEAD
from core.weights.safetensors_io import (FLOAT_DTYPES, SafetensorsReader, TensorEntry, from_float32, to_float32,
                                 write_file)

FORMATS = ("peft", "merged", "mindspore")
EXPORT_DTYPES = ("stored", "float32", "bfloat16", "float16")
WEIGHTS_FILE, OPTIMIZER_FILE, STATE_FILE = "weights.safetensors", "optimizer.safetensors", "trainer_state.json"
LORA_SUFFIXES = (".lora_a", ".lora_b")
FULL = "full"  # the full fine-tuning method


class ExportError(MessageError):
    """An export that cannot be made; the message says why and what would work."""


# ---- the checkpoint and its base, read without MindSpore ------------------------------------

def checkpoint_folder(path: str | Path) -> Path:
    """A step folder (or best/last pointer) -> the concrete folder; incomplete or corrupt ones are errors."""
    folder = Path(path)
    if not folder.is_dir():
        raise CheckpointError(Message("export.no_checkpoint", folder=str(folder)))
    folder = folder.resolve()
    for name in (WEIGHTS_FILE, OPTIMIZER_FILE, STATE_FILE):
        if not (folder / name).is_file():
            raise CheckpointError(Message("ckpt.incomplete", folder=str(folder), missing_file=name))
    return verified_folder(folder)  # every file's sha256 against the manifest (a corrupt one is named)


def read_state(folder: Path) -> dict:
    try:
        state = json.loads((folder / STATE_FILE).read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(Message("model.at", where=str(folder / STATE_FILE),
                                      reason=Message("model.invalid_json", json_says=str(exc)))) from exc
    if not isinstance(state, dict) or "step" not in state or "method" not in state:
        raise CheckpointError(Message("export.state_fields", file=str(folder / STATE_FILE)))
    return state


def base_folder(folder: Path, state: dict) -> Path:
    """The base model the checkpoint was trained from, checked to be the same files."""
    base = Path(state["base_model"]["path"])
    if not base.is_dir():
        raise ExportError(Message("export.base_gone", folder=str(folder), base=str(base)))
    if state["base_model"].get("sha256") and file_sha256(weight_files(base)) != state["base_model"]["sha256"]:
        raise ExportError(Message("export.base_changed", base=str(base)))
    return base


# ---- PEFT ----------------------------------------------------------------------------------

def adapter_modules(names) -> list[str]:
    """The adapted modules of a LoRA checkpoint's tensor names (`<module>.lora_a/.lora_b`)."""
    return list(dict.fromkeys(name[: -len(".lora_a")] for name in names if name.endswith(LORA_SUFFIXES)))


def write_peft(folder: Path, state: dict, out: Path) -> None:
    """adapter_model.safetensors (PEFT's key names, float32) and adapter_config.json from the
    checkpoint's own tensors; every tensor must be an adapter's A or B of the configured rank. A
    reward model's value head is written as PEFT writes a sequence classifier's (task_type SEQ_CLS,
    `score` in modules_to_save: `base_model.model.score.weight`)."""
    lora = state.get("lora") or {}
    base = Path(state["base_model"]["path"])
    with SafetensorsReader(folder / WEIGHTS_FILE) as weights:
        reward = REWARD_HEAD in weights.tensors
    if base.is_dir() and read_model_args(base).spec.key_map.convert_out is not None:
        if reward:
            raise ExportError(Message("export.reward_layout", architecture=read_model_args(base).architecture))
        return _write_peft_through_model(folder, out)  # MoE experts stacked: PEFT's own layout for them
    with SafetensorsReader(folder / WEIGHTS_FILE) as weights:
        names = sorted(n for n in weights.tensors if n != REWARD_HEAD)
        foreign = [n for n in names if not n.endswith(LORA_SUFFIXES)]
        if foreign or not names:
            raise ExportError(Message("export.not_adapter_tensor", file=str(folder / WEIGHTS_FILE), name=foreign[0])
                              if foreign else Message("export.no_tensor", file=str(folder / WEIGHTS_FILE)))
        for name in names:
            info = weights.tensors[name]
            rank = info.shape[0] if name.endswith(".lora_a") else info.shape[-1]
            if len(info.shape) != 2 or rank != lora.get("rank"):
                raise ExportError(Message("export.adapter_rank", file=str(folder / WEIGHTS_FILE), name=name,
                                          shape=str(info.shape), rank=str(lora.get('rank'))))

        def reader(name):
            return lambda: to_float32(weights.read(name, raw=True), weights.tensors[name].dtype)

        prefix = _module_prefix(state)
        entries = [TensorEntry(to_peft_key(name, prefix), weights.tensors[name].shape, "float32", reader(name))
                   for name in names]
        if reward:
            entries.append(TensorEntry(PEFT_PREFIX + REWARD_HEAD, weights.tensors[REWARD_HEAD].shape, "float32",
                                       reader(REWARD_HEAD)))
        write_file(out / ADAPTER_WEIGHTS_NAME, entries, metadata={"format": "pt"})
    targets = lora["target_modules"]
    if targets == ALL_LINEAR:  # the modules this run adapted, not PEFT's own reading of all-linear
        targets = list(dict.fromkeys(module.rsplit(".", 1)[-1] for module in adapter_modules(names)))
    if prefix:  # names like q_proj would also match a vision tower's layers: name each module
        targets = [to_module_path(module, prefix) for module in adapter_modules(names)]
    config = peft_adapter_config(state["base_model"]["path"], lora["rank"], lora["alpha"], lora["dropout"], targets)
    if reward:
        config.update(task_type="SEQ_CLS", modules_to_save=[REWARD_HEAD.removesuffix(".weight")])
    (out / ADAPTER_CONFIG_NAME).write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")


def _write_peft_through_model(folder: Path, out: Path) -> None:
    """Families whose key map converts tensors (MoE: LoRA A (E, r, in) / B (E, out, r) on stacked
    experts): build the model and write PEFT's layout for it (core.engine.lora.save_peft_adapter: the
    experts as `target_parameters`; what PEFT would map elsewhere is refused, naming it)."""
    from core.engine.lora import LoraError, save_peft_adapter  # MindSpore: only on this path (see the docstring)
    model, state = load_trained_model(folder)
    lora = state["lora"]
    try:
        save_peft_adapter(model, out, state["base_model"]["path"], lora["rank"], lora["alpha"], lora["dropout"],
                          lora["target_modules"])
    except LoraError as exc:
        raise ExportError(said_of(exc)) from exc


def _module_prefix(state: dict) -> str | None:
    """Where transformers keeps the decoder for the base's architecture (FamilySpec.wrapped), from
    its config.json alone (the weights are not read)."""
    base = Path(state["base_model"]["path"])
    if not (base / "config.json").is_file():
        return None
    args = read_model_args(base)
    return args.spec.wrapped.get(args.architecture)


# ---- merged --------------------------------------------------------------------------------

def merged_tensor(name: str, info, base: SafetensorsReader, trained: SafetensorsReader, method: str,
                   ours: str, scaling: float, dtype: str):
    """A reader of one output tensor (called when its bytes are due): the base's tensor `name` with the
    checkpoint's training folded in (core.engine.gguf_run reads the merged model through it too)."""
    def read():
        if method == FULL and ours in trained.tensors:
            values = to_float32(trained.read(ours, raw=True), trained.tensors[ours].dtype)
        else:
            module = ours[: -len(".weight")] if ours.endswith(".weight") else None
            if module is None or f"{module}.lora_a" not in trained.tensors:
                if dtype == info.dtype:
                    return base.read(name, raw=True)  # untouched: the base's own bytes
                values = to_float32(base.read(name, raw=True), info.dtype)
            else:
                lora_a = to_float32(trained.read(f"{module}.lora_a", raw=True), trained.tensors[f"{module}.lora_a"].dtype)
                lora_b = to_float32(trained.read(f"{module}.lora_b", raw=True), trained.tensors[f"{module}.lora_b"].dtype)
                values = to_float32(base.read(name, raw=True), info.dtype)
                values += np.float32(scaling) * (lora_b @ lora_a)
        return from_float32(values, dtype)
    return read


def write_merged(folder: Path, state: dict, out: Path, dtype: str = "stored") -> None:
    """The base folder again with the training folded in, shard by shard (see the module doc)."""
    if dtype not in EXPORT_DTYPES:
        raise ExportError(Message("export.dtype", py_value=repr(dtype), choices=", ".join(EXPORT_DTYPES)))
    base_dir = base_folder(folder, state)
    args = read_model_args(base_dir)
    key_map = args.spec.key_map
    with SafetensorsReader(folder / WEIGHTS_FILE) as trained:
        reward = REWARD_HEAD in trained.tensors  # a reward model (core.engine.reward_model): a sequence classifier
    if reward and (key_map.convert_out is not None or not args.architecture.endswith("ForCausalLM")):
        raise ExportError(Message("export.reward_layout", architecture=args.architecture))
    if key_map.convert_out is not None:  # stacked tensors (MoE experts): the model-building path
        return _write_merged_through_model(folder, state, out, dtype)
    method = state["method"]
    scaling = state["lora"]["alpha"] / state["lora"]["rank"] if method != FULL else 0.0
    weight_map: dict[str, str] = {}
    written_dtypes: set[str] = set()
    total = 0
    with SafetensorsReader(folder / WEIGHTS_FILE) as trained:
        expected = set(trained.tensors) - {REWARD_HEAD} if method == FULL else set(adapter_modules(trained.tensors))
        used: set[str] = set()
        shards = weight_files(base_dir)
        for shard in shards:
            with SafetensorsReader(shard) as base:
                entries = []
                for name, info in base.tensors.items():
                    ours = key_map.our_name(name)
                    if (key_map.is_ignored(name) and not key_map.is_passthrough(name)) or (
                            method == FULL and args.tie_word_embeddings and ours == "lm_head.weight"
                            and ours not in trained.tensors) or (reward and ours == "lm_head.weight"):
                        continue  # not the model's (rotary buffers), a stored copy of the tied embedding, or
                        # the LM head of a reward model (a sequence classifier has none)
                    if key_map.is_passthrough(name):  # the checkpoint's, not ours (a vision tower): as stored
                        entries.append(TensorEntry(name, info.shape, info.dtype, lambda n=name: base.read(n, raw=True)))
                        weight_map[name] = shard.name
                        continue
                    used.add(ours if method == FULL else ours.removesuffix(".weight"))
                    target = info.dtype if dtype == "stored" or info.dtype not in FLOAT_DTYPES else dtype
                    if info.dtype in FLOAT_DTYPES:
                        written_dtypes.add(target)
                    entries.append(TensorEntry(name, info.shape, target, merged_tensor(
                        name, info, base, trained, method, ours, scaling, target)))
                    weight_map[name] = shard.name
                if reward and shard == shards[-1]:
                    entries.append(_head_entry(trained, dtype, written_dtypes))
                    weight_map[REWARD_HEAD] = shard.name
                write_file(out / shard.name, entries, metadata={"format": "pt"})
                total += sum(entry.nbytes for entry in entries)
        unused = sorted(expected - used)
        if unused:
            raise ExportError(Message("export.unused_tensor", file=str(folder / WEIGHTS_FILE), name=unused[0],
                                      base=str(base_dir)))
    if (base_dir / INDEX_NAME).is_file():
        index = {"metadata": {"total_size": total}, "weight_map": weight_map}
        (out / INDEX_NAME).write_text(json.dumps(index, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    config = json.loads((base_dir / "config.json").read_text(encoding="utf-8"))
    if dtype != "stored" or "dtype" not in config and "torch_dtype" not in config:
        config.pop("torch_dtype", None)
        config["dtype"] = dtype if dtype != "stored" else (sorted(written_dtypes) or ["float32"])[0]
    if reward:
        config = sequence_classifier_config(config, base_dir)
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True), encoding="utf-8")
    copy_tokenizer_files(base_dir, out)


def _head_entry(trained: SafetensorsReader, dtype: str, written_dtypes: set[str]) -> TensorEntry:
    """A reward model's value head as the merged folder's `score.weight`, in the dtype of the rest."""
    info = trained.tensors[REWARD_HEAD]
    target = dtype if dtype != "stored" else (sorted(written_dtypes) or ["float32"])[0]
    return TensorEntry(REWARD_HEAD, info.shape, target, lambda: from_float32(
        to_float32(trained.read(REWARD_HEAD, raw=True), info.dtype), target))


def sequence_classifier_config(config: dict, base_dir: Path) -> dict:
    """A causal LM's config.json as transformers' sequence classifier with one label (a reward
    model): XxxForSequenceClassification, id2label of one label, and a pad token id (the classifier
    scores each row's last token that is not padding; the tokenizer's pad, else its EOS, as in
    training, where none is set)."""
    config = dict(config)
    config["architectures"] = [name.removesuffix("ForCausalLM") + "ForSequenceClassification"
                               for name in config.get("architectures") or []]
    config["id2label"], config["label2id"] = {"0": "LABEL_0"}, {"LABEL_0": 0}
    if config.get("pad_token_id") is None:
        config["pad_token_id"] = Tokenizer.from_dir(base_dir).pad_token_id
    return config


def _write_merged_through_model(folder: Path, state: dict, out: Path, dtype: str) -> None:
    """Families whose key map converts tensors (MoE experts stacked): build the model, merge, and
    write one float32 file (core.engine.checkpoint.save_hf_folder)."""
    if dtype not in ("stored", "float32"):
        raise ExportError(Message("export.float32_only", dtype=dtype))
    from core.engine.checkpoint import save_hf_folder  # MindSpore: only on the model-building paths
    from core.engine.lora import merge_lora
    model, state = load_trained_model(folder)
    if state["method"] == "lora":
        merge_lora(model)
    base = Path(state["base_model"]["path"])
    hf_config = json.loads((base / "config.json").read_text(encoding="utf-8"))
    shutil.rmtree(out)
    save_hf_folder(model, hf_config, out, tokenizer_dir=base)


# ---- the model-building path (MindSpore): the mindspore format and in-process use ----------

def load_trained_model(checkpoint_dir: str | Path):
    """(CausalLM, trainer state): the base model with the checkpoint's trained weights applied
    (LoRA injected, not merged). Imports MindSpore. A reward model's value head: `load_reward_model`."""
    model, state, _ = _load_trained(checkpoint_dir)
    return model, state


def load_reward_model(checkpoint_dir: str | Path):
    """(CausalLM, value head weight (1, hidden) float32, trainer state) of a reward model's checkpoint
    (train.objective reward, core.engine.reward_model); one without the head is an error naming it."""
    model, state, head = _load_trained(checkpoint_dir)
    if head is None:
        raise CheckpointError(Message("reward.no_head", file=str(Path(checkpoint_dir) / WEIGHTS_FILE),
                                      name=REWARD_HEAD))
    return model, head, state


def _load_trained(checkpoint_dir: str | Path):
    # MindSpore: the streamed exports above never load it (the module is imported by them)
    from core.engine.checkpoint import load_hf_model, load_train_checkpoint, set_parameters
    from core.engine.lora import inject_lora, load_lora_state_dict
    weights, _, state = load_train_checkpoint(checkpoint_dir)
    head = weights.pop(REWARD_HEAD, None)  # a reward model's value head, beside the trained weights
    base = base_folder(Path(checkpoint_dir), state)
    model = load_hf_model(base, "float32")
    if state["method"] == "lora":
        lora = state["lora"]
        inject_lora(model, lora["rank"], lora["alpha"], lora["dropout"], lora["target_modules"])
        load_lora_state_dict(model, weights, source=str(checkpoint_dir))
    else:
        params = {p.name: p for p in model.get_parameters()}
        if head is not None and not model.tied:  # a reward model trains no LM head: the base's stays
            params.pop("lm_head.weight", None)
        set_parameters(params, weights, str(checkpoint_dir))
    model.set_train(False)
    return model, state, None if head is None else np.asarray(head, np.float32)


def write_mindspore(folder: Path, out: Path) -> None:
    import mindspore as ms  # MindSpore: only for the mindspore format
    from core.engine.lora import merge_lora
    from mindspore import Tensor
    model, state, head = _load_trained(folder)
    if state["method"] == "lora":
        merge_lora(model)
    params = [{"name": p.name, "data": p} for p in model.get_parameters() if not p.name.endswith(LORA_SUFFIXES)]
    if head is not None:  # a reward model: its value head under transformers' name
        params.append({"name": REWARD_HEAD, "data": Tensor(head)})
    ms.save_checkpoint(params, str(out / "model.ckpt"))
    base = Path(state["base_model"]["path"])
    shutil.copyfile(base / "config.json", out / "config.json")
    copy_tokenizer_files(base, out)


def export_checkpoint(checkpoint_dir: str | Path, fmt: str, out_dir: str | Path, dtype: str = "stored") -> Path:
    """Write one export format of a training checkpoint into `out_dir` (atomically)."""
    if fmt not in FORMATS:
        raise ExportError(Message("export.format", py_value=repr(fmt), choices=", ".join(FORMATS)))
    if dtype not in EXPORT_DTYPES:
        raise ExportError(Message("export.dtype", py_value=repr(dtype), choices=", ".join(EXPORT_DTYPES)))
    if dtype != "stored" and fmt != "merged":
        raise ExportError(Message("export.dtype_merged_only", fmt=fmt))
    folder = checkpoint_folder(checkpoint_dir)
    state = read_state(folder)
    if fmt == "peft" and state["method"] != "lora":
        raise ExportError(Message("export.full_no_adapter"))
    with atomic_folder(out_dir) as tmp:
        if fmt == "peft":
            write_peft(folder, state, tmp)
        elif fmt == "merged":
            write_merged(folder, state, tmp, dtype)
        else:
            write_mindspore(folder, tmp)
        (tmp / "mindtune_export.json").write_text(json.dumps({
            "format": fmt, "step": state["step"], "method": state["method"], "base_model": state["base_model"],
            "checkpoint": str(folder), **({"dtype": dtype} if fmt == "merged" else {})}, indent=1), encoding="utf-8")
    return Path(out_dir)


def zip_folder(folder: str | Path, target: str | Path) -> Path:
    """`folder` zipped into `target` (its files under the folder's name), written atomically.
    Weights are stored, not deflated (16/32-bit floats barely compress, and deflating a 1 GB model
    takes longer than the export)."""
    folder, target = Path(folder), Path(target)
    with atomic_open(target, "wb") as handle, \
            zipfile.ZipFile(handle, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                stored = path.suffix in (".safetensors", ".ckpt")
                archive.write(path, Path(folder.name) / path.relative_to(folder),
                              compress_type=zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED)
    return target


def pointed_step(run: RunDir, which: str) -> int:
    """The step `checkpoints/<which>` (best or last) names; an error when it names none."""
    if which not in POINTERS:
        raise ExportError(Message("export.which", py_value=repr(which), or_choices=" or ".join(repr(p) for p in POINTERS)))
    step = run.checkpoint_step(which)
    if step is None:
        raise ExportError(Message("export.no_pointer", folder=str(run.path), which=which))
    return step


def export_run(run_dir: str | Path, which: str = "best", fmt: str = "peft", make_zip: bool = False,
               dtype: str = "stored") -> Path:
    """Export `runs/<id>/checkpoints/<which>` into `runs/<id>/export/` and return the result path."""
    run = RunDir(run_dir)
    step = pointed_step(run, which)
    out_path = run.export_path(which, step, fmt)
    if dtype != "stored":
        out_path = out_path.with_name(f"{out_path.name}-{dtype}")
    out = export_checkpoint(run.checkpoint(step), fmt, out_path, dtype)
    return zip_folder(out, out.with_name(out.name + ".zip")) if make_zip else out  # = RunDir.export_zip
