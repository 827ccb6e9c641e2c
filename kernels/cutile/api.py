"""``ssd_fwd_cutile``: check the inputs, plan the three stages, launch them in order."""

from __future__ import annotations

import functools
from dataclasses import replace

import cuda.tile as ct
import torch

from kernels.cutile import tuning
from kernels.cutile._launch import Launch
from kernels.cutile.chunk_cumsum import chunk_cumsum, cumsum_buffers
from kernels.cutile.chunk_out import chunk_out
from kernels.cutile.limits import LIMITS
from kernels.cutile.recipe import Layout, Recipe, layout, meta_like, record
from kernels.cutile.segment_out import segment_out
from kernels.cutile.segment_state import scan_needed, segment_state, segment_state_local
from kernels.cutile.state_pass import state_dtype, state_pass
from kernels.cutile.tuning import VARIANTS, Configs, Variant
from reference.checks import SSDDims, check_inputs, is_power_of_two

__all__ = ["ssd_fwd_cutile", "ssd_fwd_cutile_variant", "check_kernel_limits", "check_configs", "plan_forward",
           "intermediate_traffic", "launch_names"]

_WHO = "ssd_fwd_cutile"

# The most programs a launch may have along each grid axis: cuTile's 24-bit limit (ct.launch: "Grid[0] exceeds 24-bit
# limit"), and CUDA's 65535 along gridDim.y and z, which cuTile does not check.
GRID_LIMITS = (2**24 - 1, 65535, 65535)


def check_kernel_limits(dims: SSDDims) -> None:
    """Refuse, naming the argument, what the kernels do not tile (``LIMITS``): they need power-of-two tiles."""
    if dims.headdim not in LIMITS.headdims:
        raise ValueError(f"{_WHO}: x has headdim={dims.headdim} (x.shape[3]); "
                         f"expected one of {list(LIMITS.headdims)}")
    if dims.dstate not in LIMITS.dstates:
        raise ValueError(f"{_WHO}: B and C have dstate={dims.dstate} (B.shape[3]); expected a power of two "
                         f"from 16 to 512: one of {list(LIMITS.dstates)}")
    if dims.batch > LIMITS.max_batch:
        raise ValueError(f"{_WHO}: x has batch={dims.batch} (x.shape[0]); expected at most {LIMITS.max_batch} "
                         "(the CUDA grid limit); split the batch")


def _check(x, dt, A, B, C, D, initial_state, chunk_size, *, launching: bool) -> SSDDims:
    """The forward's checks, for ``_forward`` (``launching``) and for the plans on any device (``plan_forward``,
    ``launch_names``), so that a plan refuses what the forward refuses, with the same message.

    A plan needs no CUDA device (it is made on meta tensors too) and reads no values: dt's and A's domain is checked
    (``check_domain``, one host synchronisation) only before a launch. Tensors that require grad are refused in both:
    our kernels have no backward, and torch refuses a launch the array interface of such a tensor (a bare
    RuntimeError after the launches before it); detaching them here instead would return a y that silently carries no
    gradient."""
    dims = check_inputs(x, dt, A, B, C, D, initial_state, chunk_size=chunk_size, who=_WHO,
                        domain="mamba" if launching else "any", chunk_sizes=LIMITS.chunk_sizes,
                        require_cuda=LIMITS.needs_cuda and launching, refuse_grad=True)
    check_kernel_limits(dims)
    return dims


