"""app.data.data_preview and app.tabs.data_callbacks: samples as the worker sees them (trained turns
highlighted), the detected format, the mapping in effect, ignored fields, padding efficiency,
uploads (deduplicated, formats detected, zipped folders), and data that blocks Start."""
from __future__ import annotations

import json
import re
import zipfile

import pytest

from core.spec.config import DataSettings
from core.data.tokenizer import Tokenizer
from tests.core.tiny_setup import write_jsonl

from app.tabs import data_callbacks, form
from app.tabs import train_callbacks as cb
from app.data.data_preview import data_stats, histogram_html, preview_html, stats_markdown
from app.data.sample_html import token_runs
from app.data.datasets import UploadError, scan_datasets


def settings_for(config, **changes) -> DataSettings:
    return DataSettings.from_dict({**config.data.to_dict(), **changes})


def trained_spans(html: str) -> list[str]:
    """The trained runs of the rendered samples (not the legend)."""
    samples = "".join(re.findall(r'<pre class="mt-sample">(.*?)</pre>', html, flags=re.S))
    return re.findall(r'<span class="mt-trained"[^>]*>(.*?)</span>', samples, flags=re.S)


def chat_rows(n: int) -> list[dict]:
    return [{"messages": [{"role": "user", "content": f"hi {i}"}, {"role": "assistant", "content": f"yo {i}"},
                          {"role": "user", "content": f"again {i}"}, {"role": "assistant", "content": f"ok {i}"}]}
            for i in range(n)]


def form_values(console, **changes) -> dict:
    values = form.to_values(cb.starter_config(console))
    values.update({k.replace("__", "."): v for k, v in changes.items()})
    return values


def test_preview_marks_the_prompt_masked_and_the_answer_trained(console):
    config = cb.starter_config(console)
    html = preview_html(config.model.path, settings_for(config, format="alpaca"), samples=2)
    samples = re.findall(r'<pre class="mt-sample">(.*?)</pre>', html, flags=re.S)
    assert len(samples) == 2
    first = samples[0]
    masked = re.findall(r'<span class="mt-masked"[^>]*>(.*?)</span>', first, flags=re.S)
    trained = re.findall(r'<span class="mt-trained"[^>]*>(.*?)</span>', first, flags=re.S)
    assert "Which word is number" in "".join(masked)  # the instruction is prompt: no loss
    assert "Which word" not in "".join(trained)
    assert "&lt;|im_end|&gt;" in "".join(trained)  # the answer's end-of-turn token is trained
    assert "&lt;|im_start|&gt;assistant" in "".join(masked)
    assert "format: <b>alpaca</b> (as set)" in html


def test_preview_shows_every_trained_assistant_turn_and_the_detected_format(console):
    path = write_jsonl(console.settings.data_dirs[0] / "chat.jsonl", chat_rows(4))
    config = cb.starter_config(console)
    html = preview_html(config.model.path, settings_for(config, train_file=str(path), format="auto"), samples=1)
    assert "format: <b>chat</b> (auto-detected)" in html
    assert [re.sub(r"&lt;\|im_end\|&gt;", "", t).strip() for t in trained_spans(html)] == ["yo 0", "ok 0"]
    last = preview_html(config.model.path, settings_for(config, train_file=str(path), train_on="last"), samples=1)
    assert [re.sub(r"&lt;\|im_end\|&gt;", "", t).strip() for t in trained_spans(last)] == ["ok 0"]


def test_preview_shows_the_mapping_in_effect_and_ignored_fields(console):
    rows = [{"question": f"Which word is number {i}?", "answer": "kite", "id": i} for i in range(6)]
    path = write_jsonl(console.settings.data_dirs[0] / "qa.jsonl", rows)
    config = cb.starter_config(console)
    unmapped = preview_html(config.model.path, settings_for(config, train_file=str(path), format="auto"))
    assert 'class="mt-error"' in unmapped and "data.columns={instruction: question, output: answer}" in unmapped
    mapped = settings_for(config, train_file=str(path), columns="instruction: question, output: answer")
    html = preview_html(config.model.path, mapped)
    assert re.search(r"<code>instruction</code></td><td>←</td><td><code>question</code></td>"
                     r"<td class='mt-note'>mapped by data.columns", html)
    assert "field <code>id</code> ignored in 6 of 6 records" in html
    assert "kite" in "".join(trained_spans(html))


