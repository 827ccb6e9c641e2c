"""A forward's plan, made once per input layout and replayed (kernels.cutile.recipe), launches what a fresh plan does.

On CPU tensors, where a plan allocates real memory: every replayed launch has the fresh plan's kernel, grid and
constants, and every tensor argument the same sizes, strides and dtype, on the very memory of the same input where
the fresh one reads an input, and on a buffer of its own call, shared between arguments exactly as the fresh plan's
buffers are, elsewhere. Needs cuda.tile importable (the compile group), hence the marker; no GPU.
"""

from __future__ import annotations

import pytest
import torch

from kernels import alloc
from kernels.cutile import api as cutile_api
from kernels.cutile.recipe import Ref, layout, meta_like, record
from kernels.cutile.tuning import VARIANTS
from reference.problem import ProblemSpec

pytestmark = pytest.mark.compile


def _inputs(**overrides):
    spec = ProblemSpec(**{"batch": 2, "seqlen": 700, "nheads": 4, "headdim": 32, "ngroups": 2, "dstate": 64,
                          "chunk_size": 64, "dtype": "bf16", **overrides})
    return list(spec.make_inputs("cpu").as_args())


def _fresh(inputs, variant, chunk_size):
    return cutile_api.plan_forward(*inputs, chunk_size=chunk_size, arch="sm_90", variant=VARIANTS[variant])


def _replayed(inputs, variant, chunk_size):
    meta = [meta_like(layout(t)) for t in inputs]
    recipe = record(lambda: _fresh(meta, variant, chunk_size), meta)
    assert recipe is not None
    return recipe.replay(inputs, torch.device("cpu"))


def _tensors(launches, y, final_state):
    return [a for la in launches for a in la.args if isinstance(a, torch.Tensor)] + [y, final_state]


def _storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def _assert_same_plan(fresh, replayed, inputs) -> None:
    (f_launches, *f_out), (r_launches, *r_out) = fresh, replayed
    assert [(la.kernel, la.grid) for la in r_launches] == [(la.kernel, la.grid) for la in f_launches]
    for f, r in zip(f_launches, r_launches, strict=True):
        assert [type(a) for a in r.args] == [type(a) for a in f.args]
        assert [a for a in r.args if not isinstance(a, torch.Tensor)] == [
            a for a in f.args if not isinstance(a, torch.Tensor)]
    input_storages = {_storage(t) for t in inputs if t is not None}
    buffers: dict[int, int] = {}  # a fresh buffer's storage -> the replayed one's
    for f, r in zip(_tensors(f_launches, *f_out), _tensors(r_launches, *r_out), strict=True):
        assert (r.shape, r.stride(), r.dtype) == (f.shape, f.stride(), f.dtype)
        if _storage(f) in input_storages:
            assert r.data_ptr() == f.data_ptr()
            continue
        assert _storage(r) not in input_storages and _storage(r) != _storage(f)
        assert buffers.setdefault(_storage(f), _storage(r)) == _storage(r)
        assert r.data_ptr() - _storage(r) == f.data_ptr() - _storage(f)
    assert len(set(buffers.values())) == len(buffers)


@pytest.mark.parametrize("variant", ["default", "serial-state", "segmented-state", "chunked-state", "fused-out",
                                     "segmented-out", "cb-buffer", "split-diag", "cumsum-in-kernels", "int64-all"])
@pytest.mark.parametrize("optional", ["none", "D and initial state"])
def test_replayed_plan_launches_what_a_fresh_plan_does(variant, optional) -> None:
    inputs = _inputs()
    if optional == "none":
        inputs[5:] = [None, None]
    _assert_same_plan(_fresh(inputs, variant, 64), _replayed(inputs, variant, 64), inputs)


@pytest.mark.parametrize("overrides", [{"seqlen": 4096, "dstate": 128, "chunk_size": 128, "ngroups": 1},
                                       {"seqlen": 300, "dstate": 512, "chunk_size": 256, "headdim": 64},
                                       {"seqlen": 1, "dtype": "fp32"}, {"seqlen": 129, "dtype": "fp16"}],
                         ids=["4096x128", "ragged-chunk256-dstate512", "one-token-fp32", "ragged-fp16"])
