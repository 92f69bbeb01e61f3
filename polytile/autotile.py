"""Stripe/BLIS-style tiling of contractions: the knob space, and the model-driven default.

For a contraction statement with output loops ``O`` and reduction loops ``R``
the blocked schedule is (BLIS's loop nest, generalised)::

    for O_rest            (outer output loops, untiled: n, y, batch...)
      for j_t   (nc)      columns of the output, step nc
        for k_t (kc)      one reduction loop, step kc
          for i_t (mc)    rows, step mc
            for j_t1 (nr) register blocks
              for i_t1 (mr)
                for R_rest, k      (all reduction loops)      <- regtile mark
                  for i (mr), j (nr)   accumulators in vector registers

``j`` is the output's unit-stride loop (vectorised), ``i`` another output
loop.  A :class:`TileConfig` fixes the sizes, the order of the three
cache-tile loops and the parallel loop; :func:`apply` turns it into schedule
steps (legality-checked like any others).  :func:`candidates` enumerates
configurations that fit the descriptor's caches, and :func:`autotile` picks
the one the cost model predicts fastest.
"""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import islpy as isl
import numpy as np

from .cost.constants import FMA_LATENCY, PAGE_BYTES
from .cost.nest import pads_columns
from .epilogues import fuse_epilogues, zero_per_block
from .errors import PolytileError, ScheduleError
from .hardware import CPUDescriptor
from .poly import body as B
from .scheduling import Schedule
from .scheduling.core import _value_range

ORDERS = ("jki", "kji", "ijk", "jik", "kij", "ikj")  # order of the cache-tile loops, outermost first


@dataclass(frozen=True)
class TileConfig:
    """One point of the blocked-schedule space for one statement (hashable, JSON-able)."""

    stmt: str
    i: str
    j: str
    k: str
    mc: int
    nc: int
    kc: int
    mr: int
    nr: int
    lanes: int
    order: str = "jki"
    parallel: Optional[str] = None  # loop name to run in parallel ("j_t", "i_t", an O_rest loop...)
    regtile: bool = True
    pack: bool = True  # copy operand panels into blocked buffers where :func:`pack_plan` says it pays

    def to_json(self) -> Dict:
        return dict(self.__dict__)

    def __str__(self) -> str:
        return (f"{self.stmt}: {self.i}/{self.j}/{self.k} mc={self.mc} nc={self.nc} kc={self.kc} "
                f"mr={self.mr} nr={self.nr} order={self.order} par={self.parallel} reg={'y' if self.regtile else 'n'}"
                + ("" if self.pack or not self.regtile else " pack=n"))


@dataclass(frozen=True)
class Roles:
    """How a contraction's loops map onto the blocked nest."""

    stmt: str
    i: str
    j: str
    k: str
    outer: Tuple[str, ...]  # O_rest
    reductions: Tuple[str, ...]  # R_rest (all reduction loops but k), in original order
    extents: Dict[str, int]
    # R_rest loops the domain ties to a block loop (a "same" convolution's kx: 0 <= x + kx - 1 < W);
    # they run outside the register blocks (:func:`blocked_order`).
    outside: Tuple[str, ...] = ()


#: Extent from which an output loop counts as long enough for a register block's rows; of such loops the
#: one nearest the column loop is taken, not the longest: a convolution over a batch of 16 images of
#: 14x14 took the batch n as rows.  Zen 5, exploratory, two alternating runs: 3x3 16x16x16 -> 64 0.16-0.18
#: ms over n, 0.14 over x; 1x1 16x14x14x128 -> 128 and 3x3 8x28x28x64 tie.
ROW_EXTENT = 8


def roles(s: Schedule, stmt: str) -> Optional[Roles]:
    """Loop roles of a contraction statement, or None when the blocked form does not apply.

    They depend only on the statement and its time map, so they are kept with the map (ranking a
    statement's candidates asks for them thousands of times).
    """
    name = s.resolve(stmt)
    ss = s.table[name]
    memo = ss.__dict__.setdefault("_roles", {})
    hit = memo.get(name)
    if hit is not None and hit[0] is s.scop:
        return hit[1]
    r = _roles(s, name)
    memo[name] = (s.scop, r)
    return r


