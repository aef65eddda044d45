"""Preference data (core.data.preference): every layout read into the same pair, the prompt masked and
each answer labelled through the chat template, identical pairs dropped with a count, bad records
named by file, record and field; preference data under train.objective sft trains on chosen answers."""
import json
from pathlib import Path

import numpy as np
import pytest

from core.spec.config import DataSettings
from core.data.pipeline import IGNORE_INDEX, load_splits
from core.data.files import DataError, read_data_file
from core.data.formats import Columns
from core.data.preference import PreferenceBatches, load_preference_splits, tokenize_preference
from core.data.pairs import file_kind, preference_record, preference_records
from core.data.tokenizer import Tokenizer

ROOT = Path(__file__).resolve().parents[2]
Q, GOOD, BAD = "What color is Mia's kite?", "blue", "red"
SAME_PAIR = [
    {"prompt": Q, "chosen": GOOD, "rejected": BAD},
    {"prompt": [{"role": "user", "content": Q}], "chosen": [{"role": "assistant", "content": GOOD}],
     "rejected": [{"role": "assistant", "content": BAD}]},
    {"chosen": [{"role": "user", "content": Q}, {"role": "assistant", "content": GOOD}],  # TRL implicit prompt
     "rejected": [{"role": "user", "content": Q}, {"role": "assistant", "content": BAD}]},
    {"conversations": [{"from": "human", "value": Q}], "chosen": {"from": "gpt", "value": GOOD},
     "rejected": {"from": "gpt", "value": BAD}},  # LLaMA-Factory pairwise
    {"messages": [{"role": "user", "content": Q}], "chosen": GOOD, "rejected": BAD},
    {"instruction": Q, "chosen": GOOD, "rejected": BAD},
]


@pytest.fixture(scope="module")
def tokenizer():
    return Tokenizer.from_dir(ROOT / "models" / "tiny-demo")


def _write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_every_pair_layout_gives_the_same_masked_samples(tmp_path, tokenizer):
    data = read_data_file(_write(tmp_path / "p.jsonl", SAME_PAIR))
    assert file_kind(data, Columns()) == "pairs"
    pairs, stats = tokenize_preference([preference_record(r, "pairs") for r in data.records], "pairs", tokenizer, 64)
    assert stats.pairs == len(SAME_PAIR) and stats.identical_dropped == 0
    first = pairs[0]
    for pair in pairs[1:]:
        np.testing.assert_array_equal(pair.chosen.input_ids, first.chosen.input_ids)
        np.testing.assert_array_equal(pair.rejected.labels, first.rejected.labels)
    for sample, answer in ((first.chosen, GOOD), (first.rejected, BAD)):
        labelled = sample.labels != IGNORE_INDEX
        prompt = int(np.argmax(labelled))
        # the prompt is masked, identical on both sides; the answer and its end-of-turn are labelled
        np.testing.assert_array_equal(first.chosen.input_ids[:prompt], first.rejected.input_ids[:prompt])
        assert tokenizer.decode(sample.labels[labelled].tolist(), skip_special_tokens=True).strip() == answer
        assert sample.labels[labelled][-1] in tokenizer.eos_token_ids
    assert stats.chosen_max_length == len(first.chosen) and stats.rejected_max_length == len(first.rejected)


def test_identical_pairs_are_dropped_and_counted(tmp_path, tokenizer):
    data = read_data_file(_write(tmp_path / "p.jsonl", SAME_PAIR[:2] + [{"prompt": Q, "chosen": GOOD,
                                                                          "rejected": " blue "}]))
    pairs, stats = tokenize_preference([preference_record(r, "pairs") for r in data.records], "pairs", tokenizer, 64)
    assert (len(pairs), stats.pairs, stats.identical_dropped) == (2, 2, 1)


@pytest.mark.parametrize("record, message", [
    ({"prompt": Q, "chosen": GOOD, "rejected": "  "}, "line 2: field 'rejected': the answer is empty"),
    ({"prompt": Q, "chosen": None, "rejected": BAD}, "line 2: field 'chosen': the answer is missing"),
    ({"prompt": Q, "completion": GOOD, "label": "yes"}, "line 2: this record is a KTO answer"),
    ({"prompt": Q, "chosen": [{"role": "user", "content": GOOD}], "rejected": BAD},
     "line 2: field 'chosen': a message list must end with the assistant's answer"),
    ({"text": "plain"}, "line 2: this record is a plain conversation but"),
])
def test_bad_pairs_name_file_record_and_field(tmp_path, tokenizer, record, message):
    path = _write(tmp_path / "bad.jsonl", [SAME_PAIR[0], record])
    with pytest.raises(DataError, match="bad.jsonl " + message.replace("(", r"\(").replace(")", r"\)")):
        data = read_data_file(path)
        preference_records(data, file_kind(data, Columns()))


