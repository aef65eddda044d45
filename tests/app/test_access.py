"""app.auth.access through the callbacks: with logins, a run belongs to the user who started it; another
user's run does not exist for them in any callback; an admin sees all; without logins, one user
sees everything. No side effect happens on a read path (the feed never starts an export)."""
from __future__ import annotations

import dataclasses
import threading

import pytest

from core.spec.config import Config

from app.tabs import monitor_callbacks as monitor
from app.tabs import runs_callbacks as runs
from app.tabs import try_callbacks as try_cb
from app.auth.access import NOBODY, SINGLE_USER, Viewer, admins, viewer_for
from app.context import Console
from app.runs.exports import BackgroundExports
from app.runs.jobs import JobError
from app.settings import SettingsError, check_safe, parse_settings

from tests.app.test_monitor_callbacks import make_run

ALICE, BOB, CAROL = Viewer("alice", False), Viewer("bob", False), Viewer("carol", True)


@pytest.fixture
def shared(console: Console) -> Console:
    """The test console with three logins, carol the admin."""
    settings = dataclasses.replace(console.settings, auth=(("alice", "a"), ("bob", "b"), ("carol", "c")),
                                   admins=("carol",))
    return dataclasses.replace(console, settings=settings)


def _owned(console, name: str, owner: str | None, state: str = "finished"):
    run = make_run(console, f"20261201-00000{len(list(console.runs_dir.glob('*')))}_{name}", state="running")
    if state != "running":
        run.write_status(state=state)
    if owner:
        run.write_status(owner=owner)
    (run.checkpoints_dir / "step-2").mkdir()
    (run.checkpoints_dir / "last").symlink_to("step-2")
    return run


def test_viewers_from_requests(shared, console):
    class Request:
        def __init__(self, username):
            self.username = username
    assert viewer_for(console.settings, Request("anyone")) == SINGLE_USER  # no logins: one user
    assert viewer_for(shared.settings, Request("bob")) == BOB
    assert viewer_for(shared.settings, Request("carol")) == CAROL
    assert viewer_for(shared.settings, Request(None)) == NOBODY
    assert viewer_for(shared.settings, None) == NOBODY
    only = dataclasses.replace(console.settings, auth=(("solo", "pw"),))
    assert admins(only) == {"solo"}  # a single login has no one to be kept apart from


def test_a_started_run_records_its_owner_and_only_they_see_it(shared, fake_launcher):
    config = Config().with_updates({"run.runs_dir": str(shared.runs_dir)})
    result = shared.jobs.start(config, owner="alice")
    assert shared.jobs.run_dir(result.run_id).read_status().owner == "alice"
    assert [r.run_id for r in shared.jobs.runs(ALICE)] == [result.run_id]
    assert shared.jobs.runs(BOB) == [] and [r.run_id for r in shared.jobs.runs(CAROL)] == [result.run_id]
    # the same form submitted by bob is bob's own run, not alice's repeated
    assert shared.jobs.start(config, owner="bob").run_id != result.run_id


def test_another_users_run_does_not_exist_in_any_callback(shared, fake_launcher):
    alice_run = _owned(shared, "alice", "alice")
    shell_run = _owned(shared, "shell", None)
    live = _owned(shared, "alice-live", "alice", state="running")
    missing = f"no run {alice_run.run_id} in {shared.runs_dir}"
    with pytest.raises(JobError, match=missing):
        shared.jobs.run_dir(alice_run.run_id, BOB)
    with pytest.raises(JobError, match="no run"):
        shared.jobs.resume(alice_run.run_id, BOB)
    assert runs.resume(shared, [alice_run.run_id], BOB) == (None, f"⚠ {missing}")
    assert runs.delete(shared, [alice_run.run_id], BOB) == f"⚠ {missing}" and alice_run.path.is_dir()
    assert monitor.stop(shared, live.run_id, False, BOB).startswith("⚠ no run") and not fake_launcher.stopped
    assert monitor.apply_early_stopping(shared, live.run_id, True, "val_loss", 2, 0.0, BOB).startswith("⚠ no run")
    assert live.read_control().seq == 0
    _, note = monitor.prepare_download(shared, alice_run.run_id, "peft", "en", BOB)
    assert note == f"⚠ {missing}"
    assert runs.runs_table(shared, BOB).empty and runs.config_diff(shared, [alice_run.run_id], BOB)[0] == ["setting"]
    assert runs.OverlayCache().frame(shared, [alice_run.run_id], "val ppl", BOB).empty
    assert try_cb.checkpoint_choices(shared, BOB) == []
    _, tuned = try_cb.compare(shared, None, str(alice_run.checkpoints_dir / "last"), "hi", False, 4,
                              runner=lambda *a, **k: pytest.fail("must not run"), viewer=BOB)
    assert tuned.error == f"{alice_run.checkpoints_dir / 'last'}: no such checkpoint folder"
    assert monitor.run_ids(shared, BOB) == []
    assert set(monitor.run_ids(shared, ALICE)) == {alice_run.run_id, live.run_id}
    assert set(monitor.run_ids(shared, CAROL)) == {alice_run.run_id, live.run_id, shell_run.run_id}
    # bob's page asking for alice's run is shown none (his own default: he has none)
    session = monitor.MonitorSession(viewer=BOB)
    assert monitor.tick(session, alice_run.run_id, shared).run_id is None
    assert monitor.controls(monitor.MonitorSession(), alice_run.run_id, shared, viewer=BOB).run_id is None
    assert runs.folder_key(shared, BOB) != runs.folder_key(shared, ALICE)


