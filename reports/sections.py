"""What each section of a run's report shows, in the order a reader needs it (``SECTIONS``). Each builder
takes a ``Run`` and returns plain values for ``templates/report.html``; no HTML is written here, and
nothing reads files or the clock, so a report depends only on its results files.

Long case lists are grouped: failures first and open, passes folded per implementation, cases that did not
run counted by reason. A note that holds for many rows (a tuning source, a tolerance) is said once.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from reports.errata import corrected
from reports.markup import IMPL_NAMES, STATUS_ORDER, fmt, impl_name, num, seqlen_label, shape_text
from reports.runs import (
    HEADLINE,
    Case,
    Run,
    kernel_median,
    order,
    published_ratios,
    shape_order,
    speedup,
    speedup_points,
)
from reports.svg import IMPL_COLORS, dstate_color, speedup_chart, time_chart
from validation.bench.clocks import slowdown, tally
from validation.bench.published import PUBLISHED_B300
from validation.bench.tilegym_decisions import TUNE_COMMAND, TUNE_EFFECT, UNTUNED_WHY, untuned_count

__all__ = ["IMPL_NAMES", "PEER_NAMES", "REL_STD_FLAG", "SECTIONS", "header"]

REL_STD_FLAG = 0.05  # a timing whose relative standard deviation exceeds this is flagged as noisy
PEER_NAMES = {k: IMPL_NAMES[k] for k in ("cutile", "tilegym")}
OURS = ("cutile", "reference-chunked", "reference-recurrent")  # a fail of these fails the session
# The post's claim, used when the benchmark file does not carry it (published_ratios.speedup_min/max).
CLAIM = (PUBLISHED_B300["speedup_min"], PUBLISHED_B300["speedup_max"])
CLAIM_GPU = "one B300"
# (implementation, baseline): the comparisons that matter, each its own chart and ratio column.
COMPARISONS = (("cutile", "triton"), ("tilegym", "triton"), ("cutile", "tilegym"))
COUNTED = ("pass", "fail", "crashed", "unsupported", "not-run")  # the verdict's count columns
SWEEP_FIELDS = ("batch", "nheads", "headdim", "ngroups", "chunk_size", "dtype")


def impl_order(impl: str) -> tuple[int, str]:
    known = list(IMPL_NAMES)
    return (known.index(impl) if impl in known else len(known), impl)


def _why(case: Case | None, key: str) -> str | None:
    reasons = case.measured.get("null_reasons") if case is not None else None
    return reasons.get(key) if isinstance(reasons, dict) else None


def _shown(case: Case | None) -> dict[str, Any] | None:
    """A case as the templates read it: as its file holds it."""
    return case.as_dict() if case is not None else None


def _claim(run: Run) -> tuple[float, float, str]:
    bench = run.files.get("benchmark")
    data = bench.extra.get("published_ratios") if bench is not None else None
    if isinstance(data, dict) and num(data.get("speedup_min")) and num(data.get("speedup_max")):
        return num(data["speedup_min"]), num(data["speedup_max"]), str(data.get("gpu") or CLAIM_GPU)  # type: ignore
    return (*CLAIM, CLAIM_GPU)


def _main_sweep(points: dict[tuple[object, ...], dict[str, Case]]) -> dict[tuple[int, int], dict[str, Case]]:
    """The points of the sweep (the shape every point shares but seqlen and dstate), by (dstate, seqlen)."""
    common = Counter(key[:1] + key[2:5] + key[6:] for key in points)
    if not common:
        return {}
    sweep = max(sorted(common, key=str), key=lambda k: common[k])
    return {(int(k[5]), int(k[1])): p for k, p in points.items()  # type: ignore[arg-type]
            if k[:1] + k[2:5] + k[6:] == sweep and isinstance(k[1], int) and isinstance(k[5], int)}


def _sweep_text(points: dict[tuple[object, ...], dict[str, Case]]) -> str:
    common = Counter(key[:1] + key[2:5] + key[6:] for key in points)
    if not common:
        return "no shape"
    sweep = max(sorted(common, key=str), key=lambda k: common[k])
    return ", ".join(f"{k} {v}" for k, v in zip(SWEEP_FIELDS, sweep, strict=True))


def _is_headline(key: tuple[object, ...]) -> bool:
    return dict(zip(HEADLINE, key[:-1], strict=True)) == HEADLINE


def _grade(ratio: float | None, claim_lo: float) -> str:
    return "" if ratio is None else "good" if ratio >= claim_lo else "ok" if ratio >= 1.0 else "bad"


# -- the header ------------------------------------------------------------------------------------------------


def header(run: Run) -> dict[str, Any]:
    return {"version": run.version, "directory": run.directory.name, "suites": list(run.files),
            "missing": run.missing, "errata": run.errata}


# -- verdict ---------------------------------------------------------------------------------------------------


@dataclass
class ImplVerdict:
    impl: str
    answer: str  # reproduces / reproduces where measured / in part / does not reproduce / no verdict
    grade: str
    detail: str
    headline: float | None = None
    headline_why: str | None = None
    lo: float | None = None
    hi: float | None = None
    worst: str = ""
    n: int = 0


def _impl_verdict(impl: str, points: dict[tuple[object, ...], dict[str, Case]], claim_lo: float) -> ImplVerdict:
    ratios = {k: r for k, p in points.items() if (r := speedup(p, impl)[0]) is not None}
    failed = sum(impl in p and p[impl].status in ("fail", "crashed") for p in points.values())
    gate = f"; {failed} point(s) failed the correctness gate" if failed else ""
    if not ratios:
        why = next((w for p in points.values() if (w := speedup(p, impl)[1])), "no point")
        return ImplVerdict(impl, "no verdict", "", f"no speedup measured ({why}){gate}")
    n = len(ratios)
    claimed = sum(r >= claim_lo for r in ratios.values())
    faster = sum(r > 1.0 for r in ratios.values())
    # Points of the sweep without a ratio (a side not run, or not through the gate) are counted, never dropped; where
    # any is missing, a claim met at every other point "reproduces where measured", graded "ok", not "good".
    missing = len(points) - n
    gap = f"; {missing} of the {len(points)} points without a ratio" if missing else ""
    if claimed == n and not failed:
        answer, grade = ("reproduces where measured", "ok") if missing else ("reproduces", "good")
        detail = f"at least {claim_lo}x at all {n} points with a ratio{gap}" if missing else (
            f"at least {claim_lo}x at all {n} points")
    elif claimed:
        answer, grade, detail = "in part", "ok", f"at least {claim_lo}x at {claimed} of {n} points{gap}"
    else:
        answer, grade = "does not reproduce", "bad"
        detail = (f"faster than Triton at {faster} of {n} points, never by {claim_lo}x{gap}" if faster
                  else f"slower than Triton at every point{gap}")
    head = [speedup(p, impl) for k, p in points.items() if _is_headline(k)]
    worst_key = min(ratios, key=lambda k: (ratios[k], str(k)))
    return ImplVerdict(impl, answer, grade, detail + gate,
                       headline=head[0][0] if head else None,
                       headline_why=(head[0][1] if head else "the headline shape was not measured"),
                       lo=min(ratios.values()), hi=max(ratios.values()),
                       worst=f"{ratios[worst_key]:.2f}x at dstate {worst_key[5]}, {seqlen_label(worst_key[1])} tokens",
                       n=n)


def _bands(seqlens: list[int]) -> list[list[int]]:
    """Seqlens in three bands of (nearly) equal size, fewer when there are fewer lengths."""
    seqlens = sorted(set(seqlens))
    k = min(3, len(seqlens))
    size = math.ceil(len(seqlens) / k) if k else 0
    return [seqlens[i:i + size] for i in range(0, len(seqlens), size)] if size else []


def _trend(impl: str, sweep: dict[tuple[int, int], dict[str, Case]], claim_lo: float, base: str = "triton"
           ) -> dict[str, Any] | None:
    bands = _bands([s for _, s in sweep])
    dstates = sorted({d for d, _ in sweep})
    rows = []
    for dstate in dstates:
        cells = []
        for band in bands:
            rs = [r for s in band if (p := sweep.get((dstate, s))) and (r := speedup(p, impl, base)[0]) is not None]
            mean = math.exp(sum(math.log(r) for r in rs) / len(rs)) if rs else None
            tip = f"{min(rs):.2f}x\u2013{max(rs):.2f}x over {len(rs)} point(s)" if rs else "no ratio"
            cells.append({"ratio": mean, "grade": _grade(mean, claim_lo), "tip": tip})
        rows.append({"dstate": dstate, "cells": cells})
    if not any(c["ratio"] for r in rows for c in r["cells"]):
        return None
    labels = [seqlen_label(b[0]) if len(b) == 1 else f"{seqlen_label(b[0])}\u2013{seqlen_label(b[-1])}"
              for b in bands]
    return {"impl": impl, "name": impl_name(impl), "bands": labels, "rows": rows}


def _status_rows(run: Run) -> list[dict[str, Any]]:
    rows = []
    for impl, counts in sorted(run.counts_by_impl().items(), key=lambda kv: impl_order(kv[0])):
        where = Counter()
        for suite in run.files:
            for c in run.cases(suite):
                if c.impl == impl and c.status in ("fail", "crashed"):
                    where[(suite, c.status)] += 1
        rows.append({"impl": impl, "name": impl_name(impl), "ours": impl in OURS, "counts": counts,
                     "where": [{"suite": s, "status": st, "n": n} for (s, st), n in sorted(where.items())]})
    return rows


def verdict(run: Run) -> dict[str, Any]:
    gpu, gpu_why = run.gpu()
    claim_lo, claim_hi, claim_gpu = _claim(run)
    status = _status_rows(run)
    ours_bad = sum(r["counts"]["fail"] + r["counts"]["crashed"] for r in status if r["ours"])
    peers_bad = [r for r in status if not r["ours"] and r["counts"]["fail"] + r["counts"]["crashed"]]
    out: dict[str, Any] = {"gpu": gpu, "gpu_why": gpu_why, "claim": (claim_lo, claim_hi), "claim_gpu": claim_gpu,
                           "status": status, "statuses": COUNTED, "ours_bad": ours_bad,
                           "peers_bad": peers_bad, "impls": [], "trends": []}
    if gpu is None:
        not_run = sum(r["counts"]["not-run"] for r in status)
        ran = [(r["name"], n) for r in status if (n := r["counts"]["pass"] + r["counts"]["fail"]
                                                  + r["counts"]["crashed"])]
        return {**out, "kind": "no-gpu", "not_run": not_run, "ran": ran}
    if "benchmark" not in run.files:
        return {**out, "kind": "no-benchmark"}
    points = speedup_points(run.cases("benchmark"))
    sweep = _main_sweep(points)
    out["impls"] = [_impl_verdict(impl, points, claim_lo) for impl in PEER_NAMES]
    out["trends"] = [t for impl in PEER_NAMES if (t := _trend(impl, sweep, claim_lo))]
    out["tilegym_untuned"] = _tilegym_untuned(run)
    return {**out, "kind": "gpu"}


def _tilegym_untuned(run: Run) -> dict[str, Any] | None:
    """How many timed TileGym cases ran a configuration no autotune chose (``untuned_count``), if any: its verdict and
    every ratio over it then stand for an untuned TileGym."""
    untuned, timed = untuned_count(run.cases("benchmark"), run.files["benchmark"].extra.get("tilegym_tuning"))
    return ({"n": untuned, "of": timed, "why": UNTUNED_WHY, "command": TUNE_COMMAND, "effect": TUNE_EFFECT}
            if untuned else None)


# -- environment -----------------------------------------------------------------------------------------------

SUMMARY_FIELDS = ("gpu_name", "driver", "cuda_runtime", "torch", "triton", "cuda_tile", "tileiras_version", "tilegym",
                  "mamba_ssm", "git_commit", "container_image")


def environment(run: Run) -> dict[str, Any]:
    envs = run.environment()
    keys = sorted({k for e in envs.values() for k in e if k != "null_reasons"})
    rows = []
    for key in keys:
        values = {s: e.get(key) for s, e in envs.items() if key in e}
        shown = {s: fmt(v, reason=(envs[s].get("null_reasons") or {}).get(key) if v is None else None)
                 for s, v in values.items()}
        same = len({json.dumps(v, sort_keys=True) for v in values.values()}) == 1
        rows.append({"key": key, "same": same, "value": next(iter(shown.values())), "per_suite": shown})
    summary = [r for k in SUMMARY_FIELDS for r in rows if r["key"] == k]
    files = [{"suite": s, "version": f.suite_version, "created": f.created,
              "finished": f.finished, "cases": len(run.cases(s)),
              "summary": " ".join(f"{k}={v}" for k, v in sorted((f.summary or {}).items()))}
             for s, f in run.files.items()]
    return {"rows": rows, "summary": summary, "files": files}


# -- the speedup charts ----------------------------------------------------------------------------------------


def charts(run: Run) -> dict[str, Any]:
    if "benchmark" not in run.files:
        return {"charts": [], "why": "the benchmark did not run"}
    points = speedup_points(run.cases("benchmark"))
    sweep = _main_sweep(points)
    published, source = published_ratios(run)
    claim_lo, claim_hi, claim_gpu = _claim(run)
    out = []
    for impl, base in COMPARISONS:
        series: dict[int, list[tuple[int, float]]] = {}
        for (dstate, seqlen), point in sweep.items():
            ratio = speedup(point, impl, base)[0]
            if ratio is not None:
                series.setdefault(dstate, []).append((seqlen, ratio))
        against_triton = base == "triton"
        pub: dict[int, list[tuple[int, float]]] = {}
        if against_triton and impl == "tilegym":  # the post's per-point ratios are its cuTile code's
            for (seqlen, dstate), ratio in published.items():
                pub.setdefault(dstate, []).append((seqlen, ratio))
        title = f"{impl_name(impl)} over {impl_name(base)}"
        out.append(speedup_chart(title, series, y_title="ratio of kernel times",
                                 band=(claim_lo, claim_hi) if against_triton else None, published=pub).svg())
    if not any(speedup(p, i, b)[0] for p in sweep.values() for i, b in COMPARISONS):
        return {"charts": [], "why": "no point has a passing pair to compare"}
    dstates = sorted({d for d, _ in sweep})
    return {"charts": out, "why": "", "legend": [(dstate_color(d, dstates), f"dstate {d}") for d in dstates],
            "claim": (claim_lo, claim_hi), "claim_gpu": claim_gpu, "sweep": _sweep_text(points),
            "published": source if published else ""}


# -- kernel and wall times -------------------------------------------------------------------------------------


def _timing(stats: object) -> dict[str, Any]:
    """A case's kernel_us or wall_us as the tables show it."""
    if not isinstance(stats, dict):
        return {"median": None, "stats": None, "noisy": False, "rel": None, "reps": None}
    rel = num(stats.get("rel_std"))
    return {"median": stats.get("median"), "stats": stats, "noisy": rel is not None and rel > REL_STD_FLAG,
            "rel": stats.get("rel_std"), "reps": stats.get("reps")}


