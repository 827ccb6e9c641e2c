"""The HTML report (reports/): structure, escaping, self-containment, determinism, no-overwrite, refusal of
unknown schemas, the index and the comparison, and a clean load in headless Chromium.

The results rendered here are SYNTHETIC: built by this file in tmp_path, on a GPU named
"synthetic-test-gpu", with values chosen to exercise every branch (they are not measurements). Every
real run committed under reports/published/ is rendered too.
"""

from __future__ import annotations

import copy
import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from reports import compare, render
from reports.markup import ReportError
from reports.runs import load_run
from reports.sections import SECTIONS
from validation.browser import REQUIRE_ENV, find_browser
from validation.provenance import ROOT
from validation.results import write_json_atomic

ARTIFACTS = ROOT / "artifacts"
SCREENSHOT = ARTIFACTS / "report-synthetic.png"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
SWEEP = {"batch": 4, "nheads": 8, "headdim": 64, "ngroups": 1, "chunk_size": 128}
TOL = {"y": {"rel_l2": 1e-2, "max_abs": 2e-2, "reason": "synthetic tolerance row <chosen by the test>"},
       "final_state": {"rel_l2": 1e-3, "max_abs": 1e-3, "reason": "synthetic state row"}}


def _environment(gpu: str = "synthetic-test-gpu") -> dict[str, object]:
    return {"suite_version": "0.1.0", "git_commit": COMMIT, "git_dirty": False, "gpu_name": gpu,
            "compute_capability": "9.0", "driver": None, "torch": "2.13.0", "container_image": None,
            "env": {"MAMBA_DETERMINISTIC": "1"}, "seeds": [0, 1],
            "null_reasons": {"driver": "nvidia-smi not found on PATH (synthetic)",
                             "container_image": "not in the suite's container (SSD_IMAGE unset)"}}


def _timed(case_id: str, impl: str, seqlen: int, dstate: int, median: float, **extra: object) -> dict[str, object]:
    case = {"id": case_id, "impl": impl, "status": "pass", "dtype": "bf16", "regime": "typical",
            "shape": {**SWEEP, "seqlen": seqlen, "dstate": dstate},
            "kernel_us": {"median": median, "p10": median * 0.98, "p90": median * 1.02, "rel_std": 0.01, "reps": 50},
            "wall_us": {"median": median + 400, "p10": median + 390, "p90": median + 450, "rel_std": 0.08, "reps": 50},
            "compile_s": 1.5, "floor_us": median / 6}
    case.update(extra)
    return case


def _bench_cases(scale: float = 1.0) -> list[dict[str, object]]:
    cases = []
    for dstate in (64, 128):
        for seqlen in (1024, 16384, 262144):
            t = seqlen / 50 * (dstate / 64)
            for impl, factor in (("triton", 1.0), ("cutile", 0.8), ("tilegym", 0.85)):
                cases.append(_timed(f"bench-{impl}-L{seqlen}-n{dstate}", impl, seqlen, dstate, t * factor * scale))
    fail = next(c for c in cases if c["id"] == "bench-tilegym-L16384-n128")
    fail.update(status="fail", reason="gate: y rel_l2 3.1e-01 > 1.0e-02 <synthetic>", kernel_us=None)
    skipped = next(c for c in cases if c["id"] == "bench-cutile-L262144-n64")
    skipped.update(status="not-run", reason="synthetic: deselected", kernel_us=None, wall_us=None, floor_us=None)
    cases.append(_timed("bench-cutile-L16384-n128-noswizzle", "cutile", 16384, 128, 300.0, variant="no-swizzle"))
    tuned = next(c for c in cases if c["id"] == "bench-tilegym-L1024-n64")
    tuned["tilegym_tuning"] = [{"kernel": k, "source": "shipped choice (tuned.json, tuned <synthetic>)"}
                               for k in ("chunk_cumsum_kernel", "compute_out_kernel")]
    next(c for c in cases if c["id"] == "bench-triton-L1024-n64")["triton_tuned_at"] = 16384
    return cases


