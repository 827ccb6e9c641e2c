"""The typed case record (validation.schema.CaseRecord): the only thing a writer adds to a results file, checked
as it is built by the checker every reader's load runs, and written exactly as the cases of the published runs
are."""

from __future__ import annotations

import json
import math
import os
import re
import signal
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


@pytest.mark.parametrize("fields", [
    dict(status="ok"), dict(status="fail"), dict(status="crashed", reason=""), dict(id=""), dict(impl=3),
    dict(shape={"batch": 0}), dict(seed=-1), dict(dtype=16), dict(with_D="yes"), dict(y_rel_l2="small"),
    dict(kernel_us={"median": "fast"}), dict(bytes=2**1001), dict(reason="a\x1b[31m red")])
def test_a_file_holding_an_invalid_case_is_refused_by_the_file_check(fields: dict, tmp_path: Path) -> None:
    """load_results builds its records without CaseRecord's own checks (check_results ran the same ones on the
    file's cases just before): what the constructor refuses, the file check refuses too."""
    path = _file(tmp_path, json.dumps(_header(cases=[{"id": "a", "impl": "cutile", "status": "pass", **fields}])))
    with pytest.raises(SchemaError, match=r"^" + re.escape(str(path)) + r": (the file\.)?cases\[0\]"):
        load_results(path, "compile")


def test_a_loaded_record_is_the_record_the_checking_constructor_builds() -> None:
    """The records load_results gives (built unchecked after the file check) equal, field for field and key order
    included, those CaseRecord.from_dict builds with its own checks, for every case of every published file."""
    for path in PUBLISHED:
        doc, _ = load_results(path, path.stem)
        payload = json.loads(path.read_text())
        assert len(doc.cases) == len(payload["cases"]), path
        for record, case in zip(doc.cases, payload["cases"], strict=True):
            checked = CaseRecord.from_dict(case)
            assert record == checked and record.key_order == checked.key_order, (path, case["id"])
            assert type(record.measured) is type(checked.measured) and type(record.shape) is type(checked.shape)


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


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "compile.json"
    path.write_text(text)
    return path


def _header(**fields: object) -> dict:
    return {"schema_version": 1, "suite": "compile", "suite_version": "0.1.0", "created": "2026-11-30T09:00:00+00:00",
            "cases": [{"id": "a", "impl": "cutile", "status": "pass"}], **fields}


def test_a_key_twice_in_one_object_is_refused(tmp_path: Path) -> None:
    """json keeps the last of two equal keys: a fail followed by "status": "pass" would read as a pass."""
    text = json.dumps(_header()).replace('"status": "pass"', '"status": "fail", "reason": "y", "status": "pass"')
    with pytest.raises(SchemaError) as refused:
        load_results(_file(tmp_path, text), "compile")
    assert str(refused.value) == f"{tmp_path / 'compile.json'}: the key 'status' appears twice in one object"


def test_a_case_id_twice_is_refused_and_no_published_file_has_one(tmp_path: Path) -> None:
    """A reader keys a file's cases by id (reports.compare): a fail behind a pass of the same id would vanish. Every
    published file has each id once, and loads."""
    for path in PUBLISHED:
        load_results(path, path.stem)
    twice = _header(cases=[{"id": "a", "impl": "cutile", "status": "fail", "reason": "y"},
                           {"id": "a", "impl": "cutile", "status": "pass"}])
    with pytest.raises(SchemaError) as refused:
        load_results(_file(tmp_path, json.dumps(twice)), "compile")
    assert str(refused.value) == (f"{tmp_path / 'compile.json'}: cases[1].id: expected an id no other case has "
                                  "(cases[0] has it), got 'a'")


