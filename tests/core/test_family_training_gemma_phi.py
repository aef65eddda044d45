"""Each new family end to end on a tiny checkpoint made by transformers: LoRA and full fine-tuning
through `python -m core.train` (validation loss falls, the kernels that ran are named, either
resumes exactly, the memory estimate holds), the PEFT adapter in peft and the merged folder in
transformers with mindtune's logits, and the console's catalog row with the family's LoRA target
names.

Families: Gemma 2, Gemma 3 text (Gemma3ForCausalLM) and as Gemma3ForConditionalGeneration (its
language model; the vision tower is carried through the export), Phi-3 (sliding window) and
Phi-4-mini's shape of Phi3ForCausalLM (fused qkv_proj / gate_up_proj, partial rotary, LongRoPE
beyond its original context)."""
import json

import numpy as np
import pytest

import mindspore as ms

import core.engine.fused as fused
from core.engine.export import export_run, load_trained_model

from tests import skips
from tests.core.family_fixtures import FamilyRuns, run_records

torch = skips.module("torch")
transformers = skips.module("transformers")
pytestmark = pytest.mark.slow

TOLERANCE = 1e-4
PHI_TARGETS = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")
# name -> (LoRA target_modules (None: the config default, Llama's names), LoRA layers, projections)
FAMILIES = {
    "gemma2": (None, 21, ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")),
    "gemma3": (None, 21, ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")),
    "gemma3-vision": (None, 21, ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")),
    "phi3": (PHI_TARGETS, 8, PHI_TARGETS),
    "phi4-mini": (PHI_TARGETS, 8, PHI_TARGETS),
}


_RUNS: dict[str, FamilyRuns] = {}  # one per family, whichever fixture asks first


def family_runs(name: str, tmp_path_factory) -> FamilyRuns:
    if name not in _RUNS:
        _RUNS[name] = FamilyRuns(tmp_path_factory.mktemp(name), name, FAMILIES[name][0])
    return _RUNS[name]


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def runs(request, tmp_path_factory) -> FamilyRuns:
    return family_runs(request.param, tmp_path_factory)


# A resume restores the same state whatever the family: checked once per engine path (tests/core/
# test_family_training.py says which test holds which), here Phi-3's packed qkv and gate_up projections
RESUMED = "phi3"


@pytest.fixture(scope="module")
def resumed_family(tmp_path_factory) -> FamilyRuns:
    return family_runs(RESUMED, tmp_path_factory)


@pytest.fixture(scope="module")
def ids():
    return np.random.default_rng(0).integers(3, 290, (2, 20)).astype(np.int32)  # the tokenizer's ids


def _hf_class(runs: FamilyRuns):
    arch = json.loads((runs.model_dir / "config.json").read_text())["architectures"][0]
    return getattr(transformers, arch)


def _hf_logits(model, ids) -> np.ndarray:
    with torch.no_grad():
        return model.eval()(torch.tensor(ids, dtype=torch.long)).logits.float().numpy()


def _ours(run, ids) -> np.ndarray:
    model, _ = load_trained_model(run / "checkpoints" / "best")
    return model.construct(ms.Tensor(ids)).asnumpy()


def test_lora_fine_tune_lowers_validation_loss_and_names_its_kernels(runs):
    run = runs.run("lora")
    status = json.loads((run / "status.json").read_text())
    assert status["state"] == "finished" and status["final"]["steps"] == 8
    evals = run_records(run, "eval")
    assert [r["step"] for r in evals] == [0, 4, 8]
    assert evals[-1]["val_loss"] < evals[0]["val_loss"] - 0.1
    setup = next(r for r in run_records(run, "event") if r["event"] == "setup")
    assert setup["lora_modules"] == FAMILIES[runs.name][1]
    if fused.expected("cpu", "float32", "O0"):  # every part of these families runs in a fused kernel
        assert setup["kernels"] == "fused" and "kernels fused" in setup["message"]
    else:
        assert setup["kernels"].startswith("composed: ")


def test_memory_estimate_is_within_15_percent_of_the_peak(runs):
    import core.spec.memory as memory
    from core.spec.config import load_config
    from core.spec.model_args import ModelArgs
    run = runs.run("lora")
    setup = next(r for r in run_records(run, "event") if r["event"] == "setup")
    measured = json.loads((run / "status.json").read_text())["final"]["peak_mem_mb"]
    estimate = memory.estimate_memory(load_config(runs.config, runs.overrides), ModelArgs.from_dir(runs.model_dir),
                                      setup["seq_len"])
    assert abs(estimate.total_mb - measured) <= 0.15 * measured, (estimate.total_mb, measured)


# method -> (the uninterrupted run, the run resumed from its checkpoint, the steps resumed)
RESUMES = {"lora": ("lora", "resumed", [5, 6, 7, 8]), "full": ("full", "full-resumed", [3, 4])}


@pytest.mark.parametrize("method", sorted(RESUMES))
def test_resume_matches_the_uninterrupted_run(resumed_family, method):
    """LoRA resumed from step 4 of 8, a full fine-tune from step 2 of 4 (every weight and AdamW's
    moments come back): the resumed steps repeat the uninterrupted run's losses."""
    runs = resumed_family
    first, resumed, steps = RESUMES[method]
    full = {r["step"]: r["loss"] for r in run_records(runs.run(first), "train")}
    tail = {r["step"]: r["loss"] for r in run_records(runs.run(resumed), "train")}
    assert sorted(tail) == steps
    for step in tail:
        assert abs(tail[step] - full[step]) <= 1e-5, (step, tail[step], full[step])


def test_peft_adapter_loads_in_peft_with_equal_logits(runs, ids):
    peft = skips.module("peft")
    run = runs.run("lora")
    out = export_run(run, "best", "peft")
    base = _hf_class(runs).from_pretrained(str(runs.model_dir))
    base_logits = _hf_logits(base, ids)
    adapted = peft.PeftModel.from_pretrained(base, str(out))
    wrapped = [n for n, m in adapted.named_modules() if hasattr(m, "lora_A") and "lora_A" in dict(m.named_children())]
    assert len(wrapped) == FAMILIES[runs.name][1]  # the vision tower's layers are not adapted
    ours = _ours(run, ids)
    assert np.abs(_hf_logits(adapted, ids) - ours).max() <= TOLERANCE
    assert np.abs(base_logits - ours).max() > 1e-3, "the adapter must change the model"


@pytest.mark.parametrize("kind", ["lora", "full"])
def test_merged_folder_loads_in_transformers_with_equal_logits(runs, kind, ids):
    from safetensors.numpy import load_file
    run = runs.run(kind)
    if kind == "full":
        evals = run_records(run, "eval")
        assert evals[-1]["val_loss"] < evals[0]["val_loss"]
    out = export_run(run, "best", "merged")
    merged = _hf_class(runs).from_pretrained(str(out))
    assert np.abs(_hf_logits(merged, ids) - _ours(run, ids)).max() <= TOLERANCE
    base, exported = load_file(str(runs.model_dir / "model.safetensors")), load_file(str(out / "model.safetensors"))
    assert set(exported) == set(base)  # the base's own layout, vision tower included
    vision = [k for k in base if k.startswith(("vision_tower.", "multi_modal_projector."))]
    assert bool(vision) == (runs.name == "gemma3-vision")
    for key in vision:
        assert exported[key].dtype == base[key].dtype and np.array_equal(exported[key], base[key]), key


def test_catalog_row_and_lora_target_names(runs):
    from app.data.catalog import describe
    entry = describe(runs.model_dir)
    assert entry.loadable, entry.reason
    hf = _hf_class(runs).from_pretrained(str(runs.model_dir))
    text = hf.model.language_model if runs.name == "gemma3-vision" else hf
    assert entry.num_parameters == sum(p.numel() for p in text.parameters())  # the language model's
    assert (entry.architecture, entry.stored_dtype, entry.context_length) == (
        _hf_class(runs).__name__, "float32", 128)
    assert entry.projection_names == FAMILIES[runs.name][2]
