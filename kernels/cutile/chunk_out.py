"""Stage 3, compute_out: every output row from its chunk's entry state and the chunk's own tokens.

For one head and one chunk (X, B, C, dt its rows; g its cumsum in log2 units; h its entry state):

    Y = exp2(g) * (C hᵀ) + ((C Bᵀ) ∘ exp2(g_i - g_j) ∘ [i >= j]) (dt * X) + D * X

A program owns BLOCK_M rows of one chunk and walks the C·Bᵀ column blocks up to its diagonal,
flash-attention style, so a 256-token chunk never holds 256 x 256 fp32. C·Bᵀ is the same for every
head of a group: with ``cb_buffer`` (chunks of one row block), ``_chunk_cb_kernel`` builds it once per
chunk and group into an fp32 buffer that the heads read, instead of each head building its own on chip.
"""

import cuda.tile as ct
import torch

from kernels.alloc import empty
from kernels.cutile._launch import Launch, exp2, exp2_decay, latency_hint, plan_launch, stacked_pair
from kernels.cutile.segment_state import SegmentCompletion
from kernels.cutile.tuning import ChunkOutConfig


def _g_row(g, b, head, index, SIZE, STACKED):
    """One head's cumsum g over tile ``index`` of SIZE tokens, (1, SIZE); from the stacked buffer's third row with
    STACKED (chunk_cumsum's ``stacked``)."""
    if STACKED:
        return ct.load(g, (b, head, 2, index), shape=(1, 1, 1, SIZE)).reshape((1, SIZE))
    return ct.load(g, (b, head, index), shape=(1, 1, SIZE)).reshape((1, SIZE))


def _g_dt(g, dtT, b, head, index, SIZE, STACKED):
    """(g, dt) of one head over tile ``index`` of SIZE tokens, (1, SIZE) each: one load with STACKED."""
    if STACKED:
        return stacked_pair(g, b, head, index, SIZE, True)
    return (ct.load(g, (b, head, index), shape=(1, 1, SIZE)).reshape((1, SIZE)),
            ct.load(dtT, (b, head, index), shape=(1, 1, SIZE)).reshape((1, SIZE)))


def _cb_block(B, C, b, block, group, ntiles, BLOCK_M, BLOCK_N, LATENCY, MMA_DTYPE):
    """C·Bᵀ of one diagonal (BLOCK_M x BLOCK_M) block, row block ``block`` of the sequence, in fp32; rows past
    seqlen load as zeros."""
    cb = ct.zeros((BLOCK_M, BLOCK_M), dtype=ct.float32)
    for n in range(ntiles):
        Cm = ct.load(C, (b, block, group, n), shape=(1, BLOCK_M, 1, BLOCK_N),
                     padding_mode=ct.PaddingMode.ZERO, latency=LATENCY).reshape((BLOCK_M, BLOCK_N))
        Bm = ct.load(B, (b, block, group, n), shape=(1, BLOCK_M, 1, BLOCK_N),
                     padding_mode=ct.PaddingMode.ZERO, latency=LATENCY).reshape((BLOCK_M, BLOCK_N))
        cb = ct.mma(Cm.astype(MMA_DTYPE), Bm.transpose().astype(MMA_DTYPE), cb)
    return cb


def _state_t(states, b, head, chunk, p_tile, n, BLOCK_P, BLOCK_N, STATES_T, latency=None):
    """hᵀ's (BLOCK_N, BLOCK_P) tile of one head's chunk entry state, from either layout of the states."""
    if STATES_T:
        return ct.load(states, (b, head, chunk, n, p_tile), shape=(1, 1, 1, BLOCK_N, BLOCK_P),
                       latency=latency).reshape((BLOCK_N, BLOCK_P))
    h = ct.load(states, (b, head, chunk, p_tile, n), shape=(1, 1, 1, BLOCK_P, BLOCK_N),
                latency=latency).reshape((BLOCK_P, BLOCK_N))
    return h.transpose()


def _causal_decay(g_col, BLOCK):
    """exp2(g_i - g_j) for i >= j, 0 above the diagonal, of one diagonal (BLOCK x BLOCK) block from its cumsum g_col
    (BLOCK, 1). The causal mask is on the decay itself: the future entries (i < j) have positive exponents, clamped
    to 0 before exp2 and replaced by 0 after, so no Inf is ever formed, let alone multiplied by 0."""
    rows = ct.arange(BLOCK, dtype=ct.int32)
    causal = rows.reshape((BLOCK, 1)) >= rows.reshape((1, BLOCK))
    return ct.where(causal, exp2_decay(g_col - g_col.reshape((1, BLOCK))), 0.0)