def test_a_writer_keeps_one_record_an_id_the_one_that_says_more(tmp_path: Path) -> None:
    """pytest reports a teardown error after a passing call; a stopped benchmark records its unfinished point not-run,
    the cases it measured too. The file keeps one record an id, which a reader then accepts."""
    results = ResultsFile("compile", directory=tmp_path)
    results.add(CaseRecord(id="t", impl="cutile", status="pass"))
    results.add(CaseRecord(id="t", impl="cutile", status="fail", reason="teardown: boom"))
    results.add(CaseRecord(id="m", impl="cutile", status="pass", measured={"compile_s": 1.0}))
    results.add(CaseRecord(id="m", impl="cutile", status="not-run", reason="not reached: SIGINT"))
    doc, _ = load_results(results.write(), "compile")
    assert [(c.id, c.status, c.reason) for c in doc.cases] == [("t", "fail", "teardown: boom"), ("m", "pass", None)]


TEXT = "text without control characters (but tab, newline, carriage return) or lone surrogates"
NAME = "a name without control characters, line separators, bidirectional overrides or lone surrogates"


@pytest.mark.parametrize("case,field,expected", [
    ({"reason": "a\ud800"}, "cases[0].reason", TEXT),  # a page cannot be written with it (UTF-8)
    ({"reason": "a\x00b"}, "cases[0].reason", TEXT),
    ({"reason": "fail\x1b[1A\x1b[2Ksummary: passed"}, "cases[0].reason", TEXT),  # moves a terminal's cursor
    ({"design": "x\x9b2K"}, "cases[0].design", TEXT),  # C1 CSI: an escape to a UTF-8 terminal too
    ({"null_reasons": {"k\udc80": "why"}}, "a key of cases[0].null_reasons", TEXT),
    ({"id": "a\nsummary: passed"}, "cases[0].id", NAME),  # validation.summary prints ids on a line of their own
    ({"impl": "cutile\t"}, "cases[0] (a).impl", NAME),
    ({"variant": "v\u202e"}, "cases[0] (a).variant", NAME),
])
def test_text_a_page_or_a_terminal_cannot_show_as_written_is_refused(case: dict, field: str, expected: str,
                                                                     tmp_path: Path) -> None:
    payload = _header(cases=[{"id": "a", "impl": "cutile", "status": "fail", "reason": "y", **case}])
    with pytest.raises(SchemaError) as refused:
        load_results(_file(tmp_path, json.dumps(payload)), "compile")
    message = str(refused.value)
    assert message.startswith(f"{tmp_path / 'compile.json'}: {field}: expected {expected}, got "), message
    message.encode()  # the message itself prints anywhere
    assert "\n" not in message and "\x1b" not in message
    prose = _header(cases=[{"id": "a", "impl": "cutile", "status": "fail", "reason": "line 1\n\tline 2\r\n"}])
    assert load_results(_file(tmp_path, json.dumps(prose)), "compile")[0].cases[0].reason == "line 1\n\tline 2\r\n"


def test_a_writer_escapes_what_a_file_may_not_hold_in_prose_and_keeps_the_case(tmp_path: Path, monkeypatch) -> None:
    """A reason or a measured text taken from elsewhere (a child's stderr, a compiler's coloured log) is written
    escaped, and the file reads back; a name of the suite's own with such a character is refused where it is built."""
    monkeypatch.setenv("SSD_RUN_DIR", str(tmp_path / "run"))
    case = CaseRecord(id="a", impl="cutile", status="crashed", reason="\x1b[31merror\x1b[0m\x00 \ud800 end\n",
                      measured={"log": ["bell\x07"]})
    assert case.reason == "\\x1b[31merror\\x1b[0m\\x00 \\ud800 end\n" and case.measured["log"] == ["bell\\x07"]
    results = ResultsFile("compile")
    results.add(case)
    doc, _ = load_results(results.write(), "compile")
    assert doc.cases[0].reason == case.reason
    with pytest.raises(SchemaError, match=r"case\.id: expected text without control characters"):
        CaseRecord(id="a\x1b", impl="cutile", status="pass")


