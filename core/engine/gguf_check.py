"""Prove a GGUF file before it is offered: reload it with llama.cpp (`llama-cpp-python`, a reader we did
not write) and hold its answers against mindtune's own engine on the run's validation set.

The samples: the first PROMPTS of the run's validation set, each split where its answer starts (its
first trained token). The work is bounded (`plan_samples`): both engines read about CHECK_WORK
parameter·tokens, so a 0.5B model checks fewer prompts (4), each cut to its last tokens (the question
and the template's turn), than the demo model (8, whole).

- Tokenizer: llama.cpp's tokenization of each sample's prompt text equals ours, id for id.
- Greedy answers: llama.cpp answers every prompt greedily (GREEDY_TOKENS new tokens at most, all prompts
  decoded together as sequences of one batch, its key/value cache kept from the prompt); mindtune's
  engine then reads prompt + that answer in one pass, and at every step its best token must be
  llama.cpp's (an end token where llama.cpp's ended): that is our own greedy decoding writing the same
  answer, checked without decoding token by token. Where they part, the check says at which token
  and whether our two candidates' logits were within the absolute bound there (a tie at the file's
  precision, not an error).
- f32 / f16 / bf16: the logits at every answer position (the prompt's last token, the validation
  answer's and the greedy answer's tokens) within LOGIT_BOUND of our model computing with the file's
  own weights (ours rounded as the file rounds them: the honest reference for a file that stores
  them rounded); the distance to our float32 model, on the first sample, is reported beside it
  where the samples run whole (a model small enough for a pass to spare). On the demo run the f16
  file is 3.7e-3 from ours at its weights (logits up to 15.4), and the same f16 values stored as
  float32 1.3e-5: the rest is llama.cpp's f16 arithmetic (its f16 matrix products round their
  activations to f16), largest inside long prompts (2.7e-2 at the demo's story tokens), which the
  check does not read.
- Perplexity over the validation answers' tokens: llama.cpp's on this file, ours beside it; for
  q8_0 / q4_k_m within PPL_BOUND of the f16 file's, with how many greedy answers are the f16 file's
  (reported, not judged). Those checks run llama.cpp alone: our model is loaded only when no f16
  file's figures are given.

llama.cpp runs with a float32 key/value cache (its default f16 cache alone moved the demo model's
logits by 1.2e-2 at float32 weights; with it, 1.8e-5), without flash attention (on by default in the
C API's context: on the CPU it moved an f32 file's logits by up to 8e-3), on as many threads as the
machine has idle
(`check_threads`: its threads spin at every operation's barrier, and one descheduled thread on a
busy machine stalls the others: 2 threads on a loaded 2-core machine decoded 8x slower than 1).
The result is a JSON beside the file (`<file>.check.json`), with the seconds of each stage (wall, and
this process's CPU: on a loaded machine the wall time is mostly waiting).
"""
from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

import mindspore as ms

from core.data.pipeline import IGNORE_INDEX, load_splits
from core.data.tokenizer import Tokenizer
from core.engine.fused import enable as enable_fused_kernels
from core.engine.generate import fused_inference
from core.engine.gguf_export import GgufError, gguf
from core.run.rundir import RunDir
from core.spec.config import ConfigError, load_config
from core.spec.messages import Message
from core.spec.model_args import read_model_args

GREEDY_TOKENS = 32
PROMPTS = 8  # validation samples at most: their prompts answered greedily, their answers' perplexity
MIN_PROMPTS = 4  # however large the model
ANSWER_TOKENS = 32  # a validation answer's tokens scored for the perplexity, at most
PROMPT_TOKENS_MIN = 32  # a prompt is never cut shorter
# the parameter·tokens each engine reads in the check (one forward of a token reads every parameter):
# the demo model (3.2M) checks 8 whole samples; the 0.5B shape ~300 tokens a side, 4 prompts of ~40
CHECK_WORK = 1.5e11
# max |logit difference| against our model computing with the file's own weights (see the module doc):
# an absolute part plus a part relative to the largest |logit| compared. llama.cpp multiplies f16 and
# bf16 matrices with its activations rounded to the same type, which we do not: measured at the
# answer positions at the file's own weights, the demo run (logits up to 15.4) 3.7e-3 (f16), the 0.5B
# shape 3.3e-3; over every position of the tiny fixtures' samples 3e-4..1.3e-2 on logits below 1
# (OLMo 2's post-norm the largest); at float32 weights every family is within 2e-5, and the errors
# of a wrong conversion (a window not carried, a missing scale) are 1e-1..1e0
LOGIT_BOUND = {"f16": (1e-2, 1e-2), "bf16": (5e-2, 5e-2), "f32": (1e-4, 1e-4)}
PPL_BOUND = {"q8_0": 0.01, "q4_k_m": 0.05}  # relative to the f16 file's validation perplexity
THREADS = 2  # at most (the 2-core machine the times are for)


