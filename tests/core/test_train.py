"""The training engine end to end on a tiny model: run directory, resume, early stopping, failure
reasons, AMP, control requests, and data parallel through msrun."""
from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import numpy as np
import pytest
import yaml

import core.engine.fused as fused
import core.run.launcher as launcher
from core.engine.checkpoint import load_train_checkpoint
from core.spec.model_args import file_sha256
from core.run.rundir import RunDir
from core.run.runs import display_name
from core.spec.messages import Message
from core.train import main as train_main
from tests.core.tiny_setup import make_workspace, write_jsonl
from tests.waiting import wait_for_run

REQUIRED_TRAIN_KEYS = {"loss", "loss_ema", "lr", "grad_norm", "loss_scale", "tokens_per_s", "step_time_s",
                       "peak_mem_mb"}


def run_cli(config: Path, *overrides: str) -> RunDir:
    before = set(Path(yaml.safe_load(config.read_text())["run"]["runs_dir"]).glob("*")) if config.exists() else set()
    train_main(["--config", str(config), *overrides])
    runs_dir = Path(yaml.safe_load(config.read_text())["run"]["runs_dir"])
    new = [p for p in runs_dir.iterdir() if p not in before and not p.is_symlink()]
    assert len(new) == 1, new
    return RunDir(new[0])


def records(run: RunDir, kind: str) -> list[dict]:
    if not run.metrics_path.exists():
        return []
    return [r for r in map(json.loads, run.metrics_path.read_text().splitlines()) if r["kind"] == kind]


def losses(run: RunDir) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in records(run, "train")}


def assert_same_losses(reference: RunDir, run: RunDir, steps: list[int], tolerance: float) -> None:
    """`run` logged exactly `steps`, each loss within `tolerance` of `reference`'s at that step (a resume
    or a fork against the uninterrupted run; shared by the SFT and the preference tests)."""
    expected, tail = losses(reference), losses(run)
    assert sorted(tail) == steps
    for step in tail:
        assert abs(tail[step] - expected[step]) <= tolerance, (step, tail[step], expected[step])


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    return make_workspace(tmp_path_factory.mktemp("ws"))


@pytest.fixture(scope="module")
def lora_run(workspace) -> RunDir:
    return run_cli(workspace)


@pytest.mark.slow
def test_lora_run_writes_the_run_directory(lora_run, workspace):
    status = lora_run.read_status()
    assert status.state == "finished" and status.reason == "reached 8 steps"
    # one stable id (never renamed): the results are in status.final and the display name
    assert lora_run.run_id.endswith("_tiny-model_lora-r4_fp32_dp1") and status.run_id == lora_run.run_id
    assert not any(p.is_symlink() for p in lora_run.path.parent.iterdir())
    final = status.final
    assert " · ppl " in display_name(lora_run.run_id, final) and status.step == final.steps == 8
    assert final.steps == 8 and final.tokens_per_s > 0 and final.peak_mem_mb > 0
    assert 0.0 <= final.exact_match <= 1.0
    train = records(lora_run, "train")
    assert [r["step"] for r in train] == list(range(1, 9))
    assert all(REQUIRED_TRAIN_KEYS <= set(r) for r in train)
    evals = records(lora_run, "eval")
    assert [r["step"] for r in evals] == [0, 4, 8]
    assert all(abs(r["val_ppl"] - np.exp(r["val_loss"])) < 1e-6 * r["val_ppl"] for r in evals)
    assert evals[-1]["val_loss"] < evals[0]["val_loss"], "LoRA training should lower validation loss"
    setup = next(r for r in records(lora_run, "event") if r["event"] == "setup")
    assert setup["global_batch_size"] == 4 and setup["lora_modules"] == 14
    if fused.expected("cpu", "float32", "O0"):  # a C++ compiler here: the kernel runs
        assert setup["kernels"] == "fused" and "kernels fused" in setup["message"]
    else:
        assert setup["kernels"].startswith("composed: ")


