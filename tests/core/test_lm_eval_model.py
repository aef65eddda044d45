"""mindtune's lm-eval model (core.engine.lm_eval_model) against lm-eval's own Hugging Face backend (`hf`):
a LoRA checkpoint trained for a few steps, evaluated on a local multiple-choice and a local
generation task; `hf` runs on the merged export of the same checkpoint. Per-item log-likelihoods
agree to 1e-4, accuracy and generations exactly. Also: core.evaluate's refusals and its run folder."""
import json
from pathlib import Path

import numpy as np
import pytest

from tests import skips

lm_eval = skips.module("lm_eval")
torch = skips.module("torch")
skips.module("transformers")

from core.eval.eval_tasks import EvalError, EvalSettings, create_eval_run, read_results  # noqa: E402
from core.evaluate import go_offline, main as evaluate_main, resolve_tasks, run_folder  # noqa: E402
from core.run.rundir import RunDir
from tests.core.tiny_setup import make_rows  # noqa: E402

TOLERANCE = 1e-4
MC_YAML = """task: tiny_pick_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: pick_mc.json
test_split: test
output_type: multiple_choice
doc_to_text: "{{question}}\\nAnswer:"
doc_to_choice: choices
doc_to_target: label
metric_list:
  - metric: acc
"""
GEN_YAML = """task: tiny_pick_gen
dataset_path: json
dataset_kwargs:
  data_files:
    test: pick_gen.json
test_split: test
output_type: generate_until
doc_to_text: "{{question}}\\nAnswer:"
doc_to_target: answer
generation_kwargs:
  until: ["\\n", "."]
  max_gen_toks: 6
  do_sample: false
metric_list:
  - metric: exact_match
"""


