"""The one tolerance table, kept as data in ``validation/tolerances.toml``; every numerical verdict reads its bound
through :func:`tolerance_for`.

Keyed by ``(impl, dtype, matmul, quantity)`` (the TOML file's header says what each part means). Each row bounds
the norm-wise relative error and the max-abs error over the output's peak against the float64 oracle, and names
its basis: ``measured`` (the bound is a stated factor over the worst case seen in a named run, recorded in the
row) or ``a priori`` (from the unit roundoff and the expected growth alone, until someone measures it). The
reason a results file records is built from the basis, said once in the file, and the row's own figures.

``rel_l2`` bounds ||out - ref||_2 / ||ref||_2. ``max_abs`` bounds max|out - ref| / max|ref|: the largest element
error in units of the output's peak magnitude, so one bound holds whatever the scale of a regime's outputs while
a local blow-up still shows (both over the elements where the oracle is finite; a non-finite output where the
oracle is finite is an infinite error).

A missing key is an error (``KeyError`` naming the key), never a default.
"""

from __future__ import annotations

import tomllib
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ["BASIS_KINDS", "TABLE", "TOLERANCES", "Tolerance", "load", "tolerance_for"]

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


def _reason(basis: dict, row: dict) -> str:
    if basis["kind"] == "a priori":
        return f"{basis['why']}; a priori bound, not yet measured"
    worst = ", ".join(f"{label} {row[key]:.3g}" for key, label in (("worst_rel_l2", "rel_l2"),
                                                                   ("worst_max_abs", "max_abs/peak")) if key in row)
    case = f" ({row['worst_case']})" if "worst_case" in row else ""
    note = f"; {row['note']}" if "note" in row else ""
    return f"{basis['why']}; measured worst {worst}{case} over {basis['run']}{note}; bounds {basis['bound']}"


def load(path: Path = TABLE) -> dict[tuple[str, str, str, str], Tolerance]:
    """The table, checked: every row names a known basis, a measured basis has its run and bound and its rows
    their worst case below the bound; any fault is a ``ValueError`` naming the file and the row."""
    data = tomllib.loads(path.read_text())
    bases, table = data.get("basis", {}), {}
    for name, basis in bases.items():
        if basis.get("kind") not in BASIS_KINDS or "why" not in basis:
            raise ValueError(f"{path}: basis {name!r} needs kind (one of {BASIS_KINDS}) and why")
        if basis["kind"] == "measured" and not {"run", "bound"} <= set(basis):
            raise ValueError(f"{path}: measured basis {name!r} needs run and bound")
    for row in data.get("row", []):
        key = tuple(row.get("key", ()))
        if len(key) != 4 or key[3] not in QUANTITIES or key in table:
            raise ValueError(f"{path}: row key {key} must be a new [impl, dtype, matmul, one of {QUANTITIES}]")
        basis = bases.get(row.get("basis"))
        if basis is None:
            raise ValueError(f"{path}: row {key} names basis {row.get('basis')!r}, which is not defined")
        if basis["kind"] == "measured":
            if "worst_rel_l2" not in row:
                raise ValueError(f"{path}: row {key} has a measured basis but no worst_rel_l2")
            for bound in ("rel_l2", "max_abs"):
                if row.get(f"worst_{bound}", 0.0) > row[bound]:
                    raise ValueError(f"{path}: row {key}: worst_{bound} {row[f'worst_{bound}']} exceeds its bound")
        table[key] = Tolerance(rel_l2=float(row["rel_l2"]), max_abs=float(row["max_abs"]),
                               reason=_reason(basis, row), basis=basis["kind"])
    return table


TOLERANCES: dict[tuple[str, str, str, str], Tolerance] = load()


def tolerance_for(impl: str, dtype: str, matmul: str, quantity: str) -> Tolerance:
    """The row for this key; a missing key raises ``KeyError`` that names it and the known keys for impl."""
    key = (impl, dtype, matmul, quantity)
    try:
        return TOLERANCES[key]
    except KeyError:
        known = sorted(k for k in TOLERANCES if k[0] == impl)
        raise KeyError(f"no tolerance row for {key}; rows for {impl!r}: {known or 'none'}") from None
