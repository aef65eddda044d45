"""Evaluation runs without lm-eval or MindSpore: local task folders, the eval run folder, results.

An evaluation (`python -m core.evaluate`) is a run of its own, in a folder the console lists apart
from training runs (`<runs_dir>/evals/<id>/`; the runs list skips `evals/`, which has no status):

    config.yaml    the evaluation's settings (EvalSettings), written before launch
    status.json    state, pid, progress (step = requests scored, total_steps = requests)
    control.json   the console's stop request
    train.log      the worker's output (the name core.run.launcher writes to)
    results.json   {model, tasks: {task: {metric: value}}, samples, seconds, ...} when it finishes

A local task folder holds lm-eval task YAMLs (`task: name`); `data_files` of a `dataset_path: json`
task are relative to the YAML's folder (core.evaluate resolves them).
"""
from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from core.run.ckpt_store import STATE_FILE, WEIGHTS_FILE
from core.spec.codec import CodecError, build, encode
from core.spec.errors import MessageError, said_of
from core.spec.messages import Message
from core.run.records import RunDirError
from core.run.rundir import RunDir
from core.run.runs import next_free_run_id

EVALS_DIR = "evals"
RESULTS_FILE = "results.json"
REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_TASKS_DIR = REPO_ROOT / "data" / "eval_tasks"


class EvalError(MessageError):
    """Bad evaluation settings: names the setting (task, path) and what would be valid."""


@dataclass
class EvalSettings:
    """What one evaluation runs: a model source (model folder, checkpoint, run folder or export),
    lm-eval task names, local task folders, and lm-eval's usual knobs."""
    model: str
    tasks: list[str]
    include_path: list[str] = field(default_factory=list)
    limit: int | None = None
    num_fewshot: int | None = None
    batch_size: int = 8
    apply_chat_template: bool = False
    label: str = ""          # e.g. "base" or "best": how the console shows it beside its run
    source_run: str = ""     # the training run it belongs to (the console's comparison)

    def to_yaml(self) -> str:
        return yaml.safe_dump(encode(self), sort_keys=False, allow_unicode=True)

    @classmethod
    def from_yaml(cls, text: str, where: str = "config.yaml") -> EvalSettings:
        data = yaml.safe_load(text)
        if not isinstance(data, dict):
            raise EvalError(Message("eval.not_settings", file=str(where)))
        unknown = sorted(set(data) - set(cls.__dataclass_fields__))
        if unknown:
            raise EvalError(Message("eval.unknown_settings", file=str(where), setting_names=", ".join(unknown)))
        try:
            return build(cls, data, where)  # each value of its field's type (core.spec.codec)
        except CodecError as exc:
            raise EvalError(str(exc)) from None

    def check(self) -> None:
        if not self.model:
            raise EvalError(Message("eval.no_model"))
        if not self.tasks:
            raise EvalError(Message("eval.no_tasks"))
        if self.limit is not None and self.limit < 1:
            raise EvalError(Message("eval.limit", value=self.limit))
        if self.batch_size < 1:
            raise EvalError(Message("eval.batch_size", value=self.batch_size))
        resolve_source(self.model)


NOT_INSTALLED = Message("eval.not_installed")


def require_lm_eval() -> None:
    """An EvalError saying how to install lm-eval when it is missing (checked without importing it)."""
    import importlib.util
    if importlib.util.find_spec("lm_eval") is None:
        raise EvalError(NOT_INSTALLED)


def _is_train_checkpoint(folder: Path) -> bool:
    return (folder / STATE_FILE).is_file() and (folder / WEIGHTS_FILE).is_file()


def resolve_source(path: str | Path) -> tuple[str, Path]:
    """(kind, folder) of the model an evaluation runs on: "checkpoint" (a training checkpoint, or
    a run folder's best one), "peft" (an adapter export), "hf" (a model folder or a merged export)."""
    folder = Path(path)
    if not folder.is_dir():
        raise EvalError(Message("eval.not_a_folder", folder=str(folder)))
    if (folder / "checkpoints" / "best").is_dir():  # a run folder
        folder = folder / "checkpoints" / "best"
    if _is_train_checkpoint(folder):
        return "checkpoint", folder
    if (folder / "adapter_config.json").is_file():
        return "peft", folder
    if (folder / "config.json").is_file() and (folder / "tokenizer.json").is_file():
        if (folder / "model.ckpt").is_file():
            raise EvalError(Message("eval.ckpt_export", folder=str(folder)))
        return "hf", folder
    raise EvalError(Message("eval.not_a_model", folder=str(folder)))


def local_tasks(folders) -> dict[str, Path]:
    """Task name -> its YAML, for every `*.yaml` with a `task:` key in `folders` (recursively).
    A YAML that does not parse is an EvalError naming it."""
    found: dict[str, Path] = {}
    for folder in folders:
        folder = Path(folder)
        if not folder.is_dir():
            raise EvalError(Message("eval.include_not_folder", folder=str(folder)))
        for path in sorted(folder.rglob("*.yaml")):
            try:
                data = yaml.safe_load(path.read_text(encoding="utf-8"))
            except yaml.YAMLError as exc:
                raise EvalError(Message("eval.invalid_yaml", file=str(path), yaml_says=str(exc))) from exc
            if isinstance(data, dict) and isinstance(data.get("task"), str):
                found.setdefault(data["task"], path)
    return found


def eval_runs_dir(runs_dir: str | Path) -> Path:
    return Path(runs_dir) / EVALS_DIR


def create_eval_run(runs_dir: str | Path, settings: EvalSettings, now: dt.datetime | None = None) -> RunDir:
    """A new `queued` evaluation folder under <runs_dir>/evals/ with its settings, named by the training
    run it belongs to when it has one (`eval_<run id>_best_<time>`), else by its model's folder
    (`eval_tiny-demo_<time>`); no checkpoints/ or export/ in it (an evaluation makes neither)."""
    settings.check()
    stamp = (now or dt.datetime.now()).strftime("%Y%m%d-%H%M%S")
    what = settings.source_run or Path(settings.model.rstrip("/")).name
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", what)[:80] or "model"
    label = f"_{settings.label}" if settings.label else ""
    run_id = next_free_run_id(eval_runs_dir(runs_dir), f"eval_{name}{label}_{stamp}")
    try:
        return RunDir.create(eval_runs_dir(runs_dir), run_id, settings.to_yaml(), training=False)
    except RunDirError as exc:
        raise EvalError(said_of(exc)) from exc


def read_settings(run: RunDir) -> EvalSettings:
    return EvalSettings.from_yaml(run.config_path.read_text(encoding="utf-8"), str(run.config_path))


def read_results(run: RunDir | str | Path) -> dict | None:
    """results.json of an evaluation run, or None while it has none (or it is unreadable)."""
    path = Path(run) / RESULTS_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def main_scores(results: dict) -> dict[str, float]:
    """{"task/metric": value} of an evaluation's results: every numeric metric, stderr left out."""
    scores = {}
    for task, metrics in sorted((results.get("tasks") or {}).items()):
        for key, value in sorted(metrics.items()):
            if isinstance(value, (int, float)) and not isinstance(value, bool) and "stderr" not in key:
                scores[f"{task}/{key}"] = float(value)
    return scores
