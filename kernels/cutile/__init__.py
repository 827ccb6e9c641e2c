"""Our cuTile Mamba-2 SSD forward: chunk_cumsum -> state_pass -> chunk_out."""

from kernels.cutile.api import ssd_fwd_cutile

__all__ = ["ssd_fwd_cutile"]
