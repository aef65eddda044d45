"""Mirror a run's records to the experiment trackers teams already use: TensorBoard, MLflow, SwanLab.

`tracking: [tensorboard, mlflow, swanlab]` in the config (each off by default). The worker (rank 0)
hands every record it appends to metrics.jsonl to `Trackers.record`, which logs its figures as
scalars (`train/loss`, `eval/val_ppl`, `eval/bleu`, `baseline/...`, `final/...`); the config goes
in as parameters when the run starts, the best checkpoint's path and the final figures when it
ends. The run folder stays the source of truth: a tracker that cannot start (package missing,
server down) or fails later is reported once (train.log and a `tracker` event the Monitor shows)
and dropped, and training goes on.

Each tracker is a small class with torchtune's metric-logger protocol (`log`, `log_dict`, `close`)
plus `log_params`:
- TensorBoard: tensorboardX's SummaryWriter, event files in `<run>/tracking/tensorboard`
  (`tensorboard --logdir runs/` shows every run);
- MLflow: one MLflow run per mindtune run at `mlflow.tracking_uri` (else $MLFLOW_TRACKING_URI, else
  `sqlite:///<runs_dir>/mlflow.db`); its id is kept in `<run>/tracking/mlflow_run_id`, so a resumed
  run continues the same MLflow run;
- SwanLab: `swanlab.mode` offline (files in `<run>/tracking/swanlab`, `swanlab sync` uploads them),
  local (needs swanboard) or cloud.
"""
from __future__ import annotations

import importlib.util
import math
import os
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol

from core.spec.config import Config
from core.spec.messages import Message
from core.run.records import (GENERATION_FIELDS, BaselineEvent, EndEvent, EvalRecord, EventRecord, MetricRecord,
    TrackerEvent, TrainRecord)
from core.run.rundir import RunDir

# what each tracker needs installed (pip names, as in requirements-tracking.txt)
PACKAGES = {"tensorboard": ("tensorboardX", "tensorboardX"), "mlflow": ("mlflow", "mlflow"),
            "swanlab": ("swanlab", "swanlab")}
SKIPPED_FIELDS = {"step", "time", "generation", "total_steps", "epoch", "best_step", "patience_left"}
PROBE_TIMEOUT_S = 5.0
# an MLflow server that stops answering must not hold the training loop for minutes of retries
MLFLOW_HTTP_ENV = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1", "MLFLOW_HTTP_REQUEST_TIMEOUT": "30"}


class TrackerUnavailable(Exception):
    """A tracker that cannot start; the message names the setting to change (a
    core.spec.messages.Message where the catalogue has it: `said`)."""

    def __init__(self, message: str, setting: str):
        super().__init__(message)
        self.setting = setting
        self.said = [message] if isinstance(message, Message) else None


class Tracker(Protocol):
    name: str

    def log(self, name: str, value: float, step: int) -> None: ...

    def log_dict(self, values: Mapping[str, float], step: int) -> None: ...

    def log_params(self, params: Mapping[str, Any]) -> None: ...

    def close(self, state: str) -> None: ...


# ---- the trackers ------------------------------------------------------------------------------

class TensorBoardTracker:
    name = "tensorboard"

    def __init__(self, logdir: Path):
        from tensorboardX import SummaryWriter
        self.writer = SummaryWriter(logdir=str(logdir))

    def log(self, name: str, value: float, step: int) -> None:
        self.writer.add_scalar(name, value, step)

    def log_dict(self, values: Mapping[str, float], step: int) -> None:
        for name, value in values.items():
            self.writer.add_scalar(name, value, step)
        self.writer.flush()  # readable while the run goes on

    def log_params(self, params: Mapping[str, Any]) -> None:
        self.writer.add_text("config", "\n".join(f"    {k}: {v}" for k, v in params.items()), 0)

    def log_text(self, name: str, text: str, step: int) -> None:
        self.writer.add_text(name, text, step)

    def close(self, state: str) -> None:
        self.writer.add_text("state", state, 0)
        self.writer.close()