def check_threads(most: int = THREADS) -> int:
    """Threads for llama.cpp and our kernels: the CPUs this process may use that the load average leaves
    idle, at least 1, at most `most` (see the module doc)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    idle = cores - os.getloadavg()[0] if hasattr(os, "getloadavg") else cores
    return max(1, min(most, cores, int(idle + 0.5)))


def _llama_cpp():
    try:
        import llama_cpp
    except ImportError as err:
        raise GgufError(Message("gguf.no_llama_cpp", requirements="requirements-export.txt")) from err
    logging.getLogger("llama-cpp-python").setLevel(logging.ERROR)  # llama.cpp's own log: errors only
    return llama_cpp


@dataclass
class Sample:
    """One validation example as the check runs it: its prompt, its answer (cut to ANSWER_TOKENS),
    the answer's labels (IGNORE_INDEX where no loss), the prompt's whole text (the tokenizer check)."""
    prompt: list[int]
    answer: list[int]
    labels: list[int]
    text: str = ""
    whole_prompt: list[int] = field(default_factory=list)

    @property
    def ids(self) -> list[int]:
        return self.prompt + self.answer


def validation_samples(run_dir: Path, tokenizer: Tokenizer, limit: int, max_len: int) -> list[Sample]:
    """The run's own validation samples (as training tokenized them), at most `limit`, each cut to
    `max_len` tokens and split where its answer starts (a text-format sample: at its middle)."""
    run = RunDir(run_dir)
    try:
        config = load_config(run.config_path)
        splits = load_splits(config.data, tokenizer, config.run.seed)
    except (ConfigError, OSError, ValueError) as err:
        raise GgufError(Message("gguf.check_no_data", run=str(run_dir), error=str(err))) from err
    samples = []
    for sample in splits.validation:
        ids = [int(i) for i in sample.input_ids[:max_len]]
        labels = [int(i) for i in sample.labels[:max_len]]
        start = next((i for i, label in enumerate(labels) if label != IGNORE_INDEX), None)
        if start is None or start == 0:
            start = max(1, len(ids) // 2)
        if len(ids) >= 2 and start < len(ids):
            samples.append(Sample(ids[:start], ids[start:], labels[start:], whole_prompt=ids[:start]))
        if len(samples) >= limit:
            break
    if not samples:
        raise GgufError(Message("gguf.check_no_samples", run=str(run_dir)))
    return samples


def plan_samples(samples: list[Sample], parameters: int) -> list[Sample]:
    """The samples the check runs within CHECK_WORK (see the module doc): the first n (at least
    MIN_PROMPTS), answers cut to ANSWER_TOKENS, prompts cut to their last tokens so that each sample's
    prompt + answer + greedy answer fits its share (never below PROMPT_TOKENS_MIN)."""
    budget = int(CHECK_WORK / max(parameters, 1))  # tokens a side
    each = GREEDY_TOKENS + ANSWER_TOKENS + PROMPT_TOKENS_MIN
    count = min(len(samples), max(MIN_PROMPTS, min(PROMPTS, budget // each)))
    share = budget // count
    planned = []
    for sample in samples[:count]:
        answer, labels = sample.answer[:ANSWER_TOKENS], sample.labels[:ANSWER_TOKENS]
        keep = max(PROMPT_TOKENS_MIN, share - GREEDY_TOKENS - len(answer))
        planned.append(Sample(sample.prompt[-keep:], answer, labels, sample.text, sample.whole_prompt))
    return planned


def _nll(rows: np.ndarray, answer: list[int], labels: list[int]) -> tuple[float, int]:
    """Summed negative log-likelihood of the answer tokens with a label: row t scores answer[t] (row 0:
    the prompt's last token)."""
    total, count = 0.0, 0
    for t, token in enumerate(answer):
        if labels[t] == IGNORE_INDEX:
            continue
        row = rows[t].astype(np.float64)
        top = row.max()
        total += float(np.log(np.exp(row - top).sum()) + top - row[token])
        count += 1
    return total, count


# ---- both sides ----------------------------------------------------------------------------------

@dataclass
class Rows:
    """One engine's logits of a sample at its answer positions: `answer` (row t scores answer token t:
    the prompt's last token, then the answer's) and `greedy` (the same over the greedy answer, one row
    more where it ended before GREEDY_TOKENS: the row that chose the end)."""
    answer: np.ndarray
    greedy: np.ndarray


class LlamaSide:
    """A GGUF file loaded with llama.cpp: its tokenization, and the samples' logits at their answer
    positions with its greedy answers (llama.cpp's C API: all samples as sequences of one batch, the
    prompt's keys and values kept in its cache for both continuations)."""

    def __init__(self, path: Path, samples: list[Sample], lora_path: Path | None = None, threads: int = 1):
        llama_cpp = self.api = _llama_cpp()
        self.ctx = self.batch = None
        try:  # the model (and the adapter) loaded, and refused, as llama-cpp-python does
            self.llm = llama_cpp.Llama(str(path), n_ctx=16, n_batch=16, n_ubatch=16, verbose=False,
                                       n_threads=threads, n_threads_batch=threads,
                                       lora_path=str(lora_path) if lora_path else None)
        except (ValueError, RuntimeError) as err:  # llama.cpp's loader refused the file: never offered
            raise GgufError(Message("gguf.llama_cpp_refused", file=path.name, error=str(err))) from err
        self.name = path.name
        self.n_batch = 512
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = sum(len(s.prompt) + max(len(s.answer), GREEDY_TOKENS) + 1 for s in samples) + 16
        params.n_batch = params.n_ubatch = self.n_batch
        params.n_seq_max = len(samples)
        params.kv_unified = True  # one cache for all sequences
        params.type_k = params.type_v = 0  # GGML_TYPE_F32
        params.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED  # see the module doc
        params.n_threads = params.n_threads_batch = threads
        self.ctx = llama_cpp.llama_init_from_model(self.llm.model, params)
        if not self.ctx:
            raise GgufError(Message("gguf.llama_cpp_refused", file=path.name, error="no context"))
        if self.llm._lora_adapter is not None:
            adapters = (llama_cpp.llama_adapter_lora_p_ctypes * 1)(self.llm._lora_adapter)
            if llama_cpp.llama_set_adapters_lora(self.ctx, adapters, 1, (ctypes.c_float * 1)(1.0)):
                raise GgufError(Message("gguf.llama_cpp_refused", file=path.name, error="adapter not applied"))
        self.vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(self.llm.model))
        self.batch = llama_cpp.llama_batch_init(self.n_batch, 0, 1)

    def tokenize(self, text: str) -> list[int]:
        return self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)

    def _decode(self, items: list[tuple[int, int, int, bool]]) -> list[np.ndarray]:
        """Tokens (token, position, sequence, whether its logits are wanted) through the model, n_batch at
        a time; the wanted logits in order."""
        api, batch, out = self.api, self.batch, []
        for start in range(0, len(items), self.n_batch):
            chunk = items[start: start + self.n_batch]
            batch.n_tokens = len(chunk)
            for i, (token, pos, seq, wanted) in enumerate(chunk):
                batch.token[i], batch.pos[i], batch.n_seq_id[i] = token, pos, 1
                batch.seq_id[i][0], batch.logits[i] = seq, wanted
            code = api.llama_decode(self.ctx, batch)
            if code != 0:
                raise GgufError(Message("gguf.llama_cpp_refused", file=self.name, error=f"llama_decode: {code}"))
            out += [np.ctypeslib.as_array(api.llama_get_logits_ith(self.ctx, i), shape=(self.vocab,)).copy()
                    for i, (*_, wanted) in enumerate(chunk) if wanted]
        return out

    def run(self, samples: list[Sample], eos: set[int]) -> tuple[list[Rows], list[list[int]]]:
        """Every sample's answer rows, and llama.cpp's greedy answer with its rows."""
        api = self.api
        api.llama_memory_clear(api.llama_get_memory(self.ctx), True)
        last = self._decode([(t, p, s, p == len(x.prompt) - 1) for s, x in enumerate(samples)
                             for p, t in enumerate(x.prompt)])
        rest = self._decode([(t, len(x.prompt) + p, s, True) for s, x in enumerate(samples)
                             for p, t in enumerate(x.answer[:-1])])
        rows, answers = [], [[] for _ in samples]
        for s, x in enumerate(samples):
            count = len(x.answer) - 1
            rows.append(Rows(np.stack([last[s]] + rest[:count]), np.zeros((0, self.vocab), np.float32)))
            rest = rest[count:]
        memory = api.llama_get_memory(self.ctx)
        for s, x in enumerate(samples):  # back to the prompt: the greedy answer follows it
            api.llama_memory_seq_rm(memory, s, len(x.prompt), -1)
        greedy_rows = [[last[s]] for s in range(len(samples))]
        active = list(range(len(samples)))
        while active:
            step = []
            for s in active:
                choice = int(np.argmax(greedy_rows[s][-1]))
                if choice in eos:
                    continue
                answers[s].append(choice)
                if len(answers[s]) < GREEDY_TOKENS:
                    step.append(s)
            if not step:
                break
            found = self._decode([(answers[s][-1], len(samples[s].prompt) + len(answers[s]) - 1, s, True)
                                  for s in step])
            for s, row in zip(step, found):
                greedy_rows[s].append(row)
            active = step
        for s in range(len(samples)):
            rows[s].greedy = np.stack(greedy_rows[s][: len(answers[s]) + (len(answers[s]) < GREEDY_TOKENS)])
        return rows, answers

    def close(self) -> None:
        if self.batch is not None:
            self.api.llama_batch_free(self.batch)
            self.batch = None
        if self.ctx:
            self.api.llama_free(self.ctx)
            self.ctx = None
        self.llm.close()


