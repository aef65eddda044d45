"""Issue 29 item 2, area E: why the worker failed (core.train), a rank's account and a peer's trouble
(core.run.ranks), a checkpoint's manifest and pointers (core.run.ckpt_store), the run folder's files and
paths (core.run.rundir), the launcher's refusals (core.run.launcher) and an evaluation's errors
(core.eval, core.evaluate, the Evaluate panel) are core messages by id (train.*, rank.*, ckpt.*,
rundir.*, run.launch.*, eval.*). Each id is made here by the code that makes it for the page (a real
run folder, a real checkpoint spoilt on disk, the worker's own failure paths with the step's inputs
faked, no MindSpore training run), then said in 中文 from its id with no English word left but the
library's own text it quotes, and with every fact kept; also when it comes back as its record
(status.json's reason_message, another process's error line on stderr); the English alone is shown as it is."""
from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import stat
import types
from pathlib import Path

import numpy as np
import pytest

import core.run.launcher as launcher
from core.run import ckpt_store, ranks
from core.run.records import RunDirError, Status
from core.run.rundir import RunDir, _read_json_object, resolve_inside
from core.spec.config import Config, ConfigError
from core.spec.errors import CheckpointError, said_of
from core.spec.errors import RECORD_MARK, RECORDS_ENV, read_report, record_of
from core.spec.messages import CATALOGUE, Message

from app.tabs import eval_callbacks as ev
from app.i18n import MESSAGES_ZH, problem_text, reason_text
from app.runs.run_status import failure_kind

from tests import skips
from tests.app.english import english_words
from tests.app.test_problem_text import facts

AREA = ("train.", "ckpt.", "rundir.", "eval.", "run.launch.", "rank.said", "rank.then_failed", "rank.peer_",
        "rank.device_oom", "rank.resumable_unknown")
# the parameters that quote a library's, Python's or the OS's own words (said as they are)
QUOTED = ("error", "yaml_says", "figures", "state", "setting_names", "tasks")  # (and the names a user wrote)


def quoted(message, names=QUOTED) -> list[str]:
    """The texts a message quotes from a library (its parameters in `names`, and a parameter's text that
    is no message)."""
    if not isinstance(message, Message):
        return [str(message)] if message else []
    found = []
    for name, value in message.params.items():
        if isinstance(value, Message):
            found += quoted(value, names)
        elif name in names or (name == "reason" and isinstance(value, str)):
            found.append(str(value))
    return found


def assert_chinese(message: Message, chinese: str, names=QUOTED) -> None:
    """No English word left in `chinese` but what the message quotes (parameters in `names`), and
    every fact of the English kept."""
    english = str(message)
    assert chinese != english, f"not translated: {english}"
    rest = chinese
    texts = quoted(message, names)
    for text in sorted(texts, key=len, reverse=True):
        rest = rest.replace(text, " ")
    assert english_words(rest) == [], f"English left in {chinese!r} (from {english!r})"
    missing = [f for f in facts(english) if f not in chinese and not any(f in q for q in texts)]
    assert not missing, f"facts dropped {missing} in {chinese!r} (from {english!r})"


# ---- the producers --------------------------------------------------------------------------------------

@pytest.fixture
def run(tmp_path) -> RunDir:
    run = RunDir.create(tmp_path / "runs", "20261203-000000_x", Config().to_yaml())
    run.write_status(state="starting")
    return run


def _weights() -> dict[str, np.ndarray]:
    return {"lm_head.weight": np.ones((2, 3), np.float32)}


def _checkpoint(run: RunDir, step: int = 4, method: str = "lora", pointers=("last",)) -> Path:
    state = {"step": step, "method": method, "base_model": {"sha256": "a" * 64}}
    return ckpt_store.save_train_checkpoint(run.checkpoints_dir, step, _weights(), {"m": np.zeros(2, np.float32)},
                                            state, pointers=pointers)


def raised(call, *errors):
    try:
        call()
    except errors or (Exception,) as err:  # noqa: B030
        return err
    raise AssertionError("no error")


def _message_of(err: BaseException) -> Message:
    said = said_of(err)
    assert isinstance(said, Message), (type(err).__name__, str(err))
    return said


def _spoilt(run: RunDir, change) -> Message:
    folder = _checkpoint(run)
    change(folder)
    return _message_of(raised(lambda: ckpt_store.verify_checkpoint(folder), CheckpointError))


def _manifest(folder: Path, edit) -> None:
    path = folder / ckpt_store.MANIFEST_FILE
    data = json.loads(path.read_text())
    path.write_text(edit(data) if callable(edit) else edit)


def _flip(folder: Path) -> None:
    path = folder / ckpt_store.WEIGHTS_FILE
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))


def _status_file(run: RunDir, text: str | None) -> Message:
    run.status_path.unlink()
    if text == "folder":
        run.status_path.mkdir()
    elif text is not None:
        run.status_path.write_text(text)
    return _message_of(raised(run.read_status, RunDirError))


