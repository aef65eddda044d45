"""A DPO training step of mindtune against PyTorch + PEFT with the DPO loss as TRL computes it, side by
side in one run (issue 26, Numbers: the bench row).

For the ~25M Llama config of bench/train_step.py (random weights made here; 4 pairs = 8 rows of 256
tokens) and the Qwen2.5-0.5B shape (bench/real_models.py: the hub's config.json, random bf16
weights; 1 pair = 2 rows of 256), LoRA r=8 on every projection, fp32 compute, beta 0.1:

- mindtune: `core.engine.preference.PreferenceStep` (the engine's own compiled step: the reference's
  log-probabilities from the model with its adapter switched off, then the policy's forward and
  backward on the chosen and rejected rows in one batch, AdamW, clipping), what
  `python -m core.train` runs with train.objective dpo;
- PyTorch 2.13 eager: transformers' Qwen2/Llama model, PEFT LoRA on the same modules, the
  reference pass under `disable_adapter()` and `torch.no_grad()`, the sigmoid DPO loss written
  out as TRL's DPOTrainer computes it (-logsigmoid(beta * (chosen log-ratio - rejected log-ratio))),
  `torch.optim.AdamW`, the same clipping.

Both see the same weights and the same pairs (a 64-token prompt shared by both answers, answers
of random tokens filling the row, no padding): their first losses must agree (log 2: at the first
step the policy is the reference). Each worker is a fresh subprocess (imports, compilation and
peak RSS its own); the median of the timed steps is reported. It prints tokens/s (all rows'
tokens, prompt included) of both and the ratio, the CPU-time ratio (steadier on a loaded machine),
and each side's peak RSS against core.spec.memory's estimate for the same run (train.objective dpo).

    .venv/bin/python bench/dpo_step.py                                   # 25m and 0.5b
    .venv/bin/python bench/dpo_step.py --configs 25m --steps 6 --rounds 3
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.train_step import CONFIG_25M, lora_targets, make_checkpoint, peak_rss_mb  # noqa: E402

BETA = 0.1
PROMPT = 64
SHAPES = {"25m": (4, 256), "0.5b": (1, 256)}  # config -> (pairs per micro batch, row length)


def pair_arrays(vocab: int, pairs: int, seq: int, seed: int = 0):
    """`pairs` pairs as 2·pairs rows (chosen rows first): a shared PROMPT-token prompt (masked), then
    each answer's random tokens to the end of the row (labelled); no padding."""
    import numpy as np
    rng = np.random.default_rng(seed)
    prompts = rng.integers(3, vocab, size=(pairs, PROMPT), dtype=np.int64)
    answers = rng.integers(3, vocab, size=(2 * pairs, seq - PROMPT), dtype=np.int64)
    ids = np.concatenate([np.concatenate([prompts, prompts]), answers], axis=1).astype(np.int32)
    labels = ids.copy()
    labels[:, :PROMPT] = -100
    return ids, labels, np.ones_like(ids), np.zeros(2 * pairs, np.float32)


def worker_mindtune(model_dir: Path, steps: int, warmup: int, pairs: int, seq: int) -> dict:
    import numpy as np
    import mindspore as ms
    from core.engine.checkpoint import load_hf_model
    from core.engine.fused import enable as enable_fused_kernels
    from core.engine.generate import use_device
    from core.engine.lora import inject_lora, mark_only_lora_trainable
    from core.engine.model import share_layer_graphs
    from core.engine.preference import Objective, PreferenceStep
    from core.engine.train_step import WarmupDecaySchedule, adamw
    use_device("cpu")
    ms.set_seed(0)
    model = load_hf_model(model_dir, "float32")
    inject_lora(model, 8, 16.0, 0.0, lora_targets(model_dir))
    params = mark_only_lora_trainable(model)
    kernels = enable_fused_kernels(model)
    share_layer_graphs(model)
    model.set_train(True)
    step = PreferenceStep(model, adamw(params, WarmupDecaySchedule(1e-4, 0, 1000, "constant", 1.0), 0.0), 1.0, None,
                          Objective("dpo", beta=BETA))
    batch = pair_arrays(model.args.vocab_size, pairs, seq)
    times, cpu, losses = [], [], []
    for _ in range(warmup + steps):
        t, c = time.time(), time.process_time()
        loss, _, _, _ = step([batch])
        times.append(time.time() - t)
        cpu.append(time.process_time() - c)
        losses.append(loss)
    return {"step_s": statistics.median(times[warmup:]), "step_cpu_s": statistics.median(cpu[warmup:]),
            "first_step_s": times[0], "losses": losses[:3], "peak_rss_mb": peak_rss_mb(), "kernels": kernels,
            "trainable": int(sum(int(np.prod(p.shape)) for p in params))}


