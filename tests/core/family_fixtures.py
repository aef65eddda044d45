"""Gemma 2 / Gemma 3 / Phi-3 test helpers: tiny checkpoints made by transformers (Gemma 3's text + vision
wrapper among them), config.json in transformers 4.x spelling, and hub config.json files as shipped."""
from __future__ import annotations

import json
from pathlib import Path

from tests.core.hf_fixtures import ARCHITECTURES, COMMON, build_hf_model, save_hf_model

# the tiny configs live in hf_fixtures.ARCHITECTURES (test_model and bench/model_parity.py cover them
# too), all but Gemma 3's text + vision wrapper, whose image tokens (94-96) the tests keep out of
# their inputs (ids below ID_LIMIT)
GEMMA3_VISION = dict(text_config=dict(COMMON, **ARCHITECTURES["gemma3"][2], tie_word_embeddings=True),
                     vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                        num_attention_heads=2, image_size=28, patch_size=14),
                     mm_tokens_per_image=4, image_token_index=96, boi_token_index=94, eoi_token_index=95)
MODELS = {  # name -> (config class, model class, full config)
    **{name: (c, m, dict(COMMON, **config)) for name, (c, m, config) in ARCHITECTURES.items()
       if name in ("gemma2", "gemma3", "phi3", "phi4-mini")},
    "gemma3-vision": ("Gemma3Config", "Gemma3ForConditionalGeneration", GEMMA3_VISION),
}
ID_LIMIT = 90


def make_model(name: str, seed: int = 0, **changes):
    config_cls, model_cls, config = MODELS[name]
    if changes and "text_config" in config:
        config = dict(config, text_config=dict(config["text_config"], **changes))
    elif changes:
        config = dict(config, **changes)
    return build_hf_model(config_cls, model_cls, config, seed)


def save_model(name: str, folder: Path, **save_kwargs) -> tuple[object, Path]:
    model = make_model(name)
    return model, save_hf_model(model, folder, **save_kwargs)


def v4_spelling(cfg: dict) -> dict:
    """A transformers 5 config.json as transformers 4.x wrote it: `torch_dtype`, `rope_theta` and
    `rope_scaling` (with `type`) at the top level, Gemma 3's `rope_local_base_freq` and
    `sliding_window_pattern` instead of per-layer-type `rope_parameters` and `layer_types`."""
    cfg = dict(cfg)
    if isinstance(cfg.get("text_config"), dict):
        cfg["text_config"] = v4_spelling(cfg["text_config"])
        cfg["torch_dtype"] = cfg["text_config"].pop("torch_dtype")
        cfg.pop("dtype", None)
        return cfg
    cfg["torch_dtype"] = cfg.pop("dtype", "float32")
    cfg.pop("layer_types", None)
    cfg.pop("_sliding_window_pattern", None)
    params = dict(cfg.pop("rope_parameters", None) or {})
    if "full_attention" in params:
        cfg["rope_local_base_freq"] = params["sliding_attention"]["rope_theta"]
        params = dict(params["full_attention"])
    cfg["rope_theta"] = params.pop("rope_theta", 10000.0)
    params.pop("original_max_position_embeddings", None)  # Phi-3 keeps it at the top level
    if "partial_rotary_factor" in params:
        cfg["partial_rotary_factor"] = params.pop("partial_rotary_factor")
    rope_type = params.pop("rope_type", "default")
    cfg["rope_scaling"] = None if rope_type == "default" else {"type": rope_type, **params}
    return cfg


def rewrite_config(folder: Path, change) -> dict:
    path = folder / "config.json"
    cfg = change(json.loads(path.read_text()))
    path.write_text(json.dumps(cfg))
    return cfg


# ---- config.json files as the hub ships them (transformers 4.x era); shapes only, no weights ----

