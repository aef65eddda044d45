"""Fused CPU kernels: `core/engine/kernels/*.cc` built with the machine's C++ compiler into one library
and run as MindSpore `ops.Custom` "aot" kernels with hand-written backwards.

- attention.cc: a layer's causal attention core (rotary embedding, scores, mask, softmax, weighted
  sum). Composed of MindSpore ops it makes (B, heads, T, T) tensors and runs ~10 passes over them;
  the kernel keeps a head's scores in the cache, skips the causally masked half and leaves nothing
  of that size between forward and backward. It reads q, k, v in the projections' (B, T, heads, D)
  layout, so the graph has no head transposes (25M model: 1,901 -> 1,289 MB peak for LoRA).
  Forward + backward of one layer at batch 8 × 256: demo shape (8 heads, 4 kv heads, head dim 32)
  71-103 ms -> 23-30 ms; 25M shape (8 heads, dim 64) 73-121 ms -> 39-48 ms (PyTorch's fused
  SDPA: 33 and 59 ms). Options for the other families (FusedAttention): scale, soft cap, sliding
  window, partial and interleaved rotary, and segment ids for packed rows (key blocks outside a
  window or another sample are skipped).
- rmsnorm.cc: RMSNorm in one pass forward and one backward. Composed, each norm broadcast its
  scale and weight to (rows, hidden) and reduced them back in the gradient, on MindSpore CPU
  kernels that move ~1 GB/s: a demo full fine-tuning step 713 -> 627 ms.
- swiglu.cc: the MLP's gate silu(g)·u in one pass each way (composed: a Sigmoid and two Muls
  forward, a SigmoidGrad and four Muls backward), and GeGLU's gelu_tanh(g)·u (Gemma).
- lora.cc: a LoRA projection's update base + (x·Aᵀ)·(s·B)ᵀ and its gradients, one kernel each way
  instead of eight to ten MindSpore kernels on skinny shapes; for a float32 base weight the base
  product x·Wᵀ and its dy·W run inside the same kernel (`FusedLoRA.with_base`: no base output to
  copy, no AddN of two input gradients; demo LoRA step 0.193-0.207 -> 0.184-0.188 s, 25M 0.97-1.01 ->
  0.89 s, 0.5B shape 4.10-4.35 -> 3.94 s on the Intel machine of docs/performance.md).
- grouped_matmul.cc: a mixture of experts' products (core/engine/moe.py). The token copies a router
  sends to the experts, sorted by expert, form one group of rows per expert; each group is one
  sgemm against its expert's slice of the stacked weights, forward, dx and dW (a second forward
  name serves frozen experts, whose backward skips dW), and LoRA's A and B go through the same
  product. Also the experts' SwiGLU on their fused gate/up output. Composed (no Python loop
  either), every expert runs on every token: one Qwen3-MoE layer of bench/train_step.py (8
  experts, top 2) forward + backward at batch 8 × 256, 3.2-4.8x faster than that (bench/moe_layer.py).
- cross_entropy.cc: the causal-LM loss per row (log-sum-exp, target's log-probability) and its
  gradient softmax − one-hot in one pass each; composed it made five (rows, vocab) tensors. Loss
  forward + backward at batch 8 × 256, vocabulary 8192: 208 -> 22 ms. Optionally with Gemma 2's
  final-logit soft cap inside.

- infer.cc: a plain pre-norm decoder's whole inference forward (embedding, every layer, the final norm
  and the head) in one call, with a key/value cache the library holds between calls
  (`FusedInference`); generation (core.engine.generate: the prompts' prefill and each decoding step)
  and lm-eval's log-likelihoods (core.engine.lm_eval_model) run on it where `inference_problem(model)`
  is None. Composed, a decoding step of the 4-layer demo model launched ~250 MindSpore ops (30-50 ms
  for ~50 MFLOP); one call: ~3 ms. A prefill's attention is attention.cc's; the last layer computes
  only the tokens whose logits are asked for. Demo generation, 8 prompts × 64 tokens: 131 -> 1,147
  tokens/s (bench/eval_generate.py, kernels off / on); lm-eval's local tasks against lm-eval's hf
  backend: docs/performance.md.

`enable(model)` switches a model's full-sequence attention (training, evaluation, a prompt's
prefill), its norms, its MLP gates, its LoRA updates and its training/evaluation loss to the kernels,
and gives it the inference kernel (`model.inference_kernel`, used where `inference_problem` allows). It builds the library once per machine into the kernel cache
(`MINDTUNE_KERNEL_CACHE`, default ~/.cache/mindtune/kernels; the file name carries a hash of the
sources, compiler, flags, CPU features and MindSpore's library folder, and is written under a
temporary name first) and returns why not when it cannot: not a CPU, float16 weights or AMP, no
compiler, a failed build, an unwritable cache, or `MINDTUNE_FUSED_KERNELS=0` in the environment.
Then the composed ops run.
"""
from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import time
import weakref
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from core.run.atomic import atomic_path
from core.spec.device_paths import KERNELS_ENV_SWITCH as ENV_SWITCH, cxx_compiler, kernels_switched_off
# the one re-export left: the tests' kernel skips call `fused.expected(...)` (issue 38 item 4 rewrites those
# lines); everything else imports kernels_expected from core.spec.device_paths
from core.spec.device_paths import kernels_expected as expected  # noqa: F401

