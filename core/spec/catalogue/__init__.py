"""Core's catalogue of messages, by domain: each module holds `MESSAGES = {id: Entry(en, zh, kinds)}`
(core.spec.catalogue.entry), both languages side by side. `ENTRIES` is all of them; `CATALOGUE`
(id -> English, what the command line and the logs print) and `MESSAGES_ZH` (id -> 中文, what the
console shows) are views of it. 中文 lives here, in core, so that one entry holds both languages and
core still imports nothing of app. Stdlib only.

Chosen over gettext (.po files keep each language in its own file, keyed by the English, with no place
for a parameter's kind) and Gradio's gr.I18n (the console's, picked by the browser's locale, not by the
page's toggle, and out of reach of core and its command lines)."""
from __future__ import annotations

from core.spec.catalogue import (cluster, config, data, devices, evaluation, export, model, run, serve,
                                 tracking, train)
from core.spec.catalogue.entry import KINDS, Entry

__all__ = ["CATALOGUE", "DOMAINS", "ENTRIES", "KINDS", "MESSAGES_ZH", "Entry", "merged"]

DOMAINS = {module.__name__.rsplit(".", 1)[1]: module.MESSAGES
           for module in (run, cluster, devices, config, data, model, train, evaluation, export, serve, tracking)}


def merged(domains: dict[str, dict[str, Entry]]) -> dict[str, Entry]:
    """The domains' entries in one dict; an id in two domains is an error."""
    entries: dict[str, Entry] = {}
    for name, messages in domains.items():
        twice = sorted(messages.keys() & entries.keys())
        if twice:
            raise ValueError(f"{name}: {', '.join(twice)} already in another domain")
        entries.update(messages)
    return entries


ENTRIES: dict[str, Entry] = merged(DOMAINS)
CATALOGUE: dict[str, str] = {key: entry.en for key, entry in ENTRIES.items()}
MESSAGES_ZH: dict[str, str] = {key: entry.zh for key, entry in ENTRIES.items()}
