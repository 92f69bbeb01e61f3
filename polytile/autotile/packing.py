"""What a blocked nest's prediction leaves out about its operands: packed panels (:func:`pack_plan`, the
copies' cost :func:`pack_seconds`) and operands streamed from memory unpacked (:func:`stream_seconds`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional, Tuple

import numpy as np

from ..cost.constants import PAGE_BYTES
from ..hardware import CPUDescriptor
from ..poly import body as B
from ..scheduling import Schedule
from .roles import Roles, TileConfig, _trips, blocked_order, inner_points, roles

# A packed element is copied once (a load and a store) and then read ``reuse``
# times by register tiles instead of through the array's row stride; below
# this many reads per copy the copy is not worth its traffic.
PACK_MIN_REUSE = 8

# Rows of an unpacked operand streamed from memory a register tile may read at once: each row is a
# stream of its own, and a core's prefetchers follow a few dozen.  8x4096 @ 4096^2 (B unpacked, one
# 64-byte piece of each of kc rows per block), kc = 16 / 32 / 64 / 512: 2.59 / 2.52 / 3.65 / 4.69 ms
# (numpy 3.9; Zen 5).
PREFETCH_STREAMS = 32
# ... and each pass over such an operand should read long runs of each row: with kc = 32, strips of
# nc = 128 / 256 / 512 / 1024 / 2048 columns (0.5-8 KB runs) ran 3.66 / 3.39 / 3.14 / 2.96 / 2.97 ms
# (8x4096 @ 4096^2, Zen 5).  A run shorter than a page loses RUN_LOSS x (page / run - 1) of the
# operand's memory time, which fits those within 0.1 ms.
RUN_LOSS = 0.05


@dataclass(frozen=True)
class PackPlan:
    """One operand panel to pack: at the start of each iteration of ``loop``."""

    array: str
    dim: int
    block: int
    loop: str
    reuse: int  # register-tile reads of each packed element per copy
    elements: int  # footprint of one copy (box of the panel)
    copies: int  # times the panel is copied in one run (iterations of the loops down to ``loop``)


# A packed panel has to stay cached while it is re-read: at most this many bytes
# (half of a 2 MiB L2) unless the caller passes the descriptor's L2.
PACK_BUDGET = 1 << 20


@dataclass(frozen=True)
class _PackOperand:
    """A load :func:`pack_plan` may pack: along the register tile's rows (``rows``) or columns."""

    array: str
    axis: int  # the index position that moves with the block loop
    rows: bool
    uses: frozenset  # iterators of the whole index
    dim_iters: Tuple[Tuple[str, ...], ...]  # iterators of each index position
    shape: Tuple[int, ...]
    itemsize: int


def _pack_operands(s: Schedule, r: Roles) -> List[_PackOperand]:
    """The statement's loads that are row- or column-operands of its register tile, in body order.

    They depend on the statement and its roles only, so they are kept with the roles (a ranking
    asks for them once per configuration)."""
    memo = r.__dict__.get("_pack_operands")
    if memo is not None and memo[0] is s.scop:
        return memo[1]
    st = s.scop.statement(r.stmt)
    reds = set(r.reductions) | {r.k}
    out: List[_PackOperand] = []
    for ld in B.loads(st.body.value):
        if ld.array == st.body.array:
            continue
        dim_iters = tuple(tuple(sorted(B.iter_names(e))) for e in ld.index)
        uses = frozenset(v for d in dim_iters for v in d)
        di, dj = r.i in uses, r.j in uses
        if di == dj:
            continue  # neither a row- nor a column-operand of the register tile
        it = r.i if di else r.j
        axes = [d for d, its in enumerate(dim_iters) if it in its]
        if len(axes) != 1:
            continue
        if set(dim_iters[axes[0]]) & reds:
            continue  # e.g. w + kw: the block's rows shift with the reduction
        if len(ld.index) < 2:
            continue  # a vector operand is one stream already
        arr = s.scop.array(ld.array)
        out.append(_PackOperand(ld.array, axes[0], di, uses, dim_iters, tuple(arr.shape),
                                np.dtype(arr.dtype).itemsize))
    r.__dict__["_pack_operands"] = (s.scop, out)  # a cache, not a field: Roles stays frozen
    return out


