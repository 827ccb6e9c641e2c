"""The typed case record (validation.schema.CaseRecord): the only thing a writer adds to a results file, checked
as it is built by the checker every reader's load runs, and written exactly as the cases of the published runs
are."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from reference import ProblemSpec
from validation.provenance import ROOT
from validation.results import ResultsFile
from validation.schema import CASE_FIELDS, CaseRecord, ResultsDoc, SchemaError, load_results

PUBLISHED = sorted((ROOT / "reports" / "published").glob("*/raw/*.json"))


def _published_cases() -> list[dict]:
    return [case for path in PUBLISHED for case in json.loads(path.read_text())["cases"]]


def test_every_published_case_reads_back_and_writes_as_it_is() -> None:
    """from_dict then as_dict gives every case of every published run back: the same keys, nesting and values,
    in the same order."""
    cases = _published_cases()
    assert len(cases) > 500 and {c["impl"] for c in cases} >= {"cutile", "triton", "tilegym", "reference-chunked"}
    for case in cases:
        assert json.dumps(CaseRecord.from_dict(case).as_dict()) == json.dumps(case), case["id"]


def _built(case: dict) -> CaseRecord:
    """The case built as a writer builds one: its typed fields by name, the rest measured."""
    return CaseRecord(**{k: v for k, v in case.items() if k in CASE_FIELDS},
                      measured={k: v for k, v in case.items() if k not in CASE_FIELDS})


@pytest.mark.parametrize("suite", ["benchmark", "correctness", "stability", "reference", "compile"])
def test_a_built_record_writes_the_published_case(suite: str, tmp_path: Path) -> None:
    """A record built with the constructor from a real published case, added to a results file and written, is
    that case again once the file is loaded (through the loader every reader uses)."""
    path = next(p for p in reversed(PUBLISHED) if p.stem == suite)
    cases = json.loads(path.read_text())["cases"][:40]
    results = ResultsFile(suite, directory=tmp_path)
    for case in cases:
        record = _built(case)
        assert record.as_dict() == case and record == CaseRecord.from_dict(case)
        results.add(record)
    written, _ = load_results(results.write(), suite)
    assert [c.as_dict() for c in written.cases] == cases


def test_a_writer_cannot_add_a_dict(tmp_path: Path) -> None:
    results = ResultsFile("benchmark", directory=tmp_path)
    with pytest.raises(TypeError, match=r"ResultsFile.add takes a validation.schema.CaseRecord, not a dict"):
        results.add({"id": "a", "impl": "cutile", "status": "pass"})  # type: ignore[arg-type]
    assert results.cases == []


@pytest.mark.parametrize("fields,message", [
    (dict(status="ok"), "CaseRecord: case (a).status: expected one of pass, fail, unsupported, crashed, not-run, "
                        "got 'ok'"),
    (dict(status="fail"), "CaseRecord: case (a).reason: expected a non-empty string, got None"),
    (dict(status="crashed", reason=""), "CaseRecord: case (a).reason: expected a non-empty string, got ''"),
    (dict(id=""), "CaseRecord: case.id: expected a non-empty string, got ''"),
    (dict(impl=3), "CaseRecord: case (a).impl: expected a non-empty string, got 3"),
    (dict(shape={"batch": 0}), "CaseRecord: case (a).shape.batch: expected an integer >= 1, got 0"),
    (dict(seed=-1), "CaseRecord: case (a).seed: expected an integer >= 0, got -1"),
    (dict(dtype=16), "CaseRecord: case (a).dtype: expected a string or null, got 16"),
    (dict(with_D="yes"), "CaseRecord: case (a).with_D: expected true, false or null, got 'yes'"),
    (dict(measured={"y_rel_l2": "small"}),
     "CaseRecord: case (a).y_rel_l2: expected a number, \"nan\", \"inf\", \"-inf\" or null, got 'small'"),
    (dict(measured={"kernel_us": {"median": "fast"}}),
     "CaseRecord: case (a).kernel_us.median: expected a number, \"nan\", \"inf\", \"-inf\" or null, got 'fast'"),
    (dict(measured={"bytes": 2**1001}), "CaseRecord: case (a).bytes: expected a number within float range, got an "
                                        "integer of about 302 digits"),
    (dict(measured={"status": "pass"}), "CaseRecord: measured.status: expected no field of the record's own "
                                        "(give it as status=), got 'pass'"),
    (dict(measured=[1]), "CaseRecord: measured: expected a mapping of field names to values, got [1]"),
])
def test_an_invalid_record_is_refused_where_it_is_built(fields: dict, message: str) -> None:
    with pytest.raises(SchemaError) as refused:
        CaseRecord(**{"id": "a", "impl": "cutile", "status": "pass", **fields})
    assert str(refused.value) == message


def test_a_dict_without_the_required_fields_is_refused_naming_them() -> None:
    with pytest.raises(SchemaError, match=r"^CaseRecord: case.id: expected a non-empty string, got None$"):
        CaseRecord.from_dict({"impl": "cutile", "status": "pass"})
    with pytest.raises(SchemaError, match=r"^CaseRecord: case \(a\).status: expected one of .*, got None$"):
        CaseRecord.from_dict({"id": "a", "impl": "cutile"})


def test_a_record_is_frozen_and_nan_is_written_as_its_string(tmp_path: Path) -> None:
    record = CaseRecord(id="a", impl="triton", status="fail", reason="y rel_l2 nan", seed=0,
                        shape={"batch": 1, "seqlen": 7}, measured={"y_rel_l2": math.nan, "first_call_s": 0.5})
    with pytest.raises(AttributeError):
        record.status = "pass"  # type: ignore[misc]
    with pytest.raises(TypeError):
        record.measured["y_rel_l2"] = 0.0  # type: ignore[index]
    with pytest.raises(TypeError):
        record.shape["batch"] = 2  # type: ignore[index]
    # The order a built record writes: identity and inputs, what was measured, the verdict.
    assert list(record.as_dict()) == ["id", "impl", "shape", "seed", "y_rel_l2", "first_call_s", "status", "reason"]
    later = record.with_measured(precompile_s=1.5)
    assert later.measured["precompile_s"] == 1.5 and "precompile_s" not in record.measured
    results = ResultsFile("correctness", directory=tmp_path)
    results.add(later)
    case = load_results(results.write(), "correctness")[0].cases[0].as_dict()
    assert case["y_rel_l2"] == "nan" and case["precompile_s"] == 1.5 and case["shape"] == {"batch": 1, "seqlen": 7}


def test_the_benchmark_builds_its_not_run_cases_as_before() -> None:
    """bench.run runs on a GPU only; its not-run case (the one a CPU machine writes) is the same as before."""
    from validation.bench.run import _case, _not_run

    spec = ProblemSpec(batch=4, seqlen=1024, nheads=8, headdim=64, ngroups=1, dstate=128, chunk_size=128)
    assert _not_run(spec, "cutile", "no CUDA device").as_dict() == {
        "id": spec.case_id("cutile"), "impl": "cutile", "shape": spec.shape_dict(), "dtype": spec.dtype,
        "regime": spec.regime, "status": "not-run", "reason": "no CUDA device"}
    case = _case(spec, "cutile", "cb-shared-8", "unsupported", "no", matmul="tf32", bytes=10).as_dict()
    assert case == {"id": spec.case_id("cutile", "cb-shared-8"), "impl": "cutile", "shape": spec.shape_dict(),
                    "dtype": spec.dtype, "regime": spec.regime, "seed": spec.seed, "matmul": "tf32", "bytes": 10,
                    "variant": "cb-shared-8", "status": "unsupported", "reason": "no"}
    assert "variant" not in _case(spec, "triton", None, "pass").as_dict()


def test_the_matrix_builds_its_cases_as_before() -> None:
    from validation import isolated, matrix

    spec = ProblemSpec(**{**matrix.BASE, "seqlen": 40})
    task = matrix.Task(spec.case_id("triton", "t"), "t", spec, "triton")
    stop = isolated.Stop()
    stop.signum = 15
    assert matrix._interrupted(task, stop).as_dict() == {
        "id": task.case_id, "impl": "triton", "shape": spec.shape_dict(), "dtype": spec.dtype,
        "regime": spec.regime, "seed": spec.seed, "tag": "t", "with_D": spec.with_D,
        "with_initial_state": spec.with_initial_state, "status": "not-run", "reason": stop.reason}


def test_a_reader_gets_the_file_typed() -> None:
    """load_results, which the report, its comparison and the README's table go through: the header typed, the
    cases CaseRecords, the suite's own top-level fields in extra, each as the file has it."""
    path = next(p for p in reversed(PUBLISHED) if p.stem == "benchmark")
    payload = json.loads(path.read_text())
    doc, data = load_results(path, "benchmark")
    assert isinstance(doc, ResultsDoc) and data == path.read_bytes()
    assert (doc.schema_version, doc.suite, doc.created, doc.finished, doc.suite_version) == (
        payload["schema_version"], "benchmark", payload["created"], payload.get("finished"),
        payload.get("suite_version"))
    assert doc.environment == payload["environment"] and doc.summary == payload.get("summary")
    assert [c.as_dict() for c in doc.cases] == payload["cases"]
    assert all(isinstance(c, CaseRecord) for c in doc.cases)
    assert doc.extra == {k: v for k, v in payload.items() if k not in (
        "schema_version", "suite", "suite_version", "created", "finished", "environment", "summary", "notes",
        "cases")}
    assert "published_ratios" in doc.extra


def test_a_case_read_from_a_file_is_refused_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(SchemaError) as refused:
        CaseRecord.from_dict({"id": "a", "impl": "cutile", "status": "crashed"}, tmp_path / "x.json", "cases[4]")
    assert str(refused.value) == f"{tmp_path / 'x.json'}: cases[4] (a).reason: expected a non-empty string, got None"
