"""Issue 30, item 8: "Check memory" on a GPU/Ascend machine runs on the device a launch would get
now, not on device 0 when a run holds it (core.run.launcher.dry_run_env; the rule itself:
tests/core/test_devices.py)."""
import types

from app.tabs import train_callbacks as cb
from app.context import Console
import core.run.launcher as launcher
from core.spec.config import Config
from tests.app.test_train_callbacks import form_values


def test_check_memory_gets_the_device_a_launch_would_get(workspace, fake_launcher):
    console = Console.create(workspace, create_run=fake_launcher.create_run, launch=fake_launcher.launch,
                             stop=fake_launcher.stop, reconcile=fake_launcher.reconcile,
                             slots=launcher.DeviceSlots({"gpu": (0, 1)}))
    gpu = cb.check_form(form_values(console, parallel__device="gpu"), console).config
    assert isinstance(gpu, Config)
    started = console.jobs.start(gpu)  # holds device 0
    assert fake_launcher.envs[started.run_id] == {"CUDA_VISIBLE_DEVICES": "0"}
    envs = []

    def runner(argv, **kwargs):
        envs.append(kwargs["env"])
        return types.SimpleNamespace(returncode=0, stderr="", stdout='{"peak_mem_mb": 812.5, "steps": 2}\n')

    measured, _ = cb.dry_run(form_values(console, parallel__device="gpu"), console, runner=runner)
    assert measured.peak_mem_mb == 812.5 and envs[0]["CUDA_VISIBLE_DEVICES"] == "1"
    second = console.jobs.start(gpu.with_updates({"run.name": "second"}))  # now both ids are held:
    assert fake_launcher.envs[second.run_id] == {"CUDA_VISIBLE_DEVICES": "1"}  # the dry run is refused, not shared
    refused, shown = cb.dry_run(form_values(console, parallel__device="gpu"), console, runner=runner)
    assert len(envs) == 1 and "every gpu device (0, 1) is held by a run" in refused.error
    console.jobs.close()


def test_the_device_refusals_read_in_chinese_with_their_facts():
    import pytest
    from app.i18n import problem_text
    from core.spec.config import OPTIMIZER_SHARD_REFUSAL, ConfigError
    from tests.app.test_problem_text import assert_chinese
    with pytest.raises(ConfigError) as info:
        Config().with_updates({"model.dtype": "bfloat16", "method": "full", "parallel.device": "ascend"})
    with pytest.raises(launcher.LaunchError) as held:  # said by its id (run.check.devices_held), not its English
        launcher.dry_run_env("gpu", [launcher.ActiveRun("r1", "gpu", 2, (0, 1))], launcher.DeviceSlots({"gpu": (0, 1)}))
    assert str(held.value) == "every gpu device (0, 1) is held by a run (r1); check memory when one is free"
    for message in (OPTIMIZER_SHARD_REFUSAL, info.value.errors["model.dtype"], held.value):
        assert_chinese(str(message), problem_text(message, "zh"))
