"""The compiled pieces of training: causal-LM loss, learning-rate schedule, AdamW parameter groups,
the train step (loss scaling, gradient all-reduce, clipping, accumulation) and the evaluation step.

Everything here is a MindSpore graph or a thin Python wrapper around one; the loop that drives it
(logging, evaluation cadence, early stopping, checkpoints) lives in `core.train`.
"""
from __future__ import annotations

import math

import numpy as np

import mindspore as ms
from mindspore import Parameter, Tensor, amp, nn, ops
from mindspore.nn.learning_rate_schedule import LearningRateSchedule

import core.engine.devices as devices
from core.spec.device_paths import matmul_reductions
from core.engine.ops import full
from core.engine.moe import LoadBalancingLoss

IGNORE_INDEX = -100
_CONCAT_TIME = ops.Concat(1)  # a primitive: functional ops fail to compile inside a jit bprop (MindSpore 2.10)


def next_token_targets(labels):
    """labels (B, T) aligned with the inputs -> the label each position predicts: labels shifted
    left by one, the last position ignored. Shifting the labels (int32) rather than slicing the
    logits keeps the (B, T, vocab) tensor whole: no copy of it forward, no scatter back."""
    ignore = labels[:, :1] * 0 + IGNORE_INDEX  # (B, 1); built from labels: ops.full fails in a jit bprop
    return _CONCAT_TIME((labels[:, 1:], ignore))


def causal_lm_loss_sum(logits, labels):
    """Summed next-token NLL and the number of labelled tokens.
    logits (B, T, V) float32; labels (B, T) int32 aligned with the inputs (-100 = not trained)."""
    targets = next_token_targets(labels)  # (B, T)
    valid = targets != IGNORE_INDEX
    safe = ops.maximum(targets, 0)  # any index where ignored (IGNORE_INDEX < 0); masked out below
    log_probs = ops.log_softmax(logits, -1)
    picked = ops.gather_elements(log_probs, -1, ops.expand_dims(safe, -1)).squeeze(-1)  # (B, T)
    valid_f = ops.cast(valid, ms.float32)
    return -(picked * valid_f).sum(), valid_f.sum()


class FusedCausalLMLoss(nn.Cell):
    """`causal_lm_loss_sum` through the CPU cross-entropy kernel (core.engine.fused): one pass
    over the logits forward and one backward, nothing of their size kept in between."""

    def __init__(self, kernel):
        super().__init__()
        self.kernel = kernel

    def construct(self, logits, labels):
        targets = next_token_targets(labels)
        nll, _ = self.kernel(logits, targets)
        return nll.sum(), ops.cast(targets != IGNORE_INDEX, ms.float32).sum()


def loss_cell(model: nn.Cell) -> nn.Cell:
    """The causal-LM loss for `model`: the fused kernel when core.engine.fused enabled it."""
    kernel = getattr(model, "fused_loss", None)
    return FusedCausalLMLoss(kernel) if kernel is not None else CausalLMLoss()


def head_on_hidden(model: nn.Cell) -> bool:
    """Whether the model runs its LM head and the loss in one kernel (`CausalLM.head_loss`, a frozen
    16-bit head): then it is called with the targets and returns each position's NLL, and no
    (B, T, vocab) logits exist. TrainStep and EvalStep write that branch inline: with the layers
    sharing one graph (core.engine.model.share_layer_graphs), calling the model from a helper function or
    method of theirs fails to compile in MindSpore 2.10 (parameter_eliminate.h, AdjustCallerArgs)."""
    return getattr(model, "head_loss", None) is not None


def valid_count(targets):
    return ops.cast(targets != IGNORE_INDEX, ms.float32).sum()


