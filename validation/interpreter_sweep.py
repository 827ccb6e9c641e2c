"""The CPU sweep behind the Triton interpreter's tolerance rows: many seeds of every case the interpreter is judged on.

    python -m validation.interpreter_sweep OUT_DIR [--seeds N] [--first-seed S] [--tags TAG ...] [--jobs J]

For each seed S..S+N-1 (S is 0 unless given) it runs every case the correctness and stability matrices give
``triton-interpreter`` (their tiny variants, each once) and the cases of validation/test_triton_interpreter.py
(:func:`cases`, below), or with ``--tags`` only those tags' cases, each run and judged exactly as the matrix runs and
judges a case (``validation.matrix``: the float64 oracle, the
non-finite allowance of the nonfinite_input regime, the table's row), in up to J child processes started under
``INTERPRETER_ENV``. It writes ``OUT_DIR/sweep.json`` (a new file, never one that exists): the command, the seeds,
the environment and every case's record, as a results file's cases are written. The worst of its passes, per
tolerance key, is what the ``triton-interpreter`` rows of validation/tolerances.toml record (validation/
test_tolerances.py recomputes it from the published file; validation/test_triton_interpreter.py runs those worst
cases again). It exits 1 when a case failed or crashed (the file is written all the same). SIGINT or SIGTERM stop
it as they stop the matrix: what finished is written, marked ``interrupted``, and it exits 128 + the signal's number.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import shlex
import signal
import sys
import time
from pathlib import Path

from reference import ProblemSpec
from validation import isolated
from validation.matrix import Task, run_lanes, takes, tasks_for
from validation.provenance import ROOT, environment, now_iso
from validation.results import write_json_atomic
from validation.schema import CaseRecord
from validation.triton_interpreter import INTERPRETER_ENV

__all__ = ["FILE", "IMPL", "KIND", "cases", "load", "main", "published", "sweep_tags", "sweep_tasks"]

IMPL = "triton-interpreter"
KIND = "interpreter-sweep"
FILE = "sweep.json"


def _spec(dtype: str, seqlen: int, ngroups: int, regime: str = "typical", *, with_D: bool = True,
          with_initial_state: bool = False, seed: int = 0) -> ProblemSpec:
    return ProblemSpec(batch=2, seqlen=seqlen, nheads=4, headdim=16, ngroups=ngroups, dstate=16, chunk_size=16,
                       dtype=dtype, regime=regime, seed=seed, with_D=with_D, with_initial_state=with_initial_state)


def cases(dtype: str, seed: int = 0) -> list[tuple[ProblemSpec, str]]:
    """validation/test_triton_interpreter.py's cases, beside the matrix's tiny ones: ragged lengths around chunk 16
    (1, 15, 17, prime 37) and four full chunks; groups 1 and 2; with and without D and an initial state; typical,
    long_memory and dt_zero inputs. (spec, tag) pairs."""
    return [
        (_spec(dtype, 1, 1, seed=seed), "l1_single_step"),
        (_spec(dtype, 15, 2, with_D=False, seed=seed), "l15_one_short_of_chunk"),
        (_spec(dtype, 17, 1, with_initial_state=True, seed=seed), "l17_one_past_chunk"),
        (_spec(dtype, 37, 2, with_initial_state=True, seed=seed), "l37_prime"),
        (_spec(dtype, 37, 2, "long_memory", with_D=False, with_initial_state=True, seed=seed), "l37_prime"),
        (_spec(dtype, 64, 1, "long_memory", seed=seed), "l64_four_chunks"),
        (_spec(dtype, 17, 2, "dt_zero", with_initial_state=True, seed=seed), "l17_one_past_chunk"),
    ]


def _task(spec: ProblemSpec, tag: str) -> Task:
    return Task(spec.case_id(IMPL, tag), tag, spec, IMPL)


def sweep_tasks(seeds: range, tags: frozenset[str] | None = None) -> list[Task]:
    """Every task of the sweep, seed by seed: the matrices' tiny cases the interpreter takes, each spec once under
    the first tag that gives it (chunk64_fp16 and chunk256_fp16 shrink to one tiny case), then :func:`cases` in fp32
    and fp16 (the interpreter's bf16 is wrong: validation/test_triton_interpreter.py); ``tags``: only the tasks of
    those tags (:func:`sweep_tags` lists them)."""
    def wanted(tag: str) -> bool:
        return tags is None or tag in tags

    matrix: dict[ProblemSpec, str] = {}
    for task in (t for suite in ("correctness", "stability") for t in tasks_for(suite, (IMPL,))):
        if takes(IMPL, task.tag, task.spec):
            matrix.setdefault(task.spec, task.tag)
    matrix = {spec: tag for spec, tag in matrix.items() if wanted(tag)}
    tasks = []
    for seed in seeds:
        tasks += [_task(dataclasses.replace(spec, seed=seed), tag) for spec, tag in matrix.items()]
        tasks += [_task(spec, tag) for dtype in ("fp32", "fp16") for spec, tag in cases(dtype, seed) if wanted(tag)]
    return tasks


def sweep_tags() -> list[str]:
    """The tags of the sweep's tasks, in their order (a seed's tasks; ``--tags`` takes these)."""
    return list(dict.fromkeys(t.tag for t in sweep_tasks(range(1))))


def load(path: Path) -> list[CaseRecord]:
    """The records of a sweep file, each checked as a results file's case is (``CaseRecord.from_dict``); a file that
    is not a finished sweep is refused with a ValueError naming it."""
    payload = json.loads(path.read_text())
    if not isinstance(payload, dict) or payload.get("kind") != KIND or not isinstance(payload.get("cases"), list):
        raise ValueError(f"{path}: expected an {KIND} file (an object with kind {KIND!r} and a list of cases)")
    if payload.get("interrupted"):
        raise ValueError(f"{path}: the sweep was interrupted ({payload['interrupted']}); its cases are not all there")
    return [CaseRecord.from_dict(case, path, f"cases[{i}]") for i, case in enumerate(payload["cases"])]


@functools.cache
def published(path: str) -> tuple[CaseRecord, ...]:
    """The records of a published sweep file named as the tolerance table names it (relative to the repository),
    read once a process however many bases and rows name it."""
    return tuple(load(ROOT / path))


def _unless_a_pass(line: str) -> None:
    """The children's lines, less the one a case that passed or was refused says (thousands of them)."""
    if not line.lstrip().startswith(("pass ", "unsupported ")):
        print(line, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m validation.interpreter_sweep", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", type=Path, metavar="OUT_DIR", help=f"where {FILE} goes (made if missing)")
    parser.add_argument("--seeds", type=int, default=20, help="how many seeds of every case (default 20)")
    parser.add_argument("--first-seed", type=int, default=0,
                        help="the first seed: seeds S..S+N-1 (default 0; a basis of the tolerance table starts at 0, "
                             "a sweep past it tests the table's margins)")
    parser.add_argument("--tags", nargs="+", metavar="TAG", default=None,
                        help="only the cases of these tags (default: all; a tag the sweep has not is refused, "
                             "naming those it has)")
    parser.add_argument("--jobs", type=int, default=1, help="child processes at once (default 1)")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error(f"--seeds must be >= 1; got {args.seeds}")
    if args.jobs < 1:
        parser.error(f"--jobs must be >= 1; got {args.jobs}")
    if args.first_seed < 0:
        parser.error(f"--first-seed must be >= 0; got {args.first_seed}")
    known = sweep_tags()
    unknown = [tag for tag in args.tags or () if tag not in known]
    if unknown:
        parser.error(f"--tags: {', '.join(unknown)} not among the sweep's tags ({', '.join(known)})")
    out = args.out_dir / FILE
    if out.exists():
        parser.error(f"{out} exists; name a new OUT_DIR")
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    tasks = sweep_tasks(seeds, frozenset(args.tags) if args.tags else None)
    print(f"{KIND}: {len(tasks)} runs ({len(tasks) // args.seeds} cases x seeds {seeds[0]}-{seeds[-1]}) in up to "
          f"{args.jobs} processes", flush=True)
    env = environment()  # before the runs: a stopped sweep writes with it
    start, finished = time.perf_counter(), iter(range(1, len(tasks) + 1))

    def done(record: CaseRecord) -> None:  # called one record at a time (run_lanes)
        if (n := next(finished)) % 100 == 0:
            print(f"{KIND}: {n} of {len(tasks)} done, {time.perf_counter() - start:.0f} s", flush=True)

    stop = isolated.Stop()
    with stop.handling():
        records = run_lanes(tasks, _unless_a_pass, args.jobs, env=INTERPRETER_ENV, stop=stop, done=done)
    statuses: dict[str, int] = {}
    for record in records:
        statuses[record.status] = statuses.get(record.status, 0) + 1
    command = shlex.join(["python", "-m", "validation.interpreter_sweep", *(sys.argv[1:] if argv is None else argv)])
    payload = {"kind": KIND, "created": now_iso(), "command": command,
               "seeds": args.seeds, "first_seed": args.first_seed, "tags": args.tags,
               "seconds": round(time.perf_counter() - start, 1), "statuses": statuses,
               "environment": env, "cases": [r.as_dict() for r in records]}
    if stop.signum is not None:
        payload["interrupted"] = stop.name
    write_json_atomic(out, payload)
    print(f"{KIND}: {payload['seconds']:.0f} s; {statuses}; {out}", flush=True)
    if stop.signum is not None:
        return 128 + signal.Signals[stop.name].value
    return 0 if set(statuses) <= {"pass", "unsupported"} else 1


if __name__ == "__main__":
    sys.exit(main())
