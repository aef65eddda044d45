"""The fused CPU kernels (core/engine/kernels/*.cc) timed as MindSpore ops, forward + backward, in one
process, the variants of each comparison interleaved (A B A B ...; the median of each):

- `default`: today's path of every kernel, the library at a baseline commit (built here from git,
  `--baseline`) against the working tree's: attention at the demo and 25M layer shapes, RMSNorm,
  cross-entropy and the SwiGLU gate at their 25M shapes. The new options must cost nothing here.
- `window`: sliding-window attention at T = 4 × window against the full causal kernel with the
  same window in its additive mask (what a model without the option runs; same outputs).
- `softcap`: Gemma 2's attention soft cap (and the final-logit cap in the cross-entropy) against
  the same call without it.
- `packing`: 4 samples per row with segment ids against the same samples unpacked (one per row of
  a quarter of the length), and against the block-diagonal mask without segment ids.
- `lora-step`: the compiled LoRA train step (bench/train_step.py's demo and 25M configs, batch
  8 × 256, r 8 on all seven projections) with the LoRA kernel against the same step with the
  composed LoRA ops (the other kernels on in both), two models in one process, steps alternated;
  wall time and the process's CPU time per step.

    .venv/bin/python bench/fused_kernels.py               # every section
    .venv/bin/python bench/fused_kernels.py --sections window packing --reps 15

Timings on a shared machine are only comparable as ratios inside one run; the kernels use every
CPU this process may run on (`--threads` to pin a count).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BASELINE = "9b5e824580e207a1b969895c72f348a45044b78f"  # main before the options for the new families
MASK_MIN = float(np.finfo(np.float32).min)
# (name, batch, seq, heads, kv heads, head dim)
DEMO_LAYER = ("demo", 8, 256, 8, 4, 32)
LAYER_25M = ("25M", 8, 256, 8, 8, 64)


def rope_tables(batch: int, t: int, d: int, positions=None):
    inv = 1.0 / 10000 ** (np.arange(0, d, 2) / d)
    pos = np.arange(t)[None, :] if positions is None else positions
    freqs = pos[..., None] * inv
    emb = np.concatenate([freqs, freqs], -1)[:, None]
    return np.cos(emb).astype(np.float32), np.sin(emb).astype(np.float32)


def causal_mask(t: int, window: int | None = None, segments=None):
    i, j = np.arange(t)[:, None], np.arange(t)[None, :]
    seen = j <= i
    if window:
        seen = seen & (i - j < window)
    seen = seen[None, None]
    if segments is not None:
        seen = seen & (segments[:, None, :, None] == segments[:, None, None, :])
    return np.where(seen, 0.0, MASK_MIN).astype(np.float32)


class AttentionCall:
    """One attention forward + backward through a library's kernels (`options`: None for the
    baseline's six-input signature, else core.engine.fused.attention_options' vector)."""

    def __init__(self, kernel, options, q, k, v, mask, cos, sin, segments=None):
        from mindspore import Tensor
        import core.engine.fused as fused
        self.forward = fused._aot(kernel, "attention_forward", lambda q_, k_, *rest: (q_, [q_[0], q_[2], q_[1]], k_), 3)
        self.backward = fused._aot(kernel, "attention_backward", lambda q_, k_, v_, *rest: (q_, k_, v_), 3)
        self.inputs = [Tensor(a) for a in (q, k, v, mask, cos, sin)]
        if options is not None:
            self.inputs.append(Tensor(options))
        if segments is not None:
            self.inputs.append(Tensor(segments))
        rng = np.random.default_rng(1)
        self.dout, self.dkey = Tensor(rng.standard_normal(q.shape).astype(np.float32)), Tensor(np.zeros_like(k))

    def __call__(self):
        out, lse, key = self.forward(*self.inputs)
        return self.backward(*self.inputs, out, lse, self.dout, self.dkey)


def attention_inputs(batch, t, heads, kv, d, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((batch, t, heads, d)).astype(np.float32)
    k, v = (rng.standard_normal((batch, t, kv, d)).astype(np.float32) for _ in range(2))
    return q, k, v


def cpu_seconds() -> float:
    """This process's CPU time, every thread's (the kernels' own threads included)."""
    import resource
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def interleaved(calls: dict, reps: int) -> dict:
    """Median wall and CPU seconds of each call, timed in turn (one warm-up each first). CPU time
    holds on a loaded machine (others take time slices away, not work): the check for "never
    slower"; wall time also counts waiting for a core."""
    times = {name: ([], []) for name in calls}
    for fn in calls.values():
        fn()
    for _ in range(reps):
        for name, fn in calls.items():  # PyNative with launch_blocking (use_device): each op has finished
            cpu, start = cpu_seconds(), time.perf_counter()
            fn()
            times[name][0].append(time.perf_counter() - start)
            times[name][1].append(cpu_seconds() - cpu)
    return {name: (statistics.median(wall), statistics.median(cpu)) for name, (wall, cpu) in times.items()}


def report(title: str, medians: dict, base: str) -> None:
    print(f"\n{title}")
    base_wall, base_cpu = medians[base]
    for name, (wall, cpu) in medians.items():
        ratio = "" if name == base else f"  wall {wall / base_wall:.3f}x, CPU {cpu / base_cpu:.3f}x {base}"
        print(f"  {name:<36} wall {wall * 1e3:8.2f} ms  CPU {cpu * 1e3:8.2f} ms{ratio}")


def section_default(new, old, reps: int) -> None:
    from mindspore import Tensor
    import core.engine.fused as fused
    options = fused.attention_options()
    for name, batch, t, heads, kv, d in (DEMO_LAYER, LAYER_25M):
        q, k, v = attention_inputs(batch, t, heads, kv, d)
        mask = np.broadcast_to(causal_mask(t), (batch, 1, t, t)).copy()
        mask[1, :, :, t - 40:] = MASK_MIN  # a right-padded row, as core.data.pipeline pads
        cos, sin = rope_tables(1, t, d)
        calls = {"baseline": AttentionCall(old, None, q, k, v, mask, cos, sin),
                 "new": AttentionCall(new, options, q, k, v, mask, cos, sin)}
        report(f"attention fwd+bwd, {name} layer (B {batch}, T {t}, heads {heads}/{kv}, D {d})",
               interleaved(calls, reps), "baseline")
    rng = np.random.default_rng(2)
    x = rng.standard_normal((8, 256, 512)).astype(np.float32)
    w = np.ones(512, np.float32)
    logits = rng.standard_normal((8, 256, 8192)).astype(np.float32)
    targets = rng.integers(0, 8192, (8, 256)).astype(np.int32)
    gate, up = (rng.standard_normal((8, 256, 1536)).astype(np.float32) for _ in range(2))
    eps = Tensor([1e-5])

    def norm_call(kernel):
        fwd = fused._aot(kernel, "rmsnorm_forward", lambda x_, w_, e: (x_, x_[:-1]), 2)
        bwd = fused._aot(kernel, "rmsnorm_backward", lambda x_, w_, r, dy: (x_, w_), 2)
        xt, wt = Tensor(x), Tensor(w)
        return lambda: bwd(xt, wt, fwd(xt, wt, eps)[1], xt)

    def ce_call(kernel):
        fwd = fused._aot(kernel, "cross_entropy_forward", lambda x_, t_: (t_, t_), 2)
        bwd = fused._aot(kernel, "cross_entropy_backward", lambda x_, t_, lse, d_: x_, 1)
        xt, tt, dn = Tensor(logits), Tensor(targets), Tensor(np.ones((8, 256), np.float32))
        return lambda: bwd(xt, tt, fwd(xt, tt)[1], dn)

    def gate_call(kernel):
        fwd = fused._aot(kernel, "swiglu_forward", lambda g_, u_: g_, 1)
        bwd = fused._aot(kernel, "swiglu_backward", lambda g_, u_, dy: (g_, u_), 2)
        gt, ut = Tensor(gate), Tensor(up)
        return lambda: bwd(gt, ut, fwd(gt, ut))

    for title, make in (("RMSNorm fwd+bwd (8 x 256, 512)", norm_call),
                        ("cross-entropy fwd+bwd (8 x 256, vocab 8192)", ce_call),
                        ("SwiGLU gate fwd+bwd (8 x 256, 1536)", gate_call)):
        report(title, interleaved({"baseline": make(old), "new": make(new)}, reps), "baseline")


def section_window(new, reps: int, window: int) -> None:
    import core.engine.fused as fused
    t = 4 * window
    for name, _, _, heads, kv, d in (DEMO_LAYER, LAYER_25M):
        batch = 2
        q, k, v = attention_inputs(batch, t, heads, kv, d)
        cos, sin = rope_tables(1, t, d)
        calls = {"full causal, window in the mask": AttentionCall(new, fused.attention_options(), q, k, v,
                                                                  causal_mask(t, window), cos, sin),
                 f"window={window} option": AttentionCall(new, fused.attention_options(window=window), q, k, v,
                                                          causal_mask(t, window), cos, sin),
                 "window option, key-padding mask": AttentionCall(new, fused.attention_options(window=window), q, k,
                                                                  v, np.zeros((1, 1, 1, t), np.float32), cos, sin)}
        report(f"sliding window, {name} heads (B {batch}, T {t} = 4 x {window}, heads {heads}/{kv}, D {d})",
               interleaved(calls, reps), "full causal, window in the mask")


def section_softcap(new, reps: int) -> None:
    from mindspore import Tensor
    import core.engine.fused as fused
    for name, batch, t, heads, kv, d in (DEMO_LAYER, LAYER_25M):
        q, k, v = attention_inputs(batch, t, heads, kv, d)
        cos, sin = rope_tables(1, t, d)
        mask = causal_mask(t)
        calls = {"no cap": AttentionCall(new, fused.attention_options(), q, k, v, mask, cos, sin),
                 "softcap=50": AttentionCall(new, fused.attention_options(softcap=50.0), q, k, v, mask, cos, sin)}
        report(f"attention soft cap, {name} layer (B {batch}, T {t}, heads {heads}/{kv}, D {d})",
               interleaved(calls, reps), "no cap")
    rng = np.random.default_rng(3)
    logits = Tensor(rng.standard_normal((8, 256, 8192)).astype(np.float32))
    targets = Tensor(rng.integers(0, 8192, (8, 256)).astype(np.int32))
    dnll = Tensor(np.ones((8, 256), np.float32))
    fwd = fused._aot(new, "cross_entropy_forward", lambda x_, t_, *cap: (t_, t_), 2)
    bwd = fused._aot(new, "cross_entropy_backward", lambda x_, *rest: x_, 1)
    cap = Tensor([30.0])
    calls = {"no cap": lambda: bwd(logits, targets, fwd(logits, targets)[1], dnll),
             "softcap=30": lambda: bwd(logits, targets, cap, fwd(logits, targets, cap)[1], dnll)}
    report("cross-entropy final-logit soft cap fwd+bwd (8 x 256, vocab 8192)", interleaved(calls, reps), "no cap")


def section_packing(new, reps: int, length: int) -> None:
    import core.engine.fused as fused
    samples, t = 4, 4 * length
    for name, _, _, heads, kv, d in (DEMO_LAYER, LAYER_25M):
        batch = 2
        q, k, v = attention_inputs(batch, t, heads, kv, d)
        seg = np.repeat(np.arange(1, samples + 1, dtype=np.int32), length)[None].repeat(batch, 0)
        positions = np.tile(np.arange(length), samples)[None].repeat(batch, 0)
        cos, sin = rope_tables(batch, t, d, positions)
        unpack = lambda a: a.reshape(batch * samples, length, *a.shape[2:])  # noqa: E731
        ucos, usin = rope_tables(1, length, d)
        options = fused.attention_options()
        calls = {"unpacked (4B rows of T/4)": AttentionCall(new, options, unpack(q), unpack(k), unpack(v),
                                                            causal_mask(length), ucos, usin),
                 "packed, segment ids": AttentionCall(new, options, q, k, v, np.zeros((1, 1, 1, t), np.float32), cos,
                                                      sin, seg),
                 "packed, block-diagonal mask only": AttentionCall(new, options, q, k, v, causal_mask(t, segments=seg),
                                                                   cos, sin)}
        report(f"packing {samples} x {length} tokens per row, {name} heads (B {batch}, T {t}, heads {heads}/{kv}, "
               f"D {d})", interleaved(calls, reps), "unpacked (4B rows of T/4)")


def section_lora_step(reps: int, configs) -> None:
    import mindspore as ms
    from bench import train_step as tsb
    import core.engine.fused as fused
    from core.engine.checkpoint import load_hf_model
    from core.engine.lora import inject_lora, mark_only_lora_trainable
    from core.engine.model import share_layer_graphs
    from core.engine.train_step import TrainStep, WarmupDecaySchedule, adamw

    with tempfile.TemporaryDirectory() as tmp:
        for name in configs:
            folder = (ROOT / "models" / "tiny-demo" if name == "demo"
                      else tsb.make_checkpoint(Path(tmp) / "llama-25m", tsb.CONFIG_25M))
            steps = {}
            for variant in ("composed LoRA ops", "LoRA kernel"):
                ms.set_seed(0)
                model = load_hf_model(folder)
                inject_lora(model, 8, 16.0, 0.0, tsb.lora_targets(folder))
                params = mark_only_lora_trainable(model)
                assert fused.enable(model) == "fused"
                if variant == "composed LoRA ops":
                    for _, cell in model.cells_and_names():
                        if hasattr(cell, "lora_a"):
                            cell.fused = None
                share_layer_graphs(model)
                model.set_train(True)
                step = TrainStep(model, adamw(params, WarmupDecaySchedule(1e-4, 0, 1000, "constant", 1.0), 0.0), 1.0,
                                 None)
                batch = [tsb.batch_arrays(model.args.vocab_size)]
                steps[variant] = lambda step=step, batch=batch: step(batch)
            for fn in steps.values():  # compile (interleaved() warms up once more)
                fn()
            report(f"LoRA train step, {name} (batch 8 x 256, r 8, 7 projections), {reps} steps each, alternated",
                   interleaved(steps, reps), "composed LoRA ops")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sections = ["default", "window", "softcap", "packing", "lora-step"]
    parser.add_argument("--sections", nargs="+", default=sections, choices=sections)
    parser.add_argument("--configs", nargs="+", default=["demo", "25m"], choices=["demo", "25m"],
                        help="section lora-step: the models")
    parser.add_argument("--reps", type=int, default=11)
    parser.add_argument("--baseline", default=BASELINE, help="git commit of the old kernels (section default)")
    parser.add_argument("--window", type=int, default=256, help="section window: T = 4 x window")
    parser.add_argument("--sample-length", type=int, default=256, help="section packing: tokens per sample")
    parser.add_argument("--threads", type=int, default=0, help="kernel threads (0: every CPU allowed)")
    args = parser.parse_args(argv)
    import core.engine.fused as fused
    from core.engine.generate import use_device
    use_device("cpu")  # PyNative, ops launched synchronously
    new = fused.build()
    print(f"kernels: {new.path.name} (working tree)")
    fused.set_threads(new, args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        if "default" in args.sections:
            old = fused.build_revision(args.baseline, Path(tmp))
            print(f"baseline: {old.path.name} (core/engine/kernels at {args.baseline[:12]})")
            fused.set_threads(old, args.threads)
            section_default(new, old, args.reps)
        if "window" in args.sections:
            section_window(new, args.reps, args.window)
        if "softcap" in args.sections:
            section_softcap(new, args.reps)
        if "packing" in args.sections:
            section_packing(new, args.reps, args.sample_length)
        if "lora-step" in args.sections:
            section_lora_step(args.reps, args.configs)


if __name__ == "__main__":
    main()