class CausalLMLoss(nn.Cell):
    """`causal_lm_loss_sum` with its gradient written out: d(sum NLL)/d logits = (softmax − onehot)
    on labelled positions. MindSpore's automatic one goes through LogSoftmaxGrad and a scatter of
    the picked log-probabilities over the whole (B, T, vocab) tensor, which cost ~5× more on the
    CPU (profiled on a 25M model). The token count has no gradient."""

    def __init__(self):
        super().__init__()
        self.one_hot = ops.OneHot()
        self.on, self.off = Tensor(1.0, ms.float32), Tensor(0.0, ms.float32)
        self.softmax, self.cast = ops.Softmax(-1), ops.Cast()
        self.not_equal, self.maximum, self.expand_dims = ops.NotEqual(), ops.Maximum(), ops.ExpandDims()
        self.zeros_like = ops.ZerosLike()

    def construct(self, logits, labels):
        return causal_lm_loss_sum(logits, labels)

    def bprop(self, logits, labels, out, dout):
        # primitives only: functional ops (ops.softmax, ops.full, ...) inside a bprop fail to
        # compile under jit in MindSpore 2.10 ("func graph is empty")
        targets = next_token_targets(labels)
        valid = self.cast(self.not_equal(targets, IGNORE_INDEX), logits.dtype)  # (B, T)
        onehot = self.one_hot(self.maximum(targets, 0), logits.shape[-1], self.on, self.off)  # (B, T, V)
        weight = self.expand_dims(valid, -1) * dout[0]  # (B, T, 1)
        # weight made full-size first: a broadcasting Mul keeps 16 bytes per element on the CPU
        return (self.softmax(logits) - onehot) * full(weight, logits.shape), self.zeros_like(labels)


BATCH_INPUTS = ("input_ids", "labels", "attention_mask")
PACKED_INPUTS = ("position_ids", "segment_ids")  # present when core.data.pipeline packed the batch


def step_inputs(batch: dict[str, np.ndarray]) -> tuple[np.ndarray, ...]:
    """A core.data.pipeline batch as the train/eval step's arguments: input_ids, labels, attention_mask,
    and for packed rows position_ids and segment_ids."""
    names = BATCH_INPUTS + (PACKED_INPUTS if "segment_ids" in batch else ())
    return tuple(batch[name] for name in names)


def forward(model: nn.Cell, input_ids, attention_mask, position_ids=None, segment_ids=None):
    """Logits of a batch; packed rows pass their restarted positions and segment ids, so
    attention stays within each sample. When the loss kernel soft-caps the logits itself
    (`cap_in_loss`, Gemma 2) the model hands them over uncapped."""
    capped = not getattr(model, "cap_in_loss", False)
    if position_ids is None:
        return model(input_ids, attention_mask, None, None, None, capped)
    return model(input_ids, attention_mask, position_ids, segment_ids, None, capped)


class WarmupDecaySchedule(LearningRateSchedule):
    """Linear warmup to `peak_lr`, then cosine or linear decay to `peak_lr·min_lr_ratio` at
    `total_steps` (constant: stays at peak). Driven by the optimizer's own step counter, so a
    restored optimizer resumes the schedule exactly."""

    def __init__(self, peak_lr: float, warmup_steps: int, total_steps: int, kind: str, min_lr_ratio: float):
        super().__init__()
        self.peak_lr = float(peak_lr)
        self.warmup = float(max(warmup_steps, 0))
        self.decay_steps = float(max(total_steps - warmup_steps, 1))
        self.kind = kind
        self.min_lr = float(peak_lr * min_lr_ratio)

    def construct(self, global_step):
        step = ops.cast(global_step, ms.float32)
        warm = self.peak_lr * (step + 1.0) / (self.warmup + 1.0)
        progress = ops.clip_by_value((step - self.warmup) / self.decay_steps, 0.0, 1.0)
        if self.kind == "cosine":
            decayed = self.min_lr + (self.peak_lr - self.min_lr) * 0.5 * (1.0 + ops.cos(math.pi * progress))
        elif self.kind == "linear":
            decayed = self.peak_lr - (self.peak_lr - self.min_lr) * progress
        else:
            decayed = self.peak_lr * ops.ones_like(progress)
        return ops.select(step < self.warmup, warm, decayed)


def lr_at(schedule: WarmupDecaySchedule, step: int) -> float:
    return float(schedule(Tensor(step, ms.int32)).asnumpy())


