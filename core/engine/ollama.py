"""An Ollama Modelfile for an exported GGUF: the model's chat template as Ollama's TEMPLATE (Go template
syntax), its end tokens as `PARAMETER stop`, and the system prompt the run trained with.

A Jinja chat template cannot be translated to Go in general, so it is read by what it renders: the
template is rendered for probe conversations and each role's text before and after the message
(`<|im_start|>user\\n` ... `<|im_end|>\\n`), the text before the first message and the generation
prompt are taken from the differences. The Go template built from those pieces is then rendered in
Python for every probe conversation and must give the Jinja template's text exactly; a template that
renders a role differently by its position (a last assistant turn without its end token, a system
prompt folded into the first user turn) is refused, naming what differed. A system block the
template adds when the conversation has none (Qwen2.5's "You are Qwen...") becomes `SYSTEM`.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from core.data.formats import conversation
from core.data.pipeline import data_sources
from core.data.tokenizer import Tokenizer
from core.spec.config import ConfigError, load_config
from core.spec.errors import MessageError
from core.spec.messages import Message
from core.run.rundir import RunDir

# contents that no template rewrites (no spaces to strip, no markup)
SYSTEM, USER, ASSISTANT = "MTSYSTEMaaa", ("MTUSERbbb", "MTUSERccc"), ("MTASSISTANTddd", "MTASSISTANTeee")
SYSTEM_PROMPT_RECORDS = 2000  # training records read to find the run's system prompt


class TemplateError(MessageError):
    """A chat template that Ollama's TEMPLATE cannot say; the message (a core Message) says why."""


@dataclass(frozen=True)
class RoleText:
    before: str
    after: str


@dataclass(frozen=True)
class ChatLayout:
    """What a chat template renders, piece by piece (see the module doc)."""
    head: str  # before the first message (a BOS written as text)
    system: RoleText
    user: RoleText
    assistant: RoleText
    generation: str  # the assistant's opening, after the last message
    default_system: str | None  # the system prompt the template uses when the conversation has none

    def render(self, messages: list[dict]) -> str:
        """What the Go template (`go_template`) renders for `messages`, with the generation prompt."""
        roles = {"system": self.system, "user": self.user, "assistant": self.assistant}
        return self.head + "".join(roles[m["role"]].before + m["content"] + roles[m["role"]].after
                                   for m in messages) + self.generation

    def go_template(self) -> str:
        parts = [self.head, "{{ range .Messages }}"]  # no trim markers: every literal is exact
        for index, (role, text) in enumerate((("system", self.system), ("user", self.user),
                                               ("assistant", self.assistant))):
            parts.append(("{{ if" if index == 0 else "{{ else if") + f' eq .Role "{role}" }}}}')
            parts.append(text.before + "{{ .Content }}" + text.after)
        parts.append("{{ end }}{{ end }}" + self.generation)
        return "".join(parts)


def _render(tokenizer: Tokenizer, messages: list[dict], generation: bool) -> str:
    return tokenizer.apply_chat_template(messages, add_generation_prompt=generation, tokenize=False)


def _after(longer: str, shorter: str, what: str) -> str:
    if not longer.startswith(shorter):
        raise TemplateError(Message("ollama.template_not_prefix", what=what))
    return longer[len(shorter):]


def _split(text: str, content: str, what: str) -> RoleText:
    if text.count(content) != 1:
        raise TemplateError(Message("ollama.template_content", what=what))
    before, after = text.split(content)
    return RoleText(before, after)


def read_layout(tokenizer: Tokenizer) -> ChatLayout:
    """The template's pieces, checked on the probe conversations (see the module doc)."""
    u1, u2 = ({"role": "user", "content": c} for c in USER)
    a1, a2 = ({"role": "assistant", "content": c} for c in ASSISTANT)
    s = {"role": "system", "content": SYSTEM}
    one = _render(tokenizer, [u1], False)
    two = _render(tokenizer, [u1, a1], False)
    three = _render(tokenizer, [u1, a1, u2], False)
    user = _split(_after(three, two, "a second user turn"), USER[1], "a user turn")
    assistant = _split(_after(two, one, "an assistant turn"), ASSISTANT[0], "an assistant turn")
    first_user = user.before + USER[0] + user.after
    if not one.endswith(first_user):
        raise TemplateError(Message("ollama.template_first_turn"))
    head = one[: len(one) - len(first_user)]
    with_system = _render(tokenizer, [s, u1], False)
    system = _split(with_system[: len(with_system) - len(first_user)], SYSTEM, "a system turn")
    generation = _after(_render(tokenizer, [u1], True), one, "the generation prompt")
    default = None
    if head and head.startswith(system.before) and head.endswith(system.after) \
            and not system.before.startswith(head):
        default = head[len(system.before): len(head) - len(system.after)]  # a system block of its own
        head = ""
    else:
        prefix = system.before
        if not prefix.startswith(head):
            raise TemplateError(Message("ollama.template_head"))
        system = RoleText(prefix[len(head):], system.after)
    layout = ChatLayout(head, system, user, assistant, generation, default)
    _verify(tokenizer, layout, [s, u1, a1, u2, a2])
    return layout


