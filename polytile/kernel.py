"""The Kernel object: a compiled Tile program called on numpy arrays, one specialisation per signature.

A call finds its :class:`~polytile.specialization.Launcher` in three places, fastest first::

    signature (shapes, dtypes, size values)
      -> this Kernel's table              a dict lookup
      -> the specialization cache         one JSON document + the verified library: no isl, no compiler
      -> pipeline.compile_signature       the passes (islpy, the autotiler, the C compiler), then stored

The specialization cache (namespace ``spec`` of the runtime's JSON cache) is keyed by everything that
decides the generated code: the program's canonical text, the shapes, dtypes and size values, the
options (the hardware descriptor by its contents), the C compiler's path and version, the flags,
polytile's version and the fingerprint of its code (:func:`specialization_key`).  Its document holds
the :class:`CallPlan` and the kernel cache entry (key and name) of the library; the library is loaded
only when its entry passes the kernel cache's checks (private directories, no symbolic links, sha256
against the manifest), and a document whose library is gone or damaged is a miss (the pipeline runs
and rebuilds it).  The C compiler is not run on a hit, but it must be installed: its path and version
are part of the key.  Only the hit path's modules are imported at the top of this file: the pipeline
(and with it islpy) is imported on a miss.

    >>> k = compile("function (A[N]) -> (B) { B = A * 2; }")
    >>> k(np.arange(3, dtype=np.float32))
    array([0., 2., 4.], dtype=float32)
"""
from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from typing import Any, Dict, Optional, Tuple

import numpy as np

from . import desugar, ir, runtime, targets
from . import interpreter as reference_mod
from .config import debug_log, get_config
from .errors import CacheError, InternalError, PolytileError, ShapeError, recursion_room
from .options import Options
from .program import SourceLike, load_program
from .specialization import CallPlan, Launcher, Specialization
from .version import __version__, code_fingerprint

#: Bump when what a cached specialisation means changes (the plan's layout, the key's parts).
SPEC_FORMAT = 2
#: The JSON cache namespace of specialisations.
NAMESPACE = "spec"


def specialization_key(program: ir.Program, shapes, dtypes, sizes, options: Options, *, compiler: bool = True) -> str:
    """The specialization cache key of one signature: sha256 of everything that decides the code
    (without ``compiler``, the C compiler and its flags are left out: an in-process JIT uses neither).

    >>> p = load_program("function (A[N]) -> (B) { B = A * 2; }")
    >>> k = specialization_key(p, [(4,)], ["float32"], {}, Options.make(hardware=None))
    >>> len(k), k == specialization_key(p, [(5,)], ["float32"], {}, Options.make(hardware=None))
    (64, False)
    """
    parts = {
        "format": SPEC_FORMAT, "polytile": __version__, "code": code_fingerprint(), "program": str(program),
        "shapes": [[int(n) for n in s] for s in shapes], "dtypes": [np.dtype(d).name for d in dtypes],
        "sizes": sorted([k, repr(v)] for k, v in sizes.items()), "options": options.fingerprint(),
    }
    if compiler:
        cfg = get_config()
        flags = options.cflags if options.cflags is not None else cfg.cflags
        parts.update({"cc": runtime.resolve_compiler(cfg.cc), "cc_version": runtime.compiler_version(cfg.cc),
                      "cflags": list(flags)})
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


#: In-process (JIT) launchers kept per process, least recently used dropped first: each holds its
#: compiled code (an LLVM execution engine), so the count is bounded.
JIT_LAUNCHERS_KEPT = 64
_JIT_LAUNCHERS: "OrderedDict[str, Launcher]" = OrderedDict()
_JIT_LOCK = threading.Lock()


def _cached_launcher(key: str) -> Optional[Launcher]:
    """The launcher stored under ``key``, or None (no document, or its library is gone or damaged)."""
    doc = runtime.json_get(NAMESPACE, key)
    if doc is None:
        return None
    root = runtime.check_root(get_config().cache_dir)
    try:
        plan = CallPlan.from_json(doc["plan"])
        entry, name = str(doc["entry"]), str(doc["name"])
        # The library's place is rebuilt from the entry, never taken from the document, and checked
        # as a lookup of the kernel cache would (no symbolic links, private directories, manifest).
        lib = runtime.entry_library(root, entry, name)
        problem = runtime.check_entry(lib.parent, name)
        if problem is not None:
            raise CacheError(problem)
        launcher = Launcher(plan, runtime.load(lib).function(plan.entry, len(plan.params)))
    except (KeyError, TypeError, ValueError, CacheError, PolytileError, InternalError) as exc:
        # Damaged, evicted or replaced: build again (which also replaces a damaged library).
        debug_log(1, "runtime", f"specialization {key[:12]}: not usable ({exc}); compiling")
        return None
    runtime.stats.count("spec_hits")
    debug_log(1, "runtime", f"specialization cache hit {key[:12]} -> {entry[:12]}/lib{name}.so")
    return launcher


