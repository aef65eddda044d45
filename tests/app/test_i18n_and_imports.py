"""Labels in two languages, the page's stable element ids, and no MindSpore in the console process."""
from __future__ import annotations

import subprocess
import sys

import pytest

from core.launcher import REPO_ROOT

from app.i18n import TEXTS, Labels, text


def test_every_text_has_both_languages():
    missing = [k for k, (en, zh) in TEXTS.items() if not en or not zh]
    assert missing == []


def test_labels_switch_language():
    labels = Labels("en")

    class Widget:
        label = None

    widget = labels.bind(Widget(), label="tab.train")
    assert widget.label == "Train"
    assert labels.values("zh") == [{"label": "训练"}] and labels.values("en") == [{"label": "Train"}]
    assert text("no.such.key", "zh") == "no.such.key"
    with pytest.raises(KeyError):
        labels.bind(Widget(), label="no.such.key")


def test_importing_the_console_does_not_import_mindspore():
    code = ("import sys, app, app.server, app.train_callbacks, app.monitor_callbacks, app.runs_callbacks, "
            "app.try_callbacks, app.data_preview; print('mindspore' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


STABLE_IDS = ["model-picker", "dataset-picker", "start-button", "stop-button", "stop-now-button", "patience",
              "es-apply", "loss-plot", "ppl-plot", "val-loss-plot", "run-state", "run-picker", "download-adapter",
              "download-merged", "download-mindspore", "tab-train", "tab-monitor", "tab-runs", "tab-try",
              "lang-toggle", "runs-table", "resume-button", "delete-button", "try-generate", "config-errors"]


def test_the_page_has_the_stable_element_ids_and_builds_without_a_browser(console):
    from app.server import build_app

    demo = build_app(console)
    config = demo.get_config_file()
    ids = {c.get("props", {}).get("elem_id") for c in config["components"]}
    assert set(STABLE_IDS) <= ids, set(STABLE_IDS) - ids


def test_the_queue_polls_gently_when_idle(console):
    from app.server import build_app, relax_queue_polling

    demo = build_app(console)
    demo.queue(default_concurrency_limit=4)
    assert demo._queue.sleep_when_free == 0.001  # Gradio's own: a wake-up every millisecond
    relax_queue_polling(demo)
    assert (demo._queue.sleep_when_free, demo._queue.progress_update_sleep_when_free) == (0.02, 0.1)
