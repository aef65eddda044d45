"""mindtune's MindSpore model as an lm-evaluation-harness model (`lm_eval`, an optional install:
requirements-eval.txt), registered as `mindtune`, so any lm-eval task runs on a base model folder, a
training checkpoint (runs/<id>/checkpoints/best, LoRA or full), a run folder (its best checkpoint)
or an export (a merged Hugging Face folder, or a PEFT adapter over its base).

The request semantics are lm-eval's Hugging Face backend's (lm_eval/models/huggingface.py), so the
two score a task alike: contexts and continuations are tokenised together and split where the
context's tokens end (`TemplateLM._encode_pair`), a sequence keeps its last max_length + 1 tokens,
a continuation's log-likelihood is the sum of its tokens' log-softmax and `is_greedy` says whether
every one was the argmax; rolling log-likelihoods score disjoint windows of max_length tokens;
generation is greedy unless `do_sample`, left-padded, its context left-truncated to leave
max_gen_toks, cut at the first `until` string (the EOS text is one). Requests run longest first in
batches of `batch_size`; generation is core.engine.generate's (KV cache). With the fused inference kernel
(core.engine.fused.FusedInference, where it computes the model) the log-likelihoods of continuations up
to SHARED_CONTEXT_MAX_CONTINUATION tokens are scored after their context, which runs once for all its
continuations (a multiple-choice item's choices) with any prefix shared by a batch's contexts run once
too; longer ones (rolling windows) and models the kernel does not compute run whole rows through
core.engine.model's forward, as the hf backend runs every request. The numbers are the same either way
(tests/core/test_inference_kernel.py).
"""
from __future__ import annotations

import copy
from pathlib import Path

import numpy as np

from lm_eval.api.model import TemplateLM
from lm_eval.api.registry import register_model
from lm_eval.models.utils import Collator, handle_stop_sequences, normalize_gen_kwargs, postprocess_generated_text
from lm_eval.utils import get_rolling_token_windows, make_disjoint_window

from mindspore import Tensor, ops

from core.engine.checkpoint import load_hf_model
from core.eval.eval_tasks import EvalError as EvalModelError, resolve_source
from core.engine.export import checkpoint_folder, load_trained_model
from core.engine.fused import enable as enable_fused
from core.engine.generate import SamplingSettings, fused_inference, generate, prefilled
from core.engine.lora import load_peft_adapter, merge_lora, read_peft_config
from core.data.tokenizer import Tokenizer
from core.spec.messages import Message

DEFAULT_BATCH_SIZE = 8
DEFAULT_MAX_GEN_TOKS = 256  # lm-eval's Hugging Face backend's
# continuations up to this many tokens are scored after their context's prefill, shared by the requests
# with the same context (a multiple-choice item's choices); longer ones (rolling windows) run whole rows
SHARED_CONTEXT_MAX_CONTINUATION = 32
ENCODED_KEPT = 4096  # texts whose token ids tok_encode keeps


class _RowLogits:
    """Stands in for the logits tensor lm-eval's `Collator.get_cache` expands per cache hit: the
    scores here are read from the numpy row directly."""

    def expand(self, *shape):
        return self

    def chunk(self, n: int):
        return [None] * n


def load_model(path: str | Path, dtype: str = "float32"):
    """(CausalLM with any LoRA merged, Tokenizer, description) for `path` (see resolve_source)."""
    kind, folder = resolve_source(path)
    if kind == "checkpoint":
        model, state = load_trained_model(checkpoint_folder(folder))
        if state["method"] == "lora":
            merge_lora(model)
        base = Path(state["base_model"]["path"])
        return model, Tokenizer.from_dir(base), f"checkpoint {folder} (step {state['step']}, {state['method']})"
    if kind == "peft":
        base = Path(read_peft_config(folder)["base_model_name_or_path"])
        if not base.is_dir():
            raise EvalModelError(Message("engine.eval_base_missing", folder=str(folder), base=str(base)))
        model = load_hf_model(base, dtype)
        load_peft_adapter(model, folder)
        merge_lora(model)
        model.set_train(False)
        return model, Tokenizer.from_dir(base), f"PEFT adapter {folder} over {base}"
    return load_hf_model(folder, dtype), Tokenizer.from_dir(folder), f"model folder {folder}"


