"""The float64 references: the chunked form against the recurrence, the invariants both obey, a
case worked out by hand, and the input check's errors."""

from __future__ import annotations

import math
import time

import pytest
import torch

from reference import REGIMES, ProblemSpec, check_inputs, checks, ssd_chunked, ssd_recurrent
from reference.checks import DomainError, domain_checked
from reference.regimes import OUTSIDE_MAMBA
from validation.compare import errors
from validation.tolerances import tolerance_for

F64 = torch.float64


def _chunked_cases() -> list[tuple[ProblemSpec, str]]:
    """Ragged lengths around every chunk size, groups 1/2/4, with and without D and initial state."""
    regimes = ["typical", "long_memory", "huge_decay", "bimodal_dt", "tiny_dt", "huge_dt", "dt_zero",
               "large_initial_state", "projection_views"]
    cases = []
    i = 0
    for chunk in (16, 32, 64, 128, 256):
        for seqlen, tag in ((1, "l1_single_step"), (chunk - 1, "one_short_of_chunk"),
                            (chunk + 1, "one_past_chunk"), (211, "l211_prime")):
            regime = regimes[i % len(regimes)]
            ngroups = (1, 2, 4)[i % 3]
            cases.append((ProblemSpec(batch=2, seqlen=seqlen, nheads=4, headdim=8, ngroups=ngroups, dstate=16,
                                      chunk_size=chunk, dtype="fp32", regime=regime, seed=i,
                                      with_D=i % 2 == 0,
                                      with_initial_state=regime == "large_initial_state" or i % 3 == 1),
                          tag))
            i += 1
    return cases


CHUNKED_CASES = _chunked_cases()


def _assert_close(quantity: str, out: torch.Tensor, ref: torch.Tensor, impl: str = "reference-chunked") -> None:
    tol = tolerance_for(impl, "fp64", "ieee", quantity)
    e = errors(out, ref)
    where = f"at {e.worst_index}"
    assert e.rel_l2 <= tol.rel_l2, (
        f"{quantity} rel_l2 {e.rel_l2:.3e} > {tol.rel_l2:.0e} (max_abs {e.max_abs:.3e} {where});"
        f" row ({impl}, fp64, ieee, {quantity})")
    assert e.max_abs_over_peak <= tol.max_abs, (
        f"{quantity} max_abs/peak {e.max_abs_over_peak:.3e} > {tol.max_abs:.0e} {where};"
        f" row ({impl}, fp64, ieee, {quantity})")


@pytest.mark.parametrize("spec,tag", CHUNKED_CASES, ids=[s.case_id("reference-chunked", t) for s, t in CHUNKED_CASES])
def test_chunked_matches_fp64_recurrence(spec: ProblemSpec, tag: str) -> None:
    inputs = spec.make_inputs()
    y_ref, h_ref = ssd_recurrent(*inputs.as_args())
    y, h = ssd_chunked(*inputs.as_args(), chunk_size=spec.chunk_size)
    assert y.dtype == F64 and h.dtype == F64
    _assert_close("y", y, y_ref)
    _assert_close("final_state", h, h_ref)


@pytest.mark.slow
def test_chunked_matches_fp64_recurrence_over_64k_tokens() -> None:
    """65,537 tokens (64K + 1: a ragged last chunk) on the CPU, and the chunked form within a minute."""
    spec = ProblemSpec(batch=1, seqlen=65537, nheads=2, headdim=4, ngroups=1, dstate=8, chunk_size=256,
                       dtype="fp32", regime="long_memory", seed=7, with_initial_state=True)
    inputs = spec.make_inputs()
    start = time.perf_counter()
    y, h = ssd_chunked(*inputs.as_args(), chunk_size=spec.chunk_size)
    elapsed = time.perf_counter() - start
    y_ref, h_ref = ssd_recurrent(*inputs.as_args())
    _assert_close("y", y, y_ref)
    _assert_close("final_state", h, h_ref)
    assert elapsed < 60, f"ssd_chunked took {elapsed:.1f} s for 64K tokens; the reference must stay usable"


