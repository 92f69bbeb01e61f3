"""Source-to-source optimisation of C SCoPs (what Pluto's ``polycc`` does, on polytile's machinery).

For every ``#pragma scop`` region of a C file:

1. extract it (:mod:`polytile.frontends.c`) and compute its dependences;
2. schedule it with isl's scheduler (Pluto-style skews make bands
   permutable, so stencils with a time loop become tileable), or keep the
   original order if the scheduler fails;
3. tile the outermost band of consecutive loops of every statement group,
   with sizes chosen from the hardware descriptor (a tile's footprint fits
   half of L2); a tiling the dependences forbid is retried with one loop
   fewer, so an illegal tiling is never emitted;
4. mark the outermost parallel loop; when a tiled band has no parallel tile
   loop (a time-tiled stencil), skew its outer tile loop by the next one
   (a wavefront) so that the next tile loop becomes parallel;
5. mark the innermost unit-stride loop of each statement ``simd`` where no
   dependence forbids it;
6. generate the region's loops (:func:`polytile.codegen.c.generate_region`)
   and splice them into the file: every byte outside the regions is kept.

Every transformation goes through :mod:`polytile.schedule`, which checks it
against the dependences; the final schedule is checked once more.

>>> # text = optimize_c("jacobi-2d.c")            # the optimised file as a string
>>> # text = optimize_c("gemm.c", tile=False)     # isl's schedule and parallel marks only
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import islpy as isl

from . import deps as deps_mod
from .codegen.c import generate_region
from .errors import IllegalSchedule, PolytileError, ScheduleError
from .frontends.c import CScop, extract, splice
from .schedule import FUSION, PARALLEL, SIMD, Schedule, Step, apply_step, auto_parallel, automatic, initial
from .schedule import reorder as reorder_step
from .schedule import skew as skew_step
from .schedule import tile as tile_step
from .schedule import vectorize as vectorize_step

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


def tile_sizes(s: Schedule, rep: str, loops: Sequence[str], group: Sequence[str], l2_bytes: int,
               cap: Optional[int] = None) -> Dict[str, int]:
    """Tile sizes for a band: 32 per space loop, 16 (8 above 2-D) for a time loop,
    halved until a tile's footprint fits half of L2.

    The footprint of a tile is estimated per array as its element size times
    ``size ** min(rank, space loops)`` (a 2-D array touched by a 3-D tile
    holds a square of it).
    """
    def time_like(dim: int) -> bool:
        # A time loop for most of the group's statements (fdtd-2d's ey[0][j] = fict[t] reads by t).
        members = [g for g in group if s.table[g].names[dim]]
        votes = sum(1 for g in members if _time_like(s, g, dim))
        return bool(members) and 2 * votes >= len(members)

    time = [time_like(s.loop_dim(rep, l)) for l in loops]
    n_space = max(1, sum(1 for t in time if not t))
    # (Longer tiles would help 1-D stencils, but under a wavefront isl's code generator
    # takes minutes on tiles much longer than they are wide: jacobi-1d at 16x256.)
    base = 32
    t_size = 16 if n_space <= 2 else 8
    arrays = _arrays_of(s, group)

    def footprint(b: int) -> int:
        return sum(size * b ** max(1, min(rank, n_space)) for size, rank in arrays.values()) or _DEFAULT_ELEMENT

    while base > 4 and footprint(base) > l2_bytes // 2:
        base //= 2
    sizes = {l: (t_size if t else base) for l, t in zip(loops, time)}
    return {l: min(v, cap) for l, v in sizes.items()} if cap else sizes


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
    from .pipeline import schedule_steps

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
    from .pipeline import replay

    return replay(scop, deps, steps)


#: isl operations allowed for generating one candidate's code (a wavefront over long thin tiles can
#: make isl's AST generator run for minutes; the next, simpler candidate is tried instead).
MAX_CODEGEN_OPERATIONS = 3_000_000


def _generate_bounded(scop, s: Schedule, max_ops: Optional[int]) -> Tuple[str, List[str]]:
    ctx = scop.domain.get_ctx()
    if not max_ops:
        return generate_region(scop, s.tree())
    old = ctx.get_max_operations()
    ctx.set_max_operations(max_ops)
    ctx.reset_operations()
    try:
        return generate_region(scop, s.tree())
    finally:
        ctx.set_max_operations(old)
        ctx.reset_operations()


def _candidates(scop, deps, *, tile: bool, parallel: bool, fusion: str, l2_bytes: int, notes: List[str]):
    """Schedules to try, best first: tiled with wavefronts; tiled without; untiled."""
    base = _base_schedule(scop, deps, fusion, notes)
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
            s = vectorise(s, local)
        yield s, local


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
    deps = deps_mod.compute(scop)
    if steps is not None:
        res.notes.append("schedule replayed from the given steps")
        cands = iter([(_replay(scop, deps, steps), [])])
        max_operations = None
    else:
        cands = _candidates(scop, deps, tile=tile, parallel=parallel, fusion=fusion, l2_bytes=l2_bytes,
                            notes=res.notes)
    last_error: Optional[Exception] = None
    for s, local in cands:
        s = s.check("optimised schedule")
        try:
            code, gen_notes = _generate_bounded(scop, s, max_operations)
        except isl.Error as e:
            last_error = e
            res.notes.append(f"code generation gave up on {' -> '.join(str(x) for x in s.steps[1:])}: "
                             f"{str(e).splitlines()[0][:120]}")
            continue
        res.notes.extend(local)
        res.notes.extend(gen_notes)
        res.schedule = s
        head = "/* polytile opt: " + " -> ".join(str(st) for st in s.steps) + " */\n"
        res.text = cs.wrap(head + code)
        return res
    raise PolytileError(f"{cs.path}:{cs.lines[0]}: no schedule could be generated ({last_error})")


def optimize_regions(path, *, tile: bool = True, parallel: bool = True, fusion: str = "smart",
                     hardware: Any = "host", params: Optional[Mapping[str, int]] = None, schedule: Any = None,
                     skip_nonaffine: bool = False, assume_no_alias: bool = False) -> Tuple[bytes, List[RegionResult]]:
    """The optimised file's bytes and what happened to each region."""
    if fusion not in FUSION:
        raise ScheduleError(f"unknown fusion choice {fusion!r}; use one of {', '.join(FUSION)}")
    raw = Path(path).read_bytes()
    regions = extract(path, params=params, skip_nonaffine=skip_nonaffine, assume_no_alias=assume_no_alias)
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
               assume_no_alias: bool = False) -> str:
    """The C file ``path`` with every ``#pragma scop`` region optimised (tiled, parallel, vectorised).

    ``params`` fixes parameters (the output is then only valid for those
    values); ``schedule`` (a file saved by ``polytile schedule -o`` or a list
    of steps) replaces the automatic choices for every region; regions the
    frontend cannot model raise, or are left untouched with
    ``skip_nonaffine=True``.  Bytes outside the regions are unchanged; a
    file without regions comes back byte-identical.
    """
    out, _ = optimize_regions(path, tile=tile, parallel=parallel, fusion=fusion, hardware=hardware, params=params,
                              schedule=schedule, skip_nonaffine=skip_nonaffine, assume_no_alias=assume_no_alias)
    return out.decode("utf-8", errors="surrogateescape")
