"""Explore our cuTile forward's tile choices on a GPU: each candidate gated on float64, then timed.

    python -m validation.bench.explore_cutile OUT.json [--seqlen 16384] [--dstate 128 512] [--chunk-size 128]
        [--batch 4]

Varies one stage's configuration at a time around the choosers' (``kernels.cutile.tuning.choose``), passed
to the forward as its ``configs``, at the benchmark's shape (batch 4 unless ``--batch``, 8 heads, headdim 64, 1 group,
chunk 128 unless ``--chunk-size``, bf16), plus each state pass
(variants ``serial-state``, ``segmented-state`` and ``chunked-state``) and both ways of building chunk_out's
C·Bᵀ (``cb-inline``, ``cb-buffer``). For each candidate: its first call's seconds (compilation included, which
the log also names before it starts), the correctness gate against
the float64 chunked reference with the tolerance table, then CUPTI kernel time with an L2 flush before
every rep, and the time of each kernel of the forward (L2 flushed too). Data for choosing defaults; the
benchmark, not this, measures what the suite claims.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import sys
import tempfile
import time
from pathlib import Path

import cuda.tile as ct
import torch

from kernels.cutile import tuning
from kernels.cutile.api import launch_names, ssd_fwd_cutile_variant
from reference import ProblemSpec, SSDDims, ssd_chunked
from reference.checks import domain_checked
from validation.bench.sweep import POINT, dstate_arg, positive_int, seqlen_arg
from validation.bench.timing import cupti_kernel_us, per_kernel_us
from validation.gpu import HAS_CUDA, judge
from validation.provenance import environment
from validation.registry import IMPLS
from validation.results import write_json_atomic

# The stages explored, each recorded in a row under its chooser's name.
_STAGES = ("chunk_cumsum", "state_pass", "chunk_out", "segment_state", "chunk_state", "segment_scan", "segment_apply",
           "segment_out")


def _candidates(spec: ProblemSpec, dtype: torch.dtype, only: list[str] | None, arch: str = "sm_90"):
    """(name, variant, configs, also) around the default configuration, one stage at a time: those whose name starts
    with one of ``only`` (all for None) and the default, each configuration once. Candidates derived from different
    baselines can land on the same variant and configs (the chooser's own walk under a second name, say); the first
    name is kept and the others, in ``also``, are timed with it instead of again."""
    dims = SSDDims(spec.batch, spec.seqlen, spec.nheads, spec.headdim, spec.ngroups, spec.dstate)
    base = tuning.choose(arch, dims, dtype, spec.chunk_size)

    def one(name: str, variant: str, stage: str | None = None, cfg=None):
        # A walk of one chunk a step, one loading g's last element alone or one taking the cumsum itself reads no
        # step's chunks in one load: such candidates derived from a wide default (dstate 128) take per-chunk loads.
        if (stage in ("state_pass", "segment_state") and cfg.wide_loads
                and (cfg.unroll == 1 or cfg.g_last or variant == "cumsum-in-kernels")):
            cfg = dataclasses.replace(cfg, wide_loads=False)
        return name, variant, base if stage is None else dataclasses.replace(base, **{stage: cfg})

    seg, chk, scan, co = base.segment_state, base.chunk_state, base.segment_scan, base.chunk_out
    # C·Bᵀ shared by heads or read from a buffer, the split or first-built diagonal block: chunk_out programs of whole
    # chunks only (block_m == chunk_size), so none of these at chunk 256, whose chunks take two row blocks.
    whole = co.whole_chunks(spec.chunk_size)
    # The whole diagonal block, not the chooser's causal quarters (from dstate 256): what sharing it across heads,
    # buffering it, splitting it or building it first start from.
    whole_block = dataclasses.replace(co, causal_cb=False)
    out = [one("default", "default"), one("serial-state", "serial-state"), one("segmented-state", "segmented-state"),
           one("chunked-state", "chunked-state"), one("cb-inline", "cb-inline"),
           *([one("cb-buffer", "cb-buffer")] if whole else []),
           one("no-swap", "no-swap"), one("states-transposed", "states-transposed"),
           one("states-untransposed", "states-untransposed"), one("states-int64", "states-int64")]
    for k, block_n, occupancy in ((8, 32, 4), (16, 32, 4), (32, 32, 4), (16, 64, 2), (8, 64, 2), (16, 128, None)):
        cand = dataclasses.replace(seg, seg_chunks=k, block_n=min(block_n, spec.dstate), occupancy=occupancy)
        if cand != seg:
            out.append(one(f"segmented K{k} n{cand.block_n} occ{occupancy}", "segmented-state", "segment_state",
                           cand))
    for block_n, occupancy in ((32, 4), (64, 4), (64, 2), (128, None), (128, 1)):
        cand = dataclasses.replace(chk, block_n=min(block_n, spec.dstate), occupancy=occupancy)
        if cand != chk:
            out.append(one(f"chunked n{cand.block_n} occ{occupancy}", "chunked-state", "chunk_state", cand))
    for block_p, block_n, step in ((16, 64, 4), (16, 64, 16), (16, 128, 8), (32, 64, 8), (8, 64, 8)):
        cand = dataclasses.replace(scan, block_p=min(block_p, spec.headdim), block_n=min(block_n, spec.dstate),
                                   step=step)
        if cand != scan:
            out.append(one(f"chunked scan p{cand.block_p} n{cand.block_n} s{step}", "chunked-state", "segment_scan",
                           cand))
    # Several heads a chunk_out program: not where chunk_out completes the segmented pass's states (segmented-out),
    # which takes one head a program (chunk_out refuses the rest).
    heads = (2, 4, 8) if whole and tuning.state_pass_kind(arch, dims, dtype, spec.chunk_size) != "segmented-out" else ()
    for cand in (dataclasses.replace(co, occupancy=None), dataclasses.replace(co, block_n=min(64, spec.dstate)),
                 *(dataclasses.replace(whole_block, block_h=h) for h in heads)):
        if cand != co:
            out.append(one(f"chunk_out n{cand.block_n} occ{cand.occupancy} h{cand.block_h}", "default", "chunk_out",
                           cand))
    sp = base.state_pass
    for block_p, block_n in ((64, 32), (64, 64), (64, 128), (32, 64), (16, 64), (32, 128)):
        cand = dataclasses.replace(sp, swap_ab=True, block_p=min(block_p, spec.headdim),
                                   block_n=min(block_n, spec.dstate))
        if cand != sp:
            out.append(one(f"serial walk swap p{cand.block_p} n{cand.block_n}", "serial-state", "state_pass", cand))
    for block_n, occupancy in ((64, 2), (64, 4), (128, None)):
        cand = dataclasses.replace(seg, swap_ab=True, block_n=min(block_n, spec.dstate), occupancy=occupancy)
        out.append(one(f"segmented walk swap n{cand.block_n} occ{occupancy}", "segmented-state", "segment_state", cand))
    for cand in (dataclasses.replace(co, occupancy=3), dataclasses.replace(co, latency=2),
                 dataclasses.replace(co, latency=8), dataclasses.replace(co, occupancy=1),
                 dataclasses.replace(co, block_m=64), dataclasses.replace(co, block_m=64, occupancy=4)):
        name = f"chunk_out m{cand.block_m} n{cand.block_n} occ{cand.occupancy} lat{cand.latency}"
        out.append(one(name, "default", "chunk_out", cand))
    buf = dataclasses.replace(whole_block, cb_buffer=True)
    for cand in (buf, dataclasses.replace(buf, occupancy=None), dataclasses.replace(buf, occupancy=1),
                 dataclasses.replace(buf, block_n=min(64, spec.dstate)), dataclasses.replace(buf, block_h=2)
                 ) if whole else ():
        out.append(one(f"both: chunked, cb-buffer n{cand.block_n} occ{cand.occupancy} h{cand.block_h}",
                       "chunked-state", "chunk_out", cand))
    # The serial walk's tiles, occupancy and latency hint around the chooser's (TileGym's tuned walk runs two
    # programs per SM with narrower dstate tiles and a latency hint of 4).
    for block_n, occupancy, latency in ((16, 2, 4), (16, 2, 8), (32, 2, 4), (32, 2, 8), (32, None, 4), (64, 2, 4),
                                        (64, 2, 8), (128, 2, 8), (128, None, 4)):
        cand = dataclasses.replace(sp, block_n=min(block_n, spec.dstate), occupancy=occupancy, latency=latency)
        if cand != sp and (not sp.swap_ab or cand.block_n >= 64):  # the swapped walk's M: >= 64 for HGMMA
            out.append(one(f"state n{cand.block_n} occ{occupancy} lat{latency}", "serial-state", "state_pass", cand))
    for swap, block_n in ((not sp.swap_ab, 16), (not sp.swap_ab, 32), (not sp.swap_ab, 64)):
        cand = dataclasses.replace(sp, swap_ab=swap, states_t=swap, block_n=min(block_n, spec.dstate), occupancy=2,
                                   latency=4)
        if not swap or cand.block_n >= 64:
            out.append(one(f"state {'swap' if swap else 'noswap'} n{cand.block_n} occ2 lat4", "serial-state",
                           "state_pass", cand))
    # Two chunks' tiles loaded ahead of their steps (unroll 2), in the serial walk at the chooser's tiles and at
    # narrower ones, and in the segmented pass's local walk.
    for block_n, occupancy, latency in ((sp.block_n, sp.occupancy, sp.latency), (16, 2, 4), (32, 2, 4), (64, 2, 4)):
        cand = dataclasses.replace(sp, unroll=2, block_n=min(block_n, spec.dstate), occupancy=occupancy,
                                   latency=latency)
        if not sp.swap_ab or cand.block_n >= 64:
            out.append(one(f"state unroll2 n{cand.block_n} occ{occupancy} lat{latency}", "serial-state",
                           "state_pass", cand))
    for k in (seg.seg_chunks, 2 * seg.seg_chunks):
        if 2 <= k <= 64:
            cand = dataclasses.replace(seg, unroll=2, seg_chunks=k)
            out.append(one(f"segmented unroll2 K{k}", "segmented-state", "segment_state", cand))
    # The diagonal C·Bᵀ block in two row halves (split_diag): half the exp2, the all-future quarter skipped.
    for occupancy in (co.occupancy, None) if whole else ():
        cand = dataclasses.replace(whole_block, split_diag=True, occupancy=occupancy)
        out.append(one(f"chunk_out split occ{occupancy}", "default", "chunk_out", cand))
    # Only the three causal quarters of the diagonal C·Bᵀ block built (causal_cb), C, B and the states by half-row
    # tiles: a quarter of the block's matmul work skipped, at the chooser's dstate steps and hints and around them.
    around = ({}, {"occupancy": None}, {"block_n": min(64, spec.dstate), "latency": 4},
              {"block_n": min(32, spec.dstate), "latency": 2}, {"state_latency": 0}, {"latency": 2}, {"latency": 6},
              {"latency": 8}, {"state_latency": 4}, {"state_latency": 8})
    for changes in around if whole else ():
        cand = dataclasses.replace(co, causal_cb=True, **changes)
        out.append(one(f"chunk_out causal n{cand.block_n} occ{cand.occupancy} lat{cand.latency} "
                       f"slat{cand.state_latency}", "default", "chunk_out", cand))
    # The fused pass (segment_out): segment length, headdim tile and occupancy of the output walk.
    if spec.dstate <= 128:
        so = base.segment_out
        out.append(one("fused-out", "fused-out"))
        for k, block_p, occupancy in ((4, 64, None), (8, 64, None), (16, 64, None), (4, 32, 2), (8, 32, 2),
                                      (16, 32, 2), (8, 32, None), (32, 32, 2)):
            cand = dataclasses.replace(so, seg_chunks=k, block_p=min(block_p, spec.headdim), occupancy=occupancy)
            out.append(one(f"fused K{k} p{cand.block_p} occ{occupancy}", "fused-out", "segment_out", cand))
    # The latency hint of the walk's per-token g and dt loads (TileGym's tuned walk passes 4; without one the
    # compiler's choice), unrolled or not and at wider dstate tiles, in the serial walk.
    for scalar_latency in (2, 4, 8):
        for unroll in (2, 1):
            cand = dataclasses.replace(sp, scalar_latency=scalar_latency, unroll=unroll)
            out.append(one(f"walk glat{scalar_latency} u{unroll}", "serial-state", "state_pass", cand))
    if not sp.swap_ab:
        for block_n, unroll in ((32, 2), (32, 1), (64, 2)):
            cand = dataclasses.replace(sp, scalar_latency=4, unroll=unroll, block_n=min(block_n, spec.dstate))
            out.append(one(f"walk glat4 n{cand.block_n} u{unroll}", "serial-state", "state_pass", cand))
    cand = dataclasses.replace(seg, scalar_latency=4)
    out.append(one("segwalk glat4", "segmented-state", "segment_state", cand))
    # The serial walk's pipeline depth: the latency hint of its x and B loads, one chunk at a time or two, with and
    # without the g and dt hint.
    if not sp.swap_ab:
        for latency in (2, 4, 6, 8, 10):
            for unroll in (1, 2):
                for scalar_latency in (None, 4):
                    cand = dataclasses.replace(sp, latency=latency, unroll=unroll, scalar_latency=scalar_latency)
                    out.append(one(f"depth lat{latency} u{unroll} glat{scalar_latency}", "serial-state", "state_pass",
                                   cand))
    # 32-wide headdim tiles (twice the programs, mma.sync instead of HGMMA) at two to four programs an SM.
    if not sp.swap_ab and spec.headdim >= 64:
        for occupancy in (2, 3, 4):
            for unroll, latency in ((2, 2), (1, 6), (2, 4)):
                cand = dataclasses.replace(sp, block_p=32, occupancy=occupancy, unroll=unroll, latency=latency,
                                           scalar_latency=4)
                out.append(one(f"walk p32 occ{occupancy} u{unroll} lat{latency}", "serial-state", "state_pass",
                               cand))
    # chunk_out with less shared memory a program (narrower dstate steps, a shallower load pipeline), so that three
    # or four programs share an SM: at (16384 tokens, dstate 128) the sm_90 export takes 108 KB at the chooser's
    # configuration, 56 KB with 32-wide steps and a latency hint of 1, 46 KB with 16-wide steps.
    for block_n, latency, occupancy in ((32, 1, 3), (32, 1, 4), (16, 1, 4), (16, 2, 3), (32, 2, 2), (32, 1, 2)):
        cand = dataclasses.replace(co, block_n=min(block_n, spec.dstate), latency=latency, occupancy=occupancy)
        out.append(one(f"chunk_out smem n{cand.block_n} lat{latency} occ{occupancy}", "default", "chunk_out", cand))
    # chunk_out over 32-wide headdim tiles: twice the programs, each with half the y accumulator and of x, C·hᵀ and the
    # weighted product, the diagonal C·Bᵀ block built by both programs of a head.
    if spec.headdim >= 64:
        for occupancy in (2, 3, 4):
            cand = dataclasses.replace(co, block_p=32, occupancy=occupancy)
            out.append(one(f"chunk_out p32 occ{occupancy}", "default", "chunk_out", cand))
    # The serial walk's chunk-state weights: computed by the walk on B's rows (the walk before pre_weights, the variant
    # walk-weighs), read from the cumsum (pre_weights) on B's rows or on x's (weigh_x), at several pipeline depths
    # (x and B hint, chunks a step, g and dt hint) and dstate tiles. On the H200 the chooser's came out of these
    # (reports/published/0.1.0+20261202T044634Z-d3a05f1-dirty, under the names of that run).
    dims = SSDDims(spec.batch, spec.seqlen, spec.nheads, spec.headdim, spec.ngroups, spec.dstate)
    own = tuning.state_pass_config(arch, dims, dtype, spec.chunk_size, pre_weights=False)
    out.append(one("weights own", "serial-state", "state_pass", own))
    if not own.swap_ab:
        grid = [(True, False, own.latency, own.unroll, 4, own.block_n)] + [
            (True, True, lat, u, glat, n) for lat, u, glat, n in (
                (2, 2, 4, 16), (4, 2, 4, 16), (6, 1, 4, 16), (4, 1, 4, 16), (2, 2, 4, 32), (3, 2, 4, 32),
                (4, 2, 4, 32), (5, 2, 4, 32), (6, 2, 4, 32), (8, 2, 4, 32), (4, 2, 6, 32), (2, 2, 2, 32), (2, 2, 8, 32),
                (2, 1, 4, 32), (6, 1, 4, 32), (2, 2, 4, 64), (4, 2, 4, 64))]
    else:
        grid = [(True, False, lat, u, glat, own.block_n) for lat, u, glat in (
            (4, 2, 4), (2, 2, 4), (6, 2, 4), (4, 2, 2), (4, 2, 6), (4, 2, 8), (4, 2, 10), (4, 1, 4), (8, 1, 4))]
        grid += [(True, True, 4, 2, 4, own.block_n)]
    for pre, wx, latency, unroll, scalar_latency, block_n in grid:
        cand = dataclasses.replace(own, pre_weights=pre, weigh_x=wx, latency=latency, unroll=unroll,
                                   scalar_latency=scalar_latency, block_n=min(block_n, spec.dstate))
        out.append(one(f"weights {'pwx' if wx else 'pw'} lat{latency} u{unroll} glat{scalar_latency} n{cand.block_n}",
                       "serial-state", "state_pass", cand))
    # 8-wide dstate tiles for the unswapped walk (HGMMA's narrowest N): twice the programs of 16-wide tiles, for the
    # shapes where 16-wide tiles leave one program an SM (dstate 64 at the benchmark's point).
    if not own.swap_ab:
        for pre, wx, latency, unroll in ((False, False, 6, 1), (False, False, 4, 2), (False, False, 2, 2),
                                         (True, False, 6, 1), (True, True, 4, 2), (True, True, 6, 1)):
            cand = dataclasses.replace(own, pre_weights=pre, weigh_x=wx, latency=latency, unroll=unroll,
                                       scalar_latency=4, block_n=8)
            out.append(one(f"n8 {'pwx' if wx else 'pw' if pre else 'own'} lat{latency} u{unroll}", "serial-state",
                           "state_pass", cand))
    # The swapped walk (dstate tile as HGMMA's M, 64) below dstate 256, with the cumsum's weights, its programs made
    # by narrow headdim tiles (the matmul's N) instead of narrow dstate tiles.
    if not own.swap_ab and spec.dstate >= 64:
        for block_p, scalar_latency in ((32, 4), (16, 4), (8, 4), (16, 10)):
            cand = dataclasses.replace(own, swap_ab=True, states_t=False, pre_weights=True, weigh_x=False, block_n=64,
                                       block_p=min(block_p, spec.headdim), latency=4, unroll=2, occupancy=2,
                                       scalar_latency=scalar_latency)
            out.append(one(f"swapw p{cand.block_p} glat{scalar_latency}", "serial-state", "state_pass", cand))
    # The swapped walk with 128-wide dstate tiles (HGMMA's M of 128, half the programs, one an SM), one or two chunks a
    # step: x is then read by half as many programs.
    if sp.swap_ab:  # the chooser swaps the walk from dstate 256
        for unroll, latency in ((1, 4), (1, 6), (1, 8), (2, 4)):
            cand = dataclasses.replace(sp, block_n=128, unroll=unroll, latency=latency, occupancy=None)
            out.append(one(f"walk128 u{unroll} lat{latency}", "serial-state", "state_pass", cand))
    # Where the chooser swaps the walk (dstate 256, 512), the unswapped walk of dstate 128 instead: the weights on
    # x's rows (weigh_x), B feeding the matmul from shared memory as loaded, the state tile (headdim, dstate) with the
    # dstate tile as HGMMA's N (64 or 128 wide: 128 to 256 programs at the benchmark's batch and dstate 512), a step's
    # two chunks read by one load per array. In the sm_90 export at 4096 x 512 none spills: 255 registers and 134 KB
    # of shared memory a program at n128 (occupancy 1, hint 6), 128 and 94 KB at n64 (occupancy 2, hint 4).
    if sp.swap_ab:
        for block_n, wide, occupancy, latency, packed in ((128, True, 1, 6, False), (128, True, 1, 4, False),
                                                          (128, False, 1, 4, False), (64, True, 2, 4, False),
                                                          (64, True, 1, 6, False), (128, True, 1, 6, True)):
            if packed and dtype != torch.bfloat16:
                continue
            cand = dataclasses.replace(sp, swap_ab=False, states_t=False, pre_weights=True, weigh_x=True,
                                       block_n=min(block_n, spec.dstate), wide_loads=wide, unroll=2,
                                       occupancy=occupancy, latency=latency, scalar_latency=4,
                                       packed_weights=packed)
            out.append(one(f"walk unswapped n{cand.block_n}{' wide' if wide else ''}{' packed' if packed else ''} "
                           f"occ{occupancy} lat{latency}", "serial-state", "state_pass", cand))
    # The walk's per-token weights applied in bf16 (packed_weights, bf16 inputs: a packed multiply instead of
    # widening to fp32 and narrowing back), at the chooser's pipeline depth and around it, and in the
    # segmented pass's local walk.
    for unroll, latency in ((sp.unroll, sp.latency), (1, sp.latency), (2, 2), (2, 6)):
        cand = dataclasses.replace(sp, packed_weights=True, unroll=unroll, latency=latency)
        out.append(one(f"packed u{unroll} lat{latency}", "serial-state", "state_pass", cand))
    out.append(one("packed segmented", "segmented-state", "segment_state",
                   dataclasses.replace(seg, packed_weights=True)))
    # The segmented pass's local walk reading the cumsum's chunk-state weights on x's rows (pre_weights, weigh_x: the
    # serial walk's from dstate 128), at the serial walk's pipeline depth, in 2, 4 or 8 segments: two to eight times
    # the serial walk's programs, none computing an exp2; and the completion's tiles. (Four programs an SM, or the
    # weights on B's rows at four an SM, kept tileiras 13.4 compiling for over 7 minutes on the CPU.)
    nchunks = -(-spec.seqlen // spec.chunk_size)
    for nseg in (2, 4, 8):
        k = nchunks // nseg
        if k < 2 or k & (k - 1):
            continue
        for block_n in (32, 64):
            cand = dataclasses.replace(seg, seg_chunks=k, block_n=min(block_n, spec.dstate), occupancy=2,
                                       pre_weights=True, weigh_x=True, latency=4, unroll=2, scalar_latency=4)
            out.append(one(f"segw K{k} n{cand.block_n}", "segmented-state", "segment_state", cand))
            # The same local walk, its states completed by chunk_out as it reads them (no completion launch).
            out.append(one(f"segout K{k} n{cand.block_n}", "segmented-out", "segment_state", cand))
    ap = base.segment_apply
    for block_p, block_n, occupancy in ((32, 128, None), (64, 128, None), (64, 64, 4), (16, 64, None)):
        cand = dataclasses.replace(ap, block_p=min(block_p, spec.headdim), block_n=min(block_n, spec.dstate),
                                   occupancy=occupancy)
        if cand != ap:
            out.append(one(f"segapply p{cand.block_p} n{cand.block_n} occ{occupancy}", "segmented-state",
                           "segment_apply", cand))
    # The cumsum's heads a program and occupancy: a launch of a few microseconds at every length, 6% of the forward
    # at 4096 tokens.
    cs = base.chunk_cumsum
    for block_h, occupancy in ((1, None), (2, None), (4, None), (cs.block_h, 2), (cs.block_h, 4), (2, 4), (4, 4)):
        cand = dataclasses.replace(cs, block_h=min(block_h, cs.block_h), occupancy=occupancy)
        if cand != cs:
            out.append(one(f"cumsum h{cand.block_h} occ{occupancy}", "default", "chunk_cumsum", cand))
    # The serial walk in segments, each after the first summing the chunks before it (``_prefix_state``) and then
    # walking its own: twice (or four times) the programs, each chain a half (a quarter) as long.
    for segments in (1, 2, 4):
        cand = dataclasses.replace(sp, segments=segments)
        if cand != sp:
            out.append(one(f"prefix s{segments}", "serial-state", "state_pass", cand))
    # Two segments without an initial state: the local walk alone (no scan), segment 0's chunk_out programs without the
    # completion product, the final state written by chunk_out; the local walk as the serial walk's tiles (``walk``)
    # or as segmented-out's (``n32``, ``n64``), and the same with the scan and every product (``scanned``).
    if nchunks >= 4 and nchunks % 2 == 0 and not (nchunks // 2) & (nchunks // 2 - 1):
        k = nchunks // 2
        walk = tuning.SegmentStateConfig(**{**dataclasses.asdict(sp), "segments": 1}, seg_chunks=k)
        local = {"walk": walk}
        for block_n in (32, 64):
            cand = dataclasses.replace(
                seg, seg_chunks=k, block_p=min(64, spec.headdim), block_n=min(block_n, spec.dstate), occupancy=2,
                pre_weights=True, weigh_x=True, swap_ab=False, latency=4, unroll=2, scalar_latency=4)
            if cand not in local.values():
                local[f"n{cand.block_n}"] = cand
        for tag, cand in local.items():
            out.append(one(f"two K{k} {tag}", "segmented-out", "segment_state", cand))
            out.append(one(f"two-scanned K{k} {tag}", "segmented-out-scanned", "segment_state", cand))
            # chunk_out's row blocks in the other order than the chooser's (``heavy_first``: segment 1's programs, with
            # the completion product, first or last).
            order = f"heavy-{'last' if co.heavy_first else 'first'}"
            out.append((f"two-order K{k} {tag} {order}", "segmented-out", dataclasses.replace(
                base, segment_state=cand, chunk_out=dataclasses.replace(co, heavy_first=not co.heavy_first))))
        # The 32-wide local walk's pipeline depth (x and B hint, chunks a step, g and weight hint) and occupancy.
        n32 = local.get("n32", local["walk"])
        for latency, unroll, scalar_latency, occupancy in ((2, 2, 4, 2), (6, 2, 4, 2), (4, 1, 4, 2), (6, 1, 4, 2),
                                                           (4, 2, 2, 2), (4, 2, 8, 2), (4, 2, 4, 3), (4, 2, 4, None)):
            cand = dataclasses.replace(n32, latency=latency, unroll=unroll, scalar_latency=scalar_latency,
                                       occupancy=occupancy)
            out.append(one(f"two-depth K{k} lat{latency} u{unroll} glat{scalar_latency} occ{occupancy}",
                           "segmented-out", "segment_state", cand))
    # No cumsum launch (the variant cumsum-in-kernels): the walk takes each chunk's cumsum of A dt itself, computes its
    # chunk-state weights (on x's rows or B's) and writes the cumsum's buffers for chunk_out; at the chooser's tiles
    # and around its pipeline depth, for the serial walk and for the segmented pass's local walk.
    out.append(one("nocumsum", "cumsum-in-kernels"))
    serial = tuning.state_pass_kind(arch, dims, dtype, spec.chunk_size) == "serial"
    for stage, walk in (("state_pass", sp),) if serial else (("segment_state", seg),):
        for weigh_x in (True, False):
            for latency, unroll, scalar_latency in ((walk.latency, walk.unroll, walk.scalar_latency), (4, 2, 4),
                                                    (2, 2, 4), (6, 1, 4), (4, 2, 8)):
                cand = dataclasses.replace(walk, pre_weights=False, weigh_x=weigh_x, latency=latency, unroll=unroll,
                                           scalar_latency=scalar_latency)
                out.append(one(f"nocumsum {stage.split('_')[0]} {'x' if weigh_x else 'B'} lat{latency} u{unroll} "
                               f"glat{scalar_latency}", "cumsum-in-kernels", stage, cand))
    # The serial walk without its occupancy hint of 2 (or with 1), where its grid has at most one program an SM anyway
    # (128 programs from dstate 128 to 256 at the benchmark's point): the compiler may then give a program more
    # registers and shared memory, so deeper load pipelines (hints 4-8) fit. Occupancy 1 is the chooser's for the
    # swapped walk's such grids since 524eb93 (reports/published/0.1.0+20261204T011920Z-ee381ad).
    for occupancy in (None, 1):
        for latency in (4, 6, 8):
            cand = dataclasses.replace(sp, occupancy=occupancy, latency=latency)
            if cand != sp:
                out.append(one(f"walk occ{occupancy} lat{latency}", "serial-state", "state_pass", cand))
    # Four chunks' tiles loaded ahead of their steps (unroll 4), so that the walk's chain waits on memory once per four
    # chunks instead of two, at the chooser's load hint and around it, with its occupancy and with one program an SM
    # (in the sm_90 export at 4K tokens the unrolled walk takes 115 KB of shared memory a program at dstate 128 and
    # 512, where two programs an SM fit 113 KB at most). On the H200 each was slower at 4K-16K tokens x dstate 128 and
    # 512 (reports/published/0.1.0+20261204T040930Z-6448431).
    for occupancy, latency in ((sp.occupancy, sp.latency), (sp.occupancy, 2), (sp.occupancy, 6), (1, sp.latency)):
        cand = dataclasses.replace(sp, unroll=4, occupancy=occupancy, latency=latency)
        out.append(one(f"walk unroll4 occ{occupancy} lat{latency}", "serial-state", "state_pass", cand))
    # chunk_out's latency hint on its chunk-state loads (2 up to dstate 128, the compiler's choice above), which sets
    # how deep that load pipeline goes. (Hints on its g and dt loads moved chunk_out by at most 1.4%, no hint ahead of
    # another: reports/published/0.1.0+20261203T223202Z-fdd9948.)
    for latency in (0, 1, 2, 4, 8):
        cand = dataclasses.replace(co, state_latency=latency)
        if cand != co:
            out.append(one(f"chunk_out slat{latency}", "default", "chunk_out", cand))
    # Two computing warpgroups a walk program (num_worker_warps=8) instead of one. At dstate 128 the walk has one
    # program an SM and one warpgroup in it, each scheduler running a single warp; in the sm_90 export the compiler
    # splits the state tile's dstate columns between the two (HGMMA N halved): with the weights on x's rows both then
    # weigh the whole x tile, with the weights on B's rows (pw) each weighs its own columns of B. The swapped walk
    # (dstate 256, 512) with 128-wide dstate tiles splits them as two M=64 halves, each warpgroup weighing its own
    # rows of B while x is loaded once for both.
    def ww8(name: str, variant: str, stage: str, cfg):
        out.append(one(f"ww8 {name}", variant, stage, dataclasses.replace(cfg, worker_warps=8)))

    ww8(f"n{sp.block_n}", "serial-state", "state_pass", sp)
    if not sp.swap_ab and sp.pre_weights:
        for wx, block_n in ((False, 16), (False, 32), (False, 64), (True, 64)):
            cand = dataclasses.replace(sp, weigh_x=wx, block_n=min(block_n, spec.dstate))
            ww8(f"{'pwx' if wx else 'pw'} n{cand.block_n}", "serial-state", "state_pass", cand)
    if sp.swap_ab:
        for occupancy in (None, 1):
            ww8(f"swap n128 occ{occupancy}", "serial-state", "state_pass",
                dataclasses.replace(sp, block_n=min(128, spec.dstate), occupancy=occupancy))
    segmented_out = tuning.state_pass_kind(arch, dims, dtype, spec.chunk_size) == "segmented-out"
    if segmented_out:
        ww8(f"segmented n{seg.block_n}", "segmented-out", "segment_state", seg)
    # A walk reading the cumsum's chunk-state weights needs one number of each chunk's row of g, its last (the
    # chunk's total decay): loaded alone (g_last), it is one element instead of a 512-byte row, which in the sm_90
    # export the consumer warps copy by cp.async instead of a TMA load of its own; at the chooser's hint and around it.
    if sp.pre_weights:
        for scalar_latency in (sp.scalar_latency, 1, 2, 8):
            cand = dataclasses.replace(sp, g_last=True, scalar_latency=scalar_latency)
            out.append(one(f"glast glat{scalar_latency}", "serial-state", "state_pass", cand))
    if seg.pre_weights and segmented_out:
        out.append(one("glast segmented", "segmented-out", "segment_state", dataclasses.replace(seg, g_last=True)))
    # chunk_out with the diagonal C·Bᵀ block and its weights built first, while it is the only accumulator live, and
    # the C·hᵀ product after, C loaded a second time (cb_first): the 128 x 128 decay computed beside one fp32 block
    # instead of two accumulators. At the chooser's hints and with the state loads' hint changed.
    for state_latency in (co.state_latency, 0, 4) if whole else ():
        cand = dataclasses.replace(whole_block, cb_first=True, state_latency=state_latency)
        out.append(one(f"cbfirst slat{state_latency}", "default", "chunk_out", cand))
    # Each array of a walk step's chunks read by one load (wide_loads: x, B, g and the weights as UNROLL * CHUNK-token
    # tiles, split per chunk on chip) instead of one a chunk. In the sm_90 export at 4K tokens the walk's loop waits on
    # 7 barriers a step of two chunks instead of 13, at dstate 128 (665 instructions instead of 768) and 512 (714
    # instead of 681); with the occupancy hint of 2 the compiler takes 70 KB of shared memory a program at dstate 128
    # instead of 105 (a shallower load pipeline), with occupancy 1 119 KB at hint 4 and 218 KB at hint 8. At the
    # chooser's hints, with occupancy 1 (at most one program an SM at dstate 128 and 256 at the benchmark's batch) and
    # deeper hints; and in the segmented pass's local walk, where it runs.
    # Where the chooser's walk is the wide one (dstate 128 since 2ddda02), the walk it replaced: per-chunk loads at two
    # programs an SM, x and B hinted 4.
    if sp.wide_loads:
        out.append(one("walk per-chunk occ2 lat4", "serial-state", "state_pass",
                       dataclasses.replace(sp, wide_loads=False, occupancy=2, latency=4)))
    if sp.unroll > 1 and not sp.g_last:
        for occupancy, latency in ((1, 4), (1, 6), (1, 8), (2, 4), (2, 8)):  # the chooser's hints among them
            cand = dataclasses.replace(sp, wide_loads=True, occupancy=occupancy, latency=latency)
            if cand != sp:  # the chooser's own walk at dstate 128
                out.append(one(f"walk wide occ{occupancy} lat{latency}", "serial-state", "state_pass", cand))
        # With the weights applied in bf16 as well (packed_weights, bf16 only): at dstate 128 the export's loop then
        # holds 402 instructions a step instead of 768 (2 integer multiply-adds instead of 124), at 512 429 instead of
        # 681, each with 7 barrier waits.
        if dtype == torch.bfloat16:
            for occupancy in (sp.occupancy, 1):
                cand = dataclasses.replace(sp, wide_loads=True, packed_weights=True, occupancy=occupancy)
                out.append(one(f"walk wide packed occ{occupancy}", "serial-state", "state_pass", cand))
        # Unswapped (dstate 128): 16-wide dstate tiles, twice the programs at two an SM (94 KB each in the export),
        # each weighing the whole x tile; with the packed weights that weighting is cheap.
        if not sp.swap_ab and sp.block_n > 16:
            for packed in (False, True) if dtype == torch.bfloat16 else (False,):
                cand = dataclasses.replace(sp, wide_loads=True, packed_weights=packed, block_n=16, occupancy=2)
                out.append(one(f"walk wide{' packed' if packed else ''} n16 occ2", "serial-state", "state_pass",
                               cand))
        # Four chunks a step, one program an SM: 15 barrier waits a step in the export at dstate 128 (27 with a load a
        # chunk), 145 KB of shared memory at hint 4, 128 KB at hint 2.
        for latency in (sp.latency, 2):
            cand = dataclasses.replace(sp, wide_loads=True, unroll=4, occupancy=1, latency=latency)
            out.append(one(f"walk wide u4 occ1 lat{latency}", "serial-state", "state_pass", cand))
    # chunk_out's dstate loop in 128-wide steps (one step at dstate 128): a program waits on C, B and the state tile
    # once a step, so on a quarter of the loads at dstate 128 (108 KB of shared memory a program in the sm_90 export,
    # two an SM still).
    if spec.dstate >= 128:
        for latency in (co.latency, 4 if co.latency != 4 else 2):
            cand = dataclasses.replace(co, block_n=128, latency=latency)
            out.append(one(f"chunk_out n128 lat{latency}", "default", "chunk_out", cand))
    # The segmented pass's local walk with a step's chunks read by one load per array, where chunk_out completes its
    # states: at two programs an SM, and at one with x and B hinted as the serial walk's one-an-SM walk is (4 to 8;
    # two segments of 32-wide tiles at 32-63 chunks and dstate 64 give 128 programs at the benchmark's batch).
    if seg.unroll > 1 and segmented_out:
        for occupancy, latency in ((seg.occupancy, seg.latency), (1, seg.latency), (1, 6), (1, 8)):
            cand = dataclasses.replace(seg, wide_loads=True, occupancy=occupancy, latency=latency)
            out.append(one(f"walk wide segmented occ{occupancy} lat{latency}", "segmented-out", "segment_state",
                           cand))
    # The wide walk of dstate 128 on 64-wide dstate tiles: half the programs (64 at the benchmark's batch), x read by
    # half as many of them, each step's HGMMA twice as wide.
    if sp.wide_loads and not sp.swap_ab and sp.block_n < 64 <= spec.dstate:
        for latency in (4, 6):
            cand = dataclasses.replace(sp, block_n=64, occupancy=1, latency=latency)
            out.append(one(f"walk wide n64 occ1 lat{latency}", "serial-state", "state_pass", cand))
    # At dstate 64, the serial walk as the wide walk of dstate 128: the cumsum's weights on x's rows (pre_weights,
    # weigh_x), a step's two chunks read by one load per array, one program an SM (16-wide dstate tiles: 128 programs
    # at the benchmark's batch), x and B hinted 4 or 6; the cumsum's rows stacked or not, and 32-wide tiles (64
    # programs). In the sm_90 export at 4K tokens it spills nothing and waits on 40 barriers against 50 for the walk
    # that weighs its chunks itself.
    if spec.dstate == 64 and not sp.pre_weights and dtype in (torch.bfloat16, torch.float16):
        for block_n, latency, stacked in ((16, 4, True), (16, 6, True), (16, 6, False), (32, 6, True)):
            walk = dataclasses.replace(sp, pre_weights=True, weigh_x=True, wide_loads=True, unroll=2, occupancy=1,
                                       latency=latency, scalar_latency=4, block_n=block_n)
            out.append((f"walk64 wide n{block_n} lat{latency}{'' if stacked else ' unstacked'}", "serial-state",
                        dataclasses.replace(base, state_pass=walk,
                                            chunk_cumsum=dataclasses.replace(cs, stacked=stacked))))
    # The cumsum's per-token rows stacked in one buffer (ChunkCumsumConfig.stacked: rows w, g, g, dt), so that the
    # serial walk reads a chunk's g and weights, and chunk_out's causal halves their g and dt, by one load each.
    out.append(one("stacked", "default", "chunk_cumsum", dataclasses.replace(cs, stacked=True)))
    # With the walk's step read by one load per array as well (wide_loads), where the chooser's walk loads per chunk.
    if sp.unroll > 1 and not sp.wide_loads and not sp.g_last:
        out.append(("stacked wide", "default", dataclasses.replace(base, chunk_cumsum=dataclasses.replace(
            cs, stacked=True), state_pass=dataclasses.replace(sp, wide_loads=True))))
    unique = {name: (name, variant, cfgs) for name, variant, cfgs in out}
    by_config: dict[tuple[str, tuning.Configs], tuple[str, list[str]]] = {}
    for name, variant, cfgs in unique.values():
        if only is None or name.startswith(tuple(only)) or name == "default":
            by_config.setdefault((variant, cfgs), (name, []))[1].append(name)
    return [(name, variant, cfgs, tuple(names[1:])) for (variant, cfgs), (name, names) in by_config.items()]


def _measure(call, spec: ProblemSpec, name: str, variant: str, cfgs: tuning.Configs, inputs, y_ref, state_ref,
             reps: int, arch: str, also: tuple[str, ...] = ()) -> tuple[dict, str]:
    """One candidate's row (its configuration, the other names it stands for, the seconds of its first call,
    compilation included, the float64 gate's verdict and errors, and where it passed, the forward's kernel time and
    each kernel's) and the line that shows it."""
    seqlen, dstate = spec.seqlen, spec.dstate
    device = torch.device("cuda")
    torch.cuda.synchronize(device)
    start = time.perf_counter()
    try:
        y, state = call()
        torch.cuda.synchronize(device)
    except ct.TileError as err:  # a candidate the compiler refuses is a result, not a stop
        return ({"batch": spec.batch, "seqlen": seqlen, "dstate": dstate, "candidate": name, "also": list(also),
                 "first_call_s": round(time.perf_counter() - start, 2),
                 "gate": f"did not compile: {type(err).__name__}: {str(err)[:300]}"}, "did not compile")
    first_call_s = round(time.perf_counter() - start, 2)
    verdict = judge("cutile", spec.dtype, IMPLS["cutile"].matmul[spec.dtype], y, state, y_ref, state_ref)
    row = {"batch": spec.batch, "seqlen": seqlen, "dstate": dstate, "candidate": name, "also": list(also),
           "variant": variant,
           **{f"{stage}_config": dataclasses.asdict(getattr(cfgs, stage)) for stage in _STAGES},
           "first_call_s": first_call_s, "gate": verdict.failures() or "pass",
           "y_rel_l2": verdict.record().get("y_rel_l2"), "state_rel_l2": verdict.record().get("state_rel_l2")}
    if verdict.failures():
        return row, f"gate: {row['gate']} (first call {first_call_s:.1f} s)"
    with domain_checked(inputs.dt, inputs.A, who="explore_cutile"):  # kernel time, no check
        row["kernel_us"] = cupti_kernel_us(call, reps=reps, device=device).as_dict()
        names = launch_names(*inputs.as_args(), chunk_size=spec.chunk_size, arch=arch, variant=variant, configs=cfgs)
        row["per_kernel_us"] = per_kernel_us(call, reps=reps, device=device, launches=names)
    return row, f"{row['kernel_us']['median']:8.1f} us " + " ".join(
        f"{k.strip('_')[:14]}={v:.1f}" for k, v in row["per_kernel_us"].items()) + f" (first call {first_call_s:.1f} s)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m validation.bench.explore_cutile", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, help="the JSON file to write, rewritten after every candidate; a new path")
    parser.add_argument("--seqlen", nargs="+", type=seqlen_arg, default=[16384])
    parser.add_argument("--dstate", nargs="+", type=dstate_arg, default=[128, 512])
    parser.add_argument("--chunk-size", type=int, choices=(64, 128, 256), default=POINT["chunk_size"],
                        help=f"the chunk size of every point (default: the benchmark's, {POINT['chunk_size']})")
    parser.add_argument("--batch", nargs="+", type=positive_int, default=[POINT["batch"]],
                        help=f"the batch of every point (default: the benchmark's, {POINT['batch']}); the state walk "
                             "has a program per (batch, head, state tile), so its time against the batch says whether "
                             "its chain or what its programs share bounds it")
    parser.add_argument("--reps", type=positive_int, default=10,
                        help="timed calls of each candidate, each after an L2 flush (default: 10)")
    parser.add_argument("--only", nargs="+", default=None,
                        help="candidates whose name starts with one of these (and the default); a prefix that no "
                             "candidate of any point has is refused")
    args = parser.parse_args(argv)
    if args.out.exists():  # rewritten after every candidate: an earlier exploration's file is never replaced
        parser.error(f"{args.out} exists; results are never overwritten: name a new file")
    try:  # a folder that cannot take the file is found now, not after the first candidate's GPU work
        args.out.parent.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=args.out.parent).close()
    except OSError as err:
        parser.error(f"{args.out}: its folder cannot take it: {err}")
    # The choosers' configuration for this GPU, as the forward picks it (without one, sm_90's, to check --only).
    major, minor = torch.cuda.get_device_capability() if HAS_CUDA else (9, 0)
    arch = f"sm_{major}{minor}"
    specs = [ProblemSpec(seqlen=seqlen, dstate=dstate, **{**POINT, "chunk_size": args.chunk_size, "batch": batch})
             for batch in args.batch for seqlen in args.seqlen for dstate in args.dstate]
    if args.only:
        names = {name for spec in specs for c in _candidates(spec, spec.torch_dtype, None, arch)
                 for name in (c[0], *c[3])}
        unmatched = [prefix for prefix in args.only if not any(name.startswith(prefix) for name in names)]
        if unmatched:
            firsts = sorted({name.split()[0].rstrip(":") for name in names})
            parser.error(f"--only {' '.join(unmatched)}: no candidate's name starts with "
                         f"{'it' if len(unmatched) == 1 else 'these'} at any point ({arch}); the names start with "
                         f"{', '.join(firsts)}")
    if not HAS_CUDA:
        parser.error("it times kernels on a GPU, and this machine has no CUDA device (torch.cuda.is_available() "
                     "is False)")
    rows, env = [], environment([0])
    for spec in specs:
        point = f"b={spec.batch} l={spec.seqlen} n={spec.dstate}"
        inputs = spec.make_inputs("cuda")
        y_ref, state_ref = ssd_chunked(*inputs.as_args(), chunk_size=32)
        for name, variant, cfgs, also in _candidates(spec, inputs.x.dtype, args.only, arch):
            # Before the first call, which compiles: a candidate that holds the compiler is named on the way in.
            same = f" (also {', '.join(also)}: the same configuration)" if also else ""
            print(f"{point} {name:<28} compiling, gating, timing{same}", file=sys.stderr, flush=True)
            call = functools.partial(ssd_fwd_cutile_variant(variant, configs=cfgs), *inputs.as_args(),
                                     chunk_size=spec.chunk_size)
            row, shown = _measure(call, spec, name, variant, cfgs, inputs, y_ref, state_ref, args.reps, arch, also)
            rows.append(row)
            print(f"{point} {name:<28} {shown}", file=sys.stderr, flush=True)
            # after every candidate, so a run stopped from outside keeps every row it finished
            write_json_atomic(args.out, {"environment": env, "rows": rows}, overwrite=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
