"""Error metrics of an output against the float64 oracle, with the location of the worst element."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch

__all__ = ["Errors", "errors"]

# Elements per block: keeps the float64 temporaries small when y has billions of elements.
_BLOCK = 1 << 26


@dataclass(frozen=True)
class Errors:
    """Norm-wise relative L2 error, max-abs error and where it is, and the count of non-finite values.

    Metrics are taken over the elements where the oracle is finite; there, a non-finite output is an
    infinite error. ``nonfinite`` counts the output's non-finite values, ``nonfinite_ref`` the oracle's, and
    ``lost`` the output's finite values where the oracle is not (a NaN or Inf of the input that vanished).
    """

    rel_l2: float
    max_abs: float
    worst_index: tuple[int, ...]
    nonfinite: int
    nonfinite_ref: int
    peak: float  # max |ref| over its finite elements: the scale max_abs is judged against
    lost: int = 0

    @property
    def max_abs_over_peak(self) -> float:
        if self.peak > 0:
            return self.max_abs / self.peak
        return 0.0 if self.max_abs == 0 else math.inf

    def as_dict(self, prefix: str) -> dict[str, object]:
        d = asdict(self)
        d["max_abs_over_peak"] = self.max_abs_over_peak
        return {f"{prefix}_{k}": v for k, v in d.items()}


def errors(out: torch.Tensor, ref: torch.Tensor) -> Errors:
    """Compare ``out`` (any float dtype) with ``ref`` (float64) of the same shape, block by block."""
    if out.shape != ref.shape:
        raise ValueError(f"out has shape {tuple(out.shape)}; expected the reference's {tuple(ref.shape)}")
    flat_out = out.detach().reshape(-1)
    flat_ref = ref.reshape(-1)
    diff_sq = ref_sq = peak = max_abs = 0.0
    worst = nonfinite = nonfinite_ref = lost = 0
    for start in range(0, flat_ref.numel(), _BLOCK):
        r = flat_ref[start:start + _BLOCK]
        o = flat_out[start:start + _BLOCK].to(device=r.device, dtype=torch.float64)
        finite = torch.isfinite(r)
        d = torch.where(finite, (o - r).abs(), 0.0).nan_to_num(nan=math.inf)
        r0 = torch.where(finite, r, 0.0)
        diff_sq += torch.sum(d * d).item()
        ref_sq += torch.sum(r0 * r0).item()
        peak = max(peak, r0.abs().max().item())
        block_max, block_arg = torch.max(d, dim=0)
        if block_max.item() > max_abs or (start == 0):
            max_abs, worst = block_max.item(), start + int(block_arg.item())
        out_finite = torch.isfinite(o)
        nonfinite += int((~out_finite).sum().item())
        nonfinite_ref += int((~finite).sum().item())
        lost += int((out_finite & ~finite).sum().item())
    diff_norm, ref_norm = math.sqrt(diff_sq), math.sqrt(ref_sq)
    rel = diff_norm / ref_norm if ref_norm > 0 else (0.0 if diff_norm == 0 else math.inf)
    worst_index = ()
    if ref.numel():
        worst_index = tuple(int(i) for i in torch.unravel_index(torch.tensor(worst), tuple(ref.shape)))
    return Errors(rel_l2=rel, max_abs=max_abs, worst_index=worst_index, nonfinite=nonfinite,
                  nonfinite_ref=nonfinite_ref, peak=peak, lost=lost)
