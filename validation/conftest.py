"""Results files for the pytest-only suites: inside a run (``$SSD_RUN_DIR`` set, as ``nox -s validate``
sets it), the compile check and the reference tests each write their results file, one case per test,
so the report shows what they checked. Outside a run (``nox -s tests``, CI) nothing is written.

At the end of the session, every results file the session wrote (these and the matrices') is printed with
its path and its status counts per implementation, uncaptured."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from validation import results as results_module
from validation.provenance import ROOT
from validation.results import ResultsFile
from validation.summary import describe

# test file -> (suite, the implementation its tests judge)
SUITES = {"test_compile.py": ("compile", "cutile"), "test_reference.py": ("reference", "reference-chunked")}
_STATUS = {"passed": "pass", "failed": "fail", "skipped": "not-run"}
_records: dict[str, list[dict[str, object]]] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    suite, impl = SUITES.get(Path(report.fspath).name, (None, None))
    if suite is None or not (report.when == "call" or report.outcome != "passed"):
        return
    record: dict[str, object] = {"id": report.nodeid.split("::", 1)[-1], "impl": impl,
                                 "status": _STATUS[report.outcome], "duration_s": report.duration}
    if report.outcome != "passed":
        record["reason"] = f"{report.when}: {report.longreprtext.strip().splitlines()[-1][:500]}"
    _records.setdefault(suite, []).append(record)


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not os.environ.get("SSD_RUN_DIR"):
        return
    for suite, records in _records.items():
        results = ResultsFile(suite)
        for record in records:
            results.add(record)
        results.write()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Runs after pytest_sessionfinish, where output is no longer captured. Only the files of a run: those
    under ``$SSD_RUN_DIR``, else under reports/ (where a suite writes without it), not a test's own under its
    tmp_path."""
    home = Path(os.environ["SSD_RUN_DIR"]) if os.environ.get("SSD_RUN_DIR") else ROOT / "reports"
    paths = [p for p in results_module.written if p.resolve().is_relative_to(home.resolve())]
    if paths:
        terminalreporter.write_sep("=", "results files written")
    for path in paths:
        terminalreporter.write_line(describe(path))
