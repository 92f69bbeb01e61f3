"""The parallel and simd marks of a region's schedule, and the innermost-loop shaping that lets simd loops vectorise.

:func:`parallelise` marks the outermost parallel loops (a wavefront over the
tile loops of a band none of whose tile loops is parallel);
:func:`vector_order` orders the statements of a shared innermost loop so the
dependences it carries run forward, :func:`distribute_innermost` gives each
its own innermost loop where legal, and :func:`vectorise` marks the innermost
unit-stride loops that carry no dependence ``simd``.
"""
from __future__ import annotations

import itertools
from typing import Any, Dict, List, Sequence, Tuple

import islpy as isl

from ..errors import ScheduleError
from ..scheduling import PARALLEL, SIMD, Schedule, auto_parallel
from ..scheduling import distribute as distribute_step
from ..scheduling import fuse as fuse_step
from ..scheduling import skew as skew_step
from ..scheduling import reorder as reorder_step
from ..scheduling import vectorize as vectorize_step
from .loop_facts import _REFUSED, _carried_any, _unit_stride, vectorisable


def parallelise(s: Schedule, tiled: Sequence[Tuple[List[str], str, List[str]]], notes: List[str],
                wavefront: bool = True) -> Schedule:
    """Outermost parallel loops; a wavefront over tile loops when no tile loop is parallel."""
    for group, rep, tile_loops in (tiled if wavefront else ()):
        if len(tile_loops) < 2:
            continue
        dims = [s.loop_dim(rep, l) for l in tile_loops]
        members = s.group(rep, dims[0])
        if not _carried_any(s, members, dims[0]):
            continue  # the outer tile loop is parallel already
        if not _carried_any(s, members, dims[1]):
            continue  # carried outside, free inside: auto_parallel finds it
        try:
            w = skew_step(s, rep, tile_loops[0], by=tile_loops[1])
            if _carried_any(w, w.group(rep, dims[1]), dims[1]):
                raise ScheduleError("the wavefront leaves the second tile loop sequential")
            s = w
            notes.append(f"wavefront: {tile_loops[0]} += {tile_loops[1]} so {tile_loops[1]} runs in parallel")
        except _REFUSED as e:
            notes.append(f"no wavefront for {rep}: {str(e).splitlines()[0]}")
    s = auto_parallel(s)
    return s.check("parallel marks")


def unit_stride_innermost(s: Schedule, notes: List[str]) -> Schedule:
    """Give each statement of the deepest nests an innermost loop it can vectorise, where a loop permutation
    that keeps every dependence (the in-order reductions included) can.

    For a statement whose innermost loop is strided or carries it into itself, the loops inside it are
    tried innermost-first: the first ``L`` that, moved innermost (``reorder``, legality-checked), walks
    the statement's arrays with unit stride and carries no dependence of it wins.  Each reduction cell
    still accumulates in the original order, so results stay bitwise.

    Before: ``for p: for s: sum[p] += A[r][q][s] * C4[s][p]``  (``s`` innermost: strided ``C4``, a chain)
    After:  ``for s: for p: sum[p] += A[r][q][s] * C4[s][p]``  (``p`` innermost: unit stride, independent)
    """
    for name, ss in s.stmts:
        loops = ss.loops()
        if len(loops) < 2 or len(loops) < max(len(x.loops()) for _, x in s.stmts):
            continue
        inner_dim, _ = loops[-1]
        if vectorisable(s, name, inner_dim):
            continue
        for k in range(len(loops) - 2, -1, -1):
            moved = loops[k][1]
            order = [n for _, n in loops[k:] if n != moved] + [moved]
            try:
                t = reorder_step(s, name, order).check("unit-stride innermost loop")
            except _REFUSED:
                continue
            t_loops = t.table[name].loops()
            if t_loops and vectorisable(t, name, t_loops[-1][0]):
                notes.append(f"loop {moved} of {name} moved innermost: unit stride, no dependence carried")
                s = t
                break
    return s


def _innermost_groups(s: Schedule) -> List[Tuple[List[str], int]]:
    """Statements that share one innermost loop (same loops, same enclosing βs), with that loop's dim."""
    seen: Dict[Tuple[Any, ...], List[str]] = {}
    for name, ss in s.stmts:
        loops = ss.loops()
        if not loops:
            continue
        d = loops[-1][0]
        key = (d,) + tuple(s.constant(name, b) for b in range(0, d, 2)) + tuple(x for x, _ in loops)
        seen.setdefault(key, []).append(name)
    return [(g, key[0]) for key, g in seen.items() if len(g) > 1]