def _trainer():
    import core.train as train  # MindSpore: only for the worker's own cases
    return train


def _loop():
    import core.engine.trainer as trainer  # MindSpore: only for the worker's own cases
    return trainer


def _worker_fails(run: RunDir, monkeypatch, exc: BaseException, device: str = "cpu",
                  figures: str = "peak allocated 79,000 MB of the device's 81,000 MB") -> Message:
    """core.train.run_worker's own failure paths: the step's inputs raise `exc` (reading the config
    is the first thing the worker does; a device's error comes from choosing the device)."""
    train = _trainer()
    config = Config().with_updates({"parallel.device": device}) if device != "cpu" else Config()
    if device == "cpu":
        monkeypatch.setattr(train, "load_config", lambda path: (_ for _ in ()).throw(exc))
    else:
        monkeypatch.setattr(train, "load_config", lambda path: config)
        monkeypatch.setattr(train, "use_device", lambda device: (_ for _ in ()).throw(exc))
        monkeypatch.setattr(train.devices, "memory_figures", lambda: figures)
    assert train.run_worker(str(run.path)) == 1
    status = run.read_status()
    assert status.state == "failed"
    return Message.from_json(status.reason_message)


def _step_fails(loss: float, applied: bool, scaler: bool, overflows: int = 0) -> Message:
    """core.engine.trainer.Trainer.agree_on_step with one rank's step outputs (its cluster a single process)."""
    trainer = _loop()
    fake = types.SimpleNamespace(cluster=types.SimpleNamespace(world=1, sum=lambda values: values),
                                 state=trainer.LoopState(step=2), _streak=None,
                                 loss_scaler=types.SimpleNamespace(scale_value=types.SimpleNamespace(
                                     asnumpy=lambda: np.float32(1.0))) if scaler else None)
    out = {"loss": loss, "applied": applied, "loss_scale": 65536.0}
    if overflows:
        fake._streak = {"first_step": 1, "first_scale": 65536.0, "bad_loss": False}
    err = raised(lambda: trainer.Trainer.agree_on_step(fake, out, overflows), trainer.TrainingFailed)
    return _message_of(err)


def _fake_trainer(run: RunDir, method: str = "full", sha: str = "a" * 64, total_steps: int = 10, trainable=None):
    import mindspore as ms
    trainer = _loop()
    params = trainable if trainable is not None else {
        "lm_head.weight": ms.Parameter(ms.Tensor(np.zeros((2, 3), np.float32)), name="lm_head.weight")}
    cfg = Config().with_updates({"method": method} if method != "lora" else {})
    sft = types.SimpleNamespace(take_forked=lambda *args: trainer.objectives.Objective.take_forked(None, *args))
    fake = types.SimpleNamespace(cfg=cfg, base_sha256=lambda: sha, trainable=params, total_steps=total_steps,
                                 objective=sft)
    return trainer, fake


def _restore(run, monkeypatch) -> Message:
    folder = _checkpoint(run)
    trainer, fake = _fake_trainer(run, method="full")
    return _message_of(raised(lambda: trainer.Trainer.restore(fake, str(folder)), CheckpointError))


def _fork(run, **changes) -> Message:
    folder = _checkpoint(run)
    trainer, fake = _fake_trainer(run, **changes)
    return _message_of(raised(lambda: trainer.Trainer.fork(fake, str(folder)), CheckpointError, ConfigError))


def _fork_steps(run) -> Message:
    trainer, fake = _fake_trainer(run, method="lora", total_steps=4)
    err = raised(lambda: trainer.Trainer.fork(fake, str(_checkpoint(run))), ConfigError)
    return err.problems[0].reason


def _router(run) -> Message:
    train, trainer = _trainer(), _loop()
    fake = types.SimpleNamespace(cfg=Config().with_updates({"train.router_aux_loss": True}),
                                 model=types.SimpleNamespace(args=types.SimpleNamespace(moe=None,
                                                                                        architecture="LlamaForCausalLM")))
    err = raised(lambda: trainer.Trainer._router_aux_loss_coef(fake), trainer.TrainingFailed)
    assert train.failure_kind_of(err) == "config"
    return _message_of(err)


def _msrun(monkeypatch) -> Message:
    trainer = _loop()
    monkeypatch.delenv("MS_ROLE", raising=False)
    monkeypatch.delenv("RANK_SIZE", raising=False)
    return _message_of(raised(lambda: trainer.Cluster(2), ConfigError))


