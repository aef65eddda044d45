// Runs before Gradio's own scripts (app/tabs/early_script.py puts it at the top of the page's <head>).
// Gradio 6.31's status tracker counts an event's elapsed time with a requestAnimationFrame loop, and
// on this console at least one such loop never stops, even on an idle page: the page then renders 60
// frames a second for as long as it is open. Measured in headless Chromium on an idle console: 17.7%
// of a core, 6.7% with the trackers' frames paced to one a second; while a demo run streams, 24.8% ->
// 15.7% — CPU taken from training when the browser runs on the training machine. This paces only the
// frames the status tracker asks for (recognised by its module in the caller's stack); its
// elapsed-time text then moves once a second. The tracker keeps its own reference to
// requestAnimationFrame from when its module loads, which is why this must run first. If a Gradio
// release renames the module, nothing breaks: its frames are simply not paced.
(() => {
  window.mindtuneStatusFramesPaced = true;
  const frame = window.requestAnimationFrame.bind(window);
  window.requestAnimationFrame = (callback) => {
    if ((new Error().stack || "").includes("/statustracker-")) {
      return setTimeout(() => callback(performance.now()), 1000);
    }
    return frame(callback);
  };
})();