@register_model("mindtune")
class MindtuneLM(TemplateLM):
    """lm-eval model over core.engine.model. `pretrained`: what `load_model` accepts."""

    def __init__(self, pretrained: str, batch_size: int | str = DEFAULT_BATCH_SIZE, max_length: int | None = None,
                 max_gen_toks: int = DEFAULT_MAX_GEN_TOKS, add_bos_token: bool | None = None,
                 dtype: str = "float32", fused: bool = True, progress=None, **unused):
        super().__init__()
        if str(batch_size).startswith("auto"):
            batch_size = DEFAULT_BATCH_SIZE
        self._batch_size = int(batch_size)
        if self._batch_size < 1:
            raise EvalModelError(Message("eval.batch_size", value=batch_size))
        self.model, self.tokenizer, self.description = load_model(pretrained, dtype)
        self.model.set_train(False)
        self.kernels = "composed"
        if fused:
            self.kernels = enable_fused(self.model)
            kernel = fused_inference(self.model)
            if kernel is not None:  # its first call sets the op up in MindSpore (~50 ms): here, not in a request
                with prefilled(kernel, self.model, [[0, 0]], 1) as (_, cache, slots, width, _):
                    kernel.forward(self.model, np.zeros((1, 1), np.int32), np.ones((1, 1), np.int32), slots, cache,
                                   start=width)
        self._encoded: dict[tuple, list[int]] = {}  # tok_encode's last ENCODED_KEPT texts
        self.pretrained = str(pretrained)
        self._max_length = int(max_length) if max_length else self.model.args.max_position_embeddings
        self._max_gen_toks = int(max_gen_toks)
        self.add_bos_token = None if add_bos_token is None else str(add_bos_token).lower() in ("1", "true", "yes")
        self.progress = progress  # called with (kind, done, total) after each batch
        self.eos_ids = set(self.tokenizer.eos_token_ids) | set(self.model.args.eos_token_ids)
        self.pad_id = self.tokenizer.pad_token_id or 0
        self.generated_tokens = 0  # new tokens generated so far, up to each row's stop (bench/lm_eval_speed.py)

    # -- the properties lm-eval asks for -------------------------------------------------------

    @property
    def eot_token_id(self) -> int:
        return self.tokenizer.eos_token_id

    @property
    def prefix_token_id(self) -> int:
        bos = self.tokenizer.bos_token_id
        return bos if bos is not None else self.tokenizer.eos_token_id

    @property
    def max_length(self) -> int:
        return self._max_length

    @property
    def max_gen_toks(self) -> int:
        return self._max_gen_toks

    @property
    def batch_size(self) -> int:
        return self._batch_size

    @property
    def tokenizer_name(self) -> str:
        return self.pretrained.replace("/", "__")

    def chat_template(self, chat_template: bool | str = False) -> str | None:
        if chat_template is False or chat_template is None or not self.tokenizer.has_chat_template:
            return None
        return self.tokenizer.chat_template()

    def apply_chat_template(self, chat_history: list[dict], add_generation_prompt: bool = True) -> str:
        """The chat rendered as text. Without a generation prompt the last (assistant) message is
        left open to be continued, as transformers' `continue_final_message` does."""
        text = self.tokenizer.apply_chat_template(chat_history, add_generation_prompt=add_generation_prompt)
        if not add_generation_prompt and chat_history:
            final = chat_history[-1]["content"].strip()
            cut = text.rfind(final)
            if cut >= 0:
                text = text[: cut + len(final)]
        return text

    # -- tokens --------------------------------------------------------------------------------

    def tok_encode(self, string: str, add_special_tokens: bool | None = None, left_truncate_len: int | None = None,
                   **kwargs) -> list[int]:
        if add_special_tokens is None:
            add_special_tokens = True if self.add_bos_token is None else self.add_bos_token
            bos = self.tokenizer.decode([self.prefix_token_id], skip_special_tokens=False)
            if bos and string.startswith(bos):  # the text already starts with it (a chat template's BOS)
                add_special_tokens = False
        key = (string, add_special_tokens)
        ids = self._encoded.get(key)
        if ids is None:  # a multiple-choice item's context is encoded once per choice: once here
            ids = self.tokenizer.encode(string, add_special_tokens=add_special_tokens)
            if len(self._encoded) >= ENCODED_KEPT:
                self._encoded.clear()
            self._encoded[key] = ids
        ids = list(ids)
        return ids[-left_truncate_len:] if left_truncate_len else ids

    def tok_decode(self, tokens, skip_special_tokens: bool = True) -> str:
        return self.tokenizer.decode([tokens] if isinstance(tokens, int) else tokens, skip_special_tokens)

    # -- scoring -------------------------------------------------------------------------------

    def _report(self, kind: str, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(kind, done, total)

    def _log_softmax_rows(self, inputs: list[list[int]]) -> np.ndarray:
        """Right-padded batch forward -> log-softmax (B, T, vocab) float32 (numpy)."""
        width = max(len(row) for row in inputs)
        ids = np.full((len(inputs), width), self.pad_id, dtype=np.int32)
        for i, row in enumerate(inputs):
            ids[i, : len(row)] = row
        logits = self.model(Tensor(ids))  # (B, T, vocab); right padding cannot reach earlier positions
        return ops.log_softmax(logits, -1).asnumpy()

    def _loglikelihood_tokens(self, requests, disable_tqdm: bool = False, override_bs: int | None = None):
        """[(key, context ids, continuation ids)] -> [(sum log p(continuation), is_greedy)]."""
        kernel = fused_inference(self.model)
        if kernel is not None:
            shareable = [self._shareable(req) for req in requests]
            short = [i for i, ok in enumerate(shareable) if ok]
            if short:
                rest = [i for i, ok in enumerate(shareable) if not ok]
                results = [None] * len(requests)
                for i, answer in zip(short, self._loglikelihood_shared([requests[i] for i in short], kernel,
                                                                       override_bs or self.batch_size)):
                    results[i] = answer
                for i, answer in zip(rest, self._loglikelihood_rows([requests[i] for i in rest], override_bs)
                                     if rest else []):
                    results[i] = answer
                return results
        return self._loglikelihood_rows(requests, override_bs)

    def _shareable(self, request) -> bool:
        _, context, continuation = request
        return 0 < len(continuation) <= SHARED_CONTEXT_MAX_CONTINUATION and len(context) > 0 and \
            len(context) + len(continuation) <= self.max_length + 1

    def _loglikelihood_shared(self, requests, kernel, batch_size: int):
        """Requests grouped by context, `batch_size` distinct contexts at a time, longest first (the rows
        lm-eval's hf backend runs when its one-token cache groups a multiple-choice item's choices). The
        inference kernel runs the contexts (core.engine.generate.prefilled: a prefix they all share runs
        once), whose last
        position scores every continuation's first token; continuations of more tokens run their other
        tokens in one more call over copies of their context's keys and values (the hf backend runs
        such a context again per choice)."""
        groups: dict[tuple, list[int]] = {}
        for i, (_, context, _) in enumerate(requests):
            groups.setdefault(tuple(context), []).append(i)
        contexts = sorted(groups, key=lambda c: (-len(c), c))
        results: list = [None] * len(requests)
        done = 0
        for begin in range(0, len(contexts), batch_size):
            rows = contexts[begin:begin + batch_size]
            members = [(r, i) for r, row in enumerate(rows) for i in groups[row]]
            longer = [(r, i) for r, i in members if len(requests[i][2]) > 1]
            with prefilled(kernel, self.model, rows, 0, self.pad_id) as (first, shared, valid, width, _):
                first = _log_softmax(first)
                rest = None
                if longer:
                    span = max(len(requests[i][2]) for _, i in longer) - 1
                    owner = np.array([r for r, _ in longer], np.int32)
                    inputs = np.full((len(longer), span), self.pad_id, np.int32)
                    for k, (_, i) in enumerate(longer):
                        inputs[k, :len(requests[i][2]) - 1] = requests[i][2][:-1]
                    starts = np.array([len(requests[i][1]) for _, i in longer], np.int32).reshape(-1, 1)
                    slots = np.ones((len(longer), width + span), np.float32)
                    slots[:, :width] = valid[owner]
                    with kernel.new_cache(self.model, len(longer), width + span) as cache:
                        kernel.gather(cache, shared, owner, width)
                        rest = _log_softmax(kernel.forward(self.model, inputs,
                                                           starts + np.arange(span, dtype=np.int32), slots, cache,
                                                           start=width))
            row_of = {i: k for k, (_, i) in enumerate(longer)}
            for r, i in members:
                key, _, continuation = requests[i]
                scored = first[r:r + 1]
                if len(continuation) > 1:
                    scored = np.concatenate([scored, rest[row_of[i], :len(continuation) - 1]])
                answer = (float(scored[np.arange(len(continuation)), continuation].sum()),
                          bool((scored.argmax(-1) == np.asarray(continuation)).all()))
                results[i] = answer
                if key is not None:
                    self.cache_hook.add_partial("loglikelihood", key, answer)
                done += 1
            self._report("loglikelihood", done, len(requests))
        return results

    def _loglikelihood_rows(self, requests, override_bs: int | None = None):
        """Each request's whole row (context + continuation, its last max_length + 1 tokens) in one
        forward, as lm-eval's hf backend runs it."""
        def longest_first(req):
            tokens = req[1] + req[2]
            return -len(tokens), tuple(tokens)

        ordered = Collator(requests, sort_fn=longest_first, group_by="contexts",
                           group_fn=lambda req: req[-2] + req[-1][:-1])
        results = []
        done = 0
        for chunk in ordered.get_batched(n=override_bs or self.batch_size):
            inputs = []
            for _, context_enc, continuation_enc in chunk:
                inputs.append((context_enc + continuation_enc)[-(self.max_length + 1):][:-1])
            log_probs = self._log_softmax_rows(inputs)
            for request, row, inp in zip(chunk, log_probs, inputs):
                # requests that differ only in the last token (one-token choices after one context)
                # are scored from the same row, as lm-eval's `group_by="contexts"` cache does
                for key, cont, _ in ordered.get_cache(req_str=request[0], cxt_toks=request[1],
                                                      cont_toks=request[2], logits=_RowLogits()):
                    scored = row[len(inp) - len(cont): len(inp)]  # (len(cont), vocab)
                    answer = (float(scored[np.arange(len(cont)), cont].sum()),
                              bool((scored.argmax(-1) == np.asarray(cont)).all()))
                    results.append(answer)
                    if key is not None:  # rolling windows have no key: loglikelihood_rolling caches them
                        self.cache_hook.add_partial("loglikelihood", key, answer)
                    done += 1
            self._report("loglikelihood", done, len(requests))
        return ordered.get_original(results)

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        windows, owners = [], []
        for index, (string,) in enumerate(req.args for req in requests):
            tokens = self.tok_encode(string)
            for window in map(make_disjoint_window, get_rolling_token_windows(
                    token_list=tokens, prefix_token=self.prefix_token_id, max_seq_len=self.max_length,
                    context_len=1)):
                windows.append((None,) + window)
                owners.append(index)
        scores = self._loglikelihood_tokens(windows)
        totals = [0.0] * len(requests)
        for owner, (logprob, _) in zip(owners, scores):
            totals[owner] += logprob
        for request, total in zip(requests, totals):
            self.cache_hook.add_partial("loglikelihood_rolling", request.args, total)
        return totals

    # -- generation ----------------------------------------------------------------------------

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        ordered = Collator([req.args for req in requests], sort_fn=lambda req: (-len(self.tok_encode(req[0])), req[0]),
                           group_by="gen_kwargs", group_fn=lambda req: req[1])
        eos_text = self.tok_decode(self.eot_token_id, skip_special_tokens=False)
        results, done = [], 0
        for chunk in ordered.get_batched(n=self.batch_size):
            contexts, all_kwargs = zip(*chunk)
            kwargs = normalize_gen_kwargs(copy.deepcopy(all_kwargs[0]), self.max_gen_toks)
            until = handle_stop_sequences(kwargs.pop("until", None), eos=eos_text)
            max_gen_toks = kwargs.pop("max_gen_toks")
            if max_gen_toks >= self.max_length:
                raise EvalModelError(Message("engine.eval_gen_tokens", max_gen_toks=max_gen_toks, limit=self.max_length))
            prompts = [self.tok_encode(c, left_truncate_len=self.max_length - max_gen_toks) for c in contexts]
            sampled = bool(kwargs.get("do_sample")) and float(kwargs.get("temperature") or 0) > 0
            settings = SamplingSettings(max_new_tokens=max_gen_toks,
                                        temperature=float(kwargs.get("temperature") or 0) if sampled else 0.0,
                                        top_p=float(kwargs.get("top_p") or 1.0) if sampled else 1.0,
                                        seed=kwargs.get("seed"))
            stops = [term for term in until if term]
            outputs = generate(self.model, prompts, settings, self.eos_ids, self.pad_id,
                               stop=lambda tokens: any(term in self.tokenizer.decode(tokens) for term in stops))
            self.generated_tokens += sum(len(ids) for ids in outputs)
            for context, gen_kwargs, new_ids in zip(contexts, all_kwargs, outputs):
                text = postprocess_generated_text(self.tok_decode(new_ids), until, None)
                results.append(text)
                self.cache_hook.add_partial("generate_until", (context, gen_kwargs), text)
            done += len(chunk)
            self._report("generate_until", done, len(requests))
        return ordered.get_original(results)


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    """log-softmax over the last axis, float32."""
    top = logits.max(-1, keepdims=True)
    shifted = logits - top
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
