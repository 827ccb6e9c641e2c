"""The Triton baseline on a CPU, under ``TRITON_INTERPRET=1``: its environment and a case runner.

The interpreter only takes effect for kernels decorated after ``TRITON_INTERPRET=1`` is in the
environment (``triton.jit`` picks interpreter or compiler at decoration time), and mamba_ssm fixes its
autotune configs at import (``MAMBA_DETERMINISTIC=1`` keeps one, so autotune never benchmarks, which
would need a device). Both must hold before triton or mamba_ssm is imported, which a pytest process
cannot promise, so the cases run in a child process started with ``INTERPRETER_ENV``::

    python -m validation.triton_interpreter CASES.json RECORDS.json [--overwrite]

CASES.json is a list of ``{"id": ..., "spec": ProblemSpec.as_dict()}``; RECORDS.json (a new file unless
``--overwrite``) gets one record per case: the id, the spec, the call's seconds, the output dtypes, and the errors
of y and final_state against the float64 recurrence (``validation.compare.errors``, fields ``y_*`` and ``state_*``).

bf16 runs but its numbers are wrong: the interpreter's ``tl.dot`` multiplies bf16 bit patterns
(https://github.com/triton-lang/triton/issues/11584). The interpreter also ignores tf32, so its
numerics are ``ieee`` and its tolerances are not the GPU's.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

__all__ = ["INTERPRETER_ENV", "main", "run_cases"]

INTERPRETER_ENV = {"TRITON_INTERPRET": "1", "MAMBA_DETERMINISTIC": "1"}


def run_cases(cases: list[dict]) -> list[dict]:
    """Run ``ssd_fwd_triton`` on each case's CPU inputs and compare it with ``ssd_recurrent``.

    Must run in a process started with ``INTERPRETER_ENV`` (ValueError otherwise).
    """
    missing = {k: v for k, v in INTERPRETER_ENV.items() if os.environ.get(k) != v}
    if missing:
        raise ValueError(f"run_cases needs {missing} in the environment before triton is imported; "
                         f"got { {k: os.environ.get(k) for k in missing} }")
    from kernels.triton import ssd_fwd_triton
    from reference import ProblemSpec, ssd_recurrent
    from validation.compare import errors

    records = []
    for case in cases:
        spec = ProblemSpec(**case["spec"])
        inputs = spec.make_inputs("cpu")
        start = time.perf_counter()
        y, final_state = ssd_fwd_triton(*inputs.as_args(), chunk_size=spec.chunk_size)
        seconds = time.perf_counter() - start
        y_ref, state_ref = ssd_recurrent(*inputs.as_args())
        records.append({
            "id": case["id"], "spec": case["spec"], "seconds": seconds,
            "y_dtype": str(y.dtype), "final_state_dtype": str(final_state.dtype),
            **errors(y, y_ref).as_dict("y"), **errors(final_state, state_ref).as_dict("state"),
        })
    return records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m validation.triton_interpreter",
                                     description=__doc__.split("\n\n")[0],
                                     epilog="Run with " + " ".join(f"{k}={v}" for k, v in INTERPRETER_ENV.items())
                                            + " in the environment (validation/test_triton_interpreter.py does).")
    parser.add_argument("cases", type=Path, metavar="CASES.json",
                        help='a JSON list of {"id": ..., "spec": ProblemSpec.as_dict()}')
    parser.add_argument("records", type=Path, metavar="RECORDS.json", help="where the records go; a new file")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing RECORDS.json")
    args = parser.parse_args(argv)
    missing = [f"{k}={v}" for k, v in INTERPRETER_ENV.items() if os.environ.get(k) != v]
    if missing:
        parser.error(f"needs {' '.join(missing)} in the environment before triton is imported (set it when starting "
                     "this process)")
    if args.records.exists() and not args.overwrite:
        parser.error(f"{args.records} exists; pass --overwrite to replace it, or name a new RECORDS.json")
    try:
        cases = json.loads(args.cases.read_text())
        if not isinstance(cases, list) or not all(isinstance(c, dict) and "id" in c and "spec" in c for c in cases):
            raise ValueError('expected a list of {"id": ..., "spec": {...}}')
    except (OSError, ValueError) as err:
        parser.error(f"{args.cases}: {err}")
    records = run_cases(cases)
    from validation.results import write_text_atomic

    try:
        write_text_atomic(args.records, json.dumps(records, indent=1), overwrite=args.overwrite)
    except OSError as err:
        parser.error(f"{args.records}: cannot write it: {err}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
