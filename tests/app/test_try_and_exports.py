"""app.tabs.try_callbacks and app.runs.exports: MindSpore work runs as argv subprocesses, files stay inside roots."""
from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from app.runs import exports
from app.tabs import try_callbacks as cb
from app.tabs import train_callbacks

from tests.app.test_monitor_callbacks import make_run


def fake_runner(outputs: dict):
    calls = []

    def run(argv, **kwargs):
        calls.append(argv)
        assert isinstance(argv, list) and kwargs.get("cwd") and "shell" not in kwargs
        kind = "checkpoint" if "--checkpoint" in argv else "model"
        return SimpleNamespace(**outputs[kind])

    run.calls = calls
    return run


def test_generate_argv_is_an_argv_list():
    argv = cb.generate_argv("models/m", False, "-starts with a dash", True, 16, python="py")
    assert argv == ["py", "-m", "core.generate", "--model", "models/m", "--prompt=-starts with a dash",
                    "--max-new-tokens", "16", "--json", "--chat"]


def test_parse_output_takes_the_json_line_or_the_error():
    answer = cb.parse_output('[WARNING] noise\n{"text": "blue", "new_tokens": 2, "seconds": 0.5}\n', "", 0)
    assert answer.text == "blue" and answer.new_tokens == 2 and "2 tokens" in answer.shown()
    failed = cb.parse_output("", "Traceback...\nerror: no config.json\n", 2)
    assert failed.error == "no config.json" and failed.shown().startswith("⚠")


def test_both_sides_answer_the_same_prompt(console):
    run = make_run(console)
    (run.checkpoints_dir / "step-4").mkdir()
    os.symlink("step-4", run.checkpoints_dir / "best")
    choices = cb.checkpoint_choices(console)
    assert choices and choices[0][1].endswith("checkpoints/best")
    def answer(text):
        return {"stdout": f'{{"text": "{text}", "new_tokens": 1, "seconds": 0.1}}', "stderr": "", "returncode": 0}

    runner = fake_runner({"model": answer("base"), "checkpoint": answer("tuned")})
    model = train_callbacks.starter_config(console).model.path
    base, tuned = cb.compare(console, model, choices[0][1], "Hello?", True, 8, runner=runner)
    assert (base.text, tuned.text) == ("base", "tuned")
    assert all(argv[argv.index("--prompt=Hello?")] for argv in runner.calls)


def test_checkpoint_outside_the_runs_folder_is_refused(console, tmp_path):
    base, tuned = cb.compare(console, None, str(tmp_path), "Hi", True, 4, runner=fake_runner({}))
    assert "loadable base model" in base.error and "outside the folders" in tuned.error


def test_export_target_follows_best_then_last(tmp_path):
    run = tmp_path / "runs" / "r"
    (run / "checkpoints" / "step-8").mkdir(parents=True)
    assert exports.export_target(run, "peft") is None
    os.symlink("step-8", run / "checkpoints" / "last")
    assert exports.export_target(run, "peft").which == "last"
    (run / "checkpoints" / "step-4").mkdir()
    os.symlink("step-4", run / "checkpoints" / "best")
    target = exports.export_target(run, "merged")
    assert (target.which, target.step, target.zip_path.name) == ("best", 4, "best-step-4-merged.zip")


def test_run_export_calls_core_export_once_and_serves_from_the_runs_folder(tmp_path):
    run = tmp_path / "runs" / "r"
    (run / "checkpoints" / "step-4").mkdir(parents=True)
    (run / "export").mkdir()
    os.symlink("step-4", run / "checkpoints" / "best")
    calls = []

    def runner(argv, **kwargs):
        calls.append(argv)
        zip_path = run / "export" / "best-step-4-peft.zip"
        zip_path.write_bytes(b"PK")
        return SimpleNamespace(returncode=0, stdout=f"{zip_path}\n", stderr="")

    path = exports.run_export(run, "peft", tmp_path / "runs", runner=runner)
    assert path.name == "best-step-4-peft.zip"
    assert calls[0][1:] == ["-m", "core.export", "--run", str(run), "--which", "best", "--format", "peft", "--zip"]
    exports.run_export(run, "peft", tmp_path / "runs", runner=runner)
    assert len(calls) == 1  # the zip exists: not exported again
    with pytest.raises(exports.ExportFailed, match="outside"):
        exports.run_export(run, "peft", tmp_path / "elsewhere", runner=runner)


