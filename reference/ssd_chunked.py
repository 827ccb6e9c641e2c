"""The chunked (state-space dual) form of the SSD forward in float64: fast, validated against the recurrence."""

from __future__ import annotations

import torch
from torch import Tensor

from reference.checks import CHUNK_SIZE, FLOAT_DTYPES, check_inputs

__all__ = ["ssd_chunked"]


def _segment_sums(a: torch.Tensor) -> torch.Tensor:
    """``out[..., i, j] = a[..., j+1] + ... + a[..., i]`` for ``i >= j``, ``-inf`` above the diagonal.

    a: (..., T) -> (..., T, T). A masked cumsum, never a difference of cumsums: with |A*dt| large
    the running cumsum reaches magnitudes where subtracting two of them loses every digit.
    """
    T = a.shape[-1]
    rep = a[..., None, :].expand(*a.shape, T).transpose(-1, -2)          # rep[..., i, k] = a[..., i]
    strictly_lower = torch.ones(T, T, dtype=torch.bool, device=a.device).tril(-1)
    sums = torch.cumsum(rep.masked_fill(~strictly_lower, 0.0), dim=-2)  # sums[i, j] = sum_{j<k<=i} a_k
    lower = torch.ones(T, T, dtype=torch.bool, device=a.device).tril(0)
    return sums.masked_fill(~lower, float("-inf"))


def ssd_chunked(x: Tensor, dt: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Tensor | None = None,
                initial_state: Tensor | None = None, chunk_size: int = CHUNK_SIZE) -> tuple[Tensor, Tensor]:
    """The SSD forward chunk by chunk, in float64, on the inputs' device.

    Same arguments, shapes and returns as ``ssd_recurrent``; any seqlen (the last chunk may be
    short), ngroups dividing nheads. Within a chunk of T tokens, with ``a = A * dt`` and
    ``L[i, j] = exp(a[j+1] + ... + a[i])`` for ``i >= j`` (0 above the diagonal)::

        Y      = (L * (C B^T)) (dt X) + exp(cumsum a) * (C state^T) + D X
        state' = exp(sum a) * state + X^T (exp(sum a - cumsum a) * dt * B)

    One loop over chunks keeps memory at one chunk's worth, so 1M tokens fit on a GPU.
    """
    batch, seqlen, nheads, headdim, ngroups, dstate = check_inputs(
        x, dt, A, B, C, D, initial_state, chunk_size=chunk_size, who="ssd_chunked", domain="any",
        x_dtypes=(*FLOAT_DTYPES, torch.float64),
    )
    f64 = torch.float64
    heads_per_group = nheads // ngroups
    A64 = A.to(f64)
    if initial_state is None:
        state = torch.zeros(batch, nheads, headdim, dstate, dtype=f64, device=x.device)
    else:
        state = initial_state.to(f64).clone()
    y = torch.empty(batch, seqlen, nheads, headdim, dtype=f64, device=x.device)

    for start in range(0, seqlen, chunk_size):
        stop = min(start + chunk_size, seqlen)
        # Per-chunk operands, heads first: X (b, h, T, p), B and C (b, h, T, n), a and dt (b, h, T).
        X = x[:, start:stop].to(f64).permute(0, 2, 1, 3)
        Bc = B[:, start:stop].to(f64).repeat_interleave(heads_per_group, dim=2).permute(0, 2, 1, 3)
        Cc = C[:, start:stop].to(f64).repeat_interleave(heads_per_group, dim=2).permute(0, 2, 1, 3)
        dtc = dt[:, start:stop].to(f64).permute(0, 2, 1)
        a = A64[None, :, None] * dtc

        # Step 1, within the chunk: the masked, decayed "attention" C B^T applied to dt * X.
        L = torch.exp(_segment_sums(a))                                  # (b, h, T, T)
        scores = L * (Cc @ Bc.transpose(-1, -2))
        Y = scores @ (dtc[..., None] * X)

        # Step 2, the carried state seen from each token: exp(cumsum a) * C state^T.
        decay_in = torch.exp(torch.cumsum(a, dim=-1))                    # (b, h, T)
        Y = Y + decay_in[..., None] * (Cc @ state.transpose(-1, -2))

        # Step 3, the jump to the next chunk: decay from token j to the chunk's end is L[last, j].
        decay_out = L[..., -1, :]                                        # (b, h, T)
        state = decay_in[..., -1, None, None] * state + X.transpose(-1, -2) @ (
            (decay_out * dtc)[..., None] * Bc)

        y[:, start:stop] = Y.permute(0, 2, 1, 3)
    if D is not None:
        y += D.to(f64)[None, None, :, None] * x.to(f64)
    return y, state
