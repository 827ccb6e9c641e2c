"""Where a result came from (the commit a results file names), and how a results file is kept while a run goes."""

from __future__ import annotations

import json
import subprocess

from validation.provenance import ROOT, environment


def test_the_given_commit_wins_over_a_copied_git(monkeypatch) -> None:
    """A device copy can carry an older .git than its tree: SSD_GIT_COMMIT, when given, is the commit."""
    monkeypatch.setenv("SSD_GIT_COMMIT", "0123456789abcdef0123456789abcdef01234567")
    env = environment()
    assert env["git_commit"] == "0123456789abcdef0123456789abcdef01234567"
    assert env["git_dirty"] is None and "SSD_GIT_COMMIT" in env["null_reasons"]["git_dirty"]
    here = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    assert env["git_commit_here"] == (here.stdout.strip() if here.returncode == 0 else None)


def test_without_a_given_commit_git_is_asked(monkeypatch) -> None:
    monkeypatch.delenv("SSD_GIT_COMMIT", raising=False)
    env = environment()
    here = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    if here.returncode == 0:
        assert env["git_commit"] == here.stdout.strip() and isinstance(env["git_dirty"], bool)
    else:
        assert env["git_commit"] is None and env["null_reasons"]["git_commit"]
    assert "git_commit_here" not in env


def test_a_checkpoint_keeps_the_cases_so_far_until_the_file_is_written(tmp_path) -> None:
    from validation.results import ResultsFile

    results = ResultsFile("benchmark", directory=tmp_path)
    results.add({"id": "a", "impl": "cutile", "status": "pass", "seed": 0})
    first = json.loads(results.checkpoint(ceilings={"x": 1}).read_text())
    results.add({"id": "b", "impl": "triton", "status": "not-run", "reason": "not reached"})
    path = results.checkpoint(ceilings={"x": 1})
    assert path == tmp_path / "partial" / "benchmark.json" and not (tmp_path / "raw").exists()
    second = json.loads(path.read_text())
    assert [c["id"] for c in first["cases"]] == ["a"] and [c["id"] for c in second["cases"]] == ["a", "b"]
    assert second["partial"] is True and second["ceilings"] == {"x": 1} and second["environment"]["seeds"] == [0]
    final = json.loads(results.write(ceilings={"x": 1}).read_text())
    assert "partial" not in final and [c["id"] for c in final["cases"]] == ["a", "b"]
    assert not (tmp_path / "partial").exists(), "the checkpoint outlived the results file"
