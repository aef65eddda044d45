"""Run as a script (tests/core/test_fused.py): the peak-RSS growth of one compiled backward through
a stack of fused LoRA projections whose base outputs are large and needed by nothing else.

Each layer is base = x·W (N, OUT), y = lora(base, x, A, B), and a reshaped sum of y back to
(N, IN), whose backward needs only the shape. What the backward must keep per layer is x (N, IN)
and h = x·Aᵀ (N, r): small. If the LoRA backward held the base outputs, the growth would be at
least their total, `LAYERS` × (N, OUT) float32. Prints one JSON line: the growth and that total.
"""
import json
import sys

import numpy as np

import mindspore as ms
from mindspore import Tensor, ops

import core.engine.fused as fused

N, IN, OUT, RANK, LAYERS = 1024, 64, 16384, 8, 16  # each base output 64 MB


def high_water_mb() -> float:
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise SystemExit("no VmHWM in /proc/self/status")


def main() -> None:
    ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")
    lora = fused.FusedLoRA(fused.build()).op
    rng = np.random.default_rng(0)
    weights = [Tensor(rng.standard_normal((IN, OUT)).astype(np.float32) * 0.1) for _ in range(LAYERS)]
    scale = Tensor([2.0], ms.float32)

    def stack(x, a, b):
        for layer in range(LAYERS):
            base = ops.matmul(x, weights[layer])
            y = lora(base, x, a[layer], b[layer], scale)[0]
            x = y.reshape(N, IN, OUT // IN).sum(-1)
        return x.sum()

    grad = ms.jit(ms.grad(stack, grad_position=(1, 2)))
    x = Tensor(rng.standard_normal((N, IN)).astype(np.float32))
    a = Tensor(rng.standard_normal((LAYERS, RANK, IN)).astype(np.float32) * 0.1)  # every layer's A
    b = Tensor(rng.standard_normal((LAYERS, OUT, RANK)).astype(np.float32) * 0.01)
    before = high_water_mb()
    grad_a, _ = grad(x, a, b)
    assert np.abs(grad_a.asnumpy()).sum() > 0
    print(json.dumps({"growth_mb": high_water_mb() - before, "base_outputs_mb": LAYERS * N * OUT * 4 / 2**20}))


if __name__ == "__main__":
    sys.exit(main())