def check_configs(configs: Configs, dims: SSDDims, chunk_size: int) -> None:
    """Refuse, naming ``configs``, the stage and the field, a caller's configurations whose tiles do not fit this
    problem: a tile must be a power of two (cuTile's tiles are) no larger than the dimension it tiles, as
    ``tuning.choose`` builds them (``min(block, dim)``); the dimensions being powers of two (``check_kernel_limits``),
    such a tile divides its dimension, so every grid has programs and every element of y and the final state is
    written. The chunk cumsum's heads are the exception: their tile is zero-padded (nheads 3 gets 4), so any power
    of two. Segment lengths and scan steps, in chunks, must be powers of two. Checks every stage, run or not."""
    if not isinstance(configs, Configs):
        raise TypeError(f"{_WHO}: configs must be a kernels.cutile.tuning.Configs (or None: the choosers'); got "
                        f"{type(configs).__name__}")
    headdim = ("headdim", dims.headdim, "x.shape[3]")
    dstate = ("dstate", dims.dstate, "B.shape[3]")
    chunk = ("chunk_size", chunk_size, "chunk_size")
    walk = {"block_p": headdim, "block_n": dstate, "seg_chunks": None}
    tiles = {
        "chunk_cumsum": {"block_h": None},
        "state_pass": {"block_p": headdim, "block_n": dstate},
        "segment_state": walk,
        "chunk_state": walk,
        "segment_scan": {"block_p": headdim, "block_n": dstate, "step": None},
        "segment_apply": {"block_p": headdim, "block_n": dstate},
        "chunk_out": {"block_m": chunk, "block_p": headdim, "block_n": dstate},
        "segment_out": {"block_p": headdim, "seg_chunks": None},
    }
    for stage, fields in tiles.items():
        cfg = getattr(configs, stage)
        for field, dim in fields.items():
            value = getattr(cfg, field)
            if dim is None:
                if not is_power_of_two(value):
                    raise ValueError(f"{_WHO}: configs.{stage}.{field}={value!r}; expected a power of two >= 1")
                continue
            name, size, where = dim
            if not is_power_of_two(value) or value > size:
                raise ValueError(f"{_WHO}: configs.{stage}.{field}={value!r} does not fit the problem's {name}={size} "
                                 f"({where}), which it tiles; expected a power of two from 1 to {size}")


def _check_grids(launches: list[Launch], dims: SSDDims, chunk_size: int) -> None:
    """Refuse a plan with a grid past ``GRID_LIMITS`` (or without programs) before anything is launched, naming the
    sizes that grow it: along axis 0 the tokens and heads (with the headdim and dstate tiles), along 1 and 2 the
    batch (refused past 65535 by ``check_kernel_limits`` already) or, for the chunk cumsum, the heads."""
    for launch in launches:
        for axis, (programs, limit) in enumerate(zip(launch.grid, GRID_LIMITS, strict=False)):
            if 1 <= programs <= limit:
                continue
            raise ValueError(
                f"{_WHO}: x has seqlen={dims.seqlen} (x.shape[1]) and nheads={dims.nheads} (x.shape[2]) (headdim="
                f"{dims.headdim}, dstate={dims.dstate}, batch={dims.batch}, chunk_size={chunk_size}): the kernel "
                f"{launch.kernel._pyfunc.__name__} would launch {programs} programs along grid axis {axis} "
                f"{tuple(launch.grid)}; expected 1 to {limit} (cuTile's and CUDA's limit on a grid axis): split the "
                "sequence or the heads into several calls")


def _dense(t: torch.Tensor | None) -> torch.Tensor | None:
    """The tensor itself, strides included, unless it broadcasts (a zero stride): then a copy.

    cuTile arrays carry shape and strides, so views (e.g. slices of a wider projection) are read in
    place with their strides; only a broadcast view, which a tile load may not take, is copied.
    """
    if t is None or all(s != 0 or n == 1 for n, s in zip(t.shape, t.stride(), strict=True)):
        return t
    return t.contiguous()


def _skips_scan(variant: Variant, nchunks: int, seg_chunks: int, has_initial_state: bool) -> bool:
    """Whether the segmented pass completed in chunk_out runs without its scan: in two segments without an initial
    state (``scan_needed``), unless the variant keeps it (``two_segment_scan``)."""
    return not variant.two_segment_scan and not scan_needed(nchunks, seg_chunks, has_initial_state)


