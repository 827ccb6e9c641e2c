"""Stage 2, segment-parallel: every chunk's entry state as a local state plus a decayed segment entry.

Each sequence is split into segments of SEG_CHUNKS chunks. For one head, with h_c the true state at
the entry of chunk c of segment s (chunks s*K .. s*K + K - 1) and E_s the true state at the segment's
entry:

    h_c = L_c + exp2(d_c) * E_s

where L_c is the state the chunk jump formula reaches from zero at the segment's start, and d_c the
summed log2 decay of the segment's chunks before c (<= 0). Three kernels:

- ``_segment_state_kernel``: one program per (segment, head, state tile) walks only its segment's
  chunks, from zero, writing every L_c, every d_c, the segment's end state and its total decay. The
  chains are K chunks long instead of the whole sequence, and there are nseg times more of them.
- ``_segment_scan_kernel``: one program per (head, state tile) walks the segments:
  E_0 = initial state (or 0), E_{s+1} = exp2(D_s) E_s + L_end(s); the last value is the final state.
- ``_segment_apply_kernel``: one program per (chunk, head, state tile) rewrites L_c in place as
  h_c = L_c + exp2(d_c) E_s, in fp32, rounded once to the states' dtype.

The states buffer then holds every chunk's true entry state, as the serial pass leaves it, so
chunk_out is the same for both. (Rebuilding h_c inside chunk_out instead, as it loads the states,
measured 80-300 us slower per call there than this pass costs, on the H200.)
"""

import cuda.tile as ct
import torch

from kernels.alloc import empty
from kernels.cutile._launch import Launch, plan_launch
from kernels.cutile.state_pass import state_dtype
from kernels.cutile.tuning import SegmentApplyConfig, SegmentScanConfig, SegmentStateConfig


