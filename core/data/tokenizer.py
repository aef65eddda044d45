"""A model folder's tokenizer and chat template, without transformers.

`Tokenizer.from_dir(model_dir)` reads a Hugging Face model folder (`tokenizer.json`, optional
`tokenizer_config.json`, `special_tokens_map.json`, `chat_template.jinja`, `generation_config.json`)
with the `tokenizers` library and renders chat templates with jinja2, so that the ids it produces
are the ids `transformers.AutoTokenizer` would produce for the same folder. The product depends on
`tokenizers` and `jinja2` only; transformers is a test-time reference.

Two rules decide which ids come out, both as transformers 5 applies them:
- special tokens added by `encode(..., add_special_tokens=True)` (BOS, EOS) come from the
  post-processor in `tokenizer.json`; `add_bos_token`/`add_eos_token` in `tokenizer_config.json`
  are ignored when a `tokenizer.json` is present;
- a chat template inserts its own BOS, so `apply_chat_template(..., tokenize=True)` encodes the
  rendered text with `add_special_tokens=False`.

Known differences from transformers 5, both rare in practice:
- for `LlamaTokenizer` folders with a sentencepiece-style (non byte-level) `tokenizer.json`,
  transformers rebuilds the pre-tokenizer from the config's `legacy` flag; ids can then differ for
  text right after a special token written in the text, or with leading spaces. We follow
  `tokenizer.json`, as transformers 4 did.
- a named special token missing from the config stays None here; some transformers classes supply
  a default (Qwen2Tokenizer: `<|endoftext|>`, LlamaTokenizer: `<s>`/`</s>`/`<unk>`).

This module imports nothing else of core and never imports mindspore.
"""

from __future__ import annotations

import json
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping

import jinja2
import jinja2.ext
import jinja2.nodes
import tokenizers
from jinja2.sandbox import ImmutableSandboxedEnvironment
from tokenizers import AddedToken

from core.spec.errors import MessageError
from core.spec.messages import Message

TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
SPECIAL_TOKENS_MAP_FILE = "special_tokens_map.json"
GENERATION_CONFIG_FILE = "generation_config.json"
CHAT_TEMPLATE_FILE = "chat_template.jinja"
CHAT_TEMPLATE_DIR = "additional_chat_templates"
SENTENCEPIECE_FILE = "tokenizer.model"

# The named special tokens transformers knows; any other `*_token` key in the config with a token
# value (e.g. `image_token`) is treated the same way.
STANDARD_SPECIAL_TOKENS = (
    "bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token",
)
# Older and newer spellings of "more special tokens, unnamed".
EXTRA_SPECIAL_TOKEN_KEYS = ("additional_special_tokens", "extra_special_tokens")
# Names a message's reasoning may come under; templates read `reasoning_content` (gpt-oss: `thinking`).
REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")


class TokenizerError(MessageError):
    """A model folder's tokenizer files are missing, malformed or unsupported, or a chat cannot be
    rendered. The message names the file (or message) and what would be valid; where it has an id,
    it is a core message (`message`, `said`: model.at around a tokenizer.* message)."""


def _at(where: Any, reason: Message) -> Message:
    """'<where>: <reason>': a file, or a file and its 'key'."""
    return Message("model.at", where=str(where), reason=reason)


def _entry(path: Any, key: str) -> str:
    """Where a value is: "<file> '<key>'"."""
    return f"{path} '{key}'"


# ---------------------------------------------------------------------------------------------
# Reading the folder
# ---------------------------------------------------------------------------------------------

def _read_json(path: Path) -> dict | None:
    """The JSON object in `path`, or None when the file does not exist."""
    if not path.is_file():
        return None
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise TokenizerError(_at(path, Message("tokenizer.unreadable_json", json_says=str(err)))) from err
    if not isinstance(value, dict):
        raise TokenizerError(_at(path, Message("tokenizer.not_object", py_type=type(value).__name__)))
    return value


