"""Our cuTile Mamba-2 SSD forward: chunk_cumsum -> state_pass -> chunk_out.

``LIMITS`` (what it takes) imports no cuda.tile; ``ssd_fwd_cutile`` imports it on first use.
"""

from kernels.cutile.limits import LIMITS

__all__ = ["LIMITS", "ssd_fwd_cutile"]


def __getattr__(name: str):
    if name == "ssd_fwd_cutile":
        from kernels.cutile.api import ssd_fwd_cutile

        return ssd_fwd_cutile
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
