"""app.tabs.monitor_callbacks: ticks send only what changed; stop, early stopping, failure words."""
from __future__ import annotations

import os
import time

import pytest

from core.spec.config import Config
from core.run.records import Status
from core.run.rundir import RunDir
from core.spec.messages import Message

from app.tabs import monitor_callbacks as cb
from app.runs.run_status import failure_kind

from tests.app.test_metrics import evaluation, train
from tests.app.test_svg_chart import points


def make_run(console, run_id="20261129-101500_tiny_lora-r8_fp32_dp1", state="running", **config) -> RunDir:
    run = RunDir.create(console.runs_dir, run_id, Config().with_updates(config).to_yaml())
    if state != "queued":
        run.write_status(state="starting")
        run.write_status(state=state, step=0, total_steps=20, rank_count=1)
    return run


def test_first_tick_sends_charts_later_ticks_only_new_points(console):
    run = make_run(console)
    run.append_metrics([train(1, 3.0), evaluation(1, 2.0, 2.0)])
    session = cb.MonitorSession()
    first = cb.tick(session, run.run_id, console)
    assert first.run_id == run.run_id and first.run_choices == [run.run_id]
    assert {"loss", "val_loss", "val_ppl", "lr"} <= set(first.charts)
    assert "running" in first.state and first.active
    assert "best val_loss 2 at step 1" in first.es_status
    assert "patience left 3" in first.charts["val_loss"] and "patience left 3" in first.charts["val_ppl"]
    assert first.es_values == {"enabled": True, "monitor": "val_loss", "patience": 3, "min_delta": 0.0}
    second = cb.tick(session, run.run_id, console)
    assert second.charts == {} and second.log is None and second.es_values is None and second.downloads == {}
    run.append_metrics(train(2, 2.5))
    third = cb.tick(session, run.run_id, console)
    assert "loss" in third.charts and "val_loss" not in third.charts
    assert points(third.charts["loss"])["loss"] == {1: "3", 2: "2.5"}


def test_log_tail_is_sent_when_the_log_grows(console):
    run = make_run(console)
    session = cb.MonitorSession()
    run.log_path.write_text("hello\n")
    assert cb.tick(session, run.run_id, console).log == "hello\n"
    assert cb.tick(session, run.run_id, console).log is None
    with open(run.log_path, "a") as handle:
        handle.write("world\n")
    assert cb.tick(session, run.run_id, console).log.endswith("world\n")


def test_no_run_yet(console):
    result = cb.tick(cb.MonitorSession(), None, console)
    assert result.run_id is None and "unknown" in result.state and not result.active


def test_default_selection_prefers_a_running_run(console):
    make_run(console, "20261129-090000_a_lora-r8_fp32_dp1", state="running")
    done = make_run(console, "20261129-100000_b_lora-r8_fp32_dp1", state="running")
    done.write_status(state="finished")
    assert cb.tick(cb.MonitorSession(), None, console).run_id == "20261129-090000_a_lora-r8_fp32_dp1"


def rename_like_older_versions(run: RunDir, suffix: str) -> RunDir:
    """Until issue 20 a run's folder was renamed when it ended (results appended), leaving a
    relative symlink at the old name; such runs are still on users' disks."""
    target = run.path.parent / (run.run_id + suffix)
    os.rename(run.path, target)
    os.symlink(target.name, run.path)
    renamed = RunDir(target)
    renamed.write_status(run_id=target.name)
    return renamed


def test_a_run_renamed_by_an_older_version_is_followed_without_rereading(console):
    run = make_run(console)
    run.append_metrics(train(1, 3.0))
    session = cb.MonitorSession()
    cb.tick(session, run.run_id, console)
    charts = session.charts
    run.write_status(state="finished")
    renamed = rename_like_older_versions(run, "_ppl12.3_tps850")
    result = cb.tick(session, run.run_id, console)
    assert result.run_id == renamed.run_id and session.charts is charts
    assert result.run_choices == [renamed.run_id]