GEMMA2_2B = {
    "architectures": ["Gemma2ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "attn_logit_softcapping": 50.0, "bos_token_id": 2, "cache_implementation": "hybrid", "eos_token_id": 1,
    "final_logit_softcapping": 30.0, "head_dim": 256, "hidden_act": "gelu_pytorch_tanh",
    "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 2304, "initializer_range": 0.02,
    "intermediate_size": 9216, "max_position_embeddings": 8192, "model_type": "gemma2", "num_attention_heads": 8,
    "num_hidden_layers": 26, "num_key_value_heads": 4, "pad_token_id": 0, "query_pre_attn_scalar": 256,
    "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "sliding_window": 4096, "torch_dtype": "float32",
    "transformers_version": "4.42.4", "use_cache": True, "vocab_size": 256000}
GEMMA3_1B = {
    "architectures": ["Gemma3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "attn_logit_softcapping": None, "bos_token_id": 2, "cache_implementation": "hybrid", "eos_token_id": [1, 106],
    "final_logit_softcapping": None, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 1152,
    "initializer_range": 0.02, "intermediate_size": 6912, "max_position_embeddings": 32768,
    "model_type": "gemma3_text", "num_attention_heads": 4, "num_hidden_layers": 26, "num_key_value_heads": 1,
    "pad_token_id": 0, "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000,
    "rope_scaling": None, "rope_theta": 1000000, "sliding_window": 512, "sliding_window_pattern": 6,
    "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0", "use_cache": True, "vocab_size": 262144}
# Gemma 3 4B: text + vision; the text_config lists only what differs from Gemma3TextConfig's defaults
GEMMA3_4B = {
    "architectures": ["Gemma3ForConditionalGeneration"], "boi_token_index": 255999, "eoi_token_index": 256000,
    "eos_token_id": [1, 106], "image_token_index": 262144, "initializer_range": 0.02, "mm_tokens_per_image": 256,
    "model_type": "gemma3",
    "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
                    "num_hidden_layers": 34, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                    "sliding_window": 1024},
    "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0",
    "vision_config": {"hidden_size": 1152, "image_size": 896, "intermediate_size": 4304, "model_type": "siglip_vision_model",
                      "num_attention_heads": 16, "num_hidden_layers": 27, "patch_size": 14, "vision_use_head": False}}
PHI3_MINI_4K = {
    "architectures": ["Phi3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "auto_map": {"AutoConfig": "configuration_phi3.Phi3Config", "AutoModelForCausalLM": "modeling_phi3.Phi3ForCausalLM"},
    "bos_token_id": 1, "embd_pdrop": 0.0, "eos_token_id": 32000, "hidden_act": "silu", "hidden_size": 3072,
    "initializer_range": 0.02, "intermediate_size": 8192, "max_position_embeddings": 4096, "model_type": "phi3",
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32,
    "original_max_position_embeddings": 4096, "pad_token_id": 32000, "resid_pdrop": 0.0, "rms_norm_eps": 1e-05,
    "rope_scaling": None, "rope_theta": 10000.0, "sliding_window": 2047, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "transformers_version": "4.40.2", "use_cache": True, "vocab_size": 32064}
PHI4_MINI_INSTRUCT = {
    "architectures": ["Phi3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "auto_map": {"AutoConfig": "configuration_phi3.Phi3Config", "AutoModelForCausalLM": "modeling_phi3.Phi3ForCausalLM",
                 "AutoTokenizer": "Xenova/gpt-4o"},
    "bos_token_id": 199999, "embd_pdrop": 0.0, "eos_token_id": 199999, "full_attn_mod": 1, "hidden_act": "silu",
    "hidden_size": 3072, "initializer_range": 0.02, "intermediate_size": 8192, "interpolate_factor": 1,
    "lm_head_bias": False, "max_position_embeddings": 131072, "mlp_bias": False, "model_type": "phi3",
    "num_attention_heads": 24, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "original_max_position_embeddings": 4096, "pad_token_id": 199999, "partial_rotary_factor": 0.75,
    "resid_pdrop": 0.0, "rms_norm_eps": 1e-05,
    "rope_scaling": {"long_factor": [1.0 + 0.5 * i for i in range(48)], "short_factor": [1.0] * 48, "type": "longrope"},
    "rope_theta": 10000.0, "sliding_window": 262144, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
    "transformers_version": "4.45.0", "use_cache": True, "vocab_size": 200064}
PHI4 = {
    "architectures": ["Phi3ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 100257, "embd_pdrop": 0.0,
    "eos_token_id": 100265, "hidden_act": "silu", "hidden_size": 5120, "initializer_range": 0.02,
    "intermediate_size": 17920, "max_position_embeddings": 16384, "model_type": "phi3", "num_attention_heads": 40,
    "num_hidden_layers": 40, "num_key_value_heads": 10, "original_max_position_embeddings": 16384,
    "pad_token_id": 100349, "resid_pdrop": 0.0, "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 250000,
    "sliding_window": None, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "transformers_version": "4.47.0", "use_cache": True, "vocab_size": 100352}


# ---- a tiny fine-tuning workspace for a family: core.train, resume, exports, memory ---------------

def family_workspace(root: Path, name: str, **config_changes) -> Path:
    """tests/core/tiny_setup.py's workspace (tokenizer, alpaca task, run config) with its model
    replaced by a transformers-made `name` of the tokenizer's vocabulary (weights drawn with std
    0.02, so that a few steps at lr 0.01 train). Returns the config path."""
    import shutil
    from core.data.tokenizer import Tokenizer
    from tests.core.tiny_setup import make_workspace
    config = make_workspace(root, **config_changes)
    folder = root / "tiny-model"
    vocab = Tokenizer.from_dir(folder).vocab_size
    tokens = dict(vocab_size=vocab + 3, pad_token_id=0, eos_token_id=2, bos_token_id=1, initializer_range=0.02)
    config_cls, model_cls, cfg = MODELS[name]
    if "text_config" in cfg:  # the image tokens get ids of their own past the tokenizer's
        cfg = dict(cfg, text_config=dict(cfg["text_config"], **tokens), image_token_index=vocab + 2,
                   boi_token_index=vocab, eoi_token_index=vocab + 1)
    else:
        cfg = dict(cfg, **tokens)
    for stale in ("config.json", "model.safetensors"):
        (folder / stale).unlink()
    build_hf_model(config_cls, model_cls, cfg).save_pretrained(str(folder), safe_serialization=True)
    shutil.rmtree(root / "runs", ignore_errors=True)
    return config


class FamilyRuns:
    """One family's tiny fine-tunes through core.train, each run once and kept for the tests that
    read them: LoRA in a worker process of its own (its peak RSS is then its own, for the memory
    estimate), the same run resumed from step 4, and a full fine-tune."""

    def __init__(self, root: Path, name: str, lora_targets: tuple[str, ...] | None = None):
        self.name, self.root = name, root
        self.config = family_workspace(root, name)
        self.model_dir = root / "tiny-model"
        self.overrides = ["eval.downstream=false"]
        if lora_targets:
            self.overrides.append(f"lora.target_modules=[{','.join(lora_targets)}]")
        self._runs: dict[str, Path] = {}

    def _new_run(self, before: set[Path]) -> Path:
        new = [p for p in (self.root / "runs").iterdir() if p not in before and not p.is_symlink()]
        assert len(new) == 1, new
        return new[0]

    def _existing(self) -> set[Path]:
        runs = self.root / "runs"
        return set(runs.iterdir()) if runs.is_dir() else set()

    FULL = ("method=full", "train.learning_rate=0.003", "train.max_steps=4", "train.eval_every=4",
            "train.save_every=2")

    def run(self, kind: str) -> Path:
        """'lora' (8 steps, evaluated at 0, 4 and 8), 'resumed' (the LoRA run from step 4), 'full'
        (4 steps, saved at 2 and 4) or 'full-resumed' (the full run from step 2)."""
        if kind in self._runs:
            return self._runs[kind]
        import subprocess
        import sys
        from core.train import main as train_main
        before = self._existing()
        if kind == "lora":
            root = Path(__file__).resolve().parents[2]
            done = subprocess.run([sys.executable, "-m", "core.train", "--config", str(self.config), *self.overrides],
                                  cwd=root, capture_output=True, text=True)
            assert done.returncode == 0, done.stderr[-3000:]
        elif kind in ("resumed", "full-resumed"):
            first, method, step = ("lora", (), 4) if kind == "resumed" else ("full", self.FULL, 2)
            start = self.run(first) / "checkpoints" / f"step-{step}"
            before = self._existing()
            assert train_main(["--config", str(self.config), *self.overrides, *method, f"run.resume={start}"]) == 0
        else:
            assert train_main(["--config", str(self.config), *self.overrides, *self.FULL]) == 0
        self._runs[kind] = self._new_run(before)
        return self._runs[kind]


def make_any_model(name: str):
    """The fixture `name` of MODELS (Gemma 3's text + vision wrapper among them) or of
    hf_fixtures.ARCHITECTURES as a transformers model with random weights."""
    from tests.core.hf_fixtures import make_hf_model
    return make_model(name) if name in MODELS else make_hf_model(name)


def run_records(run: Path, kind: str) -> list[dict]:
    return [r for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if r["kind"] == kind]
