"""Issue 29 item 2, area F: Slurm's refusals and silences (core.run.slurm), the experiment trackers that
cannot start or stop working (core.run.tracking), the multi-machine msrun commands' refusals
(core.run.launcher.multi_host_commands), a family key map's collision (core.spec.families) and bf16 on
a device without it (core.spec.device_paths, core.engine.devices) are core messages by id (slurm.*,
tracking.*, launch.*, family.*, device.*). Each id is made here by the code that makes it for the page:
the real Slurm client commands where this machine has them (with no controller answering: the
refusals Slurm's own clients give then; a client missing by PATH), a real closed port for MLflow;
Slurm's partition list and a tracker's failure are the only answers faked. Then said in 中文 from its
id with no English word left but the library's own text it quotes, with every fact kept; also when
it comes back as its record (status.json's reason_message, another process's error line); the English
alone (a status.json written before the ids) is shown as it is."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

import core.run.launcher as launcher
import core.run.slurm as slurm
import core.run.tracking as tracking
from core.run.records import ClusterJob, TrackerEvent
from core.run.rundir import RunDir
from core.spec import device_paths
from core.spec.config import Config, ConfigError
from core.spec.families import FAMILIES
from core.spec.messages import CATALOGUE, Message

from app.i18n import MESSAGES_ZH, problem_text, reason_text

from tests import skips
from tests.app.english import english_words
from tests.app.test_messages_run import raised, said_by_id
from tests.app.test_problem_text import by_record

# the ids of area F (the slurm.* ids of why a job ended are older: tests/app/test_messages_run.py's neighbours)
AREA = ("tracking.", "launch.", "family.", "device.")
EARLIER_SLURM = {"slurm.cancelled_pending", "slurm.cancelled_outside", "slurm.preempted", "slurm.timeout",
                 "slurm.node_fail", "slurm.out_of_memory", "slurm.ended", "slurm.job", "slurm.job_on"}
# the parameters that quote a Slurm client's, a library's or the OS's own words (said as they are)
QUOTED = ("slurm_says", "error", "os_error", "state")
SLURM2 = {"launch.backend": "slurm", "launch.nodes": 2, "parallel.data_parallel": 2}
SCONTROL = ("PartitionName=debug Default=YES MaxNodes=2 MaxTime=00:30:00 State=UP TotalNodes=2\n"
            "PartitionName=wide Default=NO MaxNodes=UNLIMITED MaxTime=UNLIMITED State=UP TotalNodes=1\n"
            "PartitionName=maint Default=NO MaxNodes=UNLIMITED MaxTime=UNLIMITED State=DOWN TotalNodes=4\n")


def area_ids() -> set[str]:
    return {key for key in CATALOGUE if key.startswith(AREA)
            or key.startswith("slurm.") and key not in EARLIER_SLURM}


def _said(err: BaseException) -> Message:
    said = getattr(err, "said", None)
    assert isinstance(said, list) and len(said) == 1 and isinstance(said[0], Message), (type(err).__name__, str(err))
    return said[0]


# ---- Slurm -------------------------------------------------------------------------------------------

def _controller_down(monkeypatch, tmp_path) -> None:
    """The Slurm client commands of this machine, with no controller answering them: where the test
    cluster is up (CI starts it), the clients read a copy of its slurm.conf whose controller port is
    closed (SLURM_CONF), so they fail as they do with the controller down."""
    if shutil.which("scontrol") is None or shutil.which("sbatch") is None:
        skips.skip("slurm", "no Slurm client commands on this machine")
    if slurm.available() is None:
        conf = Path(os.environ.get("SLURM_CONF") or "/etc/slurm/slurm.conf")
        with socket.socket() as probe:  # a port nothing listens on
            probe.bind(("127.0.0.1", 0))
            closed = probe.getsockname()[1]
        lines = [f"SlurmctldPort={closed}" if line.startswith("SlurmctldPort=") else line
                 for line in conf.read_text().splitlines() if not line.startswith("MessageTimeout=")]
        if not any(line.startswith("SlurmctldPort=") for line in lines):
            lines.append(f"SlurmctldPort={closed}")
        lines.append("MessageTimeout=1")  # the same refusal at once, not after ~9 s of the clients' retries
        moved = tmp_path / "slurm.conf"
        moved.write_text("\n".join(lines) + "\n")
        monkeypatch.setenv("SLURM_CONF", str(moved))
        assert slurm.available() is not None, "the clients still reach a controller"


@pytest.fixture
def run(tmp_path) -> RunDir:
    config = Config().with_updates({**SLURM2, "run.runs_dir": str(tmp_path / "runs")})
    return launcher.create_run(config)


def _no_clients(monkeypatch, tmp_path) -> None:
    """A machine without Slurm's client commands: PATH has none of them."""
    empty = tmp_path / "empty-bin"
    empty.mkdir(exist_ok=True)
    monkeypatch.setenv("PATH", str(empty))


