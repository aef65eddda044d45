"""Every skip in the suite goes through here, so that a skip CI must not have fails instead.

A skip says what it needs (`skip("kernels", why)`, `module("torch")`, `unless(ok, "root", why)`); its
reason reads "needs <what>: <why>". Each need has a flag; where the flag is 1 (.ci/run sets all but
MINDTUNE_REQUIRE_DEVICE) tests/conftest.py turns that skip into a failure, and any skip that did not come
through here (a bare pytest.skip or importorskip) fails everywhere. Under MINDTUNE_EXPECTED_SKIPS=<file>
(.ci/run: tests/expected_skips.txt) the session fails when its skips differ from the file's lines.
"""
from __future__ import annotations

import importlib
import os
import re
from pathlib import Path
from types import ModuleType

import pytest

NEEDS = {  # what a skip can need, and the flag under which that skip fails instead
    "reference": "MINDTUNE_REQUIRE_REFERENCES",  # a package of requirements-dev.txt (torch, peft, lm_eval...)
    "kernels": "MINDTUNE_REQUIRE_REFERENCES",    # the fused CPU kernels built (g++: scripts/install_compiler.sh)
    "browser": "MINDTUNE_REQUIRE_BROWSER",       # Playwright and Debian's chromium (scripts/install_browser.sh)
    "slurm": "MINDTUNE_REQUIRE_SLURM",           # the Slurm test cluster and its client commands
    "root": "MINDTUNE_REQUIRE_ROOT",             # root: a memory cgroup, a tmpfs mount
    "machine": "MINDTUNE_REQUIRE_MACHINE",       # 2 CPU cores, glibc, fontconfig: what CI's machine has
    "device": "MINDTUNE_REQUIRE_DEVICE",         # a GPU or Ascend device (tests/device)
}
REASON = re.compile(r"^needs (\w+): ")


def reason(need: str, why: str) -> str:
    if need not in NEEDS:
        raise ValueError(f"unknown need {need!r}: one of {', '.join(NEEDS)}")
    return f"needs {need}: {why}"


def skip(need: str, why: str) -> None:
    """Skip the test (or the module, at import) because `need` is missing here: `why` says what is."""
    pytest.skip(reason(need, why), allow_module_level=True)


def unless(ok: bool, need: str, why: str) -> pytest.MarkDecorator:
    """A skipif mark: skip unless `ok`, as `skip` would."""
    return pytest.mark.skipif(not ok, reason=reason(need, why))


def module(name: str, need: str = "reference") -> ModuleType:
    """`name` imported, or the test (module) skipped as needing it (pytest.importorskip, through here).
    Never for our own modules: a broken one of those must fail."""
    if name.split(".")[0] in {"core", "app", "bench", "tests", "rewards"}:
        raise ValueError(f"{name} is ours: import it (a broken module of ours must fail, not skip)")
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        skip(need, f"could not import {name!r}: {exc}")


# ---- what conftest.py does with a skip report ------------------------------------------------------------

def report_reason(report) -> str:
    longrepr = report.longrepr
    text = str(longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else longrepr)
    return text.removeprefix("Skipped: ")


def refusal(text: str, env=os.environ) -> str | None:
    """Why a skip with reason `text` must fail here, or None when it may skip."""
    found = REASON.match(text)
    if found is None or found.group(1) not in NEEDS:
        return (f"a skip that did not go through tests/skips.py (it cannot tell whether CI may skip it): {text}")
    flag = NEEDS[found.group(1)]
    if env.get(flag) == "1":
        return f"{flag}=1 but this would skip: {text}"
    return None


def judge(report) -> None:
    """Turn a skip report that must not skip into a failure saying why (not an xfail)."""
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    why = refusal(report_reason(report))
    if why is not None:
        report.outcome = "failed"
        report.longrepr = why


def skip_line(report) -> str:
    """The line tests/expected_skips.txt holds for a skip: "<need> <node id>"."""
    found = REASON.match(report_reason(report))
    return f"{found.group(1) if found else '?'} {report.nodeid}"


def expected_lines(path: Path) -> set[str]:
    lines = (line.split("#", 1)[0].strip() for line in path.read_text(encoding="utf-8").splitlines())
    return {" ".join(line.split()) for line in lines if line}


def compare(skipped: set[str], path: Path) -> list[str]:
    """What differs between this session's skips and the expected list (empty when they agree)."""
    expected = expected_lines(path)
    out = [f"skipped but not in {path.name}: {line}" for line in sorted(skipped - expected)]
    out += [f"in {path.name} but did not skip: {line}" for line in sorted(expected - skipped)]
    return out
