"""Text generation with a key/value cache: greedy or temperature + top-k + top-p sampling, stop on EOS.

The command line is core.generate (`python -m core.generate --model DIR --prompt TEXT ...`). Runs in PyNative mode (each step has a new cache length): where the model
has the fused inference kernel and it computes the model (core.engine.fused.inference_problem), the
prompts' prefill is one kernel call and each decoding step one more (`prefilled`, `_generate_fused`);
otherwise op by op, and `use_device` makes those ops launch synchronously on the CPU.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

import numpy as np

import mindspore as ms
from mindspore import Tensor

from core.engine.fused import inference_problem
from core.engine.model import CausalLM
from core.spec.errors import MessageError
from core.spec.messages import Message


class GenerateError(MessageError):
    """Sampling settings or prompts that cannot be generated from (a ValueError); the message says why."""


DEVICE_TARGETS = {"cpu": "CPU", "gpu": "GPU", "ascend": "Ascend"}


def use_device(device: str = "cpu") -> None:
    """PyNative mode on `device` (cpu, gpu, ascend). On the CPU, ops also launch synchronously
    (`mindspore.runtime.launch_blocking`): MindSpore's asynchronous PyNative queue hands every op
    to another thread, which cost 2-4 ms per op on this 2-core machine (a no-op reshape 1.9 ms, a
    32×256·256×256 MatMul 3.8 ms; 0.25-0.45 ms blocking), so a decoding step of the 4-layer demo
    model took 264 ms and 58 ms blocking, and the demo's 200 test answers 27 s and 6.7 s. Compiled
    graphs (the train and eval steps) ran at the same speed either way. On GPU/Ascend the queue
    overlaps host and device work, so it stays asynchronous there."""
    ms.set_context(mode=ms.PYNATIVE_MODE, device_target=DEVICE_TARGETS[device])
    if device == "cpu":
        ms.runtime.launch_blocking()


@dataclass(frozen=True)
class SamplingSettings:
    max_new_tokens: int = 64
    temperature: float = 0.0  # 0 = greedy
    top_p: float = 1.0
    seed: int | None = None
    top_k: int = 0  # 0 = every token

    def __post_init__(self):
        if self.max_new_tokens < 1:
            raise GenerateError(Message("generate.max_new_tokens", value=self.max_new_tokens))
        if self.temperature < 0:
            raise GenerateError(Message("generate.temperature", value=self.temperature))
        if not 0 < self.top_p <= 1:
            raise GenerateError(Message("generate.top_p", value=self.top_p))
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, (int, np.integer)) or self.top_k < 0:
            raise GenerateError(Message("generate.top_k", value=self.top_k))


def _top_k_order(p: np.ndarray, k: int) -> np.ndarray:
    """The indices of the k largest of p (more where the k-th value is tied), by descending value and
    then index: the first k of a stable argsort of -p, without sorting the whole vocabulary."""
    threshold = np.partition(p, len(p) - k)[len(p) - k]
    candidates = np.flatnonzero(p >= threshold)
    return candidates[np.argsort(-p[candidates], kind="stable")][:k]


def choose_next(logits: np.ndarray, settings: SamplingSettings, rng: np.random.Generator) -> np.ndarray:
    """logits (B, vocab) float32 -> next token ids (B,). Greedy at temperature 0; otherwise sample
    from the top_k likeliest tokens (0: all), renormalised, then from the smallest set of the top
    ones whose probability reaches top_p (as transformers' warpers: temperature, top-k, top-p)."""
    if settings.temperature == 0:
        return logits.argmax(-1)
    scaled = logits / settings.temperature
    probs = np.exp(scaled - scaled.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    chosen = np.empty(len(probs), dtype=np.int64)
    k = settings.top_k if 0 < settings.top_k < probs.shape[-1] else 0
    for row, p in enumerate(probs):
        if k:
            order = _top_k_order(p, k)
            cumulative = np.cumsum(p[order]) / p[order].sum()
        else:
            order = np.argsort(-p, kind="stable")
            cumulative = np.cumsum(p[order])
        keep = order[: int(np.searchsorted(cumulative, settings.top_p)) + 1]
        chosen[row] = rng.choice(keep, p=p[keep] / p[keep].sum())
    return chosen


def sample_next(logits: np.ndarray, settings: SamplingSettings, rng: np.random.Generator) -> np.ndarray:
    """`choose_next`'s distribution (temperature, top-k, top-p) drawn for all rows at once by inverse CDF:
    over the vocabulary in token order, or over the top_k likeliest (np.argpartition) in that order; a
    sort only for top_p < 1, of those k tokens when top_k is set. One uniform draw per row. On a 152k
    vocabulary, 32 rows: ~0.15 s a step where choose_next's sorts take ~0.8 s; GRPO's rollouts
    (core.engine.grpo) use it. The same seed draws other tokens than choose_next does."""
    if settings.temperature == 0:
        return logits.argmax(-1)
    probs = np.exp((logits - logits.max(-1, keepdims=True)).astype(np.float64) / settings.temperature)  # unnormalised
    columns = None
    if 0 < settings.top_k < probs.shape[-1]:
        columns = np.argpartition(-probs, settings.top_k - 1, axis=-1)[:, :settings.top_k]  # (B, k)
        probs = np.take_along_axis(probs, columns, -1)
    if settings.top_p < 1:
        order = np.argsort(-probs, axis=-1, kind="stable")
        ranked = np.take_along_axis(probs, order, -1)
        cumulative = np.cumsum(ranked, -1) / ranked.sum(-1, keepdims=True)
        kept = (cumulative < settings.top_p).sum(-1, keepdims=True) + 1  # the smallest set reaching top_p
        np.put_along_axis(probs, order, np.where(np.arange(probs.shape[-1]) < kept, ranked, 0.0), -1)
    cdf = np.cumsum(probs, -1)  # (B, V|k)
    total = cdf[:, -1]
    draw = np.minimum(rng.random(len(probs)) * total, np.nextafter(total, 0))  # below the total: a kept token
    chosen = np.array([np.searchsorted(row, x, side="right") for row, x in zip(cdf, draw)], np.int64)
    return chosen if columns is None else np.take_along_axis(columns, chosen[:, None], -1)[:, 0]


def _left_pad(prompts: list[list[int]], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    width = max(len(p) for p in prompts)
    ids = np.full((len(prompts), width), pad_id, dtype=np.int32)
    valid = np.zeros((len(prompts), width), dtype=bool)
    for row, prompt in enumerate(prompts):
        ids[row, width - len(prompt):] = prompt
        valid[row, width - len(prompt):] = True
    return ids, valid


def _take(next_ids: np.ndarray, outputs: list[list[int]], finished: np.ndarray, eos_ids, stop) -> None:
    """Each unfinished row takes its next token, or finishes on an EOS (not kept) or when `stop` says
    its tokens so far end it (kept); `finished` is updated in place."""
    for row, token in enumerate(next_ids):
        if finished[row]:
            continue
        if int(token) in eos_ids:
            finished[row] = True
        else:
            outputs[row].append(int(token))
            if stop is not None and stop(outputs[row]):
                finished[row] = True


def generate(model: CausalLM, prompts: list[list[int]], settings: SamplingSettings,
             eos_ids: set[int] | frozenset[int] = frozenset(), pad_id: int = 0,
             use_cache: bool = True, stop=None, rng: np.random.Generator | None = None, copies: int = 1,
             sampler=None) -> list[list[int]]:
    """Continue each prompt (token ids); returns the new tokens of each, without the EOS that ended it.
    `stop(new_tokens) -> bool` ends a row early too (a stop string seen), keeping its tokens.
    Prompts of different lengths are left-padded and masked. `use_cache=False` recomputes the whole
    sequence every step (a reference for tests and benchmarks). `rng`: the sampler's generator (default:
    a new one from settings.seed); `copies`: continuations per prompt, rows prompt-major (prompt i's are
    rows i·copies ...), each prompt's prefill run once on the kernel; `sampler(logits, settings, rng)`:
    choose_next (default) or sample_next."""
    if not prompts or any(len(p) == 0 for p in prompts):
        raise GenerateError(Message("generate.empty_prompt"))
    limit = model.args.max_position_embeddings
    longest = max(len(p) for p in prompts)
    if longest + settings.max_new_tokens > limit:
        raise GenerateError(Message("generate.too_long", tokens=longest, max_new_tokens=settings.max_new_tokens,
                                    limit=limit))
    rng = np.random.default_rng(settings.seed) if rng is None else rng
    sampler = choose_next if sampler is None else sampler
    kernel = fused_inference(model) if use_cache and getattr(model, "long_after", None) is None else None
    if kernel is not None:
        return _generate_fused(model, kernel, prompts, settings, eos_ids, pad_id, stop, rng, copies, sampler)
    prompts = [prompt for prompt in prompts for _ in range(copies)]
    ids, valid = _left_pad(prompts, pad_id)
    positions = np.maximum(np.cumsum(valid, axis=1) - 1, 0).astype(np.int32)  # per-row positions
    finished = np.zeros(len(prompts), dtype=bool)
    outputs: list[list[int]] = [[] for _ in prompts]
    past = None
    step_ids, step_pos = ids, positions
    all_ids, all_valid = ids, valid
    long_after = getattr(model, "long_after", None)  # LongRoPE: its frequencies change past this length
    for _ in range(settings.max_new_tokens):
        if use_cache and past is not None and long_after is not None and \
                step_pos.max() + 1 > long_after >= step_pos.max():
            # the cached keys were rotated with the short factors: recompute them with the long ones
            # once, when the sequence first grows past the original context (as transformers' Phi-3 does)
            past, step_ids, step_pos = None, all_ids, positions
        if use_cache:
            logits, past = model.forward_cached(Tensor(step_ids), past, Tensor(step_pos), Tensor(all_valid), last_only=True)
        else:
            full_pos = np.maximum(np.cumsum(all_valid, axis=1) - 1, 0).astype(np.int32)
            logits, _ = model.forward_cached(Tensor(all_ids), None, Tensor(full_pos), Tensor(all_valid), last_only=True)
        next_ids = sampler(logits[:, -1, :].asnumpy(), settings, rng)
        _take(next_ids, outputs, finished, eos_ids, stop)
        if finished.all():
            break
        next_ids = np.where(finished, pad_id, next_ids).astype(np.int32)
        step_ids = next_ids.reshape(-1, 1)
        step_pos = (positions[:, -1:] + 1).astype(np.int32)
        positions = np.concatenate([positions, step_pos], axis=1)
        all_ids = np.concatenate([all_ids, step_ids], axis=1)
        all_valid = np.concatenate([all_valid, np.ones((len(prompts), 1), dtype=bool)], axis=1)
    return outputs


def fused_inference(model):
    """The model's whole-forward inference kernel (core.engine.fused.FusedInference) when it can run
    this model as it is now (its LoRA merged, absent, or merged by the kernel (`adapters_merged`), a
    plain pre-norm decoder in float32), else None."""
    kernel = getattr(model, "inference_kernel", None)
    return kernel if kernel is not None and inference_problem(model, kernel.merges(model)) is None else None


# a prefix that every prompt of a batch starts with, of at least this many tokens, runs once (`prefilled`)
SHARED_PREFIX_MIN = 8


@contextlib.contextmanager
def prefilled(kernel, model: CausalLM, prompts, extra_slots: int = 0, pad_id: int = 0, copies: int = 1):
    """Run prompts (token sequences) through the inference kernel into a cache of one row each with
    `extra_slots` free slots after them; yields (the logits of each prompt's last token (B, vocab),
    the cache, which of its slots hold real tokens (B, slots: float32, 1 = real), the slot after the
    prompts, each row's last position (B, 1)). A prefix of at least SHARED_PREFIX_MIN tokens that every
    prompt starts with (an instruction, few-shot examples) runs once and its keys and values are copied
    to each row; each row's rest follows, left-padded, at positions that continue the prefix's.
    `copies` > 1: each prompt runs once and the cache holds `copies` rows of it (B·copies rows,
    prompt-major), all the above repeated to match."""
    prompts = [list(p) for p in prompts]
    prefix = len(os.path.commonprefix(prompts)) if len(prompts) > 1 else 0
    prefix = min(prefix, min(map(len, prompts)) - 1)  # every row keeps a token of its own: its last one scores
    if prefix < SHARED_PREFIX_MIN:
        prefix = 0
    rest = max(map(len, prompts)) - prefix
    width = prefix + rest
    ids = np.full((len(prompts), rest), pad_id, np.int32)
    valid = np.zeros((len(prompts), width + extra_slots), np.float32)
    valid[:, :prefix] = 1.0
    for row, prompt in enumerate(prompts):
        ids[row, rest - (len(prompt) - prefix):] = prompt[prefix:]
        valid[row, width - (len(prompt) - prefix):width] = 1.0
    positions = np.maximum(prefix + np.cumsum(valid[:, prefix:width], axis=1) - 1, 0).astype(np.int32)
    slots = width + (extra_slots if copies == 1 else 0)  # copies: the prompts' own cache only holds them
    with kernel.new_cache(model, len(prompts), slots) as cache:
        if prefix:
            with kernel.new_cache(model, 1, prefix) as head:
                kernel.forward(model, np.asarray([prompts[0][:prefix]], np.int32),
                               np.arange(prefix, dtype=np.int32).reshape(1, -1), None, head, start=0, last_only=True)
                kernel.gather(cache, head, np.zeros(len(prompts), np.int32), prefix)
        logits = kernel.forward(model, ids, positions, valid[:, :slots], cache, start=prefix, last_only=True)[:, -1]
        if copies == 1:
            yield logits, cache, valid, width, positions[:, -1:]
            return
        with kernel.new_cache(model, len(prompts) * copies, width + extra_slots) as rows:
            kernel.gather(rows, cache, np.repeat(np.arange(len(prompts), dtype=np.int32), copies), width)
            yield (np.repeat(logits, copies, 0), rows, np.repeat(valid, copies, 0), width,
                   np.repeat(positions[:, -1:], copies, 0))


def _generate_fused(model: CausalLM, kernel, prompts: list[list[int]], settings: SamplingSettings, eos_ids, pad_id,
                    stop, rng, copies: int = 1, sampler=choose_next) -> list[list[int]]:
    """`generate` with the inference kernel: the prompts' prefill is one kernel call (`prefilled`),
    each decoding step one more (composed, a step of the 4-layer demo model launched ~250 ops).
    Same tokens."""
    finished = np.zeros(len(prompts) * copies, dtype=bool)
    outputs: list[list[int]] = [[] for _ in range(len(prompts) * copies)]
    with prefilled(kernel, model, prompts, settings.max_new_tokens, pad_id, copies) as \
            (logits, cache, slots, width, step_pos):
        step_ids = None
        for step in range(settings.max_new_tokens):
            if step:
                logits = kernel.forward(model, step_ids, step_pos, slots, cache, start=width + step - 1,
                                        last_only=True)[:, -1, :]
            next_ids = sampler(logits, settings, rng)
            _take(next_ids, outputs, finished, eos_ids, stop)
            if finished.all():
                break
            step_ids = np.where(finished, pad_id, next_ids).astype(np.int32).reshape(-1, 1)
            step_pos = step_pos + 1
            slots[:, width + step] = 1.0
    return outputs