def _verify(tokenizer: Tokenizer, layout: ChatLayout, probe: list[dict]) -> None:
    s, u1, a1, u2, a2 = probe
    for messages in ([u1], [u1, a1, u2], [s, u1], [s, u1, a1, u2], [u1, a1, u2, a2, u1]):
        expected = _render(tokenizer, messages, True)
        shown = messages if messages[0]["role"] == "system" or layout.default_system is None \
            else [{"role": "system", "content": layout.default_system}, *messages]
        if layout.render(shown) != expected:
            roles = "/".join(m["role"] for m in messages)
            raise TemplateError(Message("ollama.template_differs", roles=roles))


def run_system_prompt(run_dir: Path) -> tuple[str | None, int]:
    """The system prompt the run's training records carry, if they all carry the same one, and how many
    distinct ones they carry."""
    try:
        config = load_config(RunDir(run_dir).config_path)
        sources = data_sources(config.data, "train", config.run.seed)
    except (ConfigError, OSError, ValueError):
        return None, 0
    found: set[str] = set()
    without = 0
    read = 0
    for source in sources:
        if source.fmt == "text":
            continue
        for record in source.data.records[:SYSTEM_PROMPT_RECORDS]:
            read += 1
            try:
                messages = conversation(record, source.fmt, source.columns, "drop").messages
            except ValueError:
                continue
            if messages and messages[0]["role"] == "system" and isinstance(messages[0].get("content"), str):
                found.add(messages[0]["content"])
            else:
                without += 1
    if len(found) == 1 and not without:
        return next(iter(found)), 1
    return None, len(found)


def stop_words(tokenizer: Tokenizer, extra_ids=()) -> list[str]:
    ids = sorted(set(tokenizer.eos_token_ids) | set(extra_ids))
    return [w for w in dict.fromkeys(tokenizer.decode([i], skip_special_tokens=False) for i in ids) if w.strip()]


def _quoted(text: str, what: str) -> str:
    if '"""' in text:
        raise TemplateError(Message("ollama.triple_quote", what=what))
    return f'"""{text}"""'


def modelfile_for(tokenizer: Tokenizer, run_dir: Path, gguf_name: str, eos_ids=()) -> str:
    """The Modelfile's text (FROM ./<gguf_name>); refuses a template Ollama's TEMPLATE cannot say."""
    layout = read_layout(tokenizer)
    template = layout.go_template()
    if "{{" in (layout.head + layout.generation + layout.system.before + layout.user.before
                + layout.assistant.before + layout.system.after + layout.user.after + layout.assistant.after):
        raise TemplateError(Message("ollama.template_braces"))
    system, distinct = run_system_prompt(run_dir)
    lines = [f"# made by mindtune from run {Path(run_dir).name}: `ollama create <name> -f Modelfile`",
             f"FROM ./{gguf_name}", f"TEMPLATE {_quoted(template, 'the chat template')}"]
    for word in stop_words(tokenizer, eos_ids):
        lines.append(f'PARAMETER stop "{word}"' if '"' not in word else f"PARAMETER stop {word}")
    if system is not None:
        lines.append(f"SYSTEM {_quoted(system, 'the system prompt')}")
    elif layout.default_system is not None:
        lines.append(f"# the chat template's own system prompt (the run's records carry none)")
        lines.append(f"SYSTEM {_quoted(layout.default_system, 'the system prompt')}")
    elif distinct > 1:
        lines.append(f"# the run's records carry {distinct} different system prompts: none is set here")
    return "\n".join(lines) + "\n"
