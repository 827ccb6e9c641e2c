"""The tolerance table as data (validation/tolerances.toml): every row has a basis said once, a measured row the
worst case of the runs its basis names and bounds that follow its basis's rule, and a malformed table is refused with
the row named."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from validation import interpreter_sweep
from validation.matrix import REFERENCES
from validation.provenance import ROOT
from validation.tolerances import BASIS_KINDS, TABLE, TOLERANCES, bases, load, recorded, tolerance_for, worst_passes

GOOD_BASIS = ('[basis.m]\nkind = "measured"\nwhy = "u"\nruns = ["reports/published/x"]\nwhat = "every pass"\n'
              'factor = 4\n')
ROW = '[[row]]\nkey = ["a", "b", "c", "y"]\nrel_l2 = 4e-3\nmax_abs = 8e-3\nbasis = "m"\n'
SUITES = ("correctness", "stability", "benchmark")


def _cases_of(basis: dict) -> list[dict]:
    """Every case of the measurements a basis names: its runs' suite files, or its sweep files."""
    if "sweeps" in basis:
        return [r.as_dict() for path in basis["sweeps"] for r in interpreter_sweep.published(path)]
    cases = []
    for run in basis["runs"]:
        files = [ROOT / run / "raw" / f"{suite}.json" for suite in SUITES]
        assert any(f.is_file() for f in files), f"{run} has none of raw/{{{','.join(SUITES)}}}.json"
        cases += [case for path in filter(Path.is_file, files) for case in json.loads(path.read_text())["cases"]]
    return cases


@pytest.mark.parametrize("name", [n for n, b in bases().items() if b["kind"] == "measured"])
def test_a_measured_rows_worst_is_the_worst_of_the_measurements_its_basis_names(name: str) -> None:
    """Recomputed from the named published files (runs' suite files, or sweep files): each row of the basis
    records exactly the worst rel_l2 and max_abs/peak of its key's passes there (to the three digits it keeps), so
    the bounds, factor x those, rest on figures anyone can check."""
    basis = bases()[name]
    worst = worst_passes(_cases_of(basis), fp64=REFERENCES)
    for row in basis["rows"]:
        key = tuple(row["key"])
        where = basis.get("runs", basis.get("sweeps"))
        assert key in worst, f"{key}: no pass of this key in {where}"
        for figure, bound in (("worst_rel_l2", "rel_l2"), ("worst_max_abs", "max_abs")):
            value, case = worst[key][figure]
            assert row[figure] == recorded(value), f"{key}: {figure} {row[figure]}, {where}: {value:.3g} ({case})"
            assert value <= row[bound], key


@pytest.mark.parametrize("name", [n for n, b in bases().items() if "sweeps" in b])
def test_a_bases_sweep_files_share_no_case(name: str) -> None:
    """Sweeps extend each other (other seeds, other tags), never repeat a case: a case in two files would be one
    measurement counted twice."""
    ids = [r.id for path in bases()[name]["sweeps"] for r in interpreter_sweep.published(path)]
    assert len(ids) == len(set(ids)), f"{name}: a case id in two of its sweep files"


def test_every_row_states_its_basis_and_the_file_loads() -> None:
    assert TOLERANCES == load(TABLE)
    assert {t.basis for t in TOLERANCES.values()} <= set(BASIS_KINDS)
    for key, tol in TOLERANCES.items():
        assert tol.reason and 0 < tol.rel_l2 < 1 and 0 < tol.max_abs < 1, key
        assert ("measured worst" in tol.reason) == (tol.basis == "measured"), key
        assert ("not measured" in tol.reason) == (tol.basis == "a priori"), key


def test_a_missing_row_is_an_error_naming_the_key() -> None:
    with pytest.raises(KeyError, match=r"no tolerance row for \('cutile', 'fp64'"):
        tolerance_for("cutile", "fp64", "ieee", "y")


def test_a_well_formed_measured_row_loads(tmp_path: Path) -> None:
    table = _load_text(tmp_path, GOOD_BASIS + ROW + "worst_rel_l2 = 1e-3\nworst_max_abs = 2e-3\n")
    assert table[("a", "b", "c", "y")].reason == (
        "u; measured worst rel_l2 0.001, max_abs/peak 0.002 over every pass (x); bounds 4x the worst, rounded up")


