"""core.run.ckpt_store: saves written tensor by tensor with a manifest, a SIGKILL at every point of an
overwrite leaves a checkpoint that recovery makes whole, flipped bytes are named on load, leftovers
are swept, and a full disk (a real tiny tmpfs) is `DiskFull` with the earlier checkpoints intact.
MindSpore-free: the saves run in plain subprocesses that are killed for real."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

import core.run.ckpt_store as cs
from core.run.launcher import REPO_ROOT
from core.spec.errors import CheckpointError

from tests import skips


def save(root: Path, step: int, value: float, pointers=("last",), size: int = 64) -> Path:
    weights = {"layer.w": np.full((size, 4), value, np.float32), "layer.b": np.full(4, value, np.float16)}
    optimizer = {"moment1.layer.w": np.full((size, 4), -value, np.float32), "global_step": np.array(step, np.int32)}
    return cs.save_train_checkpoint(root, step, weights, optimizer, {"step": step, "value": value}, pointers)


def content(folder: Path) -> float:
    """The value a checkpoint was saved with, checked consistent across its files."""
    cs.verify_checkpoint(folder)
    w = load_file(str(folder / cs.WEIGHTS_FILE))
    o = load_file(str(folder / cs.OPTIMIZER_FILE))
    state = json.loads((folder / cs.STATE_FILE).read_text())
    value = float(w["layer.w"][0, 0])
    assert np.all(w["layer.w"] == value) and np.all(o["moment1.layer.w"] == -value) and state["value"] == value
    return value


# ---- the file format ---------------------------------------------------------------------------

def test_written_safetensors_read_back_and_hash_as_recorded(tmp_path):
    tensors = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "scalar": np.array(3, np.int32),
               "half": np.linspace(0, 1, 5).astype(np.float16), "empty": np.zeros((0, 4), np.float32),
               "mask": np.array([True, False]), "transposed": np.arange(12, dtype=np.float64).reshape(3, 4).T}
    info = cs.write_safetensors(tmp_path / "x.safetensors", tensors, {"format": "pt"})
    back = load_file(str(tmp_path / "x.safetensors"))
    assert set(back) == set(tensors)
    for name, array in tensors.items():
        assert back[name].dtype == array.dtype and back[name].shape == array.shape
        assert np.array_equal(back[name], array)
    assert info == {"bytes": (tmp_path / "x.safetensors").stat().st_size,
                    "sha256": cs.file_digest(tmp_path / "x.safetensors")}
    assert info["bytes"] == cs.safetensors_size(tensors, {"format": "pt"})


def test_tensors_are_read_one_at_a_time_as_they_are_written(tmp_path):
    path = tmp_path / "w.safetensors"
    seen = []

    def source(name: str, value: float) -> cs.TensorSource:
        def read():
            seen.append((name, path.stat().st_size))  # what is on disk when this tensor is asked for
            return np.full((256, 256), value, np.float32)
        return cs.TensorSource((256, 256), np.dtype(np.float32), read)

    tensors = {f"t{i}": source(f"t{i}", i) for i in range(4)}
    cs.write_safetensors(path, tensors)
    header = path.stat().st_size - 4 * 256 * 256 * 4
    assert seen == [(f"t{i}", header + i * 256 * 256 * 4) for i in range(4)]  # in order, each after the previous
    with pytest.raises(CheckpointError, match=r"tensor bad: declared \(2,\) float32, got \(3,\) float32"):
        cs.write_safetensors(tmp_path / "bad.safetensors",
                             {"bad": cs.TensorSource((2,), np.dtype(np.float32), lambda: np.zeros(3, np.float32))})


def test_every_file_is_in_the_manifest_written_last(tmp_path):
    folder = save(tmp_path, 4, 1.0)
    manifest = json.loads((folder / cs.MANIFEST_FILE).read_text())
    assert manifest["format"] == cs.MANIFEST_FORMAT and manifest["step"] == 4
    assert set(manifest["files"]) == set(cs.CHECKPOINT_FILES)
    for name, entry in manifest["files"].items():
        assert entry == {"bytes": (folder / name).stat().st_size, "sha256": cs.file_digest(folder / name)}
    assert cs.verify_checkpoint(folder) == "verified"


# ---- content integrity ---------------------------------------------------------------------------

def test_a_flipped_byte_is_named_and_resume_must_name_another(tmp_path):
    good = save(tmp_path, 4, 1.0)
    bad = save(tmp_path, 8, 2.0)
    path = bad / cs.OPTIMIZER_FILE
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x01  # inside the tensor data: the header (and so safetensors) does not notice
    path.write_bytes(bytes(data))
    assert load_file(str(path))["moment1.layer.w"].shape == (64, 4)  # still loads: only the checksum tells
    with pytest.raises(cs.CheckpointCorrupt, match=r"optimizer\.safetensors: sha256 [0-9a-f]{16}… differs"):
        cs.verify_checkpoint(bad)
    assert cs.verify_checkpoint(bad, contents=False) == "verified"  # sizes alone cannot see it
    with pytest.raises(cs.CheckpointCorrupt) as info:
        cs.verified_folder(tmp_path / "last")
    message = str(info.value)
    assert str(path) in message and "Checkpoints that verify: step-4" in message
    assert f"run.resume={good}" in message
    assert cs.newest_resumable(tmp_path) == good  # never `last` when it does not verify
    assert cs.verified_folder(good) == good


def test_truncated_and_missing_files_are_named(tmp_path):
    folder = save(tmp_path, 4, 1.0)
    weights = folder / cs.WEIGHTS_FILE
    weights.write_bytes(weights.read_bytes()[:-10])
    with pytest.raises(cs.CheckpointCorrupt, match=r"weights\.safetensors: \d+ bytes, the manifest recorded \d+"):
        cs.verify_checkpoint(folder)
    weights.unlink()
    with pytest.raises(cs.CheckpointCorrupt, match=r"weights\.safetensors: missing \(the manifest lists it\)"):
        cs.verify_checkpoint(folder)


# ---- kills during an overwrite ----------------------------------------------------------------------

KILLER = textwrap.dedent("""\
    import os, shutil, signal, sys
    sys.path.insert(0, {repo!r})
    import numpy as np
    import core.run.atomic as atomic, core.run.ckpt_store as cs
    kill_at = int(sys.argv[2])
    calls = [0]
    def deadly(fn):
        def wrapper(*args, **kwargs):
            calls[0] += 1
            if calls[0] == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)  # dies before this rename/flip/removal happens
            return fn(*args, **kwargs)
        return wrapper
    for module in (os, cs.os, atomic.os):
        module.rename, module.replace, module.symlink = deadly(os.rename), deadly(os.replace), deadly(os.symlink)
    cs.shutil.rmtree = deadly(shutil.rmtree)
    root = sys.argv[1]
    value = 2.0
    weights = {{"layer.w": np.full((64, 4), value, np.float32), "layer.b": np.full(4, value, np.float16)}}
    optimizer = {{"moment1.layer.w": np.full((64, 4), -value, np.float32), "global_step": np.array(8, np.int32)}}
    cs.save_train_checkpoint(root, 8, weights, optimizer, {{"step": 8, "value": value}}, pointers=("last",))
    print("completed", calls[0])
