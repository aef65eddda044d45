"""Answer only the newest state of a form, whatever order its events arrive in (issue 31 item 1).

Gradio fires one change event per widget an event wrote, and each gathers the form's values when
it fires: an upload that sets six data fields starts six refreshes, the first ones with part of the
new values (the new file, the old format). Their requests reach the server, and finish, in any
order (four run at once), so the YAML and preview showed whichever finished last: a chat upload
previewed and configured as alpaca, 1 upload in 6 in a browser test.

Each such event therefore carries a stamp taken in the page as it is sent (`STAMP_JS`: a page id
and a counter, in a hidden textbox the event reads); `Latest.admit` tells an event whether a newer
one of the same page has already been seen, and then it answers nothing (its outputs stay as the
newer one leaves them). The newest stamp always answers, and it gathered the last values written.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

import gradio as gr

PREFIX = "mt-stamp"
# The event's `js`: the hidden stamp box's value (the only argument starting with PREFIX) becomes
# "mt-stamp:<page id>:<n>", n counting up in this page; every other value passes unchanged.
STAMP_JS = f"""
(...args) => {{
  window.__mtPage = window.__mtPage || Math.random().toString(36).slice(2);
  window.__mtStamp = (window.__mtStamp || 0) + 1;
  return args.map(a => (typeof a === 'string' && a.startsWith('{PREFIX}'))
    ? `{PREFIX}:${{window.__mtPage}}:${{window.__mtStamp}}` : a);
}}
"""
MAX_PAGES = 2000  # pages remembered (oldest forgotten first); a page's entry is a few bytes


def stamp_box() -> gr.Textbox:
    """The hidden input an event lists to carry its stamp."""
    return gr.Textbox(PREFIX, visible=False, elem_id="mt-stamp")


def parse(stamp: str | None) -> tuple[str, int] | None:
    """(page id, counter) of a stamp; None for an unstamped value (an event without STAMP_JS)."""
    parts = (stamp or "").split(":")
    if len(parts) != 3 or parts[0] != PREFIX or not parts[2].isdigit():
        return None
    return parts[1], int(parts[2])


class Latest:
    """The newest stamp seen per page and per kind of event (thread-safe: events run at once)."""

    def __init__(self, max_pages: int = MAX_PAGES) -> None:
        self._seen: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._lock = threading.Lock()
        self._max = max_pages

    def admit(self, kind: str, stamp: str | None) -> bool:
        """Record `stamp`; False when a newer stamp of the same page and kind came first (its
        answer supersedes this one). Unstamped events are always admitted."""
        parsed = parse(stamp)
        if parsed is None:
            return True
        key, n = (kind, parsed[0]), parsed[1]
        with self._lock:
            if self._seen.get(key, -1) > n:
                return False
            self._seen[key] = n
            self._seen.move_to_end(key)
            while len(self._seen) > self._max:
                self._seen.popitem(last=False)
            return True

    def current(self, kind: str, stamp: str | None) -> bool:
        """True unless a newer stamp of the same page and kind has been admitted since."""
        parsed = parse(stamp)
        if parsed is None:
            return True
        with self._lock:
            return self._seen.get((kind, parsed[0]), -1) <= parsed[1]


__all__ = ["Latest", "PREFIX", "STAMP_JS", "parse", "stamp_box"]
