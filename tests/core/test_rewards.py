"""GRPO's reward functions (core.eval.rewards): each built-in's values on real completions, math-verify on
real answers, the weighted total and its figures, the user's file in a child process (every way it can
fail is a RewardError naming the function, and the process is gone after it), the reward-model hook,
and the checks before a launch."""
import json
import os
from pathlib import Path

import numpy as np
import psutil
import pytest

from core.eval.rewards import RewardError, RewardSet, check_rewards
from core.spec.config import Config

N = ["blue", " Blue ", "red", "blue kite"]


def _set(*specs, **kw):
    kw.setdefault("max_new_tokens", 8)
    return RewardSet(list(specs), **kw)


def _score(rewards, completions, columns=None, lengths=None, where=None):
    n = len(completions)
    return rewards.score(["<prompt>"] * n, completions, lengths if lengths is not None else [3] * n,
                         columns or {}, where)


def test_exact_match_regex_and_length_give_their_values():
    answers = {"answer": ["blue"] * 4, "solution": [42, 42, 42, 42]}
    with _set({"function": "exact_match"}, {"function": "exact_match", "ignore_case": True},
              {"function": "exact_match", "column": "solution"}) as rewards:
        scores = _score(rewards, N, answers)
        assert rewards.names == ["exact_match", "exact_match_2", "exact_match_3"]
        assert scores.values["exact_match"].tolist() == [1, 0, 0, 0]
        assert scores.values["exact_match_2"].tolist() == [1, 1, 0, 0]
        assert _score(rewards, ["42", " 42\n", "4", "x"], answers).values["exact_match_3"].tolist() == [1, 1, 0, 0]

    completions = ["blue", "It is blue.", "The answer is 42.", "the answer is 42."]
    with _set({"function": "regex", "pattern": r"\w+"}, {"function": "regex", "pattern": r"The answer is (\d+)\."},
              {"function": "regex", "pattern": r".*is (?P<answer>\w+)\.", "column": "answer"}) as rewards:
        scores = _score(rewards, completions, {"answer": ["blue", "blue", "42", "41"]})
        assert scores.values["regex"].tolist() == [1, 0, 0, 0]  # the whole (stripped) completion must match
        assert scores.values["regex_2"].tolist() == [0, 0, 1, 0]
        assert scores.values["regex_3"].tolist() == [0, 1, 1, 0]  # captured and compared with the column

    with _set({"function": "length", "max_tokens": 8, "soft_tokens": 2}, {"function": "length"},
              max_new_tokens=16) as rewards:
        scores = _score(rewards, ["x"] * 6, lengths=[5, 6, 7, 8, 9, 14])
        assert scores.values["length"].tolist() == [0, 0, -0.5, -1, -1, -1]  # DAPO: 0 to 6, linear to -1 at 8
        assert scores.values["length_2"].tolist() == [0, 0, 0, 0, 0, -0.5]  # 16 tokens, a quarter soft: 12 free


def test_the_total_is_weighted_and_the_figures_and_equal_groups_follow():
    with _set({"function": "exact_match", "weight": 2.0}, {"function": "regex", "pattern": r"\w+", "weight": 0.5},
              {"function": "length", "weight": 0.0}) as rewards:
        scores = _score(rewards, ["blue", "red", "blue kite", "red"], {"answer": ["blue"] * 4}, lengths=[1, 1, 8, 1])
    assert scores.total.tolist() == [2.5, 0.5, 0.0, 0.5]  # length's -1 at 8 tokens weighs 0
    figures = scores.figures()
    assert figures["reward"] == pytest.approx(0.875) and figures["reward_std"] == pytest.approx(np.std([2.5, .5, 0, .5]))
    assert figures["reward_exact_match"] == 0.25 and figures["reward_length"] == -0.25
    assert scores.equal_groups(2) == 0.0 and scores.equal_groups(4) == 0.0
    assert _score(_set({"function": "exact_match"}), ["a", "a", "b", "c"], {"answer": ["a", "a", "b", "b"]}
                  ).equal_groups(2) == 0.5


def test_a_missing_column_value_or_bad_setting_is_an_error_not_a_zero():
    with pytest.raises(RewardError) as err:
        _score(_set({"function": "exact_match"}), ["a", "b"], {"answer": ["a", None]}, where=["t.jsonl line 1", "t.jsonl line 2"])
    assert str(err.value) == "reward exact_match: t.jsonl line 2 has no value in column 'answer'"
    with pytest.raises(RewardError, match="reward length: soft_tokens 9 is more than max_tokens 8"):
        _set({"function": "length", "soft_tokens": 9})
    with pytest.raises(RewardError, match="ignore_case must be true or false, not 'yes'"):
        _set({"function": "exact_match", "ignore_case": "yes"})


