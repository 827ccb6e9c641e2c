"""Stability: every implementation on every regime of docs/design.md, ragged and long sequences, x past 2**31
elements and non-contiguous views, judged against float64; and A > 0 and dt < 0, outside Mamba's
parameterisation, which the float64 references compute and every kernel entry point refuses.

The matrix runs once for the module (child processes; a crash costs one case) and writes the stability
results file for every implementation. The tests claim that OUR cuTile forward and the float64 chunked
reference pass every case they can take, and that outside Mamba's parameterisation the references pass and
every kernel's refusal is recorded unsupported with its message; the peers' verdicts are findings for the report.
"""

from __future__ import annotations

import pytest

from reference.regimes import OUTSIDE_MAMBA
from validation import matrix
from validation.matrix import SUITE_IMPLS, Task, run_and_write, stability_cases, takes, tiny

pytestmark = pytest.mark.matrix

# Ours takes every case in Mamba's domain: each is a test that must pass (a limit that grew to refuse one fails it).
# What the float64 reference cannot take in memory or time is recorded unsupported by the matrix, not made a test.
CASES = [(tag, spec, impl) for tag, spec in stability_cases() for impl in ("cutile", "reference-chunked")
         if spec.regime not in OUTSIDE_MAMBA
         and (impl == "cutile" or takes(impl, tag, spec))]
# Outside Mamba's parameterisation: every implementation of the suite, each on the spec it is given.
OUTSIDE = [(tag, spec, impl) for tag, spec in stability_cases() if spec.regime in OUTSIDE_MAMBA
           for impl in SUITE_IMPLS["stability"]]
# What each kernel's refusal must say (reference.checks.check_domain): its entry point, the argument and the rule.
ENTRY_POINTS = {"cutile": "ssd_fwd_cutile", "triton": "ssd_fwd_triton", "triton-interpreter": "ssd_fwd_triton",
                "tilegym": "ssd_fwd_tilegym"}
REFUSALS = {"positive_A": ("A has ", " entries > 0 (first: A[", "); expected A <= 0 (Mamba's A = -exp(A_log))"),
            "negative_dt": ("dt has ", " entries < 0 (first: dt[",
                            "); expected dt >= 0 (Mamba's dt = softplus(dt + dt_bias), clamped)")}


def _task(tag: str, spec, impl: str) -> Task:
    """The task the matrix makes of (case, implementation): the interpreter gets the case's tiny variant."""
    if matrix.IMPLS[impl].interpreter:
        spec, tag = tiny(spec), f"{tag}_tiny"
    return Task(spec.case_id(impl, tag), tag, spec, impl)


def _assert_refused(record: dict, regime: str, impl: str) -> None:
    assert record["status"] == "unsupported", f"{impl} on {regime}: {record['status']}: {record.get('reason')}"
    start, middle, end = REFUSALS[regime]
    reason = record["reason"]
    assert reason.startswith(f"{ENTRY_POINTS[impl]}: {start}") and middle in reason and end in reason, reason


@pytest.fixture(scope="module")
def records(matrix_selection: set[str] | None) -> dict[str, dict]:
    return run_and_write("stability", only=matrix_selection)  # -k or node ids: only the cases selected run


@pytest.mark.parametrize("tag,spec,impl", CASES, ids=[spec.case_id(impl, tag) for tag, spec, impl in CASES])
def test_stays_within_tolerance_of_fp64(records: dict[str, dict], tag, spec, impl) -> None:
    record = records[spec.case_id(impl, tag)]
    if record["status"] == "not-run":
        pytest.skip(record["reason"])  # recorded as not-run in the results file, with this reason
    assert record["status"] == "pass", f"{record['status']}: {record.get('reason')}"


@pytest.mark.parametrize("tag,spec,impl", OUTSIDE, ids=[_task(*case).case_id for case in OUTSIDE])
def test_outside_mamba_the_references_pass_and_every_kernel_refuses(records: dict[str, dict], tag, spec,
                                                                    impl) -> None:
    record = records[_task(tag, spec, impl).case_id]
    if record["status"] == "not-run":
        pytest.skip(record["reason"])  # a kernel that cannot run on this machine (no GPU)
    if impl in matrix.REFERENCES:
        assert record["status"] == "pass", f"{record['status']}: {record.get('reason')}"
    else:
        _assert_refused(record, spec.regime, impl)


@pytest.mark.parametrize("impl", ["cutile", "triton", "tilegym", "reference-chunked"])
@pytest.mark.parametrize("regime", OUTSIDE_MAMBA)
def test_a_refusal_is_recorded_unsupported_with_its_message(regime: str, impl: str) -> None:
    """What the matrix's child records, on any machine: each kernel entry point refuses before it needs a GPU
    (the matrix itself records a kernel that cannot run here not-run, without calling it)."""
    tag, spec = next((t, s) for t, s in stability_cases() if s.regime == regime)
    record = matrix._run_task(Task(spec.case_id(impl, tag), tag, spec, impl), {})
    if impl in matrix.REFERENCES:
        assert record["status"] == "pass", f"{record['status']}: {record.get('reason')}"
    else:
        _assert_refused(record, regime, impl)