def _dry_steps(tmp_path, capsys, monkeypatch) -> Message:
    """The dry run's refusal as the console receives it: its record on stderr (core.spec.errors.report),
    read by the Train tab (train_callbacks._parse_dry_run); the English line stays for the CLI."""
    from core import dry_run
    from app.tabs.train_callbacks import _parse_dry_run
    config = tmp_path / "c.yaml"
    config.write_text(Config().to_yaml())
    monkeypatch.setenv(RECORDS_ENV, "1")
    assert dry_run.main(["--config", str(config), "--steps", "0"]) == 2
    stderr = capsys.readouterr().err
    assert stderr.startswith("error: --steps 0: must be >= 1\n")
    found = _parse_dry_run("", stderr, 2, 1.0).error
    assert isinstance(found, Message) and found == read_report(stderr)
    return found


def _several_ranks(run, monkeypatch, inner: Message, peer: dict | None = None) -> Message:
    """core.train._fail in rank 1 of 2: its own failure, or one that follows a peer's trouble."""
    train = _trainer()
    monkeypatch.setenv("RANK_ID", "1")
    monkeypatch.setenv("MS_WORKER_NUM", "2")
    if peer is not None:
        run.ranks_dir.mkdir(exist_ok=True)
        attempt = run.read_status().attempt
        ranks.rank_file(run, 0).write_text(json.dumps({"rank": 0, "attempt": attempt, "hostname": "elsewhere",
                                                        **peer}))
        if "beat" in peer:
            ranks.beat_file(run, 0).write_text(json.dumps(peer["beat"]))
            ranks.rank_file(run, 1).write_text(json.dumps({"rank": 1, "attempt": attempt, "hostname": "elsewhere"}))
            ranks.beat_file(run, 1).write_text(json.dumps({"time": peer["beat"]["time"] + 42, "step": 9}))
    train._fail(run, None, inner, "nonfinite")
    status = run.read_status()
    assert status.state == "failed" and status.reason_message is not None
    return Message.from_json(status.reason_message)


def _peer_stopped(run, monkeypatch) -> Message:
    monkeypatch.setattr(ranks.socket, "gethostname", lambda: "elsewhere")
    monkeypatch.setattr(ranks, "process_state", lambda pid: "stopped (SIGSTOP or a debugger)")
    return _several_ranks(run, monkeypatch, Message("train.nonfinite_loss", step=3),
                          {"pid": 12345}).params["note"]


def _peer_behind(run) -> Message:
    """A peer whose last beat is well before this rank's: the hang a failing rank blames (its judge
    then writes rank.hung)."""
    run.ranks_dir.mkdir(exist_ok=True)
    attempt = run.read_status().attempt
    for rank, beat in ((0, {"time": 1000.0, "step": 7}), (1, {"time": 1042.0, "step": 9})):
        ranks.rank_file(run, rank).write_text(json.dumps({"rank": rank, "attempt": attempt, "hostname": "elsewhere"}))
        ranks.beat_file(run, rank).write_text(json.dumps(beat))
    kind, said, record = ranks.peer_trouble(run, 1, attempt)
    assert kind == "hang" and record["rank"] == 0
    return said


def _resumable_unknown(run, monkeypatch) -> Message:
    def broken(*args, **kwargs):
        raise OSError(errno.EIO, "Input/output error")
    monkeypatch.setattr(ckpt_store, "newest_resumable", broken)
    run.write_status(state="running")
    ranks.write_verdict(run, "failed", Message("run.crash"))
    return Message.from_json(run.read_status().reason_message).params["note"]


def _launch_not_queued(run) -> Message:
    run.write_status(state="failed")
    return _message_of(raised(lambda: launcher.launch(run, data_parallel=1), launcher.LaunchError))


def _launch_program(run, tmp_path, data_parallel: int, executable: bool) -> Message:
    program = tmp_path / "bin" / "python"
    program.parent.mkdir(exist_ok=True)
    program.write_bytes(b"\x00\x01 not a program")
    if executable:
        program.chmod(program.stat().st_mode | stat.S_IXUSR)
    run.write_status(state="stopped")
    run.restart_for_resume()
    err = raised(lambda: launcher.launch(run, data_parallel=data_parallel, python=str(program),
                                          **({"worker": ["core.train"]} if data_parallel == 1 else {})),
                  launcher.LaunchError)
    return _message_of(err)


def _launch_exec_fails(run, tmp_path) -> tuple[Message, Message]:
    said = _launch_program(run, tmp_path, 1, executable=True)
    return said, Message.from_json(run.read_status().reason_message)


def _survived(run, monkeypatch) -> Message:
    run.write_status(state="running", pid=os.getpid(), hostname="here")
    fake = types.SimpleNamespace(pid=424242)
    monkeypatch.setattr(launcher._RunProcesses, "scan", lambda self: [fake])
    monkeypatch.setattr(launcher._RunProcesses, "signal", lambda self, number: None)
    monkeypatch.setattr(launcher, "_wait_until", lambda *args, **kwargs: False)
    monkeypatch.setattr(launcher, "_on_other_host", lambda status: False)
    return _message_of(raised(lambda: launcher.stop(run, graceful=False), launcher.LaunchError))