def _notes(run: Run) -> list[str]:
    bench = run.files["benchmark"].extra
    notes = []
    phase = bench.get("compile_phase")
    if isinstance(phase, dict):
        failed = phase.get("failed") or {}
        notes.append(f"Compile phase: {phase.get('first_calls')} of {phase.get('of')} first calls in "
                     f"{phase.get('jobs')} processes, {num(phase.get('wall_s')) or 0:.0f} s"
                     f"{f', {len(failed)} failed there' if failed else ''}; {phase.get('what')}.")
    else:
        notes.append("Compile time is the first call of the timed process (compilation and autotune).")
    timing = bench.get("timing")
    notes.append(f"Timing: {timing.get('mode')}: {timing.get('what')}." if isinstance(timing, dict) else
                 "Timing: at each point one implementation after another, each run's reps together (the run "
                 "predates interleaved timing).")
    triton = bench.get("triton_tuning")
    if isinstance(triton, dict):
        notes.append(f"Triton's autotune in this run: {triton.get('mode')}: {triton.get('what')}.")
    tilegym = bench.get("tilegym_tuning")
    if isinstance(tilegym, dict):  # since the tuning store; earlier runs wrote one sentence
        tilegym = f"{tilegym.get('mode')}: {tilegym.get('what')}"
    if tilegym:
        notes.append(f"TileGym's tuning in this run: {tilegym}.")
    notes.append(_clock_note(run.cases("benchmark")))
    return notes


