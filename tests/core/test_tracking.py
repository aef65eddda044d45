"""A tiny run mirrored to TensorBoard, MLflow (a real `mlflow server` on 127.0.0.1, sqlite backend)
and SwanLab (offline), read back with each tool's own reader; the same run writes the answer scores
(BLEU, ROUGE) to metrics.jsonl and watches ROUGE-L for early stopping. Then a resumed attempt
continues the same MLflow run. Trackers that cannot start are reported, never fatal."""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

import core.run.tracking as tracking
from core.spec.config import Config, ConfigError, load_config
from core.run.records import GENERATION_FIELDS, EvalRecord, TrackerEvent, TrainRecord, parse_metric
from core.run.rundir import RunDir
from core.run.runs import display_name
from core.train import main as train_main, run_worker
from tests.core.tiny_setup import make_workspace

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _records(run: RunDir, kind: str) -> list[dict]:
    return [r for r in map(json.loads, run.metrics_path.read_text().splitlines()) if r["kind"] == kind]


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory):
    """`mlflow server` with a sqlite backend on a free local port (started first: it takes a while)."""
    root = tmp_path_factory.mktemp("mlflow")
    port = _free_port()
    argv = [str(Path(sys.executable).with_name("mlflow")), "server", "--backend-store-uri",
            f"sqlite:///{root / 'mlflow.db'}", "--default-artifact-root", str(root / "artifacts"),
            "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    log = open(root / "server.log", "wb")
    server = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    uri = f"http://127.0.0.1:{port}"
    yield server, uri, root
    os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=15)
    except subprocess.TimeoutExpired:  # uvicorn's job runners can outlive a polite stop
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=15)
    log.close()


