"""tests/device/: the engine on a real GPU or Ascend device (issues 30, 40). Every test here is marked
`device` and skipped, with the reason, when this MindSpore has no GPU or Ascend device to run on;
with MINDTUNE_REQUIRE_DEVICE=1 every such skip (no device, one device where two are needed, a
reference package missing) is a failure instead, so a machine that should have run them cannot pass
by skipping.

    MINDTUNE_DEVICE=gpu MINDTUNE_REQUIRE_DEVICE=1 .venv/bin/python -m pytest -m device tests/device
    # or ascend; without MINDTUNE_DEVICE: whichever is found
"""
from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import skips

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


REQUIRE = "MINDTUNE_REQUIRE_DEVICE"


def required() -> bool:
    return os.environ.get(REQUIRE) == "1"


def skip_or_fail(reason: str) -> None:
    """Skip this test for `reason`, or fail it under MINDTUNE_REQUIRE_DEVICE=1."""
    if required():
        pytest.fail(f"{REQUIRE}=1 but {reason}")
    skips.skip("device", reason)


def _here(item) -> bool:
    return Path(str(item.fspath)).is_relative_to(Path(__file__).parent)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _here(item):
            item.add_marker(pytest.mark.device)


def pytest_runtest_setup(item):
    if _here(item):
        device, _, why = found_device()
        if device is None:
            skip_or_fail(why)


@pytest.fixture(scope="session")
def device() -> str:
    return found_device()[0]


@pytest.fixture(scope="session")
def device_count() -> int:
    return found_device()[1]
