"""core.data.tokenizer against transformers.AutoTokenizer on tiny tokenizer folders made in the test.

Each folder holds a byte-level BPE trained here in well under a second plus a tokenizer config
whose chat template mirrors a real model family (written out here, not downloaded)."""

import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
from tokenizers import Tokenizer as BackendTokenizer
from tokenizers import Regex, decoders, models, normalizers, pre_tokenizers, processors, trainers

from core.data.tokenizer import Tokenizer, TokenizerError

from tests import skips

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the reference must never reach for the hub
REPO_ROOT = Path(__file__).resolve().parents[2]
DEMO_MODEL_DIR = REPO_ROOT / "models" / "tiny-demo"

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello world! How are you today? I'm fine, thanks.",
    "Fine-tuning a language model needs data, patience and a learning rate.",
    "user assistant system: you are a helpful assistant.",
    "Numbers 0123456789 and symbols #$%&*()[]{} appear too.",
    "Unicode: héllo wörld, naïve café, 你好世界, привет мир 🙂",
    "  leading spaces,\ttabs and\nnew lines\n\n matter.",
]

# --- chat templates, written out in the style of each family's published template -------------

CHATML_QWEN2 = (
    "{% for message in messages %}"
    "{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}"
    "{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# Multi-line with `{%-` and indentation: exercises trim_blocks / lstrip_blocks like Llama 3.1's.
LLAMA3 = """{{- bos_token }}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] | trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\\n\\n" }}
{{- "Today Date: " + date_string + "\\n\\n" }}
{{- system_message }}
{{- "<|eot_id|>" }}
{%- for message in messages %}
    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}
{%- endif %}
"""

LLAMA2 = (
    "{% if messages[0]['role'] == 'system' %}"
    "{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}"
    "{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}"
    "{% for message in loop_messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}"
    "{% if loop.index0 == 0 and system_message != false %}"
    "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
    "{% else %}{% set content = message['content'] %}{% endif %}"
    "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ ' ' + content.strip() + ' ' + eos_token }}{% endif %}"
    "{% endfor %}"
)

# A tool-use variant (named list of templates, as Hermes/Command-R-style folders ship them).
CHATML_TOOLS = (
    "{{ '<|im_start|>system\\nTools: ' + (tools | tojson) + '\\nPretty: ' + (tools | tojson(indent=2)) + '<|im_end|>\\n' }}"
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}{% continue %}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# Pretty-printed, as chat_template.jinja files usually are: the same ChatML output only if the
# environment drops block-tag lines whole (trim_blocks + lstrip_blocks).
CHATML_SMOLLM = """{% for message in messages %}
    {% if loop.first and messages[0]['role'] != 'system' %}
<|im_start|>system
You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>
    {% endif %}
<|im_start|>{{ message['role'] }}
{{ message['content'] }}<|im_end|>
{% endfor %}
{% if add_generation_prompt %}
<|im_start|>assistant
{% endif %}
"""

CHATML_GENERATION_TAG = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' }}"
    "{% if message['role'] == 'assistant' %}{% generation %}{{ message['content'] + '<|im_end|>' }}{% endgeneration %}"
    "{% else %}{{ message['content'] + '<|im_end|>' }}{% endif %}{{ '\\n' }}"
    "{% endfor %}"
)

CONVERSATIONS = [
    [{"role": "user", "content": "Hello!"}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "What is 2+2?"}],
    [
        {"role": "user", "content": "  Translate 'café' to German.  "},
        {"role": "assistant", "content": "Kaffee ☕"},
        {"role": "user", "content": "And to Chinese?\n"},
    ],
    [
        {"role": "system", "content": "Answer in one word."},
        {"role": "user", "content": "Capital of France?"},
        {"role": "assistant", "content": "Paris."},
        {"role": "user", "content": "Of Italy?"},
        {"role": "assistant", "content": "Rome."},
    ],
]

