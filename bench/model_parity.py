"""Max |Δlogits| between mindtune's MindSpore model and Hugging Face transformers (PyTorch), for
every family fixture of tests/core/hf_fixtures.py and Gemma 3's text + vision checkpoint of
tests/core/family_fixtures.py (tiny random checkpoints made by transformers, non-trivial norms and
biases): fp32 weights with composed MindSpore ops and with the fused CPU kernels (compiled), and
bf16-stored weights computed in fp32 (composed).

    .venv/bin/python bench/model_parity.py        (needs requirements-dev.txt: torch, transformers)
    .venv/bin/python bench/model_parity.py --only glm4,olmo2
    .venv/bin/python bench/model_parity.py --only gemma2,gemma3,gemma3-vision,phi3,phi4-mini
"""
import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("GLOG_v", "3")  # MindSpore's graph-compiler warnings would bury the table
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import mindspore as ms  # noqa: E402

import core.engine.fused as fused  # noqa: E402
from core.engine.checkpoint import load_hf_model  # noqa: E402
from tests.core.family_fixtures import ID_LIMIT, MODELS, make_model  # noqa: E402
from tests.core.hf_fixtures import ARCHITECTURES, make_hf_model, random_ids, reference_logits, save_hf_model  # noqa: E402

# name -> (architecture, maker(seed), token ids kept below); the vision checkpoint's image tokens
# (94-96) stay out of its inputs
FIXTURES = {name: (model_cls, lambda seed=0, name=name: make_hf_model(name, seed), None)
            for name, (_, model_cls, _) in ARCHITECTURES.items()}
FIXTURES["gemma3-vision"] = (MODELS["gemma3-vision"][1], lambda seed=0: make_model("gemma3-vision", seed), ID_LIMIT)


def max_abs_diffs(name: str) -> dict[str, object]:
    """composed / fused / bf16-stored max |Δlogits| of one fixture, and how the kernels ran."""
    import torch
    import transformers
    architecture, make, limit = FIXTURES[name]
    ids = random_ids(batch=4, length=64)
    if limit is not None:
        ids = ids % limit
    hf = make()
    out: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as folder:
        save_hf_model(hf, Path(folder) / "fp32")
        ref = reference_logits(hf, ids)
        model = load_hf_model(Path(folder) / "fp32")
        out["composed"] = float(np.abs(model.construct(ms.Tensor(ids)).asnumpy() - ref).max())
        out["kernels"] = fused.enable(model)
        out["fused"] = (float(np.abs(ms.jit(model.construct)(ms.Tensor(ids)).asnumpy() - ref).max())
                        if out["kernels"].startswith("fused") else None)
        save_hf_model(make(), Path(folder) / "bf16", dtype=torch.bfloat16)
        bf16 = getattr(transformers, architecture).from_pretrained(str(Path(folder) / "bf16"),
                                                                   dtype=torch.float32).eval()
        ours = load_hf_model(Path(folder) / "bf16").construct(ms.Tensor(ids)).asnumpy()
        out["bf16"] = float(np.abs(ours - reference_logits(bf16, ids)).max())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma list of fixture names (default: all)")
    names = (parser.parse_args().only or ",".join(sorted(FIXTURES))).split(",")
    unknown = [n for n in names if n not in FIXTURES]
    if unknown:
        parser.error(f"unknown fixture(s) {', '.join(unknown)}; known: {', '.join(sorted(FIXTURES))}")
    print("max |Δlogits| vs transformers (tolerance 1e-4), batch 4 x 64 tokens, fp32 compute")
    print(f"| {'fixture':30} | architecture | composed | fused kernels | bf16-stored | kernels |")
    print("|---|---|---|---|---|---|")
    for name in names:
        d = max_abs_diffs(name)
        fused_cell = "-" if d["fused"] is None else f"{d['fused']:.2e}"
        print(f"| {name:30} | {FIXTURES[name][0]} | {d['composed']:.2e} | {fused_cell} | {d['bf16']:.2e} "
              f"| {d['kernels']} |", flush=True)


if __name__ == "__main__":
    main()
