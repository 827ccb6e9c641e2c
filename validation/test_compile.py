"""Ahead-of-time compile check of our cuTile forward (CPU only, no GPU).

Every kernel of every specialization class that ``kernels.cutile.export`` lists is exported to a
cubin for sm_90, sm_100 and sm_103 (and, for sm_90, the kernels of the opt-in variants that the default
never launches, ``VARIANT_CLASSES``); the bf16 matmul stages must run on each architecture's tensor cores
(HGMMA in the sm_90 SASS, tcgen05's UTCHMMA in sm_100's and sm_103's), and each kernel must fit the programs an SM
its configuration asks for. The exports run in a process pool (the cuTile front end holds the
GIL), all started at once per session, and each test reads its own result.
"""

import functools
import glob
import importlib.util
import inspect
import os
import re
import subprocess
from collections import Counter
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

import pytest

from validation import isolated

pytestmark = pytest.mark.compile

ARCHS = ("sm_90", "sm_100", "sm_103")


def _require_cuda_tile() -> None:
    if importlib.util.find_spec("cuda.tile") is None:
        pytest.fail("cuda.tile is not installed: the compile check needs the 'compile' dependency group "
                    "(cuda-tile, nvidia-cuda-tileiras, nvidia-cuda-nvcc, nvidia-nvvm, cuda-toolkit[cuobjdump])",
                    pytrace=False)


def _cases() -> list[tuple[str, object, str, int, str]]:
    """(arch, class, kernel name, which, variant) for every distinct launch, by name and rank among the class's
    launches of that kernel (a class may launch one kernel under two signatures), so collection needs no compiler:
    the default's launches, then those of the opt-in variants (``VARIANT_CLASSES``) that the default does not
    compile already."""
    if importlib.util.find_spec("cuda.tile") is None:
        return [("none", None, "cuda.tile missing", 0, "default")]
    from kernels.cutile.export import CLASSES_BY_ARCH, VARIANT_CLASSES, launches
    from kernels.cutile.tuning import VARIANTS

    cases, seen, symbols = [], Counter(), set()
    for arch in ARCHS:
        for spec, kernel, signature in launches(arch, CLASSES_BY_ARCH[arch]):
            key = (arch, spec.name, kernel._pyfunc.__name__)
            cases.append((arch, spec, kernel._pyfunc.__name__, seen[key], "default"))
            seen[key] += 1
            symbols.add((arch, signature.symbol))
        for spec, variant in VARIANT_CLASSES.get(arch, ()):
            ranks = Counter()
            for _, kernel, signature in launches(arch, (spec,), VARIANTS[variant]):
                name = kernel._pyfunc.__name__
                if (arch, signature.symbol) not in symbols:
                    symbols.add((arch, signature.symbol))
                    cases.append((arch, spec, name, ranks[name], variant))
                ranks[name] += 1
    return cases


_CASES = _cases()


def _case_id(case: tuple[str, object, str, int, str]) -> str:
    arch, spec, kernel_name, which, variant = case
    stage = kernel_name.removeprefix("_").removesuffix("_kernel")
    return (f"{arch}-{getattr(spec, 'name', 'none')}-{stage}{f'-{which + 1}' if which else ''}"
            f"{'' if variant == 'default' else f'-{variant}'}")


def _launch(arch: str, spec, kernel_name: str, which: int, variant: str, configs=None):
    """(kernel object, signature) of one case: the ``which``-th launch of ``kernel_name`` in the class's plan
    (``configs``: None, the choosers')."""
    from kernels.cutile.export import launches
    from kernels.cutile.tuning import VARIANTS

    return [(k, s) for _, k, s in launches(arch, (spec,), VARIANTS[variant], configs)
            if k._pyfunc.__name__ == kernel_name][which]


def _export(arch: str, spec, kernel_name: str, which: int, variant: str, path: Path, configs=None) -> Path:
    """Export one kernel of one class (in a worker process: kernel objects do not pickle)."""
    from cuda.tile.compilation import export_kernel

    kernel, signature = _launch(arch, spec, kernel_name, which, variant, configs)
    export_kernel(kernel, [signature], str(path), gpu_code=arch, output_format="cubin")
    return path


