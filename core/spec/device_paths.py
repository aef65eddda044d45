"""Which path a run takes on each device (cpu, gpu, ascend), decided in one place and without
MindSpore, so the console's memory estimate, the worker and the CPU tests (which fake "gpu" or
"ascend") read the same rules. `core.engine.devices` holds the MindSpore side: the device target itself
(`core.engine.devices.target`, the one place a worker reads it), the operators these rules pick, and the
device's own figures.

The rules, and why:

- attention (`attention_path`): on the CPU the fused C++ kernel (`core.engine.fused`) where it compiles;
  on Ascend MindSpore's FlashAttentionScore (`ops.flash_attention_score`, causal by its
  `sparse_mode`, no (B, H, T, T) mask or scores held) when attention computes in float16/bfloat16
  (the kernel's dtypes: mindspore/ops/operations/manually_defined/ops_def.py) and the layer needs
  nothing the kernel is not given here (no soft-capping, no sliding window, no packed segments);
  otherwise MindSpore's composed ops, with the additive mask kept (B|1, 1, T, T) once per
  distinct window and broadcast by the Add itself, not to (B, H, T, T) (`explicit_broadcasts`).
- loss (`loss_path`): the CPU's cross-entropy kernel; on devices a chunked cross-entropy
  (`core.engine.devices.ChunkedHeadLoss`) that runs the LM head and the loss LOSS_CHUNK_TOKENS rows at a
  time, forward and backward, so no (B, T, vocab) logits, softmax or one-hot exists; where the head
  cannot run inside it (a LoRA-adapted or soft-capped head) the logits exist and the chunked loss
  on them (`core.engine.devices.ChunkedLogitsLoss`) builds softmax and one-hot per chunk only.
- MatMul for means and row sums (`matmul_reductions`): a CPU speed workaround (`core.engine.ops`). On
  Ascend the default `precision_mode` may run a float32 MatMul in float16, where a mean of squares
  can overflow, so devices use ReduceMean/ReduceSum (issue 30, item 9); the precision mode itself is
  left as MindSpore sets it.
"""
from __future__ import annotations

import os
import shutil

from core.spec.messages import Message

DEVICES = ("cpu", "gpu", "ascend")
TARGETS = {"cpu": "CPU", "gpu": "GPU", "ascend": "Ascend"}  # MindSpore's device_target names
HALF_DTYPES = ("float16", "bfloat16")
LOSS_CHUNK_TOKENS = 1024  # rows of the chunked loss: (1024, vocab) float32 at a time
# Ascend SoCs without bfloat16 compute (MindSpore's get_ascend_soc_version names them; 910A is "ascend910")
NO_BF16_SOCS = ("ascend910", "ascend310p", "ascend310")


def device_of(target: str) -> str:
    """MindSpore's device_target ("CPU", "GPU", "Ascend") as a config device name."""
    for name, ms_name in TARGETS.items():
        if ms_name.lower() == str(target).lower():
            return name
    raise ValueError(f"unknown device target {target!r}; expected one of {', '.join(TARGETS.values())}")


def explicit_broadcasts(device: str) -> bool:
    """Whether binary ops get their inputs broadcast to full size first (`core.engine.ops.full`): a CPU
    workaround for MindSpore's CPU kernels (16 bytes of indices per output element); on devices it
    would only make (B, H, T, T) copies of the mask."""
    return device == "cpu"


def matmul_reductions(device: str) -> bool:
    """Whether means and row sums run as a MatMul against a constant column (`core.engine.ops`): the CPU
    only (see the module's docstring, item 9)."""
    return device == "cpu"


def attention_dtype(amp_level: str, compute_dtype: str, model_dtype: str) -> str:
    """The dtype attention computes in: AMP O2/O3 cast every cell to the compute dtype; O1 casts the
    projections only and casts back (`core.engine.layers.amp_dense`), so attention stays in the model's dtype."""
    return compute_dtype if amp_level in ("O2", "O3") else model_dtype


