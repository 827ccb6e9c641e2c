"""TileGym's autotune, run once per shape and kept on disk.

tilegym 1.5.1 tunes each kernel of its forward (chunk cumsum, state pass, output) with cuTile's
``exhaustive_search`` on the first call of every new shape (about 5 minutes on an H200, ~110
configs) and keeps the choice only for the life of the process. While :func:`use` is active, the
``exhaustive_search`` name inside ``tilegym.ops.cutile.mamba2`` is replaced by a lookup in a
:class:`TuningStore`, keyed by device, tilegym, cuda-tile and tileiras versions, kernel and problem (each call of
TileGym's ``mamba2_chunk_forward`` is marked with its problem, :func:`problem_of` its arguments). A choice
stored before the key had the tileiras (the shipped table's H200 choices) serves under any tileiras, and its
decision says so. The modes:

- ``tune``: a stored choice is used; otherwise TileGym's own search runs and its choice is stored.
- ``cached``: a stored choice is used; otherwise TileGym's first config, and the decision says so.
- ``off``: no lookup; ``TILEGYM_DISABLE_AUTOTUNE=1`` gives TileGym's first config everywhere.

Choices are looked up in the user's store (``SSD_TILEGYM_TUNING``, else
``$XDG_CACHE_HOME/ssd-suite/tilegym-tuning.json``), then in the table shipped with the suite
(``validation/bench/tilegym_tuned.json``: tuned on the lent H200s and on the H100 80GB HBM3 at the whole sweep).
Every decision is logged, so the
benchmark writes into its results which config each TileGym kernel ran with and where it came from.

    python -m validation.bench.tilegym_tuning show [FILE]           # the stored choices (default: the user's store)
    python -m validation.bench.tilegym_tuning merge OUT FILE...     # several tuning runs into one new table
    python -m validation.bench.tilegym_tuning warm --jobs 24        # compile the search spaces in parallel (a GPU)

A tuning run on a GPU: ``python -m validation.bench.run --impl tilegym --tilegym-tuning tune`` runs ``warm`` for its
points without a stored choice first (compiling is most of the autotune's time and is parallel there), then times.
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import datetime
import functools
import importlib.metadata
import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

from kernels.tilegym import launch_names, mamba2_module, ssd_fwd_tilegym
from reference.checks import dtype_name
from validation.bench.sweep import DSTATES, POINT, SEQLENS, point_arg, positive_int
from validation.bench.tilegym_decisions import FIRST_CONFIG
from validation.results import write_json_atomic

__all__ = ["MODES", "SHIPPED", "TuningStore", "current_problem", "decisions", "marked_problem", "problem_key",
           "problem_of", "untuned", "use", "user_store_path", "warm", "warm_shapes"]

MODES = ("tune", "cached", "off")
FORMAT = "ssd-tilegym-tuning/1"
SHIPPED = Path(__file__).with_name("tilegym_tuned.json")

_log: list[dict[str, object]] = []
_problem: contextvars.ContextVar[str | None] = contextvars.ContextVar("tilegym_problem", default=None)


def problem_key(dtype: str, batch: int, seqlen: int, nheads: int, headdim: int, ngroups: int, dstate: int,
                chunk_size: int, contiguous: bool) -> str:
    """The problem a TileGym tuning choice belongs to (TileGym's own key: its arguments' shapes and strides)."""
    return (f"{dtype} b{batch} l{seqlen} h{nheads} p{headdim} g{ngroups} n{dstate} c{chunk_size}"
            f"{'' if contiguous else ' strided'}")


def problem_of(x, dt, B, C, chunk_size: int) -> str:
    """:func:`problem_key` of a call with these (checked) inputs."""
    batch, seqlen, nheads, headdim = x.shape
    ngroups, dstate = B.shape[2], B.shape[3]
    contiguous = all(t.is_contiguous() for t in (x, dt, B, C))
    return problem_key(dtype_name(x.dtype), batch, seqlen, nheads, headdim, ngroups, dstate, chunk_size, contiguous)


def current_problem() -> str | None:
    """The problem of the TileGym forward call in progress, None outside one."""
    return _problem.get()


@contextlib.contextmanager
def marked_problem(key: str) -> Iterator[None]:
    """TileGym calls inside belong to problem ``key``."""
    token = _problem.set(key)
    try:
        yield
    finally:
        _problem.reset(token)


def user_store_path() -> Path:
    if path := os.environ.get("SSD_TILEGYM_TUNING"):
        return Path(path)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "ssd-suite" / "tilegym-tuning.json"


def decisions(key: str) -> list[dict[str, object]]:
    """What was decided for problem ``key`` in this process, one entry per kernel, latest first."""
    seen: dict[str, dict[str, object]] = {}
    for entry in reversed(_log):
        if entry["problem"] == key:
            seen.setdefault(str(entry["kernel"]), entry)
    return list(seen.values())


@functools.cache
def _versions() -> dict[str, str]:
    import torch

    from validation.provenance import tileiras

    return {"device": torch.cuda.get_device_name(), "tilegym": importlib.metadata.version("tilegym"),
            "cuda_tile": importlib.metadata.version("cuda-tile"), "tileiras": tileiras()[1] or "unknown"}


class TuningStore:
    """Choices in one JSON file; every new choice is written at once (atomically, merged with the file)."""

    def __init__(self, path: Path, *, writable: bool = True) -> None:
        self.path = Path(path)
        self.writable = writable
        self.entries = self._read()

    def _read(self) -> dict[str, dict[str, object]]:
        """The file's entries by key ({} where there is no file); ValueError for a file that is not a store."""
        if not self.path.exists():
            return {}
        try:
            data = json.loads(self.path.read_text())
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise ValueError(f"{self.path}: not a tuning file ({FORMAT} JSON): {err}") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            found = data.get("format") if isinstance(data, dict) else type(data).__name__
            raise ValueError(f"{self.path}: format {found!r}; expected {FORMAT!r}")
        try:
            return {_entry_key(entry): entry for entry in data["entries"]}
        except (KeyError, TypeError, AttributeError) as err:
            raise ValueError(f"{self.path}: an entry lacks {err} (every entry has device, tilegym, cuda_tile, kernel "
                             "and problem)") from None

    def get(self, **key: str) -> dict[str, object] | None:
        return self.entries.get(_entry_key(key))

    def put(self, entry: dict[str, object]) -> None:
        if not self.writable:
            raise PermissionError(f"{self.path} is the shipped table; new choices go to the user's store")
        self.entries = {**self._read(), _entry_key(entry): entry}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self.path, self.payload(), overwrite=True)

    def payload(self) -> dict[str, object]:
        return {"format": FORMAT, "entries": [self.entries[k] for k in sorted(self.entries)]}


