"""isl helpers on time vectors ``[t0, ..., t(n-1)]`` shared by the schedule modules."""
from __future__ import annotations

import functools

import islpy as isl


def _project_range(um: isl.UnionMap, first: int, count: int, n: int) -> isl.UnionMap:
    """``um`` followed by ``{ [t0, ..., t(n-1)] -> [t_first, ..., t_(first+count-1)] }``."""
    return um.apply_range(_projection(first, count, n))


@functools.lru_cache(maxsize=256)
def _projection(first: int, count: int, n: int) -> isl.UnionMap:
    # Parsed once per shape: isl objects are immutable values, and every Scop uses the default context.
    names = [f"t{d}" for d in range(n)]
    return isl.UnionMap(f"{{ [{', '.join(names)}] -> [{', '.join(names[first:first + count])}] }}")