def adamw(params: list[Parameter], schedule: LearningRateSchedule, weight_decay: float) -> nn.Optimizer:
    """Adam with bias correction (MindSpore's `nn.Adam`); the decoupled weight decay of AdamW is
    applied by `TrainStep` to matrices only (not norms or biases).

    Not `nn.AdamWeightDecay`: it has no bias correction, so its first updates are many times the
    learning rate; on a LoRA fine-tune it stalled where PyTorch's AdamW converged (measured)."""
    optimizer = nn.Adam(params, learning_rate=schedule, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0)
    optimizer.decoupled_weight_decay = float(weight_decay)
    return optimizer


def optimizer_state(optimizer: nn.Optimizer) -> dict[str, Parameter]:
    """The optimizer's own state (moments, beta powers, step counter) by name, for checkpoints."""
    trained = {p.name for p in optimizer.parameters}
    return {p.name: p for p in optimizer.get_parameters() if p.name not in trained and p.name != "learning_rate"}


_DOT = ops.MatMul()
_ADD_N = ops.AddN()
# Every operation over the gradient or parameter tuple goes through HyperMap. A Python generator,
# `sum` or loop over the tuple inside a jit function is unrolled by the graph compiler at a cost
# that grows with the tuple (measured, 84 LoRA gradients of the 25M model: global norm 6.3 s of
# compile with `sum(... for g in grads)`, 0.5 s with HyperMap + AddN; norm, clip and Adam 15.1 s
# -> 1.8 s). Same arithmetic, one element at a time.
_MAP = ops.HyperMap()


def _squared_norm(grad):
    flat = ops.cast(grad, ms.float32).reshape(1, -1)  # (1, n)
    return _DOT(flat, flat.reshape(-1, 1))


def _scaled(factor, tensor):
    return tensor * ops.cast(factor, tensor.dtype)


def _divided(divisor, tensor):
    return tensor / divisor


def _added(a, b):
    return a + b


def _decayed(factor, param):
    return ops.assign(param, param * ops.cast(factor, param.dtype))


def _squared_sum(grad):
    return ops.square(ops.cast(grad, ms.float32)).sum().reshape(1, 1)


def global_norm(grads, by_matmul: bool = True):
    """sqrt(Σ g²) over every gradient. On the CPU each squared norm is a (1, n)·(n, 1) MatMul: it
    ran ~3× faster than Square + ReduceSum (measured on a 1536×512 gradient). On devices
    (`by_matmul` False, core.spec.device_paths.matmul_reductions) Square + ReduceSum: Ascend's default
    precision mode may run that float32 MatMul in float16, and a sum of squares overflows there."""
    if by_matmul:
        return ops.sqrt(_ADD_N(_MAP(_squared_norm, grads))).reshape(())
    return ops.sqrt(_ADD_N(_MAP(_squared_sum, grads))).reshape(())


