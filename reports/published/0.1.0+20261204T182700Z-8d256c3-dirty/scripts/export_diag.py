"""Scratch, on the CPU: export every diagnostic variant's walk and chunk_out to an sm_90 cubin (do they compile,
and do they spill)."""
import dataclasses, glob, inspect, os, subprocess, sys
os.environ.setdefault("CUDA_TILE_CACHE_DIR", "off")
import cuda.tile as ct
import torch
from cuda.tile.compilation import CallingConvention, KernelSignature, export_kernel
from kernels.cutile import export as ex, tuning
from kernels.cutile.api import plan_forward

tool = glob.glob(os.path.join(sys.prefix, "lib/python*/site-packages/nvidia/cu*/bin/cuobjdump"))[0]
for seqlen, dstate in [(4096, 128), (4096, 64), (4096, 512)]:
    spec = ex._spec(torch.bfloat16, 128, 64, dstate, D=True, h0=False, batch=4, seqlen=seqlen, ngroups=1)
    base = tuning.choose("sm_90", spec.dims, torch.bfloat16, 128)
    for what, k in [("chunk_out", k) for k in range(7) if dstate != 128] + [("state_pass", k) for k in (1, 2)]:
        field = "chunk_out" if what == "chunk_out" else "state_pass"
        cfgs = dataclasses.replace(base, **{field: dataclasses.replace(getattr(base, field), diag=k)})
        planned, _, _ = plan_forward(*ex.meta_inputs(spec), chunk_size=128, arch="sm_90", configs=cfgs)
        for launch in planned:
            name = launch.kernel._pyfunc.__name__
            if what not in name:
                continue
            names = list(inspect.signature(launch.kernel._pyfunc).parameters)
            params = [ex._constraint(a, ct.int32) for a in launch.args]
            sig = KernelSignature(params, CallingConvention.cutile_python_v1()).with_mangled_symbol(name)
            path = f"/tmp/diag-{seqlen}-{dstate}-{what}-{k}.cubin"
            export_kernel(launch.kernel, [sig], path, gpu_code="sm_90", output_format="cubin")
            sass = subprocess.run([tool, "-sass", path], capture_output=True, text=True).stdout
            print(seqlen, dstate, what, k, "instructions", sass.count(" ;"), "STL", sass.count("STL"), flush=True)
