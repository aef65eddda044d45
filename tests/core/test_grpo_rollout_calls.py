"""A GRPO step's rollouts in one call (issue 36, Speed): every prompt of the step on a worker (all its micro
batches) is sampled in one generate call, split only past a memory budget (core.spec.objectives.rollout_prompts),
and the split changes no draw (each row has its own generator); the inference kernel's decoding step of many
rows (split over the threads by weight rows) computes the composed forward's logits; the update's head runs
only on the completion's positions (CausalLM's logits_from)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import core.engine.fused as fused
from core.spec.config import load_config
from core.spec.model_args import ModelArgs
from core.spec.objectives import ROLLOUT_BUDGET_MB, rollout_bytes, rollout_prompts

from tests import skips

QWEN05 = dict(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
              num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768, model_type="qwen2")
QWEN7 = dict(vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
             num_attention_heads=28, num_key_value_heads=4, max_position_embeddings=32768, model_type="qwen2")


def _config(tmp_path, micro: int = 2, **grpo) -> object:
    path = tmp_path / "config.yaml"
    path.write_text(f"train: {{objective: grpo, micro_batch_size: {micro}, grad_accum_steps: 4}}\n"
                    "early_stopping: {monitor: val_reward}\ndata: {max_seq_len: 1280}\n")
    return load_config(path, [f"grpo.{k}={v}" for k, v in grpo.items()])


def test_a_step_rolls_out_in_one_call_within_the_memory_budget(tmp_path):
    """The 0.5B shape at 192 + 64 tokens, 4 completions: 62.3 MB a prompt (each row's cache at full length
    6.0 MB and its sampler rows over 151,936 tokens 5.8 MB, the prefill 15.1 MB), so the step's 8 prompts
    (2 per micro batch x 4) go in one call and at most 16 would; a 7B model at 1,024 + 256 needs 0.90 GiB
    a prompt: one per call."""
    config = _config(tmp_path, num_generations=4, max_prompt_len=192, max_new_tokens=64)
    small = ModelArgs.from_hf_config(QWEN05)
    per_prompt = 4 * (2 * 24 * 2 * 64 * 4 * 256 + 40 * 151936) + 192 * (2 * 24 * 2 * 64 * 4 + 14464 * 4)
    assert rollout_bytes(config, small, 1) == per_prompt == 65_302_528
    assert rollout_bytes(config, small, 8) == 8 * per_prompt
    assert rollout_prompts(config, small) == 8  # the whole step: 2 prompts x 4 micro batches
    bigger = _config(tmp_path, micro=16, num_generations=4, max_prompt_len=192, max_new_tokens=64)
    assert rollout_prompts(bigger, small) == ROLLOUT_BUDGET_MB * 2**20 // per_prompt == 16
    long = _config(tmp_path, num_generations=4, max_prompt_len=1024, max_new_tokens=256)
    assert rollout_prompts(long, ModelArgs.from_hf_config(QWEN7)) == 1
    assert rollout_bytes(long, ModelArgs.from_hf_config(QWEN7), 1) == 961_757_184


def test_the_estimate_counts_the_completions_logits_only_without_an_old_or_reference_pass(tmp_path):
    """beta 0 and num_iterations 1: the update's logits are the completion's 65 positions of the 0.5B rows'
    166 (2 prompts x 4 completions a micro batch); an old-policy pass (num_iterations 2) makes all 166."""
    from core.spec.memory import cpu_fit, estimate_memory
    args = ModelArgs.from_hf_config(QWEN05)
    only = _config(tmp_path, num_generations=4, max_prompt_len=192, max_new_tokens=64)
    every = _config(tmp_path, num_generations=4, max_prompt_len=192, max_new_tokens=64, num_iterations=2)
    copies = cpu_fit(only).activation_copies["logits"]
    saved = 4 * 2 * (166 - 65) * 151936 * copies * 4 / 2**20  # G x prompts x positions x vocab x copies x float32
    gap = estimate_memory(every, args, 166).activations_mb - estimate_memory(only, args, 166).activations_mb
    assert gap == pytest.approx(saved, rel=1e-9) and saved > 900


# ---- on the engine ---------------------------------------------------------------------------------

def _kernels() -> bool:
    try:
        fused.build()
        return True
    except fused.KernelUnavailable:
        return False


KERNELS = _kernels()
needs_kernel = skips.unless(KERNELS, "kernels", "the fused kernels did not build here")


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    """A tiny Qwen2 whose head (8,192 x 64) and MLP (4,352) make a 32-row decoding step's products large
    enough for the kernel to split them over the threads by weight rows (rows x in x out > 2^23)."""
    from core.engine.checkpoint import load_hf_model
    from core.engine.generate import use_device
    from tests.core.hf_fixtures import make_hf_model, save_hf_model
    skips.module("torch")
    use_device("cpu")
    folder = save_hf_model(make_hf_model("qwen2-tied", vocab_size=8192, intermediate_size=4352),
                           tmp_path_factory.mktemp("grpo-wide"))
    model = load_hf_model(folder)
    if KERNELS:
        fused.enable(model)
    model.set_train(False)
    return model


@needs_kernel
def test_a_decoding_step_of_many_rows_is_the_composed_forward(wide):
    """32 rows' decoding step on the kernel (its products split over the threads by blocks of weight rows)
    gives the composed model's logits of the same sequences to 1e-5 of the largest."""
    from mindspore import Tensor
    from core.engine.generate import prefilled
    rng = np.random.default_rng(3)
    prompts = rng.integers(3, 8192, size=(32, 6)).tolist()
    step = rng.integers(3, 8192, size=(32, 1)).astype(np.int32)
    kernel = wide.inference_kernel
    with prefilled(kernel, wide, prompts, 1) as (_, cache, slots, width, positions):
        slots[:, width] = 1.0
        logits = kernel.forward(wide, step, positions + 1, slots, cache, start=width, last_only=True)[:, -1]
    whole = np.concatenate([np.asarray(prompts, np.int32), step], 1)
    composed = wide(Tensor(whole)).asnumpy()[:, -1]
    assert np.abs(logits - composed).max() <= 1e-5 * np.abs(composed).max()


