"""Fixtures for driving the console in a real browser: `console_server` (a `python -m app` server on
a free port, with its own runs folder), `page` (a headless Chromium page through Playwright) and
`screenshot` (save one to test-artifacts/). Named `console_server` because tests/app/conftest.py's
`console` is the in-process console object the callback tests use.

Nothing is downloaded here: Chromium is Debian's package (`scripts/install_browser.sh`, run by CI as
root) and Playwright is the pip wheel, which carries its own driver; `playwright install` is never
used. Without either, the tests that need them skip with the reason and the command that fixes it
(or fail, when MINDTUNE_REQUIRE_BROWSER=1: for CI, where a silent skip would hide a broken setup).

Load with `pytest_plugins = ["tests.app.browser_fixtures"]` in a test module (not by importing it,
so pytest can rewrite its asserts). Screenshots go to `test-artifacts/` (git-ignored): on failure
automatically, and on demand through the `screenshot` fixture.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from tests import skips

REPO_ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS_DIR = Path(os.environ.get("MINDTUNE_TEST_ARTIFACTS", REPO_ROOT / "test-artifacts"))
CHROMIUM = os.environ.get("MINDTUNE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
# The folders the console offers (defaults: the shipped demo model and data).
MODELS_DIR = Path(os.environ.get("MINDTUNE_TEST_MODELS_DIR", REPO_ROOT / "models"))
DATA_DIR = Path(os.environ.get("MINDTUNE_TEST_DATA_DIR", REPO_ROOT / "data"))
CONSOLE_START_TIMEOUT_S = float(os.environ.get("MINDTUNE_CONSOLE_START_TIMEOUT_S", 180))
VIEWPORT = {"width": 1440, "height": 1000}


def console_missing_reason() -> str | None:
    """Why the console cannot be started from this checkout, or None when it can."""
    if not (REPO_ROOT / "app" / "server.py").is_file():
        return "console not built (app/server.py is missing)"
    missing = [str(p) for p in (MODELS_DIR / "tiny-demo" / "config.json", DATA_DIR / "demo" / "train.jsonl")
               if not p.is_file()]
    if missing:
        return (f"demo model/data not built ({', '.join(missing)} missing; "
                "run `make demo-model demo-data`)")
    return None


def browser_missing_reason() -> str | None:
    """Why no browser can be driven here, or None when Playwright and Chromium are both present."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -r requirements-dev.txt)"
    if not os.access(CHROMIUM, os.X_OK):
        return f"{CHROMIUM} not found (run scripts/install_browser.sh as root)"
    return None


# ---- the console server ------------------------------------------------------------------------

@dataclass
class ConsoleServer:
    """A running `python -m app`: where to point the browser, and where its runs and log go."""
    url: str
    runs_dir: Path
    log_path: Path
    process: subprocess.Popen

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")[-chars:]
        except OSError:
            return ""


def _free_port() -> int:
    from core.run.launcher import free_port
    return free_port()


def _wait_for_http_ok(console: ConsoleServer, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    last_error = "no answer yet"
    while time.monotonic() < deadline:
        if console.process.poll() is not None:
            pytest.fail(f"console exited with code {console.process.returncode} before serving "
                        f"{console.url}; its output:\n{console.log_tail()}")
        try:
            with urllib.request.urlopen(console.url, timeout=5) as response:
                if response.status == 200:
                    return
                last_error = f"HTTP {response.status}"
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as exc:
            last_error = str(exc)
        time.sleep(0.5)
    pytest.fail(f"console did not answer HTTP 200 at {console.url} within {timeout_s:g} s "
                f"(last: {last_error}); its output:\n{console.log_tail()}")


def _stop_runs(runs_dir: Path) -> list[str]:
    """Stop every run under `runs_dir` that still has processes, and kill orphans; returns what
    was left over (so a test can be told its console leaked a worker)."""
    import core.run.launcher as launcher
    leftovers = []
    if not runs_dir.is_dir():
        return leftovers
    for run_dir in sorted(p for p in runs_dir.iterdir() if (p / "status.json").is_file()):
        try:
            if launcher.run_processes(run_dir):
                leftovers.append(run_dir.name)
                launcher.stop(run_dir, graceful=False, timeout_s=5.0)
        except Exception as exc:  # noqa: BLE001 — teardown must go on to the next run
            leftovers.append(f"{run_dir.name} (stop failed: {exc})")
    for orphan in launcher.find_orphans(runs_dir):
        leftovers.append(f"orphan pid {orphan.pid} of {orphan.run_dir.name}")
        try:
            os.kill(orphan.pid, signal.SIGKILL)
        except OSError:
            pass
    return leftovers


def _stop_process_group(process: subprocess.Popen, timeout_s: float = 10.0) -> None:
    """SIGTERM the console's process group, then SIGKILL whatever is still there."""
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except OSError:
            pass
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)  # stragglers in the group, even after the leader exited
    except OSError:
        pass
    if process.poll() is None:
        process.wait(timeout=5)


