"""Labels in English and Simplified Chinese, switchable in the page.

Gradio's own `gr.I18n` picks the language from the browser's locale; mindtune users often browse
in English but read Chinese more easily (or the other way round), so the page has a toggle
(`lang-toggle`). Every widget that shows text is registered with `Labels.bind`, and switching the
language sends one `gr.update` per widget with its label (or value, info, ...) in the new language.

The texts are one catalogue with core's messages, in the same class (core.spec.catalogue.entry.Entry:
English, 中文, the kinds of the parameters): core's by domain in core.spec.catalogue (`MESSAGES_ZH` is
its 中文), the console's own by tab in app.texts (`TEXTS`). A parameter is said in 中文 by the kind its
message declares (`KIND_ZH`), never by its name.
"""
from __future__ import annotations

from typing import Any

from app.texts import TEXTS
from app.texts.form import FIELD_HELP_ZH
from core.spec.catalogue import ENTRIES, MESSAGES_ZH, Entry
from core.spec.messages import Message
from core.spec.places import Where

LANGS = ("en", "zh")
LANG_CHOICES = [("English", "en"), ("中文", "zh")]


class Said(str):
    """One of the console's own answers, e.g. `Said("act.started", run=run_id)`: the string is its
    English, so logs, tests and callers that compare text keep working; `key` and `params` render it
    in another language from TEXTS (`in_lang`), never by re-reading the English. A parameter that is
    a Said renders in the same language; one of kind `message` is core's message (problem_text); other
    values (run ids, settings, numbers, Slurm's words) stay as they are."""

    key: str
    params: dict[str, Any]

    def __new__(cls, key: str, **params: Any):
        if key not in TEXTS:
            raise KeyError(f"no text for {key!r} in app.i18n.TEXTS")
        said = super().__new__(cls, _render(key, params, "en"))
        said.key, said.params = key, params
        return said

    def __getnewargs_ex__(self):  # copies and pickles (Gradio's state) build it again from its key
        return (self.key,), self.params

    def in_lang(self, lang: str) -> str:
        return _render(self.key, self.params, lang)


def _render(key: str, params: dict[str, Any], lang: str) -> str:
    kinds = TEXTS[key].kinds
    values = {name: value.in_lang(lang) if isinstance(value, Said)
              else problem_text(value, lang) if kinds.get(name) == "message"
              else KIND_ZH[kinds[name]](value) if lang == "zh" and kinds.get(name) in KIND_ZH else value
              for name, value in params.items()}
    return text(key, lang).format(**values)


def action_text(message: str, lang: str) -> str:
    """An answer to an action in `lang`: a Said from its key; anything else is core's message (an
    error the action met, '⚠ ' before it when marked so), said in `lang` by problem_text."""
    if isinstance(message, Said):
        return message.in_lang(lang)
    if not message or lang != "zh":
        return message
    mark, rest = ("⚠ ", message[2:]) if message.startswith("⚠ ") else ("", message)
    return mark + problem_text(rest, lang)


def memory_note(note: str, lang: str) -> str:
    """One of core.spec.memory's notes in `lang` (a Message by its id; a text as written)."""
    return reason_text(note, lang)


def reason_text(reason: str | None, lang: str, message: dict | None = None) -> str:
    """A core message in `lang` — why a run ended, a memory note: from its message id and parameters
    (a Message, or its record: `Status.reason_message`, core.spec.messages); a text without one (a
    run folder written before the ids, an error's own text) as written, never read back."""
    if not reason or lang != "zh":
        return reason or ""
    said = reason if isinstance(reason, Message) else Message.from_json(message) if message else None
    return _problem_message_zh(said) if said is not None else reason


def _field_help() -> None:
    from app.tabs.form import fields  # the form's own fields (core.spec.config's help; MindSpore-free)

    for key, info in fields().items():
        if info.help:
            TEXTS[f"help.{key}"] = Entry(info.help, FIELD_HELP_ZH.get(key, ""))


_field_help()


def text(key: str, lang: str) -> str:
    """The text of `key` in `lang` (English when no translation exists, the key when neither does)."""
    entry = TEXTS.get(key)
    if entry is None:
        return key
    return entry.zh if lang == "zh" and entry.zh else entry.en


