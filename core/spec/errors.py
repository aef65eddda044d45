"""The errors a model's config.json and checkpoint files raise, and the one check that raises the
first: MindSpore-free and importing no other module of core, so the family specs
(`core.spec.families`, `core.spec.moe_args`) and `core.spec.model_args` share them without importing each other (the message
catalogue, core.spec.messages, is stdlib only)."""
from __future__ import annotations

import json
import os
import sys

from core.spec.messages import Message


class MessageError(ValueError):
    """An error whose text is a core message (core.spec.messages.Message) where its producer has an
    id: str(err) is its English; `message` and `said` keep the Message, which the console renders in
    the page's language (app.i18n.problem_text)."""

    @property
    def message(self) -> str:
        """The Message this error was raised with, else its text."""
        first = self.args[0] if len(self.args) == 1 else None
        return first if isinstance(first, Message) else str(self)

    @property
    def said(self) -> list[str]:
        return [self.message]


class ModelConfigError(MessageError):
    """A config.json that mindtune cannot build a model from; the message names file and key."""


class CheckpointError(MessageError):
    """A checkpoint that cannot be loaded; the message names the file or tensor and what is supported."""


def check(ok: bool, source: str, key: str, message: str) -> None:
    """Raise ModelConfigError "<source>: <key>: <message>." unless `ok` (a Message stays one:
    model.at around model.at_setting)."""
    if not ok:
        raise ModelConfigError(Message("model.at", where=source, reason=Message("model.at_setting", setting=key,
                                                                                 reason=message)))


def first_of(key: str, names: list[str], **params) -> Message:
    """The message `key` naming the first of `names` (a missing tensor, ...); where there are more,
    its plural id ('<key>s') with how many more."""
    if len(names) > 1:
        return Message(key + "s", name=names[0], more=len(names) - 1, **params)
    return Message(key, name=names[0], **params)


def said_of(err: BaseException) -> str:
    """An error's message as it was made (`said`: a DataError's, a TokenizerError's, the console's
    JobError's Said): its one line, or its several lines as one Message (problem.lines) where one of
    them is a Message; else its text."""
    said = getattr(err, "said", None)
    if isinstance(said, list) and len(said) == 1:
        return said[0]
    if isinstance(said, list) and said and any(isinstance(line, Message) for line in said):
        return Message("problem.lines", lines=said)
    return str(err)


# An entry point the console starts (core.dry_run, core.export, core.generate, core.evaluate) prints
# its error's record on stderr after its English, one JSON line, when the console asks for it by
# this variable: the console says the record by its id and never reads the English back.
RECORDS_ENV = "MINDTUNE_ERROR_RECORDS"
RECORD_MARK = "mindtune-error: "
# ... and core.serve its address once it listens ({"name", "url"}), for the console's Serve action
SERVING_MARK = "mindtune-serving: "


def record_of(said: str) -> dict:
    """A message's record ({"id", "params"}); a text without an id as {"text"}."""
    return said.to_json() if isinstance(said, Message) else {"text": str(said)}


def from_record(data) -> str | None:
    """The Message a record keeps, or the text it carries (a newer writer's id: its English); None
    when it is neither."""
    if not isinstance(data, dict):
        return None
    message = Message.from_json(data)
    if message is not None:
        return message
    shown = data.get("text")
    return shown if isinstance(shown, str) else None


def report(err: BaseException | str, prefix: str = "error: ") -> None:
    """Print the error's English on stderr (what a command-line user reads) and, when the console
    asked (RECORDS_ENV), its record on the next line."""
    said = said_of(err) if isinstance(err, BaseException) else err
    print(f"{prefix}{err}", file=sys.stderr, flush=True)
    if os.environ.get(RECORDS_ENV):
        print(RECORD_MARK + json.dumps(record_of(said)), file=sys.stderr, flush=True)


def read_report(stderr: str) -> str | None:
    """The last error record an entry point printed on `stderr` (a Message, or its text), None
    when it printed none."""
    for line in reversed((stderr or "").splitlines()):
        if line.startswith(RECORD_MARK):
            try:
                return from_record(json.loads(line[len(RECORD_MARK):]))
            except ValueError:
                return None
    return None


def error_on(stderr: str, marks: tuple[str, ...] = ()) -> str | None:
    """What an entry point said went wrong on `stderr`: its record (`read_report`); without one (a crash,
    an old entry point), as it is, its last `error: ` line (the prefix dropped) or the last line holding one of
    `marks`, else its last line; None when it printed nothing."""
    found = read_report(stderr)
    if found is not None:
        return found
    lines = [line for line in (stderr or "").splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:") or any(mark in line for mark in marks)]
    said = errors or lines
    return said[-1].removeprefix("error: ") if said else None
