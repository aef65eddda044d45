"""Downloads of a run's checkpoint, made by `python -m core.export` in a subprocess.

Exporting needs MindSpore, which the console never imports, so it runs as its own process with an
argv list. `core.engine.export` writes the zip (`RunDir.export_zip`) atomically, so a zip that
exists is complete and is served as is; the same checkpoint is never exported twice.

The GGUF downloads (llama.cpp, Ollama: core.engine.gguf_run) are files whose check passed: a GGUF is
offered only beside a `<file>.check.json` that says llama.cpp reloaded it and answered as trained
(core.run.gguf_files.is_good); `check_summary` is what the button says of it.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from core.spec.config import ConfigError, load_config
from core.run.launcher import REPO_ROOT
from core.run import gguf_files
from core.run.records import RunDirError
from core.run.rundir import POINTERS, RunDir, resolve_inside
from app.i18n import Said
from core.spec.errors import RECORDS_ENV, error_on, said_of

ZIP_FORMATS = ("peft", "merged", "mindspore")
# the console's GGUF downloads -> core.export's (--format, --quant)
GGUF_FORMATS = {"gguf-f16": ("gguf", "f16"), "gguf-q4_k_m": ("gguf", "q4_k_m"), "ollama": ("ollama", "q4_k_m"),
                "gguf-lora": ("gguf-lora", "f16")}
FORMATS = ZIP_FORMATS + tuple(GGUF_FORMATS)
EXPORT_TIMEOUT_S = 900
_locks: dict[tuple[str, str], threading.Lock] = {}
_locks_guard = threading.Lock()


class ExportFailed(RuntimeError):
    """No download: core.export refused or crashed (its error's Message, by the record it printed,
    core.spec.errors.report, else its last error line as it is), or the console's own reason (a Said)."""

    @property
    def said(self) -> list[str]:
        return [self.args[0]] if len(self.args) == 1 and isinstance(self.args[0], str) else [str(self)]


@dataclass(frozen=True)
class ExportTarget:
    """Which checkpoint a download would contain, and where its file (a zip, a GGUF) is or will be."""
    which: str      # "best" or "last"
    step: int
    zip_path: Path  # the file the button serves
    checked: Path | None = None  # a GGUF whose check must have passed (the Ollama zip's, the file's own)

    @property
    def ready(self) -> bool:
        return self.zip_path.is_file() and (self.checked is None or gguf_files.is_good(self.checked))


def _paths(run: RunDir, which: str, step: int, fmt: str) -> tuple[Path, Path | None]:
    if fmt not in GGUF_FORMATS:
        return run.export_zip(which, step, fmt), None
    kind, quant = GGUF_FORMATS[fmt]
    if kind == "gguf":
        path = gguf_files.gguf_path(run, which, step, quant)
        return path, path
    if kind == "gguf-lora":
        path = gguf_files.lora_path(run, which, step)
        return path, path
    return gguf_files.ollama_zip_path(run, which, step, quant), gguf_files.gguf_path(run, which, step, quant)


def export_target(run_path: Path, fmt: str) -> ExportTarget | None:
    """The best checkpoint's export (the last one's if there is no best yet), or None."""
    run = RunDir(run_path)
    for which in POINTERS:
        step = run.checkpoint_step(which)
        if step is not None:
            return ExportTarget(which, step, *_paths(run, which, step, fmt))
    return None


def export_argv(run_path: Path, which: str, fmt: str, python: str = sys.executable) -> list[str]:
    head = [python, "-m", "core.export", "--run", str(run_path), "--which", which]
    if fmt in GGUF_FORMATS:
        kind, quant = GGUF_FORMATS[fmt]
        return head + ["--format", kind, "--quant", quant]
    return head + ["--format", fmt, "--zip"]


def check_summary(target: ExportTarget) -> dict | None:
    """The check of the GGUF a download holds (core.engine.gguf_check's JSON), or None."""
    return gguf_files.read_check(target.checked) if target.checked is not None else None