OUTSIDE_CASES = [ProblemSpec(batch=2, seqlen=seqlen, nheads=4, headdim=8, ngroups=ngroups, dstate=16, chunk_size=chunk,
                             dtype=dtype, regime=regime, seed=seed, with_initial_state=seed % 2 == 1)
                 for seed, (regime, (seqlen, chunk, ngroups, dtype)) in enumerate(
                     (r, c) for r in OUTSIDE_MAMBA
                     for c in ((1, 16, 1, "fp32"), (47, 16, 2, "fp32"), (64, 32, 4, "fp64"), (211, 64, 1, "bf16")))]


@pytest.mark.parametrize("spec", OUTSIDE_CASES, ids=[s.case_id("reference-chunked") for s in OUTSIDE_CASES])
def test_references_compute_A_positive_and_dt_negative_and_agree(spec: ProblemSpec) -> None:
    """Outside Mamba's parameterisation (which the kernels refuse) the references still compute the
    recurrence, finite, and the chunked form agrees with it."""
    inputs = spec.make_inputs()
    assert bool((inputs.A > 0).any()) if spec.regime == "positive_A" else bool((inputs.dt < 0).any())
    y_ref, h_ref = ssd_recurrent(*inputs.as_args())
    y, h = ssd_chunked(*inputs.as_args(), chunk_size=spec.chunk_size)
    assert bool(torch.isfinite(y_ref).all()) and bool(torch.isfinite(h_ref).all())
    _assert_close("y", y, y_ref)
    _assert_close("final_state", h, h_ref)


# --- invariants ----------------------------------------------------------------------------------

INVARIANT_SPEC = ProblemSpec(batch=2, seqlen=150, nheads=4, headdim=8, ngroups=2, dstate=16, chunk_size=32,
                             dtype="fp64", regime="typical", seed=3, with_initial_state=True)
REFERENCES = {"recurrent": lambda *a, chunk_size: ssd_recurrent(*a), "chunked": ssd_chunked}
ROW = {"recurrent": "reference-recurrent", "chunked": "reference-chunked"}  # each reference's rows of the table


@pytest.mark.parametrize("split", [1, 31, 32, 33, 100, 149])
@pytest.mark.parametrize("ref", sorted(REFERENCES))
def test_splitting_the_sequence_and_carrying_the_state_changes_nothing(ref: str, split: int) -> None:
    fn = REFERENCES[ref]
    x, dt, A, B, C, D, h0 = INVARIANT_SPEC.make_inputs().as_args()
    y_whole, h_whole = fn(x, dt, A, B, C, D, h0, chunk_size=32)
    y1, h1 = fn(x[:, :split], dt[:, :split], A, B[:, :split], C[:, :split], D, h0, chunk_size=32)
    y2, h2 = fn(x[:, split:], dt[:, split:], A, B[:, split:], C[:, split:], D, h1, chunk_size=32)
    _assert_close("y", torch.cat([y1, y2], dim=1), y_whole, ROW[ref])
    _assert_close("final_state", h2, h_whole, ROW[ref])


@pytest.mark.parametrize("ref", sorted(REFERENCES))
def test_dt_zero_leaves_the_state_unchanged(ref: str) -> None:
    spec = ProblemSpec(batch=2, seqlen=70, nheads=4, headdim=8, ngroups=1, dstate=16, chunk_size=32,
                       dtype="fp64", regime="dt_zero", seed=5, with_initial_state=True)
    inputs = spec.make_inputs()
    _, h = REFERENCES[ref](*inputs.as_args(), chunk_size=32)
    assert torch.equal(h, inputs.initial_state), "final_state differs from initial_state although dt = 0"


