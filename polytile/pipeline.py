"""The lowering pipeline, as one readable list of passes (the Kernel object that runs it per
signature, and finds earlier runs in the specialization cache, is :mod:`polytile.kernel`).

    text --parse--> ir.Program --check--> (per call: shapes, dtypes)
         --bind--> sema.Bound --lower--> poly.Scop --deps--> Dependences
         --schedule--> isl schedule tree (+ parallel marks)
         --codegen--> KernelSource (C) --build--> shared library --load--> ctypes function

Only this module (and the CLI) wires stages together; every stage imports
only from the stages before it.  ``POLYTILE_DEBUG=1`` prints each stage,
``=2`` also the Scop/dependences/schedule, ``=3`` also the generated source.
"""
from __future__ import annotations

import time
from typing import Mapping, Optional

import numpy as np

from . import deps as deps_mod
from . import ir, sema
from . import interpreter as reference_mod
from .config import get_config
from .errors import recursion_room
from .poly.scop import Scop
from .poly.tile import lower as lower_to_scop
from . import scheduling as sched_mod
from .scheduling import Schedule
from .scheduling.saved import replay, schedule_steps  # noqa: F401  (replay: API)
from .program import SourceLike, load_program, parse_dims, shapes_from_dims, size_inputs, size_values  # noqa: F401  (the API names)
from .specialization import Specialization, run_scop, run_specialization  # noqa: F401  (the API names)
from .codegen.c import generate as generate_c
from . import runtime, targets
from .targets.base import Lowered, stage
from .targets.openmp import default_schedule  # noqa: F401  (the schedule compile uses, for the CLI and tests)
from .options import Options, load_hardware  # noqa: F401  (load_hardware: API)

TARGETS = targets.NAMES


def specialize(program: ir.Program, shapes, dtypes, options: Options, *, build: bool = True,
               sizes: Optional[Mapping[str, int]] = None) -> Specialization:
    """Run the passes for concrete shapes/dtypes (and size inputs' values); with ``build``, compile and load too."""
    target = targets.get(options.target)
    return target.specialization(compile_signature(program, shapes, dtypes, options, build=build, sizes=sizes))


def lower(program: ir.Program, shapes, dtypes, sizes: Optional[Mapping[str, int]] = None) -> Lowered:
    """The front half for one signature: bind, lower to a Scop, compute its dependences."""
    t0 = time.perf_counter()
    bound = sema.bind(program, shapes, dtypes, sizes)
    stage("bind", t0)
    t0 = time.perf_counter()
    scop = lower_to_scop(bound)
    stage("lower", t0, scop.describe)
    t0 = time.perf_counter()
    dependences = deps_mod.compute(scop)
    stage("deps", t0, dependences.describe)
    return Lowered(program, bound, scop, dependences)


def compile_signature(program: ir.Program, shapes, dtypes, options: Options, *, build: bool = True,
                      sizes: Optional[Mapping[str, int]] = None):
    """The front half, then ``options.target``'s back half: what that target runs (see :mod:`.targets`)."""
    with recursion_room():
        return targets.get(options.target).compile(lower(program, shapes, dtypes, sizes), options, build=build)


def schedule(source: SourceLike, dims=None, *, shapes=None, dtypes=None, fusion: Optional[str] = None,
             parallel: bool = True, steps=None, hardware: Optional[str] = None,
             min_parallel_work: Optional[int] = 0) -> Schedule:
    """A schedule for these sizes, ready to transform: program order (or isl's, with
    ``fusion``) with outermost parallel loops; with ``hardware="host"`` (or another
    descriptor) the autotiled schedule ``polytile.compile`` uses by default.  A size input
    (``function (A[N], D) -> ...`` with ``D`` used as a size) takes its value from ``dims`` too.

    Every parallel loop is kept (``min_parallel_work=0``): ``polytile.compile``'s default
    schedule then leaves the loops too small for a parallel region serial (``unmark`` steps);
    ``min_parallel_work=None`` gives exactly that schedule.  A schedule passed to
    ``compile(schedule=...)`` is compiled as it is.

    >>> s = schedule("examples/matmul.tile", dims="M=64,N=64,K=64")
    >>> s = s.tile("C", i=32, j=32)        # legality-checked; s.steps records it
    >>> k = compile("examples/matmul.tile", schedule=s)
    """
    prog = load_program(source)
    sizes = parse_dims(dims)
    in_shapes = shapes_from_dims(prog, sizes, shapes)
    if isinstance(dtypes, str):  # one dtype for every input
        dtypes = [dtypes] * len(in_shapes)
    dts = tuple(np.dtype(d).name for d in (dtypes or ["float32"] * len(in_shapes)))
    opts = Options.make("openmp", fusion=fusion, parallel=parallel, schedule=steps, hardware=hardware,
                        min_parallel_work=min_parallel_work)
    values = size_values(prog, sizes)
    spec = specialize(prog, in_shapes, dts, opts, build=False, sizes=values)
    meta = (("program", str(prog)), ("shapes", [list(x) for x in in_shapes]), ("dtypes", list(dts))) + \
        ((("sizes", values),) if values else ())
    return spec.schedule.with_(meta=meta)


def build_scop(scop: Scop, schedule: Optional[Schedule] = None, *, cflags=None, target: str = "openmp") -> Specialization:
    """Generate, compile and load any Scop (e.g. one from isl text or the C frontend).

    Without ``schedule`` the original order with outermost parallel loops is used.  ``target="llvm"``
    JIT-compiles LLVM IR instead of building C (no C compiler; statements kept as C text are refused).
    """
    dependences = deps_mod.compute(scop)
    if schedule is None:
        schedule = sched_mod.auto_parallel(sched_mod.initial(scop, dependences))
    if target == "llvm":
        from .codegen.llvm import generate as generate_llvm
        from .runtime import jit

        source = generate_llvm(scop, schedule.tree(), parallel=jit.gomp() is not None)
        fn = jit.compile_ir(source.text, source.entry, len(source.params))
        return Specialization(None, scop, dependences, schedule, source, None, fn)
    source = generate_c(scop, schedule.tree())
    cfg = get_config()
    path = runtime.build(source.text, flags=tuple(cflags) if cflags else cfg.cflags, name_hint=scop.name)
    fn = runtime.load(path).function(source.entry, len(source.params))
    return Specialization(None, scop, dependences, schedule, source, path, fn)


def reference(source: SourceLike, *arrays, **named):
    """Run the numpy oracle on a Tile program: ``polytile.reference("matmul.tile", A, B)``."""
    prog = load_program(source)
    if named:
        names = prog.input_names
        arrays = tuple(arrays) + tuple(named[n] for n in names[len(arrays):])
    return reference_mod.run(prog, *arrays)