@needs_kernel
def test_one_rollout_call_samples_what_a_call_per_prompt_samples(wide):
    """3 prompts x 8 completions (24 rows: the split products) in one call sample, greedily, the tokens that
    three calls of 8 rows (the dot-product path) sample, and at temperature 1.2 each row draws from its own
    generator whatever call it is in: rows whose logits agree to rounding draw the same tokens. (A call's
    rows change its products' paths, left padding and shared prefix, so logits agree only to ~1e-6: a draw
    within that of a boundary of its row's distribution can differ, here one row of 24 from its 6th token
    on, on a random model whose 8,192 probabilities are all alike.)"""
    from core.engine.generate import SamplingSettings
    from core.engine.grpo import rollout
    from core.engine.objectives.grpo import RowGenerators, prompt_seed
    prompts = [[5, 6, 7, 8, 9], [10, 11, 12], [13, 14, 15, 16]]
    greedy = SamplingSettings(max_new_tokens=8)
    together, _ = rollout(wide, prompts, 8, greedy, {2}, 0, np.random.default_rng(0))
    apart = [c for prompt in prompts for c in rollout(wide, [prompt], 8, greedy, {2}, 0, np.random.default_rng(0))[0]]
    assert together == apart and len(together) == 24
    hot = SamplingSettings(max_new_tokens=8, temperature=1.2, top_p=0.95, top_k=50)
    seeds = [prompt_seed(7, 3, place).spawn(8) for place in range(3)]
    together, _ = rollout(wide, prompts, 8, hot, {2}, 0, RowGenerators([s for group in seeds for s in group]))
    apart = [c for prompt, group in zip(prompts, seeds)
             for c in rollout(wide, [prompt], 8, hot, {2}, 0, RowGenerators(group))[0]]
    same = sum(a == b for a, b in zip(together, apart))
    assert same >= 23 and sum(a[:5] == b[:5] for a, b in zip(together, apart)) == 24
    assert len({tuple(c) for c in together[:8]}) == 8  # a group's rows differ


class _Draws:
    """A generator stand-in that hands out fixed uniforms, one per row per call."""

    def __init__(self, uniforms):
        self.uniforms = np.asarray(uniforms, np.float64)

    def random(self, n):
        assert n == len(self.uniforms)
        return self.uniforms


