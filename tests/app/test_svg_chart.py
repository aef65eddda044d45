"""app.charts.svg_chart: server-drawn charts with labelled points (the DOM contract the browser test reads)."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from app.charts.svg_chart import MARKERS_UP_TO, MAX_DRAWN_POINTS, _legend_rows, fmt, line_chart, log_ticks, nice_ticks

LABEL = re.compile(r'aria-label="step: (\d+); [^;"]+: ([^;"]+); series: ([^"]+)"')


def points(svg: str) -> dict[str, dict[int, str]]:
    """{series: {step: value}} as a browser test reads them from the symbols' aria-labels."""
    out: dict[str, dict[int, str]] = {}
    for step, value, series in LABEL.findall(svg):
        out.setdefault(series, {})[int(step)] = value
    return out


def frame(steps, values, series):
    return pd.DataFrame({"step": steps, "value": values, "series": series})


def test_every_point_is_a_labelled_symbol_per_series():
    data = pd.concat([frame([1, 2, 3], [3.0, 2.5, 2.25], "loss"), frame([1, 2, 3], [3.0, 2.9, 2.7], "loss EMA")])
    svg = line_chart(data, "loss")
    assert 'data-points="6"' in svg and svg.count('class="mark-symbol role-mark"') == 2
    assert points(svg) == {"loss": {1: "3", 2: "2.5", 3: "2.25"}, "loss EMA": {1: "3", 2: "2.9", 3: "2.7"}}
    assert "<title>step: 2; loss: 2.5; series: loss</title>" in svg


def test_empty_and_non_finite_data():
    assert 'data-points="0"' in line_chart(frame([], [], []), "loss")
    svg = line_chart(frame([1, 2], [float("nan"), 1.0], "loss"), "loss")
    assert points(svg) == {"loss": {2: "1"}}


def test_long_series_are_thinned_but_keep_the_newest_point():
    n = 5000
    svg = line_chart(frame(np.arange(1, n + 1), np.linspace(5, 1, n), "loss"), "loss")
    drawn = points(svg)["loss"]
    assert len(drawn) <= MAX_DRAWN_POINTS + 1 and n in drawn and 'data-points="5000"' in svg
    symbols = svg[svg.index('class="mark-symbol'):]
    assert "<title>" not in symbols and n > MARKERS_UP_TO  # invisible symbols only: a light page


def test_best_series_is_dashed_and_caption_shown():
    """The best-so-far and a fork's parent curves are known by their series' keys (app.charts.metrics
    series_name), not by their English: a comparison's run named 'best run' is an ordinary line."""
    from app.charts.metrics import series_name
    best = series_name("best", monitor="val_loss")
    data = pd.concat([frame([0, 10], [5.0, 4.0], series_name("val loss")), frame([5, 10], [4.5, 4.0], best)])
    svg = line_chart(data, "validation loss", caption="best val_loss 4 at step 10 · patience left 3")
    assert "patience left 3" in svg and "#dc2626" in svg and "stroke-dasharray" in svg
    plain = line_chart(pd.concat([frame([0, 10], [5.0, 4.0], "run a"), frame([0, 10], [4.0, 3.0], "best run")]), "loss")
    assert "#dc2626" not in plain and "stroke-dasharray" not in plain
    parent = line_chart(frame([0, 10], [5.0, 4.0], series_name("parent", name=series_name("loss"))), "loss")
    assert "#9ca3af" in parent and "stroke-dasharray" in parent


def test_log_axis_and_ticks():
    svg = line_chart(frame([1, 2, 3], [100.0, 10.0, -1.0], "loss"), "loss", log_y=True)
    assert "loss (log)" in svg and points(svg) == {"loss": {1: "100", 2: "10"}}
    assert [round(10 ** t, 6) for t in log_ticks(0.35, 5.3)] == [0.2, 0.5, 1, 2, 5, 10]
    assert nice_ticks(0, 399, integer=True) == [0, 100, 200, 300, 400]
    assert nice_ticks(1, 3, integer=True) == [1, 2, 3]


def test_number_format():
    assert (fmt(5.5512), fmt(0.002), fmt(1.2e-5), fmt(34000.0), fmt(0)) == ("5.551", "0.002", "1.2e-05", "3.4e+04", "0")


def test_labels_are_escaped():
    svg = line_chart(frame([1], [1.0], "<b>x</b>"), "a<b")
    assert "<b>" not in svg and "&lt;b&gt;x&lt;/b&gt;" in svg


def test_a_legend_of_long_names_wraps_and_keeps_each_name_on_hover():
    """Issue 20 bug 8: the overlay legend showed only the first run, the others pushed out of the
    chart by long run ids. Every item now lies inside the chart (rows wrap), names over 34
    characters are cut with an ellipsis, and each item's tooltip holds the whole name."""
    import re

    names = [f"20261201-10{i}000_demo-lora_tiny-demo_lora-r{8 * i}_fp32_dp1" for i in range(1, 5)]
    data = pd.concat([frame([1, 2], [3.0 - i, 2.0 - i / 10], name) for i, name in enumerate(names)])
    svg = line_chart(data, "val ppl", color_column="series", legend_titles={n: f"full id {n}" for n in names})
    items = re.findall(r'<g class="mt-legend-item" data-series="([^"]+)"><title>([^<]+)</title>'
                       r'<rect x="(\d+)" y="(\d+)"', svg)
    assert [i[0] for i in items] == names and [i[1] for i in items] == [f"full id {n}" for n in names]
    width = float(re.search(r'viewBox="0 0 (\d+)', svg).group(1))
    texts = re.findall(r'class="mt-legend-text" x="(\d+)" y="\d+">([^<]+)</text>', svg)
    assert all(int(x) + 7 * len(t) <= width + 20 for x, t in texts), texts
    assert len({y for *_, y in items}) > 1 and all(t.endswith("…") and len(t) <= 34 for _, t in texts)
    assert set(points(svg)) == set(names)  # every series is still drawn, under its whole name


def test_a_chinese_legend_counts_its_wide_characters():
    """Five 8-character names fit one legend row in Latin letters; in 中文 each character takes about
    twice the width, so the same count of characters needs more rows (they overlapped before)."""
    latin, chinese = ["abcdefgh"] * 5, ["验证损失曲线一二"] * 5
    assert len(_legend_rows(latin, str)) == 1
    assert len(_legend_rows(chinese, str)) >= 2
