"""Labels in two languages, the page's stable element ids, and no MindSpore in the console process."""
from __future__ import annotations

import subprocess
import sys

import pytest

from core.run.launcher import REPO_ROOT

from app.i18n import TEXTS, Labels, text

from tests import skips


def test_every_text_has_both_languages():
    missing = [k for k, entry in TEXTS.items() if not entry.en or not entry.zh]
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


@pytest.mark.slow
def test_importing_the_console_does_not_import_mindspore():
    code = ("import sys, app, app.server, app.tabs.train_callbacks, app.tabs.monitor_callbacks, app.tabs.runs_callbacks, "
            "app.tabs.try_callbacks, app.data.data_preview; print('mindspore' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


STABLE_IDS = ["model-picker", "dataset-picker", "start-button", "stop-button", "stop-now-button", "patience",
              "es-apply", "loss-plot", "ppl-plot", "val-loss-plot", "run-state", "run-picker", "download-adapter",
              "download-merged", "download-mindspore", "tab-train", "tab-monitor", "tab-runs", "tab-try",
              "lang-toggle", "runs-table", "resume-button", "delete-button", "try-generate", "config-errors"]


@pytest.mark.slow
def test_the_page_has_the_stable_element_ids_and_builds_without_a_browser(console):
    from app.server import build_app

    demo = build_app(console)
    config = demo.get_config_file()
    ids = {c.get("props", {}).get("elem_id") for c in config["components"]}
    assert set(STABLE_IDS) <= ids, set(STABLE_IDS) - ids


@pytest.mark.slow
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
    sources["i18n.TEXTS"] = "".join(entry.en + entry.zh for entry in TEXTS.values())
    odd = {f"{name}: {char!r}" for name, source in sources.items() for char in source
           if ord(char) > 127 and not _cjk(char) and char not in DRAWABLE_SYMBOLS}
    assert not odd, sorted(odd)


def test_the_allowed_symbols_are_in_an_installed_font_when_fontconfig_is_here():
    import shutil

    if shutil.which("fc-list") is None:
        skips.skip("machine", "no fontconfig on this machine")
    missing = [c for c in sorted(DRAWABLE_SYMBOLS)
               if not subprocess.run(["fc-list", f":charset={ord(c):x}", "family"], capture_output=True,
                                     text=True, timeout=30).stdout.strip()]
    assert not missing, missing


def test_the_messages_that_answer_an_action_read_in_chinese():
    """Issue 20 bug 10: the message under Start, after a queue move or a stop, in 中文 mode; the run
    ids and settings in them stay as written (checked with the browser test's English-word finder).
    Issue 29 item 2: each is a Said (a key and its parameters), its English and its 中文 from the
    same table; the English is what the console said before."""
    from app.i18n import Said, action_text
    from tests.app.test_browser_page import english_words

    x, y, z = "20261201-120001_x", "20261201-120000_y", "20261201-120002_z"
    messages = {
        "⚠ not started: fix the problems listed": Said("act.warn", message=Said("act.not_started_fix")),
        "✓ started 20261201-120000_tiny-demo_lora-r8_fp32_dp1":
            Said("act.done", message=Said("act.started", run="20261201-120000_tiny-demo_lora-r8_fp32_dp1")),
        f"✓ queued {x} (#2 in the cpu queue; it starts when {y} frees the device); made from {y}: lora.rank 8 → 16":
            Said("act.done", message=Said("act.with_origin", message=Said(
                "act.queued_place", run=x, place=2, device=Said("act.queue.cpu"), busy=y),
                origin=Said("act.made_from", run=y, changes="lora.rank 8 → 16"))),
        f"✓ started {z}; forked from {y} at step 10: no setting changed":
            Said("act.done", message=Said("act.with_origin", message=Said("act.started", run=z), origin=Said(
                "act.forked_from", run=y, step=10, changes=Said("act.no_change")))),
        f"{y}: stopping now": Said("act.stopping_now", run=y),
        f"{y}: stopping (saving a checkpoint first)": Said("act.stopping", run=y),
        f"moved {x} up to place 1 of your queued runs": Said("act.moved_up", run=x, place=1),
        f"{x} is already last in the queue": Said("act.already_last", run=x),
        f"cancelled {x} (it never started)": Said("act.cancelled", run=x),
        f"queued to resume {y} from step-10": Said("act.queued_to_resume", run=y, checkpoint="step-10"),
        "⚠ select exactly one queued run": Said("act.select_one_queued"),
        f"submitted {x} as Slurm job 7 (running)": Said("act.submitted", run=x, job="7", state=Said("state.running")),
        "not started: the memory estimate does not fit": Said("act.not_started_because",
                                                              problem="the memory estimate does not fit"),
    }
    for english, said in messages.items():
        assert said == english and action_text(said, "en") == english
        zh = action_text(said, "zh")
        assert english_words(zh) == [] or said.key == "act.not_started_because", (english, zh)
    queued = next(s for e, s in messages.items() if "#2" in e)
    assert "lora.rank 8 → 16" in action_text(queued, "zh") and "CPU 队列第 2 位" in action_text(queued, "zh")
    import copy
    import pickle
    for said in messages.values():  # Gradio's state copies values: a Said stays one
        again = pickle.loads(pickle.dumps(said))
        assert copy.deepcopy(said).in_lang("zh") == again.in_lang("zh") == said.in_lang("zh")
    with pytest.raises(KeyError, match="act.nope"):
        Said("act.nope")
    # core's messages (an error the action met) are not the console's: said by problem_text
    assert action_text("⚠ data.max_seq_len = 4: must be an integer >= 8", "zh").startswith("⚠ data.max_seq_len")


def test_every_action_text_has_both_languages_with_the_same_parameters():
    """A missing or mismatched translation fails here, not in a user's page."""
    import string
    from app.i18n import TEXTS

    def names(template: str) -> set[str]:
        return {field for _, field, _, _ in string.Formatter().parse(template) if field}

    actions = {k: v for k, v in TEXTS.items() if k.startswith("act.")}
    assert len(actions) > 35
    assert [k for k, entry in actions.items() if not entry.zh or names(entry.en) != names(entry.zh)] == []


PICKS = {"dropdown", "checkboxgroup", "radio", "checkbox", "number", "textbox", "slider"}


@pytest.mark.slow
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


def test_every_core_message_has_its_chinese_with_the_same_parameters():
    """core.spec.messages' catalogue and the console's 中文 of it: a message without its translation,
    or with other parameters, fails here (issue 29 item 2: at build time, not in a user's page)."""
    from app.i18n import MESSAGES_ZH
    from core.spec.messages import CATALOGUE, placeholders
    from tests.app.english import english_words

    assert sorted(MESSAGES_ZH) == sorted(CATALOGUE)
    assert [k for k, zh in MESSAGES_ZH.items() if placeholders(zh) != placeholders(CATALOGUE[k])] == []
    assert [k for k, zh in MESSAGES_ZH.items() if english_words(zh)] == []


def test_why_a_run_ended_reads_in_chinese_by_its_id_and_old_runs_by_their_english():
    from app.i18n import reason_text
    from core.spec.messages import Message

    reason = Message("run.no_improvement", monitor="val_loss", min_delta=0.0, patience=3, best="1.2345", step=40)
    assert reason_text(reason, "en") == "val_loss did not improve by 0.0 for 3 evaluations (best 1.2345 at step 40)"
    assert reason_text(reason, "zh", reason.to_json()) == "val_loss 连续 3 次评估未改进 0.0 以上（最佳 1.2345，第 40 步）"
    # the id decides, not the English (an edited or reworded English still reads in 中文)
    assert reason_text("reworded", "zh", Message("run.reached_steps", steps=6).to_json()) == "已达到 6 步"
    # the record of a reason with a note (the trainer's stop: run.with_note), each part by its id
    stopped = Message("run.with_note", reason=Message("run.stopped_forced"),
                      note=Message("run.resumable", checkpoint="step-4"))
    assert reason_text(str(stopped), "zh", stopped.to_json()) == "用户强制停止；最新可恢复的检查点：step-4"
    # a run written before the ids: its English as it is, never read back
    assert reason_text(str(stopped), "zh") == "stopped by the user (forced); newest resumable checkpoint: step-4"
    assert reason_text("RuntimeError: Allocate memory failed", "zh") == "RuntimeError: Allocate memory failed"


@pytest.mark.parametrize("updates", [
    {"parallel.device": "gpu", "train.objective": "dpo", "method": "full", "precision.amp_level": "O2",
     "train.grad_accum_steps": 2},
    {"train.objective": "kto", "recompute.policy": "full", "parallel.data_parallel": 2},
    {"parallel.device": "ascend", "precision.amp_level": "O2", "precision.compute_dtype": "float16"},
])
def test_every_note_of_the_memory_estimate_reads_in_chinese(updates):
    """The estimate's notes are core messages by id: each has its 中文 (the preference objectives'
    and the devices' notes stayed English before)."""
    from pathlib import Path
    from app.i18n import memory_note
    from core.spec.config import Config
    from core.spec.messages import Message
    from core.spec.memory import estimate_memory
    from core.spec.model_args import ModelArgs
    from tests.app.english import english_words

    config = Config().with_updates(updates)
    notes = estimate_memory(config, ModelArgs.from_dir(Path(config.model.path)), 256, device_memory_mb=100.0).notes
    assert len(notes) >= 4
    for note in notes:
        zh = memory_note(note, "zh")
        assert zh != note and english_words(zh) == [], (note, zh)
        assert memory_note(note, "en") == note and memory_note(Message.from_json(note.to_json()), "zh") == zh
        assert memory_note(str(note), "zh") == str(note)  # a text without its id: as it is
