"""Issue 20 item 10, the messages that answer a bad input, in 中文: core's ConfigError and DataError
messages, the model loader's refusals, the console's own checks, the "does not fit" refusal, the dry
run, saving and loading a config, and the Runs tab's resume and delete. Each message is made by the
code that makes it for the page (no hand-written samples), then shown in 中文 with no English-only
word left (the browser test's own rule, tests/app/english.py) and with every fact of the English
kept: the file, the line number, the key, the value and the valid values."""
from __future__ import annotations

import html
import json
import re
import time
import types
from pathlib import Path

import pytest

from core.spec.config import Config, ConfigError
from core.run.records import FinalFigures
from core.run.rundir import RunDir

from app.data import catalog
from app.tabs import data_callbacks
from app.tabs import runs_callbacks as runs_cb
from app.tabs import train_callbacks as cb
from app.i18n import problem_text, text
from tests.app.conftest import write_model
from tests.app.english import english_words
from tests.app.test_train_callbacks import form_values

# the facts of a message: quoted values, paths and dotted keys, numbers
FACT = re.compile(r"(?<!\w)'[^'\n]*'(?!\w)|[^\s()（）；;,，：]*[/_.=][^\s()（）；;,，：]*|\d+(?:\.\d+)?")


def facts(message: str) -> list[str]:
    found = [f.rstrip(".:;,") for f in FACT.findall(message)]
    return [f for f in found if f not in ("", "e.g") and not re.fullmatch(r"[A-Za-z-]+", f)]  # not a sentence's last word


def error_lines(said) -> str:
    """What an entry point the console starts prints on stderr for `said` (core.spec.errors.report,
    with RECORDS_ENV set): the English line, then its record."""
    from core.spec.errors import RECORD_MARK, record_of
    return f"error: {said}\n{RECORD_MARK}{json.dumps(record_of(said))}\n"


def by_record(said):
    """`said` as the console receives it from another process: its record, read back."""
    from core.spec.errors import read_report
    return read_report(error_lines(said))


def assert_chinese(english: str, chinese: str) -> None:
    assert chinese != english, f"not translated: {english}"
    assert english_words(chinese) == [], f"English left in {chinese!r} (from {english!r})"
    missing = [f for f in facts(english) if f not in chinese]
    assert not missing, f"facts dropped {missing} in {chinese!r} (from {english!r})"


def write_lines(folder: Path, name: str, lines: list[str]) -> str:
    path = folder / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture
def bad_data(workspace) -> dict[str, str]:
    """Data files with the mistakes people make, next to the demo data."""
    folder = workspace.data_dirs[0] / "demo"
    good = (folder / "train.jsonl").read_text().splitlines()
    broken = list(good)
    broken[4] = '{"instruction": "x", "output": '
    missing = list(good)
    missing[2] = json.dumps({"instruction": "x"})
    number = list(good)
    number[2] = json.dumps({"instruction": "x", "output": 3})
    return {"invalid JSON": write_lines(folder, "broken.jsonl", broken),
            "missing field": write_lines(folder, "missing.jsonl", missing),
            "not a string": write_lines(folder, "number.jsonl", number),
            "bad role": write_lines(folder, "chat.jsonl", [json.dumps({"messages": [{"role": "bot", "content": "x"}]})]),
            "unknown format": write_lines(folder, "weird.jsonl", [json.dumps({"foo": 1, "bar": 2})]),
            "empty": write_lines(folder, "empty.jsonl", [])}


FIELD_MISTAKES = {  # form changes -> the widget whose error it is
    "warmup past the steps": ({"train.warmup_steps": 10_000}, "train.warmup_steps"),
    "out of range": ({"train.learning_rate": -1}, "train.learning_rate"),
    "not a choice": ({"train.schedule": "cosin"}, "train.schedule"),
    "above the model's context": ({"data.max_seq_len": 4096}, "data.max_seq_len"),
    "no length": ({"train.length": None}, "train.length"),
    "no such LoRA target": ({"lora.target_regex": "nope"}, "lora.target_regex"),
    "more workers than cores": ({"parallel.data_parallel": 64}, "parallel.data_parallel"),
    "packing and grouping": ({"data.packing": True, "data.group_by_length": True}, "data.group_by_length"),
    "no validation data": ({"data.validation_fraction": 0, "data.validation_file": ""}, "data.validation_file"),
    "outside the data folders": ({"data.train_file": "/etc/passwd"}, "data.train_file"),
    "no such model": ({"model.path": "nope"}, "model.path"),
    "unknown column field": ({"data.columns": "foo: bar"}, "data.columns"),
    "bf16 on the CPU": ({"precision.amp_level": "O1", "precision.compute_dtype": "bfloat16"}, "precision.compute_dtype"),
    "optimizer shard off Ascend": ({"parallel.optimizer_shard": True}, "parallel.optimizer_shard"),
    "bad profile steps": ({"train.profile_steps": "5,3"}, "train.profile_steps"),
}


@pytest.mark.parametrize("mistake", list(FIELD_MISTAKES))
def test_a_field_error_reads_in_chinese_with_its_facts(console, mistake):
    changes, widget = FIELD_MISTAKES[mistake]
    values = {**form_values(console), **changes}
    errors = cb.check_form(values, console).errors
    assert widget in errors, errors
    assert_chinese(errors[widget], problem_text(errors[widget], "zh"))
    assert problem_text(errors[widget], "en") == errors[widget]  # English as core wrote it
    shown = cb.errors_html(errors, "zh")  # the box above Start
    assert html.escape(problem_text(errors[widget], "zh")) in shown


@pytest.mark.parametrize("mistake", ["invalid JSON", "missing field", "not a string", "bad role", "unknown format",
                                     "empty"])
