"""The benchmark: the post's sweep for every implementation, gated on float64, timed with CUPTI.

    python -m validation.bench.run                          # the full sweep, all implementations
    python -m validation.bench.run --impl cutile triton --seqlen 16384 --dstate 128

For each point (batch 4, 8 heads, headdim 64, 1 group, chunk 128, bf16 inputs, fp32 state, typical
regime, seed 0): the float64 chunked reference once; then per implementation its first call (compile
and autotune, timed apart) and the correctness gate on those exact inputs against float64 with the
tolerance table (a red gate records the failure and no time); then, for every implementation through the
gate together, a warm-up and CUPTI kernel time in rounds that call each in turn, an L2 flush before every
call (so that all of them meet the same GPU clock), and CUDA-event wall time. The device's copy
bandwidth and bf16 matmul rate are measured in the same run, so every time is also a fraction of the
analytic floor.

First a compile phase (validation/bench/precompile.py, ``--compile-jobs``): parallel processes make every
case's first call, so that the kernels are compiled once, in parallel, before the serial timed loop.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from kernels.cutile.tuning import VARIANTS
from kernels.tilegym import launch_names as tilegym_launch_names
from reference import ProblemSpec, ssd_chunked
from reference.checks import check_domain, domain_checked
from validation import isolated
from validation.bench import precompile, sweep, tilegym_tuning
from validation.bench.clocks import ClockSampler, slowdown
from validation.bench.flops import cost, floor_us
from validation.bench.published import PUBLISHED_B300
from validation.bench.pytest_benchmark_json import convert
from validation.bench.sweep import DSTATES, HEADLINE, POINT, SEQLENS, positive_int, positive_seconds
from validation.bench.timing import CutileByOrder, cupti_kernel_us, first_call_s, interleaved_kernel_us, wall_us
from validation.bench.triton_tuning import autotune_choices, forget_autotune_choices
from validation.gpu import HAS_CUDA, NO_CUDA_REASON, judge, processes_at_once
from validation.provenance import ROOT
from validation.registry import IMPLS
from validation.results import ResultsFile, RunDirError, write_json_atomic
from validation.schema import CaseRecord, Status
from validation.summary import FAILED, PEERS, describe

WARMUP_S = 0.1
TUNING_MODES = {
    "cached": "TileGym's choice per shape from its exhaustive autotune, tuned once and stored; its first config "
              "where no choice is stored (each point's tilegym_tuning says which)",
    "tune": "TileGym's exhaustive autotune, run in this run where no choice was stored, and stored",
    "off": "autotune disabled (TILEGYM_DISABLE_AUTOTUNE=1): TileGym's first config per shape"}
TRITON_TUNING = {
    "headline": "mamba_ssm's autotune keys on (chunk, headdim, dstate), not the length, so a process tunes on the "
                "first length it meets: before the timed loop, one call per dstate at the headline length (16384 "
                "tokens) tunes it there, and every length runs that choice, as in a model",
    "per-point": "the autotune choices are forgotten before every point, so Triton tunes at each point's own shape "
                 "(the most favourable to Triton; about 5 s of tuning per point, in its compile_s)"}
TIMING = {"mode": "interleaved",
          "what": "at each point every run through the gate (ours, the peers, the variants of ours) is timed in the "
                  "same rounds, one call of each in turn with an L2 flush before every call, so that all of them "
                  "meet the same GPU clock and a ratio does not depend on which ran first; clocks are sampled over "
                  "those rounds, once per point. Each is timed on the tensors its own API takes, made before the "
                  "timed calls: TileGym, whose API has no None initial state, on a zero state made once per point, "
                  "so that its kernel time holds its kernels and not the zero-fill our adapter would add to each call"}
LENGTH_SCALING = ("the sweep's two longest lengths at each dstate, each implementation that passed the gate at "
                  "both timed there again, every call of both lengths in the same rounds (one call of each in "
                  "turn, an L2 flush before every call), so that both lengths meet the same GPU clock; the point "
                  "cases' own medians, timed a point at a time, may come from different clocks (the power cap holds "
                  "the longest calls down). long_over_short is the long length's kernel time a token over the "
                  "short one's")
COMPILE_PHASE = ("before timing, parallel processes made every case's first call, filling the kernels' disk caches; "
                 "compile_s is then the timed process's first call (loading kernels, Triton's autotune) and "
                 "precompile_s the compile phase's, taken while other processes compiled too")


def _not_run(spec: ProblemSpec, impl: str, reason: str) -> CaseRecord:
    return CaseRecord(id=spec.case_id(impl), impl=impl, status="not-run", reason=reason, shape=spec.shape_dict(),
                      dtype=spec.dtype, regime=spec.regime)


def _case(spec: ProblemSpec, impl: str, variant: str | None, status: Status, reason: str | None = None,
          **measured: object) -> CaseRecord:
    """A point's case: its identity, what was measured there, and the verdict."""
    return CaseRecord(id=spec.case_id(impl, variant), impl=impl, status=status, reason=reason,
                      shape=spec.shape_dict(), dtype=spec.dtype, regime=spec.regime, seed=spec.seed,
                      variant=variant or None, measured=measured)


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def measure_ceilings(device: torch.device) -> dict[str, float]:
    """Device-to-device copy bandwidth (GB/s, read + write) and bf16 matmul rate (TFLOP/s), best of 10."""
    n = 1 << 30
    src, dst = torch.empty(n, dtype=torch.uint8, device=device), torch.empty(n, dtype=torch.uint8, device=device)
    a = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)

    def best_ms(fn) -> float:
        fn()
        times = []
        for _ in range(10):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return min(times)

    copy_ms = best_ms(lambda: dst.copy_(src))
    mm_ms = best_ms(lambda: a @ b)
    return {"copy_bandwidth_gbs": 2 * n / (copy_ms * 1e6), "bf16_matmul_tflops": 2 * 8192**3 / (mm_ms * 1e9)}


