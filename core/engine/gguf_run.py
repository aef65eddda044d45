"""A run's checkpoint to llama.cpp and Ollama: the GGUF file (f16, bf16, q8_0, q4_k_m), the LoRA adapter
as a GGUF adapter, and an Ollama zip (the GGUF and a Modelfile), each checked by reloading it with
llama.cpp (core.engine.gguf_check) before it takes its final name.

    export/<which>-step-<N>-<quant>.gguf              the model, merged; <file>.check.json beside it
    export/<which>-step-<N>-lora.gguf                 the adapter, for base-<quant>... below
    export/base-f16.gguf                              the base model the adapter goes on
    export/<which>-step-<N>-ollama-<quant>.zip        <name>.gguf + Modelfile

The order of work: everything that can refuse does so first (the family, the tokenizer, the chat
template for Ollama, llama-cpp-python present, a complete and verified checkpoint, room on the
disk); then the GGUF is written under a temporary name from the base and the checkpoint merged
tensor by tensor in float32 (`MergedSource`; MoE families through a merged folder), never holding
more than a tensor or two, reloaded and checked. A file that passes is renamed to its final name; one that fails is kept as
`<name>.failed.gguf` with its check, and the final name (and any earlier good file under it) is not
touched. A checkpoint the run removes while it is read (a running run's retention) is named.
"""
from __future__ import annotations

import json
import os
import shutil
import zipfile
from pathlib import Path

import numpy as np

from core.data.tokenizer import Tokenizer
from core.engine.export import (ExportError, base_folder, checkpoint_folder, load_trained_model, pointed_step,
                                read_state)
from core.engine.gguf_check import check_gguf, quantize_with_llama_cpp, round_like_file, _llama_cpp
from core.engine.lora import merge_lora
from core.engine.gguf_export import GGUF_QUANTS, GgufError, gguf_problem, window_dropped, write_gguf, write_lora_gguf
from core.engine.gguf_merge import write_checkpoint_gguf
from core.engine.ollama import TemplateError, modelfile_for
from core.run.atomic import atomic_open, atomic_write, durable_rename
from core.run.gguf_files import (BASE_NAME, check_path, failed_path, gguf_path, is_good, lora_path,
                                  ollama_zip_path, read_check)
from core.run.rundir import RunDir
from core.spec.messages import Message
from core.spec.model_args import read_model_args
from core.weights.safetensors_io import SafetensorsReader, to_float32


def _resolve(run_dir, which: str) -> tuple[RunDir, int, Path, dict]:
    run = RunDir(run_dir)
    step = pointed_step(run, which)
    folder = checkpoint_folder(run.checkpoint(step))
    return run, step, folder, read_state(folder)


def _refuse_early(folder: Path, state: dict, quant: str) -> Path:
    """Everything that can refuse, before any work; returns the base model folder."""
    if quant not in GGUF_QUANTS:
        raise GgufError(Message("gguf.quant", quant=quant, choices=", ".join(GGUF_QUANTS)))
    base = base_folder(folder, state)
    problem = gguf_problem(base)
    if problem is not None:
        raise GgufError(problem)
    args = read_model_args(base)
    seq_len = ((state.get("config") or {}).get("data") or {}).get("max_seq_len")
    if window_dropped(args) and seq_len and args.sliding_window < seq_len:
        # trained with a window shorter than its sequences: llama.cpp would attend past it
        raise GgufError(Message("gguf.window_too_short", window=args.sliding_window, seq_len=seq_len,
                                family=args.family))
    _llama_cpp()  # the check needs it: say so now, not after the file is written
    return base


class _Work:
    """A temporary folder in export/ for the merged weights and the file being written; removed at the end."""

    def __init__(self, run: RunDir, tag: str):
        run.export_dir.mkdir(parents=True, exist_ok=True)
        self.path = run.export_dir / f".tmp-{tag}-{os.getpid()}"
        shutil.rmtree(self.path, ignore_errors=True)
        self.path.mkdir()

    def __enter__(self) -> Path:
        return self.path

    def __exit__(self, *exc) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def _our_model(folder: Path, state: dict, round_base: str | None = None):
    """The checkpoint in our engine, its adapter merged (`round_base`: the base's matrices rounded as a file
    of that type stores them first, the adapter added after in float32: the base file + adapter file)."""
    model, _ = load_trained_model(folder)
    if round_base is not None:
        round_like_file(model, round_base)
    if state["method"] == "lora":
        merge_lora(model)
    return model


def _tokenizer_flags(tokenizer: Tokenizer) -> tuple[bool, bool]:
    """Whether our tokenizer adds BOS / EOS to a plain encode (said outright in the file)."""
    plain, special = tokenizer.encode("a", add_special_tokens=False), tokenizer.encode("a", add_special_tokens=True)
    return special[:1] != plain[:1], special[-1:] != plain[-1:]


def _settle(tmp_file: Path, final: Path, result) -> Path:
    """Write the check; a pass takes the final name, a failure `<name>.failed.gguf` (the final name untouched)."""
    if result.passed:
        result.file = str(final)
        atomic_write(check_path(final), json.dumps(result.to_json(), indent=1) + "\n")
        durable_rename(tmp_file, final)
        failed_path(final).unlink(missing_ok=True)
        check_path(failed_path(final)).unlink(missing_ok=True)
        return final
    failed = failed_path(final)
    result.file = str(failed)
    atomic_write(check_path(failed), json.dumps(result.to_json(), indent=1) + "\n")
    durable_rename(tmp_file, failed)  # a failed file of an earlier try is replaced
    raise GgufError(Message("gguf.check_failed", file=str(failed), reasons="; ".join(result.reasons)))


