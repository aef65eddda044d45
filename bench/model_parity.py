"""Max |Δlogits| between mindtune's MindSpore model and Hugging Face transformers (PyTorch), for
every family fixture of tests/core/hf_fixtures.py (tiny random checkpoints made by transformers,
non-trivial norms and biases): fp32 weights with composed MindSpore ops and with the fused CPU
kernels (compiled), and bf16-stored weights computed in fp32 (composed).

    .venv/bin/python bench/model_parity.py        (needs requirements-dev.txt: torch, transformers)
    .venv/bin/python bench/model_parity.py --only glm4,olmo2
"""
import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mindspore as ms  # noqa: E402

from core import fused  # noqa: E402
from core.checkpoint import load_hf_model  # noqa: E402
from tests.core.hf_fixtures import ARCHITECTURES, make_hf_model, random_ids, reference_logits, save_hf_model  # noqa: E402


def max_abs_diffs(name: str) -> dict[str, object]:
    """composed / fused / bf16-stored max |Δlogits| of one fixture, and how the kernels ran."""
    import torch
    from transformers import AutoModelForCausalLM
    ids = random_ids(batch=4, length=64)
    hf = make_hf_model(name)
    out: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as folder:
        save_hf_model(hf, Path(folder) / "fp32")
        ref = reference_logits(hf, ids)
        model = load_hf_model(Path(folder) / "fp32")
        out["composed"] = float(np.abs(model.construct(ms.Tensor(ids)).asnumpy() - ref).max())
        out["kernels"] = fused.enable(model)
        out["fused"] = (float(np.abs(ms.jit(model.construct)(ms.Tensor(ids)).asnumpy() - ref).max())
                        if out["kernels"].startswith("fused") else None)
        save_hf_model(make_hf_model(name), Path(folder) / "bf16", dtype=torch.bfloat16)
        bf16 = AutoModelForCausalLM.from_pretrained(str(Path(folder) / "bf16"), dtype=torch.float32).eval()
        ours = load_hf_model(Path(folder) / "bf16").construct(ms.Tensor(ids)).asnumpy()
        out["bf16"] = float(np.abs(ours - reference_logits(bf16, ids)).max())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma list of fixture names (default: all)")
    names = (parser.parse_args().only or ",".join(sorted(ARCHITECTURES))).split(",")
    print("max |Δlogits| vs transformers (tolerance 1e-4), batch 4 x 64 tokens, fp32 compute")
    print(f"| {'fixture':30} | architecture | composed | fused kernels | bf16-stored | kernels |")
    print("|---|---|---|---|---|---|")
    for name in names:
        d = max_abs_diffs(name)
        fused_cell = "-" if d["fused"] is None else f"{d['fused']:.2e}"
        print(f"| {name:30} | {ARCHITECTURES[name][1]} | {d['composed']:.2e} | {fused_cell} | {d['bf16']:.2e} "
              f"| {d['kernels']} |", flush=True)


if __name__ == "__main__":
    main()
