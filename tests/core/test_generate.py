"""Generation: the KV cache changes speed, never tokens; greedy matches transformers' generate."""
import numpy as np
import pytest

from core.checkpoint import load_hf_model
from core.generate import SamplingSettings, choose_next, generate
from tests.core.hf_fixtures import make_hf_model, random_ids, save_hf_model

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    hf = make_hf_model("llama-gqa-llama3-rope")
    folder = save_hf_model(hf, tmp_path_factory.mktemp("gen"))
    return hf, load_hf_model(folder)


def test_greedy_with_cache_equals_transformers_and_no_cache(pair):
    hf, ours = pair
    prompt = random_ids(batch=1, length=7)[0].tolist()
    settings = SamplingSettings(max_new_tokens=12)
    cached = generate(ours, [prompt], settings)[0]
    uncached = generate(ours, [prompt], settings, use_cache=False)[0]
    ref = hf.generate(torch.tensor([prompt]), max_new_tokens=12, do_sample=False,
                      pad_token_id=0, eos_token_id=None)[0, 7:].tolist()
    assert cached == uncached == ref
    assert len(cached) == 12


def test_left_padded_batch_equals_one_by_one(pair):
    _, ours = pair
    ids = random_ids(batch=3, length=11, seed=5)
    prompts = [ids[0, :4].tolist(), ids[1, :11].tolist(), ids[2, :8].tolist()]
    settings = SamplingSettings(max_new_tokens=6)
    batched = generate(ours, prompts, settings)
    alone = [generate(ours, [p], settings)[0] for p in prompts]
    assert batched == alone


def test_stops_at_eos_and_drops_it(pair):
    _, ours = pair
    prompt = random_ids(batch=1, length=7)[0].tolist()
    full = generate(ours, [prompt], SamplingSettings(max_new_tokens=12))[0]
    eos = full[4]
    stopped = generate(ours, [prompt], SamplingSettings(max_new_tokens=12), eos_ids={eos})[0]
    assert stopped == full[: full.index(eos)]


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


def test_bad_settings_and_overlong_prompt(pair):
    _, ours = pair
    with pytest.raises(ValueError, match="top_p"):
        SamplingSettings(top_p=0)
    with pytest.raises(ValueError, match="exceeds the model's context of 128"):
        generate(ours, [[1] * 120], SamplingSettings(max_new_tokens=20))
