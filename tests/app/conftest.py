"""Fixtures for console tests: a tiny model folder written with numpy only (no MindSpore), a small
alpaca dataset, and a Console whose launcher functions are fakes that record what they were asked."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from core.run.rundir import RunDir
from core.data.tokenizer import Tokenizer
from tests.core.tiny_setup import make_rows, make_tokenizer, write_jsonl

from app.context import Console
from app.settings import Settings

HIDDEN, LAYERS, INTERMEDIATE = 16, 2, 32


def write_model(folder: Path, texts: list[str], **config_changes) -> Path:
    """A Llama-shaped Hugging Face folder: tokenizer, config.json and random safetensors weights."""
    make_tokenizer(folder, texts)
    vocab_size = Tokenizer.from_dir(folder).vocab_size
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": vocab_size,
              "hidden_size": HIDDEN, "intermediate_size": INTERMEDIATE, "num_hidden_layers": LAYERS,
              "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 512,
              "tie_word_embeddings": True, "torch_dtype": "float32", "eos_token_id": 2, **config_changes}
    (folder / "config.json").write_text(json.dumps(config))
    rng = np.random.default_rng(0)
    kv = HIDDEN // 4 * 2
    layer = {"self_attn.q_proj": (HIDDEN, HIDDEN), "self_attn.k_proj": (kv, HIDDEN), "self_attn.v_proj": (kv, HIDDEN),
             "self_attn.o_proj": (HIDDEN, HIDDEN), "mlp.gate_proj": (INTERMEDIATE, HIDDEN),
             "mlp.up_proj": (INTERMEDIATE, HIDDEN), "mlp.down_proj": (HIDDEN, INTERMEDIATE),
             "input_layernorm": (HIDDEN,), "post_attention_layernorm": (HIDDEN,)}
    tensors = {"model.embed_tokens.weight": (vocab_size, HIDDEN), "model.norm.weight": (HIDDEN,)}
    tensors |= {f"model.layers.{i}.{name}.weight": shape for i in range(LAYERS) for name, shape in layer.items()}
    weights = {k: rng.standard_normal(s).astype(np.float32) for k, s in tensors.items()}
    save_file(weights, str(folder / "model.safetensors"))
    return folder


@dataclass
class FakeLauncher:
    """Stands in for core.run.launcher's create/launch/stop/reconcile; records every call."""
    created: list[RunDir] = field(default_factory=list)
    launched: list[RunDir] = field(default_factory=list)
    stopped: list[tuple[str, bool]] = field(default_factory=list)

    def create_run(self, config):
        import core.run.launcher as launcher
        run = launcher.create_run(config)
        self.created.append(run)
        return run

    envs: dict[str, dict] = field(default_factory=dict)

    def launch(self, run, env=None):
        self.launched.append(RunDir(run.path if isinstance(run, RunDir) else run))
        self.envs[RunDir(run.path).run_id] = dict(env or {})
        RunDir(run.path).write_status(state="starting")
        return None

    def stop(self, run, graceful=True):
        self.stopped.append((RunDir(run.path).run_id, graceful))
        return RunDir(run.path).write_status(state="stopped", reason="stopped by test")

    def reconcile(self, run):
        return RunDir(run.path).read_status()


@pytest.fixture(scope="session")
def model_root(tmp_path_factory) -> Path:
    """models/ with one good tiny model (shared: it is never changed)."""
    root = tmp_path_factory.mktemp("models")
    rows = make_rows(64, 1)
    write_model(root / "tiny", [f"{r['instruction']} {r['input']} {r['output']}" for r in rows] * 4)
    return root


@pytest.fixture
def workspace(tmp_path: Path, model_root: Path) -> Settings:
    data = tmp_path / "data" / "demo"
    data.mkdir(parents=True)
    write_jsonl(data / "train.jsonl", make_rows(32, 1))
    write_jsonl(data / "validation.jsonl", make_rows(8, 2))
    write_jsonl(data / "test.jsonl", make_rows(8, 3))
    configs = tmp_path / "configs"
    configs.mkdir()
    return Settings(models_dirs=(model_root,), data_dirs=(tmp_path / "data",), runs_dir=tmp_path / "runs",
                    configs_dir=configs)


@pytest.fixture
def fake_launcher() -> FakeLauncher:
    return FakeLauncher()


@pytest.fixture
def console(workspace: Settings, fake_launcher: FakeLauncher) -> Console:
    return Console.create(workspace, create_run=fake_launcher.create_run, launch=fake_launcher.launch,
                          stop=fake_launcher.stop, reconcile=fake_launcher.reconcile)


def pytest_configure(config):
    config.addinivalue_line("markers", "browser: drives the console in headless Chromium (tests/app/test_browser.py)")
