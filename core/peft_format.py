"""The PEFT adapter layout (standard library only, no MindSpore): file names, key names, adapter_config.json.
`core.lora` (the layers, on MindSpore) and `core.export` (which writes an adapter straight from a
checkpoint's tensors, without MindSpore) both use it."""
from __future__ import annotations

ADAPTER_CONFIG_NAME = "adapter_config.json"
ADAPTER_WEIGHTS_NAME = "adapter_model.safetensors"
PEFT_PREFIX = "base_model.model."
# our parameter suffix <-> PEFT's tensor suffix
PEFT_SUFFIXES = {".lora_a": ".lora_A.weight", ".lora_b": ".lora_B.weight"}
# adapter_config.json keys whose non-default values change the maths; we refuse them on load
UNSUPPORTED_PEFT_OPTIONS = {"use_dora": False, "use_rslora": False, "fan_in_fan_out": False,
                            "layers_to_transform": None, "bias": "none"}


class LoraError(ValueError):
    """A LoRA setting, model or adapter file that cannot be used; the message says what would be valid."""


def to_peft_key(name: str) -> str:
    """`model.layers.0.self_attn.q_proj.lora_a` -> `base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight`."""
    for ours, peft in PEFT_SUFFIXES.items():
        if name.endswith(ours):
            return PEFT_PREFIX + name[: -len(ours)] + peft
    raise LoraError(f"{name} is not a LoRA parameter name (expected a .lora_a or .lora_b suffix).")


def from_peft_key(key: str) -> str | None:
    """Inverse of `to_peft_key`; None for a key that is not a PEFT LoRA tensor."""
    if not key.startswith(PEFT_PREFIX):
        return None
    for ours, peft in PEFT_SUFFIXES.items():
        if key.endswith(peft):
            return key[len(PEFT_PREFIX): -len(peft)] + ours
    return None


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