def test_a_data_error_blocks_start_and_reads_in_chinese_with_the_line_number(console, bad_data, mistake):
    values = form_values(console, data__train_file=bad_data[mistake])
    if mistake in ("missing field", "not a string"):
        values["data.format"] = "alpaca"
    outcome = cb.start(values, console, lang="zh")
    assert outcome.run_id is None and "data.train_file" in outcome.errors, outcome
    english = outcome.errors["data.train_file"]
    assert_chinese(english, problem_text(english, "zh"))
    if mistake == "invalid JSON":
        assert "line 5: invalid JSON" in english and "第 5 行：JSON 无效" in problem_text(english, "zh")
    # the data preview says the same (its error block)
    preview = data_callbacks.preview_view(values, console, "zh")
    assert 'class="mt-error"' in preview and english_words(re.sub(r"<[^>]+>", " ", preview)) == []


def test_a_config_file_with_an_unknown_key_and_bad_yaml_read_in_chinese(console, tmp_path):
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("train:\n  learnin_rate: 0.1\n  max_steps: 5\n  warmup_steps: 1\n", encoding="utf-8")
    bad = tmp_path / "bad.yaml"
    bad.write_text("train:\n  max_steps: [1,\n", encoding="utf-8")
    empty = tmp_path / "empty.yaml"
    empty.write_text("", encoding="utf-8")
    for path in (unknown, bad, empty):
        values, message = cb.load_config_values(cb.load_yaml, str(path), console, "zh")
        with pytest.raises(ConfigError) as err:
            cb.load_yaml(str(path), console)
        assert values == {} and message.startswith("⚠ ")
        assert_chinese(str(err.value), message.removeprefix("⚠ "))
    assert "未知的键（是否想写 'learning_rate'？）" in cb.load_config_values(cb.load_yaml, str(unknown), console, "zh")[1]
    values, message = cb.load_config_values(cb.load_yaml, str(_saved(console)), console, "zh")
    assert values["train.learning_rate"] == 0.0003 and message.startswith("已加载 `") and english_words(message) == []


def _saved(console) -> Path:
    path, message = cb.save_config(form_values(console, train__learning_rate=0.0003), console, "zh")
    assert path is not None and message == f"已保存 `{path.name}`"
    return path


def test_saving_an_invalid_form_says_why_in_chinese(console):
    path, message = cb.save_config(form_values(console, train__warmup_steps=10_000), console, "zh")
    assert path is None and message.startswith("⚠ 未保存：train.warmup_steps: 必须 < train.max_steps")
    assert english_words(message) == []
    path, message = cb.save_config(form_values(console, train__warmup_steps=10_000), console, "en")
    assert path is None and message.startswith("⚠ not saved: train.warmup_steps: must be < train.max_steps")


