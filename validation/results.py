"""Results files per the contract in docs/design.md: one JSON per suite run, written atomically, never replaced.

Where: ``$SSD_RUN_DIR/raw/<suite>.json`` when the variable is set (``nox -s validate`` sets one run
directory for all its suites), else ``reports/<suite_version>/<run_id>/raw/<suite>.json``.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from validation.provenance import ROOT, environment, now_iso, suite_version
from validation.schema import SCHEMA_VERSION, STATUSES, SUITES, CaseRecord, jsonable, printable

__all__ = ["SCHEMA_VERSION", "STATUSES", "SUITES", "CaseRecord", "ResultsFile", "RunDirError", "check_run_dir",
           "run_dir", "write_json_atomic", "write_text_atomic"]


# Every results file this process wrote, in order: pytest's conftest prints them at the end of its run (a
# fixture's own print would be captured), a command-line suite as it writes.
written: list[Path] = []

# A second record of an id replaces the first only if it says more (later in this order): a reader refuses a
# file with an id twice. Two records of one id are real: pytest reports a test's teardown error after its
# passing call, and a stopped benchmark records every case of its unfinished point not-run, the ones measured too.
_SAYS_MORE = ("not-run", "unsupported", "pass", "fail", "crashed")


def run_dir() -> Path:
    if os.environ.get("SSD_RUN_DIR"):
        return Path(os.environ["SSD_RUN_DIR"])
    run_id = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return ROOT / "reports" / suite_version() / run_id


class RunDirError(RuntimeError):
    """The run directory cannot take this session's results: said before any work, in one line."""


def check_run_dir(directory: Path, suites: tuple[str, ...] | list[str]) -> Path:
    """``directory`` if it can take the results files of ``suites``: it is (or can be made) a directory this process
    can write in, and holds none of ``raw/<suite>.json`` already (results are never overwritten), nor a
    ``partial/<suite>.json`` (what a run killed outright measured: this run's first checkpoint would replace it).
    Otherwise :class:`RunDirError` naming the directory and what is wrong, so that a session fails before its first
    case rather than after its last."""
    try:
        (directory / "raw").mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise RunDirError(f"the run directory {directory} cannot be made: {err.strerror}; "
                          "set SSD_RUN_DIR to a directory you can write, or leave it unset") from None
    for where in (directory, directory / "raw"):
        try:
            fd, probe = tempfile.mkstemp(dir=where, prefix=".write-check-")
        except OSError as err:
            raise RunDirError(f"the run directory {where} is not writable ({err.strerror}); set SSD_RUN_DIR to a "
                              "directory you can write, or leave it unset (a new one per run)") from None
        os.close(fd)
        os.unlink(probe)
    # lexists: a dangling link there would refuse the write at the end, after the run
    taken = [s for s in suites if os.path.lexists(directory / "raw" / f"{s}.json")]
    if taken:
        raise RunDirError(f"the run directory {directory} already holds results of {', '.join(taken)} "
                          f"(raw/{taken[0]}.json); results are never overwritten: set SSD_RUN_DIR to a new "
                          "directory, or leave it unset (a new one per run)")
    stopped = [s for s in suites if os.path.lexists(directory / "partial" / f"{s}.json")]
    if stopped:
        raise RunDirError(f"the run directory {directory} holds {', '.join(f'partial/{s}.json' for s in stopped)}: "
                          "what a stopped run measured, which a new run there would replace: set SSD_RUN_DIR to a new "
                          "directory, or leave it unset (a new one per run)")
    return directory


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# What open() would give a new file: 0644 under the usual umask 022 (the container's too).
_FILE_MODE = 0o666 & ~_umask()


