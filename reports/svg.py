"""Chart geometry for the report's inline SVG (no plotting library, no script). Python computes where
everything goes; ``templates/chart.svg`` draws it. Two kinds:

- ``speedup_chart``: x is seqlen on a log2 axis, one line per dstate, y is a ratio of kernel times on a
  linear axis fitted to the data, with 1.0 marked and the post's claimed range as a band. Published
  per-point ratios, when a results file carries them, are drawn dotted with hollow markers.
- ``time_chart``: x is seqlen (log2), y is kernel time in microseconds (log10), one line per implementation.

Nothing is written inside the plot area but the data: titles sit above it, tick labels outside it, and the
legend is HTML beside the charts, so no label can run into a line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from markupsafe import Markup

from reports.markup import render, seqlen_label

__all__ = ["COLORS", "IMPL_COLORS", "speedup_chart", "time_chart"]

COLORS = {64: "#0969da", 128: "#d1242f", 256: "#1a7f37", 512: "#8250df"}
OTHER_COLORS = ("#bc4c00", "#57606a", "#bf3989", "#0a3069")
IMPL_COLORS = {"cutile": "#0969da", "tilegym": "#bc4c00", "triton": "#57606a"}
STEPS = (0.05, 0.1, 0.2, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0)

Series = dict[int, list[tuple[int, float]]]  # dstate -> [(seqlen, ratio)]


def dstate_color(dstate: int, order: list[int]) -> str:
    return COLORS.get(dstate) or OTHER_COLORS[order.index(dstate) % len(OTHER_COLORS)]


@dataclass
class Line:
    color: str
    points: list[tuple[float, float, str]]  # x, y, tooltip
    dotted: bool = False


@dataclass
class Chart:
    title: str
    width: int
    height: int
    left: int
    top: int
    plot_w: int
    plot_h: int
    y_title: str
    x_title: str
    x_ticks: list[tuple[float, str]] = field(default_factory=list)
    y_ticks: list[tuple[float, str, bool]] = field(default_factory=list)  # y, label, the reference line
    band: tuple[float, float] | None = None  # y of its top and bottom
    reference: float | None = None  # y of the 1.0 line
    lines: list[Line] = field(default_factory=list)
    empty: str = ""

    def svg(self) -> Markup:
        return Markup(render("chart.svg", chart=self))


def _x_axis(chart: Chart, xs: list[int]) -> tuple[int, int]:
    lo = min(int(math.floor(math.log2(s))) for s in xs) if xs else 10
    hi = max(int(math.ceil(math.log2(s))) for s in xs) if xs else 18
    hi = max(hi, lo + 1)
    every = 1 if chart.plot_w / (hi - lo + 1) >= 34 else 2
    chart.x_ticks = [(_px(chart, 2**k, lo, hi), seqlen_label(2**k) if (k - lo) % every == 0 else "")
                     for k in range(lo, hi + 1)]
    return lo, hi


def _px(chart: Chart, seqlen: float, lo: int, hi: int) -> float:
    return round(chart.left + (math.log2(seqlen) - lo) / (hi - lo) * chart.plot_w, 1)


def _frame(title: str, width: int, height: int, y_title: str) -> Chart:
    left, right, top, bottom = 46, 16, 24, 36
    return Chart(title, width, height, left, top, width - left - right, height - top - bottom, y_title,
                 "seqlen (tokens, log scale)")


def speedup_chart(title: str, measured: Series, *, y_title: str, band: tuple[float, float] | None = None,
                  published: Series | None = None, width: int = 396, height: int = 250) -> Chart:
    """Ratios by dstate over seqlen; y fitted to the data, 1.0 and (when given) the band included."""
    published = published or {}
    chart = _frame(title, width, height, y_title)
    xs = [s for ser in (measured, published) for pts in ser.values() for s, _ in pts]
    # A ratio past 1e6 either way is a broken timing, not a speedup: it is listed in the tables, not drawn.
    ys = [r for ser in (measured, published) for pts in ser.values() for _, r in pts
          if math.isfinite(r) and 1e-6 < r < 1e6]
    lo_x, hi_x = _x_axis(chart, xs)
    span = [*ys, 1.0, *(band or ())]
    y_lo, y_hi = min(span), max(span)
    pad = max((y_hi - y_lo) * 0.06, 0.02)
    y_lo, y_hi = max(y_lo - pad, 0.0), y_hi + pad
    step = next((s for s in STEPS if (y_hi - y_lo) / s <= 8), 10 ** math.ceil(math.log10((y_hi - y_lo) / 8)))
    y_lo, y_hi = math.floor(y_lo / step) * step, math.ceil(y_hi / step) * step

    def py(ratio: float) -> float:
        clipped = min(max(ratio, y_lo), y_hi)
        return round(chart.top + chart.plot_h - (clipped - y_lo) / (y_hi - y_lo) * chart.plot_h, 1)

    ticks = [round(y_lo + i * step, 6) for i in range(int(round((y_hi - y_lo) / step)) + 1)]
    chart.y_ticks = [(py(t), f"{t:g}", abs(t - 1.0) < 1e-9) for t in ticks]
    if not any(ref for *_, ref in chart.y_ticks):
        chart.y_ticks.append((py(1.0), "1", True))
    chart.reference = py(1.0)
    if band:
        chart.band = (py(band[1]), py(band[0]))
    order = sorted({*measured, *published})
    for dstate in order:
        color = dstate_color(dstate, order)
        for pts, dotted, what in ((published.get(dstate, []), True, "published"),
                                  (measured.get(dstate, []), False, "measured")):
            pts = sorted((s, r) for s, r in pts if math.isfinite(r) and 1e-6 < r < 1e6)
            if pts:
                chart.lines.append(Line(color, [(_px(chart, s, lo_x, hi_x), py(r),
                                                 f"dstate {dstate}, seqlen {s}: {r:.2f}x ({what})") for s, r in pts],
                                        dotted))
    if not ys:
        chart.empty = "no ratio to plot"
    return chart


def time_chart(title: str, series: dict[str, list[tuple[int, float]]], names: dict[str, str],
               width: int = 300, height: int = 230) -> Chart:
    """Kernel time (us) over seqlen, both on log axes, one line per implementation."""
    chart = _frame(title, width, height, "kernel time (us, log scale)")
    xs = [s for pts in series.values() for s, _ in pts]
    ys = [t for pts in series.values() for _, t in pts if math.isfinite(t) and t > 0]
    lo_x, hi_x = _x_axis(chart, xs)
    lo = math.floor(math.log10(min(ys))) if ys else 0
    hi = math.ceil(math.log10(max(ys))) if ys else 1
    hi = max(hi, lo + 1)

    def py(us: float) -> float:
        return round(chart.top + chart.plot_h - (math.log10(us) - lo) / (hi - lo) * chart.plot_h, 1)

    chart.y_ticks = [(py(10**k), f"{10**k:g}", False) for k in range(lo, hi + 1)]
    for impl, pts in series.items():
        pts = sorted((s, t) for s, t in pts if math.isfinite(t) and t > 0)
        if pts:
            chart.lines.append(Line(IMPL_COLORS.get(impl, "#1b1f24"),
                                    [(_px(chart, s, lo_x, hi_x), py(t), f"{names.get(impl, impl)}, seqlen {s}: "
                                      f"{t:.1f} us") for s, t in pts]))
    if not ys:
        chart.empty = "no kernel time to plot"
    return chart