@pytest.mark.parametrize("ref", sorted(REFERENCES))
def test_output_is_linear_in_x_from_a_zero_state(ref: str) -> None:
    spec = ProblemSpec(batch=1, seqlen=90, nheads=2, headdim=4, ngroups=1, dstate=8, chunk_size=32,
                       dtype="fp64", regime="typical", seed=11)
    x1, dt, A, B, C, D, _ = spec.make_inputs().as_args()
    x2 = torch.randn(x1.shape, generator=torch.Generator().manual_seed(12), dtype=F64)
    fn = REFERENCES[ref]
    y_mix, _ = fn(2.5 * x1 - 0.75 * x2, dt, A, B, C, D, None, chunk_size=32)
    y1, _ = fn(x1, dt, A, B, C, D, None, chunk_size=32)
    y2, _ = fn(x2, dt, A, B, C, D, None, chunk_size=32)
    _assert_close("y", 2.5 * y1 - 0.75 * y2, y_mix, ROW[ref])


@pytest.mark.parametrize("regime", ["typical", "huge_decay", "long_memory", "bimodal_dt"])
def test_chunked_does_not_depend_on_chunk_size(regime: str) -> None:
    spec = ProblemSpec(batch=1, seqlen=300, nheads=2, headdim=4, ngroups=1, dstate=8, chunk_size=16,
                       dtype="fp32", regime=regime, seed=2, with_initial_state=True)
    args = spec.make_inputs().as_args()
    y16, h16 = ssd_chunked(*args, chunk_size=16)
    for chunk in (1, 7, 64, 256, 512):
        y, h = ssd_chunked(*args, chunk_size=chunk)
        _assert_close("y", y, y16)
        _assert_close("final_state", h, h16)


def test_nonfinite_input_poisons_exactly_the_documented_outputs() -> None:
    spec = ProblemSpec(batch=2, seqlen=40, nheads=2, headdim=4, ngroups=1, dstate=8, chunk_size=16,
                       dtype="fp32", regime="nonfinite_input", seed=1)
    y, h = ssd_recurrent(*spec.make_inputs().as_args())
    expected_y = torch.zeros(y.shape, dtype=torch.bool)
    expected_y[0, 20:, 0, 0] = True
    expected_h = torch.zeros(h.shape, dtype=torch.bool)
    expected_h[0, 0, 0, :] = True
    assert torch.equal(~torch.isfinite(y), expected_y), (
        "the NaN in x[0, 20, 0, 0] did not reach exactly y[0, 20:, 0, 0]")
    assert torch.equal(~torch.isfinite(h), expected_h), "the NaN did not reach exactly row 0 of head 0's state"


# --- a case worked out by hand ---------------------------------------------------------------------

# Two tokens, headdim = dstate = 1, x = (2, 3), B = (1, 2), C = (3, 1), D = 0.5, h0 = 4:
#   A = -ln 2, dt = (1, 2), so exp(A dt) = 2**-dt:
#     t=1: h1 = 0.5*4 + 1*2*1 = 4;         y1 = 4*3 + 0.5*2 = 13
#     t=2: h2 = 0.25*4 + 2*3*2 = 13;       y2 = 13*1 + 0.5*3 = 14.5
#   A = +ln 2, dt = (1, -1), so exp(A dt) = 2**dt (outside Mamba's domain; the references compute it):
#     t=1: h1 = 2*4 + 1*2*1 = 10;          y1 = 10*3 + 0.5*2 = 31
#     t=2: h2 = 0.5*10 + (-1)*3*2 = -1;    y2 = -1*1 + 0.5*3 = 0.5
BY_HAND = {  # case -> (A, dt, y, final_state)
    "mamba": (-math.log(2.0), (1.0, 2.0), [13.0, 14.5], [13.0]),
    "A_positive_dt_negative": (math.log(2.0), (1.0, -1.0), [31.0, 0.5], [-1.0]),
}


