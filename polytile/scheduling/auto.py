"""Automatic scheduling with isl's scheduler (Pluto-style), and import of any isl schedule.

Constraints given to ``isl_schedule_constraints_compute_schedule``:

* validity    -- every dependence except reductions (aggregations may be reordered)
* proximity   -- every dependence (keep producers and consumers close: fusion, locality)
* coincidence -- every dependence including reductions (coincident = parallel without help)

Fusion choices, as in Pluto's ``--nofuse / --smartfuse / --maxfuse``, map to
isl context options:

=========  =====================================================================
``none``   ``schedule_serialize_sccs = 1``: each strongly connected component alone
``smart``  ``schedule_whole_component = 1``: fuse a component only if it all fits one band
``max``    ``schedule_whole_component = 0`` (incremental clustering), ``schedule_maximize_band_depth = 1``
=========  =====================================================================
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Dict, List, Optional

import islpy as isl

from ..deps import Dependences
from ..deadline import with_deadline
from ..errors import ScheduleError
from ..isl_parts import maps_of
from ..poly.scop import Scop
from .core import Schedule, Step, StmtSchedule, _dim_constant

FUSION = ("none", "smart", "max")

_OPTIONS = {
    "none": {"schedule_serialize_sccs": 1, "schedule_whole_component": 1, "schedule_maximize_band_depth": 0},
    # treat_coalescing off: with it, isl's scheduler never returns on some small
    # producer/consumer pairs (upsample2x at H=1, found by the schedule tests).
    "smart": {"schedule_serialize_sccs": 0, "schedule_whole_component": 1, "schedule_maximize_band_depth": 0,
              "schedule_treat_coalescing": 0},
    # Smart fusion for many statements, or when the search above is slow: bands whose outer loop is
    # parallel are preferred, which prunes isl's search (20 chained statements: over a minute -> 0.4 s)
    # but gives up time-skewed bands (stencil tiling), so small scops try "smart" first.
    "smart-outer": {"schedule_serialize_sccs": 0, "schedule_whole_component": 1, "schedule_maximize_band_depth": 0,
                    "schedule_treat_coalescing": 0, "schedule_outer_coincidence": 1},
    "max": {"schedule_serialize_sccs": 0, "schedule_whole_component": 0, "schedule_maximize_band_depth": 1},
}


@contextmanager
def _isl_options(ctx: isl.Context, options: Dict[str, int]):
    """Set isl context options for one call and restore them (the context is shared)."""
    old = {k: getattr(ctx, f"get_{k}")() for k in options}
    try:
        for k, v in options.items():
            getattr(ctx, f"set_{k}")(v)
        yield
    finally:
        for k, v in old.items():
            getattr(ctx, f"set_{k}")(v)


def isl_schedule(scop: Scop, deps: Dependences, fusion: str = "smart") -> isl.Schedule:
    """isl's schedule tree for ``scop`` under a fusion choice.

    Large programs are scheduled in pieces: the statements, in program order, are cut into runs of at
    most :data:`CHUNK_STATEMENTS` where no dependence points back across a cut, each run is scheduled
    alone and the runs are put in sequence.  isl's ILPs grow faster than linearly with the number of
    statements scheduled together (300 chained statements: 43 s in one piece, about 4 s in pieces);
    fusion across a cut is what is given up.  ``{ S[i] -> T[j] }`` with S after the cut and T before it
    would make the cut illegal, so such a cut is never made.
    """
    if fusion not in FUSION:
        raise ScheduleError(f"unknown fusion choice {fusion!r}; use one of {', '.join(FUSION)}")
    # Proximity only needs the value-based flow (where data really moves): the
    # memory-based relations add transitive pairs that make isl's ILPs much larger
    # without changing locality (conv+relu+pool, smart fusion: 56 s -> 1 s).
    # (Coalescing the relations first looked cheaper but made heat-3d take minutes.)
    validity = deps.all(include_reductions=False)
    everything = deps.all(include_reductions=True)
    proximity = deps.flow_value.union(deps.reduction)
    ctx = scop.domain.get_ctx()
    runs = _runs(scop, everything, CHUNK_STATEMENTS)
    deadline = time.monotonic() + SCHEDULER_SECONDS
    tree = None
    for names in runs:
        if len(runs) == 1:
            dom = scop.domain
            v, p, c = validity, proximity, everything
        else:
            dom = isl.UnionSet.empty(scop.domain.get_space())
            for n in names:
                dom = dom.union(isl.UnionSet.from_set(scop.statement(n).domain))
            v, p, c = (r.intersect_domain(dom).intersect_range(dom) for r in (validity, proximity, everything))
        sc = isl.ScheduleConstraints.on_domain(dom).set_validity(v).set_proximity(p).set_coincidence(c)
        part = _one_schedule(ctx, sc, fusion, deadline, len(names), scop.schedule.intersect_domain(dom))
        tree = part if tree is None else tree.sequence(part)
    return tree


#: Wall-clock budget of isl's scheduler for fusion "smart"/"max" (all pieces together) before the
#: rest falls back to "none".
SCHEDULER_SECONDS = 20.0

#: Most statements isl schedules together (see :func:`isl_schedule`).
CHUNK_STATEMENTS = 24

#: Budget of the fusion-"none" fallback (and of an explicit fusion="none").
NONE_SECONDS = 10.0

#: Smart fusion's full search is tried on at most this many statements, for at most this long.
FIRST_TRY_STATEMENTS = 16
FIRST_TRY_SECONDS = 3.0


def _one_schedule(ctx: isl.Context, sc: isl.ScheduleConstraints, fusion: str, deadline: float,
                  statements: int, original: isl.Schedule) -> isl.Schedule:
    """isl's schedule under ``fusion`` by ``deadline``, else a cheaper search, else fusion "none"
    (within :data:`NONE_SECONDS`), else ``original`` (the program's order of these statements).

    Smart fusion tries isl's full search first (for at most :data:`FIRST_TRY_SECONDS`, and only on up
    to :data:`FIRST_TRY_STATEMENTS` statements), then the outer-coincidence search.
    """
    tries = [fusion]
    if fusion == "smart":
        tries = (["smart"] if statements <= FIRST_TRY_STATEMENTS else []) + ["smart-outer"]
    # (Without fork, with_deadline runs the first try here, unlimited, and it is the answer.)
    for k, option in enumerate(tries):
        left = deadline - time.monotonic()
        if option == "none" or left <= 0:
            break
        if k + 1 < len(tries):
            left = min(left, FIRST_TRY_SECONDS)
        text = with_deadline(lambda: _computed(ctx, sc, option), left)
        if text is not None:
            return isl.Schedule.read_from_str(ctx, text)
    # isl's ILP can run for hours on some concrete sizes (embedding at N=31, K=7, D=15 with smart
    # fusion); serialising the strongly connected components keeps every schedule legal.  Even
    # that can run away (campaign seed 9805, max fusion); then the program's own order stands.
    text = with_deadline(lambda: _computed(ctx, sc, "none"), NONE_SECONDS)
    if text is not None:
        return isl.Schedule.read_from_str(ctx, text)
    return original


def _runs(scop: Scop, deps: isl.UnionMap, size: int) -> List[List[str]]:
    """The statements in program order, cut into runs of at most ``size`` (where legal).

    A cut before statement p is legal when no dependence goes from a statement at or after p to one
    before p.  A run may exceed ``size`` when no legal cut is near (a loop around many statements).
    """
    names = [s.name for s in scop.statements]
    if len(names) <= size:
        return [names]
    index = {n: k for k, n in enumerate(names)}
    # blocked[p]: some dependence crosses a cut before p backwards (source >= p > target).
    back = [0] * (len(names) + 1)
    for m in maps_of(deps):
        src = index.get(m.get_tuple_name(isl.dim_type.in_))
        dst = index.get(m.get_tuple_name(isl.dim_type.out))
        if src is not None and dst is not None and dst < src:
            back[dst + 1] += 1  # every cut p with dst < p <= src is blocked
            back[src + 1] -= 1
    runs: List[List[str]] = [[]]
    blocked = 0
    for p, n in enumerate(names):
        blocked += back[p]
        if p and len(runs[-1]) >= size and blocked == 0:
            runs.append([])
        runs[-1].append(n)
    return runs


def _computed(ctx: isl.Context, sc: isl.ScheduleConstraints, fusion: str) -> str:
    with _isl_options(ctx, _OPTIONS[fusion]):
        return sc.compute_schedule().to_str()


def automatic(scop: Scop, deps: Dependences, fusion: str = "smart", *, parallel_reductions: bool = True) -> Schedule:
    """A :class:`Schedule` from isl's scheduler (legality re-checked)."""
    tree = isl_schedule(scop, deps, fusion)
    s = from_flat(scop, deps, tree.get_map(), Step.make("base", kind="isl", fusion=fusion),
                  parallel_reductions=parallel_reductions)
    return s.check(f"isl scheduler (fusion={fusion})")


