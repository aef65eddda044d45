"""Real-size model folders for the benchmarks: the Hugging Face hub's config.json of Qwen2.5-0.5B and
Qwen2.5-1.5B with seeded random bf16 weights, sharded safetensors with model.safetensors.index.json,
and the demo tokenizer (its ids are a subset of the model's vocabulary). No download: the configs
are written here as the hub has them.

    .venv/bin/python bench/real_models.py /tmp/qwen-0.5b 0.5b      # make one folder (~1 GB, ~20 s)

Used by bench/train_step.py (--configs 0.5b), bench/memory_fit.py (the real-size rows) and
bench/scale.py (exports, saves, launch time at 0.5B / 1.5B).
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

_QWEN25 = {
    "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
    "eos_token_id": 151643, "hidden_act": "silu", "initializer_range": 0.02, "max_position_embeddings": 32768,
    "model_type": "qwen2", "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
    "sliding_window": 32768, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
    "transformers_version": "4.40.1", "use_cache": True, "use_sliding_window": False, "vocab_size": 151936,
}
CONFIGS = {
    # Qwen/Qwen2.5-0.5B: 494M parameters (136M of them the tied embedding)
    "0.5b": {**_QWEN25, "hidden_size": 896, "intermediate_size": 4864, "max_window_layers": 24,
             "num_attention_heads": 14, "num_hidden_layers": 24},
    # Qwen/Qwen2.5-1.5B: 1.54B parameters (233M of them the tied embedding)
    "1.5b": {**_QWEN25, "hidden_size": 1536, "intermediate_size": 8960, "max_window_layers": 28,
             "num_attention_heads": 12, "num_hidden_layers": 28},
}
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def tensor_shapes(config: dict) -> dict[str, tuple[int, ...]]:
    """Every tensor of a Qwen2 checkpoint by hub name, in the hub's order."""
    h, i, v = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    d = h // config["num_attention_heads"]
    kv = config["num_key_value_heads"] * d
    shapes = {"model.embed_tokens.weight": (v, h)}
    for n in range(config["num_hidden_layers"]):
        p = f"model.layers.{n}."
        shapes.update({
            p + "input_layernorm.weight": (h,),
            p + "self_attn.q_proj.weight": (h, h), p + "self_attn.q_proj.bias": (h,),
            p + "self_attn.k_proj.weight": (kv, h), p + "self_attn.k_proj.bias": (kv,),
            p + "self_attn.v_proj.weight": (kv, h), p + "self_attn.v_proj.bias": (kv,),
            p + "self_attn.o_proj.weight": (h, h),
            p + "post_attention_layernorm.weight": (h,),
            p + "mlp.gate_proj.weight": (i, h), p + "mlp.up_proj.weight": (i, h), p + "mlp.down_proj.weight": (h, i),
        })
    shapes["model.norm.weight"] = (h,)
    if not config["tie_word_embeddings"]:
        shapes["lm_head.weight"] = (v, h)
    return shapes


def _random_bf16(name: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """N(0, 0.02) matrices and biases, norms 1, as bfloat16 bits (float32 truncated to its high 16
    bits; core.weights.safetensors_io writes uint16 bits for a bfloat16 entry, no MindSpore needed)."""
    if name.endswith("norm.weight"):
        values = np.ones(shape, np.float32)
    else:
        values = rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)
    return (values.view(np.uint32) >> 16).astype(np.uint16)


