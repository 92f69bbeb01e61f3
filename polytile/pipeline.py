"""The lowering pipeline, as one readable list of passes, and the Kernel object.

    text --parse--> ir.Program --check--> (per call: shapes, dtypes)
         --bind--> sema.Bound --lower--> poly.Scop --deps--> Dependences
         --schedule--> isl schedule tree (+ parallel marks)
         --codegen--> KernelSource (C) --build--> shared library --load--> ctypes function

Only this module (and the CLI) wires stages together; every stage imports
only from the stages before it.  ``POLYTILE_DEBUG=1`` prints each stage,
``=2`` also the Scop/dependences/schedule, ``=3`` also the generated source.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Tuple, Union

import numpy as np

from . import deps as deps_mod
from . import desugar, ir, sema
from . import interpreter as reference_mod
from .config import get_config
from .errors import PolytileError, ShapeError, recursion_room
from .poly.scop import Scop
from .poly.tile import lower as lower_to_scop
from . import scheduling as sched_mod
from .scheduling import Schedule, Step
from .scheduling.saved import replay, schedule_steps  # noqa: F401  (replay: API)
from .program import SourceLike, load_program, parse_dims, shapes_from_dims  # noqa: F401  (the API names)
from .specialization import Specialization, run_scop, run_specialization  # noqa: F401  (the API names)
from .codegen.c import generate as generate_c
from . import runtime, targets
from .targets.base import Lowered, stage
from .targets.openmp import default_schedule  # noqa: F401  (the schedule compile uses, for the CLI and tests)

TARGETS = targets.NAMES

@dataclass(frozen=True)
class Options:
    """Compilation options (frozen; part of every cache key).

    ``schedule`` is a tuple of :class:`~polytile.schedule.Step` replayed on
    every specialisation (so one schedule serves all shapes); ``fusion``
    asks isl's scheduler for the base schedule instead of program order.
    """

    target: str = "openmp"
    parallel: bool = True
    cflags: Optional[Tuple[str, ...]] = None
    schedule: Optional[Tuple[Step, ...]] = None
    fusion: Optional[str] = None
    # Descriptor (object, preset name or file) guiding autotile; None: no autotile.
    hardware: Optional[Union[str, Any]] = "host"  # Any: a hardware.CPUDescriptor or GPUDescriptor

    @classmethod
    def make(cls, target: str = "openmp", **kw) -> "Options":
        if target not in TARGETS:
            raise PolytileError(f"unknown target {target!r}; available: {', '.join(TARGETS)}")
        unknown = set(kw) - {"parallel", "cflags", "schedule", "fusion", "hardware"}
        if unknown:
            raise PolytileError(f"unknown compile option(s): {', '.join(sorted(unknown))}")
        if kw.get("cflags") is not None:
            kw["cflags"] = tuple(kw["cflags"])
        if kw.get("schedule") is not None:
            kw["schedule"] = schedule_steps(kw["schedule"])
        if kw.get("hardware") is not None:
            hw = kw["hardware"]
            # A descriptor object stays one (frozen, so it hashes into cache keys); a name or a
            # path is loaded now to fail early on a typo.
            kw["hardware"] = hw if not isinstance(hw, (str, os.PathLike)) else os.fspath(hw)
            load_hardware(kw["hardware"])
        if kw.get("fusion") is not None and kw["fusion"] not in sched_mod.FUSION:
            raise PolytileError(f"unknown fusion choice {kw['fusion']!r}; use one of {', '.join(sched_mod.FUSION)}")
        return cls(target=target, **kw)


def load_hardware(name):
    """A hardware descriptor by preset name or file, loaded once per process (an object as is)."""
    from . import hardware

    return hardware.load_once(name)


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


class Kernel:
    """A compiled Tile program, shape-polymorphic: each new input signature specialises.

    >>> k = compile("function (A[M, K], B[K, N]) -> (C) { C[i, j : M, N] = +(A[i, k] * B[k, j]); }")
    >>> C = k(np.ones((2, 3), np.float32), np.ones((3, 4), np.float32))   # C is 2x4, all 3.0
    """

    def __init__(self, program: ir.Program, options: Options):
        self.program = program
        self.options = options
        self._target = targets.get(options.target)
        self._cache: Dict[str, Any] = {}  # signature -> what the target compiled
        self._scalar_inputs = frozenset(i.name for i in program.inputs if not i.dims)
        self._size_inputs = (frozenset(desugar.size_inputs(desugar.normalize(program))) if self._scalar_inputs
                             else frozenset())

    def __repr__(self) -> str:
        ins = ", ".join(i.name for i in self.program.inputs)
        outs = ", ".join(self.program.outputs)
        return f"<polytile.Kernel ({ins}) -> ({outs}) target={self.options.target}>"

    # -- argument handling -------------------------------------------------
    def _arrays(self, args, named) -> Tuple[np.ndarray, ...]:
        names = self.program.input_names
        if named:
            unknown = [k for k in named if k not in names]
            if unknown:
                raise ShapeError(f"unknown input(s) {', '.join(unknown)}; the inputs are {', '.join(names)}")
            if len(args) + len(named) != len(names):
                missing = [n for n in names[len(args):] if n not in named]
                raise ShapeError(f"expected {len(names)} inputs ({', '.join(names)}); missing {', '.join(missing)}")
            args = tuple(args) + tuple(named[n] for n in names[len(args):])
        out = []
        for name, a in zip(names, args):
            if not isinstance(a, np.ndarray):
                try:
                    a = np.asarray(a)
                except Exception:
                    raise ShapeError(f"input {name}: expected a numpy array, got {type(a).__name__}") from None
            if a.dtype.byteorder not in ("=", "|") and not a.dtype.isnative:
                a = a.astype(a.dtype.newbyteorder("="))  # C reads native byte order
            out.append(a)
        if len(args) != len(names):
            raise ShapeError(f"expected {len(names)} inputs ({', '.join(names)}), got {len(args)}")
        return tuple(out)

    def _sizes(self, args, named) -> Dict[str, Any]:
        """Inputs passed as numbers (size inputs, Python int/float constants): kernels specialise on them."""
        if not self._scalar_inputs:
            return {}
        return reference_mod.constants(self.program, args, named, sized=self._size_inputs)

    def specialize(self, *args, **named) -> Specialization:
        arrays = self._arrays(args, named)
        return self.specialize_shapes([a.shape for a in arrays], [a.dtype for a in arrays],
                                      sizes=self._sizes(args, named))

    def specialize_shapes(self, shapes, dtypes, *, build: bool = True, sizes=None) -> Specialization:
        return self._target.specialization(self._compiled(shapes, dtypes, build, sizes))

    def _compiled(self, shapes, dtypes, build: bool = True, sizes=None):
        """What the target built for this signature (cached per kernel)."""
        sizes = dict(sizes or {})
        key = (tuple(tuple(s) for s in shapes), tuple(np.dtype(d).name for d in dtypes), build, sorted(sizes.items()))
        skey = repr(key)
        compiled = self._cache.get(skey)
        if compiled is None:
            compiled = compile_signature(self.program, shapes, dtypes, self.options, build=build, sizes=sizes)
            self._cache[skey] = compiled
        return compiled

    def describe_mapping(self, *args, **named) -> str:
        """Grid/block mapping of every GPU kernel for these inputs (CUDA targets)."""
        if not self._target.gpu:
            raise PolytileError(f"no GPU mapping for target {self.options.target!r}")
        arrays = self._arrays(args, named)
        return self._compiled([a.shape for a in arrays], [a.dtype for a in arrays]).describe()

    def __call__(self, *args, **named):
        arrays = self._arrays(args, named)
        compiled = self._compiled([a.shape for a in arrays], [a.dtype for a in arrays], True,
                                  self._sizes(args, named))
        return self._target.run(compiled, arrays)

    def source(self, *args, **named) -> str:
        """The generated C for these inputs (arrays, or shapes via ``shapes=``/``dtypes=``)."""
        if "shapes" in named:
            shapes = named.pop("shapes")
            dtypes = named.pop("dtypes", None) or ["float32"] * len(shapes)
            return self.specialize_shapes(shapes, dtypes, build=False).source.text
        arrays = self._arrays(args, named)
        return self.specialize_shapes([a.shape for a in arrays], [a.dtype for a in arrays], build=False).source.text


def compile(source: SourceLike, target: str = "openmp", **options) -> Kernel:  # noqa: A001 - the public API name
    """Compile a Tile program (text, path or Program) into a shape-polymorphic :class:`Kernel`.

    >>> k = compile("examples/matmul.tile")
    >>> C = k(A, B)                # specialises on A.shape/B.shape/dtypes, compiles (cached), runs

    Options (all keyword; every one is part of the kernel cache key):

    ``target``
        ``"openmp"`` (C with OpenMP pragmas, built by the host C compiler; the default),
        ``"cuda"`` (nvcc; needs a GPU to run) or ``"cuda-emulate"`` (the CUDA mapping run on the CPU).
    ``hardware``
        The descriptor of the target: a preset name (``polytile hw list``), ``"host"`` (detected; the
        default), a ``.toml``/``.json`` file, or a descriptor object (``polytile.hardware.load(...)``).
        For openmp it guides the automatic tiling (``None`` turns it off); for cuda it is the GPU.
    ``schedule``
        A :class:`~polytile.scheduling.Schedule` (e.g. from :func:`schedule`, transformed), a list of
        its steps, or a path to a schedule saved with ``polytile schedule -o``: replayed, legality-checked,
        on every specialisation instead of the default schedule.
    ``fusion``
        ``"none"``, ``"smart"`` or ``"max"``: start from isl's scheduler with that fusion choice instead of
        program order.
    ``parallel``
        ``False`` leaves out the automatic OpenMP parallel marks (and with them the autotiling).
    ``cflags``
        C compiler flags instead of the configured ones (``POLYTILE_CFLAGS``; default ``-O3 -march=native
        -fopenmp ...``).
    """
    return Kernel(load_program(source), Options.make(target, **options))


def schedule(source: SourceLike, dims=None, *, shapes=None, dtypes=None, fusion: Optional[str] = None,
             parallel: bool = True, steps=None, hardware: Optional[str] = None) -> Schedule:
    """A schedule for these sizes, ready to transform: program order (or isl's, with
    ``fusion``) with outermost parallel loops; with ``hardware="host"`` (or another
    descriptor) the autotiled schedule ``polytile.compile`` uses by default.

    >>> s = schedule("examples/matmul.tile", dims="M=64,N=64,K=64")
    >>> s = s.tile("C", i=32, j=32)        # legality-checked; s.steps records it
    >>> k = compile("examples/matmul.tile", schedule=s)
    """
    prog = load_program(source)
    in_shapes = shapes_from_dims(prog, parse_dims(dims), shapes)
    dts = tuple(np.dtype(d).name for d in (dtypes or ["float32"] * len(in_shapes)))
    if isinstance(dtypes, str):
        dts = tuple(np.dtype(dtypes).name for _ in in_shapes)
    opts = Options.make("openmp", fusion=fusion, parallel=parallel, schedule=steps, hardware=hardware)
    spec = specialize(prog, in_shapes, dts, opts, build=False)
    meta = (("program", str(prog)), ("shapes", [list(x) for x in in_shapes]), ("dtypes", list(dts)))
    return spec.schedule.with_(meta=meta)


def build_scop(scop: Scop, schedule: Optional[Schedule] = None, *, cflags=None) -> Specialization:
    """Generate, compile and load any Scop (e.g. one from isl text or the C frontend).

    Without ``schedule`` the original order with outermost parallel loops is used.
    """
    dependences = deps_mod.compute(scop)
    if schedule is None:
        schedule = sched_mod.auto_parallel(sched_mod.initial(scop, dependences))
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

