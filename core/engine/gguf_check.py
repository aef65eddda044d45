"""Prove a GGUF file before it is offered: reload it with llama.cpp (`llama-cpp-python`, a reader we did
not write) and hold its answers against mindtune's own engine on the first PROMPTS samples of the
run's validation set.

- Tokenizer: llama.cpp's tokenization of each prompt's text equals ours, id for id.
- Greedy answers: core.engine.generate answers every prompt (GREEDY_TOKENS new tokens at most, one
  batch); llama.cpp reads prompt + answer in one pass, and at every step its best token must be ours
  (an end token where ours ended). That is its own greedy decoding writing our answer token for
  token, checked without decoding token by token. Where it parts, the check says at which token and
  whether our two candidates' logits were within the absolute bound there (a tie at the file's
  precision, not an error).
- f32 / f16 / bf16: the logits over the validation samples within LOGIT_BOUND of our model computing
  with the file's own weights (ours rounded as the file rounds them, after its greedy answers); the
  distance to our float32 model, on the first sample, is reported beside it.
- q8_0 / q4_k_m: the validation perplexity (over the samples' answer tokens) next to the f16 file's,
  within PPL_BOUND of it (ours, float32, beside it).

llama.cpp runs with a float32 key/value cache (its default f16 cache alone moved the demo model's
logits by 1.2e-2 at float32 weights; with it, 1.8e-5) and a context just long enough.
The result is a JSON beside the file (`<file>.check.json`).
"""
from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

import mindspore as ms

from core.data.pipeline import IGNORE_INDEX, load_splits
from core.data.tokenizer import Tokenizer
from core.engine.fused import enable as enable_fused_kernels
from core.engine.generate import SamplingSettings, fused_inference, generate
from core.engine.gguf_export import GgufError, gguf
from core.run.rundir import RunDir
from core.spec.config import ConfigError, load_config
from core.spec.messages import Message

GREEDY_TOKENS = 32
PROMPTS = 8  # validation samples: their prompts answered greedily, their answers' perplexity
# max |logit difference| against our model computing with the file's own weights (see the module doc):
# an absolute part plus a part relative to the largest |logit| compared. llama.cpp multiplies f16 and
# bf16 matrices with its activations rounded to the same type, which we cannot do: measured at the
# file's own weights, the demo model (logits up to 15.5) 5.8e-3, the tiny fixtures 3e-4..1.3e-2 on
# logits below 1 (OLMo 2's post-norm the largest); at float32 weights every family is within 2e-5,
# and the errors of a wrong conversion (a window not carried, a missing scale) are 1e-1..1e0
LOGIT_BOUND = {"f16": (1e-2, 1e-2), "bf16": (5e-2, 5e-2), "f32": (1e-4, 1e-4)}
PPL_BOUND = {"q8_0": 0.01, "q4_k_m": 0.05}  # relative to the f16 file's validation perplexity
THREADS = 2


def _llama_cpp():
    try:
        import llama_cpp
    except ImportError as err:
        raise GgufError(Message("gguf.no_llama_cpp", requirements="requirements-export.txt")) from err
    logging.getLogger("llama-cpp-python").setLevel(logging.ERROR)  # llama.cpp's own log: errors only
    return llama_cpp


@dataclass
class Sample:
    """One validation example: its tokens, where the answer starts, and its labels (IGNORE_INDEX where
    no loss)."""
    ids: list[int]
    answer_start: int
    labels: list[int]

    @property
    def prompt(self) -> list[int]:
        return self.ids[: self.answer_start]


