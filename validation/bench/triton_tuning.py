"""mamba_ssm's Triton autotune choices in this process: how many there are, and forgetting them.

Its autotune keys are (chunk_size, headdim, dstate), not the length: a process tunes on the first length
it meets and runs that choice at every other. The benchmark counts the choices around a call (a call that
adds some tuned) and forgets them to make Triton tune again at a new shape (``--triton-tuning``).
"""

from __future__ import annotations

from kernels.triton.api import triton_module

__all__ = ["KERNEL_MODULES", "autotune_choices", "forget_autotune_choices"]

KERNEL_MODULES = ("ssd_chunk_state", "ssd_state_passing", "ssd_bmm", "ssd_chunk_scan")


def _autotuners() -> list:
    """The Autotuner objects of mamba_ssm's Triton SSD kernels (imports them)."""
    from triton.runtime.autotuner import Autotuner

    return [tuner for name in KERNEL_MODULES for tuner in vars(triton_module(name)).values()
            if isinstance(tuner, Autotuner)]


def autotune_choices() -> int:
    """How many configs mamba_ssm's Triton autotuners hold in this process: a call that raises it tuned."""
    return sum(len(tuner.cache) for tuner in _autotuners())


def forget_autotune_choices() -> int:
    """Forget the configs mamba_ssm's Triton autotuners chose in this process; returns how many.

    The next call then tunes again, at its own shape (the compiled kernels stay in Triton's caches)."""
    forgotten = 0
    for tuner in _autotuners():
        forgotten += len(tuner.cache)
        tuner.cache.clear()
    return forgotten