class OurSide:
    """The checkpoint in mindtune's engine (adapter merged): the inference kernel with its key/value cache
    where it runs the model (one prompt pass for both continuations), else the composed forward."""

    def __init__(self, model, tokenizer: Tokenizer, threads: int = 1):
        self.model, self.tokenizer = model, tokenizer
        enable_fused_kernels(model, threads=threads)
        self.eos = set(tokenizer.eos_token_ids) | set(model.args.eos_token_ids)

    def rows(self, sample: Sample, greedy: list[int]) -> Rows:
        """The sample's logits at its answer positions: over its validation answer and over `greedy`."""
        kernel = fused_inference(self.model)
        prompt, answer = sample.prompt, sample.answer
        if kernel is None:
            return Rows(self._composed(prompt + answer[:-1])[len(prompt) - 1:],
                        self._composed(prompt + greedy)[len(prompt) - 1:])
        follow = max(len(answer), len(greedy)) + 1
        with kernel.new_cache(self.model, 1, len(prompt) + follow) as cache:
            valid = np.ones((1, cache.slots), np.float32)
            last = kernel.forward(self.model, np.asarray([prompt], np.int32),
                                  np.arange(len(prompt), dtype=np.int32).reshape(1, -1), valid, cache, 0,
                                  last_only=True)[0]

            def after(tokens: list[int]) -> np.ndarray:
                if not tokens:
                    return last
                positions = np.arange(len(prompt), len(prompt) + len(tokens), dtype=np.int32).reshape(1, -1)
                found = kernel.forward(self.model, np.asarray([tokens], np.int32), positions, valid, cache,
                                       len(prompt))[0]
                return np.concatenate([last, found])
            # the row after a full greedy answer is not compared (llama.cpp stopped there)
            return Rows(after(answer[:-1]), after(greedy[:GREEDY_TOKENS - 1]))

    def _composed(self, ids: list[int]) -> np.ndarray:
        return self.model.construct(ms.Tensor(np.asarray([ids], np.int32))).asnumpy()[0]