def _store(key: str, spec: Specialization, plan: CallPlan) -> None:
    found = runtime.entry_of(spec.library_path)
    if found is None:
        return  # not a kernel cache entry (none today): not recorded
    runtime.json_put(NAMESPACE, key, {"entry": found[0], "name": found[1], "plan": plan.to_json()})


class Kernel:
    """A compiled Tile program, shape-polymorphic: each new input signature specialises.

    ``k(A, B)`` returns the outputs (one array, or a tuple); ``k(A, B, out=C)`` writes them into the
    given arrays (checked for shape, dtype, contiguity and overlap with the inputs) and returns those.
    A program with an input called ``out`` takes it by that name; its outputs are then always new.

    >>> k = compile("function (A[M, K], B[K, N]) -> (C) { C[i, j : M, N] = +(A[i, k] * B[k, j]); }")
    >>> C = k(np.ones((2, 3), np.float32), np.ones((3, 4), np.float32))   # C is 2x4, all 3.0
    >>> k(np.ones((2, 3), np.float32), np.ones((3, 4), np.float32), out=C) is C
    True
    """

    def __init__(self, program: ir.Program, options: Options):
        self.program = program
        self.options = options
        self._target = targets.get(options.target)
        self._cache: Dict[Any, Any] = {}  # signature -> what the target compiled
        self._launchers: Dict[Any, Optional[Launcher]] = {}  # signature -> launcher (None: the target's run)
        self._names = tuple(program.input_names)
        self._out_is_input = "out" in self._names
        self._scalar_inputs = frozenset(i.name for i in program.inputs if not i.dims)
        self._lean = not self._scalar_inputs  # numbers among the inputs are part of the signature
        self._size_inputs = (frozenset(desugar.size_inputs(desugar.normalize(program))) if self._scalar_inputs
                             else frozenset())

    def __repr__(self) -> str:
        ins = ", ".join(i.name for i in self.program.inputs)
        outs = ", ".join(self.program.outputs)
        return f"<polytile.Kernel ({ins}) -> ({outs}) target={self.options.target}>"

    # -- argument handling -------------------------------------------------
    def _arrays(self, args, named) -> Tuple[np.ndarray, ...]:
        names = self._names
        if named:
            unknown = [k for k in named if k not in names]
            if unknown:
                raise ShapeError(f"unknown input(s) {', '.join(unknown)}; the inputs are {', '.join(names)}")
            if len(args) + len(named) != len(names):
                missing = [n for n in names[len(args):] if n not in named]
                raise ShapeError(f"expected {len(names)} inputs ({', '.join(names)}); missing {', '.join(missing)}")
            args = tuple(args) + tuple(named[n] for n in names[len(args):])
        if len(args) != len(names):
            raise ShapeError(f"expected {len(names)} inputs ({', '.join(names)}), got {len(args)}")
        out = []
        for name, a in zip(names, args):
            if not isinstance(a, np.ndarray):
                try:
                    a = np.asarray(a)
                except Exception:
                    raise ShapeError(f"input {name}: expected a numpy array, got {type(a).__name__}") from None
            if not a.dtype.isnative:
                a = a.astype(a.dtype.newbyteorder("="))  # C reads native byte order
            out.append(a)
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
        """What the target built for this signature (cached per kernel): the pipeline's passes."""
        sizes = dict(sizes or {})
        key = (tuple(tuple(int(n) for n in s) for s in shapes), tuple(np.dtype(d).name for d in dtypes), build,
               tuple(sorted(sizes.items())))
        compiled = self._cache.get(key)
        if compiled is None:
            from . import pipeline

            compiled = pipeline.compile_signature(self.program, shapes, dtypes, self.options, build=build,
                                                  sizes=sizes)
            self._cache[key] = compiled
        return compiled

    def _launcher(self, arrays, sizes) -> Optional[Launcher]:
        """The launcher of this signature: from the specialization cache, or compiled (and stored)."""
        shapes, dtypes = [a.shape for a in arrays], [a.dtype for a in arrays]
        key = None
        if self._target.disk_cacheable:
            with recursion_room():  # the program's text of a deep expression
                key = specialization_key(self.program, shapes, dtypes, sizes, self.options)
            launcher = _cached_launcher(key)
            if launcher is not None:
                return launcher
        jit_key = None
        if getattr(self._target, "in_process", False):
            # JIT-compiled kernels have nothing on disk; within the process the same signature of the same
            # program (also from another Kernel object) is compiled once (about 0.3 s for a matmul).
            with recursion_room():
                jit_key = specialization_key(self.program, shapes, dtypes, sizes, self.options, compiler=False)
            with _JIT_LOCK:
                launcher = _JIT_LAUNCHERS.get(jit_key)
                if launcher is not None:
                    _JIT_LAUNCHERS.move_to_end(jit_key)
                    return launcher
        compiled = self._compiled(shapes, dtypes, True, sizes)
        if not self._target.disk_cacheable:
            if jit_key is not None:  # JIT-compiled: a launcher, nothing on disk
                spec = self._target.specialization(compiled)
                launcher = Launcher(CallPlan.of(spec), spec.function)
                with _JIT_LOCK:
                    _JIT_LAUNCHERS[jit_key] = launcher
                    while len(_JIT_LAUNCHERS) > JIT_LAUNCHERS_KEPT:
                        _JIT_LAUNCHERS.popitem(last=False)
                return launcher
            return None
        spec = self._target.specialization(compiled)
        plan = CallPlan.of(spec)
        try:
            _store(key, spec, plan)
        except CacheError as exc:  # a read-only cache still runs the kernel
            debug_log(1, "runtime", f"specialization not stored: {exc}")
        return Launcher(plan, spec.function)

    def describe_mapping(self, *args, **named) -> str:
        """Grid/block mapping of every GPU kernel for these inputs (CUDA targets)."""
        if not self._target.gpu:
            raise PolytileError(f"no GPU mapping for target {self.options.target!r}")
        arrays = self._arrays(args, named)
        return self._compiled([a.shape for a in arrays], [a.dtype for a in arrays]).describe()

    def __call__(self, *args, out=None, **named):
        if self._lean and not named and (out is None or not self._out_is_input):
            # The lean path: numpy arrays of a signature seen before (anything else -- lists, other array
            # types, foreign byte order, a new signature -- misses here and takes the checked path below).
            # The signature holds each input's type, shape and dtype: the launcher need not check them.
            try:
                launcher = self._launchers[tuple([(type(a), a.shape, a.dtype) for a in args])]
            except (AttributeError, KeyError, TypeError):
                pass
            else:
                if launcher is not None:
                    return launcher.launch(args, out)
        if self._out_is_input and out is not None:
            named["out"], out = out, None
        arrays = self._arrays(args, named)
        sizes = self._sizes(args, named) if self._scalar_inputs else {}
        signature = tuple([(type(a), a.shape, a.dtype) for a in arrays])
        if sizes:
            signature += (tuple(sorted((k, repr(v)) for k, v in sizes.items())),)  # repr: NaN equals itself
        try:
            launcher = self._launchers[signature]
        except KeyError:
            launcher = self._launchers[signature] = self._launcher(arrays, sizes)
        if launcher is not None:
            return launcher(arrays, out)
        if out is not None:
            raise PolytileError(f"out= is not supported by target {self.options.target!r}; use target 'openmp'")
        compiled = self._compiled([a.shape for a in arrays], [a.dtype for a in arrays], True, sizes)
        return self._target.run(compiled, arrays)

    def source(self, *args, **named) -> str:
        """The generated C for these inputs (arrays, or shapes via ``shapes=``/``dtypes=``)."""
        if "shapes" in named:
            shapes = named.pop("shapes")
            dtypes = named.pop("dtypes", None) or ["float32"] * len(shapes)
            return self.specialize_shapes(shapes, dtypes, build=False).source.text
        arrays = self._arrays(args, named)
        return self.specialize_shapes([a.shape for a in arrays], [a.dtype for a in arrays], build=False).source.text


