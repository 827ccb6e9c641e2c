"""The GPU's SM clock, power draw and clock-event reasons while a case is timed, sampled through NVML.

A ratio of two kernel times taken minutes apart holds only if the GPU ran both at the same clock. Under a
power cap it does not: at dstate 512 on the H200 the SM clock fell from 1980 to 1755-1965 MHz near the 600 W
cap, and the same point measured 29% apart in two runs. The benchmark therefore records, for every timed case,
what the GPU did during its kernel-time pass: the SM clock's range, the largest power draw, and every reason
NVML gave for holding the clock down (idle excepted). NVML is polled on a thread (``ClockSampler``); where it
cannot be read, the record says why (``{"unavailable": reason}``), never nothing.
"""

from __future__ import annotations

import statistics
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from types import ModuleType, TracebackType

__all__ = ["SLOW_REASONS", "ClockSampler", "ClockTally", "slowdown", "tally"]

# NVML's clock-event reason bits (nvml.h, nvmlClocksEventReason*): the name each is recorded under.
_REASONS = {0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
            0x10: "sync_boost", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown",
            0x80: "hw_power_brake_slowdown", 0x100: "display_clock_setting"}
# The reasons that mean the GPU ran slower than it could (a power or thermal limit), which a reader of a ratio
# must know about; idle, sync boost and a set application clock are not among them.
SLOW_REASONS = ("sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown",
                "hw_power_brake_slowdown")
# Below this fraction of its maximum the SM clock counts as held down even when NVML names no reason.
_CLOCK_FLOOR = 0.95
_INTERVAL_S = 0.005


def _reason_names(mask: int) -> set[str]:
    names = {name for bit, name in _REASONS.items() if mask & bit}
    unknown = mask & ~sum(_REASONS)
    return names | ({f"0x{unknown:x}"} if unknown else set())


class ClockSampler:
    """``with ClockSampler(device_index) as s: ...`` polls NVML every few milliseconds while the block runs;
    ``s.record()`` is then what the results file holds (``gpu_clocks``)."""

    def __init__(self, device_index: int, *, interval_s: float = _INTERVAL_S) -> None:
        self.device_index = device_index
        self.interval_s = interval_s
        self._nvml: ModuleType | None = None
        self._handle: object = None
        self._unavailable: str | None = None
        self._mhz: list[int] = []
        self._watts: list[float] = []
        self._reasons: set[str] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._max_mhz: int | None = None

    def _open(self) -> None:
        try:
            import pynvml  # nvidia-ml-py: only where a GPU is
        except ImportError as err:
            self._unavailable = f"pynvml (nvidia-ml-py) is not installed: {err}"
            return
        initialized = False
        try:
            import torch

            uuid = f"GPU-{torch.cuda.get_device_properties(self.device_index).uuid}"
            pynvml.nvmlInit()
            initialized = True
            self._handle = pynvml.nvmlDeviceGetHandleByUUID(uuid.encode())
            self._max_mhz = pynvml.nvmlDeviceGetMaxClockInfo(self._handle, pynvml.NVML_CLOCK_SM)
        except (pynvml.NVMLError, RuntimeError, AttributeError) as err:
            self._unavailable = f"NVML could not open GPU {self.device_index}: {type(err).__name__}: {err}"
            if initialized:
                pynvml.nvmlShutdown()
            return
        self._nvml = pynvml  # opened: __exit__ shuts it down

    def _sample(self) -> bool:
        """One sample; False (the reason recorded) once NVML stops answering."""
        nvml, handle = self._nvml, self._handle
        assert nvml is not None
        try:
            self._mhz.append(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM))
            self._watts.append(nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0)
            reasons = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
                nvml.nvmlDeviceGetCurrentClocksThrottleReasons
            self._reasons |= _reason_names(reasons(handle)) - {"gpu_idle"}
        except nvml.NVMLError as err:  # recorded: on the polling thread nobody would see it raised
            self._unavailable = f"NVML stopped answering while sampling: {type(err).__name__}: {err}"
            return False
        return True

    def _poll(self) -> None:
        while self._sample() and not self._stop.wait(self.interval_s):
            pass

    def __enter__(self) -> ClockSampler:
        self._open()
        if self._nvml is not None:
            self._thread = threading.Thread(target=self._poll, name="gpu-clocks", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._nvml is not None:
            if self._unavailable is None:
                self._sample()  # one at the very end: a block shorter than the interval still has two
            self._nvml.nvmlShutdown()

    def record(self) -> dict[str, object]:
        """What the GPU did while the block ran, as the results file holds it."""
        if self._unavailable is not None:
            return {"unavailable": self._unavailable}
        return {"samples": len(self._mhz), "sm_mhz_min": min(self._mhz), "sm_mhz_median": statistics.median(self._mhz),
                "sm_mhz_max": max(self._mhz), "sm_mhz_max_supported": self._max_mhz,
                "power_w_max": round(max(self._watts), 1), "reasons": sorted(self._reasons)}


def slowdown(record: object) -> str | None:
    """Why a case's timing ran below the GPU's full clock, in a few words (None: it did not, or nothing says).

    A limit NVML named (``SLOW_REASONS``), or an SM clock under 95% of its maximum."""
    if not isinstance(record, dict) or "unavailable" in record:
        return None
    named = [r for r in record.get("reasons") or () if r in SLOW_REASONS]
    low, top = record.get("sm_mhz_min"), record.get("sm_mhz_max_supported")
    parts = []
    if named:
        parts.append(", ".join(r.replace("_", " ") for r in named))
    if isinstance(low, int | float) and isinstance(top, int | float) and top > 0 and low < _CLOCK_FLOOR * top:
        parts.append(f"SM clock down to {low:.0f} of {top:.0f} MHz")
    return "; ".join(parts) or None


@dataclass(frozen=True)
class ClockTally:
    """What a run's ``gpu_clocks`` records say together: how many there are, how many were read and held down, the
    lowest SM clock read, and why the others were not read."""

    records: int
    read: int
    held: int
    lowest_mhz: float | None
    unavailable: tuple[str, ...]  # each distinct reason, sorted


def tally(records: Iterable[object]) -> ClockTally:
    """The tally of the ``gpu_clocks`` records among ``records`` (anything not a record is skipped)."""
    found = [r for r in records if isinstance(r, dict)]
    read = [r for r in found if "unavailable" not in r]
    lows = [r["sm_mhz_min"] for r in read if isinstance(r.get("sm_mhz_min"), int | float)]
    return ClockTally(records=len(found), read=len(read), held=sum(1 for r in read if slowdown(r)),
                      lowest_mhz=min(lows) if lows else None,
                      unavailable=tuple(sorted({str(r["unavailable"]) for r in found if "unavailable" in r})))
