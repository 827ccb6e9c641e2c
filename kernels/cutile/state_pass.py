"""Stage 2, fwd_pass_state: the state at the entry of every chunk, by the chunk jump formula.

For one head, with g the chunk's cumsum (log2 units), g_last its value at the chunk's end,
X (chunk, headdim) and B (chunk, dstate) the chunk's rows:

    h_next = exp2(g_last) * h + Xᵀ (exp2(g_last - g) * dt * B)

The loop over chunks is sequential inside one program; programs split (batch, head, headdim tile,
dstate tile), which are independent.
"""

import cuda.tile as ct
import torch

from kernels.alloc import empty
from kernels.cutile._launch import Launch, plan_launch
from kernels.cutile.tuning import StatePassConfig


def _state_pass_kernel(
    x: ct.Array,                 # (batch, seqlen, nheads, headdim)
    B: ct.Array,                 # (batch, seqlen, ngroups, dstate)
    g: ct.Array,                 # (batch, nheads, nchunks * CHUNK) fp32, from chunk_cumsum
    dtT: ct.Array,               # (batch, nheads, nchunks * CHUNK) fp32, from chunk_cumsum
    initial_state: ct.Array,     # (batch, nheads, headdim, dstate) fp32; unread unless HAS_INITIAL_STATE
    states: ct.Array,            # out (batch, nheads, nchunks, headdim, dstate): entry state of each chunk
    final_state: ct.Array,       # out (batch, nheads, headdim, dstate) fp32
    CHUNK: ct.Constant[int],
    BLOCK_P: ct.Constant[int],
    BLOCK_N: ct.Constant[int],
    HAS_INITIAL_STATE: ct.Constant[bool],
    LATENCY: ct.Constant[int],
):
    """Grid (nheads * headdim/BLOCK_P * dstate/BLOCK_N, batch): one (BLOCK_P, BLOCK_N) tile of one
    head's state, carried in fp32 registers through every chunk of one sequence."""
    # bf16/fp16 operands run on the tensor cores as they are (HGMMA on sm_90); fp32 operands are cast
    # to tf32 on purpose: an fp32 ct.mma takes no tensor core path and spills.
    MMA_DTYPE = ct.static_eval(ct.tfloat32 if x.dtype == ct.float32 else x.dtype)
    # Sizes fit int32 even when offsets need int64; int32 keeps loop bounds and bids of one type.
    nheads, ngroups = ct.astype(x.shape[2], ct.int32), ct.astype(B.shape[2], ct.int32)
    ptiles = ct.astype(x.shape[3], ct.int32) // BLOCK_P
    ntiles = ct.astype(B.shape[3], ct.int32) // BLOCK_N
    nchunks = ct.astype(g.shape[2], ct.int32) // CHUNK
    pid, b = ct.bid(0), ct.bid(1)
    n_tile = pid % ntiles
    p_tile = (pid // ntiles) % ptiles
    head = pid // (ntiles * ptiles)
    group = head // (nheads // ngroups)

    if HAS_INITIAL_STATE:
        h = ct.load(initial_state, (b, head, p_tile, n_tile), shape=(1, 1, BLOCK_P, BLOCK_N))
        h = h.reshape((BLOCK_P, BLOCK_N))
    else:
        h = ct.zeros((BLOCK_P, BLOCK_N), dtype=ct.float32)

    for chunk in range(nchunks):
        ct.store(states, (b, head, chunk, p_tile, n_tile),
                 h.reshape((1, 1, 1, BLOCK_P, BLOCK_N)).astype(states.dtype))
        # Rows past seqlen load as zeros: with dt = 0 there too, the ragged tail adds nothing.
        X = ct.load(x, (b, chunk, head, p_tile), shape=(1, CHUNK, 1, BLOCK_P),
                    padding_mode=ct.PaddingMode.ZERO, latency=LATENCY).reshape((CHUNK, BLOCK_P))
        Bc = ct.load(B, (b, chunk, group, n_tile), shape=(1, CHUNK, 1, BLOCK_N),
                     padding_mode=ct.PaddingMode.ZERO, latency=LATENCY).reshape((CHUNK, BLOCK_N))
        gc = ct.load(g, (b, head, chunk), shape=(1, 1, CHUNK)).reshape((CHUNK,))
        dtc = ct.load(dtT, (b, head, chunk), shape=(1, 1, CHUNK)).reshape((CHUNK,))
        # g is padded with the last real token's value, so index CHUNK - 1 holds the chunk's total.
        g_last = ct.extract(gc, (CHUNK - 1,), shape=(1,))
        # In exact arithmetic g_last <= g; the cumsum's rounding may break that by an ulp of |g|,
        # which is huge when |g| is: clamp so that no exponent is ever positive.
        weight = ct.exp2(ct.minimum(g_last - gc, 0.0)) * dtc
        Bw = (Bc * weight.reshape((CHUNK, 1))).astype(MMA_DTYPE)
        h = ct.mma(X.transpose().astype(MMA_DTYPE), Bw, h * ct.exp2(g_last).reshape((1, 1)))

    ct.store(final_state, (b, head, p_tile, n_tile), h.reshape((1, 1, BLOCK_P, BLOCK_N)))


def _state_pass_args(x, B, g, dtT, initial_state, states, final_state, cfg: StatePassConfig,
                     chunk_size: int, has_initial_state: bool) -> tuple:
    return (
        x,
        B,
        g,
        dtT,
        initial_state,
        states,
        final_state,
        chunk_size,
        cfg.block_p,
        cfg.block_n,
        has_initial_state,
        cfg.latency,
    )


def state_dtype(x_dtype: torch.dtype) -> torch.dtype:
    """Storage dtype of the chunk entry states that stage 3 reads.

    bf16 for bf16 inputs: stage 3 feeds them to a bf16 C·hᵀ mma anyway, so storing bf16 rounds
    exactly once, as loading fp32 and casting would, at half the traffic (the states are the largest
    intermediate). fp16 would overflow on large states, so fp16 and fp32 inputs keep fp32 (tf32 mma).
    """
    return torch.bfloat16 if x_dtype == torch.bfloat16 else torch.float32


def state_pass(x: torch.Tensor, B: torch.Tensor, g: torch.Tensor, dtT: torch.Tensor,
               initial_state: torch.Tensor | None, *, chunk_size: int,
               cfg: StatePassConfig, int64_everywhere: bool = False) -> tuple[Launch, torch.Tensor, torch.Tensor]:
    """Plan stage 2; returns the launch, the chunk entry states and the final state it fills."""
    batch, seqlen, nheads, headdim = x.shape
    dstate = B.shape[3]
    nchunks = g.shape[2] // chunk_size
    states = empty((batch, nheads, nchunks, headdim, dstate), dtype=state_dtype(x.dtype), device=x.device)
    final_state = empty((batch, nheads, headdim, dstate), dtype=torch.float32, device=x.device)
    has_initial_state = initial_state is not None
    # Without an initial state the kernel never reads that parameter; final_state stands in for it.
    h0 = initial_state if has_initial_state else final_state
    grid = (nheads * (headdim // cfg.block_p) * (dstate // cfg.block_n), batch)
    args = _state_pass_args(x, B, g, dtT, h0, states, final_state, cfg, chunk_size, has_initial_state)
    launch = plan_launch(_state_pass_kernel, grid, args, occupancy=cfg.occupancy, int64_everywhere=int64_everywhere)
    return launch, states, final_state
