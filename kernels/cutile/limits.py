"""What our cuTile forward takes, declared once: ``ssd_fwd_cutile`` refuses the rest, the registry reads it.

Imports no cuda.tile, so that the registry reads it on any machine.
"""

from __future__ import annotations

from reference.checks import FLOAT_DTYPES, Limits, dtype_name

__all__ = ["LIMITS"]

# Power-of-two tiles: headdim 32-128, dstate 16-512, chunk 64-256. Any seqlen >= 1 (a ragged last chunk is
# masked), int64 indexing where an array passes 2**31 elements. Batch runs along gridDim.y or z, whose CUDA
# limit is 65535.
# Not declared here: cuTile's 2**24 - 1 programs along gridDim.x. That axis grows with the tokens times the heads
# (and the headdim and dstate tiles): chunk_out's ceil(seqlen / block_m) * nheads * headdim / block_p, the segmented
# pass's completion nchunks * nheads * headdim / 16 * dstate / min(dstate, 128) (bf16 (1, 2**25, 8, 64), dstate 16,
# chunk 64: 2**24), a walk's segments * nheads * tiles; how many depends on the state pass and tiles chosen, so the
# plan itself is checked, before any launch (kernels.cutile.api.GRID_LIMITS), and the refusal names seqlen and nheads.
LIMITS = Limits(needs_cuda=True, dtypes=tuple(dtype_name(d) for d in FLOAT_DTYPES), chunk_sizes=(64, 128, 256),
                headdims=(32, 64, 128), dstates=(16, 32, 64, 128, 256, 512), max_batch=65535)