def _write_tasks(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rows = make_rows(12, 5)
    mc = [{"question": f"{r['instruction']} {r['input']}", "choices": r["input"].split(), "label": r["input"].split().index(r["output"])}
          for r in rows]
    gen = [{"question": f"{r['instruction']} {r['input']}", "answer": " " + r["output"]} for r in rows]
    (folder / "pick_mc.json").write_text(json.dumps(mc))
    (folder / "pick_gen.json").write_text(json.dumps(gen))
    (folder / "pick_mc.yaml").write_text(MC_YAML)
    (folder / "pick_gen.yaml").write_text(GEN_YAML)
    return folder


@pytest.fixture(scope="module")
def tasks_dir(tmp_path_factory):
    return _write_tasks(tmp_path_factory.mktemp("eval_tasks"))


@pytest.fixture(scope="module")
def lora_run(tmp_path_factory):
    from core.train import main as train_main
    from tests.core.tiny_setup import make_workspace
    root = tmp_path_factory.mktemp("lmeval_run")
    config = make_workspace(root)
    assert train_main(["--config", str(config), "train.max_steps=4", "train.eval_every=4",
                       "eval.downstream=false", "train.learning_rate=0.05"]) == 0
    return next(p for p in (root / "runs").iterdir() if not p.is_symlink())


def _evaluate(lm, tasks_dir):
    from lm_eval.evaluator import simple_evaluate
    tasks, manager = resolve_tasks(["tiny_pick_mc", "tiny_pick_gen"], [str(tasks_dir)])
    return simple_evaluate(model=lm, tasks=tasks, task_manager=manager, log_samples=True, bootstrap_iters=0)


@pytest.fixture(scope="module")
def both(lora_run, tasks_dir):
    """(mindtune's output, lm-eval hf's output, mindtune's LM, hf's LM) on the same checkpoint."""
    from lm_eval.models.huggingface import HFLM
    from core.engine.export import export_run
    from core.engine.generate import use_device
    from core.engine.lm_eval_model import MindtuneLM
    use_device("cpu")
    go_offline()
    merged = export_run(lora_run, "best", "merged")
    ours_lm = MindtuneLM(str(lora_run / "checkpoints" / "best"), batch_size=4)
    hf_lm = HFLM(pretrained=str(merged), batch_size=4, device="cpu", dtype="float32")
    return _evaluate(ours_lm, tasks_dir), _evaluate(hf_lm, tasks_dir), ours_lm, hf_lm


@pytest.mark.slow
def test_loglikelihoods_and_accuracy_equal_lm_evals_hf_backend(both):
    ours, hf, _, _ = both
    ours_ll = np.array([[resp[0][0] for resp in s["resps"]] for s in ours["samples"]["tiny_pick_mc"]])
    hf_ll = np.array([[resp[0][0] for resp in s["resps"]] for s in hf["samples"]["tiny_pick_mc"]])
    assert ours_ll.shape == (12, 3)
    assert np.abs(ours_ll - hf_ll).max() <= TOLERANCE
    ours_greedy = [[resp[0][1] for resp in s["resps"]] for s in ours["samples"]["tiny_pick_mc"]]
    assert ours_greedy == [[resp[0][1] for resp in s["resps"]] for s in hf["samples"]["tiny_pick_mc"]]
    assert ours["results"]["tiny_pick_mc"]["acc,none"] == hf["results"]["tiny_pick_mc"]["acc,none"]


@pytest.mark.slow
def test_generations_equal_lm_evals_hf_backend(both):
    ours, hf, _, _ = both
    ours_text = [s["resps"][0][0] for s in ours["samples"]["tiny_pick_gen"]]
    hf_text = [s["resps"][0][0] for s in hf["samples"]["tiny_pick_gen"]]
    assert ours_text == hf_text
    assert any(text.strip() for text in ours_text), "the model must generate something"
    assert ours["results"]["tiny_pick_gen"]["exact_match,none"] == hf["results"]["tiny_pick_gen"]["exact_match,none"]


@pytest.mark.slow
def test_rolling_loglikelihood_and_chat_template_equal_hf(both):
    from lm_eval.api.instance import Instance
    _, _, ours_lm, hf_lm = both
    texts = ["Which word is number 2? cat dog fox", "apple pear " * 40]  # the second spans two windows (128)
    requests = [Instance("loglikelihood_rolling", {}, (t,), i) for i, t in enumerate(texts)]
    ours = np.array(ours_lm.loglikelihood_rolling(requests))
    hf = np.array(hf_lm.loglikelihood_rolling(requests, disable_tqdm=True))
    tokens = np.array([len(ours_lm.tok_encode(t)) for t in texts])
    assert tokens[1] > ours_lm.max_length and ours.min() < -10
    # a sum over every token: each token's log-likelihood to 1e-4 (float32 sums differ in the last bits)
    assert (np.abs(ours - hf) <= TOLERANCE * tokens).all()
    chat = [{"role": "user", "content": "Which word is number 1? red blue green"}]
    assert ours_lm.apply_chat_template(chat) == hf_lm.apply_chat_template(chat)
    prefilled = chat + [{"role": "assistant", "content": "The answer is"}]
    assert ours_lm.apply_chat_template(prefilled, False) == hf_lm.apply_chat_template(prefilled, False)


@pytest.mark.slow
def test_unknown_task_and_missing_data_are_refused_naming_the_task(tasks_dir, tmp_path, capsys):
    with pytest.raises(EvalError, match=r"'no_such_task_xyz': lm-eval knows no task.*tiny_pick_mc"):
        resolve_tasks(["tiny_pick_mc", "no_such_task_xyz"], [str(tasks_dir)])
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "gone.yaml").write_text(MC_YAML.replace("tiny_pick_mc", "gone_mc").replace("pick_mc.json", "gone.json"))
    with pytest.raises(EvalError, match=r"task 'gone_mc': its data file .*gone.json is not on disk"):
        resolve_tasks(["gone_mc"], [str(broken)])
    assert evaluate_main(["--model", str(tasks_dir), "--tasks", "no_such_task_xyz", "--include-path", str(tasks_dir),
                          "--runs-dir", str(tmp_path / "runs")]) == 2
    assert evaluate_main(["--model", str(tmp_path / "nowhere"), "--tasks", "tiny_pick_mc", "--include-path",
                          str(tasks_dir), "--runs-dir", str(tmp_path / "runs")]) == 2
    assert "model" in capsys.readouterr().err and not (tmp_path / "runs").exists(), "a refused evaluation makes no folder"
    with pytest.raises(EvalError, match=r"model .*tasks_dir|neither a model folder"):
        EvalSettings(model=str(tasks_dir), tasks=["tiny_pick_mc"]).check()


