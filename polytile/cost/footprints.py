"""What the cost model knows of a statement, and the footprints of its instance sets.

A statement's accesses, item sizes, extents and instance count (cached per
Statement object); the bytes or cache lines of each array an instance set
touches (:func:`footprint`), counted exactly or by the strided bounding box;
the cache sets those lines map to on the levels whose sets span at most a page.
"""
from __future__ import annotations

import math
import weakref
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import islpy as isl

from ..hardware import dtype_bytes
from ..isl_parts import maps_of
from ..poly import body as B
from ..poly.scop import Statement
from .constants import EXACT_CELLS, PAGE_BYTES

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
        maps = [*maps_of(stmt.reads()), stmt.write_map()]
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
        self._is_box: Optional[bool] = None
        self.fp_cache: Dict[tuple, Dict[str, int]] = {}
        # The arrays (a Scop's tuple) whose item sizes were applied last (see _info), and what
        # cost.predict_config works out once per (i, j, k) roles of this statement.
        self.sized_by: Optional[tuple] = None
        self.config_memo: Dict[tuple, tuple] = {}

    @property
    def is_box(self) -> bool:
        """Whether D is its bounding box (every iterator bounded; then ``D ∩ box`` is a box too)."""
        if self._is_box is None:
            dom = self.stmt.domain
            self._is_box = (not dom.is_empty() and len(self.extent) == self.n
                            and dom.is_equal(self.box_set({})))
        return self._is_box

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
                self._count = count_points(dom)
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


def count_points(dom: isl.Set) -> int:
    """``|dom|``, as the product of the counts of its independent groups of iterators when the
    domain is one basic set whose constraints leave it a product (no integer divisions).

    isl's count_val works on the whole set: a dilated convolution's 7-D domain, where only
    ``x0 + 2*k0 < H`` and ``x1 + 2*k1 < W`` tie iterators together, took it 5 s; the same
    count as (n)(x0, k0)(x1, k1)(ci)(co) takes milliseconds.

    >>> count_points(isl.Set("{ S[i, j, k] : 0 <= i < 10 and 0 <= j < 10 and 0 <= k <= j }"))
    550
    """
    bsets = dom.coalesce().get_basic_sets()
    if len(bsets) != 1 or bsets[0].dim(isl.dim_type.div):
        return int(dom.count_val().to_python())
    bs = bsets[0].remove_redundancies()
    n = bs.dim(isl.dim_type.set)
    group = list(range(n))

    def root(d: int) -> int:
        while group[d] != d:
            d = group[d]
        return d

    for c in bs.get_constraints():
        dims = [d for d in range(n) if not c.get_coefficient_val(isl.dim_type.set, d).is_zero()]
        for d in dims[1:]:
            group[root(d)] = root(dims[0])
    parts: Dict[int, list] = {}
    for d in range(n):
        parts.setdefault(root(d), []).append(d)
    if len(parts) == 1:
        return int(dom.count_val().to_python())
    total = 1
    for dims in parts.values():
        s = isl.Set.from_basic_set(bs)
        for d in reversed(range(n)):
            if d not in dims:
                s = s.project_out(isl.dim_type.set, d, 1)
        total *= int(s.count_val().to_python())
    return total


_INFO: "weakref.WeakKeyDictionary[Statement, _StmtInfo]" = weakref.WeakKeyDictionary()


def _info(stmt: Statement, arrays=None) -> _StmtInfo:
    """The statement's cached facts; ``arrays`` (a Scop's) give the true item sizes."""
    info = _INFO.get(stmt)
    if info is None:
        info = _StmtInfo(stmt)
        _INFO[stmt] = info
    if arrays and info.sized_by is not arrays:
        # Asked thousands of times per ranking with the same Scop's arrays: checked once per arrays object.
        info.sized_by = arrays
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


def _affine_rows(info: _StmtInfo, array: str) -> Optional[List[Tuple[Dict[int, int], int]]]:
    """The access to ``array`` as one affine function, ``[({in dim: coefficient}, constant)]`` per array
    dimension, when :func:`_closed_sizes` can count its images; else None.

    Covered: one basic map, no parameters or divisions, every array index ``sum(±x) + c`` of iterators
    no other index uses (``A[i, k]``, ``I[x + kx, c]``); strides (``2x + kx``), diagonals (``A[i, i]``)
    and unions of several references go to isl.
    """
    key = ("rows", array)
    if key in info.fp_cache:
        return info.fp_cache[key]  # type: ignore[return-value]
    rows = None
    maps = info.access[array].get_basic_map_list()
    if maps.n_basic_map() == 1:
        bm = maps.get_at(0)
        T = isl.dim_type
        if bm.dim(T.div) == 0 and bm.dim(T.param) == 0:
            n_in, n_out = bm.dim(T.in_), bm.dim(T.out)
            order = (T.in_, T.out, T.param, T.div, T.cst)
            eq, ineq = bm.equalities_matrix(*order), bm.inequalities_matrix(*order)

            def row(m, r):
                return [int(m.get_element_val(r, c).to_python()) for c in range(m.cols())]

            bounded_out = any(any(row(ineq, r)[n_in:n_in + n_out]) for r in range(ineq.rows()))
            found: Dict[int, Tuple[Dict[int, int], int]] = {}
            ok = not bounded_out
            for r in range(eq.rows()) if ok else ():
                v = row(eq, r)
                outs = [d for d in range(n_out) if v[n_in + d]]
                if not outs:
                    continue  # a constraint of the domain (``n = 0``), not of the index
                if len(outs) != 1 or abs(v[n_in + outs[0]]) != 1 or outs[0] in found:
                    ok = False
                    break
                s = v[n_in + outs[0]]  # s*o + sum(a_i x_i) + c = 0, s = ±1  =>  o = -s * (sum(a_i x_i) + c)
                coefs = {i: -s * v[i] for i in range(n_in) if v[i]}
                if any(abs(a) != 1 for a in coefs.values()):
                    ok = False
                    break
                found[outs[0]] = (coefs, -s * v[-1])
            if ok and len(found) == n_out:
                used = [i for coefs, _ in found.values() for i in coefs]
                if len(used) == len(set(used)):
                    rows = [found[d] for d in range(n_out)]
    info.fp_cache[key] = rows  # type: ignore[assignment]
    return rows


