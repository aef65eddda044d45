"""Issue 29 item 2, the model folder: every message a model folder's problem is said with (ids model.*,
moe.*, tokenizer.* in core.spec.messages) is made here by its real producer (core.spec.model_args,
families, moe_args, the weight loader's refusals, core.data.tokenizer, the console's model table and
form) and reads in 中文 from its id (app.i18n.MESSAGES_ZH) with its facts; no pattern over the English."""
from __future__ import annotations

import html
import json
import shutil
from pathlib import Path

import pytest

from core.data.tokenizer import Tokenizer, TokenizerError
from core.spec.config import Config, ConfigError
from core.spec.errors import CheckpointError
from core.spec.messages import CATALOGUE, Message
from core.spec.model_args import check_run_settings, read_model_args, run_problems, weight_files

from app.data import catalog
from app.tabs import form
from app.tabs import train_callbacks as cb
from app.i18n import MESSAGES_ZH, problem_text
from tests.app.english import english_words
from tests.app.conftest import write_model
from tests.app.test_problem_text import (CHAT, GEMMA3, MISTRAL, MIXTRAL, PHI3, QWEN3_MOE, TEMPLATE_REFUSAL, _config,
                                         _file, _pickle_only, _tokenizer_config, assert_chinese)
from tests.app.test_train_callbacks import form_values

AREA = ("model.", "moe.", "tokenizer.")


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory) -> Path:
    """A loadable Llama-shaped folder, copied and spoilt by each case."""
    return write_model(tmp_path_factory.mktemp("models") / "tiny", ["a b c"] * 8)


def _unlink(name: str):
    def change(folder: Path) -> None:
        (folder / name).unlink()
    return change


def _truncated_weights(folder: Path) -> None:
    (folder / "model.safetensors").write_bytes(b"xx")


def _huge_header(folder: Path) -> None:
    (folder / "model.safetensors").write_bytes((10 ** 12).to_bytes(8, "little") + b"{}")


# the id -> how a model folder is spoilt to make it (read by read_model_args and weight_files, as the loader does)
FOLDER_MISTAKES = {
    "model.no_config": _unlink("config.json"),
    "model.invalid_json": _file("config.json", '{"vocab_size": 3,}'),
    "model.not_object": _file("config.json", "[1]"),
    "model.remote_code": _config(auto_map={"AutoModelForCausalLM": "modeling_x.X"}, model_type="x",
                                 architectures=["XForCausalLM"]),
    "model.architecture_refused": _config(architectures=["DeepseekV2ForCausalLM"], model_type="deepseek_v2"),
    "model.mla_moe": _config(architectures=["DeepseekV3ForCausalLM"], model_type="deepseek_v3"),
    "model.mla": _config(architectures=["DeepseekV2ForCausalLM"], model_type="deepseek_v2"),
    "model.chunked_nope_moe": _config(architectures=["Llama4ForCausalLM"], model_type="llama4"),
    "model.architecture_unknown": _config(architectures=["FooForCausalLM"], model_type="foo"),
    "model.positive_int": _config(hidden_size=0),
    "model.positive_int_or_null": _config(**MISTRAL, sliding_window=-4),
    "model.positive_or_null": _config(architectures=["Gemma2ForCausalLM"], model_type="gemma2",
                                      query_pre_attn_scalar=-1),
    "model.kv_heads": _config(num_key_value_heads=3),
    "model.text_config": _config(architectures=["Gemma3ForConditionalGeneration"], model_type="gemma3"),
    "model.not_supported": _config(hidden_act="swish2"),
    "model.rotary_factor": _config(partial_rotary_factor=2),
    "model.rope_family": _config(rope_scaling={"rope_type": "yarn", "factor": 2.0}),
    "model.sliding_rope": _config(**GEMMA3, sliding_window=4, rope_parameters={
        "full_attention": {"rope_type": "default", "rope_theta": 1e6},
        "sliding_attention": {"rope_type": "linear", "factor": 2.0}}),
    "model.rope_required": _config(rope_scaling={"rope_type": "llama3", "factor": 2.0}),
    "model.longrope_factors": _config(**PHI3, rope_scaling={"type": "longrope", "short_factor": [1.0],
                                                            "long_factor": "x"}),
    "model.longrope_original": _config(**PHI3, original_max_position_embeddings=1, rope_scaling={
        "type": "longrope", "short_factor": [1.0, 1.0], "long_factor": [1.0, 1.0]}),
    "model.factor_count": _config(**PHI3, original_max_position_embeddings=256, rope_scaling={
        "type": "longrope", "short_factor": [1.0], "long_factor": [1.0]}),
    "model.layer_types": _config(**MISTRAL, sliding_window=4, layer_types=["full_attention"]),
    "model.bidirectional": _config(**GEMMA3, use_bidirectional_attention=True),
    "moe.experts_missing": _config(**MIXTRAL),
    "moe.top_k": _config(**MIXTRAL, num_local_experts=2, num_experts_per_tok=3),
    "moe.aux_loss": _config(**MIXTRAL, num_local_experts=2, router_aux_loss_coef=-1),
    "moe.jitter": _config(**MIXTRAL, num_local_experts=2, router_jitter_noise=0.1),
    "moe.qwen_window": _config(**QWEN3_MOE, use_sliding_window=True, sliding_window=4),
    "moe.dense_layers": _config(**QWEN3_MOE, mlp_only_layers=[5]),
    "model.no_weights": _unlink("model.safetensors"),
    "model.pickle_only": _pickle_only,
    "model.bad_index": _file("model.safetensors.index.json", "{"),
    "model.shard_missing": _file("model.safetensors.index.json",
                                 json.dumps({"weight_map": {"w": "model-1.safetensors"}})),
}