def _clock_note(cases: list[Case]) -> str:
    """One sentence on the GPU's clock over the run's timed cases (``gpu_clocks``)."""
    timed = [c for c in cases if kernel_median(c) is not None]
    t = tally(c.measured.get("gpu_clocks") for c in timed)
    if not t.read:
        return ("GPU clocks: not recorded in this run"
                + (f" ({t.unavailable[0]})" if t.unavailable else " (the run predates them)")
                + "; a ratio's two times may have run at different clocks.")
    lowest = f", lowest SM clock {t.lowest_mhz:.0f} MHz" if t.lowest_mhz is not None else ""
    return (f"GPU clocks (NVML, sampled while each case was timed): {t.read} of {len(timed)} timed cases "
            f"recorded{lowest}; {t.held} case(s) ran with the clock held down, flagged 'clock' below (their ratios "
            "hold at that clock only).")


def _config_notes(run: Run) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Once per run: where TileGym's configs came from and the length Triton tuned at (errata applied);
    and per case id the note's marker."""
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    marks: dict[str, str] = {}
    for c in sorted(run.cases("benchmark"), key=shape_order):
        key = None
        tuning = c.measured.get("tilegym_tuning")
        if "triton_tuned_at" in c.measured:
            value, erratum = corrected(run.errata, "benchmark", c.as_dict(), "triton_tuned_at")
            text = f"Triton tuned at {value} tokens" if isinstance(value, int) else "Triton's tuning not recorded"
            if erratum:
                text += f" (erratum {erratum.number}; the records say {c.measured.get('triton_tuned_at')})"
            key = ("triton", text)
        elif isinstance(tuning, list) and tuning:
            sources = sorted({str(d.get("source")) for d in tuning if isinstance(d, dict)})
            key = ("tilegym", "TileGym config: " + "; ".join(sources))
        if key is None:
            continue
        group = groups.setdefault(key, {"mark": "", "text": key[1], "cases": 0, "dstates": set()})
        group["cases"] += 1
        group["dstates"].add((c.shape or {}).get("dstate"))
        marks[c.id] = key[1]
    notes = []
    for i, group in enumerate(groups.values()):
        group["mark"] = chr(ord("a") + i) if i < 26 else str(i)
        group["dstates"] = ", ".join(str(d) for d in sorted(group["dstates"], key=str))
        notes.append(group)
    by_text = {g["text"]: g["mark"] for g in notes}
    return notes, {cid: by_text[text] for cid, text in marks.items()}


