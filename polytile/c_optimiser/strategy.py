"""Choosing a region's schedule: the versions of the region and the candidate schedules of each, best first.

A region competes as written, with its index sets split
(:mod:`.index_sets`) and, with reassociation, with its reductions reordered
(:func:`_scop_options`); each version's base schedules (isl's with the
asked fusion and, with ``smart`` fusion, isl's unfused one and the original
order) compete through :func:`_candidates`; each base yields tiled, then
untiled variants (:func:`_variants`).  Bases are scored by :func:`choice_key`:
strided innermost loops, nests without a parallel loop, updates without a
register block, extra passes over the largest arrays and loops around the
parallel loop, in that order (the cost
model's terms, largest first); versions by :func:`stride_penalty` and
:func:`simd_penalty`.

The search is bounded: the dependence analysis of the region gets
:data:`REGION_DEPS_OPERATIONS` isl operations (past them it is left as
written), that of each other version :data:`VERSION_DEPS_OPERATIONS`, and no
further version is considered once the region's :class:`Budget` is spent.
"""
from __future__ import annotations

import dataclasses
import itertools
import time
from typing import Any, List, Mapping, Optional, Sequence, Tuple

import islpy as isl

from .. import deps as deps_mod
from ..poly.scop import Scop
from ..scheduling import PARALLEL, SIMD, Schedule, automatic, initial
from .expansion import expand_scalars
from .index_sets import split_index_sets
from .loop_facts import _REFUSED, _arrays_of, vectorisable
from ..cost.parallel_work import drop_small_parallel
from .marks import distribute_innermost, parallelise, unit_stride_innermost, vector_order, vectorise
from .machine import CMachine
from .register_blocks import block_untiled, unblocked_penalty
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


def region_penalty(s: Schedule) -> int:
    """How many loops enclose the outermost parallel loop of each statement with the most iterators, summed
    (the same statements in every candidate: a tiled schedule gives every statement of a band as many
    loops, so "most loops" would count more statements in it than in the original order).

    Every iteration of a loop around a parallel loop enters a parallel region again (fork, join
    barrier: the cost model's ``OMP_REGION_S`` per entry, ``prod(trips[:p])`` entries,
    :func:`polytile.cost.roofline._parallel_split`): a wavefront over tiles (an outer sequential
    time loop, a parallel loop inside) pays it ``~n / tile`` times where an outermost parallel loop
    pays it once.  Statements without a parallel loop count in :func:`serial_penalty` instead.
    """
    total = 0
    for name, ss in _deepest(s, iterators=True):
        dims = [s.loop_dim(name, m[1]) for m in s.marks if m[0] == name and m[2] == PARALLEL]
        if dims:
            total += sum(1 for d, _ in ss.loops() if d < min(dims))
    return total


def reread_penalty(s: Schedule) -> int:
    """How many extra passes over the largest arrays of the statements with the most iterators the schedule makes,
    when those statements do about as much work as their arrays have elements (no more loops than dimensions).

    Each top-level loop nest (:meth:`Schedule.nests`) that touches an array reads it from memory
    again once the array outgrows the caches; fusing the nests reads it once.  Only the arrays of the
    highest rank those statements touch count (a matrix re-read costs as much as the work on it; a vector re-read costs a row of it).  ``A`` touched by three separate nests: 2.
    """
    hot = {name for name, _ in _deepest(s, iterators=True)}
    ranks: dict = {}
    for name in hot:
        ranks.update({a: r for a, (_, r) in _arrays_of(s, [name]).items()})
    top = max(ranks.values(), default=0)
    depth = max((len(s.scop.statement(name).iters) for name in hot), default=0)
    if depth > top:
        # More loops than the arrays have dimensions: every element is reused across a loop (syrk's
        # n^2 m multiply-adds over n^2 + nm elements), so one more sweep over an array is small
        # against the work, and the locality tiling gives counts for more.  Fusing such nests to
        # save a pass can cost the tiling (syrk's original order: one untileable nest, 3.5x slower
        # than isl's unfused, tiled one).
        return 0
    big = {a for a, r in ranks.items() if r == top and r >= 1}
    passes = {a: 0 for a in big}
    for group, _ in s.nests(loopless=True):
        for a in set(_arrays_of(s, group)) & big:
            passes[a] += 1
    return sum(max(0, n - 1) for n in passes.values())