KERNELS = Path(__file__).resolve().parent / "kernels"
# every source in core/engine/kernels/ goes into the one library (another engineer's kernel is a new .cc)
SOURCES = tuple(sorted(KERNELS.glob("*.cc")))
HEADERS = tuple(sorted(KERNELS.glob("*.h")))
# -ffp-contract=off: no fused multiply-adds, so the rotary embedding rounds as MindSpore's separate
# Mul and Add kernels do (with FMAs the demo run's trajectory drifted: val ppl 3.06 -> 3.02)
FLAGS = ("-O3", "-march=native", "-ffast-math", "-ffp-contract=off", "-fPIC", "-shared", "-std=c++17", "-pthread")
DNNL = "libdnnl.so.3"  # oneDNN, shipped in mindspore/lib: the kernel's sgemm
BUILD_TIMEOUT_S = 120
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
    cxx, found = cxx_compiler()
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


def build(sources=None, headers=None, cache: Path | None = None) -> Kernel:
    """The kernels' shared library, built if this machine has none yet. Raises KernelUnavailable.
    sources/headers/cache (default: core/engine/kernels/ and the kernel cache) build another set of
    sources the same way, e.g. an earlier commit's kernels for a bit-identity test or a benchmark."""
    sources = SOURCES if sources is None else tuple(sources)
    headers = HEADERS if headers is None else tuple(headers)
    lib, cxx = _mindspore_lib(), _compiler()
    try:
        version = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise KernelUnavailable(f"{cxx} --version failed: {exc}") from exc
    texts = [path.read_text() for path in sources + headers]
    material = "\0".join([*texts, version, " ".join(FLAGS), _cpu_fingerprint(), str(lib)])
    key = hashlib.sha256(material.encode()).hexdigest()[:16]
    target = (cache or cache_dir()) / f"kernels-{key}.so"
    if target.exists():
        return Kernel(target, 0.0)
    start = time.perf_counter()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        # complete or absent: a concurrent worker may build the same file
        with atomic_path(target, mode=0o755) as tmp:
            argv = [cxx, *FLAGS, "-o", str(tmp), *map(str, sources), f"-L{lib}", f"-l:{DNNL}",
                    f"-Wl,-rpath,{lib}"]
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
            if proc.returncode != 0:
                raise KernelUnavailable(f"building {', '.join(s.name for s in sources)} failed ({' '.join(argv[:2])} ...): "
                                        f"{proc.stderr.strip()[-800:]}")
    except subprocess.TimeoutExpired as exc:
        raise KernelUnavailable(f"building the kernels took over {BUILD_TIMEOUT_S} s") from exc
    except OSError as exc:
        raise KernelUnavailable(f"cannot write the kernel cache {target.parent} ({exc.strerror}); "
                                f"set {ENV_CACHE} to a writable folder") from exc
    _prune(target)
    return Kernel(target, time.perf_counter() - start)


def build_revision(commit: str, cache: Path) -> Kernel:
    """The library as the kernel sources of git `commit` build it (core/engine/kernels/*.cc and *.h at that
    commit, this machine's compiler and flags), into `cache`: the baseline of the bit-identity test
    and of bench/fused_kernels.py's old-vs-new timings. Raises KernelUnavailable without git or the commit.
    A commit before the package move (issue 29) has the sources in core/kernels."""
    root = KERNELS.parents[2]
    git = shutil.which("git")
    if git is None:
        raise KernelUnavailable("git is not on PATH")
    for sources in ("core/engine/kernels", "core/kernels"):
        listing = subprocess.run([git, "-C", str(root), "ls-tree", "--name-only", f"{commit}:{sources}"],
                                 capture_output=True, text=True, timeout=60)
        if listing.returncode == 0:
            break
    else:
        raise KernelUnavailable(f"no core/engine/kernels nor core/kernels at {commit} in {root}: "
                                f"{listing.stderr.strip()}")
    folder = cache / f"src-{commit[:12]}"
    folder.mkdir(parents=True, exist_ok=True)
    for name in listing.stdout.split():
        if name.endswith((".cc", ".h")):
            text = subprocess.run([git, "-C", str(root), "show", f"{commit}:{sources}/{name}"], capture_output=True,
                                  text=True, timeout=60, check=True).stdout
            (folder / name).write_text(text)
    return build(sorted(folder.glob("*.cc")), sorted(folder.glob("*.h")), cache)


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


ROTARY_STYLES = ("half", "interleaved")


