"""Results files for the pytest-only suites: inside a run (``$SSD_RUN_DIR`` set, as ``nox -s validate``
and the suite sessions set it), the compile check and the reference tests each write their results file,
one case per test, so the report shows what they checked. Outside a run (plain ``pytest``) there is no run:
``$SSD_RUN_DIR`` is pointed at a new temporary folder for what the matrices write, and nothing lands under
``reports/``, where ``nox -s report`` looks for the newest run.

Before any test runs, the run directory is checked for the results files this session will write
(``validation.results.check_run_dir``): one that is not writable or already holds them stops the session
at once with that line, rather than after its last case.

At the end of the session, every results file the session wrote (these and the matrices') is printed with
its path and its status counts per implementation, uncaptured.

Under pytest-xdist (``-n``) every test of a matrix module runs on one worker (pytest_xdist_make_scheduler): a
matrix runs all its cases once and writes its suite's one file."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from types import TracebackType

import pytest

from validation import results as results_module
from validation.results import ResultsFile, RunDirError, check_run_dir
from validation.schema import CaseRecord
from validation.summary import describe

# test file -> (suite, the implementation its tests judge)
SUITES = {"test_compile.py": ("compile", "cutile"), "test_reference.py": ("reference", "reference-chunked")}
SUITES_BY_NAME = dict(SUITES.values())  # suite -> the implementation its tests judge
_STATUS = {"passed": "pass", "failed": "fail", "skipped": "not-run"}
# The matrices' test files -> the suite whose results file they write (validation/matrix.py).
MATRIX_SUITES = {"test_correctness.py": "correctness", "test_stability.py": "stability"}
_results: dict[str, ResultsFile] = {}  # suite -> its file, checkpointed test by test inside a run
_collected: dict[str, list[str]] = {}  # suite -> the ids of its tests this session collected
_stopped: list[str] = []  # the signal that stopped the session, if one did
_scratch: list[str] = []  # the temporary run directory made for a session outside a run, if one was
_worker: list[bool] = []  # whether this process is a pytest-xdist worker (set at configure)


def pytest_configure(config: pytest.Config) -> None:
    # pytest-xdist gives its workers' configs their ``workerinput`` (an environment variable would be inherited by
    # a pytest a test starts in a subprocess).
    _worker.append(hasattr(config, "workerinput"))
    if _worker[0]:
        # Each worker gets its share of the cores for torch's CPU threads: 16 workers of 16 threads each ran the
        # 64K-token reference test 10 times slower than one pytest did, on a 16-core machine.
        import torch

        workers = int(config.workerinput.get("workercount", os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // max(1, workers)))
    if not os.environ.get("SSD_RUN_DIR"):
        _scratch.append(tempfile.mkdtemp(prefix="ssd-pytest-"))
        os.environ["SSD_RUN_DIR"] = _scratch[0]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """pytest-xdist's scheduler for ``-n`` (its "load", or "worksteal"): every test of a matrix module on one worker,
    every other test spread one by one as "load" spreads them. A matrix runs its cases once, in its module's fixture,
    and writes its suite's one results file: spread over two workers, each ran the whole matrix and the second failed
    on the file the first had written. ("loadgroup" with xdist_group marks would say the same, but pytest-xdist 3.8
    does not group under pytest 9.2: pytest-dev/pytest-xdist#1386.) Other modes are left as asked; "loadfile" and
    "loadscope" keep a module on one worker anyway."""
    if config.getoption("dist") not in ("load", "worksteal"):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class MatrixModulesTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return path if Path(path).name in MATRIX_SUITES else nodeid

    return MatrixModulesTogether(config, log)


def _in_run() -> bool:
    return bool(os.environ.get("SSD_RUN_DIR")) and os.environ["SSD_RUN_DIR"] not in _scratch


def _xdist_worker() -> bool:
    """Whether this process is a pytest-xdist worker: the controller receives every worker's reports and alone
    writes the results files (the CPU tests of ``nox -s validate`` run in parallel)."""
    return bool(_worker) and _worker[0]


def _note_collected(nodeids: list[str]) -> None:
    for nodeid in nodeids:
        suite, _ = SUITES.get(Path(nodeid.split("::", 1)[0]).name, (None, None))
        if suite is not None:
            _collected.setdefault(suite, []).append(nodeid.split("::", 1)[-1])


def pytest_collection_finish(session: pytest.Session) -> None:
    """Check the run directory for every results file the collected tests will write, before the first runs."""
    names = {Path(str(item.fspath)).name for item in session.items}
    suites = [MATRIX_SUITES[n] for n in sorted(names) if n in MATRIX_SUITES]
    if _in_run():
        suites += [SUITES[n][0] for n in sorted(names) if n in SUITES]
        if not _xdist_worker():
            _note_collected([item.nodeid for item in session.items])
    if suites:
        try:
            check_run_dir(Path(os.environ["SSD_RUN_DIR"]), suites)
        except RunDirError as err:
            raise pytest.UsageError(str(err)) from None


@pytest.fixture(scope="module")
def matrix_selection(request: pytest.FixtureRequest) -> set[str] | None:
    """The matrix cases this module's session asked for: None when it runs every test of the module that reads the
    matrix's records, else the case tags (the ``tag`` parameter) of those it runs, after ``-k`` or node ids. The
    matrix then runs only those cases, and records the others not-run, not selected."""
    def reads_records(item: pytest.Item) -> bool:
        return isinstance(item, pytest.Function) and "records" in item.fixturenames

    every = [item.nodeid for item in request.node.collect() if reads_records(item)]
    chosen = [item for item in request.session.items if item.module is request.module and reads_records(item)]
    if {item.nodeid for item in chosen} >= set(every):
        return None
    return {item.callspec.params["tag"] for item in chosen}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids: list[str]) -> None:
    """Under pytest-xdist the controller collects nothing itself: every worker's collection is the same, so the
    first one reported stands for the session's."""
    if _in_run() and not _collected:
        _note_collected(ids)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    suite, impl = SUITES.get(Path(report.fspath).name, (None, None))
    if _xdist_worker() or suite is None or not (report.when == "call" or report.outcome != "passed"):
        return
    reason = None
    if report.outcome != "passed":
        reason = f"{report.when}: {report.longreprtext.strip().splitlines()[-1][:500]}"
    results = _results.setdefault(suite, ResultsFile(suite))
    results.add(CaseRecord(id=report.nodeid.split("::", 1)[-1], impl=impl, status=_STATUS[report.outcome],
                           reason=reason, measured={"duration_s": report.duration}))
    if _in_run():  # a session killed outright still leaves what finished, in <run dir>/partial/<suite>.json
        results.checkpoint()


@pytest.hookimpl(tryfirst=True)  # before the terminal reporter's, which formats the traceback
def pytest_keyboard_interrupt(excinfo: pytest.ExceptionInfo) -> None:
    # a matrix raises isolated.Interrupted naming its signal; pytest's own KeyboardInterrupt is SIGINT's (nox passes
    # SIGTERM on as SIGINT)
    _stopped.append(getattr(excinfo.value, "signame", "SIGINT"))
    _give_every_entry_a_line(excinfo)


def _give_every_entry_a_line(excinfo: pytest.ExceptionInfo) -> None:
    """Python 3.11 gives a traceback entry no line number where the signal landed on an instruction with no source
    location, such as an ``except ... as`` block's cleanup: ``tb_lineno`` is None (3.11.7) or -1 (3.11.2). With
    None, pytest's report of the interrupt fails (``TypeError`` in ``TracebackEntry.lineno``) and the session exits
    1, not 2 (seen in CI); with -1 it names line -1. Such an entry takes the line of the nearest instruction before
    it that has one."""
    entries = []
    tb = excinfo.tb
    while tb is not None:
        entries.append(tb)
        tb = tb.tb_next
    mended = None
    for tb in reversed(entries):
        line = tb.tb_lineno
        if line is None or line < 0:
            code = tb.tb_frame.f_code
            lines = [n for start, _, n in code.co_lines() if start <= tb.tb_lasti and n is not None]
            line = lines[-1] if lines else code.co_firstlineno
        mended = TracebackType(mended, tb.tb_frame, tb.tb_lasti, line)
    excinfo.traceback = type(excinfo.traceback)(mended)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Write each suite's file: every test that reported, and, when the session was stopped, every collected test
    that did not, as not-run with the reason."""
    if _xdist_worker():
        # the matrices' files, which a worker writes: the controller lists them with its own (pytest_testnodedown)
        session.config.workeroutput["ssd_results_written"] = [str(path) for path in results_module.written]
        return
    if not _in_run():
        return
    extra: dict[str, object] = {}
    if _stopped:
        extra["interrupted"] = _stopped[0]
    for suite in sorted({*_results, *_collected}):
        results = _results.setdefault(suite, ResultsFile(suite))
        if _stopped:
            done = {record.id for record in results.cases}
            for case_id in _collected.get(suite, []):
                if case_id not in done:
                    results.add(CaseRecord(id=case_id, impl=SUITES_BY_NAME[suite], status="not-run",
                                           reason=f"interrupted: {extra['interrupted']} arrived before this test "
                                                  "ran"))
        results.write(**extra)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """pytest-xdist's controller, as a worker ends: the results files it wrote join this process's list."""
    results_module.written.extend(Path(path) for path in getattr(node, "workeroutput", {}).get("ssd_results_written",
                                                                                               []))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Runs after pytest_sessionfinish, where output is no longer captured. Only the files of a run: those
    under ``$SSD_RUN_DIR`` (the temporary one outside a run), not a test's own under its tmp_path."""
    home = Path(os.environ["SSD_RUN_DIR"])
    paths = [p for p in results_module.written if p.resolve().is_relative_to(home.resolve())]
    if paths:
        terminalreporter.write_sep("=", "results files written")
    for path in paths:
        terminalreporter.write_line(describe(path))
