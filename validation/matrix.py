"""The validation matrix: every implementation on the same inputs, each judged against float64.

    python -m validation.matrix correctness|stability [--impl cutile triton ...]

``correctness`` sweeps shapes and dtypes (typical inputs); ``stability`` sweeps the regimes of
docs/design.md, ragged and long sequences, a tensor past 2**31 elements, non-contiguous views, and A > 0 and
dt < 0 (outside Mamba's parameterisation: the references compute them, every kernel refuses them). Where no
GPU is, both also run the Triton baseline under the interpreter (``triton-interpreter``) on a tiny
variant of each case (batch 1, <= 40 tokens, 2 heads, headdim and dstate 16, chunk 16), once per variant. Each
(case, implementation) gets a status: ``pass`` or ``fail`` against the tolerance table,
``unsupported`` (the registry says it cannot take the case, and why, or its entry point refused the inputs'
values with a ``DomainError``, whose message is the reason), ``not-run`` (it cannot run
on this machine, and why) or ``crashed``.

Cases run in a child process, case by case and implementation by implementation, so that an
illegal memory access (which kills the CUDA context) or an exception costs only that case: the
parent records it as crashed with the child's last words and starts a new child for the rest.

Every finished case is checkpointed to ``<run_dir>/partial/<suite>.json`` as it comes. SIGINT and SIGTERM
to the parent are forwarded to its children (which stop at once); no new child starts, every case that did
not finish is recorded ``not-run`` with the reason ``interrupted``, the results file is written, and the
parent stops (KeyboardInterrupt under pytest, exit 128 + the signal's number on the command line). No
child outlives it: one that ignores the signal is killed after ``validation.isolated.KILL_AFTER_S``. The children
and the signal handling are ``validation.isolated``'s, shared with every other part of the suite that starts
processes.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from unittest import mock

import torch

from reference import ProblemSpec
from reference.checks import DomainError, domain_checked
from reference.regimes import OUTSIDE_MAMBA
from validation import isolated
from validation.gpu import (
    HAS_CUDA,
    RECURRENT_MAX_SEQLEN,
    judge,
    lane_devices,
    oracle,
    processes_at_once,
    visible_gpus,
)
from validation.registry import IMPLS
from validation.results import ResultsFile, RunDirError
from validation.schema import CaseRecord, Status
from validation.summary import describe
from validation.triton_interpreter import INTERPRETER_ENV

__all__ = ["DEFAULT_IMPLS", "Task", "correctness_cases", "run_lanes", "run_matrix", "stability_cases", "takes",
           "tasks_for", "tiny", "why_not"]

DEFAULT_IMPLS = ("cutile", "triton", "tilegym", "reference-chunked")
SUITE_IMPLS = {suite: (*DEFAULT_IMPLS, "triton-interpreter") for suite in ("correctness", "stability")}
REFERENCES = ("reference-chunked", "reference-recurrent")
BASE = dict(batch=2, seqlen=1009, nheads=8, headdim=64, ngroups=2, dstate=64, chunk_size=128, dtype="bf16",
            regime="typical", seed=0)
Case = tuple[str, ProblemSpec]
BIG_ELEMENTS = 2**28  # x this large, its float64 oracle, outputs and errors take 15-60 GB: one such case at a time


def _spec(tag: str, base: dict = BASE, **change: object) -> Case:
    return tag, ProblemSpec(**{**base, **change})


# The correctness case whose forward is captured in a CUDA graph and replayed (``_graph_replay``).
GRAPH_TAG = "cuda_graph_replay"


def correctness_cases() -> list[Case]:
    """Every kind of input a user may pass: lengths, chunk sizes x dtypes, headdims, dstates, groups, D,
    initial state, views, and a tensor past 2**31 elements; and one case whose forward is captured in a CUDA graph and
    replayed (``GRAPH_TAG``)."""
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
    # The forward captured in a CUDA graph and replayed (``_graph_replay``), with an initial state, at whole chunks
    # (TileGym's). Last, so that the Triton interpreter, which takes each distinct tiny input once, keeps that input
    # under the initial-state case's tag.
    cases += [_spec(GRAPH_TAG, with_initial_state=True, seqlen=1024)]
    return cases


STABILITY_BASE = {**BASE, "seqlen": 1024}  # a multiple of the chunk, so that every implementation runs
OUTSIDE_MAMBA_BASE = {**STABILITY_BASE, "batch": 1, "seqlen": 256, "dtype": "fp32"}
LONG_BASE = dict(batch=1, nheads=8, headdim=64, ngroups=1, dstate=64, chunk_size=128, dtype="bf16",
                 regime="typical", seed=0)
# The benchmark's shape (batch 4, 8 heads, one group), where our forward takes another state pass than at batch 1
# (kernels.cutile.tuning.state_pass_kind): at dstate 64 from 64 chunks the segmented pass completed in chunk_out
# ("segout_" cases), at dstate 128 and 512 the serial walk ("serial_"); at batch 1 the long cases above take the
# segment-parallel pass with its completion launch instead. These carry both past 128 chunks, on the regimes that
# load them most; at 32-63 chunks and dstate 64 the segmented pass runs in two segments without a scan, chunk_out
# writing the final state ("twoseg_"), on the same regimes, at batch 8: at batch 4 the serial walk reading the
# cumsum's weights runs there since its grid has one program an SM (a CPU test checks that each tag's prefix names the
# pass it plans).
BENCH_LONG_BASE = dict(batch=4, nheads=8, headdim=64, ngroups=1, chunk_size=128, dtype="bf16", seed=0)
BENCH_LONG_CASES = (("segout_l65536_dstate64", dict(seqlen=2**16, dstate=64, regime="typical")),
                    ("segout_l32768_huge_decay_dstate64", dict(seqlen=2**15, dstate=64, regime="huge_decay")),
                    ("segout_l32768_long_memory_dstate64", dict(seqlen=2**15, dstate=64, regime="long_memory")),
                    ("segout_l32768_large_initial_state_dstate64",
                     dict(seqlen=2**15, dstate=64, regime="large_initial_state", with_initial_state=True)),
                    ("serial_l65536_long_memory_dstate128", dict(seqlen=2**16, dstate=128, regime="long_memory")),
                    ("serial_l32768_huge_decay_dstate128", dict(seqlen=2**15, dstate=128, regime="huge_decay")),
                    ("serial_l32768_large_initial_state_dstate512",
                     dict(seqlen=2**15, dstate=512, regime="large_initial_state", with_initial_state=True)),
                    ("twoseg_l4096_huge_decay_dstate64", dict(batch=8, seqlen=2**12, dstate=64, regime="huge_decay")),
                    ("twoseg_l4096_long_memory_dstate64", dict(batch=8, seqlen=2**12, dstate=64, regime="long_memory")),
                    ("twoseg_l4000_typical_dstate64", dict(batch=8, seqlen=4000, dstate=64, regime="typical")))


def stability_cases() -> list[Case]:
    """Every regime in bf16 and fp32 (fp16 cannot hold the outputs of some regimes, whatever computes them),
    ragged lengths, long sequences (at batch 1, and at the benchmark's batch through our serial walk and our segmented
    pass), x past 2**31 elements; A > 0 and dt < 0 once each, small, in fp32 (a shape and dtype every implementation
    takes, so that what it does with the values is what the matrix records)."""
    from reference import REGIMES

    cases = [_spec(f"{regime}_{dtype}", STABILITY_BASE, regime=regime, dtype=dtype,
                   with_initial_state=regime == "large_initial_state")
             for regime in REGIMES if regime not in OUTSIDE_MAMBA for dtype in ("bf16", "fp32")]
    cases += [_spec(f"{regime}_fp32", OUTSIDE_MAMBA_BASE, regime=regime) for regime in OUTSIDE_MAMBA]
    cases += [_spec(f"l{n}_ragged", STABILITY_BASE, seqlen=n) for n in (1, 127, 129, 1009)]
    cases += [_spec("l1009_huge_decay_ragged", STABILITY_BASE, seqlen=1009, regime="huge_decay")]
    cases += [_spec(f"long_l{n}", LONG_BASE, seqlen=n) for n in (2**16, 2**18, 2**20)]
    cases += [_spec(tag, BENCH_LONG_BASE, **change) for tag, change in BENCH_LONG_CASES]
    cases += [_spec("x_past_2pow31_elements", LONG_BASE, seqlen=2**21 + 128, nheads=16, dstate=16)]
    return cases


def tiny(spec: ProblemSpec) -> ProblemSpec:
    """The case at a size the Triton interpreter runs in seconds on a CPU: same regime, dtype, seed,
    D and initial state."""
    return ProblemSpec(batch=1, seqlen=min(spec.seqlen, 40), nheads=2, headdim=16, ngroups=1, dstate=16,
                       chunk_size=16, dtype=spec.dtype, regime=spec.regime, seed=spec.seed, with_D=spec.with_D,
                       with_initial_state=spec.with_initial_state)


@dataclass(frozen=True)
class Task:
    case_id: str
    tag: str
    spec: ProblemSpec
    impl: str


def _record(task: Task, status: Status, reason: str | None = None, *, oracle: str | None = None,
            **measured: object) -> CaseRecord:
    """The task's case: its identity and inputs, what was measured, and the verdict."""
    spec = task.spec
    return CaseRecord(id=task.case_id, impl=task.impl, status=status, reason=reason, shape=spec.shape_dict(),
                      dtype=spec.dtype, regime=spec.regime, seed=spec.seed, tag=task.tag, with_D=spec.with_D,
                      with_initial_state=spec.with_initial_state, oracle=oracle, measured=measured)


