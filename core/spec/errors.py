"""The errors a model's config.json and checkpoint files raise, and the one check that raises the
first: MindSpore-free and importing no other module of core, so the family specs
(`core.spec.families`, `core.spec.moe_args`) and `core.spec.model_args` share them without importing each other (the message
catalogue, core.spec.messages, is stdlib only)."""
from __future__ import annotations

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
    """An error's message as it was made where it keeps exactly one (`said`: a DataError's, a
    TokenizerError's, the console's JobError's Said), else its text (several lines: str(err), or
    pass the error itself to app.i18n.problem_text)."""
    said = getattr(err, "said", None)
    return said[0] if isinstance(said, list) and len(said) == 1 else str(err)
