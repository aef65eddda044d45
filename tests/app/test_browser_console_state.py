"""Issue 31 in a real browser: what a second hour with the console showed. Repeated uploads (in a
fresh tab and after a reload) keep the preview, the YAML and the launched config on one state; the
Monitor's lower charts draw while out of view; screenshots of Train, Monitor and Runs in both
languages at 1366x900.

Drives headless Chromium through Playwright (fixtures in `browser_fixtures`); skips when the
console, the demo model, Playwright or Chromium is missing.
"""
from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
import yaml

from tests.app.test_data_browser import PREVIEW_READY_JS, chat_rows, upload, write_jsonl

pytest_plugins = ["tests.app.browser_fixtures"]
pytestmark = [pytest.mark.slow, pytest.mark.browser]

TIMEOUT_MS = float(os.environ.get("MINDTUNE_BROWSER_PHASE_TIMEOUT_S", 120)) * 1000
UPLOADS = int(os.environ.get("MINDTUNE_UPLOAD_REPEATS", 6))
SETTLE_S = 1.5  # after the preview answers: the form's own refresh has had time to land

YAML_JS = "() => { const c = document.querySelector('#config-yaml .cm-content'); return c ? c.innerText : ''; }"


def shown_state(page) -> dict:
    """What the page shows now: the Format field, the YAML's data section, the preview and errors."""
    config = yaml.safe_load(page.evaluate(YAML_JS) or "{}") or {}
    return {"field": page.input_value("#cfg-data-format input"), "yaml": config.get("data", {}),
            "preview": page.inner_text("#data-preview"), "errors": page.inner_text("#config-errors")}


# true once the Format field, the YAML and the preview all say what an upload of `name` must show
CONSISTENT_JS = """
name => {
  const code = document.querySelector('#config-yaml .cm-content');
  const yaml = code ? code.innerText : '';
  const field = document.querySelector('#cfg-data-format input');
  const preview = document.querySelector('#data-preview');
  return !!field && field.value === 'auto' && yaml.includes(name) && /\\n\\s*format: auto\\n/.test(yaml)
    && !!preview && preview.innerText.includes('format: chat (auto-detected)') && !preview.innerText.includes('missing field');
}
"""
CONSISTENT_WITHIN_S = 20  # a loaded machine (load 30 on 2 cores) took 3 s to answer all six refreshes


def check_upload(page, path: Path, attempt: str) -> dict:
    """Upload `path`; what is wrong when the page has not come to show it consistently within
    CONSISTENT_WITHIN_S (before the fix a stale refresh stayed until another field changed)."""
    upload(page, path)
    page.wait_for_function(PREVIEW_READY_JS, arg=f"{path.name} line 1", timeout=TIMEOUT_MS, polling=50)
    try:
        page.wait_for_function(CONSISTENT_JS, arg=path.name, timeout=CONSISTENT_WITHIN_S * 1000, polling=100)
    except Exception:  # noqa: BLE001 — reported with what the page shows instead
        state = shown_state(page)
        return {"attempt": attempt, "wrong": [f"Format field {state['field']!r}", f"YAML data {state['yaml']}",
                                              f"preview {state['preview'][:200]!r}"]}
    time.sleep(SETTLE_S)  # and it stays so (no late answer overwrites it)
    return {"attempt": attempt, "wrong": [] if page.evaluate(CONSISTENT_JS, path.name) else [str(shown_state(page))]}


def test_repeated_uploads_keep_preview_yaml_and_launch_on_one_state(console_server, page, tmp_path):
    """Item 1: a chat upload over the demo data (format alpaca in the starter config), again and
    again, in the same tab and after reloads: the preview, the YAML and the Format field agree
    every time, and Start launches the config the YAML showed."""
    page.goto(console_server.url)
    page.wait_for_function(PREVIEW_READY_JS, arg="format:", timeout=TIMEOUT_MS)
    results = []
    for i in range(UPLOADS):
        if i % 2:
            page.reload()
            page.wait_for_function(PREVIEW_READY_JS, arg="format:", timeout=TIMEOUT_MS)
        assert shown_state(page)["yaml"].get("format") == "alpaca" or i % 2 == 0
        chat = write_jsonl(tmp_path / f"chat_{i}.jsonl", chat_rows(30 + i))
        results.append(check_upload(page, chat, f"upload {i + 1} ({'after a reload' if i % 2 else 'same tab'})"))

    wrong = [r for r in results if r["wrong"]]
    print(f"  {len(wrong)} of {len(results)} uploads shown inconsistently")
    assert not wrong, wrong
    shown_yaml = yaml.safe_load(page.evaluate(YAML_JS))
    page.click("#start-button")
    page.wait_for_function("() => document.querySelector('#start-message').innerText.includes('✓')",
                           timeout=TIMEOUT_MS)
    runs = [p for p in console_server.runs_dir.iterdir() if (p / "config.yaml").is_file()]
    assert len(runs) == 1
    launched = yaml.safe_load((runs[0] / "config.yaml").read_text())
    assert launched["data"] == shown_yaml["data"]
