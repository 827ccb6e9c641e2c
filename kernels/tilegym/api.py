"""``ssd_fwd_tilegym``: the common SSD forward signature over TileGym's ``mamba2_chunk_forward``.

NVIDIA's published cuTile code (tilegym 1.5.1), measured beside ours as a peer and never used by
it. What it cannot take is refused with the common clear error, never passed on to give a wrong
answer: seqlen must be a multiple of chunk_size (TileGym has no ragged tail), and it needs a CUDA
device. D=None is passed as zeros and initial_state=None as a zero state, which is what they mean.
Its chunk-entry states are kept in the dtype of C (bf16 for bf16 inputs), a precision choice of its
own that the tolerance table accounts for.

``tilegym.ops.cutile.mamba2`` initialises CUDA when imported, so it is imported on the first call.
Its autotune (``exhaustive_search``, about 5 minutes per new shape on an H200) runs on the first call
of each shape unless ``TILEGYM_DISABLE_AUTOTUNE=1``, and is cached in the process (the benchmark keeps
its choices on disk: ``validation.bench.tilegym_tuning``).
"""

from __future__ import annotations

import importlib.metadata

import torch
from torch import Tensor

from reference.checks import CHUNK_SIZE, FLOAT_DTYPES, Limits, check_inputs, dtype_name

__all__ = ["LIMITS", "ssd_fwd_tilegym", "tilegym_version"]

# No ragged last chunk; a CUDA device.
LIMITS = Limits(needs_cuda=True, dtypes=tuple(dtype_name(d) for d in FLOAT_DTYPES), ragged=False)


def tilegym_version() -> str:
    try:
        return importlib.metadata.version("tilegym")
    except importlib.metadata.PackageNotFoundError:
        raise ImportError("tilegym is not installed; pip install -c constraints.txt --no-deps tilegym") from None


def ssd_fwd_tilegym(x: Tensor, dt: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Tensor | None = None,
                    initial_state: Tensor | None = None, chunk_size: int = CHUNK_SIZE) -> tuple[Tensor, Tensor]:
    """TileGym's cuTile forward. Returns y (x's dtype) and final_state (fp32)."""
    batch, seqlen, nheads, headdim, _, dstate = check_inputs(
        x, dt, A, B, C, D, initial_state, chunk_size=chunk_size, who="ssd_fwd_tilegym",
        require_cuda=LIMITS.needs_cuda)
    if not LIMITS.ragged and seqlen % chunk_size:
        raise ValueError(f"ssd_fwd_tilegym: x has seqlen={seqlen}; expected a multiple of chunk_size={chunk_size}"
                         " (TileGym's mamba2_chunk_forward has no ragged last chunk)")
    tilegym_version()
    from tilegym.ops.cutile.mamba2 import mamba2_chunk_forward

    if D is None:
        D = torch.zeros(nheads, dtype=torch.float32, device=x.device)
    if initial_state is None:
        initial_state = torch.zeros(batch, nheads, headdim, dstate, dtype=torch.float32, device=x.device)
    y, final_state = mamba2_chunk_forward(x, A, B, C, D, dt, initial_state, chunk_size=chunk_size)
    return y, final_state.float()
