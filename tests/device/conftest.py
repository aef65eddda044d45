"""tests/device/: the engine on a real GPU or Ascend device (issue 30). Every test here is marked
`device` and skipped, with the reason, when this MindSpore has no GPU or Ascend device to run on.

    MINDTUNE_DEVICE=gpu .venv/bin/python -m pytest -m device tests/device   # or ascend; default: whichever is found
"""
from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBE = ("import sys, mindspore as ms\n"
         "from mindspore.device_context import ascend, gpu\n"
         "for name, ctx in (('ascend', ascend), ('gpu', gpu)):\n"
         "    try:\n"
         "        if ctx.is_available() and ctx.device_count() > 0:\n"
         "            print(name, ctx.device_count()); sys.exit(0)\n"
         "    except Exception as exc:\n"
         "        print('no', name, type(exc).__name__, exc, file=sys.stderr)\n"
         "print('none 0')\n")


@functools.cache
def found_device() -> tuple[str | None, int, str]:
    """(device, count, why): asked in a subprocess (a failed device probe can leave MindSpore's
    process state broken), honouring MINDTUNE_DEVICE."""
    wanted = os.environ.get("MINDTUNE_DEVICE")
    nodes = [p for pattern in ("nvidia[0-9]*", "davinci[0-9]*") for p in Path("/dev").glob(pattern)]
    if not nodes and not wanted:  # no device node: skip without importing MindSpore (seconds in CI)
        return None, 0, "no GPU or Ascend device here (/dev/nvidia*, /dev/davinci*)"
    try:
        out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300, cwd=ROOT,
                             env={**os.environ, "GLOG_v": "3"})
    except subprocess.TimeoutExpired:
        return None, 0, "probing MindSpore's devices took over 300 s"
    name, count = (out.stdout.split() + ["none", "0"])[:2]
    if name == "none":
        why = out.stderr.strip().splitlines()[-1:] or ["no device found"]
        return None, 0, f"no GPU or Ascend device available to MindSpore here ({why[0]})"
    if wanted and wanted != name:
        return None, 0, f"MINDTUNE_DEVICE={wanted} but MindSpore found {name}"
    return name, int(count), ""


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).parent
    mine = [item for item in items if Path(str(item.fspath)).is_relative_to(here)]
    if not mine:
        return
    device, _, why = found_device()
    for item in mine:
        item.add_marker(pytest.mark.device)
        if device is None:
            item.add_marker(pytest.mark.skip(reason=why))


@pytest.fixture(scope="session")
def device() -> str:
    return found_device()[0]


@pytest.fixture(scope="session")
def device_count() -> int:
    return found_device()[1]