def _load_text(tmp_path: Path, text: str) -> dict:
    path = tmp_path / "tolerances.toml"
    path.write_text(text)
    return load(path)


@pytest.mark.parametrize("text,fault", [
    (GOOD_BASIS + ROW.replace('basis = "m"', 'basis = "nope"'), "names basis 'nope'"),
    (GOOD_BASIS + ROW, "no worst_rel_l2"),
    (GOOD_BASIS + ROW + "worst_rel_l2 = 1e-3\n", "no worst_max_abs"),
    (GOOD_BASIS + ROW + "worst_rel_l2 = 2e-3\nworst_max_abs = 2e-3\n",
     r"rel_l2 0.004 is not 4x its worst_rel_l2 0.002"),
    # far looser than the rule: a bound 900000x the worst is refused as much as one under it
    (GOOD_BASIS + ROW + "worst_rel_l2 = 1e-3\nworst_max_abs = 1e-8\n", r"max_abs 0.008 is not 4x its worst_max_abs"),
    (GOOD_BASIS + ROW.replace('"y"]', '"state"]'), "must be a new"),
    ('[basis.m]\nkind = "measured"\nwhy = "u"\nfactor = 4\n', "needs either runs"),
    ('[basis.m]\nkind = "measured"\nwhy = "u"\nruns = ["elsewhere/x"]\nwhat = "w"\nfactor = 4\n',
     "runs must be a non-empty list of reports/published/"),
    ('[basis.m]\nkind = "measured"\nwhy = "u"\nsweeps = ["a CPU sweep, not published"]\nwhat = "w"\nfactor = 4\n',
     "sweeps must be a non-empty list of reports/published/....json files"),
    ('[basis.m]\nkind = "measured"\nwhy = "u"\nsweeps = "reports/published/s.json"\nwhat = "w"\nfactor = 4\n',
     "sweeps must be a non-empty list"),
    ('[basis.m]\nkind = "measured"\nwhy = "u"\nsweeps = []\nwhat = "w"\nfactor = 4\n', "sweeps must be a non-empty"),
    ('[basis.m]\nkind = "measured"\nwhy = "u"\nruns = ["reports/published/x"]\nsweeps = ["reports/published/s.json"]\n'
     'what = "w"\nfactor = 4\n', "needs either runs"),
    (GOOD_BASIS.replace("factor = 4", "fixed = 1e-12"), "needs either factor"),
    (GOOD_BASIS.replace("factor = 4", "factor = 1"), "factor must be a number above 1"),
    (GOOD_BASIS.replace("factor = 4", 'fixed = 1e-12\nfixed_why = "w"') + ROW.replace("4e-3", "1e-12").replace(
        "8e-3", "1e-12") + "worst_rel_l2 = 1e-12\nworst_max_abs = 1e-14\n",
     "must be its basis's fixed 1e-12, at least 10x"),
    ('[basis.m]\nkind = "guessed"\nwhy = "u"\n', "needs kind"),
])
def test_a_malformed_table_is_refused(tmp_path: Path, text: str, fault: str) -> None:
    path = tmp_path / "tolerances.toml"
    path.write_text(text)
    with pytest.raises(ValueError, match=fault):
        load(path)


def test_a_finite_value_where_the_oracle_is_nan_fails() -> None:
    """The verdict's non-finite check compared counts alone: a final state finite where the oracle's is NaN (the NaN
    of the input lost) passed. Each such value is now a failure of its quantity."""
    import torch

    from validation.gpu import judge

    y_ref = torch.ones(4, 8, dtype=torch.float64)
    state_ref = torch.ones(2, 3, dtype=torch.float64)
    state_ref[0, 0] = math.nan
    state = state_ref.clone().float()
    state[0, 0] = 1.0  # the NaN lost: fewer non-finite values than the oracle's, no error where the oracle is finite
    verdict = judge("cutile", "fp32", "tf32", y_ref.float(), state, y_ref, state_ref)
    assert verdict.failures() == ["final_state has 1 finite values where the oracle is non-finite (a NaN or Inf of "
                                  "the input vanished)"]
    assert not judge("cutile", "fp32", "tf32", y_ref.float(), state_ref.float(), y_ref, state_ref).failures()
