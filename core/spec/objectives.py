"""What a run minimises, described without MindSpore: one `ObjectiveSpec` per `train.objective`.

The console, the config checks and the memory estimate ask the run's objective instead of testing its
name: which data it reads, which validation figures it logs and which of them early stopping may
watch (and in which direction), the figure that heads the Monitor and the Runs table, the charts
that apply, which runs' losses may share an axis, the config rules and the memory terms. The engine
side of each objective (its batches, its step, its evaluation) is `core.engine.objectives`; its
registry maps the same names to those modules. A new objective is one spec here and one module there.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from core.spec.messages import Message

# validation figures whose larger value is better; every other watched figure is a loss (lower is better)
HIGHER_IS_BETTER = frozenset({"exact_match", "bleu", "rouge1", "rouge2", "rougeL", "reward_accuracy", "val_reward"})
_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}  # core.spec.memory.DTYPE_BYTES (which imports this)
GENERATION_MONITORS = ("exact_match", "bleu", "rouge1", "rouge2", "rougeL")
OBJECTIVE_SECTIONS = ("preference.", "grpo.")  # config sections only some objectives read (ObjectiveSpec.settings)


@dataclass(frozen=True)
class Rule:
    """A config problem an objective finds: the field, its value and why (core.spec.config makes a Problem)."""
    key: str
    value: Any
    message: Message


@dataclass(frozen=True)
class MemoryTerms:
    """What an objective adds to the memory estimate: weight bytes of a second model (a frozen
    reference), the factor on one micro batch's activations (rows per example), and bytes of
    anything else it holds (the rollouts' key/value cache), with the notes that say so."""
    extra_weight_bytes: float = 0.0
    activation_rows: float = 1.0
    extra_bytes: float = 0.0
    notes: tuple = ()
    merged_adapter_copies: bool = False  # rollouts hold a float32 copy of every adapted matrix (LoRA)
    logits_positions: int = 0  # positions per row whose logits the step makes (0: every position)


@dataclass(frozen=True)
class ObjectiveSpec:
    name: str
    kind: str                   # sft | preference | rl | reward: which losses are comparable
    data: str                   # supervised | pairs | kto | prompts: what a record must hold
    monitors: tuple[str, ...]   # validation figures early stopping may watch
    default_monitor: str
    headline: str               # the figure that judges a run (Monitor status, Runs table)
    eval_fields: tuple[str, ...]  # the figures its evaluation records carry (besides val_loss)
    charts: tuple[str, ...]     # the Monitor's charts that apply
    compare: tuple[str, ...]    # the final figures the Runs tab compares between runs of this kind
    has_perplexity: bool = False
    rewards: bool = False       # scores completions with reward functions (grpo.rewards)
    settings: tuple[str, ...] = ()  # the objective-owned config keys it reads ('grpo.': a whole section)
    uses_reference: Callable[[Any], str | None] = field(default=lambda config: None)
    rules: Callable[[Any], list[Rule]] = field(default=lambda config: [])
    memory: Callable[[Any, Any], MemoryTerms] = field(default=lambda config, args: MemoryTerms())

    def higher_is_better(self, monitor: str) -> bool:
        return monitor in HIGHER_IS_BETTER

    def reads(self, key: str) -> bool:
        """Whether a config key applies to this objective: every key outside the objective-owned
        sections (OBJECTIVE_SECTIONS) does; inside them, those in `settings` (a key, or a prefix
        ending with '.')."""
        if not key.startswith(OBJECTIVE_SECTIONS):
            return True
        return any(key == s or (s.endswith(".") and key.startswith(s)) for s in self.settings)

    def comparable(self, other: ObjectiveSpec) -> bool:
        """Whether two runs' losses mean the same thing (may share an axis, have a Δ)."""
        return self.kind == other.kind and (self.kind != "preference" or self.name == other.name)


# ---- rules and memory terms --------------------------------------------------------------------

def _monitor_rule(config, spec: ObjectiveSpec) -> list[Rule]:
    monitor = config.early_stopping.monitor
    if monitor in spec.monitors:
        return []
    if monitor == "reward_accuracy":
        return [Rule("early_stopping.monitor", monitor, Message("config.reward_accuracy_sft"))]
    if monitor in ("val_ppl", "val_ppl_ema"):
        return [Rule("early_stopping.monitor", monitor, Message("config.no_ppl_to_watch", objective=spec.name))]
    return [Rule("early_stopping.monitor", monitor, Message(
        "config.monitor_not_for_objective", monitor=monitor, objective=spec.name, monitors=", ".join(spec.monitors)))]


def _whole_answer_rules(config, spec: ObjectiveSpec) -> list[Rule]:
    """Objectives that score whole answers: no packing, no MoE balancing loss."""
    rules = []
    if config.data.packing:
        rules.append(Rule("data.packing", True, Message("config.packing_preference", objective=spec.name)))
    if config.train.router_aux_loss:
        rules.append(Rule("train.router_aux_loss", True, Message("config.router_loss_preference",
                                                                 objective=spec.name)))
    return rules


def reference_kind(config) -> str | None:
    """How a run's reference log-probabilities are computed: adapter_off, frozen_copy, or None (the
    objective needs no reference). dpo and kto always use one; grpo only with grpo.beta > 0."""
    objective = config.train.objective
    if objective in ("dpo", "kto"):
        chosen = config.preference.reference
    elif objective == "grpo" and config.grpo.beta > 0:
        chosen = "auto"
    else:
        return None
    if chosen != "auto":
        return chosen
    return "adapter_off" if config.method == "lora" else "frozen_copy"


def _reference_memory(config, args, notes: list) -> float:
    kind = reference_kind(config)
    objective = config.train.objective
    if kind == "frozen_copy":
        notes.append(Message("memory.frozen_reference", objective=objective, dtype=config.model.dtype))
        return args.num_parameters() * _DTYPE_BYTES[config.model.dtype]
    if kind == "adapter_off":
        notes.append(Message("memory.adapter_off", objective=objective))
    return 0.0


def _sft_rules(config) -> list[Rule]:
    return _monitor_rule(config, SFT)


def _preference_rules(config) -> list[Rule]:
    spec = OBJECTIVES[config.train.objective]
    rules = _monitor_rule(config, spec) + _whole_answer_rules(config, spec)
    if config.train.objective in ("dpo", "kto") and config.preference.reference == "adapter_off" \
            and config.method != "lora":
        rules.append(Rule("preference.reference", "adapter_off", Message("config.adapter_off_full")))
    return rules


def _preference_memory(config, args) -> MemoryTerms:
    notes: list = []
    rows = 1.0 if config.train.objective == "kto" else 2.0
    if rows > 1:
        notes.append(Message("memory.pairs", objective=config.train.objective))
    return MemoryTerms(_reference_memory(config, args, notes), rows, 0.0, tuple(notes))


def _grpo_rules(config) -> list[Rule]:
    rules = _monitor_rule(config, GRPO) + _whole_answer_rules(config, GRPO)
    g = config.grpo
    if g.epsilon_high is not None and g.epsilon_high < g.epsilon:
        rules.append(Rule("grpo.epsilon_high", g.epsilon_high,
                          Message("config.grpo_epsilon_high", high=g.epsilon_high, low=g.epsilon)))
    if g.temperature != 1.0 and config.frozen_weights_16bit:
        rules.append(Rule("grpo.temperature", g.temperature, Message("config.grpo_temperature_16bit",
                                                                      dtype=config.model.dtype)))
    if g.max_prompt_len + g.max_new_tokens > config.data.max_seq_len:
        rules.append(Rule("grpo.max_new_tokens", g.max_new_tokens, Message(
            "config.grpo_too_long", prompt=g.max_prompt_len, new=g.max_new_tokens, total=config.data.max_seq_len)))
    return rules


def grpo_rows(config) -> int:
    """Completions one micro batch trains on: prompts per micro batch × completions per prompt."""
    return config.train.micro_batch_size * config.grpo.num_generations


# The memory one rollout call may hold besides the weights (the key/value cache, the prefill's buffers, the
# sampler's logits): a GRPO step samples all of its prompts on this worker (train.micro_batch_size x
# grad_accum_steps) in one generate call, in several only when they would need more than this. One call per
# step is the point (each decoding step reads every weight once, for all the rows at once: at 0.5B, 32 rows
# in one call took 40 s where 4 calls of 8 took 64 s); 1 GiB holds 16 prompts x 4 completions of the
# Qwen2.5-0.5B shape at 192 + 64 tokens (62 MB a prompt), one of a 7B model at 1,024 + 256 (0.9 GiB).
ROLLOUT_BUDGET_MB = 1024
SAMPLER_BYTES_PER_LOGIT = 40  # the logits (float32, twice: the kernel's output and numpy's) and the sampler's float64 rows


def rollout_bytes(config, args, prompts: int) -> float:
    """Bytes a rollout call of `prompts` prompts holds besides the weights (core.engine.grpo.rollout on the
    inference kernel): each completion row's key/value cache at full length (prompt + new tokens, float32,
    every layer), its logits and the sampler's working rows over the vocabulary, and each prompt's prefill
    (its own cache and the kernel's per-token buffers)."""
    g = config.grpo
    length = g.max_prompt_len + g.max_new_tokens
    kv = 2 * args.num_layers * args.num_kv_heads * args.head_dim * 4  # per token, keys and values
    h, q, i = args.hidden_size, args.num_heads * args.head_dim, args.intermediate_size
    prefill_token = kv + (4 * h + q + 2 * args.num_kv_heads * args.head_dim + 2 * i) * 4
    row = kv * length + SAMPLER_BYTES_PER_LOGIT * args.vocab_size
    return float(prompts * (g.num_generations * row + g.max_prompt_len * prefill_token))


def rollout_prompts(config, args) -> int:
    """Prompts one rollout call samples (all grpo.num_generations completions of each): the step's prompts on
    one worker, fewer when their rollout would hold more than ROLLOUT_BUDGET_MB (at least one)."""
    step = config.train.micro_batch_size * config.train.grad_accum_steps
    one = rollout_bytes(config, args, 1)
    return max(1, min(step, int(ROLLOUT_BUDGET_MB * 2**20 // one)))


def _grpo_memory(config, args) -> MemoryTerms:
    """A micro batch of B prompts trains B·G completions; a rollout call holds the key/value cache of every
    completion row it samples at full length (prompt + new tokens) in float32, per layer, their logits and
    the prefill's buffers (`rollout_bytes`) for `rollout_prompts` prompts."""
    notes: list = [Message("memory.grpo_rows", prompts=config.train.micro_batch_size,
                           generations=config.grpo.num_generations)]
    weights = _reference_memory(config, args, notes)
    rows = config.grpo.num_generations
    prompts = rollout_prompts(config, args)
    rollout = rollout_bytes(config, args, prompts)
    notes.append(Message("memory.grpo_rollout", prompts=prompts, rows=prompts * config.grpo.num_generations,
                         mb=f"{rollout / 2**20:,.1f}"))
    # the update runs the head on the completion's positions only (core.engine.grpo.GrpoStep); a pass for the
    # old policy (num_iterations > 1) or the reference (beta > 0) still makes every position's logits
    whole = config.grpo.beta > 0 or config.grpo.num_iterations > 1
    return MemoryTerms(weights, rows, rollout, tuple(notes), merged_adapter_copies=config.method == "lora",
                       logits_positions=0 if whole else config.grpo.max_new_tokens + 1)


def _reward_rules(config) -> list[Rule]:
    return _monitor_rule(config, REWARD) + _whole_answer_rules(config, REWARD)


def _reward_memory(config, args) -> MemoryTerms:
    return MemoryTerms(0.0, 2.0, 0.0, (Message("memory.pairs", objective="reward"),))


PREFERENCE_FIELDS = ("reward_accuracy", "reward_margin", "chosen_reward", "rejected_reward", "chosen_logp",
                     "rejected_logp")
GRPO_FIELDS = ("val_reward", "val_reward_std", "val_rewards", "val_completion_len", "val_truncated")

SFT = ObjectiveSpec(
    name="sft", kind="sft", data="supervised",
    monitors=("val_loss", "val_ppl", "val_loss_ema", "val_ppl_ema") + GENERATION_MONITORS,
    default_monitor="val_loss", headline="val_ppl",
    eval_fields=("val_ppl", "val_loss_ema", "val_ppl_ema"),
    charts=("loss", "ppl", "scores", "memory", "throughput", "lr", "grad_norm", "loss_scale"),
    compare=("best_val_ppl", "exact_match", "bleu", "rouge1", "rouge2", "rougeL", "tokens_per_s", "peak_mem_mb"),
    has_perplexity=True, rules=_sft_rules)


# the preference: keys each preference objective reads (core.engine.preference)
_PREFERENCE_SETTINGS = {
    "dpo": ("preference.beta", "preference.label_smoothing", "preference.loss_type", "preference.reference"),
    "simpo": ("preference.beta", "preference.label_smoothing", "preference.simpo_gamma"),
    "orpo": ("preference.orpo_lambda",),
    "kto": ("preference.beta", "preference.kto_desirable_weight", "preference.kto_undesirable_weight",
            "preference.reference")}


def _preference(name: str, data: str) -> ObjectiveSpec:
    return ObjectiveSpec(
        name=name, kind="preference", data=data, settings=_PREFERENCE_SETTINGS[name],
        monitors=("val_loss", "val_loss_ema", "reward_accuracy"), default_monitor="reward_accuracy",
        headline="reward_accuracy", eval_fields=PREFERENCE_FIELDS,
        charts=("loss", "rewards", "memory", "throughput", "lr", "grad_norm", "loss_scale"),
        compare=("reward_accuracy", "reward_margin", "tokens_per_s", "peak_mem_mb"),
        uses_reference=reference_kind, rules=_preference_rules, memory=_preference_memory)


GRPO = ObjectiveSpec(
    name="grpo", kind="rl", data="prompts",
    monitors=("val_reward",), default_monitor="val_reward", headline="val_reward", eval_fields=GRPO_FIELDS,
    charts=("loss", "reward", "reward_functions", "completions", "kl", "memory", "throughput", "lr", "grad_norm"),
    compare=("val_reward", "tokens_per_s", "peak_mem_mb"), rewards=True, settings=("grpo.",),
    uses_reference=reference_kind, rules=_grpo_rules, memory=_grpo_memory)

REWARD = ObjectiveSpec(
    name="reward", kind="reward", data="pairs",
    monitors=("val_loss", "val_loss_ema", "reward_accuracy"), default_monitor="reward_accuracy",
    headline="reward_accuracy", eval_fields=("reward_accuracy", "reward_margin", "chosen_reward", "rejected_reward"),
    charts=("loss", "rewards", "memory", "throughput", "lr", "grad_norm", "loss_scale"),
    compare=("reward_accuracy", "reward_margin", "tokens_per_s", "peak_mem_mb"),
    rules=_reward_rules, memory=_reward_memory)

# a reward model's value head in its checkpoints and exports: transformers' XxxForSequenceClassification
# `score` layer with one label, (1, hidden) (core.engine.reward_model)
REWARD_HEAD = "score.weight"

OBJECTIVES: dict[str, ObjectiveSpec] = {
    "sft": SFT, "dpo": _preference("dpo", "pairs"), "simpo": _preference("simpo", "pairs"),
    "orpo": _preference("orpo", "pairs"), "kto": _preference("kto", "kto"), "grpo": GRPO, "reward": REWARD}


def spec_of(objective: str | None) -> ObjectiveSpec:
    """The spec of `train.objective` (a run folder written before objectives existed: sft)."""
    return OBJECTIVES.get(objective or "sft", SFT)
