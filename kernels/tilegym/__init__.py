"""TileGym's published cuTile Mamba-2 forward (tilegym 1.5.1) behind the common signature: a peer we measure."""

from kernels.tilegym.api import LIMITS, explicit_args, launch_names, mamba2_module, ssd_fwd_tilegym, tilegym_version

__all__ = ["LIMITS", "explicit_args", "launch_names", "mamba2_module", "ssd_fwd_tilegym", "tilegym_version"]
