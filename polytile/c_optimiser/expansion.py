"""Scalar expansion: a region scalar that every iteration writes before reading becomes a small array.

A C temporary such as ludcmp's ``w`` (``w = A[i][j]; for k: w -= ...; A[i][j] = w;``)
is one memory cell, so its anti and output dependences tie every ``j``
iteration to the next although no value flows between them.  Renamed into
``w_x[j]``, each ``j`` iteration has its own cell, and isl's scheduler may
move the ``k`` loop outside ``j`` (unit stride, vectorisable) while each
``A[i][j]`` still sees the same operations in the same order.

:func:`expand_scalars` is a pure transform of a Scop.  A scalar's statements
split into *webs*: the groups that exact (value-based) dataflow on the scalar
connects.  A web is expanded along the loop positions ``p`` where

* every value flowing through the scalar stays in one iteration of ``p``
  (source and sink share the iterator) -- so renaming it to ``s_x[.., x_p, ..]``
  gives every read the value of the same write as before;
* no read of the web takes the value the scalar had before the region;
* the loop at ``p`` is not already ordered by the web's other dependences
  (expanding along a loop that stays sequential only costs memory).

Statements outside the web keep the scalar.  If the function may read the
scalar after the region (:attr:`CScop.dead_after` does not list it) and a
web holds the region's last write, the last value is copied back after the
generated code, exactly.  Whether expansion pays is decided by the
optimiser's competition of versions (:func:`.strategy._scop_options`).
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import islpy as isl

from ..codegen.c import REGION_PRELUDE
from ..codegen.c_expr import ctype
from ..errors import InternalError
from ..isl_parts import maps_of, sets_of
from ..poly import body as B
from ..poly.scop import Array, Scop, Statement

#: An expansion whose every extent is a constant may have several dimensions up to this many cells;
#: otherwise only one dimension may have a run-time extent (a VLA on the stack: a loop's trip count).
MAX_FIXED_CELLS = 1 << 18


@dataclass(frozen=True)
class Expansion:
    """A Scop with some scalars expanded, and the C the region's code needs around it.

    ``before``: declarations of the new arrays (after the AST macros, which their extents may use);
    ``after``: the copy of a live-out scalar's final value back into it ('' when none is needed).
    """

    scop: Scop
    before: str
    after: str
    notes: Tuple[str, ...]

    def wrap(self, code: str) -> str:
        """``code`` (generated for :attr:`scop`) with the declarations after its AST macros and the
        copy-back after it.

        >>> Expansion(None, "double w_x[n]; ", "w = w_x[0];", ()).wrap("{ }")[len(REGION_PRELUDE):]
        'double w_x[n]; { }\\nw = w_x[0];'
        """
        rest = code[len(REGION_PRELUDE):] if code.startswith(REGION_PRELUDE) else code
        return REGION_PRELUDE + self.before + rest.rstrip("\n") + "\n" + self.after


@dataclass(frozen=True)
class _Web:
    scalar: str
    stmts: Tuple[str, ...]
    dims: Tuple[int, ...]  # expanded iterator positions


def _ident(name: str) -> re.Pattern:
    return re.compile(r"(?<![\w.>])" + re.escape(name) + r"(?!\w)")


def _scalar_maps(um: isl.UnionMap, scalar: str) -> isl.UnionMap:
    """The part of ``um`` whose range is the 0-d array ``scalar``."""
    out = isl.UnionMap.empty(um.get_space())
    for m in maps_of(um):
        if m.get_tuple_name(isl.dim_type.out) == scalar:
            out = out.union(isl.UnionMap.from_map(m))
    return out


def _webs(scop: Scop, scalar: str, flow: List[isl.Map]) -> List[List[str]]:
    """The statements touching ``scalar``, grouped by the value-based flow between them (union-find)."""
    touching = [st.name for st in scop.statements
                if any(m.get_tuple_name(isl.dim_type.out) == scalar for m in maps_of(st.reads()))
                or st.write_map().get_tuple_name(isl.dim_type.out) == scalar]
    parent = {n: n for n in touching}

    def find(n):
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n
    for m in flow:
        a, b = find(m.get_tuple_name(isl.dim_type.in_)), find(m.get_tuple_name(isl.dim_type.out))
        parent[a] = b
    groups: Dict[str, List[str]] = {}
    for n in touching:
        groups.setdefault(find(n), []).append(n)
    return list(groups.values())


def _time_conflicts(scop: Scop, scalar_flow: isl.UnionMap) -> List[isl.Map]:
    """The pairs of schedule points (original order) whose instances must stay ordered whatever the
    region's scalars become: they touch a cell of a true array, one writing it, or a value flows
    between them through a scalar (its anti and output dependences are what expansion removes)."""
    scalars = {a.name for a in scop.arrays if not a.shape}

    def arrays_only(um: isl.UnionMap) -> isl.UnionMap:
        out = isl.UnionMap.empty(um.get_space())
        for m in maps_of(um):
            if m.get_tuple_name(isl.dim_type.out) not in scalars:
                out = out.union(isl.UnionMap.from_map(m))
        return out
    reads, writes = arrays_only(scop.reads), arrays_only(scop.must_writes)
    conflicts = writes.apply_range(writes.reverse()).union(writes.apply_range(reads.reverse())).union(scalar_flow)
    sched = scop.schedule.get_map()
    return maps_of(conflicts.apply_domain(sched).apply_range(sched))


def _schedule_dim(scop: Scop, web: Sequence[str], p: int) -> Optional[int]:
    """The dimension of the original schedule that iterator ``p`` of every statement of the web is
    (None if they differ: not one loop)."""
    dims = set()
    for m in maps_of(scop.schedule.get_map()):
        if m.get_tuple_name(isl.dim_type.in_) not in web:
            continue
        ds = [d for d in range(m.dim(isl.dim_type.out)) if _equal(m, p, d)]
        if not ds:
            return None
        dims.add(ds[0])
    return dims.pop() if len(dims) == 1 else None


def _equal(m: isl.Map, p: int, d: int) -> bool:
    return m.equate(isl.dim_type.in_, p, isl.dim_type.out, d).is_equal(m)


def _carried(scop: Scop, web: Sequence[str], conflicts: List[isl.Map], d: int) -> bool:
    """Whether the original schedule's loop at dimension ``d`` around the web orders some of ``conflicts``
    (pairs in the same iteration of the loops outside it, different ones of it)."""
    sched = scop.schedule.get_map()
    times = None
    for n in web:
        t = isl.UnionSet.from_set(scop.statement(n).domain).apply(sched)
        for piece in sets_of(t):
            pre = piece.project_out(isl.dim_type.set, d, piece.dim(isl.dim_type.set) - d)
            times = pre if times is None else times.union(pre)
    for m in conflicts:
        width = m.dim(isl.dim_type.in_)
        if width <= d or m.dim(isl.dim_type.out) <= d:
            continue
        m = m.intersect_domain(times.add_dims(isl.dim_type.set, width - d).align_params(m.get_space()))
        for q in range(d):
            m = m.equate(isl.dim_type.in_, q, isl.dim_type.out, q)
        if not m.subtract(m.equate(isl.dim_type.in_, d, isl.dim_type.out, d)).is_empty():
            return True
    return False


def _web_dims(scop: Scop, web: Sequence[str], flow: List[isl.Map], conflicts: List[isl.Map]) -> Tuple[int, ...]:
    """Iterator positions the web may be expanded along: values stay in one iteration, and the loop is
    not ordered by anything but the scalars' false dependences."""
    depth = min(len(scop.statement(n).iters) for n in web)
    inside = [m for m in flow if m.get_tuple_name(isl.dim_type.in_) in web]
    out = []
    for p in range(depth):
        if not all(_equal(m, p, p) for m in inside):
            continue
        d = _schedule_dim(scop, web, p)
        if d is not None and not _carried(scop, web, conflicts, d):
            out.append(p)
    return tuple(out)