class Labels:
    """The widgets whose text depends on the language, and which property holds that text."""

    def __init__(self, lang: str = "en"):
        self.lang = lang if lang in LANGS else "en"
        self._bindings: list[tuple[Any, dict[str, str]]] = []
        self.toggle: Any = None  # the lang-toggle widget, an input of callbacks that write text

    def __call__(self, key: str) -> str:
        return text(key, self.lang)

    def bind(self, component: Any, **props: Any) -> Any:
        """Show the text of each `prop=key` on `component` now, and again after a language switch.
        E.g. `bind(gr.Number(), label="field.train.learning_rate")`; buttons use `value=`. A list
        of keys is a list of texts (a table's `headers`); a list of (key, value) pairs is a
        choice list (`choices`: the label in the language, the value unchanged)."""
        for prop, key in props.items():
            for k in _keys(key):
                if k not in TEXTS:
                    raise KeyError(f"no text for {k!r} in app.i18n.TEXTS")
            setattr(component, prop, _shown(key, self.lang))
        self._bindings.append((component, dict(props)))
        return component

    @property
    def components(self) -> list[Any]:
        return [component for component, _ in self._bindings]

    def values(self, lang: str) -> list[dict[str, str]]:
        """For each bound widget, its texts in `lang` ({prop: text}); plain data for tests."""
        return [{prop: _shown(key, lang) for prop, key in props.items()} for _, props in self._bindings]


def _keys(key: Any) -> list[str]:
    if isinstance(key, str):
        return [key]
    return [k if isinstance(k, str) else k[0] for k in key]


def _shown(key: Any, lang: str) -> Any:
    if isinstance(key, str):
        return text(key, lang)
    return [text(k, lang) if isinstance(k, str) else (text(k[0], lang), k[1]) for k in key]

# ---- how a parameter is said in 中文, by the kind its message declares (core.spec.catalogue.entry.KINDS);
# the facts (file, line, key, value, valid values) are kept as written, a list of names (keys, fields,
# roles) is quoted, as values are: 'name', 'seed'. A parameter without a kind is said as given.


def _names(listed: str) -> str:
    """'name, runs_dir, seed' -> "'name', 'runs_dir', 'seed'" (names already quoted stay)."""
    return ", ".join(n if n.startswith(("'", '"')) else f"'{n}'" for n in (p.strip() for p in listed.split(","))
                     if n)


_JSON_TYPES_ZH = {"an array": "数组", "a string": "字符串", "a boolean": "布尔值", "a number": "数字", "null": "null",
                  "an object": "对象"}
_PY_TYPES_ZH = {"list": "列表", "int": "整数", "float": "小数", "str": "字符串", "bool": "布尔值", "NoneType": "null",
                "dict": "对象"}


def _value(shown: str) -> str:
    """A Python repr in a message (None, True, False) in the JSON spelling the config file uses."""
    return {"None": "null", "True": "true", "False": "false"}.get(shown, shown)


def _quoted(said: str) -> str:
    """A library's own words (Python's json and re, PyYAML, jinja2, tokenizers' serde, safetensors, the
    OS's errno line) as the library said them, quoted (“…”) inside the 中文 sentence: nothing re-reads them."""
    return f"“{said}”"


# the operating system's reasons (strerror) and the UTF-8 decoder's, the common ones; others stay as said
OS_ZH = {"No such file or directory": "没有这个文件或目录", "Permission denied": "权限不足",
         "Is a directory": "这是一个目录", "Not a directory": "不是目录", "Too many open files": "打开的文件过多",
         "No space left on device": "设备上没有剩余空间", "Input/output error": "输入/输出错误",
         # a server that does not answer (an MLflow tracking server)
         "Connection refused": "连接被拒绝", "Connection reset by peer": "连接被对方重置",
         "Network is unreachable": "网络不可达", "No route to host": "没有到主机的路由", "timed out": "超时",
         "Name or service not known": "无法解析主机名"}
CODEC_ZH = {"invalid start byte": "无效的起始字节", "invalid continuation byte": "无效的后续字节",
            "unexpected end of data": "数据意外结束"}
# what train.objective reads (core.data.preference._source_kind)
_DATA_KINDS_ZH = {"preference pairs ('chosen' and 'rejected')": "偏好对（'chosen' 和 'rejected'）",
                  "KTO answers (a boolean 'label')": " KTO 回答（布尔值 'label'）",
                  "plain conversations without 'chosen'/'rejected' or 'label'":
                      "不含 'chosen'/'rejected' 或 'label' 的普通对话"}
# the form's paired widgets by the name their error line gives them (app.tabs.form.PAIRED_NAMES)
WIDGET_NAMES_ZH = {"steps": "步数", "epochs": "轮数", "target modules": "目标模块", "where to run": "运行位置",
                   "partition": "分区"}


def _format_help_text(listed: str) -> str:
    """core.data.formats.format_help()'s 'alpaca: instruction, output (input, ... optional); text: text'."""
    parts = []
    for part in listed.strip().removesuffix(";").split("; "):
        fmt, _, fields = part.partition(": ")
        required, _, optional = fields.partition(" (")
        shown = f"{fmt}: {_names(required)}"
        if optional:
            shown += f"（可选 {_names(optional.removesuffix(')').removesuffix(' optional'))}）"
        parts.append(shown)
    return "; ".join(parts)


