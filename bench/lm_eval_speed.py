"""lm-eval's local demo tasks (data/eval_tasks) on mindtune's lm-eval model (core.engine.lm_eval_model,
MindSpore) against lm-eval's own Hugging Face backend (`hf`, PyTorch) on the same model folder and
CPU threads, in one process: log-likelihood items per second (demo_story_mc), generated tokens per
second (demo_story_gen), the ratio mindtune / hf (target >= 1.2x on both), and whether the scores
and every item's answer are identical.

    .venv/bin/python bench/lm_eval_speed.py --models demo --limit 40
    flock /tmp/mindtune-heavy.lock .venv/bin/python bench/lm_eval_speed.py --models 0.5b --limit 8

`demo` is models/tiny-demo; `0.5b` the Qwen2.5-0.5B shape with random bf16 weights
(bench/real_models.py, made under /tmp once), both loaded in float32. Prints one JSON line per model.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TASKS = ("demo_story_mc", "demo_story_gen")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def model_folder(name: str) -> Path:
    if name == "demo":
        return ROOT / "models" / "tiny-demo"
    from bench.real_models import make_model
    return make_model(Path("/tmp") / f"mindtune-bench-{name}", name)


class Timed:
    """Wraps an lm-eval model's request methods, adding up the seconds each takes."""

    def __init__(self, lm):
        self.seconds = {"loglikelihood": 0.0, "generate_until": 0.0}
        self.counts = {"loglikelihood": 0, "generate_until": 0}
        for kind in self.seconds:
            setattr(lm, kind, self._wrap(kind, getattr(lm, kind)))

    def _wrap(self, kind, method):
        def timed(requests, *args, **kwargs):
            start = time.perf_counter()
            out = method(requests, *args, **kwargs)
            self.seconds[kind] += time.perf_counter() - start
            self.counts[kind] += len(requests)
            return out
        return timed


def run(lm, limit: int) -> tuple[dict, Timed]:
    from lm_eval.evaluator import simple_evaluate
    from core.evaluate import resolve_tasks
    timer = Timed(lm)
    tasks, manager = resolve_tasks(list(TASKS), [str(ROOT / "data" / "eval_tasks")])
    output = simple_evaluate(model=lm, tasks=tasks, task_manager=manager, limit=limit, log_samples=True,
                             bootstrap_iters=0)
    return output, timer


def answers(output: dict) -> dict:
    return {task: [s["resps"] for s in output["samples"][task]] for task in TASKS}


def bench(name: str, limit: int, batch_size: int, threads: int) -> dict:
    import numpy as np
    import torch
    from lm_eval.models.huggingface import HFLM
    from core.evaluate import go_offline
    from core.engine.generate import use_device
    from core.engine.lm_eval_model import MindtuneLM
    go_offline()
    use_device("cpu")
    torch.set_num_threads(threads)
    folder = model_folder(name)
    ours_lm = MindtuneLM(str(folder), batch_size=batch_size)
    ours, ours_t = run(ours_lm, limit)
    # tokens up to each item's stop string or EOS: the same work for both backends (hf's batch goes
    # on until every row has stopped; its time counts that)
    generated = ours_lm.generated_tokens
    del ours_lm
    hf_lm = HFLM(pretrained=str(folder), batch_size=batch_size, device="cpu", dtype="float32")
    hf, hf_t = run(hf_lm, limit)
    ll_ours = np.array([[r[0][0] for r in s["resps"]] for s in ours["samples"]["demo_story_mc"]])
    ll_hf = np.array([[r[0][0] for r in s["resps"]] for s in hf["samples"]["demo_story_mc"]])
    n_ll = ours_t.counts["loglikelihood"]
    row = {
        "model": name, "cpu": cpu_model(), "threads": threads, "batch_size": batch_size, "items": limit,
        "loglikelihood_requests": n_ll, "generated_tokens": generated,
        "mindtune_ll_items_s": round(n_ll / ours_t.seconds["loglikelihood"], 2),
        "hf_ll_items_s": round(n_ll / hf_t.seconds["loglikelihood"], 2),
        "mindtune_gen_tokens_s": round(generated / ours_t.seconds["generate_until"], 2),
        "hf_gen_tokens_s": round(generated / hf_t.seconds["generate_until"], 2),
        "seconds": {"mindtune": {k: round(v, 2) for k, v in ours_t.seconds.items()},
                    "hf": {k: round(v, 2) for k, v in hf_t.seconds.items()}},
        "max_ll_diff": float(np.abs(ll_ours - ll_hf).max()),
        "max_ll_rel_diff": float((np.abs(ll_ours - ll_hf) / np.maximum(np.abs(ll_hf), 1e-9)).max()),
        "ll_range": [float(ll_hf.min()), float(ll_hf.max())],
        "scores_identical": all(ours["results"][t] == hf["results"][t] for t in TASKS),
        "answers_identical": answers(ours)["demo_story_gen"] == answers(hf)["demo_story_gen"]
        and [[r[0][1] for r in s["resps"]] for s in ours["samples"]["demo_story_mc"]]
        == [[r[0][1] for r in s["resps"]] for s in hf["samples"]["demo_story_mc"]],
        "scores": {t: {k: v for k, v in ours["results"][t].items() if "," in k and "stderr" not in k}
                   for t in TASKS},
    }
    row["ll_ratio"] = round(hf_t.seconds["loglikelihood"] / ours_t.seconds["loglikelihood"], 2)
    row["gen_ratio"] = round(hf_t.seconds["generate_until"] / ours_t.seconds["generate_until"], 2)
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="demo", help="comma-separated: demo, 0.5b")
    parser.add_argument("--limit", type=int, default=40, help="items per task")
    parser.add_argument("--batch-size", type=int, default=8, help="both backends")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="PyTorch's intra-op threads")
    args = parser.parse_args(argv)
    for name in args.models.split(","):
        print(json.dumps(bench(name.strip(), args.limit, args.batch_size, args.threads)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
