"""A GPU or Ascend device faked where MindSpore answers, not in mindtune's own functions (issue 40), so
that the worker (core.train.run_worker), the Trainer and the dry run take every device decision
themselves, as they would on the device, while the kernels still run on this CPU:

- the target: `mindspore.get_context("device_target")` answers "GPU" or "Ascend", and
  `mindspore.set_context(device_target=...)` is recorded, not applied (the process stays on the CPU);
- the chip: `MSContext.get_instance().get_ascend_soc_version()` (mindspore._c_expression) answers `soc`;
- the device's memory: `mindspore.hal.get_device_properties(...).total_memory` answers `total_mb`
  (0: as an Ascend device before it is initialised);
- the allocator: `mindspore.runtime.max_memory_allocated` / `max_memory_reserved` answer `peak_mb`;
- optionally the profiler (`mindspore.profiler.profile`: the activities asked for, recorded), the
  collectives of data parallel (`mindspore.communication.init`, `get_rank`, `get_group_size`,
  `mindspore.ops.AllReduce` adding a peer's values) and MatMul (each call's input shapes, recorded).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np

import mindspore as ms
import mindspore._c_expression as c_expression
from mindspore import Tensor

TARGETS = {"gpu": "GPU", "ascend": "Ascend"}


@dataclass
class FakeDevice:
    device: str
    soc: str = ""
    total_mb: float = 0.0
    peak_mb: float = 0.0
    targets_set: list[str] = field(default_factory=list)   # what set_context was asked for
    profiled: list[list[str]] = field(default_factory=list)  # the activities of each profile started
    matmuls: list[tuple[tuple, tuple]] = field(default_factory=list)  # (a.shape, b.shape) of each MatMul call


class _Context:
    """MindSpore's MSContext instance with the SoC answered by the fake."""

    def __init__(self, real, fake: FakeDevice):
        self._real, self._fake = real, fake

    def get_ascend_soc_version(self):
        return self._fake.soc

    def __getattr__(self, name):
        return getattr(self._real, name)


def fake_soc(monkeypatch, fake: FakeDevice) -> None:
    """Only the chip (MSContext.get_ascend_soc_version)."""
    real = c_expression.MSContext

    class MSContext:
        @staticmethod
        def get_instance():
            return _Context(real.get_instance(), fake)

    monkeypatch.setattr(c_expression, "MSContext", MSContext)


def fake_device(monkeypatch, device: str, soc: str = "", total_mb: float = 0.0, peak_mb: float = 0.0) -> FakeDevice:
    """`device` ("gpu" or "ascend") as MindSpore would report it (see the module's docstring)."""
    fake = FakeDevice(device, soc, total_mb, peak_mb)
    real_get, real_set = ms.get_context, ms.set_context

    def get_context(key):
        return TARGETS[fake.device] if key == "device_target" else real_get(key)

    def set_context(**kwargs):
        target = kwargs.pop("device_target", None)
        if target is not None:
            fake.targets_set.append(target)
        if kwargs:
            real_set(**kwargs)

    def properties(device_id, device_target=None):
        return SimpleNamespace(name=f"fake {fake.device}", total_memory=int(fake.total_mb * 2**20), free_memory=0)

    monkeypatch.setattr(ms, "get_context", get_context)
    monkeypatch.setattr(ms, "set_context", set_context)
    monkeypatch.setattr(ms.hal, "get_device_properties", properties)
    monkeypatch.setattr(ms.runtime, "max_memory_allocated", lambda: int(fake.peak_mb * 2**20))
    monkeypatch.setattr(ms.runtime, "max_memory_reserved", lambda: int(fake.peak_mb * 2**20))
    fake_soc(monkeypatch, fake)
    return fake


def record_profiles(monkeypatch, fake: FakeDevice) -> None:
    """mindspore.profiler.profile records the activities it is asked for and profiles nothing."""
    import mindspore.profiler as profiler

    class Profile:
        def __init__(self, activities=None, **_):
            fake.profiled.append([a.name for a in activities or []])

        def start(self):
            pass

        def step(self):
            pass

        def stop(self):
            pass

    monkeypatch.setattr(profiler, "profile", Profile)


def record_matmuls(monkeypatch, fake: FakeDevice) -> None:
    """Every MatMul primitive called in PyNative records its inputs' shapes (run the worker with
    MS_JIT=0, so that its compiled steps run op by op through it)."""
    from mindspore.ops.auto_generate import gen_ops_prim
    real = gen_ops_prim.MatMul.__call__

    def call(self, a, b):
        fake.matmuls.append((tuple(a.shape), tuple(b.shape)))
        return real(self, a, b)

    monkeypatch.setattr(gen_ops_prim.MatMul, "__call__", call)


def norm_matmuls(fake: FakeDevice) -> list[tuple[tuple, tuple]]:
    """The MatMul calls shaped as a squared norm by MatMul: (1, n)·(n, 1) (core.engine.train_step)."""
    return [(a, b) for a, b in fake.matmuls if len(a) == 2 and a[0] == 1 and b == (a[1], 1) and a[1] > 1]


def fake_peer(monkeypatch, rank: int, world: int, peer_values) -> None:
    """Data parallel as rank `rank` of `world` sees it: msrun's environment, communication.init,
    get_rank and get_group_size, set_auto_parallel_context recorded, and ops.AllReduce adding
    `peer_values(values)` (the other ranks' contribution) to this rank's values."""
    import mindspore.communication as communication
    from mindspore import ops
    monkeypatch.setenv("RANK_SIZE", str(world))
    monkeypatch.setattr(communication, "init", lambda *args, **kwargs: None)
    monkeypatch.setattr(communication, "get_rank", lambda *args, **kwargs: rank)
    monkeypatch.setattr(communication, "get_group_size", lambda *args, **kwargs: world)
    monkeypatch.setattr(ms, "set_auto_parallel_context", lambda **kwargs: None)

    class AllReduce:
        def __init__(self, op="sum", group=None):
            self.op = op

        def __call__(self, x):
            values = x.asnumpy()
            return Tensor(values + np.asarray(peer_values(values), values.dtype))

    monkeypatch.setattr(ops, "AllReduce", AllReduce)