def test_a_run_with_no_points_yet_replaces_every_chart_of_the_previous_run(console):
    """Issue 20 bug 1: after run A, run B (no points yet) sent no chart, so A's curves stayed
    under B's badge for 6-10 s. Now switching runs sends every chart, empty ones included, and each
    names the run it draws."""
    a = make_run(console, "20261129-090000_a_lora-r8_fp32_dp1", state="running")
    a.append_metrics([train(1, 3.0), train(2, 2.0), evaluation(2, 1.9, 6.7)])
    session = cb.MonitorSession()
    first = cb.tick(session, a.run_id, console)
    assert set(first.charts) == set(cb.Y_TITLES) and points(first.charts["loss"])["loss"] == {1: "3", 2: "2"}
    assert all(f'data-run="{a.run_id}"' in svg for svg in first.charts.values())
    a.write_status(state="finished")
    b = make_run(console, "20261129-100000_b_lora-r8_fp32_dp1", state="starting")
    switched = cb.tick(session, b.run_id, console)
    assert switched.run_id == b.run_id and set(switched.charts) == set(cb.Y_TITLES)
    for name, svg in switched.charts.items():
        assert f'data-run="{b.run_id}"' in svg and 'data-points="0"' in svg, name
    assert cb.tick(session, b.run_id, console).charts == {}  # then only what changes, as before


def test_perplexity_is_on_a_log_axis_by_default(console):
    """Issue 20 bug 7: a base perplexity of 38,812 flattened every later point to 0 on a linear
    axis (the trained points 3.5 and 2.1 end up 0.007 px apart); on the default log axis they are
    ~9 px apart, and so are visibly a curve (0.22 of the 5 decades the axis spans)."""
    import re

    run = make_run(console)
    run.append_metrics([evaluation(0, 10.57, 38812.0), evaluation(10, 1.25, 3.5), evaluation(20, 0.74, 2.1)])

    def spread(svg: str) -> float:  # pixels between the trained points' dots (val ppl series)
        group = re.search(r'data-series="val ppl".*?</g></g>', svg, re.S).group(0)
        ys = [float(y) for y in re.findall(r'd="M[\d.]+,([\d.]+)a', group)]
        return max(ys[1:]) - min(ys[1:])

    default = cb.tick(cb.MonitorSession(), run.run_id, console).charts["val_ppl"]
    linear = cb.tick(cb.MonitorSession(), run.run_id, console, ppl_log_scale=False).charts["val_ppl"]
    assert "perplexity (log)" in default and "perplexity (log)" not in linear
    assert spread(linear) < 0.1 and spread(default) > 8.0


def test_log_scale_shows_log10_of_the_loss(console):
    run = make_run(console)
    run.append_metrics(train(1, 100.0))
    result = cb.tick(cb.MonitorSession(), run.run_id, console, log_scale=True)
    assert "loss (log)" in result.charts["loss"] and points(result.charts["loss"])["loss"] == {1: "100"}


def test_stop_buttons_go_through_the_job_manager(console, fake_launcher):
    run = make_run(console)
    assert "stopping" in cb.stop(console, run.run_id, graceful=True)
    console.jobs.wait_for_stops()
    assert cb.stop(console, run.run_id, graceful=False)
    console.jobs.wait_for_stops()
    assert fake_launcher.stopped == [(run.run_id, True), (run.run_id, False)]
    assert run.read_status().state == "stopped"
    assert "no run selected" in cb.stop(console, None, graceful=True)


def test_early_stopping_changes_reach_the_control_file(console):
    run = make_run(console)
    message = cb.apply_early_stopping(console, run.run_id, True, "val_ppl", 7.0, 0.01)
    assert "sent to the worker" in message
    control = run.read_control()
    assert control.early_stopping == {"enabled": True, "monitor": "val_ppl", "patience": 7, "min_delta": 0.01}
    assert cb.early_stopping_settings(run)["patience"] == 7
    assert "integer" in cb.apply_early_stopping(console, run.run_id, True, "val_loss", 0, 0.0)
    run.write_status(state="finished")
    assert "is over" in cb.apply_early_stopping(console, run.run_id, True, "val_loss", 3, 0.0)