def from_flat(scop: Scop, deps: Dependences, flat: isl.UnionMap, base: Step, *,
              parallel_reductions: bool = True) -> Schedule:
    """Import a flat schedule ``{ S[x] -> [t...] }`` into 2d+1 form.

    A dimension constant for every statement is a β (sequence) position;
    others are loops.  Fillers (constant 0) restore the β/α alternation.  A
    loop is named after the iterator it equals, else ``t<k>``.
    """
    maps: Dict[str, isl.Map] = {m.get_tuple_name(isl.dim_type.in_): m for m in maps_of(flat)}
    names = [s.name for s in scop.statements]
    missing = [n for n in names if n not in maps and not scop.statement(n).domain.is_empty()]
    if missing:
        raise ScheduleError(f"schedule has no time for statement(s) {', '.join(missing)}")
    n = max(m.dim(isl.dim_type.out) for m in maps.values()) if maps else 0
    for k in names:
        if k not in maps:
            # A statement with an empty domain never runs; any (empty) time map will do.
            st = scop.statement(k)
            maps[k] = isl.Map.from_domain_and_range(st.domain, isl.Set(f"{{ [{', '.join(['0'] * n)}] }}"))
    # Pad to a common dimension count.
    for k in names:
        m = maps[k]
        extra = n - m.dim(isl.dim_type.out)
        if extra:
            m = m.add_dims(isl.dim_type.out, extra)
            for d in range(n - extra, n):
                m = m.fix_val(isl.dim_type.out, d, isl.Val.zero(m.get_ctx()))
        maps[k] = m.intersect_domain(scop.statement(k).domain)
    iters = {k: scop.statement(k).iters for k in names}
    matched: Dict[str, set] = {k: set() for k in names}
    kinds = []
    for d in range(n):
        # A dimension is a sequence position only if it is constant everywhere and no
        # statement runs an iterator there (a loop of one iteration is still a loop,
        # so steps naming it replay on shapes where it has size 1).
        consts = {k: _dim_constant(maps[k], d) for k in names}
        const = all(v is not None for v in consts.values())
        loop = True
        if const and len(set(consts.values())) > 1:
            # Different constants order the statements: a sequence position, whatever
            # one-iteration loops happen to share those values.
            loop = False
        elif const:
            loop = False
            for k in names:
                hit = _iterator_name(maps[k], d, iters[k], matched[k])
                if hit:
                    matched[k].add(hit)
                    loop = True
        else:
            for k in names:
                hit = _iterator_name(maps[k], d, iters[k], matched[k])
                if hit:
                    matched[k].add(hit)
        kinds.append("alpha" if loop else "beta")
    # Build the index list of the canonical form: -1 is a filler dimension.
    order: List[int] = []
    for d, kind in enumerate(kinds):
        want = "beta" if len(order) % 2 == 0 else "alpha"
        if kind != want:
            order.append(-1)
        order.append(d)
    if len(order) % 2 == 0:
        order.append(-1)
    t = [f"t{d}" for d in range(n)]
    outs = [t[d] if d >= 0 else "0" for d in order]
    remap = isl.Map(f"{{ [{', '.join(t)}] -> [{', '.join(outs)}] }}")
    stmts = []
    for st in scop.statements:
        m = maps[st.name].apply_range(remap)
        nm: List[Optional[str]] = []
        taken = set()
        for pos, d in enumerate(order):
            if pos % 2 == 0 or d < 0:
                nm.append(None)
                continue
            name = _iterator_name(m, pos, st.iters, taken)
            if name is None:
                if _dim_constant(m, pos) is not None:
                    nm.append(None)
                    continue
                name = f"t{pos // 2}"
            while name in taken:
                name += "_"
            taken.add(name)
            nm.append(name)
        stmts.append((st.name, StmtSchedule(m, tuple(nm))))
    return Schedule(scop, deps, tuple(stmts), frozenset(), (base,), parallel_reductions)


