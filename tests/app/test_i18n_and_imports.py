"""Labels in two languages, the page's stable element ids, and no MindSpore in the console process."""
from __future__ import annotations

import subprocess
import sys

import pytest

from core.run.launcher import REPO_ROOT

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


# Symbols the console may write besides ASCII and CJK: each is in DejaVu Sans (which Debian's
# chromium pulls in) or Noto Sans CJK (scripts/install_browser.sh), so it never draws as an empty box.
DRAWABLE_SYMBOLS = set("⚠·…—–Δ×→←✓✗⬇“”‘’−≤≥±°µ")


def _cjk(char: str) -> bool:
    code = ord(char)
    return 0x4E00 <= code <= 0x9FFF or 0x3000 <= code <= 0x303F or 0xFF00 <= code <= 0xFFEF


def test_every_symbol_the_console_writes_has_a_glyph():
    """Issue 20 bug 9: ⏳ and ❌ rendered as empty boxes on a machine without an emoji font."""
    app_dir = REPO_ROOT / "app"
    sources = {p.name: p.read_text(encoding="utf-8") for p in sorted(app_dir.glob("*.py")) + sorted(app_dir.glob("*.js"))}
    sources["i18n.TEXTS"] = "".join(en + zh for en, zh in TEXTS.values())
    odd = {f"{name}: {char!r}" for name, source in sources.items() for char in source
           if ord(char) > 127 and not _cjk(char) and char not in DRAWABLE_SYMBOLS}
    assert not odd, sorted(odd)


def test_the_allowed_symbols_are_in_an_installed_font_when_fontconfig_is_here():
    import shutil

    if shutil.which("fc-list") is None:
        pytest.skip("no fontconfig on this machine")
    missing = [c for c in sorted(DRAWABLE_SYMBOLS)
               if not subprocess.run(["fc-list", f":charset={ord(c):x}", "family"], capture_output=True,
                                     text=True, timeout=30).stdout.strip()]
    assert not missing, missing


def test_the_messages_that_answer_an_action_read_in_chinese():
    """Issue 20 bug 10: the message under Start, after a queue move or a stop, in 中文 mode; the run
    ids and settings in them stay as written (checked with the browser test's English-word finder)."""
    from app.i18n import action_text
    from tests.app.test_browser_page import english_words

    messages = ["⚠ not started: fix the problems listed", "✓ started 20261201-120000_tiny-demo_lora-r8_fp32_dp1",
                "✓ queued 20261201-120001_x (#2 in the cpu queue; it starts when 20261201-120000_y frees the device)"
                "; made from 20261201-120000_y: lora.rank 8 → 16",
                "✓ started 20261201-120002_z; forked from 20261201-120000_y at step 10: no setting changed",
                "20261201-120000_y: stopping now", "20261201-120000_y: stopping (saving a checkpoint first)",
                "moved 20261201-120001_x up to place 1 of your queued runs",
                "20261201-120001_x is already last in the queue", "cancelled 20261201-120001_x (it never started)",
                "queued to resume 20261201-120000_y from step-10", "⚠ select exactly one queued run"]
    for message in messages:
        assert action_text(message, "en") == message
        zh = action_text(message, "zh")
        assert english_words(zh) == [], (message, zh)
    assert "lora.rank 8 → 16" in action_text(messages[2], "zh") and "#2" not in action_text(messages[2], "zh")


PICKS = {"dropdown", "checkboxgroup", "radio", "checkbox", "number", "textbox", "slider"}


def test_every_pick_answers_its_newest_value(console):
    """An event a pick triggers (a tick in the Runs selection, a run or a dataset picked) must not be
    Gradio's "once" (`.input`'s default): with it, a second tick made while the first one's answer was
    on its way was dropped, and the page kept showing the older selection (CI's 'D's result deltas')."""
    from app.server import build_app

    config = build_app(console).get_config_file()
    types = {c["id"]: (c.get("type"), c.get("props", {}).get("elem_id")) for c in config["components"]}
    once = sorted({f"{types[target][1] or target}.{event}" for dep in config["dependencies"]
                   if dep.get("backend_fn") and dep.get("trigger_mode") == "once"
                   for target, event in dep["targets"]
                   if event in ("input", "change", "select") and types.get(target, (None,))[0] in PICKS})
    assert once == []
    picked = {types[t][1] for dep in config["dependencies"] for t, e in dep["targets"] if e == "input" and t in types}
    assert {"runs-select", "run-picker", "dataset-picker"} <= picked  # the test looks at the real events
