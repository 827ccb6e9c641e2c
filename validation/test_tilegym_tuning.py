"""TileGym's tuning kept per shape: the store, the modes and the decisions, with a stand-in for tilegym's module."""

from __future__ import annotations

import json
import os
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest

from kernels.tilegym import mamba2_module
from reference import ProblemSpec
from validation.bench import tilegym_decisions, tilegym_tuning
from validation.bench.tilegym_tuning import TuningStore, marked_problem, problem_key

VERSIONS = {"device": "synthetic-test-gpu", "tilegym": "1.5.1", "cuda_tile": "1.5.0", "tileiras": "13.4.92"}
PROBLEM = problem_key("bf16", 4, 16384, 8, 64, 1, 128, 128, contiguous=True)
SPACE = [SimpleNamespace(BLOCK=b, occupancy=o) for b in (16, 32) for o in (1, 2)]


def out_kernel() -> None:  # what tilegym's search is given: a kernel whose function has a name
    pass


class FakeMamba2:
    """The two things tuning touches in tilegym.ops.cutile.mamba2: exhaustive_search and the *_tune_cache dicts."""

    def __init__(self, best: int = 2) -> None:
        self.searches = 0
        self.best = best
        self._compute_out_tune_cache = {"stale": 1}

        def exhaustive_search(space, stream, grid_fn, kernel, args_fn, hints_fn=None, *, quiet=False):
            assert quiet, "the search runs quietly; the suite prints its own progress"
            self.searches += 1
            return tilegym_tuning._result(space[self.best], 123.0)

        self.exhaustive_search = exhaustive_search
        self.real = exhaustive_search

    def forward(self) -> SimpleNamespace:
        """One kernel's tuning step as tilegym does it: search, then take result.best.config."""
        return self.exhaustive_search(SPACE, None, None, SimpleNamespace(_pyfunc=out_kernel), None).best.config


def _use(mode: str, tmp_path: Path, module: FakeMamba2, shipped: TuningStore | None = None):
    store = TuningStore(tmp_path / "user.json")
    shipped = shipped or TuningStore(tmp_path / "shipped.json", writable=False)
    return tilegym_tuning.use(mode, store, shipped, module=module, versions=VERSIONS, progress=lambda _: None)


def test_tune_searches_once_and_the_choice_is_kept_on_disk(tmp_path: Path) -> None:
    module = FakeMamba2(best=2)
    with _use("tune", tmp_path, module), marked_problem(PROBLEM):
        assert vars(module.forward()) == vars(SPACE[2])
        assert module._compute_out_tune_cache == {}, "a choice made under another mode must not leak in"
    assert module.exhaustive_search is module.real, "tilegym's own search is put back on exit"
    (entry,) = json.loads((tmp_path / "user.json").read_text())["entries"]
    assert entry["config"] == vars(SPACE[2]) and entry["kernel"] == "out_kernel" and entry["problem"] == PROBLEM
    assert entry["device"] == "synthetic-test-gpu" and entry["configs"] == len(SPACE)
    (decision,) = tilegym_tuning.decisions(PROBLEM)
    assert decision["source"].startswith("tuned in this run")

    fresh = FakeMamba2(best=0)  # a new process: the search would now choose another config
    with _use("tune", tmp_path, fresh), marked_problem(PROBLEM):
        assert vars(fresh.forward()) == vars(SPACE[2]), "the stored choice is reused"
    assert fresh.searches == 0
    assert tilegym_tuning.decisions(PROBLEM)[0]["source"].startswith("stored choice")


def test_cached_without_a_choice_takes_the_first_config_and_says_so(tmp_path: Path) -> None:
    module = FakeMamba2()
    with _use("cached", tmp_path, module), marked_problem(PROBLEM + " other"):
        assert vars(module.forward()) == vars(SPACE[0])
    assert module.searches == 0 and not (tmp_path / "user.json").exists()
    (decision,) = tilegym_tuning.decisions(PROBLEM + " other")
    assert decision["source"] == "no stored choice: TileGym's first config" == tilegym_decisions.FIRST_CONFIG
    assert tilegym_decisions.ran_untuned([decision], "cached"), "the case ran a config no autotune chose"


