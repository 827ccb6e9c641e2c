"""Scratch, for a diagnostic run: where the walk's and chunk_out's time goes, by removal. Each diagnostic variant
takes one piece out of one kernel (its numerics are then wrong on purpose, and nothing checks them); all variants of
a point are timed in the same rounds (CUPTI, L2 flushed before every call), each kernel's median named by its place
in the launch plan. Needs the patch beside this file (``ChunkOutConfig.diag``, ``StatePassConfig.diag``).

    python3 diag_probe/diag_probe.py OUT.json [SEQLENxDSTATE ...]
"""
import dataclasses
import json
import sys

import torch

from kernels.cutile import tuning
from kernels.cutile.api import launch_names, ssd_fwd_cutile_variant
from reference import ProblemSpec
from reference.checks import SSDDims, domain_checked
from validation.bench.sweep import POINT
from validation.bench.timing import interleaved_kernel_us

CHUNK_OUT = {1: "no C·hᵀ (no state loads)", 2: "no decay (mask only, no exp2)", 3: "no L·X matmul",
             4: "no C·Bᵀ (no B loads)", 5: "no C·hᵀ and no C·Bᵀ", 6: "no decay and no L·X"}
WALK = {1: "no chunk-state stores", 2: "x unweighted"}

out = sys.argv[1]
points = [tuple(int(v) for v in p.split("x")) for p in sys.argv[2:]] or [(4096, 128), (4096, 64), (4096, 512),
                                                                         (8192, 128), (16384, 128)]
major, minor = torch.cuda.get_device_capability()
arch = f"sm_{major}{minor}"
rows = []
for seqlen, dstate in points:
    spec = ProblemSpec(seqlen=seqlen, dstate=dstate, **POINT)
    inputs = spec.make_inputs("cuda")
    args = inputs.as_args()
    dims = SSDDims(spec.batch, seqlen, spec.nheads, spec.headdim, spec.ngroups, dstate)
    base = tuning.choose(arch, dims, torch.bfloat16, spec.chunk_size)
    kind = tuning.state_pass_kind(arch, dims, torch.bfloat16, spec.chunk_size, False)
    cands = [("default", base)]
    cands += [(f"chunk_out: {why}", dataclasses.replace(base, chunk_out=dataclasses.replace(base.chunk_out, diag=k)))
              for k, why in CHUNK_OUT.items()]
    if kind == "serial":
        cands += [(f"walk: {why}", dataclasses.replace(base, state_pass=dataclasses.replace(base.state_pass, diag=k)))
                  for k, why in WALK.items()]
    fns, plans = [], []
    for name, cfgs in cands:
        f = ssd_fwd_cutile_variant("default", configs=cfgs)
        f(*args)  # compiles
        fns.append(lambda f=f: f(*args))
        plans.append(launch_names(*args, chunk_size=spec.chunk_size, arch=arch, configs=cfgs))
    torch.cuda.synchronize()
    # The domain check (dt >= 0, A <= 0) is timed apart by the benchmark: skipped here as it is there.
    with domain_checked(inputs.dt, inputs.A, who="diag_probe"):
        times = interleaved_kernel_us(fns, reps=20, device=torch.device("cuda"), launches=plans)
    for (name, _), t in zip(cands, times):
        row = {"seqlen": seqlen, "dstate": dstate, "state_pass": kind, "candidate": name,
               "kernel_us": t.kernel_us.median, "p10": t.kernel_us._quantile(0.1), "p90": t.kernel_us._quantile(0.9),
               "per_kernel_us": t.per_kernel_us}
        rows.append(row)
        per = "  ".join(f"{k.strip('_').replace('_kernel', '')} {v:.1f}" for k, v in t.per_kernel_us.items())
        print(f"{seqlen:6d} x {dstate:3d}  {name:42s} {t.kernel_us.median:8.1f} us   {per}", flush=True)
json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, open(out, "w"), indent=1)
