"""CPU-only checks of ssd_fwd_cutile's input handling: bad input is refused by name, before any GPU work.

Needs cuda.tile importable (the compile group), hence the marker; no GPU.
"""

import ast
import dataclasses
import inspect
from pathlib import Path

import pytest
import torch

from kernels.cutile import api as cutile_api
from kernels.cutile import segment_state, state_pass, tuning
from kernels.cutile.export import SpecClass, meta_inputs
from kernels.cutile.tuning import VARIANTS
from reference.checks import SSDDims
from reference.problem import ProblemSpec
from validation import matrix
from validation.registry import IMPLS

pytestmark = pytest.mark.compile


def _inputs(**overrides):
    spec = ProblemSpec(**{"batch": 1, "seqlen": 8, "nheads": 2, "headdim": 32, "ngroups": 1, "dstate": 16,
                          "chunk_size": 64, "dtype": "fp32", **overrides})
    return spec.make_inputs("cpu").as_args()


def test_cpu_tensors_are_refused_naming_x() -> None:
    with pytest.raises(ValueError, match=r"ssd_fwd_cutile: x is on cpu; expected a CUDA device"):
        cutile_api.ssd_fwd_cutile(*_inputs())


@pytest.mark.parametrize("chunk_size", [32, 100, 512])
def test_unsupported_chunk_size_is_refused_naming_chunk_size(chunk_size) -> None:
    with pytest.raises(ValueError, match=rf"ssd_fwd_cutile: chunk_size={chunk_size} is not supported"):
        cutile_api.ssd_fwd_cutile(*_inputs(), chunk_size=chunk_size)


def test_non_integer_chunk_size_is_a_type_error() -> None:
    with pytest.raises(TypeError, match=r"chunk_size must be an int"):
        cutile_api.ssd_fwd_cutile(*_inputs(), chunk_size=128.0)


def test_x_in_fp64_is_refused_naming_x() -> None:
    x, *rest = _inputs()
    with pytest.raises(TypeError, match=r"ssd_fwd_cutile: x has dtype fp64"):
        cutile_api.ssd_fwd_cutile(x.double(), *rest)


@pytest.mark.parametrize("headdim", [16, 48, 96, 256])
def test_unsupported_headdim_is_refused_naming_headdim(headdim) -> None:
    dims = SSDDims(batch=1, seqlen=8, nheads=2, headdim=headdim, ngroups=1, dstate=16)
    with pytest.raises(ValueError, match=rf"x has headdim={headdim} .*expected one of \[32, 64, 128\]"):
        cutile_api.check_kernel_limits(dims)


@pytest.mark.parametrize("dstate", [8, 24, 100, 1024])
def test_unsupported_dstate_is_refused_naming_dstate(dstate) -> None:
    dims = SSDDims(batch=1, seqlen=8, nheads=2, headdim=64, ngroups=1, dstate=dstate)
    with pytest.raises(ValueError, match=rf"B and C have dstate={dstate} .*power of two from 16 to 512"):
        cutile_api.check_kernel_limits(dims)


def test_batch_past_the_grid_limit_is_refused_naming_batch() -> None:
    dims = SSDDims(batch=65536, seqlen=8, nheads=2, headdim=64, ngroups=1, dstate=16)
    with pytest.raises(ValueError, match=r"x has batch=65536 .*at most 65535"):
        cutile_api.check_kernel_limits(dims)


@pytest.mark.parametrize("headdim", [32, 64, 128])
@pytest.mark.parametrize("dstate", [16, 32, 64, 128, 256, 512])
def test_supported_sizes_pass_the_kernel_limits(headdim, dstate) -> None:
    cutile_api.check_kernel_limits(SSDDims(batch=2, seqlen=8, nheads=2, headdim=headdim, ngroups=1, dstate=dstate))


@pytest.mark.parametrize("batch", [1, 65535, 65536])
@pytest.mark.parametrize("headdim", [16, 64, 96])
@pytest.mark.parametrize("dstate", [8, 128, 1024])
def test_the_registry_refuses_exactly_what_the_forward_refuses(batch, headdim, dstate) -> None:
    """One declaration (kernels.cutile.LIMITS): the registry's unsupported and the forward's refusal agree."""
    dims = SSDDims(batch=batch, seqlen=8, nheads=2, headdim=headdim, ngroups=1, dstate=dstate)
    spec = ProblemSpec(**dims._asdict(), chunk_size=64, dtype="bf16")
    try:
        cutile_api.check_kernel_limits(dims)
        refused = None
    except ValueError as error:
        refused = str(error)
    reason = IMPLS["cutile"].unsupported_reason(spec)
    assert (reason is None) == (refused is None), f"registry: {reason!r}; forward: {refused!r}"


def test_plan_takes_explicit_configs_and_defaults_to_the_choosers() -> None:
    x, dt, A, B, C, D, h0 = (t.to("meta") if t is not None else None for t in _inputs(seqlen=700, dtype="bf16"))
    chosen = tuning.choose("sm_90", SSDDims(*x.shape, *B.shape[2:]), x.dtype, 64)
    default, _, _ = cutile_api.plan_forward(x, dt, A, B, C, D, h0, chunk_size=64, arch="sm_90")
    given, _, _ = cutile_api.plan_forward(x, dt, A, B, C, D, h0, chunk_size=64, arch="sm_90", configs=chosen)
    assert [(la.kernel, la.grid) for la in given] == [(la.kernel, la.grid) for la in default]
    narrow = dataclasses.replace(chosen, segment_scan=dataclasses.replace(chosen.segment_scan, block_p=8))
    segmented = VARIANTS["segmented-state"]
    other, _, _ = cutile_api.plan_forward(x, dt, A, B, C, D, h0, chunk_size=64, arch="sm_90", configs=narrow,
                                          variant=segmented)
    default, _, _ = cutile_api.plan_forward(x, dt, A, B, C, D, h0, chunk_size=64, arch="sm_90", variant=segmented)
    grids = {la.kernel._pyfunc.__name__: la.grid for la in other}
    assert grids["_segment_scan_kernel"][0] == 2 * dict(
        (la.kernel._pyfunc.__name__, la.grid) for la in default)["_segment_scan_kernel"][0], (
        "headdim 32 in tiles of 8 instead of 16: twice the programs")


@pytest.mark.parametrize("dtype,dstate,hint", [(torch.bfloat16, 64, 4), (torch.bfloat16, 128, 8),
                                              (torch.bfloat16, 512, 10), (torch.float32, 128, 0)])
def test_the_walk_hints_its_g_and_dt_loads_for_16_bit_inputs(dtype, dstate, hint) -> None:
    # SCALAR_LATENCY: the compile-time latency hint of the serial walk's g and dt loads (0: none), measured faster
    # for bf16 only (deeper for the swapped walk, which reads precomputed weights, and for the wide walk of dstate
    # 128); the launch passes the chooser's value through.
    x, dt, A, B, C, D, h0 = meta_inputs(SpecClass(SSDDims(4, 16384, 8, 64, 1, dstate), dtype, 128, True, False))
    launches, _, _ = cutile_api.plan_forward(x, dt, A, B, C, D, h0, chunk_size=128, arch="sm_90",
                                             variant=VARIANTS["serial-state"])
    walk = next(la for la in launches if la.kernel._pyfunc.__name__ == "_state_pass_kernel")
    names = list(inspect.signature(walk.kernel._pyfunc).parameters)
    assert walk.args[names.index("SCALAR_LATENCY")] == hint


