"""The console over real HTTP: no share link or /monitoring, cross-origin requests refused, and with
logins each user reaches only their own runs (files, the live feed, Gradio events); an admin
reaches all. Two real `python -m app` servers (one with logins, one without), driven with urllib."""
from __future__ import annotations

import http.cookiejar
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from core.run.launcher import REPO_ROOT, free_port
from core.run.rundir import RunDir

pytestmark = pytest.mark.slow
START_TIMEOUT_S = 180
USERS = {"alice": "alice-pw", "bob": "bob-pw", "carol": "carol-pw"}


@dataclass
class Server:
    url: str
    process: subprocess.Popen
    log: Path
    runs: dict[str, RunDir] = field(default_factory=dict)
    _config: dict | None = None

    def config(self, client: "Client") -> dict:
        if self._config is None:
            self._config = json.loads(client.open("/config").read())
        return self._config

    def component(self, client: "Client", elem_id: str) -> int:
        return next(c["id"] for c in self.config(client)["components"]
                    if c.get("props", {}).get("elem_id") == elem_id)

    def dependency(self, client: "Client", elem_id: str, event: str = "click") -> dict:
        target = self.component(client, elem_id)
        return next(d for d in self.config(client)["dependencies"]
                    if any(t[0] == target and t[1] == event for t in d["targets"]))


class Client:
    """One browser's worth of cookies."""

    def __init__(self, server: Server, user: str | None = None):
        self.server = server
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        if user:
            form = urllib.parse.urlencode({"username": user, "password": USERS[user]}).encode()
            assert self.opener.open(server.url + "/login", data=form).status == 200

    def open(self, path: str, data: bytes | None = None, headers: dict | None = None):
        return self.opener.open(urllib.request.Request(self.server.url + path, data=data, headers=headers or {}),
                                timeout=60)

    def status(self, path: str, data: bytes | None = None, headers: dict | None = None) -> tuple[int, bytes]:
        try:
            with self.open(path, data, headers) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as err:
            return err.code, err.read()

    def server_function(self, elem_id: str, name: str, data, headers: dict | None = None,
                        content_type: str = "application/json") -> tuple[int, object]:
        body = json.dumps({"session_hash": "sess" + name + "0001", "component_id": self.server.component(self, elem_id),
                           "fn_name": name, "data": data}).encode()
        code, raw = self.status("/gradio_api/component_server", body, {"Content-Type": content_type, **(headers or {})})
        return code, json.loads(raw)

    def event(self, elem_id: str, data: list, event: str = "click") -> list | str:
        """Run a Gradio event as the page would (queue/join, then read the stream to its end);
        the outputs, or the error text when Gradio refused the inputs."""
        dep = self.server.dependency(self, elem_id, event)
        session = f"s{os.urandom(6).hex()}"
        body = json.dumps({"data": data, "fn_index": dep["id"], "session_hash": session, "event_data": None,
                           "trigger_id": dep["targets"][0][0]}).encode()
        self.open("/gradio_api/queue/join", body, {"Content-Type": "application/json"}).read()
        with self.open(f"/gradio_api/queue/data?session_hash={session}") as stream:
            for line in stream:
                if line.startswith(b"data:"):
                    message = json.loads(line[5:])
                    if message.get("msg") == "process_completed":
                        if not message.get("success", True):
                            return str(message["output"].get("error"))
                        return message["output"]["data"]
        raise AssertionError(f"event on {elem_id} never completed")


def _make_runs(runs_dir: Path) -> dict[str, RunDir]:
    runs = {}
    for name, owner in (("alice", "alice"), ("bob", "bob"), ("shell", None)):
        run = RunDir.create(runs_dir, f"20261201-10000{len(runs)}_{name}-run", "method: lora\n")
        for state in ("starting", "running", "finished"):
            run.write_status(state=state, **({"owner": owner} if owner else {}))
        run.log_path.write_text(f"{name} secret log line\n", encoding="utf-8")
        (run.checkpoints_dir / "step-4").mkdir()
        (run.checkpoints_dir / "step-4" / "trainer_state.json").write_text('{"step": 4}')
        (run.export_dir / "best-step-4-peft.zip").write_bytes(b"PK zip of " + name.encode())
        runs[name] = run
    # a run renamed when it ended leaves a link under its old name
    os.symlink(runs["alice"].path.name, runs_dir / "20261201-000000_alice-old-name")
    return runs


def _start(tmp_path: Path, args: list[str]) -> Server:
    runs_dir = tmp_path / "runs"
    runs = _make_runs(runs_dir)
    port = free_port()
    log = tmp_path / "console.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "app", "--runs-dir", str(runs_dir), "--port", str(port),
         "--models-dir", str(REPO_ROOT / "models"), "--data-dir", str(REPO_ROOT / "data"), *args],
        cwd=REPO_ROOT, stdout=open(log, "wb"), stderr=subprocess.STDOUT, env={**os.environ, "GRADIO_ANALYTICS_ENABLED": "False"})
    server = Server(f"http://127.0.0.1:{port}", process, log, runs)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"console exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            urllib.request.urlopen(server.url + "/gradio_api/login_check", timeout=2)
            return server
        except urllib.error.HTTPError:
            return server  # 401 without a login: it is up
        except (urllib.error.URLError, OSError):
            time.sleep(0.3)
    process.kill()
    pytest.fail(f"console did not start within {START_TIMEOUT_S} s:\n{log.read_text()[-3000:]}")


def _stop(server: Server) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()


