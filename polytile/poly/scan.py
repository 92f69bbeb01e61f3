"""Prefix sums and products as recurrences: a Tile ``cumsum`` in linear time, with the same bits.

A cumulative sum written as a contraction over a triangle (``examples/cumsum.tile``),
``O[i : N] = +(I[k]), i - k < N`` (``{ S[i, k] : 0 <= k <= i < N }``): every cell
sums its whole prefix again, N^2/2 additions (100000 elements: 83 ms against
numpy's 0.3).  When each cell's points are the previous cell's plus one that
comes after them, the cell is the previous cell's value combined with that one
term, in the order the triangle sums it::

    S[i, k] : 0 <= k <= i < N        O[i] += I[k]
  ->
    S[i, k] : k <= i = 0             O[i] += I[k]           (cells without a previous cell)
    Sc[i, k] : k = i and 1 <= i < N  O[i] += O[i - 1] + I[k]

In isl terms, with ``T = { S[.., i, .., k] -> S[.., i + 1, .., k] }`` (i the scan
axis) and ``cells(D)`` the points of ``D``'s cells: the carried points
``P = T(D) ∩ cells(D)`` must lie in ``D``, and on the cells of ``P`` the
remaining points ``D \\ P`` must be one per cell, the last of the cell in
program order.  The value must not read ``i`` (then a term is the same in
every cell it belongs to; below, a value that does).  The carried statement
runs after the first one, ``i`` ascending, so ``O[i - 1]`` is complete when read.  The association is
the triangle's: ``0 + (((0 + f0) + f1) + ... + f_i)`` against
``0 + (((0 + f0) + ... ) + f_i)`` (a sum that starts at +0 is never -0, so the
outer ``0 +`` changes nothing; integers are exact; ``*`` starts at 1 alike).
Only ``+`` and ``*`` sums with no default tensor (whose cells would carry it).

Other spellings of the same sum are first seen along new iterators (``_views``), since
the folds of a cell have no order: PlaidML 0.7.0's op library counts the term back
from the cell, ``O[i : N] = +(I[i - k]), k < N``, which is ``k' = i - k``; a sum from
the right, ``O[i : N] = +(I[k]), k - i < N``, runs its scan axis down and its
reduction loop from the end.  Both then add in numpy's order (``np.cumsum``, of the
reversed array for the second).  Their triangles add from element i outward, the
recurrence from the far end: their bits change, as a vectorised sum's would.
"""
from __future__ import annotations

from typing import Iterator, List, Optional

import islpy as isl

from . import body as B
from .scop import Statement


def carry(st: Statement, dtype: str, has_default: bool) -> Optional[List[Statement]]:
    """The two statements a prefix contraction ``st`` (into an array of ``dtype``) becomes (module docstring),
    or None when it is not one.

    >>> # O[i : N] = +(I[k]), i - k < N  ->  [S0 on { k <= i = 0 }, S0c on { k = i and 1 <= i < N }]
    """
    body = st.body
    if body.reduce not in ("+", "*") or has_default or st.c_text is not None or getattr(body.value, "dtype", None) != dtype:
        return None
    out = B.iter_names(*body.index)
    if [v for v in st.iters if v not in out] != list(st.iters[-1:]):
        return None  # one reduction loop, innermost in program order: each cell sums along it
    for axis, e in enumerate(body.index):
        if isinstance(e, B.Iter) and sum(e.name in B.iter_names(x) for x in body.index) == 1:
            for cand in _views(st, e.name):
                found = _split(cand, axis, e.name, dtype)
                if found is not None:
                    return found
    return None


