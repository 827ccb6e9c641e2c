"""The one tolerance table, kept as data in ``validation/tolerances.toml``; every numerical verdict reads its bound
through :func:`tolerance_for`.

Keyed by ``(impl, dtype, matmul, quantity)`` (the TOML file's header says what each part means). Each row bounds
the norm-wise relative error and the max-abs error over the output's peak against the float64 oracle, and names
its basis: ``measured`` (the bound is a stated factor over the worst case seen in named published runs or a
published CPU sweep of the Triton interpreter, recorded in the row, or a fixed bound with its reason) or
``a priori`` (from the unit roundoff and the expected growth alone, where nothing measured it). The reason a
results file records is built from the basis, said once in the file, and the row's own figures.

``rel_l2`` bounds ||out - ref||_2 / ||ref||_2. ``max_abs`` bounds max|out - ref| / max|ref|: the largest element
error in units of the output's peak magnitude, so one bound holds whatever the scale of a regime's outputs while
a local blow-up still shows (both over the elements where the oracle is finite; a non-finite output where the
oracle is finite is an infinite error).

A missing key is an error (``KeyError`` naming the key), never a default.
"""

from __future__ import annotations

import tomllib
from collections.abc import Collection, Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from validation.schema import QUANTITY_FIELDS

__all__ = ["BASIS_KINDS", "TABLE", "TOLERANCES", "Tolerance", "bases", "load", "recorded", "tolerance_for",
           "worst_passes"]

TABLE = Path(__file__).with_name("tolerances.toml")
BASIS_KINDS = ("measured", "a priori")
QUANTITIES = ("y", "final_state")


@dataclass(frozen=True)
class Tolerance:
    rel_l2: float
    max_abs: float
    reason: str
    basis: str = "a priori"  # one of BASIS_KINDS

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


PUBLISHED_PREFIX = "reports/published/"
MAX_OVER_FACTOR = 1.25  # a measured bound is factor x its worst, rounded up: at most this much above it


def _reason(basis: dict, row: dict) -> str:
    if basis["kind"] == "a priori":
        return f"{basis['why']}; a priori bound, not measured"
    worst = f"rel_l2 {row['worst_rel_l2']:.3g}, max_abs/peak {row['worst_max_abs']:.3g}"
    case = f" ({row['worst_case']})" if "worst_case" in row else ""
    note = f"; {row['note']}" if "note" in row else ""
    named = basis["runs"] if "runs" in basis else basis["sweeps"]
    where = f"{basis['what']} ({', '.join(r.removeprefix(PUBLISHED_PREFIX) for r in named)})"
    bound = (f"a fixed {basis['fixed']:g}: {basis['fixed_why']}" if "fixed" in basis
             else f"{basis['factor']:g}x the worst, rounded up")
    return f"{basis['why']}; measured worst {worst}{case} over {where}{note}; bounds {bound}"


def _check_basis(path: Path, name: str, basis: dict) -> None:
    if basis.get("kind") not in BASIS_KINDS or "why" not in basis:
        raise ValueError(f"{path}: basis {name!r} needs kind (one of {BASIS_KINDS}) and why")
    if basis["kind"] != "measured":
        return
    runs, sweeps = basis.get("runs"), basis.get("sweeps")
    if ("runs" in basis) == ("sweeps" in basis):
        raise ValueError(f"{path}: measured basis {name!r} needs either runs (published run directories) or sweeps "
                         "(published interpreter sweep files)")
    if runs is not None and (not isinstance(runs, list) or not runs or "what" not in basis
                             or not all(isinstance(r, str) and r.startswith(PUBLISHED_PREFIX) for r in runs)):
        raise ValueError(f"{path}: measured basis {name!r}: runs must be a non-empty list of {PUBLISHED_PREFIX}... "
                         f"directories, with what (which of their cases count), got {runs!r}")
    if sweeps is not None and (not isinstance(sweeps, list) or not sweeps or "what" not in basis or not all(
            isinstance(f, str) and f.startswith(PUBLISHED_PREFIX) and f.endswith(".json") for f in sweeps)):
        raise ValueError(f"{path}: measured basis {name!r}: sweeps must be a non-empty list of "
                         f"{PUBLISHED_PREFIX}....json files, with what (which of their cases count), got {sweeps!r}")
    if ("factor" in basis) == ("fixed" in basis) or ("fixed" in basis and "fixed_why" not in basis):
        raise ValueError(f"{path}: measured basis {name!r} needs either factor (bounds = factor x the worst) or "
                         "fixed with fixed_why")
    if not isinstance(basis.get("factor", basis.get("fixed")), int | float) or basis.get("factor", 2) <= 1:
        raise ValueError(f"{path}: measured basis {name!r}: factor must be a number above 1, fixed a number")