def test_column_mapping_in_the_form_updates_the_preview(console):
    rows = [{"prompt": f"P{i}?", "completion": f"C{i}"} for i in range(6)]
    path = write_jsonl(console.settings.data_dirs[0] / "pc.jsonl", rows)
    values = form_values(console, data__train_file=str(path), data__validation_file="", data__test_file="",
                         data__validation_fraction=0.2, data__format="auto")
    assert "cannot tell the format" in data_callbacks.preview_view(values, console)
    values["data.columns"] = "instruction: prompt, output: completion"
    assert "C0" in "".join(trained_spans(data_callbacks.preview_view(values, console)))
    config = cb.check_form(values, console).config
    assert config.data.columns == {"instruction": "prompt", "output": "completion"}


def test_without_prompt_masking_everything_is_trained(console):
    config = cb.starter_config(console)
    html = preview_html(config.model.path, settings_for(config, mask_prompt=False), samples=1)
    body = html.split("</table>", 1)[-1]
    assert 'class="mt-masked"' not in body.split('<pre class="mt-sample">', 1)[-1] and 'class="mt-trained"' in html


def test_truncation_is_announced(console):
    config = cb.starter_config(console)
    html = preview_html(config.model.path, settings_for(config, max_seq_len=24, mask_prompt=False), samples=1)
    assert "cut by max_seq_len" in html
    cut = preview_html(config.model.path, settings_for(config, max_seq_len=24), samples=1)
    assert re.search(r"line 1 · \d+ tokens, cut to 24 \([1-9]\d* trained; data.overlong: truncate\)", cut)
    assert 'class="mt-trained"' in cut  # the start of the answer still trains
    skipped = preview_html(config.model.path, settings_for(config, max_seq_len=24, overlong="skip"), samples=1)
    assert re.search(r"line 1 · \d+ tokens: skipped \(over max_seq_len; data.overlong: skip\)", skipped)
    refused = preview_html(config.model.path, settings_for(config, max_seq_len=24, overlong="error"), samples=1)
    assert "1 record is longer than data.max_seq_len=24 tokens (data.overlong: error)" in refused


def test_bad_data_is_shown_with_file_and_line(console):
    bad = console.settings.data_dirs[0] / "bad.jsonl"
    bad.write_text('{"instruction": "a", "output": "b"}\nnot json\n')
    config = cb.starter_config(console)
    html = preview_html(config.model.path, settings_for(config, train_file=str(bad)))
    assert 'class="mt-error"' in html and "line 2" in html


def test_token_runs_split_where_labels_switch(model_root):
    tokenizer = Tokenizer.from_dir(model_root / "tiny")
    ids = tokenizer.encode("apple pear plum", add_special_tokens=False)
    labels = [-100] * 2 + ids[2:]
    runs = token_runs(tokenizer, ids, labels)
    assert [r.trained for r in runs] == [False, True]
    assert "".join(r.text for r in runs) == tokenizer.decode(ids, skip_special_tokens=False)


def test_stats_histogram_truncation_overlap_and_padding_efficiency(console):
    config = cb.starter_config(console)
    settings = settings_for(config, max_seq_len=128)
    stats = data_stats(config.model.path, settings, 0)
    assert stats.train.samples == 32 and stats.validation.samples == 8
    assert 0 < stats.train.padding_efficiency < stats.train.packed_efficiency <= 1
    text = stats_markdown(stats, 128)
    assert "truncated" in text and "overlap" in text
    assert (f"{100 * stats.train.padding_efficiency:.0f}% one sample per row (rows of {stats.seq_len})" in text
            and f"{100 * stats.train.packed_efficiency:.0f}% with data.packing (rows of 128)" in text)
    html = histogram_html(stats, 128)
    assert html.count('class="mt-bar') == len(stats.train.histogram_counts)
    assert data_stats(config.model.path, settings, 0) is stats  # kept in memory: the form refreshes often


def test_stats_list_ignored_fields(console):
    rows = [{"instruction": "Which word?", "input": "a b", "output": "a", "source": "x"}] * 10
    path = write_jsonl(console.settings.data_dirs[0] / "extra.jsonl", rows)
    config = cb.starter_config(console)
    stats = data_stats(config.model.path, settings_for(config, train_file=str(path), validation_file=None,
                                                       validation_fraction=0.2), 0)
    assert "- ⚠ train: field `source` ignored in 8 of 8 records" in stats_markdown(stats, 64)


def test_data_view_refuses_files_outside_the_data_roots(console, tmp_path):
    outside = tmp_path / "outside.jsonl"
    outside.write_text('{"instruction": "a", "output": "b"}\n')
    values = form.to_values(cb.starter_config(console))
    values["data.train_file"] = str(outside)
    view = data_callbacks.data_view(values, console)
    assert "outside the folders" in view.preview and view.histogram == ""


# ---- uploads (issue 20: duplicates, detected format) ------------------------------------------

