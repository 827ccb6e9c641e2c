"""Kernel time from CUPTI (torch.profiler) with an L2 flush before every rep, and wall time from CUDA events.

Kernel time of one rep is the sum of the durations of every GPU activity the call launched (kernels,
memsets, device copies). Reps are told apart by the flush between them: a ``bitwise_not_`` over a
buffer larger than L2, which no SSD forward launches. The flush and the synchronisation happen
outside the measured region. A rep with zero measured GPU time is an error, never a number. Several functions
are timed interleaved (``interleaved_kernel_us``): rounds that call each in turn, so that all of them meet the
same GPU clock.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

__all__ = ["CutileByOrder", "KernelTimes", "Samples", "cupti_kernel_us", "first_call_s", "interleaved_kernel_us",
           "per_kernel_us", "wall_us"]

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


def _gpu_events(fns: Sequence[Callable[[], object]], *, reps: int, device: torch.device) -> list:
    """The GPU activities of ``reps`` rounds that call every one of ``fns`` in turn under torch.profiler, an L2
    flush before each call and one after the last, in the order they started."""
    from torch.profiler import ProfilerActivity, profile

    flush = _flush_buffer(device)
    torch.cuda.synchronize(device)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            for fn in fns:
                flush.bitwise_not_()
                torch.cuda.synchronize(device)
                fn()
        flush.bitwise_not_()
        torch.cuda.synchronize(device)
    return sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA),
                  key=lambda e: e.time_range.start)


def _calls(fns: Sequence[Callable[[], object]], *, reps: int, device: torch.device
           ) -> list[list[list[tuple[str, float]]]]:
    """``[i][r]``: the (name, µs) of every GPU activity of the r-th call of ``fns[i]``, told apart by the flushes
    (``_gpu_events``). A call that CUPTI saw launch nothing is an error, never a zero."""
    calls: list[list[tuple[str, float]]] = []
    for event in _gpu_events(fns, reps=reps, device=device):
        if _FLUSH_MARK in event.name:
            calls.append([])
        elif calls:
            calls[-1].append((event.name.split("_Kt")[0][:80], event.time_range.end - event.time_range.start))
    if len(calls) != reps * len(fns) + 1 or calls[-1]:
        raise RuntimeError(f"CUPTI saw {len(calls) - 1} calls between flushes; expected {reps} rounds of "
                           f"{len(fns)} ({reps * len(fns)})")
    if any(not call for call in calls[:-1]):
        raise RuntimeError("a call measured zero GPU time: it launched nothing CUPTI saw")
    return [calls[i:-1:len(fns)] for i in range(len(fns))]


@dataclass(frozen=True)
class CutileByOrder:
    """A call's cuTile kernels in launch order, for a call that also runs torch's own kernels (a peer's forward beside
    its wrapper's zero-fills): its activities that are neither torch's (a name with ``at::``) nor a memset or a copy
    are named ``names[0]``, ``names[1]``, ... in the order they ran, the others as CUPTI names them."""

    names: tuple[str, ...]

    def name(self, call: list[tuple[str, float]]) -> list[str]:
        cutile = [i for i, (name, _) in enumerate(call) if not _torch_activity(name)]
        if len(cutile) != len(self.names):
            raise RuntimeError(f"per_kernel_us: a call launched {len(cutile)} activities other than torch's "
                               f"({[call[i][0] for i in cutile]}); its cuTile kernels are {len(self.names)} "
                               f"({list(self.names)})")
        by_order = dict(zip(cutile, self.names, strict=True))
        return [by_order.get(i, name) for i, (name, _) in enumerate(call)]


def _torch_activity(name: str) -> bool:
    return "at::" in name or name.startswith(("Memset", "Memcpy"))


Launches = Sequence[str] | CutileByOrder | None


def _activity_names(call: list[tuple[str, float]], launches: Launches) -> list[str]:
    """The name of each GPU activity of one call: by position in ``launches``, by ``CutileByOrder``, or CUPTI's."""
    if launches is None:
        return [name for name, _ in call]
    if isinstance(launches, CutileByOrder):
        return launches.name(call)
    if len(call) != len(launches):
        raise RuntimeError(f"per_kernel_us: a call launched {len(call)} GPU activities ({[name for name, _ in call]}); "
                           f"its launch plan has {len(launches)} ({list(launches)})")
    return list(launches)


def _per_kernel(calls: list[list[tuple[str, float]]], launches: Launches) -> dict[str, float]:
    """The median µs of each kernel over ``calls`` (one function's), named by ``launches``' positions if given."""
    totals: list[dict[str, float]] = []
    for call in calls:
        total: dict[str, float] = {}
        for name, (_, us) in zip(_activity_names(call, launches), call, strict=True):
            total[name] = total.get(name, 0.0) + us
        totals.append(total)
    names = sorted({n for t in totals for n in t})
    return {n: statistics.median(t.get(n, 0.0) for t in totals) for n in names}


@dataclass(frozen=True)
class KernelTimes:
    """One function's CUPTI times: its forward's per call, and each kernel's median (the breakdown)."""

    kernel_us: Samples
    per_kernel_us: dict[str, float]


def interleaved_kernel_us(fns: Sequence[Callable[[], object]], *, reps: int, device: torch.device,
                          launches: Sequence[Launches] | None = None) -> list[KernelTimes]:
    """CUPTI kernel time of every one of ``fns``, called in turn ``reps`` rounds (A B C A B C ...), an L2 flush
    before every call: each function's reps are spread over the same seconds as the others', so a GPU clock that
    drifts (a power cap setting in, say) weighs on all of them alike, and their ratios do not depend on which ran
    first. ``launches[i]``: the kernels one call of ``fns[i]`` launches, in order (see ``per_kernel_us``), or None."""
    launches = launches if launches is not None else [None] * len(fns)
    if len(launches) != len(fns):
        raise ValueError(f"interleaved_kernel_us: {len(launches)} launch plans for {len(fns)} functions")
    return [KernelTimes(Samples([sum(us for _, us in call) for call in calls]), _per_kernel(calls, plan))
            for calls, plan in zip(_calls(fns, reps=reps, device=device), launches, strict=True)]


def cupti_kernel_us(fn: Callable[[], object], *, reps: int, device: torch.device) -> Samples:
    """Run ``fn`` ``reps`` times under torch.profiler, flushing L2 before each; per-rep GPU time in µs."""
    return interleaved_kernel_us([fn], reps=reps, device=device)[0].kernel_us


def per_kernel_us(fn: Callable[[], object], *, reps: int, device: torch.device,
                  launches: Launches = None) -> dict[str, float]:
    """Median µs per call of each kernel of ``fn`` under CUPTI, L2 flushed before every rep (the breakdown of
    kernel_us).

    ``launches``: the kernels one call launches, in order (for ours, from its launch plan). Each rep's GPU
    activities are then named by their position, and a rep with another count of activities is an error. CUPTI's
    own names are not trusted for them: on the H200 it reported a cuTile kernel of ours under the name of a
    TileGym kernel run earlier in the same process, and TileGym's state kernel under the name of its output kernel.
    A ``CutileByOrder`` names only the cuTile kernels by position (TileGym's). Without ``launches``: CUPTI's names, cut
    at cuTile's mangling suffix.
    """
    return interleaved_kernel_us([fn], reps=reps, device=device, launches=[launches])[0].per_kernel_us


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