def test_a_model_folder_the_loader_refuses_reads_in_chinese(console, workspace, tmp_path):
    root = workspace.models_dirs[0]
    texts = ["a b c"] * 8
    refused = {"unsupported architecture": {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3"},
               "unknown architecture": {"architectures": ["FooForCausalLM"], "model_type": "foo"},
               "remote code": {"auto_map": {"AutoModelForCausalLM": "modeling_x.X"}, "model_type": "x",
                               "architectures": ["XForCausalLM"]}}
    made = []
    for name, changes in refused.items():
        folder = root / f"refused-{name.replace(' ', '-')}"
        if not folder.exists():
            write_model(folder, texts, **changes)
        made.append(folder.name)
    no_tokenizer = root / "refused-no-tokenizer"
    if not no_tokenizer.exists():
        write_model(no_tokenizer, texts)
        (no_tokenizer / "tokenizer.json").unlink()
    made.append(no_tokenizer.name)
    try:
        entries = {m.path.name: m for m in console.models(refresh=True)}
        for name in made:
            entry = entries[name]
            assert not entry.loadable
            assert_chinese(entry.reason, entry.row("zh")[-1])
            assert entry.row("en")[-1] == entry.reason
            assert entry.label_in("zh") == f"⚠ {name}：无法加载" and entry.label == f"⚠ {name}: not loadable"
            errors = cb.check_form(form_values(console, model__path=entry.name), console).errors
            assert_chinese(errors["model.path"], problem_text(errors["model.path"], "zh"))
        assert "不支持 DeepseekV3ForCausalLM" in entries["refused-unsupported-architecture"].row("zh")[-1]
        good = entries["tiny"]  # the picker's entry of a loadable model
        assert "ctx 512" in good.label and "上下文 512" in good.label_in("zh") and english_words(good.label_in("zh").removeprefix("tiny")) == []
    finally:
        import shutil
        for name in made:
            shutil.rmtree(root / name)
        console.models(refresh=True)


def test_a_run_that_does_not_fit_is_refused_in_chinese_with_what_to_change(console, fake_launcher):
    huge = form_values(console, train__micro_batch_size=2_000_000, data__max_seq_len=512, method="full")
    english = cb.start(huge, console).message
    chinese = cb.start(huge, console, lang="zh").message
    assert fake_launcher.launched == []
    assert english.startswith("not started: the memory estimate (") and "To fit:" in english
    assert chinese.startswith("not started: 内存估算（")  # the prefix is the action's (action_text)
    from app.i18n import Said, action_text
    shown = action_text(Said("act.warn", message=chinese), "zh")  # as the Train tab shows it
    assert shown.startswith("⚠ 未开始：内存估算（") and english_words(shown) == []
    for change in ("full → lora", "train.micro_batch_size 2000000 → 1000000", "recompute.policy full",
                   "data.max_seq_len 512 → 256"):
        assert change in shown, change
    assert [f for f in facts(english) if f not in shown] == []


def test_the_dry_run_result_reads_in_chinese(console):
    def runner(argv, **kwargs):
        return types.SimpleNamespace(returncode=0, stderr="", stdout='{"peak_mem_mb": 812.5, "steps": 2}\n')

    _, shown = cb.dry_run(form_values(console), console, runner=runner, lang="zh")
    plain = re.sub(r"<[^>]+>", "", shown)
    assert plain.startswith("实测每个 worker 812 MB（2 个训练步和一个评估批，") and "估算" in plain
    assert english_words(plain) == []
    _, refused = cb.dry_run(form_values(console, train__warmup_steps=10_000), console, lang="zh")
    assert "试运行失败：请先修正列出的问题" in refused
    from core.spec.errors import RECORDS_ENV
    from core.spec.messages import Message
    sent = {}

    def refusing(argv, **kwargs):
        sent.update(kwargs["env"])
        return types.SimpleNamespace(returncode=1, stdout="", stderr=error_lines(Message(
            "problem.at_key", setting="lora.target_modules", reason=Message("field.not_empty"))))

    _, failed = cb.dry_run(form_values(console), console, lang="zh", runner=refusing)
    assert "试运行失败：lora.target_modules：不能为空" in failed and sent[RECORDS_ENV] == "1"
    _, older = cb.dry_run(form_values(console), console, lang="zh", runner=lambda argv, **kw: types.SimpleNamespace(
        returncode=1, stdout="", stderr="error: lora.target_modules: must not be empty\n"))
    assert "试运行失败：lora.target_modules: must not be empty" in older  # no record: the English as it is
    _, en = cb.dry_run(form_values(console), console, runner=runner)
    assert "measured <b" in en and "2 training steps and one evaluation batch" in en


def _run(console, name: str, finished: bool = True) -> RunDir:
    run = RunDir.create(console.runs_dir, f"20261201-09000{name[-1]}_tiny_lora-r8_fp32_dp1_{name}",
                        Config().with_updates({"train.max_steps": 4, "train.warmup_steps": 1}).to_yaml())
    run.write_status(state="starting")
    run.write_status(state="running", step=0, total_steps=4, rank_count=1)
    if not finished:
        return run
    run.write_status(state="finished", reason="reached 4 steps", step=4, ended_at=time.time(),
                     final=FinalFigures(best_val_ppl=4.0, tokens_per_s=100.0, peak_mem_mb=70.0, wall_s=6.0, steps=4))
    return run


def test_runs_resume_and_delete_messages_read_in_chinese(console):
    a, b = _run(console, "run1"), _run(console, "run2", finished=False)
    zh = {
        "resume none": runs_cb.resume(console, [], lang="zh")[1],
        "resume finished": runs_cb.resume(console, [a.run_id], lang="zh")[1],
        "delete none": runs_cb.delete_check(console, [], lang="zh")[1],
        "delete question": runs_cb.delete_check(console, [a.run_id], lang="zh")[1],
    }
    zh["delete running"] = runs_cb.delete(console, [b.run_id], lang="zh")
    zh["deleted"] = runs_cb.delete(console, [a.run_id], lang="zh")
    for what, message in zh.items():
        assert english_words(message) == [], (what, message)
    assert zh["resume finished"] == f"⚠ {a.run_id} 的状态为已完成；只有已停止或失败的运行可以恢复"
    assert zh["delete question"].startswith(f"删除 `{a.run_id}` 及其全部检查点")
    assert zh["delete running"] == f"⚠ {b.run_id} 的状态为运行中：请先停止再删除"
    assert zh["deleted"].startswith(f"已于 ") and zh["deleted"].endswith(f"删除 {a.run_id}") and not a.path.exists()
    assert runs_cb.resume(console, [b.run_id])[1] == f"⚠ {b.run_id} is running; only a stopped or failed run can be resumed"


def test_english_is_left_as_core_wrote_it():
    from core.data.files import at, line_of
    from core.spec.messages import Message

    message = at(line_of("/data/x.jsonl", 5), Message("data.invalid_json_line", json_says="Expecting value", column=32))
    assert message == "/data/x.jsonl line 5: invalid JSON (Expecting value at column 32); each line must be one JSON object"
    assert problem_text(message, "en") == message and problem_text(None, "zh") == ""
    # Python's json module's words as it said them, quoted inside the 中文 sentence
    assert problem_text(message, "zh") == "/data/x.jsonl 第 5 行：JSON 无效（“Expecting value”，第 32 列）；每行必须是一个 JSON 对象"
    assert text("runs.msg.deleted", "en").format(runs="r", time="t") == "deleted r at t"


@pytest.mark.parametrize("changes", [{}, {"train.micro_batch_size": 2_000_000}, {"recompute.policy": "full"},
                                     {"precision.amp_level": "O1", "precision.compute_dtype": "float16"},
                                     {"parallel.data_parallel": 2}, {"train.grad_accum_steps": 2}])
def test_every_note_of_the_memory_estimate_reads_in_chinese(console, changes):
    config = cb.check_form({**form_values(console), **changes}, console, data=False).config
    assert config is not None
    estimate, _ = cb.memory_estimate(config, console)
    from app.i18n import memory_note
    for note in estimate.notes:
        assert_chinese(note, memory_note(note, "zh"))
    shown = re.sub(r"<[^>]+>", " ", cb.estimate_table(estimate, None, "zh"))
    assert english_words(html.unescape(shown)) == []


def test_the_runs_comparison_reads_in_chinese(console):
    """The configs side by side and the result deltas: the words in 中文; keys and values as code."""
    a, b = _run(console, "run1"), _run(console, "run2")
    b.write_status(state="finished", parent_run=a.run_id, reason="reached 4 steps", step=4, ended_at=time.time(),
                   final=FinalFigures(best_val_ppl=3.0, tokens_per_s=90.0, peak_mem_mb=75.0, wall_s=6.0, steps=4))
    shown = runs_cb.config_diff_html(console, [b.run_id, a.run_id], lang="zh")
    assert "<th>设置</th>" in shown and "对比 <code>" in shown and "改动的设置" in shown
    outside_code = html.unescape(re.sub(r"<[^>]+>", " ", re.sub(r"<code>.*?</code>", " ", shown)))
    assert english_words(outside_code) == []
    assert "<th>setting</th>" in runs_cb.config_diff_html(console, [b.run_id, a.run_id])
    assert english_words(re.sub(r"<[^>]+>", " ", runs_cb.config_diff_html(console, [], lang="zh"))) == []


def test_uploads_refused_read_in_chinese(console, tmp_path):
    from app.data.datasets import UploadError
    from app.i18n import action_text

    big = tmp_path / "big.jsonl"
    big.write_bytes(b"x" * (console.settings.max_upload_bytes + 1))
    script = tmp_path / "tool.sh"
    script.write_text("echo hi")
    broken = tmp_path / "data.zip"
    broken.write_bytes(b"not a zip")
    for path in (big, script, broken):
        with pytest.raises(UploadError) as err:
            data_callbacks.upload(str(path), path.name, console)
        english = str(err.value)  # the console's own words (upload.*), rendered as the Train tab's upload box does
        assert err.value.said == english and err.value.said.key.startswith("upload.")
        assert_chinese(english, action_text(err.value.said, "zh"))


def test_the_monitors_answers_read_in_chinese(console):
    from app.tabs import monitor_callbacks
    from app.i18n import Said, action_text

    run = _run(console, "run1", finished=False)
    answers = {"sent": monitor_callbacks.apply_early_stopping(console, run.run_id, True, "val_ppl", 7.0, 0.01),
               "invalid": monitor_callbacks.apply_early_stopping(console, run.run_id, True, "val_loss", 0, 0.0),
               "none": monitor_callbacks.apply_early_stopping(console, None, True, "val_loss", 3, 0.0),
               "no such run": monitor_callbacks.stop(console, "20261201-000000_nope", graceful=True)}
    run.write_status(state="finished", reason="reached 4 steps", step=4, ended_at=time.time())
    answers["over"] = monitor_callbacks.apply_early_stopping(console, run.run_id, True, "val_loss", 3, 0.0)
    answers["ready"] = Said("act.ready", file="x_peft.zip")
    from core.spec.messages import Message
    answers["export failed"] = Said("act.export_failed", problem=by_record(Message("data.file_not_found", file="/r/x")))
    for what, english in answers.items():
        chinese = action_text(english, "zh")
        assert_chinese(english, chinese)
    assert action_text(answers["sent"], "zh").startswith("已发送给 worker（请求 ")
    assert "early_stopping.patience 7" in action_text(answers["sent"], "zh")


# ---- the rarer config.json checks (core.spec.model_args, core.spec.families) and the tokenizer's errors -----------

LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama"}
PHI3 = {"architectures": ["Phi3ForCausalLM"], "model_type": "phi3"}
MISTRAL = {"architectures": ["MistralForCausalLM"], "model_type": "mistral"}
GEMMA3 = {"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text"}
MIXTRAL = {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral"}
QWEN3_MOE = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "num_experts": 2,
             "num_experts_per_tok": 1, "moe_intermediate_size": 8}


def _config(**changes):
    def change(folder: Path) -> None:
        path = folder / "config.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), **changes}), encoding="utf-8")
    return change


def _file(name: str, content: str):
    def change(folder: Path) -> None:
        (folder / name).write_text(content, encoding="utf-8")
    return change


def _pickle_only(folder: Path) -> None:
    (folder / "model.safetensors").unlink()
    (folder / "pytorch_model.bin").write_bytes(b"x")


MODEL_CONFIG_MISTAKES = {  # what a config.json (or the weights beside it) says -> the words of core's message
    "not a JSON object": (_file("config.json", "[1]"), "must be a JSON object"),
    "invalid JSON": (_file("config.json", '{"vocab_size": 3,}'), "not valid JSON (Expecting property name"),
    "not a positive integer": (_config(hidden_size=0), "hidden_size: must be a positive integer, got 0"),
    "kv heads do not divide": (_config(num_key_value_heads=3), "3 must divide num_attention_heads=4"),
    "unknown activation": (_config(hidden_act="swish2"), "hidden_act: 'swish2' is not supported; supported: silu"),
    "partial rotary factor": (_config(partial_rotary_factor=2), "partial_rotary_factor: must be in (0, 1], got 2.0"),
    "rope type of the family": (_config(rope_scaling={"rope_type": "yarn", "factor": 2.0}),
                                "'yarn' is not supported for llama; supported: default, linear, llama3"),
    "llama3 rope without its keys": (_config(rope_scaling={"rope_type": "llama3", "factor": 2.0}),
                                     "rope_scaling.low_freq_factor: required for rope_type 'llama3'"),
    "linear rope without factor": (_config(rope_scaling={"rope_type": "linear"}),
                                   "rope_scaling.factor: required for rope_type 'linear'"),
    "longrope factors not a list": (_config(**PHI3, rope_scaling={"type": "longrope", "short_factor": [1.0],
                                                                  "long_factor": "x"}),
                                    "rope_scaling.long_factor: required for rope_type 'longrope': a list of positive"),
    "longrope original length": (_config(**PHI3, original_max_position_embeddings=1,
                                         rope_scaling={"type": "longrope", "short_factor": [1.0, 1.0],
                                                       "long_factor": [1.0, 1.0]}),
                                 "original_max_position_embeddings: required for rope_type 'longrope' (an integer > 1)"),
    "longrope factor count": (_config(**PHI3, original_max_position_embeddings=256,
                                      rope_scaling={"type": "longrope", "short_factor": [1.0], "long_factor": [1.0]}),
                              "rope_scaling.short_factor: must list one factor per rotary frequency (2 = "),
    "sliding layers' rope": (_config(**GEMMA3, sliding_window=4, rope_parameters={
        "full_attention": {"rope_type": "default", "rope_theta": 1e6},
        "sliding_attention": {"rope_type": "linear", "factor": 2.0}}),
        "rope_parameters.sliding_attention.rope_type: only 'default' is supported for sliding layers"),
    "wrapped model without text_config": (_config(architectures=["Gemma3ForConditionalGeneration"], model_type="gemma3"),
                                          "text_config: Gemma3ForConditionalGeneration keeps its language model's"),
    "sliding window": (_config(**MISTRAL, sliding_window=-4), "sliding_window: must be a positive integer or null, got -4"),
    "layer types": (_config(**MISTRAL, sliding_window=4, layer_types=["full_attention"]),
                    "layer_types: must list 'full_attention' or 'sliding_attention' for each of the 2 layers"),
    "gemma score scalar": (_config(architectures=["Gemma2ForCausalLM"], model_type="gemma2", query_pre_attn_scalar=-1),
                           "query_pre_attn_scalar: must be a positive number or null, got -1"),
    "bidirectional gemma": (_config(**GEMMA3, use_bidirectional_attention=True),
                            "use_bidirectional_attention: bidirectional (encoder-style, EmbeddingGemma) attention"),
    "experts missing": (_config(**MIXTRAL), "num_local_experts: missing (the number of experts per MoE layer)"),
    "experts not positive": (_config(**MIXTRAL, num_local_experts=0), "num_local_experts: must be a positive integer, got 0"),
    "top-k above the experts": (_config(**MIXTRAL, num_local_experts=2, num_experts_per_tok=3),
                                "num_experts_per_tok: 3 exceeds the 2 experts"),
    "negative aux loss": (_config(**MIXTRAL, num_local_experts=2, router_aux_loss_coef=-1),
                          "router_aux_loss_coef: must be a number >= 0, got -1"),
    "router jitter": (_config(**MIXTRAL, num_local_experts=2, router_jitter_noise=0.1),
                      "router_jitter_noise: 0.1 is not supported (only 0"),
    "qwen3-moe sliding window": (_config(**QWEN3_MOE, use_sliding_window=True, sliding_window=4),
                                 "use_sliding_window: true is not supported for Qwen3-MoE"),
    "qwen3-moe dense layers": (_config(**QWEN3_MOE, mlp_only_layers=[5]),
                               "mlp_only_layers: must be a list of layer indices in [0, 2), got [5]"),
    "pickle weights only": (_pickle_only, "only pickle weights found (pytorch_model.bin)"),
    "index without weight_map": (_file("model.safetensors.index.json", "{}"),
                                 "not a valid safetensors index (needs a 'weight_map'): 'weight_map'"),
    "index with bad JSON": (_file("model.safetensors.index.json", "{"), "not a valid safetensors index"),
    "shard missing": (_file("model.safetensors.index.json", json.dumps({"weight_map": {"w": "model-1.safetensors"}})),
                      "shard model-1.safetensors is listed but missing from"),
}


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory) -> Path:
    """A loadable Llama-shaped folder, copied and spoilt by each test below."""
    return write_model(tmp_path_factory.mktemp("models") / "tiny", ["a b c"] * 8)