def _suites(gpu: str = "synthetic-test-gpu", scale: float = 1.0) -> dict[str, dict[str, object]]:
    correctness = [
        {"id": "cutile-bf16-typical-<b>bold</b>", "impl": "cutile", "status": "pass", "dtype": "bf16",
         "regime": "typical", "shape": {**SWEEP, "seqlen": 256, "dstate": 64}, "y_rel_l2": 3e-3, "y_max_abs": 1e-2,
         "state_rel_l2": 1e-4, "state_max_abs": 2e-4, "nonfinite": 0, "tolerance": TOL},
        {"id": "cutile-fp32-huge-dt", "impl": "cutile", "status": "fail", "dtype": "fp32", "regime": "huge_dt",
         "shape": {**SWEEP, "seqlen": 77, "dstate": 64}, "y_rel_l2": "nan", "y_max_abs": "inf", "state_rel_l2": None,
         "state_max_abs": None, "nonfinite": 12, "tolerance": TOL,
         "null_reasons": {"state_rel_l2": "the oracle's state is non-finite"},
         "reason": "y has 12 non-finite values <script>alert(1)</script>"},
        {"id": "cutile-bf16-long", "impl": "cutile", "status": "not-run", "reason": "no CUDA device (synthetic)"},
    ]
    stability = [
        {"id": f"stab-{impl}-{regime}", "impl": impl, "status": status, "regime": regime, "dtype": "bf16",
         "y_rel_l2": err, "nonfinite": bad, "tolerance": TOL, **({"reason": f"synthetic {status}"} if status != "pass"
                                                                  else {})}
        for impl, regime, status, err, bad in (
            ("cutile", "typical", "pass", 2e-3, 0), ("triton", "typical", "pass", 2.5e-3, 0),
            ("cutile", "huge_A_dt", "pass", 4e-3, 0), ("triton", "huge_A_dt", "fail", "inf", 4096),
            ("tilegym", "typical", "unsupported", None, None), ("tilegym", "huge_A_dt", "crashed", None, None))]
    benchmark = {"cases": _bench_cases(scale),
                 "tilegym_tuning": {"mode": "cached", "what": "stored choices <synthetic>"},
                 "triton_tuning": {"mode": "headline", "what": "tuned at <synthetic>"},
                 "compile_phase": {"jobs": 8, "wall_s": 41.2, "first_calls": 11, "of": 12,
                                   "failed": {"bench-tilegym-x": "OverflowError: synthetic"}, "what": "<synthetic>"},
                 "published_ratios": {"gpu": "B300 (synthetic)", "source": "synthetic values chosen by the test",
                                      "points": [{"seqlen": s, "dstate": d, "ratio": 1.1 + d / 640 + s / 2**20}
                                                 for d in (64, 128) for s in (1024, 16384, 262144)]}}
    compile_ = [{"id": "compile-ssd-sm90", "impl": "cutile", "status": "pass", "compile_s": 4.2}]
    out = {"correctness": {"cases": correctness}, "stability": {"cases": stability}, "benchmark": benchmark,
           "compile": {"cases": compile_}}
    for suite, payload in out.items():
        payload.update({"schema_version": 1, "suite": suite, "suite_version": "0.1.0",
                        "created": "2026-11-30T09:00:00+00:00", "finished": "2026-11-30T09:30:00+00:00",
                        "environment": _environment(gpu)})
    return out


def _write_run(directory: Path, suites: dict[str, dict[str, object]]) -> Path:
    for suite, payload in suites.items():
        write_json_atomic(directory / "raw" / f"{suite}.json", payload)
    return directory


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return _write_run(tmp_path / "runs" / "20261130T090000Z", _suites())


def _render(run_dir: Path, out: Path) -> str:
    return render.render_run(run_dir, out).read_text()


def _all_cases(run_dir: Path) -> list[tuple[str, dict[str, object]]]:
    run = load_run(run_dir)
    return [(s, c) for s in run.files for c in run.cases(s)]


