"""Issue 29 item 2, area C: a config field's own rule, core.run's checks and the console's own checks
are said by message id (core.spec.messages.CATALOGUE, app.i18n.MESSAGES_ZH) or by the console's own
text key (app.i18n.TEXTS, `Said`), never by re-reading their English. Each id is made here by the
code that makes it for the page, and shown in 中文 with every fact of the English kept."""
from __future__ import annotations

import html

import pytest

from core.spec.config import Config, ConfigError
from core.spec.messages import CATALOGUE, Message, ids_of

from app.tabs import form
from app.tabs import train_callbacks as cb
from app.i18n import problem_text
from tests.app.english import english_words
from tests.app.test_problem_text import assert_chinese
from tests.app.test_train_callbacks import form_values


def ids_in(message) -> set[str]:
    """The ids of a message and of the messages in its parameters."""
    return set(ids_of(message))


def said_ids(err: BaseException) -> set[str]:
    found: set[str] = set()
    for line in getattr(err, "said", []):
        found |= ids_in(line)
    return found


# a field's own rule (core.spec.config): the updates that break it -> the ids its problem says
FIELD_MISTAKES = {
    "bool": ({"data.packing": "maybe"}, {"field.must_be", "field.rule.bool"}),
    "string": ({"run.name": ["x"]}, {"field.rule.string", "field.rule.or_null"}),
    "integer bound": ({"data.max_seq_len": 4}, {"field.rule.integer_bound"}),
    "number bound": ({"lora.alpha": -1}, {"field.rule.number_bound"}),
    "number in a range": ({"train.learning_rate": -1}, {"field.rule.number_in"}),
    "one of": ({"train.schedule": "zzzz"}, {"field.must_be", "field.rule.one_of"}),
    "one of, close": ({"train.schedule": "cosin"}, {"field.must_be_suggest", "field.rule.one_of"}),
    "or null": ({"train.max_grad_norm": -1}, {"field.rule.or_null", "field.rule.number_bound"}),
    "target modules": ({"lora.target_modules": []}, {"field.rule.target_modules"}),
    "target modules empty": ({"lora.target_modules": " "}, {"field.not_empty"}),
    "target regex": ({"lora.target_modules": "("}, {"field.bad_regex"}),
    "profile steps": ({"train.profile_steps": "5,3"}, {"field.rule.profile_steps"}),
    "trackers": ({"tracking": 3}, {"field.rule.trackers"}),
    "unknown tracker": ({"tracking": ["zzzz"]}, {"field.unknown_tracker"}),
    "unknown tracker, close": ({"tracking": ["mlflo"]}, {"field.unknown_tracker_suggest"}),
    "tracker twice": ({"tracking": ["mlflow", "mlflow"]}, {"field.tracker_twice"}),
    "columns": ({"data.columns": 3}, {"field.rule.columns"}),
    "unknown column field": ({"data.columns": {"zzzz": "a"}}, {"field.unknown_column_field"}),
    "unknown column field, close": ({"data.columns": "foo: bar"}, {"field.unknown_column_field_suggest"}),
    "column not a string": ({"data.columns": {"instruction": ""}}, {"field.column_not_string"}),
    "dataset": ({"data.dataset": 3}, {"field.rule.dataset"}),
    "data files": ({"data.train_file": {"a": 1}}, {"field.rule.data_files"}),
    "data file items": ({"data.train_file": ["", "a.jsonl"]}, {"field.data_file_items"}),
    "time limit": ({"launch.time_limit": "x"}, {"field.rule.time_limit"}),
    "time limit zero": ({"launch.time_limit": "0"}, {"field.time_limit_zero"}),
    "sbatch options": ({"launch.sbatch_options": 3}, {"field.rule.sbatch_options"}),
    "sbatch not text": ({"launch.sbatch_options": [3]}, {"field.sbatch_not_text"}),
    "sbatch shell": ({"launch.sbatch_options": ["--mem=4G;x"]}, {"field.sbatch_shell"}),
    "sbatch form": ({"launch.sbatch_options": ["-x"]}, {"field.sbatch_form"}),
    "sbatch reserved": ({"launch.sbatch_options": ["--output=x"]}, {"field.sbatch_reserved"}),
    "sbatch reserved, instead": ({"launch.sbatch_options": ["--nodes=2"]}, {"field.sbatch_reserved_use"}),
    "env": ({"launch.env": 3}, {"field.rule.env"}),
    "env name": ({"launch.env": {"1A": "x"}}, {"field.env_name"}),
    "env value": ({"launch.env": {"A": None}}, {"field.env_value"}),
    "env newline": ({"launch.env": {"A": "a\nb"}}, {"field.env_newline"}),
    "slurm name": ({"launch.partition": "a b"}, {"field.rule.slurm_name"}),
    "rewards not a list": ({"grpo.rewards": "[{function: regex"}, {"field.rule.rewards"}),
    "rewards empty": ({"grpo.rewards": []}, {"field.rewards_empty"}),
    "reward not a mapping": ({"grpo.rewards": [3]}, {"field.reward_item"}),
    "reward function": ({"grpo.rewards": [{"function": "zzzzzz"}]}, {"field.reward_function"}),
    "reward function, close": ({"grpo.rewards": [{"function": "regexp"}]}, {"field.reward_function_suggest"}),
    "reward needs": ({"grpo.rewards": [{"function": "regex"}]}, {"field.reward_needs"}),
    "reward unknown setting": ({"grpo.rewards": [{"function": "math", "pattern": "x"}]}, {"field.reward_unknown_key"}),
    "reward weight": ({"grpo.rewards": [{"function": "math", "weight": "heavy"}]}, {"field.reward_weight"}),
    "reward regex": ({"grpo.rewards": [{"function": "regex", "pattern": "("}]}, {"field.reward_regex"}),
    "unknown key": ({"train.qqqqqqqq": 1}, {"field.unknown_key"}),
    "unknown key, close": ({"train.learnin_rate": 1}, {"field.unknown_key_suggest"}),
}
# ids no field's rule has today (the shapes `_bounded` can build: an integer with no bounds or with two)
FIELD_FALLBACKS = {"field.rule.integer", "field.rule.number", "field.rule.integer_in"}


