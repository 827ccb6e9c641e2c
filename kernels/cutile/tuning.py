"""Tile sizes and occupancy of each stage: a frozen dataclass per kernel and the function choosing it.

Heuristics for now, from (arch, dims, dtype); :func:`choose` gathers every stage's choice into one
:class:`Configs`, and a caller that explores other tiles passes its own to ``plan_forward(configs=)``.
Every field here becomes a compile-time constant of its kernel, so the export in
``kernels.cutile.export`` walks the same choosers to list what gets compiled.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from reference.checks import SSDDims

# Programs the grids aim at, per architecture: (the sequential state pass, the segment-parallel pass's local
# walk). On the H200 (sm_90, 132 SMs), where they were measured: about 2 and 4 per SM (the local walk at
# occupancy 4, so that each program's chain of dependent chunk steps is hidden behind the others'). The
# B200 (sm_100) and B300 (sm_103) have 148 SMs: the H200's figures scaled by 148/132, compile-checked on the
# CPU (validation/test_compile.py), not measured. An architecture not listed gets the H200's.
TARGET_PROGRAMS = {"sm_90": (256, 512), "sm_100": (288, 576), "sm_103": (288, 576)}
_MAX_SEGMENT_CHUNKS = 64


@dataclass(frozen=True)
class Variant:
    """Which structure of the forward runs: the default, or an ablation that changes one thing.

    ``state``: "segmented" (the segment-parallel state pass of kernels.cutile.segment_state: local walks
    per segment, a scan over segments, the entry states completed in place), "serial" (one program walks
    every chunk of a sequence, as the post's fwd_pass_state) or "auto" (the one ``state_pass_kind`` picks
    for the shape).
    ``int64``: "per-array" (int64 indexing only on the arrays whose span passes 2**31) or "all" (every
    array of a kernel as soon as one needs it, as before).
    ``c_once``: chunk_out builds the diagonal C·Bᵀ block in its C·hᵀ loop, loading C once (False: two
    loops over dstate, C loaded in each).
    ``cb_heads``: heads of a group that share one C·Bᵀ block in chunk_out (1: each head builds its own, the
    default; it must divide the heads of a group). Not yet measured: the shared block, held across the
    heads, spills registers on sm_90 (cuobjdump: about 1,700 local stores against 137 for one head).
    """

    state: str = "auto"
    int64: str = "per-array"
    c_once: bool = True
    cb_heads: int = 1


VARIANTS = {
    "default": Variant(),
    "serial-state": Variant(state="serial"),
    "segmented-state": Variant(state="segmented"),
    "int64-all": Variant(int64="all"),
    "c-twice": Variant(c_once=False),
    "cb-shared-8": Variant(cb_heads=8),
}


def _next_pow2(n: int) -> int:
    return 1 << (n - 1).bit_length()


@dataclass(frozen=True)
class ChunkCumsumConfig:
    block_h: int              # heads per program
    occupancy: int | None = None


@dataclass(frozen=True)
class StatePassConfig:
    """The walk of ``_state_pass_kernel`` over a whole sequence (the serial state pass)."""

    block_p: int              # headdim tile of the carried state
    block_n: int              # dstate tile of the carried state
    latency: int              # DRAM latency hint of the streamed x, B loads (1..10)
    occupancy: int | None = None


@dataclass(frozen=True, kw_only=True)
class SegmentStateConfig(StatePassConfig):
    """The same walk over segments of ``seg_chunks`` chunks (the segmented pass's local walk)."""

    seg_chunks: int           # chunks per segment (a power of two)


@dataclass(frozen=True)
class SegmentScanConfig:
    block_p: int              # headdim tile of the carried state
    block_n: int              # dstate tile of the carried state
    latency: int              # DRAM latency hint of the segment-state loads (1..10)
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
    block_h: int = 1          # heads of one group per program, sharing one C·Bᵀ block (needs c_once)


def chunk_cumsum_config(arch: str, dims: SSDDims, dtype: torch.dtype, chunk_size: int) -> ChunkCumsumConfig:
    # Tiny and memory-bound: a 16 x chunk_size tile reads dt rows of 16 heads.
    return ChunkCumsumConfig(block_h=min(_next_pow2(dims.nheads), 16))


def state_pass_kind(arch: str, dims: SSDDims, dtype: torch.dtype, chunk_size: int) -> str:
    """"segmented" or "serial": the state pass that measured faster on the H200 for this kind of shape.

    From the benchmark of 2026-12-01 (batch 4, 8 heads, headdim 64, chunk 128, bf16; whole forward, CUPTI):
    dstate 512 segmented everywhere (1024 tokens 63 vs 80 us, 16384: 758 vs 824, 131072: 5708 vs 6112,
    262144: a tie); dstate 128 and 256 serial (16384 tokens: 247 vs 255 and 408 vs 431 us, since the
    in-place completion of the states costs more than the serial pass loses); dstate 64 segmented past 8
    chunks (16384 tokens: 192 vs 228 us) and serial up to 8 (1024 tokens: 23 vs 29 us, two launches fewer).
    """
    nchunks = -(-dims.seqlen // chunk_size)
    if 128 <= dims.dstate <= 256:
        return "serial"
    if dims.dstate <= 64 and nchunks <= 8:
        return "serial"
    return "segmented"


def state_pass_config(arch: str, dims: SSDDims, dtype: torch.dtype, chunk_size: int) -> StatePassConfig:
    # One program per (batch, head, headdim tile, dstate tile) walks every chunk in turn, so the grid
    # is small; narrow the dstate tile until the GPU has enough programs, but keep it >= 32 wide
    # (HGMMA N) unless dstate itself is smaller.
    block_p = min(dims.headdim, 64)
    block_n = min(dims.dstate, 128 if chunk_size <= 128 else 64)
    floor_n = min(dims.dstate, 32)
    target = TARGET_PROGRAMS.get(arch, TARGET_PROGRAMS["sm_90"])[0]
    while block_n > floor_n and dims.batch * dims.nheads * (dims.headdim // block_p) * (dims.dstate // block_n) < target:
        block_n //= 2
    # latency 8: measured 5-8% faster than 4 at (16384 tokens, dstate 128 and 512) on the H200
    # (validation/bench/explore_cutile.py, 2026-11-30).
    return StatePassConfig(block_p=block_p, block_n=block_n, latency=8)


def segment_state_config(arch: str, dims: SSDDims, dtype: torch.dtype, chunk_size: int) -> SegmentStateConfig:
    # Narrow tiles at occupancy 4, the longest segments that still give about TARGET_PROGRAMS' count (every segment adds one state of traffic to the scan and one step to its chain):
    # 64 x 32 tiles at occupancy 4 ran the local pass in 71 us at (16384 tokens, dstate 128) on the H200,
    # against 128-212 us for 64 x 64 and 64 x 128 tiles at occupancy 2 or none (explore_cutile, 2026-12-01).
    block_p = min(dims.headdim, 64)
    block_n = min(dims.dstate, 32)
    nchunks = -(-dims.seqlen // chunk_size)
    tiles = dims.batch * dims.nheads * (dims.headdim // block_p) * (dims.dstate // block_n)
    seg_chunks = _MAX_SEGMENT_CHUNKS
    target = TARGET_PROGRAMS.get(arch, TARGET_PROGRAMS["sm_90"])[1]
    while seg_chunks > 1 and tiles * -(-nchunks // seg_chunks) < target:
        seg_chunks //= 2
    return SegmentStateConfig(block_p=block_p, block_n=block_n, seg_chunks=seg_chunks, latency=8, occupancy=4)


def segment_scan_config(arch: str, dims: SSDDims, dtype: torch.dtype, chunk_size: int) -> SegmentScanConfig:
    # Elementwise over fp32 states: narrow tiles, so that many programs each walk the segments.
    return SegmentScanConfig(block_p=min(dims.headdim, 16), block_n=min(dims.dstate, 64), latency=4)


def segment_apply_config(arch: str, dims: SSDDims, dtype: torch.dtype, chunk_size: int) -> SegmentApplyConfig:
    # Elementwise and memory-bound: small tiles, many programs in flight. At (16384 tokens, dstate 512) on the
    # H200: 16 x 128 tiles 213 us for 537 MB, 64 x 128 tiles 331 us, 8 x 128 288 us (explore_cutile, 2026-12-01).
    return SegmentApplyConfig(block_p=min(dims.headdim, 16), block_n=min(dims.dstate, 128))


def chunk_out_config(arch: str, dims: SSDDims, dtype: torch.dtype, chunk_size: int) -> ChunkOutConfig:
    # The (block_m x block_m) C·Bᵀ block and the (block_m x block_p) output both live in registers:
    # 128 x 128 + 128 x 64 fp32 is the most we hold; chunk 256 therefore runs as 2 row blocks.
    block_m = min(chunk_size, 128)
    block_p = min(dims.headdim, 64)
    if dtype in (torch.bfloat16, torch.float16):
        # C loaded once (c_once): chunk_out 131 -> 120 us at (16384 tokens, dstate 128) and 289 -> 231 us at dstate
        # 512 on the H200 (benchmark, variant c-twice, 2026-12-01).
        # 128-wide dstate steps at occupancy 2: 357 -> 277 us at (16384 tokens, dstate 128) and 905 -> 849 us
        # at dstate 512 on the H200 (validation/bench/explore_cutile.py, 2026-11-30). fp32 (tf32) operand tiles
        # are twice the bytes, so fp32 keeps the narrower step until it is measured.
        return ChunkOutConfig(block_m=block_m, block_p=block_p, block_n=min(dims.dstate, 128), latency=4, occupancy=2)
    return ChunkOutConfig(block_m=block_m, block_p=block_p, block_n=min(dims.dstate, 64), latency=4)


@dataclass(frozen=True)
class Configs:
    """Every stage's configuration for one problem (the state pass that does not run is ignored)."""

    chunk_cumsum: ChunkCumsumConfig
    state_pass: StatePassConfig
    segment_state: SegmentStateConfig
    segment_scan: SegmentScanConfig
    segment_apply: SegmentApplyConfig
    chunk_out: ChunkOutConfig


def choose(arch: str, dims: SSDDims, dtype: torch.dtype, chunk_size: int) -> Configs:
    """The choosers' configuration of every stage for this problem."""
    args = (arch, dims, dtype, chunk_size)
    return Configs(chunk_cumsum=chunk_cumsum_config(*args), state_pass=state_pass_config(*args),
                   segment_state=segment_state_config(*args), segment_scan=segment_scan_config(*args),
                   segment_apply=segment_apply_config(*args), chunk_out=chunk_out_config(*args))
