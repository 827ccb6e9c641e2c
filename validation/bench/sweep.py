"""The post's sweep: the lengths, state sizes and fixed point every benchmark tool measures at.

Batch 4, 8 heads, headdim 64, one group, chunk 128, bf16 inputs, typical regime, seed 0, over sequence
lengths 1K-256K and dstate 64-512; the headline shape is 16K tokens at dstate 128.
"""

from __future__ import annotations

import argparse

__all__ = ["DSTATES", "HEADLINE", "MAX_DSTATE", "MAX_SEQLEN", "POINT", "SEQLENS", "dstate_arg", "point_arg",
           "positive_int", "positive_seconds", "seqlen_arg"]

SEQLENS = tuple(2**k for k in range(10, 19))        # 1K .. 256K
DSTATES = (64, 128, 256, 512)
HEADLINE = (16384, 128)
POINT = dict(batch=4, nheads=8, headdim=64, ngroups=1, chunk_size=128, dtype="bf16", regime="typical", seed=0)
# The largest length and state size the tools take. At the point above a token of x is 2048 elements: 2**24 tokens
# are 64 GiB of x in bf16 and 256 GiB of its float64 reference copy, past any GPU's memory (an H200 has 141 GB), and
# far short of where a shape or an index stops fitting int64. At dstate 2**16 the float64 reference's chunk states at
# the headline length (16384 tokens, 128 chunks) are 128 GiB on their own.
MAX_SEQLEN = 2**24
MAX_DSTATE = 2**16


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


def _bounded(text: str, maximum: int, why: str) -> int:
    value = positive_int(text)
    if value > maximum:
        raise argparse.ArgumentTypeError(f"expected an integer from 1 to {maximum} ({why}); got {text!r}")
    return value


def seqlen_arg(text: str) -> int:
    """An argparse type for a sequence length: an integer from 1 to MAX_SEQLEN."""
    return _bounded(text, MAX_SEQLEN, "2**24 tokens: more would not fit a GPU's memory at the sweep's point")


def dstate_arg(text: str) -> int:
    """An argparse type for a state size: an integer from 1 to MAX_DSTATE."""
    return _bounded(text, MAX_DSTATE, "2**16: more would not fit a GPU's memory at the sweep's point")


def point_arg(text: str) -> tuple[int, int]:
    """An argparse type for a point of the sweep, ``SEQLENxDSTATE`` (``16384x128``), each within its bound."""
    try:
        parts = text.lower().split("x")
        if len(parts) != 2:
            raise ValueError(text)
        return seqlen_arg(parts[0]), dstate_arg(parts[1])
    except (ValueError, argparse.ArgumentTypeError):
        raise argparse.ArgumentTypeError(f"expected SEQLENxDSTATE, two integers >= 1 (at most {MAX_SEQLEN} and "
                                         f"{MAX_DSTATE}), e.g. 16384x128; got {text!r}") from None
