"""The roles of a contraction's loops in the blocked nest, and one point of its space (:class:`TileConfig`).

See :mod:`polytile.autotile` for the nest; :func:`roles` finds ``i``, ``j`` and ``k`` in a statement.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import islpy as isl

from ..poly import body as B
from ..scheduling import Schedule
from ..scheduling.core import value_span

ORDERS = ("jki", "kji", "ijk", "jik", "kij", "ikj")  # order of the cache-tile loops, outermost first
#: Order of the two register-block loops, outer first: ``"ji"`` runs the row blocks innermost (the
#: ``kc x nr`` column sliver stays in L1 while the row panel streams from L2), ``"ij"`` the column
#: blocks (the ``mr x kc`` row sliver stays in L1, the ``kc x nc`` column panel streams from L2, and
#: successive blocks of the output lie side by side along its rows).
INNER = ("ji", "ij")


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
    inner: str = "ji"  # order of the register-block loops (:data:`INNER`)

    def __post_init__(self) -> None:
        if self.inner not in INNER:
            raise ValueError(f"TileConfig.inner must be one of {', '.join(INNER)}, not {self.inner!r}")
        if self.order not in ORDERS:
            raise ValueError(f"TileConfig.order must be one of {', '.join(ORDERS)}, not {self.order!r}")

    def to_json(self) -> Dict:
        return dict(self.__dict__)

    def __str__(self) -> str:
        return (f"{self.stmt}: {self.i}/{self.j}/{self.k} mc={self.mc} nc={self.nc} kc={self.kc} "
                f"mr={self.mr} nr={self.nr} order={self.order} par={self.parallel} reg={'y' if self.regtile else 'n'}"
                + ("" if self.pack or not self.regtile else " pack=n")
                + ("" if self.inner == "ji" else f" inner={self.inner}"))


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
    out_iters = [e.name for e in out_idx if isinstance(e, B.Iter)]
    used = B.iter_names(*out_idx)
    reds = [v for v in st.iters if v not in used]
    if not reds or len(out_iters) < 2:
        return None
    ext = {}
    for d, name in s.table[st.name].loops():
        span = value_span([s.table[st.name].map], d)
        if span is None:
            return None  # an empty domain (a zero-size loop): nothing to block
        ext[name] = span[1] - span[0] + 1
    j = _columns(st, out_iters, ext)
    # i: the output loop nearest j of those at least ROW_EXTENT long (else the longest), of those some operand does not move with
    # (its element is reused across the block's rows: a batch loop b of A[b, i, k] * X[b, k, j] moves
    # every operand, and as rows it left 128 x (64x128 @ 128x64) at 0.37x of numpy), and first of those
    # no operand moves with together with j (else that operand is a vector load per accumulator: a
    # channels-first convolution's image I[n, ci, x0 + k0, x1 + k1] with rows x0 ran NCHW 1x64x56x56
    # 3x3 -> 64 in 1.27 ms, with rows co, where the image vector serves every row, 0.60); k: the longest
    # reduction loop, of equal ones the later (the nearer the arrays' last axes: global average
    # pooling's x rather than y).
    rows = [v for v in out_iters if v != j]
    if not rows:
        return None  # every output index is j (a diagonal): no rows to block
    moved = [B.iter_names(ld) for ld in B.loads(st.body.value)]
    i = max(rows, key=lambda v: (any(v not in m for m in moved), not any({v, j} <= m for m in moved),
                                 min(ext.get(v, 0), ROW_EXTENT), out_iters.index(v)))
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


#: An output whose last axis is shorter than this (one 512-bit vector of floats) fills few lanes of a
#: register block's columns; :func:`_columns` then looks for another output axis to vectorise.
SHORT_COLUMNS = 16
#: The same for a last axis the domain ties to a reduction loop (a "same" convolution's x + kx - 1):
#: two of three kx then run edge blocks.  NCHW 3x3 "same", GFLOP/s with the image columns / the output
#: channels as the block's columns (Zen 5, two alternating runs, exploratory): 16x16x256 74-83 / 246-297,
#: 20x20x128 191 / 275-317, 28x28x128 273-291 / 364-378, 40x40x128 259-268 / 300-334, 48x48x128
#: 134-136 / 295-377, 56x56x128 384-389 / 339-347.
TIED_COLUMNS = 56


def _columns(st, out_iters: List[str], ext: Dict[str, int]) -> str:
    """The block's column loop: the output's last axis, unless it is shorter than :data:`SHORT_COLUMNS`
    (:data:`TIED_COLUMNS` where the domain ties it to a reduction loop) and another output loop at
    least twice :data:`SHORT_COLUMNS` long is the last, unit-stride axis of an operand and moves no
    operand along any other axis.  Then the sums are stored lane by lane
    (``codegen.microkernel.Plan.out_strided``), once per block.

    A channels-first convolution of a small image, ``O[n, co, y, x] = +(I[n, ci, y + ky, x + kx] *
    K[ky, kx, ci, co])`` at 7x7 or 14x14, ran 8-lane blocks over ``x``, 7 or 14 lanes of them useful,
    each filter scalar broadcast for one image row: NCHW 3x3 "same" 7x7x512 and 14x14x256 at 0.33x and
    0.67x of numpy's im2col (Zen 5, exploratory).  Over ``co``, as its channels-last twin, the filter
    is the vector operand and the image a broadcast scalar.

    >>> # O[n, co, x0, x1] at 7x7, K[.., co] -> "co";  at 56x56 -> "x1";  C[i, j] (any size) -> "j"
    """
    last = out_iters[-1]
    tied = bool(_tied(st, {last}) - set(out_iters))
    if ext.get(last, 0) >= (TIED_COLUMNS if tied else SHORT_COLUMNS):
        return last
    loads = B.loads(st.body.value)

    def vector_operand(v: str) -> bool:
        if out_iters.count(v) != 1 or ext.get(v, 0) < 2 * SHORT_COLUMNS:
            return False
        unit = False
        for ld in loads:
            axes = [d for d, e in enumerate(ld.index) if v in B.iter_names(e)]
            if not axes:
                continue
            if axes != [len(ld.index) - 1] or not (isinstance(ld.index[-1], B.Iter) and ld.index[-1].name == v):
                return False
            unit = True
        return unit
    others = [v for v in out_iters[:-1] if vector_operand(v)]
    return max(others, key=lambda v: (ext[v], out_iters.index(v))) if others else last


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


def inner_points(r: Roles) -> int:
    """Points of the reduction loops other than ``k`` that run inside the register tile (a convolution's
    ``ky``, ``kx``): every step of ``k`` is that many steps of the block, and its slivers that much longer.

    >>> # conv2d 3x3 (ky, kx inside): 9;  matmul: 1
    """
    n = 1
    for v in r.reductions:
        if v not in r.outside:
            n *= r.extents[v]
    return n


def blocked_order(r: Roles, cfg: TileConfig) -> List[str]:
    """Loop names of the blocked nest, outermost first (see the module docstring).

    >>> # matmul, order "ikj", inner "ji": i_t, k_t, j_t, j_t1, i_t1, k, i, j;  inner "ij": ..., i_t1, j_t1, k, i, j
    """
    tiles = {"i": f"{r.i}_t", "j": f"{r.j}_t", "k": f"{r.k}_t"}
    inside = [v for v in r.reductions if v not in r.outside]
    return list(r.outer) + [tiles[c] for c in cfg.order] + list(r.outside) + block_loops(r, cfg) \
        + inside + [r.k, r.i, r.j]


def block_loops(r: Roles, cfg: TileConfig) -> List[str]:
    """The two register-block loops of ``cfg``'s nest, outer first (:data:`INNER`).

    >>> # inner "ji": ["j_t1", "i_t1"];  inner "ij": ["i_t1", "j_t1"]
    """
    loops = {"i": f"{r.i}_t1", "j": f"{r.j}_t1"}
    return [loops[c] for c in cfg.inner]


def _trips(r: Roles, cfg: TileConfig) -> Dict[str, int]:
    """Trip counts of the blocked nest's tile loops and outer loops, by loop name."""
    E = r.extents
    return {f"{r.i}_t": -(-E[r.i] // cfg.mc), f"{r.j}_t": -(-E[r.j] // cfg.nc), f"{r.k}_t": -(-E[r.k] // cfg.kc),
            f"{r.i}_t1": -(-min(cfg.mc, E[r.i]) // cfg.mr), f"{r.j}_t1": -(-min(cfg.nc, E[r.j]) // cfg.nr),
            **{v: E[v] for v in r.outer}}