def test_upload_is_size_limited_and_kept_under_uploads(console, tmp_path):
    small = tmp_path / "my data!.jsonl"
    small.write_text('{"text": "hello"}\n')
    result = data_callbacks.upload(str(small), small.name, console)
    assert result.dataset.train_file.endswith("uploads/my_data.jsonl")
    assert (console.settings.uploads_dir / "my_data.jsonl").is_file()
    assert result.dataset.train_file in [value for _, value in data_callbacks.dataset_choices(console)]
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


def test_uploading_the_same_file_twice_keeps_one_copy(console, tmp_path):
    source = write_jsonl(tmp_path / "chat.jsonl", chat_rows(5))
    first = data_callbacks.upload(str(source), "chat.jsonl", console)
    second = data_callbacks.upload(str(source), "chat.jsonl", console)
    assert first.dataset == second.dataset
    assert sorted(p.name for p in console.settings.uploads_dir.iterdir()) == ["chat.jsonl"]
    (tmp_path / "other").mkdir()
    changed = write_jsonl(tmp_path / "other" / "chat.jsonl", chat_rows(6))
    third = data_callbacks.upload(str(changed), "chat.jsonl", console)
    assert re.fullmatch(r".*/chat-[0-9a-f]{8}\.jsonl", third.dataset.train_file)
    again = data_callbacks.upload(str(changed), "chat.jsonl", console)
    assert again.dataset == third.dataset and len(list(console.settings.uploads_dir.iterdir())) == 2
    labels = [label for label, _ in data_callbacks.dataset_choices(console)]
    assert len(labels) == len(set(labels))


def test_an_uploaded_chat_file_is_detected_and_switches_the_form_to_auto(console, tmp_path):
    source = write_jsonl(tmp_path / "chat.jsonl", chat_rows(5))
    result = data_callbacks.upload(str(source), "chat.jsonl", console)
    assert result.detected_format == "chat" and "format **chat** (detected)" in result.note
    picked = cb.dataset_fields(result.dataset.train_file, console)
    assert picked["data.format"] == "auto" and picked["data.columns"] == ""
    values = form_values(console, data__format="alpaca", data__columns="instruction: q")
    values.update(picked)
    assert cb.check_form(values, console).ok
    assert "format: <b>chat</b> (auto-detected)" in data_callbacks.preview_view(values, console)


def test_an_uploaded_file_in_no_known_format_says_why(console, tmp_path):
    source = write_jsonl(tmp_path / "odd.jsonl", [{"question": "q", "answer": "a"}])
    result = data_callbacks.upload(str(source), "odd.jsonl", console)
    assert result.detected_format is None and "cannot tell the format" in result.note


def test_an_uploaded_pair_file_is_said_to_be_pairs_as_the_preview_shows_it(console, tmp_path):
    """Issue 37 item 3: pairs in the shipped layout (instruction, input, chosen, rejected) are no SFT
    format, yet no problem either: the note says pairs, as the preview and Start do."""
    rows = [{"instruction": "Who has the ball?", "input": "Tom has the ball.", "chosen": "Tom", "rejected": "ball"}] * 3
    result = data_callbacks.upload(str(write_jsonl(tmp_path / "pairs.jsonl", rows)), "pairs.jsonl", console)
    assert result.preference == "pairs" and result.problem is None
    assert "⚠" not in result.note and "**preference pairs** (chosen/rejected): 3 records" in result.note
    assert "**偏好对**（chosen/rejected）：3 条记录" in result.note_in("zh")
    values = form_values(console)
    values.update(cb.dataset_fields(result.dataset.train_file, console))
    assert data_callbacks.preview_view(values, console).count('class="mt-pair"') == 3
    kto = [{"instruction": "Who?", "output": "Tom", "label": True}] * 2
    assert "**KTO answers**" in data_callbacks.upload(str(write_jsonl(tmp_path / "kto.jsonl", kto)), "kto.jsonl",
                                                      console).note


def test_a_zipped_save_to_disk_folder_becomes_a_dataset(console, tmp_path):
    from tests.core.test_data_files import CHAT_ROWS, dataset_dict
    folder = dataset_dict(tmp_path / "my_ds", {"train": CHAT_ROWS[:8], "test": CHAT_ROWS[8:]})
    archive = tmp_path / "my_ds.zip"
    with zipfile.ZipFile(archive, "w") as handle:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                handle.write(path, f"my_ds/{path.relative_to(folder)}")
    result = data_callbacks.upload(str(archive), "my_ds.zip", console)
    assert result.dataset.train_file.endswith("uploads/my_ds") and result.dataset.test_file.endswith("uploads/my_ds")
    assert result.dataset.validation_file is None and result.detected_format == "sharegpt"
    assert data_callbacks.upload(str(archive), "my_ds.zip", console).dataset == result.dataset
    assert [d.name for d in scan_datasets([console.settings.uploads_dir])] == ["my_ds"]
    values = form_values(console)
    values.update(cb.dataset_fields(result.dataset.train_file, console))
    check = cb.check_form(values, console)
    assert check.ok, check.errors
    assert check.config.data.validation_fraction == 0.1


