"""Benchmark method: CUPTI kernel time with an L2 flush, wall time, the analytic floor."""
