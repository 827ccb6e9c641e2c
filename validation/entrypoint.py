"""The container's entrypoint: make the run directory on the mounted /results, say where it is, run the command.

    ENTRYPOINT ["python", "/opt/ssd-repro/validation/entrypoint.py"]   CMD ["nox", "--no-venv", "-s", "validate"]

A run whose results would vanish with the container is refused before any work: nothing mounted on
``$SSD_RESULTS`` (the image sets /results) means exit 2 with what to pass, unless the user says
``-e SSD_RESULTS_IN_CONTAINER=1``. Each run gets a new directory, ``$SSD_RESULTS/<UTC time>``, unless
``-e SSD_RUN_DIR=...`` names one; it must not already hold results. Standard library only: it runs before
anything else and must not fail on an import.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

MOUNTINFO = Path("/proc/self/mountinfo")
IN_CONTAINER_ENV = "SSD_RESULTS_IN_CONTAINER"


def _unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash in paths as octal escapes."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def mount_points(mountinfo: str) -> set[str]:
    """The mount points listed in a ``/proc/<pid>/mountinfo`` text (its fifth field)."""
    return {_unescape(line.split()[4]) for line in mountinfo.splitlines() if len(line.split()) > 4}


def is_mounted(path: Path, mountinfo: str) -> bool:
    """Whether ``path`` or a directory above it, below ``/``, is a mount point (a bind mount of the host's)."""
    points = mount_points(mountinfo)
    path = Path(os.path.normpath(path))
    return any(str(p) in points for p in (path, *path.parents) if str(p) != "/")


def prepare(env: dict[str, str], mountinfo: str, stamp: str) -> Path:
    """The run directory for this run, made; ``SystemExit`` with one clear message when it cannot be."""
    results = Path(env.get("SSD_RESULTS", "/results"))
    if not is_mounted(results, mountinfo) and env.get(IN_CONTAINER_ENV) != "1":
        raise SystemExit(
            f"ssd-repro: nothing is mounted on {results}, so the results would be lost with the container.\n"
            "  Mount a directory you can write: docker run ... --user \"$(id -u):$(id -g)\""
            f' -v "$PWD/results:{results}" ...\n'
            f"  or keep them inside the container on purpose: -e {IN_CONTAINER_ENV}=1")
    run_dir = Path(env.get("SSD_RUN_DIR") or results / stamp)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise SystemExit(f"ssd-repro: cannot make the run directory {run_dir} as uid {os.getuid()}: {err.strerror}."
                         f" Mount a directory this uid can write on {results} (docker run --user \"$(id -u):$(id -g)\")"
                         ) from None
    if not os.access(run_dir, os.W_OK):
        raise SystemExit(f"ssd-repro: the run directory {run_dir} is not writable by uid {os.getuid()}")
    # raw/ holds finished suites, partial/ what a run killed outright measured: either is a run's results.
    taken = sorted(str(p.relative_to(run_dir)) for sub in ("raw", "partial") for p in (run_dir / sub).glob("*.json"))
    if taken:
        raise SystemExit(f"ssd-repro: {run_dir} already holds results ({', '.join(taken)}); results are never"
                         " overwritten: pass another SSD_RUN_DIR or none (a new directory per run)")
    return run_dir


def main(argv: list[str]) -> int:
    if not argv:
        print("ssd-repro: no command to run (the image's default is nox --no-venv -s validate)", file=sys.stderr)
        return 2
    try:
        mountinfo = MOUNTINFO.read_text()
    except OSError:
        mountinfo = ""
    try:
        run_dir = prepare(dict(os.environ), mountinfo, time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()))
    except SystemExit as err:
        print(err, file=sys.stderr)
        return 2
    os.environ["SSD_RUN_DIR"] = str(run_dir)
    print(f"results: {run_dir}", flush=True)
    try:
        os.execvp(argv[0], argv)
    except OSError as err:
        print(f"ssd-repro: cannot run {argv[0]}: {err.strerror}", file=sys.stderr)
        return 127
    return 0  # not reached: exec replaces this process


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