@pytest.mark.parametrize("mistake", list(FIELD_MISTAKES))
def test_a_fields_own_rule_is_said_by_its_id_in_chinese(mistake):
    updates, ids = FIELD_MISTAKES[mistake]
    with pytest.raises(ConfigError) as info:
        Config().with_updates(updates)
    err = info.value
    assert ids <= said_ids(err), (mistake, str(err), said_ids(err))
    assert problem_text(err, "en") == str(err)
    for problem in err.problems:  # each reason; the whole line where its setting is a dotted key (not 'tracking')
        assert_chinese(problem.reason, problem_text(problem.reason, "zh"))
    if all("." in problem.key for problem in err.problems):
        assert_chinese(str(err), problem_text(err, "zh"))
    for english in form.errors_by_widget(err.errors).values():
        assert isinstance(english, Message)
        assert_chinese(english, problem_text(english, "zh"))


def test_a_section_that_is_no_mapping_is_said_by_its_id():
    with pytest.raises(ConfigError) as info:
        Config.from_dict({"train": 3})
    assert "field.section_mapping" in said_ids(info.value)
    assert str(info.value) == "train = 3: must be a mapping of train settings"
    assert problem_text(info.value, "zh") == "train = 3：必须是 train 设置的映射"


# the form's own words: a paired widget names its part; an empty length asks for one
FORM_MISTAKES = {
    "field.named": ({"lora.target_regex": "("}, form.TARGET_REGEX,
                    "target modules is not a valid regular expression: missing ), unterminated subpattern at position 0 "
                    "(got '(')"),
    "field.give_length": ({"train.length": None}, form.LENGTH, "give the number of steps or epochs (the field is empty)"),
}


@pytest.mark.parametrize("key", list(FORM_MISTAKES))
def test_the_forms_own_words_are_said_by_id(console, key):
    changes, widget, english = FORM_MISTAKES[key]
    errors = cb.check_form({**form_values(console), **changes}, console).errors
    assert errors[widget] == english and key in ids_in(errors[widget])
    chinese = problem_text(errors[widget], "zh")
    assert_chinese(english, chinese)
    assert html.escape(chinese) in cb.errors_html(errors, "zh")


def test_a_paired_widget_is_never_null():
    """The steps widget says its rule without ', or null' (it is empty, not null)."""
    errors = form.errors_by_widget(ConfigError([*_problems({"train.max_steps": -1})]).errors)
    assert errors[form.LENGTH] == "steps must be an integer > 0 (got -1)"
    assert problem_text(errors[form.LENGTH], "zh") == "步数必须是整数，且 > 0（当前值 -1）"


def _problems(updates):
    try:
        Config().with_updates(updates)
    except ConfigError as err:
        return err.problems
    raise AssertionError("no problem")