@pytest.mark.parametrize(("decisions", "mode", "untuned"), [
    ([{"source": "stored choice (user.json, tuned <synthetic>)"}], "cached", False),
    ([{"source": "tuned in this run (4 configs, 1 s)"}, {"source": tilegym_decisions.FIRST_CONFIG}], "tune", True),
    ([], "off", True),  # autotune off: TileGym's first config everywhere, and no search to log a decision
    (None, "cached", False),  # a run before the decisions were recorded: nothing to count
    ("not a list", None, False)])
def test_ran_untuned_reads_a_cases_decisions_and_the_runs_mode(decisions, mode, untuned: bool) -> None:
    assert tilegym_decisions.ran_untuned(decisions, mode) is untuned


def test_the_shipped_table_is_used_and_never_written(tmp_path: Path) -> None:
    tuner = FakeMamba2(best=3)
    with _use("tune", tmp_path, tuner), marked_problem(PROBLEM):
        tuner.forward()
    (tmp_path / "user.json").rename(tmp_path / "shipped.json")
    shipped = TuningStore(tmp_path / "shipped.json", writable=False)
    module = FakeMamba2()
    with _use("cached", tmp_path, module, shipped), marked_problem(PROBLEM):
        assert vars(module.forward()) == vars(SPACE[3])
    assert tilegym_tuning.decisions(PROBLEM)[0]["source"].startswith("shipped choice (shipped.json")
    with pytest.raises(PermissionError, match="shipped table"):
        shipped.put({**VERSIONS, "kernel": "k", "problem": "p"})


def test_a_choice_is_kept_per_tileiras_and_one_stored_without_it_serves_any_and_says_so(tmp_path: Path) -> None:
    store = TuningStore(tmp_path / "user.json")
    store.put({**VERSIONS, "tileiras": "13.5.37", "kernel": "out_kernel", "problem": PROBLEM,
               "config": vars(SPACE[3]), "mean_us": 1.0, "tuned_at": "2026-01-01T00:00:00Z"})
    module = FakeMamba2(best=1)
    with _use("tune", tmp_path, module), marked_problem(PROBLEM):
        assert vars(module.forward()) == vars(SPACE[1]), "another tileiras's choice is not this one's"
    assert module.searches == 1
    entries = json.loads((tmp_path / "user.json").read_text())["entries"]
    assert sorted((e["tileiras"], e["config"]["BLOCK"], e["config"]["occupancy"]) for e in entries) == [
        ("13.4.92", 16, 2), ("13.5.37", 32, 2)]

    legacy = {k: v for k, v in VERSIONS.items() if k != "tileiras"}
    shipped = TuningStore(tmp_path / "shipped.json")
    shipped.put({**legacy, "kernel": "out_kernel", "problem": PROBLEM + " new", "config": vars(SPACE[2]),
                 "mean_us": 2.0, "tuned_at": "2026-11-30T10:52:06Z"})
    module = FakeMamba2()
    with _use("cached", tmp_path, module, TuningStore(tmp_path / "shipped.json", writable=False)), \
            marked_problem(PROBLEM + " new"):
        assert vars(module.forward()) == vars(SPACE[2])
    (decision,) = tilegym_tuning.decisions(PROBLEM + " new")
    assert decision["source"] == ("shipped choice (shipped.json, tuned 2026-11-30T10:52:06Z, under a tileiras it did "
                                  "not record; this run's is 13.4.92)")


def test_a_stored_config_outside_the_search_space_is_tuned_again(tmp_path: Path) -> None:
    store = TuningStore(tmp_path / "user.json")
    store.put({**VERSIONS, "kernel": "out_kernel", "problem": PROBLEM, "config": {"BLOCK": 999, "occupancy": 1},
               "mean_us": 1.0, "tuned_at": "2026-01-01T00:00:00Z"})
    module = FakeMamba2(best=1)
    with _use("cached", tmp_path, module), marked_problem(PROBLEM):
        assert vars(module.forward()) == vars(SPACE[0])
    with _use("tune", tmp_path, module), marked_problem(PROBLEM):
        assert vars(module.forward()) == vars(SPACE[1])
    assert module.searches == 1


