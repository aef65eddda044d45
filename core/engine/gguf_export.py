"""A merged Hugging Face folder (core.engine.export's `merged`, float32) -> one GGUF file for llama.cpp
and Ollama, written with the `gguf` library (ggml-org's own writer) a tensor at a time.

What goes in, following llama.cpp's converter (convert_hf_to_gguf.py) so that llama.cpp reads the
file as it reads its own conversions:
- the architecture's hyper-parameters under `<arch>.*` (block count, widths, heads, RoPE base and
  dimension count, RMS epsilon, experts, soft-caps, windows);
- the tensors under llama.cpp's names (gguf.TensorNameMap: `blk.N.attn_q.weight`, ...). For the
  `llama` architecture (Llama, Mistral, Mixtral) the rows of q and k are permuted from Hugging Face's
  "rotate halves" RoPE layout to llama.cpp's "rotate pairs" one; norms, biases and the MoE router stay
  float32; llama.cpp's Gemma multiplies by the stored norm weight, so 1 + w is written;
- Phi-3/Phi-4 (`phi3`) and GLM-4 (`glm4`): their fused qkv_proj / gate_up_proj as llama.cpp's
  attn_qkv / ffn_up (gate then up: its SwiGLU splits them), RoPE on part of each head; Phi-3's LongRoPE
  as the rope_factors_long/short tensors, its original context and attention factor;
- the tokenizer: every token of tokenizer.json with its type (normal, control for special added
  tokens, user-defined for other added ones, unused for ids the embedding has and the tokenizer not),
  the special token ids, whether BOS/EOS are added, the chat template (gguf.SpecialVocab); for
  byte-level BPE (llama.cpp's `gpt2` model) the merges and the pre-tokenizer llama.cpp must apply
  (`tokenizer.ggml.pre`), told from tokenizer.json's own pre-tokenizer regex; for SentencePiece-style
  BPE with byte fallback (llama.cpp's `llama` model) each piece's score (minus the rank of the merge
  that makes it), byte/unknown types and whether a space is prepended to each text segment.

Quantization: f32 (the weights as merged: llama.cpp's logits then match ours to ~2e-5), f16, bf16 and
q8_0 by `gguf.quants.quantize` (the gguf package's reference NumPy
quantizers, bit-exact with ggml's); a tensor whose rows q8_0 cannot block (a width not a multiple of
32) is written in f16, as llama.cpp's converter does. q4_k_m is made from the f16 file by llama.cpp's
own quantizer (`llama_cpp.llama_model_quantize`, core.engine.gguf_check), never by us.

A family llama.cpp does not run the way mindtune trained it, or a tokenizer this writer cannot carry,
is refused before any file is written (`gguf_problem`), with the reason.
"""
from __future__ import annotations

import errno
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from core.run.atomic import atomic_path
from core.run.ckpt_store import format_bytes, free_bytes
from core.spec.errors import MessageError
from core.spec.messages import Message
from core.spec.model_args import (ModelArgs, read_model_args, rope_attention_factor, rope_inverse_frequencies,
                                  rope_long_after, weight_files)
from core.weights.safetensors_io import SafetensorsReader, to_float32

try:  # a product dependency (requirements.txt); the message below says so where it is missing
    import gguf
except ImportError:  # pragma: no cover - exercised by the console's "missing package" note
    gguf = None

GGUF_QUANTS = ("f32", "f16", "bf16", "q8_0", "q4_k_m")
WRITTEN_BY_US = ("f32", "f16", "bf16", "q8_0")  # q4_k_m: llama.cpp's quantizer, from the f16 file
BYTES_PER_WEIGHT = {"f32": 4.0, "f16": 2.0, "bf16": 2.0, "q8_0": 34 / 32}  # for the free-space check


class GgufError(MessageError):
    """A GGUF export that cannot be made; the message (a core Message) says why."""


def _require_gguf() -> None:
    if gguf is None:
        raise GgufError(Message("gguf.no_package", package="gguf", requirements="requirements.txt"))


# ---- which families, and how llama.cpp names them ----------------------------------------------

@dataclass(frozen=True)
class GgufFamily:
    """How one mindtune family goes to llama.cpp: its architecture name in gguf.MODEL_ARCH, whether q/k
    rows are permuted to llama.cpp's pairwise RoPE, whether norm weights are stored as 1 + w
    (Gemma's x·(1 + w) becomes llama.cpp's x·w), and a check of a checkpoint's settings that llama.cpp
    would compute differently (None when it computes them as we do)."""
    arch: str
    permute_qk: bool = False
    norm_plus_one: bool = False
    problem: Callable[[ModelArgs, dict], Message | None] | None = None
    partial_rotary: bool = False  # llama.cpp rotates the first `rope.dimension_count` dims of a head


# llama.cpp reads no sliding window for these (phi3: it reads one and switches it off, "Phi SWA is currently disabled")
WINDOWLESS_ARCHS = ("llama", "qwen2", "qwen3", "qwen3moe", "olmo2", "phi3")


