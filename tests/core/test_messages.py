"""core.spec.messages: why a run ended is said by id and parameters (issue 29 item 2); the English is
the catalogue's, the console renders the id in the page's language (app.i18n.MESSAGES_ZH)."""
from __future__ import annotations

import copy
import json
import pickle
import string

import pytest

from core.run.records import Status
from core.run.rundir import RunDir
from core.spec.catalogue import ENTRIES
from core.spec.config import Config
from core.spec.errors import RECORD_MARK, RECORDS_ENV, from_record, read_report, record_of, report, said_of
from core.spec.messages import CATALOGUE, Message, placeholders

SAMPLE = {"steps": 20, "monitor": "val_loss", "min_delta": 0.0, "patience": 3, "best": "1.2345", "step": 40,
          "seconds": "120", "checkpoint": "step-4", "id": "41", "nodes": "node1, node2", "state": "FAILED",
          "code": "1:0", "reason": Message("run.cancelled"), "note": Message("run.no_resumable"),
          "job": Message("slurm.job_on", id="41", nodes="node1, node2"), "advice": Message("advice.oom"),
          "objective": "dpo", "level": "O2", "dtype": "bfloat16", "device": "gpu", "why": Message("path.gpu_composed"), "tokens": 1024,
          "workers": 2, "mb": "1,234", "needed": "2,468", "has": "2,000",
          "needs": "softcap, window", "job_id": "41", "who": Message("rank.on_node", who=Message("rank.rank", rank=1), node="node2"),
          "signal": "SIGKILL", "evidence": "oom-kill in dmesg", "rank": 1, "node": "node2", "age": "130",
          "timeout": "120", "phase": "train", "lines": "Traceback (most recent call last):\nRuntimeError: boom",
          "epochs": "null", "per_node": 1, "data_parallel": 4, "setting": "train.warmup_steps", "value": "10",
          "source": "configs/demo_lora.yaml", "file": "configs/bad.yaml", "os_says": "Permission denied",
          "codec_says": "invalid start byte",
          "yaml_says": "mapping values are not allowed here", "line": 3, "py_type": "list", "text": "'lr'",
          "cycle": "a.yaml -> b.yaml -> a.yaml", "character": "#x0007"}
# area A (the data):
SAMPLE.update({"samples": 27, "skipped": 3, "policy": "truncate", "prefix": "data", "index": 3, "row": 4, "file_type": "Parquet",
               "reader_says": "Parquet magic bytes not found in footer", "json_says": "Expecting value",
               "column": 2, "json_type": "an array", "keys": "['foo', 'bar']", "count": 3, "columns": 2,
               "header_names": "instruction, output", "csv_says": "new-line character seen in unquoted field",
               "os_error": "Permission denied",
               "duplicates": "['output']", "suffix": "'.xlsx'", "supported": ".jsonl, .json, .csv", "split": "'dev'",
               "split_names": "train_sft, test_sft", "valid_names": "all_assistant, last_assistant",
               "formats": "alpaca: instruction, output", "pairs": "instruction: question, output: answer",
               "found": "['question', 'answer']", "fmt": "alpaca", "required_names": "instruction, output",
               "missing_names": "output", "optional_names": "input, system", "column_shown": "'rejected'",
               "read_names": "input, instruction, output", "field_names": "question, answer", "close": "'answer'",
               "field": "'output'", "needs_fields": "'instruction' and 'output'", "item": "{role, content}",
               "role_tag": "'from'", "content_tag": "'value'", "role": "'bot'", "role_names": "system, user, assistant",
               "max_seq_len": 64, "fraction": 0.01, "records": 20, "batch": 16, "micro": 8, "accum": 2, "world": 1,
               "text_split": "paragraph", "shard": "data-00001-of-00002.arrow",
               "shard_names": "data-00000-of-00002.arrow, data-00001-of-00002.arrow", "missing": 1, "total": 2,
               "split_role": "validation", "depth": 3, "detected": "sharegpt", "record_at": "data/a.jsonl line 3",
               "lacks_names": "instruction", "origin": "configs/demo_lora.yaml", "first_file": "data/a.jsonl",
               "first_fmt": "chat", "got_json": '["hi"]', "first_field": "'messages[1]'", "model": "models/tiny",
               "tool": "'get_weather'", "turn_role": "system",
               "wanted": "preference pairs ('chosen' and 'rejected')", "held_by": "data/a.jsonl",
               "held": "KTO answers (a boolean 'label')", "entry": "data/cat/dataset_info.json: dataset 'demo'",
               "article": "an", "media": "image", "part_type": "'input_file'", "chosen_field": "chosen",
               "record_kind": "a KTO answer (label)", "first_kind": "a preference pair (chosen/rejected)",
               "name": "'demo'", "dataset_names": "alpaca_demo, sharegpt_demo", "url": "tatsu-lab/alpaca",
               "hub_place": "the Hugging Face hub", "folder": "data/cat", "given": "../outside.jsonl",
               "mapping_kind": "column", "files": "data/cat/a.jsonl",
               "items": [Message("stats.listed_record", record_at="data/a.jsonl line 160", tokens=463),
                         Message("stats.listed_record", record_at="data/b.parquet row index 4", tokens=300)],
               "more": 3})
