"""The OpenMP C target: schedule (program order or isl's, outermost parallel loops, blocked by the
autotiler for the hardware descriptor), C from isl's AST, a shared library built and loaded.

    >>> # OPENMP.compile(lowered, options) -> Specialization; OPENMP.run(spec, [A, B]) -> C
"""
from __future__ import annotations

import time

from .. import hardware, runtime
from ..config import get_config
from ..specialization import Specialization
from .base import Lowered, Target, stage

# The passes (scheduling, codegen: islpy) are imported where they run, not here: a kernel found in
# the specialization cache needs this target's name and flags, not its compiler (polytile.kernel).


def default_schedule(scop, dependences, options):
    """The schedule a kernel is compiled with.

    A user schedule's steps are replayed; otherwise program order (or isl's
    scheduler with ``fusion``) with the outermost dependence-free loop of
    each nest marked parallel, blocked by the autotiler when a hardware
    descriptor is given, the other reductions with a unit-stride output loop innermost
    (``vector_inner``), transposing copies tiled (``tile_transposes``); parallel loops with too little work per execution
    for a parallel region are then left serial (``cost.parallel_work``).
    """
    from .. import scheduling as sched_mod
    from ..cost.parallel_work import drop_small_parallel
    from ..scheduling.saved import replay

    if options.schedule is not None:
        return replay(scop, dependences, options.schedule)
    if options.fusion is not None:
        s = sched_mod.automatic(scop, dependences, options.fusion)
    else:
        s = sched_mod.initial(scop, dependences)
    if not options.parallel:
        return s
    s = sched_mod.auto_parallel(s)
    if options.hardware is not None:
        from ..autotile import autotile

        s, _ = autotile(s, hardware.load_once(options.hardware))
        # Reductions the register tiles left get a vector loop innermost where one exists (pooling's channels);
        # copies that write along one loop and read along another run by square tiles (a transpose).
        s = sched_mod.tile_transposes(sched_mod.vector_inner(s))
    # A parallel loop whose executions are too small to pay for a parallel region runs serially
    # (a 4x4 matmul spent 20 us forking threads for 64 multiply-adds).
    return drop_small_parallel(s, [], need=_min_parallel_work(options))


def _min_parallel_work(options) -> int:
    """Statement instances (or packed elements) a parallel region needs: the option, else the cost model's
    bound for the descriptor's cores, at least two of them (two need the most work; a one-core
    descriptor still compiles code that may run on more cores, so it gets the two-core bound)."""
    from ..cost.parallel_work import min_parallel_work

    if options.min_parallel_work is not None:
        return options.min_parallel_work
    cores = 2
    if options.hardware is not None:
        cores = getattr(hardware.load_once(options.hardware), "cores", cores)
    return min_parallel_work(max(2, cores))


def schedule_and_generate(lowered: Lowered, options, generate, **generate_options):
    """The schedule (:func:`default_schedule`) and the source ``generate(scop, tree, ...)`` makes of it,
    each stage logged: the part every CPU target shares (``generate`` is its code generator).

    >>> # sched, source = schedule_and_generate(lowered, options, codegen.c.generate)
    """
    scop, dependences = lowered.scop, lowered.deps
    t0 = time.perf_counter()
    sched = default_schedule(scop, dependences, options)
    stage("schedule", t0, lambda: sched.describe())
    t0 = time.perf_counter()
    source = generate(scop, sched.tree(), header=str(lowered.program), min_parallel_copy=_min_parallel_work(options),
                      **generate_options)
    stage("codegen", t0, source.text, level=3)
    return sched, source


class OpenMP(Target):
    """C with OpenMP pragmas, built by the host C compiler (``POLYTILE_CC``, ``POLYTILE_CFLAGS``)."""

    name = "openmp"
    disk_cacheable = True

    def compile(self, lowered: Lowered, options, *, build: bool = True) -> Specialization:
        from ..codegen.c import generate as generate_c

        scop, dependences = lowered.scop, lowered.deps
        sched, source = schedule_and_generate(lowered, options, generate_c)
        if not build:
            return Specialization(lowered.bound, scop, dependences, sched, source)
        t0 = time.perf_counter()
        flags = options.cflags if options.cflags is not None else get_config().cflags
        path = runtime.build(source.text, flags=flags, name_hint=scop.name)
        fn = runtime.load(path).function(source.entry, len(source.params))
        stage("build", t0, str(path), level=1)
        return Specialization(lowered.bound, scop, dependences, sched, source, path, fn)


OPENMP = OpenMP()
