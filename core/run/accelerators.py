"""This machine's GPU and Ascend devices as the vendors' tools describe them, asked before launch
without MindSpore (the console never imports it, and MindSpore reads an Ascend device's memory
only once the device is initialised): `nvidia-smi` for an NVIDIA GPU's total memory, `npu-smi`
for an Ascend NPU's chip and total memory. What a tool does not say stays None with the reason
(`Accelerator.why`), never a guess: the memory estimate then says the device's memory is unknown
before launch, and the worker checks it at setup (core.engine.devices.fit_check).

    nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits    one line per GPU, MiB
    npu-smi info -m                                   NPU ID, Chip ID, Chip Logic ID, Chip Name ("Ascend 910B3")
    npu-smi info -t usages -i <NPU ID>                "HBM Capacity(MB)             : 65536"
"""
from __future__ import annotations

import functools
import re
import shutil
import subprocess
from dataclasses import dataclass

from core.spec.device_paths import soc_name
from core.spec.messages import Message

NVIDIA_SMI, NPU_SMI = "nvidia-smi", "npu-smi"
TIMEOUT_S = 10
_CHIP = re.compile(r"^\s*(\d+)\s+(\d+)\s+\S+\s+Ascend\s*(\S+)", re.MULTILINE)  # npu-smi info -m: a chip's row
_HBM = re.compile(r"HBM\s+Capacity\s*\(MB\)\s*:\s*(\d+)")


@dataclass(frozen=True)
class Accelerator:
    """What the tools said about `device`: the smallest device's total memory in MB (every rank of a
    run must fit on its own), the Ascend chip as MindSpore names its SoC, and why the memory is
    unknown when it is."""
    device: str
    memory_mb: float | None = None
    soc: str | None = None
    why: Message | None = None


def _output(argv: list[str], runner) -> str | None:
    try:
        done = runner(argv, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def gpu(runner=subprocess.run, which=shutil.which) -> Accelerator:
    """The NVIDIA GPUs' smallest total memory, from nvidia-smi."""
    tool = which(NVIDIA_SMI)
    if tool is None:
        return Accelerator("gpu", why=Message("memory.smi_missing", smi=NVIDIA_SMI))
    out = _output([tool, "--query-gpu=memory.total", "--format=csv,noheader,nounits"], runner) or ""
    totals = [float(line) for line in out.split() if re.fullmatch(r"\d+(\.\d+)?", line)]
    if not totals:
        return Accelerator("gpu", why=Message("memory.smi_silent", smi=NVIDIA_SMI))
    return Accelerator("gpu", memory_mb=min(totals))


def ascend(runner=subprocess.run, which=shutil.which) -> Accelerator:
    """The Ascend NPUs' chip (the first one's; a machine has one kind) and smallest HBM capacity, from
    npu-smi."""
    tool = which(NPU_SMI)
    if tool is None:
        return Accelerator("ascend", why=Message("memory.smi_missing", smi=NPU_SMI))
    chips = _CHIP.findall(_output([tool, "info", "-m"], runner) or "")
    soc = soc_name(chips[0][2]) if chips else None
    totals = []
    for npu in sorted({npu for npu, _, _ in chips}, key=int):
        found = _HBM.search(_output([tool, "info", "-t", "usages", "-i", npu], runner) or "")
        if found and int(found.group(1)) > 0:
            totals.append(float(found.group(1)))
    if not totals:
        return Accelerator("ascend", soc=soc, why=Message("memory.smi_silent", smi=NPU_SMI))
    return Accelerator("ascend", memory_mb=min(totals), soc=soc)


@functools.cache
def ask(device: str) -> Accelerator:
    """What this machine's tools say about `device` (cached: the hardware does not change while the
    console runs); the CPU: nothing to ask (core.spec.memory reads the RAM)."""
    if device == "gpu":
        return gpu()
    if device == "ascend":
        return ascend()
    return Accelerator(device)

