"""Schedule transformations: pure functions ``Schedule -> Schedule``, each legality-checked.

Every function takes a schedule, a statement (``S0`` or a Tile tensor name
such as ``C``) and loop names, and returns a *new* schedule with one more
:class:`~polytile.scheduling.core.Step`, or raises
:class:`~polytile.errors.IllegalSchedule` naming the violated dependence and
a pair of iterations that would run in the wrong order.

A transformation of a loop applies to every statement that shares that loop
(same β values outside it), so fused nests stay fused.

    >>> # s = interchange(s, "C", "j", "k")      C's nest i, j, k  ->  i, k, j
    >>> # s = tile(s, "C", {"i": 32, "j": 32})    -> i_t, j_t, i, j, k  (tile loops named *_t)
    >>> # s = parallel(s, "C", "i_t")             -> #pragma omp parallel for on i_t
"""
from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

import islpy as isl


from ..errors import ScheduleError
from ..isl_parts import sets_of
from ..poly import body as B
from .core import PACK, PARALLEL, REGTILE, SIMD, UNROLL, Padded, Schedule, Step, StmtSchedule, dim_values, range_map
from .marks import NO_LOOP, RegTile


# ---------------------------------------------------------------------------
# mechanics
# ---------------------------------------------------------------------------


def _apply(s: Schedule, targets: Sequence[str], outs: Sequence[str],
           names_for, others_outs: Optional[Sequence[str]] = None, others_names=None) -> Tuple:
    """Apply ``{ [t..] -> [outs] }`` to ``targets`` (and ``others_outs`` to the rest)."""
    n = s.n_dims
    m_t = range_map(n, outs)
    m_o = range_map(n, others_outs) if others_outs is not None else None
    new = []
    for name, ss in s.stmts:
        if name in targets:
            new.append((name, StmtSchedule(ss.map.apply_range(m_t), tuple(names_for(name, ss)))))
        elif m_o is not None:
            new.append((name, StmtSchedule(ss.map.apply_range(m_o), tuple(others_names(name, ss)))))
        else:
            new.append((name, ss))
    if others_outs is not None and not _inserts_constants(n, others_outs):
        return tuple(new)
    # Only the targets moved (others at most got constant dimensions); an unchecked intermediate
    # (tile's levels) passes its own on.
    touched = set(targets)
    if isinstance(s.stmts, Padded) and not getattr(s, "_checked", False):
        touched |= s.stmts.touched
    return Padded(new, touched)


def _inserts_constants(n: int, outs: Sequence[str]) -> bool:
    """``[t0, ..., t(n-1)] -> [outs]`` keeps ``t0..`` in order and only adds integer constants."""
    kept = [o for o in outs if not o.lstrip("-").isdigit()]
    return kept == _t(n)


def _t(n: int) -> List[str]:
    return [f"t{d}" for d in range(n)]


def _fresh(names: Sequence[Optional[str]], base: str) -> str:
    taken = {n for n in names if n}
    if base not in taken:
        return base
    k = 1
    while f"{base}{k}" in taken:
        k += 1
    return f"{base}{k}"


def _finish(s: Schedule, stmts, step: Step, marks=None) -> Schedule:
    out = s.with_(stmts=stmts, steps=s.steps + (step,), marks=s.marks if marks is None else marks)
    return out.check(str(step), since=s)


def _loops_in(s: Schedule, stmt: str) -> List[Tuple[int, str]]:
    return s.table[stmt].loops()


def _one_point(s: Schedule, stmt: str, dim: int) -> bool:
    """Whether time dimension ``dim`` of ``stmt`` takes one value whatever the parameters (isl's AST has no
    loop for it): ``lexmin == lexmax`` of its values, parameters kept (``{ [k] : 0 <= k < nk }`` is not)."""
    v = dim_values([s.table[stmt].map], dim)
    return not v.is_empty() and v.lexmin().is_equal(v.lexmax())


# ---------------------------------------------------------------------------
# loop order
# ---------------------------------------------------------------------------