@pytest.mark.parametrize("case", sorted(BY_HAND))
def test_two_tokens_worked_by_hand(case: str) -> None:
    a, dts, y_hand, h_hand = BY_HAND[case]
    x = torch.tensor([2.0, 3.0], dtype=F64).view(1, 2, 1, 1)
    dt = torch.tensor(dts, dtype=F64).view(1, 2, 1)
    A = torch.tensor([a], dtype=F64)
    B = torch.tensor([1.0, 2.0], dtype=F64).view(1, 2, 1, 1)
    C = torch.tensor([3.0, 1.0], dtype=F64).view(1, 2, 1, 1)
    D = torch.tensor([0.5], dtype=F64)
    h0 = torch.tensor([4.0], dtype=F64).view(1, 1, 1, 1)
    for name, fn in REFERENCES.items():
        y, h = fn(x, dt, A, B, C, D, h0, chunk_size=2)
        _assert_close("y", y.flatten(), torch.tensor(y_hand, dtype=F64), ROW[name])
        _assert_close("final_state", h.flatten(), torch.tensor(h_hand, dtype=F64), ROW[name])


# --- the input model ---------------------------------------------------------------------------------

@pytest.mark.parametrize("regime", sorted(REGIMES))
def test_regime_is_documented_and_reproducible(regime: str) -> None:
    fn = REGIMES[regime]
    assert fn.__doc__ and len(fn.__doc__.split()) >= 8, f"regime {regime} needs a docstring with its physical meaning"
    spec = ProblemSpec(batch=1, seqlen=33, nheads=2, headdim=4, ngroups=1, dstate=8, chunk_size=16,
                       dtype="fp32", regime=regime, seed=4, with_initial_state=True)
    a, b = spec.make_inputs().as_args(), spec.make_inputs().as_args()
    for name, t, u in zip(("x", "dt", "A", "B", "C", "D", "initial_state"), a, b, strict=True):
        assert torch.equal(t.nan_to_num(), u.nan_to_num()), (
            f"regime {regime}: {name} differs between two builds of one seed")
    check_inputs(*a, chunk_size=16, who="test", domain="mamba" if regime not in OUTSIDE_MAMBA else "any")


def test_projection_views_are_not_contiguous_and_hold_typical_values() -> None:
    spec = ProblemSpec(batch=2, seqlen=20, nheads=4, headdim=8, ngroups=2, dstate=16, chunk_size=16,
                       dtype="bf16", regime="projection_views", seed=9)
    views = spec.make_inputs()
    plain = ProblemSpec(**{**spec.as_dict(), "regime": "typical"}).make_inputs()
    for name in ("x", "dt", "B", "C"):
        assert not getattr(views, name).is_contiguous(), f"{name} should be a non-contiguous view"
        assert torch.equal(getattr(views, name), getattr(plain, name)), f"{name} values differ from typical"


@pytest.mark.parametrize("field,value,message", [
    ("ngroups", 3, "ngroups=3 must divide nheads=4"),
    ("dtype", "int8", "ProblemSpec.dtype must be one of"),
    ("regime", "calm", "ProblemSpec.regime must be one of"),
    ("seqlen", 0, "ProblemSpec.seqlen must be an int >= 1; got 0"),
    ("seed", 1.5, r"ProblemSpec.seed must be an int >= 0 \(torch.manual_seed's\); got 1.5"),
    ("seed", "0", "ProblemSpec.seed must be an int >= 0"),
    ("with_D", "no", "ProblemSpec.with_D must be True or False; got 'no'"),
    ("with_initial_state", 2, "ProblemSpec.with_initial_state must be True or False; got 2"),
])
def test_problem_spec_rejects_bad_fields(field: str, value: object, message: str) -> None:
    fields = dict(batch=1, seqlen=8, nheads=4, headdim=8, ngroups=1, dstate=8, chunk_size=16)
    fields[field] = value
    with pytest.raises(ValueError, match=message):
        ProblemSpec(**fields)


# --- the input check -----------------------------------------------------------------------------------

def _good() -> dict[str, object]:
    x, dt, A, B, C, D, h0 = ProblemSpec(batch=2, seqlen=10, nheads=4, headdim=8, ngroups=2, dstate=16,
                                        chunk_size=16, dtype="bf16", seed=0,
                                        with_initial_state=True).make_inputs().as_args()
    return dict(x=x, dt=dt, A=A, B=B, C=C, D=D, initial_state=h0)