def _roles(s: Schedule, stmt: str) -> Optional[Roles]:
    st = s.scop.statement(stmt)
    if st.kind not in ("contract", "c") or st.body.reduce not in ("+", "*"):
        return None
    loops = s.loop_names(st.name)
    # Original loop order only (iterators whose range is one point have no loop).
    if not set(loops) <= set(st.iters) or [v for v in st.iters if v in loops] != loops:
        return None
    out_idx = st.body.index
    if not out_idx or not isinstance(out_idx[-1], B.Iter):
        return None
    # Blocking pays through the register tile, which needs a value made of loads
    # and arithmetic in the output's dtype (no selects, comparisons, calls, casts).
    dtype = s.scop.array(st.body.array).dtype

    def value_nodes(n):  # the value's own nodes, not the index arithmetic inside loads
        yield n
        if not isinstance(n, B.Load):
            for c in B.children(n):
                yield from value_nodes(c)

    for x in value_nodes(st.body.value):
        if isinstance(x, (B.Cmp, B.Select, B.Call, B.Cast, B.Iter)):
            return None
        if isinstance(x, B.Bin) and (x.op not in ("+", "-", "*") or x.dtype != dtype):
            return None
        if isinstance(x, B.Load) and x.dtype != dtype:
            return None
    if not out_idx or not isinstance(out_idx[-1], B.Iter):
        return None  # the innermost output index is a constant: no row to block over
    j = out_idx[-1].name
    out_iters = [e.name for e in out_idx if isinstance(e, B.Iter)]
    used = B.iter_names(*out_idx)
    reds = [v for v in st.iters if v not in used]
    if not reds or len(out_iters) < 2:
        return None
    ext = {}
    for d, name in s.table[st.name].loops():
        rng = _value_range([s.table[st.name].map], d)
        if rng.strip("[]").strip() == "":
            return None  # an empty domain (a zero-size loop): nothing to block
        lo, hi = (int(x) for x in rng.strip("[]").split(","))
        ext[name] = hi - lo + 1
    # i: the output loop nearest j of those at least ROW_EXTENT long (else the longest), of those some operand does not move with
    # (its element is reused across the block's rows: a batch loop b of A[b, i, k] * X[b, k, j] moves
    # every operand, and as rows it left 128 x (64x128 @ 128x64) at 0.37x of numpy); k: the longest
    # reduction loop, of equal ones the later (the nearer the arrays' last axes: global average
    # pooling's x rather than y).
    rows = [v for v in out_iters if v != j]
    if not rows:
        return None  # every output index is j (a diagonal): no rows to block
    moved = [B.iter_names(ld) for ld in B.loads(st.body.value)]
    i = max(rows, key=lambda v: (any(v not in m for m in moved), min(ext.get(v, 0), ROW_EXTENT), out_iters.index(v)))
    if all(i in m for m in moved):
        # No row loop reuses an operand (a batched matrix-vector product, C[b, i] = +(A[b, i, k] * X[b, k])):
        # a block could only be one row deep, its columns gathered; the plain nest sums each cell in SIMD
        # lanes along a unit-stride k instead (64 x 256 x 256: 0.69 ms blocked against 0.36 for numpy).
        return None
    if ext.get(i, 0) <= 1:
        # Every row loop has one point (x @ W written as a 1 x K matrix, a 1x1 image): a block one row
        # deep reads each element of the other operand once, and streaming the rows with a private copy
        # of the small output per thread (scheduling.locality) is faster: 1 x 1024 @ 1024^2 ran 0.061 ms
        # blocked against 0.034 for numpy.
        return None
    k = max(reds, key=lambda v: (ext.get(v, 0), reds.index(v)))
    if all({i, j} <= m for m in moved):
        # Every operand moves with both block loops: no element is read twice, so a register block
        # has nothing to reuse (global average pooling S[n, c] += I[n, y, x, c]) and only breaks the
        # unit-stride stream the plain nest reads (scheduling.vector_inner puts c innermost).
        return None
    if i not in loops or j not in loops or k not in loops:
        return None
    outer = tuple(v for v in loops if v in used and v not in (i, j))
    rest = tuple(r for r in reds if r != k and r in loops)
    tied = _tied(st, {i, j})
    if k in tied:
        return None  # the register block's own reduction moves its bounds: no full blocks to hold
    return Roles(st.name, i, j, k, outer, rest, ext, tuple(v for v in rest if v in tied))


