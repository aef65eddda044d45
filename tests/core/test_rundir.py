"""core.rundir: atomic files, status states, metrics reading, control requests, run ids, listing."""
from __future__ import annotations

import datetime as dt
import json
import os
import re
import threading
from pathlib import Path

import pytest

from core import rundir
from core.atomic import atomic_write
from core.rundir import (
    TERMINAL_STATES, ControlPoller, MetricsReader, RunDir, RunDirError, atomic_write_json,
    can_transition, final_run_id, finalize_name, list_runs, make_run_id,
    next_free_run_id, resolve_inside,
)

CONFIG_YAML = "method: lora\n"


@pytest.fixture
def run(tmp_path: Path) -> RunDir:
    return RunDir.create(tmp_path / "runs", "20261129-101500_tiny-demo_lora-r8_fp32_dp1", CONFIG_YAML)


# ---- JSON files ------------------------------------------------------------------------------

def test_atomic_write_json_converts_numpy_scalars(tmp_path):
    np = pytest.importorskip("numpy")
    atomic_write_json(tmp_path / "s.json", {"loss": np.float32(1.5), "step": np.int64(7)})
    assert json.loads((tmp_path / "s.json").read_text()) == {"loss": 1.5, "step": 7}


# ---- create and status -----------------------------------------------------------------------

def test_create_writes_layout_and_queued_status(run):
    assert run.config_path.read_text() == CONFIG_YAML
    assert run.checkpoints_dir.is_dir() and run.export_dir.is_dir()
    status = run.read_status()
    assert status["state"] == "queued" and status["run_id"] == run.run_id and status["attempt"] == 1
    assert run.read_control() == {"stop": None, "early_stopping": None, "seq": 0}


def test_create_refuses_existing_non_empty_dir_but_accepts_empty(tmp_path, run):
    with pytest.raises(RunDirError, match="already exists"):
        RunDir.create(run.path.parent, run.run_id, CONFIG_YAML)
    (tmp_path / "runs" / "empty").mkdir()
    assert RunDir.create(tmp_path / "runs", "empty", CONFIG_YAML).read_status()["state"] == "queued"


@pytest.mark.parametrize("bad_id", ["../escape", "a/b", "with space", "..", ""])
def test_create_refuses_bad_run_ids(tmp_path, bad_id):
    with pytest.raises(RunDirError, match="run id"):
        RunDir.create(tmp_path, bad_id, CONFIG_YAML)


def test_write_status_merges_fields_and_stamps_times(run):
    run.write_status(state="starting", pid=123, pgid=123)
    run.write_status(state="running", step=5, total_steps=100)
    status = run.write_status(best={"metric": "val_loss", "value": 1.2, "step": 5})
    assert status["pid"] == 123 and status["step"] == 5 and status["total_steps"] == 100
    assert status["best"] == {"metric": "val_loss", "value": 1.2, "step": 5}
    assert status["started_at"] <= status["updated_at"] and "ended_at" not in status
    done = run.write_status(state="finished", final={"val_ppl": 12.3})
    assert done["ended_at"] >= done["started_at"] and run.read_status() == done


@pytest.mark.parametrize("path", [
    ["starting", "running", "finished"],
    ["starting", "running", "stopping", "stopped"],
    ["starting", "running", "early_stopped"],
    ["starting", "failed"],
    ["stopped"],
])
def test_legal_state_paths(run, path):
    for state in path:
        assert run.write_status(state=state)["state"] == state


@pytest.mark.parametrize("path, bad", [
    (["starting", "running", "finished"], "running"),
    (["starting", "running", "stopped"], "failed"),
    (["starting", "running"], "queued"),
    ([], "running"),
    ([], "paused"),
])
def test_illegal_transitions_are_refused_and_status_unchanged(run, path, bad):
    for state in path:
        run.write_status(state=state)
    before = run.read_status()
    with pytest.raises(RunDirError, match="cannot change state|unknown state"):
        run.write_status(state=bad, step=99)
    assert run.read_status() == before