def test_replayed_plan_matches_at_other_shapes(overrides) -> None:
    inputs = _inputs(**overrides)
    chunk = overrides.get("chunk_size", 64)
    _assert_same_plan(_fresh(inputs, "default", chunk), _replayed(inputs, "default", chunk), inputs)


def test_replayed_plan_reads_strided_views_in_place() -> None:
    # B and C as slices of one projection, x as a slice of a wider tensor, at offsets: the views' own strides and
    # offsets reach the launches.
    x, dt, A, B, C, D, h0 = _inputs()
    wide = torch.zeros(*x.shape[:3], 2 * x.shape[3], dtype=x.dtype)
    wide[..., 3:3 + x.shape[3]].copy_(x)
    x = wide[..., 3:3 + x.shape[3]]
    xbc = torch.cat([B, C], dim=3)
    B, C = xbc[..., :B.shape[3]], xbc[..., B.shape[3]:]
    inputs = [x, dt, A, B, C, D, h0]
    _assert_same_plan(_fresh(inputs, "default", 64), _replayed(inputs, "default", 64), inputs)


def test_each_replay_allocates_its_own_buffers_and_reads_its_own_inputs() -> None:
    first, second = _inputs(), _inputs()
    meta = [meta_like(layout(t)) for t in first]
    recipe = record(lambda: _fresh(meta, "default", 64), meta)
    (l1, y1, s1), (l2, y2, s2) = recipe.replay(first, torch.device("cpu")), recipe.replay(second, torch.device("cpu"))
    assert _storage(y1) != _storage(y2) and _storage(s1) != _storage(s2)
    assert l1[0].args[0] is first[1] and l2[0].args[0] is second[1]  # the cumsum reads each call's dt


def test_recipe_holds_no_tensor() -> None:
    meta = [meta_like(layout(t)) for t in _inputs()]
    recipe = record(lambda: _fresh(meta, "default", 64), meta)
    args = [a for _, _, launch_args in recipe.launches for a in launch_args]
    assert not any(isinstance(a, torch.Tensor) for a in args)
    assert any(isinstance(a, Ref) and a.view is not None for a in args)  # stand-ins are views of buffers


def test_a_broadcast_input_has_no_recipe_and_is_planned_each_time() -> None:
    # The plan copies a broadcast input (a tile load may not take a zero stride): a tensor computed from an input,
    # which a recipe cannot name.
    x, dt, A, B, C, D, h0 = _inputs()
    B = B[:, :, :1].expand_as(B)
    meta = [meta_like(layout(t)) for t in (x, dt, A, B, C, D, h0)]
    assert record(lambda: _fresh(meta, "default", 64), meta) is None


def test_recorded_lists_allocations_in_order_and_only_inside_the_block() -> None:
    with alloc.recorded() as listed:
        a = alloc.empty((2,), dtype=torch.float32, device=torch.device("meta"))
        b = alloc.empty((3,), dtype=torch.bfloat16, device=torch.device("meta"))
    alloc.empty((4,), dtype=torch.float32, device=torch.device("meta"))
    assert len(listed) == 2 and listed[0] is a and listed[1] is b


def test_plan_past_2pow31_elements_replays_its_parts_on_meta_tensors() -> None:
    # 256K tokens x dstate 512 at batch 4: the chunk states in parts, each walk and chunk_out launch on views of x,
    # B, C and y at the part's tokens.
    meta = {"device": "meta"}
    x = torch.empty(4, 262144, 8, 64, dtype=torch.bfloat16, **meta)
    B = torch.empty(4, 262144, 1, 512, dtype=torch.bfloat16, **meta)
    inputs = [x, torch.empty(4, 262144, 8, **meta), torch.empty(8, **meta), B, torch.empty_like(B), None, None]
    fresh = _fresh(inputs, "default", 128)
    replayed = _replayed(inputs, "default", 128)
    assert len(fresh[0]) > 3
    for f, r in zip(_tensors(fresh[0], *fresh[1:]), _tensors(replayed[0], *replayed[1:]), strict=True):
        assert (r.shape, r.stride(), r.dtype, r.storage_offset()) == (f.shape, f.stride(), f.dtype, f.storage_offset())
