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

from core.spec.config import Config, load_config
from core.run.records import FinalFigures
from core.run.rundir import RunDir

from tests.app.test_browser import choose, set_number, wait_for
from tests.app.test_data_browser import PREVIEW_READY_JS, chat_rows, upload, write_jsonl
from tests.app.test_metrics import train

pytest_plugins = ["tests.app.browser_fixtures"]
pytestmark = [pytest.mark.slow, pytest.mark.browser]

REPO_ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_MS = float(os.environ.get("MINDTUNE_BROWSER_PHASE_TIMEOUT_S", 120)) * 1000
UPLOADS = int(os.environ.get("MINDTUNE_UPLOAD_REPEATS", 6))
CPU_SLOWDOWN = 4
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
    """Item 1: a chat upload over the demo data (format alpaca set in the form), again and
    again, in the same tab and after reloads: the preview, the YAML and the Format field agree
    every time, and Start launches the config the YAML showed."""
    # a slow page, as on a busy laptop: the six change events of an upload spread further apart
    page.context.new_cdp_session(page).send("Emulation.setCPUThrottlingRate", {"rate": CPU_SLOWDOWN})
    page.goto(console_server.url)
    page.wait_for_function(PREVIEW_READY_JS, arg="format:", timeout=TIMEOUT_MS)
    results = []
    for i in range(UPLOADS):
        if i % 2:
            page.reload()
            page.wait_for_function(PREVIEW_READY_JS, arg="format:", timeout=TIMEOUT_MS)
        # the demo configs leave data.format auto (issue 27): set alpaca by hand, as the race needs an
        # upload over a form whose format is not what the new file wants
        choose(page, "cfg-data-format", "alpaca")
        wait_for(lambda: shown_state(page)["yaml"].get("format") == "alpaca", "the YAML to say format: alpaca")
        chat = write_jsonl(tmp_path / f"chat_{i}.jsonl", chat_rows(30 + i))
        results.append(check_upload(page, chat, f"upload {i + 1} ({'after a reload' if i % 2 else 'same tab'})"))

    wrong = [r for r in results if r["wrong"]]
    print(f"  {len(wrong)} of {len(results)} uploads shown inconsistently")
    assert not wrong, wrong
    shown_yaml = yaml.safe_load(page.evaluate(YAML_JS))
    page.click("#start-button")
    page.wait_for_function("() => document.querySelector('#start-message')?.innerText.includes('✓')",
                           timeout=TIMEOUT_MS)
    runs = [p for p in console_server.runs_dir.iterdir() if (p / "config.yaml").is_file()]
    assert len(runs) == 1
    launched = yaml.safe_load((runs[0] / "config.yaml").read_text())
    assert launched["data"] == shown_yaml["data"]
    check_start_message_goes(page, runs[0].name)


def check_start_message_goes(page, run_id: str) -> None:
    """Item 4: the launch's "✓ started …" is about that launch: it goes with "New run from this one"
    (and a fork, the same event with a step) and with "Start fresh instead", which brings the form the
    console opens with, not the values of the run it was filled from."""
    page.click("#tab-runs-button")
    page.wait_for_selector(f"#runs-select label:has-text('{run_id}')", timeout=TIMEOUT_MS)
    page.locator("#runs-select label", has_text=run_id).first.locator("input").set_checked(True)
    page.click("#runs-new-from")
    page.wait_for_function("run => document.querySelector('#reference-banner')?.innerText.includes(run)", arg=run_id,
                           timeout=TIMEOUT_MS)
    assert "✓" not in page.inner_text("#start-message"), page.inner_text("#start-message")
    set_number(page, "cfg-lora-rank", 4)
    set_number(page, "cfg-train-learning-rate", 0.0123)
    set_number(page, "train-length", 77)
    page.wait_for_function(f"""() => {{ const y = ({YAML_JS})();
        return y.includes('rank: 4') && y.includes('learning_rate: 0.0123') && y.includes('max_steps: 77'); }}""",
                           timeout=TIMEOUT_MS)
    page.click("#start-button")  # a second run (queued behind the first)
    page.wait_for_function("() => document.querySelector('#start-message')?.innerText.includes('✓')",
                           timeout=TIMEOUT_MS)
    page.click("#tab-train-button")
    page.click("#reference-clear")
    starter = load_config(REPO_ROOT / "configs" / "lora_demo.yaml")
    page.wait_for_function("""s => document.querySelector('#cfg-lora-rank input')?.value === String(s.rank)
        && Number(document.querySelector('#cfg-train-learning-rate input')?.value) === s.lr
        && Number(document.querySelector('#train-length input')?.value) === s.steps""",
                           arg={"rank": starter.lora.rank, "lr": starter.train.learning_rate,
                                "steps": starter.train.max_steps}, timeout=TIMEOUT_MS)
    assert "✓" not in page.inner_text("#start-message") and not page.is_visible("#reference-banner")


