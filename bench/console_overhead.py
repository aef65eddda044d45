"""The console's cost to training: tokens/s of the demo LoRA run started and watched in the console
(headless Chromium on the Monitor tab, charts streaming) against the same run started headless
from the shell, in one go. Also the console process's own CPU use while it streams.

Needs Debian's chromium (`sudo bash scripts/install_browser.sh`) and Playwright (dev requirements).

    .venv/bin/python bench/console_overhead.py [--steps 80]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def train_tokens_per_s(run_dir: Path) -> float:
    """Median tokens/s of the logged train steps, the first (compilation) left out."""
    from core.run.records import TrainRecord
    from core.run.rundir import RunDir
    records = RunDir(run_dir).metrics_reader().read_new()
    values = [r.tokens_per_s for r in records if isinstance(r, TrainRecord)][1:]
    return statistics.median(values)


def headless(runs_dir: Path, steps: int, eval_every: int) -> Path:
    from tests.app.test_browser import only_run
    subprocess.run([sys.executable, "-m", "core.train", "--config", "configs/lora_demo.yaml",
                    f"run.runs_dir={runs_dir}", f"train.max_steps={steps}", f"train.eval_every={eval_every}",
                    "train.log_every=2", "eval.downstream=false", "early_stopping.enabled=false"],
                   cwd=ROOT, check=True, capture_output=True)
    return only_run(runs_dir)


def with_console(runs_dir: Path, steps: int, eval_every: int) -> tuple[Path, float, float]:
    import psutil
    from playwright.sync_api import sync_playwright
    from core.run.launcher import free_port
    from tests.app.browser_fixtures import CHROMIUM, CHROMIUM_ARGS
    from tests.app.test_browser import choose, only_run, reveal, run_state, set_number, wait_for

    port = free_port()
    console = subprocess.Popen([sys.executable, "-m", "app", "--port", str(port), "--runs-dir", str(runs_dir)],
                               cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env={**os.environ, "GLOG_v": "3", "GRADIO_ANALYTICS_ENABLED": "False"},
                               start_new_session=True)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1440, "height": 1000})
            url = f"http://127.0.0.1:{port}/"
            wait_for(lambda: _answers(url), "the console to answer", timeout_s=180)
            page.goto(url)
            page.wait_for_selector("#start-button", timeout=120_000)
            choose(page, "model-picker", "tiny-demo")
            choose(page, "dataset-picker", "demo")
            choose(page, "method", "lora")
            set_number(page, "train-length", steps)
            set_number(page, "cfg-train-eval-every", eval_every)
            set_number(page, "cfg-train-log-every", 2)
            for box in ("#cfg-eval-downstream", "#cfg-early-stopping-enabled"):
                reveal(page, box)  # the Train form's sections are folded (issue 20)
                page.locator(f"{box} input[type=checkbox]").set_checked(False)
            time.sleep(2)
            page.click("#start-button")
            wait_for(lambda: run_state(page) == "running", "state running", timeout_s=300)
            process = psutil.Process(console.pid)
            cpu0, browser0, wall0 = sum(process.cpu_times()[:2]), _browser_cpu(), time.monotonic()
            wait_for(lambda: run_state(page) in ("finished", "early_stopped", "stopped", "failed"),
                     "the run to end", timeout_s=1800)
            wall = time.monotonic() - wall0
            cpu_share = (sum(process.cpu_times()[:2]) - cpu0) / wall
            browser_share = (_browser_cpu() - browser0) / wall
            browser.close()
    finally:
        os.killpg(console.pid, 15)
        console.wait(timeout=30)
    return only_run(runs_dir), cpu_share, browser_share


def _browser_cpu() -> float:
    """CPU seconds (user + system) of every Chromium process so far."""
    import psutil
    total = 0.0
    for proc in psutil.process_iter(["name"]):
        try:
            if "chrom" in (proc.info["name"] or ""):
                total += sum(proc.cpu_times()[:2])
        except psutil.Error:
            pass
    return total


def _answers(url: str) -> bool:
    import urllib.request
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument("--eval-every", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "headless").mkdir()
        plain = headless(Path(tmp) / "headless", args.steps, args.eval_every)
        console_runs = Path(tmp) / "console"
        console_runs.mkdir()
        watched, cpu_share, browser_share = with_console(console_runs, args.steps, args.eval_every)
        a, b = train_tokens_per_s(plain), train_tokens_per_s(watched)
        print(f"demo LoRA, {args.steps} steps: headless {a:,.0f} tokens/s; started and watched in the console "
              f"{b:,.0f} tokens/s; ratio {b / a:.3f}")
        print(f"while the run streamed: console process {100 * cpu_share:.1f}% of one core, "
              f"Chromium (all its processes) {100 * browser_share:.1f}% of one core")


if __name__ == "__main__":
    main()
