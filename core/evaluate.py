"""Benchmarks through lm-evaluation-harness on mindtune's MindSpore model (core.engine.lm_eval_model).

    python -m core.evaluate --model models/tiny-demo --tasks demo_story_mc,demo_story_gen \\
        --include-path data/eval_tasks [--limit N] [--output FILE] [--apply-chat-template]
    python -m core.evaluate --checkpoint runs/<id>/checkpoints/best --tasks ...
    python -m core.evaluate --run-dir runs/evals/<id>     # a folder the console made (config.yaml)
    python -m core.evaluate --run-dir A --run-dir B       # a queue: B starts when A has ended

Every evaluation writes a run folder of its own (core.eval.eval_tasks: status.json with progress,
control.json for a stop, results.json), so the console runs it in the background like a training
run. No hub at run time: HF_DATASETS_OFFLINE / HF_HUB_OFFLINE are set, a task name lm-eval does not
know or a task whose data is not on disk is refused before the model loads, naming the task.
Several `--run-dir`s run one after the other in this one process (the console's base and best
evaluations: they would only compete for the CPU side by side); each waits `queued` until its turn,
its output goes to its own train.log, and one stopped by the user while it waits is skipped.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

from core.eval.eval_tasks import (DEFAULT_TASKS_DIR, RESULTS_FILE, EvalError, EvalSettings, create_eval_run,
                             local_tasks, read_settings, require_lm_eval)
from core.run.launcher import TeeToLog, log_header, process_fields
from core.run.records import RunDirError
from core.spec.errors import report, said_of
from core.spec.messages import Message
from core.run.rundir import RunDir, atomic_write_json

OFFLINE_ENV = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
STATUS_EVERY_S = 1.0


class StopRequested(Exception):
    """The console asked the evaluation to stop (control.json or SIGTERM)."""


def go_offline() -> None:
    """No hub at run time: datasets and huggingface_hub read only what is on disk."""
    os.environ.update(OFFLINE_ENV)


# ---- tasks ------------------------------------------------------------------------------------

def _resolve_data_files(name: str, config: dict, folder: Path) -> None:
    """Make a local json/csv task's data_files absolute (relative to its YAML's folder) and check
    that each file is there."""
    kwargs = config.get("dataset_kwargs") or {}
    files = kwargs.get("data_files")
    if files is None:
        return

    def resolve(path: str) -> str:
        full = Path(path) if Path(path).is_absolute() else folder / path
        if not full.is_file():
            raise EvalError(Message("eval.data_file_missing", task=repr(name), file=str(full), folder=str(folder)))
        return str(full)

    if isinstance(files, str):
        kwargs["data_files"] = resolve(files)
    elif isinstance(files, list):
        kwargs["data_files"] = [resolve(f) for f in files]
    elif isinstance(files, dict):
        kwargs["data_files"] = {split: ([resolve(f) for f in v] if isinstance(v, list) else resolve(v))
                                for split, v in files.items()}
    config["dataset_kwargs"] = kwargs


def _builtin_mentions(names: list[str]) -> set[str]:
    """The names that appear in some YAML of lm-eval's own task folder: a name that appears in
    none cannot be one of its tasks, groups or tags (a second's read, where indexing the folder
    takes a minute)."""
    import lm_eval
    root = Path(lm_eval.__file__).parent / "tasks"
    left, seen = set(names), set()
    for path in root.rglob("*.yaml"):
        text = path.read_text(encoding="utf-8", errors="replace")
        seen.update(n for n in left if n in text)
        left -= seen
        if not left:
            break
    return seen


def resolve_tasks(names: list[str], include_paths: list[str]) -> tuple[list, object]:
    """lm-eval's Task objects for `names` (and the TaskManager), each loaded with its data; an
    unknown name or missing data is an EvalError naming the task. lm-eval's own task index is
    built only when a name is not a local task."""
    go_offline()
    require_lm_eval()
    import warnings
    from lm_eval.tasks import TaskManager, get_task_dict
    from lm_eval.tasks._yaml_loader import load_yaml  # what TaskManager reads YAMLs with (include:, !function)
    local = local_tasks(include_paths)
    others = [n for n in names if n not in local]
    def refuse(unknown):
        tasks, paths = ", ".join(repr(n) for n in unknown), ", ".join(include_paths)
        if not paths:
            raise EvalError(Message("eval.unknown_task_no_paths", tasks=tasks))
        raise EvalError(Message("eval.unknown_task_local", tasks=tasks, paths=paths, task_names=", ".join(sorted(local)))
                        if local else Message("eval.unknown_task", tasks=tasks, paths=paths))

    mentioned = _builtin_mentions(others) if others else set()
    if set(others) - mentioned:
        refuse([n for n in others if n not in mentioned])
    manager = TaskManager(include_path=[str(p) for p in include_paths] or None, include_defaults=bool(others))
    if [n for n in others if n not in manager.all_tasks]:
        refuse([n for n in others if n not in manager.all_tasks])
    tasks = []
    for name in names:
        spec: str | dict = name
        if name in local:
            spec = load_yaml(local[name])
            _resolve_data_files(name, spec, local[name].parent)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                tasks.extend(get_task_dict([spec], manager).values())
        except Exception as exc:  # datasets' offline errors come in many classes
            raise EvalError(Message("eval.task_data_missing", task=repr(name),
                                    error=f"{type(exc).__name__}: {exc}")) from exc
    return tasks, manager


# ---- the run ----------------------------------------------------------------------------------

class Progress:
    """Status updates at most once a second, and the stop check. lm-eval scores its requests in phases
    (the log-likelihoods of every task, then the generations): status.json's step and total are the
    requests of every phase so far, and `extra.phases` each phase's [done, total], so the page says
    'log-likelihoods 400/400, generation 10/100' and the finished evaluation its requests in all."""

    def __init__(self, run: RunDir):
        self.run = run
        self.last = 0.0
        self.phases: dict[str, list[int]] = {}

    def __call__(self, kind: str, done: int, total: int) -> None:
        if self.run.read_control().stop:
            raise StopRequested()
        self.phases[kind] = [done, total]
        now = time.monotonic()
        if now - self.last >= STATUS_EVERY_S or done == total:
            self.last = now
            self.write()

    def write(self) -> None:
        done = sum(d for d, _ in self.phases.values())
        total = sum(t for _, t in self.phases.values())
        self.run.write_status(step=done, total_steps=total, extra={"phase": next(reversed(self.phases), None),
                                                                    "phases": dict(self.phases)})


def _metric_name(key: str) -> str:
    metric, _, filter_name = key.partition(",")
    return metric if filter_name in ("", "none") else f"{metric}_{filter_name}"


def summarize(output: dict) -> dict[str, dict[str, float]]:
    """lm-eval's results -> {task: {metric: value}} (filter `none` left out of the names)."""
    tasks = {}
    for task, metrics in output["results"].items():
        tasks[task] = {_metric_name(k): v for k, v in metrics.items()
                       if k not in ("alias", "sample_len") and isinstance(v, (int, float)) and not isinstance(v, bool)}
    return tasks


