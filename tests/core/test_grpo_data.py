"""GRPO's prompt sets (core.data.prompts): every layout read into the same prompt, rendered through the
chat template with the generation prompt, the other columns handed to the rewards (the answer taken
from `output` or the final assistant turn, counted), prompts over grpo.max_prompt_len cut from the
left, skipped or refused, bad records named by file, record and field, and batches of whole prompts
that resume exactly and split the same prompts over data-parallel ranks."""
import json
from pathlib import Path

import pytest

from core.data.files import DataError
from core.data.pipeline import _held_out
from core.data.prompts import (PromptBatches, load_prompt_splits, prompt_conversation, prompt_eval_batches,
                               read_prompt_splits, reward_columns, tokenize_prompts)
from core.data.files import read_data_file
from core.data.tokenizer import Tokenizer
from core.spec.config import DataSettings
from core.spec.messages import Message

ROOT = Path(__file__).resolve().parents[2]
Q, A = "What color is Mia's kite?", "blue"
SAME_PROMPT = [
    {"prompt": Q, "answer": A},
    {"prompt": [{"role": "user", "content": Q}], "answer": A, "id": 7},
    {"messages": [{"role": "user", "content": Q}, {"role": "assistant", "content": A}]},
    {"conversations": [{"from": "human", "value": Q}], "answer": A},
    {"instruction": Q, "output": A},
    {"instruction": Q, "input": "", "answer": A},
]


@pytest.fixture(scope="module")
def tokenizer():
    return Tokenizer.from_dir(ROOT / "models" / "tiny-demo")


def _write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _convs(path: Path, fmt: str = "auto"):
    return [prompt_conversation(r, fmt=fmt) for r in read_data_file(path).records]


def test_every_layout_gives_the_prompt_the_chat_mode_renders(tmp_path, tokenizer):
    convs = _convs(_write(tmp_path / "p.jsonl", SAME_PROMPT))
    prompts, stats = tokenize_prompts(convs, tokenizer, 64)
    # what core.engine.generate's chat mode (and the Try tab) feeds the model for this question
    expected = tokenizer.apply_chat_template([{"role": "user", "content": Q}], add_generation_prompt=True,
                                             tokenize=True)
    assert len(expected) == 17
    for prompt in prompts:
        assert prompt.ids.tolist() == expected and prompt.text.endswith("<|im_start|>assistant\n")
        assert prompt.columns["answer"] == A and not prompt.truncated
    assert prompts[1].columns == {"answer": A, "id": 7}  # every column that is not the prompt is kept
    assert prompts[4].columns == {"output": A, "answer": A}
    assert (stats.records, stats.prompts, stats.min_length, stats.max_length) == (6, 6, 17, 17)
    assert stats.columns == ["answer"] and stats.partial_columns == {"id": 1, "output": 1}
    assert stats.answers_from == {"messages[-1]": 1, "output": 1} and stats.final_turns_dropped == 0


def test_a_system_turn_history_and_a_final_answer_beside_its_own_column(tmp_path, tokenizer):
    records = [{"prompt": Q, "system": "Be brief.", "answer": A},
               {"instruction": Q, "history": [["Hi", "Hello!"]], "output": 3},  # a number stays a number
               {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": Q},
                             {"role": "assistant", "content": "a long worked answer"}], "answer": A}]
    convs = _convs(_write(tmp_path / "p.jsonl", records))
    assert [m["role"] for m in convs[0].conversation.messages] == ["system", "user"]
    assert [m["role"] for m in convs[1].conversation.messages] == ["user", "assistant", "user"]
    assert convs[1].columns == {"output": 3, "answer": 3}
    assert convs[2].columns == {"answer": A} and convs[2].dropped_turn  # its own answer wins; the turn is left out
    prompts, stats = tokenize_prompts(convs, tokenizer, 64)
    assert prompts[0].text == prompts[2].text == ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n" + Q +
                                                  "<|im_end|>\n<|im_start|>assistant\n")
    assert stats.final_turns_dropped == 1
    said = stats.notes("train", 64, "truncate")
    assert [m.key for m in said] == ["stats.column_in_some", "stats.answer_from", "stats.final_turn_dropped"]
    assert said[0] == "train: column 'output' has a value in only 1 of 3 records; a reward that reads it stops the run at the others"


