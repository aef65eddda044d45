"""Shared test setup: the repo root on sys.path, MindSpore in PyNative mode, and the `slow` marker."""
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("GLOG_v", "3")  # keep MindSpore's C++ logging to errors

import pytest  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes more than a few seconds (deselect with -m 'not slow')")
