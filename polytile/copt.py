"""Source-to-source optimisation of C SCoPs (what Pluto's ``polycc`` does, on polytile's machinery).

For every ``#pragma scop`` region of a C file:

1. extract it (:mod:`polytile.frontends.c`) and compute its dependences; a
   statement that reads, along a loop, a cell it rewrites at one point of
   that loop is split there (index-set splitting, :func:`split_index_sets`;
   the pieces are checked to partition its domain, so no instance is lost
   or repeated) when that makes its hot loops vectorisable;
2. schedule it with isl's scheduler (Pluto-style skews make bands
   permutable, so stencils with a time loop become tileable), or keep the
   original order if the scheduler fails; with smart fusion, isl's unfused
   schedule and the original order compete (:func:`stride_penalty`);
3. tile the outermost band of consecutive loops of every statement group,
   with sizes chosen from the hardware descriptor (a tile's footprint fits
   half of L2; time-tiled bands get a long vector tile innermost); a tiling
   the dependences forbid is retried with one loop fewer, so an illegal
   tiling is never emitted;
4. mark the outermost parallel loop; when a tiled band has no parallel tile
   loop (a time-tiled stencil), skew its outer tile loop by the next one
   (a wavefront) so that the next tile loop becomes parallel;
5. order the statements of shared innermost loops so carried dependences
   run forward, give each its own innermost loop where legal, and mark the
   innermost unit-stride loop of each statement ``simd`` where no
   dependence forbids it;
6. generate the region's loops (:func:`polytile.codegen.c.generate_region`,
   innermost loops separated so they carry no guards) and splice them into
   the file: every byte outside the regions is kept.

Every transformation goes through :mod:`polytile.schedule`, which checks it
against the dependences; the final schedule is checked once more.

>>> # text = optimize_c("jacobi-2d.c")            # the optimised file as a string
>>> # text = optimize_c("gemm.c", tile=False)     # isl's schedule and parallel marks only
"""
from __future__ import annotations

import dataclasses
import itertools
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import islpy as isl

from . import deps as deps_mod
from .codegen.c import fresh_counter_prefix, generate_region
from .deadline import with_deadline
from .errors import IllegalSchedule, PolytileError, ScheduleError
from .frontends.c import CScop, extract, splice
from .poly.scop import Scop
from .scheduling import FUSION, PARALLEL, SIMD, Schedule, Step, auto_parallel, automatic, initial
from .scheduling import distribute as distribute_step
from .scheduling import fuse as fuse_step
from .scheduling import reorder as reorder_step
from .scheduling import skew as skew_step
from .scheduling import tile as tile_step
from .scheduling import vectorize as vectorize_step

#: Bytes per element assumed for footprints when an array's dtype is unknown.
_DEFAULT_ELEMENT = 8
#: Errors a schedule step may raise when it is refused (kept out of the output, never fatal).
_REFUSED = (IllegalSchedule, ScheduleError, isl.Error)


@dataclass
class RegionResult:
    """What happened to one region: its schedule (None when left as it was) and notes."""

    cscop: CScop
    schedule: Optional[Schedule] = None
    text: Optional[str] = None
    notes: List[str] = field(default_factory=list)


# ---------------------------------------------------------------------------
# hardware
# ---------------------------------------------------------------------------


def _l2_bytes(hardware: Any) -> int:
    """L2 capacity (per core) of a descriptor, preset name or file; 1 MiB when unknown."""
    if hardware is None:
        return 1 << 20
    try:
        from . import hardware as hw_mod

        hw = hw_mod.load(hardware)
        for lv in hw.cache_levels():
            if lv.name.casefold() == "l2":
                return int(lv.size_bytes)
        levels = hw.cache_levels()
        if levels:
            return int(levels[min(1, len(levels) - 1)].size_bytes)
    except PolytileError:
        raise
    except Exception:  # pragma: no cover - a descriptor without the usual levels
        pass
    return 1 << 20


# ---------------------------------------------------------------------------
# analysis helpers on a schedule
# ---------------------------------------------------------------------------


def _dim_aff(s: Schedule, stmt: str, dim: int) -> isl.PwAff:
    return isl.PwMultiAff.from_map(s.table[stmt].map).get_pw_aff(dim)


def _subscript_iters(s: Schedule, stmt: str) -> set:
    """Indices of ``stmt``'s iterators that appear in some array subscript."""
    st = s.scop.statement(stmt)
    used = set()
    maps: List[isl.Map] = [st.write_map()]
    st.reads().foreach_map(maps.append)
    n = st.domain.dim(isl.dim_type.set)
    for m in maps:
        m = m.gist_domain(st.domain)
        for k in range(n):
            if m.involves_dims(isl.dim_type.in_, k, 1):
                used.add(k)
    return used


def _time_like(s: Schedule, stmt: str, dim: int) -> bool:
    """Time dimension ``dim`` of ``stmt`` depends only on iterators no subscript uses (a time loop)."""
    aff = _dim_aff(s, stmt, dim).gist(s.scop.statement(stmt).domain)
    used = _subscript_iters(s, stmt)
    n = s.scop.statement(stmt).domain.dim(isl.dim_type.set)
    involved = [k for k in range(n) if aff.involves_dims(isl.dim_type.in_, k, 1)]
    return bool(involved) and not any(k in used for k in involved)


def _arrays_of(s: Schedule, stmts: Sequence[str]) -> Dict[str, Tuple[int, int]]:
    """Arrays touched by ``stmts``: element size in bytes and rank."""
    out: Dict[str, Tuple[int, int]] = {}
    for name in stmts:
        st = s.scop.statement(name)
        maps: List[isl.Map] = [st.write_map()]
        st.reads().foreach_map(maps.append)
        for m in maps:
            arr = m.get_tuple_name(isl.dim_type.out)
            if not arr or arr in out:
                continue
            try:
                import numpy as np

                out[arr] = (int(np.dtype(s.scop.array(arr).dtype).itemsize), m.dim(isl.dim_type.out))
            except Exception:
                out[arr] = (_DEFAULT_ELEMENT, m.dim(isl.dim_type.out))
    return out