def reorder(s: Schedule, stmt: str, order: Sequence[str]) -> Schedule:
    """Permute loops of ``stmt``'s nest: the named loops take the listed order in the same positions.

    >>> # reorder(s, "C", ["k", "i", "j"])   i, j, k -> k, i, j
    """
    st = s.resolve(stmt)
    order = list(order)
    if len(set(order)) != len(order):
        raise ScheduleError(f"reorder: loop names repeat in {order}")
    dims = sorted(s.loop_dim(st, l) for l in order)
    src = [s.loop_dim(st, l) for l in order]  # the dimension that lands at dims[k]
    n = s.n_dims
    t = _t(n)
    outs = list(t)
    for pos, d in zip(dims, src):
        outs[pos] = t[d]
    group = s.group(st, dims[0])

    def names(_, ss):
        nm = list(ss.names)
        for pos, d in zip(dims, src):
            nm[pos] = ss.names[d]
        return nm

    return _finish(s, _apply(s, group, outs, names), Step.make("reorder", stmt=stmt, order=order))


def interchange(s: Schedule, stmt: str, a: str, b: str) -> Schedule:
    """Swap loops ``a`` and ``b`` of ``stmt`` (and of every statement sharing them)."""
    st = s.resolve(stmt)
    da, db = s.loop_dim(st, a), s.loop_dim(st, b)
    n = s.n_dims
    t = _t(n)
    outs = list(t)
    outs[da], outs[db] = t[db], t[da]
    group = s.group(st, min(da, db))

    def names(_, ss):
        nm = list(ss.names)
        nm[da], nm[db] = ss.names[db], ss.names[da]
        return nm

    return _finish(s, _apply(s, group, outs, names), Step.make("interchange", stmt=stmt, a=a, b=b))


# ---------------------------------------------------------------------------
# strip-mining and tiling
# ---------------------------------------------------------------------------


def _strip(s: Schedule, st: str, loops: Sequence[Tuple[str, int]], suffix: str, inner_suffix: Optional[str]):
    """Insert ``floor(t_l / size_l)`` loops (each followed by a β 0) before the outermost of ``loops``."""
    for l, size in loops:
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise ScheduleError(f"tile/split size for loop {l!r} must be a positive integer, got {size!r}")
    dims = [(s.loop_dim(st, l), size) for l, size in loops]
    dims.sort()
    p = dims[0][0]
    n = s.n_dims
    t = _t(n)
    ins: List[str] = []
    for d, size in dims:
        ins += [f"floor({t[d]}/{size})", "0"]
    group = s.group(st, p)
    # Reuse filler dimensions when the group has them just outside p: constant 0 and no loop for every
    # member, and separating the group from no other statement.  Another nest's tiling left them
    # (every statement gets the dimensions a tiling inserts); without reuse each tiled nest of a long
    # program added dimensions to all statements and every isl operation grew with the program.
    need = 2 * len(dims)
    table = s.table
    reuse = p >= need and all(table[g].names[d] is None and table[g].constant(d) == 0
                              for g in group for d in range(p - need, p)) \
        and s.group(st, p - need) == group
    keep = p - need if reuse else p
    # Otherwise use the group's trailing fillers (constant 0, no loop: left by deeper nests elsewhere)
    # and append only what is still missing, at the end of every other statement: they are separated
    # from the group before ``p`` and keep their loops' positions, so a long program's time vectors
    # grow to its deepest nest instead of by every tiling (each isl operation grows with them).
    free = 0 if reuse else min(_trailing_free(table[g], p) for g in group)
    free = min(free, need)
    free -= free % 2  # whole (loop, β) pairs: the 2d+1 alternation stays
    end = n - free
    outs = t[:keep] + ins + t[p:end]
    extra = 0 if reuse else need - free
    others = t + ["0"] * extra if extra else None

    def names(_, ss):
        new: List[Optional[str]] = []
        for d, _size in dims:
            base = ss.names[d]
            new += [_fresh(list(ss.names) + new, f"{base}{suffix}") if base else None, None]
        rest = list(ss.names)
        if inner_suffix:
            for d, _size in dims:
                if rest[d]:
                    rest[d] = _fresh(rest + new, f"{rest[d]}{inner_suffix}")
        return rest[:keep] + new + rest[p:end]

    def other_names(_, ss):
        return list(ss.names) + [None] * extra

    return _apply(s, group, outs, names, others, other_names if others else None)


def _trailing_free(ss: StmtSchedule, start: int) -> int:
    """How many of the last time dimensions (at or after ``start``) are constant 0 and no loop."""
    k = 0
    for d in range(len(ss.names) - 1, start - 1, -1):
        if ss.names[d] is not None or ss.constant(d) != 0:
            break
        k += 1
    return k


