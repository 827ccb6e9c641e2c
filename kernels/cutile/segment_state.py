"""Stage 2, segment-parallel: every chunk's entry state from its segment's true entry state.

Each sequence is split into segments of SEG_CHUNKS chunks. For one head, with h_c the true state at
the entry of chunk c of segment s (chunks s*K .. s*K + K - 1) and E_s the true state at the segment's
entry:

    h_c = L_c + exp2(d_c) * E_s

where L_c is the state the chunk jump formula reaches from zero at the segment's start, and d_c the
summed log2 decay of the segment's chunks before c (<= 0). Three launches:

- The local walk, ``_state_pass_kernel`` over one segment per program (chains of K chunks instead of the
  whole sequence, nseg times more of them), from zero: every L_c and d_c, each segment's end state and
  its total decay.
- ``_segment_scan_kernel``: one program per (head, state tile) walks the segments:
  E_0 = initial state (or 0), E_{s+1} = exp2(D_s) E_s + L_end(s); the last value is the final state.
- ``_segment_apply_kernel``: the local walk also wrote every L_c and d_c; one program per (chunk, head,
  state tile) rewrites them in place as h_c = L_c + exp2(d_c) E_s, in fp32, rounded once to the states'
  dtype.

With segments of one chunk (K = 1, the "chunked" pass) L_c = 0 and d_c = 0: the local walk is one
independent matmul per chunk (no chain at all), the scan's E_s are the chunk states themselves, which it
writes in the states' dtype, and there is nothing to complete: two launches, the only chain left is the
scan's elementwise one, STEP chunks per load.

The states buffer then holds every chunk's true entry state, as the serial pass leaves it, so
chunk_out is the same for all. ``segment_state_local`` stops after the scan: chunk_out then completes each
L_c as it reads it, by one more product C·E_sᵀ (E_s stored in the chunk states' dtype): the variant
segmented-out (kernels.cutile.tuning._segmented_out says where it measured faster). In exactly two segments without
an initial state it stops after the local walk: E_0 = 0 and E_1 = L_end(0), which chunk_out reads from the walk's fp32
end states, and chunk_out writes the final state (``SegmentCompletion``, ``scan_needed``). (An earlier rebuild inside
chunk_out, forming h_c as it loaded the states, measured 80-300 us slower per call there than this pass costs, on
the H200. So did a second walk from each segment's entry that writes h_c directly, the chunk states then crossing
memory once instead of three times: at 16384 tokens 270 vs 264 us for the whole forward at dstate 128 and 733 vs
722 us at dstate 512, the walks being latency-bound, not memory-bound;
reports/published/0.1.0+20261201T035700Z-01b48e7-dirty.)
"""

from dataclasses import dataclass

import cuda.tile as ct
import torch

from kernels.alloc import empty
from kernels.cutile._launch import Launch, exp2, plan_launch
from kernels.cutile.state_pass import _state_pass_kernel, state_dtype, state_tile, walk_args, walk_grid
from kernels.cutile.tuning import SegmentApplyConfig, SegmentScanConfig, SegmentStateConfig


@dataclass(frozen=True)
class SegmentCompletion:
    """What completes the segmented pass's local chunk states L_c into the entry states h_c = L_c + exp2(d_c) E_s, for
    a consumer that does so as it reads them (chunk_out).

    ``entry``: E_s in the chunk states' dtype, (batch, nheads, nseg, headdim, dstate), from the scan; or, for a
    sequence in exactly two segments without an initial state (``final_state`` set), the local walk's fp32 segment end
    states L_end(s) themselves: then E_0 = 0, E_1 = L_end(0), and the consumer writes ``final_state`` as
    exp2(D_1) L_end(0) + L_end(1) from ``seg_decay`` (D_s, fp32 (batch, nheads, 2)): no scan launch.
    ``chunk_decay``: d_c, fp32 (batch, nheads, nchunks). ``seg_chunks``: the chunks of a segment.
    """

    entry: torch.Tensor
    chunk_decay: torch.Tensor
    seg_chunks: int
    seg_decay: torch.Tensor | None = None
    final_state: torch.Tensor | None = None


