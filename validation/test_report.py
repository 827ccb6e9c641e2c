"""The HTML report (reports/): structure, escaping, self-containment, determinism, no-overwrite, refusal of
unknown schemas, errata, the charts, the index and the comparison, and in headless Chromium: a clean load,
no sideways scroll at 1400 px and the verdict on the first screen, for a GPU run and a CPU-only run.

The results rendered here are SYNTHETIC: built by this file in tmp_path, on a GPU named
"synthetic-test-gpu" (or on no GPU, for the CPU-only run), with values chosen to exercise every branch
(they are not measurements). The real runs under reports/published/ are checked against the schema
(test_report_inputs.py) and CI renders the newest of them (`.ci/run`); the tests render only these small
fixtures. Tests write only under tmp_path; the committed screenshots come from `python -m reports.screenshots`.
"""

from __future__ import annotations

import copy
import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from reports import compare, render
from reports.chromium import open_page
from reports.markup import ReportError
from reports.runs import load_run
from reports.sections import SECTIONS
from validation.bench.tilegym_decisions import FIRST_CONFIG, TUNE_COMMAND
from validation.browser import REQUIRE_ENV, find_browser
from validation.results import write_json_atomic
from validation.schema import CaseRecord

WIDTH, FIRST_SCREEN = 1400, 1000  # a reviewer's window; the verdict must be within its first screen
COMMIT = "0123456789abcdef0123456789abcdef01234567"
SWEEP = {"batch": 4, "nheads": 8, "headdim": 64, "ngroups": 1, "chunk_size": 128}
TOL = {"y": {"rel_l2": 1e-2, "max_abs": 2e-2, "reason": "synthetic tolerance row <chosen by the test>"},
       "final_state": {"rel_l2": 1e-3, "max_abs": 1e-3, "reason": "synthetic state row"}}
# A pass carries every error its tolerance bounds (the schema refuses one that does not): the rest of a synthetic pass.
_PASS_REST = {"y_max_abs_over_peak": 5e-3, "state_rel_l2": 1e-4, "state_max_abs_over_peak": 2e-4}


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
            # ours: where its time goes (the segmented design's five kernels, the widest breakdown there is)
            cases[-2].update(per_kernel_us={"_chunk_cumsum_kernel": 0.05 * t, "_segment_state_kernel": 0.3 * t,
                                            "_segment_scan_kernel": 0.05 * t, "_segment_apply_kernel": 0.1 * t,
                                            "_chunk_out_kernel": 0.3 * t},
                             floor_design_us=t / 4, design="segmented state pass, synthetic")
    fail = next(c for c in cases if c["id"] == "bench-tilegym-L16384-n128")
    fail.update(status="fail", reason="gate: y rel_l2 3.1e-01 > 1.0e-02 <synthetic>", kernel_us=None)
    skipped = next(c for c in cases if c["id"] == "bench-cutile-L262144-n64")
    skipped.update(status="not-run", reason="synthetic: deselected", kernel_us=None, wall_us=None, floor_us=None)
    cases.append(_timed("bench-cutile-L16384-n128-noswizzle", "cutile", 16384, 128, 300.0, variant="no-swizzle"))
    tuned = next(c for c in cases if c["id"] == "bench-tilegym-L1024-n64")
    tuned["tilegym_tuning"] = [{"kernel": k, "source": "shipped choice (tuned.json, tuned <synthetic>)"}
                               for k in ("chunk_cumsum_kernel", "compute_out_kernel")]
    for c in cases:
        if c["impl"] == "triton":
            c["triton_tuned_at"] = 16384
    return cases


