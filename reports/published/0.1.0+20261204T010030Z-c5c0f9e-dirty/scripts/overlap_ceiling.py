"""Diagnostic (not a product file): how much GPU time the walk and chunk_out would cover if chunk_out's programs ran
beside the walk's, with no hand-over at all (its y is garbage in the concurrent mode; only times are taken).

    python -m validation.bench._overlap_ceiling OUT.json 16384x128 4096x128 ...

(It ran as validation/bench/_overlap_ceiling.py, an untracked file in the tree of c5c0f9e; copy it there to rerun.)

Per shape: the default plan on one stream, and the same launches with chunk_out on a second stream that waits only for
the cumsum (so that it starts with the walk). Each rep: the union of its GPU activities' intervals (the time the call
covers), and the sum of their durations; L2 flushed before each rep.
"""
from __future__ import annotations

import json
import statistics
import sys

import cuda.tile as ct
import torch
from torch.profiler import ProfilerActivity, profile

from kernels.cutile.api import plan_forward
from reference import ProblemSpec
from validation.bench.sweep import POINT


def _union(intervals):
    total, end = 0.0, None
    for s, e in sorted(intervals):
        if end is None or s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total


def _measure(fn, reps):
    flush = torch.empty(512 * 2**20 // 4, dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            flush.bitwise_not_()
            torch.cuda.synchronize()
            fn()
            torch.cuda.synchronize()
        flush.bitwise_not_()
        torch.cuda.synchronize()
    ev = sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA),
                key=lambda e: e.time_range.start)
    reps_seen, cur = [], None
    for e in ev:
        if "bitwise_not" in e.name:
            if cur:
                reps_seen.append(cur)
            cur = []
        elif cur is not None:
            cur.append((e.name.split("_Kt")[0][:40], e.time_range.start, e.time_range.end))
    union = [_union([(s, e) for _, s, e in r]) for r in reps_seen]
    total = [sum(e - s for _, s, e in r) for r in reps_seen]
    names = sorted({n for r in reps_seen for n, _, _ in r})
    per = {n: statistics.median(sum(e - s for m, s, e in r if m == n) for r in reps_seen) for n in names}
    return {"union_us": statistics.median(union), "sum_us": statistics.median(total), "per_kernel_us": per}


def main(argv):
    out, shapes = argv[0], [tuple(int(v) for v in a.split("x")) for a in argv[1:]]
    rows = []
    major, minor = torch.cuda.get_device_capability()
    for seqlen, dstate in shapes:
        spec = ProblemSpec(seqlen=seqlen, dstate=dstate, **POINT)
        inputs = spec.make_inputs("cuda")
        launches, y, _ = plan_forward(*inputs.as_args(), chunk_size=spec.chunk_size, arch=f"sm_{major}{minor}")
        names = [la.kernel._pyfunc.__name__ for la in launches]
        main_s, side = torch.cuda.current_stream(), torch.cuda.Stream()

        def serial():
            for la in launches:
                ct.launch(main_s, la.grid, la.kernel, la.args)

        def concurrent():
            ct.launch(main_s, launches[0].grid, launches[0].kernel, launches[0].args)
            side.wait_stream(main_s)
            for la in launches[1:-1]:
                ct.launch(main_s, la.grid, la.kernel, la.args)
            ct.launch(side, launches[-1].grid, launches[-1].kernel, launches[-1].args)
            main_s.wait_stream(side)

        def out_only():
            ct.launch(main_s, launches[-1].grid, launches[-1].kernel, launches[-1].args)

        serial()
        torch.cuda.synchronize()
        y_ref = y.clone()
        row = {"seqlen": seqlen, "dstate": dstate, "launches": names}
        for tag, fn in (("serial", serial), ("concurrent", concurrent), ("chunk_out_only", out_only),
                        ("serial_again", serial), ("concurrent_again", concurrent)):
            fn()
            torch.cuda.synchronize()
            row[tag] = _measure(fn, 20)
            print(seqlen, dstate, tag, json.dumps(row[tag]), flush=True)
        serial()
        torch.cuda.synchronize()
        row["serial_bitwise_same"] = bool(torch.equal(y, y_ref))
        rows.append(row)
        with open(out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