def test_terminal_error_message_points_to_resume(run):
    for state in ["starting", "running", "finished"]:
        run.write_status(state=state)
    with pytest.raises(RunDirError, match="restart_for_resume"):
        run.write_status(state="running")


def test_can_transition_table():
    assert can_transition("running", "running")
    assert all(not can_transition(t, "running") for t in TERMINAL_STATES)
    assert not can_transition("queued", "finished")


def test_restart_for_resume_starts_a_new_attempt(run):
    for state in ["starting", "running"]:
        run.write_status(state=state, pid=42, step=80, best={"metric": "val_loss", "value": 1.0, "step": 50})
    run.write_control(stop="graceful")
    run.write_status(state="stopped", reason="stopped by user")
    with pytest.raises(RunDirError):
        run.write_status(state="starting")
    status = run.restart_for_resume()
    assert status["state"] == "queued" and status["attempt"] == 2
    assert "pid" not in status and "ended_at" not in status and "reason" not in status
    assert status["step"] == 80 and status["best"]["step"] == 50
    assert status["history"][0]["state"] == "stopped"
    assert run.read_control()["stop"] is None
    assert run.write_status(state="starting")["state"] == "starting"


def test_restart_for_resume_refuses_an_active_run(run):
    run.write_status(state="starting")
    with pytest.raises(RunDirError, match="only a run that is over"):
        run.restart_for_resume()


