"""The container's entrypoint (validation/entrypoint.py): a run whose results would be lost, or would land in a
directory that cannot take them, is refused before any work, with one line saying what to do."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from validation import entrypoint

ROOT_ONLY = "22 1 0:21 / / rw,relatime - overlay overlay rw\n"


def _mounted(path: Path) -> str:
    escaped = str(path).replace(" ", "\\040")
    return ROOT_ONLY + f"90 22 8:1 /host/results {escaped} rw,relatime - ext4 /dev/sda1 rw\n"


def test_mount_points_unescape_spaces() -> None:
    assert "/re sults" in entrypoint.mount_points(_mounted(Path("/re sults")))


def test_nothing_mounted_on_results_is_refused(tmp_path: Path) -> None:
    refusal = r"(?s)nothing is mounted on .*-v \"\$PWD/results:.*SSD_RESULTS_IN_CONTAINER=1"
    with pytest.raises(SystemExit, match=refusal):
        entrypoint.prepare({"SSD_RESULTS": str(tmp_path)}, ROOT_ONLY, "20261201T000000Z")
    assert not any(tmp_path.iterdir()), "a refused run left something behind"


def test_results_inside_the_container_when_asked(tmp_path: Path) -> None:
    env = {"SSD_RESULTS": str(tmp_path), "SSD_RESULTS_IN_CONTAINER": "1"}
    assert entrypoint.prepare(env, ROOT_ONLY, "20261201T000000Z") == tmp_path / "20261201T000000Z"


def test_a_mounted_results_directory_gets_a_new_run_directory(tmp_path: Path) -> None:
    run_dir = entrypoint.prepare({"SSD_RESULTS": str(tmp_path)}, _mounted(tmp_path), "20261201T000000Z")
    assert run_dir == tmp_path / "20261201T000000Z" and run_dir.is_dir()


@pytest.mark.parametrize("sub", ["raw", "partial"])
def test_a_run_directory_holding_results_is_refused(tmp_path: Path, sub: str) -> None:
    # partial/ holds what a run killed outright measured: results as much as raw/'s.
    (tmp_path / "run" / sub).mkdir(parents=True)
    (tmp_path / "run" / sub / "correctness.json").write_text("{}")
    env = {"SSD_RESULTS": str(tmp_path), "SSD_RUN_DIR": str(tmp_path / "run")}
    with pytest.raises(SystemExit, match=f"already holds results \\({sub}/correctness.json\\)"):
        entrypoint.prepare(env, _mounted(tmp_path), "20261201T000000Z")


def test_a_results_directory_that_cannot_be_made_is_refused(tmp_path: Path) -> None:
    results = tmp_path / "a-file"
    results.write_text("not a directory")
    with pytest.raises(SystemExit, match="cannot make the run directory .*Mount a directory this uid can write"):
        entrypoint.prepare({"SSD_RESULTS": str(results)}, _mounted(results), "20261201T000000Z")


def test_the_script_prints_the_run_directory_and_runs_the_command(tmp_path: Path) -> None:
    env = {**os.environ, "SSD_RESULTS": str(tmp_path), "SSD_RESULTS_IN_CONTAINER": "1",
           "SSD_RUN_DIR": str(tmp_path / "mine")}
    done = subprocess.run([sys.executable, entrypoint.__file__, sys.executable, "-c",
                           "import os; print('child sees', os.environ['SSD_RUN_DIR'])"],
                          env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"results: {tmp_path / 'mine'}", f"child sees {tmp_path / 'mine'}"]