class TiledDemo:
    """Weights that are not noise for a real-size shape: the trained demo model's (models/tiny-demo) tiled
    to each tensor's shape (layer n takes the demo's layer n mod 4), each matrix divided by how many
    times its input width holds the demo's, so that on the tiled (periodic) embedding a product keeps
    the demo's scale (the final norm too: the tied embedding, tiled, is the output matrix); the
    embedding's rows past the demo's 1,024 tokens zero (the demo tokenizer never makes them), biases
    zero. Its heads are not the demo's (64 wide, RoPE pairs across two of the demo's heads), so it
    predicts badly: structured weights, not a working model. What quantization meets is trained
    values (their spread, their outliers), not N(0, 0.02)."""

    def __init__(self):
        from core.weights.safetensors_io import SafetensorsReader
        with SafetensorsReader(ROOT / "models" / "tiny-demo" / "model.safetensors") as reader:
            self.tensors = {n: np.asarray(reader.read(n), np.float32) for n in reader.tensors}
        self.layers = 1 + max(int(n.split(".")[2]) for n in self.tensors if n.startswith("model.layers."))

    def values(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        if name.endswith(".bias"):
            return np.zeros(shape, np.float32)
        parts = name.split(".")
        if name.startswith("model.layers."):
            parts[2] = str(int(parts[2]) % self.layers)
        demo = self.tensors[".".join(parts)]
        if name == "model.embed_tokens.weight":
            out = np.zeros(shape, np.float32)
            out[: demo.shape[0]] = np.tile(demo, (1, -(-shape[1] // demo.shape[1])))[:, : shape[1]]
            return out
        reps = [-(-want // have) for want, have in zip(shape, demo.shape)]
        out = np.tile(demo, reps)[tuple(slice(0, n) for n in shape)]
        if out.ndim == 2 or name == "model.norm.weight":
            out = out / np.float32(shape[-1] / demo.shape[-1])
        return np.ascontiguousarray(out, np.float32)

    def bf16(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        return (self.values(name, shape).view(np.uint32) >> 16).astype(np.uint16)


def make_model(folder: str | Path, name: str = "0.5b", shard_mb: int = 500, seed: int = 0,
               weights: str = "random") -> Path:
    """config.json, model-0000k-of-0000n.safetensors shards of about `shard_mb` each (one
    model.safetensors when it all fits) with model.safetensors.index.json, and the demo tokenizer.
    Written tensor by tensor (core.weights.safetensors_io): peak memory is one tensor. Reuses a complete
    folder made earlier with the same arguments. `weights`: "random" (N(0, 0.02), norms 1) or
    "tiled-demo" (`TiledDemo`)."""
    from core.weights.safetensors_io import TensorEntry, write_file
    folder = Path(folder)
    config = CONFIGS[name]
    stamp = folder / ".made-by-real-models.json"
    recipe = {"name": name, "shard_mb": shard_mb, "seed": seed, "config": config}
    if weights != "random":
        recipe["weights"] = weights + "-2"  # -2: the final norm scaled too
    if stamp.is_file() and json.loads(stamp.read_text()) == recipe:
        return folder
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    shapes = tensor_shapes(config)
    shards: list[list[str]] = [[]]
    size = 0
    for key, shape in shapes.items():
        nbytes = int(np.prod(shape)) * 2
        if shards[-1] and size + nbytes > shard_mb * 2**20:
            shards.append([])
            size = 0
        shards[-1].append(key)
        size += nbytes
    rng = np.random.default_rng(seed)
    tiled = TiledDemo() if weights == "tiled-demo" else None
    make = (lambda key: tiled.bf16(key, shapes[key])) if tiled else (lambda key: _random_bf16(key, shapes[key], rng))
    weight_map = {}
    for n, keys in enumerate(shards, 1):
        file = "model.safetensors" if len(shards) == 1 else f"model-{n:05d}-of-{len(shards):05d}.safetensors"
        entries = [TensorEntry(key, shapes[key], "bfloat16", lambda key=key: make(key)) for key in keys]
        write_file(folder / file, entries, {"format": "pt"})
        weight_map.update({key: file for key in keys})
    if len(shards) > 1:
        total = sum(int(np.prod(s)) * 2 for s in shapes.values())
        (folder / "model.safetensors.index.json").write_text(json.dumps(
            {"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2))
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    for tokenizer_file in TOKENIZER_FILES:
        shutil.copy(ROOT / "models" / "tiny-demo" / tokenizer_file, folder / tokenizer_file)
    stamp.write_text(json.dumps(recipe))
    return folder


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="where the model is made (kept when it already holds it)")
    parser.add_argument("size", nargs="?", default="0.5b", choices=sorted(CONFIGS))
    parser.add_argument("--weights", default="random", choices=("random", "tiled-demo"))
    args = parser.parse_args()
    print(make_model(args.folder, args.size, weights=args.weights))
