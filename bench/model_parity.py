"""Max |Δlogits| between mindtune's MindSpore model and Hugging Face transformers (PyTorch), per
architecture, on tiny random checkpoints (fp32, and fp32 compute from fp16/bf16-stored weights).

    .venv/bin/python bench/model_parity.py        (needs requirements-dev.txt: torch, transformers)
"""
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mindspore as ms  # noqa: E402

from core.checkpoint import load_hf_model  # noqa: E402
from tests.core.hf_fixtures import ARCHITECTURES, make_hf_model, random_ids, reference_logits, save_hf_model  # noqa: E402


def max_abs_diff(name: str, stored=None) -> float:
    import torch
    hf = make_hf_model(name)
    with tempfile.TemporaryDirectory() as folder:
        save_hf_model(hf, Path(folder), dtype=getattr(torch, stored) if stored else None)
        ids = random_ids(batch=4, length=64)
        ours = load_hf_model(folder).construct(ms.Tensor(ids)).asnumpy()
    return float(np.abs(ours - reference_logits(hf, ids)).max())


def main() -> None:
    print(f"{'architecture':32} {'stored':9} max|Δlogits|  (tolerance 1e-4, batch 4 x 64 tokens)")
    for name in sorted(ARCHITECTURES):
        for stored in (None, "bfloat16"):
            print(f"{name:32} {stored or 'float32':9} {max_abs_diff(name, stored):.2e}")


if __name__ == "__main__":
    main()
