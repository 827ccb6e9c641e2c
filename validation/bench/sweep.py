"""The post's sweep: the lengths, state sizes and fixed point every benchmark tool measures at.

Batch 4, 8 heads, headdim 64, one group, chunk 128, bf16 inputs, typical regime, seed 0, over sequence
lengths 1K-256K and dstate 64-512; the headline shape is 16K tokens at dstate 128.
"""

from __future__ import annotations

import argparse

__all__ = ["DSTATES", "HEADLINE", "POINT", "SEQLENS", "positive_int", "positive_seconds"]

SEQLENS = tuple(2**k for k in range(10, 19))        # 1K .. 256K
DSTATES = (64, 128, 256, 512)
HEADLINE = (16384, 128)
POINT = dict(batch=4, nheads=8, headdim=64, ngroups=1, chunk_size=128, dtype="bf16", regime="typical", seed=0)


def positive_int(text: str) -> int:
    """An argparse type for the tools' lengths, state sizes and repetitions: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1; got {text!r}")
    return value


def positive_seconds(text: str) -> float:
    """An argparse type for a time budget: a finite number of seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0; got {text!r}")
    return value