def test_every_id_of_area_c_is_made_here():
    made = set().union(*(ids for _, ids in FIELD_MISTAKES.values())) | set(FORM_MISTAKES) | {"field.section_mapping"}
    made |= set(FIELD_FALLBACKS)
    made |= {"run.check.shared_needed", "run.check.shared_missing", "run.check.shared_outside",
             "run.check.tracker_missing", "run.check.cores", "run.check.devices_held"}  # the tests below
    assert made == {key for key in CATALOGUE if key.startswith(("field.", "run.check."))}


# ---- core.run's checks before a launch ------------------------------------------------------------------

def test_slurms_shared_folder_is_said_by_its_id(tmp_path):
    from app.runs import cluster
    from core.run import slurm
    from core.run.launcher import LaunchError

    shared = tmp_path / "shared"
    shared.mkdir()
    cases = {"run.check.shared_needed": (tmp_path / "runs", None),
             "run.check.shared_missing": (tmp_path / "runs", tmp_path / "nowhere"),
             "run.check.shared_outside": (tmp_path / "runs", shared)}
    for key, (runs, shared_dir) in cases.items():
        with pytest.raises(LaunchError) as info:
            slurm.check_shared(runs, shared_dir)
        assert info.value.said[0].key == key
        assert problem_text(info.value, "en") == str(info.value)
        assert_chinese(str(info.value), problem_text(info.value, "zh"))
        offer = cluster.read_offer(runs, shared_dir)  # the "Where to run" choice says why Slurm is not offered
        assert offer.refusal.key == key
        errors = form.errors_by_widget(cluster.cluster_errors(Config(), offer))
        assert errors[form.WHERE] == f"where to run {offer.refusal}"
        assert_chinese(errors[form.WHERE], problem_text(errors[form.WHERE], "zh"))
        assert problem_text(errors[form.WHERE], "zh").startswith("运行位置")


def test_a_tracker_without_its_package_is_said_by_its_id(console, monkeypatch):
    import core.run.tracking as tracking

    monkeypatch.setattr(tracking.importlib.util, "find_spec", lambda name: None)
    errors = cb.check_form(form_values(console, tracking=["mlflow", "swanlab"]), console).errors
    english = errors["tracking"]
    assert english.startswith("tracking: mlflow needs the ") and "; tracking: swanlab needs the " in english
    assert ids_in(english) == {"problem.and", "run.check.tracker_missing"}
    chinese = problem_text(english, "zh")
    assert chinese.startswith("tracking：mlflow 需要 mlflow 包") and "；tracking：swanlab 需要 swanlab 包" in chinese
    # the setting's own name leads, as the config file writes it; nothing else in English
    assert set(english_words(chinese)) == {"tracking"} and "'pip install -r requirements-tracking.txt'" in chinese


def test_more_cpu_workers_than_cores_is_said_by_its_id(console):
    import os

    errors = cb.check_form(form_values(console, parallel__data_parallel=(os.cpu_count() or 1) + 1), console).errors
    english = errors["parallel.data_parallel"]
    assert "run.check.cores" in ids_in(english)
    assert_chinese(english, problem_text(english, "zh"))


def test_every_held_device_is_said_by_its_id(workspace, fake_launcher):
    import types

    import core.run.launcher as launcher
    from app.context import Console

    console = Console.create(workspace, create_run=fake_launcher.create_run, launch=fake_launcher.launch,
                             stop=fake_launcher.stop, reconcile=fake_launcher.reconcile,
                             slots=launcher.DeviceSlots({"gpu": (0,)}))
    config = cb.check_form(form_values(console, parallel__device="gpu"), console).config
    console.jobs.start(config)  # holds the one device
    refused, shown = cb.dry_run(form_values(console, parallel__device="gpu"), console, lang="zh",
                                runner=lambda argv, **kw: types.SimpleNamespace(returncode=0, stderr="", stdout=""))
    assert refused.error.key == "run.check.devices_held"
    assert_chinese(refused.error, problem_text(refused.error, "zh"))
    assert html.escape(problem_text(refused.error, "zh")) in shown
    console.jobs.close()


# ---- the console's own checks: TEXTS keys said with `Said` -------------------------------------------------

def _said_keys(said) -> set[str]:
    from app.i18n import Said

    if not isinstance(said, Said):
        return set()
    return {said.key}.union(*(_said_keys(value) for value in said.params.values()))