def why_not(task: Task) -> tuple[Status, str] | None:
    """(status, reason) when the task will not run; None when it will."""
    impl = IMPLS[task.impl]
    if task.tag == GRAPH_TAG and task.impl in REFERENCES:
        return "unsupported", (f"{task.impl} is a float64 oracle in torch, not a forward a caller captures in a CUDA "
                               "graph; the case is for the GPU forwards")
    if task.impl in REFERENCES and task.spec.seqlen > RECURRENT_MAX_SEQLEN:
        return "unsupported", (f"beyond {RECURRENT_MAX_SEQLEN} tokens the oracle is the float64 chunked reference"
                               " itself, so it cannot be judged here (test_reference.py checks it at 64K)")
    reason = impl.unsupported_reason(task.spec)
    if reason:
        return "unsupported", reason
    reason = impl.not_run_reason(has_cuda=HAS_CUDA)
    if reason:
        return "not-run", reason
    return None


def takes(impl: str, tag: str, spec: ProblemSpec) -> bool:
    """Whether the matrix gives ``impl`` the case at all: False where it records it unsupported (on any machine)."""
    return (why_not(Task(spec.case_id(impl, tag), tag, spec, impl)) or ("",))[0] != "unsupported"


# --- the child ------------------------------------------------------------------------------------

