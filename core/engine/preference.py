"""Preference tuning objectives in the compiled train step: DPO (Rafailov et al. 2023; the IPO loss of
Azar et al. 2023 as an option), SimPO (Meng et al. 2024), ORPO (Hong et al. 2024) and KTO (Ethayarajh
et al. 2024), in the forms Hugging Face TRL's trainers use.

A preference batch is one forward: for the paired objectives (dpo, simpo, orpo) its rows are the B
chosen answers followed by the B rejected answers of the same prompts (row i and row B + i are one
pair), so a pair is never split across micro batches or data-parallel workers; for KTO each row is one
answer with its label (1 desirable, 0 undesirable). Every row's answer tokens carry labels, the prompt
is masked (-100), exactly as SFT rows.

Each row's log-probability of its answer is the sum over its labelled tokens of log p(token | prefix);
SimPO, ORPO and the IPO loss use the length-averaged form (that sum over the token count).

The reference model (dpo, kto): with LoRA, the base with every adapter switched off
(`LoRADense.adapter_off`), computed in the same step by a separate compiled pass, so no second copy of
the weights exists; with full fine-tuning, a frozen copy of the starting weights (`reference_model`).
Its log-probabilities carry no gradient.

KTO's KL term: the published estimator pairs each prompt with an unrelated answer of the batch; here it
is the batch mean of the policy/reference log-ratios of the batch's own answers (detached, clamped at
0), which TRL's kto_loss computes when given the batch's own answers as its KL samples.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

import mindspore as ms
from mindspore import Tensor, nn, ops

from core.engine.lora import LORA_CELLS
from core.spec.errors import MessageError
from core.spec.messages import Message
from core.engine.train_step import IGNORE_INDEX, CausalLMLoss, TrainStep, forward, head_on_hidden, next_token_targets

OBJECTIVES = ("sft", "dpo", "simpo", "orpo", "kto")
PAIRED = ("dpo", "simpo", "orpo")  # rows: B chosen, then B rejected
WITH_REFERENCE = ("dpo", "kto")


class PreferenceError(MessageError):
    """A preference objective, setting or batch that cannot be used; the message says why."""


@dataclass(frozen=True)
class Objective:
    """One objective and its hyper-parameters (core.spec.config's train.objective and preference: section)."""
    name: str
    beta: float = 0.1
    label_smoothing: float = 0.0
    loss_type: str = "sigmoid"  # dpo: sigmoid | ipo
    simpo_gamma: float = 0.5
    orpo_lambda: float = 0.1
    kto_desirable_weight: float = 1.0
    kto_undesirable_weight: float = 1.0

    def __post_init__(self):
        if self.name not in OBJECTIVES[1:]:
            raise PreferenceError(Message("engine.objective", choices=", ".join(OBJECTIVES[1:]), py_value=repr(self.name)))
        if self.loss_type not in ("sigmoid", "ipo"):
            raise PreferenceError(Message("engine.loss_type", py_value=repr(self.loss_type)))

    @classmethod
    def from_config(cls, cfg) -> Objective:
        p = cfg.preference
        return cls(cfg.train.objective, p.beta, p.label_smoothing, p.loss_type, p.simpo_gamma, p.orpo_lambda,
                   p.kto_desirable_weight, p.kto_undesirable_weight)

    @property
    def paired(self) -> bool:
        return self.name in PAIRED

    @property
    def needs_reference(self) -> bool:
        return self.name in WITH_REFERENCE


@contextmanager
def adapters_off(model: nn.Cell):
    """Every LoRA layer of `model` computes its base layer alone while inside (the reference pass).
    Only for a compiled function of its own: the flag is a constant of the graph it is compiled in."""
    cells = [c for _, c in model.cells_and_names() if isinstance(c, LORA_CELLS)]
    for cell in cells:
        cell.adapter_off = True
    try:
        yield len(cells)
    finally:
        for cell in cells:
            cell.adapter_off = False


class TokenNLL(CausalLMLoss):
    """Each position's negative log-likelihood of its next-token target: logits (R, T, V) float32,
    targets (R, T) int32 (below 0: ignored, NLL 0) -> (R, T). The gradient is written out,
    (softmax − onehot)·dout on labelled positions, as core.engine.train_step.CausalLMLoss (whose primitives
    it uses) does for the sum."""

    def construct(self, logits, targets):
        valid = ops.cast(targets != IGNORE_INDEX, ms.float32)
        picked = ops.gather_elements(ops.log_softmax(logits, -1), -1,
                                     ops.expand_dims(ops.maximum(targets, 0), -1)).squeeze(-1)
        return -picked * valid

    def bprop(self, logits, targets, out, dout):
        valid = self.cast(self.not_equal(targets, IGNORE_INDEX), logits.dtype)
        onehot = self.one_hot(self.maximum(targets, 0), logits.shape[-1], self.on, self.off)
        weight = self.expand_dims(valid * dout, -1)  # (R, T, 1)
        return (self.softmax(logits) - onehot) * weight, self.zeros_like(targets)


def token_nll_cell(model: nn.Cell):
    """The per-position NLL for `model`'s logits: the fused CPU kernel when core.engine.fused enabled it
    (it returns each position's NLL and its log-sum-exp), else TokenNLL."""
    kernel = getattr(model, "fused_loss", None)
    return _KernelNLL(kernel) if kernel is not None else TokenNLL()


class _KernelNLL(nn.Cell):
    def __init__(self, kernel):
        super().__init__()
        self.kernel = kernel

    def construct(self, logits, targets):
        nll, _ = self.kernel(logits, targets)
        return nll


def logits_nll(model: nn.Cell, temperature: float = 1.0) -> tuple[bool, nn.Cell]:
    """How a pass computes each position's NLL from `model`'s logits at `temperature` (logits / T, as
    TRL's GRPO scores its completions): (whether the model caps its logits itself, the NLL cell). At
    T = 1, token_nll_cell's (a loss kernel that caps takes them uncapped); otherwise the capped logits
    are scaled in the graph and the loss kernel takes them when it does not cap, else TokenNLL."""
    capped = not getattr(model, "cap_in_loss", False)
    if temperature == 1.0:
        return capped, token_nll_cell(model)
    kernel = getattr(model, "fused_loss", None)
    return True, _KernelNLL(kernel) if kernel is not None and capped else TokenNLL()


class LogProbPass:
    """A compiled pass without gradient over `model`: each position's log-probability of its next-token
    target at `temperature` (R, T) (0 where the target is ignored), or with `rows` each row's sum over
    its labelled tokens (R,). The reference's pass (dpo, kto, grpo: `reference_pass`) and GRPO's old
    policy's. `adapter_off`: the model's LoRA adapters are switched off while it runs (the reference of
    a LoRA run; `objective` names the run's objective when the model has none).

    The model is called in the compiled method itself (see core.engine.train_step.head_on_hidden). Each
    instance compiles its own graph: the adapters' switch is a constant of it."""

    def __init__(self, model: nn.Cell, rows: bool = False, temperature: float = 1.0, adapter_off: bool = False,
                 objective: str = ""):
        self.model = model
        self.rows = rows
        self.adapter_off, self.objective = adapter_off, objective
        self.on_hidden = head_on_hidden(model)
        if self.on_hidden and temperature != 1.0:
            raise PreferenceError(Message("engine.temperature_in_head", temperature=temperature))
        self.scale = 1.0 / float(temperature)
        self.capped, self.nll = logits_nll(model, temperature)
        self._fn = ms.jit(self._logps)

    def _logps(self, input_ids, labels, attention_mask):
        targets = next_token_targets(labels)
        if self.on_hidden:
            nll = self.model(input_ids, attention_mask, None, None, targets)
        else:
            logits = self.model(input_ids, attention_mask, None, None, None, self.capped)
            if self.scale != 1.0:
                logits = logits * self.scale
            nll = self.nll(logits, targets)
        if self.rows:
            return ops.stop_gradient(_row_logps(nll, targets)[0])
        return ops.stop_gradient(-nll)

    def __call__(self, input_ids: np.ndarray, labels: np.ndarray, attention_mask: np.ndarray) -> Tensor:
        args = (Tensor(input_ids), Tensor(labels), Tensor(attention_mask))
        if not self.adapter_off:
            return self._fn(*args)
        with adapters_off(self.model) as switched:
            if not switched:
                raise PreferenceError(Message("engine.adapter_off_without_lora", objective=self.objective))
            return self._fn(*args)


def reference_pass(model: nn.Cell, reference_model: nn.Cell | None, objective: str, rows: bool = False,
                   temperature: float = 1.0) -> LogProbPass:
    """The reference's LogProbPass: over `reference_model` (a frozen copy), else over `model` with its
    adapters switched off."""
    if reference_model is not None:
        return LogProbPass(reference_model, rows, temperature)
    return LogProbPass(model, rows, temperature, adapter_off=True, objective=objective)


def _log_sigmoid(x):
    return -ops.softplus(-x)


class PreferenceLoss(nn.Cell):
    """The objective's loss from each row's summed answer log-probability `logps` (R,), its labelled
    token count `counts` (R,), the reference's `ref_logps` (R,) (ignored without a reference) and,
    for KTO, `labels` (R,) 1.0 desirable / 0.0 undesirable. Returns the loss and a (4, N) float32
    block of per-example figures, no gradient: paired objectives (N = pairs) chosen reward, rejected
    reward, chosen log-prob, rejected log-prob; KTO (N = answers) reward, log-prob, label, 0."""

    def __init__(self, objective: Objective):
        super().__init__()
        # plain float and str attributes: constants of the compiled graph
        self.name, self.loss_type = objective.name, objective.loss_type
        self.beta, self.ls = float(objective.beta), float(objective.label_smoothing)
        self.gamma, self.lam = float(objective.simpo_gamma), float(objective.orpo_lambda)
        self.w_good, self.w_bad = float(objective.kto_desirable_weight), float(objective.kto_undesirable_weight)

    def construct(self, logps, counts, ref_logps, labels):
        if self.name == "kto":
            return self._kto(logps, ref_logps, labels)
        half = logps.shape[0] // 2
        avg = logps / ops.maximum(counts, 1.0)
        if self.name == "dpo":
            if self.loss_type == "ipo":  # IPO on length-averaged log-probabilities (as TRL)
                ref_avg = ref_logps / ops.maximum(counts, 1.0)
                chosen, rejected = avg[:half] - ref_avg[:half], avg[half:] - ref_avg[half:]
                losses = ops.square((chosen - rejected) - 1.0 / (2.0 * self.beta))
            else:
                chosen, rejected = logps[:half] - ref_logps[:half], logps[half:] - ref_logps[half:]
                losses = self._smoothed_sigmoid(self.beta * (chosen - rejected))
            loss = losses.mean()
            rewards_c, rewards_r = self.beta * chosen, self.beta * rejected
        elif self.name == "simpo":
            chosen, rejected = avg[:half], avg[half:]
            loss = self._smoothed_sigmoid(self.beta * (chosen - rejected) - self.gamma).mean()
            rewards_c, rewards_r = self.beta * chosen, self.beta * rejected
        else:  # orpo: the chosen answers' token-mean NLL minus λ·log σ(log odds ratio)
            chosen, rejected = avg[:half], avg[half:]
            log_odds = (chosen - rejected) - (ops.log1p(-ops.exp(chosen)) - ops.log1p(-ops.exp(rejected)))
            nll = -logps[:half].sum() / ops.maximum(counts[:half].sum(), 1.0)
            loss = nll - self.lam * _log_sigmoid(log_odds).mean()
            rewards_c, rewards_r = self.lam * chosen, self.lam * rejected
        figures = ops.stack((rewards_c, rewards_r, logps[:half], logps[half:]))
        return loss, ops.stop_gradient(figures)

    def _smoothed_sigmoid(self, z):
        ls = self.ls
        if ls > 0:
            return -(1.0 - ls) * _log_sigmoid(z) - ls * _log_sigmoid(-z)
        return -_log_sigmoid(z)

    def _kto(self, logps, ref_logps, labels):
        ratio = logps - ref_logps
        kl = ops.stop_gradient(ops.maximum(ratio.mean(), 0.0))
        desirable = self.w_good * (1.0 - ops.sigmoid(self.beta * (ratio - kl)))
        undesirable = self.w_bad * (1.0 - ops.sigmoid(self.beta * (kl - ratio)))
        loss = (labels * desirable + (1.0 - labels) * undesirable).mean()
        figures = ops.stack((self.beta * ratio, logps, labels, ops.zeros_like(labels)))
        return loss, ops.stop_gradient(figures)


def summarize(objective: Objective, figures: np.ndarray) -> dict[str, float]:
    """Host figures of one or more batches' (4, N) blocks (concatenated along N): reward accuracy
    (paired: chosen reward > rejected; KTO: the reward's sign agrees with the label), reward margin
    (paired: mean chosen − rejected reward; KTO: mean desirable − mean undesirable reward), mean
    rewards and log-probabilities of both sides."""
    f = np.asarray(figures, np.float64)
    if objective.name == "kto":
        reward, logp, label = f[0], f[1], f[2] > 0.5
        good, bad = reward[label], reward[~label]
        accuracy = float(np.mean(np.where(label, reward > 0, reward < 0))) if f.shape[1] else float("nan")
        mean = (lambda a: float(a.mean()) if a.size else float("nan"))
        return {"reward_accuracy": accuracy, "reward_margin": mean(good) - mean(bad) if good.size and bad.size
                else float("nan"), "chosen_reward": mean(good), "rejected_reward": mean(bad),
                "chosen_logp": mean(logp[label]), "rejected_logp": mean(logp[~label])}
    return {"reward_accuracy": float(np.mean(f[0] > f[1])), "reward_margin": float(np.mean(f[0] - f[1])),
            "chosen_reward": float(f[0].mean()), "rejected_reward": float(f[1].mean()),
            "chosen_logp": float(f[2].mean()), "rejected_logp": float(f[3].mean())}


def _row_logps(nll, targets):
    """Each row's summed answer log-probability and its labelled-token count, from the (R, T) NLL."""
    valid = ops.cast(targets != IGNORE_INDEX, ms.float32)
    return -(nll * valid).sum(1), valid.sum(1)


class PreferenceStep(TrainStep):
    """TrainStep (accumulation, all-reduce, fp16 loss scaling, clipping, AdamW) with a preference
    objective. Each micro batch is `preference_inputs(batch)`: input_ids, labels, attention_mask
    (R, T) and kto_labels (R,) float32. Before the gradient pass, the reference's log-probabilities
    of the same rows (dpo, kto) come from a compiled pass of their own: the model with its adapters
    switched off (LoRA; `reference_model` None) or `reference_model` (a frozen copy).

    `last_figures` holds the last step's (4, N) figures (see PreferenceLoss), `summarize` them."""

    def __init__(self, model: nn.Cell, optimizer: nn.Optimizer, max_grad_norm: float | None, loss_scaler,
                 objective: Objective, grad_reducer: nn.Cell | None = None, reference_model: nn.Cell | None = None):
        self.objective = objective
        self.pref_loss = PreferenceLoss(objective)
        self.token_nll = token_nll_cell(model)
        super().__init__(model, optimizer, max_grad_norm, loss_scaler, grad_reducer)
        self.reference_model = reference_model
        self._reference = reference_pass(model, reference_model, objective.name, rows=True)
        self._policy = ms.jit(self._policy_logps)
        self.last_figures: np.ndarray | None = None

    # The model is called inline in each of these methods (see core.engine.train_step.head_on_hidden).
    def _scaled_loss(self, input_ids, labels, attention_mask, ref_logps, kto_labels):
        targets = next_token_targets(labels)
        if self.on_hidden:
            nll = self.model(input_ids, attention_mask, None, None, targets)
        else:
            nll = self.token_nll(forward(self.model, input_ids, attention_mask), targets)
        logps, counts = _row_logps(nll, targets)
        loss, figures = self.pref_loss(logps, counts, ref_logps, kto_labels)
        scaled = self.loss_scaler.scale(loss) if self.loss_scaler is not None else loss
        return scaled, loss, figures

    def _policy_logps(self, input_ids, labels, attention_mask):
        targets = next_token_targets(labels)
        if self.on_hidden:
            nll = self.model(input_ids, attention_mask, None, None, targets)
        else:
            nll = self.token_nll(forward(self.model, input_ids, attention_mask), targets)
        return _row_logps(nll, targets)

    def reference_logps(self, input_ids: np.ndarray, labels: np.ndarray, attention_mask: np.ndarray) -> Tensor:
        """The reference's summed answer log-probability of each row (R,); zeros without a reference."""
        if not self.objective.needs_reference:
            return Tensor(np.zeros(input_ids.shape[0], np.float32))
        return self._reference(input_ids, labels, attention_mask)

    def evaluate(self, input_ids: np.ndarray, labels: np.ndarray, attention_mask: np.ndarray,
                 kto_labels: np.ndarray) -> tuple[float, np.ndarray]:
        """The objective's loss of one batch and its (4, N) figures, without a gradient."""
        ref = self.reference_logps(input_ids, labels, attention_mask)
        logps, counts = self._policy(Tensor(input_ids), Tensor(labels), Tensor(attention_mask))
        loss, figures = self.pref_loss(logps, counts, ref, Tensor(np.asarray(kto_labels, np.float32)))
        return float(loss.asnumpy()), figures.asnumpy()

    def loss_and_grads(self, input_ids, labels, attention_mask, kto_labels):
        """One micro batch's loss, its gradients (in `optimizer.parameters` order, unscaled, not
        clipped or reduced) and (4, N) figures, without an update (the parity tests, the bench)."""
        ref = self.reference_logps(input_ids, labels, attention_mask)
        loss, grads, aux = self._micro(Tensor(input_ids), Tensor(labels), Tensor(attention_mask), ref,
                                       Tensor(np.asarray(kto_labels, np.float32)))
        return float(loss.asnumpy()), [g.asnumpy() for g in grads], aux.asnumpy()

    def __call__(self, micro_batches):
        """Each micro batch: input_ids, labels, attention_mask (R, T), kto_labels (R,)."""
        inputs = [(Tensor(ids), Tensor(labels), Tensor(mask), self.reference_logps(ids, labels, mask),
                   Tensor(np.asarray(kto, np.float32))) for ids, labels, mask, kto in micro_batches]
        loss, norm, finite, scale, figures = self.step_with_figures(inputs)
        self.last_figures = np.concatenate(figures, axis=1)
        return loss, norm, finite, scale


def preference_inputs(batch: dict[str, np.ndarray]) -> tuple[np.ndarray, ...]:
    """A core.data.preference batch as PreferenceStep's micro-batch arguments."""
    return batch["input_ids"], batch["labels"], batch["attention_mask"], batch["kto_labels"]