@pytest.mark.slow
def test_math_verify_reads_real_answers():
    completions = ["So x = \\boxed{\\frac{1}{2}}", "The answer is 0.5", "I get 41.", "It is $1 + x^2$.",
                   "Total: 1,000 apples", "\\boxed{3}"]
    golds = ["0.5", "\\frac{1}{2}", "42", "x^2+1", "1000", "$\\sqrt{9}$"]
    with _set({"function": "math"}) as rewards:
        assert _score(rewards, completions, {"answer": golds}).values["math"].tolist() == [1, 1, 0, 1, 1, 1]
        with pytest.raises(RewardError) as err:
            _score(rewards, ["1", "2"], {"answer": ["1", "banana"]}, where=["m.jsonl line 1", "m.jsonl line 2"])
    assert str(err.value) == ("reward math: the answer 'banana' in column 'answer' (m.jsonl line 2) is nothing "
                              "math-verify can read as a mathematical expression")


USER_FILE = '''
import math, time
def reward(prompts, completions, answer, **columns):
    print("noise on stdout must not break the protocol")
    return [float(c.strip() == a) for c, a in zip(completions, answer)]
def uses_ids(completions, id, **kw):
    return [i / 10 for i in id]
def raises(prompts, completions, **kw):
    return 1 / 0
def too_few(completions, **kw):
    return [1.0]
def nan(completions, **kw):
    return [math.nan for _ in completions]
def words(completions, **kw):
    return ["good" for _ in completions]
def a_dict(completions, **kw):
    return {"score": 1}
def sleeps(completions, **kw):
    time.sleep(60)
not_a_function = 3
'''


@pytest.fixture()
def user_file(tmp_path):
    path = tmp_path / "my_rewards.py"
    path.write_text(USER_FILE)
    return path


def test_a_user_file_runs_in_one_child_process_with_the_columns(user_file):
    columns = {"answer": ["blue", "red"], "id": [3, 7]}
    with _set({"function": "file", "path": str(user_file)},
              {"function": "file", "path": str(user_file), "name": "uses_ids", "weight": 10}) as rewards:
        scores = _score(rewards, ["blue", "blue"], columns)
        pid = rewards.process.pid
        assert scores.values["reward"].tolist() == [1, 0] and scores.values["uses_ids"].tolist() == [0.3, 0.7]
        assert scores.total.tolist() == [4.0, 7.0]
        _score(rewards, ["red", "red"], columns)
        assert rewards.process.pid == pid and psutil.pid_exists(pid)  # started once for the run
    assert rewards.process.proc is None and not psutil.pid_exists(pid)


@pytest.mark.parametrize("name, said", [
    ("raises", "reward raises raised ZeroDivisionError: division by zero"),
    ("too_few", "reward too_few returned 1 values for 2 completions"),
    ("nan", "reward nan: value 0 is nan, not a finite number"),
    ("words", "reward words: value 0 is 'good', a str, not a number"),
    ("a_dict", "reward a_dict returned a dict, not a list of numbers"),
    ("sleeps", "reward sleeps ran longer than grpo.reward_timeout_s = 1 s on one batch and was stopped"),
    ("missing", "reward missing: {file} has no function 'missing'"),
    ("not_a_function", "reward not_a_function: 'not_a_function' in {file} is a int, not a function"),
])
def test_every_failure_of_a_user_function_is_named_and_its_process_ended(user_file, name, said):
    rewards = _set({"function": "file", "path": str(user_file), "name": name}, timeout_s=1)
    with pytest.raises(RewardError) as err:
        _score(rewards, ["blue", "red"], {"answer": ["blue", "red"]})
    assert str(err.value) == said.format(file=user_file)
    assert rewards.process.proc is None  # killed and reaped: nothing left running
    if name == "raises":
        assert "ZeroDivisionError" in err.value.traceback and "my_rewards.py" in err.value.traceback
    rewards.close()