def round_like_file(model, quant: str) -> None:
    """The model's matrices rounded as the file stores them (gguf.quants there and back: the file's values;
    f16 is NumPy's float16 cast, as gguf.quants writes it). An adapter's own matrices are not the file's:
    left as they are."""
    qtype = {"f16": gguf.GGMLQuantizationType.F16, "bf16": gguf.GGMLQuantizationType.BF16,
             "f32": gguf.GGMLQuantizationType.F32}[quant]
    if quant == "f32":
        return
    for param in model.get_parameters():
        if len(param.shape) < 2 or param.name.endswith("mlp.gate.weight") or ".lora_" in param.name:
            continue  # norms, biases and the MoE router stay float32 in the file
        values = param.asnumpy()
        if quant == "f16":
            rounded = values.astype(np.float16)
        else:
            rounded = gguf.quants.dequantize(gguf.quants.quantize(values.astype(np.float32), qtype), qtype)
        if values.flags.writeable and np.shares_memory(values, param.asnumpy()):
            np.copyto(values, rounded.reshape(values.shape))  # in place (the CPU's tensors): no second copy
        else:
            param.set_data(ms.Tensor(rounded.reshape(values.shape).astype(np.float32)))


# ---- the check -----------------------------------------------------------------------------------

@dataclass
class CheckResult:
    """What the check found; written as JSON beside the file (`<file>.check.json`)."""
    file: str
    quant: str
    passed: bool
    reasons: list[str] = field(default_factory=list)  # why not, when it failed (English)
    prompts: int = 0
    tokenizer_equal: int = 0
    greedy_equal: int = 0  # (a quantized file: its greedy answers equal to the f16 file's, not judged)
    greedy_ties: int = 0  # parted at a near-tie of our two best logits (within the bound)
    greedy_tokens: int = GREEDY_TOKENS
    prompt_tokens: int = 0  # the longest prompt run (cut to its last tokens: `plan_samples`)
    max_logit_diff: float | None = None  # against our model with the file's own weights
    max_logit_diff_float32: float | None = None  # against our float32 model, on the first sample (whole samples)
    logit_bound: float | None = None  # absolute + relative × max |logit| (LOGIT_BOUND)
    logit_scale: float | None = None  # the largest |logit| of our model over the compared rows
    perplexity: float | None = None  # llama.cpp, this file, over the samples' answer tokens
    perplexity_ours: float | None = None  # mindtune (at the file's weights for f32/f16/bf16, else float32)
    perplexity_reference: float | None = None  # the f16 file's (quantized files)
    ppl_bound: float | None = None
    samples: int = 0
    seconds: float = 0.0
    stage_seconds: dict = field(default_factory=dict)  # where the check's time went (wall)
    stage_cpu_seconds: dict = field(default_factory=dict)  # this process's CPU time per stage (a loaded machine)
    threads: int = 1
    llama_cpp: str = ""
    notes: list[str] = field(default_factory=list)
    lora: str | None = None  # an adapter checked on top of the base file
    greedy_answers: list = field(default_factory=list)  # llama.cpp's, per prompt (a quantized file's reference)

    def to_json(self) -> dict:
        return asdict(self)