def _spoilt(tiny_folder: Path, tmp_path: Path, change) -> Path:
    import shutil
    folder = tmp_path / "model"
    shutil.copytree(tiny_folder, folder)
    change(folder)
    return folder


@pytest.mark.parametrize("mistake", list(MODEL_CONFIG_MISTAKES))
def test_a_rare_model_config_check_reads_in_chinese_in_the_model_table(tiny_folder, tmp_path, mistake):
    change, words = MODEL_CONFIG_MISTAKES[mistake]
    entry = catalog.describe(_spoilt(tiny_folder, tmp_path, change))  # what the console's model table runs
    assert not entry.loadable and words in entry.reason, entry.reason
    assert_chinese(entry.reason, entry.row("zh")[-1])
    assert entry.row("en")[-1] == entry.reason


CHAT = [{"role": "user", "content": "hi"}]
TEMPLATE_REFUSAL = "Conversation roles must alternate user/assistant/user/assistant/..."


def _tokenizer_config(**changes):
    def change(folder: Path) -> None:
        path = folder / "tokenizer_config.json"
        config = {**json.loads(path.read_text()), **changes}
        path.write_text(json.dumps({k: v for k, v in config.items() if v is not None}), encoding="utf-8")
    return change


TOKENIZER_MISTAKES = {  # a tokenizer file's mistake -> the words of core.data.tokenizer's message
    "tokenizer_config.json not JSON": (_file("tokenizer_config.json", "{"), "tokenizer_config.json: cannot read JSON"),
    "tokenizer_config.json not an object": (_file("tokenizer_config.json", "[1]"), "expected a JSON object, got list"),
    "tokenizer.json without a model": (_file("tokenizer.json", "{}"), "tokenizer.json: not a valid tokenizers file"),
    "tokenizer.json cut short": (_file("tokenizer.json", '{"version": '), "tokenizer.json: not a valid tokenizers file"),
    "special token not a string": (_tokenizer_config(bos_token=5), "'bos_token': a token must be a string"),
    "added token not an object": (_tokenizer_config(added_tokens_decoder={"0": 5}),
                                  "'added_tokens_decoder.0': expected an object with a string 'content', got 5"),
    "generation eos not an int": (_file("generation_config.json", json.dumps({"eos_token_id": "x"})),
                                  "'eos_token_id': expected an int or a list of ints, got 'x'"),
    "template entry without a name": (_tokenizer_config(chat_template=[{"name": 1}]),
                                      "'chat_template[0]': expected an object with string 'name' and 'template'"),
    "template of a wrong type": (_tokenizer_config(chat_template=5), "'chat_template': expected a string or a list"),
    "no chat template": (_tokenizer_config(chat_template=None), "the model has no chat template"),
    "no default template": (_tokenizer_config(chat_template=[{"name": "x", "template": "a"}]),
                            "several chat templates but none named 'default' (found ['x'])"),
    "template refuses the messages": (_tokenizer_config(chat_template=f"{{{{ raise_exception('{TEMPLATE_REFUSAL}') }}}}"),
                                      "the chat template refused these messages: " + TEMPLATE_REFUSAL),
    "template reads an undefined name": (_tokenizer_config(chat_template="{{ foo.bar }}"),
                                         "chat template failed: 'foo' is undefined"),
    "template reads a missing attribute": (_tokenizer_config(chat_template="{{ messages[0].x.y }}"),
                                           "chat template failed: 'dict object' has no attribute 'x'"),
    "template not closed": (_tokenizer_config(chat_template="{% for m in messages %}x"),
                            "chat template syntax error at line 1: Unexpected end of template. Jinja was looking"),
    "template unknown tag": (_tokenizer_config(chat_template="{{ x }}\n{% endif %}"),
                             "chat template syntax error at line 2: Encountered unknown tag 'endif'."),
    "template unexpected token": (_tokenizer_config(chat_template="{{ x ) }}"),
                                  "chat template syntax error at line 1: unexpected ')'"),
}