def window_dropped(args: ModelArgs) -> bool:
    """Whether the model slides a window that its llama.cpp architecture does not (llama.cpp's own
    converter drops it too: Mistral 7B v0.1's 4096): the answers agree while prompt + answer fit in it."""
    family = FAMILIES.get(args.family)
    return (family is not None and family.arch in WINDOWLESS_ARCHS and args.sliding_window is not None
            and any(t == "sliding_attention" for t in args.layer_types))


def _notes(args: ModelArgs) -> list[Message]:
    notes = [Message("gguf.window_not_carried", window=args.sliding_window)] if window_dropped(args) else []
    long_after = rope_long_after(args)
    if long_after is not None:  # LongRoPE: llama.cpp picks the factors from its context size, not a sequence's
        notes.append(Message("gguf.longrope_context", original=long_after))
    return notes


def _qwen3_moe_problem(args: ModelArgs, cfg: dict) -> Message | None:
    """llama.cpp's qwen3moe makes every layer sparse and renormalises the top-k weights."""
    dense = [n for n in range(args.num_layers) if args.moe is None or not args.moe.is_sparse(n)]
    if dense:
        return Message("gguf.moe_dense_layers", layers=", ".join(map(str, dense)))
    if not args.moe.normalize_top_k:
        return Message("gguf.moe_no_norm_topk")
    return None


def _gemma_problem(args: ModelArgs, cfg: dict) -> Message | None:
    if args.o_bias or args.qkv_bias:  # llama.cpp's Gemma reads no attention biases
        return Message("gguf.bias_not_read", family=args.family)
    # llama.cpp's Gemma 2/3 scale the queries by 1/sqrt(head_dim) (1/sqrt(hidden/heads) for the 27B's 46
    # or 62 layers), whatever query_pre_attn_scalar says
    assumed = args.hidden_size // args.num_heads if args.num_layers in (46, 62) else args.head_dim
    scalar = cfg.get("query_pre_attn_scalar", assumed)
    if args.attention_scale is not None and abs(args.attention_scale - assumed ** -0.5) > 1e-9:
        return Message("gguf.gemma_query_scale", scalar=scalar, assumed=assumed)
    return None


FAMILIES: dict[str, GgufFamily] = {
    "llama": GgufFamily("llama", permute_qk=True),
    "mistral": GgufFamily("llama", permute_qk=True),  # llama.cpp converts Mistral as Llama
    "mixtral": GgufFamily("llama", permute_qk=True),  # Llama with experts
    "qwen2": GgufFamily("qwen2"),
    "qwen3": GgufFamily("qwen3"),
    "qwen3_moe": GgufFamily("qwen3moe", problem=_qwen3_moe_problem),
    "olmo2": GgufFamily("olmo2"),
    "gemma2": GgufFamily("gemma2", norm_plus_one=True, problem=_gemma_problem),
    "gemma3": GgufFamily("gemma3", norm_plus_one=True, problem=_gemma_problem),
    # Phi-3 / Phi-4: the fused qkv_proj and gate_up_proj go as they are (llama.cpp's attn_qkv, and ffn_up
    # holding gate then up, split by its SwiGLU); RoPE in halves (NEOX) as Hugging Face's
    "phi3": GgufFamily("phi3", partial_rotary=True),
    # GLM-4: q/k/v with biases, gate_up_proj as ffn_up, norms after attention and MLP; RoPE on the first
    # half of each head in interleaved pairs, which is llama.cpp's own (NORM) rotation: no permutation
    "glm4": GgufFamily("glm4", partial_rotary=True),
}


def gguf_problem(model_dir: str | Path) -> Message | None:
    """Why the model in `model_dir` (a base or merged folder) cannot go to GGUF, or None. Reads
    config.json and tokenizer.json only: called before any export work."""
    args = read_model_args(model_dir)
    family = FAMILIES.get(args.family)
    if family is None:
        return Message("gguf.family_unknown", family=args.family)
    scaling = args.rope_scaling or {}
    carried = (None, "linear", "llama3") + (("longrope",) if family.arch == "phi3" else ())  # phi3 reads its factors
    if scaling.get("rope_type") not in carried:
        return Message("gguf.rope_type", rope_type=scaling.get("rope_type"))
    if args.local_rope_theta is not None and family.arch != "gemma3":
        return Message("gguf.local_rope", family=args.family)
    if args.partial_rotary_factor != 1.0 and not family.partial_rotary:
        return Message("gguf.partial_rotary", factor=args.partial_rotary_factor)
    if family.problem is not None:
        cfg = _text_config(model_dir)
        found = family.problem(args, cfg)
        if found is not None:
            return found
    try:
        read_vocab(Path(model_dir), args.vocab_size)
    except GgufError as err:
        return err.args[0]
    return None


def _text_config(model_dir) -> dict:
    cfg = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
    return cfg.get("text_config") or cfg