def _values(scop: Scop, web: Sequence[str], p: int) -> isl.Set:
    """The values iterator ``p`` takes over the web's statements (a 1-d parametric set)."""
    out = None
    for n in web:
        d = scop.statement(n).domain
        k = d.dim(isl.dim_type.set)
        v = d.project_out(isl.dim_type.set, p + 1, k - p - 1).project_out(isl.dim_type.set, 0, p).reset_tuple_id()
        out = v if out is None else out.union(v)
    return out.coalesce()


def _extent(scop: Scop, vals: isl.Set) -> Optional[isl.PwAff]:
    """``max + 1`` of ``vals`` (1 where it is empty), or None if it may be negative (no offset is kept)."""
    if not vals.is_subset(isl.Set("{ [x] : x >= 0 }", context=vals.get_ctx()).align_params(vals.get_space())):
        return None
    size = vals.dim_max(0).add_constant_val(isl.Val.one(vals.get_ctx()))
    one = isl.PwAff.from_aff(isl.Aff.zero_on_domain(isl.LocalSpace.from_space(scop.context.get_space())))
    one = one.add_constant_val(isl.Val.one(vals.get_ctx())).intersect_domain(scop.context)
    return size.union_max(one)


def _constant(pa: isl.PwAff) -> Optional[int]:
    if pa.n_piece() == 1 and pa.is_cst():
        # One constant piece: its maximum is the constant (no Python callback inside isl, which
        # would have to run under deadline.interrupts_after to keep Ctrl-C from tearing through it).
        return int(pa.max_val().to_python())
    return None