# kind -> how a value of that kind is said in 中文 (message, list and lines are said by problem_text)
KIND_ZH = {
    "quoted": _quoted,
    "os_reason": lambda said: OS_ZH.get(said, said),
    "os_error": lambda said: OS_ZH.get(said) or _quoted(said),  # a strerror alone, or Python's '[Errno 13] ...'
    "codec_reason": lambda said: CODEC_ZH.get(said, said),
    "py_type": lambda name: _PY_TYPES_ZH.get(name, f" {name}"),
    "py_value": _value,
    "json_type": lambda kind: _JSON_TYPES_ZH.get(kind, f" {kind}"),
    "names": _names,
    "or_list": lambda listed: listed.replace(" or ", " 或 "),
    "and_list": lambda listed: listed.replace(" and ", ", "),
    "formats": _format_help_text,
    "split_role": lambda role: {"train": "训练", "validation": "验证", "test": "测试"}.get(role, f" {role} "),
    "turn_role": lambda role: {"system": "系统", "tool": "工具"}.get(role, f" {role} "),
    "data_kind": lambda said: _DATA_KINDS_ZH.get(said, said),
    "place": lambda where: _record_at(where),
    "article": lambda article: "",  # English's 'a'/'an' before a media kind
    "hub": lambda place: {"the Hugging Face hub": " Hugging Face 模型中心", "the ModelScope hub": " ModelScope 模型中心",
                          "the Modelers hub": " Modelers 模型中心", "cloud storage": "云存储"}.get(place, f" {place}"),
    "mapping_kind": lambda kind: {"column": "列", "tag": "标签"}.get(kind, f" {kind} "),
    "dataset_names": lambda listed: {"none": "无", "none loadable": "无（没有可加载的）"}.get(listed) or _names(listed),
    "media": lambda kind: {"image": "图像", "audio": "音频", "video": "视频", "images": "图像", "audios": "音频",
                           "videos": "视频"}.get(kind, f" {kind} "),
    "record_kind": lambda kind: {
        "a preference pair (chosen/rejected)": "偏好对（chosen/rejected）", "a KTO answer (label)": " KTO 回答（'label'）",
        "a plain conversation": "普通对话"}.get(kind, f" {kind} "),
    "widget": lambda name: WIDGET_NAMES_ZH.get(name, name),
    "partition_names": lambda listed: "无" if listed == "none" else _names(listed),
    "partition": lambda name: f"'{name}'",  # a name the cluster's administrator chose
    "projections": lambda listed: "无" if listed == "none" else listed,
    "run_state": lambda state: text(f"state.{state}", "zh"),
}


def place_text(where: Any, lang: str) -> str:
    """A record's place (core.data.files.Where) in `lang`; a text as written."""
    return _record_at(where) if lang == "zh" else str(where)


def _record_at(where: Any) -> str:
    """A record's place (core.data.files.Where: 'data/a.jsonl line 3', a catalogue's dataset) in 中文,
    by its kind's id; any other text as written."""
    if not isinstance(where, Where):
        return str(where)
    return MESSAGES_ZH[where.key].removesuffix("：{reason}").format(**where.params)


def problem_text(message: str | BaseException | None, lang: str) -> str:
    """A problem message (core's ConfigError, DataError, the model loader's refusal, the console's
    own checks) in `lang`, the facts in it (file, line, key, value, valid values) kept as written.
    A core message (core.spec.messages.Message, and the lines of an error that keeps them: its
    `said`) is rendered from its id, the console's own (Said) from TEXTS. Another process's error
    comes as its record (core.spec.errors.read_report, status.json's reason_message); a text without
    an id (a run folder written before the ids, a library's own words) stays as written."""
    if isinstance(message, BaseException):
        said = getattr(message, "said", None)
        if lang == "zh" and isinstance(said, list):
            return "\n".join(problem_text(line, lang) for line in said)
        message = str(message)
    if isinstance(message, Said):  # the console's own words (app.i18n.TEXTS)
        return message.in_lang(lang)
    if lang != "zh" or not message:
        return message or ""
    if isinstance(message, Message):
        return _problem_message_zh(message)
    return str(message)


LIST_SEPARATOR_ZH = "，"  # between a list's items (a list parameter of core's message)


def _problem_message_zh(message: Message) -> str:
    """A core message in 中文; a message parameter that is text (a reason that came without its id)
    as written; another parameter by its declared kind (KIND_ZH)."""
    kinds = ENTRIES[message.key].kinds
    values = {name: _problem_message_zh(value) if isinstance(value, Message)
              else ("\n" if kinds.get(name) == "lines" else LIST_SEPARATOR_ZH).join(
                  _problem_message_zh(item) if isinstance(item, Message) else str(item) for item in value)
              if isinstance(value, list)
              else problem_text(value, "zh") if kinds.get(name) == "message" and isinstance(value, str)
              else KIND_ZH[kinds[name]](value) if kinds.get(name) in KIND_ZH else value
              for name, value in message.params.items()}
    return MESSAGES_ZH[message.key].format(**values)

