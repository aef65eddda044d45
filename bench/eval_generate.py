"""Evaluation and generation throughput on the shipped demo model: validation tokens/s of the
engine's compiled eval step (the whole fixed validation set, as `core.train` evaluates it), and
generation tokens/s with the key/value cache against recomputing the whole sequence each token.

    .venv/bin/python bench/eval_generate.py
    .venv/bin/python bench/eval_generate.py --new-tokens 64 --prompts 8
    .venv/bin/python bench/eval_generate.py --async-launch   # MindSpore's default op queue, for comparison
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(ROOT / "models" / "tiny-demo"))
    parser.add_argument("--config", default=str(ROOT / "configs" / "lora_demo.yaml"))
    parser.add_argument("--prompts", type=int, default=8, help="generation batch (test prompts)")
    parser.add_argument("--new-tokens", type=int, default=64, help="tokens generated per prompt")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--async-launch", action="store_true",
                        help="keep MindSpore's asynchronous PyNative op queue (core.engine.generate.use_device "
                             "launches ops synchronously on the CPU, as the engine does)")
    args = parser.parse_args()

    import mindspore as ms
    from core.engine.checkpoint import load_hf_model
    from core.spec.config import load_config
    from core.data.pipeline import eval_batches, load_splits, padded_length
    from core.engine.fused import enable as enable_fused_kernels
    from core.engine.generate import SamplingSettings, generate, use_device
    from core.data.tokenizer import Tokenizer
    from core.engine.train_step import EvalStep
    if args.async_launch:
        ms.set_context(mode=ms.PYNATIVE_MODE, device_target="CPU")
    else:
        use_device("cpu")

    config = load_config(args.config, [f"model.path={args.model}"])
    tokenizer = Tokenizer.from_dir(args.model)
    splits = load_splits(config.data, tokenizer, config.run.seed, cache_dir=None)
    model = load_hf_model(args.model)
    kernels = enable_fused_kernels(model)  # as core.train's worker (MINDTUNE_FUSED_KERNELS=0: composed)
    print(f"kernels: {kernels}")
    length = padded_length(config.data.max_seq_len, splits.train, splits.validation)
    step = EvalStep(model)
    batch = config.train.micro_batch_size
    pad = tokenizer.pad_token_id or 0

    def evaluate() -> tuple[float, int, int]:
        start, tokens, padded = time.perf_counter(), 0, 0
        for b in eval_batches(splits.validation, batch, length, pad):
            step(b["input_ids"], b["labels"], b["attention_mask"])
            tokens += int(b["attention_mask"].sum())
            padded += b["input_ids"].size
        return time.perf_counter() - start, tokens, padded

    evaluate()  # compiles
    runs = [evaluate() for _ in range(args.repeats)]
    seconds = statistics.median(r[0] for r in runs)
    _, tokens, padded = runs[0]
    print(f"evaluation: {len(splits.validation)} validation samples, batch {batch}, length {length}: "
          f"{seconds:.2f} s, {tokens / seconds:,.0f} real tokens/s ({padded / seconds:,.0f} incl. padding)")

    prompts = [r.prompt_ids for r in splits.test_records[:args.prompts]]
    settings = SamplingSettings(max_new_tokens=args.new_tokens)
    results = {}
    for use_cache in (True, False):
        generate(model, prompts, SamplingSettings(max_new_tokens=2), set(), pad, use_cache=use_cache)  # warm-up
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            out = generate(model, prompts, settings, set(), pad, use_cache=use_cache)  # no EOS: all tokens
            times.append(time.perf_counter() - start)
        made = sum(len(o) for o in out)
        results[use_cache] = made / statistics.median(times)
        print(f"generation {'with' if use_cache else 'without'} KV cache: {len(prompts)} prompts × "
              f"{args.new_tokens} new tokens: {statistics.median(times):.2f} s, {results[use_cache]:,.1f} tokens/s")
    print(f"KV cache speed-up: {results[True] / results[False]:.2f}x")


if __name__ == "__main__":
    main()
