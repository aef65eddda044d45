"""app.data.catalog: model folders described from config.json and safetensors headers; unloadable ones
listed with their reason."""
from __future__ import annotations

import json

import pytest

from app.data.catalog import candidate_folders, describe, human_count, projection_names, scan_models

from tests import skips
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


def test_mixture_of_experts_lists_total_and_active_parameters_and_expert_targets(tmp_path):
    """A Qwen3-MoE folder (config and weight names only matter here): 4 experts of width 8, top 1,
    a dense first layer; the router is not offered as a LoRA target, the expert stacks are."""
    import numpy as np
    from safetensors.numpy import save_file
    folder = write_model(tmp_path / "moe", ["a b c"] * 20, architectures=["Qwen3MoeForCausalLM"],
                         model_type="qwen3_moe", num_experts=4, num_experts_per_tok=1, moe_intermediate_size=8,
                         mlp_only_layers=[0], head_dim=4)
    names = {"model.layers.1.mlp.gate.weight": (4, HIDDEN)}
    for e in range(4):
        names |= {f"model.layers.1.mlp.experts.{e}.{p}.weight": s for p, s in
                  (("gate_proj", (8, HIDDEN)), ("up_proj", (8, HIDDEN)), ("down_proj", (HIDDEN, 8)))}
    save_file({k: np.zeros(s, np.float32) for k, s in names.items()}, str(folder / "model.safetensors"))
    entry = describe(folder)
    assert entry.loadable, entry.reason
    expert = 3 * HIDDEN * 8
    assert entry.num_parameters - entry.active_parameters == 3 * expert  # 3 of the 4 experts idle per token
    # the dense layer's MLP names, then the expert stacks (down_proj names both: a suffix match)
    assert entry.projection_names == ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj",
                                      "gate_up_proj")
    assert entry.default_targets == ("q_proj", "k_proj", "v_proj", "o_proj", "gate_up_proj", "down_proj")
    text = f"{human_count(entry.active_parameters)} active of {human_count(entry.num_parameters)}"
    assert text in entry.label and entry.row()[2] == text


def test_lora_boxes_are_the_family_names_and_its_defaults(tmp_path):
    """A GLM-4 folder: its fused MLP projection is a box, checked by default; a dense model's active
    parameters are all of them."""
    from core.spec.model_args import ModelArgs
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


_LLAMA_BOXES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
_PHI_BOXES = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")
FAMILY_ROWS = {  # fixture -> (architecture, family, the LoRA boxes in the family's order, the checked ones)
    "qwen3-untied": ("Qwen3ForCausalLM", "qwen3", _LLAMA_BOXES, _LLAMA_BOXES),
    "mistral-window": ("MistralForCausalLM", "mistral", _LLAMA_BOXES, _LLAMA_BOXES),
    "glm4": ("Glm4ForCausalLM", "glm4", ("q_proj", "k_proj", "v_proj", "o_proj", "gate_up_proj", "down_proj"),
             ("q_proj", "k_proj", "v_proj", "o_proj", "gate_up_proj", "down_proj")),
    "olmo2": ("Olmo2ForCausalLM", "olmo2", _LLAMA_BOXES, _LLAMA_BOXES),
    "gemma2": ("Gemma2ForCausalLM", "gemma2", _LLAMA_BOXES, _LLAMA_BOXES),
    "gemma3": ("Gemma3ForCausalLM", "gemma3", _LLAMA_BOXES, _LLAMA_BOXES),
    "gemma3-vision": ("Gemma3ForConditionalGeneration", "gemma3", _LLAMA_BOXES, _LLAMA_BOXES),
    "phi3": ("Phi3ForCausalLM", "phi3", _PHI_BOXES, _PHI_BOXES),
    "phi4-mini": ("Phi3ForCausalLM", "phi3", _PHI_BOXES, _PHI_BOXES),
    # mixtures of experts: the expert stacks are boxes, the router (mlp.gate) is none
    "mixtral": ("MixtralForCausalLM", "mixtral", ("q_proj", "k_proj", "v_proj", "o_proj", "gate_up_proj",
                                                  "down_proj"),
                ("q_proj", "k_proj", "v_proj", "o_proj", "gate_up_proj", "down_proj")),
    "qwen3-moe-dense-layer": ("Qwen3MoeForCausalLM", "qwen3_moe", _LLAMA_BOXES + ("gate_up_proj",),
                              ("q_proj", "k_proj", "v_proj", "o_proj", "gate_up_proj", "down_proj")),
}


@pytest.mark.parametrize("fixture", sorted(FAMILY_ROWS))
def test_family_checkpoint_rows_as_transformers_saves_them(fixture, tmp_path):
    """A bf16 folder of each family, as transformers writes it: the picker's row has the
    architecture, transformers' parameter count (a mixture of experts: the total and the active
    one, the top-k of its experts; Gemma 3 with vision: its language model's), the context, the
    stored dtype; the LoRA boxes are the family's projections (QK-norm weights under self_attn and
    the vision tower's layers are not), the family's defaults checked."""
    torch = skips.module("torch")
    from tests.core.family_fixtures import make_any_model
    from tests.core.hf_fixtures import COMMON, save_hf_model
    hf = make_any_model(fixture)
    text = hf.model.language_model if fixture == "gemma3-vision" else hf
    count = text.num_parameters()
    cfg = text.config
    experts = getattr(cfg, "num_local_experts", None) or getattr(cfg, "num_experts", None)
    idle = 0
    if experts:  # the experts a token does not go through, in every sparse layer
        stacked = sum(p.numel() for name, p in hf.named_parameters() if ".experts." in name)
        idle = stacked * (experts - cfg.num_experts_per_tok) // experts
        assert idle > 0
    folder = save_hf_model(hf, tmp_path / fixture, dtype=torch.bfloat16)
    (folder / "tokenizer.json").write_text("{}")
    entry = describe(folder)
    architecture, family, boxes, checked = FAMILY_ROWS[fixture]
    assert entry.loadable, entry.reason
    assert (entry.architecture, entry.family, entry.stored_dtype) == (architecture, family, "bfloat16")
    assert (entry.num_parameters, entry.active_parameters) == (count, count - idle)
    assert entry.context_length == COMMON["max_position_embeddings"]
    assert (entry.projection_names, entry.default_targets) == (boxes, checked)
    assert "gate" not in entry.projection_names  # the router is a target only when named in the YAML
    assert architecture in entry.label and f"ctx {entry.context_length}" in entry.label
    if experts:
        assert f"{human_count(entry.active_parameters)} active of {human_count(entry.num_parameters)}" in entry.label