def validation_samples(run_dir: Path, tokenizer: Tokenizer, limit: int, max_len: int) -> list[Sample]:
    """The run's own validation samples (as training tokenized them), at most `limit`, each cut to
    `max_len` tokens; a text-format sample is prompted with its first half."""
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
        answer = next((i for i, label in enumerate(labels) if label != IGNORE_INDEX), None)
        if answer is None or answer == 0:
            answer = max(1, len(ids) // 2)
        if len(ids) >= 2:
            samples.append(Sample(ids, answer, labels))
        if len(samples) >= limit:
            break
    if not samples:
        raise GgufError(Message("gguf.check_no_samples", run=str(run_dir)))
    return samples


def _nll(logits: np.ndarray, ids: list[int], labels: list[int]) -> tuple[float, int]:
    """Summed negative log-likelihood of the answer tokens (position t scored from logits t-1)."""
    total, count = 0.0, 0
    logits = logits.astype(np.float64)
    for t in range(1, len(ids)):
        if labels[t] == IGNORE_INDEX:
            continue
        row = logits[t - 1]
        top = row.max()
        total += float(np.log(np.exp(row - top).sum()) + top - row[ids[t]])
        count += 1
    return total, count


# ---- both sides ----------------------------------------------------------------------------------

class LlamaSide:
    """A GGUF file loaded with llama.cpp: the logits of a sequence, its tokenization."""

    def __init__(self, path: Path, n_ctx: int, lora_path: Path | None = None):
        llama_cpp = _llama_cpp()
        try:
            self.llm = llama_cpp.Llama(str(path), n_ctx=n_ctx, n_batch=n_ctx, n_ubatch=n_ctx, logits_all=True,
                                       verbose=False, n_threads=THREADS, type_k=0, type_v=0, seed=0,
                                       lora_path=str(lora_path) if lora_path else None)
        except (ValueError, RuntimeError) as err:  # llama.cpp's loader refused the file: never offered
            raise GgufError(Message("gguf.llama_cpp_refused", file=path.name, error=str(err))) from err

    def logits(self, ids: list[int]) -> np.ndarray:
        self.llm.reset()
        self.llm.eval(ids)
        return np.array(self.llm.scores[: len(ids)], dtype=np.float32)  # (T, vocab)

    def tokenize(self, text: str) -> list[int]:
        return self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)

    def close(self) -> None:
        self.llm.close()


class OurSide:
    """The checkpoint in mindtune's engine (adapter merged, fused inference kernel where it applies)."""

    def __init__(self, model, tokenizer: Tokenizer):
        self.model, self.tokenizer = model, tokenizer
        enable_fused_kernels(model)
        self.eos = set(tokenizer.eos_token_ids) | set(model.args.eos_token_ids)

    def logits(self, ids: list[int]) -> np.ndarray:
        """(T, vocab) float32: the inference kernel's whole-sequence forward where it runs the model (the
        composed forward's logits to ~1e-5, several times faster), else the composed one."""
        kernel = fused_inference(self.model)
        if kernel is not None:
            positions = np.arange(len(ids), dtype=np.int32).reshape(1, -1)
            return kernel.forward(self.model, np.asarray([ids], np.int32), positions)[0]
        return self.model.construct(ms.Tensor(np.asarray([ids], np.int32))).asnumpy()[0]

    def greedy(self, prompts: list[list[int]], new_tokens: int) -> list[list[int]]:
        return generate(self.model, prompts, SamplingSettings(max_new_tokens=new_tokens), self.eos,
                        self.tokenizer.pad_token_id or 0)

    def round_like(self, quant: str) -> None:
        """Our matrices rounded as the file stores them (gguf.quants there and back: the file's values)."""
        qtype = {"f16": gguf.GGMLQuantizationType.F16, "bf16": gguf.GGMLQuantizationType.BF16,
                 "f32": gguf.GGMLQuantizationType.F32}[quant]
        for param in self.model.get_parameters():
            values = param.asnumpy()
            if values.ndim < 2 or param.name.endswith("mlp.gate.weight"):
                continue  # norms, biases and the MoE router stay float32 in the file
            rounded = gguf.quants.dequantize(gguf.quants.quantize(values.astype(np.float32), qtype), qtype)
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
    greedy_equal: int = 0
    greedy_ties: int = 0  # parted at a near-tie of our two best logits (within the bound)
    greedy_tokens: int = GREEDY_TOKENS
    max_logit_diff: float | None = None  # against our model with the file's own weights
    max_logit_diff_float32: float | None = None  # against our float32 model, on the first sample
    logit_bound: float | None = None  # absolute + relative × max |logit| (LOGIT_BOUND)
    logit_scale: float | None = None  # the largest |logit| of our model over the compared samples
    perplexity: float | None = None  # llama.cpp, this file
    perplexity_ours: float | None = None  # mindtune (at the file's weights for f32/f16/bf16, else float32)
    perplexity_reference: float | None = None  # the f16 file's (quantized files)
    ppl_bound: float | None = None
    samples: int = 0
    seconds: float = 0.0
    stage_seconds: dict = field(default_factory=dict)  # where the check's time went
    llama_cpp: str = ""
    notes: list[str] = field(default_factory=list)
    lora: str | None = None  # an adapter checked on top of the base file

    def to_json(self) -> dict:
        return asdict(self)


