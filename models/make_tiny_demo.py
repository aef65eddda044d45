"""Build `models/tiny-demo/`, the small pretrained base model mindtune ships for its demo.

What it makes, reproducibly (fixed seeds, `torch.manual_seed(0)`, a fixed `torch.set_num_threads`):

1. a byte-level BPE tokenizer (vocab 1024; `<|endoftext|>`=0 ends each raw document and pads,
   `<|im_start|>`=1, `<|im_end|>`=2; no BOS, like Qwen2) trained on the generated "tiny world"
   corpus of `data/make_demo_data.py`, saved as Hugging Face files with a ChatML chat template;
2. a Hugging Face `LlamaForCausalLM` (hidden 256, 4 layers, 8 heads, 4 KV heads, ~3.2M
   parameters, tied embeddings) pretrained from scratch on freshly generated stories and chats
   (whole documents packed into 256-token rows), saved as fp32 `model.safetensors`;
3. a report (`training_report.json`) and a model card (`README.md`): held-out perplexity against
   the uniform guess, a fact-recall probe, greedy samples, and exact match on the demo QA test
   split, which the base model fails: answering questions is what the demo fine-tune teaches.

`--check-finetune` additionally fine-tunes a copy in torch on `data/demo/train.jsonl` (prompt
tokens masked, loss on the answer and `<|im_end|>`) and reports test exact match, to prove the
task is learnable. It is a check, not part of what ships.

Threads: one by default. On a 2-core machine shared with other jobs, two torch threads were 2-5x
*slower* than one in our measurements (each parallel region waits for the thread that lost its
core); pass `--threads 2` on an idle machine. The thread count is recorded in the report, since
it can change the last bits of the result.

Budget: the build takes about 8 minutes on an idle 2-core CPU (400 steps of 8x256 tokens) and
must stay under 15; under heavy sharing a step can take 2-4x longer.

Usage (from the repository root; torch and transformers are dev dependencies):

    python models/make_tiny_demo.py                            # build models/tiny-demo
    python models/make_tiny_demo.py --reuse --check-finetune   # then verify learnability
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import random
import sys
import time
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import AutoTokenizer, GenerationConfig, LlamaConfig, LlamaForCausalLM

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "data"))
import make_demo_data as demo  # noqa: E402  (the data generator lives beside the data it makes)

SEED = 0
NUM_THREADS = 1  # see the module docstring: faster than 2 when the two cores are shared
VOCAB_SIZE = 1024
ENDOFTEXT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = (ENDOFTEXT, IM_START, IM_END)  # ids 0, 1, 2
EOS_IDS = [0, 2]
PAD_ID = 0
MODEL_MAX_LENGTH = 512
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content']"
    " + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
TOKENIZER_TRAIN_DOCS = 20_000
HELDOUT_SEQUENCES = 64
CHAT_PROMPT = f"{IM_START}user\nTell me a story about Mia.{IM_END}\n{IM_START}assistant\n"


# --- tokenizer -----------------------------------------------------------------------------------

def train_tokenizer(documents: list[str]) -> Tokenizer:
    """Byte-level BPE over the corpus; the three special tokens take ids 0-2."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    # Special tokens are not text to merge: train on the documents with them blanked out.
    plain = (strip_special_tokens(doc) for doc in documents)
    tokenizer.train_from_iterator(plain, trainer=trainer, length=len(documents))
    for token_id, token in enumerate(SPECIAL_TOKENS):
        assert tokenizer.token_to_id(token) == token_id, f"{token} must have id {token_id}"
    return tokenizer


def strip_special_tokens(text: str) -> str:
    """The text with every special token replaced by a newline."""
    for token in SPECIAL_TOKENS:
        text = text.replace(token, "\n")
    return text


