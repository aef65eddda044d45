"""One sparse mixture-of-experts layer (core.engine.moe.SparseMoE), forward + backward, on the CPU:
the grouped kernel (core/engine/kernels/grouped_matmul.cc: each expert's product over only the rows
routed to it) against the composed path (every expert on every token as BatchMatMuls, weighted by
the router), interleaved A/B in one process so that both see the same machine load.

Shape: the Qwen3-MoE config of bench/train_step.py (hidden 512, 8 experts, top 2, expert width
384) at batch 8 × 256; `--method full` trains the experts (dW computed), `lora` freezes them and
trains rank-8 LoRA on both expert projections. Prints the median of each, the ratio, and the
largest difference of the input and weight gradients between the two paths (relative to each
gradient's largest entry).

    .venv/bin/python bench/moe_layer.py                       # full and lora
    .venv/bin/python bench/moe_layer.py --method full --rounds 10 --experts 16
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def build(args, method: str, grouped: bool):
    import numpy as np
    import mindspore as ms
    from mindspore import Tensor
    import core.engine.fused as fused
    from core.engine.lora import inject_lora, mark_only_lora_trainable
    from core.engine.moe import SparseMoE
    from core.spec.moe_args import MoeArgs
    from mindspore import nn

    class Holder(nn.Cell):  # LoRA injection works on a model's dotted names
        def __init__(self, block):
            super().__init__()
            self.mlp = block

    moe = MoeArgs(args.experts, args.top_k, args.intermediate, False, (0,), 0.001, "qwen")
    holder = Holder(SparseMoE(SimpleNamespace(hidden_size=args.hidden, moe=moe)))
    rng = np.random.default_rng(0)
    for p in holder.get_parameters():
        p.set_data(Tensor((rng.standard_normal(p.shape) * 0.05).astype(np.float32)))
    if method == "lora":
        inject_lora(holder, 8, 16, 0.0, ["gate_up_proj", "down_proj"])
        for p in holder.get_parameters():  # a trained adapter (not B = 0), the same in both builds
            if p.name.endswith(("lora_a", "lora_b")):
                p.set_data(Tensor((rng.standard_normal(p.shape) * 0.05).astype(np.float32)))
        mark_only_lora_trainable(holder)
    if grouped:
        holder.mlp.enable_grouped(fused.build())
    params = [p for p in holder.get_parameters() if p.requires_grad]
    weights = Tensor(rng.standard_normal((args.batch, args.seq, args.hidden)).astype(np.float32))

    def loss(x):
        y, _ = holder.mlp(x)
        return (y * weights).sum()

    step = ms.jit(ms.value_and_grad(loss, 0, params))
    return step


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--method", choices=["full", "lora", "both"], default="both")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--intermediate", type=int, default=384)
    parser.add_argument("--experts", type=int, default=8)
    parser.add_argument("--top-k", type=int, default=2)
    args = parser.parse_args(argv)
    import numpy as np
    import mindspore as ms
    from mindspore import Tensor
    ms.set_context(mode=ms.PYNATIVE_MODE)
    ms.set_device("CPU")
    x = Tensor(np.random.default_rng(1).standard_normal((args.batch, args.seq, args.hidden)).astype(np.float32))
    print(f"MoE layer fwd+bwd, batch {args.batch} x {args.seq}, hidden {args.hidden}, {args.experts} experts "
          f"top {args.top_k}, expert width {args.intermediate}; interleaved A/B, {args.rounds} rounds")
    for method in (["full", "lora"] if args.method == "both" else [args.method]):
        steps = {"grouped": build(args, method, True), "composed": build(args, method, False)}
        results = {name: step(x) for name, step in steps.items()}  # compile
        (_, grads_g), (_, grads_c) = results["grouped"][1], results["composed"][1]
        gap = max(float(np.abs(a.asnumpy() - b.asnumpy()).max() / np.abs(b.asnumpy()).max())
                  for a, b in zip([results["grouped"][1][0], *grads_g], [results["composed"][1][0], *grads_c]))
        times = {name: [] for name in steps}
        for _ in range(args.rounds):
            for name, step in steps.items():
                start = time.perf_counter()
                out = step(x)
                out[0].asnumpy()
                times[name].append(time.perf_counter() - start)
        g, c = statistics.median(times["grouped"]), statistics.median(times["composed"])
        print(f"{method:5s} grouped {g * 1e3:7.1f} ms   composed {c * 1e3:7.1f} ms   composed/grouped {c / g:5.2f}x   "
              f"grads max |d| / max |g| {gap:.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
