"""Shared test setup: the repo root on sys.path, MindSpore's PyNative ops launched synchronously, the
markers, every test's time limit, and what becomes of a skip (tests/skips.py: one CI must not have fails)."""
import os
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
    if not config.pluginmanager.hasplugin("timeout"):  # pytest-timeout (requirements-dev.txt) not installed
        config.addinivalue_line("markers", "timeout(seconds): this test's time limit (pytest-timeout)")
    config.addinivalue_line("markers", "device: needs a GPU or Ascend device (tests/device; skipped, with the "
                            "reason, where MindSpore has none)")


from tests import skips  # noqa: E402

# Per-test time limits (pytest-timeout, signal method: the test fails with its name and where it was, the
# session goes on). A backstop for a hang: each is above the waits with deadlines of their own that a test
# of its class makes (those fail first, with the run's reason); a test that needs more says so with
# @pytest.mark.timeout(seconds).
TIMEOUT_S = 300        # an unmarked test: each took under 5 s on 2 cores at load 12-17 (make test-fast)
SLOW_TIMEOUT_S = 1200  # a test marked slow: a few runs, each wait on one bounded at 240-600 s
WHOLE_CONSOLE_TIMEOUT_S = 1800  # a test marked browser or slurm: a console or cluster jobs, phases with deadlines of their own
SKIPPED: set[str] = set()  # "<need> <node id>" of every skip this session (tests/expected_skips.txt)


def time_limit(item) -> int:
    if item.get_closest_marker("browser") or item.get_closest_marker("slurm"):
        return WHOLE_CONSOLE_TIMEOUT_S
    return SLOW_TIMEOUT_S if item.get_closest_marker("slow") else TIMEOUT_S


def pytest_collection_modifyitems(config, items):
    """Each test's time limit; MINDTUNE_DESELECT_EXHAUSTIVE=1 (.ci/run): the `exhaustive` tests deselected,
    said by count."""
    for item in items:
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(time_limit(item)))
    if os.environ.get("MINDTUNE_DESELECT_EXHAUSTIVE") != "1":
        return
    dropped = [item for item in items if item.get_closest_marker("exhaustive")]
    if dropped:
        items[:] = [item for item in items if not item.get_closest_marker("exhaustive")]
        config.hook.pytest_deselected(items=dropped)
        print(f"\nMINDTUNE_DESELECT_EXHAUSTIVE=1: {len(dropped)} exhaustive tests deselected "
              f"({', '.join(sorted({item.module.__name__ for item in dropped}))})")


def _judged(report) -> None:
    skips.judge(report)  # a skip CI must not have, or one outside tests/skips.py, fails
    if report.skipped and not hasattr(report, "wasxfail"):
        SKIPPED.add(skips.skip_line(report))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _judged(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _judged(outcome.get_result())


def pytest_sessionfinish(session, exitstatus):
    """MINDTUNE_EXPECTED_SKIPS=<file> (.ci/run): the session fails when its skips differ from the file's."""
    expected = os.environ.get("MINDTUNE_EXPECTED_SKIPS")
    if not expected:
        return
    session.config._skip_differences = skips.compare(SKIPPED, ROOT / expected)
    if session.config._skip_differences and session.exitstatus == 0:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    differences = getattr(config, "_skip_differences", None)
    if differences is None:
        return
    terminalreporter.section("skips against " + os.environ["MINDTUNE_EXPECTED_SKIPS"])
    for line in sorted(SKIPPED):
        terminalreporter.line(f"skipped: {line}")
    for line in differences or [f"the {len(SKIPPED)} skips are those expected"]:
        terminalreporter.line(line)
