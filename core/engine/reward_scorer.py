"""A finished reward model run as a reward function (GRPO's `reward_model` reward, core.eval.rewards):
`RewardModelScorer(run_dir)(prompts, completions) -> list[float]`.

Each (prompt, completion) is rendered as the run's training rows were (core.data.preference): the prompt
as the user's turn (or the chat messages given), the completion as one assistant turn after it, through
the run's chat template, its pieces tokenised apart exactly as training did, then scored by the
model and its value head (core.engine.reward_model) at the row's last token. A row longer than the
run's data.max_seq_len keeps its last max_seq_len tokens (the score is read at the end; `truncated`
counts them). Rows go through in batches of `batch_size`, padded to a multiple of 16 tokens, so a
handful of compiled shapes serve every call. LoRA adapters are merged into the weights once, at load,
and the forward runs on the device's kernels (the CPU's fused attention and norms) as training does.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

import mindspore as ms
from mindspore import Tensor

from core.data.formats import Conversation
from core.data.pipeline import _encode_segments, _join_pieces, run_seq_len
from core.data.preference import _pieces
from core.data.tokenizer import Tokenizer
from core.engine.devices import enable_kernels
from core.engine.export import load_reward_model
from core.engine.lora import merge_lora
from core.engine.reward_model import ValueHead
from core.run.reward_run import RewardModelError, finished_reward_run
from core.spec.messages import Message


def _messages(value: Any, index: int) -> list[dict]:
    """A prompt as chat messages: a string is the user's turn; a list of {role, content} is kept."""
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if isinstance(value, list) and all(isinstance(m, dict) and "role" in m for m in value):
        return [dict(m) for m in value]
    raise RewardModelError(Message("reward.prompt_not_text", index=index, kind=type(value).__name__))


def _answer(value: Any, index: int) -> str:
    """A completion's text: a string, or TRL's conversational form [{role: assistant, content}]."""
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], dict):
        value = value[0].get("content")
    if not isinstance(value, str):
        raise RewardModelError(Message("reward.completion_not_text", index=index, kind=type(value).__name__))
    return value


class RewardModelScorer:
    """A finished reward run's model and value head, scoring (prompt, completion) pairs.

    `scorer(prompts, completions, **columns)` -> one float per completion (TRL's reward-function
    signature; other columns are ignored). prompts[i] is a string (the user's turn) or a list of chat
    messages; completions[i] a string or [{role: assistant, content}]."""

    def __init__(self, run_dir: str | Path, batch_size: int = 8, threads: int | None = None):
        """`threads`: the fused CPU kernels' threads (core.engine.devices.enable_kernels; None: theirs)."""
        self.run, config = finished_reward_run(run_dir)
        model, head, state = load_reward_model(self.run.checkpoint("best"))
        merge_lora(model)  # before anything compiles (see core.engine.lora.merge_lora)
        self.kernels = enable_kernels(model, threads)  # what runs fused, as a run's setup event says it
        self.model = model
        self.head = ValueHead(model.args.hidden_size, weight=head)
        self.tokenizer = Tokenizer.from_dir(state["base_model"]["path"])
        self.pad_id = self.tokenizer.pad_token_id or 0
        self.max_seq_len = config.data.max_seq_len
        self.batch_size = int(batch_size)
        self.step = state["step"]
        self.truncated = 0  # rows cut to their last max_seq_len tokens, over every call
        self._scores = ms.jit(self._row_scores)

    def _row_scores(self, input_ids, attention_mask):
        hidden = self.model(input_ids, attention_mask, None, None, None, True, True)  # (R, T, h)
        return self.head(hidden, attention_mask)

    def rows(self, prompts: Sequence, completions: Sequence) -> list[np.ndarray]:
        """Each pair's token ids as training rendered its pairs (the prompt's pieces and the answer's
        tokenised apart), cut to the last max_seq_len tokens."""
        if len(prompts) != len(completions):
            raise RewardModelError(Message("reward.counts", prompts=len(prompts), completions=len(completions)))
        segments = []
        for index, (prompt, completion) in enumerate(zip(prompts, completions)):
            messages = _messages(prompt, index)
            conv = Conversation(f"prompt {index}", messages, [f"prompt {index}"] * len(messages))
            segments.append(_pieces(self.tokenizer, conv, _answer(completion, index), f"completion {index}"))
        rows = []
        for pieces in _encode_segments(self.tokenizer, segments):
            ids = _join_pieces(pieces, self.tokenizer.eos_token_ids, True)[0]
            if len(ids) > self.max_seq_len:
                ids = ids[-self.max_seq_len:]
                self.truncated += 1
            rows.append(np.asarray(ids, np.int32))
        return rows

    def score_rows(self, rows: list[np.ndarray]) -> list[float]:
        """The score of each row of token ids, `batch_size` rows at a time."""
        out: list[float] = []
        for start in range(0, len(rows), self.batch_size):
            chunk = rows[start:start + self.batch_size]
            length = run_seq_len(self.max_seq_len, max(len(r) for r in chunk))
            ids = np.full((self.batch_size, length), self.pad_id, np.int32)  # (batch_size, length)
            mask = np.zeros((self.batch_size, length), np.int32)  # rows past the chunk: padding only
            for i, row in enumerate(chunk):
                ids[i, :len(row)], mask[i, :len(row)] = row, 1
            scores = self._scores(Tensor(ids), Tensor(mask)).asnumpy()
            out += [float(s) for s in scores[:len(chunk)]]
        return out

    def __call__(self, prompts: Sequence, completions: Sequence, **columns) -> list[float]:
        return self.score_rows(self.rows(prompts, completions))
