"""core.data.formats through core.data.pipeline: ShareGPT (tool turns, top-level system and tools), alpaca
with system and history, chat with tool calls, column mapping, ignored-field counts, the label
masks of multi-turn conversations (`train_on`), and every bad input named by file, record and field.

Rendering is compared with transformers' apply_chat_template on a Qwen2.5-style tool template
written out here (the same messages, the same tools)."""
import json
from pathlib import Path

import numpy as np
import pytest

import core.data.pipeline as data
from core.spec.config import DATA_COLUMN_KEYS, DataSettings
from core.data.pipeline import IGNORE_INDEX
from core.data.formats import Columns
from core.data.formats import MAPPING_KEYS
from core.data.tokenizer import Tokenizer

from tests import skips
from tests.core.test_data import CHATML, make_tokenizer_dir, raises, write_csv, write_jsonl
from tests.core.test_tokenizer import chatml_backend, make_folder

# Tools the way Qwen2.5's published template renders them (written out here in that style):
# schemas in <tools>, calls in <tool_call>, consecutive tool results in one user turn.
QWEN_TOOLS = """{%- if tools %}
{{- '<|im_start|>system\\n' }}
{%- if messages[0]['role'] == 'system' %}{{- messages[0]['content'] }}{%- else %}{{- 'You are a helpful assistant.' }}{%- endif %}
{{- "\\n\\n# Tools\\n\\n<tools>" }}
{%- for tool in tools %}{{- "\\n" }}{{- tool | tojson }}{%- endfor %}
{{- "\\n</tools><|im_end|>\\n" }}
{%- elif messages[0]['role'] == 'system' %}
{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
{%- endif %}
{%- for message in messages %}
{%- if message.role == "user" or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}
{%- elif message.role == "assistant" %}
{{- '<|im_start|>' + message.role }}
{%- if message.content %}{{- '\\n' + message.content }}{%- endif %}
{%- for tool_call in message.tool_calls %}
{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}
{{- '\\n<tool_call>\\n{"name": "' }}{{- tool_call.name }}{{- '", "arguments": ' }}{{- tool_call.arguments | tojson }}{{- '}\\n</tool_call>' }}
{%- endfor %}
{{- '<|im_end|>\\n' }}
{%- elif message.role == "tool" %}
{%- if loop.index0 == 0 or messages[loop.index0 - 1].role != "tool" %}{{- '<|im_start|>user' }}{%- endif %}
{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}
{%- if loop.last or messages[loop.index0 + 1].role != "tool" %}{{- '<|im_end|>\\n' }}{%- endif %}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"""

# ChatML that refuses two assistant turns in a row, as Llama-2-style templates do.
ALTERNATING = ("{% for m in messages %}{% if m['role'] == 'assistant' and loop.index0 > 0 and "
               "messages[loop.index0 - 1]['role'] == 'assistant' %}"
               "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
               "{% endif %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}"
               "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")