def _nonfinite_allowance(spec: ProblemSpec, y_ref: torch.Tensor) -> torch.Tensor:
    """Where a chunked form may put NaN that the recurrence does not (reference.regimes.nonfinite_input):
    the tokens of the poisoned token's chunk before it, in the poisoned channel."""
    t0 = spec.seqlen // 2
    allowed = torch.zeros(y_ref.shape, dtype=torch.bool, device=y_ref.device)
    allowed[0, t0 - t0 % spec.chunk_size:t0, 0, 0] = True
    return allowed


def _graph_replay(fn, spec: ProblemSpec, inputs, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """``fn`` as a caller who captures it in a CUDA graph runs it: called once on a side stream (compiling, tuning),
    captured on inputs of the same layout holding other values (the next seed's), then replayed after the case's
    own values are copied into those very tensors. The capture runs inside ``domain_checked``, since the domain
    check's host synchronisation cannot be captured; the case's values lie in the domain too."""
    static = replace(spec, seed=spec.seed + 1).make_inputs(device).as_args()
    with domain_checked(static[1], static[2], who="matrix"):
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            fn(*static, chunk_size=spec.chunk_size)
        torch.cuda.current_stream(device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            y, state = fn(*static, chunk_size=spec.chunk_size)
    for held, value in zip(static, inputs.as_args(), strict=True):
        if held is not None:
            held.copy_(value)
    graph.replay()
    return y, state


def _run_task(task: Task, cache: dict) -> dict[str, object]:
    """The task's case (a CaseRecord, checked) as it crosses to the parent: its JSON form."""
    from kernels.alloc import poisoned

    spec, impl = task.spec, IMPLS[task.impl]
    device = torch.device("cuda" if HAS_CUDA else "cpu")
    if cache.get("spec") != spec:
        cache.clear()
        inputs = spec.make_inputs(device)
        y_ref, state_ref, oracle_name = oracle(spec, inputs)
        cache.update(spec=spec, inputs=inputs, y_ref=y_ref, state_ref=state_ref, oracle=oracle_name)
    inputs, y_ref, state_ref = cache["inputs"], cache["y_ref"], cache["state_ref"]
    fn = impl.load()
    if HAS_CUDA:
        torch.cuda.synchronize()
    start = time.perf_counter()
    try:
        with poisoned():  # the Triton adapter takes the CPU under the interpreter itself (its device shim)
            if task.tag == GRAPH_TAG:
                y, state = _graph_replay(fn, spec, inputs, device)
            else:
                y, state = fn(*inputs.as_args(), chunk_size=spec.chunk_size)
    except DomainError as refusal:  # values outside its domain (docs/design.md, "Input contract"): a clean refusal
        return _record(task, "unsupported", str(refusal), oracle=cache["oracle"],
                       first_call_s=time.perf_counter() - start).as_dict()
    if HAS_CUDA:
        torch.cuda.synchronize()
    wall_s = time.perf_counter() - start
    # A reference computes in float64 whatever its inputs: its rows are the fp64 ones.
    dtype, matmul = ("fp64", "ieee") if task.impl in REFERENCES else (spec.dtype, impl.matmul[spec.dtype])
    measured: dict[str, object] = {"first_call_s": wall_s, "matmul": matmul}
    extra_failures = []
    if spec.regime == "nonfinite_input":
        lost = int((torch.isfinite(y) & ~torch.isfinite(y_ref)).sum().item())
        if lost:
            extra_failures.append(f"{lost} outputs are finite where the NaN input must show (it vanished)")
        y = torch.where(_nonfinite_allowance(spec, y_ref) & ~torch.isfinite(y), y_ref.to(y.dtype), y)
    verdict = judge(task.impl, dtype, matmul, y, state, y_ref, state_ref)
    measured.update(verdict.record())
    failures = verdict.failures() + extra_failures
    return _record(task, "fail" if failures else "pass", "; ".join(failures) if failures else None,
                   oracle=cache["oracle"], **measured).as_dict()


def _child(tasks_path: Path, out_path: Path) -> int:
    """A child's work (started through ``validation.isolated.popen``, which sets its signals up)."""
    tasks = [Task(t["case_id"], t["tag"], ProblemSpec(**t["spec"]), t["impl"])
             for t in json.loads(tasks_path.read_text())]
    cache: dict = {}
    with open(out_path, "a") as out:
        for task in tasks:
            out.write(json.dumps({"start": task.case_id}) + "\n")
            out.flush()
            record = _run_task(task, cache)
            out.write(json.dumps({"record": record}, allow_nan=True) + "\n")
            out.flush()
            print(f"  {record['status']:<5} {task.case_id} ({record['first_call_s']:.2f} s)", file=sys.stderr,
                  flush=True)
    return 0


# --- the parent -----------------------------------------------------------------------------------

def _interrupted(task: Task, stop: isolated.Stop) -> CaseRecord:
    return _record(task, "not-run", stop.reason)


class _Progress:
    """The child's ``out.jsonl`` read as it grows: each record once, as soon as its line is complete (read back
    as a CaseRecord, checked again)."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.started = path, 0, None

    def new_records(self) -> list[CaseRecord]:
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read()
        complete = data[:data.rfind(b"\n") + 1]  # a line still being written waits for the next read
        self.offset += len(complete)
        records = []
        for line in complete.splitlines():
            try:
                item = json.loads(line)
            except json.JSONDecodeError:  # a line cut short by a kill
                continue
            if "start" in item:
                self.started = item["start"]
            else:
                records.append(CaseRecord.from_dict(item["record"]))
                self.started = None
        return records


# How a child ends when SIGINT or SIGTERM stops it (killed by the signal, or exiting 128 + its number), and how long
# this process waits for the same signal to reach its own handler before calling such an end a crash.
_STOPPED_BY_SIGNAL = frozenset(code for sig in (signal.SIGINT, signal.SIGTERM) for code in (-sig, 128 + sig))
_GROUP_SIGNAL_GRACE_S = 2.0


def _run_in_children(tasks: list[Task], log, env: dict[str, str] | None = None, *, stop: isolated.Stop | None = None,
                     done=None) -> list[CaseRecord]:
    """Run tasks in a child process (``env`` added to its environment); on a crash record it and go on
    with a new child. ``done(record)`` is called for each record as it comes. Once ``stop`` has a signal, no
    child starts and every task not finished is recorded not-run, interrupted."""
    stop = stop or isolated.Stop()
    records: list[CaseRecord] = []

    def keep(record: CaseRecord) -> None:
        records.append(record)
        if done is not None:
            done(record)

    remaining = list(tasks)
    with tempfile.TemporaryDirectory(prefix="ssd-matrix-") as tmp:
        while remaining and stop.signum is None:
            tasks_path, out_path = Path(tmp, "tasks.json"), Path(tmp, "out.jsonl")
            tasks_path.write_text(json.dumps([{"case_id": t.case_id, "tag": t.tag, "spec": t.spec.as_dict(),
                                               "impl": t.impl} for t in remaining]))
            out_path.write_text("")
            child = isolated.popen("validation.matrix", "--child", str(tasks_path), str(out_path), stop=stop,
                                   env=env, stderr=subprocess.PIPE, text=True)
            progress, finished = _Progress(out_path), 0
            try:
                last_words: deque[str] = deque(maxlen=8)
                for line in child.stderr:  # progress, shown as it comes; the last lines explain a crash
                    log(line.rstrip())
                    last_words.append(line.rstrip())
                    for record in progress.new_records():  # the child says a line per finished case
                        keep(record)
                        finished += 1
                returncode = child.wait()
            finally:
                stop.discard(child)
            if returncode in _STOPPED_BY_SIGNAL and stop.signum is None:
                # Ctrl-C reaches the whole process group at once: the child may die of it before this process's
                # handler has run (in the main thread). Its case was interrupted, not crashed: give the handler a
                # moment to say so.
                stop.wait(_GROUP_SIGNAL_GRACE_S)
            for record in progress.new_records():
                keep(record)
                finished += 1
            started = progress.started
            remaining = remaining[finished:]
            if stop.signum is not None:
                break
            if returncode == 0:
                break
            tail = [w for w in last_words if w.strip()][-6:]
            if started is None:  # it died before starting a case: nothing more will run
                for t in remaining:
                    keep(_record(t, "crashed", f"the child process failed before this case: {' | '.join(tail)}"))
                remaining = []
                break
            crashed, remaining = remaining[0], remaining[1:]
            log(f"  CRASH {crashed.case_id}: {tail[-1] if tail else returncode}")
            keep(_record(crashed, "crashed", f"child exited {returncode}: {tail[-1] if tail else ''}"
                                             f" (its last lines: {' | '.join(tail[:-1])})"))
        if stop.signum is not None:
            for t in remaining:
                keep(_interrupted(t, stop))
    return records


# The peers' autotuners pick block sizes, not numerics, and would dominate the matrix's time (TileGym's
# exhaustive search takes about 5 minutes per shape): the matrix runs each with one fixed configuration,
# says so in its results file, and leaves autotuned timing to the benchmark.
FIXED_CONFIG_ENV = {"MAMBA_DETERMINISTIC": "1", "TILEGYM_DISABLE_AUTOTUNE": "1"}
FIXED_CONFIG_NOTE = ("triton ran with MAMBA_DETERMINISTIC=1 and tilegym with TILEGYM_DISABLE_AUTOTUNE=1: one fixed "
                     "kernel configuration each, autotune off (block sizes only; the benchmark autotunes Triton)")


def tasks_for(suite: str, impls: tuple[str, ...]) -> list[Task]:
    """Every (case, implementation) of the suite; the interpreter gets each case's tiny variant, once."""
    cases = correctness_cases() if suite == "correctness" else stability_cases()
    tasks, seen = [], set()
    for tag, spec in cases:
        for name in impls:
            if IMPLS[name].interpreter:
                spec_here, tag_here = tiny(spec), f"{tag}_tiny"
                if spec_here in seen:
                    continue
                seen.add(spec_here)
            else:
                spec_here, tag_here = spec, tag
            tasks.append(Task(spec_here.case_id(name, tag_here), tag_here, spec_here, name))
    return tasks


def _lanes(tasks: list[Task], jobs: int) -> list[list[Task]]:
    """Split tasks into at most ``jobs`` lanes of whole cases (a child keeps one case's inputs and oracle for
    all its implementations), balanced by a rough cost. Cases of ``BIG_ELEMENTS`` or more all go to the first
    lane, one after another, so that no two of them hold the GPU's memory at once."""
    cases: dict[ProblemSpec, list[Task]] = {}
    for task in tasks:
        cases.setdefault(task.spec, []).append(task)
    lanes: list[list[Task]] = [[] for _ in range(max(1, jobs))]
    load = [0.0] * len(lanes)
    for spec, group in cases.items():
        big = spec.numel_x >= BIG_ELEMENTS
        i = 0 if big else min(range(len(lanes)), key=lambda j: (load[j], j))
        lanes[i] += group
        load[i] += len(group) * (1 + spec.numel_x / 2**27)  # a first call (compiling) + its size
    return [lane for lane in lanes if lane]


def run_lanes(tasks: list[Task], log, jobs: int, env: dict[str, str] | None = None, *,
              stop: isolated.Stop | None = None, done=None, gpus: list[str] | None = None) -> list[CaseRecord]:
    """Run the tasks in up to ``jobs`` children at once (each lane as ``_run_in_children`` runs it: a crash
    costs one case) and return their records in the order of ``tasks``; ``done`` and ``stop`` as there
    (``done`` is called from the lanes' threads, one at a time). The lanes spread over every visible GPU
    (``gpus``, default ``visible_gpus()``), at least one lane per GPU: lane i runs on GPU i mod their number."""
    if not tasks:
        return []
    stop = stop or isolated.Stop()
    gpus = visible_gpus() if gpus is None else gpus
    lanes = _lanes(tasks, max(jobs, len(gpus)))
    devices = lane_devices(len(lanes), gpus)
    if len(lanes) > 1:
        log(f"  {len(tasks)} runs in {len(lanes)} processes at once"
            + (f" over {len(set(gpus[:len(lanes)]))} GPUs" if gpus else ""))
    lock = threading.Lock()

    def one_at_a_time(record: CaseRecord) -> None:
        with lock:
            done(record)

    report = one_at_a_time if done is not None else None
    with ThreadPoolExecutor(max_workers=len(lanes)) as pool:
        finished = list(pool.map(lambda lane, device: _run_in_children(lane, log, {**(env or {}), **device},
                                                                        stop=stop, done=report), lanes, devices))
    by_id = {record.id: record for records in finished for record in records}
    return [by_id[task.case_id] for task in tasks]


def default_jobs() -> int:
    """How many children run at once: ``$SSD_MATRIX_JOBS``, else ``processes_at_once()``."""
    if value := os.environ.get("SSD_MATRIX_JOBS"):
        if not value.isdigit() or int(value) < 1:
            raise ValueError(f"SSD_MATRIX_JOBS must be a whole number >= 1; got {value!r}")
        return int(value)
    return processes_at_once()


def _not_selected(selected: int, of: int) -> tuple[Status, str]:
    return "not-run", (f"not selected: this session ran {selected} of the {of} cases of the suite (pytest -k or "
                       "node ids)")


def run_matrix(suite: str, impls: tuple[str, ...] | None = None, log=print, *, jobs: int,
               stop: isolated.Stop | None = None, only: set[str] | None = None) -> ResultsFile:
    """Every runnable (case, implementation) of the suite in up to ``jobs`` children at once; the rest recorded
    unsupported or not-run with the reason. ``only``: the tags of the cases to run (a pytest selection); the
    others are recorded not-run, not selected. The run directory is checked first (``check_run_dir``); each
    record is checkpointed as it comes. On SIGINT or SIGTERM (see the module's doc) the unfinished cases are
    recorded not-run, interrupted, and ``results.interrupted`` names the signal: the caller writes and stops."""
    impls = impls or SUITE_IMPLS[suite]
    tags = {tag for tag, _ in (correctness_cases() if suite == "correctness" else stability_cases())}
    if only is not None and not only <= tags:
        raise ValueError(f"{suite}: no such case: {sorted(only - tags)}")
    # Set for the run alone (inherited by the children, recorded in the checkpoints' environment), then os.environ
    # as it was: a matrix run in a longer process (a pytest session) leaves no fixed configuration behind.
    with mock.patch.dict(os.environ, FIXED_CONFIG_ENV):
        return _run(suite, impls, tags, log, jobs, stop, only)


def _run(suite: str, impls: tuple[str, ...], tags: set[str], log, jobs: int, stop: isolated.Stop | None,
         only: set[str] | None) -> ResultsFile:
    results = ResultsFile(suite, check=True)
    runnable = []
    for task in tasks_for(suite, impls):
        case_tag = task.tag.removesuffix("_tiny") if IMPLS[task.impl].interpreter else task.tag
        why = _not_selected(len(only), len(tags)) if only is not None and case_tag not in only else why_not(task)
        if why:
            results.add(_record(task, *why))
        else:
            runnable.append(task)
    log(f"{suite}: {len(runnable)} runs over {len(impls)} implementations"
        f" ({len(results.cases)} more unsupported or not runnable here)")
    results.checkpoint()  # reads the environment once, now; a stopped run writes with it
    start = time.perf_counter()
    compiled = [t for t in runnable if not IMPLS[t.impl].interpreter]
    interpreted = [t for t in runnable if IMPLS[t.impl].interpreter]
    not_runnable = list(results.cases)

    def done(record: CaseRecord) -> None:
        results.add(record)
        results.checkpoint()

    stop = stop or isolated.Stop()
    with stop.handling():
        ordered = run_lanes(compiled, log, jobs, stop=stop, done=done)
        # TRITON_INTERPRET must be set before triton is imported: children of their own
        ordered += run_lanes(interpreted, log, jobs, env=INTERPRETER_ENV, stop=stop, done=done)
    results.cases = not_runnable + ordered  # the order asked, whatever order they finished in
    if stop.signum is not None:
        results.interrupted = stop.name
        log(f"{suite}: {results.interrupted}: stopped; every case not finished is recorded not-run")
    log(f"{suite}: {time.perf_counter() - start:.0f} s; {results.summary()}")
    return results


def _notes(jobs: int) -> list[str]:
    return [FIXED_CONFIG_NOTE, f"cases ran in up to {jobs} processes at once, so first_call_s (compile included) "
                               "is taken on a shared machine: a rough figure, not a measurement of compile time"]


def _write(results: ResultsFile, jobs: int, only: set[str] | None = None) -> Path:
    extra: dict[str, object] = {"notes": _notes(jobs)}
    if only is not None:
        extra["notes"].append(f"only the {len(only)} cases a pytest selection named ran; every other case is "
                              "recorded not-run, not selected")
    if results.interrupted:
        extra["interrupted"] = results.interrupted
    with mock.patch.dict(os.environ, FIXED_CONFIG_ENV):  # the file's environment, read as it is written: the run's
        return results.write(**extra)


def run_and_write(suite: str, only: set[str] | None = None) -> dict[str, dict[str, object]]:
    """Run the suite's matrix (``only`` as in :func:`run_matrix`), write its results file, and return its records
    by case id, each as the file holds it. (pytest captures what a fixture prints; validation/conftest.py prints
    the file with its counts at the end of the session.) A run stopped by SIGINT or SIGTERM writes what finished,
    then raises ``isolated.Interrupted`` (a KeyboardInterrupt naming the signal), which stops pytest."""
    jobs = default_jobs()
    results = run_matrix(suite, jobs=jobs, only=only)
    path = _write(results, jobs, only)
    if results.interrupted:
        raise isolated.Interrupted(f"{suite}: {results.interrupted}; what finished is in {path}", results.interrupted)
    return {r.id: r.as_dict() for r in results.cases}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m validation.matrix", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("suite", nargs="?", choices=("correctness", "stability"))
    parser.add_argument("--impl", nargs="+", default=None, choices=sorted(IMPLS),
                        help="default: every implementation the suite covers")
    parser.add_argument("--jobs", type=int, default=None,
                        help="children at once (default: $SSD_MATRIX_JOBS, else half the CPUs, at most 8)")
    parser.add_argument("--child", nargs=2, type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return _child(*args.child)
    if args.suite is None:
        parser.error("name a suite: correctness or stability")
    if args.jobs is not None and args.jobs < 1:
        parser.error(f"--jobs must be >= 1; got {args.jobs}")
    args.jobs = args.jobs or default_jobs()
    try:
        results = run_matrix(args.suite, tuple(args.impl) if args.impl else None, jobs=args.jobs)
    except RunDirError as err:
        print(f"{args.suite}: {err}", file=sys.stderr)
        return 2
    print(describe(_write(results, args.jobs)))
    return 128 + signal.Signals[results.interrupted].value if results.interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
