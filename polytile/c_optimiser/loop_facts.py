"""What the C optimiser's passes ask about a schedule's loops: bands, time loops, strides, carried dependences.

Every pass (:mod:`.tiling`, :mod:`.marks`, :mod:`.strategy`) decides from
these: which statements share a band (:func:`_band`), which of its loops is a
time loop (:func:`_time_like`), whether a loop walks memory with unit stride
(:func:`_unit_stride`, :func:`unit_stride_dim`) and whether it can become a
vector loop (:func:`vectorisable`).
"""
from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

import islpy as isl

from ..errors import IllegalSchedule, ScheduleError
from ..isl_parts import maps_of
from ..scheduling import Schedule

#: Bytes per element assumed for footprints when an array's dtype is unknown.
_DEFAULT_ELEMENT = 8
#: Errors a schedule step may raise when it is refused (kept out of the output, never fatal).
_REFUSED = (IllegalSchedule, ScheduleError, isl.Error)


def _dim_aff(s: Schedule, stmt: str, dim: int) -> isl.PwAff:
    return isl.PwMultiAff.from_map(s.table[stmt].map).get_pw_aff(dim)


def _subscript_iters(s: Schedule, stmt: str) -> set:
    """Indices of ``stmt``'s iterators that appear in some array subscript."""
    st = s.scop.statement(stmt)
    used = set()
    maps: List[isl.Map] = [st.write_map(), *maps_of(st.reads())]
    n = st.domain.dim(isl.dim_type.set)
    for m in maps:
        m = m.gist_domain(st.domain)
        for k in range(n):
            if m.involves_dims(isl.dim_type.in_, k, 1):
                used.add(k)
    return used


def _time_like(s: Schedule, stmt: str, dim: int) -> bool:
    """Time dimension ``dim`` of ``stmt`` depends only on iterators no subscript uses (a time loop)."""
    aff = _dim_aff(s, stmt, dim).gist(s.scop.statement(stmt).domain)
    used = _subscript_iters(s, stmt)
    n = s.scop.statement(stmt).domain.dim(isl.dim_type.set)
    involved = [k for k in range(n) if aff.involves_dims(isl.dim_type.in_, k, 1)]
    return bool(involved) and not any(k in used for k in involved)


def _arrays_of(s: Schedule, stmts: Sequence[str]) -> Dict[str, Tuple[int, int]]:
    """Arrays touched by ``stmts``: element size in bytes and rank."""
    out: Dict[str, Tuple[int, int]] = {}
    for name in stmts:
        st = s.scop.statement(name)
        maps: List[isl.Map] = [st.write_map(), *maps_of(st.reads())]
        for m in maps:
            arr = m.get_tuple_name(isl.dim_type.out)
            if not arr or arr in out:
                continue
            try:
                import numpy as np

                out[arr] = (int(np.dtype(s.scop.array(arr).dtype).itemsize), m.dim(isl.dim_type.out))
            except Exception:
                out[arr] = (_DEFAULT_ELEMENT, m.dim(isl.dim_type.out))
    return out


def _groups(s: Schedule) -> List[Tuple[List[str], int]]:
    """Statement groups at their outermost shared loop: ``(statements, dim)`` (as auto_parallel visits them)."""
    return s.nests()


def _band(s: Schedule, group: List[str], dim: int) -> Tuple[str, List[str]]:
    """The representative statement of a group and the loops of its outermost band.

    The band is the run of loops from ``dim`` inwards that every statement
    of the group shares: the β position between two loops holds the same
    constant for all of them (a statement without a loop at a position just
    has a constant there).
    """
    rep = max(group, key=lambda g: (len([d for d, _ in s.table[g].loops() if d >= dim]), -group.index(g)))
    names = s.table[rep].names
    loops: List[str] = []
    d = dim
    while d < s.n_dims and names[d]:
        loops.append(names[d])
        beta = d + 1
        if beta >= s.n_dims:
            break
        vals = {s.constant(g, beta) for g in group}
        if len(vals) != 1 or None in vals:
            break
        d += 2
    return rep, loops


def _carried_any(s: Schedule, group: Sequence[str], dim: int) -> bool:
    return not s.carried(list(group), dim, s.deps.all(include_reductions=True)).is_empty()