@pytest.fixture(scope="session")
def cubins(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str, str, int], Future]:
    """Start every export at once; maps (arch, class name, kernel name, which) to a future of the cubin path."""
    _require_cuda_tile()
    out = tmp_path_factory.mktemp("cubins")
    # Workers start with the disk cache off, so that every export runs the compiler instead of
    # returning a cubin cached by an earlier run (cuda.tile reads this variable on import).
    with isolated.Pool(os.cpu_count() or 2, env={"CUDA_TILE_CACHE_DIR": "off"}) as pool:
        futures = {}
        for arch, spec, kernel_name, which, variant in _CASES:
            path = out / f"{arch}-{spec.name}-{kernel_name}-{which}-{variant}.cubin"
            futures[(arch, spec.name, kernel_name, which, variant)] = pool.submit(_export, arch, spec, kernel_name,
                                                                                 which, variant, path)
        yield futures


@pytest.mark.parametrize("case", _CASES, ids=[_case_id(c) for c in _CASES])
def test_kernel_exports_to_cubin(case, cubins) -> None:
    arch, spec, kernel_name, which, variant = case
    path: Path = cubins[(arch, spec.name, kernel_name, which, variant)].result()
    assert path.stat().st_size > 0, f"{kernel_name} for {arch} ({spec.name}) exported an empty cubin"


def _cuobjdump() -> str:
    """cuobjdump from the nvidia toolkit wheels (the ``nvidia`` namespace package), not from PATH."""
    import nvidia

    for root in nvidia.__path__:
        found = glob.glob(os.path.join(root, "**", "bin", "cuobjdump"), recursive=True)
        if found:
            return found[0]
    pytest.fail(f"cuobjdump not found under the nvidia package ({list(nvidia.__path__)}); "
                "install cuda-toolkit[cuobjdump] from the compile group", pytrace=False)


@functools.cache
def _dump(path: Path, what: str) -> str:
    """cuobjdump's ``what`` (-sass, -res-usage, -elf) of one cubin, read once however many tests ask."""
    return subprocess.run([_cuobjdump(), what, str(path)], check=True, capture_output=True, text=True).stdout


# The tensor-core instruction each architecture's bf16 matmuls must lower to: Hopper's warpgroup MMA (wgmma), and
# Blackwell's tcgen05 MMA on 16-bit operands.
_TENSOR_CORE_MMA = {"sm_90": "HGMMA", "sm_100": "UTCHMMA", "sm_103": "UTCHMMA"}


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("kernel_name", ["_state_pass_kernel", "_chunk_out_kernel"],
                         ids=["state_pass", "chunk_out"])
def test_bf16_matmuls_lower_to_the_tensor_cores_mma(kernel_name, arch, cubins) -> None:
    import torch

    from kernels.cutile.export import CLASSES_BY_ARCH

    # HGMMA's M is 64 rows per warpgroup: a headdim of 32 (state_pass's M) runs on mma.sync (HMMA),
    # so the claim is made for the classes with headdim >= 64, the post's headline among them.
    # The default picks the serial or the segmented state pass by shape: check the classes that launch it.
    classes = [s for s in CLASSES_BY_ARCH[arch] if s.dtype == torch.bfloat16 and s.dims.headdim >= 64
               and (arch, s.name, kernel_name, 0, "default") in cubins]
    assert classes, f"no bf16 class with headdim >= 64 launches {kernel_name} on {arch}"
    for spec in classes:
        path = cubins[(arch, spec.name, kernel_name, 0, "default")].result()
        sass = _dump(path, "-sass")
        assert _TENSOR_CORE_MMA[arch] in sass, (
            f"{kernel_name} ({spec.name}) has no {_TENSOR_CORE_MMA[arch]} in its {arch} SASS")


# The local-memory stores one kernel may hold at the benchmark's points, every other kernel none: chunk_out where the
# chooser takes the causal quarters of its C·Bᵀ block (causal_cb, from dstate 256) spills three registers once a
# program, after its dstate loop, and measured faster than without them (kernels.cutile.tuning.chunk_out_config); four
# where it reads g and dt from the cumsum's stacked rows (4096 x 512), measured faster again (tuning._stacked). The
# spills that cost held 84 to 700 stores a program.
_CAUSAL_CHUNK_OUT_SPILLS = 4


