"""The one analytic model of compulsory bytes and FLOPs of an SSD forward, and the floor they imply.

"Compulsory" means what any implementation must move or compute: every input read once, every output
written once, and the four matmuls of the chunked form with C·Bᵀ computed once per group (heads of a
group share it) and only the causal half of the two chunk-local products (pairs i >= j, diagonal
included). Chunk-entry states, which the three-kernel structure writes and reads back, are counted
apart (``chunk_state_bytes``: fp32, written once and read once), so a floor with and without them can
both be shown; ``chunk_state_elements`` lets a design count its own (``floor_us(extra_bytes=)``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = ["Cost", "cost", "floor_us"]

BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}


@dataclass(frozen=True)
class Cost:
    bytes: int               # compulsory HBM traffic
    chunk_state_bytes: int   # fp32 chunk-entry states written once and read once (three-kernel structure)
    flops: int               # useful matmul FLOPs (2 per multiply-add), causal pairs only
    chunk_state_elements: int  # batch * nheads * nchunks * headdim * dstate

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
    state_elements = batch * nheads * nchunks * headdim * dstate
    T = chunk_size
    pairs = T * (T + 1) // 2                               # (i, j) with i >= j in a chunk
    per_chunk_group = 2 * pairs * dstate                   # C·Bᵀ, once per group, causal half
    per_chunk_head = (
        2 * pairs * headdim                                # (L ∘ C·Bᵀ)(dt X), causal half
        + 2 * T * dstate * headdim                         # C · stateᵀ (the carried state seen by each token)
        + 2 * T * dstate * headdim                         # Xᵀ (decayed dt B): the jump to the next chunk
    )
    flops = batch * nchunks * (ngroups * per_chunk_group + nheads * per_chunk_head)
    return Cost(bytes=io, chunk_state_bytes=state_elements * 4 * 2, flops=flops, chunk_state_elements=state_elements)


def floor_us(c: Cost, *, bandwidth_gbs: float, tflops: float, with_chunk_states: bool = False,
             extra_bytes: int = 0) -> float:
    """The larger of the memory time and the matmul time, in microseconds, at the measured ceilings.

    ``with_chunk_states`` adds the generic chunk-state traffic, ``extra_bytes`` a design's own.
    """
    moved = c.bytes + (c.chunk_state_bytes if with_chunk_states else 0) + extra_bytes
    return max(moved / (bandwidth_gbs * 1e3), c.flops / (tflops * 1e6))
