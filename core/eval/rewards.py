"""GRPO's reward functions (grpo.rewards), MindSpore-free: the console imports this module to check a
config before a launch (`check_rewards`), the training engine to score completions (`RewardSet`).

Built in (each scores one completion in [0, 1] unless said):
- `exact_match`: the completion, stripped, equals the `column` value (default 'answer'), stripped;
  `ignore_case: true` compares them case-folded.
- `math`: math-verify reads a mathematical answer in the completion (the last \\boxed{...} or
  expression) and in the `column` value (default 'answer'; a bare LaTeX value such as `x^2+1` is
  read as `$x^2+1$`) and 1.0 where they are equal (math-verify's `verify`), else 0.0. An answer in the
  data that math-verify cannot read at all stops the run (a data problem, not a wrong completion).
- `regex`: 1.0 where `re.fullmatch(pattern, completion.strip(), re.DOTALL)` matches, else 0.0: the
  pattern describes the whole answer (write `.*X.*` to look for X anywhere). With `column`, the
  match must also capture the column's value: the group named `answer`, else the first group, else
  the whole match, stripped, must equal it (extract-and-compare: `The answer is (\\d+)\\.`).
- `length`: DAPO's soft overlong punishment (Yu et al. 2025) on the completion's token count L:
  0 up to max_tokens - soft_tokens, then falling linearly to -1 at max_tokens, -1 beyond.
  `max_tokens` defaults to grpo.max_new_tokens, `soft_tokens` to a quarter of it.
- `file`: the function `name` (default 'reward') of a Python file, with TRL's signature
  `def reward(prompts, completions, **columns) -> list[float]`: `prompts` are the prompts as the
  chat template rendered them, `completions` the generated texts (up to the end-of-turn token), and
  each column of the data a keyword argument with one value per completion.
- `reward_model`: a finished reward-model run (train.objective reward) named by `run`; the training
  engine scores it (`model_scorer`).
The total is the weighted sum of every function's value (`weight`, default 1).

User files and `math` run in one child process per run (core.reward_worker, started on first
use, no shell), so grpo.reward_timeout_s can stop a function that runs too long and sympy stays out
of the worker. A file that does not import, a function that raises, returns a wrong number of values,
a NaN or a non-number, or runs past the timeout is a `RewardError` naming the function and its error
(the traceback kept in `.traceback` for train.log): never a silent zero.
"""
from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import select
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np
import yaml

from core.run.records import RunDirError
from core.run.rundir import RunDir
from core.spec.config import Problem
from core.spec.errors import MessageError
from core.spec.messages import Message
from core.spec.objectives import spec_of

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_COLUMN = "answer"
FINISHED_STATES = ("finished", "early_stopped")

# model_scorer(run folder) -> score(prompts, completions) -> one number per completion
ScorerFactory = Callable[[str], Callable[[Sequence[str], Sequence[str]], Sequence[float]]]


class RewardError(MessageError):
    """A reward function that cannot give a number for every completion: the message names the
    function and its error; `traceback` is the function's own traceback text, when it raised."""

    def __init__(self, message: Message, traceback: str | None = None):
        super().__init__(message)
        self.traceback = traceback


# ---------------------------------------------------------------------------------------------
# Settings
# ---------------------------------------------------------------------------------------------

def _count_setting(spec: Mapping, key: str, default: int, name: str) -> int:
    value = spec.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RewardError(Message("reward.setting_not_count", function=name, setting=key, value=repr(value)))
    return value


