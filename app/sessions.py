"""Per-browser-session locks.

Gradio runs event handlers in worker threads, so a timer tick and a click from the same browser tab
can run at once on the same session state (a `gr.State` value, passed by reference). Handlers that
read files incrementally into that state take its lock. The locks live here, not in the state,
because Gradio deep-copies initial state values and locks cannot be copied.
"""
from __future__ import annotations

import threading
import weakref
from typing import Any

_LOCKS: "weakref.WeakKeyDictionary[Any, threading.Lock]" = weakref.WeakKeyDictionary()
_GUARD = threading.Lock()


def session_lock(session: Any) -> threading.Lock:
    """The lock of one session's state object (which must hash by identity: `@dataclass(eq=False)`);
    it goes away with the state."""
    with _GUARD:
        return _LOCKS.setdefault(session, threading.Lock())
