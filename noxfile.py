"""Sessions of the SSD reproduction suite. ``nox -l`` lists them; README.md says what each proves.

Every session installs the pinned stack (constraints.txt, with every transitive package held by
requirements.lock) into its own virtualenv on the Python that runs nox, or runs with ``--no-venv`` in a
prepared environment (the container, a GPU box with the stack installed), where it installs nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import nox

nox.options.sessions = ["tests", "lint"]
nox.options.error_on_missing_interpreters = True
nox.options.download_python = "never"
nox.options.default_venv_backend = "venv"

ROOT = Path(__file__).parent
CONSTRAINTS = ROOT / "constraints.txt"
LOCK = ROOT / "requirements.lock"
PYPROJECT = nox.project.load_toml(ROOT / "pyproject.toml")
VERSION = PYPROJECT["project"]["version"]
GROUPS = PYPROJECT["project"]["optional-dependencies"]
BASE = PYPROJECT["project"]["dependencies"]
# Installed without their dependencies, after the rest: mamba-ssm ships a source archive whose setup.py needs
# torch (and would build a CUDA extension the Triton SSD path never uses, hence MAMBA_BUILD_ENV); tilegym's
# mamba2 op needs only torch, triton and cuda-tile, and what it declares besides serves other parts of it.
NO_DEPS = ("mamba-ssm", "tilegym")
MAMBA_BUILD_ENV = {"MAMBA_SKIP_CUDA_BUILD": "TRUE", "MAMBA_FORCE_BUILD": "TRUE"}
# What the image holds, and so what requirements.lock resolves: every group but lint, and the session tools.
IMAGE_GROUPS = ("test", "compile", "gpu")
SESSION_TOOLS = ("nox", "setuptools", "wheel")


def _children() -> list[int]:
    """The processes nox started (Linux: read from /proc; elsewhere none are found)."""
    # The directory listed, then each stat read on its own: a process that exits meanwhile is skipped (Path.glob
    # stats each entry while listing, and raised ProcessLookupError for one that had just exited).
    try:
        names = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:  # no /proc: not Linux
        return []
    pids = []
    for name in names:
        with contextlib.suppress(OSError, IndexError, ValueError):
            if int(Path("/proc", name, "stat").read_text().rsplit(")", 1)[1].split()[1]) == os.getpid():
                pids.append(int(name))
    return pids


STOPPED: list[str] = []  # the signals that asked this nox to stop (_stop appends; validate starts no step after one)


def _from_the_terminal() -> bool:
    """Whether nox runs in its terminal's foreground process group, where Ctrl-C reaches every process of it."""
    try:
        return os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp()
    except (OSError, ValueError):
        return False


def _stop(signum: int, _frame: object) -> None:
    """SIGTERM to nox alone (what `timeout` and CI runners send), or SIGINT to nox alone (`kill -INT`, a runner
    with no terminal), stops a session as Ctrl-C in a terminal does: the running command gets SIGINT, and nox
    waits for it (STOP_TIMEOUTS), so a suite writes what it finished and stops its own children instead of running
    on after nox is gone. (nox itself only waits for the command after SIGINT, and runs the next one if that one
    then exits 0: the signal is kept in STOPPED, and validate starts no further step.) Ctrl-C in the terminal has
    reached the command already: it is not sent twice."""
    STOPPED.append(signal.Signals(signum).name)
    if signum != signal.SIGINT or not _from_the_terminal():
        for pid in _children():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGINT)
    raise KeyboardInterrupt(f"signal {signum}")


for _signum in (signal.SIGINT, signal.SIGTERM):
    signal.signal(_signum, _stop)
# How long a suite has to write its results after SIGINT, and then after SIGTERM (nox's defaults: 0.3 s, 0.2 s).
STOP_TIMEOUTS = {"interrupt_timeout": 120, "terminate_timeout": 30}


