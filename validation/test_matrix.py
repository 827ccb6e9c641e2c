"""The matrix's scheduling: cases split over children that run at once, records back in the order asked; a
stopped matrix (SIGTERM, SIGINT, Ctrl-C) writes what finished and leaves no process; the run directory is
checked before the first case."""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest
import torch

from reference import ProblemSpec
from validation import isolated, matrix
from validation.matrix import BIG_ELEMENTS, Task
from validation.provenance import ROOT
from validation.schema import CaseRecord


def _task(tag: str, impl: str, **change: object) -> Task:
    spec = ProblemSpec(**{**matrix.BASE, "batch": 1, "seqlen": 40, "nheads": 2, "headdim": 16, "dstate": 16,
                          "chunk_size": 16, **change})
    return Task(spec.case_id(impl, tag), tag, spec, impl)


def test_lanes_keep_each_case_whole_and_the_big_cases_in_one_lane() -> None:
    big = {"batch": 1, "seqlen": 2**21 + 128, "nheads": 16, "headdim": 64}
    assert ProblemSpec(**{**matrix.BASE, **big}).numel_x >= BIG_ELEMENTS
    tasks = [_task(f"s{seed}", impl, seed=seed) for seed in range(6) for impl in ("cutile", "triton")]
    tasks += [_task("big_a", impl, **big) for impl in ("cutile", "triton")]
    tasks += [_task("big_b", impl, **big, dtype="fp32") for impl in ("cutile", "triton")]
    lanes = matrix._lanes(tasks, jobs=3)
    assert len(lanes) == 3
    assert sorted(t.case_id for lane in lanes for t in lane) == sorted(t.case_id for t in tasks)
    for lane in lanes:  # a case's implementations run one after another in one child (its oracle is shared)
        for task in lane:
            same = [j for j, other in enumerate(lane) if other.spec == task.spec]
            assert same == list(range(same[0], same[0] + len(same)))
    assert {t.tag for t in lanes[0]} >= {"big_a", "big_b"}
    assert not any(t.tag.startswith("big") for lane in lanes[1:] for t in lane)
    assert matrix._lanes(tasks, jobs=1) == [tasks]


def test_default_jobs_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSD_MATRIX_JOBS", "3")
    assert matrix.default_jobs() == 3
    monkeypatch.setenv("SSD_MATRIX_JOBS", "zero")
    with pytest.raises(ValueError, match="SSD_MATRIX_JOBS must be a whole number >= 1; got 'zero'"):
        matrix.default_jobs()
    monkeypatch.delenv("SSD_MATRIX_JOBS")
    assert 1 <= matrix.default_jobs() <= 8


def test_children_at_once_return_every_record_in_the_order_asked() -> None:
    """Real children on the CPU: the float64 chunked reference on three small cases, two children at once."""
    tasks = [_task(f"s{seed}", "reference-chunked", seed=seed, dtype="fp32") for seed in range(3)]
    lines: list[str] = []
    records = matrix.run_lanes(tasks, lines.append, jobs=2)
    assert [r.id for r in records] == [t.case_id for t in tasks]
    assert [r.status for r in records] == ["pass"] * 3, records
    # On a GPU machine the line goes on to say over how many GPUs.
    assert any(line.startswith("  3 runs in 2 processes at once") for line in lines), lines