def tile(s: Schedule, stmt: str, sizes: Union[Mapping[str, Union[int, Sequence[int]]], None] = None, **kw) -> Schedule:
    """Tile loops of ``stmt``: ``tile(s, "C", {"i": 32, "j": 32})`` or ``tile(s, "C", i=32, j=32)``.

    Tile loops ``i_t, j_t`` go outside the outermost tiled loop; the point
    loops keep their names.  A list gives several levels, outermost first:
    ``{"i": [64, 8]}`` yields ``i_t, i_t1, i``.
    """
    st = s.resolve(stmt)
    sizes = dict(sizes or {}, **kw)
    if not sizes:
        raise ScheduleError("tile: give at least one loop size, e.g. tile(s, 'C', i=32)")
    levels = max(len(v) if isinstance(v, (list, tuple)) else 1 for v in sizes.values())
    cur = s
    for lvl in range(levels):
        loops = []
        for l, v in sizes.items():
            vs = list(v) if isinstance(v, (list, tuple)) else [v]
            if lvl < len(vs):
                loops.append((l, vs[lvl]))
        stmts = _strip(cur, st, loops, "_t", None)
        cur = cur.with_(stmts=stmts)
    step = Step.make("tile", stmt=stmt, sizes={k: (list(v) if isinstance(v, (list, tuple)) else v) for k, v in sizes.items()})
    return _finish(s, cur.stmts, step, _hoist_parallel(s, cur, st, list(sizes)))


def _hoist_parallel(old: Schedule, new: Schedule, st: str, tiled: Sequence[str]):
    """Move a parallel mark from a tiled loop to its outermost tile loop.

    If point loop ``i`` carried no dependence, neither does ``floor(i/T)``,
    and one parallel region around the tile loop beats one per tile.
    """
    marks = set(new.marks)
    dims = sorted(old.loop_dim(st, l) for l in tiled)
    p = dims[0]
    for g in old.group(st, p):
        # The first level's tile loops, in position order, are the first loop names ``g`` did not have
        # (found by name: tiling may have reused filler dimensions before ``p``, so not at ``p + 2k``).
        had = {n for n in old.table[g].names if n}
        added = [n for n in new.table[g].names if n and n not in had]
        for k, d in enumerate(dims):
            name = old.table[g].names[d]
            outer = added[k] if k < len(added) else None
            for m in [m for m in marks if m[0] == g and m[1] == name and m[2] == PARALLEL]:
                if outer:
                    marks.discard(m)
                    marks.add((g, outer, PARALLEL, m[3]))
    return frozenset(marks)


def split(s: Schedule, stmt: str, loop: str, factor: int) -> Schedule:
    """Strip-mine one loop: ``i`` -> ``i_o`` (steps of ``factor``) and ``i_i`` (within a step)."""
    st = s.resolve(stmt)
    stmts = _strip(s, st, [(loop, factor)], "_o", "_i")
    new = s.with_(stmts=stmts)
    # Marks follow the loop: parallel goes to the outer part, simd/unroll/regtile to the inner.
    d = s.loop_dim(st, loop)
    marks = set(s.marks)
    for g in s.group(st, d):
        old_name = s.table[g].names[d]
        if not old_name:
            continue
        names_now = [n for n in new.table[g].names if n]
        outer = next((n for n in names_now if n.startswith(old_name + "_o")), None)
        inner = next((n for n in names_now if n.startswith(old_name + "_i")), None)
        for m in [m for m in marks if m[0] == g and m[1] == old_name]:
            marks.discard(m)
            target = outer if m[2] == PARALLEL else inner
            if target:
                marks.add((g, target, m[2], m[3]))
    return _finish(s, stmts, Step.make("split", stmt=stmt, loop=loop, factor=factor), frozenset(marks))


# ---------------------------------------------------------------------------
# affine changes of one loop
# ---------------------------------------------------------------------------


