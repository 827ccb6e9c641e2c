"""The step-by-step SSD recurrence in float64: THE oracle every numerical verdict is taken against."""

from __future__ import annotations

import torch
from torch import Tensor

from reference.checks import FLOAT_DTYPES, check_inputs

__all__ = ["ssd_recurrent"]


def ssd_recurrent(x: Tensor, dt: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Tensor | None = None,
                  initial_state: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """One loop over tokens, in float64 whatever the input dtype, on the inputs' device.

    For every head ``h`` (in group ``g = h // (nheads // ngroups)``) and token ``t``::

        state_t = exp(A[h] * dt[t, h]) * state_{t-1} + dt[t, h] * outer(x[t, h], B[t, g])
        y[t, h] = state_t @ C[t, g] + D[h] * x[t, h]

    Shapes: x (batch, seqlen, nheads, headdim); dt (batch, seqlen, nheads); A (nheads,);
    B, C (batch, seqlen, ngroups, dstate); D (nheads,) or None; initial_state
    (batch, nheads, headdim, dstate) or None (zeros).

    Returns ``(y, final_state)``: y (batch, seqlen, nheads, headdim) float64, final_state
    (batch, nheads, headdim, dstate) float64.
    """
    batch, seqlen, nheads, headdim, ngroups, dstate = check_inputs(
        x, dt, A, B, C, D, initial_state, chunk_size=1, who="ssd_recurrent", domain="any",
        x_dtypes=(*FLOAT_DTYPES, torch.float64),
    )
    f64 = torch.float64
    heads_per_group = nheads // ngroups
    # Expand the groups to heads once: (batch, seqlen, nheads, dstate).
    B = B.to(f64).repeat_interleave(heads_per_group, dim=2)
    C = C.to(f64).repeat_interleave(heads_per_group, dim=2)
    x, dt, A = x.to(f64), dt.to(f64), A.to(f64)

    if initial_state is None:
        state = torch.zeros(batch, nheads, headdim, dstate, dtype=f64, device=x.device)
    else:
        state = initial_state.to(f64).clone()
    y = torch.empty(batch, seqlen, nheads, headdim, dtype=f64, device=x.device)
    for t in range(seqlen):
        dt_t = dt[:, t, :, None, None]                                   # (batch, nheads, 1, 1)
        decay = torch.exp(A[None, :, None, None] * dt_t)
        state = decay * state + dt_t * x[:, t, :, :, None] * B[:, t, :, None, :]
        y[:, t] = torch.einsum("bhpn,bhn->bhp", state, C[:, t])
    if D is not None:
        y += D.to(f64)[None, None, :, None] * x
    return y, state
