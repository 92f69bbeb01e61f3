"""The polyhedral cost model: predicted run time of a schedule on a hardware descriptor.

Pure functions of (schedule, descriptor); nothing is compiled or measured
here.  The model is a roofline over a loop nest: the predicted time is the
slowest of the arithmetic and the data movement between each pair of
adjacent memory levels,

    time = max(compute_s, max_X traffic[X] / bandwidth(X))

Notation.  A statement ``S`` has the domain ``D = { S[x] : ... }`` and, for
every array ``a`` it touches, the access relation ``acc_a = { S[x] -> a[f(x)] }``
(loads and the store, unioned).  Its schedule is a 2d+1 time map
``θ = { S[x] -> [t0, ..., t(n-1)] }``; its loops are the named α dimensions
``ℓ = 0 .. L-1``, outermost first.

Tiles and footprints
--------------------
The *tile at depth ℓ* is one iteration of the loops outside ``ℓ``: the
instances sharing a time prefix ``p``::

    T_ℓ(p) = { S[x] ∈ D : θ(x)[0 .. dim(ℓ)) = p }          (T_0 = D, T_L = one instance)

and the footprint of ``a`` over it is the size of the image ``acc_a(T_ℓ(p))``::

    F_a(ℓ) = | { a[c] : ∃ x ∈ T_ℓ(p) : S[x] -> a[c] ∈ acc_a } |   (elements, times the item size)

:func:`footprint` computes it for boxes ``{ S[x] : lo <= x < lo + size } ∩ D``.
Counting: when the image's bounding box holds at most :data:`EXACT_CELLS`
cells the image is counted exactly with isl's ``Set.count_val`` (which
enumerates points: ~3 ns per point, 0.4 s for 512^3, so it is not used for
big sets); bigger images are measured by their box hull, per dimension
``(max - min) / stride + 1`` from ``dim_min_val``/``dim_max_val``/``get_stride``
(exact for images of boxes under the affine, strided and floor-divided
indices of Tile; never more than the number of instances in the box).
islpy's ``FixedBox`` (``get_range_simple_fixed_box_hull``) has no accessors
in the islpy this project uses, hence the per-dimension bounds.  Cache
traffic counts whole lines: the last index of ``a`` is grouped into lines of
``line_bytes / itemsize`` elements (``a[.., c] -> a_line[.., floor(c / e)]``),
so a strided or transposed access costs a line per element.

:func:`predict` takes ``p`` as the time prefix of a central instance of
``D`` (an interior tile, full also where the last tile is partial) and
builds ``T_ℓ(p)`` with isl from θ.  :func:`predict_config` knows the blocked
nest of a :class:`~polytile.autotile.TileConfig` (register block ``mr x nr``
over ``k``; ``mc x kc`` A-panel; ``kc x nc`` B-panel; the whole problem), so
its tiles are boxes at the domain's origin and the footprints are cached
per (statement, box sizes): ranking hundreds of configurations costs a few
ms each.

Trip counts are ratios of instance counts, ``trips(ℓ) = |T_ℓ| / |T_(ℓ+1)|``,
so their product is ``|D|`` and a partial last tile counts as the fraction
it is (``E / mc`` iterations of an ``mc``-tile loop over ``E`` points).

Traffic
-------
Level names are the descriptor's.  ``traffic[X]`` is the number of bytes the
level ``X`` delivers to the level inside it -- ``traffic["L1"]`` is what the
registers load from (and store to) L1, ``traffic["L2"]`` the fills of L1,
..., ``traffic["DRAM"]`` the fills of the last cache -- and it is served at
X's bandwidth: ``level_time_s[X] = traffic[X] / bandwidth(X)`` (whole
machine; a per-core level with fewer busy threads than cores delivers its
per-core bandwidth times the busy threads).

*Caches* (LRU).  Level ``Y`` (the one inside ``X``) holds ``C_Y`` bytes per
thread: its size for a per-core level, size / threads for a shared one.
``d*`` is the outermost depth whose tile fits, ``Σ_a F_a(d*) <= FIT * C_Y``.
Between consecutive iterations of loop ``d* - 1`` the reuse distance is one
tile at ``d*``, which fits, so what consecutive iterations share stays
resident; further out it does not.  Each execution of loop ``d* - 1``
therefore loads its whole footprint once::

    traffic_a = F_a(d* - 1) * Π_{e < d*-1} trips(e)         (d* = 0: F_a(0), compulsory)

with footprints in lines.  The written array counts twice (the line comes
in and is written back).

*Set conflicts.*  A cache whose sets span at most a page
(``sets * line <= PAGE_BYTES``: the virtually indexed L1) maps an address
to a set by its page offset, so arrays (page-aligned, as large numpy
arrays are) conflict predictably: rows a power of two apart land in few
sets.  For such a level the lines of each array in the tile are mapped
through ``{ a[c] -> set[floor(addr(c) / line) mod sets] }`` (``addr`` the
row-major byte offset) and counted; the tile fits only if every array also
has ``lines_a <= FIT * sets_a * ways``.  (A 64 x 16 panel of a 512-wide
float matrix is 4 KiB but uses 2 of L1's 64 sets: it cannot stay.)

*Registers* are not LRU: they keep what the code generator keeps there.  A
``regtile`` mark holds the ``mr x nr`` accumulator block across the reduction
loops, so the register tile is the block (``d* = L - 2``); plain code holds
one instance (``d* = L``), the values the innermost loop does not change
being hoisted out of it.  A register tile is reloaded for every iteration
of the enclosing loops out to the innermost loop ``e_a`` it depends on
(``F_a(e_a) > F_a(e_a + 1)``)::

    traffic_a = F_a(d*) * Π_{e <= e_a} trips(e)              (elements, not lines)

Compute
-------
``flops = ops * |D|`` where ``ops`` counts the arithmetic of the body and the
reduction (2 for a multiply-add contraction).  ``|D|`` is the product of the
extents when ``D`` equals its bounding box (checked with isl), else isl's
``count_val``.  Each part of the instances runs at
``peak(dtype) / cores * speedup * efficiency``:

* ``speedup``: the parallel loop (a ``parallel`` mark) with ``T`` iterations
  runs on ``P = min(cores, ⌈T⌉)`` threads, statically scheduled; the
  busiest gets ``min(⌈⌈T⌉ / P⌉, T)`` iterations' work (a partial last
  iteration is only its own when it is alone), so
  ``speedup = T / min(⌈⌈T⌉ / P⌉, T)`` (one iteration: no speedup; isl does
  not even emit the loop).  Each entry into a parallel region costs
  :data:`OMP_REGION_S`.  Per-thread traffic uses one thread's share of the
  parallel loop.
* ``efficiency`` by the code the schedule gets (``V``: SIMD lanes; ``v``:
  lanes of gcc's auto-vectorised code, at most :data:`PLAIN_VECTOR_BYTES`):

  - full ``mr x nr`` blocks of a ``regtile`` mark: per reduction step the
    micro-kernel issues ``mr * nr/V`` FMAs on ``fma_units`` pipes and
    ``nr/V + mr`` loads on :data:`LOAD_PORTS` ports, and each accumulator
    waits :data:`FMA_LATENCY` cycles for its previous FMA::

        eff = KERNEL_EFF * (mr nr/V / fma_units) / max(mr nr/V / fma_units, (nr/V + mr) / LOAD_PORTS, FMA_LATENCY)

    The partial blocks at the edges (fractions from the tile and block sizes)
    run the plain loops below, with their own (shorter) innermost loops;
  - plain loops whose innermost loop is unit-stride (or invariant) in every
    access and free of dependences (gcc vectorises it): ``T`` iterations are
    ``T/v`` vectors; the innermost reduction loop around it advances ``c``
    independent vector accumulations per step (``c = F_w(e+1) / v`` for the
    written array ``w``)::

        eff = EFF_VECTOR * (T/v) / (T/v + VECTOR_STARTUP) * min(1, c / VECTOR_CHAINS)

    gcc -O3 also interchanges an innermost reduction loop with the output
    loop around it when that loop is unit-stride (matmul's ijk becomes ikj),
    which the model follows;
  - innermost loop carrying a reduction: one dependent chain,
    ``EFF_REDUCTION / (V * fma_units)``;
  - otherwise (strided, or a single vector or less): ``EFF_SCALAR / V``.

Calibration
-----------
``python benchmarks/bench_model.py --calibrate`` times (one thread, best of
9 calls, matmul 512^3 and conv2d 1x56x56x64 -> 64, 3x3) one schedule per kind
of code and prints its measured fraction of one core's peak next to the
model's; the constants were set from those runs and from the one-thread
benchmark tables on the development machine (2-core Sapphire Rapids VM
under KVM, 166 GFLOP/s fp32 per core at the nominal 2.6 GHz, gcc 12.2 -O3
-march=native -fopenmp, parallel bodies outlined into restrict functions):

* register kernels 0.45 (4x16, latency-bound) .. 0.75 (8x32, 14x32) of
  peak on matmul, up to 1.0 on conv (6x64; turbo lifts the clock above the
  nominal one): ``KERNEL_EFF = 0.9`` with 2 load ports and a 4-cycle FMA
  latency (the x86 figures since Haswell/Zen);
* vectorised plain loops: conv's co loops of 64 floats 0.34, matmul's j
  loops of 32 0.2..0.3, loops of 16 floats (two 8-float vectors) 0.09..0.14,
  matmul ikj (a j loop of 512, L1-bound on its loads and stores) 0.18:
  ``EFF_VECTOR = 0.4``, ``VECTOR_STARTUP = 3``, ``VECTOR_CHAINS = 8``
  (store-to-load forwarding plus the FMA latency, ~10 cycles);
* conv in program order (ci innermost, a reduction gcc cannot interchange):
  1.5 GFLOP/s, 0.009 of peak: ``EFF_REDUCTION = 0.3``;
* libgomp's fork/join: a few microseconds (``OMP_REGION_S``).

The compiler's choices move these numbers (the outlining of parallel bodies
doubled the plain loops' rates), so recalibrate after code generation changes.

Ranking quality is measured by ``benchmarks/bench_model.py`` (Spearman's
rank correlation of predicted and measured times over ~48 schedules each
of matmul and conv2d).
"""
from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import islpy as isl