# ---- the tokenizer -------------------------------------------------------------------------------

# tokenizer.json pre-tokenizer regexes (as Hugging Face writes them) -> llama.cpp's pre-tokenizer name
PRE_TOKENIZER_REGEXES = {
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+": "qwen2",
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+": "llama-bpe",
}
GPT2_PRE = "gpt-2"  # a ByteLevel pre-tokenizer with its own (GPT-2) regex


@dataclass
class Vocab:
    """What the file's tokenizer.ggml.* keys hold, apart from gguf.SpecialVocab's part: `model` "gpt2"
    (byte-level BPE, with its merges) or "llama" (SentencePiece style: pieces with scores)."""
    tokens: list[str]
    token_types: list[int]
    pre: str
    model: str = "gpt2"
    scores: list[float] | None = None
    add_space_prefix: bool = False


def _pre_tokenizer_name(tok: dict, where: str) -> str:
    steps = _steps(tok.get("pre_tokenizer"))
    kinds = [s.get("type") for s in steps]
    if kinds == ["ByteLevel"] and steps[0].get("use_regex", True):
        if steps[0].get("add_prefix_space"):
            raise GgufError(Message("gguf.tokenizer_prefix_space", file=where))
        return GPT2_PRE
    if kinds == ["Split", "ByteLevel"] and not steps[1].get("use_regex", True):
        pattern = steps[0].get("pattern") or {}
        regex = pattern.get("Regex")
        if regex in PRE_TOKENIZER_REGEXES and steps[0].get("behavior") == "Isolated" and not steps[0].get("invert"):
            return PRE_TOKENIZER_REGEXES[regex]
        raise GgufError(Message("gguf.tokenizer_regex", file=where, regex=repr(regex)))
    raise GgufError(Message("gguf.tokenizer_pre", file=where, kinds=" + ".join(map(str, kinds)) or "none"))


def _steps(part: dict | None) -> list[dict]:
    """A normalizer's, pre-tokenizer's or decoder's steps (a Sequence's members, or itself)."""
    if not part:
        return []
    for key in ("normalizers", "pretokenizers", "decoders"):
        if part.get("type") == "Sequence" and key in part:
            return list(part[key])
    return [part]


SPACE_PIECE = "\u2581"  # "▁", SentencePiece's space


def _sentencepiece_space_prefix(tok: dict, where: str) -> bool:
    """Whether a SentencePiece-style tokenizer.json prepends "▁" to each text segment (llama.cpp's
    add_space_prefix, which prepends one at the start and after every special token) or to none; refused
    (saying what) where llama.cpp's 'llama' tokenizer would split the text otherwise."""
    normal = _steps(tok.get("normalizer"))
    pre = _steps(tok.get("pre_tokenizer"))
    replaces_spaces = any(n.get("type") == "Replace" and (n.get("pattern") or {}).get("String") == " "
                          and n.get("content") == SPACE_PIECE for n in normal)
    prepends = [n for n in normal if n.get("type") == "Prepend"]
    other = [n.get("type") for n in normal if n.get("type") not in ("Replace", "Prepend")
             or n.get("type") == "Prepend" and n.get("prepend") != SPACE_PIECE]
    if other:
        raise _layout(where, normal, pre)
    if replaces_spaces and not pre:  # Llama 2's legacy layout (Prepend) or none (Gemma without the Split)
        return bool(prepends)
    if replaces_spaces and not prepends and all(
            p.get("type") == "Split" and (p.get("pattern") or {}).get("String") == " " for p in pre):
        return False  # Gemma: the spaces are gone before its Split on " " runs
    if not normal and len(pre) == 1 and pre[0].get("type") == "Metaspace" \
            and pre[0].get("replacement") == SPACE_PIECE and not pre[0].get("split", True):
        scheme = pre[0].get("prepend_scheme", "always")
        if scheme != "never":  # llama.cpp prepends to every segment, even one that begins with a space
            raise GgufError(Message("gguf.tokenizer_prepend_first" if scheme == "first"
                                    else "gguf.tokenizer_prepend_always", file=where))
        return False
    raise _layout(where, normal, pre)


def _layout(where: str, normal: list[dict], pre: list[dict]) -> GgufError:
    def kinds(steps: list[dict]) -> str:
        return " + ".join(str(s.get("type")) for s in steps) or "none"
    return GgufError(Message("gguf.tokenizer_sentencepiece_layout", file=where, normalizer=kinds(normal),
                             pre=kinds(pre)))


def _is_sentencepiece_bpe(tok: dict) -> bool:
    model = tok.get("model") or {}
    decoders = [d.get("type") for d in _steps(tok.get("decoder"))]
    return model.get("type") == "BPE" and bool(model.get("byte_fallback")) and "ByteFallback" in decoders