def _pin(name: str) -> str:
    """The ``name==version`` line of constraints.txt (a missing pin is an error)."""
    for line in CONSTRAINTS.read_text().splitlines():
        if line.split("==")[0].strip().lower() == name:
            return line.strip()
    raise RuntimeError(f"constraints.txt has no pin for {name}")


def _install(session: nox.Session, *groups: str, base: bool = True) -> None:
    """Install the base dependencies (unless ``base`` is false) and ``groups`` from the pins; nothing under
    --no-venv.

    mamba-ssm comes with the test group (it is the Triton baseline), tilegym with the gpu group, both
    without their dependencies, as in the image."""
    if session.venv_backend == "none":
        return
    packages = [p for p in [*(BASE if base else ()), *(p for g in groups for p in GROUPS[g])] if p not in NO_DEPS]
    pins = ("-c", str(CONSTRAINTS), "-c", str(LOCK))
    session.install(*pins, *packages)
    if "gpu" in groups:
        session.install(*pins, "--no-deps", _pin("tilegym"))
    if "test" in groups:
        session.install(*pins, "setuptools", "wheel")
        session.install("--no-deps", "--no-build-isolation", _pin("mamba-ssm"), env=MAMBA_BUILD_ENV)


def _python(session: nox.Session) -> str:
    """The session's interpreter: the venv's, or under --no-venv the one running nox (there may be no `python`)."""
    return sys.executable if session.venv_backend == "none" else "python"


def _pytest(session: nox.Session, *, marker: str | None, paths: tuple[str, ...] = ("validation",),
            env: dict[str, str] | None = None) -> None:
    """pytest over ``paths`` with the tests selected by ``marker`` and the session's posargs (posargs that name
    tests, a path or a node id, replace ``paths``); the results files of the suites it runs go to one new run
    directory (``env`` may name another), printed as they are written."""
    values = {arg for flag, arg in zip(session.posargs, session.posargs[1:], strict=False) if flag in ("-k", "-m")}
    names_tests = any(".py" in arg or (ROOT / arg).is_dir() for arg in session.posargs
                      if not arg.startswith("-") and arg not in values)
    args = list(session.posargs) if names_tests else [*paths, *session.posargs]
    env = {"PYTHONHASHSEED": "0", "SSD_RUN_DIR": str(_run_dir(session)), **(env or {})}
    session.run(_python(session), "-m", "pytest", "--strict-markers", "--strict-config", "-p", "no:cacheprovider",
                *(("-m", marker) if marker else ()), *args, env=env, **STOP_TIMEOUTS)


def _browser(session: nox.Session) -> dict[str, str]:
    """The environment that points the report's browser checks at a headless Chromium: the one this machine
    has, else Playwright's, fetched into this session's virtualenv. With neither, the checks say what is
    missing and are skipped (CI sets SSD_REQUIRE_BROWSER=1, which makes that a failure)."""
    py = _python(session)
    found = session.run(py, "-m", "validation.browser", silent=True, success_codes=[0, 1]).strip()
    if found.startswith("/"):
        return {"SSD_BROWSER": found.splitlines()[-1]}
    if session.venv_backend == "none":
        session.warn(f"tests: {found}; the browser checks will be skipped")
        return {}
    session.log("tests: no Chromium on this machine; fetching Playwright's (about 150 MB, once per venv)")
    session.install("-c", str(CONSTRAINTS), "playwright")
    browsers = Path(session.virtualenv.location) / "ms-playwright"
    env = {"PLAYWRIGHT_BROWSERS_PATH": str(browsers)}
    fetched = session.run("playwright", "install", "chromium", env=env, success_codes=range(256), silent=True)
    probe = ("from playwright.sync_api import sync_playwright\n"
             "with sync_playwright() as p: print(p.chromium.executable_path)")
    path = session.run(py, "-c", probe, env=env, silent=True, success_codes=[0, 1]).strip().splitlines()
    if path and Path(path[-1]).is_file():
        # Playwright's build needs the system's libraries (nss, gbm, ...), which it does not bring: check it starts.
        started = subprocess.run([path[-1], "--headless", "--version"], capture_output=True, text=True, check=False)
        if started.returncode == 0:
            return {"SSD_BROWSER": path[-1]}
        fetched = f"{path[-1]} does not start: {started.stderr.strip()[-300:]}"
    lines = str(fetched).strip().splitlines()
    why = next((line for line in lines if line.startswith("Error")), lines[-1] if lines else "no output")
    session.warn(f"tests: no browser could be had (Playwright's Chromium: {why}); {found};"
                 " the browser checks will be skipped")
    return {}


