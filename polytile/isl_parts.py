"""The maps of an isl union map and the sets of a union set, as Python lists.

isl's ``foreach_map``/``foreach_set`` call back into Python for each part.  A
Ctrl-C that arrives while such a callback runs raises KeyboardInterrupt
inside it: the exception then unwinds through isl's C code, islpy prints
its traceback, and the isl call fails with an ``isl.Error`` that reads
like an internal error.  Reading the parts as a list (``get_map_list``)
runs no Python code inside isl, so an interrupt lands in Python and is
reported as one.  Walks that do need a callback (schedule-tree and AST
visitors, ``foreach_point``) run under :func:`polytile.deadline.interrupts_after`.

    >>> import islpy as isl
    >>> [str(m) for m in maps_of(isl.UnionMap("{ A[i] -> B[i]; C[j] -> D[j] }"))]
    ['{ A[i] -> B[i] }', '{ C[j] -> D[j] }']
"""
from __future__ import annotations

from typing import List

import islpy as isl


def maps_of(um: isl.UnionMap) -> List[isl.Map]:
    """The maps of ``um``, one per space, in isl's order (what ``foreach_map`` visits)."""
    parts = um.get_map_list()
    return [parts.get_at(k) for k in range(parts.n_map())]


def sets_of(us: isl.UnionSet) -> List[isl.Set]:
    """The sets of ``us``, one per space, in isl's order (what ``foreach_set`` visits).

    >>> [str(s) for s in sets_of(isl.UnionSet("{ A[i] : 0 <= i < 4 }"))]
    ['{ A[i] : 0 <= i <= 3 }']
    """
    parts = us.get_set_list()
    return [parts.get_at(k) for k in range(parts.n_set())]