TEXTS = [
    "Hello world!",
    "  leading and trailing spaces  ",
    "héllo wörld 你好 🙂 привет",
    "don't stop , it 's fine .",
    "line one\nline two\n\n\ttabbed",
    "Call 555-1234 at 10:30, room 42.",
    "",
]
# Encoded the same on both sides but not expected to round-trip (NFC composes "e" + U+0301).
ENCODE_ONLY_TEXTS = ["cafe\u0301 de\u0301ja\u0300 vu"]


# --- building folders ----------------------------------------------------------------------------

def train_byte_level_bpe(special_tokens: list[str], vocab_size: int = 420) -> BackendTokenizer:
    """A tiny byte-level BPE (GPT-2/Llama-3/Qwen2 style); special tokens get the first ids."""
    backend = BackendTokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=special_tokens, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    backend.train_from_iterator(SENTENCES * 3, trainer)
    return backend


def write_json(path: Path, value) -> None:
    path.write_text(json.dumps(value, ensure_ascii=False, indent=2), encoding="utf-8")


def make_folder(path: Path, backend: BackendTokenizer, tokenizer_config: dict | None,
                model_type: str = "llama", generation_config: dict | None = None,
                files: dict[str, str] | None = None) -> Path:
    """Write a model folder: tokenizer.json, tokenizer_config.json, config.json and extras."""
    path.mkdir(parents=True, exist_ok=True)
    backend.save(str(path / "tokenizer.json"))
    if tokenizer_config is not None:
        write_json(path / "tokenizer_config.json", tokenizer_config)
    write_json(path / "config.json", {"model_type": model_type})
    if generation_config is not None:
        write_json(path / "generation_config.json", generation_config)
    for name, text in (files or {}).items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text, encoding="utf-8")
    return path


# Qwen2's pre-tokenizer: digits one by one, letters with an optional leading non-letter.
QWEN2_SPLIT = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
               r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")


def chatml_backend() -> BackendTokenizer:
    """Laid out like Qwen2's tokenizer.json (NFC, regex split, byte-level), so transformers'
    Qwen2Tokenizer, which rebuilds that pipeline itself, sees the same tokenizer we load."""
    backend = BackendTokenizer(models.BPE())
    backend.normalizer = normalizers.NFC()
    backend.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=420, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    backend.train_from_iterator(SENTENCES * 3, trainer)
    backend.post_processor = processors.ByteLevel(trim_offsets=False)
    return backend


def gpt2_chatml_backend() -> BackendTokenizer:
    """SmolLM-style: GPT-2's byte-level BPE with ChatML special tokens."""
    backend = train_byte_level_bpe(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    backend.post_processor = processors.ByteLevel(trim_offsets=False)
    return backend


def make_qwen2(path: Path, **config_changes) -> Path:
    backend = chatml_backend()
    config = {
        "tokenizer_class": "Qwen2Tokenizer", "bos_token": None, "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>", "unk_token": None, "chat_template": CHATML_QWEN2,
        "clean_up_tokenization_spaces": False, "model_max_length": 32768,
    }
    config.update(config_changes)
    eos_ids = [backend.token_to_id("<|im_end|>"), backend.token_to_id("<|endoftext|>")]
    return make_folder(path, backend, config, model_type="qwen2", generation_config={"eos_token_id": eos_ids})


def make_llama3(path: Path) -> Path:
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
    backend = train_byte_level_bpe(specials)
    bos_id = backend.token_to_id("<|begin_of_text|>")
    backend.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(
            single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|>:1 $B:1",
            special_tokens=[("<|begin_of_text|>", bos_id)],
        ),
    ])
    # Settings baked into tokenizer.json: transformers encodes without them but takes the pad token.
    backend.enable_truncation(max_length=8)
    backend.enable_padding(pad_id=backend.token_to_id("<|end_of_text|>"), pad_token="<|end_of_text|>", length=16)
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<|begin_of_text|>",
        "eos_token": "<|eot_id|>", "clean_up_tokenization_spaces": True, "chat_template": LLAMA3,
        "model_input_names": ["input_ids", "attention_mask"],
    }
    eos_ids = [backend.token_to_id("<|end_of_text|>"), backend.token_to_id("<|eot_id|>")]
    return make_folder(path, backend, config, generation_config={"bos_token_id": bos_id, "eos_token_id": eos_ids})