def test_a_long_prompt_is_cut_from_the_left_skipped_or_refused(tmp_path, tokenizer):
    story = " ".join(f"Child {i} went to the park." for i in range(12))
    path = _write(tmp_path / "long.jsonl", [{"prompt": Q, "answer": A}, {"prompt": story + "\n" + Q, "answer": A}])
    convs = _convs(path)
    full = tokenizer.encode(tokenizer.apply_chat_template([{"role": "user", "content": story + "\n" + Q}],
                                                          add_generation_prompt=True), add_special_tokens=False)
    assert len(full) == 175
    prompts, stats = tokenize_prompts(convs, tokenizer, 32, "truncate")
    cut = prompts[1]
    assert len(cut) == 32 and cut.full_length == 175 and cut.truncated
    assert cut.ids.tolist() == full[-32:]  # the end kept: the question and the generation prompt
    assert tokenizer.decode(cut.ids.tolist(), skip_special_tokens=False).endswith(Q + "<|im_end|>\n<|im_start|>assistant\n")
    assert (stats.truncated, stats.skipped, stats.prompts, stats.max_length) == (1, 0, 2, 175)
    assert stats.overlong_listed == [[f"{path} line 2", 175]]
    assert stats.notes("train", 32, "truncate")[0].key == "stats.prompts_cut"

    prompts, stats = tokenize_prompts(convs, tokenizer, 32, "skip")
    assert (len(prompts), stats.skipped, stats.truncated, stats.records) == (1, 1, 0, 2)
    assert stats.notes("train", 32, "skip")[0] == (f"train: 1 of 2 prompts are longer than grpo.max_prompt_len 32 "
                                                   f"tokens and were skipped (data.overlong: skip): {path} line 2 "
                                                   f"(175 tokens)")
    with pytest.raises(DataError) as err:
        tokenize_prompts(convs, tokenizer, 32, "error")
    assert err.value.said[0].key == "data.prompts_overlong" and f"{path} line 2 (175 tokens)" in str(err.value)


@pytest.mark.parametrize("record, key, said", [
    ({"prompt": Q, "chosen": A, "rejected": "red"}, "data.grpo_pairs", "line 2: field 'chosen': this record is a preference pair"),
    ({"prompt": Q, "completion": A, "label": True}, "data.grpo_kto", "line 2: field 'label': this record is a KTO answer"),
    ({"text": "Mia has a blue kite."}, "data.grpo_no_prompt", "line 2: field 'prompt': no prompt;"),
    ({"question": Q, "answer": A}, "data.grpo_no_prompt", "line 2: field 'prompt': no prompt;"),
    ({"prompt": "  ", "answer": A}, "data.prompt_empty", "line 2: field 'prompt': the prompt is empty"),
    ({"prompt": [{"role": "user", "content": Q}, {"role": "assistant", "content": A}]}, "data.prompt_not_user",
     "line 2: the prompt must end with a user turn (field 'prompt[1]')"),
    ({"messages": [{"role": "user", "content": Q}, {"role": "assistant", "content": " "}]}, "data.answer_empty",
     "line 2: field 'messages[1]': the answer is empty"),
    ({"prompt": 42, "answer": A}, "data.not_text_or_messages", "line 2: field 'prompt': expected a string or messages"),
    ({"prompt": Q, "answer": A, "images": ["a.png"]}, "data.media_refused", "line 2: field 'images'"),
])
def test_bad_records_name_file_record_and_field(tmp_path, record, key, said):
    path = _write(tmp_path / "bad.jsonl", [SAME_PROMPT[0], record])
    with pytest.raises(DataError) as err:
        _convs(path)
    assert err.value.said[0].params["reason"].key == key
    assert f"bad.jsonl {said}" in str(err.value)
    if key == "data.grpo_no_prompt":
        assert f"this record has {', '.join(record)} (map other names" in str(err.value)


def test_raw_text_format_has_no_prompt(tmp_path):
    with pytest.raises(DataError, match="p.jsonl line 1: a raw-text record has no prompt"):
        _convs(_write(tmp_path / "p.jsonl", SAME_PROMPT), fmt="text")


def _splits(tmp_path: Path, tokenizer, **data):
    settings = DataSettings(**{"validation_file": None, "test_file": None, **data})
    return load_prompt_splits(settings, tokenizer, seed=3, max_prompt_len=64)