def tokenizer_config() -> dict:
    """Hugging Face `tokenizer_config.json` for the fast tokenizer with the ChatML template."""
    added = {
        str(i): {"content": t, "lstrip": False, "normalized": False, "rstrip": False,
                 "single_word": False, "special": True}
        for i, t in enumerate(SPECIAL_TOKENS)
    }
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "added_tokens_decoder": added,
        "additional_special_tokens": [IM_START, IM_END],
        "bos_token": None,
        "eos_token": IM_END,
        "pad_token": ENDOFTEXT,
        "unk_token": None,
        "model_max_length": MODEL_MAX_LENGTH,
        "clean_up_tokenization_spaces": False,
        "split_special_tokens": False,
        "chat_template": CHAT_TEMPLATE,
    }


def save_tokenizer(tokenizer: Tokenizer, out_dir: Path) -> None:
    """Write tokenizer.json, tokenizer_config.json and special_tokens_map.json."""
    tokenizer.save(str(out_dir / "tokenizer.json"))
    write_json(out_dir / "tokenizer_config.json", tokenizer_config())
    write_json(out_dir / "special_tokens_map.json", {
        "additional_special_tokens": [IM_START, IM_END], "eos_token": IM_END, "pad_token": ENDOFTEXT,
    })


def check_tokenizer(out_dir: Path):
    """Load the saved files with AutoTokenizer and check ids and the chat rendering; return it."""
    hf_tokenizer = AutoTokenizer.from_pretrained(out_dir)
    assert hf_tokenizer.eos_token_id == 2 and hf_tokenizer.pad_token_id == 0, "eos/pad ids"
    assert hf_tokenizer.bos_token_id is None, "no BOS token"
    messages = [{"role": "user", "content": "Say hello."}, {"role": "assistant", "content": "Hello!"}]
    rendered = hf_tokenizer.apply_chat_template(messages, tokenize=False)
    assert rendered == demo.render_chatml([("user", "Say hello."), ("assistant", "Hello!")]), rendered
    prompt = hf_tokenizer.apply_chat_template(messages[:1], tokenize=False, add_generation_prompt=True)
    assert prompt == f"{IM_START}user\nSay hello.{IM_END}\n{IM_START}assistant\n", prompt
    ids = hf_tokenizer(prompt, add_special_tokens=True)["input_ids"]
    assert ids[0] == 1 and ids.count(2) == 1, f"special tokens must stay single ids: {ids}"
    assert hf_tokenizer.decode(ids) == prompt, "decode must round-trip"
    return hf_tokenizer


# --- model ---------------------------------------------------------------------------------------

def model_config() -> LlamaConfig:
    """The tiny Llama: GQA 8/4 heads of 32, SwiGLU 688, tied embeddings, no BOS."""
    return LlamaConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=256,
        intermediate_size=688,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=4,
        hidden_act="silu",
        max_position_embeddings=MODEL_MAX_LENGTH,
        rope_theta=10000.0,
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
        initializer_range=0.02,
        bos_token_id=None,
        eos_token_id=EOS_IDS,
        pad_token_id=PAD_ID,
        attention_bias=False,
        mlp_bias=False,
    )


def build_model() -> LlamaForCausalLM:
    """A freshly initialised model (seeded by the caller) with the demo's generation defaults."""
    model = LlamaForCausalLM(model_config())
    model.generation_config = GenerationConfig(bos_token_id=None, eos_token_id=EOS_IDS, pad_token_id=PAD_ID)
    return model


def add_legacy_config_keys(out_dir: Path) -> None:
    """Also spell `rope_theta` and `torch_dtype` at the top level of config.json.

    transformers 5 writes them as `rope_parameters.rope_theta` and `dtype`; most published
    checkpoints (and readers written against them) use the 4.x names. Both load in transformers 5.
    Idempotent.
    """
    path = out_dir / "config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    rope = config.get("rope_parameters") or {}
    config.setdefault("rope_theta", rope.get("rope_theta", model_config().rope_parameters["rope_theta"]))
    config.setdefault("torch_dtype", config.get("dtype", "float32"))
    write_json(path, config)