def test_the_owner_and_an_admin_act_on_the_run(shared, fake_launcher):
    live = _owned(shared, "alice-live", "alice", state="running")
    assert monitor.stop(shared, live.run_id, True, ALICE) == f"{live.run_id}: stopping (saving a checkpoint first)"
    shared.jobs.wait_for_stops()
    assert fake_launcher.stopped == [(live.run_id, True)]
    done = _owned(shared, "alice-done", "alice")
    assert runs.delete(shared, [done.run_id], CAROL).startswith(f"deleted {done.run_id}")


def test_the_feed_starts_no_export_the_run_end_does(console, tmp_path):
    calls = []
    recorded = threading.Event()

    def runner(argv, **kwargs):
        calls.append(argv)
        recorded.set()
        raise OSError("recorded only")

    console = dataclasses.replace(console, exports=BackgroundExports(runner=runner))
    run = _owned(console, "done", None)
    pages = monitor.FeedPages()
    for _ in range(3):
        reply = monitor.feed(pages, {"token": "readonly001", "run": run.run_id}, console)
        assert reply["run"] == run.run_id
    assert calls == []  # polling a finished LoRA run's page starts nothing
    from app.runs.exports import prepare_adapter
    prepare_adapter(console.exports, run.path, console.runs_dir)  # what the job manager does at the end
    assert recorded.wait(10) and calls[0][1:4] == ["-m", "core.export", "--run"]


def test_admin_must_be_a_login_and_share_needs_a_login(monkeypatch):
    with pytest.raises(SettingsError, match="--admin mallory: not one of the logins"):
        parse_settings(["--auth", "ann:pw", "--admin", "mallory"])
    monkeypatch.setenv("GRADIO_SHARE", "True")
    with pytest.raises(SettingsError, match="share link"):
        parse_settings([])
    assert parse_settings(["--auth", "ann:pw"]).share  # with a login, Gradio may open it
    monkeypatch.setenv("GRADIO_SHARE", "false")
    settings = parse_settings([])
    assert not settings.share
    check_safe(settings)
    from app.server import launch_options
    options = launch_options(settings)
    assert options["share"] is False and options["enable_monitoring"] is False
    monkeypatch.setenv("GRADIO_SHARE", "True")  # set after the settings were made: still refused
    with pytest.raises(SettingsError, match="share link"):
        launch_options(settings)


def test_the_console_starts_when_its_self_check_times_out(tmp_path, monkeypatch):
    """Gradio's launch() HEADs its own URL once (3 s timeout) and used to exit when that timed out
    (a restart under load); the console skips the check. Here the check always fails."""
    import gradio as gr
    import urllib.request
    from gradio import networking
    from app.server import launch_options
    from core.run.launcher import free_port
    monkeypatch.setattr(networking, "url_ok", lambda url: False)
    settings = parse_settings(["--runs-dir", str(tmp_path / "runs"), "--port", str(free_port())])
    with gr.Blocks() as demo:
        gr.Markdown("up")
    demo.launch(**launch_options(settings), prevent_thread_lock=True)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{settings.port}/config", timeout=30) as response:
            assert response.status == 200
    finally:
        demo.close()
