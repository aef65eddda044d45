"""Which path a run takes on each device (cpu, gpu, ascend), decided in one place and without
MindSpore, so the console's memory estimate, the worker and the CPU tests (which fake "gpu" or
"ascend") read the same rules. `core.engine.devices` holds the MindSpore side: the device target itself
(`core.engine.devices.target`, the one place a worker reads it), the operators these rules pick, and the
device's own figures.

The rules, and why:

- attention (`attention_path`): on the CPU the fused C++ kernel (`core.engine.fused`) where it compiles;
  on Ascend MindSpore's FlashAttentionScore (`ops.flash_attention_score`, causal by its
  `sparse_mode`, no (B, H, T, T) mask or scores held) when the chip has it (CANN's support table for
  FlashAttentionScore: the Atlas A2 and A3 training products, SoC "ascend910b" and "ascend910_93"
  as MindSpore names them, `FLASH_SOCS`; not the Atlas training series, the 910A, "ascend910", nor
  the inference chips), attention computes in float16/bfloat16 and the head size is a multiple of
  16 up to 512 (mindspore/ops/operations/manually_defined/ops_def.py, flash_attention_score: "D: Head
  size. The value ranges are a multiple of 16, with the max value of 512"), and the layer needs
  nothing the kernel is not given here (no soft-capping, no sliding window, no packed segments);
  otherwise MindSpore's composed ops, with the additive mask kept (B|1, 1, T, T) once per
  distinct window and broadcast by the Add itself, not to (B, H, T, T) (`explicit_broadcasts`),
  and each layer's (B, H, T, T) softmax held for the backward (core.spec.memory counts it). Where
  the chip is not known (the console, which cannot ask MindSpore, when npu-smi does not say) the
  composed path is assumed: the larger memory, and never a kernel the chip may lack.
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
# Ascend SoCs with FlashAttentionScore: Atlas A2 (910B) and A3 (910C) training products, as MindSpore's
# get_ascend_soc_version names them (mindspore/lib/plugin/ascend/custom_compiler/setup.py lists the names)
FLASH_SOCS = ("ascend910b", "ascend910_93")
FLASH_HEAD_DIM_MULTIPLE, FLASH_MAX_HEAD_DIM = 16, 512  # FlashAttentionScore's D


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


def flash_chip(soc: str | None) -> bool | None:
    """Whether an Ascend SoC (MindSpore's name, "ascend910b"; or a chip name such as "Ascend910B3")
    has FlashAttentionScore: True on the Atlas A2/A3 training chips (`FLASH_SOCS`), False on the
    others, None when the chip is not known."""
    name = soc_name(soc)
    if name is None:
        return None
    return name in FLASH_SOCS


def soc_name(chip: str | None) -> str | None:
    """MindSpore's SoC name for a chip as MindSpore or npu-smi say it ("ascend910b", "Ascend910B3",
    "910B3", "Ascend 910_9391", "910A", "Ascend910ProA"), or None when it cannot be read. The 910B
    chips carry a digit after the B ("910B1".."910B4"); the 910A generation's names ("910A",
    "910ProA", "910ProB", "910PremiumA") are all "ascend910"."""
    if not chip:
        return None
    name = "".join(str(chip).lower().split())
    name = name.removeprefix("ascend")
    if name in ("910b", "910_93", "910", "310p", "310b", "310", "950"):  # MindSpore's own names
        return "ascend" + name
    if name.startswith("910b") and name[4:5].isdigit():
        return "ascend910b"
    if name.startswith("910_93") or name.startswith("910c"):
        return "ascend910_93"
    if name.startswith("910"):  # 910A, 910ProA, 910ProB, 910PremiumA
        return "ascend910"
    if name.startswith("310p"):
        return "ascend310p"
    if name.startswith("310b"):
        return "ascend310b"
    return None


def attention_path(device: str, dtype: str, *, head_dim: int, soc: str | None, needs: dict | None = None,
                   packed: bool = False) -> tuple[str, str]:
    """("flash" | "cpu-kernel" | "composed", why) for one layer's full-sequence attention on
    `device`, computing in `dtype`, with heads of `head_dim` and the layer's `kernel_needs()`;
    `soc`: the Ascend chip (MindSpore's SoC name; None: not known, then composed); `packed`: batches
    carry segment ids. "cpu-kernel" means core.engine.fused decides (it may still fall back)."""
    needs = needs or {}
    if device == "cpu":
        return "cpu-kernel", Message("path.cpu_kernel")
    if device == "gpu":
        return "composed", Message("path.gpu_composed")
    chip = flash_chip(soc)
    if chip is False:
        return "composed", Message("path.ascend_chip", soc=soc)
    if dtype not in HALF_DTYPES:
        return "composed", Message("path.ascend_dtype", dtype=dtype)
    if head_dim % FLASH_HEAD_DIM_MULTIPLE or head_dim > FLASH_MAX_HEAD_DIM:
        return "composed", Message("path.ascend_head_dim", head_dim=head_dim)
    unsupported = sorted(k for k in needs if k in ("softcap", "window"))
    if unsupported:
        return "composed", Message("path.ascend_unsupported", needs=", ".join(unsupported))
    if packed:
        return "composed", Message("path.ascend_packed")
    if chip is None:
        return "composed", Message("path.ascend_chip_unknown")
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
