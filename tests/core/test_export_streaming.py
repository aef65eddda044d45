"""Exports streamed without MindSpore (core/engine/export.py): the PEFT adapter straight from the
checkpoint's tensors, and the merged model written shard by shard in the base's stored dtype (bf16
stays bf16, sharded like the base with its index), or in float32 with `--dtype float32`."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from core.engine.export import ExportError, export_run
from core.export import main as export_main
from core.spec.model_args import INDEX_NAME
from core.train import main as train_main

from tests import skips
from tests.core.tiny_setup import make_workspace

torch = skips.module("torch")
transformers = skips.module("transformers")
safetensors_torch = skips.module("safetensors.torch")

REPO = Path(__file__).resolve().parents[2]


def _bf16_sharded_base(root: Path) -> Path:
    """The workspace's tiny Llama saved again as the hub ships models: bf16, several shards + index."""
    source = root / "tiny-model"
    folder = root / "bf16-model"
    model = transformers.AutoModelForCausalLM.from_pretrained(str(source)).to(torch.bfloat16)
    model.save_pretrained(str(folder), safe_serialization=True, max_shard_size="12KB")
    for path in source.iterdir():
        if path.name.startswith("tokenizer") or path.name == "special_tokens_map.json":
            shutil.copyfile(path, folder / path.name)
    assert (folder / INDEX_NAME).is_file() and len(list(folder.glob("*.safetensors"))) > 2
    return folder


def _run(root: Path, *overrides: str) -> Path:
    config = make_workspace(root)
    base = _bf16_sharded_base(root)
    assert train_main(["--config", str(config), f"model.path={base}", "train.max_steps=4", "train.eval_every=4",
                       "eval.downstream=false", "train.learning_rate=0.05", *overrides]) == 0
    return next(p for p in (root / "runs").iterdir() if not p.is_symlink())


@pytest.fixture(scope="module")
def lora_run(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("bf16-lora"), "model.dtype=bfloat16")


@pytest.fixture(scope="module")
def ids():
    return np.random.default_rng(0).integers(3, 250, (2, 20)).astype(np.int64)


def _tensors(folder: Path) -> dict:
    out = {}
    for path in sorted(folder.glob("*.safetensors")):
        out.update(safetensors_torch.load_file(str(path)))
    return out


def _logits(folder: Path, ids, dtype=None) -> np.ndarray:
    model = transformers.AutoModelForCausalLM.from_pretrained(str(folder), dtype=dtype).eval()
    with torch.no_grad():
        return model.float()(torch.tensor(ids)).logits.numpy()


def _base(run: Path) -> Path:
    return Path(json.loads((run / "checkpoints" / "best" / "trainer_state.json").read_text())["base_model"]["path"])


@pytest.mark.slow
def test_merged_export_keeps_bf16_and_the_bases_shards(lora_run, ids):
    base = _base(lora_run)
    out = export_run(lora_run, "best", "merged")
    # sharded like the base: the same files, each with the same tensors, and an index that says so
    base_index = json.loads((base / INDEX_NAME).read_text())
    index = json.loads((out / INDEX_NAME).read_text())
    assert index["weight_map"] == base_index["weight_map"]
    assert sorted(p.name for p in out.glob("*.safetensors")) == sorted(p.name for p in base.glob("*.safetensors"))
    merged, original = _tensors(out), _tensors(base)
    assert index["metadata"]["total_size"] == sum(t.numel() * t.element_size() for t in merged.values())
    assert {t.dtype for t in merged.values()} == {torch.bfloat16}
    assert json.loads((out / "config.json").read_text())["dtype"] == "bfloat16"
    # only the adapted projections changed; everything else is the base's bytes
    changed = {name for name in merged if not torch.equal(merged[name], original[name])}
    assert changed and all(name.endswith("_proj.weight") for name in changed)
    # bf16 is the float32 merge rounded to nearest (what torch's cast does), tensor by tensor
    fp32 = export_run(lora_run, "best", "merged", dtype="float32")
    assert fp32.name.endswith("-float32") and json.loads((fp32 / "config.json").read_text())["dtype"] == "float32"
    full = _tensors(fp32)
    assert {t.dtype for t in full.values()} == {torch.float32} and set(full) == set(merged)
    for name, tensor in merged.items():
        assert torch.equal(tensor, full[name].to(torch.bfloat16)), name
    # it loads in transformers as bf16, and its logits are those of the float32 merge to 1e-2
    loaded = transformers.AutoModelForCausalLM.from_pretrained(str(out))
    assert loaded.dtype == torch.bfloat16
    difference = np.abs(_logits(out, ids) - _logits(fp32, ids)).max()
    assert 0 < difference <= 1e-2
    # the float32 merge is mindtune's trained model (mindtune computes in float32 from the bf16 base)
    from core.engine.export import load_trained_model
    import mindspore as ms
    model, _ = load_trained_model(lora_run / "checkpoints" / "best")
    ours = model.construct(ms.Tensor(ids.astype(np.int32))).asnumpy()
    assert np.abs(_logits(fp32, ids) - ours).max() <= 1e-4


@pytest.mark.slow
def test_peft_export_reads_the_checkpoint_without_mindspore(lora_run):
    code = ("import sys; from core.engine.export import export_run; "
            f"path = export_run({str(lora_run)!r}, 'best', 'peft'); "
            "assert 'mindspore' not in sys.modules, 'the PEFT export imported MindSpore'; print(path)")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    out = Path(result.stdout.strip().splitlines()[-1])
    adapter = safetensors_torch.load_file(str(out / "adapter_model.safetensors"))
    trained = safetensors_torch.load_file(str(lora_run / "checkpoints" / "best" / "weights.safetensors"))
    assert len(adapter) == len(trained) > 0
    for name, tensor in trained.items():
        module, kind = name.rsplit(".", 1)
        key = f"base_model.model.{module}.{'lora_A' if kind == 'lora_a' else 'lora_B'}.weight"
        assert torch.equal(adapter[key], tensor), name
    config = json.loads((out / "adapter_config.json").read_text())
    assert config["r"] == 4 and config["lora_alpha"] == 8
    assert sorted(config["target_modules"]) == sorted({n.rsplit(".", 2)[-2] for n in trained})


@pytest.mark.slow
def test_full_finetune_of_a_bf16_base_exports_bf16_rounded_from_the_trained_weights(tmp_path, ids):
    run = _run(tmp_path, "method=full", "train.learning_rate=0.003")
    out = export_run(run, "best", "merged")
    trained = safetensors_torch.load_file(str(run / "checkpoints" / "best" / "weights.safetensors"))
    merged = _tensors(out)
    assert {t.dtype for t in merged.values()} == {torch.bfloat16}
    # the tied embedding is written once; every other tensor is the trained float32 one, rounded
    assert set(merged) == set(trained)
    for name, tensor in trained.items():
        assert torch.equal(merged[name], tensor.to(torch.bfloat16)), name
    assert np.abs(_logits(out, ids) - _logits(export_run(run, "best", "merged", dtype="float32"), ids)).max() <= 1e-2


def test_dtype_is_for_merged_exports_and_named_when_wrong(lora_run, capsys):
    with pytest.raises(ExportError, match="merged export only"):
        export_run(lora_run, "best", "peft", dtype="float32")
    with pytest.raises(SystemExit):
        export_main(["--run", str(lora_run), "--format", "merged", "--dtype", "int8"])
    assert "invalid choice: 'int8'" in capsys.readouterr().err