# the id -> how the tokenizer files are spoilt to make it (read as the data preview and the worker do)
TOKENIZER_MISTAKES = {
    "tokenizer.no_file": _unlink("tokenizer.json"),
    "tokenizer.unreadable_json": _file("tokenizer_config.json", "{"),
    "tokenizer.not_object": _file("tokenizer_config.json", "[1]"),
    "tokenizer.invalid_file": _file("tokenizer.json", '{"version": '),
    "tokenizer.token": _tokenizer_config(bos_token=5),
    "tokenizer.added_token": _tokenizer_config(added_tokens_decoder={"0": 5}),
    "tokenizer.eos_ids": _file("generation_config.json", json.dumps({"eos_token_id": "x"})),
    "tokenizer.template_entry": _tokenizer_config(chat_template=[{"name": 1}]),
    "tokenizer.template_type": _tokenizer_config(chat_template=5),
    "tokenizer.no_template": _tokenizer_config(chat_template=None),
    "tokenizer.no_default": _tokenizer_config(chat_template=[{"name": "x", "template": "a"}]),
    "tokenizer.refused": _tokenizer_config(chat_template=f"{{{{ raise_exception('{TEMPLATE_REFUSAL}') }}}}"),
    "tokenizer.failed": _tokenizer_config(chat_template="{{ foo.bar }}"),
    "tokenizer.syntax": _tokenizer_config(chat_template="{{ x }}\n{% endif %}"),
}


def _keys(message) -> set[str]:
    """The ids of a message and of the messages in its parameters."""
    if not isinstance(message, Message):
        return set()
    return {message.key}.union(*(_keys(value) for value in message.params.values()))


def _spoilt(tiny_folder: Path, tmp_path: Path, change) -> Path:
    folder = tmp_path / "model"
    shutil.copytree(tiny_folder, folder)
    change(folder)
    return folder


def _said_in_chinese(message, err=None) -> None:
    """`message` (a Message, or an error that keeps one) is said by its id in 中文 with its facts."""
    english = str(message)
    assert problem_text(err if err is not None else message, "en") == english
    assert_chinese(english, problem_text(err if err is not None else message, "zh"))


# what the tests below make besides the folder's and the tokenizer's mistakes (each asserts its id)
MADE_ELSEWHERE = {
    "model.at": "every refusal: '<file>: <why>'", "model.at_setting": "a config.json key: '<file>: <key>: <why>.'",
    "model.no_tokenizer": "the model table", "model.unreadable_weights": "the model table",
    "model.short_weights": "the model table", "model.huge_header": "the model table",
    "model.not_a_folder": "the loader",
    "tokenizer.not_a_folder": "the tokenizer", "model.above_context": "run_problems",
    "model.targets_unmatched": "run_problems", "model.targets_none": "run_problems",
}