def llama2_backend(post_processor_adds_bos: bool = True) -> BackendTokenizer:
    backend = train_byte_level_bpe(["<unk>", "<s>", "</s>"])
    if post_processor_adds_bos:
        backend.post_processor = processors.TemplateProcessing(
            single="<s> $A", pair="<s> $A <s>:1 $B:1", special_tokens=[("<s>", backend.token_to_id("<s>"))],
        )
    return backend


def added_token_dict(content: str) -> dict:
    """A special token as older configs serialize it."""
    return {"__type": "AddedToken", "content": content, "lstrip": False, "normalized": False,
            "rstrip": False, "single_word": False}


def make_llama2(path: Path, post_processor_adds_bos: bool = True, **config_changes) -> Path:
    backend = llama2_backend(post_processor_adds_bos)
    config = {
        "tokenizer_class": "LlamaTokenizer", "add_bos_token": True, "add_eos_token": False,
        "bos_token": added_token_dict("<s>"), "eos_token": added_token_dict("</s>"),
        "unk_token": added_token_dict("<unk>"), "pad_token": None, "legacy": False,
        "clean_up_tokenization_spaces": False, "chat_template": LLAMA2,
    }
    config.update(config_changes)
    return make_folder(path, backend, config, generation_config={"bos_token_id": 1, "eos_token_id": 2})


def make_named_templates(path: Path) -> Path:
    config = {
        "tokenizer_class": "Qwen2Tokenizer", "bos_token": None, "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>", "unk_token": None,
        "chat_template": [{"name": "default", "template": CHATML_QWEN2},
                          {"name": "tool_use", "template": CHATML_TOOLS}],
    }
    return make_folder(path, chatml_backend(), config, model_type="qwen2")


def make_smollm_jinja_file(path: Path) -> Path:
    """SmolLM2-style folder (GPT2Tokenizer, llama architecture) with the template in chat_template.jinja."""
    config = {"tokenizer_class": "GPT2Tokenizer", "bos_token": "<|im_start|>", "eos_token": "<|im_end|>",
              "unk_token": "<|endoftext|>", "pad_token": "<|im_end|>", "add_prefix_space": False,
              "clean_up_tokenization_spaces": False}
    return make_folder(path, gpt2_chatml_backend(), config, model_type="llama",
                       files={"chat_template.jinja": CHATML_SMOLLM})


FAMILIES = {
    "qwen2-chatml": make_qwen2,
    "llama3": make_llama3,
    "llama2-mistral": make_llama2,
    "named-templates": make_named_templates,
    "smollm-chat_template.jinja": make_smollm_jinja_file,
}


# --- fixtures ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def hf_auto():
    """transformers.AutoTokenizer.from_pretrained, the reference (a test-only dependency)."""
    transformers = skips.module("transformers")
    transformers.logging.set_verbosity_error()
    return lambda folder: transformers.AutoTokenizer.from_pretrained(str(folder))


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def family(request, tmp_path_factory):
    """(ours, folder) for each family's folder, built once per module."""
    folder = FAMILIES[request.param](tmp_path_factory.mktemp(request.param.replace(".", "_")))
    return Tokenizer.from_dir(folder), folder


@pytest.fixture(scope="module")
def family_pair(family, hf_auto):
    ours, folder = family
    return ours, hf_auto(folder)


# --- chat templates against transformers -------------------------------------------------------

