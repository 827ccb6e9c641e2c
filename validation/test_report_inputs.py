"""The report and its comparison against results files a hostile or a tired user may hand them: well-formed JSON
of the wrong shape is refused in one line naming the file, the field and the value (exit 2, no traceback); no
folder name is taken from a results file unchecked, and nothing is written outside the output folder; an
``index.html`` the suite did not make is never replaced; one broken run folder does not hide the others; with
no argument the newest run made by a suite session is rendered. Synthetic results from test_report.py; every
test writes under its tmp_path only.
"""

from __future__ import annotations

import copy
import json
import os
import random
import re
from pathlib import Path

import pytest

from reports import compare, render
from reports.markup import ReportError
from reports.runs import load_run
from validation.schema import SchemaError, check_results
from validation.test_report import _suites, _write_run


@pytest.fixture(autouse=True)
def reports_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The project's reports/ for these tests: a folder under tmp_path."""
    root = tmp_path / "reports"
    monkeypatch.setattr(render, "REPORTS", root)
    return root


def _raw(run_dir: Path, suites: dict[str, dict[str, object]]) -> Path:
    """Like test_report._write_run, but written with json.dumps as given (no NaN conversion, big ints kept)."""
    for suite, payload in suites.items():
        (run_dir / "raw").mkdir(parents=True, exist_ok=True)
        (run_dir / "raw" / f"{suite}.json").write_text(json.dumps(payload))
    return run_dir


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")} if root.exists() else set()


@pytest.mark.parametrize("field,value", [("suite_version", "/elsewhere/x"), ("suite_version", "../../x"),
                                         ("git_commit", "../../../"), ("git_commit", "/tmp/x")])