def test_a_zip_that_escapes_its_folder_is_refused(console, tmp_path):
    archive = tmp_path / "evil.zip"
    with zipfile.ZipFile(archive, "w") as handle:
        handle.writestr("../../outside.jsonl", json.dumps({"text": "x"}))
    try:
        data_callbacks.upload(str(archive), "evil.zip", console)
    except UploadError as err:
        assert "'..'" in str(err)
    else:
        raise AssertionError("a zip member outside its folder was accepted")
    assert not (tmp_path / "outside.jsonl").exists()


# ---- Start never launches data the preview knows is broken (issue 20) ---------------------------

def test_malformed_data_blocks_start_with_the_line_number(console, fake_launcher):
    rows = [json.dumps({"instruction": f"q{i}", "output": f"a{i}"}) for i in range(8)]
    rows[4] = '{"instruction": "q4", "output": '  # line 5
    path = console.settings.data_dirs[0] / "broken.jsonl"
    path.write_text("\n".join(rows) + "\n")
    values = form_values(console, data__train_file=str(path))
    check = cb.check_form(values, console)
    assert not check.ok and "line 5" in check.errors["data.train_file"] and "invalid JSON" in check.errors["data.train_file"]
    outcome = cb.start(values, console)
    assert outcome.run_id is None and "line 5" in outcome.errors["data.train_file"]
    assert fake_launcher.created == [] and fake_launcher.launched == []


def test_a_mapping_to_a_missing_column_blocks_start_on_the_mapping_field(console, fake_launcher):
    values = form_values(console, data__columns="instruction: instruction, output: answr")
    check = cb.check_form(values, console)
    assert not check.ok and "'answr'" in check.errors["data.columns"]
    assert cb.start(values, console).run_id is None and fake_launcher.launched == []


def test_a_broken_validation_file_is_reported_on_its_field(console):
    bad = console.settings.data_dirs[0] / "demo" / "validation.jsonl"
    bad.write_text('{"instruction": "a", "output": 3}\n')
    check = cb.check_form(form_values(console), console)
    assert "line 1: field 'output' must be a string" in check.errors["data.validation_file"]


# ---- wiring: nothing keeps the data section busy (issue 20: the dimmed preview) -----------------

def looping_pairs(demo, elem_prefixes: tuple[str, ...]) -> list[tuple[str, str, str]]:
    """Pairs of "always_last" change events (A, B) where A outputs a component X, B is triggered by
    X's change and reads X, and A is triggered by X's change too: in Gradio 6.31 such a pair
    re-triggers itself forever once A has updated X (a 30-line app looped 20 times in 8 s)."""
    config = demo.get_config_file()
    names = {c["id"]: (c.get("props") or {}).get("elem_id") or "" for c in config["components"]}
    deps = [d for d in config["dependencies"]
            if d["trigger_mode"] == "always_last" and any(t[1] == "change" for t in d["targets"])]
    pairs = []
    for a in deps:
        a_changes = {t[0] for t in a["targets"] if t[1] == "change"}
        for b in deps:
            b_changes = {t[0] for t in b["targets"] if t[1] == "change"}
            for x in set(a["outputs"]) & b_changes & set(b["inputs"]) & a_changes if a is not b else ():
                if names[x].startswith(elem_prefixes):
                    pairs.append((str(a["id"]), str(b["id"]), names[x]))
    return pairs


@pytest.mark.slow
def test_no_two_change_events_re_trigger_each_other_on_the_data_fields(console):
    from app.server import build_app
    demo = build_app(console)
    data_ids = ("cfg-data-", "dataset-", "data-")
    assert looping_pairs(demo, data_ids) == []
    import gradio as gr
    with gr.Blocks() as pattern:  # the check itself finds the pattern (the wiring this replaced)
        field, shown, errors = gr.Textbox(elem_id="cfg-data-x"), gr.HTML(), gr.State({})
        gr.on([field.change], lambda v, e: (e, gr.skip()), [field, errors], [errors, field], trigger_mode="always_last")
        gr.on([field.change], lambda v: v, [field], [shown], trigger_mode="always_last")
    assert [name for *_, name in looping_pairs(pattern, data_ids)] == ["cfg-data-x"]
