"""The noxfile's stop handling: SIGTERM or SIGINT sent to nox alone (what `timeout`, CI runners and `kill` send)
stops a running suite session as Ctrl-C in a terminal does. nox by itself would only wait for the command after
SIGINT and, when that exits 0, go on; after SIGTERM it would leave the command running.

A real `nox --no-venv -s correctness` on the CPU (the float64 references run, the rest is recorded not-run),
signalled once its matrix has finished a case.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from validation import isolated
from validation.provenance import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not sys.platform.startswith("linux"),
                                                  reason="the noxfile finds its children in /proc")]


def _group_alive(pgid: int) -> list[str]:
    """The processes of a process group still running (zombies count as gone)."""
    found = []
    # Listed first, each stat read on its own: Path.glob stats entries while listing and raises ProcessLookupError for
    # a process that exits meanwhile (seen once in CI).
    for name in (n for n in os.listdir("/proc") if n.isdigit()):
        try:
            fields = Path("/proc", name, "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            found.append(name)
    return found


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
def test_a_signal_to_nox_alone_stops_the_session_and_keeps_what_finished(signame: str, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    # The project first, and whatever path this interpreter was given (where nox may live) after it.
    pythonpath = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "SSD_RUN_DIR": str(run_dir), "PYTHONPATH": pythonpath}
    command = [sys.executable, "-m", "nox", "--no-venv", "-f", str(ROOT / "noxfile.py"), "--envdir",
               str(tmp_path / ".nox"), "-s", "correctness"]
    nox = subprocess.Popen(command, cwd=ROOT, env=env, start_new_session=True, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    partial = run_dir / "partial" / "correctness.json"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and nox.poll() is None:
        try:
            if any(c["status"] == "pass" for c in json.loads(partial.read_text())["cases"]):
                break
        except (OSError, ValueError):
            pass
        time.sleep(0.1)
    assert nox.poll() is None, f"the session ended before it could be stopped: {nox.communicate()[0][-3000:]}"
    start = time.monotonic()
    out = isolated.signal_and_wait(nox, getattr(signal, signame), timeout=90)
    assert nox.returncode != 0, out[-3000:]
    assert time.monotonic() - start < 60, f"nox took {time.monotonic() - start:.0f} s to stop: {out[-3000:]}"
    data = json.loads((run_dir / "raw" / "correctness.json").read_text())
    assert data["interrupted"] == "SIGINT", "the matrix is stopped by the SIGINT nox sends it"
    statuses = [c["status"] for c in data["cases"]]
    assert "pass" in statuses and "crashed" not in statuses and "fail" not in statuses, statuses
    assert any(c["status"] == "not-run" and c["reason"].startswith("interrupted") for c in data["cases"])
    time.sleep(0.5)
    assert not _group_alive(nox.pid), "a process of the stopped session is still running"


# --- The sessions' own logic, run in this process with a stand-in for nox's Session (nothing is executed): what
# validate runs first, that a signal stops it between steps, what lint, lock and tests do with stray arguments. ---


@pytest.fixture
def noxfile(monkeypatch):
    """noxfile.py as a module; its signal handlers (installed on import) are put back, and it finds no children to
    signal."""
    import importlib.util

    import nox.registry

    monkeypatch.setattr(nox.registry, "_REGISTRY", {})  # nox's registry of sessions, which the import fills
    # a validate run under SSD_REQUIRE_GPU=1 runs these tests too: the stand-in sessions answer "no device"
    monkeypatch.delenv("SSD_REQUIRE_GPU", raising=False)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    spec = importlib.util.spec_from_file_location("ssd_noxfile_under_test", ROOT / "noxfile.py")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    monkeypatch.setattr(module, "_children", lambda: [])
    return module


class FakeSession:
    """What the sessions use of nox.Session: ``run`` records each command and answers through ``answer``."""

    venv_backend = "none"

    def __init__(self, name: str, posargs: list[str], answer=None) -> None:
        self.name, self.posargs, self.runs = name, posargs, []
        self.answer = answer or (lambda argv: "")

    def run(self, *argv: str, **kwargs: object) -> object:
        self.runs.append(list(argv))
        return self.answer(list(argv))

    def error(self, *args: object):
        import nox.sessions

        raise nox.sessions._SessionQuit(*args)

    def log(self, *args: object) -> None:
        pass

    warn = log


def _quit():
    import nox.sessions

    return pytest.raises(nox.sessions._SessionQuit)


def test_validate_checks_the_benchmarks_arguments_before_its_first_step(noxfile, tmp_path, monkeypatch) -> None:
    import nox.command

    def answer(argv: list[str]) -> str:
        if "--check-args" in argv:
            raise nox.command.CommandFailed("exit 2")
        return "False"

    monkeypatch.setenv("SSD_RUN_DIR", str(tmp_path / "run"))
    session = FakeSession("validate", ["--seqlen", "0"], answer)
    with _quit() as quit_:
        noxfile.validate(session)
    assert "the benchmark refused its arguments (--seqlen 0)" in str(quit_.value)
    assert len(session.runs) == 1 and session.runs[0][1:4] == ["-m", "validation.bench.run", "--check-args"]
    assert session.runs[0][4:] == ["--seqlen", "0"], "the check is given the arguments the benchmark step gets"
    assert not (tmp_path / "run").exists(), "nothing was run, no run directory made"


def test_a_signal_while_a_validate_step_runs_starts_no_further_step(noxfile, tmp_path, monkeypatch) -> None:
    """The step ends with exit 0 after the signal (nox then returns as if nothing happened): no further step."""

    def answer(argv: list[str]) -> str:
        if "compile" in argv:  # the compile check gets the signal, writes its results and exits 0
            try:
                noxfile._stop(signal.SIGTERM, None)
            except KeyboardInterrupt:
                pass  # what nox's popen does with it when the command then exits 0
        return "False"

    monkeypatch.setenv("SSD_RUN_DIR", str(tmp_path / "run"))
    session = FakeSession("validate", [], answer)
    with _quit() as quit_:
        noxfile.validate(session)
    assert "stopped by SIGTERM before CPU tests" in str(quit_.value)
    assert session.runs[-1][-2:] == ["compile", "validation"], "the step after the signal did not start"


@pytest.mark.parametrize("name", ["validate", "correctness", "stability", "benchmark", "explore"])
@pytest.mark.parametrize("gpu", ["False", "True"])
def test_a_required_gpu_that_torch_cannot_see_stops_the_session_before_any_step(name: str, gpu: str, noxfile,
                                                                                 tmp_path, monkeypatch) -> None:
    """SSD_REQUIRE_GPU=1 (nox -s container -- --gpus sets it in the container): where torch sees no CUDA device
    (a driver that did not load, --gpus that did not take) the session stops at once, instead of recording every
    GPU case not-run and passing. With a device, the session goes on."""
    monkeypatch.setenv("SSD_REQUIRE_GPU", "1")
    monkeypatch.setenv("SSD_RUN_DIR", str(tmp_path / "run"))
    monkeypatch.setattr(noxfile, "_install", lambda *a, **k: None)
    probed = []

    def answer(argv: list[str]) -> str:
        if "torch.cuda.is_available()" in " ".join(argv):
            probed.append(argv)
            return gpu
        if "--check-args" in argv:  # validate checks the benchmark's arguments first, in seconds
            return ""
        raise RuntimeError("a step ran")  # the first command after the probe

    session = FakeSession(name, [], answer)
    with pytest.raises(Exception) as stopped:
        getattr(noxfile, name)(session)
    assert probed, "the session never asked torch for a device"
    if gpu == "False":
        assert stopped.type.__name__ == "_SessionQuit", stopped.value
        assert f"{name}: SSD_REQUIRE_GPU=1, but torch sees no CUDA device" in str(stopped.value)
        assert not any("pytest" in a or "validation.bench.run" in a or "validation.bench.explore_cutile" in a
                       for argv in session.runs for a in argv if "--check-args" not in argv), session.runs
        assert not (tmp_path / "run").exists()
    else:
        assert isinstance(stopped.value, RuntimeError), "with a device the session went on to its first step"


@pytest.mark.parametrize("name", ["lint", "lock"])
def test_sessions_that_take_no_arguments_refuse_them(name: str, noxfile, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(noxfile, "LOCK", tmp_path / "requirements.lock")  # never the committed one
    session = FakeSession(name, ["--help"])
    with _quit() as quit_:
        getattr(noxfile, name)(session)
    assert f"{name} takes no arguments after --; got --help" in str(quit_.value)
    assert session.runs == [] and not (tmp_path / "requirements.lock").exists()


def test_tests_leaves_no_empty_scratch_directory_behind(noxfile, tmp_path, monkeypatch) -> None:
    import tempfile

    import nox.command

    def answer(argv: list[str]) -> str:
        if "pytest" in argv:
            raise nox.command.CommandFailed("exit 4: pytest refused --bogus")
        return "/usr/bin/chromium"

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(nox.command.CommandFailed):
        noxfile.tests(FakeSession("tests", ["--bogus"], answer))
    assert not list(tmp_path.glob("ssd-tests-*")), "an empty scratch directory was left behind"

    def writes_then_fails(argv: list[str]) -> str:
        if "pytest" in argv:
            (scratch,) = tmp_path.glob("ssd-tests-*")
            (scratch / "raw").mkdir()
            (scratch / "raw" / "reference.json").write_text("{}")
            raise nox.command.CommandFailed("exit 1")
        return "/usr/bin/chromium"

    with pytest.raises(nox.command.CommandFailed):
        noxfile.tests(FakeSession("tests", [], writes_then_fails))
    assert [p.name for p in tmp_path.glob("ssd-tests-*/raw/*")] == ["reference.json"], "what a run wrote is kept"


# --- The modules the sessions run, and reports.screenshots, on their own command lines (in a child: validation's
# tests import no reports module). ---


def _cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *argv], cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("module", ["validation.lock", "validation.browser"])
def test_help_is_help_not_the_check(module: str) -> None:
    done = _cli(module, "--help")
    assert done.returncode == 0 and done.stdout.startswith(f"usage: python -m {module}"), done.stdout[-2000:]


def test_screenshots_never_replace_a_png_unless_asked_and_say_an_unwritable_folder_in_one_line(tmp_path) -> None:
    (tmp_path / "cpu-first-screen.png").write_bytes(b"earlier")
    done = _cli("reports.screenshots", "--cpu", str(tmp_path), "--out", str(tmp_path))
    assert done.returncode == 2 and "cpu-first-screen.png exists; pass --overwrite" in done.stderr, done.stderr
    assert (tmp_path / "cpu-first-screen.png").read_bytes() == b"earlier"
    (tmp_path / "a-file").write_text("")
    done = _cli("reports.screenshots", "--cpu", str(tmp_path), "--out", str(tmp_path / "a-file" / "shots"))
    assert done.returncode == 2 and "--out" in done.stderr and "cannot write there" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
