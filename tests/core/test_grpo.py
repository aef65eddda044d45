"""GRPO (core.engine.grpo) against TRL 1.16's GRPOTrainer, and its rollouts.

Parity: a tiny transformers-made Qwen2 in the engine and in TRL, LoRA on the same modules with the same
A and B on both sides (TRL's from a peft_config, so its reference is the model with the adapter disabled,
as ours). TRL's own code makes everything from the completions on: its GRPOTrainer gets fixed prompts and
completions through its `rollout_func` hook and fixed rewards through a reward function, and its
`_generate_and_score_completions` pads them, masks truncated ones, computes the advantages, the old
policy's and the reference's log-probabilities and num_items_in_batch; then its `_compute_loss` gives the
loss, backward the LoRA gradients, and its metrics the KL, clip ratios and entropy. The engine builds its
batch from the same completions, flags and rewards (`grpo_batch`, `advantages`), computes its own old and
reference log-probabilities (`GrpoStep.prepare`) and its loss and gradients (`loss_and_grads`). For
num_iterations 2 the old policy's adapter differs from the current one on both sides (as after an
update), so ratios move off 1 and some clip. The cases cover every loss_type at both importance-sampling
levels, β 0 and > 0 and num_iterations 1 and 2 pairwise, plus temperatures, epsilon_high and masked
truncation; the engine's model is built once for all of them (TRL's tiny model is rebuilt per case in
milliseconds)."""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

import core.engine.fused as fused
from core.engine.checkpoint import load_hf_model
from core.engine.generate import SamplingSettings, generate
from core.engine.grpo import (GrpoError, GrpoObjective, GrpoStep, advantages, dapo_normalizer, grpo_batch, rollout,
                              summarize)
from core.engine.lora import inject_lora, lora_modules, mark_only_lora_trainable, write_parameter
from core.engine.train_step import WarmupDecaySchedule, adamw

from tests import skips
from tests.core.hf_fixtures import make_hf_model, save_hf_model

torch = skips.module("torch")
peft = skips.module("peft")
trl = skips.module("trl")
datasets = skips.module("datasets")

DEMO = Path(__file__).resolve().parents[2] / "models" / "tiny-demo"  # its tokenizer: pad 0, EOS 2 (<|im_end|>)
TARGETS = ["q_proj", "v_proj", "o_proj", "up_proj", "down_proj"]
EOS, PAD, G, MAX_NEW = 2, 0, 3, 6
PROMPTS = [[5, 6, 7, 8, 9], [10, 11, 12], [13, 14, 15, 16]]
# prompt-major, G per prompt; row 2 is truncated (MAX_NEW tokens, no EOS); group 3's rewards are all equal
COMPLETIONS = [[20, 21, EOS], [22, 23, 24, 25, EOS], [26, 27, 28, 29, 30, 31],
               [40, EOS], [41, 42, 43, EOS], [44, 45, 46, 47, 48, EOS],
               [50, 51, 52, EOS], [53, EOS], [54, 55, 56, 57, 58, 59]]
REWARDS = [1.0, 0.0, 0.5, 0.2, 1.0, 0.7, 1.0, 1.0, 1.0]

# every loss_type at both levels; β and num_iterations paired so that each value meets each other one
CASES = {
    "grpo-token": dict(loss_type="grpo", importance_sampling_level="token", beta=0.0, num_iterations=1),
    "grpo-sequence": dict(loss_type="grpo", importance_sampling_level="sequence", beta=0.04, num_iterations=2,
                          temperature=0.7),
    "bnpo-token": dict(loss_type="bnpo", importance_sampling_level="token", beta=0.04, num_iterations=2,
                       mask_truncated_completions=True),
    "bnpo-sequence": dict(loss_type="bnpo", importance_sampling_level="sequence", beta=0.0, num_iterations=1),
    "dr_grpo-token": dict(loss_type="dr_grpo", importance_sampling_level="token", beta=0.0, num_iterations=2,
                          temperature=1.3),
    "dr_grpo-sequence": dict(loss_type="dr_grpo", importance_sampling_level="sequence", beta=0.04,
                             num_iterations=1, mask_truncated_completions=True),
    "dapo-token": dict(loss_type="dapo", importance_sampling_level="token", beta=0.04, num_iterations=1,
                       epsilon_high=0.28),
    "dapo-sequence": dict(loss_type="dapo", importance_sampling_level="sequence", beta=0.0, num_iterations=2,
                          epsilon_high=0.28, temperature=0.7, mask_truncated_completions=True),
}
FAST = "dapo-token"  # TRL's default loss, with the KL term: in the quick suite; the others are slow
TIMES: dict[str, float] = {}