""")


def _assert_whole(root: Path, allowed: set[float]) -> float:
    """After recovery: step 8 has one folder, every pointer names it, it verifies, nothing is left over."""
    folders = cs.checkpoint_folders(root)[8]
    assert len(folders) == 1, folders
    assert set(cs.pointer_targets(root).values()) == {folders[0].name}
    assert not [p.name for p in root.iterdir() if p.name.startswith(".")]
    value = content(folders[0])
    assert value in allowed
    assert content(cs.resolve_checkpoint(root / "last")) == content(cs.resolve_checkpoint(root / "best")) == value
    return value


@pytest.mark.slow
def test_a_sigkill_at_every_step_of_an_overwrite_loses_nothing(tmp_path):
    script = tmp_path / "killer.py"
    script.write_text(KILLER.format(repo=str(REPO_ROOT)))
    outcomes = {}
    for kill_at in range(1, 40):
        root = tmp_path / f"k{kill_at}"
        save(root, 8, 1.0, pointers=("last", "best"))  # step 8 saved once: the resume re-saves it
        result = subprocess.run([sys.executable, str(script), str(root), str(kill_at)], capture_output=True, text=True,
                                timeout=60)
        actions = cs.recover(root)
        outcomes[kill_at] = _assert_whole(root, {1.0, 2.0}), result.returncode
        if result.returncode == 0:
            assert "completed" in result.stdout and actions == []
            break
        assert result.returncode == -signal.SIGKILL, result.stderr
    killed = [k for k, (_, code) in outcomes.items() if code != 0]
    assert len(killed) >= 5, outcomes  # rename of the folder, flips of last and of best, removal of the old one
    values = [outcomes[k][0] for k in sorted(outcomes)]
    assert values[0] == 1.0 and values[-1] == 2.0 and values == sorted(values)  # old until the flip, new after


@pytest.mark.slow
def test_random_kills_while_saving_in_a_loop(tmp_path):
    script = tmp_path / "loop.py"
    script.write_text(textwrap.dedent(f"""\
        import sys
        sys.path.insert(0, {str(REPO_ROOT)!r})
        import numpy as np
        import core.run.ckpt_store as cs
        i = 0
        while True:
            i += 1
            value = float(i % 7 + 1)
            w = {{"layer.w": np.full((20000, 4), value, np.float32), "layer.b": np.full(4, value, np.float16)}}
            o = {{"moment1.layer.w": np.full((20000, 4), -value, np.float32), "global_step": np.array(8, np.int32)}}
            cs.save_train_checkpoint(sys.argv[1], 8, w, o, {{"step": 8, "value": value}}, pointers=("last",))
            print(i, flush=True)
        """))
    rng = random.Random(18)
    root = tmp_path / "ckpts"
    save(root, 8, 1.0, pointers=("last", "best"))
    for _ in range(12):
        process = subprocess.Popen([sys.executable, str(script), str(root)], stdout=subprocess.PIPE, text=True)
        process.stdout.readline()  # at least one save went through: kill in the middle of a later one
        time.sleep(rng.uniform(0.0, 0.05))
        process.kill()
        process.wait()
        cs.recover(root)
        _assert_whole(root, {float(v) for v in range(1, 8)})


def dead_pid() -> int:
    """The pid of a process that has ended."""
    return int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True, check=True).stdout)


def test_recovery_of_the_old_two_rename_swap(tmp_path):
    """The layout the previous version left when killed between its two renames: no step-8, only
    `.old-step-8-*` and `.tmp-step-8-*`, and `last` dangling."""
    # the writers' pids: of processes that have ended (a fixed number such as 4242 can be a live
    # process on the machine, and a leftover of a live writer is rightly spared)
    first, second = dead_pid(), dead_pid()
    root = tmp_path / "checkpoints"
    save(root, 4, 1.0, pointers=())
    old = save(root, 8, 1.0, pointers=("last",))
    os.rename(old, root / f".old-step-8-{first}")
    new = save(tmp_path / "elsewhere", 8, 2.0, pointers=())
    os.rename(new, root / f".tmp-step-8-{first}")
    (root / f".tmp-step-9-{second}").mkdir()  # a save killed while writing: incomplete
    (root / f".tmp-step-9-{second}" / cs.WEIGHTS_FILE).write_bytes(b"half")
    assert not (root / "last").exists()
    with pytest.raises(CheckpointError, match="checkpoint not found"):
        cs.resolve_checkpoint(root / "last")
    actions = cs.recover(root)
    assert actions[0] == f"recovered step-8 from .tmp-step-8-{first} (a save interrupted between its renames)"
    assert any(a.startswith(f"swept checkpoints/.old-step-8-{first}") for a in actions)
    assert any(a.startswith(f"swept checkpoints/.tmp-step-9-{second}") for a in actions)
    assert content(cs.resolve_checkpoint(root / "last")) == 2.0
    assert sorted(p.name for p in root.iterdir()) == ["last", "step-4", "step-8"]


def test_sweep_spares_a_live_writer_and_says_what_it_removed(tmp_path):
    dead = dead_pid()
    (tmp_path / f".tmp-best-step-4-peft-{dead}").mkdir()
    (tmp_path / f".tmp-best-step-4-peft-{dead}" / "adapter.safetensors").write_bytes(b"x" * 3000)
    (tmp_path / f".tmp-best-step-4-peft.zip-{dead}").write_bytes(b"zip")
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        (tmp_path / f".tmp-best-step-4-merged-{live.pid}").mkdir()
        actions = cs.sweep(tmp_path)
        assert actions == [f"swept {tmp_path.name}/.tmp-best-step-4-peft-{dead} (2.9 KB, left by an interrupted write)",
                           f"swept {tmp_path.name}/.tmp-best-step-4-peft.zip-{dead} (3 B, left by an interrupted write)"]
        assert [p.name for p in tmp_path.iterdir()] == [f".tmp-best-step-4-merged-{live.pid}"]
    finally:
        live.kill()
        live.wait()


# ---- a full disk -------------------------------------------------------------------------------------

@pytest.fixture
def tiny_disk(tmp_path):
    """A 192 KiB tmpfs (root only); skipped where it cannot be mounted."""
    mount = tmp_path / "disk"
    mount.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=192k", "tmpfs", str(mount)], capture_output=True, text=True)
    if result.returncode != 0:
        skips.skip("root", f"cannot mount a tmpfs here ({result.stderr.strip() or 'not root'})")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_save_that_cannot_fit_is_disk_full_and_touches_nothing(tiny_disk):
    root = tiny_disk / "checkpoints"
    first = save(root, 4, 1.0)
    before = sorted(p.name for p in root.iterdir())
    with pytest.raises(cs.DiskFull) as info:
        save(root, 8, 2.0, size=20000)  # 2 x 320 KB: more than the disk holds
    err = info.value
    assert str(err).startswith(f"disk full: saving checkpoint step 8 in {root} needs ")
    assert "earlier checkpoints are intact (last -> step-4)" in str(err) and "train.keep_last_n" in str(err)
    assert err.needed_bytes > 640000 and err.free_bytes < err.needed_bytes and err.folder == root
    assert sorted(p.name for p in root.iterdir()) == before
    assert content(cs.resolve_checkpoint(root / "last")) == 1.0 and first.name == "step-4"


def test_the_disk_filling_up_during_a_save_is_disk_full(tiny_disk):
    """The space check passes; another writer takes the space while the tensors are written."""
    root = tiny_disk / "checkpoints"
    save(root, 4, 1.0)
    filler = tiny_disk / "someone-else.bin"

    def fill_then_read():
        with open(filler, "wb") as handle:  # take what is left, as another process could
            try:
                while True:
                    handle.write(b"\0" * 4096)
                    handle.flush()
            except OSError:
                pass
        return np.full((64, 4), 2.0, np.float32)

    weights = {"layer.w": cs.TensorSource((64, 4), np.dtype(np.float32), fill_then_read)}
    with pytest.raises(cs.DiskFull, match=r"disk full: saving checkpoint step 8 in .* is free \(short by"):
        cs.save_train_checkpoint(root, 8, weights, {}, {"step": 8}, pointers=("last",))
    assert sorted(p.name for p in root.iterdir()) == ["last", "step-4"]  # the half-written folder is gone
    filler.unlink()
    assert content(cs.resolve_checkpoint(root / "last")) == 1.0