def times(run: Run) -> dict[str, Any]:
    if "benchmark" not in run.files:
        return {"ran": False}
    cases = run.cases("benchmark")
    if not any(kernel_median(c) for c in cases):
        reasons = Counter(f"{c.status}: {c.reason or 'no reason given'}" for c in cases)
        return {"ran": True, "timed": False, "n": len(cases), "reasons": sorted(reasons.items(), key=lambda kv: -kv[1])}
    points = speedup_points(cases)
    sweep = _main_sweep(points)
    impls = sorted({c.impl for c in cases if not c.variant}, key=impl_order)
    comparisons = [(i, b) for i, b in COMPARISONS if i in impls and b in impls]
    rows = []
    for key, point in sorted(points.items(), key=lambda kv: (kv[0][5] if isinstance(kv[0][5], int) else 0,
                                                             order(kv[0]))):
        in_sweep = isinstance(key[1], int) and isinstance(key[5], int) and (key[5], key[1]) in sweep
        label = (f"n{key[5]} L{seqlen_label(key[1])}" if in_sweep
                 else shape_text(dict(zip(HEADLINE, key[:-1], strict=True))) + f" {key[-1]}")
        cells = []
        for impl in impls:
            c = point.get(impl)
            cells.append({"case": _shown(c), "status": c.status if c else None,
                          "slow": slowdown(c.measured.get("gpu_clocks")) if c else None,
                          **_timing(c.measured.get("kernel_us") if c else None)})
        ratios = [speedup(point, i, b)[0] for i, b in comparisons]
        rows.append({"label": label, "headline": _is_headline(key), "cells": cells, "ratios": ratios})
    notes, marks = _config_notes(run)
    detail = []
    for c in sorted(cases, key=shape_order):
        k, w = _timing(c.measured.get("kernel_us")), _timing(c.measured.get("wall_us"))
        detail.append({"case": _shown(c), "kernel": k, "wall": w, "mark": marks.get(c.id, ""),
                       "compile_why": _why(c, "compile_s"), "clock": _clock_text(c.measured.get("gpu_clocks"))})
    small = []
    for dstate in sorted({d for d, _ in sweep}):
        series = {impl: [(s, kernel_median(p[impl])) for (d, s), p in sweep.items()
                         if d == dstate and impl in p and p[impl].status == "pass"
                         and kernel_median(p[impl]) is not None] for impl in impls}
        small.append(time_chart(f"dstate {dstate}", {i: v for i, v in series.items() if v},  # type: ignore[misc]
                                IMPL_NAMES).svg())
    return {"ran": True, "timed": True, "notes": _notes(run), "config_notes": notes, "impls": impls,
            "comparisons": comparisons, "rows": rows, "detail": detail, "charts": small,
            "scaling": _length_scaling(run.files["benchmark"].extra.get("length_scaling")),
            "impl_legend": [(IMPL_COLORS.get(i, "#1b1f24"), impl_name(i)) for i in impls],
            "sweep": _sweep_text(points), "rel_std_flag": REL_STD_FLAG}