def parameter_count(model: torch.nn.Module) -> int:
    """Distinct parameters (the tied embedding counted once)."""
    return sum(p.numel() for p in model.parameters())


# --- pretraining ---------------------------------------------------------------------------------

def pack_documents(tokenizer: Tokenizer, documents: list[str], seq_len: int, open_rows: int = 32) -> torch.Tensor:
    """Tokenize documents, end each with <|endoftext|>, and pack whole documents into rows.

    A document never straddles two rows, so a story's restatements always see its facts. Each
    document goes into the first of the last `open_rows` rows with room for it (first fit), which
    leaves little padding; the padding is <|endoftext|> and the loss ignores it (see `labels_of`).
    Returns (2, N, seq_len): token ids and 0/1 "real token" flags.
    """
    rows: list[list[int]] = []
    first_open = 0
    for encoding in tokenizer.encode_batch(documents):
        doc = encoding.ids[: seq_len - 1] + [0]
        target = next((i for i in range(first_open, len(rows)) if len(rows[i]) + len(doc) <= seq_len), None)
        if target is None:
            rows.append([])
            target = len(rows) - 1
            first_open = max(first_open, len(rows) - open_rows)
        rows[target] += doc
    rows = rows[:first_open]  # only closed rows: the open tail may still be mostly empty
    ids = torch.tensor([row + [0] * (seq_len - len(row)) for row in rows], dtype=torch.long)  # (N, T)
    real = torch.tensor([[1] * len(row) + [0] * (seq_len - len(row)) for row in rows], dtype=torch.long)
    return torch.stack([ids, real])  # (2, N, T)


def labels_of(packed: torch.Tensor) -> torch.Tensor:
    """Next-token labels for packed rows: the ids, with padding set to -100 (ignored)."""
    ids, real = packed[0], packed[1].bool()
    return ids.masked_fill(~real, -100)


def corpus_rows(tokenizer: Tokenizer, seed: int, n_rows: int, seq_len: int) -> torch.Tensor:
    """Exactly `n_rows` packed rows, shape (2, n_rows, seq_len), of fresh documents from stream `seed`."""
    sample = pack_documents(tokenizer, demo.generate_corpus(seed, 400), seq_len)
    docs_per_row = 400 / max(1, sample.shape[1])
    n_docs = int(n_rows * docs_per_row * 1.05) + 400
    packed = pack_documents(tokenizer, demo.generate_corpus(seed, n_docs), seq_len)
    assert packed.shape[1] >= n_rows, "generated too few documents"
    return packed[:, :n_rows]


def learning_rate(step: int, total_steps: int, peak_lr: float, warmup_steps: int) -> float:
    """Linear warmup to `peak_lr`, then cosine decay to a tenth of it."""
    if step < warmup_steps:
        return peak_lr * (step + 1) / warmup_steps
    progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
    return peak_lr * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress)))


