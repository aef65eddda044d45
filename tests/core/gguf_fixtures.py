"""Runs to export to GGUF without training them: tests/core/tiny_setup.py's workspace (a byte-level BPE
tokenizer with a ChatML template, an alpaca task, its run config), its model optionally replaced by a
transformers-made one of another family (tests/core/hf_fixtures.py's configs), and one checkpoint
holding a random LoRA adapter big enough to change every answer, saved as core.train saves one
(core.run.ckpt_store: manifest, best and last pointers)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import yaml

from core.run.ckpt_store import save_train_checkpoint
from core.run.rundir import RunDir
from core.spec.model_args import file_sha256, read_model_args, weight_files
from tests.core.tiny_setup import make_workspace

STEP = 4
ATTENTION = ("q_proj", "k_proj", "v_proj", "o_proj")


def replace_model(root: Path, config_cls: str, model_cls: str, config: dict, seed: int = 0) -> None:
    """root/tiny-model's weights and config.json replaced by a transformers `model_cls` of the
    tokenizer's vocabulary (+3 spare rows, as family_fixtures.family_workspace does)."""
    from core.data.tokenizer import Tokenizer
    from tests.core.hf_fixtures import COMMON, build_hf_model
    folder = root / "tiny-model"
    vocab = Tokenizer.from_dir(folder).vocab_size
    cfg = {**COMMON, **config, "vocab_size": vocab + 3, "pad_token_id": 0, "eos_token_id": 2, "bos_token_id": 1}
    for stale in ("config.json", "model.safetensors"):
        (folder / stale).unlink()
    build_hf_model(config_cls, model_cls, cfg, seed).save_pretrained(str(folder), safe_serialization=True)


def lora_tensors(model_dir: Path, rank: int, targets, seed: int = 0, scale: float = 0.2) -> dict[str, np.ndarray]:
    """Random A (rank, in) and B (out, rank) for every 2-D projection named in `targets`."""
    rng = np.random.default_rng(seed)
    tensors = {}
    for name, shape in read_model_args(model_dir).parameter_shapes().items():
        module = name.removesuffix(".weight")
        if len(shape) == 2 and module.rsplit(".", 1)[-1] in targets:
            out, inp = shape
            tensors[f"{module}.lora_a"] = (scale * rng.standard_normal((rank, inp))).astype(np.float32)
            tensors[f"{module}.lora_b"] = (scale * rng.standard_normal((out, rank))).astype(np.float32)
    return tensors


def fake_lora_run(root: Path, model=None, rank: int = 4, alpha: float = 8.0, targets=ATTENTION + (
        "gate_proj", "up_proj", "down_proj"), seed: int = 0) -> Path:
    """A run folder whose best (= last) checkpoint is a random LoRA adapter on root/tiny-model.
    `model`: (config class, model class, config) of hf_fixtures to build instead of the Llama."""
    config_path = make_workspace(root)
    if model is not None:
        replace_model(root, *model)
    model_dir = root / "tiny-model"
    config = yaml.safe_load(config_path.read_text())
    config["lora"] = {"rank": rank, "alpha": alpha, "dropout": 0.0, "target_modules": list(targets)}
    run = RunDir.create(root / "runs", "fake-run", yaml.safe_dump(config))
    state = {"step": STEP, "method": "lora", "base_model": {"path": str(model_dir),
                                                            "sha256": file_sha256(weight_files(model_dir))},
             "lora": config["lora"], "config": config}
    save_train_checkpoint(run.checkpoints_dir, STEP, lora_tensors(model_dir, rank, targets, seed), {}, state,
                          pointers=("best", "last"))
    return run.path


def read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))
