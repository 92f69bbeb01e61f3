"""Which loops of a schedule tree are parallel, and marking them.

A band member ``m`` is parallel when no dependence is *carried* by it: every
dependence between two instances that agree on all outer schedule
dimensions (the node's prefix schedule and members ``0..m-1``) also agrees
on member ``m``.  In isl terms, with ``P`` the outer schedule and ``Sm`` the
member::

    D' = D  ∩  (P ; P^-1)                  -- dependences with equal outer time
    parallel  <=>  deltas(Sm^-1 ; D' ; Sm) ⊆ { [0] }

A parallel loop is marked in the tree with a ``mark`` node named
``"parallel"`` directly above a one-member band; the C backend turns it into
``#pragma omp parallel for``.
"""
from __future__ import annotations

from typing import Optional

import islpy as isl

PARALLEL = "parallel"


def _member_map(node: isl.ScheduleNode, first: int, count: int) -> isl.UnionMap:
    mupa = node.band_get_partial_schedule()
    n = node.band_n_member()
    mupa = mupa.drop_dims(isl.dim_type.set, first + count, n - first - count).drop_dims(isl.dim_type.set, 0, first)
    dom = node.get_domain()
    if count == 0:
        return isl.UnionMap.from_domain(dom)
    return isl.UnionMap.from_multi_union_pw_aff(mupa).intersect_domain(dom)


def member_carries(node: isl.ScheduleNode, member: int, deps: isl.UnionMap) -> isl.UnionMap:
    """The dependences (instance pairs) carried by band member ``member`` of ``node``."""
    dom = node.get_domain()
    d = deps.intersect_domain(dom).intersect_range(dom)
    if d.is_empty():
        return d
    outer = node.get_prefix_schedule_union_map().intersect_domain(dom)
    if member > 0:
        outer = outer.flat_range_product(_member_map(node, 0, member))
    same = outer.apply_range(outer.reverse())
    d = d.intersect(same)
    sm = _member_map(node, member, 1)
    moved = d.apply_domain(sm).apply_range(sm)
    # Pairs whose member value differs are carried; map back to instances.
    differ = moved.subtract(moved.domain().identity())
    if differ.is_empty():
        return differ
    return d.intersect(sm.apply_range(differ.apply_range(sm.reverse())))


def is_parallel(node: isl.ScheduleNode, member: int, deps: isl.UnionMap) -> bool:
    """True if band member ``member`` of ``node`` carries none of ``deps``."""
    return member_carries(node, member, deps).is_empty()


def first_parallel_member(node: isl.ScheduleNode, deps: isl.UnionMap) -> Optional[int]:
    for m in range(node.band_n_member()):
        if is_parallel(node, m, deps):
            return m
    return None


def isolate_member(node: isl.ScheduleNode, member: int) -> isl.ScheduleNode:
    """Split a band so that ``member`` is a band of its own; return that band."""
    if member > 0:
        node = node.band_split(member).child(0)
    if node.band_n_member() > 1:
        node = node.band_split(1)
    return node


def mark_outermost_parallel(schedule: isl.Schedule, deps: isl.UnionMap) -> isl.Schedule:
    """Mark, in every band not already inside a parallel loop, the outermost parallel member.

    >>> # matmul's band [i, j, k] with the reduction over k as a dependence:
    >>> # i is parallel, so the tree becomes  mark("parallel") -> band[i] -> band[j, k]
    """
    def visit(node: isl.ScheduleNode, inside: bool) -> isl.ScheduleNode:
        t = node.get_type()
        if t == isl.schedule_node_type.mark and node.mark_get_id().get_name() == PARALLEL:
            inside = True
        elif t == isl.schedule_node_type.band and not inside:
            m = first_parallel_member(node, deps)
            if m is not None:
                outer_split = m > 0
                node = isolate_member(node, m)
                node = node.insert_mark(isl.Id(PARALLEL))
                inside_node = visit(node.child(0), True)
                node = inside_node.parent()
                if outer_split:
                    node = node.parent()  # back to the outer band, the original position
                return node
        for i in range(node.n_children()):
            node = visit(node.child(i), inside).parent()
        return node

    return visit(schedule.get_root(), False).get_schedule()