class MlflowTracker:
    name = "mlflow"
    STATES = {"finished": "FINISHED", "early_stopped": "FINISHED", "stopped": "KILLED", "failed": "FAILED"}

    def __init__(self, uri: str, experiment: str, run: RunDir, resumed: bool):
        for key, value in MLFLOW_HTTP_ENV.items():
            os.environ.setdefault(key, value)
        from mlflow.tracking import MlflowClient
        self.client = MlflowClient(tracking_uri=uri)
        self.id_path = run.tracking_dir / "mlflow_run_id"
        stored = self.id_path.read_text(encoding="utf-8").strip() if self.id_path.is_file() else ""
        if stored:  # a resumed (or restarted) run continues its MLflow run
            self.run_id = stored
            self.client.update_run(self.run_id, status="RUNNING")
            self.logged_params = set(self.client.get_run(self.run_id).data.params)
        else:
            found = self.client.get_experiment_by_name(experiment)
            experiment_id = found.experiment_id if found else self.client.create_experiment(experiment)
            self.run_id = self.client.create_run(experiment_id, run_name=run.run_id,
                                                 tags={"mindtune.run_dir": str(run.path.resolve())}).info.run_id
            self.id_path.parent.mkdir(parents=True, exist_ok=True)
            self.id_path.write_text(self.run_id + "\n", encoding="utf-8")
            self.logged_params = set()

    def log(self, name: str, value: float, step: int) -> None:
        self.client.log_metric(self.run_id, name, value, step=step)

    def log_dict(self, values: Mapping[str, float], step: int) -> None:
        from mlflow.entities import Metric
        now = int(time.time() * 1000)
        self.client.log_batch(self.run_id, metrics=[Metric(k, v, now, step) for k, v in values.items()])

    def log_params(self, params: Mapping[str, Any]) -> None:
        """The config as MLflow parameters (immutable there: a resumed run adds only new keys)."""
        from mlflow.entities import Param
        fresh = [Param(k, str(v)[:6000]) for k, v in params.items() if k not in self.logged_params]
        for start in range(0, len(fresh), 100):  # MLflow takes at most 100 parameters per batch
            self.client.log_batch(self.run_id, params=fresh[start:start + 100])
        self.logged_params |= {p.key for p in fresh}

    def log_text(self, name: str, text: str, step: int) -> None:
        self.client.set_tag(self.run_id, name, text)

    def close(self, state: str) -> None:
        self.client.set_terminated(self.run_id, status=self.STATES.get(state, "FINISHED"))


class SwanlabTracker:
    name = "swanlab"

    def __init__(self, project: str, mode: str, logdir: Path, run_id: str, params: Mapping[str, Any]):
        import swanlab
        self.swanlab = swanlab
        logdir.mkdir(parents=True, exist_ok=True)
        self.run = swanlab.init(project=project, experiment_name=run_id, config=dict(params), mode=mode,
                                logdir=str(logdir))

    def log(self, name: str, value: float, step: int) -> None:
        self.run.log({name: value}, step=step)

    def log_dict(self, values: Mapping[str, float], step: int) -> None:
        self.run.log(dict(values), step=step)

    def log_params(self, params: Mapping[str, Any]) -> None:
        pass  # given to swanlab.init as its config

    def log_text(self, name: str, text: str, step: int) -> None:
        self.run.log({name: self.swanlab.Text(text)}, step=step)

    def close(self, state: str) -> None:
        done = state in ("finished", "early_stopped")
        self.swanlab.finish(state=self.swanlab.State.SUCCESS if done else self.swanlab.State.CRASHED,
                            **({} if done else {"error": f"the run ended {state}"}))


# ---- opening them ------------------------------------------------------------------------------

def mlflow_uri(config: Config) -> str:
    """Where MLflow runs go: mlflow.tracking_uri, else $MLFLOW_TRACKING_URI, else a sqlite file in
    the runs folder (MLflow's own default store kind; `mlflow ui --backend-store-uri` that URI)."""
    return (config.mlflow.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
            or f"sqlite:///{(Path(config.run.runs_dir) / 'mlflow.db').resolve()}")


@dataclass(frozen=True)
class Destination:
    """Where one tracker writes a run and the command that shows it ('' when a browser opens it):
    `kind` names the case (tensorboard, mlflow_store, mlflow_server, swanlab_folder, swanlab_cloud)."""
    kind: str
    where: str
    command: str = ""


def destinations(config: Config, run_path: Path) -> list[Destination]:
    """Where each tracker of `config` writes the run in folder `run_path` (the console says it in the
    Monitor, under the Tracking checkboxes and on Start)."""
    out = []
    for name in config.tracking:
        if name == "tensorboard":
            folder = str(Path(run_path) / "tracking" / "tensorboard")
            out.append(Destination("tensorboard", folder, f"tensorboard --logdir {folder}"))
        elif name == "mlflow":
            uri = mlflow_uri(config)
            out.append(Destination("mlflow_server", uri) if uri.startswith(("http://", "https://"))
                       else Destination("mlflow_store", uri, f"mlflow ui --backend-store-uri {uri}"))
        elif name == "swanlab":
            folder = str(Path(run_path) / "tracking" / "swanlab")
            out.append(Destination("swanlab_cloud", config.swanlab.project) if config.swanlab.mode == "cloud"
                       else Destination("swanlab_folder", folder, f"swanlab watch {folder}"))
    return out


def check_installed(name: str) -> None:
    """TrackerUnavailable naming `tracking` when the tracker's package is not installed."""
    module, package = PACKAGES[name]
    if importlib.util.find_spec(module) is None:
        raise TrackerUnavailable(Message("run.check.tracker_missing", tracker=name, package=package), "tracking")


def check_mlflow_server(uri: str) -> None:
    """An http(s) tracking URI must answer (MLflow's /health) within PROBE_TIMEOUT_S."""
    if not uri.startswith(("http://", "https://")):
        return
    try:
        with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=PROBE_TIMEOUT_S) as answer:
            answer.read(64)
    except (urllib.error.URLError, OSError, ValueError) as err:
        reason = getattr(err, "reason", err)
        raise TrackerUnavailable(Message("tracking.server_silent", uri=repr(uri), os_error=str(reason)),
                                 "mlflow.tracking_uri") from None


