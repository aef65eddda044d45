"""What the model will actually be trained on: the first samples rendered through its chat template,
with the masked (prompt) tokens drawn differently from the trained ones, and the length statistics.

Both come from the engine's own functions (`tokenize_records`, `load_splits`), so the preview shows
exactly the token ids and loss labels the worker will use, not a re-implementation of them.
"""
from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from core.config import DataSettings
from core.data import IGNORE_INDEX, DataError, DataStats, load_splits, read_data_file, resolve_format, tokenize_records
from core.tokenizer import Tokenizer, TokenizerError

from app.paths import absolute

PREVIEW_SAMPLES = 3
CACHE_DIR = Path(".mindtune-cache") / "data"  # the worker's cache: a preview warms it for the run


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


def runs_html(runs: Sequence[TokenRun], dropped_tokens: int = 0) -> str:
    """One sample as HTML: masked text in a grey `mt-masked` span, trained text in a green
    `mt-trained` span; truncated tokens are announced at the end."""
    parts = []
    for run in runs:
        css = "mt-trained" if run.trained else "mt-masked"
        title = f"{run.tokens} tokens, {'trained' if run.trained else 'masked (no loss)'}"
        parts.append(f'<span class="{css}" title="{title}">{html.escape(run.text)}</span>')
    tail = (f'<span class="mt-truncated">… {dropped_tokens} tokens cut by max_seq_len</span>'
            if dropped_tokens else "")
    return f'<pre class="mt-sample">{"".join(parts)}{tail}</pre>'


LEGEND = ('<div class="mt-legend"><span class="mt-masked">prompt (masked, no loss)</span> '
          '<span class="mt-trained">trained tokens</span></div>')


def preview_html(model_dir: str, train_file: str, fmt: str, max_seq_len: int, mask_prompt: bool,
                 samples: int = PREVIEW_SAMPLES) -> str:
    """The first `samples` records of `train_file` as the worker will see them, as HTML.
    Problems (unreadable file, no chat template, ...) come back as a readable error block."""
    try:
        tokenizer = Tokenizer.from_dir(absolute(model_dir))
        data = read_data_file(absolute(train_file))
        resolved = resolve_format(data, fmt)
        records = data.records[:samples]
        tokenized = tokenize_records(records, resolved, tokenizer, max_seq_len, mask_prompt)
    except (DataError, TokenizerError, OSError) as err:
        return error_html(str(err))
    blocks = [LEGEND, f'<div class="mt-note">format: {html.escape(resolved)} · first {len(records)} of '
                      f'{len(data.records)} records</div>']
    for record, sample, full in zip(records, tokenized.samples, tokenized.full_lengths):
        runs = token_runs(tokenizer, sample.input_ids.tolist(), sample.labels.tolist())
        blocks.append(f'<div class="mt-note">{html.escape(record.where)} · {full} tokens</div>')
        blocks.append(runs_html(runs, dropped_tokens=full - len(sample)))
    return "\n".join(blocks)


def error_html(message: str) -> str:
    return f'<div class="mt-error">{html.escape(message)}</div>'


def data_stats(model_dir: str, settings: DataSettings, seed: int) -> DataStats:
    """Length histograms, truncation counts and the train/validation overlap for `settings`
    (tokenizes every file once; the result is cached where the worker looks for it)."""
    tokenizer = Tokenizer.from_dir(absolute(model_dir))
    resolved = DataSettings.from_dict({
        **settings.to_dict(),
        **{k: str(absolute(getattr(settings, k))) for k in ("train_file", "validation_file", "test_file")
           if getattr(settings, k)}})
    return load_splits(resolved, tokenizer, seed, cache_dir=absolute(CACHE_DIR)).stats


def histogram_html(stats: DataStats, max_seq_len: int) -> str:
    """The training split's token lengths as bars; bins beyond max_seq_len are drawn as truncated."""
    split = stats.train
    top = max(split.histogram_counts) or 1
    bars = []
    for lo, hi, count in zip(split.histogram_edges, split.histogram_edges[1:], split.histogram_counts):
        height = round(100 * count / top)
        css = "mt-bar mt-bar-cut" if hi - 1 > max_seq_len else "mt-bar"
        bars.append(f'<div class="{css}" style="height:{height}%" title="{lo}–{hi - 1} tokens: {count}"></div>')
    axis = (f'<div class="mt-hist-axis"><span>{split.min_length}</span>'
            f'<span>tokens per sample</span><span>{split.max_length}</span></div>')
    return f'<div class="mt-hist">{"".join(bars)}</div>{axis}'


def stats_markdown(stats: DataStats, max_seq_len: int) -> str:
    """The figures a user checks before training: sizes, lengths, truncation and overlap."""
    t, v = stats.train, stats.validation
    share = f"{100 * t.truncated / t.samples:.1f}%" if t.samples else "0%"
    overlap = stats.validation_in_train
    lines = [
        f"- **train**: {t.samples} samples ({t.format}), {t.labelled_tokens} trained tokens, "
        f"length {t.min_length}–{t.max_length} (mean {t.mean_length:g})",
        f"- **validation** ({stats.validation_source}): {v.samples} samples, length {v.min_length}–{v.max_length}",
        f"- **truncated** at max_seq_len {max_seq_len}: {t.truncated} train ({share}), {v.truncated} validation",
        f"- **overlap**: {overlap} of {v.samples} validation samples also occur in train"
        + (" ⚠ validation loss will look better than it is" if overlap else ""),
        f"- **test**: {stats.test_records} records for exact-match scoring",
    ]
    return "\n".join(lines)
