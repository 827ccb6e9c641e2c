"""Stage 1, chunk_cumsum: in-chunk cumulative sum of A*dt, in log2 units, head-major.

Writes two [batch, nheads, nchunks * chunk_size] fp32 buffers, token-contiguous so that stages 2
and 3 load one head's chunk as one contiguous row:

    g[b, h, t]  = log2(e) * sum_{s in chunk(t), s <= t} A[h] * dt[b, s, h]   (so exp2(g) = exp(...))
    dtT[b, h, t] = dt[b, t, h]

Tokens past seqlen (the padding of a ragged last chunk) get dt = 0, so g stays at the value of the
last real token: the chunk's total decay can be read at index chunk_size - 1 of every chunk.
"""

import cuda.tile as ct
import torch

from kernels.alloc import empty
from kernels.cutile._launch import LOG2E, STACK_ROWS, Launch, plan_launch
from kernels.cutile.state_pass import chunk_state_weight
from kernels.cutile.tuning import ChunkCumsumConfig


def _chunk_cumsum_kernel(
    dt: ct.Array,                # (batch, seqlen, nheads) fp32, any strides
    A: ct.Array,                 # (nheads,) fp32
    g: ct.Array,                 # out (batch, nheads, nchunks * CHUNK) fp32
    dtT: ct.Array,               # out (batch, nheads, nchunks * CHUNK) fp32
    w: ct.Array,                 # out (batch, nheads, nchunks * CHUNK) fp32 if WEIGHTS
    CHUNK: ct.Constant[int],
    BLOCK_H: ct.Constant[int],
    WEIGHTS: ct.Constant[bool],
    STACKED: ct.Constant[bool],
):
    """Grid (nchunks, cdiv(nheads, BLOCK_H), batch): one chunk of BLOCK_H heads of one sequence. WEIGHTS: also the
    per-token weight of the chunk state, w = exp2(g_last - g) * dt (g_last the chunk's last cumsum)."""
    chunk, head_tile, b = ct.bid(0), ct.bid(1), ct.bid(2)
    # Read dt transposed (heads x tokens); zero padding covers the ragged tail and the last head tile.
    dt_tile = ct.load(dt, (b, head_tile, chunk), shape=(1, BLOCK_H, CHUNK), order=(0, 2, 1),
                      padding_mode=ct.PaddingMode.ZERO)
    A_tile = ct.load(A, (head_tile,), shape=(BLOCK_H,), padding_mode=ct.PaddingMode.ZERO)
    g_tile = ct.cumsum(dt_tile * (A_tile * LOG2E).reshape((1, BLOCK_H, 1)), axis=2)
    if STACKED:
        # ``g`` is the stacked (batch, nheads, 4, tokens) buffer: rows w, g, g, dt (kernels.cutile._launch.STACK_ROWS).
        SHAPE4 = ct.static_eval((1, BLOCK_H, 1, CHUNK))
        g_last = ct.extract(g_tile, (0, 0, CHUNK - 1), shape=(1, BLOCK_H, 1))
        ct.store(g, (b, head_tile, 0, chunk), chunk_state_weight(g_tile, g_last, dt_tile).reshape(SHAPE4))
        ct.store(g, (b, head_tile, 1, chunk), g_tile.reshape(SHAPE4))
        ct.store(g, (b, head_tile, 2, chunk), g_tile.reshape(SHAPE4))
        ct.store(g, (b, head_tile, 3, chunk), dt_tile.reshape(SHAPE4))
        return
    ct.store(g, (b, head_tile, chunk), g_tile)
    ct.store(dtT, (b, head_tile, chunk), dt_tile)
    if WEIGHTS:
        g_last = ct.extract(g_tile, (0, 0, CHUNK - 1), shape=(1, BLOCK_H, 1))
        ct.store(w, (b, head_tile, chunk), chunk_state_weight(g_tile, g_last, dt_tile))


def _chunk_cumsum_args(dt, A, g, dtT, w, cfg: ChunkCumsumConfig, chunk_size: int, weights: bool) -> tuple:
    return (
        dt,
        A,
        g,
        dtT,
        w,
        chunk_size,
        cfg.block_h,
        weights,
        cfg.stacked,
    )


def cumsum_buffers(dt: torch.Tensor, chunk_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The (g, dtT) buffers this stage fills, (batch, nheads, nchunks * chunk_size) fp32 each; also filled by a walk
    that takes the cumsum itself (kernels.cutile.state_pass.walk_args's ``cumsum_out``)."""
    batch, seqlen, nheads = dt.shape
    shape = (batch, nheads, -(-seqlen // chunk_size) * chunk_size)
    return (empty(shape, dtype=torch.float32, device=dt.device), empty(shape, dtype=torch.float32, device=dt.device))


def chunk_cumsum(dt: torch.Tensor, A: torch.Tensor, *, chunk_size: int, cfg: ChunkCumsumConfig,
                 int64_everywhere: bool = False,
                 weights: bool = False) -> tuple[Launch, torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Plan stage 1; returns the launch and the (g, dtT, w) buffers it fills (w, the chunk-state weights, only if
    ``weights``, else None)."""
    batch, seqlen, nheads = dt.shape
    nchunks = -(-seqlen // chunk_size)
    grid = (nchunks, -(-nheads // cfg.block_h), batch)
    if cfg.stacked:
        # One buffer, rows w, g, g, dt, returned in g's place: the kernels that read it know it by its four dimensions.
        stack = empty((batch, nheads, STACK_ROWS, nchunks * chunk_size), dtype=torch.float32, device=dt.device)
        dtT, w = stack[:, :, 3], stack[:, :, 0]
        args = _chunk_cumsum_args(dt, A, stack, dtT, w, cfg, chunk_size, True)
        launch = plan_launch(_chunk_cumsum_kernel, grid, args, occupancy=cfg.occupancy,
                             int64_everywhere=int64_everywhere)
        return launch, stack, dtT, w
    g, dtT = cumsum_buffers(dt, chunk_size)
    w = empty(g.shape, dtype=torch.float32, device=dt.device) if weights else None
    # Without ``weights`` the kernel never writes ``w``: any array of its shape stands in.
    args = _chunk_cumsum_args(dt, A, g, dtT, w if weights else dtT, cfg, chunk_size, weights)
    launch = plan_launch(_chunk_cumsum_kernel, grid, args, occupancy=cfg.occupancy, int64_everywhere=int64_everywhere)
    return launch, g, dtT, w
