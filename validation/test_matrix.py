"""The matrix's scheduling: cases split over children that run at once, records back in the order asked."""

from __future__ import annotations

import pytest

from reference import ProblemSpec
from validation import matrix
from validation.matrix import BIG_ELEMENTS, Task


def _task(tag: str, impl: str, **change: object) -> Task:
    spec = ProblemSpec(**{**matrix.BASE, "batch": 1, "seqlen": 40, "nheads": 2, "headdim": 16, "dstate": 16,
                          "chunk_size": 16, **change})
    return Task(spec.case_id(impl, tag), tag, spec, impl)


def test_lanes_keep_each_case_whole_and_the_big_cases_in_one_lane() -> None:
    big = {"batch": 1, "seqlen": 2**21 + 128, "nheads": 16, "headdim": 64}
    assert ProblemSpec(**{**matrix.BASE, **big}).numel_x >= BIG_ELEMENTS
    tasks = [_task(f"s{seed}", impl, seed=seed) for seed in range(6) for impl in ("cutile", "triton")]
    tasks += [_task("big_a", impl, **big) for impl in ("cutile", "triton")]
    tasks += [_task("big_b", impl, **big, dtype="fp32") for impl in ("cutile", "triton")]
    lanes = matrix._lanes(tasks, jobs=3)
    assert len(lanes) == 3
    assert sorted(t.case_id for lane in lanes for t in lane) == sorted(t.case_id for t in tasks)
    for lane in lanes:  # a case's implementations run one after another in one child (its oracle is shared)
        for task in lane:
            same = [j for j, other in enumerate(lane) if other.spec == task.spec]
            assert same == list(range(same[0], same[0] + len(same)))
    assert {t.tag for t in lanes[0]} >= {"big_a", "big_b"}
    assert not any(t.tag.startswith("big") for lane in lanes[1:] for t in lane)
    assert matrix._lanes(tasks, jobs=1) == [tasks]


def test_default_jobs_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSD_MATRIX_JOBS", "3")
    assert matrix.default_jobs() == 3
    monkeypatch.setenv("SSD_MATRIX_JOBS", "zero")
    with pytest.raises(ValueError, match="SSD_MATRIX_JOBS must be a whole number >= 1; got 'zero'"):
        matrix.default_jobs()
    monkeypatch.delenv("SSD_MATRIX_JOBS")
    assert 1 <= matrix.default_jobs() <= 8


def test_children_at_once_return_every_record_in_the_order_asked() -> None:
    """Real children on the CPU: the float64 chunked reference on three small cases, two children at once."""
    tasks = [_task(f"s{seed}", "reference-chunked", seed=seed, dtype="fp32") for seed in range(3)]
    lines: list[str] = []
    records = matrix._run_lanes(tasks, lines.append, jobs=2)
    assert [r["id"] for r in records] == [t.case_id for t in tasks]
    assert [r["status"] for r in records] == ["pass"] * 3, records
    assert "  3 runs in 2 processes at once" in lines
