"""One registry: an implementation's name, its entry point, and what it can take.

Suites parametrize over it. A case an implementation cannot take is recorded ``unsupported`` with
the capability that rules it out; nothing is silently skipped. Entry points are imported on first
use, so the registry itself imports on any machine.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from reference import ProblemSpec

__all__ = ["IMPLS", "Impl"]

SSDForward = Callable[..., tuple[torch.Tensor, torch.Tensor]]


@dataclass(frozen=True)
class Impl:
    name: str
    entry: str                          # "module:function"
    needs_cuda: bool
    dtypes: tuple[str, ...]
    matmul: dict[str, str]              # dtype -> precision its matmuls run in (the tolerance key)
    chunk_sizes: tuple[int, ...] | None = None   # None: any
    ragged: bool = True                 # seqlen need not be a multiple of chunk_size
    headdims: tuple[int, ...] | None = None
    dstates: tuple[int, ...] | None = None
    int64_indexing: bool = True         # tensors past 2**31 elements
    interpreter: bool = False           # Triton under TRITON_INTERPRET=1: CPU machines only, tiny shapes
    notes: tuple[str, ...] = field(default=())

    def load(self) -> SSDForward:
        module, function = self.entry.split(":")
        return getattr(importlib.import_module(module), function)

    def not_run_reason(self, *, has_cuda: bool) -> str | None:
        """Why this implementation cannot run on this machine (None: it can)."""
        if self.needs_cuda and not has_cuda:
            return f"{self.name} needs a CUDA device; torch.cuda.is_available() is False"
        if self.interpreter and has_cuda:
            return (f"{self.name} stands in for the compiled Triton baseline where no GPU is; here the "
                    "compiled baseline (triton) is judged instead")
        return None

    def unsupported_reason(self, spec: ProblemSpec) -> str | None:
        """Why this implementation cannot take ``spec`` (None: it can)."""
        if self.interpreter and spec.dtype == "bf16":
            return (f"{self.name}: the interpreter's bf16 tl.dot is wrong "
                    "(https://github.com/triton-lang/triton/issues/11584); bf16 Triton numerics need a GPU")
        if spec.dtype not in self.dtypes:
            return f"{self.name} takes x/B/C in {', '.join(self.dtypes)}; the case is {spec.dtype}"
        if self.chunk_sizes is not None and spec.chunk_size not in self.chunk_sizes:
            return f"{self.name} takes chunk_size in {self.chunk_sizes}; the case has {spec.chunk_size}"
        if not self.ragged and spec.seqlen % spec.chunk_size:
            return f"{self.name} needs seqlen a multiple of chunk_size; the case has {spec.seqlen} % {spec.chunk_size}"
        if self.headdims is not None and spec.headdim not in self.headdims:
            return f"{self.name} takes headdim in {self.headdims}; the case has {spec.headdim}"
        if self.dstates is not None and spec.dstate not in self.dstates:
            return f"{self.name} takes dstate in {self.dstates}; the case has {spec.dstate}"
        if not self.int64_indexing and spec.numel_x >= 2**31:
            return f"{self.name} indexes with int32; x has {spec.numel_x} elements (>= 2**31)"
        return None


def _references() -> dict[str, Impl]:
    any_dtype = ("bf16", "fp16", "fp32", "fp64")
    return {
        "reference-recurrent": Impl("reference-recurrent", "reference:ssd_recurrent", False, any_dtype,
                                    dict.fromkeys(any_dtype, "ieee")),
        "reference-chunked": Impl("reference-chunked", "reference:ssd_chunked", False, any_dtype,
                                  dict.fromkeys(any_dtype, "ieee")),
    }


IMPLS: dict[str, Impl] = {
    "cutile": Impl(
        "cutile", "kernels.cutile:ssd_fwd_cutile", needs_cuda=True, dtypes=("bf16", "fp16", "fp32"),
        matmul={"bf16": "bf16", "fp16": "fp16", "fp32": "tf32"}, chunk_sizes=(64, 128, 256),
        headdims=(32, 64, 128), dstates=(16, 32, 64, 128, 256, 512)),
    "triton": Impl(
        "triton", "kernels.triton:ssd_fwd_triton", needs_cuda=True, dtypes=("bf16", "fp16", "fp32"),
        matmul={"bf16": "bf16", "fp16": "fp16", "fp32": "tf32"},
        notes=("mamba_ssm 2.3.2.post1 indexes with int32 (mamba issue 1015): cases past 2**31 elements run "
               "and are judged, so the suite can catch the corruption",)),
    "triton-interpreter": Impl(
        "triton-interpreter", "kernels.triton:ssd_fwd_triton", needs_cuda=False, dtypes=("fp32", "fp16"),
        matmul={"fp32": "ieee", "fp16": "ieee"}, interpreter=True,
        notes=("mamba_ssm's Triton kernels under TRITON_INTERPRET=1 on a CPU, at tiny shapes; no bf16: the "
               "interpreter's bf16 tl.dot is wrong (https://github.com/triton-lang/triton/issues/11584)",)),
    "tilegym": Impl(
        "tilegym", "kernels.tilegym:ssd_fwd_tilegym", needs_cuda=True, dtypes=("bf16", "fp16", "fp32"),
        matmul={"bf16": "bf16", "fp16": "fp16", "fp32": "tf32"}, ragged=False),
    **_references(),
}

