"""app.__main__: the console process caps glibc's malloc arenas (bench/soak.py's memory growth)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import skips

ROOT = Path(__file__).resolve().parents[2]

# 8 threads malloc at once; glibc's malloc_info() lists one <heap> per arena in use
COUNT_ARENAS = r"""
import ctypes, json, sys, tempfile, threading
from app.__main__ import limit_malloc_arenas
limited = limit_malloc_arenas() if sys.argv[1] == "limit" else None
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.fopen.restype = ctypes.c_void_p
start = threading.Barrier(8)
def work():
    start.wait()
    for _ in range(2000):
        libc.free(ctypes.c_void_p(libc.malloc(4096)))
threads = [threading.Thread(target=work) for _ in range(8)]
[t.start() for t in threads]
[t.join() for t in threads]
path = tempfile.mktemp()
handle = libc.fopen(path.encode(), b"w")
libc.malloc_info(0, ctypes.c_void_p(handle))
libc.fclose(ctypes.c_void_p(handle))
print(json.dumps({"limited": limited, "arenas": open(path).read().count("<heap nr=")}))
"""


def arenas(mode: str, **env: str) -> dict:
    environ = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"} | env
    out = subprocess.run([sys.executable, "-c", COUNT_ARENAS, mode], cwd=ROOT, env=environ, capture_output=True,
                         text=True, timeout=120, check=True).stdout
    return json.loads(out.splitlines()[-1])


def glibc() -> bool:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc")
    except (ValueError, OSError, AttributeError):
        return False


@pytest.mark.slow
@skips.unless(sys.platform.startswith("linux") and bool(glibc()), "machine", "glibc's mallopt")
def test_the_console_caps_malloc_arenas_unless_the_environment_says_otherwise():
    unlimited = arenas("no")
    assert unlimited["arenas"] > 2  # 8 threads at once get arenas of their own
    limited = arenas("limit")
    assert limited == {"limited": True, "arenas": 2}
    assert arenas("limit", MALLOC_ARENA_MAX="3") == {"limited": False, "arenas": 3}  # the user's setting wins
