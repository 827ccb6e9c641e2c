"""Inline SVG charts, generated as text (no plotting library, no script): the speedup chart in the manner of
the post's figure: x is seqlen on a log2 axis, one line per dstate, y is the speedup over Triton, with a
line at 1.0. Published ratios, when given, are drawn dotted with hollow markers beside the measured ones.
"""

from __future__ import annotations

import math

from reports.markup import esc

__all__ = ["speedup_chart"]

W, H = 600, 340
LEFT, RIGHT, TOP, BOTTOM = 52, 120, 30, 44
COLORS = {64: "#0969da", 128: "#d1242f", 256: "#1a7f37", 512: "#8250df"}
OTHER_COLORS = ("#bc4c00", "#57606a", "#bf3989", "#0a3069")

Series = dict[int, list[tuple[int, float]]]  # dstate -> [(seqlen, ratio)]


def _color(dstate: int, order: list[int]) -> str:
    return COLORS.get(dstate) or OTHER_COLORS[order.index(dstate) % len(OTHER_COLORS)]


def _seqlen_label(n: int) -> str:
    return f"{n // 1024}K" if n >= 1024 and n % 1024 == 0 else str(n)


def _f(x: float) -> str:
    return f"{x:.1f}"


def speedup_chart(title: str, measured: Series, published: Series | None = None) -> str:
    """An SVG element; ``measured`` and ``published`` map dstate to (seqlen, speedup) points (seqlen > 0)."""
    published = published or {}
    xs = [s for ser in (measured, published) for pts in ser.values() for s, _ in pts]
    ys = [r for ser in (measured, published) for pts in ser.values() for _, r in pts if math.isfinite(r)]
    lo = min([10, *(int(math.floor(math.log2(s))) for s in xs)])
    hi = max([18, *(int(math.ceil(math.log2(s))) for s in xs)])
    ymax = max(2.0, math.ceil(max(ys, default=1.0) * 1.1 * 4) / 4)
    step = 0.25 if ymax <= 2.0 else 0.5 if ymax <= 4.0 else 1.0
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM

    def px(seqlen: float) -> float:
        return LEFT + (math.log2(seqlen) - lo) / (hi - lo) * pw

    def py(ratio: float) -> float:
        return TOP + ph - min(max(ratio, 0.0), ymax) / ymax * ph

    out = [f'<svg width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
           f'role="img" aria-label="{esc(title)}" font-family="system-ui,sans-serif" font-size="11">',
           f'<text x="{LEFT}" y="18" font-size="13" font-weight="600">{esc(title)}</text>']
    for k in range(lo, hi + 1):
        x = _f(px(2**k))
        out.append(f'<line x1="{x}" y1="{TOP}" x2="{x}" y2="{TOP + ph}" stroke="#eaeef2"/>')
        out.append(f'<text x="{x}" y="{TOP + ph + 15}" text-anchor="middle">{_seqlen_label(2**k)}</text>')
    for i in range(int(round(ymax / step)) + 1):
        y = _f(py(i * step))
        out.append(f'<line x1="{LEFT}" y1="{y}" x2="{LEFT + pw}" y2="{y}" stroke="#eaeef2"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y}" dy="4" text-anchor="end">{i * step:g}</text>')
    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="#8c959f"/>')
    one = _f(py(1.0))
    out.append(f'<line x1="{LEFT}" y1="{one}" x2="{LEFT + pw}" y2="{one}" stroke="#1b1f24" stroke-dasharray="5 3"/>')
    out.append(f'<text x="{LEFT + pw - 4}" y="{one}" dy="-4" text-anchor="end" fill="#1b1f24">1.0 = Triton</text>')
    out.append(f'<text x="{LEFT + pw / 2}" y="{H - 8}" text-anchor="middle">seqlen (tokens, log2)</text>')
    out.append(f'<text transform="translate(14 {TOP + ph / 2}) rotate(-90)" text-anchor="middle">'
               f"speedup over Triton (kernel time)</text>")
    order = sorted({*measured, *published})
    for dstate in order:
        color = _color(dstate, order)
        for pts, dotted in ((published.get(dstate, []), True), (measured.get(dstate, []), False)):
            pts = sorted((s, r) for s, r in pts if math.isfinite(r))
            if not pts:
                continue
            coords = " ".join(f"{_f(px(s))},{_f(py(r))}" for s, r in pts)
            dash = ' stroke-dasharray="2 3"' if dotted else ""
            out.append(f'<polyline points="{coords}" fill="none" stroke="{color}" stroke-width="2"{dash}/>')
            for s, r in pts:
                what = "published" if dotted else "measured"
                tip = f"<title>dstate {dstate}, seqlen {s}: {r:.2f}x ({what})</title>"
                if dotted:
                    out.append(f'<rect x="{_f(px(s) - 3)}" y="{_f(py(r) - 3)}" width="6" height="6" fill="#fff" '
                               f'stroke="{color}">{tip}</rect>')
                else:
                    out.append(f'<circle cx="{_f(px(s))}" cy="{_f(py(r))}" r="3.2" fill="{color}">{tip}</circle>')
    lx = LEFT + pw + 14
    for i, dstate in enumerate(order):
        y = TOP + 10 + 18 * i
        color = _color(dstate, order)
        out.append(f'<line x1="{lx}" y1="{y}" x2="{lx + 20}" y2="{y}" stroke="{color}" stroke-width="2"/>')
        out.append(f'<text x="{lx + 26}" y="{y}" dy="4">dstate {dstate}</text>')
    if published:
        y = TOP + 10 + 18 * len(order) + 8
        out.append(f'<line x1="{lx}" y1="{y}" x2="{lx + 20}" y2="{y}" stroke="#57606a" stroke-width="2" '
                   f'stroke-dasharray="2 3"/><text x="{lx + 26}" y="{y}" dy="4">published</text>')
    if not ys:
        out.append(f'<text x="{LEFT + pw / 2}" y="{TOP + ph / 2}" text-anchor="middle" fill="#57606a">'
                   f"no speedup to plot</text>")
    out.append("</svg>")
    return "\n".join(out)