def _groups(s: Schedule) -> List[Tuple[List[str], int]]:
    """Statement groups at their outermost shared loop: ``(statements, dim)`` (as auto_parallel visits them)."""
    return s.nests()


def _band(s: Schedule, group: List[str], dim: int) -> Tuple[str, List[str]]:
    """The representative statement of a group and the loops of its outermost band.

    The band is the run of loops from ``dim`` inwards that every statement
    of the group shares: the β position between two loops holds the same
    constant for all of them (a statement without a loop at a position just
    has a constant there).
    """
    rep = max(group, key=lambda g: (len([d for d, _ in s.table[g].loops() if d >= dim]), -group.index(g)))
    names = s.table[rep].names
    loops: List[str] = []
    d = dim
    while d < s.n_dims and names[d]:
        loops.append(names[d])
        beta = d + 1
        if beta >= s.n_dims:
            break
        vals = {s.constant(g, beta) for g in group}
        if len(vals) != 1 or None in vals:
            break
        d += 2
    return rep, loops


def _carried_any(s: Schedule, group: Sequence[str], dim: int) -> bool:
    return not s.carried(list(group), dim, s.deps.all(include_reductions=True)).is_empty()


# ---------------------------------------------------------------------------
# the passes
# ---------------------------------------------------------------------------


#: Tile size of the innermost (unit-stride, vectorised) loop of a time-tiled band, in elements.
VECTOR_TILE = 512


def tile_sizes(s: Schedule, rep: str, loops: Sequence[str], group: Sequence[str], l2_bytes: int,
               cap: Optional[int] = None) -> Dict[str, int]:
    """Tile sizes for a band, from the cache the descriptor gives (``l2_bytes``).

    A band without a time loop: 32 per loop, halved until a tile's footprint
    fits half of L2.  A time-tiled band (a stencil after skewing): 8 time
    steps (4 above 2-D), and its innermost loop, when every statement walks
    it with unit stride and none feeds itself along it, ``VECTOR_TILE`` long -- GCC vectorises that loop, and
    a 32-long vector loop inside a skewed tile spends more on its bounds and
    remainders than on the stencil; the other space loops are 32, halved
    (then the vector loop too) until the footprint fits half of L2.

    The footprint of a tile is estimated per array as its element size times
    the product of the innermost ``min(rank, space loops)`` space tile sizes
    (a 2-D array touched by a 3-D tile holds a face of it).
    """
    def time_like(dim: int) -> bool:
        # A time loop for most of the group's statements (fdtd-2d's ey[0][j] = fict[t] reads by t).
        members = [g for g in group if s.table[g].names[dim]]
        votes = sum(1 for g in members if _time_like(s, g, dim))
        return bool(members) and 2 * votes >= len(members)

    time = [time_like(s.loop_dim(rep, l)) for l in loops]
    space = [l for l, t in zip(loops, time) if not t]
    n_space = max(1, len(space))
    arrays = _arrays_of(s, group)
    sizes = {l: 32 for l in space}
    vector = None
    if any(time) and space and space[-1] == loops[-1]:
        d = s.loop_dim(rep, loops[-1])
        users = [g for g in group if s.table[g].names[d] == loops[-1]]
        # Vectorisable: unit stride, and no statement feeds itself along the loop (seidel-2d's
        # A[i][j-1] -> A[i][j] stays scalar, and there long tiles only cost wavefront parallelism).
        if users and all(vectorisable(s, g, d) for g in users):
            vector = loops[-1]
            sizes[vector] = VECTOR_TILE

    def footprint() -> int:
        total = 0
        for size, rank in arrays.values():
            inner = space[-max(1, min(rank, n_space)):]
            total += size * math.prod(sizes[l] for l in inner)
        return total or _DEFAULT_ELEMENT

    while footprint() > l2_bytes // 2:
        others = [l for l in space if l != vector and sizes[l] > 4]
        if others:
            for l in others:
                sizes[l] //= 2
        elif vector and sizes[vector] > 32:
            sizes[vector] //= 2
        else:
            break
    t_size = 8 if n_space <= 2 else 4
    out = {l: (t_size if t else sizes[l]) for l, t in zip(loops, time)}
    return {l: min(v, cap) for l, v in out.items()} if cap else out


def tile_bands(s: Schedule, l2_bytes: int, notes: List[str], cap: Optional[int] = None,
               ) -> Tuple[Schedule, List[Tuple[List[str], str, List[str]]]]:
    """Tile the outermost band of every group; returns the schedule and ``(group, rep, tile loops)`` per tiled band."""
    plans = []
    for group, dim in _groups(s):
        rep, loops = _band(s, group, dim)
        plans.append((group, rep, loops))
    tiled = []
    for group, rep, loops in plans:
        depth = len(loops)
        if depth >= 2 and not _tiling_pays(s, group, rep, loops):
            notes.append(f"{rep} loops {', '.join(loops)} left untiled: no array is re-read across them in two "
                         "or more dimensions, and their innermost loop vectorises as it is")
            continue
        if depth >= 3 and _dot_product_loop(s, group, loops[-1]):
            depth -= 1
            notes.append(f"{loops[-1]} of {rep} left untiled: a reassociated reduction runs along it as one "
                         "SIMD dot product")
        done = False
        while depth >= 2 and not done:
            band = loops[:depth]
            sizes = tile_sizes(s, rep, band, group, l2_bytes, cap)
            try:
                new = tile_step(s, rep, sizes)
            except _REFUSED as e:
                notes.append(f"tiling {rep} loops {', '.join(band)} refused: {str(e).splitlines()[0]}")
                depth -= 1
                continue
            p = new.loop_dim(rep, _tile_loop_name(new, rep, band[0]))
            tile_loops = [new.table[rep].names[p + 2 * k] for k in range(depth)]
            notes.append(f"tiled {rep} loops {', '.join(band)} by "
                         f"{', '.join(f'{l}={sizes[l]}' for l in band)}")
            s = _intra_tile(new, rep, band, notes)
            tiled.append((group, rep, tile_loops))
            done = True
    return s, tiled


