"""The seed sweep behind the GPU rows of the tolerance table: worst errors per (impl, dtype, quantity).

    python -m validation.tolerance_sweep --impl cutile triton tilegym --out sweep.json

Runs each implementation on a fixed set of shapes (ragged and not, groups, D, initial state, the
typical and long_memory regimes) for seeds 0-2 in every dtype it takes, judges each against float64
(the recurrence up to 4096 tokens), and writes every measurement plus the worst case per key. The
table's reasons cite this file's output; bounds are set from it with a stated safety factor.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from reference import ProblemSpec
from validation.compare import errors
from validation.gpu import oracle
from validation.provenance import environment
from validation.registry import IMPLS
from validation.results import write_json_atomic

SHAPES = [
    dict(batch=2, seqlen=1024, nheads=8, headdim=64, ngroups=1, dstate=128, chunk_size=128),
    dict(batch=2, seqlen=1009, nheads=8, headdim=64, ngroups=2, dstate=64, chunk_size=128, with_initial_state=True),
    dict(batch=1, seqlen=4096, nheads=4, headdim=128, ngroups=1, dstate=256, chunk_size=256),
    dict(batch=2, seqlen=512, nheads=8, headdim=32, ngroups=8, dstate=16, chunk_size=64, with_D=False),
]
REGIMES = ("typical", "long_memory")
SEEDS = range(3)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--impl", nargs="+", default=["cutile", "triton", "tilegym"])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    rows, worst = [], {}
    start = time.perf_counter()
    for shape in SHAPES:
        for regime in REGIMES:
            for dtype in ("bf16", "fp16", "fp32"):
                for seed in SEEDS:
                    spec = ProblemSpec(**shape, dtype=dtype, regime=regime, seed=seed)
                    inputs = spec.make_inputs("cuda")
                    y_ref, state_ref, _ = oracle(spec, inputs)
                    for name in args.impl:
                        impl = IMPLS[name]
                        if impl.unsupported_reason(spec):
                            continue
                        y, state = impl.load()(*inputs.as_args(), chunk_size=spec.chunk_size)
                        for quantity, out, ref in (("y", y, y_ref), ("final_state", state, state_ref)):
                            e = errors(out, ref)
                            key = f"{name}|{dtype}|{impl.matmul[dtype]}|{quantity}"
                            row = {"key": key, "id": spec.case_id(name), "rel_l2": e.rel_l2,
                                   "max_abs_over_peak": e.max_abs_over_peak, "nonfinite": e.nonfinite}
                            rows.append(row)
                            w = worst.setdefault(key, {"rel_l2": 0.0, "max_abs_over_peak": 0.0, "cases": 0})
                            w["cases"] += 1
                            for metric in ("rel_l2", "max_abs_over_peak"):
                                if not row[metric] <= w[metric]:  # NaN counts as worse
                                    w[metric], w[f"{metric}_at"] = row[metric], row["id"]
                    print(f"{spec.case_id('*')}: done at {time.perf_counter() - start:.0f} s", file=sys.stderr,
                          flush=True)
                    del inputs, y_ref, state_ref
                    torch.cuda.empty_cache()
    write_json_atomic(args.out, {"environment": environment(list(SEEDS)), "worst": worst, "rows": rows})
    for key, w in sorted(worst.items()):
        print(f"{key:40s} rel_l2 {w['rel_l2']:.3e}  max_abs/peak {w['max_abs_over_peak']:.3e}  ({w['cases']} cases)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
