"""The sections of a run's report, in the order a reader needs them (see ``SECTIONS``). Each function takes
a ``Run`` and returns escaped HTML; nothing here reads files or the clock, so a report depends only on
its results files.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from reports.markup import STATUS_ORDER, dash, esc, fmt, interval, num, shape_cell, shape_text, status_badge, table
from reports.runs import (
    HEADLINE,
    PEERS,
    SUITES,
    Case,
    Run,
    kernel_median,
    published_ratios,
    shape_order,
    speedup,
    speedup_points,
)
from reports.svg import speedup_chart

__all__ = ["REL_STD_FLAG", "SECTIONS"]

REL_STD_FLAG = 0.05  # a timing whose relative standard deviation exceeds this is flagged as noisy
PEER_NAMES = {"cutile": "ours (cuTile)", "tilegym": "TileGym (cuTile)"}
CLAIM_MIN = 1.14  # the lower end of the post's claimed range over Triton on one B300
PUBLISHED_RANGE = "1.14x\u20131.82x"
GRID_COLOURS = {"pass": "#dafbe1", "fail": "#ffebe9", "crashed": "#ffcecb", "unsupported": "#eaeef2",
                "not-run": "#fff8c5"}


def _why(case: Case, field: str) -> str | None:
    reasons = case.get("null_reasons")
    return reasons.get(field) if isinstance(reasons, dict) else None


def _x(ratio: float | None) -> str:
    return f"{ratio:.2f}x" if ratio is not None else "\u2014"


def _cases_sorted(cases: list[Case]) -> list[Case]:
    return sorted(cases, key=lambda c: (str(c.get("id")), str(c.get("impl"))))


def _point_label(key: tuple[object, ...]) -> str:
    shape = dict(zip(HEADLINE, key[:-1], strict=True))
    return f"{shape_text(shape)} {key[-1]}"


def _is_headline(key: tuple[object, ...]) -> bool:
    return dict(zip(HEADLINE, key[:-1], strict=True)) == HEADLINE


def verdict(run: Run) -> str:
    counts = ", ".join(
        f"{s}: " + " ".join(f"{n} {st}" for st, n in sorted(
            {st: sum(c.get("status") == st for c in run.cases(s)) for st in STATUS_ORDER}.items()) if n)
        for s in SUITES if s in run.files)
    if "benchmark" not in run.files:
        return (f'<div class="verdict"><p><b>No verdict on speed: the benchmark did not run</b> (no raw/benchmark.json)'
                f'. The post claims {PUBLISHED_RANGE} over Triton on one B300.</p><p>Cases by suite: {esc(counts)}</p>'
                f"</div>")
    points = speedup_points(run.cases("benchmark"))
    published, source = published_ratios(run)
    lines = []
    for impl in PEERS:
        ratios = [r for p in points.values() if (r := speedup(p, impl)[0]) is not None]
        head = [speedup(p, impl) for k, p in points.items() if _is_headline(k)]
        if not ratios:
            lines.append(f"<li><b>{esc(PEER_NAMES[impl])}</b>: no verdict, no speedup measured (no passing pair "
                         f"with Triton).</li>")
            continue
        faster = sum(r > 1.0 for r in ratios)
        claimed = sum(r >= CLAIM_MIN for r in ratios)  # the claim is a speedup of at least its lower end
        failed = sum(str((p.get(impl) or {}).get("status")) in ("fail", "crashed") for p in points.values())
        n = len(ratios)
        answer = (f"reproduces: at least {CLAIM_MIN}x at every measured point" if claimed == n and not failed
                  else f"reproduces in part: at least {CLAIM_MIN}x at {claimed} of {n} measured points" if claimed
                  else f"does not reproduce: faster than Triton at {faster} of {n} points, never by {CLAIM_MIN}x"
                  if faster else "does not reproduce: slower than Triton at every measured point")
        headline = (_x(head[0][0]) if head and head[0][0] is not None
                    else dash(head[0][1]) if head else dash("not measured"))
        gate = (f' <span class="flag">{failed} point(s) failed the correctness gate: no speedup.</span>'
                if failed else "")
        lines.append(f"<li><b>{esc(PEER_NAMES[impl])}</b>: <b>{answer}</b>; {min(ratios):.2f}x\u2013"
                     f"{max(ratios):.2f}x over {len(ratios)} points; headline shape (seqlen 16384, dstate 128): "
                     f"{headline}.{gate}</li>")
    gpu, why = run.gpu()
    pub = (f"Published ({esc(source)}): shown beside each point." if published else esc(source) + ".")
    trend = _trend(points)
    rows = []
    for key, point in points.items():
        cells = [esc(_point_label(key))]
        notes = []
        for impl in PEERS:
            ratio, reason = speedup(point, impl)
            cells.append("#" + _x(ratio))
            if ratio is None:
                notes.append(f"{PEER_NAMES[impl]}: {reason}")
        pr = published.get((key[1], key[5]))  # type: ignore[arg-type]
        cells.append("#" + (_x(pr) if pr is not None else dash()))
        cells.append(esc("; ".join(notes)) if notes else "")
        rows.append(cells)
    return (f'<div class="verdict"><p><b>Does the claim ({PUBLISHED_RANGE} over Triton, one B300) reproduce on '
            f"{esc(gpu) if gpu else dash(why)}?</b> Speedup = Triton kernel time / implementation kernel time "
            f"(CUPTI medians); a point whose correctness gate failed shows its failure, not a speedup.</p>"
            f"<ul>{''.join(lines)}</ul><p>{pub}</p><p>Trend: {trend}</p><p>Cases by suite: {esc(counts)}</p></div>"
            + table(["point (shape, dtype)", *(f"#{esc(PEER_NAMES[i])}" for i in PEERS), "#published",
                     "no ratio because"], rows))


def _trend(points: dict[tuple[object, ...], dict[str, Case]]) -> str:
    parts = []
    for impl in PEERS:
        by_dstate: dict[int, list[tuple[int, float]]] = {}
        for key, point in points.items():
            ratio = speedup(point, impl)[0]
            if ratio is not None and isinstance(key[1], int) and isinstance(key[5], int):
                by_dstate.setdefault(key[5], []).append((key[1], ratio))
        for dstate, pts in sorted(by_dstate.items()):
            pts.sort()
            if len(pts) < 2:
                continue
            (s0, r0), (s1, r1) = pts[0], pts[-1]
            way = "rises" if r1 > r0 * 1.05 else "falls" if r1 < r0 / 1.05 else "is flat (within 5%)"
            parts.append(f"{PEER_NAMES[impl]}, dstate {dstate}: {r0:.2f}x at seqlen {s0} \u2192 {r1:.2f}x at {s1} "
                         f"({way} with seqlen)")
        if by_dstate:
            means = {d: math.exp(sum(math.log(r) for _, r in p) / len(p)) for d, p in sorted(by_dstate.items())}
            parts.append(f"{PEER_NAMES[impl]}, geometric mean by dstate: "
                         + ", ".join(f"{d}: {m:.2f}x" for d, m in means.items()))
    return esc("; ".join(parts)) if parts else "no trend: fewer than two comparable points."


def environment(run: Run) -> str:
    envs = run.environment()
    keys = sorted({k for e in envs.values() for k in e if k != "null_reasons"})
    rows = []
    for key in keys:
        values = {s: e.get(key) for s, e in envs.items() if key in e}
        distinct = {json.dumps(v, sort_keys=True) for v in values.values()}

        def show(suite: str, key: str = key, values: dict[str, Any] = values) -> str:
            value = values[suite]
            return fmt(value, reason=(envs[suite].get("null_reasons") or {}).get(key) if value is None else None)

        if len(distinct) == 1:
            cell = show(next(iter(values)))
        else:
            cell = "<br>".join(f"{esc(s)}: {show(s)}" for s in values)
        rows.append([f"<code>{esc(key)}</code>", cell])
    files = [[f'<a href="raw/{s}.json">{esc(s)}.json</a>', esc(f.get("suite_version")), esc(f.get("created")),
              fmt(f.get("finished")), f"#{len(run.cases(s))}",
              esc(" ".join(f"{k}={v}" for k, v in sorted((f.get("summary") or {}).items())))]
             for s, f in run.files.items()]
    return (table(["results file", "suite version", "created", "finished", "#cases", "summary"], files)
            + "<p class=\"muted\">Environment and provenance as each results file recorded it; a value the suite "
              "could not read is shown as a dash with its reason; where files differ each is shown.</p>"
            + table(["field", "value"], rows))


def chart(run: Run) -> str:
    if "benchmark" not in run.files:
        return "<p>No chart: the benchmark did not run.</p>"
    points = speedup_points(run.cases("benchmark"))
    published, source = published_ratios(run)
    pub: dict[int, list[tuple[int, float]]] = {}
    for (seqlen, dstate), ratio in published.items():
        pub.setdefault(dstate, []).append((seqlen, ratio))
    common = {}
    for key in points:
        common[key[:1] + key[2:5] + key[6:]] = common.get(key[:1] + key[2:5] + key[6:], 0) + 1
    sweep = max(sorted(common, key=str), key=lambda k: common[k]) if common else None
    svgs = []
    for impl in PEERS:
        series: dict[int, list[tuple[int, float]]] = {}
        for key, point in points.items():
            ratio = speedup(point, impl)[0]
            if ratio is not None and key[:1] + key[2:5] + key[6:] == sweep and isinstance(key[1], int):
                series.setdefault(int(key[5]), []).append((key[1], ratio))  # type: ignore[arg-type]
        svgs.append(speedup_chart(f"{PEER_NAMES[impl]} over Triton", series, pub))
    names = ("batch", "nheads", "headdim", "ngroups", "chunk_size", "dtype")
    fixed = "" if sweep is None else ", ".join(f"{k} {v}" for k, v in zip(names, sweep, strict=True))
    return (f'<div class="charts">{"".join(svgs)}</div><p class="muted">Kernel-time speedup over Triton per '
            f"(seqlen, dstate) at {esc(fixed) or 'no shape'}; a failed or missing case leaves a gap. Dotted: "
            f"{esc(source) if published else 'no published ratios (' + esc(source) + ')'}.</p>")


def _timing(stats: object) -> tuple[str, str, str]:
    if not isinstance(stats, dict):
        return dash(), dash(), dash()
    rel = num(stats.get("rel_std"))
    flag = ' <span class="flag" title="noisy">noisy</span>' if rel is not None and rel > REL_STD_FLAG else ""
    return fmt(stats.get("median"), "us"), interval(stats), fmt(stats.get("rel_std"), ".1%") + flag


def _tuning_note(run: Run) -> str:
    tuning = run.files["benchmark"].get("tilegym_tuning")
    if isinstance(tuning, dict):  # since the tuning store; earlier runs wrote one sentence
        tuning = f"{tuning.get('mode')}: {tuning.get('what')}"
    return f" TileGym's tuning in this run: {esc(tuning)}." if tuning else ""


def _compile_note(run: Run) -> str:
    phase = run.files["benchmark"].get("compile_phase")
    if not isinstance(phase, dict):
        return " Compile time is the first call of the timed process (compilation and autotune)."
    failed = phase.get("failed") or {}
    return (f" Compile phase: {fmt(phase.get('first_calls'))} of {fmt(phase.get('of'))} first calls in "
            f"{fmt(phase.get('jobs'))} processes, {fmt(phase.get('wall_s'), '.0f')} s"
            f"{f', {len(failed)} failed there' if failed else ''}; {esc(phase.get('what'))}.")


def _triton_note(run: Run) -> str:
    tuning = run.files["benchmark"].get("triton_tuning")
    if not isinstance(tuning, dict):  # runs before the choice was offered tuned on the first length met
        return ""
    return f" Triton's autotune in this run: {esc(tuning.get('mode'))}: {esc(tuning.get('what'))}."


def _config_source(case: dict) -> str:
    """Where TileGym's config (or the length Triton tuned at) for this case came from."""
    if isinstance(case.get("triton_tuned_at"), int):
        return f'<br><span class="why">Triton tuned at {case["triton_tuned_at"]} tokens</span>'
    decisions = case.get("tilegym_tuning")
    if not isinstance(decisions, list) or not decisions:
        return ""
    sources = sorted({str(d.get("source")) for d in decisions if isinstance(d, dict)})
    return f'<br><span class="why">TileGym config: {esc("; ".join(sources))}</span>'


