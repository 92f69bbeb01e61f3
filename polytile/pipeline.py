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

import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

import islpy as isl
import numpy as np

from . import deps as deps_mod
from . import desugar, ir, sema
from . import interpreter as reference_mod
from .config import debug_log, get_config
from .errors import PolytileError, ShapeError, recursion_room, TileSyntaxError
from .memory import too_large
from .frontends.tile import parse, parse_file
from .poly.scop import Scop
from .poly.tile import lower as lower_to_scop
from . import scheduling as sched_mod
from .scheduling import Schedule, Step
from .codegen.c import KernelSource, generate as generate_c
from . import runtime

TARGETS = ("openmp", "cuda", "cuda-emulate")
GPU_TARGETS = ("cuda", "cuda-emulate")

SourceLike = Union[str, os.PathLike, ir.Program]


def _is_path(source) -> bool:
    """Whether ``source`` names a file rather than holding Tile text -- decided explicitly:

    a ``pathlib.Path`` (any ``os.PathLike``) is a path; a str containing ``{``,
    a line break or the word ``function`` is program text; any other str is a
    path if it ends in ``.tile`` or names an existing file; anything else is
    a TileSyntaxError (a ValueError) saying it is neither, never an OSError.
    """
    import re

    if isinstance(source, os.PathLike):
        return True
    if not isinstance(source, str):
        raise TypeError(f"expected Tile text, a path or a Program, got {type(source).__name__}")
    if "{" in source or "\n" in source or re.search(r"\bfunction\b", source):
        return False
    if source.endswith(".tile"):
        return True
    try:
        if os.path.isfile(source):
            return True
    except (OSError, ValueError):
        pass
    shown = source if len(source) <= 60 else source[:57] + "..."
    raise TileSyntaxError(f"{shown!r} is neither Tile program text (`function (...) -> (...) {{ ... }}`) "
                          f"nor an existing .tile file")


def load_program(source: SourceLike) -> ir.Program:
    """A checked Program from Tile text, a path to a ``.tile`` file, or a Program.

    >>> load_program("function (A[N]) -> (B) { B = A * 2; }").outputs
    ('B',)
    """
    if isinstance(source, ir.Program):
        prog = source
    elif _is_path(source):
        path = Path(source)
        try:
            is_file, exists = path.is_file(), path.exists()
        except OSError as e:  # e.g. a name too long for the file system
            raise PolytileError(f"cannot use {str(path)[:80]!r} as a Tile file: {e.strerror or e}") from None
        if not is_file:
            raise PolytileError(f"no such Tile file: {path}" if not exists else f"not a file: {path}")
        try:
            prog = parse_file(str(path))
        except UnicodeDecodeError as e:
            raise PolytileError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
        except OSError as e:
            raise PolytileError(f"cannot read {path}: {e.strerror}") from None
    else:
        prog = parse(source)
    with recursion_room():
        sema.check(prog)
    return prog


def shapes_from_dims(program: ir.Program, dims: Mapping[str, int],
                     shapes: Optional[Mapping[str, Sequence[int]]] = None) -> Tuple[Tuple[int, ...], ...]:
    """Input shapes from dimension sizes (``{"M": 64, ...}``) and explicit shapes for any-rank inputs.

    >>> p = load_program("function (A[M, K], B[K, 3]) -> (C) { C[i, j : M, 3] = +(A[i, k] * B[k, j]); }")
    >>> shapes_from_dims(p, {"M": 2, "K": 5})
    ((2, 5), (5, 3))
    """
    shapes = dict(shapes or {})
    out = []
    for inp in program.inputs:
        if inp.name in shapes:
            out.append(tuple(int(s) for s in shapes[inp.name]))
            continue
        if inp.dims is None:
            raise PolytileError(f"input {inp.name} has no declared dimensions: give its shape, e.g. --shape {inp.name}=4x5")
        row = []
        for d in inp.dims:
            if isinstance(d, int):
                row.append(d)
            elif d in dims:
                row.append(int(dims[d]))
            else:
                raise PolytileError(f"dimension {d} of input {inp.name} has no size: add {d}=<size> to --dims")
        out.append(tuple(row))
    return tuple(out)


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