def _backward_carried(s: Schedule, order: Sequence[str], dim: int, deps: isl.UnionMap) -> int:
    """Dependences carried by loop ``dim`` whose source statement comes after its sink in ``order``.

    A vectorised loop runs each statement for a whole vector of iterations
    before the next statement, so a value a later statement of iteration
    ``c`` produces for an earlier statement of iteration ``c + 1`` arrives
    too late: such a loop is not vectorisable (GCC reports it and keeps the
    loop scalar).  Counts offending statement pairs.
    """
    pos = {g: k for k, g in enumerate(order)}
    car = s.carried(list(order), dim, deps)
    bad = 0
    for a in order:
        for b in order:
            if a == b or pos[a] <= pos[b]:
                continue
            sa = s.scop.statement(a).domain.get_space()
            sb = s.scop.statement(b).domain.get_space()
            pair = isl.UnionMap.from_map(isl.Map.universe(isl.Space.map_from_domain_and_range(sa, sb)))
            if not car.intersect(pair).is_empty():
                bad += 1
    return bad


def vector_order(s: Schedule, notes: List[str], max_stmts: int = 5) -> Schedule:
    """Order the statements of every shared innermost loop so that the dependences it carries run forward.

    isl's scheduler fixes the order of fused statements in a loop body only
    by legality; for a fused stencil (jacobi-2d's two sweeps, shifted by one)
    it may put the consumer of the previous iteration's value first, which
    keeps GCC from vectorising the loop.  Each legal permutation with fewer
    backward carried dependences is realised with ``fuse`` steps (which
    re-check legality); the original order is kept when no permutation helps.
    """
    deps = s.deps.all(include_reductions=True)
    for group, d in _innermost_groups(s):
        if len(group) > max_stmts:
            continue
        betas = [s.constant(g, d + 1) if d + 1 < s.n_dims else None for g in group]
        order = [g for _, g in sorted(zip([b or 0 for b in betas], group), key=lambda x: x[0])]
        # Statements at one β are ordered only by isl's code generator (their instances never
        # share a time stamp and a dependence), which may pick the order that does not vectorise.
        tied = None in betas or len(set(betas)) < len(betas)
        best = _backward_carried(s, order, d, deps)
        if best == 0 and not tied:
            continue
        depth = len(s.table[order[0]].loops())
        for perm in itertools.permutations(order):
            n_bad = _backward_carried(s, perm, d, deps)
            if n_bad > best or (n_bad == best and (list(perm) != order or not tied)):
                continue
            try:
                cur = s
                for x in perm[1:]:
                    cur = fuse_step(cur, perm[0], x, depth)
            except _REFUSED:
                continue
            notes.append(f"innermost body of {', '.join(order)} ordered {', '.join(perm)} "
                         "(carried dependences forward, so the loop vectorises)")
            s, best = cur, n_bad
            break
    return s


def distribute_innermost(s: Schedule, notes: List[str]) -> Schedule:
    """Give every statement of a shared innermost loop its own innermost loop, where that is legal.

    Fused statements that write rows other statements of the same loop read
    (a stencil's sweeps after skewing) defeat GCC's vectoriser: it cannot
    relate rows of a variable-length array, versions the loop with run-time
    overlap checks, and those checks fail on neighbouring rows, so the scalar
    copy runs.  One statement per innermost loop keeps the outer fusion (the
    rows are still in L1 for the next statement) and gives GCC loops whose
    checks pass.  Each ``distribute`` step is legality-checked; a statement
    whose distribution is refused stays fused (``vector_order`` then orders it).
    """
    for group, d in _innermost_groups(s):
        betas = [s.constant(g, d + 1) if d + 1 < s.n_dims else None for g in group]
        order = [g for _, g in sorted(zip([b or 0 for b in betas], group), key=lambda x: x[0])]
        depth = len(s.table[order[0]].loops()) - 1
        for g in order[1:]:
            try:
                s = distribute_step(s, g, depth)
            except _REFUSED as e:
                notes.append(f"innermost loop of {g} stays fused: {str(e).splitlines()[0][:100]}")
                continue
            notes.append(f"innermost loop of {g} distributed from {order[0]} (one statement per vector loop)")
    return s


def vectorise(s: Schedule, notes: List[str]) -> Schedule:
    """``simd`` on each statement's innermost loop where it is unit-stride and carries no dependence."""
    for name, ss in s.stmts:
        loops = ss.loops()
        if not loops:
            continue
        d, loop = loops[-1]
        if any(m[0] == name and m[1] == loop and m[2] in (PARALLEL, SIMD) for m in s.marks):
            continue
        if not _unit_stride(s, name, loop):
            continue
        if any(s.table[g].names[d] and s.table[g].loops()[-1][0] != d for g in s.group(name, d)):
            continue  # another statement has loops inside it: not an innermost loop
        try:
            s = vectorize_step(s, name, loop)
            notes.append(f"simd on {name} loop {loop}")
            continue
        except _REFUSED:
            pass
        if s.scop.statement(name).is_reduction:  # only with reassociation (extract(..., reassociate=True))
            try:
                s = vectorize_step(s, name, loop, reduction=True)
                notes.append(f"simd reduction on {name} loop {loop} (reassociated)")
            except _REFUSED:
                pass
    return s