def times(run: Run) -> str:
    if "benchmark" not in run.files:
        return "<p>The benchmark did not run.</p>"
    rows = []
    for c in sorted(run.cases("benchmark"), key=shape_order):
        if c.get("status") == "fail":
            timing = [f'<td colspan="7" class="flag">correctness gate failed, no timing shown: {esc(c.get("reason"))}'
                      "</td>"]
        else:
            k, w = _timing(c.get("kernel_us")), _timing(c.get("wall_us"))
            reps = (c.get("kernel_us") or {}).get("reps") if isinstance(c.get("kernel_us"), dict) else None
            timing = ["#" + k[0], "#" + k[1], "#" + k[2], "#" + fmt(reps), "#" + w[0], "#" + w[1],
                      "#" + fmt(c.get("compile_s"), reason=_why(c, "compile_s"))]
        variant = f'<br><span class="why">variant {esc(c["variant"])}</span>' if c.get("variant") else ""
        rows.append([f"<code>{esc(c['id'])}</code>{variant}{_config_source(c)}", esc(c["impl"]),
                     shape_cell(c.get("shape")), esc(c.get("dtype") or ""), status_badge(c.get("status")),
                     *timing])
    return (f'<p class="muted">Microseconds. Kernel time: CUPTI, summed over the kernels of one call, L2 flushed '
            f"before each rep; wall time: CUDA events around the call. Median and p10\u2013p90; rel_std above "
            f"{REL_STD_FLAG:.0%} is flagged noisy.{_compile_note(run)}{_triton_note(run)}{_tuning_note(run)}</p>"
            + table(["case", "impl", "shape", "dtype", "status", "#kernel median", "#kernel p10\u2013p90",
                     "#rel_std", "#reps", "#wall median", "#wall p10\u2013p90", "#compile s"], rows))