def _fresh(name: str, taken) -> str:
    cand, k = f"{name}_x", 0
    while cand in taken:
        k += 1
        cand = f"{name}_x{k}"
    return cand


def _rename(st: Statement, scalar: str, new: str, dims: Tuple[int, ...]) -> Statement:
    """``st`` with every access to ``scalar`` going to ``new[iters at dims]`` (its C text too)."""
    idx = [st.iters[p] for p in dims]
    target = f"{new}[{', '.join(idx)}]"
    pat = _ident(scalar)
    cell = new + "".join(f"[{i}]" for i in idx)

    def retarget(m: isl.Map) -> isl.Map:
        if m.get_tuple_name(isl.dim_type.out) != scalar:
            return m
        hdr = m.get_space().params()
        acc = isl.Map(f"{{ {st.name}[{', '.join(st.iters)}] -> {target} }}", context=m.get_ctx())
        return acc.align_params(hdr).intersect_domain(m.domain())
    reads = isl.UnionMap.empty(st.reads_override.get_space())
    for m in maps_of(st.reads_override):
        reads = reads.union(isl.UnionMap.from_map(retarget(m)))
    write = retarget(st.write_override)
    body = st.body
    if body.array == scalar:
        body = dataclasses.replace(body, array=new, index=tuple(B.Iter(i) for i in idx))
    update = None if st.c_update is None else tuple(pat.sub(cell, t) for t in st.c_update)
    return dataclasses.replace(st, body=body, c_text=pat.sub(cell, st.c_text), c_update=update,
                               reads_override=reads, write_override=write)


def _copy_back(scop: Scop, scalar: str, web: _Web, new: str, build: isl.AstBuild) -> Optional[str]:
    """C putting the web's last value of ``scalar`` back into it when the web holds the region's last
    write ('' if it never does); None when that cannot be said exactly."""
    sched = scop.schedule.get_map()
    writes = _scalar_maps(scop.must_writes, scalar).domain()
    times = writes.apply(sched)
    if times.is_empty():
        return ""
    tspace = sets_of(times)
    if len(tspace) != 1:
        return None  # schedule points in several spaces: the last one cannot be compared
    last_t = tspace[0].lexmax()
    inst = sched.intersect_range(isl.UnionSet.from_set(last_t)).domain().intersect(writes)
    cells = None
    for n in web.stmts:
        st = scop.statement(n)
        part = inst.extract_set(st.domain.get_space())
        if part.is_empty():
            continue
        idx = [st.iters[p] for p in web.dims]
        f = isl.Map(f"{{ {st.name}[{', '.join(st.iters)}] -> [{', '.join(idx)}] }}", context=part.get_ctx())
        c = part.apply(f.align_params(part.get_space()))
        cells = c if cells is None else cells.union(c)
    if cells is None:
        return ""
    where = cells.params()
    pma = cells.lexmax_pw_multi_aff()
    subs = "".join(f"[{build.expr_from_pw_aff(pma.get_pw_aff(d).gist_params(where)).to_C_str()}]"
                   for d in range(len(web.dims)))
    assign = f"{scalar} = {new}{subs};"
    if where.is_equal(scop.context) or scop.context.is_subset(where):
        return assign
    return f"if ({build.expr_from_set(where).to_C_str()}) {assign}"


