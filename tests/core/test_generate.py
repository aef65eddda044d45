"""Generation: the KV cache changes speed, never tokens; greedy matches transformers' generate."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from mindspore import Tensor

from core.engine.checkpoint import load_hf_model
from core.engine.generate import SamplingSettings, choose_next, generate, sample_next

from tests import skips
from tests.core.hf_fixtures import make_hf_model, random_ids, save_hf_model

torch = skips.module("torch")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    hf = make_hf_model("llama-gqa-llama3-rope")
    folder = save_hf_model(hf, tmp_path_factory.mktemp("gen"))
    return hf, load_hf_model(folder)


def greedy_three_ways(hf, ours, prompt: list[int], new_tokens: int = 12) -> tuple[list[int], list[int], list[int]]:
    """Greedy continuations with the KV cache, without it, and from transformers' generate."""
    settings = SamplingSettings(max_new_tokens=new_tokens)
    cached = generate(ours, [prompt], settings)[0]
    uncached = generate(ours, [prompt], settings, use_cache=False)[0]
    ref = hf.generate(torch.tensor([prompt]), max_new_tokens=new_tokens, do_sample=False,
                      pad_token_id=0, eos_token_id=None)[0, len(prompt):].tolist()
    return cached, uncached, ref


@pytest.mark.slow
def test_greedy_with_cache_equals_transformers_and_no_cache(pair):
    hf, ours = pair
    cached, uncached, ref = greedy_three_ways(hf, ours, random_ids(batch=1, length=7)[0].tolist())
    assert cached == uncached == ref
    assert len(cached) == 12


@pytest.mark.slow
def test_left_padded_batch_equals_one_by_one(pair):
    _, ours = pair
    ids = random_ids(batch=3, length=11, seed=5)
    prompts = [ids[0, :4].tolist(), ids[1, :11].tolist(), ids[2, :8].tolist()]
    settings = SamplingSettings(max_new_tokens=6)
    batched = generate(ours, prompts, settings)
    alone = [generate(ours, [p], settings)[0] for p in prompts]
    assert batched == alone


@pytest.mark.slow
def test_stops_at_eos_and_drops_it(pair):
    _, ours = pair
    prompt = random_ids(batch=1, length=7)[0].tolist()
    full = generate(ours, [prompt], SamplingSettings(max_new_tokens=12))[0]
    eos = full[4]
    stopped = generate(ours, [prompt], SamplingSettings(max_new_tokens=12), eos_ids={eos})[0]
    assert stopped == full[: full.index(eos)]


@pytest.mark.slow
def test_sampling_is_seeded_and_top_p_zero_is_greedy(pair):
    _, ours = pair
    prompt = random_ids(batch=1, length=5)[0].tolist()
    hot = SamplingSettings(max_new_tokens=10, temperature=1.5, seed=3)
    assert generate(ours, [prompt], hot) == generate(ours, [prompt], hot)
    assert generate(ours, [prompt], hot) != generate(ours, [prompt], SamplingSettings(10, 1.5, 1.0, seed=4))
    tight = SamplingSettings(max_new_tokens=10, temperature=1.0, top_p=1e-6, seed=3)
    assert generate(ours, [prompt], tight) == generate(ours, [prompt], SamplingSettings(max_new_tokens=10))


def test_top_p_keeps_the_smallest_covering_set():
    logits = np.log(np.array([[0.5, 0.3, 0.15, 0.05]], dtype=np.float32))
    settings = SamplingSettings(temperature=1.0, top_p=0.7)
    rng = np.random.default_rng(0)
    draws = {int(choose_next(logits, settings, rng)[0]) for _ in range(300)}
    assert draws == {0, 1}


def test_top_k_keeps_the_k_likeliest_before_top_p():
    """top_k renormalises over the k likeliest, then top_p keeps the smallest covering set of those (as
    transformers' warpers, in that order)."""
    logits = np.log(np.array([[0.4, 0.3, 0.2, 0.1]], dtype=np.float32))
    rng = np.random.default_rng(0)
    draws = {int(choose_next(logits, SamplingSettings(temperature=1.0, top_k=2), rng)[0]) for _ in range(300)}
    assert draws == {0, 1}
    # top_p 0.75 needs three of all four (0.4 + 0.3 < 0.75) but two of the top 3 renormalised (0.44 + 0.33)
    both = SamplingSettings(temperature=1.0, top_k=3, top_p=0.75)
    assert {int(choose_next(logits, both, rng)[0]) for _ in range(300)} == {0, 1}
    assert {int(choose_next(logits, SamplingSettings(temperature=1.0, top_p=0.75), rng)[0]) for _ in range(300)} \
        == {0, 1, 2}
    with pytest.raises(ValueError, match="top_k = -1: must be a whole number >= 0"):
        SamplingSettings(top_k=-1)


