"""Scratch (not committed): the overlapped variant against the float64 oracle on the matrix's cases, and its
determinism over repeated calls."""
import sys, time
import torch
from kernels.alloc import poisoned
from kernels.cutile.api import ssd_fwd_cutile_variant
from validation.gpu import judge, oracle
from validation.matrix import correctness_cases, stability_cases
from reference import ProblemSpec

variant = sys.argv[1] if len(sys.argv) > 1 else "overlapped"
fn, base = ssd_fwd_cutile_variant(variant), ssd_fwd_cutile_variant("default")
bad = 0
for tag, spec in correctness_cases() + stability_cases():
    if spec.batch * spec.seqlen * spec.nheads * spec.headdim > 2**26 or spec.dtype == 'fp32' or spec.dstate > 128:
        continue
    try:
        inputs = spec.make_inputs("cuda")
        y_ref, s_ref, _ = oracle(spec, inputs)
    except Exception as e:  # noqa: BLE001  scratch
        print("SKIP", tag, type(e).__name__, str(e)[:80]); continue
    out = []
    for f in (fn, base):
        try:
            with poisoned():
                y, s = f(*inputs.as_args(), chunk_size=spec.chunk_size)
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001  scratch
            out.append(f"refused {type(e).__name__}: {str(e)[:60]}"); continue
        from validation.compare import errors
        ey, es = errors(y, y_ref), errors(s, s_ref)
        out.append((ey.rel_l2, ey.max_abs_over_peak, es.rel_l2, es.nonfinite + ey.nonfinite - ey.nonfinite_ref - es.nonfinite_ref))
    flag = ""
    if isinstance(out[0], tuple) and isinstance(out[1], tuple):
        a, b = out
        if not (a[0] <= 1.5 * b[0] + 1e-6 and a[2] <= 1.5 * b[2] + 1e-6 and a[3] <= b[3]):
            flag = "WORSE"; bad += 1
    elif out[0] != out[1]:
        flag = "DIFF"
        bad += isinstance(out[1], tuple)
    print(f"{flag:5s} {tag:40s} {spec.dtype} L{spec.seqlen} n{spec.dstate} c{spec.chunk_size} ov={out[0]} def={out[1]}", flush=True)
print("cases worse:", bad, flush=True)
for seqlen, dstate in ((16384, 128), (4096, 64), (8192, 512), (1000, 256)):
    spec = ProblemSpec(batch=4, seqlen=seqlen, nheads=8, headdim=64, ngroups=1, dstate=dstate, chunk_size=128)
    inputs = spec.make_inputs("cuda")
    y0, s0 = fn(*inputs.as_args(), chunk_size=128)
    diff = 0
    for _ in range(40):
        y, s = fn(*inputs.as_args(), chunk_size=128)
        diff += int(not (torch.equal(y, y0) and torch.equal(s, s0)))
    yd, sd = base(*inputs.as_args(), chunk_size=128)
    print(f"determinism L{seqlen} n{dstate}: {diff}/40 runs differ; vs default max|dy| {(y0.float()-yd.float()).abs().max().item():.3e}", flush=True)