def make_optimizer(model: torch.nn.Module, lr: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW with decay on matrices only (not on norms)."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), eps=1e-8)


def pretrain(model: LlamaForCausalLM, tokenizer: Tokenizer, rows: torch.Tensor, args: argparse.Namespace) -> list[dict]:
    """Next-token training over `rows` in batches of `args.batch_size`; returns the loss log
    (with the fact-recall probe every `args.probe_every` steps, if set)."""
    optimizer = make_optimizer(model, args.lr, weight_decay=0.1)
    warmup = max(1, args.steps // 20)
    model.train()
    log, started = [], time.time()
    for step in range(args.steps):
        batch = rows[:, step * args.batch_size:(step + 1) * args.batch_size]  # (2, B, T)
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, args.steps, args.lr, warmup)
        loss = model(input_ids=batch[0], labels=labels_of(batch)).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        last = step == args.steps - 1
        probe = bool(args.probe_every) and step > 0 and (step % args.probe_every == 0 or last)
        if step % 25 == 0 or last or probe:
            entry = {"step": step, "loss": round(loss.item(), 4), "elapsed_s": round(time.time() - started, 1)}
            if probe:
                entry["cloze_accuracy"] = cloze_accuracy(model, tokenizer, seed=demo.HELDOUT_SEED + 2, n=100)
                model.train()
            log.append(entry)
            print(" ".join(f"{k} {v}" for k, v in entry.items()), flush=True)
    model.eval()
    return log


# --- evaluation ----------------------------------------------------------------------------------

@torch.no_grad()
def mean_nll(model: LlamaForCausalLM, rows: torch.Tensor, batch_size: int = 16) -> tuple[float, int]:
    """Mean next-token negative log-likelihood (nats) over the real tokens of packed `rows`,
    and how many tokens were predicted."""
    total, count = 0.0, 0
    for start in range(0, rows.shape[1], batch_size):
        batch = rows[:, start:start + batch_size]  # (2, B, T)
        labels = labels_of(batch)
        n_predicted = int((labels[:, 1:] != -100).sum())
        total += model(input_ids=batch[0], labels=labels).loss.item() * n_predicted
        count += n_predicted
    return total / count, count


@torch.no_grad()
def greedy_batch(model: LlamaForCausalLM, prompts: list[list[int]], max_new_tokens: int) -> list[list[int]]:
    """Greedy continuations (new ids only) of token-id prompts, left-padded into one batch.

    `generate` stops a row after <|endoftext|> or <|im_end|> and pads it from then on.
    """
    width = max(len(p) for p in prompts)
    input_ids = torch.tensor([[PAD_ID] * (width - len(p)) + p for p in prompts])  # (B, T)
    attention_mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])  # (B, T)
    output = model.generate(
        input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=max_new_tokens,
        do_sample=False, eos_token_id=EOS_IDS, pad_token_id=PAD_ID,
    )
    return output[:, width:].tolist()


def greedy_ids(model: LlamaForCausalLM, prompt_ids: list[int], max_new_tokens: int) -> list[int]:
    """Greedy continuation of one prompt (no padding involved)."""
    return greedy_batch(model, [prompt_ids], max_new_tokens)[0]


def story_prompts() -> list[str]:
    """Story openings built from the world's facts, each stopping right before a restated fact."""
    w = demo.WORLD
    mia, tom, ben, lily = w["Mia"], w["Tom"], w["Ben"], w["Lily"]
    return [
        f"{mia.name} has {demo.a_thing(mia)}. {tom.name} went to the {tom.place}. {mia.name}'s {mia.obj} is",
        f"Once upon a time, there were two friends. {ben.name} found {demo.a_thing(ben)}. "
        f"{lily.name} walked to the {lily.place}. The {ben.color} {ben.obj} belongs to",
        "Once upon a time,",
    ]


def sample_generations(model: LlamaForCausalLM, hf_tokenizer) -> list[dict]:
    """Greedy continuations of the story prompts and of a chat prompt, for the report."""
    samples = [{"prompt": p, "completion": greedy_text(model, hf_tokenizer, p, 40)} for p in story_prompts()]
    samples.append({"prompt": CHAT_PROMPT, "completion": greedy_text(model, hf_tokenizer, CHAT_PROMPT, 80)})
    return samples


def greedy_text(model: LlamaForCausalLM, hf_tokenizer, prompt: str, max_new_tokens: int) -> str:
    """Decoded greedy continuation of a text prompt (special tokens kept, to show where it stopped)."""
    ids = hf_tokenizer(prompt, add_special_tokens=False)["input_ids"]
    return hf_tokenizer.decode(greedy_ids(model, ids, max_new_tokens))


def qa_prompt(hf_tokenizer, row: dict) -> str:
    """The chat prompt of an alpaca row: one user turn `instruction\\n\\ninput`, then the assistant header."""
    messages = [{"role": "user", "content": row["instruction"] + "\n\n" + row["input"]}]
    return hf_tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def answer_of(hf_tokenizer, new_ids: list[int]) -> str:
    """The generated answer: text before the first stop token, stripped."""
    kept = []
    for token_id in new_ids:
        if token_id in EOS_IDS:
            break
        kept.append(token_id)
    return hf_tokenizer.decode(kept).strip()