def _suites(gpu: str = "synthetic-test-gpu", scale: float = 1.0) -> dict[str, dict[str, object]]:
    correctness = [
        {"id": "cutile-bf16-typical-<b>bold</b>", "impl": "cutile", "status": "pass", "dtype": "bf16",
         "regime": "typical", "shape": {**SWEEP, "seqlen": 256, "dstate": 64}, "y_rel_l2": 3e-3, "y_max_abs": 1e-2,
         "y_max_abs_over_peak": 5e-3, "state_rel_l2": 1e-4, "state_max_abs": 2e-4, "state_max_abs_over_peak": 1e-4,
         "nonfinite": 0, "tolerance": TOL},
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
                                                                  else _PASS_REST)}
        for impl, regime, status, err, bad in (
            ("cutile", "typical", "pass", 2e-3, 0), ("triton", "typical", "pass", 2.5e-3, 0),
            ("cutile", "huge_A_dt", "pass", 4e-3, 0), ("triton", "huge_A_dt", "fail", "inf", 4096),
            ("tilegym", "typical", "unsupported", None, None), ("tilegym", "huge_A_dt", "crashed", None, None))]
    benchmark = {"cases": _bench_cases(scale),
                 "tilegym_tuning": {"mode": "cached", "what": "stored choices <synthetic>"},
                 "triton_tuning": {"mode": "headline", "what": "tuned at <synthetic>"},
                 "timing": {"mode": "interleaved", "what": "rounds of every run <synthetic>"},
                 "length_scaling": {"what": "both lengths in the same rounds <synthetic>", "seqlens": [131072, 262144],
                                    "rows": [{"impl": impl, "dstate": 512, "long_over_short": ratio,
                                              "kernel_us": {"131072": {"median": 2800.0}, "262144": {"median": 5600.0}},
                                              "ns_per_token": {"131072": 21.362, "262144": 21.3620 * ratio},
                                              "gpu_clocks": {"unavailable": "synthetic"}}
                                             for impl, ratio in (("tilegym", 1.1), ("cutile", 0.9985))],
                                    "not_measured_at": {"64": "out of GPU memory: <synthetic>"}},
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


NO_GPU = "no CUDA device (synthetic: torch.cuda.is_available() is False)"


def _cpu_suites() -> dict[str, dict[str, object]]:
    """What `nox -s validate` writes on a machine without a GPU: every GPU case not-run with the reason, the
    references and the compile check passing, the Triton interpreter on tiny shapes."""
    suites = _suites()
    for payload in suites.values():
        env = payload["environment"]
        env.update(gpu_name=None, null_reasons={**env["null_reasons"], "gpu_name": NO_GPU})
    bench = suites["benchmark"]
    bench["cases"] = [{"id": c["id"], "impl": c["impl"], "shape": c["shape"], "dtype": "bf16", "status": "not-run",
                       "reason": f"not run: {NO_GPU}"} for c in _bench_cases() if not c.get("variant")]
    del bench["published_ratios"]
    for suite in ("correctness", "stability"):
        cases = []
        for i in range(40):  # many GPU cases with one reason: they must fold into one line
            for impl in ("cutile", "triton", "tilegym"):
                cases.append({"id": f"{impl}-bf16-l{64 + i}-typical-s0", "impl": impl, "status": "not-run",
                              "dtype": "bf16", "regime": "typical", "reason": f"{impl} needs a CUDA device"})
        cases.append({"id": f"reference-chunked-{suite}-l65", "impl": "reference-chunked", "status": "pass",
                      "dtype": "fp64", "regime": "typical", "y_rel_l2": 1e-15, "nonfinite": 0, "tolerance": TOL,
                      **_PASS_REST})
        suites[suite]["cases"] = cases
    return suites


ERRATUM = {"schema_version": 1, "errata": [{
    "date": "2026-12-01", "title": "Triton tuned at 1024 tokens <synthetic>",
    "text": "The records say 16384; dstate 64 ran the 1024-token choice <synthetic>.",
    "corrections": [{"suite": "benchmark", "impl": "triton", "dstate": [64], "field": "triton_tuned_at",
                     "recorded": 16384, "value": 1024}]}]}


def _write_run(directory: Path, suites: dict[str, dict[str, object]]) -> Path:
    for suite, payload in suites.items():
        write_json_atomic(directory / "raw" / f"{suite}.json", payload)
    return directory


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return _write_run(tmp_path / "runs" / "20261130T090000Z", _suites())


@pytest.fixture
def cpu_run_dir(tmp_path: Path) -> Path:
    return _write_run(tmp_path / "runs" / "20261130T100000Z", _cpu_suites())


def _render(run_dir: Path, out: Path) -> str:
    return render.render_run(run_dir, out).read_text()


def _all_cases(run_dir: Path) -> list[tuple[str, CaseRecord]]:
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
        assert html.escape(case.id) in page, f"{suite} case {case.id} is not in the report"
    assert "<b>bold</b>" not in page and "<script>alert" not in page, "text from a results file was not escaped"


def test_not_run_lists_missing_suites_and_cases(run_dir: Path, tmp_path: Path) -> None:
    section = _section(_render(run_dir, tmp_path / "out"), "not-run")
    assert "reference" in section and "did not run" in section, "the missing reference suite is not listed"
    for _, case in _all_cases(run_dir):
        if case.status in ("not-run", "unsupported"):
            assert html.escape(case.id) in section, f"{case.id} ({case.status}) is not listed"
            assert html.escape(str(case.reason)) in section, f"{case.id}: its reason is not shown"


def test_failed_gate_shows_failure_not_speedup(run_dir: Path, tmp_path: Path) -> None:
    page = _render(run_dir, tmp_path / "out")
    times = _section(page, "times")
    row = next(r for r in times.split("<tr>") if "n128 L16K" in r)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
    # ours, TileGym, Triton, then ours/Triton, TileGym/Triton, ours/TileGym
    assert cells[4] == "1.25x", f"ours at the headline point should be 1/0.8 = 1.25x; row: {cells}"
    assert "s-fail" in cells[2] and cells[5] == cells[6] == "\u2014", f"a failed gate must show no speedup: {cells}"
    assert "correctness gate failed" in times, "the failed benchmark case does not show its failure"
    assert "B300 (synthetic)" in _section(page, "speedup"), "the published ratios' source is not shown"


def test_verdict_answers_per_implementation(run_dir: Path, tmp_path: Path) -> None:
    verdict = _section(_render(run_dir, tmp_path / "out"), "verdict")
    assert "Does the post's claim" in verdict and "synthetic-test-gpu?" in verdict
    answers = verdict.split("<div class=\"row\">")[0]  # the answer table, before the trend and count tables
    rows = {name: r for r in answers.split("<tr>") for name in ("ours (cuTile)", "TileGym (cuTile)") if name in r}
    assert "reproduces" in rows["ours (cuTile)"] and "1.25x" in rows["ours (cuTile)"], rows["ours (cuTile)"]
    # the point whose Triton failed the gate has no ratio: counted, not dropped
    answer = ("reproduces where measured</span>: at least 1.14x at all 5 points with a ratio; 1 of the 6 points "
              "without a ratio")
    assert answer in rows["ours (cuTile)"], rows["ours (cuTile)"]
    tilegym = rows["TileGym (cuTile)"]
    assert "in part" in tilegym and "1 point(s) failed the correctness gate" in tilegym, tilegym
    assert "by seqlen" in verdict and "<th class=\"n\">1K</th>" in verdict, "the trend is not a table"
    assert "Trend:" not in verdict, "the trend is prose again"
    triton = next(r for r in verdict.split("<tr>") if "Triton (mamba_ssm)" in r)
    assert "stability</a>&nbsp;1" in triton, f"the count table does not say whose the failure is: {triton}"
    assert "The failures are the peers'" in verdict


def test_cpu_only_run_says_the_gpu_suites_did_not_run(cpu_run_dir: Path, tmp_path: Path) -> None:
    page = _render(cpu_run_dir, tmp_path / "out")
    verdict = _section(page, "verdict")
    assert "No GPU on this machine, so the GPU suites did not run" in verdict and html.escape(NO_GPU) in verdict
    assert "Does the post" not in verdict and "no passing pair" not in verdict, "a CPU run got a verdict question"
    assert "missing: none" not in page
    not_run = _section(page, "not-run")
    assert not_run.count("cutile needs a CUDA device") == 2, "identical not-run rows are not folded by reason"
    assert "Every suite ran" not in not_run
    assert "Nothing was timed" in _section(page, "times")


def test_tilegym_config_source_is_said_once(run_dir: Path, tmp_path: Path) -> None:
    times = _section(_render(run_dir, tmp_path / "out"), "times")
    assert "TileGym&#39;s tuning in this run: cached: stored choices &lt;synthetic&gt;." in times
    note = "TileGym config: shipped choice (tuned.json, tuned &lt;synthetic&gt;)"
    assert times.count(note) == 1, f"the TileGym config note appears {times.count(note)} times"
    assert "Triton&#39;s autotune in this run: headline: tuned at &lt;synthetic&gt;." in times
    assert times.count("Triton tuned at 16384 tokens") == 1


def test_erratum_corrects_the_label_on_the_page_and_the_index(tmp_path: Path) -> None:
    directory = _write_run(tmp_path / "reports" / "published" / "0.1.0+20261130T090000Z-0123456", _suites())
    (directory / "errata.json").write_text(json.dumps(ERRATUM))
    assert render.main([str(directory)]) == 0
    page = (directory / "index.html").read_text()
    head = page.split('<section id="verdict">')[0]
    assert "Erratum 1 (2026-12-01): Triton tuned at 1024 tokens &lt;synthetic&gt;." in head
    times = _section(page, "times")
    assert "Triton tuned at 1024 tokens (erratum 1; the records say 16384)" in times
    assert "Triton tuned at 16384 tokens: 3 case(s), dstate 128<" in times, "the corrected label is still shown"
    index = (tmp_path / "reports" / "index.html").read_text()
    assert "Triton tuned at 1024 tokens &lt;synthetic&gt;" in index and "#erratum-1" in index
    out = tmp_path / "copy"
    render.render_run(directory, out)
    assert (out / "errata.json").read_bytes() == (directory / "errata.json").read_bytes()


def test_erratum_that_does_not_match_the_data_is_refused(run_dir: Path, tmp_path: Path) -> None:
    wrong = copy.deepcopy(ERRATUM)
    wrong["errata"][0]["corrections"][0]["recorded"] = 4096
    (run_dir / "errata.json").write_text(json.dumps(wrong))
    with pytest.raises(ReportError, match=r"errata\.json: correction .* do not record triton_tuned_at=4096"):
        load_run(run_dir)


def test_chart_fits_the_data_and_shows_the_claim(run_dir: Path, tmp_path: Path) -> None:
    speedup = _section(_render(run_dir, tmp_path / "out"), "speedup")
    svgs = re.findall(r"<svg.*?</svg>", speedup, re.S)
    assert len(svgs) == 3, "expected one chart per comparison: ours/Triton, TileGym/Triton, ours/TileGym"
    first = svgs[0]
    ticks = [float(t) for t in re.findall(r'text-anchor="end"[^>]*>([0-9.]+)</text>', first)]
    assert min(ticks) > 0.5 and max(ticks) < 2.5, f"the y axis is not fitted to ratios of 1.18-1.25: {ticks}"
    assert 'font-weight="700">1</text>' in first, "1.0 is not marked"
    assert 'fill-opacity="0.10"' in first and "1.14x&ndash;1.82x" in speedup, "the claimed range is not a band"
    assert "time_chart" not in speedup and "log-log" in _section(_render(run_dir, tmp_path / "o2"), "times")


def test_no_published_column_without_published_points(tmp_path: Path) -> None:
    suites = _suites()
    suites["benchmark"]["published_ratios"]["points"] = []
    page = _render(_write_run(tmp_path / "run", suites), tmp_path / "out")
    assert "published" not in _section(page, "times").lower() and "dotted" not in _section(page, "speedup").lower()


def test_compile_phase_is_summed_up(run_dir: Path, tmp_path: Path) -> None:
    times = _section(_render(run_dir, tmp_path / "out"), "times")
    assert "Compile phase: 11 of 12 first calls in 8 processes, 41 s, 1 failed there; &lt;synthetic&gt;." in times


def test_how_the_times_were_taken_is_said(run_dir: Path, tmp_path: Path) -> None:
    times = _section(_render(run_dir, tmp_path / "out"), "times")
    assert "Timing: interleaved: rounds of every run &lt;synthetic&gt;." in times
    suites = _suites()
    del suites["benchmark"]["timing"]  # a run from before interleaved timing says so
    older = _section(_render(_write_run(tmp_path / "older", suites), tmp_path / "older-out"), "times")
    assert "Timing: at each point one implementation after another" in older


def test_the_two_longest_lengths_timed_in_the_same_rounds_are_shown_per_token(run_dir: Path, tmp_path: Path) -> None:
    times = _section(_render(run_dir, tmp_path / "out"), "times")
    part = times[times.index('id="length-scaling"'):times.index("Every benchmark case")]
    assert "both lengths in the same rounds &lt;synthetic&gt;. Not measured: dstate 64: out of GPU memory" in part
    assert "<th class=\"n\">256K / 128K a token</th>" in part
    rows = part.split("<tr>")[2:]
    assert ">ours (cuTile)<" in rows[0] and "<td class=\"n\">21.362</td><td class=\"n\">21.330</td>" in rows[0], rows[0]
    assert "<td class=\"n\">0.9985</td>" in rows[0] and ">TileGym" in rows[1]
    suites = _suites()
    del suites["benchmark"]["length_scaling"]  # a run from before it says so
    older = _section(_render(_write_run(tmp_path / "older", suites), tmp_path / "older-out"), "times")
    assert "Not measured: the run predates the same-rounds timing of the two longest lengths." in older
    suites = _suites()
    suites["benchmark"]["length_scaling"] = {"what": "w", "rows": [], "not_measured": "not reached: interrupted"}
    stopped = _section(_render(_write_run(tmp_path / "stopped", suites), tmp_path / "stopped-out"), "times")
    assert "Not measured: not reached: interrupted." in stopped


def test_where_our_time_goes_kernel_by_kernel(run_dir: Path, tmp_path: Path) -> None:
    """Ours at 16K tokens x dstate 128 (t = 655.36 us a unit): median 0.8 t, segment_state 0.3 t (38% of it),
    chunk_out 0.3 t, the design floor t / 4; every kernel that ran is a column, named without its underscores."""
    floor = _section(_render(run_dir, tmp_path / "out"), "floor")
    assert "Where our kernel time goes, kernel by kernel (5 points)" in floor  # the not-run point has none
    table = floor[floor.index("Where our kernel time goes"):]
    header = table[table.index("design floor us"):table.index("</tr>")]
    kernels = ("chunk_cumsum", "segment_state", "segment_scan", "segment_apply", "chunk_out")
    columns = [header.index(f'<th class="n">{k}</th>') for k in kernels]  # each once, in the order they ran
    assert columns == sorted(columns)
    row = table[table.index("<td class=\"nw\">n128 L16K</td>"):]
    row = row[:row.index("</tr>")]
    assert row.count("<td") == 4 + len(kernels)
    assert '<td class="n">524</td><td class="n">109</td><td class="n">164</td>' in row, row
    assert '<td class="n nw">197 <span class="why">38%</span></td>' in row, row


def test_nulls_show_their_reason(run_dir: Path, tmp_path: Path) -> None:
    page = _render(run_dir, tmp_path / "out")
    assert "nvidia-smi not found on PATH (synthetic)" in _section(page, "environment")
    assert "the oracle&#39;s state is non-finite" in _section(page, "correctness")


def test_stability_grid_and_ablation(run_dir: Path, tmp_path: Path) -> None:
    page = _render(run_dir, tmp_path / "out")
    grid = _section(page, "stability")
    for status in ("pass", "fail", "unsupported", "crashed"):
        assert f"s-{status}" in grid, f"the stability grid shows no {status} cell"
    assert "nonfinite 4096" in grid
    ablation = _section(page, "ablation")
    assert "no-swizzle" in ablation
    # Against Triton (655.36 us) and against our default at the same point (524.288 us): the variant took 300.
    row = ablation[ablation.index("bench-cutile-L16384-n128-noswizzle"):]
    row = row[:row.index("</tr>")]
    assert "2.18" in row and "1.75" in row, row


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
    known = r"benchmark\.json: schema_version: expected one this reader knows \(1\), got 2"
    with pytest.raises(ReportError, match=known):
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
    stab[3].update(status="pass", y_rel_l2=1e-3, nonfinite=0, **_PASS_REST)  # triton huge_A_dt: fail -> pass
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


def _chromium() -> str:
    """The browser, or skip with the reason (fail under SSD_REQUIRE_BROWSER=1, as CI sets, or where SSD_BROWSER names
    one that cannot run: a browser asked for by name is never silently skipped)."""
    chromium, why = find_browser()
    if chromium is None:
        if os.environ.get(REQUIRE_ENV) == "1" or os.environ.get("SSD_BROWSER"):
            pytest.fail(f"{REQUIRE_ENV}=1 and {why}", pytrace=False)
        pytest.skip(f"browser check not run: {why}")
    return chromium


def _console_messages(page: Path, screenshot: Path, profile: Path) -> list[str]:
    """Load ``page`` in headless Chromium, save a screenshot, return the console messages it logged."""
    chromium = _chromium()
    done = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", f"--screenshot={screenshot}",
         f"--window-size={WIDTH},{FIRST_SCREEN}", page.resolve().as_uri()],
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
    out = tmp_path / "report"
    render.render_run(run_dir, out)
    messages = _console_messages(out / "index.html", tmp_path / "report.png", tmp_path / "profile")
    assert not messages, "the report logged console messages:\n" + "\n".join(messages)
    assert json.loads((out / "raw" / "benchmark.json").read_text())["suite"] == "benchmark"