def _wait_until_up(server, uri: str, root: Path, timeout_s: float = 300.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert server.poll() is None, (root / "server.log").read_text()[-3000:]
        try:
            with urllib.request.urlopen(uri + "/health", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(1.0)
    pytest.fail(f"mlflow server did not answer in {timeout_s} s:\n" + (root / "server.log").read_text()[-3000:])


@pytest.fixture(scope="module")
def tracked(mlflow_server, tmp_path_factory):
    """One tiny LoRA run (8 steps, evaluations at 4 and 8 that score the answers) mirrored to all three."""
    server, uri, root = mlflow_server
    config = make_workspace(tmp_path_factory.mktemp("ws"))
    data = yaml.safe_load(config.read_text())
    data.update({"tracking": ["tensorboard", "mlflow", "swanlab"],
                 "mlflow": {"tracking_uri": uri, "experiment": "mindtune-test"},
                 "swanlab": {"mode": "offline", "project": "mindtune-test"}})
    data["eval"]["downstream_every_eval"] = True
    data["early_stopping"] = {"enabled": True, "monitor": "rougeL", "patience": 5}
    config.write_text(yaml.safe_dump(data))
    _wait_until_up(server, uri, root)
    assert train_main(["--config", str(config)]) == 0
    runs = [p for p in Path(data["run"]["runs_dir"]).iterdir() if p.is_dir()]
    assert len(runs) == 1
    return RunDir(runs[0]), uri


@pytest.mark.slow
def test_the_run_writes_bleu_and_rouge_and_watches_rouge_l(tracked):
    run, _ = tracked
    status = run.read_status()
    assert status.state == "finished", status.reason
    evals = [r for r in _records(run, "eval") if not r.get("base")]
    assert [r["step"] for r in evals] == [4, 8]
    for record in evals:  # every evaluation scored the answers: 16 one-word answers, on words
        for name in GENERATION_FIELDS:
            assert 0.0 <= record[name] <= 1.0, (name, record)
        assert record["segmentation"] == "words" and record["monitor"] == "rougeL"
        assert record["rouge1"] >= record["exact_match"]  # an exact answer has ROUGE-1 = 1
    # ROUGE-L goes up to improve: the best is the highest one seen
    assert status.best.metric == "rougeL" and status.best.value == max(r["rougeL"] for r in evals)
    baseline = [r for r in _records(run, "event") if r["event"] == "baseline"][0]
    assert {"bleu", "rouge1", "rouge2", "rougeL"} <= set(baseline)
    final = status.final
    assert final.monitor == "rougeL" and final.rougeL == status.best.value  # the best checkpoint, scored again
    assert f"ROUGE-L {100 * final.rougeL:.1f}" in display_name(run.run_id, final)


def _expected_scalars(run: RunDir) -> dict[str, dict[int, float]]:
    """Every figure a tracker should have: {tag: {step: value}} from metrics.jsonl (this attempt)."""
    expected: dict[str, dict[int, float]] = {}
    for line in run.metrics_path.read_text().splitlines():
        record = json.loads(line)
        parsed = tracking.record_scalars(parse_metric(record))
        if parsed:
            for tag, value in parsed[1].items():
                expected.setdefault(tag, {})[record["step"]] = value
    return expected


@pytest.mark.slow
def test_tensorboard_event_files_hold_every_scalar(tracked):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    run, _ = tracked
    folder = run.tracking_dir / "tensorboard"
    accumulator = EventAccumulator(str(folder), size_guidance={"scalars": 0, "tensors": 0})
    accumulator.Reload()
    expected = _expected_scalars(run)
    assert {"train/loss", "train/lr", "eval/val_loss", "eval/bleu", "eval/rougeL", "baseline/exact_match",
            "final/rougeL", "final/best_val_ppl"} <= set(expected)
    assert set(accumulator.Tags()["scalars"]) == set(expected)
    for tag, by_step in expected.items():
        got = {e.step: e.value for e in accumulator.Scalars(tag)}
        assert got.keys() == by_step.keys(), tag
        for step, value in by_step.items():
            assert got[step] == pytest.approx(value, rel=1e-6), (tag, step)  # float32 in the event file
    assert len([t for t in expected if t.startswith("train/")]) >= 8


@pytest.mark.slow
def test_mlflow_server_has_the_run_params_and_metrics(tracked):
    from mlflow.tracking import MlflowClient
    run, uri = tracked
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("mindtune-test")
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == 1
    mlrun = runs[0]
    assert mlrun.info.run_id == (run.tracking_dir / "mlflow_run_id").read_text().strip()
    assert mlrun.info.run_name == run.run_id and mlrun.info.status == "FINISHED"
    config = load_config(run.config_path)
    assert mlrun.data.params["train.learning_rate"] == str(config.train.learning_rate)
    assert mlrun.data.params["lora.rank"] == "4" and mlrun.data.params["tracking"] == "tensorboard,mlflow,swanlab"
    assert len(mlrun.data.params) == len(config.to_flat())
    assert mlrun.data.tags["best_checkpoint"] == str(run.checkpoint("best").resolve())
    expected = _expected_scalars(run)
    assert set(mlrun.data.metrics) == set(expected)
    for tag in ("train/loss", "eval/val_ppl", "eval/bleu", "eval/rougeL"):
        history = {m.step: m.value for m in client.get_metric_history(mlrun.info.run_id, tag)}
        assert history == pytest.approx(expected[tag], rel=1e-9), tag


@pytest.mark.slow
def test_swanlab_offline_log_holds_the_metrics(tracked):
    run, _ = tracked
    backups = list((run.tracking_dir / "swanlab").glob("run-*/backup.swanlab"))
    assert len(backups) == 1
    raw = backups[0].read_bytes().decode("utf-8", "replace")
    scalars: dict[str, dict[int, float]] = {}
    for match in re.finditer(r'\{"model_type": "Scalar".*?"epoch": \d+\}\}', raw):
        data = json.loads(match.group(0))["data"]
        scalars.setdefault(data["key"], {})[data["step"]] = data["metric"]["data"]
    expected = _expected_scalars(run)
    for tag in ("train/loss", "eval/val_loss", "eval/rouge1", "final/exact_match"):
        assert scalars[tag] == pytest.approx(expected[tag], rel=1e-6), tag
    config_yaml = list((run.tracking_dir / "swanlab").glob("run-*/files/config.yaml"))[0].read_text()
    assert "lora.rank" in config_yaml


@pytest.mark.slow
def test_a_resumed_run_continues_the_same_mlflow_run(tracked):
    from mlflow.tracking import MlflowClient
    run, uri = tracked
    first_id = (run.tracking_dir / "mlflow_run_id").read_text().strip()
    config = load_config(run.config_path).with_updates({"run.resume": str(run.checkpoint(4)),
                                                         "tracking": ["mlflow"]})
    run.restart_for_resume()
    run.config_path.write_text(config.to_yaml())
    assert run_worker(str(run.path)) == 0
    assert run.read_status().state == "finished" and run.read_status().attempt == 2
    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name("mindtune-test").experiment_id])
    assert [r.info.run_id for r in runs] == [first_id]
    # the second attempt logged steps 5-8 again into the same run (history: both attempts)
    losses = client.get_metric_history(first_id, "train/loss")
    assert sorted(m.step for m in losses) == [1, 2, 3, 4, 5, 5, 6, 6, 7, 7, 8, 8]
    assert runs[0].info.status == "FINISHED"