@pytest.mark.parametrize("add_generation_prompt", [False, True])
@pytest.mark.parametrize("conversation", range(len(CONVERSATIONS)))
def test_rendered_chat_matches_transformers(family_pair, conversation, add_generation_prompt):
    ours, hf = family_pair
    messages = CONVERSATIONS[conversation]
    expected = hf.apply_chat_template(messages, add_generation_prompt=add_generation_prompt, tokenize=False)
    assert ours.apply_chat_template(messages, add_generation_prompt=add_generation_prompt) == expected


@pytest.mark.parametrize("conversation", range(len(CONVERSATIONS)))
def test_tokenized_chat_matches_transformers(family_pair, conversation):
    ours, hf = family_pair
    messages = CONVERSATIONS[conversation]
    expected = hf.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)
    ids = ours.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    assert ids == list(expected)
    rendered = ours.apply_chat_template(messages, add_generation_prompt=True)
    assert ids == ours.encode(rendered, add_special_tokens=False)


def test_templates_render_something_family_specific(family):
    """Guards the comparisons above against both sides rendering the same wrong thing."""
    ours, folder = family
    text = ours.apply_chat_template(CONVERSATIONS[0], add_generation_prompt=True)
    if "llama3" in folder.name:
        assert text.startswith("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nToday Date:")
        assert text.endswith("<|start_header_id|>user<|end_header_id|>\n\nHello!<|eot_id|>"
                             "<|start_header_id|>assistant<|end_header_id|>\n\n")
    elif "llama2" in folder.name:
        assert text == "<s>[INST] Hello! [/INST]"
    elif "smollm" in folder.name:
        assert text == ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
                        "<|im_end|>\n<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n")
    else:
        assert text == ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                        "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n")


def test_template_inserted_bos_is_not_doubled(tmp_path):
    ours = Tokenizer.from_dir(make_llama3(tmp_path / "llama3"))
    ids = ours.apply_chat_template(CONVERSATIONS[0], tokenize=True)
    assert ids[0] == ours.bos_token_id and ids[1] != ours.bos_token_id
    assert ids.count(ours.bos_token_id) == 1


# --- encode / decode against transformers -----------------------------------------------------

@pytest.mark.parametrize("add_special_tokens", [True, False])
def test_encode_matches_transformers(family_pair, add_special_tokens):
    ours, hf = family_pair
    texts = TEXTS + ENCODE_ONLY_TEXTS + [f"{ours.eos_token}after eos", f"x{ours.eos_token}{ours.eos_token} y"]
    for text in texts:
        assert ours.encode(text, add_special_tokens=add_special_tokens) == \
            hf.encode(text, add_special_tokens=add_special_tokens), text
    assert ours.encode_batch(texts, add_special_tokens) == [ours.encode(t, add_special_tokens) for t in texts]


@pytest.mark.parametrize("skip_special_tokens", [True, False])
def test_decode_matches_transformers(family_pair, skip_special_tokens):
    ours, hf = family_pair
    for text in TEXTS + [f"hi{ours.eos_token} there"]:
        ids = hf.encode(text, add_special_tokens=True)
        assert ours.decode(ids, skip_special_tokens=skip_special_tokens) == \
            hf.decode(ids, skip_special_tokens=skip_special_tokens), text


def test_decode_round_trips_unicode(family):
    ours, _ = family
    for text in TEXTS:
        assert ours.decode(ours.encode(text, add_special_tokens=False)) == text


def test_special_token_properties_match_transformers(family_pair):
    ours, hf = family_pair
    assert ours.bos_token == hf.bos_token and ours.bos_token_id == hf.bos_token_id
    assert ours.eos_token == hf.eos_token and ours.eos_token_id == hf.eos_token_id
    assert ours.unk_token == hf.unk_token
    assert ours.pad_token == hf.pad_token
    assert ours.pad_token_id == (hf.pad_token_id if hf.pad_token_id is not None else hf.eos_token_id)
    assert ours.vocab_size == len(hf)
    for token_id in (0, 5, ours.vocab_size - 1):
        token = ours.id_to_token(token_id)
        assert token == hf.convert_ids_to_tokens(token_id)
        assert ours.token_to_id(token) == hf.convert_tokens_to_ids(token) == token_id


