"""Where a run's GGUF exports lie and what their checks said (MindSpore-free: the console reads them to
offer a file only when llama.cpp's reload passed, core.engine.gguf_run writes them).

    export/<which>-step-<N>-<quant>.gguf            the merged model, checked
    export/<which>-step-<N>-<quant>.failed.gguf     one that failed its check (never offered)
    export/<which>-step-<N>-lora.gguf               the LoRA adapter, checked on export/base-f16.gguf
    export/<which>-step-<N>-ollama-<quant>.zip      the checked GGUF + its Modelfile
    <file>.check.json                               core.engine.gguf_check.CheckResult
"""
from __future__ import annotations

import json
from pathlib import Path

from core.run.rundir import RunDir

CHECK_SUFFIX = ".check.json"
FAILED_SUFFIX = ".failed.gguf"
BASE_NAME = "base-f16.gguf"


def gguf_path(run: RunDir, which: str, step: int, quant: str) -> Path:
    return run.export_dir / f"{which}-step-{step}-{quant}.gguf"


def lora_path(run: RunDir, which: str, step: int) -> Path:
    return run.export_dir / f"{which}-step-{step}-lora.gguf"


def ollama_zip_path(run: RunDir, which: str, step: int, quant: str) -> Path:
    return run.export_dir / f"{which}-step-{step}-ollama-{quant}.zip"


def failed_path(path: Path) -> Path:
    return path.with_name(path.stem + FAILED_SUFFIX)


def check_path(path: Path) -> Path:
    return path.with_name(path.name + CHECK_SUFFIX)


def read_check(path: Path) -> dict | None:
    """The check JSON of a GGUF file (None when there is none or it is unreadable)."""
    try:
        check = json.loads(check_path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return check if isinstance(check, dict) else None


def is_good(path: Path) -> bool:
    """A file that exists and whose check passed: the only kind offered for download."""
    check = read_check(path)
    return path.is_file() and bool(check and check.get("passed"))