@pytest.mark.parametrize("reason,lines,kind", [
    ("worker crashed: RuntimeError: Out of memory while allocating", [], "oom"),
    (Message("train.nonfinite_loss", step=12), [], "nonfinite"),
    (Message("data.at_line", file="data/x.jsonl", line=3,
             reason=Message("data.invalid_json", json_says="Expecting value", column=1)), [], "data"),
    (Message("data.fewer_samples_than_a_batch", count=3, batch=8, micro=8, accum=1, world=1), [], "data"),
    ("worker exited without a final status (crashed or killed); see train.log", ["Segmentation fault"], "crash"),
    ("something odd", [], "other"),
])
def test_failure_reasons_in_plain_words(reason, lines, kind):
    """Our own reasons by their ids (status.json's reason_message); a library's or the OS's words (an
    out-of-memory, a segmentation fault in the log) by pattern."""
    record = reason.to_json() if isinstance(reason, Message) else None
    assert failure_kind(Status(state="failed", reason=str(reason), reason_message=record, error_lines=lines)) == kind
    assert failure_kind(Status(state="stopped", reason=str(reason), reason_message=record)) is None
    if isinstance(reason, Message):  # the English alone (a run folder written before the ids) is not read back
        assert failure_kind(Status(state="failed", reason=str(reason), error_lines=lines)) == "other"


def test_failure_words_name_the_kind(console):
    run = make_run(console)
    run.write_status(state="failed", reason=Message("train.nonfinite_loss", step=3))
    result = cb.tick(cb.MonitorSession(), run.run_id, console)
    assert "NaN" in result.failure and "non-finite loss at step 3" in result.failure and not result.active


def test_downloads_follow_the_checkpoints(console):
    run = make_run(console)
    session = cb.MonitorSession()
    first = cb.tick(session, run.run_id, console)
    assert first.downloads["peft"] == ("PEFT adapter (zip) · no checkpoint yet", None, False)
    (run.checkpoints_dir / "step-4").mkdir()
    os.symlink("step-4", run.checkpoints_dir / "best")
    label, path, clickable = cb.tick(session, run.run_id, console).downloads["peft"]
    assert label.startswith("prepare") and "best step 4" in label and path is None and clickable
    zip_path = run.export_dir / "best-step-4-peft.zip"
    zip_path.write_bytes(b"PK")
    label, path, clickable = cb.tick(session, run.run_id, console).downloads["peft"]
    assert label.startswith("⬇") and path == str(zip_path)


def test_a_click_downloaded_only_what_the_button_held(console, tmp_path):
    """The worker's zip can exist before the controls update that gives it to the button reaches
    the page: that click sent no file and downloaded nothing, so the page must be sent it now."""
    run = make_run(console)
    (run.checkpoints_dir / "step-4").mkdir()
    os.symlink("step-4", run.checkpoints_dir / "best")
    (run.export_dir / "best-step-4-peft.zip").write_bytes(b"PK")
    assert not cb.download_ready(console, run.run_id, "peft", None)
    # Gradio hands the clicked button's file over from its cache folder: the name is what counts
    assert cb.download_ready(console, run.run_id, "peft", str(tmp_path / "cache" / "best-step-4-peft.zip"))
    (run.checkpoints_dir / "step-8").mkdir()
    os.replace(run.checkpoints_dir / "best", run.checkpoints_dir / "old")
    os.symlink("step-8", run.checkpoints_dir / "best")
    (run.export_dir / "best-step-8-peft.zip").write_bytes(b"PK")
    assert not cb.download_ready(console, run.run_id, "peft", "best-step-4-peft.zip")  # an older best


