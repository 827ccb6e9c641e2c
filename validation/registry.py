"""One registry: an implementation's name, its entry point, and what it can take.

Suites parametrize over it. A case an implementation cannot take is recorded ``unsupported`` with
the capability that rules it out; nothing is silently skipped. What each takes is the ``LIMITS`` it
declares beside its forward (``reference.checks.Limits``), read here and stated nowhere else. Entry
points are imported on first use (the limits import no kernel), so the registry imports on any machine.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from kernels.cutile import LIMITS as CUTILE
from kernels.tilegym import LIMITS as TILEGYM
from kernels.triton import LIMITS as TRITON
from reference import ProblemSpec, ssd_recurrent
from reference.checks import REFERENCE_LIMITS, Limits, first_unmet

__all__ = ["IMPLS", "Impl", "ssd_recurrent_any_chunk"]

SSDForward = Callable[..., tuple[torch.Tensor, torch.Tensor]]


@dataclass(frozen=True)
class Impl:
    name: str
    entry: str                          # "module:function"
    limits: Limits                      # what it takes: the implementation's own LIMITS
    matmul: dict[str, str]              # dtype -> precision its matmuls run in (the tolerance key)
    interpreter: bool = False           # Triton under TRITON_INTERPRET=1: CPU machines only, tiny shapes
    notes: tuple[str, ...] = field(default=())
    # "module:function" turning the common signature's None arguments into the tensors the implementation's own API
    # needs, which its adapter would otherwise make on every call; None: it takes them as they are.
    explicit_args: str | None = None

    def load(self) -> SSDForward:
        return _function(self.entry)

    def timed_args(self, args: tuple) -> tuple:
        """The arguments the benchmark times this implementation on: ``args`` (x, dt, A, B, C, D, initial_state)
        with what its adapter would make on every call (TileGym's zero state for initial_state=None) made once
        here, so that a kernel time counts the implementation's kernels and not our adapter's allocations."""
        return tuple(args) if self.explicit_args is None else tuple(_function(self.explicit_args)(*args))

    def not_run_reason(self, *, has_cuda: bool) -> str | None:
        """Why this implementation cannot run on this machine (None: it can)."""
        if self.limits.needs_cuda and not has_cuda:
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
        limits = self.limits
        if spec.dtype not in limits.dtypes:
            return f"{self.name} takes x/B/C in {', '.join(limits.dtypes)}; the case is {spec.dtype}"
        if limits.chunk_sizes is not None and spec.chunk_size not in limits.chunk_sizes:
            return f"{self.name} takes chunk_size in {limits.chunk_sizes}; the case has {spec.chunk_size}"
        if not limits.ragged and spec.seqlen % spec.chunk_size:
            return f"{self.name} needs seqlen a multiple of chunk_size; the case has {spec.seqlen} % {spec.chunk_size}"
        if limits.headdims is not None and spec.headdim not in limits.headdims:
            return f"{self.name} takes headdim in {limits.headdims}; the case has {spec.headdim}"
        if limits.dstates is not None and spec.dstate not in limits.dstates:
            return f"{self.name} takes dstate in {limits.dstates}; the case has {spec.dstate}"
        if limits.max_batch is not None and spec.batch > limits.max_batch:
            return f"{self.name} takes batch up to {limits.max_batch}; the case has {spec.batch}"
        if not limits.int64_indexing and spec.numel_x >= 2**31:
            return f"{self.name} indexes with int32; x has {spec.numel_x} elements (>= 2**31)"
        unmet = first_unmet(limits, spec.shape_dict())
        if unmet is not None:
            requirement, got = unmet
            return f"{self.name} needs {requirement.expected} ({requirement.source}); the case has {got}"
        return None


def _function(entry: str) -> Callable:
    module, function = entry.split(":")
    return getattr(importlib.import_module(module), function)


def ssd_recurrent_any_chunk(x, dt, A, B, C, D=None, initial_state=None, chunk_size: int | None = None):
    """``reference.ssd_recurrent`` under the common signature: it walks token by token and has no chunks, so
    ``chunk_size``, which every caller of a registry entry passes (``validation.matrix``: ``--impl
    reference-recurrent``), is accepted and ignored."""
    return ssd_recurrent(x, dt, A, B, C, D, initial_state)


def _references() -> dict[str, Impl]:
    return {name: Impl(name, entry, REFERENCE_LIMITS, dict.fromkeys(REFERENCE_LIMITS.dtypes, "ieee"))
            for name, entry in (("reference-recurrent", "validation.registry:ssd_recurrent_any_chunk"),
                                ("reference-chunked", "reference:ssd_chunked"))}


_GPU_MATMUL = {"bf16": "bf16", "fp16": "fp16", "fp32": "tf32"}

IMPLS: dict[str, Impl] = {
    "cutile": Impl("cutile", "kernels.cutile:ssd_fwd_cutile", CUTILE, dict(_GPU_MATMUL)),
    "triton": Impl(
        "triton", "kernels.triton:ssd_fwd_triton", TRITON, dict(_GPU_MATMUL),
        notes=("mamba_ssm 2.3.2.post1 indexes with int32 (mamba issue 1015): cases past 2**31 elements run "
               "and are judged, so the suite can catch the corruption",)),
    # The same adapter on a CPU: the interpreter needs no GPU, and its bf16 is refused (unsupported_reason).
    "triton-interpreter": Impl(
        "triton-interpreter", "kernels.triton:ssd_fwd_triton",
        dataclasses.replace(TRITON, needs_cuda=False, dtypes=("fp32", "fp16")),
        {"fp32": "ieee", "fp16": "ieee"}, interpreter=True,
        notes=("mamba_ssm's Triton kernels under TRITON_INTERPRET=1 on a CPU, at tiny shapes; no bf16: the "
               "interpreter's bf16 tl.dot is wrong (https://github.com/triton-lang/triton/issues/11584)",)),
    "tilegym": Impl("tilegym", "kernels.tilegym:ssd_fwd_tilegym", TILEGYM, dict(_GPU_MATMUL),
                    explicit_args="kernels.tilegym:explicit_args"),
    **_references(),
}