def test_the_benchmarks_kernels_spill_nothing_on_sm90(cubins) -> None:
    """At the benchmark's point (bf16, chunk 128, headdim 64, batch 4, one group), where the H200 measured every
    choice, no kernel stores to local memory in its sm_90 SASS but chunk_out where the chooser takes the causal
    quarters of its C·Bᵀ block, at most ``_CAUSAL_CHUNK_OUT_SPILLS`` stores: spills cost 5-22% to 7x where they
    appeared (docs/design.md), so tiles or a compiler that bring them back are caught here, before a GPU run."""
    import torch

    from kernels.cutile import tuning
    from kernels.cutile.export import CLASSES_BY_ARCH

    point = [s for s in CLASSES_BY_ARCH["sm_90"] if s.dtype == torch.bfloat16 and s.chunk_size == 128
             and (s.dims.batch, s.dims.headdim, s.dims.ngroups) == (4, 64, 1)]
    assert len(point) == 3, [s.name for s in point]  # the headline, 4096 x 64 and 4096 x 512
    spilled = []
    for case in [c for c in _CASES if c[0] == "sm_90" and c[1] in point and c[4] == "default"]:
        _, spec, kernel_name, which, variant = case
        path = cubins[("sm_90", spec.name, kernel_name, which, variant)].result()
        sass = _dump(path, "-sass")
        stores = len(re.findall(r"\bSTL\b", sass))
        causal = (kernel_name == "_chunk_out_kernel"
                  and tuning.choose("sm_90", spec.dims, spec.dtype, spec.chunk_size).chunk_out.causal_cb)
        allowed = _CAUSAL_CHUNK_OUT_SPILLS if causal else 0
        if stores > allowed:
            spilled.append(f"{_case_id(case)}: {stores} local-memory stores")
    assert not spilled, "\n".join(spilled)


def test_chunk_out_at_chunk_256_spills_nothing_on_sm90(cubins) -> None:
    """At chunk 256 chunk_out runs 64-row blocks (kernels.cutile.tuning.chunk_out_config): 128-row blocks spilled
    234 local-memory stores a program in the sm_90 export and took 1.2-1.5x the forward's time on the H200."""
    import torch

    from kernels.cutile.export import CLASSES_BY_ARCH

    wide = [s for s in CLASSES_BY_ARCH["sm_90"] if s.chunk_size == 256 and s.dtype != torch.float32]
    assert wide, "no 16-bit class at chunk 256 is exported"
    spilled = []
    for case in [c for c in _CASES if c[0] == "sm_90" and c[1] in wide and c[2] == "_chunk_out_kernel"
                 and c[4] == "default"]:
        _, spec, kernel_name, which, variant = case
        stores = len(re.findall(r"\bSTL\b", _dump(cubins[("sm_90", spec.name, kernel_name, which, variant)].result(),
                                                     "-sass")))
        if stores:
            spilled.append(f"{_case_id(case)}: {stores} local-memory stores")
    assert not spilled, "\n".join(spilled)


@dataclass(frozen=True)
class _SM:
    """What one SM holds: the same for compute capabilities 9.0 and 10.x (CUDA C++ Programming Guide, "Technical
    Specifications per Compute Capability")."""

    registers: int = 64 * 1024
    register_unit: int = 256  # a warp's registers are allocated in units of this many
    shared: int = 228 * 1024  # with the system's 1 KB a program, which cuobjdump's SHARED counts
    threads: int = 2048
    programs: int = 32


_SMS = {"sm_90": _SM(), "sm_100": _SM(), "sm_103": _SM()}


def _resources(path: Path) -> tuple[int, int, int]:
    """(threads, registers a thread, shared memory bytes) of a cubin's one kernel, as cuobjdump reads them (the
    shared memory with the 1 KB a program that the system reserves)."""
    usage = _dump(path, "-res-usage")
    elf = _dump(path, "-elf")
    registers, shared = re.search(r"REG:(\d+) .*SHARED:(\d+)", usage).groups()
    threads = re.search(r"EIATTR_REQNTID\s+Format:\s+\S+\s+Value:\s+(0x[0-9a-f]+) 0x1 0x1", elf)
    assert threads, f"{path.name}: no one-dimensional EIATTR_REQNTID in cuobjdump -elf"
    return int(threads.group(1), 16), int(registers), int(shared)