def plan_forward(x, dt, A, B, C, D, initial_state, *, chunk_size: int, arch: str,
                 variant: Variant = VARIANTS["default"],
                 configs: Configs | None = None) -> tuple[list[Launch], torch.Tensor, torch.Tensor]:
    """Check the inputs as the forward does (but on any device, meta too, and without reading dt's and A's values:
    ``_check``), allocate the buffers and plan the launches.

    ``configs``: every stage's tiles (None: ``tuning.choose``'s for this problem), refused unless they fit it
    (``check_configs``); the variant's ``c_once`` and ``cb_heads`` (if > 1) still decide chunk_out's. A plan with a
    grid past cuTile's or CUDA's limits is refused (``GRID_LIMITS``).

    Intermediates, all on x's device:
        g, dtT  (batch, nheads, nchunks * chunk_size) fp32: log2-scaled in-chunk cumsum of A*dt, and dt,
                head-major and token-contiguous, zero dt over a ragged tail;
        states  (batch, nheads, nchunks, headdim, dstate): each chunk's entry state (bf16 for bf16
                inputs, else fp32; see state_pass.state_dtype; (..., dstate, headdim) from a serial walk whose
                configuration says ``states_t``; past 2**31 elements, the serial walk's come in parts of
                consecutive chunks that each fit int32 indexing), by the segment-parallel state pass
                (kernels.cutile.segment_state; its fp32 segment states and decays besides; with segments of
                one chunk, the "chunked" pass) or by one program per state tile walking every chunk
                (kernels.cutile.state_pass);
        cbuf    (batch, nchunks, ngroups, chunk_size, chunk_size) fp32: C·Bᵀ per chunk and group, if
                chunk_out's configuration reads it from a buffer.
    """
    dims = _check(x, dt, A, B, C, D, initial_state, chunk_size, launching=False)
    return _plan(x, dt, A, B, C, D, initial_state, dims, chunk_size=chunk_size, arch=arch, variant=variant,
                 configs=configs)


def _plan(x, dt, A, B, C, D, initial_state, dims: SSDDims, *, chunk_size: int, arch: str, variant: Variant,
          configs: Configs | None) -> tuple[list[Launch], torch.Tensor, torch.Tensor]:
    """``plan_forward`` for inputs ``_check`` passed (``dims``: their sizes): the caller's configurations checked
    first, the grids before anything is launched."""
    if configs is not None:
        check_configs(configs, dims, chunk_size)
    launches, y, final_state = _plan_stages(x, dt, A, B, C, D, initial_state, dims, chunk_size=chunk_size, arch=arch,
                                            variant=variant, configs=configs)
    _check_grids(launches, dims, chunk_size)
    return launches, y, final_state