def _lock_for(run_path: Path, fmt: str) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault((str(run_path), fmt), threading.Lock())


def run_export(run_path: Path, fmt: str, runs_root: Path, runner=subprocess.run) -> Path:
    """The zip for `fmt`, exporting it first if needed; the result must lie inside `runs_root`.
    Concurrent requests for the same zip wait for one export instead of starting another."""
    if fmt not in FORMATS:
        raise ExportFailed(Said("act.export_unknown_format", format=repr(fmt), formats=", ".join(FORMATS)))
    target = export_target(run_path, fmt)
    if target is None:
        raise ExportFailed(Said("act.export_no_checkpoint"))
    with _lock_for(run_path, fmt):
        if not target.ready:
            result = runner(export_argv(run_path, target.which, fmt), cwd=REPO_ROOT, capture_output=True,
                            text=True, timeout=EXPORT_TIMEOUT_S, env={**os.environ, "GLOG_v": "3", RECORDS_ENV: "1"})
            if result.returncode != 0:
                raise ExportFailed(error_on(result.stderr, marks=("Error",))
                                   or Said("act.export_exited", code=result.returncode))
            printed = Path(result.stdout.strip().splitlines()[-1]) if result.stdout.strip() else target.zip_path
            if printed.is_file():
                target = ExportTarget(target.which, target.step, printed, target.checked)
    try:
        return resolve_inside(runs_root, target.zip_path)
    except RunDirError as err:
        raise ExportFailed(said_of(err)) from None


def prepare_adapter(exports: "BackgroundExports", run_path: Path, runs_root: Path) -> None:
    """When a LoRA run is over, prepare its adapter zip so Download works in one click. Called
    by the job manager when a run it watches ends, never from a page's poll: a read must not
    start work."""
    try:
        method = load_config(RunDir(run_path).config_path).method
    except (ConfigError, OSError):
        return
    if method == "lora":
        exports.ensure(Path(run_path), "peft", runs_root)


class BackgroundExports:
    """Exports started without a click (the adapter of a run that just ended), one thread each,
    so the Download button is ready by the time a user reaches for it. Failures are remembered
    (and shown) instead of retried on every tick."""

    def __init__(self, runner=subprocess.run):
        self._runner = runner
        self._guard = threading.Lock()
        self._threads: dict[tuple[str, str], threading.Thread] = {}
        self.failures: dict[tuple[str, str], str] = {}

    def ensure(self, run_path: Path, fmt: str, runs_root: Path) -> None:
        """Start exporting `fmt` of the run unless it is ready, running, or failed before."""
        target = export_target(run_path, fmt)
        key = (str(target.zip_path) if target else str(run_path), fmt)
        if target is None or target.ready:
            return
        with self._guard:
            if key in self._threads or key in self.failures:
                return
            worker = threading.Thread(target=self._export, args=(key, run_path, fmt, runs_root), daemon=True,
                                      name=f"export-{Path(run_path).name}-{fmt}")
            self._threads[key] = worker
        worker.start()

    def _export(self, key: tuple[str, str], run_path: Path, fmt: str, runs_root: Path) -> None:
        try:
            run_export(run_path, fmt, runs_root, runner=self._runner)
        except (ExportFailed, OSError, subprocess.SubprocessError) as err:
            self.failures[key] = said_of(err)
        finally:
            with self._guard:
                self._threads.pop(key, None)

    def busy(self, run_path: Path, fmt: str) -> bool:
        target = export_target(run_path, fmt)
        return target is not None and (str(target.zip_path), fmt) in self._threads

    def failure(self, run_path: Path, fmt: str) -> str | None:
        target = export_target(run_path, fmt)
        return self.failures.get((str(target.zip_path), fmt)) if target else None

    def join(self, timeout_s: float = 60.0) -> None:
        for worker in list(self._threads.values()):
            worker.join(timeout_s)