def _partitions_answer(monkeypatch, accounts: str = "") -> None:
    """`scontrol show partition -o` and `sacctmgr show account` as Slurm answers them."""
    def answer(argv, *args, **kwargs):
        out = SCONTROL if argv[0] == "scontrol" else accounts
        return subprocess.CompletedProcess(argv, 0, out, "")

    monkeypatch.setattr(slurm, "_slurm", answer)


def _refusal(monkeypatch, **launch) -> Message:
    _partitions_answer(monkeypatch)
    config = Config().with_updates({**SLURM2, **{f"launch.{k}": v for k, v in launch.items()}})
    err = raised(lambda: slurm.check_submission(config), ConfigError)
    assert len(err.problems) == 1
    return err.problems[0].reason


def _submitted(run: RunDir, monkeypatch) -> tuple[BaseException, Message]:
    """Submit with the partition check passed (Slurm's answer to it is faked): the real sbatch says why not."""
    monkeypatch.setattr(slurm, "check_submission", lambda config: None)
    err = raised(lambda: slurm.SlurmBackend().launch(run), launcher.LaunchError)
    return err, run.read_status().reason_message and Message.from_json(run.read_status().reason_message)


_SBATCH: dict[str, tuple[Message, Message]] = {}


def _sbatch_refused(run, tmp_path, monkeypatch) -> tuple[Message, Message]:
    """The real sbatch, refused (no controller): ~10 s, so once for both of its messages."""
    if not _SBATCH:
        _controller_down(monkeypatch, tmp_path)
        err, reason = _submitted(run, monkeypatch)
        _SBATCH["raised"], _SBATCH["status"] = _said(err), reason
    return _SBATCH["raised"], _SBATCH["status"]


def _with_status(run: RunDir, **fields) -> RunDir:
    run.write_status(**fields)
    return run


def _ended(run: RunDir, state: str, checkpoint: str | None = None) -> Message:
    run.write_status(state="starting")
    run.write_status(state="running")
    run.write_status(state="stopped", reason=Message("run.stopped_by_user"), resumable_checkpoint=checkpoint,
                     cluster=ClusterJob(job_id="41", state="RUNNING", nodes=["node1"]))
    status = slurm.SlurmBackend()._ended(run, run.read_status(), slurm.JobInfo("41", state, None, ("node1",)))
    return Message.from_json(status.reason_message)


def _cancelled_pending(run: RunDir) -> Message:
    run.write_status(cluster=ClusterJob(job_id="41", state="PENDING"))
    status = slurm.SlurmBackend()._ended(run, run.read_status(), slurm.JobInfo("41", "CANCELLED", None, ()))
    assert status.state == "stopped"
    return Message.from_json(status.reason_message)


def _not_installed(run, tmp_path, monkeypatch) -> Message:
    _no_clients(monkeypatch, tmp_path)
    return _said(raised(slurm.partitions, slurm.SlurmError))


def _not_submitted(run, tmp_path, monkeypatch) -> Message:
    _no_clients(monkeypatch, tmp_path)
    err, reason = _submitted(run, monkeypatch)
    assert _said(err).key == "slurm.not_installed" and run.read_status().state == "failed"
    return reason


