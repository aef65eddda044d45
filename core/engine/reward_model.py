"""A reward model (train.objective reward; LLaMA-Factory's "rm" stage, TRL's RewardTrainer): the language
model's final hidden state at each row's last real token, scored by a value head, trained on preference
pairs with the Bradley–Terry loss.

The head is transformers' `XxxForSequenceClassification.score` with one label: a bias-free Dense
hidden -> 1 in float32 (`score.weight`, (1, hidden)), applied to the final hidden state after the model's
final norm (`CausalLM(..., final_hidden=True)`), at the last token whose attention mask is 1 (with right
padding, the row's last real token: LLaMA-Factory's and transformers' rule when the pad id does not
occur in the text). It starts as transformers initialises that layer, normal(0, initializer_range) with
config.json's `initializer_range` (0.02 where it has none), drawn by numpy from the run's seed, so every
data-parallel worker and every resumed run starts from the same head.

A batch is the preference batch of core.data.preference: rows 0..B-1 the chosen answers, rows B..2B-1
the rejected ones of the same prompts (row i and row B + i are one pair). The loss is
mean(-log σ(r_chosen - r_rejected)), TRL's RewardTrainer without a margin or center_rewards_coefficient.

Trained: LoRA, the adapters and the head; full fine-tuning, every weight but an untied LM head (a
reward model has none) and the head (`reward_trainable`). A training checkpoint stores the head beside
the trained weights under its name `score.weight`.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np

import mindspore as ms
from mindspore import Parameter, Tensor, nn, ops

from core.data.preference import pair_eval_batches
from core.engine.checkpoint import set_parameters
from core.engine.lora import mark_only_lora_trainable
from core.engine.train_step import TrainStep
from core.spec.errors import CheckpointError
from core.spec.messages import Message
from core.spec.objectives import REWARD_HEAD as HEAD_WEIGHT  # "score.weight", transformers' name

DEFAULT_INIT_STD = 0.02  # transformers' PretrainedConfig.initializer_range


def head_init_std(model_dir: str | Path) -> float:
    """The head's initial spread: config.json's `initializer_range`, as transformers draws `score`."""
    try:
        config = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return DEFAULT_INIT_STD
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    value = text.get("initializer_range", config.get("initializer_range"))
    return float(value) if isinstance(value, (int, float)) and value > 0 else DEFAULT_INIT_STD


class ValueHead(nn.Cell):
    """`score`: Dense(hidden, 1, no bias, float32) on each row's last real token. `weight` (1, hidden)
    replaces the seeded normal(0, std) start (a checkpoint's head)."""

    def __init__(self, hidden_size: int, seed: int = 0, std: float = DEFAULT_INIT_STD,
                 weight: np.ndarray | None = None):
        super().__init__()
        if weight is None:
            weight = np.random.default_rng(seed).normal(0.0, std, (1, hidden_size))
        weight = np.asarray(weight, np.float32).reshape(1, hidden_size)
        self.score = nn.Dense(hidden_size, 1, weight_init=Tensor(weight), has_bias=False, dtype=ms.float32)
        self.score.weight.name = HEAD_WEIGHT  # stable whatever holds the cell

    @property
    def weight(self) -> Parameter:
        return self.score.weight

    def construct(self, hidden, attention_mask):
        """hidden (R, T, h) final hidden states; attention_mask (R, T) 1 on real tokens -> (R,) float32."""
        r, t, h = hidden.shape
        positions = ops.cast(ops.arange(t).reshape(1, t), ms.float32)
        last = ops.cast((positions * ops.cast(attention_mask, ms.float32)).max(1), ms.int32)  # (R,) last real token
        index = ops.broadcast_to(last.reshape(r, 1, 1), (r, 1, h))
        picked = ops.gather_elements(ops.cast(hidden, ms.float32), 1, index).reshape(r, h)  # (R, h)
        return self.score(picked).reshape(r)


def bradley_terry(scores):
    """scores (2B,): chosen rows then rejected -> mean(-log σ(chosen - rejected)) and (2, B) figures
    (chosen score, rejected score) without gradient."""
    half = scores.shape[0] // 2
    chosen, rejected = scores[:half], scores[half:]
    loss = ops.softplus(rejected - chosen).mean()  # softplus(-z) = -log σ(z)
    return loss, ops.stop_gradient(ops.stack((chosen, rejected)))


def pair_loss(figures: np.ndarray) -> float:
    """The Bradley–Terry loss of (2, N) figures, in float64 on the host: mean log(1 + exp(r - c))."""
    f = np.asarray(figures, np.float64)
    return float(np.logaddexp(0.0, f[1] - f[0]).mean())


def summarize(figures: np.ndarray) -> dict[str, float]:
    """Host figures of (2, N) blocks (concatenated along N): the share of pairs whose chosen answer
    scores higher (a tie counts as wrong), the mean margin and the mean scores of both sides."""
    f = np.asarray(figures, np.float64)
    return {"reward_accuracy": float(np.mean(f[0] > f[1])), "reward_margin": float(np.mean(f[0] - f[1])),
            "chosen_reward": float(f[0].mean()), "rejected_reward": float(f[1].mean())}


def reward_inputs(batch: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """A core.data.preference pair batch as RewardStep's micro-batch arguments: input_ids and
    attention_mask (2B, T) int32 (the labels are not read)."""
    return batch["input_ids"], batch["attention_mask"]


class RewardStep(TrainStep):
    """TrainStep (accumulation, all-reduce, fp16 loss scaling, clipping, AdamW) minimising the
    Bradley–Terry loss of `head` on `model`'s final hidden states. `optimizer` holds
    `reward_trainable(model, head, method)`. Each micro batch is `reward_inputs(batch)`.
    `last_figures` holds the last step's (2, N) figures (chosen, rejected score per pair)."""

    def __init__(self, model: nn.Cell, head: ValueHead, optimizer: nn.Optimizer, max_grad_norm: float | None,
                 loss_scaler, grad_reducer: nn.Cell | None = None):
        self.head = head
        super().__init__(model, optimizer, max_grad_norm, loss_scaler, grad_reducer)
        self._scores = ms.jit(self._row_scores)
        self.last_figures: np.ndarray | None = None

    # The model is called inline in each of these (see core.engine.train_step.head_on_hidden).
    def _scaled_loss(self, input_ids, attention_mask):
        hidden = self.model(input_ids, attention_mask, None, None, None, True, True)  # (R, T, h)
        loss, figures = bradley_terry(self.head(hidden, attention_mask))
        scaled = self.loss_scaler.scale(loss) if self.loss_scaler is not None else loss
        return scaled, loss, figures

    def _row_scores(self, input_ids, attention_mask):
        hidden = self.model(input_ids, attention_mask, None, None, None, True, True)
        return self.head(hidden, attention_mask)

    def scores(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        """Each row's score (R,) float32, without a gradient."""
        return self._scores(Tensor(input_ids), Tensor(attention_mask)).asnumpy()

    def evaluate(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> tuple[float, np.ndarray]:
        """One pair batch's loss and its (2, N) figures, without a gradient."""
        scores = self.scores(input_ids, attention_mask)
        figures = np.stack((scores[:len(scores) // 2], scores[len(scores) // 2:]))
        return pair_loss(figures), figures

    def loss_and_grads(self, input_ids: np.ndarray, attention_mask: np.ndarray):
        """One micro batch's loss, its gradients (in `optimizer.parameters` order, unscaled, not
        clipped or reduced) and (2, N) figures, without an update (the parity tests)."""
        loss, grads, figures = self._micro(Tensor(input_ids), Tensor(attention_mask))
        return float(loss.asnumpy()), [g.asnumpy() for g in grads], figures.asnumpy()

    def __call__(self, micro_batches):
        """Each micro batch: input_ids, attention_mask (2B, T). Returns the mean loss, the gradient
        norm, whether the step was applied and the loss scale used."""
        scale = float(self.loss_scaler.scale_value.asnumpy()) if self.loss_scaler is not None else 1.0
        if len(micro_batches) == 1:
            loss, figures, norm, finite = self._single(*(Tensor(a) for a in micro_batches[0]))
            losses, blocks = [float(loss.asnumpy())], [figures.asnumpy()]
        else:
            grads, losses, blocks = None, [], []
            for arrays in micro_batches:
                loss, g, figures = self._micro(*(Tensor(a) for a in arrays))
                grads = g if grads is None else self._add(ms.mutable(grads), ms.mutable(g))
                losses.append(float(loss.asnumpy()))
                blocks.append(figures.asnumpy())
            norm, finite = self._apply(ms.mutable(grads), len(micro_batches))
        self.last_figures = np.concatenate(blocks, axis=1)
        return float(np.mean(losses)), float(norm.asnumpy()), bool(finite.asnumpy()), scale


def evaluate(step: RewardStep, pairs, batch_size: int, length: int, pad_id: int, heartbeat=None) -> dict:
    """val_loss (the mean over every validation pair) and the reward figures (`summarize`)."""
    blocks = []
    for batch in pair_eval_batches(pairs, batch_size, length, pad_id):
        if heartbeat is not None:
            heartbeat()
        blocks.append(step.evaluate(*reward_inputs(batch))[1])
    figures = np.concatenate(blocks, axis=1)
    return {"val_loss": pair_loss(figures), **summarize(figures)}


def baseline_text(figures) -> str:
    """The baseline event's words for a reward run (`figures`: evaluate's dict, or a record with those
    names): its loss and pair figures; before training the head is random, so accuracy is chance."""
    get = figures.get if isinstance(figures, Mapping) else (lambda name: getattr(figures, name))
    return (f"reward loss {get('val_loss'):.4f}, reward accuracy {get('reward_accuracy'):.3f}, "
            f"margin {get('reward_margin'):+.4f}, chosen score {get('chosen_reward'):.4f}, "
            f"rejected score {get('rejected_reward'):.4f}")


# ---- what a reward run trains and stores -------------------------------------------------------

def reward_trainable(model: nn.Cell, head: ValueHead, method: str) -> list[Parameter]:
    """The parameters a reward run trains, in the optimizer's order: LoRA, the adapters (everything
    else frozen); full, every weight of the model but an untied LM head (frozen: it gets no gradient,
    and AdamW's decay would only shrink it); then the head."""
    if method == "lora":
        params = mark_only_lora_trainable(model)
    else:
        if not model.tied:
            model.lm_head.weight.requires_grad = False
        params = [p for p in model.get_parameters() if p.requires_grad]
    return params + [head.weight]


def head_weight(weights: Mapping[str, np.ndarray], source: str) -> np.ndarray:
    """The head's (1, hidden) weight in a checkpoint's tensors; an error naming the file without it."""
    if HEAD_WEIGHT not in weights:
        raise CheckpointError(Message("reward.no_head", file=source, name=HEAD_WEIGHT))
    return np.asarray(weights[HEAD_WEIGHT], np.float32)


def take_parameters(trainable: Mapping[str, Parameter], weights: Mapping[str, np.ndarray], source: str) -> list[str]:
    """A reward run's trainable parameters from a checkpoint it forks from: every one but the head
    must be there (an error names the first missing); the head is taken when the checkpoint has one
    (a reward run's), else keeps its seeded start (an SFT run's). Its other tensors that this run
    does not train (a full SFT run's LM head) are left out. Returns the names left out or kept."""
    wanted = {name: p for name, p in trainable.items() if name != HEAD_WEIGHT or HEAD_WEIGHT in weights}
    # a name this run trains that the checkpoint lacks is left missing here, so set_parameters names it
    set_parameters(wanted, {name: weights[name] for name in wanted if name in weights}, source)
    return sorted((set(weights) - set(wanted)) | (set(trainable) - set(wanted)))
