"""Reading a run directory (``<run_dir>/raw/<suite>.json``) into a ``Run``, its version name, and the
benchmark's speedup points. Only reads; never runs a suite.

Version name: ``<suite_version>+<run_id>-<commit7>[-dirty]``, e.g. ``0.1.0+20261130T090000Z-59dd7d0``.
``run_id`` is the run directory's name when it has the form ``YYYYMMDDTHHMMSSZ`` (what
``validation.results.run_dir`` makes), else the earliest ``created`` of its files in that form;
``commit7`` is the first 7 hex digits of ``environment.git_commit`` (``nocommit`` when it is null),
and ``-dirty`` marks a run whose ``git_dirty`` is true. All files of a run must agree on the suite
version and the commit.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reports.errata import Erratum, load_errata
from reports.markup import ReportError, num
from validation.schema import (
    HEADLINE,
    KNOWN_SCHEMA_VERSIONS,
    SUITES,
    CaseRecord,
    ResultsDoc,
    SchemaError,
    load_results,
    utc,
)

__all__ = ["KNOWN_SCHEMA_VERSIONS", "SUITES", "HEADLINE", "Run", "command", "load_run", "order", "shape_order",
           "speedup", "speedup_points"]

RUN_ID = re.compile(r"^[0-9]{8}T[0-9]{6}Z\Z")
PEERS = ("cutile", "tilegym")  # each measured as a speedup over "triton"

Case = CaseRecord


@dataclass(frozen=True)
class Run:
    directory: Path
    files: dict[str, ResultsDoc]  # suite -> its results file, checked and typed, in SUITES order
    raw: dict[str, bytes]  # suite -> the file's bytes, copied beside the report unchanged
    version: str
    created: str  # the earliest of its files' (as a time, not as text: their UTC offsets may differ)
    errata: tuple[Erratum, ...] = ()  # from <directory>/errata.json (reports/errata.py)

    @property
    def missing(self) -> list[str]:
        return [s for s in SUITES if s not in self.files]

    def cases(self, suite: str) -> list[Case]:
        return list(self.files[suite].cases) if suite in self.files else []

    def environment(self) -> dict[str, dict[str, Any]]:
        return {s: f.environment for s, f in self.files.items()}

    def status_counts(self) -> Counter[str]:
        return Counter(c.status for s in self.files for c in self.cases(s))

    def counts_by_impl(self) -> dict[str, Counter[str]]:
        """impl -> status -> number of cases, over every suite."""
        out: dict[str, Counter[str]] = {}
        for suite in self.files:
            for c in self.cases(suite):
                out.setdefault(c.impl, Counter())[c.status] += 1
        return out

    def gpu(self) -> tuple[str | None, str | None]:
        """(GPU name, None) from the first file that read it, else (None, the benchmark's or first reason)."""
        envs = self.environment()
        for env in envs.values():
            if env.get("gpu_name"):
                return str(env["gpu_name"]), None
        for suite in ("benchmark", *envs):
            reason = (envs.get(suite) or {}).get("null_reasons", {}).get("gpu_name")
            if reason:
                return None, str(reason)
        return None, "no results file records gpu_name"


def _load_file(path: Path, suite: str) -> tuple[ResultsDoc, bytes]:
    """The file, checked against the results contract (validation/schema.py): one line naming the file, the
    field and the value when it does not fit."""
    try:
        return load_results(path, suite)
    except SchemaError as err:
        raise ReportError(str(err)) from None


def _run_id(directory: Path, created: str) -> str:
    if RUN_ID.match(directory.name):
        return directory.name
    return utc(created).strftime("%Y%m%dT%H%M%SZ")  # the contract refuses a created without a UTC time


def _one(directory: Path, what: str, values: dict[str, object]) -> object:
    distinct = sorted({json.dumps(v) for v in values.values()})
    if len(distinct) != 1:
        raise ReportError(f"{directory}: the results files disagree on {what}: "
                          + ", ".join(f"{s}.json has {v!r}" for s, v in sorted(values.items())))
    return next(iter(values.values()))


def load_run(directory: Path) -> Run:
    """Read every ``raw/<suite>.json`` of a run; refuse unknown schema versions and unknown suites."""
    raw_dir = directory / "raw"
    if not directory.is_dir():
        raise ReportError(f"{directory}: {'not a directory' if directory.exists() else 'does not exist'}; expected a "
                          f"run directory holding raw/<suite>.json")
    if not raw_dir.is_dir():
        raise ReportError(f"{directory}: no raw/ directory; expected {directory}/raw/<suite>.json "
                          f"for some of {', '.join(SUITES)}")
    found = sorted(p for p in raw_dir.iterdir() if p.suffix == ".json")
    unknown = [p.name for p in found if p.stem not in SUITES]
    if unknown:
        raise ReportError(f"{raw_dir}: {', '.join(unknown)}: not a suite's results file "
                          f"(expected <suite>.json for a suite in {', '.join(SUITES)})")
    if not found:
        raise ReportError(f"{raw_dir}: no results files; expected <suite>.json for some of {', '.join(SUITES)}")
    files, raw = {}, {}
    for suite in SUITES:
        path = raw_dir / f"{suite}.json"
        if os.path.lexists(path):  # a directory, a FIFO or a dangling link there is refused, not "missing"
            files[suite], raw[suite] = _load_file(path, suite)
    created = {s: f.created for s, f in files.items()}
    if not all(isinstance(c, str) for c in created.values()):
        raise ReportError(f"{directory}: every results file needs 'created' (ISO 8601); got {created}")
    envs = {s: f.environment for s, f in files.items()}
    suite_version = _one(directory, "suite_version",
                         {s: f.suite_version or envs[s].get("suite_version") for s, f in files.items()})
    commit = _one(directory, "environment.git_commit", {s: e.get("git_commit") for s, e in envs.items()})
    dirty = any(e.get("git_dirty") is True for e in envs.values())
    commit7 = str(commit)[:7] if commit else "nocommit"
    earliest = min(created.values(), key=utc)
    version = f"{suite_version}+{_run_id(directory, earliest)}-{commit7}{'-dirty' if dirty else ''}"
    cases = {s: {"cases": [c.as_dict() for c in f.cases]} for s, f in files.items()}  # what the errata match
    return Run(directory, files, raw, version, earliest, load_errata(directory, cases))


def _shape_key(case: Case) -> tuple[object, ...]:
    shape = case.shape or {}
    return (*(shape.get(k) for k in HEADLINE), case.dtype)


def order(values: tuple[object, ...]) -> tuple[tuple[int, float, str], ...]:
    """A sort key for a tuple of mixed values: numbers numerically, then everything else as text."""
    return tuple((0, float(v), "") if num(v) is not None else (1, 0.0, str(v)) for v in values)


def shape_order(case: Case) -> tuple[tuple[int, float, str], ...]:
    """Cases by shape (numerically), dtype, variant, impl, id."""
    return order((*_shape_key(case), case.variant or "", case.impl, case.id))


def speedup_points(cases: list[Case]) -> dict[tuple[object, ...], dict[str, Case]]:
    """Benchmark cases without a ``variant``, grouped by (shape..., dtype) then impl; sorted by key."""
    points: dict[tuple[object, ...], dict[str, Case]] = {}
    for case in cases:
        if case.variant:
            continue
        points.setdefault(_shape_key(case), {})[case.impl] = case
    return dict(sorted(points.items(), key=lambda kv: order(kv[0])))


def kernel_median(case: Case) -> float | None:
    stats = case.measured.get("kernel_us")
    value = num(stats.get("median")) if isinstance(stats, dict) else None
    return value if value is not None and math.isfinite(value) and value > 0 else None


def speedup(point: dict[str, Case], impl: str, base: str = "triton") -> tuple[float | None, str | None]:
    """(base kernel median / impl kernel median, None), or (None, why there is no ratio)."""
    for name in (base, impl):
        case = point.get(name)
        if case is None:
            return None, f"no {name} case"
        if case.status != "pass":
            return None, f"{name} {case.status}: {case.reason or 'no reason given'}"
        if kernel_median(case) is None:
            return None, f"{name} has no finite kernel_us.median"
    return kernel_median(point[base]) / kernel_median(point[impl]), None  # type: ignore[operator]


def published_ratios(run: Run) -> tuple[dict[tuple[int, int], float], str]:
    """The post's ratios by (seqlen, dstate) and where they come from: the benchmark file's ``published_ratios``:
    ``{"gpu": "B300", "source": "...", "points": [{"seqlen": 1024, "dstate": 128, "ratio": 1.2}, ...]}``."""
    bench = run.files.get("benchmark")
    if bench is None:
        return {}, "the benchmark did not run"
    data = bench.extra.get("published_ratios")
    if data is None:
        return {}, "the benchmark results carry no published_ratios, so the post's B300 ratios are not shown"
    path = run.directory / "raw" / "benchmark.json"
    if not isinstance(data, dict) or not isinstance(data.get("points"), list):
        raise ReportError(f"{path}: expected published_ratios to be an object with a 'points' list")
    out = {}
    for p in data["points"]:
        if not (isinstance(p, dict) and isinstance(p.get("seqlen"), int) and isinstance(p.get("dstate"), int)
                and num(p.get("ratio")) is not None):
            raise ReportError(f"{path}: each published_ratios point needs int seqlen, int dstate and a number ratio;"
                              f" got {p!r}")
        out[(p["seqlen"], p["dstate"])] = num(p["ratio"])
    source = f"{data.get('gpu') or 'GPU not named'}; source: {data.get('source') or 'not given'}"
    return dict(sorted(out.items())), source


def command(prog: str, action: Callable[[], str]) -> int:
    """The exit status of a command line over runs: 0 with what ``action`` returns printed, or 2 with one line
    ``<prog>: ...`` on stderr when a run is refused (ReportError), a file is already there (FileExistsError) or
    the file system fails (OSError, named by its file)."""
    try:
        message = action()
    except (ReportError, FileExistsError) as err:
        print(f"{prog}: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"{prog}: {err.filename or ''}: {err.strerror}", file=sys.stderr)
        return 2
    print(message)
    return 0
