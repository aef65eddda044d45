"""What this machine can train on, found without importing MindSpore.

The console must not import MindSpore, so accelerators are detected the way an administrator would:
`nvidia-smi -L` for NVIDIA GPUs and the `/dev/davinci<N>` device files for Ascend NPUs; their memory
and an NPU's chip come from core.run.accelerators (nvidia-smi, npu-smi), and the device line says
the chip's attention by the rule the worker and the memory estimate follow. The answer only guides
the form (worker counts, which dtypes to offer); the worker checks for real.
"""
from __future__ import annotations

import functools
import glob
import os
import re
import shutil
import subprocess
from dataclasses import dataclass

import core.run.accelerators as accelerators
from core.spec.device_paths import flash_chip

from app.i18n import memory_note, text

DEVICES = ("cpu", "gpu", "ascend")


@dataclass(frozen=True)
class DeviceInfo:
    """One MindSpore device target: whether it was found, how many workers it allows, what it computes in."""
    name: str
    found: bool
    count: int
    compute_dtypes: tuple[str, ...]
    note: str


def _nvidia_gpus() -> int:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return 0
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=5, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return len(re.findall(r"^GPU \d+", out, flags=re.MULTILINE))


def _ascend_npus() -> int:
    return len(glob.glob("/dev/davinci[0-9]*"))


@functools.cache
def detect() -> dict[str, DeviceInfo]:
    """Every device target with what was found (cached: hardware does not change while we run)."""
    cores = os.cpu_count() or 1
    gpus, npus = _nvidia_gpus(), _ascend_npus()
    return {
        "cpu": DeviceInfo("cpu", True, cores, ("float16",), _note("cpu", True, cores)),
        "gpu": DeviceInfo("gpu", gpus > 0, gpus, ("float16", "bfloat16"), _note("gpu", gpus > 0, gpus)),
        "ascend": DeviceInfo("ascend", npus > 0, npus, ("float16", "bfloat16"), _note("ascend", npus > 0, npus)),
    }


def _note(device: str, found: bool, count: int, lang: str = "en") -> str:
    key = {"cpu": "device.cpu", "gpu": "device.gpu", "ascend": "device.ascend"}[device]
    return text(key if found or device == "cpu" else key.replace(".", ".no_"), lang).format(n=count)


def device_note(device: str, lang: str = "en") -> str:
    """What was found for `device`, in `lang` ('' for an unknown device); for a GPU or Ascend device
    found here also its memory and, on Ascend, its chip and the attention it runs
    (core.run.accelerators asks nvidia-smi / npu-smi)."""
    info = detect().get(device)
    if info is None:
        return ""
    note = _note(device, info.found, info.count, lang)
    if info.found and device != "cpu":
        note += accelerator_note(accelerators.ask(device), lang)
    return note


def accelerator_note(found: accelerators.Accelerator, lang: str = "en") -> str:
    """The chip's attention (Ascend: `core.spec.device_paths.flash_chip`, the rule the worker and the
    memory estimate follow) and the device's memory, or why it is unknown before launch."""
    note = ""
    if found.device == "ascend":
        chip = flash_chip(found.soc)
        key = {True: "device.ascend_flash", False: "device.ascend_composed", None: "device.ascend_chip_unknown"}[chip]
        note += text(key, lang).format(soc=found.soc)
    if found.memory_mb is not None:
        return note + text("device.memory", lang).format(mb=f"{found.memory_mb:,.0f}")
    return note + text("device.memory_unknown", lang).format(why=memory_note(found.why, lang) if found.why else "-")


def max_workers(device: str) -> int:
    """The largest data-parallel width the form offers for `device` (at least 1)."""
    info = detect().get(device)
    return max(1, info.count if info else 1)


def supports_dtype(device: str, dtype: str) -> bool:
    info = detect().get(device)
    return info is not None and dtype in info.compute_dtypes


def device_choices(lang: str = "en") -> list[tuple[str, str]]:
    """(label, value) pairs for the device dropdown; devices not found are still offered, marked."""
    return [(text("device.found" if d.found else "device.not_found", lang).format(name=d.name, n=d.count), d.name)
            for d in detect().values()]


def dtype_choices(device: str, lang: str = "en") -> list[tuple[str, str]]:
    """(label, value) pairs for the compute dtype; an unsupported one is kept but marked."""
    marked = text("device.dtype_not_on", lang)
    return [(dtype if supports_dtype(device, dtype) else marked.format(dtype=dtype, device=device), dtype)
            for dtype in ("float16", "bfloat16")]
