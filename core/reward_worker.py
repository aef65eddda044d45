"""The reward functions a GRPO run keeps out of its own process (core.eval.rewards starts this once per
run: `python -m core.reward_worker`, no shell): the user's Python files, so that
grpo.reward_timeout_s can stop one that runs too long, and the `math` built-in, whose math-verify
brings sympy (~45 MB, 0.7 s to import) and times its parsing out with signals.

Protocol: one JSON object per line on stdin, one answer per line on the process's original stdout;
what the user's code prints goes to stderr (the run's train.log).
    {"op": "load", "functions": [{"kind": "file", "path": P, "name": N} | {"kind": "math"}, ...]}
        -> {"ok": true} | {"error": {...}}
    {"op": "call", "index": I, "prompts": [...], "completions": [...], "columns": {...}}
        -> {"values": [numbers, NaN kept]} | {"error": {...}}
An error is {"kind", "text", "traceback", ...}: import, missing, not_callable, raised, not_a_list,
not_a_number (index, py_type, value), math_answer (index, value). The process ends when its parent
does (PR_SET_PDEATHSIG) or stdin closes.
"""
from __future__ import annotations

import ctypes
import functools
import importlib.util
import json
import numbers
import os
import re
import signal
import sys
import traceback
from pathlib import Path


_LATEX = re.compile(r"[\\^_{}=+\-*/0-9]")


def _die_with_parent() -> None:
    """Linux: the kernel kills this process when its parent dies (a worker killed mid-run leaves no
    reward process behind, even one stuck in a user's loop)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(1)


def _error(kind: str, err: BaseException | None = None, **extra) -> dict:
    said = {"kind": kind, **extra}
    if err is not None:
        said["text"] = f"{type(err).__name__}: {err}"
        said["traceback"] = "".join(traceback.format_exception(err))
    return {"error": said}


def _load_file(path: str, name: str, index: int):
    module_name = f"mindtune_reward_{index}"
    folder = str(Path(path).parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)  # the file may import its neighbours, as a script would
    try:
        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    except BaseException as err:  # noqa: B902 (a SystemExit or a SyntaxError of the user's file is its error)
        return None, _error("import", err)
    if not hasattr(module, name):
        return None, _error("missing")
    function = getattr(module, name)
    if not callable(function):
        return None, _error("not_callable", py_type=type(function).__name__)
    return function, None


def _math(prompts, completions, answer_column: str = "answer", **columns):
    """1.0 where math-verify reads the completion's answer as equal to the column's, else 0.0 (an
    answer it cannot read at all is an error: a data problem, not a wrong completion)."""
    from math_verify import parse, verify

    values = []
    for index, (completion, gold) in enumerate(zip(completions, columns[answer_column])):
        expected = parse(str(gold))
        if not expected and _LATEX.search(str(gold)):  # a bare LaTeX answer (x^2+1) read as one; a word is not
            expected = parse(f"${gold}$")
        if not expected:
            raise _MathAnswer(index, gold)
        values.append(1.0 if verify(expected, parse(completion)) else 0.0)
    return values


class _MathAnswer(Exception):
    def __init__(self, index: int, value):
        super().__init__(index, value)
        self.index, self.value = index, value


def _values(result) -> dict:
    """The function's result as numbers (NaN kept: the parent names it), or what is wrong with it."""
    if hasattr(result, "tolist"):  # a numpy array or a torch tensor
        result = result.tolist()
    if not isinstance(result, (list, tuple)):
        return _error("not_a_list", py_type=type(result).__name__)
    out = []
    for index, value in enumerate(result):
        if isinstance(value, numbers.Real):  # int, float, bool, numpy scalars
            out.append(float(value))
        else:
            return _error("not_a_number", index=index, py_type=type(value).__name__, value=repr(value)[:80])
    return {"values": out}


def _call(function, request: dict) -> dict:
    try:
        result = function(prompts=request["prompts"], completions=request["completions"], **request["columns"])
    except _MathAnswer as err:
        return _error("math_answer", index=err.index, value=repr(err.value)[:80])
    except BaseException as err:  # noqa: B902 (whatever the user's function raises is its error)
        return _error("raised", err)
    return _values(result)


def main() -> None:
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # print() in the user's code goes to stderr, never into the answers
    _die_with_parent()
    functions: list = []
    for line in sys.stdin:
        request = json.loads(line)
        if request["op"] == "load":
            answer: dict = {"ok": True}
            for index, spec in enumerate(request["functions"]):
                if spec["kind"] == "math":
                    functions.append(functools.partial(_math, answer_column=spec.get("column", "answer")))
                    continue
                function, error = _load_file(spec["path"], spec["name"], index)
                if error:
                    error["error"]["index"] = index
                    answer = error
                    break
                functions.append(function)
        else:
            answer = _call(functions[request["index"]], request)
        answers.write(json.dumps(answer, default=str) + "\n")
        answers.flush()


if __name__ == "__main__":
    main()