def _tiling_pays(s: Schedule, group: Sequence[str], rep: str, loops: Sequence[str]) -> bool:
    """Can tiling the band ``loops`` save memory traffic (or fix a strided innermost loop)?

    Tiles pay when a statement re-reads an array along one band loop with a
    footprint spanning two or more of the others (gemm's ``B[k][j]`` for
    every ``i``; a stencil's grid for every time step), or when some
    statement's innermost band loop is not :func:`vectorisable`: a strided
    one the reordering inside tiles repairs (mvt's ``A[j][i]``), or an
    in-order reduction whose chains, cut into tile-long pieces, the CPU
    overlaps across rows (gesummv's ``tmp[i] = A[i][j] * x[j] + tmp[i]``).
    An element-wise band (``data[i][j] -= mean[j]``) gains nothing from
    tiles but loop overhead.

    >>> # gemm (i, j, k): B[k, j] is invariant along i and spans j, k   -> True
    >>> # covariance's data[i][j] -= mean[j]: mean spans j only, simd j -> False
    """
    dims = [s.loop_dim(rep, l) for l in loops]
    for g in group:
        ss = s.table[g]
        mine = [d for d in dims if ss.names[d]]
        if not mine:
            continue
        if any(_time_like(s, g, d) for d in mine):
            return True
        if not vectorisable(s, g, mine[-1]):
            return True
        st = s.scop.statement(g)
        theta = ss.map.intersect_domain(st.domain)
        maps: List[isl.Map] = [st.write_map()]
        st.reads().foreach_map(maps.append)
        for m in maps:
            if m.dim(isl.dim_type.out) < 2:
                continue
            cell = theta.reverse().apply_range(m)  # { [t] -> A[...] }
            moving = [d for d in mine if _moves(cell, d)]
            if len(moving) >= 2 and len(moving) < len(mine):
                return True
    return False


def _moves(cell: isl.Map, dim: int) -> bool:
    """Does the cell ``{ [t] -> A[...] }`` change when time dimension ``dim`` steps (the others fixed)?"""
    n = cell.dim(isl.dim_type.in_)
    step = isl.Map.universe(isl.Space.alloc(cell.get_ctx(), 0, n, n))
    for k in range(n):
        c = isl.Constraint.alloc_equality(step.get_space())
        c = c.set_coefficient_val(isl.dim_type.in_, k, 1).set_coefficient_val(isl.dim_type.out, k, -1)
        step = step.add_constraint(c.set_constant_val(1) if k == dim else c)
    dom = cell.domain()
    step = step.align_params(cell.get_space()).intersect_domain(dom).intersect_range(dom)
    return not step.is_subset(cell.apply_range(cell.reverse()))


def _dot_product_loop(s: Schedule, group: Sequence[str], loop: str) -> bool:
    """``loop`` is the innermost loop of reductions that will become a SIMD reduction (a dot product).

    Such a loop keeps one partial sum per lane and adds the lanes up once
    when it ends; tiling it would end it (and write the cell back) once per
    tile, so it is left whole (the outer loops still tile).
    """
    users = [g for g in group if loop in s.loop_names(g)]
    if not users:
        return False
    for g in users:
        d = s.loop_dim(g, loop)
        if not s.scop.statement(g).is_reduction or s.table[g].loops()[-1][1] != loop:
            return False
        if s.carried([g], d, s.deps.reduction).is_empty() or not vectorisable(s, g, d):
            return False
    return True


def _intra_tile(s: Schedule, rep: str, band: Sequence[str], notes: List[str]) -> Schedule:
    """Inside the tiles, move a unit-stride loop that carries no dependence innermost (it can then be
    vectorised), as Pluto's intra-tile reordering does; kept only where the reordering is legal."""
    members = s.group(rep, s.loop_dim(rep, band[0]))
    def good(loop: str) -> bool:
        d = s.loop_dim(rep, loop)
        users = [g for g in members if s.table[g].names[d] == loop]
        if not users or not all(_unit_stride(s, g, loop) for g in users):
            return False
        return not _carried_any(s, s.group(rep, d), d)
    if len(band) < 2 or good(band[-1]):
        return s
    for loop in reversed(band[:-1]):
        if not good(loop):
            continue
        order = [l for l in band if l != loop] + [loop]
        try:
            out = reorder_step(s, rep, order)
        except _REFUSED:
            continue
        notes.append(f"point loops of {rep} reordered to {', '.join(order)} (unit stride innermost)")
        return out
    return s


def _tile_loop_name(s: Schedule, rep: str, point: str) -> str:
    """The tile loop just created for point loop ``point`` (``i_t``, or ``i_t1`` when ``i_t`` existed)."""
    names = [n for _, n in s.table[rep].loops()]
    point_at = names.index(point)
    cands = [n for n in names[:point_at] if n.startswith(point + "_t")]
    return cands[-1] if cands else names[0]


def parallelise(s: Schedule, tiled: Sequence[Tuple[List[str], str, List[str]]], notes: List[str],
                wavefront: bool = True) -> Schedule:
    """Outermost parallel loops; a wavefront over tile loops when no tile loop is parallel."""
    for group, rep, tile_loops in (tiled if wavefront else ()):
        if len(tile_loops) < 2:
            continue
        dims = [s.loop_dim(rep, l) for l in tile_loops]
        members = s.group(rep, dims[0])
        if not _carried_any(s, members, dims[0]):
            continue  # the outer tile loop is parallel already
        if not _carried_any(s, members, dims[1]):
            continue  # carried outside, free inside: auto_parallel finds it
        try:
            w = skew_step(s, rep, tile_loops[0], by=tile_loops[1])
            if _carried_any(w, w.group(rep, dims[1]), dims[1]):
                raise ScheduleError("the wavefront leaves the second tile loop sequential")
            s = w
            notes.append(f"wavefront: {tile_loops[0]} += {tile_loops[1]} so {tile_loops[1]} runs in parallel")
        except _REFUSED as e:
            notes.append(f"no wavefront for {rep}: {str(e).splitlines()[0]}")
    s = auto_parallel(s)
    return s.check("parallel marks")


