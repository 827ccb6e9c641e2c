"""Throwaway diagnostic (run from the project root with overlap.patch applied): where the one-launch kernel's time
goes. Writes three modified copies of kernels/cutile/overlap.py beside itself (cuTile compiles from source files):
no wait before C·hᵀ, walks only (the grid cut to the walk programs), and walks only with a single count at the end;
plus no waits with a single count. diagnose-1.log ran the first three at 4K x 64, 4K x 128 and 16K x 128; diagnose-2.log
all five at 4K x 64 and 16K x 128."""
import importlib
import sys
from pathlib import Path

import torch

import kernels.cutile.api as api
from kernels.cutile import overlap as real
from kernels.cutile.api import ssd_fwd_cutile_variant
from reference import ProblemSpec
from validation.bench.timing import per_kernel_us

SRC = Path("kernels/cutile/overlap.py").read_text()
WAIT = "    _wait(flags, b, head, chunk // FLAG_CHUNKS, need)\n"
GRID = "    grid = (walkers + nchunks * batch * nheads * (headdim // out_cfg.block_p),)"
COUNT = "walk_cfg.packed_weights, out_cfg.block_p, out_cfg.block_n, out_cfg.latency, D is not None, flag_chunks)"
ONE_COUNT = COUNT.replace("flag_chunks)", "1 << 20)")
EDITS = {
    "no-wait": ((WAIT, "    pass\n"),),
    "walks-only": ((GRID, "    grid = (walkers,)"),),
    "walks-only-1-release": ((GRID, "    grid = (walkers,)"), (COUNT, ONE_COUNT)),
    "no-wait-1-release": ((WAIT, "    pass\n"), (COUNT, ONE_COUNT)),
}
here = Path(__file__).parent
sys.path.insert(0, str(here))
modules = {}
for name, edits in EDITS.items():
    text = SRC
    for old, new in edits:
        assert old in text, (name, old)
        text = text.replace(old, new)
    stem = "scratch_ov_" + name.replace("-", "_")
    (here / f"{stem}.py").write_text(text)
    modules[name] = importlib.import_module(stem)

ov, base = ssd_fwd_cutile_variant("overlapped"), ssd_fwd_cutile_variant("default")
dev = torch.device("cuda")
for seqlen, dstate in ((4096, 64), (16384, 128)):
    spec = ProblemSpec(batch=4, seqlen=seqlen, nheads=8, headdim=64, ngroups=1, dstate=dstate, chunk_size=128)
    a = spec.make_inputs("cuda").as_args()
    row = {"default": per_kernel_us(lambda: base(*a, chunk_size=128), reps=10, device=dev)}
    for name, mod in (("overlapped", real), *modules.items()):
        api.overlap = mod.overlap
        row[name] = per_kernel_us(lambda: ov(*a, chunk_size=128), reps=10, device=dev)
    api.overlap = real.overlap
    print(seqlen, dstate, {k: {n[:14]: round(t, 1) for n, t in v.items()} for k, v in row.items()}, flush=True)