def test_kto_labels_must_be_booleans_and_a_prompt_alone_over_the_limit_is_refused(tmp_path, tokenizer):
    kto = [{"prompt": Q, "completion": GOOD, "label": True},
           {"conversations": [{"from": "human", "value": Q}, {"from": "gpt", "value": BAD}], "label": False}]
    data = read_data_file(_write(tmp_path / "k.jsonl", kto))
    assert file_kind(data, Columns()) == "kto"
    pairs, stats = tokenize_preference([preference_record(r, "kto") for r in data.records], "kto", tokenizer, 64)
    assert [p.label for p in pairs] == [1.0, 0.0] and stats.desirable == 1
    with pytest.raises(DataError, match=r"k2.jsonl line 1: field 'label': a KTO label must be true or false, got 1"):
        data = read_data_file(_write(tmp_path / "k2.jsonl", [{"prompt": Q, "completion": GOOD, "label": 1}]))
        preference_record(data.records[0], "kto")
    long = read_data_file(_write(tmp_path / "long.jsonl", [{"prompt": "word " * 80, "chosen": GOOD, "rejected": BAD}]))
    with pytest.raises(DataError, match=r"long.jsonl line 1: field 'chosen': the prompt alone is \d+ tokens"):
        tokenize_preference([preference_record(long.records[0], "pairs")], "pairs", tokenizer, 32)


def test_objective_and_data_must_match_and_sft_trains_on_chosen_only(tmp_path, tokenizer):
    pairs = _write(tmp_path / "pairs.jsonl", SAME_PAIR[:1] + [{"prompt": "Who has the red ball?", "chosen": "Tom",
                                                                "rejected": "Ann"}])
    kto = _write(tmp_path / "kto.jsonl", [{"prompt": Q, "completion": GOOD, "label": True},
                                          {"prompt": Q, "completion": BAD, "label": False}])
    settings = DataSettings(train_file=str(kto), validation_file=str(kto), test_file=None)
    with pytest.raises(DataError, match=r"kto.jsonl line 1: field 'rejected': train.objective dpo needs preference "
                                        r"pairs .* holds KTO answers"):
        load_preference_splits(settings, tokenizer, 0, "dpo")
    # SFT on KTO data: the desirable answer only, and the run says so
    splits = load_splits(settings, tokenizer, 0, cache_dir=None)
    assert len(splits.train) == 1
    answer = splits.train[0].labels[splits.train[0].labels != IGNORE_INDEX]
    assert tokenizer.decode(answer.tolist(), skip_special_tokens=True).strip() == GOOD
    assert any("desirable answers only (1 undesirable" in w for w in splits.stats.warnings())
    splits = load_splits(DataSettings(train_file=str(pairs), validation_file=str(pairs), test_file=None),
                         tokenizer, 0, cache_dir=None)
    assert any("chosen answers only" in w for w in splits.stats.warnings())
    assert [tokenizer.decode(s.labels[s.labels != IGNORE_INDEX].tolist(), skip_special_tokens=True).strip()
            for s in splits.train] == [GOOD, "Tom"]


def test_batches_keep_pairs_whole_across_ranks(tmp_path, tokenizer):
    records = [{"prompt": f"q{i}", "chosen": f"good {i}", "rejected": f"bad {i}"} for i in range(8)]
    path = _write(tmp_path / "p.jsonl", records)
    splits = load_preference_splits(DataSettings(train_file=str(path), validation_file=str(path), test_file=None),
                                    tokenizer, 0, "dpo")
    seen = []
    for rank in range(2):
        batches = PreferenceBatches(splits.train, 2, world_size=2, rank=rank, seed=0, length=splits.stats.seq_len)
        batch = next(batches)
        assert batch["input_ids"].shape == (4, splits.stats.seq_len) and batch["kto_labels"].shape == (4,)
        for i in range(2):  # row i and row 2 + i: one pair, the same prompt
            chosen = tokenizer.decode(batch["input_ids"][i][batch["attention_mask"][i] > 0].tolist())
            rejected = tokenizer.decode(batch["input_ids"][2 + i][batch["attention_mask"][2 + i] > 0].tolist())
            k = int(chosen.split("good ")[1][0])
            assert f"bad {k}" in rejected and f"q{k}" in rejected
            seen.append(k)
    assert len(set(seen)) == 4  # the two ranks took different pairs


def test_the_console_preview_shows_a_pair_side_by_side(tmp_path):
    from app.data.data_preview import preview_html
    path = _write(tmp_path / "p.jsonl", SAME_PAIR[:2])
    page = preview_html(str(ROOT / "models" / "tiny-demo"), DataSettings(train_file=str(path), validation_file=None,
                                                                         validation_fraction=0.5), lang="en")
    assert "Preference pairs: the first 2 of 2" in page and page.count('class="mt-pair"') == 2
    chosen, rejected = page.split("mt-chosen", 1)[1].split("mt-rejected", 1)
    assert '<span class="mt-trained"' in chosen and "blue" in chosen.split("mt-trained", 1)[1]
    assert "red" in rejected.split("mt-trained", 1)[1].split("</span>", 1)[0]