def schedule_steps(spec) -> Tuple[Step, ...]:
    """Steps from a Schedule, a list of steps/dicts, a JSON document, or a path to one."""
    import json

    if isinstance(spec, Schedule):
        return spec.steps
    if isinstance(spec, (str, os.PathLike)):
        text = str(spec)
        if not text.lstrip().startswith(("{", "[")):
            path = Path(text)
            if not path.exists():
                raise PolytileError(f"no such schedule file: {path}")
            text = path.read_text()
        try:
            spec = json.loads(text)
        except json.JSONDecodeError as e:
            raise PolytileError(f"schedule is not valid JSON: {e}") from None
    if isinstance(spec, dict):
        if "steps" not in spec:
            raise PolytileError("schedule JSON has no 'steps' list")
        spec = spec["steps"]
    if not isinstance(spec, (list, tuple)):
        raise PolytileError(f"cannot read a schedule from {type(spec).__name__}")
    return tuple(s if isinstance(s, Step) else Step.from_json(s) for s in spec)


def replay(scop: Scop, dependences: deps_mod.Dependences, steps: Sequence[Step]) -> Schedule:
    """Rebuild a schedule on ``scop`` from its steps (the first may name the base schedule)."""
    steps = list(steps)
    base = steps.pop(0) if steps and steps[0].op == "base" else Step.make("base", kind="original")
    kw = base.kwargs()
    if kw.get("kind", "original") == "isl":
        s = sched_mod.automatic(scop, dependences, kw.get("fusion", "smart"))
    elif kw.get("kind", "original") == "original":
        s = sched_mod.initial(scop, dependences)
    else:
        raise PolytileError(f"unknown base schedule {kw.get('kind')!r} (use 'original' or 'isl')")
    for st in steps:
        s = sched_mod.apply_step(s, st)
    return s


@dataclass(frozen=True, eq=False)
class Specialization:
    """Everything produced for one (program, shapes, dtypes, options)."""

    bound: Any
    scop: Scop
    deps: deps_mod.Dependences
    schedule: Schedule
    source: KernelSource
    library_path: Optional[Path] = None
    function: Any = None


def _stage(name: str, t0: float, detail=None, level: int = 2) -> None:
    debug_log(1, "pipeline", f"{name} ({(time.perf_counter() - t0) * 1e3:.1f} ms)")
    if detail is not None:
        debug_log(level, name, detail)


def default_schedule(scop: Scop, dependences: deps_mod.Dependences, options: Options) -> Schedule:
    """The schedule a kernel is compiled with.

    A user schedule's steps are replayed; otherwise program order (or isl's
    scheduler with ``fusion``) with the outermost dependence-free loop of
    each nest marked parallel.
    """
    if options.schedule is not None:
        return replay(scop, dependences, options.schedule)
    if options.fusion is not None:
        s = sched_mod.automatic(scop, dependences, options.fusion)
    else:
        s = sched_mod.initial(scop, dependences)
    s = sched_mod.auto_parallel(s) if options.parallel else s
    if options.hardware is not None and options.parallel:
        from .autotile import autotile

        s, _ = autotile(s, load_hardware(options.hardware))
    return s


_HARDWARE: Dict[str, Any] = {}


def load_hardware(name):
    """A hardware descriptor by preset name or file, loaded once per process (an object as is)."""
    from . import hardware

    if not isinstance(name, str):
        return hardware.load(name)
    if name not in _HARDWARE:
        _HARDWARE[name] = hardware.load(name)
    return _HARDWARE[name]


def specialize(program: ir.Program, shapes, dtypes, options: Options, *, build: bool = True,
               sizes: Optional[Mapping[str, int]] = None) -> Specialization:
    """Run the passes for concrete shapes/dtypes (and size inputs' values); with ``build``, compile and load too."""
    with recursion_room():
        return _specialize(program, shapes, dtypes, options, build, sizes)