def test_a_file_that_does_not_import_is_named_with_its_traceback(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("import json\nraise RuntimeError('no config here')\n")
    rewards = _set({"function": "file", "path": str(broken)})
    with pytest.raises(RewardError) as err:
        rewards.start()  # before the first batch
    assert str(err.value) == f"reward reward: {broken} does not import: RuntimeError: no config here"
    assert "line 2" in err.value.traceback and rewards.process.proc is None


def test_a_reward_model_needs_the_engines_scorer():
    spec = {"function": "reward_model", "run": "rm-run"}
    with pytest.raises(RewardError, match="reward reward_model: a reward model \\(run rm-run\\) is scored by the "
                                          "training engine, which gave no scorer here"):
        _set(spec)
    asked = []

    def factory(run):
        asked.append(run)
        return lambda prompts, completions: [len(c) / 10 for c in completions]

    with _set(spec, model_scorer=factory) as rewards:
        assert _score(rewards, ["ab", "abcd"]).values["reward_model"].tolist() == [0.2, 0.4]
    assert asked == ["rm-run"]
    with pytest.raises(RewardError, match="reward reward_model returned 1 values for 2 completions"):
        _score(_set(spec, model_scorer=lambda run: lambda p, c: [1.0]), ["a", "b"])


def _config(tmp_path, rewards):
    return Config.from_dict({"run": {"runs_dir": str(tmp_path / "runs")}, "train": {"objective": "grpo"},
                             "early_stopping": {"monitor": "val_reward"},
                             "grpo": {"max_prompt_len": 128, "rewards": rewards}})


def _run(tmp_path, name, state, objective):
    folder = tmp_path / "runs" / name
    folder.mkdir(parents=True)
    (folder / "status.json").write_text(json.dumps({"run_id": name, "state": state}))
    (folder / "config.yaml").write_text(f"train:\n  objective: {objective}\n")


def test_the_checks_before_a_launch_name_each_problem(tmp_path, user_file):
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    (allowed / "bad.py").write_text("def reward(:\n")
    (allowed / "ok.py").write_text("from math import isclose as reward\ndef other(completions, **kw): ...\n")
    _run(tmp_path, "rm-done", "finished", "reward")
    _run(tmp_path, "rm-busy", "running", "reward")
    _run(tmp_path, "sft-done", "finished", "sft")
    config = _config(tmp_path, [
        {"function": "exact_match"},
        {"function": "math", "column": "solution"},
        {"function": "regex", "pattern": "x", "column": "gold"},
        {"function": "length", "max_tokens": 4, "soft_tokens": 8},
        {"function": "file", "path": str(user_file)},
        {"function": "file", "path": str(allowed / "nope.py")},
        {"function": "file", "path": str(allowed / "bad.py")},
        {"function": "file", "path": str(allowed / "ok.py"), "name": "missing"},
        {"function": "file", "path": str(allowed / "ok.py")},
        {"function": "reward_model", "run": "rm-done"},
        {"function": "reward_model", "run": "rm-busy"},
        {"function": "reward_model", "run": "sft-done"},
        {"function": "reward_model", "run": "nowhere"},
    ])
    problems = check_rewards(config, ["answer", "id"], allowed_dirs=[allowed], root=tmp_path)
    assert [p.key for p in problems] == ["grpo.rewards"] * 10
    assert [str(p.reason) for p in problems] == [
        "reward 2 (math) reads column 'solution', which the data lacks (its columns: answer, id)",
        "reward 3 (regex) reads column 'gold', which the data lacks (its columns: answer, id)",
        "reward 4: reward length: soft_tokens 8 is more than max_tokens 4",
        f"reward 5 (file): {user_file} is outside the folders reward code may run from ({allowed})",
        f"reward 6 (file): {allowed / 'nope.py'} does not exist",
        f"reward 7 (file): {allowed / 'bad.py'} line 1 is not valid Python (invalid syntax)",
        f"reward 8 (file): {allowed / 'ok.py'} defines no function 'missing'",
        "reward 11 (reward_model): run rm-busy is running; a reward model must have finished",
        "reward 12 (reward_model): run sft-done trained train.objective sft, not a reward model (train.objective reward)",
        f"reward 13 (reward_model): no run nowhere in {tmp_path / 'runs'}",
    ]
    assert problems[0].value == {"function": "math", "column": "solution", "weight": 1.0}
    assert problems[2].reason.params["reason"].key == "reward.soft_over_max"
    # without the console's folders (the command line) a file anywhere may run; without columns none is checked
    assert [p.reason.key for p in check_rewards(config, None, root=tmp_path)] == [
        "reward.check_setting", "reward.check_file_missing", "reward.check_file_syntax", "reward.check_file_no_def",
        "reward.check_run_unfinished", "reward.check_run_objective", "reward.check_run_missing"]


ORPHAN = '''
import json, os, sys
from core.eval.rewards import RewardSet
rewards = RewardSet([{"function": "file", "path": sys.argv[1], "name": "sleeps"}], max_new_tokens=8)
process = rewards.process
rewards.start()
process.proc.stdin.write((json.dumps({"op": "call", "index": 0, "prompts": ["p"], "completions": ["c"],
                                      "columns": {}}) + "\\n").encode())
process.proc.stdin.flush()  # the user's function now sleeps for a minute
print(process.pid, flush=True)
os._exit(0)  # the worker dies mid-call, closing nothing: its reward process must not outlive it
'''


@pytest.mark.slow
def test_the_reward_process_ends_with_the_worker_that_started_it(tmp_path, user_file):
    import subprocess
    import sys
    import time

    script = tmp_path / "orphan.py"
    script.write_text(ORPHAN)
    out = subprocess.run([sys.executable, str(script), str(user_file)], capture_output=True, text=True, timeout=60,
                         cwd=Path(__file__).resolve().parents[2], env={**os.environ, "PYTHONPATH": "."})
    pid = int(out.stdout.split()[0])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"reward process {pid} outlived its worker")
