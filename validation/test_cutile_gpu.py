"""Our cuTile forward against the float64 oracle on a GPU, over every kind of input a user may pass.

Each case runs ``ssd_fwd_cutile`` with every output and scratch buffer poisoned with NaN, judges y and
final_state against float64 with the tolerance table, and adds a record to the correctness results
file (written when the module finishes, also when no GPU is here: then every case is ``not-run``).
"""

from __future__ import annotations

import time

import pytest
import torch

from kernels.alloc import poisoned
from reference import ProblemSpec
from validation.gpu import HAS_CUDA, NO_CUDA_REASON, judge, oracle
from validation.results import ResultsFile

pytestmark = pytest.mark.gpu

IMPL = "cutile"
MATMUL = {"bf16": "bf16", "fp16": "fp16", "fp32": "tf32"}  # fp32 inputs: tf32 matmuls on purpose
BASE = dict(batch=2, seqlen=1009, nheads=8, headdim=64, ngroups=2, dstate=64, chunk_size=128, dtype="bf16",
            regime="typical", seed=0)


def _spec(tag: str, **change: object) -> tuple[str, ProblemSpec]:
    return tag, ProblemSpec(**{**BASE, **change})


def _cases() -> list[tuple[str, ProblemSpec]]:
    cases = [_spec("base")]
    cases += [_spec(f"l{n}_{why}", seqlen=n) for n, why in
              ((1, "single_step"), (63, "one_short_of_chunk"), (127, "one_short_of_chunk"), (128, "one_chunk"),
               (129, "one_past_chunk"), (4096, "many_chunks"))]
    cases += [_spec(f"chunk{c}_{d}", chunk_size=c, dtype=d, dstate=128, seqlen=2 * c + 37)
              for c in (64, 128, 256) for d in ("bf16", "fp16", "fp32")]
    cases += [_spec(f"headdim{p}", headdim=p) for p in (32, 128)]
    cases += [_spec(f"dstate{n}", dstate=n) for n in (16, 32, 128, 256, 512)]
    cases += [_spec(f"dstate512_chunk256_{d}", dstate=512, chunk_size=256, headdim=128, dtype=d, seqlen=700)
              for d in ("bf16", "fp32")]
    cases += [_spec(f"ngroups{g}", ngroups=g) for g in (1, 8)]
    cases += [_spec("no_D", with_D=False),
              _spec("initial_state", with_initial_state=True),
              _spec("initial_state_fp16_no_D", with_initial_state=True, with_D=False, dtype="fp16"),
              _spec("projection_views", regime="projection_views"),
              _spec("projection_views_fp32_ragged", regime="projection_views", dtype="fp32", seqlen=77)]
    # Past 2**31 elements in x (and y): int64 indexing. 2**21 + 1 tokens x 16 heads x 64 > 2**31.
    cases += [_spec("x_past_2pow31_elements", batch=1, seqlen=2**21 + 1, nheads=16, headdim=64, ngroups=1,
                    dstate=16, chunk_size=256)]
    return cases


CASES = _cases()
IDS = [spec.case_id(IMPL, tag) for tag, spec in CASES]
_RESULTS = ResultsFile("correctness")
_OUTCOMES: dict[str, tuple[list[str], dict[str, object]]] = {}


@pytest.fixture(scope="module", autouse=True)
def results_file():
    """Write every case's record once the module is done (not-run records too)."""
    yield
    for (tag, spec), case_id in zip(CASES, IDS, strict=True):
        record = {"id": case_id, "impl": IMPL, "shape": spec.shape_dict(), "dtype": spec.dtype,
                  "regime": spec.regime, "seed": spec.seed, "matmul": MATMUL[spec.dtype], "tag": tag,
                  "with_D": spec.with_D, "with_initial_state": spec.with_initial_state}
        if case_id in _OUTCOMES:
            failures, measured = _OUTCOMES[case_id]
            record.update(measured)
            record["status"] = "fail" if failures else "pass"
            if failures:
                record["reason"] = "; ".join(failures)
        else:
            record["status"] = "not-run"
            record["reason"] = NO_CUDA_REASON if not HAS_CUDA else "deselected or interrupted before this case ran"
        _RESULTS.add(record)
    path = _RESULTS.write()
    print(f"\ncorrectness results: {path} {_RESULTS.summary()}")


def _run(case_id: str, spec: ProblemSpec) -> tuple[list[str], dict[str, object]]:
    if case_id not in _OUTCOMES:
        from kernels.cutile import ssd_fwd_cutile

        inputs = spec.make_inputs("cuda")
        torch.cuda.synchronize()
        start = time.perf_counter()
        with poisoned():
            y, final_state = ssd_fwd_cutile(*inputs.as_args(), chunk_size=spec.chunk_size)
        torch.cuda.synchronize()
        first_call_s = time.perf_counter() - start
        assert y.dtype == inputs.x.dtype and y.shape == inputs.x.shape, f"y is {y.dtype} {tuple(y.shape)}"
        assert final_state.dtype == torch.float32, f"final_state is {final_state.dtype}; expected fp32"
        y_ref, state_ref, ref_name = oracle(spec, inputs)
        verdict = judge(IMPL, spec.dtype, MATMUL[spec.dtype], y, final_state, y_ref, state_ref)
        measured = {**verdict.record(), "oracle": ref_name, "first_call_s": first_call_s}
        _OUTCOMES[case_id] = (verdict.failures(), measured)
        del inputs, y, final_state, y_ref, state_ref
        torch.cuda.empty_cache()
    return _OUTCOMES[case_id]


@pytest.mark.parametrize("tag,spec", CASES, ids=IDS)
def test_output_and_final_state_match_fp64_oracle(tag: str, spec: ProblemSpec) -> None:
    if not HAS_CUDA:
        pytest.skip(NO_CUDA_REASON)  # recorded as not-run in the results file, with this reason
    failures, measured = _run(spec.case_id(IMPL, tag), spec)
    assert not failures, f"{'; '.join(failures)}; oracle {measured['oracle']}; rows ({IMPL}, {spec.dtype}, " \
                         f"{MATMUL[spec.dtype]}, y|final_state)"