def programs_an_sm(threads: int, registers: int, shared: int, sm: _SM) -> int:
    """How many programs of a kernel of these resources one SM holds at once."""
    warps = -(-threads // 32)
    per_warp = -(-registers * 32 // sm.register_unit) * sm.register_unit
    by_shared = sm.shared // shared if shared else sm.programs
    return min(sm.threads // threads, sm.registers // (warps * per_warp), by_shared, sm.programs)


def test_programs_an_sm_counts_each_limit() -> None:
    sm = _SM()
    assert programs_an_sm(256, 128, 96904, sm) == 2  # sm_90's chunk_out at occupancy 2: registers and shared memory
    assert programs_an_sm(384, 168, 92828, sm) == 1  # sm_100's: 384 threads of 168 registers fill the file
    assert programs_an_sm(256, 64, 51884, sm) == 4   # a local walk at occupancy 4
    assert programs_an_sm(128, 32, 0, sm) == 16      # threads
    assert programs_an_sm(32, 16, 0, sm) == 32       # the cap
    assert programs_an_sm(256, 128, 116 * 1024, sm) == 1  # shared memory: two of 116 KB do not fit
    assert programs_an_sm(256, 128, 228 * 1024, sm) == 1
    assert programs_an_sm(256, 128, 228 * 1024 + 1, sm) == 0


@pytest.mark.parametrize("arch", ARCHS)
def test_kernels_fit_the_programs_an_sm_they_ask_for(arch, cubins) -> None:
    """The occupancy a configuration asks for is a hint the compiler may not meet: each exported kernel's threads,
    registers and shared memory must let an SM hold that many programs (one without a hint), so that a choice made
    on one GPU, or scaled to another (kernels.cutile.tuning), runs as its configuration says."""
    short = []
    for case in [c for c in _CASES if c[0] == arch]:
        _, spec, kernel_name, which, variant = case
        kernel, _ = _launch(arch, spec, kernel_name, which, variant)
        asked = kernel._compiler_options.occupancy or 1
        threads, registers, shared = _resources(cubins[(arch, spec.name, kernel_name, which, variant)].result())
        held = programs_an_sm(threads, registers, shared, _SMS[arch])
        if held < asked:
            short.append(f"{_case_id(case)}: asks for {asked} programs an SM, holds {held} ({threads} threads, "
                         f"{registers} registers a thread, {shared} bytes of shared memory)")
    assert not short, "\n".join(short)


@pytest.mark.parametrize("stage", ["chunk_cumsum", "state_pass", "segment_scan", "segment_apply",
                                   "chunk_out", "segment_out"])
def test_launch_args_match_kernel_parameters(stage) -> None:
    _require_cuda_tile()
    from kernels.cutile.api import plan_forward
    from kernels.cutile.export import SPEC_CLASSES, VARIANT_CLASSES, meta_inputs
    from kernels.cutile.tuning import VARIANTS

    # The default picks the serial or the segmented state pass by shape: each stage is in some class (the fused
    # pass's output walk in the opt-in variants' classes).
    plans = [(spec, "default") for spec in SPEC_CLASSES] + list(VARIANT_CLASSES["sm_90"])
    found = [(spec, la) for spec, variant in plans
             for la in plan_forward(*meta_inputs(spec), chunk_size=spec.chunk_size, arch="sm_90",
                                    variant=VARIANTS[variant])[0]
             if la.kernel._pyfunc.__name__ == f"_{stage}_kernel"]
    assert found, f"no specialization class launches {stage}"
    for spec, launch in found:
        params = inspect.signature(launch.kernel._pyfunc).parameters
        assert len(launch.args) == len(params), (
            f"{stage} passes {len(launch.args)} arguments for {len(params)} kernel parameters ({spec.name})")


def _assumed(c) -> dict[str, tuple]:
    """What an array constraint lets the compiler assume about strides, sizes and offsets, per axis."""
    def per_axis(v, default):
        return tuple(v) if isinstance(v, list | tuple) else (default if v is None else v,) * c.ndim

    return {"stride_constant": per_axis(c.stride_constant, None),
            "stride_divisible_by": per_axis(c.stride_divisible_by, 1),
            "shape_divisible_by": per_axis(c.shape_divisible_by, 1), "index_dtype": (str(c.index_dtype),)}


def test_exports_assume_what_a_launch_on_the_gpu_assumes() -> None:
    """The compile check (and any SASS read from it) is only as good as its assumptions: for every class small
    enough to allocate, each array argument of each launch must carry the stride, size and index-width
    assumptions that cuTile's dispatcher derives from the same arguments on the GPU (base alignment aside: the
    export assumes 16 bytes, a launch reads the pointer)."""
    _require_cuda_tile()
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device: the dispatcher derives its assumptions from CUDA tensors "
                    "(runs in `nox -s validate` on a GPU)")
    import cuda.tile as ct
    from cuda.tile.compilation import ArrayConstraint, CallingConvention, KernelSignature

    from kernels.cutile.api import plan_forward
    from kernels.cutile.export import SPEC_CLASSES, _constraint, _wide_params, meta_inputs

    compared, differences = 0, []
    for spec in SPEC_CLASSES:
        meta = meta_inputs(spec)
        if sum(t.numel() * t.element_size() for t in meta if t is not None) > 2**30:
            continue  # the 2**31-element classes: their int64 choice is tested on meta tensors (test_cutile_api)
        real = [None if t is None else torch.randn(t.shape, device="cuda").to(t.dtype) for t in meta]
        planned = plan_forward(*meta, chunk_size=spec.chunk_size, arch="sm_90")[0]
        launched = plan_forward(*real, chunk_size=spec.chunk_size, arch="sm_90")[0]
        for ours, theirs in zip(planned, launched, strict=True):
            names = list(inspect.signature(ours.kernel._pyfunc).parameters)
            wide = _wide_params(ours.kernel)
            derived = KernelSignature.from_kernel_args(theirs.kernel, theirs.args,
                                                       CallingConvention.cutile_python_v1()).parameters
            for name, arg, d in zip(names, ours.args, derived, strict=True):
                if not isinstance(d, ArrayConstraint):
                    continue
                mine = _assumed(_constraint(arg, ct.int64 if name in wide else ct.int32))
                compared += 1
                if mine != _assumed(d):
                    differences.append(f"{spec.name} {ours.kernel._pyfunc.__name__}.{name}: export {mine}, "
                                       f"launch {_assumed(d)}")
    assert compared, "no class small enough to compare"
    assert not differences, "\n".join(differences[:20])


def _export_walk(spec, changes: dict, path: Path) -> Path:
    """Export the serial walk of one class with ``changes`` made to the chooser's walk configuration, the rest the
    choosers' (in a worker process: kernel objects do not pickle)."""
    import dataclasses

    from kernels.cutile.tuning import choose

    base = choose("sm_90", spec.dims, spec.dtype, spec.chunk_size)
    configs = dataclasses.replace(base, state_pass=dataclasses.replace(base.state_pass, **changes))
    return _export("sm_90", spec, "_state_pass_kernel", 0, "default", path, configs)


def test_the_walk_with_wide_loads_waits_on_fewer_barriers_on_sm90(tmp_path) -> None:
    """``StatePassConfig.wide_loads`` (the chooser's at dstate 128, a candidate at 512): a step's two chunks read by one
    load per array. At the benchmark's points of dstate 128 (the walk unswapped, 16K tokens) and 512 (swapped, 4K) the
    sm_90 export of the wide walk, the chooser's own at 128 (one program an SM, x and B hinted 6) and one at two
    programs an SM with x and B hinted 4, must still run the matmuls on HGMMA with shared-memory operands as per-chunk
    loads do and spill nothing; and at those hints it must wait on fewer barriers than the same walk with a load per
    chunk, which is what the setting is for. The counts are compared at the same hints and weights: across them the
    compiler's pipelining moves the count as much (in the per-chunk walk at 128, two programs an SM, 98 barrier waits
    with fp32 weights, 59 with bf16 ones, the variant packed-weights)."""
    import torch

    from kernels.cutile.export import CLASSES_BY_ARCH

    _require_cuda_tile()
    points = [s for s in CLASSES_BY_ARCH["sm_90"] if s.dtype == torch.bfloat16 and s.chunk_size == 128
              and (s.dims.batch, s.dims.headdim, s.dims.ngroups) == (4, 64, 1) and s.dims.dstate in (128, 512)]
    assert len(points) == 2, [s.name for s in points]
    walks = {"per-chunk": {"wide_loads": False, "occupancy": 2, "latency": 4},
             "wide": {"wide_loads": True, "occupancy": 2, "latency": 4}, "chooser": {}}
    with isolated.Pool(2, env={"CUDA_TILE_CACHE_DIR": "off"}) as pool:
        futures = {(spec.dims.dstate, name): pool.submit(_export_walk, spec, changes,
                                                         tmp_path / f"{spec.name}-{name}.cubin")
                   for spec in points for name, changes in walks.items()
                   if spec.dims.dstate == 128 or name != "chooser"}  # at 512 the chooser's walk is the per-chunk one
        sass = {key: _dump(future.result(), "-sass") for key, future in futures.items()}
    for (dstate, name), code in sass.items():
        if name != "per-chunk":
            assert re.search(r"HGMMA\.\S+ R\d+, R\d+, gdesc", code), \
                f"dstate {dstate}, {name}: no HGMMA with a shared operand"
            assert not re.findall(r"\bSTL\b", code), f"dstate {dstate}, {name}: the wide walk spills"
    for dstate in (128, 512):
        waits = [len(re.findall(r"SYNCS\.PHASECHK", sass[(dstate, name)])) for name in ("per-chunk", "wide")]
        assert waits[1] < waits[0], f"dstate {dstate}: barrier waits per chunk {waits[0]}, wide {waits[1]}"
