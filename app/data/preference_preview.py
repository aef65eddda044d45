"""The data preview of preference data (core.data.preference): each pair's chosen and rejected
samples side by side, rendered as the worker will see them (prompt masked, each answer trained), or
each KTO answer with its label; pairs with identical answers are counted, never hidden."""
from __future__ import annotations

import html

from core.data.files import DataFile
from core.data.formats import Columns
from core.data.preference import tokenize_preference
from core.data.pairs import preference_records
from core.data.tokenizer import Tokenizer

from app.i18n import place_text, text
from app.data.sample_html import legend, runs_html, token_runs


def pair_preview_html(data: DataFile, kind: str, tokenizer: Tokenizer, max_seq_len: int, samples: int,
                      columns: Columns, lang: str = "en", overlong: str = "truncate") -> str:
    """The first `samples` records of a preference file as HTML, over-long ones as data.overlong
    `overlong` makes them (raises DataError on a bad record)."""
    records = preference_records(DataFile(data.path, data.records[:samples], data.columns, data.split), kind, columns)
    pairs, stats = tokenize_preference(records, kind, tokenizer, max_seq_len, overlong)
    head = text("dp.pairs" if kind == "pairs" else "dp.kto", lang).format(
        n=len(records), total=len(data.records), identical=stats.identical_dropped)
    blocks = [legend(lang), f'<div class="mt-note" id="data-format">{head}</div>']

    def column(title: str, css: str, sample) -> str:
        runs = token_runs(tokenizer, sample.input_ids.tolist(), sample.labels.tolist())
        return (f'<div class="mt-pair-side {css}" style="flex:1;min-width:0"><div class="mt-note"><b>'
                f'{html.escape(title)}</b></div>{runs_html(runs, lang=lang)}</div>')

    for pair in pairs:
        blocks.append(f'<div class="mt-note">{html.escape(place_text(pair.where, lang))}</div>')
        if kind == "pairs":
            sides = (column(text("dp.chosen", lang), "mt-chosen", pair.chosen) +
                     column(text("dp.rejected", lang), "mt-rejected", pair.rejected))
        else:
            sides = column(text("dp.desirable" if pair.label > 0.5 else "dp.undesirable", lang),
                           "mt-chosen" if pair.label > 0.5 else "mt-rejected", pair.chosen)
        blocks.append(f'<div class="mt-pair" style="display:flex;gap:12px">{sides}</div>')
    return "\n".join(blocks)