def test_elapsed_and_eta(console):
    run = make_run(console)
    run.append_metrics([train(1, 3.0, time=time.time() - 10), train(5, 2.0, time=100.0), train(10, 1.0, time=110.0)])
    run.write_status(step=10, total_steps=20)
    result = cb.tick(cb.MonitorSession(), run.run_id, console)
    assert "10 / 20" in result.status and "ETA</b> 20s" in result.status


def test_a_typed_run_id_cannot_leave_the_runs_folder(console, tmp_path):
    outside = RunDir.create(tmp_path / "elsewhere", "secret", "method: lora\n")
    outside.append_metrics(train(1, 3.0))
    for typed in ("../elsewhere/secret", str(outside.path), ".."):
        result = cb.tick(cb.MonitorSession(), typed, console)
        assert result.run_id is None and result.charts == {}


def test_each_session_state_has_its_own_lock():
    from app.auth.sessions import session_lock

    first, second = cb.MonitorSession(), cb.MonitorSession()
    assert session_lock(first) is session_lock(first)
    assert session_lock(first) is not session_lock(second)


def test_unchanged_outputs_are_not_sent_again():
    from app.tabs.monitor_callbacks import MonitorSession, changed_only
    session = MonitorSession()
    assert changed_only(session, state="running", status="step 1") == {"state": True, "status": True}
    assert changed_only(session, state="running", status="step 2") == {"state": False, "status": True}
    assert changed_only(session, state="stopped", status="step 2") == {"state": True, "status": False}
    assert changed_only(MonitorSession(), state="stopped") == {"state": True}  # a new tab gets everything


TOKEN = "page-token-1"


def poll(pages, console, **request):
    return cb.feed(pages, {"token": TOKEN, "run": "", "lang": "en", "log_scale": False, "full": False, **request},
                   console)


def test_the_feed_sends_each_slot_once_and_new_points_only(console):
    run = make_run(console)
    run.append_metrics([train(1, 3.0), evaluation(1, 2.0, 2.0)])
    run.log_path.write_text("hello <world>\n")
    pages = cb.FeedPages()
    first = poll(pages, console, run=run.run_id)
    assert first["run"] == run.run_id and first["interval"] == cb.ACTIVE_POLL_S
    assert {"state", "status", "failure", "es_status", "log", "loss", "val_loss", "val_ppl"} <= set(first["slots"])
    assert first["slots"]["log"] == "hello &lt;world&gt;\n"  # the log is text, escaped for the page
    assert "running" in first["slots"]["state"]
    second = poll(pages, console, run=run.run_id)
    assert second["slots"] == {} and second["controls"] == first["controls"]
    run.append_metrics(train(2, 2.5))
    third = poll(pages, console, run=run.run_id)
    assert "loss" in third["slots"] and not {"val_loss", "state", "log"} & set(third["slots"])
    assert points(third["slots"]["loss"])["loss"] == {1: "3", 2: "2.5"}
    full = poll(pages, console, run=run.run_id, full=True)  # a page whose slots Gradio re-rendered
    assert set(first["slots"]) <= set(full["slots"]) and "loss_scale" in full["slots"]
    log_scale = poll(pages, console, run=run.run_id, log_scale=True)
    assert set(log_scale["slots"]) == {"loss", "val_loss"} and "loss (log)" in log_scale["slots"]["loss"]
    linear_ppl = poll(pages, console, run=run.run_id, log_scale=True, ppl_log_scale=False)
    assert set(linear_ppl["slots"]) == {"val_ppl"} and "perplexity (log)" not in linear_ppl["slots"]["val_ppl"]


def test_the_feed_moves_the_controls_counter_when_the_controls_change(console):
    run = make_run(console)
    pages = cb.FeedPages()
    first = poll(pages, console)  # an empty picker: the feed shows the newest running run
    assert first["run"] == run.run_id
    assert poll(pages, console)["controls"] == first["controls"]
    run.write_status(state="finished")
    over = poll(pages, console)
    assert over["controls"] == first["controls"] + 1 and over["interval"] == cb.IDLE_POLL_S
    assert "finished" in over["slots"]["state"]
    chinese = poll(pages, console, lang="zh")
    assert set(chinese["slots"]) >= {"state", "status"} and "已完成" in chinese["slots"]["state"]
    assert chinese["controls"] == over["controls"] + 1  # the download buttons' labels are translated by a sync


