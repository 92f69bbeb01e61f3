"""Array contraction: temporaries whose values never leave one loop iteration become scalars.

After producer-consumer fusion (matmul -> bias -> relu fused over ``i, j``)
an intermediate like ``C`` is written and read within a single ``(i, j)``
iteration.  A temporary ``T`` can live in a scalar declared inside loop
``d`` of a group of statements when

1. every statement that touches ``T`` is in the group (shares the loops up to ``d``);
2. no dependence through ``T`` crosses iterations of the loops up to ``d``:
   ``D_T ⊆ { a -> b : θ(a)[0..d] = θ(b)[0..d] }``;
3. one iteration touches one cell: ``θ[0..d]^-1 ; A_T`` is single-valued.

The array then needs no memory at all; the traffic saved is at least one
write and one read of the whole array.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Dict, List, Sequence, Tuple

import islpy as isl

from ..isl_parts import maps_of
from .core import Schedule
from .timespace import _project_range


def _accesses(s: Schedule, array: str) -> isl.UnionMap:
    acc = s.scop.reads.union(s.scop.may_writes)
    out = isl.UnionMap.empty(s.scop.domain.get_space())
    for m in maps_of(acc):
        if m.get_tuple_name(isl.dim_type.out) == array:
            out = out.union(isl.UnionMap.from_map(m))
    return out


@lru_cache(maxsize=256)
def levels(s: Schedule) -> Dict[str, Tuple[int, Tuple[str, ...]]]:
    """``{array: (dim, accessing statements)}`` for every contractible temporary (outermost level)."""
    out: Dict[str, Tuple[int, Tuple[str, ...]]] = {}
    deps = s.deps.all(include_reductions=True)
    for arr in s.scop.arrays:
        if arr.kind != "temp":
            continue
        acc = _accesses(s, arr.name)
        if acc.is_empty():
            continue
        users = sorted({m for m in _tuple_names(acc)})
        same_cell = acc.apply_range(acc.reverse())
        d_arr = deps.intersect(same_cell)
        theta = isl.UnionMap.empty(s.scop.domain.get_space())
        for u in users:
            theta = theta.union(isl.UnionMap.from_map(s.table[u].map))
        first = users[0]
        for dim in range(1, s.n_dims, 2):
            if not s.table[first].names[dim]:
                continue
            group = s.group(first, dim)
            if not set(users) <= set(group):
                break
            if any(not s.table[u].names[dim] for u in users):
                continue
            prefix = _project_range(theta, 0, dim + 1, s.n_dims)
            same = prefix.apply_range(prefix.reverse())
            if not d_arr.subtract(same).is_empty():
                continue
            cell_of = prefix.reverse().apply_range(acc)
            if cell_of.is_single_valued():
                out[arr.name] = (dim, tuple(users))
                break
    return out


def _tuple_names(um: isl.UnionMap) -> List[str]:
    return [m.get_tuple_name(isl.dim_type.in_) for m in maps_of(um)]


def contractible(s: Schedule, group: Sequence[str], dim: int) -> List[str]:
    """Temporaries to declare as scalars inside loop ``dim`` of ``group``."""
    return sorted(a for a, (d, users) in levels(s).items() if d == dim and set(users) <= set(group))


def contracted_bytes(s: Schedule) -> Dict[str, int]:
    """``{array: bytes}`` of the temporaries this schedule keeps out of memory."""
    sizes = {a.name: a.nbytes for a in s.scop.arrays}
    return {a: sizes[a] for a in levels(s)}


def traffic_saved(s: Schedule) -> int:
    """Lower bound of memory traffic avoided: each contracted array written once and read once."""
    return 2 * sum(contracted_bytes(s).values())
