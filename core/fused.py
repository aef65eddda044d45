"""Fused CPU kernels: `core/kernels/*.cc` built with the machine's C++ compiler into one library
and run as MindSpore `ops.Custom` "aot" kernels with hand-written backwards.

- attention.cc: a layer's causal attention core (rotary embedding, scores, mask, softmax, weighted
  sum). Composed of MindSpore ops it makes (B, heads, T, T) tensors and runs ~10 passes over them;
  the kernel keeps a head's scores in the cache, skips the causally masked half and leaves nothing
  of that size between forward and backward. It reads q, k, v in the projections' (B, T, heads, D)
  layout, so the graph has no head transposes (25M model: 1,901 -> 1,289 MB peak for LoRA).
  Forward + backward of one layer at batch 8 × 256: demo shape (8 heads, 4 kv heads, head dim 32)
  71-103 ms -> 23-30 ms; 25M shape (8 heads, dim 64) 73-121 ms -> 39-48 ms (PyTorch's fused
  SDPA: 33 and 59 ms).
- rmsnorm.cc: RMSNorm in one pass forward and one backward. Composed, each norm broadcast its
  scale and weight to (rows, hidden) and reduced them back in the gradient, on MindSpore CPU
  kernels that move ~1 GB/s: a demo full fine-tuning step 713 -> 627 ms.
- swiglu.cc: the MLP's gate silu(g)·u in one pass each way (composed: a Sigmoid and two Muls
  forward, a SigmoidGrad and four Muls backward).
- cross_entropy.cc: the causal-LM loss per row (log-sum-exp, target's log-probability) and its
  gradient softmax − one-hot in one pass each; composed it made five (rows, vocab) tensors. Loss
  forward + backward at batch 8 × 256, vocabulary 8192: 208 -> 22 ms.

`enable(model)` switches a model's full-sequence attention (training, evaluation, a prompt's
prefill), its norms, its MLP gates and its training/evaluation loss to the kernels; decoding steps
with a KV cache keep the composed ops. It builds the library once per machine into the kernel cache
(`MINDTUNE_KERNEL_CACHE`, default ~/.cache/mindtune/kernels; the file name carries a hash of the
sources, compiler, flags, CPU features and MindSpore's library folder, and is written under a
temporary name first) and returns why not when it cannot: not a CPU, float16 weights or AMP, no
compiler, a failed build, an unwritable cache, or `MINDTUNE_FUSED_KERNELS=0` in the environment.
Then the composed ops run.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from core.atomic import atomic_path

KERNELS = Path(__file__).resolve().parent / "kernels"
SOURCES = tuple(KERNELS / f"{name}.cc" for name in ("attention", "rmsnorm", "cross_entropy", "swiglu", "common"))
HEADERS = (KERNELS / "common.h",)
# -ffp-contract=off: no fused multiply-adds, so the rotary embedding rounds as MindSpore's separate
# Mul and Add kernels do (with FMAs the demo run's trajectory drifted: val ppl 3.06 -> 3.02)
FLAGS = ("-O3", "-march=native", "-ffast-math", "-ffp-contract=off", "-fPIC", "-shared", "-std=c++17", "-pthread")
DNNL = "libdnnl.so.3"  # oneDNN, shipped in mindspore/lib: the kernel's sgemm
BUILD_TIMEOUT_S = 120
ENV_SWITCH = "MINDTUNE_FUSED_KERNELS"
ENV_CACHE = "MINDTUNE_KERNEL_CACHE"


class KernelUnavailable(RuntimeError):
    """Why the fused kernel cannot run here (the message says so to the user)."""


@dataclass(frozen=True)
class Kernel:
    path: Path
    seconds: float  # build time; 0 when it came from the cache


def _mindspore_lib() -> Path:
    import importlib.util
    spec = importlib.util.find_spec("mindspore")
    if spec is None or spec.origin is None:
        raise KernelUnavailable("mindspore is not installed")
    lib = Path(spec.origin).parent / "lib"
    if not (lib / DNNL).exists():
        raise KernelUnavailable(f"{lib / DNNL} not found (the kernel links MindSpore's oneDNN)")
    return lib


def _compiler() -> str:
    cxx = os.environ.get("CXX") or "g++"
    found = shutil.which(cxx)
    if found is None:
        raise KernelUnavailable(f"no C++ compiler ({cxx!r} not on PATH; install g++ or set CXX)")
    return found


def _cpu_fingerprint() -> str:
    """-march=native code runs only on CPUs with the same features: key the cache by them."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return line
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cache_dir() -> Path:
    return Path(os.environ.get(ENV_CACHE) or Path.home() / ".cache" / "mindtune" / "kernels")


