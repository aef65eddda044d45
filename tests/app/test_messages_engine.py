"""Issue 29 item 2, the engine and the weights: every message their errors are said with (ids lora.*,
weights.*, engine.*, export.*, generate.* in core.spec.messages) is made here by its real producer (a
tiny model's LoRA injection and adapter files, spoilt safetensors files, a training checkpoint's folder
and its exports, generation's settings, lm-eval's model) and reads in 中文 from its id
(app.i18n.MESSAGES_ZH) with its facts; the Try tab says its answers' errors in the page's language."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import mindspore as ms
from mindspore import Parameter, Tensor, nn
from safetensors.numpy import save_file

from core.engine import export as export_mod
from core.export import main as export_main
from core.engine.checkpoint import (check_dtype_supported, hf_state_dict, load_hf_model, read_safetensors,
                                    read_trainer_state, set_parameters)
from core.engine.generate import SamplingSettings, generate
from core.generate import main as generate_main
from core.engine.lora import (inject_lora, load_lora_state_dict, load_peft_adapter, lora_state_dict, read_peft_config,
                              read_peft_tensors, save_peft_adapter)
from core.engine.moe import SparseMoE
from core.engine.preference import Objective
from core.run.ckpt_store import save_train_checkpoint
from core.spec.messages import CATALOGUE, Message
from core.spec.model_args import file_sha256, weight_files
from core.spec.moe_args import MoeArgs

from app.tabs import try_callbacks as try_cb
from app.i18n import MESSAGES_ZH, TEXTS, problem_text

from tests import skips
from tests.app.conftest import write_model
from tests.app.test_messages_model import _keys, _said_in_chinese
from tests.app.test_problem_text import MIXTRAL, assert_chinese

AREA = ("lora.", "weights.", "engine.", "export.", "generate.")
# said by the engine with the worker's own ids (area E: core.run.ckpt_store, core.eval.eval_tasks)
SHARED_WITH_THE_RUN = {"ckpt.incomplete", "eval.batch_size"}
LORA = {"rank": 2, "alpha": 4.0, "dropout": 0.0, "target_modules": ["q_proj"]}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return write_model(tmp_path_factory.mktemp("models") / "tiny", ["a b c"] * 8)


def _model(tiny: Path, lora: bool = False):
    model = load_hf_model(tiny)
    if lora:
        inject_lora(model, LORA["rank"], LORA["alpha"], LORA["dropout"], LORA["target_modules"])
    return model


def _message(err: BaseException) -> Message:
    """The Message an error was raised with (a MessageError's, or the first argument of another)."""
    said = getattr(err, "said", None)
    message = said[0] if isinstance(said, list) and len(said) == 1 else err.args[0]
    assert isinstance(message, Message), repr(err)
    assert str(message) == str(err)
    return message


# ---- a tiny model's LoRA ---------------------------------------------------------------------

def _moe_holder(blocks: int = 1, dense: int = 0) -> nn.Cell:
    """A cell of `blocks` sparse MoE blocks (a mixture of experts' layers) and `dense` o_proj layers."""
    class Holder(nn.Cell):
        def __init__(self):
            super().__init__()
            self.blocks = nn.CellList([SparseMoE(SimpleNamespace(hidden_size=8, moe=MoeArgs(
                4, 2, 6, True, (0,), 0.01, "mixtral"))) for _ in range(blocks)])
            self.layers = nn.CellList([nn.CellList([nn.Dense(8, 8)]) for _ in range(dense)])
    holder = Holder()
    for name, cell in holder.cells_and_names():
        if isinstance(cell, nn.Dense) and name.startswith("layers."):
            cell.update_parameters_name(name + ".")
    return holder


def _save_moe_adapter(holder: nn.Cell, targets, folder: Path) -> None:
    inject_lora(holder, 2, 4, 0.0, targets)
    save_peft_adapter(holder, folder, "base", 2, 4, 0.0, targets)


def _lora_tensors(tiny: Path, change) -> None:
    model = _model(tiny, lora=True)
    tensors = lora_state_dict(model)
    change(tensors)
    load_lora_state_dict(model, tensors, source="runs/r/checkpoints/step-4")


def _pop(count: int):
    def change(tensors):
        for name in sorted(tensors)[:count]:
            del tensors[name]
    return change


def _add(count: int):
    def change(tensors):
        for n in range(count):
            tensors[f"model.layers.{n}.mlp.up_proj.lora_a"] = np.zeros((2, 4), np.float32)
    return change


def _reshape(tensors):
    name = sorted(tensors)[0]
    tensors[name] = np.zeros((3, 3), np.float32)


def _adapter_config(**changes):
    def make(tmp_path: Path):
        config = {"peft_type": "LORA", "r": 2, "lora_alpha": 4, "target_modules": ["q_proj"], **changes}
        (tmp_path / "adapter_config.json").write_text(json.dumps({k: v for k, v in config.items() if v is not None}))
        read_peft_config(tmp_path)
    return make


def _adapter_weights(tensors: dict | None = None, raw: bytes | None = None, pickle: bool = False):
    def make(tmp_path: Path):
        if pickle:
            (tmp_path / "adapter_model.bin").write_bytes(b"x")
        elif raw is not None:
            (tmp_path / "adapter_model.safetensors").write_bytes(raw)
        elif tensors is not None:
            save_file(tensors, str(tmp_path / "adapter_model.safetensors"))
        read_peft_tensors(tmp_path)
    return make


def _inject(*args):
    return lambda tiny, tmp_path: inject_lora(_model(tiny), *args)


LORA_MISTAKES = {
    "lora.rank": _inject(0, 4, 0.0, ["q_proj"]),
    "lora.alpha": _inject(2, -1, 0.0, ["q_proj"]),
    "lora.dropout": _inject(2, 4, 1.5, ["q_proj"]),
    "lora.already_adapted": lambda tiny, tmp_path: inject_lora(_model(tiny, lora=True), 2, 4, 0.0, ["q_proj"]),
    "lora.expert_dropout": lambda tiny, tmp_path: inject_lora(_moe_holder(), 2, 4, 0.1, ["gate_up_proj"]),
    "lora.bad_regex": _inject(2, 4, 0.0, "q_proj["),
    "lora.bad_targets": _inject(2, 4, 0.0, []),
    "lora.regex_matches_nothing": _inject(2, 4, 0.0, "nothing.*"),
    "lora.name_matches_nothing": _inject(2, 4, 0.0, ["qkv_proj"]),
    "lora.names_match_nothing": _inject(2, 4, 0.0, ["qkv_proj", "zz_proj"]),
    "lora.tensor_shape": lambda tiny, tmp_path: _lora_tensors(tiny, _reshape),
    "lora.missing_tensor": lambda tiny, tmp_path: _lora_tensors(tiny, _pop(1)),
    "lora.missing_tensors": lambda tiny, tmp_path: _lora_tensors(tiny, _pop(3)),
    "lora.unexpected_tensor": lambda tiny, tmp_path: _lora_tensors(tiny, _add(1)),
    "lora.unexpected_tensors": lambda tiny, tmp_path: _lora_tensors(tiny, _add(2)),
    "lora.no_adapter_config": lambda tiny, tmp_path: read_peft_config(tmp_path),
    "lora.not_lora": lambda tiny, tmp_path: _adapter_config(peft_type="IA3")(tmp_path),
    "lora.config_key_missing": lambda tiny, tmp_path: _adapter_config(lora_alpha=None)(tmp_path),
    "lora.option_unsupported": lambda tiny, tmp_path: _adapter_config(use_dora=True)(tmp_path),
    "lora.per_module": lambda tiny, tmp_path: _adapter_config(rank_pattern={"q_proj": 4})(tmp_path),
    "lora.target_parameters": lambda tiny, tmp_path: _adapter_config(
        target_parameters=["mlp.experts.gate_up_proj"])(tmp_path),
    "lora.no_adapter_weights": lambda tiny, tmp_path: _adapter_weights()(tmp_path),
    "lora.pickle_adapter": lambda tiny, tmp_path: _adapter_weights(pickle=True)(tmp_path),
    "lora.foreign_tensor": lambda tiny, tmp_path: _adapter_weights({"x.weight": np.zeros(2, np.float32)})(tmp_path),
    "lora.foreign_tensors": lambda tiny, tmp_path: _adapter_weights(
        {"x.weight": np.zeros(2, np.float32), "y.weight": np.zeros(2, np.float32)})(tmp_path),
    "weights.safetensors_says": lambda tiny, tmp_path: _adapter_weights(raw=b"xx")(tmp_path),
    "lora.moe_remapped": lambda tiny, tmp_path: _save_moe_adapter(_moe_holder(), ["gate"], tmp_path),
    "lora.moe_modules": lambda tiny, tmp_path: _save_moe_adapter(_moe_holder(dense=2), ["layers.0.0"], tmp_path),
    "lora.moe_experts": lambda tiny, tmp_path: _save_moe_adapter(_moe_holder(blocks=2),
                                                                 ["blocks.0.experts.gate_up_proj"], tmp_path),
}


# ---- safetensors files and a Hugging Face folder's weights -------------------------------------

def _header(header, data: bytes = b"") -> bytes:
    text = json.dumps(header).encode() if not isinstance(header, bytes) else header
    return len(text).to_bytes(8, "little") + text + data


def _read_file(content: bytes):
    def make(tiny: Path, tmp_path: Path):
        path = tmp_path / "model.safetensors"
        path.write_bytes(content)
        read_safetensors([path])
    return make


def _truncated_after_opening(tiny: Path, tmp_path: Path):
    path = tmp_path / "weights.safetensors"
    save_file({"w": np.ones(100_000, np.float32)}, str(path))  # beyond the read buffer
    from core.engine.checkpoint import SafetensorsFiles
    with SafetensorsFiles([path]) as files:
        with open(path, "r+b") as handle:
            handle.truncate(path.stat().st_size - 8)
        files["w"]


def _two_shards(tiny: Path, tmp_path: Path):
    for name in ("a", "b"):
        save_file({"w": np.ones(2, np.float32)}, str(tmp_path / f"{name}.safetensors"))
    read_safetensors([tmp_path / "a.safetensors", tmp_path / "b.safetensors"])


def _spoilt_weights(change):
    def make(tiny: Path, tmp_path: Path):
        folder = tmp_path / "model"
        shutil.copytree(tiny, folder)
        from safetensors.numpy import load_file
        tensors = load_file(str(folder / "model.safetensors"))
        change(tensors)
        save_file(tensors, str(folder / "model.safetensors"))
        load_hf_model(folder)
    return make


def _drop(*names):
    def change(tensors):
        for name in names:
            del tensors[name]
    return change


def _extra(count: int):
    def change(tensors):
        for n in range(count):
            tensors[f"model.extra_{n}.weight"] = np.zeros(2, np.float32)
    return change


def _wrong_shape(tensors):
    tensors["model.norm.weight"] = np.zeros(3, np.float32)


def _base_tensor_gone(tiny: Path, tmp_path: Path):
    model = load_hf_model(tiny)
    model.passthrough_names = ["model.vision_tower.patch.weight"]  # a tensor the base's files no longer hold
    hf_state_dict(model)


WEIGHTS_MISTAKES = {
    "weights.unreadable": _read_file(b"xx"),
    "weights.short_file": _read_file(b"xx"),
    "weights.header_length": _read_file((10 ** 6).to_bytes(8, "little") + b"{}"),
    "weights.header_json": _read_file(_header(b"{x}x")),
    "weights.header_not_utf8": _read_file(_header(b"\xff{}")),  # Python's decoder's words, its reason apart
    "weights.header_not_utf8_bytes": _read_file(_header(b'{"a": "\xe4\xb8"}')),
    "weights.header_not_object": _read_file(_header([1])),
    "weights.bad_entry": _read_file(_header({"w": {"dtype": "F32"}})),
    "weights.bad_offsets": _read_file(_header({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})),
    "weights.os_error": lambda tiny, tmp_path: read_safetensors([tmp_path]),
    "weights.unreadable_tensor": _truncated_after_opening,
    "weights.ends_early": _truncated_after_opening,
    "weights.two_shards": _two_shards,
    "weights.missing_tensor": _spoilt_weights(_drop("model.norm.weight")),
    "weights.missing_tensors": _spoilt_weights(_drop("model.norm.weight", "model.layers.0.mlp.up_proj.weight")),
    "weights.unexpected_tensor": _spoilt_weights(_extra(1)),
    "weights.unexpected_tensors": _spoilt_weights(_extra(2)),
    "weights.shape": _spoilt_weights(_wrong_shape),
    "weights.dtype": lambda tiny, tmp_path: load_hf_model(tiny, "int8"),
    "weights.storage_dtype": lambda tiny, tmp_path: load_hf_model(tiny, "float32", "int8"),
    "weights.cpu_bf16": lambda tiny, tmp_path: check_dtype_supported("bfloat16"),
    "weights.base_tensor_gone": _base_tensor_gone,
}


# ---- a run's training checkpoint and its exports ---------------------------------------------

def _checkpoint(tiny: Path, root: Path, weights: dict | None = None, pointers=("best",), **state) -> Path:
    """A LoRA run's checkpoint folder as the worker saves it (checkpoints/step-4 and its pointers)."""
    if weights is None:
        weights = lora_state_dict(_model(tiny, lora=True))
    trainer_state = {"step": 4, "method": "lora", "lora": dict(LORA),
                     "base_model": {"path": str(tiny), "sha256": file_sha256(weight_files(tiny))}, **state}
    trainer_state = {k: v for k, v in trainer_state.items() if v is not None}
    return save_train_checkpoint(root / "run" / "checkpoints", 4, weights, {"adam.m": np.zeros(2, np.float32)},
                                 trainer_state, pointers=pointers)


def _export(fmt: str = "peft", dtype: str = "stored", weights=None, **state):
    def make(tiny: Path, tmp_path: Path):
        step = _checkpoint(tiny, tmp_path, weights, **state)
        export_mod.export_checkpoint(step, fmt, tmp_path / "out", dtype)
    return make


def _incomplete(tiny: Path, tmp_path: Path):
    step = _checkpoint(tiny, tmp_path)
    (step / "optimizer.safetensors").unlink()
    export_mod.checkpoint_folder(step)


def _mixtral_base(tiny: Path, tmp_path: Path) -> dict:
    base = write_model(tmp_path / "mixtral", ["a b c"] * 8, **MIXTRAL, num_local_experts=2, num_experts_per_tok=1)
    return {"path": str(base)}


def _float32_only(tiny: Path, tmp_path: Path):
    step = _checkpoint(tiny, tmp_path, base_model=_mixtral_base(tiny, tmp_path))
    export_mod.export_checkpoint(step, "merged", tmp_path / "out", "float16")


def _reward_layout(tiny: Path, tmp_path: Path):
    """A reward model's checkpoint (its value head beside the adapters) of a mixture of experts: no
    sequence-classifier layout streams for it."""
    weights = {**lora_state_dict(_model(tiny, lora=True)), "score.weight": np.zeros((1, 32), np.float32)}
    step = _checkpoint(tiny, tmp_path, weights, base_model=_mixtral_base(tiny, tmp_path))
    export_mod.export_checkpoint(step, "merged", tmp_path / "out")


def _export_run(which: str):
    def make(tiny: Path, tmp_path: Path):
        _checkpoint(tiny, tmp_path)
        export_mod.export_run(tmp_path / "run", which, "peft")
    return make


def _unused_tensor(tiny: Path, tmp_path: Path):
    weights = {f"model.layers.0.self_attn.zz_proj.lora_{m}": np.zeros((2, 2), np.float32) for m in "ab"}
    _export("merged", weights=weights)(tiny, tmp_path)


EXPORT_MISTAKES = {
    "export.no_checkpoint": lambda tiny, tmp_path: export_mod.checkpoint_folder(tmp_path / "nowhere"),
    "ckpt.incomplete": _incomplete,  # the same message as core.run.ckpt_store's
    "export.state_fields": _export(method=None),
    "export.base_gone": _export("merged", base_model={"path": "/nowhere/base"}),
    "export.base_changed": lambda tiny, tmp_path: _export("merged", base_model={
        "path": str(tiny), "sha256": "0" * 64})(tiny, tmp_path),
    "export.not_adapter_tensor": _export(weights={"model.norm.weight": np.zeros(2, np.float32)}),
    "export.no_tensor": _export(weights={}),
    "export.adapter_rank": _export(lora={**LORA, "rank": 3}),
    "export.dtype": _export("merged", "int8"),
    "export.unused_tensor": _unused_tensor,
    "export.float32_only": _float32_only,
    "export.reward_layout": _reward_layout,
    "export.format": _export("onnx"),
    "export.dtype_merged_only": _export("peft", "float16"),
    "export.full_no_adapter": _export(method="full"),
    "export.which": _export_run("first"),
    "export.no_pointer": _export_run("last"),
    "engine.state_no_step": lambda tiny, tmp_path: read_trainer_state(_checkpoint(tiny, tmp_path, step=None)),
    "engine.params_mismatch": lambda tiny, tmp_path: set_parameters(
        {"a": Parameter(Tensor(np.zeros(2, np.float32)), name="a")}, {"b": np.zeros(2, np.float32)}, "step-4"),
    "engine.param_shape": lambda tiny, tmp_path: set_parameters(
        {"a": Parameter(Tensor(np.zeros(2, np.float32)), name="a")}, {"a": np.zeros(3, np.float32)}, "step-4"),
}


# ---- generation, lm-eval's model, the preference objectives -----------------------------------

def _lm(**kwargs):
    def make(tiny: Path, tmp_path: Path):
        skips.module("lm_eval")
        import core.engine.lm_eval_model as lm_eval_model  # ours: a broken module fails, never skips
        return lm_eval_model.MindtuneLM(str(tiny), fused=False, **kwargs)
    return make


def _gen_tokens(tiny: Path, tmp_path: Path):
    instance = skips.module("lm_eval.api.instance")
    lm = _lm(max_length=16)(tiny, tmp_path)
    lm.generate_until([instance.Instance("generate_until", {}, ("a b", {"max_gen_toks": 32, "until": ["\n"]}), 0)])


def _eval_base_missing(tiny: Path, tmp_path: Path):
    skips.module("lm_eval")
    import core.engine.lm_eval_model as lm_eval_model
    model = _model(tiny, lora=True)
    save_peft_adapter(model, tmp_path / "adapter", "/nowhere/base", **LORA)
    lm_eval_model.load_model(str(tmp_path / "adapter"))


def _temperature_in_head(tiny: Path, tmp_path: Path):
    """GRPO at a temperature other than 1 on a LoRA model whose frozen 16-bit head computes its loss inside
    one kernel (no logits to scale)."""
    from core.engine import fused
    from core.engine.preference import LogProbPass
    model = load_hf_model(tiny, "float32", storage_dtype="bfloat16")
    if fused.enable(model) != "fused" or model.head_loss is None:
        skips.skip("kernels", "fused kernels unavailable here: no 16-bit head kernel")
    LogProbPass(model, temperature=0.7)


def _adapter_off_without_lora(tiny: Path, tmp_path: Path):
    from core.engine.preference import LogProbPass
    rows = np.ones((1, 4), np.int32)
    LogProbPass(_model(tiny), adapter_off=True, objective="grpo")(rows, rows, rows)


def _grpo(name: str, *args, **kwargs):
    def make(tiny: Path, tmp_path: Path):
        from core.engine import grpo
        return getattr(grpo, name)(*args, **kwargs)
    return make


OTHER_MISTAKES = {
    "generate.max_new_tokens": lambda tiny, tmp_path: SamplingSettings(max_new_tokens=0),
    "generate.temperature": lambda tiny, tmp_path: SamplingSettings(temperature=-1),
    "generate.top_p": lambda tiny, tmp_path: SamplingSettings(top_p=1.5),
    "generate.empty_prompt": lambda tiny, tmp_path: generate(_model(tiny), [[]], SamplingSettings()),
    "generate.too_long": lambda tiny, tmp_path: generate(_model(tiny), [[5, 6, 7]], SamplingSettings(max_new_tokens=600)),
    "eval.batch_size": _lm(batch_size=0),  # the same message as EvalSettings'
    "engine.eval_gen_tokens": _gen_tokens,
    "engine.eval_base_missing": _eval_base_missing,
    "engine.objective": lambda tiny, tmp_path: Objective("ppo"),
    "engine.loss_type": lambda tiny, tmp_path: Objective("dpo", loss_type="hinge"),
    # GRPO (core.engine.grpo) and the reference pass it shares with the preference objectives
    "generate.top_k": lambda tiny, tmp_path: SamplingSettings(top_k=-1),
    "engine.grpo_loss_type": _grpo("GrpoObjective", loss_type="ppo"),
    "engine.grpo_sampling_level": _grpo("GrpoObjective", importance_sampling_level="group"),
    "engine.grpo_scale_rewards": _grpo("advantages", [1.0, 0.0], 2, "median"),
    "engine.grpo_group_size": _grpo("advantages", [1.0] * 5, 3),
    "engine.grpo_batch_rows": _grpo("grpo_batch", [[1, 2]], [[3]], [False], [0.0], 2, 0),
    "engine.grpo_empty_row": _grpo("grpo_batch", [[1, 2]], [[3], []], [False] * 2, [0.0] * 2, 2, 0),
    "engine.grpo_too_wide": _grpo("grpo_batch", [[1, 2, 3]], [[3], [4]], [False] * 2, [0.0] * 2, 2, 0, widths=(2, 1)),
    "engine.temperature_in_head": _temperature_in_head,
    "engine.adapter_off_without_lora": _adapter_off_without_lora,
}

MISTAKES = {**LORA_MISTAKES, **WEIGHTS_MISTAKES, **EXPORT_MISTAKES, **OTHER_MISTAKES}


@pytest.mark.parametrize("key", list(MISTAKES))
def test_an_engine_or_weights_error_is_said_by_its_id(tiny, tmp_path, key):
    ms.set_context(device_target="CPU")
    with pytest.raises(ValueError) as raised:
        MISTAKES[key](tiny, tmp_path)
    err = raised.value
    message = _message(err)
    assert key in _keys(message), (key, str(err))
    _said_in_chinese(message, err if getattr(err, "said", None) else None)


def test_a_peft_adapter_whose_targets_match_nothing_says_where(tiny, tmp_path):
    """load_peft_adapter: its adapter_config.json's target_modules named before the LoRA refusal."""
    save_peft_adapter(_model(tiny, lora=True), tmp_path, str(tiny), **LORA)
    config = json.loads((tmp_path / "adapter_config.json").read_text())
    (tmp_path / "adapter_config.json").write_text(json.dumps({**config, "target_modules": ["zz_proj"]}))
    with pytest.raises(ValueError) as raised:
        load_peft_adapter(_model(tiny), tmp_path)
    message = _message(raised.value)
    assert message.key == "model.at" and message.params["reason"].key == "lora.name_matches_nothing"
    assert message.params["where"] == str(tmp_path / "adapter_config.json")
    _said_in_chinese(message, raised.value)


@pytest.mark.parametrize("key", ["export.full_no_adapter", "export.no_pointer", "export.adapter_rank"])
def test_an_exports_error_reaches_the_console_by_its_record(tiny, tmp_path, key, capsys, monkeypatch):
    """python -m core.export prints 'error: <English>' and, for the console (core.spec.errors.RECORDS_ENV),
    its record: the console's ExportFailed keeps the message by its id (app.runs.exports.run_export);
    the English line alone is shown as it is."""
    import subprocess

    from app.runs import exports
    from core.spec.errors import RECORDS_ENV, read_report

    states = {"export.full_no_adapter": {"method": "full"}, "export.no_pointer": {},
              "export.adapter_rank": {"lora": {**LORA, "rank": 3}}}
    _checkpoint(tiny, tmp_path, **states[key])
    argv = ["--run", str(tmp_path / "run"), "--format", "peft"] + (["--which", "last"] if key == "export.no_pointer" else [])
    monkeypatch.setenv(RECORDS_ENV, "1")
    assert export_main(argv) == 2
    stderr = capsys.readouterr().err
    line = stderr.splitlines()[0].removeprefix("error: ")
    found = read_report(stderr)
    assert found is not None and found.key == key and found == line
    assert_chinese(line, problem_text(found, "zh"))
    assert problem_text(line, "zh") == line  # the English alone: as it is
    # the console's side: the process's stderr becomes ExportFailed with the message
    monkeypatch.setattr(exports, "export_target", lambda run, fmt: exports.ExportTarget(
        "best", 4, tmp_path / "never.zip", None))
    sent = {}

    def runner(argv, **kwargs):
        sent.update(kwargs["env"])
        return subprocess.CompletedProcess(argv, 2, "", stderr)

    with pytest.raises(exports.ExportFailed) as failed:
        exports.run_export(tmp_path / "run", "peft", tmp_path, runner=runner)
    assert sent[RECORDS_ENV] == "1" and failed.value.said[0].key == key and str(failed.value) == line


# ---- the Try tab -------------------------------------------------------------------------------

def test_the_try_tab_says_generations_error_in_the_pages_language(tiny, capsys, monkeypatch):
    """core.generate --json prints its error with the message's id; the Try tab's answer says it in
    中文 on the 中文 page (it was English there), its own refusals too."""
    assert generate_main(["--model", str(tiny), "--prompt=hi", "--max-new-tokens", "0", "--json"]) == 2
    out = capsys.readouterr()
    answer = try_cb.parse_output(out.out, out.err, 2)
    assert answer.error.key == "generate.max_new_tokens" and answer.error == "max_new_tokens = 0: must be >= 1"
    assert answer.shown("en") == "⚠ max_new_tokens = 0: must be >= 1"
    assert answer.shown("zh") == "⚠ " + problem_text(answer.error, "zh")
    assert_chinese(str(answer.error), answer.shown("zh").removeprefix("⚠ "))
    # a line of English without the JSON or the record (an older process): shown as it is
    text_only = try_cb.parse_output("", "error: max_new_tokens = 0: must be >= 1\n", 2)
    assert text_only.shown("zh") == "⚠ max_new_tokens = 0: must be >= 1"
    # the record on stderr (core.spec.errors.report) without the JSON answer: said by its id
    from core.spec.errors import RECORDS_ENV
    monkeypatch.setenv(RECORDS_ENV, "1")
    assert generate_main(["--model", str(tiny), "--prompt=hi", "--max-new-tokens", "0"]) == 2
    by_record = try_cb.parse_output("", capsys.readouterr().err, 2)
    assert by_record.error.key == "generate.max_new_tokens" and by_record.shown("zh") == answer.shown("zh")
    done = try_cb.Answer("blue", new_tokens=2, seconds=0.5)
    assert done.shown("en") == "blue\n\n[2 tokens in 0.50 s]" and done.shown("zh") == "blue\n\n[2 个 token，用时 0.50 秒]"


def test_the_try_tabs_own_refusals_are_said_in_the_pages_language(console, tmp_path):
    base, tuned = try_cb.compare(console, None, str(tmp_path), "Hi", True, 4, runner=lambda *a, **k: None)
    assert base.error.key == "try.no_base" and str(base.error) == "pick a loadable base model"
    for answer in (base, tuned):
        assert_chinese(str(answer.error), answer.shown("zh").removeprefix("⚠ "))
    empty, _ = try_cb.compare(console, None, None, " ", True, 4)
    assert empty.error.key == "try.no_prompt" and empty.shown("zh") == "⚠ " + TEXTS["try.no_prompt"][1]
    _, missing = try_cb.compare(console, None, None, "Hi", True, 4, runner=lambda *a, **k: None)
    assert missing.error.key == "try.no_checkpoint" and missing.shown("zh") == "⚠ " + TEXTS["try.no_checkpoint"][1]
    gone = try_cb._checkpoint_job(console, str(console.runs_dir / "nope" / "checkpoints" / "best"), "Hi", True, 4)
    assert gone.error.key == "try.no_such_checkpoint"
    assert_chinese(str(gone.error), gone.shown("zh").removeprefix("⚠ "))
    exited = try_cb.parse_output("", "", 3)
    assert str(exited.error) == "core.generate exited with 3"
    assert_chinese(str(exited.error), exited.shown("zh").removeprefix("⚠ "))


def test_every_engine_id_is_made_by_a_case_above_and_has_chinese():
    ours = {key for key in CATALOGUE if key.startswith(AREA)}
    assert ours <= set(MESSAGES_ZH), sorted(ours - set(MESSAGES_ZH))
    made = set(MISTAKES)
    assert ours - made == set(), sorted(ours - made)
    assert made - ours == SHARED_WITH_THE_RUN, sorted(made - ours)