from .hardware import CPUDescriptor, HardwareError, dtype_bytes
from .poly import body as B
from .poly.scop import Statement

__all__ = ["Prediction", "footprint", "predict_config", "predict", "spearman",
           "EXACT_CELLS", "FIT", "KERNEL_EFF", "EFF_VECTOR", "EFF_REDUCTION", "EFF_SCALAR",
           "FMA_LATENCY", "LOAD_PORTS", "OMP_REGION_S", "VECTOR_STARTUP", "VECTOR_CHAINS", "PLAIN_VECTOR_BYTES",
           "PAGE_BYTES"]

# ---------------------------------------------------------------------------
# Constants (see "Calibration" in the module docstring)
# ---------------------------------------------------------------------------

#: Images whose bounding box holds at most this many cells are counted exactly.
EXACT_CELLS = 1 << 16
#: Fraction of a cache a tile may fill before conflicts evict it.
FIT = 0.75
#: Register micro-kernel: fraction of the port-model rate reached (loop overhead, C loads/stores).
KERNEL_EFF = 0.9
#: gcc-vectorised innermost loop: fraction of peak (loads and stores of every operand each iteration).
EFF_VECTOR = 0.4
#: Vectors' worth of time a vectorised loop loses per execution (set-up, remainder checks):
#: a loop of T vectors runs at T / (T + VECTOR_STARTUP) of EFF_VECTOR.
VECTOR_STARTUP = 3.0
#: Innermost reduction loop: fraction of one scalar FMA pipe used by the dependent chain.
EFF_REDUCTION = 0.3
#: Scalar (strided, unvectorised) innermost loop: fraction of one scalar FMA pipe.
EFF_SCALAR = 0.5
#: Cycles of an FMA's latency (Skylake..Sapphire Rapids, Zen 3/4: 4).
FMA_LATENCY = 4.0
#: Loads per cycle the register micro-kernel sustains (its A broadcasts and B vectors).
LOAD_PORTS = 2.0
#: Seconds per entry into an OpenMP parallel region (fork + join barrier).
OMP_REGION_S = 3e-6
#: Independent vector accumulations a plain vectorised loop needs per step of its
#: reduction loop to hide the store-to-load forwarding + FMA latency.
VECTOR_CHAINS = 8.0
#: Widest vector gcc's auto-vectoriser uses (-mprefer-vector-width=256 on AVX-512 parts).
PLAIN_VECTOR_BYTES = 32
#: Page size: a cache whose sets span at most a page (sets * line <= page, the
#: virtually indexed L1) maps addresses to sets by their page offset, so the
#: set conflicts of power-of-two strides are predictable there.
PAGE_BYTES = 4096


@dataclass(frozen=True)
class Prediction:
    """A predicted run time and where it comes from (see the module docstring)."""

    time_s: float  # max(compute_s, max over levels of level_time_s)
    compute_s: float
    traffic: Dict[str, float]  # bytes level X delivers to the level inside it
    level_time_s: Dict[str, float]  # traffic[X] / bandwidth(X)
    flops: float
    parallelism: int  # threads usefully busy, min(cores, parallel trip count), in the slowest nest
    notes: Tuple[str, ...] = ()

    @property
    def bound(self) -> str:
        """What limits the prediction: ``"compute"`` or the level name."""
        worst = max(self.level_time_s.items(), key=lambda kv: kv[1], default=(None, 0.0))
        return "compute" if worst[0] is None or self.compute_s >= worst[1] else worst[0]


# ---------------------------------------------------------------------------
# Statements: accesses, item sizes, extents (cached per Statement object)
# ---------------------------------------------------------------------------


