"""Preference objectives (core.engine.preference) against PyTorch: on a tiny transformers-made model with
LoRA (PEFT), a fixed batch of pairs gives the same loss and the same LoRA gradients as each published
formula written out on transformers' log-probabilities, the reference being the PEFT model with its
adapter disabled."""
import numpy as np
import pytest

from core.engine.checkpoint import load_hf_model
from core.engine.model import share_layer_graphs
from core.engine.lora import inject_lora, lora_modules, mark_only_lora_trainable, write_parameter
from core.engine.preference import Objective, PreferenceStep, summarize
from core.engine.train_step import WarmupDecaySchedule, adamw

from tests import skips
from tests.core.hf_fixtures import VOCAB, copy_lora_to_peft, make_hf_model, save_hf_model

torch = skips.module("torch")
peft = skips.module("peft")
F = torch.nn.functional

TARGETS = ["q_proj", "v_proj", "o_proj", "up_proj", "down_proj"]
PAIRS = 3


def _pair_batch(seed=3):
    """3 pairs as 6 rows (chosen rows 0-2, rejected rows 3-5): shared prompts of 5-7 tokens masked,
    answers of different lengths, right padding (attention 0, label -100)."""
    rng = np.random.default_rng(seed)
    chosen_rows, rejected_rows = [], []
    for i in range(PAIRS):
        prompt = rng.integers(1, VOCAB, 5 + i)
        chosen_rows.append((prompt, rng.integers(1, VOCAB, 4 + 2 * i)))
        rejected_rows.append((prompt, rng.integers(1, VOCAB, 8 - 2 * i)))
    rows = chosen_rows + rejected_rows
    length = max(len(p) + len(a) for p, a in rows)
    ids = np.zeros((len(rows), length), np.int32)
    labels = np.full((len(rows), length), -100, np.int32)
    mask = np.zeros((len(rows), length), np.int32)
    for r, (prompt, answer) in enumerate(rows):
        seq = np.concatenate([prompt, answer])
        ids[r, :len(seq)], mask[r, :len(seq)] = seq, 1
        labels[r, len(prompt):len(seq)] = answer
    return ids, labels, mask


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pref-model")
    hf = make_hf_model("qwen2-tied")
    save_hf_model(hf, folder)
    return folder


