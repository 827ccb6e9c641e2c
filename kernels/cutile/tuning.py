"""Tile sizes and occupancy of each stage: a frozen dataclass per kernel and the function choosing it.

Heuristics for now, from (arch, dims, dtype); :func:`choose` gathers every stage's choice into one
:class:`Configs`, and a caller that explores other tiles passes its own to ``plan_forward(configs=)``.
Every field here becomes a compile-time constant of its kernel, so the export in
``kernels.cutile.export`` walks the same choosers to list what gets compiled.

Apart from which state pass runs (by the number of chunks), the grids' sizes and two choices made by the number of
programs (at dstate 64, the segmented pass's local walk 32 wide in two segments and 64 wide in more; chunk_out's row
blocks taken heaviest first in grids of at most four programs a slot), the tiles and hints do not depend on the
sequence length: at 4096 and 8192 tokens and dstate 128 and 512 on the H200, none of 134 candidates
around them (the walk's depths and tiles, chunk_out's hints and occupancy, the cumsum's grid) was faster by more
than the spread between reps (explore_cutile, 2026-12-04, reports/published/0.1.0+20261204T010330Z-c5c0f9e).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from reference.checks import FLOAT_DTYPES, SSDDims, dtype_name

# Programs the grids aim at, per architecture: (the sequential state pass, the segment-parallel pass's local
# walk). On the H200 (sm_90, 132 SMs), where they were measured: about 2 and 4 per SM (both walks at occupancy
# 2 and 4, so that each program's chain of dependent chunk steps is hidden behind the others'). The B200 (sm_100)
# and B300 (sm_103) have 148 SMs: the H200's figures scaled by 148/132, compile-checked on the CPU
# (validation/test_compile.py), not measured. An architecture not listed gets the H200's (and its SM count).
TARGET_PROGRAMS = {"sm_90": (256, 512), "sm_100": (288, 576), "sm_103": (288, 576)}
SM_COUNT = {"sm_90": 132, "sm_100": 148, "sm_103": 148}
_MAX_SEGMENT_CHUNKS = 64


def _walk_fills_the_gpu(arch: str, programs: int) -> bool:
    """Whether a serial walk of ``programs`` programs has about one an SM or more: at least three quarters of the
    SMs. Where the choices below were measured (the H200, batch 4 and 8 heads), the walk had 128 programs on 132 SMs;
    the B200 and B300 (148 SMs) get that batch's choices too, since a walk of at most one program an SM takes the
    same time whatever the number of SMs left idle. On the H200 the band changes nothing for a grid of whole batches
    of 8 heads (96 programs < 99 <= 128)."""
    return 4 * programs >= 3 * SM_COUNT.get(arch, SM_COUNT["sm_90"])


@dataclass(frozen=True)
class Variant:
    """Which structure of the forward runs: the default, or an ablation that changes one thing.

    ``state``: "segmented" (the segment-parallel state pass of kernels.cutile.segment_state: local walks
    per segment, a scan over segments, the entry states completed in place), "chunked" (the same with
    segments of one chunk: every chunk's own contribution in parallel, then a scan over chunks that writes
    the entry states), "serial" (one program walks
    every chunk of a sequence, as the post's fwd_pass_state), "fused" (the segmented pass's local walks and
    scan, then kernels.cutile.segment_out: the output computed while each segment's state is carried on chip,
    no chunk state in memory; dstate <= 128; on the H200 slower than the default at every shape tried, 298 against
    234 us at 16384 tokens and dstate 128) or "auto" (the one ``state_pass_kind`` picks for the shape).
    ``int64``: "per-array" (int64 indexing only on the arrays whose span passes 2**31) or "all" (every
    array of a kernel as soon as one needs it, as before).
    ``c_once``: chunk_out builds the diagonal C·Bᵀ block in its C·hᵀ loop, loading C once (False: two
    loops over dstate, C loaded in each).
    ``cb_buffer``: chunk_out reads C·Bᵀ from a buffer built once per (chunk, group) by its own kernel
    (None: the chooser's choice; False: each head builds its own on chip).
    ``swap_ab``: the serial walk's matmul swapped (None: the chooser's choice; False: never, same tiles).
    ``states_t``: the serial walk's chunk states laid out transposed, (dstate, headdim), so that the swapped walk
    stores its tile as it carries it and chunk_out loads hᵀ directly (None: the chooser's choice, transposed for the
    swapped walk from dstate 512, else (headdim, dstate), the swapped walk storing through a permuted axis order;
    True, "states-transposed", and False, "states-untransposed", force either). On the H200 the walk was slower
    with it at dstate 128 (169 against 119 us at 16K tokens); ``state_pass_config`` says where it paid.
    ``split_states``: the serial walk's chunk states, past 2**31 elements, in parts that each keep int32 indexing,
    one walk and one chunk_out launch per part (False: one buffer, int64-indexed, as before).
    ``split_diag``: chunk_out's diagonal C·Bᵀ block in two row halves, the lower half's past columns with the decay
    factorized (half the exp2, the all-future quarter never formed; None: the chooser's choice, for now never). On the
    H200 chunk_out was 2-3% slower with it at 16384 tokens, dstate 64 to 512.
    ``cb_heads``: heads of a group that share one C·Bᵀ block in chunk_out (1: each head builds its own, the
    default; it must divide the heads of a group). The shared block, held across the heads, spills registers on
    sm_90 (272 local-memory stores at 8 heads, none for one), and on the H200 chunk_out took 251.0 against 119.9 us
    at 16384 tokens and dstate 128, 484.1 against 214.0 at 512 (explore_cutile, 2026-12-02,
    reports/published/0.1.0+20261202T091000Z-1e17ae9-dirty; the block passed through memory did not pay either).
    ``pre_weights``: False runs the serial walk as it was before it read the cumsum's precomputed chunk-state
    weights (its own exp2, the weights on B, the tiles and hints chosen for that; None: the chooser's walk).
    ``packed_weights``: for bf16 inputs the serial walk weighs its x (or B) rows in bf16, the per-token weight rounded
    to it: one packed multiply a pair of elements (HMUL2 on sm_90) instead of widening each to fp32, multiplying and
    narrowing back (None: the chooser's, for now never; fp16 keeps the fp32 product, whose weights fp16's range
    could flush). In the sm_90 export at 16384 tokens and dstate 128 the walk's loop takes 448 instead of 767
    instructions a pair of chunks; it rounds each weight once more (a relative 2**-8 at most). On the H200 it did
    not pay: the state pass took 79.5 against 78.6 us at 16384 tokens and dstate 128, 155.2 against 142.0 at 512
    (one chunk a step: 140.5), 23.0 against 23.3 at (4096, 128), 303.4 against 298.0 at (65536, 128); one chunk a
    step at dstate 256, 1-3% faster (99.6 against 101.8 us at 16384 tokens, 382.1 against 395.2 at 65536), within
    what separates runs (explore_cutile, 2026-12-02, reports/published/0.1.0+20261202T144500Z-0039de8/
    explore-packed.json). The walk's chain waits on memory and on its matmul, not on these instructions. The wide walk of
    dstate 128 gains 1.4-2.1% from it, its final state's errors then 1.3-2.3x the fp32 product's (``state_pass_config``).
    ``walk_segments``: the serial walk in this many segments (``StatePassConfig.segments``; None: the chooser's, one),
    each segment's programs first summing the chunks before it (kernels.cutile.state_pass._prefix_state) and then
    walking their own: twice the programs, each chain half as long. On the H200 the state pass was slower with two
    at every shape where the walk has one program an SM: 118.2 against 78.9 us at 16384 tokens and dstate 128, 32.5
    against 20.7 at (4096, 64), 148.5 against 102.3 at (16384, 256); four segments slower still (explore_cutile and the
    validate of 2026-12-03 06:19, reports/published/0.1.0+20261203T061903Z-0542c80): the second segment's programs took
    longer than one walk through the whole sequence (not diagnosed).
    "segmented-out" is the segmented pass without its completion launch: chunk_out rebuilds each chunk's entry state
    as h_c = L_c + exp2(d_c) E_s, one more C·E_sᵀ product a program (E_s, the segment's entry state, stored in the
    chunk states' dtype by the scan), from the local walk's L_c and d_c as they are stored. In exactly two segments
    without an initial state it skips the scan: E_0 = 0, so segment 0's programs skip the product, E_1 is segment 0's
    end state as the local walk stores it (fp32), and chunk_out writes the final state.
    ``two_segment_scan``: that case with the scan launch and every program's product, as before (the variant
    segmented-out-scanned).
    ``cumsum_in_kernels``: no cumsum launch; the walk takes the cumsum of A dt over each of its chunks from the caller's
    dt and A (kernels.cutile._launch.chunk_scalars), computes its chunk-state weights itself (as ``pre_weights=False``'s
    walk does) and writes the cumsum's buffers, which chunk_out reads as before; every state pass but the fused one.
    On the H200 the forward took 56.5 against 48.4 us at (4096 tokens, dstate 64), 156.0 against 151.6 at (16384, 64)
    and 260.5 against 191.9 at (16384, 128): the walk's chain absorbs the cumsum and the weights, 8-75 us, against the
    2.8-4.3 us launch saved (explore_cutile, 2026-12-03, reports/published/0.1.0+20261203T164800Z-2a71ae5).
    ``causal_cb``: chunk_out builds only the three quarters of its diagonal C·Bᵀ block that hold a past column (C, B
    and the chunk state loaded by half-row tiles, the rows weighed in two halves as with ``split_diag``), skipping the
    all-future quarter's matmul: the default for 16-bit inputs from dstate 256 at chunk 128 (``chunk_out_config``;
    None: the chooser's; True, "causal-cb", forces it at dstate 64 and 128 too; False, "full-cb", builds the whole
    block as before).
    ``stacked``: the cumsum's per-token rows in one buffer (``ChunkCumsumConfig.stacked``: the serial walk reads a
    chunk's g and weights by one load, chunk_out's causal halves their g and dt by one; None: the chooser's, False,
    "unstacked": three buffers, a load each, as before).
    """

    state: str = "auto"
    int64: str = "per-array"
    c_once: bool = True
    cb_buffer: bool | None = None
    cb_heads: int = 1
    swap_ab: bool | None = None
    states_t: bool | None = None
    split_states: bool = True
    split_diag: bool | None = None
    pre_weights: bool | None = None
    packed_weights: bool | None = None
    walk_segments: int | None = None
    two_segment_scan: bool = False
    cumsum_in_kernels: bool = False
    causal_cb: bool | None = None
    stacked: bool | None = None

    def unsupported_reason(self, dstate: int) -> str | None:
        """Why this variant cannot run a problem of this dstate (None: it can)."""
        if self.state == "fused" and dstate > FUSED_MAX_DSTATE:
            return (f"the fused pass carries a head's whole state per program: dstate <= {FUSED_MAX_DSTATE}; the "
                    f"case has {dstate}")
        return None


# The widest state the fused pass (kernels.cutile.segment_out) carries: (dstate, headdim tile) fp32 in registers
# beside a (chunk, chunk) fp32 C·Bᵀ block.
FUSED_MAX_DSTATE = 128

VARIANTS = {
    "default": Variant(),
    "serial-state": Variant(state="serial"),
    "segmented-state": Variant(state="segmented"),
    "fused-out": Variant(state="fused"),
    "chunked-state": Variant(state="chunked"),
    "cb-inline": Variant(cb_buffer=False),
    "cb-buffer": Variant(cb_buffer=True),
    "no-swap": Variant(swap_ab=False),
    "states-transposed": Variant(states_t=True),
    "states-untransposed": Variant(states_t=False),
    "int64-all": Variant(int64="all", split_states=False),
    "states-int64": Variant(split_states=False),
    "c-twice": Variant(c_once=False),
    "cb-shared-8": Variant(cb_heads=8),
    "split-diag": Variant(split_diag=True),
    "walk-weighs": Variant(pre_weights=False),
    "packed-weights": Variant(packed_weights=True),
    "two-segment-walk": Variant(walk_segments=2),
    "segmented-out": Variant(state="segmented-out"),
    "segmented-out-scanned": Variant(state="segmented-out", two_segment_scan=True),
    "cumsum-in-kernels": Variant(cumsum_in_kernels=True),
    "causal-cb": Variant(causal_cb=True),
    "full-cb": Variant(causal_cb=False),
    "unstacked": Variant(stacked=False),
}


def check_problem(arch: str, dims: SSDDims, dtype: torch.dtype, chunk_size: int, *, who: str) -> None:
    """Refuse, naming the argument, what no chooser here is defined for: ``arch`` not a string, sizes that are not
    ints >= 1, a dtype other than bf16, fp16 or fp32, a chunk_size that is not an int >= 1. (What the kernels tile
    is ``check_kernel_limits``'s: the choosers answer for any size.)"""
    if not isinstance(arch, str):
        raise TypeError(f"{who}: arch must be a str such as 'sm_90'; got {type(arch).__name__} {arch!r}")
    sizes = {f"dims.{name}": getattr(dims, name, None)
             for name in ("batch", "seqlen", "nheads", "headdim", "ngroups", "dstate")}
    for name, value in {**sizes, "chunk_size": chunk_size}.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{who}: {name} must be an int; got {type(value).__name__} {value!r}")
        if value < 1:
            raise ValueError(f"{who}: {name} must be >= 1; got {value}")
    if dtype not in FLOAT_DTYPES:
        raise TypeError(f"{who}: dtype must be one of {', '.join(map(dtype_name, FLOAT_DTYPES))} (x's dtype); "
                        f"got {dtype!r}")


def _next_pow2(n: int) -> int:
    return 1 << (n - 1).bit_length()


@dataclass(frozen=True)
class ChunkCumsumConfig:
    block_h: int              # heads per program
    occupancy: int | None = None
    stacked: bool = False     # one (batch, nheads, 4, tokens) buffer, rows w, g, g, dt: (w, g) and (g, dt) one load


@dataclass(frozen=True)
class StatePassConfig:
    """The walk of ``_state_pass_kernel`` over a whole sequence (the serial state pass)."""

    block_p: int              # headdim tile of the carried state
    block_n: int              # dstate tile of the carried state
    latency: int              # DRAM latency hint of the streamed x, B loads (1..10)
    occupancy: int | None = None
    swap_ab: bool = False     # carry the state transposed: the register-computed operand first in the matmul
    states_t: bool = False    # lay the chunk states out transposed, (dstate, headdim), as the swapped walk carries them
    unroll: int = 1           # chunks whose tiles are loaded together, ahead of their steps (1, 2 or 4)
    scalar_latency: int | None = None  # latency hint of the per-token g and dt loads (None: the compiler's)
    pre_weights: bool = False  # read the per-token weights exp2(g_last - g) * dt from chunk_cumsum instead of dt
    weigh_x: bool = False     # weight x's rows per token instead of B's (B then feeds the matmul as loaded)
    packed_weights: bool = False  # bf16 inputs: apply the per-token weight in bf16 (one packed multiply a pair)
    segments: int = 1         # the walk in about this many segments, each after the first summing the chunks before it
    g_last: bool = False      # with pre_weights: each chunk's last cumsum loaded alone (measured slower)
    worker_warps: int | None = None  # computing warps a program (4 or 8; None: the compiler's four; 8 measured slower)
    wide_loads: bool = False  # unroll > 1: one load per array for a step's chunks, split on chip


@dataclass(frozen=True, kw_only=True)
class SegmentStateConfig(StatePassConfig):
    """The same walk over segments of ``seg_chunks`` chunks (the segmented pass's local walk)."""

    seg_chunks: int           # chunks per segment (a power of two)


@dataclass(frozen=True)
class SegmentScanConfig:
    block_p: int              # headdim tile of the carried state
    block_n: int              # dstate tile of the carried state
    latency: int              # DRAM latency hint of the segment-state loads (1..10)
    step: int = 8             # segments per load (a power of two)
    occupancy: int | None = None


@dataclass(frozen=True)
class SegmentOutConfig:
    """The fused pass's output walk (kernels.cutile.segment_out): one head's whole state per program."""

    block_p: int              # headdim tile of the carried state and of y
    seg_chunks: int           # chunks per segment (a power of two); the local walk and the scan use the same
    latency: int              # DRAM latency hint of the streamed x, B, C loads (1..10)
    occupancy: int | None = None


@dataclass(frozen=True)
class SegmentApplyConfig:
    block_p: int              # headdim tile of the rewritten state
    block_n: int              # dstate tile of the rewritten state
    occupancy: int | None = None


@dataclass(frozen=True)
class ChunkOutConfig:
    block_m: int              # output rows per program; also the width of a C·Bᵀ column block
    block_p: int              # headdim tile of y
    block_n: int              # dstate step of the C·Bᵀ and C·hᵀ reductions
    latency: int              # DRAM latency hint of the streamed x, B, C loads (1..10)
    occupancy: int | None = None
    c_once: bool = True       # build the diagonal C·Bᵀ block in the C·hᵀ loop, from the same C tiles
    cb_buffer: bool = False   # read C·Bᵀ from a per-(chunk, group) buffer (chunks of one row block only)

    def whole_chunks(self, chunk_size: int) -> bool:
        """Whether a program's rows are its whole chunk with C loaded once: what a shared or buffered C·Bᵀ
        block needs."""
        return self.c_once and chunk_size == self.block_m

    def with_variant(self, variant: Variant) -> ChunkOutConfig:
        """This configuration with what ``variant`` forces (C loaded once or not, C·Bᵀ shared, buffered, split or in
        its causal quarters). A variant that shares, buffers or splits the whole block runs it so, without the
        chooser's causal quarters (unless it forces them too)."""
        causal_cb = self.causal_cb if variant.causal_cb is None else variant.causal_cb
        if variant.causal_cb is None and (variant.cb_heads > 1 or variant.cb_buffer or variant.split_diag):
            causal_cb = False
        return replace(self, c_once=variant.c_once, block_h=variant.cb_heads if variant.cb_heads > 1 else self.block_h,
                       cb_buffer=self.cb_buffer if variant.cb_buffer is None else variant.cb_buffer,
                       split_diag=self.split_diag if variant.split_diag is None else variant.split_diag,
                       causal_cb=causal_cb)
    block_h: int = 1          # heads of one group per program, sharing one C·Bᵀ block (needs c_once)
    split_diag: bool = False  # the diagonal block in two row halves, the lower's past half factorized (whole chunks)
    heavy_first: bool = True  # two segments without a scan: segment 1's programs (with the completion product) first
    state_latency: int = 0    # DRAM latency hint of the chunk-state loads (0: the compiler's)
    cb_first: bool = False    # whole chunks: C·Bᵀ and its weights before the C·hᵀ loop, C loaded twice (measured slower)
    causal_cb: bool = False   # whole chunks: of the diagonal C·Bᵀ block only the three quarters holding a past column


def chunk_cumsum_config(arch: str, dims: SSDDims, dtype: torch.dtype, chunk_size: int) -> ChunkCumsumConfig:
    # Tiny and latency-bound: a few microseconds at any length. Four heads a program (twice the programs of eight):
    # on the H200 the cumsum took 2.61 against 2.90 us at (4096 tokens, dstate 64), 2.75 against 3.14 at (4096, 128),
    # 3.26 against 3.42 at (8192, 128) and 4.19 against 4.56 at (16384, 128), faster at all nine points of
    # 4096-16384 tokens x dstate 64-512 (explore_cutile, 2026-12-03,
    # reports/published/0.1.0+20261203T004652Z-9ed1fbf/explore-cumsum.json); one or two heads were no faster.
    return ChunkCumsumConfig(block_h=min(_next_pow2(dims.nheads), 4), stacked=_stacked(arch, dims, dtype, chunk_size))


def _stacked(arch: str, dims: SSDDims, dtype: torch.dtype, chunk_size: int) -> bool:
    """Whether the cumsum writes its per-token rows stacked in one buffer (``ChunkCumsumConfig.stacked``: rows w, g,
    g, dt), so that the serial walk reads a chunk's g and weights by one load and chunk_out's causal halves their g
    and dt by one (the api runs it only with the serial walk). It costs the cumsum a fourth row to write: on an H100
    (batch 4, 8 heads, headdim 64, bf16) the cumsum took 15.4 against 13.3 us at 65536 tokens and 61.9 against 50.4
    at 262144. The walk that reads the weights on x's rows (dstate 128) gained at every length: the forward took 58.0
    and 58.4 against 59.1 us at 4096 tokens, 191.7 against 194.6 and 195.3 at 16384 (the walk 74.2 against 77.5),
    695.9-702.6 against 713.2-715.0 at 65536 and 2734.1 against 2800.1 at 262144 (1.1-2.7%, 1024-262144 tokens).
    The swapped walk (dstate 256, 512) gained at short lengths and lost at long ones: at 512, 1.7% at 4096 tokens
    (113.3 and 113.4 against 115.3 and 115.0 us), 1.0% at 8192, 0.3-0.6% at 16384, 0.1% at 32768, and 0.4-1.9% slower
    from 65536; at 256, 1.4-2.1% at 1024-4096 tokens, nothing at 8192 and 0.5-1.0% slower at 16384 (4.5% at 65536).
    The walk at dstate 64, which weighs its chunks itself, lost (19.9 against 18.7 us at 1024 tokens, 31.8 against
    29.4 at 2048). (explore_cutile, 2026-12-06, two repeats at 4096-65536 tokens; reports/published/
    0.1.0+20261206T105200Z-4c556f1-dirty.) Measured on bf16; fp16 runs the same walks."""
    if dtype not in (torch.bfloat16, torch.float16):
        return False
    walk = state_pass_config(arch, dims, dtype, chunk_size)
    nchunks = -(-dims.seqlen // chunk_size)
    return walk.pre_weights and (walk.weigh_x or walk.swap_ab and nchunks <= (128 if dims.dstate >= 512 else 32))


def _segmented_out(arch: str, dims: SSDDims, dtype: torch.dtype, chunk_size: int, initial_state: bool = False) -> bool:
    """Where the segmented pass, its local walks reading the cumsum's weights and chunk_out completing the chunk
    states (no completion launch, the variant segmented-out), measured faster than the serial walk: 16-bit inputs at
    dstate 64 and chunk 128 from 32 chunks, where the serial walk's grid has about one program an SM
    (``_walk_fills_the_gpu``): the default there (``state_pass_kind``), with the segmented pass's tiles chosen for it
    (``segment_state_config``). On the H200 (batch 4, 8 heads, headdim 64, bf16, eight segments of 64-wide tiles)
    the forward took 86.4 against 88.4 us at
    8192 tokens, 152.2 against 164.5 at 16384, 280.4 against 314.7 at 32768, 535.9 against 613.3 at 65536 and 1055.2
    against 1210.2 at 131072; at 4096 tokens 50.9 against 49.3 (slower), and at dstate 128 and 256 slower at every
    length measured (196.7 against 193.0 at 16384 x 128: chunk_out's extra product costs more than the walk saves there)
    (explore_cutile, 2026-12-03, reports/published/0.1.0+20261203T092700Z-9ace4d5). At 4096 tokens in two segments of
    32-wide tiles, which need no scan (segment_state.scan_needed): 48.3 against 49.4 and 49.1 us in two runs; two
    segments lost at every other point of 4096-16384 tokens x dstate 64-512 (e.g. 87.4 against 86.6 at 8192 x 64, 64.0
    against 57.4 at 4096 x 128; explore_cutile, 2026-12-03, reports/published/0.1.0+20261203T141100Z-3182d0c). With an
    initial state the two segments need the scan (53.0 us at 4096 tokens), so below 64 chunks the serial walk stays.
    Below 64 chunks the serial walk replaced the two segments where it is the wide walk of dstate 64 (one program an SM,
    ``state_pass_config``): 49.2 against 52.6 us at 4096 tokens on an H100 (explore_cutile, 2026-12-07,
    reports/published/0.1.0+20261207T151857Z-5b21848-dirty).
    At dstate 128 two segments lost also with segment 0's end state rounded by the walk for chunk_out's product (read
    in fp32, each program had rounded it in registers): 66.3 against 62.8 us at 4096 tokens, 826.9 against 743.9 at
    65536, on an H100 (explore_cutile, 2026-12-05, reports/published/0.1.0+20261205T135600Z-df360e8)."""
    nchunks = -(-dims.seqlen // chunk_size)
    if not _segmented_out_shape(arch, dims, dtype, chunk_size) or nchunks < 64 and initial_state:
        return False
    # Below 64 chunks the wide serial walk of dstate 64 (state_pass_config) measured faster than two segments.
    return nchunks >= 64 or not state_pass_config(arch, dims, dtype, chunk_size).wide_loads


def _segmented_out_shape(arch: str, dims: SSDDims, dtype: torch.dtype, chunk_size: int) -> bool:
    """The shapes the segmented pass completed in chunk_out was measured at and its tiles chosen for
    (``segment_state_config``): 16-bit inputs at dstate 64 and chunk 128 from 32 chunks, where the serial walk's grid
    has about one program an SM; ``_segmented_out`` says where it is the default."""
    nchunks = -(-dims.seqlen // chunk_size)
    if dtype not in (torch.bfloat16, torch.float16) or dims.dstate != 64 or chunk_size != 128 or nchunks < 32:
        return False
    walk = state_pass_config(arch, dims, dtype, chunk_size)
    return _walk_fills_the_gpu(arch, _walk_programs(dims, walk.block_p, walk.block_n))


def state_pass_kind(arch: str, dims: SSDDims, dtype: torch.dtype, chunk_size: int,
                    initial_state: bool = False) -> str:
    """"segmented-out", "segmented" or "serial": the state pass that measured faster on the H200 for this kind of
    shape (``initial_state``: whether the call passes one); "segmented-out" where ``_segmented_out`` says (16-bit inputs
    at dstate 64 from 64 chunks at the benchmark's batch, from 32 where the serial walk is not the wide one of one
    program an SM; from 64 with an initial state), which replaced the serial walk there.

    Whole forward, CUPTI, batch 4, 8 heads, headdim 64, chunk 128, bf16 (validation/bench/explore_cutile.py, 2026-12-01,
    reports/published/0.1.0+20261201T082206Z-2fca4e2): dstate 128 to 512 serial for 16-bit inputs, the walk swapped from
    256 on (16384 tokens: 459 against 718 us segmented at dstate 512; 1024 tokens: 41 against 68; 65536: 1746 against
    2764); dstate 128 serial (16384 tokens: 240 against 255 segmented and 339 chunked); dstate 64 serial below 32 chunks
    (from there segmented-out, above), its g and dt loads hinted (``_SCALAR_LATENCY``: 16384 tokens, 185.7 vs 190.9 us
    segmented; 8192: 101.3 vs 106.9; 4096: 55.7 vs 61.6; 2048: 32.4 vs 39.0; explore_cutile, 2026-12-02,
    reports/published/0.1.0+20261202T011403Z-069a45f/explore-2*), and past 128 chunks too for 16-bit inputs whose walk
    has about as many programs as where that was measured (``_walk_fills_the_gpu``; 128, one an SM on the H200: 32768
    tokens, 317.6 vs 335.2; 65536: 621.2 vs 647.0; 131072: 1233.7 vs 1267.6; 262144: 2430.1 vs 2506.8;
    explore_cutile, 2026-12-02, reports/published/0.1.0+20261202T144500Z-0039de8/explore-d64-serial.json). With fewer
    (batch 1, say) and for fp32, past 128 chunks the segmented pass, whose segments give the GPU the programs the walk
    lacks. fp32 inputs, whose walk is not swapped, keep the segmented pass at dstate 512 (measured on bf16 before the
    swap: 758 vs 824 us at 16384 tokens).
    """
    check_problem(arch, dims, dtype, chunk_size, who="state_pass_kind")
    nchunks = -(-dims.seqlen // chunk_size)
    if _segmented_out(arch, dims, dtype, chunk_size, initial_state):
        return "segmented-out"
    if 128 <= dims.dstate <= 256 or (dims.dstate > 256 and _swapped_walk(dtype, dims)):
        return "serial"
    if dims.dstate <= 64 and nchunks <= 128:
        return "serial"
    if dims.dstate <= 64 and dtype in (torch.bfloat16, torch.float16):
        walk = state_pass_config(arch, dims, dtype, chunk_size)
        if _walk_fills_the_gpu(arch, _walk_programs(dims, walk.block_p, walk.block_n)):
            return "serial"
    return "segmented"


# The latency hint of the serial walk's per-token g and dt loads: on the H200 the state pass at 16384 tokens took
# 127.9 against 162.9 us at dstate 256 (swapped walk), 174.3 against 198.9 at 512 and 79.6 against 93.5 at 64, with
# the other hints as they were; at 128 it paid only with a shallower x and B pipeline (state_pass_config; g and dt
# hints of 2 and 8 were no better; explore_cutile, 2026-12-02,
# reports/published/0.1.0+20261202T011403Z-069a45f/explore-2-glat-16k.json).
_SCALAR_LATENCY = 4
# The wide walk's at dstate 128 (state_pass_config).
_WIDE_WALK_SCALAR_LATENCY = 8
# The swapped walk's, once it reads precomputed weights (state_pass_config).
_SWAPPED_SCALAR_LATENCY = 10


def _swapped_walk(dtype: torch.dtype, dims: SSDDims) -> bool:
    # Measured on bf16 only (fp16 takes the same tensor-core path); at dstate 128 and below the swapped
    # matmul's M (the dstate tile) falls under HGMMA's 64 rows for a grid that fills the GPU.
    return dtype in (torch.bfloat16, torch.float16) and dims.dstate >= 256


def _walk_programs(dims: SSDDims, block_p: int, block_n: int) -> int:
    """Programs of a walk over (block_p, block_n) state tiles, one per (batch, head, headdim tile, dstate tile)
    (a segment's; the serial walk has one segment)."""
    return dims.batch * dims.nheads * (dims.headdim // block_p) * (dims.dstate // block_n)


def state_pass_config(arch: str, dims: SSDDims, dtype: torch.dtype, chunk_size: int, *,
                      pre_weights: bool = True) -> StatePassConfig:
    """The serial walk's configuration; ``pre_weights=False``: the walk that computes its own chunk-state weights,
    as chosen before the cumsum precomputed them (the variant walk-weighs)."""
    # One program per (batch, head, headdim tile, dstate tile) walks every chunk in turn, so the grid
    # is small; narrow the dstate tile until the GPU has enough programs.
    block_p = min(dims.headdim, 64)
    block_n = min(dims.dstate, 128 if chunk_size <= 128 else 64)
    target = TARGET_PROGRAMS.get(arch, TARGET_PROGRAMS["sm_90"])[0]
    if _swapped_walk(dtype, dims):
        # Swapped (hᵀ = (w B)ᵀ X: the operand built in registers first), the dstate tile is the matmul's M: 64 wide
        # for HGMMA, two programs an SM (one where the grid has no more; below), two chunks' tiles loaded ahead of
        # their steps. On the H200 the state pass took 201 us against 241 (128-wide tiles, one program an SM, one
        # chunk at a time) at (16384 tokens, dstate 512), 14.0 against 25.7 at (1024, 256) and 17.1 against 21.8 at
        # (1024, 512); 128-wide tiles unrolled spill and took 354 us at (16384, 512) (explore_cutile, 2026-12-01,
        # reports/published/0.1.0+20261201T191901Z-f273e44/explore-1-* and explore-2-*).
        # The per-token weights come from the cumsum (pre_weights: no exp2 in the walk), the g and dt loads hinted
        # deeper (10): at 16384 tokens the state pass took 143.3 against 175.5 us at dstate 512 and 103.7 against
        # 128.3 at 256; at 65536 x 512, 559.4 against 661.9 (explore_cutile, 2026-12-02, explore-pw*.json in
        # reports/published/0.1.0+20261202T044634Z-d3a05f1-dirty; hints 2-8 within 4%).
        # A grid of at most one program an SM (dstate 256 at batch 4 and 8 heads: 128 programs) drops the occupancy
        # hint of 2 for 1, which leaves a program every register and all the shared memory: the state pass at 16384
        # tokens and dstate 256 took 96.6 against 102.7 us, 50.1 against 53.3 at 8192 and 27.7 against 28.6 at 4096
        # (load hints 6 and 8, or no occupancy hint, within 0.5% of it); the unswapped walk gained nothing from it, at
        # dstate 128 and 4K-16K tokens nor at dstate 64 and 128 and 1K-2K (explore_cutile, 2026-12-04,
        # reports/published/0.1.0+20261204T011920Z-ee381ad and 0.1.0+20261204T020250Z-3548386).
        # Four chunks a step (unroll 4) took the state pass 12-71% slower at 4K-16K tokens x dstate 512, and 23-48% at
        # dstate 128 in the weigh_x walk below (explore_cutile, 2026-12-04,
        # reports/published/0.1.0+20261204T040930Z-6448431): both walks keep two.
        # From dstate 512 the chunk states are laid out as the swapped walk carries them, (dstate, headdim)
        # (states_t): it stores its tile without permuting the axes and chunk_out loads hᵀ as stored. On an H100 the
        # forward took 0.3-1.2% less at every length from 1024 to 262144 tokens at dstate 512 (111.0 against 111.8 us
        # at 4096, 204.8 against 207.2 at 8192, 1484.0 against 1501.0 at 65536), every gate's error the same to the
        # bit; at 256 it was within -1.1% to +1.0% (73.5 against 72.8 at 4096), so 256 keeps (headdim, dstate)
        # (explore_cutile, 2026-12-06, reports/published/0.1.0+20261206T222812Z-5415d08). In the benchmark's ablation
        # at (16384 tokens, dstate 512), timed in the same rounds as the default, the states-transposed case had taken
        # 0.5-1.6% less on the H200 in each of the ten runs since e05c81b (337.3 against 342.6 us at 6554df5) and
        # 0.0-0.5% less on H100s. With it as the default, the correctness and stability suites on an H100 gave every
        # error of the validate at 1dd1d0b to the bit, and the old layout (states-untransposed) took 0.9% longer at
        # 4096 tokens (113.3 against 112.1 us) and 0.5% at 16384 (reports/published/0.1.0+20261207T015151Z-b50d865).
        # In the complete H200 validate at b2c1c2d it took 339.2 against 336.3 us at 16384 tokens in the same rounds,
        # every error of the suites equal to the bit (reports/published/0.1.0+20261207T133709Z-b2c1c2d).
        occupancy = 1 if _walk_programs(dims, block_p, min(block_n, 64)) <= target // 2 else 2
        return StatePassConfig(block_p=block_p, block_n=min(block_n, 64), latency=4, occupancy=occupancy, swap_ab=True,
                               states_t=dims.dstate >= 512, unroll=2,
                               scalar_latency=_SWAPPED_SCALAR_LATENCY if pre_weights else _SCALAR_LATENCY,
                               pre_weights=pre_weights)
    if dtype in (torch.bfloat16, torch.float16):
        # 16-bit inputs: tiles down to 16 wide, two programs an SM (TileGym's tuned walk also runs 16-wide tiles
        # two an SM). At (16384 tokens, dstate 128) on the H200: 111 us against 119 for
        # 32-wide tiles at one program an SM, one chunk at a time, and 121 for 32-wide tiles unrolled at two an SM
        # (explore_cutile, 2026-12-01, reports/published/0.1.0+20261201T191901Z-f273e44/explore-1-*).
        # The pipeline depth (the x and B latency hints, one chunk a step or two, the g and dt hint) measured best
        # per dstate at 16384 tokens: at 128, hints 2 and 4, two chunks a step: 98.9 against 110.3 us (4096 tokens:
        # 28.2 against 28.4); at 64, hints 6 and 4, one chunk a step: 71.6 against 79.5 (4096: 21.0 against 23.2);
        # the 36 combinations of the run spread over 72-124 us (explore_cutile, 2026-12-02,
        # reports/published/0.1.0+20261202T011403Z-069a45f/explore-4-depth.json).
        if dims.dstate >= 128 and pre_weights:
            # From dstate 128: the per-token weights from the cumsum on x's rows (pre_weights, weigh_x), so that B feeds
            # the matmul from shared memory as loaded and the weighted x from registers; x's weighting is then each
            # program's own work, so dstate tiles of at least 32 and about half the programs (one an SM on the H200).
            # At (16384 tokens, dstate 128): 79.9 against 99.3 us for the state pass (4096: 23.6 against 28.0; 65536:
            # 301.6 against 377.9), with x and B hinted 4, two chunks a step; 16- and 64-wide tiles, or hints 2, 3, 6
            # and 8, were slower (explore_cutile, 2026-12-02, explore-pw*.json in
            # reports/published/0.1.0+20261202T044634Z-d3a05f1-dirty). At dstate 64 it was no faster there (74.0
            # against 72.1, two programs an SM), so dstate 64 keeps B weighted by the walk unless its grid has at most
            # one program an SM (below).
            while block_n > 32 and _walk_programs(dims, block_p, block_n) < target // 2:
                block_n //= 2
            if _walk_programs(dims, block_p, block_n) <= target // 2:
                # A grid of at most one program an SM (128 at the benchmark's batch): one load per array for both
                # chunks of a step (wide_loads), compiled for one program an SM with x and B hinted 6, which gives
                # the loads 169 KB of shared memory. On an H100 (sm_90, 132 SMs, as the H200) the state pass took
                # 22.5 against 25.8 us at 4096 tokens, 41.6 against 45.9 at 8192, 76.7 against 85.8 at 16384 and
                # 1131.5 against 1282.3 at 262144 (the forward 4.0-5.1% faster from 2048 tokens; 1024: 20.4 against
                # 20.5); at two programs an SM the forward was 17-21% slower, with hints 4 and 8 0.6-2.9% slower
                # than 6 (explore_cutile, 2026-12-05, reports/published/0.1.0+20261205T225300Z-0b47324).
                # With the weights multiplied in bf16 as well (packed_weights, the variant packed-weights) this walk
                # took the forward 1.3-2.1% faster at 4096-16384 tokens on an H100 (explore_cutile, 2026-12-06,
                # reports/published/0.1.0+20261206T003100Z-da2159c), but it rounds each weight once more, and in the
                # complete validate with it as the default (an H100, reports/published/0.1.0+20261206T032918Z-16347eb)
                # the final state lost accuracy where y did not: rel_l2 0.00222 against 0.00170 at 4096 tokens, max
                # |error|/peak 0.00436 against 0.00188 at 65536 (TileGym and Triton 0.00229 and 0.00205), 0.00521
                # against 0.00364 at worst over the stability cases, for 1.4% of the forward at 16384 tokens (192.6
                # against 195.3 us in its ablation). So the fp32 product stays, the bf16 one a variant.
                # The g and w loads hinted 8 rather than 4 (the hint of every other 16-bit walk): on an H100 the
                # forward took 57.5 against 58.0 us at 4096 tokens, 101.7 against 103.6 at 8192, 184.8 against 189.4
                # at 16384 and 677.2 against 696.0 at 65536, every error equal to the bit (explore_cutile, 2026-12-07,
                # reports/published/0.1.0+20261207T171457Z-9a49004), and 0.8-1.9% less at 1024, 2048, 131072 and
                # 262144 (reports/published/0.1.0+20261207T194707Z-dccaa08); at dstate 64 the same hint was 0.8% slower at
                # 4096 tokens, so that walk keeps 4. Not yet measured on an H200, where 8 had been no better than 4
                # for the walk before the wide loads (_SCALAR_LATENCY); its sm_90 export at 16384 tokens gives the load
                # pipelines 222 KB of shared memory instead of 171 and waits on 34 barriers instead of 42.
                return _wide_walk(block_p, block_n, scalar_latency=_WIDE_WALK_SCALAR_LATENCY)
            return StatePassConfig(block_p=block_p, block_n=block_n, latency=4, occupancy=2, unroll=2,
                                   scalar_latency=_SCALAR_LATENCY, pre_weights=True, weigh_x=True)
        if dims.dstate == 64 and pre_weights and _walk_programs(dims, block_p, 16) <= target // 2:
            # At dstate 64 too, where the grid has at most one program an SM (16-wide tiles: 128 programs at the
            # benchmark's batch), the wide walk of dstate 128: the cumsum's weights on x's rows, a step's two chunks
            # read by one load per array, the cumsum's rows stacked (``_stacked``), one program an SM, x and B hinted
            # 6. On an H100 (explore_cutile, 2026-12-07, reports/published/0.1.0+20261207T151857Z-5b21848-dirty) the
            # forward took 49.2 us at 4096 tokens against 52.6 for two segments of the segmented pass (the default
            # there before, ``_segmented_out``), 50.7 for this walk weighing its own chunks and 51.2 for two segments
            # read by wide loads; 28.6 against 29.4 at 2048 and 18.7 against 18.7 at 1024 (the walk weighing its own
            # chunks), 86.9 against 94.4 at 8192 (where the segmented pass stays until an H200 has measured it: there
            # its local walks ran 1.3-1.5x faster than on an H100 and the walk of dstate 128 only 6%, so the walk's
            # lead from 64 chunks on an H100, 0-9% up to 262144 tokens in reports/published/
            # 0.1.0+20261207T194707Z-dccaa08 and the run before it, may turn into a loss at long lengths). Hint 4: 50.8 us at 4096; 32-wide tiles (64
            # programs) 50.7; the rows unstacked 49.8. The final state's max |error|/peak moved as the walk of dstate
            # 128's does against the peers' (up to 0.00317 against TileGym's and Triton's 0.00245 at 1024 tokens,
            # rel_l2 0.00169 against 0.00165), within the tolerance table's measured worst.
            return _wide_walk(block_p, 16)
        while block_n > min(dims.dstate, 16) and _walk_programs(dims, block_p, block_n) < target:
            block_n //= 2
        latency, unroll = (6, 1) if dims.dstate <= 64 else (2, 2)
        return StatePassConfig(block_p=block_p, block_n=block_n, latency=latency, occupancy=2, unroll=unroll,
                               scalar_latency=_SCALAR_LATENCY)
    # fp32 (tf32) inputs keep the walk measured before the unroll: tiles >= 32 wide, latency hint 8 (5-8% faster
    # than 4 at (16384 tokens, dstate 128 and 512) on the H200, explore_cutile, 2026-11-30).
    while block_n > min(dims.dstate, 32) and _walk_programs(dims, block_p, block_n) < target:
        block_n //= 2
    return StatePassConfig(block_p=block_p, block_n=block_n, latency=8)


def _wide_walk(block_p: int, block_n: int, scalar_latency: int = _SCALAR_LATENCY) -> StatePassConfig:
    """The serial walk for a grid of at most one program an SM (16-bit inputs, dstate 64 and 128 unswapped): the
    cumsum's weights on x's rows, a step's two chunks read by one load per array, compiled for one program an SM, x and
    B hinted 6, the g and w loads ``scalar_latency`` (``state_pass_config`` says what each measured)."""
    return StatePassConfig(block_p=block_p, block_n=block_n, latency=6, occupancy=1, unroll=2,
                           scalar_latency=scalar_latency, pre_weights=True, weigh_x=True, wide_loads=True)


def serial_walk_config(cfg: StatePassConfig, variant: Variant, arch: str, dims: SSDDims, dtype: torch.dtype,
                       chunk_size: int) -> StatePassConfig:
    """The serial walk's configuration ``cfg`` with what ``variant`` changes in it: the walk before precomputed weights
    (``pre_weights=False``, rebuilt by ``state_pass_config``; also without the cumsum launch, which computes them),
    the matmul swapped or not, the chunk states' layout,
    the weights applied in bf16."""
    if (variant.pre_weights is False or variant.cumsum_in_kernels) and cfg.pre_weights:
        cfg = state_pass_config(arch, dims, dtype, chunk_size, pre_weights=False)
    if variant.swap_ab is not None:  # the layout follows the walk unless the variant says otherwise
        cfg = replace(cfg, swap_ab=variant.swap_ab, states_t=variant.swap_ab and cfg.states_t)
    if variant.states_t is not None:
        cfg = replace(cfg, states_t=variant.states_t)
    if variant.packed_weights is not None:
        cfg = replace(cfg, packed_weights=variant.packed_weights)
    if variant.walk_segments is not None:
        cfg = replace(cfg, segments=variant.walk_segments)
    return cfg


def segment_walk_config(cfg: SegmentStateConfig, variant: Variant) -> SegmentStateConfig:
    """The segmented pass's local walk ``cfg`` with what ``variant`` changes in it: without the cumsum launch, which
    computes the chunk-state weights, the walk weighs its chunks itself (``pre_weights=False``, its tiles kept)."""
    return replace(cfg, pre_weights=False) if variant.cumsum_in_kernels else cfg


def _segment_chunks(arch: str, dims: SSDDims, chunk_size: int, programs_per_segment: int) -> int:
    """The longest segments (a power of two of chunks, at most _MAX_SEGMENT_CHUNKS) that still give about the
    segmented pass's TARGET_PROGRAMS count of programs, ``programs_per_segment`` to a segment."""
    nchunks = -(-dims.seqlen // chunk_size)
    target = TARGET_PROGRAMS.get(arch, TARGET_PROGRAMS["sm_90"])[1]
    seg_chunks = _MAX_SEGMENT_CHUNKS
    while seg_chunks > 1 and programs_per_segment * -(-nchunks // seg_chunks) < target:
        seg_chunks //= 2
    return seg_chunks


def segment_state_config(arch: str, dims: SSDDims, dtype: torch.dtype, chunk_size: int) -> SegmentStateConfig:
    if _segmented_out_shape(arch, dims, dtype, chunk_size):
        # The local walk as the serial walk from dstate 128 (the cumsum's weights on x's rows, x and B hinted 4, two
        # chunks a step, g and dt hinted 4), whole 64-wide states, two programs an SM, so about as many segments as
        # give TARGET_PROGRAMS' count (eight at batch 4 and 8 heads): on the H200 within 1% of the best of 2-8 segments
        # and 32- or 64-wide tiles from 8192 to 131072 tokens (see _segmented_out).
        block_p = min(dims.headdim, 64)
        nchunks = -(-dims.seqlen // chunk_size)
        if nchunks < 64:
            # 32-63 chunks: two segments of 32-wide tiles, the scan skipped (see _segmented_out).
            block_n, seg_chunks = 32, _next_pow2(-(-nchunks // 2))
        else:
            block_n = 64
            nseg = max(1, TARGET_PROGRAMS.get(arch, TARGET_PROGRAMS["sm_90"])[0] // _walk_programs(dims, block_p, block_n))
            seg_chunks = max(2, _next_pow2(-(-nchunks // nseg)))
        return SegmentStateConfig(block_p=block_p, block_n=block_n, seg_chunks=seg_chunks, latency=4, occupancy=2,
                                  unroll=2, scalar_latency=_SCALAR_LATENCY, pre_weights=True, weigh_x=True)
    # Narrow tiles at occupancy 4, the longest segments that still give about TARGET_PROGRAMS' count (every segment adds one state of traffic to the scan and one step to its chain):
    # 64 x 32 tiles at occupancy 4 ran the local pass in 71 us at (16384 tokens, dstate 128) on the H200,
    # against 128-212 us for 64 x 64 and 64 x 128 tiles at occupancy 2 or none (explore_cutile, 2026-12-01).
    block_p = min(dims.headdim, 64)
    block_n = min(dims.dstate, 32)
    seg_chunks = _segment_chunks(arch, dims, chunk_size, _walk_programs(dims, block_p, block_n))
    return SegmentStateConfig(block_p=block_p, block_n=block_n, seg_chunks=seg_chunks, latency=8, occupancy=4)


def chunk_state_config(arch: str, dims: SSDDims, dtype: torch.dtype, chunk_size: int) -> SegmentStateConfig:
    # Segments of one chunk: one matmul per program and no chain, so wide tiles (x read once per 128 of
    # dstate) and two programs per SM. Not yet measured against narrower tiles.
    return SegmentStateConfig(block_p=min(dims.headdim, 64), block_n=min(dims.dstate, 128), seg_chunks=1,
                              latency=4, occupancy=2)


def segment_scan_config(arch: str, dims: SSDDims, dtype: torch.dtype, chunk_size: int) -> SegmentScanConfig:
    # Elementwise over fp32 states: narrow tiles, so that many programs each walk the segments.
    # Eight segments per load: the chunked pass's scan walks every chunk (128 at 16384 tokens).
    return SegmentScanConfig(block_p=min(dims.headdim, 16), block_n=min(dims.dstate, 64), latency=4, step=8)


def segment_apply_config(arch: str, dims: SSDDims, dtype: torch.dtype, chunk_size: int) -> SegmentApplyConfig:
    # Elementwise and memory-bound: small tiles, many programs in flight. At (16384 tokens, dstate 512) on the
    # H200: 16 x 128 tiles 213 us for 537 MB, 64 x 128 tiles 331 us, 8 x 128 288 us (explore_cutile, 2026-12-01).
    return SegmentApplyConfig(block_p=min(dims.headdim, 16), block_n=min(dims.dstate, 128))


def segment_out_config(arch: str, dims: SSDDims, dtype: torch.dtype, chunk_size: int) -> SegmentOutConfig:
    # The longest segments that still give the output walk about TARGET_PROGRAMS' count of the segmented pass
    # (its chain is the whole output work of a chunk per step, so short chains matter more than for the local walk).
    # Only the variant fused-out runs it: on the H200 the fused pass took 297 us at (16384 tokens, dstate 128) with
    # this choice (K 8, 64-wide), 285 with K 16, 409-449 with 32-wide tiles at two programs an SM, against 234 for
    # the default (explore_cutile, 2026-12-01, reports/published/0.1.0+20261201T230901Z-f6eb8ea-dirty/explore-1-*).
    block_p = min(dims.headdim, 64)
    programs = dims.batch * dims.nheads * (dims.headdim // block_p)
    return SegmentOutConfig(block_p=block_p, seg_chunks=_segment_chunks(arch, dims, chunk_size, programs), latency=4)


def chunk_out_config(arch: str, dims: SSDDims, dtype: torch.dtype, chunk_size: int) -> ChunkOutConfig:
    # The (block_m x block_m) C·Bᵀ block and the (block_m x block_p) output both live in registers:
    # 128 x 128 + 128 x 64 fp32 is the most we hold, so a chunk of 256 runs in row blocks. Of 128 rows they spill (in
    # the sm_90 export at headdim 64 and dstate 128 or 512, 234 local-memory stores a program, 201 at occupancy 1);
    # of 64 rows they spill none, and on the H200 (bf16, chunk 256, batch 4, 8 heads, headdim 64) the forward took
    # 86.5 against 131.4 us at (4096 tokens, dstate 128), 191.6 against 239.2 at (4096, 512), 308.0 against 454.6 at
    # (16384, 128) and 684.3 against 844.0 at (16384, 512); four 64-row programs an SM were slower than two
    # (explore_cutile, 2026-12-05, reports/published/0.1.0+20261205T020800Z-5a45aa9). Chunk 128 stays in one block
    # of 128 rows; at 4K-16K tokens x dstate 64, 128 and 512 it was the fastest chunk size in that run (chunk 64
    # 1.24-1.39x its time at every one of the nine points).
    block_m = min(chunk_size, 128) if chunk_size <= 128 else 64
    block_p = min(dims.headdim, 64)
    # In two segments without a scan (``_segmented_out``), segment 1's programs take one more product than segment
    # 0's. Started first, they left segment 0's to fill the grid's tail: on the H200 chunk_out took 29.7 against 30.3
    # us at (4096 tokens, dstate 64), 39.5 against 41.9 at 128 (1024 programs, about four a slot), but 57.8 against
    # 57.0 at (8192, 64) and 78.5 against 77.1 at (8192, 128) (2048 programs) (explore_cutile, 2026-12-03,
    # reports/published/0.1.0+20261203T170540Z-36f5459; at 4096 x 64 again 29.7-29.9 against 30.1-30.2 in three
    # repeats, 0.1.0+20261203T172220Z-5a36b8e): so for grids of at most four programs a slot, counting ``occupancy``
    # slots on each of half the walk's TARGET_PROGRAMS (128 on the H200, as measured there: 256 slots).
    # On sm_100 and sm_103, tileiras 13.4 builds chunk_out as 384 threads of up to 168 registers (64,512 of the SM's
    # 65,536) whatever the hint (an occupancy of 2 to 4 or four worker warps gave the same SASS in the CPU export, eight
    # worker warps 80 registers and 149 local-memory stores): one program an SM there, which the configuration says
    # (validation/test_compile.py checks every kernel against its SM's registers, threads and shared memory). No
    # Blackwell GPU has measured what that costs.
    occupancy = 1 if arch in ("sm_100", "sm_103") else 2
    programs = dims.batch * dims.nheads * (dims.headdim // block_p) * -(-dims.seqlen // block_m)
    heavy_first = programs <= 4 * occupancy * (TARGET_PROGRAMS.get(arch, TARGET_PROGRAMS["sm_90"])[0] // 2)
    if dtype in (torch.bfloat16, torch.float16):
        # C loaded once (c_once): chunk_out 131 -> 120 us at (16384 tokens, dstate 128) and 289 -> 231 us at dstate
        # 512 on the H200 (benchmark, variant c-twice, 2026-12-01).
        # Occupancy 2: 357 -> 277 us at (16384 tokens, dstate 128) and 905 -> 849 us at dstate 512 on the H200
        # (validation/bench/explore_cutile.py, 2026-11-30). 64-wide dstate steps since C is loaded once: 226 ->
        # 214 us at dstate 512, 157 -> 151 at 256, 120 -> 119 at 128 (16384 tokens), 19 -> 16 us at (1024, 512)
        # (explore_cutile, 2026-12-01). fp32 (tf32) keeps the compiler's choice until it is measured.
        # Up to dstate 128, 32-wide dstate steps and a latency hint of 2: chunk_out 92.4 -> 89.9 us at (16384 tokens,
        # dstate 64), 26.6 -> 25.8 at 4096, 49.7 -> 47.7 at 8192, 344.0 -> 332.5 at 65536; at dstate 128 110.0 ->
        # 109.8 (16384), 31.7 -> 30.3 (4096), 58.4 -> 58.3 (8192), 404.4 -> 395.5 (65536); at 256 1.5-2.9% slower
        # (explore_cutile, 2026-12-02, reports/published/0.1.0+20261202T150900Z-3165a98/explore-chunk-out-lat.json).
        # There the chunk-state loads take the same hint of 2 (the compiler's choice before): chunk_out 29.8 -> 29.5 us
        # at (4096 tokens, dstate 64), 30.5 -> 29.9 at (4096, 128), 58.6 -> 57.1 at (8192, 128), 109.5 -> 107.9 at
        # (16384, 128); 4 within 1% of the compiler's, 1 up to 2.4% and 8 up to 19% slower, and at dstate 512 none of
        # them faster (explore_cutile, 2026-12-03, reports/published/0.1.0+20261203T223202Z-fdd9948).
        # At dstate 256 hints of 1-4 are within 1.3% of the compiler's choice at 4K-32K tokens, 8 15-17% slower
        # (explore_cutile, 2026-12-04, reports/published/0.1.0+20261204T011205Z-e3ea881): the compiler's stays.
        if dims.dstate <= 128:
            return ChunkOutConfig(block_m=block_m, block_p=block_p, block_n=min(dims.dstate, 32), latency=2,
                                  occupancy=occupancy, heavy_first=heavy_first, state_latency=2)
        # From dstate 256, of the diagonal C·Bᵀ block only the three quarters that hold a past column (causal_cb),
        # C, B and the states by 64-row tiles: chunk_out 218.0 -> 210.9 us at (16384 tokens, dstate 512), 118.5 ->
        # 115.6 at (8192, 512), 148.6 -> 143.8 at (16384, 256), 80.1 -> 78.9 at (8192, 256), 64.0 -> 64.0 at (4096,
        # 512) and 43.5 -> 43.1 at (4096, 256), every gate's error the same to five digits (explore_cutile on an
        # H100, 2026-12-06, reports/published/0.1.0+20261206T053200Z-26cfee9-dirty). A quarter of the block's matmul work
        # is a sixth of chunk_out's at 512, and bought 3% of it: chunk_out there waits on memory more than on its
        # matmuls. At dstate 64 and 128 it was 0-6% slower with 32-wide steps and within 1% with 64-wide ones. The
        # sm_90 export spills three registers a program after the dstate loop (three local-memory stores and loads).
        # Deeper load pipelines were no faster with it (x, B, C hinted 6 or 8: 1-3% slower; the chunk states hinted 4:
        # within 0.7 us; 8: 12-24% slower; reports/published/0.1.0+20261206T054930Z-d07ad98).
        return ChunkOutConfig(block_m=block_m, block_p=block_p, block_n=min(dims.dstate, 64), latency=4,
                              occupancy=occupancy, heavy_first=heavy_first,
                              causal_cb=block_m == chunk_size and block_m % 128 == 0)
    return ChunkOutConfig(block_m=block_m, block_p=block_p, block_n=min(dims.dstate, 64), latency=4,
                          heavy_first=heavy_first)


@dataclass(frozen=True)
class Configs:
    """Every stage's configuration for one problem (the state pass that does not run is ignored)."""

    chunk_cumsum: ChunkCumsumConfig
    state_pass: StatePassConfig
    segment_state: SegmentStateConfig
    chunk_state: SegmentStateConfig
    segment_scan: SegmentScanConfig
    segment_apply: SegmentApplyConfig
    chunk_out: ChunkOutConfig
    segment_out: SegmentOutConfig


def choose(arch: str, dims: SSDDims, dtype: torch.dtype, chunk_size: int) -> Configs:
    """The choosers' configuration of every stage for this problem."""
    check_problem(arch, dims, dtype, chunk_size, who="choose")
    args = (arch, dims, dtype, chunk_size)
    return Configs(chunk_cumsum=chunk_cumsum_config(*args), state_pass=state_pass_config(*args),
                   segment_state=segment_state_config(*args), chunk_state=chunk_state_config(*args),
                   segment_scan=segment_scan_config(*args),
                   segment_apply=segment_apply_config(*args), chunk_out=chunk_out_config(*args),
                   segment_out=segment_out_config(*args))
