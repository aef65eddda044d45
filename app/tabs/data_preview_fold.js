// The data preview's fold (js_on_load of the preview block; see app/tabs/train_tab.py _data_section).
// The preview is open at a browser's first look, a tall block at the top of the Train tab; on
// later page loads it starts folded, its header still naming it. A pick or an upload opens it
// again from the server (gr.update(open=True)): there it answers what the user just did.
const SEEN = "mindtune.dataPreviewSeen";
try {
  if (window.localStorage.getItem(SEEN)) {
    const header = element.closest("#data-preview-box")?.querySelector("button.label-wrap.open");
    if (header) header.click();
  } else {
    window.localStorage.setItem(SEEN, "1");
  }
} catch (err) {
  // storage refused (a private window's policy): the preview stays open, as at the first look
}
