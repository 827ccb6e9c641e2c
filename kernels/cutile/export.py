"""Ahead-of-time export: the specialization classes we launch, as cuTile kernel signatures.

A class is one problem (dims, dtype, chunk_size, D or not, initial_state or not) planned on the
``meta`` device by the same ``plan_forward`` the API runs: the signatures come from the very
argument tuples a launch would pass, so the compile check builds exactly what the GPU would.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass

import cuda.tile as ct
import torch
from cuda.tile.compilation import ArrayConstraint, CallingConvention, KernelSignature

from kernels.cutile.api import plan_forward
from kernels.cutile.tuning import VARIANTS, Configs, Variant
from reference.checks import SSDDims, dtype_name

_CT_DTYPES = {torch.bfloat16: ct.bfloat16, torch.float16: ct.float16, torch.float32: ct.float32}
# Meta tensors start at address 0; real allocations are at least 256-byte aligned.
_BASE_ALIGN = 16
_DIVISOR_BYTES = 16


@dataclass(frozen=True)
class SpecClass:
    """One problem whose launches we compile; ``dims`` only matter through what they select."""

    dims: SSDDims
    dtype: torch.dtype
    chunk_size: int
    has_D: bool
    has_initial_state: bool

    @property
    def name(self) -> str:
        d = self.dims
        return (f"{dtype_name(self.dtype)}-c{self.chunk_size}-p{d.headdim}-n{d.dstate}-b{d.batch}-l{d.seqlen}"
                f"-h{d.nheads}{'' if self.has_D else '-noD'}{'-h0' if self.has_initial_state else ''}")


def _spec(dtype: torch.dtype, chunk_size: int, headdim: int, dstate: int, *, D: bool, h0: bool,
          batch: int = 2, seqlen: int = 1000, nheads: int = 8, ngroups: int = 2) -> SpecClass:
    return SpecClass(SSDDims(batch, seqlen, nheads, headdim, ngroups, dstate), dtype, chunk_size, D, h0)


_BF16, _FP16, _FP32 = torch.bfloat16, torch.float16, torch.float32
# x of 2**31 elements (batch 1, 2**21 tokens, 16 heads, headdim 64): int64 indexing on x and y where the chunk
# states fit one int32-indexed buffer (fp32 at chunk 256), and the chunk states split in two parts, each walked
# and read on int32-indexed views of x, where they do not (fp16's fp32 states at chunk 128).
_BIG = {"batch": 1, "seqlen": 2**21, "nheads": 16, "ngroups": 1}

# Every dtype x chunk pair once; across them every headdim and dstate, D and initial_state on and
# off, one and several groups, ragged seqlen, int64 indexing, the post's headline shape (bf16,
# chunk 128) and the register-heaviest corner (dstate 512 at chunk 256).
SPEC_CLASSES = (
    _spec(_BF16, 64, 32, 16, D=True, h0=True, seqlen=1001),
    _spec(_BF16, 128, 64, 128, D=True, h0=False, batch=4, seqlen=16384, ngroups=1),
    _spec(_BF16, 256, 128, 512, D=False, h0=True, seqlen=777),
    _spec(_FP16, 64, 64, 32, D=False, h0=False, seqlen=65),
    _spec(_FP16, 128, 64, 128, D=True, h0=False, **_BIG),
    _spec(_FP16, 256, 32, 256, D=True, h0=True, seqlen=300),
    _spec(_FP32, 64, 128, 64, D=True, h0=True, seqlen=37),
    _spec(_FP32, 128, 32, 512, D=False, h0=False),
    _spec(_FP32, 256, 64, 128, D=True, h0=True, **_BIG),
    # The benchmark's 4096 x 64 point: the segmented pass in two segments, no scan, chunk_out writing the final state.
    _spec(_BF16, 128, 64, 64, D=True, h0=False, batch=4, seqlen=4096, ngroups=1),
    # The benchmark's 4096 x 512 point: the swapped walk, two programs an SM, and chunk_out's 64-wide dstate steps.
    _spec(_BF16, 128, 64, 512, D=True, h0=False, batch=4, seqlen=4096, ngroups=1),
)

# sm_100 and sm_103 build a subset that still holds every dtype, every chunk size, int64, and both state passes
# (serial and segmented) for each, and the benchmark's headline, 4096 x 64 and 4096 x 512 points (the B300, sm_103,
# is the post's GPU): the whole list on sm_90 alone already takes ~3 minutes on 2 cores.
CLASSES_BY_ARCH = {
    "sm_90": SPEC_CLASSES,
    "sm_100": (SPEC_CLASSES[1], SPEC_CLASSES[8], SPEC_CLASSES[7], SPEC_CLASSES[9], SPEC_CLASSES[10]),
    "sm_103": (SPEC_CLASSES[3], SPEC_CLASSES[2], SPEC_CLASSES[1], SPEC_CLASSES[9], SPEC_CLASSES[10]),
}


# The opt-in variants whose kernels the default never launches (kernels.cutile.tuning.VARIANTS), exported for sm_90
# at the headline class so that the compile check builds them too: the fused pass's kernels and chunk_out with its
# diagonal block in halves, the serial walk that computes its own chunk-state weights, the walk that applies
# its weights in bf16 (also swapped, at dstate 512), the walk in two segments, chunk_out completing the segmented
# pass's local states, the walk that takes the cumsum itself (no cumsum launch), C·Bᵀ built once per chunk and
# group into a buffer, chunk_out with the causal quarters of its C·Bᵀ block where the default builds it whole
# (dstate 128) and whole where the default takes the quarters (dstate 512), the cumsum's three buffers where the
# default stacks its rows in one (dstate 128), and the chunk states in (headdim, dstate) where the default lays them
# out as the swapped walk carries them (dstate 512).
VARIANT_CLASSES = {"sm_90": ((SPEC_CLASSES[1], "fused-out"), (SPEC_CLASSES[1], "split-diag"),
                             (SPEC_CLASSES[1], "walk-weighs"), (SPEC_CLASSES[1], "packed-weights"),
                             (SPEC_CLASSES[2], "packed-weights"), (SPEC_CLASSES[1], "two-segment-walk"),
                             (SPEC_CLASSES[1], "segmented-out"), (SPEC_CLASSES[1], "cumsum-in-kernels"),
                             (SPEC_CLASSES[1], "cb-buffer"), (SPEC_CLASSES[1], "causal-cb"),
                             (SPEC_CLASSES[10], "full-cb"), (SPEC_CLASSES[1], "unstacked"),
                             (SPEC_CLASSES[10], "states-untransposed"))}


def meta_inputs(spec: SpecClass) -> tuple:
    d = spec.dims
    meta = {"device": "meta"}
    x = torch.empty(d.batch, d.seqlen, d.nheads, d.headdim, dtype=spec.dtype, **meta)
    dt = torch.empty(d.batch, d.seqlen, d.nheads, dtype=torch.float32, **meta)
    A = torch.empty(d.nheads, dtype=torch.float32, **meta)
    B = torch.empty(d.batch, d.seqlen, d.ngroups, d.dstate, dtype=spec.dtype, **meta)
    C = torch.empty_like(B)
    D = torch.empty(d.nheads, dtype=torch.float32, **meta) if spec.has_D else None
    h0 = torch.empty(d.batch, d.nheads, d.headdim, d.dstate, dtype=torch.float32, **meta) \
        if spec.has_initial_state else None
    return x, dt, A, B, C, D, h0


def _constraint(arg: object, index_dtype: ct.DType) -> ArrayConstraint | bool | int:
    """What a launch on this tensor lets the compiler assume, as cuTile's dispatcher derives it from an array:
    every unit stride (not only the last), strides that are whole multiples of 16 bytes, sizes that are multiples
    of 16. Without the two divisibilities an export takes every tile load and store apart into 2-byte accesses,
    which a launch on the GPU does not."""
    if not isinstance(arg, torch.Tensor):
        return arg  # compile-time constant
    per16 = max(1, _DIVISOR_BYTES // arg.element_size())
    return ArrayConstraint(_CT_DTYPES[arg.dtype], arg.dim(), index_dtype=index_dtype,
                           stride_lower_bound_incl=0, alias_groups=(), may_alias_internally=False,
                           stride_constant=tuple(1 if s == 1 else None for s in arg.stride()),
                           base_addr_divisible_by=_BASE_ALIGN,
                           stride_divisible_by=tuple(per16 if s % per16 == 0 else 1 for s in arg.stride()),
                           shape_divisible_by=tuple(_DIVISOR_BYTES if n % _DIVISOR_BYTES == 0 else 1
                                                    for n in arg.shape))


def _wide_params(kernel: ct.kernel) -> frozenset[str]:
    # kernel_variant annotates the int64-indexed ct.Array parameters with ct.IndexedWithInt64.
    hints = typing.get_type_hints(kernel._pyfunc, include_extras=True)
    return frozenset(name for name, ann in hints.items()
                     if typing.get_origin(ann) is typing.Annotated and typing.get_args(ann)[0] is ct.Array)


def launches(arch: str, classes: tuple[SpecClass, ...], variant: Variant = VARIANTS["default"],
             configs: Configs | None = None) -> Iterator[tuple[SpecClass, ct.kernel, KernelSignature]]:
    """(class, kernel object, signature) for every launch of every class, deduplicated; ``configs`` (for every
    class; None: the choosers') as ``plan_forward`` takes them."""
    seen = set()
    for spec in classes:
        planned, _, _ = plan_forward(*meta_inputs(spec), chunk_size=spec.chunk_size, arch=arch, variant=variant,
                                     configs=configs)
        for launch in planned:
            pyfunc: types.FunctionType = launch.kernel._pyfunc
            wide = _wide_params(launch.kernel)
            names = list(inspect.signature(pyfunc).parameters)
            params = [_constraint(a, ct.int64 if name in wide else ct.int32)
                      for name, a in zip(names, launch.args, strict=True)]
            signature = KernelSignature(params, CallingConvention.cutile_python_v1())
            suffix = "".join(f"_i64{names.index(n)}" for n in sorted(wide, key=names.index))
            signature = signature.with_mangled_symbol(pyfunc.__name__ + suffix)
            if (launch.kernel, signature.symbol) not in seen:
                seen.add((launch.kernel, signature.symbol))
                yield spec, launch.kernel, signature
