"""Scratch (not committed): where the overlapped kernel's time goes."""
import torch
import kernels.cutile.api as api
import scratch_ov_nowait, scratch_ov_walkonly, scratch_ov_walkonly_rare, scratch_ov_nowait_rare
from kernels.cutile import overlap as real
from kernels.cutile.api import ssd_fwd_cutile_variant
from reference import ProblemSpec
from validation.bench.timing import cupti_kernel_us, per_kernel_us

ov, base = ssd_fwd_cutile_variant("overlapped"), ssd_fwd_cutile_variant("default")
dev = torch.device("cuda")
for seqlen, dstate in ((4096, 64), (16384, 128)):
    spec = ProblemSpec(batch=4, seqlen=seqlen, nheads=8, headdim=64, ngroups=1, dstate=dstate, chunk_size=128)
    a = spec.make_inputs("cuda").as_args()
    row = {}
    row["default"] = per_kernel_us(lambda: base(*a, chunk_size=128), reps=10, device=dev)
    for name, mod in (("overlapped", real), ("no-wait", scratch_ov_nowait), ("walkers-only", scratch_ov_walkonly), ("walkers-only-1-release", scratch_ov_walkonly_rare), ("no-wait-1-release", scratch_ov_nowait_rare)):
        api.overlap = mod.overlap
        row[name] = per_kernel_us(lambda: ov(*a, chunk_size=128), reps=10, device=dev)
    api.overlap = real.overlap
    print(seqlen, dstate, {k: {n[:14]: round(t, 1) for n, t in v.items()} for k, v in row.items()}, flush=True)