def floor(run: Run) -> str:
    rows = []
    for c in sorted(run.cases("benchmark"), key=shape_order):
        fl, med = num(c.get("floor_us")), kernel_median(c)
        if c.get("status") == "fail":
            frac = '<span class="flag">gate failed</span>'
        elif fl is not None and med is not None and math.isfinite(fl):
            share = fl / med
            frac = f'<span class="bar" style="width:{min(share, 1.0) * 120:.0f}px"></span> {share:.1%}'
        else:
            frac = dash(_why(c, "floor_us"))
        rows.append([f"<code>{esc(c['id'])}</code>", esc(c["impl"]), shape_cell(c.get("shape")),
                     "#" + fmt(c.get("floor_us"), "us", reason=_why(c, "floor_us")),
                     "#" + (fmt(med, "us") if c.get("status") != "fail" else dash()), frac])
    if not rows:
        return "<p>No benchmark cases: nothing to compare with the floor.</p>"
    return ('<p class="muted">floor_us: the analytic lower bound (compulsory bytes at the measured copy bandwidth, '
            "FLOPs at the measured matmul rate); fraction = floor / kernel median (100% would be at the floor).</p>"
            + table(["case", "impl", "shape", "#floor us", "#kernel median us", "fraction of the floor"], rows))


def _tolerance_note(c: Case, notes: dict[str, int]) -> str:
    tol = c.get("tolerance")
    if not isinstance(tol, dict) or not tol:
        return dash(_why(c, "tolerance"))
    refs = []
    for qty in sorted(tol):
        row = tol[qty] if isinstance(tol[qty], dict) else {}
        text = (f"{qty}: rel_l2 \u2264 {fmt(row.get('rel_l2'), '.1e')}, max_abs/peak \u2264 "
                f"{fmt(row.get('max_abs'), '.1e')}. {esc(row.get('reason') or 'no reason given')}")
        refs.append(notes.setdefault(text, len(notes) + 1))
    return " ".join(f"[{n}]" for n in refs)


