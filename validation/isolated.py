"""Work in child processes: the one runner of the suite's five callers.

The validation matrix (each case in a child, ``validation.matrix``), the benchmark's compile phase (first calls
in a process pool, ``validation.bench.precompile``), TileGym's cache warm-up (one process per slice of its
search space, ``validation.bench.tilegym_tuning``), the Triton interpreter's test (one child under
``TRITON_INTERPRET=1``) and the compile test (kernel exports in a process pool) all start their children
here, and so all get the same guarantees:

- **No child outlives its parent.** Every child asks the kernel (Linux, ``PR_SET_PDEATHSIG``) for SIGTERM when
  the process that started it dies, even by SIGKILL; Ctrl-C (SIGINT) stops a child at once.
- **A signal stops the whole tree.** While :meth:`Stop.handling` is in effect, SIGINT and SIGTERM to the parent
  are remembered (``Stop.signum``) and forwarded to every child alive, pool workers included; a child still
  running ``KILL_AFTER_S`` later is killed. The caller starts nothing new, records what did not finish as
  ``not-run`` with :attr:`Stop.reason` (``interrupted: SIGTERM arrived before ...``), writes its results, and
  exits 128 + the signal's number.
- **A crash costs what it was running.** The matrix starts a new child after a crash (it knows the case from
  the child's progress file); :class:`Pool` starts new workers when one dies, and the futures that were running
  then fail with ``BrokenProcessPool``.

Two entry points: :func:`popen` (``python -m validation.isolated MODULE ARGS...``, which sets the child up and
runs ``MODULE`` as ``__main__``) and :class:`Pool` (a spawn ``ProcessPoolExecutor`` whose workers are set up
the same way).
"""

from __future__ import annotations

import contextlib
import importlib.util
import multiprocessing
import os
import runpy
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

__all__ = ["KILL_AFTER_S", "Interrupted", "Pool", "Stop", "die_with_parent", "popen", "signal_and_wait"]

KILL_AFTER_S = 10.0  # after a forwarded signal, a child still running this long later is killed