def attention_options(head_dim: int | None = None, *, scale=None, softcap=None, window=None, rotary_dim=None,
                      rotary_style="half"):
    """The attention kernel's option vector (core/engine/kernels/attention.cc; 0 = off / the default),
    checked: a bad option is one clear error naming it."""
    if scale is not None and not scale > 0:
        raise ValueError(f"attention scale must be > 0, got {scale!r}")
    if softcap is not None and not softcap > 0:
        raise ValueError(f"attention softcap must be > 0 (None: no soft-capping), got {softcap!r}")
    if window is not None and (int(window) != window or window < 1):
        raise ValueError(f"attention window must be a whole number >= 1 (None: no window), got {window!r}")
    if rotary_dim is not None and (int(rotary_dim) != rotary_dim or rotary_dim < 2 or rotary_dim % 2
                                   or (head_dim is not None and rotary_dim > head_dim)):
        raise ValueError(f"rotary_dim must be even and in [2, head_dim{'' if head_dim is None else '=' + str(head_dim)}], "
                         f"got {rotary_dim!r}")
    if rotary_style not in ROTARY_STYLES:
        raise ValueError(f"rotary_style must be one of {', '.join(ROTARY_STYLES)}, got {rotary_style!r}")
    return np.array([scale or 0.0, softcap or 0.0, window or 0, rotary_dim or 0,
                     ROTARY_STYLES.index(rotary_style)], np.float32)


class FusedAttention:
    """The forward and backward kernels as MindSpore ops. `.op(q, k, v, mask, cos, sin,
    segment_ids=None)` with q (B, T, H, D), k and v (B, T, KV, D) before rotary embedding (the
    projections' outputs, reshaped, not transposed), an additive float32 mask (B|1, 1|H, T|1, T)
    (a (…, 1, T) mask is one row of key offsets for every query: key padding) and the RoPE tables
    cos, sin (B|1, 1, T, rotary_dim) returns the attention output (B, T, H, D), the log-sum-exp
    (B, H, T) and the rotated keys (B, T, KV, D); gradients flow to q, k and v (none to the mask,
    the tables or the segment ids). Calling the object itself returns (output, keys).

    Options (each None = today's Llama maths; see core/engine/kernels/attention.cc):
    - scale: the scores' factor (default 1/sqrt(D); Gemma: query_pre_attn_scalar ** -0.5);
    - softcap: c, scores <- c·tanh(scores/c) before the mask (Gemma 2);
    - window: key j visible to query i iff 0 <= i - j < window (Mistral, Gemma); the kernel skips
      the keys outside it, so the cost grows with T·window, not T²;
    - rotary_dim: RoPE on the first rotary_dim dims of each head, the rest passed through (GLM-4,
      Phi-3); the tables are rotary_dim wide, laid out as Llama's cat(freqs, freqs);
    - rotary_style: "half" (Llama's rotate_half) or "interleaved" (pairs 2i, 2i+1 rotated by
      freqs[i]: GLM-4's layout, from the same tables).
    segment_ids (B, T) int32 (sequence packing): query i sees key j only when their ids are equal,
    a block-diagonal causal mask; the kernel skips the key blocks of other samples. Positions that
    restart per sample come in per-row tables (B, 1, T, rotary_dim)."""

    def __init__(self, kernel: Kernel, *, head_dim: int | None = None, scale=None, softcap=None, window=None,
                 rotary_dim=None, rotary_style="half"):
        import mindspore as ms
        from mindspore import Tensor, nn, ops
        # head_dim (optional) bounds rotary_dim here; the kernel checks the tables against the heads
        options = attention_options(head_dim, scale=scale, softcap=softcap, window=window,
                                    rotary_dim=rotary_dim, rotary_style=rotary_style)
        backward = _aot(kernel, "attention_backward", lambda q, k, v, *rest: (q, k, v), 3)
        zeros_like = ops.ZerosLike()

        def bprop(q, k, v, mask, cos, sin, opts, out, dout):
            dq, dk, dv = backward(q, k, v, mask, cos, sin, opts, out[0], out[1], dout[0], dout[2])
            return dq, dk, dv, zeros_like(mask), zeros_like(cos), zeros_like(sin), zeros_like(opts)

        def bprop_packed(q, k, v, mask, cos, sin, opts, seg, out, dout):
            dq, dk, dv = backward(q, k, v, mask, cos, sin, opts, seg, out[0], out[1], dout[0], dout[2])
            return dq, dk, dv, zeros_like(mask), zeros_like(cos), zeros_like(sin), zeros_like(opts), zeros_like(seg)

        out_shape = lambda q, k, v, *rest: (q, [q[0], q[2], q[1]], k)  # noqa: E731
        forward = _aot(kernel, "attention_forward", out_shape, 3, bprop)
        forward_packed = _aot(kernel, "attention_forward", out_shape, 3, bprop_packed)

        class AttentionOp(nn.Cell):
            """The kernel with its options as a constant input (a layer's compiled graph, and
            core.engine.model's layer signature, carry them)."""

            def __init__(self):
                super().__init__()
                self.kernel, self.kernel_packed = forward, forward_packed
                self.options = Tensor(options, ms.float32)

            def construct(self, q, k, v, mask, cos, sin, segment_ids=None):
                if segment_ids is None:
                    return self.kernel(q, k, v, mask, cos, sin, self.options)
                return self.kernel_packed(q, k, v, mask, cos, sin, self.options, segment_ids)

        self.op = AttentionOp()

    def __call__(self, q, k, v, mask, cos, sin, segment_ids=None):
        out, _, key = self.op(q, k, v, mask, cos, sin, segment_ids)
        return out, key