@nox.session(python=None)
def tests(session: nox.Session) -> None:
    """The CPU suite, what CI runs: references, input errors, Triton interpreter, compile check, report, Dockerfile.

    Also the correctness and stability matrices with the references (GPU cases recorded not-run with the
    reason), and the report in headless Chromium (see _browser)."""
    _install(session, "test", "compile")
    browser = _browser(session)
    # What the suites write on the way is a by-product of testing them: it goes to a temporary directory, not
    # among the runs under reports/ that `nox -s report` renders; one left empty (pytest refused its arguments,
    # or wrote nothing) is removed.
    scratch = Path(tempfile.mkdtemp(prefix="ssd-tests-"))
    try:
        _pytest(session, marker=None, env={**browser, "SSD_RUN_DIR": str(scratch)})
    finally:
        _remove_if_empty(scratch)


def _remove_if_empty(directory: Path) -> None:
    """Remove ``directory`` and its folders, deepest first, where they hold no file (any file keeps its folders)."""
    for folder in sorted((d for d in directory.rglob("*") if d.is_dir()), key=lambda d: len(d.parts), reverse=True):
        with contextlib.suppress(OSError):
            folder.rmdir()
    with contextlib.suppress(OSError):
        directory.rmdir()


def _no_posargs(session: nox.Session) -> None:
    """Refuse arguments after ``--`` in a session that takes none, rather than run as if they were not given."""
    if session.posargs:
        session.error(f"{session.name} takes no arguments after --; got {' '.join(session.posargs)}")


@nox.session(python=None)
def compile(session: nox.Session) -> None:
    """Export every cuTile kernel we launch to sm_90/sm_100/sm_103 cubins; check the tensor-core MMA in the SASS
    and that each kernel fits the programs an SM it asks for."""
    _install(session, "test", "compile")  # test: pytest collects every test module, which import its packages
    _pytest(session, marker="compile")


@nox.session(python=None)
def correctness(session: nox.Session) -> None:
    """Every implementation over every kind of input, against float64 (our outputs NaN-poisoned); results file."""
    _install(session, "test", "compile", "gpu")
    _require_gpu_if_asked(session)
    _pytest(session, marker="matrix", paths=("validation/test_correctness.py",))


@nox.session(python=None)
def stability(session: nox.Session) -> None:
    """Every implementation on every regime, ragged and long sequences, x past 2**31 elements; results file."""
    _install(session, "test", "compile", "gpu")
    _require_gpu_if_asked(session)
    _pytest(session, marker="matrix", paths=("validation/test_stability.py",))


@nox.session(python=None)
def benchmark(session: nox.Session) -> None:
    """The post's sweep for cutile, triton and tilegym: float64 gate, CUPTI kernel time, wall time, the floor.

    `-- --seqlen 16384 --dstate 128 --impl cutile triton` selects a subset (`-- --help` lists the options).
    """
    _install(session, "test", "compile", "gpu")
    _require_gpu_if_asked(session)
    session.run(_python(session), "-m", "validation.bench.run", *session.posargs, **STOP_TIMEOUTS)