def _not_submitted_config(run, tmp_path, monkeypatch) -> Message:
    _partitions_answer(monkeypatch)
    run.config_path.write_text(Config().with_updates({**SLURM2, "launch.partition": "nope"}).to_yaml())
    raised(lambda: slurm.SlurmBackend().launch(run), ConfigError)
    return Message.from_json(run.read_status().reason_message)


def _no_answer(run, tmp_path, monkeypatch) -> Message:
    """A Slurm command that does not answer in time: the real sinfo, given no time at all."""
    if shutil.which("sinfo") is None:
        skips.skip("slurm", "no sinfo on this machine")
    return _said(raised(lambda: slurm._slurm(["sinfo", "-h"], timeout_s=0.001), slurm.SlurmError))


def _no_controller(run, tmp_path, monkeypatch) -> Message:
    _controller_down(monkeypatch, tmp_path)
    return slurm.available()


def _partitions_failed(run, tmp_path, monkeypatch) -> Message:
    _controller_down(monkeypatch, tmp_path)
    return _said(raised(slurm.partitions, slurm.SlurmError))


def _job_query_failed(run, tmp_path, monkeypatch) -> Message:
    _controller_down(monkeypatch, tmp_path)
    return _said(raised(lambda: slurm.job_info("41"), slurm.SlurmError))


def _account(run, tmp_path, monkeypatch) -> Message:
    _partitions_answer(monkeypatch, accounts="ml-team\n")
    config = Config().with_updates({**SLURM2, "launch.account": "nobody"})
    return raised(lambda: slurm.check_submission(config), ConfigError).problems[0].reason


CASES = {
    "slurm.not_installed": _not_installed,
    "slurm.no_answer": _no_answer,
    "slurm.no_controller": _no_controller,
    "slurm.partitions_failed": _partitions_failed,
    "slurm.job_query_failed": _job_query_failed,
    "slurm.refused": lambda *a: _sbatch_refused(*a)[0],
    "slurm.refused_job": lambda *a: _sbatch_refused(*a)[1],
    "slurm.not_submitted": _not_submitted,
    "slurm.not_submitted_config": _not_submitted_config,
    "slurm.already_submitted": lambda run, tmp_path, monkeypatch: _said(raised(
        lambda: slurm.SlurmBackend().launch(_with_status(run, cluster=ClusterJob(job_id="41"))), launcher.LaunchError)),
    "slurm.not_queued": lambda run, tmp_path, monkeypatch: _said(raised(
        lambda: slurm.SlurmBackend().launch(_with_status(run, state="stopped")), launcher.LaunchError)),
    "slurm.no_partition": lambda run, tmp_path, monkeypatch: _refusal(monkeypatch, partition="nope"),
    "slurm.partition_state": lambda run, tmp_path, monkeypatch: _refusal(monkeypatch, partition="maint"),
    "slurm.partition_nodes": lambda run, tmp_path, monkeypatch: _refusal(monkeypatch, partition="wide"),
    "slurm.partition_nodes_per_job": lambda run, tmp_path, monkeypatch: _per_job(monkeypatch),
    "slurm.partition_time": lambda run, tmp_path, monkeypatch: _refusal(monkeypatch, time_limit="45"),
    "slurm.no_account": _account,
    "slurm.sigterm_stop": lambda run, tmp_path, monkeypatch: _ended(run, "TIMEOUT"),
    "slurm.sigterm_stop_saved": lambda run, tmp_path, monkeypatch: _ended(run, "PREEMPTED", "step-4"),
    "slurm.cancelled_while_pending": lambda run, tmp_path, monkeypatch: _cancelled_pending(run),
}


def _per_job(monkeypatch) -> Message:
    _partitions_answer(monkeypatch)
    config = Config().with_updates({"launch.backend": "slurm", "launch.nodes": 3, "parallel.data_parallel": 3,
                                    "launch.partition": "debug"})
    return raised(lambda: slurm.check_submission(config), ConfigError).problems[0].reason


# ---- trackers -----------------------------------------------------------------------------------------

def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class _Broken:
    """A tracker whose service went away mid-run."""
    name = "mlflow"

    def log_dict(self, values, step):
        raise ConnectionError("the server closed the connection")