def exact_match(model: LlamaForCausalLM, hf_tokenizer, rows: list[dict], max_new_tokens: int = 8,
                batch_size: int = 50) -> dict:
    """Share of rows whose greedy answer equals `output` exactly (after stripping), plus examples."""
    prompts = [hf_tokenizer(qa_prompt(hf_tokenizer, row), add_special_tokens=False)["input_ids"] for row in rows]
    answers = []
    for start in range(0, len(prompts), batch_size):
        for new_ids in greedy_batch(model, prompts[start:start + batch_size], max_new_tokens):
            answers.append(answer_of(hf_tokenizer, new_ids))
    hits = sum(answer == row["output"] for answer, row in zip(answers, rows))
    examples = [{"question": row["input"].rsplit("\n", 1)[-1], "expected": row["output"], "got": answer}
                for answer, row in list(zip(answers, rows))[:6]]
    return {"exact_match": round(hits / len(rows), 4), "n": len(rows), "examples": examples}


def cloze_prompts(seed: int, n: int) -> list[tuple[str, str]]:
    """(text, answer word) pairs: a fact story, then the start of a restatement whose next word
    is the answer ("... The color of Mia's kite is" -> " green")."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        cast = demo.sample_cast(rng, rng.randint(2, 4))
        story = demo.render_fact_story(rng, cast)
        c = rng.choice(cast)
        prefix, answer = rng.choice((
            (f"The color of {c.name}'s {c.obj} is", c.color),
            (f"The {c.color} {c.obj} belongs to", c.name),
            (f"{c.name} was at the", c.place),
        ))
        pairs.append((f"{story} {prefix}", answer))
    return pairs


@torch.no_grad()
def cloze_accuracy(model: LlamaForCausalLM, tokenizer: Tokenizer, seed: int, n: int = 200) -> float:
    """Fact-recall probe: share of cloze prompts whose top next token is the answer word.

    It shows that the base model knows the facts the demo questions ask about, although it cannot
    yet answer questions."""
    pairs = cloze_prompts(seed, n)
    prompts = [tokenizer.encode(text).ids for text, _ in pairs]
    targets = torch.tensor([tokenizer.encode(" " + answer).ids[0] for _, answer in pairs])
    width = max(len(p) for p in prompts)
    # Right padding is harmless here: with a causal mask, real tokens never attend to later pads.
    input_ids = torch.tensor([p + [PAD_ID] * (width - len(p)) for p in prompts])  # (B, T)
    last = torch.tensor([len(p) - 1 for p in prompts])
    logits = model(input_ids=input_ids).logits  # (B, T, V)
    predicted = logits[torch.arange(len(prompts)), last].argmax(-1)  # (B,)
    return round((predicted == targets).float().mean().item(), 4)


# --- fine-tune check -----------------------------------------------------------------------------

def sft_example(hf_tokenizer, row: dict) -> tuple[list[int], list[int]]:
    """(input ids, labels) of an alpaca row: prompt masked with -100, loss on answer + <|im_end|>."""
    prompt_ids = hf_tokenizer(qa_prompt(hf_tokenizer, row), add_special_tokens=False)["input_ids"]
    answer_ids = hf_tokenizer(row["output"], add_special_tokens=False)["input_ids"] + [2]
    return prompt_ids + answer_ids, [-100] * len(prompt_ids) + answer_ids


def sft_batch(examples: list[tuple[list[int], list[int]]]) -> dict[str, torch.Tensor]:
    """Right-pad a list of examples into input_ids / attention_mask / labels tensors, each (B, T)."""
    width = max(len(ids) for ids, _ in examples)
    input_ids = torch.full((len(examples), width), PAD_ID, dtype=torch.long)
    labels = torch.full((len(examples), width), -100, dtype=torch.long)
    attention_mask = torch.zeros((len(examples), width), dtype=torch.long)
    for i, (ids, lab) in enumerate(examples):
        input_ids[i, :len(ids)] = torch.tensor(ids)
        labels[i, :len(lab)] = torch.tensor(lab)
        attention_mask[i, :len(ids)] = 1
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


def finetune_check(base: LlamaForCausalLM, hf_tokenizer, args: argparse.Namespace) -> dict:
    """Full fine-tune of a copy on the demo train split, then exact match on the test split."""
    train_rows = read_jsonl(args.data_dir / "train.jsonl")
    test_rows = read_jsonl(args.data_dir / "test.jsonl")
    examples = [sft_example(hf_tokenizer, row) for row in train_rows]
    model = copy.deepcopy(base)
    model.train()
    optimizer = make_optimizer(model, args.ft_lr, weight_decay=0.0)
    generator = torch.Generator().manual_seed(SEED)
    order = torch.randperm(len(examples), generator=generator).tolist()
    started, log = time.time(), []
    for step in range(args.ft_steps):
        picks = [(step * args.ft_batch_size + k) % len(order) for k in range(args.ft_batch_size)]
        batch = sft_batch([examples[order[i]] for i in picks])
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, args.ft_steps, args.ft_lr, max(1, args.ft_steps // 10))
        loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step % 25 == 0 or step == args.ft_steps - 1:
            log.append({"step": step, "loss": round(loss.item(), 4)})
            print(f"finetune step {step:4d}  loss {loss.item():.4f}  {time.time() - started:6.1f}s", flush=True)
    model.eval()
    result = exact_match(model, hf_tokenizer, test_rows)
    result.update(steps=args.ft_steps, batch_size=args.ft_batch_size, lr=args.ft_lr,
                  wall_s=round(time.time() - started, 1), loss_log=log)
    return result


# --- files ---------------------------------------------------------------------------------------

def read_jsonl(path: Path) -> list[dict]:
    """Rows of a JSONL file."""
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def write_json(path: Path, obj: dict) -> None:
    """Pretty JSON with a trailing newline."""
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def qa_token_lengths(hf_tokenizer, data_dir: Path) -> dict:
    """Longest and mean rendered length (prompt + answer + <|im_end|>) of the demo QA rows."""
    lengths = [len(sft_example(hf_tokenizer, row)[0])
               for split in ("train", "validation", "test") for row in read_jsonl(data_dir / f"{split}.jsonl")]
    return {"max": max(lengths), "mean": round(sum(lengths) / len(lengths), 1)}


def model_card(report: dict) -> str:
    """The README.md of models/tiny-demo, filled in from the report."""
    r = report
    samples = "\n".join(f"- prompt: `{s['prompt']!r}`\n  greedy: `{s['completion']!r}`" for s in r["samples"])
    finetune = r.get("finetune_check")
    finetune_line = (
        f"A check fine-tune (full, {finetune['steps']} steps of batch {finetune['batch_size']}, lr {finetune['lr']}, "
        f"prompt masked) reaches **{finetune['exact_match']:.1%}** exact match on the same test split, "
        "so the task is learnable."
        if finetune else "Run the script with `--check-finetune` to verify that the task is learnable."
    )
    load = r.get("load_average_1m")
    load_note = f" (1-minute load average of the 2-core machine: {load[0]} at start, {load[1]} at end)" if load else ""
    return f"""# tiny-demo

