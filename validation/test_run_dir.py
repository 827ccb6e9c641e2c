"""The run directory is checked before any work (validation.results.check_run_dir): one that cannot be made or
written, or that already holds a results file this session will write, stops the session at once with one
line, instead of after its last case with a traceback and every result lost."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from validation.provenance import ROOT
from validation.results import ResultsFile, RunDirError, check_run_dir


def test_a_run_dir_that_holds_the_results_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "stability.json").write_text("{}")
    assert check_run_dir(tmp_path, ["correctness"]) == tmp_path  # another suite's file is no obstacle
    with pytest.raises(RunDirError, match=r"already holds results of stability \(raw/stability\.json\)"):
        check_run_dir(tmp_path, ["correctness", "stability"])
    with pytest.raises(RunDirError, match="already holds results of stability"):
        ResultsFile("stability", tmp_path, check=True)


def test_a_run_dir_that_cannot_be_made_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(RunDirError, match="cannot be made"):
        check_run_dir(tmp_path / "file" / "run", ["benchmark"])


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through any mode bits")
def test_a_read_only_run_dir_is_refused(tmp_path: Path) -> None:
    (tmp_path / "raw").mkdir()
    os.chmod(tmp_path / "raw", 0o555)
    try:
        with pytest.raises(RunDirError, match="is not writable"):
            check_run_dir(tmp_path, ["compile"])
    finally:
        os.chmod(tmp_path / "raw", 0o755)


def test_a_suite_session_stops_before_its_first_case(tmp_path: Path) -> None:
    """`nox -s correctness` with an SSD_RUN_DIR that already holds correctness.json: pytest stops at collection."""
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "correctness.json").write_text("{}")
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "matrix",
                           "validation/test_correctness.py"], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "SSD_RUN_DIR": str(tmp_path)}, check=False)
    out = done.stdout + done.stderr
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, out[-3000:]
    assert "already holds results of correctness" in out and "Traceback" not in out
    assert not (tmp_path / "partial").exists(), "the matrix started before the check"


@pytest.mark.parametrize("left", ["partial/benchmark.json", "raw/benchmark.json (a dangling link)"])
def test_a_run_dir_that_holds_a_stopped_runs_checkpoint_is_refused(left: str, tmp_path: Path) -> None:
    """A run killed outright (SIGKILL) leaves partial/<suite>.json and no raw file: a rerun there would replace what it
    measured with its first checkpoint. A dangling link at raw/<suite>.json would refuse the write after the run."""
    if left.startswith("partial"):
        (tmp_path / "partial").mkdir()
        (tmp_path / "partial" / "benchmark.json").write_text("{}")
        says = r"holds partial/benchmark\.json: what a stopped run measured, which a new run there would replace"
    else:
        (tmp_path / "raw").mkdir()
        (tmp_path / "raw" / "benchmark.json").symlink_to(tmp_path / "nowhere")
        says = r"already holds results of benchmark \(raw/benchmark\.json\)"
    assert check_run_dir(tmp_path, ["stability"]) == tmp_path  # another suite's checkpoint is no obstacle
    with pytest.raises(RunDirError, match=says + r".*set SSD_RUN_DIR to a new directory"):
        check_run_dir(tmp_path, ["benchmark"])
    with pytest.raises(RunDirError, match=says):
        ResultsFile("benchmark", tmp_path, check=True)
    if left.startswith("partial"):
        assert (tmp_path / "partial" / "benchmark.json").read_text() == "{}"