def _plan_stages(x, dt, A, B, C, D, initial_state, dims: SSDDims, *, chunk_size: int, arch: str, variant: Variant,
                 configs: Configs | None) -> tuple[list[Launch], torch.Tensor, torch.Tensor]:
    cfgs = configs if configs is not None else tuning.choose(arch, dims, x.dtype, chunk_size)
    wide = variant.int64 == "all"
    x, dt, A, B, C, D, initial_state = (_dense(t) for t in (x, dt, A, B, C, D, initial_state))
    out_cfg = cfgs.chunk_out.with_variant(variant)
    kind = variant.state if variant.state != "auto" else tuning.state_pass_kind(arch, dims, x.dtype, chunk_size,
                                                                                 initial_state is not None)
    walk_cfg = tuning.serial_walk_config(cfgs.state_pass, variant, arch, dims, x.dtype, chunk_size)
    seg_cfg = tuning.segment_walk_config(cfgs.chunk_state if kind == "chunked" else cfgs.segment_state, variant)
    cumsum_out = None
    if variant.cumsum_in_kernels:
        # No cumsum launch: the walks read the caller's A and dt in place of g and dt, weigh their chunks themselves
        # and fill the cumsum's buffers for chunk_out.
        if kind == "fused":
            raise ValueError(f"{_WHO}: the variant's cumsum in the walk does not cover the fused pass")
        cumsum_out = cumsum_buffers(dt, chunk_size)
        cumsum_launches, g, dtT, w, weights = [], A, dt, None, False
    else:
        # The walks may read the chunk-state weights precomputed by the cumsum (``pre_weights``).
        weights = walk_cfg.pre_weights if kind == "serial" else kind != "fused" and seg_cfg.pre_weights
        cumsum_cfg = replace(cfgs.chunk_cumsum, stacked=_stacks(cfgs.chunk_cumsum, variant, kind, walk_cfg))
        cumsum_launch, g, dtT, w = chunk_cumsum(dt, A, chunk_size=chunk_size, cfg=cumsum_cfg,
                                                int64_everywhere=wide, weights=weights)
        cumsum_launches = [cumsum_launch]
    if kind == "fused":
        fused, y, final_state = segment_out(x, B, C, g, dtT, D, A, initial_state, chunk_size=chunk_size,
                                            cfg=cfgs.segment_out, walk_cfg=cfgs.segment_state,
                                            scan_cfg=cfgs.segment_scan, int64_everywhere=wide)
        return [*cumsum_launches, *fused], y, final_state
    seg = None  # what completes the chunk states in chunk_out, if the segmented pass leaves them local
    if kind == "serial":
        state_launches, states, final_state = state_pass(
            x, B, g, w if weights else dtT, initial_state, chunk_size=chunk_size, cfg=walk_cfg, int64_everywhere=wide,
            split=variant.split_states, cumsum_out=cumsum_out)
        states_t = walk_cfg.states_t
    elif kind == "segmented-out" and seg_cfg.seg_chunks > 1:
        # chunk_out completes the local states as it reads them: no completion launch; in two segments without an
        # initial state no scan either (chunk_out then writes the final state).
        skip = _skips_scan(variant, -(-dims.seqlen // chunk_size), seg_cfg.seg_chunks, initial_state is not None)
        state_launches, whole, final_state, seg = segment_state_local(
            x, B, g, w if weights else dtT, initial_state, chunk_size=chunk_size, cfg=seg_cfg,
            scan_cfg=cfgs.segment_scan, scan=not skip, int64_everywhere=wide, cumsum_out=cumsum_out)
        states, states_t = [(0, whole)], False
    else:
        state_launches, whole, final_state = segment_state(
            x, B, g, w if weights else dtT, initial_state, chunk_size=chunk_size, cfg=seg_cfg,
            scan_cfg=cfgs.segment_scan, apply_cfg=cfgs.segment_apply, int64_everywhere=wide,
            cumsum_out=cumsum_out)
        states, states_t = [(0, whole)], False
    if cumsum_out is not None:
        g, dtT = cumsum_out
    out_launches, y = chunk_out(
        x, B, C, g, dtT, states, D, A, chunk_size=chunk_size, cfg=out_cfg, states_t=states_t, seg=seg,
        int64_everywhere=wide)
    return [*cumsum_launches, *state_launches, *out_launches], y, final_state


def _stacks(cumsum_cfg: tuning.ChunkCumsumConfig, variant: Variant, kind: str, walk_cfg: tuning.StatePassConfig) -> bool:
    """Whether the cumsum writes its rows stacked (``ChunkCumsumConfig.stacked``, or the variant's say): only for the
    serial walk of one segment that reads the weights and whole rows of g (not g_last), and chunk_out."""
    stacked = cumsum_cfg.stacked if variant.stacked is None else variant.stacked
    return (stacked and kind == "serial" and walk_cfg.pre_weights and walk_cfg.segments == 1 and not walk_cfg.g_last
            and not variant.cumsum_in_kernels)


def intermediate_traffic(dims: SSDDims, dtype: torch.dtype, chunk_size: int, arch: str,
                         variant: Variant = VARIANTS["default"]) -> tuple[int, str]:
    """The bytes our forward moves beyond the compulsory traffic (its intermediates), and how, in one line.

    The analytic floor of the design that runs: the benchmark adds these bytes to the compulsory ones. Counts
    every write and every read of an intermediate once (L2 hits are counted as traffic: an upper bound on
    what the design must move, not a measurement).
    """
    tuning.check_problem(arch, dims, dtype, chunk_size, who="intermediate_traffic")
    nchunks = -(-dims.seqlen // chunk_size)
    tokens = dims.batch * nchunks * chunk_size
    elems = dims.batch * dims.nheads * nchunks * dims.headdim * dims.dstate
    e = torch.empty((), dtype=state_dtype(dtype)).element_size()
    name = str(state_dtype(dtype)).removeprefix("torch.")
    if variant.cumsum_in_kernels:
        # g and dtT: written by the walk, which takes the cumsum itself, read by chunk_out.
        cumsum, scalars_how = 2 * 2 * tokens * dims.nheads * 4, "the walk's cumsum g and dt written once, read once"
    else:
        # g and dtT: written by the cumsum, read by the state pass and by chunk_out.
        cumsum, scalars_how = 3 * 2 * tokens * dims.nheads * 4, "the cumsum's g and dt written once, read twice"
    kind = variant.state if variant.state != "auto" else tuning.state_pass_kind(arch, dims, dtype, chunk_size)
    out_cfg = tuning.chunk_out_config(arch, dims, dtype, chunk_size).with_variant(variant)
    cb, cb_how = 0, ""
    if out_cfg.cb_buffer and out_cfg.whole_chunks(chunk_size):
        # Written once, read by every head of the group.
        cb = dims.batch * nchunks * dims.ngroups * chunk_size * chunk_size * 4 * (1 + dims.nheads // dims.ngroups)
        cb_how = "; fp32 C·Bᵀ per chunk and group written once, read by each head"
    if kind == "serial":
        walk_cfg = tuning.serial_walk_config(tuning.state_pass_config(arch, dims, dtype, chunk_size), variant, arch,
                                             dims, dtype, chunk_size)
        if walk_cfg.pre_weights:
            # The chunk-state weights: written by the cumsum, read by the walk.
            cumsum += 2 * tokens * dims.nheads * 4
            cb_how = "; the cumsum's chunk-state weights written once, read once" + cb_how
        if _stacks(tuning.chunk_cumsum_config(arch, dims, dtype, chunk_size), variant, kind, walk_cfg):
            # Stacked rows w, g, g, dt: g written twice.
            cumsum += tokens * dims.nheads * 4
            cb_how = "; g written a second time (the stacked rows)" + cb_how
        return cumsum + cb + 2 * elems * e, (f"serial state pass: {name} chunk states written once and read once; "
                                             f"{scalars_how}{cb_how}")
    if kind == "chunked":
        return cumsum + cb + 2 * elems * e + 2 * elems * 4, (
            f"chunked state pass: fp32 chunk contributions written and scanned; {name} chunk states written once "
            f"and read once; {scalars_how}{cb_how}")
    def segment_bytes(seg_chunks: int) -> int:  # one fp32 state per segment
        return dims.batch * dims.nheads * -(-nchunks // seg_chunks) * dims.headdim * dims.dstate * 4

    if kind == "fused":
        K = tuning.segment_out_config(arch, dims, dtype, chunk_size).seg_chunks
        seg = segment_bytes(K)
        x_b = tokens * (dims.nheads * dims.headdim + dims.ngroups * dims.dstate) * torch.empty((), dtype=dtype).element_size()
        return cumsum + 4 * seg + x_b, (
            f"fused pass (segments of {K} chunks): no chunk state in memory; fp32 segment states written and "
            f"scanned, entry states written and read; x and B read a second time by the local walk; {scalars_how}")
    seg_cfg = tuning.segment_walk_config(tuning.segment_state_config(arch, dims, dtype, chunk_size), variant)
    K = seg_cfg.seg_chunks
    seg = segment_bytes(K)
    if seg_cfg.pre_weights:
        cumsum += 2 * tokens * dims.nheads * 4
        cb_how = "; the cumsum's chunk-state weights written once, read once" + cb_how
    if kind == "segmented-out" and K > 1 and _skips_scan(variant, nchunks, K, False):
        # Two segments: the local states written and read once; segment 0's fp32 end state read with each chunk of
        # segment 1 (at most half a state a chunk, elems / 2 in fp32) and, with segment 1's, once for the final state.
        return cumsum + cb + 2 * elems * e + elems // 2 * 4 + 2 * seg, (
            f"segmented state pass in two segments of {K} chunks completed in chunk_out: {name} local chunk states "
            f"written once and read once; fp32 segment end states written once, segment 0's read with each chunk of "
            f"segment 1, both for the final state; {scalars_how}{cb_how}")
    if kind == "segmented-out" and K > 1:
        # E_s in the states' dtype, written by the scan and read by chunk_out once per chunk: at most one state a
        # chunk, elems * e (an upper bound, as everywhere here).
        return cumsum + cb + 3 * elems * e + 2 * seg, (
            f"segmented state pass (segments of {K} chunks) completed in chunk_out: {name} local chunk states written "
            f"once and read once; fp32 segment states written and scanned, {name} entry states read with each "
            f"chunk; {scalars_how}{cb_how}")
    return cumsum + cb + 4 * elems * e + 3 * seg, (
        f"segmented state pass (segments of {K} chunks): {name} chunk states written, read and rewritten by "
        f"the completion, read by chunk_out; fp32 segment states written, scanned, written; {scalars_how}{cb_how}")


def _variant(name: str) -> Variant:
    if name not in VARIANTS:
        raise ValueError(f"{_WHO}: unknown variant {name!r}; expected one of {sorted(VARIANTS)}")
    return VARIANTS[name]


def launch_names(x, dt, A, B, C, D=None, initial_state=None, *, chunk_size: int = 128, arch: str,
                 variant: str = "default", configs: Configs | None = None) -> list[str]:
    """The kernels one call of ``ssd_fwd_cutile_variant(variant, configs=configs)`` launches on these inputs, in
    launch order: the plan ``plan_forward`` makes for them on the meta device (nothing is allocated or
    launched). The inputs are checked as the forward checks them (``plan_forward``), values aside."""
    variant_ = _variant(variant)
    # Anything but a tensor goes to the checks as it came, which name it.
    meta = [meta_like(layout(t)).requires_grad_(t.requires_grad) if isinstance(t, torch.Tensor) else t
            for t in (x, dt, A, B, C, D, initial_state)]
    launches, _, _ = plan_forward(*meta, chunk_size=chunk_size, arch=arch, variant=variant_, configs=configs)
    return [launch.kernel._pyfunc.__name__ for launch in launches]


@functools.lru_cache(maxsize=256)
def _recipe(layouts: tuple[Layout, ...], chunk_size: int, arch: str, variant: Variant,
            configs: Configs | None) -> Recipe | None:
    """The plan for inputs of these layouts (``recipe.layout``: sizes, strides, dtypes), made once on meta tensors
    (``recipe.record``; None where it cannot be replayed). A plan refused (a caller's configuration or a grid that does
    not fit) raises here, and is tried again on the next call, which raises the same."""
    meta = [meta_like(lay) for lay in layouts]
    dims = _check(*meta, chunk_size, launching=False)
    return record(lambda: _plan(*meta, dims, chunk_size=chunk_size, arch=arch, variant=variant, configs=configs), meta)


@functools.cache
def _arch(device: torch.device) -> str:
    major, minor = torch.cuda.get_device_capability(device)
    return f"sm_{major}{minor}"


def _forward(x, dt, A, B, C, D, initial_state, chunk_size: int, variant: Variant, configs: Configs | None = None):
    dims = _check(x, dt, A, B, C, D, initial_state, chunk_size, launching=True)
    arch = _arch(x.device)
    # Every check, the configurations' and the grids' included, is done before the first launch. The plan depends on
    # the inputs' layouts alone: made once per layout (``_recipe``), replayed on these tensors with fresh buffers.
    if configs is not None and not isinstance(configs, Configs):
        check_configs(configs, dims, chunk_size)  # refuses it by name before the cache sees it; the rest: the plan's
    inputs = (x, dt, A, B, C, D, initial_state)
    recipe = _recipe(tuple(layout(t) for t in inputs), chunk_size, arch, variant, configs)
    if recipe is None:
        launches, y, final_state = _plan(*inputs, dims, chunk_size=chunk_size, arch=arch, variant=variant,
                                         configs=configs)
    else:
        launches, y, final_state = recipe.replay(inputs, x.device)
    with torch.cuda.device(x.device):
        stream = torch.cuda.current_stream()
        for launch in launches:
            ct.launch(stream, launch.grid, launch.kernel, launch.args)
    return y, final_state


def ssd_fwd_cutile_variant(name: str, *, configs: Configs | None = None):
    """``ssd_fwd_cutile`` with one of ``tuning.VARIANTS`` (an ablation that undoes one optimization), and with
    ``configs`` for every call's stages if given (``plan_forward``'s; None: the choosers')."""
    variant = _variant(name)

    def forward(x, dt, A, B, C, D=None, initial_state=None, chunk_size: int = 128):
        return _forward(x, dt, A, B, C, D, initial_state, chunk_size, variant, configs)

    forward.__name__ = f"ssd_fwd_cutile[{name}]"
    return forward


def ssd_fwd_cutile(
    x: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    D: torch.Tensor | None = None,
    initial_state: torch.Tensor | None = None,
    chunk_size: int = 128,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mamba-2 SSD forward in cuTile: returns y (x's dtype and shape) and final_state (fp32).

    Takes mamba_ssm's layout (see reference.checks.check_inputs); headdim in 32/64/128, dstate a
    power of two from 16 to 512, chunk_size 64/128/256, any seqlen >= 1.
    """
    return _forward(x, dt, A, B, C, D, initial_state, chunk_size, VARIANTS["default"])