def _unit_stride(s: Schedule, stmt: str, loop: str) -> bool:
    """Loop ``loop`` of ``stmt`` is one of its iterators and moves only the last subscript of every access."""
    st = s.scop.statement(stmt)
    if loop not in st.iters:
        return False
    k = list(st.iters).index(loop)
    maps: List[isl.Map] = [st.write_map()]
    st.reads().foreach_map(maps.append)
    for m in maps:
        n_out = m.dim(isl.dim_type.out)
        m = m.gist_domain(st.domain)
        for o in range(n_out - 1):
            mo = m.project_out(isl.dim_type.out, o + 1, n_out - o - 1).project_out(isl.dim_type.out, 0, o)
            if mo.involves_dims(isl.dim_type.in_, k, 1):
                return False
    return True


def _innermost_groups(s: Schedule) -> List[Tuple[List[str], int]]:
    """Statements that share one innermost loop (same loops, same enclosing βs), with that loop's dim."""
    seen: Dict[Tuple[Any, ...], List[str]] = {}
    for name, ss in s.stmts:
        loops = ss.loops()
        if not loops:
            continue
        d = loops[-1][0]
        key = (d,) + tuple(s.constant(name, b) for b in range(0, d, 2)) + tuple(x for x, _ in loops)
        seen.setdefault(key, []).append(name)
    return [(g, key[0]) for key, g in seen.items() if len(g) > 1]


def _backward_carried(s: Schedule, order: Sequence[str], dim: int, deps: isl.UnionMap) -> int:
    """Dependences carried by loop ``dim`` whose source statement comes after its sink in ``order``.

    A vectorised loop runs each statement for a whole vector of iterations
    before the next statement, so a value a later statement of iteration
    ``c`` produces for an earlier statement of iteration ``c + 1`` arrives
    too late: such a loop is not vectorisable (GCC reports it and keeps the
    loop scalar).  Counts offending statement pairs.
    """
    pos = {g: k for k, g in enumerate(order)}
    car = s.carried(list(order), dim, deps)
    bad = 0
    for a in order:
        for b in order:
            if a == b or pos[a] <= pos[b]:
                continue
            sa = s.scop.statement(a).domain.get_space()
            sb = s.scop.statement(b).domain.get_space()
            pair = isl.UnionMap.from_map(isl.Map.universe(isl.Space.map_from_domain_and_range(sa, sb)))
            if not car.intersect(pair).is_empty():
                bad += 1
    return bad


def vector_order(s: Schedule, notes: List[str], max_stmts: int = 5) -> Schedule:
    """Order the statements of every shared innermost loop so that the dependences it carries run forward.

    isl's scheduler fixes the order of fused statements in a loop body only
    by legality; for a fused stencil (jacobi-2d's two sweeps, shifted by one)
    it may put the consumer of the previous iteration's value first, which
    keeps GCC from vectorising the loop.  Each legal permutation with fewer
    backward carried dependences is realised with ``fuse`` steps (which
    re-check legality); the original order is kept when no permutation helps.
    """
    deps = s.deps.all(include_reductions=True)
    for group, d in _innermost_groups(s):
        if len(group) > max_stmts:
            continue
        betas = [s.constant(g, d + 1) if d + 1 < s.n_dims else None for g in group]
        order = [g for _, g in sorted(zip([b or 0 for b in betas], group), key=lambda x: x[0])]
        # Statements at one β are ordered only by isl's code generator (their instances never
        # share a time stamp and a dependence), which may pick the order that does not vectorise.
        tied = None in betas or len(set(betas)) < len(betas)
        best = _backward_carried(s, order, d, deps)
        if best == 0 and not tied:
            continue
        depth = len(s.table[order[0]].loops())
        for perm in itertools.permutations(order):
            n_bad = _backward_carried(s, perm, d, deps)
            if n_bad > best or (n_bad == best and (list(perm) != order or not tied)):
                continue
            try:
                cur = s
                for x in perm[1:]:
                    cur = fuse_step(cur, perm[0], x, depth)
            except _REFUSED:
                continue
            notes.append(f"innermost body of {', '.join(order)} ordered {', '.join(perm)} "
                         "(carried dependences forward, so the loop vectorises)")
            s, best = cur, n_bad
            break
    return s


def distribute_innermost(s: Schedule, notes: List[str]) -> Schedule:
    """Give every statement of a shared innermost loop its own innermost loop, where that is legal.

    Fused statements that write rows other statements of the same loop read
    (a stencil's sweeps after skewing) defeat GCC's vectoriser: it cannot
    relate rows of a variable-length array, versions the loop with run-time
    overlap checks, and those checks fail on neighbouring rows, so the scalar
    copy runs.  One statement per innermost loop keeps the outer fusion (the
    rows are still in L1 for the next statement) and gives GCC loops whose
    checks pass.  Each ``distribute`` step is legality-checked; a statement
    whose distribution is refused stays fused (``vector_order`` then orders it).
    """
    for group, d in _innermost_groups(s):
        betas = [s.constant(g, d + 1) if d + 1 < s.n_dims else None for g in group]
        order = [g for _, g in sorted(zip([b or 0 for b in betas], group), key=lambda x: x[0])]
        depth = len(s.table[order[0]].loops()) - 1
        for g in order[1:]:
            try:
                s = distribute_step(s, g, depth)
            except _REFUSED as e:
                notes.append(f"innermost loop of {g} stays fused: {str(e).splitlines()[0][:100]}")
                continue
            notes.append(f"innermost loop of {g} distributed from {order[0]} (one statement per vector loop)")
    return s


