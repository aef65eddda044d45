"""Atomic replacement of files, folders and symlinks: a reader sees the old one or the new one,
never a mix, and a crash or a failed write leaves the old one in place.

The recipe is written once here: fill a temporary sibling, fsync it, rename it over the target,
fsync the parent folder (so the rename survives a power cut). Standard library only, and imports
nothing of `core`, so every core module may use it (the one exception to the dependency rule that
`config` and `rundir` depend on nothing else in core).
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import IO, Iterator

__all__ = ["atomic_path", "atomic_open", "atomic_write", "atomic_folder", "atomic_symlink",
           "durable_rename", "fsync_path", "fsync_dir"]


def fsync_path(path: str | os.PathLike) -> None:
    """Flush a file's (or a folder's entries') data to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(folder: str | os.PathLike) -> None:
    """Make a rename inside `folder` durable (a no-op where the filesystem cannot do it)."""
    with contextlib.suppress(OSError):
        fsync_path(folder)


def durable_rename(src: str | os.PathLike, dst: str | os.PathLike) -> None:
    """Give a complete file or folder `src` (a writer's own temporary, already filled) the new
    name `dst`, durably: `src` is fsynced (a file's data, a folder's entries), renamed, and the
    folder is fsynced (both folders when it moves between them). For a name nothing holds
    (`os.rename` silently replaces a file or an empty folder there); to replace, use the helpers
    below."""
    src, dst = Path(src), Path(dst)
    fsync_path(src)
    os.rename(src, dst)
    fsync_dir(dst.parent)
    if src.parent != dst.parent:
        fsync_dir(src.parent)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, mode: int | None = 0o644) -> Iterator[Path]:
    """Yield a temporary file name beside `path` for the caller (or a program it runs) to fill;
    when the block succeeds it is fsynced, given `mode` (None keeps what the writer left; mkstemp
    makes 0600) and renamed over `path`; when the block fails it is removed."""
    path = Path(path)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        fsync_path(tmp)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        _remove(tmp)
        raise
    fsync_dir(path.parent)


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w") -> Iterator[IO]:
    """`open(path, mode)` ("w" text as UTF-8, or "wb") whose content replaces `path` atomically
    when the block succeeds."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open mode {mode!r}: use 'w' or 'wb'")
    with atomic_path(path) as tmp:
        with open(tmp, mode, **({"encoding": "utf-8"} if mode == "w" else {})) as handle:
            yield handle


def atomic_write(path: str | os.PathLike, data: str | bytes) -> None:
    """Replace `path` with `data` (text is written as UTF-8)."""
    with atomic_open(path, "wb" if isinstance(data, bytes) else "w") as handle:
        handle.write(data)


@contextlib.contextmanager
def atomic_folder(path: str | os.PathLike) -> Iterator[Path]:
    """Yield an empty temporary sibling folder to fill; when the block succeeds its files are
    fsynced and it takes the place of `path` (an existing `path` is moved aside first and removed
    only after the swap, so there is never a moment without one); when the block fails it is
    removed and `path` stays as it was."""
    out = Path(path)
    tmp = out.parent / f".tmp-{out.name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        yield tmp
        for sub in sorted(tmp.rglob("*"), reverse=True):  # files before the folders holding them
            if sub.is_file() or sub.is_dir():
                fsync_path(sub)
        fsync_path(tmp)
        if out.exists() or out.is_symlink():
            old = out.parent / f".old-{out.name}-{os.getpid()}"
            _remove(old)
            os.replace(out, old)
            os.replace(tmp, out)
            _remove(old)
        else:
            os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    fsync_dir(out.parent)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            path.unlink()


def atomic_symlink(link: str | os.PathLike, target: str) -> None:
    """Make `link` a symlink to `target` (kept as given, e.g. relative), replacing what was there."""
    link = Path(link)
    tmp = link.parent / f".{link.name}-{os.getpid()}.tmp"
    _remove(tmp)
    os.symlink(target, tmp)
    try:
        os.replace(tmp, link)
    except BaseException:
        _remove(tmp)
        raise
    fsync_dir(link.parent)
