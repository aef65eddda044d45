"""A complete tiny workspace for engine tests: a byte-level BPE tokenizer with a ChatML template,
a random 2-layer Llama (hidden 32) saved as a Hugging Face folder, a learnable alpaca task
("repeat the word") and a run config. Built in seconds, with no download and no transformers."""
from __future__ import annotations

import json
import random
from pathlib import Path

import yaml

CHATML = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] "
          "+ '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
WORDS = ("apple pear plum kite ball boat cat dog fox owl red blue green park beach school river lake hill "
         "tree star moon sun rain snow bird fish frog bear lion wolf").split()


def make_tokenizer(folder: Path, texts: list[str]) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
        "bos_token": None, "chat_template": CHATML, "model_max_length": 256}))


def make_rows(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        words = rng.sample(WORDS, 3)
        pick = rng.randrange(3)
        rows.append({"instruction": f"Which word is number {pick + 1}?", "input": " ".join(words),
                     "output": words[pick]})
    return rows


def make_model(folder: Path, vocab_size: int, seed: int = 0, **changes) -> None:
    import mindspore as ms
    from core.engine.checkpoint import save_hf_folder
    from core.engine.model import CausalLM, ModelArgs
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": vocab_size,
              "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 2, "max_position_embeddings": 128, "tie_word_embeddings": True,
              "rms_norm_eps": 1e-5, "eos_token_id": 2, "pad_token_id": 0, **changes}
    ms.set_seed(seed)
    save_hf_folder(CausalLM(ModelArgs.from_hf_config(config)), config, folder, tokenizer_dir=folder)


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def make_workspace(root: Path, **config_changes) -> Path:
    """Model, data and a config under `root`; returns the config path."""
    data = root / "data"
    data.mkdir(parents=True, exist_ok=True)
    train, val, test = make_rows(96, 1), make_rows(16, 2), make_rows(16, 3)
    for name, rows in (("train", train), ("validation", val), ("test", test)):
        write_jsonl(data / f"{name}.jsonl", rows)
    texts = [f"{r['instruction']} {r['input']} {r['output']}" for r in train] * 4
    model = root / "tiny-model"
    make_tokenizer(model, texts)
    from core.data.tokenizer import Tokenizer
    make_model(model, Tokenizer.from_dir(model).vocab_size)
    config = {
        "run": {"runs_dir": str(root / "runs"), "seed": 7},
        "model": {"path": str(model)},
        "method": "lora",
        "lora": {"rank": 4, "alpha": 8, "dropout": 0.0},
        "data": {"train_file": str(data / "train.jsonl"), "validation_file": str(data / "validation.jsonl"),
                 "test_file": str(data / "test.jsonl"), "format": "alpaca", "max_seq_len": 64},
        "train": {"max_steps": 8, "micro_batch_size": 4, "learning_rate": 0.01, "warmup_steps": 2,
                  "log_every": 1, "eval_every": 4, "save_every": 4, "keep_last_n": 5},
        "eval": {"max_new_tokens": 4},
        "early_stopping": {"enabled": False},
    }
    for key, value in config_changes.items():
        section, name = key.split("__")
        config.setdefault(section, {})[name] = value
    path = root / "config.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path