def skew(s: Schedule, stmt: str, loop: str, by: str, factor: int = 1) -> Schedule:
    """``loop := loop + factor * by`` (e.g. make a stencil's space loop tileable with time)."""
    st = s.resolve(stmt)
    d, e = s.loop_dim(st, loop), s.loop_dim(st, by)
    t = _t(s.n_dims)
    outs = list(t)
    outs[d] = f"{t[d]} + {int(factor)}*{t[e]}"
    group = s.group(st, min(d, e))
    return _finish(s, _apply(s, group, outs, lambda _, ss: ss.names),
                   Step.make("skew", stmt=stmt, loop=loop, by=by, factor=int(factor)))


def reverse(s: Schedule, stmt: str, loop: str) -> Schedule:
    """Run ``loop`` backwards."""
    st = s.resolve(stmt)
    d = s.loop_dim(st, loop)
    t = _t(s.n_dims)
    outs = list(t)
    outs[d] = f"-{t[d]}"
    return _finish(s, _apply(s, s.group(st, d), outs, lambda _, ss: ss.names),
                   Step.make("reverse", stmt=stmt, loop=loop))


def shift(s: Schedule, stmt: str, loop: str, amount: int) -> Schedule:
    """Shift ``stmt`` alone by ``amount`` iterations of ``loop`` relative to the statements it shares it with."""
    st = s.resolve(stmt)
    d = s.loop_dim(st, loop)
    t = _t(s.n_dims)
    outs = list(t)
    outs[d] = f"{t[d]} + {int(amount)}"
    return _finish(s, _apply(s, [st], outs, lambda _, ss: ss.names),
                   Step.make("shift", stmt=stmt, loop=loop, amount=int(amount)))


# ---------------------------------------------------------------------------
# fusion and distribution
# ---------------------------------------------------------------------------


def _set_betas(s: Schedule, st: str, values: Mapping[int, int]) -> Tuple:
    t = _t(s.n_dims)
    outs = list(t)
    for d, v in values.items():
        outs[d] = str(int(v))
    return _apply(s, [st], outs, lambda _, ss: ss.names)


def _padded(s: Schedule, need: int) -> Schedule:
    """``s`` with at least ``need`` time dimensions: everyone padded with zeros at the end.

    Appending constants keeps everyone's order, so only the statement a caller then moves is re-checked.
    """
    n = s.n_dims
    if need <= n:
        return s
    t, extra = _t(n), need - n
    return s.with_(stmts=_apply(s, [], t, None, t + ["0"] * extra, lambda _, ss: list(ss.names) + [None] * extra))


def fuse(s: Schedule, a: str, b: str, depth: Optional[int] = None, *, before: bool = False) -> Schedule:
    """Move statement ``b`` into ``a``'s loop nest, sharing its outer ``depth`` loops.

    ``b`` runs after ``a``'s remaining body inside the shared loops (or before
    it with ``before=True``).  Loops are matched in order: ``b``'s k-th loop
    becomes ``a``'s k-th loop for ``k < depth`` (so tile both nests alike
    first when ``a`` is tiled); ``b``'s other loops nest inside, in order.

    >>> # matmul C (S0: i, j, k) then D = C + bias (E1: i0, i1):
    >>> # fuse(s, "C", "D", 2)  ->  for i: for j: { for k: C += ...; D = C + bias }
    """
    sa, sb = s.resolve(a), s.resolve(b)
    if sa == sb:
        raise ScheduleError("fuse: a statement cannot be fused with itself")
    la, lb = _loops_in(s, sa), _loops_in(s, sb)
    if depth is None:
        depth = min(len(la), len(lb))
    if depth < 1 or depth > min(len(la), len(lb)):
        raise ScheduleError(f"fuse: depth must be between 1 and {min(len(la), len(lb))} "
                            f"({sa} has {len(la)} loops, {sb} has {len(lb)})")
    p = la[depth - 1][0]
    inner = p + 1
    rest = lb[depth:]
    cur = _padded(s, inner + 2 * len(rest) + 1)
    n = cur.n_dims
    siblings = [g for g in cur.group(sa, inner) if g != sb]
    vals = [cur.constant(g, inner) or 0 for g in siblings]
    t = _t(n)
    outs = ["0"] * n
    names: List[Optional[str]] = [None] * n
    for d in range(0, p, 2):
        outs[d] = str(cur.constant(sa, d) or 0)
    for (da, _), (db, nb) in zip(la[:depth], lb[:depth]):
        outs[da], names[da] = t[db], nb
    outs[inner] = str((min(vals) - 1) if before else (max(vals) + 1))
    for k, (db, nb) in enumerate(rest):
        outs[inner + 1 + 2 * k], names[inner + 1 + 2 * k] = t[db], nb
    stmts = _apply(cur, [sb], outs, lambda _, ss: names)
    return _finish(s, stmts, Step.make("fuse", a=a, b=b, depth=depth, before=before))


