"""Interleaved chains: several independent recurrences advanced side by side.

A statement whose innermost loop carries its own value into the next
iteration (adi's ``p[i][j] = -c / (a * p[i][j-1] + b)`` along ``j``) runs one
dependent chain: every iteration waits for the previous one's divide, so
the loop runs at the divide's latency, not its throughput.  When an
enclosing point loop ``i`` (not a tile loop) carries no dependence of the
statements it holds, its iterations are independent chains; strip-mining ``i`` by ``B`` and moving
the point loop innermost advances ``B`` chains per step of ``j``::

    before:  for i: { for j: p[i][j] = f(p[i][j-1]) }
    after:   for i_t: { for j: for i in [B i_t, B i_t + B): p[i][j] = f(p[i][j-1]) }

The out-of-order core overlaps the ``B`` chains (or the compiler vectorises
across them), and the ``B`` rows each chain walks stay in L1 across ``j``.
Each cell is computed in the same order as before (only iterations of
different ``i`` trade places), so the output stays bitwise identical; every
step is legality-checked, and a refused one leaves the nest as it was.

``B`` is :meth:`CMachine.line` across rows (:data:`FMA_CHAINS` chains), the
same count the row register blocks use for reduction chains (atax's
``tmp[i] += A[i][j] * x[j]``), which keep their running values in variables
and are left to :mod:`.register_blocks`.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

import islpy as isl

from ..scheduling import PARALLEL, Schedule
from ..scheduling import reorder as reorder_step
from ..scheduling import tile as tile_step
from ..scheduling.marks import RegTile
from .loop_facts import _DEFAULT_ELEMENT, _REFUSED, _carried_any, _dim_aff, vectorisable
from .machine import CMachine


def chain_loops(s: Schedule, name: str) -> Optional[Tuple[str, str]]:
    """``(P, L)`` when statement ``name``'s innermost loop ``L`` carries its own value (a chain) and ``P``,
    the nearest loop around it that carries no dependence of the statements it holds, could run chains
    side by side; None otherwise (a vector loop, a register block, no independent loop around).

    >>> # adi: p[i][j] = -c / (a * p[i][j-1] + b) in loops t, i, j  -> ("i", "j")
    >>> # gemm's C[i][j] += A[i][k] * B[k][j] with k innermost          -> None when it has a register block
    """
    loops = s.table[name].loops()
    if len(loops) < 2:
        return None
    d_last, last = loops[-1]
    if any(m[0] == name and m[2] == RegTile.keyword for m in s.marks):
        return None
    if vectorisable(s, name, d_last):
        return None
    if s.carried([name], d_last, s.deps.all(include_reductions=True)).is_empty():
        return None  # strided, not chained: nothing waits on a previous iteration
    for d, loop in reversed(loops[:-1]):
        if not _carried_any(s, s.group(name, d), d):
            return (loop, last) if _point_loop(s, name, d) else None
    return None


def _point_loop(s: Schedule, name: str, dim: int) -> bool:
    """Schedule dimension ``dim`` of ``name`` is affine in its iterators (no ``floor``): a point loop, whose
    neighbouring iterations are neighbouring chains.  A tile loop's are a tile apart: interleaving 8 tiles
    of seidel-2d's wavefront (its parallel tile loop, strip-mined) ran 4.8 s against 4.1 s."""
    return all(aff.dim(isl.dim_type.div) == 0 for _, aff in _dim_aff(s, name, dim).get_pieces())


def interleave_chains(s: Schedule, machine: CMachine, notes: List[str]) -> Schedule:
    """Strip-mine the independent loop around each chain and move its point loop innermost (see the module).

    Before: ``for i: for j: q[i][j] = (... - a * q[i][j-1]) / (...)``
    After:  ``for i_t: for j: for i (8 of them): q[i][j] = ...``
    """
    done = set()
    for name, _ in s.stmts:
        found = chain_loops(s, name)
        if found is None:
            continue
        outer, last = found
        d = s.loop_dim(name, outer)
        members = tuple(sorted(s.group(name, d)))
        if (members, d) in done:
            continue
        done.add((members, d))
        ways = machine.line(_DEFAULT_ELEMENT, vectors=False)  # chains across rows: scalars, any element size
        try:
            t = tile_step(s, name, {outer: ways})
            names = t.loop_names(name)
            inside = names[names.index(outer):]
            t = reorder_step(t, name, inside[1:] + [outer])
            if any(m[1] == outer and m[2] == PARALLEL and m[0] in members for m in t.marks):
                continue  # the parallel mark stayed on the point loop: nothing to gain, a region per step
        except _REFUSED as e:
            notes.append(f"chains of {name} along {last} not interleaved: {str(e).splitlines()[0][:100]}")
            continue
        notes.append(f"chains of {name} along {last}: {ways} iterations of {outer} side by side")
        s = t
    return s
