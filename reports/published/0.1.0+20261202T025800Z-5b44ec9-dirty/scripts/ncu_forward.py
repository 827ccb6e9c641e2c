"""Scratch: the default forward at one point, twice (the first compiles), for ncu."""
import os
import torch
from kernels.cutile.api import ssd_fwd_cutile
from reference import ProblemSpec
from validation.bench.sweep import POINT
spec = ProblemSpec(seqlen=int(os.environ.get("SEQLEN", "16384")), dstate=int(os.environ.get("DSTATE", "128")), **POINT)
args = spec.make_inputs("cuda").as_args()
for _ in range(2):
    ssd_fwd_cutile(*args)
torch.cuda.synchronize()
