// The Runs tab's watcher (js_on_load of an empty block; see app/tabs/runs_tab.py). While the tab is on
// screen it asks the server function `key` every few seconds for a fingerprint of the runs folder
// and fires the Gradio "refresh" event only when that changed, so an idle tab costs the browser
// nothing (a gr.Timer would fire a Gradio event, and so a page-wide status update, every time).
let last = null;
// A checkbox's hover is its value (Gradio sets the input's title to it): the Evaluate panel's targets
// ('best', 'base') would hover in English on a 中文 page. Their hover is their label, in the page's language.
function titlesFromLabels() {
  for (const input of document.querySelectorAll("#eval-targets input[type=checkbox]")) {
    const label = input.closest("label");
    const shown = label ? label.textContent.trim() : "";
    if (shown && input.title !== shown) input.title = shown;
  }
}
document.addEventListener("change", (event) => {
  if (event.target.closest && event.target.closest("#lang-toggle")) setTimeout(titlesFromLabels, 500);
});
async function poll() {
  titlesFromLabels();
  if (!document.hidden && element.offsetParent !== null) {
    try {
      const key = await server.key();
      if (key !== last) {
        last = key;
        trigger("refresh");
      }
    } catch (err) {
      // the console is restarting or gone: try again at the next poll
    }
  } else {
    last = null;  // refresh as soon as the tab is shown again
  }
  setTimeout(poll, WATCH_MS);
}
poll();
