"""The Download tab's GGUF files (issue 39): offered only when llama.cpp's reload passed, with what it
found beside the file; exported by `python -m core.export --format gguf|gguf-lora|ollama`."""
from __future__ import annotations

import json
import os

import app.tabs.monitor_callbacks as cb
from app.runs.exports import GGUF_FORMATS, export_argv, export_target
from core.run.rundir import RunDir
from core.spec.config import Config

CHECK_F16 = {"passed": True, "quant": "f16", "prompts": 8, "greedy_equal": 7, "greedy_ties": 1,
             "max_logit_diff": 0.0273, "perplexity": 2.8844, "perplexity_reference": None}
CHECK_Q4 = {"passed": True, "quant": "q4_k_m", "prompts": 8, "greedy_equal": 8, "greedy_ties": 0,
            "max_logit_diff": None, "perplexity": 3.11, "perplexity_reference": 3.06}


def _run(console) -> RunDir:
    run = RunDir.create(console.runs_dir, "20261205-000000_tiny_lora-r8_fp32_dp1", Config().to_yaml())
    (run.checkpoints_dir / "step-300").mkdir()
    os.symlink("step-300", run.checkpoints_dir / "best")
    return run


def test_a_gguf_is_offered_with_its_check_and_only_when_it_passed(console):
    run = _run(console)
    gguf = run.export_dir / "best-step-300-f16.gguf"
    label, path, clickable = cb.download_state(console, run, "gguf-f16", "en")
    assert label.startswith("prepare GGUF f16") and path is None and clickable
    gguf.write_bytes(b"GGUF")  # written but not (yet) checked: not offered
    assert cb.download_state(console, run, "gguf-f16", "en")[1] is None
    (run.export_dir / "best-step-300-f16.gguf.check.json").write_text(json.dumps({**CHECK_F16, "passed": False}))
    assert cb.download_state(console, run, "gguf-f16", "en")[1] is None
    (run.export_dir / "best-step-300-f16.gguf.check.json").write_text(json.dumps(CHECK_F16))
    label, path, clickable = cb.download_state(console, run, "gguf-f16", "en")
    assert path == str(gguf) and label == ("⬇ GGUF f16 (llama.cpp) · best step 300 · reloaded with llama.cpp: 8/8 "
                                           "prompts answer as trained, logits within 2.7e-02, perplexity 2.884")
    assert "8/8 个提示的回答与训练后一致" in cb.download_state(console, run, "gguf-f16", "zh")[0]


def test_the_ollama_zip_is_offered_when_its_gguf_passed_and_says_the_perplexity(console):
    run = _run(console)
    (run.export_dir / "best-step-300-ollama-q4_k_m.zip").write_bytes(b"PK")
    assert cb.download_state(console, run, "ollama", "en")[1] is None  # its GGUF has no passed check
    (run.export_dir / "best-step-300-q4_k_m.gguf").write_bytes(b"GGUF")
    (run.export_dir / "best-step-300-q4_k_m.gguf.check.json").write_text(json.dumps(CHECK_Q4))
    label, path, _ = cb.download_state(console, run, "ollama", "en")
    assert path.endswith("best-step-300-ollama-q4_k_m.zip")
    assert label.endswith("reloaded with llama.cpp: 8/8 prompts answer as trained; perplexity 3.060 → 3.110 at q4_k_m")


def test_each_gguf_download_names_its_export_command(console):
    run = _run(console)
    argv = {fmt: export_argv(run.path, "best", fmt, python="py")[3:] for fmt in GGUF_FORMATS}
    assert argv["gguf-q4_k_m"][-4:] == ["--format", "gguf", "--quant", "q4_k_m"]
    assert argv["ollama"][-4:] == ["--format", "ollama", "--quant", "q4_k_m"]
    assert argv["gguf-lora"][-4:-2] == ["--format", "gguf-lora"] and "--zip" not in argv["gguf-f16"]
    assert export_target(run.path, "gguf-lora").zip_path.name == "best-step-300-lora.gguf"