def variants(build_op):
    """factory(**needs) -> build_op(**needs), one op per distinct set of needs (layers that need the
    same share it); a need build_op has no keyword for is raised as LookupError naming it (what
    `CausalLM.use_kernels` expects: that part of the layer then stays composed). build_op takes
    its options as keyword-only arguments."""
    import inspect
    accepted = {name for name, p in inspect.signature(build_op).parameters.items() if p.kind == p.KEYWORD_ONLY}
    built: dict = {}

    def factory(**needs):
        unknown = sorted(set(needs) - accepted)
        if unknown:
            raise LookupError("no kernel variant for " + ", ".join(f"{k}={needs[k]!r}" for k in unknown))
        key = tuple(sorted(needs.items()))
        if key not in built:
            built[key] = build_op(**needs)
        return built[key]

    return factory


def attention_variants(kernel: Kernel):
    """factory(**needs) -> the attention op with those FusedAttention options (see `variants`)."""
    def build_op(*, scale=None, softcap=None, window=None, rotary_dim=None, rotary_style="half"):
        return FusedAttention(kernel, scale=scale, softcap=softcap, window=window, rotary_dim=rotary_dim,
                              rotary_style=rotary_style).op
    return variants(build_op)


def loss_variants(kernel: Kernel):
    """factory(**needs) -> the cross-entropy op (`softcap`: Gemma 2's final-logit soft-cap, applied
    inside the kernel to the logits it is given)."""
    def build_op(*, softcap=None):
        return FusedCrossEntropy(kernel, softcap).op
    return variants(build_op)


def gate_variants(kernel: Kernel):
    """factory(**needs) -> the MLP gate op (`activation`: "silu" default, "gelu_tanh")."""
    def build_op(*, activation="silu"):
        return FusedSwiGLU(kernel, activation).op
    return variants(build_op)


