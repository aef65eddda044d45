"""The tiny demo on a GPU or Ascend device, against the same run on the CPU (issues 30, 40). Every run is
a `python -m core.train` subprocess, as the console starts it, and each test asserts what ran:

- the path: the setup event's `kernels` line says the device's attention and loss, and on Ascend the
  chip MindSpore reported; the attention must be the one core.spec.device_paths.attention_path picks
  for that chip, dtype and head size (FlashAttentionScore only on a 910B/910C with a head size that
  is a multiple of 16: the tiny model's head size is 8, a second model's 16);
- fp32 LoRA: the first steps' losses within 1e-4 of the CPU's; fp16 O2 within 1e-2;
- the export of the device's checkpoint, reloaded by transformers and peft, against mindtune's own
  logits of that checkpoint (<= 1e-4);
- data parallel 2 (two devices): the losses of DP=1 with the same global batch (1e-4), and one rank's
  overflow (MINDTUNE_TEST_OVERFLOW_AT) skipping the step on both;
- memory: on a model large enough that constant terms do not dominate (25M parameters, hidden 512,
  8 layers, 4 × 512 packed tokens, full fine-tuning), the allocator's peak within ±15% of the
  estimate less its runtime part;
- resume, the dry run (with the device's own memory), one profiled step with the device's table.

    MINDTUNE_DEVICE=gpu MINDTUNE_REQUIRE_DEVICE=1 .venv/bin/python -m pytest -m device tests/device
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from core.spec.config import load_config
from core.spec.device_paths import attention_path
from core.spec.memory import estimate_memory
from core.spec.model_args import read_model_args
from core.run.rundir import RunDir
from tests.core.tiny_setup import make_model, make_workspace
from tests.device.conftest import skip_or_fail

ROOT = Path(__file__).resolve().parents[2]
STEPS = 6
FIRST_STEPS = 3  # fp32: the first steps' losses within 1e-4 of the CPU's (reduction orders differ later)
FP32_TOLERANCE = 1e-4


def run_train(config: Path, *overrides: str, timeout: int = 1200, env: dict | None = None) -> RunDir:
    runs_dir = Path(yaml.safe_load(config.read_text())["run"]["runs_dir"])
    before = set(runs_dir.glob("*")) if runs_dir.exists() else set()
    done = subprocess.run([sys.executable, "-m", "core.train", "--config", str(config), *overrides], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "GLOG_v": "3", **(env or {})})
    new = [p for p in runs_dir.iterdir() if p not in before and not p.is_symlink()]
    assert done.returncode == 0 and len(new) == 1, done.stderr[-3000:]
    return RunDir(new[0])


def records(run: RunDir, kind: str = "train") -> list[dict]:
    return [r for r in map(json.loads, run.metrics_path.read_text().splitlines()) if r["kind"] == kind]


def setup_event(run: RunDir) -> dict:
    return next(r for r in records(run, "event") if r.get("event") == "setup")


def losses(run: RunDir) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in records(run)}


def assert_path(run: RunDir, device: str, dtype: str, head_dim: int) -> str:
    """The setup event's `kernels` line names the device's paths, and its attention is the one the rule
    picks for the chip the worker read (Ascend: "ascend (<soc>): ..."). Returns the line."""
    kernels = setup_event(run)["kernels"]
    assert kernels.startswith(f"{device}"), kernels
    assert "LM head + loss chunked (no logits)" in kernels, kernels  # a LoRA run's frozen, tied head
    soc = None
    if device == "ascend":
        found = re.match(r"ascend \(([^)]*)\): ", kernels)
        assert found, kernels
        soc = found.group(1) if found.group(1) not in ("None", "") else None
    path, why = attention_path(device, dtype, head_dim=head_dim, soc=soc)
    assert ("attention: FlashAttentionScore" in kernels) is (path == "flash"), (kernels, path, str(why))
    if path != "flash":
        assert str(why) in kernels, (kernels, str(why))
    return kernels


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    return make_workspace(tmp_path_factory.mktemp("device"), train__max_steps=STEPS, train__save_every=3,
                          train__eval_every=3)


@pytest.fixture(scope="module")
def workspace16(tmp_path_factory) -> Path:
    """The same workspace with a head size of 16 (hidden 64, 4 heads): FlashAttentionScore's smallest."""
    from core.data.tokenizer import Tokenizer
    config = make_workspace(tmp_path_factory.mktemp("device16"), train__max_steps=STEPS, train__save_every=100,
                            train__eval_every=STEPS)
    model = config.parent / "tiny-model"
    make_model(model, Tokenizer.from_dir(model).vocab_size, hidden_size=64, intermediate_size=128)
    return config


