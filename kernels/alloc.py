"""Output and scratch allocation for every kernel launcher, with a test mode that poisons them.

Launchers allocate through ``empty``. Inside ``poisoned()`` every allocation is filled with NaN
(integers with their dtype's maximum), so an output element a kernel forgets to write, such as a
ragged tail, shows up as a failure instead of as stale memory that happens to look right. Inside
``recorded()`` every allocation is also listed, in order (how a plan learns which buffers it needs).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import torch

__all__ = ["empty", "poisoned", "recorded"]

_poison_depth = 0
_record: ContextVar[list[torch.Tensor] | None] = ContextVar("kernels_alloc_record", default=None)


def empty(shape: tuple[int, ...], *, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    out = torch.empty(shape, dtype=dtype, device=device)
    if _poison_depth:
        out.fill_(float("nan") if dtype.is_floating_point else torch.iinfo(dtype).max)
    listed = _record.get()
    if listed is not None:
        listed.append(out)
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


@contextmanager
def recorded() -> Iterator[list[torch.Tensor]]:
    """List every allocation made through ``empty`` while the block runs (in this thread or task), in order."""
    listed: list[torch.Tensor] = []
    token = _record.set(listed)
    try:
        yield listed
    finally:
        _record.reset(token)
