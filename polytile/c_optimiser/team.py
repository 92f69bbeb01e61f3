"""Whether a region's parallel loops pay for the thread team as a whole, at the sizes the file fixes.

:func:`polytile.cost.parallel_work.drop_small_parallel` asks it of each loop:
one execution against one fork/join.  A small region can pass that test loop
by loop and still lose: a program that calls it once pays the first region's
start-up (the thread-count probe reads procfs, the team wakes) and one
fork/join per execution of the loop, against a saving of at most
``(1 - 1/threads)`` of a run that may take well under a millisecond
(PolyBench's jacobi-1d: 0.37 ms under gcc -O3, 69 wavefront regions; parallel
it ran 0.3x as fast in one-call processes).  The model's estimate of the
saving must cover :data:`PAYBACK` times the cost, or the region runs serially:
a transformation the model cannot show to be a win is not applied.  At sizes
the file fixes that is decided here; where the sizes are parameters, the
region's code tests them at run time (:func:`versioned`).  Serially, the
region runs in its original order, innermost loops shaped for vectors
(:func:`.strategy.serial_schedule`): a schedule chosen for its parallel
loops may cost more than it saves on one core (jacobi-1d's skewed tiles:
10% slower than its own loops) -- unless the chosen schedule has fewer
strided or chained innermost loops, which then runs without its parallel
loops.

In isl terms the work is ``sum_S card(D_S)`` (a box bound), each instance
priced by how its innermost loop compiles (:func:`instance_seconds`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Mapping, Optional, Tuple

import islpy as isl

from ..codegen.c_threads import expect_call
from ..cost.constants import EFF_SCALAR, EFF_VECTOR, FMA_LATENCY, OMP_REGION_S
from ..cost.footprints import ops_per_instance
from ..cost.parallel_work import with_sizes
from ..scheduling import PARALLEL, Schedule
from .loop_facts import _DEFAULT_ELEMENT, _arrays_of, vectorisable
from .machine import CMachine

#: Seconds the first parallel region of a process costs beyond a fork/join: the thread-count probe of
#: ``polytile opt`` output (procfs reads, 50-100 us on its first, cold call on a 2-vCPU KVM guest) and
#: the team's first wake-up (5-10 us).
TEAM_START_S = 1e-4
#: How many times its cost the estimated saving of a region's parallel loops must be: the estimate is
#: good to a factor of about two (jacobi-1d: 0.72 ms estimated, 0.37 ms measured), and a lost bet on a
#: small region shows as a slowdown against serial code.
PAYBACK = 2.0
#: The macro the run-time test goes through: ``-D'POLYTILE_TEAM_PAYS(pays)=1'`` builds the parallel copy
#: only, ``=0`` the serial one (``opt --verify`` and the tests check both against the original).
TEAM_MACRO = "POLYTILE_TEAM_PAYS"
#: Compiler options that select one copy of a versioned region (:func:`versioned`).
FORCE_PARALLEL = f"-D{TEAM_MACRO}(pays)=1"
FORCE_SERIAL = f"-D{TEAM_MACRO}(pays)=0"
#: FMA (or add) units per core the estimate assumes.
FMA_UNITS = 2


def instance_seconds(s: Schedule, name: str, machine: CMachine) -> float:
    """Estimated seconds of one instance of statement ``name`` as its innermost loop in ``s`` compiles.

    A vectorisable innermost loop (:func:`.loop_facts.vectorisable`) runs its operations ``lanes`` at a
    time on ``FMA_UNITS`` pipes at ``EFF_VECTOR`` of peak; one that feeds the statement into its next
    iteration (an in-order reduction) waits ``FMA_LATENCY`` cycles per instance; any other runs its
    operations on scalar pipes at ``EFF_SCALAR``.

    >>> # B[i] = 0.33333 * (A[i-1] + A[i] + A[i+1]), i innermost, doubles, 256-bit vectors, 2.5 GHz:
    >>> # 3 ops / (4 lanes * 2 pipes * 0.4) = 0.94 cycles = 0.38 ns
    """
    st = s.scop.statement(name)
    ops = max(1, st.c_ops or ops_per_instance(st.body))
    loops = s.table[name].loops()
    hz = machine.ghz * 1e9
    if loops and vectorisable(s, name, loops[-1][0]):
        item = _arrays_of(s, [name]).get(st.body.array, (_DEFAULT_ELEMENT, 0))[0]
        return ops / (machine.lanes(item) * FMA_UNITS * EFF_VECTOR * hz)
    if loops and not s.carried([name], loops[-1][0], s.deps.all(include_reductions=True)).is_empty():
        return max(FMA_LATENCY, ops / (FMA_UNITS * EFF_SCALAR)) / hz
    return ops / (FMA_UNITS * EFF_SCALAR * hz)


def _extent(st: isl.Set, d: int) -> isl.PwAff:
    """``max(0, max_d - min_d + 1)`` of set dimension ``d`` over the parameters (0 where ``st`` is empty)."""
    hi, lo = st.dim_max(d), st.dim_min(d)
    span = hi.sub(lo)
    span = span.add(isl.PwAff.val_on_domain(span.domain(), isl.Val.one(st.get_ctx())))
    return span.union_max(isl.PwAff.zero_on_domain(isl.LocalSpace.from_space(st.params().get_space())))


@dataclass(frozen=True)
class Team:
    """What a region's parallel loops save and cost, as sums of products of extents (each a
    :class:`isl.PwAff` of the parameters): ``saving = sum c * prod(extents)`` seconds,
    ``cost = TEAM_START_S + OMP_REGION_S * sum prod(extents)`` (one product per parallel loop: its
    executions).  :meth:`value` evaluates them when the sizes are known, :meth:`c_condition` writes the
    test for run time when they are not."""

    saving: Tuple[Tuple[float, Tuple[isl.PwAff, ...]], ...]
    entries: Tuple[Tuple[isl.PwAff, ...], ...]

    def value(self) -> Optional[Tuple[float, float]]:
        """``(saving, cost)`` in seconds, or None when an extent depends on a parameter without a value."""
        def product(factors) -> Optional[float]:
            out = 1.0
            for pa in factors:
                if not pa.is_cst():
                    return None
                pieces = pa.get_pieces()
                out *= pieces[0][1].get_constant_val().to_python() if pieces else 0
            return out
        saving, entries = 0.0, 0.0
        for c, factors in self.saving:
            v = product(factors)
            if v is None:
                return None
            saving += c * v
        for factors in self.entries:
            v = product(factors)
            if v is None:
                return None
            entries += v
        return saving, TEAM_START_S + OMP_REGION_S * entries

    def c_condition(self, context: isl.Set) -> str:
        """A C expression true when the saving is at least :data:`PAYBACK` times the cost, in the region's
        parameters (``context``: what they are known to satisfy).

        >>> # (2.6e-10 * (double)(n <= 2 ? 0 : n - 2) * (double)(tsteps) + ...) >= 2 * (1e-4 + 3e-6 * ...)
        """
        build = isl.AstBuild.from_context(context)
        entries = " + ".join(_c_product(f, build) for f in self.entries) or "0.0"
        return f"({self.c_saving(context)}) >= {PAYBACK!r} * ({TEAM_START_S!r} + {OMP_REGION_S!r} * ({entries}))"

    def c_saving(self, context: isl.Set) -> str:
        """The estimated saving as a C expression: about the seconds the parallel loops run on two threads
        (the work halved), what the region tells the thread helper before them (:func:`expect_call`)."""
        build = isl.AstBuild.from_context(context)
        return " + ".join(f"{c!r} * {_c_product(f, build)}" for c, f in self.saving) or "0.0"


def _c_product(factors, build: isl.AstBuild) -> str:
    """The product of the PwAffs ``factors`` as C doubles (``1.0`` for none)."""
    return " * ".join(f"(double)({build.expr_from_pw_aff(pa).to_C_str()})" for pa in factors) or "1.0"


def _parallel_dims(s: Schedule, name: str) -> List[int]:
    return sorted(s.loop_dim(name, m[1]) for m in s.marks if m[0] == name and m[2] == PARALLEL)


def team(s: Schedule, machine: CMachine, sizes: Optional[Mapping[str, int]] = None,
         threads: int = 2) -> Optional[Team]:
    """The :class:`Team` of ``s``'s parallel loops on ``threads`` threads (``sizes``: values of some
    parameters), or None when nothing runs in parallel.

    The saving is ``(1 - 1/threads)`` of the estimated work of the statements under parallel loops
    (instances: the box of each domain, ``prod_k (max i_k - min i_k + 1)``; each priced by
    :func:`instance_seconds`); the executions of a parallel loop at time dimension ``p`` are the box of
    the loops around it, ``prod_{e < p} (max θ_e - min θ_e + 1)``.

    >>> # jacobi-1d, N = 2000, TSTEPS = 500, tiled wavefront: team(s, m, sizes).value() ~ (0.38 ms, 0.30 ms)
    """
    saving = []
    entries = {}
    for name, ss in s.stmts:
        dims = _parallel_dims(s, name)
        if not dims:
            continue
        st = s.scop.statement(name)
        domain = with_sizes(st.domain, sizes)
        box = tuple(_extent(domain, k) for k in range(domain.dim(isl.dim_type.set)))
        saving.append((instance_seconds(s, name, machine) * (1 - 1 / max(2, threads)), box))
        times = with_sizes(st.domain.apply(ss.map), sizes)
        outer = tuple(_extent(times, d) for d, _ in ss.loops() if d < dims[0])
        # Statements fused under one parallel loop share its executions: one product per loop.
        key = (tuple(sorted(s.group(name, dims[0]))), s.table[name].names[dims[0]])
        entries.setdefault(key, outer)
    if not saving:
        return None
    return Team(tuple(saving), tuple(entries.values()))


def pays(t: Optional[Team]) -> Optional[bool]:
    """Whether the parallel loops of :func:`team` ``t`` pay for the team: True (or no team), False,
    or None when that depends on parameters without a value (decided at run time, :func:`versioned`).

    >>> pays(None)
    True
    """
    if t is None:
        return True
    priced = t.value()
    if priced is None:
        return None
    return priced[0] >= PAYBACK * priced[1]


def serial_note(t: Team, how: str = "its original order") -> str:
    """The note of a region that runs serially (``how``) because its team does not pay."""
    saving, cost = t.value()
    return (f"region runs serially, {how}: its parallel loops would save about "
            f"{saving * 1e3:.3g} ms, under {PAYBACK:g}x what the thread team costs ({cost * 1e3:.3g} ms: "
            f"start-up and {(cost - TEAM_START_S) / OMP_REGION_S:.0f} fork/joins)")


_PARALLEL_PRAGMA = re.compile(r"^[ \t]*#pragma omp parallel\b.*\n", re.M)


def copies(source: bytes) -> List[Tuple[Optional[str], Tuple[str, ...]]]:
    """The builds that cover every copy of ``source`` (C text): ``[("parallel", (FORCE_PARALLEL,)),
    ("serial", (FORCE_SERIAL,))]`` when a region is versioned on the team's pay, else ``[(None, ())]``.

    >>> copies(b"int x;")
    [(None, ())]
    """
    if TEAM_MACRO.encode() not in source:
        return [(None, ())]
    return [("parallel", (FORCE_PARALLEL,)), ("serial", (FORCE_SERIAL,))]


def without_parallel_loops(code: str) -> str:
    """``code`` (generated C) with its ``#pragma omp parallel ...`` lines removed: every parallel loop runs
    in order, which is one of the orders its mark allows; ``simd`` loops stay.

    >>> without_parallel_loops("#pragma omp parallel for num_threads(2)\\nfor (;;) {}\\n")
    'for (;;) {}\\n'
    """
    return _PARALLEL_PRAGMA.sub("", code)


def versioned(prelude: str, parallel: str, serial: str, t: Team, context: isl.Set) -> str:
    """One region's code that runs ``parallel`` (loops after ``prelude``, as code generation writes them)
    where the work pays for the thread team, and ``serial`` (the original order) elsewhere:
    ``prelude if (<test>) <parallel> else <serial>``.

    Before: ``{ for (c0 ...) #pragma omp parallel for ... }``
    After:  ``if (POLYTILE_TEAM_PAYS((1.9e-10 * (double)(tsteps) * ...) >= 2.0 * (...))) { ... } else { ... }``
    """
    par, ser = parallel[len(prelude):], serial[len(prelude):]
    guard = f"#ifndef {TEAM_MACRO}\n#define {TEAM_MACRO}(pays) (pays)\n#endif\n"
    return (f"{prelude}{guard}if ({TEAM_MACRO}({t.c_condition(context)}))\n{{\n{expect_call(t.c_saving(context))}\n"
            f"{par.rstrip()}\n}}\nelse\n{ser}")


def with_expectation(prelude: str, code: str, t: Optional[Team]) -> str:
    """``code`` (starting with ``prelude``) telling the thread helper its estimated seconds first, when the
    team's saving is a number (a region whose parallel loops pay at every size; :func:`versioned` says it
    in the parallel copy of the others).

    Before: ``<prelude>{ #pragma omp parallel for ... }``  After: ``<prelude>pt_threads_expect(0.012);\n{ ... }``
    """
    priced = t.value() if t is not None else None
    if priced is None or not code.startswith(prelude):
        return code
    return f"{prelude}{expect_call(repr(priced[0]))}\n{code[len(prelude):]}"