def evaluate(settings: EvalSettings, run: RunDir | None = None, log=print, resolved=None) -> dict:
    """Run the tasks on the model; returns results.json's content (written into `run` if given)."""
    settings.check()
    tasks, manager = resolved or resolve_tasks(settings.tasks, settings.include_path)
    from lm_eval.evaluator import simple_evaluate
    # MindSpore and lm-evaluation-harness (optional: requirements-eval.txt) load only when tasks run:
    # the CLI's argument and task errors, and the tests of the settings, answer without them
    from core.engine.generate import use_device
    from core.engine.lm_eval_model import MindtuneLM
    use_device("cpu")
    started = time.perf_counter()
    lm = MindtuneLM(settings.model, batch_size=settings.batch_size,
                    progress=Progress(run) if run is not None else None)
    log(f"model: {lm.description} ({lm.kernels}); tasks: {', '.join(settings.tasks)}")
    loaded = time.perf_counter()
    output = simple_evaluate(model=lm, tasks=tasks, task_manager=manager, limit=settings.limit,
                             num_fewshot=settings.num_fewshot, apply_chat_template=settings.apply_chat_template,
                             log_samples=True, bootstrap_iters=1000)
    results = {
        "model": settings.model, "source": lm.description, "label": settings.label,
        "source_run": settings.source_run, "tasks": summarize(output),
        "n_samples": {t: len(s) for t, s in output.get("samples", {}).items()},
        "apply_chat_template": settings.apply_chat_template, "limit": settings.limit,
        "load_s": round(loaded - started, 2), "eval_s": round(time.perf_counter() - loaded, 2),
    }
    if run is not None:
        with open(run.path / "samples.jsonl", "w", encoding="utf-8") as handle:
            for task, samples in output.get("samples", {}).items():
                for sample in samples:
                    handle.write(json.dumps({"task": task, "doc_id": sample["doc_id"], "target": sample["target"],
                                             "resps": sample["resps"], "filtered_resps": sample["filtered_resps"]},
                                            default=str, ensure_ascii=False) + "\n")
        atomic_write_json(run.path / RESULTS_FILE, results)
    return results


