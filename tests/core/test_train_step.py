"""The compiled train step against PyTorch + PEFT: same LoRA, same AdamW, same batches -> the same
loss curve. Also the schedule and the loss."""
import numpy as np
import pytest

import mindspore as ms

from core.checkpoint import load_hf_model
from core.lora import inject_lora, lora_state_dict, mark_only_lora_trainable
from core.train_step import TrainStep, WarmupDecaySchedule, adamw, causal_lm_loss_sum, lr_at
from tests.core.hf_fixtures import make_hf_model, save_hf_model

torch = pytest.importorskip("torch")
peft = pytest.importorskip("peft")

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def test_lora_adamw_loss_curve_matches_pytorch_peft(tmp_path):
    hf = make_hf_model("llama-gqa-llama3-rope")
    save_hf_model(hf, tmp_path)
    ours = load_hf_model(tmp_path)
    inject_lora(ours, 8, 16, 0.0, TARGETS)
    params = mark_only_lora_trainable(ours)
    ours.set_train(True)
    step = TrainStep(ours, adamw(params, WarmupDecaySchedule(1e-2, 0, 100, "constant", 0.1), 0.01), None, None)

    reference = peft.get_peft_model(hf, peft.LoraConfig(r=8, lora_alpha=16, target_modules=TARGETS, lora_dropout=0.0))
    state = {}
    for name, value in lora_state_dict(ours).items():
        module, which = name.rsplit(".", 1)
        state[f"base_model.model.{module}.{'lora_A' if which == 'lora_a' else 'lora_B'}.default.weight"] = torch.tensor(value)
    assert not reference.load_state_dict(state, strict=False).unexpected_keys
    optimizer = torch.optim.AdamW([p for p in reference.parameters() if p.requires_grad], lr=1e-2,
                                  betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 97, (4, 32)).astype(np.int32)
    labels = ids.copy()
    labels[:, :20] = -100
    mask = np.ones_like(ids)
    ours_losses, torch_losses = [], []
    for _ in range(12):
        ours_losses.append(step([(ids, labels, mask)])[0])
        out = reference(torch.tensor(ids, dtype=torch.long), labels=torch.tensor(labels, dtype=torch.long))
        out.loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch_losses.append(float(out.loss))
    assert ours_losses[-1] < ours_losses[0] - 0.5, "12 Adam steps at lr 1e-2 must fit this batch"
    # MindSpore's Adam adds eps to the uncorrected sqrt(v) (the "epsilon hat" form): ~1e-4 apart
    np.testing.assert_allclose(ours_losses, torch_losses, atol=2e-3)


def test_schedule_warmup_then_cosine_to_min():
    schedule = WarmupDecaySchedule(1e-3, 10, 110, "cosine", 0.1)
    assert lr_at(schedule, 0) == pytest.approx(1e-3 / 11)
    assert lr_at(schedule, 9) == pytest.approx(1e-3 * 10 / 11)
    assert lr_at(schedule, 10) == pytest.approx(1e-3)
    assert lr_at(schedule, 60) == pytest.approx(1e-4 + 0.5 * 9e-4, rel=1e-5)
    assert lr_at(schedule, 110) == pytest.approx(1e-4)
    linear = WarmupDecaySchedule(1e-3, 0, 100, "linear", 0.0)
    assert lr_at(linear, 50) == pytest.approx(5e-4)


def test_loss_is_token_weighted_mean_over_labelled_next_tokens():
    logits = np.log(np.array([[[0.5, 0.5], [0.9, 0.1], [0.2, 0.8]]], np.float32))
    labels = np.array([[-100, 0, 1]], np.int32)  # targets for positions 0 and 1
    total, count = causal_lm_loss_sum(ms.Tensor(logits), ms.Tensor(labels))
    assert float(count.asnumpy()) == 2
    assert float(total.asnumpy()) == pytest.approx(-(np.log(0.5) + np.log(0.1)), rel=1e-5)