def worker_torch(model_dir: Path, steps: int, warmup: int, pairs: int, seq: int) -> dict:
    import torch
    import torch.nn.functional as F
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="sdpa")
    model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0,
                                             target_modules=lora_targets(model_dir)))
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.0)
    ids, labels, mask, _ = (torch.from_numpy(a.astype("int64")) for a in pair_arrays(model.config.vocab_size,
                                                                                      pairs, seq))

    def logps(m):
        logits = m(input_ids=ids, attention_mask=mask).logits[:, :-1].float()
        targets = labels[:, 1:]
        valid = targets != -100
        picked = torch.gather(F.log_softmax(logits, -1), 2, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)
        return (picked * valid).sum(1)

    times, cpu, losses = [], [], []
    for _ in range(warmup + steps):
        t, c = time.time(), time.process_time()
        with torch.no_grad(), model.disable_adapter():
            ref = logps(model)
        policy = logps(model)
        # TRL DPOTrainer.dpo_loss, loss_type "sigmoid", label_smoothing 0
        logits = (policy[:pairs] - ref[:pairs]) - (policy[pairs:] - ref[pairs:])
        loss = -F.logsigmoid(BETA * logits).mean()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        times.append(time.time() - t)
        cpu.append(time.process_time() - c)
        losses.append(float(loss))
    return {"step_s": statistics.median(times[warmup:]), "step_cpu_s": statistics.median(cpu[warmup:]),
            "first_step_s": times[0], "losses": losses[:3], "peak_rss_mb": peak_rss_mb(),
            "threads": torch.get_num_threads(), "trainable": int(sum(p.numel() for p in params))}


def run_worker(kind: str, **kwargs) -> dict:
    import subprocess
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        out = Path(handle.name)
    argv = [sys.executable, __file__, "--worker", kind, "--out", str(out)]
    for key, value in kwargs.items():
        argv += [f"--{key.replace('_', '-')}", str(value)]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, env={**os.environ, "GLOG_v": "3"})
    if proc.returncode != 0:
        raise SystemExit(f"{kind} worker failed:\n{proc.stderr[-4000:]}")
    result = json.loads(out.read_text())
    out.unlink()
    return result