def _length_limits(spec: Mapping, max_new_tokens: int, name: str = "length") -> tuple[int, int]:
    """(max_tokens, soft_tokens) of a length reward, checked."""
    limit = _count_setting(spec, "max_tokens", max_new_tokens, name)
    soft = _count_setting(spec, "soft_tokens", max(1, limit // 4), name)
    if soft > limit:
        raise RewardError(Message("reward.soft_over_max", function=name, soft=soft, limit=limit))
    return limit, soft


def _bool_setting(spec: Mapping, key: str, name: str) -> bool:
    value = spec.get(key, False)
    if not isinstance(value, bool):
        raise RewardError(Message("reward.setting_not_bool", function=name, setting=key, value=repr(value)))
    return value


def resolve_file(path: str, root: Path = REPO_ROOT) -> Path:
    """A reward file's path as the worker reads it (relative paths from the repository root)."""
    candidate = Path(path).expanduser()
    return candidate if candidate.is_absolute() else root / candidate


def resolve_run(run: str, runs_dir: str | os.PathLike, root: Path = REPO_ROOT) -> Path | None:
    """A reward-model run named by its folder or by its id under run.runs_dir; None if neither holds one."""
    runs = Path(runs_dir) if Path(runs_dir).is_absolute() else root / runs_dir
    for folder in (resolve_file(run, root), runs / run):
        if (folder / "status.json").is_file():
            return folder
    return None


# ---------------------------------------------------------------------------------------------
# The functions
# ---------------------------------------------------------------------------------------------

@dataclass
class _Batch:
    prompts: Sequence[str]
    completions: Sequence[str]
    lengths: np.ndarray
    columns: Mapping[str, Sequence]
    where: Sequence[str] | None

    def __len__(self) -> int:
        return len(self.completions)

    def column(self, function: str, name: str) -> list:
        """Column `name`'s values, every one present."""
        values = self.columns.get(name)
        for index in range(len(self)):
            if values is None or values[index] is None:
                record = self.where[index] if self.where is not None else f"completion {index}"
                raise RewardError(Message("reward.no_value", function=function, record=record, column=repr(name)))
        return list(values)


class RewardFunction:
    """One entry of grpo.rewards: `name` (unique in the set, the figures' key), `function` (its kind),
    `weight`, and `values(batch)` -> (N,) float64."""

    def __init__(self, name: str, spec: Mapping):
        self.name, self.spec = name, dict(spec)
        self.function = spec["function"]
        self.weight = float(spec.get("weight", 1.0))

    @property
    def columns(self) -> tuple[str, ...]:
        """The data columns it reads (checked before a launch)."""
        return ()

    def values(self, batch: _Batch) -> np.ndarray:
        raise NotImplementedError

    def close(self) -> None:
        pass


class ExactMatch(RewardFunction):
    def __init__(self, name: str, spec: Mapping):
        super().__init__(name, spec)
        self.column = spec.get("column", DEFAULT_COLUMN)
        self.ignore_case = _bool_setting(spec, "ignore_case", name)

    @property
    def columns(self) -> tuple[str, ...]:
        return (self.column,)

    def _norm(self, text: str) -> str:
        return text.strip().casefold() if self.ignore_case else text.strip()

    def values(self, batch: _Batch) -> np.ndarray:
        answers = batch.column(self.name, self.column)
        return np.asarray([float(self._norm(c) == self._norm(str(a))) for c, a in zip(batch.completions, answers)])


class Regex(RewardFunction):
    def __init__(self, name: str, spec: Mapping):
        super().__init__(name, spec)
        self.pattern = re.compile(spec["pattern"], re.DOTALL)
        self.column = spec.get("column")

    @property
    def columns(self) -> tuple[str, ...]:
        return (self.column,) if self.column else ()

    def _captured(self, match: re.Match) -> str:
        if "answer" in self.pattern.groupindex:
            return match.group("answer") or ""
        return (match.group(1) if self.pattern.groups else match.group(0)) or ""

    def values(self, batch: _Batch) -> np.ndarray:
        matches = [self.pattern.fullmatch(c.strip()) for c in batch.completions]
        if not self.column:
            return np.asarray([float(m is not None) for m in matches])
        answers = batch.column(self.name, self.column)
        return np.asarray([float(m is not None and self._captured(m).strip() == str(a).strip())
                           for m, a in zip(matches, answers)])


class Length(RewardFunction):
    """DAPO's soft overlong punishment: 0 for L <= max - soft, (max - soft - L) / soft up to max, -1 beyond."""

    def __init__(self, name: str, spec: Mapping, max_new_tokens: int):
        super().__init__(name, spec)
        self.max_tokens, self.soft_tokens = _length_limits(spec, max_new_tokens, name)

    def values(self, batch: _Batch) -> np.ndarray:
        lengths = np.asarray(batch.lengths, np.float64)
        free = self.max_tokens - self.soft_tokens
        return np.where(lengths <= free, 0.0,
                        np.where(lengths <= self.max_tokens, (free - lengths) / self.soft_tokens, -1.0))


class Isolated(RewardFunction):
    """A function the reward process runs (`file`, `math`); `index` is its place there."""

    def __init__(self, name: str, spec: Mapping, process: RewardProcess):
        super().__init__(name, spec)
        self.process = process
        self.column = spec.get("column", DEFAULT_COLUMN) if self.function == "math" else None
        if self.function == "file":
            self.path = resolve_file(spec["path"])
            self.index = process.add({"kind": "file", "path": str(self.path), "name": spec.get("name", "reward")},
                                     self)
        else:
            self.index = process.add({"kind": "math", "column": self.column}, self)

    @property
    def columns(self) -> tuple[str, ...]:
        return (self.column,) if self.column else ()

    def values(self, batch: _Batch) -> np.ndarray:
        if self.function == "math":
            columns = {self.column: batch.column(self.name, self.column)}
        else:
            columns = {name: list(values) for name, values in batch.columns.items()}
        raw = self.process.call(self, {"prompts": list(batch.prompts), "completions": list(batch.completions),
                                       "columns": columns}, batch.where)
        try:
            return _checked(self.name, raw, len(batch))
        except RewardError:
            self.process.close()  # the run stops: nothing of it keeps running
            raise


class ModelReward(RewardFunction):
    """A reward-model run's score, computed by the training engine's scorer."""

    def __init__(self, name: str, spec: Mapping, model_scorer: ScorerFactory | None, runs_dir: str):
        super().__init__(name, spec)
        if model_scorer is None:
            raise RewardError(Message("reward.no_scorer", function=name, run=spec["run"]))
        folder = resolve_run(spec["run"], runs_dir)
        self.score = model_scorer(str(folder) if folder is not None else spec["run"])

    def values(self, batch: _Batch) -> np.ndarray:
        try:
            raw = self.score(list(batch.prompts), list(batch.completions))
        except Exception as err:  # noqa: BLE001 (the scorer's failure is this reward's)
            raise RewardError(Message("reward.raised", function=self.name, error=f"{type(err).__name__}: {err}"),
                              _traceback(err)) from err
        return _checked(self.name, [float(v) for v in np.asarray(raw, np.float64).reshape(-1)], len(batch))


def _traceback(err: BaseException) -> str:
    return "".join(traceback.format_exception(err))


def _checked(name: str, values: Sequence[float], expected: int) -> np.ndarray:
    """One finite number per completion, or the RewardError that says what came instead."""
    if len(values) != expected:
        raise RewardError(Message("reward.wrong_count", function=name, count=len(values), expected=expected))
    out = np.asarray(values, np.float64)
    bad = np.flatnonzero(~np.isfinite(out))
    if len(bad):
        raise RewardError(Message("reward.not_finite", function=name, index=int(bad[0]), value=repr(out[bad[0]])))
    return out


# ---------------------------------------------------------------------------------------------
# The reward process
# ---------------------------------------------------------------------------------------------

class RewardProcess:
    """The child process that runs user files and math (core.reward_worker): started on the first
    call with every function it hosts, kept for the run, stopped (killed and reaped) by `close`,
    after a timeout, or after any error of the functions it runs."""

    def __init__(self, timeout_s: float):
        self.timeout_s = timeout_s
        self.functions: list[dict] = []
        self.owners: list[Isolated] = []
        self.proc: subprocess.Popen | None = None
        self._buffer = b""

    def add(self, spec: dict, owner: Isolated) -> int:
        """Host one more function (before the process starts); its index there."""
        self.functions.append(spec)
        self.owners.append(owner)
        return len(self.functions) - 1

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def start(self) -> None:
        """Start the process and import every function it hosts, if it has any and is not running
        (a file that does not import fails here, before the run's first step)."""
        if self.owners and (self.proc is None or self.proc.poll() is not None):
            self._start(self.owners[0])

    def _start(self, first: Isolated) -> None:
        # the worker's own environment; its cwd the repository root, so `-m core.reward_worker` imports
        self.proc = subprocess.Popen([sys.executable, "-m", "core.reward_worker"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, cwd=REPO_ROOT, close_fds=True)
        self._buffer = b""
        answer = self._ask({"op": "load", "functions": self.functions}, first)
        if "error" in answer:
            self.close()
            raise _load_error(self.owners[answer["error"]["index"]], answer["error"])

    def call(self, function: Isolated, payload: dict, where: Sequence[str] | None) -> list[float]:
        if self.proc is None or self.proc.poll() is not None:
            self._start(function)
        answer = self._ask({"op": "call", "index": function.index, **payload}, function)
        if "error" in answer:
            self.close()
            raise _call_error(function, answer["error"], where)
        return answer["values"]

    def _ask(self, request: dict, function: Isolated) -> dict:
        """Send one request and wait for its answer, at most timeout_s."""
        deadline = time.monotonic() + self.timeout_s
        try:
            self.proc.stdin.write((json.dumps(request, default=str) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._ended(function) from None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            ready = select.select([fd], [], [], max(remaining, 0))[0] if remaining > 0 else []
            if not ready:
                self.close()
                raise RewardError(Message("reward.timeout", function=function.name, seconds=f"{self.timeout_s:g}"))
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise self._ended(function)
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def _ended(self, function: Isolated) -> RewardError:
        code = self.close()
        return RewardError(Message("reward.process_ended", code=code, function=function.name))

    def close(self) -> int | None:
        """Kill and reap the process; its exit code (None if none ran)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        if proc.poll() is None:
            proc.kill()
        code = proc.wait()
        for stream in (proc.stdin, proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        return code


def _load_error(function: Isolated, error: dict) -> RewardError:
    file = str(function.path)
    name = repr(function.spec.get("name", "reward"))
    if error["kind"] == "import":
        return RewardError(Message("reward.file_import", function=function.name, file=file, error=error["text"]),
                           error.get("traceback"))
    if error["kind"] == "missing":
        return RewardError(Message("reward.file_no_function", function=function.name, file=file, name=name))
    return RewardError(Message("reward.file_not_callable", function=function.name, file=file, name=name,
                               py_type=error["py_type"]))


def _call_error(function: Isolated, error: dict, where: Sequence[str] | None) -> RewardError:
    kind, name = error["kind"], function.name
    if kind == "raised":
        return RewardError(Message("reward.raised", function=name, error=error["text"]), error.get("traceback"))
    if kind == "not_a_list":
        return RewardError(Message("reward.not_a_list", function=name, py_type=error["py_type"]))
    if kind == "not_a_number":
        return RewardError(Message("reward.not_a_number", function=name, index=error["index"], value=error["value"],
                                   py_type=error["py_type"]))
    record = where[error["index"]] if where is not None else f"completion {error['index']}"
    return RewardError(Message("reward.math_answer", function=name, value=error["value"], column=repr(function.column),
                               record=record))


# ---------------------------------------------------------------------------------------------
# The set
# ---------------------------------------------------------------------------------------------

@dataclass
class RewardScores:
    """Rewards of N completions: `values[name]` (N,) each function's own (unweighted), `weights[name]`,
    and `total` (N,) their weighted sum (what the advantages are computed from)."""
    names: list[str]
    values: dict[str, np.ndarray]
    weights: dict[str, float]
    total: np.ndarray

    def figures(self, prefix: str = "reward") -> dict[str, float]:
        """Mean and spread of the total and of each function: {prefix, prefix_std, prefix_<name>,
        prefix_<name>_std}."""
        out = {prefix: float(self.total.mean()), f"{prefix}_std": float(self.total.std())}
        for name in self.names:
            out[f"{prefix}_{name}"] = float(self.values[name].mean())
            out[f"{prefix}_{name}_std"] = float(self.values[name].std())
        return out

    def equal_groups(self, group_size: int) -> float:
        """The share of groups (consecutive `group_size` completions of one prompt) whose totals are all
        the same: their advantages are zero, they carry no gradient."""
        groups = self.total.reshape(-1, group_size)  # (prompts, G)
        return float(np.mean(np.ptp(groups, axis=1) <= 1e-12))


def _metric_name(spec: Mapping) -> str:
    if spec["function"] == "file":
        base = str(spec.get("name", "reward"))
    else:
        base = spec["function"]
    return re.sub(r"\W", "_", base) or "reward"


class RewardSet:
    """Every function of grpo.rewards, scored together. `score` gives each function's values and the
    weighted total for a batch of completions; `close` stops the reward process (also on `with` exit).

    specs: grpo.rewards (each {function, weight, ...settings}, as core.spec.config checked them);
    max_new_tokens: grpo.max_new_tokens (the length reward's default); timeout_s: grpo.reward_timeout_s;
    model_scorer: the engine's factory for reward_model entries (run folder -> score(prompts,
    completions)), None where the engine gives none (a reward_model entry is then refused);
    runs_dir: where a reward_model's run id is looked up."""

    def __init__(self, specs: Sequence[Mapping], *, max_new_tokens: int, timeout_s: float = 30.0,
                 model_scorer: ScorerFactory | None = None, runs_dir: str | os.PathLike = "runs"):
        self.process = RewardProcess(timeout_s)
        self.functions: list[RewardFunction] = []
        seen: dict[str, int] = {}
        try:
            for spec in specs:
                base = _metric_name(spec)
                seen[base] = seen.get(base, 0) + 1
                name = base if seen[base] == 1 else f"{base}_{seen[base]}"
                self.functions.append(self._build(name, spec, max_new_tokens, model_scorer, str(runs_dir)))
        except BaseException:
            self.close()
            raise

    def _build(self, name: str, spec: Mapping, max_new_tokens: int, model_scorer, runs_dir: str) -> RewardFunction:
        kind = spec["function"]
        if kind == "exact_match":
            return ExactMatch(name, spec)
        if kind == "regex":
            return Regex(name, spec)
        if kind == "length":
            return Length(name, spec, max_new_tokens)
        if kind in ("file", "math"):
            return Isolated(name, spec, self.process)
        return ModelReward(name, spec, model_scorer, runs_dir)

    @classmethod
    def from_config(cls, config, model_scorer: ScorerFactory | None = None) -> RewardSet:
        g = config.grpo
        return cls(g.rewards, max_new_tokens=g.max_new_tokens, timeout_s=g.reward_timeout_s,
                   model_scorer=model_scorer, runs_dir=config.run.runs_dir)

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.functions]

    @property
    def columns(self) -> list[str]:
        """The data columns the functions read."""
        return list(dict.fromkeys(c for f in self.functions for c in f.columns))

    def score(self, prompts: Sequence[str], completions: Sequence[str], completion_lengths: Sequence[int],
              columns: Mapping[str, Sequence], where: Sequence[str] | None = None) -> RewardScores:
        """Rewards of N completions: `prompts` (N, each completion's prompt text, as rendered),
        `completions` (N texts), `completion_lengths` (N token counts), `columns` ({column: N values}),
        `where` (N record places, for messages; optional). Raises RewardError."""
        batch = _Batch(prompts, completions, np.asarray(completion_lengths), columns, where)
        values = {f.name: f.values(batch) for f in self.functions}
        weights = {f.name: f.weight for f in self.functions}
        total = np.zeros(len(batch), np.float64)
        for name, value in values.items():
            total += weights[name] * value
        return RewardScores(self.names, values, weights, total)

    def start(self) -> None:
        """Import the user's files now (in the reward process) rather than at the first batch: a file
        that does not import, or lacks its function, is a RewardError before training starts."""
        self.process.start()

    def close(self) -> None:
        self.process.close()
        for function in self.functions:
            function.close()

    def __enter__(self) -> RewardSet:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.process.close()
        except Exception:  # noqa: BLE001 (interpreter shutdown)
            pass


# ---------------------------------------------------------------------------------------------
# Before a launch
# ---------------------------------------------------------------------------------------------

def _defines(tree: ast.Module, name: str) -> bool:
    """Whether a module binds `name` at its top level (a def, a class, an assignment or an import)."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(n, ast.Name) and n.id == name for t in targets for n in ast.walk(t)):
                return True
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if any((a.asname or a.name.split(".")[0]) == name for a in node.names):
                return True
    return False


def _inside(path: Path, folders: Sequence[Path]) -> bool:
    real = Path(os.path.realpath(path))
    return any(real == (root := Path(os.path.realpath(f))) or root in real.parents for f in folders)


def _file_problem(index: int, spec: Mapping, allowed_dirs: Sequence[Path] | None, root: Path) -> Message | None:
    path = resolve_file(spec["path"], root)
    shown = spec["path"]
    if allowed_dirs is not None and not _inside(path, allowed_dirs):
        return Message("reward.check_file_outside", index=index, path=shown,
                       folders=", ".join(str(f) for f in allowed_dirs) or "none")
    if not path.is_file():
        return Message("reward.check_file_missing", index=index, path=shown)
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except SyntaxError as err:
        return Message("reward.check_file_syntax", index=index, path=shown, line=err.lineno or 0, py_says=err.msg)
    name = spec.get("name", "reward")
    if not _defines(tree, name):
        return Message("reward.check_file_no_def", index=index, path=shown, name=repr(name))
    return None


def _run_problem(index: int, spec: Mapping, runs_dir: str, root: Path) -> Message | None:
    run = spec["run"]
    folder = resolve_run(run, runs_dir, root)
    if folder is None:
        return Message("reward.check_run_missing", index=index, run=run, runs=str(runs_dir))
    try:
        state = RunDir(folder).read_status().state
    except (RunDirError, OSError, ValueError):
        state = "unreadable"
    if state not in FINISHED_STATES:
        return Message("reward.check_run_unfinished", index=index, run=run, state=state)
    try:
        saved = yaml.safe_load((folder / "config.yaml").read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        saved = {}
    objective = ((saved.get("train") or {}) if isinstance(saved, dict) else {}).get("objective", "sft")
    if spec_of(objective).kind != "reward":
        return Message("reward.check_run_objective", index=index, run=run, objective=objective)
    return None


def _setting_problem(spec: Mapping, max_new_tokens: int) -> Message | None:
    try:
        if spec["function"] == "length":
            _length_limits(spec, max_new_tokens)
        if spec["function"] == "exact_match":
            _bool_setting(spec, "ignore_case", "exact_match")
    except RewardError as err:
        return err.message
    return None


def check_rewards(config, columns: Iterable[str] | None, allowed_dirs: Sequence[str | os.PathLike] | None = None,
                  root: Path = REPO_ROOT) -> list:
    """What keeps grpo.rewards from running on this data, before a launch: a column a reward reads
    that the data lacks (`columns`: those every record has, core.data.prompts.reward_columns; None
    skips this), a reward file missing, not Python, without its function, or outside `allowed_dirs`
    (the folders the console lets reward code run from; None: anywhere), a reward_model run that is
    not a finished reward run, a length or exact_match setting of the wrong kind, math without
    math-verify. Each a core.spec.config.Problem on `grpo.rewards`, its value the reward's entry."""
    have = None if columns is None else set(columns)
    folders = None if allowed_dirs is None else [resolve_file(str(f), root) for f in allowed_dirs]
    problems = []
    for index, spec in enumerate(config.grpo.rewards, 1):
        kind = spec["function"]
        said: list[Message] = []
        setting = _setting_problem(spec, config.grpo.max_new_tokens)
        if setting is not None:
            said.append(Message("reward.check_setting", index=index, reason=setting))
        needed = spec.get("column", DEFAULT_COLUMN) if kind in ("exact_match", "math") else spec.get("column")
        if needed and have is not None and needed not in have:
            said.append(Message("reward.check_column", index=index, function=kind, column=repr(needed),
                                field_names=", ".join(sorted(have)) or "none"))
        if kind == "math" and importlib.util.find_spec("math_verify") is None:
            said.append(Message("reward.check_no_math", index=index))
        if kind == "file":
            said.append(_file_problem(index, spec, folders, root))
        if kind == "reward_model":
            said.append(_run_problem(index, spec, config.run.runs_dir, root))
        problems += [Problem("grpo.rewards", dict(spec), message) for message in said if message is not None]
    return problems