@pytest.mark.parametrize("dtype,batch,seqlen,dstate,pre_weights,weigh_x", [
    (torch.bfloat16, 4, 2048, 64, True, True), (torch.bfloat16, 8, 2048, 64, False, False),
    (torch.bfloat16, 4, 4096, 64, True, True), (torch.bfloat16, 4, 16384, 64, True, True),
    (torch.bfloat16, 4, 16384, 128, True, True), (torch.bfloat16, 4, 16384, 512, True, False),
    (torch.float32, 4, 16384, 128, False, False)])
def test_the_walk_reads_the_weights_the_cumsum_precomputed_where_the_chooser_says(dtype, batch, seqlen, dstate,
                                                                                   pre_weights, weigh_x) -> None:
    # pre_weights: the cumsum writes w = exp2(g_last - g) * dt and the walk reads it in dt's place; weigh_x: the walk
    # puts it on x's rows. Both measured faster for bf16 from dstate 128 (weigh_x unswapped only) on the H200, at
    # dstate 64 from 64 chunks, where the default is the segmented pass completed in chunk_out, whose local walk reads
    # them, and at dstate 64 below 64 chunks where the serial walk has at most one program an SM (batch 4) on an H100;
    # with more programs (batch 8) the serial walk weighs B itself.
    x, dt, A, B, C, D, h0 = meta_inputs(SpecClass(SSDDims(batch, seqlen, 8, 64, 1, dstate), dtype, 128, True, False))
    launches, _, _ = cutile_api.plan_forward(x, dt, A, B, C, D, h0, chunk_size=128, arch="sm_90")
    cumsum, walk = launches[0], next(la for la in launches if la.kernel._pyfunc.__name__ == "_state_pass_kernel")
    cumsum_names = list(inspect.signature(cumsum.kernel._pyfunc).parameters)
    walk_names = list(inspect.signature(walk.kernel._pyfunc).parameters)
    assert cumsum.args[cumsum_names.index("WEIGHTS")] is pre_weights
    assert walk.args[walk_names.index("PRE_WEIGHTS")] is pre_weights
    assert walk.args[walk_names.index("WEIGH_X")] is weigh_x
    written = cumsum.args[cumsum_names.index("w" if pre_weights else "dtT")]
    assert walk.args[walk_names.index("dtT")] is written, "the walk reads what the cumsum wrote for it"
    chunk_out = launches[-1]
    assert chunk_out.args[list(inspect.signature(chunk_out.kernel._pyfunc).parameters).index("dtT")] is (
        cumsum.args[cumsum_names.index("dtT")]), "chunk_out reads dt itself"
    # The ablation walk-weighs: the serial walk computes its own weights, with the tiles chosen for that.
    launches, _, _ = cutile_api.plan_forward(x, dt, A, B, C, D, h0, chunk_size=128, arch="sm_90",
                                             variant=dataclasses.replace(VARIANTS["walk-weighs"], state="serial"))
    cumsum, walk = launches[0], next(la for la in launches if la.kernel._pyfunc.__name__ == "_state_pass_kernel")
    assert cumsum.args[cumsum_names.index("WEIGHTS")] is False
    assert walk.args[walk_names.index("PRE_WEIGHTS")] is False and walk.args[walk_names.index("WEIGH_X")] is False
    assert walk.args[walk_names.index("dtT")] is cumsum.args[cumsum_names.index("dtT")]
    old = tuning.state_pass_config("sm_90", SSDDims(4, seqlen, 8, 64, 1, dstate), dtype, 128, pre_weights=False)
    assert walk.args[walk_names.index("BLOCK_N")] == old.block_n


@pytest.mark.parametrize("dstate", [64, 128, 512])
def test_the_packed_weights_variant_changes_only_how_the_walk_multiplies(dstate: int) -> None:
    # packed-weights: the walk's weighted operand multiplied in bf16; the default keeps the fp32 product. 2048 tokens:
    # the serial walk at every dstate (at dstate 64 from 32 chunks the default is the segmented pass).
    spec = SpecClass(SSDDims(4, 2048, 8, 64, 1, dstate), torch.bfloat16, 128, True, False)
    plans = {name: cutile_api.plan_forward(*meta_inputs(spec), chunk_size=128, arch="sm_90",
                                           variant=VARIANTS[name])[0] for name in ("default", "packed-weights")}
    walks = {name: next(la for la in launches if la.kernel._pyfunc.__name__ == "_state_pass_kernel")
             for name, launches in plans.items()}
    names = list(inspect.signature(walks["default"].kernel._pyfunc).parameters)
    packed = names.index("PACKED_WEIGHTS")
    assert walks["default"].args[packed] is False and walks["packed-weights"].args[packed] is True
    constants = [i for i, arg in enumerate(walks["default"].args) if not isinstance(arg, torch.Tensor) and i != packed]
    assert [walks["default"].args[i] for i in constants] == [walks["packed-weights"].args[i] for i in constants]
    assert [la.grid for la in plans["default"]] == [la.grid for la in plans["packed-weights"]]


def test_plan_on_meta_tensors_allocates_outputs_of_the_documented_shapes() -> None:
    # The segmented pass on this small problem gets segments of one chunk (the chooser's grid target): no
    # completion pass.
    x, dt, A, B, C, D, h0 = (t.to("meta") if t is not None else None for t in _inputs(seqlen=700, dtype="bf16"))
    launches, y, final_state = cutile_api.plan_forward(x, dt, A, B, C, D, h0, chunk_size=64, arch="sm_90",
                                                       variant=VARIANTS["segmented-state"])
    assert [la.kernel._pyfunc.__name__ for la in launches] == [
        "_chunk_cumsum_kernel", "_state_pass_kernel", "_segment_scan_kernel", "_chunk_out_kernel"]
    assert (y.shape, y.dtype) == (x.shape, x.dtype)
    assert (final_state.shape, final_state.dtype) == ((1, 2, 32, 16), torch.float32)


@pytest.mark.parametrize("seg_chunks,kernels", [
    (1, ["_chunk_cumsum_kernel", "_state_pass_kernel", "_segment_scan_kernel", "_chunk_out_kernel"]),
    (4, ["_chunk_cumsum_kernel", "_state_pass_kernel", "_segment_scan_kernel", "_segment_apply_kernel",
         "_chunk_out_kernel"])], ids=["one-chunk-segments", "four-chunk-segments"])
def test_segmented_pass_completes_the_states_only_for_segments_of_several_chunks(seg_chunks, kernels) -> None:
    x, dt, A, B, C, D, h0 = (t.to("meta") if t is not None else None for t in _inputs(seqlen=700, dtype="bf16"))
    chosen = tuning.choose("sm_90", SSDDims(*x.shape, *B.shape[2:]), x.dtype, 64)
    cfgs = dataclasses.replace(chosen, segment_state=dataclasses.replace(chosen.segment_state, seg_chunks=seg_chunks))
    launches, _, _ = cutile_api.plan_forward(x, dt, A, B, C, D, h0, chunk_size=64, arch="sm_90", configs=cfgs,
                                             variant=VARIANTS["segmented-state"])
    assert [la.kernel._pyfunc.__name__ for la in launches] == kernels
    scan = next(la for la in launches if la.kernel._pyfunc.__name__ == "_segment_scan_kernel")
    # The scan's entry states: the chunk states themselves (bf16) for one-chunk segments, else fp32 E_s.
    assert scan.args[3].dtype == (torch.bfloat16 if seg_chunks == 1 else torch.float32)