def _eval_settings(text: str) -> Message:
    from core.eval.eval_tasks import EvalError, EvalSettings
    return _message_of(raised(lambda: EvalSettings.from_yaml(text, "runs/evals/e1/config.yaml"), EvalError))


def _eval_check(**changes) -> Message:
    from core.eval.eval_tasks import EvalError, EvalSettings
    settings = EvalSettings(**{"model": "models/tiny", "tasks": ["demo"], **changes})
    return _message_of(raised(settings.check, EvalError))


def _eval_source(tmp_path, kind: str) -> Message:
    from core.eval.eval_tasks import EvalError, resolve_source
    folder = tmp_path / "m"
    if kind != "none":
        folder.mkdir()
        (folder / "config.json").write_text("{}")
    if kind == "ckpt":
        (folder / "tokenizer.json").write_text("{}")
        (folder / "model.ckpt").write_bytes(b"x")
    return _message_of(raised(lambda: resolve_source(folder), EvalError))


def _local_tasks(tmp_path, broken: bool) -> Message:
    from core.eval.eval_tasks import EvalError, local_tasks
    folder = tmp_path / "tasks"
    if broken:
        folder.mkdir()
        (folder / "t.yaml").write_text("task: [demo\n")
    return _message_of(raised(lambda: local_tasks([folder]), EvalError))


def _not_installed(monkeypatch) -> Message:
    import importlib.util

    from core.eval import eval_tasks
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    return _message_of(raised(eval_tasks.require_lm_eval, eval_tasks.EvalError))


def _task_data(tmp_path) -> Message:
    from core import evaluate
    from core.eval.eval_tasks import EvalError
    config = {"dataset_kwargs": {"data_files": {"test": "missing.jsonl"}}}
    return _message_of(raised(lambda: evaluate._resolve_data_files("demo", config, tmp_path), EvalError))


def _unknown_task(tmp_path, include: bool, local: bool) -> Message:
    skips.module("lm_eval")
    from core import evaluate
    from core.eval.eval_tasks import EvalError
    folder = tmp_path / "tasks"
    folder.mkdir(exist_ok=True)
    if local:
        (folder / "demo.yaml").write_text("task: demo_local\n")
    paths = [str(folder)] if include else []
    return _message_of(raised(lambda: evaluate.resolve_tasks(["zzqx_no_such_task"], paths), EvalError))


def _eval_panel(console, case: str) -> str:
    from tests.app.test_monitor_callbacks import make_run
    trained = make_run(console)
    trained.write_status(state="finished")
    folder = console.settings.data_dirs[0] / "eval_tasks"
    if case != "no folders":
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "demo.yaml").write_text("task: demo\n")
    else:
        shutil.rmtree(folder, ignore_errors=True)
    if case == "no base":
        trained.config_path.write_text("model: [\n")
    tasks = ["demo"] if case in ("no best", "no base") else ["nope"]
    targets = ["best"] if case == "no best" else ["base"]
    return ev.start(console, [trained.run_id], tasks, targets)