def _load_backend(model_dir: Path) -> tokenizers.Tokenizer:
    """The `tokenizers.Tokenizer` serialized in `model_dir/tokenizer.json`."""
    path = model_dir / TOKENIZER_FILE
    if not path.is_file():
        if (model_dir / SENTENCEPIECE_FILE).is_file():
            raise TokenizerError(
                f"{model_dir}: only a sentencepiece {SENTENCEPIECE_FILE} was found; it is not supported yet. "
                f"Convert it once to a fast tokenizer with transformers (and sentencepiece) installed: "
                f"python -c \"from transformers import AutoTokenizer; "
                f"AutoTokenizer.from_pretrained('{model_dir}').save_pretrained('{model_dir}')\" "
                f"which writes {TOKENIZER_FILE}."
            )
        raise TokenizerError(_at(model_dir, Message("tokenizer.no_file")))
    try:
        return tokenizers.Tokenizer.from_file(str(path))
    except Exception as err:  # tokenizers raises a bare Exception for malformed files
        raise TokenizerError(_at(path, Message("tokenizer.invalid_file", serde_says=str(err)))) from err


def _added_token(value: Any, where: str) -> AddedToken | None:
    """A special token given as a string or as a serialized AddedToken dict (`{"content": ...}`);
    None for null. Special tokens are matched on the raw text, like transformers does."""
    if value is None:
        return None
    if isinstance(value, str):
        return AddedToken(value, special=True, normalized=False)
    if isinstance(value, Mapping) and isinstance(value.get("content"), str):
        return AddedToken(
            value["content"],
            single_word=bool(value.get("single_word", False)),
            lstrip=bool(value.get("lstrip", False)),
            rstrip=bool(value.get("rstrip", False)),
            normalized=bool(value.get("normalized", False)),
            special=True,
        )
    raise TokenizerError(_at(where, Message("tokenizer.token", py_value=repr(value))))


def _is_token_value(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, Mapping) and isinstance(value.get("content"), str))


def _named_special_tokens(config: dict, special_map: dict | None, config_path: Path,
                          map_path: Path) -> dict[str, AddedToken | None]:
    """`bos_token`, `eos_token`, ... (and model-specific `*_token` keys) from the tokenizer config,
    overridden by `special_tokens_map.json`. transformers reads that legacy file only when the
    config has no `added_tokens_decoder`, so we do the same."""
    named: dict[str, Any] = {}
    for key, value in config.items():
        if key in STANDARD_SPECIAL_TOKENS or (key.endswith("_token") and _is_token_value(value)):
            named[key] = (value, _entry(config_path, key))
    extra = config.get("extra_special_tokens")
    if isinstance(extra, Mapping):  # newer layout: {"image_token": "<image>", ...}
        for key, value in extra.items():
            named[key] = (value, _entry(config_path, f"extra_special_tokens.{key}"))
    if special_map is not None and "added_tokens_decoder" not in config:
        for key, value in special_map.items():
            if key in STANDARD_SPECIAL_TOKENS or (key.endswith("_token") and _is_token_value(value)):
                named[key] = (value, _entry(map_path, key))
    return {key: _added_token(value, where) for key, (value, where) in named.items()}


def _extra_special_tokens(config: dict, special_map: dict | None, config_path: Path,
                          map_path: Path) -> list[AddedToken]:
    """Unnamed special tokens (`additional_special_tokens` / `extra_special_tokens` lists)."""
    sources = [(config, config_path)]
    if special_map is not None and "added_tokens_decoder" not in config:
        sources.append((special_map, map_path))
    tokens: list[AddedToken] = []
    for source, path in sources:
        for key in EXTRA_SPECIAL_TOKEN_KEYS:
            values = source.get(key)
            if isinstance(values, list):
                tokens.extend(_added_token(v, _entry(path, key)) for v in values)
    return [t for t in tokens if t is not None]