def fuse_last(s: Schedule, a: str, b: str, depth: int) -> Schedule:
    """Run ``b`` inside ``a``'s outer ``depth`` loops, in the iteration where ``a`` last writes what ``b`` reads.

    Unlike :func:`fuse`, ``b``'s loops need not match ``a``'s: an instance ``e`` of ``b`` takes
    the outer ``depth`` loops of the lexicographically last instance of ``a`` writing an element
    ``e`` reads, then runs its own loops after ``a``'s body there:

        T_b(e) = lexmax { T_a(x) : W_a(x) in R_b(e) }  (first ``depth`` loops),  after a,  b's loops

    A blocked contraction's elementwise consumer so runs per register block, right after the
    block's last reduction step, while the block is still in L1 (issue 14's fused epilogues).

    >>> # C (S0: j_t, k_t, i_t, j_t1, i_t1 | k, i, j) then Y = relu(C + B) (E1: i0, i1):
    >>> # fuse_last(s, "S0", "E1", 5) -> for j_t, k_t, i_t, j_t1, i_t1: { S0's block; E1 on that block if k_t is last }
    """
    return _fuse_at_instance(s, a, b, depth, first=False)


def fuse_first(s: Schedule, a: str, b: str, depth: int) -> Schedule:
    """Run ``b`` inside ``a``'s outer ``depth`` loops, in the iteration where ``a`` first reads what ``b`` writes.

    The mirror of :func:`fuse_last`, for an initialisation: an instance ``e`` of ``b`` takes the
    outer ``depth`` loops of the lexicographically first instance of ``a`` reading an element ``e``
    writes, and runs its own loops before ``a``'s body there:

        T_b(e) = lexmin { T_a(x) : R_a(x) in W_b(e) }  (first ``depth`` loops),  before a,  b's loops

    A blocked contraction's ``C = 0`` so zeroes each register block right before the block's first
    reduction step loads it -- from L1, where the zeroing just put it -- instead of a separate pass
    writing all of ``C`` to memory and the first step reading it back.

    >>> # Z0: C = 0 (o0, o1), then C (S0: j_t, k_t, i_t, j_t1, i_t1 | k, i, j):
    >>> # fuse_first(s, "S0", "Z0", 5) -> for j_t, k_t, i_t, j_t1, i_t1: { if k_t is first: Z0 on the block; S0's block }
    """
    return _fuse_at_instance(s, a, b, depth, first=True)


def _fuse_at_instance(s: Schedule, a: str, b: str, depth: int, *, first: bool) -> Schedule:
    op = "fuse_first" if first else "fuse_last"
    sa, sb = s.resolve(a), s.resolve(b)
    if sa == sb:
        raise ScheduleError(f"{op}: a statement cannot be fused with itself")
    la, lb = _loops_in(s, sa), _loops_in(s, sb)
    if not 1 <= depth <= len(la):
        raise ScheduleError(f"{op}: depth must be between 1 and {len(la)} ({sa} has {len(la)} loops)")
    p = la[depth - 1][0]
    inner = p + 1
    cur = _padded(s, inner + 2 * len(lb) + 1)
    n = cur.n_dims
    scop = cur.scop
    dom_a = isl.UnionSet.from_set(cur.table[sa].map.domain())
    dom_b = isl.UnionSet.from_set(cur.table[sb].map.domain())
    times_a = isl.UnionMap.from_map(cur.table[sa].map)
    if first:
        # b -> the cells it writes -> the instances of a that read them -> their times; the first per instance of b.
        partners = scop.must_writes.intersect_domain(dom_b).apply_range(scop.reads.intersect_domain(dom_a).reverse())
        at = partners.apply_range(times_a).lexmin()
    else:
        # b -> the instances of a that write what b reads -> their times; the last one per instance of b.
        partners = scop.reads.intersect_domain(dom_b).apply_range(scop.must_writes.intersect_domain(dom_a).reverse())
        at = partners.apply_range(times_a).lexmax()
    if at.is_empty() or not at.domain().is_equal(dom_b):
        what = f"writes something {sa} reads" if first else f"reads something {sa} writes"
        raise ScheduleError(f"{op}: not every instance of {sb} {what}")
    outer = isl.Map.from_union_map(at).apply_range(range_map(n, _t(n)[:inner]))
    own = cur.table[sb].map  # b's current time: its loops at their dimensions
    both = outer.flat_range_product(own)
    siblings = [cur.constant(g, inner) or 0 for g in cur.group(sa, inner) if g != sb]
    beta = (min(siblings, default=0) - 1) if first else (max(siblings, default=0) + 1)
    ins = [f"u{d}" for d in range(inner)] + _t(n)
    outs = ins[:inner] + [str(beta)] + ["0"] * (n - inner - 1)
    names: List[Optional[str]] = [None] * n
    for d, nm in la[:depth]:
        names[d] = nm
    for k, (db, nb) in enumerate(lb):
        outs[inner + 1 + 2 * k], names[inner + 1 + 2 * k] = f"t{db}", nb
    new_map = both.apply_range(range_map(len(ins), outs, ins))
    stmts = tuple((name, StmtSchedule(new_map.set_tuple_name(isl.dim_type.in_, sb), tuple(names))
                   if name == sb else ss) for name, ss in cur.stmts)
    return _finish(s, stmts, Step.make(op, a=a, b=b, depth=depth))