def test_the_feed_refuses_a_bad_request_and_forgets_old_pages(console):
    make_run(console)
    pages = cb.FeedPages(max_pages=2)
    for bad in (None, [], {"token": "short"}, {"token": "../../etc/passwd"}, {"run": "x"}):
        assert "error" in cb.feed(pages, bad, console)
    assert len(pages) == 0
    for n in range(3):
        cb.feed(pages, {"token": f"page-token-{n}"}, console)
    assert len(pages) == 2
    typed = poll(pages, console, run="../elsewhere", lang="<script>")  # an invalid run or language falls back
    assert typed["run"] == "20261129-101500_tiny_lora-r8_fp32_dp1"


def test_controls_change_only_when_the_run_or_its_state_changes(console):
    run = make_run(console)
    session = cb.MonitorSession()
    first = cb.controls(session, None, console)
    assert first.run_id == run.run_id and first.run_choices == [run.run_id] and first.active is True
    assert set(first.downloads) == {"peft", "merged", "mindspore", "gguf-f16", "gguf-q4_k_m", "ollama", "gguf-lora"}
    assert first.es_values["patience"] == 3
    again = cb.controls(session, run.run_id, console)
    assert (again.run_choices, again.active, again.downloads, again.es_values) == (None, None, {}, None)
    run.write_status(state="stopped")
    stopped = cb.controls(session, run.run_id, console)
    assert stopped.active is False and stopped.run_choices is None
    other = make_run(console, "20261129-120000_tiny_lora-r8_fp32_dp1", state="running")
    picked = cb.controls(session, other.run_id, console)
    assert picked.run_id == other.run_id and picked.run_choices == [other.run_id, run.run_id]
    assert picked.active is True and picked.es_values is not None and set(picked.downloads) == set(first.downloads)


def test_a_sync_never_sends_back_the_run_it_was_asked_for(console):
    """A sync answers after it was asked: sending its `wanted` back as the picker's value would undo a
    pick made meanwhile (the Slurm browser test's Monitor went back to the previous run under load)."""
    older = make_run(console)
    session = cb.MonitorSession()
    assert cb.picker_change(cb.controls(session, None, console), None) == {
        "choices": [older.run_id], "value": older.run_id}  # an empty pick gets the default
    newer = make_run(console, "20261129-120000_tiny_lora-r8_fp32_dp1")
    stale = cb.controls(session, older.run_id, console)  # asked for the old run; the list grew meanwhile
    assert cb.picker_change(stale, older.run_id) == {"choices": [newer.run_id, older.run_id]}
    assert cb.picker_change(cb.controls(session, older.run_id, console), older.run_id) == {}
    typed = cb.controls(session, "../elsewhere", console)  # a name the server refuses is replaced
    assert cb.picker_change(typed, "../elsewhere")["value"] == older.run_id


def test_every_chart_that_changed_is_sent_in_view_or_not(console):
    """Issue 31 item 3: the lower charts are sent with the loss, whatever the page says is off screen
    (an older page's "offscreen" list no longer holds them back)."""
    run = make_run(console)
    run.append_metrics(train(1, 3.0))
    pages = cb.FeedPages()
    first = poll(pages, console, run=run.run_id, offscreen=["lr", "memory"])
    assert {"loss", "lr", "memory", "grad_norm", "loss_scale"} <= set(first["slots"])
    run.append_metrics(train(2, 2.0))
    second = poll(pages, console, run=run.run_id, offscreen=["lr"])
    assert points(second["slots"]["lr"])["learning rate"].keys() == {1, 2}