@needs_kernel
def test_the_kernels_sampler_draws_what_sample_next_draws(wide):
    """The rollouts' whole-vocabulary sampler on the kernel (FusedInference.sample) takes, for the same
    uniform draw, the token numpy's sample_next takes: 2,000 draws over 8 logits at T 0.7 all alike, and their
    frequencies are softmax(logits / 0.7) to 0.03; on 32 rows of 151,936 logits (the 0.5B vocabulary) the
    same tokens; top-k, top-p and greedy settings keep sample_next."""
    from core.engine.generate import SamplingSettings, sample_next
    from core.engine.grpo import rollout_sampler
    kernel, sampler = wide.inference_kernel, rollout_sampler(wide)
    logits = np.array([1.0, 2.5, -0.5, 0.0, 3.0, 2.9, -4.0, 1.5], np.float32)
    uniforms = np.random.default_rng(5).random(2000)
    hot = SamplingSettings(temperature=0.7)
    rows = np.repeat(logits[None], 2000, 0)
    ours, numpy_ = kernel.sample(rows, 0.7, uniforms), sample_next(rows, hot, _Draws(uniforms))
    assert np.array_equal(ours, numpy_)
    assert np.array_equal(sampler(rows, hot, _Draws(uniforms)), ours)
    p = np.exp(logits / 0.7) / np.exp(logits / 0.7).sum()
    np.testing.assert_allclose(np.bincount(ours, minlength=8) / 2000, p, atol=0.03)
    big = np.random.default_rng(6).standard_normal((32, 151936)).astype(np.float32) * 4
    draws = np.random.default_rng(7).random(32)
    assert np.array_equal(kernel.sample(big, 1.0, draws), sample_next(big, SamplingSettings(temperature=1.0),
                                                                     _Draws(draws)))
    calls = []
    kernel_sample = kernel.sample
    kernel.sample = lambda *a: calls.append(1) or kernel_sample(*a)
    try:
        for other in (SamplingSettings(temperature=0.7, top_k=3), SamplingSettings(temperature=0.7, top_p=0.9),
                      SamplingSettings()):
            assert np.array_equal(sampler(rows[:50], other, _Draws(uniforms[:50])),
                                  sample_next(rows[:50], other, _Draws(uniforms[:50])))
    finally:
        kernel.sample = kernel_sample
    assert not calls


def test_logits_from_is_the_last_positions_logits(wide):
    """logits_from=s gives the logits of positions s.. (the head not run on the others), and with targets
    their NLL."""
    from mindspore import Tensor
    ids = Tensor(np.arange(3, 3 + 2 * 9, dtype=np.int32).reshape(2, 9))
    whole = wide(ids).asnumpy()
    tail = wide(ids, None, None, None, None, True, False, 5).asnumpy()
    assert tail.shape == (2, 4, 8192)
    np.testing.assert_allclose(tail, whole[:, 5:], rtol=1e-5, atol=1e-5 * np.abs(whole).max())


# ---- the objective -------------------------------------------------------------------------------

@pytest.mark.slow
def test_a_steps_micro_batches_sample_in_one_call_and_a_smaller_budget_changes_no_draw(tmp_path, monkeypatch):
    """A step of 2 micro batches x 2 prompts x 4 completions: one rollout call of the 4 prompts; with the
    budget cut to a prompt per call, 4 calls sample the same completions (every row's tokens) and the same
    advantages."""
    import core.engine.objectives.grpo as objective
    import core.run.launcher as launcher
    from core.engine.trainer import Cluster, Trainer
    from tests.core.tiny_setup import make_workspace
    workspace = make_workspace(tmp_path)
    config = load_config(workspace, [
        "train.objective=grpo", "early_stopping.monitor=val_reward", "grpo.num_generations=4",
        "grpo.max_prompt_len=48", "grpo.max_new_tokens=8", "train.micro_batch_size=2", "train.grad_accum_steps=2",
        "grpo.temperature=1.3", "eval.baseline=false", "grpo.rewards=[{function: regex, pattern: '.*e.*'}]"])
    trainer = Trainer(config, launcher.create_run(config), Cluster(1))
    trainer.setup()
    calls = []
    sample = objective.rollout

    def counted(model, prompt_ids, *args):
        calls.append(len(prompt_ids))
        return sample(model, prompt_ids, *args)

    monkeypatch.setattr(objective, "rollout", counted)
    micro = trainer.objective.draw(trainer.batches)
    assert [len(b) for b in micro] == [2, 2]
    one, _ = trainer.objective._sample(micro, 1)
    assert calls == [4]
    monkeypatch.setattr(objective, "rollout_prompts", lambda config, args: 1)
    calls.clear()
    split, _ = trainer.objective._sample(micro, 1)
    assert calls == [1, 1, 1, 1]
    for a, b in zip(one, split):
        assert np.array_equal(a.input_ids, b.input_ids) and np.array_equal(a.advantages, b.advantages)
    assert len({tuple(row) for row in one[0].input_ids.tolist()}) > 1
    trainer.objective.rewards.close()
