"""One tokenized sample as the data previews draw it (app.data.data_preview, app.data.preference_preview):
the text cut where its labels switch between masked and trained, masked runs grey, trained runs
green, truncated tokens announced at the end."""
from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Sequence

from core.data.pipeline import IGNORE_INDEX
from core.data.tokenizer import Tokenizer

from app.i18n import text


@dataclass(frozen=True)
class TokenRun:
    """Consecutive tokens that are all trained or all masked, decoded together (so multi-byte
    characters split across tokens still decode)."""
    text: str
    trained: bool
    tokens: int


def token_runs(tokenizer: Tokenizer, input_ids: Sequence[int], labels: Sequence[int]) -> list[TokenRun]:
    """A sample cut where its labels switch between masked (IGNORE_INDEX) and trained."""
    runs: list[TokenRun] = []
    start = 0
    for i in range(1, len(input_ids) + 1):
        if i == len(input_ids) or (labels[i] != IGNORE_INDEX) != (labels[start] != IGNORE_INDEX):
            ids = [int(t) for t in input_ids[start:i]]
            runs.append(TokenRun(tokenizer.decode(ids, skip_special_tokens=False),
                                 labels[start] != IGNORE_INDEX, len(ids)))
            start = i
    return runs


def runs_html(runs: Sequence[TokenRun], dropped_tokens: int = 0, lang: str = "en") -> str:
    """One sample as HTML: masked text in a grey `mt-masked` span, trained text in a green
    `mt-trained` span; truncated tokens are announced at the end."""
    parts = []
    for run in runs:
        css = "mt-trained" if run.trained else "mt-masked"
        title = html.escape(text("dp.run_trained" if run.trained else "dp.run_masked", lang).format(n=run.tokens))
        parts.append(f'<span class="{css}" title="{title}">{html.escape(run.text)}</span>')
    tail = (f'<span class="mt-truncated">{text("dp.cut", lang).format(n=dropped_tokens)}</span>'
            if dropped_tokens else "")
    return f'<pre class="mt-sample">{"".join(parts)}{tail}</pre>'


def legend(lang: str = "en") -> str:
    return (f'<div class="mt-legend"><span class="mt-masked">{text("dp.legend_masked", lang)}</span> '
            f'<span class="mt-trained">{text("dp.legend_trained", lang)}</span></div>')