def _variants(base: Schedule, *, tile: bool, parallel: bool, machine: CMachine, sizes: Optional[Mapping[str, int]] = None):
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
            s, tiled = tile_bands(s, machine, local, cap=cap)
        if not tiled:
            # Tiled bands get their point loops ordered by tile_bands; a nest left untiled (doitgen's,
            # whose temporary sum[] carries every outer loop) may still need a permutation.
            s = unit_stride_innermost(s, local)
        # ... and the updates of nests left untiled a register block (tiled bands got theirs inside the tiles)
        s = block_untiled(s, machine, local, skip=[n for group, _, _ in tiled for n in group])
        if parallel:
            s = parallelise(s, tiled, local, wavefront=wave)
            s = drop_small_parallel(s, local, sizes=sizes)
        # Order first (a tie in the body order is broken the vectorisable way), then split: a serial
        # schedule needs vector loops as much (jacobi-1d's fused, skewed sweeps ran 6x slower).
        s = vector_order(s, local)
        s = distribute_innermost(s, local)
        if parallel:  # simd marks are OpenMP pragmas too; without parallel the output has none
            s = vectorise(s, local)
        yield s, local


def serial_schedule(scop: Scop, deps) -> Schedule:
    """The region in its original order, run serially, with only its innermost loops shaped: a loop the
    statement can vectorise moved innermost where that is legal (:func:`unit_stride_innermost`), fused
    statements ordered and split so each vector loop holds one.  What a region runs when its parallel
    loops do not pay for the thread team (:mod:`.team`).

    Before: ``for p: for s: sum[p] += A[r][q][s] * C4[s][p]``  After: ``for s: for p: ...``
    """
    s, _ = next(_variants(initial(scop, deps), tile=False, parallel=False, machine=CMachine()))
    return s


#: The criteria bases are compared by, in order (see :func:`choice_key`): what each costs in the cost
#: model's terms, largest first -- a strided or chained innermost loop runs scalar code
#: (``EFF_SCALAR / lanes`` of peak against ``EFF_VECTOR``: 3-8x), a nest without a parallel loop runs on
#: one core, a matrix read in another pass is another sweep over memory (a memory-bound kernel's whole
#: time), a parallel loop inside another loop pays a parallel region (``OMP_REGION_S``) per iteration.
CRITERIA = ("strided innermost loops", "nests without a parallel loop", "updates without a register block",
            "extra passes over the largest arrays", "loops around the parallel loop")


def block_penalty(s: Schedule) -> int:
    """How many of the statements with the most iterators could keep their running values in a register
    block but have none (:func:`.register_blocks.unblocked_penalty`): such an update loads and stores its
    cell every reduction step (gemm's ``C[i][j]``, 3.7x slower than a 4 x 16 block); a block needs the
    statement alone in its band, which an unfused schedule gives (gemm's ``C[i][j] *= beta`` in its
    own nest costs one more sweep over ``C`` against ``n`` sweeps saved)."""
    return unblocked_penalty(s, [name for name, _ in _deepest(s, iterators=True)])


def choice_key(s: Schedule) -> Tuple[int, int, int, int, int]:
    """How a candidate's deepest statements fare on each of :data:`CRITERIA` (lower is better):
    :func:`stride_penalty`, :func:`serial_penalty`, :func:`block_penalty`, :func:`reread_penalty`,
    :func:`region_penalty`.

    All four are read from the schedule itself, so they hold for any size of the parameters (the
    cost model's roofline (:func:`polytile.cost.predict`) needs concrete trip counts, and at the
    sizes of a real run its footprint counting of a whole region takes minutes).
    """
    return stride_penalty(s), serial_penalty(s), block_penalty(s), reread_penalty(s), region_penalty(s)


def _describe(label: str, key: Tuple[int, ...]) -> str:
    return f"{label} (" + ", ".join(f"{v} {c}" for v, c in zip(key, CRITERIA)) + ")"


