"""app.paths: only files inside the configured roots are read; config paths are repo-relative."""
from __future__ import annotations

import os

import pytest

from core.run.launcher import REPO_ROOT

from app.paths import OutsideRootsError, absolute, for_config, inside_roots, is_inside


def test_path_outside_roots_is_refused(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    (tmp_path / "secret.txt").write_text("x")
    with pytest.raises(OutsideRootsError, match="outside the folders"):
        inside_roots(tmp_path / "secret.txt", [root])
    with pytest.raises(OutsideRootsError):
        inside_roots(root / ".." / "secret.txt", [root])


def test_symlink_escaping_a_root_is_refused(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    (tmp_path / "secret.txt").write_text("x")
    os.symlink(tmp_path / "secret.txt", root / "link.txt")
    assert not is_inside(root / "link.txt", [root])


def test_path_inside_any_root_is_resolved(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    (b / "f.jsonl").write_text("{}")
    assert inside_roots(b / "f.jsonl", [a, b]) == (b / "f.jsonl").resolve()


def test_config_paths_are_relative_to_the_repo_when_inside_it(tmp_path):
    assert for_config(REPO_ROOT / "models" / "tiny-demo") == "models/tiny-demo"
    assert for_config(tmp_path / "m") == str(tmp_path / "m")
    assert absolute("models/tiny-demo") == REPO_ROOT / "models" / "tiny-demo"