def _torch_logps(model, ids, labels, mask):
    logits = model(input_ids=torch.tensor(ids, dtype=torch.long), attention_mask=torch.tensor(mask)).logits.float()
    targets = torch.tensor(labels[:, 1:], dtype=torch.long)
    valid = targets != -100
    picked = torch.gather(F.log_softmax(logits[:, :-1], -1), 2, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return (picked * valid).sum(1), valid.sum(1).float()


def _reference_loss(o: Objective, logps, counts, ref, kto_labels):
    """The published formulas (as TRL's DPO/CPO(SimPO)/ORPO/KTO trainers compute them)."""
    b = PAIRS
    if o.name == "kto":
        ratio = logps - ref
        kl = ratio.mean().detach().clamp(min=0)
        y = torch.tensor(kto_labels)
        losses = torch.where(y > 0, o.kto_desirable_weight * (1 - torch.sigmoid(o.beta * (ratio - kl))),
                             o.kto_undesirable_weight * (1 - torch.sigmoid(o.beta * (kl - ratio))))
        return losses.mean()
    avg = logps / counts
    if o.name == "dpo" and o.loss_type == "ipo":
        ravg = ref / counts
        z = (avg[:b] - ravg[:b]) - (avg[b:] - ravg[b:])
        return ((z - 1 / (2 * o.beta)) ** 2).mean()
    if o.name == "dpo":
        z = o.beta * ((logps[:b] - ref[:b]) - (logps[b:] - ref[b:]))
    elif o.name == "simpo":
        z = o.beta * (avg[:b] - avg[b:]) - o.simpo_gamma
    else:  # orpo
        log_odds = (avg[:b] - avg[b:]) - (torch.log1p(-torch.exp(avg[:b])) - torch.log1p(-torch.exp(avg[b:])))
        nll = -logps[:b].sum() / counts[:b].sum()
        return nll - o.orpo_lambda * F.logsigmoid(log_odds).mean()
    ls = o.label_smoothing
    return (-(1 - ls) * F.logsigmoid(z) - ls * F.logsigmoid(-z)).mean()


OBJECTIVES = {
    "dpo-sigmoid-smoothed": Objective("dpo", beta=0.5, label_smoothing=0.1),
    "dpo-ipo": Objective("dpo", beta=0.5, loss_type="ipo"),
    "simpo": Objective("simpo", beta=2.0, simpo_gamma=0.7),
    "orpo": Objective("orpo", orpo_lambda=0.3),
    "kto": Objective("kto", beta=0.5, kto_desirable_weight=1.3, kto_undesirable_weight=0.8),
}


@pytest.mark.slow  # even its one quick case (~5 s quiet) is too long for make test-fast
@pytest.mark.parametrize("case", [c if c == "dpo-sigmoid-smoothed" else pytest.param(c, marks=pytest.mark.slow)
                                  for c in OBJECTIVES])
def test_loss_and_lora_gradients_match_pytorch(setup, case):
    folder = setup
    hf = make_hf_model("qwen2-tied")  # PEFT wraps it in place: a fresh copy each case
    objective = OBJECTIVES[case]
    ids, labels, mask = _pair_batch()
    kto_labels = np.array([1, 0, 1, 0, 0, 1], np.float32)  # KTO: each row an answer with its own label

    ours = load_hf_model(folder)
    inject_lora(ours, 4, 8, 0.0, TARGETS)
    rng = np.random.default_rng(7)
    for cell in lora_modules(ours).values():  # B ≠ 0: the adapter changes the model, so the reference differs
        write_parameter(cell.lora_b, rng.normal(0, 0.05, cell.lora_b.shape).astype(np.float32))
    params = mark_only_lora_trainable(ours)
    ours.set_train(True)
    step = PreferenceStep(ours, adamw(params, WarmupDecaySchedule(1e-3, 0, 10, "constant", 1.0), 0.0), None, None,
                          objective)
    loss, grads, figures = step.loss_and_grads(ids, labels, mask, kto_labels)

    reference = peft.get_peft_model(hf, peft.LoraConfig(r=4, lora_alpha=8, target_modules=TARGETS, lora_dropout=0.0))
    torch_params = copy_lora_to_peft(ours, reference)
    with torch.no_grad(), reference.disable_adapter():
        ref, _ = _torch_logps(reference, ids, labels, mask)
    logps, counts = _torch_logps(reference, ids, labels, mask)
    expected = _reference_loss(objective, logps, counts, ref, kto_labels)
    expected.backward()

    assert loss == pytest.approx(float(expected), rel=1e-5)
    assert float((logps - ref).abs().max()) > 1e-2  # the adapter matters: the reference pass really has it off
    worst = 0.0
    for param, grad in zip(step.optimizer.parameters, grads):
        module, which = param.name.rsplit(".", 1)
        want = torch_params[f"base_model.model.{module}.{'lora_A' if which == 'lora_a' else 'lora_B'}.default.weight"].grad
        want = want.numpy()
        worst = max(worst, float(np.linalg.norm(grad - want) / np.linalg.norm(want)))
    assert worst < 1e-5, f"largest relative gradient difference {worst:.2e}"
    print(f"{case}: loss {loss:.6g} vs {float(expected):.6g}, worst LoRA gradient difference {worst:.2e}")
    # the figures: rewards as the loss defines them
    got = summarize(objective, figures)
    if objective.paired:
        chosen = float((logps[:PAIRS] - ref[:PAIRS]).mean()) * objective.beta if objective.name == "dpo" and \
            objective.loss_type == "sigmoid" else None
        if chosen is not None:
            assert got["chosen_reward"] == pytest.approx(chosen, abs=1e-5)  # a difference of two log-probs
        assert got["chosen_logp"] == pytest.approx(float(logps[:PAIRS].mean()), rel=1e-5)
        assert got["rejected_logp"] == pytest.approx(float(logps[PAIRS:].mean()), rel=1e-5)


def test_memory_estimate_counts_the_reference_copy_and_the_pair_rows():
    from core.spec.config import Config
    from core.spec.memory import estimate_memory
    from core.spec.model_args import ModelArgs
    args = ModelArgs.from_hf_config({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 1000,
                                     "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                                     "num_attention_heads": 4, "num_key_value_heads": 2,
                                     "max_position_embeddings": 128})

    def estimate(**changes):
        cfg = Config.from_dict({"method": "full", "data": {"packing": False}, **changes})
        return estimate_memory(cfg, args, 64)
    sft, dpo = estimate(), estimate(train={"objective": "dpo"})
    assert dpo.weights_mb - sft.weights_mb == pytest.approx(args.num_parameters() * 4 / 2**20)
    assert dpo.activations_mb == pytest.approx(2 * sft.activations_mb)
    assert any("frozen reference copy" in n for n in dpo.notes)
    lora = estimate(method="lora", train={"objective": "dpo"})
    assert lora.weights_mb == pytest.approx(estimate(method="lora").weights_mb)


@pytest.mark.slow
def test_a_reference_adapter_makes_the_reference_that_model(setup):
    """A run forked from a LoRA checkpoint: the reference is the base plus a frozen copy of the forked
    adapter, so at the fork point the reference's log-probabilities are the policy's."""
    from mindspore import Tensor
    ours = load_hf_model(setup)
    inject_lora(ours, 4, 8, 0.0, TARGETS)
    rng = np.random.default_rng(7)
    for cell in lora_modules(ours).values():
        write_parameter(cell.lora_b, rng.normal(0, 0.05, cell.lora_b.shape).astype(np.float32))
    params = mark_only_lora_trainable(ours)
    step = PreferenceStep(ours, adamw(params, WarmupDecaySchedule(1e-3, 0, 10, "constant", 1.0), 0.0), None, None,
                          Objective("dpo"))
    share_layer_graphs(ours)  # as a run: each layer must take its own reference adapter
    ids, labels, mask = _pair_batch()
    without = step.reference_logps(ids, labels, mask).asnumpy()
    for name, cell in lora_modules(ours).items():
        cell.set_reference_adapter(name, cell.lora_a.asnumpy(), cell.lora_b.asnumpy())
    step = PreferenceStep(ours, step.optimizer, None, None, Objective("dpo"))  # compiled afresh, as a run does
    with_adapter = step.reference_logps(ids, labels, mask).asnumpy()
    policy = step._policy(Tensor(ids), Tensor(labels), Tensor(mask))[0].asnumpy()
    assert np.abs(without - policy).max() > 1e-2
    np.testing.assert_allclose(with_adapter, policy, rtol=1e-5, atol=1e-5)
