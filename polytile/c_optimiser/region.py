"""One region from its candidate schedules to its replacement text: bounded code generation, first success wins.

:func:`optimize_region` takes the candidates of :mod:`.strategy` (or the
replayed steps of a saved schedule) best first, checks each against the
dependences once more and generates its loops (innermost loops separated,
:func:`separate_innermost`) within an isl operation budget and a wall-clock
budget; the first candidate that generates is the region's
:class:`RegionResult`.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple

import islpy as isl

from .. import deps as deps_mod
from ..codegen.c import REGION_POSTLUDE, REGION_PRELUDE, fresh_counter_prefix, generate_region
from ..deadline import interrupts_after, with_deadline
from ..errors import PolytileError, ScheduleError
from ..frontends.c import CScop
from ..scheduling import PARALLEL, Schedule, Step
from ..cost.parallel_work import min_parallel_work
from .machine import CMachine
from .chains import interleave_chains
from .strategy import OPTIONS_SECONDS, Budget, _scop_options, serial_schedule, stride_penalty
from . import team as team_mod


@dataclass
class RegionResult:
    """What happened to one region: its schedule (None when left as it was) and notes.

    ``timed_out``: a candidate's code generation ran out of wall-clock time, so
    the result depends on the machine's load (it is not kept in the cache).
    A result served from the cache (:func:`polytile.c_optimiser.optimize_regions`
    with ``cache=True``) has its text, notes and the steps of its schedule
    (``cached_steps``, as JSON) but no ``schedule``; ``from_cache`` says so.
    """

    cscop: CScop
    schedule: Optional[Schedule] = None
    text: Optional[str] = None
    notes: List[str] = field(default_factory=list)
    timed_out: bool = False
    from_cache: bool = False
    cached_steps: Optional[List[dict]] = None

    def steps_json(self) -> Optional[List[dict]]:
        """The steps of the region's schedule as JSON (from the schedule, or kept in the cache); None when
        the region was left as written.

        >>> RegionResult(None).steps_json() is None
        True
        """
        if self.schedule is not None:
            return [st.to_json() for st in self.schedule.steps]
        return None if self.cached_steps is None else list(self.cached_steps)


def _replay(scop, deps, steps: Sequence[Step]) -> Schedule:
    from ..scheduling.saved import replay

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
        return any(node.child(k).get_type() == isl.schedule_node_type.band or has_band_below(node.child(k))
                   for k in range(node.n_children()))

    def fn(node: isl.ScheduleNode) -> isl.ScheduleNode:
        if node.get_type() == isl.schedule_node_type.band and not has_band_below(node):
            opts = isl.UnionSet("{ separate[x] }", context=node.get_ctx())
            node = node.band_set_ast_build_options(opts)
        return node
    with interrupts_after():  # fn is a Python callback inside isl
        return tree.map_schedule_node_bottom_up(fn)


# isl's AST generator names loop counters c0, c1, ...; a file that uses such a name itself (a
# variable or a loop-bound parameter c1) gets counters with a prefix no identifier of the file
# starts a ``prefix<digits>`` name with, chosen when the AST is built (never by renaming text).
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
            return json.dumps(generate_region(scop, tree, prefix, min_parallel_work=min_parallel_work(),
                                              adaptive_threads=True))
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
#: A replayed schedule (--schedule) is the user's choice, not one of ours to fall back from: it gets a
#: generous budget per attempt, but a bounded one (isl's AST generator ran for minutes on jacobi-1d
#: with 16-step time tiles), and the error says what to change.
REPLAY_CODEGEN_SECONDS = 120.0


def _with_team_test(code: str, scop, s: Schedule, ranked: Schedule, machine: CMachine, cs: CScop,
                    max_ops: Optional[int], notes: List[str], replayed: bool = False) -> str:
    """``code`` (of ``s``) when its parallel loops pay for the thread team (:mod:`.team`); else serial code:
    the region's original order (:func:`.strategy.serial_schedule`, its chains interleaved as ``s``'s are),
    or ``code`` without its parallel loops where the candidate ``s`` came from (``ranked``, before
    :func:`.chains.interleave_chains`) has fewer strided or chained innermost loops (ludcmp's expanded
    ``w_x[j]`` walks ``j`` innermost, 1.7x faster than the original order on one core); where that
    depends on the sizes, both behind a run-time test of them."""
    t = team_mod.team(s, machine, cs.macros)
    verdict = team_mod.pays(t)
    # Every parallel loop left sequential as too small for a parallel region (cost.parallel_work): the
    # region gains nothing from its schedule's parallel loops either, so it is judged as a team that
    # does not pay.  In a replayed schedule an unmark step is the user's own choice.
    dropped = t is None and not replayed and any(step.op == "unmark" and step.kwargs().get("kind") == PARALLEL
                                                 for step in s.steps)
    if verdict and not dropped:
        return team_mod.with_expectation(REGION_PRELUDE, code, t)
    original = serial_schedule(scop, s.deps)
    if stride_penalty(ranked) < stride_penalty(original):
        serial, how = team_mod.without_parallel_loops(code), "its schedule without parallel loops"
    else:
        original = interleave_chains(original, machine, [])
        serial, _ = _generate_bounded(scop, original, max_ops, taken=cs.taken, seconds=CODEGEN_ATTEMPT_SECONDS)
        how = "its original order"
    if dropped:
        notes.append(f"region runs serially, {how}: each of its parallel loops has too little work for a "
                     f"parallel region")
        return serial
    if verdict is False:
        notes.append(team_mod.serial_note(t, how))
        return serial
    notes.append("parallel loops run only where the sizes make the work pay for the thread team (a run-time "
                 f"test; {how}, serially, elsewhere)")
    return team_mod.versioned(REGION_PRELUDE, code, serial, t, team_mod.with_sizes(scop.context, cs.macros))


def optimize_region(cs: CScop, *, tile: bool = True, parallel: bool = True, fusion: str = "smart",
                    machine: CMachine = CMachine(), steps: Optional[Sequence[Step]] = None,
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
        options = [(scop, iter([(_replay(scop, deps_mod.compute(scop), steps), [])]), [], None)]
        max_operations = None
    else:
        # The file's macro values size the work of its loops (the code stays written in the macros).
        budget = Budget(OPTIONS_SECONDS)
        options = _scop_options(scop, tile=tile, parallel=parallel, fusion=fusion, machine=machine,
                                notes=res.notes, sizes=cs.macros, scalars=cs.scalars, dead_after=cs.dead_after,
                                taken=cs.taken, types=cs.scalar_types, budget=budget)
        res.timed_out = budget.spent
        if not options:  # its dependences could not be computed within their budget (a note says so)
            return res
    last_error: Optional[Exception] = None
    deadline = time.monotonic() + CODEGEN_SECONDS
    for use_scop, cands, extra_notes, expansion in options:
        for s, local in cands:
            ranked = s
            if steps is None:
                # After the ranking (chains.py: only iterations of independent loops trade places, so the
                # candidates compare as they are); a replayed schedule already holds these steps.
                s = interleave_chains(s, machine, local)
            s = s.check("optimised schedule")
            code = None
            for separate in (True, False):
                # Candidates share the region's budget; once it is spent each still gets a short
                # try (the simpler candidates come last and generate in milliseconds).
                left = deadline - time.monotonic()
                seconds = (REPLAY_CODEGEN_SECONDS if steps is not None
                           else max(CODEGEN_MIN_SECONDS, min(left, CODEGEN_ATTEMPT_SECONDS)))
                try:
                    code, gen_notes = _generate_bounded(use_scop, s, max_operations, separate=separate,
                                                        taken=cs.taken, seconds=seconds)
                    break
                except (isl.Error, _CodegenTimeout) as e:
                    last_error = e
                    res.timed_out = res.timed_out or isinstance(e, _CodegenTimeout)
                    res.notes.append(f"code generation{' with separated innermost loops' if separate else ''} "
                                     f"gave up on {' -> '.join(str(x) for x in s.steps[1:])}: "
                                     f"{str(e).splitlines()[0][:120]}")
            if code is None:
                continue
            res.notes.extend(extra_notes)
            res.notes.extend(local)
            res.notes.extend(gen_notes)
            code = _with_team_test(code, use_scop, s, ranked, machine, cs, max_operations, res.notes,
                                   replayed=steps is not None)
            res.schedule = s
            head = "/* polytile opt: " + " -> ".join(str(st) for st in s.steps) + " */\n"
            if expansion is not None:  # the expanded scalars' arrays, and live-out values put back
                code = expansion.wrap(code)
            res.text = cs.wrap(head + code.rstrip("\n") + "\n" + REGION_POSTLUDE)
            return res
    if steps is not None and isinstance(last_error, _CodegenTimeout):
        raise ScheduleError(f"{cs.path}:{cs.lines[0]}: code generation of the given schedule took over "
                            f"{REPLAY_CODEGEN_SECONDS:.0f} s (isl's AST generator); smaller tiles (a time tile "
                            f"above all) generate much faster")
    raise PolytileError(f"{cs.path}:{cs.lines[0]}: no schedule could be generated ({last_error})")