@pytest.fixture(scope="module")
def multi(tmp_path_factory) -> Server:
    server = _start(tmp_path_factory.mktemp("multi"),
                    [arg for user, pw in USERS.items() for arg in ("--auth", f"{user}:{pw}")] + ["--admin", "carol"])
    yield server
    _stop(server)


@pytest.fixture(scope="module")
def single(tmp_path_factory) -> Server:
    server = _start(tmp_path_factory.mktemp("single"), [])
    yield server
    _stop(server)


# ---- share links and monitoring ---------------------------------------------------------------

def test_share_link_from_the_environment_is_refused_without_a_login(tmp_path):
    began = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "app", "--runs-dir", str(tmp_path / "runs")], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=120, env={**os.environ, "GRADIO_SHARE": "True"})
    assert result.returncode == 2, result.stdout + result.stderr
    assert "refusing to open a public share link (GRADIO_SHARE=True) without a login" in result.stderr
    assert time.monotonic() - began < 60  # refused before Gradio is even imported


@pytest.mark.parametrize("path", ["/monitoring", "/monitoring/summary"])
def test_monitoring_endpoints_are_off(single, multi, path):
    for client in (Client(single), Client(multi, "carol")):
        code, body = client.status(path)
        assert code == 403 and b"Monitoring is not enabled" in body


# ---- origins ------------------------------------------------------------------------------

def test_cross_origin_text_plain_post_is_refused_before_it_runs(single):
    client = Client(single)
    run = single.runs["alice"].run_id
    request = {"token": "crossorigin01", "run": run}
    for origin in ("http://evil.example", "null", "http://localhost:1", single.url.replace("127.0.0.1", "localhost")):
        code, body = client.server_function("run-state", "feed", request, {"Origin": origin}, "text/plain")
        assert code == 403 and "cross-origin request" in body["error"], (origin, body)
    code, body = client.server_function("run-state", "feed", request, {"Origin": single.url}, "text/plain")
    assert code == 200 and body["run"] == run


def test_cross_origin_reads_and_rebinding_hosts_are_refused(single):
    client = Client(single)
    log = single.runs["alice"].log_path
    assert client.status(f"/gradio_api/file={log}")[0] == 200
    code, body = client.status(f"/gradio_api/file={log}", headers={"Origin": "http://localhost:3000"})
    assert code == 403 and b"secret" not in body
    port = urllib.parse.urlsplit(single.url).port
    code, body = client.status("/config", headers={"Host": f"attacker.example:{port}"})
    assert code == 403 and b"not this console" in body


# ---- several users --------------------------------------------------------------------------

def test_each_user_reads_only_their_own_run_files(multi):
    alice, bob, carol = (Client(multi, u) for u in ("alice", "bob", "carol"))
    runs = multi.runs
    files = {name: [run.log_path, run.checkpoints_dir / "step-4" / "trainer_state.json",
                    run.export_dir / "best-step-4-peft.zip", run.status_path] for name, run in runs.items()}
    files["alice"].append(multi.runs["alice"].path.parent / "20261201-000000_alice-old-name" / "train.log")
    expected = {"alice": {"alice"}, "bob": {"bob"}, "carol": {"alice", "bob", "shell"}}
    for user, client in (("alice", alice), ("bob", bob), ("carol", carol)):
        for owner, paths in files.items():
            for path in paths:
                code, body = client.status(f"/gradio_api/file={path}")
                if owner in expected[user]:
                    assert code == 200, (user, path, code)
                else:
                    assert code == 404 and b"secret" not in body and b"zip of" not in body, (user, path, code)


def test_the_feed_shows_another_users_run_to_no_one(multi):
    alice_run = multi.runs["alice"].run_id
    for user, shown in (("alice", alice_run), ("bob", multi.runs["bob"].run_id), ("carol", alice_run)):
        code, reply = Client(multi, user).server_function("run-state", "feed", {"token": f"feed{user}0001", "run": alice_run})
        assert code == 200 and reply["run"] == shown, (user, reply)
        assert ("alice secret" in json.dumps(reply)) == (shown == alice_run)


def test_events_list_stop_delete_only_own_runs(multi):
    alice_run, bob_run = multi.runs["alice"].run_id, multi.runs["bob"].run_id
    bob = Client(multi, "bob")
    table, select, _, _ = bob.event("runs-refresh", [None, [], "val ppl", False, False, "en"])
    # the table comes as an update: its value and the column widths that fit it
    assert [row[0] for row in table["value"]["data"]] == [bob_run]
    assert [c[0] for c in select["choices"]] == [bob_run]
    carol_table = Client(multi, "carol").event("runs-refresh", [None, [], "val ppl", False, False, "en"])[0]
    assert {row[0] for row in carol_table["value"]["data"]} == {r.run_id for r in multi.runs.values()}
    # stop / resume / delete / download of alice's run, as bob: refused as if it did not exist
    (message,) = bob.event("stop-now-button", [alice_run, "en"])
    assert message == f"⚠ no run {alice_run} in {multi.runs['alice'].path.parent}"
    # the run checkboxes only offer bob's runs: Gradio itself refuses alice's id as a value
    for button in ("resume-button", "delete-button", "runs-open"):
        refused = bob.event(button, [[alice_run], "en"])  # the selection, the language
        assert refused == f"Value: {alice_run!r} (type: <class 'str'>) is not in the list of choices: []", refused
    _, note, _ = bob.event("download-adapter", [alice_run, "en", None])  # run, language, the button's file
    assert f"no run {alice_run}" in note
    status = multi.runs["alice"].read_status()
    assert status.state == "finished" and multi.runs["alice"].path.is_dir()
    assert multi.runs["alice"].read_control().stop is None