try:
    fused.build()
    KERNELS = True
except fused.KernelUnavailable:  # no C++ compiler: the engine runs composed ops (and computes the same)
    KERNELS = False


def _random_b(shape, seed, scale):
    return np.random.default_rng(seed).normal(0, scale, shape).astype(np.float32)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """The engine's side once: the transformers model saved and loaded (fused kernels where they build),
    LoRA with a non-zero B (the current policy's, and another for the old policy), and the tokenizer TRL
    needs. TRL's side is rebuilt per case (`_trl_trainer`: milliseconds for this model)."""
    from transformers import AutoTokenizer
    start = time.perf_counter()
    folder = tmp_path_factory.mktemp("grpo-model")
    save_hf_model(make_hf_model("qwen2-tied"), folder)
    ours = load_hf_model(folder)
    if KERNELS:
        assert fused.enable(ours).startswith("fused")
    inject_lora(ours, 4, 8, 0.0, TARGETS)
    cells = lora_modules(ours)
    for i, cell in enumerate(cells.values()):  # A drawn here too: the same figures every run
        write_parameter(cell.lora_a, _random_b(cell.lora_a.shape, 200 + i, 0.2))
    current = {name: _random_b(cell.lora_b.shape, i, 0.05) for i, (name, cell) in enumerate(cells.items())}
    old = {name: b + _random_b(b.shape, 100 + i, 0.15) for i, (name, b) in enumerate(current.items())}
    params = mark_only_lora_trainable(ours)
    ours.set_train(True)
    optimizer = adamw(params, WarmupDecaySchedule(1e-3, 0, 10, "constant", 1.0), 0.0)
    tokenizer = AutoTokenizer.from_pretrained(DEMO)
    setup = dict(ours=ours, optimizer=optimizer, current=current, old=old, tokenizer=tokenizer, torch_params={},
                 tmp=tmp_path_factory.mktemp("grpo-trl"), folder=folder)
    _set_b(setup, "current")
    TIMES["setup"] = time.perf_counter() - start
    return setup


def _set_b(setup, which: str):
    """Both sides' adapters to the `which` ("current" or "old") B matrices."""
    for name, cell in lora_modules(setup["ours"]).items():
        write_parameter(cell.lora_b, setup[which][name])
        key = f"base_model.model.{name}.lora_B.default.weight"
        if key in setup["torch_params"]:
            with torch.no_grad():
                setup["torch_params"][key].copy_(torch.tensor(setup[which][name]))