SAMPLE["listed"] = Message("stats.listing_more", items=SAMPLE["items"], more=3)

# area B (the model folder):
SAMPLE.update({"architecture": "DeepseekV3ForCausalLM", "architectures": "LlamaForCausalLM, MistralForCausalLM",
               "classes": "AutoConfig, AutoModelForCausalLM", "count": 3, "experts": 8, "factor": 2.0,
               "size": 10 ** 12, "family": "llama",
               "files": "pytorch_model.bin", "folder": "/models/tiny", "full": "'full_attention'", "half": 32,
               "heads": 32, "kv_heads": 3, "layers": 2, "model_types": "llama, mistral", "name": "DeepSeek-V3",
               "names": "qkv_proj", "projections": "q_proj, k_proj", "py_value": "None", "rope_type": "'llama3'",
               "shard": "model-00001-of-00002.safetensors", "sliding": "'sliding_attention'",
               "supported_names": "silu, swish", "top_k": 3, "where": "/models/tiny/config.json",
               "json_says": "Expecting value: line 1 column 1 (char 0)", "serde_says": "expected value at line 1 column 1",
               "jinja_says": "unexpected ')'", "template_says": "Conversation roles must alternate"})

# area C (a field's own rule, core.run's checks):
SAMPLE.update({"op": ">=", "bound": "8", "range": "(0, 1]", "options": "'cosine', 'linear', 'constant'",
               "trackers": "tensorboard, mlflow, swanlab", "forms": "MM, MM:SS, HH:MM:SS",
               "suggestion": "'cosine'", "re_says": "missing ), unterminated subpattern at position 0",
               "valid_names": "instruction, input, output", "section": "train", "name": "'foo'",
               "column": "''", "item": "'--output=x'", "characters": "';'", "option": "--output",
               "instead": "launch.nodes", "widget": "steps", "py_value": "None",
               "folder": "/shared", "runs": "/home/u/runs", "shared": "/shared",
               "tracker": "mlflow", "package": "mlflow-skinny", "cores": 4, "ids": "0, 1",
               "held": "20261201-000000_a"})

# area D (the engine and the weights):
SAMPLE.update({"module": "model.layers.0.self_attn.q_proj", "dropout": 0.05, "pattern": ".*q_proj[",
               "example": "model.layers.0.self_attn.q_proj", "shape": "(8, 64)", "expected": "(4, 64)",
               "config_key": "use_dora", "supported_value": "False", "leaves": "o_proj, q_proj", "projection": "gate_up_proj",
               "safetensors_says": "Error while deserializing header: header too small", "length": 1000000000000,
               "begin": 0, "end": 64, "data_bytes": 32, "choices": "float32, float16, bfloat16",
               "missing_keys": "['model.norm.weight']", "unexpected_keys": "[]", "base": "/models/tiny",
               "or_choices": "'best' or 'last'", "which": "best", "max_new_tokens": 32, "limit": 128,
               "max_gen_toks": 256})