class TrainStep:
    """One optimizer step: forward/backward over `accum` micro batches, all-reduce (data parallel),
    unscale (fp16), clip, skip on overflow, AdamW update. Returns host floats: mean loss, grad norm,
    whether the step was applied, and the loss scale used.

    With `router_aux_loss_coef` > 0 (a mixture of experts, `moe` its core.spec.moe_args.MoeArgs, the
    model built with `output_router_logits`) the step minimises loss + coef · the router's
    load-balancing loss (as transformers with output_router_logits); the loss returned stays the
    language-model loss, the balancing loss is `last_aux_loss`."""

    def __init__(self, model: nn.Cell, optimizer: nn.Optimizer,
                 max_grad_norm: float | None, loss_scaler: amp.LossScaler | None,
                 grad_reducer: nn.Cell | None = None, router_aux_loss_coef: float = 0.0, moe=None):
        self.model = model
        self.aux_coef = float(router_aux_loss_coef)
        self.balance = LoadBalancingLoss(moe.num_experts, moe.top_k) if self.aux_coef > 0 else None
        self.last_aux_loss: float | None = None  # the last step's balancing loss (mean of its micro batches)
        # Gradients must come in the optimizer's parameter order (groups reorder them).
        params = list(optimizer.parameters)
        self.optimizer = optimizer
        self.schedule = optimizer.learning_rate
        self.weight_decay = getattr(optimizer, "decoupled_weight_decay", 0.0)
        self.decayed = tuple(p for p in params if len(p.shape) >= 2)  # matrices: AdamW's decay
        self.max_grad_norm = float(max_grad_norm) if max_grad_norm else 0.0
        self.loss_scaler = loss_scaler
        self.grad_reducer = grad_reducer
        # data parallel with loss scaling: every rank skips or takes a step together (core.engine.devices)
        self.flag_reducer = (devices.overflow_reducer(2) if grad_reducer is not None and loss_scaler is not None
                             else None)
        self.norm_by_matmul = matmul_reductions(devices.target())
        self.loss = loss_cell(model)
        self.on_hidden = head_on_hidden(model)
        self._grad_fn = ms.value_and_grad(self._scaled_loss, None, weights=params, has_aux=True)
        self._single = ms.jit(self._single_step)
        self._micro = ms.jit(self._micro_step)
        self._add = ms.jit(self._add_grads)
        self._apply = ms.jit(self._apply_step)

    def _scaled_loss(self, input_ids, labels, attention_mask, position_ids=None, segment_ids=None):
        if self.on_hidden:  # (inline: see head_on_hidden)
            targets = next_token_targets(labels)
            out = self.model(input_ids, attention_mask, position_ids, segment_ids, targets)
            tokens = valid_count(targets)
        else:
            out = forward(self.model, input_ids, attention_mask, position_ids, segment_ids)
        if self.balance is None:
            out, aux = out, ops.zeros((), ms.float32)
        else:  # the model returns its router logits too (CausalLM.output_router_logits)
            out, router_logits = out
            aux = self.balance(router_logits, ops.cast(attention_mask, ms.float32))
        if self.on_hidden:
            nll_sum = out.sum()
        else:
            nll_sum, tokens = self.loss(out, labels)
        loss = nll_sum / ops.maximum(tokens, 1.0)  # per real (labelled) token, packed or not
        total = loss + self.aux_coef * aux if self.balance is not None else loss
        scaled = self.loss_scaler.scale(total) if self.loss_scaler is not None else total
        return scaled, loss, aux

    def _micro_step(self, *inputs):
        (_, loss, aux), grads = self._grad_fn(*inputs)
        return loss, grads, aux

    @staticmethod
    def _add_grads(acc, grads):
        return _MAP(_added, acc, grads)

    def _apply_step(self, grads, accum: int):
        grads = _MAP(ops.partial(_divided, accum), grads) if accum > 1 else grads
        if self.grad_reducer is not None:
            grads = self.grad_reducer(grads)
        if self.loss_scaler is not None:
            grads = self.loss_scaler.unscale(grads)
        norm = global_norm(grads, self.norm_by_matmul)
        # fp16: every gradient checked (an overflow is expected and skipped); fp32: an inf or NaN
        # in any gradient makes the norm non-finite, so the norm alone decides (one pass over all
        # gradients fewer per step; a finite gradient whose squares overflow float32 also counts).
        finite = amp.all_finite(grads) if self.loss_scaler is not None else ops.isfinite(norm)
        if self.flag_reducer is not None:  # all_finite may read this device's status only (Ascend 910A)
            finite = self.flag_reducer(finite)
        if self.max_grad_norm > 0:
            factor = ops.minimum(self.max_grad_norm / (norm + 1e-6), 1.0)
            grads = _MAP(ops.partial(_scaled, factor), grads)
        if finite:
            if self.weight_decay > 0 and self.decayed:
                self._decay_weights()
            self.optimizer(grads)
        if self.loss_scaler is not None:
            self.loss_scaler.adjust(finite)
        return norm, finite

    def _decay_weights(self):
        """AdamW's decoupled decay, p <- p·(1 - lr·wd), before the Adam update (as PyTorch does)."""
        factor = 1.0 - self.schedule(self.optimizer.global_step) * self.weight_decay
        _MAP(ops.partial(_decayed, factor), self.decayed)

    def _single_step(self, *inputs):
        """The common case (no accumulation) as one graph: no gradient tuple crosses to the host."""
        loss, grads, aux = self._micro_step(*inputs)
        norm, finite = self._apply_step(grads, 1)
        return loss, aux, norm, finite

    def __call__(self, micro_batches: list[tuple[np.ndarray, ...]]):
        """Each micro batch is `step_inputs(batch)`: input_ids, labels, attention_mask (B, T), and
        for packed rows position_ids and segment_ids."""
        scale = float(self.loss_scaler.scale_value.asnumpy()) if self.loss_scaler is not None else 1.0
        if len(micro_batches) == 1:
            loss, aux, norm, finite = self._single(*(Tensor(a) for a in micro_batches[0]))
            self.last_aux_loss = float(aux.asnumpy()) if self.balance is not None else None
            return float(loss.asnumpy()), float(norm.asnumpy()), bool(finite.asnumpy()), scale
        grads, losses, auxes = None, [], []
        for arrays in micro_batches:
            loss, g, aux = self._micro(*(Tensor(a) for a in arrays))
            grads = g if grads is None else self._add(ms.mutable(grads), ms.mutable(g))
            losses.append(loss)
            auxes.append(aux)
        norm, finite = self._apply(ms.mutable(grads), len(micro_batches))
        mean_loss = float(np.mean([float(l.asnumpy()) for l in losses]))
        self.last_aux_loss = float(np.mean([float(a.asnumpy()) for a in auxes])) if self.balance is not None else None
        return mean_loss, float(norm.asnumpy()), bool(finite.asnumpy()), scale


    def step_with_figures(self, micro_inputs: list[tuple[Tensor, ...]]):
        """One optimizer step over micro batches given as the step's Tensor inputs, for an objective's
        step whose loss returns per-example figures as its third output (core.engine.preference,
        core.engine.grpo): returns the mean loss, the gradient norm, whether the step was applied, the
        loss scale and each micro batch's figures (numpy)."""
        scale = float(self.loss_scaler.scale_value.asnumpy()) if self.loss_scaler is not None else 1.0
        losses, figures, grads = [], [], None
        single = len(micro_inputs) == 1
        for inputs in micro_inputs:
            if single:
                loss, aux, norm, finite = self._single(*inputs)
            else:
                loss, g, aux = self._micro(*inputs)
                grads = g if grads is None else self._add(ms.mutable(grads), ms.mutable(g))
            losses.append(float(loss.asnumpy()))
            figures.append(aux.asnumpy())
        if not single:
            norm, finite = self._apply(ms.mutable(grads), len(micro_inputs))
        return float(np.mean(losses)), float(norm.asnumpy()), bool(finite.asnumpy()), scale, figures