def unit_stride_dim(s: Schedule, stmt: str, dim: int) -> bool:
    """Does the next iteration of schedule dimension ``dim`` (outer dimensions fixed) move every
    access of ``stmt`` by at most one element of its last subscript only?

    Unlike :func:`_unit_stride` this works on skewed loops (``2t + j`` of a
    time-tiled stencil walks ``j`` when the outer loops fix ``t``).
    """
    st = s.scop.statement(stmt)
    theta = s.table[stmt].map
    n = theta.dim(isl.dim_type.out)
    step = isl.Map.universe(isl.Space.alloc(theta.get_ctx(), 0, n, n))
    for k in range(dim + 1):
        c = isl.Constraint.alloc_equality(step.get_space())
        c = c.set_coefficient_val(isl.dim_type.in_, k, 1).set_coefficient_val(isl.dim_type.out, k, -1)
        if k == dim:
            c = c.set_constant_val(1)
        step = step.add_constraint(c)
    step = step.align_params(theta.get_space())
    theta = theta.intersect_domain(st.domain)
    nxt = theta.apply_range(step).apply_range(theta.reverse())
    if nxt.is_empty():
        return True
    dom = nxt.domain()
    maps: List[isl.Map] = [st.write_map()]
    st.reads().foreach_map(maps.append)
    for m in maps:
        # (A statement's reads of one array arrive as one map: A[i][j-1], A[i][j+1] ... together,
        # so each subscript is compared as the set of values it takes, not as a function.)
        n_out = m.dim(isl.dim_type.out)
        for o in range(n_out):
            p = m.project_out(isl.dim_type.out, o + 1, n_out - o - 1).project_out(isl.dim_type.out, 0, o)
            p = p.reset_tuple_id(isl.dim_type.out)
            after = nxt.apply_range(p)
            here = p.intersect_domain(dom)
            if o < n_out - 1:
                if not after.is_equal(here):
                    return False
                continue
            near = isl.Map("{ [v] -> [w] : v - 1 <= w <= v + 1 }", context=p.get_ctx())
            near = near.align_params(p.get_space())
            if not after.is_subset(here.apply_range(near)):
                return False
    return True


def vectorise(s: Schedule, notes: List[str]) -> Schedule:
    """``simd`` on each statement's innermost loop where it is unit-stride and carries no dependence."""
    for name, ss in s.stmts:
        loops = ss.loops()
        if not loops:
            continue
        d, loop = loops[-1]
        if any(m[0] == name and m[1] == loop and m[2] in (PARALLEL, SIMD) for m in s.marks):
            continue
        if not _unit_stride(s, name, loop):
            continue
        if any(s.table[g].names[d] and s.table[g].loops()[-1][0] != d for g in s.group(name, d)):
            continue  # another statement has loops inside it: not an innermost loop
        try:
            s = vectorize_step(s, name, loop)
            notes.append(f"simd on {name} loop {loop}")
            continue
        except _REFUSED:
            pass
        if s.scop.statement(name).is_reduction:  # only with reassociation (extract(..., reassociate=True))
            try:
                s = vectorize_step(s, name, loop, reduction=True)
                notes.append(f"simd reduction on {name} loop {loop} (reassociated)")
            except _REFUSED:
                pass
    return s


def _base_schedule(scop, deps, fusion: str, notes: List[str]) -> Schedule:
    try:
        return automatic(scop, deps, fusion)
    except _REFUSED as e:
        notes.append(f"isl's scheduler failed ({str(e).splitlines()[0]}); keeping the original order")
        return initial(scop, deps)


def _load_steps(schedule: Any) -> Optional[List[Step]]:
    """Steps from a saved schedule (path, JSON document or list of steps)."""
    if schedule is None:
        return None
    from .scheduling.saved import schedule_steps

    doc = schedule
    if isinstance(schedule, (str, Path)):
        p = Path(schedule)
        if not p.is_file():
            raise PolytileError(f"no such schedule file: {p}")
        try:
            doc = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise PolytileError(f"cannot read schedule {p}: {e}") from None
    return list(schedule_steps(doc))


def _replay(scop, deps, steps: Sequence[Step]) -> Schedule:
    from .scheduling.saved import replay

    return replay(scop, deps, steps)


#: isl operations allowed for generating one candidate's code (a wavefront over long thin tiles can
#: make isl's AST generator run for minutes; the next, simpler candidate is tried instead).
MAX_CODEGEN_OPERATIONS = 3_000_000


def separate_innermost(tree: isl.Schedule) -> isl.Schedule:
    """Ask isl's AST generator to *separate* every innermost loop.

    Fused statements with different domains (a stencil's sweeps shifted
    against each other, the partial tiles at a boundary) otherwise share one
    loop with an ``if`` per statement in its body, and GCC does not
    vectorise such a loop.  Separation splits the loop into pieces in each
    of which the same statements run unguarded: the middle piece is a
    plain, vectorisable loop; the pieces at its ends are short.
    """
    def has_band_below(node: isl.ScheduleNode) -> bool:
        found = []

        def visit(n: isl.ScheduleNode) -> bool:
            if n.get_type() == isl.schedule_node_type.band:
                found.append(n)
            return not found
        for k in range(node.n_children()):
            node.child(k).foreach_descendant_top_down(visit)
        return bool(found)

    def fn(node: isl.ScheduleNode) -> isl.ScheduleNode:
        if node.get_type() == isl.schedule_node_type.band and not has_band_below(node):
            opts = isl.UnionSet("{ separate[x] }", context=node.get_ctx())
            node = node.band_set_ast_build_options(opts)
        return node
    return tree.map_schedule_node_bottom_up(fn)