def _closed_sizes(info: _StmtInfo, box: Mapping[str, Tuple[int, int]],
                  line_bytes: Optional[int]) -> Optional[Dict[str, int]]:
    """:func:`_image_sizes` of ``D ∩ box`` in closed form, or None where it does not apply.

    When D is its bounding box, ``D ∩ box`` is a box of ranges ``[lo_x, hi_x]``; an index ``sum(±x) + c``
    over iterators no other index uses then takes every value of ``[sum(min ±x) + c, sum(max ±x) + c]``
    (unit steps, so no holes), the image is the product of those ranges (in lines: ``hi // e - lo // e
    + 1`` on the last axis, ``e`` elements per line), and it is its own bounding box -- what isl counts,
    without isl.  Equal to :func:`_image_sizes` wherever it applies (tests/test_cost.py checks it).
    """
    if not info.is_box:
        return None
    ranges = []
    for it in info.stmt.iters:
        lo, hi = info.lo[it], info.lo[it] + info.extent[it] - 1
        if it in box:
            blo, size = box[it]
            lo, hi = max(lo, int(blo)), min(hi, int(blo) + int(size) - 1)
        if hi < lo:
            return {a: 0 for a in info.access}
        ranges.append((lo, hi))
    n_inst = math.prod(hi - lo + 1 for lo, hi in ranges)
    out = {}
    for array in info.access:
        rows = _affine_rows(info, array)
        if rows is None:
            return None
        item = info.itemsize.get(array, 1)
        per = max(1, line_bytes // item) if line_bytes else 1
        vol = 1
        for d, (coefs, c) in enumerate(rows):
            lo = c + sum(a * ranges[i][0] if a > 0 else a * ranges[i][1] for i, a in coefs.items())
            hi = c + sum(a * ranges[i][1] if a > 0 else a * ranges[i][0] for i, a in coefs.items())
            vol *= (hi // per - lo // per + 1) if (per > 1 and d == len(rows) - 1) else (hi - lo + 1)
        cells = vol if vol <= EXACT_CELLS else min(vol, n_inst)
        out[array] = cells * (line_bytes or item)
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


def _line_bytes(hw) -> int:
    caches = hw.cache_levels()
    return caches[0].line_bytes if caches else hw.dram.line_bytes


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
    (see docs/cost-model.md).  With ``line_bytes`` the result is in cache
    lines (times ``line_bytes``) instead of elements (times the item size).

    >>> # matmul S0[i, j, k]: footprint(S0, {"i": (0, 4), "j": (0, 16), "k": (0, 8)})
    >>> # -> {"A": 4*8*4, "B": 8*16*4, "C": 4*16*4}
    """
    info = _info(stmt)
    return dict(_footprint(info, box, _box_key(box), line_bytes))


def _box_key(box: Mapping[str, Tuple[int, int]]) -> Tuple:
    return tuple(sorted((k, int(v[0]), int(v[1])) for k, v in box.items()))


def _footprint(info: _StmtInfo, box: Mapping[str, Tuple[int, int]], bkey: Tuple,
               line_bytes: Optional[int]) -> Dict[str, int]:
    """:func:`footprint`'s cached dict itself (callers must not change it)."""
    key = (bkey, line_bytes)
    hit = info.fp_cache.get(key)
    if hit is None:
        hit = _closed_sizes(info, box, line_bytes)
        if hit is None:
            hit = _image_sizes(info, info.stmt.domain.intersect(info.box_set(box)), line_bytes)
        info.fp_cache[key] = hit
    return hit


def box_footprints(stmt: Statement, boxes: Sequence[Mapping[str, Tuple[int, int]]],
                   line_bytes: int) -> Tuple[List[Dict[str, int]], List[Dict[str, int]]]:
    """``footprint(stmt, b)`` and ``footprint(stmt, b, line_bytes=line_bytes)`` of every box, the dicts
    shared with the cache (read them, never change them): the cost model asks for a dozen boxes per
    configuration and hundreds of configurations per ranking, so copies and key building add up.

        >>> # box_footprints(S0, [{}, {"i": (0, 4)}], 64)  ->  ([bytes...], [bytes in whole lines...])
    """
    info = _info(stmt)
    el, ln = [], []
    for b in boxes:
        k = _box_key(b)
        el.append(_footprint(info, b, k, None))
        ln.append(_footprint(info, b, k, line_bytes))
    return el, ln
