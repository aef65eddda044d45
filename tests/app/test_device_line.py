"""Issue 40: the Train tab's device line says the Ascend chip and the attention it runs by the rule the
worker and the estimate follow (core.spec.device_paths.flash_chip), and the device's memory or why it
is unknown before launch; the dry run's result compares the peak with the device's own memory,
read by the dry run on the device, or says it is unknown. In English and 中文."""
from __future__ import annotations

import pytest

import app.runs.devices as devices
import core.run.accelerators as accelerators
from app.tabs.train_callbacks import DryRun, dry_run_html
from core.spec.messages import Message
from tests.app.english import english_words


@pytest.fixture
def found(monkeypatch):
    """Two NPUs and a GPU found here; what their tools say is set by the test."""
    said = {}
    monkeypatch.setattr(devices, "detect", lambda: {
        "cpu": devices.DeviceInfo("cpu", True, 2, ("float16",), ""),
        "gpu": devices.DeviceInfo("gpu", True, 1, ("float16", "bfloat16"), ""),
        "ascend": devices.DeviceInfo("ascend", True, 2, ("float16", "bfloat16"), "")})
    monkeypatch.setattr(accelerators, "ask", lambda device: said[device])
    return said


@pytest.mark.parametrize("soc, says, zh", [
    ("ascend910b", "chip ascend910b: FlashAttentionScore for fp16/bf16 attention (AMP O2) with head sizes that "
                   "are multiples of 16", "芯片 ascend910b：fp16/bf16 注意力"),
    ("ascend910", "chip ascend910: no FlashAttentionScore (Atlas A2/A3 chips only), attention composed",
     "芯片 ascend910：没有 FlashAttentionScore"),
    (None, "chip unknown (npu-smi did not say): composed attention assumed", "芯片未知"),
])
def test_the_ascend_line_says_the_chip_and_its_attention(found, soc, says, zh):
    found["ascend"] = accelerators.Accelerator("ascend", memory_mb=65536.0, soc=soc)
    line = devices.device_note("ascend")
    assert line == f"2 Ascend NPU(s) found; {says}; 65,536 MB each"
    chinese = devices.device_note("ascend", "zh")
    assert zh in chinese and "每块 65,536 MB" in chinese and set(english_words(chinese)) <= {"npu", "smi"}  # the tool


def test_the_gpu_line_says_its_memory_or_why_it_is_unknown(found):
    found["gpu"] = accelerators.Accelerator("gpu", memory_mb=81559.0)
    assert devices.device_note("gpu") == "1 NVIDIA GPU(s) found; 81,559 MB each"
    found["gpu"] = accelerators.Accelerator("gpu", why=Message("memory.smi_silent", smi="nvidia-smi"))
    assert devices.device_note("gpu").endswith("; memory unknown before launch (nvidia-smi did not report the "
                                               "device's total memory)")
    assert "启动前内存未知（nvidia-smi 没有报告设备的总内存）" in devices.device_note("gpu", "zh")
    assert devices.device_note("cpu") == devices._note("cpu", True, 2)  # the CPU: nothing asked


def test_the_dry_run_compares_the_peak_with_the_devices_own_memory():
    fits = dry_run_html(DryRun(1500.0, 40.0, {"steps": 2, "device": "ascend", "device_memory_mb": 65536.0}), None)
    assert "65,536 MB on the ascend device: fits" in fits
    over = dry_run_html(DryRun(70000.0, 40.0, {"steps": 2, "device": "gpu", "device_memory_mb": 65536.0}), None)
    assert "65,536 MB on the gpu device: " in over and "fits" not in over.split("65,536 MB on the gpu device: ")[1]
    unknown = dry_run_html(DryRun(1500.0, 40.0, {"steps": 2, "device": "ascend", "device_memory_mb": None}), None)
    assert "the ascend device's memory: unknown (MindSpore did not report it)" in unknown
    assert "ascend 设备的内存：未知" in dry_run_html(DryRun(1500.0, 40.0, {"device": "ascend"}), None, lang="zh")


def test_a_gpu_run_that_does_not_fit_its_device_is_said_so_before_launch(console, monkeypatch):
    """The console's fit check on a GPU: against nvidia-smi's memory per device (each worker its own);
    unknown when nvidia-smi does not say, which the estimate's notes say instead of passing silently."""
    from app.tabs import train_callbacks as cb
    from tests.app.test_train_callbacks import form_values
    config = cb.check_form(form_values(console, parallel__device="gpu", method="full"), console).config
    monkeypatch.setattr(accelerators, "ask", lambda device: accelerators.Accelerator(device, memory_mb=1.0))
    said = cb.does_not_fit(config, console)
    assert said.startswith("the memory estimate (") and "MB per worker) is more than each gpu device's 1 MB" in said
    assert "超过了每块 gpu 设备的 1 MB" in cb.does_not_fit(config, console, "zh")
    monkeypatch.setattr(accelerators, "ask", lambda device: accelerators.Accelerator(
        device, why=Message("memory.smi_missing", smi="nvidia-smi")))
    assert cb.does_not_fit(config, console) is None
    html = cb.memory_html(config, console)
    assert "the device&#x27;s memory is not known before launch (nvidia-smi is not on PATH)" in html
