"""core.run.rundir: atomic files, status states, metrics reading, control requests, run ids, listing."""
from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import re
import threading
from pathlib import Path

import pytest

import core.run.records as records
import core.run.rundir as rundir
import core.run.runs as runs
from core.run.atomic import atomic_write
from core.spec.config import ConfigError, EarlyStoppingSettings
from core.run.records import (TERMINAL_STATES, Attempt, BestSoFar, ControlRequest, EvalRecord, EventRecord,
    FinalFigures, MetricRecord, RunDirError, Status, TrainRecord, can_transition, parse_metric)
from core.run.rundir import ControlPoller, MetricsReader, RunDir, atomic_write_json, resolve_inside
from core.run.runs import display_name, list_runs, make_run_id, next_free_run_id

from tests import skips

CONFIG_YAML = "method: lora\n"


@pytest.fixture
def run(tmp_path: Path) -> RunDir:
    return RunDir.create(tmp_path / "runs", "20261129-101500_tiny-demo_lora-r8_fp32_dp1", CONFIG_YAML)


# ---- JSON files ------------------------------------------------------------------------------

def test_atomic_write_json_converts_numpy_scalars(tmp_path):
    np = skips.module("numpy")
    atomic_write_json(tmp_path / "s.json", {"loss": np.float32(1.5), "step": np.int64(7)})
    assert json.loads((tmp_path / "s.json").read_text()) == {"loss": 1.5, "step": 7}


# ---- create and status -----------------------------------------------------------------------

def test_create_writes_layout_and_queued_status(run):
    assert run.config_path.read_text() == CONFIG_YAML
    assert run.checkpoints_dir.is_dir() and run.export_dir.is_dir()
    status = run.read_status()
    assert status.state == "queued" and status.run_id == run.run_id and status.attempt == 1
    assert run.read_control() == ControlRequest(stop=None, early_stopping=None, seq=0)


def test_create_refuses_existing_non_empty_dir_but_accepts_empty(tmp_path, run):
    with pytest.raises(RunDirError, match="already exists"):
        RunDir.create(run.path.parent, run.run_id, CONFIG_YAML)
    (tmp_path / "runs" / "empty").mkdir()
    assert RunDir.create(tmp_path / "runs", "empty", CONFIG_YAML).read_status().state == "queued"


@pytest.mark.parametrize("bad_id", ["../escape", "a/b", "with space", "..", ""])
def test_create_refuses_bad_run_ids(tmp_path, bad_id):
    with pytest.raises(RunDirError, match="run id"):
        RunDir.create(tmp_path, bad_id, CONFIG_YAML)


def test_write_status_merges_fields_and_stamps_times(run):
    run.write_status(state="starting", pid=123, pgid=123)
    run.write_status(state="running", step=5, total_steps=100)
    status = run.write_status(best=BestSoFar(metric="val_loss", value=1.2, step=5))
    assert status.pid == 123 and status.step == 5 and status.total_steps == 100
    assert status.best == BestSoFar(metric="val_loss", value=1.2, step=5)
    assert status.started_at <= status.updated_at and status.ended_at is None
    done = run.write_status(state="finished", final=FinalFigures(best_val_ppl=12.3))
    assert done.ended_at >= done.started_at and run.read_status() == done


@pytest.mark.parametrize("path", [
    ["starting", "running", "finished"],
    ["starting", "running", "stopping", "stopped"],
    ["starting", "running", "early_stopped"],
    ["starting", "failed"],
    ["stopped"],
])
def test_legal_state_paths(run, path):
    for state in path:
        assert run.write_status(state=state).state == state


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
        run.write_status(state=state, pid=42, step=80, best=BestSoFar(metric="val_loss", value=1.0, step=50))
    run.write_control(stop="graceful")
    run.write_status(state="stopped", reason="stopped by user")
    with pytest.raises(RunDirError):
        run.write_status(state="starting")
    status = run.restart_for_resume()
    assert status.state == "queued" and status.attempt == 2
    assert status.pid is None and status.ended_at is None and status.reason is None
    assert status.step == 80 and status.best.step == 50
    assert status.history[0].state == "stopped"
    assert run.read_control().stop is None
    assert run.write_status(state="starting").state == "starting"