def _check_said(said, keys: set[str]) -> None:
    """`said` is made of `keys`, its English as before, in 中文 with every fact kept."""
    from app.i18n import Said

    assert isinstance(said, Said) and keys <= _said_keys(said), (str(said), _said_keys(said))
    assert problem_text(said, "en") == str(said)
    assert_chinese(str(said), problem_text(said, "zh"))


def _stopped_run(console, name: str, state: str = "stopped", checkpoints: tuple[str, ...] = ()):
    from core.run.rundir import RunDir

    run = RunDir.create(console.runs_dir, f"20261201-09000{len(name)}_tiny_lora-r8_fp32_dp1_{name}",
                        Config().with_updates({"train.max_steps": 4, "train.warmup_steps": 1}).to_yaml())
    run.write_status(state="starting")
    run.write_status(state="running", step=0, total_steps=4, rank_count=1)
    if state != "running":
        run.write_status(state=state)
    for checkpoint in checkpoints:
        (run.checkpoints_dir / checkpoint).mkdir(parents=True)
    return run


def test_the_runs_and_resume_refusals_are_said_by_key(console):
    from app.tabs import monitor_callbacks
    from app.tabs import runs_callbacks as runs_cb
    from app.runs.jobs import JobError

    made = {}
    for run_id in ("../x", "20261201-000000_nope"):
        with pytest.raises(JobError) as info:
            console.jobs.run_dir(run_id)
        made[run_id] = info.value.said[0]
    _check_said(made["../x"], {"check.not_run_id"})
    _check_said(made["20261201-000000_nope"], {"check.no_run"})
    assert str(made["20261201-000000_nope"]) == f"no run 20261201-000000_nope in {console.runs_dir}"
    running = _stopped_run(console, "a", state="running")
    empty = _stopped_run(console, "bb", checkpoints=("step-2",))
    bare = _stopped_run(console, "ccc")
    (bare.checkpoints_dir).mkdir(parents=True, exist_ok=True)
    cases = {(running.run_id, None): {"check.not_resumable", "check.state"},
             (empty.run_id, "step-9"): {"check.no_such_checkpoint"},
             (bare.run_id, "step-9"): {"check.no_such_checkpoint", "check.nothing"},
             (bare.run_id, None): {"check.no_checkpoint"}}
    for (run_id, checkpoint), keys in cases.items():
        with pytest.raises(JobError) as info:
            console.jobs.resume(run_id, checkpoint=checkpoint)
        _check_said(info.value.said[0], keys)
    assert str(JobError(made["../x"])) == "'../x' is not a run id"
    _, answer = runs_cb.resume(console, [running.run_id], lang="zh")  # the Runs tab's answer
    assert answer == f"⚠ {running.run_id} 的状态为运行中；只有已停止或失败的运行可以恢复"
    warned = monitor_callbacks.stop(console, "20261201-000000_nope", graceful=True)  # the Monitor's
    _check_said(warned, {"check.warn"})


def test_a_cluster_run_resumed_here_on_too_few_cores_is_said_by_key():
    import os

    from app.runs.jobs import JobError, JobManager

    config = Config().with_updates({"launch.backend": "slurm", "launch.nodes": 2,
                                    "launch.workers_per_node": os.cpu_count() or 1,
                                    "parallel.data_parallel": 2 * (os.cpu_count() or 1)})
    with pytest.raises(JobError) as info:
        JobManager._moved("20261201-000000_wide", config, "local")
    _check_said(info.value.said[0], {"check.resume_here"})
    assert "run.check.cores" in ids_in(info.value.said[0].params["problem"].said[0].params["reason"])


def test_the_folders_this_console_may_read_are_said_by_key(console, tmp_path):
    from app.paths import OutsideRootsError, inside_roots

    errors = cb.check_form(form_values(console, data__train_file="/etc/passwd"), console).errors
    _check_said(errors["data.train_file"], {"check.outside_roots"})
    with pytest.raises(OutsideRootsError) as info:
        inside_roots("x", [])
    _check_said(info.value.said[0], {"check.outside_roots", "check.none_configured"})
    (tmp_path / "secret.yaml").write_text("train: {learning_rate: 0.5}\n")
    upload = console.settings.configs_dir / "upload.yaml"
    upload.write_text(f"base: {tmp_path / 'secret.yaml'}\n")
    with pytest.raises(ConfigError) as refused:
        cb.load_yaml(upload, console)
    _check_said(refused.value.said[0], {"check.in_base", "check.outside_roots"})
    _, message = cb.load_config_values(cb.load_yaml, str(upload), console, "zh")
    assert message == f"⚠ {problem_text(refused.value.said[0], 'zh')}" and message.startswith("⚠ base：")


