"""A run's training checkpoints on disk: written so that no crash loses or silently changes one.

    checkpoints/
      step-8/                 weights.safetensors, optimizer.safetensors, trainer_state.json,
                              manifest.json (written last: size and sha256 of every other file)
      step-8-r2/              step 8 saved again (after a resume): a revision beside the first
      last -> step-8-r2       pointers (relative symlinks), flipped atomically
      best -> step-4

A save writes its folder under `.tmp-<name>-<pid>/`, tensor by tensor (a tensor is read from its
source only when it is written, so a caller that hands over `TensorSource`s holds one tensor at a
time), checksums each file while writing it, writes the manifest last, fsyncs, and renames the
folder to a name no other folder has (`step-N`, or `step-N-rK` when step N exists). Only then are
the pointers flipped (each one a single rename), and only after that is an older revision of the
same step removed. So at every instant each pointer names a complete folder, and the flip is the
commit: after a crash, `recover` (run when a worker starts) keeps the revision a pointer names,
puts back a step the previous version's two-rename swap left half-done, and sweeps every
`.tmp-*`/`.old-*` leftover, saying what it did.

`verify_checkpoint` recomputes every file's sha256 against the manifest: resume and export call it,
and a mismatch is an error naming the file and the checkpoints that still verify. A save that
runs out of disk space is `DiskFull`, naming the folder and the space needed; the checkpoints
already there are untouched.

Standard library and NumPy only (no MindSpore; `CheckpointError` comes from core.spec.model_args, which
is NumPy-only too): the launcher and the console use it.
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping

import numpy as np

from core.run.atomic import atomic_symlink, durable_rename, fsync_dir, fsync_path
from core.spec.errors import CheckpointError, said_of
from core.spec.messages import Message
from core.run.rundir import POINTERS, RunDir, checkpoint_folders, parse_step_folder, step_folder_name

WEIGHTS_FILE = "weights.safetensors"
OPTIMIZER_FILE = "optimizer.safetensors"
STATE_FILE = "trainer_state.json"
MANIFEST_FILE = "manifest.json"
CHECKPOINT_FILES = (WEIGHTS_FILE, OPTIMIZER_FILE, STATE_FILE)
MANIFEST_FORMAT = "mindtune-checkpoint/1"
_LEFTOVER = re.compile(r"\.(tmp|old)-.*|\.(best|last)-\d+(\.tmp)?")
_PID_SUFFIX = re.compile(r"-(\d+)(?:\.tmp)?$")
_CHUNK = 1 << 20


class CheckpointCorrupt(CheckpointError):
    """A checkpoint file whose bytes differ from what its manifest recorded."""


class DiskFull(CheckpointError):
    """The disk filled up during a save; the message names the folder and the space needed."""

    def __init__(self, message: str, folder: Path, needed_bytes: int, free_bytes: int):
        super().__init__(message)
        self.folder, self.needed_bytes, self.free_bytes = folder, needed_bytes, free_bytes


@dataclass(frozen=True)
class TensorSource:
    """A tensor to save: its shape and dtype now, its values when `read()` is called (once, while
    it is written), so a save need not hold every tensor in memory at once."""
    shape: tuple[int, ...]
    dtype: np.dtype
    read: Callable[[], np.ndarray]


Tensors = Mapping[str, "np.ndarray | TensorSource"]

_DTYPE_CODES = {"float64": "F64", "float32": "F32", "float16": "F16", "bfloat16": "BF16", "int64": "I64",
                "int32": "I32", "int16": "I16", "int8": "I8", "uint64": "U64", "uint32": "U32", "uint16": "U16",
                "uint8": "U8", "bool": "BOOL"}


def format_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


# ---- writing one file ------------------------------------------------------------------------

def _source(value) -> TensorSource:
    if isinstance(value, TensorSource):
        return value
    array = np.asarray(value)
    return TensorSource(tuple(array.shape), array.dtype, lambda: array)


def _header(sources: Mapping[str, TensorSource], metadata: Mapping[str, str] | None) -> tuple[bytes, int]:
    """The safetensors header (8-byte length + JSON padded to 8 bytes) and the data size."""
    entries: dict[str, object] = {}
    if metadata:
        entries["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    offset = 0
    for name in sorted(sources):
        src = sources[name]
        code = _DTYPE_CODES.get(np.dtype(src.dtype).name)
        if code is None:
            raise CheckpointError(Message("ckpt.dtype_unsupported", name=name, dtype=np.dtype(src.dtype).name))
        size = int(np.prod(src.shape, dtype=np.int64)) * np.dtype(src.dtype).itemsize
        entries[name] = {"dtype": code, "shape": [int(d) for d in src.shape], "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(entries, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text, offset


def safetensors_size(tensors: Tensors, metadata: Mapping[str, str] | None = None) -> int:
    """The bytes `write_safetensors` will write for these tensors."""
    header, data = _header({k: _source(v) for k, v in tensors.items()}, metadata)
    return len(header) + data


def write_safetensors(path: str | os.PathLike, tensors: Tensors,
                      metadata: Mapping[str, str] | None = None) -> dict:
    """Write a safetensors file one tensor at a time (each source is read just before its bytes
    are written) and return {"bytes", "sha256"} of what was written, hashed on the way out."""
    sources = {k: _source(v) for k, v in tensors.items()}
    header, _ = _header(sources, metadata)
    with open(path, "wb", buffering=0) as raw:  # unbuffered: each tensor goes to the file as it comes
        out = HashingWriter(raw)
        out.write(header)
        for name in sorted(sources):
            src = sources[name]
            array = np.asarray(src.read(), order="C")  # (ascontiguousarray would make a 0-d array 1-d)
            if tuple(array.shape) != tuple(src.shape) or array.dtype != np.dtype(src.dtype):
                raise CheckpointError(f"tensor {name}: declared {tuple(src.shape)} {np.dtype(src.dtype).name}, "
                                      f"got {tuple(array.shape)} {array.dtype.name}")
            out.write(memoryview(array.reshape(-1).view(np.uint8)))
            del array
    fsync_path(path)
    return {"bytes": out.bytes, "sha256": out.hexdigest()}


class HashingWriter:
    """A binary file handle's `write` that also feeds sha256 (so a file's checksum costs no second
    read) and writes everything it is given (a raw handle may take less at once)."""

    def __init__(self, handle):
        self.handle, self.digest, self.bytes = handle, hashlib.sha256(), 0

    def write(self, data) -> int:
        view = memoryview(data).cast("B")
        self.digest.update(view)
        while len(view):
            view = view[self.handle.write(view):]
        self.bytes += len(data) if isinstance(data, bytes) else memoryview(data).nbytes
        return memoryview(data).nbytes

    def hexdigest(self) -> str:
        return self.digest.hexdigest()


def _write_bytes(path: Path, data: bytes) -> dict:
    path.write_bytes(data)
    fsync_path(path)
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def file_digest(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


# ---- folders and pointers ------------------------------------------------------------------

def step_of(folder: str | os.PathLike) -> int | None:
    parsed = parse_step_folder(Path(folder).name)
    return parsed[0] if parsed else None


def checkpoint_steps(checkpoints_dir: str | os.PathLike) -> list[int]:
    return list(checkpoint_folders(checkpoints_dir))


def pointer_targets(checkpoints_dir: str | os.PathLike) -> dict[str, str]:
    """{pointer: folder name it names} for the pointers that exist (dangling ones included)."""
    root = Path(checkpoints_dir)
    targets = {}
    for name in POINTERS:
        link = root / name
        if link.is_symlink():
            targets[name] = Path(os.readlink(link)).name
    return targets


def _newest(checkpoints_dir: Path, step: int) -> Path:
    folders = checkpoint_folders(checkpoints_dir).get(step)
    if not folders:
        raise CheckpointError(Message("ckpt.no_step", folder=str(checkpoints_dir), step=step))
    return folders[-1]


def point(checkpoints_dir: str | os.PathLike, name: str, step: int) -> None:
    """Atomically make `checkpoints/<name>` (best/last) a relative symlink to step `step`'s newest folder."""
    root = Path(checkpoints_dir)
    atomic_symlink(root / name, _newest(root, step).name)