def _config_added_tokens(config: dict, config_path: Path) -> list[AddedToken]:
    """Tokens listed in the config's `added_tokens_decoder`, in id order."""
    decoder = config.get("added_tokens_decoder")
    if not isinstance(decoder, Mapping):
        return []
    tokens = []
    for index, value in sorted(decoder.items(), key=lambda item: int(item[0])):
        if not _is_token_value(value):
            raise TokenizerError(_at(_entry(config_path, f"added_tokens_decoder.{index}"),
                                     Message("tokenizer.added_token", py_value=repr(value))))
        value = value if isinstance(value, Mapping) else {"content": value}
        tokens.append(AddedToken(
            value["content"],
            single_word=bool(value.get("single_word", False)),
            lstrip=bool(value.get("lstrip", False)),
            rstrip=bool(value.get("rstrip", False)),
            normalized=bool(value.get("normalized", True)),
            special=bool(value.get("special", False)),
        ))
    return tokens


def _register_tokens(backend: tokenizers.Tokenizer, tokens: Iterable[AddedToken]) -> None:
    """Add the config's tokens that `tokenizer.json` does not already list as added tokens.

    transformers does this on load, so a special token named only in the config (say an EOS that
    exists in the base vocabulary) is matched whole in text and skipped when decoding. Tokens
    already in the added vocabulary keep the flags `tokenizer.json` gives them."""
    known = {token.content for token in backend.get_added_tokens_decoder().values()}
    missing = []
    for token in tokens:
        if token.content not in known:
            known.add(token.content)
            missing.append(token)
    if missing:
        backend.add_tokens(missing)


def _generation_eos_ids(model_dir: Path) -> set[int]:
    """`eos_token_id` (an int or a list) from `generation_config.json`, if that file exists."""
    path = model_dir / GENERATION_CONFIG_FILE
    config = _read_json(path) or {}
    value = config.get("eos_token_id")
    if value is None:
        return set()
    values = value if isinstance(value, list) else [value]
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise TokenizerError(_at(_entry(path, "eos_token_id"), Message("tokenizer.eos_ids", py_value=repr(value))))
    return set(values)


def _wants_space_clean_up(config: dict, backend: tokenizers.Tokenizer) -> bool:
    """Whether `decode` removes spaces before punctuation (`clean_up_tokenization_spaces`).

    transformers 5 ignores the flag for BPE models, where it would corrupt text, unless the config
    also sets `clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output`."""
    if not config.get("clean_up_tokenization_spaces", False):
        return False
    is_bpe = isinstance(backend.model, tokenizers.models.BPE)
    forced = config.get("clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output", False)
    return not is_bpe or bool(forced)