def _generate_bounded(scop, s: Schedule, max_ops: Optional[int], separate: bool = True,
                      taken: Sequence[str] = (), seconds: Optional[float] = None) -> Tuple[str, List[str]]:
    """The region's code for schedule ``s``: isl.Error past ``max_ops`` isl operations, and
    :class:`_CodegenTimeout` past ``seconds`` of wall time (isl's AST generator does not count every
    operation: a stride-3 sweep under a skewed, tiled schedule ran for four minutes within the limit)."""
    ctx = scop.domain.get_ctx()
    tree = separate_innermost(s.tree()) if separate else s.tree()
    prefix = fresh_counter_prefix(taken)

    def work() -> str:
        old = ctx.get_max_operations()
        if max_ops:
            ctx.set_max_operations(max_ops)
            ctx.reset_operations()
        try:
            return json.dumps(generate_region(scop, tree, prefix))
        finally:
            if max_ops:
                ctx.set_max_operations(old)
                ctx.reset_operations()

    text = work() if seconds is None else with_deadline(work, seconds)
    if text is None:
        raise _CodegenTimeout(f"took over {seconds:.0f} s")
    code, notes = json.loads(text)
    return code, list(notes)


class _CodegenTimeout(Exception):
    """isl's AST generator ran past its time budget (the schedule is tried no further)."""


#: Wall-clock budget of code generation for one region (all candidate schedules together), and for
#: one attempt.
CODEGEN_SECONDS = 40.0
CODEGEN_ATTEMPT_SECONDS = 15.0
CODEGEN_MIN_SECONDS = 2.0


# isl's AST generator names loop counters c0, c1, ...; a file that uses such a name itself (a
# variable or a loop-bound parameter c1) gets counters with a prefix no identifier of the file
# starts a ``prefix<digits>`` name with, chosen when the AST is built (never by renaming text).
def _rename_in(m: isl.Map, name: str) -> isl.Map:
    return m.set_tuple_name(isl.dim_type.in_, name)


def _split_planes(st) -> List[Tuple[int, isl.PwAff]]:
    """``(iterator position, h)`` pairs: instances along that iterator read a cell the statement itself
    writes at ``iterator == h`` (floyd-warshall's ``path[i][k]``, rewritten at ``j == k``)."""
    dom = st.domain
    n = dom.dim(isl.dim_type.set)
    w = st.write_map()
    arr = w.get_tuple_name(isl.dim_type.out)
    reads: List[isl.BasicMap] = []

    def take(m: isl.Map) -> None:
        if m.get_tuple_name(isl.dim_type.out) == arr:
            reads.extend(m.get_basic_maps())
    st.reads().foreach_map(take)
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
        maps: List[isl.Map] = []
        own.foreach_map(maps.append)
        for k, piece in enumerate(pieces):
            name = f"{st.name}_{k}"
            reads = isl.UnionMap.empty(st.reads().get_space())
            parts_r: List[isl.Map] = []
            st.reads().foreach_map(parts_r.append)
            for m in parts_r:
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


def _deepest(s: Schedule, iterators: bool = False) -> List[Tuple[str, Any]]:
    """``(name, StmtSchedule)`` of the statements with the most loops (or, with ``iterators``, the most
    iterators); none when no statement has any."""
    depth = {name: len(s.scop.statement(name).iters) if iterators else len(ss.loops()) for name, ss in s.stmts}
    most = max(depth.values(), default=0)
    return [(name, ss) for name, ss in s.stmts if most and depth[name] == most]


def stride_penalty(s: Schedule) -> int:
    """How many of the deepest statements have an innermost loop that cannot be vectorised.

    The deepest statements do almost all the work; an innermost loop that
    moves a row subscript (``data[k][i]`` with ``k`` innermost) walks memory
    with a stride, and one that carries a statement's value into its next
    iteration is a sequential chain (:func:`vectorisable`).
    """
    return sum(1 for name, ss in _deepest(s) if not vectorisable(s, name, ss.loops()[-1][0]))


def serial_penalty(s: Schedule) -> int:
    """How many of the deepest statements (most loops) have no parallel loop at all."""
    return sum(1 for name, _ in _deepest(s) if not any(m[0] == name and m[2] == PARALLEL for m in s.marks))


def simd_penalty(s: Schedule) -> int:
    """How many of the statements with the most iterators (the bulk of the work: cholesky's
    ``A[i][j] -= A[i][k] * A[j][k]``, not the ``sqrt`` a tiled band also encloses) have an
    innermost loop without a ``simd`` mark."""
    return sum(1 for name, ss in _deepest(s, iterators=True) if ss.loops()
               and not any(m[0] == name and m[1] == ss.loops()[-1][1] and m[2] == SIMD for m in s.marks))


def vectorisable(s: Schedule, stmt: str, dim: int) -> bool:
    """Loop ``dim`` moves ``stmt``'s accesses with unit stride and does not feed ``stmt`` into itself
    (a recurrence or an in-order reduction such as ``A[i][j] -= A[i][k] * A[j][k]`` along ``k``)."""
    if not unit_stride_dim(s, stmt, dim):
        return False
    carried = s.carried([stmt], dim, s.deps.all(include_reductions=True))
    if carried.is_empty():
        return True
    # With reassociation a reduction vectorises with partial sums per lane, if nothing
    # else sharing the loop depends on it across iterations (vectorize's check).
    if not (carried.subtract(s.deps.reduction).is_empty() and s.scop.statement(stmt).is_reduction):
        return False
    group = s.group(stmt, dim)
    return (s.carried(group, dim, s.deps.all(include_reductions=False)).is_empty()
            and not s.simd_reduction_blocker(group, dim))


