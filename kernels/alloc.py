"""Output and scratch allocation for every kernel launcher, with a test mode that poisons them.

Launchers allocate through ``empty``. Inside ``poisoned()`` every allocation is filled with NaN
(integers with their dtype's maximum), so an output element a kernel forgets to write, such as a
ragged tail, shows up as a failure instead of as stale memory that happens to look right.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

__all__ = ["empty", "poisoned"]

_poison_depth = 0


def empty(shape: tuple[int, ...], *, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    out = torch.empty(shape, dtype=dtype, device=device)
    if _poison_depth:
        out.fill_(float("nan") if dtype.is_floating_point else torch.iinfo(dtype).max)
    return out


@contextmanager
def poisoned() -> Iterator[None]:
    """Fill every allocation made by a launcher with NaN while the block runs (test mode)."""
    global _poison_depth
    _poison_depth += 1
    try:
        yield
    finally:
        _poison_depth -= 1