class _StmtInfo:
    """What the model needs of one statement, computed once."""

    def __init__(self, stmt: Statement):
        self.stmt = stmt
        ctx = stmt.domain.get_ctx()
        self.ctx = ctx
        # acc_a: the statement's own access relations (reads and the write, per array), so
        # statements that carry explicit accesses (the C frontend) are measured the same way.
        acc: Dict[str, isl.Map] = {}
        maps: List[isl.Map] = []
        stmt.reads().foreach_map(maps.append)
        maps.append(stmt.write_map())
        for m in maps:
            array = m.get_tuple_name(isl.dim_type.out)
            acc[array] = acc[array].union(m) if array in acc else m
        # Item sizes from the body's loads and stored value; the Scop's arrays refine them (_info).
        items: Dict[str, int] = {}
        loads = list(B.loads(stmt.body.value))
        for e in stmt.body.index:
            loads.extend(B.loads(e))
        for ld in loads:
            items.setdefault(ld.array, dtype_bytes(ld.dtype))
        items.setdefault(stmt.body.array, dtype_bytes(stmt.body.value.dtype))
        for array in acc:
            items.setdefault(array, 4)
        self.access = acc
        self.itemsize = items
        self.written = stmt.write_map().get_tuple_name(isl.dim_type.out)
        n = len(stmt.iters)
        dom = stmt.domain
        self.lo: Dict[str, int] = {}
        self.extent: Dict[str, int] = {}
        if not dom.is_empty():
            for d, it in enumerate(stmt.iters):
                lo = dom.dim_min_val(d)
                hi = dom.dim_max_val(d)
                if lo.is_int() and hi.is_int():
                    self.lo[it] = int(lo.to_python())
                    self.extent[it] = int(hi.to_python()) - self.lo[it] + 1
        self.n = n
        self.ops = ops_per_instance(stmt.body)
        self._count: Optional[int] = None
        self.fp_cache: Dict[tuple, Dict[str, int]] = {}

    @property
    def count(self) -> int:
        """``|D|``: the product of the extents when D is its bounding box, else isl's count_val."""
        if self._count is None:
            dom = self.stmt.domain
            if dom.is_empty():
                self._count = 0
            elif len(self.extent) == self.n and dom.is_equal(self.box_set({})):
                self._count = math.prod(self.extent.values()) if self.n else 1
            else:
                self._count = int(dom.count_val().to_python())
        return self._count

    def box_set(self, box: Mapping[str, Tuple[int, int]]) -> isl.Set:
        """``{ S[x] : lo_x <= x < lo_x + size_x }`` (iterators not in ``box`` over their bounding range)."""
        s = isl.Set.universe(self.stmt.domain.get_space())
        for d, it in enumerate(self.stmt.iters):
            if it in box:
                lo, size = box[it]
            elif it in self.extent:
                lo, size = self.lo[it], self.extent[it]
            else:
                continue
            s = s.lower_bound_val(isl.dim_type.set, d, isl.Val.int_from_si(self.ctx, int(lo)))
            s = s.upper_bound_val(isl.dim_type.set, d, isl.Val.int_from_si(self.ctx, int(lo) + int(size) - 1))
        return s


_INFO: "weakref.WeakKeyDictionary[Statement, _StmtInfo]" = weakref.WeakKeyDictionary()


def _info(stmt: Statement, arrays=None) -> _StmtInfo:
    """The statement's cached facts; ``arrays`` (a Scop's) give the true item sizes."""
    info = _INFO.get(stmt)
    if info is None:
        info = _StmtInfo(stmt)
        _INFO[stmt] = info
    if arrays:
        sizes = {a.name: dtype_bytes(a.dtype) for a in arrays if a.name in info.access}
        if any(info.itemsize.get(k) != v for k, v in sizes.items()):
            info.itemsize.update(sizes)
            info.fp_cache.clear()  # footprints in bytes were computed with other sizes
    return info


def ops_per_instance(store: B.Store) -> int:
    """Arithmetic operations per instance: the value's + - * / //, negations, calls, and the reduction.

    Index arithmetic inside loads is address computation, not counted.

    >>> # C[i, j] += A[i, k] * B[k, j]  ->  2 (one multiply, one add)
    """
    def count(node) -> int:
        if isinstance(node, B.Load):
            return 0
        own = 1 if isinstance(node, (B.Bin, B.Call, B.Neg)) else 0
        return own + sum(count(c) for c in B.children(node))

    return (1 if store.reduce is not None else 0) + count(store.value)


# ---------------------------------------------------------------------------
# Counting images
# ---------------------------------------------------------------------------