A tiny Llama-architecture causal language model (**{r['parameters']:,} parameters**, fp32
`model.safetensors` of {r['file_size_bytes'] / 1e6:.1f} MB) that mindtune ships so its console works
out of the box with no download. It was pretrained from scratch on a synthetic "tiny world" of short
English stories (children with coloured objects who go to places; the world's facts are fixed, so
the model learns them) and ~10% ChatML chat dialogues, all generated by `data/make_demo_data.py`.
It is a demo base model, not a useful assistant.

## Architecture
`LlamaForCausalLM` (`model_type: llama`): hidden 256, 4 layers, 8 attention heads with 4 key/value
heads (grouped-query attention, head size 32), SwiGLU MLP 688, RMSNorm (eps 1e-5), RoPE (theta
10000), tied input/output embeddings, max 512 positions.

## Tokenizer
Byte-level BPE trained on the generated corpus, vocabulary 1024. Special tokens: `<|endoftext|>`
(id 0: ends each raw document, also padding), `<|im_start|>` (1), `<|im_end|>` (2, EOS). No BOS is
added. Chat template (ChatML):
`<|im_start|>{{role}}\\n{{content}}<|im_end|>\\n` per message, then `<|im_start|>assistant\\n`.
Generation stops at id 0 or 2 (`generation_config.json`).