@pytest.mark.browser
def test_layout_check_can_fail(tmp_path: Path) -> None:
    """The measurement sees a table wider than the column and a verdict below the first screen."""
    page = tmp_path / "wide.html"
    page.write_text('<!DOCTYPE html><body style="max-width:1240px;margin:0 auto;padding:0 24px">'
                    '<div style="height:1500px"></div><section id="verdict">v</section>'
                    '<table><tr><td style="white-space:nowrap">' + "x" * 400 + "</td></tr></table></body>")
    with open_page(_chromium(), page, profile=tmp_path / "profile", width=WIDTH, height=FIRST_SCREEN) as view:
        layout = view.layout()
    assert layout.scrolls_sideways and layout.wide, f"a 400-character line did not overflow: {layout}"
    assert layout.verdict and layout.verdict["top"] > FIRST_SCREEN


@pytest.mark.browser
@pytest.mark.parametrize("kind", ["gpu", "cpu-only"])
def test_page_fits_1400px_with_the_verdict_first(kind: str, tmp_path: Path) -> None:
    """At 1400 px: no sideways scroll (as loaded and with every <details> open), no table or chart past the
    column, the verdict within the first 1000 px, and on a GPU run the speedup chart on that screen too."""
    suites = _suites() if kind == "gpu" else _cpu_suites()
    out = tmp_path / "report"
    render.render_run(_write_run(tmp_path / "runs" / "20261130T090000Z", suites), out)
    with open_page(_chromium(), out / "index.html", profile=tmp_path / "profile", width=WIDTH,
                   height=FIRST_SCREEN) as view:
        loaded = view.layout()
        view.open_all_details()
        opened = view.layout()
        console = view.console
    for state, layout in (("as loaded", loaded), ("with every <details> open", opened)):
        assert not layout.scrolls_sideways, f"{kind} page {state}: {layout.scroll_width} px wide at {WIDTH} px"
        assert not layout.wide, f"{kind} page {state}: wider than the column: {layout.wide}"
    assert loaded.verdict and loaded.verdict["bottom"] <= FIRST_SCREEN, f"verdict not on the first screen: {loaded}"
    if kind == "gpu":
        assert loaded.chart and loaded.chart["top"] < FIRST_SCREEN, f"no chart on the first screen: {loaded}"
    assert not console, f"the page logged: {console}"


