"""Loading Hugging Face folders: every bad checkpoint is one clear error naming the file or tensor."""
import importlib
import json
import os

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

import mindspore as ms

from core.engine.checkpoint import check_dtype_supported, load_hf_model
from core.spec.errors import CheckpointError
from core.spec.model_args import weight_files
from tests.core.hf_fixtures import make_hf_model, save_hf_model


@pytest.fixture(scope="module")
def good_folder(tmp_path_factory):
    return save_hf_model(make_hf_model("llama-gqa-llama3-rope"), tmp_path_factory.mktemp("good"))


def _copy(src, dst, skip=()):
    dst.mkdir(exist_ok=True)
    for f in src.iterdir():
        if f.name not in skip:
            (dst / f.name).write_bytes(f.read_bytes())
    return dst


def test_missing_folder(tmp_path):
    with pytest.raises(CheckpointError, match="not a folder"):
        load_hf_model(tmp_path / "nope")


def test_no_config_json(good_folder, tmp_path):
    folder = _copy(good_folder, tmp_path / "m", skip={"config.json"})
    with pytest.raises(CheckpointError, match=r"config\.json: not found.*LlamaForCausalLM"):
        load_hf_model(folder)


def test_unknown_model_type(good_folder, tmp_path):
    folder = _copy(good_folder, tmp_path / "m")
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(architectures=["FalconForCausalLM"], model_type="falcon")
    (folder / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match=r"FalconForCausalLM.*not supported.*Qwen2ForCausalLM"):
        load_hf_model(folder)


def test_pickle_only_folder_is_refused(good_folder, tmp_path):
    folder = _copy(good_folder, tmp_path / "m", skip={"model.safetensors"})
    (folder / "pytorch_model.bin").write_bytes(b"\x80\x04not really a pickle")
    with pytest.raises(CheckpointError, match=r"pytorch_model\.bin.*safetensors only"):
        load_hf_model(folder)


def test_truncated_safetensors(good_folder, tmp_path):
    folder = _copy(good_folder, tmp_path / "m")
    data = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=r"model\.safetensors: cannot read safetensors"):
        load_hf_model(folder)


def _rewrite(folder, change):
    tensors = load_file(str(folder / "model.safetensors"))
    change(tensors)
    save_file(tensors, str(folder / "model.safetensors"))


def test_missing_tensor_is_named(good_folder, tmp_path):
    folder = _copy(good_folder, tmp_path / "m")
    _rewrite(folder, lambda t: t.pop("model.layers.1.mlp.up_proj.weight"))
    with pytest.raises(CheckpointError, match=r"missing tensor model\.layers\.1\.mlp\.up_proj\.weight"):
        load_hf_model(folder)


def test_extra_tensor_is_named(good_folder, tmp_path):
    folder = _copy(good_folder, tmp_path / "m")
    _rewrite(folder, lambda t: t.update({"model.layers.0.self_attn.q_proj.bias": np.zeros(64, np.float32)}))
    with pytest.raises(CheckpointError, match=r"unexpected tensor model\.layers\.0\.self_attn\.q_proj\.bias"):
        load_hf_model(folder)


def test_shape_mismatch_is_named(good_folder, tmp_path):
    folder = _copy(good_folder, tmp_path / "m")
    _rewrite(folder, lambda t: t.update({"model.norm.weight": np.ones(65, np.float32)}))
    with pytest.raises(CheckpointError, match=r"model\.norm\.weight has shape \(65,\), config\.json implies \(64,\)"):
        load_hf_model(folder)


@pytest.mark.parametrize("name, change, message", [
    # Qwen3's QK-norm is per head (head_dim 24), OLMo 2's over the whole projection (4 heads x 16)
    ("qwen3-untied", lambda t: t.update({"model.layers.0.self_attn.q_norm.weight": np.ones(96, np.float32)}),
     r"model\.layers\.0\.self_attn\.q_norm\.weight has shape \(96,\), config\.json implies \(24,\)"),
    ("olmo2", lambda t: t.update({"model.layers.1.self_attn.k_norm.weight": np.ones(16, np.float32)}),
     r"model\.layers\.1\.self_attn\.k_norm\.weight has shape \(16,\), config\.json implies \(32,\)"),
    # GLM-4's fused gate_up_proj holds both halves; one half's size is a mismatch
    ("glm4", lambda t: t.update({"model.layers.0.mlp.gate_up_proj.weight": np.ones((96, 64), np.float32)}),
     r"model\.layers\.0\.mlp\.gate_up_proj\.weight has shape \(96, 64\), config\.json implies \(192, 64\)"),
    ("glm4", lambda t: t.pop("model.layers.1.post_self_attn_layernorm.weight"),
     r"missing tensor model\.layers\.1\.post_self_attn_layernorm\.weight"),
    # split halves where the family stores one fused tensor: named, not silently ignored
    ("glm4", lambda t: t.update({"model.layers.0.mlp.up_proj.weight": np.ones((96, 64), np.float32)}),
     r"unexpected tensor model\.layers\.0\.mlp\.up_proj\.weight"),
    ("olmo2", lambda t: t.pop("model.layers.0.post_feedforward_layernorm.weight"),
     r"missing tensor model\.layers\.0\.post_feedforward_layernorm\.weight"),
    # Mistral's explicit head_dim (16): a q_proj of 4 heads x 24 does not fit it
    ("mistral-window", lambda t: t.update({"model.layers.0.self_attn.q_proj.weight": np.ones((96, 64), np.float32)}),
     r"model\.layers\.0\.self_attn\.q_proj\.weight has shape \(96, 64\), config\.json implies \(64, 64\)"),
], ids=["qwen3-qnorm", "olmo2-knorm", "glm4-gate-up", "glm4-post-norm", "glm4-split-mlp", "olmo2-post-norm",
        "mistral-head-dim"])
