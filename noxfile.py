"""Sessions of the SSD reproduction suite. ``nox -l`` lists them; README.md says what each proves.

Every session installs from the one pin file, constraints.txt, into its own virtualenv, and also
runs with ``--no-venv`` in a prepared environment (the container, the lent H200), where it installs
nothing. Sessions run on the Python that runs nox: CPU machines have 3.11 only, the H200 and the
container 3.12, and no session may ask for an interpreter that is absent.
"""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime
from pathlib import Path

import nox

nox.options.sessions = ["tests", "lint"]
nox.options.error_on_missing_interpreters = True
nox.options.download_python = "never"
nox.options.default_venv_backend = "venv"

ROOT = Path(__file__).parent
CONSTRAINTS = ROOT / "constraints.txt"
PYPROJECT = nox.project.load_toml(ROOT / "pyproject.toml")
GROUPS = PYPROJECT["project"]["optional-dependencies"]
BASE = PYPROJECT["project"]["dependencies"]
# mamba-ssm ships a source archive only; without these its setup.py would compile a CUDA extension
# that the Triton SSD path never uses (DESIGN.md).
MAMBA_BUILD_ENV = {"MAMBA_SKIP_CUDA_BUILD": "TRUE", "MAMBA_FORCE_BUILD": "TRUE"}


def _pin(name: str) -> str:
    """The ``name==version`` line of constraints.txt (a missing pin is an error)."""
    for line in CONSTRAINTS.read_text().splitlines():
        if line.split("==")[0].strip().lower() == name:
            return line.strip()
    raise RuntimeError(f"constraints.txt has no pin for {name}")


def _install(session: nox.Session, *groups: str, mamba: bool = False) -> None:
    """Install the base dependencies and ``groups`` from the pins; nothing under --no-venv."""
    if session.venv_backend == "none":
        return
    packages = list(BASE) + [p for g in groups for p in GROUPS[g]]
    session.install("-c", str(CONSTRAINTS), *packages)
    if mamba:
        session.install("-c", str(CONSTRAINTS), "setuptools", "wheel")
        session.install("--no-deps", "--no-build-isolation", _pin("mamba-ssm"), env=MAMBA_BUILD_ENV)


def _python(session: nox.Session) -> str:
    """The session's interpreter: the venv's, or under --no-venv the one running nox (there may be no `python`)."""
    return sys.executable if session.venv_backend == "none" else "python"


def _pytest(session: nox.Session, *, marker: str, paths: tuple[str, ...] = ("validation",)) -> None:
    """pytest over ``paths`` (or the session's posargs) with the tests selected by ``marker``; the results
    files of the suites it runs go to one new run directory (printed at the end of the run)."""
    args = session.posargs or list(paths)
    env = {"PYTHONHASHSEED": "0", "SSD_RUN_DIR": str(_run_dir(session))}
    session.run(_python(session), "-m", "pytest", "--strict-markers", "--strict-config", "-p", "no:cacheprovider",
                "-m", marker, *args, env=env)


@nox.session(python=None)
def tests(session: nox.Session) -> None:
    """The CPU suite (what CI runs): references, input checks, Triton under the interpreter, cuTile compile check.

    Also the correctness and stability matrices: on a CPU the references run there and every GPU case is
    recorded not-run with its reason.
    """
    _install(session, "test", "compile", mamba=True)
    _pytest(session, marker="not gpu")


@nox.session(python=None)
def compile(session: nox.Session) -> None:
    """Export every cuTile kernel we launch to sm_90/sm_100/sm_103 cubins and check HGMMA in the sm_90 SASS."""
    _install(session, "compile")
    _pytest(session, marker="compile")


@nox.session(python=None)
def correctness(session: nox.Session) -> None:
    """Every implementation over every kind of input, against float64 (our outputs NaN-poisoned); results file."""
    _install(session, "test", "compile", "gpu", mamba=True)
    _pytest(session, marker="matrix", paths=("validation/test_correctness.py",))