BAD_INPUTS = [
    # (id, change to the good inputs, extra check_inputs options, error type, words the message must hold)
    ("x_not_a_tensor", lambda a: a.update(x=[1.0]), {}, TypeError, ["x must be a torch.Tensor", "list"]),
    ("x_3d", lambda a: a.update(x=a["x"][0]), {}, ValueError, ["x must be 4-D", "3-D"]),
    ("x_integer", lambda a: a.update(x=a["x"].to(torch.int32)), {}, TypeError, ["x has dtype int32", "bf16"]),
    ("x_empty", lambda a: a.update(x=a["x"][:, :0]), {}, ValueError, ["x has shape (2, 0, 4, 8)", ">= 1"]),
    ("dt_wrong_shape", lambda a: a.update(dt=a["dt"][:, :5]), {}, ValueError, ["dt has shape (2, 5, 4)", "(2, 10, 4)"]),
    ("dt_bf16", lambda a: a.update(dt=a["dt"].bfloat16()), {}, TypeError, ["dt has dtype bf16", "fp32"]),
    ("A_per_group", lambda a: a.update(A=a["A"][:2]), {}, ValueError, ["A has shape (2,)", "(4,)"]),
    ("A_fp16", lambda a: a.update(A=a["A"].half()), {}, TypeError, ["A has dtype fp16", "fp32"]),
    ("B_wrong_batch", lambda a: a.update(B=a["B"][:1]), {}, ValueError, ["B has shape (1, 10, 2, 16)", "batch=2"]),
    ("B_3d", lambda a: a.update(B=a["B"][0]), {}, ValueError, ["B must be 4-D", "3-D"]),
    ("ngroups_not_dividing", lambda a: a.update(B=torch.zeros(2, 10, 3, 16, dtype=torch.bfloat16),
                                                C=torch.zeros(2, 10, 3, 16, dtype=torch.bfloat16)),
     {}, ValueError, ["ngroups=3", "does not divide nheads=4"]),
    ("C_other_dstate", lambda a: a.update(C=a["C"][..., :8]), {}, ValueError, ["C has shape (2, 10, 2, 8)", "B"]),
    ("C_dtype_differs", lambda a: a.update(C=a["C"].float()), {}, TypeError, ["C has dtype fp32", "x's dtype bf16"]),
    ("D_per_channel", lambda a: a.update(D=torch.zeros(4, 8)), {}, ValueError, ["D has shape (4, 8)", "(4,)"]),
    ("D_fp64", lambda a: a.update(D=a["D"].double()), {}, TypeError, ["D has dtype fp64", "fp32"]),
    ("initial_state_transposed", lambda a: a.update(initial_state=a["initial_state"].transpose(-1, -2)), {},
     ValueError, ["initial_state has shape (2, 4, 16, 8)", "(2, 4, 8, 16)"]),
    ("initial_state_bf16", lambda a: a.update(initial_state=a["initial_state"].bfloat16()), {},
     TypeError, ["initial_state has dtype bf16", "fp32"]),
    ("chunk_size_zero", lambda a: None, {"chunk_size": 0}, ValueError, ["chunk_size must be >= 1; got 0"]),
    ("chunk_size_float", lambda a: None, {"chunk_size": 64.0}, TypeError, ["chunk_size must be an int", "float"]),
    ("chunk_size_bool", lambda a: None, {"chunk_size": True}, TypeError, ["chunk_size must be an int", "bool"]),
    ("chunk_size_unsupported", lambda a: None, {"chunk_size": 96, "chunk_sizes": (64, 128, 256)},
     ValueError, ["chunk_size=96 is not supported", "[64, 128, 256]"]),
    ("mixed_devices", lambda a: a.update(D=a["D"].to("meta")), {}, ValueError, ["one device", "D on meta"]),
    ("cpu_for_a_gpu_kernel", lambda a: None, {"require_cuda": True}, ValueError, ["x is on cpu", "CUDA"]),
    ("last_dim_strided", lambda a: a.update(x=a["x"].transpose(-1, -2).contiguous().transpose(-1, -2)),
     {"unit_stride_last_dim": True}, ValueError, ["x has strides", "stride 1 in its last dimension"]),
    ("domain_unknown", lambda a: None, {"domain": "positive"}, ValueError, ["domain must be 'mamba' or 'any'"]),
    # Outside Mamba's parameterisation (reference.checks.check_domain): a DomainError, a ValueError.
    ("A_positive", lambda a: a["A"].__setitem__(2, 0.25), {}, DomainError,
     ["A has 1 of 4 entries > 0 (first: A[2] = 0.25)", "expected A <= 0 (Mamba's A = -exp(A_log))"]),
    ("dt_negative", lambda a: a["dt"].__setitem__((1, 7, 3), -0.5), {}, DomainError,
     ["dt has 1 of 80 entries < 0 (first: dt[1, 7, 3] = -0.5)", "expected dt >= 0 (Mamba's dt = softplus("]),
    ("dt_nan", lambda a: a["dt"].__setitem__((0, 3, 1), float("nan")), {}, DomainError,
     ["dt has 1 of 80 entries not finite (first: dt[0, 3, 1] = nan)", "expected finite dt >= 0"]),
    ("dt_inf_and_negative", lambda a: (a["dt"].__setitem__((0, 0, 0), -1.0), a["dt"].__setitem__((1, 0, 0), math.inf)),
     {}, DomainError, ["dt has 2 of 80 entries < 0 or not finite (first: dt[0, 0, 0] = -1)", "expected finite dt"]),
    ("A_minus_inf", lambda a: a["A"].__setitem__(0, -math.inf), {}, DomainError,
     ["A has 1 of 4 entries not finite (first: A[0] = -inf)", "expected finite A <= 0"]),
    # Each finite, their product not in fp32: the kernels' chunk sums of A·dt would be Inf, their differences NaN.
    ("A_dt_past_fp32", lambda a: (a["A"].__setitem__(1, -3e38), a["dt"].__setitem__((0, 2, 0), 10.0)), {}, DomainError,
     ["|A|·dt reaches 3e+39 (the largest |A|, 3e+38, times the largest dt, 10); expected at most 1e+30"]),
    ("A_positive_on_a_gpu_kernel", lambda a: a["A"].__setitem__(3, 2.0), {"require_cuda": True}, DomainError,
     ["A has 1 of 4 entries > 0 (first: A[3] = 2)"]),  # the values first: the same refusal on any device
]