def _length_scaling(record: object) -> dict[str, Any]:
    """The benchmark's two longest lengths timed again in the same rounds (``length_scaling``), per dstate and
    implementation: ns a token at each length and the ratio; or why there is none."""
    if not isinstance(record, dict):
        return {"rows": [], "why": "the run predates the same-rounds timing of the two longest lengths"}
    short, long = (record.get("seqlens") or [None, None])[:2]
    rows = []
    for row in record.get("rows") or []:
        per_token = row.get("ns_per_token") or {}
        rows.append({"impl": row.get("impl"), "dstate": row.get("dstate"), "short": per_token.get(str(short)),
                     "long": per_token.get(str(long)), "ratio": row.get("long_over_short"),
                     "clock": _clock_text(row.get("gpu_clocks"))})
    missing = [f"dstate {d}: {why}" for d, why in (record.get("not_measured_at") or {}).items()]
    why = "; ".join(([record["not_measured"]] if record.get("not_measured") else []) + missing) or None
    return {"rows": sorted(rows, key=lambda r: (num(r["dstate"]) or 0, impl_order(str(r["impl"])))),
            "short": seqlen_label(short) if isinstance(short, int) else short,
            "long": seqlen_label(long) if isinstance(long, int) else long, "what": record.get("what"), "why": why}