def _trl_trainer(setup, case: dict):
    """TRL's GRPOTrainer on the same transformers model, its LoRA (TRL's own, from a peft_config: the
    reference is the model with the adapter disabled) given our A and B, its rollouts our fixed
    completions (the `rollout_func` hook) and its rewards REWARDS."""
    rows = len(PROMPTS) * G

    def rollout_func(prompts, trainer):
        return {"prompt_ids": [PROMPTS[i // G] for i in range(rows)], "completion_ids": COMPLETIONS, "logprobs": None}

    def reward(prompts, completions, **columns):
        return list(REWARDS)

    args = trl.GRPOConfig(
        output_dir=str(setup["tmp"]), per_device_train_batch_size=rows, num_generations=G, max_completion_length=MAX_NEW,
        gradient_accumulation_steps=1, report_to=[], use_cpu=True, bf16=False, logging_steps=1, save_strategy="no",
        epsilon=0.2, **case)
    dataset = datasets.Dataset.from_dict({"prompt": ["a", "b", "c"] * 3})
    lora = peft.LoraConfig(r=4, lora_alpha=8, target_modules=TARGETS, lora_dropout=0.0)
    trainer = trl.GRPOTrainer(model=make_hf_model("qwen2-tied"), reward_funcs=reward, args=args, train_dataset=dataset,
                              processing_class=setup["tokenizer"], rollout_func=rollout_func, peft_config=lora)
    trainer.current_gradient_accumulation_steps = 1
    trainer.model.train()
    setup["torch_params"] = dict(trainer.model.named_parameters())
    for name, cell in lora_modules(setup["ours"]).items():
        with torch.no_grad():
            setup["torch_params"][f"base_model.model.{name}.lora_A.default.weight"].copy_(
                torch.tensor(cell.lora_a.asnumpy()))
    return trainer


def _to_completion_columns(per_token: np.ndarray, prompt_width: int) -> np.ndarray:
    """Our (R, T) arrays aligned with next_token_targets -> TRL's (R, completion width): completion token
    j stands at prompt_width + j, predicted by position prompt_width + j - 1."""
    return per_token[:, prompt_width - 1:-1]


def _relative(ours: np.ndarray, theirs: np.ndarray) -> float:
    return float(np.linalg.norm(ours - theirs) / max(np.linalg.norm(theirs), 1e-30))


@pytest.mark.slow  # even its one quick case (~5 s quiet) is too long for make test-fast
@pytest.mark.parametrize("name", [n if n == FAST else pytest.param(n, marks=pytest.mark.slow) for n in CASES])
def test_loss_gradients_and_figures_equal_trls_grpo_trainer(setup, name):
    case = CASES[name]
    start = time.perf_counter()
    objective = GrpoObjective(epsilon=0.2, max_completion_length=MAX_NEW, **case)
    trainer = _trl_trainer(setup, case)
    inputs = [{"prompt": p} for p in ("a", "b", "c") for _ in range(G)]
    _set_b(setup, "old" if objective.num_iterations > 1 else "current")
    scored = trainer._generate_and_score_completions(inputs)  # TRL: padding, masks, advantages, old and ref logps

    ours = setup["ours"]
    step = GrpoStep(ours, setup["optimizer"], None, None, objective)
    adv, zero_std = advantages(REWARDS, G, "group")
    truncated = [c[-1] != EOS for c in COMPLETIONS]
    batch = step.prepare(grpo_batch(PROMPTS, COMPLETIONS, truncated, adv, G, PAD, objective.mask_truncated_completions))
    _set_b(setup, "current")  # an update later: the policy moved away from the rollouts' policy

    # the batch TRL made from the same completions is ours, column for column
    width = scored["prompt_ids"].shape[1]
    np.testing.assert_array_equal(batch.input_ids, torch.cat([scored["prompt_ids"], scored["completion_ids"]], 1))
    np.testing.assert_array_equal(batch.attention_mask, torch.cat([scored["prompt_mask"], scored["completion_mask"]], 1))
    np.testing.assert_allclose(adv, scored["advantages"].numpy(), rtol=1e-5, atol=1e-6)
    assert zero_std == pytest.approx(trainer._metrics["train"]["frac_reward_zero_std"][-1]) == 1 / 3
    assert batch.tokens == int(scored["num_items_in_batch"]) == batch.normalizer
    completion_mask = scored["completion_mask"].numpy().astype(bool)
    worst_logps = 0.0
    for ours_logps, key in ((batch.old_logps, "old_per_token_logps"), (batch.ref_logps, "ref_per_token_logps")):
        assert (ours_logps is None) == (key not in scored), key
        if ours_logps is not None:
            theirs = scored[key].numpy()
            mine = _to_completion_columns(ours_logps, width)
            np.testing.assert_allclose(mine[completion_mask], theirs[completion_mask], rtol=1e-5, atol=2e-6)
            worst_logps = max(worst_logps, float(np.abs(mine - theirs)[completion_mask].max()))

    loss, grads, figures = step.loss_and_grads(batch)
    for param in setup["torch_params"].values():
        param.grad = None
    trl_loss = trainer._compute_loss(trainer.model, scored)
    trl_loss.backward()
    expected = float(trl_loss.detach())
    metrics = {k: v[-1] for k, v in trainer._metrics["train"].items()}

    # The loss is a sum of ±advantage terms that cancel towards 0 (on-policy, exactly: Σ A = 0 in a group),
    # so its own relative difference is ill-conditioned there: held to 1e-5 of the larger of the loss and
    # its terms' scale (mean |A|), and printed both ways.
    scale = max(abs(expected), float(np.abs(adv).mean()))
    assert abs(loss - expected) <= 1e-5 * scale, (loss, expected)
    worst = 0.0
    for param, grad in zip(step.optimizer.parameters, grads):
        module, which = param.name.rsplit(".", 1)
        key = f"base_model.model.{module}.{'lora_A' if which == 'lora_a' else 'lora_B'}.default.weight"
        worst = max(worst, _relative(grad, setup["torch_params"][key].grad.numpy()))
    assert worst < 1e-5, f"largest relative LoRA gradient difference {worst:.2e}"
    got = summarize(figures)
    for figure in ("clip_ratio/low_mean", "clip_ratio/high_mean", "clip_ratio/region_mean"):
        assert got[figure] == pytest.approx(metrics[figure], abs=1e-6), figure
    assert got["entropy"] == pytest.approx(metrics["entropy"], rel=1e-5)
    if objective.beta > 0:
        assert got["kl"] == pytest.approx(metrics["kl"], rel=1e-4, abs=1e-8)
        assert metrics["kl"] > 1e-3  # the adapter matters: the reference really has it off
    else:
        assert np.isnan(got["kl"]) and "kl" not in metrics
    if objective.num_iterations > 1 and objective.importance_sampling_level == "token":
        assert got["clip_ratio/region_mean"] > 0  # the old policy is another: some ratios clip
    TIMES[name] = time.perf_counter() - start
    print(f"\n{name}: loss {loss:.7g} vs TRL {expected:.7g} ({abs(loss - expected) / abs(expected):.1e}"
          f" of it, {abs(loss - expected) / scale:.1e} of the scale {scale:.3g}),"
          f" worst LoRA gradient {worst:.1e}, log-probs {worst_logps:.1e}, clip {got['clip_ratio/region_mean']:.3f}, "
          f"{TIMES[name]:.1f} s (setup {TIMES['setup']:.1f} s)")


@pytest.mark.slow
def test_dapo_over_accumulated_micro_batches_is_the_steps_token_mean(setup):
    """dapo's normaliser: a step of two micro batches (a group each, 14 and 12 tokens), each dividing by
    dapo_normalizer(the step's tokens, 2), trains on the same loss and gradient as the step in one micro
    batch (Σ token losses / Σ tokens); each dividing by its own tokens (a per-micro-batch mean) does not."""
    ours = setup["ours"]
    _set_b(setup, "current")
    rows = 2 * G
    adv, _ = advantages(REWARDS[:rows], G, "group")
    truncated = [c[-1] != EOS for c in COMPLETIONS[:rows]]
    widths = (max(map(len, PROMPTS)), MAX_NEW)
    whole = grpo_batch(PROMPTS[:2], COMPLETIONS[:rows], truncated, adv, G, PAD, widths=widths)

    def parts():
        return [grpo_batch(PROMPTS[i:i + 1], COMPLETIONS[i * G:(i + 1) * G], truncated[i * G:(i + 1) * G],
                           adv[i * G:(i + 1) * G], G, PAD, widths=widths) for i in range(2)]
    step_parts = parts()
    assert [p.tokens for p in step_parts] == [14, 12]
    for part in step_parts:
        part.normalizer = dapo_normalizer(whole.tokens, len(step_parts))
    # lr 0: the step computes everything (the micro batches' mean loss, the averaged gradients' norm)
    # and changes no weight
    params = list(setup["optimizer"].parameters)
    still = adamw(params, WarmupDecaySchedule(0.0, 0, 10, "constant", 1.0), 0.0)
    before = [p.asnumpy().copy() for p in params]
    step = GrpoStep(ours, still, None, None, GrpoObjective(loss_type="dapo", max_completion_length=MAX_NEW))
    loss_whole, norm_whole, applied, _ = step([whole])
    loss_parts, norm_parts, _, _ = step(step_parts)
    assert applied and step.last_figures.shape == (2, 7)
    assert loss_parts == pytest.approx(loss_whole, rel=1e-5) and norm_parts == pytest.approx(norm_whole, rel=1e-5)
    assert all(np.array_equal(b, p.asnumpy()) for b, p in zip(before, params))
    own_means = step(parts())  # grpo_batch's default: each micro batch over its own tokens
    assert own_means[1] != pytest.approx(norm_whole, rel=1e-3)


@pytest.mark.slow
@skips.unless(KERNELS, "kernels", "fused kernels unavailable here: the parity cases ran composed")
def test_the_composed_ops_compute_what_the_kernels_compute(setup):
    """Where the CPU's kernels do not run (a GPU, Ascend, AMP, no compiler) the step is composed ops: the
    NLL (TokenNLL) and the entropy (TokenEntropy) of the temperature-scaled logits. Same loss, gradients
    and figures as the kernels' step, with a KL term and kept old log-probabilities."""
    objective = GrpoObjective(beta=0.04, num_iterations=2, temperature=0.7, max_completion_length=MAX_NEW)
    composed = load_hf_model(setup["folder"])
    inject_lora(composed, 4, 8, 0.0, TARGETS)
    for (_, cell), (_, theirs) in zip(lora_modules(composed).items(), lora_modules(setup["ours"]).items()):
        write_parameter(cell.lora_a, theirs.lora_a.asnumpy())
    results = []
    for model in (setup["ours"], composed):
        for name, cell in lora_modules(model).items():
            write_parameter(cell.lora_b, setup["old"][name])
        params = mark_only_lora_trainable(model)
        model.set_train(True)
        step = GrpoStep(model, adamw(params, WarmupDecaySchedule(1e-3, 0, 10, "constant", 1.0), 0.0), None, None,
                        objective)
        adv, _ = advantages(REWARDS, G, "group")
        truncated = [c[-1] != EOS for c in COMPLETIONS]
        batch = step.prepare(grpo_batch(PROMPTS, COMPLETIONS, truncated, adv, G, PAD))
        for name, cell in lora_modules(model).items():
            write_parameter(cell.lora_b, setup["current"][name])
        results.append((batch, *step.loss_and_grads(batch)))
    assert composed.fused_loss is None and composed.token_entropy is None
    (kernel_batch, kernel_loss, kernel_grads, kernel_figures), (batch, loss, grads, figures) = results
    np.testing.assert_allclose(batch.old_logps, kernel_batch.old_logps, rtol=1e-5, atol=2e-6)
    np.testing.assert_allclose(batch.ref_logps, kernel_batch.ref_logps, rtol=1e-5, atol=2e-6)
    assert loss == pytest.approx(kernel_loss, abs=1e-5 * float(np.abs(batch.advantages).mean()))  # as above
    assert max(_relative(g, k) for g, k in zip(grads, kernel_grads)) < 1e-5
    np.testing.assert_allclose(figures, kernel_figures, rtol=1e-5)


def test_advantages_follow_trls_scalings():
    """Group-centred rewards over the group's, the batch's or no standard deviation (+1e-4, Bessel's
    correction, as TRL's nanstd); a group of equal rewards counts as carrying no gradient."""
    rewards = np.array([1.0, 0.0, 0.5, 2.0, 2.0, 2.0])
    group, share = advantages(rewards, 3, "group")
    np.testing.assert_allclose(group[:3], [0.5 / (0.5 + 1e-4), -0.5 / (0.5 + 1e-4), 0.0], rtol=1e-6)
    assert not group[3:].any() and share == 0.5
    batch, _ = advantages(rewards, 3, "batch")
    np.testing.assert_allclose(batch, (rewards - np.repeat([0.5, 2.0], 3)) / (rewards.std(ddof=1) + 1e-4), rtol=1e-6)
    none, _ = advantages(rewards, 3, "none")
    np.testing.assert_allclose(none, rewards - np.repeat([0.5, 2.0], 3), rtol=1e-6)
    for bad in (dict(rewards=[1.0] * 5, num_generations=3), dict(rewards=[1.0, 2.0], num_generations=1)):
        with pytest.raises(GrpoError, match="whole groups"):
            advantages(**bad)


# ---- rollouts ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """The same checkpoint without LoRA, on the inference kernel where it builds."""
    from core.engine.generate import use_device
    use_device("cpu")
    folder = tmp_path_factory.mktemp("grpo-plain")
    save_hf_model(make_hf_model("qwen2-tied"), folder)
    model = load_hf_model(folder)
    if KERNELS:
        fused.enable(model)
    model.set_train(False)
    model.folder = folder
    return model


def _eos_of(model, prompts, settings) -> int:
    """A token greedy decoding of these prompts emits early on: used as the EOS, so rows stop at different
    steps."""
    free = generate(model, prompts, settings, frozenset(), PAD)
    return free[0][2]


def test_greedy_rollouts_equal_generation_and_top_k_1_is_greedy(plain):
    greedy = SamplingSettings(max_new_tokens=8)
    eos = _eos_of(plain, PROMPTS, greedy)
    completions, truncated = rollout(plain, PROMPTS, 2, greedy, {eos}, PAD, np.random.default_rng(0))
    reference = generate(plain, PROMPTS, greedy, {eos}, PAD)
    assert len(completions) == 2 * len(PROMPTS)
    for row, (completion, cut) in enumerate(zip(completions, truncated)):
        want = reference[row // 2]
        assert completion == (want if cut else want + [eos])  # the EOS kept: it is trained on
        assert cut == (len(want) == greedy.max_new_tokens)
    assert not all(truncated)  # some rows stopped at the EOS
    top1 = SamplingSettings(max_new_tokens=8, temperature=1.0, top_k=1)
    assert rollout(plain, PROMPTS, 2, top1, {eos}, PAD, np.random.default_rng(5))[0] == completions


def test_sampled_rollouts_are_reproducible_from_the_generators_state(plain):
    hot = SamplingSettings(max_new_tokens=8, temperature=1.5, top_p=0.95, top_k=40)
    rng = np.random.default_rng(11)
    saved = rng.bit_generator.state
    first, _ = rollout(plain, PROMPTS, 4, hot, {EOS}, PAD, rng)
    second, _ = rollout(plain, PROMPTS, 4, hot, {EOS}, PAD, rng)  # the generator moved on: others
    assert first != second
    rng.bit_generator.state = saved  # a resumed run restores the state it saved
    assert rollout(plain, PROMPTS, 4, hot, {EOS}, PAD, rng)[0] == first
    assert rollout(plain, PROMPTS, 4, hot, {EOS}, PAD, np.random.default_rng(11))[0] == first
    assert len({tuple(c) for c in first[:4]}) > 1  # a group's completions differ


@pytest.mark.slow
@skips.unless(KERNELS, "kernels", "fused kernels unavailable here: the composed ops sample LoRA unmerged")
def test_lora_rollouts_run_on_the_kernel_with_the_adapter_merged_and_leave_the_weights_as_they_were(setup):
    """The kernel computes the LoRA model with its adapters merged into copies of the weights: its logits
    are the composed model's with the adapter, greedy rollouts are composed generation's tokens, and every
    Parameter (base and adapter) is bit-identical afterwards."""
    from mindspore import Tensor
    ours = setup["ours"]
    _set_b(setup, "current")
    kernel = ours.inference_kernel
    before = {p.name: p.asnumpy().copy() for p in ours.get_parameters()}
    calls = []
    forward = kernel.forward

    def counted(*args, **kwargs):
        calls.append(kernel.merges(ours))
        return forward(*args, **kwargs)

    kernel.forward = counted
    try:
        ids = np.asarray([PROMPTS[0] + [30, 31, 32]], np.int32)
        positions = np.arange(ids.shape[1], dtype=np.int32).reshape(1, -1)
        with kernel.adapters_merged(ours):
            on_kernel = kernel.forward(ours, ids, positions)
        training = ours.training
        ours.set_train(False)
        composed = ours(Tensor(ids)).asnumpy()
        greedy = SamplingSettings(max_new_tokens=6)
        reference = generate(ours, PROMPTS, greedy, {EOS}, PAD)  # composed: the adapter is not merged
        ours.set_train(training)
        calls.clear()
        completions, truncated = rollout(ours, PROMPTS, 2, greedy, {EOS}, PAD, np.random.default_rng(0))
    finally:
        kernel.forward = forward
    assert np.abs(on_kernel - composed).max() < 1e-4
    assert calls and all(calls), "the rollout ran on the kernel with the adapters merged"
    assert not kernel.merges(ours)
    for row, completion in enumerate(completions):
        want = reference[row // 2]
        assert completion == (want if truncated[row] else want + [EOS])
    after = {p.name: p.asnumpy() for p in ours.get_parameters()}
    assert all(np.array_equal(before[name], after[name]) for name in before)
    assert ours.training  # the mode it had


@pytest.mark.slow
def test_a_full_fine_tuning_reference_is_a_frozen_copy(plain):
    """Full fine-tuning's reference (beta > 0) is `reference_model`, a frozen copy: at the start it scores
    as the policy does; when the policy's weights move, the old policy's pass follows them and the
    reference's does not."""
    from core.engine.lora import write_parameter as write
    copy = load_hf_model(plain.folder)
    copy.set_train(False)
    params = [p for p in plain.get_parameters()]
    step = GrpoStep(plain, adamw(params, WarmupDecaySchedule(1e-3, 0, 10, "constant", 1.0), 0.0), None, None,
                    GrpoObjective(beta=0.1, num_iterations=2), reference_model=copy)
    truncated = [c[-1] != EOS for c in COMPLETIONS]
    batch = step.prepare(grpo_batch(PROMPTS, COMPLETIONS, truncated, [0.0] * 9, G, PAD))
    np.testing.assert_allclose(batch.ref_logps, batch.old_logps, rtol=1e-6, atol=1e-6)
    weight = plain.model.layers[0].mlp.down_proj.weight
    original = weight.asnumpy().copy()
    write(weight, original * 1.5)
    try:
        moved = step.old_logps(batch)
        assert np.abs(moved - batch.old_logps).max() > 1e-3
        np.testing.assert_array_equal(step.reference_logps(batch), batch.ref_logps)
    finally:
        write(weight, original)


def test_a_grpo_batch_that_does_not_fit_says_so():
    with pytest.raises(GrpoError, match="needs as many completions"):
        grpo_batch(PROMPTS, COMPLETIONS[:-1], [False] * 8, [0.0] * 8, G, PAD)
    with pytest.raises(GrpoError, match="does not fit"):
        grpo_batch(PROMPTS, COMPLETIONS, [False] * 9, [0.0] * 9, G, PAD, widths=(4, MAX_NEW))
    with pytest.raises(GrpoError, match="grpo.loss_type must be one of 'grpo', 'bnpo', 'dr_grpo', 'dapo'"):
        GrpoObjective(loss_type="ppo")
