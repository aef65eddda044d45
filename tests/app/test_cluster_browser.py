"""Issue 25 in a real browser against the real two-node Slurm cluster (scripts/slurm_cluster.sh):
the Train tab's "Where to run" offers partition debug, its Slurm fields fold out, the preview is the
sbatch script; a double-clicked Start with `--hold` submits one job, which the Monitor shows pending
with Slurm's reason (JobHeldUser) and the Runs tab lists in Slurm's queue; Cancel there is scancel,
and the Monitor says cancelled, not crashed. The time limit field writes the YAML; then one 2-node ×
1-worker run is submitted from the form and watched to the end (job id, nodes node1 and node2,
Slurm's state, the loss chart).

The page only: a job at its time limit and a rank killed on node2 are real cluster runs in
tests/core/test_slurm.py, and the console's words for them (Slurm's TIMEOUT, the dead rank named
with its node) are in tests/app/test_cluster_console.py.

Screenshots in test-artifacts/: slurm-train-tab, slurm-pending-reason, slurm-cancelled,
slurm-running, slurm-finished. Skips without the cluster, the console, Playwright or Chromium;
fails instead under MINDTUNE_REQUIRE_SLURM=1 (and MINDTUNE_REQUIRE_BROWSER=1).
"""
from __future__ import annotations

from pathlib import Path

import pytest

import core.run.launcher as launcher
from core.run.records import ClusterJob
from core.run.rundir import RunDir
from core.run.runs import list_runs

from tests.slurm_fixtures import require_slurm
from tests.app.test_browser import plot_points, run_state, set_number, wait_for
from tests.app.test_browser_workflows import fill_form, picker_value

pytest_plugins = ["tests.app.browser_fixtures"]
pytestmark = [pytest.mark.slow, pytest.mark.browser, pytest.mark.slurm]

STEPS = 6  # logged every 2 steps, evaluated at the end (fill_form's settings)
RUN_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def slurm_cluster() -> None:
    require_slurm()  # partition debug of two nodes; else skip (fail under MINDTUNE_REQUIRE_SLURM=1)


@pytest.fixture
def console_extra_args(tmp_path: Path, slurm_cluster) -> list[str]:
    return ["--cluster-shared-dir", str(tmp_path)]  # the runs folder (tmp_path/runs) is under it


@pytest.fixture
def cancel_jobs_after(console_server):
    """No Slurm job of the test outlives it (the console fixture stops only local processes)."""
    yield
    from core.run.slurm import SlurmBackend
    backend = SlurmBackend()
    for run in backend.active(console_server.runs_dir):
        backend.stop(run, graceful=False)


def fill_slurm_form(page, sbatch_options: str) -> None:
    """The demo LoRA run of the workflow test, on partition debug: 2 nodes × 1 worker."""
    fill_form(page, steps=STEPS)
    page.locator("#where-to-run label", has_text="Slurm partition debug (2 nodes)").click()
    page.locator("#sec-slurm").wait_for(state="visible", timeout=30_000)
    page.locator("#sec-slurm .label-wrap").first.click()  # the folded Slurm job settings
    page.locator("#cfg-launch-nodes").wait_for(state="visible", timeout=30_000)
    set_number(page, "cfg-launch-nodes", 2)
    set_number(page, "cfg-launch-workers-per-node", 1)
    set_options(page, sbatch_options)
    wait_for(lambda: all(s in page.inner_text("#config-yaml") for s in (
        "backend: slurm", "partition: debug", "nodes: 2", "data_parallel: 2")),
        "the YAML preview to follow the Slurm fields", timeout_s=60)


def set_options(page, text: str) -> None:
    box = page.locator("#cfg-launch-sbatch-options textarea, #cfg-launch-sbatch-options input").first
    box.fill(text)
    box.press("Tab")


def monitor_text(page, selector: str) -> str:
    element = page.query_selector(selector)
    return element.inner_text().strip() if element else ""


