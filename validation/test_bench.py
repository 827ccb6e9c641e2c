"""The benchmark's pieces that a CPU can check: the analytic floor, the statistics, the pytest-benchmark file."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest

from kernels.tilegym import launch_names as tilegym_launch_names
from reference import ProblemSpec
from validation.bench import precompile, timing
from validation.bench.flops import cost, floor_us
from validation.bench.pytest_benchmark_json import convert
from validation.bench.timing import Samples

HEADLINE = dict(batch=4, seqlen=16384, nheads=8, headdim=64, ngroups=1, dstate=128, chunk_size=128, dtype="bf16")


class _Clocks:
    """A ClockSampler that records ``clock``: what a point's timing records of the GPU's clock, on the CPU."""

    def __init__(self, clock: dict[str, object]) -> None:
        self.clock = clock

    def __enter__(self) -> _Clocks:
        return self

    def __exit__(self, *exc: object) -> bool:
        return False

    def record(self) -> dict[str, object]:
        return self.clock


def test_headline_floor_matches_the_design_estimate() -> None:
    """The headline shape: ~170 MB of compulsory traffic, ~22.6 GFLOP (C·Bᵀ shared by a group, causal pairs only),
    ~40 us on an H200, where the traffic decides."""
    c = cost(**HEADLINE)
    assert 165e6 < c.bytes < 175e6, f"compulsory bytes {c.bytes / 1e6:.1f} MB; expected ~170 MB"
    # per chunk: C·Bᵀ 2 * 8256 * 128 once, and per head 2 * 8256 * 64 + 2 * 2 * 128 * 128 * 64; 512 chunks
    assert c.flops == 512 * (2 * 8256 * 128 + 8 * (2 * 8256 * 64 + 4 * 128 * 128 * 64))
    assert 38 < floor_us(c, bandwidth_gbs=4300, tflops=790) < 45
    states = 4 * 8 * 128 * 64 * 128
    assert c.chunk_state_elements == states and c.chunk_state_bytes == states * 8
    assert floor_us(c, bandwidth_gbs=4300, tflops=790, extra_bytes=4300 * 10**6) == pytest.approx(
        floor_us(c, bandwidth_gbs=4300, tflops=790) + 1000)


def test_flops_grow_linearly_with_seqlen_and_heads_share_cb_within_a_group() -> None:
    one = cost(**HEADLINE)
    two = cost(**{**HEADLINE, "seqlen": 2 * HEADLINE["seqlen"]})
    assert two.flops == 2 * one.flops
    per_head_groups = cost(**{**HEADLINE, "ngroups": 8})
    assert per_head_groups.flops > one.flops, "C·Bᵀ per head (8 groups) must cost more than one shared C·Bᵀ"


def test_samples_statistics() -> None:
    s = Samples([float(v) for v in range(1, 12)]).as_dict()
    assert (s["median"], s["p10"], s["p90"], s["reps"]) == (6.0, 2.0, 10.0, 11)
    assert s["rel_std"] == pytest.approx(3.1623 / 6.0, rel=1e-3)


def test_pytest_benchmark_file_carries_the_cupti_samples() -> None:
    case = {"id": "cutile-bf16-x", "impl": "cutile", "status": "pass", "dtype": "bf16",
            "shape": {"seqlen": 1024, "dstate": 64},
            "kernel_us": {**Samples([10.0, 12.0, 11.0]).as_dict()}, "wall_us": Samples([50.0]).as_dict()}
    skipped = {"id": "triton-bf16-x", "impl": "triton", "status": "fail", "reason": "gate"}
    doc = convert({"environment": {"gpu_name": "synthetic-test-gpu"}, "created": "2026-11-30T00:00:00+00:00",
                   "cases": [case, skipped]})
    (bench,) = doc["benchmarks"]
    assert bench["stats"]["median"] == pytest.approx(11e-6) and bench["stats"]["rounds"] == 3
    assert bench["extra_info"]["kernel_us"]["median"] == 11.0 and "samples" not in bench["extra_info"]["kernel_us"]
    json.dumps(doc)


def _events(*reps: list[tuple[str, float]]) -> list:
    """GPU activities as torch.profiler lists them: a flush before every rep and after the last."""
    from types import SimpleNamespace

    def event(name: str, us: float, start: float) -> SimpleNamespace:
        return SimpleNamespace(name=name, time_range=SimpleNamespace(start=start, end=start + us))

    flush, out, t = "at::native::bitwise_not_kernel", [], 0.0
    for rep in reps:
        out.append(event(flush, 50.0, t))
        for name, us in rep:
            t += 100.0
            out.append(event(name, us, t))
    return [*out, event(flush, 50.0, t + 100.0)]


def test_per_kernel_times_of_ours_are_named_by_launch_order_not_by_cupti(monkeypatch: pytest.MonkeyPatch) -> None:
    # CUPTI once reported our chunk_out under a TileGym kernel's name; with the launch plan, position decides.
    borrowed = [("_chunk_cumsum_kernel_Kt1", 2.0), ("_state_pass_kernel_Kt1", 10.0), ("fwd_pass_state_kernel", 20.0)]
    right = [("_chunk_cumsum_kernel_Kt1", 4.0), ("_state_pass_kernel_Kt1", 12.0), ("_chunk_out_kernel_Kt1", 22.0)]
    monkeypatch.setattr(timing, "_gpu_events", lambda fn, reps, device: _events(borrowed, right, right))
    plan = ["_chunk_cumsum_kernel", "_state_pass_kernel", "_chunk_out_kernel"]
    assert timing.per_kernel_us(lambda: None, reps=3, device=None, launches=plan) == {
        "_chunk_cumsum_kernel": 4.0, "_state_pass_kernel": 12.0, "_chunk_out_kernel": 22.0}
    # Without a plan (the peers): CUPTI's names, cut at cuTile's mangling suffix.
    assert timing.per_kernel_us(lambda: None, reps=3, device=None)["fwd_pass_state_kernel"] == 0.0
    # A rep that launched something else than the plan is an error, never a mislabelled table.
    monkeypatch.setattr(timing, "_gpu_events", lambda fn, reps, device: _events(right, right[:2]))
    with pytest.raises(RuntimeError, match=r"a call launched 2 GPU activities .* its launch plan has 3"):
        timing.per_kernel_us(lambda: None, reps=2, device=None, launches=plan)


def test_tilegym_kernel_times_are_named_by_their_order_beside_torchs_own(monkeypatch: pytest.MonkeyPatch) -> None:
    # In the published validates CUPTI filed TileGym's state kernel under its output kernel's name in a few points
    # each: its three cuTile kernels are named by their order, the wrapper's zero-fill by CUPTI's name.
    fill = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>"
    misfiled = [(fill, 1.0), ("chunk_cumsum_kernel", 3.0), ("compute_out_kernel", 30.0), ("compute_out_kernel", 50.0)]
    right = [(fill, 1.0), ("chunk_cumsum_kernel", 3.0), ("fwd_pass_state_kernel", 30.0), ("compute_out_kernel", 50.0)]
    monkeypatch.setattr(timing, "_gpu_events", lambda fn, reps, device: _events(misfiled, right, misfiled))
    names = tilegym_launch_names(128)
    assert timing.per_kernel_us(lambda: None, reps=3, device=None, launches=timing.CutileByOrder(names)) == {
        fill: 1.0, "chunk_cumsum_kernel": 3.0, "fwd_pass_state_kernel": 30.0, "compute_out_kernel": 50.0}
    assert tilegym_launch_names(64)[-1] == "compute_out_swap_kernel"
    # CUPTI's names alone would have filed the state kernel's 30 us under the output kernel's, as before.
    assert timing.per_kernel_us(lambda: None, reps=3, device=None)["compute_out_kernel"] == 80.0
    # A call with another count of cuTile kernels is an error, never a mislabelled table.
    monkeypatch.setattr(timing, "_gpu_events", lambda fn, reps, device: _events(right[:3]))
    with pytest.raises(RuntimeError, match=r"a call launched 2 activities other than torch's .* its cuTile kernels "
                                           r"are 3"):
        timing.per_kernel_us(lambda: None, reps=1, device=None, launches=timing.CutileByOrder(names))


def test_interleaved_times_go_to_the_function_each_call_belongs_to(monkeypatch: pytest.MonkeyPatch) -> None:
    # Two rounds of (ours, a peer): the calls alternate, so every other call between flushes is the same function's.
    ours = [("_chunk_cumsum_kernel_Kt1", 3.0), ("_state_pass_kernel_Kt1", 10.0), ("_chunk_out_kernel_Kt1", 20.0)]
    peer = [("_chunk_scan_fwd_kernel", 40.0), ("_state_passing_fwd_kernel", 5.0)]
    ours2 = [(name, us + 2.0) for name, us in ours]
    monkeypatch.setattr(timing, "_gpu_events", lambda fns, reps, device: _events(ours, peer, ours2, peer))
    plan = ["_chunk_cumsum_kernel", "_state_pass_kernel", "_chunk_out_kernel"]
    mine, theirs = timing.interleaved_kernel_us([lambda: None, lambda: None], reps=2, device=None,
                                                launches=[plan, None])
    assert mine.kernel_us.samples == [33.0, 39.0] and theirs.kernel_us.samples == [45.0, 45.0]
    assert mine.per_kernel_us == {"_chunk_cumsum_kernel": 4.0, "_chunk_out_kernel": 21.0, "_state_pass_kernel": 11.0}
    assert theirs.per_kernel_us == {"_chunk_scan_fwd_kernel": 40.0, "_state_passing_fwd_kernel": 5.0}
    # A call count that is not rounds x functions, or a call that launched nothing, is an error, never a number.
    monkeypatch.setattr(timing, "_gpu_events", lambda fns, reps, device: _events(ours, peer, ours2))
    with pytest.raises(RuntimeError, match=r"CUPTI saw 3 calls between flushes; expected 2 rounds of 2 \(4\)"):
        timing.interleaved_kernel_us([lambda: None, lambda: None], reps=2, device=None)
    monkeypatch.setattr(timing, "_gpu_events", lambda fns, reps, device: _events(ours, [], ours2, peer))
    with pytest.raises(RuntimeError, match="a call measured zero GPU time"):
        timing.interleaved_kernel_us([lambda: None, lambda: None], reps=2, device=None)
    with pytest.raises(ValueError, match="1 launch plans for 2 functions"):
        timing.interleaved_kernel_us([lambda: None, lambda: None], reps=2, device=None, launches=[plan])


def test_a_point_times_every_run_through_the_gate_together_and_keeps_the_runs_order(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """bench_point on the CPU with stand-ins for the GPU's pieces: ours and Triton pass the gate and are timed in one
    interleaved_kernel_us call, TileGym (between them) fails it and is not timed; the cases come back in the runs'
    order, each with its own times and the point's one clock record."""
    from contextlib import nullcontext
    from types import SimpleNamespace

    import torch

    from reference import ssd_chunked
    from validation.bench import run
    from validation.bench.sweep import POINT
    from validation.bench.timing import KernelTimes

    spec = ProblemSpec(**{**POINT, "seqlen": 64, "dstate": 16})
    make_inputs = ProblemSpec.make_inputs
    monkeypatch.setattr(ProblemSpec, "make_inputs", lambda self, device="cpu": make_inputs(self, "cpu"))

    states: dict[str, set] = {}  # per implementation, the initial states its calls got (by identity)

    def forward(name: str):
        def fn(x, dt, A, B, C, D=None, initial_state=None, *, chunk_size):
            states.setdefault(name, set()).add(None if initial_state is None else id(initial_state))
            y, state = ssd_chunked(x, dt, A, B, C, D, initial_state, chunk_size=32)
            return (y, state) if name != "tilegym" else (torch.zeros_like(y), state)
        return fn

    def zero_state(args):  # as kernels.tilegym.explicit_args does for an implementation that takes no None
        x, B = args[0], args[3]
        return (*args[:6], torch.zeros(x.shape[0], x.shape[2], x.shape[3], B.shape[-1]))

    impls = {name: SimpleNamespace(matmul={"bf16": "bf16"}, unsupported_reason=lambda spec: None,
                                   load=lambda name=name: forward(name),
                                   timed_args=zero_state if name == "triton" else tuple)
             for name in ("cutile", "tilegym", "triton")}
    monkeypatch.setattr(run, "IMPLS", impls)
    seen: dict[str, object] = {}
    clock = {"samples": 4, "sm_mhz_min": 1980, "sm_mhz_median": 1980.0, "sm_mhz_max": 1980,
             "sm_mhz_max_supported": 1980, "power_w_max": 300.0, "reasons": []}

    def interleaved(calls, *, reps, device, launches):
        seen.update(calls=len(calls), launches=launches)
        return [KernelTimes(Samples([10.0 * (i + 1)] * reps), {"k": 10.0 * (i + 1)}) for i in range(len(calls))]

    monkeypatch.setattr(run, "interleaved_kernel_us", interleaved)
    monkeypatch.setattr(run, "cupti_kernel_us", lambda fn, reps, device: Samples([1.0]))
    monkeypatch.setattr(run, "wall_us", lambda fn, reps, device: Samples([50.0]))
    monkeypatch.setattr(run, "first_call_s", lambda fn, device: fn() or 0.5)
    monkeypatch.setattr(run, "_warm", lambda fns, seconds: None)
    monkeypatch.setattr(run, "ClockSampler", lambda index: _Clocks(clock))
    monkeypatch.setattr(run, "domain_checked", lambda *a, **k: nullcontext())
    monkeypatch.setattr(run.torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(run, "_design_floor", lambda *a: {})
    monkeypatch.setattr(run, "_launches", lambda spec, name, variant, args: [name] if name == "cutile" else None)
    monkeypatch.setattr(run, "autotune_choices", lambda: 0)
    monkeypatch.setattr(run, "tilegym_tuning", SimpleNamespace(decisions=lambda problem: None,
                                                               problem_of=lambda *a: None))

    records = run.bench_point(spec, ["cutile", "tilegym", "triton"], {"copy_bandwidth_gbs": 4000.0,
                                                                      "bf16_matmul_tflops": 800.0}, reps=3)
    assert [(r.impl, r.status) for r in records] == [("cutile", "pass"), ("tilegym", "fail"), ("triton", "pass")]
    assert seen == {"calls": 2, "launches": [["cutile"], None]}
    ours, theirs = records[0].measured, records[2].measured
    assert ours["kernel_us"]["median"] == 10.0 and theirs["kernel_us"]["median"] == 20.0
    assert ours["per_kernel_us"] == {"k": 10.0} and theirs["per_kernel_us"] == {"k": 20.0}
    assert ours["gpu_clocks"] == theirs["gpu_clocks"] == clock
    assert "kernel_us" not in records[1].measured
    # Each run's calls (the gate's and the timed ones) take the arguments Impl.timed_args gave once for the point.
    assert states["cutile"] == {None} and len(states["triton"]) == 1 and None not in states["triton"]


def _bench_case(impl: str, seqlen: int, dstate: int, status: str = "pass", variant: str | None = None):
    from validation.bench.sweep import POINT
    from validation.schema import CaseRecord

    spec = ProblemSpec(**{**POINT, "seqlen": seqlen, "dstate": dstate})
    return CaseRecord(id=spec.case_id(impl, variant), impl=impl, status=status, shape=spec.shape_dict(),
                      dtype=spec.dtype, regime=spec.regime, seed=spec.seed, variant=variant,
                      reason=None if status == "pass" else "correctness gate: y rel_l2 too large")


def test_length_scaling_times_the_two_longest_lengths_of_what_passed_at_both_in_the_same_rounds(monkeypatch) -> None:
    """Only implementations whose default cases passed at both of the two longest lengths are timed, every call of
    both lengths in one interleaved_kernel_us (one set of rounds, one clock record); a variant or a failure at either
    length keeps an implementation out; the row says the long length's time a token over the short one's."""
    from contextlib import nullcontext
    from types import SimpleNamespace

    from validation.bench import run
    from validation.bench.sweep import POINT
    from validation.bench.timing import KernelTimes
    from validation.schema import SCHEMA_VERSION, SchemaError, check_results

    specs = [ProblemSpec(**{**POINT, "seqlen": n, "dstate": d}) for n in (64, 128, 256) for d in (16, 32)]
    cases = [_bench_case(i, n, d) for i in ("cutile", "tilegym", "triton") for n in (64, 128, 256) for d in (16, 32)]
    cases[cases.index(_bench_case("tilegym", 256, 32))] = _bench_case("tilegym", 256, 32, "fail")
    cases += [_bench_case("cutile", 256, 16, "pass", "serial-state")]
    assert run.scaling_pairs(specs, cases) == ((128, 256), {16: ["cutile", "tilegym", "triton"],
                                                            32: ["cutile", "triton"]})

    monkeypatch.setattr(ProblemSpec, "make_inputs", lambda self, device="cpu": SimpleNamespace(
        dt=None, A=None, as_args=lambda n=self.seqlen: (n,)))
    called: list[tuple[str, int]] = []
    prepared: list[tuple[str, tuple]] = []
    monkeypatch.setattr(run, "IMPLS", {name: SimpleNamespace(load=lambda name=name: lambda n, *, chunk_size:
                                                             called.append((name, n)),
                                                             timed_args=lambda args, name=name:
                                                             prepared.append((name, args)) or args)
                                       for name in ("cutile", "tilegym", "triton")})
    clock = {"samples": 4, "sm_mhz_min": 1800, "sm_mhz_median": 1890.0, "sm_mhz_max": 1980,
             "sm_mhz_max_supported": 1980, "power_w_max": 700.0, "reasons": ["sw_power_cap"]}
    rounds: list[int] = []

    def interleaved(calls, *, reps, device):
        rounds.append(len(calls))
        for call in calls:
            call()
        # per call: 1 us a token at the short length, 0.99 at the long one (the impl's index adds nothing)
        return [KernelTimes(Samples([float(n) * (0.99 if n == 256 else 1.0)] * reps), {})
                for n in [c[1] for c in called[-len(calls):]]]

    monkeypatch.setattr(run, "interleaved_kernel_us", interleaved)
    monkeypatch.setattr(run, "_warm", lambda fns, seconds: None)
    monkeypatch.setattr(run, "ClockSampler", lambda index: _Clocks(clock))
    monkeypatch.setattr(run, "domain_checked", lambda *a, **k: nullcontext())
    monkeypatch.setattr(run.torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(run.torch.cuda, "empty_cache", lambda: None)
    out = run.length_scaling(specs, cases, reps=3)
    assert rounds == [6, 4], "one set of rounds a dstate, both lengths of every implementation in it"
    assert called == [("cutile", 128), ("cutile", 256), ("tilegym", 128), ("tilegym", 256), ("triton", 128),
                      ("triton", 256), ("cutile", 128), ("cutile", 256), ("triton", 128), ("triton", 256)]
    assert prepared == [(name, (n,)) for name, n in called], "every timed call's arguments from Impl.timed_args"
    assert out["seqlens"] == [128, 256] and "not_measured" not in out
    assert [(r["impl"], r["dstate"]) for r in out["rows"]] == [("cutile", 16), ("tilegym", 16), ("triton", 16),
                                                               ("cutile", 32), ("triton", 32)]
    row = out["rows"][0]
    assert row["long_over_short"] == pytest.approx(0.99) and row["gpu_clocks"] == clock
    assert row["ns_per_token"] == {"128": pytest.approx(1000.0), "256": pytest.approx(990.0)}
    payload = {"schema_version": SCHEMA_VERSION, "suite": "benchmark", "created": "2026-12-04T16:00:00+00:00",
               "environment": {"suite_version": "0.1.0"}, "cases": [], "length_scaling": out}
    check_results(json.loads(json.dumps(payload)), "benchmark.json", "benchmark")
    del payload["length_scaling"]["rows"][1]["long_over_short"]
    with pytest.raises(SchemaError, match=r"length_scaling\.rows\[1\]\.long_over_short: expected a number"):
        check_results(json.loads(json.dumps(payload)), "benchmark.json", "benchmark")
    assert run.length_scaling(specs[:2], cases, reps=3)["not_measured"] == "the sweep has a single length"
    assert run.length_scaling(specs[:4], cases[:1], reps=3)["not_measured"].startswith("no implementation passed")


def test_compile_phase_starts_with_the_shortest_points_and_leaves_out_what_cannot_run() -> None:
    specs = [ProblemSpec(**{**HEADLINE, "seqlen": s, "dstate": d}, regime="typical", seed=0)
             for s in (4096, 1024) for d in (128, 64)]
    order = precompile.schedule(specs, ["triton", "cutile"])
    assert [(s.seqlen, s.dstate, impl) for s, impl in order] == [  # Triton once per dstate: length-free kernels
        (1024, 64, "triton"), (1024, 64, "cutile"), (1024, 128, "triton"), (1024, 128, "cutile"),
        (4096, 64, "cutile"), (4096, 128, "cutile")]
    odd = ProblemSpec(**{**HEADLINE, "seqlen": 1000}, regime="typical", seed=0)  # not a multiple of 16: kept
    assert [(s.seqlen, impl) for s, impl in precompile.schedule([*specs, odd], ["triton"])] == [
        (1000, "triton"), (1024, "triton"), (1024, "triton")]
    ragged = ProblemSpec(**{**HEADLINE, "seqlen": 1000}, regime="typical", seed=0)  # TileGym takes whole chunks
    assert precompile.schedule([ragged], ["tilegym"]) == []


def test_compile_phase_memory_estimate_covers_states_and_io() -> None:
    spec = ProblemSpec(**{**HEADLINE, "seqlen": 262144, "dstate": 512}, regime="typical", seed=0)
    c = cost(**HEADLINE | {"seqlen": 262144, "dstate": 512})
    assert precompile.memory_estimate(spec) >= c.bytes + c.chunk_state_bytes
    assert 30e9 < precompile.memory_estimate(spec) < 60e9, "the largest sweep point: ~21 GB of io and states"


def test_compile_phase_runs_every_first_call_in_processes_at_once() -> None:
    """Real spawned processes on the CPU, with the float64 chunked reference standing in for the kernels."""
    specs = [ProblemSpec(batch=1, seqlen=s, nheads=2, headdim=16, ngroups=1, dstate=16, chunk_size=16, dtype="fp32",
                         regime="typical", seed=0) for s in (32, 48, 64)]
    lines: list[str] = []
    phase = precompile.first_calls(specs, ["reference-chunked"], jobs=2, tuning="cached", log=lines.append, gpus=[])
    assert (phase["first_calls"], phase["of"], phase["failed"], phase["jobs"]) == (3, 3, {}, 2)
    assert sorted(phase["seconds"]) == sorted(s.case_id("reference-chunked") for s in specs)
    assert lines[0] == "compile phase: 3 first calls in 2 processes" and lines[-1].startswith("compile phase: 3 of 3")


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
def test_a_signal_stops_the_compile_phase_and_its_processes(signame: str) -> None:
    """SIGTERM or SIGINT to the benchmark while it compiles: the phase stops its processes and raises Interrupted
    (which the benchmark records as every point not reached), instead of compiling on."""
    import multiprocessing
    import signal

    from validation import isolated

    specs = [ProblemSpec(batch=1, seqlen=32 + 16 * i, nheads=2, headdim=16, ngroups=1, dstate=16, chunk_size=16,
                         dtype="fp32", regime="typical", seed=0) for i in range(40)]
    lines: list[str] = []
    # Processes this one already had (a session fixture's pool of exporters, when pytest-xdist ran the compile
    # tests in this worker first) are not the phase's.
    before = set(multiprocessing.active_children())

    def log(line: str) -> None:
        lines.append(line)
        if line.startswith("[compile 1/"):
            os.kill(os.getpid(), getattr(signal, signame))

    # Python's own handlers, as in a terminal (a job started in the background ignores SIGINT)
    previous = {s: signal.signal(s, h) for s, h in ((signal.SIGINT, signal.default_int_handler),
                                                    (signal.SIGTERM, signal.SIG_DFL))}
    try:
        with pytest.raises(isolated.Interrupted, match=f"^interrupted: {signame}$") as stopped:
            precompile.first_calls(specs, ["reference-chunked"], jobs=2, tuning="cached", log=log, gpus=[])
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler, "the phase left its handler installed"
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL, "the phase left its handler installed"
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    assert stopped.value.signame == signame
    assert not any(line.startswith("[compile 40/") for line in lines), "the phase compiled on after the signal"
    assert not set(multiprocessing.active_children()) - before, "a compile process outlived the stopped phase"


def test_compile_phase_processes_take_the_gpus_in_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    import multiprocessing

    # _take_gpu writes os.environ (it runs in each new worker): here it gets a stand-in, so that no
    # CUDA_VISIBLE_DEVICES it sets outlives the test. On a GPU machine a leaked one would hide the GPU from every
    # later CUDA start in this process.
    environ = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    monkeypatch.setattr(precompile.os, "environ", environ)
    counter = multiprocessing.get_context("spawn").Value("i", 0)
    seen = []
    for _ in range(5):
        environ.pop("CUDA_VISIBLE_DEVICES", None)
        precompile._take_gpu(["3", "5"], counter)
        seen.append(environ["CUDA_VISIBLE_DEVICES"])
    assert seen == ["3", "5", "3", "5", "3"]
    environ.pop("CUDA_VISIBLE_DEVICES")
    precompile._take_gpu([], counter)  # no GPU: nothing set
    assert "CUDA_VISIBLE_DEVICES" not in environ


def test_compile_phase_starts_a_process_per_gpu_at_least() -> None:
    """Real spawned processes on the CPU, told of two GPUs (CUDA_VISIBLE_DEVICES is then set in each, unused)."""
    specs = [ProblemSpec(batch=1, seqlen=32, nheads=2, headdim=16, ngroups=1, dstate=16, chunk_size=16, dtype="fp32",
                         regime="typical", seed=0)]
    lines: list[str] = []
    phase = precompile.first_calls(specs, ["reference-chunked"], jobs=1, tuning="cached", log=lines.append,
                                   gpus=["0", "1"])
    assert (phase["first_calls"], phase["jobs"], phase["gpus"]) == (1, 2, 2)
    assert lines[0] == "compile phase: 1 first calls in 2 processes over 2 GPUs"


def test_forgetting_triton_autotune_choices_empties_every_tuner() -> None:
    from triton import Config

    from validation.bench.triton_tuning import KERNEL_MODULES, autotune_choices, forget_autotune_choices

    forget_autotune_choices()  # imports mamba_ssm's kernel modules (decoration only; no GPU needed)
    import mamba_ssm.ops.triton.ssd_chunk_scan as chunk_scan
    import mamba_ssm.ops.triton.ssd_chunk_state as chunk_state

    chunk_scan._chunk_scan_fwd_kernel.cache[(128, 64, 128, True)] = Config({})
    chunk_state._chunk_state_fwd_kernel.cache[(128, 64, 128)] = Config({})
    assert autotune_choices() == 2
    assert forget_autotune_choices() == 2
    assert autotune_choices() == 0
    assert not chunk_scan._chunk_scan_fwd_kernel.cache and not chunk_state._chunk_state_fwd_kernel.cache
    assert forget_autotune_choices() == 0
    assert {"ssd_chunk_scan", "ssd_chunk_state", "ssd_state_passing", "ssd_bmm"} == set(KERNEL_MODULES)


def test_triton_is_tuned_at_the_headline_length_once_per_dstate(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its choices are forgotten once, before all the tuning calls: forgetting before each dstate dropped the
    choices made for the others (found on the H200: dstate 64-256 then tuned at 1024 tokens)."""
    import torch

    from validation.bench import run
    from validation.registry import IMPLS

    events: list[object] = []
    monkeypatch.setattr(run, "forget_autotune_choices", lambda: events.append("forget"))
    stand_in = type("StandIn", (), {"load": lambda self: lambda x, dt, A, B, C, D, h0, chunk_size: events.append(
        ("call", x.shape[1], B.shape[-1], chunk_size))})()
    monkeypatch.setitem(IMPLS, "triton", stand_in)
    monkeypatch.setattr(run, "first_call_s", lambda fn, device: fn() or 0.0)
    tuned = run.tune_triton_at_headline([64, 128], torch.device("cpu"))
    assert events == ["forget", ("call", 16384, 64, 128), ("call", 16384, 128, 128)]
    assert tuned == {64: 0.0, 128: 0.0}


def test_only_a_failure_of_ours_fails_the_benchmark() -> None:
    """A peer failing the float64 gate is a finding (kept in the file and the summary), not a failed run."""
    from validation.bench.run import exit_code

    peer_fails = [{"impl": "cutile", "status": "pass"}, {"impl": "triton", "status": "fail"},
                  {"impl": "tilegym", "status": "crashed"}]
    assert exit_code(peer_fails) == 0
    assert exit_code([*peer_fails, {"impl": "cutile", "status": "fail"}]) == 1
    assert exit_code([{"impl": "cutile", "status": "crashed"}]) == 1
    assert exit_code([{"impl": "cutile", "status": "not-run"}, {"impl": "triton", "status": "unsupported"}]) == 0


def test_a_run_directory_holding_a_benchmark_file_is_refused_before_any_point(tmp_path, monkeypatch, capsys) -> None:
    from validation.bench import run

    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "benchmark.json").write_text("{}")
    monkeypatch.setenv("SSD_RUN_DIR", str(tmp_path))
    assert run.main(["--seqlen", "1024", "--dstate", "64"]) == 2
    assert "benchmark.json" in capsys.readouterr().err
    assert (tmp_path / "raw" / "benchmark.json").read_text() == "{}"


@pytest.fixture
def stopped_in_compile_phase(tmp_path, monkeypatch) -> Iterator[list[object]]:
    """run.main on the GPU path, stopped by SIGTERM as its compile phase starts (before it touches a GPU), writing into
    tmp_path; main()'s own signal handlers are put back afterwards. Yields a list where that phase marks its start."""
    import signal

    from validation import isolated
    from validation.bench import run

    order: list[object] = []

    def stopped(*args: object, **kwargs: object) -> dict[str, object]:
        order.append("first_calls")
        raise isolated.Interrupted("interrupted: SIGTERM", "SIGTERM")

    monkeypatch.setenv("SSD_RUN_DIR", str(tmp_path))
    monkeypatch.setattr(run, "HAS_CUDA", True)
    monkeypatch.setattr(run.precompile, "first_calls", stopped)
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    yield order
    for signum, handler in previous.items():
        signal.signal(signum, handler)


def test_a_benchmark_stopped_while_it_compiles_writes_every_point_as_not_reached(stopped_in_compile_phase,
                                                                                 tmp_path) -> None:
    """A signal during the compile phase (before any point is timed): the results file is written, every point
    not-run with the reason, the signal named, and the exit status 128 + its number (no traceback, nothing lost)."""
    import signal

    from validation.bench import run

    code = run.main(["--seqlen", "1024", "2048", "--dstate", "64", "--impl", "cutile", "triton", "--cutile-variants"])
    assert code == 128 + signal.SIGTERM
    data = json.loads((tmp_path / "raw" / "benchmark.json").read_text())
    assert data["interrupted"] == "SIGTERM"
    assert [(c["status"], c["reason"]) for c in data["cases"]] == [("not-run", "not reached: interrupted: SIGTERM")] * 4
    assert not (tmp_path / "partial").exists()


@pytest.mark.parametrize("mode,stored,warmed,recorded", [
    # 1024x64 has its choices stored: not compiled; 4096 and 16384 tokens compile as 2048 do
    ("tune", {(1024, 64)}, [([(1024, 128), (2048, 64), (2048, 128)], 3)],
     {"untuned_points": 5, "shapes": "1024x128 2048x64 2048x128", "jobs": 3, "failed_processes": 1}),
    ("tune", "all", [], {"untuned_points": 0, "shapes": "", "jobs": 3, "failed_processes": 0}),
    ("cached", set(), [], None), ("off", set(), [], None)], ids=["tune", "tune-all-stored", "cached", "off"])
def test_a_tune_run_compiles_tilegyms_search_spaces_for_its_points_without_choices_first(
        mode, stored, warmed, recorded, stopped_in_compile_phase, tmp_path, monkeypatch) -> None:
    """--tilegym-tuning tune runs the parallel warm (in --compile-jobs processes) before the compile phase, for the
    stand-in shapes of the points without stored choices, and records it (nothing to compile when every point has
    them); cached and off warm nothing."""
    import contextlib

    from validation.bench import run

    order = stopped_in_compile_phase
    monkeypatch.setattr(run.tilegym_tuning, "use", lambda mode: contextlib.nullcontext())
    monkeypatch.setattr(run.tilegym_tuning, "warm", lambda shapes, *, jobs: order.append((shapes, jobs)) or 1)
    monkeypatch.setattr(run.tilegym_tuning, "untuned",
                        lambda points: [] if stored == "all" else [p for p in points if p not in stored])
    run.main(["--seqlen", "1024", "4096", "16384", "--dstate", "64", "128", "--impl", "tilegym", "--compile-jobs",
              "3", "--tilegym-tuning", mode])
    warm = json.loads((tmp_path / "raw" / "benchmark.json").read_text())["tilegym_tuning"].get("warm")
    assert order == [*warmed, "first_calls"]
    assert (warm if warm is None else {k: warm[k] for k in recorded}) == recorded


def test_warm_shapes_keep_what_cutile_specialises_on() -> None:
    """A multiple of 2048 tokens compiles as 2048 (16 chunks divide it) unless TileGym's chunk states pass 2**31
    elements (64-bit indices: 262144 x 512 at the benchmark's point); any other length stands for itself."""
    from validation.bench.tilegym_tuning import WARM_SHAPES, warm_shapes

    assert warm_shapes([(16384, 128), (4096, 128), (3000, 128), (131072, 512), (262144, 512), (262144, 256)]) == [
        (2048, 128), (2048, 256), (2048, 512), (3000, 128), (262144, 512)]
    assert WARM_SHAPES == tuple((seqlen, dstate) for seqlen in (1024, 2048) for dstate in (64, 128, 256, 512)) + (
        (262144, 512),)


@pytest.mark.parametrize("args,named", [
    (["--seqlen", "0"], "--seqlen"), (["--dstate", "-64"], "--dstate"), (["--reps", "0"], "--reps"),
    (["--budget-s", "-3"], "--budget-s"), (["--budget-s", "nan"], "--budget-s"),
    (["--ablation-points", "0x128"], "--ablation-points"),
    (["--seqlen", "4096", "--ablation-points", "8192x128"], "8192x128 not in the sweep"),
    (["--seqlen", "99999999999999999999"], "argument --seqlen: expected an integer from 1 to 16777216"),
    (["--dstate", "65537"], "argument --dstate: expected an integer from 1 to 65536"),
    (["--ablation-points", "99999999999999999999x128"], "argument --ablation-points: expected SEQLENxDSTATE"),
    (["--impl", "cutile", "--seqlen", "1024", "--dstate", "3"], "--dstate 3: none of --impl cutile takes this point"),
], ids=["seqlen-0", "dstate-negative", "reps-0", "budget-negative", "budget-nan", "point-0", "point-outside",
        "seqlen-past-any-gpu", "dstate-past-any-gpu", "point-past-any-gpu", "no-impl-takes-the-point"])
def test_bad_benchmark_arguments_are_refused_by_name_before_any_run_directory(args, named, tmp_path, monkeypatch,
                                                                              capsys) -> None:
    from validation.bench import run

    monkeypatch.setenv("SSD_RUN_DIR", str(tmp_path / "run"))
    with pytest.raises(SystemExit) as stop:
        run.main(args)
    assert stop.value.code == 2
    assert named in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_the_ablations_default_points_outside_the_sweep_are_said_not_silently_dropped(tmp_path, monkeypatch,
                                                                                      capsys) -> None:
    from validation.bench import run

    monkeypatch.setenv("SSD_RUN_DIR", str(tmp_path))
    monkeypatch.setattr(run, "HAS_CUDA", False)
    assert run.main(["--impl", "cutile", "--seqlen", "16384", "--dstate", "128"]) == 0
    assert "default points 16384x512 are not in this sweep; the variants of ours run at 16384x128" in \
        capsys.readouterr().err


def test_explore_cutile_never_replaces_an_earlier_file_and_says_it_needs_a_gpu(tmp_path, capsys) -> None:
    from validation.bench import explore_cutile  # imports cuda.tile: every session that runs tests installs it

    earlier = tmp_path / "earlier.json"
    earlier.write_text("{}")
    with pytest.raises(SystemExit):
        explore_cutile.main([str(earlier)])
    assert "exists; results are never overwritten" in capsys.readouterr().err
    assert earlier.read_text() == "{}"
    with pytest.raises(SystemExit):
        explore_cutile.main([str(tmp_path / "new.json"), "--reps", "0"])
    assert "argument --reps: expected an integer >= 1" in capsys.readouterr().err


# --- the command-line tools' arguments: one line naming what is wrong, exit 2, nothing written or replaced ---


def test_check_args_checks_the_benchmarks_arguments_and_runs_nothing(tmp_path, monkeypatch, capsys) -> None:
    """What `nox -s validate` runs before its first step, so that a typo fails in seconds, not after the suites."""
    from validation.bench import run

    monkeypatch.setenv("SSD_RUN_DIR", str(tmp_path / "run"))
    assert run.main(["--check-args", "--impl", "cutile", "triton", "--seqlen", "1024", "--dstate", "3"]) == 0
    assert "the arguments hold (1 points x 2 implementations)" in capsys.readouterr().out, \
        "Triton takes any dstate: a point one implementation asked for can take is not refused"
    assert not (tmp_path / "run").exists()
    with pytest.raises(SystemExit) as stop:
        run.main(["--check-args", "--seqlen", "1k"])
    assert stop.value.code == 2 and "argument --seqlen" in capsys.readouterr().err


def _benchmark_file(tmp_path) -> tuple:
    """A benchmark results file with one timed case, and another suite's."""
    case = {"id": "cutile-bf16-x", "impl": "cutile", "status": "pass", "dtype": "bf16",
            "shape": {"seqlen": 1024, "dstate": 64}, "kernel_us": Samples([10.0, 12.0]).as_dict(),
            "wall_us": Samples([50.0]).as_dict()}
    bench, other = tmp_path / "benchmark.json", tmp_path / "correctness.json"
    bench.write_text(json.dumps({"suite": "benchmark", "environment": {}, "created": "2026-11-30T00:00:00+00:00",
                                 "cases": [case]}))
    other.write_text(json.dumps({"suite": "correctness", "environment": {}, "cases": []}))
    return bench, other


@pytest.mark.parametrize("source,named", [
    ("missing.json", "missing.json: no such file"), (".", ": a directory"), ("notes.txt", "not a results file (JSON)"),
    ("correctness.json", "expected a benchmark results file; its suite is 'correctness'"),
    ("list.json", "its suite is None"), ("nocases.json", "not a benchmark results file of this suite"),
], ids=["missing", "directory", "not-json", "another-suite", "not-an-object", "no-cases"])
def test_pytest_benchmark_json_refuses_what_is_not_a_benchmark_file_in_one_line(source, named, tmp_path,
                                                                                  capsys) -> None:
    from validation.bench import pytest_benchmark_json

    _benchmark_file(tmp_path)
    (tmp_path / "notes.txt").write_text("not json")
    (tmp_path / "list.json").write_text("[]")
    (tmp_path / "nocases.json").write_text(json.dumps({"suite": "benchmark", "environment": {}}))
    with pytest.raises(SystemExit) as stop:
        pytest_benchmark_json.main([str(tmp_path / source), str(tmp_path / "out.json")])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and named in err and "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("python -m validation.bench.pytest_benchmark_json: error: ")
    assert not (tmp_path / "out.json").exists()


def test_pytest_benchmark_json_replaces_an_existing_file_only_with_overwrite(tmp_path, capsys) -> None:
    from validation.bench import pytest_benchmark_json

    bench, _ = _benchmark_file(tmp_path)
    out = tmp_path / "out.json"
    out.write_text("earlier")
    with pytest.raises(SystemExit) as stop:
        pytest_benchmark_json.main([str(bench), str(out)])
    assert stop.value.code == 2 and "out.json exists; pass --overwrite" in capsys.readouterr().err
    assert out.read_text() == "earlier"
    assert pytest_benchmark_json.main([str(bench), str(out), "--overwrite"]) == 0
    assert len(json.loads(out.read_text())["benchmarks"]) == 1
    with pytest.raises(SystemExit) as stop:
        pytest_benchmark_json.main([str(bench), str(tmp_path / "out.json" / "in-a-file.json"), "--overwrite"])
    assert stop.value.code == 2 and "cannot write it" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:
        pytest_benchmark_json.main(["--help"])
    assert stop.value.code == 0 and "usage: python -m validation.bench.pytest_benchmark_json" in capsys.readouterr().out


def test_explore_cutile_refuses_an_unknown_only_prefix_and_an_unwritable_folder_before_any_gpu_work(
        tmp_path, capsys) -> None:
    from validation.bench import explore_cutile  # imports cuda.tile: every session that runs tests installs it

    with pytest.raises(SystemExit) as stop:  # on any machine: a typo is found before the GPU is looked for
        explore_cutile.main([str(tmp_path / "new.json"), "--dstate", "128", "--only", "chunk_out", "typo"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "--only typo: no candidate's name starts with it" in err
    assert "chunk_out" in err.splitlines()[-1], "the names there are listed"
    (tmp_path / "a-file").write_text("")
    with pytest.raises(SystemExit) as stop:
        explore_cutile.main([str(tmp_path / "a-file" / "new.json")])
    assert stop.value.code == 2 and "its folder cannot take it" in capsys.readouterr().err
    assert not (tmp_path / "new.json").exists()


def test_explore_cutile_takes_a_batch_and_refuses_one_below_1(tmp_path, capsys) -> None:
    from validation.bench import explore_cutile  # imports cuda.tile: every session that runs tests installs it

    with pytest.raises(SystemExit) as stop:
        explore_cutile.main([str(tmp_path / "new.json"), "--batch", "0"])
    assert stop.value.code == 2 and "--batch" in capsys.readouterr().err
    # Other batches plan their own candidates (the walk's tiles follow its program count), over which the --only check
    # runs before any GPU work, on any machine.
    with pytest.raises(SystemExit) as stop:
        explore_cutile.main([str(tmp_path / "new.json"), "--batch", "1", "2", "--dstate", "128", "--only", "typo"])
    assert stop.value.code == 2 and "--only typo: no candidate's name starts with it" in capsys.readouterr().err
    assert not (tmp_path / "new.json").exists()
