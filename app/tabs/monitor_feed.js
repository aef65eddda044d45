// The Monitor tab's live feed (runs as the js_on_load of the run-state badge; see app/tabs/monitor_tab.py).
// Polls the server function `feed` and writes the HTML it returns into the page's
// [data-mt-slot] elements. This is deliberately not a Gradio event: every Gradio event makes the
// page re-send a loading status to every component that ever took part in an event, which cost a
// headless Chromium 60% of a core at two ticks a second; a server function call costs it almost nothing.
// When the feed says the Gradio controls changed (picker, stop buttons, downloads), it fires the
// "sync" event once, which updates them through Gradio.
const token = Array.from(crypto.getRandomValues(new Uint8Array(12)),
                         (b) => b.toString(16).padStart(2, "0")).join("");
let controls = null;
let timer = null;
let busy = false;
// Every chart is drawn as its points come, in view or not (issue 31 item 3): charts held back while
// scrolled out of view said "waiting for the first points…" or stopped at step 20 of 60 in a
// whole-page screenshot, and came back only once scrolled to.
const watched = new WeakSet();

const slots = () => Array.from(document.querySelectorAll("[data-mt-slot]"));
const shown = () => !document.hidden && element.offsetParent !== null;
// Each chart slot keeps the empty chart it was built with on the element itself (data-mt-empty):
// a second copy of this script (Gradio may mount the badge again) finds it there too, even for a
// slot that already draws a run.
function watchNewSlots() {  // slots appear when the tab first renders, or again after a re-render
  for (const slot of slots()) {
    if (!watched.has(slot)) {
      watched.add(slot);
      const svg = slot.querySelector("svg.mt-chart");
      if (!(svg && svg.dataset.run) && slot.dataset.mtEmpty === undefined) slot.dataset.mtEmpty = slot.innerHTML;
    }
  }
}

// Another run was picked (by hand, or by Start/Open setting the picker): clear every chart that
// still draws another run at once, scrolled out of view or not, before the server's answer arrives,
// so no moment shows one run's curves under another run's name. Cleared slots lose their mark, so
// the next poll asks for everything.
// The state badge, status line, failure box and log of another run go the same way (issue 31 item
// 5: at 1.2 s after a new Start the previous run's "stopped" badge was still shown).
let clearedFor = null;  // once per picked name: a name the server does not know keeps the charts it sends
let shownRun = null;  // the run the last answer drew
// The run Start/Open/Resume (or a pick by hand) picked, until the picker shows it (2 s at most): the
// newest pick, so a pick by hand right after a Start is the one shown, not the Start's run.
let pickedNow = null;
let pickedAt = 0;
function pickedRun() {
  const picker = document.querySelector("#run-picker input");
  const text = picker ? picker.value.trim() : "";
  if (pickedNow !== null && text !== pickedNow && Date.now() - pickedAt < 2000) return pickedNow;
  pickedNow = null;
  return text;
}
function pickerOpen() {  // the run picker's list of runs is shown (Gradio renders it only while open)
  const picker = document.querySelector("#run-picker");
  return Boolean(picker && picker.querySelector("[role=listbox]"));
}

// A sync that was on its way when a person opened the run list changed the list under the pointer
// (a run added at the top moved every option down): the list does not open while a sync is on its
// way. Each sync asked carries its own mark, which its answer writes into #monitor-synced
// (app/tabs/monitor_tab.py); a press on the picker before that answer waits for it (5 s at most), then
// opens the list with the new choices. The answer of an earlier sync (or of a pick by hand) does not
// count: it carries the choices of before. Gradio may mount the badge, and this script with it, twice:
// the syncs asked and awaited are the page's, kept on `window` and shared by the copies, and one
// listener holds presses. The 5 s count from the first sync not yet answered, so syncs asked one
// after another cannot hold the list shut; a press in a list already open (an option) is never held.
const syncs = window.mindtuneSyncs || (window.mindtuneSyncs = {count: 0, mark: null, since: 0});
const syncedMark = () => ((document.querySelector("#monitor-synced") || {}).textContent || "").trim();
function syncPending() {
  if (syncs.since && (syncedMark() === syncs.mark || Date.now() - syncs.since > 5000)) syncs.since = 0;
  return syncs.since !== 0;
}
function askSync() {
  syncs.count += 1;
  syncs.mark = `${token}-${syncs.count}`;
  if (!syncs.since) syncs.since = Date.now();
  trigger("sync", {mark: syncs.mark});
}
window.mindtuneMonitorSync = askSync;  // what the feed does when the controls changed (the browser tests call it)
let opening = false;  // the held press, given back once the sync answered
let heldAt = 0;  // when a press was held: its own mousedown and click, a moment later, are held too
function hold(event) {
  // not the pointerdown's default: a prevented pointerdown fires no mousedown, whose default (the
  // input's focus, which opens the list) is the one to prevent
  if (event.type !== "pointerdown") event.preventDefault();
  event.stopImmediatePropagation();
}
function holdPress(event) {
  const target = event.target;
  if (opening || !target.closest || !target.closest("#run-picker")) return;
  if (heldAt && Date.now() - heldAt < 1000) {  // the rest of a held press (the list may be open by now)
    if (event.type === "click") heldAt = 0;
    return hold(event);
  }
  if (pickerOpen() || !syncPending()) return;  // a press in an open list (an option) is never held
  hold(event);  // no focus, no click: the list stays closed until the sync has answered
  if (event.type === "click") return;
  heldAt = Date.now();  // the list opens from here once the sync answered
  const open = () => {
    if (syncPending()) return setTimeout(open, 50);
    const input = document.querySelector("#run-picker input");
    if (!input) return;
    opening = true;
    try { input.focus(); input.click(); } finally { opening = false; }
  };
  open();
}
if (!window.mindtuneHoldsPresses) {
  window.mindtuneHoldsPresses = true;
  for (const kind of ["pointerdown", "mousedown", "click"]) document.addEventListener(kind, holdPress, true);
}
function clearOtherRuns() {
  const wanted = pickedRun();
  if (!wanted || wanted === clearedFor) return;
  if (shownRun !== null && shownRun !== wanted) {
    for (const slot of slots()) {
      if (slot.querySelector("svg.mt-chart")) continue;  // the charts: by the run each one draws, below
      slot.innerHTML = slot.dataset.mtEmpty || "";
      delete slot.dataset.mtFilled;
    }
    clearedFor = wanted;
  }
  for (const slot of slots()) {
    const svg = slot.querySelector("svg.mt-chart[data-run]");
    if (svg && svg.dataset.run !== wanted) {
      slot.innerHTML = slot.dataset.mtEmpty || "";
      delete slot.dataset.mtFilled;
      clearedFor = wanted;
    }
  }
}

