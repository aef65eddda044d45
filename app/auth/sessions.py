"""Per-browser-session locks.

Gradio runs event handlers in worker threads, so a timer tick and a click from the same browser tab
can run at once on the same session state (a `gr.State` value, passed by reference). Handlers that
read files incrementally into that state take its lock. The locks live here, not in the state,
because Gradio deep-copies initial state values and locks cannot be copied.
"""
from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Any, Callable, TypeVar

T = TypeVar("T")

_LOCKS: "weakref.WeakKeyDictionary[Any, threading.Lock]" = weakref.WeakKeyDictionary()
_GUARD = threading.Lock()


def session_lock(session: Any) -> threading.Lock:
    """The lock of one session's state object (which must hash by identity: `@dataclass(eq=False)`);
    it goes away with the state."""
    with _GUARD:
        return _LOCKS.setdefault(session, threading.Lock())


def most_recent(entries: "OrderedDict[Any, T]", key: Any, make: Callable[[], T], limit: int) -> T:
    """The entry under `key` (made by `make()` when there is none), moved to the newest end of
    `entries`; the oldest ones beyond `limit` are dropped. The caller holds the lock of `entries`."""
    entry = entries.pop(key, None) or make()
    entries[key] = entry
    while len(entries) > limit:
        entries.popitem(last=False)
    return entry