@pytest.mark.slow
def test_evaluation_run_folder_records_progress_and_results(lora_run, tasks_dir, tmp_path, both):
    settings = EvalSettings(model=str(lora_run), tasks=["tiny_pick_mc"], include_path=[str(tasks_dir)], limit=5,
                            batch_size=4, label="best", source_run=lora_run.name)
    run = create_eval_run(tmp_path / "runs", settings)
    assert run.path.parent == tmp_path / "runs" / "evals" and run.read_status().state == "queued"
    assert run_folder(RunDir(run.path)) == 0
    status = run.read_status()
    assert status.state == "finished" and status.step == status.total_steps == 15  # 5 items x 3 choices
    results = read_results(run.path)
    ours, _, _, _ = both
    assert results["tasks"]["tiny_pick_mc"]["acc"] == pytest.approx(
        np.mean([s["acc"] for s in ours["samples"]["tiny_pick_mc"][:5]]))
    assert results["label"] == "best" and results["n_samples"] == {"tiny_pick_mc": 5}
    assert len((run.path / "samples.jsonl").read_text().splitlines()) == 5


@pytest.mark.slow
def test_lm_evals_own_cli_runs_the_mindtune_model(lora_run, tasks_dir, tmp_path, both):
    """`python -m core.lm_eval_cli` is lm-eval's CLI (`lm-eval run ...`) with `--model mindtune`
    registered: on the same checkpoint it gives the in-process run's accuracy and log-likelihoods.
    lm-eval reads the tasks' relative data_files from the working directory: run it there."""
    import os
    import subprocess
    import sys
    repo = Path(__file__).resolve().parents[2]
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(repo)}
    done = subprocess.run([sys.executable, "-m", "core.lm_eval_cli", "run", "--model", "mindtune", "--model_args",
                           f"pretrained={lora_run / 'checkpoints' / 'best'}", "--batch_size", "4", "--tasks", "tiny_pick_mc",
                           "--include_path", str(tasks_dir), "--output_path", str(out), "--log_samples"],
                          cwd=tasks_dir, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(next(out.rglob("results_*.json")).read_text())
    ours, _, _, _ = both
    assert results["results"]["tiny_pick_mc"]["acc,none"] == ours["results"]["tiny_pick_mc"]["acc,none"]
    samples = [json.loads(line) for line in next(out.rglob("samples_tiny_pick_mc_*.jsonl")).read_text().splitlines()]
    cli_ll = np.array([[r[0][0] for r in s["resps"]] for s in sorted(samples, key=lambda s: s["doc_id"])], dtype=float)
    in_process = np.array([[r[0][0] for r in s["resps"]] for s in ours["samples"]["tiny_pick_mc"]])
    assert cli_ll.shape == (12, 3) and np.abs(cli_ll - in_process).max() <= TOLERANCE
    # without the wrapper, lm-eval's own entry point does not know the model (no entry points in 0.4.13)
    plain = subprocess.run([sys.executable, "-c", "import sys; from lm_eval.__main__ import cli_evaluate; "
                            "sys.argv = ['lm-eval', 'run', '--model', 'mindtune', '--tasks', 'tiny_pick_mc', "
                            f"'--include_path', {str(tasks_dir)!r}]; cli_evaluate()"],
                           cwd=tasks_dir, env=env, capture_output=True, text=True, timeout=300)
    assert plain.returncode != 0 and "mindtune" in plain.stderr
