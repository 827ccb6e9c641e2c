"""``ssd_fwd_tilegym``: the common SSD forward signature over TileGym's ``mamba2_chunk_forward``.

NVIDIA's published cuTile code (tilegym 1.5.1), measured beside ours as a peer and never used by
it. What it cannot take is refused with the common clear error, never passed on to give a wrong
answer: seqlen must be a multiple of chunk_size (TileGym has no ragged tail), and it needs a CUDA
device. D=None is passed as zeros and initial_state=None as a zero state, which is what they mean.
Its chunk-entry states are kept in the dtype of C (bf16 for bf16 inputs), a precision choice of its
own that the tolerance table accounts for.

``tilegym.ops.cutile.mamba2`` initialises CUDA when imported, so it is imported on the first call.
Its autotune (``exhaustive_search``, about 5 minutes per new shape on an H200) runs on the first call
of each shape unless ``TILEGYM_DISABLE_AUTOTUNE=1``, and is cached in the process. Each call is marked
with its problem (:func:`current_problem`), so that ``validation.bench.tilegym_tuning`` can keep
TileGym's choice per shape on disk.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib.metadata
from collections.abc import Iterator

import torch

from reference.checks import CHUNK_SIZE, check_inputs, dtype_name

__all__ = ["current_problem", "marked_problem", "problem_key", "problem_of", "ssd_fwd_tilegym",
           "tilegym_version"]

_problem: contextvars.ContextVar[str | None] = contextvars.ContextVar("tilegym_problem", default=None)


def problem_key(dtype: str, batch: int, seqlen: int, nheads: int, headdim: int, ngroups: int, dstate: int,
                chunk_size: int, contiguous: bool) -> str:
    """The problem a TileGym tuning choice belongs to (TileGym's own key: its arguments' shapes and strides)."""
    return (f"{dtype} b{batch} l{seqlen} h{nheads} p{headdim} g{ngroups} n{dstate} c{chunk_size}"
            f"{'' if contiguous else ' strided'}")


def problem_of(x: torch.Tensor, dt: torch.Tensor, B: torch.Tensor, C: torch.Tensor, chunk_size: int) -> str:
    """:func:`problem_key` of a call with these (checked) inputs."""
    batch, seqlen, nheads, headdim = x.shape
    ngroups, dstate = B.shape[2], B.shape[3]
    contiguous = all(t.is_contiguous() for t in (x, dt, B, C))
    return problem_key(dtype_name(x.dtype), batch, seqlen, nheads, headdim, ngroups, dstate, chunk_size, contiguous)


def current_problem() -> str | None:
    """The problem of the ``ssd_fwd_tilegym`` call in progress, None outside one."""
    return _problem.get()


@contextlib.contextmanager
def marked_problem(key: str) -> Iterator[None]:
    """TileGym calls inside belong to problem ``key``."""
    token = _problem.set(key)
    try:
        yield
    finally:
        _problem.reset(token)


def tilegym_version() -> str:
    try:
        return importlib.metadata.version("tilegym")
    except importlib.metadata.PackageNotFoundError:
        raise ImportError("tilegym is not installed; pip install -c constraints.txt --no-deps tilegym") from None


def ssd_fwd_tilegym(
    x: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    D: torch.Tensor | None = None,
    initial_state: torch.Tensor | None = None,
    chunk_size: int = CHUNK_SIZE,
) -> tuple[torch.Tensor, torch.Tensor]:
    """TileGym's cuTile forward. Returns y (x's dtype) and final_state (fp32)."""
    batch, seqlen, nheads, headdim, _, dstate = check_inputs(
        x, dt, A, B, C, D, initial_state, chunk_size=chunk_size, who="ssd_fwd_tilegym", require_cuda=True)
    if seqlen % chunk_size:
        raise ValueError(f"ssd_fwd_tilegym: x has seqlen={seqlen}; expected a multiple of chunk_size={chunk_size}"
                         " (TileGym's mamba2_chunk_forward has no ragged last chunk)")
    tilegym_version()
    from tilegym.ops.cutile.mamba2 import mamba2_chunk_forward

    if D is None:
        D = torch.zeros(nheads, dtype=torch.float32, device=x.device)
    if initial_state is None:
        initial_state = torch.zeros(batch, nheads, headdim, dstate, dtype=torch.float32, device=x.device)
    with marked_problem(problem_of(x, dt, B, C, chunk_size)):
        y, final_state = mamba2_chunk_forward(x, A, B, C, D, dt, initial_state, chunk_size=chunk_size)
    return y, final_state.float()