def _processes_naming(text: str) -> list[str]:
    """The command lines of the processes (other than this one) that mention ``text``: here, a test's tmp_path."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(f"{proc.name}: {cmdline}")
    return found


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="needs /proc to find the children")
@pytest.mark.parametrize("signame,to", [("SIGTERM", "parent"), ("SIGINT", "parent"), ("SIGINT", "group")],
                         ids=["sigterm_to_parent", "sigint_to_parent", "ctrl_c_to_group"])
def test_a_stopped_matrix_writes_what_finished_and_leaves_no_process(signame: str, to: str, tmp_path: Path) -> None:
    """The correctness matrix of the float64 chunked reference (32 CPU cases), stopped once a case has finished:
    SIGTERM as `timeout` and CI runners send it, SIGINT to the parent, and Ctrl-C (SIGINT to the whole process
    group). The results file holds every finished case and the rest as not-run, interrupted; the parent exits
    128 + the signal; no child and no temporary folder outlives it."""
    run_dir, scratch = tmp_path / "run", tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "SSD_RUN_DIR": str(run_dir), "TMPDIR": str(scratch), "PYTHONHASHSEED": "0"}
    parent = subprocess.Popen([sys.executable, "-m", "validation.matrix", "correctness", "--impl",
                               "reference-chunked", "--jobs", "2"], cwd=ROOT, env=env, start_new_session=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    partial = run_dir / "partial" / "correctness.json"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and parent.poll() is None:
        try:
            if any(c["status"] == "pass" for c in json.loads(partial.read_text())["cases"]):
                break
        except (OSError, ValueError):
            pass
        time.sleep(0.2)
    assert parent.poll() is None, f"the matrix ended before it could be stopped: {parent.communicate()[0][-2000:]}"
    signum = getattr(signal, signame)
    out = isolated.signal_and_wait(parent, signum, group=to == "group", timeout=90)
    assert parent.returncode == 128 + signum, out[-3000:]
    data = json.loads((run_dir / "raw" / "correctness.json").read_text())
    assert data["interrupted"] == signame
    statuses = {c["id"]: c["status"] for c in data["cases"]}
    asked = [t.case_id for t in matrix.tasks_for("correctness", ("reference-chunked",))]
    assert sorted(statuses) == sorted(asked), "a case is missing from the stopped run's results"
    assert "pass" in statuses.values() and "crashed" not in statuses.values(), statuses
    stopped = [c for c in data["cases"] if c["status"] == "not-run" and c["reason"].startswith("interrupted")]
    assert stopped and all(signame in c["reason"] for c in stopped), data["cases"]
    assert not (run_dir / "partial" / "correctness.json").exists(), "the checkpoint outlived the results file"
    time.sleep(0.5)
    assert not _processes_naming(str(tmp_path)), "a child outlived the stopped matrix"
    assert not list(scratch.glob("ssd-matrix-*")), "a temporary folder outlived the stopped matrix"


def test_the_run_directory_is_checked_before_any_case(tmp_path: Path) -> None:
    """A run directory that already holds this suite's results file: refused at once, in one line, exit 2."""
    run_dir = tmp_path / "run"
    (run_dir / "raw").mkdir(parents=True)
    (run_dir / "raw" / "correctness.json").write_text("{}")
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "validation.matrix", "correctness", "--impl", "reference-chunked"],
                          cwd=ROOT, env={**os.environ, "SSD_RUN_DIR": str(run_dir)}, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "already holds results of correctness (raw/correctness.json)" in done.stderr
    assert "Traceback" not in done.stderr and not (run_dir / "partial").exists()
    assert time.monotonic() - start < 60


def test_lanes_spread_over_every_visible_gpu() -> None:
    """A stand-in 4-GPU host (no GPU needed): one lane per GPU at least, lane i on GPU i mod 4, each alone."""
    from validation.gpu import lane_devices, visible_gpus

    assert visible_gpus(4, {}) == ["0", "1", "2", "3"]
    assert visible_gpus(2, {"CUDA_VISIBLE_DEVICES": "3,5"}) == ["3", "5"]
    assert visible_gpus(1, {"CUDA_VISIBLE_DEVICES": "GPU-ab12, 7"}) == ["GPU-ab12"]
    assert visible_gpus(0, {}) == [] and lane_devices(3, []) == [{}, {}, {}]
    assert [d["CUDA_VISIBLE_DEVICES"] for d in lane_devices(6, ["0", "1", "2", "3"])] == ["0", "1", "2", "3", "0", "1"]
    tasks = [_task(f"s{seed}", "reference-chunked", seed=seed) for seed in range(8)]
    assert len(matrix._lanes(tasks, max(1, len(visible_gpus(4, {}))))) == 4


def test_each_lane_runs_on_its_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """run_lanes hands lane i the environment of GPU i mod the GPUs' number (the children stand in)."""
    seen: list[tuple[str, str | None]] = []

    def fake_children(lane, log, env=None, *, stop=None, done=None):
        seen.extend((t.case_id, (env or {}).get("CUDA_VISIBLE_DEVICES")) for t in lane)
        return [CaseRecord(id=t.case_id, impl=t.impl, status="pass") for t in lane]

    monkeypatch.setattr(matrix, "_run_in_children", fake_children)
    tasks = [_task(f"s{seed}", "reference-chunked", seed=seed) for seed in range(5)]
    records = matrix.run_lanes(tasks, lambda line: None, jobs=1, gpus=["0", "1"])
    assert [r.id for r in records] == [t.case_id for t in tasks]
    assert {gpu for _, gpu in seen} == {"0", "1"}, seen