# The tileiras of a choice stored before the key had it (the shipped table's H200 entries, tuned 2026-11-30).
UNRECORDED = "unrecorded"


def _stores(store: TuningStore | None, shipped: TuningStore | None) -> tuple[TuningStore, TuningStore]:
    """``store`` and ``shipped``, each defaulting to its file: the user's store and the table shipped with the suite."""
    return (store if store is not None else TuningStore(user_store_path()),
            shipped if shipped is not None else TuningStore(SHIPPED, writable=False))


def _stored(key: dict[str, str], store: TuningStore, shipped: TuningStore) -> Iterator[tuple[TuningStore, str, dict]]:
    """The entries for ``key`` (each also under a tileiras it did not record), the user's store's before the shipped
    table's, each with its file and where it came from."""
    for source, where in ((store, "stored"), (shipped, "shipped")):
        entry = source.get(**key) or source.get(**{**key, "tileiras": UNRECORDED})
        if entry is not None:
            yield source, where, entry


def untuned(points: Sequence[tuple[int, int]], store: TuningStore | None = None, shipped: TuningStore | None = None,
            *, versions: dict[str, str] | None = None) -> list[tuple[int, int]]:
    """The benchmark's points (seqlen, dstate) where a kernel of TileGym's forward has no choice stored for this GPU
    and stack, in the user's store or the shipped table: those a ``tune`` run searches. ``store``, ``shipped`` and
    ``versions`` default as in :func:`use`."""
    store, shipped = _stores(store, shipped)
    versions = versions or _versions()

    def tuned(seqlen: int, dstate: int) -> bool:
        problem = problem_key(POINT["dtype"], POINT["batch"], seqlen, POINT["nheads"], POINT["headdim"],
                              POINT["ngroups"], dstate, POINT["chunk_size"], contiguous=True)
        return all(next(_stored({**versions, "kernel": kernel, "problem": problem}, store, shipped), None)
                   for kernel in launch_names(POINT["chunk_size"]))
    return [point for point in points if not tuned(*point)]


def _entry_key(entry: dict[str, object]) -> str:
    return "|".join(str(entry.get(k, UNRECORDED) if k == "tileiras" else entry[k])
                    for k in ("device", "tilegym", "cuda_tile", "tileiras", "kernel", "problem"))


def _kernel_name(kernel: object) -> str:
    return getattr(kernel, "_pyfunc", kernel).__name__


def _find(search_space: Sequence[SimpleNamespace], config: dict[str, object]) -> SimpleNamespace | None:
    return next((cfg for cfg in search_space if vars(cfg) == config), None)