# ---- runs made without training: the Monitor, the Runs comparison, the screenshots ---------------

SCREEN = {"width": 1366, "height": 900}
LOWER_CHARTS = {"memory": "memory-plot", "tokens_per_s": "tps-plot", "lr": "lr-plot", "grad_norm": "grad-norm-plot",
                "loss_scale": "loss-scale-plot"}
DRAWN_STEPS_JS = """
id => { const svg = document.querySelector(`#${id} svg.mt-chart[data-run]`);
        return svg ? Number(svg.dataset.points) : 0; }
"""
IN_VIEW_JS = "id => { const r = document.querySelector(`#${id}`).getBoundingClientRect(); return r.top < innerHeight; }"


def fake_run(runs_dir: Path, run_id: str, final: str, steps: int = 0, **config) -> RunDir:
    """A run folder as a finished (or cancelled) run leaves it, with `steps` logged steps."""
    run = RunDir.create(runs_dir, run_id, Config().with_updates(config).to_yaml())
    if final == "cancelled":
        run.write_status(state="stopped", reason="cancelled before it started")
        return run
    run.write_status(state="starting")
    run.write_status(state="running", step=0, total_steps=60, rank_count=1)
    run.append_metrics([train(s, 3.0 - s / 100) for s in range(1, steps + 1)])
    run.write_status(state=final, step=steps)
    return run


def settle(page, seconds: float = 1.5) -> None:
    page.wait_for_timeout(seconds * 1000)


# Every question the Monitor's feed sends (a POST to a server function), with the browser's clock.
RECORD_FEED_JS = """
(() => {
  window.__asks = [];
  const fetched = window.fetch;
  window.fetch = function (url, options) {
    if (String(url).includes('component_server') && options && typeof options.body === 'string')
      window.__asks.push([Date.now(), options.body]);
    return fetched.apply(this, arguments);
  };
})();
"""
# When the picker first shows `run` (sampled every 10 ms from now on).
WATCH_PICKER_JS = """
run => { window.__pickedAt = null;
  const timer = setInterval(() => {
    if (document.querySelector('#run-picker input')?.value.trim() === run) { window.__pickedAt = Date.now(); clearInterval(timer); }
  }, 10); }
"""


def platform_fonts(page, selector: str) -> dict[str, list[str]]:
    """{text: the fonts Chromium drew it with} for each element of `selector` that has text of its own
    (Chromium's DevTools protocol: what was drawn, not what the CSS asked for)."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("DOM.enable")
    cdp.send("CSS.enable")
    root = cdp.send("DOM.getDocument", {"depth": -1})["root"]["nodeId"]
    drawn = {}
    for node in cdp.send("DOM.querySelectorAll", {"nodeId": root, "selector": selector})["nodeIds"]:
        fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
        if fonts:
            html = cdp.send("DOM.getOuterHTML", {"nodeId": node})["outerHTML"]
            drawn[re.sub(r"<[^>]+>", "", html).strip()] = [f["familyName"] for f in fonts]
    cdp.detach()
    return drawn


def check_monitor_layout(page) -> None:
    """Item 6 on the Monitor (a finished run, not profiled): the bold words of the status line in one
    font each ("ETA" ended in a smaller A drawn by another font), no profiler trace button, and
    "Apply to the running job" a button of its own height, not a block the group's height."""
    page.wait_for_function("() => document.querySelector('#run-status')?.innerText.includes('ETA')", timeout=TIMEOUT_MS)
    fonts = platform_fonts(page, "#run-status b")
    assert "ETA" in fonts and all(len(f) == 1 for f in fonts.values()), fonts
    assert not page.is_visible("#profile-trace")
    apply_box = page.locator("#es-apply").bounding_box()
    assert "primary" in (page.get_attribute("#es-apply", "class") or "") and apply_box["height"] < 50, apply_box