def _diagonal_in_halves(x, dtT, g, D, y, acc0, acc1, cb00, cb10, cb11, b, head, row_block, p_tile, BLOCK_M, BLOCK_P,
                        HAS_D, LATENCY, MMA_DTYPE, STACKED):
    """The diagonal block's rows as two halves of H = BLOCK_M/2 rows: ``acc0`` and ``acc1`` (their C·hᵀ, already
    decayed) plus the causal part, from the three quarters of the diagonal C·Bᵀ block that are not all future (upper
    left, lower left, lower right). The upper half sees only its own H x H triangle; the lower half sees the upper
    half's columns, all in its past, with the decay factorized through the upper half's last cumsum g_e
    (exp2(g_i - g_e) * exp2(g_e - g_j), both exponents <= 0), and its own triangle. 2 H**2 + 2 H exp2 instead of
    BLOCK_M**2, and the all-future upper-right quarter is never weighted."""
    H = BLOCK_M // 2
    halves = (2 * row_block, 2 * row_block + 1)  # in H rows of the sequence
    d = ct.load(D, (head,), shape=(1,)).reshape((1, 1)) if HAS_D else None
    # The upper half first, stored before the lower half's weights are formed, so that fewer tiles are live at once.
    g0, dt0 = _g_dt(g, dtT, b, head, halves[0], H, STACKED)
    # Rows past seqlen load as zeros (dt is zero there too) and are clipped on store.
    X0 = ct.load(x, (b, halves[0], head, p_tile), shape=(1, H, 1, BLOCK_P), padding_mode=ct.PaddingMode.ZERO,
                 latency=LATENCY).reshape((H, BLOCK_P))
    w00 = cb00.astype(ct.float32) * _causal_decay(g0.reshape((H, 1)), H) * dt0
    top = ct.mma(w00.astype(MMA_DTYPE), X0.astype(MMA_DTYPE), acc0)
    if HAS_D:
        top = top + d * X0.astype(ct.float32)
    ct.store(y, (b, halves[0], head, p_tile), top.reshape((1, H, 1, BLOCK_P)).astype(y.dtype))
    g1, dt1 = _g_dt(g, dtT, b, head, halves[1], H, STACKED)
    X1 = ct.load(x, (b, halves[1], head, p_tile), shape=(1, H, 1, BLOCK_P), padding_mode=ct.PaddingMode.ZERO,
                 latency=LATENCY).reshape((H, BLOCK_P))
    g1_col = g1.reshape((H, 1))
    g_e = ct.extract(g0, (0, H - 1), shape=(1, 1))
    w10 = cb10.astype(ct.float32) * (exp2_decay(g1_col - g_e) * (exp2_decay(g_e - g0) * dt0))
    bottom = ct.mma(w10.astype(MMA_DTYPE), X0.astype(MMA_DTYPE), acc1)
    w11 = cb11.astype(ct.float32) * _causal_decay(g1_col, H) * dt1
    bottom = ct.mma(w11.astype(MMA_DTYPE), X1.astype(MMA_DTYPE), bottom)
    if HAS_D:
        bottom = bottom + d * X1.astype(ct.float32)
    ct.store(y, (b, halves[1], head, p_tile), bottom.reshape((1, H, 1, BLOCK_P)).astype(y.dtype))


def _rows_out(x, B, C, g, dtT, D, y, acc, cb, b, head, group, row_block, chunk, m, p_tile, ntiles,
              CHUNK, BLOCK_M, BLOCK_P, BLOCK_N, HAS_D, C_ONCE, SPLIT_DIAG, LATENCY, MMA_DTYPE, STACKED):
    """One head's BLOCK_M x BLOCK_P block of y, from ``acc`` = C·hᵀ of its entry state (not yet decayed)
    and, with C_ONCE, ``cb`` = the diagonal C·Bᵀ block (else built here)."""
    M_PER_CHUNK = CHUNK // BLOCK_M
    # g alone: with dt in the same load, the (2, BLOCK_M) tile's rows turned into g's column spill (121 local-memory
    # stores a program in the sm_90 export at dstate 128).
    g_m = _g_row(g, b, head, row_block, BLOCK_M, STACKED).reshape((BLOCK_M, 1))
    # g_m <= 0, so exp2(g_m) <= 1.
    acc = acc * exp2(g_m)

    # Column blocks before the diagonal block: every pair is causal (i > j), so no mask. Their decay
    # exp2(g_i - g_j) factorizes through the column block's last cumsum g_e (j <= e < i):
    # exp2(g_i - g_e) * exp2(g_e - g_j), both exponents <= 0 in exact arithmetic (the clamps absorb the
    # cumsum's rounding), so neither factor overflows: 2 * BLOCK_M exp2 instead of BLOCK_M**2.
    if M_PER_CHUNK > 1:  # resolved at compile time: chunks of one row block skip this loop
        for k in range(m):
            col_block = chunk * M_PER_CHUNK + k
            cbk = ct.zeros((BLOCK_M, BLOCK_M), dtype=ct.float32)
            for n in range(ntiles):
                Cm = ct.load(C, (b, row_block, group, n), shape=(1, BLOCK_M, 1, BLOCK_N),
                             padding_mode=ct.PaddingMode.ZERO, latency=LATENCY).reshape((BLOCK_M, BLOCK_N))
                Bk = ct.load(B, (b, col_block, group, n), shape=(1, BLOCK_M, 1, BLOCK_N),
                             latency=LATENCY).reshape((BLOCK_M, BLOCK_N))
                cbk = ct.mma(Cm.astype(MMA_DTYPE), Bk.transpose().astype(MMA_DTYPE), cbk)
            g_k, dt_k = _g_dt(g, dtT, b, head, col_block, BLOCK_M, STACKED)
            g_e = ct.extract(g_k, (0, BLOCK_M - 1), shape=(1, 1))
            weight = cbk * (exp2_decay(g_m - g_e) * (exp2_decay(g_e - g_k) * dt_k))
            Xk = ct.load(x, (b, col_block, head, p_tile), shape=(1, BLOCK_M, 1, BLOCK_P),
                         latency=LATENCY).reshape((BLOCK_M, BLOCK_P))
            acc = ct.mma(weight.astype(MMA_DTYPE), Xk.astype(MMA_DTYPE), acc)

    # The diagonal block.
    if not C_ONCE:
        cb = _cb_block(B, C, b, row_block, group, ntiles, BLOCK_M, BLOCK_N, LATENCY, MMA_DTYPE)
    if SPLIT_DIAG:
        H = BLOCK_M // 2
        _diagonal_in_halves(x, dtT, g, D, y, ct.extract(acc, (0, 0), shape=(H, BLOCK_P)),
                            ct.extract(acc, (1, 0), shape=(H, BLOCK_P)), ct.extract(cb, (0, 0), shape=(H, H)),
                            ct.extract(cb, (1, 0), shape=(H, H)), ct.extract(cb, (1, 1), shape=(H, H)), b, head,
                            row_block, p_tile, BLOCK_M, BLOCK_P, HAS_D, LATENCY, MMA_DTYPE, STACKED)
    else:
        decay = _causal_decay(g_m, BLOCK_M)
        dt_m = ct.load(dtT, (b, head, row_block), shape=(1, 1, BLOCK_M)).reshape((1, BLOCK_M))
        # Rows past seqlen (ragged tail) load as zeros and are clipped on store; with dt = 0 and B = 0
        # there, they contribute nothing to the real rows.
        Xm = ct.load(x, (b, row_block, head, p_tile), shape=(1, BLOCK_M, 1, BLOCK_P),
                     padding_mode=ct.PaddingMode.ZERO, latency=LATENCY).reshape((BLOCK_M, BLOCK_P))
        acc = ct.mma((cb.astype(ct.float32) * decay * dt_m).astype(MMA_DTYPE), Xm.astype(MMA_DTYPE), acc)
        if HAS_D:
            acc = acc + ct.load(D, (head,), shape=(1,)).reshape((1, 1)) * Xm.astype(ct.float32)
        ct.store(y, (b, row_block, head, p_tile), acc.reshape((1, BLOCK_M, 1, BLOCK_P)).astype(y.dtype))


