"""Path rules of the console: what it may read, and how it writes paths into configs.

The worker runs with the repository root as its working directory, so a path inside the repository
is written relative to it (`models/tiny-demo`), anything else absolute. The console itself may be
started from any folder, so it resolves relative paths against the repository root too.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from core.run.launcher import REPO_ROOT
from core.run.records import RunDirError
from core.run.rundir import resolve_inside


class OutsideRootsError(ValueError):
    """A path that resolves outside every folder the console was told it may read (`said`: the
    console's own words, app.i18n.Said)."""

    @property
    def said(self) -> list[str]:
        return [self.args[0]]


def absolute(path: str | os.PathLike) -> Path:
    """`path` as the worker sees it: relative paths are taken from the repository root."""
    path = Path(path).expanduser()
    return path if path.is_absolute() else REPO_ROOT / path


def for_config(path: str | os.PathLike) -> str:
    """The shortest path that means the same thing to the worker (relative to the repo root)."""
    real = absolute(path)
    try:
        return str(real.relative_to(REPO_ROOT))
    except ValueError:
        return str(real)


def inside_roots(path: str | os.PathLike, roots: Iterable[str | os.PathLike]) -> Path:
    """The resolved `path` if it lies inside one of `roots` (symlinks followed), else raise."""
    roots = [Path(r) for r in roots]
    for root in roots:
        try:
            return resolve_inside(root, absolute(path))
        except RunDirError:
            continue
    from app.i18n import Said

    names = ", ".join(str(r) for r in roots) or Said("check.none_configured")
    raise OutsideRootsError(Said("check.outside_roots", path=str(path), roots=names))


def is_inside(path: str | os.PathLike, roots: Iterable[str | os.PathLike]) -> bool:
    try:
        inside_roots(path, roots)
    except OutsideRootsError:
        return False
    return True
