"""The benchmark's results as a pytest-benchmark file, so ``pytest-benchmark compare A.json B.json`` works.

One benchmark per (implementation, point); its statistics come from pytest-benchmark's own ``Stats``
over the CUPTI kernel-time samples (in seconds, as pytest-benchmark keeps them); ``extra_info`` carries
the CUPTI statistics in microseconds, the wall time, compile time, floor and the gate's errors. The
results file of the contract stays the source: this file is derived from it and can be rebuilt.

    python -m validation.bench.pytest_benchmark_json RUN_DIR/raw/benchmark.json OUT.json
"""

from __future__ import annotations

import json
import platform
import sys
from pathlib import Path

from pytest_benchmark import __version__ as pytest_benchmark_version
from pytest_benchmark.stats import Stats

from validation.results import write_json_atomic

__all__ = ["convert"]

_EXTRA = ("kernel_us", "wall_us", "compile_s", "floor_us", "floor_with_states_us", "floor_design_us", "floor_fraction",
          "floor_design_fraction", "y_rel_l2", "state_rel_l2", "matmul")


def _benchmark(case: dict) -> dict:
    stats = Stats()
    for sample_us in case["kernel_us"]["samples"]:
        stats.update(sample_us * 1e-6)
    shape = case["shape"]
    params = {"impl": case["impl"], "seqlen": shape["seqlen"], "dstate": shape["dstate"], "dtype": case["dtype"]}
    extra = {k: case[k] for k in _EXTRA if k in case}
    extra["kernel_us"] = {k: v for k, v in extra.get("kernel_us", {}).items() if k != "samples"}
    extra["wall_us"] = {k: v for k, v in extra.get("wall_us", {}).items() if k != "samples"}
    return {
        "group": f"seqlen={shape['seqlen']} dstate={shape['dstate']}",
        "name": f"ssd_fwd[{case['id']}]",
        "fullname": f"validation/bench/run.py::ssd_fwd[{case['id']}]",
        "params": params,
        "param": case["id"],
        "extra_info": extra,
        "options": {"timer": "CUPTI kernel time (torch.profiler), L2 flushed before each rep", "min_rounds": None,
                    "max_time": None, "min_time": None, "warmup": True, "disable_gc": False},
        "stats": {**stats.as_dict(), "data": [s * 1e-6 for s in case["kernel_us"]["samples"]], "iterations": 1},
    }


def convert(results: dict) -> dict:
    """A pytest-benchmark document from a benchmark results file (only the timed, passing cases)."""
    env = results["environment"]
    return {
        "machine_info": {"node": env.get("gpu_uuid") or "unknown-gpu", "processor": platform.processor(),
                         "machine": platform.machine(), "python_implementation": "CPython",
                         "python_version": env.get("python"), "release": platform.release(),
                         "system": platform.system(), "cpu": {}, "gpu": env.get("gpu_name"),
                         "driver": env.get("driver"), "torch": env.get("torch"), "triton": env.get("triton"),
                         "cuda_tile": env.get("cuda_tile")},
        "commit_info": {"id": env.get("git_commit"), "dirty": env.get("git_dirty"), "project": "ssd-repro"},
        "benchmarks": [_benchmark(c) for c in results["cases"] if c["status"] == "pass" and "kernel_us" in c],
        "datetime": results["created"],
        "version": pytest_benchmark_version,
    }


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    source, target = Path(args[0]), Path(args[1])
    results = json.loads(source.read_text())
    if results.get("suite") != "benchmark":
        raise ValueError(f"{source}: expected a benchmark results file; its suite is {results.get('suite')!r}")
    write_json_atomic(target, convert(results))
    print(f"pytest-benchmark file: {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