def _new_folder_name(root: Path, step: int) -> str:
    folders = checkpoint_folders(root).get(step, [])
    if not folders and not os.path.lexists(root / step_folder_name(step)):
        return step_folder_name(step)
    revision = max([parse_step_folder(p.name)[1] for p in folders] + [1]) + 1
    while os.path.lexists(root / step_folder_name(step, revision)):
        revision += 1
    return step_folder_name(step, revision)


def _retire_older_revisions(root: Path, step: int, keep: Path) -> None:
    """After a new revision of `step` is committed: pointers still naming an older revision move
    to the new one (a step saved again replaces its content), then the older ones are removed."""
    older = [p for p in checkpoint_folders(root).get(step, []) if p != keep]
    for pointer, target in pointer_targets(root).items():
        if any(target == p.name for p in older):
            atomic_symlink(root / pointer, keep.name)
    for folder in older:
        shutil.rmtree(folder, ignore_errors=True)
    if older:
        fsync_dir(root)


# ---- saving --------------------------------------------------------------------------------

def free_bytes(folder: str | os.PathLike) -> int:
    st = os.statvfs(folder)
    return st.f_bavail * st.f_frsize


def _disk_full(root: Path, step: int, needed: int) -> DiskFull:
    free = free_bytes(root)
    last = pointer_targets(root).get("last")
    intact = Message("ckpt.intact", checkpoint=last) if last else Message("ckpt.untouched")
    return DiskFull(Message("ckpt.disk_full", step=step, folder=str(root), needed=format_bytes(needed),
                            free=format_bytes(free), short=format_bytes(max(needed - free, 0)), note=intact),
                    root, needed, free)