@pytest.mark.slow
@pytest.mark.parametrize("settings", [SamplingSettings(temperature=0.8), SamplingSettings(temperature=1.0, top_k=5),
                                      SamplingSettings(temperature=1.0, top_p=0.7),
                                      SamplingSettings(temperature=1.3, top_k=10, top_p=0.8)])
def test_the_vectorised_sampler_draws_choose_nexts_distribution(settings):
    """sample_next (GRPO's rollouts) keeps the same tokens as choose_next and draws them with its
    probabilities: 20,000 draws of 3 rows within 0.012 of the exact kept distribution."""
    rng = np.random.default_rng(3)
    logits = (rng.normal(size=(3, 40)) * 2).astype(np.float32)
    exact = np.zeros((3, 40))
    for row in range(3):  # the kept set and its renormalised probabilities, as choose_next computes them
        p = np.exp(logits[row] / settings.temperature - (logits[row] / settings.temperature).max())
        p /= p.sum()
        order = np.argsort(-p, kind="stable")[:settings.top_k or None]
        cumulative = np.cumsum(p[order]) / p[order].sum()
        keep = order[:int(np.searchsorted(cumulative, settings.top_p)) + 1]
        exact[row, keep] = p[keep] / p[keep].sum()
    counts = np.zeros((3, 40))
    for _ in range(20000):
        counts[np.arange(3), sample_next(logits, settings, rng)] += 1
    assert np.abs(counts / 20000 - exact).max() < 0.012
    assert not counts[exact == 0].any()


def test_bad_settings_and_overlong_prompt(pair):
    _, ours = pair
    with pytest.raises(ValueError, match="top_p"):
        SamplingSettings(top_p=0)
    with pytest.raises(ValueError, match="exceeds the model's context of 128"):
        generate(ours, [[1] * 120], SamplingSettings(max_new_tokens=20))


def test_last_only_prefill_returns_the_last_positions_logits(pair):
    _, ours = pair
    ids = random_ids(1, 9, seed=5)
    positions, valid = np.arange(9, dtype=np.int32).reshape(1, 9), np.ones((1, 9), dtype=bool)
    every, _ = ours.forward_cached(Tensor(ids), None, Tensor(positions), Tensor(valid))
    last, cache = ours.forward_cached(Tensor(ids), None, Tensor(positions), Tensor(valid), last_only=True)
    assert every.shape[1] == 9 and last.shape[1] == 1
    np.testing.assert_allclose(last.asnumpy()[:, 0], every.asnumpy()[:, -1], rtol=1e-5, atol=1e-5)
    assert cache[0][0].shape[2] == 9  # the cache still holds every prompt position


@pytest.mark.slow
def test_use_device_launches_cpu_ops_synchronously():
    """MindSpore's asynchronous PyNative queue cost 2-4 ms per op here; use_device turns it off on
    the CPU. A fresh process: the setting is global and cannot be undone."""
    code = ("from mindspore._c_expression import RuntimeConf\n"
            "from core.engine.generate import use_device\n"
            "conf = RuntimeConf.get_instance(); before = conf.is_launch_blocking()\n"
            "use_device('cpu'); print(before, conf.is_launch_blocking())\n")
    env = {k: v for k, v in os.environ.items() if k != "MS_DEV_LAUNCH_BLOCKING"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-2:] == ["False", "True"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mistral-window", "qwen3-tied-window", "qwen3-untied", "glm4", "olmo2"])
def test_families_generate_as_transformers_with_and_without_cache(name, tmp_path):
    """Greedy continuations past the sliding window (7 and 6 tokens in the window fixtures), with
    the cache, without it, and from transformers' generate; a left-padded batch equals each prompt
    alone (the window counts real tokens, not padding)."""
    hf = make_hf_model(name)
    ours = load_hf_model(save_hf_model(hf, tmp_path))
    prompt = random_ids(batch=1, length=7)[0].tolist()
    cached, uncached, ref = greedy_three_ways(hf, ours, prompt)
    assert cached == uncached == ref
    prompts = [prompt[:3], prompt, prompt[:5]]
    assert generate(ours, prompts, SamplingSettings(max_new_tokens=9)) == \
        [generate(ours, [p], SamplingSettings(max_new_tokens=9))[0] for p in prompts]