@pytest.mark.slow  # its module fixture trains a run
def test_lora_checkpoint_holds_adapter_weights_and_base_identity(lora_run, workspace):
    ckpts = lora_run.checkpoints_dir
    assert os.readlink(ckpts / "last") == "step-8"
    assert (ckpts / "best").is_symlink() and (ckpts / "step-4").is_dir()
    weights, optimizer, state = load_train_checkpoint(ckpts / "last")
    assert weights and all(k.endswith((".lora_a", ".lora_b")) for k in weights)
    assert len(weights) == 28
    assert any(k.startswith("moment1.") for k in optimizer) and "global_step" in optimizer
    assert {"beta1_power", "beta2_power"} <= set(optimizer)
    base = Path(yaml.safe_load(workspace.read_text())["model"]["path"])
    assert state["base_model"]["sha256"] == file_sha256([base / "model.safetensors"])
    assert state["data_position"] == {"epoch": 0, "index": 8}


@pytest.mark.slow
def test_resume_matches_uninterrupted_run(lora_run, workspace):
    resumed = run_cli(workspace, f"run.resume={lora_run.checkpoints_dir / 'step-4'}")
    assert_same_losses(lora_run, resumed, [5, 6, 7, 8], 1e-5)


@pytest.mark.slow
def test_a_fork_continues_from_the_checkpoint_as_a_new_run(lora_run, workspace):
    """Issue 20 item 14: a new run from step 4 of another run takes over its weights, optimizer
    state and data position (nothing else changed: its losses are the parent's, to 1e-5), counts on
    from step 4, and records its parent."""
    fork = run_cli(workspace, f"run.fork_from={lora_run.checkpoints_dir / 'step-4'}", "eval.downstream=false")
    assert fork.run_id != lora_run.run_id
    status = fork.read_status()
    assert status.state == "finished" and (status.parent_run, status.parent_step) == (lora_run.run_id, 4)
    event = next(r for r in records(fork, "event") if r["event"] == "fork")
    assert event["optimizer_state"] is True and event["data_position"] is True and event["parent_step"] == 4
    assert_same_losses(lora_run, fork, [5, 6, 7, 8], 1e-5)
    assert [(r["step"], r.get("base", False)) for r in records(fork, "eval")] == [(4, True), (8, False)]
    assert fork.checkpoint_step("last") == 8 and status.final.steps == 8


@pytest.mark.slow  # its module fixture trains a run
def test_a_fork_that_changes_the_trainable_parameters_is_refused(lora_run, workspace):
    code = train_main(["--config", str(workspace), f"run.fork_from={lora_run.checkpoints_dir / 'step-4'}",
                       "lora.rank=8"])
    assert code == 1
    runs = sorted(Path(yaml.safe_load(workspace.read_text())["run"]["runs_dir"]).iterdir(), key=os.path.getmtime)
    status = RunDir(runs[-1]).read_status()
    assert status.state == "failed" and status.failure_kind == "config"
    assert "lora.rank" in status.reason and "shape" in status.reason


def test_resume_from_missing_checkpoint_is_an_error(workspace, tmp_path):
    code = train_main(["--config", str(workspace), f"run.resume={tmp_path / 'nope'}"])
    assert code == 1
    runs = sorted(Path(yaml.safe_load(workspace.read_text())["run"]["runs_dir"]).iterdir(), key=os.path.getmtime)
    status = RunDir(runs[-1]).read_status()
    assert status.state == "failed" and "checkpoint not found" in status.reason


@pytest.mark.slow
def test_full_finetune_trains_every_weight(workspace):
    run = run_cli(workspace, "method=full", "train.learning_rate=0.003", "train.max_steps=4",
                  "train.eval_every=4", "eval.downstream=false")
    assert run.read_status().state == "finished"
    weights, _, state = load_train_checkpoint(run.checkpoints_dir / "last")
    assert "model.embed_tokens.weight" in weights and state["method"] == "full"
    evals = records(run, "eval")
    assert evals[-1]["val_loss"] < evals[0]["val_loss"]


