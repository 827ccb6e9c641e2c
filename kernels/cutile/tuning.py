"""Tile sizes and occupancy of each stage: a frozen dataclass per kernel and the function choosing it.

Heuristics for now, from (arch, dims, dtype); an autotuned table per arch can replace a chooser
without touching the kernels. Every field here becomes a compile-time constant of its kernel, so
the export in ``kernels.cutile.export`` walks the same choosers to list what gets compiled.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from reference.checks import SSDDims

# Programs that keep an H200 (132 SMs) or a B300 (148 SMs) busy in the sequential state pass.
_TARGET_PROGRAMS = 256


def _next_pow2(n: int) -> int:
    return 1 << (n - 1).bit_length()


@dataclass(frozen=True)
class ChunkCumsumConfig:
    block_h: int              # heads per program
    occupancy: int | None = None


@dataclass(frozen=True)
class StatePassConfig:
    block_p: int              # headdim tile of the carried state
    block_n: int              # dstate tile of the carried state
    latency: int              # DRAM latency hint of the streamed x, B loads (1..10)
    occupancy: int | None = None


@dataclass(frozen=True)
class ChunkOutConfig:
    block_m: int              # output rows per program; also the width of a C·Bᵀ column block
    block_p: int              # headdim tile of y
    block_n: int              # dstate step of the C·Bᵀ and C·hᵀ reductions
    latency: int              # DRAM latency hint of the streamed x, B, C loads (1..10)
    occupancy: int | None = None


def chunk_cumsum_config(arch: str, dims: SSDDims, dtype: torch.dtype, chunk_size: int) -> ChunkCumsumConfig:
    # Tiny and memory-bound: a 16 x chunk_size tile reads dt rows of 16 heads.
    return ChunkCumsumConfig(block_h=min(_next_pow2(dims.nheads), 16))


def state_pass_config(arch: str, dims: SSDDims, dtype: torch.dtype, chunk_size: int) -> StatePassConfig:
    # One program per (batch, head, headdim tile, dstate tile) walks every chunk in turn, so the grid
    # is small; narrow the dstate tile until the GPU has enough programs, but keep it >= 32 wide
    # (HGMMA N) unless dstate itself is smaller.
    block_p = min(dims.headdim, 64)
    block_n = min(dims.dstate, 128 if chunk_size <= 128 else 64)
    floor_n = min(dims.dstate, 32)
    while block_n > floor_n and dims.batch * dims.nheads * (dims.headdim // block_p) * (dims.dstate // block_n) < _TARGET_PROGRAMS:
        block_n //= 2
    # latency 8: measured 5-8% faster than 4 at (16384 tokens, dstate 128 and 512) on the H200
    # (validation/bench/explore_cutile.py, 2026-11-30).
    return StatePassConfig(block_p=block_p, block_n=block_n, latency=8)


def chunk_out_config(arch: str, dims: SSDDims, dtype: torch.dtype, chunk_size: int) -> ChunkOutConfig:
    # The (block_m x block_m) C·Bᵀ block and the (block_m x block_p) output both live in registers:
    # 128 x 128 + 128 x 64 fp32 is the most we hold; chunk 256 therefore runs as 2 row blocks.
    block_m = min(chunk_size, 128)
    block_p = min(dims.headdim, 64)
    if dtype in (torch.bfloat16, torch.float16):
        # 128-wide dstate steps at occupancy 2: 357 -> 277 us at (16384 tokens, dstate 128) and 905 -> 849 us
        # at dstate 512 on the H200 (validation/bench/explore_cutile.py, 2026-11-30). fp32 (tf32) operand tiles
        # are twice the bytes, so fp32 keeps the narrower step until it is measured.
        return ChunkOutConfig(block_m=block_m, block_p=block_p, block_n=min(dims.dstate, 128), latency=4, occupancy=2)
    return ChunkOutConfig(block_m=block_m, block_p=block_p, block_n=min(dims.dstate, 64), latency=4)
