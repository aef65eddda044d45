"""Packing through the model and the train/eval steps: each sample's loss packed equals its loss
alone in a padded row (to 1e-5), with the composed attention and with the fused kernel; one
optimizer step on packed rows equals one on the same samples unpacked (the loss is normalised per
real token either way); the evaluation sums agree."""
import numpy as np
import pytest

import mindspore as ms
from mindspore import Tensor

import core.engine.fused as fused
from core.data.pipeline import IGNORE_INDEX, Sample, collate, eval_batches
from core.data.packing import collate_packed, pack_rows
from core.engine.generate import use_device
from core.engine.model import CausalLM, ModelArgs
from core.engine.train_step import EvalStep, TrainStep, WarmupDecaySchedule, adamw, step_inputs

from tests import skips

VOCAB, ROW = 61, 64
CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": VOCAB, "hidden_size": 32,
          "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
          "max_position_embeddings": 128, "tie_word_embeddings": True, "rms_norm_eps": 1e-5, "rope_theta": 10000.0}

try:
    KERNEL = fused.build()
except fused.KernelUnavailable:
    KERNEL = None
MODES = ["composed", pytest.param("fused", marks=skips.unless(KERNEL is not None, "kernels", "no C++ compiler"))]


def samples(seed: int = 0) -> list[Sample]:
    """Samples of varied lengths: prompt-masked ones and one trained on every token (text)."""
    rng = np.random.default_rng(seed)
    out = []
    for n, prompt in ((20, 8), (9, 3), (31, 12), (14, 0), (6, 2), (25, 10), (17, 5)):
        ids = rng.integers(3, VOCAB, n).astype(np.int32)
        labels = ids.copy()
        labels[:prompt] = IGNORE_INDEX
        out.append(Sample(ids, labels))
    return out


def make_model(mode: str, seed: int = 0) -> CausalLM:
    use_device("cpu")
    ms.set_seed(seed)
    model = CausalLM(ModelArgs.from_hf_config(CONFIG))
    if mode == "fused":
        assert fused.enable(model).startswith("fused")
    model.set_train(False)
    return model