@nox.session(python=None)
def explore(session: nox.Session) -> None:
    """Time our kernels' tile and state-pass alternatives on this GPU, each gated on float64 first (explore_cutile).

    `-- OUT.json [--seqlen 16384] [--dstate 128 512] [--only PREFIX ...]`: data for choosing defaults, not a claim.
    """
    _install(session, "test", "compile", "gpu")
    _require_gpu_if_asked(session)
    session.run(_python(session), "-m", "validation.bench.explore_cutile", *session.posargs, **STOP_TIMEOUTS)


@nox.session(python=None)
def lint(session: nox.Session) -> None:
    """ruff over the whole tree, and the layers' import contracts (import-linter, pyproject.toml)."""
    _no_posargs(session)
    _install(session, "lint", base=False)
    session.run("ruff", "check", ".")
    session.run("lint-imports")


@nox.session(python=None)
def report(session: nox.Session) -> None:
    """Render a run's results into reports/<version>/index.html and regenerate reports/index.html (jinja2 only).

    `-- RUN_DIR [--out DIR] [--overwrite]` (default: the newest run); `-- compare A B [--overwrite]` compares two.
    """
    _install(session, "report", base=False)
    compare = session.posargs[:1] == ["compare"]
    args = session.posargs[1:] if compare else session.posargs
    session.run(_python(session), "-m", "reports.compare" if compare else "reports.render", *args)


@nox.session(python=None)
def validate(session: nox.Session) -> None:
    """The main job: compile check, CPU tests, correctness, stability, benchmark, the report, then a summary.

    A failing suite does not stop the next one or the report. The closing summary (validation/summary.py)
    counts every status per suite and implementation and fails the session on any failure of ours or a
    missing results file; a peer's failure is a finding, printed, not a session failure.
    Without a GPU the GPU suites record their cases as not-run (with the reason) and the report says so.
    Arguments after `--` are the benchmark's (`-- --help` lists them); they are checked before the first step.
    Ctrl-C or SIGTERM keeps what finished (the running suite records the rest not-run) and starts no further step.
    """
    _install(session, "test", "compile", "gpu")
    py = _python(session)
    benchmark = (py, "-m", "validation.bench.run", *session.posargs)
    if {"-h", "--help"} & set(session.posargs):
        session.run(*benchmark)  # the benchmark's options, and nothing run
        return
    try:  # a typo in the benchmark's arguments fails now, in seconds, not after the suites before it
        session.run(*benchmark[:3], "--check-args", *session.posargs, silent=True)
    except nox.command.CommandFailed:
        session.error(f"validate: the benchmark refused its arguments ({' '.join(session.posargs)}): see above; "
                      "nothing was run")
    has_gpu = _has_gpu(session)
    _require_gpu_if_asked(session, has_gpu)
    run_dir = _run_dir(session)
    results = _project("validation.results")
    try:  # a directory that cannot take every suite's results file is found now, not after the last suite
        results.check_run_dir(run_dir, results.SUITES)
    except results.RunDirError as err:
        session.error(f"validate: {err}")
    env = {"SSD_RUN_DIR": str(run_dir), "PYTHONHASHSEED": "0"}
    pytest = (py, "-m", "pytest", "--strict-markers", "--strict-config", "-p", "no:cacheprovider")
    cpu_tests = "not matrix and not compile and not browser and not container"
    if has_gpu:
        # The interpreter exists so that a CPU can run the Triton baseline; on a GPU it runs compiled, judged
        # by the GPU suites (and the interpreter depends on the pinned triton, which a prepared GPU box may lack).
        cpu_tests += " and not interpreter"
        session.log("validate: a GPU is here, so the Triton-under-the-interpreter tests are left to CPU runs")
    steps = [
        ("compile check", (*pytest, "-m", "compile", "validation")),
        # In parallel (pytest-xdist, a worker per core): on a GPU box they would otherwise take minutes of its time.
        ("CPU tests", (*pytest, "-n", "auto", "-m", cpu_tests, "validation")),
        ("correctness", (*pytest, "-m", "matrix", "validation/test_correctness.py")),
        ("stability", (*pytest, "-m", "matrix", "validation/test_stability.py")),
        ("benchmark", benchmark),
        ("report", (py, "-m", "reports.render", str(run_dir), "--out", str(run_dir))),
    ]
    session.log("validate: the browser and Dockerfile checks are `nox -s tests`' and CI's; they are deselected here")
    failed = []

    def not_after_a_signal(title: str) -> None:
        # A command that exits 0 after the signal (it had finished, or wrote its results and exited cleanly): nox then
        # returns from session.run as if nothing had happened, and would go on to the next step.
        if STOPPED:
            session.error(f"validate: stopped by {STOPPED[0]} before {title}; the results so far are in {run_dir}")

    for title, argv in steps:
        not_after_a_signal(title)
        session.log(f"validate: {title}: {' '.join(argv)}")
        try:
            session.run(*argv, env=env, **STOP_TIMEOUTS)
        except nox.command.CommandFailed:
            failed.append(title)
    not_after_a_signal("the summary")
    session.log(f"validate: results and report in {run_dir}")
    try:
        session.run(py, "-m", "validation.summary", str(run_dir), env=env)
    except nox.command.CommandFailed:
        failed.append("summary")
    if failed:
        session.error(f"validate: failed: {', '.join(failed)}")