def _segment_scan_kernel(
    seg_state: ct.Array,         # (batch, nheads, nseg, headdim, dstate) fp32: each segment's end state from zero
    seg_decay: ct.Array,         # (batch, nheads, nseg) fp32: each segment's total log2 decay
    initial_state: ct.Array,     # (batch, nheads, headdim, dstate) fp32; unread unless HAS_INITIAL_STATE
    seg_entry: ct.Array,         # out (batch, nheads, nseg, headdim, dstate): E_s, the true segment entry
    final_state: ct.Array,       # out (batch, nheads, headdim, dstate) fp32
    BLOCK_P: ct.Constant[int],
    BLOCK_N: ct.Constant[int],
    STEP: ct.Constant[int],
    HAS_INITIAL_STATE: ct.Constant[bool],
    LATENCY: ct.Constant[int],
):
    """Grid (nheads * headdim/BLOCK_P * dstate/BLOCK_N, batch): one (BLOCK_P, BLOCK_N) tile of one
    head's state carried in fp32 through every segment of one sequence, STEP segments per load (one
    memory latency per STEP links of the chain). E_s is rounded once, to seg_entry's dtype."""
    ptiles = ct.astype(seg_state.shape[3], ct.int32) // BLOCK_P
    ntiles = ct.astype(seg_state.shape[4], ct.int32) // BLOCK_N
    nseg = ct.astype(seg_state.shape[2], ct.int32)
    b = ct.bid(1)
    n_tile, p_tile, head, _ = state_tile(ct.bid(0), ntiles, ptiles, ct.astype(seg_state.shape[1], ct.int32))

    if HAS_INITIAL_STATE:
        h = ct.load(initial_state, (b, head, p_tile, n_tile), shape=(1, 1, BLOCK_P, BLOCK_N))
        h = h.reshape((BLOCK_P, BLOCK_N))
    else:
        h = ct.zeros((BLOCK_P, BLOCK_N), dtype=ct.float32)
    for step in range((nseg + STEP - 1) // STEP):
        # Past the last segment: zero states and zero decays, which leave h as it is.
        local = ct.load(seg_state, (b, head, step, p_tile, n_tile), shape=(1, 1, STEP, BLOCK_P, BLOCK_N),
                        padding_mode=ct.PaddingMode.ZERO, latency=LATENCY).reshape((STEP, BLOCK_P, BLOCK_N))
        d = ct.load(seg_decay, (b, head, step), shape=(1, 1, STEP), padding_mode=ct.PaddingMode.ZERO)
        for u in ct.static_iter(range(STEP)):
            s = step * STEP + u
            if s < nseg:
                ct.store(seg_entry, (b, head, s, p_tile, n_tile),
                         h.reshape((1, 1, 1, BLOCK_P, BLOCK_N)).astype(seg_entry.dtype))
            h = (h * exp2(ct.extract(d, (0, 0, u), shape=(1, 1, 1)).reshape((1, 1)))
                 + ct.extract(local, (u, 0, 0), shape=(1, BLOCK_P, BLOCK_N)).reshape((BLOCK_P, BLOCK_N)))
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
    b = ct.bid(1)
    n_tile, p_tile, head, chunk = state_tile(ct.bid(0), ntiles, ptiles, nheads)
    local = ct.load(states, (b, head, chunk, p_tile, n_tile), shape=(1, 1, 1, BLOCK_P, BLOCK_N))
    entry = ct.load(seg_entry, (b, head, chunk // SEG_CHUNKS, p_tile, n_tile), shape=(1, 1, 1, BLOCK_P, BLOCK_N))
    # exp2(d_c) <= 1: d_c is a sum of chunk totals, each <= 0.
    scale = exp2(ct.load(chunk_decay, (b, head, chunk), shape=(1, 1, 1)).reshape((1, 1, 1, 1, 1)))
    ct.store(states, (b, head, chunk, p_tile, n_tile), (local.astype(ct.float32) + entry * scale).astype(states.dtype))


def _plan_scan(seg_state: torch.Tensor, seg_decay: torch.Tensor, initial_state: torch.Tensor | None,
               seg_entry: torch.Tensor, final_state: torch.Tensor, cfg: SegmentScanConfig,
               int64_everywhere: bool) -> Launch:
    batch, nheads, _, headdim, dstate = seg_state.shape
    has_initial_state = initial_state is not None
    # Without an initial state the kernel never reads that parameter; final_state stands in for it.
    h0 = initial_state if has_initial_state else final_state
    args = (seg_state, seg_decay, h0, seg_entry, final_state, cfg.block_p, cfg.block_n, cfg.step, has_initial_state,
            cfg.latency)
    grid = (nheads * (headdim // cfg.block_p) * (dstate // cfg.block_n), batch)
    return plan_launch(_segment_scan_kernel, grid, args, occupancy=cfg.occupancy, int64_everywhere=int64_everywhere)


def segment_entries(x: torch.Tensor, B: torch.Tensor, g: torch.Tensor, dtT: torch.Tensor,
                    initial_state: torch.Tensor | None, *, chunk_size: int, cfg: SegmentStateConfig, seg_chunks: int,
                    scan_cfg: SegmentScanConfig, int64_everywhere: bool = False
                    ) -> tuple[list[Launch], torch.Tensor, torch.Tensor]:
    """Plan the local walk (segment end states only) and the scan over segments of ``seg_chunks`` chunks; returns
    the two launches, every segment's true entry state E_s, fp32 (batch, nheads, nseg, headdim, dstate), and the
    final state. What a consumer that rebuilds the chunk states itself needs (kernels.cutile.segment_out)."""
    batch, seqlen, nheads, headdim = x.shape
    dstate = B.shape[3]
    nseg = -(-(g.shape[2] // chunk_size) // seg_chunks)
    dev = x.device
    seg_state = empty((batch, nheads, nseg, headdim, dstate), dtype=torch.float32, device=dev)
    seg_decay = empty((batch, nheads, nseg), dtype=torch.float32, device=dev)
    seg_entry = empty(seg_state.shape, dtype=torch.float32, device=dev)
    final_state = empty((batch, nheads, headdim, dstate), dtype=torch.float32, device=dev)
    # Neither chunk states nor chunk decays are stored: seg_entry and seg_decay stand in for those buffers.
    unroll = cfg.unroll if seg_chunks % cfg.unroll == 0 else 1
    local_args = walk_args(x, B, g, dtT, seg_entry=seg_entry, states=seg_entry, chunk_decay=seg_decay,
                           seg_end=seg_state, seg_decay=seg_decay, chunk_size=chunk_size, block_p=cfg.block_p,
                           block_n=cfg.block_n, seg_chunks=seg_chunks, from_entry=False, store_states=False,
                           store_decay=False, store_end=True, latency=cfg.latency, swap_ab=cfg.swap_ab,
                           unroll=unroll, scalar_latency=cfg.scalar_latency, packed_weights=cfg.packed_weights,
                           wide_loads=cfg.wide_loads and unroll > 1)
    local = plan_launch(_state_pass_kernel, walk_grid(x, B, nseg, cfg.block_p, cfg.block_n), local_args,
                        occupancy=cfg.occupancy, int64_everywhere=int64_everywhere, worker_warps=cfg.worker_warps)
    scan = _plan_scan(seg_state, seg_decay, initial_state, seg_entry, final_state, scan_cfg, int64_everywhere)
    return [local, scan], seg_entry, final_state


def segment_state(x: torch.Tensor, B: torch.Tensor, g: torch.Tensor, dtT: torch.Tensor,
                  initial_state: torch.Tensor | None, *, chunk_size: int, cfg: SegmentStateConfig,
                  scan_cfg: SegmentScanConfig, apply_cfg: SegmentApplyConfig, int64_everywhere: bool = False,
                  cumsum_out: tuple[torch.Tensor, torch.Tensor] | None = None
                  ) -> tuple[list[Launch], torch.Tensor, torch.Tensor]:
    """Plan stage 2 as three launches (two for segments of one chunk); returns them, the chunk entry states and
    the final state. ``dtT``: dt, or with ``cfg.pre_weights`` the cumsum's chunk-state weights; with ``cumsum_out``,
    no cumsum launch: ``g`` and ``dtT`` are the caller's A and dt, and the local walk fills these cumsum buffers
    (``walk_args``)."""
    launches, states, final_state, _ = _segment_pass(x, B, g, dtT, initial_state, chunk_size=chunk_size, cfg=cfg,
                                                     scan_cfg=scan_cfg, apply_cfg=apply_cfg, complete=True,
                                                     int64_everywhere=int64_everywhere, cumsum_out=cumsum_out)
    return launches, states, final_state


def scan_needed(nchunks: int, seg_chunks: int, has_initial_state: bool) -> bool:
    """Whether the segmented pass needs its scan before a consumer completes the local states: not for a sequence in
    exactly two segments without an initial state (E_1 is segment 0's end state; ``SegmentCompletion``)."""
    return has_initial_state or -(-nchunks // seg_chunks) != 2


def segment_state_local(x: torch.Tensor, B: torch.Tensor, g: torch.Tensor, dtT: torch.Tensor,
                        initial_state: torch.Tensor | None, *, chunk_size: int, cfg: SegmentStateConfig,
                        scan_cfg: SegmentScanConfig, scan: bool = True, int64_everywhere: bool = False,
                        cumsum_out: tuple[torch.Tensor, torch.Tensor] | None = None
                        ) -> tuple[list[Launch], torch.Tensor, torch.Tensor, SegmentCompletion]:
    """Plan the local walk and the scan only (segments of at least two chunks); returns the launches, every chunk's
    local state L_c, the final state and what completes L_c into the entry state h_c (``SegmentCompletion``). For a
    consumer that completes the states as it reads them (chunk_out's ``seg``). ``scan=False``: the local walk alone,
    for a sequence in two segments without an initial state (``scan_needed``); the consumer then writes the final
    state. ``cumsum_out``: as ``segment_state``'s."""
    nchunks = -(-x.shape[1] // chunk_size)
    if cfg.seg_chunks < 2:
        raise ValueError(f"segment_state_local: seg_chunks={cfg.seg_chunks}; expected at least 2 (segments of one "
                         "chunk leave nothing to complete)")
    if not scan and scan_needed(nchunks, cfg.seg_chunks, initial_state is not None):
        raise ValueError(f"segment_state_local: scan=False needs exactly two segments and no initial state; got "
                         f"{nchunks} chunks in segments of {cfg.seg_chunks}, initial_state "
                         f"{'given' if initial_state is not None else 'None'}")
    launches, states, final_state, seg = _segment_pass(x, B, g, dtT, initial_state, chunk_size=chunk_size, cfg=cfg,
                                                       scan_cfg=scan_cfg, apply_cfg=None, complete=False, scan=scan,
                                                       int64_everywhere=int64_everywhere, cumsum_out=cumsum_out)
    return launches, states, final_state, seg


def _segment_pass(x, B, g, dtT, initial_state, *, chunk_size: int, cfg: SegmentStateConfig,
                  scan_cfg: SegmentScanConfig, apply_cfg: SegmentApplyConfig | None, complete: bool,
                  int64_everywhere: bool, scan: bool = True,
                  cumsum_out: tuple[torch.Tensor, torch.Tensor] | None = None):
    batch, seqlen, nheads, headdim = x.shape
    dstate = B.shape[3]
    nchunks = -(-seqlen // chunk_size)
    K = cfg.seg_chunks
    nseg = -(-nchunks // K)
    dev = x.device
    states = empty((batch, nheads, nchunks, headdim, dstate), dtype=state_dtype(x.dtype), device=dev)
    seg_state = empty((batch, nheads, nseg, headdim, dstate), dtype=torch.float32, device=dev)
    seg_decay = empty((batch, nheads, nseg), dtype=torch.float32, device=dev)
    final_state = empty((batch, nheads, headdim, dstate), dtype=torch.float32, device=dev)
    # Segments of one chunk: each chunk's own contribution is its segment's end state, its entry state is E_s,
    # so the scan writes the chunk states themselves and nothing is completed afterwards.
    chunked = K == 1
    chunk_decay = seg_decay if chunked else empty((batch, nheads, nchunks), dtype=torch.float32, device=dev)
    # Completed later by its consumer, E_s is rounded once to the chunk states' dtype, as h_c would be.
    entry_dtype = torch.float32 if complete else states.dtype
    # Without the scan there is no E_s: the end states stand in for the entry the local walk never reads.
    seg_entry = states if chunked else empty(seg_state.shape, dtype=entry_dtype, device=dev) if scan else seg_state

    # The local walk starts from zero: seg_entry stands in for the entry it never reads (and, for segments of
    # one chunk, states and chunk_decay for the L_c = 0 and d_c = 0 it does not store).
    local_args = walk_args(x, B, g, dtT, seg_entry=seg_entry, states=states, chunk_decay=chunk_decay,
                           seg_end=seg_state, seg_decay=seg_decay, chunk_size=chunk_size, block_p=cfg.block_p,
                           block_n=cfg.block_n, seg_chunks=K, from_entry=False, store_states=not chunked,
                           store_decay=not chunked, store_end=True, latency=cfg.latency, swap_ab=cfg.swap_ab,
                           unroll=cfg.unroll, scalar_latency=cfg.scalar_latency,
                           pre_weights=cfg.pre_weights, weigh_x=cfg.weigh_x, packed_weights=cfg.packed_weights,
                           cumsum_out=cumsum_out, g_last=cfg.g_last, wide_loads=cfg.wide_loads)
    local = plan_launch(_state_pass_kernel, walk_grid(x, B, nseg, cfg.block_p, cfg.block_n), local_args,
                        occupancy=cfg.occupancy, int64_everywhere=int64_everywhere, worker_warps=cfg.worker_warps)

    if not scan:  # two segments, no initial state: the consumer reads the end states and writes the final state
        return [local], states, final_state, SegmentCompletion(seg_state, chunk_decay, K, seg_decay, final_state)
    scan_launch = _plan_scan(seg_state, seg_decay, initial_state, seg_entry, final_state, scan_cfg, int64_everywhere)
    if chunked:
        return [local, scan_launch], states, final_state, None
    if not complete:
        return [local, scan_launch], states, final_state, SegmentCompletion(seg_entry, chunk_decay, K)

    apply_args = (states, chunk_decay, seg_entry, apply_cfg.block_p, apply_cfg.block_n, K)
    apply_grid = (nchunks * nheads * (headdim // apply_cfg.block_p) * (dstate // apply_cfg.block_n), batch)
    apply = plan_launch(_segment_apply_kernel, apply_grid, apply_args, occupancy=apply_cfg.occupancy,
                        int64_everywhere=int64_everywhere)
    return [local, scan_launch, apply], states, final_state, None