def _candidates(scop, deps, *, tile: bool, parallel: bool, fusion: str, machine: CMachine, notes: List[str],
                sizes: Optional[Mapping[str, int]] = None):
    """Schedules to try, best first.

    With ``smart`` fusion, isl's fused schedule competes with isl's unfused
    one and with the original loop order: the optimised form of each is
    scored by :func:`choice_key` and the lowest key is tried first, ties going
    to the earlier base (in that order).  isl's fusion can skew a reduction so
    that it walks a column (covariance's column means, 2mm's ``tmp[i][j] +=
    A[i][k] * B[k][j]`` fused with the next product keeps ``k`` innermost), or
    fuse sweeps in different directions under a wavefront (gemver: every
    innermost loop strided, a parallel region per wavefront step), where the
    unfused or original order keeps rows innermost and an outermost parallel
    loop; fusion that saves a pass over a matrix without costing either (atax,
    gesummv) is kept.
    """
    bases = [(fusion, _base_schedule(scop, deps, fusion, notes))]
    if fusion == "smart":
        alt: List[str] = []
        bases.append(("none", _base_schedule(scop, deps, "none", alt)))
        bases.append(("original order", initial(scop, deps)))
    if len(bases) == 1:
        yield from _variants(bases[0][1], tile=tile, parallel=parallel, machine=machine, sizes=sizes)
        return
    firsts = []
    for label, base in bases:
        gen = _variants(base, tile=tile, parallel=parallel, machine=machine, sizes=sizes)
        first = next(gen)
        firsts.append((choice_key(first[0]), len(firsts), label, first, gen))
    firsts.sort(key=lambda x: (x[0], x[1]))
    if firsts[0][2] != fusion:
        mine = next(f for f in firsts if f[2] == fusion)
        notes.append(f"{firsts[0][2]} chosen over isl's {fusion} fusion: of the deepest statements, "
                     f"{_describe(firsts[0][2], firsts[0][0])} against {_describe(fusion, mine[0])}")
    else:
        others = [f for f in firsts if f[2] != fusion]
        notes.append(f"isl's {fusion} fusion kept: {_describe(fusion, firsts[0][0])}; "
                     + "; ".join(_describe(f[2], f[0]) for f in others))
    for _, _, _, first, gen in firsts:
        yield first
        yield from gen


#: isl operations (about three million a second) the dependence analysis of one extra version of a region
#: may take: its index sets split, its reductions reordered or its scalars expanded.  A version past it is not
#: considered (a fuzzed 37x37 region: as written 1.4 s, split into 18 statements 38 s).  Counted by isl, so the
#: choice does not depend on the machine's speed or load.
VERSION_DEPS_OPERATIONS = 20_000_000

#: isl operations the dependence analysis of the region as written may take (about 100 s): past it the region
#: is left as written (nothing could be shown legal).
REGION_DEPS_OPERATIONS = 300_000_000

#: Wall-clock seconds of a region's choices (dependences, isl's schedules, the candidates' checks) after which
#: no further version is considered; code generation has its own budget (region.CODEGEN_SECONDS).
OPTIONS_SECONDS = 45.0


@dataclasses.dataclass
class Budget:
    """The wall-clock budget of one region's choices: ``seconds`` from now.  ``spent`` records that a version
    was left out for it (the result then depends on the machine's load).

    >>> b = Budget(60.0); b.over(), b.spent
    (False, False)
    """

    seconds: float
    spent: bool = False

    def __post_init__(self) -> None:
        self.deadline = time.monotonic() + self.seconds

    def over(self) -> bool:
        if time.monotonic() > self.deadline:
            self.spent = True
        return self.spent


def version_deps(scop: Scop, max_operations: Optional[int] = None) -> Optional[deps_mod.Dependences]:
    """The dependences of ``scop`` (a version of a region) within ``max_operations`` isl operations (default
    :data:`VERSION_DEPS_OPERATIONS`); None past them.

    >>> # version_deps(split_version) -> Dependences, or None when isl gave up
    """
    if max_operations is None:
        max_operations = VERSION_DEPS_OPERATIONS
    ctx = scop.domain.get_ctx()
    old = ctx.get_max_operations()
    ctx.set_max_operations(max_operations)
    ctx.reset_operations()
    try:
        return deps_mod.compute(scop)
    except isl.Error:
        if not _quota_spent(ctx):
            raise
        return None
    finally:
        ctx.set_max_operations(old)
        ctx.reset_operations()


def _quota_spent(ctx: isl.Context) -> bool:
    """Whether ``ctx`` has used up its operation quota.  isl's own message says so only where the quota ran
    out; a caller further up may fail on the NULL it got back ("isl_union_flow_get_may_dependence failed:
    <no message>").  The count only grows until reset, so a small operation that counts fails too."""
    try:
        isl.Set("{ [i] : 0 <= i <= 4 }", context=ctx).lexmin()
    except isl.Error:
        return True
    return False


