"""core.engine.lora.LoRADense picks its forward from its settings when it is built, and again when one
changes (issue 38): each path's name and its numbers against numpy."""
import numpy as np
import pytest

import mindspore as ms
from mindspore import Tensor, nn

from core.engine.layers import use_amp_o1
from core.engine.lora import LoRADense, lora_merged
from core.engine.preference import adapters_off

RANK, ALPHA = 2, 4.0


@pytest.fixture
def layer():
    rng = np.random.default_rng(0)
    cell = LoRADense(nn.Dense(6, 5, has_bias=True), RANK, ALPHA)
    cell.weight.set_data(Tensor(rng.normal(size=(5, 6)).astype(np.float32)))
    cell.bias.set_data(Tensor(rng.normal(size=5).astype(np.float32)))
    cell.lora_a.set_data(Tensor(rng.normal(size=(RANK, 6)).astype(np.float32)))
    cell.lora_b.set_data(Tensor(rng.normal(size=(5, RANK)).astype(np.float32)))
    cell.set_train(False)
    return cell


def expected(cell, x, adapter=True, reference=None):
    out = x @ cell.weight.asnumpy().T + cell.bias.asnumpy()
    a, b = (cell.lora_a.asnumpy(), cell.lora_b.asnumpy()) if reference is None else reference
    return out + (x @ a.T @ b.T) * (ALPHA / RANK) if adapter or reference is not None else out


X = np.random.default_rng(1).normal(size=(3, 4, 6)).astype(np.float32)  # (B, T, in)


def run(cell) -> np.ndarray:
    return cell(Tensor(X)).asnumpy()


def test_a_new_layer_runs_the_composed_path(layer):
    assert (layer.path, layer.in_amp) == ("composed", False)
    np.testing.assert_allclose(run(layer), expected(layer, X), rtol=1e-5, atol=1e-5)


def test_the_reference_pass_runs_the_base_alone_then_the_path_comes_back(layer):
    with adapters_off(layer):
        assert layer.path == "base"
        np.testing.assert_allclose(run(layer), expected(layer, X, adapter=False), rtol=1e-5, atol=1e-5)
    assert layer.path == "composed"


def test_a_reference_adapter_is_added_while_the_adapter_is_off(layer):
    a, b = np.full((RANK, 6), 0.1, np.float32), np.full((5, RANK), -0.2, np.float32)
    layer.set_reference_adapter("q", a, b)
    assert layer.path == "composed"
    with adapters_off(layer):
        assert layer.path == "reference"
        np.testing.assert_allclose(run(layer), expected(layer, X, reference=(a, b)), rtol=1e-5, atol=1e-5)


def test_merged_runs_the_dense_product_on_the_merged_weight(layer):
    before = run(layer)
    with lora_merged(layer):
        assert layer.path == "merged"
        np.testing.assert_allclose(run(layer), before, rtol=1e-5, atol=1e-5)
    assert layer.path == "composed"


def test_amp_o1_runs_the_path_in_16_bits(layer):
    full = run(layer)
    assert use_amp_o1(layer, ms.float16) == 1
    assert (layer.path, layer.in_amp) == ("composed", True)
    out = layer(Tensor(X))
    assert out.dtype == ms.float32  # the sum back in x's dtype
    np.testing.assert_allclose(out.asnumpy(), full, rtol=2e-2, atol=2e-2)
    with lora_merged(layer):
        assert (layer.path, layer.in_amp) == ("merged_amp", False)