def test_a_pytest_selection_runs_only_its_cases_and_records_the_rest_not_selected(tmp_path: Path) -> None:
    """`pytest ... -k TAG` (or node ids) on a matrix module: only the cases it names run; every other case of the
    suite is in the results file too, not-run with the reason, and the file says so in its notes."""
    tag, spec = matrix.correctness_cases()[0]
    test = "validation/test_correctness.py::test_output_and_final_state_match_fp64_oracle"
    node = f"{test}[{spec.case_id('cutile', tag)}]"
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", node], cwd=ROOT,
                          env={**os.environ, "SSD_RUN_DIR": str(tmp_path)}, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    data = json.loads((tmp_path / "raw" / "correctness.json").read_text())
    ran = {c["tag"] for c in data["cases"] if not c.get("reason", "").startswith("not selected")}
    assert ran <= {tag, f"{tag}_tiny"}, ran
    assert [c["status"] for c in data["cases"] if c["id"] == spec.case_id("reference-chunked", tag)] == ["pass"]
    unselected = [c for c in data["cases"] if c["tag"] != tag and not c["tag"].startswith(f"{tag}_")]
    assert unselected and all(c["status"] == "not-run" and c["reason"].startswith("not selected: this session ran 1 "
                                                                                  "of the") for c in unselected)
    assert any(note.startswith("only the 1 cases a pytest selection named ran") for note in data["notes"])


def test_pytest_xdist_runs_a_matrix_on_one_worker_once(tmp_path: Path) -> None:
    """`pytest -n 2` on a matrix module outside a run: its selected tests all go to one worker, so the matrix runs
    once and writes its suite's one results file (two workers each ran it and the second failed on the first's file),
    and the session lists that file at its end."""
    short = [tag for tag, spec in matrix.correctness_cases() if spec.seqlen <= 129]  # quick on a CPU
    env = {key: value for key, value in os.environ.items() if key != "SSD_RUN_DIR"}
    env["TMPDIR"] = str(tmp_path)  # where the session's temporary run directory goes
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "2",
                           "validation/test_correctness.py", "-k", " or ".join(short)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # two tests a case: ours and the float64 chunked reference (each passed on a GPU; ours skipped on a CPU)
    counts = {word: int(n) for n, word in re.findall(r"\b(\d+) (passed|skipped|failed)", done.stdout)}
    assert len(short) >= 4 and counts.get("passed", 0) + counts.get("skipped", 0) == 2 * len(short), (
        done.stdout[-2000:])
    files = list(tmp_path.glob("ssd-pytest-*/raw/correctness.json"))
    assert len(files) == 1, files
    assert str(files[0]) in done.stdout, done.stdout[-2000:]