def _tied(st, loops) -> set:
    """Iterators sharing a constraint of ``st``'s domain with one of ``loops``.

    A read outside an array is skipped by shrinking the domain, so a padded convolution's
    ``O[y][x] += I[y + ky - 1][x + kx - 1] * F[ky][kx]`` has ``{ S[y, x, ky, kx] : 0 <= x + kx - 1 < W }``:
    the rows of a block at a given ``kx`` start where ``kx`` says, which the register tile cannot hold
    under its reduction loops (the code generator dropped it, leaving the generic nest).

    >>> # conv2d_same: _tied(st, {"x", "co"}) == {"x", "kx"}
    """
    pos = {v: d for d, v in enumerate(st.iters)}
    out: set = set()
    for bset in st.domain.get_basic_sets():
        for c in bset.remove_redundancies().get_constraints():
            involved = {v for v, d in pos.items() if not c.get_coefficient_val(isl.dim_type.set, d).is_zero()}
            if involved & set(loops):
                out |= involved
    return out - set(loops)


def apply(s: Schedule, cfg: TileConfig) -> Schedule:
    """The blocked schedule of ``cfg`` on ``s`` (every step legality-checked)."""
    r = roles(s, cfg.stmt)
    if r is None:
        raise ScheduleError(f"{cfg.stmt}: not a contraction in its original loop order; cannot block it")
    st = r.stmt
    plans = pack_plan(s, cfg) if cfg.regtile and cfg.pack else []
    s = s.tile(st, {r.i: [cfg.mc, cfg.mr], r.j: [cfg.nc, cfg.nr], r.k: [cfg.kc]})
    s = s.reorder(st, blocked_order(r, cfg))
    # Drop parallel marks inherited from the default schedule; choose one explicitly.
    for m in list(s.marks):
        if m[0] == st and m[2] == "parallel":
            s = s.unmark(st, m[1])
    if cfg.parallel:
        s = s.parallel(st, cfg.parallel)
    if cfg.regtile:
        s = s.regtile(st, r.i, r.j, mr=cfg.mr, nr=cfg.nr, lanes=cfg.lanes)
        for p in plans:
            s = s.pack(st, p.loop, p.array, dim=p.dim, block=p.block)
    return s


def blocked_order(r: Roles, cfg: TileConfig) -> List[str]:
    """Loop names of the blocked nest, outermost first (see the module docstring)."""
    tiles = {"i": f"{r.i}_t", "j": f"{r.j}_t", "k": f"{r.k}_t"}
    inside = [v for v in r.reductions if v not in r.outside]
    return list(r.outer) + [tiles[c] for c in cfg.order] + list(r.outside) + [f"{r.j}_t1", f"{r.i}_t1"] \
        + inside + [r.k, r.i, r.j]


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
    inside that do not move the panel).  Unpacked, the tile reads ``mr`` rows
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
            if elements * op.itemsize > budget:
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
    from .cost.constants import FIT

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
    rows = min(cfg.kc, r.extents[r.k]) * math.prod(r.extents[v] for v in r.reductions if v not in r.outside)
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


def _pow2_upto(n: int, lo: int = 1) -> List[int]:
    out, x = [], lo
    while x < n:
        out.append(x)
        x *= 2
    out.append(n)
    return sorted(set(out))


#: Share of the cores a parallel loop must keep busy (:func:`balance`) to be the blocked nest's parallel loop
#: when an inner one splits better: a 1x7x7x512 3x3 conv's 5 output rows over 2 cores kept one idle a
#: sixth of the time, and every candidate had them parallel (default 1.61 ms, the model's best 0.91);
#: over the output channels' tiles, 0.59-0.65 ms (numpy 0.68-0.72; Zen 5, exploratory).
BALANCE = 0.9