@pytest.mark.parametrize("mistake", list(TOKENIZER_MISTAKES))
def test_a_tokenizer_error_reads_in_chinese_with_its_facts(tiny_folder, tmp_path, mistake):
    from core.data.tokenizer import Tokenizer, TokenizerError
    change, words = TOKENIZER_MISTAKES[mistake]
    folder = _spoilt(tiny_folder, tmp_path, change)
    with pytest.raises(TokenizerError) as raised:  # what the data preview and the data check run (core.data.pipeline)
        Tokenizer.from_dir(folder).apply_chat_template(CHAT)
    english = str(raised.value)
    assert words in english, english
    assert problem_text(raised.value, "en") == english
    chinese = problem_text(raised.value, "zh")  # the error as the console gets it: its message by id
    if mistake == "template refuses the messages":  # the template's own words stay as its author wrote them
        assert chinese.endswith("：对话模板拒绝了这些消息：" + TEMPLATE_REFUSAL), chinese
        assert english_words(chinese) == english_words(TEMPLATE_REFUSAL)
        return
    assert_chinese(english, chinese)
    assert data_preview_error(raised.value, "zh") == f'<div class="mt-error">{html.escape(chinese)}</div>'


def data_preview_error(message: str | BaseException, lang: str) -> str:
    from app.data.data_preview import error_html
    return error_html(message, lang)