def _entry_share(C, seg_entry, chunk_decay, acc, b, head, group, row_block, chunk, entry, p_tile, ntiles, BLOCK_M,
                 BLOCK_P, BLOCK_N, LATENCY, STATE_MMA_DTYPE):
    """``acc`` plus the segment entry state's share of the chunk state h_c, exp2(d_c) C·E_sᵀ (d_c <= 0), E_s at index
    ``entry`` of ``seg_entry``; before the C·L_cᵀ loop adds to it, so one accumulator is live at a time, as without
    it."""
    for n in range(ntiles):
        Cm = ct.load(C, (b, row_block, group, n), shape=(1, BLOCK_M, 1, BLOCK_N),
                     padding_mode=ct.PaddingMode.ZERO, latency=LATENCY).reshape((BLOCK_M, BLOCK_N))
        eT = _state_t(seg_entry, b, head, entry, p_tile, n, BLOCK_P, BLOCK_N, False)
        acc = ct.mma(Cm.astype(STATE_MMA_DTYPE), eT.astype(STATE_MMA_DTYPE), acc)
    return acc * exp2(ct.load(chunk_decay, (b, head, chunk), shape=(1, 1, 1)).reshape((1, 1)))


def _two_segments_final(seg_end, seg_decay, final_state, b, head, p_tile, row_block, row_blocks, ntiles, BLOCK_P,
                        BLOCK_N):
    """The final state of a sequence in two segments without an initial state, exp2(D_1) L_end(0) + L_end(1) in fp32:
    the program of row block r writes the (BLOCK_P, BLOCK_N) tiles r, r + row_blocks, ... of its head's rows."""
    d1 = exp2(ct.load(seg_decay, (b, head, 1), shape=(1, 1, 1)).reshape((1, 1)))
    for n in range(row_block, ntiles, row_blocks):
        end0 = ct.load(seg_end, (b, head, 0, p_tile, n), shape=(1, 1, 1, BLOCK_P, BLOCK_N)).reshape((BLOCK_P, BLOCK_N))
        end1 = ct.load(seg_end, (b, head, 1, p_tile, n), shape=(1, 1, 1, BLOCK_P, BLOCK_N)).reshape((BLOCK_P, BLOCK_N))
        h = end0.astype(ct.float32) * d1 + end1.astype(ct.float32)
        ct.store(final_state, (b, head, p_tile, n), h.reshape((1, 1, BLOCK_P, BLOCK_N)))


def _entry_acc(C, seg_entry, chunk_decay, b, head, group, row_block, chunk, p_tile, ntiles, BLOCK_M, BLOCK_P, BLOCK_N,
               SEG_CHUNKS, SEG_FROM_END, LATENCY, STATE_MMA_DTYPE):
    """y's fp32 accumulator before the C·hᵀ loop: zero, plus the segment entry state's share (``_entry_share``) where
    chunk_out completes the segmented pass's states (SEG_CHUNKS > 0)."""
    acc = ct.zeros((BLOCK_M, BLOCK_P), dtype=ct.float32)
    if SEG_FROM_END:
        if chunk >= SEG_CHUNKS:  # segment 1, entered at E_1 = L_end(0); segment 0 enters at zero
            acc = _entry_share(C, seg_entry, chunk_decay, acc, b, head, group, row_block, chunk, 0, p_tile, ntiles,
                               BLOCK_M, BLOCK_P, BLOCK_N, LATENCY, STATE_MMA_DTYPE)
    elif SEG_CHUNKS > 0:
        acc = _entry_share(C, seg_entry, chunk_decay, acc, b, head, group, row_block, chunk, chunk // SEG_CHUNKS,
                           p_tile, ntiles, BLOCK_M, BLOCK_P, BLOCK_N, LATENCY, STATE_MMA_DTYPE)
    return acc