def test_family_tensor_not_matching_the_config_is_named(name, change, message, tmp_path):
    """Each family's own tensors (QK-norms, fused MLP, extra norms) are checked against config.json
    before any parameter is written, and the error names the tensor."""
    folder = save_hf_model(make_hf_model(name), tmp_path / "m")
    _rewrite(folder, change)
    with pytest.raises(CheckpointError, match=message):
        load_hf_model(folder)


def test_missing_shard_is_named(tmp_path):
    folder = save_hf_model(make_hf_model("qwen2-tied"), tmp_path / "m", max_shard_size="40KB")
    shard = sorted(folder.glob("model-*.safetensors"))[-1]
    shard.unlink()
    with pytest.raises(CheckpointError, match=f"shard {shard.name} is listed but missing"):
        weight_files(folder)


def test_bfloat16_compute_refused_on_cpu():
    assert ms.get_context("device_target") == "CPU"
    with pytest.raises(CheckpointError, match="CPU kernels do not support bf16"):
        check_dtype_supported("bfloat16")
    with pytest.raises(CheckpointError, match="float32"):
        check_dtype_supported("int8")


def test_nothing_loaded_when_a_tensor_is_bad(good_folder, tmp_path):
    """Shapes are all checked before any parameter is written: no half-loaded model."""
    from core.engine.checkpoint import load_hf_weights, read_safetensors
    from core.engine.model import CausalLM, ModelArgs
    model = CausalLM(ModelArgs.from_dir(good_folder))
    before = {p.name: p.asnumpy().copy() for p in model.get_parameters()}
    tensors = read_safetensors(weight_files(good_folder))
    tensors["model.norm.weight"] = np.ones(3, np.float32)
    with pytest.raises(CheckpointError):
        load_hf_weights(model, tensors, "x")
    assert all(np.array_equal(before[p.name], p.asnumpy()) for p in model.get_parameters())


def test_failed_save_keeps_the_previous_checkpoint(tmp_path):
    import core.engine.checkpoint as ckpt
    import core.run.ckpt_store as ckpt_store
    weights = {"w": np.ones((2, 2), np.float32)}
    ckpt_store.save_train_checkpoint(tmp_path, 4, weights, {"global_step": np.array([4], np.int32)}, {"step": 4},
                               pointers=("last",))

    def broken_read():
        raise OSError("the device went away")
    broken = {"w": ckpt_store.TensorSource((2, 2), np.dtype(np.float32), broken_read)}
    with pytest.raises(OSError, match="the device went away"):
        ckpt_store.save_train_checkpoint(tmp_path, 8, broken, {}, {"step": 8}, pointers=("last",))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last", "step-4"]
    loaded, _, state = ckpt.load_train_checkpoint(tmp_path / "last")
    assert state["step"] == 4 and np.array_equal(loaded["w"], weights["w"])