def test_a_version_from_the_results_never_names_a_folder(field: str, value: str, tmp_path: Path, capsys) -> None:
    suites = _suites()
    for payload in suites.values():
        if field == "suite_version":  # where today's renderer takes it from: an absolute path escapes reports/
            payload["suite_version"] = str(tmp_path / "elsewhere") + value if value.startswith("/") else value
        else:
            payload["environment"]["git_commit"] = value
    run_dir = _raw(tmp_path / "runs" / "20261130T090000Z", suites)
    before = _files(tmp_path)
    assert render.main([str(run_dir)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "compile.json" in err and ("suite_version" in err or "git_commit" in err), err
    assert _files(tmp_path) == before, f"a refused run wrote {sorted(_files(tmp_path) - before)}"


def test_no_write_leaves_the_output_folder(tmp_path: Path) -> None:
    """The output's raw/ a link to a folder elsewhere: refused before anything is written."""
    run_dir = _write_run(tmp_path / "runs" / "20261130T090000Z", _suites())
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (out / "raw").symlink_to(elsewhere)
    with pytest.raises(ReportError, match="outside the output folder"):
        render.render_run(run_dir, out)
    assert not list(elsewhere.iterdir()) and not (out / "index.html").exists()


def test_an_index_the_suite_did_not_make_is_left_alone(tmp_path: Path, capsys) -> None:
    """`--out /site/ssd` must not replace the user's /site/index.html; an index this renderer made is updated."""
    run_dir = _write_run(tmp_path / "runs" / "20261130T090000Z", _suites())
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("<p>my site</p>")
    assert render.main([str(run_dir), "--out", str(site / "ssd")]) == 0
    assert (site / "index.html").read_text() == "<p>my site</p>", "the user's index.html was replaced"
    assert (site / "ssd" / "index.html").is_file()
    assert "left alone" in capsys.readouterr().out
    ours = tmp_path / "ours"
    assert render.main([str(run_dir), "--out", str(ours / "a")]) == 0  # no index there yet: made, with the mark
    assert render.index_owned(ours) and render.INDEX_GENERATOR in (ours / "index.html").read_text()
    assert render.main([str(run_dir), "--out", str(ours / "b")]) == 0
    assert 'href="b/index.html"' in (ours / "index.html").read_text(), "the suite's own index was not regenerated"


def test_a_run_directory_that_is_not_there_is_said_so(tmp_path: Path, capsys) -> None:
    assert render.main([str(tmp_path / "nowhere")]) == 2
    assert f"{tmp_path / 'nowhere'}: does not exist; expected a run directory" in capsys.readouterr().err


def test_an_index_that_cannot_be_written_leaves_the_report_written(tmp_path: Path, capsys, monkeypatch) -> None:
    """The folder above `--out` may not be the user's to write in: the report stands, the index line says why."""
    run_dir = _write_run(tmp_path / "runs" / "20261130T090000Z", _suites())

    def refused(root: Path) -> Path:
        raise PermissionError(13, "Permission denied", str(root / ".index.html.tmp"))

    monkeypatch.setattr(render, "write_index", refused)
    assert render.main([str(run_dir), "--out", str(tmp_path / "site" / "ssd")]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "site" / "ssd" / "index.html").is_file()
    assert f"index: {tmp_path / 'site' / 'index.html'} not written: Permission denied" in out, out


def test_one_broken_run_folder_does_not_break_the_index(tmp_path: Path, capsys) -> None:
    """Each folder the index cannot read is listed there as unreadable, with why, and said on stderr; the others and
    the report are as without it."""
    parent = tmp_path / "many"
    (parent / "leftover" / "raw").mkdir(parents=True)
    (parent / "leftover" / "raw" / ".benchmark.json.x.tmp").write_text("{")
    _write_run(parent / "big-errata", _suites())
    (parent / "big-errata" / "errata.json").write_text('{"schema_version": 1, "errata": [' + "1" * 5000 + "]}")
    _write_run(parent / "deep-errata", _suites())
    (parent / "deep-errata" / "errata.json").write_text("[" * 100_000 + "]" * 100_000)
    year_one = _suites()
    year_one["compile"]["created"] = "0001-01-01T00:00:00+01:00"
    _raw(parent / "year-one", year_one)
    run_dir = _write_run(tmp_path / "runs" / "20261130T090000Z", _suites())
    assert render.main([str(run_dir), "--out", str(parent / "good")]) == 0
    index = (parent / "index.html").read_text()
    assert 'href="good/index.html"' in index
    err = capsys.readouterr().err
    for name, why in (("leftover", "no results files"), ("big-errata", "errata.json: not usable JSON"),
                      ("deep-errata", "errata.json: not valid JSON"), ("year-one", "created: expected an ISO 8601")):
        row = re.search(rf"<tr><td>{name} .*?</tr>", index, re.S)
        assert row and re.search(rf"\(unreadable: [^<]*{re.escape(why)}", row.group()), f"{name}: not listed unreadable"
        assert any(line.startswith(f"index: {parent / name} listed as unreadable: ") and why in line
                   for line in err.splitlines()), err
    assert "Traceback" not in err and len(err.splitlines()) == 4, err


def _set(payload: dict, path: tuple, value: object) -> None:
    for key in path[:-1]:
        payload = payload[key]
    payload[path[-1]] = value


# The kinds of well-formed but unexpected JSON that crashed the renderer (issue 14), and a few more.
MALFORMED = [
    ("benchmark", ("cases", 0, "kernel_us", "median"), 10**400, "kernel_us.median"),
    ("correctness", ("summary",), [1, 2], "summary"),
    ("benchmark", ("cases", 0, "shape"), "4x16384", "shape"),
    ("benchmark", ("cases", 0, "shape", "dstate"), "big", "shape.dstate"),
    ("benchmark", ("cases", 0, "shape", "seqlen"), 0, "shape.seqlen"),
    ("compile", ("schema_version",), True, "schema_version"),
    ("correctness", ("cases", 0, "status"), "passed", "status"),
    ("correctness", ("cases",), {"a": 1}, "cases"),
    ("benchmark", ("cases", 0, "kernel_us"), [1.0], "kernel_us"),
    ("stability", ("environment",), ["gpu"], "environment"),
    ("stability", ("created",), "yesterday", "created"),
    ("correctness", ("environment", "git_dirty"), "yes", "git_dirty"),
    ("correctness", ("cases", 0, "tolerance"), "tight", "tolerance"),
    ("benchmark", ("compile_phase", "failed"), -1, "compile_phase.failed"),
    ("benchmark", ("published_ratios", "points", 0, "seqlen"), 0, "points[0].seqlen"),
    ("correctness", ("cases", 1, "reason"), None, "reason"),
    ("benchmark", ("cases", 0, "id"), 7, "id"),
    # a page cannot be written with a lone surrogate (UTF-8); a terminal obeys an escape in a name
    ("correctness", ("cases", 1, "reason"), "y\ud800", "reason"),
    ("stability", ("cases", 0, "impl"), "cutile\x1b[31m", "impl"),
    ("stability", ("created",), "0001-01-01T00:00:00+01:00", "created"),  # no UTC time: no run id
    ("correctness", ("cases", 1, "id"), "cutile-bf16-typical-<b>bold</b>", "cases[1].id"),  # cases[0]'s id
]


@pytest.mark.parametrize("suite,path,value,field", MALFORMED, ids=[f"{s}-{f}" for s, _, _, f in MALFORMED])
def test_malformed_results_are_refused_in_one_line(suite, path, value, field, tmp_path: Path, capsys) -> None:
    suites = _suites()
    _set(suites[suite], path, value)
    run_dir = _raw(tmp_path / "runs" / "20261130T090000Z", suites)
    assert render.main([str(run_dir), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{suite}.json" in err and field in err, err
    assert not (tmp_path / "out").exists()
    other = _write_run(tmp_path / "runs" / "20261201T090000Z", _suites())
    assert compare.main([str(other), str(run_dir)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{suite}.json" in err and field in err, err


def _paths(obj: object, prefix: tuple = ()):
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield (*prefix, key)
            yield from _paths(value, (*prefix, key))
    elif isinstance(obj, list):
        for i, value in enumerate(obj[:2]):
            yield (*prefix, i)
            yield from _paths(value, (*prefix, i))


def test_any_field_of_any_type_renders_or_is_refused(tmp_path: Path) -> None:
    """300 mutations (fixed seed) of the synthetic run, each field set to a value of another type or an extreme:
    the renderer and the index either render it or refuse it with ReportError, never another exception. (A full
    sweep, 3,340 mutations, passed when this test was written.)"""
    base = _suites()
    values = [10**400, [], "big", 0, -1, True, None, {}, 1e308, 1e-308, "x", "nan"]
    mutations = [(s, p, v) for s in base for p in _paths(base[s]) for v in values]
    render.render_html(load_run(_raw(tmp_path / "base" / "20261130T090000Z", base)))  # the unmutated run renders
    rendered = 0
    for n, (suite, path, value) in enumerate(random.Random(14).sample(mutations, 300)):
        suites = copy.deepcopy(base)
        _set(suites[suite], path, value)
        run_dir = _raw(tmp_path / f"m{n}" / "20261130T090000Z", suites)
        try:  # any exception but ReportError (one line, exit 2 from main) fails the test
            render.render_html(load_run(run_dir))
            render.write_index(tmp_path / f"m{n}")
        except ReportError:
            continue
        rendered += 1
    # a renderer that refused everything would pass the loop: many mutations (an extreme number where a number
    # goes, a null where null is allowed) are still a run the page can show
    assert rendered >= 30, f"only {rendered} of 300 mutated runs rendered"


def test_the_validator_accepts_every_published_run() -> None:
    paths = sorted((Path(__file__).parent.parent / "reports" / "published").glob("*/raw/*.json"))
    assert len(paths) > 100, f"{len(paths)} published results files found"
    for path in paths:
        check_results(json.loads(path.read_text()), path, path.stem)


def test_schema_errors_name_file_field_and_value() -> None:
    payload = _suites()["compile"]
    payload["cases"][0]["shape"] = {"seqlen": "long"}
    with pytest.raises(SchemaError, match=r"^x/compile\.json: cases\[0\] \(compile-ssd-sm90\)\.shape\.seqlen: "
                                          r"expected an integer, got 'long'$"):
        check_results(payload, "x/compile.json", "compile")


def test_report_with_no_argument_renders_the_newest_suite_run(reports_root: Path) -> None:
    """Only folders named by a run id (as validate and the suite sessions name them) count; anything else under
    reports/<version>/ (a test's scratch, a copy) is not a run."""
    version = reports_root / "0.1.0"
    _write_run(version / "20261130T090000Z", _suites())
    _write_run(version / "20261201T090000Z", _suites())
    _write_run(version / "zz-test-scratch", _suites())
    assert render.newest_run("0.1.0", reports_root) == version / "20261201T090000Z"


@pytest.mark.parametrize("kind", ["fifo", "directory", "dangling link"])
def test_a_suite_path_that_is_not_a_file_is_refused_not_called_missing(kind: str, tmp_path: Path, capsys) -> None:
    run_dir = _write_run(tmp_path / "runs" / "20261130T090000Z", _suites())
    path = run_dir / "raw" / "benchmark.json"
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        path.symlink_to(tmp_path / "nowhere.json")
    assert render.main([str(run_dir), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "benchmark.json" in err and "Traceback" not in err, err
    assert "not a regular file" in err or "No such file" in err, err
    assert not (tmp_path / "out").exists()


CORRECTION = {"suite": "benchmark", "impl": "triton", "dstate": [64], "field": "triton_tuned_at", "recorded": 16384,
              "value": 1024}
ERRATA = [
    ('{"schema_version": 1, "errata": [' + "1" * 5000 + "]}", "not usable JSON"),
    ("[" * 100_000 + "]" * 100_000, "not valid JSON"),
    ('{"schema_version": 1, "schema_version": 1, "errata": []}', "the key 'schema_version' appears twice"),
    (json.dumps({"schema_version": 1, "errata": [{"date": "2026-12-01", "title": "t\ud800", "text": "x",
                                                  "corrections": [CORRECTION]}]}), "errata[0].title: expected text"),
    (json.dumps({"schema_version": 1, "errata": [{"date": "2026-12-01", "title": "t", "text": "x",
                                                  "corrections": [{**CORRECTION, "impl": "x" * 3000}]}]}),
     "matches no case of this run"),
    (json.dumps({"schema_version": 1, "errata": [{"date": "2026-12-01", "title": "t", "text": "x" * 3000,
                                                  "corrections": [{**CORRECTION, "recorded": "y" * 3000}]}]}),
     "do not record triton_tuned_at='yyy"),
    (None, "not a regular file"),  # errata.json a directory: refused, not read as no errata
]


@pytest.mark.parametrize("text,says", ERRATA, ids=[says for _, says in ERRATA])
def test_errata_that_cannot_be_used_are_refused_in_one_short_line(text: str | None, says: str, tmp_path: Path,
                                                                   capsys) -> None:
    run_dir = _write_run(tmp_path / "runs" / "20261130T090000Z", _suites())
    if text is None:
        (run_dir / "errata.json").mkdir()
    else:
        (run_dir / "errata.json").write_text(text)
    assert render.main([str(run_dir), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "errata.json" in err and says in err and "Traceback" not in err, err
    assert len(err) < 400 + len(str(run_dir)), f"a {len(err)}-character line"


def test_the_comparison_goes_beside_the_newer_run_by_time_not_by_text(tmp_path: Path) -> None:
    """10:00 at +09:00 is 01:00 UTC, before 05:00 UTC, though "2026-12-01T10" sorts after "2026-12-01T05"."""
    early, late = _suites(), _suites(scale=1.5)
    for payload in early.values():
        payload["created"] = "2026-12-01T10:00:00+09:00"
    for payload in late.values():
        payload["created"] = "2026-12-01T05:00:00+00:00"
    old, new = _write_run(tmp_path / "early", early), _write_run(tmp_path / "late", late)
    for args in ((old, new), (new, old)):
        page = compare.write_compare(*args, overwrite=True)
        assert page == new / f"compare-{load_run(old).version}.html", page
    assert load_run(old).version.startswith("0.1.0+20261201T010000Z")


def test_a_rerender_into_a_folder_holds_only_the_new_runs_files(tmp_path: Path, capsys) -> None:
    """render A --out D, then render B --out D: D/raw must not keep A's suites that B lacks (nor A's errata), or D
    mixes two runs. Without --overwrite that is refused; with it, the renderer removes what it had copied there
    (known suite files, errata.json) and nothing else."""
    from validation.test_report import ERRATUM

    a = _write_run(tmp_path / "runs" / "20261130T090000Z", _suites())
    (a / "errata.json").write_text(json.dumps(ERRATUM))
    b = _write_run(tmp_path / "runs" / "20261201T090000Z", {"compile": _suites()["compile"]})
    out = tmp_path / "out"
    assert render.main([str(a), "--out", str(out)]) == 0
    (out / "notes.txt").write_text("mine")
    (out / "raw" / "README").write_text("mine too")
    (out / "index.html").unlink()  # so that only the stale files stand in the way
    assert render.main([str(b), "--out", str(out)]) == 2
    assert "is not this run's; pass --overwrite" in capsys.readouterr().err
    assert render.main([str(b), "--out", str(out), "--overwrite"]) == 0
    assert sorted(p.name for p in (out / "raw").iterdir()) == ["README", "compile.json"]
    assert not (out / "errata.json").exists() and (out / "notes.txt").read_text() == "mine"
    assert (out / "raw" / "compile.json").read_bytes() == (b / "raw" / "compile.json").read_bytes()