# --- BOS from the post-processor -----------------------------------------------------------------

def test_bos_added_when_post_processor_adds_it(tmp_path, hf_auto):
    folder = make_llama2(tmp_path / "with-bos", post_processor_adds_bos=True)
    ours, hf = Tokenizer.from_dir(folder), hf_auto(folder)
    ids = ours.encode("Hello world!")
    assert ids[0] == ours.bos_token_id == 1
    assert ids == hf.encode("Hello world!")
    assert ours.encode("Hello world!", add_special_tokens=False) == ids[1:]


def test_no_bos_when_post_processor_does_not_add_it(tmp_path, hf_auto):
    # add_bos_token in the config is ignored when tokenizer.json decides (transformers 5 behaviour).
    folder = make_llama2(tmp_path / "no-bos", post_processor_adds_bos=False)
    ours, hf = Tokenizer.from_dir(folder), hf_auto(folder)
    ids = ours.encode("Hello world!")
    assert ours.bos_token_id not in ids
    assert ids == hf.encode("Hello world!")


def test_llama3_sequence_post_processor_adds_bos(tmp_path, hf_auto):
    folder = make_llama3(tmp_path / "llama3")
    ours, hf = Tokenizer.from_dir(folder), hf_auto(folder)
    ids = ours.encode("Hello world!")
    assert ids[0] == ours.token_to_id("<|begin_of_text|>")
    assert ids == hf.encode("Hello world!")


# --- chat template sources and errors --------------------------------------------------------

def test_raise_exception_surfaces_as_tokenizer_error(tmp_path, hf_auto):
    import jinja2

    folder = make_llama2(tmp_path / "llama2")
    messages = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    with pytest.raises(TokenizerError, match="Conversation roles must alternate user/assistant") as err:
        Tokenizer.from_dir(folder).apply_chat_template(messages)
    assert str(folder) in str(err.value)
    with pytest.raises(jinja2.TemplateError, match="Conversation roles must alternate"):
        hf_auto(folder).apply_chat_template(messages, tokenize=False)


def test_named_templates_pick_default_and_tool_use(tmp_path, hf_auto):
    folder = make_named_templates(tmp_path / "named")
    ours, hf = Tokenizer.from_dir(folder), hf_auto(folder)
    tools = [{"type": "function", "function": {"name": "météo", "description": "Wetter für eine Stadt",
                                               "parameters": {"type": "object", "properties": {}}}}]
    messages = CONVERSATIONS[1]
    with_tools = ours.apply_chat_template(messages, add_generation_prompt=True, tools=tools)
    assert with_tools == hf.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=False)
    assert '"météo"' in with_tools  # tojson keeps non-ASCII text
    assert '\n  {\n    "type": "function"' in with_tools  # tojson(indent=2)
    assert "Tools:" not in ours.apply_chat_template(messages)


def test_named_templates_without_default_are_rejected(tmp_path):
    config = {"eos_token": "<|im_end|>", "chat_template": [{"name": "tool_use", "template": CHATML_TOOLS}]}
    ours = Tokenizer.from_dir(make_folder(tmp_path / "x", chatml_backend(), config))
    with pytest.raises(TokenizerError, match=r"none named 'default' \(found \['tool_use'\]\)"):
        ours.apply_chat_template(CONVERSATIONS[0])