@pytest.mark.parametrize("change,options,error,words", [c[1:] for c in BAD_INPUTS], ids=[c[0] for c in BAD_INPUTS])
def test_bad_input_gets_a_clear_error(change, options, error, words) -> None:
    args = _good()
    change(args)
    kwargs = {"chunk_size": 16, "who": "ssd_fwd_test", **options}
    with pytest.raises(error) as info:
        check_inputs(**args, **kwargs)
    message = str(info.value)
    assert message.startswith("ssd_fwd_test: "), f"message does not name the entry point: {message!r}"
    for word in words:
        assert word in message, f"message {message!r} lacks {word!r}"


@pytest.mark.parametrize("fn", [ssd_recurrent, ssd_chunked], ids=["recurrent", "chunked"])
def test_references_run_the_input_check(fn) -> None:
    args = _good()
    args["dt"] = args["dt"][:, :3]
    with pytest.raises(ValueError, match=r"dt has shape \(2, 3, 4\)"):
        fn(**args)


# What each kernel entry point passes to check_inputs (kernels/*/api.py), and so the refusal it raises.
KERNEL_CALLS = {"ssd_fwd_cutile": {"chunk_sizes": (64, 128, 256), "require_cuda": True},
                "ssd_fwd_tilegym": {"require_cuda": True}, "ssd_fwd_triton": {}}


