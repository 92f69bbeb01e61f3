"""Choosing a region's schedule: the versions of the region and the candidate schedules of each, best first.

A region competes as written, with its index sets split
(:mod:`.index_sets`) and, with reassociation, with its reductions reordered
(:func:`_scop_options`); each version's base schedules (isl's with the
asked fusion and, with ``smart`` fusion, isl's unfused one and the original
order) compete through :func:`_candidates`; each base yields tiled, then
untiled variants (:func:`_variants`).  Candidates are scored by how many of
the deepest statements keep a strided or serial innermost loop
(:func:`stride_penalty`, :func:`serial_penalty`, :func:`simd_penalty`).
"""
from __future__ import annotations

import dataclasses
import itertools
from typing import Any, List, Mapping, Optional, Sequence, Tuple

from .. import deps as deps_mod
from ..poly.scop import Scop
from ..scheduling import PARALLEL, SIMD, Schedule, automatic, initial
from .expansion import expand_scalars
from .index_sets import split_index_sets
from .loop_facts import _REFUSED, vectorisable
from ..cost.parallel_work import drop_small_parallel
from .marks import distribute_innermost, parallelise, unit_stride_innermost, vector_order, vectorise
from .tiling import tile_bands


def _base_schedule(scop, deps, fusion: str, notes: List[str]) -> Schedule:
    try:
        return automatic(scop, deps, fusion)
    except _REFUSED as e:
        notes.append(f"isl's scheduler failed ({str(e).splitlines()[0]}); keeping the original order")
        return initial(scop, deps)


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


def _variants(base: Schedule, *, tile: bool, parallel: bool, l2_bytes: int, sizes: Optional[Mapping[str, int]] = None):
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
        if not tiled:
            # Tiled bands get their point loops ordered by tile_bands; a nest left untiled (doitgen's,
            # whose temporary sum[] carries every outer loop) may still need a permutation.
            s = unit_stride_innermost(s, local)
        if parallel:
            s = parallelise(s, tiled, local, wavefront=wave)
            s = drop_small_parallel(s, local, sizes=sizes)
            # Order first (a tie in the body order is broken the vectorisable way), then split.
            s = vector_order(s, local)
            s = distribute_innermost(s, local)
            s = vectorise(s, local)
        yield s, local


def _candidates(scop, deps, *, tile: bool, parallel: bool, fusion: str, l2_bytes: int, notes: List[str],
                sizes: Optional[Mapping[str, int]] = None):
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
        yield from _variants(bases[0][1], tile=tile, parallel=parallel, l2_bytes=l2_bytes, sizes=sizes)
        return
    firsts = []
    for label, base in bases:
        gen = _variants(base, tile=tile, parallel=parallel, l2_bytes=l2_bytes, sizes=sizes)
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


def _scop_options(scop: Scop, *, tile: bool, parallel: bool, fusion: str, l2_bytes: int, notes: List[str],
                  sizes: Optional[Mapping[str, int]] = None, scalars: Sequence[str] = (),
                  dead_after: Sequence[str] = (), taken=frozenset(), types: Optional[Mapping[str, str]] = None):
    """``[(scop, candidates, notes, expansion), ...]`` best first, for :func:`optimize_region` to try in turn.

    The versions of the region compete: as written, with its index sets
    split (:func:`split_index_sets`), and -- when ``scop`` has reductions
    (``extract(..., reassociate=True)``) -- both again with the reductions
    reassociated.  The first candidate of each is scored by
    :func:`stride_penalty` (a reassociated one by the loops that actually got
    a ``simd`` mark, :func:`simd_penalty`, if that is worse); the lowest
    wins, ties going to the earlier version, so a reduction is reordered
    only where that makes its loops vectorisable, and a split only where it
    helps.  Last, the region with its ``scalars`` expanded
    (:func:`.expansion.expand_scalars`; ``expansion`` is then not None)
    competes only if its first candidate has fewer strided hot loops than
    every other version, or as few and fewer hot statements without a
    parallel loop: an expansion costs memory and must buy a loop order, a
    vector loop or a parallel loop.
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
                                l2_bytes=l2_bytes, notes=local, sizes=sizes)
            first = next(cands)
            what = label + ("split" if version is not base else "as written")
            score = stride_penalty(first[0])
            if label:
                # Reassociation pays only through loops it lets the compiler vectorise; freed of
                # the order, isl's scheduler may also just pick another (skewed) fusion, so the
                # reassociated version is scored by the simd loops it actually got.
                score = max(score, simd_penalty(first[0]))
            options.append((score, len(options), what, version, itertools.chain([first], cands), vnotes + local,
                            None, serial_penalty(first[0])))
    expanded = _expanded_option(scop, options, scalars, dead_after, taken, types, tile=tile, parallel=parallel,
                                fusion=fusion, l2_bytes=l2_bytes, sizes=sizes)
    if expanded is not None:
        options.append(expanded)
    options.sort(key=lambda o: o[:2])
    if len(options) > 1:
        notes.append("versions (strided hot loops): " + ", ".join(f"{o[2]} {o[0]}" for o in options)
                     + f"; {options[0][2]} chosen")
    return [(o[3], o[4], o[5], o[6]) for o in options]


def _expanded_option(scop: Scop, options, scalars, dead_after, taken, types, **kw):
    """The option of :func:`_scop_options` with the region's scalars expanded, when it beats every other
    (its score then sorts it first); None otherwise.  Reductions marked for reassociation keep their
    order: the expansion is made of the in-order version (reordering is the other options'
    business)."""
    if not scalars or not options:
        return None
    ex = expand_scalars(in_order(scop) or scop, scalars, dead_after, taken, types)
    if ex is None:
        return None
    local: List[str] = []
    cands = _candidates(ex.scop, deps_mod.compute(ex.scop), notes=local, **kw)
    first = next(cands)
    stride, serial = stride_penalty(first[0]), serial_penalty(first[0])
    best = min(options, key=lambda o: o[:2])
    if (stride, serial) >= (best[0], best[7]):
        return None
    notes = list(ex.notes) + local
    return (stride, -1, "scalars expanded", ex.scop, itertools.chain([first], cands), notes, ex, serial)