def estimate_mb(model_dir: Path, pairs: int, seq: int) -> float:
    """core.spec.memory's estimate of a core.train worker for this DPO run (train + eval graphs)."""
    from core.spec.config import load_config
    from core.spec.memory import estimate_memory
    from core.spec.model_args import read_model_args
    config = load_config(ROOT / "configs" / "defaults.yaml", [
        f"model.path={model_dir}", "method=lora", "lora.rank=8", "train.objective=dpo",
        f"train.micro_batch_size={pairs}", f"data.max_seq_len={seq}", "data.packing=false", "eval.downstream=false"])
    return estimate_memory(config, read_model_args(model_dir), seq).total_mb


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default="25m,0.5b", help="comma list of 25m, 0.5b")
    parser.add_argument("--models-dir", default=os.path.join(tempfile.gettempdir(), "mindtune-bench"),
                        help="where the 0.5b checkpoint is made (kept: ~1 GB)")
    parser.add_argument("--steps", type=int, default=4, help="timed steps (median reported)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first (compilation)")
    parser.add_argument("--rounds", type=int, default=1, help="mindtune/PyTorch worker pairs, order alternating")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--model-dir", help=argparse.SUPPRESS)
    parser.add_argument("--pairs", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--seq", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        fn = worker_mindtune if args.worker == "mindtune" else worker_torch
        result = fn(Path(args.model_dir), args.steps, args.warmup, args.pairs, args.seq)
        Path(args.out).write_text(json.dumps(result))
        return

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.configs.split(","):
            if name == "25m":
                model_dir = make_checkpoint(Path(tmp) / name, CONFIG_25M)
            elif name == "0.5b":
                from bench.real_models import make_model
                model_dir = make_model(Path(args.models_dir) / "qwen2.5-0.5b", "0.5b")
            else:
                raise SystemExit(f"--configs: unknown {name!r}; valid: 25m, 0.5b")
            pairs, seq = SHAPES[name]
            common = dict(model_dir=model_dir, steps=args.steps, warmup=args.warmup, pairs=pairs, seq=seq)
            results = []
            for n in range(args.rounds):  # alternate the order: each pair ran under about the same load
                order = ("mindtune", "torch") if n % 2 == 0 else ("torch", "mindtune")
                got = {kind: run_worker(kind, **common) for kind in order}
                results.append((got["mindtune"], got["torch"]))
            wall = [pt["step_s"] / mt["step_s"] for mt, pt in results]
            mt, pt = results[sorted(range(len(wall)), key=wall.__getitem__)[(len(wall) - 1) // 2]]
            row = dict(name=name, pairs=pairs, seq=seq, mt=mt, pt=pt, estimate=estimate_mb(model_dir, pairs, seq),
                       wall=wall, cpu=[p["step_cpu_s"] / m["step_cpu_s"] for m, p in results])
            rows.append(row)
            print_row(row)
    print_table(rows)


def print_row(row: dict) -> None:
    mt, pt, tokens = row["mt"], row["pt"], 2 * row["pairs"] * row["seq"]
    print(f"[{row['name']} dpo lora] mindtune {tokens / mt['step_s']:.0f} tok/s (step {mt['step_s']:.3f} s, "
          f"kernels {mt['kernels']}), pytorch {tokens / pt['step_s']:.0f} tok/s (step {pt['step_s']:.3f} s, "
          f"{pt['threads']} threads); ratio {pt['step_s'] / mt['step_s']:.2f}, CPU-time ratio "
          f"{pt['step_cpu_s'] / mt['step_cpu_s']:.2f}; first losses mindtune {mt['losses'][0]:.6f} pytorch "
          f"{pt['losses'][0]:.6f}; trainable {mt['trainable']} / {pt['trainable']}", flush=True)
    if len(row["wall"]) > 1:
        print("    rounds: wall ratio " + ", ".join(f"{r:.2f}" for r in row["wall"]) + "; CPU-time ratio "
              + ", ".join(f"{r:.2f}" for r in row["cpu"]), flush=True)


def print_table(rows: list[dict]) -> None:
    print("\nDPO step (LoRA r=8, fp32, beta 0.1), tokens = 2 rows per pair, prompt included; ratio = PyTorch step "
          "time / mindtune step time (above 1: mindtune faster)")
    print("| config | pairs x length | mindtune tok/s | PyTorch tok/s | ratio | CPU-time ratio | mindtune peak RSS "
          "| PyTorch peak RSS | estimate (core.spec.memory) | mindtune peak / estimate | first loss (both) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        mt, pt, tokens = r["mt"], r["pt"], 2 * r["pairs"] * r["seq"]
        print(f"| {r['name']} | {r['pairs']} x {r['seq']} | {tokens / mt['step_s']:.0f} | {tokens / pt['step_s']:.0f} "
              f"| {pt['step_s'] / mt['step_s']:.2f} | {pt['step_cpu_s'] / mt['step_cpu_s']:.2f} "
              f"| {mt['peak_rss_mb']:.0f} MB | {pt['peak_rss_mb']:.0f} MB | {r['estimate']:.0f} MB "
              f"| {mt['peak_rss_mb'] / r['estimate']:.2f} | {mt['losses'][0]:.5f} / {pt['losses'][0]:.5f} |")


if __name__ == "__main__":
    main()
