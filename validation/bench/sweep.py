"""The post's sweep: the lengths, state sizes and fixed point every benchmark tool measures at.

Batch 4, 8 heads, headdim 64, one group, chunk 128, bf16 inputs, typical regime, seed 0, over sequence
lengths 1K-256K and dstate 64-512; the headline shape is 16K tokens at dstate 128.
"""

from __future__ import annotations

__all__ = ["DSTATES", "HEADLINE", "POINT", "SEQLENS"]

SEQLENS = tuple(2**k for k in range(10, 19))        # 1K .. 256K
DSTATES = (64, 128, 256, 512)
HEADLINE = (16384, 128)
POINT = dict(batch=4, nheads=8, headdim=64, ngroups=1, chunk_size=128, dtype="bf16", regime="typical", seed=0)