def test_a_case_timed_under_a_held_down_clock_is_flagged(tmp_path: Path) -> None:
    """gpu_clocks (validation.bench.clocks): a power-capped case carries a 'clock' flag with its reason in the times
    table, every case its SM clock range in the detail table, and the notes count them; a run without the records
    says they were not recorded."""
    suites = _suites()
    for case in suites["benchmark"]["cases"]:
        if case.get("kernel_us"):
            case["gpu_clocks"] = {"samples": 9, "sm_mhz_min": 1980, "sm_mhz_median": 1980, "sm_mhz_max": 1980,
                                  "sm_mhz_max_supported": 1980, "power_w_max": 410.0, "reasons": []}
    capped = next(c for c in suites["benchmark"]["cases"] if c["id"] == "bench-tilegym-L262144-n128")
    capped["gpu_clocks"] = dict(capped["gpu_clocks"], sm_mhz_min=1755, power_w_max=598.2, reasons=["sw_power_cap"])
    times = _section(_render(_write_run(tmp_path / "runs" / "20261130T090000Z", suites), tmp_path / "out"), "times")
    assert times.count('<span class="flag" title="sw power cap; SM clock down to 1755 of 1980 MHz">clock</span>') == 1
    assert "1755-1980 MHz (sw power cap; SM clock down to 1755 of 1980 MHz)" in times
    assert "1980-1980 MHz" in times
    assert "lowest SM clock 1755 MHz; 1 case(s) ran with the clock held down" in times
    bare = _section(_render(_write_run(tmp_path / "bare" / "20261130T090000Z", _suites()), tmp_path / "out2"), "times")
    assert "GPU clocks: not recorded in this run (the run predates them)" in bare and ">clock</span>" not in bare


