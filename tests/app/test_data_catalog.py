"""A dataset_info.json catalogue in the console (issue 27): the picker lists its datasets by name with
their formatting and size (hub entries with the reason they cannot load), picking one fills
data.train_file and data.dataset, the preview renders it in its own formatting, and a broken entry is
shown at data.dataset while the others still preview. The text preview says what it trains."""
from __future__ import annotations

import json

from tests.core.tiny_setup import write_jsonl

from app.tabs import data_callbacks, form
from app.tabs import train_callbacks as cb
from app.data.datasets import find_by_train_file, human_size

CHAT = [{"messages": [{"role": "user", "content": f"Who has the kite {i}?"},
                      {"role": "assistant", "content": f"Mia {i}."}]} for i in range(6)]
INFO = {"kites": {"file_name": "kites.jsonl", "formatting": "sharegpt", "columns": {"messages": "messages"},
                  "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant"}},
        "qa": {"file_name": "qa.jsonl", "columns": {"prompt": "question", "response": "answer"}, "num_samples": 4},
        "typo": {"file_name": "qa.jsonl", "columns": {"prompt": "questoin", "response": "answer"}},
        "hub": {"hf_hub_url": "someone/set"}}


def make_catalog(console):
    folder = console.settings.data_dirs[0] / "field"
    folder.mkdir()
    write_jsonl(folder / "kites.jsonl", CHAT)
    write_jsonl(folder / "qa.jsonl", [{"question": f"Add {i} and 1.", "answer": f"{i + 1}"} for i in range(5)])
    (folder / "dataset_info.json").write_text(json.dumps(INFO), encoding="utf-8")
    return folder


def test_picker_lists_catalogue_datasets_and_picking_one_previews_it(console):
    folder = make_catalog(console)
    choices = dict((value, label) for label, value in data_callbacks.dataset_choices(console))
    ours = {v: label for v, label in choices.items() if v.split(" :: ")[0].endswith("/field")}
    size = human_size((folder / "kites.jsonl").stat().st_size)
    assert sorted(label.split(" (")[0] for label in ours.values()) == ["field/hub", "field/kites", "field/qa", "field/typo"]
    assert f"field/kites (sharegpt, {size})" in ours.values() and size.endswith(" B")
    assert any(label.startswith("field/qa (alpaca, ") and label.endswith(", 4 samples)") for label in ours.values())
    [hub] = [label for label in ours.values() if label.startswith("field/hub")]
    assert "not loadable" in hub and "someone/set is on the Hugging Face hub" in hub
    assert not any(v.endswith("kites.jsonl") for v in choices)  # its files are not offered on their own

    kites = next(v for v in ours if v.endswith(" :: kites"))
    fields = cb.dataset_fields(kites, console)
    assert fields["data.dataset"] == "kites" and fields["data.train_file"].endswith("field")
    assert fields["data.validation_file"] is None and fields["data.validation_fraction"] == 0.1
    values = {**form.to_values(cb.starter_config(console)), **fields}
    html = data_callbacks.preview_view(values, console)
    assert "format: <b>sharegpt</b> (as set)" in html and "Mia 0." in html
    _, stats = data_callbacks.stats_view(values, console)
    assert "**train**: 5 samples (sharegpt)" in stats

    typo = {**values, **cb.dataset_fields(next(v for v in ours if v.endswith(" :: typo")), console)}
    config, errors = form.to_config(typo, str(console.runs_dir))
    problems = data_callbacks.data_problems(config, console)
    assert list(problems) == ["data.dataset"]
    assert "dataset 'typo': field 'columns.prompt' names the column 'questoin'" in problems["data.dataset"]
    assert find_by_train_file(console.datasets(), kites).dataset == "kites"


def test_text_preview_says_it_trains_every_token_and_how_lines_split(console):
    corpus = console.settings.data_dirs[0] / "corpus.txt"
    corpus.write_text("".join(f"The kite {i} flies high.\n" for i in range(12)), encoding="utf-8")
    values = {**form.to_values(cb.starter_config(console)), **cb.dataset_fields(str(corpus), console)}
    values["data.train_file"] = str(corpus)
    html = data_callbacks.preview_view(values, console)
    assert "format: <b>text</b> (auto-detected)" in html
    assert ("trained: every token of the raw text (one record per line; documents over max_seq_len cut into "
            "256-token chunks)") in html
    assert "all assistant" not in html