def distribute(s: Schedule, stmt: str, depth: int = 0) -> Schedule:
    """Give ``stmt`` its own loop nest below its outer ``depth`` shared loops (inverse of fuse)."""
    st = s.resolve(stmt)
    loops = _loops_in(s, st)
    if not 0 <= depth < max(len(loops), 1):
        raise ScheduleError(f"distribute: depth must be in [0, {len(loops) - 1}] for {st}")
    q = loops[depth][0] - 1 if loops else 0  # the β position just outside the loop being split off
    parent = s.group(st, q)
    v = s.constant(st, q) or 0
    betas_for: Dict[str, int] = {}
    for g in parent:
        bg = s.constant(g, q)
        if bg is None:
            continue
        if bg > v:
            betas_for[g] = bg + 2
        elif bg == v and g != st:
            betas_for[g] = v if _runs_before(s, g, st, q + 1) else v + 2
    betas_for[st] = v + 1
    cur = s
    for g, val in betas_for.items():
        cur = cur.with_(stmts=_set_betas(cur, g, {q: val}))
    return _finish(s, cur.stmts, Step.make("distribute", stmt=stmt, depth=depth))


def _runs_before(s: Schedule, a: str, b: str, start: int) -> bool:
    for d in range(start, s.n_dims):
        ca, cb = s.table[a].constant(d), s.table[b].constant(d)
        if ca is not None and cb is not None and ca != cb:
            return ca < cb
    return False


# ---------------------------------------------------------------------------
# marks
# ---------------------------------------------------------------------------


def _mark(s: Schedule, stmt: str, loop: str, kind: str, arg, step: Step, replace_kind: bool = True) -> Schedule:
    st = s.resolve(stmt)
    d = s.loop_dim(st, loop)
    group = [g for g in s.group(st, d) if s.table[g].names[d]]
    marks = set(s.marks)
    for g in group:
        name = s.table[g].names[d]
        if replace_kind:
            marks = {m for m in marks if not (m[0] == g and m[1] == name and m[2] == kind)}
        marks.add((g, name, kind, arg))
    return _finish(s, s.stmts, step, frozenset(marks))


def parallel(s: Schedule, stmt: str, loop: str, *, reduction: bool = False) -> Schedule:
    """Run ``loop`` as an OpenMP parallel loop.

    Legal only if it carries no dependence; with ``reduction=True`` it may
    carry reduction dependences, which become an OpenMP ``reduction`` clause
    (each thread accumulates privately) -- only on targets that support it.
    """
    return _mark(s, stmt, loop, PARALLEL, bool(reduction),
                 Step.make("parallel", stmt=stmt, loop=loop, reduction=bool(reduction)))