@pytest.mark.parametrize("initial_state", [False, True], ids=["no-initial-state", "initial-state"])
def test_segmented_out_in_two_segments_plans_no_scan_and_chunk_out_writes_the_final_state(initial_state) -> None:
    # 4096 tokens in two segments of 16 chunks: without an initial state E_1 is segment 0's end state, so no scan;
    # chunk_out reads the fp32 end states and the segment decays, and writes the final state plan_forward returns.
    # With an initial state, or with the variant segmented-out-scanned, the scan runs as before.
    spec = SpecClass(SSDDims(4, 4096, 8, 64, 1, 128), torch.bfloat16, 128, True, initial_state)
    chosen = tuning.choose("sm_90", spec.dims, torch.bfloat16, 128)
    cfgs = dataclasses.replace(chosen, segment_state=dataclasses.replace(chosen.segment_state, seg_chunks=16))
    plans = {name: cutile_api.plan_forward(*meta_inputs(spec), chunk_size=128, arch="sm_90", configs=cfgs,
                                           variant=VARIANTS[name])
             for name in ("segmented-out", "segmented-out-scanned")}
    launches, _, final_state = plans["segmented-out"]
    names = [la.kernel._pyfunc.__name__ for la in launches]
    scanned = ["_chunk_cumsum_kernel", "_state_pass_kernel", "_segment_scan_kernel", "_chunk_out_kernel"]
    assert [la.kernel._pyfunc.__name__ for la in plans["segmented-out-scanned"][0]] == scanned
    if initial_state:
        assert names == scanned
        return
    assert names == ["_chunk_cumsum_kernel", "_state_pass_kernel", "_chunk_out_kernel"]
    walk, out = launches[1], launches[2]
    walk_names = list(inspect.signature(walk.kernel._pyfunc).parameters)
    out_names = list(inspect.signature(out.kernel._pyfunc).parameters)
    arg = dict(zip(out_names, out.args, strict=True))
    assert arg["SEG_FROM_END"] is True and arg["SEG_CHUNKS"] == 16
    assert arg["seg_entry"] is walk.args[walk_names.index("seg_end")] and arg["seg_entry"].dtype == torch.float32
    assert arg["seg_decay"] is walk.args[walk_names.index("seg_decay")] and arg["seg_decay"].shape == (4, 8, 2)
    assert arg["final_state"] is final_state and final_state.shape == (4, 8, 64, 128)
    scanned_out = dict(zip(out_names, plans["segmented-out-scanned"][0][-1].args, strict=True))
    assert scanned_out["SEG_FROM_END"] is False
    # Four segments need the scan; asking for none is refused by name.
    x, dt, A, B, C, D, h0 = meta_inputs(spec)
    with pytest.raises(ValueError, match=r"scan=False needs exactly two segments and no initial state; got 32 chunks "
                                         r"in segments of 8"):
        segment_state.segment_state_local(x, B, torch.empty((4, 8, 4096), device="meta"), dt, None, chunk_size=128,
                                          cfg=dataclasses.replace(cfgs.segment_state, seg_chunks=8),
                                          scan_cfg=cfgs.segment_scan, scan=False)


@pytest.mark.parametrize("seqlen,heavy_first", [(4096, True), (4095, True), (6144, False), (8000, False)])
def test_chunk_out_in_two_segments_starts_segment_ones_programs_first_in_short_grids(seqlen, heavy_first) -> None:
    # Segment 1's programs take the completion product: started first, in grids of at most four programs a slot
    # (1024 at the benchmark's batch on sm_90), as measured faster there; first to last in longer grids.
    # (The default at batch 4 below 64 chunks is the serial walk; the variant segmented-out keeps two segments.)
    dims = SSDDims(4, seqlen, 8, 64, 1, 64)
    assert tuning.chunk_out_config("sm_90", dims, torch.bfloat16, 128).heavy_first is heavy_first
    launches, _, _ = cutile_api.plan_forward(*meta_inputs(SpecClass(dims, torch.bfloat16, 128, True, False)),
                                             chunk_size=128, arch="sm_90", variant=VARIANTS["segmented-out"])
    out = launches[-1]
    arg = dict(zip(inspect.signature(out.kernel._pyfunc).parameters, out.args, strict=True))
    assert arg["SEG_FROM_END"] is True and arg["HEAVY_FIRST"] is heavy_first


def test_the_default_at_4096_tokens_and_dstate_64_is_the_wide_serial_walk_at_one_program_an_sm() -> None:
    # 32 chunks at the benchmark's batch: the serial walk reading the cumsum's weights, 16-wide tiles (128 programs,
    # one an SM), one load per array a step, with an initial state or not (measured faster than two segments).
    dims = SSDDims(4, 4096, 8, 64, 1, 64)
    for h0 in (False, True):
        assert tuning.state_pass_kind("sm_90", dims, torch.bfloat16, 128, initial_state=h0) == "serial"
        launches, _, _ = cutile_api.plan_forward(*meta_inputs(SpecClass(dims, torch.bfloat16, 128, True, h0)),
                                                 chunk_size=128, arch="sm_90")
        assert [la.kernel._pyfunc.__name__ for la in launches] == ["_chunk_cumsum_kernel", "_state_pass_kernel",
                                                                  "_chunk_out_kernel"]
        assert (_walk_flag(launches, "WIDE_LOADS"), _walk_flag(launches, "WEIGH_X"), _walk_flag(launches, "BLOCK_N"),
                _walk_flag(launches, "SEG_CHUNKS") >= 32) == (True, True, 16, True)
    assert tuning.state_pass_config("sm_90", dims, torch.bfloat16, 128).occupancy == 1


def test_the_default_at_4096_tokens_and_dstate_64_past_one_walk_program_an_sm_is_two_segments_unless_h0() -> None:
    # 32 chunks at batch 8 (256 walk programs): the segmented pass in two segments of 16 chunks, 32-wide tiles, no scan
    # (as measured faster than the serial walk at batch 4 before the wide walk); with an initial state the serial walk
    # (two segments would need the scan).
    dims = SSDDims(8, 4096, 8, 64, 1, 64)
    seg = tuning.segment_state_config("sm_90", dims, torch.bfloat16, 128)
    assert (seg.seg_chunks, seg.block_n) == (16, 32)
    names = {}
    for h0 in (False, True):
        launches, _, _ = cutile_api.plan_forward(*meta_inputs(SpecClass(dims, torch.bfloat16, 128, True, h0)),
                                                 chunk_size=128, arch="sm_90")
        names[h0] = [la.kernel._pyfunc.__name__ for la in launches]
        walk = launches[1]
        walk_names = list(inspect.signature(walk.kernel._pyfunc).parameters)
        k = walk.args[walk_names.index("SEG_CHUNKS")]
        assert k >= 32 if h0 else k == 16, "with an initial state one walk through all 32 chunks, else two of 16"
    assert names[False] == names[True] == ["_chunk_cumsum_kernel", "_state_pass_kernel", "_chunk_out_kernel"]
    assert tuning.state_pass_kind("sm_90", dims, torch.bfloat16, 128, initial_state=True) == "serial"
    # Its traffic: the local states written and read once, the fp32 end states written once, segment 0's read with
    # each chunk of segment 1 (half a state's worth a chunk), both read for the final state; no E_s.
    traffic, how = cutile_api.intermediate_traffic(dims, torch.bfloat16, 128, "sm_90")
    elems, tokens, seg = 8 * 8 * 32 * 64 * 64, 8 * 32 * 128, 8 * 8 * 2 * 64 * 64 * 4
    weights = 2 * tokens * 8 * 4  # the cumsum's chunk-state weights, written once and read once
    assert how.startswith("segmented state pass in two segments of 16 chunks")
    assert traffic == 3 * 2 * tokens * 8 * 4 + weights + 2 * elems * 2 + elems // 2 * 4 + 2 * seg