@pytest.mark.parametrize("who", sorted(KERNEL_CALLS))
def test_every_kernel_entry_point_refuses_A_positive_and_dt_negative(who: str) -> None:
    """The message format of docs/design.md, "Input contract": the entry point, the argument, how many entries
    are out of range, the first one and its value, and what is expected."""
    x, dt, A, B, C, D, h0 = (t.clone() for t in _good().values())
    A = torch.tensor([-1.0, -2.0, 0.5, 1.5])
    with pytest.raises(DomainError) as info:
        check_inputs(x, dt, A, B, C, D, h0, chunk_size=64, who=who, **KERNEL_CALLS[who])
    assert str(info.value) == (f"{who}: A has 2 of 4 entries > 0 (first: A[2] = 0.5); "
                               "expected A <= 0 (Mamba's A = -exp(A_log))")
    dt[0, 9, 1] = -0.125
    with pytest.raises(DomainError) as info:
        check_inputs(x, dt, A.neg(), B, C, D, h0, chunk_size=64, who=who, **KERNEL_CALLS[who])
    assert str(info.value) == (f"{who}: dt has 1 of 80 entries < 0 (first: dt[0, 9, 1] = -0.125); "
                               "expected dt >= 0 (Mamba's dt = softplus(dt + dt_bias), clamped)")


@pytest.mark.parametrize("reference", [ssd_recurrent, ssd_chunked], ids=["recurrent", "chunked"])
def test_the_references_take_any_real_A_and_dt_and_the_default_domain_is_mambas(reference) -> None:
    args = _good()
    args["A"][0], args["dt"][1, 2, 3] = 3.0, -3.0
    y, state = reference(**args, chunk_size=16) if reference is ssd_chunked else reference(**args)
    assert torch.isfinite(y).all() and torch.isfinite(state).all()
    with pytest.raises(DomainError, match=r"^ssd_fwd_any: dt has 1 of 80 entries < 0"):  # dt first, as in the signature
        check_inputs(**args, chunk_size=16, who="ssd_fwd_any")


def test_domain_checked_skips_the_check_only_for_the_same_unmodified_tensors(monkeypatch) -> None:
    args = _good()
    calls = []
    real = checks.check_domain
    monkeypatch.setattr(checks, "check_domain", lambda dt, A, *, who: calls.append(who) or real(dt, A, who=who))
    with domain_checked(args["dt"], args["A"], who="bench"):
        check_inputs(**args, chunk_size=16, who="ssd_fwd_a")      # the same tensors: skipped
        other = {**args, "dt": args["dt"].clone()}
        check_inputs(**other, chunk_size=16, who="ssd_fwd_b")     # another dt: checked
        args["dt"][0, 0, 0] = -1.0                                # modified in place: checked, and refused
        with pytest.raises(DomainError, match=r"^ssd_fwd_c: dt has 1 of 80 entries < 0"):
            check_inputs(**args, chunk_size=16, who="ssd_fwd_c")
    args["dt"][0, 0, 0] = 0.5
    check_inputs(**args, chunk_size=16, who="ssd_fwd_d")          # after the block: checked
    assert calls == ["bench", "ssd_fwd_b", "ssd_fwd_c", "ssd_fwd_d"]


def test_domain_checked_blocks_nest_and_vouch_for_both_inputs(monkeypatch) -> None:
    first, second = _good(), _good()
    calls = []
    real = checks.check_domain
    monkeypatch.setattr(checks, "check_domain", lambda dt, A, *, who: calls.append(who) or real(dt, A, who=who))
    with domain_checked(first["dt"], first["A"], who="one"), domain_checked(second["dt"], second["A"], who="two"):
        check_inputs(**first, chunk_size=16, who="ssd_fwd_a")     # vouched for by the outer block
        check_inputs(**second, chunk_size=16, who="ssd_fwd_b")    # and by the inner one
    check_inputs(**first, chunk_size=16, who="ssd_fwd_c")         # after both: checked
    assert calls == ["one", "two", "ssd_fwd_c"]


def test_meta_tensors_pass_the_domain_check() -> None:
    """Plans and compiles run on meta tensors, which hold no values: nothing to refuse."""
    args = {k: v.to("meta") for k, v in _good().items()}
    assert tuple(check_inputs(**args, chunk_size=16, who="ssd_fwd_test")) == (2, 10, 4, 8, 2, 16)
