"""Environment and provenance for every results file (docs/design.md, "Results contract").

A field that cannot be read is ``None`` and ``null_reasons[field]`` says why; nothing is "unknown".
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import re
import shutil
import subprocess
import sys
import tomllib
from datetime import UTC, datetime
from pathlib import Path

__all__ = ["ROOT", "environment", "now_iso", "suite_version"]

ROOT = Path(__file__).resolve().parent.parent

# Environment variables that change numerics or what runs; recorded when set.
NUMERICS_ENV = ("TRITON_INTERPRET", "MAMBA_DETERMINISTIC", "TILEGYM_DISABLE_AUTOTUNE", "CUDA_VISIBLE_DEVICES",
                "CUDA_HOME", "NVIDIA_DISABLE_REQUIRE", "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "CUDA_LAUNCH_BLOCKING")
PACKAGES = {"torch": "torch", "triton": "triton", "cuda_tile": "cuda-tile", "tileiras": "nvidia-cuda-tileiras",
            "mamba_ssm": "mamba-ssm", "tilegym": "tilegym", "numpy": "numpy", "cuda_bindings": "cuda-bindings"}
SMI_FIELDS = {"gpu_uuid": "uuid", "sm_clock_max_mhz": "clocks.max.sm", "mem_clock_max_mhz": "clocks.max.mem",
              "sm_clock_mhz": "clocks.sm", "power_limit_w": "power.limit", "persistence_mode": "persistence_mode",
              "mig_mode": "mig.mode.current", "driver": "driver_version"}


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def suite_version() -> str:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]["version"]


def _run(cmd: list[str]) -> tuple[str | None, str | None]:
    """(stdout, None) or (None, reason)."""
    if shutil.which(cmd[0]) is None:
        return None, f"{cmd[0]} not found on PATH"
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=30, cwd=ROOT, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        return None, f"{' '.join(cmd)}: {err}"
    if done.returncode != 0:
        return None, f"{' '.join(cmd)} exited {done.returncode}: {done.stderr.strip()[:200]}"
    return done.stdout.strip(), None


def _find_tileiras() -> str:
    """The tileiras that cuda.tile compiles with: the search cuda.tile itself runs (the pip wheels, then PATH, then
    CUDA_HOME), through its private helper, since no public call names the binary."""
    from cuda.tile._compile import _find_compiler_bin

    return _find_compiler_bin().path


def tileiras() -> tuple[str | None, str | None, str | None]:
    """(binary, version, reason): the tileiras that compiles our kernels and TileGym's, and the version its
    ``--version`` prints (``13.4.92`` from "release 13.4, V13.4.92"); a None comes with the reason. The pip package's
    version alone misses a tileiras found on PATH or under CUDA_HOME, as on a machine whose toolkit is not pip's."""
    try:
        path = _find_tileiras()
    except ImportError as err:
        return None, None, f"cuda.tile cannot say which tileiras it uses: {err}"
    except FileNotFoundError as err:
        return None, None, f"cuda.tile finds no tileiras: {str(err)[:200]}"
    out, why = _run([path, "--version"])
    if out is None:
        return path, None, why
    found = re.search(r"release \d+\.\d+, V(\S+)", out)
    if found is None:
        return path, None, f"{path} --version printed no release line: {out[:200]!r}"
    return path, found.group(1), None


def environment(seeds: list[int] | None = None) -> dict[str, object]:
    """Everything a reader needs to know where and with what a result was obtained."""
    env: dict[str, object] = {}
    reasons: dict[str, str] = {}

    def put(key: str, value: object, reason: str | None = None) -> None:
        env[key] = value
        if value is None:
            reasons[key] = reason or "not readable"

    put("suite_version", suite_version())
    commit, why = _run(["git", "rev-parse", "HEAD"])
    if os.environ.get("SSD_GIT_COMMIT"):
        # Given by whoever copied the tree (the container, a device machine). It wins over a .git that
        # may have come along: a copied .git can be older than the tree beside it.
        put("git_commit_here", commit, why)
        commit, why = os.environ["SSD_GIT_COMMIT"], None
        put("git_dirty", None, "the commit is SSD_GIT_COMMIT, given by whoever copied the tree; not asked of git")
    else:
        status, why_dirty = _run(["git", "status", "--porcelain", "--untracked-files=no"])
        put("git_dirty", None if status is None else bool(status), why_dirty)
    put("git_commit", commit, why)
    in_image = bool(os.environ.get("SSD_BASE_IMAGE"))
    put("container_image", os.environ.get("SSD_IMAGE") or None,
        "the image was built without --build-arg SSD_IMAGE=<its tag>" if in_image
        else "not in the suite's container (SSD_IMAGE unset)")
    put("base_image", os.environ.get("SSD_BASE_IMAGE") or None, "not in the suite's container (SSD_BASE_IMAGE unset)")
    put("base_image_digest", os.environ.get("SSD_BASE_DIGEST") or None,
        "not in the suite's container (SSD_BASE_DIGEST unset)")
    put("python", platform.python_version())
    put("platform", platform.platform())
    for key, dist in PACKAGES.items():
        try:
            put(key, importlib.metadata.version(dist))
        except importlib.metadata.PackageNotFoundError:
            put(key, None, f"package {dist} is not installed")

    binary, version, why = tileiras()
    put("tileiras_binary", binary, why)
    put("tileiras_version", version, why)

    import torch

    put("cuda_runtime", torch.version.cuda, "torch is a CPU build (torch.version.cuda is None)")
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        put("gpu_name", props.name)
        put("compute_capability", f"{props.major}.{props.minor}")
        put("sm_count", props.multi_processor_count)
        put("gpu_memory_gib", round(props.total_memory / 2**30, 1))
        query = ",".join(SMI_FIELDS.values())
        out, why = _run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits", "-i", "0"])
        values = [v.strip() for v in out.split(",")] if out else [None] * len(SMI_FIELDS)
        for key, value in zip(SMI_FIELDS, values, strict=True):
            put(key, value, why)
    else:
        no_gpu = "no CUDA device (torch.cuda.is_available() is False)"
        for key in ("gpu_name", "compute_capability", "sm_count", "gpu_memory_gib", *SMI_FIELDS):
            put(key, None, no_gpu)
    put("env", {k: os.environ[k] for k in NUMERICS_ENV if k in os.environ})
    put("tf32_matmul", torch.backends.cuda.matmul.allow_tf32)
    put("command", " ".join([sys.executable, *sys.argv]))
    put("seeds", seeds, "no seeded inputs in this run")
    env["null_reasons"] = reasons
    return env