@pytest.fixture(scope="module")
def cpu_run(workspace) -> RunDir:
    return run_train(workspace, "parallel.device=cpu")


@pytest.fixture(scope="module")
def device_run(workspace, device) -> RunDir:
    return run_train(workspace, f"parallel.device={device}", "train.profile_steps=[2,2]")


def test_fp32_lora_matches_the_cpu_and_says_its_path(cpu_run, device_run, device):
    assert_path(device_run, device, "float32", head_dim=8)
    cpu, dev = losses(cpu_run), losses(device_run)
    assert sorted(dev) == sorted(cpu) == list(range(1, STEPS + 1))
    first = {step: abs(dev[step] - cpu[step]) for step in range(1, FIRST_STEPS + 1)}
    assert max(first.values()) <= FP32_TOLERANCE, (first, dev, cpu)
    assert all(abs(dev[step] - cpu[step]) <= 1e-2 for step in cpu), (dev, cpu)


def test_fp16_o2_lora_matches_the_cpu_and_says_its_path(workspace, cpu_run, device):
    run = run_train(workspace, f"parallel.device={device}", "precision.amp_level=O2",
                    "precision.compute_dtype=float16")
    assert_path(run, device, "float16", head_dim=8)  # head size 8: composed, on every chip
    cpu = losses(cpu_run)
    train = records(run)
    for record in train:
        assert abs(record["loss"] - cpu[record["step"]]) <= 1e-2, record
    assert train[-1]["overflow_steps"] < STEPS, train  # not every step skipped


def test_fp16_o2_with_head_size_16_takes_the_chips_attention(workspace16, device):
    """Head size 16 in fp16 O2: FlashAttentionScore on a 910B/910C, composed on a 910A or a GPU; the run
    trains either way."""
    run = run_train(workspace16, f"parallel.device={device}", "precision.amp_level=O2",
                    "precision.compute_dtype=float16")
    kernels = assert_path(run, device, "float16", head_dim=16)
    train = records(run)
    assert len(train) == STEPS and all(np.isfinite(r["loss"]) for r in train), (kernels, train)


def test_resume_is_exact_on_the_device(workspace, device_run, device):
    resumed = run_train(workspace, f"parallel.device={device}", f"run.resume={device_run.checkpoints_dir / 'step-3'}")
    full = losses(device_run)
    for record in records(resumed):
        assert abs(record["loss"] - full[record["step"]]) <= 1e-5, record


def test_the_export_of_a_device_run_reloads_with_equal_logits(device_run):
    """The device's last checkpoint exported as a PEFT adapter and a merged folder, each reloaded by
    transformers (and peft), against mindtune's own logits of that checkpoint on the CPU."""
    try:
        import peft
        import torch
        import transformers
    except ImportError as exc:
        skip_or_fail(f"could not import the reference packages: {exc}")
    import mindspore as ms
    from core.engine.export import export_run, load_trained_model
    adapter_dir, merged_dir = (export_run(device_run.path, "last", fmt) for fmt in ("peft", "merged"))
    ids = np.random.default_rng(0).integers(3, 250, (2, 20)).astype(np.int32)
    ours, _ = load_trained_model(device_run.checkpoints_dir / "last")
    expected = ours.construct(ms.Tensor(ids)).asnumpy()

    def logits(model):
        with torch.no_grad():
            return model(torch.tensor(ids, dtype=torch.long)).logits.float().numpy()
    merged = transformers.AutoModelForCausalLM.from_pretrained(str(merged_dir)).eval()
    assert np.abs(logits(merged) - expected).max() <= FP32_TOLERANCE
    base_path = json.loads((adapter_dir / "adapter_config.json").read_text())["base_model_name_or_path"]
    base = transformers.AutoModelForCausalLM.from_pretrained(base_path).eval()
    base_logits = logits(base)
    adapted = peft.PeftModel.from_pretrained(base, str(adapter_dir)).eval()
    assert np.abs(logits(adapted) - expected).max() <= FP32_TOLERANCE
    assert np.abs(base_logits - expected).max() > 1e-3, "the device's training must have changed the model"


