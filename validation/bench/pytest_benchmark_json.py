"""The benchmark's results as a pytest-benchmark file, so ``pytest-benchmark compare A.json B.json`` works.

One benchmark per (implementation, point); its statistics come from pytest-benchmark's own ``Stats``
over the CUPTI kernel-time samples (in seconds, as pytest-benchmark keeps them); ``extra_info`` carries
the CUPTI statistics in microseconds, the wall time, compile time, floor and the gate's errors. The
results file of the contract stays the source: this file is derived from it and can be rebuilt.

    python -m validation.bench.pytest_benchmark_json RUN_DIR/raw/benchmark.json OUT.json [--overwrite]

The benchmark writes this file itself (RUN_DIR/pytest-benchmark.json); this rebuilds it, or makes one from an
older run. OUT must be new unless ``--overwrite``.
"""

from __future__ import annotations

import argparse
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
    parser = argparse.ArgumentParser(prog="python -m validation.bench.pytest_benchmark_json",
                                     description=__doc__.split("\n\n")[0],
                                     epilog="Every problem with the arguments or the files is one line and exit 2.")
    parser.add_argument("source", type=Path, metavar="RESULTS",
                        help="a benchmark results file (RUN_DIR/raw/benchmark.json)")
    parser.add_argument("target", type=Path, metavar="OUT", help="the pytest-benchmark file to write; a new path")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace an existing OUT (it is derived from RESULTS and can be rebuilt)")
    args = parser.parse_args(argv)
    source, target = args.source, args.target
    if target.exists() and not args.overwrite:
        parser.error(f"{target} exists; pass --overwrite to replace it, or name a new OUT")
    if not source.is_file():
        parser.error(f"{source}: {'a directory' if source.is_dir() else 'no such file'}; expected a benchmark "
                     "results file (RUN_DIR/raw/benchmark.json)")
    try:
        results = json.loads(source.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        parser.error(f"{source}: not a results file (JSON): {err}")
    suite = results.get("suite") if isinstance(results, dict) else None
    if suite != "benchmark":
        parser.error(f"{source}: expected a benchmark results file; its suite is {suite!r}")
    try:
        document = convert(results)
    except (KeyError, TypeError, AttributeError) as err:
        parser.error(f"{source}: not a benchmark results file of this suite: it lacks or mistypes {err}")
    try:
        write_json_atomic(target, document, overwrite=args.overwrite)
    except OSError as err:
        parser.error(f"{target}: cannot write it: {err}")
    print(f"pytest-benchmark file: {target} ({len(document['benchmarks'])} benchmarks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