function request(full) {
  const picker = document.querySelector("#run-picker input");
  const lang = document.querySelector("#lang-toggle input:checked");
  const scale = document.querySelector("#loss-log-scale input");
  const pplScale = document.querySelector("#ppl-log-scale input");
  return {token, full, run: picker ? pickedRun() : "", lang: lang ? lang.value : "en",
          log_scale: Boolean(scale && scale.checked), ppl_log_scale: pplScale ? pplScale.checked : true};
}

// The charts (by slot name) and their controls (by element id) the shown run's objective does not
// draw (a preference run's perplexity and answer scores, an SFT run's reward figures): hidden.
let hiddenParts = [];
function hideParts(names) {
  const part = (name) => {
    const slot = document.querySelector(`[data-mt-slot="${name}"]`);
    return slot ? slot.closest(".block") || slot : document.getElementById(name);  // the chart's whole block
  };
  for (const name of hiddenParts) {
    const el = part(name);
    if (el && !names.includes(name)) el.style.display = "";
  }
  for (const name of names) {
    const el = part(name);
    if (el) el.style.display = "none";
  }
  hiddenParts = names;
}

function show(reply, full) {
  shownRun = reply.run || null;
  if (Array.isArray(reply.hide)) hideParts(reply.hide);
  for (const [name, html] of Object.entries(reply.slots || {})) {
    const slot = document.querySelector(`[data-mt-slot="${name}"]`);
    if (!slot) continue;
    slot.innerHTML = html;
    if (name === "log") slot.scrollTop = slot.scrollHeight;
  }
  // a slot Gradio re-rendered (back to its initial HTML) has lost its mark: the next poll asks for everything
  if (full) for (const slot of slots()) slot.dataset.mtFilled = "1";
  // not while the picker's list is open: new choices replaced the list under the pointer, and the
  // option clicked then was no option (a pick that did nothing); the sync fires once it closes
  if (reply.controls !== undefined && reply.controls !== controls && !pickerOpen()) {
    controls = reply.controls;
    askSync();
  }
}

async function poll() {
  clearTimeout(timer);
  let wait = 500;
  if (!busy && shown()) {
    busy = true;
    try {
      watchNewSlots();
      clearOtherRuns();
      const full = slots().some((slot) => slot.dataset.mtFilled !== "1");
      const asked = request(full);
      const reply = await server.feed(asked);
      if (asked.run === pickedRun()) {
        show(reply, full);
        wait = 1000 * (reply.interval || 0.5);
      } else {
        wait = 0;  // another run was picked while this answer came: it is the old run's, not shown
      }
    } catch (err) {
      wait = 2000;
    } finally {
      busy = false;
    }
  }
  timer = setTimeout(poll, wait);
}

// a new choice in the picker or a log-scale box shows at once instead of at the next poll
document.addEventListener("change", (event) => {
  if (event.target.closest && event.target.closest("#loss-log-scale, #ppl-log-scale, #run-picker, #lang-toggle")) {
    clearOtherRuns();
    setTimeout(poll, 50);
  }
});
// Start, Open and Resume set the picker from the server and then call this with the run they picked
// (app/server.py), which the page's picker may show only a moment later
window.mindtuneMonitorNow = (run) => {
  if (typeof run === "string" && run.trim()) [pickedNow, pickedAt] = [run.trim(), Date.now()];
  watchNewSlots();
  clearOtherRuns();
  setTimeout(poll, 0);
};
poll();