def test_after_stop_now_the_step_is_the_newest_checkpoints(console):
    """Issue 20 bug 9: Stop now killed the worker after it saved step-31 but before its next status
    line, and the Monitor and the Runs table said step 30."""
    from app.tabs import runs_callbacks

    run = make_run(console)
    run.write_status(step=30, total_steps=40)
    for step in (30, 31):
        (run.checkpoints_dir / f"step-{step}").mkdir(parents=True)
    run.write_status(state="stopped", reason="stopped now by user")
    tick = cb.tick(cb.MonitorSession(), run.run_id, console)
    assert "31 / 40" in tick.status and "30 / 40" not in tick.status
    assert runs_callbacks.runs_table(console).iloc[0]["step"] == "31/40"
    assert RunDir(run.path).read_status().step == 30  # as the worker wrote it (a verdict the launcher writes
    # records the checkpoint's step: tests/core/test_launcher.py)


def test_pages_on_one_run_share_its_chart_data_and_each_change_is_drawn_once(console, monkeypatch):
    """bench/soak.py: with ten pages on one run, each page held its own copy of every point and
    redrew every chart per new point; the console's memory grew by megabytes a minute."""
    run = make_run(console)
    run.append_metrics(train(1, 3.0))
    pages, tokens = cb.FeedPages(), [f"page-token-{n}" for n in range(10)]
    for token in tokens:
        cb.feed(pages, {"token": token, "run": run.run_id}, console)
    assert len({id(pages.get(token).monitor.charts) for token in tokens}) == 1 and len(console.charts) == 1
    drawn, draw = [], cb.line_chart

    def counted(frame, *args, **kwargs):
        drawn.append(len(frame))
        return draw(frame, *args, **kwargs)

    monkeypatch.setattr(cb, "line_chart", counted)
    run.append_metrics(train(2, 2.5))
    replies = [cb.feed(pages, {"token": token, "run": run.run_id}, console) for token in tokens]
    train_charts = {"loss", "memory", "tokens_per_s", "lr", "grad_norm", "loss_scale"}
    assert all(set(reply["slots"]) >= train_charts for reply in replies)
    assert all(points(reply["slots"]["loss"])["loss"] == {1: "3", 2: "2.5"} for reply in replies)
    assert len(drawn) == len(train_charts)  # once for the ten pages, not ten times
    shared = pages.get(tokens[0]).monitor.charts
    assert len(shared.frames["loss"]) == 4 and len(shared.drawn) == len(cb.Y_TITLES)  # old drawings dropped


def test_a_page_gets_the_points_another_page_read_first(console):
    run = make_run(console)
    run.append_metrics(train(1, 3.0))
    a, b = cb.MonitorSession(), cb.MonitorSession()
    cb.tick(a, run.run_id, console), cb.tick(b, run.run_id, console)
    run.append_metrics(train(2, 2.5))
    assert "loss" in cb.tick(b, run.run_id, console).charts  # b reads the new line into the shared charts
    late = cb.tick(a, run.run_id, console)
    assert points(late.charts["loss"])["loss"] == {1: "3", 2: "2.5"}
    assert cb.tick(a, run.run_id, console).charts == {} and cb.tick(b, run.run_id, console).charts == {}



def test_a_page_opens_the_training_run_else_the_newest_with_points(console):
    """Issue 31 item 2: neither a queued run nor one cancelled before it started is opened."""
    drawn = make_run(console, "20261129-100000_tiny_lora-r8_fp32_dp1", state="running")
    drawn.append_metrics(train(1, 3.0))
    drawn.write_status(state="finished")
    cancelled = make_run(console, "20261129-110000_tiny_lora-r8_fp32_dp1", state="queued")
    cancelled.write_status(state="stopped", reason="cancelled in the queue")
    make_run(console, "20261129-120000_tiny_lora-r8_fp32_dp1", state="queued")
    assert cb.tick(cb.MonitorSession(), None, console).run_id == drawn.run_id
    training = make_run(console, "20261129-090000_tiny_lora-r8_fp32_dp1", state="running")  # older, but training
    assert cb.tick(cb.MonitorSession(), None, console).run_id == training.run_id
