"""Data as it comes from the field: content-part messages, media (refused by name, or dropped with
their placeholders and counted), one-document-per-line text files, and a format set explicitly that
the data contradicts."""
import numpy as np
import pytest

import core.data.pipeline as data
from core.spec.config import DataSettings
from core.data.files import DataError
from core.data.tokenizer import Tokenizer
from tests.core.test_data import make_tokenizer_dir, raises, write_jsonl


@pytest.fixture(scope="module")
def tok(tmp_path_factory) -> Tokenizer:
    return Tokenizer.from_dir(make_tokenizer_dir(tmp_path_factory.mktemp("tok")))


def parts(*items):
    return [{"type": "text", "text": t} if isinstance(t, str) else t for t in items]


def chat(user, answer="The cat."):
    return {"messages": [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]}


def samples(tok, path, fmt="auto", **options):
    file = data.read_data_file(path)
    return data.tokenize_records(file.records, data.resolve_format(file, fmt), tok, 256, **options)


def same(a, b) -> bool:
    return np.array_equal(a.input_ids, b.input_ids) and np.array_equal(a.labels, b.labels)


def test_text_parts_are_joined_in_order(tmp_path, tok):
    listed = write_jsonl(tmp_path / "parts.jsonl", [chat(parts("Who ", "sleeps?"), parts("The ", "cat."))])
    plain = write_jsonl(tmp_path / "plain.jsonl", [chat("Who sleeps?")])
    assert same(samples(tok, listed).samples[0], samples(tok, plain).samples[0])


def test_sharegpt_values_may_be_parts_too(tmp_path, tok):
    row = {"conversations": [{"from": "human", "value": parts("Who ", "sleeps?")}, {"from": "gpt", "value": "The cat."}]}
    listed = write_jsonl(tmp_path / "parts.jsonl", [row])
    plain = write_jsonl(tmp_path / "plain.jsonl", [chat("Who sleeps?")])
    assert same(samples(tok, listed).samples[0], samples(tok, plain).samples[0])


def test_media_part_is_refused_by_name(tmp_path, tok):
    image = {"type": "image_url", "image_url": {"url": "http://x/cat.png"}}
    path = write_jsonl(tmp_path / "img.jsonl", [chat("Hi."), chat(parts("Who sleeps? ", image))])
    raises([f"{path} line 2", "field 'messages[0].content[1]' is an image part",
            "this console trains text-only models", "data.media: drop"], samples, tok, path)


def test_dropped_media_parts_and_placeholders_are_counted(tmp_path, tok):
    audio = {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}
    path = write_jsonl(tmp_path / "media.jsonl", [chat(parts("<audio>", audio, "Who sleeps?")), chat("Hi.")])
    plain = write_jsonl(tmp_path / "plain.jsonl", [chat("Who sleeps?")])
    out = samples(tok, path, media="drop")
    assert out.media_dropped == 1 and len(out.samples) == 2
    assert same(out.samples[0], samples(tok, plain).samples[0])


def test_unknown_part_type_is_named(tmp_path, tok):
    path = write_jsonl(tmp_path / "odd.jsonl", [chat(parts("Hi", {"type": "hologram", "data": 1}))])
    raises([f"{path} line 1", "field 'messages[0].content[1]' is a content part of type 'hologram'"], samples, tok, path)


def test_images_column_is_refused_or_dropped_with_its_placeholder(tmp_path, tok):
    rows = [{"instruction": "<image>Who sleeps?", "output": "The cat.", "images": ["cat.png"]},
            {"instruction": "Add 2 and 3.", "output": "5", "images": []}]
    path = write_jsonl(tmp_path / "alpaca_img.jsonl", rows)
    raises([f"{path} line 1", "field 'images' holds 1 image;", "text-only", "data.media: drop"], samples, tok, path)
    plain = write_jsonl(tmp_path / "plain.jsonl", [{"instruction": "Who sleeps?", "output": "The cat."}])
    out = samples(tok, path, media="drop")
    assert out.media_dropped == 1 and same(out.samples[0], samples(tok, plain).samples[0])
    settings = DataSettings(train_file=str(path), validation_file=str(plain), test_file=None, media="drop")
    stats = data.load_splits(settings, tok, 0, cache_dir=None).stats
    assert stats.train.media_dropped == 1 and stats.train.ignored_fields == {}  # counted apart, not "ignored"
    assert any(w.startswith("train: media dropped in 1 records (data.media: drop)") for w in stats.warnings())


def test_one_document_per_line_text_trains_every_line(tmp_path, tok):
    """A 30-line file is 30 records (data.text_split: line, the default), so a tenth of it validates."""
    path = tmp_path / "corpus.txt"
    path.write_text("".join(f"The cat {i} sleeps on the mat.\n" for i in range(30)), encoding="utf-8")
    settings = DataSettings(train_file=str(path), validation_file=None, test_file=None, validation_fraction=0.1)
    splits = data.load_splits(settings, tok, 0, cache_dir=None)
    assert (splits.stats.train.samples, splits.stats.validation.samples) == (27, 3)
    assert splits.stats.train.format == "text"
    whole = data.load_splits(DataSettings(train_file=str(path), validation_file=str(path), test_file=None,
                                          text_split="document", max_seq_len=64), tok, 0, cache_dir=None)
    assert whole.stats.train.records == 1 and whole.stats.train.chunked == 1
    assert whole.stats.train.samples == -(-whole.stats.train.max_length // 64)  # every token in 64-token chunks


def test_explicit_format_contradicted_by_the_data_says_what_auto_would_choose(tmp_path):
    path = write_jsonl(tmp_path / "sg.jsonl", [{"conversations": [{"from": "human", "value": "Hi"},
                                                                  {"from": "gpt", "value": "Hello"}]}])
    with pytest.raises(DataError) as info:
        data.resolve_format(data.read_data_file(path), "alpaca")
    message = str(info.value)
    assert message.startswith("data.format is 'alpaca'; the data looks like sharegpt (")
    assert f"{path} line 1 has the fields conversations, not instruction, output" in message
    assert "Set data.format to auto" in message


def test_explicit_format_names_the_config_file_that_set_it(tmp_path):
    from core.spec.config import load_config

    train = write_jsonl(tmp_path / "sg.jsonl", [{"conversations": [{"from": "human", "value": "Hi"},
                                                                   {"from": "gpt", "value": "Hello"}]}])
    config_path = tmp_path / "mine.yaml"
    config_path.write_text(f"data:\n  train_file: {train}\n  format: alpaca\n", encoding="utf-8")
    config = load_config(config_path)
    with pytest.raises(DataError) as info:
        data.check_explicit_format(config.data, config.origins.get("data.format"))
    assert str(info.value).startswith(f"data.format is 'alpaca' (set in {config_path}); the data looks like sharegpt")
    data.check_explicit_format(load_config(config_path, ["data.format=auto"]).data, None)  # auto: nothing to say