def check_runs_table(page, finished_run: str, parent_run: str) -> None:
    """Item 6 on the Runs tab: every column inside the page (the reason and parent columns were cut and
    the table scrolled sideways), headers in one font each ("MB" ended in a smaller B), tokens/s and
    megabytes whole numbers (557.5 stood among whole ones), and (item 4) the parent column."""
    page.wait_for_function("run => document.querySelector('#runs-table')?.innerText.includes(run)", arg=finished_run,
                           timeout=TIMEOUT_MS)
    overflow = page.evaluate("""() => { const box = document.querySelector('#runs-table').getBoundingClientRect();
        return Array.from(document.querySelectorAll('#runs-table th')).filter(th => th.getBoundingClientRect().right > box.right + 1)
                    .map(th => th.innerText.trim()); }""")
    assert overflow == [], f"headers past the table's right edge: {overflow}"
    fonts = platform_fonts(page, "#runs-table th *")
    assert "peak MB" in fonts and all(len(f) == 1 for f in fonts.values()), fonts
    heads = page.evaluate("() => Array.from(document.querySelectorAll('#runs-table thead th')).map(th => th.innerText.trim())")
    rows = [[row.get(str(i), "") for i in range(len(heads))] for row in page.evaluate(TABLE_CELLS_JS).values()]
    columns = {name: [row[i] for row in rows] for i, name in enumerate(heads)}
    assert "557.5" not in str(columns) and all(re.fullmatch(r"\d+|-", v) for v in columns["tokens/s"] + columns["peak MB"]), columns
    assert "558" in columns["tokens/s"], columns["tokens/s"]
    parent = {row[0]: row[-1] for row in rows}
    assert parent[finished_run] == f"{parent_run} · step 10" and heads[-1] == "parent", (heads, parent)


# The runs table's cells {row: {column: text}}: Gradio draws only the rows in view, so the table is
# scrolled through from top to bottom (and back).
TABLE_CELLS_JS = """
async () => {
  const cells = {};
  const grab = () => document.querySelectorAll('#runs-table [role=gridcell]').forEach(c => {
    (cells[c.dataset.row] = cells[c.dataset.row] || {})[c.dataset.col] = c.innerText.trim(); });
  const boxes = Array.from(document.querySelectorAll('#runs-table *')).filter(e => e.scrollHeight > e.clientHeight + 2
    && ['auto', 'scroll'].includes(getComputedStyle(e).overflowY));
  grab();
  for (const box of boxes) {
    for (let top = 0; top <= box.scrollHeight; top += 40) {
      box.scrollTop = top; await new Promise(r => setTimeout(r, 30)); grab();
    }
    box.scrollTop = 0;
  }
  return cells;
}
"""


