"""The inference kernel (core/engine/kernels/infer.cc, core.engine.fused.FusedInference): a plain pre-norm
decoder's whole forward in one MindSpore op, with a key/value cache it holds between calls. It serves
generation (core.engine.generate) and lm-eval's log-likelihoods (core.engine.lm_eval_model), so it is held
to what the composed ops are held to: logits equal transformers' (tests/core/hf_fixtures.py's bound),
greedy tokens equal transformers' own generate, lm-eval scores equal the composed path's; and a model the
kernel does not compute says why and keeps the composed ops."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import core.engine.fused as fused

from tests import skips
from tests.core.hf_fixtures import assert_logit_parity, make_hf_model, reference_logits, save_hf_model, torch

try:
    fused.build()
    WHY = None
except fused.KernelUnavailable as exc:  # no C++ compiler: the engine runs composed ops
    WHY = str(exc)
pytestmark = skips.unless(WHY is None, "kernels", f"fused kernels unavailable here: {WHY}")

# families the kernel computes: GQA with llama3 RoPE scaling and an untied head; Qwen2's q/k/v biases and a
# tied head; Mistral's head_dim other than hidden / heads
ELIGIBLE = ["llama-gqa-llama3-rope", "qwen2-tied", "mistral"]
DEMO = Path(__file__).resolve().parents[2] / "models" / "tiny-demo"


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """name -> (transformers model, its saved folder), vocabulary 1024 so the demo's tokenizer fits."""
    out = {}
    for name in ELIGIBLE + ["qwen3-untied", "mistral-window", "llama-tied-bias-linear-rope"]:
        model = make_hf_model(name, vocab_size=1024)
        folder = save_hf_model(model, tmp_path_factory.mktemp(name))
        for file in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(DEMO / file, folder / file)
        out[name] = (model, folder)
    return out


def _load(folder: Path):
    from core.engine.checkpoint import load_hf_model
    from core.engine.fused import enable
    from core.engine.generate import use_device
    use_device("cpu")
    model = load_hf_model(folder, "float32")
    model.set_train(False)
    assert enable(model).startswith("fused")
    return model