@pytest.mark.slow
def test_early_stopping_records_its_reason(workspace):
    run = run_cli(workspace, "early_stopping.enabled=true", "early_stopping.patience=1",
                  "early_stopping.min_delta=100", "train.eval_every=2", "train.log_every=3",
                  "eval.downstream=false")
    status = run.read_status()
    assert status.state == "early_stopped"
    assert "did not improve by 100" in status.reason and "1 evaluations" in status.reason
    assert max(r["step"] for r in records(run, "eval")) == 4  # eval at 2 sets the best, at 4 exhausts patience 1
    # the status names the step of the newest checkpoint, not the last logged one (3; issue 20 bug 9)
    assert sorted(losses(run)) == [1, 3] and status.step == run.checkpoint_step("last") == 4


@pytest.mark.slow
def test_non_finite_loss_fails_the_run(workspace, tmp_path):
    from safetensors.numpy import load_file, save_file
    cfg = yaml.safe_load(workspace.read_text())
    broken = tmp_path / "broken-model"
    broken.mkdir()
    for f in Path(cfg["model"]["path"]).iterdir():
        (broken / f.name).write_bytes(f.read_bytes())
    tensors = load_file(str(broken / "model.safetensors"))
    tensors["model.norm.weight"][:] = np.inf
    save_file(tensors, str(broken / "model.safetensors"))
    code = train_main(["--config", str(workspace), f"model.path={broken}", "eval.downstream=false"])
    assert code == 1
    runs = sorted(Path(cfg["run"]["runs_dir"]).iterdir(), key=os.path.getmtime)
    status = RunDir(runs[-1]).read_status()
    assert status.state == "failed" and status.reason == "non-finite loss at step 1"
    assert status.failure_kind == "nonfinite"


@pytest.mark.slow
def test_fp16_amp_trains_close_to_fp32(workspace, lora_run):
    run = run_cli(workspace, "precision.amp_level=O2", "precision.compute_dtype=float16",
                  "train.max_steps=3", "train.eval_every=3", "eval.downstream=false")
    assert run.read_status().state == "finished"
    first = records(run, "train")[0]
    assert first["loss_scale"] == 65536.0
    assert abs(first["loss"] - losses(lora_run)[1]) < 2e-2
    setup = next(r for r in records(run, "event") if r["event"] == "setup")
    assert setup["kernels"].startswith("composed: AMP O2 computes in float16")
    assert "_fp16-O2_" in run.run_id


@pytest.mark.parametrize("override, fragment, kind", [
    ("lora.target_modules=nope_proj", "nope_proj", "config"),
    ("data.max_seq_len=4096", "above the model's context of 128 tokens", "config"),
    ("data.max_seq_len=8", "nothing of the answer remains", "data"),
])
def test_bad_settings_fail_before_training(workspace, override, fragment, kind):
    code = train_main(["--config", str(workspace), override])
    assert code == 1
    runs = sorted(Path(yaml.safe_load(workspace.read_text())["run"]["runs_dir"]).iterdir(), key=os.path.getmtime)
    run = RunDir(runs[-1])
    assert run.read_status().state == "failed" and fragment in run.read_status().reason
    assert run.read_status().failure_kind == kind
    assert not records(run, "train")


