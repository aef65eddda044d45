"""Generate the demo GRPO prompt set: the colour of each child's thing in the demo's "tiny world", asked
after a sentence that names the child and the thing, with the one-word answer a program checks (exact
match).

The world is fixed (data/make_demo_data.py: each of 40 children always has the same coloured thing), and
the demo SFT run (configs/lora_demo.yaml) knows the colours: asked "What color is <name>'s <thing>?" its
greedy answer is the child's colour for 65% of the children. Asked the same after a sentence such as
"<name> has a <thing>." (a wording its SFT data never used) it answers one default colour ("blue" or
"white") for nearly every child: 15% right, the validation reward GRPO starts from. Sampled, the child's
own colour comes up among its answers, so GRPO has to learn from the reward alone to answer with the
child's colour, not the default; the world is fixed, so validation asks the same facts in a wording train
never uses. Chosen by measurement over place, colour, thing and name questions (data/README.md).

`python data/make_grpo_demo.py` writes data/demo-grpo/{train,validation}.jsonl, one JSON object per
line: `prompt` (the user's message) and `answer` (the colour). Train asks every child in each of
TRAIN_FORMS; validation asks every child in VALIDATION_FORM. Deterministic.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_demo_data import WORLD  # noqa: E402

INSTRUCTION = "Answer the question with one word."
TRAIN_FORMS = ("{name} has a {thing}. Which color?", "{name} had a {thing}. Say its color.",
               "{name} took a {thing} to the {place}. What color was it?", "{name}'s {thing} is which color?")
VALIDATION_FORM = "{name} has a {thing}. What color is it?"


def row(form: str, name: str) -> dict[str, str]:
    child = WORLD[name]
    question = form.format(name=name, thing=child.obj, place=child.place)
    return {"prompt": f"{INSTRUCTION}\n\nQuestion: {question}", "answer": child.color}


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
