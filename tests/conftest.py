"""Shared test setup: the repo root on sys.path, MindSpore's PyNative ops launched synchronously,
and the `slow` marker."""
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("GLOG_v", "3")  # keep MindSpore's C++ logging to errors
# PyNative ops launch synchronously, as core.engine.generate.use_device sets them on the CPU (the engine's
# own processes call it; tests that build models in-process get the same runtime, ~40% faster)
os.environ.setdefault("MS_DEV_LAUNCH_BLOCKING", "1")
# the fused CPU kernels (core.engine.fused) are built here, not in the user's ~/.cache;
# training subprocesses the tests start inherit the setting
os.environ.setdefault("MINDTUNE_KERNEL_CACHE", str(ROOT / ".mindtune-cache" / "kernels"))

import pytest  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes more than a few seconds (deselect with -m 'not slow')")
    config.addinivalue_line("markers", "slurm: needs the Slurm test cluster (scripts/slurm_cluster.sh; "
                            "tests/slurm_fixtures.py skips without it, or fails when MINDTUNE_REQUIRE_SLURM=1)")
    config.addinivalue_line("markers", "exhaustive: every case of a family-by-family check (the GGUF round trip of "
                            "each family); `make test` runs them, .ci/run deselects them with "
                            "MINDTUNE_DESELECT_EXHAUSTIVE=1 and prints how many")
    config.addinivalue_line("markers", "device: needs a GPU or Ascend device (tests/device; skipped, with the "
                            "reason, where MindSpore has none)")


# Under .ci/run (MINDTUNE_REQUIRE_REFERENCES=1) a test that would skip because a reference package
# (torch, transformers, peft, ...) cannot be imported, or because the fused kernels did not build,
# fails instead: a silent skip there would pass a broken install or a broken kernel build.
REQUIRED_SKIPS = re.compile(r"could not import|fused kernels unavailable")


def _skip_reason(report) -> str:
    longrepr = report.longrepr
    return str(longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else longrepr)


def _fail_a_required_skip(report) -> None:
    if report.skipped and os.environ.get("MINDTUNE_REQUIRE_REFERENCES") == "1":
        reason = _skip_reason(report)
        if REQUIRED_SKIPS.search(reason):
            report.outcome = "failed"
            report.longrepr = f"MINDTUNE_REQUIRE_REFERENCES=1 but this would skip: {reason}"


def pytest_collection_modifyitems(config, items):
    """MINDTUNE_DESELECT_EXHAUSTIVE=1 (.ci/run): the `exhaustive` tests are deselected, said by count."""
    if os.environ.get("MINDTUNE_DESELECT_EXHAUSTIVE") != "1":
        return
    dropped = [item for item in items if item.get_closest_marker("exhaustive")]
    if dropped:
        items[:] = [item for item in items if not item.get_closest_marker("exhaustive")]
        config.hook.pytest_deselected(items=dropped)
        print(f"\nMINDTUNE_DESELECT_EXHAUSTIVE=1: {len(dropped)} exhaustive tests deselected "
              f"({', '.join(sorted({item.module.__name__ for item in dropped}))})")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _fail_a_required_skip(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _fail_a_required_skip(outcome.get_result())