def vectorize(s: Schedule, stmt: str, loop: str, *, reduction: bool = False) -> Schedule:
    """Mark the innermost loop ``loop`` as a SIMD loop (``#pragma omp simd``); it must carry no dependence.

    With ``reduction=True`` it may carry the dependences of reductions of C
    statements (``extract(..., reassociate=True)``) that update one cell per
    iteration of the outer loops: a scalar gets a ``reduction(op:s)``
    clause, an array element a scalar accumulator written back after the
    loop.  Each lane keeps a partial sum, combined after the loop (a
    reassociation).

    >>> # for j: s -= U[i][j] * x[j]    (S1 a reduction: extract(..., reassociate=True))
    >>> # vectorize(s, "S1", "j", reduction=True)  ->  #pragma omp simd reduction(+:s)
    """
    st = s.resolve(stmt)
    d = s.loop_dim(st, loop)
    inner = [n for dd, n in _loops_in(s, st) if dd > d]
    if inner:
        raise ScheduleError(f"vectorize: loop {loop!r} of {st} is not innermost (inside it: {', '.join(inner)})")
    step = (Step.make("vectorize", stmt=stmt, loop=loop, reduction=True) if reduction
            else Step.make("vectorize", stmt=stmt, loop=loop))
    return _mark(s, stmt, loop, SIMD, bool(reduction), step)


#: gcc's limit for ``#pragma GCC unroll`` (it rejects 65535 and above: the C would not compile).
MAX_UNROLL = 65534


def unroll(s: Schedule, stmt: str, loop: str, factor: int = 4) -> Schedule:
    """Ask the C compiler to unroll ``loop`` by ``factor`` (``#pragma GCC unroll``, at most 65534).

    >>> # unroll(s, "C", "j", 8) -> the loop j of C carries ``#pragma GCC unroll 8``
    """
    if isinstance(factor, bool) or not isinstance(factor, int) or not 1 <= factor <= MAX_UNROLL:
        raise ScheduleError(f"unroll: factor must be an integer from 1 to {MAX_UNROLL}, got {factor!r}")
    return _mark(s, stmt, loop, UNROLL, int(factor), Step.make("unroll", stmt=stmt, loop=loop, factor=int(factor)))


def regtile(s: Schedule, stmt: str, rows: str, cols: str, *, mr: int, nr: int, lanes: int) -> Schedule:
    """Hold an ``mr x nr`` block of accumulators in registers (unroll-and-jam), ``cols`` vectorised.

    ``rows`` and ``cols`` must be the statement's two innermost loops (point
    loops of tiles of ``mr`` and ``nr``), directly inside its reduction
    loops; ``nr`` is a multiple of ``lanes`` (the SIMD width in elements).
    The code generator emits the register block for full tiles and the
    plain loops at the edges.

    >>> # tile(s, "C", i=[64, 8], j=[256, 32], k=256), reorder to (..., k, i, j), then
    >>> # regtile(s, "C", "i", "j", mr=8, nr=32, lanes=16)
    """
    st = s.resolve(stmt)
    loops = _loops_in(s, st)
    names = [n for _, n in loops]
    # A role named NO_LOOP is absent: a one-dimensional block along the other loop.
    present = [x for x in (rows, cols) if x != NO_LOOP]
    k = len(present)
    if not present or len(names) < k or names[-k:] != present:
        raise ScheduleError(f"regtile: {', '.join(map(repr, present)) or 'a block loop'} must be the innermost "
                            f"loops of {st} (its loops: {', '.join(names)})")
    for x, what in ((mr, "mr"), (nr, "nr"), (lanes, "lanes")):
        if not isinstance(x, int) or x < 1:
            raise ScheduleError(f"regtile: {what} must be a positive integer, got {x!r}")
    if nr % lanes:
        raise ScheduleError(f"regtile: nr={nr} must be a multiple of lanes={lanes}")
    stmt_obj = s.scop.statement(st)
    if any(x not in stmt_obj.iters for x in present):
        raise ScheduleError("regtile: the block loops must be the statement's own iterators (tile them, don't skew them)")
    out_iters = B.iter_names(*stmt_obj.body.index)
    # The reduction loops directly around the block; one of a single point (a 1x1 filter's ky, kx) has no
    # loop in the AST, so it neither counts nor carries the mark (a mark on it vanished with it, and the
    # block with the mark: a pointwise conv ran the generic nest).
    dims = dict((n, d) for d, n in loops)
    nred, anchor = 0, names[len(names) - k]
    for name in reversed(names[:-k]):
        if name not in stmt_obj.iters or name in out_iters:
            break
        if not _one_point(s, st, dims[name]):
            nred += 1
            anchor = name
    arg = RegTile(nred, rows, int(mr), cols, int(nr), int(lanes)).arg()  # the tree's mark is "regtile " + arg
    return _mark(s, stmt, anchor, REGTILE, arg,
                 Step.make("regtile", stmt=stmt, rows=rows, cols=cols, mr=mr, nr=nr, lanes=lanes))