def _has_gpu(session: nox.Session) -> bool:
    probe = "import torch; print(torch.cuda.is_available())"
    return session.run(_python(session), "-c", probe, silent=True).strip() == "True"


REQUIRE_GPU_ENV = "SSD_REQUIRE_GPU"


def _require_gpu_if_asked(session: nox.Session, has_gpu: bool | None = None) -> None:
    """Under SSD_REQUIRE_GPU=1 a machine where torch sees no CUDA device stops the session before any step: a GPU box
    whose driver or `docker run --gpus` did not take would otherwise record every GPU case not-run and pass.
    ``has_gpu``: what ``_has_gpu`` already answered (None: ask it, only when the variable is set)."""
    if os.environ.get(REQUIRE_GPU_ENV) == "1" and not (_has_gpu(session) if has_gpu is None else has_gpu):
        session.error(f"{session.name}: {REQUIRE_GPU_ENV}=1, but torch sees no CUDA device (torch.cuda.is_available() "
                      "is False): check `nvidia-smi`, the driver and, in a container, `docker run --gpus all`; "
                      "nothing was run")


def _run_dir(session: nox.Session) -> Path:
    """One directory for every suite of this run: $SSD_RUN_DIR (the container sets it), else a new
    reports/<suite_version>/<UTC time>/."""
    if os.environ.get("SSD_RUN_DIR"):
        return Path(os.environ["SSD_RUN_DIR"])
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return ROOT / "reports" / VERSION / stamp


@nox.session(python=None)
def lock(session: nox.Session) -> None:
    """Re-resolve requirements.lock: every package the image installs, transitive ones included, from the pins.

    One universal resolution (uv) for Python 3.11 and later on any platform; environment markers carry
    what differs between Pythons (the image has Ubuntu 24.04's 3.12, CI's stand-in Debian's)."""
    _no_posargs(session)  # `-- --help` would otherwise re-resolve and rewrite requirements.lock
    if session.venv_backend != "none":
        session.install("-c", str(CONSTRAINTS), "uv")
    wanted = sorted({*BASE, *(p for g in IMAGE_GROUPS for p in GROUPS[g]), *SESSION_TOOLS} - set(NO_DEPS))
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "image.in"
        source.write_text("\n".join(wanted) + "\n")
        out = Path(tmp) / "requirements.lock"
        if LOCK.is_file():  # uv keeps the versions of an existing output where the pins allow: no churn
            shutil.copyfile(LOCK, out)
        session.run("uv", "pip", "compile", "--quiet", "--universal", "--python-version", "3.11", "--no-header",
                    "--no-annotate", "-c", str(CONSTRAINTS), str(source), "-o", str(out))
        header = ("# Every package the image installs, transitive ones included: made by `nox -s lock` (uv pip\n"
                  "# compile --universal) from constraints.txt and pyproject.toml's groups. Do not edit by hand.\n"
                  "# mamba-ssm and tilegym are installed --no-deps on top, at constraints.txt's pins. Sessions\n"
                  "# install with it as a constraint too; `nox -s container` checks that the image holds exactly\n"
                  "# this.\n")
        LOCK.write_text(header + out.read_text())
    session.log(f"lock: wrote {LOCK} ({sum(1 for line in LOCK.read_text().splitlines() if '==' in line)} pins)")