def _clock_text(record: object) -> str | None:
    """A case's ``gpu_clocks`` in one cell: the SM clock's range and any limit, or why it is unknown."""
    if not isinstance(record, dict):
        return None
    if "unavailable" in record:
        return f"not recorded: {record['unavailable']}"
    lo, hi = num(record.get("sm_mhz_min")), num(record.get("sm_mhz_max"))
    text = f"{lo:.0f}-{hi:.0f} MHz" if lo is not None and hi is not None else "?"
    slow = slowdown(record)
    return text + (f" ({slow})" if slow else "")


# -- fraction of the floor -------------------------------------------------------------------------------------


def floor(run: Run) -> dict[str, Any]:
    points = speedup_points(run.cases("benchmark"))
    if not any(kernel_median(c) for p in points.values() for c in p.values()):
        return {"impls": [], "rows": []}
    impls = sorted({i for p in points.values() for i in p}, key=impl_order)
    rows = []
    for key, point in sorted(points.items(), key=lambda kv: (kv[0][5] if isinstance(kv[0][5], int) else 0,
                                                             order(kv[0]))):
        floor_us = next((num(c.measured.get("floor_us")) for c in point.values()
                         if num(c.measured.get("floor_us")) is not None), None)
        cells = []
        for impl in impls:
            c = point.get(impl)
            med = kernel_median(c) if c else None
            fl = num(c.measured.get("floor_us")) if c else None
            share = fl / med if med and fl is not None and math.isfinite(fl) and c and c.status == "pass" else None
            cells.append({"share": share, "status": c.status if c else None, "why": _why(c, "floor_us")})
        label = (f"n{key[5]} L{seqlen_label(key[1])}" if isinstance(key[1], int)
                 else shape_text(dict(zip(HEADLINE, key[:-1], strict=True))))
        rows.append({"label": label, "floor_us": floor_us, "cells": cells, "ours": _breakdown(point.get("cutile"))})
    kernels: list[str] = []  # every kernel of ours that ran, in the order they first appear
    for row in rows:
        if row["ours"]:
            kernels += [k for k in row["ours"]["kernels"] if k not in kernels]
    return {"impls": impls, "rows": rows, "kernels": kernels,
            "breakdown": [{**r["ours"], "label": r["label"], "floor_us": r["floor_us"]} for r in rows if r["ours"]]}


