"""Line charts drawn on the server as small inline SVG.

Gradio's Vega plots rebuild their whole view on every update; with eight charts refreshed each tick
on a busy two-core machine that took about a second per update in the browser and halved the tick
rate (measured), so points showed 2–4 s after the worker wrote them. An inline SVG of a few
hundred points is rendered by the browser in milliseconds (also measured). Each chart carries
`data-points` (on the <svg> and on every series group), and every drawn point is a labelled
symbol as in Gradio's Vega plots, so tests and screen readers can tell which points arrived.
"""
from __future__ import annotations

import html
import math
from typing import Callable, Sequence

import numpy as np
import pandas as pd

WIDTH, HEIGHT = 480, 270
LEFT, RIGHT, TOP, BOTTOM = 58, 14, 30, 40
PALETTE = ("#2563eb", "#f59e0b", "#10b981", "#8b5cf6", "#06b6d4", "#ec4899", "#84cc16", "#64748b")
BEST_COLOR = "#dc2626"
PARENT_COLOR = "#9ca3af"  # a fork's parent run: grey, dashed
# the series drawn dashed, by their texts' keys (app.charts.metrics.series_name): the best so far, a parent's
BEST_KEY, PARENT_KEY = "series.best", "series.parent"
MAX_DRAWN_POINTS = 300      # longer series are thinned for drawing (every k-th point and the last)
MARKERS_UP_TO = 60          # series with at most this many points also get a dot per point


def _is(name: str, key: str) -> bool:
    return getattr(name, "key", None) == key


def fmt(value: float) -> str:
    """A tick or tooltip number in at most 4 significant digits: 5.55, 0.002, 1.2e-05, 3.4e+04."""
    if value == 0 or not math.isfinite(value):
        return "0" if value == 0 else str(value)
    magnitude = abs(value)
    if 1e-3 <= magnitude < 1e5:
        return f"{value:.4g}"
    return f"{value:.2g}"


def nice_ticks(lo: float, hi: float, count: int = 5, integer: bool = False) -> list[float]:
    """Round tick values covering [lo, hi] (1, 2 or 5 times a power of ten apart; whole numbers
    at least 1 apart when `integer`, as for steps)."""
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / max(count - 1, 1)
    if integer:
        raw = max(raw, 1.0)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.floor(lo / step) * step
    ticks = [first + i * step for i in range(int(math.ceil((hi - first) / step)) + 1)]
    return [round(t, 12) for t in ticks]


def log_ticks(lo: float, hi: float) -> list[float]:
    """log10 positions of 1-2-5 ticks covering [lo, hi] (lo > 0), e.g. for 0.4..9: 0.2 .. 10."""
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    if last == first:
        last += 1
    for multiples in ((1, 2, 5), (1,)):
        values = [m * 10.0 ** k for k in range(first, last + 1) for m in multiples]
        below = [v for v in values if v <= lo]
        above = [v for v in values if v >= hi]
        span = [v for v in values if lo < v < hi]
        ticks = ([below[-1]] if below else []) + span + ([above[0]] if above else [])
        if len(ticks) <= 8:
            return [math.log10(v) for v in ticks]
    return [float(k) for k in range(first, last + 1)]