def test_validation_is_a_seeded_fraction_or_a_file_and_the_splits_say_their_columns(tmp_path, tokenizer):
    records = [{"prompt": f"{Q} ({i})", "answer": A, "id": i} for i in range(20)]
    path = _write(tmp_path / "train.jsonl", records)
    splits = _splits(tmp_path, tokenizer, train_file=str(path), validation_fraction=0.25)
    held = _held_out(20, 0.25, 3, str(path))  # the same hold-out as the other pipelines
    assert sorted(p.columns["id"] for p in splits.validation) == sorted(held)
    assert len(splits.train) == 15 and splits.stats.validation_source == "fraction"
    assert splits.stats.columns == ["answer", "id"] and splits.stats.longest_prompt == 22
    assert splits.test_records == [] and splits.stats.to_dict()["validation"]["prompts"] == 5

    val = _write(tmp_path / "val.jsonl", [{"instruction": Q, "output": A}])
    splits = _splits(tmp_path, tokenizer, train_file=str(path), validation_file=str(val))
    assert (len(splits.train), len(splits.validation), splits.stats.validation_source) == (20, 1, "file")
    assert splits.stats.columns == ["answer"]  # 'id' is not in validation; 'output' not in train
    settings = DataSettings(train_file=str(path), validation_file=str(val), test_file=None)
    assert reward_columns(settings) == ["answer"]


def test_a_catalogue_entry_is_read_with_its_mapping_and_a_preference_entry_refused(tmp_path, tokenizer):
    _write(tmp_path / "qa.jsonl", [{"question": Q, "solution": A}] * 4)
    _write(tmp_path / "pairs.jsonl", [{"instruction": Q, "chosen": A, "rejected": "red"}] * 4)
    (tmp_path / "dataset_info.json").write_text(json.dumps({
        "qa": {"file_name": "qa.jsonl", "columns": {"prompt": "question", "response": "solution"}},
        "prefs": {"file_name": "pairs.jsonl", "ranking": True,
                  "columns": {"prompt": "instruction", "chosen": "chosen", "rejected": "rejected"}}}))
    splits = _splits(tmp_path, tokenizer, train_file=str(tmp_path), dataset=["qa"], validation_fraction=0.25)
    assert (len(splits.train), len(splits.validation)) == (3, 1)
    assert splits.train[0].columns == {"solution": A, "answer": A}
    assert splits.stats.train.answers_from == {"solution": 3}
    with pytest.raises(DataError, match="dataset 'prefs': this is preference data") as err:
        _splits(tmp_path, tokenizer, train_file=str(tmp_path), dataset=["prefs"], validation_fraction=0.25)
    assert err.value.said[0].params["reason"] == Message("data.grpo_preference_entry")


def test_batches_hold_whole_prompts_resume_exactly_and_share_them_across_ranks(tmp_path, tokenizer):
    records = [{"prompt": f"{Q} ({i})", "answer": str(i)} for i in range(24)]
    prompts, _ = tokenize_prompts(_convs(_write(tmp_path / "p.jsonl", records)), tokenizer, 64)
    one = PromptBatches(prompts, 2, grad_accum_steps=4, seed=5)
    assert one.steps_per_epoch == 3  # 24 prompts / (2 × 4)
    ranks = [PromptBatches(prompts, 2, grad_accum_steps=2, world_size=2, rank=r, seed=5) for r in range(2)]
    for _ in range(2 * one.steps_per_epoch):  # two epochs: the same prompts per optimizer step
        single = [a for _ in range(4) for a in next(one).columns()["answer"]]
        split = [a for it in ranks for _ in range(2) for a in next(it).columns()["answer"]]
        assert sorted(single) == sorted(split) and len(set(single)) == 8
    batch = next(one)
    assert len(batch) == 2 and batch.columns(3)["answer"] == [batch.records[0].columns["answer"]] * 3 + \
        [batch.records[1].columns["answer"]] * 3
    assert batch.prompts(3)[2] == batch.records[0].text and batch.prompt_ids[1] == batch.records[1].ids.tolist()

    saved = one.state()
    expected = [next(one).where() for _ in range(7)]
    again = PromptBatches(prompts, 2, grad_accum_steps=4, seed=5)
    again.load_state(saved)
    assert [next(again).where() for _ in range(7)] == expected
    with pytest.raises(DataError, match="24 samples are fewer than one global batch of 32"):
        PromptBatches(prompts, 8, grad_accum_steps=4)
    assert [len(b) for b in prompt_eval_batches(prompts, 10)] == [10, 10, 4]