@pytest.fixture
def console_extra_dirs() -> dict[str, list[Path]]:
    """More folders for `console_server` to offer besides the demo ones: {"models": [...], "data":
    [...]}. None here; a test module overrides this fixture to add its own (a model folder the
    loader refuses, a malformed data file)."""
    return {}


@pytest.fixture
def console_extra_args(tmp_path: Path) -> list[str]:
    """More command-line options for `console_server` (e.g. --cluster-shared-dir); none here."""
    return []


@pytest.fixture
def console_server(tmp_path: Path, console_extra_dirs: dict[str, list[Path]],
                   console_extra_args: list[str]) -> Iterator[ConsoleServer]:
    """Start the console on a free port with its own runs folder; stop it and every run it
    started afterwards (no worker survives the test)."""
    reason = console_missing_reason()
    if reason:
        skips.skip("browser", reason)
    port = _free_port()
    runs_dir = tmp_path / "runs"
    runs_dir.mkdir()
    log_path = tmp_path / "console.log"
    argv = [sys.executable, "-m", "app", "--port", str(port), "--runs-dir", str(runs_dir),
            "--models-dir", str(MODELS_DIR), "--data-dir", str(DATA_DIR)]
    for flag, key in (("--models-dir", "models"), ("--data-dir", "data")):
        for folder in console_extra_dirs.get(key, []):
            argv += [flag, str(folder)]
    argv += console_extra_args
    env = {**os.environ, "GLOG_v": "3", "GRADIO_ANALYTICS_ENABLED": "False", "PYTHONUNBUFFERED": "1"}
    with open(log_path, "wb") as log:
        process = subprocess.Popen(argv, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    server = ConsoleServer(f"http://127.0.0.1:{port}/", runs_dir, log_path, process)
    try:
        _wait_for_http_ok(server, CONSOLE_START_TIMEOUT_S)
        yield server
    finally:
        leftovers = _stop_runs(runs_dir)
        _stop_process_group(process)
        leftovers += _stop_runs(runs_dir)  # runs the console may have started while shutting down
        if leftovers:
            print(f"console teardown stopped leftover run processes: {', '.join(leftovers)}")


# ---- the browser -------------------------------------------------------------------------------

def save_screenshot(page, name: str) -> Path:
    """Save a full-page screenshot as test-artifacts/<name> (.png added when missing)."""
    ARTIFACTS_DIR.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS_DIR / (name if name.endswith(".png") else f"{name}.png")
    page.screenshot(path=str(path), full_page=True)
    return path


@pytest.fixture
def artifacts_dir() -> Path:
    ARTIFACTS_DIR.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS_DIR


@pytest.fixture
def screenshot(artifacts_dir):
    """`screenshot(page, "train_tab")` saves test-artifacts/train_tab.png and returns its path."""
    return save_screenshot


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Keep each phase's report on the item, so the `page` fixture knows whether the test failed."""
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


@pytest.fixture(scope="session")
def browser():
    """One headless Chromium for the session (Debian's binary, launched by Playwright's driver)."""
    reason = browser_missing_reason()
    if reason and os.environ.get("MINDTUNE_REQUIRE_BROWSER") == "1":
        pytest.fail(f"MINDTUNE_REQUIRE_BROWSER=1 but {reason}")
    if reason:
        skips.skip("browser", reason)
    from playwright.sync_api import sync_playwright
    playwright = sync_playwright().start()
    try:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
    except Exception:
        playwright.stop()
        raise
    try:
        yield chromium
    finally:
        chromium.close()
        playwright.stop()


@pytest.fixture
def page(browser, request):
    """A fresh page (own context, downloads allowed); a screenshot is saved when the test fails."""
    context = browser.new_context(viewport=VIEWPORT, accept_downloads=True)
    # an action waits this long for its element: on a loaded machine (two suites at once, load 15)
    # "New run from this one" answered after 18.6 s and the LoRA rank field took over 30 s to be
    # actionable (then there, with A's value, in the failure's screenshot)
    context.set_default_timeout(60_000)
    page = context.new_page()
    try:
        yield page
    finally:
        report = getattr(request.node, "rep_call", None)
        if report is not None and report.failed:
            try:
                path = save_screenshot(page, f"{request.node.name}-failure")
                print(f"failure screenshot: {path}")
            except Exception as exc:  # noqa: BLE001 — a broken page must not hide the real failure
                print(f"could not save a failure screenshot: {exc}")
        context.close()
