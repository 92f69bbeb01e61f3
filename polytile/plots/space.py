"""What ``polytile draw`` draws, computed with isl and no matplotlib: the points of one statement's
iteration domain (a 1-D or 2-D slice of it), the order a schedule runs them in, its tiles, the
points its parallel loop runs at the same time, and the dependences between the points.

    >>> # s = polytile.schedule("examples/matmul.tile", dims="M=8,N=8,K=8").tile("C", i=4, j=4)
    >>> # sp = statement_space(s)     # S0 over (i, j) at k = 0: 64 points, 4 tiles
    >>> # len(sp.points), len(sp.tiles) -> (64, 4)

**Order.**  A statement's schedule maps each instance to a time vector (``Schedule.table[S].map``,
the 2d+1 form of :mod:`polytile.scheduling.core`); instances run in the lexicographic order of
their vectors, so a point's *rank* among the drawn points is when it runs relative to them.

**Tiles.**  Tiling adds loops named ``<loop>_t`` (``i_t``, ``j_t``; C regions tiled by ``polytile
opt`` too) outside the point loops.  Two instances are in the same tile when their time vectors
agree up to and including the innermost ``*_t`` loop; a second tiling level (``*_t1``, register
blocks) gives sub-tiles the same way.

**Parallel loops.**  With the outermost loop marked parallel at time dimension ``p``, the
iterations of ``p`` inside one iteration of the loops around it go to different threads, each
running its iteration's instances in order.  If the threads keep the same pace, the ``r``-th
instance of every iteration runs at the same moment: such instances form a *wavefront* (their
time vectors agree before ``p`` and their ranks inside their own iteration of ``p`` are equal).

**Dependences.**  The value-based flow (:mod:`polytile.deps`: each read and the last write before
it) between instances of the statement, directly or through one other statement (``S -> T -> S``:
a stencil's two sweeps, one time step feeding the next), restricted to the drawn points.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import islpy as isl

from ..deadline import interrupts_after
from ..errors import PlotError
from ..isl_parts import maps_of

#: Drawn points at most: a figure with more is unreadable, and each point is a Python callback.
MAX_POINTS = 4096
#: Dependence arrows at most (every k-th of more, in a fixed order).
MAX_ARROWS = 400

_TILE = re.compile(r"_t$")
_SUBTILE = re.compile(r"_t\d+$")
# The parallel mark's kind, as polytile.scheduling.core spells it (PARALLEL); not imported from there so this
# module stays usable on any object with the Schedule's fields.
_PARALLEL = "parallel"


@dataclass
class Space:
    """The drawn slice of one statement's iteration domain under a schedule.

    ``points`` are the plotted coordinates (one or two per point, along ``axes``); ``fixed`` the
    values of the statement's other iterators.  ``order[k]`` is point k's rank in execution order
    (0 first).  ``tiles`` and ``subtiles`` list point indices per tile, tiles in the order they
    start; when the parallel loop is a tile loop, ``tile_together[k]`` numbers tile k's step (tiles with
    equal numbers run at the same time, on different threads); ``wavefronts`` the points of each wavefront with at least two points, in the order of
    the parallel loop; ``arrows`` (source, sink) point indices of the drawn dependences, of
    ``arrows_total`` between the drawn points.
    """

    statement: str
    text: str
    axes: Tuple[str, ...]
    fixed: Dict[str, int]
    points: List[Tuple[int, ...]]
    order: List[int]
    loops: List[str]
    tile_loops: List[str] = field(default_factory=list)
    tiles: List[List[int]] = field(default_factory=list)
    tile_together: List[int] = field(default_factory=list)
    subtiles: List[List[int]] = field(default_factory=list)
    parallel_loop: Optional[str] = None
    wavefronts: List[List[int]] = field(default_factory=list)
    arrows: List[Tuple[int, int]] = field(default_factory=list)
    arrows_total: int = 0
    notes: List[str] = field(default_factory=list)

    def summary(self) -> str:
        """One line: what was drawn (the commands print it)."""
        where = ", ".join(f"{k}={v}" for k, v in self.fixed.items())
        parts = [f"{len(self.points)} points of {self.statement} over ({', '.join(self.axes)})"
                 + (f" at {where}" if where else ""),
                 f"{len(self.tiles)} tile(s)" + (f" ({', '.join(self.tile_loops)})" if self.tile_loops else ""),
                 (f"parallel loop {self.parallel_loop}: {len(self.wavefronts)} wavefront(s)" if self.parallel_loop
                  else "no parallel loop"),
                 f"{self.arrows_total} dependence(s)" + (f", {len(self.arrows)} drawn" if len(self.arrows) < self.arrows_total
                                                         else "")]
        return "; ".join(parts)


def default_statement(schedule) -> str:
    """The statement to draw when none is named: the first contraction update, else the first statement
    with the most loops (an output's fill or reset comes before the update that matters)."""
    stmts = [st for st in schedule.scop.statements if st.name in schedule.table]
    if not stmts:
        raise PlotError("the schedule has no statement to draw")
    contract = [st for st in stmts if st.kind == "contract"]
    if contract:
        return contract[0].name
    most = max(len(st.iters) for st in stmts)
    return next(st.name for st in stmts if len(st.iters) == most)


def _axes(iters: Sequence[str], axes: Optional[Sequence[str]], fixed: Mapping[str, int], stmt: str) -> Tuple[str, ...]:
    unknown = [n for n in list(axes or ()) + list(fixed) if n not in iters]
    if unknown:
        raise PlotError(f"{stmt} has no iterator {', '.join(map(repr, unknown))}; its iterators are {', '.join(iters)}")
    if axes:
        axes = tuple(axes)
        if not 1 <= len(axes) <= 2 or len(set(axes)) != len(axes):
            raise PlotError(f"name one or two different iterators to draw along, got {', '.join(axes)}")
        both = [a for a in axes if a in fixed]
        if both:
            raise PlotError(f"{', '.join(both)} is drawn along an axis and also fixed by the slice; choose one")
        return axes
    free = [v for v in iters if v not in fixed]
    if not free:
        raise PlotError(f"the slice fixes every iterator of {stmt}; leave one or two free to draw along")
    return tuple(free[:2])  # the outermost free iterators: where tiles and parallel loops usually are


def _slice(domain: isl.Set, iters: Sequence[str], axes: Sequence[str], fixed: Mapping[str, int], stmt: str):
    """The domain with every iterator outside ``axes`` fixed: to ``fixed``'s value, else its smallest."""
    values: Dict[str, int] = {}
    s = domain
    for d, name in enumerate(iters):
        if name in axes:
            continue
        if name in fixed:
            value = int(fixed[name])
        else:
            low = s.dim_min_val(d)
            if not low.is_int():
                raise PlotError(f"{stmt}: iterator {name} has no smallest value in its domain; fix it with --slice")
            value = int(low.to_python())
        lo, hi = s.dim_min_val(d), s.dim_max_val(d)
        s = s.fix_val(isl.dim_type.set, d, isl.Val.int_from_si(s.get_ctx(), value))
        if s.is_empty():
            span = f"{lo.to_python()}..{hi.to_python()}" if lo.is_int() and hi.is_int() else "another range"
            raise PlotError(f"the slice {name}={value} holds no point of {stmt} ({name} runs over {span} there)")
        values[name] = value
    return s, values


def _points(m: isl.Map, n_in: int) -> List[Tuple[Tuple[int, ...], Tuple[int, ...]]]:
    """The (instance, time vector) pairs of a statement's time map, on a bounded domain."""
    out: List[Tuple[Tuple[int, ...], Tuple[int, ...]]] = []
    n = n_in + m.dim(isl.dim_type.out)

    def add(pt):
        v = [int(pt.get_coordinate_val(isl.dim_type.set, d).to_python()) for d in range(n)]
        out.append((tuple(v[:n_in]), tuple(v[n_in:])))

    with interrupts_after():  # Ctrl-C must not unwind through isl from the callback (polytile.isl_parts)
        m.wrap().foreach_point(add)
    return out


def _groups(keys: Sequence[tuple], order: Sequence[int]) -> List[List[int]]:
    """Point indices grouped by equal key, groups in the order their first point runs."""
    by: Dict[tuple, List[int]] = {}
    for k in sorted(range(len(keys)), key=lambda k: order[k]):
        by.setdefault(keys[k], []).append(k)
    return list(by.values())


def _thin(arrows: List[Tuple[int, int]], points: Sequence[Tuple[int, ...]],
          most: int) -> Tuple[List[Tuple[int, int]], int]:
    """At most ``most`` of ``arrows``: all those into the points on a grid of every ``stride``-th
    coordinate, the smallest stride that is few enough -- so each drawn point still shows its whole
    fan of dependences (a stencil's shape), rather than a scattered sample of single arrows."""
    if len(arrows) <= most:
        return arrows, 1
    lows = [min(p[d] for p in points) for d in range(len(points[0]))]
    stride = 2
    while True:
        kept = [(a, b) for a, b in arrows if all((points[b][d] - lows[d]) % stride == 0 for d in range(len(lows)))]
        if len(kept) <= most:
            return kept, stride
        stride += 1


def _dependences(schedule, stmt: str, sliced: isl.Set) -> isl.Map:
    """Value-based flow among ``stmt``'s instances (direct, or through one other statement), on the slice."""
    deps = schedule.deps
    flow = deps.flow_value
    space = isl.Map.from_domain_and_range(sliced, sliced).get_space()
    rel = isl.Map.empty(space)
    to_other: Dict[str, isl.Map] = {}
    from_other: Dict[str, isl.Map] = {}
    for m in maps_of(flow):
        src, dst = m.get_tuple_name(isl.dim_type.in_), m.get_tuple_name(isl.dim_type.out)
        if src == stmt and dst == stmt:
            rel = rel.union(m)
        elif src == stmt:
            to_other[dst] = m
        elif dst == stmt:
            from_other[src] = m
    for other, m in to_other.items():
        if other in from_other:
            rel = rel.union(m.apply_range(from_other[other]))
    rel = rel.intersect_domain(sliced).intersect_range(sliced)
    if flow is deps.flow:
        # polytile.deps fell back to the memory-based flow (every earlier write, not the last one): keep
        # the latest source of each sink, so a reduction does not become all pairs of its points.
        rel = rel.reverse().lexmax().reverse()
    return rel.coalesce()


def statement_space(schedule, stmt: Optional[str] = None, *, axes: Optional[Sequence[str]] = None,
                    fixed: Optional[Mapping[str, int]] = None, max_points: int = MAX_POINTS,
                    max_arrows: int = MAX_ARROWS) -> Space:
    """The drawn slice of statement ``stmt`` (a name such as ``S0``, or a Tile tensor: its update;
    default :func:`default_statement`) under ``schedule`` (a :class:`polytile.scheduling.Schedule`).

    ``axes`` names the one or two iterators to draw along (default: the two outermost not in
    ``fixed``); ``fixed`` gives values to others, and every iterator left is fixed at its smallest
    value (``Space.fixed`` says which).  More than ``max_points`` points is a PlotError asking for
    smaller sizes or a slice.  See the module docstring for what is computed.
    """
    name = schedule.resolve(stmt) if stmt is not None else default_statement(schedule)
    st = schedule.scop.statement(name)
    ss = schedule.table.get(name)
    if ss is None:
        raise PlotError(f"the schedule has no time map for {name}")
    iters = list(st.iters)
    if not iters:
        raise PlotError(f"{name} runs once (it has no loops): there is no iteration space to draw")
    domain = st.domain
    if domain.dim(isl.dim_type.param):
        params = [domain.get_dim_name(isl.dim_type.param, k) for k in range(domain.dim(isl.dim_type.param))]
        raise PlotError(f"{name}'s domain depends on {', '.join(params)}: give them values "
                        f"(--dims {','.join(f'{p}=<int>' for p in params)}) to draw it")
    fixed = {k: int(v) for k, v in (fixed or {}).items()}
    ax = _axes(iters, axes, fixed, name)
    sliced, values = _slice(domain, iters, ax, fixed, name)
    for d, it in enumerate(iters):
        if it in ax and not (sliced.dim_min_val(d).is_int() and sliced.dim_max_val(d).is_int()):
            raise PlotError(f"{name}: iterator {it} is unbounded; nothing finite to draw")
    count = sliced.count_val().to_python()
    if count > max_points:
        raise PlotError(f"{count} points of {name} to draw, more than {max_points}: pass smaller --dims, or fix "
                        f"more iterators with --slice")
    pairs = sorted(_points(ss.map.intersect_domain(sliced), len(iters)), key=lambda p: p[1])
    if not pairs:
        raise PlotError(f"{name} has no instance in this slice")
    missing = count - len(pairs)
    pos = [iters.index(a) for a in ax]
    points = [tuple(inst[k] for k in pos) for inst, _ in pairs]
    times = [t for _, t in pairs]
    order = list(range(len(pairs)))  # sorted by time vector: the rank is the index
    index = {inst: k for k, (inst, _) in enumerate(pairs)}
    loops = [n for n in ss.names if n is not None]
    space = Space(name, st.text or st.c_text or st.kind, ax, values, points, order, loops)
    if missing:
        # A time map is meant to cover its statement's whole domain; say so rather than draw a hole silently.
        space.notes.append(f"the schedule gives no time to {missing} of the {count} points in the slice; "
                           f"they are not drawn")

    tile_dims = [d for d, n in enumerate(ss.names) if n is not None and _TILE.search(n)]
    if tile_dims:
        last = tile_dims[-1]
        space.tile_loops = [ss.names[d] for d in tile_dims]
        space.tiles = _groups([t[:last + 1] for t in times], order)
        sub = [d for d, n in enumerate(ss.names) if n is not None and _SUBTILE.search(n) and d > last]
        if sub:
            space.subtiles = _groups([t[:sub[-1] + 1] for t in times], order)
    marked = {m[:3] for m in schedule.marks}
    par = [d for d, n in enumerate(ss.names) if n is not None and (name, n, _PARALLEL) in marked]
    if par:
        p = par[0]
        space.parallel_loop = ss.names[p]
        # Rank of each point inside its own iteration of the parallel loop (the points come in time order).
        seen: Dict[tuple, int] = {}
        keys = []
        for t in times:
            it = t[:p + 1]
            r = seen.get(it, 0)
            seen[it] = r + 1
            keys.append((t[:p], r))
        space.wavefronts = [sorted(g, key=lambda k: times[k][p]) for g in _groups(keys, order) if len(g) > 1]
        if tile_dims and p <= tile_dims[-1]:
            # A parallel tile loop: each thread runs the tiles of its iterations in order, so the r-th tile
            # of every iteration runs at the same time (the wavefront rule, one level up).
            steps: Dict[tuple, int] = {}
            within: Dict[tuple, int] = {}
            for tile in space.tiles:
                first = times[tile[0]]
                r = within.get(first[:p + 1], 0)
                within[first[:p + 1]] = r + 1
                space.tile_together.append(steps.setdefault((first[:p], r), len(steps)))
    else:
        space.notes.append("no loop of this statement is marked parallel")

    arrows = []
    for src, dst in _points(_dependences(schedule, name, sliced), len(iters)):
        if src in index and dst in index:
            arrows.append((index[src], index[dst]))
    arrows.sort()
    space.arrows_total = len(arrows)
    space.arrows, stride = _thin(arrows, points, max_arrows)
    if stride > 1:
        space.notes.append(f"{len(space.arrows)} of {space.arrows_total} dependences drawn: those into one point in "
                           f"{stride} along each axis")
    if values:
        space.notes.append("slice " + ", ".join(f"{k}={v}" + ("" if k in fixed else " (its smallest value)")
                                                for k, v in values.items()))
    return space
