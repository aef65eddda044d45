"""A stand-in for LLaMA-Factory's `data/` folder (its dataset_info.json and the demo files it names),
which the tests cannot download: the same entries, layouts and keys, with synthetic text of the same
shape. `dpo_en_demo.json` holds sharegpt pairs (`conversations` of {from, value} turns, `chosen` and
`rejected` as {from, value}), `kto_en_demo.json` openai-style `messages` with a boolean `label`;
like the real files, many records have long multi-turn prompts, 1,000-3,000 tokens with the demo
tokenizer (the real dpo_en_demo's first record: a 1,338-token prompt; kto_en_demo's longest 3,227).
`wiki_demo.txt` and `c4_demo.jsonl` are the pretraining entries ({"columns": {"prompt": "text"}}, no
formatting). Seeded: the same folder every time.
"""
from __future__ import annotations

import json
import random
from pathlib import Path

WORDS = ("the model answers each question about photosynthesis energy plants water light river mountain city "
         "history language music numbers garden weather ocean forest computer program function data table "
         "because when after before during although however therefore explain describe compare summarise "
         "carefully quickly simple complex small large early late first second third final").split()

INFO = {
    "dpo_en_demo": {"file_name": "dpo_en_demo.json", "ranking": True, "formatting": "sharegpt",
                    "columns": {"messages": "conversations", "chosen": "chosen", "rejected": "rejected"}},
    "kto_en_demo": {"file_name": "kto_en_demo.json", "formatting": "sharegpt",
                    "columns": {"messages": "messages", "kto_tag": "label"},
                    "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user",
                             "assistant_tag": "assistant"}},
    "wiki_demo": {"file_name": "wiki_demo.txt", "columns": {"prompt": "text"}},
    "c4_demo": {"file_name": "c4_demo.jsonl", "columns": {"prompt": "text"}},
}
PAIRS, KTO, TEXTS = 40, 40, 12


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def _turns(rng: random.Random, long: bool) -> list[tuple[str, str]]:
    """(user, assistant) turns before the last question: long records have 2-4 turns of 60-200 words
    (about 250-800 demo tokens each), short ones none."""
    if not long:
        return []
    return [(_text(rng, rng.randint(60, 200)), _text(rng, rng.randint(20, 60))) for _ in range(rng.randint(2, 4))]


def _dpo_record(rng: random.Random, long: bool) -> dict:
    conversation = []
    for user, assistant in _turns(rng, long):
        conversation += [{"from": "human", "value": user}, {"from": "gpt", "value": assistant}]
    conversation.append({"from": "human", "value": _text(rng, rng.randint(10, 40))})
    return {"conversations": conversation, "chosen": {"from": "gpt", "value": _text(rng, rng.randint(15, 80))},
            "rejected": {"from": "gpt", "value": _text(rng, rng.randint(5, 40))}}


def _kto_record(rng: random.Random, long: bool) -> dict:
    messages = []
    for user, assistant in _turns(rng, long):
        messages += [{"content": user, "role": "user"}, {"content": assistant, "role": "assistant"}]
    messages += [{"content": _text(rng, rng.randint(10, 40)), "role": "user"},
                 {"content": _text(rng, rng.randint(15, 80)), "role": "assistant"}]
    return {"messages": messages, "label": rng.random() < 0.6}


def make_llamafactory_data(folder: Path, seed: int = 0) -> Path:
    """The folder (created), every third record long, the first of each file long (as in the real ones)."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    pairs = [_dpo_record(rng, i % 3 == 0) for i in range(PAIRS)]
    kto = [_kto_record(rng, i % 3 == 0) for i in range(KTO)]
    (folder / "dpo_en_demo.json").write_text(json.dumps(pairs, indent=2), encoding="utf-8")
    (folder / "kto_en_demo.json").write_text(json.dumps(kto, indent=2), encoding="utf-8")
    (folder / "wiki_demo.txt").write_text("\n".join(_text(rng, rng.randint(30, 120)) for _ in range(TEXTS)) + "\n",
                                          encoding="utf-8")
    (folder / "c4_demo.jsonl").write_text("".join(json.dumps({"text": _text(rng, rng.randint(30, 120))}) + "\n"
                                                  for _ in range(TEXTS)), encoding="utf-8")
    (folder / "dataset_info.json").write_text(json.dumps(INFO, indent=2), encoding="utf-8")
    return folder