@pytest.mark.parametrize("key", list(FOLDER_MISTAKES))
def test_a_model_folder_the_loader_refuses_is_said_by_its_id(tiny_folder, tmp_path, key):
    folder = _spoilt(tiny_folder, tmp_path, FOLDER_MISTAKES[key])
    with pytest.raises(CheckpointError) as raised:
        read_model_args(folder)
        weight_files(folder)
    err = raised.value
    assert key in _keys(err.message) and err.said == [err.message], str(err)
    assert err.message.key == "model.at" and str(folder) in err.message.params["where"]
    _said_in_chinese(err.message, err)
    if key.startswith(("model.positive_int", "moe.")):  # a key of config.json: '<file>: <key>: <why>.'
        assert err.message.params["reason"].key == "model.at_setting"
    entry = catalog.describe(folder)  # the console's model table: the folder is not said again before the reason
    assert not entry.loadable and entry.row("en")[-1] == str(entry.reason)
    if err.message.params["where"] in (str(folder), str(folder / "config.json")):
        assert entry.reason == err.message.params["reason"] and entry.reason.key == err.message.params["reason"].key
    else:  # a file of its own (the index)
        assert entry.reason.key == "model.at"
    assert_chinese(str(entry.reason), entry.row("zh")[-1])


def test_the_model_table_and_the_form_say_a_folder_they_cannot_use_by_its_id(console, workspace):
    root = workspace.models_dirs[0]
    texts = ["a b c"] * 8
    made = {"no-tokenizer": ("model.no_tokenizer", _unlink("tokenizer.json")),
            "short-weights": ("model.short_weights", _truncated_weights),
            "huge-header": ("model.huge_header", _huge_header)}
    for name, (_, change) in made.items():
        if not (root / name).exists():
            write_model(root / name, texts)
        change(root / name)
    try:
        entries = {m.path.name: m for m in console.models(refresh=True)}
        for name, (key, _) in made.items():
            entry = entries[name]
            assert not entry.loadable and key in _keys(entry.reason), entry.reason
            assert_chinese(str(entry.reason), entry.row("zh")[-1])
            errors = cb.check_form(form_values(console, model__path=entry.name), console).errors
            said = errors["model.path"]
            assert said.key == "check.not_loadable" and said.params["problem"] == entry.reason  # the console's words
            assert str(said) == f"{entry.name} is not loadable: {entry.reason}"
            _said_in_chinese(said)
    finally:
        for name in made:
            shutil.rmtree(root / name)
        console.models(refresh=True)


def test_a_folder_that_is_not_there_is_said_by_its_id(tmp_path):
    with pytest.raises(CheckpointError) as raised:
        weight_files(tmp_path / "nowhere")
    assert raised.value.message.params["reason"].key == "model.not_a_folder"
    _said_in_chinese(raised.value.message, raised.value)
    with pytest.raises(TokenizerError) as raised:
        Tokenizer.from_dir(tmp_path / "nowhere")
    assert raised.value.message.params["reason"].key == "tokenizer.not_a_folder"
    _said_in_chinese(raised.value.message, raised.value)


def test_what_a_run_asks_of_the_model_is_said_by_its_id(tiny_folder, console):
    """data.max_seq_len above the context, LoRA targets the model lacks (core.spec.model_args.run_problems):
    in the ConfigError the CLI prints and in the form's widgets."""
    args = read_model_args(tiny_folder)
    cases = {"model.above_context": (1024, ["q_proj"]), "model.targets_unmatched": (64, ["q_proj", "qkv_proj"]),
             "model.targets_none": (64, "nothing.*")}
    for key, (length, targets) in cases.items():
        (setting, value, why), = run_problems(args, length, "lora", targets)
        assert why.key == key
        _said_in_chinese(why)
    config = Config().with_updates({"model.path": str(tiny_folder), "data.max_seq_len": 1024,
                                    "lora.target_modules": ["qkv_proj"]})
    with pytest.raises(ConfigError) as raised:
        check_run_settings(config)
    err = raised.value
    assert {"model.above_context", "model.targets_unmatched"} <= set().union(*map(_keys, err.said))
    assert_chinese(str(err), problem_text(err, "zh"))
    widgets = form.errors_by_widget(err.errors)
    said = widgets[form.TARGET_REGEX] if form.TARGET_REGEX in widgets else widgets[form.TARGET_NAMES]
    assert said.key == "field.named" and str(said).startswith("target modules names qkv_proj match")
    _said_in_chinese(said)
    errors = cb.check_form(form_values(console, data__max_seq_len=1024), console).errors
    assert "model.above_context" in _keys(errors["data.max_seq_len"])
    _said_in_chinese(errors["data.max_seq_len"])