def _ids(batch: int, length: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(3, 1000, (batch, length)).astype(np.int32)


@pytest.mark.parametrize("name", ELIGIBLE)
def test_a_full_forward_equals_transformers(folders, name):
    from core.engine.fused import inference_problem
    hf, folder = folders[name]
    model = _load(folder)
    assert inference_problem(model) is None
    ids = _ids(3, 20, seed=1)
    positions = np.tile(np.arange(20, dtype=np.int32), (3, 1))
    ours = model.inference_kernel.forward(model, ids, positions)  # no cache: a prefill through attention.cc
    reference = reference_logits(hf, ids)
    assert_logit_parity(ours, reference, f"{name}, full forward")
    last = model.inference_kernel.forward(model, ids, positions, last_only=True)  # the last layer trimmed
    assert_logit_parity(last[:, 0], reference[:, -1], f"{name}, last token only")


@pytest.mark.slow
@pytest.mark.parametrize("name", ELIGIBLE)
def test_greedy_generation_equals_transformers_for_left_padded_prompts_with_a_shared_prefix(folders, name):
    """Prompts of three lengths sharing a 10-token prefix (core.engine.generate.prefilled runs it once and
    copies its keys and values to every row; the rests are left-padded after it), then eight decoding
    steps: each row's tokens are transformers' greedy tokens for that prompt alone, and the composed
    path's (the same model with the kernel switched off)."""
    from core.engine.generate import SamplingSettings, generate
    hf, folder = folders[name]
    model = _load(folder)
    prefix = list(_ids(1, 10, seed=2)[0])
    prompts = [prefix + list(_ids(1, n, seed=3 + n)[0]) for n in (3, 9, 6)]
    ours = generate(model, prompts, SamplingSettings(max_new_tokens=8), eos_ids=set(), pad_id=0)
    for prompt, tokens in zip(prompts, ours):
        with torch.no_grad():
            out = hf.generate(torch.tensor([prompt]), max_new_tokens=8, do_sample=False, min_new_tokens=8,
                              pad_token_id=0)
        assert tokens == out[0, len(prompt):].tolist()
    kernel, model.inference_kernel = model.inference_kernel, None
    try:
        assert generate(model, prompts, SamplingSettings(max_new_tokens=8), eos_ids=set(), pad_id=0) == ours
    finally:
        model.inference_kernel = kernel


def test_decoding_steps_equal_the_composed_cache_step_by_step(folders):
    """The logits of each decoding step against core.engine.model's composed forward_cached, left padding
    included: the kernel's cache slots, positions and masks are the composed cache's."""
    from mindspore import Tensor
    from core.engine.generate import _left_pad, prefilled
    _, folder = folders["qwen2-tied"]
    model = _load(folder)
    kernel = model.inference_kernel
    prompts = [list(_ids(1, n, seed=n)[0]) for n in (5, 12, 8)]
    ids, valid = _left_pad(prompts, 0)
    positions = np.maximum(np.cumsum(valid, axis=1) - 1, 0).astype(np.int32)
    reference, past = model.forward_cached(Tensor(ids), None, Tensor(positions), Tensor(valid), last_only=True)
    with prefilled(kernel, model, prompts, 5) as (logits, cache, slots, width, step_pos):
        assert_logit_parity(logits, reference.asnumpy()[:, -1], "prefill")
        all_valid = valid
        for step in range(5):
            token = reference.asnumpy()[:, -1].argmax(-1).astype(np.int32).reshape(-1, 1)
            step_pos = step_pos + 1
            all_valid = np.concatenate([all_valid, np.ones((3, 1), bool)], axis=1)
            reference, past = model.forward_cached(Tensor(token), past, Tensor(step_pos), Tensor(all_valid),
                                                   last_only=True)
            slots[:, width + step] = 1.0
            ours = kernel.forward(model, token, step_pos, slots, cache, start=width + step, last_only=True)
            assert_logit_parity(ours[:, -1], reference.asnumpy()[:, -1], f"step {step}")


@pytest.mark.slow
def test_lm_eval_scores_by_shared_contexts_equal_whole_rows(folders):
    """MindtuneLM scores short continuations after their context (one kernel call for a batch's distinct
    contexts, a shared prefix once, then the continuations' other tokens over copies of their context's
    cache) and the rest as whole rows through the composed forward (lm-eval's hf backend's way). Both
    give the same log-likelihoods and greedy flags on requests of every kind: several continuations
    per context, of 1 to 5 tokens, contexts sharing a 12-token prefix, a continuation longer than
    SHARED_CONTEXT_MAX_CONTINUATION and one past max_length (both whole rows)."""
    from core.engine import lm_eval_model as lem
    _, folder = folders["llama-gqa-llama3-rope"]
    lm = lem.MindtuneLM(str(folder), batch_size=3, max_length=100)
    rng = np.random.default_rng(7)
    prefix = list(rng.integers(3, 1000, 12))
    requests = []
    for c in range(7):
        context = prefix + list(rng.integers(3, 1000, 4 + 3 * c)) if c % 2 else list(rng.integers(3, 1000, 5 + c))
        for n in (1, 2, 5, 1):
            requests.append((None, context, list(rng.integers(3, 1000, n))))
    requests.append((None, list(rng.integers(3, 1000, 6)), list(rng.integers(3, 1000, lem.SHARED_CONTEXT_MAX_CONTINUATION + 4))))
    requests.append((None, list(rng.integers(3, 1000, 90)), list(rng.integers(3, 1000, 20))))  # truncated to 101
    assert sum(lm._shareable(r) for r in requests) == 28
    ours = lm._loglikelihood_tokens(requests)
    rows = lm._loglikelihood_rows(requests)
    assert [g for _, g in ours] == [g for _, g in rows]
    difference = max(abs(a - b) for (a, _), (b, _) in zip(ours, rows))
    scale = max(abs(b) for b, _ in rows)
    print(f"\nshared-context vs whole-row log-likelihoods: max |difference| {difference:.2e} on sums up to {scale:.1f}")
    assert difference <= 1e-4 * max(1.0, scale / 10)


@pytest.mark.parametrize("name,why", [("qwen3-untied", "attention"), ("mistral-window", "sliding windows"),
                                      ("llama-tied-bias-linear-rope", "biases")])
def test_a_model_the_kernel_does_not_compute_says_why_and_generates_composed(folders, name, why):
    from core.engine.fused import inference_problem
    from core.engine.generate import SamplingSettings, fused_inference, generate
    _, folder = folders[name]
    model = _load(folder)
    assert why in inference_problem(model)
    assert fused_inference(model) is None
    assert len(generate(model, [[5, 6, 7]], SamplingSettings(max_new_tokens=3), eos_ids=set())[0]) == 3


def test_lora_runs_the_kernel_only_once_merged_and_then_equals_the_composed_model(folders):
    from mindspore import Tensor
    from core.engine.fused import inference_problem
    from core.engine.lora import inject_lora, merge_lora, write_parameter, lora_modules
    _, folder = folders["qwen2-tied"]
    model = _load(folder)
    inject_lora(model, rank=4, alpha=8, dropout=0.0, target_modules=["q_proj", "v_proj"])
    for cell in lora_modules(model).values():  # a trained adapter: B is no longer zero
        write_parameter(cell.lora_b, np.random.default_rng(0).normal(0, 0.2, cell.lora_b.shape).astype(np.float32))
    assert "LoRA" in inference_problem(model)
    merge_lora(model)
    assert inference_problem(model) is None
    ids = _ids(2, 16, seed=9)
    composed = model(Tensor(ids)).asnumpy()
    ours = model.inference_kernel.forward(model, ids, np.tile(np.arange(16, dtype=np.int32), (2, 1)))
    assert_logit_parity(ours, composed, "merged LoRA")


def test_a_cache_is_freed_and_a_freed_one_is_refused(folders):
    _, folder = folders["mistral"]
    model = _load(folder)
    kernel = model.inference_kernel
    with kernel.new_cache(model, 1, 4) as cache:
        handle = cache.handle
        kernel.forward(model, np.array([[5, 6]], np.int32), np.array([[0, 1]], np.int32), None, cache, start=0)
    assert cache.handle == 0
    cache.handle = handle  # as if a caller kept using it
    with pytest.raises(RuntimeError, match="is 20"):
        kernel.forward(model, np.array([[5]], np.int32), np.array([[2]], np.int32), None, cache, start=2)
