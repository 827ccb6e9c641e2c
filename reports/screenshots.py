"""The committed screenshots of a report's first screen, at the width a reviewer opens it (1400 px).

    python -m reports.screenshots --cpu RUN_DIR [--gpu RUN_DIR] [--out reports/screenshots] [--overwrite]

Renders each run into a temporary directory, opens it in headless Chromium (validation.browser finds it)
and writes the first 1400 x 1000 px as ``gpu-first-screen.png`` and ``cpu-first-screen.png``. ``--gpu``
defaults to the published main run; ``--cpu`` names a run made without a GPU (``nox -s validate`` on a CPU
machine). Run by hand when the report's look changes (``--overwrite`` to replace the committed PNGs: an existing
PNG is otherwise refused before anything is rendered); tests never write here.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from reports.chromium import open_page
from reports.markup import ReportError
from reports.render import render_run
from reports.runs import load_run
from validation.browser import find_browser
from validation.provenance import ROOT
from validation.results import write_text_atomic

__all__ = ["main", "shoot"]

WIDTH, HEIGHT = 1400, 1000
MAIN_RUN = ROOT / "reports" / "published" / "0.1.0+20261130T120945Z-a35f5f9"
OUT = ROOT / "reports" / "screenshots"


def shoot(run_dir: Path, png: Path, chromium: str, *, overwrite: bool = False) -> str:
    """Render ``run_dir`` and save its first screen as ``png`` (in one step; an existing ``png`` is replaced only
    with ``overwrite``, else ``FileExistsError``); return a line on what was measured."""
    with tempfile.TemporaryDirectory(prefix="ssd-shot-") as tmp:
        page = render_run(run_dir, Path(tmp) / "report")
        with open_page(chromium, page, profile=Path(tmp) / "profile", width=WIDTH, height=HEIGHT) as view:
            layout = view.layout()
            shot = view.screenshot(Path(tmp) / png.name)
        write_text_atomic(png, shot.read_bytes(), overwrite=overwrite)
    verdict = layout.verdict or {}
    return (f"{png}: {png.stat().st_size // 1024} KiB; page {layout.scroll_width} x {layout.height} px, "
            f"verdict ends at {verdict.get('bottom', 0):.0f} px")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reports.screenshots", description=__doc__.split("\n")[0])
    parser.add_argument("--gpu", type=Path, default=MAIN_RUN, help="a run measured on a GPU (default: %(default)s)")
    parser.add_argument("--cpu", type=Path, required=True, help="a run made without a GPU")
    parser.add_argument("--out", type=Path, default=OUT, help="where the PNGs go (default: %(default)s)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace the PNGs there (the committed ones, by default); without it an existing PNG is "
                             "refused before anything is rendered")
    args = parser.parse_args(argv)
    runs = {"gpu": args.gpu, "cpu": args.cpu}
    pngs = {kind: args.out / f"{kind}-first-screen.png" for kind in runs}
    taken = [str(png) for png in pngs.values() if png.exists()]
    if taken and not args.overwrite:
        parser.error(f"{' and '.join(taken)} exist{'s' if len(taken) == 1 else ''}; pass --overwrite to replace "
                     f"{'it' if len(taken) == 1 else 'them'}, or --out a new folder")
    try:  # a folder that cannot take the PNGs is found now, before Chromium starts
        args.out.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=args.out).close()
    except OSError as err:
        parser.error(f"--out {args.out}: cannot write there: {err}")
    chromium, why = find_browser()
    if chromium is None:
        print(f"screenshots: {why}", file=sys.stderr)
        return 2
    try:
        for kind, run_dir in runs.items():  # both runs checked before either is shot
            has_gpu = load_run(run_dir).gpu()[0] is not None
            if has_gpu != (kind == "gpu"):
                raise ReportError(f"{run_dir}: --{kind} wants a run {'with' if kind == 'gpu' else 'without'} a GPU")
        for kind, run_dir in runs.items():
            print(shoot(run_dir, pngs[kind], chromium, overwrite=args.overwrite))
    except (ReportError, OSError) as err:  # FileExistsError too: a PNG that appeared meanwhile is not replaced
        print(f"screenshots: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