def test_chat_template_file_wins_over_config(tmp_path, hf_auto):
    config = {"eos_token": "<|im_end|>", "chat_template": "{{ 'from config' }}"}
    folder = make_folder(tmp_path / "x", chatml_backend(), config, files={"chat_template.jinja": CHATML_QWEN2})
    ours = Tokenizer.from_dir(folder)
    text = ours.apply_chat_template(CONVERSATIONS[0])
    assert text.startswith("<|im_start|>system")
    assert text == hf_auto(folder).apply_chat_template(CONVERSATIONS[0], tokenize=False)


def test_generation_tag_renders_its_body(tmp_path, hf_auto):
    config = {"eos_token": "<|im_end|>", "chat_template": CHATML_GENERATION_TAG}
    folder = make_folder(tmp_path / "x", chatml_backend(), config, model_type="qwen2")
    messages = CONVERSATIONS[2]
    text = Tokenizer.from_dir(folder).apply_chat_template(messages)
    assert "<|im_start|>assistant\nKaffee ☕<|im_end|>\n" in text
    assert text == hf_auto(folder).apply_chat_template(messages, tokenize=False)


def test_extra_variables_reach_the_template(tmp_path, hf_auto):
    folder = make_llama3(tmp_path / "llama3")
    ours, hf = Tokenizer.from_dir(folder), hf_auto(folder)
    text = ours.apply_chat_template(CONVERSATIONS[0], date_string="01 Jan 2030")
    assert "Today Date: 01 Jan 2030" in text
    assert text == hf.apply_chat_template(CONVERSATIONS[0], tokenize=False, date_string="01 Jan 2030")


def test_strftime_now_and_special_token_variables(tmp_path):
    template = "{{ strftime_now('%Y-%m-%d') }}|{{ bos_token }}|{{ eos_token }}|{{ pad_token }}|{{ unk_token }}"
    ours = Tokenizer.from_dir(make_llama2(tmp_path / "x", chat_template=template, pad_token="</s>"))
    before = datetime.now().strftime("%Y-%m-%d")
    text = ours.apply_chat_template(CONVERSATIONS[0])
    after = datetime.now().strftime("%Y-%m-%d")
    date, rest = text.split("|", 1)
    assert date in (before, after)
    assert rest == "<s>|</s>|</s>|<unk>"


def test_sandbox_blocks_python_internals(tmp_path):
    template = "{{ messages.__class__.__mro__ }}{{ ''.__class__.__subclasses__() }}"
    ours = Tokenizer.from_dir(make_llama2(tmp_path / "x", chat_template=template))
    with pytest.raises(TokenizerError, match="chat template failed"):
        ours.apply_chat_template(CONVERSATIONS[0])


def test_no_chat_template_is_an_error(tmp_path):
    folder = make_folder(tmp_path / "base", chatml_backend(), {"eos_token": "<|endoftext|>"})
    ours = Tokenizer.from_dir(folder)
    assert not ours.has_chat_template
    with pytest.raises(TokenizerError, match="has no chat template"):
        ours.apply_chat_template(CONVERSATIONS[0])


def test_template_syntax_error_names_the_line(tmp_path):
    ours = Tokenizer.from_dir(make_llama2(tmp_path / "x", chat_template="ok\n{% for m in messages %}"))
    with pytest.raises(TokenizerError, match="syntax error at line 2"):
        ours.apply_chat_template(CONVERSATIONS[0])


def test_compiled_template_is_cached(tmp_path):
    import core.data.tokenizer as module

    ours = Tokenizer.from_dir(make_qwen2(tmp_path / "x"))
    ours.apply_chat_template(CONVERSATIONS[0])
    hits = module._compile_template.cache_info().hits
    ours.apply_chat_template(CONVERSATIONS[1])
    assert module._compile_template.cache_info().hits == hits + 1