def pack(s: Schedule, stmt: str, loop: str, array: str, *, dim: int, block: int) -> Schedule:
    """Copy ``array``'s footprint of each iteration of ``loop`` into a contiguous, blocked buffer.

    At the start of every iteration of ``loop`` the box hull of the elements
    that the loop's body reads (computed with isl at code generation) is copied
    into a buffer laid out ``[t_dim / block][other dims...][t_dim % block]``,
    ``t`` being the position in the box: the register tiles inside then stream
    ``block``-wide slivers from one contiguous panel (no TLB misses or cache-set
    conflicts from the array's row stride).  Register tiles whose rows
    (``block == mr``) or columns (``block == nr``) run along ``dim`` use it;
    anything else keeps reading the array, so the mark never changes results.
    Legal when nothing inside ``loop`` writes ``array``.

    >>> # matmul tiled (i_t, j_t, k_t, j_t1, i_t1, k, i, j), regtile mr=8, nr=32:
    >>> # pack(s, "S0", "k_t", "B", dim=1, block=32)  -> B[k][j] copied as [j/32][k][j%32]
    """
    st = s.resolve(stmt)
    d = s.loop_dim(st, loop)
    group = [g for g in s.group(st, d) if s.table[g].names[d]]
    arr = next((a for a in s.scop.arrays if a.name == array), None)
    if arr is None:
        raise ScheduleError(f"pack: no array {array!r} (arrays: {', '.join(a.name for a in s.scop.arrays)})")
    if not isinstance(dim, int) or not 0 <= dim < len(arr.shape):
        raise ScheduleError(f"pack: dim must be an axis of {array} (0..{len(arr.shape) - 1}), got {dim!r}")
    if not isinstance(block, int) or block < 1:
        raise ScheduleError(f"pack: block must be a positive integer, got {block!r}")
    read_arrays = {x.get_tuple_name() for g in group for x in sets_of(s.scop.statement(g).reads().range())}
    if array not in read_arrays:
        raise ScheduleError(f"pack: nothing inside loop {loop!r} of {st} reads {array!r}")
    marks = {m for m in s.marks if not (m[0] in group and m[2] == PACK and m[3][0] == array
                                       and m[1] == s.table[m[0]].names[d])}
    for g in group:
        marks.add((g, s.table[g].names[d], PACK, (array, dim, block)))
    return _finish(s, s.stmts, Step.make("pack", stmt=stmt, loop=loop, array=array, dim=dim, block=block),
                   frozenset(marks))


def unmark(s: Schedule, stmt: str, loop: str, kind: str = PARALLEL) -> Schedule:
    """Remove a mark (parallel/simd/unroll) from a loop."""
    st = s.resolve(stmt)
    d = s.loop_dim(st, loop)
    group = s.group(st, d)
    names = {(g, s.table[g].names[d]) for g in group}
    marks = frozenset(m for m in s.marks if not ((m[0], m[1]) in names and m[2] == kind))
    return _finish(s, s.stmts, Step.make("unmark", stmt=stmt, loop=loop, kind=kind), marks)


def auto_parallel(s: Schedule) -> Schedule:
    """Mark, in every loop nest, the outermost loop that carries no dependence.

    Reduction dependences count: a reduction loop is never made parallel
    here (use :func:`parallel` with ``reduction=True`` for that).
    """
    marks = set(s.marks)
    deps = s.deps.all(include_reductions=True)

    def visit(nests) -> None:
        for group, dim in nests:
            if s.carried(group, dim, deps).is_empty():
                for g in group:
                    name = s.table[g].names[dim]
                    if name:
                        marks.add((g, name, PARALLEL, False))
            else:  # look for one inside this loop
                visit(s.nests(group, dim + 1))

    visit(s.nests())
    return s.with_(marks=frozenset(marks), steps=s.steps + (Step.make("auto_parallel"),))