def test_a_two_node_run_from_the_train_tab_on_the_slurm_cluster(console_server, cancel_jobs_after, page, screenshot):
    runs_dir = console_server.runs_dir
    page.goto(console_server.url)
    page.wait_for_selector("#start-button", timeout=180_000)
    fill_slurm_form(page, "--hold")
    wait_for(lambda: "#SBATCH --nodes=2" in page.inner_text("#command-preview")
             and "-m core.slurm_node" in page.inner_text("#command-preview"),
             "the preview to show the sbatch script", timeout_s=60)
    screenshot(page, "slurm-train-tab")

    # ---- held: pending with Slurm's reason; a double-click is one job; cancel is scancel
    page.dblclick("#start-button")
    wait_for(lambda: page.is_visible("#tab-monitor") and monitor_text(page, "#cluster-job-id") not in ("", "-"),
             "the Monitor to show the Slurm job", timeout_s=90)
    wait_for(lambda: "JobHeldUser" in monitor_text(page, "#cluster-reason"), "Slurm's pending reason", timeout_s=60)
    assert run_state(page).startswith("queued") and "PENDING" in monitor_text(page, "#cluster-state")
    screenshot(page, "slurm-pending-reason")
    held = [s for s in list_runs(runs_dir)]
    assert len(held) == 1, f"two clicks made {[s.run_id for s in held]}"
    held_run = RunDir(held[0].path)
    job_id = held_run.read_status().cluster.job_id
    assert monitor_text(page, "#cluster-job-id") == job_id and held_run.sbatch_script.is_file()

    page.click("#tab-runs-button")
    wait_for(lambda: held_run.run_id in monitor_text(page, "#slurm-queue"), "the Slurm queue in the Runs tab", timeout_s=30)
    page.locator("#runs-select label", has_text=held_run.run_id).locator("input").set_checked(True)
    page.click("#queue-cancel")
    wait_for(lambda: "scancel" in monitor_text(page, "#runs-message"), "the cancel message", timeout_s=60)
    page.click("#tab-monitor-button")
    wait_for(lambda: run_state(page).startswith("cancelled"), "the Monitor to say cancelled", timeout_s=60)
    assert "CANCELLED" in monitor_text(page, "#cluster-state") and not monitor_text(page, "#run-failure")
    screenshot(page, "slurm-cancelled")

    # ---- a 2-node x 1-worker run watched to the end (the time limit field writes the YAML on the way)
    page.click("#tab-train-button")
    set_options(page, "")
    wait_for(lambda: "--hold" not in page.inner_text("#command-preview"), "the preview without --hold", timeout_s=60)
    set_time_limit(page, "1")
    set_time_limit(page, "")
    main = start_and_get_job(page, runs_dir, {held_run.run_id})
    wait_for(lambda: "node1, node2" in monitor_text(page, "#cluster-nodes"), "the job's two nodes", timeout_s=RUN_TIMEOUT_S)
    # the pick holds while the Monitor syncs (a late sync once put the previously shown run back)
    wait_for(lambda: picker_value(page) == main.run_id and len(plot_points(page, "loss-plot").get("loss", {})) >= 1,
             "a point in the loss chart", timeout_s=RUN_TIMEOUT_S, explain=lambda: explain(page, main))
    screenshot(page, "slurm-running")
    wait_for(lambda: run_state(page).startswith(("finished", "failed", "stopped", "cancelled")), "the run's end",
             timeout_s=RUN_TIMEOUT_S, explain=lambda: explain(page, main))
    assert run_state(page).startswith("finished"), explain(page, main)
    # the console watches the job until Slurm says it ended too (its ranks exit after the run's own end)
    wait_for(lambda: "COMPLETED" in monitor_text(page, "#cluster-state"), "Slurm's COMPLETED", timeout_s=120)
    screenshot(page, "slurm-finished")
    status = main.read_status()
    assert status.state == "finished" and status.cluster.nodes == ["node1", "node2"]
    assert status.step == STEPS and main.sbatch_script.is_file()
    assert not launcher.run_processes(main.path), "a process of the finished cluster run is left"


def explain(page, run: RunDir) -> str:
    """What the page and the run say, for a wait that timed out: which of the two kept it waiting."""
    status = run.read_status()
    cluster = status.cluster or ClusterJob()
    logs = sorted(run.logs_dir.glob("*.log")) if run.logs_dir.is_dir() else []
    tails = "".join(f"\n--- {log.name}:\n" + "\n".join(log.read_text(errors="replace").splitlines()[-12:])
                    for log in logs[:4])
    return (f"the picker shows {picker_value(page)!r}; the loss chart has {plot_points(page, 'loss-plot')}; "
            f"{run.run_id} is {status.state} at step {status.step} ({status.reason}); Slurm job {cluster.job_id} "
            f"{cluster.state} on {cluster.nodes}{tails}")


def set_time_limit(page, text: str) -> None:
    box = page.locator("#cfg-launch-time-limit textarea, #cfg-launch-time-limit input").first
    box.fill(text)
    box.press("Tab")
    shown = f"time_limit: '{text}'" if text else "time_limit: null"
    wait_for(lambda: shown in page.inner_text("#config-yaml"), f"{shown} in the YAML", timeout_s=60)


def start_and_get_job(page, runs_dir: Path, before: set[str]) -> RunDir:
    """Start on the Train tab; the new run once it has its Slurm job."""
    page.click("#start-button")
    wait_for(lambda: {s.run_id for s in list_runs(runs_dir)} - before, "a new run folder", timeout_s=60)
    run = RunDir(next(s.path for s in list_runs(runs_dir) if s.run_id not in before))
    wait_for(lambda: (run.read_status().cluster or ClusterJob()).job_id, "its Slurm job", timeout_s=60)
    wait_for(lambda: picker_value(page) == run.run_id, "the Monitor to show it", timeout_s=60)
    return run