@pytest.mark.parametrize("messages, match", [
    ([], "non-empty list"),
    ("hello", "non-empty list"),
    ([{"role": "user", "content": "a"}, "b"], "message 1: expected a dict"),
    ([{"role": "user"}], "message 0: 'content' must be a string, got nothing"),
    ([{"role": "user", "content": "a"}, {"role": "assistant", "content": None}],
     "message 1: 'content' must be a string, got NoneType"),
    ([{"role": 3, "content": "a"}], "message 0: 'role' must be a string, got int"),
])
def test_invalid_messages_name_the_message(tmp_path_factory, messages, match):
    ours = Tokenizer.from_dir(make_qwen2(tmp_path_factory.mktemp("q")))
    with pytest.raises(TokenizerError, match=match):
        ours.apply_chat_template(messages)


def test_none_fields_are_dropped_and_reasoning_is_aliased(tmp_path, hf_auto):
    template = ("{% for m in messages %}{{ m.role }}:{{ m.content }}"
                "{% if m.tool_calls is defined %}[calls]{% endif %}"
                "{% if m.reasoning_content is defined %}<think>{{ m.reasoning_content }}</think>{% endif %}"
                "{{ '\\n' }}{% endfor %}")
    folder = make_qwen2(tmp_path / "x", chat_template=template)
    messages = [{"role": "user", "content": "hi", "tool_calls": None},
                {"role": "assistant", "content": "yo", "thinking": "greet back"}]
    text = Tokenizer.from_dir(folder).apply_chat_template(messages)
    assert text == "user:hi\nassistant:yo<think>greet back</think>\n"
    assert text == hf_auto(folder).apply_chat_template(messages, tokenize=False)


# --- folder errors and config details -------------------------------------------------------

def test_missing_tokenizer_json_names_the_folder(tmp_path):
    folder = tmp_path / "empty-model"
    folder.mkdir()
    with pytest.raises(TokenizerError, match="fast tokenizer") as err:
        Tokenizer.from_dir(folder)
    assert str(folder) in str(err.value) and "tokenizer.json" in str(err.value)


def test_sentencepiece_only_folder_is_not_supported_yet(tmp_path):
    folder = tmp_path / "spm-model"
    folder.mkdir()
    (folder / "tokenizer.model").write_bytes(b"\x00not really sentencepiece")
    with pytest.raises(TokenizerError, match="not supported yet") as err:
        Tokenizer.from_dir(folder)
    assert "save_pretrained" in str(err.value) and str(folder) in str(err.value)