def test_a_path_glued_to_a_full_width_colon_hides_no_english_after_it():
    assert english_words("/m/tokenizer_config.json：Conversation roles must alternate") == [
        "Conversation", "roles", "must", "alternate"]
    assert english_words("/m/config.json：必须是 JSON 对象。") == []
    assert english_words("配置是各节（run:、model:、train:……）的映射") == []


# every rule across a config's fields (core.spec.config, message ids config.*): the updates that break it
CROSS_FIELD_MISTAKES = {
    "config.resume_and_fork": {"run.resume": "r1", "run.fork_from": "r0/checkpoints/step-2"},
    "config.steps_or_epochs": {"train.max_steps": 10, "train.epochs": 2},
    "config.below_max_steps": {"train.max_steps": 10, "train.warmup_steps": 10},
    "config.packing_and_grouping": {"data.packing": True, "data.group_by_length": True},
    "config.score_needs_test": {"early_stopping.monitor": "rougeL", "eval.downstream": False},
    "config.no_validation": {"data.validation_fraction": 0, "data.validation_file": None},
    "config.cpu_bf16_compute": {"precision.amp_level": "O2", "precision.compute_dtype": "bfloat16"},
    "config.cpu_bf16_full": {"model.dtype": "bfloat16", "method": "full"},
    "config.bf16_full": {"model.dtype": "bfloat16", "method": "full", "parallel.device": "gpu"},
    "config.lora_16bit_amp": {"model.dtype": "bfloat16", "method": "lora", "precision.amp_level": "O2"},
    "config.optimizer_shard": {"parallel.optimizer_shard": True},
    "config.slurm_workers": {"launch.backend": "slurm", "launch.nodes": 2, "launch.workers_per_node": 2,
                             "parallel.data_parallel": 2},
    "config.reward_accuracy_sft": {"early_stopping.monitor": "reward_accuracy"},
    "config.no_ppl_to_watch": {"train.objective": "dpo", "early_stopping.monitor": "val_ppl"},
    "config.packing_preference": {"train.objective": "dpo", "early_stopping.monitor": "val_loss", "data.packing": True},
    "config.router_loss_preference": {"train.objective": "dpo", "early_stopping.monitor": "val_loss",
                                      "train.router_aux_loss": True},
    "config.adapter_off_full": {"train.objective": "dpo", "early_stopping.monitor": "val_loss", "method": "full",
                                "preference.reference": "adapter_off"},
    "config.monitor_not_for_objective": {"train.objective": "grpo", "early_stopping.monitor": "val_loss"},
    "config.grpo_epsilon_high": {"train.objective": "grpo", "early_stopping.monitor": "val_reward",
                                 "grpo.epsilon": 0.2, "grpo.epsilon_high": 0.1},
    "config.grpo_too_long": {"train.objective": "grpo", "early_stopping.monitor": "val_reward",
                             "grpo.max_prompt_len": 250, "grpo.max_new_tokens": 64},
    "config.grpo_temperature_16bit": {"train.objective": "grpo", "early_stopping.monitor": "val_reward",
                                      "model.dtype": "bfloat16", "grpo.temperature": 0.7},
}


