"""The pieces shared by the report pages: the Jinja2 environment (autoescaping), number formatting, and the
filters the templates use.

The HTML lives in ``reports/templates/``; Python only prepares values. Everything that comes from a results
file is escaped by the template engine (autoescape), or by a filter here that returns ``Markup`` only after
escaping its input. A value that is absent or null renders as an em dash, followed by its reason when the
file gives one.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Mapping
from pathlib import Path

import jinja2
from markupsafe import Markup

from validation.results import write_text_atomic

__all__ = ["DASH", "IMPL_NAMES", "STATUS_ORDER", "ReportError", "dash", "esc", "fmt", "impl_name", "interval", "num",
           "render", "seqlen_label", "shape_text", "write_text_atomic"]

DASH = "\u2014"
STATUS_ORDER = ("crashed", "fail", "unsupported", "not-run", "pass")  # worst first
SHAPE_KEYS = ("batch", "seqlen", "nheads", "headdim", "ngroups", "dstate", "chunk_size")
SHAPE_ABBR = ("b", "L", "h", "p", "g", "n", "c")
IMPL_NAMES = {"cutile": "ours (cuTile)", "tilegym": "TileGym (cuTile)", "triton": "Triton (mamba_ssm)",
              "triton-interpreter": "Triton, interpreter (CPU)", "reference-chunked": "float64 reference (chunked)",
              "reference-recurrent": "float64 recurrence"}
TEMPLATES = Path(__file__).with_name("templates")
# No script, no external fetch: the page must open offline, and a browser enforces that here too.
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


class ReportError(Exception):
    """A results file or run directory the renderer cannot use; the message names the file and what was expected."""


def esc(value: object) -> Markup:
    return Markup(html.escape(value if isinstance(value, str) else str(value), quote=True))


def num(value: object) -> float | None:
    """A number from a results file: JSON numbers, or the strings "nan", "inf", "-inf"; anything else is None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if value in ("nan", "inf", "-inf"):
        return float(value)  # type: ignore[arg-type]
    return None


def dash(reason: object = None) -> Markup:
    """The mark of a missing value, with its reason when there is one."""
    if reason:
        return Markup('{} <span class="why">({})</span>').format(DASH, reason)
    return Markup(DASH)


def fmt(value: object, spec: str = ".3g", reason: object = None) -> Markup:
    """A number formatted with ``spec``; a non-number is shown as text; null or absent as a dash (with reason).
    ``spec`` "us" is microseconds (whole above 100, one decimal above 10, else two); "x" is a ratio (1.23x)."""
    if value is None:
        return dash(reason)
    x = num(value)
    if x is None:
        if isinstance(value, Mapping | list):
            return Markup('<span class="mono">{}</span>').format(json.dumps(value, sort_keys=True))
        return esc(value)
    if not math.isfinite(x):
        return Markup('<span class="flag">{}</span>').format(value)
    if isinstance(value, int) and spec == ".3g":
        return esc(value)
    if spec == "us":
        spec = ".0f" if abs(x) >= 100 else ".1f" if abs(x) >= 10 else ".2f"
    if spec == "x":
        return esc(f"{x:.2f}x")
    return esc(format(x, spec))


def interval(stats: object, spec: str = "us") -> Markup:
    """``p10–p90`` of a timing record."""
    if not isinstance(stats, Mapping) or stats.get("p10") is None or stats.get("p90") is None:
        return Markup(DASH)
    return fmt(stats["p10"], spec) + Markup("\u2013") + fmt(stats["p90"], spec)


def shape_text(shape: object) -> str:
    """``b4 L16384 h8 p64 g1 n128 c128`` (plain text; the template escapes it)."""
    if not isinstance(shape, Mapping):
        return DASH
    return " ".join(f"{a}{shape[k]}" for k, a in zip(SHAPE_KEYS, SHAPE_ABBR, strict=True) if k in shape)


def seqlen_label(n: object) -> str:
    """1024 -> "1K", 262144 -> "256K", 77 -> "77"."""
    if isinstance(n, int) and n >= 1024 and n % 1024 == 0:
        return f"{n // 1024}K" if n < 2**20 or n % 2**20 else f"{n // 2**20}M"
    return str(n)


def impl_name(impl: object) -> str:
    return IMPL_NAMES.get(str(impl), str(impl))


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             keep_trailing_newline=True)
    env.filters.update(fmt=fmt, dash=dash, interval=interval, shape=shape_text, seqlen=seqlen_label,
                       impl_name=impl_name)
    env.globals.update(impl_name=impl_name, DASH=DASH, CSP=CSP, STATUS_ORDER=STATUS_ORDER)
    return env


ENV = _environment()


def render(template: str, **values: object) -> str:
    """One template of ``reports/templates/`` filled with ``values`` (escaped unless a value is ``Markup``)."""
    return ENV.get_template(template).render(**values)