## How it was made
```
python models/make_tiny_demo.py --steps {r['steps']} --batch-size {r['batch_size']} --seq-len {r['seq_len']} --lr {r['peak_lr']} --threads {r['num_threads']}
```
(these are the defaults, so `python models/make_tiny_demo.py` does the same.)
Seed {r['seed']}, torch CPU threads: {r['num_threads']}, AdamW (betas 0.9/0.95, weight decay 0.1, peak lr
{r['peak_lr']}, linear warmup then cosine to 10%), gradient clipping 1.0, documents packed into
{r['seq_len']}-token rows without splitting a document; {r['tokens_seen']:,} training tokens;
{r['wall_s']:.0f} s wall for the whole script{load_note}.

## Figures
| what | value |
| --- | --- |
| held-out loss (nats/token, {r['heldout_tokens']:,} tokens, unseen seed) | {r['heldout_loss']:.3f} |
| held-out perplexity | **{r['heldout_ppl']:.2f}** |
| uniform-guess perplexity (vocab size) | {r['uniform_ppl']} |
| fact-recall cloze accuracy (top next token of a restated fact) | {r['cloze_accuracy']:.1%} |
| demo QA test exact match, base model | **{r['base_test_exact_match']:.1%}** |

The base model can continue stories and chats and knows the world's facts, but it has never seen
the question format of `data/demo/*.jsonl`, so it scores low there.
{finetune_line}

## Sample greedy generations
Shown as generated, mistakes included: a 3M-parameter model recalls most facts, not all.

{samples}

## License
Project's own: the model, tokenizer and the data they were trained on were generated by this
repository's scripts and are distributed under the same license as mindtune.
"""


# --- main ----------------------------------------------------------------------------------------

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line flags; the defaults reproduce the shipped model."""
    parser = argparse.ArgumentParser(description="Build the tiny demo base model.")
    parser.add_argument("--out-dir", type=Path, default=REPO_ROOT / "models" / "tiny-demo")
    parser.add_argument("--data-dir", type=Path, default=REPO_ROOT / "data" / "demo")
    parser.add_argument("--steps", type=int, default=400, help="pretraining optimizer steps")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--lr", type=float, default=3e-3, help="peak pretraining learning rate")
    parser.add_argument("--probe-every", type=int, default=100, help="log the retrieval probe every N steps")
    parser.add_argument("--threads", type=int, default=NUM_THREADS, help="torch intra-op CPU threads")
    parser.add_argument("--reuse", action="store_true",
                        help="load the model in --out-dir instead of building it (refreshes only the samples)")
    parser.add_argument("--check-finetune", action="store_true", help="verify the demo QA task is learnable")
    parser.add_argument("--ft-steps", type=int, default=300)
    parser.add_argument("--ft-batch-size", type=int, default=16)
    parser.add_argument("--ft-lr", type=float, default=2e-3)
    return parser.parse_args(argv)


