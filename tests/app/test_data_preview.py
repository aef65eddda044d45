"""app.data_preview and app.data_callbacks: samples as the worker sees them, masked vs trained."""
from __future__ import annotations

import re

from core.config import DataSettings
from core.tokenizer import Tokenizer

from app import data_callbacks, form
from app.datasets import UploadError
from app import train_callbacks as cb
from app.data_preview import data_stats, histogram_html, preview_html, stats_markdown, token_runs


def test_preview_marks_the_prompt_masked_and_the_answer_trained(console):
    config = cb.starter_config(console)
    html = preview_html(config.model.path, config.data.train_file, "alpaca", 256, True, samples=2)
    samples = re.findall(r'<pre class="mt-sample">(.*?)</pre>', html, flags=re.S)
    assert len(samples) == 2
    first = samples[0]
    masked = re.findall(r'<span class="mt-masked"[^>]*>(.*?)</span>', first, flags=re.S)
    trained = re.findall(r'<span class="mt-trained"[^>]*>(.*?)</span>', first, flags=re.S)
    assert "Which word is number" in "".join(masked)  # the instruction is prompt: no loss
    assert "Which word" not in "".join(trained)
    assert "&lt;|im_end|&gt;" in "".join(trained)  # the answer's end-of-turn token is trained
    assert "&lt;|im_start|&gt;assistant" in "".join(masked)


def test_without_prompt_masking_everything_is_trained(console):
    config = cb.starter_config(console)
    html = preview_html(config.model.path, config.data.train_file, "alpaca", 256, False, samples=1)
    assert 'class="mt-masked"' not in html.split("</div>", 2)[-1] and 'class="mt-trained"' in html


def test_truncation_is_announced(console):
    config = cb.starter_config(console)
    html = preview_html(config.model.path, config.data.train_file, "alpaca", 24, False, samples=1)
    assert "cut by max_seq_len" in html
    masked_out = preview_html(config.model.path, config.data.train_file, "alpaca", 24, True, samples=1)
    assert "nothing of the answer remains" in masked_out  # the engine's own message, in place of the preview


def test_bad_data_is_shown_with_file_and_line(console, tmp_path):
    bad = console.settings.data_dirs[0] / "bad.jsonl"
    bad.write_text('{"instruction": "a", "output": "b"}\nnot json\n')
    config = cb.starter_config(console)
    html = preview_html(config.model.path, str(bad), "auto", 64, True)
    assert 'class="mt-error"' in html and "line 2" in html


def test_token_runs_split_where_labels_switch(model_root):
    tokenizer = Tokenizer.from_dir(model_root / "tiny")
    ids = tokenizer.encode("apple pear plum", add_special_tokens=False)
    labels = [-100] * 2 + ids[2:]
    runs = token_runs(tokenizer, ids, labels)
    assert [r.trained for r in runs] == [False, True]
    assert "".join(r.text for r in runs) == tokenizer.decode(ids, skip_special_tokens=False)


def test_stats_histogram_truncation_and_overlap(console):
    config = cb.starter_config(console)
    settings = DataSettings.from_dict({**config.data.to_dict(), "max_seq_len": 40})
    stats = data_stats(config.model.path, settings, 0)
    assert stats.train.samples == 32 and stats.validation.samples == 8
    text = stats_markdown(stats, 40)
    assert "truncated" in text and "overlap" in text
    html = histogram_html(stats, 40)
    assert html.count('class="mt-bar') == len(stats.train.histogram_counts)


def test_data_view_refuses_files_outside_the_data_roots(console, tmp_path):
    outside = tmp_path / "outside.jsonl"
    outside.write_text('{"instruction": "a", "output": "b"}\n')
    values = form.to_values(cb.starter_config(console))
    values["data.train_file"] = str(outside)
    view = data_callbacks.data_view(values, console)
    assert "outside the folders" in view.preview and view.histogram == ""


def test_upload_is_size_limited_and_kept_under_uploads(console, tmp_path):
    small = tmp_path / "my data!.jsonl"
    small.write_text('{"text": "hello"}\n')
    dataset = data_callbacks.upload(str(small), small.name, console)
    assert dataset.train_file.endswith("uploads/my_data.jsonl")
    assert (console.settings.uploads_dir / "my_data.jsonl").is_file()
    assert dataset.train_file in [value for _, value in data_callbacks.dataset_choices(console)]
    big = tmp_path / "big.jsonl"
    big.write_bytes(b"x" * (console.settings.max_upload_bytes + 1))
    try:
        data_callbacks.upload(str(big), big.name, console)
    except UploadError as err:
        assert "upload limit" in str(err)
    else:
        raise AssertionError("an oversized upload was accepted")
    exe = tmp_path / "tool.sh"
    exe.write_text("echo hi")
    try:
        data_callbacks.upload(str(exe), exe.name, console)
    except UploadError as err:
        assert "unsupported file type" in str(err)
    else:
        raise AssertionError("a shell script was accepted as data")
