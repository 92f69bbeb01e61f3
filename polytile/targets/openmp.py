"""The OpenMP C target: schedule (program order or isl's, outermost parallel loops, blocked by the
autotiler for the hardware descriptor), C from isl's AST, a shared library built and loaded.

    >>> # OPENMP.compile(lowered, options) -> Specialization; OPENMP.run(spec, [A, B]) -> C
"""
from __future__ import annotations

import time

from .. import hardware, runtime
from .. import scheduling as sched_mod
from ..codegen.c import generate as generate_c
from ..config import get_config
from ..scheduling import Schedule
from ..scheduling.saved import replay
from ..specialization import Specialization
from .base import Lowered, Target, stage


def default_schedule(scop, dependences, options) -> Schedule:
    """The schedule a kernel is compiled with.

    A user schedule's steps are replayed; otherwise program order (or isl's
    scheduler with ``fusion``) with the outermost dependence-free loop of
    each nest marked parallel, blocked by the autotiler when a hardware
    descriptor is given.
    """
    if options.schedule is not None:
        return replay(scop, dependences, options.schedule)
    if options.fusion is not None:
        s = sched_mod.automatic(scop, dependences, options.fusion)
    else:
        s = sched_mod.initial(scop, dependences)
    s = sched_mod.auto_parallel(s) if options.parallel else s
    if options.hardware is not None and options.parallel:
        from ..autotile import autotile

        s, _ = autotile(s, hardware.load_once(options.hardware))
    return s


class OpenMP(Target):
    """C with OpenMP pragmas, built by the host C compiler (``POLYTILE_CC``, ``POLYTILE_CFLAGS``)."""

    name = "openmp"

    def compile(self, lowered: Lowered, options, *, build: bool = True) -> Specialization:
        scop, dependences = lowered.scop, lowered.deps
        t0 = time.perf_counter()
        sched = default_schedule(scop, dependences, options)
        stage("schedule", t0, lambda: sched.describe())
        t0 = time.perf_counter()
        source = generate_c(scop, sched.tree(), header=str(lowered.program))
        stage("codegen", t0, source.text, level=3)
        if not build:
            return Specialization(lowered.bound, scop, dependences, sched, source)
        t0 = time.perf_counter()
        flags = options.cflags if options.cflags is not None else get_config().cflags
        path = runtime.build(source.text, flags=flags, name_hint=scop.name)
        fn = runtime.load(path).function(source.entry, len(source.params))
        stage("build", t0, str(path), level=1)
        return Specialization(lowered.bound, scop, dependences, sched, source, path, fn)


OPENMP = OpenMP()
