"""TileGym's published cuTile Mamba-2 forward (tilegym 1.5.1) behind the common signature: a peer we measure."""

from kernels.tilegym.api import ssd_fwd_tilegym, tilegym_version

__all__ = ["ssd_fwd_tilegym", "tilegym_version"]