def check_gguf(path: Path, quant: str, model, tokenizer: Tokenizer, run_dir: Path,
               reference_ppl: float | None = None, lora_path: Path | None = None) -> CheckResult:
    """Reload `path` (with the adapter `lora_path` on it, if given) in llama.cpp and hold it against
    `model` (ours, float32, adapter merged); see the module doc for what is compared."""
    llama_cpp = _llama_cpp()
    start = time.perf_counter()
    stages = _Stages()
    samples = validation_samples(run_dir, tokenizer, PROMPTS, model.args.max_position_embeddings - GREEDY_TOKENS)
    result = CheckResult(str(path), quant, False, llama_cpp=getattr(llama_cpp, "__version__", "?"),
                         lora=str(lora_path) if lora_path else None, prompts=len(samples), samples=len(samples))
    ours = OurSide(model, tokenizer)
    theirs = LlamaSide(path, max(len(s.ids) for s in samples) + GREEDY_TOKENS, lora_path)
    stages.done("validation samples, llama.cpp load")
    try:
        answers = ours.greedy([s.prompt for s in samples], GREEDY_TOKENS)  # one batch: the weights read once a step
        stages.done("our greedy answers")
        # the float32 model's distance, on one sample (the rest of the check is at the file's own weights)
        first = samples[0].ids
        result.max_logit_diff_float32 = float(np.abs(theirs.logits(first) - ours.logits(first)).max())
        if quant in LOGIT_BOUND:
            ours.round_like(quant)
        stages.done("float32 distance, rounding ours")
        nll_ours = nll_theirs = 0.0
        count = 0
        diff = scale = 0.0
        for sample in samples:
            text = tokenizer.decode(sample.prompt, skip_special_tokens=False)
            result.tokenizer_equal += int(theirs.tokenize(text) == sample.prompt)
            theirs_logits, ours_logits = theirs.logits(sample.ids), ours.logits(sample.ids)
            diff = max(diff, float(np.abs(theirs_logits - ours_logits).max()))
            scale = max(scale, float(np.abs(ours_logits).max()))
            a, n = _nll(theirs_logits, sample.ids, sample.labels)
            b, _ = _nll(ours_logits, sample.ids, sample.labels)
            nll_theirs, nll_ours, count = nll_theirs + a, nll_ours + b, count + n
        result.perplexity = float(np.exp(nll_theirs / max(count, 1)))
        result.perplexity_ours = float(np.exp(nll_ours / max(count, 1)))
        stages.done("validation logits, both")
        tie = LOGIT_BOUND.get(quant, (1e-2, 0.0))[0]
        for sample, answer in zip(samples, answers):
            _judge_greedy(sample.prompt, answer, theirs.logits(sample.prompt + answer), ours, result, tie)
        stages.done("llama.cpp's greedy, teacher-forced")
        if quant in LOGIT_BOUND:
            absolute, relative = LOGIT_BOUND[quant]
            result.max_logit_diff, result.logit_scale = diff, scale
            result.logit_bound = absolute + relative * scale
        else:
            result.ppl_bound = PPL_BOUND[quant]
            result.perplexity_reference = reference_ppl if reference_ppl is not None else result.perplexity_ours
    finally:
        theirs.close()
    result.reasons = _verdict(result)
    result.passed = not result.reasons
    result.seconds = round(time.perf_counter() - start, 2)
    result.stage_seconds = stages.seconds
    return result


class _Stages:
    """Seconds per stage of the check (in its JSON: where the time went)."""

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self._last = time.perf_counter()

    def done(self, stage: str) -> None:
        now = time.perf_counter()
        self.seconds[stage] = round(now - self._last, 2)
        self._last = now


def _judge_greedy(prompt: list[int], answer: list[int], theirs: np.ndarray, ours: OurSide, result: CheckResult,
                  tie: float) -> None:
    """Whether llama.cpp's greedy answer is ours, from its logits over prompt + our answer (teacher-forced:
    if its best token is ours at every step, and an end token where ours ended, its own greedy decoding
    writes our answer token for token). Where it is not: a near-tie of our two candidates' logits
    (ours, computed only then) within `tie`, or a different answer."""
    for step in range(len(answer) + (len(answer) < GREEDY_TOKENS)):
        row = len(prompt) - 1 + step
        choice = int(np.argmax(theirs[row]))
        ended = step == len(answer)
        if (choice in ours.eos) if ended else (choice == answer[step]):
            continue
        logits = ours.logits(prompt + answer[:step])[-1]
        eos_best = max((float(logits[e]) for e in ours.eos if e < len(logits)), default=-np.inf)
        mine = eos_best if ended else float(logits[answer[step]])
        other = eos_best if choice in ours.eos else float(logits[choice])
        if abs(mine - other) <= tie:
            result.greedy_ties += 1
            result.notes.append(f"greedy answers part at new token {step + 1} at a near-tie of our logits "
                                f"({mine:.4f} vs {other:.4f})")
        else:
            result.notes.append(f"greedy answers part at new token {step + 1}: ours "
                                f"{'end' if ended else answer[step]}, llama.cpp {choice}")
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