def test_the_model_folder_checks_are_said_by_key(console, workspace, fake_launcher, tmp_path):
    from dataclasses import replace

    from app.context import Console

    errors = cb.check_form(form_values(console, model__path="nope"), console).errors
    _check_said(errors["model.path"], {"check.not_model_folder"})
    assert html.escape(problem_text(errors["model.path"], "zh")) in cb.errors_html(errors, "zh")
    broken = tmp_path / "more_models" / "broken"
    broken.mkdir(parents=True)
    (broken / "config.json").write_text('{"architectures": ["NopeForCausalLM"], "model_type": "nope"}')
    wider = Console.create(replace(workspace, models_dirs=(*workspace.models_dirs, broken.parent)),
                           create_run=fake_launcher.create_run, launch=fake_launcher.launch,
                           stop=fake_launcher.stop, reconcile=fake_launcher.reconcile)
    entry = next(m for m in wider.models() if not m.loadable)
    errors = cb.check_form(form_values(wider, model__path=str(entry.path)), wider).errors
    said = errors["model.path"]
    assert said.key == "check.not_loadable" and str(said).startswith(f"{entry.name} is not loadable: ")
    chinese = problem_text(said, "zh")  # the loader's reason after it, in 中文 by its own messages
    assert chinese.startswith(f"'{entry.name}' 无法加载：") and "NopeForCausalLM" in chinese


def test_data_that_cannot_be_read_is_said_by_key(console, monkeypatch):
    from app.tabs import data_callbacks

    def unreadable(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(data_callbacks, "data_stats", unreadable)
    config = cb.check_form(form_values(console), console, data=False).config
    problems = data_callbacks.data_problems(config, console)
    said = problems["data.train_file"]
    assert str(said) == "cannot read the data: [Errno 13] Permission denied"
    assert said.key == "check.cannot_read_data" and problem_text(said, "zh").startswith("无法读取数据：")


def test_a_forks_checks_are_said_by_key(console):
    from tests.app.test_train_callbacks import finished_parent

    parent = finished_parent(console, lora__rank=8, train__length=20, train__warmup_steps=2)
    with pytest.raises(ConfigError) as info:
        cb.new_from_run(console, parent.run_id, step=9)
    _check_said(info.value.said[0], {"check.no_fork_checkpoint"})
    bare = _stopped_run(console, "dddd")
    with pytest.raises(ConfigError) as info:
        cb.new_from_run(console, bare.run_id, step=9)
    _check_said(info.value.said[0], {"check.no_fork_checkpoint", "check.none"})
    values, reference = cb.new_from_run(console, parent.run_id, step=20)
    errors = cb.fork_errors(cb.check_form({**values, "lora.rank": 16, "train.length": 20}, console).config, reference)
    _check_said(errors["lora.rank"], {"check.fork_keeps"})
    _check_said(errors[form.LENGTH], {"check.fork_steps"})
    assert html.escape(problem_text(errors[form.LENGTH], "zh")) in cb.errors_html(errors, "zh")


def test_the_dry_run_and_the_try_tab_say_their_own_failures_by_key(console):
    import subprocess
    import types

    from app.tabs import try_callbacks

    measured, shown = cb.dry_run(form_values(console), console, lang="zh", runner=lambda argv, **kw: types.SimpleNamespace(
        returncode=-9, stdout="", stderr=""))
    _check_said(measured.error, {"dry.exited"})
    assert "core.dry_run 退出码为 -9" in shown

    def slow(argv, **kwargs):
        raise subprocess.TimeoutExpired(argv, 1)

    answer = try_callbacks._run(["x"], runner=slow)
    _check_said(answer.error, {"check.no_answer"})


def test_every_text_key_of_area_c_is_made_here():
    from app.i18n import TEXTS

    made = {"check.warn", "dry.exited", "check.not_run_id", "check.no_run", "check.not_resumable", "check.state",
            "check.no_such_checkpoint", "check.nothing", "check.no_checkpoint", "check.resume_here",
            "check.outside_roots", "check.none_configured", "check.in_base", "check.not_model_folder",
            "check.not_loadable", "check.cannot_read_data", "check.no_fork_checkpoint", "check.none",
            "check.fork_keeps", "check.fork_steps", "check.no_answer"}
    made |= {"check.reward_file_admin"}  # made by a non-admin's Start in tests/app/test_grpo_console.py
    assert made == {key for key in TEXTS if key.startswith("check.")} | {"dry.exited"}
