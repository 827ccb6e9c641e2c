"""The one analytic model of compulsory bytes and FLOPs of an SSD forward, and the floor they imply.

"Compulsory" means what any implementation must move or compute: every input read once, every output
written once, and the four matmuls of the chunked form with C·Bᵀ computed once per group (heads of a
group share it). Chunk-entry states, which the three-kernel structure writes and reads back, are
counted apart (``chunk_state_bytes``), so a floor with and without them can both be shown.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = ["Cost", "cost", "floor_us"]

BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}


@dataclass(frozen=True)
class Cost:
    bytes: int               # compulsory HBM traffic
    chunk_state_bytes: int   # fp32 chunk-entry states written once and read once (three-kernel structure)
    flops: int               # useful matmul FLOPs (2 per multiply-add)

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def cost(*, batch: int, seqlen: int, nheads: int, headdim: int, ngroups: int, dstate: int, chunk_size: int,
         dtype: str, with_D: bool = True, with_initial_state: bool = False) -> Cost:
    e = BYTES[dtype]
    tokens = batch * seqlen
    nchunks = -(-seqlen // chunk_size)
    io = (
        tokens * nheads * headdim * e * 2          # x read, y written (x's dtype)
        + tokens * nheads * 4                      # dt read (fp32)
        + tokens * ngroups * dstate * e * 2        # B and C read
        + nheads * 4 * (2 if with_D else 1)        # A (and D)
        + batch * nheads * headdim * dstate * 4 * (2 if with_initial_state else 1)  # final (and initial) state
    )
    chunk_states = batch * nheads * nchunks * headdim * dstate * 4 * 2
    T = chunk_size
    per_chunk_group = 2 * T * T * dstate                   # C·Bᵀ, once per group
    per_chunk_head = (
        2 * T * T * headdim                                # (L ∘ C·Bᵀ)(dt X), dense tile
        + 2 * T * dstate * headdim                         # C · stateᵀ (the carried state seen by each token)
        + 2 * T * dstate * headdim                         # Xᵀ (decayed dt B): the jump to the next chunk
    )
    flops = batch * nchunks * (ngroups * per_chunk_group + nheads * per_chunk_head)
    return Cost(bytes=io, chunk_state_bytes=chunk_states, flops=flops)


def floor_us(c: Cost, *, bandwidth_gbs: float, tflops: float, with_chunk_states: bool = False) -> float:
    """The larger of the memory time and the matmul time, in microseconds, at the measured ceilings."""
    moved = c.bytes + (c.chunk_state_bytes if with_chunk_states else 0)
    return max(moved / (bandwidth_gbs * 1e3), c.flops / (tflops * 1e6))