def _state_product(C, states, acc, b, head, group, row_block, chunk, p_tile, ntiles, BLOCK_M, BLOCK_P, BLOCK_N,
                   STATES_T, LATENCY, state_latency, STATE_MMA_DTYPE):
    """``acc`` + C·hᵀ of one head's chunk entry state, over dstate in BLOCK_N steps."""
    for n in range(ntiles):
        Cm = ct.load(C, (b, row_block, group, n), shape=(1, BLOCK_M, 1, BLOCK_N),
                     padding_mode=ct.PaddingMode.ZERO, latency=LATENCY).reshape((BLOCK_M, BLOCK_N))
        hT = _state_t(states, b, head, chunk, p_tile, n, BLOCK_P, BLOCK_N, STATES_T, state_latency)
        acc = ct.mma(Cm.astype(STATE_MMA_DTYPE), hT.astype(STATE_MMA_DTYPE), acc)
    return acc


def _rows_out_causal_cb(x, B, C, g, dtT, D, y, states, acc, b, head, group, row_block, chunk, p_tile, ntiles,
                        BLOCK_M, BLOCK_P, BLOCK_N, HAS_D, STATES_T, LATENCY, state_latency, MMA_DTYPE,
                        STATE_MMA_DTYPE, STACKED):
    """One head's BLOCK_M x BLOCK_P block of y (whole chunks) in two halves of H = BLOCK_M/2 rows, ``acc`` holding
    what precedes the C·hᵀ loop (``_entry_acc``): the loop takes C, B and the state by H-row tiles and builds only
    the three quarters of the diagonal C·Bᵀ block that hold a past column (C_0 B_0ᵀ, C_1 B_0ᵀ, C_1 B_1ᵀ), skipping
    the all-future one, a quarter of the block's matmul work; ``_diagonal_in_halves`` weighs them."""
    H = BLOCK_M // 2
    top, bottom = 2 * row_block, 2 * row_block + 1  # in H rows of the sequence
    acc0 = ct.extract(acc, (0, 0), shape=(H, BLOCK_P))
    acc1 = ct.extract(acc, (1, 0), shape=(H, BLOCK_P))
    cb00 = ct.zeros((H, H), dtype=ct.float32)
    cb10 = ct.zeros((H, H), dtype=ct.float32)
    cb11 = ct.zeros((H, H), dtype=ct.float32)
    for n in range(ntiles):
        # Rows past seqlen load as zeros.
        C0 = ct.load(C, (b, top, group, n), shape=(1, H, 1, BLOCK_N), padding_mode=ct.PaddingMode.ZERO,
                     latency=LATENCY).reshape((H, BLOCK_N))
        C1 = ct.load(C, (b, bottom, group, n), shape=(1, H, 1, BLOCK_N), padding_mode=ct.PaddingMode.ZERO,
                     latency=LATENCY).reshape((H, BLOCK_N))
        hT = _state_t(states, b, head, chunk, p_tile, n, BLOCK_P, BLOCK_N, STATES_T, state_latency).astype(
            STATE_MMA_DTYPE)
        acc0 = ct.mma(C0.astype(STATE_MMA_DTYPE), hT, acc0)
        acc1 = ct.mma(C1.astype(STATE_MMA_DTYPE), hT, acc1)
        B0 = ct.load(B, (b, top, group, n), shape=(1, H, 1, BLOCK_N), padding_mode=ct.PaddingMode.ZERO,
                     latency=LATENCY).reshape((H, BLOCK_N))
        B1 = ct.load(B, (b, bottom, group, n), shape=(1, H, 1, BLOCK_N), padding_mode=ct.PaddingMode.ZERO,
                     latency=LATENCY).reshape((H, BLOCK_N))
        B0t = B0.transpose().astype(MMA_DTYPE)
        cb00 = ct.mma(C0.astype(MMA_DTYPE), B0t, cb00)
        cb10 = ct.mma(C1.astype(MMA_DTYPE), B0t, cb10)
        cb11 = ct.mma(C1.astype(MMA_DTYPE), B1.transpose().astype(MMA_DTYPE), cb11)
    g_m = _g_row(g, b, head, row_block, BLOCK_M, STACKED).reshape((BLOCK_M, 1))
    # g_m <= 0, so exp2(g_m) <= 1.
    acc0 = acc0 * exp2(ct.extract(g_m, (0, 0), shape=(H, 1)))
    acc1 = acc1 * exp2(ct.extract(g_m, (1, 0), shape=(H, 1)))
    _diagonal_in_halves(x, dtT, g, D, y, acc0, acc1, cb00, cb10, cb11, b, head, row_block, p_tile, BLOCK_M, BLOCK_P,
                        HAS_D, LATENCY, MMA_DTYPE, STACKED)