def save_train_checkpoint(checkpoints_dir: str | os.PathLike, step: int, weights: Tensors,
                          optimizer_state: Tensors, trainer_state: dict,
                          pointers: Iterable[str] = ()) -> Path:
    """Save step `step` (see the module docstring for the order of operations) and point
    `pointers` at it; returns the new folder. A failure, or a kill at any moment, leaves every
    earlier checkpoint and every pointer as it was."""
    root = Path(checkpoints_dir)
    root.mkdir(parents=True, exist_ok=True)
    state_bytes = json.dumps(trainer_state, indent=1, sort_keys=True).encode("utf-8")
    needed = (safetensors_size(weights) + safetensors_size(optimizer_state) + len(state_bytes)
              + 4096 * (len(CHECKPOINT_FILES) + 2))  # + the manifest and folder entries
    name = _new_folder_name(root, step)
    tmp = root / f".tmp-{name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        if free_bytes(root) < needed:
            raise _disk_full(root, step, needed)
        tmp.mkdir()
        files = {WEIGHTS_FILE: write_safetensors(tmp / WEIGHTS_FILE, weights),
                 OPTIMIZER_FILE: write_safetensors(tmp / OPTIMIZER_FILE, optimizer_state),  # keeps 0-d shapes
                 STATE_FILE: _write_bytes(tmp / STATE_FILE, state_bytes)}
        manifest = {"format": MANIFEST_FORMAT, "step": int(step), "created_at": round(time.time(), 3), "files": files}
        _write_bytes(tmp / MANIFEST_FILE, json.dumps(manifest, indent=1, sort_keys=True).encode())
        durable_rename(tmp, root / name)  # `name` is new: nothing is replaced
    except OSError as err:
        shutil.rmtree(tmp, ignore_errors=True)
        if err.errno in (errno.ENOSPC, errno.EDQUOT):
            raise _disk_full(root, step, needed) from err
        raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    final = root / name
    for pointer in pointers:
        atomic_symlink(root / pointer, name)
    _retire_older_revisions(root, step, final)
    return final


def prune_checkpoints(checkpoints_dir: str | os.PathLike, keep_last_n: int) -> list[int]:
    """Delete periodic checkpoints beyond the newest `keep_last_n` steps, never a folder that a
    pointer (best/last) names."""
    root = Path(checkpoints_dir)
    protected = set(pointer_targets(root).values())
    folders = checkpoint_folders(root)
    steps = list(folders)
    removed = []
    for step in steps[: max(len(steps) - keep_last_n, 0)]:
        doomed = [p for p in folders[step] if p.name not in protected]
        for folder in doomed:
            shutil.rmtree(folder)
        if len(doomed) == len(folders[step]):
            removed.append(step)
    return removed


# ---- reading and verifying -----------------------------------------------------------------

def read_manifest(folder: str | os.PathLike) -> dict | None:
    """The folder's manifest, None when it has none (saved before manifests existed)."""
    path = Path(folder) / MANIFEST_FILE
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        raise CheckpointCorrupt(Message("ckpt.unreadable_manifest", file=str(path), error=str(err))) from err
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        raise CheckpointCorrupt(Message("ckpt.not_manifest", file=str(path)))
    return manifest