def _warm(fns: list[Callable[[], None]], seconds: float) -> None:
    """Call ``fns`` in turn for ``seconds`` per function, as the timed rounds will."""
    torch.cuda.synchronize()
    end = time.perf_counter() + seconds * len(fns)
    while time.perf_counter() < end:
        for fn in fns:
            fn()
    torch.cuda.synchronize()


def tune_triton_at_headline(dstates: list[int], device: torch.device) -> dict[int, float]:
    """Forget Triton's autotune choices once, then make one first call per dstate at the headline length, so
    that each (chunk, headdim, dstate) key is tuned there. Returns the seconds of each call (the tuning)."""
    forget_autotune_choices()  # once: forgetting per dstate would drop the choices made for the others
    fn = IMPLS["triton"].load()
    tuned = {}
    for dstate in dstates:
        spec = ProblemSpec(seqlen=HEADLINE[0], dstate=dstate, **POINT)
        args = spec.make_inputs(device).as_args()
        tuned[dstate] = first_call_s(lambda args=args, c=spec.chunk_size: fn(*args, chunk_size=c), device)
        _progress(f"triton: tuned at {HEADLINE[0]} tokens for dstate {dstate} in {tuned[dstate]:.1f} s")
    return tuned


def _design_floor(spec: ProblemSpec, c, ceilings: dict[str, float], variant: str | None) -> dict[str, object]:
    """The floor of the design ours runs at this point: the compulsory traffic plus its intermediates."""
    from kernels.cutile.api import intermediate_traffic

    major, minor = torch.cuda.get_device_capability()
    extra, how = intermediate_traffic(spec, spec.torch_dtype, spec.chunk_size, f"sm_{major}{minor}",
                                      VARIANTS[variant or "default"])
    return {"intermediate_bytes": extra, "design": how,
            "floor_design_us": floor_us(c, bandwidth_gbs=ceilings["copy_bandwidth_gbs"],
                                        tflops=ceilings["bf16_matmul_tflops"], extra_bytes=extra)}


