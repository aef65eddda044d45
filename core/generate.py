"""Continue a prompt with a model folder or a training checkpoint, on the CPU.

    python -m core.generate --model DIR --prompt TEXT [--chat] [--max-new-tokens N] ...
    python -m core.generate --checkpoint runs/<id>/checkpoints/best --chat --prompt TEXT

prints the continuation (`--json`: one JSON object, the console's Try tab reads it). The generation
itself is core.engine.generate's.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `core` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.data.tokenizer import Tokenizer, TokenizerError
from core.engine.checkpoint import load_hf_model
from core.spec.errors import CheckpointError, report, said_of
from core.engine.export import load_trained_model
from core.engine.fused import enable as enable_fused_kernels
from core.engine.generate import SamplingSettings, generate, use_device
from core.spec.messages import Message


def _parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m core.generate", description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", help="Hugging Face model folder (config.json, model.safetensors, tokenizer.json)")
    source.add_argument("--checkpoint", help="a training checkpoint (runs/<id>/checkpoints/best): its base model "
                                             "with the fine-tuned weights or LoRA adapter applied")
    parser.add_argument("--prompt", required=True, help="text to continue (or the user message with --chat)")
    parser.add_argument("--chat", action="store_true", help="wrap the prompt in the model's chat template")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--top-k", type=int, default=0, help="sample among the k likeliest tokens (0: all)")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    parser.add_argument("--no-cache", action="store_true", help="recompute the whole sequence each step")
    parser.add_argument("--json", action="store_true", help="print one JSON object (text, tokens, seconds)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    try:
        settings = SamplingSettings(args.max_new_tokens, args.temperature, args.top_p, args.seed, args.top_k)
        if args.checkpoint:
            model, state = load_trained_model(args.checkpoint)
            tokenizer = Tokenizer.from_dir(state["base_model"]["path"])
        else:
            tokenizer = Tokenizer.from_dir(args.model)
            model = load_hf_model(args.model, args.dtype)
        enable_fused_kernels(model)  # the prompt's prefill; falls back to composed ops by itself
        if args.chat:
            prompt_ids = tokenizer.apply_chat_template([{"role": "user", "content": args.prompt}],
                                                       add_generation_prompt=True, tokenize=True)
        else:
            prompt_ids = tokenizer.encode(args.prompt)
        eos = set(tokenizer.eos_token_ids) | set(model.args.eos_token_ids)
        start = time.perf_counter()
        new_ids = generate(model, [prompt_ids], settings, eos, tokenizer.pad_token_id or 0,
                           use_cache=not args.no_cache)[0]
    except (CheckpointError, TokenizerError, ValueError) as exc:
        report(exc)
        if args.json:  # the console's Try tab: the message by its id, said in the page's language
            message = said_of(exc)
            print(json.dumps({"error": str(exc), **({"message": message.to_json()} if isinstance(message, Message)
                                                     else {})}))
        return 2
    seconds = time.perf_counter() - start
    text = tokenizer.decode(new_ids)
    if args.json:
        print(json.dumps({"text": text, "new_tokens": len(new_ids), "seconds": round(seconds, 3)}))
        return 0
    print(("" if args.chat else args.prompt) + text)
    print(f"[{len(new_ids)} tokens in {seconds:.2f} s, {len(new_ids) / max(seconds, 1e-9):.1f} tokens/s]",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    use_device("cpu")
    sys.exit(main())