def _hull(s: isl.Set) -> Tuple[int, List[int]]:
    """Cells of ``s``'s strided bounding box and its per-dimension sizes: ``(max - min) / stride + 1``."""
    sizes = []
    for d in range(s.dim(isl.dim_type.set)):
        lo, hi = s.dim_min_val(d), s.dim_max_val(d)
        if not (lo.is_int() and hi.is_int()):
            raise ValueError(f"unbounded image dimension {d}: {s}")
        stride = s.get_stride(d)
        st = int(stride.to_python()) if stride.is_int() and stride.to_python() > 0 else 1
        sizes.append((int(hi.to_python()) - int(lo.to_python())) // st + 1)
    return math.prod(sizes), sizes


def _cells(s: isl.Set, cap: Optional[int] = None) -> int:
    """Points of ``s``: exact (count_val) when its hull has <= EXACT_CELLS cells, else the hull (<= cap)."""
    if s.is_empty():
        return 0
    vol, _ = _hull(s)
    if vol <= EXACT_CELLS:
        return int(s.count_val().to_python())
    return vol if cap is None else min(vol, cap)


def _line_map(info: _StmtInfo, array: str, nd: int, line_bytes: int) -> Optional[isl.Map]:
    """``{ a[c0, .., c] -> a[c0, .., floor(c / e)] }`` with ``e`` elements per line."""
    per = max(1, line_bytes // info.itemsize.get(array, 1))
    if nd == 0 or per == 1:
        return None
    key = ("linemap", array, nd, per)
    m = info.fp_cache.get(key)
    if m is None:
        xs = [f"c{d}" for d in range(nd)]
        outs = xs[:-1] + [f"floor({xs[-1]}/{per})"]
        m = isl.Map(f"{{ {array}[{', '.join(xs)}] -> {array}[{', '.join(outs)}] }}", context=info.ctx)
        info.fp_cache[key] = m
    return m


def _image_sizes(info: _StmtInfo, inst: isl.Set, line_bytes: Optional[int]) -> Dict[str, int]:
    """Bytes of each array touched by the instances ``inst`` (lines of ``line_bytes`` if given)."""
    if inst.is_empty():
        return {a: 0 for a in info.access}
    n_inst = None
    out = {}
    for array, acc in info.access.items():
        img = inst.apply(acc)
        item = info.itemsize.get(array, 1)
        if line_bytes:
            lm = _line_map(info, array, img.dim(isl.dim_type.set), line_bytes)
            if lm is not None:
                img = img.apply(lm)
            unit = line_bytes
        else:
            unit = item
        vol, _ = _hull(img) if not img.is_empty() else (0, [])
        if vol <= EXACT_CELLS:
            cells = int(img.count_val().to_python()) if vol else 0
        else:
            if n_inst is None:
                n_inst = _cells(inst)
            cells = min(vol, n_inst * _n_refs(info, array))
        out[array] = cells * unit
    return out


def _set_map(info: _StmtInfo, array: str, shape: Tuple[int, ...], line: int, nsets: int) -> isl.Map:
    """``{ a[c] -> [floor(addr(c) / line) mod nsets] }`` with the row-major byte address of cell ``c``."""
    key = ("setmap", array, shape, line, nsets)
    m = info.fp_cache.get(key)
    if m is None:
        item = info.itemsize.get(array, 1)
        xs = [f"c{d}" for d in range(len(shape))]
        terms = []
        for d, x in enumerate(xs):
            stride = item * math.prod(shape[d + 1:])
            terms.append(f"{stride}*{x}")
        addr = " + ".join(terms) or "0"
        m = isl.Map(f"{{ {array}[{', '.join(xs)}] -> set[(floor(({addr})/{line})) mod {nsets}] }}", context=info.ctx)
        info.fp_cache[key] = m
    return m


def _sets_touched(info: _StmtInfo, inst: isl.Set, array: str, shape: Optional[Tuple[int, ...]],
                  line: int, nsets: int) -> int:
    """Cache sets the lines of ``array`` touched by ``inst`` map to (arrays assumed page-aligned).

    ``nsets`` (all of them) when the shape is unknown: no conflict is assumed.
    """
    acc = info.access.get(array)
    if acc is None or shape is None or len(shape) != acc.dim(isl.dim_type.out):
        return nsets
    img = inst.apply(acc).apply(_set_map(info, array, tuple(shape), line, nsets))
    return 0 if img.is_empty() else int(img.count_val().to_python())


def _box_sets(stmt: Statement, box: Mapping[str, Tuple[int, int]], shapes: Mapping[str, Tuple[int, ...]],
              line: int, nsets: int) -> Dict[str, int]:
    """:func:`_sets_touched` of every array for a box, cached like :func:`footprint`."""
    return {a: _box_sets_one(stmt, box, a, shapes.get(a), line, nsets) for a in _info(stmt).access}


def _box_sets_one(stmt: Statement, box: Mapping[str, Tuple[int, int]], array: str,
                  shape: Optional[Tuple[int, ...]], line: int, nsets: int) -> int:
    info = _info(stmt)
    key = ("sets", tuple(sorted((k, int(v[0]), int(v[1])) for k, v in box.items())), array,
           None if shape is None else tuple(shape), line, nsets)
    hit = info.fp_cache.get(key)
    if hit is None:
        hit = _sets_touched(info, info.stmt.domain.intersect(info.box_set(box)), array, shape, line, nsets)
        info.fp_cache[key] = hit
    return hit


def _conflict_levels(hw) -> List[Tuple[str, int, int, int]]:
    """(name, line, sets, ways) of the cache levels whose sets span at most a page (see PAGE_BYTES)."""
    out = []
    for lv in hw.cache_levels():
        ways = lv.associativity
        if not ways:
            continue
        nsets = lv.size_bytes // (ways * lv.line_bytes)
        if nsets >= 1 and nsets * lv.line_bytes <= PAGE_BYTES:
            out.append((lv.name, lv.line_bytes, nsets, ways))
    return out


def _n_refs(info: _StmtInfo, array: str) -> int:
    """Number of access relations (basic maps) of ``array``: an instance touches at most that many cells."""
    return max(1, info.access[array].n_basic_map())


def footprint(stmt: Statement, box: Mapping[str, Tuple[int, int]], *,
              line_bytes: Optional[int] = None) -> Dict[str, int]:
    """Bytes of each array touched by the instances of ``stmt`` in ``box`` (intersected with the domain).

    ``box`` is ``{iterator: (lo, size)}``; iterators it leaves out range over
    the whole domain.  The image ``acc_a({ S[x] ∈ D : lo <= x < lo + size })``
    is counted exactly with isl's ``count_val`` when its bounding box holds at
    most :data:`EXACT_CELLS` cells, else measured by its strided bounding box
    (see the module docstring).  With ``line_bytes`` the result is in cache
    lines (times ``line_bytes``) instead of elements (times the item size).

    >>> # matmul S0[i, j, k]: footprint(S0, {"i": (0, 4), "j": (0, 16), "k": (0, 8)})
    >>> # -> {"A": 4*8*4, "B": 8*16*4, "C": 4*16*4}
    """
    info = _info(stmt)
    key = (tuple(sorted((k, int(v[0]), int(v[1])) for k, v in box.items())), line_bytes)
    hit = info.fp_cache.get(key)
    if hit is None:
        hit = _image_sizes(info, info.stmt.domain.intersect(info.box_set(box)), line_bytes)
        info.fp_cache[key] = hit
    return dict(hit)


# ---------------------------------------------------------------------------
# The nest the model evaluates
# ---------------------------------------------------------------------------


@dataclass
class _Nest:
    """One statement's loop nest as the model sees it.

    ``fp_el[ℓ]`` / ``fp_ln[ℓ]``: bytes per array of the tile at depth ℓ
    (ℓ = 0..L) in elements / in cache lines; ``trips[ℓ]`` per loop.
    """

    stmt: str
    names: List[str]
    trips: List[float]
    fp_el: List[Dict[str, int]]
    fp_ln: List[Dict[str, int]]
    written: str
    flops: float
    dtype: str
    parallel: Optional[int] = None  # depth of the parallel loop
    regtile: Optional[Tuple[int, int, int]] = None  # (mr, nr, lanes)
    full_fraction: float = 1.0  # of the instances in full register blocks
    # The plain (not register-blocked) code: (fraction of the instances, kind, iterations of its
    # innermost loop, independent vector updates per reduction step); kind is "vector",
    # "reduction" or "scalar".  A regtile nest's partial blocks are plain code.
    plain: List[Tuple[float, str, float, float]] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    # Per conflict-prone cache level (see PAGE_BYTES): (ways, f(depth, array) = sets the array's
    # lines in the tile at that depth use), asked only where the answer matters.
    sets: Dict[str, Tuple[int, Callable[[int, str], int]]] = field(default_factory=dict)
    itemsize: int = 4  # of the written array


def _depends(fp: Sequence[Mapping[str, int]], array: str, e: int) -> bool:
    """Does ``array``'s footprint change with loop ``e`` (``F_a(e) > F_a(e+1)``)?"""
    return fp[e].get(array, 0) > fp[e + 1].get(array, 0)


def _peak_per_core(hw, dtype: str) -> float:
    """FLOP/s of one core for ``dtype`` (integer types use the float peak of their width)."""
    try:
        peak = hw.peak_gflops(dtype)
    except HardwareError:
        peak = hw.peak_gflops("float64" if dtype_bytes(dtype) >= 8 else "float32")
    return peak * 1e9 / hw.cores


def _lanes(hw, dtype: str) -> int:
    try:
        return hw.vector_lanes(dtype)
    except HardwareError:
        return 1


def _plain_lanes(hw, dtype: str) -> int:
    """Elements per vector in gcc-vectorised code (at most PLAIN_VECTOR_BYTES wide)."""
    try:
        item = dtype_bytes(dtype)
    except HardwareError:
        item = 4
    return max(1, min(_lanes(hw, dtype), PLAIN_VECTOR_BYTES // item))


def _chains(trips: Sequence[float], fp_el: Sequence[Mapping[str, int]], written: str, itemsize: int,
            vec: int) -> float:
    """Independent vector updates per step of the innermost reduction loop (inf when there is none).

    The reduction loop is the innermost loop ``e`` with more than one
    iteration that leaves the written cells unchanged (``F_w(e) = F_w(e+1)``);
    each of its steps updates the ``F_w(e+1)`` cells the loops inside it write.
    """
    for e in range(len(trips) - 1, -1, -1):
        if trips[e] > 1.0 + 1e-9 and fp_el[e].get(written, 0) == fp_el[e + 1].get(written, 0):
            cells = fp_el[e + 1].get(written, 0) / max(itemsize, 1)
            return max(cells / vec, 1.0)
    return math.inf


def _plain_efficiency(kind: str, inner_trips: float, chains: float, hw, dtype: str) -> float:
    """Fraction of peak of plain loop code (see the module docstring)."""
    lanes = _lanes(hw, dtype)
    vec = _plain_lanes(hw, dtype)
    fu = float(getattr(hw, "fma_units_per_core", 2))
    if kind == "vector" and inner_trips > vec:
        vectors = inner_trips / vec
        return EFF_VECTOR * vectors / (vectors + VECTOR_STARTUP) * min(1.0, chains / VECTOR_CHAINS)
    if kind == "reduction":
        return EFF_REDUCTION / (lanes * fu)
    # strided, or too short for gcc to vectorise (one vector or less): scalar code
    return EFF_SCALAR / lanes


def _kernel_efficiency(regtile: Tuple[int, int, int], hw) -> float:
    """Fraction of peak of the register micro-kernel on full blocks."""
    fu = float(getattr(hw, "fma_units_per_core", 2))
    mr, nr, v = regtile
    nv = max(1.0, nr / max(v, 1))
    fma = mr * nv / fu
    cycles = max(fma, (nv + mr) / LOAD_PORTS, FMA_LATENCY)
    return KERNEL_EFF * fma / cycles


def _evaluate(nests: Sequence[_Nest], hw) -> Prediction:
    """Roofline of each nest (see the module docstring); the nests run one after the other."""
    levels = list(hw.memory)
    names = [lv.name for lv in levels[1:]]
    traffic = {n: 0.0 for n in names}
    level_time = {n: 0.0 for n in names}
    total_time = compute_total = flops_total = 0.0
    par_main, t_main = 1, -1.0
    notes: List[str] = []
    for nest in nests:
        t, c, tr, lt, par, nn = _evaluate_one(nest, hw, levels)
        total_time += t
        compute_total += c
        flops_total += nest.flops
        if t > t_main:  # the parallelism reported is the slowest nest's
            par_main, t_main = par, t
        for k in names:
            traffic[k] += tr.get(k, 0.0)
            level_time[k] += lt.get(k, 0.0)
        notes += nn
    return Prediction(total_time, compute_total, traffic, level_time, flops_total, par_main, tuple(notes))


def _evaluate_one(nest: _Nest, hw, levels) -> tuple:
    L = len(nest.trips)
    trips = list(nest.trips)
    cores = max(1, int(getattr(hw, "cores", 1)))
    notes = list(nest.notes)

    # Parallel loop: T iterations, statically scheduled on min(cores, ⌈T⌉) threads.
    speedup, threads, regions = 1.0, 1, 0.0
    fp_ln = nest.fp_ln
    fp_el = nest.fp_el
    if nest.parallel is not None and trips[nest.parallel] > 1.0 + 1e-9:
        p = nest.parallel
        T = trips[p]
        n = math.ceil(T - 1e-9)  # iterations, the last one possibly partial
        threads = min(cores, n)
        # The busiest thread's chunk: ⌈n / threads⌉ iterations, all full unless it is the only chunk.
        per_thread = min(math.ceil(n / threads), T)
        speedup = T / per_thread
        regions = math.prod(trips[:p])
        # One thread's nest: its share of loop p; footprints outside p shrink for the arrays that depend on p.
        share = per_thread / T
        trips[p] = per_thread
        fp_ln = _share(fp_ln, p, share)
        fp_el = _share(fp_el, p, share)
        notes.append(f"parallel {nest.names[p]}: {T:.4g} iterations on {threads} thread(s), speedup {speedup:.3g}")
    elif nest.parallel is not None:
        notes.append(f"parallel {nest.names[nest.parallel]} has one iteration: runs on one thread")

    # Compute: full register blocks at the kernel's rate, each part of the plain code at its own.
    peak = _peak_per_core(hw, nest.dtype) * speedup
    compute = 0.0
    if nest.regtile is not None:
        f = nest.full_fraction
        eff = _kernel_efficiency(nest.regtile, hw)
        compute += nest.flops * f / (peak * eff)
        notes.append(f"regtile {nest.regtile[0]}x{nest.regtile[1]}: {100 * f:.0f}% of instances in full blocks, "
                     f"kernel at {100 * eff:.0f}% of peak")
    for frac, kind, inner, chains in nest.plain:
        if frac <= 0:
            continue
        eff = _plain_efficiency(kind, inner, chains, hw, nest.dtype)
        compute += nest.flops * frac / (peak * eff)
        notes.append(f"plain loops on {100 * frac:.0f}% of instances ({kind}, innermost {inner:.4g} iterations, "
                     f"{chains:.3g} vector chains) at {100 * eff:.2g}% of peak")
    compute += regions * OMP_REGION_S if threads > 1 else 0.0

    # Traffic, level by level (levels[0] is the register file).
    traffic: Dict[str, float] = {}
    level_time: Dict[str, float] = {}
    n_tiles = [1.0]
    for t in trips:
        n_tiles.append(n_tiles[-1] * t)  # n_tiles[ℓ] = Π_{e<ℓ} trips(e): number of tiles at depth ℓ
    for k in range(1, len(levels)):
        inner, outer = levels[k - 1], levels[k]
        if k == 1:
            if nest.regtile is not None and L >= 2:
                d = L - 2  # the accumulator block stays in registers across the reduction loops
            else:
                d = L  # one instance; what the innermost loop does not change is hoisted
            moved = 0.0
            for a, fa in fp_el[d].items():
                e_a = max((e for e in range(d) if _depends(fp_el, a, e)), default=-1)
                reloads = math.prod(trips[:e_a + 1]) if e_a >= 0 else 1.0
                moved += fa * reloads * (2 if a == nest.written else 1)
            where = f"depth {d}" + (f" ({nest.names[d]})" if d < L else "")
        else:
            cap = inner.size_bytes if inner.per_core else inner.size_bytes / threads
            conflict = nest.sets.get(inner.name)

            def fits(l: int) -> bool:
                if sum(fp_ln[l].values()) > FIT * cap:
                    return False
                if conflict is not None:
                    # An array whose lines fall into s sets holds at most s * ways of them
                    # (only arrays with more than FIT * ways lines can fail this).
                    ways, sets_of = conflict
                    for a, size in fp_ln[l].items():
                        lines = size / inner.line_bytes
                        if lines > FIT * ways and lines > FIT * sets_of(l, a) * ways:
                            return False
                return True

            d = next((l for l in range(L + 1) if fits(l)), L)
            moved = 0.0
            for a in fp_ln[d]:
                if d == 0:
                    fa, reps = fp_ln[0][a], 1.0
                else:
                    fa, reps = fp_ln[d - 1][a], n_tiles[d - 1]
                moved += fa * reps * (2 if a == nest.written else 1)
            where = f"depth {d}" + (f" ({nest.names[d]})" if d < L else " (one instance)")
        total = moved * threads
        if outer.bandwidth_gbs is None:
            continue
        bw = hw.bandwidth(outer)
        if outer.per_core:
            bw = bw * threads / cores
        traffic[outer.name] = total
        level_time[outer.name] = total / bw
        notes.append(f"{outer.name} -> {inner.name}: tile at {where} fits; {total / 1e6:.4g} MB, "
                     f"{1e3 * total / bw:.3g} ms")
    worst = max(level_time.values(), default=0.0)
    return max(compute, worst), compute, traffic, level_time, threads, notes


def _share(fp: Sequence[Mapping[str, int]], p: int, share: float) -> List[Dict[str, int]]:
    """Footprints of one thread's part of loop ``p``: arrays that depend on ``p`` scale by ``share`` outside it."""
    out = [dict(x) for x in fp]
    for a in fp[p]:
        if _depends(fp, a, p):
            for l in range(p + 1):
                inner = fp[p + 1].get(a, 0)
                out[l][a] = max(inner, int(round(fp[l][a] * share)))
    return out


# ---------------------------------------------------------------------------
# predict_config: the blocked nest of a TileConfig, analytically
# ---------------------------------------------------------------------------


def _stmt_dtype(s, st: Statement) -> str:
    try:
        return s.scop.array(st.body.array).dtype
    except KeyError:
        return st.body.value.dtype


def _classify_innermost(st: Statement, it: Optional[str], reduction: bool) -> str:
    """How gcc compiles the innermost loop over iterator ``it`` (see the module docstring)."""
    if it is None:
        return "scalar"
    if reduction:
        return "reduction"
    loads = list(B.loads(st.body.value))
    refs = [ld.index for ld in loads] + [st.body.index]
    for index in refs:
        coeffs = [_coeff(e, it) for e in index]
        if any(c is None for c in coeffs):
            return "scalar"
        if not coeffs or all(c == 0 for c in coeffs):
            continue  # invariant: hoisted
        if any(c != 0 for c in coeffs[:-1]) or abs(coeffs[-1]) != 1:
            return "scalar"
    return "vector"


def _coeff(e, it: str) -> Optional[int]:
    """Coefficient of ``it`` in an affine index expression (None when it is not a plain integer)."""
    if isinstance(e, B.Iter):
        return 1 if e.name == it else 0
    if isinstance(e, B.Const):
        return 0
    if isinstance(e, B.Neg):
        c = _coeff(e.operand, it)
        return None if c is None else -c
    if isinstance(e, B.Cast):
        return _coeff(e.operand, it)
    if isinstance(e, B.Bin):
        a, b = _coeff(e.a, it), _coeff(e.b, it)
        if a is None or b is None:
            return None
        if e.op == "+":
            return a + b
        if e.op == "-":
            return a - b
        if e.op == "*":
            if isinstance(e.a, B.Const):
                return int(e.a.value) * b
            if isinstance(e.b, B.Const):
                return a * int(e.b.value)
            return None if (a or b) else 0
        if e.op == "//":
            return 0 if a == 0 else None
    if isinstance(e, B.Load):
        return 0 if not any(isinstance(x, B.Iter) and x.name == it for x in B.walk(e)) else None
    return None


def _leftover(outer: int, block: int) -> int:
    """Points of an ``outer``-tile left over after its full ``block``-blocks (``block`` if none are)."""
    return (outer % block) or block


def _regtile_fraction(extent: int, outer: int, block: int) -> float:
    """Fraction of ``extent`` points inside full ``block``-blocks when tiles of ``outer`` (a multiple) cut it."""
    if extent <= 0 or block <= 0:
        return 0.0
    outer = max(block, min(outer, extent))
    full_tiles, rem = divmod(extent, outer)
    rows = full_tiles * (outer // block) * block + (rem // block) * block
    return rows / extent


def predict_config(s, cfg, hw) -> Prediction:
    """Predicted time of ``cfg``'s blocked nest (autotile's BLIS-style schedule) for its statement.

    Only ``cfg.stmt`` is modelled (the configurations being ranked differ in
    nothing else).  Fast: no schedule is built, footprints are boxes at the
    domain's origin cached per box.  See the module docstring for the model.
    """
    if not isinstance(hw, CPUDescriptor):
        raise HardwareError(f"the cost model describes CPUs; got a {getattr(hw, 'kind', type(hw).__name__)} descriptor")
    st = s.scop.statement(s.resolve(cfg.stmt))
    info = _info(st, s.scop.arrays)
    E = info.extent
    used = {x.name for e in st.body.index for x in B.walk(e) if isinstance(x, B.Iter)}
    outer = [v for v in st.iters if v in used and v not in (cfg.i, cfg.j)]
    reds = [v for v in st.iters if v not in used and v != cfg.k]
    mc = max(1, min(cfg.mc, E[cfg.i]))
    nc = max(1, min(cfg.nc, E[cfg.j]))
    kc = max(1, min(cfg.kc, E[cfg.k]))
    mr = max(1, min(cfg.mr, mc))
    nr = max(1, min(cfg.nr, nc))
    # Each loop: (name, iterator, step = points of the iterator one iteration covers, trips).
    loops: List[Tuple[str, str, int, float]] = [(v, v, 1, float(E[v])) for v in outer]
    tile = {"i": (f"{cfg.i}_t", cfg.i, mc, E[cfg.i] / mc), "j": (f"{cfg.j}_t", cfg.j, nc, E[cfg.j] / nc),
            "k": (f"{cfg.k}_t", cfg.k, kc, E[cfg.k] / kc)}
    loops += [tile[c] for c in cfg.order]
    loops += [(f"{cfg.j}_t1", cfg.j, nr, nc / nr), (f"{cfg.i}_t1", cfg.i, mr, mc / mr)]
    loops += [(v, v, 1, float(E[v])) for v in reds]
    loops += [(cfg.k, cfg.k, 1, float(kc)), (cfg.i, cfg.i, 1, float(mr)), (cfg.j, cfg.j, 1, float(nr))]
    line = _line_bytes(hw)
    shapes = {a.name: tuple(a.shape) for a in s.scop.arrays}
    conflict = _conflict_levels(hw)
    fp_el, fp_ln = [], []
    boxes = []
    for depth in range(len(loops) + 1):
        box = {}
        for name, it, step, _ in loops[:depth]:
            box[it] = (info.lo[it], step)
        boxes.append(box)
        fp_el.append(footprint(st, box))
        fp_ln.append(footprint(st, box, line_bytes=line))
    sets = {name: (ways, lambda l, a, lb=lb, n=nsets: _box_sets_one(st, boxes[l], a, shapes.get(a), lb, n))
            for name, lb, nsets, ways in conflict}
    names = [l[0] for l in loops]
    par = names.index(cfg.parallel) if cfg.parallel in names else None
    dtype = _stmt_dtype(s, st)
    item = info.itemsize.get(info.written, 4)
    vec = _plain_lanes(hw, dtype)
    kind = _classify_innermost(st, cfg.j, False)
    trips = [l[3] for l in loops]
    if cfg.regtile:
        regtile = (cfg.mr, cfg.nr, cfg.lanes)
        f_i, rem_i = _regtile_fraction(E[cfg.i], mc, cfg.mr), _leftover(mc, cfg.mr)
        f_j, rem_j = _regtile_fraction(E[cfg.j], nc, cfg.nr), _leftover(nc, cfg.nr)
        full = f_i * f_j
        # Partial blocks run the plain loops (k, rows, columns): columns left over at the
        # end of each j-tile, and rows left over in full-width column blocks.
        plain = [(1 - f_j, kind, float(rem_j), cfg.mr * rem_j / vec),
                 (f_j * (1 - f_i), kind, float(cfg.nr), rem_i * cfg.nr / vec)]
    else:
        # The j loop runs nr iterations in full column blocks and the leftover of each nc-tile
        # in the last one.
        regtile, full = None, 0.0
        f_j, rem_j = _regtile_fraction(E[cfg.j], nc, nr), _leftover(nc, nr)
        chains = _chains(trips, fp_el, info.written, item, vec)
        plain = [(f_j, kind, float(nr), chains), (1 - f_j, kind, float(rem_j), chains * rem_j / nr)]
    nest = _Nest(st.name, names, trips, fp_el, fp_ln, info.written,
                 float(info.ops * info.count), dtype, par, regtile, full, plain, sets=sets, itemsize=item)
    return _evaluate([nest], hw)


def _line_bytes(hw) -> int:
    caches = hw.cache_levels()
    return caches[0].line_bytes if caches else hw.dram.line_bytes


# ---------------------------------------------------------------------------
# predict: any schedule, tiles from the time maps with isl
# ---------------------------------------------------------------------------


def _central_point(info: _StmtInfo) -> Optional[List[int]]:
    """An instance near the middle of the domain (the centre of its box if inside, else a sample)."""
    dom = info.stmt.domain
    if dom.is_empty():
        return None
    if len(info.extent) == info.n:
        mid = [info.lo[it] + (info.extent[it] - 1) // 2 for it in info.stmt.iters]
        cons = " and ".join(f"{it} = {v}" for it, v in zip(info.stmt.iters, mid)) or "true"
        pt = isl.Set(f"{{ {info.stmt.name}[{', '.join(info.stmt.iters)}] : {cons} }}", context=info.ctx)
        if not pt.intersect(dom).is_empty():
            return mid
    p = dom.sample_point()
    return [int(p.get_coordinate_val(isl.dim_type.set, d).to_python()) for d in range(info.n)]


def _time_of_point(m: isl.Map, info: _StmtInfo, x: Sequence[int]) -> List[int]:
    cons = " and ".join(f"{it} = {v}" for it, v in zip(info.stmt.iters, x)) or "true"
    at = isl.Set(f"{{ {info.stmt.name}[{', '.join(info.stmt.iters)}] : {cons} }}", context=info.ctx)
    img = at.apply(m)
    p = img.sample_point()
    return [int(p.get_coordinate_val(isl.dim_type.set, d).to_python()) for d in range(img.dim(isl.dim_type.set))]


def _stmt_nest(s, name: str, hw) -> Optional[_Nest]:
    st = s.scop.statement(name)
    info = _info(st, s.scop.arrays)
    ss = s.table[name]
    if info.count == 0:
        return None
    loops = ss.loops()
    x = _central_point(info)
    t = _time_of_point(ss.map, info, x)
    n_time = ss.map.dim(isl.dim_type.out)
    tvars = [f"t{d}" for d in range(n_time)]
    line = _line_bytes(hw)
    shapes = {a.name: tuple(a.shape) for a in s.scop.arrays}
    conflict = _conflict_levels(hw)
    fp_el, fp_ln, inst = [], [], []
    tiles: List[isl.Set] = []

    def tile_fixing(dims: Iterable[int]) -> isl.Set:
        """Instances whose time dimensions ``dims`` equal the central instance's."""
        cons = " and ".join(f"{tvars[d]} = {t[d]}" for d in dims) or "true"
        pre = isl.Set(f"{{ [{', '.join(tvars)}] : {cons} }}", context=info.ctx)
        return ss.map.intersect_range(pre).domain().intersect(st.domain)

    for depth in range(len(loops) + 1):
        tile = tile_fixing(range(loops[depth][0] if depth < len(loops) else n_time))
        tiles.append(tile)
        fp_el.append(_image_sizes(info, tile, None))
        fp_ln.append(_image_sizes(info, tile, line))
        inst.append(info.count if depth == 0 else _cells(tile))
    trips = [inst[l] / max(inst[l + 1], 1) for l in range(len(loops))]
    names = [n for _, n in loops]
    marks = {(m[1], m[2]): m[3] for m in s.marks if m[0] == name}
    par = next((k for k, nm in enumerate(names) if (nm, "parallel") in marks), None)
    notes: List[str] = []
    dtype = _stmt_dtype(s, st)
    item = info.itemsize.get(info.written, 4)
    vec = _plain_lanes(hw, dtype)
    # The innermost loop isl emits (one with more than one iteration) and what it scans.
    d_in = len(loops) - 1
    while d_in > 0 and trips[d_in] <= 1.0 + 1e-9:
        d_in -= 1
    kind, inner, chains = "scalar", 1.0, math.inf
    if loops:
        inner = trips[d_in]
        it_in = _scanned(st, tiles, d_in)
        simd = (names[d_in], "simd") in marks
        carried = not s.carried([name], loops[d_in][0], s.deps.all(include_reductions=True)).is_empty()
        only_red = carried and s.carried([name], loops[d_in][0], s.deps.all(include_reductions=False)).is_empty()
        if carried and not (only_red and st.is_reduction):
            kind = "scalar"
        else:
            kind = _classify_innermost(st, it_in, only_red and st.is_reduction and not simd)
        chains = _chains(trips, fp_el, info.written, item, vec)
        d_out = next((d for d in range(d_in - 1, -1, -1) if trips[d] > 1.0 + 1e-9), None)
        if kind == "reduction" and d_out is not None and _depends(fp_el, info.written, d_out):
            # gcc -O3 interchanges an innermost reduction loop with the output loop around it
            # when that loop is unit-stride in every access (-floop-interchange), then vectorises it.
            it_out = _scanned(st, tiles, d_out)
            if _classify_innermost(st, it_out, False) == "vector":
                kind, inner, chains = "vector", trips[d_out], trips[d_out] / vec
                notes.append(f"gcc interchanges {names[d_in]} and {names[d_out]} (unit stride in {names[d_out]})")
                # The nest that runs has the two loops swapped: between them, one iteration of
                # the reduction loop spans the whole output loop.
                mid = tile_fixing(list(range(loops[d_out][0])) + [loops[d_in][0]])
                for depth in range(d_out + 1, d_in + 1):
                    tiles[depth] = mid
                    fp_el[depth] = _image_sizes(info, mid, None)
                    fp_ln[depth] = _image_sizes(info, mid, line)
                trips[d_out], trips[d_in] = trips[d_in], trips[d_out]
                names[d_out], names[d_in] = names[d_in], names[d_out]
                if par in (d_out, d_in):
                    par = d_in if par == d_out else d_out
    regtile, full = None, 0.0
    plain = [(1.0, kind, inner, chains)]
    if loops and kind == "vector" and it_in is not None and inner >= 1:
        # A tiled innermost loop runs its full width in all but the last block of each
        # enclosing tile, which gets the leftover (nr = 48 in a tile of 64: 48, then 16).
        f, rem = _block_split(info, st, tiles, it_in, int(round(inner)))
        if f < 1.0:
            plain = [(f, kind, inner, chains), (1 - f, kind, float(rem), chains * rem / inner)]
    reg = next(((nm, marks[(nm, "regtile")]) for nm in names if (nm, "regtile") in marks), None)
    parsed = _parse_regtile(reg[1]) if reg is not None else None
    if parsed is not None:
        _, (ri, mr), (rj, nr), lanes = parsed
        regtile = (mr, nr, lanes)
        # Each block loop's iterator is cut into tiles (the next-wider width among the tiles'
        # extents of it, e.g. mc) and those into blocks; partial blocks run the plain loops.
        (f_i, rem_i), (f_j, rem_j) = (_block_split(info, st, tiles, it, b) for it, b in ((ri, mr), (rj, nr)))
        full = f_i * f_j
        plain = [(1 - f_j, kind, float(rem_j), mr * rem_j / vec),
                 (f_j * (1 - f_i), kind, float(nr), rem_i * nr / vec)]
    memo: Dict[tuple, int] = {}

    def sets_of(l: int, a: str, lb: int, n: int) -> int:
        key = (l, a, lb, n)
        if key not in memo:
            memo[key] = _sets_touched(info, tiles[l], a, shapes.get(a), lb, n)
        return memo[key]

    sets = {nm: (ways, lambda l, a, lb=lb, n=nsets: sets_of(l, a, lb, n)) for nm, lb, nsets, ways in conflict}
    return _Nest(name, names, trips, fp_el, fp_ln, info.written, float(info.ops * info.count), dtype,
                 par, regtile, full, plain, notes, sets, item)


def _scanned(st: Statement, tiles: Sequence[isl.Set], d: int) -> Optional[str]:
    """The iterator loop ``d`` scans: the one that varies in its tile but not inside it (None if not one)."""
    inner = tiles[d + 1] if d + 1 < len(tiles) else None
    its = [it for k, it in enumerate(st.iters)
           if _varies(tiles[d], k) and (inner is None or not _varies(inner, k))]
    return its[0] if len(its) == 1 else None


def _width(tile: isl.Set, k: int) -> int:
    lo, hi = tile.dim_min_val(k), tile.dim_max_val(k)
    if not (lo.is_int() and hi.is_int()):
        return 0
    return int(hi.to_python()) - int(lo.to_python()) + 1


def _block_split(info: _StmtInfo, st: Statement, tiles: Sequence[isl.Set], it: str, block: int) -> Tuple[float, int]:
    """(fraction of ``it``'s extent in full ``block``-blocks, width of the blocks left over)."""
    if it not in st.iters or it not in info.extent:
        return 1.0, block
    k = st.iters.index(it)
    ext = info.extent[it]
    widths = {_width(t, k) for t in tiles}
    outer = min((w for w in widths if w > block), default=ext)
    return _regtile_fraction(ext, outer, block), _leftover(outer, block)


def _varies(tile: isl.Set, d: int) -> bool:
    lo, hi = tile.dim_min_val(d), tile.dim_max_val(d)
    return not (lo.is_int() and hi.is_int() and lo.to_python() == hi.to_python())


def _parse_regtile(arg) -> Optional[Tuple[int, Tuple[str, int], Tuple[str, int], int]]:
    """``"N i=MR j=NR V"`` (the mark's argument) -> (N, (i, MR), (j, NR), V)."""
    parts = str(arg).split()
    if len(parts) != 4:
        return None
    try:
        ri, mr = parts[1].split("=")
        rj, nr = parts[2].split("=")
        return int(parts[0]), (ri, int(mr)), (rj, int(nr)), int(parts[3])
    except ValueError:
        return None


def predict(s, hw) -> Prediction:
    """Predicted time of any schedule ``s``: every statement's nest, one after the other.

    Tiles come from the time maps (isl), marks decide the code quality and
    the parallelism; see the module docstring.  Slower than
    :func:`predict_config` (tens of ms per statement).
    """
    if not isinstance(hw, CPUDescriptor):
        raise HardwareError(f"the cost model describes CPUs; got a {getattr(hw, 'kind', type(hw).__name__)} descriptor")
    nests = [n for n in (_stmt_nest(s, name, hw) for name, _ in s.stmts) if n is not None]
    return _evaluate(nests, hw)


# ---------------------------------------------------------------------------
# Rank correlation
# ---------------------------------------------------------------------------


def _ranks(xs: Sequence[float]) -> List[float]:
    """Ranks 1..n, ties sharing the average of the ranks they span."""
    order = sorted(range(len(xs)), key=lambda k: xs[k])
    ranks = [0.0] * len(xs)
    k = 0
    while k < len(order):
        m = k
        while m + 1 < len(order) and xs[order[m + 1]] == xs[order[k]]:
            m += 1
        avg = (k + m) / 2 + 1
        for q in range(k, m + 1):
            ranks[order[q]] = avg
        k = m + 1
    return ranks


def spearman(xs: Iterable[float], ys: Iterable[float]) -> float:
    """Spearman's rank correlation: Pearson's correlation of the (tie-averaged) ranks.

    NaN when either side is constant (the correlation is undefined).

    >>> spearman([1, 2, 3, 4], [10, 20, 30, 40]), spearman([1, 2, 3], [3, 2, 1])
    (1.0, -1.0)
    """
    xs, ys = list(xs), list(ys)
    if len(xs) != len(ys):
        raise ValueError(f"spearman: {len(xs)} x values but {len(ys)} y values")
    if len(xs) < 2:
        return float("nan")
    rx, ry = _ranks(xs), _ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    if sxx == 0 or syy == 0:
        return float("nan")
    return sxy / math.sqrt(sxx * syy)