# id -> how its message is made (arguments: the fixtures named)
CASES = {
    "train.needs_msrun": lambda run, tmp_path, monkeypatch: _msrun(monkeypatch),
    "train.not_moe": lambda run, tmp_path, monkeypatch: _router(run),
    "train.method_resume": lambda run, tmp_path, monkeypatch: _restore(run, monkeypatch),
    "train.method_fork": lambda run, tmp_path, monkeypatch: _fork(run, method="full"),
    "train.other_base": lambda run, tmp_path, monkeypatch: _fork(run, method="lora", sha="b" * 64),
    "train.fork_parameters": lambda run, tmp_path, monkeypatch: _fork(run, method="lora", trainable={}),
    "train.fork_steps": lambda run, tmp_path, monkeypatch: _fork_steps(run),
    "train.nonfinite_loss": lambda run, tmp_path, monkeypatch: _step_fails(float("nan"), False, scaler=False),
    "train.nonfinite_gradients": lambda run, tmp_path, monkeypatch: _step_fails(1.5, False, scaler=False),
    "train.loss_scale_collapse": lambda run, tmp_path, monkeypatch: _step_fails(1.5, False, scaler=True,
                                                                                 overflows=24),
    "train.out_of_memory": lambda run, tmp_path, monkeypatch: _worker_fails(run, monkeypatch,
                                                                            MemoryError("std::bad_alloc")),
    "train.device_out_of_memory": lambda run, tmp_path, monkeypatch: _worker_fails(
        run, monkeypatch, RuntimeError("Memory not enough: alloc size[1024]"), device="ascend", figures=""),
    "train.device_out_of_memory_figures": lambda run, tmp_path, monkeypatch: _worker_fails(
        run, monkeypatch, RuntimeError("Device(id:0) memory isn't enough and alloc failed, alloc size: 4096B."),
        device="gpu"),
    "train.disk_full": lambda run, tmp_path, monkeypatch: _worker_fails(
        run, monkeypatch, OSError(errno.ENOSPC, "No space left on device", str(run.path / "metrics.jsonl"))),
    "train.disk_full_run_file": lambda run, tmp_path, monkeypatch: _worker_fails(
        run, monkeypatch, OSError(errno.ENOSPC, "No space left on device")),
    "train.crashed": lambda run, tmp_path, monkeypatch: _worker_fails(run, monkeypatch,
                                                                      KeyError("model.layers.0.mlp")),
    "rank.said": lambda run, tmp_path, monkeypatch: _several_ranks(run, monkeypatch,
                                                                   Message("train.nonfinite_loss", step=3)),
    "rank.then_failed": lambda run, tmp_path, monkeypatch: _several_ranks(
        run, monkeypatch, Message("train.crashed", error="RuntimeError: HCCL timeout"),
        {"state": "exited", "exit_signal": int(signal.SIGKILL)}),
    "rank.peer_exited": lambda run, tmp_path, monkeypatch: _several_ranks(
        run, monkeypatch, Message("train.nonfinite_loss", step=3), {"state": "exited", "exit_code": 3}).params["note"],
    "rank.peer_stopped": lambda run, tmp_path, monkeypatch: _peer_stopped(run, monkeypatch),
    "rank.peer_behind": lambda run, tmp_path, monkeypatch: _peer_behind(run),
    "rank.device_oom": lambda run, tmp_path, monkeypatch: ranks.device_oom_reason(
        RuntimeError("Memory not enough: alloc size[1024]"), "ascend"),
    "rank.device_oom_figures": lambda run, tmp_path, monkeypatch: ranks.device_oom_reason(
        RuntimeError("Memory not enough: alloc size[1024]"), "gpu", "peak allocated 79,000 MB of the device's 81,000 MB"),
    "rank.resumable_unknown": lambda run, tmp_path, monkeypatch: _resumable_unknown(run, monkeypatch),
    "ckpt.dtype_unsupported": lambda run, tmp_path, monkeypatch: _message_of(raised(
        lambda: ckpt_store.write_safetensors(tmp_path / "x.safetensors", {"lm_head.weight": np.zeros(2, np.complex64)}),
        CheckpointError)),
    "ckpt.no_step": lambda run, tmp_path, monkeypatch: _message_of(raised(
        lambda: ckpt_store._newest(run.checkpoints_dir, 7), CheckpointError)),
    "ckpt.unreadable_manifest": lambda run, tmp_path, monkeypatch: _spoilt(
        run, lambda folder: _manifest(folder, '{"files": ')),
    "ckpt.not_manifest": lambda run, tmp_path, monkeypatch: _spoilt(run, lambda folder: _manifest(folder, "[1]")),
    "ckpt.incomplete": lambda run, tmp_path, monkeypatch: _message_of(raised(
        lambda: ckpt_store.resolve_checkpoint(_unlinked(_checkpoint(run), ckpt_store.OPTIMIZER_FILE)),
        CheckpointError)),
    "ckpt.manifest_omits": lambda run, tmp_path, monkeypatch: _spoilt(run, lambda folder: _manifest(
        folder, lambda data: json.dumps({**data, "files": {k: v for k, v in data["files"].items()
                                                           if k != ckpt_store.OPTIMIZER_FILE}}))),
    "ckpt.file_missing": lambda run, tmp_path, monkeypatch: _spoilt(run, lambda folder: _manifest(
        folder, lambda data: json.dumps({**data, "files": {**data["files"], "extra.bin": {"bytes": 1}}}))),
    "ckpt.size_differs": lambda run, tmp_path, monkeypatch: _spoilt(run, lambda folder: (
        folder / ckpt_store.WEIGHTS_FILE).write_bytes((folder / ckpt_store.WEIGHTS_FILE).read_bytes()[:-4])),
    "ckpt.sha_differs": lambda run, tmp_path, monkeypatch: _spoilt(run, _flip),
    "ckpt.no_last": lambda run, tmp_path, monkeypatch: _message_of(raised(
        lambda: ckpt_store.resolve_checkpoint(_checkpoint(run, pointers=()) and run.path), CheckpointError)),
    "ckpt.no_last_none": lambda run, tmp_path, monkeypatch: _message_of(raised(
        lambda: ckpt_store.resolve_checkpoint(run.path), CheckpointError)),
    "ckpt.not_found": lambda run, tmp_path, monkeypatch: _message_of(raised(
        lambda: ckpt_store.resolve_checkpoint(run.checkpoints_dir / "step-9"), CheckpointError)),
    "ckpt.corrupt_others": lambda run, tmp_path, monkeypatch: _corrupt(run, others=True),
    "ckpt.corrupt_none": lambda run, tmp_path, monkeypatch: _corrupt(run, others=False),
    "ckpt.disk_full": lambda run, tmp_path, monkeypatch: ckpt_store._disk_full(run.checkpoints_dir, 8, 10 ** 15).message,
    "ckpt.intact": lambda run, tmp_path, monkeypatch: (_checkpoint(run) and ckpt_store._disk_full(
        run.checkpoints_dir, 8, 10 ** 15).message.params["note"]),
    "ckpt.untouched": lambda run, tmp_path, monkeypatch: ckpt_store._disk_full(
        run.checkpoints_dir, 8, 10 ** 15).message.params["note"],
    "rundir.no_folder": lambda run, tmp_path, monkeypatch: _message_of(raised(
        lambda: RunDir(tmp_path / "gone").write_status(state="running"), RunDirError)),
    "rundir.no_file": lambda run, tmp_path, monkeypatch: _status_file(run, None),
    "rundir.unreadable": lambda run, tmp_path, monkeypatch: _status_file(run, "folder"),
    "rundir.invalid_json": lambda run, tmp_path, monkeypatch: _status_file(run, '{"state": '),
    "rundir.not_object": lambda run, tmp_path, monkeypatch: _status_file(run, "[1]"),
    "rundir.what.status": lambda run, tmp_path, monkeypatch: _status_file(run, None).params["what"],
    "rundir.what.control": lambda run, tmp_path, monkeypatch: (run.control_path.write_text("[") and _message_of(
        raised(run.read_control, RunDirError)).params["what"]),
    # (read_profile_summary says None for an unreadable summary: its reader's own error)
    "rundir.what.profile": lambda run, tmp_path, monkeypatch: _message_of(raised(
        lambda: _read_json_object(run.profile_summary_path, "profile"), RunDirError)).params["what"],
    "rundir.bad_run_id": lambda run, tmp_path, monkeypatch: _message_of(raised(
        lambda: RunDir.create(tmp_path / "runs", "a b", ""), RunDirError)),
    "rundir.exists": lambda run, tmp_path, monkeypatch: _message_of(raised(
        lambda: RunDir.create(tmp_path / "runs", run.run_id, ""), RunDirError)),
    "rundir.not_over": lambda run, tmp_path, monkeypatch: _message_of(raised(run.restart_for_resume, RunDirError)),
    "rundir.unusable_path": lambda run, tmp_path, monkeypatch: _message_of(raised(
        lambda: resolve_inside(tmp_path, "a\0b"), RunDirError)),
    "rundir.outside": lambda run, tmp_path, monkeypatch: _message_of(raised(
        lambda: resolve_inside(tmp_path / "runs", "../elsewhere"), RunDirError)),
    "run.launch.not_queued": lambda run, tmp_path, monkeypatch: _launch_not_queued(run),
    "run.launch.not_executable": lambda run, tmp_path, monkeypatch: _launch_program(run, tmp_path, 1, False),
    "run.launch.msrun_missing": lambda run, tmp_path, monkeypatch: _launch_program(run, tmp_path, 2, False),
    "run.launch.could_not_start": lambda run, tmp_path, monkeypatch: _launch_exec_fails(run, tmp_path)[0],
    "run.launch.worker_not_started": lambda run, tmp_path, monkeypatch: _launch_exec_fails(run, tmp_path)[1],
    "run.launch.survived_kill": lambda run, tmp_path, monkeypatch: _survived(run, monkeypatch),
    "eval.not_settings": lambda run, tmp_path, monkeypatch: _eval_settings("[1]"),
    "eval.unknown_settings": lambda run, tmp_path, monkeypatch: _eval_settings("model: m\ntasks: [a]\nfoo: 1\n"),
    "eval.no_model": lambda run, tmp_path, monkeypatch: _eval_check(model=""),
    "eval.no_tasks": lambda run, tmp_path, monkeypatch: _eval_check(tasks=[]),
    "eval.limit": lambda run, tmp_path, monkeypatch: _eval_check(limit=0),
    "eval.batch_size": lambda run, tmp_path, monkeypatch: _eval_check(batch_size=0),
    "eval.not_installed": lambda run, tmp_path, monkeypatch: _not_installed(monkeypatch),
    "eval.not_a_folder": lambda run, tmp_path, monkeypatch: _eval_source(tmp_path, "none"),
    "eval.ckpt_export": lambda run, tmp_path, monkeypatch: _eval_source(tmp_path, "ckpt"),
    "eval.not_a_model": lambda run, tmp_path, monkeypatch: _eval_source(tmp_path, "config"),
    "eval.include_not_folder": lambda run, tmp_path, monkeypatch: _local_tasks(tmp_path, broken=False),
    "eval.invalid_yaml": lambda run, tmp_path, monkeypatch: _local_tasks(tmp_path, broken=True),
    "eval.data_file_missing": lambda run, tmp_path, monkeypatch: _task_data(tmp_path),
    "eval.unknown_task": lambda run, tmp_path, monkeypatch: _unknown_task(tmp_path, include=True, local=False),
    "eval.unknown_task_local": lambda run, tmp_path, monkeypatch: _unknown_task(tmp_path, include=True, local=True),
    "eval.unknown_task_no_paths": lambda run, tmp_path, monkeypatch: _unknown_task(tmp_path, include=False,
                                                                                   local=False),
}
CASES["train.dry_out_of_memory"] = lambda run, tmp_path, monkeypatch: _dry_out_of_memory(tmp_path, monkeypatch)