def test_the_fixed_configuration_is_the_runs_and_goes_with_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The run and its results file have FIXED_CONFIG_ENV in their environment; the calling process gets its own
    back (a matrix run inside a pytest session had left MAMBA_DETERMINISTIC=1 for every later test)."""
    monkeypatch.setenv("SSD_RUN_DIR", str(tmp_path))
    monkeypatch.delenv("MAMBA_DETERMINISTIC", raising=False)
    monkeypatch.setenv("TILEGYM_DISABLE_AUTOTUNE", "0")
    tag, _ = matrix.correctness_cases()[0]
    results = matrix.run_matrix("correctness", ("reference-chunked",), jobs=1, only={tag}, log=lambda _: None)
    assert [r.status for r in results.cases if r.tag == tag] == ["pass"]
    assert "MAMBA_DETERMINISTIC" not in os.environ and os.environ["TILEGYM_DISABLE_AUTOTUNE"] == "0"
    written = json.loads(matrix._write(results, 1, {tag}).read_text())
    assert written["environment"]["env"]["MAMBA_DETERMINISTIC"] == "1"
    assert "MAMBA_DETERMINISTIC" not in os.environ and os.environ["TILEGYM_DISABLE_AUTOTUNE"] == "0"


def test_a_selection_naming_no_case_of_the_suite_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^correctness: no such case: \['nonesuch'\]$"):
        matrix.run_matrix("correctness", ("reference-chunked",), jobs=1, only={"nonesuch"})


def test_every_reference_entry_takes_the_matrixs_call_with_chunk_size() -> None:
    """The matrix calls each entry as ``fn(*inputs.as_args(), chunk_size=...)`` (``_run_task``), the references too
    (``--impl reference-recurrent``): the recurrence, which has no chunks, accepts chunk_size and ignores it."""
    from reference import ssd_recurrent
    from validation.gpu import judge
    from validation.registry import IMPLS

    spec = _task("tiny", "reference-recurrent").spec
    args = spec.make_inputs("cpu").as_args()
    y_ref, state_ref = ssd_recurrent(*args)
    for impl in matrix.REFERENCES:
        y, state = IMPLS[impl].load()(*args, chunk_size=spec.chunk_size)
        if impl == "reference-recurrent":  # the very function: the same numbers, bit for bit
            assert torch.equal(y, y_ref) and torch.equal(state, state_ref), impl
        else:  # judged as the matrix judges it: against the recurrence, on the table's fp64 rows
            failures = judge(impl, "fp64", "ieee", y, state, y_ref, state_ref).failures()
            assert not failures, (impl, failures)


def _tilegym_stubbed(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """ssd_fwd_tilegym on meta tensors as if on a GPU: tilegym's mamba2_chunk_forward replaced by a stand-in that
    records each call's x shape, chunk_size, D and initial state (importing tilegym's module initialises CUDA)."""
    from kernels.tilegym import api as tilegym_api

    calls: list[tuple] = []

    def forward(x, a, b, c, d, dt, init_state, chunk_size=64):
        calls.append((tuple(x.shape), chunk_size, d, init_state))
        return torch.empty_like(x), init_state

    monkeypatch.setattr(tilegym_api, "LIMITS", dataclasses.replace(tilegym_api.LIMITS, needs_cuda=False))
    monkeypatch.setattr(tilegym_api, "tilegym_version", lambda: "1.5.1")
    monkeypatch.setitem(sys.modules, "tilegym.ops.cutile.mamba2", types.SimpleNamespace(mamba2_chunk_forward=forward))
    return calls


def _meta_args(batch: int, seqlen: int, nheads: int, headdim: int, dstate: int) -> list:
    meta = {"device": "meta"}
    return [torch.empty(batch, seqlen, nheads, headdim, dtype=torch.bfloat16, **meta),
            torch.empty(batch, seqlen, nheads, **meta), torch.empty(nheads, **meta),
            torch.empty(batch, seqlen, 1, dstate, dtype=torch.bfloat16, **meta),
            torch.empty(batch, seqlen, 1, dstate, dtype=torch.bfloat16, **meta), None, None]


@pytest.mark.parametrize("sizes,argument", [
    (dict(nheads=6), r"nheads=6 \(x.shape\[2\]\) is not supported; expected nheads a multiple of 4"),
    (dict(dstate=24), r"dstate=24 \(B.shape\[3\]\) is not supported; expected dstate a multiple of 16"),
    (dict(headdim=48), r"headdim=48 \(x.shape\[3\]\) is not supported; expected headdim a power of two up to 64, "
                       r"or a multiple of 64"),
    (dict(headdim=96), r"headdim=96 \(x.shape\[3\]\)"),
    (dict(chunk_size=48), r"chunk_size=48 \(chunk_size\) is not supported; expected chunk_size a power of two"),
    (dict(batch=16384, nheads=4, seqlen=64), r"batch=16384 \(x.shape\[0\]\), nheads=4 \(x.shape\[2\]\) is not "
                                             r"supported; expected batch \* nheads at most 65535"),
])
def test_what_tilegyms_code_cannot_take_is_unsupported_with_the_reason(monkeypatch: pytest.MonkeyPatch, sizes: dict,
                                                                       argument: str) -> None:
    """Outside what its autotune spaces, tiles and grids need, tilegym's mamba2_chunk_forward raised "Unsupported
    Mamba shape: autotune search space is empty" or a cuTile or CUDA error naming no argument: the registry records
    such a case unsupported, citing tilegym's code, and the adapter refuses it naming the argument, before tilegym."""
    from validation.registry import IMPLS

    shape = {"batch": 1, "seqlen": 192, "nheads": 8, "headdim": 64, "dstate": 64, "chunk_size": 64, **sizes}
    chunk_size = shape.pop("chunk_size")
    spec = ProblemSpec(**shape, ngroups=1, chunk_size=chunk_size, dtype="bf16")
    reason = IMPLS["tilegym"].unsupported_reason(spec)
    assert reason is not None and "mamba2.py lines" in reason, reason
    calls = _tilegym_stubbed(monkeypatch)
    from kernels.tilegym import ssd_fwd_tilegym

    with pytest.raises(ValueError, match=rf"ssd_fwd_tilegym: {argument}.* \(TileGym.*mamba2.py lines"):
        ssd_fwd_tilegym(*_meta_args(**shape), chunk_size=chunk_size)
    assert calls == []


