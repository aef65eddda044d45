"""Issue 40: every device decision pinned where the worker makes it. The worker (core.train.run_worker),
the Trainer and the dry run run here under a GPU or Ascend device faked where MindSpore answers
(tests/core/fake_device.py: the device target, the SoC, the device's memory, the allocator's peak,
and the profiler, the collectives or MatMul where a test watches them), never in mindtune's own
functions, so that undoing any of these breaks a test here:

    revert                                                        test
    the Trainer summing the ranks' peaks (not peak_over_ranks)    test_the_trainer_shows_the_largest_devices_peak
    the fit check's call removed from the Trainer's setup         test_a_gpu_run_is_pinned_where_the_worker_decides
    the profiler's activities back to the CPU only                test_a_gpu_run_is_pinned_where_the_worker_decides
    the gradient norm back to MatMul on devices                   test_a_gpu_run_is_pinned_where_the_worker_decides
    the worker's bf16 check removed                               test_the_worker_refuses_bf16_on_a_910a_by_name
    the dry run without the bf16 check                            test_the_dry_run_refuses_bf16_on_a_910a_by_name
    (the estimate's flash branch keeping the scores: tests/core/test_devices.py,
     test_the_estimates_flash_branch_holds_no_scores_and_the_composed_one_says_its_memory)
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import core.run.launcher as launcher
from core.run.records import SetupEvent
from core.run.rundir import RunDir
from core.spec.config import ConfigError, load_config
from core.train import Cluster, Trainer, run_worker

from tests.core.fake_device import fake_device, fake_peer, norm_matmuls, record_matmuls, record_profiles
from tests.core.tiny_setup import make_workspace

QUICK = ["train.max_steps=2", "train.warmup_steps=0", "train.eval_every=2", "train.save_every=100", "eval.downstream=false",
         "eval.baseline=false", "eval.max_eval_samples=4"]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    return make_workspace(tmp_path_factory.mktemp("faked"))


@pytest.fixture(scope="module")
def workspace16(tmp_path_factory) -> Path:
    """The tiny workspace with a head size of 16 (hidden 64, 4 heads), which FlashAttentionScore takes."""
    from core.data.tokenizer import Tokenizer
    from tests.core.tiny_setup import make_model
    config = make_workspace(tmp_path_factory.mktemp("faked16"))
    model = config.parent / "tiny-model"
    make_model(model, Tokenizer.from_dir(model).vocab_size, hidden_size=64, intermediate_size=128)
    return config


def _run(workspace: Path, *overrides: str) -> RunDir:
    return launcher.create_run(load_config(workspace, [*QUICK, *overrides]))


def _records(run: RunDir) -> list[dict]:
    return [json.loads(line) for line in run.metrics_path.read_text().splitlines()]


def _events(run: RunDir, event: str) -> list[dict]:
    return [r for r in _records(run) if r.get("kind") == "event" and r.get("event") == event]


@pytest.mark.slow
def test_a_gpu_run_is_pinned_where_the_worker_decides(workspace, monkeypatch):
    """A whole LoRA run of the worker on a faked GPU of 1 MB, profiled at step 1, its steps op by op
    (MS_JIT=0) so that every MatMul is seen: the setup event says the GPU's path; the fit check warns,
    before the weights load, that the estimate is more than the device's 1 MB; the profiler records the
    CPU and the GPU; the gradient norm takes no (1, n)·(n, 1) MatMul; the peak is the allocator's."""
    fake = fake_device(monkeypatch, "gpu", total_mb=1.0, peak_mb=321.0)
    record_profiles(monkeypatch, fake)
    record_matmuls(monkeypatch, fake)
    monkeypatch.setenv("MS_JIT", "0")
    run = _run(workspace, "parallel.device=gpu", "train.profile_steps=[1,1]")
    assert run_worker(str(run.path)) == 0, run.read_status().reason
    assert fake.targets_set and set(fake.targets_set) == {"GPU"}  # use_device asked MindSpore for the GPU
    setup = run.last_metric(SetupEvent)
    assert setup.kernels.startswith("gpu: LM head + loss chunked (no logits)"), setup.kernels
    assert "no fused attention for GPU" in setup.kernels
    records = _records(run)
    fit = [r for r in records if r.get("event") == "warning" and "memory estimate" in r.get("message", "")]
    assert len(fit) == 1 and "is more than the gpu device's 1 MB" in fit[0]["message"], fit
    assert records.index(fit[0]) < next(i for i, r in enumerate(records) if r.get("event") == "setup")
    assert fake.profiled == [["CPU", "GPU"]]
    assert fake.matmuls and not norm_matmuls(fake), norm_matmuls(fake)[:3]  # Square + ReduceSum, not MatMul
    train = [r for r in records if r.get("kind") == "train"]
    assert [r["peak_mem_mb"] for r in train] == [321.0, 321.0] and all(np.isfinite(r["grad_norm"]) for r in train)
    assert run.read_status().final.peak_mem_mb == 321.0


def test_the_norm_detector_sees_a_matmul_norm(monkeypatch):
    """The control of the test above: on the CPU the gradient norm is a (1, n)·(n, 1) MatMul, which the
    recorder sees."""
    from mindspore import Tensor
    from core.engine.train_step import global_norm
    from tests.core.fake_device import FakeDevice
    fake = FakeDevice("cpu")
    record_matmuls(monkeypatch, fake)
    global_norm((Tensor(np.ones((3, 4), np.float32)),), True)
    assert norm_matmuls(fake) == [((1, 12), (12, 1))]