def _breakdown(case: Case | None) -> dict[str, Any] | None:
    """Where our kernel time goes at one point: the median, each kernel's CUPTI median (``per_kernel_us``, named
    without its leading underscore and ``_kernel``) and the floor of the design that ran (``floor_design_us``:
    the compulsory bytes plus the intermediates it writes and reads back). None without a per-kernel time."""
    if case is None or case.status != "pass":
        return None
    per_kernel = case.measured.get("per_kernel_us")
    median = kernel_median(case)
    if not isinstance(per_kernel, dict) or not per_kernel or median is None:
        return None
    kernels = {name.strip("_").removesuffix("_kernel"): x for name, us in per_kernel.items()
               if (x := num(us)) is not None and math.isfinite(x)}
    return {"median": median, "kernels": kernels, "design_floor_us": num(case.measured.get("floor_design_us")),
            "design": case.measured.get("design")}


# -- correctness, stability, checks: grouped case lists --------------------------------------------------------


@dataclass
class CaseGroups:
    failed: list[dict[str, Any]] = field(default_factory=list)  # cases as their files hold them (_shown)
    passed: list[dict[str, Any]] = field(default_factory=list)  # {"impl", "name", "cases"}
    skipped: Counter = field(default_factory=Counter)  # status -> n
    tolerances: list[tuple[int, str]] = field(default_factory=list)
    refs: dict[str, list[int]] = field(default_factory=dict)  # case id -> tolerance notes


def _plain(value: object) -> str:
    x = num(value)
    return "\u2014" if value is None else f"{x:.1e}" if x is not None else str(value)


def _tolerance_refs(c: Case, notes: dict[str, int]) -> list[int]:
    tol = c.measured.get("tolerance")
    if not isinstance(tol, dict):
        return []
    refs = []
    for qty in sorted(tol):
        row = tol[qty] if isinstance(tol[qty], dict) else {}
        text = (f"{qty}: rel_l2 \u2264 {_plain(row.get('rel_l2'))}, max_abs/peak \u2264 "
                f"{_plain(row.get('max_abs'))}. {row.get('reason') or 'no reason given'}")
        refs.append(notes.setdefault(text, len(notes) + 1))
    return refs


def group_cases(cases: list[Case], suites: list[str] | None = None) -> CaseGroups:
    """``suites``: each case's suite, shown with it (a list of several suites' cases)."""
    groups = CaseGroups()
    notes: dict[str, int] = {}
    passed: dict[str, list[dict[str, Any]]] = {}
    failed: list[tuple[Case, dict[str, Any]]] = []
    shown = [c.as_dict() if suites is None else dict(c.as_dict(), suite=suites[i]) for i, c in enumerate(cases)]
    for i in sorted(range(len(cases)), key=lambda i: (impl_order(cases[i].impl), cases[i].id)):
        c = cases[i]
        if c.status in ("not-run", "unsupported"):
            groups.skipped[c.status] += 1
            continue
        groups.refs[c.id] = _tolerance_refs(c, notes)
        if c.status == "pass":
            passed.setdefault(c.impl, []).append(shown[i])
        else:
            failed.append((c, shown[i]))
    failed.sort(key=lambda cs: (STATUS_ORDER.index(cs[0].status) if cs[0].status in STATUS_ORDER else -1,
                                impl_order(cs[0].impl), cs[0].id))
    groups.failed = [case for _, case in failed]
    groups.passed = [{"impl": i, "name": impl_name(i), "cases": cs} for i, cs in passed.items()]
    groups.tolerances = [(n, text) for text, n in notes.items()]
    return groups


