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