@pytest.mark.parametrize("arch", ["sm_100", "sm_103"])
def test_blackwell_takes_the_h200s_state_pass_at_every_point_of_the_benchmark(arch) -> None:
    # A walk of 128 programs (the benchmark's batch at dstate 64) is one an SM on the H200 and on 148 SMs alike: the
    # chooser's serial-or-segmented choice, measured on the H200, must not flip on the SM count (it did: serial at
    # 4K-16K tokens and the segmented pass with its completion launch from 32K on sm_100 and sm_103).
    for dstate in (64, 128, 256, 512):
        for seqlen in (1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144):
            dims = SSDDims(4, seqlen, 8, 64, 1, dstate)
            for h0 in (False, True):
                assert (tuning.state_pass_kind(arch, dims, torch.bfloat16, 128, h0)
                        == tuning.state_pass_kind("sm_90", dims, torch.bfloat16, 128, h0)), (seqlen, dstate, h0)
    # With fewer programs than half the SMs (batch 1) the segmented pass gives the walk's missing programs there too.
    assert tuning.state_pass_kind(arch, SSDDims(1, 65536, 8, 64, 1, 64), torch.bfloat16, 128) == "segmented"


def test_chunk_out_asks_for_the_programs_an_sm_tileiras_builds_it_for() -> None:
    # sm_90: two programs of 256 threads; sm_100 and sm_103: one of 384 threads at up to 168 registers, whatever the
    # hint (validation/test_compile.py reads both from the exports).
    dims = SSDDims(4, 16384, 8, 64, 1, 128)
    occupancy = {arch: tuning.chunk_out_config(arch, dims, torch.bfloat16, 128).occupancy
                 for arch in ("sm_90", "sm_100", "sm_103")}
    assert occupancy == {"sm_90": 2, "sm_100": 1, "sm_103": 1}