def _launches(spec: ProblemSpec, impl: str, variant: str | None, args: tuple) -> list[str] | CutileByOrder | None:
    """Ours: the kernels one call launches, in order, from its launch plan (per_kernel_us names them by position,
    since CUPTI may report a cuTile kernel under another's name). TileGym: its three cuTile kernels by their order
    (CUPTI has filed its state kernel under its output kernel's name), any zero-fill by CUPTI's name (the timed calls
    get their zero state from ``Impl.timed_args``, so none is expected). Triton: None (CUPTI's names)."""
    if impl == "tilegym":
        return CutileByOrder(tilegym_launch_names(spec.chunk_size))
    if impl != "cutile":
        return None
    from kernels.cutile.api import launch_names  # imports cuda.tile: only where it runs

    major, minor = torch.cuda.get_device_capability()
    return launch_names(*args, chunk_size=spec.chunk_size, arch=f"sm_{major}{minor}", variant=variant or "default")


@dataclass(frozen=True)
class _Timed:
    """A run of a point that passed the gate, to be timed with the point's others: what its case needs."""

    impl: str
    variant: str | None
    call: Callable[[], None]
    measured: dict[str, object]
    launches: list[str] | None


def bench_point(spec: ProblemSpec, impls: list[str], ceilings: dict[str, float], reps: int,
                triton_tuning: str = "headline", cutile_variants: tuple[str, ...] = ()) -> list[CaseRecord]:
    device = torch.device("cuda")
    inputs = spec.make_inputs(device)
    y_ref, state_ref = ssd_chunked(*inputs.as_args(), chunk_size=32)  # chunk 32: fewer fp64 FLOPs in C·Bᵀ
    c = cost(**spec.shape_dict(), dtype=spec.dtype, with_D=spec.with_D, with_initial_state=spec.with_initial_state)
    check_us = cupti_kernel_us(lambda: check_domain(inputs.dt, inputs.A, who="benchmark"), reps=reps,
                               device=device).median
    floors = {"floor_us": floor_us(c, bandwidth_gbs=ceilings["copy_bandwidth_gbs"],
                                   tflops=ceilings["bf16_matmul_tflops"]),
              "floor_with_states_us": floor_us(c, bandwidth_gbs=ceilings["copy_bandwidth_gbs"],
                                               tflops=ceilings["bf16_matmul_tflops"], with_chunk_states=True)}
    records: list[CaseRecord | _Timed] = []  # in the runs' order; a _Timed becomes its case once timed below
    runs = [(name, None) for name in impls] + [("cutile", v) for v in cutile_variants]
    for name, variant in runs:
        impl = IMPLS[name]
        # What the point measures, grown as it goes; the case is built (and checked) from it at the end.
        measured: dict[str, object] = {"matmul": impl.matmul[spec.dtype], **floors, "bytes": c.bytes,
                                       "chunk_state_bytes": c.chunk_state_bytes, "flops": c.flops}
        reason = impl.unsupported_reason(spec) or (variant and VARIANTS[variant].unsupported_reason(spec.dstate))
        if reason:
            records.append(_case(spec, name, variant, "unsupported", reason, **measured))
            continue
        if name == "cutile":
            measured.update(_design_floor(spec, c, ceilings, variant))
        if variant is None:
            fn = impl.load()
        else:
            from kernels.cutile.api import ssd_fwd_cutile_variant  # imports cuda.tile: only where it runs

            fn = ssd_fwd_cutile_variant(variant)
        args = impl.timed_args(inputs.as_args())
        if name == "triton":
            if triton_tuning == "per-point":
                forget_autotune_choices()
            choices_before = autotune_choices()
        out: dict[str, object] = {}

        def call(fn=fn, args=args, out=out) -> None:
            out["y"], out["state"] = fn(*args, chunk_size=spec.chunk_size)

        measured["compile_s"] = first_call_s(call, device)  # TileGym's autotune, when it runs, is in here
        if name == "triton":  # where its configs were chosen: here if this call added choices (observed, not assumed)
            tuned_here = autotune_choices() > choices_before
            measured["triton_tuned_at"] = spec.seqlen if tuned_here or triton_tuning == "per-point" else HEADLINE[0]
            measured["triton_tuned_here"] = tuned_here
        if name == "tilegym":
            measured["tilegym_tuning"] = tilegym_tuning.decisions(
                tilegym_tuning.problem_of(inputs.x, inputs.dt, inputs.B, inputs.C, spec.chunk_size))
        verdict = judge(name, spec.dtype, impl.matmul[spec.dtype], out["y"], out["state"], y_ref, state_ref)
        measured.update(verdict.record())
        failures = verdict.failures()
        if failures:
            records.append(_case(spec, name, variant, "fail", "correctness gate: " + "; ".join(failures),
                                 **measured))
            continue
        out.clear()
        records.append(_Timed(name, variant, call, measured, _launches(spec, name, variant, args)))
    timed = [r for r in records if isinstance(r, _Timed)]
    if timed:
        # The first call above ran the input check (A <= 0, dt >= 0) like any call; the timed calls, on these
        # same tensors, skip it (its time is input_check_us, measured once per point), so that kernel time is
        # the implementation's own. Every run through the gate is timed in the same rounds (ours, the peers, the
        # variants, each call in turn), so that a clock held down by the power cap meanwhile weighs on all alike.
        calls = [t.call for t in timed]
        with domain_checked(inputs.dt, inputs.A, who="benchmark"):
            _warm(calls, WARMUP_S)
            with ClockSampler(torch.cuda.current_device()) as clocks:  # what the GPU's clock did meanwhile
                times = interleaved_kernel_us(calls, reps=reps, device=device, launches=[t.launches for t in timed])
            walls = [wall_us(call, reps=reps, device=device) for call in calls]
        clock = clocks.record()
        cases = []  # in ``timed``'s order, which is the records'
        for t, kt, wall in zip(timed, times, walls, strict=True):
            kernel = kt.kernel_us
            t.measured.update(kernel_us=kernel.as_dict(), wall_us=wall.as_dict(), per_kernel_us=kt.per_kernel_us,
                              gpu_clocks=clock, floor_fraction=floors["floor_us"] / kernel.median,
                              input_check_us=check_us)
            if "floor_design_us" in t.measured:
                t.measured["floor_design_fraction"] = t.measured["floor_design_us"] / kernel.median
            cases.append(_case(spec, t.impl, t.variant, "pass", **t.measured))
        done = iter(cases)
        records = [next(done) if isinstance(r, _Timed) else r for r in records]
    return records