def verify_checkpoint(folder: str | os.PathLike, contents: bool = True) -> str:
    """Check every file the manifest lists: its size, and (`contents`) its sha256; raises
    CheckpointCorrupt naming the first file that differs. Returns 'verified' or, for a folder
    saved before manifests existed, 'unverified (no manifest)'."""
    folder = Path(folder)
    manifest = read_manifest(folder)
    if manifest is None:
        for name in CHECKPOINT_FILES:
            if not (folder / name).is_file():
                raise CheckpointError(Message("ckpt.incomplete", folder=str(folder), missing_file=name))
        return "unverified (no manifest)"
    missing = [name for name in CHECKPOINT_FILES if name not in manifest["files"]]
    if missing:
        raise CheckpointCorrupt(Message("ckpt.manifest_omits", file=str(folder / MANIFEST_FILE), missing_file=missing[0]))
    for name, expected in manifest["files"].items():
        path = folder / name
        if not path.is_file():
            raise CheckpointCorrupt(Message("ckpt.file_missing", file=str(path)))
        size = path.stat().st_size
        if size != expected.get("bytes"):
            raise CheckpointCorrupt(Message("ckpt.size_differs", file=str(path), size=size,
                                            expected=expected.get("bytes")))
        actual = file_digest(path) if contents else expected.get("sha256")
        if actual != expected.get("sha256"):
            raise CheckpointCorrupt(Message("ckpt.sha_differs", file=str(path), actual=actual[:16],
                                            expected=str(expected.get("sha256"))[:16]))
    return "verified"


def good_checkpoints(checkpoints_dir: str | os.PathLike, exclude: Iterable[Path] = (),
                     contents: bool = True) -> list[Path]:
    """The checkpoint folders that verify, newest step first."""
    skip = {Path(p).resolve() for p in exclude}
    good = []
    for step, folders in reversed(list(checkpoint_folders(checkpoints_dir).items())):
        folder = folders[-1]
        if folder.resolve() in skip:
            continue
        try:
            verify_checkpoint(folder, contents)
        except CheckpointError:
            continue
        good.append(folder)
    return good


def _checkpoints_of(path: Path) -> Path:
    """A run folder -> its `checkpoints/` folder; any other folder as given."""
    checkpoints = RunDir(path).checkpoints_dir
    return checkpoints if checkpoints.is_dir() else path


def resolve_checkpoint(path: str | os.PathLike) -> Path:
    """A run folder (-> its `checkpoints/last`), a `checkpoints/` folder, or a step folder /
    best / last -> the concrete step folder. Missing or incomplete checkpoints are errors (the
    content is checked by `verify_checkpoint`)."""
    p = _checkpoints_of(Path(path))
    run = RunDir(p.parent)
    if p == run.checkpoints_dir and p.is_dir():
        if not run.checkpoint("last").exists():
            saved = good_checkpoints(p)
            raise CheckpointError(Message("ckpt.no_last", folder=str(p), checkpoints=", ".join(f.name for f in saved))
                                  if saved else Message("ckpt.no_last_none", folder=str(p)))
        p = run.checkpoint("last")
    if not p.is_dir():
        raise CheckpointError(Message("ckpt.not_found", folder=str(p)))
    p = p.resolve()
    for name in CHECKPOINT_FILES:
        if not (p / name).is_file():
            raise CheckpointError(Message("ckpt.incomplete", folder=str(p), missing_file=name))
    return p


def verified_folder(path: str | os.PathLike) -> Path:
    """`resolve_checkpoint` + `verify_checkpoint`; a corrupt checkpoint's error also names the
    ones that still verify and how to resume from one of them."""
    folder = resolve_checkpoint(path)
    try:
        verify_checkpoint(folder)
    except CheckpointCorrupt as err:
        others = good_checkpoints(folder.parent, exclude=[folder]) if parse_step_folder(folder.name) else []
        raise CheckpointCorrupt(Message("ckpt.corrupt_others", reason=said_of(err), checkpoints=", ".join(
            f.name for f in others), path=str(others[0])) if others else Message(
            "ckpt.corrupt_none", reason=said_of(err))) from None
    return folder


def newest_resumable(run_or_checkpoints_dir: str | os.PathLike, contents: bool = True) -> Path | None:
    """The folder `last` names if it verifies, else the newest folder that does; None if none.
    `contents=False` checks sizes only (fast: for naming it in a status, not for loading it)."""
    root = _checkpoints_of(Path(run_or_checkpoints_dir))
    last = root / "last"  # the pointer inside a checkpoints folder (the checkpoint format; see `point`)
    if last.is_dir():
        try:
            verify_checkpoint(last, contents)
            return last.resolve()
        except CheckpointError:
            pass
    good = good_checkpoints(root, contents=contents)
    return good[0] if good else None