def _segment_state_kernel(
    x: ct.Array,                 # (batch, seqlen, nheads, headdim)
    B: ct.Array,                 # (batch, seqlen, ngroups, dstate)
    g: ct.Array,                 # (batch, nheads, nchunks * CHUNK) fp32, from chunk_cumsum
    dtT: ct.Array,               # (batch, nheads, nchunks * CHUNK) fp32, from chunk_cumsum
    states: ct.Array,            # out (batch, nheads, nchunks, headdim, dstate): L_c, from zero at the segment start
    chunk_decay: ct.Array,       # out (batch, nheads, nchunks) fp32: d_c, log2 decay from the segment start
    seg_state: ct.Array,         # out (batch, nheads, nseg, headdim, dstate) fp32: the segment's end state from zero
    seg_decay: ct.Array,         # out (batch, nheads, nseg) fp32: the segment's total log2 decay
    CHUNK: ct.Constant[int],
    BLOCK_P: ct.Constant[int],
    BLOCK_N: ct.Constant[int],
    SEG_CHUNKS: ct.Constant[int],
    LATENCY: ct.Constant[int],
):
    """Grid (nseg * nheads * headdim/BLOCK_P * dstate/BLOCK_N, batch): one (BLOCK_P, BLOCK_N) tile of
    one head's state through the chunks of one segment. Segments are slowest, so the heads sharing a
    group's B run together."""
    MMA_DTYPE = ct.static_eval(ct.tfloat32 if x.dtype == ct.float32 else x.dtype)
    nheads, ngroups = ct.astype(x.shape[2], ct.int32), ct.astype(B.shape[2], ct.int32)
    ptiles = ct.astype(x.shape[3], ct.int32) // BLOCK_P
    ntiles = ct.astype(B.shape[3], ct.int32) // BLOCK_N
    nchunks = ct.astype(g.shape[2], ct.int32) // CHUNK
    pid, b = ct.bid(0), ct.bid(1)
    n_tile = pid % ntiles
    p_tile = (pid // ntiles) % ptiles
    head = (pid // (ntiles * ptiles)) % nheads
    seg = pid // (ntiles * ptiles * nheads)
    group = head // (nheads // ngroups)
    first = seg * SEG_CHUNKS

    h = ct.zeros((BLOCK_P, BLOCK_N), dtype=ct.float32)
    decay = ct.zeros((1,), dtype=ct.float32)
    for k in range(min(SEG_CHUNKS, nchunks - first)):
        chunk = first + k
        ct.store(states, (b, head, chunk, p_tile, n_tile),
                 h.reshape((1, 1, 1, BLOCK_P, BLOCK_N)).astype(states.dtype))
        # Every state tile of the head stores the same d_c: identical values, so the duplicates are benign.
        ct.store(chunk_decay, (b, head, chunk), decay.reshape((1, 1, 1)))
        # Rows past seqlen load as zeros: with dt = 0 there too, the ragged tail adds nothing.
        X = ct.load(x, (b, chunk, head, p_tile), shape=(1, CHUNK, 1, BLOCK_P),
                    padding_mode=ct.PaddingMode.ZERO, latency=LATENCY).reshape((CHUNK, BLOCK_P))
        Bc = ct.load(B, (b, chunk, group, n_tile), shape=(1, CHUNK, 1, BLOCK_N),
                     padding_mode=ct.PaddingMode.ZERO, latency=LATENCY).reshape((CHUNK, BLOCK_N))
        gc = ct.load(g, (b, head, chunk), shape=(1, 1, CHUNK)).reshape((CHUNK,))
        dtc = ct.load(dtT, (b, head, chunk), shape=(1, 1, CHUNK)).reshape((CHUNK,))
        # g is padded with the last real token's value, so index CHUNK - 1 holds the chunk's total.
        g_last = ct.extract(gc, (CHUNK - 1,), shape=(1,))
        # In exact arithmetic g_last <= g; the clamp absorbs the cumsum's rounding (an ulp of a huge |g|).
        weight = ct.exp2(ct.minimum(g_last - gc, 0.0)) * dtc
        Bw = (Bc * weight.reshape((CHUNK, 1))).astype(MMA_DTYPE)
        h = ct.mma(X.transpose().astype(MMA_DTYPE), Bw, h * ct.exp2(g_last).reshape((1, 1)))
        # A sum of non-positive numbers: stays <= 0 under rounding.
        decay = decay + g_last

    ct.store(seg_state, (b, head, seg, p_tile, n_tile), h.reshape((1, 1, 1, BLOCK_P, BLOCK_N)))
    ct.store(seg_decay, (b, head, seg), decay.reshape((1, 1, 1)))


def _segment_scan_kernel(
    seg_state: ct.Array,         # (batch, nheads, nseg, headdim, dstate) fp32, from _segment_state_kernel
    seg_decay: ct.Array,         # (batch, nheads, nseg) fp32, from _segment_state_kernel
    initial_state: ct.Array,     # (batch, nheads, headdim, dstate) fp32; unread unless HAS_INITIAL_STATE
    seg_entry: ct.Array,         # out (batch, nheads, nseg, headdim, dstate) fp32: E_s, the true segment entry
    final_state: ct.Array,       # out (batch, nheads, headdim, dstate) fp32
    BLOCK_P: ct.Constant[int],
    BLOCK_N: ct.Constant[int],
    HAS_INITIAL_STATE: ct.Constant[bool],
    LATENCY: ct.Constant[int],
):
    """Grid (nheads * headdim/BLOCK_P * dstate/BLOCK_N, batch): one (BLOCK_P, BLOCK_N) tile of one
    head's state carried in fp32 through every segment of one sequence."""
    ptiles = ct.astype(seg_state.shape[3], ct.int32) // BLOCK_P
    ntiles = ct.astype(seg_state.shape[4], ct.int32) // BLOCK_N
    nseg = ct.astype(seg_state.shape[2], ct.int32)
    pid, b = ct.bid(0), ct.bid(1)
    n_tile = pid % ntiles
    p_tile = (pid // ntiles) % ptiles
    head = pid // (ntiles * ptiles)

    if HAS_INITIAL_STATE:
        h = ct.load(initial_state, (b, head, p_tile, n_tile), shape=(1, 1, BLOCK_P, BLOCK_N))
        h = h.reshape((BLOCK_P, BLOCK_N))
    else:
        h = ct.zeros((BLOCK_P, BLOCK_N), dtype=ct.float32)
    for s in range(nseg):
        local = ct.load(seg_state, (b, head, s, p_tile, n_tile), shape=(1, 1, 1, BLOCK_P, BLOCK_N),
                        latency=LATENCY).reshape((BLOCK_P, BLOCK_N))
        d = ct.load(seg_decay, (b, head, s), shape=(1, 1, 1)).reshape((1, 1))
        ct.store(seg_entry, (b, head, s, p_tile, n_tile), h.reshape((1, 1, 1, BLOCK_P, BLOCK_N)))
        h = h * ct.exp2(d) + local
    ct.store(final_state, (b, head, p_tile, n_tile), h.reshape((1, 1, BLOCK_P, BLOCK_N)))


def _segment_apply_kernel(
    states: ct.Array,            # in/out (batch, nheads, nchunks, headdim, dstate): L_c in, h_c out
    chunk_decay: ct.Array,       # (batch, nheads, nchunks) fp32: d_c
    seg_entry: ct.Array,         # (batch, nheads, nseg, headdim, dstate) fp32: E_s
    BLOCK_P: ct.Constant[int],
    BLOCK_N: ct.Constant[int],
    SEG_CHUNKS: ct.Constant[int],
):
    """Grid (nchunks * nheads * headdim/BLOCK_P * dstate/BLOCK_N, batch): one (BLOCK_P, BLOCK_N) tile
    of one chunk's state. Chunks are slowest, so the chunks of one segment share E_s in L2."""
    nheads = ct.astype(states.shape[1], ct.int32)
    ptiles = ct.astype(states.shape[3], ct.int32) // BLOCK_P
    ntiles = ct.astype(states.shape[4], ct.int32) // BLOCK_N
    pid, b = ct.bid(0), ct.bid(1)
    n_tile = pid % ntiles
    p_tile = (pid // ntiles) % ptiles
    head = (pid // (ntiles * ptiles)) % nheads
    chunk = pid // (ntiles * ptiles * nheads)
    local = ct.load(states, (b, head, chunk, p_tile, n_tile), shape=(1, 1, 1, BLOCK_P, BLOCK_N))
    entry = ct.load(seg_entry, (b, head, chunk // SEG_CHUNKS, p_tile, n_tile), shape=(1, 1, 1, BLOCK_P, BLOCK_N))
    # exp2(d_c) <= 1: d_c is a sum of chunk totals, each <= 0.
    scale = ct.exp2(ct.load(chunk_decay, (b, head, chunk), shape=(1, 1, 1)).reshape((1, 1, 1, 1, 1)))
    ct.store(states, (b, head, chunk, p_tile, n_tile), (local.astype(ct.float32) + entry * scale).astype(states.dtype))


def segment_state(x: torch.Tensor, B: torch.Tensor, g: torch.Tensor, dtT: torch.Tensor,
                  initial_state: torch.Tensor | None, *, chunk_size: int, cfg: SegmentStateConfig,
                  scan_cfg: SegmentScanConfig, apply_cfg: SegmentApplyConfig, int64_everywhere: bool = False
                  ) -> tuple[list[Launch], torch.Tensor, torch.Tensor]:
    """Plan stage 2 as three launches; returns them, the chunk entry states and the final state."""
    batch, seqlen, nheads, headdim = x.shape
    dstate = B.shape[3]
    nchunks = g.shape[2] // chunk_size
    K = cfg.seg_chunks
    nseg = -(-nchunks // K)
    dev = x.device
    states = empty((batch, nheads, nchunks, headdim, dstate), dtype=state_dtype(x.dtype), device=dev)
    chunk_decay = empty((batch, nheads, nchunks), dtype=torch.float32, device=dev)
    seg_state = empty((batch, nheads, nseg, headdim, dstate), dtype=torch.float32, device=dev)
    seg_decay = empty((batch, nheads, nseg), dtype=torch.float32, device=dev)
    seg_entry = empty(seg_state.shape, dtype=torch.float32, device=dev)
    final_state = empty((batch, nheads, headdim, dstate), dtype=torch.float32, device=dev)

    local_args = (x, B, g, dtT, states, chunk_decay, seg_state, seg_decay,
                  chunk_size, cfg.block_p, cfg.block_n, K, cfg.latency)
    local_grid = (nseg * nheads * (headdim // cfg.block_p) * (dstate // cfg.block_n), batch)
    local = plan_launch(_segment_state_kernel, local_grid, local_args, occupancy=cfg.occupancy,
                        int64_everywhere=int64_everywhere)

    has_initial_state = initial_state is not None
    # Without an initial state the kernel never reads that parameter; final_state stands in for it.
    h0 = initial_state if has_initial_state else final_state
    scan_args = (seg_state, seg_decay, h0, seg_entry, final_state,
                 scan_cfg.block_p, scan_cfg.block_n, has_initial_state, scan_cfg.latency)
    scan_grid = (nheads * (headdim // scan_cfg.block_p) * (dstate // scan_cfg.block_n), batch)
    scan = plan_launch(_segment_scan_kernel, scan_grid, scan_args, occupancy=scan_cfg.occupancy,
                       int64_everywhere=int64_everywhere)

    apply_args = (states, chunk_decay, seg_entry, apply_cfg.block_p, apply_cfg.block_n, K)
    apply_grid = (nchunks * nheads * (headdim // apply_cfg.block_p) * (dstate // apply_cfg.block_n), batch)
    apply = plan_launch(_segment_apply_kernel, apply_grid, apply_args, occupancy=apply_cfg.occupancy,
                        int64_everywhere=int64_everywhere)
    return [local, scan, apply], states, final_state
