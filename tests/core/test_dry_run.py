"""core.dry_run (issue 20 item 15): two training steps of a config in a subprocess report the
measured peak; core.train warns a shell user whose run is estimated not to fit."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from core.spec.config import load_config
from core.dry_run import dry_run_config
from core.run.launcher import REPO_ROOT
from core.train import memory_warning

from tests.core.tiny_setup import make_workspace


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    return make_workspace(tmp_path_factory.mktemp("dry"))


def test_the_dry_run_config_is_the_run_shrunk_to_two_steps(workspace):
    config = load_config(workspace, ["parallel.data_parallel=1", "train.max_steps=500"])
    trial = dry_run_config(config, "/tmp/x")
    assert (trial.train.max_steps, trial.train.warmup_steps, trial.eval.downstream) == (2, 0, False)
    assert trial.eval.max_eval_samples == config.train.micro_batch_size and trial.run.runs_dir == "/tmp/x"
    # what decides memory is kept
    for section in ("model", "lora", "data", "precision", "recompute"):
        assert getattr(trial, section) == getattr(config, section), section
    assert trial.train.micro_batch_size == config.train.micro_batch_size


@pytest.mark.slow
def test_a_dry_run_measures_the_peak_and_leaves_no_run_behind(workspace):
    runs_dir = Path(yaml.safe_load(workspace.read_text())["run"]["runs_dir"])
    before = set(runs_dir.iterdir()) if runs_dir.exists() else set()
    result = subprocess.run([sys.executable, "-m", "core.dry_run", "--config", str(workspace)], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=600, env={**os.environ, "GLOG_v": "3"})
    assert result.returncode == 0, result.stderr[-2000:]
    measured = json.loads(result.stdout.strip().splitlines()[-1])
    assert measured["steps"] == 2 and len(measured["step_time_s"]) == 2 and measured["seq_len"] > 0
    # a MindSpore worker's resident set is at least its imports (~400 MB) and below what the machine has
    assert 300 < measured["peak_mem_mb"] < 8000, measured
    assert (set(runs_dir.iterdir()) if runs_dir.exists() else set()) == before
    bad = subprocess.run([sys.executable, "-m", "core.dry_run", "--config", str(workspace), "lora.target_modules=nope"],
                         cwd=REPO_ROOT, capture_output=True, text=True, timeout=600, env={**os.environ, "GLOG_v": "3"})
    assert bad.returncode == 1 and "nope" in bad.stderr


def test_the_cli_warns_when_the_estimate_does_not_fit(workspace):
    config = load_config(workspace)
    assert memory_warning(config) is None
    huge = load_config(workspace, ["train.micro_batch_size=200000", "data.max_seq_len=4096"])
    warning = memory_warning(huge)
    assert warning and "more than this machine's" in warning and "train.micro_batch_size" in warning