def pack_plan(s: Schedule, cfg: TileConfig, *, budget: Optional[int] = None) -> List[PackPlan]:
    """Operand panels of ``cfg``'s register tile worth packing, and the loop to pack each at.

    An operand read along the register tile's rows (``A[i][k]``: one element
    per row, broadcast) or columns (``B[k][j]``: a vector per column block),
    with that axis indexed ``i + c``/``j + c`` (``c`` free of the reduction
    loops), is copied at the start of one loop of the blocked nest: the
    position with the least copying over the run (copies x panel elements),
    among those whose panel -- the box of the operand's index ranges over one
    iteration of that loop -- fits ``budget`` bytes and is re-read at least
    ``PACK_MIN_REUSE`` times per copy (``reuse``: trip counts of the loops
    inside that do not move the panel; a row panel of a nest with the column
    blocks innermost need only fit half of :data:`L3_SHARE`, being read one
    sliver at a time).  Unpacked, the tile reads ``mr`` rows
    (or ``kc`` rows of ``nr`` columns) a row stride apart -- as many streams,
    cache-set conflicts and TLB pages; packed, one contiguous stream.

    >>> # matmul 1024^3, 256-tiles, order kij (k_t, i_t, j_t): A's 256x256 panel at i_t (reuse N/nr),
    >>> # B's 256x1024 row panel once per k_t (shared by the threads of the parallel i_t)
    >>> # conv2d (n, y, co_t, ci_t, x_t, ...): the whole filter F once per image n, not per row y
    """
    r = roles(s, cfg.stmt)
    if r is None or not cfg.regtile:
        return []
    budget = PACK_BUDGET if budget is None else budget
    E = r.extents
    names = blocked_order(r, cfg)
    tile_of = {f"{r.i}_t": r.i, f"{r.j}_t": r.j, f"{r.k}_t": r.k,
               f"{r.i}_t1": r.i, f"{r.j}_t1": r.j, **{v: v for v in r.outer}}
    trip = _trips(r, cfg)
    # Candidate positions: every loop outside the register tile's reduction loops, and outside the
    # reduction loops that run around the blocks (a panel copied there would be copied per step).
    positions = names[:len(r.outer) + (3 if r.outside else 5)]

    def extent_inside(v: str, p: int) -> int:
        """Range of iterator ``v`` over one iteration of the loop at ``positions[p]``."""
        fixed = set(positions[:p + 1])
        E_v = E.get(v, 1)
        if v in r.outer:
            return 1 if v in fixed else E_v
        for it, t, t1, size, block in ((r.i, f"{r.i}_t", f"{r.i}_t1", cfg.mc, cfg.mr),
                                       (r.j, f"{r.j}_t", f"{r.j}_t1", cfg.nc, cfg.nr)):
            if v == it:
                return min(block, E_v) if t1 in fixed else min(size, E_v) if t in fixed else E_v
        if v == r.k:
            return min(cfg.kc, E_v) if f"{r.k}_t" in fixed else E_v
        return E_v  # the other reduction loops run inside the register tile

    plans: List[PackPlan] = []
    seen = set()
    padded = cfg.nr > E[r.j]  # a block wider than the columns reads zero-padded column slivers only
    for op in _pack_operands(s, r):
        if op.array in seen:
            continue
        block = cfg.mr if op.rows else cfg.nr
        must = padded and not op.rows
        # Column blocks innermost, a row panel is read one sliver at a time, and each sliver is reused
        # from L1 across the column panel right after: the panel need only stay in the last cache.
        # (SGEMM 2048^3, 8x32, kc = 512: the 1024-row panel packed once per segment, 316 GFLOP/s
        # median; copied per column panel to fit 1 MiB, 280.  Xeon VM, exploratory.)
        limit = max(budget, L3_SHARE // 2) if op.rows and cfg.inner == "ij" else budget
        # Where to copy: the loop position with the least copying over the run
        # (copies x panel size), among panels that stay cached and are re-read enough;
        # equal volumes prefer the smaller panel (copied nearer its use).
        best = None
        for p in range(len(positions)):
            elements = 1
            for iters, extent in zip(op.dim_iters, op.shape):
                size = 1
                for v in iters:
                    size += extent_inside(v, p) - 1
                elements *= min(size, extent)
            if elements * op.itemsize > limit:
                continue
            copies = 1
            for n in positions[:p + 1]:
                copies *= trip.get(n, 1)
            reuse = 1
            for n in names[p + 1:]:
                if n in trip and tile_of[n] not in op.uses:
                    reuse *= trip[n]
            if reuse < PACK_MIN_REUSE and not must:
                continue
            key = (copies * elements, elements)
            if best is None or key < best[0]:
                best = (key, positions[p], reuse, elements, copies)
        if best is None:
            continue
        _, loop, reuse, elements, copies = best
        plans.append(PackPlan(op.array, op.axis, block, loop, reuse, elements, copies))
        seen.add(op.array)
    return plans


def pack_seconds(s: Schedule, cfg: TileConfig, hw: CPUDescriptor) -> float:
    """Seconds the copies of ``cfg``'s packed panels (:func:`pack_plan`) take in one run.

    Every copied byte is read from the innermost level that holds the operand's whole
    array, at its bandwidth (all cores' when the nest has a parallel loop: the copies
    are split over the threads).  The writes are not counted: the panel is read right
    after, from where they left it.  (Counting them at the level a panel fits made
    SGEMM 1024^3 prefer kc = 64 over kc = 256 for its 256 KiB panels, 10-20% slower.)
    The blocked nest's prediction (``cost.predict_config``) leaves the copies out; this
    term keeps the ranking from choosing a panel copied once per row of a convolution
    over one copied once (1x14x14x256: the filter, 2.4 MB, would be copied 384 times
    per call).

        >>> # pack_seconds(s, cfg, hw) == 0.0 when cfg packs nothing
    """
    plans = pack_plan(s, cfg) if cfg.pack and cfg.regtile else []
    if not plans:
        return 0.0
    from ..cost.constants import FIT

    share = 1.0 if cfg.parallel else 1.0 / max(1, hw.cores)  # one thread uses a core's share of a level

    def level_for(nbytes: float):
        for lv in hw.cache_levels():
            if lv.bandwidth_gbs is not None and nbytes <= FIT * lv.size_bytes:
                return lv
        return hw.dram

    arrays = {a.name: a for a in s.scop.arrays}
    total = 0.0
    for p in plans:
        a = arrays[p.array]
        item = np.dtype(a.dtype).itemsize
        moved = float(p.elements) * p.copies * item
        whole = float(np.prod(a.shape)) * item
        src, panel = level_for(whole), level_for(float(p.elements) * item)
        # The nest's prediction already reads every element once from `src` (its compulsory traffic):
        # the first copy of each element costs only its write to the panel's level; copies beyond one
        # per element are extra reads from `src`.  Counting the first at `src` too made packing a
        # streamed operand look twice as dear as not: 64x4096 @ 4096^2 kept B unpacked, its 256-row
        # slivers a row stride apart, at 11.5 ms against 6.8 packed (Zen 5).
        first = min(moved, whole)
        for nbytes, lv in ((first, panel), (moved - first, src)):
            if nbytes > 0 and lv.bandwidth_gbs is not None:
                total += nbytes / (hw.bandwidth(lv) * share)
    return total


def streamed_columns(s: Schedule, r: Roles, hw: CPUDescriptor) -> List[str]:
    """Column operands of ``r``'s register tile larger than the last cache a kernel counts on
    (:data:`L3_SHARE`): read from memory, the rows of their slivers each a stream of its own.

    >>> # 8x4096 @ 4096^2: ["B"] (64 MB);  1024^3: [] (4 MB stays cached)
    """
    caches = hw.cache_levels()
    last = min(caches[-1].size_bytes, L3_SHARE) if caches else L3_SHARE
    return [op.array for op in _pack_operands(s, r)
            if not op.rows and math.prod(op.shape) * op.itemsize > last]


def stream_seconds(s: Schedule, cfg: TileConfig, hw: CPUDescriptor) -> float:
    """Seconds lost to the prefetchers when ``cfg`` reads an operand from memory unpacked
    (:func:`streamed_columns`), more than :data:`PREFETCH_STREAMS` rows at a time or in runs of a row
    shorter than a page: the nest's prediction counts its bytes at memory bandwidth, as if read in one
    stream; measured, 512 rows of 64-byte pieces ran at half that.  The share of the operand's memory
    time lost is ``1 - PREFETCH_STREAMS / rows`` plus ``RUN_LOSS x (page / run - 1)``.

        >>> # 8x4096 @ 4096^2, B unpacked in strips of 2048 columns: kc = 512: 64 MB / DRAM bandwidth * (1 - 32/512);
        >>> # kc = 32: 0.0;  kc = 32 in strips of 256 columns (1 KB runs): 64 MB / DRAM bandwidth * 0.05 * 3
    """
    r = roles(s, cfg.stmt)
    if r is None or not cfg.regtile:
        return 0.0
    streamed = streamed_columns(s, r, hw)
    if not streamed:
        return 0.0
    packed = {p.array for p in pack_plan(s, cfg)} if cfg.pack else set()
    rows = min(cfg.kc, r.extents[r.k]) * inner_points(r)
    arrays = {a.name: a for a in s.scop.arrays}
    run = min(cfg.nc, r.extents[r.j]) * np.dtype(arrays[streamed[0]].dtype).itemsize
    lost = max(0.0, 1.0 - PREFETCH_STREAMS / rows) + RUN_LOSS * max(0.0, PAGE_BYTES / run - 1.0)
    if lost <= 0.0:
        return 0.0
    share = 1.0 if cfg.parallel else 1.0 / max(1, hw.cores)
    return sum(arrays[a].nbytes / (hw.bandwidth(hw.dram) * share) * lost for a in streamed if a not in packed)


def operand_seconds(s: Schedule, cfg: TileConfig, hw: CPUDescriptor) -> float:
    """What the nest's prediction (``cost.predict_config``) leaves out about ``cfg``'s operands: the copies
    into packed panels (:func:`pack_seconds`) and the unpacked streams from memory (:func:`stream_seconds`).

    >>> # autotile ranks by cost.predict_config(s, cfg, hw).time_s + operand_seconds(s, cfg, hw)
    """
    return pack_seconds(s, cfg, hw) + stream_seconds(s, cfg, hw)


#: The most of a shared last-level cache one kernel counts on (a server part's 100+ MB are shared by
#: many cores; the candidates' panels, and the outputs that fit without a trip to memory).
L3_SHARE = 32 * 1024 * 1024