def _section(page: str, sid: str) -> str:
    match = re.search(rf'<section id="{re.escape(sid)}">(.*?)</section>', page, re.S)
    assert match, f"section {sid!r} not found"
    return match.group(1)


def test_version_names_suite_run_and_commit(run_dir: Path) -> None:
    assert load_run(run_dir).version == "0.1.0+20261130T090000Z-0123456"


def test_sections_present_in_order(run_dir: Path, tmp_path: Path) -> None:
    page = _render(run_dir, tmp_path / "out")
    found = re.findall(r'<section id="([^"]+)">', page)
    assert found == [sid for sid, _, _ in SECTIONS], f"sections out of order or missing: {found}"


def test_every_case_id_appears_escaped(run_dir: Path, tmp_path: Path) -> None:
    page = _render(run_dir, tmp_path / "out")
    for suite, case in _all_cases(run_dir):
        assert html.escape(str(case["id"])) in page, f"{suite} case {case['id']} is not in the report"
    assert "<b>bold</b>" not in page and "<script>alert" not in page, "text from a results file was not escaped"


def test_not_run_lists_missing_suites_and_cases(run_dir: Path, tmp_path: Path) -> None:
    section = _section(_render(run_dir, tmp_path / "out"), "not-run")
    assert "reference" in section and "did not run" in section, "the missing reference suite is not listed"
    for _, case in _all_cases(run_dir):
        if case["status"] in ("not-run", "unsupported"):
            assert html.escape(str(case["id"])) in section, f"{case['id']} ({case['status']}) is not listed"
            assert html.escape(str(case["reason"])) in section, f"{case['id']}: its reason is not shown"


def test_failed_gate_shows_failure_not_speedup(run_dir: Path, tmp_path: Path) -> None:
    page = _render(run_dir, tmp_path / "out")
    verdict = _section(page, "verdict")
    row = next(r for r in verdict.split("<tr>") if "L16384 h8 p64 g1 n128" in r)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row)
    assert cells[1] == "1.25x", f"ours at the headline point should be 1/0.8 = 1.25x; row: {cells}"
    assert cells[2] == "\u2014" and "tilegym fail" in cells[4], f"a failed gate must show no speedup: {cells}"
    times = _section(page, "times")
    assert "correctness gate failed" in times, "the failed benchmark case does not show its failure"
    assert "B300 (synthetic)" in verdict, "the published ratios' source is not shown beside the measured ones"


def test_tilegym_config_source_is_shown(run_dir: Path, tmp_path: Path) -> None:
    times = _section(_render(run_dir, tmp_path / "out"), "times")
    assert "TileGym's tuning in this run: cached: stored choices &lt;synthetic&gt;." in times
    row = next(r for r in times.split("<tr>") if "bench-tilegym-L1024-n64" in r)
    assert "TileGym config: shipped choice (tuned.json, tuned &lt;synthetic&gt;)" in row
    assert "Triton's autotune in this run: headline: tuned at &lt;synthetic&gt;." in times
    row = next(r for r in times.split("<tr>") if "bench-triton-L1024-n64" in r)
    assert "Triton tuned at 16384 tokens" in row


def test_compile_phase_is_summed_up(run_dir: Path, tmp_path: Path) -> None:
    times = _section(_render(run_dir, tmp_path / "out"), "times")
    assert "Compile phase: 11 of 12 first calls in 8 processes, 41 s, 1 failed there; &lt;synthetic&gt;." in times


def test_nulls_show_their_reason(run_dir: Path, tmp_path: Path) -> None:
    page = _render(run_dir, tmp_path / "out")
    assert "nvidia-smi not found on PATH (synthetic)" in _section(page, "environment")
    assert "the oracle&#x27;s state is non-finite" in _section(page, "correctness")


