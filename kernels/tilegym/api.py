"""``ssd_fwd_tilegym``: the common SSD forward signature over TileGym's ``mamba2_chunk_forward``.

NVIDIA's published cuTile code (tilegym 1.5.1), measured beside ours as a peer and never used by
it. What it cannot take is refused with the common clear error, never passed on to give a wrong
answer: seqlen must be a multiple of chunk_size (TileGym has no ragged tail), the sizes must be
those its autotune spaces, tiles and grids need (``LIMITS.requirements``), and it needs a CUDA
device. D=None is passed as zeros and initial_state=None as a zero state, which is what they mean
(:func:`explicit_args`).
Its chunk-entry states are kept in the dtype of C (bf16 for bf16 inputs), a precision choice of its
own that the tolerance table accounts for.

``tilegym.ops.cutile.mamba2`` initialises CUDA when imported, so it is imported on the first call
(:func:`mamba2_module`).
Its autotune (``exhaustive_search``, about 5 minutes per new shape on an H200) runs on the first call
of each shape unless ``TILEGYM_DISABLE_AUTOTUNE=1``, and is cached in the process (the benchmark keeps
its choices on disk: ``validation.bench.tilegym_tuning``).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import warnings
from types import ModuleType

import torch
from torch import Tensor

from reference.checks import (
    CHUNK_SIZE,
    FLOAT_DTYPES,
    Limits,
    Requirement,
    check_inputs,
    check_requirements,
    dtype_name,
    is_power_of_two,
)

__all__ = ["LIMITS", "explicit_args", "launch_names", "mamba2_module", "ssd_fwd_tilegym", "tilegym_version"]


# What mamba2_chunk_forward's code needs (tilegym 1.5.1, tilegym/ops/cutile/mamba2.py; its forward path only:
# _chunk_cumsum, _fwd_pass_state, _compute_out). Outside these it raises "Unsupported Mamba shape: autotune search
# space is empty" (lines 1436-1438, 1498-1499, 1559-1560; autotune off too: it takes the space's first entry), fails
# to compile a tile that is not a power of two, or launches a grid CUDA refuses.
_REQUIREMENTS = (
    Requirement(("nheads",), lambda nheads: nheads % 4 == 0, "nheads a multiple of 4",
                "TileGym's chunk cumsum tiles heads by BLOCK_H in (4, 8, 16), which must divide nheads: mamba2.py "
                "lines 640-644"),
    Requirement(("dstate",), lambda dstate: dstate % 16 == 0, "dstate a multiple of 16",
                "TileGym's state pass and output tile dstate by BLOCK_STATE in (16, 32, 64) and (16, ..., 128), "
                "which must divide dstate: mamba2.py lines 652-654, 678-680, 697-699"),
    Requirement(("headdim",), lambda headdim: headdim % 64 == 0 or (headdim < 64 and is_power_of_two(headdim)),
                "headdim a power of two up to 64, or a multiple of 64",
                "TileGym tiles headdim by BLOCK_HEAD = min(64, headdim), which must divide headdim (mamba2.py lines "
                "655-657, 675-677, 694-696) and, as a tile's dimension (x's (chunk_size, BLOCK_HEAD) tile, lines "
                "898-904), be a power of two"),
    Requirement(("chunk_size",), is_power_of_two, "chunk_size a power of two",
                "TileGym's kernels take chunk_size as a tile's dimension, which must be a power of two: mamba2.py "
                "lines 44, 811"),
    Requirement(("batch", "nheads"), lambda batch, nheads: batch * nheads <= 65535, "batch * nheads at most 65535",
                "TileGym's state pass launches one program per (batch, head) along gridDim.z, whose CUDA limit is "
                "65535: mamba2.py lines 1484-1485"),
)

# No ragged last chunk (mamba2.py lines 1392-1394); a CUDA device; the requirements above.
LIMITS = Limits(needs_cuda=True, dtypes=tuple(dtype_name(d) for d in FLOAT_DTYPES), ragged=False,
                requirements=_REQUIREMENTS)


def launch_names(chunk_size: int) -> tuple[str, ...]:
    """The cuTile kernels one call of ``mamba2_chunk_forward`` launches, in order (tilegym 1.5.1, mamba2.py lines
    1918-1933: ``_chunk_cumsum``, ``_fwd_pass_state``, ``_compute_out``, which takes its swapped kernel at chunk 64,
    line 1518). Beside them the wrapper's zero-fills for D and the initial state, where it makes them
    (``explicit_args``), run as torch's own kernels."""
    return ("chunk_cumsum_kernel", "fwd_pass_state_kernel",
            "compute_out_swap_kernel" if chunk_size == 64 else "compute_out_kernel")


