"""Explore our cuTile forward's tile choices on a GPU: each candidate gated on float64, then timed.

    python -m validation.bench.explore_cutile OUT.json [--seqlen 16384] [--dstate 128 512]

Varies one stage's configuration at a time around the chooser's (``kernels.cutile.tuning``), at the
benchmark's shape (batch 4, 8 heads, headdim 64, 1 group, chunk 128, bf16). For each candidate: the
correctness gate against the float64 chunked reference with the tolerance table, then CUPTI kernel time
with an L2 flush before every rep, and the time of each kernel of the forward. Data for choosing
defaults; the benchmark, not this, measures what the suite claims.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import sys
from collections import defaultdict
from pathlib import Path

import cuda.tile as ct
import torch

from kernels.cutile import tuning
from reference import ProblemSpec, SSDDims, ssd_chunked
from validation.bench.run import POINT
from validation.bench.timing import cupti_kernel_us
from validation.gpu import judge
from validation.provenance import environment
from validation.results import write_json_atomic


def _per_kernel_us(fn, reps: int) -> dict[str, float]:
    """Mean µs per call of each kernel name (no L2 flush: a breakdown, not the headline number)."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    out: dict[str, float] = defaultdict(float)
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            out[e.name[:60]] += (e.time_range.end - e.time_range.start) / reps
    return dict(sorted(out.items()))


def _candidates(spec: ProblemSpec, dtype: torch.dtype):
    dims = SSDDims(spec.batch, spec.seqlen, spec.nheads, spec.headdim, spec.ngroups, spec.dstate)
    arch = "sm_90"
    base_out = tuning.chunk_out_config(arch, dims, dtype, spec.chunk_size)
    base_state = tuning.state_pass_config(arch, dims, dtype, spec.chunk_size)
    yield "default", base_state, base_out
    for block_m in (64, 128):
        for block_n in (32, 64, 128):
            for occupancy in (None, 2):
                if block_n > spec.dstate:
                    continue
                cand = dataclasses.replace(base_out, block_m=block_m, block_n=block_n, occupancy=occupancy)
                if cand != base_out:
                    yield f"chunk_out m{block_m} n{block_n} occ{occupancy}", base_state, cand
    for block_n in (32, 64, 128):
        for latency in (2, 8):
            cand = dataclasses.replace(base_state, block_n=min(block_n, spec.dstate), latency=latency)
            if cand != base_state:
                yield f"state_pass n{cand.block_n} lat{latency}", cand, base_out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--seqlen", nargs="+", type=int, default=[16384])
    parser.add_argument("--dstate", nargs="+", type=int, default=[128, 512])
    parser.add_argument("--reps", type=int, default=10)
    args = parser.parse_args(argv)
    from kernels.cutile import ssd_fwd_cutile

    chosen_out, chosen_state = tuning.chunk_out_config, tuning.state_pass_config
    rows = []
    for seqlen in args.seqlen:
        for dstate in args.dstate:
            spec = ProblemSpec(seqlen=seqlen, dstate=dstate, **POINT)
            inputs = spec.make_inputs("cuda")
            y_ref, state_ref = ssd_chunked(*inputs.as_args(), chunk_size=32)
            for name, state_cfg, out_cfg in list(_candidates(spec, inputs.x.dtype)):
                tuning.state_pass_config = lambda *a, cfg=state_cfg: cfg
                tuning.chunk_out_config = lambda *a, cfg=out_cfg: cfg
                try:
                    call = functools.partial(ssd_fwd_cutile, *inputs.as_args(), chunk_size=spec.chunk_size)
                    try:
                        y, state = call()
                    except ct.TileError as err:  # a candidate the compiler refuses is a result, not a stop
                        rows.append({"seqlen": seqlen, "dstate": dstate, "candidate": name,
                                     "gate": f"did not compile: {type(err).__name__}: {str(err)[:300]}"})
                        print(f"l={seqlen} n={dstate} {name:<32} did not compile", file=sys.stderr, flush=True)
                        continue
                    verdict = judge("cutile", "bf16", "bf16", y, state, y_ref, state_ref)
                    row = {"seqlen": seqlen, "dstate": dstate, "candidate": name,
                           "state_pass": dataclasses.asdict(state_cfg), "chunk_out": dataclasses.asdict(out_cfg),
                           "gate": verdict.failures() or "pass"}
                    if not verdict.failures():
                        row["kernel_us"] = cupti_kernel_us(call, reps=args.reps, device=torch.device("cuda")).as_dict()
                        row["per_kernel_us"] = _per_kernel_us(call, args.reps)
                finally:
                    tuning.chunk_out_config, tuning.state_pass_config = chosen_out, chosen_state
                rows.append(row)
                shown = f"{row['kernel_us']['median']:8.1f} us" if "kernel_us" in row else f"gate: {row['gate']}"
                print(f"l={seqlen} n={dstate} {name:<32} {shown}", file=sys.stderr, flush=True)
            # after every shape, so a run stopped from outside keeps what it measured
            write_json_atomic(Path(args.out), {"environment": environment([0]), "rows": rows}, overwrite=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