def _error_table(cases: list[Case]) -> str:
    notes: dict[str, int] = {}
    rows = []
    for c in _cases_sorted(cases):
        rows.append([f"<code>{esc(c['id'])}</code>", esc(c["impl"]), esc(c.get("dtype") or ""),
                     esc(c.get("regime") or ""), shape_cell(c.get("shape")), status_badge(c.get("status")),
                     *("#" + fmt(c.get(f), ".2e", reason=_why(c, f)) for f in
                       ("y_rel_l2", "y_max_abs", "state_rel_l2", "state_max_abs")),
                     "#" + fmt(c.get("nonfinite"), reason=_why(c, "nonfinite")),
                     _tolerance_note(c, notes), esc(c.get("reason") or "")])
    legend = "".join(f"<li>[{n}] {text}</li>" for text, n in notes.items())
    return (table(["case", "impl", "dtype", "regime", "shape", "status", "#y rel_l2", "#y max_abs", "#state rel_l2",
                   "#state max_abs", "#nonfinite", "tolerance", "reason"], rows)
            + (f'<p class="muted">Tolerances (max_abs is bounded relative to the output\'s peak magnitude):</p>'
               f'<ol class="why" style="list-style:none;padding-left:0">{legend}</ol>' if legend else ""))


def stability(run: Run) -> str:
    if "stability" not in run.files:
        return "<p>The stability suite did not run.</p>"
    cases = run.cases("stability")
    regimes = sorted({str(c.get("regime")) for c in cases})
    impls = sorted({str(c["impl"]) for c in cases})
    head = "".join(f"<th>{esc(i)}</th>" for i in impls)
    rows = []
    for regime in regimes:
        cells = [f"<th>{esc(regime)}</th>"]
        for impl in impls:
            group = [c for c in cases if str(c.get("regime")) == regime and str(c["impl"]) == impl]
            if not group:
                cells.append('<td class="muted">no case</td>')
                continue
            worst = min((str(c.get("status")) for c in group),
                        key=lambda s: STATUS_ORDER.index(s) if s in STATUS_ORDER else -1)
            errs = [x for c in group if (x := num(c.get("y_rel_l2"))) is not None]
            bad = sum(int(n) for c in group if (n := num(c.get("nonfinite"))) is not None and math.isfinite(n))
            worst_err = max(errs, key=lambda x: (math.isnan(x), x)) if errs else None
            cells.append(f'<td style="background:{GRID_COLOURS.get(worst, "#fbefff")}">{status_badge(worst)}'
                         f"<br>y rel_l2 {fmt(worst_err, '.1e')} / nonfinite {bad}"
                         f"<br><span class=\"why\">{len(group)} case{'s' * (len(group) != 1)}</span></td>")
        rows.append(f"<tr>{''.join(cells)}</tr>")
    grid = f'<table class="grid"><thead><tr><th>regime</th>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
    return (f'<p class="muted">Each cell: the worst status of its cases, the largest y rel_l2 and the total count '
            f"of non-finite outputs. Every case follows.</p>{grid}{_error_table(cases)}")