def _dry_out_of_memory(tmp_path, monkeypatch) -> Message:
    """The dry run out of host memory: its record on stderr, as the Train tab reads it."""
    import contextlib
    import io

    from core import dry_run
    from app.tabs.train_callbacks import _parse_dry_run

    def out_of_memory(config, steps):
        raise MemoryError("std::bad_alloc")

    config = tmp_path / "dry.yaml"
    config.write_text(Config().to_yaml())
    monkeypatch.setattr(dry_run, "dry_run", out_of_memory)
    monkeypatch.setenv(RECORDS_ENV, "1")
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        assert dry_run.main(["--config", str(config)]) == 1
    assert stderr.getvalue().startswith("error: out of memory during the dry run: std::bad_alloc\n")
    return _parse_dry_run("", stderr.getvalue(), 1, 1.0).error
# made by the cases that need other fixtures (below): the console's Evaluate panel, the dry run's CLI
PANEL = {"eval.no_best": "no best", "eval.no_base": "no base", "eval.tasks_not_local": "not local",
         "eval.tasks_no_folders": "no folders"}
OTHERS = {"train.dry_steps", "eval.task_data_missing"}


def _unlinked(folder: Path, name: str) -> Path:
    (folder / name).unlink()
    return folder


def _corrupt(run: RunDir, others: bool) -> Message:
    if others:
        _checkpoint(run, step=2, pointers=())
    folder = _checkpoint(run, step=4)
    _flip(folder)
    return _message_of(raised(lambda: ckpt_store.verified_folder(run.path), CheckpointError))