def test_off_disables_tilegyms_autotune_and_restores_the_environment(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("TILEGYM_DISABLE_AUTOTUNE", raising=False)
    module = FakeMamba2()
    with _use("off", tmp_path, module):
        assert os.environ["TILEGYM_DISABLE_AUTOTUNE"] == "1"
        assert module.exhaustive_search is module.real
    assert "TILEGYM_DISABLE_AUTOTUNE" not in os.environ


def test_misuse_is_refused_clearly(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"tilegym tuning mode: expected one of tune, cached, off; got 'fast'"):
        with _use("fast", tmp_path, FakeMamba2()):
            pass
    module = FakeMamba2()
    with _use("tune", tmp_path, module), pytest.raises(RuntimeError, match="outside its mamba2_chunk_forward"):
        module.forward()
    assert module.exhaustive_search is module.real, "restored after an error too"
    (tmp_path / "bad.json").write_text(json.dumps({"format": "other/9", "entries": []}))
    with pytest.raises(ValueError, match=r"bad.json: format 'other/9'; expected 'ssd-tilegym-tuning/1'"):
        TuningStore(tmp_path / "bad.json")


def test_merge_puts_several_tuning_runs_into_one_table(tmp_path: Path, capsys) -> None:
    for i in range(2):
        TuningStore(tmp_path / f"gpu{i}.json").put(
            {**VERSIONS, "kernel": "out_kernel", "problem": f"p{i}", "config": {}, "mean_us": 1.0,
             "tune_s": 1.0, "tuned_at": "2026-01-01T00:00:00Z"})
    out = tmp_path / "table.json"
    assert tilegym_tuning.main(["merge", str(out), str(tmp_path / "gpu0.json"), str(tmp_path / "gpu1.json")]) == 0
    assert len(TuningStore(out).entries) == 2
    assert tilegym_tuning.main(["show", str(out)]) == 0
    assert capsys.readouterr().out.count("synthetic-test-gpu") == 2


def test_each_problem_starts_with_empty_tilegym_caches(tmp_path: Path) -> None:
    """TileGym's chunk-cumsum cache key ignores dstate; every problem, read from the forward's arguments, must
    still get its own lookup."""
    module = FakeMamba2(best=1)
    problems = []

    def mamba2_chunk_forward(x, a, b, c, d, dt, init_state, chunk_size=64) -> SimpleNamespace:
        problems.append(tilegym_tuning.current_problem())
        cache = module._compute_out_tune_cache  # caches its choice in the process, as TileGym does
        if "cfg" not in cache:
            cache["cfg"] = module.forward()
        return cache["cfg"]

    def args(dstate: int) -> tuple:  # in the order kernels.tilegym.ssd_fwd_tilegym passes them
        x, dt, A, B, C, D, h0 = ProblemSpec(batch=1, seqlen=16, nheads=2, headdim=4, ngroups=1, dstate=dstate,
                                            chunk_size=8, dtype="fp32", regime="typical", seed=0,
                                            with_D=True, with_initial_state=True).make_inputs("cpu").as_args()
        return x, A, B, C, D, dt, h0

    module.mamba2_chunk_forward = mamba2_chunk_forward
    first, second = args(4), args(8)
    with _use("tune", tmp_path, module):
        for call in (first, first, second):
            module.mamba2_chunk_forward(*call, chunk_size=8)
        assert module.mamba2_chunk_forward is not mamba2_chunk_forward
    assert module.mamba2_chunk_forward is mamba2_chunk_forward, "TileGym's forward is put back on exit"
    assert module.searches == 2, "one search per problem: none for the repeated one, one for the new one"
    assert problems == [problem_key("fp32", 1, 16, 2, 4, 1, n, 8, contiguous=True) for n in (4, 4, 8)]
    assert tilegym_tuning.decisions(problems[-1])[0]["source"].startswith("tuned in this run")
    assert tilegym_tuning.current_problem() is None


# --- The command line (python -m validation.bench.tilegym_tuning): every misuse is one line and exit 2, before any
# child starts or any file is written; merge replaces an existing table only with --overwrite. ---


def _table(path: Path, *problems: str) -> Path:
    """A tuning file with one choice per problem."""
    for problem in problems:
        TuningStore(path).put({**VERSIONS, "kernel": "out_kernel", "problem": problem, "config": {}, "mean_us": 1.0,
                               "tune_s": 1.0, "tuned_at": "2026-01-01T00:00:00Z"})
    return path


def _refused(argv: list[str], capsys) -> str:
    """The one error line of a refused command line (exit 2, no traceback)."""
    with pytest.raises(SystemExit) as stop:
        tilegym_tuning.main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2, err
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith("python -m validation.bench."), err
    return err.strip().splitlines()[-1]


@pytest.fixture
def no_warm(monkeypatch) -> list:
    """warm's children replaced by a record of the call (a refused command line starts none)."""
    calls: list = []
    monkeypatch.setattr(tilegym_tuning, "warm", lambda shapes, *, jobs: calls.append((list(shapes), jobs)) or 0)
    return calls


def test_warm_on_a_machine_without_a_gpu_says_it_needs_one_and_starts_nothing(no_warm, monkeypatch, capsys) -> None:
    monkeypatch.setattr("validation.gpu.HAS_CUDA", False)
    assert "warm needs a GPU" in _refused(["warm", "--jobs", "1"], capsys)
    assert no_warm == []


@pytest.mark.parametrize("argv,named", [
    (["warm", "--jobs", "0"], "argument --jobs: expected an integer >= 1; got '0'"),
    (["warm", "--jobs", "-1"], "argument --jobs: expected an integer >= 1; got '-1'"),
    (["warm", "--shapes", "1x"], "argument --shapes: expected SEQLENxDSTATE"),
    (["warm", "--shapes", "abc"], "argument --shapes: expected SEQLENxDSTATE"),
], ids=["jobs-0", "jobs-negative", "shape-half", "shape-word"])
def test_warms_bad_arguments_are_refused_by_name(argv, named, no_warm, monkeypatch, capsys) -> None:
    monkeypatch.setattr("validation.gpu.HAS_CUDA", True)  # what a GPU machine would say: the arguments decide
    assert named in _refused(argv, capsys)
    assert no_warm == []


def test_show_and_merge_refuse_what_is_not_a_tuning_file(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("SSD_TILEGYM_TUNING", str(tmp_path / "no-store.json"))
    (tmp_path / "notes.md").write_text("# not json\n")
    (tmp_path / "list.json").write_text("[]")
    assert "no stored choices: the user's store" in _refused(["show"], capsys)
    assert "missing.json: no such file" in _refused(["show", str(tmp_path / "missing.json")], capsys)
    assert "notes.md: not a tuning file" in _refused(["show", str(tmp_path / "notes.md")], capsys)
    assert ": a directory" in _refused(["show", str(tmp_path)], capsys)
    assert "list.json: format 'list'" in _refused(["show", str(tmp_path / "list.json")], capsys)
    out = tmp_path / "table.json"
    assert "missing.json: no such file" in _refused(["merge", str(out), str(tmp_path / "missing.json")], capsys)
    assert "notes.md: not a tuning file" in _refused(["merge", str(out), str(tmp_path / "notes.md")], capsys)
    assert not out.exists(), "a refused merge writes nothing"
    (tmp_path / "a-file").write_text("")
    gpu0 = _table(tmp_path / "gpu0.json", "p0")
    assert "cannot write it" in _refused(["merge", str(tmp_path / "a-file" / "t.json"), str(gpu0)], capsys)


def test_merge_replaces_an_existing_table_only_with_overwrite_and_then_with_exactly_the_files(tmp_path: Path,
                                                                                             capsys) -> None:
    gpu0, gpu1 = _table(tmp_path / "gpu0.json", "p0"), _table(tmp_path / "gpu1.json", "p1")
    table = _table(tmp_path / "table.json", "old")
    before = table.read_text()
    assert "table.json exists; pass --overwrite" in _refused(["merge", str(table), str(gpu0)], capsys)
    assert table.read_text() == before, "not folded in silently"
    assert tilegym_tuning.main(["merge", str(table), str(gpu0), "--overwrite"]) == 0
    assert {e["problem"] for e in TuningStore(table).entries.values()} == {"p0"}
    assert tilegym_tuning.main(["merge", str(table), str(table), str(gpu1), "--overwrite"]) == 0
    assert {e["problem"] for e in TuningStore(table).entries.values()} == {"p0", "p1"}, "OUT named as a FILE: kept"


def test_the_hidden_warm_one_is_not_in_the_help(capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        tilegym_tuning.main(["--help"])
    assert stop.value.code == 0 and "warm-one" not in capsys.readouterr().out


def test_untuned_names_the_points_where_a_kernel_has_no_choice_for_this_gpu_and_stack(tmp_path: Path) -> None:
    """A point is tuned when each of TileGym's three kernels has a choice, in the user's store or the shipped table
    (one stored before the key had the tileiras counts), for this device and versions; another GPU's does not."""
    from kernels.tilegym import launch_names

    kernels = launch_names(128)

    def entry(seqlen: int, kernel: str, **over: str) -> dict[str, object]:
        return {**VERSIONS, "kernel": kernel, "problem": problem_key("bf16", 4, seqlen, 8, 64, 1, 64, 128, True),
                "config": {}, **over}

    def store(name: str, entries: list[dict[str, object]]) -> TuningStore:
        (tmp_path / name).write_text(json.dumps({"format": tilegym_tuning.FORMAT, "entries": entries}))
        return TuningStore(tmp_path / name, writable=False)

    user = store("user.json", [entry(2048, k) for k in kernels] + [entry(4096, k) for k in kernels[:2]]
                 + [entry(16384, k, device="another-gpu") for k in kernels])
    shipped = store("shipped.json", [{k: v for k, v in entry(1024, k).items() if k != "tileiras"} for k in kernels]
                    + [entry(4096, kernels[2])])
    points = [(1024, 64), (2048, 64), (4096, 64), (8192, 64), (16384, 64)]
    assert tilegym_tuning.untuned(points, user, shipped, versions=VERSIONS) == [(8192, 64), (16384, 64)]
    assert tilegym_tuning.untuned(points, user, store("empty.json", []), versions=VERSIONS) == [
        (1024, 64), (4096, 64), (8192, 64), (16384, 64)]


def test_tilegym_is_imported_without_the_warning_of_its_tilecpp_probe(tmp_path: Path) -> None:
    """mamba2_module() imports TileGym's cuTile module without the warning that tilegym's import gives where no nvcc
    >= 13.3 is on PATH (about its TileCpp backend, which the suite never calls), and lets any other warning of the
    import through. A stand-in package on sys.path plays tilegym, whose real import needs a GPU."""
    ops = tmp_path / "tilegym" / "ops"
    (ops / "cutile").mkdir(parents=True)
    (tmp_path / "tilegym" / "__init__.py").write_text("from . import ops\n")
    (ops / "__init__.py").write_text(
        "import warnings\n"
        "warnings.warn('TileCpp backend is not available: nvcc >= 13.3 is required (set TILECPP_NVCC_PATH or "
        "install CUDA 13.3 or newer on PATH)', UserWarning)\n"
        "warnings.warn('another warning of the import', UserWarning)\n")
    (ops / "cutile" / "__init__.py").write_text("")
    (ops / "cutile" / "mamba2.py").write_text("def mamba2_chunk_forward(*args):\n    pass\n")

    def tilegym_modules() -> dict[str, object]:
        return {name: module for name, module in sys.modules.items() if name.split(".")[0] == "tilegym"}

    saved, path = tilegym_modules(), list(sys.path)
    for name in saved:
        del sys.modules[name]
    sys.path.insert(0, str(tmp_path))
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            module = mamba2_module()
    finally:
        sys.path[:] = path
        for name in tilegym_modules():
            del sys.modules[name]
        sys.modules.update(saved)
    assert Path(module.__file__) == ops / "cutile" / "mamba2.py"
    assert [str(w.message) for w in caught] == ["another warning of the import"]