def tilegym_version() -> str:
    try:
        return importlib.metadata.version("tilegym")
    except importlib.metadata.PackageNotFoundError:
        raise ImportError("tilegym is not installed; pip install -c constraints.txt --no-deps tilegym") from None


# Importing tilegym probes its TileCpp backend, C++ kernels this suite never calls, and where no nvcc >= 13.3 is on
# PATH (any machine but the container) warns once a process "TileCpp backend is not available: nvcc >= 13.3 is
# required": a line in the log of every process that runs TileGym's cuTile forward, about a backend it does not use.
TILECPP_PROBE = "TileCpp backend is not available"


def mamba2_module() -> ModuleType:
    """TileGym's ``tilegym.ops.cutile.mamba2``, the cuTile code measured here, imported without the warning of the
    TileCpp probe (``TILECPP_PROBE``); every other warning of the import goes through."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=TILECPP_PROBE, category=UserWarning)
        return importlib.import_module("tilegym.ops.cutile.mamba2")


def ssd_fwd_tilegym(x: Tensor, dt: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Tensor | None = None,
                    initial_state: Tensor | None = None, chunk_size: int = CHUNK_SIZE) -> tuple[Tensor, Tensor]:
    """TileGym's cuTile forward. Returns y (x's dtype) and final_state (fp32)."""
    dims = check_inputs(x, dt, A, B, C, D, initial_state, chunk_size=chunk_size, who="ssd_fwd_tilegym",
                        require_cuda=LIMITS.needs_cuda)
    if not LIMITS.ragged and dims.seqlen % chunk_size:
        raise ValueError(f"ssd_fwd_tilegym: x has seqlen={dims.seqlen}; expected a multiple of chunk_size={chunk_size}"
                         " (TileGym's mamba2_chunk_forward has no ragged last chunk)")
    check_requirements(LIMITS, dims, chunk_size, who="ssd_fwd_tilegym")
    tilegym_version()
    mamba2_chunk_forward = mamba2_module().mamba2_chunk_forward
    x, dt, A, B, C, D, initial_state = explicit_args(x, dt, A, B, C, D, initial_state)
    y, final_state = mamba2_chunk_forward(x, A, B, C, D, dt, initial_state, chunk_size=chunk_size)
    return y, final_state.float()


def explicit_args(x: Tensor, dt: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Tensor | None = None,
                  initial_state: Tensor | None = None) -> tuple[Tensor, ...]:
    """The common signature's arguments as TileGym's ``mamba2_chunk_forward`` needs them, which has no "none": D=None
    as zeros (nheads,) and initial_state=None as a zero state (batch, nheads, headdim, dstate), both fp32 on x's
    device; the tensors given are returned as they are. ``ssd_fwd_tilegym`` makes the zeros on every call (two
    torch fill kernels, 1-2 us on an H200); the benchmark calls this once per case and times TileGym on what it
    returns, as a caller of TileGym's API holds its zero state, so that the fills this adapter adds are not counted
    as TileGym's kernel time (TileGym only reads both: its final state is a new tensor)."""
    batch, _, nheads, headdim = x.shape
    dstate = B.shape[-1]
    if D is None:
        D = torch.zeros(nheads, dtype=torch.float32, device=x.device)
    if initial_state is None:
        initial_state = torch.zeros(batch, nheads, headdim, dstate, dtype=torch.float32, device=x.device)
    return x, dt, A, B, C, D, initial_state
