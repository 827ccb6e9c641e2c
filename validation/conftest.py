"""Results files for the pytest-only suites: inside a run (``$SSD_RUN_DIR`` set, as ``nox -s validate``
sets it), the compile check and the reference tests each write their results file, one case per test,
so the report shows what they checked. Outside a run (``nox -s tests``, CI) nothing is written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from validation.results import ResultsFile

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
        print(f"\n{suite} results: {results.write()} {results.summary()}")
