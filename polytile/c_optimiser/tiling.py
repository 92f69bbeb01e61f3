"""Tiling a region's bands: tile sizes from the hardware descriptor, and which bands are worth tiling.

The outermost band of consecutive loops of every statement group is tiled
(:func:`tile_bands`) with sizes chosen so that a tile's footprint fits half
of L2 (:func:`tile_sizes`); a time-tiled band gets a long vector tile
innermost.  A tiling the dependences forbid is retried with one loop fewer,
so an illegal tiling is never emitted; inside the tiles a unit-stride loop
carrying no dependence moves innermost (:func:`_intra_tile`).
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence, Tuple

import islpy as isl

from ..isl_parts import maps_of
from ..scheduling import Schedule
from ..scheduling import reorder as reorder_step
from ..scheduling import tile as tile_step
from .machine import CMachine
from .register_blocks import register_block
from .loop_facts import (
    _DEFAULT_ELEMENT, _REFUSED, _arrays_of, _band, _carried_any, _groups, _time_like, _unit_stride, tile_loop_name,
    vectorisable,
)


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

    Why not the cost model the Tile path asks (``polytile.cost``, ``polytile.autotile``): a C region's
    sizes are usually parameters (``n``, ``tsteps``), and the model needs concrete trip counts --
    ``cost.predict`` of a parametric schedule is 0 -- while autotile's candidates are built for
    contractions with a recognised reduction (``autotile.roles``), which C statements in their own
    text are not unless ``--reassociate`` makes them so.  Ranking a few candidate sizes with the model
    at the sizes fixed by ``--dims`` (or assumed ones) is the way to join the two; until then this rule
    reads the one fact it needs from the descriptor, the L2 size.
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


def tile_bands(s: Schedule, machine: CMachine, notes: List[str], cap: Optional[int] = None,
               ) -> Tuple[Schedule, List[Tuple[List[str], str, List[str]]]]:
    """Tile the outermost band of every group; returns the schedule and ``(group, rep, tile loops)`` per tiled band.

    Tile sizes come from ``machine.l2_bytes`` (:func:`tile_sizes`); a band of one C update gets a
    register block inside its tiles where one applies (:func:`.register_blocks.register_block`).
    """
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
            sizes = tile_sizes(s, rep, band, group, machine.l2_bytes, cap)
            try:
                new = tile_step(s, rep, sizes)
            except _REFUSED as e:
                notes.append(f"tiling {rep} loops {', '.join(band)} refused: {str(e).splitlines()[0]}")
                depth -= 1
                continue
            p = new.loop_dim(rep, tile_loop_name(new, rep, band[0]))
            tile_loops = [new.table[rep].names[p + 2 * k] for k in range(depth)]
            notes.append(f"tiled {rep} loops {', '.join(band)} by "
                         f"{', '.join(f'{l}={sizes[l]}' for l in band)}")
            s = _intra_tile(new, rep, band, notes)
            s = register_block(s, rep, group, band, sizes, machine, notes)
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
        maps: List[isl.Map] = [st.write_map(), *maps_of(st.reads())]
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
