"""The demo task in the other layouts core.data.pipeline reads, for the example configs (configs/*_demo.yaml):

    python data/make_example_data.py      # writes data/examples/{sharegpt,alpaca_history}.jsonl, qa{,_test}.csv

- `sharegpt.jsonl`: ShareGPT conversations (`from`/`value` turns) with a top-level `system`;
  two stories' questions per conversation, so there are two assistant turns to train on.
- `alpaca_history.jsonl`: alpaca with `system` and `history` (the previous question and answer).
- `qa.csv`, `qa_test.csv`: `question`/`answer` columns, which need `data.columns` to map them.
Each is built from data/demo/train.jsonl (the first 400 rows; qa_test.csv from data/demo/test.jsonl),
deterministically; nothing random.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
SYSTEM = "You answer questions about short stories with one word."
ROWS = 400


def demo_rows(split: str = "train") -> list[dict]:
    lines = (HERE / "demo" / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()[:ROWS]
    return [json.loads(line) for line in lines]


def write_qa_csv(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["question", "answer"])
        writer.writerows([[prompt(row), row["output"]] for row in rows])


def prompt(row: dict) -> str:
    return row["instruction"] + "\n\n" + row["input"]


def sharegpt(rows: list[dict]) -> list[dict]:
    out = []
    for first, second in zip(rows[::2], rows[1::2]):
        out.append({"conversations": [{"from": "human", "value": prompt(first)}, {"from": "gpt", "value": first["output"]},
                                      {"from": "human", "value": prompt(second)},
                                      {"from": "gpt", "value": second["output"]}],
                    "system": SYSTEM})
    return out


def alpaca_history(rows: list[dict]) -> list[dict]:
    return [{"instruction": row["instruction"], "input": row["input"], "output": row["output"], "system": SYSTEM,
             "history": [[prompt(previous), previous["output"]]]} for previous, row in zip(rows, rows[1:])]


def write_jsonl(path: Path, records: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")


def main() -> None:
    rows = demo_rows()
    folder = HERE / "examples"
    folder.mkdir(exist_ok=True)
    write_jsonl(folder / "sharegpt.jsonl", sharegpt(rows))
    write_jsonl(folder / "alpaca_history.jsonl", alpaca_history(rows))
    write_qa_csv(folder / "qa.csv", rows)
    write_qa_csv(folder / "qa_test.csv", demo_rows("test"))
    print(f"wrote {folder}/sharegpt.jsonl, alpaca_history.jsonl, qa.csv, qa_test.csv from the demo rows")


if __name__ == "__main__":
    main()