def test_tilegym_is_timed_on_a_zero_state_made_once_not_on_the_fills_its_adapter_makes_each_call(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """TileGym's API has no None initial state: the adapter fills zeros for initial_state=None and D=None on every
    call. The benchmark times it on ``Impl.timed_args``, which makes them once, so that each timed call hands TileGym
    the very same tensors (no fill kernel in its time); the other implementations get their arguments untouched."""
    from validation.registry import IMPLS

    calls = _tilegym_stubbed(monkeypatch)
    from kernels.tilegym import api as tilegym_api

    batch, seqlen, nheads, headdim, dstate = 2, 128, 4, 16, 32
    args = [torch.randn(batch, seqlen, nheads, headdim).bfloat16(), torch.rand(batch, seqlen, nheads),
            -torch.rand(nheads), torch.randn(batch, seqlen, 1, dstate).bfloat16(),
            torch.randn(batch, seqlen, 1, dstate).bfloat16(), None, None]
    timed = IMPLS["tilegym"].timed_args(tuple(args))
    assert all(a is b for a, b in zip(timed[:5], args[:5], strict=True)), "the given tensors are passed as they are"
    D, state = timed[5:]
    assert D.shape == (nheads,) and D.dtype == torch.float32 and not D.any()
    assert state.shape == (batch, nheads, headdim, dstate) and state.dtype == torch.float32 and not state.any()
    for _ in range(2):
        tilegym_api.ssd_fwd_tilegym(*timed, chunk_size=64)
    assert all(d is D and s is state for *_, d, s in calls), "each timed call reads the zero state made once"
    tilegym_api.ssd_fwd_tilegym(*args, chunk_size=64)  # a caller's None: zeros made in this call, as before
    *_, d, s = calls[-1]
    assert d is not D and s is not state and not d.any() and not s.any() and s.shape == state.shape
    given = (*args[:5], torch.ones(nheads), torch.ones(batch, nheads, headdim, dstate))
    assert all(a is b for a, b in zip(IMPLS["tilegym"].timed_args(given), given, strict=True))
    for name in ("cutile", "triton"):
        assert all(a is b for a, b in zip(IMPLS[name].timed_args(tuple(args)), args, strict=True)), name


def test_the_registry_and_the_tilegym_adapter_refuse_the_same_sizes(monkeypatch: pytest.MonkeyPatch) -> None:
    """One declaration (kernels.tilegym.LIMITS): the registry's unsupported and the adapter's refusal agree."""
    from kernels.tilegym import ssd_fwd_tilegym
    from validation.registry import IMPLS

    calls, outcomes = _tilegym_stubbed(monkeypatch), set()
    sizes = itertools.product((1, 8192), (4, 6, 8, 12), (16, 32, 48, 64, 96, 128, 192), (16, 24, 48, 64, 100),
                              (32, 48, 64, 128))
    for batch, nheads, headdim, dstate, chunk in sizes:
        spec = ProblemSpec(batch=batch, seqlen=2 * chunk, nheads=nheads, headdim=headdim, ngroups=1, dstate=dstate,
                           chunk_size=chunk, dtype="bf16")
        reason = IMPLS["tilegym"].unsupported_reason(spec)
        before = len(calls)
        try:
            ssd_fwd_tilegym(*_meta_args(batch, 2 * chunk, nheads, headdim, dstate), chunk_size=chunk)
            refused = None
        except ValueError as error:
            refused = str(error)
        assert (reason is None) == (refused is None) == (len(calls) > before), (spec, reason, refused)
        outcomes.add(reason is None)
    assert outcomes == {True, False}, "the sizes span both sides of the requirements"
    # Every case the suites run: none is ruled out by these requirements (the ragged ones are, as before).
    for tag, spec in matrix.correctness_cases() + matrix.stability_cases():
        reason = IMPLS["tilegym"].unsupported_reason(spec)
        assert reason is None or "multiple of chunk_size" in reason, (tag, reason)


def test_the_cuda_graph_case_is_the_gpu_forwards_and_leaves_the_interpreters_tags_alone() -> None:
    # The references are the oracle in torch, not forwards a caller captures: unsupported, with the reason. The Triton
    # interpreter takes each distinct tiny input once, and the graph case's is the initial-state case's: the latter's
    # tag stays, and no interpreter case is named after a graph it does not run.
    tasks = matrix.tasks_for("correctness", matrix.SUITE_IMPLS["correctness"])
    graph = {t.impl: t for t in tasks if t.tag == matrix.GRAPH_TAG}
    assert set(graph) == {"cutile", "triton", "tilegym", "reference-chunked"}
    status, reason = matrix.why_not(graph["reference-chunked"])
    assert status == "unsupported" and "float64 oracle" in reason
    assert all(matrix.why_not(graph[impl]) != ("unsupported", reason) for impl in ("cutile", "triton", "tilegym"))
    interpreter_tags = [t.tag for t in tasks if t.impl == "triton-interpreter"]
    assert "initial_state_tiny" in interpreter_tags
    assert not any(tag.startswith(matrix.GRAPH_TAG) for tag in interpreter_tags)
