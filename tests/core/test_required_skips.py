"""tests/skips.py and tests/conftest.py on throwaway test files run by pytest itself: a skip CI must not
have fails under its MINDTUNE_REQUIRE_* flag, a skip outside the helper fails everywhere, the session
fails when its skips differ from the expected list, and every test has a time limit that fails it by name."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PROBE = '''
from tests import skips
missing = skips.module("mindtune_no_such_package")

def test_never_runs():
    pass
'''

NEEDS_PROBE = '''
from tests import skips

@skips.unless(False, "kernels", "fused kernels unavailable here")
def test_needs_kernel():
    pass

@skips.unless(False, "device", "no GPU here")
def test_needs_device():
    pass

def test_runs():
    skips.skip("root", "cannot mount a tmpfs here")
'''

BARE_PROBE = '''
import pytest

def test_bare_skip():
    pytest.skip("some reason")

def test_bare_importorskip():
    pytest.importorskip("mindtune_no_such_package")
'''

TIMEOUT_PROBE = '''
import time
import pytest
from tests.conftest import SLOW_TIMEOUT_S, TIMEOUT_S

def test_default_limit(request):
    assert request.node.get_closest_marker("timeout").args == (TIMEOUT_S,) and 60 <= TIMEOUT_S < SLOW_TIMEOUT_S

@pytest.mark.slow
def test_slow_limit(request):
    assert request.node.get_closest_marker("timeout").args == (SLOW_TIMEOUT_S,)

@pytest.mark.timeout(1)
def test_sleeps_past_its_limit():
    time.sleep(30)
'''

FLAGS = ("MINDTUNE_REQUIRE_", "MINDTUNE_EXPECTED_SKIPS")


def run_probe(tmp_path: Path, source: str, **env_set: str) -> subprocess.CompletedProcess:
    folder = tmp_path / "tests"
    folder.mkdir(exist_ok=True)
    (folder / "__init__.py").write_text("")
    for name in ("conftest.py", "skips.py"):
        (folder / name).write_text((ROOT / "tests" / name).read_text())
    (folder / "test_probe.py").write_text(source)
    env = {k: v for k, v in os.environ.items() if not k.startswith(FLAGS)} | {"COLUMNS": "200"} | env_set
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rfs", "-p", "no:cacheprovider", "tests"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_a_missing_reference_package_skips_by_default_and_fails_when_required(tmp_path):
    skipped = run_probe(tmp_path, PROBE)
    assert skipped.returncode in (0, 5) and "1 skipped" in skipped.stdout, skipped.stdout  # 5: nothing ran
    assert "needs reference: could not import 'mindtune_no_such_package'" in skipped.stdout
    failed = run_probe(tmp_path, PROBE, MINDTUNE_REQUIRE_REFERENCES="1")
    assert failed.returncode in (1, 2), failed.stdout  # 2: a collection error stops the session
    assert "MINDTUNE_REQUIRE_REFERENCES=1 but this would skip: needs reference" in failed.stdout
    assert "mindtune_no_such_package" in failed.stdout


@pytest.mark.slow
def test_each_need_fails_under_its_own_flag_and_skips_under_the_others(tmp_path):
    result = run_probe(tmp_path, NEEDS_PROBE, MINDTUNE_REQUIRE_REFERENCES="1", MINDTUNE_REQUIRE_ROOT="1")
    assert result.returncode == 1 and "1 failed, 1 skipped, 1 error" in result.stdout, result.stdout
    assert "MINDTUNE_REQUIRE_REFERENCES=1 but this would skip: needs kernels" in result.stdout  # at setup
    assert "MINDTUNE_REQUIRE_ROOT=1 but this would skip: needs root: cannot mount a tmpfs here" in result.stdout
    assert "needs device: no GPU here" in result.stdout
    assert run_probe(tmp_path, NEEDS_PROBE).stdout.count("SKIPPED") == 3


@pytest.mark.slow
def test_a_skip_outside_the_helper_fails_everywhere(tmp_path):
    result = run_probe(tmp_path, BARE_PROBE)
    assert result.returncode == 1 and "2 failed" in result.stdout, result.stdout
    for name in ("test_bare_skip", "test_bare_importorskip"):
        assert f"FAILED tests/test_probe.py::{name} - a skip that did not go through tests/skips.py" in result.stdout
    assert "could not import 'mindtune_no_such_package'" in result.stdout


@pytest.mark.slow
def test_the_session_fails_on_a_skip_not_expected_and_on_an_expected_one_that_ran(tmp_path):
    expected = tmp_path / "expected.txt"
    expected.write_text("# comment\nkernels tests/test_probe.py::test_needs_kernel\n"
                        "device  tests/test_probe.py::test_needs_device  # no GPU\nroot tests/test_probe.py::test_runs\n")
    agreed = run_probe(tmp_path, NEEDS_PROBE, MINDTUNE_EXPECTED_SKIPS=str(expected))
    assert agreed.returncode == 0 and "the 3 skips are those expected" in agreed.stdout, agreed.stdout
    assert "skipped: device tests/test_probe.py::test_needs_device" in agreed.stdout
    expected.write_text("kernels tests/test_probe.py::test_needs_kernel\nslurm tests/test_probe.py::test_gone\n")
    differs = run_probe(tmp_path, NEEDS_PROBE, MINDTUNE_EXPECTED_SKIPS=str(expected))
    assert differs.returncode == 1, differs.stdout
    assert "skipped but not in expected.txt: device tests/test_probe.py::test_needs_device" in differs.stdout
    assert "skipped but not in expected.txt: root tests/test_probe.py::test_runs" in differs.stdout
    assert "in expected.txt but did not skip: slurm tests/test_probe.py::test_gone" in differs.stdout


@pytest.mark.slow
def test_every_test_has_a_time_limit_and_one_past_it_fails_by_name(tmp_path):
    result = run_probe(tmp_path, TIMEOUT_PROBE)
    assert result.returncode == 1 and "1 failed, 2 passed" in result.stdout, result.stdout
    assert "FAILED tests/test_probe.py::test_sleeps_past_its_limit - Failed: Timeout (>1.0s)" in result.stdout


def test_no_skip_in_the_suite_bypasses_the_helper():
    """The conftest rule catches a bare skip only where it happens; this finds the ones that never happen here."""
    import re
    bare = re.compile(r"pytest\.(skip|importorskip|xfail)\(|pytest\.mark\.(skip|skipif|xfail)\b")
    found = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
             for path in sorted((ROOT / "tests").rglob("*.py")) if path.name not in ("skips.py", "test_required_skips.py")
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if bare.search(line)]
    assert found == [], "skips outside tests/skips.py:\n" + "\n".join(found)