def said_by_id(key: str, message: Message, names=QUOTED) -> None:
    """`message` is `key`'s, said in 中文 by its id (no English word but what it quotes from the
    parameters in `names`, every fact kept), and the same when it comes back as its record (status.json's
    reason_message, another process's error line); its English alone is shown as it is."""
    assert isinstance(message, Message) and message.key == key, (key, message)
    assert key in MESSAGES_ZH
    english = str(message)
    assert problem_text(message, "en") == english
    chinese = problem_text(message, "zh")
    assert_chinese(message, chinese, names)
    # ... and as its record: status.json's reason, another process's line (core.spec.errors.report)
    from app.i18n import reason_text
    assert reason_text(english, "zh", json.loads(json.dumps(message.to_json()))) == chinese
    again = read_report(f"error: {english}\n{RECORD_MARK}{json.dumps(record_of(message))}\n")
    assert again.to_json() == message.to_json() and problem_text(again, "zh") == chinese
    assert problem_text(english, "zh") == english and reason_text(english, "zh") == english  # no record: as it is


@pytest.mark.slow
@pytest.mark.parametrize("key", list(CASES))
def test_each_message_of_the_worker_and_the_run_folder_is_said_by_its_id(key, run, tmp_path, monkeypatch):
    message = CASES[key](run, tmp_path, monkeypatch)
    said_by_id(key, message)


@pytest.mark.parametrize("key", list(PANEL))
def test_the_evaluate_panels_refusals_are_said_by_id(key, console, monkeypatch):
    from core.eval import eval_tasks
    monkeypatch.setattr(eval_tasks, "require_lm_eval", lambda: None)
    monkeypatch.setattr(ev, "require_lm_eval", lambda: None)
    caught = []
    real = problem_text

    def keep(message, lang):
        caught.append(message)
        return real(message, lang)

    monkeypatch.setattr(ev, "problem_text", keep)
    answer = _eval_panel(console, PANEL[key])
    assert answer.startswith("⚠ ") and caught, answer
    said_by_id(key, _message_of(caught[-1]))


def test_the_dry_runs_steps_are_said_by_id(tmp_path, capsys, monkeypatch):
    said_by_id("train.dry_steps", _dry_steps(tmp_path, capsys, monkeypatch))


