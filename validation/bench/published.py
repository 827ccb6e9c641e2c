"""The post's published B300 result, as data with its source, for the report to draw beside ours.

Only what the post states is recorded. Its chart (speedup over mamba_ssm's Triton per seqlen and
dstate) is an image that is not among this project's sources, so no per-point value is invented:
``points`` stays empty until someone reads the chart and records each value (``{"seqlen", "dstate",
"ratio"}``) with how it was read; the report then draws them beside ours.
"""

from __future__ import annotations

PUBLISHED_B300 = {
    "gpu": "NVIDIA B300 SXM6",
    "source": "NVIDIA Technical Blog, 'Accelerating Mamba-2 with High-Performance Forward Pass Kernels in "
              "NVIDIA CUDA Tile' (with Jane Street); 19 October 2026, "
              "https://developer.nvidia.com/blog/accelerating-mamba-2-with-high-performance-forward-pass-kernels-in-nvidia-cuda-tile/",
    "device": "NVIDIA B300 SXM6 (compute capability 10.3), 1920 MHz max SM clock, 1100 W power limit",
    "stack": "cuda-tile 1.5.0, tileiras 13.4, PyTorch 2.13.0, CUDA 13.3, Triton 3.7.1, mamba_ssm 2.3.2.post1",
    "timing": "CUPTI medians via TileGym's benchmark (torch.profiler, L2 flush before every rep)",
    "shape": {"batch": 4, "nheads": 8, "headdim": 64, "ngroups": 1, "chunk_size": 128, "dtype": "bf16"},
    "speedup_min": 1.14,
    "speedup_max": 1.82,
    "trend": "speedup grows with sequence length and state size (the post's words); this project reads the chart "
             "as ~1.15x at dstate 64 / 1K tokens up to ~1.8x at dstate 512, rising from 1K to ~16K tokens, "
             "then flat to 256K",
    "points": [],
    "points_note": "not recorded: the chart image is not among the project's sources",
}