class EvalStep:
    """Summed NLL and labelled-token count of a batch, compiled once per batch shape."""

    def __init__(self, model: nn.Cell):
        self.model = model
        self.loss = loss_cell(model)
        self.on_hidden = head_on_hidden(model)
        self._fn = ms.jit(self._nll)

    def _nll(self, input_ids, labels, attention_mask, position_ids=None, segment_ids=None):
        if self.on_hidden:  # (inline: see head_on_hidden)
            targets = next_token_targets(labels)
            nll = self.model(input_ids, attention_mask, position_ids, segment_ids, targets)
            if isinstance(nll, tuple):  # (nll, router logits): a model set up for the balancing loss
                nll = nll[0]
            return nll.sum(), valid_count(targets)
        logits = forward(self.model, input_ids, attention_mask, position_ids, segment_ids)
        if isinstance(logits, tuple):  # (logits, router logits): a model set up for the balancing loss
            logits = logits[0]
        return self.loss(logits, labels)

    def __call__(self, input_ids: np.ndarray, labels: np.ndarray, attention_mask: np.ndarray,
                 *packed: np.ndarray) -> tuple[float, float]:
        """Summed NLL and labelled tokens; `packed` is (position_ids, segment_ids) of packed rows."""
        nll, tokens = self._fn(Tensor(input_ids), Tensor(labels), Tensor(attention_mask), *(Tensor(a) for a in packed))
        return float(nll.asnumpy()), float(tokens.asnumpy())
