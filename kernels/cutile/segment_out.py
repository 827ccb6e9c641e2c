"""Stages 2 and 3 fused: every output row from a state carried on chip through its segment.

The segment-parallel pass (kernels.cutile.segment_state) gives each segment of SEG_CHUNKS chunks its true entry
state E_s (local walks from zero, then a scan over segments). From there one program per (segment, head, headdim
tile) walks the segment's chunks with the whole state in registers, and for each chunk, with h its entry state:

    Y = exp2(g) * (C hᵀ) + ((C Bᵀ) ∘ exp2(g_i - g_j) ∘ [i >= j]) (dt * X) + D * X      (chunk_out's formula)
    h_next = exp2(g_last) * h + Xᵀ (exp2(g_last - g) * dt * B)                       (the walk's step)

so no chunk state crosses memory: the launches are the cumsum, the local walk (end states only), the scan and
this kernel. The price: x and B are read twice (by the local walk and here), and every program holds the whole
dstate, so the kernel is for dstate <= 128.
"""

import cuda.tile as ct
import torch

from kernels.alloc import empty
from kernels.cutile._launch import Launch, exp2, plan_launch
from kernels.cutile.chunk_out import _causal_decay
from kernels.cutile.segment_state import segment_entries
from kernels.cutile.state_pass import _weigh
from kernels.cutile.tuning import FUSED_MAX_DSTATE, SegmentOutConfig, SegmentScanConfig, SegmentStateConfig


