"""Issue 29 item 2, area C: a config field's own rule, core.run's checks and the console's own checks
are said by message id (core.spec.messages.CATALOGUE, app.i18n.MESSAGES_ZH) or by the console's own
text key (app.i18n.TEXTS, `Said`), never by re-reading their English. Each id is made here by the
code that makes it for the page, and shown in 中文 with every fact of the English kept."""
from __future__ import annotations

import html

import pytest

from core.spec.config import Config, ConfigError
from core.spec.messages import CATALOGUE, Message

from app import form
from app import train_callbacks as cb
from app.i18n import problem_text
from tests.app.english import english_words
from tests.app.test_problem_text import assert_chinese
from tests.app.test_train_callbacks import form_values


def ids_in(message) -> set[str]:
    """The ids of a message and of the messages in its parameters."""
    if not isinstance(message, Message):
        return set()
    found = {message.key}
    for value in message.params.values():
        found |= ids_in(value)
    return found


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
    from app import cluster
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
