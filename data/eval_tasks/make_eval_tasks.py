"""Local lm-evaluation-harness tasks over the demo task (data/demo/test.jsonl), for
`python -m core.evaluate --include-path data/eval_tasks` and the console's Evaluate action:

    python data/eval_tasks/make_eval_tasks.py   # writes data/eval_tasks/demo_story_{mc,gen}.json

- `demo_story_mc.json` (task `demo_story_mc`, multiple choice, scored by log-likelihood): each test
  story's question with four one-word choices: the answer and three other answers to questions of
  the same kind (colour, place or name) drawn with a fixed seed; `label` is the answer's index.
- `demo_story_gen.json` (task `demo_story_gen`, generate until a newline): the question and its
  one-word answer, scored by exact match.
Prompts are the demo's own (instruction, a blank line, the story and question), so a fine-tune on
data/demo answers them. Deterministic; standard library only.
"""
from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parent / "demo" / "test.jsonl"
ROWS = 100
SEED = 28


def question_kind(row: dict) -> str:
    """'What color' / 'Where did' / 'Who has': the first two words of the question."""
    return " ".join(row["input"].rsplit("Question: ", 1)[1].split()[:2])


def build(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    answers: dict[str, list[str]] = {}
    for row in rows:
        answers.setdefault(question_kind(row), [])
        if row["output"] not in answers[question_kind(row)]:
            answers[question_kind(row)].append(row["output"])
    rng = random.Random(SEED)
    mc, gen = [], []
    for row in rows[:ROWS]:
        question = row["instruction"] + "\n\n" + row["input"]
        others = [a for a in answers[question_kind(row)] if a != row["output"]]
        choices = rng.sample(others, 3) + [row["output"]]
        rng.shuffle(choices)
        mc.append({"question": question, "choices": choices, "label": choices.index(row["output"])})
        gen.append({"question": question, "answer": row["output"]})
    return mc, gen


def main() -> None:
    rows = [json.loads(line) for line in SOURCE.read_text(encoding="utf-8").splitlines()]
    mc, gen = build(rows)
    for name, records in (("demo_story_mc.json", mc), ("demo_story_gen.json", gen)):
        (HERE / name).write_text(json.dumps(records, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {HERE / name} ({len(records)} records)")


if __name__ == "__main__":
    main()
