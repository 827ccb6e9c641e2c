"""Correctness: every implementation over every kind of input a user may pass, judged against float64.

The matrix (validation/matrix.py) runs once for the module, in child processes, with our outputs and
scratch poisoned with NaN, and writes the correctness results file for every implementation. The
tests then claim, case by case, that OUR cuTile forward and our float64 chunked reference pass; the peers'
verdicts are findings, recorded in the results file and the report, not assertions of this suite.
"""

from __future__ import annotations

import pytest

from validation.matrix import correctness_cases, run_and_write, takes

pytestmark = pytest.mark.matrix
REF = "reference-chunked"

CASES = correctness_cases()
# Our float64 chunked reference is ours too: every case it can take (the matrix records the rest unsupported).
REFERENCE_CASES = [(tag, spec) for tag, spec in CASES if takes(REF, tag, spec)]


@pytest.fixture(scope="module")
def records(matrix_selection: set[str] | None) -> dict[str, dict]:
    return run_and_write("correctness", only=matrix_selection)  # -k or node ids: only the cases selected run


@pytest.mark.parametrize("tag,spec", CASES, ids=[spec.case_id("cutile", tag) for tag, spec in CASES])
def test_output_and_final_state_match_fp64_oracle(records: dict[str, dict], tag, spec) -> None:
    record = records[spec.case_id("cutile", tag)]
    if record["status"] == "not-run":
        pytest.skip(record["reason"])  # recorded as not-run in the results file, with this reason
    assert record["status"] == "pass", f"{record['status']}: {record.get('reason')}"


@pytest.mark.parametrize("tag,spec", REFERENCE_CASES, ids=[spec.case_id(REF, tag) for tag, spec in REFERENCE_CASES])
def test_the_chunked_reference_matches_the_recurrence(records: dict[str, dict], tag, spec) -> None:
    record = records[spec.case_id(REF, tag)]
    if record["status"] == "not-run":
        pytest.skip(record["reason"])  # recorded as not-run in the results file, with this reason
    assert record["status"] == "pass", f"{record['status']}: {record.get('reason')}"
