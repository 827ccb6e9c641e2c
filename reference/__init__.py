"""Float64 ground truth for the Mamba-2 SSD forward, and the input model. Imports torch only."""

from reference.checks import CHUNK_SIZE, FLOAT_DTYPES, SSDDims, check_inputs, dtype_name
from reference.problem import DTYPES, ProblemSpec, SSDInputs
from reference.regimes import REGIMES
from reference.ssd_chunked import ssd_chunked
from reference.ssd_recurrent import ssd_recurrent

__all__ = [
    "CHUNK_SIZE",
    "DTYPES",
    "FLOAT_DTYPES",
    "REGIMES",
    "ProblemSpec",
    "SSDDims",
    "SSDInputs",
    "check_inputs",
    "dtype_name",
    "ssd_chunked",
    "ssd_recurrent",
]
