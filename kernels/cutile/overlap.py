"""The serial walk and chunk_out in one launch: chunk_out's programs run beside the walk, each as soon as its chunk's
entry state is stored, instead of after the whole walk.

The walk is a chain of dependent chunk steps in about one program an SM (``tuning.state_pass_config``): while it
runs, most of the GPU waits. Here one grid holds both: its programs take a ticket from an atomic counter as they
start, the first tickets run the walk's programs (``state_pass.walk_program``, each storing its state tiles and
counting them in ``ready`` with release order), the others chunk_out's (``chunk_out.out_program``), chunk by chunk
across the batch, each waiting with acquire order until every tile of its chunk's state is counted. A chunk_out
program only waits on walk programs, which took their tickets before it and so are already running and never wait:
no order of scheduling can deadlock it. ``ready`` and the ticket are zeroed by the cumsum launch before
(``chunk_cumsum``'s ``sync``).
"""

import cuda.tile as ct
import torch

from kernels.alloc import empty
from kernels.cutile._launch import Launch, plan_launch
from kernels.cutile.chunk_out import out_program
from kernels.cutile.state_pass import state_dtype, walk_program
from kernels.cutile.tuning import ChunkOutConfig, StatePassConfig


def _overlap_kernel(
    x: ct.Array,                 # (batch, seqlen, nheads, headdim)
    B: ct.Array,                 # (batch, seqlen, ngroups, dstate)
    C: ct.Array,                 # (batch, seqlen, ngroups, dstate)
    g: ct.Array,                 # (batch, nheads, nchunks * CHUNK) fp32, from chunk_cumsum
    dtT: ct.Array,               # (batch, nheads, nchunks * CHUNK) fp32, from chunk_cumsum
    w: ct.Array,                 # the walk's dt: chunk_cumsum's weights if PRE_WEIGHTS, else dtT
    entry: ct.Array,             # (batch, nheads, 1, headdim, dstate) fp32: the initial state; read if FROM_ENTRY
    states: ct.Array,            # out (batch, nheads, nchunks, headdim, dstate), (..., dstate, headdim) if STATES_T
    end: ct.Array,               # out (batch, nheads, 1, headdim, dstate) fp32: the final state
    total_decay: ct.Array,       # out (batch, nheads, 1) fp32: stored by the walk, never read
    D: ct.Array,                 # (nheads,) fp32; unread unless HAS_D
    y: ct.Array,                 # out (batch, seqlen, nheads, headdim)
    ready: ct.Array,             # (batch, nheads, nchunks) int32, zero: stored tiles of each chunk's entry state
    ticket: ct.Array,            # (1,) int32, zero: programs started
    CHUNK: ct.Constant[int],
    W_BLOCK_P: ct.Constant[int],
    W_BLOCK_N: ct.Constant[int],
    FROM_ENTRY: ct.Constant[bool],
    SWAP_AB: ct.Constant[bool],
    STATES_T: ct.Constant[bool],
    W_LATENCY: ct.Constant[int],
    UNROLL: ct.Constant[int],
    SCALAR_LATENCY: ct.Constant[int],
    PRE_WEIGHTS: ct.Constant[bool],
    WEIGH_X: ct.Constant[bool],
    PACKED_WEIGHTS: ct.Constant[bool],
    O_BLOCK_M: ct.Constant[int],
    O_BLOCK_P: ct.Constant[int],
    O_BLOCK_N: ct.Constant[int],
    HAS_D: ct.Constant[bool],
    C_ONCE: ct.Constant[bool],
    O_LATENCY: ct.Constant[int],
):
    """Grid (walk programs + chunk_out programs,): by ticket, the serial walk's programs (W_ tiles), then chunk_out's
    (O_ tiles, one head a program) in chunk order, chunk slowest, then sequence."""
    batch, nheads = ct.astype(x.shape[0], ct.int32), ct.astype(x.shape[2], ct.int32)
    headdim, dstate = ct.astype(x.shape[3], ct.int32), ct.astype(B.shape[3], ct.int32)
    walk_tiles = (headdim // W_BLOCK_P) * (dstate // W_BLOCK_N)
    walk_per_seq = nheads * walk_tiles
    t = ct.atomic_add(ticket, (0,), 1, memory_order=ct.MemoryOrder.RELAXED, memory_scope=ct.MemoryScope.DEVICE)
    if t < batch * walk_per_seq:
        walk_program(x, B, g, w, entry, states, total_decay, end, total_decay, g, dtT, ready, t % walk_per_seq,
                     t // walk_per_seq, CHUNK, W_BLOCK_P, W_BLOCK_N, 1 << 30, FROM_ENTRY, True, False, True, SWAP_AB,
                     STATES_T, W_LATENCY, UNROLL, SCALAR_LATENCY, PRE_WEIGHTS, WEIGH_X, PACKED_WEIGHTS, False, False,
                     True)
    else:
        u = t - batch * walk_per_seq
        per_row = nheads * (headdim // O_BLOCK_P)
        row_block, rest = u // (batch * per_row), u % (batch * per_row)
        out_program(x, B, C, g, dtT, states, D, states, states, total_decay, total_decay, y, y, ready,
                    row_block * per_row + rest % per_row, rest // per_row, CHUNK, O_BLOCK_M, O_BLOCK_P, O_BLOCK_N, 1,
                    HAS_D, C_ONCE, False, STATES_T, False, 0, False, O_LATENCY, False, walk_tiles)


def sync_buffers(batch: int, nheads: int, nchunks: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """``ready`` (batch, nheads, nchunks) and the ticket (1,), int32, uninitialized: chunk_cumsum zeroes them."""
    return (empty((batch, nheads, nchunks), dtype=torch.int32, device=device),
            empty((1,), dtype=torch.int32, device=device))


def overlap(x: torch.Tensor, B: torch.Tensor, C: torch.Tensor, g: torch.Tensor, dtT: torch.Tensor, w: torch.Tensor,
            D: torch.Tensor | None, A: torch.Tensor, initial_state: torch.Tensor | None,
            sync: tuple[torch.Tensor, torch.Tensor], *, chunk_size: int, walk_cfg: StatePassConfig,
            out_cfg: ChunkOutConfig, int64_everywhere: bool = False) -> tuple[Launch, torch.Tensor, torch.Tensor]:
    """Plan the walk and chunk_out as one launch; returns it, y and the final state. ``w``: what the walk reads as
    dt (chunk_cumsum's weights if ``walk_cfg.pre_weights``); ``sync``: ``sync_buffers``, zeroed by the cumsum launch
    before this one. One part of chunk states (int64-indexed past 2**31), chunk_out one head a program."""
    batch, seqlen, nheads, headdim = x.shape
    dstate = B.shape[3]
    nchunks = -(-seqlen // chunk_size)
    if walk_cfg.segments != 1 or out_cfg.block_h != 1 or out_cfg.cb_buffer or out_cfg.split_diag:
        raise ValueError(f"overlap: the serial walk in one segment and chunk_out one head a program, its C·Bᵀ built "
                         f"on chip; got segments={walk_cfg.segments}, block_h={out_cfg.block_h}, "
                         f"cb_buffer={out_cfg.cb_buffer}, split_diag={out_cfg.split_diag}")
    state_dims = (dstate, headdim) if walk_cfg.states_t else (headdim, dstate)
    states = empty((batch, nheads, nchunks, *state_dims), dtype=state_dtype(x.dtype), device=x.device)
    final_state = empty((batch, nheads, headdim, dstate), dtype=torch.float32, device=x.device)
    total_decay = empty((batch, nheads, 1), dtype=torch.float32, device=x.device)
    y = empty((batch, seqlen, nheads, headdim), dtype=x.dtype, device=x.device)
    end = final_state.unsqueeze(2)
    entry = initial_state.unsqueeze(2) if initial_state is not None else end
    walk_programs = batch * nheads * (headdim // walk_cfg.block_p) * (dstate // walk_cfg.block_n)
    out_programs = batch * nheads * (headdim // out_cfg.block_p) * -(-seqlen // out_cfg.block_m)
    args = (x, B, C, g, dtT, w, entry, states, end, total_decay, D if D is not None else A, y, *sync, chunk_size,
            walk_cfg.block_p, walk_cfg.block_n, initial_state is not None, walk_cfg.swap_ab, walk_cfg.states_t,
            walk_cfg.latency, walk_cfg.unroll, walk_cfg.scalar_latency or 0, walk_cfg.pre_weights, walk_cfg.weigh_x,
            walk_cfg.packed_weights, out_cfg.block_m, out_cfg.block_p, out_cfg.block_n, D is not None,
            out_cfg.c_once, out_cfg.latency)
    occupancy = max(walk_cfg.occupancy or 1, out_cfg.occupancy or 1)
    launch = plan_launch(_overlap_kernel, (walk_programs + out_programs,), args, occupancy=occupancy,
                         int64_everywhere=int64_everywhere)
    return launch, y, final_state