def _segment_out_kernel(
    x: ct.Array,                 # (batch, seqlen, nheads, headdim)
    B: ct.Array,                 # (batch, seqlen, ngroups, dstate)
    C: ct.Array,                 # (batch, seqlen, ngroups, dstate)
    g: ct.Array,                 # (batch, nheads, nchunks * CHUNK) fp32, from chunk_cumsum
    dtT: ct.Array,               # (batch, nheads, nchunks * CHUNK) fp32, from chunk_cumsum
    seg_entry: ct.Array,         # (batch, nheads, nseg, headdim, dstate) fp32: E_s, from the scan
    D: ct.Array,                 # (nheads,) fp32; unread unless HAS_D
    y: ct.Array,                 # out (batch, seqlen, nheads, headdim)
    CHUNK: ct.Constant[int],
    BLOCK_P: ct.Constant[int],
    DSTATE: ct.Constant[int],
    SEG_CHUNKS: ct.Constant[int],
    HAS_D: ct.Constant[bool],
    LATENCY: ct.Constant[int],
):
    """Grid (nseg * nheads * headdim/BLOCK_P, batch): one head's state, transposed (DSTATE, BLOCK_P), carried in
    fp32 through the chunks of one segment, writing each chunk's BLOCK_P columns of y on the way. Segments are
    slowest, so the heads sharing a group's B and C run together."""
    # Tensor-core operands: bf16/fp16 as they come, fp32 cast to tf32 (an fp32 ct.mma takes no tensor core path).
    MMA_DTYPE = ct.static_eval(ct.tfloat32 if x.dtype == ct.float32 else x.dtype)
    # The state enters C·hᵀ as the chunk states would be stored: bf16 for bf16 inputs, else tf32 (fp16 would
    # overflow on large states; kernels.cutile.state_pass.state_dtype).
    STATE_MMA_DTYPE = ct.static_eval(ct.bfloat16 if x.dtype == ct.bfloat16 else ct.tfloat32)
    nheads, ngroups = ct.astype(x.shape[2], ct.int32), ct.astype(B.shape[2], ct.int32)
    ptiles = ct.astype(x.shape[3], ct.int32) // BLOCK_P
    nchunks = ct.astype(g.shape[2], ct.int32) // CHUNK
    pid, b = ct.bid(0), ct.bid(1)
    p_tile = pid % ptiles
    head = (pid // ptiles) % nheads
    seg = pid // (ptiles * nheads)
    group = head // (nheads // ngroups)
    first = seg * SEG_CHUNKS

    # hᵀ: the operand C·hᵀ takes as it is, and the shape the swapped step (hᵀ = (w B)ᵀ X) produces.
    hT = ct.load(seg_entry, (b, head, seg, 0, p_tile), shape=(1, 1, 1, DSTATE, BLOCK_P),
                 order=(0, 1, 2, 4, 3)).reshape((DSTATE, BLOCK_P))
    for step in range(min(SEG_CHUNKS, nchunks - first)):
        chunk = first + step
        # Rows past seqlen load as zeros (and dt is zero there): they add nothing and are clipped on store.
        Cc = ct.load(C, (b, chunk, group, 0), shape=(1, CHUNK, 1, DSTATE), padding_mode=ct.PaddingMode.ZERO,
                     latency=LATENCY).reshape((CHUNK, DSTATE))
        Bc = ct.load(B, (b, chunk, group, 0), shape=(1, CHUNK, 1, DSTATE), padding_mode=ct.PaddingMode.ZERO,
                     latency=LATENCY).reshape((CHUNK, DSTATE))
        X = ct.load(x, (b, chunk, head, p_tile), shape=(1, CHUNK, 1, BLOCK_P), padding_mode=ct.PaddingMode.ZERO,
                    latency=LATENCY).reshape((CHUNK, BLOCK_P))
        gc = ct.load(g, (b, head, chunk), shape=(1, 1, CHUNK)).reshape((CHUNK,))
        dtc = ct.load(dtT, (b, head, chunk), shape=(1, 1, CHUNK)).reshape((CHUNK,))

        # The output: C·hᵀ of the entry state, decayed to each row (g <= 0), then the causal in-chunk part.
        g_col = gc.reshape((CHUNK, 1))
        acc = ct.mma(Cc.astype(STATE_MMA_DTYPE), hT.astype(STATE_MMA_DTYPE), ct.zeros((CHUNK, BLOCK_P), dtype=ct.float32))
        acc = acc * exp2(g_col)
        cb = ct.mma(Cc.astype(MMA_DTYPE), Bc.transpose().astype(MMA_DTYPE), ct.zeros((CHUNK, CHUNK), dtype=ct.float32))
        acc = ct.mma((cb * _causal_decay(g_col, CHUNK) * dtc.reshape((1, CHUNK))).astype(MMA_DTYPE),
                     X.astype(MMA_DTYPE), acc)
        if HAS_D:
            acc = acc + ct.load(D, (head,), shape=(1,)).reshape((1, 1)) * X.astype(ct.float32)
        ct.store(y, (b, chunk, head, p_tile), acc.reshape((1, CHUNK, 1, BLOCK_P)).astype(y.dtype))

        # The state at the next chunk's entry: the walk's swapped step.
        Bw, g_last = _weigh(Bc, gc, dtc, CHUNK, MMA_DTYPE)
        hT = ct.mma(Bw.transpose(), X.astype(MMA_DTYPE), hT * exp2(g_last).reshape((1, 1)))


def segment_out(x: torch.Tensor, B: torch.Tensor, C: torch.Tensor, g: torch.Tensor, dtT: torch.Tensor,
                D: torch.Tensor | None, A: torch.Tensor, initial_state: torch.Tensor | None, *, chunk_size: int,
                cfg: SegmentOutConfig, walk_cfg: SegmentStateConfig, scan_cfg: SegmentScanConfig,
                int64_everywhere: bool = False) -> tuple[list[Launch], torch.Tensor, torch.Tensor]:
    """Plan stages 2 and 3 fused: the local walk and the scan over segments of ``cfg.seg_chunks`` chunks, then
    this kernel; returns the launches, y and the final state. ``A`` only stands in for a missing ``D``."""
    batch, seqlen, nheads, headdim = x.shape
    dstate = B.shape[3]
    if dstate > FUSED_MAX_DSTATE:
        raise ValueError(f"segment_out: dstate={dstate} (B.shape[3]); expected at most {FUSED_MAX_DSTATE}, the "
                         "widest state a program carries")
    K = cfg.seg_chunks
    launches, seg_entry, final_state = segment_entries(x, B, g, dtT, initial_state, chunk_size=chunk_size,
                                                       cfg=walk_cfg, seg_chunks=K, scan_cfg=scan_cfg,
                                                       int64_everywhere=int64_everywhere)
    y = empty((batch, seqlen, nheads, headdim), dtype=x.dtype, device=x.device)
    nseg = seg_entry.shape[2]
    args = (x, B, C, g, dtT, seg_entry, D if D is not None else A, y, chunk_size, cfg.block_p, dstate, K,
            D is not None, cfg.latency)
    launches.append(plan_launch(_segment_out_kernel, (nseg * nheads * (headdim // cfg.block_p), batch), args,
                                occupancy=cfg.occupancy, int64_everywhere=int64_everywhere))
    return launches, y, final_state