def _thin(xs: np.ndarray, ys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if len(xs) <= MAX_DRAWN_POINTS:
        return xs, ys
    keep = np.unique(np.r_[np.arange(0, len(xs), math.ceil(len(xs) / MAX_DRAWN_POINTS)), len(xs) - 1])
    return xs[keep], ys[keep]


class _Axes:
    """Maps data to pixels, linear in x and linear or log10 in y."""

    def __init__(self, xs: np.ndarray, ys: np.ndarray, log_y: bool):
        self.log_y = log_y
        # x spans exactly the steps seen (a live chart grows to the right edge), ticks inside it
        self.x_lo, self.x_hi = float(xs.min()), float(xs.max())
        if self.x_hi == self.x_lo:
            self.x_lo, self.x_hi = self.x_lo - 1, self.x_hi + 1
        self.x_ticks = [t for t in nice_ticks(self.x_lo, self.x_hi, integer=True) if self.x_lo <= t <= self.x_hi]
        if log_y:
            self.y_ticks = log_ticks(float(ys.min()), float(ys.max()))
        else:
            lo, hi = float(ys.min()), float(ys.max())
            pad = (hi - lo) * 0.05 or (abs(hi) * 0.05 or 0.5)
            self.y_ticks = nice_ticks(0.0 if lo >= 0 > lo - pad else lo - pad, hi + pad)
        self.y_lo, self.y_hi = self.y_ticks[0], self.y_ticks[-1]

    def x(self, value: float) -> float:
        span = (self.x_hi - self.x_lo) or 1.0
        return LEFT + (value - self.x_lo) / span * (WIDTH - LEFT - RIGHT)

    def y(self, value: float) -> float:
        if self.log_y:
            value = math.log10(value)
        return self.y_scaled(value)

    def x_array(self, values: np.ndarray) -> np.ndarray:
        span = (self.x_hi - self.x_lo) or 1.0
        return LEFT + (values - self.x_lo) / span * (WIDTH - LEFT - RIGHT)

    def y_array(self, values: np.ndarray) -> np.ndarray:
        span = (self.y_hi - self.y_lo) or 1.0
        scaled = np.log10(values) if self.log_y else values
        return HEIGHT - BOTTOM - (scaled - self.y_lo) / span * (HEIGHT - TOP - BOTTOM)

    def y_scaled(self, value: float) -> float:
        span = (self.y_hi - self.y_lo) or 1.0
        return HEIGHT - BOTTOM - (value - self.y_lo) / span * (HEIGHT - TOP - BOTTOM)

    def y_label(self, tick: float) -> str:
        return fmt(round(10 ** tick, 12)) if self.log_y else fmt(tick)


def _grid(axes: _Axes, x_title: str, y_title: str) -> list[str]:
    parts = []
    for tick in axes.x_ticks:
        x = axes.x(tick)
        parts.append(f'<line class="mt-grid" x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{HEIGHT - BOTTOM}"/>'
                     f'<text class="mt-tick" x="{x:.1f}" y="{HEIGHT - BOTTOM + 14}" '
                     f'text-anchor="middle">{fmt(tick)}</text>')
    for tick in axes.y_ticks:
        y = axes.y_scaled(tick)
        parts.append(f'<line class="mt-grid" x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}"/>'
                     f'<text class="mt-tick" x="{LEFT - 6}" y="{y + 4:.1f}" '
                     f'text-anchor="end">{axes.y_label(tick)}</text>')
    parts.append(f'<text class="mt-axis-title" x="{(LEFT + WIDTH - RIGHT) / 2:.0f}" y="{HEIGHT - 6}" '
                 f'text-anchor="middle">{html.escape(x_title)}</text>')
    parts.append(f'<text class="mt-axis-title" transform="translate(13,{(TOP + HEIGHT - BOTTOM) / 2:.0f}) rotate(-90)" '
                 f'text-anchor="middle">{html.escape(y_title)}</text>')
    return parts


def _dot(px: float, py: float, r: float = 2.6) -> str:
    """A circle as a path (so every point is a `path`, like Vega's symbols)."""
    return f"M{px - r:.1f},{py:.1f}a{r},{r} 0 1,0 {2 * r},0a{r},{r} 0 1,0 {-2 * r},0"


def _series(axes: _Axes, name: str, xs: np.ndarray, ys: np.ndarray, color: str, dashed: bool, y_title: str,
            shown: str, words: tuple[str, str] = ("step", "series")) -> str:
    """One series: its line, and a labelled symbol per drawn point (visible when there are few).

    The symbols follow the DOM contract of Gradio's Vega plots — `g.mark-symbol.role-mark >
    path[aria-label="step: S; <y>: V; series: NAME"]` — so screen readers and tests read either;
    `shown` is the series' name in the page's language, `words` the words for "step" and "series"
    (`data-series` keeps the name the data gives)."""
    count = len(xs)
    xs, ys = _thin(xs, ys)
    pxs, pys = axes.x_array(xs).tolist(), axes.y_array(ys).tolist()
    d = "M" + " L".join(f"{px:.1f},{py:.1f}" for px, py in zip(pxs, pys))
    dash = ' stroke-dasharray="5 4"' if dashed else ""
    line = f'<path class="mt-line" d="{d}" stroke="{color}"{dash}/>' if count > 1 else ""
    visible = count <= MARKERS_UP_TO
    label, series, display = html.escape(y_title), html.escape(name), html.escape(shown)
    step_word, series_word = (html.escape(w) for w in words)
    symbols = []
    for px, py, x, y in zip(pxs, pys, xs.tolist(), ys.tolist()):
        text = f"{step_word}: {int(x)}; {label}: {fmt(y)}; {series_word}: {display}"
        if visible:
            symbols.append(f'<path class="mt-dot" d="{_dot(px, py)}" fill="{color}" aria-label="{text}">'
                           f'<title>{text}</title></path>')
        else:  # many points: an invisible labelled symbol keeps the page light
            symbols.append(f'<path d="M{px:.1f},{py:.1f}h0" aria-label="{text}"/>')
    return (f'<g class="mt-series" data-series="{series}" data-points="{count}">{line}'
            f'<g class="mark-symbol role-mark">{"".join(symbols)}</g></g>')


LEGEND_ROW_PX = 15
LEGEND_MAX_CHARS = 34  # longer names are cut (with …); the whole name is in the item's tooltip


def _legend_width(name: str) -> int:
    """The legend item's width in px: a swatch, then ~7 px a character, twice that for the wide
    (CJK, full-width) characters of a 中文 name."""
    return 24 + 7 * sum(2 if ord(c) >= 0x2E80 else 1 for c in name)


def _legend_rows(names: Sequence[str], display: Callable[[str], str]) -> list[list[str]]:
    """The legend's items row by row, each row within the plot's width."""
    rows: list[list[str]] = [[]]
    x = LEFT
    for name in names:
        width = _legend_width(_cut(display(name)))
        if rows[-1] and x + width > WIDTH - RIGHT + 20:
            rows.append([])
            x = LEFT
        rows[-1].append(name)
        x += width
    return rows


def _cut(name: str) -> str:
    return name if len(name) <= LEGEND_MAX_CHARS else name[:LEGEND_MAX_CHARS - 1] + "…"


def _legend(rows: list[list[str]], colors: dict[str, str], titles: dict[str, str],
            display: Callable[[str], str]) -> str:
    parts = []
    for row_index, row in enumerate(rows):
        x, y = LEFT, 8 + row_index * LEGEND_ROW_PX
        for name in row:
            shown = _cut(display(name))
            hover = titles.get(name, display(name))
            parts.append(f'<g class="mt-legend-item" data-series="{html.escape(name)}"><title>{html.escape(hover)}</title>'
                         f'<rect x="{x}" y="{y}" width="10" height="10" rx="2" fill="{colors[name]}"/>'
                         f'<text class="mt-legend-text" x="{x + 14}" y="{y + 9}">{html.escape(shown)}</text></g>')
            x += _legend_width(shown)
    return "".join(parts)


def line_chart(frame: pd.DataFrame, y_title: str, *, x_title: str = "step", log_y: bool = False,
               caption: str = "", color_column: str = "series",
               empty_text: str = "waiting for the first points…", legend_titles: dict[str, str] | None = None,
               log_mark: str = " (log)", series_text: Callable[[str], str] | None = None,
               series_word: str = "series") -> str:
    """An SVG line chart of a long-format frame (step, value, <color_column>), one line per group.
    The legend wraps onto more rows when the names do not fit one (the plot moves down);
    `legend_titles` gives a name's tooltip (e.g. a run's full id behind its short label);
    `series_text` a group's name in the page's language (legend and point labels), `x_title` and
    `series_word` the point labels' words for "step" and "series"."""
    display = series_text or (lambda name: name)
    steps = frame["step"].to_numpy(dtype=float) if len(frame) else np.zeros(0)
    values = frame["value"].to_numpy(dtype=float) if len(frame) else np.zeros(0)
    groups = frame[color_column].to_numpy(dtype=object) if len(frame) else np.zeros(0, dtype=object)
    keep = np.isfinite(values) & ((values > 0) if log_y else True)
    steps, values, groups = steps[keep], values[keep], groups[keep]
    total = len(steps)
    names = [n if isinstance(n, str) else str(n) for n in dict.fromkeys(groups.tolist())]  # a Said keeps its key
    rows = _legend_rows(names, display) if total else [[]]
    shift = LEGEND_ROW_PX * (len(rows) - 1)
    height = HEIGHT + shift + (16 if caption else 0)
    head = (f'<svg class="mt-chart" data-points="{total}" viewBox="0 0 {WIDTH} {height}" '
            f'xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{html.escape(y_title)}">')
    if total == 0:
        return (f'{head}<text class="mt-empty" x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle">'
                f'{html.escape(empty_text)}</text></svg>')
    axes = _Axes(steps, values, log_y)
    own = [n for n in names if not _is(n, PARENT_KEY)]
    colors = {n: (BEST_COLOR if _is(n, BEST_KEY) else PALETTE[i % len(PALETTE)]) for i, n in enumerate(own)}
    colors.update({n: PARENT_COLOR for n in names if _is(n, PARENT_KEY)})
    parts = [head, _legend(rows, colors, legend_titles or {}, display), f'<g transform="translate(0,{shift})">',
             *_grid(axes, x_title, f"{y_title}{log_mark}" if log_y else y_title)]
    for name in names:
        mask = groups == name
        order = np.argsort(steps[mask], kind="stable")
        parts.append(_series(axes, name, steps[mask][order], values[mask][order], colors[name],
                             dashed=_is(name, BEST_KEY) or _is(name, PARENT_KEY), y_title=y_title,
                             shown=display(name), words=(x_title, series_word)))
    parts.append("</g>")
    if caption:
        parts.append(f'<text class="mt-caption" x="{LEFT}" y="{HEIGHT + shift + 8}">{html.escape(caption)}</text>')
    parts.append("</svg>")
    return "".join(parts)
