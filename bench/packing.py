"""Sequence packing, measured: padding efficiency, real (non-padding) training tokens per second and
the validation loss after a fixed number of real (non-padding) training tokens, packed vs one sample
per row.

Two datasets, each trained with the demo model and the demo LoRA recipe (r16, alpha 32, lr 3e-3,
fused CPU kernels when a compiler is there):
- demo: data/demo (alpaca, max_seq_len 256);
- long-tailed: text samples cut from the demo story corpus with log-normal lengths (median ~100
  tokens, mean ~130, the longest near 1,000), as alpaca's lengths are distributed; max_seq_len 1024.
Both modes start from the same weights and adapters and see the same samples in the same epoch
order; a packed micro batch holds as many rows as it takes to carry about the same number of
samples as the unpacked one, so both take about the same optimizer steps for the same real tokens.
They train in alternating blocks of steps in this one process, so a busy machine slows both alike:
the ratio is what to read (RULES: speed as ratios, interleaved). Validation is the same for both
(every validation sample once, loss per real token).

    .venv/bin/python bench/packing.py             # both datasets; ~20 min on a loaded 2-core CPU
    .venv/bin/python bench/packing.py --quick     # smaller token budget, for a smoke check (~8 min)
    .venv/bin/python bench/packing.py --only long-tailed --tokens 300000
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MODEL = ROOT / "models" / "tiny-demo"
BLOCK_STEPS = 5  # steps per mode before switching (interleaving)


@dataclass
class Dataset:
    name: str
    train: list
    validation: list
    max_seq_len: int


def demo_dataset(tokenizer) -> Dataset:
    from core.spec.config import load_config
    from core.data.pipeline import load_splits
    config = load_config(ROOT / "configs" / "lora_demo.yaml")
    splits = load_splits(config.data, tokenizer, config.run.seed, cache_dir=None)
    return Dataset("demo", splits.train, splits.validation, config.data.max_seq_len)


def long_tailed_dataset(tokenizer, n_train: int, n_val: int, seed: int = 0) -> Dataset:
    """Samples of log-normal token lengths cut from one stream of demo-corpus stories (EOS after
    each story), trained on every token; lengths clipped to [16, 1000] (~0.1% reach the clip)."""
    sys.path.insert(0, str(ROOT / "data"))
    from make_demo_data import generate_corpus  # noqa: E402 (the demo corpus generator)

    from core.data.pipeline import Sample
    rng = np.random.default_rng(seed)
    lengths = np.clip(rng.lognormal(math.log(100), 0.75, n_train + n_val).astype(int), 16, 1000)
    stream: list[int] = []
    documents = 0
    while len(stream) < lengths.sum():
        stories = generate_corpus(seed + documents, 2000, chat_fraction=0.0)
        for ids in tokenizer.encode_batch(stories, add_special_tokens=False):
            stream += ids + [tokenizer.eos_token_id]
        documents += 2000
    stream_ids = np.asarray(stream, dtype=np.int32)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    samples = [Sample(stream_ids[a:b].copy(), stream_ids[a:b].copy()) for a, b in zip(offsets, offsets[1:])]
    return Dataset("long-tailed", samples[:n_train], samples[n_train:], 1024)


class Mode:
    """One side of the comparison: a model with LoRA, its optimizer, train and eval steps, batches."""

    def __init__(self, packing: bool, data: Dataset, micro_batch: int, seed: int, threads: int):
        import mindspore as ms
        from core.engine.checkpoint import load_hf_model
        from core.data.pipeline import BatchIterator, packed_length, padded_length
        from core.engine.fused import enable as enable_fused
        from core.engine.lora import inject_lora, mark_only_lora_trainable
        from core.engine.model import share_layer_graphs
        from core.engine.train_step import EvalStep, TrainStep, WarmupDecaySchedule, adamw

        ms.set_seed(seed)  # the same adapters on both sides
        self.packing = packing
        self.model = load_hf_model(MODEL, "float32")
        inject_lora(self.model, 16, 32.0, 0.0, ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                                "down_proj"])
        params = mark_only_lora_trainable(self.model)
        self.kernels = enable_fused(self.model, threads)
        share_layer_graphs(self.model)
        schedule = WarmupDecaySchedule(3e-3, 10, 10_000, "constant", 1.0)
        self.step = TrainStep(self.model, adamw(params, schedule, 0.0), 1.0, None)
        self.eval_step = EvalStep(self.model)
        self.length = (packed_length(data.max_seq_len) if packing else
                       padded_length(data.max_seq_len, data.train, data.validation))
        self.eval_length = padded_length(data.max_seq_len, data.train, data.validation)
        self.batches = BatchIterator(data.train, micro_batch, seed=seed, length=self.length, packing=packing)
        self.micro_batch = micro_batch
        self.tokens = self.padded = self.steps = 0  # tokens, padded: of the timed steps
        self.trained_tokens = 0  # real tokens of every step (the budget)
        self.losses: list[float] = []
        self.seconds = 0.0  # of the timed steps (the first, which compiles, is not timed)

    def train_steps(self, n: int) -> None:
        from core.engine.train_step import step_inputs
        for _ in range(n):
            batch = next(self.batches)
            start = time.perf_counter()
            loss, _, applied, _ = self.step([step_inputs(batch)])
            elapsed = time.perf_counter() - start
            self.losses.append(loss)
            if not (applied and math.isfinite(loss)):
                raise SystemExit(f"{'packed' if self.packing else 'unpacked'}: step {self.steps + 1} not finite; "
                                 f"the losses before: {[round(x, 4) for x in self.losses[-8:]]}")
            real = int(batch["attention_mask"].sum())  # real (non-padding) tokens, as core.train counts them
            if self.steps > 0:
                self.seconds += elapsed
                self.tokens += real
                self.padded += batch["input_ids"].size
            self.steps += 1
            self.trained_tokens += real

    def validation_loss(self, data: Dataset) -> float:
        from core.data.pipeline import eval_batches
        from core.engine.train_step import step_inputs
        self.model.set_train(False)
        nll = tokens = 0.0
        for batch in eval_batches(data.validation, 8, self.eval_length):
            n, t = self.eval_step(*step_inputs(batch))
            nll, tokens = nll + n, tokens + t
        self.model.set_train(True)
        return nll / tokens


def compare(data: Dataset, token_budget: int, micro_batch: int, seed: int, threads: int) -> dict:
    from core.data.pipeline import packed_length, padded_length
    from core.data.packing import packing_efficiency, padding_efficiency
    lengths = [len(s) for s in data.train]
    plain_len = padded_length(data.max_seq_len, data.train, data.validation)
    pack_len = packed_length(data.max_seq_len)
    eff_plain, eff_packed = padding_efficiency(lengths, plain_len), packing_efficiency(lengths, pack_len)
    # packed rows per micro batch: about the unpacked micro batch's samples
    packed_batch = max(1, round(micro_batch * float(np.mean(lengths)) / (eff_packed * pack_len)))
    modes = {False: Mode(False, data, micro_batch, seed, threads), True: Mode(True, data, packed_batch, seed, threads)}
    base = modes[False].validation_loss(data)
    print(f"[{data.name}] {len(data.train)} train / {len(data.validation)} validation samples; rows of {plain_len} "
          f"(unpacked, micro batch {micro_batch}) vs {pack_len} (packed, micro batch {packed_batch}); kernels "
          f"{modes[False].kernels}; base val loss {base:.4f}", flush=True)
    reported = 0
    while any(m.trained_tokens < token_budget for m in modes.values()):
        for mode in modes.values():  # alternating blocks: both sides see the machine's load alike
            if mode.trained_tokens < token_budget:
                mode.train_steps(BLOCK_STEPS)
        done = {("packed" if p else "unpacked"): m.trained_tokens for p, m in modes.items()}
        if min(done.values()) >= reported + token_budget / 10:
            reported = min(done.values())
            print(f"  real tokens trained {done}; train loss (last step) "
                  f"{ {('packed' if p else 'unpacked'): round(m.losses[-1], 4) for p, m in modes.items()} }", flush=True)
    result = {"dataset": data.name, "train_samples": len(data.train), "mean_length": round(float(np.mean(lengths)), 1),
              "max_length": int(max(lengths)), "token_budget": token_budget}
    for packing, mode in modes.items():
        side = "packed" if packing else "unpacked"
        result[side] = {"row_length": mode.length, "micro_batch": mode.micro_batch, "steps": mode.steps,
                        "padding_efficiency": round(eff_packed if packing else eff_plain, 4),
                        "measured_padding_efficiency": round(mode.tokens / max(mode.padded, 1), 4),
                        "real_tokens_per_s": round(mode.tokens / mode.seconds, 1),
                        "val_loss": round(mode.validation_loss(data), 5)}
    result["base_val_loss"] = round(base, 5)
    result["tokens_per_s_ratio"] = round(result["packed"]["real_tokens_per_s"] / result["unpacked"]["real_tokens_per_s"], 3)
    result["val_loss_diff_pct"] = round(100 * (result["packed"]["val_loss"] / result["unpacked"]["val_loss"] - 1), 3)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small token budget (smoke check)")
    parser.add_argument("--only", choices=["demo", "long-tailed"], help="one dataset")
    parser.add_argument("--tokens", type=int, help="real (non-padding) training tokens per mode (default 100k demo, "
                        "120k long-tailed)")
    parser.add_argument("--micro-batch", type=int, default=8, help="unpacked micro batch (rows)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()

    from core.engine.generate import use_device
    from core.data.tokenizer import Tokenizer
    use_device("cpu")
    threads = len(os.sched_getaffinity(0))
    tokenizer = Tokenizer.from_dir(MODEL)
    budgets = {"demo": 20_000 if args.quick else 100_000, "long-tailed": 30_000 if args.quick else 120_000}
    results = []
    for name in ([args.only] if args.only else ["demo", "long-tailed"]):
        data = demo_dataset(tokenizer) if name == "demo" else long_tailed_dataset(
            tokenizer, 1500 if args.quick else 4000, 200)
        results.append(compare(data, args.tokens or budgets[name], args.micro_batch, args.seed, threads))
    print("\n| dataset | mode | row length × micro batch | padding efficiency | real tokens/s | steps | "
          "val loss after the budget |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        for side in ("unpacked", "packed"):
            s = r[side]
            print(f"| {r['dataset']} (mean {r['mean_length']}, max {r['max_length']} tokens) | {side} | "
                  f"{s['row_length']} × {s['micro_batch']} | {100 * s['padding_efficiency']:.1f}% | "
                  f"{s['real_tokens_per_s']:.0f} | {s['steps']} | {s['val_loss']:.4f} |")
        print(f"| {r['dataset']} | packed / unpacked | | | **{r['tokens_per_s_ratio']:.2f}×** | | "
              f"{r['val_loss_diff_pct']:+.2f}% (base {r['base_val_loss']:.4f}, {r['token_budget']:,} real tokens) |")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