@pytest.mark.parametrize("created", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:00:00-05:00"])
def test_a_created_that_has_no_utc_time_is_refused(created: str, tmp_path: Path) -> None:
    """Its run id is its UTC time (reports.runs): before year 1 or after 9999 there is none."""
    with pytest.raises(SchemaError) as refused:
        load_results(_file(tmp_path, json.dumps(_header(created=created))), "compile")
    assert str(refused.value) == (f"{tmp_path / 'compile.json'}: created: expected an ISO 8601 time that has a UTC "
                                  f"time, got '{created}'")


@pytest.mark.parametrize("version,ok", [("0.1.0", True), ("1.2.3rc1.post2.dev3", True), ("\uff10.\uff11.\uff10", False),
                                        ("0.\u0661.0", False), ("0.1.0\n", False), ("0.1.0" + "a1" * 4, False),
                                        ("0.1.0" + ".dev1" * 1000, False)])
def test_a_suite_version_is_ascii_digits_with_a_short_tail(version: str, ok: bool, tmp_path: Path) -> None:
    path = _file(tmp_path, json.dumps(_header(suite_version=version)))
    if ok:
        assert load_results(path, "compile")[0].suite_version == version
    else:
        with pytest.raises(SchemaError, match=r": suite_version: expected a version such as 0\.1\.0"):
            load_results(path, "compile")


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_results_path_that_is_not_a_regular_file_is_refused_at_once(kind: str, tmp_path: Path) -> None:
    """A FIFO would block the reader for ever; a directory is no file."""
    path = tmp_path / "compile.json"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    def hung(signum: int, frame: object) -> None:
        raise TimeoutError(f"load_results blocked on a {kind}")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(20)
    try:
        with pytest.raises(SchemaError, match=r"compile\.json: not a regular file$"):
            load_results(path, "compile")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _a_published_pass() -> dict:
    """A cutile pass of the newest published correctness run, as its file holds it."""
    path = next(p for p in reversed(PUBLISHED) if p.stem == "correctness")
    return next(c for c in json.loads(path.read_text())["cases"] if c["impl"] == "cutile" and c["status"] == "pass")


@pytest.mark.parametrize("field,value,expected", [
    ("y_rel_l2", "nan", "a finite number <= {y_rel} (tolerance.y.rel_l2) in a case whose status is pass, got 'nan'"),
    ("y_max_abs_over_peak", None, "a finite number <= {y_abs} (tolerance.y.max_abs) in a case whose status is pass, "
                                  "got None"),
    ("state_rel_l2", 0.5, "a finite number <= {state_rel} (tolerance.final_state.rel_l2) in a case whose status is "
                          "pass, got 0.5"),
    ("state_max_abs_over_peak", "inf", "a finite number <= {state_abs} (tolerance.final_state.max_abs) in a case "
                                       "whose status is pass, got 'inf'"),
])
def test_a_pass_whose_errors_break_its_own_recorded_bound_is_refused(field: str, value: object, expected: str,
                                                                      tmp_path: Path) -> None:
    """A results file is input: a case that says pass while its errors are missing, NaN or above the bound it records
    was never a pass, and every reader (the report, the summary) refuses the file instead of showing a pass."""
    case = _a_published_pass()
    tol = case["tolerance"]
    expected = expected.format(y_rel=f"{tol['y']['rel_l2']:g}", y_abs=f"{tol['y']['max_abs']:g}",
                               state_rel=f"{tol['final_state']['rel_l2']:g}",
                               state_abs=f"{tol['final_state']['max_abs']:g}")
    CaseRecord.from_dict(case)  # as published: accepted
    with pytest.raises(SchemaError) as refused:
        CaseRecord.from_dict({**case, field: value}, tmp_path / "x.json", "cases[0]")
    assert str(refused.value) == f"{tmp_path / 'x.json'}: cases[0] ({case['id'][:60]}).{field}: expected {expected}"
    CaseRecord.from_dict({**case, field: value, "status": "fail", "reason": "over its bound"})  # a fail may say so