def test_restart_for_resume_refuses_an_active_run(run):
    run.write_status(state="starting")
    with pytest.raises(RunDirError, match="only a run that is over"):
        run.restart_for_resume()


def test_concurrent_status_writers_lose_no_field(run):
    run.write_status(state="starting")
    run.write_status(state="running")

    def writer(name):
        for i in range(30):
            run.write_status(extra={f"{name}_{i}": i})

    threads = [threading.Thread(target=writer, args=(n,)) for n in ("console", "worker")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    status = run.read_status()
    assert all(f"{n}_{i}" in status.extra for n in ("console", "worker") for i in range(30))


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
    run.append_metrics([TrainRecord(step=1, loss=2.5), TrainRecord(step=2, loss=2.4)])
    first = reader.read_new()
    assert [r.step for r in first] == [1, 2] and all(r.time is not None for r in first)
    assert reader.read_new() == []
    run.append_metrics(EvalRecord(step=2, val_loss=2.6))
    assert [(r.kind, r.step) for r in reader.read_new()] == [("eval", 2)]


def test_reader_keeps_half_written_line_for_next_call(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(b'{"step": 1}\n{"step": 2, "lo')
    reader = MetricsReader(path)
    assert reader.read_new() == [MetricRecord(step=1)]
    assert reader.read_new() == []
    with open(path, "ab") as f:
        f.write(b'ss": 0.5}\n')
    assert reader.read_new() == [MetricRecord(step=2, extra={"loss": 0.5})]
    assert reader.corrupt_lines == 0


def test_reader_skips_and_counts_corrupt_middle_lines(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(b'{"step": 1}\n{"step": 2, garbage\n[1, 2]\n\xff\xfe\n\n{"step": 3}\n')
    reader = MetricsReader(path)
    assert [r.step for r in reader.read_new()] == [1, 3]
    assert reader.corrupt_lines == 3 and "line 4" in reader.last_error


@pytest.mark.slow
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
    assert reader.read_new() == [TrainRecord(step=20000)]
    assert reader.bytes_read - read_before == len('{"kind": "train", "step": 20000}\n')


def test_reader_starts_over_when_file_is_replaced(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1}\n{"step": 2}\n')
    reader = MetricsReader(path)
    assert len(reader.read_new()) == 2
    atomic_write(path, '{"step": 1}\n')
    assert reader.read_new() == [MetricRecord(step=1)]


def test_append_after_torn_line_isolates_it(run):
    run.metrics_path.write_bytes(b'{"step": 1}\n{"step": 2, "lo')  # a writer died mid-line
    run.append_metrics(TrainRecord(step=3))
    reader = run.metrics_reader()
    assert [r.step for r in reader.read_new()] == [1, 3]
    assert reader.corrupt_lines == 1


# ---- control -------------------------------------------------------------------------------------

def test_control_merges_and_bumps_seq(run):
    first = run.write_control(early_stopping={"enabled": True, "patience": 3})
    second = run.write_control(early_stopping={"patience": 5, "min_delta": 0.01})
    assert (first.seq, second.seq) == (1, 2)
    assert second.early_stopping == {"enabled": True, "patience": 5, "min_delta": 0.01}
    third = run.write_control(stop="graceful")
    assert third.seq == 3 and third.early_stopping["patience"] == 5
    assert run.read_control().stop == "graceful"
    assert run.write_control(early_stopping=None).early_stopping is None


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
    assert run.read_control().seq == 0


def test_control_poller_returns_each_request_once(run):
    poller = ControlPoller(run)
    assert poller.poll() is None
    run.write_control(early_stopping={"patience": 4})
    got = poller.poll()
    assert got.seq == 1 and got.early_stopping == {"patience": 4}
    assert poller.poll() is None
    run.write_control(stop="now")
    assert poller.poll().stop == "now"
    assert poller.poll() is None


def test_control_poller_sees_requests_made_before_the_worker_started(run):
    run.write_control(stop="graceful")
    assert ControlPoller(run.path).poll().stop == "graceful"


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


def test_display_name_shows_the_results_beside_the_stable_id():
    base = "20261129-101500_tiny-demo_lora-r8_fp32_dp1"
    final = FinalFigures(best_val_ppl=12.3456, tokens_per_s=850.4, exact_match=0.385)
    assert display_name(base, final) == base + " · ppl 12.3 · EM 38.5% · 850 tok/s"
    # the answer score early stopping watched, when it watched one (x100, as BLEU is quoted)
    watched = FinalFigures(best_val_ppl=12.3456, exact_match=0.385, bleu=0.2345, monitor="bleu")
    assert display_name(base, watched) == base + " · ppl 12.3 · BLEU 23.4"
    assert display_name(base, watched.replace(monitor="val_loss")) == base + " · ppl 12.3 · EM 38.5%"
    assert display_name(base, FinalFigures(best_val_ppl=3.14159)) == base + " · ppl 3.14"
    assert display_name(base, FinalFigures(best_val_ppl=float("nan"), tokens_per_s=12000)) == base + " · 12000 tok/s"
    assert display_name(base, None) == display_name(base, FinalFigures()) == base


def test_next_free_run_id(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a-2").mkdir()
    assert next_free_run_id(tmp_path, "a") == "a-3"
    assert next_free_run_id(tmp_path, "b") == "b"


# ---- listing -----------------------------------------------------------------------------------

def test_list_runs_newest_first_skipping_links_and_non_runs(tmp_path):
    runs = tmp_path / "runs"
    older = RunDir.create(runs, "older", CONFIG_YAML)
    newer = RunDir.create(runs, "newer", CONFIG_YAML)
    older.write_status(created_at=1000.0)
    newer.write_status(created_at=2000.0)
    os.symlink("newer", runs / "newer-link")   # a link (as older versions left after a rename)
    (runs / "notes").mkdir()                   # no status.json
    (runs / "stray.txt").write_text("x")
    listed = list_runs(runs)
    assert [s.run_id for s in listed] == ["newer", "older"]
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


@pytest.mark.parametrize("module, allowed", [
    (records, ["core.spec.codec", "core.spec.config", "core.spec.stats"]),
    (rundir, ["core.run.atomic", "core.run.records", "core.spec.config", "core.spec.messages"]),
    (runs, ["core.run.records", "core.run.rundir"]),
])
def test_the_run_folder_modules_import_nothing_else_of_core(module, allowed):
    """The records, the folder's files and the listing know each other, the stdlib-only atomic-write
    helper (core.run.atomic, checked in test_atomic), the one codec (core.spec.codec), the config's
    early-stopping fields and the data statistics (core.spec.stats) only."""
    source = Path(module.__file__).read_text()
    imports = re.findall(r"^\s*(?:from|import) (core[.\w]*)", source, re.M)
    assert imports == allowed


# ---- typed records: other versions, type checks, extension --------------------------------------

FIXTURE = Path(__file__).parent / "fixtures" / "run_2026-12-01"  # written by the worker of 2026-12-01


def test_a_run_written_before_the_typed_records_reads_in_full(tmp_path):
    """status.json, control.json and metrics.jsonl as the worker wrote them before this change
    (a tiny LoRA run: 6 steps, evaluation every 3, a patience override sent before the start)."""
    for name in ("status.json", "control.json", "metrics.jsonl"):
        (tmp_path / name).write_bytes((FIXTURE / name).read_bytes())
    run = RunDir(tmp_path)
    status = run.read_status()
    assert (status.state, status.reason, status.attempt, status.step, status.total_steps) == \
        ("finished", "reached 6 steps", 1, 6, 6)
    assert status.best == BestSoFar(metric="val_loss", value=5.584630489349365, step=6, val_ppl=266.3018631823181)
    assert status.final.tokens_seen == 950 and status.final.peak_mem_mb == 565.7 and status.final.exact_match == 0.0
    assert status.command == [] and status.history == [] and status.extra == {}  # missing keys: defaults
    assert run.read_control() == ControlRequest(early_stopping={"patience": 4}, seq=1, requested_at=1796116769.1290615)
    records = run.metrics_reader().read_new()
    assert [type(r).__name__ for r in records] == [
        "SetupEvent", "EvalRecord", "BaselineEvent", "ControlEvent", "TrainRecord", "TrainRecord", "EvalRecord",
        "TrainRecord", "TrainRecord", "EvalRecord", "EndEvent"]
    setup, base, baseline, control, first_train = records[:5]
    assert setup.kernels == "fused" and setup.seq_len == 48 and setup.data.train.samples == 96
    assert base.base and base.best_value is None and base.monitor is None and base.val_tokens == 64
    assert baseline.exact_match == 0.0 and baseline.val_loss == base.val_loss
    assert control.early_stopping == {"enabled": False, "monitor": "val_loss", "patience": 4, "min_delta": 0.0}
    assert first_train.loss == pytest.approx(5.748692989349365) and first_train.epoch == 0
    assert records[6].patience_left == 4 and records[6].early_stopping_enabled is False
    assert records[-1].tokens_seen == 950 and records[-1].message == "finished: reached 6 steps"
    assert all(r.extra == {} for r in records)  # every key of the old format has its field
    for line, record in zip((FIXTURE / "metrics.jsonl").read_text().splitlines(), records):
        assert kept(json.loads(line), record.to_json()) == []  # nothing lost when written again


def kept(old, new, path="") -> list[str]:
    """Where `new` lost or changed a key of `old`, at any depth (keys it adds are defaults)."""
    if not (isinstance(old, dict) and isinstance(new, dict)):
        return [] if old == new else [f"{path.rstrip('.')}: {old!r} -> {new!r}"]
    problems = []
    for key, value in old.items():
        problems += kept(value, new[key], f"{path}{key}.") if key in new else [f"{path}{key}: missing"]
    return problems


def test_kept_finds_a_lost_or_changed_key_at_any_depth():
    old = {"data": {"train": {"samples": 96}, "seq_len": 48}}
    assert kept(old, {"data": {"train": {"samples": 96, "chunked": 0}, "seq_len": 48, "notes": []}}) == []
    assert kept(old, {"data": {"train": {}, "seq_len": 48}}) == ["data.train.samples: missing"]
    assert kept(old, {"data": {"train": {"samples": 95}, "seq_len": 48}}) == ["data.train.samples: 96 -> 95"]


def test_a_failed_and_resumed_status_of_the_old_format_reads_in_full():
    status = Status.from_json(json.loads((FIXTURE / "status_failed_after_resume.json").read_text()))
    assert status.state == "failed" and status.attempt == 2 and status.error_lines == ["Killed"]
    assert status.pid is None and status.command[-2] == "--run-dir" and status.data_parallel == 1
    assert status.history == [Attempt(state="failed", reason="out of memory: std::bad_alloc",
                                      started_at=1796116803.5491598, ended_at=1796116803.5968797, step=10)]


def test_keys_of_a_newer_writer_are_kept_and_written_back(run):
    newer = {**run.read_status().to_json(), "generation": 3, "best": {"metric": "val_loss", "value": 1.0,
                                                                        "rank": 0}}
    atomic_write_json(run.status_path, newer)
    status = run.read_status()
    assert status.extra == {"generation": 3} and status.best.extra == {"rank": 0}
    run.write_status(state="starting")
    on_disk = json.loads(run.status_path.read_text())
    assert on_disk["generation"] == 3 and on_disk["best"]["rank"] == 0 and on_disk["state"] == "starting"
    line = {"kind": "train", "step": 4, "loss": 1.5, "shard": 2}
    assert parse_metric(line).extra == {"shard": 2} and parse_metric(line).to_json()["shard"] == 2
    assert parse_metric({**line, "generation": 2}).generation == 2  # a known field (the attempt that wrote it)


def test_a_value_of_the_wrong_type_reads_as_the_default_and_is_refused_when_written(run):
    status = Status.from_json({"state": "running", "step": "seven", "attempt": "x", "pid": 12.0,
                               "error_lines": ["ok", 3], "best": "high"})
    assert (status.step, status.attempt, status.pid, status.error_lines, status.best) == (None, 1, 12, ["ok"], None)
    with pytest.raises(RunDirError, match=r"Status.step = 'seven': must be int \| None"):
        run.write_status(step="seven")
    with pytest.raises(RunDirError, match="Status has no field stpe; valid fields: run_id, state"):
        run.write_status(stpe=3)
    with pytest.raises(RunDirError, match=r"Status.best = \{'value': 1.0\}: must be BestSoFar \| None"):
        run.write_status(best={"value": 1.0})  # a writer passes the record
    with pytest.raises(RunDirError, match=r"TrainRecord.loss = 'nan\?': must be float \| None"):
        TrainRecord(step=1, loss="nan?")
    assert run.read_status().step is None  # nothing written


def test_numpy_scalars_become_python_numbers(run):
    np = skips.module("numpy")
    record = TrainRecord(step=np.int64(3), loss=np.float32(1.5), loss_scale=np.float64(2.0))
    assert record.to_json()["step"] == 3 and type(record.step) is int and type(record.loss) is float
    run.append_metrics(record)
    assert run.metrics_reader().read_new()[0].loss == 1.5


def test_lines_of_unknown_kinds_and_events_keep_their_names():
    odd = parse_metric({"kind": "profile", "step": 2, "flops": 1e9})
    assert type(odd) is MetricRecord and odd.extra == {"kind": "profile", "flops": 1e9}
    assert odd.to_json() == {"kind": "profile", "step": 2, "time": None, "generation": None, "flops": 1e9}
    warning = parse_metric({"kind": "event", "step": 1, "event": "warning", "message": "careful"})
    assert type(warning) is EventRecord and (warning.event, warning.message) == ("warning", "careful")
    assert warning.to_json()["kind"] == "event"


def test_a_new_event_kind_is_one_subclass(monkeypatch):
    monkeypatch.setattr(records, "EVENT_KINDS", dict(records.EVENT_KINDS))

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class HangEvent(EventRecord):
        event: str = "hang"
        seconds_without_step: float | None = None

    record = parse_metric({"kind": "event", "event": "hang", "step": 9, "seconds_without_step": 600})
    assert isinstance(record, HangEvent) and record.seconds_without_step == 600.0
    assert HangEvent(step=9).to_json()["event"] == "hang"


def test_control_overrides_apply_over_the_config_settings_by_its_rules():
    settings = EarlyStoppingSettings(patience=3)
    request = ControlRequest(early_stopping={"patience": 5, "monitor": None}, seq=1)
    assert request.early_stopping_over(settings) == EarlyStoppingSettings(patience=5)
    with pytest.raises(ConfigError, match="early_stopping.patience = 0: must be an integer >= 1"):
        ControlRequest(early_stopping={"patience": 0}).early_stopping_over(settings)
    assert ControlRequest().early_stopping_over(settings) == settings


def test_write_control_stores_values_as_the_config_holds_them(run):
    control = run.write_control(early_stopping={"patience": 7.0, "min_delta": "0.01"})
    assert control.early_stopping == {"patience": 7, "min_delta": 0.01}
    assert json.loads(run.control_path.read_text())["early_stopping"] == {"patience": 7, "min_delta": 0.01}


# ---- the layout ----------------------------------------------------------------------------------

def test_checkpoint_pointers_are_parsed_in_one_place(run):
    assert run.exists() and not RunDir(run.path / "nothing").exists()
    assert run.checkpoint_step("best") is None and run.checkpoint_step("last") is None
    (run.checkpoints_dir / "step-8").mkdir()
    os.symlink("step-8", run.checkpoint("best"))
    os.symlink("step-12", run.checkpoint("last"))  # a dangling pointer: no checkpoint
    assert run.checkpoint_step("best") == 8 and run.checkpoint_step("last") is None
    assert run.checkpoint(8) == run.checkpoints_dir / "step-8" == run.checkpoint("best").resolve()
    with pytest.raises(RunDirError, match="no checkpoint 'worst'; use best or last or a step number"):
        run.checkpoint("worst")
    assert run.export_path("best", 8, "peft") == run.export_dir / "best-step-8-peft"
    assert run.export_zip("best", 8, "peft") == run.export_dir / "best-step-8-peft.zip"


def test_a_step_saved_again_is_found_under_its_revision_name(run):
    """core.run.ckpt_store saves a step that exists again as `step-N-rK` (crash-safe overwrite) and
    moves the pointers there: the console's readers (Runs tab, Monitor downloads, export) must
    see that folder, not miss it because it is not named `step-N`."""
    import core.run.ckpt_store as ckpt_store
    (run.checkpoints_dir / "step-4").mkdir()
    (run.checkpoints_dir / "step-8-r2").mkdir()
    (run.checkpoints_dir / "step-8-r3").mkdir()
    (run.checkpoints_dir / ".tmp-step-12-r2-999").mkdir()  # an interrupted save is not a checkpoint
    os.symlink("step-8-r3", run.checkpoint("last"))
    assert run.checkpoint_step("last") == 8
    assert run.checkpoint_steps() == [4, 8] == ckpt_store.checkpoint_steps(run.checkpoints_dir)
    assert run.checkpoint(8) == run.checkpoints_dir / "step-8-r3" == run.checkpoint("last").resolve()
    assert run.checkpoint(4) == run.checkpoints_dir / "step-4"


def test_last_metric_and_log_tail_read_only_the_end(run):
    run.append_metrics([TrainRecord(step=1, loss=3.0), EvalRecord(step=2, val_loss=2.0), TrainRecord(step=3)])
    with open(run.metrics_path, "a") as handle:
        handle.write('{"kind": "train", "step": 4, "lo')  # being written
    assert run.last_metric(TrainRecord).step == 3 and run.last_metric(EvalRecord).step == 2
    assert run.last_metric(records.EndEvent) is None
    run.log_path.write_text("".join(f"line {i}\n" for i in range(5000)))
    assert run.log_tail(100).startswith("line ") and run.log_tail(100).endswith("line 4999\n")


def test_a_profile_summary_of_any_version_reads_in_full(run):
    """profile/summary.json as core.engine.profiling wrote it before the typed record (a plain dict), a
    newer writer's keys (kept and written back), an older one's missing keys (defaults)."""
    assert run.read_profile_summary() is None  # not profiled
    before = {"steps": [2, 3], "total_ms": 12.5, "phases": {"forward + update": 7.5, "backward": 5.0},
              "top": [{"op_type": "Custom", "phase": "forward + update", "ms": 6.0, "share": 0.48, "calls": 2}],
              "files": ["vm_1_2_ascend_ms/ASCEND_PROFILER_OUTPUT/trace_view.json"], "note": "CPU kernels"}
    run.profile_dir.mkdir()
    run.profile_summary_path.write_text(json.dumps(before, indent=1))
    summary = run.read_profile_summary()
    assert summary.steps == [2, 3] and summary.phases == {"forward + update": 7.5, "backward": 5.0}
    assert summary.top == [records.ProfiledOperator(op_type="Custom", phase="forward + update", ms=6.0, share=0.48,
                                                   calls=2)]
    assert summary.to_json() == before and summary.extra == {}
    newer = {"steps": [1, 1], "top": [{"op_type": "MatMul", "device": "gpu"}], "ranks": 2,
             "phases": {"backward": "slow", "forward + update": 2}}
    atomic_write_json(run.profile_summary_path, newer)
    summary = run.read_profile_summary()
    assert summary.extra == {"ranks": 2} and summary.top[0].extra == {"device": "gpu"} and summary.top[0].ms == 0.0
    assert summary.phases == {"forward + update": 2.0}  # a value of the wrong type is left out
    assert (summary.total_ms, summary.files, summary.note) == (0.0, [], "")
    run.write_profile_summary(summary)
    on_disk = json.loads(run.profile_summary_path.read_text())
    assert on_disk["ranks"] == 2 and on_disk["top"][0]["device"] == "gpu"
    with pytest.raises(RunDirError, match=r"ProfileSummary.phases .* must be dict\[str, float\]"):
        records.ProfileSummary(phases={"backward": "slow"})
    run.profile_summary_path.write_text('{"steps": [1, ')  # being written by an older worker
    assert run.read_profile_summary() is None