def test_the_readme_block_adds_the_same_rounds_per_token_ratio_where_the_run_has_it(run_dir: Path,
                                                                                     tmp_path: Path) -> None:
    from reports import readme_table

    text = readme_table.block(run_dir)
    assert ("| 256K over 128K tokens, kernel time a token, both in the same rounds (run " in text
            and "| ours | TileGym |\n|---|---|---|\n| dstate 512 | 0.999 | 1.100 |\n" in text), text
    suites = _suites()
    del suites["benchmark"]["length_scaling"]
    assert "same rounds" not in readme_table.block(_write_run(tmp_path / "older", suites))


def test_the_verdict_says_when_tilegym_ran_untuned(run_dir: Path, tmp_path: Path) -> None:
    """Where no TileGym choice is stored for the GPU and stack (or autotune is off), TileGym runs its first config:
    every ratio over it compares against an untuned TileGym, so the verdict counts those cases and names the command
    that tunes them; a run whose TileGym took stored choices says nothing of it."""
    assert "first config" not in _section(_render(run_dir, tmp_path / "tuned"), "verdict")
    suites = _suites()
    timed = [c for c in suites["benchmark"]["cases"] if c["impl"] == "tilegym" and c.get("kernel_us") is not None]
    for case in timed[:2]:
        case["tilegym_tuning"] = [{"kernel": "compute_out_kernel", "source": FIRST_CONFIG},
                                  {"kernel": "chunk_cumsum_kernel", "source": "shipped choice (<synthetic>)"}]
    verdict = _section(_render(_write_run(tmp_path / "cached", suites), tmp_path / "o1"), "verdict")
    assert f"TileGym ran its first config, not a tuned choice, in 2 of its {len(timed)} timed cases" in verdict, verdict
    assert f"<code>{TUNE_COMMAND}</code>" in verdict, verdict
    suites["benchmark"]["tilegym_tuning"]["mode"] = "off"
    verdict = _section(_render(_write_run(tmp_path / "off", suites), tmp_path / "o2"), "verdict")
    assert f"in {len(timed)} of its {len(timed)} timed cases" in verdict, verdict