def _catalog(folder: Path) -> Path:
    """A dataset_info.json catalogue as LLaMA-Factory ships its demo preference sets: a sharegpt
    ranking entry (dpo_en_demo's layout), an alpaca ranking entry under other column names, a sharegpt
    KTO entry (kto_en_demo's layout) and a plain SFT entry."""
    folder.mkdir()
    _write(folder / "dpo.jsonl", [
        {"conversations": [{"from": "human", "value": Q}], "chosen": {"from": "gpt", "value": GOOD},
         "rejected": {"from": "gpt", "value": BAD}},
        {"conversations": [{"from": "human", "value": "Who has the red ball?"}], "chosen": {"from": "gpt", "value": "Tom"},
         "rejected": {"from": "gpt", "value": "Ann"}}])
    _write(folder / "ranked.jsonl", [{"question": Q, "good": GOOD, "bad": BAD},
                                     {"question": "Who has the red ball?", "good": "Tom", "bad": "Ann"}])
    _write(folder / "kto.jsonl", [
        {"messages": [{"role": "user", "content": Q}, {"role": "assistant", "content": GOOD}], "label": True},
        {"messages": [{"role": "user", "content": Q}, {"role": "assistant", "content": BAD}], "label": False},
        {"messages": [{"role": "user", "content": "Who has it?"}, {"role": "assistant", "content": "Tom"}],
         "label": True}])
    _write(folder / "sft.jsonl", [{"instruction": Q, "input": "", "output": GOOD}])
    (folder / "dataset_info.json").write_text(json.dumps({
        "dpo_demo": {"file_name": "dpo.jsonl", "ranking": True, "formatting": "sharegpt",
                     "columns": {"messages": "conversations", "chosen": "chosen", "rejected": "rejected"}},
        "ranked": {"file_name": "ranked.jsonl", "ranking": True,
                   "columns": {"prompt": "question", "chosen": "good", "rejected": "bad"}},
        "kto_demo": {"file_name": "kto.jsonl", "formatting": "sharegpt",
                     "columns": {"messages": "messages", "kto_tag": "label"},
                     "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user",
                              "assistant_tag": "assistant"}},
        "plain": {"file_name": "sft.jsonl"}}))
    return folder


def _answers(pairs, tokenizer, side: str = "chosen") -> list[str]:
    samples = [getattr(p, side) for p in pairs]
    return [tokenizer.decode(s.labels[s.labels != IGNORE_INDEX].tolist(), skip_special_tokens=True).strip()
            for s in samples]


def test_catalogue_preference_entries_feed_dpo_and_kto(tmp_path, tokenizer):
    """Issue 26: dataset_info.json entries with ranking: true (either formatting, mapped columns)
    read as pairs for DPO, a kto_tag entry as KTO answers; the same pair reads the same whatever the
    layout; a plain entry or a pairs entry under KTO is refused naming the entry."""
    folder = _catalog(tmp_path / "catalog")
    val = _write(tmp_path / "val.jsonl", SAME_PAIR[:1])

    def splits(names, objective="dpo", validation=str(val), fraction=0.0):
        settings = DataSettings(train_file=str(folder), dataset=names, validation_file=validation, test_file=None,
                                validation_fraction=fraction)
        return load_preference_splits(settings, tokenizer, 0, objective)

    both = splits(["dpo_demo", "ranked"])
    assert both.stats.train.pairs == 4 and both.stats.train.kind == "pairs"
    assert _answers(both.train, tokenizer) == [GOOD, "Tom", GOOD, "Tom"]
    assert _answers(both.train, tokenizer, "rejected") == [BAD, "Ann", BAD, "Ann"]
    for a, b in ((0, 2), (1, 3)):  # sharegpt {from, value} answers and mapped alpaca columns: the same samples
        np.testing.assert_array_equal(both.train[a].chosen.input_ids, both.train[b].chosen.input_ids)
        np.testing.assert_array_equal(both.train[a].rejected.labels, both.train[b].rejected.labels)
    reference = load_preference_splits(DataSettings(train_file=str(val), validation_file=str(val), test_file=None),
                                       tokenizer, 0, "dpo")
    np.testing.assert_array_equal(both.train[0].chosen.labels, reference.train[0].chosen.labels)
    held = splits(["dpo_demo", "ranked"], validation=None, fraction=0.25)
    assert (held.stats.train.pairs, held.stats.validation.pairs) == (3, 1)

    kto = splits(["kto_demo"], "kto", validation=None, fraction=0.34)
    assert kto.stats.train.kind == "kto" and kto.stats.train.pairs + kto.stats.validation.pairs == 3
    assert sorted(p.label for p in kto.train + kto.validation) == [0.0, 1.0, 1.0]
    with pytest.raises(DataError, match=r"dataset 'plain': this dataset is supervised data .* needs preference data"):
        splits(["plain"])
    with pytest.raises(DataError, match=r"field 'label': train.objective kto needs KTO answers .*dataset 'ranked' "
                                        r"holds preference pairs"):
        splits(["ranked"], "kto")
    # under SFT a catalogue's preference entry is still refused, never trained as plain answers
    with pytest.raises(DataError, match=r"dataset 'dpo_demo': this is preference data"):
        load_splits(DataSettings(train_file=str(folder), dataset=["dpo_demo"], validation_file=str(val),
                                 test_file=None), tokenizer, 0, cache_dir=None)