def _clean_up_spaces(text: str) -> str:
    """Undo word-piece spacing around punctuation and English contractions ("do n't" → "don't")."""
    for spaced, joined in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"),
                           (" n't", "n't"), (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")):
        text = text.replace(spaced, joined)
    return text


def _load_chat_templates(model_dir: Path, config: dict, config_path: Path) -> dict[str, str]:
    """Chat templates by name ("default" for the main one).

    Separate files (`chat_template.jinja`, `additional_chat_templates/*.jinja`, the newer layout)
    take priority over `chat_template` in the config, which may be a string or a list of
    `{"name", "template"}` objects."""
    templates: dict[str, str] = {}
    main_file = model_dir / CHAT_TEMPLATE_FILE
    if main_file.is_file():
        templates["default"] = main_file.read_text(encoding="utf-8")
    extra_dir = model_dir / CHAT_TEMPLATE_DIR
    if extra_dir.is_dir():
        for path in sorted(extra_dir.glob("*.jinja")):
            templates[path.name.removesuffix(".jinja")] = path.read_text(encoding="utf-8")
    if templates:
        return templates

    value = config.get("chat_template")
    if value is None:
        return {}
    if isinstance(value, str):
        return {"default": value}
    if isinstance(value, list):
        for index, entry in enumerate(value):
            if not (isinstance(entry, Mapping) and isinstance(entry.get("name"), str)
                    and isinstance(entry.get("template"), str)):
                raise TokenizerError(_at(_entry(config_path, f"chat_template[{index}]"),
                                         Message("tokenizer.template_entry")))
            templates[entry["name"]] = entry["template"]
        return templates
    raise TokenizerError(_at(_entry(config_path, "chat_template"),
                             Message("tokenizer.template_type", py_type=type(value).__name__)))


# ---------------------------------------------------------------------------------------------
# Chat template environment
# ---------------------------------------------------------------------------------------------

class _GenerationTag(jinja2.ext.Extension):
    """Accepts `{% generation %}...{% endgeneration %}`, which some templates use to mark assistant
    text for transformers' assistant masks, and renders the body unchanged."""

    tags = {"generation"}

    def parse(self, parser: jinja2.parser.Parser) -> jinja2.nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render_body"), [], [], body).set_lineno(lineno)

    def _render_body(self, caller) -> str:
        return caller()


class _TemplateRefusal(Exception):
    """Raised by `raise_exception(...)` inside a template; turned into a TokenizerError that names
    the model folder."""


def _raise_exception(message: str):
    """`raise_exception(...)` inside a template: the template refuses the conversation."""
    raise _TemplateRefusal(message)


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None,
            separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    """JSON without jinja's HTML escaping, keeping non-ASCII text readable (as templates expect)."""
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(format: str) -> str:
    """Today's date/time, for templates that print the current date into the system prompt."""
    return datetime.now().strftime(format)


@lru_cache(maxsize=32)
def _compile_template(source: str) -> jinja2.Template:
    """Compile a chat template in a sandbox set up as transformers sets it up (whitespace control,
    `loopcontrols`, `tojson`, `raise_exception`, `strftime_now`); templates are untrusted code."""
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols, _GenerationTag]
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env.from_string(source)


def _checked_messages(messages: Any) -> list[dict]:
    """Copies of the messages, each a dict with string `role` and `content` (an assistant message
    with `tool_calls` may have no content); keys whose value is None are dropped and reasoning is
    offered under every name templates read (as transformers)."""
    if not isinstance(messages, (list, tuple)) or not messages:
        raise TokenizerError("messages: expected a non-empty list of {'role', 'content'} dicts")
    checked = []
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise TokenizerError(
                f"message {index}: expected a dict with 'role' and 'content', got {type(message).__name__}"
            )
        for key in ("role", "content"):
            if key == "content" and message.get("content") is None and message.get("tool_calls"):
                continue
            if not isinstance(message.get(key), str):
                got = type(message[key]).__name__ if key in message else "nothing"
                raise TokenizerError(f"message {index}: '{key}' must be a string, got {got}")
        message = {key: value for key, value in message.items() if value is not None}
        reasoning = next((message[key] for key in REASONING_FIELDS if key in message), None)
        if reasoning is not None:
            message = {"thinking": reasoning, **message, "reasoning_content": reasoning}
        checked.append(message)
    return checked


# ---------------------------------------------------------------------------------------------
# The tokenizer
# ---------------------------------------------------------------------------------------------