def expand_scalars(scop: Scop, scalars: Sequence[str], dead_after: Sequence[str] = (),
                   taken=frozenset(), types: Optional[Mapping[str, str]] = None) -> Optional[Expansion]:
    """``scop`` with the webs of ``scalars`` that can and may usefully be expanded, or None when none.

    ``dead_after``: the scalars whose final value no one reads (no copy-back);
    ``taken``: identifiers the new arrays' names must avoid; ``types``: the C type of each scalar as
    declared (default: from its dtype; a scalar of neither is not expanded).

    >>> # ludcmp: S3[i, j]: w = A[i][j]; S4[i, j, k]: w -= A[i][k] * A[k][j]; S5[i, j]: A[i][j] = w;
    >>> # expand_scalars(scop, ["w"], ["w"]).scop: w_x[j] in S3..S5, ``double w_x[n];`` in ``before``
    """
    build = isl.AstBuild.from_context(scop.context)
    taken = set(taken) | {a.name for a in scop.arrays}
    stmts = {st.name: st for st in scop.statements}
    arrays = list(scop.arrays)
    decls, after, notes = [], [], []
    flows = {}
    all_flow = isl.UnionMap.empty(scop.reads.get_space())
    zero_d = {a.name for a in scop.arrays if not a.shape}
    for scalar in scalars:
        if scalar not in zero_d:
            continue
        reads, writes = _scalar_maps(scop.reads, scalar), _scalar_maps(scop.must_writes, scalar)
        if reads.is_empty() or writes.is_empty():
            continue
        try:
            info = isl.UnionAccessInfo.from_sink(reads).set_must_source(writes).set_schedule(scop.schedule).compute_flow()
        except isl.Error:
            # isl 0.2x fails inside compute_flow with must sources on some domains with strides ("affine
            # expression involves some of the domain dimensions"; polytile.deps works around it the same
            # way): without the exact dataflow the scalar is not expanded.
            notes.append(f"{scalar} not expanded: isl could not compute its exact dataflow")
            continue
        flows[scalar] = (maps_of(info.get_must_dependence()), info.get_may_no_source().domain())
        all_flow = all_flow.union(info.get_must_dependence())
    conflicts = _time_conflicts(scop, all_flow) if flows else []
    for scalar, (flow, live_in) in flows.items():
        arr = scop.array(scalar)
        ctext = (types or {}).get(scalar) or _ctype(arr.dtype)
        if ctext is None:
            continue
        for group in _webs(scop, scalar, flow):
            if any(not live_in.extract_set(stmts[n].domain.get_space()).is_empty() for n in group):
                continue  # a read takes the value from before the region
            dims = _web_dims(scop, group, flow, conflicts)
            if not dims:
                continue
            extents = [_extent(scop, _values(scop, group, p)) for p in dims]
            keep = [(p, e) for p, e in zip(dims, extents) if e is not None]
            fixed = [_constant(e) for _, e in keep]
            if len(keep) > 1 and (None in fixed or _product(fixed) > MAX_FIXED_CELLS):
                keep = keep[-1:]  # one run-time extent at most: the innermost loop it frees
            if not keep or (len(keep) == 1 and fixed[-1] is not None and fixed[-1] > MAX_FIXED_CELLS):
                continue
            web = _Web(scalar, tuple(group), tuple(p for p, _ in keep))
            new = _fresh(scalar, taken)
            back = "" if scalar in dead_after else _copy_back(scop, scalar, web, new, build)
            if back is None:
                continue
            taken.add(new)
            sizes = [build.expr_from_pw_aff(e.coalesce()).to_C_str() for _, e in keep]
            decls.append(f"{ctext} {new}{''.join(f'[{s}]' for s in sizes)};")
            if back:
                after.append(back)
            for n in group:
                stmts[n] = _rename(stmts[n], scalar, new, web.dims)
            shape = tuple(_constant(e) if _constant(e) is not None else -1 for _, e in keep)
            arrays.append(Array(new, new, shape, arr.dtype, "temp"))
            its = [scop.statement(group[0]).iters[p] for p in web.dims]
            notes.append(f"{scalar} expanded along {', '.join(its)} into {new} in {', '.join(group)}"
                         + (" (its last value copied back)" if back else ""))
    if not decls:
        return None
    new_scop = Scop.build(scop.name, [stmts[st.name] for st in scop.statements], arrays,
                          context=scop.context, schedule=scop.schedule)
    before = "\n".join(decls) + "\n"
    return Expansion(new_scop, before, "\n".join(after) + ("\n" if after else ""), tuple(notes))


def _ctype(dtype: str) -> Optional[str]:
    try:
        return ctype(dtype)
    except InternalError:
        return None


def _product(xs) -> int:
    out = 1
    for x in xs:
        out *= x
    return out