def attention_path(device: str, dtype: str, needs: dict | None = None, packed: bool = False) -> tuple[str, str]:
    """("flash" | "cpu-kernel" | "composed", why) for one layer's full-sequence attention on
    `device`, computing in `dtype`, with the layer's `kernel_needs()`; `packed`: batches carry
    segment ids. "cpu-kernel" means core.engine.fused decides (it may still fall back)."""
    needs = needs or {}
    if device == "cpu":
        return "cpu-kernel", Message("path.cpu_kernel")
    if device == "gpu":
        return "composed", Message("path.gpu_composed")
    if dtype not in HALF_DTYPES:
        return "composed", Message("path.ascend_dtype", dtype=dtype)
    unsupported = sorted(k for k in needs if k in ("softcap", "window"))
    if unsupported:
        return "composed", Message("path.ascend_unsupported", needs=", ".join(unsupported))
    if packed:
        return "composed", Message("path.ascend_packed")
    return "flash", Message("path.ascend_flash")


def head_in_loss(device: str, final_softcap: float | None, head_lora: bool, frozen_16bit: bool) -> bool:
    """Whether the LM head runs inside the loss (no logits tensor): on the CPU with 16-bit frozen
    weights (core.engine.fused's head kernel), on devices with the chunked loss; never for a soft-capped
    or LoRA-adapted head."""
    if final_softcap is not None or head_lora:
        return False
    return frozen_16bit if device == "cpu" else True


def loss_path(device: str, final_softcap: float | None, head_lora: bool) -> str:
    """"cpu-kernel" (core.engine.fused decides), "chunked-head" (head and loss in chunks, no logits) or
    "chunked-logits" (logits exist, softmax and one-hot only per chunk)."""
    if device == "cpu":
        return "cpu-kernel"
    return "chunked-head" if head_in_loss(device, final_softcap, head_lora, False) else "chunked-logits"


def peak_over_ranks(device: str, per_rank: list[float]) -> float:
    """The peak memory the Monitor shows for a run's ranks: their sum on the CPU (processes sharing
    one machine's RAM), the largest on devices (one device per rank)."""
    if not per_rank:
        return 0.0
    return float(sum(per_rank)) if device == "cpu" else float(max(per_rank))


def profiler_activities(device: str) -> tuple[str, ...]:
    """MindSpore ProfilerActivity names to record (mindspore/profiler/common/constant.py: CPU, GPU,
    NPU): the host's CPU side always, and the device's kernels off the CPU."""
    return {"cpu": ("CPU",), "gpu": ("CPU", "GPU"), "ascend": ("CPU", "NPU")}[device]


def bf16_problem(device: str, soc: str | None, uses_bf16: bool) -> str | None:
    """Why bf16 cannot run on this device, or None: MindSpore's CPU kernels have no bf16 compute,
    and neither do the Ascend SoCs in NO_BF16_SOCS (910A reports "ascend910")."""
    if not uses_bf16:
        return None
    if device == "cpu":
        return Message("device.cpu_no_bf16")
    if device == "ascend" and soc and soc.lower() in NO_BF16_SOCS:
        return Message("device.soc_no_bf16", soc=soc)
    return None


# ---- the CPU's fused kernels (core.engine.fused), judged without building or loading them ---------------

KERNELS_ENV_SWITCH = "MINDTUNE_FUSED_KERNELS"  # 0 / false / off / no: the composed operators instead


def kernels_switched_off() -> bool:
    return os.environ.get(KERNELS_ENV_SWITCH, "1").strip().lower() in ("0", "false", "off", "no")


def cxx_compiler() -> tuple[str, str | None]:
    """The C++ compiler the kernels are built with: ($CXX or g++, its path or None if not on PATH)."""
    cxx = os.environ.get("CXX") or "g++"
    return cxx, shutil.which(cxx)


def kernels_expected(device: str, dtype: str, amp_level: str) -> bool:
    """Whether a worker for such a run will use the fused kernels, judged without importing MindSpore
    (core.spec.memory's estimate): the CPU, float32 weights and compute, the switch on, a C++ compiler."""
    if kernels_switched_off() or device != "cpu" or dtype != "float32" or amp_level != "O0":
        return False
    return cxx_compiler()[1] is not None