def run_folder(run: RunDir, resolved=None, queued_after: tuple[RunDir, ...] = ()) -> int:
    """The worker: evaluate the settings in `run`'s config.yaml, keeping its status.
    `queued_after`: the evaluations waiting behind it in this process (a SIGTERM stops them too)."""
    status = run.read_status()
    if status.state == "queued":
        run.write_status(state="starting")
    run.write_status(**({"state": "running"} if status.state in ("queued", "starting") else {}), **process_fields())

    def on_term(signum, frame):
        # end here rather than raise: an exception raised inside an import (MindSpore's C
        # extension loads for seconds) would read as that import's failure
        run.write_status(state="stopped", reason=Message("run.stopped_by_user"))
        for waiting in queued_after:  # the rest of a queue ends with it
            _cancel_queued(waiting)
        print("stopped by the user (SIGTERM)", flush=True)
        os._exit(0)
    signal.signal(signal.SIGTERM, on_term)
    try:
        if run.read_control().stop:
            raise StopRequested()
        settings = read_settings(run)
        results = evaluate(settings, run, resolved=resolved)
    except StopRequested:
        run.write_status(state="stopped", reason=Message("run.stopped_by_user"))
        print("stopped by the user", flush=True)
        return 0
    except (EvalError, ValueError, OSError) as exc:
        run.write_status(state="failed", reason=said_of(exc), failure_kind="config")
        report(exc)
        return 2
    except Exception as exc:
        run.write_status(state="failed", reason=f"{type(exc).__name__}: {exc}")
        raise
    run.write_status(state="finished", reason=None, extra={"scores": results["tasks"]})
    print(json.dumps(results["tasks"], indent=1), flush=True)
    return 0


def _cancel_queued(run: RunDir) -> None:
    try:
        if run.read_status().state == "queued":
            run.write_status(state="stopped", reason=Message("run.stopped_by_user"))
    except (RunDirError, OSError, ValueError):
        pass


def _output_to(run: RunDir) -> None:
    """Send this process's output (stdout and stderr, Python's and native code's) to `run`'s
    train.log from here on: each evaluation of a queue keeps its own log."""
    sys.stdout.flush()
    sys.stderr.flush()
    with open(run.log_path, "ab") as log:
        log.write(log_header(sys.argv).encode())
        log.flush()
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)


def run_queue(runs: list[RunDir]) -> int:
    """Evaluate `runs` one after the other (a queue); returns the first non-zero exit code (else 0).
    A run no longer `queued` when its turn comes (the user stopped it) is skipped; a failure of
    one does not keep the next from running."""
    code = 0
    for index, run in enumerate(runs):
        if index > 0:
            if run.read_status().state != "queued":
                continue
            print(f"next in the queue: {run.run_id}", flush=True)
            _output_to(run)
        try:
            result = run_folder(run, queued_after=tuple(runs[index + 1:]))
        except Exception:  # run_folder wrote `failed` with the reason; the queue goes on
            import traceback
            traceback.print_exc()
            result = 1
        code = code or result
    return code


def _parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m core.evaluate", description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", help="a Hugging Face model folder (a base model or a merged export)")
    source.add_argument("--checkpoint", help="a training checkpoint (runs/<id>/checkpoints/best) or a run folder")
    source.add_argument("--run-dir", action="append",
                        help="an evaluation folder made by the console (its config.yaml); "
                             "repeated: a queue, run one after the other")
    parser.add_argument("--tasks", help="comma-separated lm-eval task names")
    parser.add_argument("--include-path", action="append", default=[],
                        help=f"a folder of task YAMLs (repeatable; default {DEFAULT_TASKS_DIR} when it has the task)")
    parser.add_argument("--limit", type=int, default=None, help="at most N items per task")
    parser.add_argument("--num-fewshot", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--apply-chat-template", action="store_true", help="wrap prompts in the model's chat template")
    parser.add_argument("--runs-dir", default="runs", help="the evaluation folder goes to <runs-dir>/evals/<id>/")
    parser.add_argument("--output", help="also write results.json here")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    go_offline()
    args = _parse_args(argv)
    if args.run_dir:
        return run_queue([RunDir(os.path.abspath(d)) for d in args.run_dir])
    if not args.tasks:
        print("error: --tasks: name at least one lm-eval task", file=sys.stderr)
        return 2
    include = list(args.include_path)
    if not include and DEFAULT_TASKS_DIR.is_dir():
        include = [str(DEFAULT_TASKS_DIR)]
    settings = EvalSettings(model=args.model or args.checkpoint, tasks=[t.strip() for t in args.tasks.split(",") if t.strip()],
                            include_path=include, limit=args.limit, num_fewshot=args.num_fewshot,
                            batch_size=args.batch_size, apply_chat_template=args.apply_chat_template)
    try:
        settings.check()
        resolved = resolve_tasks(settings.tasks, settings.include_path)  # bad tasks refused before a folder is made
        run = create_eval_run(args.runs_dir, settings)
    except EvalError as exc:
        report(exc)
        return 2
    with TeeToLog(run.log_path, ["python", "-m", "core.evaluate", *(argv if argv is not None else sys.argv[1:])]):
        print(f"evaluation folder: {run.path}", flush=True)
        code = run_folder(run, resolved)
    if code == 0 and args.output and (run.path / RESULTS_FILE).is_file():
        Path(args.output).write_text((run.path / RESULTS_FILE).read_text(encoding="utf-8"), encoding="utf-8")
    return code


if __name__ == "__main__":
    sys.exit(main())
