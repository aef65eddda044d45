"""The Runs tab's Evaluate action: lm-eval tasks on a run's best checkpoint and on its base model,
each an evaluation run of its own (core.eval.eval_tasks: <runs_dir>/evals/<id>/), queued one after the
other in one worker that core.run.launcher starts as `python -m core.evaluate --run-dir A --run-dir B`
in its own process group (stoppable), and the comparison of their scores side by side with the Δ.
Plain values in and out (no widgets).
"""
from __future__ import annotations

import html
import threading
from pathlib import Path

import core.run.launcher as launcher
from core.spec.config import ConfigError, load_config
from core.spec.messages import Message
from core.eval.eval_tasks import (EVALS_DIR, EvalError, EvalSettings, create_eval_run, eval_runs_dir, local_tasks,
                             main_scores, read_results, read_settings, require_lm_eval)
from core.run.records import TERMINAL_STATES, RunDirError
from core.run.rundir import RunDir

from app.auth.access import SINGLE_USER, Viewer
from app.context import Console
from app.i18n import TEXTS, problem_text, reason_text, text

TARGETS = ("best", "base")


def task_dirs(console: Console) -> list[Path]:
    """The local lm-eval task folders: `eval_tasks/` in each data folder (data/eval_tasks ships)."""
    return [d / "eval_tasks" for d in console.settings.data_dirs if (d / "eval_tasks").is_dir()]


def task_choices(console: Console) -> list[str]:
    try:
        return sorted(local_tasks(task_dirs(console)))
    except EvalError:
        return []


def _model_of(run: RunDir, target: str) -> str:
    if target == "best":
        best = run.checkpoint("best")
        if not best.is_dir():
            raise EvalError(Message("eval.no_best", run=run.run_id))
        return str(best)
    try:
        return str(load_config(run.config_path).model.path)
    except (ConfigError, OSError) as exc:
        raise EvalError(Message("eval.no_base", run=run.run_id, error=str(exc))) from exc


def _queue_argv(runs: list[RunDir]) -> list[str]:
    """The worker that evaluates `runs` one after the other (core.evaluate's queue)."""
    argv = ["core.evaluate"]
    for run in runs:
        argv += ["--run-dir", str(run.path)]
    return argv


def _launch_queue(runs: list[RunDir], launch=launcher.launch) -> None:
    """One worker for the queue `runs` (the first starts now, the others wait `queued` in it);
    a thread reaps it."""
    launched = launch(runs[0], data_parallel=1, worker=_queue_argv(runs))
    if getattr(launched, "process", None) is not None:
        threading.Thread(target=_reap, args=(launched, runs, launch), daemon=True).start()


def _reap(launched, runs: list[RunDir], launch=launcher.launch) -> None:
    """Wait for a queue's worker, record a crash (no final status) in the folder it was on, and
    start a new worker for what it left queued (a crash must not strand the rest)."""
    launched.process.wait()
    for run in runs:
        try:
            launcher.reconcile(run)
        except (RunDirError, launcher.LaunchError, OSError):
            pass
    left = [r for r in runs if r.read_status().state == "queued"]
    if left:
        try:
            _launch_queue(left, launch)
        except (RunDirError, launcher.LaunchError, OSError):
            pass


def start(console: Console, run_ids: list[str], tasks: list[str], targets: list[str] | None = None,
          limit: int | None = None, chat_template: bool = False, viewer: Viewer = SINGLE_USER,
          lang: str = "en", launch=launcher.launch) -> str:
    """Start the evaluation of the one selected run's best checkpoint and/or its base model on
    `tasks`, in the background; returns the message to show."""
    if len(run_ids) != 1:
        return text("eval.msg.select_one", lang)
    if not tasks:
        return text("eval.msg.no_tasks", lang)
    targets = [t for t in (targets or TARGETS) if t in TARGETS]
    try:
        require_lm_eval()
        run = console.jobs.run_dir(run_ids[0], viewer)
        known = local_tasks(task_dirs(console))
        missing = [t for t in tasks if t not in known]
        if missing:
            folders = ", ".join(str(d) for d in task_dirs(console))
            raise EvalError(Message("eval.tasks_not_local", tasks=", ".join(missing), folders=folders) if folders
                            else Message("eval.tasks_no_folders", tasks=", ".join(missing)))
        models = {target: _model_of(run, target) for target in targets}  # all refusals before any folder
        queue = []
        for target in targets:
            settings = EvalSettings(model=models[target], tasks=list(tasks),
                                    include_path=[str(d) for d in task_dirs(console)],
                                    limit=int(limit) if limit else None, apply_chat_template=bool(chat_template),
                                    label=target, source_run=run.run_id)
            queue.append(create_eval_run(console.runs_dir, settings))
        # one after the other in one worker: side by side they would only compete for the CPU
        _launch_queue(queue, launch)
        started = [r.run_id for r in queue]
    except (EvalError, RunDirError, ValueError, launcher.LaunchError, OSError) as exc:
        return f"⚠ {problem_text(exc, lang)}"
    return text("eval.msg.started", lang).format(runs=", ".join(started))


