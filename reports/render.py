"""Render a run's results files into a self-contained HTML report, and the index of every report.

    python -m reports.render [RUN_DIR] [--out DIR] [--overwrite]

RUN_DIR holds ``raw/<suite>.json`` for any subset of the suites (default: the newest run under
``reports/<suite_version>/``). The report goes to ``reports/<version>/index.html`` with the raw files
copied beside it, unchanged, in ``raw/`` (a run under ``reports/published/`` is rendered in place).
An existing report is never replaced without ``--overwrite``. Then ``index.html`` of the reports root
(the output's parent, or its grandparent for a published run) is regenerated. The page has no script
and fetches nothing; it depends only on the results files (no rendering time is written), so the same
inputs give the same bytes. The renderer only reads results; it never runs a suite.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from reports.errata import ERRATA_FILE
from reports.markup import ReportError, render, write_text_atomic
from reports.runs import HEADLINE, PEERS, Run, load_run, speedup, speedup_points
from reports.sections import PEER_NAMES, SECTIONS, header
from validation.provenance import ROOT, suite_version

__all__ = ["default_out", "main", "newest_run", "render_html", "render_run", "write_index"]

REPORTS = ROOT / "reports"


def render_html(run: Run) -> str:
    """The run's page: ``templates/report.html`` filled with each section's values."""
    return render("report.html", title=f"SSD report {run.version}", head=header(run),
                  nav=[(sid, title) for sid, title, _ in SECTIONS], s={sid: build(run) for sid, _, build in SECTIONS})


def default_out(run: Run) -> Path:
    if run.directory.resolve().parent.name == "published":
        return run.directory
    return REPORTS / run.version


def index_root(out: Path) -> Path:
    return out.parent.parent if out.parent.name == "published" else out.parent


def render_run(run_dir: Path, out: Path | None = None, *, overwrite: bool = False) -> Path:
    """Write ``<out>/index.html`` and ``<out>/raw/*.json`` for one run; return the HTML's path."""
    run = load_run(run_dir)
    out = out or default_out(run)
    target = out / "index.html"
    if target.exists() and not overwrite:
        raise FileExistsError(f"{target} exists; pass --overwrite to replace it")
    in_place = out.resolve() == run.directory.resolve()
    if not in_place:
        for suite, data in run.raw.items():
            copy = out / "raw" / f"{suite}.json"
            if copy.exists() and copy.read_bytes() != data and not overwrite:
                raise FileExistsError(f"{copy} exists with other content; pass --overwrite to replace it")
    html = render_html(run)
    if not in_place:
        for suite, data in run.raw.items():
            write_text_atomic(out / "raw" / f"{suite}.json", data, overwrite=True)
        errata = run.directory / ERRATA_FILE
        if errata.is_file():  # corrections travel with the data they correct
            write_text_atomic(out / ERRATA_FILE, errata.read_bytes(), overwrite=True)
    write_text_atomic(target, html, overwrite=overwrite)
    return target


def newest_run(version: str | None = None) -> Path:
    """The newest run directory (by run id) under ``reports/<suite_version>/`` that has results files."""
    base = REPORTS / (version or suite_version())
    runs = sorted(d for d in base.glob("*") if d.is_dir() and any((d / "raw").glob("*.json"))) if base.is_dir() else []
    if not runs:
        raise ReportError(f"{base}: no run with results files (expected {base}/<run_id>/raw/<suite>.json); "
                          f"run a suite first, or name a run directory")
    return runs[-1]


def _headline(run: Run) -> list[float | None]:
    points = speedup_points(run.cases("benchmark"))
    head = [p for k, p in points.items() if dict(zip(HEADLINE, k[:-1], strict=True)) == HEADLINE]
    return [speedup(head[0], impl)[0] if head else None for impl in PEERS]


def write_index(root: Path) -> Path:
    """``<root>/index.html``: every report directory (``<root>/<version>/raw``, ``<root>/published/<version>/raw``)
    with its headline numbers and errata. Regenerated each time (replaced atomically)."""
    dirs = sorted(d for d in root.glob("*") if (d / "raw").is_dir())
    dirs += sorted(d for d in (root / "published").glob("*") if (d / "raw").is_dir())
    rows = []
    for d in dirs:
        run = load_run(d)
        gpu, why = run.gpu()
        rows.append({"rel": d.relative_to(root).as_posix(), "rendered": (d / "index.html").exists(),
                     "version": run.version, "gpu": gpu, "gpu_why": why, "created": run.created,
                     "counts": run.status_counts(), "headline": _headline(run), "missing": run.missing,
                     "errata": run.errata})
    html = render("index.html", title="SSD reports", rows=rows, peers=[PEER_NAMES[i] for i in PEERS],
                  statuses=("pass", "fail", "crashed", "unsupported", "not-run"))
    return write_text_atomic(root / "index.html", html, overwrite=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reports.render", description=__doc__.split("\n")[0])
    parser.add_argument("run_dir", nargs="?", type=Path,
                        help="a run directory with raw/<suite>.json (default: the newest under reports/<version>/)")
    parser.add_argument("--out", type=Path, help="where the report goes (default: reports/<version>/)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing report of the same version")
    args = parser.parse_args(argv)
    try:
        run_dir = args.run_dir or newest_run()
        target = render_run(run_dir, args.out, overwrite=args.overwrite)
        index = write_index(index_root(target.parent))
    except (ReportError, FileExistsError) as err:
        print(f"report: {err}", file=sys.stderr)
        return 2
    print(f"report: {target}\nindex: {index}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

