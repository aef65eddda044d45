"""Generate the demo GRPO prompt set: where each child of the demo's "tiny world" went, asked in ways the
demo SFT run never saw, with the one-word answer a program checks (exact match).

The world is fixed (data/make_demo_data.py: each of 40 children always goes to the same one of 20
places), and the shipped model knows it: after "<name> went to the" its top next token is the child's
place for 85% of the children. The demo SFT run (configs/lora_demo.yaml) learnt to answer "Where did
<name> go?" with a place, but asked "What place did <name> go to?" it answers a colour, as it does for
its "What color is ..." questions: it starts near 0. GRPO from its checkpoint has to learn, from the
reward alone, to answer these questions with a place, and which place is each child's.

`python data/make_grpo_demo.py` writes data/demo-grpo/{train,validation}.jsonl, one JSON object per
line: `prompt` (the user's message) and `answer` (the place). Train asks every child in each of
TRAIN_FORMS; validation asks every child in VALIDATION_FORM, a wording train never uses. Deterministic.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_demo_data import WORLD  # noqa: E402

INSTRUCTION = "Answer the question with one word."
TRAIN_FORMS = ("What place did {name} go to?", "Which place did {name} go to?", "Name the place {name} went to.",
               "Where did {name} go?")
VALIDATION_FORM = "To what place did {name} go?"


def row(form: str, name: str) -> dict[str, str]:
    return {"prompt": f"{INSTRUCTION}\n\nQuestion: {form.format(name=name)}", "answer": WORLD[name].place}


def make_splits() -> dict[str, list[dict[str, str]]]:
    names = sorted(WORLD)
    return {"train": [row(form, name) for form in TRAIN_FORMS for name in names],
            "validation": [row(VALIDATION_FORM, name) for name in names]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "demo-grpo")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for split, rows in make_splits().items():
        with (args.out / f"{split}.jsonl").open("w", encoding="utf-8") as f:
            f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        print(f"{split}: {len(rows)} prompts -> {args.out / f'{split}.jsonl'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
