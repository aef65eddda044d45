"""Issue 40: a GPU's or an Ascend NPU's memory and chip asked before launch without MindSpore
(core.run.accelerators: nvidia-smi, npu-smi; their answers faked here), the estimate and the CLI's
fit check that follow them, and "unknown", with the reason, where a tool does not say."""
from __future__ import annotations

from types import SimpleNamespace

import core.run.accelerators as accelerators
import core.train as train
from core.spec.config import Config
from core.spec.memory import estimate_memory

NPU_SMI_M = """\
        NPU ID                         Chip ID                        Chip Logic ID                  Chip Name
        0                              0                              0                              Ascend 910B3
        0                              1                              -                              Mcu
        1                              0                              1                              Ascend 910B3
        1                              1                              -                              Mcu
"""
NPU_SMI_USAGES = """\
        Memory Capacity(MB)            : 15039
        Memory Usage Rate(%)           : 6
        HBM Capacity(MB)               : {hbm}
        HBM Usage Rate(%)              : 0
        Aicore Usage Rate(%)           : 0
"""


def tool(answers: dict[str, str | None]):
    """A subprocess.run that answers by the argv's words after the tool (None: the tool fails)."""
    asked = []

    def run(argv, **kwargs):
        asked.append(argv)
        out = answers.get(" ".join(argv[1:]))
        return SimpleNamespace(returncode=0 if out is not None else 1, stdout=out or "", stderr="")
    run.asked = asked
    return run


def on_path(name):
    return f"/usr/bin/{name}"


def test_a_gpus_memory_is_the_smallest_nvidia_smi_reports():
    runner = tool({"--query-gpu=memory.total --format=csv,noheader,nounits": "81559\n40960\n"})
    found = accelerators.gpu(runner, on_path)
    assert (found.memory_mb, found.why) == (40960.0, None)
    assert runner.asked == [["/usr/bin/nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"]]
    missing = accelerators.gpu(runner, lambda name: None)
    assert missing.memory_mb is None and missing.why.key == "memory.smi_missing" and "nvidia-smi" in missing.why
    silent = accelerators.gpu(tool({}), on_path)
    assert silent.memory_mb is None and silent.why.key == "memory.smi_silent"


def test_an_ascend_npus_chip_and_hbm_from_npu_smi():
    runner = tool({"info -m": NPU_SMI_M, "info -t usages -i 0": NPU_SMI_USAGES.format(hbm=65536),
                   "info -t usages -i 1": NPU_SMI_USAGES.format(hbm=65536)})
    found = accelerators.ascend(runner, on_path)
    assert (found.soc, found.memory_mb, found.why) == ("ascend910b", 65536.0, None)
    a910 = accelerators.ascend(tool({"info -m": NPU_SMI_M.replace("910B3", "910A")}), on_path)  # no usages answer
    assert a910.soc == "ascend910" and a910.memory_mb is None and a910.why.key == "memory.smi_silent"
    nothing = accelerators.ascend(tool({}), on_path)
    assert (nothing.soc, nothing.memory_mb) == (None, None) and nothing.why.key == "memory.smi_silent"
    assert accelerators.ascend(tool({}), lambda name: None).why.key == "memory.smi_missing"


def test_the_estimate_says_why_a_devices_memory_is_unknown_before_launch():
    from tests.core.test_memory import tiny_args
    config = Config().with_updates({"parallel.device": "ascend"})
    why = accelerators.ascend(tool({}), lambda name: None).why
    estimate = estimate_memory(config, tiny_args(), 16, device_memory_mb=None, unknown_why=why)
    note = next(n for n in estimate.notes if n.key == "memory.device_unknown")
    assert "npu-smi is not on PATH" in note and "Check memory" in note and estimate.fits


def test_the_cli_checks_a_gpu_run_against_nvidia_smi_and_says_when_it_cannot(tmp_path, monkeypatch):
    from tests.core.tiny_setup import make_workspace
    from core.spec.config import load_config
    config = load_config(make_workspace(tmp_path), ["parallel.device=gpu"])
    monkeypatch.setattr(accelerators, "ask", lambda device: accelerators.Accelerator(device, memory_mb=1.0))
    over = train.memory_warning(config)
    assert over.key == "memory.fit_over" and "more than the gpu device's 1 MB" in over
    monkeypatch.setattr(accelerators, "ask", lambda device: accelerators.Accelerator(device, memory_mb=1e6))
    assert train.memory_warning(config) is None
    monkeypatch.setattr(accelerators, "ask", lambda device: accelerators.gpu(tool({}), lambda name: None))
    unknown = train.memory_warning(config)
    assert unknown.key == "memory.device_unknown" and "nvidia-smi is not on PATH" in unknown