def balance(trip: int, cores: int) -> float:
    """The share of ``cores`` a static split of ``trip`` equal iterations keeps busy.

    >>> balance(5, 2), balance(4, 2), balance(54, 2)
    (0.8333333333333334, 1.0, 1.0)
    """
    return trip / (cores * -(-trip // cores))


#: Reduction steps a block must run for vectors under 32 bytes to pay (:func:`narrow_widths`).
NARROW_REDUCTION = 32


def narrow_widths(lanes: int, item: int, cols: int, steps: int, *, pad: bool = False) -> List[int]:
    """Vector widths (lanes) under a full register for a block of ``cols`` output columns: a register of
    half the width is still one register.

    Where the columns are fewer than a full vector: halves and quarters of at least 32 bytes.  8
    columns on 16 lanes ran the plain nest: a batch of 8x64 @ 64x8 products at 22 GFLOP/s (0.75 ms;
    0.09 blocked), 4096x256 @ 256x8 0.75 ms (0.09).  Under 32 bytes (16 and 8) only where no 32-byte
    vector fits the columns, and the block runs at least :data:`NARROW_REDUCTION` reduction steps:
    1024^2 @ 1024x4 float32 ran its plain nest at 0.35 ms, 0.105 in 8 x 4 blocks of 16 bytes (numpy
    0.09; Zen 5), but a batch of 4x4 @ 4x4 products on 16-byte vectors ran slower than its plain nest
    (24 vs 16 us): four steps do not pay for the block.  Such a block, and any where the columns fit
    one full vector, takes the fewest rows whose
    accumulators hide the multiply-add latency (``FMA_LATENCY`` x FMA units, 8 on Zen 5): each row is
    another stream of the unpacked left operand, which bounds these products.  1024^2 @ 1024x4 on
    4 lanes, rows 4 / 6 / 8 / 10 / 12 / 14: 0.124 / 0.129 / 0.077 / 0.113 / 0.082 / 0.141 ms
    (numpy 0.115; Zen 5, interleaved).

    With ``pad`` (the block may be wider than the columns, :func:`cost.nest.pads_columns`) also the
    narrowest vector that holds all of them, on the same terms: 6 columns in one 8-lane vector
    rather than a 4-lane block and its shifted edge block, twice the multiply-adds.

    >>> narrow_widths(16, 4, 12, 1024), narrow_widths(16, 4, 4, 1024), narrow_widths(16, 4, 4, 4)
    ([8], [4, 2], [])
    >>> narrow_widths(16, 4, 6, 1024, pad=True), narrow_widths(16, 4, 3, 1024, pad=True)
    ([8, 4, 2], [4, 2])
    """
    if cols >= lanes:
        return []
    out = []
    for w in (lanes >> s for s in range(1, lanes.bit_length())):
        if w < 2 or w * item < 8 or w > cols and not (pad and w < 2 * cols):
            continue
        if w * item >= 32 or (cols * item < 32 and steps >= NARROW_REDUCTION):
            out.append(w)
    return out


def candidates(s: Schedule, stmt: str, hw: CPUDescriptor, *, limit: int = 600,
               full_blocks: bool = True) -> List[TileConfig]:
    """Configurations for ``stmt`` whose tiles fit the descriptor's cache levels.

    mr x nr/lanes accumulators fit the vector registers (leaving room for
    operands), an ``mr x kc`` + ``kc x nr`` panel fits L1, ``mc x kc`` fits
    L2, ``kc x nc`` fits the last level a core can use.
    """
    r = roles(s, stmt)
    if r is None:
        return []
    st = s.scop.statement(r.stmt)
    dtype = s.scop.array(st.body.array).dtype
    item = np.dtype(dtype).itemsize
    lanes = hw.vector_lanes(dtype)
    regs = max(hw.vector_registers, 8)
    E = r.extents
    caches = hw.cache_levels()
    l1 = caches[0].size_bytes if caches else 32 * 1024
    l2 = caches[1].size_bytes if len(caches) > 1 else 8 * l1
    l3 = caches[2].size_bytes if len(caches) > 2 else 4 * l2
    l3 = min(l3, L3_SHARE)
    blocks = []
    steps = E[r.k] * math.prod(E[v] for v in r.reductions if v not in r.outside)
    # A padded block runs the edge block's staging of its output cells: a short reduction does not pay
    # for it (64 rows x 6 columns over 4 steps: 4.9 us padded, 2.1 plain; 256 x 6 over 16: 5.1 and 5.4).
    pad = steps >= NARROW_REDUCTION and pads_columns(st, r.i, r.j)
    widths = [lanes] + narrow_widths(lanes, item, E[r.j], steps, pad=pad)
    chains = math.ceil(FMA_LATENCY * max(1, hw.fma_units_per_core))
    for width in widths:
        for nv in (1, 2, 3, 4, 6, 8):
            nr = nv * width
            for mr in (1, 2, 3, 4, 6, 8, 12, 14):
                if mr * nv + nv + 1 > regs or mr * nv < 4:
                    continue
                if (width < lanes or E[r.j] <= lanes) and not mr * nv >= chains > (mr - 1) * nv:
                    continue  # few columns: just the accumulators that hide the latency (narrow_widths)
                blocks.append((mr, nr, width))
    out: List[TileConfig] = []
    cores = max(1, hw.cores)

    def parallel_loop(order: str, mc: int, nc: int, mr: int, nr: int) -> str:
        """The outermost loop of the blocked nest that carries no dependence and splits over the
        cores with at least :data:`BALANCE` of them busy (:func:`balance`); else the best balanced of
        those with at least two iterations; else the outermost.

        Loops of one iteration generate no code, so a mark there would be lost.
        """
        trips = {f"{r.j}_t": -(-E[r.j] // nc), f"{r.i}_t": -(-E[r.i] // mc)}
        loops = [(v, E[v]) for v in r.outer] + [(f"{getattr(r, c)}_t", trips[f"{getattr(r, c)}_t"])
                                                for c in order if c in "ij"]
        loops += [(f"{r.j}_t1", -(-min(nc, E[r.j]) // nr)), (f"{r.i}_t1", -(-min(mc, E[r.i]) // mr))]
        for name, trip in loops:
            if trip >= cores and balance(trip, cores) >= BALANCE:
                return name
        split = [(balance(trip, cores), -k, name) for k, (name, trip) in enumerate(loops) if trip >= 2]
        return max(split)[2] if split else loops[0][0]

    # At least one full register block, or the register tile never runs and
    # blocking only adds loop overhead: small problems keep the plain schedule
    # (the tuner, which measures, may still ask for them with full_blocks=False).
    if full_blocks:
        # A block wider than the columns pads them (pads_columns): at most its last vector partly used,
        # and that less than half (3 columns take a 4-lane vector, not a 16-lane one).
        blocks = [(mr, nr, width) for mr, nr, width in blocks
                  if mr <= E[r.i] and (nr <= E[r.j] or (pad and nr < E[r.j] + width and width < 2 * E[r.j]))]
    rest = 1
    for v in r.reductions:
        if v not in r.outside:
            rest *= E[v]
    streamed = bool(streamed_columns(s, r, hw))
    for mr, nr, width in blocks:
        # The two longest reduction segments whose mr x kc + kc x nr slivers fit L1
        # (BLIS's kc rule; shorter ones only reload the accumulators more often).
        # The other reduction loops (a convolution's ky, kx) run inside the register
        # tile, so its slivers are that many times longer.
        fits = sorted({min(kc, E[r.k]) for kc in (8, 16, 32, 64, 128, 192, 256, 384, 512)
                       if (mr + nr) * min(kc, E[r.k]) * rest * item <= l1})
        kcs = fits[-2:]
        if streamed and E[r.i] <= mr:
            # A column operand from memory read by one row block (8x4096 @ 4096^2), each element used
            # once: also the longest segment whose rows the prefetchers can follow (stream_seconds).
            # Not for two or more row blocks: 16 rows ranked 4-row blocks over 32 steps first (5.2 ms,
            # 4.3 as before; 3.6 for the 8-row blocks the model ties with them).
            kcs = sorted(set(kcs) | set([kc for kc in fits if kc * rest <= PREFETCH_STREAMS][-1:]))
        strips = [nr * x for x in (4, 8, 16, 32, 64)]
        if streamed and E[r.i] <= mr:
            strips.append(nr * -(-E[r.j] // (cores * nr)))  # each core's share in one strip (RUN_LOSS)
        for kc in kcs:
            # Powers-of-two-ish multiples of mr, and the row counts that split the rows
            # evenly over the cores (1-4 blocks each): a balanced parallel loop.
            even = {mr * -(-E[r.i] // (cores * t * mr)) for t in (1, 2, 3, 4)}
            for mc in sorted({mr * x for x in (4, 8, 12, 16, 24, 32, 48)} | even):
                mc = min(mc, max(mr, E[r.i]))
                if mc * kc * item > l2 // 2:
                    continue
                for nc in dict.fromkeys(strips):
                    nc = min(nc, max(nr, E[r.j]))
                    if kc * nc * item > l3 // 2:
                        continue
                    for order in ("jki", "kji", "ijk", "ikj", "kij"):
                        # A narrower width rides at the end, so a full-width entry reads (and samples) as before.
                        out.append((mc, nc, kc, mr, nr, order) + ((width,) if width != lanes else ()))
    # Deduplicate (clamped sizes collide) and keep the set manageable.  The parallel loop is a
    # function of the other fields, so it is worked out only for the configurations kept.
    uniq = sample(list(dict.fromkeys(out)), limit)
    return [TileConfig(r.stmt, r.i, r.j, r.k, mc, nc, kc, mr, nr, (narrow or (lanes,))[0], order,
                       parallel_loop(order, mc, nc, mr, nr))
            for mc, nc, kc, mr, nr, order, *narrow in uniq]


def sample(items: Sequence, limit: int) -> List:
    """The ``limit`` items of smallest checksum (of their ``repr``), in their order: deterministic, and
    stable when the space grows -- an item kept from a larger list is kept from any part of it that
    holds it, so new block shapes displace a few configurations instead of redrawing them all.

    >>> sample(list(range(10)), 20) == list(range(10))
    True
    """
    if len(items) <= limit:
        return list(items)
    keep = set(sorted(range(len(items)), key=lambda k: (zlib.crc32(repr(items[k]).encode()), k))[:limit])
    return [x for k, x in enumerate(items) if k in keep]


def contraction_statements(s: Schedule) -> List[str]:
    return [st.name for st in s.scop.statements if roles(s, st.name) is not None]


def autotile(s: Schedule, hw, *, predict=None) -> Tuple[Schedule, List[TileConfig]]:
    """Block every contraction of ``s`` with the configuration the cost model ranks best.

    Configurations are ranked analytically (``cost.predict_config``: isl
    footprints of the tile boxes, no schedule built per candidate); only the
    winner is applied.  Returns the new schedule and the chosen
    configurations; statements the blocked form does not fit keep theirs.
    """
    from . import cost

    bound = memory = None
    if predict is None:
        predictions: Dict[TileConfig, object] = {}

        def prediction(cfg: TileConfig):
            if cfg not in predictions:
                predictions[cfg] = cost.predict_config(s, cfg, hw)
            return predictions[cfg]
        # The copies into packed panels are not in the nest's prediction; they are added here.
        predict = lambda sched, cfg: prediction(cfg).time_s + operand_seconds(s, cfg, hw)  # noqa: E731
        memory = lambda cfg: memory_time(prediction(cfg))  # noqa: E731
        bound = lambda c: cost.config_bound(s, c, hw)  # noqa: E731
    chosen: List[TileConfig] = []
    if not isinstance(hw, CPUDescriptor):
        return s, chosen
    for st in contraction_statements(s):
        # Only the first three are tried; the bound spares predicting the configurations that cannot be among them.
        ranked = rank(s, candidates(s, st, hw), lambda c: predict(s, c), bound=bound, need=3, memory=memory)
        r = roles(s, st)
        for cfg in ranked[:3]:
            try:
                s = apply(s, cfg)
            except PolytileError:
                continue
            chosen.append(cfg)
            caches = hw.cache_levels()
            s = zero_per_block(s, cfg, r, min(caches[-1].size_bytes, L3_SHARE) if caches else 0)
            break
    for cfg in chosen:
        s = fuse_epilogues(s, cfg)
    return s, chosen


def memory_time(prediction) -> float:
    """:func:`rank`'s last tie-break: a ``cost.Prediction``'s memory time, summed over the levels.

    >>> # memory_time(cost.predict_config(s, cfg, hw)) -> 0.0072  (seconds)
    """
    return sum(prediction.level_time_s.values())


#: Reduction steps per accumulator load and store past which a longer segment is no tie-break (its
#: accumulator traffic under 1% of the block's loads): a 3x3 conv of 256 -> 32 channels took kc = 32
#: (288 steps, its slivers spilling L1) over kc = 16 (144, the model's least memory time), 0.67 against
#: 0.33 ms (Zen 5, exploratory).  A GEMM's segments (192, 256) both pass it.
DEEP_ENOUGH = 128

# Predictions this close (relative) are a tie: the model sees no difference
# (typically all compute-bound), so the choice falls to packing (below).
TIE = 0.02


def rank(s: Schedule, configs: Sequence[TileConfig], predict, *, bound=None,
         need: Optional[int] = None, memory=None) -> List[TileConfig]:
    """Configurations best first: by predicted time, ties broken by how well packing serves them.

    Among configurations predicted within :data:`TIE` of each other, prefer
    wider vectors (:func:`_first_key`; only narrow candidates differ), then
    (0) more of the iterations in full register blocks (the edges run the
    generic loops, much slower than the model's average assumes), (1) more
    operands packed (one contiguous stream per operand instead of a
    stream per row), (2) fewer parallel regions (:func:`regions`: every fork
    and join waits for the slowest thread, and a panel packed outside the
    parallel loop is a serial step; on a shared machine these dominate),
    (3) a longer reduction segment ``kc`` (the accumulator block is loaded
    and stored once per ``kc`` steps, and BLIS sizes ``kc`` so the ``kc x nr``
    sliver fills L1 -- the candidates already respect that), (4) fewer
    elements copied into packed panels over the run, (5) with ``memory`` (a
    configuration's predicted memory time, summed over the levels), the least:
    the model overlaps memory traffic with compute perfectly, the cores do
    not, so of two configurations the roofline calls compute-bound the one
    that moves less data runs faster (a conv2d 1x28x28x128 whose filter
    slivers stay in L1 across all its rows, not only six: 0.64 vs 0.68 ms
    best-of on the AVX-512 Xeon VM).  The time prediction,
    already at the compute bound for such configurations, does not tell these
    apart; measurements do (see benchmarks/bench_gemm.py).

    With ``bound`` (a lower bound of ``predict``, e.g. ``cost.config_bound``) and ``need``, only the
    first ``need`` entries are returned, the same as the full ranking's, and configurations the
    bound rules out are never predicted.
    """
    if bound is not None and need is not None:
        return _rank_bounded(s, configs, predict, bound, need, memory)
    timed = [(predict(c), k, c) for k, c in enumerate(configs)]
    timed.sort(key=lambda x: (x[0], x[1]))
    out: List[TileConfig] = []
    rest = timed
    while rest:
        best = rest[0][0]
        tie = [x for x in rest if x[0] <= best * (1 + TIE)]
        rest = [x for x in rest if x[0] > best * (1 + TIE)]
        out += _break_tie(s, tie, memory=memory)
    return out


def _break_tie(s: Schedule, tie: List[Tuple[float, int, TileConfig]], need: Optional[int] = None,
               memory=None) -> List[TileConfig]:
    """``tie`` ordered by :func:`structure_key` (then time, then position); with ``need``, only its first
    ``need``: the key is lexicographic, so a configuration whose first entry is worse than the
    ``need``-th best first entry cannot be among them and is spared its packing plan."""
    if len(tie) == 1:
        return [tie[0][2]]
    if need is not None and len(tie) > need:
        first = [_first_key(s, x[2]) for x in tie]
        cut = sorted(first)[need - 1]
        tie = [x for x, f in zip(tie, first) if f <= cut]
    out = [x[2] for x in sorted(tie, key=lambda x: (structure_key(s, x[2]), memory(x[2]) if memory else 0.0,
                                                      x[0], x[1]))]
    return out if need is None else out[:need]


def _rank_bounded(s: Schedule, configs: Sequence[TileConfig], predict, bound, need: int,
                  memory=None) -> List[TileConfig]:
    """The first ``need`` entries of ``rank(s, configs, predict)``, predicting only
    configurations whose lower ``bound`` could place them there.

    Exact: configurations are predicted in order of their bound until the next bound exceeds the
    best unplaced prediction by more than :data:`TIE`; every configuration left has a time above
    that, so it is neither the best nor in its tie group.  Then the tie group is placed as
    :func:`rank` places it, and the same repeats for the next group.
    """
    order = sorted(((bound(c), k, c) for k, c in enumerate(configs)), key=lambda x: (x[0], x[1]))
    pos, pending, out = 0, [], []
    while len(out) < need and (pending or pos < len(order)):
        if not pending:
            _, k, c = order[pos]
            pending.append((predict(c), k, c))
            pos += 1
        while pos < len(order) and order[pos][0] <= min(pending)[0] * (1 + TIE):
            _, k, c = order[pos]
            pending.append((predict(c), k, c))
            pos += 1
        best = min(pending)[0]
        tie = sorted((x for x in pending if x[0] <= best * (1 + TIE)), key=lambda x: (x[0], x[1]))
        pending = [x for x in pending if x[0] > best * (1 + TIE)]
        out += _break_tie(s, tie, need - len(out), memory)
    return out


def structure_key(s: Schedule, cfg: TileConfig) -> Tuple:
    """Sort key of :func:`rank`'s tie-break: vector width, full blocks, packed operands, parallel regions, kc,
    copying."""
    r = roles(s, cfg.stmt)
    if r is None:
        return (0, 0.0, 0, 1, 0, 0)
    plans = pack_plan(s, cfg) if cfg.pack else []
    copied = sum(p.elements * p.copies for p in plans)
    depth = min(cfg.kc, r.extents[cfg.k])
    for v in r.reductions:  # the other reduction loops inside the block (a convolution's ky, kx)
        if v not in r.outside:
            depth *= r.extents[v]
    return _first_key(s, cfg) + (-len(plans), regions(s, cfg), -min(depth, DEEP_ENOUGH), copied)


def _first_key(s: Schedule, cfg: TileConfig) -> Tuple[int, float]:
    """The first entries of :func:`structure_key` (cheap: no packing plan): wider vectors, then full blocks.

    Vectors narrower than a full register (:func:`narrow_widths`) tie where the A stream bounds the
    time; the wider runs fewer multiply-adds per column (``ceil(N / w)``, edge blocks included) and
    won: 1024^2 @ 1024x4 float32 on 4 lanes 0.105 ms, on 2 lanes 0.15 (Zen 5).  Full-width
    configurations all have the same lanes, so their order is unchanged.
    """
    return (-cfg.lanes, _full_blocks_key(s, cfg))


def _full_blocks_key(s: Schedule, cfg: TileConfig) -> float:
    """The first entry of :func:`structure_key` (cheap: no packing plan)."""
    from .cost.nest import edge_blocks, regtile_parts

    r = roles(s, cfg.stmt)
    if r is None:
        return 0.0
    full = 1.0
    if cfg.regtile:
        E = r.extents
        weight, plain = regtile_parts((E[r.i], cfg.mc, cfg.mr), (E[r.j], cfg.nc, cfg.nr), "vector", cfg.lanes,
                                      edge_blocks(s.scop.statement(r.stmt), E[r.j], cfg.nr, r.i, r.j))
        if not plain:
            # Edge blocks run the micro-kernel: what counts is the share of its work not thrown away, to
            # a thousandth (the time prediction already has it, within the ranking's TIE).
            return -round(1.0 / weight, 3)
        full = weight
    return -round(full, 2)


def regions(s: Schedule, cfg: TileConfig) -> int:
    """How many times ``cfg``'s nest enters its parallel loop (trips of the loops around it)."""
    r = roles(s, cfg.stmt)
    if r is None or not cfg.parallel:
        return 1
    trip = _trips(r, cfg)
    n = 1
    for name in blocked_order(r, cfg):
        if name == cfg.parallel:
            return n
        n *= trip.get(name, 1)
    return n


def _trips(r: Roles, cfg: TileConfig) -> Dict[str, int]:
    """Trip counts of the blocked nest's tile loops and outer loops, by loop name."""
    E = r.extents
    return {f"{r.i}_t": -(-E[r.i] // cfg.mc), f"{r.j}_t": -(-E[r.j] // cfg.nc), f"{r.k}_t": -(-E[r.k] // cfg.kc),
            f"{r.i}_t1": -(-min(cfg.mc, E[r.i]) // cfg.mr), f"{r.j}_t1": -(-min(cfg.nc, E[r.j]) // cfg.nr),
            **{v: E[v] for v in r.outer}}
