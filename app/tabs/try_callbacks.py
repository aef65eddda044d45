"""Try-it callbacks: the base model and a fine-tuned checkpoint answer the same prompt, side by side.

Generation needs MindSpore, so each side is one `python -m core.generate --json` process (argv
list, no shell); the two run at the same time.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from core.run.launcher import REPO_ROOT
from core.run.rundir import POINTERS

from app.data import catalog
from app.auth.access import SINGLE_USER, Viewer, read_owner
from app.context import Console
from app.charts.figures import run_label, run_spec
from app.i18n import Said, problem_text, text
from core.spec.errors import RECORDS_ENV, error_on, said_of
from core.spec.messages import Message
from app.paths import OutsideRootsError, inside_roots

GENERATE_TIMEOUT_S = 600


@dataclass(frozen=True)
class Answer:
    """One side's answer, or why there is none: `error` is core's message (a Message by id, from
    core.generate's JSON line or its error record on stderr), the console's own (a Said), or a line of
    text from the process (shown as it is); `shown(lang)` says it in the page's language."""
    text: str
    new_tokens: int = 0
    seconds: float = 0.0
    error: str | None = None

    def shown(self, lang: str = "en") -> str:
        if self.error:
            return f"⚠ {problem_text(self.error, lang)}"
        return f"{self.text}\n\n" + Said("try.tokens_in", tokens=self.new_tokens,
                                         seconds=f"{self.seconds:.2f}").in_lang(lang)


def checkpoint_choices(console: Console, viewer: Viewer = SINGLE_USER, lang: str = "en") -> list[tuple[str, str]]:
    """(label, checkpoint folder) of every run `viewer` may see with a best or last checkpoint,
    newest first; the label says which checkpoint and the run's state in `lang`."""
    choices = []
    for summary in console.jobs.runs(viewer):
        for which in POINTERS:
            folder = summary.run.checkpoint(which)
            if folder.exists():
                shown = run_label(summary.run_id, summary.status.final, run_spec(summary.path), lang)
                choices.append((text("try.checkpoint_choice", lang).format(
                    run=shown, which=text(f"try.pointer.{which}", lang),
                    state=text(f"state.{summary.state}", lang) if lang == "zh" else summary.state),
                    str(folder)))
                break
    return choices


def checkpoint_picker(console: Console, viewer: Viewer = SINGLE_USER, current: str | None = None,
                      lang: str = "en") -> tuple[list[tuple[str, str]], str | None]:
    """The checkpoint picker as the runs are now: its choices, labelled with each run's current state
    (a label made when the page was built said "(running)" long after the run finished: issue 31
    item 5), and its value: the checkpoint picked before if it is still there, else the newest."""
    choices = checkpoint_choices(console, viewer, lang)
    folders = [folder for _, folder in choices]
    return choices, current if current in folders else (folders[0] if folders else None)


def generate_argv(source: str, is_checkpoint: bool, prompt: str, chat: bool, max_new_tokens: int,
                  python: str = sys.executable) -> list[str]:
    argv = [python, "-m", "core.generate", "--checkpoint" if is_checkpoint else "--model", source,
            f"--prompt={prompt}", "--max-new-tokens", str(int(max_new_tokens)), "--json"]
    return argv + (["--chat"] if chat else [])


def parse_output(stdout: str, stderr: str, returncode: int) -> Answer:
    """The JSON line core.generate prints last (its answer, or its error with the message's id);
    its error line when it failed without one."""
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith("{"):
            try:
                data = json.loads(line)
                if "error" in data:
                    return Answer("", error=Message.from_json(data.get("message")) or str(data["error"]))
                return Answer(str(data.get("text", "")), int(data.get("new_tokens", 0)), float(data.get("seconds", 0)))
            except (ValueError, TypeError, AttributeError):
                break
    return Answer("", error=error_on(stderr) or Said("try.exited", code=returncode))


def _run(argv: list[str], runner=subprocess.run) -> Answer:
    try:
        result = runner(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=GENERATE_TIMEOUT_S,
                        env={**os.environ, "GLOG_v": "3", RECORDS_ENV: "1"})
    except subprocess.TimeoutExpired:
        return Answer("", error=Said("check.no_answer", s=GENERATE_TIMEOUT_S))
    except OSError as err:
        return Answer("", error=Message("weights.os_error", os_error=str(err)))
    return parse_output(result.stdout, result.stderr, result.returncode)


def compare(console: Console, base_model: str | None, checkpoint: str | None, prompt: str, chat: bool,
            max_new_tokens: int, runner=subprocess.run, viewer: Viewer = SINGLE_USER) -> tuple[Answer, Answer]:
    """Both answers; a side that is not set (or outside the allowed folders) explains why."""
    if not (prompt or "").strip():
        missing = Answer("", error=Said("try.no_prompt"))
        return missing, missing
    jobs: list[list[str] | Answer] = []
    entry = catalog.find(console.models(), base_model)
    if entry is None or not entry.loadable:
        jobs.append(Answer("", error=Said("try.no_base")))
    else:
        jobs.append(generate_argv(str(entry.path), False, prompt, chat, max_new_tokens))
    jobs.append(_checkpoint_job(console, checkpoint, prompt, chat, max_new_tokens, viewer))
    with ThreadPoolExecutor(max_workers=2) as pool:
        answers = list(pool.map(lambda job: job if isinstance(job, Answer) else _run(job, runner), jobs))
    return answers[0], answers[1]


def _checkpoint_job(console: Console, checkpoint: str | None, prompt: str, chat: bool,
                    max_new_tokens: int, viewer: Viewer = SINGLE_USER) -> list[str] | Answer:
    """The fine-tuned side's argv, for a checkpoint folder inside the runs folder only, of a run
    `viewer` may see."""
    if not checkpoint:
        return Answer("", error=Said("try.no_checkpoint"))
    try:
        folder = inside_roots(checkpoint, [console.runs_dir])
    except OutsideRootsError as err:
        return Answer("", error=said_of(err))
    root = inside_roots(console.runs_dir, [console.runs_dir])
    run = root / folder.relative_to(root).parts[0] if folder != root else root
    if folder == root or not viewer.may_see(read_owner(run)):
        return Answer("", error=Said("try.no_such_checkpoint", checkpoint=checkpoint))
    if not folder.is_dir():
        return Answer("", error=Said("try.no_such_checkpoint", checkpoint=checkpoint))
    return generate_argv(str(folder), True, prompt, chat, max_new_tokens)