def _container_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="nox -s container --", description=container.__doc__)
    parser.add_argument("--base", metavar="IMAGE@sha256:DIGEST",
                        help="build on this base instead of the Dockerfile's (CI: a stand-in in a local registry)")
    parser.add_argument("--ca-bundle", metavar="FILE", type=Path,
                        help="CA certificates for pip in the build, for a proxy that intercepts HTTPS")
    parser.add_argument("--index-url", metavar="URL", help="a PyPI mirror for the build")
    parser.add_argument("--docker", metavar="PATH", default=os.environ.get("SSD_DOCKER") or shutil.which("docker"),
                        help="the docker client (default: $SSD_DOCKER, else docker on PATH)")
    parser.add_argument("--gpus", metavar="WHICH", help="passed to docker run --gpus (e.g. all); default: no GPU")
    parser.add_argument("--uid", type=int, help="run the container as this uid (default: yours; 10001 if you are root)")
    args = parser.parse_args(argv)
    if args.base is not None and "@sha256:" not in args.base:
        parser.error(f"--base must be IMAGE@sha256:DIGEST (pinned by digest); got {args.base!r}")
    if args.ca_bundle is not None and not args.ca_bundle.is_file():
        parser.error(f"--ca-bundle {args.ca_bundle}: no such file")
    if not args.docker or not Path(args.docker).is_file():
        parser.error(f"no docker client (--docker {args.docker!r}): install Docker, or pass --docker PATH")
    return args


def _timed(session: nox.Session, what: str, argv: list[str], times: dict[str, float], **kwargs) -> str:
    start = time.monotonic()
    out = session.run(*argv, external=True, **kwargs)
    times[what] = time.monotonic() - start
    session.log(f"container: {what} took {times[what]:.0f} s")
    return out if isinstance(out, str) else ""


