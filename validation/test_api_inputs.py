"""CPU-only checks that our cuTile forward's plans and choosers refuse bad input as the forward does, by name and
before any launch: ``launch_names`` and ``plan_forward`` (meta tensors), the ``configs`` a caller passes, the grids
cuTile and CUDA cap, tensors that require grad, and ``tuning.choose``'s arguments.

Needs cuda.tile importable (the compile group), hence the marker; no GPU.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools

import pytest
import torch

from kernels.cutile import api as cutile_api
from kernels.cutile import tuning
from kernels.cutile.export import SpecClass, meta_inputs
from reference.checks import SSDDims

pytestmark = pytest.mark.compile


def _args(batch=1, seqlen=64, nheads=4, headdim=64, ngroups=1, dstate=16, dtype=torch.float32, device="cpu",
          D=True, h0=True) -> list:
    """The common signature's seven inputs, zeros (in Mamba's domain)."""
    return [torch.zeros(batch, seqlen, nheads, headdim, dtype=dtype, device=device),
            torch.zeros(batch, seqlen, nheads, device=device), torch.zeros(nheads, device=device),
            torch.zeros(batch, seqlen, ngroups, dstate, dtype=dtype, device=device),
            torch.zeros(batch, seqlen, ngroups, dstate, dtype=dtype, device=device),
            torch.zeros(nheads, device=device) if D else None,
            torch.zeros(batch, nheads, headdim, dstate, device=device) if h0 else None]


def _replace(args: list, i: int, value) -> list:
    return [value if j == i else a for j, a in enumerate(args)]


# (id, the inputs, chunk_size, exception, what the message says). Each refusal comes before check_inputs' device
# check, so that the forward gives it on CPU tensors too.
_REFUSED = [
    ("x-int32", lambda: _replace(_args(), 0, torch.zeros(1, 64, 4, 64, dtype=torch.int32)), 64, TypeError,
     r"x has dtype int32; expected one of bf16, fp16, fp32"),
    ("ngroups-3-of-4-heads", lambda: _args(ngroups=3), 64, ValueError,
     r"B has ngroups=3, which does not divide nheads=4"),
    ("B-of-another-batch", lambda: _replace(_args(), 3, torch.zeros(2, 64, 1, 16)), 64, ValueError,
     r"B has shape \(2, 64, 1, 16\); expected \(batch=1, seqlen=64"),
    ("chunk-3", _args, 3, ValueError, r"chunk_size=3 is not supported; expected one of \[64, 128, 256\]"),
    ("chunk-0", _args, 0, ValueError, r"chunk_size=0 is not supported"),
    ("chunk-negative", _args, -64, ValueError, r"chunk_size=-64 is not supported"),
    ("chunk-huge", _args, 10**12, ValueError, r"chunk_size=1000000000000 is not supported"),
    ("chunk-bool", _args, True, TypeError, r"chunk_size must be an int; got bool True"),
    ("x-3d", lambda: _replace(_args(), 0, torch.zeros(1, 64, 4)), 64, ValueError, r"x must be 4-D"),
    ("x-a-list", lambda: _replace(_args(), 0, [[0.0]]), 64, TypeError, r"x must be a torch.Tensor; got list"),
    ("A-none", lambda: _replace(_args(), 2, None), 64, TypeError, r"A must be a torch.Tensor; got NoneType"),
    ("dt-2d", lambda: _replace(_args(), 1, torch.zeros(1, 64)), 64, ValueError, r"dt has shape \(1, 64\)"),
    ("D-fp16", lambda: _replace(_args(), 5, torch.zeros(4, dtype=torch.float16)), 64, TypeError, r"D has dtype fp16"),
]
_GRAD = ["x", "dt", "A", "B", "C", "D", "initial_state"]


@pytest.mark.parametrize("make,chunk_size,error,message", [case[1:] for case in _REFUSED],
                         ids=[case[0] for case in _REFUSED])
def test_the_plans_refuse_what_the_forward_refuses_with_its_message(make, chunk_size, error, message) -> None:
    """launch_names (the explore tool's and the benchmark's) and plan_forward (on meta tensors) run the forward's
    checks: the same exception and message, not a plan for inputs the forward refuses, nor an IndexError,
    ZeroDivisionError or AttributeError."""
    with pytest.raises(error, match=message) as forward:
        cutile_api.ssd_fwd_cutile(*make(), chunk_size=chunk_size)
    with pytest.raises(error) as named:
        cutile_api.launch_names(*make(), chunk_size=chunk_size, arch="sm_90")
    meta = [t.to("meta") if isinstance(t, torch.Tensor) else t for t in make()]
    with pytest.raises(error) as planned:
        cutile_api.plan_forward(*meta, chunk_size=chunk_size, arch="sm_90")
    assert str(named.value) == str(planned.value) == str(forward.value)


@pytest.mark.parametrize("dims,message", [
    (dict(headdim=48), r"x has headdim=48 \(x.shape\[3\]\); expected one of \[32, 64, 128\]"),
    (dict(dstate=1024), r"B and C have dstate=1024 \(B.shape\[3\]\)"),
    (dict(dstate=24), r"B and C have dstate=24"),
    (dict(batch=65536), r"x has batch=65536 \(x.shape\[0\]\); expected at most 65535")])
def test_the_plans_refuse_what_the_kernels_do_not_tile(dims, message) -> None:
    """What kernels.cutile.LIMITS rules out (check_kernel_limits, the registry's unsupported) is no plan either."""
    meta = _args(**{"device": "meta", **dims})
    with pytest.raises(ValueError, match=message):
        cutile_api.launch_names(*meta, chunk_size=64, arch="sm_90")
    with pytest.raises(ValueError, match=message):
        cutile_api.plan_forward(*meta, chunk_size=64, arch="sm_90")


@pytest.mark.parametrize("name", _GRAD)
def test_tensors_that_require_grad_are_refused_naming_them_before_any_launch(name) -> None:
    """Our forward has no backward, and torch refuses the array interface of a tensor that requires grad: a bare
    RuntimeError at its first launch, after the launches before it. Refused up front, naming the argument."""
    args = _args()
    i = _GRAD.index(name)
    args[i] = args[i].requires_grad_()
    message = rf"ssd_fwd_cutile: {name} requires grad; .*pass {name}\.detach\(\)"
    with pytest.raises(ValueError, match=message):
        cutile_api.ssd_fwd_cutile(*args, chunk_size=64)
    with pytest.raises(ValueError, match=message):
        cutile_api.launch_names(*args, chunk_size=64, arch="sm_90")
    args[i] = args[i].detach()
    assert cutile_api.launch_names(*args, chunk_size=64, arch="sm_90")


@contextlib.contextmanager
def _launches_recorded(monkeypatch: pytest.MonkeyPatch):
    """ssd_fwd_cutile on meta tensors as if on a GPU (sm_90): every ct.launch recorded, none issued."""
    launched: list[str] = []
    monkeypatch.setattr(cutile_api, "LIMITS", dataclasses.replace(cutile_api.LIMITS, needs_cuda=False))
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    monkeypatch.setattr(torch.cuda, "device", lambda device: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: None)
    monkeypatch.setattr(cutile_api.ct, "launch",
                        lambda stream, grid, kernel, args: launched.append(kernel._pyfunc.__name__))
    yield launched


def test_configs_chosen_for_another_headdim_are_refused_before_any_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Configurations chosen for headdim 64 on a problem of headdim 32 planned grids of no program: y and the final
    state returned allocated and never written. Refused, naming configs, the stage, the field and the dimension."""
    args = _args(headdim=32, dtype=torch.bfloat16, device="meta")
    for_64 = tuning.choose("sm_90", SSDDims(1, 64, 4, 64, 1, 16), torch.bfloat16, 64)
    message = (r"ssd_fwd_cutile: configs.state_pass.block_p=64 does not fit the problem's headdim=32 \(x.shape\[3\]\), "
               r"which it tiles; expected a power of two from 1 to 32")
    with pytest.raises(ValueError, match=message):
        cutile_api.plan_forward(*args, chunk_size=64, arch="sm_90", configs=for_64)
    with pytest.raises(ValueError, match=message):
        cutile_api.launch_names(*args, chunk_size=64, arch="sm_90", configs=for_64)
    with _launches_recorded(monkeypatch) as launched, pytest.raises(ValueError, match=message):
        cutile_api.ssd_fwd_cutile_variant("default", configs=for_64)(*args, chunk_size=64)
    assert launched == []


def _with(configs: tuning.Configs, stage: str, **change) -> tuning.Configs:
    return dataclasses.replace(configs, **{stage: dataclasses.replace(getattr(configs, stage), **change)})


@pytest.mark.parametrize("stage,change,message", [
    ("chunk_out", dict(block_m=128), r"configs.chunk_out.block_m=128 does not fit the problem's chunk_size=64"),
    ("chunk_out", dict(block_n=32), r"configs.chunk_out.block_n=32 does not fit the problem's dstate=16 "
                                    r"\(B.shape\[3\]\)"),
    ("segment_apply", dict(block_p=128), r"configs.segment_apply.block_p=128 does not fit the problem's headdim=64"),
    ("segment_scan", dict(block_n=0), r"configs.segment_scan.block_n=0 does not fit"),
    ("state_pass", dict(block_p=48), r"configs.state_pass.block_p=48 does not fit .*a power of two from 1 to 64"),
    ("segment_out", dict(block_p=-64), r"configs.segment_out.block_p=-64 does not fit"),
    ("segment_state", dict(seg_chunks=0), r"configs.segment_state.seg_chunks=0; expected a power of two >= 1"),
    ("chunk_state", dict(block_n=32), r"configs.chunk_state.block_n=32 does not fit the problem's dstate=16"),
    ("segment_scan", dict(step=3), r"configs.segment_scan.step=3; expected a power of two >= 1"),
    ("chunk_cumsum", dict(block_h=0), r"configs.chunk_cumsum.block_h=0; expected a power of two >= 1"),
])
def test_configs_whose_tiles_do_not_fit_are_refused_naming_the_stage_and_field(stage, change, message) -> None:
    args = _args(dtype=torch.bfloat16, device="meta")
    chosen = tuning.choose("sm_90", SSDDims(1, 64, 4, 64, 1, 16), torch.bfloat16, 64)
    with pytest.raises(ValueError, match=message):
        cutile_api.plan_forward(*args, chunk_size=64, arch="sm_90", configs=_with(chosen, stage, **change))


def test_configs_that_are_not_configs_are_a_type_error() -> None:
    args = _args(dtype=torch.bfloat16, device="meta")
    with pytest.raises(TypeError, match=r"configs must be a kernels.cutile.tuning.Configs .*got dict"):
        cutile_api.plan_forward(*args, chunk_size=64, arch="sm_90", configs={})


_SEQLENS = (1, 63, 64, 65, 1000, 4096, 32768, 70000)


def test_every_configuration_the_chooser_returns_fits_its_problem() -> None:
    """The configs check refuses nothing ``tuning.choose`` builds for a problem the forward takes."""
    for arch, batch, nheads, headdim, dstate, chunk, seqlen, dtype in itertools.product(
            ("sm_90", "sm_100", "sm_120"), (1, 4), (1, 3, 8), (32, 64, 128), (16, 32, 64, 128, 256, 512),
            (64, 128, 256), _SEQLENS, (torch.bfloat16, torch.float16, torch.float32)):
        dims = SSDDims(batch, seqlen, nheads, headdim, 1, dstate)
        cutile_api.check_configs(tuning.choose(arch, dims, dtype, chunk), dims, chunk)


@pytest.mark.parametrize("headdim", [32, 64, 128])
@pytest.mark.parametrize("chunk", [64, 128, 256])
def test_the_choosers_configurations_plan_as_given(headdim, chunk) -> None:
    """Passed back as ``configs``, the choosers' configurations pass the check and plan every shape as the default
    does (that ``configs`` is used at all, not the choosers' again, is test_cutile_api's narrowed-config test)."""
    for dstate, seqlen, dtype in itertools.product((16, 64, 128, 512), _SEQLENS, (torch.bfloat16, torch.float32)):
        dims = SSDDims(2, seqlen, 8, headdim, 2, dstate)
        meta = meta_inputs(SpecClass(dims, dtype, chunk, True, False))
        chosen = tuning.choose("sm_90", dims, dtype, chunk)
        cutile_api.check_configs(chosen, dims, chunk)
        given, _, _ = cutile_api.plan_forward(*meta, chunk_size=chunk, arch="sm_90", configs=chosen)
        default, _, _ = cutile_api.plan_forward(*meta, chunk_size=chunk, arch="sm_90")
        assert [(la.kernel, la.grid) for la in given] == [(la.kernel, la.grid) for la in default], (dims, dtype)
        assert all(n >= 1 for la in given for n in la.grid), (dims, dtype)


def test_a_grid_past_cutiles_24_bit_limit_is_refused_naming_seqlen_before_any_launch(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """bf16 (1, 2**25, 8, 64), one group, dstate 16, chunk 64: the default there is the segmented pass, whose
    completion launch has a program per (chunk, head, 16-wide headdim tile): 2**24, one past cuTile's limit
    (ct.launch would say "Grid[0] exceeds 24-bit limit" after three launches). Refused by the plan, naming seqlen
    and nheads; half the sequence plans."""
    small = _args(dtype=torch.bfloat16, device="meta")
    with _launches_recorded(monkeypatch) as launched:  # the stand-in launches what the plan says
        y, _ = cutile_api.ssd_fwd_cutile(*small, chunk_size=64)
    assert launched == cutile_api.launch_names(*small, chunk_size=64, arch="sm_90") and y.shape == small[0].shape
    dims = SSDDims(1, 2**25, 8, 64, 1, 16)
    assert tuning.state_pass_kind("sm_90", dims, torch.bfloat16, 64) == "segmented"
    meta = meta_inputs(SpecClass(dims, torch.bfloat16, 64, False, False))
    message = (r"x has seqlen=33554432 \(x.shape\[1\]\) and nheads=8 \(x.shape\[2\]\).*_segment_apply_kernel would "
               r"launch 16777216 programs along grid axis 0 .*expected 1 to 16777215")
    with pytest.raises(ValueError, match=message):
        cutile_api.plan_forward(*meta, chunk_size=64, arch="sm_90")
    launched.clear()
    with pytest.raises(ValueError, match=message):
        cutile_api.ssd_fwd_cutile(*meta, chunk_size=64)
    assert launched == []
    half = meta_inputs(SpecClass(SSDDims(1, 2**24, 8, 64, 1, 16), torch.bfloat16, 64, False, False))
    launches, _, _ = cutile_api.plan_forward(*half, chunk_size=64, arch="sm_90")
    assert max(la.grid[0] for la in launches) == 2**23


@pytest.mark.parametrize("call", ["choose", "state_pass_kind", "intermediate_traffic"])
@pytest.mark.parametrize("arg,value,error,message", [
    ("chunk_size", 0, ValueError, r"chunk_size must be >= 1; got 0"),
    ("chunk_size", -128, ValueError, r"chunk_size must be >= 1; got -128"),
    ("chunk_size", True, TypeError, r"chunk_size must be an int; got bool True"),
    ("chunk_size", 128.0, TypeError, r"chunk_size must be an int; got float 128.0"),
    ("dtype", torch.int32, TypeError, r"dtype must be one of bf16, fp16, fp32 \(x's dtype\); got torch.int32"),
    ("dtype", torch.float64, TypeError, r"dtype must be one of bf16, fp16, fp32"),
    ("dims", SSDDims(1, 64, 0, 64, 1, 16), ValueError, r"dims.nheads must be >= 1; got 0"),
    ("dims", SSDDims(1, 64.0, 8, 64, 1, 16), TypeError, r"dims.seqlen must be an int; got float 64.0"),
    ("arch", 90, TypeError, r"arch must be a str such as 'sm_90'; got int 90"),
])
def test_the_choosers_refuse_bad_arguments_naming_them(call, arg, value, error, message) -> None:
    """chunk_size 0 was a ZeroDivisionError, -128 a block_m of -128, int32 x taken as fp32."""
    kwargs = {"arch": "sm_90", "dims": SSDDims(1, 64, 8, 64, 1, 16), "dtype": torch.bfloat16, "chunk_size": 128,
              arg: value}
    fn = {"choose": tuning.choose, "state_pass_kind": tuning.state_pass_kind,
          "intermediate_traffic": cutile_api.intermediate_traffic}[call]
    with pytest.raises(error, match=rf"{call}: {message}"):
        fn(**kwargs)
