"""The suite's one runner of child processes (validation/isolated.py): a dead worker costs its case, a signal to
the parent stops every child and is reported, and no child outlives its parent, even one killed by SIGKILL.

Real processes on the CPU; the children only sleep and write their pid, so each test takes a few seconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import pytest

from validation import isolated
from validation.provenance import ROOT

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG and /proc: Linux")


def _square(x: int) -> int:
    return x * x


def _getenv(name: str) -> str | None:
    return os.environ.get(name)


def _die(code: int) -> None:
    os._exit(code)


def _pid_then_sleep(folder: str) -> int:
    """In a worker or a child: write this process's pid into ``folder``, then sleep far longer than any test."""
    Path(folder, f"{os.getpid()}.pid").write_text("")
    time.sleep(600)
    return os.getpid()


def _pids(folder: Path) -> list[int]:
    return [int(p.stem) for p in folder.glob("*.pid")]


def _alive(pid: int) -> bool:
    """Running (a zombie, dead and waiting for its parent to read its status, counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _wait_for(predicate, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"after {seconds:.0f} s: {what}")
        time.sleep(0.05)


def test_a_dead_worker_costs_only_what_it_ran() -> None:
    with isolated.Pool(1) as pool:
        assert pool.submit(_square, 3).result(timeout=120) == 9
        with pytest.raises(BrokenProcessPool):
            pool.submit(_die, 7).result(timeout=120)
        assert pool.submit(_square, 4).result(timeout=120) == 16, "no new worker after a crash"
        assert pool.restarts == 1


def test_workers_get_the_environment_first() -> None:
    with isolated.Pool(1, env={"SSD_ISOLATED_PROBE": "yes"}) as pool:
        assert pool.submit(_getenv, "SSD_ISOLATED_PROBE").result(timeout=120) == "yes"


def test_a_signal_reaches_only_the_workers_of_its_own_pools() -> None:
    """A run's Stop forwards to the pools made with it, never to another pool of the same process (the compile
    test's pool lives through the whole test session)."""
    with isolated.Pool(1) as other:
        assert other.submit(_square, 2).result(timeout=120) == 4
        stop = isolated.Stop()
        with isolated.Pool(1, stop=stop) as own:
            assert own.submit(_square, 3).result(timeout=120) == 9
            [worker] = own.workers()
            stop(signal.SIGTERM)
            _wait_for(lambda: not worker.is_alive(), 10, "the run's own worker did not get the signal")
        assert not stop.children, "a pool outlived its block in its Stop"
        assert other.submit(_square, 5).result(timeout=120) == 25 and other.restarts == 0, "the other pool was hit"


def test_jobs_must_be_positive() -> None:
    with pytest.raises(ValueError, match=r"^Pool: jobs must be >= 1; got 0$"):
        isolated.Pool(0)


# A parent as a suite runs one: two pool workers and one popen child, each sleeping, under Stop.handling.
PARENT = textwrap.dedent("""
    import sys, time
    from validation import isolated
    from validation.test_isolated import _pid_then_sleep

    folder = sys.argv[1]
    stop = isolated.Stop()
    try:
        with stop.handling(), isolated.Pool(2, stop=stop) as pool:
            child = isolated.popen("validation.test_isolated", folder, stop=stop)
            futures = [pool.submit(_pid_then_sleep, folder) for _ in range(4)]
            while stop.signum is None:
                time.sleep(0.05)
            child.wait()
        stop.raise_if_stopped()
    except isolated.Interrupted as stopped:
        print("stopped by", stopped.signame, flush=True)
        sys.exit(128 + stop.signum)
""")


def _start_parent(folder: Path) -> subprocess.Popen:
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(folder)], cwd=ROOT, start_new_session=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(
                                  p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)})
    try:
        _wait_for(lambda: len(_pids(folder)) >= 3 or parent.poll() is not None, 120,
                  "the two workers and the child did not start")
    except AssertionError:
        os.killpg(parent.pid, signal.SIGKILL)
        raise
    assert parent.poll() is None, parent.communicate()[0][-3000:]
    return parent


@pytest.mark.parametrize("signame,to", [("SIGTERM", "parent"), ("SIGINT", "parent"), ("SIGINT", "group")],
                         ids=["sigterm_to_parent", "sigint_to_parent", "ctrl_c_to_group"])
def test_a_signal_stops_every_child_and_is_reported(signame: str, to: str, tmp_path: Path) -> None:
    parent = _start_parent(tmp_path)
    signum = getattr(signal, signame)
    out = isolated.signal_and_wait(parent, signum, group=to == "group", timeout=isolated.KILL_AFTER_S + 60)
    assert parent.returncode == 128 + signum, out[-3000:]
    assert f"stopped by {signame}" in out
    _wait_for(lambda: not [p for p in _pids(tmp_path) if _alive(p)], 5, "a child outlived its stopped parent")


def test_no_child_outlives_a_parent_killed_by_sigkill(tmp_path: Path) -> None:
    parent = _start_parent(tmp_path)
    parent.kill()  # no handler runs: the kernel's PR_SET_PDEATHSIG is what stops the children
    parent.communicate(timeout=30)
    _wait_for(lambda: not [p for p in _pids(tmp_path) if _alive(p)], 10,
              f"children {[p for p in _pids(tmp_path) if _alive(p)]} outlived a parent killed by SIGKILL")


if __name__ == "__main__":  # the popen child of PARENT
    _pid_then_sleep(sys.argv[1])


@pytest.mark.parametrize("args,code,says", [
    ([], 2, "error: expected a MODULE to run; got nothing"),
    (["no_such_module.anywhere"], 2, "error: MODULE: no module named 'no_such_module.anywhere'"),
    (["--help"], 0, "usage: python -m validation.isolated [-h] MODULE [ARGS ...]"),
], ids=["no-module", "unknown-module", "help"])
def test_the_child_entry_point_says_what_it_expects(args: list[str], code: int, says: str) -> None:
    done = subprocess.run([sys.executable, "-m", "validation.isolated", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == code, done.stderr[-2000:]
    assert says in done.stdout + done.stderr and "Traceback" not in done.stderr, done.stderr[-2000:]
