"""Whether a parallel loop pays for its parallel region: the work of one execution against the region's cost.

Used by both optimisers (the Tile target's default schedule, ``polytile opt``) and, through
:func:`min_parallel_work`, by code generation's run-time guard of loops whose trip count is a
parameter.  In isl terms, one execution of the loop at time dimension ``d`` of ``S`` runs at most
``prod_{e >= d} (max θ_e(D_S) - min θ_e(D_S) + 1)`` instances (θ the statement's schedule map, D its
domain): a box bound, exact for rectangular nests, an over-estimate for triangles.
"""
from __future__ import annotations

from typing import List, Mapping, Optional, Tuple

import islpy as isl
import numpy as np

from ..scheduling import PARALLEL, Schedule
from ..poly import body as B
from ..scheduling.core import REGTILE, tile_simd_reduction_blocker
from ..scheduling.locality import loop_extent, unit_or_invariant
from ..scheduling.marks import RegTile
from ..scheduling import unmark as unmark_step
from .constants import OMP_REGION_S


#: Seconds one statement instance takes in a simple vectorised loop (a few flops and loads at ~3 GHz):
#: the scale of :func:`drop_small_parallel`'s work bound.
INSTANCE_S = 0.5e-9


def instance_share(s: Schedule, stmt: str, *, vector: bool = True) -> float:
    """The time of one instance of ``stmt`` as a share of :data:`INSTANCE_S`.

    * In a register block, ``1 / (2 * lanes)``: an instance is one lane of a fused multiply-add, two
      issued a cycle, operands in registers (measured single-threaded on Zen 5, a 16-lane matmul block
      ran an instance in 0.011 ns from 64^3 to 128^3, INSTANCE_S / 46).
    * A Tile statement whose innermost loop runs as SIMD code (:func:`vector_loop`): the bytes its
      accesses move along that loop at :data:`VECTOR_RATE`, at least one lane of a
      :data:`VECTOR_BYTES` vector (and at most the loop's points); with ``vector=False``, 1.
    * Else 1.

    >>> import polytile
    >>> s = polytile.schedule("function (A[M, K], B[K, N]) -> (C) { C[i, j : M, N] = +(A[i, k] * B[k, j]); }",
    ...                       dims=dict(M=64, N=64, K=64), hardware="x86-avx512")
    >>> instance_share(s, "S0"), instance_share(s, "Z0")   # a register block; a zeroing loop (one lane)
    (0.03125, 0.125)
    """
    for st, _, kind, arg in s.marks:
        if st == stmt and kind == REGTILE:
            return 1.0 / (2 * RegTile.from_arg(str(arg)).lanes)
    found = vector_loop(s, stmt) if vector else None
    if found is None:
        return 1.0
    lanes, moved = found
    return max(1.0 / lanes, moved / (VECTOR_RATE * INSTANCE_S))


#: Vector bytes :func:`instance_share` assumes: AVX2's 32, the narrowest of the x86 descriptors (the
#: schedule is made before a descriptor is known, and an AVX-512 machine only gains).
VECTOR_BYTES = 32

#: Bytes a second a vector loop moves (the L2 rate of one core, where a kernel small enough to doubt its
#: parallel region keeps its arrays).  Zen 5 VM (exploratory, gcc, best of 5 x 2000 calls, about 1.3 us
#: of each the Python call), default (parallel) vs serial code: 70x412 @ 412x1 4.3 against 3.2 us,
#: 256x256 @ 256x1 6.0 against 4.3, 1x1893 @ 1893x25 8.0 against 3.8 (parallel k, a private output per
#: thread), 1000x100 @ 100x1 8.2 against 9.5, 512x512 @ 512x1 10.3 against 11.9; ``E = A * B + A`` on
#: 128x256 4.7 against 3.8, on 256x256 5.6 against 7.9.  A sum's instance (8 bytes moving) ran
#: 0.04-0.08 ns, an elementwise one (12 bytes) 0.1 ns: a parallel region paid from 5-10 x 10^4
#: instances, not the 12000 of a scalar instance.
VECTOR_RATE = 120e9


