"""Polling for tests that watch a real process: wait until a condition holds, or fail saying what
never happened."""
from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")


def wait_for(condition: Callable[[], T], what: str, timeout_s: float, every_s: float = 0.1) -> T:
    """The first truthy value of `condition()`, polled every `every_s` seconds for `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(every_s)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


def wait_for_run(run, condition: Callable[[], T], what: str, timeout_s: float, every_s: float = 0.2,
                 status=None) -> T:
    """The first truthy value of `condition()` while `run` (a RunDir) goes on. A run that reaches an end
    state without it fails the wait at once with the run's own state and reason; so does the deadline,
    saying where the run was. `status()` reads the run's status (default: its status.json; the Slurm
    tests pass the backend's refresh)."""
    from core.run.records import TERMINAL_STATES
    read = status or run.read_status
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        now = read()
        if now.state in TERMINAL_STATES:
            value = condition()  # what the run wrote before it ended
            if value:
                return value
            raise AssertionError(f"{run.path.name} ended {now.state} before {what}: {now.reason}\n{_log_tail(run)}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}: {run.path.name} is "
                                 f"{now.state} ({now.reason or 'no reason yet'})\n{_log_tail(run)}")
        time.sleep(every_s)


def _log_tail(run, chars: int = 3000) -> str:
    try:
        return run.log_path.read_text(encoding="utf-8", errors="replace")[-chars:]
    except OSError:
        return "(no train.log)"