@pytest.mark.parametrize("key", list(TOKENIZER_MISTAKES))
def test_a_tokenizer_file_or_template_problem_is_said_by_its_id(tiny_folder, tmp_path, key):
    from app.data.data_preview import error_html
    folder = _spoilt(tiny_folder, tmp_path, TOKENIZER_MISTAKES[key])
    with pytest.raises(TokenizerError) as raised:
        Tokenizer.from_dir(folder).apply_chat_template(CHAT)
    err = raised.value
    assert err.message.key == "model.at" and err.message.params["reason"].key == key, str(err)
    assert problem_text(err, "en") == str(err) and error_html(err, "en") == error_html(str(err), "en")
    chinese = problem_text(err, "zh")
    assert error_html(err, "zh") == f'<div class="mt-error">{html.escape(chinese)}</div>'
    if key == "tokenizer.refused":  # the template's own words stay as its author wrote them
        assert chinese.endswith("：对话模板拒绝了这些消息：" + TEMPLATE_REFUSAL)
        assert english_words(chinese) == english_words(TEMPLATE_REFUSAL)
    else:
        assert_chinese(str(err), chinese)


def test_every_model_folder_id_is_made_by_a_case_above_and_has_chinese():
    ours = {key for key in CATALOGUE if key.startswith(AREA)}
    assert ours <= set(MESSAGES_ZH), sorted(ours - set(MESSAGES_ZH))
    made = set(FOLDER_MISTAKES) | set(TOKENIZER_MISTAKES) | set(MADE_ELSEWHERE)
    assert ours - made == set(), sorted(ours - made)
    assert made - ours == set(), sorted(made - ours)


@pytest.mark.parametrize("key", ["tokenizer.no_template", "tokenizer.no_default", "tokenizer.failed", "tokenizer.syntax"])
def test_a_template_error_inside_a_data_error_reads_in_chinese_by_its_id(tiny_folder, tmp_path, key):
    """core.data.pipeline.render wraps a TokenizerError in a DataError ('<record>: <folder>: ...') and
    keeps its message: the record's place and the template's error are both said by id."""
    from core.data.files import line_of
    from core.data.formats import Conversation
    from core.data.pipeline import render
    from core.data.files import DataError
    tokenizer = Tokenizer.from_dir(_spoilt(tiny_folder, tmp_path, TOKENIZER_MISTAKES[key]))
    with pytest.raises(DataError) as raised:
        render(tokenizer, Conversation(line_of(Path("train.jsonl"), 3), CHAT, ["messages[0]"]))
    said, = raised.value.said
    assert said.key == "data.at_line" and key in _keys(said)
    assert_chinese(str(raised.value), problem_text(raised.value, "zh"))


def test_the_forms_data_check_says_a_broken_tokenizer_by_its_id(console, workspace):
    """The form's data check (app.tabs.data_callbacks.data_problems) reads the data with the model's tokenizer:
    a tokenizer file it cannot read blocks Start, said by its id."""
    root = workspace.models_dirs[0]
    folder = root / "broken-tokenizer"
    if not folder.exists():
        write_model(folder, ["a b c"] * 8)
    (folder / "tokenizer_config.json").write_text("[1]", encoding="utf-8")
    try:
        entry = {m.path.name: m for m in console.models(refresh=True)}[folder.name]
        assert entry.loadable  # the model table reads no tokenizer_config.json
        errors = cb.check_form(form_values(console, model__path=entry.name), console).errors
        said = errors["data.train_file"]
        assert said.key == "model.at" and said.params["reason"].key == "tokenizer.not_object"
        _said_in_chinese(said)
    finally:
        shutil.rmtree(folder)
        console.models(refresh=True)