def _same_view(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors (meta ones too, whose data_ptr is 0) view the same elements of the same base."""
    base_a, base_b = (a if a._base is None else a._base), (b if b._base is None else b._base)
    return base_a is base_b and (a.shape, a.stride(), a.storage_offset()) == (b.shape, b.stride(), b.storage_offset())


@pytest.mark.parametrize("seqlen,dstate,initial_state,parts", [
    (4096, 128, False, False), (4096, 64, False, False), (16384, 64, True, False), (2**21, 512, False, True)],
    ids=["serial", "two-segments", "segmented-out", "serial-in-parts"])
def test_without_the_cumsum_launch_the_walk_takes_the_cumsum_and_fills_chunk_outs_buffers(seqlen, dstate, initial_state,
                                                                                          parts) -> None:
    # The variant cumsum-in-kernels: no cumsum launch; every walk reads A and the caller's dt (in parts, the part's
    # tokens), weighs its chunks itself and writes the cumsum's g and dt buffers, which chunk_out reads.
    batch = 1 if seqlen == 2**21 else 4
    nheads = 16 if seqlen == 2**21 else 8
    spec = SpecClass(SSDDims(batch, seqlen, nheads, 64, 1, dstate), torch.bfloat16, 128, True, initial_state)
    x, dt, A, B, C, D, h0 = meta_inputs(spec)
    launches, _, _ = cutile_api.plan_forward(x, dt, A, B, C, D, h0, chunk_size=128, arch="sm_90",
                                             variant=VARIANTS["cumsum-in-kernels"])
    names = [la.kernel._pyfunc.__name__ for la in launches]
    assert "_chunk_cumsum_kernel" not in names
    walk_launches = [la for la in launches if la.kernel._pyfunc.__name__ == "_state_pass_kernel"]
    outs = [la for la in launches if la.kernel._pyfunc.__name__ == "_chunk_out_kernel"]
    assert len(walk_launches) == len(outs) and (len(outs) > 1) is parts
    tokens = 0
    for walk, out in zip(walk_launches, outs, strict=True):
        w = dict(zip(inspect.signature(walk.kernel._pyfunc).parameters, walk.args, strict=True))
        o = dict(zip(inspect.signature(out.kernel._pyfunc).parameters, out.args, strict=True))
        assert w["RAW_DT"] is True and w["PRE_WEIGHTS"] is False
        assert w["g"] is A and w["dtT"].shape == (batch, w["x"].shape[1], nheads)
        assert _same_view(w["dtT"], dt[:, tokens:tokens + w["x"].shape[1]]) if parts else w["dtT"] is dt
        assert w["g_out"].shape == o["g"].shape == (batch, nheads, -(-w["x"].shape[1] // 128) * 128)
        assert _same_view(w["g_out"], o["g"]) and _same_view(w["dt_out"], o["dtT"])
        assert not _same_view(w["g_out"], w["dt_out"])
        tokens += w["x"].shape[1]
    assert tokens == seqlen
    # The default keeps the launch, and its walk neither takes the cumsum nor writes one.
    launches, _, _ = cutile_api.plan_forward(x, dt, A, B, C, D, h0, chunk_size=128, arch="sm_90")
    assert launches[0].kernel._pyfunc.__name__ == "_chunk_cumsum_kernel"
    walk = next(la for la in launches if la.kernel._pyfunc.__name__ == "_state_pass_kernel")
    assert dict(zip(inspect.signature(walk.kernel._pyfunc).parameters, walk.args, strict=True))["RAW_DT"] is False
    with pytest.raises(ValueError, match="fused pass"):
        cutile_api.plan_forward(x, dt, A, B, C, D, h0, chunk_size=128, arch="sm_90",
                                variant=dataclasses.replace(VARIANTS["cumsum-in-kernels"], state="fused"))
    # The design's traffic: g and dt written by the walk and read once by chunk_out, no weights buffer; at the
    # headline the default's cumsum writes g, dt and the weights, read by the walk and chunk_out: four buffers more,
    # and a fifth for g written twice (its rows stacked, ChunkCumsumConfig.stacked).
    headline = SSDDims(4, 16384, 8, 64, 1, 128)
    default, _ = cutile_api.intermediate_traffic(headline, torch.bfloat16, 128, "sm_90")
    raw, how = cutile_api.intermediate_traffic(headline, torch.bfloat16, 128, "sm_90", VARIANTS["cumsum-in-kernels"])
    per_buffer = 4 * 16384 * 8 * 4  # one fp32 value a token and head
    assert default - raw == 5 * per_buffer and "the walk's cumsum g and dt written once, read once" in how


@pytest.mark.parametrize("variant,seqlen", [("serial-state", 700), ("default", 70)], ids=["variant", "short"])
def test_serial_state_pass_plans_the_three_kernels_of_the_post(variant, seqlen) -> None:
    # The variant always; the default for sequences of at most 8 chunks at dstate 16 (and at dstate 128-256).
    x, dt, A, B, C, D, h0 = (t.to("meta") if t is not None else None for t in _inputs(seqlen=seqlen, dtype="bf16"))
    launches, _, _ = cutile_api.plan_forward(x, dt, A, B, C, D, h0, chunk_size=64, arch="sm_90",
                                             variant=VARIANTS[variant])
    assert [la.kernel._pyfunc.__name__ for la in launches] == [
        "_chunk_cumsum_kernel", "_state_pass_kernel", "_chunk_out_kernel"]


def test_fused_pass_plans_no_chunk_states_and_refuses_a_state_too_wide_to_carry() -> None:
    spec = SpecClass(SSDDims(4, 16384, 8, 64, 1, 128), torch.bfloat16, 128, True, True)
    launches, y, final_state = cutile_api.plan_forward(*meta_inputs(spec), chunk_size=128, arch="sm_90",
                                                       variant=VARIANTS["fused-out"])
    assert [la.kernel._pyfunc.__name__ for la in launches] == [
        "_chunk_cumsum_kernel", "_state_pass_kernel", "_segment_scan_kernel", "_segment_out_kernel"]
    walk, scan, out = launches[1:]
    K = tuning.segment_out_config("sm_90", spec.dims, torch.bfloat16, 128).seg_chunks
    nseg = -(-128 // K)
    # The local walk stores segment end states only, over the output walk's segments; the scan hands the output
    # walk every segment's fp32 entry state.
    arg = dict(zip(inspect.signature(walk.kernel._pyfunc).parameters, walk.args, strict=True))
    assert arg["SEG_CHUNKS"] == K
    assert (arg["STORE_STATES"], arg["STORE_DECAY"], arg["STORE_END"]) == (False, False, True)
    assert scan.args[3].shape == (4, 8, nseg, 64, 128) and scan.args[3].dtype == torch.float32
    assert out.args[5] is scan.args[3] and out.grid == (nseg * 8, 4)
    assert y.shape == (4, 16384, 8, 64) and final_state.shape == (4, 8, 64, 128)
    wide = SpecClass(SSDDims(1, 1024, 8, 64, 1, 256), torch.bfloat16, 128, True, False)
    assert "dstate <= 128" in VARIANTS["fused-out"].unsupported_reason(256)
    assert VARIANTS["fused-out"].unsupported_reason(128) is None and VARIANTS["default"].unsupported_reason(512) is None
    with pytest.raises(ValueError, match=r"dstate=256 \(B.shape\[3\]\); expected at most 128"):
        cutile_api.plan_forward(*meta_inputs(wide), chunk_size=128, arch="sm_90", variant=VARIANTS["fused-out"])
    traffic, how = cutile_api.intermediate_traffic(spec.dims, torch.bfloat16, 128, "sm_90", VARIANTS["fused-out"])
    # No chunk states, but fp32 segment states written, scanned, written and read, and x and B read twice.
    seg_states, x_and_b, cumsum = 4 * 8 * nseg * 64 * 128 * 4, 4 * 16384 * (8 * 64 + 128) * 2, 3 * 2 * 4 * 16384 * 8 * 4
    assert how.startswith("fused pass") and traffic == cumsum + 4 * seg_states + x_and_b


def test_split_diag_variant_reaches_chunk_out_only_for_whole_chunk_row_blocks() -> None:
    def split(chunk_size: int, variant: str) -> bool:
        spec = SpecClass(SSDDims(2, 1000, 8, 64, 1, 128), torch.bfloat16, chunk_size, True, False)
        launches, _, _ = cutile_api.plan_forward(*meta_inputs(spec), chunk_size=chunk_size, arch="sm_90",
                                                 variant=VARIANTS[variant])
        [out] = [la for la in launches if la.kernel._pyfunc.__name__ == "_chunk_out_kernel"]
        names = list(inspect.signature(out.kernel._pyfunc).parameters)
        return out.args[names.index("SPLIT_DIAG")]

    assert split(128, "split-diag") and not split(128, "default")
    assert not split(256, "split-diag"), "chunk 256 runs in two row blocks: the halves are of the whole chunk only"


@pytest.mark.parametrize("dstate", [64, 128, 256, 512])
def test_causal_cb_is_the_default_from_dstate_256_and_gives_way_to_a_shared_or_buffered_block(dstate) -> None:
    def causal(chunk_size: int, variant: str) -> bool:
        spec = SpecClass(SSDDims(2, 1000, 8, 64, 1, dstate), torch.bfloat16, chunk_size, True, False)
        launches, _, _ = cutile_api.plan_forward(*meta_inputs(spec), chunk_size=chunk_size, arch="sm_90",
                                                 variant=VARIANTS[variant])
        [out] = [la for la in launches if la.kernel._pyfunc.__name__ == "_chunk_out_kernel"]
        names = list(inspect.signature(out.kernel._pyfunc).parameters)
        return out.args[names.index("CAUSAL_CB")]

    assert causal(128, "default") == (dstate >= 256)
    assert causal(128, "causal-cb") and not causal(128, "full-cb")
    # The variants that share, buffer or split the whole block run it so; chunk 256 (two row blocks a chunk) never.
    for variant in ("cb-shared-8", "cb-buffer", "split-diag", "c-twice"):
        assert not causal(128, variant), variant
    assert not causal(256, "causal-cb")
    fp32 = SpecClass(SSDDims(2, 1000, 8, 64, 1, dstate), torch.float32, 128, True, False)
    assert not tuning.choose("sm_90", fp32.dims, torch.float32, 128).chunk_out.causal_cb, "measured on 16-bit only"


@pytest.mark.parametrize(("seqlen", "dstate", "variant", "expected"), [
    (16384, 128, "default", True), (262144, 128, "default", True), (16384, 512, "default", True),
    (4096, 256, "default", True), (65536, 512, "default", False), (16384, 256, "default", False),
    (1024, 64, "default", True), (16384, 64, "default", False), (16384, 128, "unstacked", False),
    (16384, 128, "two-segment-walk", False),
    (16384, 128, "walk-weighs", False),
    (16384, 128, "segmented-state", False), (16384, 128, "cumsum-in-kernels", False)])
def test_the_stacked_cumsum_buffer_reaches_the_serial_walk_and_chunk_out_together(seqlen, dstate, variant,
                                                                                  expected) -> None:
    """Where the chooser stacks the cumsum's rows (``ChunkCumsumConfig.stacked``), the cumsum writes one
    (batch, nheads, 4, tokens) buffer and the serial walk and chunk_out read it (their STACKED flag on); every other
    pass, the variants that leave the serial walk or its one-segment walk, and the shapes where it was measured slower
    keep the three buffers."""
    spec = SpecClass(SSDDims(4, seqlen, 8, 64, 1, dstate), torch.bfloat16, 128, True, False)
    launches, _, _ = cutile_api.plan_forward(*meta_inputs(spec), chunk_size=128, arch="sm_90",
                                             variant=VARIANTS[variant])
    flags = {}
    for launch in launches:
        names = list(inspect.signature(launch.kernel._pyfunc).parameters)
        if "STACKED" in names:
            flags.setdefault(launch.kernel._pyfunc.__name__, set()).add(launch.args[names.index("STACKED")])
        if launch.kernel._pyfunc.__name__ == "_chunk_cumsum_kernel":
            assert (launch.args[names.index("g")].dim() == 4) == expected
    if variant != "cumsum-in-kernels":
        assert flags.pop("_chunk_cumsum_kernel") == {expected}
    assert all(flag == {expected} for flag in flags.values()), flags


def _wide(launch) -> set[str]:
    from kernels.cutile.export import _wide_params

    return set(_wide_params(launch.kernel))


@pytest.mark.parametrize("variant", ["states-int64", "segmented-state"])
def test_int64_indexing_only_on_the_arrays_past_2_31(variant) -> None:
    # 256K tokens x dstate 512 (the sweep's largest point) with the chunk states in one buffer: only that buffer
    # reaches 2**31 elements (4 * 8 * 2048 * 64 * 512); x, B, C, y stay below and keep int32 offsets.
    x, dt, A, B, C, D, h0 = meta_inputs(SpecClass(SSDDims(4, 2**18, 8, 64, 1, 512), torch.bfloat16, 128, True, False))
    launches, _, _ = cutile_api.plan_forward(x, dt, A, B, C, D, h0, chunk_size=128, arch="sm_90",
                                             variant=VARIANTS[variant])
    wide = {la.kernel._pyfunc.__name__: _wide(la) for la in launches}
    state_kernel = "_state_pass_kernel"
    assert wide[state_kernel] == {"states"}
    if variant == "segmented-state":
        assert wide["_segment_apply_kernel"] == {"states"}
        assert wide["_segment_scan_kernel"] == set()
    assert wide["_chunk_out_kernel"] == {"states"}
    assert wide["_chunk_cumsum_kernel"] == set()


@pytest.mark.parametrize("variant", ["default", "serial-state", "states-untransposed"])
def test_chunk_states_past_2_31_come_in_int32_parts_walked_in_one_chain(variant) -> None:
    # The same point with the serial walk: two parts of 1024 chunks (2**30 elements each), a walk and a chunk_out
    # launch per part on views of the inputs, no int64 anywhere; the second walk starts from the first's end.
    x, dt, A, B, C, D, h0 = meta_inputs(SpecClass(SSDDims(4, 2**18, 8, 64, 1, 512), torch.bfloat16, 128, True, False))
    launches, y, final_state = cutile_api.plan_forward(x, dt, A, B, C, D, h0, chunk_size=128, arch="sm_90",
                                                       variant=VARIANTS[variant])
    assert [la.kernel._pyfunc.__name__ for la in launches] == [
        "_chunk_cumsum_kernel", "_state_pass_kernel", "_state_pass_kernel", "_chunk_out_kernel", "_chunk_out_kernel"]
    assert all(_wide(la) == set() for la in launches)
    walks, outs = launches[1:3], launches[3:]
    param = {name: i for i, name in enumerate(inspect.signature(walks[0].kernel._pyfunc).parameters)}
    out_param = {name: i for i, name in enumerate(inspect.signature(outs[0].kernel._pyfunc).parameters)}
    half = 2**17  # tokens per part
    for k, (walk, out) in enumerate(zip(walks, outs, strict=True)):
        states = walk.args[param["states"]]
        assert states.shape[2] == 1024 and states.numel() == 2**30
        assert out.args[out_param["states"]] is states
        for name in ("x", "B"):  # views of the part's tokens, not copies
            view = walk.args[param[name]]
            assert view.shape[1] == half and view.storage_offset() == k * half * view.stride(1)
        assert out.args[out_param["y"]].storage_offset() == k * half * y.stride(1)
    first_end, second_entry = walks[0].args[param["seg_end"]], walks[1].args[param["seg_entry"]]
    assert walks[0].args[param["FROM_ENTRY"]] is False and walks[1].args[param["FROM_ENTRY"]] is True
    # (each a one-segment view, unsqueeze(2), of a (batch, nheads, headdim, dstate) fp32 state)
    assert second_entry._base is first_end._base and first_end.dtype == torch.float32
    assert walks[1].args[param["seg_end"]]._base is final_state and first_end._base is not final_state


def test_int64_all_variant_widens_every_array_of_a_kernel_that_needs_it() -> None:
    x, dt, A, B, C, D, h0 = meta_inputs(SpecClass(SSDDims(4, 2**18, 8, 64, 1, 512), torch.bfloat16, 128, True, False))
    launches, _, _ = cutile_api.plan_forward(x, dt, A, B, C, D, h0, chunk_size=128, arch="sm_90",
                                             variant=VARIANTS["int64-all"])
    [out] = [la for la in launches if la.kernel._pyfunc.__name__ == "_chunk_out_kernel"]
    assert {"x", "B", "C", "states", "y"} <= _wide(out)


def test_unknown_variant_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"unknown variant 'fast'"):
        cutile_api.ssd_fwd_cutile_variant("fast")
    with pytest.raises(ValueError, match=r"unknown variant 'fast'; expected one of \['c-twice'"):
        cutile_api.launch_names(*_inputs(), arch="sm_90", variant="fast")


def test_intermediate_traffic_counts_the_chunk_states_of_the_state_pass_that_runs() -> None:
    # The headline (serial pass): bf16 chunk states written and read once, g and dt written once and read twice.
    dims = SSDDims(4, 16384, 8, 64, 1, 128)
    states, cumsum = 4 * 8 * 128 * 64 * 128, 3 * 2 * 4 * 16384 * 8 * 4
    weights = 2 * 4 * 16384 * 8 * 4  # the walk's precomputed weights, written by the cumsum and read by the walk
    g_again = 4 * 16384 * 8 * 4  # the stacked rows' second g (ChunkCumsumConfig.stacked)
    serial, how = cutile_api.intermediate_traffic(dims, torch.bfloat16, 128, "sm_90")
    assert serial == cumsum + weights + g_again + 2 * 2 * states and how.startswith("serial") and "weights" in how
    assert "g written a second time" in how
    unstacked, _ = cutile_api.intermediate_traffic(dims, torch.bfloat16, 128, "sm_90", VARIANTS["unstacked"])
    assert unstacked == serial - g_again
    # The segmented pass writes, reads and rewrites them before chunk_out reads them, plus its fp32 segment states.
    segmented, how = cutile_api.intermediate_traffic(dims, torch.bfloat16, 128, "sm_90", VARIANTS["segmented-state"])
    assert segmented > cumsum + 4 * 2 * states and how.startswith("segmented")
    # fp32 inputs keep fp32 states.
    assert cutile_api.intermediate_traffic(dims, torch.float32, 128, "sm_90")[0] == cumsum + 2 * 4 * states


def test_cb_shared_variant_plans_one_program_per_group_of_heads_and_refuses_what_does_not_divide() -> None:
    spec = SpecClass(SSDDims(4, 16384, 8, 64, 1, 128), torch.bfloat16, 128, True, False)
    grids = {}
    for name in ("default", "cb-shared-8"):
        launches, _, _ = cutile_api.plan_forward(*meta_inputs(spec), chunk_size=128, arch="sm_90",
                                                 variant=VARIANTS[name])
        [out] = [la for la in launches if la.kernel._pyfunc.__name__ == "_chunk_out_kernel"]
        grids[name] = out.grid
    assert grids["default"][0] == 8 * grids["cb-shared-8"][0], "8 heads of one group: 8 times fewer programs"
    four_groups = SpecClass(SSDDims(4, 1024, 8, 64, 4, 128), torch.bfloat16, 128, True, False)  # 2 heads a group
    with pytest.raises(ValueError, match=r"block_h=8 needs .* to divide the 2 heads of a group"):
        cutile_api.plan_forward(*meta_inputs(four_groups), chunk_size=128, arch="sm_90",
                                variant=VARIANTS["cb-shared-8"])


def test_settings_measured_slower_refuse_what_they_cannot_run_instead_of_dropping_it() -> None:
    # cb_first needs one head a program over whole chunks; g_last needs the cumsum's weights. A configuration that asks
    # for either where it cannot apply is an error naming the setting, not a kernel that silently runs without it.
    spec = SpecClass(SSDDims(4, 4096, 8, 64, 1, 128), torch.bfloat16, 128, True, False)
    base = tuning.choose("sm_90", spec.dims, torch.bfloat16, 128)
    for configs in (dataclasses.replace(base, chunk_out=dataclasses.replace(base.chunk_out, cb_first=True)),
                    dataclasses.replace(base, state_pass=dataclasses.replace(base.state_pass, g_last=True,
                                                                              wide_loads=False))):
        cutile_api.plan_forward(*meta_inputs(spec), chunk_size=128, arch="sm_90", configs=configs)
    split = dataclasses.replace(base, chunk_out=dataclasses.replace(base.chunk_out, cb_first=True, split_diag=True))
    with pytest.raises(ValueError, match=r"cb_first needs .*split_diag=True"):
        cutile_api.plan_forward(*meta_inputs(spec), chunk_size=128, arch="sm_90", configs=split)
    own = dataclasses.replace(base, state_pass=dataclasses.replace(base.state_pass, g_last=True, pre_weights=False,
                                                                   wide_loads=False))
    with pytest.raises(ValueError, match=r"g_last=True with pre_weights=False"):
        cutile_api.plan_forward(*meta_inputs(spec), chunk_size=128, arch="sm_90", configs=own)
    shared = dataclasses.replace(base, chunk_out=dataclasses.replace(base.chunk_out, causal_cb=True, block_h=2))
    with pytest.raises(ValueError, match=r"causal_cb needs one head a program \(block_h=2\)"):
        cutile_api.plan_forward(*meta_inputs(spec), chunk_size=128, arch="sm_90", configs=shared)


def _walk_flag(launches, name: str):
    """The value of the walk kernel's compile-time parameter ``name`` in a plan's (only) state-pass launch."""
    [walk] = [la for la in launches if la.kernel._pyfunc.__name__ == "_state_pass_kernel"]
    return walk.args[list(inspect.signature(walk.kernel._pyfunc).parameters).index(name)]


def test_wide_loads_reach_the_walk_where_a_step_has_chunks_to_share_a_load_and_are_refused_elsewhere() -> None:
    # One load per array for a step's UNROLL chunks: the serial walk (dstate 128, and 64 at batch 4) and the segmented
    # pass's local walk (dstate 64, two segments at batch 8) take it; a walk of one chunk a step, one that takes the
    # cumsum itself or loads g's last element alone has nothing to share and refuses it by name instead of running
    # without it.
    for batch, dstate, stage in ((4, 128, "state_pass"), (4, 64, "state_pass"), (8, 64, "segment_state")):
        spec = SpecClass(SSDDims(batch, 4096, 8, 64, 1, dstate), torch.bfloat16, 128, True, False)
        base = tuning.choose("sm_90", spec.dims, torch.bfloat16, 128)
        walk = getattr(base, stage)
        assert walk.unroll == 2 and walk.wide_loads is (stage == "state_pass")  # the chooser's serial walks only
        for wide in (False, True):
            configs = dataclasses.replace(base, **{stage: dataclasses.replace(walk, wide_loads=wide)})
            launches, _, _ = cutile_api.plan_forward(*meta_inputs(spec), chunk_size=128, arch="sm_90", configs=configs)
            assert _walk_flag(launches, "WIDE_LOADS") is wide and _walk_flag(launches, "UNROLL") == 2
    spec = SpecClass(SSDDims(4, 4096, 8, 64, 1, 128), torch.bfloat16, 128, True, False)
    base = tuning.choose("sm_90", spec.dims, torch.bfloat16, 128)
    for change, named in (({"unroll": 1}, "unroll=1"), ({"g_last": True}, "g_last=True")):
        configs = dataclasses.replace(base, state_pass=dataclasses.replace(base.state_pass, wide_loads=True, **change))
        with pytest.raises(ValueError, match=rf"wide_loads=True with .*{named}"):
            cutile_api.plan_forward(*meta_inputs(spec), chunk_size=128, arch="sm_90", configs=configs)
    raw = dataclasses.replace(base, state_pass=dataclasses.replace(base.state_pass, wide_loads=True, pre_weights=False))
    with pytest.raises(ValueError, match=r"wide_loads=True with .*raw_dt=True"):
        cutile_api.plan_forward(*meta_inputs(spec), chunk_size=128, arch="sm_90", configs=raw,
                                variant=VARIANTS["cumsum-in-kernels"])


def test_launch_names_are_the_plan_of_the_variant_on_meta_tensors() -> None:
    # What the benchmark names our per-kernel times by: the default at dstate 64 past 128 chunks (for bf16 at the
    # benchmark's batch 4 and 8 heads, the segmented pass completed in chunk_out; segmented with its completion launch
    # with a quarter of the walk's programs, or for fp32), the segmented variant's five kernels; real-sized inputs
    # are planned on the meta device, nothing allocated.
    segout = ["_chunk_cumsum_kernel", "_state_pass_kernel", "_segment_scan_kernel", "_chunk_out_kernel"]
    segmented = ["_chunk_cumsum_kernel", "_state_pass_kernel", "_segment_scan_kernel", "_segment_apply_kernel",
                 "_chunk_out_kernel"]
    for batch, dtype, default in ((4, torch.bfloat16, segout), (1, torch.bfloat16, segmented),
                                  (4, torch.float32, segmented)):
        spec = SpecClass(SSDDims(batch, 32768, 8, 64, 1, 64), dtype, 128, True, False)
        x, dt, A, B, C, D, h0 = meta_inputs(spec)
        assert cutile_api.launch_names(x, dt, A, B, C, D, h0, chunk_size=128, arch="sm_90") == default
        assert cutile_api.launch_names(x, dt, A, B, C, D, h0, chunk_size=128, arch="sm_90",
                                       variant="segmented-state") == segmented


@pytest.mark.parametrize("variant,dstate,transposed", [
    ("default", 512, True), ("states-untransposed", 512, False), ("no-swap", 512, False), ("default", 256, False),
    ("states-transposed", 256, True)])
def test_the_chunk_states_layout_is_the_walks_and_chunk_out_is_told(variant, dstate, transposed) -> None:
    # The swapped walk (dstate 256, 512): the states laid out as it carries them, (..., dstate, headdim), from dstate
    # 512, else (..., headdim, dstate), unless the variant says otherwise (the unswapped walk keeps (headdim,
    # dstate)); the walk and chunk_out receive the same STATES_T constant, so one writes what the other reads.
    spec = SpecClass(SSDDims(4, 16384, 8, 64, 1, dstate), torch.bfloat16, 128, True, False)
    launches, _, _ = cutile_api.plan_forward(*meta_inputs(spec), chunk_size=128, arch="sm_90",
                                             variant=VARIANTS[variant])
    by_name = {la.kernel._pyfunc.__name__: la for la in launches}
    walk, out = by_name["_state_pass_kernel"], by_name["_chunk_out_kernel"]
    walk_params = list(inspect.signature(walk.kernel._pyfunc).parameters)
    out_params = list(inspect.signature(out.kernel._pyfunc).parameters)
    states = walk.args[walk_params.index("states")]
    assert states is out.args[out_params.index("states")]
    assert tuple(states.shape[3:]) == ((dstate, 64) if transposed else (64, dstate))
    assert walk.args[walk_params.index("STATES_T")] is transposed
    assert out.args[out_params.index("STATES_T")] is transposed
    assert walk.args[walk_params.index("SWAP_AB")] is (variant != "no-swap")


@pytest.mark.parametrize("seqlen,dstate,chunk", [(16384, 128, 128), (16384, 512, 128), (1024, 256, 128),
                                                 (262144, 512, 128), (16384, 128, 256), (4096, 64, 64),
                                                 (4096, 64, 128), (16384, 64, 128)])
def test_every_exploration_candidate_plans(seqlen, dstate, chunk) -> None:
    # explore_cutile's candidates run on a GPU one after another: one that cannot even be planned would only
    # show there, after the GPU time before it. Each must plan on meta tensors, under a name of its own, and each
    # configuration come once (the names that reach it again in ``also``), still selected by any of its names.
    from validation.bench.explore_cutile import _candidates

    spec = ProblemSpec(batch=4, seqlen=seqlen, nheads=8, headdim=64, ngroups=1, dstate=dstate, chunk_size=chunk,
                       dtype="bf16")
    candidates = _candidates(spec, torch.bfloat16, None)
    names = [name for name, *_, also in candidates for name in (name, *also)]
    assert candidates[0][0] == "default" and len(set(names)) == len(names)
    configs = [(variant, cfgs) for _, variant, cfgs, _ in candidates]
    assert len(set(configs)) == len(configs), "a configuration timed twice"
    x, dt, A, B, C, D, h0 = meta_inputs(SpecClass(SSDDims(4, seqlen, 8, 64, 1, dstate), torch.bfloat16, chunk, True,
                                                  False))
    for name, variant, cfgs, _ in candidates:
        launches, _, _ = cutile_api.plan_forward(x, dt, A, B, C, D, h0, chunk_size=chunk, arch="sm_90",
                                                 variant=VARIANTS[variant], configs=cfgs)
        assert launches, name
    only = _candidates(spec, torch.bfloat16, ["state "])
    assert only[0][0] == "default" and all(name.startswith("state ") for name, *_ in only[1:])
    aliases = [also[0] for *_, also in candidates if also]
    for alias in aliases[:3]:  # under that name, or beside the default's, which every run times
        assert any(alias in (name, *also) for name, *_, also in _candidates(spec, torch.bfloat16, [alias])), alias


def test_every_exp2_of_the_kernels_goes_through_the_one_helper() -> None:
    """The kernels' exponentials are decays taken with subnormal results flushed (kernels.cutile._launch.exp2); a bare
    ct.exp2 would quietly compile to the five-instruction form the helper exists to avoid."""
    bare = []
    for path in sorted(Path(cutile_api.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "exp2"
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "ct"
                    and not (path.name == "_launch.py"
                             and any(kw.arg == "flush_to_zero" for kw in node.keywords))):
                bare.append(f"{path.name}:{node.lineno}")
    assert not bare, f"ct.exp2 called outside kernels.cutile._launch.exp2 at {bare}"


@pytest.mark.parametrize("tag,change", matrix.BENCH_LONG_CASES, ids=[tag for tag, _ in matrix.BENCH_LONG_CASES])
def test_the_stability_suites_long_cases_plan_the_pass_their_name_says(tag: str, change: dict) -> None:
    """The stability cases meant to carry the serial walk ("serial_") or the segmented pass completed in chunk_out
    ("segout_") past 128 chunks at batch 4, or that pass in two segments without a scan ("twoseg_", at batch 8), plan it
    on the H200 (sm_90): if the chooser moves them to another state pass, they no longer test what their name says."""
    spec = dict(matrix.stability_cases())[tag]
    dims = SSDDims(spec.batch, spec.seqlen, spec.nheads, spec.headdim, spec.ngroups, spec.dstate)
    meta = meta_inputs(SpecClass(dims, torch.bfloat16, spec.chunk_size, spec.with_D, spec.with_initial_state))
    assert spec.dtype == "bf16"
    launches, _, _ = cutile_api.plan_forward(*meta, chunk_size=spec.chunk_size, arch="sm_90")
    names = [la.kernel._pyfunc.__name__ for la in launches]
    out = dict(zip(inspect.signature(launches[-1].kernel._pyfunc).parameters, launches[-1].args, strict=True))
    plans = {"serial": ["_chunk_cumsum_kernel", "_state_pass_kernel", "_chunk_out_kernel"],
             "segout": ["_chunk_cumsum_kernel", "_state_pass_kernel", "_segment_scan_kernel", "_chunk_out_kernel"],
             "twoseg": ["_chunk_cumsum_kernel", "_state_pass_kernel", "_chunk_out_kernel"]}
    kind = tag.split("_")[0]
    assert names == plans[kind], names
    # chunk_out completes local states (segout, twoseg), and reads the segments' end states (twoseg) or not.
    assert (out["SEG_CHUNKS"] > 0, out["SEG_FROM_END"]) == {"serial": (False, False), "segout": (True, False),
                                                           "twoseg": (True, True)}[kind]
    if kind != "twoseg":
        assert -(-spec.seqlen // spec.chunk_size) > 128


@pytest.mark.parametrize("nchunks,segments,unroll,expected", [
    (128, 1, 2, (state_pass.WHOLE_SEQUENCE, 1)),   # one segment: the serial walk as it was
    (3, 2, 2, (state_pass.WHOLE_SEQUENCE, 1)),     # too short to split into segments of two chunks
    (4, 2, 2, (2, 2)),
    (32, 2, 2, (16, 2)),
    (33, 2, 2, (32, 2)),                           # powers of two: 32 + 1
    (100, 2, 2, (64, 2)),
    (128, 4, 2, (32, 4)),
    (3, 2, 1, (2, 2)),
])
def test_prefix_segments_are_powers_of_two_of_at_least_the_unroll(nchunks, segments, unroll, expected) -> None:
    assert state_pass.prefix_segments(nchunks, segments, unroll) == expected


def test_a_walk_in_segments_plans_one_walk_with_a_program_per_segment_and_tile() -> None:
    """Two segments: twice the walk's programs, with PREFIX; the variant two-segment-walk asks for them."""
    spec = SpecClass(SSDDims(4, 16384, 8, 64, 1, 128), torch.bfloat16, 128, True, True)
    chosen = tuning.choose("sm_90", spec.dims, spec.dtype, 128)
    assert chosen.state_pass.segments == 1, "the chooser's: one walk through the sequence (two measured slower)"
    whole = dataclasses.replace(chosen, state_pass=dataclasses.replace(chosen.state_pass, segments=1))
    split = dataclasses.replace(chosen, state_pass=dataclasses.replace(chosen.state_pass, segments=2))
    one, _, _ = cutile_api.plan_forward(*meta_inputs(spec), chunk_size=128, arch="sm_90", configs=whole)
    two, _, _ = cutile_api.plan_forward(*meta_inputs(spec), chunk_size=128, arch="sm_90", configs=split)
    walk_one, walk_two = (next(la for la in plan if la.kernel._pyfunc.__name__ == "_state_pass_kernel")
                          for plan in (one, two))
    names = list(inspect.signature(walk_two.kernel._pyfunc).parameters)
    assert [la.kernel._pyfunc.__name__ for la in two] == [la.kernel._pyfunc.__name__ for la in one]
    assert walk_two.grid == (2 * walk_one.grid[0], walk_one.grid[1])
    assert walk_two.args[names.index("PREFIX")] and not walk_one.args[names.index("PREFIX")]
    assert walk_two.args[names.index("SEG_CHUNKS")] == 64  # 128 chunks in two segments
    asked, _, _ = cutile_api.plan_forward(*meta_inputs(spec), chunk_size=128, arch="sm_90",
                                          variant=VARIANTS["two-segment-walk"])
    assert [(la.kernel, la.grid) for la in asked] == [(la.kernel, la.grid) for la in two]