def scaling_pairs(specs: list[ProblemSpec], cases: list[CaseRecord]) -> tuple[tuple[int, int], dict[int, list[str]]]:
    """The sweep's two longest lengths, and per dstate the implementations (in the run's order) whose default cases
    passed the gate at both: what ``length_scaling`` times. No pair with fewer than two lengths."""
    lengths = sorted({s.seqlen for s in specs})
    if len(lengths) < 2:
        return (0, 0), {}
    short, long = lengths[-2:]
    passed = {(c.shape["seqlen"], c.shape["dstate"], c.impl) for c in cases
              if c.status == "pass" and not c.variant and c.shape}
    impls = list(dict.fromkeys(c.impl for c in cases if not c.variant))
    pairs = {}
    for dstate in sorted({s.dstate for s in specs}):
        both = [i for i in impls if (short, dstate, i) in passed and (long, dstate, i) in passed]
        if both:
            pairs[dstate] = both
    return (short, long), pairs


def scaling_not_measured(why: str) -> dict[str, object]:
    """The ``length_scaling`` record of a run that timed no pair of lengths, and why."""
    return {"what": LENGTH_SCALING, "rows": [], "not_measured": why}


def length_scaling(specs: list[ProblemSpec], cases: list[CaseRecord], reps: int) -> dict[str, object]:
    """Per token, the sweep's longest length against the one before it, at each dstate, every implementation through
    the gate at both timed with both lengths in the same rounds (``LENGTH_SCALING``). The inputs are the point cases'
    own (the same seed), on which those cases passed the float64 gate."""
    (short, long), pairs = scaling_pairs(specs, cases)
    if not short:
        return scaling_not_measured("the sweep has a single length")
    out: dict[str, object] = {"what": LENGTH_SCALING, "seqlens": [short, long], "rows": []}
    if not pairs:
        return {**out, "not_measured": "no implementation passed the gate at the sweep's two longest lengths"}
    device = torch.device("cuda")
    for dstate, impls in pairs.items():
        try:
            out["rows"] += _scaling_rows(dstate, impls, short, long, reps, device)
        except torch.cuda.OutOfMemoryError as err:  # both lengths' inputs at once: recorded, never a lost run
            out.setdefault("not_measured_at", {})[str(dstate)] = f"out of GPU memory: {str(err).splitlines()[0]}"
            _progress(f"benchmark: length_scaling at dstate {dstate}: out of GPU memory; recorded as not measured")
        torch.cuda.empty_cache()
    return out


