"""What a run's results files say, in one table, and whether the run failed.

    python -m validation.summary RUN_DIR [--expect SUITE ...]

Reads ``RUN_DIR/raw/<suite>.json`` and ``RUN_DIR/partial/<suite>.json`` (the cases a suite had written when it
stopped; marked partial) and prints one table, suite x implementation x status counts, then every ``fail`` and
``crashed`` record on one line each: ours as failures, the peers' as findings.

The policy (the constants below):

- a ``fail`` or ``crashed`` record of OURS (our cuTile forward and our float64 references) fails the run;
- a ``fail`` or ``crashed`` record of a PEER (mamba_ssm's Triton, compiled or under the interpreter, and
  NVIDIA's TileGym) is a finding about that peer: printed, kept in the results and the report, and it does
  not fail the run; an implementation in neither list counts as ours, so that a new one fails loudly until
  it is classified here;
- ``pass``, ``unsupported`` (the registry declares the case out of the implementation's reach, with the
  reason) and ``not-run`` (it cannot run on this machine, with the reason; the report lists them) never fail;
- an expected suite (default: every suite) without ``raw/<suite>.json`` fails the run, even with a partial
  file: that suite did not finish;
- a results file that says its run was stopped by a signal (``interrupted``) fails the run: what it did not
  reach is recorded not-run, and would otherwise pass.

Exit status: 0 the run passes the policy, 1 it fails it, 2 the input is bad (RUN_DIR is not a directory, a
file is not a results file by the contract: validation.schema.load_results, as the report reads it), said in
one line.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from validation.bench.clocks import tally
from validation.bench.tilegym_decisions import TUNE_HINT, UNTUNED_WHY, untuned_count
from validation.results import STATUSES, SUITES
from validation.schema import CaseRecord, SchemaError, load_results

__all__ = ["FAILED", "OURS", "PEERS", "BadResults", "SuiteFile", "describe", "judge_run", "load_file", "load_run",
           "main"]

# --- the policy ---------------------------------------------------------------------------------------
OURS = ("cutile", "reference-chunked", "reference-recurrent")  # a failure of these fails the run
PEERS = ("triton", "tilegym", "triton-interpreter")  # a failure of these is a finding about the peer
FAILED = ("fail", "crashed")  # the statuses that say an implementation got a case wrong or died on it


class BadResults(Exception):
    """The input cannot be read as a run's results (exit 2)."""


@dataclass(frozen=True)
class SuiteFile:
    suite: str
    path: Path
    partial: bool
    cases: list[CaseRecord]
    tilegym_tuning: object = None  # the benchmark file's own tilegym_tuning record (its mode, what it means)
    interrupted: str | None = None  # the signal that stopped the suite, when one did

    @property
    def label(self) -> str:
        return f"{self.suite} (partial)" if self.partial else self.suite


def is_ours(impl: str) -> bool:
    return impl not in PEERS


def load_file(path: Path, *, partial: bool = False) -> SuiteFile:
    """One results file, read and checked as the report reads it (:func:`~validation.schema.load_results`): its name
    is its suite."""
    try:
        doc, _ = load_results(path, path.stem)
    except SchemaError as err:
        raise BadResults(str(err)) from None
    return SuiteFile(doc.suite, path, partial, list(doc.cases), doc.extra.get("tilegym_tuning"),
                     doc.extra.get("interrupted"))


def load_run(run_dir: Path) -> list[SuiteFile]:
    """Every ``raw/*.json`` of the run in suite order, each followed by its partial file if one is there."""
    if not run_dir.is_dir():
        raise BadResults(f"{run_dir}: not a directory (expected a run directory holding raw/<suite>.json)")
    if not (run_dir / "raw").is_dir() and not (run_dir / "partial").is_dir():  # a run makes raw/ before its first suite
        raise BadResults(f"{run_dir}: no raw/ or partial/ directory: not a run directory (expected one holding "
                         "raw/<suite>.json)")
    files = [load_file(p) for p in sorted((run_dir / "raw").glob("*.json"))]
    files += [load_file(p, partial=True) for p in sorted((run_dir / "partial").glob("*.json"))]
    return sorted(files, key=lambda f: (SUITES.index(f.suite), f.partial))


def _counts(cases: list[CaseRecord]) -> dict[str, Counter[str]]:
    by_impl: dict[str, Counter[str]] = {}
    for case in cases:
        by_impl.setdefault(case.impl, Counter())[case.status] += 1
    return by_impl


def _table(rows: list[tuple[str, str, Counter[str] | None]]) -> list[str]:
    """(suite, impl, counts) rows as aligned text; counts None prints the impl cell alone."""
    header = ("suite", "implementation", *STATUSES)
    cells = [header] + [(suite, impl, *(str(counts[s]) for s in STATUSES)) if counts is not None else (suite, impl)
                        for suite, impl, counts in rows]
    widths = [max(len(row[i]) for row in cells if i < len(row)) for i in range(len(header))]
    lines = []
    for row in cells:
        text = [cell.ljust(widths[i]) if i < 2 else cell.rjust(widths[i]) for i, cell in enumerate(row)]
        lines.append("  ".join(text).rstrip())
    return lines


def describe(path: Path) -> str:
    """A results file as its suites print it when written: the path, then status counts per implementation."""
    suite_file = load_file(path, partial=path.parent.name == "partial")
    counts = _counts(suite_file.cases)
    rows = [(suite_file.label, impl, counts[impl]) for impl in sorted(counts)]
    if not rows:
        rows = [(suite_file.label, "(no cases)", None)]
    return "\n".join([f"{suite_file.label} results: {path}", *("  " + line for line in _table(rows))])