def test_dry_run_on_the_device_reports_its_memory(workspace, device):
    done = subprocess.run([sys.executable, "-m", "core.dry_run", "--config", str(workspace),
                           f"parallel.device={device}"], cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["device"] == device and result["peak_mem_mb"] > 0
    assert result["device_memory_mb"] and result["device_memory_mb"] > result["peak_mem_mb"], result
    assert result["kernels"].startswith(device) and (result["soc"] is not None) is (device == "ascend"), result


def test_one_profiled_step_has_device_kernels(device_run, device):
    summary = device_run.read_profile_summary()
    assert summary is not None and summary.total_ms > 0 and summary.top, summary
    table = "gpu_op_detail_info" if device == "gpu" else "kernel_details.csv"  # the device's own operators
    assert any(table in name for name in summary.files) and table in summary.note, summary


def test_the_fit_check_ran_against_the_devices_memory(device_run, device):
    """At setup, before the weights load, the estimate was compared with the device's memory (Ascend: after
    a first operator initialised it): said as fitting, never skipped or unknown on a device."""
    said = [r["message"] for r in records(device_run, "event") if "memory estimate" in r.get("message", "")]
    assert len(said) == 1 and f"fits the {device} device's" in said[0], said


# ---- data parallel (two devices) -----------------------------------------------------------------------

DP_COMMON = ("train.max_steps=4", "train.eval_every=4", "train.save_every=100", "eval.downstream=false",
             "train.micro_batch_size=2", "train.log_every=1")


def _two(device: str, device_count: int) -> None:
    if device_count < 2:
        skip_or_fail(f"one {device} device: data parallel 2 needs two")


def test_data_parallel_two_devices_match_one(workspace, device, device_count):
    """Same global batch (4) and seed: DP=2 × micro 2 against DP=1 × micro 2 × accumulation 2, fp32."""
    _two(device, device_count)
    one = run_train(workspace, f"parallel.device={device}", *DP_COMMON, "train.grad_accum_steps=2")
    two = run_train(workspace, f"parallel.device={device}", *DP_COMMON, "parallel.data_parallel=2")
    a, b = losses(one), losses(two)
    assert sorted(a) == sorted(b) == [1, 2, 3, 4]
    assert max(abs(a[s] - b[s]) for s in a) <= FP32_TOLERANCE, (a, b)
    last = records(two)[-1]
    assert last["peak_mem_mb"] > 0 and len(last["peak_mem_ranks_mb"]) == 2
    assert last["peak_mem_mb"] == max(last["peak_mem_ranks_mb"])  # the largest device's, not the sum


def test_an_overflow_on_one_device_skips_the_step_on_both(workspace, device, device_count):
    """fp16 with a dynamic loss scale on two devices, rank 1's gradients made to overflow at step 2:
    rank 0 skips too (its loss scale halves after step 2), one skipped step is counted."""
    _two(device, device_count)
    run = run_train(workspace, f"parallel.device={device}", *DP_COMMON, "parallel.data_parallel=2",
                    "precision.amp_level=O1", "precision.compute_dtype=float16", "precision.initial_loss_scale=1024",
                    env={"MINDTUNE_TEST_OVERFLOW_AT": "1:2"})
    scales = [(r["step"], r["loss_scale"]) for r in records(run)]
    assert scales[:3] == [(1, 1024.0), (2, 1024.0), (3, 512.0)], scales
    assert run.read_status().final.overflow_steps == 1


# ---- memory, on a model where the constants do not dominate --------------------------------------------

@pytest.fixture(scope="module")
def memory_workspace(tmp_path_factory) -> Path:
    """25M parameters (hidden 512, 8 layers, 8 heads of 64, intermediate 1,376), packed batches of
    4 × 512 tokens, full fine-tuning in fp32."""
    from core.data.tokenizer import Tokenizer
    config = make_workspace(tmp_path_factory.mktemp("device-memory"), train__max_steps=3, train__save_every=100,
                            train__eval_every=3)
    model = config.parent / "tiny-model"
    make_model(model, Tokenizer.from_dir(model).vocab_size, hidden_size=512, intermediate_size=1376,
               num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=8, max_position_embeddings=1024)
    return config


def test_peak_memory_of_a_25m_model_is_within_the_estimate(memory_workspace, device):
    run = run_train(memory_workspace, f"parallel.device={device}", "method=full", "data.packing=true",
                    "data.max_seq_len=512", "train.micro_batch_size=4", "eval.downstream=false")
    peak = records(run)[-1]["peak_mem_mb"]
    config = load_config(run.config_path)
    setup = setup_event(run)
    kernels = setup["kernels"]
    soc = None
    if device == "ascend":
        soc = re.match(r"ascend \(([^)]*)\): ", kernels).group(1)
    estimate = estimate_memory(config, read_model_args(config.model.path), setup["seq_len"], soc=soc)
    # the allocator's peak (ms.runtime.max_memory_allocated) never sees the device context and kernels the
    # estimate counts as its runtime part
    allocated = estimate.total_mb - estimate.runtime_mb
    assert estimate.activations_mb > estimate.weights_mb, estimate  # activations, not constants, dominate
    assert peak > 0 and abs(allocated - peak) <= 0.15 * peak, (allocated, peak, estimate.notes)