def _tracker_events(run: RunDir, tracker) -> list[TrackerEvent]:
    events = []
    trackers = tracking.Trackers([tracker], events.append)
    trackers._call(tracker, "log_dict", {"loss": 1.0}, 1)
    return events


def _mlflow_failed(run, tmp_path, monkeypatch) -> Message:
    skips.module("mlflow")

    class Refusing(Exception):
        pass

    def refuse(*args, **kwargs):
        raise Refusing("the store refused: no such experiment")

    monkeypatch.setattr(tracking, "MlflowTracker", refuse)
    config = Config().with_updates({"mlflow.tracking_uri": f"sqlite:///{tmp_path}/mlflow.db"})
    return _said(raised(lambda: tracking.open_tracker("mlflow", config, run, False, {}), tracking.TrackerUnavailable))


def _swanlab_failed(run, tmp_path, monkeypatch) -> Message:
    skips.module("swanlab")

    def refuse(*args, **kwargs):
        raise RuntimeError("swanlab: not logged in")

    monkeypatch.setattr(tracking, "SwanlabTracker", refuse)
    config = Config().with_updates({"swanlab.mode": "cloud"})
    return _said(raised(lambda: tracking.open_tracker("swanlab", config, run, False, {}), tracking.TrackerUnavailable))


def _goes_on(run, tmp_path, monkeypatch) -> Message:
    """Trackers.open: the MLflow server at a closed port does not answer; the run goes on without it."""
    events = []
    config = Config().with_updates({"tracking": ["mlflow"], "mlflow.tracking_uri": f"http://127.0.0.1:{_closed_port()}"})
    monkeypatch.setattr(tracking, "check_installed", lambda name: None)
    tracking.Trackers.open(config, run, False, events.append)
    assert [e.setting for e in events] == ["mlflow.tracking_uri"]
    return events[0].message


def _mirroring(run, tmp_path, monkeypatch) -> Message:
    skips.module("tensorboardX")
    events = []
    tracking.Trackers.open(Config().with_updates({"tracking": ["tensorboard"]}), run, False, events.append).close("done")
    return events[-1].message


CASES.update({
    "tracking.server_silent": lambda run, tmp_path, monkeypatch: _said(raised(
        lambda: tracking.check_mlflow_server(f"http://127.0.0.1:{_closed_port()}"), tracking.TrackerUnavailable)),
    "tracking.mlflow_failed": _mlflow_failed,
    "tracking.swanlab_failed": _swanlab_failed,
    "tracking.stopped_working": lambda run, tmp_path, monkeypatch: _tracker_events(run, _Broken())[0].message.params[
        "reason"],
    "tracking.goes_on": _goes_on,
    "tracking.mirroring": _mirroring,
})


# ---- the msrun commands for several machines, a key map, bf16 ----------------------------------------

def _bf16_refused(run, tmp_path, monkeypatch) -> Message:
    """An Ascend 910A (no bf16) asked for bf16 compute: the worker's device check refuses it."""
    from core.engine import devices
    config = Config().with_updates({"parallel.device": "ascend", "precision.amp_level": "O2",
                                    "precision.compute_dtype": "bfloat16"})
    monkeypatch.setattr(devices, "target", lambda: "ascend")  # this machine has no Ascend device
    message = _said(raised(lambda: devices.check_bf16(config, soc="ascend910"), ConfigError))
    assert message.params["reason"].key == "device.soc_no_bf16"
    return message


def _keys_collide(run, tmp_path, monkeypatch) -> Message:
    key_map = FAMILIES["gemma3"].key_map
    err = raised(lambda: key_map.to_ours({"model.language_model.norm.weight": 1,
                                           "language_model.model.norm.weight": 2}, None), KeyError)
    return err.args[0]