# ---- bad input: the run goes on, the message names the setting ----------------------------------

def test_a_tracking_uri_that_does_not_answer_is_reported_not_fatal(tmp_path):
    reports = []
    config = Config.from_dict({"tracking": ["mlflow"], "run": {"runs_dir": str(tmp_path)},
                               "mlflow": {"tracking_uri": f"http://127.0.0.1:{_free_port()}"}})
    run = RunDir(tmp_path / "r1")
    started = time.monotonic()
    trackers = tracking.Trackers.open(config, run, resumed=False, report=reports.append)
    assert time.monotonic() - started < tracking.PROBE_TIMEOUT_S + 5
    assert trackers.trackers == [] and len(reports) == 1
    event = reports[0]
    assert isinstance(event, TrackerEvent) and event.tracker == "mlflow" and event.setting == "mlflow.tracking_uri"
    assert "does not answer" in event.message and "training goes on without mlflow" in event.message
    trackers.record(TrainRecord(step=1, loss=1.0))  # nothing left to log to: no error
    trackers.close("finished")


def test_a_tracker_not_installed_is_reported_naming_the_setting(tmp_path, monkeypatch):
    monkeypatch.setitem(tracking.PACKAGES, "swanlab", ("swanlab_missing_module", "swanlab"))
    reports = []
    config = Config.from_dict({"tracking": ["tensorboard", "swanlab"], "run": {"runs_dir": str(tmp_path)}})
    trackers = tracking.Trackers.open(config, RunDir(tmp_path / "r1"), resumed=False, report=reports.append)
    assert [t.name for t in trackers.trackers] == ["tensorboard"]
    failed = [r for r in reports if isinstance(r, TrackerEvent)]
    assert len(failed) == 1 and failed[0].setting == "tracking"
    assert failed[0].message.startswith("tracking: swanlab needs the swanlab package, which is not installed")
    trackers.record(EvalRecord(step=4, val_loss=2.0, bleu=0.25))
    trackers.close("finished")
    assert list((tmp_path / "r1" / "tracking" / "tensorboard").glob("events.out.tfevents.*"))


def test_a_tracker_that_fails_later_is_dropped_once(tmp_path):
    reports = []
    config = Config.from_dict({"tracking": ["tensorboard"], "run": {"runs_dir": str(tmp_path)}})
    trackers = tracking.Trackers.open(config, RunDir(tmp_path / "r1"), resumed=False, report=reports.append)
    trackers.trackers[0].writer.close()
    trackers.trackers[0].writer = None  # the writer is gone: the next log raises inside the tracker
    for step in (1, 2, 3):
        trackers.record(TrainRecord(step=step, loss=1.0))
    failed = [r for r in reports if isinstance(r, TrackerEvent)]
    assert len(failed) == 1 and "tensorboard stopped working" in failed[0].message and trackers.trackers == []


def test_tracking_config_is_checked():
    assert Config.from_dict({"tracking": "mlflow, tensorboard"}).tracking == ["tensorboard", "mlflow"]
    assert Config.from_dict({"tracking": None}).tracking == []
    with pytest.raises(ConfigError) as info:
        Config.from_dict({"tracking": ["tensorbord"]})
    assert "tracking" in info.value.errors and "did you mean 'tensorboard'" in info.value.errors["tracking"]
    with pytest.raises(ConfigError) as info:
        Config.from_dict({"swanlab": {"mode": "online"}})
    assert "swanlab.mode" in info.value.errors