def read_vocab(model_dir: Path, embedding_rows: int) -> Vocab:
    """The vocabulary of tokenizer.json padded to the embedding's rows: byte-level BPE (GPT-2, Llama 3,
    Qwen) or SentencePiece-style BPE with byte fallback (Llama 2, Mistral v0.1, Gemma); another kind
    (Unigram, WordPiece) is refused, naming what it is."""
    _require_gguf()
    path = model_dir / "tokenizer.json"
    if not path.is_file():
        raise GgufError(Message("gguf.no_tokenizer_json", folder=str(model_dir)))
    tok = json.loads(path.read_text(encoding="utf-8"))
    model = tok.get("model") or {}
    decoder = (tok.get("decoder") or {}).get("type")
    if model.get("type") == "Unigram":
        raise GgufError(Message("gguf.tokenizer_unigram", file=str(path)))
    sentencepiece = _is_sentencepiece_bpe(tok)
    if not sentencepiece and (model.get("type") != "BPE" or model.get("byte_fallback") or decoder != "ByteLevel"):
        kind = model.get("type") if model.get("type") != "BPE" else "BPE with byte fallback (SentencePiece style)"
        raise GgufError(Message("gguf.tokenizer_kind", file=str(path), kind=str(kind)))
    if sentencepiece:
        space_prefix = _sentencepiece_space_prefix(tok, str(path))
        pre = "default"
    else:
        pre = _pre_tokenizer_name(tok, str(path))
    unk = model.get("unk_token")
    byte_piece = re.compile(r"^<0x[0-9A-F]{2}>$")
    by_id: dict[int, tuple[str, int]] = {}
    for text, i in model["vocab"].items():
        kind = gguf.TokenType.NORMAL
        if sentencepiece and byte_piece.match(text):
            kind = gguf.TokenType.BYTE
        elif sentencepiece and text == unk:
            kind = gguf.TokenType.UNKNOWN
        by_id[i] = (text, kind)
    for added in tok.get("added_tokens") or []:
        kind = gguf.TokenType.CONTROL if added.get("special") else gguf.TokenType.USER_DEFINED
        if sentencepiece and added["content"] == unk:
            kind = gguf.TokenType.UNKNOWN
        by_id[int(added["id"])] = (added["content"], kind)
    if by_id and max(by_id) >= embedding_rows:
        raise GgufError(Message("gguf.tokenizer_too_big", file=str(path), token_id=max(by_id), rows=embedding_rows))
    tokens, types = [], []
    for i in range(embedding_rows):
        text, kind = by_id.get(i, (f"[PAD{i}]", gguf.TokenType.UNUSED))
        tokens.append(text)
        types.append(int(kind))
    if len(set(tokens)) != len(tokens):
        seen: dict[str, int] = {}
        for i, text in enumerate(tokens):
            if text in seen:
                raise GgufError(Message("gguf.tokenizer_duplicate", file=str(path), token=repr(text),
                                        first=seen[text], second=i))
            seen[text] = i
    if not sentencepiece:
        return Vocab(tokens, types, pre)
    return Vocab(tokens, types, pre, "llama", _merge_scores(model, tokens), space_prefix)


def _merge_scores(model: dict, tokens: list[str]) -> list[float]:
    """SentencePiece scores for llama.cpp's 'llama' tokenizer, which merges the adjacent pair whose
    joined piece scores highest: each piece made by a merge scores minus the rank of its first merge (so
    llama.cpp merges in the order of tokenizer.json's merges), every other piece 0."""
    first: dict[str, int] = {}
    for rank, merge in enumerate(model.get("merges") or []):
        left, right = merge if isinstance(merge, list) else merge.split(" ", 1)
        first.setdefault(left + right, rank)
    return [-float(first[t]) if t in first else 0.0 for t in tokens]


def add_tokenizer(writer, model_dir: Path, vocab: Vocab, add_bos: bool, add_eos: bool) -> None:
    writer.add_tokenizer_model(vocab.model)
    writer.add_tokenizer_pre(vocab.pre)
    writer.add_token_list(vocab.tokens)
    if vocab.scores is not None:
        writer.add_token_scores(vocab.scores)
    writer.add_token_types(vocab.token_types)
    if vocab.model == "llama":
        writer.add_add_space_prefix(vocab.add_space_prefix)
    special = gguf.SpecialVocab(model_dir, load_merges=vocab.model == "gpt2", n_vocab=len(vocab.tokens))
    special.add_special_token.clear()  # BOS/EOS added: said below, from what our tokenizer does
    special.add_to_gguf(writer, quiet=True)
    writer.add_add_bos_token(add_bos)  # what our tokenizer does, said outright (not llama.cpp's default)
    writer.add_add_eos_token(add_eos)


# ---- tensors -------------------------------------------------------------------------------------

@dataclass
class Planned:
    """One tensor of the file: its GGUF name, NumPy-order shape, ggml type and how to make its float32
    values (called once, when it is written)."""
    name: str
    shape: tuple[int, ...]
    qtype: object
    read: Callable[[], np.ndarray]
    rows: Callable[[int, int], np.ndarray] | None = None  # rows a..b alone (a large tensor, a block at a time)

    @property
    def nbytes(self) -> int:
        if self.qtype == gguf.GGMLQuantizationType.F32:
            return int(np.prod(self.shape)) * 4
        return int(np.prod(gguf.quant_shape_to_byte_shape(self.shape, self.qtype)))


