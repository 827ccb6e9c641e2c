"""The run summary: one table of a run's results files, and its policy on what fails a run (validation/summary.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from validation.bench.tilegym_decisions import FIRST_CONFIG, TUNE_COMMAND
from validation.provenance import ROOT
from validation.results import SCHEMA_VERSION, STATUSES, SUITES, write_json_atomic
from validation.summary import FAILED, OURS, PEERS, describe, main

PASSING_SUITES = {suite: [{"id": f"{suite}-ok", "impl": "cutile", "status": "pass"}] for suite in SUITES}
# What every results file's header holds (validation.results.ResultsFile writes it; the contract requires it).
HEADER = {"schema_version": SCHEMA_VERSION, "suite_version": "0.1.0", "created": "2026-11-30T09:00:00+00:00"}


def _write(run_dir: Path, suite: str, cases: list[dict], *, partial: bool = False, **extra: object) -> Path:
    folder = "partial" if partial else "raw"
    return write_json_atomic(run_dir / folder / f"{suite}.json", {**HEADER, "suite": suite, **extra, "cases": cases})


def _run(run_dir: Path, suites: dict[str, list[dict]]) -> Path:
    for suite, cases in suites.items():
        _write(run_dir, suite, cases)
    return run_dir


def test_the_policy_is_built_from_the_contracts_statuses() -> None:
    assert set(FAILED) < set(STATUSES) and "pass" not in FAILED
    assert not set(OURS) & set(PEERS)


def test_every_registered_implementation_is_classified_ours_or_peer() -> None:
    from validation.registry import IMPLS

    unclassified = sorted(set(IMPLS) - set(OURS) - set(PEERS))
    assert not unclassified, f"{unclassified}: add each to OURS or PEERS in validation/summary.py"


def test_a_clean_run_passes_and_prints_one_row_per_suite_and_implementation(tmp_path, capsys) -> None:
    run = _run(tmp_path, PASSING_SUITES)
    assert main([str(run)]) == 0
    out = capsys.readouterr().out
    for suite in SUITES:
        assert any(line.split()[:3] == [suite, "cutile", "1"] for line in out.splitlines()), out
    assert "summary: passed" in out and "FAILURES" not in out and "FINDINGS" not in out


# A fail or crashed case of ours, or of an implementation nobody classified, fails the run; a peer's is a finding
# about that peer, and the run passes.
CLASSED = [*((impl, True) for impl in ("cutile", "reference-chunked", "reference-recurrent", "an-unclassified-impl")),
           *((impl, False) for impl in PEERS)]


@pytest.mark.parametrize("impl,ours", CLASSED, ids=[impl for impl, _ in CLASSED])
@pytest.mark.parametrize("status", FAILED)
def test_a_failure_of_ours_fails_the_run_and_a_peers_is_a_finding(tmp_path, capsys, impl: str, ours: bool,
                                                                  status: str) -> None:
    bad = {"id": "stability-bad", "impl": impl, "status": status, "reason": "y rel_l2 1e-2 > bound\n  next line"}
    run = _run(tmp_path, {**PASSING_SUITES, "stability": [*PASSING_SUITES["stability"], bad]})
    assert main([str(run)]) == (1 if ours else 0)
    out = capsys.readouterr().out
    assert f"  stability  {impl}  stability-bad  {status}: y rel_l2 1e-2 > bound next line" in out.splitlines()
    if ours:
        assert "FAILURES of ours" in out and "summary: FAILED" in out and "FINDINGS" not in out, out
    else:
        assert "FINDINGS about the peers" in out and "FAILURES" not in out, out
        assert "summary: passed" in out and "1 findings about the peers" in out, out


def test_not_run_and_unsupported_of_ours_do_not_fail_the_run(tmp_path, capsys) -> None:
    quiet = [{"id": "gpu-case", "impl": "cutile", "status": "not-run", "reason": "no CUDA device"},
             {"id": "odd-case", "impl": "cutile", "status": "unsupported", "reason": "chunk 48"}]
    run = _run(tmp_path, {**PASSING_SUITES, "correctness": quiet})
    assert main([str(run)]) == 0, capsys.readouterr().out


def test_a_missing_suite_fails_the_run_even_with_a_partial_file(tmp_path, capsys) -> None:
    suites = {s: c for s, c in PASSING_SUITES.items() if s != "benchmark"}
    run = _run(tmp_path, suites)
    _write(run, "benchmark", [{"id": "point-1", "impl": "triton", "status": "pass"}], partial=True)
    assert main([str(run)]) == 1
    out = capsys.readouterr().out
    assert "MISSING: benchmark wrote no raw/<suite>.json" in out
    assert any(line.split()[:4] == ["benchmark", "(partial)", "triton", "1"] for line in out.splitlines()), out
    assert main([str(run), "--expect", "compile", "reference", "correctness", "stability"]) == 0


def test_a_run_directory_that_is_not_there_is_refused_in_one_line(tmp_path, capsys) -> None:
    assert main([str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a directory" in err
    (tmp_path / "empty").mkdir()  # a directory, but no run's: a wrong path, not a run whose every suite is missing
    assert main([str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no raw/ or partial/ directory: not a run directory" in err


def _compile(*cases: dict) -> str:
    return json.dumps({**HEADER, "suite": "compile", "cases": list(cases)})


@pytest.mark.parametrize("text,says", [("{not json", "not valid JSON"),
                                       ('{"schema_version": 99, "suite": "compile", "cases": []}', "schema_version"),
                                       (_compile({"id": "a", "impl": "cutile", "status": "ok"}),
                                        "cases[0] (a).status: expected one of"),
                                       (_compile({"id": "a", "impl": "cutile", "status": "fail"}),
                                        "compile.json: cases[0] (a).reason: expected a non-empty string, got None"),
                                       (_compile({"id": "a", "impl": "cutile", "status": "pass", "seed": -1}),
                                        "compile.json: cases[0] (a).seed: expected an integer >= 0, got -1")])
def test_a_file_that_is_not_a_results_file_is_refused_in_one_line(tmp_path, capsys, text: str, says: str) -> None:
    run = _run(tmp_path, PASSING_SUITES)
    (run / "raw" / "compile.json").unlink()
    (run / "raw" / "compile.json").write_text(text)
    assert main([str(run)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err and "compile.json" in err


def test_a_suite_prints_its_path_and_counts_per_implementation(tmp_path) -> None:
    path = _write(tmp_path, "stability", [
        {"id": "a", "impl": "cutile", "status": "not-run", "reason": "no CUDA device"},
        {"id": "b", "impl": "triton-interpreter", "status": "pass"},
        {"id": "c", "impl": "triton-interpreter", "status": "fail", "reason": "y rel_l2"}])
    lines = describe(path).splitlines()
    assert lines[0] == f"stability results: {path}"
    assert lines[1].split() == ["suite", "implementation", *STATUSES]
    assert lines[2].split() == ["stability", "cutile", "0", "0", "0", "0", "1"]
    assert lines[3].split() == ["stability", "triton-interpreter", "1", "1", "0", "0", "0"]


def test_pytest_shows_the_results_files_it_wrote_under_default_capture(tmp_path) -> None:
    """A results file written during a pytest run (the reference suite's, here) is listed on the terminal at the
    end, with its counts, although pytest captures what tests and fixtures print."""
    import os
    import subprocess
    import sys

    from validation.provenance import ROOT

    run = tmp_path / "run"
    child = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--basetemp={tmp_path / 'basetemp'}",
         "validation/test_reference.py::test_two_tokens_worked_by_hand"],
        cwd=ROOT, env={**os.environ, "SSD_RUN_DIR": str(run)}, capture_output=True, text=True, check=False)
    assert child.returncode == 0, child.stdout[-3000:] + child.stderr[-3000:]
    lines = child.stdout.splitlines()
    assert f"reference results: {run / 'raw' / 'reference.json'}" in lines, child.stdout[-3000:]
    ran = next(line.split()[1] for line in lines if line.startswith("collected "))  # the test is parametrized
    assert any(line.split()[:3] == ["reference", "reference-chunked", ran] for line in lines), child.stdout[-3000:]


def test_the_summary_counts_the_cases_timed_under_a_held_down_clock(tmp_path, capsys) -> None:
    """gpu_clocks (validation.bench.clocks) is told, never judged: a power-capped case is counted, NVML's absence
    said with its reason, and the run still passes."""
    full = {"samples": 8, "sm_mhz_min": 1980, "sm_mhz_median": 1980, "sm_mhz_max": 1980, "sm_mhz_max_supported": 1980,
            "power_w_max": 300.0, "reasons": []}
    capped = dict(full, sm_mhz_min=1425, reasons=["sw_power_cap"])
    bench = [{"id": f"bench-{i}", "impl": "cutile", "status": "pass", "gpu_clocks": clocks}
             for i, clocks in enumerate((full, capped, {"unavailable": "pynvml (nvidia-ml-py) is not installed"}))]
    run = _run(tmp_path, {**PASSING_SUITES, "benchmark": bench})
    assert main([str(run)]) == 0
    out = capsys.readouterr().out
    assert "GPU CLOCK: 1 of 3 timed benchmark cases ran with the SM clock held down" in out, out
    assert "GPU CLOCK: not recorded for 1 of them: pynvml (nvidia-ml-py) is not installed" in out, out
    clean = _run(tmp_path / "clean", PASSING_SUITES)
    assert main([str(clean)]) == 0 and "GPU CLOCK" not in capsys.readouterr().out


def test_the_summary_counts_the_tilegym_cases_that_ran_untuned(tmp_path, capsys) -> None:
    """TileGym's first config where no choice is stored (or with autotune off) is told, never judged: the run
    passes, and the summary counts the timed TileGym cases that ran it and names the command that tunes them."""
    stored = [{"kernel": "compute_out_kernel", "source": "stored choice (tilegym-tuning.json, tuned <synthetic>)"}]
    first = [{"kernel": "compute_out_kernel", "source": FIRST_CONFIG}]
    bench = [{"id": f"bench-tilegym-{i}", "impl": "tilegym", "status": "pass", "kernel_us": {"median": 10.0},
              "tilegym_tuning": tuning} for i, tuning in enumerate((stored, first, first))]
    bench.append({"id": "bench-tilegym-gate", "impl": "tilegym", "status": "fail", "reason": "gate <synthetic>",
                  "tilegym_tuning": first})  # not timed: not counted
    run = _run(tmp_path, {**PASSING_SUITES, "benchmark": bench})
    assert main([str(run)]) == 0
    out = capsys.readouterr().out
    assert "TILEGYM UNTUNED: 2 of 3 timed TileGym cases ran TileGym's first config" in out, out
    assert TUNE_COMMAND in out, out
    off = _run(tmp_path / "off", {s: c for s, c in PASSING_SUITES.items() if s != "benchmark"})
    _write(off, "benchmark", bench[:1], tilegym_tuning={"mode": "off"})
    assert main([str(off)]) == 0 and "TILEGYM UNTUNED: 1 of 1 timed" in capsys.readouterr().out, "autotune off"
    assert main([str(_run(tmp_path / "tuned", {**PASSING_SUITES, "benchmark": bench[:1]}))]) == 0
    assert "TILEGYM" not in capsys.readouterr().out


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
def test_a_suite_stopped_by_a_signal_fails_the_run_and_says_so(tmp_path, capsys, signame: str) -> None:
    """A stopped suite writes its file with every case it did not reach not-run, which alone would pass: the file's
    ``interrupted`` (the signal's name, validation/results.py) is what says the run did not finish. nox -s validate
    fails on the summary's exit status 1."""
    assert main([str(_run(tmp_path / "clean", PASSING_SUITES))]) == 0  # a clean run's last line is as it was
    assert capsys.readouterr().out.splitlines()[-1] == ("summary: passed: 0 failed or crashed records of ours, 0 "
                                                        "missing suites, 0 findings about the peers")
    run = _run(tmp_path, {s: c for s, c in PASSING_SUITES.items() if s != "stability"})
    _write(run, "stability", [*PASSING_SUITES["stability"], {"id": "later", "impl": "cutile", "status": "not-run",
                                                              "reason": f"interrupted: {signame} arrived before"}],
           interrupted=signame)
    assert main([str(run)]) == 1
    out = capsys.readouterr().out
    assert f"INTERRUPTED: stability (stopped by {signame}): what it did not reach is recorded not-run" in out, out
    assert "summary: FAILED: 0 failed or crashed records of ours, 0 missing suites, 1 interrupted suites" in out, out


BIG = "1" * 5000


@pytest.mark.parametrize("text,says", [
    (_compile({"id": "a", "impl": "cutile", "status": "pass", "bytes": 0}).replace('"bytes": 0', f'"bytes": {BIG}'),
     "not usable JSON"),  # past Python's digit limit
    # Nested past the contract's 32 levels but within every Python's parser (5000 levels parse on Python 3.12,
    # where 3.11's parser gives up: the refusal would then depend on the Python).
    ('{"cases": ' * 50 + "[]" + "}" * 50, "nesting at most 32 deep"),
    (_compile({"id": "a", "impl": "cutile", "status": "fail", "reason": "y\ud800"}), "cases[0].reason: expected text"),
    (_compile({"id": "a", "impl": "cutile", "status": "fail", "reason": "y"}).replace('"y"', '"y", "status": "pass"'),
     "the key 'status' appears twice"),  # json would keep the last: a pass
    (_compile({"id": "a", "impl": "cutile", "status": "fail", "reason": "y"}, {"id": "a", "impl": "cutile",
                                                                             "status": "pass"}),
     "cases[1].id: expected an id no other case has (cases[0] has it)"),
    (_compile({"id": "x\rsummary: passed", "impl": "cutile", "status": "pass"}), "cases[0].id: expected a name"),
    (json.dumps({"schema_version": 1, "suite": "compile", "cases": []}), "created: expected"),  # the report's refusal
])
def test_the_summary_refuses_what_the_report_refuses_in_one_line(tmp_path, text: str, says: str) -> None:
    """It reads through validation.schema.load_results, as the report does: exit 2, one line, no traceback."""
    run = _run(tmp_path, PASSING_SUITES)
    (run / "raw" / "compile.json").unlink()
    (run / "raw" / "compile.json").write_text(text)
    done = subprocess.run([sys.executable, "-m", "validation.summary", str(run)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 2 and done.stdout == "", done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stderr.count("\n") == 1 and says in done.stderr and "compile.json" in done.stderr, done.stderr[-2000:]


def test_a_fifo_at_a_results_path_is_refused_without_waiting(tmp_path) -> None:
    run = _run(tmp_path, PASSING_SUITES)
    path = run / "raw" / "compile.json"
    path.unlink()
    os.mkfifo(path)  # reading it would wait for a writer for ever
    try:
        done = subprocess.run([sys.executable, "-m", "validation.summary", str(run)], cwd=ROOT, capture_output=True,
                              text=True, timeout=60, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail("the summary waited on a FIFO at raw/compile.json")
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "compile.json: not a regular file" in done.stderr, done.stderr