def compile(source: SourceLike, target: Optional[str] = None, **options) -> Kernel:  # noqa: A001 - the public API name
    """Compile a Tile program (text, path or Program) into a shape-polymorphic :class:`Kernel`.

    >>> k = compile("examples/matmul.tile")
    >>> A = np.ones((4, 3), np.float32); B = np.ones((3, 5), np.float32)
    >>> C = k(A, B)                # specialises on A.shape/B.shape/dtypes, compiles (cached), runs

    Options (all keyword; every one is part of the kernel cache key):

    ``target``
        ``"openmp"`` (C with OpenMP pragmas, built by the host C compiler; the default where one is found),
        ``"llvm"`` (LLVM IR JIT-compiled in-process by llvmlite; the default where no C compiler is found),
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
    ``min_parallel_work``
        Statement instances one execution of a parallel loop must run to keep its parallel region (entering
        one costs microseconds): ``None`` (default) takes the cost model's bound (about 12 000 at two
        threads), ``0`` keeps every parallel loop, however small.

    An openmp kernel compiled once for a signature is found again by any later process in the
    specialization cache (see :mod:`polytile.kernel`) without running the pipeline.
    """
    return Kernel(load_program(source), Options.make(target or targets.default_name(), **options))


__all__ = ["Kernel", "compile", "specialization_key", "Options"]