def test_every_rule_across_fields_is_said_by_its_id_in_chinese_with_its_facts():
    """Issue 29 item 2: a config's cross-field rules are core messages by id (no pattern over their
    English): each one made by the config's own check, then said as the form's widget, the box above
    Start and a loaded file's error say it. Every config.* id of the catalogue is made here."""
    from core.spec.config import Config
    from core.spec.messages import CATALOGUE, Message
    from app.tabs import form

    made = set()
    for key, updates in CROSS_FIELD_MISTAKES.items():
        with pytest.raises(ConfigError) as info:
            Config().with_updates(updates)
        err = info.value
        reasons = {p.reason.key: p for p in err.problems if isinstance(p.reason, Message)}
        assert key in reasons, (key, str(err))
        made.add(key)
        widget_errors = form.errors_by_widget(err.errors)
        for english in [*widget_errors.values(), *err.said]:
            assert_chinese(english, problem_text(english, "zh"))
        assert problem_text(err, "zh") == "\n".join(problem_text(line, "zh") for line in err.said)
        assert problem_text(err, "en") == str(err)
        assert_chinese(str(err), problem_text(err, "zh"))
    # config.invalid_yaml: PyYAML's error that has no place (none of its scanner's or parser's; kept as a fallback)
    assert made == {key for key in CATALOGUE if key.startswith("config.")} - set(FILE_MISTAKES) - {
        "config.empty_file", "config.invalid_yaml"}


# a config file that cannot be read: what is in it, or the override given with it
FILE_MISTAKES = {
    "config.unreadable": ("folder", None, ()),  # a folder where the file should be
    "config.not_utf8": ("latin1.yaml", b"train:\n  max_steps: 5 # caf\xe9\n", ()),
    "config.invalid_yaml_line": ("bad.yaml", "train:\n  max_steps: [1,\n", ()),
    "config.yaml_character": ("bell.yaml", "train:\n  max_steps: 5\x07\n", ()),  # PyYAML's reader: no mark
    "config.not_sections": ("list.yaml", "- 1\n- 2\n", ()),
    "config.bad_override": ("good.yaml", "train:\n  max_steps: 5\n", ("lr",)),
    "config.bad_base": ("based.yaml", "base: 3\n", ()),
    "config.base_cycle": ("a.yaml", "base: b.yaml\n", ()),
    "config.base_missing": ("orphan.yaml", "base: nowhere.yaml\n", ()),
}


def test_a_config_file_that_cannot_be_read_is_said_by_its_id_in_chinese(console, tmp_path):
    """Each way a config file cannot be read (core.spec.config, ids config.*), by the loader itself,
    in 中文 with its facts (the file, the line, the value); PyYAML's own reason quoted as PyYAML said it."""
    from core.spec.config import load_config
    (tmp_path / "b.yaml").write_text("base: a.yaml\n", encoding="utf-8")
    (tmp_path / "folder").mkdir()
    for key, (name, content, overrides) in FILE_MISTAKES.items():
        path = tmp_path / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        elif content is not None:
            path.write_text(content, encoding="utf-8")
        with pytest.raises(ConfigError) as info:
            load_config(path, overrides)
        err = info.value
        assert any(getattr(line, "key", None) == key or getattr(getattr(line, "params", {}).get("reason"), "key",
                                                                 None) == key for line in err.said), (key, str(err))
        assert_chinese(str(err), problem_text(err, "zh"))
    values, message = cb.load_config_values(cb.load_yaml, str(tmp_path / "bad.yaml"), console, "zh")
    assert values == {} and english_words(message) == []
    assert "bad.yaml 第 3 行：YAML 无效：“expected the node content, but found '<stream end>'”" in message
    _, message = cb.load_config_values(cb.load_yaml, str(tmp_path / "bell.yaml"), console, "en")
    assert "bell.yaml: line 2: invalid YAML: the control character #x0007 is not allowed" in message
    empty = tmp_path / "empty.yaml"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        cb.load_yaml(str(empty), console)
    assert info.value.said[0].key == "config.empty_file"
    assert_chinese(str(info.value), problem_text(info.value, "zh"))


def test_a_checkpoint_whose_state_is_not_json_is_said_by_its_id_in_process_and_from_text(tmp_path):
    """A checkpoint's trainer_state.json that is not JSON (core.engine.export): by its id where
    the error is at hand, and by the catalogue's template where only its text came (an export's
    failure, from its own process): the same 中文 either way, with no pattern written for it."""
    from core.engine.export import read_state
    from core.spec.errors import CheckpointError
    folder = tmp_path / "step-4"
    folder.mkdir()
    (folder / "trainer_state.json").write_text("{step: 4", encoding="utf-8")
    with pytest.raises(CheckpointError) as raised:
        read_state(folder)
    err = raised.value
    assert str(err).endswith("trainer_state.json: not valid JSON (Expecting property name enclosed in double quotes: "
                             "line 1 column 2 (char 1)).")
    chinese = problem_text(err, "zh")
    assert_chinese(str(err), chinese)
    assert problem_text(by_record(err.message), "zh") == chinese  # its record, as another process reports it
    assert problem_text(str(err), "zh") == str(err)  # the text alone: as it is
    assert "不是有效的 JSON（“Expecting property name enclosed in double quotes: line 1 column 2 (char 1)”）" in chinese