def _variants(base: Schedule, *, tile: bool, parallel: bool, l2_bytes: int):
    """Candidates from one base schedule, best first: tiled with wavefronts; tiled without; untiled."""
    variants = []
    if tile:
        variants += [(None, True), (None, False)]
    variants.append(("untiled", False))
    seen = set()
    for cap, wave in variants:
        if not parallel and cap != "untiled" and not wave:
            continue
        key = (cap, wave and parallel)
        if key in seen:
            continue
        seen.add(key)
        local: List[str] = []
        s = base
        tiled: List = []
        if cap != "untiled":
            s, tiled = tile_bands(s, l2_bytes, local, cap=cap)
        if parallel:
            s = parallelise(s, tiled, local, wavefront=wave)
            # Order first (a tie in the body order is broken the vectorisable way), then split.
            s = vector_order(s, local)
            s = distribute_innermost(s, local)
            s = vectorise(s, local)
        yield s, local


def _candidates(scop, deps, *, tile: bool, parallel: bool, fusion: str, l2_bytes: int, notes: List[str]):
    """Schedules to try, best first.

    With ``smart`` fusion, isl's fused schedule competes with isl's unfused
    one and with the original loop order: the first of them (in that order)
    whose optimised form leaves the fewest deepest statements with a strided
    innermost loop (:func:`stride_penalty`), then the fewest without any
    parallel loop (:func:`serial_penalty`), is tried first.  isl's fusion can
    skew a reduction so that it walks a column (covariance's column means),
    where the unfused or original order keeps rows innermost.
    """
    bases = [(fusion, _base_schedule(scop, deps, fusion, notes))]
    if fusion == "smart":
        alt: List[str] = []
        bases.append(("none", _base_schedule(scop, deps, "none", alt)))
        bases.append(("original order", initial(scop, deps)))
    if len(bases) == 1:
        yield from _variants(bases[0][1], tile=tile, parallel=parallel, l2_bytes=l2_bytes)
        return
    firsts = []
    for label, base in bases:
        gen = _variants(base, tile=tile, parallel=parallel, l2_bytes=l2_bytes)
        first = next(gen)
        firsts.append(((stride_penalty(first[0]), serial_penalty(first[0])), len(firsts), label, first, gen))
    firsts.sort(key=lambda x: (x[0], x[1]))
    if firsts[0][2] != fusion:
        (won_s, won_p), (mine_s, mine_p) = firsts[0][0], next(f[0] for f in firsts if f[2] == fusion)
        notes.append(f"{firsts[0][2]} chosen over isl's {fusion} fusion: of the deepest statements {won_s} with a "
                     f"strided innermost loop and {won_p} without a parallel loop, instead of {mine_s} and {mine_p}")
    for _, _, _, first, gen in firsts:
        yield first
        yield from gen


def in_order(scop: Scop) -> Optional[Scop]:
    """``scop`` with every reduction kept in order (``Store.reduce`` dropped), or None if it has none."""
    if not any(st.is_reduction for st in scop.statements):
        return None
    stmts = [dataclasses.replace(st, body=dataclasses.replace(st.body, reduce=None)) if st.is_reduction else st
             for st in scop.statements]
    return Scop.build(scop.name, stmts, scop.arrays, context=scop.context, schedule=scop.schedule)


def _scop_options(scop: Scop, *, tile: bool, parallel: bool, fusion: str, l2_bytes: int, notes: List[str]):
    """``[(scop, candidates, notes), ...]`` best first, for :func:`optimize_region` to try in turn.

    The versions of the region compete: as written, with its index sets
    split (:func:`split_index_sets`), and -- when ``scop`` has reductions
    (``extract(..., reassociate=True)``) -- both again with the reductions
    reassociated.  The first candidate of each is scored by
    :func:`stride_penalty` (a reassociated one by the loops that actually got
    a ``simd`` mark, :func:`simd_penalty`, if that is worse); the lowest
    wins, ties going to the earlier version, so a reduction is reordered
    only where that makes its loops vectorisable, and a split only where it
    helps.
    """
    strict = in_order(scop)
    bases = [(strict, "")] if strict is not None else []
    bases.append((scop, "reassociated " if strict is not None else ""))
    options = []
    for base, label in bases:
        extra: List[str] = []
        versions = [(base, extra)]
        split = split_index_sets(base, extra) if parallel else None
        if split is not None:
            versions = [(base, []), (split, extra)]
        for version, vnotes in versions:
            local: List[str] = []
            cands = _candidates(version, deps_mod.compute(version), tile=tile, parallel=parallel, fusion=fusion,
                                l2_bytes=l2_bytes, notes=local)
            first = next(cands)
            what = label + ("split" if version is not base else "as written")
            score = stride_penalty(first[0])
            if label:
                # Reassociation pays only through loops it lets the compiler vectorise; freed of
                # the order, isl's scheduler may also just pick another (skewed) fusion, so the
                # reassociated version is scored by the simd loops it actually got.
                score = max(score, simd_penalty(first[0]))
            options.append((score, len(options), what, version, itertools.chain([first], cands), vnotes + local))
    options.sort(key=lambda o: o[:2])
    if len(options) > 1:
        notes.append("versions (strided hot loops): " + ", ".join(f"{o[2]} {o[0]}" for o in options)
                     + f"; {options[0][2]} chosen")
    return [(o[3], o[4], o[5]) for o in options]