def _rows_out_cb_first(x, B, C, g, dtT, D, y, states, seg_entry, chunk_decay, b, head, group, row_block, chunk,
                       p_tile, ntiles, BLOCK_M, BLOCK_P, BLOCK_N, HAS_D, STATES_T, SEG_CHUNKS, SEG_FROM_END, LATENCY,
                       STATE_LATENCY, MMA_DTYPE, STATE_MMA_DTYPE, STACKED):
    """One head's BLOCK_M x BLOCK_P block of y (whole chunks) with the diagonal C·Bᵀ block built and weighted first,
    while it is the only accumulator live, and the C·hᵀ product after it, C loaded again: the 128 x 128 decay is then
    computed beside one fp32 block instead of two accumulators, and only its 16-bit weights stay live across the
    C·hᵀ loop."""
    cb = _cb_block(B, C, b, row_block, group, ntiles, BLOCK_M, BLOCK_N, LATENCY, MMA_DTYPE)
    g_row, dt_m = _g_dt(g, dtT, b, head, row_block, BLOCK_M, STACKED)
    g_m = g_row.reshape((BLOCK_M, 1))
    weight = (cb * _causal_decay(g_m, BLOCK_M) * dt_m).astype(MMA_DTYPE)
    acc = _entry_acc(C, seg_entry, chunk_decay, b, head, group, row_block, chunk, p_tile, ntiles, BLOCK_M, BLOCK_P,
                     BLOCK_N, SEG_CHUNKS, SEG_FROM_END, LATENCY, STATE_MMA_DTYPE)
    acc = _state_product(C, states, acc, b, head, group, row_block, chunk, p_tile, ntiles, BLOCK_M, BLOCK_P, BLOCK_N,
                         STATES_T, LATENCY, latency_hint(STATE_LATENCY), STATE_MMA_DTYPE)
    acc = acc * exp2(g_m)
    Xm = ct.load(x, (b, row_block, head, p_tile), shape=(1, BLOCK_M, 1, BLOCK_P),
                 padding_mode=ct.PaddingMode.ZERO, latency=LATENCY).reshape((BLOCK_M, BLOCK_P))
    acc = ct.mma(weight, Xm.astype(MMA_DTYPE), acc)
    if HAS_D:
        acc = acc + ct.load(D, (head,), shape=(1,)).reshape((1, 1)) * Xm.astype(ct.float32)
    ct.store(y, (b, row_block, head, p_tile), acc.reshape((1, BLOCK_M, 1, BLOCK_P)).astype(y.dtype))


def _chunk_cb_kernel(
    B: ct.Array,                 # (batch, seqlen, ngroups, dstate)
    C: ct.Array,                 # (batch, seqlen, ngroups, dstate)
    cbuf: ct.Array,              # out (batch, nchunks, ngroups, CHUNK, CHUNK) fp32
    CHUNK: ct.Constant[int],
    BLOCK_N: ct.Constant[int],
    LATENCY: ct.Constant[int],
):
    """Grid (nchunks * ngroups, batch): C·Bᵀ of one chunk of one group, built once for all the group's heads
    (which then differ only in their decay and dt) and accumulated in fp32 exactly as chunk_out would. Rows
    past seqlen load as zeros."""
    MMA_DTYPE = ct.static_eval(ct.tfloat32 if B.dtype == ct.float32 else B.dtype)
    ngroups = ct.astype(B.shape[2], ct.int32)
    ntiles = ct.astype(B.shape[3], ct.int32) // BLOCK_N
    group, chunk, b = ct.bid(0) % ngroups, ct.bid(0) // ngroups, ct.bid(1)
    cb = _cb_block(B, C, b, chunk, group, ntiles, CHUNK, BLOCK_N, LATENCY, MMA_DTYPE)
    ct.store(cbuf, (b, chunk, group, 0, 0), cb.reshape((1, 1, 1, CHUNK, CHUNK)))