# area E (the worker, the run folder, checkpoints, evaluation):
SAMPLE.update({"path": "runs/r1/checkpoints/step-4", "method": "full", "run_method": "lora", "example": 6,
               "loss": "2.345", "first_step": 1, "first_scale": "6.554e+04", "scale": "1", "error": "RuntimeError: boom",
               "free": "1.2 GB", "short": "300 MB", "missing_file": "optimizer.safetensors", "expected": 4096,
               "actual": "0123456789abcdef", "checkpoints": "step-2, step-4", "what": Message("rundir.what.status"),
               "real": "/etc/passwd", "root": "/home/u/runs", "program": "/usr/bin/msrun",
               "command": "msrun --worker_num=2 ...", "pids": "123, 456", "setting_names": "foo, bar", "task": "'demo'",
               "tasks": "'demo', 'other'", "paths": "data/eval_tasks", "task_names": "demo, other",
               "folders": "data/eval_tasks", "figures": "peak allocated 79,000 MB of the device's 81,000 MB",
               "run": "20261201-000000_a"})
# area F (Slurm, trackers, launch commands, family key maps, device rules):
SAMPLE.update({"slurm_says": "sbatch: error: Batch job submission failed: Invalid partition name specified",
               "partition_names": "debug, long", "partition": "debug", "max_nodes": 2, "max_time": "00:30:00",
               "uri": "'http://127.0.0.1:5000'", "mode": "offline", "tracker_names": "tensorboard, mlflow",
               "node_count": 2, "port": 29500, "other": "model.embed_tokens.weight", "target": "embed.weight",
               "soc": "ascend910", "compute_dtype": "bfloat16", "byte": "0xff", "position": 6, "last": 7})
# objectives and GRPO (core.spec.objectives, core.spec.config's grpo: section):
SAMPLE.update({"high": 0.1, "low": 0.2, "prompt": 256, "new": 64, "prompts": 8, "generations": 4,
               "functions": "exact_match, math, regex", "function": "regex",
               "monitors": "val_reward"})
# the reward model (core.engine.reward_model, reward_scorer, export):
SAMPLE.update({"completions": 7, "kind": "dict"})
# issue 40 (Ascend attention by chip and head size, the fit check against a device's memory):
SAMPLE.update({"scores_mb": "96.0", "mask_mb": "2.0", "head_dim": 8, "smi": "npu-smi"})
# GRPO's prompt sets and reward functions (core.data.prompts, core.eval.rewards):
SAMPLE.update({"max_prompt_len": 256, "record": "data/demo-grpo/train.jsonl line 3", "soft": 16,
               "py_says": "invalid syntax"})
# GRPO's loss, step and rollouts (core.engine.grpo):
SAMPLE.update({"completions": 11, "flags": 12, "advantages": 12, "completion": 70, "prompt_width": 256,
               "completion_width": 64, "temperature": 0.7, "objective": "grpo"})

# issue 39 (GGUF for llama.cpp and Ollama, the OpenAI-compatible endpoint):
SAMPLE.update({"assumed": 256, "first": 11, "second": 12, "host": "0.0.0.0", "kind": "WordPiece",
               "kinds": "Metaspace", "quant": "q3_k", "reasons": "2 of 8 greedy answers differ",
               "regex": "'\\p{L}+'", "requirements": "requirements-export.txt", "roles": "user/assistant/user",
               "rows": 1024, "scalar": 144, "seq_len": 256, "served": "'demo'", "token": "'<pad>'", "token_id": 1030,
               "window": 4096})
# issue 39's GGUF families (LongRoPE's original context):
SAMPLE.update({"original": 4096, "normalizer": "NFKC", "pre": "Metaspace"})