def test_concurrent_status_writers_lose_no_field(run):
    run.write_status(state="starting")
    run.write_status(state="running")

    def writer(name):
        for i in range(30):
            run.write_status(**{f"{name}_{i}": i})

    threads = [threading.Thread(target=writer, args=(n,)) for n in ("console", "worker")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    status = run.read_status()
    assert all(f"{n}_{i}" in status for n in ("console", "worker") for i in range(30))


def test_read_status_reports_missing_and_corrupt_files(tmp_path, run):
    with pytest.raises(RunDirError, match="no status"):
        RunDir(tmp_path / "nothing").read_status()
    run.status_path.write_text('{"state": "runn')
    with pytest.raises(RunDirError, match="not valid JSON"):
        run.read_status()


# ---- metrics -----------------------------------------------------------------------------------

def test_append_and_read_metrics_incrementally(run):
    reader = run.metrics_reader()
    assert reader.read_new() == []  # file does not exist yet
    run.append_metrics([{"kind": "train", "step": 1, "loss": 2.5}, {"kind": "train", "step": 2, "loss": 2.4}])
    first = reader.read_new()
    assert [r["step"] for r in first] == [1, 2] and all("time" in r for r in first)
    assert reader.read_new() == []
    run.append_metrics({"kind": "eval", "step": 2, "val_loss": 2.6})
    assert [(r["kind"], r["step"]) for r in reader.read_new()] == [("eval", 2)]


def test_reader_keeps_half_written_line_for_next_call(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(b'{"step": 1}\n{"step": 2, "lo')
    reader = MetricsReader(path)
    assert reader.read_new() == [{"step": 1}]
    assert reader.read_new() == []
    with open(path, "ab") as f:
        f.write(b'ss": 0.5}\n')
    assert reader.read_new() == [{"step": 2, "loss": 0.5}]
    assert reader.corrupt_lines == 0


def test_reader_skips_and_counts_corrupt_middle_lines(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(b'{"step": 1}\n{"step": 2, garbage\n[1, 2]\n\xff\xfe\n\n{"step": 3}\n')
    reader = MetricsReader(path)
    assert [r["step"] for r in reader.read_new()] == [1, 3]
    assert reader.corrupt_lines == 3 and "line 4" in reader.last_error


def test_reader_reads_only_new_bytes_of_a_large_file(tmp_path):
    path = tmp_path / "metrics.jsonl"
    line = json.dumps({"kind": "train", "step": 0, "loss": 1.0, "pad": "x" * 200}) + "\n"
    path.write_text(line * 20000)  # ~4.5 MB
    reader = MetricsReader(path)
    assert len(reader.read_new()) == 20000
    read_before = reader.bytes_read
    assert read_before == path.stat().st_size
    with open(path, "a") as f:
        f.write('{"kind": "train", "step": 20000}\n')
    assert reader.read_new() == [{"kind": "train", "step": 20000}]
    assert reader.bytes_read - read_before == len('{"kind": "train", "step": 20000}\n')


def test_reader_starts_over_when_file_is_replaced(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1}\n{"step": 2}\n')
    reader = MetricsReader(path)
    assert len(reader.read_new()) == 2
    atomic_write(path, '{"step": 1}\n')
    assert reader.read_new() == [{"step": 1}]


def test_append_after_torn_line_isolates_it(run):
    run.metrics_path.write_bytes(b'{"step": 1}\n{"step": 2, "lo')  # a writer died mid-line
    run.append_metrics({"kind": "train", "step": 3})
    reader = run.metrics_reader()
    assert [r["step"] for r in reader.read_new()] == [1, 3]
    assert reader.corrupt_lines == 1


# ---- control -------------------------------------------------------------------------------------

def test_control_merges_and_bumps_seq(run):
    first = run.write_control(early_stopping={"enabled": True, "patience": 3})
    second = run.write_control(early_stopping={"patience": 5, "min_delta": 0.01})
    assert (first["seq"], second["seq"]) == (1, 2)
    assert second["early_stopping"] == {"enabled": True, "patience": 5, "min_delta": 0.01}
    third = run.write_control(stop="graceful")
    assert third["seq"] == 3 and third["early_stopping"]["patience"] == 5
    assert run.read_control()["stop"] == "graceful"
    assert run.write_control(early_stopping=None)["early_stopping"] is None


@pytest.mark.parametrize("changes, match", [
    ({"stop": "soon"}, "stop"),
    ({"pause": True}, "unknown control"),
    ({"early_stopping": {"patience": 0}}, "patience"),
    ({"early_stopping": {"patiense": 2}}, "keys among"),
    ({"early_stopping": {"enabled": "yes"}}, "enabled"),
])
def test_control_rejects_bad_requests(run, changes, match):
    with pytest.raises(RunDirError, match=match):
        run.write_control(**changes)
    assert run.read_control()["seq"] == 0


def test_control_poller_returns_each_request_once(run):
    poller = ControlPoller(run)
    assert poller.poll() is None
    run.write_control(early_stopping={"patience": 4})
    got = poller.poll()
    assert got["seq"] == 1 and got["early_stopping"] == {"patience": 4}
    assert poller.poll() is None
    run.write_control(stop="now")
    assert poller.poll()["stop"] == "now"
    assert poller.poll() is None


def test_control_poller_sees_requests_made_before_the_worker_started(run):
    run.write_control(stop="graceful")
    assert ControlPoller(run.path).poll()["stop"] == "graceful"


# ---- run ids ---------------------------------------------------------------------------------------

NOW = dt.datetime(2026, 11, 29, 10, 15, 0)


def test_make_run_id():
    assert make_run_id("models/tiny-demo", "lora", 8, "fp32", 1, NOW) == \
        "20261129-101500_tiny-demo_lora-r8_fp32_dp1"
    assert make_run_id("Qwen/Qwen2.5 0.5B/", "full", None, "bfloat16", 2, NOW, name="my exp!") == \
        "20261129-101500_my-exp_Qwen2.5-0.5B_full_bf16_dp2"


def test_run_ids_sort_by_time():
    ids = [make_run_id("m", "lora", 8, "fp32", 1, NOW + dt.timedelta(seconds=s)) for s in (5, 70, 3600 * 30)]
    assert sorted(ids) == ids


def test_final_run_id():
    base = "20261129-101500_tiny-demo_lora-r8_fp32_dp1"
    assert final_run_id(base, 12.3456, 850.4) == base + "_ppl12.3_tps850"
    assert final_run_id(base, 3.14159, 12000) == base + "_ppl3.14_tps12000"
    assert final_run_id(base, float("nan"), 850) == base + "_tps850"
    assert final_run_id(base, None, None) == base
    assert final_run_id(final_run_id(base, 12.3, 850), 11.0, 900) == base + "_ppl11.0_tps900"


def test_next_free_run_id(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a-2").mkdir()
    assert next_free_run_id(tmp_path, "a") == "a-3"
    assert next_free_run_id(tmp_path, "b") == "b"


def test_finalize_name_renames_and_leaves_relative_symlink(run):
    old = run.path
    final = finalize_name(run, 12.34, 850)
    assert final.run_id == old.name + "_ppl12.3_tps850" and final.path.is_dir()
    assert old.is_symlink() and os.readlink(old) == final.run_id  # relative link
    assert RunDir(old).read_status()["run_id"] == final.run_id
    assert (old / "config.yaml").read_text() == CONFIG_YAML
    again = finalize_name(old, 12.34, 850)  # through the old name: nothing to do
    assert again.path == final.path.resolve()


def test_finalize_name_keeps_links_working_when_runs_folder_moves(tmp_path, run):
    finalize_name(run, 5.0, 100)
    moved = tmp_path / "moved"
    os.rename(run.path.parent, moved)
    assert RunDir(moved / run.run_id).read_status()["state"] == "queued"


# ---- listing -----------------------------------------------------------------------------------

def test_list_runs_newest_first_skipping_links_and_non_runs(tmp_path):
    runs = tmp_path / "runs"
    older = RunDir.create(runs, "older", CONFIG_YAML)
    newer = RunDir.create(runs, "newer", CONFIG_YAML)
    older.write_status(created_at=1000.0)
    newer.write_status(created_at=2000.0)
    finalize_name(newer, 10.0, 100)            # leaves a symlink named "newer"
    (runs / "notes").mkdir()                   # no status.json
    (runs / "stray.txt").write_text("x")
    listed = list_runs(runs)
    assert [s.run_id for s in listed] == ["newer_ppl10.0_tps100", "older"]
    assert all(s.state == "queued" for s in listed)


def test_list_runs_survives_broken_files(tmp_path):
    runs = tmp_path / "runs"
    RunDir.create(runs, "good", CONFIG_YAML)
    half = RunDir.create(runs, "half", CONFIG_YAML)
    half.status_path.write_text('{"state": "run')
    odd = RunDir.create(runs, "odd", CONFIG_YAML)
    odd.status_path.write_text('{"state": "dancing"}')
    listed = {s.run_id: s for s in list_runs(runs)}
    assert listed["good"].state == "queued"
    assert listed["half"].state == "unknown" and "not valid JSON" in listed["half"].reason
    assert listed["odd"].state == "unknown" and "dancing" in listed["odd"].reason
    assert list_runs(tmp_path / "missing") == []


# ---- paths ---------------------------------------------------------------------------------------

def test_resolve_inside_accepts_paths_in_root(tmp_path):
    (tmp_path / "runs" / "a").mkdir(parents=True)
    root = tmp_path / "runs"
    assert resolve_inside(root, "a/train.log") == (root / "a" / "train.log").resolve()
    assert resolve_inside(root, root / "a") == (root / "a").resolve()
    os.symlink("a", root / "alias")
    assert resolve_inside(root, "alias") == (root / "a").resolve()


@pytest.mark.parametrize("escape", ["../secret", "a/../../secret", "/etc/passwd", "out", "bad\x00name"])
def test_resolve_inside_refuses_escapes(tmp_path, escape):
    root = tmp_path / "runs"
    (root / "a").mkdir(parents=True)
    os.symlink(tmp_path, root / "out")  # a symlink that leads out
    with pytest.raises(RunDirError):
        resolve_inside(root, escape)


def test_rundir_imports_nothing_else_of_core():
    """Nothing but the stdlib-only atomic-write helper (core.atomic, checked in test_atomic)."""
    source = Path(rundir.__file__).read_text()
    imports = re.findall(r"^\s*(?:from|import) (core[.\w]*)", source, re.M)
    assert imports == ["core.atomic"]
