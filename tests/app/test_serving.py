"""The Monitor tab's Serve action (issue 39): a finished run's best checkpoint as an OpenAI-compatible
endpoint (`python -m core.serve` in a process of its own, app/runs/serving.py), on 127.0.0.1 only."""
from __future__ import annotations

import json
import os

import pytest

import app.tabs.monitor_callbacks as cb
from app.runs.serving import Endpoints, serve_argv
from core.run.rundir import RunDir
from core.spec.config import Config
from core.spec.errors import RECORD_MARK, RECORDS_ENV, SERVING_MARK, record_of
from core.spec.messages import Message

from tests import skips


class FakeProcess:
    """What Popen returns, for a child that prints `lines` and then runs (or has exited with `code`)."""

    def __init__(self, stdout, lines: list[str], code: int | None = None):
        stdout.write("".join(line + "\n" for line in lines))
        stdout.flush()
        self.pid, self.code = 999999, code

    def poll(self):
        return self.code


def fake_popen(lines, code=None, calls=None):
    def popen(argv, stdout, **kwargs):
        if calls is not None:
            calls.append((argv, kwargs))
        return FakeProcess(stdout, lines, code)
    return popen


def finished_run(console, run_id="20261205-000000_tiny_lora-r8_fp32_dp1", state="finished") -> RunDir:
    run = RunDir.create(console.runs_dir, run_id, Config().to_yaml())
    run.write_status(state="starting")
    run.write_status(state="running")
    run.write_status(state=state)
    (run.checkpoints_dir / "step-4").mkdir()
    os.symlink("step-4", run.checkpoints_dir / "best")
    return run


def test_serve_starts_one_endpoint_on_loopback_and_says_where(console):
    calls = []
    english = "serving demo at http://127.0.0.1:40123/v1 (OpenAI-compatible; Ctrl-C stops)"
    where = SERVING_MARK + json.dumps({"name": "demo", "url": "http://127.0.0.1:40123/v1"})
    console.endpoints = Endpoints(fake_popen([english, where], calls=calls))
    run = finished_run(console)
    said = cb.serve(console, run.run_id)
    assert said.key == "act.serving" and "http://127.0.0.1:40123/v1 (model 'demo')" in said
    argv, kwargs = calls[0]
    assert kwargs["env"][RECORDS_ENV] == "1"  # core.serve prints its address as a record for the console
    assert argv[1:4] == ["-m", "core.serve", "--checkpoint"] and argv[4] == str(run.checkpoint("best"))
    assert argv[argv.index("--host") + 1] == "127.0.0.1" and kwargs["start_new_session"]
    assert cb.serve(console, run.run_id).key == "act.serving" and len(calls) == 1  # the running one
    assert cb.stop_serving(console, run.run_id).key == "act.serve_stopped"
    assert cb.stop_serving(console, run.run_id).key == "act.not_serving"


def test_a_run_not_over_is_not_served_and_a_failed_start_says_why(console):
    running = finished_run(console, state="stopping")
    assert cb.serve(console, running.run_id).key == "act.serve_not_over"
    refused = Message("serve.no_login_public", host="0.0.0.0")
    console.endpoints = Endpoints(fake_popen([f"error: {refused}", RECORD_MARK + json.dumps(record_of(refused))],
                                             code=2))
    run = finished_run(console, run_id="20261205-000001_tiny_lora-r8_fp32_dp1")
    said = cb.serve(console, run.run_id)
    assert said.key == "act.serve_failed" and said.params["problem"].key == "serve.no_login_public"
    assert "without a login" in said and "登录" in said.in_lang("zh")  # said by its id in 中文
    assert console.endpoints.get(run.path) is None
    console.endpoints = Endpoints(fake_popen(["error: runs/x/checkpoints/best: checkpoint not found"], code=2))
    said = cb.serve(console, run.run_id)  # an error line without its record: as it is
    assert said.key == "act.serve_failed" and said.params["problem"] == "runs/x/checkpoints/best: checkpoint not found"


@pytest.mark.slow
def test_the_served_run_answers_an_openai_client(tmp_path):
    openai = skips.module("openai")
    from tests.core.gguf_fixtures import fake_lora_run
    run = fake_lora_run(tmp_path)
    endpoints = Endpoints()
    try:
        endpoint = endpoints.start(run)
        kind, where = endpoints.wait_ready(endpoint)
        assert kind == "serving", where
        client = openai.OpenAI(base_url=where.split(" ")[0], api_key="-", max_retries=0)
        reply = client.chat.completions.create(model="fake-run", messages=[{"role": "user", "content": "hi"}],
                                               max_tokens=4, temperature=0)
        assert reply.choices[0].finish_reason in ("stop", "length")
    finally:
        endpoints.stop_all()
    assert endpoint.process.poll() is not None


def test_serve_argv_names_the_best_checkpoint(tmp_path):
    argv = serve_argv(tmp_path / "run", 8123, python="py")
    assert argv == ["py", "-m", "core.serve", "--checkpoint", str(tmp_path / "run" / "checkpoints" / "best"),
                    "--host", "127.0.0.1", "--port", "8123"]