def test_the_dry_runs_own_process_hands_the_console_its_record(tmp_path):
    """`python -m core.dry_run` in a process of its own, run as the Train tab runs it (its environment
    with RECORDS_ENV): the error comes back as its record, said in 中文 by its id; without the variable
    (a command-line user) the process prints its English only."""
    import os
    import subprocess
    import sys

    from core.run.launcher import REPO_ROOT
    from app.tabs.train_callbacks import _parse_dry_run, dry_run_argv
    config = tmp_path / "c.yaml"
    config.write_text(Config().to_yaml())
    argv = dry_run_argv(config, sys.executable) + ["--steps", "0"]
    env = {k: v for k, v in os.environ.items() if k != RECORDS_ENV}
    done = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
                          env={**env, RECORDS_ENV: "1"})
    found = _parse_dry_run(done.stdout, done.stderr, done.returncode, 1.0).error
    assert done.returncode == 2 and isinstance(found, Message) and found.key == "train.dry_steps"
    assert problem_text(found, "zh") != str(found) == "--steps 0: must be >= 1"
    plain = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert plain.stderr == "error: --steps 0: must be >= 1\n" and read_report(plain.stderr) is None


def test_a_tasks_data_that_is_not_on_disk_is_said_by_id(tmp_path, monkeypatch):
    """lm-eval's loading fails without the hub: its own words are quoted after ours."""
    skips.module("lm_eval")
    from core import evaluate
    from core.eval.eval_tasks import EvalError
    import lm_eval.tasks as tasks
    folder = tmp_path / "tasks"
    folder.mkdir()
    (folder / "demo.yaml").write_text("task: demo\ndataset_path: json\n")

    def offline(specs, manager):
        raise ConnectionError("Couldn't reach 'json' on the Hub (LocalEntryNotFoundError)")

    monkeypatch.setattr(tasks, "get_task_dict", offline)
    message = _message_of(raised(lambda: evaluate.resolve_tasks(["demo"], [str(folder)]), EvalError))
    said_by_id("eval.task_data_missing", message)


def test_every_id_of_area_e_is_made_here_and_has_chinese():
    made = set(CASES) | set(PANEL) | OTHERS
    assert made == {key for key in CATALOGUE if key.startswith(AREA)}
    assert made <= set(MESSAGES_ZH)


# ---- the status a failure leaves ----------------------------------------------------------------------

def test_a_failed_ranks_reason_keeps_its_id_in_status_json(run, monkeypatch):
    """With several ranks the worker said 'rank 1: ' before its reason as text; the id was lost."""
    said = _several_ranks(run, monkeypatch, Message("train.nonfinite_loss", step=3))
    assert said.key == "rank.said" and said.params["reason"].key == "train.nonfinite_loss"
    status = run.read_status()
    assert status.reason == "rank 1: non-finite loss at step 3" and status.failed_rank == 1
    chinese = reason_text(status.reason, "zh", status.reason_message)
    assert chinese == "rank 1：第 3 步的损失不是有限值（NaN/Inf）"
    assert reason_text(status.reason, "zh") == status.reason  # a folder written before the ids: as it is
    assert failure_kind(Status(state="failed", reason=status.reason, reason_message=status.reason_message)) == \
        "nonfinite"


@pytest.mark.parametrize("key, kind", [
    ("train.nonfinite_loss", "nonfinite"), ("train.nonfinite_gradients", "nonfinite"),
    ("train.loss_scale_collapse", "loss_scale"), ("train.out_of_memory", "oom"), ("train.disk_full", "disk_full"),
    ("train.crashed", "crash"), ("rank.then_failed", "crash"), ("rank.said", "nonfinite"), ("ckpt.sha_differs", "checkpoint"),
    ("rank.peer_behind", "hang"),
])
def test_a_failure_is_classified_by_its_ids_without_a_failure_kind(key, kind, run, tmp_path, monkeypatch):
    message = CASES[key](run, tmp_path, monkeypatch)
    status = Status(state="failed", reason=str(message), reason_message=message.to_json())
    assert failure_kind(status) == kind, (key, str(message))  # by id: the English is not read back


def test_a_classification_needs_no_english_of_ours():
    """The kinds of our own failures come from the ids: a reason whose English changed still reads
    as its id; the libraries' words (a CUDA out-of-memory) still classify by pattern."""
    ours = Message("train.nonfinite_loss", step=3)
    moved = Status(state="failed", reason="(reworded)", reason_message=ours.to_json())
    assert failure_kind(moved) == "nonfinite"
    library = Status(state="failed", reason=str(Message("train.crashed", error="RuntimeError: CUDA out of memory")))
    assert failure_kind(library) == "oom"


def test_an_entry_points_error_is_its_record_else_its_last_error_line_as_it_is():
    from core.spec.errors import error_on
    message = Message("export.full_no_adapter")
    record = f"{RECORD_MARK}{json.dumps(record_of(message))}"
    assert error_on(f"error: {message}\n{record}\nwarning: later\n").to_json() == message.to_json()
    crash = "error: first\nTraceback (most recent call last):\nValueError: bad shape\nwarning: done\n"
    assert error_on(crash) == "first"  # a crash without a record: its last `error: ` line, as it is
    assert error_on(crash, marks=("Error",)) == "ValueError: bad shape"  # the exports' reading: Python's too
    assert error_on("Killed\n\n") == "Killed" and error_on("") is None and error_on(None) is None
