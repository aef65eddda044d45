"""Safetensors written and read one tensor at a time (core/weights/safetensors_io.py): files the
`safetensors` library reads back exactly, the library's files read back exactly, streaming (a tensor
is produced only when its bytes are due, the earlier ones already released), and corrupt files named."""
import gc
import weakref

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

import mindspore as ms  # noqa: F401  (registers numpy's bfloat16)
from mindspore import Tensor

from core.engine.checkpoint import SafetensorsFiles
from core.spec.errors import CheckpointError
from core.weights.safetensors_io import SafetensorsReader, TensorEntry, entry_of, write_file


def arrays():
    rng = np.random.default_rng(0)
    return {"w": rng.standard_normal((3, 5)).astype(np.float32), "step": np.array(7, np.int32),
            "ids": np.arange(6, dtype=np.int64).reshape(2, 3), "half": rng.standard_normal(4).astype(np.float16),
            "bf16": Tensor(rng.standard_normal((2, 2)).astype(np.float32), ms.bfloat16).asnumpy(),
            "empty": np.zeros((0, 4), np.float32)}


def test_written_files_read_back_in_safetensors_and_in_our_reader(tmp_path):
    tensors = arrays()
    write_file(tmp_path / "a.safetensors", [entry_of(k, v) for k, v in tensors.items()], {"format": "pt"})
    loaded = load_file(str(tmp_path / "a.safetensors"))
    with SafetensorsReader(tmp_path / "a.safetensors") as reader:
        assert reader.metadata == {"format": "pt"}
        for name, array in tensors.items():
            assert loaded[name].shape == array.shape and loaded[name].dtype == array.dtype
            np.testing.assert_array_equal(loaded[name], array)
            ours = reader.read(name)
            assert ours.shape == array.shape and ours.dtype == array.dtype  # 0-d stays 0-d
            np.testing.assert_array_equal(ours, array)


def test_the_librarys_files_read_back_exactly_and_convert_on_read_into(tmp_path):
    tensors = {k: v for k, v in arrays().items() if k != "bf16"}
    save_file(tensors, str(tmp_path / "lib.safetensors"))
    with SafetensorsFiles([tmp_path / "lib.safetensors"]) as files:
        assert sorted(files) == sorted(tensors)
        for name, array in tensors.items():
            np.testing.assert_array_equal(files[name], array)
            assert files.shape(name) == array.shape
        out = np.empty((4,), np.float32)
        files.read_into("half", out)  # float16 on disk into a float32 buffer
        np.testing.assert_array_equal(out, tensors["half"].astype(np.float32))


def test_tensors_are_produced_one_at_a_time(tmp_path):
    """Each entry's array is asked for only when its bytes are due, and the previous one is already
    released by then: the writer holds one tensor, not the whole state."""
    alive, calls = [], []

    def producer(n):
        def read():
            calls.append((n, [ref() is not None for ref in alive]))
            array = np.full((1000,), n, np.float32)
            alive.append(weakref.ref(array))
            return array
        return read
    entries = [TensorEntry(f"t{n}", (1000,), "float32", producer(n)) for n in range(4)]
    gc.disable()  # (released by reference counting, not by a collection)
    try:
        write_file(tmp_path / "s.safetensors", entries)
    finally:
        gc.enable()
    assert [n for n, _ in calls] == [0, 1, 2, 3]
    assert all(not any(previous) for _, previous in calls)
    assert load_file(str(tmp_path / "s.safetensors"))["t3"][0] == 3


def test_a_header_that_lies_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="header says"):
        write_file(tmp_path / "x.safetensors", [TensorEntry("w", (2, 2), "float32", lambda: np.zeros((3,), np.float32))])


@pytest.mark.parametrize("damage", ["truncate", "garbage", "short"])
def test_corrupt_files_are_named(tmp_path, damage):
    path = tmp_path / "c.safetensors"
    save_file({"w": np.ones((64, 64), np.float32)}, str(path))
    data = path.read_bytes()
    path.write_bytes({"truncate": data[:-100], "garbage": b"\x10" + data[1:8] + b"{not json" + data[17:],
                      "short": data[:5]}[damage])
    with pytest.raises(CheckpointError, match="c.safetensors: cannot read safetensors file"):
        with SafetensorsFiles([path]):
            pass
