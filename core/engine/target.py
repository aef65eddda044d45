"""The device this process computes on, read in one place (`target`), and `faked` for tests that
build a model or a step as it would be built on another device. core.engine.ops and core.engine.devices both
read it; it imports no other module of core."""
from __future__ import annotations

import contextlib

import mindspore as ms

from core.spec.device_paths import TARGETS, device_of

_FAKED: list[str] = []  # faked(...) targets, innermost last


def target() -> str:
    """The device this process computes on: "cpu", "gpu" or "ascend" (MindSpore's device_target,
    unless a test fakes it)."""
    if _FAKED:
        return _FAKED[-1]
    return device_of(ms.get_context("device_target"))


@contextlib.contextmanager
def faked(device: str):
    """Within the block `target()` answers `device`: CPU tests build a model or a step as it would be
    built on a GPU or an Ascend device, and check which path was chosen."""
    if device not in TARGETS:
        raise ValueError(f"unknown device {device!r}")
    _FAKED.append(device)
    try:
        yield
    finally:
        _FAKED.pop()
