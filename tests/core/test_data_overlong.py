"""data.overlong: records longer than max_seq_len are truncated (LLaMA-Factory's proportional rule),
skipped, or refused all at once; counted and listed (file, record, length) in the statistics."""
import numpy as np
import pytest

import core.data.pipeline as data
from core.spec.config import DataSettings
from core.data.pipeline import IGNORE_INDEX
from core.data.files import DataError
from core.data.overlong import cutoff_lengths, truncate_pieces
from core.data.tokenizer import Tokenizer
from tests.core.test_data import make_tokenizer_dir, write_jsonl

MAX = 48
SHORT = [{"instruction": f"Add the numbers {i}.", "output": f"{i}"} for i in range(8)]
LONG_PROMPT = {"instruction": "Summarise. " + "A fox met a dog. " * 12, "output": "Fox meets dog."}
LONG_ANSWER = {"instruction": "Tell.", "output": "The cat sleeps. " * 12}


@pytest.fixture(scope="module")
def tok(tmp_path_factory) -> Tokenizer:
    return Tokenizer.from_dir(make_tokenizer_dir(tmp_path_factory.mktemp("tok")))


@pytest.fixture
def rows_file(tmp_path):
    """Ten alpaca records; lines 3 and 7 are over MAX tokens (a long prompt, a long answer)."""
    rows = SHORT[:2] + [LONG_PROMPT] + SHORT[2:5] + [LONG_ANSWER] + SHORT[5:8]
    return write_jsonl(tmp_path / "mixed.jsonl", rows)


def test_cutoff_lengths_is_llamafactory_infer_seqlen():
    assert cutoff_lengths(463, 20, 256) == (236, 20)    # a short answer is kept whole
    assert cutoff_lengths(100, 300, 256) == (100, 156)  # a short prompt is kept whole
    assert cutoff_lengths(300, 200, 256) == (154, 102)  # both long: 256 * 200 / 500 = 102 for the answer


def tokenize(tok, path, policy):
    file = data.read_data_file(path)
    return file, data.tokenize_records(file.records, "alpaca", tok, MAX, overlong=policy)


def test_truncate_keeps_the_starts_of_prompt_and_answer_in_proportion(tok, rows_file):
    file, whole = tokenize(tok, rows_file, "skip")
    _, cut = tokenize(tok, rows_file, "truncate")
    assert len(cut.samples) == 10 and cut.truncated == 2 and cut.skipped == 0
    assert [where for where, _ in cut.overlong] == [f"{rows_file} line 3", f"{rows_file} line 7"]
    assert [n for _, n in cut.overlong] == [cut.full_lengths[2], cut.full_lengths[6]]
    assert all(n > MAX for _, n in cut.overlong)
    for index in (2, 6):
        sample = cut.samples[index]
        assert len(sample) == MAX
        full = data.tokenize_records([file.records[index]], "alpaca", tok, 4096).samples[0]
        answer = int((full.labels != IGNORE_INDEX).sum())
        # the answer piece is the answer through <|im_end|> and ChatML's "\n" after it (unlabelled)
        prompt_kept, answer_kept = cutoff_lengths(len(full) - answer - 1, answer + 1, MAX)
        assert int((sample.labels != IGNORE_INDEX).sum()) == min(answer_kept, answer) > 0
        ids, full_ids = sample.input_ids.tolist(), full.input_ids.tolist()
        assert ids[:prompt_kept] == full_ids[:prompt_kept]  # the prompt's start
        start = len(full) - answer - 1
        assert ids[prompt_kept:] == full_ids[start:start + answer_kept]  # the answer's start
    assert [s.input_ids.tolist() for i, s in enumerate(cut.samples) if i not in (2, 6)] == [
        s.input_ids.tolist() for s in whole.samples]


def test_skip_drops_and_lists_the_long_records(tok, rows_file):
    _, out = tokenize(tok, rows_file, "skip")
    assert len(out.samples) == 8 and out.skipped == 2 and out.truncated == 0
    assert out.sources == [0, 1, 3, 4, 5, 7, 8, 9]
    assert [where.split()[-1] for where, _ in out.overlong] == ["3", "7"]


def test_error_lists_every_long_record_not_only_the_first(tok, rows_file):
    file, out = tokenize(tok, rows_file, "truncate")
    with pytest.raises(DataError) as info:
        data.tokenize_records(file.records, "alpaca", tok, MAX, overlong="error")
    message = str(info.value)
    assert message.startswith(f"2 records are longer than data.max_seq_len={MAX} tokens (data.overlong: error): ")
    for where, length in out.overlong:
        assert f"{where} ({length} tokens)" in message
    assert "set data.overlong to truncate" in message


def test_error_names_the_first_20_and_counts_the_rest(tmp_path, tok):
    path = write_jsonl(tmp_path / "long.jsonl", [LONG_ANSWER] * 25)
    with pytest.raises(DataError) as info:
        data.tokenize_records(data.read_data_file(path).records, "alpaca", tok, MAX, overlong="error")
    message = str(info.value)
    assert message.startswith("25 records are longer") and message.count(f"{path} line") == 20
    assert f"{path} line 20 (" in message and f"{path} line 21 (" not in message and "and 5 more" in message


def test_multi_turn_loses_whole_turns_from_the_end_first(tmp_path, tok):
    turns = [{"role": "user", "content": "Who sleeps?"}, {"role": "assistant", "content": "The cat."},
             {"role": "user", "content": "Where?"}, {"role": "assistant", "content": "On the mat."}]
    long = turns + [{"role": "user", "content": "And then?"}, {"role": "assistant", "content": "A fox met a dog. " * 8}]
    path = write_jsonl(tmp_path / "chat.jsonl", [{"messages": long}, {"messages": turns}])
    records = data.read_data_file(path).records
    two_turns = data.tokenize_records(records[1:], "chat", tok, 4096).samples[0]
    assert len(two_turns) <= 64 < data.tokenize_records(records[:1], "chat", tok, 4096).full_lengths[0]
    cut = data.tokenize_records(records[:1], "chat", tok, 64)
    sample = cut.samples[0]
    assert cut.truncated == 1
    # exactly the first two turns, both answers trained: no turn is cut inside
    assert np.array_equal(sample.input_ids, two_turns.input_ids) and np.array_equal(sample.labels, two_turns.labels)
    assert int((sample.labels != IGNORE_INDEX).sum()) == int((two_turns.labels != IGNORE_INDEX).sum()) > 0


def test_truncate_pieces_without_mask_keeps_the_beginning():
    assert truncate_pieces([(list(range(10)), True)], 4) == [([], False), ([0, 1, 2, 3], True)]


def test_stats_and_warnings_count_and_list_them(tmp_path, tok, rows_file):
    settings = DataSettings(train_file=str(rows_file), validation_file=str(write_jsonl(tmp_path / "v.jsonl", SHORT)),
                            test_file=None, max_seq_len=MAX, overlong="skip")
    stats = data.load_splits(settings, tok, 0, cache_dir=None).stats
    assert (stats.train.records, stats.train.samples, stats.train.skipped, stats.train.overlong_records) == (10, 8, 2, 2)
    assert stats.train.overlong_listed[0] == [f"{rows_file} line 3", stats.train.overlong_listed[0][1]]
    [line] = [w for w in stats.warnings() if "longer than max_seq_len" in w]
    assert line.startswith(f"train: 2 of 10 records are longer than max_seq_len {MAX} tokens and were skipped "
                           "(data.overlong: skip): ")
    assert f"{rows_file} line 7 (" in line