def evaluations(console: Console, run_id: str) -> list[tuple[RunDir, EvalSettings]]:
    """The evaluation runs made for training run `run_id`, oldest first."""
    root = eval_runs_dir(console.runs_dir)
    found = []
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        run = RunDir(folder)
        try:
            settings = read_settings(run)
        except (EvalError, OSError, TypeError):
            continue
        if settings.source_run == run_id:
            found.append((run, settings))
    return found


def stop(console: Console, run_ids: list[str], viewer: Viewer = SINGLE_USER, lang: str = "en",
         stop_run=launcher.stop) -> str:
    """Stop the selected run's evaluations that are still going."""
    if len(run_ids) != 1:
        return text("eval.msg.select_one", lang)
    console.jobs.run_dir(run_ids[0], viewer)  # the viewer may see the run
    stopped = []
    going = [run for run, _ in evaluations(console, run_ids[0]) if run.read_status().state not in TERMINAL_STATES]
    # the waiting ones first, so the worker does not go on to them when the running one ends
    for run in sorted(going, key=lambda r: r.read_status().state != "queued"):
        stop_run(run, graceful=True, timeout_s=10.0)
        stopped.append(run.run_id)
    return text("eval.msg.stopped", lang).format(runs=", ".join(stopped) or "-")


def _latest(console: Console, run_id: str) -> dict[str, tuple[RunDir, EvalSettings]]:
    latest = {}
    for run, settings in evaluations(console, run_id):
        latest[settings.label] = (run, settings)  # a later evaluation replaces an earlier one
    return latest


def comparison(console: Console, run_id: str) -> list[tuple[str, float | None, float | None]]:
    """(task/metric, base score, best score) of the latest finished evaluations of each."""
    scores = {}
    for label, (run, _) in _latest(console, run_id).items():
        results = read_results(run.path)
        if results is not None:
            scores[label] = main_scores(results)
    names = sorted(set().union(*scores.values())) if scores else []
    return [(n, scores.get("base", {}).get(n), scores.get("best", {}).get(n)) for n in names]


def _progress(run: RunDir, lang: str) -> str:
    """'running · log-likelihoods 400/400, generation 10/100', 'finished · 500/500 requests': each of
    lm-eval's phases while it runs (core.evaluate.Progress), the requests of all of them once over."""
    status = run.read_status()
    shown = text(f"state.{status.state}", lang) if status.state else "?"
    phases = (status.extra or {}).get("phases") if isinstance(status.extra, dict) else None
    if status.state not in TERMINAL_STATES and isinstance(phases, dict) and phases:
        shown += " · " + ("，" if lang == "zh" else ", ").join(
            f"{text(f'eval.phase.{kind}', lang) if f'eval.phase.{kind}' in TEXTS else kind} {done}/{total}"
            for kind, (done, total) in phases.items())
    elif status.total_steps:
        shown += " · " + text("eval.requests", lang).format(done=status.step or 0, total=status.total_steps)
    if status.state == "failed" and status.reason:
        shown += f": {reason_text(status.reason, lang, status.reason_message)}"
    return shown


def results_html(console: Console, run_ids: list[str], viewer: Viewer = SINGLE_USER, lang: str = "en") -> str:
    """The selected run's evaluations (state, progress) and base vs best scores with their Δ."""
    if len(run_ids) != 1:
        return ""
    try:
        console.jobs.run_dir(run_ids[0], viewer)
    except (RunDirError, ValueError):
        return ""
    latest = _latest(console, run_ids[0])
    if not latest:
        return f'<p class="mt-note">{html.escape(text("eval.none", lang))}</p>'
    lines = [f"<li>{html.escape(text(f'eval.target.{label}', lang))}: <code>{html.escape(run.run_id)}</code> "
             f"({html.escape(_progress(run, lang))})</li>" for label, (run, _) in sorted(latest.items())]
    rows = []
    for name, base, best in comparison(console, run_ids[0]):
        delta = "-" if base is None or best is None else f"{best - base:+.4g}"
        cells = [name, "-" if base is None else f"{base:.4g}", "-" if best is None else f"{best:.4g}", delta]
        rows.append("<tr>" + "".join(f'<td class="mt-delta">{html.escape(c)}</td>' for c in cells) + "</tr>")
    head = "".join(f"<th>{html.escape(text(k, lang))}</th>" for k in
                   ("eval.col.metric", "eval.target.base", "eval.target.best", "eval.col.delta"))
    table = (f'<table class="mt-config-diff mt-eval-table"><tr>{head}</tr>{"".join(rows)}</table>' if rows else "")
    return f'<div class="mt-table-wrap mt-evals"><ul>{"".join(lines)}</ul>{table}</div>'


__all__ = ["EVALS_DIR", "TARGETS", "task_dirs", "task_choices", "start", "stop", "evaluations", "comparison",
           "results_html"]