def _specialize(program, shapes, dtypes, options, build, sizes) -> Specialization:
    t0 = time.perf_counter()
    bound = sema.bind(program, shapes, dtypes, sizes)
    _stage("bind", t0)
    t0 = time.perf_counter()
    scop = lower_to_scop(bound)
    _stage("lower", t0, scop.describe)
    t0 = time.perf_counter()
    dependences = deps_mod.compute(scop)
    _stage("deps", t0, dependences.describe)
    t0 = time.perf_counter()
    sched = default_schedule(scop, dependences, options)
    _stage("schedule", t0, lambda: sched.describe())
    t0 = time.perf_counter()
    source = generate_c(scop, sched.tree(), header=str(program))
    _stage("codegen", t0, source.text, level=3)
    if not build:
        return Specialization(bound, scop, dependences, sched, source)
    t0 = time.perf_counter()
    cfg = get_config()
    flags = options.cflags if options.cflags is not None else cfg.cflags
    path = runtime.build(source.text, flags=flags, name_hint=scop.name)
    fn = runtime.load(path).function(source.entry, len(source.params))
    _stage("build", t0, str(path), level=1)
    return Specialization(bound, scop, dependences, sched, source, path, fn)


class Kernel:
    """A compiled Tile program, shape-polymorphic: each new input signature specialises.

    >>> k = compile("function (A[M, K], B[K, N]) -> (C) { C[i, j : M, N] = +(A[i, k] * B[k, j]); }")
    >>> C = k(np.ones((2, 3), np.float32), np.ones((3, 4), np.float32))   # C is 2x4, all 3.0
    """

    def __init__(self, program: ir.Program, options: Options):
        self.program = program
        self.options = options
        self._cache: Dict[str, Specialization] = {}
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
        sizes = dict(sizes or {})
        key = (tuple(tuple(s) for s in shapes), tuple(np.dtype(d).name for d in dtypes), build, sorted(sizes.items()))
        skey = repr(key)
        spec = self._cache.get(skey)
        if spec is None:
            if self.options.target in GPU_TARGETS:
                spec = self._gpu(shapes, dtypes, sizes).spec
            else:
                spec = specialize(self.program, shapes, dtypes, self.options, build=build, sizes=sizes)
            self._cache[skey] = spec
        return spec

    def _gpu(self, shapes, dtypes, sizes=None):
        """The CUDA (or emulated) kernel for a signature; GPU mapping and launch live in cuda_target."""
        from . import cuda_target

        sizes = dict(sizes or {})
        key = ("gpu", tuple(tuple(s) for s in shapes), tuple(np.dtype(d).name for d in dtypes), sorted(sizes.items()))
        k = self._cache.get(repr(key))
        if k is None:
            hw = self.options.hardware
            if hw is None or hw == "host" or getattr(load_hardware(hw), "kind", "cpu") != "gpu":
                hw = "nvidia-h100"  # the host is a CPU: map for the default GPU descriptor
            k = cuda_target.compile_cuda(self.program, shapes, dtypes, hardware=hw,
                                         emulate=self.options.target == "cuda-emulate", sizes=sizes)
            self._cache[repr(key)] = k
        return k

    def describe_mapping(self, *args, **named) -> str:
        """Grid/block mapping of every GPU kernel for these inputs (CUDA targets)."""
        if self.options.target not in GPU_TARGETS:
            raise PolytileError(f"no GPU mapping for target {self.options.target!r}")
        arrays = self._arrays(args, named)
        return self._gpu([a.shape for a in arrays], [a.dtype for a in arrays]).describe()

    def __call__(self, *args, **named):
        arrays = self._arrays(args, named)
        if self.options.target in GPU_TARGETS:
            return self._gpu([a.shape for a in arrays], [a.dtype for a in arrays], self._sizes(args, named))(*arrays)
        spec = self.specialize_shapes([a.shape for a in arrays], [a.dtype for a in arrays],
                                      sizes=self._sizes(args, named))
        return run_specialization(spec, arrays)

    def source(self, *args, **named) -> str:
        """The generated C for these inputs (arrays, or shapes via ``shapes=``/``dtypes=``)."""
        if "shapes" in named:
            shapes = named.pop("shapes")
            dtypes = named.pop("dtypes", None) or ["float32"] * len(shapes)
            return self.specialize_shapes(shapes, dtypes, build=False).source.text
        arrays = self._arrays(args, named)
        return self.specialize_shapes([a.shape for a in arrays], [a.dtype for a in arrays], build=False).source.text