WEATHER = {"name": "get_weather", "description": "Weather in a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
SHAREGPT_TOOL_RECORD = {
    "conversations": [
        {"from": "human", "value": "How warm is it in Paris?"},
        {"from": "function_call", "value": json.dumps({"name": "get_weather", "arguments": {"city": "Paris"}})},
        {"from": "observation", "value": json.dumps({"temperature_c": 21})},
        {"from": "gpt", "value": "It is 21 °C in Paris."},
    ],
    "system": "You answer about the weather.",
    "tools": json.dumps([WEATHER]),
}
# What the ShareGPT record above means in chat-template messages, written by hand.
EXPECTED_TOOL_MESSAGES = [
    {"role": "system", "content": "You answer about the weather."},
    {"role": "user", "content": "How warm is it in Paris?"},
    {"role": "assistant", "content": "",
     "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "content": json.dumps({"temperature_c": 21})},
    {"role": "assistant", "content": "It is 21 °C in Paris."},
]
EXPECTED_TOOLS = [{"type": "function", "function": WEATHER}]


@pytest.fixture(scope="module")
def tok(tmp_path_factory) -> Tokenizer:
    return Tokenizer.from_dir(make_tokenizer_dir(tmp_path_factory.mktemp("tok")))


@pytest.fixture(scope="module")
def tool_folder(tmp_path_factory) -> Path:
    """A Qwen2-style tokenizer folder whose template renders tools (transformers can load it)."""
    config = {"tokenizer_class": "Qwen2Tokenizer", "bos_token": None, "eos_token": "<|im_end|>",
              "pad_token": "<|endoftext|>", "unk_token": None, "chat_template": QWEN_TOOLS}
    return make_folder(tmp_path_factory.mktemp("tools"), chatml_backend(), config, model_type="qwen2")


@pytest.fixture(scope="module")
def tool_tok(tool_folder) -> Tokenizer:
    return Tokenizer.from_dir(tool_folder)


@pytest.fixture(scope="module")
def hf_tool_tok(tool_folder):
    transformers = skips.module("transformers")
    transformers.logging.set_verbosity_error()
    return transformers.AutoTokenizer.from_pretrained(str(tool_folder))


def records(tmp_path: Path, rows, name: str = "d.jsonl"):
    return data.read_data_file(write_jsonl(tmp_path / name, rows))


def spans(tok: Tokenizer, sample) -> list[str]:
    """The labelled runs of a sample, decoded."""
    labelled = (sample.labels != IGNORE_INDEX).astype(int)
    edges = np.flatnonzero(np.diff(np.concatenate([[0], labelled, [0]])))
    return [tok.decode(sample.input_ids[a:b], skip_special_tokens=False) for a, b in zip(edges[::2], edges[1::2])]


def tokenize(file, tok, fmt="auto", columns=None, **kwargs):
    columns = Columns(columns or {})
    return data.tokenize_records(file.records, data.resolve_format(file, fmt, columns), tok, 4096,
                                 columns=columns, **kwargs)


# --- detection ---------------------------------------------------------------------------------

@pytest.mark.parametrize("record, fmt", [
    ({"conversations": [{"from": "human", "value": "a"}, {"from": "gpt", "value": "b"}]}, "sharegpt"),
    ({"messages": [{"from": "human", "value": "a"}, {"from": "gpt", "value": "b"}]}, "sharegpt"),
    ({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}, "chat"),
    ({"instruction": "a", "output": "b", "history": [], "system": "s"}, "alpaca"),
    ({"text": "a"}, "text"),
])
def test_formats_are_detected_from_the_first_record(tmp_path, record, fmt):
    assert data.resolve_format(records(tmp_path, [record]), "auto") == fmt


def test_config_and_formats_agree_on_the_mapping_keys():
    assert tuple(DATA_COLUMN_KEYS) == tuple(MAPPING_KEYS)
    assert DataSettings(columns="instruction: question, output: answer").columns == {
        "instruction": "question", "output": "answer"}


# --- ShareGPT with tools, against transformers ------------------------------------------------

def test_sharegpt_tool_turns_become_tool_calls_and_tool_messages(tmp_path):
    file = records(tmp_path, [SHAREGPT_TOOL_RECORD])
    conv = data.conversation(file.records[0], data.resolve_format(file))
    assert conv.messages == EXPECTED_TOOL_MESSAGES
    assert conv.tools == EXPECTED_TOOLS
    assert conv.fields == ["system", "conversations[0]", "conversations[1]", "conversations[2]", "conversations[3]"]


def test_sharegpt_with_tools_renders_as_transformers_does(tmp_path, tool_tok, hf_tool_tok):
    file = records(tmp_path, [SHAREGPT_TOOL_RECORD])
    sample = tokenize(file, tool_tok).samples[0]
    expected_text = hf_tool_tok.apply_chat_template(EXPECTED_TOOL_MESSAGES, tools=EXPECTED_TOOLS, tokenize=False)
    expected_ids = hf_tool_tok.apply_chat_template(EXPECTED_TOOL_MESSAGES, tools=EXPECTED_TOOLS, tokenize=True,
                                                   return_dict=False)
    assert "<tool_call>" in expected_text and "get_weather" in expected_text and "<tool_response>" in expected_text
    assert tool_tok.decode(sample.input_ids, skip_special_tokens=False) == expected_text
    assert sample.input_ids.tolist() == list(expected_ids)
    # both assistant turns are trained (the call and the answer); system, user and tool turns are not
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>'
    assert spans(tool_tok, sample) == [call, "It is 21 °C in Paris.<|im_end|>"]


def test_chat_tool_calls_and_tools_pass_to_the_template_as_written(tmp_path, tool_tok, hf_tool_tok):
    messages = [dict(m) for m in EXPECTED_TOOL_MESSAGES]
    messages[2] = {"role": "assistant", "content": None, "tool_calls": messages[2]["tool_calls"]}
    file = records(tmp_path, [{"messages": messages, "tools": EXPECTED_TOOLS}])
    sample = tokenize(file, tool_tok).samples[0]
    expected = hf_tool_tok.apply_chat_template(messages, tools=EXPECTED_TOOLS, tokenize=True, return_dict=False)
    assert sample.input_ids.tolist() == list(expected)
    prompt = hf_tool_tok.apply_chat_template(messages[:2], tools=EXPECTED_TOOLS, add_generation_prompt=True,
                                             tokenize=False)
    first = int(np.argmax(sample.labels != IGNORE_INDEX))
    assert tool_tok.decode(sample.input_ids[:first], skip_special_tokens=False) == prompt


def test_template_without_tools_says_so_instead_of_dropping_them(tmp_path, tok):
    file = records(tmp_path, [SHAREGPT_TOOL_RECORD])
    raises([str(file.path), "line 1", "field 'tools[0]'", "does not render tools", "get_weather"],
           tokenize, file, tok)
    no_tools = {k: v for k, v in SHAREGPT_TOOL_RECORD.items() if k != "tools"}
    file = records(tmp_path, [no_tools], "calls.jsonl")
    raises([str(file.path), "line 1", "field 'conversations[1]'", "does not render tool calls"], tokenize, file, tok)


def test_sharegpt_roles_and_top_level_system(tmp_path, tok):
    row = {"conversations": [{"from": "user", "value": "Hi"}, {"from": "assistant", "value": "Hello"},
                             {"from": "human", "value": "Bye"}, {"from": "gpt", "value": "Ciao"}],
           "system": "Be kind."}
    sample = tokenize(records(tmp_path, [row]), tok).samples[0]
    expected = tok.apply_chat_template([{"role": "system", "content": "Be kind."},
                                        {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
                                        {"role": "user", "content": "Bye"}, {"role": "assistant", "content": "Ciao"}])
    assert tok.decode(sample.input_ids, skip_special_tokens=False) == expected
    assert spans(tok, sample) == ["Hello<|im_end|>", "Ciao<|im_end|>"]


def test_sharegpt_tags_map_with_columns(tmp_path, tok):
    row = {"dialog": [{"speaker": "me", "text": "Hi"}, {"speaker": "bot", "text": "Hello"}]}
    columns = {"messages": "dialog", "role_tag": "speaker", "content_tag": "text", "user_tag": "me",
               "assistant_tag": "bot"}
    file = records(tmp_path, [row])
    assert data.resolve_format(file, "auto", Columns(columns)) == "sharegpt"
    assert spans(tok, tokenize(file, tok, columns=columns).samples[0]) == ["Hello<|im_end|>"]


# --- alpaca with system and history -----------------------------------------------------------

def test_alpaca_system_and_history_are_rendered_and_history_answers_trained(tmp_path, tok):
    row = {"instruction": "And of Italy?", "input": "", "output": "Rome.", "system": "Answer in one word.",
           "history": [["Capital of France?", "Paris."], ["Of Spain?", "Madrid."]]}
    sample = tokenize(records(tmp_path, [row]), tok).samples[0]
    messages = [{"role": "system", "content": "Answer in one word."},
                {"role": "user", "content": "Capital of France?"}, {"role": "assistant", "content": "Paris."},
                {"role": "user", "content": "Of Spain?"}, {"role": "assistant", "content": "Madrid."},
                {"role": "user", "content": "And of Italy?"}, {"role": "assistant", "content": "Rome."}]
    assert tok.decode(sample.input_ids, skip_special_tokens=False) == tok.apply_chat_template(messages)
    assert spans(tok, sample) == ["Paris.<|im_end|>", "Madrid.<|im_end|>", "Rome.<|im_end|>"]


# --- multi-turn labels: a hand-built mask ------------------------------------------------------

THREE_TURNS = [{"role": "system", "content": "Be brief."},
               {"role": "user", "content": "Capital of France?"}, {"role": "assistant", "content": "Paris."},
               {"role": "user", "content": "And Italy?"}, {"role": "assistant", "content": "Rome."},
               {"role": "user", "content": "Spain?"}, {"role": "assistant", "content": "Madrid."}]


def hand_built(tok: Tokenizer, trained: set[int]) -> tuple[list[int], list[int]]:
    """ChatML written out piece by piece: each assistant answer (through <|im_end|>) labelled
    when its turn index is in `trained`, everything else (system, user, the template's
    `<|im_start|>assistant\\n` and the '\\n' after <|im_end|>) masked."""
    pieces = [("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nCapital of France?<|im_end|>\n"
               "<|im_start|>assistant\n", False), ("Paris.<|im_end|>", 2 in trained),
              ("\n<|im_start|>user\nAnd Italy?<|im_end|>\n<|im_start|>assistant\n", False),
              ("Rome.<|im_end|>", 4 in trained),
              ("\n<|im_start|>user\nSpain?<|im_end|>\n<|im_start|>assistant\n", False),
              ("Madrid.<|im_end|>", 6 in trained), ("\n", False)]
    ids, labels = [], []
    for text, is_trained in pieces:
        piece = tok.encode(text, add_special_tokens=False)
        ids += piece
        labels += piece if is_trained else [IGNORE_INDEX] * len(piece)
    return ids, labels


@pytest.mark.parametrize("train_on, trained", [("all_assistant", {2, 4, 6}), ("last", {6})])
def test_three_turn_label_mask_matches_the_hand_built_one(tmp_path, tok, train_on, trained):
    file = records(tmp_path, [{"messages": THREE_TURNS}])
    sample = tokenize(file, tok, train_on=train_on).samples[0]
    ids, labels = hand_built(tok, trained)
    assert sample.input_ids.tolist() == ids
    assert sample.labels.tolist() == labels


def test_train_on_reaches_the_splits_and_the_cache_key(tmp_path, tok):
    path = write_jsonl(tmp_path / "t.jsonl", [{"messages": THREE_TURNS}] * 8)
    base = DataSettings(train_file=str(path), validation_file=None, test_file=None, validation_fraction=0.25)
    last = DataSettings(**{**base.to_dict(), "train_on": "last"})
    assert data.cache_key(base, tok, 0) != data.cache_key(last, tok, 0)
    splits = data.load_splits(last, tok, 0, cache_dir=None)
    assert spans(tok, splits.train[0]) == ["Madrid.<|im_end|>"]


# --- column mapping ----------------------------------------------------------------------------

@pytest.mark.parametrize("row, columns", [
    ({"question": "Capital of France?", "answer": "Paris.", "sys_prompt": "Be brief."},
     {"instruction": "question", "output": "answer", "system": "sys_prompt"}),
    ({"prompt": "Capital of France?", "completion": "Paris."}, {"instruction": "prompt", "output": "completion"}),
    ({"query": "Capital of France?", "response": "Paris."}, {"instruction": "query", "output": "response"}),
    ({"prompt": "Capital of France?", "chosen": "Paris.", "rejected": "Rome."},
     {"instruction": "prompt", "output": "chosen"}),
])
def test_mapped_columns_give_the_same_sample_as_alpaca_names(tmp_path, tok, row, columns):
    canonical = {name: row[source] for name, source in columns.items()}
    reference = tokenize(records(tmp_path, [canonical], "ref.jsonl"), tok).samples[0]
    file = records(tmp_path, [row])
    assert data.resolve_format(file, "auto", Columns(columns)) == "alpaca"
    sample = tokenize(file, tok, columns=columns).samples[0]
    np.testing.assert_array_equal(sample.input_ids, reference.input_ids)
    np.testing.assert_array_equal(sample.labels, reference.labels)


def test_mapping_in_a_csv_and_through_load_splits(tmp_path, tok):
    path = write_csv(tmp_path / "qa.csv", ["question", "answer"], [["Q1?", "A1"], ["Q2?", "A2"], ["Q3?", "A3"],
                                                                  ["Q4?", "A4"]])
    settings = DataSettings(train_file=str(path), validation_file=None, test_file=None, validation_fraction=0.25,
                            columns={"instruction": "question", "output": "answer"})
    splits = data.load_splits(settings, tok, 0, cache_dir=None)
    assert splits.stats.train.format == "alpaca" and splits.stats.train.samples == 3
    assert splits.stats.train.ignored_fields == {}


def test_mapping_to_a_missing_column_names_file_record_and_field(tmp_path):
    file = records(tmp_path, [{"question": "q", "answer": "a"}])
    raises([str(file.path), "line 1", "data.columns maps output to 'answr'", "did you mean 'answer'"],
           data.resolve_format, file, "auto", Columns({"instruction": "question", "output": "answr"}))
    table = data.read_data_file(write_csv(tmp_path / "t.csv", ["question", "answer"], [["q", "a"]]))
    raises([str(table.path), "'answr'", "question, answer"],
           data.resolve_format, table, "alpaca", Columns({"instruction": "question", "output": "answr"}))


def test_a_required_mapped_field_missing_in_one_record_names_it(tmp_path, tok):
    file = records(tmp_path, [{"question": "q", "answer": "a"}, {"question": "q2"}])
    columns = {"instruction": "question", "output": "answer"}
    raises([str(file.path), "line 2", "missing field 'answer' (data.columns.output)"], tokenize, file, tok,
           columns=columns)


def test_mapping_a_field_the_format_does_not_use_is_an_error(tmp_path):
    file = records(tmp_path, [{"text": "raw", "h": []}])
    raises(["data.columns.history", "format text does not use"], data.resolve_format, file, "auto",
           Columns({"history": "h"}))


def test_unknown_mapping_key_is_a_config_error():
    from core.spec.config import ConfigError
    with pytest.raises(ConfigError) as info:
        DataSettings(columns={"instrucion": "q"})
    assert "did you mean 'instruction'" in str(info.value) and "data.columns" in str(info.value)


# --- fields the format ignores -----------------------------------------------------------------

def test_ignored_fields_are_counted_per_field(tmp_path, tok):
    rows = [{"instruction": "a", "output": "b", "id": 1, "source": "x"}, {"instruction": "c", "output": "d", "id": 2}]
    path = write_jsonl(tmp_path / "a.jsonl", rows * 2)
    settings = DataSettings(train_file=str(path), validation_file=None, test_file=None, validation_fraction=0.25)
    stats = data.load_splits(settings, tok, 0, cache_dir=None).stats
    assert sum(stats.train.ignored_fields.values()) + sum(stats.validation.ignored_fields.values()) == 6
    assert stats.train.ignored_fields["id"] == 3
    assert any(w.startswith("train: field `id` ignored in 3 of 3 records") for w in stats.warnings())


def test_chat_format_ignores_top_level_system_and_sharegpt_turn_keys_are_counted(tmp_path):
    chat = records(tmp_path, [{"messages": THREE_TURNS, "system": "unused"}])
    assert data.ignored_fields(chat.records, "chat") == {"system": 1}
    share = records(tmp_path, [{"conversations": [{"from": "system", "value": "s"}, {"from": "human", "value": "q"},
                                                  {"from": "gpt", "value": "a", "weight": 0}],
                                "system": "also"}], "s.jsonl")
    assert data.ignored_fields(share.records, "sharegpt") == {
        "conversations[].weight": 1, "system (the conversation has its own system turn)": 1}


# --- bad input: file, record, field -------------------------------------------------------------

@pytest.mark.parametrize("turns, parts", [
    ([{"from": "human", "value": "q"}, {"from": "bot", "value": "a"}],
     ["field 'conversations[1].from' is 'bot'", "human, user, gpt, assistant", "user_tag"]),
    ([], ["field 'conversations' is empty"]),
    ([{"from": "human", "value": "q"}], ["field 'conversations' has no assistant turn"]),
    ([{"from": "human", "value": "q"}, {"from": "gpt", "value": 3}], ["field 'conversations[1].value' must be a string"]),
    ([{"from": "human", "value": "q"}, {"from": "function_call", "value": "get it"}],
     ["field 'conversations[1].value' (a function_call turn) is not JSON"]),
    ([{"from": "gpt", "value": "a"}], ["field 'conversations[0]' is an assistant turn before any user turn"]),
])
def test_bad_sharegpt_records_name_file_line_and_field(tmp_path, tok, turns, parts):
    good = {"conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}]}
    file = records(tmp_path, [good, {"conversations": turns}])
    raises([str(file.path), "line 2", *parts], tokenize, file, tok, "sharegpt")


def test_two_assistant_turns_in_a_row_where_the_template_forbids_it(tmp_path):
    strict = Tokenizer.from_dir(make_tokenizer_dir(tmp_path / "strict", ALTERNATING))
    turns = [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}, {"from": "gpt", "value": "b"}]
    file = records(tmp_path, [{"conversations": turns}])
    raises([str(file.path), "line 1", "field 'conversations[2]'", "two assistant turns in a row", "must alternate"],
           tokenize, file, strict)
    lenient = Tokenizer.from_dir(make_tokenizer_dir(tmp_path / "lenient", CHATML))
    assert spans(lenient, tokenize(file, lenient).samples[0]) == ["a<|im_end|>", "b<|im_end|>"]


@pytest.mark.parametrize("history, parts", [
    ("not a list", ["field 'history' is text but not JSON"]),
    ([["only one"]], ["field 'history[0]' must be a [prompt, response] pair"]),
    ({"a": 1}, ["field 'history' must be a list"]),
])
def test_bad_alpaca_history_names_the_pair(tmp_path, tok, history, parts):
    file = records(tmp_path, [{"instruction": "i", "output": "o", "history": history}])
    raises([str(file.path), "line 1", *parts], tokenize, file, tok)


@pytest.mark.parametrize("message, parts", [
    ({"role": "assistant", "content": None}, ["field 'messages[1].content' must be a string (or null with tool_calls)"]),
    ({"role": "assistant", "content": "x", "tool_calls": "call"}, ["field 'messages[1].tool_calls' must be a list"]),
    ({"role": "function", "content": "x"}, ["field 'messages[1].role' is 'function'", "tool"]),
])
def test_bad_chat_tool_messages_name_the_field(tmp_path, tok, message, parts):
    file = records(tmp_path, [{"messages": [{"role": "user", "content": "q"}, message]}])
    raises([str(file.path), "line 1", *parts], tokenize, file, tok, "chat")


def test_bad_tools_field_names_it(tmp_path, tool_tok):
    row = dict(SHAREGPT_TOOL_RECORD, tools=json.dumps([{"description": "no name"}]))
    raises(["line 1", "field 'tools[0]' has no string 'name'"], tokenize, records(tmp_path, [row]), tool_tok)


def test_test_records_keep_the_tools_in_the_prompt(tmp_path, tool_tok):
    file = records(tmp_path, [SHAREGPT_TOOL_RECORD])
    record = data.build_test_records(file, "sharegpt", tool_tok)[0]
    assert "<tools>" in record.prompt and record.prompt.endswith("</tool_response><|im_end|>\n<|im_start|>assistant\n")
    assert record.answer == "It is 21 °C in Paris."