def test_monitor_runs_and_layout_on_made_runs(console_server, browser, screenshot):
    """Item 2: a reload opens the newest run with points, not a newer one cancelled before it
    started. Item 3: with the page at the top, the lower charts (out of view) draw new points as
    the loss chart does. Item 8: ticks made in quick succession end on the comparison of the last
    selection. Item 5: Open clears the previous run's badge and points at once; the Try tab lists the
    checkpoints with their runs' states now. And the screenshots of Train, Monitor and Runs in both languages at 1366x900."""
    runs_dir = console_server.runs_dir
    a = fake_run(runs_dir, "20261201-090000_tiny-demo_lora-r32_fp32_dp1", "finished", steps=20, **{"lora.rank": 32})
    a.checkpoint(10).mkdir(parents=True)
    os.symlink(a.checkpoint(10).name, a.checkpoint("last"))  # made after the console built its page
    b = fake_run(runs_dir, "20261201-100000_tiny-demo_lora-r8_fp32_dp1", "finished", steps=20, **{"lora.rank": 8})
    # a fork of a at step 10, ended with figures of the kind the issue saw (557.5 tokens/s)
    b.write_status(parent_run=a.run_id, parent_step=10,
                   final=FinalFigures(best_val_ppl=12.0, tokens_per_s=557.5, peak_mem_mb=700.25))
    c = fake_run(runs_dir, "20261201-110000_tiny-demo_lora-r4_fp32_dp1", "finished", steps=20, **{"lora.rank": 4})
    d = fake_run(runs_dir, "20261201-120000_tiny-demo_lora-r2_fp32_dp1", "finished", steps=20, **{"lora.rank": 2})
    e = fake_run(runs_dir, "20261201-130000_tiny-demo_lora-r64_fp32_dp1", "cancelled")
    context = browser.new_context(viewport=SCREEN)
    context.set_default_timeout(30_000)
    context.add_init_script(RECORD_FEED_JS)
    page = context.new_page()
    try:
        page.goto(console_server.url)
        page.click("#tab-monitor-button")
        # item 2: the newest run with points (d), not the newer cancelled one
        page.wait_for_function("() => document.querySelector('#run-picker input')?.value.trim() !== ''",
                               timeout=TIMEOUT_MS)
        page.wait_for_function(DRAWN_STEPS_JS, arg="loss-plot", timeout=TIMEOUT_MS)
        assert page.input_value("#run-picker input").strip() == d.run_id

        # item 3: new points while the page stays at the top; the lower charts are out of view
        page.evaluate("window.scrollTo(0, 0)")
        hidden = {name: elem for name, elem in LOWER_CHARTS.items() if not page.evaluate(IN_VIEW_JS, elem)}
        assert {"grad_norm", "loss_scale"} <= set(hidden), hidden
        d.append_metrics([train(s, 2.0) for s in range(21, 41)])
        # the loss chart draws two series (loss and its average): 80 points for 40 steps
        page.wait_for_function(f"() => ({DRAWN_STEPS_JS})('loss-plot') >= 80", timeout=TIMEOUT_MS)
        settle(page, 1.0)
        drawn = {name: page.evaluate(DRAWN_STEPS_JS, elem) for name, elem in hidden.items()}
        assert all(n >= 40 for n in drawn.values()), f"lower charts out of view drew {drawn} of 40 points"
        assert "waiting for the first points" not in page.inner_text("#grad-norm-plot")
        check_monitor_layout(page)

        # item 8: quick ticks; the comparison shown is the last selection's (d against a)
        page.click("#tab-runs-button")
        page.wait_for_selector(f"#runs-select label:has-text('{d.run_id}')", timeout=TIMEOUT_MS)

        def box(run):
            return page.locator("#runs-select label", has_text=run.run_id).first.locator("input")

        # item 5: Open (as Start) puts another run on the Monitor: d's "finished" badge and its loss
        # points go at once, before any answer of the feed (held back here), not at its next poll 2 s on
        page.route("**/component_server**", lambda route: route.abort())
        box(e).set_checked(True)
        page.click("#runs-open")
        page.wait_for_function(f"() => document.querySelector('#run-picker input')?.value.trim() === '{e.run_id}'",
                               timeout=TIMEOUT_MS)
        page.wait_for_function(f"""() => !document.querySelector('#run-state').innerText.includes('finished')
            && !document.querySelector('#loss-plot svg[data-run="{d.run_id}"]')""", timeout=3_000)
        page.unroute("**/component_server**")

        # item 5, the feed's rule that the newest pick wins: a Start's run the picker does not show yet
        # (c here) is asked for until the picker shows it (2 s at most), but a pick by hand (d) in that
        # moment replaces it at once; the feed never goes back to the Start's run
        page.click("#run-picker input")  # the list open first: the pick is one click after the Start's run
        mark = page.evaluate("window.__asks.length")
        page.evaluate(f"window.mindtuneMonitorNow({json.dumps(c.run_id)})")
        page.evaluate(WATCH_PICKER_JS, d.run_id)
        page.locator("[role=option]", has_text=d.run_id).first.click()
        page.keyboard.press("Escape")
        page.wait_for_function(f"() => !!document.querySelector('#loss-plot svg[data-run=\"{d.run_id}\"]')",
                               timeout=TIMEOUT_MS)
        picked_at, asks = page.evaluate("[window.__pickedAt, window.__asks]")
        asks = asks[mark:]
        first_d = min(t for t, body in asks if d.run_id in body)
        assert first_d - picked_at < 500, f"the feed asked for the picked run {first_d - picked_at} ms after the pick"
        assert not [t for t, body in asks if t > first_d and c.run_id in body], "the feed went back to the Start's run"

        page.click("#tab-runs-button")
        box(e).set_checked(False)
        check_runs_table(page, b.run_id, a.run_id)

        for run, on in ((a, True), (b, True), (c, True), (b, False), (c, False), (d, True)):
            box(run).set_checked(on)
        page.wait_for_function("() => !!document.querySelector('#runs-config-diff .mt-delta-table')",
                               timeout=TIMEOUT_MS)
        settle(page)
        deltas = page.inner_text("#runs-config-diff .mt-delta-table")
        assert d.run_id in deltas and b.run_id not in deltas and c.run_id not in deltas, deltas
        assert "lora.rank 32 → 2" in deltas

        # item 4: fork a (rank 32) from its step-10 checkpoint: the YAML names the checkpoint the
        # banner does; "Start fresh instead" brings the form the console opens with, not a's values
        for run in (b, c, d):
            box(run).set_checked(False)
        page.wait_for_function("() => document.querySelector('#runs-fork-step input')?.value !== ''",
                               timeout=TIMEOUT_MS)
        page.click("#runs-fork")
        page.wait_for_function("() => document.querySelector('#reference-banner')?.innerText.includes('step 10')",
                               timeout=TIMEOUT_MS)
        checkpoint = str(a.checkpoint(10))
        page.wait_for_function(f"() => ({YAML_JS})().includes({json.dumps('fork_from: ' + checkpoint)})",
                               timeout=TIMEOUT_MS)
        assert page.input_value("#cfg-lora-rank input") == "32"
        page.click("#reference-clear")
        starter = load_config(REPO_ROOT / "configs" / "lora_demo.yaml")
        page.wait_for_function(f"() => document.querySelector('#cfg-lora-rank input')?.value === '{starter.lora.rank}'",
                               timeout=TIMEOUT_MS)
        page.wait_for_function(f"() => ({YAML_JS})().includes('fork_from: null')", timeout=TIMEOUT_MS)
        assert not page.is_visible("#reference-banner")

        # item 5: the Try tab lists a's checkpoint (made after the page was built) with a's state now
        page.click("#tab-try-button")
        page.wait_for_function("() => document.querySelector('#try-checkpoint input')?.value.includes('last (finished)')",
                               timeout=TIMEOUT_MS)

        # the screenshots, each tab in both languages
        for lang in ("en", "zh"):
            if lang == "zh":
                page.click("#lang-toggle label:has-text('中文')")
                page.wait_for_function("() => document.querySelector('#tab-train-button')?.innerText.trim() !== 'Train'",
                                       timeout=TIMEOUT_MS)
            for tab in ("train", "monitor", "runs"):
                page.click(f"#tab-{tab}-button")
                settle(page)
                screenshot(page, f"console_{tab}_{lang}_1366x900")
    finally:
        context.close()
