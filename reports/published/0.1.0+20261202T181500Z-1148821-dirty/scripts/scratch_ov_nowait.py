"""Stages 2 and 3 in one launch: the serial walk and chunk_out overlapped.

Run one after the other, the walk (a few programs, each a chain of dependent chunk steps) leaves most of the GPU
idle, and chunk_out waits for all of it. Here every program first takes a ticket from a counter: the first tickets
walk the state tiles exactly as the serial pass does (``state_pass.walk``), the others compute chunk_out's output
blocks in chunk order, sequence by sequence, head by head. An output block needs its chunk's entry state only for
its C·hᵀ term, so it computes everything else first (C·Bᵀ, the causal decay, the dt-weighted X, D·X), then waits
until every state tile of its head has counted the chunk in ``flags`` (a release after the walk stored the states
of a group of chunks, an acquire here), then adds exp2(g) C·hᵀ.

Tickets, not block ids, give out the roles: a program that waits took its ticket after every walker took theirs,
so the walkers it waits for are running or done, in whatever order the hardware starts programs; the walkers
wait for nothing. The cumsum zeroes the counters before this launch (``chunk_cumsum(counters=...)``).
"""

import cuda.tile as ct
import torch

from kernels.alloc import empty
from kernels.cutile._launch import Launch, exp2, plan_launch
from kernels.cutile.chunk_out import _causal_decay, _state_t
from kernels.cutile.state_pass import WHOLE_SEQUENCE, state_dtype, walk
from kernels.cutile.tuning import ChunkOutConfig, StatePassConfig


def _wait(flags, b, head, group, need):
    """Spin until ``need`` state tiles have counted chunk group ``group`` of (b, head). The spin reads the count with
    relaxed atomics (an acquire would invalidate the SM's L1 at every read), then one acquire makes the states the
    walkers stored before their release visible to the loads after it."""
    seen = ct.atomic_add(flags, (b, head, group), 0, memory_order=ct.MemoryOrder.RELAXED,
                         memory_scope=ct.MemoryScope.DEVICE)
    while seen < need:
        seen = ct.atomic_add(flags, (b, head, group), 0, memory_order=ct.MemoryOrder.RELAXED,
                             memory_scope=ct.MemoryScope.DEVICE)
    ct.atomic_add(flags, (b, head, group), 0, memory_order=ct.MemoryOrder.ACQUIRE, memory_scope=ct.MemoryScope.DEVICE)


def _out_block(x, B, C, g, dtT, states, D, y, flags, b, head, chunk, p_tile, need, CHUNK, BLOCK_P, BLOCK_N,
               HAS_D, STATES_T, LATENCY, FLAG_CHUNKS):
    """One head's (CHUNK, BLOCK_P) block of y for one chunk: the causal part and D·X, then, once the chunk's entry
    state is released, exp2(g) C·hᵀ."""
    MMA_DTYPE = ct.static_eval(ct.tfloat32 if x.dtype == ct.float32 else x.dtype)
    STATE_MMA_DTYPE = ct.static_eval(ct.tfloat32 if states.dtype == ct.float32 else states.dtype)
    nheads, ngroups = ct.astype(x.shape[2], ct.int32), ct.astype(B.shape[2], ct.int32)
    ntiles = ct.astype(B.shape[3], ct.int32) // BLOCK_N
    group = head // (nheads // ngroups)
    cb = ct.zeros((CHUNK, CHUNK), dtype=ct.float32)
    for n in range(ntiles):
        Cm = ct.load(C, (b, chunk, group, n), shape=(1, CHUNK, 1, BLOCK_N), padding_mode=ct.PaddingMode.ZERO,
                     latency=LATENCY).reshape((CHUNK, BLOCK_N))
        Bm = ct.load(B, (b, chunk, group, n), shape=(1, CHUNK, 1, BLOCK_N), padding_mode=ct.PaddingMode.ZERO,
                     latency=LATENCY).reshape((CHUNK, BLOCK_N))
        cb = ct.mma(Cm.astype(MMA_DTYPE), Bm.transpose().astype(MMA_DTYPE), cb)
    g_m = ct.load(g, (b, head, chunk), shape=(1, 1, CHUNK)).reshape((CHUNK, 1))
    dt_m = ct.load(dtT, (b, head, chunk), shape=(1, 1, CHUNK)).reshape((1, CHUNK))
    # Rows past seqlen (ragged tail) load as zeros and are clipped on store; with dt = 0 and B = 0 there, they
    # contribute nothing to the real rows.
    Xm = ct.load(x, (b, chunk, head, p_tile), shape=(1, CHUNK, 1, BLOCK_P), padding_mode=ct.PaddingMode.ZERO,
                 latency=LATENCY).reshape((CHUNK, BLOCK_P))
    acc = ct.mma((cb * _causal_decay(g_m, CHUNK) * dt_m).astype(MMA_DTYPE), Xm.astype(MMA_DTYPE),
                 ct.zeros((CHUNK, BLOCK_P), dtype=ct.float32))
    if HAS_D:
        acc = acc + ct.load(D, (head,), shape=(1,)).reshape((1, 1)) * Xm.astype(ct.float32)

    pass  # scratch: no wait
    ch = ct.zeros((CHUNK, BLOCK_P), dtype=ct.float32)
    for n in range(ntiles):
        Cm = ct.load(C, (b, chunk, group, n), shape=(1, CHUNK, 1, BLOCK_N), padding_mode=ct.PaddingMode.ZERO,
                     latency=LATENCY).reshape((CHUNK, BLOCK_N))
        hT = _state_t(states, b, head, chunk, p_tile, n, BLOCK_P, BLOCK_N, STATES_T, False)
        ch = ct.mma(Cm.astype(STATE_MMA_DTYPE), hT.astype(STATE_MMA_DTYPE), ch)
    # g_m <= 0, so exp2(g_m) <= 1.
    acc = acc + ch * exp2(g_m)
    ct.store(y, (b, chunk, head, p_tile), acc.reshape((1, CHUNK, 1, BLOCK_P)).astype(y.dtype))


