"""What the three stages share: a planned launch, kernel variants, the int64 decision, and the decays' exp2."""

from __future__ import annotations

import functools
import inspect
import math
import types
import typing
from dataclasses import dataclass

import cuda.tile as ct
import torch

LOG2E = math.log2(math.e)


def exp2(x):
    """2**x in a kernel, for every decay (x <= 0): results below 2**-126 flush to zero, as do subnormal inputs.

    Such a decay weighs its term by less than 1.2e-38, far below what the outputs' dtypes resolve. On sm_90 it costs
    one MUFU.EX2 instead of five instructions (the scaling that keeps subnormal results): chunk_out, which takes
    BLOCK_M**2 of them a program, went from 120.1 to 109.3 us at 16384 tokens and dstate 128 on the H200, with every
    error of the correctness and stability suites unchanged to the last bit (reports/published/, the run of
    2026-12-02 09:47).
    """
    return ct.exp2(x, flush_to_zero=True)


def latency_hint(hint):
    """A load's latency hint from a configuration's integer, in a kernel: 0 leaves the choice to the compiler (None)."""
    return ct.static_eval(hint if hint > 0 else None)


def exp2_decay(x):
    """exp2(min(x, 0)): a decay whose exponent is <= 0 in exact arithmetic (a difference of in-chunk cumsums),
    clamped so that the cumsum's rounding, an ulp of |g| and huge when |g| is, can never make it grow."""
    return exp2(ct.minimum(x, 0.0))


# Rows of the stacked per-token buffer (chunk_cumsum's ``stacked``): tile 0 of two rows is (w, g), what a walk reading
# the weights needs of a chunk, and tile 1 is (g, dt), what chunk_out and a walk weighing its chunks need.
STACK_ROWS = 4


def stacked_pair(g, b, head, index, SIZE, SECOND, latency=None):
    """Two per-token rows of SIZE tokens at tile ``index`` from the stacked buffer ``g`` (batch, nheads, 4, tokens) in
    one load: (g, dt) with SECOND, else (g, w); each (1, SIZE)."""
    pair = ct.load(g, (b, head, 1 if SECOND else 0, index), shape=(1, 1, 2, SIZE), padding_mode=ct.PaddingMode.ZERO,
                   latency=latency).reshape((2, SIZE))
    first, second = ct.extract(pair, (0, 0), shape=(1, SIZE)), ct.extract(pair, (1, 0), shape=(1, SIZE))
    return (first, second) if SECOND else (second, first)


def chunk_scalars(g, dt, b, head, chunk, CHUNK, RAW, latency=None, G_LAST=False, STACKED=False, PRE_WEIGHTS=False):
    """One head's chunk of per-token scalars, (CHUNK,) each: its cumsum g of A dt in log2 units and dt, zero past
    the sequence's end (so g stays at the last real token's value through a ragged tail).

    Read from chunk_cumsum's head-major (batch, nheads, nchunks * CHUNK) buffers ``g`` and ``dt``; or with RAW (no
    cumsum launch) summed here from the caller's dt (batch, seqlen, nheads), passed as ``dt``, and A (nheads,), passed
    as ``g``: the same products, A log2(e) times dt, as chunk_cumsum's, summed along the chunk."""
    if RAW:
        dtc = ct.load(dt, (b, chunk, head), shape=(1, CHUNK, 1), padding_mode=ct.PaddingMode.ZERO,
                      latency=latency).reshape((CHUNK,))
        a = ct.load(g, (head,), shape=(1,)) * LOG2E
        return ct.cumsum(dtc * a, axis=0), dtc
    if STACKED:
        # One load for both rows: (g, w) for a walk reading the weights, else (g, dt).
        gc, dtc = stacked_pair(g, b, head, chunk, CHUNK, not PRE_WEIGHTS, latency)
        return gc.reshape((CHUNK,)), dtc.reshape((CHUNK,))
    if G_LAST:
        # The chunk's last cumsum alone: one element, not the chunk's row.
        gc = ct.load(g, (b, head, chunk * CHUNK + CHUNK - 1), shape=(1, 1, 1), padding_mode=ct.PaddingMode.ZERO,
                     latency=latency).reshape((1,))
    else:
        gc = ct.load(g, (b, head, chunk), shape=(1, 1, CHUNK), padding_mode=ct.PaddingMode.ZERO,
                     latency=latency).reshape((CHUNK,))
    dtc = ct.load(dt, (b, head, chunk), shape=(1, 1, CHUNK), padding_mode=ct.PaddingMode.ZERO,
                  latency=latency).reshape((CHUNK,))
    return gc, dtc


