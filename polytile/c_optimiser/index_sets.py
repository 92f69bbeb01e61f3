"""Index-set splitting (Pluto's ``--iss``): a statement that rereads a cell it rewrites inside a loop, split there.

:func:`split_index_sets` returns the region's Scop with such statements cut
into the parts before, at and after the rewriting point; the pieces are
checked to partition the statement's domain (:func:`_is_partition`), so no
instance is lost or repeated.
"""
from __future__ import annotations

import dataclasses
from typing import List, Sequence, Tuple

import islpy as isl

from ..isl_parts import maps_of
from ..poly.scop import Scop


def _rename_in(m: isl.Map, name: str) -> isl.Map:
    return m.set_tuple_name(isl.dim_type.in_, name)


def _split_planes(st) -> List[Tuple[int, isl.PwAff]]:
    """``(iterator position, h)`` pairs: instances along that iterator read a cell the statement itself
    writes at ``iterator == h`` (floyd-warshall's ``path[i][k]``, rewritten at ``j == k``)."""
    dom = st.domain
    n = dom.dim(isl.dim_type.set)
    w = st.write_map()
    arr = w.get_tuple_name(isl.dim_type.out)
    reads: List[isl.BasicMap] = [b for m in maps_of(st.reads()) if m.get_tuple_name(isl.dim_type.out) == arr
                                 for b in m.get_basic_maps()]
    planes = []
    for x in range(n):
        for r in reads:
            r = isl.Map.from_basic_map(r)
            if r.gist_domain(dom).involves_dims(isl.dim_type.in_, x, 1) or not r.is_single_valued():
                continue
            same = isl.Map.identity(isl.Space.map_from_set(dom.get_space()))
            same = same.project_out(isl.dim_type.out, x, 1).insert_dims(isl.dim_type.out, x, 1)
            same = same.set_tuple_name(isl.dim_type.out, st.name).intersect_domain(dom).intersect_range(dom)
            writer = r.apply_range(w.reverse()).intersect(same)
            if writer.is_empty():
                continue
            pos = writer.project_out(isl.dim_type.out, x + 1, n - x - 1).project_out(isl.dim_type.out, 0, x)
            if not pos.is_single_valued():
                continue
            h = isl.PwMultiAff.from_map(pos).get_pw_aff(0).gist(dom)
            if h.involves_dims(isl.dim_type.in_, x, 1):
                continue
            if all(not (px == x and ph.is_equal(h)) for px, ph in planes):
                planes.append((x, h))
    return planes


def _is_partition(domain: isl.Set, pieces: Sequence[isl.Set]) -> bool:
    """``pieces`` cover ``domain`` exactly and are pairwise disjoint (every instance runs exactly once)."""
    union = isl.Set.empty(domain.get_space())
    for k, p in enumerate(pieces):
        if any(not p.intersect(q).is_empty() for q in pieces[k + 1:]):
            return False
        union = union.union(p)
    return union.is_equal(domain)


def split_index_sets(scop, notes: List[str]):
    """Index-set splitting (Pluto's ``--iss``): a statement that reads, along one of its loops, a cell it
    rewrites at one point of that loop (floyd-warshall's ``path[i][k]``, written at ``j == k``) is split
    into the parts before, at and after that point.  Each part then reads the cell as a loop invariant,
    so its loop carries no dependence (vector and parallel loops), while program order between the
    parts keeps every value the original computes.  None when no statement has such a plane."""
    stmts = []
    flat = scop.schedule.get_map()
    new_flat = isl.UnionMap.empty(flat.get_space())
    changed = False
    for st in scop.statements:
        planes = _split_planes(st) if st.c_text is not None and len(st.iters) >= 2 else []
        pieces = [st.domain]
        for x, h in planes:
            v = isl.PwAff.var_on_domain(isl.LocalSpace.from_space(st.domain.get_space()), isl.dim_type.set, x)
            # h is often defined on part of the domain only (floyd-warshall's plane j = k exists only
            # where k is a value of j; A[k][i] is rewritten at j = k only where i = k): the comparisons
            # cover that part, and the rest of the domain is a piece of its own -- without it, those
            # instances would silently disappear from the output.
            parts = [v.lt_set(h), v.eq_set(h), v.gt_set(h), st.domain.subtract(h.domain())]
            pieces = [p.intersect(q) for p in pieces for q in parts]
            pieces = [p for p in pieces if not p.is_empty()]
        if len(pieces) >= 2 and not _is_partition(st.domain, pieces):
            # Never emit a split that loses or repeats an instance; the unsplit statement is always right.
            notes.append(f"index sets of {st.name} not split: the pieces would not partition its domain")
            pieces = [st.domain]
        own = flat.intersect_domain(isl.UnionSet.from_set(st.domain))
        if len(pieces) < 2:
            stmts.append(st)
            new_flat = new_flat.union(own)
            continue
        changed = True
        maps = maps_of(own)
        for k, piece in enumerate(pieces):
            name = f"{st.name}_{k}"
            reads = isl.UnionMap.empty(st.reads().get_space())
            for m in maps_of(st.reads()):
                reads = reads.union(isl.UnionMap.from_map(_rename_in(m.intersect_domain(piece), name)))
            write = _rename_in(st.write_map().intersect_domain(piece), name)
            stmts.append(dataclasses.replace(st, name=name, domain=piece.set_tuple_name(name),
                                             reads_override=reads, write_override=write))
            new_flat = new_flat.union(isl.UnionMap.from_map(_rename_in(maps[0].intersect_domain(piece), name)))
        notes.append(f"index sets of {st.name} split at "
                     + ", ".join(f"{st.iters[x]} = {h}" for x, h in planes) + f" into {len(pieces)} statements")
    if not changed:
        return None
    domain = isl.UnionSet.empty(scop.domain.get_space())
    for st in stmts:
        domain = domain.union(isl.UnionSet.from_set(st.domain))
    sched = isl.Schedule.from_domain(domain).insert_partial_schedule(
        isl.MultiUnionPwAff.from_union_map(new_flat.intersect_domain(domain)))
    return Scop.build(scop.name, stmts, scop.arrays, context=scop.context, schedule=sched)