def vector_loop(s: Schedule, stmt: str) -> Optional[Tuple[int, int]]:
    """``(lanes, bytes)`` of a Tile statement's innermost loop when gcc and LLVM run it as SIMD code, else
    None: the lanes of a :data:`VECTOR_BYTES` vector (at most the loop's points) and the bytes its accesses
    move along the loop per instance.  SIMD code: every access moves by one element along the loop or
    not at all, the written cell moves with it or the statement is a sum the lanes may split
    (``tile_simd_reduction_blocker``), and the value is loads and ``+ - *`` of one element type (a select,
    a call or a conversion may run scalar).  C statements (``polytile opt``) keep their order: None.

    >>> # C[i, j] = +(A[i, k] * B[k, j]) in program order (i, j, k): k sums A and B into a cell -> (8, 8)
    """
    st = s.scop.statement(s.resolve(stmt))
    if st.c_text is not None:
        return None
    try:  # the innermost loop of more than one point (one of one point has no code)
        inner, points = next((v, n) for v, n in ((v, loop_extent(s, st.name, v)) for v in reversed(s.loop_names(st.name)))
                             if n > 1)
    except (StopIteration, ValueError):  # no such loop, or a parametric range
        return None
    if inner not in st.iters:
        return None
    dtype = s.scop.array(st.body.array).dtype
    accesses = [(st.body.array, st.body.index)] + [(ld.array, ld.index) for ld in B.loads(st.body.value)]
    squeezed = [(a, _squeezed(ix, s.scop.array(a).shape)) for a, ix in accesses]
    if not all(unit_or_invariant(ix, inner) for _, ix in squeezed):
        return None
    if not _plain_arithmetic(st.body.value, dtype):
        return None
    if inner not in B.iter_names(*st.body.index):
        if not st.is_reduction or tile_simd_reduction_blocker(st, dtype):
            return None
    moving = {(a, tuple(ix)) for a, ix in squeezed if inner in B.iter_names(*ix)}  # a cell read twice is one stream
    moved = sum(np.dtype(s.scop.array(a).dtype).itemsize for a, _ in moving)
    return max(1, min(VECTOR_BYTES // np.dtype(dtype).itemsize, points)), moved


def _squeezed(index, shape) -> list:
    """``index`` without its trailing subscripts into dimensions of one element (``B[k, 0]`` of a 412 x 1
    ``B`` moves one element along ``k``).

    >>> i, k = B.Iter("i"), B.Iter("k")
    >>> _squeezed([k, B.Const(0, "int64"), B.Const(0, "int64")], (412, 1, 1)) == [k], _squeezed([i, k], (3, 4)) == [i, k]
    (True, True)
    """
    index = list(index)
    if len(shape) == len(index):
        while len(index) > 1 and shape[len(index) - 1] == 1:
            index.pop()
    return index


def _plain_arithmetic(n, dtype: str) -> bool:
    """Whether value ``n`` is loads, constants and ``+ - *`` in ``dtype`` (a load's index not looked at)."""
    if isinstance(n, B.Load):
        return n.dtype == dtype
    if isinstance(n, B.Const):
        return True
    return (isinstance(n, B.Bin) and n.op in ("+", "-", "*") and n.dtype == dtype
            and _plain_arithmetic(n.a, dtype) and _plain_arithmetic(n.b, dtype))


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
    seen, loops, unsized = set(), [], False
    for stmt, loop, kind, _ in sorted(s.marks, key=str):
        if kind != PARALLEL or (stmt, loop) in seen:
            continue
        dim = s.loop_dim(stmt, loop)
        group = s.group(stmt, dim)
        seen.update((g, s.table[g].names[dim]) for g in group)
        works = [work_per_entry(s, g, dim, sizes) for g in group]
        if any(w is None for w in works):
            unsized = True  # sized at run time, and kept: the kernel may open a region anyway
            continue
        vector = sum(w * instance_share(s, g) for w, g in zip(works, group))
        scalar = sum(w * instance_share(s, g, vector=False) for w, g in zip(works, group))
        loops.append((stmt, loop, group, works, vector, scalar))
    # A kernel that opens a parallel region anyway has its team awake: another region costs it little, so
    # its other loops keep the scalar price (conv 1x28x28x128's 346 KB zeroing: 0.443 ms with it in
    # parallel, 0.450 serially).  Only where no region would remain do vector loops count their lanes.
    awake = unsized or any(vector >= need for *_, vector, _ in loops)
    for stmt, loop, group, works, vector, scalar in loops:
        work = scalar if awake else vector
        if work >= need:
            continue
        s = unmark_step(s, stmt, loop, PARALLEL)
        notes.append(f"loop {loop} of {', '.join(group)} left sequential: at most {sum(works)} instances per "
                     f"execution ({work:.0f} simple ones), too little work for a parallel region "
                     f"(needs about {need:.0f})")
    return s