# ---- after a crash -------------------------------------------------------------------------

def _pid_alive(name: str) -> bool:
    match = _PID_SUFFIX.search(name)
    if not match or int(match.group(1)) == os.getpid():
        return False
    try:
        os.kill(int(match.group(1)), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _folder_ok(folder: Path) -> bool:
    try:
        verify_checkpoint(folder)
        return True
    except CheckpointError:
        return False


def _size(path: Path) -> int:
    if path.is_symlink() or not path.is_dir():
        return path.lstat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def recover(checkpoints_dir: str | os.PathLike) -> list[str]:
    """Repair what an interrupted save left (at a worker's start, before resuming); returns one
    line per action, for the log.

    1. A step whose folder is gone but whose swap leftovers remain (the two-rename swap of earlier
       versions: `.old-step-N-*` and a complete `.tmp-step-N-*`) gets its folder back, the newer
       copy when it verifies, else the older.
    2. A step with several revisions keeps the newest one a pointer names (a flip is the commit;
       pointers still naming an older revision are moved to it, as the save would have) or, if
       none is named, its newest; the others are removed.
    3. A pointer whose folder is gone, to a step that has another revision, is pointed at it.
    4. Every other `.tmp-*` / `.old-*` leftover is removed (unless its writer is still alive).
    """
    root = Path(checkpoints_dir)
    if not root.is_dir():
        return []
    actions: list[str] = []
    leftovers = sorted(p for p in root.iterdir() if _LEFTOVER.fullmatch(p.name))
    for path in leftovers:
        match = re.fullmatch(r"\.(tmp|old)-(step-\d+(?:-r\d+)?)-\d+", path.name)
        if not match or not path.is_dir() or os.path.lexists(root / match.group(2)) or _pid_alive(path.name):
            continue
        newer_first = sorted((p for p in leftovers if p.is_dir() and re.fullmatch(
            rf"\.(tmp|old)-{re.escape(match.group(2))}-\d+", p.name)), key=lambda p: not p.name.startswith(".tmp-"))
        for candidate in newer_first:
            if _folder_ok(candidate):
                durable_rename(candidate, root / match.group(2))
                actions.append(f"recovered {match.group(2)} from {candidate.name} (a save interrupted between its renames)")
                break
    for step, folders in checkpoint_folders(root).items():
        if len(folders) < 2:
            continue
        targets = pointer_targets(root)
        named = [p for p in folders if p.name in targets.values()]
        keep = named[-1] if named else folders[-1]
        for pointer, target in targets.items():
            if target != keep.name and any(target == p.name for p in folders):
                atomic_symlink(root / pointer, keep.name)  # finish the flip an interrupted save began
                actions.append(f"pointed {pointer} at {keep.name} (the newer revision of step {step})")
        for folder in folders:
            if folder != keep:
                shutil.rmtree(folder, ignore_errors=True)
                actions.append(f"removed {folder.name}: {keep.name} is the committed revision of step {step}")
    for pointer, target in pointer_targets(root).items():
        if not (root / target).is_dir():
            parsed = parse_step_folder(target)
            folders = checkpoint_folders(root).get(parsed[0], []) if parsed else []
            if folders and _folder_ok(folders[-1]):
                atomic_symlink(root / pointer, folders[-1].name)
                actions.append(f"pointed {pointer} at {folders[-1].name} ({target} is gone)")
            else:
                actions.append(f"warning: {pointer} names {target}, which is gone and cannot be recovered")
    actions += sweep(root)
    return actions


def sweep(folder: str | os.PathLike) -> list[str]:
    """Remove the `.tmp-*` / `.old-*` leftovers of interrupted writes in `folder` whose writer is
    no longer alive; returns one line per removal."""
    root = Path(folder)
    if not root.is_dir():
        return []
    actions = []
    for path in sorted(root.iterdir()):
        if not _LEFTOVER.fullmatch(path.name) or _pid_alive(path.name):
            continue
        size = _size(path)
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        actions.append(f"swept {root.name}/{path.name} ({format_bytes(size)}, left by an interrupted write)")
    if actions:
        fsync_dir(root)
    return actions