def token_nll(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """(B, T) NLL of each position's next-token target (0 where none), float64."""
    logits = logits.astype(np.float64)
    targets = np.concatenate([labels[:, 1:], np.full((labels.shape[0], 1), IGNORE_INDEX)], 1)
    shifted = logits - logits.max(-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    picked = np.take_along_axis(log_probs, np.maximum(targets, 0)[..., None], -1)[..., 0]
    return np.where(targets != IGNORE_INDEX, -picked, 0.0)


def forward(model: CausalLM, batch: dict) -> np.ndarray:
    packed = [Tensor(batch[k]) for k in ("position_ids", "segment_ids") if k in batch]
    return model(Tensor(batch["input_ids"]), Tensor(batch["attention_mask"]), *packed).asnumpy()


def per_sample_losses_unpacked(model, items: list[Sample]) -> list[float]:
    out = []
    for sample in items:
        batch = collate([sample], ROW)
        nll = token_nll(forward(model, batch), batch["labels"])
        out.append(nll.sum() / (sample.labels[1:] != IGNORE_INDEX).sum())
    return out


def per_sample_losses_packed(model, items: list[Sample]) -> tuple[list[float], int]:
    rows = pack_rows([len(s) for s in items], ROW)
    batch = collate_packed([[(items[i].input_ids, items[i].labels) for i in row] for row in rows], ROW)
    nll = token_nll(forward(model, batch), batch["labels"])
    targets = np.concatenate([batch["labels"][:, 1:], np.full((len(rows), 1), IGNORE_INDEX)], 1) != IGNORE_INDEX
    losses = {}
    for r, row in enumerate(rows):
        for segment, index in enumerate(row, start=1):
            where = batch["segment_ids"][r] == segment
            losses[index] = nll[r, where].sum() / targets[r, where].sum()
    return [losses[i] for i in range(len(items))], len(rows)


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_each_sample_loss_is_the_same_packed_and_unpacked(mode):
    model = make_model(mode)
    items = samples()
    unpacked = per_sample_losses_unpacked(model, items)
    packed, rows = per_sample_losses_packed(model, items)
    assert rows < len(items) // 2  # the samples really share rows
    np.testing.assert_allclose(packed, unpacked, rtol=0, atol=1e-5)
    # without segment ids the packed samples would see each other: the losses differ
    rows_of = pack_rows([len(s) for s in items], ROW)
    batch = collate_packed([[(items[i].input_ids, items[i].labels) for i in row] for row in rows_of], ROW)
    leaky = token_nll(model(Tensor(batch["input_ids"]), Tensor(batch["attention_mask"])).asnumpy(), batch["labels"])
    proper = token_nll(forward(model, batch), batch["labels"])
    assert abs(leaky.sum() - proper.sum()) > 1e-2


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_eval_step_sums_agree_packed_and_unpacked(mode):
    model = make_model(mode)
    step = EvalStep(model)
    items = samples(1)
    sums = {}
    for packing in (False, True):
        nll = tokens = 0.0
        for batch in eval_batches(items, 4, ROW, packing=packing):
            n, t = step(*step_inputs(batch))
            nll, tokens = nll + n, tokens + t
        sums[packing] = (nll, tokens)
    assert sums[True][1] == sums[False][1]  # the same real tokens: validation loss per real token
    np.testing.assert_allclose(sums[True][0] / sums[True][1], sums[False][0] / sums[False][1], rtol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_one_train_step_packed_equals_unpacked(mode):
    items = samples(2)
    rows = pack_rows([len(s) for s in items], ROW)
    batches = {False: collate(items, ROW),
               True: collate_packed([[(items[i].input_ids, items[i].labels) for i in row] for row in rows], ROW)}
    results = {}
    for packing, batch in batches.items():
        model = make_model(mode, seed=3)
        model.set_train(True)
        params = list(model.trainable_params())
        step = TrainStep(model, adamw(params, WarmupDecaySchedule(1e-2, 0, 10, "constant", 1.0), 0.0), 1.0, None)
        loss, norm, applied, _ = step([step_inputs(batch)])
        results[packing] = (loss, norm, {p.name: p.asnumpy().copy() for p in params})
    assert results[True][0] == pytest.approx(results[False][0], abs=1e-5)
    assert results[True][1] == pytest.approx(results[False][1], rel=1e-4)
    for name, value in results[False][2].items():
        np.testing.assert_allclose(results[True][2][name], value, rtol=0, atol=1e-5, err_msg=name)


# ---- the worker (python -m core.train) with packing and length grouping ------------------------

@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    from tests.core.tiny_setup import make_workspace
    return make_workspace(tmp_path_factory.mktemp("ws"))


def run_records(workspace, *overrides):
    from tests.core.test_train import records, run_cli
    run = run_cli(workspace, "eval.downstream=false", *overrides)
    assert run.read_status().state == "finished", run.read_status()
    return run, records(run, "train"), records(run, "eval"), records(run, "event")


@pytest.mark.slow
def test_worker_packs_rows_resumes_exactly_and_evaluates_per_real_token(workspace):
    run, train, evals, events = run_records(workspace, "data.packing=true")
    setup = next(e for e in events if e["event"] == "setup")
    assert setup["seq_len"] == 64 and setup["data"]["packed_seq_len"] == 64  # rows of max_seq_len
    _, _, plain_evals, _ = run_records(workspace)
    base, plain_base = evals[0], plain_evals[0]
    assert base["base"] and plain_base["base"]
    # the base model's validation loss is the same packed and unpacked: every real token once, per token
    assert base["val_tokens"] == plain_base["val_tokens"]
    assert base["val_loss"] == pytest.approx(plain_base["val_loss"], abs=1e-5)
    resumed, tail, _, _ = run_records(workspace, "data.packing=true", f"run.resume={run.checkpoints_dir / 'step-4'}")
    full = {r["step"]: r["loss"] for r in train}
    assert sorted(r["step"] for r in tail) == [5, 6, 7, 8]
    for record in tail:
        assert abs(record["loss"] - full[record["step"]]) <= 1e-5


@pytest.mark.slow
def test_worker_groups_by_length(workspace):
    _, train, evals, _ = run_records(workspace, "data.group_by_length=true", "train.max_steps=4", "train.eval_every=4")
    assert len(train) == 4 and all(np.isfinite(r["loss"]) for r in train)
    assert np.isfinite(evals[-1]["val_loss"])