def _views(st: Statement, i: str) -> Iterator[Statement]:
    """``st`` seen along new iterators ``i'``, ``k'`` in which its value does not read ``i'``: the
    folds of a cell have no order, so the reduction loop and the scan axis may run either way.

    With ``k = s*k' - r*i`` (``s`` = +-1), an index ``c_i*i + c_k*k + ...`` reads ``(c_i - r*c_k)*i``:
    ``r = c_i / c_k`` for every index of the value.  The scan axis runs ``i' = i`` or, for a sum
    from the right, ``i' = lo + hi - i`` (the output index becomes ``lo + hi - i'``).  PlaidML's
    ``O[i] = +(I[i - k]), k < N`` is ``{ S[i, k] -> S[i, i - k] }``: ``O[i] = +(I[k']), k' <= i``.
    """
    k = st.iters[-1]
    r: Optional[int] = None
    for ld in B.loads(st.body.value):
        for e in ld.index:
            lin = B.linear(e)
            if lin is None:
                if i in B.iter_names(e) or k in B.iter_names(e):
                    return
                continue
            ci, ck = lin.get(i, 0), lin.get(k, 0)
            if ci == 0 and ck == 0:
                continue
            if ck == 0 or ci % ck or (r is not None and r != ci // ck):
                return
            r = ci // ck
    r = r or 0
    if i in B.iter_names(st.body.value) and r == 0:
        return  # read outside an index
    pos = st.iters.index(i)
    D = st.domain
    if D.is_empty():
        return
    lo = int(D.dim_min_val(pos).to_python())
    hi = int(D.dim_max_val(pos).to_python())
    for t in (1, -1):
        for s in (1, -1):
            if (t, s, r) == (1, 1, 0):
                yield st
                continue
            new_i = f"{lo + hi} - {i}" if t < 0 else i
            image = [new_i if v == i else f"{s}*({k} + {r}*{i})" if v == k else v for v in st.iters]
            to_new = isl.Map(f"{{ {st.name}[{', '.join(st.iters)}] -> {st.name}[{', '.join(image)}] }}", context=D.get_ctx())
            domain = D.apply(to_new)
            for d, v in enumerate(st.iters):
                domain = domain.set_dim_name(isl.dim_type.set, d, v)
            old_i = {i: -1, "": lo + hi} if t < 0 else {i: 1}
            sub = {i: old_i, k: {k: s, **{v: -r * c for v, c in old_i.items()}}}
            sub[k] = {v: c for v, c in sub[k].items() if c}
            store = st.body
            body = B.Store(store.array, tuple(B.substitute(e, sub) for e in store.index),
                           B.substitute(store.value, sub), store.reduce)
            if i in B.iter_names(body.value):
                continue
            yield Statement(st.name, st.iters, domain, body, st.kind, st.origin, st.text, st.loc)


def _split(st: Statement, axis: int, i: str, dtype: str) -> Optional[List[Statement]]:
    D = st.domain
    n = D.dim(isl.dim_type.set)  # k is the last of the n iterators (carry)
    nxt = [f"{v} + 1" if v == i else v for v in st.iters]
    shift = isl.Map(f"{{ {st.name}[{', '.join(st.iters)}] -> {st.name}[{', '.join(nxt)}] }}", context=D.get_ctx())

    def cells(s: isl.Set) -> isl.Set:  # the cells ``s`` reaches, at every k
        return s.project_out(isl.dim_type.set, n - 1, 1).add_dims(isl.dim_type.set, 1).set_tuple_name(st.name)

    carried = D.apply(shift).intersect(cells(D))
    if carried.is_empty():
        # One cell along i (a size-1 axis): nothing to carry, but the carried statement is kept,
        # empty, so a schedule that names it replays at this size too (N=5 -> N=1).
        pos = st.iters.index(i)
        if D.is_empty() or not D.dim_min_val(pos).eq(D.dim_max_val(pos)):
            return None
        first, new = D, isl.Set.empty(D.get_space())
    else:
        if not carried.is_subset(D):
            return None
        carried_cells = cells(carried)
        new = D.subtract(carried).intersect(carried_cells)

        def by_cell(s: isl.Set) -> isl.Map:  # { cell -> k }
            return isl.Map.from_range(s).move_dims(isl.dim_type.in_, 0, isl.dim_type.out, 0, n - 1)

        last = by_cell(D.intersect(carried_cells)).lexmax()
        one = by_cell(new)
        if not one.is_single_valued() or not one.is_equal(last):
            return None  # more than one new term a cell, or one that is not the cell's last
        first = D.subtract(carried_cells)
    prev = tuple(B.substitute(e, {i: {i: 1, "": -1}}) if a == axis else e for a, e in enumerate(st.body.index))
    carried_value = B.Bin(st.body.reduce, B.Load(st.body.array, prev, dtype), st.body.value, dtype)
    head = Statement(st.name, st.iters, first.coalesce(), st.body, st.kind, st.origin, st.text, st.loc)
    tail = Statement(f"{st.name}c", st.iters, new.coalesce().set_tuple_name(f"{st.name}c"),
                     B.Store(st.body.array, st.body.index, carried_value, st.body.reduce), st.kind, st.origin,
                     f"{st.text}  (carried from the previous cell)", st.loc)
    return [head, tail]