def run_specialization(spec: Specialization, arrays: Sequence[np.ndarray]):
    """Allocate outputs and temporaries, call the compiled function, return the outputs."""
    bufs = {}
    given = {name: a for name, a in zip(spec.bound.program.input_names, arrays)}
    for p in spec.source.params:
        if p.kind == "input":
            raw = given[p.source_name]
            if p.source_name in spec.bound.sizes:
                # A constant also read as a 0-d tensor: int32, as PlaidML types every Integer/Real.
                raw = np.array(math.trunc(spec.bound.sizes[p.source_name]), dtype=p.dtype)
            a = raw if raw.flags.c_contiguous else np.ascontiguousarray(raw)  # (keeps 0-d arrays 0-d)
            if a.dtype.name != p.dtype or a.shape != tuple(p.shape):
                raise ShapeError(f"input {p.source_name}: expected {p.dtype}{list(p.shape)}, got {a.dtype}{list(a.shape)}")
            bufs[p.name] = a
    need = sum(int(np.prod(p.shape, dtype=object)) * np.dtype(p.dtype).itemsize
               for p in spec.source.params if p.kind != "input")
    why = too_large(need)
    if why:  # before allocating: an overcommitted array is killed later, not refused
        raise ShapeError(f"the outputs and temporaries need {need:,} bytes: too large to allocate ({why})")
    for p in spec.source.params:
        if p.kind != "input":
            try:
                bufs[p.name] = np.empty(p.shape, dtype=p.dtype)
            except (MemoryError, ValueError):
                size = int(np.prod(p.shape, dtype=object)) * np.dtype(p.dtype).itemsize
                raise ShapeError(f"{p.source_name}: {p.dtype}{list(p.shape)} needs {size:,} bytes: too large to "
                                 f"allocate") from None
    spec.function(*[bufs[p.name] for p in spec.source.params])
    by_source = {p.source_name: bufs[p.name] for p in spec.source.params}
    outs = tuple(by_source[o] for o in spec.bound.program.outputs)
    return outs[0] if len(outs) == 1 else outs


def compile(source: SourceLike, target: str = "openmp", **options) -> Kernel:  # noqa: A001 - the public API name
    """Compile a Tile program (text, path or Program) into a shape-polymorphic :class:`Kernel`.

    >>> k = compile("examples/matmul.tile")
    >>> C = k(A, B)                # specialises on A.shape/B.shape/dtypes, compiles (cached), runs
    """
    return Kernel(load_program(source), Options.make(target, **options))


def parse_dims(text) -> Dict[str, int]:
    """``"M=64, N=48"`` (or a mapping) -> ``{"M": 64, "N": 48}``.

    >>> parse_dims("M=64,N=48")
    {'M': 64, 'N': 48}
    """
    if text is None:
        return {}
    if isinstance(text, Mapping):
        return {str(k): int(v) for k, v in text.items()}
    out: Dict[str, int] = {}
    for item in str(text).replace(" ", ",").split(","):
        if not item:
            continue
        name, eq, value = item.partition("=")
        name = name.strip().lstrip("#")
        if not eq or not name or not value.strip().lstrip("-").isdigit():
            raise PolytileError(f"bad dimension {item!r}: write NAME=SIZE, e.g. M=64")
        out[name] = int(value)
    return out


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


def run_scop(spec: Specialization, arrays: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """Call a built Scop on named arrays (copied; ``inout`` arrays start from the given values).

    Returns every array after the call, by name.
    """
    bufs: Dict[str, np.ndarray] = {}
    for p in spec.source.params:
        if p.name in arrays:
            a = np.array(arrays[p.name], dtype=p.dtype, copy=True, order="C")
            if a.shape != p.shape:
                raise ShapeError(f"array {p.name}: expected shape {p.shape}, got {a.shape}")
            bufs[p.name] = a
        elif p.kind in ("input", "inout"):
            raise ShapeError(f"missing array {p.name} ({p.kind}, shape {p.shape})")
        else:
            bufs[p.name] = np.zeros(p.shape, dtype=p.dtype)
    spec.function(*[bufs[p.name] for p in spec.source.params])
    return bufs


def reference(source: SourceLike, *arrays, **named):
    """Run the numpy oracle on a Tile program: ``polytile.reference("matmul.tile", A, B)``."""
    prog = load_program(source)
    if named:
        names = prog.input_names
        arrays = tuple(arrays) + tuple(named[n] for n in names[len(arrays):])
    return reference_mod.run(prog, *arrays)