@nox.session(python=None, venv_backend="none")
def container(session: nox.Session) -> None:
    """Build the image, run its default command without a GPU, and check what it wrote (needs Docker).

    The run is read-only, as a non-root uid; the checks: exit 0, every suite's results file readable here, the
    report, the provenance, and that the image holds exactly requirements.lock. About 3 GB of downloads.

    `-- --base IMAGE@sha256:DIGEST` builds on another base, `--ca-bundle FILE` and `--index-url URL` reach PyPI
    through a proxy or a mirror, `--gpus all` runs on the GPUs (`-- --help` lists the options)."""
    args = _container_args(session.posargs)
    docker = [args.docker]
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
    commit = commit.stdout.strip()
    tag = f"ssd-repro:{VERSION}-{commit[:12]}"
    build = [*docker, "build", "--progress=plain", "-t", tag, "--build-arg", f"SSD_VERSION={VERSION}",
             "--build-arg", f"SSD_GIT_COMMIT={commit}", "--build-arg", f"SSD_IMAGE={tag}"]
    if args.base:
        image, digest = args.base.split("@", 1)
        build += ["--build-arg", f"CUDA_BASE_IMAGE={image}", "--build-arg", f"CUDA_BASE_DIGEST={digest}"]
    if args.ca_bundle:
        build += ["--secret", f"id=ca_bundle,src={args.ca_bundle.resolve()}"]
    if args.index_url:
        build += ["--build-arg", f"SSD_PIP_INDEX_URL={args.index_url}"]
    times: dict[str, float] = {}
    _timed(session, "build", [*build, str(ROOT)], times, env={"DOCKER_BUILDKIT": "1"})
    _timed(session, "lock check", [*docker, "run", "--rm", "--entrypoint", "python", tag, "-m", "validation.lock"],
           times)

    refused = subprocess.run([*docker, "run", "--rm", tag], capture_output=True, text=True, check=False)
    if refused.returncode != 2 or "nothing is mounted on /results" not in refused.stderr:
        session.error(f"container: a run without a mounted /results was not refused (exit {refused.returncode}): "
                      f"{refused.stderr.strip()[-500:]}")
    session.log("container: a run without a mounted /results is refused: " + refused.stderr.strip().splitlines()[0])

    uid = args.uid if args.uid is not None else (10001 if os.getuid() == 0 else os.getuid())
    results = Path(tempfile.mkdtemp(prefix="ssd-container-results-"))
    if os.getuid() == 0:
        os.chown(results, uid, uid)
    run = [*docker, "run", "--rm", "--read-only", "--tmpfs", "/tmp:rw,exec", "--user", f"{uid}:{uid}",
           "-v", f"{results}:/results"]
    if args.gpus:  # a GPU asked for must be seen inside, or the run stops at once (SSD_REQUIRE_GPU)
        run += ["--gpus", args.gpus, "-e", "NVIDIA_DISABLE_REQUIRE=1", "-e", f"{REQUIRE_GPU_ENV}=1"]
    _timed(session, "validate in the container", [*run, tag], times)
    _check_container_run(session, results, uid, tag, args.base)
    session.log("container: " + ", ".join(f"{k} {v:.0f} s" for k, v in times.items()) + f"; results in {results}")


def _check_container_run(session: nox.Session, results: Path, uid: int, tag: str, base: str | None) -> None:
    """Every suite's results file in the one run directory, readable by this user, with the image's provenance,
    and the rendered report beside them."""
    runs = [d for d in results.iterdir() if d.is_dir()]
    if len(runs) != 1:
        session.error(f"container: expected one run directory in {results}; found {[d.name for d in runs]}")
    raw = runs[0] / "raw"
    problems = []
    suites = _suites()
    for suite in suites:
        path = raw / f"{suite}.json"
        if not path.is_file():
            problems.append(f"{path} is missing")
            continue
        mode = path.stat().st_mode
        readable = bool(mode & 0o004) or (path.stat().st_uid == os.getuid() and mode & 0o400)
        if not readable:
            problems.append(f"{path} (mode {mode & 0o777:o}, uid {path.stat().st_uid}) is not readable by"
                            f" uid {os.getuid()}")
            continue
        env = json.loads(path.read_text())["environment"]
        digest = base.split("@", 1)[1] if base else None
        want = {"container_image": tag, "git_commit": None, "base_image_digest": digest}
        for key, value in want.items():
            if env.get(key) is None or (value is not None and env[key] != value):
                problems.append(f"{path}: environment.{key} is {env.get(key)!r}, expected {value or 'a value'!r}")
    if not (runs[0] / "index.html").is_file():
        problems.append(f"{runs[0] / 'index.html'} (the report) is missing")
    if problems:
        session.error("container: " + "; ".join(problems))
    session.log(f"container: {len(suites)} results files and the report in {runs[0]} (written as uid {uid})")


def _project(module: str):
    """A module of this project (standard library only at import, like validation.results), imported from the tree
    by the Python that runs nox."""
    sys.path.insert(0, str(ROOT))
    try:
        return importlib.import_module(module)
    finally:
        sys.path.remove(str(ROOT))


def _suites() -> tuple[str, ...]:
    """The suites a complete validate run writes a results file for, as validation/results.py names them."""
    return _project("validation.results").SUITES