_EXPERT = re.compile(r"^(?P<prefix>model\.layers\.\d+\.mlp\.experts)\.(?P<e>\d+)\.(?P<proj>\w+)\.weight$")
_STACKED_GATE_UP = re.compile(r"^(?P<prefix>model\.layers\.\d+\.mlp\.experts)\.gate_up_proj(\.weight)?$")
_STACKED_DOWN = re.compile(r"^(?P<prefix>model\.layers\.\d+\.mlp\.experts)\.down_proj(\.weight)?$")
EXPERT_PROJECTIONS = {"w1": "gate_proj", "w3": "up_proj", "w2": "down_proj",  # Mixtral's hub names
                      "gate_proj": "gate_proj", "up_proj": "up_proj", "down_proj": "down_proj"}


def permute_rows(weights: np.ndarray, heads: int) -> np.ndarray:
    """q or k rows (heads · head_dim, ...) from 'rotate halves' to llama.cpp's 'rotate pairs' order:
    within each head, row i of the first half and row i of the second become rows 2i and 2i+1."""
    head_dim = weights.shape[0] // heads
    return (weights.reshape(heads, 2, head_dim // 2, *weights.shape[1:])  # (heads, half, head_dim/2, ...)
            .swapaxes(1, 2)  # (heads, head_dim/2, half, ...)
            .reshape(weights.shape))


def _qtype_for(gguf_name: str, shape: tuple[int, ...], quant: str):
    q = gguf.GGMLQuantizationType
    if len(shape) <= 1 or gguf_name.endswith("_norm.weight") or ".ffn_gate_inp." in gguf_name \
            or not gguf_name.endswith(".weight"):
        return q.F32
    wanted = {"f16": q.F16, "bf16": q.BF16, "q8_0": q.Q8_0, "f32": q.F32}[quant]
    block, _ = gguf.GGML_QUANT_SIZES[wanted]
    return wanted if shape[-1] % block == 0 else q.F16  # as llama.cpp's converter: rows it cannot block


class TensorSource:
    """The merged folder's tensors under our names (the family key map's renames), read as float32."""

    def __init__(self, folder: Path, args: ModelArgs):
        self.readers = [SafetensorsReader(p) for p in weight_files(folder)]
        key_map = args.spec.key_map
        self.where: dict[str, tuple[SafetensorsReader, str]] = {}
        for reader in self.readers:
            for hub_name in reader.tensors:
                if key_map.is_ignored(hub_name):
                    continue  # rotary buffers, a vision tower: not the language model's
                self.where[key_map.our_name(hub_name)] = (reader, hub_name)

    def shape(self, name: str) -> tuple[int, ...]:
        reader, hub = self.where[name]
        return reader.tensors[hub].shape

    def read(self, name: str) -> np.ndarray:
        reader, hub = self.where[name]
        return to_float32(reader.read(hub, raw=True), reader.tensors[hub].dtype)

    def row_reader(self, name: str) -> Callable[[int, int], np.ndarray] | None:
        reader, hub = self.where[name]
        return lambda a, b: to_float32(reader.read_rows(hub, a, b, raw=True), reader.tensors[hub].dtype)

    def close(self) -> None:
        for reader in self.readers:
            reader.close()


def plan_tensors(source: TensorSource, args: ModelArgs, family: GgufFamily, quant: str) -> list[Planned]:
    """Every tensor of the file in the folder's order, with the transformation it needs."""
    arch = _arch(family)
    names = gguf.get_tensor_name_map(arch, args.num_layers)
    planned: list[Planned] = []
    experts: dict[str, dict[tuple[str, int], str]] = {}
    for name in source.where:
        if args.tie_word_embeddings and name == "lm_head.weight":
            continue  # llama.cpp uses token_embd for a tied output
        if (match := _EXPERT.match(name)) and match["proj"] in EXPERT_PROJECTIONS:
            experts.setdefault(match["prefix"], {})[(EXPERT_PROJECTIONS[match["proj"]], int(match["e"]))] = name
            continue
        if match := _STACKED_GATE_UP.match(name):
            planned += _split_gate_up(source, name, match["prefix"], names, quant)
            continue
        if match := _STACKED_DOWN.match(name):
            planned.append(_planned(names, f"{match['prefix']}.down_proj.weight", source.shape(name), quant,
                                    lambda n=name: source.read(n)))
            continue
        read = _reader(source, name, args, family)
        item = _planned(names, name, source.shape(name), quant, read)
        if not _transformed(name, family):
            item.rows = source.row_reader(name)
        planned.append(item)
    for prefix, parts in experts.items():
        count = 1 + max(e for _, e in parts)
        for proj in ("gate_proj", "up_proj", "down_proj"):
            members = [parts[(proj, e)] for e in range(count)]
            shape = (count, *source.shape(members[0]))  # (experts, out, in)
            planned.append(_planned(names, f"{prefix}.{proj}.weight", shape, quant,
                                    lambda m=members: np.stack([source.read(n) for n in m])))
    if (args.rope_scaling or {}).get("rope_type") == "longrope":  # llama.cpp's phi3: one of the two per layer
        for kind, key in ((gguf.MODEL_TENSOR.ROPE_FACTORS_SHORT, "short_factor"),
                          (gguf.MODEL_TENSOR.ROPE_FACTORS_LONG, "long_factor")):
            factors = np.asarray(args.rope_scaling[key], np.float32)
            planned.insert(0, Planned(gguf.TENSOR_NAMES[kind] + ".weight", factors.shape,
                                      gguf.GGMLQuantizationType.F32, lambda f=factors: f))
    if (args.rope_scaling or {}).get("rope_type") == "llama3":
        plain = rope_inverse_frequencies(_without_scaling(args))
        scaled = rope_inverse_frequencies(args)
        factors = (plain / scaled).astype(np.float32)  # llama.cpp divides each frequency by its factor
        planned.insert(0, Planned(gguf.TENSOR_NAMES[gguf.MODEL_TENSOR.ROPE_FREQS] + ".weight", factors.shape,
                                  gguf.GGMLQuantizationType.F32, lambda f=factors: f))
    return planned


def _without_scaling(args: ModelArgs) -> ModelArgs:
    from dataclasses import replace
    return replace(args, rope_scaling=None)


def _split_gate_up(source, name, prefix, names, quant) -> list[Planned]:
    experts, both, hidden = source.shape(name)  # (E, 2I, H): gate then up
    half = both // 2
    return [_planned(names, f"{prefix}.gate_proj.weight", (experts, half, hidden), quant,
                     lambda: source.read(name)[:, :half]),
            _planned(names, f"{prefix}.up_proj.weight", (experts, half, hidden), quant,
                     lambda: source.read(name)[:, half:])]


def _transformed(name: str, family: GgufFamily) -> bool:
    return (family.permute_qk and name.endswith(("q_proj.weight", "q_proj.bias", "k_proj.weight", "k_proj.bias"))
            or family.norm_plus_one and name.endswith("norm.weight"))


def _reader(source: TensorSource, name: str, args: ModelArgs, family: GgufFamily) -> Callable[[], np.ndarray]:
    def read() -> np.ndarray:
        values = source.read(name)
        if family.permute_qk and name.endswith(("q_proj.weight", "q_proj.bias")):
            values = permute_rows(values, args.num_heads)
        elif family.permute_qk and name.endswith(("k_proj.weight", "k_proj.bias")):
            values = permute_rows(values, args.num_kv_heads)
        if family.norm_plus_one and name.endswith("norm.weight"):
            values = values + np.float32(1.0)
        return values
    return read


def _planned(names, ours: str, shape, quant, read) -> Planned:
    mapped = names.get_name(ours, try_suffixes=(".weight", ".bias"))
    if mapped is None:
        raise GgufError(Message("gguf.tensor_unmapped", name=ours))
    return Planned(mapped, tuple(shape), _qtype_for(mapped, tuple(shape), quant), read)


def _arch(family: GgufFamily):
    return next(a for a, n in gguf.MODEL_ARCH_NAMES.items() if n == family.arch)


# ---- the hyper-parameters ------------------------------------------------------------------------

FILE_TYPES = {"f32": "ALL_F32", "f16": "MOSTLY_F16", "bf16": "MOSTLY_BF16", "q8_0": "MOSTLY_Q8_0"}


def add_hyperparameters(writer, args: ModelArgs, cfg: dict, family: GgufFamily, quant: str) -> None:
    writer.add_block_count(args.num_layers)
    writer.add_context_length(args.max_position_embeddings)
    writer.add_embedding_length(args.hidden_size)
    writer.add_feed_forward_length(args.intermediate_size)
    writer.add_head_count(args.num_heads)
    writer.add_head_count_kv(args.num_kv_heads)
    writer.add_key_length(args.head_dim)
    writer.add_value_length(args.head_dim)
    writer.add_rope_dimension_count(args.rotary_dim)
    writer.add_rope_freq_base(args.rope_theta)
    writer.add_layer_norm_rms_eps(args.rms_norm_eps)
    writer.add_vocab_size(args.vocab_size)
    scaling = args.rope_scaling or {}
    if scaling.get("rope_type") == "linear":
        writer.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        writer.add_rope_scaling_factor(float(scaling["factor"]))
    long_after = rope_long_after(args)
    if long_after is not None:  # LongRoPE: the factors are tensors; cos and sin scaled by the attention factor
        writer.add_rope_scaling_orig_ctx_len(long_after)
        writer.add_rope_scaling_attn_factors(rope_attention_factor(args))
    if args.moe is not None:
        writer.add_expert_count(args.moe.num_experts)
        writer.add_expert_used_count(args.moe.top_k)
        if family.arch == "qwen3moe":
            writer.add_expert_feed_forward_length(args.moe.expert_intermediate_size)
    if args.attn_softcap is not None:
        writer.add_attn_logit_softcapping(args.attn_softcap)
    if args.final_softcap is not None:
        writer.add_final_logit_softcapping(args.final_softcap)
    if family.arch == "phi3":  # as llama.cpp's converter: the window, 0 for none (llama.cpp then ignores it)
        writer.add_sliding_window(args.sliding_window or 0)
    if family.arch in ("gemma2", "gemma3") and args.sliding_window is not None:
        writer.add_sliding_window(args.sliding_window)
        # which layers slide, layer by layer (the family's own pattern, as our model computes it)
        writer.add_sliding_window_pattern([t == "sliding_attention" for t in args.layer_types]
                                          or [False] * args.num_layers)
        if args.local_rope_theta is not None:
            writer.add_rope_freq_base_swa(args.local_rope_theta)
    writer.add_file_type(getattr(gguf.LlamaFileType, FILE_TYPES[quant]))
    if quant == "q8_0":
        writer.add_quantization_version(gguf.GGML_QUANT_VERSION)


# ---- writing -------------------------------------------------------------------------------------

@dataclass
class GgufInfo:
    """What a written file holds, for its check and the console."""
    path: Path
    arch: str
    quant: str
    tensors: int
    nbytes: int
    fallbacks: list[str] = field(default_factory=list)  # tensors written f16 (rows q8_0 cannot block)
    notes: list[str] = field(default_factory=list)


def estimated_size(folder: Path, quant: str) -> int:
    weights = 0
    for path in weight_files(folder):
        with SafetensorsReader(path) as reader:
            weights += sum(int(np.prod(info.shape)) for info in reader.tensors.values())
    return int(weights * BYTES_PER_WEIGHT[quant]) + (64 << 20)


def write_gguf(merged_dir: str | Path, out_path: str | Path, quant: str = "f16", name: str = "",
               add_bos: bool = False, add_eos: bool = False, extra: dict | None = None,
               source: TensorSource | None = None) -> GgufInfo:
    """Write the merged folder `merged_dir` as one GGUF file at `out_path` (atomically: a temporary
    name beside it, renamed when complete; removed on any failure, a full disk named). `source`: the
    tensors from elsewhere (a checkpoint merged on the fly, core.engine.gguf_run.MergedSource), the
    folder then giving the config and the tokenizer only."""
    _require_gguf()
    if quant not in WRITTEN_BY_US:
        raise GgufError(Message("gguf.quant", quant=quant, choices=", ".join(WRITTEN_BY_US)))
    folder, out_path = Path(merged_dir), Path(out_path)
    problem = gguf_problem(folder)
    if problem is not None:
        raise GgufError(problem)
    args = read_model_args(folder)
    family = FAMILIES[args.family]
    cfg = _text_config(folder)
    vocab = read_vocab(folder, args.vocab_size)
    needed = estimated_size(folder, quant)
    if free_bytes(out_path.parent) < needed:
        raise GgufError(_disk_full(out_path, needed))
    source = source or TensorSource(folder, args)
    try:
        planned = plan_tensors(source, args, family, quant)
        try:
            with atomic_path(out_path) as tmp:
                _write(tmp, planned, args, cfg, family, quant, folder, vocab, name, add_bos, add_eos, extra or {})
        except OSError as err:
            if err.errno in (errno.ENOSPC, errno.EDQUOT):
                raise GgufError(_disk_full(out_path, needed)) from err
            raise
    finally:
        source.close()
    fallbacks = [p.name for p in planned if quant == "q8_0" and p.qtype == gguf.GGMLQuantizationType.F16]
    return GgufInfo(out_path, family.arch, quant, len(planned), out_path.stat().st_size, fallbacks, _notes(args))


def _disk_full(out_path: Path, needed: int) -> Message:
    return Message("gguf.disk_full", folder=str(out_path.parent), needed=format_bytes(needed),
                   free=format_bytes(free_bytes(out_path.parent)))


def _write(tmp: Path, planned: list[Planned], args, cfg, family, quant, folder, vocab, name, add_bos, add_eos,
           extra: dict) -> None:
    writer = gguf.GGUFWriter(str(tmp), family.arch)
    writer.add_type(gguf.GGUFType.MODEL)
    writer.add_name(name or folder.name)
    add_hyperparameters(writer, args, cfg, family, quant)
    add_tokenizer(writer, folder, vocab, add_bos, add_eos)
    for key, value in extra.items():
        writer.add_string(key, value)
    for item in planned:
        writer.add_tensor_info(item.name, item.shape, np.dtype(np.float32), item.nbytes, raw_dtype=item.qtype)
    writer.write_header_to_file(path=tmp)
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for item in planned:
        if item.rows is not None and int(np.prod(item.shape)) * 4 > CHUNK_BYTES:
            _write_rows(writer, item)
            continue
        values = np.ascontiguousarray(item.read(), dtype=np.float32)
        if values.shape != item.shape:
            raise GgufError(Message("gguf.tensor_shape", name=item.name, shape=str(values.shape),
                                    expected=str(item.shape)))
        writer.write_tensor_data(_quantized(values, item.qtype))
    writer.close()


CHUNK_BYTES = 64 << 20  # a float32 tensor larger than this (an embedding) is converted a block of rows at a time


def _quantized(values: np.ndarray, qtype) -> np.ndarray:
    return values if qtype == gguf.GGMLQuantizationType.F32 else gguf.quants.quantize(values, qtype)


def _write_rows(writer, item: Planned) -> None:
    """`GGUFWriter.write_tensor_data` for one tensor given a block of rows at a time (every type here
    quantizes rows independently): the same bytes and padding, without the whole tensor in float32."""
    from gguf.gguf_writer import WriterState
    fout = writer.fout[0]
    info = writer.tensors[0].pop(item.name)  # the next tensor in the file's order: this one
    writer.write_padding(fout, fout.tell())
    step = max(1, CHUNK_BYTES // 4 // max(1, int(np.prod(item.shape[1:]))))
    written = 0
    for start in range(0, item.shape[0], step):
        block = np.ascontiguousarray(item.rows(start, start + step), dtype=np.float32)
        data = _quantized(block, item.qtype)
        data.tofile(fout)
        written += data.nbytes
    if written != info.nbytes:
        raise GgufError(Message("gguf.tensor_shape", name=item.name, shape=f"{written} bytes",
                                expected=f"{info.nbytes} bytes"))
    writer.write_padding(fout, info.nbytes)
    writer.state = WriterState.WEIGHTS


def iter_gguf_tensors(path: str | Path) -> Iterator[tuple[str, tuple[int, ...], str]]:
    """(name, shape in ggml order, type name) of each tensor of a GGUF file (gguf.GGUFReader)."""
    reader = gguf.GGUFReader(str(path))
    for tensor in reader.tensors:
        yield tensor.name, tuple(int(n) for n in tensor.shape), tensor.tensor_type.name


# ---- a LoRA adapter in llama.cpp's adapter format --------------------------------------------------

def write_lora_gguf(base_dir: str | Path, adapter: dict[str, tuple[np.ndarray, np.ndarray]], alpha: float,
                    out_path: str | Path, name: str = "") -> GgufInfo:
    """`adapter`: our module name (model.layers.N.self_attn.q_proj) -> (A (r, in), B (out, r)) float32.
    Written as llama.cpp's convert_lora_to_gguf does: general.type = adapter, adapter.type = lora,
    adapter.lora.alpha, tensors `<base tensor>.lora_a` / `.lora_b` (B's rows permuted like the base's q/k)."""
    _require_gguf()
    base_dir, out_path = Path(base_dir), Path(out_path)
    problem = gguf_problem(base_dir)
    if problem is not None:
        raise GgufError(problem)
    args = read_model_args(base_dir)
    family = FAMILIES[args.family]
    names = gguf.get_tensor_name_map(_arch(family), args.num_layers)
    planned = []
    for module, (lora_a, lora_b) in adapter.items():
        if lora_a.ndim != 2:
            raise GgufError(Message("gguf.lora_experts", module=module))
        mapped = names.get_name(module + ".weight", try_suffixes=(".weight",))
        if mapped is None:
            raise GgufError(Message("gguf.tensor_unmapped", name=module + ".weight"))
        if family.permute_qk and module.endswith("q_proj"):
            lora_b = permute_rows(lora_b, args.num_heads)
        elif family.permute_qk and module.endswith("k_proj"):
            lora_b = permute_rows(lora_b, args.num_kv_heads)
        f32 = gguf.GGMLQuantizationType.F32
        planned.append(Planned(mapped + ".lora_a", lora_a.shape, f32, lambda a=lora_a: a))
        planned.append(Planned(mapped + ".lora_b", lora_b.shape, f32, lambda b=lora_b: b))
    with atomic_path(out_path) as tmp:
        writer = gguf.GGUFWriter(str(tmp), family.arch)
        writer.add_type(gguf.GGUFType.ADAPTER)
        writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
        writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, float(alpha))
        writer.add_name(name or out_path.stem)
        for item in planned:
            writer.add_tensor_info(item.name, item.shape, np.dtype(np.float32), item.nbytes, raw_dtype=item.qtype)
        writer.write_header_to_file(path=tmp)
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
        for item in planned:
            writer.write_tensor_data(np.ascontiguousarray(item.read(), dtype=np.float32))
        writer.close()
    return GgufInfo(out_path, family.arch, "f32", len(planned), out_path.stat().st_size)