def test_stability_grid_and_ablation(run_dir: Path, tmp_path: Path) -> None:
    page = _render(run_dir, tmp_path / "out")
    grid = _section(page, "stability")
    for status in ("pass", "fail", "unsupported", "crashed"):
        assert f"s-{status}" in grid, f"the stability grid shows no {status} cell"
    assert "nonfinite 4096" in grid
    assert "no-swizzle" in _section(page, "ablation")


def test_nothing_points_outside_the_page(run_dir: Path, tmp_path: Path) -> None:
    page = _render(run_dir, tmp_path / "out")
    refs = re.findall(r'\b(?:src|href)\s*=\s*["\']?([^"\'\s>]*)', page, re.I)
    refs += re.findall(r"url\(\s*['\"]?([^'\")]*)", page, re.I)
    outside = [r for r in refs if re.match(r"^([a-z][a-z0-9+.-]*:|//)", r, re.I)]
    assert not outside, f"the page refers outside itself: {outside}"
    assert not re.search(r"<script\b", page, re.I), "the page has a script"
    assert not re.search(r"<link\b", page, re.I), "the page links a resource"
    for ref in refs:
        if not ref.startswith("#"):
            assert (tmp_path / "out" / ref).is_file(), f"relative link {ref} has no file beside the page"


def test_render_is_deterministic(run_dir: Path, tmp_path: Path) -> None:
    first, second = _render(run_dir, tmp_path / "a"), _render(run_dir, tmp_path / "b")
    assert first == second, "two renders of the same results differ"
    for raw in (run_dir / "raw").iterdir():
        assert (tmp_path / "a" / "raw" / raw.name).read_bytes() == raw.read_bytes(), f"{raw.name} copied changed"


