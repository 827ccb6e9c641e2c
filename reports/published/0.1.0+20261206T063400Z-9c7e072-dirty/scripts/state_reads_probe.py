"""Diagnostic probe (wrong results on purpose when patched): chunk_out's kernel time with and without its odd chunks
reading the state of the chunk before (so that, with the programs of consecutive chunks running together, about half
the chunk-state reads reach HBM). Times the default forward and each kernel under CUPTI, L2 flushed before each rep;
no gate. Run once on the tree as is and once after patch_state_reads.sh; each run writes OUT.json."""
import json
import sys

import torch

from kernels.cutile.api import launch_names, ssd_fwd_cutile_variant
from reference import ProblemSpec
from reference.checks import domain_checked
from validation.bench.sweep import POINT
from validation.bench.timing import cupti_kernel_us, per_kernel_us

out, label = sys.argv[1], sys.argv[2]
device = torch.device("cuda")
rows = []
for seqlen, dstate in ((4096, 512), (8192, 512), (16384, 512), (4096, 128), (16384, 128)):
    spec = ProblemSpec(seqlen=seqlen, dstate=dstate, **POINT)
    inputs = spec.make_inputs("cuda")
    fn = ssd_fwd_cutile_variant("default")

    def call():
        return fn(*inputs.as_args(), chunk_size=spec.chunk_size)

    call()
    torch.cuda.synchronize()
    major, minor = torch.cuda.get_device_capability()
    names = launch_names(*inputs.as_args(), chunk_size=spec.chunk_size, arch=f"sm_{major}{minor}", variant="default")
    with domain_checked(inputs.dt, inputs.A, who="state_reads_probe"):  # kernel time, no check (explore's way)
        k = cupti_kernel_us(call, reps=20, device=device).as_dict()
        pk = per_kernel_us(call, reps=20, device=device, launches=names)
    rows.append({"label": label, "seqlen": seqlen, "dstate": dstate, "kernel_us": k, "per_kernel_us": pk})
    print(f"{label:8s} {seqlen:6d} x {dstate:3d} {k['median']:8.1f} us "
          + " ".join(f"{n.strip('_')[:12]}={v:.1f}" for n, v in pk.items()), flush=True)
json.dump({"rows": rows, "gpu": torch.cuda.get_device_name()}, open(out, "w"), indent=1)