def _one_line(case: CaseRecord, suite_file: SuiteFile) -> str:
    reason = " ".join((case.reason or "(no reason recorded)").split())
    if len(reason) > 400:
        reason = reason[:400] + " ... (the whole reason is in the file)"
    return f"  {suite_file.label}  {case.impl}  {case.id}  {case.status}: {reason}"


@dataclass(frozen=True)
class Verdict:
    failures: list[str]  # fail or crashed records of ours, one line each
    findings: list[str]  # fail or crashed records of the peers, one line each
    missing: list[str]  # expected suites without a raw results file
    interrupted: list[str]  # "<suite> (stopped by <signal>)", for each file that says a signal stopped it

    @property
    def failed(self) -> bool:
        return bool(self.failures or self.missing or self.interrupted)


def judge_run(files: list[SuiteFile], expect: tuple[str, ...] = SUITES) -> Verdict:
    """Apply the policy of this module's docstring to a run's files."""
    failures, findings = [], []
    for suite_file in files:
        for case in suite_file.cases:
            if case.status in FAILED:
                (failures if is_ours(case.impl) else findings).append(_one_line(case, suite_file))
    done = {f.suite for f in files if not f.partial}
    stopped = [f"{f.label} (stopped by {f.interrupted})" for f in files if f.interrupted]
    return Verdict(failures, findings, [s for s in expect if s not in done], stopped)


def report(run_dir: Path, files: list[SuiteFile], verdict: Verdict) -> str:
    rows: list[tuple[str, str, Counter[str] | None]] = []
    for suite in SUITES:
        for suite_file in (f for f in files if f.suite == suite):
            counts = _counts(suite_file.cases)
            rows += [(suite_file.label, impl, counts[impl]) for impl in sorted(counts)] or [
                (suite_file.label, "(no cases)", None)]
        if suite in verdict.missing:
            rows.append((suite, "(no results file)", None))
    lines = [f"results of {run_dir}", *_table(rows)]
    if verdict.missing:
        lines += ["", f"MISSING: {', '.join(verdict.missing)} wrote no raw/<suite>.json: not run, or stopped before"
                      " the end (what a stopped suite had measured is in its partial row, if it has one)"]
    if verdict.interrupted:
        lines += ["", f"INTERRUPTED: {', '.join(verdict.interrupted)}: what it did not reach is recorded not-run, "
                      "as if it could not run here"]
    if verdict.failures:
        lines += ["", f"FAILURES of ours ({', '.join(OURS)}), {len(verdict.failures)}:", *verdict.failures]
    if verdict.findings:
        lines += ["", f"FINDINGS about the peers ({', '.join(PEERS)}), {len(verdict.findings)}: recorded, do not "
                      "fail the run", *verdict.findings]
    lines += _clock_lines(files)
    lines += _tilegym_lines(files)
    outcome = "FAILED" if verdict.failed else "passed"
    lines += ["", f"summary: {outcome}: {len(verdict.failures)} failed or crashed records of ours, "
                  f"{len(verdict.missing)} missing suites, "
                  + (f"{len(verdict.interrupted)} interrupted suites, " if verdict.interrupted else "")
                  + f"{len(verdict.findings)} findings about the peers"]
    return "\n".join(lines)


def _tilegym_lines(files: list[SuiteFile]) -> list[str]:
    """How many timed TileGym cases ran a configuration no autotune chose (``untuned_count``): never a verdict, but
    every ratio over TileGym there compares against an untuned TileGym."""
    counts = [untuned_count(f.cases, f.tilegym_tuning) for f in files if f.suite == "benchmark"]
    untuned, timed = sum(u for u, _ in counts), sum(t for _, t in counts)
    if not untuned:
        return []
    return ["", f"TILEGYM UNTUNED: {untuned} of {timed} timed TileGym cases ran TileGym's first config, not a "
                f"tuned choice ({UNTUNED_WHY}): the ratios over TileGym there compare against an untuned TileGym; "
                f"{TUNE_HINT}"]


def _clock_lines(files: list[SuiteFile]) -> list[str]:
    """What the GPU's clock did over the benchmark's timed cases (``gpu_clocks``), where any recorded it: never a
    verdict, but a reader of a ratio must know when its two times ran at different clocks."""
    t = tally(c.measured.get("gpu_clocks") for f in files if f.suite == "benchmark" for c in f.cases)
    if not t.records:
        return []
    lines = ["", f"GPU CLOCK: {t.held} of {t.records} timed benchmark cases ran with the SM clock held down (a power "
                 "or thermal limit, or under 95% of its maximum): their ratios hold at that clock only; the report "
                 "flags each"]
    if t.unavailable:
        lines.append(f"GPU CLOCK: not recorded for {t.records - t.read} of them: {t.unavailable[0]}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m validation.summary", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path, help="a run directory: RUN_DIR/raw/<suite>.json")
    parser.add_argument("--expect", nargs="+", choices=SUITES, default=list(SUITES),
                        help="the suites that should have written a results file (default: all)")
    args = parser.parse_args(argv)
    try:
        files = load_run(args.run_dir)
    except BadResults as err:
        print(f"validation.summary: {err}", file=sys.stderr)
        return 2
    verdict = judge_run(files, tuple(args.expect))
    print(report(args.run_dir, files, verdict))
    return 1 if verdict.failed else 0


if __name__ == "__main__":
    sys.exit(main())
