"""Error metrics of an output against the float64 oracle, with the location of the worst element."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

__all__ = ["Errors", "errors"]


@dataclass(frozen=True)
class Errors:
    """Norm-wise relative L2 error, max-abs error and where it is, and the count of non-finite values.

    Metrics are taken over the elements where the oracle is finite; ``nonfinite`` counts the
    implementation's non-finite values, ``nonfinite_ref`` the oracle's.
    """

    rel_l2: float
    max_abs: float
    worst_index: tuple[int, ...]
    nonfinite: int
    nonfinite_ref: int
    peak: float  # max |ref| over its finite elements: the scale max_abs is judged against

    @property
    def max_abs_over_peak(self) -> float:
        if self.peak > 0:
            return self.max_abs / self.peak
        return 0.0 if self.max_abs == 0 else float("inf")

    def as_dict(self, prefix: str) -> dict[str, object]:
        d = asdict(self)
        d["max_abs_over_peak"] = self.max_abs_over_peak
        return {f"{prefix}_{k}": v for k, v in d.items()}


def errors(out: torch.Tensor, ref: torch.Tensor) -> Errors:
    """Compare ``out`` (any float dtype) with ``ref`` (float64) of the same shape.

    Where the oracle is finite and ``out`` is not, the error is infinite: a NaN in the output
    never makes an error look small.
    """
    if out.shape != ref.shape:
        raise ValueError(f"out has shape {tuple(out.shape)}; expected the reference's {tuple(ref.shape)}")
    out64 = out.detach().to(device=ref.device, dtype=torch.float64)
    ref_finite = torch.isfinite(ref)
    diff = torch.where(ref_finite, (out64 - ref).abs(), torch.zeros((), dtype=torch.float64, device=ref.device))
    diff = torch.nan_to_num(diff, nan=float("inf"))  # out NaN where ref is finite
    ref_norm = torch.linalg.vector_norm(torch.where(ref_finite, ref, 0.0)).item()
    diff_norm = torch.linalg.vector_norm(diff).item()
    rel = diff_norm / ref_norm if ref_norm > 0 else (0.0 if diff_norm == 0 else float("inf"))
    flat = int(torch.argmax(diff).item()) if diff.numel() else 0
    worst = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), diff.shape)) if diff.numel() else ()
    return Errors(
        rel_l2=rel,
        max_abs=diff.max().item() if diff.numel() else 0.0,
        worst_index=worst,
        nonfinite=int((~torch.isfinite(out64)).sum().item()),
        nonfinite_ref=int((~ref_finite).sum().item()),
        peak=torch.where(ref_finite, ref.abs(), 0.0).max().item() if ref.numel() else 0.0,
    )
