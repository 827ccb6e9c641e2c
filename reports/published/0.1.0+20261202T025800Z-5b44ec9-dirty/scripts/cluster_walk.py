"""Scratch: which num_ctas walks run on this GPU (each case in its own process: a fault kills the context)."""
import dataclasses, subprocess, sys
import torch

CASES = [
    (128, dict(block_n=32, num_ctas=2)),
    (128, dict(block_n=32, num_ctas=2, unroll=1, latency=4, scalar_latency=None)),
    (128, dict(block_n=32, num_ctas=2, unroll=1, latency=4, scalar_latency=4)),
    (128, dict(block_n=16, num_ctas=2, unroll=1, latency=4, scalar_latency=None)),
    (128, dict(block_n=32, num_ctas=1)),
    (256, dict(block_n=128, num_ctas=2)),
    (256, dict(block_n=128, num_ctas=2, scalar_latency=None)),
    (64, dict(block_n=16, num_ctas=2, unroll=1, latency=6)),
]

if len(sys.argv) == 1:
    for i in range(len(CASES)):
        r = subprocess.run([sys.executable, __file__, str(i)], capture_output=True, text=True)
        tail = [l for l in (r.stdout + r.stderr).splitlines() if "arn" not in l][-2:]
        print(i, CASES[i], "rc", r.returncode, " | ".join(tail), flush=True)
    sys.exit(0)

from kernels.cutile import tuning
from kernels.cutile.api import ssd_fwd_cutile_variant
from reference import ProblemSpec, SSDDims
from validation.bench.sweep import POINT
dstate, over = CASES[int(sys.argv[1])]
spec = ProblemSpec(seqlen=4096, dstate=dstate, **POINT)
inp = spec.make_inputs("cuda")
args = inp.as_args()
base = tuning.choose("sm_90", SSDDims(*args[0].shape, *args[3].shape[2:]), args[0].dtype, 128)
cfgs = dataclasses.replace(base, state_pass=dataclasses.replace(base.state_pass, **over))
y0, s0 = ssd_fwd_cutile_variant("serial-state")(*args)
y1, s1 = ssd_fwd_cutile_variant("serial-state", configs=cfgs)(*args)
torch.cuda.synchronize()
print("ok max|dy|", (y1.float() - y0.float()).abs().max().item(), "max|dstate|", (s1 - s0).abs().max().item())