def _chunk_out_kernel(
    x: ct.Array,                 # (batch, seqlen, nheads, headdim)
    B: ct.Array,                 # (batch, seqlen, ngroups, dstate)
    C: ct.Array,                 # (batch, seqlen, ngroups, dstate)
    g: ct.Array,                 # (batch, nheads, nchunks * CHUNK) fp32, from chunk_cumsum
    dtT: ct.Array,               # (batch, nheads, nchunks * CHUNK) fp32, from chunk_cumsum
    states: ct.Array,            # (batch, nheads, nchunks, headdim, dstate), (..., dstate, headdim) if STATES_T
    D: ct.Array,                 # (nheads,) fp32; unread unless HAS_D
    cbuf: ct.Array,              # (batch, nchunks, ngroups, CHUNK, CHUNK) fp32: C·Bᵀ per chunk; unread unless CB_BUFFER
    seg_entry: ct.Array,         # (batch, nheads, nseg, headdim, dstate): E_s, or L_end(s) if SEG_FROM_END; unread
                                 # unless SEG_CHUNKS
    chunk_decay: ct.Array,       # (batch, nheads, nchunks) fp32: d_c; unread unless SEG_CHUNKS
    seg_decay: ct.Array,         # (batch, nheads, 2) fp32: D_s, each segment's total; unread unless SEG_FROM_END
    final_state: ct.Array,       # out (batch, nheads, headdim, dstate) fp32; written only if SEG_FROM_END
    y: ct.Array,                 # out (batch, seqlen, nheads, headdim)
    CHUNK: ct.Constant[int],
    BLOCK_M: ct.Constant[int],
    BLOCK_P: ct.Constant[int],
    BLOCK_N: ct.Constant[int],
    BLOCK_H: ct.Constant[int],
    HAS_D: ct.Constant[bool],
    C_ONCE: ct.Constant[bool],
    CB_BUFFER: ct.Constant[bool],
    STATES_T: ct.Constant[bool],
    SPLIT_DIAG: ct.Constant[bool],
    SEG_CHUNKS: ct.Constant[int],
    SEG_FROM_END: ct.Constant[bool],
    LATENCY: ct.Constant[int],
    HEAVY_FIRST: ct.Constant[bool],
    STATE_LATENCY: ct.Constant[int],
    CB_FIRST: ct.Constant[bool],
    CAUSAL_CB: ct.Constant[bool],
    STACKED: ct.Constant[bool],
):
    """Grid (cdiv(seqlen, BLOCK_M) * nheads/BLOCK_H * headdim/BLOCK_P, batch): BLOCK_M rows x BLOCK_P
    columns of y for BLOCK_H heads of one group of one sequence; row blocks are slowest, so the heads
    sharing a group's B and C run together. The BLOCK_H heads share one C·Bᵀ block (C_ONCE); with
    CB_BUFFER (one row block per chunk) the block comes from ``_chunk_cb_kernel``'s buffer instead. SEG_CHUNKS (> 0,
    one head a program): ``states`` holds the segmented pass's local states L_c, completed here into the entry states
    h_c = L_c + exp2(d_c) E_s (segments of SEG_CHUNKS chunks) by one more product, C·E_sᵀ, before the C·L_cᵀ loop.
    SEG_FROM_END (exactly two segments, no initial state): ``seg_entry`` holds the segments' end states from zero,
    L_end(s), so E_0 = 0 (segment 0's programs skip the product) and E_1 = L_end(0); and the programs of the first row
    blocks write the final state exp2(D_1) L_end(0) + L_end(1), a (BLOCK_P, BLOCK_N) tile each: no scan launch; with
    HEAVY_FIRST the row blocks are taken last to first, so that segment 1's programs start first."""
    # Tensor-core operand dtypes: bf16/fp16 as they come (HGMMA on sm_90); fp32 is cast to tf32 on
    # purpose, since an fp32 ct.mma takes no tensor core path.
    MMA_DTYPE = ct.static_eval(ct.tfloat32 if x.dtype == ct.float32 else x.dtype)
    STATE_MMA_DTYPE = ct.static_eval(ct.tfloat32 if states.dtype == ct.float32 else states.dtype)
    M_PER_CHUNK = CHUNK // BLOCK_M
    # Sizes fit int32 even when offsets need int64; int32 keeps loop bounds and bids of one type.
    nheads, ngroups = ct.astype(x.shape[2], ct.int32), ct.astype(B.shape[2], ct.int32)
    ptiles = ct.astype(x.shape[3], ct.int32) // BLOCK_P
    ntiles = ct.astype(B.shape[3], ct.int32) // BLOCK_N
    hblocks = nheads // BLOCK_H
    pid, b = ct.bid(0), ct.bid(1)
    p_tile = pid % ptiles
    head0 = (pid // ptiles) % hblocks * BLOCK_H
    row_block = pid // (ptiles * hblocks)      # in BLOCK_M rows of the sequence; never past seqlen
    row_blocks = (ct.astype(x.shape[1], ct.int32) + BLOCK_M - 1) // BLOCK_M
    if SEG_FROM_END and HEAVY_FIRST:
        # Last row block first: segment 1's programs, which take the completion product, start before segment 0's
        # lighter ones, which then fill the grid's tail (longest first).
        row_block = row_blocks - 1 - row_block
    chunk, m = row_block // M_PER_CHUNK, row_block % M_PER_CHUNK
    group = head0 // (nheads // ngroups)

    if SEG_FROM_END:
        _two_segments_final(seg_entry, seg_decay, final_state, b, head0, p_tile, row_block, row_blocks, ntiles, BLOCK_P,
                            BLOCK_N)
    if CB_FIRST:
        # Whole chunks, one head a program: the diagonal block and its weights first (``_rows_out_cb_first``).
        _rows_out_cb_first(x, B, C, g, dtT, D, y, states, seg_entry, chunk_decay, b, head0, group, row_block, chunk,
                           p_tile, ntiles, BLOCK_M, BLOCK_P, BLOCK_N, HAS_D, STATES_T, SEG_CHUNKS, SEG_FROM_END,
                           LATENCY, STATE_LATENCY, MMA_DTYPE, STATE_MMA_DTYPE, STACKED)
        return
    if CAUSAL_CB:
        # Whole chunks, one head a program: the diagonal block's three causal quarters (``_rows_out_causal_cb``).
        acc = _entry_acc(C, seg_entry, chunk_decay, b, head0, group, row_block, chunk, p_tile, ntiles, BLOCK_M, BLOCK_P,
                         BLOCK_N, SEG_CHUNKS, SEG_FROM_END, LATENCY, STATE_MMA_DTYPE)
        _rows_out_causal_cb(x, B, C, g, dtT, D, y, states, acc, b, head0, group, row_block, chunk, p_tile, ntiles,
                            BLOCK_M, BLOCK_P, BLOCK_N, HAS_D, STATES_T, LATENCY, latency_hint(STATE_LATENCY),
                            MMA_DTYPE, STATE_MMA_DTYPE, STACKED)
        return
    # The carried state first, so that at most two accumulators (y and a C·Bᵀ block) are ever live.
    # With C_ONCE (one row block per chunk, so no off-diagonal blocks), the diagonal C·Bᵀ block is built
    # in the same loop as the first head's C·hᵀ, from the same C tile, and serves every head of the program.
    acc = _entry_acc(C, seg_entry, chunk_decay, b, head0, group, row_block, chunk, p_tile, ntiles, BLOCK_M, BLOCK_P,
                     BLOCK_N, SEG_CHUNKS, SEG_FROM_END, LATENCY, STATE_MMA_DTYPE)
    cb = ct.zeros((BLOCK_M, BLOCK_M), dtype=ct.float32)
    state_latency = latency_hint(STATE_LATENCY)
    for n in range(ntiles):
        Cm = ct.load(C, (b, row_block, group, n), shape=(1, BLOCK_M, 1, BLOCK_N),
                     padding_mode=ct.PaddingMode.ZERO, latency=LATENCY).reshape((BLOCK_M, BLOCK_N))
        hT = _state_t(states, b, head0, chunk, p_tile, n, BLOCK_P, BLOCK_N, STATES_T, state_latency)
        acc = ct.mma(Cm.astype(STATE_MMA_DTYPE), hT.astype(STATE_MMA_DTYPE), acc)
        if C_ONCE and not CB_BUFFER:
            Bm = ct.load(B, (b, row_block, group, n), shape=(1, BLOCK_M, 1, BLOCK_N),
                         padding_mode=ct.PaddingMode.ZERO, latency=LATENCY).reshape((BLOCK_M, BLOCK_N))
            cb = ct.mma(Cm.astype(MMA_DTYPE), Bm.transpose().astype(MMA_DTYPE), cb)
    if CB_BUFFER:
        # Loaded after the C·hᵀ loop, so that it is not live across it.
        cb = ct.load(cbuf, (b, chunk, group, 0, 0), shape=(1, 1, 1, BLOCK_M, BLOCK_M),
                     latency=LATENCY).reshape((BLOCK_M, BLOCK_M))
    if BLOCK_H == 1:
        _rows_out(x, B, C, g, dtT, D, y, acc, cb, b, head0, group, row_block, chunk, m, p_tile, ntiles,
                  CHUNK, BLOCK_M, BLOCK_P, BLOCK_N, HAS_D, C_ONCE, SPLIT_DIAG, LATENCY, MMA_DTYPE, STACKED)
    else:
        # Held across the heads in the operand dtype it is rounded to at its use anyway: half the registers.
        cb_shared = cb.astype(MMA_DTYPE)
        _rows_out(x, B, C, g, dtT, D, y, acc, cb_shared, b, head0, group, row_block, chunk, m, p_tile, ntiles,
                  CHUNK, BLOCK_M, BLOCK_P, BLOCK_N, HAS_D, C_ONCE, SPLIT_DIAG, LATENCY, MMA_DTYPE, STACKED)
        for hh in range(1, BLOCK_H):
            acc = _state_product(C, states, ct.zeros((BLOCK_M, BLOCK_P), dtype=ct.float32), b, head0 + hh, group,
                                 row_block, chunk, p_tile, ntiles, BLOCK_M, BLOCK_P, BLOCK_N, STATES_T, LATENCY,
                                 state_latency, STATE_MMA_DTYPE)
            _rows_out(x, B, C, g, dtT, D, y, acc, cb_shared, b, head0 + hh, group, row_block, chunk, m, p_tile,
                      ntiles, CHUNK, BLOCK_M, BLOCK_P, BLOCK_N, HAS_D, C_ONCE, SPLIT_DIAG, LATENCY, MMA_DTYPE,
                      STACKED)


def _chunk_out_args(x, B, C, g, dtT, states, D, cbuf, seg_entry, chunk_decay, seg_decay, final_state, y,
                    cfg: ChunkOutConfig, chunk_size: int, has_D: bool, cb_buffer: bool, states_t: bool, seg_chunks: int,
                    seg_from_end: bool, causal_cb: bool) -> tuple:
    return (
        x,
        B,
        C,
        g,
        dtT,
        states,
        D,
        cbuf,
        seg_entry,
        chunk_decay,
        seg_decay,
        final_state,
        y,
        chunk_size,
        cfg.block_m,
        cfg.block_p,
        cfg.block_n,
        cfg.block_h,
        has_D,
        cfg.whole_chunks(chunk_size),
        cb_buffer,
        states_t,
        cfg.split_diag and cfg.whole_chunks(chunk_size),
        seg_chunks,
        seg_from_end,
        cfg.latency,
        cfg.heavy_first,
        cfg.state_latency,
        cfg.cb_first,
        causal_cb,
        g.dim() == 4,
    )


def chunk_out(x: torch.Tensor, B: torch.Tensor, C: torch.Tensor, g: torch.Tensor, dtT: torch.Tensor,
              states: list[tuple[int, torch.Tensor]], D: torch.Tensor | None, A: torch.Tensor, *, chunk_size: int,
              cfg: ChunkOutConfig, states_t: bool = False,
              seg: SegmentCompletion | None = None,
              int64_everywhere: bool = False) -> tuple[list[Launch], torch.Tensor]:
    """Plan stage 3; returns its launches and the output y they fill (x's dtype and shape).

    ``states``: the chunk entry states as parts ``(first chunk, buffer)`` covering the sequence in order (one part
    unless the state pass split them to keep int32 indexing); each part gets its own launch, on views of x, B, C,
    g, dt and y (C·Bᵀ per chunk and group first, if ``cfg.cb_buffer``). ``states_t``: the states are laid out
    (..., dstate, headdim). ``A`` only stands in for a missing ``D`` (same shape and dtype), which the kernel
    then never reads. ``seg``: the states are the segmented pass's local ones, completed here (``segment_state_local``;
    with two segments and no initial state, the final state written here too); one part, one head a program.
    """
    batch, seqlen, nheads, headdim = x.shape
    ngroups = B.shape[2]
    y = empty((batch, seqlen, nheads, headdim), dtype=x.dtype, device=x.device)
    has_D = D is not None
    one_block = cfg.whole_chunks(chunk_size)
    if cfg.block_h > 1 and not (one_block and (nheads // ngroups) % cfg.block_h == 0):
        raise ValueError(f"chunk_out: block_h={cfg.block_h} needs c_once, block_m == chunk_size ({cfg.block_m} vs "
                         f"{chunk_size}) and to divide the {nheads // ngroups} heads of a group")
    if seg is not None and (cfg.block_h != 1 or len(states) != 1 or states_t):
        raise ValueError(f"chunk_out: completing the segmented pass's states takes one head a program, one part and "
                         f"the (headdim, dstate) layout; got block_h={cfg.block_h}, {len(states)} parts, "
                         f"states_t={states_t}")
    # The buffer holds whole chunks: only when a program's rows are its whole chunk.
    cb_buffer = cfg.cb_buffer and one_block
    if cfg.cb_first and not (one_block and cfg.block_h == 1 and not cb_buffer and not cfg.split_diag):
        raise ValueError(f"chunk_out: cb_first needs whole chunks (block_m == chunk_size: {cfg.block_m} vs "
                         f"{chunk_size}, c_once={cfg.c_once}), one head a program (block_h={cfg.block_h}), no C·Bᵀ "
                         f"buffer (cb_buffer={cb_buffer}) and no split diagonal (split_diag={cfg.split_diag})")
    # Like split_diag, causal_cb applies to programs of whole chunks only (block_m == chunk_size) and is ignored else.
    causal_cb = cfg.causal_cb and one_block
    if causal_cb and (cfg.block_h != 1 or cb_buffer or cfg.cb_first or cfg.block_m % 2):
        raise ValueError(f"chunk_out: causal_cb needs one head a program (block_h={cfg.block_h}), no C·Bᵀ buffer "
                         f"(cb_buffer={cb_buffer}), not cb_first (cb_first={cfg.cb_first}) and an even block_m "
                         f"({cfg.block_m})")
    launches = []
    for first, part in states:
        nchunks = part.shape[2]
        if len(states) == 1:
            xs, Bs, Cs, ys, gs, dts = x, B, C, y, g, dtT
        else:
            tokens = slice(first * chunk_size, (first + nchunks) * chunk_size)
            xs, Bs, Cs, ys = x[:, tokens], B[:, tokens], C[:, tokens], y[:, tokens]
            gs, dts = g[..., tokens], dtT[:, :, tokens]
        if cb_buffer:
            cbuf = empty((batch, nchunks, ngroups, chunk_size, chunk_size), dtype=torch.float32, device=x.device)
            launches.append(plan_launch(_chunk_cb_kernel, (nchunks * ngroups, batch),
                                        (Bs, Cs, cbuf, chunk_size, cfg.block_n, cfg.latency), occupancy=None,
                                        int64_everywhere=int64_everywhere))
        else:
            cbuf = part[:1, :1, :1]  # never read: any array of rank 5 (a small one, so it needs no int64 indexing)
        row_blocks = -(-xs.shape[1] // cfg.block_m)
        grid = (row_blocks * (nheads // cfg.block_h) * (headdim // cfg.block_p), batch)
        # Without ``seg`` the kernel never reads E_s, d_c or D_s nor writes the final state: small arrays of their
        # rank stand in for them.
        if seg is None:
            seg_entry, chunk_decay, seg_chunks = part[:1, :1, :1], A[None, None, :], 0
            seg_decay, final_state, from_end = chunk_decay, part[0, :1, :1], False
        else:
            seg_entry, chunk_decay, seg_chunks = seg.entry, seg.chunk_decay, seg.seg_chunks
            from_end = seg.final_state is not None
            seg_decay, final_state = (seg.seg_decay, seg.final_state) if from_end else (chunk_decay, part[0, :1, :1])
        args = _chunk_out_args(xs, Bs, Cs, gs, dts, part, D if has_D else A, cbuf, seg_entry, chunk_decay, seg_decay,
                               final_state, ys, cfg, chunk_size, has_D, cb_buffer, states_t, seg_chunks, from_end,
                               causal_cb)
        launches.append(plan_launch(_chunk_out_kernel, grid, args, occupancy=cfg.occupancy,
                                    int64_everywhere=int64_everywhere))
    return launches, y