CASES.update({
    "launch.workers_nodes": lambda run, tmp_path, monkeypatch: _said(raised(
        lambda: launcher.multi_host_commands(0, 2, "10.0.0.1", 29500), launcher.LaunchError)),
    "launch.master_port": lambda run, tmp_path, monkeypatch: _said(raised(
        lambda: launcher.multi_host_commands(1, 2, "10.0.0.1", 80), launcher.LaunchError)),
    "family.keys_collide": _keys_collide,
    "device.cpu_no_bf16": lambda run, tmp_path, monkeypatch: device_paths.bf16_problem("cpu", None, True),
    "device.soc_no_bf16": lambda run, tmp_path, monkeypatch: device_paths.bf16_problem("ascend", "ascend910", True),
    "device.bf16_refused": _bf16_refused,
})


@pytest.mark.slow
@pytest.mark.parametrize("key", list(CASES))
def test_each_message_of_the_cluster_trackers_and_devices_is_said_by_its_id(key, run, tmp_path, monkeypatch):
    said_by_id(key, CASES[key](run, tmp_path, monkeypatch), QUOTED)


def test_every_id_of_area_f_is_made_here_and_has_chinese():
    assert set(CASES) == area_ids()
    assert area_ids() <= set(MESSAGES_ZH)


# ---- what the English said before, and where it is said around ---------------------------------------

def test_the_english_is_what_core_wrote_before_the_ids(run, tmp_path, monkeypatch):
    assert str(CASES["launch.workers_nodes"](run, tmp_path, monkeypatch)) == \
        "workers per node (0) and nodes (2) must be >= 1"
    assert str(CASES["launch.master_port"](run, tmp_path, monkeypatch)) == \
        "master port 80: must be in 1024..65535 (msrun's range)"
    assert str(CASES["family.keys_collide"](run, tmp_path, monkeypatch)) == (
        "tensors model.language_model.norm.weight and language_model.model.norm.weight both map to model.norm.weight")
    assert str(CASES["slurm.partition_nodes_per_job"](run, tmp_path, monkeypatch)) == \
        "partition debug has 2 node(s) and allows 2 per job; ask for at most 2"
    assert str(CASES["slurm.not_queued"](run, tmp_path, monkeypatch)).startswith("run ") and \
        "is 'stopped'; only a queued run can be submitted (to continue a run that is over, resume it)" in \
        str(CASES["slurm.not_queued"](run, tmp_path, monkeypatch))


@pytest.mark.slow
def test_a_sbatch_refusal_keeps_its_id_in_status_json(run, tmp_path, monkeypatch):
    """The run's reason: sbatch's own words quoted inside ours, in 中文 by the id status.json keeps; the
    English alone (a run folder written before the ids) as it is."""
    reason = CASES["slurm.refused_job"](run, tmp_path, monkeypatch)  # read from status.json's reason_message
    assert isinstance(reason, Message) and reason.key == "slurm.refused_job"
    status_reason = str(reason)
    assert status_reason.startswith("sbatch refused the job: sbatch: error:")
    chinese = reason_text(status_reason, "zh", reason.to_json())
    assert chinese.startswith("sbatch 拒绝了该作业：sbatch: error:")
    assert reason_text(status_reason, "zh") == status_reason


def test_a_key_map_collision_is_said_after_the_checkpoint_it_is_in():
    inner = _keys_collide(None, None, None)
    message = Message("model.at", where="/models/g3/model.safetensors", reason=inner)
    chinese = problem_text(message, "zh")
    assert chinese == ("/models/g3/model.safetensors：张量 model.language_model.norm.weight 和 "
                       "language_model.model.norm.weight 都映射到 model.norm.weight")
    assert problem_text(by_record(message), "zh") == chinese and problem_text(str(message), "zh") == str(message)


def test_a_model_without_projections_says_none_in_chinese():
    """lora.*_matches_nothing on a model with no Dense layer: its projection list is 'none', 无 in 中文."""
    from core.engine.lora import LoraError, select_target_modules
    err = raised(lambda: select_target_modules({}, ["q_proj"]), LoraError)
    message = _said(err)
    assert message.key == "lora.name_matches_nothing" and message.params["projections"] == "none"
    chinese = problem_text(message, "zh")
    assert "none" not in chinese and "无" in chinese, chinese
    assert english_words(chinese) == [] and problem_text(by_record(message), "zh") == chinese
