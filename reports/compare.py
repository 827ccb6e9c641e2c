"""Compare two runs and flag what changed by more than the measured noise.

    python -m reports.compare RUN_A RUN_B [--overwrite]

Each argument is a run or report directory with ``raw/<suite>.json``. The page is written beside the
newer of the two (by ``created``), as ``<newer>/compare-<older version>.html``, never over an existing
file without ``--overwrite``. Flagged: every status change, every case present on one side only, and
every kernel-time change that lies outside BOTH runs' p10-p90 bands (the new median outside the old
band and the old median outside the new one). A record without p10/p90 uses median x (1 +- rel_std);
with neither, the change is shown but not judged ("noise unknown").
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from reports.markup import ReportError, render, write_text_atomic
from reports.runs import Case, Run, command, kernel_median, load_run
from validation.schema import utc

__all__ = ["compare_html", "kernel_change", "main", "write_compare"]


def _band(case: Case) -> tuple[float, float] | None:
    stats = case.measured.get("kernel_us")
    if not isinstance(stats, dict):
        return None
    p10, p90 = stats.get("p10"), stats.get("p90")
    if isinstance(p10, int | float) and isinstance(p90, int | float) and not isinstance(p10, bool):
        return float(p10), float(p90)
    med, rel = kernel_median(case), stats.get("rel_std")
    if med is not None and isinstance(rel, int | float) and not isinstance(rel, bool):
        return med * (1 - rel), med * (1 + rel)
    return None


def kernel_change(old: Case, new: Case) -> tuple[float | None, bool, str]:
    """(new/old kernel median, flagged, note): flagged only when outside both runs' noise bands."""
    a, b = kernel_median(old), kernel_median(new)
    if a is None or b is None:
        return None, False, "no kernel time on both sides"
    band_a, band_b = _band(old), _band(new)
    if band_a is None or band_b is None:
        return b / a, False, "noise unknown (no p10/p90 or rel_std)"
    outside = not (band_a[0] <= b <= band_a[1]) and not (band_b[0] <= a <= band_b[1])
    return b / a, outside, "outside both p10\u2013p90 bands" if outside else "within noise"


def compare_html(old: Run, new: Run) -> str:
    rows, flagged = [], 0
    for suite in sorted(set(old.files) | set(new.files)):
        a_cases = {c.id: c for c in old.cases(suite)}
        b_cases = {c.id: c for c in new.cases(suite)}
        for cid in sorted(set(a_cases) | set(b_cases)):
            a, b = a_cases.get(cid), b_cases.get(cid)
            notes = []
            if a is None or b is None:
                notes.append("only in the " + ("newer" if a is None else "older") + " run")
                ratio, time_flag = None, False
            else:
                if a.status != b.status:
                    notes.append(f"status {a.status} \u2192 {b.status}")
                ratio, time_flag, note = kernel_change(a, b)
                if ratio is not None:
                    notes.append(f"kernel time {note}")
            flag = bool(a is None or b is None or a.status != b.status or time_flag)
            flagged += flag
            shown_a, shown_b = (c.as_dict() if c is not None else None for c in (a, b))  # as the template reads them
            rows.append({"flag": flag, "suite": suite, "id": cid, "one": shown_b or shown_a, "a": shown_a, "b": shown_b,
                         "a_us": kernel_median(a) if a else None, "b_us": kernel_median(b) if b else None,
                         "ratio": ratio, "notes": "; ".join(notes)})
    rows.sort(key=lambda r: (not r["flag"], r["suite"], r["id"]))
    gpus = [run.gpu()[0] or "GPU not recorded" for run in (old, new)]
    return render("compare.html", title=f"SSD comparison {old.version} vs {new.version}", old=old, new=new,
                  gpus=gpus, rows=[r for r in rows if r["flag"]], quiet=[r for r in rows if not r["flag"]],
                  flagged=flagged, total=len(rows))


def write_compare(dir_a: Path, dir_b: Path, *, overwrite: bool = False) -> Path:
    # by time, not by text: 2026-12-01T10:00+09:00 is before 2026-12-01T05:00+00:00
    runs = sorted((load_run(dir_a), load_run(dir_b)), key=lambda r: (utc(r.created), r.version))
    old, new = runs
    if old.version == new.version:
        raise ReportError(f"{dir_a} and {dir_b} are the same version ({old.version}); nothing to compare")
    return write_text_atomic(new.directory / f"compare-{old.version}.html", compare_html(old, new),
                             overwrite=overwrite)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reports.compare", description=__doc__.split("\n")[0])
    parser.add_argument("run_a", type=Path)
    parser.add_argument("run_b", type=Path)
    parser.add_argument("--overwrite", action="store_true", help="replace an existing comparison page")
    args = parser.parse_args(argv)
    return command("compare", lambda: f"compare: {write_compare(args.run_a, args.run_b, overwrite=args.overwrite)}")


if __name__ == "__main__":
    sys.exit(main())