def test_the_report_renders_without_torch(tmp_path: Path) -> None:
    """`nox -s report` installs Jinja2 alone: the report's modules and what they import must not need torch."""
    blocked = "import sys; sys.modules['torch'] = None; import reports.render, reports.compare"
    child = subprocess.run([sys.executable, "-c", blocked], capture_output=True, text=True,
                           cwd=Path(__file__).parent.parent)
    assert child.returncode == 0, child.stderr[-2000:]


def test_the_readme_table_refuses_a_benchmark_case_without_a_shape_in_one_line(tmp_path: Path, capsys) -> None:
    """The contract lets a case go without a shape (the compile and reference suites' have none); a benchmark point
    without seqlen and dstate has no cell in the table."""
    from reports import readme_table

    suites = _suites()
    del suites["benchmark"]["cases"][0]["shape"]
    run = _write_run(tmp_path / "run", suites)
    assert readme_table.main([str(run)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "benchmark.json: case 'bench-triton-L1024-n64' has no shape.seqlen" in err, err


def test_the_readme_refresh_replaces_the_file_in_one_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write that fails half way (here: text that cannot be encoded) leaves the README as it was, not emptied."""
    from reports import readme_table

    readme = tmp_path / "README.md"
    readme.write_text("before\n")
    monkeypatch.setattr(readme_table, "refresh", lambda text: "after \ud800\n")
    with pytest.raises(UnicodeEncodeError):
        readme_table.main(["--refresh", str(readme)])
    assert readme.read_text() == "before\n"
    assert [p.name for p in tmp_path.iterdir()] == ["README.md"], "a temporary file was left behind"
