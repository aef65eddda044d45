"""Generate the demo preference set: the demo task (data/demo, one-word answers about short stories)
as pairs, the right answer chosen and a wrong one rejected. The wrong answer is a distractor of the
same kind taken from the same story (another colour, child or place it mentions), so the model must
read the story to prefer the right one; a story with no such distractor takes one from the world.

`python data/make_preference_data.py` reads data/demo/{train,validation}.jsonl and writes
data/demo-preference/{train,validation}.jsonl (alpaca `instruction`/`input` with `chosen` and
`rejected`). Seeded: the same input files always give the same pairs.
"""
from __future__ import annotations

import argparse
import json
import random
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_demo_data import BOY_NAMES, COLORS, GIRL_NAMES, PLACES  # noqa: E402

SIZES = {"train": 2000, "validation": 200}
SEED = 26


def distractor(row: dict, rng: random.Random) -> str:
    """A wrong answer of the answer's kind, from the story when it has one."""
    answer = row["output"]
    story = row["input"].split("\nQuestion:")[0]
    words = re.findall(r"[A-Za-z]+", story)
    for kind in (COLORS, GIRL_NAMES + BOY_NAMES, PLACES):
        if answer in kind:
            seen = sorted({w for w in words if w in kind and w != answer})
            return rng.choice(seen) if seen else rng.choice([w for w in kind if w != answer])
    raise ValueError(f"answer {answer!r} is not a colour, name or place")


def make_pairs(rows: list[dict], seed: int) -> list[dict]:
    rng = random.Random(seed)
    return [{"instruction": r["instruction"], "input": r["input"], "chosen": r["output"],
             "rejected": distractor(r, rng)} for r in rows]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = Path(__file__).resolve().parent
    parser.add_argument("--source", type=Path, default=root / "demo")
    parser.add_argument("--out", type=Path, default=root / "demo-preference")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for offset, (split, size) in enumerate(SIZES.items()):
        rows = [json.loads(line) for line in (args.source / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()]
        pairs = make_pairs(rows[:size], SEED + offset)
        with (args.out / f"{split}.jsonl").open("w", encoding="utf-8") as f:
            f.writelines(json.dumps(p, ensure_ascii=False) + "\n" for p in pairs)
        print(f"{split}: {len(pairs)} pairs -> {args.out / f'{split}.jsonl'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