class FusedRMSNorm:
    """RMSNorm's forward and backward kernels (core/engine/kernels/rmsnorm.cc) as one MindSpore op:
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


def _with_constant(op, value: float):
    """op(a, b, c) with c a constant float32 (1,) tensor, as a MindSpore Cell of two inputs (the
    compiled graph, and core.engine.model's layer signature, carry the constant)."""
    import mindspore as ms
    from mindspore import Tensor, nn

    class WithConstant(nn.Cell):
        def __init__(self):
            super().__init__()
            self.kernel, self.constant = op, Tensor([value], ms.float32)

        def construct(self, a, b):
            return self.kernel(a, b, self.constant)

    return WithConstant()


class FusedCrossEntropy:
    """The cross-entropy kernels (core/engine/kernels/cross_entropy.cc) as one MindSpore op: called with
    logits (..., V) float32 and int32 targets (...) (below 0: ignored) it returns each row's
    negative log-likelihood (0 where ignored) and log-sum-exp; the gradient flows to the logits.
    softcap=c (Gemma 2's final_logit_softcapping): the loss of c·tanh(logits/c), capped inside the
    kernel (the lse is the capped logits'); the gradient flows through the cap."""

    def __init__(self, kernel: Kernel, softcap: float | None = None):
        from mindspore import ops
        if softcap is not None and not softcap > 0:
            raise ValueError(f"cross-entropy softcap must be > 0 (None: no soft-capping), got {softcap!r}")
        zeros_like = ops.ZerosLike()
        if softcap is None:
            backward = _aot(kernel, "cross_entropy_backward", lambda x, t, lse, dnll: x, 1)

            def bprop(x, targets, out, dout):
                return backward(x, targets, out[1], dout[0]), zeros_like(targets)

            self.op = _aot(kernel, "cross_entropy_forward", lambda x, t: (t, t), 2, bprop)
            return
        backward = _aot(kernel, "cross_entropy_backward", lambda x, t, cap, lse, dnll: x, 1)

        def bprop_capped(x, targets, cap, out, dout):
            return backward(x, targets, cap, out[1], dout[0]), zeros_like(targets), zeros_like(cap)

        forward = _aot(kernel, "cross_entropy_forward", lambda x, t, cap: (t, t), 2, bprop_capped)
        self.op = _with_constant(forward, softcap)


class FusedTokenEntropy:
    """The entropy of each row's softmax (core/engine/kernels/cross_entropy.cc, mindtune_token_entropy) as a
    MindSpore op with no gradient: called with logits (..., V) float32 and int32 targets (...) it returns
    −Σ p·log p per row (...), 0 where the target is ignored (below 0). One read of the logits, nothing of
    their size made: GRPO's entropy figure (core.engine.grpo) on the logits its loss kernel reads. softcap=c:
    the entropy of c·tanh(logits/c), as FusedCrossEntropy's."""

    def __init__(self, kernel: Kernel, softcap: float | None = None):
        from mindspore import ops
        zeros_like = ops.ZerosLike()

        def no_gradient(x, targets, out, dout):
            return zeros_like(x), zeros_like(targets)

        if softcap is None:
            self.op = _aot(kernel, "token_entropy", lambda x, t: t, 1, no_gradient)
            return

        def no_gradient_capped(x, targets, cap, out, dout):
            return zeros_like(x), zeros_like(targets), zeros_like(cap)

        self.op = _with_constant(_aot(kernel, "token_entropy", lambda x, t, cap: t, 1, no_gradient_capped), softcap)


def entropy_variants(kernel: Kernel):
    """factory(**needs) -> the token-entropy op (`softcap` as loss_variants')."""
    def build_op(*, softcap=None):
        return FusedTokenEntropy(kernel, softcap).op
    return variants(build_op)


class FusedSwiGLU:
    """The SwiGLU gate's kernels (core/engine/kernels/swiglu.cc) as one MindSpore op: called with the gate
    and up projections (..., intermediate) it returns silu(gate) · up; gradients flow to both.
    activation="gelu_tanh": GeGLU, gelu(gate) · up with the tanh approximation (Gemma's
    gelu_pytorch_tanh)."""

    SYMBOLS = {"silu": "swiglu", "gelu_tanh": "geglu"}

    def __init__(self, kernel: Kernel, activation: str = "silu"):
        if activation not in self.SYMBOLS:
            raise ValueError(f"gate activation must be one of {', '.join(self.SYMBOLS)}, got {activation!r}")
        name = self.SYMBOLS[activation]
        backward = _aot(kernel, f"{name}_backward", lambda g, u, dy: (g, u), 2)

        def bprop(g, u, out, dout):
            return backward(g, u, dout)

        self.op = _aot(kernel, f"{name}_forward", lambda g, u: g, 1, bprop)


class FusedGroupedMatmul:
    """The mixture-of-experts grouped product (core/engine/kernels/grouped_matmul.cc) as one MindSpore op:
    called with rows x (M, K) sorted by expert, stacked weights w (E, N, K) and the rows' experts
    ids (M,) int32 (nondecreasing) it returns y (M, N), y[i] = x[i]·w[ids[i]]ᵀ. Gradients flow to x
    and, with `weight_grad` (trained weights), to w; frozen experts (LoRA) skip dW."""

    def __init__(self, kernel: Kernel, weight_grad: bool = True):
        from mindspore import ops
        zeros_like = ops.ZerosLike()
        if weight_grad:
            backward = _aot(kernel, "grouped_matmul_backward", lambda x, w, ids, dy: (x, w), 2)

            def bprop(x, w, ids, out, dout):
                dx, dw = backward(x, w, ids, dout)
                return dx, dw, zeros_like(ids)
        else:
            # no x: an input of the backward is held from the forward on (the rows are needed by
            # nothing else when the experts have no LoRA of their own)
            backward = _aot(kernel, "grouped_matmul_backward_input", lambda dy, w, ids: [dy[0], w[2]], 1)

            def bprop(x, w, ids, out, dout):
                return backward(dout, w, ids), zeros_like(w), zeros_like(ids)

        # a second name for the frozen variant: MindSpore keys a Custom op's bprop by its function
        forward = "grouped_matmul_forward" if weight_grad else "grouped_matmul_forward_frozen"
        self.op = _aot(kernel, forward, lambda x, w, ids: [x[0], w[1]], 1, bprop)


class FusedGluHalves:
    """The experts' SwiGLU gate on their fused gate/up output (core/engine/kernels/grouped_matmul.cc): called
    with h (M, 2I) = [gate | up] it returns silu(gate)·up (M, I); the gradient flows to h."""

    def __init__(self, kernel: Kernel):
        backward = _aot(kernel, "glu_halves_backward", lambda h, da: h, 1)

        def bprop(h, out, dout):
            return (backward(h, dout),)

        self.op = _aot(kernel, "glu_halves_forward", lambda h: [h[0], h[1] // 2], 1, bprop)


class FusedFrozenWeights:
    """Frozen 16-bit weights computed in float32 (core/engine/kernels/frozen_weights.cc), for LoRA runs
    whose base weights stay bfloat16 | float16 (core.engine.layers.FrozenMatmul, Embedding, CausalLM's
    head loss); the weight is converted a block at a time, so no float32 copy of it exists:
    `.matmul(x, w)` -> x · wᵀ and `.matmul_backward(dy, w)` -> dy · w (x (N, I), w (O, I));
    `.gather(table, ids)` -> float32 rows (ids..., h) of a (V, h) table; `.head_loss(h, w,
    targets)` -> (N, 2): each row's nll and log-sum-exp of logits h · wᵀ, never materialised
    (targets int32, below 0 ignored), the gradient of the nll flowing to h. No gradient reaches the weights: they are frozen."""

    def __init__(self, kernel: Kernel):
        from mindspore import ops
        zeros_like = ops.ZerosLike()

        def no_gradient(a, b, out, dout):
            return zeros_like(a), zeros_like(b)

        self.gather = _aot(kernel, "gather_upcast", lambda table, ids: list(ids) + [table[-1]], 1, no_gradient)
        self.matmul = _aot(kernel, "frozen_matmul_forward", lambda x, w: [x[0], w[0]], 1)
        self.matmul_backward = _aot(kernel, "frozen_matmul_backward", lambda dy, w: [dy[0], w[1]], 1)
        head_backward = _aot(kernel, "head_loss_backward", lambda h, w, t, stats, dstats: h, 1)

        def head_bprop(h, w, targets, out, dout):
            return head_backward(h, w, targets, out, dout), zeros_like(w), zeros_like(targets)

        self.head_loss = _aot(kernel, "head_loss_forward", lambda h, w, t: [t[0], 2], 1, head_bprop)


class FusedLoRA:
    """The LoRA update's kernels (core/engine/kernels/lora.cc) as one MindSpore op: called with the base
    projection's output (N, out), its input x (N, in), lora_a (r, in), lora_b (out, r) and the
    scaling (1,) it returns base + (x·Aᵀ)·(s·B)ᵀ and x·Aᵀ (N, r); gradients flow to base, x, A and B."""

    def __init__(self, kernel: Kernel):
        from mindspore import ops
        # the backward takes no `base`: an input of the backward is held from the forward on
        backward = _aot(kernel, "lora_backward", lambda x, a, b, s, h, dy: (x, a, b), 3)
        zeros_like = ops.ZerosLike()

        def bprop(base, x, a, b, s, out, dout):
            dx, da, db = backward(x, a, b, s, out[1], dout[0])
            return dout[0], dx, da, db, zeros_like(s)

        self.op = _aot(kernel, "lora_forward", lambda base, x, a, b, s: (base, [x[0], a[0]]), 2, bprop)

        # the same update with the frozen float32 base product inside (lora_dense_*): called with the
        # weight first, (w, x, a, b, s) -> (y, h); no gradient reaches w
        backward_base = _aot(kernel, "lora_dense_backward", lambda x, a, b, s, h, dy, w: (x, a, b), 3)

        def bprop_base(w, x, a, b, s, out, dout):
            dx, da, db = backward_base(x, a, b, s, out[1], dout[0], w)
            return zeros_like(w), dx, da, db, zeros_like(s)

        self.with_base = _aot(kernel, "lora_dense_forward", lambda w, x, a, b, s: ([x[0], w[0]], [x[0], a[0]]), 2,
                              bprop_base)


def inference_problem(model, lora_in_kernel: bool = False) -> str | None:
    """Why `model` cannot run FusedInference (kernels/infer.cc: the plain pre-norm decoder in float32),
    or None when it can. Checked per call: LoRA adapters that are not merged (`lora_in_kernel`: the
    kernel merges them into its own copies, `FusedInference.adapters_merged`), 16-bit or AMP weights,
    and every family's own parts (sliding windows, soft caps, QK norms, fused projections, partial or
    interleaved rotary, LongRoPE, mixtures of experts, sandwich norms, a scaled embedding, biases in
    the MLP) keep the composed ops."""
    import mindspore as ms
    from core.engine.layers import Dense, RMSNorm
    if model.param_dtype != ms.float32 or getattr(model, "storage_dtype", ms.float32) != ms.float32:
        return "weights not float32"
    if model.embed_scale is not None or model.long_inv_freq is not None or model.local_inv_freq is not None:
        return "a scaled embedding or a second RoPE table"
    if model.windows != (None,):
        return "sliding windows"
    if not model.tied and not (type(model.lm_head) is Dense and model.lm_head.frozen is None and model.lm_head.amp is None):
        return "an LM head computed in another dtype"
    first = model.model.layers[0].self_attn if len(model.model.layers) else None
    for layer in model.model.layers:
        attn, mlp = layer.self_attn, layer.mlp
        if layer.sparse or layer.attn_post or layer.mlp_post or not layer.attn_pre or not layer.mlp_pre:
            return "not a plain pre-norm layer"
        if attn.window is not None or attn.softcap is not None or attn.qk_norm != "none" or attn.fused_qkv \
                or attn.interleaved or attn.rotary_dim != attn.head_dim or attn.scale != first.scale:
            return "an attention the kernel does not compute"
        if mlp.fused_gate_up or mlp.activation != "silu":
            return "an MLP the kernel does not compute"
        norms = (getattr(layer, layer.attn_pre), getattr(layer, layer.mlp_pre))
        if any(type(n) is not RMSNorm or n.eps != model.model.norm.eps or n.offset != model.model.norm.offset
               for n in norms):
            return "norms of another kind"
        for cell in (attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj, mlp.gate_proj, mlp.up_proj, mlp.down_proj):
            plain = type(cell) is Dense and cell.frozen is None and cell.amp is None
            merged = hasattr(cell, "lora_a") and (cell.merged or lora_in_kernel) and getattr(cell, "frozen", None) is None
            if not (plain or merged):
                return "LoRA adapters not merged, or weights computed in another dtype"
        if attn.o_proj.has_bias or any(c.has_bias for c in (mlp.gate_proj, mlp.up_proj, mlp.down_proj)):
            return "biases the kernel does not add"
    return None


class FusedInference:
    """A decoder's whole inference forward as one kernel call (kernels/infer.cc): `forward(model, ids,
    positions, valid, cache, start, last_only)` -> float32 logits (B, T|1, vocab) as numpy; with a
    `cache` (`new_cache`, a context manager that frees it), the keys and values of the new tokens go
    into slots start.. of it and attention sees the valid slots before them; `gather` copies rows of one
    cache into another. For models `inference_problem` accepts; core.engine.generate and
    core.engine.lm_eval_model use it. Inside `adapters_merged(model)` it computes a LoRA model with each
    adapter merged into a copy of its base weight (GRPO's rollouts, core.engine.grpo)."""

    def __init__(self, kernel: Kernel):
        import mindspore as ms
        from mindspore import ops
        self.kernel = kernel
        self.lib = ctypes.CDLL(str(kernel.path))
        self.lib.mindtune_infer_cache_new.restype = ctypes.c_int32
        self.lib.mindtune_infer_cache_new.argtypes = [ctypes.c_int64] * 5
        self.lib.mindtune_infer_cache_free.argtypes = [ctypes.c_int32]
        pointer = ctypes.c_void_p
        self.lib.mindtune_infer_cache_gather.restype = ctypes.c_int
        self.lib.mindtune_infer_cache_gather.argtypes = [ctypes.c_int32, ctypes.c_int32, pointer, ctypes.c_int64]
        self.lib.mindtune_sample_rows.restype = ctypes.c_int
        self.lib.mindtune_sample_rows.argtypes = [pointer, ctypes.c_int64, ctypes.c_int64, ctypes.c_float, pointer,
                                                  pointer]
        path = f"{kernel.path}:mindtune_infer_forward"
        dtype = lambda *inputs: ms.float32  # noqa: E731
        # inputs: ids, positions, valid, meta, inv_freq, scalars, embedding (V, h), ...: logits (B, T|1, V)
        self.op_all = ops.Custom(path, out_shape=lambda ids, *rest: [ids[0], ids[1], rest[5][0]],
                                 out_dtype=dtype, func_type="aot")
        self.op_last = ops.Custom(f"{path}_last", out_shape=lambda ids, *rest: [ids[0], 1, rest[5][0]],
                                  out_dtype=dtype, func_type="aot")  # a symbol of its own: see infer.cc
        self._zeros: dict[int, object] = {}
        self._kept: dict[int, tuple] = {}  # id(model) -> (a weak reference to it, its inputs)
        self._merged: dict[int, list] = {}  # id(model) -> its inputs with the adapters merged (adapters_merged)

    def _zeros_of(self, size: int):
        from mindspore import Tensor
        if size not in self._zeros:
            self._zeros[size] = Tensor(np.zeros(size, np.float32))
        return self._zeros[size]

    def _weights(self, model) -> list:
        """The kernel's inputs after the first four: the same Parameter objects call after call (their
        values change in place in training), kept per model (not as an attribute of the Cell, which
        would register a list of Parameters as its own)."""
        if id(model) in self._merged:
            return self._merged[id(model)]
        ref, kept = self._kept.get(id(model), (None, None))
        if ref is None or ref() is not model:
            kept = self._gather_weights(model)
            self._kept[id(model)] = (weakref.ref(model), kept)
        return kept

    def merges(self, model) -> bool:
        """Whether the kernel computes `model` with its adapters merged now (inside `adapters_merged`)."""
        return id(model) in self._merged

    @contextlib.contextmanager
    def adapters_merged(self, model):
        """Inside, the kernel computes `model` with every unmerged LoRA adapter folded into a float32 copy of
        its base weight, W + scaling·B·A, made on entry from the adapter's values then: the model's
        Parameters are only read, so the trained weights cannot drift (merging in place and back,
        core.engine.lora.lora_merged, is exact only while B = 0). The copies cost the adapted matrices'
        size in float32 while inside; they are dropped on exit."""
        self._merged[id(model)] = self._gather_weights(model, merge=True)
        try:
            yield
        finally:
            self._merged.pop(id(model), None)

    def _gather_weights(self, model, merge: bool = False) -> list:
        from mindspore import Tensor, ops

        def weight(cell):
            if not merge or not hasattr(cell, "lora_a") or cell.merged:
                return cell.weight
            # W + scaling·(B·A) in float32 as core.engine.lora.merge_weight, by MindSpore's threaded ops (a
            # 4864×896 projection: 16 ms, numpy's 90 ms)
            return ops.add(cell.weight, ops.matmul(cell.lora_b, cell.lora_a) * cell.scaling)
        norm = model.model.norm
        attn0 = model.model.layers[0].self_attn
        scalars = np.array([norm.eps, attn0.scale, model.rope_scale, 1.0 if norm.offset else 0.0,
                            model.final_softcap or 0.0], np.float32)
        embedding = model.model.embed_tokens.weight
        out = [model.inv_freq.reshape(-1), Tensor(scalars), embedding, norm.weight,
               embedding if model.tied else model.lm_head.weight]
        for layer in model.model.layers:
            attn, mlp = layer.self_attn, layer.mlp
            out += [getattr(layer, layer.attn_pre).weight, weight(attn.q_proj), weight(attn.k_proj), weight(attn.v_proj)]
            out += [proj.bias if proj.has_bias else self._zeros_of(proj.out_channels)
                    for proj in (attn.q_proj, attn.k_proj, attn.v_proj)]
            out += [weight(attn.o_proj), getattr(layer, layer.mlp_pre).weight, weight(mlp.gate_proj),
                    weight(mlp.up_proj), weight(mlp.down_proj)]
        return out

    def new_cache(self, model, batch: int, slots: int) -> "InferenceCache":
        args = model.args
        handle = self.lib.mindtune_infer_cache_new(len(model.model.layers), batch, args.num_kv_heads, slots,
                                                   args.head_dim)
        return InferenceCache(self, handle, slots)

    def forward(self, model, ids: np.ndarray, positions: np.ndarray, valid: np.ndarray | None = None,
                cache: "InferenceCache | None" = None, start: int = 0, last_only: bool = False):
        from mindspore import Tensor
        b, t = ids.shape
        if valid is None:
            valid = np.ones((b, cache.slots if cache else t), np.float32)
        meta = np.array([cache.handle if cache else 0, start], np.int32)
        op = self.op_last if last_only else self.op_all
        return op(Tensor(np.ascontiguousarray(ids, np.int32)), Tensor(np.ascontiguousarray(positions, np.int32)),
                  Tensor(np.ascontiguousarray(valid, np.float32)), Tensor(meta), *self._weights(model)).asnumpy()

    def sample(self, logits: np.ndarray, temperature: float, uniforms: np.ndarray) -> np.ndarray:
        """Each row's next token (B,) int64 from softmax(logits / temperature) (B, V) over the whole vocabulary,
        by inverse CDF at its uniform draw (B,) in [0, 1) (kernels/infer.cc, mindtune_sample_rows): the
        distribution of core.engine.generate.sample_next without top-k or top-p, in two passes over each
        row's logits instead of numpy's five (B, V) float64 arrays."""
        logits = np.ascontiguousarray(logits, np.float32)
        uniforms = np.ascontiguousarray(uniforms, np.float64)
        out = np.empty(len(logits), np.int64)
        if len(uniforms) != len(logits):
            raise ValueError(f"{len(uniforms)} draws for {len(logits)} rows")
        code = self.lib.mindtune_sample_rows(logits.ctypes.data, logits.shape[0], logits.shape[1],
                                             1.0 / float(temperature), uniforms.ctypes.data, out.ctypes.data)
        if code:
            raise RuntimeError("mindtune_sample_rows: a row of logits has no finite value")
        return out

    def gather(self, to: "InferenceCache", source: "InferenceCache", index, slots: int) -> None:
        """Row r of cache `to` gets slots [0, slots) of row index[r] of `source`, in every layer."""
        index = np.ascontiguousarray(index, np.int32)
        code = self.lib.mindtune_infer_cache_gather(to.handle, source.handle, index.ctypes.data, slots)
        if code:
            raise RuntimeError(f"mindtune_infer_cache_gather returned {code}")


class InferenceCache:
    """A key/value cache held by the inference kernel (`FusedInference.new_cache`); `close()` (or the
    end of a `with`) frees it."""

    def __init__(self, owner: FusedInference, handle: int, slots: int):
        self.owner, self.handle, self.slots = owner, handle, slots

    def close(self) -> None:
        if self.handle:
            self.owner.lib.mindtune_infer_cache_free(self.handle)
            self.handle = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()


def enable(model, threads: int | None = None, amp_level: str = "O0") -> str:
    """Route `model`'s full-sequence attention, its norms and its loss (`core.engine.train_step.loss_cell`)
    through the fused kernels, where they compute the model's maths (`CausalLM.use_kernels` asks
    for a variant per layer: soft-capping, partial rotary, ...). Returns "fused", "fused; composed:
    <part>: <why> (layers ...)" when some parts stay composed, or "composed: <why>" when the kernels
    cannot be used here (the model is left unchanged). `threads`: each kernel's threads (a
    data-parallel worker's share)."""
    import mindspore as ms
    if kernels_switched_off():
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
    composed = model.use_kernels(attention_variants(kernel), FusedRMSNorm(kernel).op, gate_variants(kernel),
                                 loss_variants(kernel))
    for layer in model.model.layers:
        if layer.sparse:  # a mixture of experts (core.engine.moe.SparseMoE): the grouped expert products
            layer.mlp.enable_grouped(kernel)
    if getattr(model, "storage_dtype", model.param_dtype) != model.param_dtype:  # 16-bit frozen weights
        model.use_frozen_kernels(FusedFrozenWeights(kernel))
    model.inference_kernel = FusedInference(kernel)  # used where inference_problem(model) is None
    model.token_entropy = entropy_variants(kernel)  # GRPO's entropy figure (core.engine.grpo)
    lora = FusedLoRA(kernel)
    for _, cell in model.cells_and_names():
        if hasattr(cell, "lora_a") and hasattr(cell, "fused") and cell.lora_dropout.p == 0:
            # a float32 base weight's product goes into the same kernel (a 16-bit one has its own)
            cell.fused_base = lora.with_base if cell.frozen is None and cell.weight.dtype == ms.float32 else None
            cell.fused = lora.op  # LoRA with dropout keeps the composed ops (the kernel draws no masks)
    return "fused" + ("; composed: " + "; ".join(composed) if composed else "")