class Tokenizer:
    """A model folder's tokenizer: encode/decode, special token ids and the chat template."""

    def __init__(self, backend: tokenizers.Tokenizer, *, special_tokens: Mapping[str, str | None],
                 chat_templates: Mapping[str, str] | None = None, generation_eos_ids: Iterable[int] = (),
                 clean_up_spaces: bool = False, source: str = "tokenizer"):
        """Wrap an already configured backend. `special_tokens` maps names (`bos_token`, ...) to
        token strings; `source` names the folder in error messages. Prefer `from_dir`."""
        self._backend = backend
        self._special_tokens = {k: v for k, v in special_tokens.items() if v is not None}
        self._chat_templates = dict(chat_templates or {})
        self._generation_eos_ids = set(generation_eos_ids)
        self._clean_up_spaces = clean_up_spaces
        self._source = source

    @classmethod
    def from_dir(cls, model_dir: str | Path) -> "Tokenizer":
        """Load `tokenizer.json` and the optional config files of a Hugging Face model folder."""
        model_dir = Path(model_dir)
        if not model_dir.is_dir():
            raise TokenizerError(_at(model_dir, Message("tokenizer.not_a_folder")))
        backend = _load_backend(model_dir)
        config_path = model_dir / TOKENIZER_CONFIG_FILE
        map_path = model_dir / SPECIAL_TOKENS_MAP_FILE
        config = _read_json(config_path) or {}
        special_map = _read_json(map_path)

        named = _named_special_tokens(config, special_map, config_path, map_path)
        padding = backend.padding  # a pad token baked into tokenizer.json counts when the config has none
        if "pad_token" not in named and padding:
            named["pad_token"] = _added_token(padding.get("pad_token"), _entry(model_dir / TOKENIZER_FILE, "padding"))
        extra = _extra_special_tokens(config, special_map, config_path, map_path)
        _register_tokens(backend, [*_config_added_tokens(config, config_path),
                                   *(t for t in named.values() if t is not None), *extra])
        # transformers encodes without truncation or padding unless asked; so do we.
        backend.no_truncation()
        backend.no_padding()
        # `split_special_tokens: true` makes special tokens written in text encode as plain text.
        backend.encode_special_tokens = bool(config.get("split_special_tokens", False))

        return cls(
            backend,
            special_tokens={key: (token.content if token else None) for key, token in named.items()},
            chat_templates=_load_chat_templates(model_dir, config, config_path),
            generation_eos_ids=_generation_eos_ids(model_dir),
            clean_up_spaces=_wants_space_clean_up(config, backend),
            source=str(model_dir),
        )

    # -- special tokens ------------------------------------------------------------------------

    @property
    def bos_token(self) -> str | None:
        return self._special_tokens.get("bos_token")

    @property
    def eos_token(self) -> str | None:
        return self._special_tokens.get("eos_token")

    @property
    def pad_token(self) -> str | None:
        """The configured pad token (None if the folder names none; see `pad_token_id`)."""
        return self._special_tokens.get("pad_token")

    @property
    def unk_token(self) -> str | None:
        return self._special_tokens.get("unk_token")

    @property
    def special_tokens(self) -> dict[str, str]:
        """Named special tokens as strings, e.g. {"bos_token": "<s>", "eos_token": "</s>"}."""
        return dict(self._special_tokens)

    @property
    def bos_token_id(self) -> int | None:
        return self._id_or_none(self.bos_token)

    @property
    def eos_token_id(self) -> int | None:
        return self._id_or_none(self.eos_token)

    @property
    def unk_token_id(self) -> int | None:
        return self._id_or_none(self.unk_token)

    @property
    def pad_token_id(self) -> int | None:
        """The pad token's id; the EOS id when the folder names no pad token.

        Many base models ship without a pad token; padding with EOS is what training code commonly
        does, and is safe here because padded positions are masked from the loss and attention.
        (transformers itself reports None in that case.)"""
        pad_id = self._id_or_none(self.pad_token)
        return pad_id if pad_id is not None else self.eos_token_id

    @property
    def eos_token_ids(self) -> frozenset[int]:
        """Every id that ends generation: the EOS token plus `generation_config.json`'s
        `eos_token_id` (chat models often stop on an end-of-turn token that is not the EOS)."""
        ids = set(self._generation_eos_ids)
        if self.eos_token_id is not None:
            ids.add(self.eos_token_id)
        return frozenset(ids)

    @property
    def vocab_size(self) -> int:
        """Number of token ids, added tokens included (what `len(hf_tokenizer)` reports)."""
        return self._backend.get_vocab_size(with_added_tokens=True)

    def token_to_id(self, token: str) -> int | None:
        return self._backend.token_to_id(token)

    def id_to_token(self, token_id: int) -> str | None:
        return self._backend.id_to_token(token_id)

    def _id_or_none(self, token: str | None) -> int | None:
        return None if token is None else self._backend.token_to_id(token)

    # -- text ⇄ ids ----------------------------------------------------------------------------

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """Token ids of `text`; with `add_special_tokens`, what `tokenizer.json`'s post-processor adds
        (e.g. Llama's BOS). Special tokens written in the text are matched as tokens."""
        if not isinstance(text, str):
            raise TokenizerError(f"encode: expected a string, got {type(text).__name__}")
        return self._backend.encode(text, add_special_tokens=add_special_tokens).ids

    def encode_batch(self, texts: list[str], add_special_tokens: bool = True) -> list[list[int]]:
        """`encode` for many texts at once (the backend parallelises it)."""
        for index, text in enumerate(texts):
            if not isinstance(text, str):
                raise TokenizerError(f"encode_batch: text {index} is {type(text).__name__}, expected a string")
        encodings = self._backend.encode_batch(list(texts), add_special_tokens=add_special_tokens)
        return [encoding.ids for encoding in encodings]

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = True) -> str:
        """Text of `ids`; special tokens are left out unless `skip_special_tokens=False`."""
        text = self._backend.decode([int(i) for i in ids], skip_special_tokens=skip_special_tokens)
        return _clean_up_spaces(text) if self._clean_up_spaces else text

    # -- chat ----------------------------------------------------------------------------------

    @property
    def has_chat_template(self) -> bool:
        return bool(self._chat_templates)

    def chat_template(self, tools: Any = None) -> str:
        """The template source `apply_chat_template` uses: "default", or "tool_use" when tools are
        given and the folder has one."""
        if not self._chat_templates:
            raise TokenizerError(_at(self._source, Message("tokenizer.no_template")))
        if tools is not None and "tool_use" in self._chat_templates:
            return self._chat_templates["tool_use"]
        if "default" in self._chat_templates:
            return self._chat_templates["default"]
        raise TokenizerError(_at(self._source, Message("tokenizer.no_default", names=str(sorted(self._chat_templates)))))

    def apply_chat_template(self, messages: list[dict], add_generation_prompt: bool = False,
                            tokenize: bool = False, **extra: Any) -> str | list[int]:
        """Render `messages` with the model's chat template, as transformers does.

        The template sees `messages`, `add_generation_prompt`, `tools`/`documents` (None unless
        given), the named special tokens as strings, and `extra` (which wins on a name clash).
        With `tokenize=True` the rendered text is encoded with `add_special_tokens=False`, because
        templates write their own BOS."""
        messages = _checked_messages(messages)
        variables = {"tools": None, "documents": None, **self._special_tokens, **extra}
        template = self._compiled(variables["tools"])
        try:
            text = template.render(messages=messages, add_generation_prompt=add_generation_prompt, **variables)
        except _TemplateRefusal as err:
            raise TokenizerError(_at(self._source, Message("tokenizer.refused", template_says=str(err)))) from None
        except jinja2.TemplateError as err:
            raise TokenizerError(_at(self._source, Message("tokenizer.failed", jinja_says=str(err)))) from err
        return self.encode(text, add_special_tokens=False) if tokenize else text

    def _compiled(self, tools: Any) -> jinja2.Template:
        try:
            return _compile_template(self.chat_template(tools))
        except jinja2.TemplateSyntaxError as err:
            raise TokenizerError(_at(self._source, Message("tokenizer.syntax", line=err.lineno,
                                                           jinja_says=str(err.message)))) from err

    def __repr__(self) -> str:
        return f"Tokenizer({self._source!r}, vocab_size={self.vocab_size}, special_tokens={self._special_tokens})"
