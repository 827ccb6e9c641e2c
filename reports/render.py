"""Render a run's results files into a self-contained HTML report, and the index of every report.

    python -m reports.render [RUN_DIR] [--out DIR] [--overwrite]

RUN_DIR holds ``raw/<suite>.json`` for any subset of the suites (default: the newest run under
``reports/<suite_version>/``). The report goes to ``reports/<version>/index.html`` with the raw files
copied beside it, unchanged, in ``raw/`` (a run under ``reports/published/`` is rendered in place).
An existing report is never replaced without ``--overwrite``. Then ``index.html`` of the reports root
(the output's parent, or its grandparent for a published run) is regenerated, but only where the suite owns
it: the project's ``reports/``, or a folder whose ``index.html`` this renderer made (its generator mark) or
that has none yet; any other ``index.html`` is left alone, with a line saying so. No name is taken from a
results file unchecked: the version that names the output folder is built from fields the contract
validates (validation/schema.py), and every write is checked to stay inside the output folder. The page has no script
and fetches nothing; it depends only on the results files (no rendering time is written), so the same
inputs give the same bytes. The renderer only reads results; it never runs a suite.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from reports.errata import ERRATA_FILE
from reports.markup import DASH, ReportError, render, write_text_atomic
from reports.runs import HEADLINE, PEERS, RUN_ID, SUITES, Run, command, load_run, speedup, speedup_points
from reports.sections import PEER_NAMES, SECTIONS, header
from validation.provenance import ROOT, suite_version

__all__ = ["INDEX_GENERATOR", "default_out", "index_owned", "main", "newest_run", "render_html", "render_run",
           "write_index"]

REPORTS = ROOT / "reports"
# Written into every index this renderer makes: an index.html without it is someone else's and is never replaced.
INDEX_GENERATOR = "ssd-repro reports.render index"
VERSION_NAME = re.compile(r"^[0-9A-Za-z][0-9A-Za-z.+-]{0,127}\Z")
STATUSES = ("pass", "fail", "crashed", "unsupported", "not-run")  # the index's columns


def render_html(run: Run) -> str:
    """The run's page: ``templates/report.html`` filled with each section's values."""
    return render("report.html", title=f"SSD report {run.version}", head=header(run),
                  nav=[(sid, title) for sid, title, _ in SECTIONS], s={sid: build(run) for sid, _, build in SECTIONS})


def default_out(run: Run) -> Path:
    if run.directory.resolve().parent.name == "published":
        return run.directory
    if not VERSION_NAME.match(run.version) or ".." in run.version:  # load_run builds it from checked fields
        raise ReportError(f"{run.directory}: the version {run.version!r} is not a safe folder name")
    return REPORTS / run.version


def _inside(out: Path, path: Path) -> Path:
    """``path`` if it resolves inside ``out`` (no ``..``, no link out of it), else ``ReportError``."""
    if not path.resolve().is_relative_to(out.resolve()):
        raise ReportError(f"{path}: resolves to {path.resolve()}, outside the output folder {out}; refusing to write")
    return path


def index_owned(root: Path) -> bool:
    """Whether ``<root>/index.html`` is the suite's to regenerate: root is the project's reports/, or its index is
    absent or was made by this renderer."""
    index = root / "index.html"
    if root.resolve() == REPORTS.resolve() or not index.exists():
        return True
    try:
        head = index.read_bytes()[:4096]
    except OSError:
        return False
    return f'<meta name="generator" content="{INDEX_GENERATOR}">'.encode() in head


def index_root(out: Path) -> Path:
    return out.parent.parent if out.parent.name == "published" else out.parent


def render_run(run_dir: Path, out: Path | None = None, *, overwrite: bool = False) -> Path:
    """Write ``<out>/index.html`` and ``<out>/raw/*.json`` for one run; return the HTML's path. The output holds this
    run's files only: what an earlier render there copied and this run lacks (another suite's results, errata) is
    removed with ``overwrite``, and refused without it; nothing else of the folder is touched."""
    run = load_run(run_dir)
    out = out or default_out(run)
    target = _inside(out, out / "index.html")
    for name in (*(f"raw/{suite}.json" for suite in SUITES), ERRATA_FILE):
        _inside(out, out / name)
    if target.exists() and not overwrite:
        raise FileExistsError(f"{target} exists; pass --overwrite to replace it")
    in_place = out.resolve() == run.directory.resolve()
    errata = run.directory / ERRATA_FILE
    stale = [] if in_place else [out / name for name in (
        *(f"raw/{suite}.json" for suite in SUITES if suite not in run.raw),
        *((ERRATA_FILE,) if not os.path.lexists(errata) else ())) if os.path.lexists(out / name)]
    if stale and not overwrite:
        raise FileExistsError(f"{stale[0]} exists and is not this run's; pass --overwrite to replace the report there"
                              " (removing it)")
    if not in_place:
        for suite, data in run.raw.items():
            copy = out / "raw" / f"{suite}.json"
            if copy.exists() and copy.read_bytes() != data and not overwrite:
                raise FileExistsError(f"{copy} exists with other content; pass --overwrite to replace it")
    html = render_html(run)
    if not in_place:
        for suite, data in run.raw.items():
            write_text_atomic(out / "raw" / f"{suite}.json", data, overwrite=True)
        if os.path.lexists(errata):  # corrections travel with the data they correct (load_run read and checked it)
            write_text_atomic(out / ERRATA_FILE, errata.read_bytes(), overwrite=True)
    for path in stale:  # an earlier run's, copied by an earlier render: the folder must not mix two runs
        path.unlink()
    write_text_atomic(target, html, overwrite=overwrite)
    return target


def newest_run(version: str | None = None, reports: Path = REPORTS) -> Path:
    """The newest run directory under ``reports/<suite_version>/`` that has results files: one named by its run id
    (``YYYYMMDDTHHMMSSZ``, as a suite session or ``validate`` names it), newest by that name. Tests never write
    there (they write under a temporary folder), so this is never a test's run."""
    base = reports / (version or suite_version())
    runs = sorted(d for d in base.glob("*") if d.is_dir() and RUN_ID.match(d.name)
                  and any((d / "raw").glob("*.json"))) if base.is_dir() else []
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
    with its headline numbers and errata; one that cannot be read is listed with why (and said on stderr), its
    numbers dashes. Regenerated each time (replaced atomically)."""
    dirs = sorted(d for d in root.glob("*") if (d / "raw").is_dir())
    dirs += sorted(d for d in (root / "published").glob("*") if (d / "raw").is_dir())
    rows = []
    for d in dirs:
        try:
            run = load_run(d)
        except (ReportError, OSError) as err:  # one unreadable folder neither hides the others nor goes unsaid
            why = str(err) if isinstance(err, ReportError) else f"{err.filename or d}: {err.strerror}"
            print(f"index: {d} listed as unreadable: {why}", file=sys.stderr)
            rows.append({"rel": d.relative_to(root).as_posix(), "rendered": (d / "index.html").exists(),
                         "version": d.name, "gpu": None, "gpu_why": f"unreadable: {why}", "created": DASH,
                         "counts": dict.fromkeys(STATUSES, DASH), "headline": [None] * len(PEERS),
                         "missing": ["unknown (unreadable)"], "errata": ()})
            continue
        gpu, why = run.gpu()
        rows.append({"rel": d.relative_to(root).as_posix(), "rendered": (d / "index.html").exists(),
                     "version": run.version, "gpu": gpu, "gpu_why": why, "created": run.created,
                     "counts": run.status_counts(), "headline": _headline(run), "missing": run.missing,
                     "errata": run.errata})
    html = render("index.html", title="SSD reports", generator=INDEX_GENERATOR, rows=rows,
                  peers=[PEER_NAMES[i] for i in PEERS], statuses=STATUSES)
    return write_text_atomic(root / "index.html", html, overwrite=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reports.render", description=__doc__.split("\n")[0])
    parser.add_argument("run_dir", nargs="?", type=Path,
                        help="a run directory with raw/<suite>.json (default: the newest under reports/<version>/)")
    parser.add_argument("--out", type=Path, help="where the report goes (default: reports/<version>/)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing report of the same version")
    args = parser.parse_args(argv)

    def report() -> str:
        target = render_run(args.run_dir or newest_run(), args.out, overwrite=args.overwrite)
        root = index_root(target.parent)
        if not index_owned(root):
            return (f"report: {target}\nindex: {root / 'index.html'} left alone: this renderer did not make it (no"
                    f" generator mark {INDEX_GENERATOR!r}), so it is not the suite's to replace")
        try:
            index = write_index(root)
        except OSError as err:  # the report is written; the folder above it may not be the user's to write in
            return f"report: {target}\nindex: {root / 'index.html'} not written: {err.strerror or err}"
        return f"report: {target}\nindex: {index}"

    return command("report", report)


if __name__ == "__main__":
    sys.exit(main())

