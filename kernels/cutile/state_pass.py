"""Stage 2, fwd_pass_state: the state at the entry of every chunk, by the chunk jump formula.

For one head, with g the chunk's cumsum (log2 units), g_last its value at the chunk's end,
X (chunk, headdim) and B (chunk, dstate) the chunk's rows:

    h_next = exp2(g_last) * h + Xᵀ (exp2(g_last - g) * dt * B)

``_state_pass_kernel`` walks this recurrence through the chunks of one segment of a sequence inside one
program; programs split (segment, batch, head, headdim tile, dstate tile), which are independent. The
serial pass (the post's) is the walk over one segment, the whole sequence, from the initial state; the
segment-parallel pass (kernels.cutile.segment_state) runs the same walk over many shorter segments.
"""

import cuda.tile as ct
import torch

from kernels.alloc import empty
from kernels.cutile._launch import (
    Launch,
    chunk_count,
    chunk_scalars,
    exp2,
    exp2_decay,
    int32_parts,
    latency_hint,
    plan_launch,
)
from kernels.cutile.tuning import StatePassConfig

# SEG_CHUNKS of the serial pass: one segment longer than any sequence, one compiled kernel for every length.
WHOLE_SEQUENCE = 1 << 30


def state_tile(pid, ntiles, ptiles, nheads):
    """(n_tile, p_tile, head, rest) of a program id laid out as rest x head x headdim tile x dstate tile."""
    n_tile = pid % ntiles
    p_tile = (pid // ntiles) % ptiles
    head = (pid // (ntiles * ptiles)) % nheads
    return n_tile, p_tile, head, pid // (ntiles * ptiles * nheads)


def chunk_state_weight(g, g_last, dt):
    """Each token's weight in its chunk's state, exp2(g_last - g) * dt, from its cumsum g, the chunk's last cumsum
    g_last and dt (tiles that broadcast): the one definition, used by the walk and by chunk_cumsum's ``w``."""
    return exp2_decay(g_last - g) * dt  # g_last <= g in exact arithmetic


def _weights(gc, dtc, CHUNK, PRE_WEIGHTS, G_LAST=False):
    """A chunk's per-token weights (``chunk_state_weight``), (CHUNK,), and g_last, its total log2 decay. PRE_WEIGHTS:
    ``dtc`` holds the weights already (chunk_cumsum's ``w``). G_LAST: ``gc`` is g_last alone, (1,)."""
    # g is padded with the last real token's value, so index CHUNK - 1 holds the chunk's total.
    g_last = gc if G_LAST else ct.extract(gc, (CHUNK - 1,), shape=(1,))
    weight = dtc if PRE_WEIGHTS else chunk_state_weight(gc, g_last, dtc)
    return weight, g_last


def _weigh(Bc, gc, dtc, CHUNK, MMA_DTYPE):
    """A chunk's weighted B, exp2(g_last - g) * dt * B, in the matmul dtype, and g_last (``_weights``)."""
    weight, g_last = _weights(gc, dtc, CHUNK, False)
    return (Bc * weight.reshape((CHUNK, 1))).astype(MMA_DTYPE), g_last


def _chunk_loads(x, B, g, dtT, b, chunk, head, group, p_tile, n_tile, CHUNK, BLOCK_P, BLOCK_N, LATENCY, SCALAR_LATENCY,
                 RAW_DT, G_LAST=False, STACKED=False, PRE_WEIGHTS=False):
    """One chunk's X (CHUNK, BLOCK_P) and B (CHUNK, BLOCK_N) as loaded, and its per-token g and dt (CHUNK,); with
    G_LAST, g's last element alone, (1,), the chunk's total (what a walk reading the cumsum's weights needs of g)."""
    # Rows past seqlen load as zeros: with dt = 0 there too, the ragged tail adds nothing; a chunk past the
    # sequence's end loads g = 0 and dt = 0 as well (a step that changes nothing).
    X = ct.load(x, (b, chunk, head, p_tile), shape=(1, CHUNK, 1, BLOCK_P),
                padding_mode=ct.PaddingMode.ZERO, latency=LATENCY).reshape((CHUNK, BLOCK_P))
    Bc = ct.load(B, (b, chunk, group, n_tile), shape=(1, CHUNK, 1, BLOCK_N),
                 padding_mode=ct.PaddingMode.ZERO, latency=LATENCY).reshape((CHUNK, BLOCK_N))
    # The per-token g and dt rows: a latency hint of their own (0: the compiler's choice).
    gc, dtc = chunk_scalars(g, dtT, b, head, chunk, CHUNK, RAW_DT, latency_hint(SCALAR_LATENCY), G_LAST, STACKED,
                            PRE_WEIGHTS)
    return X, Bc, gc, dtc


def _weighted_operands(X, Bc, weight, CHUNK, MMA_DTYPE, WEIGH_X, PACKED_WEIGHTS):
    """The matmul's operands in its dtype, B's rows (or x's, with WEIGH_X) weighted per token by ``weight``."""
    if PACKED_WEIGHTS and X.dtype == ct.bfloat16:
        # The product in bf16: one packed multiply a pair of elements, no widening to fp32. bf16 only: it keeps
        # fp32's exponent range, where fp16 would flush the weights of a fast-decaying chunk.
        w = weight.astype(X.dtype)
    else:
        w = weight
    if WEIGH_X:
        # Xᵀ (w B) = (w X)ᵀ B: B feeds the matmul as loaded; unswapped, the weighted operand takes the matmul's
        # first slot, which may come from registers.
        Xm, Bm = (X * w.reshape((CHUNK, 1))).astype(MMA_DTYPE), Bc.astype(MMA_DTYPE)
    else:
        Xm, Bm = X.astype(MMA_DTYPE), (Bc * w.reshape((CHUNK, 1))).astype(MMA_DTYPE)
    return Xm, Bm


def _chunk_tiles(x, B, g, dtT, g_out, dt_out, b, chunk, nchunks, head, group, p_tile, n_tile, CHUNK, BLOCK_P, BLOCK_N,
                 LATENCY, MMA_DTYPE, SCALAR_LATENCY, PRE_WEIGHTS, WEIGH_X, PACKED_WEIGHTS, RAW_DT, G_LAST, STACKED=False):
    """One chunk's X (CHUNK, BLOCK_P) and B (CHUNK, BLOCK_N) in the matmul dtype, one of them weighted per token
    (``_weights``: B's rows, or x's with WEIGH_X), and g_last: all that a step of the walk needs besides the carried
    state. RAW_DT: the chunk's cumsum taken here, and written to ``g_out`` and ``dt_out`` for chunk_out by the head's
    first state tile."""
    X, Bc, gc, dtc = _chunk_loads(x, B, g, dtT, b, chunk, head, group, p_tile, n_tile, CHUNK, BLOCK_P, BLOCK_N,
                                  LATENCY, SCALAR_LATENCY, RAW_DT, G_LAST, STACKED, PRE_WEIGHTS)
    if RAW_DT:
        if n_tile == 0 and p_tile == 0 and chunk < nchunks:
            ct.store(g_out, (b, head, chunk), gc.reshape((1, 1, CHUNK)))
            ct.store(dt_out, (b, head, chunk), dtc.reshape((1, 1, CHUNK)))
    weight, g_last = _weights(gc, dtc, CHUNK, PRE_WEIGHTS, G_LAST)
    Xm, Bm = _weighted_operands(X, Bc, weight, CHUNK, MMA_DTYPE, WEIGH_X, PACKED_WEIGHTS)
    return Xm, Bm, g_last


def _unrolled_tiles(x, B, g, dtT, b, chunk, head, group, p_tile, n_tile, CHUNK, UNROLL, BLOCK_P, BLOCK_N, LATENCY,
                    MMA_DTYPE, SCALAR_LATENCY, PRE_WEIGHTS, WEIGH_X, PACKED_WEIGHTS, STACKED=False):
    """``_chunk_tiles`` of the UNROLL chunks from ``chunk`` on (a multiple of UNROLL), each array read by one load of
    UNROLL * CHUNK tokens (``_chunk_loads`` of one chunk that long) and split per chunk on chip: a walk step then waits
    on four loads, not four a chunk."""
    X, Bc, gs, dts = _chunk_loads(x, B, g, dtT, b, chunk // UNROLL, head, group, p_tile, n_tile, UNROLL * CHUNK,
                                  BLOCK_P, BLOCK_N, LATENCY, SCALAR_LATENCY, False, False, STACKED, PRE_WEIGHTS)
    tiles = ()
    for u in ct.static_iter(range(UNROLL)):
        weight, g_last = _weights(ct.extract(gs, (u,), shape=(CHUNK,)), ct.extract(dts, (u,), shape=(CHUNK,)), CHUNK,
                                  PRE_WEIGHTS)
        Xm, Bm = _weighted_operands(ct.extract(X, (u, 0), shape=(CHUNK, BLOCK_P)),
                                    ct.extract(Bc, (u, 0), shape=(CHUNK, BLOCK_N)), weight, CHUNK, MMA_DTYPE, WEIGH_X,
                                    PACKED_WEIGHTS)
        tiles += ((Xm, Bm, g_last),)
    return tiles


def _prefix_state(x, B, g, dtT, seg_entry, b, head, group, p_tile, n_tile, t0, t1, first, SHAPE, SHAPE5, ORDER, CHUNK,
                  BLOCK_P, BLOCK_N, LATENCY, MMA_DTYPE, SCALAR_LATENCY, PRE_WEIGHTS, WEIGH_X, PACKED_WEIGHTS, SWAP_AB,
                  FROM_ENTRY, RAW_DT):
    """The state tile at the entry of chunk ``first``, from the entry state (or zero) and the chunks before it, as one
    sum instead of a walk: h = exp2(D_0) h_entry + sum_c exp2(D_c) X_cᵀ (w_c B_c), D_c the log2 decay from the end of
    chunk c to ``first``. The chunks are taken last to first, so that D_c grows as a running sum of the chunks' own
    totals (never a difference of two large cumsums), and it enters the per-token weights before they are rounded to
    the matmul's dtype. Nothing but the running sum passes from one chunk to the next, so that the matmuls could
    accumulate without waiting on each other, as a walk's steps must; on the H200 the walk in two segments was
    nevertheless slower than one walk (tuning.Variant's ``walk_segments``), and it is only an ablation variant."""
    acc = ct.zeros(SHAPE, dtype=ct.float32)
    decay = ct.zeros((1,), dtype=ct.float32)  # D_c, <= 0
    for i in range(first):
        chunk = first - 1 - i
        # Whole chunks (only the sequence's last may be ragged); padded like the walk's loads all the same.
        X, Bc, gc, dtc = _chunk_loads(x, B, g, dtT, b, chunk, head, group, p_tile, n_tile, CHUNK, BLOCK_P, BLOCK_N,
                                      LATENCY, SCALAR_LATENCY, RAW_DT)
        weight, g_last = _weights(gc, dtc, CHUNK, PRE_WEIGHTS)
        Xm, Bm = _weighted_operands(X, Bc, weight * exp2(decay), CHUNK, MMA_DTYPE, WEIGH_X, PACKED_WEIGHTS)
        if SWAP_AB:
            acc = ct.mma(Bm.transpose(), Xm, acc)
        else:
            acc = ct.mma(Xm.transpose(), Bm, acc)
        decay = decay + g_last  # a sum of non-positive numbers: stays <= 0 under rounding
    if FROM_ENTRY:
        entry = ct.load(seg_entry, (b, head, 0, t0, t1), shape=SHAPE5, order=ORDER).reshape(SHAPE)
        acc = acc + entry * exp2(decay).reshape((1, 1))
    return acc


def _store_entry(states, chunk_decay, h, decay, b, head, chunk, t0, t1, SHAPE5, STATES_ORDER, STORE_STATES,
                 STORE_DECAY):
    """What the walk records at a chunk's entry: its state and, for a segment's local walk, its decay so far."""
    if STORE_STATES:
        ct.store(states, (b, head, chunk, t0, t1), h.reshape(SHAPE5).astype(states.dtype), order=STATES_ORDER)
    if STORE_DECAY:
        # Every state tile of the head stores the same d_c: identical values, so the duplicates are benign.
        ct.store(chunk_decay, (b, head, chunk), decay.reshape((1, 1, 1)))


def _step(states, chunk_decay, h, decay, X, Bw, g_last, b, head, chunk, t0, t1, SHAPE5, STATES_ORDER,
          STORE_STATES, STORE_DECAY, SWAP_AB, MMA_DTYPE):
    """Record the chunk's entry, then carry h and the decay through the chunk: h_next = exp2(g_last) h + Xᵀ Bw
    (its transpose with SWAP_AB)."""
    _store_entry(states, chunk_decay, h, decay, b, head, chunk, t0, t1, SHAPE5, STATES_ORDER, STORE_STATES,
                 STORE_DECAY)
    if SWAP_AB:
        h = ct.mma(Bw.transpose(), X, h * exp2(g_last).reshape((1, 1)))
    else:
        h = ct.mma(X.transpose(), Bw, h * exp2(g_last).reshape((1, 1)))
    # A sum of non-positive numbers: stays <= 0 under rounding.
    return h, decay + g_last


def _state_pass_kernel(
    x: ct.Array,                 # (batch, seqlen, nheads, headdim)
    B: ct.Array,                 # (batch, seqlen, ngroups, dstate)
    g: ct.Array,                 # (batch, nheads, nchunks * CHUNK) fp32, from chunk_cumsum; A (nheads,) if RAW_DT
    dtT: ct.Array,               # (batch, nheads, nchunks * CHUNK) fp32, from chunk_cumsum; dt (batch, seqlen, nheads)
                                 # if RAW_DT
    seg_entry: ct.Array,         # (batch, nheads, nseg, headdim, dstate) fp32: each segment's entry; read if FROM_ENTRY
    states: ct.Array,            # out (batch, nheads, nchunks, headdim, dstate): each chunk's entry; if STORE_STATES
    chunk_decay: ct.Array,       # out (batch, nheads, nchunks) fp32: log2 decay since the segment start; if STORE_DECAY
    seg_end: ct.Array,           # out (batch, nheads, nseg, headdim, dstate) fp32: each segment's end; if STORE_END
    seg_decay: ct.Array,         # out (batch, nheads, nseg) fp32: each segment's total log2 decay; if STORE_END
    g_out: ct.Array,             # out (batch, nheads, nchunks * CHUNK) fp32: chunk_cumsum's g; if RAW_DT
    dt_out: ct.Array,            # out (batch, nheads, nchunks * CHUNK) fp32: chunk_cumsum's dtT; if RAW_DT
    CHUNK: ct.Constant[int],
    BLOCK_P: ct.Constant[int],
    BLOCK_N: ct.Constant[int],
    SEG_CHUNKS: ct.Constant[int],
    FROM_ENTRY: ct.Constant[bool],
    STORE_STATES: ct.Constant[bool],
    STORE_DECAY: ct.Constant[bool],
    STORE_END: ct.Constant[bool],
    SWAP_AB: ct.Constant[bool],
    STATES_T: ct.Constant[bool],
    LATENCY: ct.Constant[int],
    UNROLL: ct.Constant[int],
    SCALAR_LATENCY: ct.Constant[int],
    PRE_WEIGHTS: ct.Constant[bool],
    WEIGH_X: ct.Constant[bool],
    PACKED_WEIGHTS: ct.Constant[bool],
    PREFIX: ct.Constant[bool],
    RAW_DT: ct.Constant[bool],
    G_LAST: ct.Constant[bool],
    WIDE_LOADS: ct.Constant[bool],
    STACKED: ct.Constant[bool],
):
    """Grid (nseg * nheads * headdim/BLOCK_P * dstate/BLOCK_N, batch): one (BLOCK_P, BLOCK_N) tile of one
    head's state, carried in fp32 registers through the chunks of one segment, from the segment's entry
    state (FROM_ENTRY) or from zero. Segments are slowest, so the heads sharing a group's B run together.
    The flags are compile-time: a walk stores only what its pass needs. SWAP_AB carries the state
    transposed, hᵀ = (w B)ᵀ X, so that the operand computed in registers takes the matmul's first slot (the
    post's swap). STATES_T: ``states`` holds each chunk state transposed, (dstate, headdim), the layout the
    swapped walk carries, so that its per-chunk store is a plain tile store (chunk_out reads either layout).
    UNROLL (1, 2 or 4, dividing SEG_CHUNKS): chunks whose tiles are loaded together, ahead of their steps.
    PRE_WEIGHTS: ``dtT`` holds chunk_cumsum's per-token weights exp2(g_last - g) * dt instead of dt. WEIGH_X: the
    weight goes on x's rows instead of B's. PACKED_WEIGHTS: for bf16 inputs the weighted operand is multiplied in bf16,
    the weight rounded to it. PREFIX: the serial walk in segments (the variant two-segment-walk): each segment starts
    from ``seg_entry``'s one entry state summed through the chunks before it (``_prefix_state``), and only the last
    segment stores the end state. RAW_DT: no cumsum launch before the walk; each chunk's cumsum is
    taken here from the caller's dt and A (``chunk_scalars``), the weights computed here (not PRE_WEIGHTS), and the
    cumsum's buffers for chunk_out written here (``g_out``, ``dt_out``), each chunk once. WIDE_LOADS (UNROLL > 1,
    neither RAW_DT nor G_LAST): the UNROLL chunks of a step read by one load per array (``_unrolled_tiles``)."""
    # bf16/fp16 operands run on the tensor cores as they are (HGMMA on sm_90); fp32 operands are cast
    # to tf32 on purpose: an fp32 ct.mma takes no tensor core path and spills.
    MMA_DTYPE = ct.static_eval(ct.tfloat32 if x.dtype == ct.float32 else x.dtype)
    # Sizes fit int32 even when offsets need int64; int32 keeps loop bounds and bids of one type.
    nheads, ngroups = ct.astype(x.shape[2], ct.int32), ct.astype(B.shape[2], ct.int32)
    ptiles = ct.astype(x.shape[3], ct.int32) // BLOCK_P
    ntiles = ct.astype(B.shape[3], ct.int32) // BLOCK_N
    nchunks = chunk_count(x, g, CHUNK, RAW_DT, STACKED)
    b = ct.bid(1)
    n_tile, p_tile, head, seg = state_tile(ct.bid(0), ntiles, ptiles, nheads)
    group = head // (nheads // ngroups)
    first = seg * SEG_CHUNKS

    # The carried tile: (BLOCK_P, BLOCK_N), or its transpose with SWAP_AB. The fp32 segment states (and the
    # user's initial and final states) are (headdim, dstate): read and written through the permuted axis order
    # when the tile is swapped. The chunk states are too unless STATES_T.
    SHAPE = ct.static_eval((BLOCK_N, BLOCK_P) if SWAP_AB else (BLOCK_P, BLOCK_N))
    SHAPE5 = ct.static_eval((1, 1, 1, BLOCK_N, BLOCK_P) if SWAP_AB else (1, 1, 1, BLOCK_P, BLOCK_N))
    ORDER = ct.static_eval((0, 1, 2, 4, 3) if SWAP_AB else (0, 1, 2, 3, 4))
    STATES_ORDER = ct.static_eval((0, 1, 2, 4, 3) if SWAP_AB != STATES_T else (0, 1, 2, 3, 4))
    if SWAP_AB:
        t0, t1 = n_tile, p_tile
    else:
        t0, t1 = p_tile, n_tile
    if PREFIX:
        # Every segment starts where the sequence (or part) does: from ``seg_entry``'s one entry state, brought
        # through the chunks before the segment by ``_prefix_state``.
        h = _prefix_state(x, B, g, dtT, seg_entry, b, head, group, p_tile, n_tile, t0, t1, first, SHAPE, SHAPE5, ORDER,
                          CHUNK, BLOCK_P, BLOCK_N, LATENCY, MMA_DTYPE, SCALAR_LATENCY, PRE_WEIGHTS, WEIGH_X,
                          PACKED_WEIGHTS, SWAP_AB, FROM_ENTRY, RAW_DT)
    elif FROM_ENTRY:
        h = ct.load(seg_entry, (b, head, seg, t0, t1), shape=SHAPE5, order=ORDER).reshape(SHAPE)
    else:
        h = ct.zeros(SHAPE, dtype=ct.float32)
    decay = ct.zeros((1,), dtype=ct.float32)
    # UNROLL chunks per iteration: their tiles are all loaded before the first of their steps, so that the chain
    # of dependent steps waits on memory once per UNROLL chunks. UNROLL divides SEG_CHUNKS, so the chunks an
    # iteration reads past its segment's end lie past the sequence's end: they load as zeros (dt = 0 and g = 0,
    # which leave h and the decay as they are) and are not stored.
    for step in range((min(SEG_CHUNKS, nchunks - first) + UNROLL - 1) // UNROLL):
        chunk = first + step * UNROLL
        if UNROLL == 1:
            X, Bw, g_last = _chunk_tiles(x, B, g, dtT, g_out, dt_out, b, chunk, nchunks, head, group, p_tile, n_tile,
                                         CHUNK, BLOCK_P, BLOCK_N, LATENCY, MMA_DTYPE, SCALAR_LATENCY, PRE_WEIGHTS,
                                         WEIGH_X, PACKED_WEIGHTS, RAW_DT, G_LAST, STACKED)
            h, decay = _step(states, chunk_decay, h, decay, X, Bw, g_last, b, head, chunk, t0, t1,
                             SHAPE5, STATES_ORDER, STORE_STATES, STORE_DECAY, SWAP_AB, MMA_DTYPE)
        else:
            if WIDE_LOADS:
                tiles = _unrolled_tiles(x, B, g, dtT, b, chunk, head, group, p_tile, n_tile, CHUNK, UNROLL, BLOCK_P,
                                        BLOCK_N, LATENCY, MMA_DTYPE, SCALAR_LATENCY, PRE_WEIGHTS, WEIGH_X,
                                        PACKED_WEIGHTS, STACKED)
            else:
                tiles = ()
                for u in ct.static_iter(range(UNROLL)):
                    tiles += (_chunk_tiles(x, B, g, dtT, g_out, dt_out, b, chunk + u, nchunks, head, group, p_tile,
                                           n_tile, CHUNK, BLOCK_P, BLOCK_N, LATENCY, MMA_DTYPE, SCALAR_LATENCY,
                                           PRE_WEIGHTS, WEIGH_X, PACKED_WEIGHTS, RAW_DT, G_LAST, STACKED),)
            X0, Bw0, g_last0 = tiles[0]
            h, decay = _step(states, chunk_decay, h, decay, X0, Bw0, g_last0, b, head, chunk, t0, t1,
                             SHAPE5, STATES_ORDER, STORE_STATES, STORE_DECAY, SWAP_AB, MMA_DTYPE)
            for u in ct.static_iter(range(1, UNROLL)):
                Xu, Bwu, g_lastu = tiles[u]
                if chunk + u < nchunks:
                    _store_entry(states, chunk_decay, h, decay, b, head, chunk + u, t0, t1, SHAPE5, STATES_ORDER,
                                 STORE_STATES, STORE_DECAY)
                h, decay = _step(states, chunk_decay, h, decay, Xu, Bwu, g_lastu, b, head, chunk + u, t0, t1,
                                 SHAPE5, STATES_ORDER, False, False, SWAP_AB, MMA_DTYPE)
    if PREFIX:
        # One end state: the last segment's.
        if STORE_END:
            if seg == (nchunks + SEG_CHUNKS - 1) // SEG_CHUNKS - 1:
                ct.store(seg_end, (b, head, 0, t0, t1), h.reshape(SHAPE5), order=ORDER)
    elif STORE_END:
        ct.store(seg_end, (b, head, seg, t0, t1), h.reshape(SHAPE5), order=ORDER)
        ct.store(seg_decay, (b, head, seg), decay.reshape((1, 1, 1)))


def walk_args(x, B, g, dtT, *, seg_entry, states, chunk_decay, seg_end, seg_decay, chunk_size: int, block_p: int,
              block_n: int, seg_chunks: int, from_entry: bool, store_states: bool, store_decay: bool,
              store_end: bool, latency: int, swap_ab: bool = False, states_t: bool = False, unroll: int = 1,
              scalar_latency: int | None = None, pre_weights: bool = False, weigh_x: bool = False,
              packed_weights: bool = False, prefix: bool = False,
              cumsum_out: tuple[torch.Tensor, torch.Tensor] | None = None, g_last: bool = False,
              wide_loads: bool = False) -> tuple:
    """``_state_pass_kernel``'s arguments, by name; a buffer a walk does not touch may be any array of its rank.
    ``cumsum_out``: ``g`` and ``dtT`` are the caller's A and dt, each chunk's cumsum taken in the walk and written to
    these two buffers (chunk_cumsum's g and dtT, for chunk_out): the kernel's RAW_DT."""
    raw_dt = cumsum_out is not None
    if unroll not in (1, 2, 4) or seg_chunks % unroll:
        raise ValueError(f"_state_pass_kernel: unroll={unroll}; expected 1, 2 or 4, dividing seg_chunks={seg_chunks}")
    if raw_dt and pre_weights:
        raise ValueError("_state_pass_kernel: raw_dt=True with pre_weights=True; the weights come from the cumsum "
                         "launch, which raw_dt leaves out")
    if g_last and not pre_weights:
        raise ValueError("_state_pass_kernel: g_last=True with pre_weights=False; a walk that weighs its chunks itself "
                         "needs each chunk's whole row of g")
    if wide_loads and (unroll == 1 or raw_dt or g_last):
        raise ValueError(f"_state_pass_kernel: wide_loads=True with unroll={unroll}, raw_dt={raw_dt}, g_last={g_last}; "
                         "one load for a step's chunks needs unroll 2 or 4, the cumsum's buffers and their whole rows")
    stacked = g.dim() == 4  # chunk_cumsum's stacked buffer (its ``stacked``): g and the weights or dt in one load
    if stacked and (raw_dt or g_last or prefix):
        raise ValueError(f"_state_pass_kernel: the stacked cumsum buffer with raw_dt={raw_dt}, g_last={g_last}, "
                         f"prefix={prefix}; it serves the walks that read the cumsum's rows")
    g_out, dt_out = cumsum_out if raw_dt else (dtT, dtT)  # never written without RAW_DT: any 3-d array stands in
    return (x, B, g, dtT, seg_entry, states, chunk_decay, seg_end, seg_decay, g_out, dt_out, chunk_size, block_p,
            block_n, seg_chunks, from_entry, store_states, store_decay, store_end, swap_ab, states_t, latency, unroll,
            scalar_latency or 0, pre_weights, weigh_x, packed_weights, prefix, raw_dt, g_last, wide_loads, stacked)


def walk_grid(x: torch.Tensor, B: torch.Tensor, nseg: int, block_p: int, block_n: int) -> tuple[int, int]:
    batch, _, nheads, headdim = x.shape
    return nseg * nheads * (headdim // block_p) * (B.shape[3] // block_n), batch


def prefix_segments(nchunks: int, segments: int, unroll: int) -> tuple[int, int]:
    """(chunks a segment, segments) of a serial walk over ``nchunks`` split into about ``segments`` segments whose
    programs each sum the chunks before their segment (``_prefix_state``) and then walk their own: segments of a power
    of two of chunks (a handful of compiled kernels for every length), at least ``unroll``. One segment, the whole
    sequence, when ``segments`` is 1 or the sequence too short to split."""
    if segments <= 1 or nchunks < 2 * unroll:
        return WHOLE_SEQUENCE, 1
    seg_chunks = max(unroll, 1 << (-(-nchunks // segments) - 1).bit_length())
    return seg_chunks, -(-nchunks // seg_chunks)


def _token_views(g: torch.Tensor, dt: torch.Tensor, tokens: slice,
                 raw_dt: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The per-token scalars of the tokens ``tokens`` (a part of the sequence): views of the cumsum's head-major g and
    dt, or with ``raw_dt`` A as it is and a view of the caller's dt (batch, seqlen, nheads)."""
    return (g, dt[:, tokens]) if raw_dt else (g[..., tokens], dt[:, :, tokens])


def state_dtype(x_dtype: torch.dtype) -> torch.dtype:
    """Storage dtype of the chunk entry states that stage 3 reads.

    bf16 for bf16 inputs: stage 3 feeds them to a bf16 C·hᵀ mma anyway, so storing bf16 rounds
    exactly once, as loading fp32 and casting would, at half the traffic (the states are the largest
    intermediate). fp16 would overflow on large states, so fp16 and fp32 inputs keep fp32 (tf32 mma).
    """
    return torch.bfloat16 if x_dtype == torch.bfloat16 else torch.float32


def state_pass(x: torch.Tensor, B: torch.Tensor, g: torch.Tensor, dtT: torch.Tensor,
               initial_state: torch.Tensor | None, *, chunk_size: int, cfg: StatePassConfig,
               int64_everywhere: bool = False, split: bool = True,
               cumsum_out: tuple[torch.Tensor, torch.Tensor] | None = None
               ) -> tuple[list[Launch], list[tuple[int, torch.Tensor]], torch.Tensor]:
    """Plan stage 2 as a walk over the whole sequence; returns its launches, the chunk entry states as parts
    ``(first chunk, buffer)`` and the final state they fill. With ``cfg.states_t`` the chunk states are laid out
    (batch, nheads, chunks, dstate, headdim), each state transposed.

    Chunk states past 2**31 elements are split (``split``) into parts of consecutive chunks that each fit int32
    indexing (``int32_parts``): one walk per part, on views of x, B, g and dt, each starting from where the one
    before ended (an fp32 state handed on in memory), so the walk stays one chain through the sequence. Otherwise,
    and without ``split``, one walk and one buffer (int64-indexed past 2**31). ``cumsum_out``: no cumsum launch; ``g``
    and ``dtT`` are the caller's A and dt, and the walk fills these cumsum buffers (``walk_args``)."""
    raw_dt = cumsum_out is not None
    batch, seqlen, nheads, headdim = x.shape
    dstate = B.shape[3]
    nchunks = -(-seqlen // chunk_size)
    state_dims = (dstate, headdim) if cfg.states_t else (headdim, dstate)
    ranges = int32_parts(nchunks, batch * nheads * headdim * dstate) if split else [(0, nchunks)]
    final_state = empty((batch, nheads, headdim, dstate), dtype=torch.float32, device=x.device)
    total_decay = empty((batch, nheads, 1), dtype=torch.float32, device=x.device)  # stored, never read
    launches, parts, entry = [], [], initial_state
    for i, (first, stop) in enumerate(ranges):
        states = empty((batch, nheads, stop - first, *state_dims), dtype=state_dtype(x.dtype), device=x.device)
        end = final_state if i == len(ranges) - 1 else empty(final_state.shape, dtype=torch.float32, device=x.device)
        outs = cumsum_out
        if len(ranges) == 1:
            xs, Bs, gs, dts = x, B, g, dtT
        else:
            tokens = slice(first * chunk_size, stop * chunk_size)
            xs, Bs, gs, dts = x[:, tokens], B[:, tokens], *_token_views(g, dtT, tokens, raw_dt)
            outs = tuple(t[:, :, tokens] for t in cumsum_out) if raw_dt else None
        # One end state, the part's; one entry state, the part's start (read only if there is one).
        seg_end = end.unsqueeze(2)
        seg_entry = entry.unsqueeze(2) if entry is not None else seg_end
        seg_chunks, nseg = prefix_segments(stop - first, cfg.segments, cfg.unroll)
        args = walk_args(xs, Bs, gs, dts, seg_entry=seg_entry, states=states, chunk_decay=total_decay,
                         seg_end=seg_end, seg_decay=total_decay, chunk_size=chunk_size, block_p=cfg.block_p,
                         block_n=cfg.block_n, seg_chunks=seg_chunks, from_entry=entry is not None,
                         store_states=True, store_decay=False, store_end=True, latency=cfg.latency,
                         swap_ab=cfg.swap_ab, states_t=cfg.states_t, unroll=cfg.unroll,
                         scalar_latency=cfg.scalar_latency, pre_weights=cfg.pre_weights, weigh_x=cfg.weigh_x,
                         packed_weights=cfg.packed_weights, prefix=nseg > 1, cumsum_out=outs, g_last=cfg.g_last,
                         wide_loads=cfg.wide_loads)
        launches.append(plan_launch(_state_pass_kernel, walk_grid(xs, Bs, nseg, cfg.block_p, cfg.block_n), args,
                                    occupancy=cfg.occupancy, int64_everywhere=int64_everywhere,
                                    worker_warps=cfg.worker_warps))
        parts.append((first, states))
        entry = end
    return launches, parts, final_state