def build() -> Kernel:
    """The kernels' shared library, built if this machine has none yet. Raises KernelUnavailable."""
    lib, cxx = _mindspore_lib(), _compiler()
    try:
        version = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise KernelUnavailable(f"{cxx} --version failed: {exc}") from exc
    texts = [path.read_text() for path in SOURCES + HEADERS]
    material = "\0".join([*texts, version, " ".join(FLAGS), _cpu_fingerprint(), str(lib)])
    key = hashlib.sha256(material.encode()).hexdigest()[:16]
    target = cache_dir() / f"kernels-{key}.so"
    if target.exists():
        return Kernel(target, 0.0)
    start = time.perf_counter()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        # complete or absent: a concurrent worker may build the same file
        with atomic_path(target, mode=0o755) as tmp:
            argv = [cxx, *FLAGS, "-o", str(tmp), *map(str, SOURCES), f"-L{lib}", f"-l:{DNNL}",
                    f"-Wl,-rpath,{lib}"]
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
            if proc.returncode != 0:
                raise KernelUnavailable(f"building {', '.join(s.name for s in SOURCES)} failed ({' '.join(argv[:2])} ...): "
                                        f"{proc.stderr.strip()[-800:]}")
    except subprocess.TimeoutExpired as exc:
        raise KernelUnavailable(f"building the kernels took over {BUILD_TIMEOUT_S} s") from exc
    except OSError as exc:
        raise KernelUnavailable(f"cannot write the kernel cache {target.parent} ({exc.strerror}); "
                                f"set {ENV_CACHE} to a writable folder") from exc
    _prune(target)
    return Kernel(target, time.perf_counter() - start)


STALE_DAYS = 30


def _prune(keep: Path) -> None:
    """After a build, drop the cache's libraries that earlier sources built: those of the old
    attention-only naming, and others not rebuilt for STALE_DAYS (a library in use by another
    installation is rebuilt in seconds if it was one of them; a loaded one stays mapped)."""
    cutoff = time.time() - STALE_DAYS * 86400
    for path in keep.parent.glob("*.so"):
        if path == keep or not path.name.startswith(("attention-", "kernels-")):
            continue
        try:
            if path.name.startswith("attention-") or path.stat().st_mtime < cutoff:
                path.unlink()
        except OSError:
            pass  # another process removed it first, or the folder is read-only: nothing lost


def set_threads(kernel: Kernel, threads: int) -> None:
    """Threads per kernel call (0: the CPUs this process may run on). The handle is the one
    MindSpore loads the kernels from (dlopen returns the same library)."""
    ctypes.CDLL(str(kernel.path)).mindtune_set_threads(int(threads))


def _aot(kernel: Kernel, symbol: str, out_shape, outputs: int, bprop=None):
    """The library's function `mindtune_<symbol>` as a MindSpore "aot" op with `outputs` float32
    outputs (one: a tensor, more: a tuple) and, for a forward, its hand-written `bprop`."""
    import mindspore as ms
    from mindspore import ops
    dtypes = ms.float32 if outputs == 1 else (ms.float32,) * outputs
    return ops.Custom(f"{kernel.path}:mindtune_{symbol}", out_shape=out_shape,
                      out_dtype=lambda *inputs: dtypes, func_type="aot", bprop=bprop)


class FusedAttention:
    """The forward and backward kernels as MindSpore ops. Calling it with q (B, T, H, D), k and v
    (B, T, KV, D) before rotary embedding (the projections' outputs, reshaped, not transposed), an
    additive float32 mask (B|1, 1|H, T, T) and the RoPE tables cos, sin (B|1, 1, T, D) returns the
    attention output (B, T, H, D) and the rotated keys (B, T, KV, D); gradients flow to q, k and v
    (none to the mask or the tables)."""

    def __init__(self, kernel: Kernel):
        from mindspore import ops
        backward = _aot(kernel, "attention_backward",
                        lambda q, k, v, mask, cos, sin, out, lse, dout, dkey: (q, k, v), 3)
        zeros_like = ops.ZerosLike()

        def bprop(q, k, v, mask, cos, sin, out, dout):
            dq, dk, dv = backward(q, k, v, mask, cos, sin, out[0], out[1], dout[0], dout[2])
            return dq, dk, dv, zeros_like(mask), zeros_like(cos), zeros_like(sin)

        self.op = _aot(kernel, "attention_forward", lambda q, k, v, mask, cos, sin: (q, [q[0], q[2], q[1]], k), 3,
                       bprop)

    def __call__(self, q, k, v, mask, cos, sin):
        out, _, key = self.op(q, k, v, mask, cos, sin)
        return out, key


