"""app.settings: the command line, and the refusal to listen beyond this machine without a login."""
from __future__ import annotations

import subprocess
import sys

import pytest

from core.run.launcher import REPO_ROOT

from app.settings import SettingsError, parse_settings, read_auth_file
from core.run.launcher import is_loopback


def test_defaults_bind_loopback_and_use_repo_folders():
    settings = parse_settings([])
    assert settings.host == "127.0.0.1" and settings.port == 7860
    assert settings.models_dirs == (REPO_ROOT / "models",)
    assert settings.uploads_dir == settings.runs_dir.parent / "uploads"
    assert settings.uploads_dir in settings.all_data_dirs


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.5", "::", "example.org"])
def test_non_loopback_host_without_auth_is_refused(host):
    with pytest.raises(SettingsError, match="without a login"):
        parse_settings(["--host", host])


def test_non_loopback_host_with_auth_is_allowed():
    settings = parse_settings(["--host", "0.0.0.0", "--auth", "ann:s3cret:with:colons"])
    assert settings.auth == (("ann", "s3cret:with:colons"),)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "localhost", "::1", "[::1]"])
def test_loopback_hosts(host):
    assert is_loopback(host)


def test_auth_file_skips_comments_and_names_bad_lines(tmp_path):
    good = tmp_path / "users"
    good.write_text("# users\nann:pw1\n\nbob:pw2\n")
    assert read_auth_file(good) == (("ann", "pw1"), ("bob", "pw2"))
    bad = tmp_path / "bad"
    bad.write_text("ann:pw1\nno-colon\n")
    with pytest.raises(SettingsError, match="line 2"):
        read_auth_file(bad)


def test_repeatable_roots_and_upload_limit(tmp_path):
    settings = parse_settings(["--models-dir", str(tmp_path / "a"), "--models-dir", str(tmp_path / "b"),
                               "--max-upload-mb", "2", "--lang", "zh"])
    assert settings.models_dirs == (tmp_path / "a", tmp_path / "b")
    assert settings.max_upload_bytes == 2 * 1024 * 1024 and settings.lang == "zh"


def test_python_m_app_refuses_open_host_before_importing_gradio():
    result = subprocess.run([sys.executable, "-m", "app", "--host", "0.0.0.0"], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "--auth" in result.stderr and "0.0.0.0" in result.stderr
