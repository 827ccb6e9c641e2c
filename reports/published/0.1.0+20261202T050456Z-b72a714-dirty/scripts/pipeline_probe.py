"""Probe: the serial walk cut into K parts (each from the previous part's end state), chunk_out of part i on a second
stream once walk part i is done, so that chunk_out of the early chunks runs beside the walk of the later ones.
Run from the project root on the GPU: python pipeline_probe.py OUT.json. Timing as the benchmark (L2 flushed before
each rep): the sum of kernel durations (the benchmark's kernel time), their union (the GPU time the call covers)
and the event span on the first stream."""
import json
import sys

import cuda.tile as ct
import torch

import kernels.cutile.state_pass as sp_mod
from kernels.cutile.api import plan_forward
from reference import ProblemSpec
from validation.bench.sweep import POINT

flush = torch.empty(512 * 2**20 // 4, dtype=torch.int32, device="cuda")


def timed(fn, s0, reps=20):
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    spans = []
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            flush.bitwise_not_()
            torch.cuda.synchronize()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record(s0)
            fn()
            b.record(s0)
            b.synchronize()
            spans.append(a.elapsed_time(b) * 1e3)
    evs = sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA),
                 key=lambda e: e.time_range.start)
    reps_ev, cur = [], None
    for e in evs:
        if "bitwise_not" in e.name:
            cur = []
            reps_ev.append(cur)
            continue
        if cur is not None:
            cur.append((e.name.split("_Kt")[0][:24], e.time_range.start, e.time_range.end))
    sums, unions, per = [], [], {}
    for rep in reps_ev:
        if not rep:
            continue
        sums.append(sum(e - s for _, s, e in rep))
        iv = sorted((s, e) for _, s, e in rep)
        tot, cs, ce = 0, iv[0][0], iv[0][1]
        for s, e in iv[1:]:
            if s > ce:
                tot += ce - cs
                cs, ce = s, e
            else:
                ce = max(ce, e)
        tot += ce - cs
        unions.append(tot)
        for nm, s, e in rep:
            per.setdefault(nm, []).append(e - s)
    med = lambda v: sorted(v)[len(v) // 2]
    return {"span_us": med(spans), "sum_us": med(sums), "union_us": med(unions),
            "per_kernel_sum_us": {k: med(v) * len(v) / len(sums) for k, v in per.items()}}


def main(out):
    rows = []
    s0, s1 = torch.cuda.current_stream(), torch.cuda.Stream()
    orig = sp_mod.int32_parts
    for seqlen, dstate in [(16384, 128), (16384, 64), (16384, 512), (16384, 256), (4096, 128), (65536, 128),
                           (65536, 512)]:
        spec = ProblemSpec(seqlen=seqlen, dstate=dstate, **POINT)
        x, dt, A, B, C, D, h0 = spec.make_inputs("cuda").as_args()
        base, y0, f0 = plan_forward(x, dt, A, B, C, D, h0, chunk_size=128, arch="sm_90")

        def run_base():
            for la in base:
                ct.launch(s0, la.grid, la.kernel, la.args)
        row = {"seqlen": seqlen, "dstate": dstate, "K": 1, **timed(run_base, s0)}
        rows.append(row)
        print(seqlen, dstate, "K1", {k: round(v, 1) for k, v in row.items() if k in ("span_us", "sum_us", "union_us")}, flush=True)
        for K in (2, 4, 8, 16):
            nchunks = -(-seqlen // 128)
            if K > nchunks // 2:
                continue
            size = nchunks // K
            sp_mod.int32_parts = lambda n, e, K=K, size=size: [(i * size, n if i == K - 1 else (i + 1) * size)
                                                               for i in range(K)]
            try:
                launches, y, f = plan_forward(x, dt, A, B, C, D, h0, chunk_size=128, arch="sm_90")
            finally:
                sp_mod.int32_parts = orig
            names = [la.kernel._pyfunc.__name__ for la in launches]
            walks = [la for la in launches if la.kernel._pyfunc.__name__ == "_state_pass_kernel"]
            outs = [la for la in launches if la.kernel._pyfunc.__name__ == "_chunk_out_kernel"]
            assert len(walks) == K and len(outs) == K and names[0] == "_chunk_cumsum_kernel", names
            events = [torch.cuda.Event() for _ in range(K + 1)]

            def run_serial():
                for la in launches:
                    ct.launch(s0, la.grid, la.kernel, la.args)

            def run_pipe():
                ct.launch(s0, launches[0].grid, launches[0].kernel, launches[0].args)
                for i in range(K):
                    ct.launch(s0, walks[i].grid, walks[i].kernel, walks[i].args)
                    events[i].record(s0)
                    s1.wait_event(events[i])
                    ct.launch(s1, outs[i].grid, outs[i].kernel, outs[i].args)
                events[K].record(s1)
                s0.wait_event(events[K])
            for mode, fn in (("one-stream", run_serial), ("two-streams", run_pipe)):
                y.zero_()
                fn()
                torch.cuda.synchronize()
                dy = (y.float() - y0.float()).abs().max().item()
                df = (f - f0).abs().max().item()
                row = {"seqlen": seqlen, "dstate": dstate, "K": K, "mode": mode, "y_maxdiff_vs_K1": dy,
                       "state_maxdiff_vs_K1": df, **timed(fn, s0)}
                rows.append(row)
                print(seqlen, dstate, f"K{K}", mode, f"dy={dy:.2e} df={df:.2e}",
                      {k: round(v, 1) for k, v in row.items() if k.endswith("_us") and k != "per_kernel_sum_us"},
                      flush=True)
        with open(out, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