class FusedRMSNorm:
    """RMSNorm's forward and backward kernels (core/kernels/rmsnorm.cc) as one MindSpore op:
    called with x (..., h), the weight (h) and eps (1,) it returns y and 1/rms per row; gradients
    flow to x and the weight."""

    def __init__(self, kernel: Kernel):
        from mindspore import ops
        backward = _aot(kernel, "rmsnorm_backward", lambda x, w, r, dy: (x, w), 2)
        zeros_like = ops.ZerosLike()

        def bprop(x, w, eps, out, dout):
            dx, dw = backward(x, w, out[1], dout[0])
            return dx, dw, zeros_like(eps)

        self.op = _aot(kernel, "rmsnorm_forward", lambda x, w, eps: (x, x[:-1]), 2, bprop)


class FusedCrossEntropy:
    """The cross-entropy kernels (core/kernels/cross_entropy.cc) as one MindSpore op: called with
    logits (..., V) float32 and int32 targets (...) (below 0: ignored) it returns each row's
    negative log-likelihood (0 where ignored) and log-sum-exp; the gradient flows to the logits."""

    def __init__(self, kernel: Kernel):
        from mindspore import ops
        backward = _aot(kernel, "cross_entropy_backward", lambda x, t, lse, dnll: x, 1)
        zeros_like = ops.ZerosLike()

        def bprop(x, targets, out, dout):
            return backward(x, targets, out[1], dout[0]), zeros_like(targets)

        self.op = _aot(kernel, "cross_entropy_forward", lambda x, t: (t, t), 2, bprop)


class FusedSwiGLU:
    """The SwiGLU gate's kernels (core/kernels/swiglu.cc) as one MindSpore op: called with the gate
    and up projections (..., intermediate) it returns silu(gate) · up; gradients flow to both."""

    def __init__(self, kernel: Kernel):
        backward = _aot(kernel, "swiglu_backward", lambda g, u, dy: (g, u), 2)

        def bprop(g, u, out, dout):
            return backward(g, u, dout)

        self.op = _aot(kernel, "swiglu_forward", lambda g, u: g, 1, bprop)


def switched_off() -> bool:
    return os.environ.get(ENV_SWITCH, "1").strip().lower() in ("0", "false", "off", "no")


def expected(device: str, dtype: str, amp_level: str) -> bool:
    """Whether a worker for such a run will use the fused kernels, judged without importing MindSpore
    (core.memory's estimate): the CPU, float32 weights and compute, the switch on, a C++ compiler."""
    if switched_off() or device != "cpu" or dtype != "float32" or amp_level != "O0":
        return False
    try:
        _compiler()
    except KernelUnavailable:
        return False
    return True


def enable(model, threads: int | None = None, amp_level: str = "O0") -> str:
    """Route `model`'s full-sequence attention, its norms and its loss (`core.train_step.loss_cell`)
    through the fused kernels. Returns "fused", or "composed: <why>" when they cannot be used here
    (the model is left unchanged). `threads`: each kernel's threads (a data-parallel worker's share)."""
    import mindspore as ms
    if switched_off():
        return f"composed: {ENV_SWITCH}=0"
    if amp_level != "O0":
        return f"composed: AMP {amp_level} computes in float16, the fused kernels in float32"
    if ms.get_context("device_target") != "CPU":
        return f"composed: the fused kernels are for the CPU, not {ms.get_context('device_target')}"
    if model.param_dtype != ms.float32:
        return "composed: the fused kernels compute in float32 and the model's weights are not"
    try:
        kernel = build()
    except KernelUnavailable as exc:
        return f"composed: {exc}"
    if threads:
        set_threads(kernel, threads)
    attention, norm, gate = FusedAttention(kernel), FusedRMSNorm(kernel).op, FusedSwiGLU(kernel).op
    for layer in model.model.layers:
        layer.self_attn.fused = attention.op
        layer.input_layernorm.fused = layer.post_attention_layernorm.fused = norm
        layer.mlp.fused = gate
    model.model.norm.fused = norm
    model.fused_loss = FusedCrossEntropy(kernel).op
    model.fused_attention = True
    return "fused"
