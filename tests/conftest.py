"""Shared test setup: the repo root on sys.path, MindSpore's PyNative ops launched synchronously,
and the `slow` marker."""
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("GLOG_v", "3")  # keep MindSpore's C++ logging to errors
# PyNative ops launch synchronously, as core.generate.use_device sets them on the CPU (the engine's
# own processes call it; tests that build models in-process get the same runtime, ~40% faster)
os.environ.setdefault("MS_DEV_LAUNCH_BLOCKING", "1")
# the fused CPU kernels (core.fused) are built here, not in the user's ~/.cache;
# training subprocesses the tests start inherit the setting
os.environ.setdefault("MINDTUNE_KERNEL_CACHE", str(ROOT / ".mindtune-cache" / "kernels"))

import pytest  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes more than a few seconds (deselect with -m 'not slow')")
    config.addinivalue_line("markers", "device: needs a GPU or Ascend device (tests/device; skipped, with the "
                            "reason, where MindSpore has none)")