def test_missing_folder_and_broken_files(tmp_path):
    with pytest.raises(TokenizerError, match="not a folder"):
        Tokenizer.from_dir(tmp_path / "nope")
    folder = make_qwen2(tmp_path / "x")
    (folder / "tokenizer_config.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(TokenizerError, match="tokenizer_config.json: cannot read JSON"):
        Tokenizer.from_dir(folder)
    (folder / "tokenizer_config.json").write_text("{}", encoding="utf-8")
    (folder / "tokenizer.json").write_text('{"model": 3}', encoding="utf-8")
    with pytest.raises(TokenizerError, match="tokenizer.json: not a valid tokenizers file"):
        Tokenizer.from_dir(folder)


def test_bad_token_value_names_the_key(tmp_path):
    folder = make_qwen2(tmp_path / "x", eos_token={"id": 3})
    with pytest.raises(TokenizerError, match="tokenizer_config.json 'eos_token'"):
        Tokenizer.from_dir(folder)


def test_eos_token_ids_include_generation_config(tmp_path):
    qwen = Tokenizer.from_dir(make_qwen2(tmp_path / "qwen"))
    assert qwen.eos_token_ids == {qwen.token_to_id("<|im_end|>"), qwen.token_to_id("<|endoftext|>")}
    llama2 = Tokenizer.from_dir(make_llama2(tmp_path / "llama2"))  # eos_token_id given as an int
    assert llama2.eos_token_ids == {2}
    llama3 = Tokenizer.from_dir(make_llama3(tmp_path / "llama3"))
    assert llama3.eos_token_ids == {llama3.token_to_id("<|eot_id|>"), llama3.token_to_id("<|end_of_text|>")}
    (tmp_path / "llama2" / "generation_config.json").unlink()
    assert Tokenizer.from_dir(tmp_path / "llama2").eos_token_ids == {2}


def test_pad_falls_back_to_eos(tmp_path, hf_auto):
    folder = make_llama2(tmp_path / "x")
    ours = Tokenizer.from_dir(folder)
    assert ours.pad_token is None and hf_auto(folder).pad_token_id is None
    assert ours.pad_token_id == ours.eos_token_id == 2
    qwen = Tokenizer.from_dir(make_qwen2(tmp_path / "q"))
    assert qwen.pad_token_id == qwen.token_to_id("<|endoftext|>") != qwen.eos_token_id


def test_special_tokens_map_overrides_config(tmp_path, hf_auto):
    folder = make_qwen2(tmp_path / "x")
    write_json(folder / "special_tokens_map.json",
               {"eos_token": {"content": "<|endoftext|>", "lstrip": False, "normalized": False,
                              "rstrip": False, "single_word": False}})
    ours, hf = Tokenizer.from_dir(folder), hf_auto(folder)
    assert ours.eos_token == hf.eos_token == "<|endoftext|>"
    assert ours.eos_token_id == hf.eos_token_id


def test_special_token_only_in_config_is_registered(tmp_path, hf_auto):
    """An EOS the config names but tokenizer.json lacks gets a new id and is matched whole, as in
    transformers; text containing it encodes the same way on both sides."""
    folder = make_qwen2(tmp_path / "x", eos_token="<|my_eos|>", additional_special_tokens=["<|tool|>"])
    ours, hf = Tokenizer.from_dir(folder), hf_auto(folder)
    assert ours.vocab_size == len(hf)
    assert ours.eos_token_id == hf.eos_token_id is not None
    text = "done<|my_eos|> call <|tool|>!"
    assert ours.encode(text) == hf.encode(text)
    assert ours.decode(ours.encode(text)) == hf.decode(hf.encode(text), skip_special_tokens=True) == "done call !"


def test_split_special_tokens_encodes_them_as_text(tmp_path, hf_auto):
    folder = make_qwen2(tmp_path / "x", split_special_tokens=True)
    ours, hf = Tokenizer.from_dir(folder), hf_auto(folder)
    text = "<|im_start|>user\nhi<|im_end|>"
    assert ours.token_to_id("<|im_start|>") not in ours.encode(text)
    assert ours.encode(text) == hf.encode(text)


def test_imports_neither_transformers_nor_mindspore():
    code = ("import sys, core.data.tokenizer; "
            "bad = [m for m in ('transformers', 'mindspore', 'torch') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, check=True)


# --- the shipped demo model ---------------------------------------------------------------------

def test_demo_model_matches_transformers(hf_auto):
    ours, hf = Tokenizer.from_dir(DEMO_MODEL_DIR), hf_auto(DEMO_MODEL_DIR)
    assert ours.vocab_size == len(hf)
    assert (ours.bos_token_id, ours.eos_token_id) == (hf.bos_token_id, hf.eos_token_id)
    for text in TEXTS:
        assert ours.encode(text) == hf.encode(text), text
        assert ours.decode(ours.encode(text)) == hf.decode(hf.encode(text), skip_special_tokens=True)
    if not ours.has_chat_template:
        return
    for messages in CONVERSATIONS:
        for add_generation_prompt in (False, True):
            try:
                expected = hf.apply_chat_template(messages, add_generation_prompt=add_generation_prompt,
                                                  tokenize=True, return_dict=False)
            except Exception:  # a template may refuse e.g. a system message; both must refuse
                with pytest.raises(TokenizerError):
                    ours.apply_chat_template(messages, add_generation_prompt=add_generation_prompt)
                continue
            assert ours.apply_chat_template(messages, add_generation_prompt=add_generation_prompt,
                                            tokenize=True) == list(expected)
