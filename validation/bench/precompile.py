"""The benchmark's compile phase: the first call of every (point, implementation), in parallel processes.

Compiling is most of a first run on a bare machine (our cuTile kernels per specialisation, TileGym's
chosen config per shape, every config mamba_ssm's Triton autotuner tries), and compiling is CPU work
that runs in parallel, while the timed loop is serial on the GPU. So before the timed loop, ``jobs``
spawned processes make the first call of every case, which fills cuTile's and Triton's disk caches; the
timed process then loads those kernels from disk.

The processes are a ``validation.isolated.Pool``: a process that dies costs the cases it was running (new
processes take the rest), and SIGINT or SIGTERM stops them all and raises ``Interrupted``, which the benchmark
records as every point not reached. They spread over every visible GPU (``validation.gpu.visible_gpus``):
process i takes GPU i mod their number, alone, before CUDA starts in it. The timed loop stays on one GPU, one
process.

Nothing measured comes from here. Triton's autotuner still picks its configs in the timed process (this
phase does not persist autotune choices), TileGym runs its stored choice or its first config (``tune``
is never run here: it would time configs on a shared GPU), and a case that fails here is called again
in the timed loop, which records the failure. The phase's first-call times are kept beside the
measurements (``precompile_s``, taken while other processes compile too).
"""

from __future__ import annotations

import contextlib
import functools
import multiprocessing
import os
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import replace

import torch

from reference import ProblemSpec
from validation import isolated
from validation.bench import tilegym_tuning
from validation.bench.flops import cost
from validation.bench.timing import first_call_s
from validation.gpu import lane_devices, visible_gpus
from validation.registry import IMPLS

__all__ = ["first_calls", "memory_estimate", "schedule"]

MEMORY_SHARE = 0.8  # of the GPU's free memory, for the cases in flight together


def memory_estimate(spec: ProblemSpec) -> int:
    """Bytes one first call may hold on the GPU: twice its inputs, outputs and chunk states (an autotuner
    keeps copies), plus a CUDA context."""
    c = cost(**spec.shape_dict(), dtype=spec.dtype, with_D=spec.with_D, with_initial_state=spec.with_initial_state)
    return 2 * (c.bytes + c.chunk_state_bytes) + 2**30


# Triton specialises a kernel on its integer arguments only by divisibility by 16 (and equality to 1), so one
# call per shape-but-length compiles every config it may pick at any length of a sweep whose lengths are
# multiples of 16; its calls at the other lengths would only autotune (on a shared GPU, so to no use).
LENGTH_FREE = ("triton",)


def schedule(specs: Sequence[ProblemSpec], impls: Sequence[str]) -> list[tuple[ProblemSpec, str]]:
    """The cases in the order they start: shortest sequences first, so that the first wave compiles every
    distinct kernel once (one per dstate and implementation) and the longer points mostly load it; for a
    ``LENGTH_FREE`` implementation only the shortest length of each shape (a length that is not a multiple
    of 16 is kept too: it may compile a specialisation of its own)."""
    cases, seen = [], set()
    for spec in sorted(specs, key=lambda spec: spec.seqlen):
        for impl in impls:
            if IMPLS[impl].unsupported_reason(spec) is not None:
                continue
            if impl in LENGTH_FREE and spec.seqlen % 16 == 0:
                shape = (impl, replace(spec, seqlen=16))
                if shape in seen:
                    continue
                seen.add(shape)
            cases.append((spec, impl))
    return sorted(cases, key=lambda case: (case[0].seqlen, case[0].dstate, impls.index(case[1])))


def _take_gpu(gpus: list[str], counter) -> None:
    """Process initializer: the next process number, and with it GPU number mod len(gpus), alone (before CUDA
    starts in this process). Nothing without GPUs."""
    with counter.get_lock():
        number = counter.value
        counter.value += 1
    os.environ.update(lane_devices(number + 1, gpus)[number])


def _first_call(fields: dict[str, object], impl: str, tuning: str) -> float:
    """In a worker: the case's first call, in seconds."""
    spec = ProblemSpec(**fields)
    # always a GPU in the benchmark; the tests run the float64 reference on a CPU
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    args = spec.make_inputs(device).as_args()
    fn = IMPLS[impl].load()
    with tilegym_tuning.use(tuning) if impl == "tilegym" else contextlib.nullcontext():
        elapsed = first_call_s(functools.partial(fn, *args, chunk_size=spec.chunk_size), device)
    del args  # free the inputs before returning the memory to the other processes
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return elapsed


def first_calls(specs: Sequence[ProblemSpec], impls: Sequence[str], *, jobs: int, tuning: str,
                log: Callable[[str], None], gpus: list[str] | None = None) -> dict[str, object]:
    """Make every first call in ``jobs`` processes (at least one per GPU) spread over ``gpus`` (default: every
    visible GPU), at most ``MEMORY_SHARE`` of the GPUs' free memory in flight (by :func:`memory_estimate`; the
    GPUs of one host taken as alike). Returns the phase's summary for the results file."""
    tuning_here = "off" if tuning == "off" else "cached"
    pending = deque(schedule(specs, impls))
    total = len(pending)
    gpus = visible_gpus() if gpus is None else gpus
    jobs = max(jobs, len(gpus))
    free = torch.cuda.mem_get_info()[0] if torch.cuda.is_available() else float("inf")
    budget = MEMORY_SHARE * free * max(1, len(gpus))
    seconds: dict[str, float] = {}
    failed: dict[str, str] = {}
    running: dict[Future, tuple[ProblemSpec, str, int]] = {}
    in_flight = 0
    start = time.perf_counter()
    spread = f" over {len(gpus)} GPUs" if len(gpus) > 1 else ""
    log(f"compile phase: {total} first calls in {jobs} processes{spread}")
    context = multiprocessing.get_context("spawn")
    stop = isolated.Stop()
    with stop.handling(), isolated.Pool(jobs, initializer=_take_gpu, initargs=(gpus, context.Value("i", 0)),
                                        stop=stop) as pool:
        while (pending or running) and stop.signum is None:
            while pending and len(running) < jobs:
                spec, impl = pending[0]
                held = memory_estimate(spec)
                if running and in_flight + held > budget:
                    break
                pending.popleft()
                running[pool.submit(_first_call, spec.as_dict(), impl, tuning_here)] = (spec, impl, held)
                in_flight += held
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                spec, impl, held = running.pop(future)
                in_flight -= held
                case_id, error = spec.case_id(impl), future.exception()
                done = len(seconds) + len(failed) + 1
                if error is None:
                    seconds[case_id] = future.result()
                    log(f"[compile {done}/{total} {time.perf_counter() - start:5.0f}s] l={spec.seqlen:<7} "
                        f"n={spec.dstate:<4} {impl:<8} first call {seconds[case_id]:.1f} s")
                elif stop.signum is None:
                    failed[case_id] = f"{type(error).__name__}: {error}"[:300]
                    log(f"[compile {done}/{total}] {case_id}: {failed[case_id]} (the timed loop calls it again "
                        "and records what happens)")
    # A signal: the workers were stopped with it, and the caller records every case as not reached.
    stop.raise_if_stopped()
    wall = time.perf_counter() - start
    log(f"compile phase: {len(seconds)} of {total} first calls in {wall:.0f} s")
    return {"jobs": jobs, "gpus": len(gpus), "wall_s": wall, "first_calls": len(seconds), "of": total,
            "failed": failed, "seconds": seconds, "tilegym_tuning": tuning_here}