def check_samples(run_dir: Path, tokenizer: Tokenizer, model_dir: Path) -> list[Sample]:
    """The samples a check of the model in `model_dir` runs (the same for every file of one checkpoint:
    a quantized file's perplexity is read over the f16 file's samples)."""
    args = read_model_args(model_dir)
    whole = validation_samples(run_dir, tokenizer, PROMPTS, args.max_position_embeddings - GREEDY_TOKENS)
    samples = plan_samples(whole, args.active_parameters())
    for sample in samples:
        sample.text = tokenizer.decode(sample.whole_prompt, skip_special_tokens=False)
    return samples


def check_gguf(path: Path, quant: str, load_model: Callable[[], object], tokenizer: Tokenizer, run_dir: Path,
               reference_ppl: float | None = None, lora_path: Path | None = None, *,
               model_dir: Path, reference_answers: list[list[int]] | None = None,
               rounded: bool = False) -> CheckResult:
    """Reload `path` (with the adapter `lora_path` on it, if given) in llama.cpp and hold it against our
    model (float32, adapter merged; `load_model` loads it, called only when needed: a Cell is callable
    itself, so a function, never the model); `model_dir`: the base model folder (its config sizes the
    samples); `reference_ppl`, `reference_answers`: the f16 file's perplexity and greedy answers (a
    quantized file's check). See the module doc. `rounded`: the model `load_model` gives already computes as the files do (an
    adapter on the base file: the base rounded as the file stores it, then the adapter's float32 delta
    added, as llama.cpp adds it; rounding the merged weights instead moved GLM-4's tiny logits by 1.8e-2)."""
    llama_cpp = _llama_cpp()
    start = time.perf_counter()
    stages = _Stages()
    threads = check_threads()
    samples = check_samples(run_dir, tokenizer, Path(model_dir))
    result = CheckResult(str(path), quant, False, llama_cpp=getattr(llama_cpp, "__version__", "?"), threads=threads,
                         lora=str(lora_path) if lora_path else None, prompts=len(samples), samples=len(samples),
                         prompt_tokens=max(len(s.prompt) for s in samples))
    theirs = LlamaSide(path, samples, lora_path, threads)
    stages.done("validation samples, llama.cpp load")
    exact = quant in LOGIT_BOUND  # a file that keeps every weight (to f16/bf16 rounding): answers compared
    try:
        # the same text through both tokenizers (a SentencePiece decode -> encode need not give the ids back)
        result.tokenizer_equal = sum(theirs.tokenize(s.text) == tokenizer.encode(s.text, add_special_tokens=False)
                                     for s in samples)
        eos = set(tokenizer.eos_token_ids) | set(read_model_args(model_dir).eos_token_ids)
        their_rows, answers = theirs.run(samples, eos)
        stages.done("llama.cpp: answers, greedy")
    finally:
        theirs.close()
    result.greedy_answers = answers
    nll, count = _perplexity_sums(their_rows, samples)
    result.perplexity = float(np.exp(nll / max(count, 1)))
    if not exact and reference_ppl is not None:
        result.perplexity_reference = reference_ppl
        if reference_answers is not None:
            result.greedy_equal = sum(a == b for a, b in zip(answers, reference_answers))
    else:
        ours = OurSide(load_model(), tokenizer, threads)
        stages.done("our model")
        if exact and not rounded:
            if samples[0].prompt == samples[0].whole_prompt:  # whole samples (a small model): a pass to spare
                first = ours.rows(samples[0], answers[0])
                result.max_logit_diff_float32 = _distance(their_rows[0], first)[0]
            round_like_file(ours.model, quant)
            stages.done("float32 distance, rounding ours")
        our_rows = [ours.rows(s, a) for s, a in zip(samples, answers)]
        nll, count = _perplexity_sums(our_rows, samples)
        result.perplexity_ours = float(np.exp(nll / max(count, 1)))
        tie = LOGIT_BOUND.get(quant, (1e-2, 0.0))[0]
        for theirs_s, ours_s, answer in zip(their_rows, our_rows, answers):
            _judge_greedy(answer, theirs_s.greedy, ours_s.greedy, ours.eos, result, tie)
        if exact:
            diff = scale = 0.0
            for theirs_s, ours_s in zip(their_rows, our_rows):
                d, s = _distance(theirs_s, ours_s)
                diff, scale = max(diff, d), max(scale, s)
            absolute, relative = LOGIT_BOUND[quant]
            result.max_logit_diff, result.logit_scale = diff, scale
            result.logit_bound = absolute + relative * scale
        else:
            result.perplexity_reference = result.perplexity_ours
        stages.done("our logits, comparison")
    if not exact:
        result.ppl_bound = PPL_BOUND[quant]
    result.reasons = _verdict(result)
    result.passed = not result.reasons
    result.seconds = round(time.perf_counter() - start, 2)
    result.stage_seconds, result.stage_cpu_seconds = stages.seconds, stages.cpu
    return result