def build(args: argparse.Namespace) -> tuple[LlamaForCausalLM, object, dict]:
    """Train tokenizer and model, evaluate, and write every file of the model folder."""
    started, load_at_start = time.time(), round(os.getloadavg()[0], 2)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    if not (args.data_dir / "test.jsonl").exists():
        demo.write_demo_splits(args.data_dir)

    tokenizer = train_tokenizer(demo.generate_corpus(demo.CORPUS_SEED + 1, TOKENIZER_TRAIN_DOCS))
    save_tokenizer(tokenizer, args.out_dir)
    hf_tokenizer = check_tokenizer(args.out_dir)

    rows = corpus_rows(tokenizer, demo.CORPUS_SEED, args.steps * args.batch_size, args.seq_len)
    print(f"corpus: {int(rows[1].sum()):,} tokens in {rows.shape[1]} rows of {args.seq_len}", flush=True)
    torch.manual_seed(SEED)
    model = build_model()
    loss_log = pretrain(model, tokenizer, rows, args)
    model.save_pretrained(args.out_dir, safe_serialization=True)
    add_legacy_config_keys(args.out_dir)

    heldout = corpus_rows(tokenizer, demo.HELDOUT_SEED, HELDOUT_SEQUENCES, args.seq_len)
    heldout_loss, heldout_tokens = mean_nll(model, heldout)
    samples = sample_generations(model, hf_tokenizer)
    base_qa = exact_match(model, hf_tokenizer, read_jsonl(args.data_dir / "test.jsonl"))
    report = {
        "seed": SEED, "num_threads": args.threads, "steps": args.steps, "batch_size": args.batch_size,
        "seq_len": args.seq_len, "peak_lr": args.lr, "tokens_seen": int(rows[1].sum()),
        "padding_fraction": round(1 - rows[1].float().mean().item(), 4),
        "corpus_seed": demo.CORPUS_SEED, "heldout_seed": demo.HELDOUT_SEED,
        "parameters": parameter_count(model),
        "file_size_bytes": (args.out_dir / "model.safetensors").stat().st_size,
        "heldout_tokens": heldout_tokens,
        "heldout_loss": round(heldout_loss, 4), "heldout_ppl": round(math.exp(heldout_loss), 3),
        "uniform_ppl": VOCAB_SIZE,
        "cloze_accuracy": cloze_accuracy(model, tokenizer, seed=demo.HELDOUT_SEED + 1),
        "base_test_exact_match": base_qa["exact_match"], "base_test_examples": base_qa["examples"],
        "qa_rendered_tokens": qa_token_lengths(hf_tokenizer, args.data_dir),
        "samples": samples, "loss_log": loss_log,
    }
    report["wall_s"] = round(time.time() - started, 1)
    report["load_average_1m"] = [load_at_start, round(os.getloadavg()[0], 2)]
    return model, hf_tokenizer, report


def main(argv: list[str] | None = None) -> None:
    """Build (or reuse) the model folder, optionally run the fine-tune check, write report and card."""
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(SEED)
    if args.reuse:
        hf_tokenizer = check_tokenizer(args.out_dir)
        model = LlamaForCausalLM.from_pretrained(args.out_dir, dtype=torch.float32).eval()
        report = json.loads((args.out_dir / "training_report.json").read_text(encoding="utf-8"))
        report["samples"] = sample_generations(model, hf_tokenizer)  # deterministic; cheap to refresh
    else:
        model, hf_tokenizer, report = build(args)
    add_legacy_config_keys(args.out_dir)
    print(json.dumps({k: v for k, v in report.items() if k not in ("loss_log", "samples")}, indent=1))
    for sample in report["samples"]:
        print(f"--- {sample['prompt']!r}\n{sample['completion']!r}")
    if args.check_finetune:
        report["finetune_check"] = finetune_check(model, hf_tokenizer, args)
        print(json.dumps({k: v for k, v in report["finetune_check"].items() if k != "loss_log"}, indent=1))
    write_json(args.out_dir / "training_report.json", report)
    (args.out_dir / "README.md").write_text(model_card(report), encoding="utf-8")


if __name__ == "__main__":
    main()