def export_gguf(run_dir, which: str = "best", quant: str = "f16") -> Path:
    """The run's `which` checkpoint as a checked GGUF file of `quant` (see the module doc); an
    existing good file of the same checkpoint is returned as it is."""
    run, step, folder, state = _resolve(run_dir, which)
    base = _refuse_early(folder, state, quant)
    final = gguf_path(run, which, step, quant)
    if is_good(final):
        return final
    reference = {}  # the f16 file's check: a quantized file's perplexity and greedy answers are held to it
    if quant == "q4_k_m":  # llama.cpp quantizes from the f16 file
        reference = read_check(export_gguf(run_dir, which, "f16")) or {}
    elif quant == "q8_0" and is_good(gguf_path(run, which, step, "f16")):
        reference = read_check(gguf_path(run, which, step, "f16")) or {}
    tokenizer = Tokenizer.from_dir(base)
    notes: list[str] = []
    with _Work(run, f"gguf-{quant}") as work:
        tmp_file = work / final.name
        if quant == "q4_k_m":
            notes += quantize_with_llama_cpp(gguf_path(run, which, step, "f16"), tmp_file)
        else:
            add_bos, add_eos = _tokenizer_flags(tokenizer)
            info = write_checkpoint_gguf(folder, state, base, work, tmp_file, quant, add_bos, add_eos,
                                         name=f"{run.path.name}-{which}-step-{step}",
                                         extra={"mindtune.run": run.path.name, "mindtune.step": str(step)})
            notes += [str(n) for n in info.notes]
            if info.fallbacks:
                notes.append(f"{len(info.fallbacks)} tensors written f16 (rows q8_0 cannot block): "
                             + ", ".join(info.fallbacks[:4]) + ("..." if len(info.fallbacks) > 4 else ""))
        result = check_gguf(tmp_file, quant, lambda: _our_model(folder, state), tokenizer, run.path,
                            reference.get("perplexity"), model_dir=base,
                            reference_answers=reference.get("greedy_answers"))
        result.notes += notes
        return _settle(tmp_file, final, result)


# ---- the LoRA adapter ------------------------------------------------------------------------------

def _adapter_tensors(folder: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    with SafetensorsReader(folder / "weights.safetensors") as weights:
        modules = sorted({n.rsplit(".", 1)[0] for n in weights.tensors if n.endswith((".lora_a", ".lora_b"))})
        return {m: tuple(to_float32(weights.read(f"{m}.{part}", raw=True), weights.tensors[f"{m}.{part}"].dtype)
                         for part in ("lora_a", "lora_b")) for m in modules}


def export_lora_gguf(run_dir, which: str = "best") -> Path:
    """The run's LoRA adapter in llama.cpp's adapter format, checked on the base model's f16 GGUF
    (written beside it as export/base-f16.gguf) against the merged model."""
    run, step, folder, state = _resolve(run_dir, which)
    if state["method"] != "lora":
        raise ExportError(Message("export.full_no_adapter"))
    base = _refuse_early(folder, state, "f16")
    final = lora_path(run, which, step)
    if is_good(final):
        return final
    tokenizer = Tokenizer.from_dir(base)
    base_file = run.export_dir / BASE_NAME
    with _Work(run, "gguf-lora") as work:
        if not base_file.is_file():  # written atomically; checked below with the adapter on it
            add_bos, add_eos = _tokenizer_flags(tokenizer)
            write_gguf(base, base_file, "f16", name=base.name, add_bos=add_bos, add_eos=add_eos)
        tmp_file = work / final.name
        adapter = _adapter_tensors(folder)
        write_lora_gguf(base, adapter, state["lora"]["alpha"], tmp_file, name=f"{run.path.name}-lora")
        result = check_gguf(base_file, "f16", lambda: _our_model(folder, state, round_base="f16"), tokenizer,
                            run.path, lora_path=tmp_file, model_dir=base, rounded=True)
        result.notes.append(f"checked as {base_file.name} + this adapter against the merged model")
        return _settle(tmp_file, final, result)


# ---- Ollama ----------------------------------------------------------------------------------------

def export_ollama(run_dir, which: str = "best", quant: str = "q4_k_m") -> Path:
    """A zip of the checked GGUF of `quant` and a Modelfile (its chat template as Ollama's TEMPLATE,
    the stop tokens, the run's system prompt if it trained with one)."""
    run, step, folder, state = _resolve(run_dir, which)
    base = _refuse_early(folder, state, quant)
    tokenizer = Tokenizer.from_dir(base)
    name = f"{which}-step-{step}-{quant}.gguf"
    eos = read_model_args(base).eos_token_ids
    modelfile = modelfile_for(tokenizer, run.path, name, eos)  # refuses a template Ollama cannot take, before work
    target = ollama_zip_path(run, which, step, quant)
    gguf_file = export_gguf(run_dir, which, quant)
    with atomic_open(target, "wb") as handle, zipfile.ZipFile(handle, "w") as archive:
        folder_name = target.stem
        archive.write(gguf_file, f"{folder_name}/{gguf_file.name}", compress_type=zipfile.ZIP_STORED)
        archive.writestr(f"{folder_name}/Modelfile", modelfile, compress_type=zipfile.ZIP_DEFLATED)
        archive.write(check_path(gguf_file), f"{folder_name}/{check_path(gguf_file).name}")
    return target