def die_with_parent() -> None:
    """In a child: SIGTERM from the kernel when the parent dies (Linux; elsewhere nothing), Ctrl-C stops at once."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class Interrupted(KeyboardInterrupt):
    """A run stopped by a signal: its message says why, ``signame`` names the signal (``SIGTERM``)."""

    def __init__(self, why: str, signame: str) -> None:
        super().__init__(why)
        self.signame = signame


class Stop:
    """What a run's threads share about stopping: the signal that arrived (None while running) and the children to
    forward it to (those started by :func:`popen` with this object, and the workers of each :class:`Pool` made with
    it; no other process)."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.children: set[subprocess.Popen | Pool] = set()
        self._lock = threading.Lock()

    @property
    def reason(self) -> str:
        return f"interrupted: {self.name} arrived before this case finished"

    @property
    def name(self) -> str | None:
        """The signal's name (``SIGTERM``), or None while running."""
        return None if self.signum is None else signal.Signals(self.signum).name

    def add(self, child: subprocess.Popen | Pool) -> None:
        """Forward signals to ``child`` (a process, or every worker of a pool) from now on."""
        with self._lock:
            self.children.add(child)
        if self.signum is not None:  # it came while this child was starting
            for process in self._processes([child]):
                _send(process, self.signum)

    def discard(self, child: subprocess.Popen | Pool) -> None:
        with self._lock:
            self.children.discard(child)

    @staticmethod
    def _processes(children) -> list:
        return [p for c in children for p in (c.workers() if isinstance(c, Pool) else [c] if c.poll() is None
                                              else [])]

    def _alive(self) -> list:
        with self._lock:
            children = list(self.children)
        return self._processes(children)

    def __call__(self, signum: int, frame: object = None) -> None:
        """The signal handler: remember the signal, forward it, and kill what still runs after KILL_AFTER_S."""
        first = self.signum is None
        self.signum = signum
        for child in self._alive():
            _send(child, signum)
        if first:
            timer = threading.Timer(KILL_AFTER_S, lambda: [_send(c, signal.SIGKILL) for c in self._alive()])
            timer.daemon = True
            timer.start()

    @contextlib.contextmanager
    def handling(self) -> Iterator[Stop]:
        """SIGINT and SIGTERM call this object while inside (main thread only; elsewhere nothing changes). SIGINT
        is handled even where it was ignored (a job started in the background): nox passes SIGTERM on to its
        command as SIGINT, and a run it stops must write what finished at once."""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = {sig: signal.signal(sig, self) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield self
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def wait(self, timeout: float) -> bool:
        """Whether a signal has arrived, waiting up to ``timeout`` seconds for one (a handler runs in the main thread,
        so another thread can see the signal's effects, a child it killed, before the handler has run)."""
        deadline = time.monotonic() + timeout
        while self.signum is None and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.signum is not None

    def raise_if_stopped(self) -> None:
        """:class:`Interrupted` once a signal has arrived, for callers that stop by that exception."""
        if self.signum is not None:
            raise Interrupted(f"interrupted: {self.name}", self.name)


def _send(child, signum: int) -> None:
    """Signal a Popen or a multiprocessing child; one already gone is fine."""
    with contextlib.suppress(ProcessLookupError, ValueError, AttributeError):
        if isinstance(child, subprocess.Popen):
            child.send_signal(signum)
        elif child.pid is not None:
            os.kill(child.pid, signum)


def popen(module: str, *args: str, stop: Stop | None = None, env: dict[str, str] | None = None,
          **kwargs) -> subprocess.Popen:
    """Start ``python -m module args...`` as an isolated child (``env`` added to this environment), registered with
    ``stop`` so that a signal reaches it. ``kwargs`` go to ``subprocess.Popen`` (stdout, stderr, text, cwd)."""
    child = subprocess.Popen([sys.executable, "-m", __name__, module, *args], env={**os.environ, **(env or {})},
                             **kwargs)
    if stop is not None:
        stop.add(child)
    return child


def signal_and_wait(child: subprocess.Popen, signum: int, *, group: bool = False, timeout: float) -> str:
    """Send ``signum`` to a child started in a session of its own (to its whole process group with ``group``, as
    Ctrl-C in a terminal does) and return its output once it has ended. Still running ``timeout`` seconds later:
    its group is killed and TimeoutError raised."""
    if group:
        os.killpg(child.pid, signum)
    else:
        child.send_signal(signum)
    try:
        out, _ = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.communicate()
        raise TimeoutError(f"{child.args!r} did not stop within {timeout:.0f} s of "
                           f"{signal.Signals(signum).name}") from None
    return out or ""


def _start_worker(env: dict[str, str], initializer: Callable | None, initargs: tuple) -> None:
    die_with_parent()
    os.environ.update(env)
    if initializer is not None:
        initializer(*initargs)


class Pool:
    """A pool of ``jobs`` spawned worker processes (``env`` added to their environment before anything else
    runs in them, then ``initializer(*initargs)``), each set up as :func:`popen`'s children are. When a worker
    dies, the futures running then fail with ``BrokenProcessPool`` and the next :meth:`submit` starts a new pool
    (the initializer runs again in each new worker). Leaving the block cancels what has not started and waits for
    what runs; after a signal (see :class:`Stop`) or an exception, the workers are stopped first."""

    def __init__(self, jobs: int, *, env: dict[str, str] | None = None, initializer: Callable | None = None,
                 initargs: Sequence = (), stop: Stop | None = None) -> None:
        if jobs < 1:
            raise ValueError(f"Pool: jobs must be >= 1; got {jobs}")
        self.jobs, self.stop = jobs, stop
        self._initargs = (dict(env or {}), initializer, tuple(initargs))
        self._context = multiprocessing.get_context("spawn")
        self._executor = self._start()
        self.restarts = 0
        if stop is not None:
            stop.add(self)

    def _start(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(max_workers=self.jobs, mp_context=self._context, initializer=_start_worker,
                                   initargs=self._initargs)

    def workers(self) -> list[multiprocessing.process.BaseProcess]:
        """The worker processes alive now (read from the executor, which has no public list of them)."""
        processes = getattr(self._executor, "_processes", None) or {}
        return [p for p in list(processes.values()) if p.is_alive()]

    def submit(self, fn: Callable, *args, **kwargs) -> Future:
        if self.stop is not None:
            self.stop.raise_if_stopped()
        try:
            return self._executor.submit(fn, *args, **kwargs)
        except BrokenProcessPool:  # a worker died: the rest of the pool is gone with it; start anew
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = self._start()
            self.restarts += 1
            return self._executor.submit(fn, *args, **kwargs)

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        stopped = exc[0] is not None or (self.stop is not None and self.stop.signum is not None)
        if stopped:
            for worker in self.workers():
                _send(worker, signal.SIGTERM)
        self._executor.shutdown(wait=True, cancel_futures=True)
        if self.stop is not None:
            self.stop.discard(self)


USAGE = "usage: python -m validation.isolated [-h] MODULE [ARGS ...]"


def _main(argv: list[str]) -> int | None:
    """``python -m validation.isolated MODULE ARGS...``: set this child up, then run MODULE as __main__ with ARGS
    (everything after MODULE is MODULE's). A missing or unknown MODULE: one line, exit 2."""
    die_with_parent()
    if argv[:1] in (["-h"], ["--help"]):
        print(f"{USAGE}\n\nRun MODULE as __main__ with ARGS in a child set up as the suite's children are: it dies "
              "with its parent, and Ctrl-C stops it at once (the suite starts its children this way).")
        return 0
    if not argv or argv[0].startswith("-"):
        print(f"{USAGE}\npython -m validation.isolated: error: expected a MODULE to run; got "
              f"{argv[0] if argv else 'nothing'}", file=sys.stderr)
        return 2
    target = argv[0]
    try:
        found = importlib.util.find_spec(target)
    except (ImportError, ValueError):
        found = None
    if found is None:
        print(f"{USAGE}\npython -m validation.isolated: error: MODULE: no module named {target!r}", file=sys.stderr)
        return 2
    sys.argv = [target, *argv[1:]]
    runpy.run_module(target, run_name="__main__", alter_sys=True)
    return None


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