def test_the_trainer_shows_the_largest_devices_peak(workspace, monkeypatch):
    """Rank 1 of 2 on faked GPUs: its allocator peaked at 300 MB, rank 0's at 700 MB (the AllReduce
    adds it). The run's peak is the largest device's, each rank's beside it; on the CPU the ranks'
    resident sets add up (they share one machine's RAM)."""
    fake_device(monkeypatch, "gpu", peak_mb=300.0)
    fake_peer(monkeypatch, rank=1, world=2, peer_values=lambda values: [700.0, 0.0] if len(values) == 2 else 0.0)
    config = load_config(workspace, [*QUICK, "parallel.device=gpu", "parallel.data_parallel=2"])
    run = launcher.create_run(config)
    cluster = Cluster(2)
    assert (cluster.rank, cluster.world) == (1, 2)
    assert Trainer(config, run, cluster).peak_memory() == (700.0, [700.0, 300.0])
    cpu = load_config(workspace, [*QUICK, "parallel.data_parallel=2"])
    shown, per_rank = Trainer(cpu, run, cluster).peak_memory()
    assert per_rank is None and shown > 700.0  # this process's RSS added to the peer's


def test_the_worker_refuses_bf16_on_a_910a_by_name(workspace, monkeypatch):
    fake_device(monkeypatch, "ascend", soc="ascend910", total_mb=32768.0)
    run = _run(workspace, "parallel.device=ascend", "precision.amp_level=O2", "precision.compute_dtype=bfloat16")
    assert run_worker(str(run.path)) == 1
    status = run.read_status()
    assert status.state == "failed" and status.failure_kind == "config"
    assert status.reason_message["id"] == "device.bf16_refused" and "ascend910" in status.reason, status.reason


def test_the_dry_run_refuses_bf16_on_a_910a_by_name(workspace, monkeypatch):
    from core.dry_run import dry_run
    fake_device(monkeypatch, "ascend", soc="ascend910", total_mb=32768.0)
    config = load_config(workspace, ["parallel.device=ascend", "precision.amp_level=O2",
                                     "precision.compute_dtype=bfloat16"])
    with pytest.raises(ConfigError, match="ascend910.*use float16"):
        dry_run(config)


@pytest.mark.parametrize("soc, workspace_name, flash, said", [
    ("ascend910b", "workspace16", True, ""),
    ("ascend910", "workspace16", False, "not on this ascend910"),
    ("ascend910b", "workspace", False, "this model's is 8"),
])
def test_the_trainer_picks_ascend_attention_by_chip_and_head_size(soc, workspace_name, flash, said, monkeypatch,
                                                                   request):
    """The Trainer's setup on a faked Ascend device in fp16 O2 (nothing runs: FlashAttentionScore has no
    CPU kernel): the 910B with head size 16 gets FlashAttentionScore, the 910A and a head size of 8
    the composed attention, and the setup event's `kernels` says which and why."""
    fake_device(monkeypatch, "ascend", soc=soc, total_mb=65536.0)
    config = load_config(request.getfixturevalue(workspace_name),
                         [*QUICK, "parallel.device=ascend", "precision.amp_level=O2", "precision.compute_dtype=float16"])
    run = launcher.create_run(config)
    trainer = Trainer(config, run, Cluster(1))
    trainer.setup()
    kernels = run.last_metric(SetupEvent).kernels
    assert kernels.startswith(f"ascend ({soc}): LM head + loss chunked"), kernels
    assert trainer.model.fused_attention is flash
    assert ("attention: FlashAttentionScore" in kernels) is flash and said in kernels, kernels
    fit = _events(run, "info")
    assert any("fits the ascend device's 65,536 MB" in r["message"] for r in fit), fit


@pytest.mark.slow
def test_an_overflow_on_one_rank_skips_the_step_on_both(workspace, monkeypatch):
    """Data parallel 2 through msrun on the CPU, fp16 AMP O1 with a dynamic loss scale (O2 overflows at
    every step on the CPU: see docs/guide.md, Devices), rank 1's gradients made to overflow at step 2
    (MINDTUNE_TEST_OVERFLOW_AT, core.engine.devices.injected_overflow): rank 0 skips the step too, so
    its loss scale halves after step 2 and the run counts one skipped step; tests/device runs the same
    on two devices. (On the CPU the gradients' all-reduce alone carries rank 1's inf to rank 0; the
    overflow flag's own reduction, which Ascend needs where all_finite reads the device's status, is
    pinned by tests/core/test_devices.py::test_a_peers_overflow_skips_this_ranks_step_too.)"""
    from core.run.runs import list_runs
    from core.train import main as train_main
    monkeypatch.setenv("MINDTUNE_TEST_OVERFLOW_AT", "1:2")
    code = train_main(["--config", str(workspace), "train.max_steps=3", "train.warmup_steps=0", "train.eval_every=3",
                       "train.save_every=100", "train.log_every=1", "eval.downstream=false", "eval.baseline=false",
                       "train.micro_batch_size=2", "parallel.data_parallel=2", "precision.amp_level=O1",
                       "precision.compute_dtype=float16", "precision.initial_loss_scale=1024"])
    run = RunDir(next(r.path for r in list_runs(load_config(workspace).run.runs_dir) if "_dp2" in r.path.name))
    assert code == 0, run.read_status().reason
    train = [r for r in _records(run) if r.get("kind") == "train"]
    assert [(r["step"], r["loss_scale"]) for r in train] == [(1, 1024.0), (2, 1024.0), (3, 512.0)], train
    assert run.read_status().final.overflow_steps == 1 and all(np.isfinite(r["loss"]) for r in train)
