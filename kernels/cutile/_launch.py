"""What the three stages share: a planned launch, kernel variants, and the int64 decision."""

from __future__ import annotations

import functools
import math
import types
import typing
from dataclasses import dataclass

import cuda.tile as ct
import torch

LOG2E = math.log2(math.e)

# cuTile indexes an array with int32 unless its parameter is annotated ct.IndexedWithInt64.
_INT32_SPAN = 2**31


@dataclass(frozen=True)
class Launch:
    """One kernel launch, planned but not issued: ``ct.launch(stream, grid, kernel, args)``."""

    kernel: ct.kernel
    grid: tuple[int, ...]
    args: tuple


def needs_int64(*tensors: torch.Tensor) -> bool:
    """Whether any tensor reaches an element offset or a shape past the int32 range.

    The span (largest reachable offset + 1) covers strided views into a wider buffer as well as
    tensors of more than 2**31 elements.
    """
    for t in tensors:
        span = 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride(), strict=True))
        if span >= _INT32_SPAN or t.numel() >= _INT32_SPAN:
            return True
    return False


@functools.cache
def kernel_variant(pyfunc: types.FunctionType, *, int64: bool, occupancy: int | None) -> ct.kernel:
    """The compiled-kernel object for one kernel function, index width and occupancy hint.

    For int64 the function is re-made with every ``ct.Array`` parameter annotated
    ``ct.IndexedWithInt64`` (same code, same name): offsets then stay exact past 2**31 elements,
    at some cost in address arithmetic, so it is chosen per launch only when needed.
    """
    if int64:
        twin = types.FunctionType(pyfunc.__code__, pyfunc.__globals__, pyfunc.__name__,
                                  pyfunc.__defaults__, pyfunc.__closure__)
        hints = typing.get_type_hints(pyfunc, include_extras=True)
        twin.__annotations__ = {name: ct.IndexedWithInt64[ann] if ann is ct.Array else ann
                                for name, ann in hints.items()}
        twin.__doc__, twin.__module__, twin.__qualname__ = pyfunc.__doc__, pyfunc.__module__, pyfunc.__qualname__
        pyfunc = twin
    return ct.kernel(pyfunc, occupancy=occupancy)
