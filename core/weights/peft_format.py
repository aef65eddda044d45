"""The PEFT adapter layout (standard library only, no MindSpore): file names, key names, adapter_config.json,
for `core.engine.export`, which writes an adapter straight from a checkpoint's tensors without MindSpore.
core.engine.lora imports these and adds the model-side helpers (from_peft_key, peft_module_prefix)."""
from __future__ import annotations

ADAPTER_CONFIG_NAME = "adapter_config.json"
ADAPTER_WEIGHTS_NAME = "adapter_model.safetensors"
PEFT_PREFIX = "base_model.model."
# our parameter suffix <-> PEFT's tensor suffix
PEFT_SUFFIXES = {".lora_a": ".lora_A.weight", ".lora_b": ".lora_B.weight"}


def to_module_path(name: str, prefix: str | None) -> str:
    """Our dotted name -> transformers' module path: `prefix` is where a wrapping architecture keeps
    the decoder (Gemma3ForConditionalGeneration: `model.language_model.`; `FamilySpec.wrapped`)."""
    return prefix + name[len("model."):] if prefix and name.startswith("model.") else name


def to_peft_key(name: str, prefix: str | None = None) -> str:
    """`model.layers.0.self_attn.q_proj.lora_a` -> `base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight`."""
    for ours, peft in PEFT_SUFFIXES.items():
        if name.endswith(ours):
            return PEFT_PREFIX + to_module_path(name[: -len(ours)], prefix) + peft
    raise ValueError(f"{name} is not a LoRA parameter name (expected a .lora_a or .lora_b suffix).")


def peft_adapter_config(base_model_name_or_path: str, rank: int, alpha: float, dropout: float,
                        target_modules) -> dict:
    """The adapter_config.json that `peft.PeftModel.from_pretrained` reads."""
    return {
        "peft_type": "LORA", "task_type": "CAUSAL_LM",
        "r": int(rank), "lora_alpha": alpha, "lora_dropout": float(dropout),
        "target_modules": target_modules if isinstance(target_modules, str) else list(target_modules),
        "bias": "none", "base_model_name_or_path": str(base_model_name_or_path),
        "fan_in_fan_out": False, "inference_mode": True, "use_rslora": False,
        "modules_to_save": None, "init_lora_weights": True, "use_dora": False,
        "revision": None, "layers_to_transform": None,
    }
