"""The Docker image's entry point without Docker (issue 31 item 7): no container runtime here can
pull a base image, so the entry point the image runs (app/container.py) is run as the image would
run it: the arguments it gives `python -m app`, the login it requires, the volume paths, and a
real start that listens on every interface and refuses the page without a login."""
from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from app import container
from app.settings import parse_settings
from core.run.launcher import REPO_ROOT


def test_the_console_argv_listens_everywhere_with_the_login_and_keeps_its_folders_on_volumes(tmp_path):
    secret = tmp_path / "auth"
    secret.write_text("alice:s3cret\nbob:pw\n")
    env = {"MINDTUNE_VOLUMES": str(tmp_path / "data"), "MINDTUNE_AUTH_FILE": str(secret),
           "MINDTUNE_AUTH": "eve:ignored"}
    settings = parse_settings(container.console_argv(env, ["--lang", "zh"]))
    assert settings.host == "0.0.0.0" and settings.port == container.PORT and settings.lang == "zh"
    assert settings.auth == (("alice", "s3cret"), ("bob", "pw"))  # the secret file wins over the variable
    assert settings.runs_dir == tmp_path / "data" / "runs" and settings.uploads_dir == tmp_path / "data" / "uploads"
    assert settings.models_dirs == (REPO_ROOT / "models", tmp_path / "data" / "models")
    assert settings.data_dirs == (REPO_ROOT / "data", tmp_path / "data" / "datasets")
    # no secret file: the variable's login
    env["MINDTUNE_AUTH_FILE"] = str(tmp_path / "missing")
    assert parse_settings(container.console_argv(env)).auth == (("eve", "ignored"),)


def test_the_dockerfile_and_the_readme_use_this_entry_point_and_these_volumes():
    dockerfile = (REPO_ROOT / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["python", "-m", "app.container"]' in dockerfile and "CMD" not in dockerfile.split("FROM")[1]
    volumes = re.search(r"^VOLUME \[(.*)\]$", dockerfile, re.M).group(1)
    assert sorted(v.strip(' "') for v in volumes.split(",")) == sorted(str(p) for p in container.volume_dirs({}).values())
    assert f"EXPOSE {container.PORT}" in dockerfile
    readme = (REPO_ROOT / "README.md").read_text()
    run = next(line for line in readme.splitlines() if line.startswith("docker run"))
    assert f"-p {container.PORT}:{container.PORT}" in run and f":{container.SECRET}:ro" in run
    assert "/data/runs" in run and "/data/uploads" in run


def run_entry(env: dict, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app.container", *args], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_without_a_login_the_image_refuses_to_start(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "MINDTUNE_VOLUMES": str(tmp_path / "data"),
           "MINDTUNE_AUTH_FILE": str(tmp_path / "no-such-secret")}
    done = run_entry(env)
    assert done.returncode == 2
    assert "MINDTUNE_AUTH=user:password" in done.stderr and str(tmp_path / "no-such-secret") in done.stderr
    assert not (tmp_path / "data").exists()  # nothing started, nothing made


def _listening_on_all_interfaces(port: int) -> bool:
    lines = Path("/proc/net/tcp").read_text().splitlines()[1:] if Path("/proc/net/tcp").exists() else []
    return any(line.split()[1] == f"00000000:{port:04X}" and line.split()[3] == "0A" for line in lines)


@pytest.mark.slow
def test_the_image_serves_on_every_interface_and_only_after_a_login(tmp_path):
    """A real start of the entry point, as `docker run` would make it (a free port instead of 7860)."""
    secret = tmp_path / "auth"
    secret.write_text("alice:s3cret\n")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {"PATH": "/usr/bin:/bin", "MINDTUNE_VOLUMES": str(tmp_path / "data"), "MINDTUNE_AUTH_FILE": str(secret),
           "GRADIO_ANALYTICS_ENABLED": "False", "HOME": str(tmp_path)}
    log = open(tmp_path / "console.log", "wb")
    process = subprocess.Popen([sys.executable, "-m", "app.container", "--port", str(port)], cwd=REPO_ROOT, env=env,
                               stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            assert process.poll() is None, (tmp_path / "console.log").read_text()[-3000:]
            try:
                urllib.request.urlopen(base + "/", timeout=5)
                break
            except (urllib.error.URLError, OSError):
                time.sleep(0.5)
        assert _listening_on_all_interfaces(port)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(base + "/config", timeout=10)
        assert refused.value.code == 401
        login = urllib.parse.urlencode({"username": "alice", "password": "s3cret"}).encode()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
        assert opener.open(base + "/login", data=login, timeout=10).status == 200
        assert opener.open(base + "/config", timeout=10).status == 200
        assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["datasets", "models", "runs", "uploads"]
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()