@nox.session(python=None)
def stability(session: nox.Session) -> None:
    """Every implementation on every regime, ragged and long sequences, x past 2**31 elements; results file."""
    _install(session, "test", "compile", "gpu", mamba=True)
    _pytest(session, marker="matrix", paths=("validation/test_stability.py",))


@nox.session(python=None)
def benchmark(session: nox.Session) -> None:
    """The post's sweep for cutile, triton and tilegym: float64 gate, CUPTI kernel time, wall time, the floor.

    `-- --seqlen 16384 --dstate 128 --impl cutile triton` selects a subset (`-- --help` lists the options).
    """
    _install(session, "test", "compile", "gpu", mamba=True)
    session.run(_python(session), "-m", "validation.bench.run", *session.posargs)


@nox.session(python=None)
def lint(session: nox.Session) -> None:
    """ruff over the whole tree."""
    _install(session, "lint")
    session.run("ruff", "check", ".")


@nox.session(python=None)
def report(session: nox.Session) -> None:
    """Render a run's results into reports/<version>/index.html and regenerate reports/index.html (stdlib only).

    `-- RUN_DIR [--out DIR] [--overwrite]` (default: the newest run); `-- compare A B [--overwrite]` compares two.
    """
    compare = session.posargs[:1] == ["compare"]
    args = session.posargs[1:] if compare else session.posargs
    session.run(_python(session), "-m", "reports.compare" if compare else "reports.render", *args)


@nox.session(python=None)
def validate(session: nox.Session) -> None:
    """The main job: compile check, CPU tests, correctness, stability, benchmark, then the report, in order.

    A failing suite does not stop the next one or the report; the session fails at the end if any did.
    Without a GPU the GPU suites record their cases as not-run (with the reason) and the report says so.
    """
    _install(session, "test", "compile", "gpu", mamba=True)
    run_dir = _run_dir(session)
    env = {"SSD_RUN_DIR": str(run_dir), "PYTHONHASHSEED": "0"}
    py = _python(session)
    pytest = (py, "-m", "pytest", "--strict-markers", "--strict-config", "-p", "no:cacheprovider")
    cpu_tests = "not gpu and not matrix and not compile and not browser and not container"
    if _has_gpu(session):
        # The interpreter exists so that a CPU can run the Triton baseline; on a GPU it runs compiled, judged
        # by the GPU suites (and the interpreter depends on the pinned triton, which a prepared GPU box may lack).
        cpu_tests += " and not interpreter"
        session.log("validate: a GPU is here, so the Triton-under-the-interpreter tests are left to CPU runs")
    steps = [
        ("compile check", (*pytest, "-m", "compile", "validation")),
        ("CPU tests", (*pytest, "-m", cpu_tests, "validation")),
        ("correctness", (*pytest, "-m", "matrix", "validation/test_correctness.py")),
        ("stability", (*pytest, "-m", "matrix", "validation/test_stability.py")),
        ("benchmark", (py, "-m", "validation.bench.run", *session.posargs)),
        ("report", (py, "-m", "reports.render", str(run_dir), "--out", str(run_dir))),
    ]
    session.log("validate: the browser and hadolint checks of the report and Dockerfile are CI's (nox -s tests);"
                " they are deselected here")
    failed = []
    for title, argv in steps:
        session.log(f"validate: {title}: {' '.join(argv)}")
        try:
            session.run(*argv, env=env)
        except nox.command.CommandFailed:
            failed.append(title)
    session.log(f"validate: results and report in {run_dir}")
    if failed:
        session.error(f"validate: failed: {', '.join(failed)}")


def _has_gpu(session: nox.Session) -> bool:
    probe = "import torch; print(torch.cuda.is_available())"
    return session.run(_python(session), "-c", probe, silent=True).strip() == "True"


def _run_dir(session: nox.Session) -> Path:
    """One directory for every suite of this run: $SSD_RUN_DIR (the container sets it), else a new
    reports/<suite_version>/<UTC time>/."""
    if os.environ.get("SSD_RUN_DIR"):
        return Path(os.environ["SSD_RUN_DIR"])
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return ROOT / "reports" / PYPROJECT["project"]["version"] / stamp