def optimize_region(cs: CScop, *, tile: bool = True, parallel: bool = True, fusion: str = "smart",
                    l2_bytes: int = 1 << 20, steps: Optional[Sequence[Step]] = None,
                    max_operations: Optional[int] = MAX_CODEGEN_OPERATIONS) -> RegionResult:
    """Schedule one extracted region and generate its replacement text (``cs.wrap`` of the loops)."""
    res = RegionResult(cs)
    if cs.skipped or cs.scop is None:
        res.notes.append(f"skipped: {cs.reason.splitlines()[0] if cs.reason else 'not affine'}")
        return res
    scop = cs.scop
    if not scop.statements:
        res.notes.append("no statements")
        return res
    if steps is not None:
        res.notes.append("schedule replayed from the given steps")
        reorders = [st for st in steps if st.kwargs().get("reduction")]
        if reorders and not any(st.is_reduction for st in scop.statements):
            raise ScheduleError(f"{cs.path}:{cs.lines[0]}: the schedule reorders reductions ({reorders[0]}); "
                                "replay it with reassociation on (polytile opt --reassociate, "
                                "optimize_c(..., reassociate=True))")
        options = [(scop, iter([(_replay(scop, deps_mod.compute(scop), steps), [])]), [])]
        max_operations = None
    else:
        options = _scop_options(scop, tile=tile, parallel=parallel, fusion=fusion, l2_bytes=l2_bytes,
                                notes=res.notes)
    last_error: Optional[Exception] = None
    deadline = time.monotonic() + CODEGEN_SECONDS
    for use_scop, cands, extra_notes in options:
        for s, local in cands:
            s = s.check("optimised schedule")
            code = None
            for separate in (True, False):
                # Candidates share the region's budget; once it is spent each still gets a short
                # try (the simpler candidates come last and generate in milliseconds).
                left = deadline - time.monotonic()
                seconds = (None if max_operations is None
                           else max(CODEGEN_MIN_SECONDS, min(left, CODEGEN_ATTEMPT_SECONDS)))
                try:
                    code, gen_notes = _generate_bounded(use_scop, s, max_operations, separate=separate,
                                                        taken=cs.taken, seconds=seconds)
                    break
                except (isl.Error, _CodegenTimeout) as e:
                    last_error = e
                    res.notes.append(f"code generation{' with separated innermost loops' if separate else ''} "
                                     f"gave up on {' -> '.join(str(x) for x in s.steps[1:])}: "
                                     f"{str(e).splitlines()[0][:120]}")
            if code is None:
                continue
            res.notes.extend(extra_notes)
            res.notes.extend(local)
            res.notes.extend(gen_notes)
            res.schedule = s
            head = "/* polytile opt: " + " -> ".join(str(st) for st in s.steps) + " */\n"
            res.text = cs.wrap(head + code)
            return res
    raise PolytileError(f"{cs.path}:{cs.lines[0]}: no schedule could be generated ({last_error})")


def optimize_regions(path, *, tile: bool = True, parallel: bool = True, fusion: str = "smart",
                     hardware: Any = "host", params: Optional[Mapping[str, int]] = None, schedule: Any = None,
                     skip_nonaffine: bool = False, assume_no_alias: bool = False,
                     function: Optional[str] = None, reassociate: bool = False, pure: Sequence[str] = (),
                     cpp_args: Sequence[str] = ()) -> Tuple[bytes, List[RegionResult]]:
    """The optimised file's bytes and what happened to each region (with ``function``: that function's body)."""
    if fusion not in FUSION:
        raise ScheduleError(f"unknown fusion choice {fusion!r}; use one of {', '.join(FUSION)}")
    # extract() reads the file first: a missing file or a directory is a located user error there.
    regions = extract(path, function=function, params=params, skip_nonaffine=skip_nonaffine,
                      assume_no_alias=assume_no_alias, reassociate=reassociate, pure=pure, cpp_args=cpp_args)
    raw = Path(path).read_bytes()
    if not regions:
        return raw, []
    l2 = _l2_bytes(hardware) if tile else 1 << 20
    steps = _load_steps(schedule)
    results = [optimize_region(cs, tile=tile, parallel=parallel, fusion=fusion, l2_bytes=l2, steps=steps)
               for cs in regions]
    reps = [(r.cscop, r.text) for r in results if r.text is not None]
    return (splice(raw, reps) if reps else raw), results


def optimize_c(path, *, tile: bool = True, parallel: bool = True, fusion: str = "smart", hardware: Any = "host",
               params: Optional[Mapping[str, int]] = None, schedule: Any = None, skip_nonaffine: bool = False,
               assume_no_alias: bool = False, function: Optional[str] = None, reassociate: bool = False,
               pure: Sequence[str] = (), cpp_args: Sequence[str] = ()) -> str:
    """The C file ``path`` with every ``#pragma scop`` region optimised (tiled, parallel, vectorised).

    With ``function``, that function's body is the region instead (``polytile opt --function``).

    By default every reduction keeps its order of evaluation, so the output
    computes bitwise the same values as the original -- when both are built
    with ``-ffp-contract=off`` (otherwise GCC may contract ``a * b + c`` into
    an FMA in one loop structure and not in the other; see
    :data:`polytile.crun.DEFAULT_FLAGS`).  ``reassociate=True``
    lets the schedule reorder the updates of reductions (``s += e``,
    ``s -= e``, ``s *= e`` whose ``e`` never reads the updated cell): loops
    over them may be tiled and interchanged, and a reduction into a scalar
    is vectorised with one partial sum per lane.  Results then differ by
    rounding; for sums of n terms the error bound grows like n * eps *
    sum(|terms|).

    ``params`` fixes parameters (the output is then only valid for those
    values; a fixed macro, like a macro cpp expanded from a header or a
    ``-D``, is guarded in the output with ``#if N != value`` / ``#error``);
    ``pure`` names functions the statements may call besides math.h's and
    those declared ``__attribute__((const))``/``((pure))``; ``cpp_args``
    are preprocessor options (``["-I", "utilities", "-DSMALL_DATASET"]``)
    -- build the output with the same ones; ``schedule`` (a file saved by ``polytile schedule -o`` or a list
    of steps) replaces the automatic choices for every region; regions the
    frontend cannot model raise, or are left untouched with
    ``skip_nonaffine=True``.  Bytes outside the regions are unchanged; a
    file without regions comes back byte-identical.
    """
    out, _ = optimize_regions(path, tile=tile, parallel=parallel, fusion=fusion, hardware=hardware, params=params,
                              schedule=schedule, skip_nonaffine=skip_nonaffine, assume_no_alias=assume_no_alias,
                              function=function, reassociate=reassociate, pure=pure, cpp_args=cpp_args)
    return out.decode("utf-8", errors="surrogateescape")
