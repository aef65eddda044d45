"""Exports load in Hugging Face peft / transformers and give mindtune's logits to <= 1e-4 (fp32)."""
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

import mindspore as ms

from core.engine.export import ExportError, export_run, load_trained_model
from core.export import main as export_main
from core.engine.model import CausalLM, ModelArgs
from core.train import main as train_main

from tests import skips
from tests.core.tiny_setup import make_workspace

torch = skips.module("torch")
transformers = skips.module("transformers")

TOLERANCE = 1e-4


def _finished_run(root: Path, *overrides: str) -> Path:
    config = make_workspace(root)
    assert train_main(["--config", str(config), "train.max_steps=4", "train.eval_every=4",
                       "eval.downstream=false", "train.learning_rate=0.05", *overrides]) == 0
    return next(p for p in (root / "runs").iterdir() if not p.is_symlink())


@pytest.fixture(scope="module")
def lora_run(tmp_path_factory):
    return _finished_run(tmp_path_factory.mktemp("lora"))


@pytest.fixture(scope="module")
def ids():
    return np.random.default_rng(0).integers(3, 250, (2, 20)).astype(np.int32)


def _ours(run: Path, ids) -> np.ndarray:
    model, _ = load_trained_model(run / "checkpoints" / "best")
    return model.construct(ms.Tensor(ids)).asnumpy()


def _hf_logits(model, ids) -> np.ndarray:
    with torch.no_grad():
        return model(torch.tensor(ids, dtype=torch.long)).logits.float().numpy()


@pytest.mark.slow
def test_peft_adapter_loads_in_peft_with_equal_logits(lora_run, ids):
    peft = skips.module("peft")
    out = export_run(lora_run, "best", "peft")
    config = json.loads((out / "adapter_config.json").read_text())
    assert config["peft_type"] == "LORA" and config["r"] == 4 and config["lora_alpha"] == 8
    base = transformers.AutoModelForCausalLM.from_pretrained(config["base_model_name_or_path"]).eval()
    base_logits = _hf_logits(base, ids)
    adapted = peft.PeftModel.from_pretrained(base, str(out)).eval()
    ours = _ours(lora_run, ids)
    assert np.abs(_hf_logits(adapted, ids) - ours).max() <= TOLERANCE
    assert np.abs(base_logits - ours).max() > 1e-3, "the adapter must change the model"


@pytest.mark.slow  # its module fixture trains a run
def test_merged_folder_loads_in_transformers_with_equal_logits(lora_run, ids):
    out = export_run(lora_run, "best", "merged")
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= {
        p.name for p in out.iterdir()}
    merged = transformers.AutoModelForCausalLM.from_pretrained(str(out)).eval()
    assert np.abs(_hf_logits(merged, ids) - _ours(lora_run, ids)).max() <= TOLERANCE
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(out))
    assert tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False).startswith("<|im_start|>user")


@pytest.mark.slow
def test_mindspore_checkpoint_reloads_with_equal_logits(lora_run, ids):
    out = export_run(lora_run, "last", "mindspore", make_zip=True)
    assert out.suffix == ".zip"
    folder = out.with_suffix("")
    model = CausalLM(ModelArgs.from_dir(folder))
    not_loaded, _ = ms.load_param_into_net(model, ms.load_checkpoint(str(folder / "model.ckpt")))
    assert not not_loaded
    logits = model.construct(ms.Tensor(ids)).asnumpy()
    ours, _ = load_trained_model(lora_run / "checkpoints" / "last")
    assert np.abs(logits - ours.construct(ms.Tensor(ids)).asnumpy()).max() <= TOLERANCE
    with zipfile.ZipFile(out) as archive:
        assert f"{folder.name}/model.ckpt" in archive.namelist()


@pytest.mark.slow
def test_full_finetune_exports_merged_but_not_peft(tmp_path, ids):
    run = _finished_run(tmp_path, "method=full", "train.learning_rate=0.003")
    with pytest.raises(ExportError, match="no adapter"):
        export_run(run, "best", "peft")
    out = export_run(run, "best", "merged")
    merged = transformers.AutoModelForCausalLM.from_pretrained(str(out)).eval()
    assert np.abs(_hf_logits(merged, ids) - _ours(run, ids)).max() <= TOLERANCE


def test_cli_reports_missing_checkpoint(tmp_path, capsys):
    (tmp_path / "checkpoints").mkdir()
    assert export_main(["--run", str(tmp_path), "--format", "merged"]) == 2
    assert "no 'best' checkpoint" in capsys.readouterr().err