def test_existing_report_is_not_overwritten(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    _render(run_dir, out)
    (out / "index.html").write_text("kept")
    with pytest.raises(FileExistsError, match="--overwrite"):
        render.render_run(run_dir, out)
    assert render.main([str(run_dir), "--out", str(out)]) == 2
    assert (out / "index.html").read_text() == "kept", "a refused render changed the report"
    assert render.main([str(run_dir), "--out", str(out), "--overwrite"]) == 0
    assert (out / "index.html").read_text() != "kept"


def test_unknown_schema_is_refused(tmp_path: Path) -> None:
    suites = _suites()
    suites["benchmark"]["schema_version"] = 2
    directory = _write_run(tmp_path / "run", suites)
    with pytest.raises(ReportError, match=r"benchmark\.json: schema_version 2 is not one this renderer knows"):
        load_run(directory)
    assert render.main([str(directory), "--out", str(tmp_path / "out")]) == 2
    assert not (tmp_path / "out").exists(), "a refused run still wrote a report"


def test_a_single_suite_renders(tmp_path: Path) -> None:
    directory = _write_run(tmp_path / "run", {"compile": _suites()["compile"]})
    page = _render(directory, tmp_path / "out")
    assert re.findall(r'<section id="([^"]+)">', page) == [sid for sid, _, _ in SECTIONS]
    assert "the benchmark did not run" in _section(page, "verdict")
    for suite in ("reference", "correctness", "stability", "benchmark"):
        assert f"suite <b>{suite}</b>: did not run" in _section(page, "not-run")


def test_index_and_comparison(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    old = _write_run(tmp_path / "runs" / "20261130T090000Z", _suites())
    newer = copy.deepcopy(_suites(scale=1.5))
    for payload in newer.values():
        payload["created"] = "2026-12-01T09:00:00+00:00"
    stab = newer["stability"]["cases"]
    stab[3].update(status="pass", y_rel_l2=1e-3, nonfinite=0)  # triton huge_A_dt: fail -> pass
    stab[3].pop("reason")
    bench = newer["benchmark"]["cases"]
    near = next(c for c in bench if c["id"] == "bench-triton-L1024-n64")
    near["kernel_us"] = dict(_bench_cases()[0]["kernel_us"], median=20.1)  # inside both bands
    new = _write_run(tmp_path / "runs" / "20261201T090000Z", newer)
    for run in (old, new):
        assert render.main([str(run), "--out", str(reports / load_run(run).version)]) == 0
    index = (reports / "index.html").read_text()
    for run in (old, new):
        version = load_run(run).version
        assert html.escape(version) in index, f"{version} is not in the index"
    assert "synthetic-test-gpu" in index and "1.25x" in index
    page = compare.write_compare(reports / load_run(new).version, reports / load_run(old).version).read_text()
    rows = {re.search(r"<code>(.*?)</code>", r).group(1): r for r in page.split("<tr>") if "<code>" in r}
    assert "changed" in rows["stab-triton-huge_A_dt"], "a status change is not flagged"
    assert "changed" in rows["bench-cutile-L16384-n64"], "a 1.5x kernel-time change is not flagged"
    assert "changed" not in rows["bench-triton-L1024-n64"] and "within noise" in rows["bench-triton-L1024-n64"]
    with pytest.raises(FileExistsError):
        compare.write_compare(reports / load_run(old).version, reports / load_run(new).version)


def test_published_layout_renders_in_place(tmp_path: Path) -> None:
    """reports/published/<version>/raw/*.json: rendered beside its raw files; the index links it."""
    reports = tmp_path / "reports"
    directory = _write_run(reports / "published" / "0.1.0+20261130T090000Z-0123456", _suites())
    assert render.main([str(directory)]) == 0
    assert (directory / "index.html").is_file(), "a published run is not rendered in place"
    index = (reports / "index.html").read_text()
    assert 'href="published/0.1.0%2B20261130T090000Z-0123456/index.html"' in index


def test_every_published_run_renders(tmp_path: Path) -> None:
    """Real results committed under reports/published/<version>/raw/ (none yet is fine)."""
    for directory in sorted((ROOT / "reports" / "published").glob("*/raw")):
        page = _render(directory.parent, tmp_path / directory.parent.name)
        for suite, case in _all_cases(directory.parent):
            assert html.escape(str(case["id"])) in page, f"{directory.parent}: {suite} case {case['id']} missing"


def _console_messages(page: Path, screenshot: Path, profile: Path) -> list[str]:
    """Load ``page`` in headless Chromium, save a screenshot, return the console messages it logged."""
    chromium, why = find_browser()
    if chromium is None:
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{REQUIRE_ENV}=1 and {why}", pytrace=False)
        pytest.skip(f"browser check not run: {why}")
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    screenshot.unlink(missing_ok=True)
    done = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", f"--screenshot={screenshot}",
         "--window-size=1280,4000", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"chromium exited {done.returncode}: {done.stderr[-2000:]}"
    assert screenshot.is_file(), f"chromium wrote no screenshot: {done.stderr[-2000:]}"
    # Console messages: "[...:INFO:CONSOLE:1] "text", source: ..." (older builds: "CONSOLE(1)]").
    return [line for line in done.stderr.splitlines() if re.search(r"CONSOLE[(:]\d*", line)]


@pytest.mark.browser
def test_chromium_console_check_can_fail(tmp_path: Path) -> None:
    page = tmp_path / "bad.html"
    page.write_text('<!DOCTYPE html><p>x</p><script>console.error("deliberate report-test error")</script>')
    messages = _console_messages(page, tmp_path / "bad.png", tmp_path / "profile")
    assert any("deliberate report-test error" in m for m in messages), f"console error not seen: {messages}"


@pytest.mark.browser
def test_report_loads_cleanly_in_chromium(run_dir: Path, tmp_path: Path) -> None:
    """The page has no script, so any console message (a CSP violation, a blocked load) is a fault."""
    out = ARTIFACTS / "report-synthetic"
    shutil.rmtree(out, ignore_errors=True)
    render.render_run(run_dir, out)
    messages = _console_messages(out / "index.html", SCREENSHOT, tmp_path / "profile")
    assert not messages, "the report logged console messages:\n" + "\n".join(messages)
    assert json.loads((out / "raw" / "benchmark.json").read_text())["suite"] == "benchmark"