def open_tracker(name: str, config: Config, run: RunDir, resumed: bool, params: Mapping[str, Any]) -> Tracker:
    """One configured tracker, started; TrackerUnavailable (naming the setting) when it cannot be."""
    check_installed(name)
    if name == "tensorboard":
        return TensorBoardTracker(run.tracking_dir / "tensorboard")
    if name == "mlflow":
        uri = mlflow_uri(config)
        check_mlflow_server(uri)
        try:
            return MlflowTracker(uri, config.mlflow.experiment, run, resumed)
        except Exception as err:  # noqa: BLE001 — MLflow's errors have no common base worth naming
            raise TrackerUnavailable(Message("tracking.mlflow_failed", uri=uri, error=f"{type(err).__name__}: {err}"),
                                     "mlflow.tracking_uri") from None
    try:
        return SwanlabTracker(config.swanlab.project, config.swanlab.mode, run.tracking_dir / "swanlab",
                              run.run_id, params)
    except Exception as err:  # noqa: BLE001
        raise TrackerUnavailable(Message("tracking.swanlab_failed", mode=config.swanlab.mode,
                                         error=f"{type(err).__name__}: {err}"), "swanlab.mode") from None


def record_scalars(record: MetricRecord) -> tuple[str, dict[str, float]] | None:
    """A record's figures as tracker scalars: (section, {name: value}), or None for one with none.
    Train records go under `train/`, evaluations under `eval/` (the model before training under
    `baseline/`: its validation figures from its eval record, its answer scores from the baseline
    event), the end of the run under `final/`; counters and bookkeeping fields are left out."""
    keep = None
    if isinstance(record, TrainRecord):
        section = "train"
    elif isinstance(record, EvalRecord):
        section = "baseline" if record.base else "eval"
    elif isinstance(record, EndEvent):
        section = "final"
    elif isinstance(record, BaselineEvent):
        section, keep = "baseline", GENERATION_FIELDS
    else:
        return None
    values = {f"{section}/{k}": float(v) for k, v in record.values().items()
              if k not in SKIPPED_FIELDS and (keep is None or k in keep) and isinstance(v, (int, float)) and not isinstance(v, bool)
              and math.isfinite(v)}
    return (section, values) if values else None


class Trackers:
    """The trackers a run mirrors to. A tracker that raises is reported once through `report` (an
    event the worker also prints to train.log) and dropped; the others go on."""

    def __init__(self, trackers: list[Tracker], report: Callable[[EventRecord], None] | None = None):
        self.trackers, self.report = trackers, report

    @classmethod
    def none(cls) -> Trackers:
        return cls([])

    @classmethod
    def open(cls, config: Config, run: RunDir, resumed: bool, report: Callable[[EventRecord], None]) -> Trackers:
        params = config.to_flat()
        params = {k: ",".join(map(str, v)) if isinstance(v, list) else v for k, v in params.items()}
        out = cls([], report)
        for name in config.tracking:
            try:
                tracker = open_tracker(name, config, run, resumed, params)
            except TrackerUnavailable as err:
                out._fail(name, err.args[0], err.setting)
                continue
            out.trackers.append(tracker)
            out._call(tracker, "log_params", params)
        if out.trackers:
            report(EventRecord(message=Message("tracking.mirroring",
                                               tracker_names=", ".join(t.name for t in out.trackers))))
        return out

    def record(self, record: MetricRecord) -> None:
        if not self.trackers:
            return
        scalars = record_scalars(record)
        if scalars is not None:
            for tracker in list(self.trackers):
                self._call(tracker, "log_dict", scalars[1], record.step or 0)

    def close(self, state: str, best_checkpoint: Path | None = None) -> None:
        """The best checkpoint's path (when there is one), then each tracker closed with the run's state."""
        for tracker in list(self.trackers):
            if best_checkpoint is not None and best_checkpoint.exists():
                self._call(tracker, "log_text", "best_checkpoint", str(best_checkpoint.resolve()), 0)
            self._call(tracker, "close", state)
        self.trackers = []

    def _call(self, tracker: Tracker, method: str, *args: Any) -> None:
        try:
            getattr(tracker, method)(*args)
        except Exception as err:  # noqa: BLE001 — a tracker never ends the run
            self.trackers.remove(tracker)
            setting = "mlflow.tracking_uri" if tracker.name == "mlflow" else "tracking"
            self._fail(tracker.name, Message("tracking.stopped_working", tracker=tracker.name,
                                             error=f"{type(err).__name__}: {err}"), setting)

    def _fail(self, name: str, message: str, setting: str) -> None:
        if self.report is not None:
            self.report(TrackerEvent(event="tracker", message=Message("tracking.goes_on", reason=message, tracker=name),
                                     tracker=name, setting=setting))
