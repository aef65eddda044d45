"""Runs to export to GGUF without training them: tests/core/tiny_setup.py's workspace (a byte-level BPE
tokenizer with a ChatML template, an alpaca task, its run config), its model optionally replaced by a
transformers-made one of another family (tests/core/hf_fixtures.py's configs), and one checkpoint
holding a random LoRA adapter big enough to change every answer, saved as core.train saves one
(core.run.ckpt_store: manifest, best and last pointers)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import yaml

from core.run.ckpt_store import save_train_checkpoint
from core.run.rundir import RunDir
from core.spec.model_args import file_sha256, read_model_args, weight_files
from tests.core.tiny_setup import make_workspace

STEP = 4
ATTENTION = ("q_proj", "k_proj", "v_proj", "o_proj")


def replace_model(root: Path, config_cls: str, model_cls: str, config: dict, seed: int = 0) -> None:
    """root/tiny-model's weights and config.json replaced by a transformers `model_cls` of the
    tokenizer's vocabulary (+3 spare rows, as family_fixtures.family_workspace does)."""
    from core.data.tokenizer import Tokenizer
    from tests.core.hf_fixtures import COMMON, build_hf_model
    folder = root / "tiny-model"
    vocab = Tokenizer.from_dir(folder).vocab_size
    cfg = {**COMMON, **config, "vocab_size": vocab + 3, "pad_token_id": 0, "eos_token_id": 2, "bos_token_id": 1}
    for stale in ("config.json", "model.safetensors"):
        (folder / stale).unlink()
    build_hf_model(config_cls, model_cls, cfg, seed).save_pretrained(str(folder), safe_serialization=True)


def lora_tensors(model_dir: Path, rank: int, targets, seed: int = 0, scale: float = 0.2) -> dict[str, np.ndarray]:
    """Random A (rank, in) and B (out, rank) for every 2-D projection named in `targets`."""
    rng = np.random.default_rng(seed)
    tensors = {}
    for name, shape in read_model_args(model_dir).parameter_shapes().items():
        module = name.removesuffix(".weight")
        if len(shape) == 2 and module.rsplit(".", 1)[-1] in targets:
            out, inp = shape
            tensors[f"{module}.lora_a"] = (scale * rng.standard_normal((rank, inp))).astype(np.float32)
            tensors[f"{module}.lora_b"] = (scale * rng.standard_normal((out, rank))).astype(np.float32)
    return tensors


def fake_lora_run(root: Path, model=None, rank: int = 4, alpha: float = 8.0, targets=ATTENTION + (
        "gate_proj", "up_proj", "down_proj"), seed: int = 0, tokenizer=None) -> Path:
    """A run folder whose best (= last) checkpoint is a random LoRA adapter on root/tiny-model.
    `model`: (config class, model class, config) of hf_fixtures to build instead of the Llama (with
    `tokenizer`, a function that writes another tokenizer into the model folder first: `model` then needed)."""
    config_path = make_workspace(root)
    if tokenizer is not None:
        for stale in ("tokenizer.json", "tokenizer_config.json"):
            (root / "tiny-model" / stale).unlink()
        tokenizer(root / "tiny-model")
    if model is not None:
        replace_model(root, *model)
    model_dir = root / "tiny-model"
    config = yaml.safe_load(config_path.read_text())
    config["lora"] = {"rank": rank, "alpha": alpha, "dropout": 0.0, "target_modules": list(targets)}
    run = RunDir.create(root / "runs", "fake-run", yaml.safe_dump(config))
    state = {"step": STEP, "method": "lora", "base_model": {"path": str(model_dir),
                                                            "sha256": file_sha256(weight_files(model_dir))},
             "lora": config["lora"], "config": config}
    save_train_checkpoint(run.checkpoints_dir, STEP, lora_tensors(model_dir, rank, targets, seed), {}, state,
                          pointers=("best", "last"))
    return run.path


# ---- a SentencePiece-style tokenizer (Llama 2, Mistral v0.1) ---------------------------------------

MISTRAL_TEMPLATE = ("{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
                    "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% else %}{{ message['content'] + eos_token }}"
                    "{% endif %}{% endfor %}")
BYTE_TOKENS = [f"<0x{i:02X}>" for i in range(256)]


def make_sentencepiece_tokenizer(folder: Path, prepend_scheme: str | None = None, vocab_size: int = 200) -> None:
    """A tokenizer.json as transformers converts a SentencePiece BPE model (Llama 2, Mistral v0.1): <unk>,
    <s>, </s>, the 256 byte pieces <0x00>..<0xFF>, then pieces with "▁" for a space; BPE with byte fallback
    whose merges list every split of every piece into two pieces, ordered by the merged piece's id (what
    SentencePiece's score order merges); a space prepended to each text segment (the legacy normalizer,
    or with `prepend_scheme` a Metaspace pre-tokenizer that prepends so); BOS added by the post-processor.
    Trained on the tiny task's words (tests/core/tiny_setup.py) and its chat template's."""
    from tokenizers import Tokenizer as Backend, models, normalizers, pre_tokenizers, trainers
    from tests.core.tiny_setup import make_rows
    texts = [f"[INST] {r['instruction']} {r['input']} [/INST] {r['output']}" for r in make_rows(96, 1)] * 4
    trainer_tok = Backend(models.BPE(unk_token="<unk>", byte_fallback=True))
    trainer_tok.normalizer = normalizers.Replace(" ", "▁")
    trainer_tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    trainer_tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<unk>"]))
    trained = sorted(json.loads(trainer_tok.to_str())["model"]["vocab"].items(), key=lambda kv: kv[1])
    pieces = ["<unk>", "<s>", "</s>", *BYTE_TOKENS, *(t for t, _ in trained if t != "<unk>")]
    vocab = {piece: i for i, piece in enumerate(pieces)}
    plain = {p for p in pieces[3 + 256:]}
    merges = [[piece[:k], piece[k:]] for piece in pieces[3 + 256:] for k in range(1, len(piece))
              if piece[:k] in plain and piece[k:] in plain]
    special = {"single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True}
    tok = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": c, **special} for i, c in enumerate(("<unk>", "<s>", "</s>"))],
        "normalizer": None if prepend_scheme else {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
        "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": prepend_scheme,
                          "split": False} if prepend_scheme else None,
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                    {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"},
            {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": merges},
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False), encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "LlamaTokenizerFast", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
        "pad_token": None, "add_bos_token": True, "add_eos_token": False, "legacy": prepend_scheme is None,
        "chat_template": MISTRAL_TEMPLATE, "model_max_length": 256}))


def read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))
