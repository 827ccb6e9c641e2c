"""What our cuTile forward takes, declared once: ``ssd_fwd_cutile`` refuses the rest, the registry reads it.

Imports no cuda.tile, so that the registry reads it on any machine.
"""

from __future__ import annotations

from reference.checks import FLOAT_DTYPES, Limits, dtype_name

__all__ = ["LIMITS"]

# Power-of-two tiles: headdim 32-128, dstate 16-512, chunk 64-256. Any seqlen >= 1 (a ragged last chunk is
# masked), int64 indexing where an array passes 2**31 elements. Batch runs along gridDim.y or z, whose CUDA
# limit is 65535.
LIMITS = Limits(needs_cuda=True, dtypes=tuple(dtype_name(d) for d in FLOAT_DTYPES), chunk_sizes=(64, 128, 256),
                headdims=(32, 64, 128), dstates=(16, 32, 64, 128, 256, 512), max_batch=65535)
