"""Where a result came from: the commit a results file names."""

from __future__ import annotations

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