def correctness(run: Run) -> str:
    if "correctness" not in run.files:
        return "<p>The correctness suite did not run.</p>"
    return _error_table(run.cases("correctness"))


def checks(run: Run) -> str:
    rows = []
    for suite in ("compile", "reference"):
        for c in _cases_sorted(run.cases(suite)):
            rows.append([esc(suite), f"<code>{esc(c['id'])}</code>", esc(c["impl"]), status_badge(c.get("status")),
                         "#" + fmt(c.get("compile_s"), reason=_why(c, "compile_s")),
                         "#" + fmt(c.get("y_rel_l2"), ".2e", reason=_why(c, "y_rel_l2")), esc(c.get("reason") or "")])
    if not rows:
        return "<p>Neither the compile check nor the reference suite ran.</p>"
    return table(["suite", "case", "impl", "status", "#compile s", "#y rel_l2", "reason"], rows)


def not_run(run: Run) -> str:
    missing = "".join(f"<li>suite <b>{esc(s)}</b>: did not run (no raw/{esc(s)}.json in this run)</li>"
                      for s in run.missing)
    rows = [[esc(s), f"<code>{esc(c['id'])}</code>", esc(c["impl"]), status_badge(c.get("status")),
             esc(c.get("reason") or "no reason given")]
            for s in run.files for c in _cases_sorted(run.cases(s)) if c.get("status") in ("not-run", "unsupported")]
    return ((f"<ul>{missing}</ul>" if missing else "<p>Every suite ran.</p>")
            + (table(["suite", "case", "impl", "status", "reason"], rows) if rows
               else "<p>No case was recorded as not-run or unsupported.</p>"))


def ablation(run: Run) -> str:
    variants = [(s, c) for s in run.files for c in run.cases(s) if c.get("variant")]
    if not variants:
        return "<p>No optimization ablation in this run (no case has a variant field).</p>"
    points = speedup_points(run.cases("benchmark"))
    rows = []
    for suite, c in sorted(variants, key=lambda sc: (shape_order(sc[1]), sc[0])):
        key = tuple((c.get("shape") or {}).get(k) for k in HEADLINE) + (c.get("dtype"),)
        base = points.get(key, {}).get("triton")
        ratio, why = speedup({"triton": base, "v": c} if base else {}, "v")
        k = _timing(c.get("kernel_us")) if c.get("status") != "fail" else (dash(), dash(), dash())
        rows.append([f"<code>{esc(c['id'])}</code>", esc(suite), esc(c["impl"]), esc(c["variant"]),
                     shape_cell(c.get("shape")), status_badge(c.get("status")), "#" + k[0], "#" + k[1],
                     "#" + (_x(ratio) if ratio is not None else dash(why)), esc(c.get("reason") or "")])
    return table(["case", "suite", "impl", "variant", "shape", "status", "#kernel median us", "#p10\u2013p90",
                  "#over Triton", "reason"], rows)


SECTIONS: tuple[tuple[str, str, Callable[[Run], str]], ...] = (
    ("verdict", "Verdict", verdict),
    ("environment", "Environment and provenance", environment),
    ("speedup", "Speedup over Triton", chart),
    ("times", "Kernel and wall times", times),
    ("floor", "Fraction of the floor", floor),
    ("stability", "Stability matrix", stability),
    ("correctness", "Correctness against float64", correctness),
    ("checks", "Compile and reference checks", checks),
    ("not-run", "What did not run, and why", not_run),
    ("ablation", "Optimization ablation", ablation),
)