def _iterator_name(m: isl.Map, pos: int, iters, taken=()) -> Optional[str]:
    """The iterator that time dimension ``pos`` equals on the whole domain, if any.

    An iterator with a single value (a loop of one iteration) equals every
    dimension holding that value, so it is only matched in iterator order:
    when it is the first iterator not matched yet.
    """
    pa = isl.PwMultiAff.from_map(m).get_pw_aff(pos)
    dom = m.domain()
    first_free = next((it for it in iters if it not in taken), None)
    for k, it in enumerate(iters):
        if it in taken:
            continue
        n = dom.dim(isl.dim_type.set)
        single = dom.project_out(isl.dim_type.set, k + 1, n - k - 1).project_out(isl.dim_type.set, 0, k).is_singleton()
        if single and it != first_free:
            continue
        var = isl.PwAff.var_on_domain(isl.LocalSpace.from_space(dom.get_space()), isl.dim_type.set, k)
        if dom.is_subset(pa.sub(var.intersect_domain(dom)).zero_set()):
            return it
    return None


def initial(scop: Scop, deps: Dependences, *, parallel_reductions: bool = True) -> Schedule:
    """The Scop's original execution order in 2d+1 form.

    For a Tile program (statements in sequence) statement ``k`` becomes
    ``S_k[x0..x(r-1)] -> [k, x0, 0, x1, 0, ..., 0]``; a Scop with a shared
    time loop keeps it shared.
    """
    return from_flat(scop, deps, scop.schedule.get_map(), Step.make("base", kind="original"),
                     parallel_reductions=parallel_reductions)
