"""The tolerance table as data (validation/tolerances.toml): every row has a basis said once, a measured row its
worst case under its bound, and a malformed table is refused with the row named."""

from __future__ import annotations

from pathlib import Path

import pytest

from validation.tolerances import BASIS_KINDS, TABLE, TOLERANCES, load, tolerance_for

GOOD_BASIS = '[basis.m]\nkind = "measured"\nwhy = "u"\nrun = "a run"\nbound = "4x the worst"\n'


def test_every_row_states_its_basis_and_the_file_loads() -> None:
    assert TOLERANCES == load(TABLE)
    assert {t.basis for t in TOLERANCES.values()} <= set(BASIS_KINDS)
    for key, tol in TOLERANCES.items():
        assert tol.reason and 0 < tol.rel_l2 < 1 and 0 < tol.max_abs < 1, key
        assert ("measured worst" in tol.reason) == (tol.basis == "measured"), key


def test_a_missing_row_is_an_error_naming_the_key() -> None:
    with pytest.raises(KeyError, match=r"no tolerance row for \('cutile', 'fp64'"):
        tolerance_for("cutile", "fp64", "ieee", "y")


@pytest.mark.parametrize("text,fault", [
    (GOOD_BASIS + '[[row]]\nkey = ["a", "b", "c", "y"]\nrel_l2 = 1e-3\nmax_abs = 1e-3\nbasis = "nope"\n',
     "names basis 'nope'"),
    (GOOD_BASIS + '[[row]]\nkey = ["a", "b", "c", "y"]\nrel_l2 = 1e-3\nmax_abs = 1e-3\nbasis = "m"\n',
     "no worst_rel_l2"),
    (GOOD_BASIS + '[[row]]\nkey = ["a", "b", "c", "y"]\nrel_l2 = 1e-3\nmax_abs = 1e-3\nbasis = "m"\n'
     'worst_rel_l2 = 2e-3\n', "worst_rel_l2 0.002 exceeds its bound"),
    (GOOD_BASIS + '[[row]]\nkey = ["a", "b", "c", "state"]\nrel_l2 = 1e-3\nmax_abs = 1e-3\nbasis = "m"\n',
     "must be a new"),
    ('[basis.m]\nkind = "measured"\nwhy = "u"\n', "needs run and bound"),
    ('[basis.m]\nkind = "guessed"\nwhy = "u"\n', "needs kind"),
])
def test_a_malformed_table_is_refused(tmp_path: Path, text: str, fault: str) -> None:
    path = tmp_path / "tolerances.toml"
    path.write_text(text)
    with pytest.raises(ValueError, match=fault):
        load(path)
