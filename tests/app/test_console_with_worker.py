"""The console's callbacks driving a real worker (no browser): start from form values, watch the
chart data arrive, steer early stopping, stop gracefully with nothing left running, export the
adapter, and restart the console to find the run again. Slow: it trains a tiny model on the CPU."""
from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

import core.run.launcher as launcher

from app.tabs import form
from app.tabs import monitor_callbacks as monitor
from app.tabs import train_callbacks as train
from app.context import Console
from app.runs.exports import run_export
from app.settings import Settings

from tests.app.test_svg_chart import points
from tests.waiting import wait_for_run

pytestmark = pytest.mark.slow
TIMEOUT_S = 400


def wait_long(run, condition, what: str, timeout_s: float = TIMEOUT_S):
    """`condition()` while the run goes on: a run that ends first fails the wait with its own reason."""
    return wait_for_run(run, condition, what, timeout_s, every_s=0.5)


@pytest.fixture
def real_console(tmp_path) -> Console:
    from tests.core.tiny_setup import make_workspace  # builds the model with MindSpore (test side only)

    make_workspace(tmp_path)
    settings = Settings(models_dirs=(tmp_path,), data_dirs=(tmp_path / "data",), runs_dir=tmp_path / "runs",
                        configs_dir=tmp_path / "no-configs")
    return Console.create(settings)


def test_start_watch_steer_stop_export(real_console):
    console = real_console
    values = form.to_values(train.starter_config(console))
    values.update({"train.length": 5000, "train.eval_every": 4, "train.log_every": 1, "train.micro_batch_size": 4,
                   "train.warmup_steps": 2, "data.max_seq_len": 64, "eval.downstream": False,
                   "early_stopping.patience": 100, "lora.rank": 4})
    outcome = train.start(values, console)
    assert outcome.run_id, outcome
    session = monitor.MonitorSession()
    seen: dict[str, dict] = {}

    def charts_have_points():
        result = monitor.tick(session, outcome.run_id, console)
        for name, svg in result.charts.items():
            seen[name] = points(svg)
        return len(seen.get("loss", {}).get("loss", {})) >= 3 and len(seen.get("val_ppl", {}).get("val ppl", {})) >= 2

    wait_long(console.jobs.run_dir(outcome.run_id), charts_have_points, "loss and perplexity points")
    message = monitor.apply_early_stopping(console, outcome.run_id, True, "val_loss", 50, 0.0)
    assert "sent to the worker" in message

    def patience_applied() -> bool:
        monitor.tick(session, outcome.run_id, console)
        return any(c.early_stopping["patience"] == 50 for c in session.charts.controls)

    wait_long(console.jobs.run_dir(outcome.run_id), patience_applied, "the worker to apply the new patience")
    monitor.stop(console, outcome.run_id, graceful=True)
    console.jobs.wait_for_stops(120)
    final = monitor.tick(session, outcome.run_id, console)
    assert "stopped" in final.state and not final.active
    run = console.jobs.run_dir(final.run_id)
    assert not launcher.run_processes(run)
    zipped = run_export(run.path, "peft", console.runs_dir)
    with zipfile.ZipFile(zipped) as archive:
        names = {Path(n).name for n in archive.namelist()}
    assert {"adapter_config.json", "adapter_model.safetensors"} <= names
    # a console started afterwards lists the run as it is on disk
    assert Console.create(console.settings).jobs.reattach().alive == []
    assert final.run_id in monitor.run_ids(console)
