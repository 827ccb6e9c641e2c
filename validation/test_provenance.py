"""Where a result came from (the commit a results file names), and how a results file is kept while a run goes."""

from __future__ import annotations

import json
import shutil
import subprocess

from validation import provenance
from validation.provenance import ROOT, environment


def _git_head() -> str | None:
    """What git says the commit is here; None where there is no git (the container) or no repository."""
    if shutil.which("git") is None:
        return None
    done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False)
    return done.stdout.strip() if done.returncode == 0 else None


def test_the_given_commit_wins_over_a_copied_git(monkeypatch) -> None:
    """A device copy can carry an older .git than its tree: SSD_GIT_COMMIT, when given, is the commit."""
    monkeypatch.setenv("SSD_GIT_COMMIT", "0123456789abcdef0123456789abcdef01234567")
    env = environment()
    assert env["git_commit"] == "0123456789abcdef0123456789abcdef01234567"
    assert env["git_dirty"] is None and "SSD_GIT_COMMIT" in env["null_reasons"]["git_dirty"]
    assert env["git_commit_here"] == _git_head()


def test_without_a_given_commit_git_is_asked(monkeypatch) -> None:
    monkeypatch.delenv("SSD_GIT_COMMIT", raising=False)
    env = environment()
    here = _git_head()
    if here is not None:
        assert env["git_commit"] == here and isinstance(env["git_dirty"], bool)
    else:
        assert env["git_commit"] is None and env["null_reasons"]["git_commit"]
    assert "git_commit_here" not in env


def test_the_switches_that_pick_a_peers_kernels_are_recorded(monkeypatch) -> None:
    """A shell that turns TileGym's autotune off (its first config everywhere) or mamba_ssm's to one fixed config
    changes what the benchmark times: the results file says so."""
    monkeypatch.setenv("TILEGYM_DISABLE_AUTOTUNE", "1")
    monkeypatch.setenv("MAMBA_DETERMINISTIC", "1")
    assert environment()["env"].items() >= {"TILEGYM_DISABLE_AUTOTUNE": "1", "MAMBA_DETERMINISTIC": "1"}.items()
    monkeypatch.delenv("TILEGYM_DISABLE_AUTOTUNE")
    assert "TILEGYM_DISABLE_AUTOTUNE" not in environment()["env"]


def test_the_tileiras_that_compiles_is_recorded_wherever_it_comes_from(monkeypatch, tmp_path) -> None:
    """A tileiras found on PATH or under CUDA_HOME (no pip package: the device machine's, a system toolkit's) is
    recorded with the version it prints; one that cannot be asked or found gets a reason instead."""
    fake = tmp_path / "tileiras"
    fake.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.5, V13.5.37'\n")
    fake.chmod(0o755)
    monkeypatch.setattr(provenance, "_find_tileiras", lambda: str(fake))
    env = environment()
    assert (env["tileiras_binary"], env["tileiras_version"]) == (str(fake), "13.5.37")

    fake.write_text("#!/bin/sh\necho 'tileiras, some other banner'\n")
    env = environment()
    assert env["tileiras_binary"] == str(fake) and env["tileiras_version"] is None
    assert "no release line" in env["null_reasons"]["tileiras_version"]

    def missing() -> str:
        raise FileNotFoundError("'tileiras' compiler not found")

    monkeypatch.setattr(provenance, "_find_tileiras", missing)
    env = environment()
    assert env["tileiras_binary"] is None and env["tileiras_version"] is None
    assert "finds no tileiras" in env["null_reasons"]["tileiras_binary"]


def test_a_checkpoint_keeps_the_cases_so_far_until_the_file_is_written(tmp_path) -> None:
    from validation.results import ResultsFile
    from validation.schema import CaseRecord

    results = ResultsFile("benchmark", directory=tmp_path)
    results.add(CaseRecord(id="a", impl="cutile", status="pass", seed=0))
    first = json.loads(results.checkpoint(ceilings={"x": 1}).read_text())
    results.add(CaseRecord(id="b", impl="triton", status="not-run", reason="not reached"))
    path = results.checkpoint(ceilings={"x": 1})
    assert path == tmp_path / "partial" / "benchmark.json" and not (tmp_path / "raw").exists()
    second = json.loads(path.read_text())
    assert [c["id"] for c in first["cases"]] == ["a"] and [c["id"] for c in second["cases"]] == ["a", "b"]
    assert second["partial"] is True and second["ceilings"] == {"x": 1} and second["environment"]["seeds"] == [0]
    final = json.loads(results.write(ceilings={"x": 1}).read_text())
    assert "partial" not in final and [c["id"] for c in final["cases"]] == ["a", "b"]
    assert not (tmp_path / "partial").exists(), "the checkpoint outlived the results file"


def test_results_files_get_the_umask_mode_not_mkstemps(tmp_path) -> None:
    """A host user other than the writer (a container's uid) must be able to read results under umask 022."""
    import os
    import stat

    from validation.results import _FILE_MODE, write_text_atomic

    path = write_text_atomic(tmp_path / "x.json", "{}")
    assert stat.S_IMODE(path.stat().st_mode) == _FILE_MODE
    mask = os.umask(0o022)
    os.umask(mask)
    assert _FILE_MODE == 0o666 & ~mask and (mask != 0o022 or _FILE_MODE == 0o644)


def test_the_image_and_its_base_are_recorded(monkeypatch) -> None:
    monkeypatch.setenv("SSD_IMAGE", "ssd-repro:0.1.0-abc1234")
    monkeypatch.setenv("SSD_BASE_IMAGE", "nvidia/cuda:13.3.1-devel-ubuntu24.04")
    monkeypatch.setenv("SSD_BASE_DIGEST", "sha256:" + "0" * 64)
    env = environment()
    assert (env["container_image"], env["base_image"], env["base_image_digest"]) == (
        "ssd-repro:0.1.0-abc1234", "nvidia/cuda:13.3.1-devel-ubuntu24.04", "sha256:" + "0" * 64)
    monkeypatch.setenv("SSD_IMAGE", "")  # built without --build-arg SSD_IMAGE
    env = environment()
    assert env["container_image"] is None and "SSD_IMAGE" in env["null_reasons"]["container_image"]