def test_the_data_statistics_warnings_are_said_by_their_ids_also_from_the_cache(tmp_path):
    """The statistics' warnings beside the figures (core.spec.stats: a field the format ignores,
    over-long records, chunked texts, dropped media, identical pairs, preference data trained as SFT)
    were English in the 中文 preview. They are core messages; once the statistics come back from
    their cache file (JSON), the notes and the records' places are their records again (core.spec.codec
    encode; a cache written before the records is shown as it is)."""
    import json as json_

    from core.data.files import read_data_file
    from core.data.formats import Columns
    from core.data.pairs import sft_view
    from core.spec.codec import build, encode
    from core.spec.messages import Message
    from core.spec.stats import DataStats, PreferenceSplitStats, PreferenceStats, SplitStats

    from core.spec.places import Where, line_of

    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("\n".join(json_.dumps({"prompt": f"q{i}", "chosen": "yes", "rejected": "no"}) for i in range(3))
                     + "\n", encoding="utf-8")
    _, note = sft_view(read_data_file(pairs), Columns({}))
    split = dict(format="alpaca", samples=27, truncated=2, labelled_tokens=500, min_length=3, mean_length=40.0,
                 max_length=900, histogram_edges=[0, 1000], histogram_counts=[30], records=30)
    train = SplitStats(**split, ignored_fields={"history": 12}, overlong_policy="truncate", overlong_records=2,
                       overlong_listed=[[line_of("data/a.jsonl", 160), 463], [line_of("data/a.jsonl", 7), 300]],
                       chunked=1, media_dropped=4)
    validation = SplitStats(**split, overlong_policy="skip", overlong_records=1,
                            overlong_listed=[[line_of("data/b.jsonl", 3), 301]])
    stats = DataStats(train, validation, "file", 0, 0, seq_len=256, max_seq_len=256, notes=[note])
    pair_at = Where("data.at_record", file="data/p.json", prefix="", index=3)
    preference = PreferenceStats(PreferenceSplitStats("pairs", 10, 2, 1, 0, 5.0, 9, 4.0, 8, records=13,
                                                      overlong_records=1, overlong_listed=[[pair_at, 2199]]),
                                 PreferenceSplitStats("pairs", 2, 0, 0, 0, 5.0, 9, 4.0, 8), max_seq_len=512)
    said = [*stats.warnings(), *preference.warnings()]
    assert {w.key for w in said} == {"stats.ignored_field", "stats.overlong_truncated", "stats.overlong_skipped",
                                     "stats.chunked", "stats.media_dropped", "stats.identical_pairs",
                                     "stats.pairs_as_sft", "stats.pairs_overlong_truncated"}
    assert "train: 2 of 30 records are longer than max_seq_len 256 tokens and were truncated" in said[1]
    assert "data/p.json record [3] (2199 tokens)" in said[-1]
    for warning in said:
        assert_chinese(str(warning), problem_text(warning, "zh"))
    for kept in (stats, preference):  # the cache (JSON) keeps the places and the notes as records
        cached = build(type(kept), json_.loads(json_.dumps(encode(kept))))
        again = cached.warnings()
        assert [str(w) for w in again] == [str(w) for w in kept.warnings()]
        assert [w.to_json() for w in again] == [w.to_json() for w in kept.warnings()]
        assert [problem_text(w, "zh") for w in again] == [problem_text(w, "zh") for w in kept.warnings()]
    assert isinstance(again[-1], Message) and again[-1].key == "stats.pairs_overlong_truncated"
    # a cache written before the records: its places and notes as text, shown as they are
    older = encode(stats)
    older["notes"] = [str(note)]
    older["train"]["overlong_listed"] = [["data/a.jsonl line 160", 463]]
    shown = [problem_text(w, "zh") for w in build(DataStats, older).warnings()]
    assert "data/a.jsonl line 160（463 个 token）" in shown[1] and shown[-1] == str(note)


def test_a_listing_of_records_is_said_item_by_item_in_each_place_kind_from_message_text_and_cache():
    """The over-long records listed by data.overlong: error and the statistics (core.spec.stats.listing)
    were put into 中文 by six substitutions over the English; each item is now a message whose place is
    a core.spec.places.Where (line, row index, record, catalogue entry), kept as its record when it goes
    to a cache or another process (a text without one is shown as it is)."""
    from core.data.overlong import overlong_error
    from core.spec.errors import said_of
    from core.spec.messages import Message
    from core.spec.places import Where, line_of

    places = [line_of("data/a.jsonl", 3), Where("data.at_row", file="data/b.parquet", row=4),
              Where("data.at_record", file="data/c.json", prefix="data", index=2),
              Where("data.at_entry", file="data/cat/dataset_info.json", name="'kites'")]
    records = [(places[n % 4], 300 + n) for n in range(23)]
    error = overlong_error(records, 256)
    english = str(error)
    assert "data/b.parquet row index 4 (301 tokens)" in english and english.count(" tokens)") == 20
    assert "and 3 more. Raise data.max_seq_len" in english
    zh = problem_text(error, "zh")
    assert english_words(zh) == ["error"]  # data.overlong's value, as the config file writes it
    for place in ("data/a.jsonl 第 3 行（300 个 token）", "data/b.parquet 第 4 行（行号从 0 起）（301 个 token）",
                  "data/c.json 记录 data[2]（302 个 token）", "data/cat/dataset_info.json：数据集 'kites'（303 个 token）",
                  "另有 3 条"):
        assert place in zh, place
    # a worker's reason (status.json), another process's error: the record keeps every place's kind
    again = by_record(said_of(error))
    assert again.to_json() == said_of(error).to_json() and problem_text(again, "zh") == zh
    assert again.params["listed"].key == "stats.listing_more"
    assert problem_text(english, "zh") == english  # the text alone: as it is
    # the statistics' cache keeps each place as its record
    assert [type(Where.from_record(p.to_record())) for p in places] == [type(p) for p in places]
    assert [Where.from_record(p.to_record()).params for p in places] == [p.params for p in places]
    assert Where.from_record("data/a.jsonl line 3") == "data/a.jsonl line 3"  # a text: as it is
    assert not isinstance(Where.from_record("data/a.jsonl line 3"), Where)
    assert Where.from_record({"place": "run.nope", "params": {}}) == {"place": "run.nope", "params": {}}
    from core.spec.stats import listing
    cached = listing([(p.to_record(), n) for p, n in records], 23)
    assert problem_text(cached, "zh") == problem_text(listing(records, 23), "zh") and "另有 3 条" in problem_text(cached, "zh")
    older = problem_text(listing([(str(p), n) for p, n in records], 23), "zh")  # a cache of texts: as they are
    assert "data/a.jsonl line 3（300 个 token）" in older