def test_malformed_dataset_line_is_named(workspace, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"instruction": "a", "output": "b"}\n{"instruction": "a", "output": "b"}\n{oops\n')
    code = train_main(["--config", str(workspace), f"data.train_file={bad}"])
    assert code == 1
    runs = sorted(Path(yaml.safe_load(workspace.read_text())["run"]["runs_dir"]).iterdir(), key=os.path.getmtime)
    run = RunDir(runs[-1])
    reason = run.read_status().reason
    assert "bad.jsonl" in reason and "line 3" in reason
    assert run.read_status().failure_kind == "data"
    # a run started from a shell keeps a train.log like a launched one: header, then what it printed
    log = run.log_path.read_text()
    assert log.startswith("=== mindtune launch") and "core.train --config" in log.splitlines()[0]
    assert f"run directory: {run.path}" in log and "error: " in log and "line 3" in log
    assert any("line 3" in line for line in launcher._error_lines(run.log_path))


def test_too_many_workers_is_refused(workspace, capsys):
    assert train_main(["--config", str(workspace), f"parallel.data_parallel={os.cpu_count() + 1}"]) == 2
    assert "parallel.data_parallel" in capsys.readouterr().err


def _launched_run(workspace: Path, *overrides: str):
    from core.spec.config import load_config
    config = load_config(workspace, list(overrides))
    run = launcher.create_run(config)
    return launcher.launch(run)


@pytest.mark.slow
def test_control_file_changes_patience_and_stops_the_run(workspace):
    launched = _launched_run(workspace, "train.max_steps=400", "train.eval_every=1000", "eval.downstream=false",
                             "train.log_every=1")
    run = launched.run_dir
    wait_for_run(run, lambda: any(r.kind == "train" for r in run.metrics_reader().read_new()), "first step", 120)
    run.write_control(early_stopping={"enabled": True, "patience": 7, "monitor": "val_loss", "min_delta": 0.0})
    wait_for_run(run, lambda: any(r.get("event") == "control" for r in records(run, "event")), "control applied", 60)
    run.write_control(stop="graceful")
    launched.process.wait(timeout=60)
    status = run.read_status()
    last = os.readlink(run.checkpoints_dir / "last")
    assert status.state == "stopped" and status.reason == f"stopped by the user; newest resumable checkpoint: {last}"
    assert status.resumable_checkpoint == last
    said = Message.from_json(status.reason_message)  # the note keeps its id beside the reason's (issue 38)
    assert said.key == "run.with_note" and said.params["reason"].key == "run.stopped_by_user"
    assert said.params["note"].to_json() == {"id": "run.resumable", "params": {"checkpoint": last}}
    change = next(r for r in records(run, "event") if r.get("event") == "control")
    assert change["early_stopping"]["patience"] == 7
    assert not launcher.run_processes(run)


@pytest.mark.slow
def test_sigterm_saves_and_ends_cleanly(workspace):
    launched = _launched_run(workspace, "train.max_steps=400", "train.eval_every=1000", "eval.downstream=false")
    run = launched.run_dir
    wait_for_run(run, lambda: any(r.kind == "train" for r in run.metrics_reader().read_new()), "first step", 120)
    os.killpg(launched.pgid, signal.SIGTERM)
    launched.process.wait(timeout=60)
    assert run.read_status().state == "stopped"
    assert (run.checkpoints_dir / "last").is_symlink()


@pytest.mark.slow
def test_data_parallel_two_workers_match_one(workspace):
    """Same global batch (4) and seed: DP=2 × micro 2 vs DP=1 × micro 2 × accumulation 2."""
    common = ("train.max_steps=6", "train.eval_every=6", "eval.downstream=false", "train.micro_batch_size=2")
    single = run_cli(workspace, *common, "train.grad_accum_steps=2")
    code = train_main(["--config", str(workspace), *common, "parallel.data_parallel=2"])
    assert code == 0
    runs_dir = Path(yaml.safe_load(workspace.read_text())["run"]["runs_dir"])
    double = RunDir(max((p for p in runs_dir.iterdir() if "_dp2" in p.name and not p.is_symlink()),
                        key=os.path.getmtime))
    assert double.read_status().state == "finished"
    one, two = losses(single), losses(double)
    assert sorted(one) == sorted(two) == list(range(1, 7))
    assert max(abs(one[s] - two[s]) for s in one) < 1e-4
    assert (double.path / "logs").is_dir()


@pytest.mark.slow
def test_fp16_overflow_steps_are_skipped_and_counted(workspace):
    """A loss scale far beyond fp16's range overflows; the step is skipped, the scale halves and
    training goes on."""
    run = run_cli(workspace, "precision.amp_level=O2", "precision.compute_dtype=float16",
                  "precision.initial_loss_scale=1e30", "train.max_steps=3", "train.eval_every=3",
                  "eval.downstream=false")
    status = run.read_status()
    assert status.state == "finished" and status.final.overflow_steps >= 1
    scales = [r["loss_scale"] for r in records(run, "train")]
    assert scales[0] == pytest.approx(1e30, rel=1e-6) and scales[-1] < scales[0]