def test_export_failure_reports_the_error_line(tmp_path):
    run = tmp_path / "r"
    (run / "checkpoints" / "step-1").mkdir(parents=True)
    os.symlink("step-1", run / "checkpoints" / "best")
    def runner(argv, **kwargs):
        return SimpleNamespace(returncode=2, stdout="", stderr="error: a full fine-tune has no adapter\n")

    with pytest.raises(exports.ExportFailed, match="no adapter"):
        exports.run_export(run, "peft", tmp_path, runner=runner)
    background = exports.BackgroundExports(runner=runner)
    background.ensure(run, "peft", tmp_path)
    background.join()
    assert "no adapter" in background.failure(run, "peft")


def test_the_checkpoint_picker_labels_each_run_with_its_state_now(console):
    """Issue 31 item 5: the picker said "(running)" for a run that had finished long before; it is
    refilled from the runs' states now and keeps the checkpoint picked before while it is there."""
    older = make_run(console, "20261129-000001_a_lora-r8_fp32_dp1")
    newer = make_run(console, "20261129-000002_b_lora-r8_fp32_dp1")
    for run in (older, newer):
        (run.checkpoints_dir / "step-4").mkdir()
        os.symlink("step-4", run.checkpoints_dir / "last")
    choices, value = cb.checkpoint_picker(console)
    assert value == str(newer.checkpoint("last")) and choices[0][0].endswith("· last (running)")
    newer.write_status(state="finished")
    choices, value = cb.checkpoint_picker(console, current=str(older.checkpoint("last")))
    assert value == str(older.checkpoint("last")) and choices[0][0].endswith("· last (finished)")
    assert cb.checkpoint_picker(console, current="gone")[1] == str(newer.checkpoint("last"))


def test_the_consoles_own_export_refusals_are_said_in_the_pages_language(tmp_path):
    """No checkpoint yet, an unknown format, a crash that printed nothing: each is a Said (app.texts.runs),
    so the Monitor's "export failed" line is 中文 on the 中文 page, not English read back."""
    from app.i18n import problem_text
    run = tmp_path / "r"
    (run / "checkpoints").mkdir(parents=True)
    with pytest.raises(exports.ExportFailed) as none_yet:
        exports.run_export(run, "peft", tmp_path)
    said = none_yet.value.said[0]
    assert said.key == "act.export_no_checkpoint" and str(said).startswith("no checkpoint saved yet")
    assert problem_text(said, "zh") == "尚未保存检查点：第一次评估或保存之后才能下载"
    with pytest.raises(exports.ExportFailed) as unknown:
        exports.run_export(run, "tar", tmp_path)
    assert unknown.value.said[0].key == "act.export_unknown_format" and "'tar'" in str(unknown.value)
    assert problem_text(unknown.value.said[0], "zh").startswith("未知的导出格式 'tar'")

    (run / "checkpoints" / "step-1").mkdir()
    os.symlink("step-1", run / "checkpoints" / "best")
    with pytest.raises(exports.ExportFailed) as crashed:
        exports.run_export(run, "peft", tmp_path, runner=lambda argv, **kw: SimpleNamespace(returncode=-9, stdout="",
                                                                                             stderr=""))
    assert crashed.value.said[0].key == "act.export_exited" and str(crashed.value) == "core.export exited with -9"
    assert problem_text(crashed.value.said[0], "zh") == "core.export 退出码为 -9"
