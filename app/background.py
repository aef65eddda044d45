"""Long work inside one Gradio handler, with a progress line while it runs (an export, a dry run)."""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor, TimeoutError as FuturesTimeout
from typing import Any, Callable


def run_with_ticks(work: Callable[[], Any], on_wait: Callable[[float], None] | None, every_s: float = 0.5) -> Any:
    """`work()`'s result; `on_wait(seconds so far)` is called every `every_s` until it is done."""
    if on_wait is None:
        return work()
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(work)
        while True:
            try:
                return future.result(timeout=every_s)
            except FuturesTimeout:
                on_wait(time.monotonic() - start)
