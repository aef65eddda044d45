"""The OpenAI-compatible endpoint's speed (issue 39): time to the first streamed token for a 32-token
chat prompt, and tokens/s through the endpoint (/v1/completions, a plain text continued to max_tokens)
against core.engine.generate called directly (what the Try tab runs) on the same prompt (greedy).

    .venv/bin/python bench/serve_speed.py [--checkpoint runs/<id>/checkpoints/best] [--rounds 5]

Without --checkpoint: the demo model with a random LoRA adapter (bench/gguf_export.py's run maker), whose
answers run to max_tokens (the trained demo answers one word and stops, which says nothing of tokens/s).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default=None)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=64)
    args = parser.parse_args()
    import openai
    from core.engine.generate import SamplingSettings, generate, use_device
    from core.serve import Served, make_server
    use_device("cpu")
    checkpoint = args.checkpoint
    if checkpoint is None:
        import tempfile
        from bench.gguf_export import make_run
        checkpoint = str(make_run(Path(tempfile.mkdtemp(prefix="mindtune-serve-")), ROOT / "models" / "tiny-demo",
                                  "demo-random-lora")
                         / "checkpoints" / "best")
    served = Served.load(checkpoint)
    server = make_server(served, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{server.server_address[1]}/v1", api_key="-")
    words = "Mia has a red kite and a blue ball. She takes them to the park by the lake on a sunny day."
    messages = [{"role": "user", "content": words}]
    prompt = served.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    while len(prompt) > 32:  # a 32-token prompt (the figure), cut by words
        words = words.rsplit(" ", 1)[0]
        messages = [{"role": "user", "content": words}]
        prompt = served.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    settings = SamplingSettings(max_new_tokens=args.max_tokens)
    story = "Mia has a red kite. She takes it to the park by the lake, and"  # a plain continuation: long answers
    story_ids = served.tokenizer.encode(story)
    first, direct, endpoint = [], [], []
    for _ in range(args.rounds + 1):  # the first round warms up
        start = time.perf_counter()
        stream = client.chat.completions.create(model=served.name, messages=messages, temperature=0,
                                                max_tokens=args.max_tokens, stream=True)
        got = None
        for chunk in stream:
            if got is None and chunk.choices and chunk.choices[0].delta.content:
                got = time.perf_counter() - start
        first.append(got)
        start = time.perf_counter()
        tokens = generate(served.model, [story_ids], settings, served.eos, served.tokenizer.pad_token_id or 0)[0]
        direct.append(len(tokens) / (time.perf_counter() - start))
        start = time.perf_counter()
        reply = client.completions.create(model=served.name, prompt=story, temperature=0, max_tokens=args.max_tokens)
        endpoint.append(reply.usage.completion_tokens / (time.perf_counter() - start))
    first, direct, endpoint = first[1:], direct[1:], endpoint[1:]
    print(f"[{served.name}: first token for a {len(prompt)}-token chat prompt; tokens/s continuing a "
          f"{len(story_ids)}-token text, greedy, {len(tokens)} new tokens; {args.rounds} rounds]")
    print(f"  first streamed token: median {1000 * statistics.median(first):.0f} ms (max {1000 * max(first):.0f})")
    print(f"  tokens/s: core.engine.generate {statistics.median(direct):.0f}, endpoint {statistics.median(endpoint):.0f} "
          f"({100 * (statistics.median(endpoint) / statistics.median(direct) - 1):+.1f}%)")
    server.shutdown()


if __name__ == "__main__":
    main()