def _unit_stride(s: Schedule, stmt: str, loop: str) -> bool:
    """Loop ``loop`` of ``stmt`` is one of its iterators and moves only the last subscript of every access."""
    st = s.scop.statement(stmt)
    if loop not in st.iters:
        return False
    k = list(st.iters).index(loop)
    maps: List[isl.Map] = [st.write_map(), *maps_of(st.reads())]
    for m in maps:
        n_out = m.dim(isl.dim_type.out)
        m = m.gist_domain(st.domain)
        for o in range(n_out - 1):
            mo = m.project_out(isl.dim_type.out, o + 1, n_out - o - 1).project_out(isl.dim_type.out, 0, o)
            if mo.involves_dims(isl.dim_type.in_, k, 1):
                return False
    return True

def unit_stride_dim(s: Schedule, stmt: str, dim: int) -> bool:
    """Does the next iteration of schedule dimension ``dim`` (outer dimensions fixed) move every
    access of ``stmt`` by at most one element of its last subscript only?

    Unlike :func:`_unit_stride` this works on skewed loops (``2t + j`` of a
    time-tiled stencil walks ``j`` when the outer loops fix ``t``).
    """
    st = s.scop.statement(stmt)
    theta = s.table[stmt].map
    n = theta.dim(isl.dim_type.out)
    step = isl.Map.universe(isl.Space.alloc(theta.get_ctx(), 0, n, n))
    for k in range(dim + 1):
        c = isl.Constraint.alloc_equality(step.get_space())
        c = c.set_coefficient_val(isl.dim_type.in_, k, 1).set_coefficient_val(isl.dim_type.out, k, -1)
        if k == dim:
            c = c.set_constant_val(1)
        step = step.add_constraint(c)
    step = step.align_params(theta.get_space())
    theta = theta.intersect_domain(st.domain)
    nxt = theta.apply_range(step).apply_range(theta.reverse())
    if nxt.is_empty():
        return True
    dom = nxt.domain()
    maps: List[isl.Map] = [st.write_map(), *maps_of(st.reads())]
    for m in maps:
        # (A statement's reads of one array arrive as one map: A[i][j-1], A[i][j+1] ... together,
        # so each subscript is compared as the set of values it takes, not as a function.)
        n_out = m.dim(isl.dim_type.out)
        for o in range(n_out):
            p = m.project_out(isl.dim_type.out, o + 1, n_out - o - 1).project_out(isl.dim_type.out, 0, o)
            p = p.reset_tuple_id(isl.dim_type.out)
            after = nxt.apply_range(p)
            here = p.intersect_domain(dom)
            if o < n_out - 1:
                if not after.is_equal(here):
                    return False
                continue
            near = isl.Map("{ [v] -> [w] : v - 1 <= w <= v + 1 }", context=p.get_ctx())
            near = near.align_params(p.get_space())
            if not after.is_subset(here.apply_range(near)):
                return False
    return True

def vectorisable(s: Schedule, stmt: str, dim: int) -> bool:
    """Loop ``dim`` moves ``stmt``'s accesses with unit stride and does not feed ``stmt`` into itself
    (a recurrence or an in-order reduction such as ``A[i][j] -= A[i][k] * A[j][k]`` along ``k``)."""
    if not unit_stride_dim(s, stmt, dim):
        return False
    carried = s.carried([stmt], dim, s.deps.all(include_reductions=True))
    if carried.is_empty():
        return True
    # With reassociation a reduction vectorises with partial sums per lane, if nothing
    # else sharing the loop depends on it across iterations (vectorize's check).
    if not (carried.subtract(s.deps.reduction).is_empty() and s.scop.statement(stmt).is_reduction):
        return False
    group = s.group(stmt, dim)
    return (s.carried(group, dim, s.deps.all(include_reductions=False)).is_empty()
            and not s.simd_reduction_blocker(group, dim))


def tile_loop_name(s: Schedule, rep: str, point: str) -> str:
    """The tile loop just created for point loop ``point`` (``i_t``, or ``i_t1`` when ``i_t`` existed)."""
    names = [n for _, n in s.table[rep].loops()]
    point_at = names.index(point)
    cands = [n for n in names[:point_at] if n.startswith(point + "_t")]
    return cands[-1] if cands else names[0]