def in_order(scop: Scop) -> Optional[Scop]:
    """``scop`` with every reduction kept in order (``Store.reduce`` dropped), or None if it has none."""
    if not any(st.is_reduction for st in scop.statements):
        return None
    stmts = [dataclasses.replace(st, body=dataclasses.replace(st.body, reduce=None)) if st.is_reduction else st
             for st in scop.statements]
    return Scop.build(scop.name, stmts, scop.arrays, context=scop.context, schedule=scop.schedule)


def _scop_options(scop: Scop, *, tile: bool, parallel: bool, fusion: str, machine: CMachine, notes: List[str],
                  sizes: Optional[Mapping[str, int]] = None, scalars: Sequence[str] = (),
                  dead_after: Sequence[str] = (), taken=frozenset(), types: Optional[Mapping[str, str]] = None,
                  budget: Optional[Budget] = None):
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
    vector loop or a parallel loop.  Every version but the first is bounded
    (:func:`version_deps`, and ``budget``: none is considered once it is spent).
    """
    budget = budget if budget is not None else Budget(OPTIONS_SECONDS)
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
            what = label + ("split" if version is not base else "as written")
            if options:
                dependences = None if budget.over() else version_deps(version)
                if dependences is None:
                    notes.append(_left_out(what, budget))
                    continue
            else:
                dependences = version_deps(version, REGION_DEPS_OPERATIONS)
                if dependences is None:
                    notes.append(f"left as written: its dependence analysis ran past {REGION_DEPS_OPERATIONS:,} "
                                 "isl operations")
                    return []
            local: List[str] = []
            cands = _candidates(version, dependences, tile=tile, parallel=parallel, fusion=fusion,
                                machine=machine, notes=local, sizes=sizes)
            first = next(cands)
            score = stride_penalty(first[0])
            if label:
                # Reassociation pays only through loops it lets the compiler vectorise; freed of
                # the order, isl's scheduler may also just pick another (skewed) fusion, so the
                # reassociated version is scored by the simd loops it actually got.
                score = max(score, simd_penalty(first[0]))
            options.append((score, len(options), what, version, itertools.chain([first], cands), vnotes + local,
                            None, serial_penalty(first[0])))
    expanded = _expanded_option(scop, options, scalars, dead_after, taken, types, budget, notes, tile=tile,
                                parallel=parallel, fusion=fusion, machine=machine, sizes=sizes)
    if expanded is not None:
        options.append(expanded)
    options.sort(key=lambda o: o[:2])
    if len(options) > 1:
        notes.append("versions (strided hot loops): " + ", ".join(f"{o[2]} {o[0]}" for o in options)
                     + f"; {options[0][2]} chosen")
    return [(o[3], o[4], o[5], o[6]) for o in options]


def _left_out(what: str, budget: Budget) -> str:
    why = (f"the region's choices ran past {budget.seconds:g} s" if budget.spent else
           f"its dependence analysis ran past {VERSION_DEPS_OPERATIONS:,} isl operations")
    return f"version {what!r} not considered: {why}"


def _expanded_option(scop: Scop, options, scalars, dead_after, taken, types, budget: Budget, notes: List[str], **kw):
    """The option of :func:`_scop_options` with the region's scalars expanded, when it beats every other
    (its score then sorts it first); None otherwise.  Reductions marked for reassociation keep their
    order: the expansion is made of the in-order version (reordering is the other options'
    business)."""
    if not scalars or not options:
        return None
    ex = expand_scalars(in_order(scop) or scop, scalars, dead_after, taken, types)
    if ex is None:
        return None
    dependences = None if budget.over() else version_deps(ex.scop)
    if dependences is None:
        notes.append(_left_out("scalars expanded", budget))
        return None
    local: List[str] = []
    cands = _candidates(ex.scop, dependences, notes=local, **kw)
    first = next(cands)
    stride, serial = stride_penalty(first[0]), serial_penalty(first[0])
    best = min(options, key=lambda o: o[:2])
    if (stride, serial) >= (best[0], best[7]):
        return None
    return (stride, -1, "scalars expanded", ex.scop, itertools.chain([first], cands), list(ex.notes) + local, ex,
            serial)