def _scaling_rows(dstate: int, impls: list[str], short: int, long: int, reps: int, device: torch.device
                  ) -> list[dict[str, object]]:
    pair = [ProblemSpec(seqlen=seqlen, dstate=dstate, **POINT) for seqlen in (short, long)]
    inputs = [spec.make_inputs(device) for spec in pair]
    calls, labels = [], []
    for name in impls:
        fn = IMPLS[name].load()
        for spec, args in zip(pair, [IMPLS[name].timed_args(inp.as_args()) for inp in inputs], strict=True):
            calls.append(lambda fn=fn, args=args, c=spec.chunk_size: fn(*args, chunk_size=c))
            labels.append((name, spec.seqlen))
    with contextlib.ExitStack() as checked:
        for inp in inputs:  # each input checked once here; the timed calls skip the check, as at the points
            checked.enter_context(domain_checked(inp.dt, inp.A, who="benchmark"))
        _warm(calls, WARMUP_S)
        with ClockSampler(torch.cuda.current_device()) as clocks:
            times = interleaved_kernel_us(calls, reps=reps, device=device)
    by = {label: t.kernel_us for label, t in zip(labels, times, strict=True)}
    clock = clocks.record()
    rows = []
    for name in impls:
        a, b = by[(name, short)], by[(name, long)]
        rows.append({"impl": name, "dstate": dstate, "kernel_us": {str(short): a.as_dict(), str(long): b.as_dict()},
                     "ns_per_token": {str(short): a.median * 1e3 / short, str(long): b.median * 1e3 / long},
                     "long_over_short": (b.median / long) / (a.median / short), "gpu_clocks": clock})
    return rows


def _shown(record: CaseRecord) -> str:
    if record.status != "pass":
        return f"{record.status}: {(record.reason or '')[:120]}"
    m = record.measured
    parts = " ".join(f"{name.strip('_').removesuffix('_kernel')[:24]}={us:.1f}"
                     for name, us in m["per_kernel_us"].items())
    slow = slowdown(m.get("gpu_clocks"))
    return (f"{m['kernel_us']['median']:9.1f} us kernel, {m['wall_us']['median']:9.1f} us wall"
            f"{' [' + record.variant + ']' if record.variant else ''}  {parts}"
            f"{f'  (clock held down: {slow})' if slow else ''}")


# Where the ablation runs by default: the headline and the largest dstate at the same length.
ABLATION_POINTS = ((16384, 128), (16384, 512))


