"""Named input regimes: each builds one problem's inputs and says what it means physically.

Every regime takes ``(spec, gen, device)``, draws only from ``gen`` (never the global RNG) and
returns ``SSDInputs`` in the layout of docs/design.md. x, B and C are standard normal unless the
regime says otherwise; D is standard normal when ``spec.with_D``; the initial state is standard
normal when ``spec.with_initial_state``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from reference.problem import REGIMES, ProblemSpec, SSDInputs

__all__ = ["OUTSIDE_MAMBA", "REGIMES", "Regime"]

Regime = Callable[[ProblemSpec, torch.Generator, torch.device], SSDInputs]


# The regimes outside Mamba's parameterisation (A <= 0, dt >= 0): the float64 references compute them, every kernel
# entry point refuses them (reference.checks.check_domain; docs/design.md, "Input contract").
OUTSIDE_MAMBA = ("positive_A", "negative_dt")


def _regime(fn: Regime) -> Regime:
    """Register ``fn`` in problem.REGIMES, the registry ProblemSpec checks its ``regime`` against."""
    REGIMES[fn.__name__] = fn
    return fn


def _normal(shape, gen, device, dtype) -> torch.Tensor:
    return torch.randn(shape, generator=gen, device=device, dtype=torch.float32).to(dtype)


def _uniform(shape, lo: float, hi: float, gen, device) -> torch.Tensor:
    return torch.rand(shape, generator=gen, device=device, dtype=torch.float32) * (hi - lo) + lo


def _log_uniform(shape, lo: float, hi: float, gen, device) -> torch.Tensor:
    return torch.exp(_uniform(shape, math.log(lo), math.log(hi), gen, device))


def _assemble(spec: ProblemSpec, gen, device, *, dt: torch.Tensor, A: torch.Tensor,
              state_scale: float = 1.0) -> SSDInputs:
    """Draw x, B, C, D and the initial state; take dt and A as given (fp32) and cast to the spec."""
    b, l, h, p, g, n = spec.batch, spec.seqlen, spec.nheads, spec.headdim, spec.ngroups, spec.dstate
    x = _normal((b, l, h, p), gen, device, spec.torch_dtype)
    B = _normal((b, l, g, n), gen, device, spec.torch_dtype)
    C = _normal((b, l, g, n), gen, device, spec.torch_dtype)
    D = _normal((h,), gen, device, spec.param_dtype) if spec.with_D else None
    h0 = None
    if spec.with_initial_state:
        h0 = _normal((b, h, p, n), gen, device, spec.param_dtype) * state_scale
    return SSDInputs(x=x, dt=dt.to(spec.param_dtype), A=A.to(spec.param_dtype), B=B, C=C, D=D, initial_state=h0)


def _typical_dt_A(spec: ProblemSpec, gen, device) -> tuple[torch.Tensor, torch.Tensor]:
    dt = F.softplus(torch.randn((spec.batch, spec.seqlen, spec.nheads), generator=gen, device=device) - 4.0)
    A = -_log_uniform((spec.nheads,), 1.0, 16.0, gen, device)
    return dt, A


@_regime
def typical(spec: ProblemSpec, gen, device) -> SSDInputs:
    """A trained Mamba-2 layer: dt = softplus(N(0,1) - 4) (about 0.02, up to ~1), A = -exp(U(0, log 16))."""
    dt, A = _typical_dt_A(spec, gen, device)
    return _assemble(spec, gen, device, dt=dt, A=A)


@_regime
def dt_zero(spec: ProblemSpec, gen, device) -> SSDInputs:
    """dt = 0 everywhere: no token is written and nothing decays; the state passes through unchanged."""
    _, A = _typical_dt_A(spec, gen, device)
    dt = torch.zeros((spec.batch, spec.seqlen, spec.nheads), device=device)
    return _assemble(spec, gen, device, dt=dt, A=A)


@_regime
def tiny_dt(spec: ProblemSpec, gen, device) -> SSDInputs:
    """dt = 1e-8: each token barely touches the state (inputs near fp32's resolution of the state)."""
    _, A = _typical_dt_A(spec, gen, device)
    dt = torch.full((spec.batch, spec.seqlen, spec.nheads), 1e-8, device=device)
    return _assemble(spec, gen, device, dt=dt, A=A)


@_regime
def huge_dt(spec: ProblemSpec, gen, device) -> SSDInputs:
    """dt log-uniform in [1e3, 1e4]: the state forgets everything at every token; y ~ dt * (C.B) x."""
    _, A = _typical_dt_A(spec, gen, device)
    dt = _log_uniform((spec.batch, spec.seqlen, spec.nheads), 1e3, 1e4, gen, device)
    return _assemble(spec, gen, device, dt=dt, A=A)


@_regime
def bimodal_dt(spec: ProblemSpec, gen, device) -> SSDInputs:
    """Each token either skipped (dt = 1e-4) or written hard (dt log-uniform in [1, 10]), half each:
    a gate that opens and shuts, so decays within one chunk span many orders of magnitude."""
    _, A = _typical_dt_A(spec, gen, device)
    shape = (spec.batch, spec.seqlen, spec.nheads)
    open_ = torch.rand(shape, generator=gen, device=device) < 0.5
    dt = torch.where(open_, _log_uniform(shape, 1.0, 10.0, gen, device), torch.full(shape, 1e-4, device=device))
    return _assemble(spec, gen, device, dt=dt, A=A)


@_regime
def huge_decay(spec: ProblemSpec, gen, device) -> SSDInputs:
    """|A*dt| in 1e4..1e7 per token, so the in-chunk cumsum reaches -1e6..-1e9, where fp32's spacing is
    >= 1: the rounding case behind vLLM PR 37501 / mamba PR 713 (an exponent meant to be <= 0 comes out
    positive, giving Inf, then NaN). Physically the state holds only the current token."""
    A = -_log_uniform((spec.nheads,), 1e2, 1e4, gen, device)
    dt = _log_uniform((spec.batch, spec.seqlen, spec.nheads), 1e2, 1e3, gen, device)
    return _assemble(spec, gen, device, dt=dt, A=A)


@_regime
def long_memory(spec: ProblemSpec, gen, device) -> SSDInputs:
    """A -> 0- (-1e-6..-1e-4) and small dt (1e-3..1e-2): nothing decays and the state only accumulates,
    so its magnitude grows like sqrt(seqlen) and errors carried across chunks never fade."""
    A = -_log_uniform((spec.nheads,), 1e-6, 1e-4, gen, device)
    dt = _log_uniform((spec.batch, spec.seqlen, spec.nheads), 1e-3, 1e-2, gen, device)
    return _assemble(spec, gen, device, dt=dt, A=A)


@_regime
def large_initial_state(spec: ProblemSpec, gen, device) -> SSDInputs:
    """A carried state 1e4 times larger than the tokens' contributions (a long prefix already absorbed):
    the inter-chunk term dominates y, and its rounding is what shows."""
    dt, A = _typical_dt_A(spec, gen, device)
    if not spec.with_initial_state:
        raise ValueError("regime large_initial_state needs ProblemSpec.with_initial_state=True")
    return _assemble(spec, gen, device, dt=dt, A=A, state_scale=1e4)


@_regime
def positive_A(spec: ProblemSpec, gen, device) -> SSDInputs:
    """Typical inputs but A = +U(0.05, 0.5) on the even heads (0, 2, ...): those states grow by exp(A dt) > 1
    at every token instead of decaying, as an unconstrained A (not -exp(A_log)) would make them.
    Outside Mamba's parameterisation: the references compute it, the kernels refuse it."""
    dt, A = _typical_dt_A(spec, gen, device)
    A[::2] = _uniform((len(A[::2]),), 0.05, 0.5, gen, device)
    return _assemble(spec, gen, device, dt=dt, A=A)


@_regime
def negative_dt(spec: ProblemSpec, gen, device) -> SSDInputs:
    """Typical inputs but dt negated on a quarter of the (token, head) pairs at random, and always at the
    middle token of head 0, as a missing softplus would leave it: there exp(A dt) > 1 (the state grows) and
    the write dt x Bᵀ changes sign. Outside Mamba's parameterisation: the references compute it, the kernels
    refuse it."""
    dt, A = _typical_dt_A(spec, gen, device)
    flip = torch.rand(dt.shape, generator=gen, device=device) < 0.25
    flip[:, spec.seqlen // 2, 0] = True
    return _assemble(spec, gen, device, dt=torch.where(flip, -dt, dt), A=A)


@_regime
def nonfinite_input(spec: ProblemSpec, gen, device) -> SSDInputs:
    """Typical inputs with one NaN in x at the middle token t0 (batch 0, head 0, channel 0).

    Documented behaviour, one verdict rule for every implementation: the float64 recurrence puts NaN
    in y[0, t, 0, 0] for every t >= t0 and in row 0 of head 0's final state, and nowhere else. A
    chunked form (the float64 ``ssd_chunked`` included) may also put NaN in the tokens of t0's chunk
    before t0 (the causal mask multiplies the NaN by zero, and 0 * NaN is NaN). An implementation
    passes when it is non-finite wherever the recurrence is (a NaN input never vanishes), non-finite
    elsewhere only in t0's chunk of that head, and within tolerance on the rest."""
    inputs = typical(spec, gen, device)
    inputs.x[0, spec.seqlen // 2, 0, 0] = float("nan")
    return inputs


@_regime
def projection_views(spec: ProblemSpec, gen, device) -> SSDInputs:
    """Typical values passed as models pass them: x, B and C are views into one wider in-projection
    (batch, seqlen, nheads*headdim + 2*ngroups*dstate + pad), and dt a view into a (batch, seqlen,
    2*nheads) fp32 tensor, so no input is contiguous (mamba PR 987: non-contiguous dt views)."""
    ref = typical(spec, gen, device)
    b, l, h, p, g, n = spec.batch, spec.seqlen, spec.nheads, spec.headdim, spec.ngroups, spec.dstate
    width = h * p + 2 * g * n + 8
    proj = torch.full((b, l, width), float("nan"), device=device, dtype=spec.torch_dtype)
    proj[..., : h * p] = ref.x.reshape(b, l, h * p)
    proj[..., h * p : h * p + g * n] = ref.B.reshape(b, l, g * n)
    proj[..., h * p + g * n : h * p + 2 * g * n] = ref.C.reshape(b, l, g * n)
    dt_wide = torch.full((b, l, 2 * h), float("nan"), device=device, dtype=ref.dt.dtype)
    dt_wide[..., h:] = ref.dt
    return SSDInputs(
        x=proj[..., : h * p].unflatten(-1, (h, p)),
        dt=dt_wide[..., h:],
        A=ref.A,
        B=proj[..., h * p : h * p + g * n].unflatten(-1, (g, n)),
        C=proj[..., h * p + g * n : h * p + 2 * g * n].unflatten(-1, (g, n)),
        D=ref.D,
        initial_state=ref.initial_state,
    )
