"""The Triton baseline: mamba_ssm 2.3.2.post1's ``mamba_chunk_scan_combined`` behind the common signature."""

from kernels.triton.api import LIMITS, mamba_ssm_version, ssd_fwd_triton

__all__ = ["LIMITS", "mamba_ssm_version", "ssd_fwd_triton"]