def _grid(cases: list[Case]) -> dict[str, Any]:
    regimes = sorted({str(c.regime) for c in cases})
    impls = sorted({c.impl for c in cases}, key=impl_order)
    rows = []
    for regime in regimes:
        cells = []
        for impl in impls:
            group = [c for c in cases if str(c.regime) == regime and c.impl == impl]
            if not group:
                cells.append(None)
                continue
            worst = min((c.status for c in group), key=lambda s: STATUS_ORDER.index(s) if s in STATUS_ORDER else -1)
            errs = [x for c in group if (x := num(c.measured.get("y_rel_l2"))) is not None]
            bad = sum(int(n) for c in group if (n := num(c.measured.get("nonfinite"))) is not None and math.isfinite(n))
            cells.append({"worst": worst, "n": len(group), "nonfinite": bad,
                          "err": max(errs, key=lambda x: (math.isnan(x), x)) if errs else None})
        rows.append({"regime": regime, "cells": cells})
    return {"impls": [(i, impl_name(i)) for i in impls], "rows": rows}


def stability(run: Run) -> dict[str, Any]:
    if "stability" not in run.files:
        return {"ran": False}
    cases = run.cases("stability")
    return {"ran": True, "grid": _grid(cases), "groups": group_cases(cases)}


def correctness(run: Run) -> dict[str, Any]:
    if "correctness" not in run.files:
        return {"ran": False}
    return {"ran": True, "groups": group_cases(run.cases("correctness"))}


def checks(run: Run) -> dict[str, Any]:
    suites = [s for s in ("compile", "reference") if s in run.files]
    cases = [c for s in suites for c in run.cases(s)]
    counts = {s: Counter(c.status for c in run.cases(s)) for s in suites}
    return {"suites": suites, "counts": counts,
            "groups": group_cases(cases, [s for s in suites for _ in run.cases(s)])}


# -- what did not run ------------------------------------------------------------------------------------------


def not_run(run: Run) -> dict[str, Any]:
    groups: dict[tuple[str, str, str, str], list[str]] = {}
    total = 0
    for suite in run.files:
        for c in run.cases(suite):
            total += 1
            if c.status in ("not-run", "unsupported"):
                key = (suite, c.impl, c.status, c.reason or "no reason given")
                groups.setdefault(key, []).append(c.id)
    rows = [{"suite": s, "impl": i, "name": impl_name(i), "status": st, "reason": r, "ids": sorted(ids)}
            for (s, i, st, r), ids in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))]
    return {"missing": run.missing, "rows": rows, "skipped": sum(len(r["ids"]) for r in rows), "total": total}


# -- ablation --------------------------------------------------------------------------------------------------


def ablation(run: Run) -> dict[str, Any]:
    variants = [(s, c) for s in run.files for c in run.cases(s) if c.variant]
    points = speedup_points(run.cases("benchmark"))
    rows = []
    for suite, c in sorted(variants, key=lambda sc: (shape_order(sc[1]), sc[0])):
        key = tuple((c.shape or {}).get(k) for k in HEADLINE) + (c.dtype,)
        base = points.get(key, {}).get("triton")
        ratio, why = speedup({"triton": base, "v": c} if base else {}, "v")
        # The variant against the default of ours at the same point, same run: > 1 where the variant is faster.
        ours = points.get(key, {}).get("cutile")
        own, own_why = speedup({"cutile": ours, "v": c} if ours else {}, "v", base="cutile")
        rows.append({"suite": suite, "case": _shown(c),
                     "kernel": _timing(c.measured.get("kernel_us") if c.status != "fail" else None),
                     "ratio": ratio, "why": why, "own": own, "own_why": own_why})
    return {"rows": rows}


SECTIONS: tuple[tuple[str, str, Callable[[Run], dict[str, Any]]], ...] = (
    ("verdict", "Verdict", verdict),
    ("environment", "Environment and provenance", environment),
    ("speedup", "Speedup", charts),
    ("times", "Kernel and wall times", times),
    ("floor", "Fraction of the floor", floor),
    ("stability", "Stability matrix", stability),
    ("correctness", "Correctness against float64", correctness),
    ("checks", "Compile and reference checks", checks),
    ("not-run", "What did not run, and why", not_run),
    ("ablation", "Optimization ablation", ablation),
)