def _check_measured_row(path: Path, key: tuple, basis: dict, row: dict) -> None:
    for bound in ("rel_l2", "max_abs"):
        worst = row.get(f"worst_{bound}")
        if not isinstance(worst, int | float) or worst <= 0:
            raise ValueError(f"{path}: row {key} has a measured basis but no worst_{bound} (a positive number)")
        if "fixed" in basis:
            if row[bound] != basis["fixed"] or worst > basis["fixed"] / 10:
                raise ValueError(f"{path}: row {key}: {bound} must be its basis's fixed {basis['fixed']:g}, at least "
                                 f"10x worst_{bound} {worst:g}")
        elif not basis["factor"] * worst <= row[bound] * (1 + 1e-9) <= MAX_OVER_FACTOR * basis["factor"] * worst:
            raise ValueError(f"{path}: row {key}: {bound} {row[bound]:g} is not {basis['factor']:g}x its "
                             f"worst_{bound} {worst:g} rounded up (between {basis['factor'] * worst:.3g} and "
                             f"{MAX_OVER_FACTOR * basis['factor'] * worst:.3g})")


def load(path: Path = TABLE) -> dict[tuple[str, str, str, str], Tolerance]:
    """The table, checked: every row names a known basis; a measured basis names its measurements (published runs or
    published sweep files) and its rule (a factor over the worst, or a fixed bound with its reason), and each of its
    rows records both worst errors and bounds that follow that rule; any fault is a ``ValueError`` naming the file
    and the row. Whether the recorded worsts are those of the named measurements is validation/test_tolerances.py's
    to check."""
    data = tomllib.loads(path.read_text())
    bases, table = data.get("basis", {}), {}
    for name, basis in bases.items():
        _check_basis(path, name, basis)
    for row in data.get("row", []):
        key = tuple(row.get("key", ()))
        if len(key) != 4 or key[3] not in QUANTITIES or key in table:
            raise ValueError(f"{path}: row key {key} must be a new [impl, dtype, matmul, one of {QUANTITIES}]")
        basis = bases.get(row.get("basis"))
        if basis is None:
            raise ValueError(f"{path}: row {key} names basis {row.get('basis')!r}, which is not defined")
        if basis["kind"] == "measured":
            _check_measured_row(path, key, basis, row)
        table[key] = Tolerance(rel_l2=float(row["rel_l2"]), max_abs=float(row["max_abs"]),
                               reason=_reason(basis, row), basis=basis["kind"])
    return table


def recorded(figure: float) -> float:
    """A measured error as the table records a worst case: to three significant digits."""
    return float(f"{figure:.3g}")


def worst_passes(cases: Iterable[Mapping], fp64: Collection[str] = ()) -> dict[tuple[str, str, str, str],
                                                                               dict[str, tuple[float, str]]]:
    """The largest rel_l2 and max_abs/peak over the passes among ``cases`` (as results files hold them), by
    tolerance key, each with the id of the case that gave it: ``{key: {"worst_rel_l2": (value, id),
    "worst_max_abs": (value, id)}}``. The impls in ``fp64`` (the references) are keyed on the fp64 rows, as
    the matrix judges them."""
    worst: dict[tuple[str, str, str, str], dict[str, tuple[float, str]]] = {}
    for case in cases:
        if case["status"] != "pass" or "tolerance" not in case:
            continue
        dtype, matmul = ("fp64", "ieee") if case["impl"] in fp64 else (case["dtype"], case["matmul"])
        for quantity, prefix in QUANTITY_FIELDS.items():
            figures = worst.setdefault((case["impl"], dtype, matmul, quantity), {})
            for figure, field in (("worst_rel_l2", f"{prefix}_rel_l2"),
                                  ("worst_max_abs", f"{prefix}_max_abs_over_peak")):
                if case[field] > figures.get(figure, (-1.0, ""))[0]:
                    figures[figure] = (case[field], case["id"])
    return worst


def bases(path: Path = TABLE) -> dict[str, dict]:
    """The table's bases and, under each, ``rows``: its rows as the file gives them (for checks of the table)."""
    data = tomllib.loads(path.read_text())
    out = {name: {**basis, "rows": []} for name, basis in data.get("basis", {}).items()}
    for row in data.get("row", []):
        out[row["basis"]]["rows"].append(row)
    return out


TOLERANCES: dict[tuple[str, str, str, str], Tolerance] = load()


def tolerance_for(impl: str, dtype: str, matmul: str, quantity: str) -> Tolerance:
    """The row for this key; a missing key raises ``KeyError`` that names it and the known keys for impl."""
    key = (impl, dtype, matmul, quantity)
    try:
        return TOLERANCES[key]
    except KeyError:
        known = sorted(k for k in TOLERANCES if k[0] == impl)
        raise KeyError(f"no tolerance row for {key}; rows for {impl!r}: {known or 'none'}") from None