def test_resaving_a_step_is_a_new_revision_and_retention_keeps_pointers(tmp_path):
    import core.engine.checkpoint as ckpt
    import core.run.ckpt_store as ckpt_store
    for step in (2, 4, 6, 8):
        ckpt_store.save_train_checkpoint(tmp_path, step, {"w": np.full(3, step, np.float32)}, {}, {"step": step})
    ckpt_store.point(tmp_path, "best", 2)
    ckpt_store.point(tmp_path, "last", 8)
    assert ckpt_store.prune_checkpoints(tmp_path, keep_last_n=2) == [4]
    assert ckpt_store.checkpoint_steps(tmp_path) == [2, 6, 8]
    folder = ckpt_store.save_train_checkpoint(tmp_path, 8, {"w": np.zeros(3, np.float32)}, {}, {"step": 8})
    assert folder.name == "step-8-r2" and os.readlink(tmp_path / "last") == "step-8-r2"
    assert ckpt.load_train_checkpoint(tmp_path / "last")[0]["w"].tolist() == [0, 0, 0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best", "last", "step-2", "step-6", "step-8-r2"]


def test_corrupt_or_incomplete_checkpoint_is_an_error(tmp_path):
    import core.engine.checkpoint as ckpt
    import core.run.ckpt_store as ckpt_store
    folder = ckpt_store.save_train_checkpoint(tmp_path, 1, {"w": np.ones(3, np.float32)}, {}, {"step": 1})
    (folder / "weights.safetensors").write_bytes(b"garbage")
    with pytest.raises(CheckpointError, match=r"weights\.safetensors: 7 bytes, the manifest recorded \d+"):
        ckpt.load_train_checkpoint(folder)
    (folder / "manifest.json").unlink()  # a checkpoint saved before manifests existed: headers still checked
    with pytest.raises(CheckpointError, match="weights.safetensors: cannot read"):
        ckpt.load_train_checkpoint(folder)
    (folder / "trainer_state.json").unlink()
    with pytest.raises(CheckpointError, match="incomplete checkpoint, trainer_state.json is missing"):
        ckpt.load_train_checkpoint(folder)


def test_loading_skips_random_init_yet_later_draws_are_unchanged(good_folder):
    """load_hf_model builds the model without sampling its random weights (they are all loaded
    next): the loaded weights, and the LoRA A matrices drawn after loading under the same seed,
    equal those of a model that did sample them first."""
    from core.engine.checkpoint import load_hf_weights, read_safetensors
    from core.engine.lora import inject_lora
    from core.engine.model import CausalLM
    from core.spec.model_args import read_model_args
    results = {}
    for random_init in (True, False):
        ms.set_seed(0)
        model = CausalLM(read_model_args(good_folder), "float32", random_init=random_init)
        first = model.model.layers[0].mlp.up_proj.weight.asnumpy().copy()
        assert first.any() == random_init  # zeros until loaded when not sampled
        load_hf_weights(model, read_safetensors(weight_files(good_folder)), str(good_folder))
        inject_lora(model, 4, 8.0, 0.0, ["q_proj", "v_proj"])
        results[random_init] = {p.name: p.asnumpy() for p in model.get_parameters()}
    assert results[True].keys() == results[False].keys()
    assert any(".lora_a" in name for name in results[True])
    for name, value in results[True].items():
        np.testing.assert_array_equal(results[False][name], value, err_msg=name)
    ms.set_seed(0)
    loaded = load_hf_model(good_folder)  # the path the worker takes
    inject_lora(loaded, 4, 8.0, 0.0, ["q_proj", "v_proj"])
    for p in loaded.get_parameters():
        np.testing.assert_array_equal(p.asnumpy(), results[True][p.name], err_msg=p.name)


def _advised_hugepages(array) -> bool:
    """Whether the mapping holding the middle of `array` carries madvise(MADV_HUGEPAGE) (`hg` in its
    VmFlags; NumPy advises from the first page boundary on, which splits the mapping there)."""
    address = array.__array_interface__["data"][0] + array.nbytes // 2
    inside = False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                start, end = (int(v, 16) for v in head.split("-"))
                inside = start <= address < end
            elif inside and head == "VmFlags:":
                return "hg" in line.split()[1:]
    raise AssertionError("the array's mapping is not in /proc/self/smaps")


def _numpy_advises_hugepages() -> bool:
    switch = importlib.import_module("numpy._core.multiarray")._set_madvise_hugepage
    before = switch(True)
    switch(before)
    return before


def test_the_weights_are_loaded_without_numpy_s_hugepage_advice(good_folder, monkeypatch):
    """NumPy advises huge pages for large arrays; on a fragmented machine each first touch then compacts
    memory synchronously (the 0.5B shape's model load 10-14 s -> 3.3 s without). The model is built and
    read without the advice, and NumPy's setting is back afterwards."""
    from core.engine import checkpoint
    assert _numpy_advises_hugepages()  # NumPy's default here: what the load switches off
    assert _advised_hugepages(np.empty(64 << 20, np.uint8))
    with checkpoint.without_hugepage_advice():
        assert not _advised_hugepages(np.empty(64 << 20, np.uint8))
    assert _numpy_advises_hugepages()

    seen = []
    build = checkpoint.CausalLM

    def spying(*args, **kwargs):
        seen.append(_numpy_advises_hugepages())
        return build(*args, **kwargs)

    monkeypatch.setattr(checkpoint, "CausalLM", spying)
    model = load_hf_model(good_folder)
    assert seen == [False] and model.get_parameters() is not None
    assert _numpy_advises_hugepages()
