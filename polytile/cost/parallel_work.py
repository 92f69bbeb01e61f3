"""Whether a parallel loop pays for its parallel region: the work of one execution against the region's cost.

Used by both optimisers (the Tile target's default schedule, ``polytile opt``) and, through
:func:`min_parallel_work`, by code generation's run-time guard of loops whose trip count is a
parameter.  In isl terms, one execution of the loop at time dimension ``d`` of ``S`` runs at most
``prod_{e >= d} (max θ_e(D_S) - min θ_e(D_S) + 1)`` instances (θ the statement's schedule map, D its
domain): a box bound, exact for rectangular nests, an over-estimate for triangles.
"""
from __future__ import annotations

from typing import List, Mapping, Optional

import islpy as isl

from ..scheduling import PARALLEL, Schedule
from ..scheduling.core import REGTILE
from ..scheduling.marks import RegTile
from ..scheduling import unmark as unmark_step
from .constants import OMP_REGION_S


#: Seconds one statement instance takes in a simple vectorised loop (a few flops and loads at ~3 GHz):
#: the scale of :func:`drop_small_parallel`'s work bound.
INSTANCE_S = 0.5e-9


def instance_share(s: Schedule, stmt: str) -> float:
    """The time of one instance of ``stmt`` as a share of :data:`INSTANCE_S`: ``1 / (2 * lanes)`` in a
    register block (an instance is one lane of a fused multiply-add, two issued a cycle, operands in
    registers; measured single-threaded on Zen 5, a 16-lane matmul block ran an instance in 0.011 ns
    from 64^3 to 128^3, INSTANCE_S / 46), else 1.

    >>> import polytile
    >>> s = polytile.schedule("function (A[M, K], B[K, N]) -> (C) { C[i, j : M, N] = +(A[i, k] * B[k, j]); }",
    ...                       dims=dict(M=64, N=64, K=64), hardware="x86-avx512")
    >>> instance_share(s, "S0"), instance_share(s, "Z0")
    (0.03125, 1.0)
    """
    for st, _, kind, arg in s.marks:
        if st == stmt and kind == REGTILE:
            return 1.0 / (2 * RegTile.from_arg(str(arg)).lanes)
    return 1.0


def min_parallel_work(threads: int = 2) -> int:
    """Statement instances one execution of a parallel loop needs to pay for its parallel region.

    ``threads`` threads save at most ``(1 - 1/threads)`` of the work; the region costs the cost
    model's :data:`~polytile.cost.OMP_REGION_S`.  Two threads need the most work.

    >>> min_parallel_work(2)
    12000
    """
    return int(round(OMP_REGION_S / (INSTANCE_S * (1 - 1 / max(2, threads)))))


def with_sizes(st: isl.Set, sizes: Optional[Mapping[str, int]]) -> isl.Set:
    """``st`` with the parameters named in ``sizes`` replaced by their values (and gone from its space).

    >>> str(with_sizes(isl.Set("[n, m] -> { [i] : 0 <= i < n + m }"), {"n": 4}))
    '[m] -> { [i] : 0 <= i <= 3 + m }'
    """
    for name, value in (sizes or {}).items():
        k = st.find_dim_by_name(isl.dim_type.param, name)
        if k >= 0 and isinstance(value, int):
            st = st.fix_val(isl.dim_type.param, k, isl.Val.int_from_si(st.get_ctx(), value))
            st = st.project_out(isl.dim_type.param, k, 1)
    return st


def work_per_entry(s: Schedule, stmt: str, dim: int, sizes: Optional[Mapping[str, int]] = None) -> Optional[int]:
    """An upper bound on the instances of ``stmt`` run by one execution of its loop at time dimension ``dim``,
    or None when the sizes are parameters without values (``sizes``: values of some parameters, such as the
    file's macros).

    The product, over ``dim`` and the loops inside it, of each loop's range over the whole run
    (``dim_max - dim_min + 1`` of ``θ(D)``): durbin's ``for (i = 0; i < k; i++)`` inside
    ``for (k = 1; k < 2000; k++)`` gives 1999 (the triangle's widest row).  At most the box of the
    domain ``D`` itself (all the instances): a tiled loop's tile and point loops would each count their
    whole range, a 32^3 matmul blocked by 4 x 32 rows x columns giving 2^21 instances instead of 2^15.
    """
    ss = s.table[stmt]
    domain = with_sizes(s.scop.statement(stmt).domain, sizes)
    times = domain.apply(ss.map)
    bound = _box(times, [d for d, _ in ss.loops() if d >= dim])
    total = _box(domain, range(domain.dim(isl.dim_type.set)))
    return None if bound is None or total is None else min(bound, total)


def _box(st: isl.Set, dims) -> Optional[int]:
    """The product of ``st``'s ranges along ``dims`` (None when one is unbounded or parametric)."""
    bound = 1
    for d in dims:
        hi, lo = st.dim_max_val(d), st.dim_min_val(d)
        if not (hi.is_int() and lo.is_int()):
            return None
        bound *= max(0, hi.to_python() - lo.to_python() + 1)
    return bound


def drop_small_parallel(s: Schedule, notes: List[str], threads: int = 2,
                        sizes: Optional[Mapping[str, int]] = None, need: Optional[int] = None) -> Schedule:
    """Leave sequential every parallel loop whose work per execution cannot pay for a parallel region.

    Entering a parallel region costs :data:`~polytile.cost.OMP_REGION_S` (fork and join barrier);
    ``threads`` threads save at most ``(1 - 1/threads)`` of the loop's work.  A loop whose every
    execution runs at most ``W`` instances (:func:`work_per_entry`, summed over the statements
    it holds, each weighted by :func:`instance_share`) with ``W * INSTANCE_S * (1 - 1/threads) < OMP_REGION_S``
    is unmarked: durbin's vector
    updates inside its sequential ``k`` loop (at most 2000 instances, ~1 us of work per entry) ran
    5x slower parallel than gcc's sequential code.  Unknown sizes (parameters without a value in
    ``sizes``) keep the mark; code generation then guards innermost such loops with a run-time
    ``if(parallel: ...)`` (``generate_region(..., min_parallel_work=...)``).  ``threads`` is 2, the count that
    needs the most work to pay; ``need`` replaces :func:`min_parallel_work` (0 keeps every mark).

    Before: ``for k: { parallel for i < k: z[i] = ...; }``  After: ``for k: { for i < k: z[i] = ...; }``
    """
    if threads < 2 or need == 0:
        return s
    need = min_parallel_work(threads) if need is None else need
    seen = set()
    for stmt, loop, kind, _ in sorted(s.marks, key=str):
        if kind != PARALLEL or (stmt, loop) in seen:
            continue
        dim = s.loop_dim(stmt, loop)
        group = s.group(stmt, dim)
        seen.update((g, s.table[g].names[dim]) for g in group)
        works = [work_per_entry(s, g, dim, sizes) for g in group]
        if any(w is None for w in works):
            continue
        work = sum(w * instance_share(s, g) for w, g in zip(works, group))
        if work >= need:
            continue
        s = unmark_step(s, stmt, loop, PARALLEL)
        notes.append(f"loop {loop} of {', '.join(group)} left sequential: at most {sum(works)} instances per "
                     f"execution ({work:.0f} simple ones), too little work for a parallel region "
                     f"(needs about {need:.0f})")
    return s
