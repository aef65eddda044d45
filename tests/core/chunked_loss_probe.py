"""Run as a script (tests/core/test_devices.py): the peak-RSS growth of one compiled forward and backward
of the LM head and its cross-entropy on a vocabulary-sized head, either chunked as GPU/Ascend run
it (core.engine.devices.ChunkedHeadLoss, `CHUNK` rows at a time) or unchunked (the (N, vocab)
logits, their log-softmax and gradient whole, as a composed loss holds them).

    python tests/core/chunked_loss_probe.py chunked|unchunked

Prints one JSON line: the growth in MB, the size of one chunk's (CHUNK, vocab) float32 block and of
the whole (N, vocab) float32 logits. PROBE_CHUNK and PROBE_VOCAB change the shape (how the growth's
dependence on the chunk's size, not on the number of chunks, was read: core/engine/devices.py).
"""
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402

import mindspore as ms  # noqa: E402
from mindspore import Tensor, nn, ops  # noqa: E402

from core.engine.devices import ChunkedHeadLoss  # noqa: E402
from tests.core.lora_memory_probe import high_water_mb  # noqa: E402

N, HIDDEN = 4096, 64
VOCAB = int(os.environ.get("PROBE_VOCAB", 16384))  # logits 256 MB
CHUNK = int(os.environ.get("PROBE_CHUNK", 512))  # a chunk's block: 32 MB


def reset_high_water() -> None:
    """VmHWM back to the current resident set (Linux: 5 > /proc/self/clear_refs), so what compiling
    the graph took is not counted as what running it takes."""
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")


def unchunked_loss(hidden, weight, targets):
    logits = ops.matmul(hidden, weight.transpose(1, 0))  # (N, V) float32
    log_probs = ops.log_softmax(logits, -1)
    picked = ops.gather_elements(log_probs, -1, ops.expand_dims(ops.maximum(targets, 0), -1)).squeeze(-1)
    return -(picked * ops.cast(targets >= 0, ms.float32)).sum()


class Gradients(nn.Cell):
    """The loss's value and its gradients for the hidden states and the head's weight."""

    def __init__(self, loss):
        super().__init__()
        self.grad = ms.value_and_grad(loss, grad_position=(0, 1))

    def construct(self, hidden, weight, targets):
        return self.grad(hidden, weight, targets)


def main(mode: str) -> None:
    ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")
    rng = np.random.default_rng(0)
    hidden = Tensor(rng.standard_normal((N, HIDDEN)).astype(np.float32))
    weight = Tensor(rng.standard_normal((VOCAB, HIDDEN)).astype(np.float32) * 0.05)
    labels = rng.integers(0, VOCAB, N).astype(np.int32)
    labels[::7] = -100
    targets = Tensor(labels)
    if mode == "chunked":
        head = ChunkedHeadLoss(chunk=CHUNK)

        def loss(h, w, t):
            return head(h, w, t)[:, 0].sum()
    else:
        loss = unchunked_loss
    net = Gradients(loss)
    net.compile(hidden, weight, targets)
    reset_high_water()
    before = high_water_mb()
    value, (d_hidden, d_weight) = net(hidden, weight, targets)
    finite = np.isfinite(float(value)) and np.abs(d_weight.asnumpy()).sum() > 0 and np.abs(d_hidden.asnumpy()).sum() > 0
    growth = high_water_mb() - before  # after the results were read: the graph has run
    assert finite
    print(json.dumps({"mode": mode, "growth_mb": round(growth, 1), "loss": float(value),
                      "block_mb": CHUNK * VOCAB * 4 / 2**20, "logits_mb": N * VOCAB * 4 / 2**20}))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