def test_the_english_is_what_core_wrote_before_the_ids():
    assert Message("run.reached_steps", steps=20) == "reached 20 steps"
    assert Message("run.with_note", reason=Message("run.stopped_forced"),
                   note=Message("run.resumable", checkpoint="step-4")) == \
        "stopped by the user (forced); newest resumable checkpoint: step-4"
    assert Message("slurm.timeout", job=Message("slurm.job_on", id="41", nodes="node1, node2")) == \
        "Slurm job 41 on node1, node2 reached its time limit and Slurm ended it (launch.time_limit)"
    with pytest.raises(KeyError, match="needs steps"):
        Message("run.reached_steps")
    with pytest.raises(KeyError, match="no message 'run.nope'"):
        Message("run.nope")


@pytest.mark.slow
@pytest.mark.parametrize("key", sorted(CATALOGUE))
def test_every_message_survives_json_copies_and_another_processs_error_line(key):
    message = Message(key, **{name: SAMPLE[name] for name in placeholders(CATALOGUE[key])})
    again = Message.from_json(json.loads(json.dumps(message.to_json())))
    assert again == message and again.key == key and again.to_json() == message.to_json()
    assert pickle.loads(pickle.dumps(message)).to_json() == copy.deepcopy(message).to_json() == message.to_json()
    # the line an entry point prints for the console (core.spec.errors.report), read back as its record
    line = RECORD_MARK + json.dumps(record_of(message))
    found = read_report(f"error: {message}\n{line}\n")
    assert found is not None and found == message and found.to_json() == message.to_json()
    assert found.render({}) == str(message)  # no translation: the English


def test_a_text_without_an_id_stays_text():
    """What is no message (an error's own text, a run folder written before the ids) is carried as
    it is, never read into one; a record the catalogue does not fit is no message."""
    said = "RuntimeError: Allocate memory failed"
    assert record_of(said) == {"text": said}
    kept = from_record(record_of(said))
    assert kept == said and not isinstance(kept, Message)
    assert read_report(f"error: {said}\n{RECORD_MARK}{json.dumps(record_of(said))}") == said
    assert read_report(f"error: {Message('run.stopped_forced')}") is None  # the English alone: no record
    assert read_report("") is None and read_report(f"{RECORD_MARK}{{not json") is None
    assert Message.from_json({"id": "run.from_a_newer_version", "params": {}}) is None
    assert Message.from_json({"id": "run.reached_steps", "params": {}}) is None  # its parameter missing
    assert from_record({"id": "run.from_a_newer_version", "params": {}}) is None and from_record([1]) is None


def test_the_status_keeps_the_id_beside_the_english(tmp_path):
    run = RunDir.create(tmp_path, "20261203-000000_x", Config().to_yaml())
    run.write_status(state="starting")
    reason = Message("run.with_note", reason=Message("run.stopped_forced"), note=Message("run.resumable",
                                                                                          checkpoint="step-4"))
    run.write_status(state="stopped", reason=reason)
    on_disk = json.loads(run.status_path.read_text())
    assert on_disk["reason"] == "stopped by the user (forced); newest resumable checkpoint: step-4"
    assert on_disk["reason_message"] == {"id": "run.with_note", "params": {
        "reason": {"id": "run.stopped_forced", "params": {}},
        "note": {"id": "run.resumable", "params": {"checkpoint": "step-4"}}}}
    status = run.read_status()
    assert Message.from_json(status.reason_message).to_json() == reason.to_json()
    run.restart_for_resume()
    assert run.read_status().reason_message is None  # a new attempt has no reason yet
    run.write_status(state="starting")
    run.write_status(state="failed", reason="RuntimeError: boom")  # an error's own text: no id
    assert run.read_status().reason_message is None
    assert Status.from_json(on_disk).reason_message == on_disk["reason_message"]


