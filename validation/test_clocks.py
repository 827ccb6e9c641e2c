"""The GPU clock record of a timed case (validation.bench.clocks), its check in the results contract and its flag in
the report, on a CPU: NVML is a stand-in module that answers what a power-capped H200 answered."""

from __future__ import annotations

import sys
import types

import pytest

from validation.bench import clocks
from validation.bench.clocks import ClockSampler, slowdown
from validation.schema import CaseRecord, SchemaError


class _NVMLError(Exception):
    pass


def _fake_nvml(mhz: list[int], reasons: list[int], *, fail_open: bool = False) -> types.ModuleType:
    """A pynvml that answers from lists (the last value repeats), as NVML answered on the H200 at 16K x 512."""
    nvml = types.ModuleType("pynvml")
    nvml.NVMLError = _NVMLError
    nvml.NVML_CLOCK_SM = 1
    state = {"i": 0, "open": 0}

    def init() -> None:
        state["open"] += 1

    def handle(uuid: bytes) -> str:
        if fail_open:
            raise _NVMLError("GPU is lost")
        assert uuid == b"GPU-00000000-1111-2222-3333-444444444444", uuid
        return "h"

    def clock(h: str, kind: int) -> int:
        state["i"] += 1
        return mhz[min(state["i"] - 1, len(mhz) - 1)]

    nvml.nvmlInit = init
    nvml.nvmlShutdown = lambda: state.__setitem__("open", state["open"] - 1)
    nvml.nvmlDeviceGetHandleByUUID = handle
    nvml.nvmlDeviceGetMaxClockInfo = lambda h, kind: 1980
    nvml.nvmlDeviceGetClockInfo = clock
    nvml.nvmlDeviceGetPowerUsage = lambda h: 598_200
    nvml.nvmlDeviceGetCurrentClocksEventReasons = lambda h: reasons[min(state["i"] - 1, len(reasons) - 1)]
    nvml.state = state
    return nvml


@pytest.fixture
def gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    props = types.SimpleNamespace(uuid="00000000-1111-2222-3333-444444444444")
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: props)


def test_a_power_capped_pass_is_recorded_with_its_reason(gpu: None, monkeypatch: pytest.MonkeyPatch) -> None:
    nvml = _fake_nvml([1980, 1965, 1755, 1890], [0x1, 0x4, 0x4, 0x0])
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    with ClockSampler(0, interval_s=0.001) as sampler:
        while nvml.state["i"] < 4:
            pass
    record = sampler.record()
    assert record["sm_mhz_min"] == 1755 and record["sm_mhz_max"] == 1980 and record["sm_mhz_max_supported"] == 1980
    assert record["reasons"] == ["sw_power_cap"], "idle is not a reason to report; the power cap is"
    assert record["power_w_max"] == 598.2 and record["samples"] >= 4
    assert nvml.state["open"] == 0, "NVML was left initialized"
    assert slowdown(record) == "sw power cap; SM clock down to 1755 of 1980 MHz"
    CaseRecord(id="bench-x", impl="cutile", status="pass", measured={"gpu_clocks": record})  # fits the contract


def test_a_full_clock_pass_is_not_flagged(gpu: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml([1980, 1980], [0x0, 0x10]))
    with ClockSampler(0, interval_s=0.001) as sampler:
        pass
    record = sampler.record()
    assert record["reasons"] == ["sync_boost"] and slowdown(record) is None


@pytest.mark.parametrize("why", ["missing", "lost"])
def test_no_nvml_is_a_recorded_reason_never_a_silent_gap(gpu: None, monkeypatch: pytest.MonkeyPatch,
                                                         why: str) -> None:
    nvml = None if why == "missing" else _fake_nvml([1980], [0], fail_open=True)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    with ClockSampler(0) as sampler:
        pass
    record = sampler.record()
    assert list(record) == ["unavailable"]
    assert ("not installed" if why == "missing" else "GPU is lost") in record["unavailable"]
    assert slowdown(record) is None
    assert nvml is None or nvml.state["open"] == 0, "NVML was left initialized after a failed open"


def test_unknown_reason_bits_are_kept() -> None:
    assert clocks._reason_names(0x4 | 0x1000) == {"sw_power_cap", "0x1000"}


@pytest.mark.parametrize(("bad", "message"), [
    ({"samples": 3, "sm_mhz_min": 1755, "reasons": "sw_power_cap"}, "gpu_clocks.reasons: expected a list"),
    ({"samples": 0, "reasons": []}, "gpu_clocks.samples: expected an integer >= 1"),
    ({"unavailable": ""}, "gpu_clocks.unavailable: expected a non-empty string"),
    ("fast", "gpu_clocks: expected an object"),
])
def test_the_contract_refuses_a_malformed_clock_record(bad: object, message: str) -> None:
    with pytest.raises(SchemaError, match=message):
        CaseRecord(id="bench-x", impl="cutile", status="pass", measured={"gpu_clocks": bad})