def chunk_count(x, g, CHUNK, RAW, STACKED=False):
    """The chunks of a kernel's sequence (or part), int32: from the cumsum buffer's length, or with RAW (no cumsum
    buffer) from x's tokens."""
    if RAW:
        return (ct.astype(x.shape[1], ct.int32) + CHUNK - 1) // CHUNK
    if STACKED:
        return ct.astype(g.shape[3], ct.int32) // CHUNK
    return ct.astype(g.shape[2], ct.int32) // CHUNK


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
    return any(_past_int32(tuple(t.shape), t.stride()) for t in tensors)


@functools.lru_cache(maxsize=4096)
def _past_int32(shape: tuple[int, ...], stride: tuple[int, ...]) -> bool:
    # Cached by layout: the forward plans the same few layouts on every call.
    span = 1 + sum((n - 1) * s for n, s in zip(shape, stride, strict=True))
    return span >= _INT32_SPAN or math.prod(shape) >= _INT32_SPAN


def int32_parts(n: int, elems_per_item: int) -> list[tuple[int, int]]:
    """[start, stop) ranges that split ``n`` items, ``elems_per_item`` elements each, into as few balanced parts as
    keep each part under the int32 span: one part, (0, n), when the whole fits.

    A buffer past 2**31 elements needs int64 indexing, which costs a kernel more than its address arithmetic: on
    sm_90 an int64-indexed array's tiles are moved by plain loads and stores instead of the tensor memory
    accelerator (TMA), as the state pass's exported SASS shows. Allocated as separate parts, each indexed with
    int32, they keep it. An item that alone passes the span is not split further: one part, int64 indexed.
    """
    if elems_per_item >= _INT32_SPAN:
        return [(0, n)]
    per_part = max(1, (_INT32_SPAN - 1) // max(1, elems_per_item))
    parts = -(-n // per_part)
    size = -(-n // parts) if parts else n
    return [(start, min(start + size, n)) for start in range(0, n, size)] if n else [(0, 0)]


@functools.cache
def _parameter_names(pyfunc: types.FunctionType) -> tuple[str, ...]:
    return tuple(inspect.signature(pyfunc).parameters)


def wide_params(pyfunc: types.FunctionType, args: tuple, *, everywhere: bool = False) -> frozenset[str]:
    """The names of ``pyfunc``'s array parameters that need int64 indexing for these launch ``args``.

    Only the arrays whose own span passes the int32 range: a 256K-token state buffer of 2**31 elements
    does not make x, B or C pay for 64-bit address arithmetic. ``everywhere`` (an ablation) widens every
    array parameter as soon as one needs it, the way a single index width for the whole kernel would.
    """
    names = _parameter_names(pyfunc)
    wide = frozenset(name for name, arg in zip(names, args, strict=True)
                     if isinstance(arg, torch.Tensor) and needs_int64(arg))
    if everywhere and wide:
        return frozenset(name for name, arg in zip(names, args, strict=True) if isinstance(arg, torch.Tensor))
    return wide


@functools.cache
def kernel_variant(pyfunc: types.FunctionType, *, wide: frozenset[str], occupancy: int | None,
                   worker_warps: int | None = None) -> ct.kernel:
    """The compiled-kernel object for one kernel function, its int64-indexed parameters and occupancy hint.

    Each parameter named in ``wide`` is annotated ``ct.IndexedWithInt64`` on a re-made function (same
    code, same name): its offsets then stay exact past 2**31 elements, at some cost in address
    arithmetic, so it is chosen per launch and per array, only where needed.
    """
    if wide:
        twin = types.FunctionType(pyfunc.__code__, pyfunc.__globals__, pyfunc.__name__,
                                  pyfunc.__defaults__, pyfunc.__closure__)
        hints = typing.get_type_hints(pyfunc, include_extras=True)
        unknown = wide - {name for name, ann in hints.items() if ann is ct.Array}
        if unknown:
            raise ValueError(f"{pyfunc.__name__}: no ct.Array parameter named {sorted(unknown)}")
        twin.__annotations__ = {name: ct.IndexedWithInt64[ann] if name in wide else ann
                                for name, ann in hints.items()}
        twin.__doc__, twin.__module__, twin.__qualname__ = pyfunc.__doc__, pyfunc.__module__, pyfunc.__qualname__
        pyfunc = twin
    return ct.kernel(pyfunc, occupancy=occupancy, num_worker_warps=worker_warps)


def plan_launch(pyfunc: types.FunctionType, grid: tuple[int, ...], args: tuple, *, occupancy: int | None,
                int64_everywhere: bool = False, worker_warps: int | None = None) -> Launch:
    """A planned launch of ``pyfunc`` with int64 indexing on exactly the array arguments that need it."""
    wide = wide_params(pyfunc, args, everywhere=int64_everywhere)
    return Launch(kernel_variant(pyfunc, wide=wide, occupancy=occupancy, worker_warps=worker_warps), grid, args)