def test_a_parameter_holds_a_message_only_where_the_catalogue_puts_one():
    """So that a value's text cannot be read as a message: in every template, a parameter named in
    its message declares of kind `message` is filled with a Message by its producers, the others with values."""
    for key, template in CATALOGUE.items():
        for name in placeholders(template):
            assert isinstance(SAMPLE[name], Message) == (ENTRIES[key].kinds.get(name) == "message"), (key, name)


def test_placeholders_are_format_fields():
    assert placeholders("{reason}; {note}") == {"reason", "note"}
    assert all(isinstance(t, str) and list(string.Formatter().parse(t)) for t in CATALOGUE.values())


def test_an_entry_points_error_reaches_the_console_as_its_record(monkeypatch, capsys):
    """core.spec.errors.report: the English on stderr for a command-line user, and, when the console
    asks (MINDTUNE_ERROR_RECORDS), the record on the next line, read back by its ids with the place it
    names kept (it was a line of English read back by the catalogue's templates)."""
    from core.spec.config import ConfigError, Problem
    from core.spec.errors import CheckpointError

    where = "/runs/r1/checkpoints/step-4/trainer_state.json"
    err = CheckpointError(Message("problem.at_key", setting=where, reason=Message(
        "model.invalid_json", json_says="Expecting value: line 1 column 1 (char 0)")))
    monkeypatch.delenv(RECORDS_ENV, raising=False)
    report(err)
    plain = capsys.readouterr().err
    assert plain == f"error: {where}: not valid JSON (Expecting value: line 1 column 1 (char 0)).\n"
    assert read_report(plain) is None  # a command-line user reads no JSON
    monkeypatch.setenv(RECORDS_ENV, "1")
    report(err)
    found = read_report(capsys.readouterr().err)
    assert found.key == "problem.at_key" and found.params["setting"] == where
    assert found.params["reason"].key == "model.invalid_json" and found == str(err)
    # several problems: one record of their lines, each keeping its id (said_of)
    several = ConfigError([Problem("lora.r", 0, Message("field.not_empty")), Problem("", None, "a text of its own")])
    said = said_of(several)
    assert said.key == "problem.lines" and str(said) == str(several)
    report(several)
    found = read_report(capsys.readouterr().err)
    assert [getattr(line, "key", None) for line in found.params["lines"]] == ["problem.at_value", None]
    assert found.params["lines"][0].params["reason"].key == "field.not_empty" and found == str(several)


def test_a_list_parameter_keeps_its_items_as_messages_through_json_copies_and_text():
    """core.spec.stats.listing: the first over-long records, each an item of its own (stats.listed_record),
    joined in English by ', '; a text of the list (a run's reason from another process) is read back item
    by item, and an item is never read as a list itself (that recursed without end)."""
    items = [Message("stats.listed_record", record_at=f"data/a.jsonl line {n}", tokens=300 + n) for n in (3, 7)]
    listed = Message("stats.listing_more", items=items, more=18)
    assert listed == "data/a.jsonl line 3 (303 tokens), data/a.jsonl line 7 (307 tokens), and 18 more"
    assert listed.render({"stats.listed_record": "<{record_at}|{tokens}>"}, separator="; ") == \
        "<data/a.jsonl line 3|303>; <data/a.jsonl line 7|307>, and 18 more"
    again = Message.from_json(json.loads(json.dumps(listed.to_json())))
    assert [item.key for item in again.params["items"]] == ["stats.listed_record"] * 2 and again == listed
    assert pickle.loads(pickle.dumps(listed)).params["items"] == items
    overlong = Message("data.overlong_many", count=2, max_seq_len=256,
                       listed=Message("stats.listing", items=items))
    found = Message.from_json(json.loads(json.dumps(overlong.to_json())))  # a run's reason from status.json
    assert found.key == "data.overlong_many" and found.params["listed"].key == "stats.listing" and found == overlong
    assert [(i.key, i.params["record_at"]) for i in found.params["listed"].params["items"]] == \
        [("stats.listed_record", "data/a.jsonl line 3"), ("stats.listed_record", "data/a.jsonl line 7")]