def test_the_shipped_demo_task_reads_as_prompts_with_an_answer(tokenizer):
    settings = DataSettings(train_file=str(ROOT / "data/demo/train.jsonl"),
                            validation_file=str(ROOT / "data/demo/validation.jsonl"))
    train, validation, source = read_prompt_splits(settings)
    assert (len(train), len(validation), source) == (2000, 200, "file")
    assert train[0].columns == {"output": "yellow", "answer": "yellow"}


def test_the_demo_grpo_set_is_its_script_and_passes_the_config_checks(tmp_path, monkeypatch):
    import subprocess
    import sys

    from core.eval.rewards import check_rewards
    from core.spec.config import load_config

    subprocess.run([sys.executable, str(ROOT / "data" / "make_grpo_demo.py"), "--out", str(tmp_path)], check=True,
                   capture_output=True)
    for split in ("train", "validation"):
        assert (tmp_path / f"{split}.jsonl").read_bytes() == (ROOT / "data" / "demo-grpo" / f"{split}.jsonl").read_bytes()
    monkeypatch.chdir(ROOT)
    config = load_config(ROOT / "configs" / "grpo_demo.yaml")
    columns = reward_columns(config.data)
    assert columns == ["answer"] and check_rewards(config, columns) == []
    train, validation, _ = read_prompt_splits(config.data)
    assert (len(train), len(validation)) == (160, 40)
    assert not {c.conversation.messages[-1]["content"] for c in train} & \
        {c.conversation.messages[-1]["content"] for c in validation}  # validation asks in a wording train never uses


def test_the_demo_grpo_set_asks_the_world_s_colours_in_a_held_out_wording():
    import re
    import sys

    sys.path.insert(0, str(ROOT / "data"))
    from make_demo_data import COLORS, WORLD

    rows = {split: [json.loads(line) for line in (ROOT / "data" / "demo-grpo" / f"{split}.jsonl").open(encoding="utf-8")]
            for split in ("train", "validation")}

    def wording(row: dict) -> str:  # the question with its child, thing and place taken out
        name = next(n for n in WORLD if row["prompt"].split("Question: ")[1].startswith(n))
        child = WORLD[name]
        assert row["answer"] == child.color in COLORS  # the world's fact, one word
        for word, slot in ((name, "<name>"), (child.obj, "<thing>"), (child.place, "<place>")):
            text = re.sub(rf"\b{word}\b", slot, row["prompt"] if slot == "<name>" else text)
        return text

    train, validation = ({wording(r) for r in rows[s]} for s in ("train", "validation"))
    assert (len(train), len(validation)) == (4, 1) and not train & validation  # validation's wording is never trained
    for split in rows:  # every child once per wording
        assert sorted(r["prompt"].split("Question: ")[1].split(" ")[0].split("'")[0] for r in rows[split]) == \
            sorted(list(WORLD) * (len(rows[split]) // len(WORLD)))


def test_a_batch_feeds_the_rewards_one_value_per_completion(tokenizer):
    from core.eval.rewards import RewardSet

    settings = DataSettings(train_file=str(ROOT / "data/demo-grpo/train.jsonl"),
                            validation_file=str(ROOT / "data/demo-grpo/validation.jsonl"), test_file=None)
    splits = load_prompt_splits(settings, tokenizer, seed=0, max_prompt_len=48)
    batch = next(PromptBatches(splits.train, 8, seed=1))
    group = 4
    answers = batch.columns(group)["answer"]
    completions = [a if i % group == 0 else "colour" for i, a in enumerate(answers)]  # one right answer per group
    with RewardSet([{"function": "exact_match"}], max_new_tokens=8) as rewards:
        scores = rewards.score(batch.prompts(group), completions, [2] * len(completions), batch.columns(group),
                               batch.where(group))
    assert scores.total.tolist() == [1.0, 0.0, 0.0, 0.0] * 8
    assert scores.figures("val_reward")["val_reward"] == 0.25 and scores.equal_groups(group) == 0.0
    assert batch.where(group)[4] == batch.records[1].where and len(batch.prompt_ids[0]) == len(batch.records[0])
