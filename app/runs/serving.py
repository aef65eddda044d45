"""The console's Serve action: a finished run's best checkpoint as an OpenAI-compatible endpoint
(`python -m core.serve`, a process of its own: the console never imports MindSpore).

One endpoint per run, on 127.0.0.1 and a free port, whatever the console's own address: it has no
login of its own, so only programs on this machine reach it. Its output goes to the run folder's
`serve.log`; it is ready when it prints its address. Stop serving ends its process group; the
console ends every endpoint it started when it exits.
"""
from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from core.run.launcher import REPO_ROOT, free_port
from core.run.rundir import RunDir
from core.spec.errors import RECORDS_ENV, SERVING_MARK, error_on

LOG_NAME = "serve.log"
START_TIMEOUT_S = 180


def serve_argv(run_path: Path, port: int, python: str = sys.executable) -> list[str]:
    checkpoint = RunDir(run_path).checkpoint("best")
    return [python, "-m", "core.serve", "--checkpoint", str(checkpoint), "--host", "127.0.0.1", "--port", str(port)]


@dataclass
class Endpoint:
    """One run's endpoint process and where it listens."""
    process: subprocess.Popen
    port: int
    log: Path

    def state(self) -> tuple[str, str]:
        """("serving", url and model name) | ("starting", "") | ("ended", why: its error's message by the
        record core.serve printed, else its last error line as it is)."""
        try:
            printed = self.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            printed = ""
        lines = printed.splitlines()
        if self.process.poll() is not None:
            return "ended", error_on(printed) or "exited"
        found = next((_serving(line) for line in lines if line.startswith(SERVING_MARK)), None)
        return ("serving", f"{found['url']} (model '{found['name']}')") if found else ("starting", "")


def _serving(line: str) -> dict | None:
    """core.serve's address record ({"name", "url"}), None when the line holds none."""
    try:
        found = json.loads(line[len(SERVING_MARK):])
    except ValueError:
        return None
    return found if isinstance(found, dict) and {"name", "url"} <= set(found) else None


class Endpoints:
    """The endpoints this console started, by run folder."""

    def __init__(self, popen=subprocess.Popen):
        self._popen = popen
        self._guard = threading.Lock()
        self.running: dict[str, Endpoint] = {}
        atexit.register(self.stop_all)

    def start(self, run_path: Path) -> Endpoint:
        """The run's endpoint, started unless it runs (an ended one is started again)."""
        key = str(Path(run_path).resolve())
        with self._guard:
            current = self.running.get(key)
            if current is not None and current.process.poll() is None:
                return current
            port = free_port()
            log = Path(run_path) / LOG_NAME
            with open(log, "w", encoding="utf-8") as handle:
                process = self._popen(serve_argv(Path(run_path), port), cwd=REPO_ROOT, stdout=handle,
                                      stderr=subprocess.STDOUT, start_new_session=True,
                                      env={**os.environ, "GLOG_v": "3", RECORDS_ENV: "1"})
            self.running[key] = Endpoint(process, port, log)
            return self.running[key]

    def wait_ready(self, endpoint: Endpoint, timeout_s: float = START_TIMEOUT_S, on_wait=None) -> tuple[str, str]:
        start = time.monotonic()
        while True:
            state = endpoint.state()
            if state[0] != "starting" or time.monotonic() - start > timeout_s:
                return state
            if on_wait is not None:
                on_wait(time.monotonic() - start)
            time.sleep(0.5)

    def get(self, run_path: Path) -> Endpoint | None:
        return self.running.get(str(Path(run_path).resolve()))

    def stop(self, run_path: Path) -> bool:
        endpoint = self.running.pop(str(Path(run_path).resolve()), None)
        if endpoint is None:
            return False
        _end(endpoint.process)
        return True

    def stop_all(self) -> None:
        for key in list(self.running):
            _end(self.running.pop(key).process)


def _end(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=10)
    except (ProcessLookupError, PermissionError):
        return
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
