"""Kernel time from CUPTI (torch.profiler) with an L2 flush before every rep, and wall time from CUDA events.

Kernel time of one rep is the sum of the durations of every GPU activity the call launched (kernels,
memsets, device copies). Reps are told apart by the flush between them: a ``bitwise_not_`` over a
buffer larger than L2, which no SSD forward launches. The flush and the synchronisation happen
outside the measured region. A rep with zero measured GPU time is an error, never a number.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

__all__ = ["Samples", "cupti_kernel_us", "first_call_s", "per_kernel_us", "wall_us"]

_FLUSH_MARK = "bitwise_not"
_FLUSH_BYTES = 512 * 2**20  # larger than any current GPU's L2 (H200: 60 MB, B300: 126 MB)


@dataclass(frozen=True)
class Samples:
    """Every sample, and the statistics the report shows."""

    samples: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    def _quantile(self, q: float) -> float:
        s = sorted(self.samples)
        pos = q * (len(s) - 1)
        lo, hi = int(pos), min(int(pos) + 1, len(s) - 1)
        return s[lo] + (s[hi] - s[lo]) * (pos - lo)

    def as_dict(self) -> dict[str, object]:
        mean = statistics.fmean(self.samples)
        rel_std = statistics.pstdev(self.samples) / mean if mean > 0 else float("inf")
        return {"median": self.median, "p10": self._quantile(0.1), "p90": self._quantile(0.9),
                "rel_std": rel_std, "reps": len(self.samples), "samples": list(self.samples)}


def _flush_buffer(device: torch.device) -> torch.Tensor:
    return torch.empty(_FLUSH_BYTES // 4, dtype=torch.int32, device=device)


def _gpu_events(fn: Callable[[], object], *, reps: int, device: torch.device) -> list:
    """The GPU activities of ``reps`` calls of ``fn`` under torch.profiler, an L2 flush before each and one after
    the last, in the order they started."""
    from torch.profiler import ProfilerActivity, profile

    flush = _flush_buffer(device)
    torch.cuda.synchronize(device)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            flush.bitwise_not_()
            torch.cuda.synchronize(device)
            fn()
        flush.bitwise_not_()
        torch.cuda.synchronize(device)
    return sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA),
                  key=lambda e: e.time_range.start)


def cupti_kernel_us(fn: Callable[[], object], *, reps: int, device: torch.device) -> Samples:
    """Run ``fn`` ``reps`` times under torch.profiler, flushing L2 before each; per-rep GPU time in µs."""
    gpu = _gpu_events(fn, reps=reps, device=device)
    per_rep: list[float] = []
    current: float | None = None
    for event in gpu:
        if _FLUSH_MARK in event.name:
            if current is not None:
                per_rep.append(current)
            current = 0.0
        elif current is not None:
            current += event.time_range.end - event.time_range.start
    if len(per_rep) != reps:
        raise RuntimeError(f"CUPTI saw {len(per_rep)} reps between flushes; expected {reps}")
    if any(t <= 0 for t in per_rep):
        raise RuntimeError(f"a rep measured zero GPU time ({per_rep}): the call launched nothing CUPTI saw")
    return Samples(per_rep)


def per_kernel_us(fn: Callable[[], object], *, reps: int, device: torch.device,
                  launches: Sequence[str] | None = None) -> dict[str, float]:
    """Median µs per call of each kernel of ``fn`` under CUPTI, L2 flushed before every rep (the breakdown of
    kernel_us).

    ``launches``: the kernels one call launches, in order (for ours, from its launch plan). Each rep's GPU
    activities are then named by their position, and a rep with another count of activities is an error. CUPTI's
    own names are not trusted for them: on the H200 it reported a cuTile kernel of ours under the name of a
    TileGym kernel run earlier in the same process. Without ``launches``: CUPTI's names, cut at cuTile's
    mangling suffix.
    """
    reps_seen: list[list[tuple[str, float]]] = []
    for event in _gpu_events(fn, reps=reps, device=device):
        if _FLUSH_MARK in event.name:
            reps_seen.append([])
            continue
        reps_seen[-1].append((event.name.split("_Kt")[0][:80], event.time_range.end - event.time_range.start))
    reps_seen = [r for r in reps_seen if r]
    totals: list[dict[str, float]] = []
    for rep in reps_seen:
        if launches is not None and len(rep) != len(launches):
            raise RuntimeError(f"per_kernel_us: a call launched {len(rep)} GPU activities "
                               f"({[name for name, _ in rep]}); its launch plan has {len(launches)} "
                               f"({list(launches)})")
        names = list(launches) if launches is not None else [name for name, _ in rep]
        total: dict[str, float] = {}
        for name, (_, us) in zip(names, rep, strict=True):
            total[name] = total.get(name, 0.0) + us
        totals.append(total)
    names = sorted({n for r in totals for n in r})
    return {n: statistics.median(r.get(n, 0.0) for r in totals) for n in names}


def wall_us(fn: Callable[[], object], *, reps: int, device: torch.device) -> Samples:
    """CUDA events around the Python call (host overhead included), L2 flushed before each rep."""
    flush = _flush_buffer(device)
    out = []
    for _ in range(reps):
        flush.bitwise_not_()
        torch.cuda.synchronize(device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end) * 1e3)
    return Samples(out)


def first_call_s(fn: Callable[[], object], device: torch.device) -> float:
    """Seconds of the first call (compilation and autotune included), synchronised on a CUDA ``device``."""
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    fn()
    if cuda:
        torch.cuda.synchronize(device)
    return time.perf_counter() - start