def _overlap_kernel(
    x: ct.Array,                 # (batch, seqlen, nheads, headdim)
    B: ct.Array,                 # (batch, seqlen, ngroups, dstate)
    C: ct.Array,                 # (batch, seqlen, ngroups, dstate)
    g: ct.Array,                 # (batch, nheads, nchunks * CHUNK) fp32, from chunk_cumsum
    dtT: ct.Array,               # (batch, nheads, nchunks * CHUNK) fp32, from chunk_cumsum
    w: ct.Array,                 # (batch, nheads, nchunks * CHUNK) fp32: what the walk reads as dt (PRE_WEIGHTS)
    initial_state: ct.Array,     # (batch, nheads, 1, headdim, dstate) fp32; read if FROM_ENTRY
    states: ct.Array,            # out (batch, nheads, nchunks, headdim, dstate): each chunk's entry state
    final_state: ct.Array,       # out (batch, nheads, 1, headdim, dstate) fp32
    total_decay: ct.Array,       # out (batch, nheads, 1) fp32: stored, never read
    D: ct.Array,                 # (nheads,) fp32; unread unless HAS_D
    y: ct.Array,                 # out (batch, seqlen, nheads, headdim)
    flags: ct.Array,             # (batch, nheads, cdiv(nchunks, FLAG_CHUNKS)) int32, zero at the launch
    ticket: ct.Array,            # (1,) int32, zero at the launch
    CHUNK: ct.Constant[int],
    WALK_P: ct.Constant[int],
    WALK_N: ct.Constant[int],
    FROM_ENTRY: ct.Constant[bool],
    SWAP_AB: ct.Constant[bool],
    STATES_T: ct.Constant[bool],
    WALK_LATENCY: ct.Constant[int],
    UNROLL: ct.Constant[int],
    SCALAR_LATENCY: ct.Constant[int],
    PRE_WEIGHTS: ct.Constant[bool],
    WEIGH_X: ct.Constant[bool],
    PACKED_WEIGHTS: ct.Constant[bool],
    OUT_P: ct.Constant[int],
    OUT_N: ct.Constant[int],
    OUT_LATENCY: ct.Constant[int],
    HAS_D: ct.Constant[bool],
    FLAG_CHUNKS: ct.Constant[int],
):
    """Grid (walkers + nchunks * batch * nheads * headdim/OUT_P,): ``walkers`` = batch * nheads * headdim/WALK_P *
    dstate/WALK_N programs walk (WALK_P, WALK_N) state tiles (the serial pass's walk, counting each group of
    FLAG_CHUNKS chunks in ``flags``), the rest compute (CHUNK, OUT_P) output blocks, chunk slowest. The role and the
    block come from the program's ticket, not its block id."""
    nheads = ct.astype(x.shape[2], ct.int32)
    batch = ct.astype(x.shape[0], ct.int32)
    walk_tiles = (ct.astype(x.shape[3], ct.int32) // WALK_P) * (ct.astype(B.shape[3], ct.int32) // WALK_N)
    per_batch = nheads * walk_tiles
    # Relaxed: the ticket orders nothing but the roles.
    t = ct.atomic_add(ticket, 0, 1, memory_order=ct.MemoryOrder.RELAXED, memory_scope=ct.MemoryScope.DEVICE)
    if t < batch * per_batch:
        walk(x, B, g, w, initial_state, states, total_decay, final_state, total_decay, flags, t % per_batch,
             t // per_batch, CHUNK, WALK_P, WALK_N, WHOLE_SEQUENCE, FROM_ENTRY, True, False, True, SWAP_AB, STATES_T,
             WALK_LATENCY, UNROLL, SCALAR_LATENCY, PRE_WEIGHTS, WEIGH_X, PACKED_WEIGHTS, FLAG_CHUNKS)
    else:
        o = t - batch * per_batch
        ptiles = ct.astype(x.shape[3], ct.int32) // OUT_P
        p_tile = o % ptiles
        head = (o // ptiles) % nheads
        b = (o // (ptiles * nheads)) % batch
        chunk = o // (ptiles * nheads * batch)
        _out_block(x, B, C, g, dtT, states, D, y, flags, b, head, chunk, p_tile, walk_tiles, CHUNK, OUT_P, OUT_N,
                   HAS_D, STATES_T, OUT_LATENCY, FLAG_CHUNKS)


# The widest state the overlapped pass runs: from dstate 256 the sm_90 compile of the one kernel that holds both the
# walk and the output block took over ten minutes (tileiras 13.4 on one CPU core), against seconds at 128.
OVERLAP_MAX_DSTATE = 128


def supports(chunk_size: int, dstate: int, dtype: torch.dtype, out_cfg: ChunkOutConfig) -> bool:
    """Whether the overlapped pass runs this problem: 16-bit inputs (the only ones it ran on the GPU),
    dstate <= OVERLAP_MAX_DSTATE, whole chunks a program (chunks of at most 128 rows), each head its own C·Bᵀ, no
    buffer."""
    return (dtype in (torch.bfloat16, torch.float16) and dstate <= OVERLAP_MAX_DSTATE and out_cfg.block_m == chunk_size and out_cfg.block_h == 1
            and not out_cfg.cb_buffer)


def overlap(x: torch.Tensor, B: torch.Tensor, C: torch.Tensor, g: torch.Tensor, dtT: torch.Tensor, w: torch.Tensor,
            D: torch.Tensor | None, A: torch.Tensor, initial_state: torch.Tensor | None, counters, *, chunk_size: int,
            walk_cfg: StatePassConfig, out_cfg: ChunkOutConfig,
            int64_everywhere: bool = False) -> tuple[Launch, torch.Tensor, torch.Tensor]:
    """Plan the overlapped launch; returns it, y and the final state. ``w``: what the walk reads as dt (the cumsum's
    weights with ``walk_cfg.pre_weights``); ``counters``: (flags, ticket, chunks a flag), zeroed by the cumsum."""
    batch, seqlen, nheads, headdim = x.shape
    dstate = B.shape[3]
    nchunks = g.shape[2] // chunk_size
    flags, ticket, flag_chunks = counters
    if walk_cfg.unroll > 1 and flag_chunks % walk_cfg.unroll:
        raise ValueError(f"overlap: flag_chunks={flag_chunks} must be a multiple of the walk's unroll "
                         f"({walk_cfg.unroll})")
    state_dims = (dstate, headdim) if walk_cfg.states_t else (headdim, dstate)
    states = empty((batch, nheads, nchunks, *state_dims), dtype=state_dtype(x.dtype), device=x.device)
    final_state = empty((batch, nheads, headdim, dstate), dtype=torch.float32, device=x.device)
    total_decay = empty((batch, nheads, 1), dtype=torch.float32, device=x.device)
    y = empty((batch, seqlen, nheads, headdim), dtype=x.dtype, device=x.device)
    seg_end = final_state.unsqueeze(2)
    walkers = batch * nheads * (headdim // walk_cfg.block_p) * (dstate // walk_cfg.block_n)
    grid = (walkers + nchunks * batch * nheads * (headdim // out_cfg.block_p),)
    args = (x, B, C, g, dtT, w, initial_state.unsqueeze(2) if initial_state is not None else seg_end, states,
            seg_end, total_decay, D if D is not None else A, y, flags, ticket, chunk_size, walk_cfg.block_p,
            walk_cfg.block_n, initial_state is not None, walk_cfg.swap_ab, walk_cfg.states_t, walk_cfg.latency,
            walk_cfg.unroll, walk_cfg.scalar_latency or 0, walk_cfg.pre_weights, walk_cfg.weigh_x,
            walk_cfg.packed_weights, out_cfg.block_p, out_cfg.block_n, out_cfg.latency, D is not None, flag_chunks)
    launch = plan_launch(_overlap_kernel, grid, args, occupancy=out_cfg.occupancy, int64_everywhere=int64_everywhere)
    return launch, y, final_state
