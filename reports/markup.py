"""HTML pieces shared by the report pages: escaping, number formatting, tables, the page shell.

Everything that comes from a results file passes through ``esc`` (or a formatter that calls it). A
value that is absent or null renders as an em dash, followed by its reason when the file gives one.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Iterable, Mapping

from validation.results import write_text_atomic

__all__ = ["DASH", "ReportError", "dash", "esc", "fmt", "interval", "num", "page", "shape_cell", "shape_text",
           "status_badge",
           "table", "write_text_atomic"]

DASH = "\u2014"
STATUS_ORDER = ("crashed", "fail", "unsupported", "not-run", "pass")  # worst first
SHAPE_KEYS = ("batch", "seqlen", "nheads", "headdim", "ngroups", "dstate", "chunk_size")
SHAPE_ABBR = ("b", "L", "h", "p", "g", "n", "c")

STYLE = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0 auto;max-width:1240px;
 padding:16px 24px;color:#1b1f24;background:#fff}
h1{font-size:22px;margin:4px 0 2px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #d0d7de;
 padding-bottom:4px}h3{font-size:15px;margin:16px 0 6px}
table{border-collapse:collapse;margin:6px 0 10px;font-size:12.5px}
th,td{border:1px solid #d0d7de;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f3f5f7;font-weight:600}td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td code,.nw{white-space:nowrap}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px}
.why{color:#57606a;font-size:11.5px;white-space:normal}.muted{color:#57606a}
.s{display:inline-block;padding:0 6px;border-radius:9px;font-size:11.5px;font-weight:600;white-space:nowrap}
.s-pass{background:#dafbe1;color:#116329}.s-fail{background:#ffebe9;color:#a40e26}
.s-crashed{background:#a40e26;color:#fff}.s-unsupported{background:#eaeef2;color:#424a53}
.s-not-run{background:#fff8c5;color:#7d4e00}.s-unknown{background:#fbefff;color:#6e40c9}
.verdict{border:2px solid #0969da;border-radius:6px;padding:8px 14px;background:#f6f8fa}
.flag{color:#a40e26;font-weight:600}.bar{display:inline-block;height:9px;background:#0969da;vertical-align:middle}
.grid td{min-width:110px;font-size:11.5px}.charts{display:flex;flex-wrap:wrap;gap:16px}
nav a{margin-right:10px}
"""
# No script, no external fetch: the page must open offline, and a browser enforces that here too.
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


class ReportError(Exception):
    """A results file or run directory the renderer cannot use; the message names the file and what was expected."""


def esc(value: object) -> str:
    return html.escape(value if isinstance(value, str) else str(value), quote=True)


def num(value: object) -> float | None:
    """A number from a results file: JSON numbers, or the strings "nan", "inf", "-inf"; anything else is None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if value in ("nan", "inf", "-inf"):
        return float(value)  # type: ignore[arg-type]
    return None


def dash(reason: object = None) -> str:
    """The mark of a missing value, with its reason when there is one."""
    if reason:
        return f'{DASH} <span class="why">({esc(reason)})</span>'
    return DASH


def fmt(value: object, spec: str = ".3g", reason: object = None) -> str:
    """A number formatted with ``spec``; a non-number is shown as text; null or absent as a dash (with reason)."""
    if value is None:
        return dash(reason)
    x = num(value)
    if x is None:
        if isinstance(value, Mapping | list):
            return f'<span class="mono">{esc(json.dumps(value, sort_keys=True))}</span>'
        return esc(value)
    if not math.isfinite(x):
        return f'<span class="flag">{esc(value)}</span>'
    if isinstance(value, int) and not isinstance(value, bool) and spec == ".3g":
        return esc(value)
    if spec == "us":  # microseconds: whole above 100, one decimal above 10, else two
        spec = ".0f" if abs(x) >= 100 else ".1f" if abs(x) >= 10 else ".2f"
    return esc(format(x, spec))


def interval(stats: Mapping[str, object] | None, spec: str = "us") -> str:
    """``p10–p90`` of a timing record."""
    if not isinstance(stats, Mapping) or stats.get("p10") is None or stats.get("p90") is None:
        return DASH
    return f"{fmt(stats['p10'], spec)}\u2013{fmt(stats['p90'], spec)}"


def shape_text(shape: object) -> str:
    """``b4 L16384 h8 p64 g1 n128 c128`` (plain text, escape it)."""
    if not isinstance(shape, Mapping):
        return DASH
    return " ".join(f"{a}{shape[k]}" for k, a in zip(SHAPE_KEYS, SHAPE_ABBR, strict=True) if k in shape)


def shape_cell(shape: object) -> str:
    return f'<span class="nw">{esc(shape_text(shape))}</span>'


def status_badge(status: object) -> str:
    known = status in STATUS_ORDER
    return f'<span class="s s-{status if known else "unknown"}">{esc(status)}</span>'


def table(headers: Iterable[str], rows: Iterable[Iterable[str]], cls: str = "") -> str:
    """A table from already-escaped cell HTML. A header or cell starting with "#" is right-aligned (numbers); a
    cell starting with "<td" is its own element (for a colspan)."""
    head = "".join(f"<th>{h.removeprefix('#')}</th>" for h in headers)
    body = []
    for row in rows:
        cells = "".join(c if c.startswith("<td") else f'<td class="n">{c[1:]}</td>' if c.startswith("#")
                        else f"<td>{c}</td>" for c in row)
        body.append(f"<tr>{cells}</tr>")
    attr = f' class="{cls}"' if cls else ""
    return f"<table{attr}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def page(title: str, body: str) -> str:
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            f'<meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<title>{esc(title)}</title><style>{STYLE}</style></head>\n<body>\n{body}\n</body></html>\n")
