"""Every family end to end through `python -m core.train`: a tiny LoRA fine-tune lowers the
validation loss, a resume continues it exactly, and its exports load in peft and transformers
with mindtune's logits; a full fine-tune lowers it too, resumes exactly and exports a merged folder
transformers reads alike.

Families join by adding their fixture name to FAMILIES (tests/core/hf_fixtures.py ARCHITECTURES)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import mindspore as ms

import core.engine.fused as fused
from core.engine.export import export_run, load_trained_model
from core.data.tokenizer import Tokenizer
from core.train import main as train_main

from tests import skips
from tests.core.hf_fixtures import make_hf_model, save_hf_model
from tests.core.tiny_setup import make_workspace

torch = skips.module("torch")
transformers = skips.module("transformers")
peft = skips.module("peft")

FAMILIES = ["mistral-window", "qwen3-untied", "glm4", "olmo2", "mixtral"]  # llama and qwen2: tests/core/test_train.py, test_export.py
TOLERANCE = 1e-4
STEPS = ["train.max_steps=8", "train.eval_every=4", "train.save_every=4", "eval.downstream=false"]
# A resume restores the same state whatever the family (weights and AdamW's moments by name, the schedule, the
# RNG, the data position): it is checked once per engine path, not per family. Dense LoRA: Llama
# (test_train.py), Qwen3 with its untied head here and Phi-3's packed projections (test_family_training_gemma_phi.py);
# dense full fine-tune: Qwen3 here and Phi-3; the experts (LoRA and full): test_moe.py.
RESUMED = "qwen3-untied"


def family_workspace(root: Path, name: str) -> Path:
    """tiny_setup's workspace (tokenizer, data, config) with its model replaced by a tiny random
    checkpoint of the family, written by transformers."""
    config = make_workspace(root)
    folder = root / "tiny-model"
    vocab = Tokenizer.from_dir(folder).vocab_size
    hf = make_hf_model(name, vocab_size=vocab, hidden_size=32, intermediate_size=64, max_position_embeddings=128)
    hf.config.eos_token_id, hf.config.pad_token_id = 2, 0
    (folder / "model.safetensors").unlink()
    save_hf_model(hf, folder)
    return config


def finished_run(config: Path, *overrides: str) -> Path:
    runs = config.parent / "runs"
    before = set(runs.glob("*")) if runs.exists() else set()
    assert train_main(["--config", str(config), *STEPS, *overrides]) == 0
    return next(p for p in runs.iterdir() if p not in before and not p.is_symlink())


def records(run: Path, kind: str) -> list[dict]:
    return [r for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if r["kind"] == kind]


def hf_logits(model, ids) -> np.ndarray:
    with torch.no_grad():
        return model(torch.tensor(ids, dtype=torch.long)).logits.float().numpy()


def ours(run: Path, ids) -> np.ndarray:
    model, _ = load_trained_model(run / "checkpoints" / "best")
    return model.construct(ms.Tensor(ids)).asnumpy()


@pytest.mark.slow
@pytest.mark.parametrize("name", FAMILIES)
def test_family_lora_trains_resumes_and_exports(name, tmp_path):
    config = family_workspace(tmp_path, name)
    run = finished_run(config, "train.learning_rate=0.02")
    evals = records(run, "eval")
    assert evals[-1]["val_loss"] < evals[0]["val_loss"] - 0.05, evals
    setup = next(r for r in records(run, "event") if r["event"] == "setup")
    # the fused kernels serve every part of these families (when this machine can build them)
    assert setup["kernels"] == "fused" if fused.expected("cpu", "float32", "O0") else setup["kernels"].startswith("composed")
    if name == RESUMED:
        resumed = finished_run(config, "train.learning_rate=0.02", f"run.resume={run / 'checkpoints' / 'step-4'}")
        full = {r["step"]: r["loss"] for r in records(run, "train")}
        tail = {r["step"]: r["loss"] for r in records(resumed, "train")}
        assert sorted(tail) == [5, 6, 7, 8]
        assert all(abs(tail[s] - full[s]) <= 1e-5 for s in tail), (tail, full)

    ids = np.random.default_rng(0).integers(3, 250, (2, 20)).astype(np.int32)
    mine = ours(run, ids)
    adapter = export_run(run, "best", "peft")
    base = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path / "tiny-model")).eval()
    base_logits = hf_logits(base, ids)
    adapted = peft.PeftModel.from_pretrained(base, str(adapter)).eval()
    assert np.abs(hf_logits(adapted, ids) - mine).max() <= TOLERANCE
    assert np.abs(base_logits - mine).max() > 1e-3, "the adapter must change the model"
    merged = transformers.AutoModelForCausalLM.from_pretrained(str(export_run(run, "best", "merged"))).eval()
    assert np.abs(hf_logits(merged, ids) - mine).max() <= TOLERANCE


@pytest.mark.slow
@pytest.mark.parametrize("name", FAMILIES)
def test_family_full_finetune_trains_resumes_and_exports(name, tmp_path):
    config = family_workspace(tmp_path, name)
    full_run = ("method=full", "train.learning_rate=0.003", "train.max_steps=4", "train.eval_every=4",
                "train.save_every=2")
    run = finished_run(config, *full_run)
    evals = records(run, "eval")
    assert evals[-1]["val_loss"] < evals[0]["val_loss"], evals
    if name == RESUMED:  # every weight and AdamW's moments come back: the resumed steps repeat the losses exactly
        resumed = finished_run(config, *full_run, f"run.resume={run / 'checkpoints' / 'step-2'}")
        first = {r["step"]: r["loss"] for r in records(run, "train")}
        tail = {r["step"]: r["loss"] for r in records(resumed, "train")}
        assert sorted(tail) == [3, 4] and all(abs(tail[s] - first[s]) <= 1e-5 for s in tail), (tail, first)
    ids = np.random.default_rng(1).integers(3, 250, (2, 20)).astype(np.int32)
    merged = transformers.AutoModelForCausalLM.from_pretrained(str(export_run(run, "best", "merged"))).eval()
    assert np.abs(hf_logits(merged, ids) - ours(run, ids)).max() <= TOLERANCE