def _result(config: SimpleNamespace, mean_us: float) -> object:
    from cuda.tile.tune import Measurement, TuningResult

    best = Measurement(config=config, mean_us=mean_us, num_samples=0, error_margin_us=0.0)
    return TuningResult(best=best, successes=(best,), failures=())


@contextlib.contextmanager
def use(mode: str, store: TuningStore | None = None, shipped: TuningStore | None = None, *,
        module: object = None, versions: dict[str, str] | None = None, progress=None) -> Iterator[None]:
    """TileGym's forward tuned per ``mode`` while inside (see :func:`_patched` for what is replaced).

    ``module`` (tilegym's ``mamba2`` by default) and ``versions`` (device, tilegym, cuda_tile, tileiras; read from
    the GPU, the installed packages and ``tileiras --version`` by default) let the CPU tests stand in for both.
    """
    if mode not in MODES:
        raise ValueError(f"tilegym tuning mode: expected one of {', '.join(MODES)}; got {mode!r}")
    mamba2 = module if module is not None else mamba2_module()

    store, shipped = _stores(store, shipped)
    real_search = mamba2.exhaustive_search  # TileGym's own, for the misses in tune mode
    say = progress or (lambda message: print(message, file=sys.stderr, flush=True))

    def search(search_space, stream, grid_fn, kernel, args_fn, hints_fn=None, **kwargs):
        key = {**(versions or _versions()), "kernel": _kernel_name(kernel), "problem": current_problem()}
        if key["problem"] is None:
            raise RuntimeError("tilegym tuning: a TileGym search outside its mamba2_chunk_forward")
        search_space = list(search_space)
        for source, where, entry in _stored(key, store, shipped):
            if (config := _find(search_space, entry["config"])) is not None:
                under = ("" if "tileiras" in entry else
                         f", under a tileiras it did not record; this run's is {key.get('tileiras', UNRECORDED)}")
                _log.append({**key, "source": f"{where} choice ({source.path.name}, tuned {entry['tuned_at']}{under})",
                             "config": vars(config), "tuned_mean_us": entry["mean_us"]})
                return _result(config, float(entry["mean_us"]))
        if mode == "cached":
            _log.append({**key, "source": FIRST_CONFIG, "config": vars(search_space[0])})
            return _result(search_space[0], float("nan"))
        say(f"tilegym tuning: {key['kernel']} for {key['problem']}: {len(search_space)} configs ...")
        start = time.perf_counter()
        result = real_search(search_space, stream, grid_fn, kernel, args_fn, hints_fn, quiet=True, **kwargs)
        tune_s = time.perf_counter() - start
        entry = {**key, "config": vars(result.best.config), "mean_us": result.best.mean_us,
                 "configs": len(search_space), "failed": len(result.failures), "tune_s": round(tune_s, 1),
                 "tuned_at": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
        store.put(entry)
        _log.append({**key, "source": f"tuned in this run ({len(search_space)} configs, {tune_s:.0f} s)",
                     "config": entry["config"], "tuned_mean_us": entry["mean_us"]})
        say(f"tilegym tuning: {key['kernel']} for {key['problem']}: {result.best.config} "
            f"{result.best.mean_us:.1f} us, {tune_s:.0f} s")
        return result

    with _patched(mamba2, None if mode == "off" else search):
        yield


@contextlib.contextmanager
def _patched(mamba2: object, search) -> Iterator[None]:
    """TileGym's ``mamba2`` module with ``search`` as its ``exhaustive_search`` (None: autotune off) while inside.

    Its ``mamba2_chunk_forward`` marks each call with its problem (:func:`problem_of` its arguments). Each
    problem starts with empty TileGym caches: TileGym keys some choices on fewer dims than the problem (its
    chunk cumsum ignores dstate), and a choice made under another mode must not leak in. Everything is put
    back on exit, the environment too.
    """
    real_forward = getattr(mamba2, "mamba2_chunk_forward", None)
    last = {"problem": None}

    def forward(x, a, b, c, d, dt, init_state, *, chunk_size):  # as kernels.tilegym.ssd_fwd_tilegym calls it
        problem = problem_of(x, dt, b, c, chunk_size)
        if problem != last["problem"]:
            _clear(mamba2)
            last["problem"] = problem
        with marked_problem(problem):
            return real_forward(x, a, b, c, d, dt, init_state, chunk_size=chunk_size)

    with mock.patch.dict(os.environ), contextlib.ExitStack() as patches:
        if search is None:
            os.environ["TILEGYM_DISABLE_AUTOTUNE"] = "1"
        else:
            os.environ.pop("TILEGYM_DISABLE_AUTOTUNE", None)
            patches.enter_context(mock.patch.object(mamba2, "exhaustive_search", search))
            if real_forward is not None:
                patches.enter_context(mock.patch.object(mamba2, "mamba2_chunk_forward", forward))
        patches.callback(_clear, mamba2)
        _clear(mamba2)
        yield


def _clear(mamba2: object) -> None:
    # TileGym keeps each choice in module-level dicts named _*_tune_cache; a choice made under
    # another mode must not leak into this one.
    for name in dir(mamba2):
        if name.endswith("_tune_cache"):
            getattr(mamba2, name).clear()


# TileGym's chunk-entry states hold batch x chunks x heads x headdim x dstate elements, 16 x seqlen x dstate at the
# benchmark's point: from 2**27 tokens x dstate on they pass 2**31 and its kernels compile with 64-bit indices.
_INT64_FROM = 2**31 // (POINT["batch"] * POINT["nheads"] * POINT["headdim"] // POINT["chunk_size"])


def warm_shapes(points: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The shapes whose compiled kernels cover ``points`` (seqlen, dstate): a length that is a multiple of 2048
    compiles as 2048 does (16 chunks divide it), unless its states need 64-bit indices; any other length as itself."""
    def stand_in(seqlen: int, dstate: int) -> tuple[int, int]:
        if seqlen % 2048 or seqlen * dstate >= _INT64_FROM:
            return seqlen, dstate
        return 2048, dstate
    return sorted({stand_in(seqlen, dstate) for seqlen, dstate in points})


# Shapes whose compiled kernels cover the benchmark sweep: cuTile specialises on how far sizes divide
# (8 chunks at 1024 tokens, 16 from 2048 on), and on the index width (the chunk-entry states of
# 262144 tokens x dstate 512 reach 2**31 elements).
WARM_SHAPES = tuple(warm_shapes([(seqlen, dstate) for seqlen in SEQLENS for dstate in DSTATES]))


def warm(shapes: Sequence[tuple[int, int]] = WARM_SHAPES, *, jobs: int) -> int:
    """Compile every config of TileGym's search spaces for ``shapes`` in ``jobs`` processes at once.

    Compiling (~110 configs a shape, one tileiras call each) is most of TileGym's autotune; the
    processes fill cuTile's disk cache, so a ``tune`` run that follows only times. Each process takes
    every ``jobs``-th config of each kernel; GPUs are shared round-robin. Returns the failed processes. The
    processes are ``validation.isolated``'s: SIGINT or SIGTERM stops them all, then raises ``Interrupted``.
    """
    from validation import isolated
    from validation.gpu import lane_devices, visible_gpus

    gpus = visible_gpus()
    start = time.perf_counter()
    shape_args = [f"{seqlen}x{dstate}" for seqlen, dstate in shapes]
    stop = isolated.Stop()
    with stop.handling():
        procs = [isolated.popen("validation.bench.tilegym_tuning", "warm-one", str(i), str(jobs), *shape_args,
                                stop=stop, env=env) for i, env in enumerate(lane_devices(jobs, gpus))]
        failed = sum(proc.wait() != 0 for proc in procs)
    print(f"tilegym warm: {jobs} processes on {len(gpus)} GPUs, {len(shapes)} shapes, "
          f"{time.perf_counter() - start:.0f} s, {failed} failed", file=sys.stderr, flush=True)
    stop.raise_if_stopped()
    return failed


def _warm_one(index: int, of: int, shapes: Sequence[tuple[int, int]]) -> None:
    import cuda.tile as ct
    import torch

    from reference import ProblemSpec

    def compile_slice(search_space, stream, grid_fn, kernel, args_fn, hints_fn=None, **kwargs):
        search_space = list(search_space)
        for cfg in search_space[index::of]:
            hints = hints_fn(cfg) if hints_fn is not None else {}
            try:
                ct.launch(stream, grid_fn(cfg), kernel.replace_hints(**hints), args_fn(cfg))
            except Exception as error:  # noqa: BLE001 -- only a cache warmer: the real search meets this config
                # again and records its failure in its result
                print(f"tilegym warm: {_kernel_name(kernel)} {vars(cfg)}: {type(error).__name__}: {error}",
                      file=sys.stderr, flush=True)
        return _result(search_space[0], float("nan"))

    with _patched(mamba2_module(), compile_slice):
        for seqlen, dstate in shapes:
            inputs = ProblemSpec(seqlen=seqlen, dstate=dstate, **POINT).make_inputs(torch.device("cuda"))
            ssd_fwd_tilegym(*inputs.as_args(), chunk_size=POINT["chunk_size"])
            torch.cuda.synchronize()
            del inputs
            torch.cuda.empty_cache()


def _show(store: TuningStore) -> None:
    for entry in store.entries.values():
        print(f"{entry['device']} {entry['problem']:<40} {entry['kernel']:<24} {entry['mean_us']:9.1f} us "
              f"{entry['tune_s']:6.0f} s  {entry['config']}")


def _store(parser: argparse.ArgumentParser, path: Path) -> TuningStore:
    """The tuning file ``path``, which must exist; anything else is the parser's error (one line, exit 2)."""
    if not path.is_file():
        parser.error(f"{path}: {'a directory' if path.is_dir() else 'no such file'}; expected a tuning file "
                     f"({FORMAT} JSON)")
    try:
        return TuningStore(path, writable=False)
    except (OSError, ValueError) as err:
        parser.error(str(err))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m validation.bench.tilegym_tuning", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="{show,merge,warm}")
    show = sub.add_parser("show", help="list the stored choices")
    show.add_argument("file", nargs="?", type=Path, default=None,
                      help=f"a tuning file (default: the user's store, $SSD_TILEGYM_TUNING, else "
                           f"$XDG_CACHE_HOME/ssd-suite/tilegym-tuning.json; the shipped table is {SHIPPED.name})")
    merge = sub.add_parser("merge", help="merge tuning files into one new table (later files win)",
                           description="Write OUT with the choices of every FILE, a later FILE's over an earlier's "
                                       "for the same key. OUT must be new unless --overwrite; then it is replaced by "
                                       "exactly that merge (name OUT among the FILEs to keep its own choices: "
                                       "merge T.json T.json NEW.json --overwrite).")
    merge.add_argument("out", type=Path, metavar="OUT")
    merge.add_argument("files", nargs="+", type=Path, metavar="FILE")
    merge.add_argument("--overwrite", action="store_true", help="replace an existing OUT (by the merge of the FILEs)")
    warm_all = sub.add_parser("warm", help="compile every config of the sweep's shapes in parallel processes (a GPU)")
    warm_all.add_argument("--jobs", type=positive_int, default=max((os.cpu_count() or 2) - 2, 1),
                          help="processes at once (default: the CPUs less two)")
    warm_all.add_argument("--shapes", nargs="+", type=point_arg, metavar="SEQLENxDSTATE",
                          help="default: the sweep's (" + " ".join(f"{s}x{d}" for s, d in WARM_SHAPES) + ")")
    warm_one = sub.add_parser("warm-one")  # a warm process's own work; no help: not listed
    warm_one.add_argument("index", type=int)
    warm_one.add_argument("of", type=int)
    warm_one.add_argument("shapes", nargs="+", type=point_arg)
    args = parser.parse_args(argv)
    if args.command == "warm":
        import importlib.util

        from validation.gpu import HAS_CUDA

        if not HAS_CUDA:
            parser.error("warm needs a GPU (it compiles TileGym's kernels on one), and this machine has no CUDA device "
                         "(torch.cuda.is_available() is False)")
        if importlib.util.find_spec("tilegym") is None:
            parser.error("warm compiles TileGym's kernels, and tilegym is not installed (the gpu group)")
        return 1 if warm(args.shapes or WARM_SHAPES, jobs=args.jobs) else 0
    if args.command == "warm-one":
        _warm_one(args.index, args.of, args.shapes)
        return 0
    if args.command == "show":
        path = args.file or user_store_path()
        if args.file is None and not path.exists():
            parser.error(f"no stored choices: the user's store {path} does not exist (a tune run writes it; "
                         f"`show {SHIPPED}` lists the shipped table)")
        store = _store(parser, path)
        try:
            _show(store)
        except (KeyError, TypeError, ValueError) as err:
            parser.error(f"{path}: an entry lacks or mistypes {err}")
        if not store.entries:
            print(f"{path}: no choices")
        return 0
    if args.out.exists() and not args.overwrite:
        parser.error(f"{args.out} exists; pass --overwrite to replace it with the merge of the FILEs (name it among "
                     "them to keep its own choices), or name a new OUT")
    entries: dict[str, dict[str, object]] = {}
    for path in args.files:
        entries.update(_store(parser, path).entries)
    payload = {"format": FORMAT, "entries": [entries[k] for k in sorted(entries)]}
    try:
        write_json_atomic(args.out, payload, overwrite=args.overwrite)
    except OSError as err:
        parser.error(f"{args.out}: cannot write it: {err}")
    print(f"{args.out}: {len(entries)} choices from {len(args.files)} file{'s' if len(args.files) > 1 else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
