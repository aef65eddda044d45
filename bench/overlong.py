"""Issue 27's measure: a 1,000-record alpaca file with 1% over-long records at max_seq_len 256 —
how many records and answer (trained) tokens each data.overlong policy keeps.

    .venv/bin/python bench/overlong.py [model_dir]

Uses the shipped demo tokenizer (models/tiny-demo) unless another model folder is named. The
records are generated: 990 short question/answer pairs and 10 whose prompt or answer alone is
longer than max_seq_len (5 long prompts, 5 long answers), seeded so the figures repeat.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import core.data.pipeline as data  # noqa: E402
from core.data.pipeline import IGNORE_INDEX  # noqa: E402
from core.data.files import DataError
from core.data.tokenizer import Tokenizer  # noqa: E402

MAX_SEQ_LEN = 256
WORDS = "the cat fox dog sleeps runs under over a small red blue kite story river hill".split()


def sentence(rng: np.random.Generator, words: int) -> str:
    return " ".join(rng.choice(WORDS, words)).capitalize() + "."


def rows(n: int = 1000, long_every: int = 100) -> list[dict]:
    rng = np.random.default_rng(0)
    out = []
    for i in range(n):
        prompt, answer = sentence(rng, int(rng.integers(8, 40))), sentence(rng, int(rng.integers(3, 30)))
        if i % long_every == long_every // 2:  # 1%: half with a long prompt, half with a long answer
            if (i // long_every) % 2:
                prompt = " ".join(sentence(rng, 20) for _ in range(30))
            else:
                answer = " ".join(sentence(rng, 20) for _ in range(20))
        out.append({"instruction": prompt, "input": "", "output": answer})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir", nargs="?", type=Path, default=ROOT / "models" / "tiny-demo",
                        help="the model folder whose tokenizer cuts the records (default: the demo model)")
    tok = Tokenizer.from_dir(parser.parse_args().model_dir)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "alpaca_1000.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows()), encoding="utf-8")
        records = data.read_data_file(path).records
        whole = data.tokenize_records(records, "alpaca", tok, 1 << 20)
        long = [i for i, n in enumerate(whole.full_lengths) if n > MAX_SEQ_LEN]
        answer_all = sum(int((s.labels != IGNORE_INDEX).sum()) for s in whole.samples)
        print(f"{len(records)} records, {len(long)} over max_seq_len {MAX_SEQ_LEN} "
              f"(lengths {sorted(whole.full_lengths[i] for i in long)}); answer tokens uncut: {answer_all}")
        print(f"{'policy':9} {'records':>8} {'samples':>8} {'answer tokens':>14} {'of long records':>16}")
        for policy in ("truncate", "skip", "error"):
            try:
                out = data.tokenize_records(records, "alpaca", tok, MAX_SEQ_LEN, overlong=policy)
            except DataError as err:
                print(f"{policy:9} {0:>8} {0:>8} {0:>14} {'-':>16}   refused: {str(err)[:110]}...")
                continue
            trained = [int((s.labels != IGNORE_INDEX).sum()) for s in out.samples]
            on_long = sum(t for t, k in zip(trained, out.sources) if k in long)
            print(f"{policy:9} {len(set(out.sources)):>8} {len(out.samples):>8} {sum(trained):>14} {on_long:>16}")


if __name__ == "__main__":
    main()
