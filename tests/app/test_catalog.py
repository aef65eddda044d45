"""app.catalog: model folders described from config.json and safetensors headers; unloadable ones
listed with their reason."""
from __future__ import annotations

import json

from app.catalog import candidate_folders, describe, human_count, projection_names, scan_models

from tests.app.conftest import HIDDEN, write_model


def test_a_loadable_model_row(model_root):
    [entry] = scan_models([model_root])
    assert entry.loadable and entry.reason is None
    assert entry.architecture == "LlamaForCausalLM" and entry.family == "llama"
    assert entry.stored_dtype == "float32" and entry.context_length == 512
    assert entry.vocab_size > 0 and entry.num_parameters > entry.vocab_size * HIDDEN
    assert entry.projection_names == ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    row = entry.row()
    assert row[0] == entry.name and row[-1] == "ok"
    assert "LlamaForCausalLM" in entry.label and "ctx 512" in entry.label


def test_unloadable_folders_are_listed_with_their_reason(tmp_path, model_root):
    root = tmp_path / "models"
    (root / "pickled").mkdir(parents=True)
    (root / "pickled" / "config.json").write_text((model_root / "tiny" / "config.json").read_text())
    (root / "pickled" / "pytorch_model.bin").write_bytes(b"not really")
    (root / "gpt2").mkdir()
    (root / "gpt2" / "config.json").write_text(json.dumps({"architectures": ["GPT2LMHeadModel"]}))
    (root / "notes").mkdir()  # nothing model-like: not listed at all
    (root / "notes" / "readme.md").write_text("hi")
    entries = {e.path.name: e for e in scan_models([root])}
    assert set(entries) == {"pickled", "gpt2"}
    assert "pickle" in entries["pickled"].reason and not entries["pickled"].loadable
    assert "not supported" in entries["gpt2"].reason
    assert entries["gpt2"].row()[-1] == entries["gpt2"].reason
    assert entries["gpt2"].label.startswith("⚠")


def test_missing_tokenizer_is_a_reason(tmp_path, model_root):
    folder = tmp_path / "m"
    folder.mkdir()
    for name in ("config.json", "model.safetensors"):
        (folder / name).write_bytes((model_root / "tiny" / name).read_bytes())
    assert "tokenizer.json" in describe(folder).reason


def test_projection_names_come_from_the_weights(tmp_path):
    folder = write_model(tmp_path / "qwen", ["a b c"] * 20, architectures=["Qwen2ForCausalLM"], model_type="qwen2")
    names = projection_names([folder / "model.safetensors"], folder)
    assert names[:3] == ("q_proj", "k_proj", "v_proj") and "down_proj" in names


def test_org_name_layout_is_searched_two_levels_deep(tmp_path, model_root):
    nested = tmp_path / "root" / "org"
    nested.mkdir(parents=True)
    (nested / "model").symlink_to(model_root / "tiny")
    assert [p.name for p in candidate_folders(tmp_path / "root")] == ["model"]


def test_human_count():
    assert human_count(3_200_000) == "3.2M" and human_count(1_500_000_000) == "1.5B" and human_count(999) == "999"


def test_lora_boxes_are_the_family_names_and_its_defaults(tmp_path):
    """A GLM-4 folder: its fused MLP projection is a box, checked by default; a dense model's active
    parameters are all of them."""
    from core.model_args import ModelArgs
    folder = tmp_path / "glm4"
    folder.mkdir()
    config = {"architectures": ["Glm4ForCausalLM"], "model_type": "glm4", "vocab_size": 64, "hidden_size": 16,
              "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "head_dim": 8,
              "max_position_embeddings": 256, "torch_dtype": "bfloat16"}
    (folder / "config.json").write_text(json.dumps(config))
    from safetensors.numpy import save_file
    import numpy as np
    save_file({k: np.zeros(s, np.float32) for k, s in ModelArgs.from_hf_config(config).parameter_shapes().items()},
              str(folder / "model.safetensors"))
    (folder / "tokenizer.json").write_text("{}")
    entry = describe(folder)
    assert entry.loadable, entry.reason
    assert entry.projection_names == ("q_proj", "k_proj", "v_proj", "o_proj", "gate_up_proj", "down_proj")
    assert entry.default_targets == entry.projection_names
    assert entry.active_parameters == entry.num_parameters == ModelArgs.from_hf_config(config).num_parameters()
    assert entry.stored_dtype == "bfloat16" and entry.context_length == 256 and "Glm4ForCausalLM" in entry.label
