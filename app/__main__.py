"""`python -m app`: the console's front door (see app/settings.py for the options)."""
from __future__ import annotations

import ctypes
import os
import sys

from app.settings import SettingsError, parse_settings

M_ARENA_MAX = -8      # glibc's mallopt() parameter (malloc.h)
MALLOC_ARENAS = 2


def limit_malloc_arenas(arenas: int = MALLOC_ARENAS) -> bool:
    """Cap glibc's malloc arenas of this process, as MALLOC_ARENA_MAX would; True if done.

    Gradio answers each feed poll in a pool of worker threads, and glibc gives threads up to 8
    arenas per core. The short-lived buffers of changing sizes the polls make (chart data, SVG,
    JSON) then left free-but-kept memory in each arena: with 10 Monitor pages on a run, the console's
    heap grew ~0.6 MB a minute with its live data flat (bench/soak.py, malloc statistics); with 2
    arenas the heap stopped growing after a few minutes, and the feed's latency did not change
    (docs/performance.md). A MALLOC_ARENA_MAX in the environment wins; not glibc: nothing done."""
    if "MALLOC_ARENA_MAX" in os.environ or not sys.platform.startswith("linux"):
        return False
    try:
        return bool(ctypes.CDLL("libc.so.6").mallopt(M_ARENA_MAX, arenas))
    except (OSError, AttributeError):  # another C library
        return False


def main(argv: list[str] | None = None) -> int:
    limit_malloc_arenas()  # before any thread starts
    try:
        settings = parse_settings(argv)
    except SettingsError as err:
        print(f"mindtune: {err}", file=sys.stderr)
        return 2
    from app.server import serve  # imported after the checks: Gradio takes a few seconds to import

    serve(settings)
    return 0


if __name__ == "__main__":
    sys.exit(main())