def _perplexity_sums(rows: list[Rows], samples: list[Sample]) -> tuple[float, int]:
    nll, count = 0.0, 0
    for r, sample in zip(rows, samples):
        a, n = _nll(r.answer, sample.answer, sample.labels)
        nll, count = nll + a, count + n
    return nll, count


def _distance(theirs: Rows, ours: Rows) -> tuple[float, float]:
    """max |logit difference| over a sample's answer and greedy rows, and the largest |logit| of ours."""
    n = len(theirs.greedy)
    pairs = [(theirs.answer, ours.answer), (theirs.greedy, ours.greedy[:n])]
    diff = max(float(np.abs(a - b).max()) for a, b in pairs if len(a))
    return diff, max(float(np.abs(b).max()) for _, b in pairs if len(b))


class _Stages:
    """Seconds per stage of the check (in its JSON: where the time went)."""

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self._last, self._last_cpu = time.perf_counter(), time.process_time()

    def done(self, stage: str) -> None:
        now, cpu = time.perf_counter(), time.process_time()
        self.seconds[stage], self.cpu[stage] = round(now - self._last, 2), round(cpu - self._last_cpu, 2)
        self._last, self._last_cpu = now, cpu


def _judge_greedy(answer: list[int], theirs: np.ndarray, ours: np.ndarray, eos: set[int], result: CheckResult,
                  tie: float) -> None:
    """Whether our greedy answer is llama.cpp's (`answer`, chosen from its rows `theirs`), from our rows over
    prompt + that answer (teacher-forced: if our best token is llama.cpp's at every step, and an end token
    where its ended, our own greedy decoding writes its answer token for token). Where it is not: a
    near-tie of the two candidates' logits (ours) within `tie`, or a different answer."""
    for step in range(len(theirs)):
        logits = ours[step]
        mine = int(np.argmax(logits))
        ended = step == len(answer)
        if (mine in eos) if ended else (mine == answer[step]):
            continue
        eos_best = max((float(logits[e]) for e in eos if e < len(logits)), default=-np.inf)
        wanted = eos_best if ended else float(logits[answer[step]])
        chosen = eos_best if mine in eos else float(logits[mine])
        if abs(wanted - chosen) <= tie:
            result.greedy_ties += 1
            result.notes.append(f"greedy answers part at new token {step + 1} at a near-tie of our logits "
                                f"({wanted:.4f} vs {chosen:.4f})")
        else:
            result.notes.append(f"greedy answers part at new token {step + 1}: llama.cpp "
                                f"{'end' if ended else answer[step]}, ours {'end' if mine in eos else mine}")
        return
    result.greedy_equal += 1