def _interrupt(signum: int, frame: object) -> None:
    name = signal.Signals(signum).name
    raise isolated.Interrupted(f"interrupted: {name}", name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m validation.bench.run", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--impl", nargs="+", default=["cutile", "triton", "tilegym"], choices=sorted(IMPLS),
                        help="the implementations to time (default: cutile triton tilegym)")
    parser.add_argument("--seqlen", nargs="+", type=sweep.seqlen_arg, default=list(SEQLENS),
                        help="sequence lengths of the sweep (default: 1024 to 262144, the powers of two); at most "
                             f"{sweep.MAX_SEQLEN} (2**24): at the sweep's point that is 64 GiB of x in bf16 and "
                             "256 GiB of its float64 reference, past any GPU's memory")
    parser.add_argument("--dstate", nargs="+", type=sweep.dstate_arg, default=list(DSTATES),
                        help="state sizes of the sweep (default: 64 128 256 512); at most "
                             f"{sweep.MAX_DSTATE} (2**16), where the float64 reference's chunk states at 16384 "
                             "tokens are 128 GiB. A point that none of --impl takes (cuTile: powers of two 16-512; "
                             "Triton: any) is refused")
    parser.add_argument("--reps", type=positive_int, default=20,
                        help="timed calls of each implementation at a point, each after an L2 flush (default: 20)")
    parser.add_argument("--cutile-variants", nargs="*", default=sorted(set(VARIANTS) - {"default"}),
                        choices=sorted(set(VARIANTS) - {"default"}),
                        help="also time these ablations of ours (kernels.cutile.tuning.VARIANTS), each a case with "
                             "a variant field, at the --ablation-points (default: every variant; none: no ablation)")
    parser.add_argument("--ablation-points", nargs="*", type=sweep.point_arg, default=None,
                        metavar="SEQLENxDSTATE",
                        help="the points of the sweep where the variants run (default: the headline, 16384x128, "
                             "and 16384x512, where the sweep has them)")
    parser.add_argument("--budget-s", type=positive_seconds, default=None,
                        help="start no new point after this many seconds; the rest is recorded as not-run")
    parser.add_argument("--compile-jobs", type=int, default=processes_at_once(),
                        help="processes that make every first call before timing starts, filling the kernels' "
                             "disk caches (compiling is most of a first run); 0: no compile phase "
                             "(default: half the CPUs, at most 8)")
    parser.add_argument("--triton-tuning", choices=sorted(TRITON_TUNING), default="headline",
                        help="headline (default): Triton tunes once per dstate at 16384 tokens and runs that choice "
                             "at every length; per-point: it tunes at every point (about 5 s each)")
    parser.add_argument("--tilegym-tuning", choices=tilegym_tuning.MODES, default="cached",
                        help="cached (default): TileGym's stored choice per shape, else its first config; tune: "
                             "compile TileGym's search spaces for the points without a stored choice in --compile-jobs "
                             "processes, then run its exhaustive autotune there and store its choices (minutes per "
                             "new shape, most of it the compiling); off: TileGym's first config everywhere")
    parser.add_argument("--check-args", action="store_true",
                        help="check these arguments and exit (0 when they would run), measuring nothing and making no "
                             "run directory (nox -s validate does this before its first step)")
    args = parser.parse_args(argv)
    if args.compile_jobs < 0:
        parser.error(f"--compile-jobs must be >= 0; got {args.compile_jobs}")
    points = sorted({(seqlen, dstate) for seqlen in args.seqlen for dstate in args.dstate})
    asked = args.ablation_points is not None
    outside = [f"{seqlen}x{dstate}" for seqlen, dstate in (args.ablation_points if asked else ABLATION_POINTS)
               if (seqlen, dstate) not in points]
    if outside and asked and args.cutile_variants:
        parser.error(f"--ablation-points {' '.join(outside)} not in the sweep of --seqlen and --dstate: no variant "
                     "would run there (add them to the sweep, or pass --cutile-variants with no name)")
    if not asked:
        args.ablation_points = [point for point in ABLATION_POINTS if point in points]
        if outside and args.cutile_variants and "cutile" in args.impl:
            where = " ".join(f"{seqlen}x{dstate}" for seqlen, dstate in args.ablation_points)
            _progress(f"benchmark: the ablation's default points {' '.join(outside)} are not in this sweep; the "
                      f"variants of ours run {f'at {where}' if where else 'nowhere'}")
    specs = [ProblemSpec(seqlen=seqlen, dstate=dstate, **POINT) for seqlen, dstate in points]
    for spec in specs:  # a point none of the implementations asked for can take would only be recorded unsupported
        reasons = [IMPLS[name].unsupported_reason(spec) for name in args.impl]
        if all(reasons):
            parser.error(f"--seqlen {spec.seqlen} --dstate {spec.dstate}: none of --impl {' '.join(args.impl)} takes "
                         f"this point ({'; '.join(dict.fromkeys(reasons))})")
    if args.check_args:
        print(f"benchmark: the arguments hold ({len(specs)} points x {len(args.impl)} implementations)")
        return 0
    try:  # a run directory that cannot take the file is found now, not after the last point
        results = ResultsFile("benchmark", check=True)
    except RunDirError as err:
        print(f"benchmark: {err}", file=sys.stderr)
        return 2
    extra = {"published_ratios": PUBLISHED_B300, "timing": TIMING,
             "headline": dict(zip(("seqlen", "dstate"), HEADLINE, strict=True)),
             "triton_tuning": {"mode": args.triton_tuning, "what": TRITON_TUNING[args.triton_tuning]},
             "tilegym_tuning": {"mode": args.tilegym_tuning, "what": TUNING_MODES[args.tilegym_tuning],
                                "store": str(tilegym_tuning.user_store_path()),
                                "shipped": str(tilegym_tuning.SHIPPED.relative_to(ROOT))}}
    if not HAS_CUDA:
        _progress(f"benchmark: {NO_CUDA_REASON}. It needs a GPU; nothing was measured.")
        for spec in specs:
            for name in args.impl:
                results.add(_not_run(spec, name, NO_CUDA_REASON))
        extra["length_scaling"] = scaling_not_measured(NO_CUDA_REASON)
        print(describe(results.write(**extra)), flush=True)
        return 0
    # A run stopped from outside (SIGTERM, Ctrl-C) still writes what it measured; the rest is not-run.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _interrupt)
    precompiled: dict[str, float] = {}
    ceilings: dict[str, float] | None = None
    done = 0
    tuning = tilegym_tuning.use(args.tilegym_tuning) if "tilegym" in args.impl else contextlib.nullcontext()
    with tuning:
        try:
            if args.tilegym_tuning == "tune" and "tilegym" in args.impl and args.compile_jobs:
                extra["tilegym_tuning"]["warm"] = warm_tilegym(points, jobs=args.compile_jobs)
            if args.compile_jobs:
                phase = precompile.first_calls(specs, args.impl, jobs=args.compile_jobs, tuning=args.tilegym_tuning,
                                               log=_progress)
                precompiled = phase.pop("seconds")
                extra["compile_phase"] = {**phase, "what": COMPILE_PHASE}
            ceilings = measure_ceilings(torch.device("cuda"))
            _progress(f"benchmark: copy {ceilings['copy_bandwidth_gbs']:.0f} GB/s, bf16 matmul "
                      f"{ceilings['bf16_matmul_tflops']:.0f} TFLOP/s; {len(specs)} points x {len(args.impl)} "
                      "implementations")
            _progress(f"benchmark: the points measured so far are kept in {results.partial_path} until the run ends")
            start = time.perf_counter()
            if "triton" in args.impl and args.triton_tuning == "headline":
                extra["triton_tuning"]["tuned_s"] = tune_triton_at_headline(sorted({s.dstate for s in specs}),
                                                                            torch.device("cuda"))
            for i, spec in enumerate(specs, 1):
                if args.budget_s is not None and time.perf_counter() - start > args.budget_s:
                    raise KeyboardInterrupt(f"the time budget of {args.budget_s:.0f} s is spent")
                variants = tuple(args.cutile_variants) if (spec.seqlen, spec.dstate) in args.ablation_points else ()
                for record in bench_point(spec, args.impl, ceilings, args.reps, args.triton_tuning, variants):
                    if record.id in precompiled:
                        record = record.with_measured(precompile_s=precompiled[record.id])
                    results.add(record)
                    _progress(f"[{i}/{len(specs)} {time.perf_counter() - start:6.0f}s] l={spec.seqlen:<7}"
                              f" n={spec.dstate:<4} {record.impl:<8} {_shown(record)}")
                done = i
                results.checkpoint(ceilings=ceilings, **extra)
                torch.cuda.empty_cache()
            if args.budget_s is not None and time.perf_counter() - start > args.budget_s:
                extra["length_scaling"] = scaling_not_measured(f"the time budget of {args.budget_s:.0f} s is spent")
            else:
                _progress("benchmark: the two longest lengths again, in the same rounds (length_scaling)")
                extra["length_scaling"] = length_scaling(specs, results.cases, args.reps)
                for row in extra["length_scaling"]["rows"]:
                    _progress(f"  n={row['dstate']:<4} {row['impl']:<8} "
                              + " ".join(f"{seqlen}: {ns:.3f} ns/token" for seqlen, ns in row["ns_per_token"].items())
                              + f"  long/short {row['long_over_short']:.4f}")
        except KeyboardInterrupt as stop:
            why = str(stop) or "interrupted"
            _progress(f"benchmark: {why} after {done} of {len(specs)} points; the rest is recorded as not-run")
            extra.setdefault("length_scaling", scaling_not_measured(f"not reached: {why}"))
            for spec in specs[done:]:
                for name in args.impl:
                    results.add(_not_run(spec, name, f"not reached: {why}"))
            if isinstance(stop, isolated.Interrupted):
                extra["interrupted"] = stop.signame
    path = results.write(ceilings=ceilings, **extra)
    # The same numbers as a pytest-benchmark file, beside raw/, for `pytest-benchmark compare`.
    pb = write_json_atomic(path.parent.parent / "pytest-benchmark.json", convert(json.loads(path.read_text())))
    print(describe(path), flush=True)
    _progress(f"benchmark: and the same as a pytest-benchmark file, {pb}")
    if "interrupted" in extra:  # stopped by a signal: the shell's convention, 128 + its number
        return 128 + signal.Signals[extra["interrupted"]].value
    return exit_code([c.as_dict() for c in results.cases])


