"""The console's own texts, by tab: each module holds `TEXTS = {key: Entry(en, zh, kinds)}`, the class
of core's messages (core.spec.catalogue.entry), both languages side by side. `TEXTS` is all of them,
with the form's help lines (their English is core.spec.config's help, one source with
`python -m core.config`; their 中文 is `FIELD_HELP_ZH` in app.texts.form)."""
from __future__ import annotations

from app.texts import cluster, data, form, launch, model, monitor, page, runs, try_it
from core.spec.catalogue import Entry, merged

__all__ = ["TEXTS", "TABS"]

TABS = {module.__name__.rsplit(".", 1)[1]: module.TEXTS
        for module in (page, form, model, data, launch, monitor, runs, cluster, try_it)}

TEXTS: dict[str, Entry] = merged(TABS)