def _verdict(result: CheckResult) -> list[str]:
    reasons = []
    if result.tokenizer_equal != result.prompts:
        reasons.append(f"llama.cpp tokenizes {result.prompts - result.tokenizer_equal} of {result.prompts} prompts "
                       "differently")
    if result.max_logit_diff is not None:
        if result.greedy_equal + result.greedy_ties != result.prompts:
            reasons.append(f"{result.prompts - result.greedy_equal - result.greedy_ties} of {result.prompts} greedy "
                           "answers differ")
        if result.max_logit_diff > result.logit_bound:
            reasons.append(f"logits differ by {result.max_logit_diff:.2e} (bound {result.logit_bound:.2e} for logits "
                           f"up to {result.logit_scale:.2f})")
    if result.ppl_bound is not None and result.perplexity_reference:
        rise = result.perplexity / result.perplexity_reference - 1
        if rise > result.ppl_bound:
            reasons.append(f"perplexity {result.perplexity_reference:.3f} -> {result.perplexity:.3f} "
                           f"(+{100 * rise:.1f}%, bound {100 * result.ppl_bound:.0f}%)")
    return reasons


@contextlib.contextmanager
def _c_output_to(path: Path):
    """What C code prints on stdout and stderr (llama.cpp's quantizer prints a line per tensor) goes to `path`."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with open(path, "wb") as sink:
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)


def quantize_with_llama_cpp(source: Path, target: Path, ftype_name: str = "LLAMA_FTYPE_MOSTLY_Q4_K_M") -> list[str]:
    """llama.cpp's own quantizer (llama_model_quantize) from an f16 GGUF file to `target`; returns its
    notes on tensors it wrote in another type (rows not a multiple of the k-quants' 256)."""
    import ctypes
    llama_cpp = _llama_cpp()
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, ftype_name)
    params.nthread = THREADS
    log = target.with_name(target.name + ".log")
    with _c_output_to(log):
        code = llama_cpp.llama_model_quantize(str(source).encode(), str(target).encode(), ctypes.byref(params))
    said = log.read_text(encoding="utf-8", errors="replace").splitlines()
    log.unlink()
    if code != 0 or not target.is_file():
        raise GgufError(Message("gguf.quantize_failed", file=str(source), code=f"{code}: {said[-1] if said else ''}"))
    fallbacks = [line for line in said if "falling back" in line]
    return [f"llama.cpp's quantizer wrote {len(fallbacks)} tensors in another type (rows not a multiple of 256), "
            f"e.g. {' '.join(fallbacks[0].split())}"] if fallbacks else []
