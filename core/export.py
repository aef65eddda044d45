"""Export a run's checkpoint for download: a PEFT LoRA adapter, a merged Hugging Face model
folder, or a MindSpore `.ckpt`; each also as a zip.

    python -m core.export --run runs/<id> [--which best|last] --format peft|merged|mindspore [--zip]

Outputs go to `runs/<id>/export/<which>-step-<N>-<format>/` (and `.zip`; `RunDir.export_path`),
written under a temporary name and renamed when complete, so a download never sees half an export.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import zipfile
from pathlib import Path

import mindspore as ms

from core.atomic import atomic_folder, atomic_open
from core.checkpoint import (CheckpointError, copy_tokenizer_files, file_sha256, load_hf_model,
                             load_train_checkpoint, resolve_checkpoint, save_hf_folder, set_parameters,
                             weight_files)
from core.lora import LoraError, inject_lora, load_lora_state_dict, merge_lora, save_peft_adapter
from core.model import CausalLM
from core.rundir import POINTERS, RunDir

FORMATS = ("peft", "merged", "mindspore")


class ExportError(ValueError):
    """An export that cannot be made; the message says why and what would work."""


def load_trained_model(checkpoint_dir: str | Path) -> tuple[CausalLM, dict]:
    """The base model with the checkpoint's trained weights applied (LoRA injected, not merged)."""
    weights, _, state = load_train_checkpoint(checkpoint_dir)
    base = Path(state["base_model"]["path"])
    if not base.is_dir():
        raise ExportError(f"{checkpoint_dir}: base model {base} is gone; the checkpoint needs it.")
    if state["base_model"].get("sha256") and file_sha256(weight_files(base)) != state["base_model"]["sha256"]:
        raise ExportError(f"{base}: its weights changed since training (sha256 differs); "
                          "exporting would combine the adapter with the wrong base.")
    model = load_hf_model(base, "float32")
    if state["method"] == "lora":
        lora = state["lora"]
        inject_lora(model, lora["rank"], lora["alpha"], lora["dropout"], lora["target_modules"])
        load_lora_state_dict(model, weights, source=str(checkpoint_dir))
    else:
        params = {p.name: p for p in model.get_parameters()}
        set_parameters(params, weights, str(checkpoint_dir))
    model.set_train(False)
    return model, state


def export_checkpoint(checkpoint_dir: str | Path, fmt: str, out_dir: str | Path) -> Path:
    """Write one export format of a training checkpoint into `out_dir` (atomically)."""
    if fmt not in FORMATS:
        raise ExportError(f"format {fmt!r} is not supported; use one of {', '.join(FORMATS)}.")
    model, state = load_trained_model(checkpoint_dir)
    base = Path(state["base_model"]["path"])
    if fmt == "peft" and state["method"] != "lora":
        raise ExportError("a full fine-tune has no adapter: export it as 'merged' or 'mindspore'.")
    with atomic_folder(out_dir) as tmp:
        if fmt == "peft":
            lora = state["lora"]
            save_peft_adapter(model, tmp, str(base), lora["rank"], lora["alpha"], lora["dropout"],
                              lora["target_modules"])
        elif fmt == "merged":
            if state["method"] == "lora":
                merge_lora(model)
            hf_config = json.loads((base / "config.json").read_text(encoding="utf-8"))
            save_hf_folder(model, hf_config, tmp, tokenizer_dir=base)
        else:
            if state["method"] == "lora":
                merge_lora(model)
            params = [{"name": p.name, "data": p} for p in model.get_parameters()
                      if not p.name.endswith((".lora_a", ".lora_b"))]
            ms.save_checkpoint(params, str(tmp / "model.ckpt"))
            shutil.copyfile(base / "config.json", tmp / "config.json")
            copy_tokenizer_files(base, tmp)
        (tmp / "mindtune_export.json").write_text(json.dumps({
            "format": fmt, "step": state["step"], "method": state["method"], "base_model": state["base_model"],
            "checkpoint": str(resolve_checkpoint(checkpoint_dir))}, indent=1), encoding="utf-8")
    return Path(out_dir)


def zip_folder(folder: str | Path, target: str | Path) -> Path:
    """`folder` zipped into `target` (its files under the folder's name), written atomically."""
    folder, target = Path(folder), Path(target)
    with atomic_open(target, "wb") as handle, \
            zipfile.ZipFile(handle, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.write(path, Path(folder.name) / path.relative_to(folder))
    return target


def export_run(run_dir: str | Path, which: str = "best", fmt: str = "peft", make_zip: bool = False) -> Path:
    """Export `runs/<id>/checkpoints/<which>` into `runs/<id>/export/` and return the result path."""
    run = RunDir(run_dir)
    if which not in POINTERS:
        raise ExportError(f"--which {which!r}: use {' or '.join(repr(p) for p in POINTERS)}.")
    step = run.checkpoint_step(which)
    if step is None:
        raise ExportError(f"{run.path}: no '{which}' checkpoint yet (checkpoints/{which} is missing).")
    out = export_checkpoint(resolve_checkpoint(run.checkpoint(step)), fmt, run.export_path(which, step, fmt))
    return zip_folder(out, run.export_zip(which, step, fmt)) if make_zip else out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.export", description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, help="run folder, e.g. runs/<id>")
    parser.add_argument("--which", default="best", choices=list(POINTERS))
    parser.add_argument("--format", default="peft", choices=FORMATS)
    parser.add_argument("--zip", action="store_true", help="also write a .zip of the export")
    args = parser.parse_args(argv)
    try:
        path = export_run(args.run, args.which, args.format, args.zip)
    except (ExportError, CheckpointError, LoraError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
