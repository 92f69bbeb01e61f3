"""Dependence analysis with isl's dataflow engine.

For a :class:`~polytile.poly.scop.Scop` and a schedule, three memory-based
relations between statement instances (source -> sink, source first)::

    flow   (RAW)  { S[x] -> T[y] : S writes a cell that T later reads }
    anti   (WAR)  { S[x] -> T[y] : S reads a cell that T later writes }
    output (WAW)  { S[x] -> T[y] : S writes a cell that T later writes }

plus the value-based flow (only the *last* writer before each read).  Each is
one call to ``isl_union_access_info_compute_flow``.

**Reductions.**  A Tile aggregation is associative and commutative, so the
dependences of a reduction statement on its own output cell, e.g. for matmul

    { S0[i, j, k] -> S0[i, j, k'] : k' > k }

only force an order on additions that may be reordered.  They are collected
in ``reduction``; a schedule may reorder or parallelise those loops where the
target gives each thread a private accumulator (or an OpenMP reduction), and
must respect them everywhere else.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

import islpy as isl

from .isl_parts import maps_of
from .poly.scop import Scop


@dataclass(frozen=True, eq=False)
class Dependences:
    """The dependences of one Scop under one schedule (isl union maps)."""

    flow: isl.UnionMap
    anti: isl.UnionMap
    output: isl.UnionMap
    flow_value: isl.UnionMap
    reduction: isl.UnionMap

    def all(self, include_reductions: bool = True) -> isl.UnionMap:
        """Union of RAW, WAR and WAW; without reduction dependences if asked (computed once each)."""
        memo = self.__dict__.setdefault("_memo", {})
        key = ("all", include_reductions)
        if key not in memo:
            d = self.flow.union(self.anti).union(self.output)
            memo[key] = d if include_reductions else d.subtract(self.reduction)
        return memo[key]

    def among(self, relation: isl.UnionMap, statements) -> List[isl.Map]:
        """The maps of ``relation`` whose source and sink are both among ``statements``.

        ``relation`` is usually one of this object's (``flow``, ``reduction``, ``all(...)``): those
        are indexed by source statement once, so asking about one loop nest of a long program costs
        that nest alone.  Any other union map is scanned.

        >>> # deps.among(deps.reduction, ["S0"]) -> [{ S0[i, j, k] -> S0[i, j, k'] : k' > k }]
        """
        names = dict.fromkeys(statements)
        memo = self.__dict__.setdefault("_memo", {})
        own = [self.flow, self.anti, self.output, self.flow_value, self.reduction,
               *(v for k, v in memo.items() if k[0] == "all")]
        if any(relation is r for r in own):
            key = ("by-source", id(relation))
            if key not in memo:
                index: dict = {}
                for m in maps_of(relation):
                    index.setdefault(m.get_tuple_name(isl.dim_type.in_), []).append(m)
                memo[key] = (relation, index)  # the relation is kept so its id stays its own
            index = memo[key][1]
            maps = [m for n in names for m in index.get(n, ())]
        else:
            maps = [m for m in maps_of(relation) if m.get_tuple_name(isl.dim_type.in_) in names]
        return [m for m in maps if m.get_tuple_name(isl.dim_type.out) in names]

    def touching(self, statements, include_reductions: bool = True) -> isl.UnionMap:
        """The dependences of :meth:`all` whose source or sink is one of ``statements``.

        ``{ S[x] -> T[y] in all : S in statements or T in statements }``, from an index built once,
        so a schedule step that moved a few statements of a long program pays for those alone.

        >>> # deps.touching(["S3"]) -> { S2[i] -> S3[i]; S3[i] -> S4[i] } in a chain
        """
        memo = self.__dict__.setdefault("_memo", {})
        key = ("index", include_reductions)
        if key not in memo:
            index: dict = {}
            for m in maps_of(self.all(include_reductions)):
                for end in {m.get_tuple_name(isl.dim_type.in_), m.get_tuple_name(isl.dim_type.out)}:
                    index.setdefault(end, []).append(m)
            memo[key] = index
        index = memo[key]
        out = isl.UnionMap.empty(self.flow.get_space())
        seen: set = set()
        for n in statements:
            for m in index.get(n, ()):
                if id(m) not in seen:
                    seen.add(id(m))
                    out = out.union(isl.UnionMap.from_map(m))
        return out

    def describe(self) -> str:
        """isl text of every relation, one per line."""
        rows = [("flow (RAW, memory-based)", self.flow), ("flow (RAW, value-based)", self.flow_value),
                ("anti (WAR)", self.anti), ("output (WAW)", self.output), ("reduction", self.reduction)]
        return "\n".join(f"{name}:\n  {rel.coalesce()}" for name, rel in rows)


def _compute(sink: isl.UnionMap, must: Optional[isl.UnionMap], may: Optional[isl.UnionMap],
             schedule: isl.Schedule) -> isl.UnionFlow:
    ai = isl.UnionAccessInfo.from_sink(sink)
    if must is not None:
        ai = ai.set_must_source(must)
    if may is not None:
        ai = ai.set_may_source(may)
    return ai.set_schedule(schedule).compute_flow()


def compute(scop: Scop, schedule: Optional[isl.Schedule] = None) -> Dependences:
    """All dependences of ``scop`` under ``schedule`` (default: the original order).

    >>> # matmul C[i,j] += A[i,k]*B[k,j] after Z0: C[i,j] = 0 gives e.g.
    >>> #   flow:      { Z0[i, j] -> S1[i, j, 0]; S1[i, j, k] -> S1[i, j, k'] : k' > k }
    >>> #   reduction: { S1[i, j, k] -> S1[i, j, k'] : k' > k }
    """
    sched = schedule if schedule is not None else scop.schedule
    writes = scop.may_writes
    # Memory-based: with every write a *may* source nothing kills an earlier
    # write, so each conflicting earlier access is reported.
    flow = _compute(scop.reads, None, writes, sched).get_may_dependence()
    anti = _compute(writes, None, scop.reads, sched).get_may_dependence()
    output = _compute(writes, None, writes, sched).get_may_dependence()
    try:
        flow_value = _compute(scop.reads, scop.must_writes, None, sched).get_may_dependence()
    except isl.Error:
        # isl 0.2x fails inside compute_flow on some reads through integer division with must
        # sources ("affine expression involves some of the domain dimensions", campaign F9).
        # The value-based flow only guides the scheduler (proximity) and the display; the
        # memory-based flow contains it, so it stands in.
        flow_value = flow

    space = scop.domain.get_space()
    reduction = isl.UnionMap.empty(space)
    alldeps = flow.union(anti).union(output)
    for s in scop.statements:
        if not s.is_reduction:
            continue
        w = s.write_map()
        same_cell = isl.UnionMap.from_map(w.apply_range(w.reverse()))
        reduction = reduction.union(alldeps.intersect(same_cell))
    return Dependences(flow, anti, output, flow_value, reduction)