def warm_tilegym(points: list[tuple[int, int]], *, jobs: int) -> dict[str, object]:
    """Before a ``tune`` run: every config of TileGym's search spaces compiled for the ``points`` that have no stored
    choice, in ``jobs`` processes at once (validation.bench.tilegym_tuning's ``warm``), so that its autotune, one
    process, finds them compiled and only times. A process that fails costs only time (the search compiles what it
    left); the count is recorded."""
    untuned = tilegym_tuning.untuned(points)
    if not untuned:
        _progress("benchmark: TileGym's choices are stored for every point; nothing to compile before it tunes")
        return {"untuned_points": 0, "shapes": "", "jobs": jobs, "failed_processes": 0, "seconds": 0.0}
    shapes = tilegym_tuning.warm_shapes(untuned)
    named = " ".join(f"{seqlen}x{dstate}" for seqlen, dstate in shapes)
    _progress(f"benchmark: compiling TileGym's search spaces at {named} in {jobs} processes before it tunes")
    start = time.perf_counter()
    failed = tilegym_tuning.warm(shapes, jobs=jobs)
    if failed:
        _progress(f"benchmark: {failed} of the {jobs} compile processes failed (their errors are above); TileGym's "
                  "search compiles what they left")
    return {"untuned_points": len(untuned), "shapes": named, "jobs": jobs, "failed_processes": failed,
            "seconds": round(time.perf_counter() - start, 1)}


def exit_code(cases: list[dict[str, object]]) -> int:
    """The run's policy (validation/summary.py): a failed gate or a crash of ours fails the benchmark; a peer's is
    a finding, recorded in the file and the summary."""
    return 1 if any(c["impl"] not in PEERS and c["status"] in FAILED for c in cases) else 0


if __name__ == "__main__":
    sys.exit(main())
