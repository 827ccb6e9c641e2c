"""A forward's plan made once per input layout and replayed on each call's tensors.

Planning a forward (the choosers, the caller's configurations and the grids checked, the int64 decision per array)
costs the host more than the kernels cost the GPU at short sequences. It reads the inputs' shapes, strides and
dtypes, never their values or addresses: made once on meta tensors of that layout, a plan is kept as a ``Recipe``,
which holds no tensor. It lists the buffers the plan allocates (``kernels.alloc.empty``, in order) and, for every
argument of every launch and for y and the final state, a constant or a reference: to an input or a buffer, whole
or a view of it (sizes, strides and offset). A call allocates the buffers afresh and puts its own inputs in.

A plan that passes any other tensor (one computed from an input, such as the contiguous copy of a broadcast input)
has no recipe: ``record`` returns None, and such calls are planned each time, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from kernels import alloc
from kernels.cutile._launch import Launch

Layout = tuple[tuple[int, ...], tuple[int, ...], torch.dtype] | None


def layout(t: torch.Tensor | None) -> Layout:
    """What a plan reads of an input: its sizes, strides and dtype (None for an absent optional input)."""
    return None if t is None else (tuple(t.shape), t.stride(), t.dtype)


def meta_like(lay: Layout) -> torch.Tensor | None:
    """A meta tensor of that layout (None for None)."""
    return None if lay is None else torch.empty_strided(lay[0], lay[1], dtype=lay[2], device="meta")


@dataclass(frozen=True)
class Ref:
    """A tensor of a plan: root ``root`` (inputs first, then the buffers in allocation order), itself if ``view`` is
    None, else the view (sizes, strides, storage offset from the root's)."""

    root: int
    view: tuple[tuple[int, ...], tuple[int, ...], int] | None = None


@dataclass(frozen=True)
class Recipe:
    buffers: tuple[tuple[tuple[int, ...], torch.dtype], ...]
    launches: tuple[tuple[object, tuple[int, ...], tuple], ...]   # (kernel, grid, args with Refs for tensors)
    outputs: tuple[Ref, ...]

    def replay(self, inputs: Sequence[torch.Tensor | None], device: torch.device) -> tuple:
        """The plan's launches and outputs for these inputs (of the recipe's layout), its buffers allocated on
        ``device``: ``(launches, *outputs)``, as the plan returned them."""
        roots = [*inputs, *(alloc.empty(shape, dtype=dtype, device=device) for shape, dtype in self.buffers)]

        def tensor(ref: Ref) -> torch.Tensor:
            root = roots[ref.root]
            if ref.view is None:
                return root
            size, stride, offset = ref.view
            return root.as_strided(size, stride, root.storage_offset() + offset)

        launches = [Launch(kernel, grid, tuple(tensor(a) if type(a) is Ref else a for a in args))
                    for kernel, grid, args in self.launches]
        return (launches, *(tensor(ref) for ref in self.outputs))


def record(plan: Callable[[], tuple], inputs: Sequence[torch.Tensor | None]) -> Recipe | None:
    """The recipe of ``plan()`` (``(launches, *outputs)``, made on the meta tensors ``inputs``), or None where it
    passes a tensor that is neither an input, nor a buffer it allocated, nor a view of one."""
    with alloc.recorded() as buffers:
        launches, *outputs = plan()
    roots = {id(t): i for i, t in enumerate([*inputs, *buffers]) if t is not None}

    def ref(t: torch.Tensor) -> Ref | None:
        base = t if t._base is None else t._base
        i = roots.get(id(base))
        if i is None:
            return None
        if t is base:
            return Ref(i)
        return Ref(i, (tuple(t.shape), t.stride(), t.storage_offset() - base.storage_offset()))

    steps = []
    for launch in launches:
        args = tuple(ref(a) if isinstance(a, torch.Tensor) else a for a in launch.args)
        if None in args:  # no argument is None but a tensor that has no reference
            return None
        steps.append((launch.kernel, tuple(launch.grid), args))
    out_refs = tuple(ref(t) for t in outputs)
    if None in out_refs:
        return None
    return Recipe(tuple((tuple(b.shape), b.dtype) for b in buffers), tuple(steps), out_refs)
