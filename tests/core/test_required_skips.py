"""The conftest rule that turns a missing reference package or kernel build into a failure under
.ci/run (MINDTUNE_REQUIRE_REFERENCES=1), checked on a throwaway test file run by pytest itself."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = '''
import pytest
missing = pytest.importorskip("mindtune_no_such_package")

def test_never_runs():
    pass
'''

KERNEL_PROBE = '''
import pytest

@pytest.mark.skipif(True, reason="fused kernels unavailable here")
def test_needs_kernel():
    pass

@pytest.mark.skipif(True, reason="some other reason")
def test_other_skip():
    pass
'''


def run_probe(tmp_path: Path, source: str, required: bool) -> subprocess.CompletedProcess:
    folder = tmp_path / "tests"
    folder.mkdir(exist_ok=True)
    (folder / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text())
    (folder / "test_probe.py").write_text(source)
    env = {k: v for k, v in os.environ.items() if k != "MINDTUNE_REQUIRE_REFERENCES"}
    if required:
        env["MINDTUNE_REQUIRE_REFERENCES"] = "1"
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(folder)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_a_missing_reference_package_skips_by_default_and_fails_when_required(tmp_path):
    skipped = run_probe(tmp_path, PROBE, required=False)
    assert skipped.returncode in (0, 5) and "1 skipped" in skipped.stdout, skipped.stdout  # 5: nothing ran
    failed = run_probe(tmp_path, PROBE, required=True)
    assert failed.returncode in (1, 2), failed.stdout  # 2: a collection error stops the session
    assert "MINDTUNE_REQUIRE_REFERENCES=1 but this would skip" in failed.stdout
    assert "mindtune_no_such_package" in failed.stdout


def test_a_missing_kernel_build_fails_when_required_and_other_skips_stay_skips(tmp_path):
    result = run_probe(tmp_path, KERNEL_PROBE, required=True)
    assert result.returncode == 1 and "1 skipped, 1 error" in result.stdout, result.stdout  # fails at setup
