"""GRPO (Shao et al. 2024, DeepSeekMath) in the compiled train step, in the forms TRL 1.16's GRPOTrainer
computes: group-normalised advantages, the clipped importance ratio per token or per completion (GSPO,
Zheng et al. 2025), the four ways of averaging token losses (grpo, bnpo, dr_grpo, dapo), several updates
per batch of rollouts with the sampling policy's log-probabilities kept, truncated completions masked,
and a KL term to the reference. And the rollouts: G completions of each prompt sampled with a key/value
cache, on the inference kernel where the model allows.

A GRPO micro batch (`GrpoBatch`, made by `grpo_batch`) is R = prompts × G rows, prompt-major (a group is
never split): each row is its prompt, left-padded, then its completion, right-padded; the completion's
tokens carry labels, everything else -100, so `next_token_targets(labels)` gives the positions whose
next token is a completion token, exactly as preference rows. Per-token arrays (old and reference
log-probabilities) are (R, T) and aligned with those targets: column t holds the log-probability of
token t + 1. A completion keeps the EOS that ended it (it is trained on, as TRL does); a truncated one
(max_new_tokens reached without an EOS) has no EOS, and with `mask_truncated_completions` its tokens carry
no loss and are masked from attention, as TRL masks them.

The loss per token, with r = exp(log π − log π_old) per token, or per completion at the sequence level
(the masked mean of the token log-ratios, broadcast), and A the row's advantage:
    −min(r·A, clip(r, 1 − ε, 1 + ε_high)·A) + β·r·(exp(ref − log π) − (ref − log π) − 1)
(the KL term times r: TRL 1.16's use_bias_correction_kl, its default, `kl_bias_correction`; without it
the plain k3 estimator)
averaged as loss_type says: grpo, each completion's mean and then the mean over completions; bnpo, the
sum over the micro batch's tokens; dr_grpo, the sum over R × max_completion_length; dapo, the sum over
the step's tokens (every micro batch, every worker: `dapo_normalizer`; TrainStep's mean over micro
batches and workers makes it Σ token losses / Σ tokens, as TRL's num_items_in_batch does). With
num_iterations 1 the old policy is the current one, detached (r = 1); above 1 the rollouts' own
log-probabilities are computed once before the first update (`GrpoStep.prepare`) and kept. Log-probabilities
are those of the logits divided by the sampling temperature, as TRL scores its completions.

Figures (no gradient, per micro batch as sums, `summarize`): the KL's mean, the clip ratios (low, high,
region, as TRL logs them), and the entropy of each completion position's whole next-token distribution
(at the temperature): on the CPU's loss kernel a kernel of its own reads the logits once more
(core.engine.fused.FusedTokenEntropy), composed ops elsewhere; NaN where no logits exist (a 16-bit frozen
LM head computes its loss inside one kernel).

Rollouts with LoRA on the inference kernel: the kernel takes its weights as inputs of each call, so for
a rollout it is given a float32 copy of every adapted matrix with its adapter merged, W + s·B·A, made
from the adapter's current values when the rollout starts (`FusedInference.adapters_merged`) and dropped
when it ends. The trained Parameters are only read: merging into them and back would round W each step
(exact only while B = 0), so the base would drift. The copies cost the adapted matrices' float32 size
during the rollout. Models the kernel does not compute sample on the composed ops (adapter unmerged).
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np

import mindspore as ms
from mindspore import Tensor, nn, ops

from core.engine.fused import inference_problem
from core.engine.generate import SamplingSettings, generate, sample_next
from core.engine.lora import lora_modules
from core.engine.preference import LogProbPass, logits_nll, reference_pass
from core.engine.train_step import IGNORE_INDEX, TrainStep, head_on_hidden, next_token_targets
from core.spec.errors import MessageError
from core.spec.messages import Message

LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo")
LEVELS = ("token", "sequence")
SCALINGS = ("group", "batch", "none")
STD_EPSILON = 1e-4  # TRL's, in the advantages' denominator
FIGURES = ("kl_sum", "tokens", "clip_low", "clip_high", "clip_region", "clip_count", "entropy_sum")


class GrpoError(MessageError):
    """A GRPO setting or batch that cannot be used; the message says why."""


def _quoted(choices) -> str:
    return ", ".join(repr(choice) for choice in choices)


@dataclass(frozen=True)
class GrpoObjective:
    """GRPO's hyper-parameters (core.spec.config's grpo: section; the names are TRL's GRPOConfig's)."""
    epsilon: float = 0.2
    epsilon_high: float | None = None  # None: epsilon
    beta: float = 0.0
    loss_type: str = "dapo"
    importance_sampling_level: str = "token"
    num_iterations: int = 1
    max_completion_length: int = 64  # grpo.max_new_tokens: dr_grpo's constant
    temperature: float = 1.0
    mask_truncated_completions: bool = False
    # TRL 1.16's use_bias_correction_kl (its default): the KL term times the importance ratio r, so its
    # gradient is the unbiased reverse-KL gradient (DeepSeek-V3.2); r is differentiable, so this changes the
    # gradient on-policy too (r = 1 there)
    kl_bias_correction: bool = True

    def __post_init__(self):
        if self.loss_type not in LOSS_TYPES:
            raise GrpoError(Message("engine.grpo_loss_type", choices=_quoted(LOSS_TYPES), py_value=repr(self.loss_type)))
        if self.importance_sampling_level not in LEVELS:
            raise GrpoError(Message("engine.grpo_sampling_level", choices=_quoted(LEVELS),
                                    py_value=repr(self.importance_sampling_level)))

    @classmethod
    def from_config(cls, cfg) -> GrpoObjective:
        g = cfg.grpo
        return cls(g.epsilon, g.epsilon_high, g.beta, g.loss_type, g.importance_sampling_level, g.num_iterations,
                   g.max_new_tokens, g.temperature, g.mask_truncated_completions)

    @property
    def epsilon_upper(self) -> float:
        return self.epsilon if self.epsilon_high is None else self.epsilon_high


# ---- advantages ----------------------------------------------------------------------------------

def advantages(rewards, num_generations: int, scale_rewards: str = "group") -> tuple[np.ndarray, float]:
    """Each completion's advantage from the total rewards (N,) of N = prompts × G completions, prompt-major:
    the reward minus its group's mean, divided by the group's standard deviation (group), the batch's
    (batch) or not (none), plus 1e-4 in the denominator (the standard deviations with Bessel's correction,
    as TRL's nanstd). Returns (advantages (N,) float32, the share of groups whose rewards are all equal:
    their standard deviation 0, so they carry no gradient; TRL logs it per group too, except with batch
    scaling, where its figure is the batch's). Computed in float64. With data parallelism give it every
    worker's rewards (batch scaling needs them all; TRL gathers them too) and take each worker's rows."""
    if scale_rewards not in SCALINGS:
        raise GrpoError(Message("engine.grpo_scale_rewards", choices=_quoted(SCALINGS), py_value=repr(scale_rewards)))
    r = np.asarray(rewards, np.float64).reshape(-1)
    if num_generations < 2 or r.size == 0 or r.size % num_generations:
        raise GrpoError(Message("engine.grpo_group_size", count=r.size, generations=num_generations))
    groups = r.reshape(-1, num_generations)
    group_std = groups.std(1, ddof=1)
    centred = (groups - groups.mean(1, keepdims=True)).reshape(-1)
    if scale_rewards == "group":
        centred = centred / (np.repeat(group_std, num_generations) + STD_EPSILON)
    elif scale_rewards == "batch":
        centred = centred / (r.std(ddof=1) + STD_EPSILON)
    return centred.astype(np.float32), float(np.isclose(group_std, 0.0).mean())


# ---- batches -------------------------------------------------------------------------------------

@dataclass
class GrpoBatch:
    """One micro batch of R = prompts × G rows, prompt-major (see the module's docstring)."""
    input_ids: np.ndarray  # (R, T) int32: prompt left-padded to its width, then completion right-padded
    attention_mask: np.ndarray  # (R, T) int32: 1 on real tokens (0 on a masked truncated completion)
    labels: np.ndarray  # (R, T) int32: the completion's tokens where they stand, -100 elsewhere
    advantages: np.ndarray  # (R,) float32
    # dapo's denominator for this micro batch: the completion tokens of the whole step over (micro batches
    # × workers), `dapo_normalizer`; grpo_batch sets this batch's own tokens (one micro batch, one worker)
    normalizer: float
    old_logps: np.ndarray | None = None  # (R, T) float32, aligned with next_token_targets(labels); prepare()
    ref_logps: np.ndarray | None = None  # (R, T) float32 likewise (beta > 0)

    @property
    def rows(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def tokens(self) -> int:
        """Completion tokens that carry loss."""
        return int((self.labels != IGNORE_INDEX).sum())


def grpo_batch(prompt_ids: list[list[int]], completions: list[list[int]], truncated, advantages_, num_generations: int,
               pad_id: int, mask_truncated_completions: bool = False,
               widths: tuple[int, int] | None = None) -> GrpoBatch:
    """The micro batch of `prompt_ids` (P prompts) and their P × G `completions` (prompt-major, as `rollout`
    returns them; each completion keeps its EOS), `truncated` (P × G flags) and `advantages_` (P × G).
    `widths` = (prompt width, completion width) pads every batch to one shape (one compiled graph:
    grpo.max_prompt_len and grpo.max_new_tokens); default the batch's longest prompt and completion."""
    rows = len(prompt_ids) * num_generations
    if len(completions) != rows or len(truncated) != rows or len(advantages_) != rows:
        raise GrpoError(Message("engine.grpo_batch_rows", prompts=len(prompt_ids), generations=num_generations,
                                completions=len(completions), flags=len(truncated), advantages=len(advantages_)))
    if any(len(p) == 0 for p in prompt_ids) or any(len(c) == 0 for c in completions):
        raise GrpoError(Message("engine.grpo_empty_row"))
    longest_prompt, longest_completion = max(map(len, prompt_ids)), max(map(len, completions))
    prompt_width, completion_width = widths or (longest_prompt, longest_completion)
    if longest_prompt > prompt_width or longest_completion > completion_width:
        raise GrpoError(Message("engine.grpo_too_wide", prompt=longest_prompt, completion=longest_completion,
                                prompt_width=prompt_width, completion_width=completion_width))
    width = prompt_width + completion_width
    ids = np.full((rows, width), pad_id, np.int32)
    mask = np.zeros((rows, width), np.int32)
    labels = np.full((rows, width), IGNORE_INDEX, np.int32)
    for row, completion in enumerate(completions):
        prompt = prompt_ids[row // num_generations]
        ids[row, prompt_width - len(prompt):prompt_width] = prompt
        mask[row, prompt_width - len(prompt):prompt_width] = 1
        end = prompt_width + len(completion)
        ids[row, prompt_width:end] = completion
        if not (mask_truncated_completions and truncated[row]):
            mask[row, prompt_width:end] = 1
            labels[row, prompt_width:end] = completion
    batch = GrpoBatch(ids, mask, labels, np.asarray(advantages_, np.float32).reshape(rows), 1.0)
    batch.normalizer = float(max(batch.tokens, 1))
    return batch


def dapo_normalizer(step_tokens: int, micro_batches: int, world: int = 1) -> float:
    """dapo's `GrpoBatch.normalizer` for every micro batch of a step whose micro batches, on every worker,
    hold `step_tokens` completion tokens that carry loss: TrainStep averages the micro batches' gradients
    and the workers', so each micro batch's sum is divided by step_tokens / (micro_batches × world). As TRL
    1.16: num_items_in_batch (the generation batch's tokens, gathered) / processes × accumulation steps /
    steps per generation, with a generation batch of one step's micro batches."""
    return max(float(step_tokens), 1.0) / (micro_batches * world)


# ---- the loss ------------------------------------------------------------------------------------

class GrpoLoss(nn.Cell):
    """The objective's loss from the policy's per-token log-probabilities `logps` (R, T) of the next-token
    `targets` (R, T, below 0 ignored), the rows' `advantages` (R,), the old policy's `old_logps` and the
    reference's `ref_logps` (R, T) (each ignored where the objective has none), dapo's `normalizer` ()
    and each position's `entropy` (R, T) (no gradient). Returns the loss and a (7,) float32 block of
    figures, no gradient (FIGURES): the KL term's masked sum (r·k3 with the bias correction, as TRL logs
    it; NaN without a KL term), the loss-carrying tokens, the low, high and region clipped counts and what
    they count (tokens, or completions at the sequence level), the entropy's masked sum."""

    def __init__(self, objective: GrpoObjective):
        super().__init__()
        # plain Python values: constants of the compiled graph
        self.low, self.high = float(objective.epsilon), float(objective.epsilon_upper)
        self.beta, self.kl_correction = float(objective.beta), bool(objective.kl_bias_correction)
        self.loss_type = objective.loss_type
        self.sequence = objective.importance_sampling_level == "sequence"
        self.on_policy = objective.num_iterations == 1
        self.max_completion_length = float(objective.max_completion_length)
        self.nan = Tensor(float("nan"), ms.float32)

    def construct(self, logps, targets, advantages, old_logps, ref_logps, normalizer, entropy):
        mask = ops.cast(targets != IGNORE_INDEX, ms.float32)  # (R, T)
        row_tokens = mask.sum(-1, keepdims=True)  # (R, 1)
        tokens = mask.sum()
        old = ops.stop_gradient(logps) if self.on_policy else old_logps
        log_ratio = logps - old
        if self.sequence:  # GSPO: one ratio per completion, its tokens' mean log-ratio
            log_ratio = (log_ratio * mask).sum(-1, keepdims=True) / ops.maximum(row_tokens, 1.0)  # (R, 1)
        ratio = ops.exp(log_ratio)  # (R, T) or (R, 1)
        clipped = ops.clip_by_value(ratio, 1.0 - self.low, 1.0 + self.high)
        advantage = advantages.reshape(-1, 1)  # (R, 1)
        per_token = -ops.minimum(ratio * advantage, clipped * advantage)
        kl_sum = self.nan  # no KL term: no KL figure
        if self.beta > 0:
            delta = ref_logps - logps
            kl = ops.exp(delta) - delta - 1.0  # (R, T): k3, exp(ref - logp) - (ref - logp) - 1
            if self.kl_correction:
                kl = kl * ratio
            per_token = per_token + self.beta * kl
            kl_sum = (kl * mask).sum()
        masked = per_token * mask  # (R, T)
        if self.loss_type == "grpo":
            loss = (masked.sum(-1) / ops.maximum(row_tokens.reshape(-1), 1.0)).mean()
        elif self.loss_type == "bnpo":
            loss = masked.sum() / ops.maximum(tokens, 1.0)
        elif self.loss_type == "dr_grpo":
            loss = masked.sum() / (masked.shape[0] * self.max_completion_length)
        else:  # dapo
            loss = masked.sum() / normalizer
        low = ops.cast(ops.logical_and(ratio < 1.0 - self.low, advantage < 0), ms.float32)
        high = ops.cast(ops.logical_and(ratio > 1.0 + self.high, advantage > 0), ms.float32)
        region = ops.cast(ops.logical_or(low > 0, high > 0), ms.float32)
        if self.sequence:  # one value per completion, every completion counted (as TRL's global_masked_mean)
            counted = ops.ones_like(low)
            count = ops.cast(ops.size(low), ms.float32)
        else:
            counted, count = mask, tokens
        figures = ops.stack((kl_sum, tokens, (low * counted).sum(), (high * counted).sum(), (region * counted).sum(),
                             count, (entropy * mask).sum()))
        return loss, ops.stop_gradient(figures)


class TokenEntropy(nn.Cell):
    """Each position's entropy of softmax(logits) (R, T), 0 where the target is ignored, no gradient, of
    composed ops (the CPU's kernel: core.engine.fused.FusedTokenEntropy)."""

    def construct(self, logits, targets):
        valid = ops.cast(targets != IGNORE_INDEX, ms.float32)
        entropy = -(ops.softmax(logits, -1) * ops.log_softmax(logits, -1)).sum(-1)
        return ops.stop_gradient(entropy * valid)


def entropy_cell(model: nn.Cell, capped: bool):
    """The entropy op for the logits GRPO's loss reads: the kernel (capping them as the loss kernel does
    when the model hands them over uncapped) where core.engine.fused enabled it, else TokenEntropy."""
    factory = getattr(model, "token_entropy", None)
    if factory is None:
        return TokenEntropy()
    return factory() if capped else factory(softcap=model.final_softcap)


def summarize(figures) -> dict[str, float]:
    """Host figures of a step's (M, 7) blocks (one row per micro batch; with data parallelism, the workers'
    blocks summed first): each micro batch's KL mean, clip ratios and entropy mean, averaged over the
    micro batches as TRL averages its logged values. kl is NaN without a KL term (beta 0)."""
    f = np.atleast_2d(np.asarray(figures, np.float64))
    tokens, count = np.maximum(f[:, 1], 1.0), np.maximum(f[:, 5], 1.0)
    return {"kl": float(np.mean(f[:, 0] / tokens)), "clip_ratio/low_mean": float(np.mean(f[:, 2] / count)),
            "clip_ratio/high_mean": float(np.mean(f[:, 3] / count)),
            "clip_ratio/region_mean": float(np.mean(f[:, 4] / count)), "entropy": float(np.mean(f[:, 6] / tokens))}


def completion_figures(completions: list[list[int]], truncated) -> dict[str, float]:
    """Completion lengths (tokens, the EOS counted) and the share truncated at max_new_tokens."""
    lengths = np.asarray([len(c) for c in completions], np.float64)
    return {"completion_len": float(lengths.mean()), "completion_len_max": float(lengths.max()),
            "completion_len_min": float(lengths.min()), "truncated": float(np.mean(np.asarray(truncated, bool)))}


# ---- the step ------------------------------------------------------------------------------------

class GrpoStep(TrainStep):
    """TrainStep (accumulation, all-reduce, fp16 loss scaling, clipping, AdamW) with GRPO's loss. Each micro
    batch is a GrpoBatch. `prepare(batch)` fills in, once, what the batch needs besides the model's current
    log-probabilities: the old policy's (num_iterations > 1: call it before the first update of the batch's
    rollouts; the step calls it on a batch that lacks them, which is right only on that first update) and
    the reference's (beta > 0: the model with its adapters switched off (LoRA, `reference_model` None) or
    `reference_model`, a frozen copy), each a compiled pass of its own (core.engine.preference.LogProbPass).

    `last_figures` holds the last step's (M, 7) figures, one row per micro batch (`summarize`)."""

    def __init__(self, model: nn.Cell, optimizer: nn.Optimizer, max_grad_norm: float | None, loss_scaler,
                 objective: GrpoObjective, grad_reducer: nn.Cell | None = None, reference_model: nn.Cell | None = None):
        if head_on_hidden(model) and objective.temperature != 1.0:
            raise GrpoError(Message("engine.temperature_in_head", temperature=objective.temperature))
        self.objective = objective
        self.grpo_loss = GrpoLoss(objective)
        self.scale = 1.0 / float(objective.temperature)
        self.capped, self.token_nll = logits_nll(model, objective.temperature)
        self.entropy = entropy_cell(model, self.capped)
        self.nan = Tensor(float("nan"), ms.float32)
        super().__init__(model, optimizer, max_grad_norm, loss_scaler, grad_reducer)
        self.reference_model = reference_model
        self._old = LogProbPass(model, temperature=objective.temperature) if objective.num_iterations > 1 else None
        self._reference = (reference_pass(model, reference_model, "grpo", temperature=objective.temperature)
                           if objective.beta > 0 else None)
        self.last_figures: np.ndarray | None = None

    # The model is called inline (see core.engine.train_step.head_on_hidden).
    def _scaled_loss(self, input_ids, labels, attention_mask, advantages, old_logps, ref_logps, normalizer):
        # the head only on the positions whose next token may be a completion's (as TRL's logits_to_keep):
        # rows are the prompt left-padded then the completion, at most max_completion_length wide, so every
        # completion target is in the last max_completion_length + 1 columns (a constant of the graph)
        start = max(input_ids.shape[1] - self.objective.max_completion_length - 1, 0)
        targets = next_token_targets(labels)[:, start:]
        old_logps, ref_logps = old_logps[:, start:], ref_logps[:, start:]
        if self.on_hidden:
            nll = self.model(input_ids, attention_mask, None, None, targets, True, False, start)
            entropy = ops.stop_gradient(ops.zeros_like(nll)) + self.nan  # no logits: no entropy
        else:
            logits = self.model(input_ids, attention_mask, None, None, None, self.capped, False, start)
            if self.scale != 1.0:
                logits = logits * self.scale
            nll = self.token_nll(logits, targets)
            entropy = self.entropy(logits, targets)
        loss, figures = self.grpo_loss(-nll, targets, advantages, old_logps, ref_logps, normalizer, entropy)
        scaled = self.loss_scaler.scale(loss) if self.loss_scaler is not None else loss
        return scaled, loss, figures

    def old_logps(self, batch: GrpoBatch) -> np.ndarray:
        """The current model's per-token log-probabilities of the batch's completions (R, T), aligned with
        next_token_targets(labels), 0 elsewhere: the old policy's when taken before the first update."""
        if self._old is None:
            self._old = LogProbPass(self.model, temperature=self.objective.temperature)
        return self._old(batch.input_ids, batch.labels, batch.attention_mask).asnumpy()

    def reference_logps(self, batch: GrpoBatch) -> np.ndarray:
        """The reference's per-token log-probabilities (R, T), likewise; zeros without a KL term (beta 0)."""
        if self._reference is None:
            return np.zeros(batch.labels.shape, np.float32)
        return self._reference(batch.input_ids, batch.labels, batch.attention_mask).asnumpy()

    def prepare(self, batch: GrpoBatch) -> GrpoBatch:
        if self.objective.num_iterations > 1 and batch.old_logps is None:
            batch.old_logps = self.old_logps(batch)
        if self.objective.beta > 0 and batch.ref_logps is None:
            batch.ref_logps = self.reference_logps(batch)
        return batch

    def _inputs(self, batch: GrpoBatch) -> tuple[Tensor, ...]:
        self.prepare(batch)
        zeros = np.zeros(batch.labels.shape, np.float32)
        return (Tensor(batch.input_ids), Tensor(batch.labels), Tensor(batch.attention_mask),
                Tensor(np.asarray(batch.advantages, np.float32)),
                Tensor(zeros if batch.old_logps is None else np.asarray(batch.old_logps, np.float32)),
                Tensor(zeros if batch.ref_logps is None else np.asarray(batch.ref_logps, np.float32)),
                Tensor(np.float32(batch.normalizer)))

    def loss_and_grads(self, batch: GrpoBatch):
        """One micro batch's loss, its gradients (in `optimizer.parameters` order, unscaled, not clipped or
        reduced) and (7,) figures, without an update (the parity tests, the bench)."""
        loss, grads, figures = self._micro(*self._inputs(batch))
        return float(loss.asnumpy()), [g.asnumpy() for g in grads], figures.asnumpy()

    def __call__(self, micro_batches: list[GrpoBatch]):
        """One optimizer step over the micro batches (one prompt group or more each); returns the mean of
        their losses, the gradient norm, whether the step was applied and the loss scale."""
        loss, norm, finite, scale, figures = self.step_with_figures([self._inputs(batch) for batch in micro_batches])
        self.last_figures = np.stack(figures)
        return loss, norm, finite, scale


# ---- rollouts ------------------------------------------------------------------------------------

def _merges_adapters(model) -> bool:
    """Whether a rollout should hand the inference kernel merged copies of the adapters: the model has
    unmerged LoRA layers and the kernel computes it once they are merged."""
    kernel = getattr(model, "inference_kernel", None)
    if kernel is None or not any(not getattr(cell, "merged", False) for cell in lora_modules(model).values()):
        return False
    return inference_problem(model, lora_in_kernel=True) is None


def rollout(model, prompt_ids: list[list[int]], num_generations: int, settings: SamplingSettings, eos_ids, pad_id: int,
            rng: np.random.Generator) -> tuple[list[list[int]], list[bool]]:
    """`num_generations` completions of each prompt (token ids), sampled with `settings` (temperature,
    top_k, top_p, max_new_tokens; temperature 0: greedy) from `rng`, whose state (`rng.bit_generator.state`)
    is all a resumed run needs to draw them again. Returns the completions, prompt-major (prompt i's are
    rows i·G .. i·G + G − 1), each ending with the EOS that ended it (kept: it is trained on), and which
    were truncated (no EOS within max_new_tokens). Each prompt's prefill runs once and its G rows decode
    together with a key/value cache: on the inference kernel where core.engine.fused.inference_problem
    allows, a LoRA model's adapters merged into the kernel's own weight copies (see the module's
    docstring), else on the composed ops. The model is in inference mode while it samples."""
    eos = frozenset(int(token) for token in eos_ids)

    def ended(tokens: list[int]) -> bool:
        return tokens[-1] in eos

    training = model.training
    model.set_train(False)
    merged = model.inference_kernel.adapters_merged(model) if _merges_adapters(model) else contextlib.nullcontext()
    try:
        with merged:
            completions = generate(model, prompt_ids, settings, frozenset(), pad_id, stop=ended if eos else None,
                                   rng=rng, copies=num_generations, sampler=rollout_sampler(model))
    finally:
        model.set_train(training)
    return completions, [not (completion and completion[-1] in eos) for completion in completions]


def rollout_sampler(model):
    """The rollouts' sampler: sample_next (temperature, top-k, top-p; one uniform draw per row), whose
    whole-vocabulary case (top_k 0, top_p 1: GRPO's default) runs on the inference kernel's sampler where the
    model has one (FusedInference.sample: the same distribution and draws, other rounding)."""
    kernel = getattr(model, "inference_kernel", None)

    def sampler(logits: np.ndarray, settings: SamplingSettings, rng) -> np.ndarray:
        if kernel is None or settings.temperature == 0 or settings.top_k or settings.top_p < 1:
            return sample_next(logits, settings, rng)
        return kernel.sample(logits, settings.temperature, rng.random(len(logits)))
    return sampler


def sampling_settings(cfg, evaluation: bool = False) -> SamplingSettings:
    """The rollouts' sampling settings from the grpo: section (`evaluation`: the validation completions,
    at grpo.eval_temperature)."""
    g = cfg.grpo
    temperature = g.eval_temperature if evaluation else g.temperature
    return SamplingSettings(max_new_tokens=g.max_new_tokens, temperature=temperature, top_p=g.top_p, top_k=g.top_k)