def write_text_atomic(path: Path, data: str | bytes, *, overwrite: bool = False) -> Path:
    """Write ``data`` to ``path`` in one step: a reader sees the old file or the whole new one.

    Without ``overwrite`` an existing file is never replaced (``FileExistsError``). The file gets the mode a
    plain ``open`` would give it (0644 under umask 022), not ``mkstemp``'s 0600.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, _FILE_MODE)  # mkstemp makes 0600; results are for every reader the umask allows
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        if overwrite:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)  # fails if path exists: no clobbering, still atomic
            except FileExistsError:
                raise FileExistsError(f"{path} exists and is never overwritten unless asked") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def write_json_atomic(path: Path, payload: object, *, overwrite: bool = False) -> Path:
    """``payload`` as JSON (NaN and Inf as strings), written by ``write_text_atomic``."""
    text = json.dumps(jsonable(payload), indent=1, allow_nan=False) + "\n"
    return write_text_atomic(path, text, overwrite=overwrite)


class ResultsFile:
    """Collects the cases of one suite run (each a :class:`~validation.schema.CaseRecord`) and writes them as
    ``<run_dir>/raw/<suite>.json``."""

    def __init__(self, suite: str, directory: Path | None = None, *, check: bool = False) -> None:
        """``check``: make sure now, before any work, that the run directory can take this file
        (:func:`check_run_dir`)."""
        if suite not in SUITES:
            raise ValueError(f"suite must be one of {SUITES}; got {suite!r}")
        self.suite = suite
        self.directory = directory or run_dir()
        if check:
            check_run_dir(self.directory, (suite,))
        self.created = now_iso()
        self.cases: list[CaseRecord] = []
        self._checkpoint_env: dict[str, object] | None = None  # read at the first checkpoint
        self.interrupted: str | None = None  # the signal that stopped the run, when one did

    def add(self, case: CaseRecord) -> None:
        """One more case: a :class:`~validation.schema.CaseRecord`, checked against the contract when it was
        built; anything else (a dict) is a TypeError. A case of an id already added replaces that one only if it
        says more (``_SAYS_MORE``): the file holds each id once."""
        if not isinstance(case, CaseRecord):
            raise TypeError(f"ResultsFile.add takes a validation.schema.CaseRecord, not a {type(case).__name__}: "
                            "build the case with CaseRecord(id=..., impl=..., status=..., ...), which checks it")
        same = next((i for i, c in enumerate(self.cases) if c.id == case.id), None)
        if same is None:
            self.cases.append(case)
        elif _SAYS_MORE.index(case.status) >= _SAYS_MORE.index(self.cases[same].status):
            self.cases[same] = case

    def summary(self) -> dict[str, int]:
        return {s: sum(c.status == s for c in self.cases) for s in STATUSES}

    def _payload(self, env: dict[str, object], extra: dict[str, object]) -> dict[str, object]:
        # The environment and the suite's own fields hold text read from elsewhere (a tool's version line, a GPU's
        # name): escaped as the cases' prose is (schema.printable), so that every reader can take the file.
        return {"schema_version": SCHEMA_VERSION, "suite": self.suite, "suite_version": suite_version(),
                "created": self.created, "finished": now_iso(), "environment": printable(env),
                "summary": self.summary(), **printable(extra), "cases": [c.as_dict() for c in self.cases]}

    def _environment(self) -> dict[str, object]:
        seeds = sorted({c.seed for c in self.cases if c.seed is not None})
        return environment(seeds or None)

    @property
    def partial_path(self) -> Path:
        """Where :meth:`checkpoint` keeps the cases so far: beside ``raw/``, which reports read, not in it."""
        return self.directory / "partial" / f"{self.suite}.json"

    def checkpoint(self, **extra: object) -> Path:
        """Write the cases so far to :attr:`partial_path`, replacing the previous checkpoint, so that a run killed
        outright (SIGKILL, a lost machine) still leaves what it measured. The environment is read once, at the
        first checkpoint; :meth:`write` reads it again and removes the checkpoint."""
        if self._checkpoint_env is None:
            self._checkpoint_env = self._environment()
        payload = {**self._payload(self._checkpoint_env, extra), "partial": True}
        return write_json_atomic(self.partial_path, payload, overwrite=True)

    def write(self, **extra: object) -> Path:
        """Write the file; ``extra`` adds suite-specific top-level fields (e.g. the benchmark's ceilings). After a
        checkpoint, the environment read then is reused when the run was interrupted (``interrupted`` in
        ``extra``): reading it again takes seconds a stopping process may not have."""
        env = self._checkpoint_env if extra.get("interrupted") and self._checkpoint_env else self._environment()
        path = write_json_atomic(self.directory / "raw" / f"{self.suite}.json", self._payload(env, extra))
        written.append(path)
        self.partial_path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # only if empty: another suite's checkpoint may be there
            self.partial_path.parent.rmdir()
        return path
