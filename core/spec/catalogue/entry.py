"""One message of the catalogue: its English, its 中文 and the kind of each parameter that is not plain
text. Core's messages (core.spec.catalogue's domains) and the console's texts (app.texts) are both
`{id: Entry}`. Stdlib only."""
from __future__ import annotations

from types import MappingProxyType
from typing import Mapping, NamedTuple

# How a parameter's value is said, declared with the message (a parameter without a kind is plain text,
# said as given). core.spec.messages uses `lines` (joined one a line, not by ", "); the console says the
# others in 中文 by kind (app.i18n.KIND_ZH). The English of every kind is the value as given.
KINDS: dict[str, str] = {
    "message": "a message itself (a Message, the console's Said, or a text without an id, said as written)",
    "list": "a list of messages or values, said one after another",
    "lines": "a list of lines (an error's several problems), one a line",
    "quoted": "a library's own words (json, PyYAML, jinja2, re, safetensors, tokenizers), quoted as it said them",
    "os_reason": "the operating system's reason (strerror)",
    "os_error": "Python's OSError text ('[Errno 13] ...') or a strerror alone",
    "codec_reason": "the UTF-8 decoder's reason",
    "py_type": "a Python type's name (list, int, ...)",
    "py_value": "a Python value's repr (None, True), said as the config file writes it (null, true)",
    "json_type": "a JSON value's kind (an array, a string, ...)",
    "names": "a list of names (keys, fields, columns, roles) joined by ', '",
    "or_list": "values joined by ' or '",
    "and_list": "names joined by ' and '",
    "formats": "core.data.formats.format_help()'s list of formats and their fields",
    "split_role": "a data split's role (train, validation, test)",
    "turn_role": "a conversation turn's role (system, tool)",
    "data_kind": "what train.objective reads (core.data.preference's kinds of records)",
    "place": "a record's place (core.spec.places.Where)",
    "article": "English's 'a'/'an' (nothing in 中文)",
    "hub": "a model hub or cloud storage",
    "mapping_kind": "a dataset mapping's kind (column, tag)",
    "dataset_names": "a catalogue's dataset names, or 'none'",
    "media": "a media kind (image, audio, video)",
    "record_kind": "a record's kind (a preference pair, a KTO answer, a plain conversation)",
    "widget": "a form widget by the name its error line gives it",
    "partition_names": "Slurm's partition names, or 'none'",
    "partition": "a Slurm partition's name",
    "projections": "a model's projections, or 'none'",
    "run_state": "a run's state (queued, running, stopped, ...), said by the console's text of it",
}


class Entry(NamedTuple):
    """`Entry("reached {steps} steps", "已达到 {steps} 步")`; `kinds` names the parameters that are not
    plain text, e.g. `{"reason": "message"}`."""

    en: str
    zh: str
    kinds: Mapping[str, str] = MappingProxyType({})  # shared by the entries without kinds: read-only
