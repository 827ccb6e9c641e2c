"""What the GPU suites share: whether a CUDA device is here, and how a case is judged against float64."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from reference import ProblemSpec, SSDInputs, ssd_chunked, ssd_recurrent
from validation.compare import Errors, errors
from validation.tolerances import Tolerance, tolerance_for

__all__ = ["HAS_CUDA", "NO_CUDA_REASON", "Verdict", "judge", "lane_devices", "oracle", "processes_at_once",
           "visible_gpus"]

HAS_CUDA = torch.cuda.is_available()
NO_CUDA_REASON = "not run: no CUDA device (torch.cuda.is_available() is False)"

# Up to this many tokens the oracle is the float64 recurrence itself; beyond, the float64 chunked
# form (validated against the recurrence by test_reference.py) stands in for it.
RECURRENT_MAX_SEQLEN = 4096


def processes_at_once() -> int:
    """How many processes a suite runs at once where compiling is the cost: half the CPUs (each process
    also runs kernels), at most 8."""
    return max(1, min(8, (os.cpu_count() or 2) // 2))


def visible_gpus(device_count: int | None = None, env: dict[str, str] | None = None) -> list[str]:
    """The GPUs this process may use, each as a ``CUDA_VISIBLE_DEVICES`` entry that selects it alone: the
    entries of that variable when it is set (as many as CUDA counts), else ``0 .. device_count - 1``. None
    without CUDA. ``device_count`` and ``env`` stand in for the machine's in tests."""
    env = os.environ if env is None else env
    count = (torch.cuda.device_count() if HAS_CUDA else 0) if device_count is None else device_count
    listed = [d.strip() for d in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    return listed[:count] if "CUDA_VISIBLE_DEVICES" in env else [str(i) for i in range(count)]


def lane_devices(lanes: int, gpus: list[str]) -> list[dict[str, str]]:
    """What each of ``lanes`` worker processes adds to its environment so that the workers spread over ``gpus``:
    lane i gets GPU i mod len(gpus), alone (``CUDA_VISIBLE_DEVICES``). Nothing without GPUs."""
    return [{"CUDA_VISIBLE_DEVICES": gpus[i % len(gpus)]} if gpus else {} for i in range(lanes)]


def oracle(spec: ProblemSpec, inputs: SSDInputs) -> tuple[torch.Tensor, torch.Tensor, str]:
    """float64 (y, final_state) and the name of the reference that computed them."""
    if spec.seqlen <= RECURRENT_MAX_SEQLEN:
        y, h = ssd_recurrent(*inputs.as_args())
        return y, h, "reference-recurrent"
    y, h = ssd_chunked(*inputs.as_args(), chunk_size=256)
    return y, h, "reference-chunked"


@dataclass(frozen=True)
class Verdict:
    y: Errors
    final_state: Errors
    y_tol: Tolerance
    state_tol: Tolerance

    @staticmethod
    def _failures(name: str, e: Errors, tol: Tolerance) -> list[str]:
        out = []
        if not e.rel_l2 <= tol.rel_l2:
            out.append(f"{name} rel_l2 {e.rel_l2:.3e} > {tol.rel_l2:.1e} (worst at {e.worst_index})")
        if not e.max_abs_over_peak <= tol.max_abs:
            out.append(f"{name} max_abs/peak {e.max_abs_over_peak:.3e} > {tol.max_abs:.1e}"
                       f" (max_abs {e.max_abs:.3e} at {e.worst_index}, peak {e.peak:.3e})")
        if e.nonfinite > e.nonfinite_ref:
            out.append(f"{name} has {e.nonfinite} non-finite values; the oracle has {e.nonfinite_ref}")
        if e.lost:  # counts alone would pass a finite value where the oracle's NaN must show, beside an extra NaN
            out.append(f"{name} has {e.lost} finite values where the oracle is non-finite (a NaN or Inf of the "
                       "input vanished)")
        return out

    def failures(self) -> list[str]:
        return (self._failures("y", self.y, self.y_tol)
                + self._failures("final_state", self.final_state, self.state_tol))

    def record(self) -> dict[str, object]:
        """The contract's error fields."""
        return {
            "y_rel_l2": self.y.rel_l2, "y_max_abs": self.y.max_abs, "y_max_abs_over_peak": self.y.max_abs_over_peak,
            "y_worst_index": list(self.y.worst_index),
            "state_rel_l2": self.final_state.rel_l2, "state_max_abs": self.final_state.max_abs,
            "state_max_abs_over_peak": self.final_state.max_abs_over_peak,
            "state_worst_index": list(self.final_state.worst_index),
            "nonfinite": self.y.nonfinite + self.final_state.nonfinite,
            "tolerance": {"y": self.y_tol.as_dict(), "final_state": self.state_tol.as_dict()},
        }


def judge(impl: str, dtype: str, matmul: str, y: torch.Tensor, final_state: torch.Tensor,
          y_ref: torch.Tensor, state_ref: torch.Tensor) -> Verdict:
    return Verdict(
        y=errors(y, y_ref),
        final_state=errors(final_state, state_ref),
        y_tol=tolerance_for(impl, dtype, matmul, "y"),
        state_tol=tolerance_for(impl, dtype, matmul, "final_state"),
    )
