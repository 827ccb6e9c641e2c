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
