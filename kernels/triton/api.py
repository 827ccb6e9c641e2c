"""``ssd_fwd_triton``: the common SSD forward signature over mamba_ssm's ``mamba_chunk_scan_combined``.

The baseline the post measured against is mamba_ssm 2.3.2.post1's Triton path; this module only adapts
arguments and never copies a kernel. mamba_ssm is imported on the first call, so importing this module
is cheap and works on a machine without triton or mamba_ssm.

mamba_ssm's package ``__init__`` imports its CUDA extension (``selective_scan_cuda``), which a CPU or
``MAMBA_SKIP_CUDA_BUILD`` install does not build. The Triton SSD ops need none of it, so the loader
registers a bare package object for ``mamba_ssm`` (``__path__`` = the installed directory) and imports
``mamba_ssm.ops.triton.ssd_combined`` below it. In 2.3.2.post1 the ``__init__`` of ``mamba_ssm.ops``,
``mamba_ssm.ops.triton`` and ``mamba_ssm.utils`` are empty, so they import normally.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.metadata
import importlib.util
import sys
import types
from collections.abc import Callable, Iterator

import torch
from torch import Tensor

from reference.checks import CHUNK_SIZE, FLOAT_DTYPES, Limits, check_inputs, dtype_name

__all__ = ["LIMITS", "cpu_device_shim", "mamba_ssm_version", "ssd_fwd_triton", "triton_module"]

# The version is constraints.txt's (the one pin file); this adapter only says how to install it.
_INSTALL = ("MAMBA_SKIP_CUDA_BUILD=TRUE MAMBA_FORCE_BUILD=TRUE "
            "pip install -c constraints.txt --no-deps --no-build-isolation mamba-ssm")

# Any chunk_size, ragged lengths, any headdim and dstate. A CUDA device, or the CPU under TRITON_INTERPRET=1
# (validation.registry's triton-interpreter). Its int32 offsets past 2**31 elements are not a limit declared
# here: those cases run, so that the suites can catch the corruption.
LIMITS = Limits(needs_cuda=True, dtypes=tuple(dtype_name(d) for d in FLOAT_DTYPES))


def mamba_ssm_version() -> str:
    """The installed mamba_ssm version (distribution metadata; imports nothing). ImportError if absent."""
    try:
        return importlib.metadata.version("mamba-ssm")
    except importlib.metadata.PackageNotFoundError:
        raise ImportError(f"mamba_ssm is not installed; the Triton baseline needs it: {_INSTALL}") from None


def triton_module(name: str) -> types.ModuleType:
    """``mamba_ssm.ops.triton.<name>``, imported without running ``mamba_ssm/__init__.py`` (see above)."""
    if "mamba_ssm" not in sys.modules:
        spec = importlib.util.find_spec("mamba_ssm")  # locates the package; executes nothing
        if spec is None or spec.submodule_search_locations is None:
            raise ImportError(f"ssd_fwd_triton needs mamba_ssm; install it with: {_INSTALL}")
        package = types.ModuleType("mamba_ssm", "mamba_ssm without its __init__ (Triton ops only)")
        package.__path__ = list(spec.submodule_search_locations)
        package.__spec__ = spec
        sys.modules["mamba_ssm"] = package
    return importlib.import_module(f"mamba_ssm.ops.triton.{name}")


@functools.cache
def _mamba_chunk_scan_combined() -> tuple[Callable[..., tuple[torch.Tensor, torch.Tensor]], bool]:
    """mamba_ssm's ``mamba_chunk_scan_combined`` and whether its kernels run in the interpreter
    (``triton.jit`` chose that when the module was imported, from ``TRITON_INTERPRET``)."""
    ssd_combined = triton_module("ssd_combined")
    from triton.runtime.interpreter import InterpretedFunction

    chunk_scan = triton_module("ssd_chunk_scan")
    interpreted = isinstance(chunk_scan._chunk_scan_fwd_kernel.fn, InterpretedFunction)
    return ssd_combined.mamba_chunk_scan_combined, interpreted


@contextlib.contextmanager
def cpu_device_shim() -> Iterator[None]:
    """Make ``torch.cuda.device(None)`` a no-op on a CPU-only torch build while the block runs.

    mamba_ssm wraps each launch in ``with torch.cuda.device(t.device.index)``; a CPU tensor's index is
    None, and a CPU build's ``torch.cuda._exchange_device`` / ``_maybe_exchange_device`` compare it
    with 0 (TypeError). The shim maps None to -1, torch's own "no device" value, and passes every
    other index through; a CUDA build never sees None there. The originals are restored on exit.
    """
    exchange, maybe_exchange = torch.cuda._exchange_device, torch.cuda._maybe_exchange_device
    torch.cuda._exchange_device = lambda device: exchange(-1 if device is None else device)
    torch.cuda._maybe_exchange_device = lambda device: maybe_exchange(-1 if device is None else device)
    try:
        yield
    finally:
        torch.cuda._exchange_device, torch.cuda._maybe_exchange_device = exchange, maybe_exchange


def ssd_fwd_triton(x: Tensor, dt: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Tensor | None = None,
                   initial_state: Tensor | None = None, chunk_size: int = CHUNK_SIZE) -> tuple[Tensor, Tensor]:
    """The SSD forward by mamba_ssm's Triton kernels (five launches: chunk cumsum, chunk state, state
    passing, C·Bᵀ per chunk, chunk scan).

    Shapes as in ``reference.check_inputs``: x (batch, seqlen, nheads, headdim) bf16/fp16/fp32;
    dt (batch, seqlen, nheads) fp32, used as given (no dt_bias, no softplus; mamba_ssm's default
    dt_limit (0, inf) only clamps negative dt, which the contract excludes); A (nheads,) fp32;
    B, C (batch, seqlen, ngroups, dstate) in x's dtype; D (nheads,) fp32 or None; initial_state
    (batch, nheads, headdim, dstate) fp32 or None. Any chunk_size >= 1: mamba_ssm masks the tail
    chunk and pads its blocks to powers of two (1, 8, 16, 24, 32 and 48 checked in the interpreter).

    Returns ``(y, final_state)``: y in x's dtype and shape, final_state (batch, nheads, headdim,
    dstate) fp32 (mamba_ssm allocates it fp32 whatever the input dtype).

    Any strides are taken: mamba_ssm copies B, C and D when their last stride is not 1 and x when
    neither its last nor its seqlen stride is 1, and passes every other stride to its kernels (the
    ``projection_views`` regime checked in the interpreter). Tensors must be on a CUDA device, or on
    the CPU under ``TRITON_INTERPRET=1`` set before triton and mamba_ssm are imported (ValueError
    otherwise).

    The baseline's own limits pass through on purpose, so the suites measure what the post measured:
    its kernels index with int32 offsets (mamba_ssm issue 1015, unfixed in 2.3.2.post1), which may
    corrupt tensors past 2**31 elements; the stability suite, not this adapter, gives that verdict.
    """
    check_inputs(x, dt, A, B, C, D, initial_state, chunk_size=chunk_size, who="ssd_fwd_triton")
    mamba_chunk_scan_combined, interpreted = _mamba_chunk_scan_combined()
    if x.device.type != "cuda" and not interpreted:
        raise ValueError(f"ssd_fwd_triton: x is on {x.device}; expected a CUDA device, or TRITON_INTERPRET=1 "
                         "in the environment before triton and mamba_ssm were imported")
    # On the CPU (the interpreter) each launch's torch.cuda.device(None) needs the shim, reentrant: a caller's
    # own shim around this call is harmless.
    with cpu_device_shim() if x.device.type == "cpu" else contextlib.nullcontext():
        y, final_state = mamba_chunk_scan_combined(
            x, dt, A, B, C, chunk_size, D=D, initial_states=initial_state, return_final_states=True)
    return y, final_state
