"""What q8_0 and q4_k_m cost in perplexity, on weights that are not noise (issue 39): a run exported to
f16, q8_0 and q4_k_m GGUF through core.engine.gguf_run (each file checked as an export checks it), then
every file's perplexity read by llama.cpp over more of the run's validation samples than the check
reads: over their answers' tokens (what the run trained; the check's 8 samples are 24 tokens on the
demo task) and over every token (the prompts too, which an answers-only run never trained).

    .venv/bin/python bench/gguf_quant_ppl.py --run runs/<demo run>      # the demo run's best checkpoint
    .venv/bin/python bench/gguf_quant_ppl.py --tiled --samples 16       # the 0.5B shape, demo weights tiled
    .venv/bin/python bench/gguf_quant_ppl.py --random --samples 16      # the 0.5B shape, N(0, 0.02) weights

--tiled: bench/real_models.py's Qwen2.5-0.5B shape with the trained demo model's weights tiled
(`TiledDemo`) and bench/gguf_export.py's random LoRA r8 on it; --random: the same with random weights,
where perplexity is ~the vocabulary's size and a quantization's change in it means nothing.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

QUANTS = ("f16", "q8_0", "q4_k_m")


def perplexities(path: Path, samples, threads: int, vocab: int | None = None) -> dict[str, tuple[float, int]]:
    """llama.cpp's perplexity (and token count) over the samples' answer tokens ("answers") and over
    every token but the first ("text"): float32 cache, no flash attention (core.engine.gguf_check's
    settings). `vocab`: the same again with the softmax over the first `vocab` ids only (the
    tokenizer's: the 0.5B shape's embedding rows past the demo tokenizer's 1,024 are padding that
    takes probability mass)."""
    import llama_cpp
    from core.data.pipeline import IGNORE_INDEX
    n_ctx = max(len(s.ids) for s in samples)
    llm = llama_cpp.Llama(str(path), n_ctx=n_ctx, n_batch=n_ctx, n_ubatch=n_ctx, logits_all=True, verbose=False,
                          n_threads=threads, n_threads_batch=threads, type_k=0, type_v=0, flash_attn=False)
    kinds = {"": None} if vocab is None else {"": None, f" over the tokenizer's {vocab} ids": vocab}
    sums = {f"{kind}{suffix}": [0.0, 0] for kind in ("answers", "text") for suffix in kinds}
    try:
        for sample in samples:
            ids = sample.ids
            llm.reset()
            llm.eval(ids)
            every = np.array(llm.scores[: len(ids)], dtype=np.float64)
            for suffix, width in kinds.items():
                logits = every[:, :width]
                top = logits.max(axis=1, keepdims=True)
                logz = np.log(np.exp(logits - top).sum(axis=1)) + top[:, 0]
                for t in range(1, len(ids)):
                    nll = float(logz[t - 1] - logits[t - 1, ids[t]])
                    sums["text" + suffix][0] += nll
                    sums["text" + suffix][1] += 1
                    answer = t - len(sample.prompt)
                    if answer >= 0 and sample.labels[answer] != IGNORE_INDEX:
                        sums["answers" + suffix][0] += nll
                        sums["answers" + suffix][1] += 1
    finally:
        llm.close()
    return {kind: (float(np.exp(total / max(n, 1))), n) for kind, (total, n) in sums.items()}


def check_vocab(path: Path) -> int:
    import gguf
    reader = gguf.GGUFReader(str(path))
    return len(reader.fields["tokenizer.ggml.tokens"].data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--run", type=Path, help="a run folder (its best checkpoint is exported)")
    which.add_argument("--tiled", action="store_true", help="the 0.5B shape with the demo's weights tiled")
    which.add_argument("--random", action="store_true", help="the 0.5B shape with random weights")
    parser.add_argument("--samples", type=int, default=64, help="validation samples read")
    parser.add_argument("--work", type=Path, help="where the 0.5B run is made and kept (default: a temporary folder)")
    parser.add_argument("--models-dir", default=os.path.join(tempfile.gettempdir(), "mindtune-bench"))
    args = parser.parse_args()
    from core.data.tokenizer import Tokenizer
    from core.engine import gguf_run
    from core.engine.export import checkpoint_folder, read_state
    from core.engine.gguf_check import check_threads, validation_samples
    work = None
    if args.run is None:
        from bench.gguf_export import make_run
        from bench.real_models import make_model
        weights = "tiled-demo" if args.tiled else "random"
        model_dir = make_model(Path(args.models_dir) / f"qwen2.5-0.5b-{weights}", "0.5b", weights=weights)
        if args.work is None:
            work = tempfile.TemporaryDirectory(prefix="mindtune-gguf-ppl-")
        folder = Path(work.name) if work else args.work
        folder.mkdir(parents=True, exist_ok=True)
        run = next((p for p in (folder / "runs").glob("*") if p.is_dir()), None) or make_run(folder, model_dir)
    else:
        run = args.run
    state = read_state(checkpoint_folder(run / "checkpoints" / "best"))
    tokenizer = Tokenizer.from_dir(state["base_model"]["path"])
    samples = validation_samples(run, tokenizer, args.samples, 10 ** 6)
    threads = check_threads()
    print(f"[{run.name}: {len(samples)} validation samples, {sum(len(s.ids) for s in samples)} tokens; load "
          f"average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; llama.cpp on {threads} threads]", flush=True)
    rows = {}
    for quant in QUANTS:
        start, cpu = time.perf_counter(), time.process_time()
        path = gguf_run.export_gguf(run, "best", quant)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        check = json.loads(gguf_run.check_path(path).read_text())
        found = perplexities(path, samples, threads,
                             tokenizer.vocab_size if tokenizer.vocab_size < check_vocab(path) else None)
        rows[quant] = found
        print(f"  {quant:7s} {path.stat().st_size / 2**20:7.1f} MB  export+check {wall:6.1f} s (CPU {cpu:5.1f} s, "
              f"check {check['seconds']} s)  check: passed {check['passed']}, its ppl {check['perplexity']:.4f}"
              f" (f16 {check['perplexity_reference'] or check['perplexity']:.4f}), greedy "
              f"{check['greedy_equal']}+{check['greedy_ties']}/{check['prompts']}  |  "
              + ";  ".join(f"{kind} ppl {ppl:.4f} over {n} tokens ({100 * (ppl / rows['f16'][kind][0] - 1):+.2f}% "
                           "vs f16)" for kind, (ppl, n) in found.items()), flush=True)
    if work is not None:
        work.cleanup()


if __name__ == "__main__":
    main()
