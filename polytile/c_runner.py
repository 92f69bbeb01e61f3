"""Build C files into cached shared libraries and call a region's function on numpy arrays.

This is what ``polytile compare FILE.c`` runs, and what the C tests use: the
original file and each ``polytile opt`` variant of it are compiled with the
same compiler and flags (through :mod:`polytile.runtime`, so builds are
cached), the function holding the regions is called through ctypes on the
same random inputs, every array it can reach is compared byte for byte with
the original build's, and the calls are timed.

    >>> from polytile import c_runner
    >>> call = c_runner.prepare("tests/c_kernels/gemm.c", sizes={"ni": 64, "nj": 64, "nk": 64})  # doctest: +SKIP
    >>> lib = c_runner.build(call.source, name="gemm")                                           # doctest: +SKIP
    >>> arrays, times = call.run(lib, repeat=3)                                                  # doctest: +SKIP
    >>> result = c_runner.compare_c(call, c_runner.variants(fusion=["max"]), repeat=5)           # doctest: +SKIP
    >>> print(result.table())                                                                    # doctest: +SKIP

Arguments of the function: ``int`` parameters are sizes (``sizes``, no
default), integer macros the regions use are sizes too (the file's value
unless ``sizes`` gives another: the ``#define`` line is rewritten in every
build), floating-point parameters come from ``scalars`` (default 1.5),
arrays and pointers are allocated with the extents their declarations give
(evaluated with the sizes), or, where C does not say (``double *x``, the
first extent of ``double (*A)[n]``), the extents the regions access, unless
``shapes`` names them.  File-scope arrays the regions touch are reached
through their symbols in the library.  Anything that cannot be supplied
(a missing size, a ``double **`` parameter, a static global) is an error
naming it.
"""
from __future__ import annotations

import ast
import ctypes
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from . import compare as compare_mod
from . import c_optimiser
from . import runtime
from .runtime import openmp
from .errors import IllegalSchedule, PolytileError
from .frontends.c import CParam, CScop, extract, file_globals
from .c_optimiser.team import copies as team_copies

#: Flags of every build: the ones ``bench_c`` times with, plus ``-ffp-contract=off`` so that
#: both builds round every operation the same way (GCC may fuse a multiply and an add into an
#: FMA in one loop structure and not in another, which would make a bitwise check meaningless).
DEFAULT_FLAGS: Tuple[str, ...] = ("-O3", "-march=native", "-fopenmp", "-ffp-contract=off")
#: Added to every build: a shared library ctypes can load.
_SHARED = ("-fPIC", "-shared")
#: Default value of a floating-point parameter (``alpha``, ``beta``, ...).
DEFAULT_SCALAR = 1.5

_CTYPES = {"int8": ctypes.c_int8, "int16": ctypes.c_int16, "int32": ctypes.c_int32, "int64": ctypes.c_int64,
           "uint8": ctypes.c_uint8, "uint16": ctypes.c_uint16, "uint32": ctypes.c_uint32,
           "uint64": ctypes.c_uint64, "float32": ctypes.c_float, "float64": ctypes.c_double,
           "bool": ctypes.c_bool}


# ---------------------------------------------------------------------------
# building
# ---------------------------------------------------------------------------


def build(source, *, name: str, flags: Sequence[str] = DEFAULT_FLAGS, include_dir: Optional[Path] = None,
          cc: Optional[str] = None) -> Path:
    """Compile C ``source`` (text or bytes) into a shared library (cached); its path.

    ``include_dir`` is searched for ``#include "..."`` files (the original
    file's directory: the runtime compiles a copy kept in its cache).  The
    cache key covers the source, flags and compiler, not the included files.

    >>> # build(Path("gemm.c").read_bytes(), name="gemm")  -> .../libgemm.so
    """
    if isinstance(source, bytes):
        try:
            source = source.decode("utf-8")
        except UnicodeDecodeError as e:
            raise PolytileError(f"{name}: the C source is not UTF-8 ({e})") from None
    extra = [f"-I{include_dir}"] if include_dir is not None else []
    return runtime.build(source, flags=[*flags, *_SHARED, *extra], cc=cc, name_hint=runtime.sanitize_name(name))


def set_macros(source: bytes, values: Mapping[str, int]) -> bytes:
    """``source`` with the value of each ``#define NAME value`` line replaced by ``values[NAME]``.

    >>> set_macros(b"#define N 10\\nint x[N];\\n", {"N": 64})
    b'#define N 64\\nint x[N];\\n'
    """
    for macro, value in values.items():
        pattern = rb"^([ \t]*#[ \t]*define[ \t]+" + re.escape(macro.encode()) + rb"[ \t]+)[^\s]+"
        source, n = re.subn(pattern, lambda m: m.group(1) + str(int(value)).encode(), source, flags=re.M)
        if n != 1:
            raise PolytileError(f"cannot set macro {macro}: the file needs exactly one '#define {macro} <value>' "
                                f"line (found {n})")
    return source


# ---------------------------------------------------------------------------
# what to pass
# ---------------------------------------------------------------------------


def eval_extent(text: str, values: Mapping[str, int]) -> int:
    """The value of an array extent's C text (``n``, ``N + 2``, ``2 * m``) given the sizes.

    >>> eval_extent("N + 2", {"N": 8})
    10
    """
    def ev(node) -> int:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in values:
                raise KeyError(node.id)
            return int(values[node.id])
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = ev(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp):
            a, b = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Add):
                return a + b
            if isinstance(node.op, ast.Sub):
                return a - b
            if isinstance(node.op, ast.Mult):
                return a * b
            if isinstance(node.op, (ast.Div, ast.FloorDiv)) and b:
                return int(a / b)  # C's division truncates
            if isinstance(node.op, ast.Mod) and b:
                return int(np.fmod(a, b))
        raise ValueError(text)

    try:
        # C integer suffixes (10L, 4u) are not Python.
        return ev(ast.parse(re.sub(r"\b(\d+)[uUlL]+\b", r"\1", text), mode="eval"))
    except SyntaxError:
        raise ValueError(text) from None


@dataclass
class Call:
    """A call of one C function: its arguments and the arrays it reaches, for one set of sizes.

    ``inputs`` holds every array the function can be observed through:
    array parameters and the file-scope variables its regions touch
    (``globals``, reached through their symbols in the library).
    ``source`` is the file's bytes with the macros set to ``macros``.
    """

    path: Path
    function: str
    signature: Tuple[CParam, ...]
    sizes: Dict[str, int]
    scalars: Dict[str, float]
    inputs: Dict[str, np.ndarray]
    globals: Tuple[str, ...] = ()
    macros: Dict[str, int] = field(default_factory=dict)
    source: bytes = b""
    regions: Tuple[CScop, ...] = ()
    pure: Tuple[str, ...] = ()  # functions vouched pure (opt --pure)
    cpp_args: Tuple[str, ...] = ()  # preprocessor options (-I, -D, -U, -std=): every build gets them too

    def with_macros(self, text: bytes) -> bytes:
        """``text`` (the file or an optimised version of it) with the macros this call needs."""
        return set_macros(text, self.macros) if self.macros else text

    def run(self, library: Path, *, repeat: int = 0, warmup: int = 0) -> Tuple[Dict[str, np.ndarray], List[float]]:
        """Call the function in ``library`` ``warmup + repeat`` times (at least once), each on fresh copies
        of ``inputs``; the arrays after the last call and the ``repeat`` timed calls' seconds.

        >>> # arrays, times = call.run(build(call.source, name="gemm"), repeat=5, warmup=1)
        """
        openmp.load()  # the libgomp a parallel region links, with polytile's spin (runtime.openmp)
        try:
            cdll = ctypes.CDLL(str(library), mode=ctypes.RTLD_LOCAL)
        except OSError as exc:
            # The file is built alone: a function it calls from another source file (PolyBench's
            # polybench_alloc_data, say) is missing.  A fact about the user's file, not a polytile bug.
            missing = re.search(r"undefined symbol: (\w+)", str(exc))
            if missing:
                raise PolytileError(f"{self.path}: calls {missing.group(1)}(), which is defined in another "
                                    f"source file; polytile builds the file alone to call {self.function}() "
                                    f"(move the region into a function that only calls pure functions, or "
                                    f"check the two builds with your own harness)") from None
            raise
        try:
            fn = cdll[self.function]
        except AttributeError:
            raise PolytileError(f"{library}: no function {self.function!r} (is it static?)") from None
        state: Dict[str, np.ndarray] = {}
        for name in self.globals:
            arr = self.inputs[name]
            try:
                buf = (ctypes.c_char * arr.nbytes).in_dll(cdll, name)
            except ValueError:
                raise PolytileError(f"{self.path}: {self.function}() uses the file-scope variable {name}, which "
                                    f"the built library does not export") from None
            state[name] = np.frombuffer(buf, dtype=arr.dtype).reshape(arr.shape)
        for name, arr in self.inputs.items():
            if name not in state:
                state[name] = np.empty_like(arr)
        args, types = [], []
        for p in self.signature:
            if p.kind == "int":
                args.append(int(self.sizes[p.name]))
                types.append(_CTYPES.get(p.dtype or "int32", ctypes.c_int))
            elif p.kind == "float":
                args.append(float(self.scalars[p.name]))
                types.append(_CTYPES.get(p.dtype or "float64", ctypes.c_double))
            else:
                args.append(state[p.name].ctypes.data_as(ctypes.c_void_p))
                types.append(ctypes.c_void_p)
        fn.argtypes, fn.restype = types, None
        times: List[float] = []
        for k in range(warmup + max(1, repeat)):
            for name, arr in self.inputs.items():
                np.copyto(state[name], arr)
            t0 = time.perf_counter()
            fn(*args)
            if k >= warmup:
                times.append(time.perf_counter() - t0)
        out = {name: arr.copy() for name, arr in state.items()}
        return out, (times if repeat else [])


def functions(path, *, function: Optional[str] = None, assume_no_alias: bool = False, pure: Sequence[str] = (),
              cpp_args: Sequence[str] = ()) -> List[str]:
    """Names of the functions holding the file's regions, in file order (``function`` alone if given)."""
    if function is not None:
        return [function]
    names: List[str] = []
    for cs in extract(path, skip_nonaffine=True, assume_no_alias=assume_no_alias, pure=pure, cpp_args=cpp_args):
        if cs.function not in names:
            names.append(cs.function)
    return names


def prepare(path, *, sizes: Optional[Mapping[str, int]] = None, scalars: Optional[Mapping[str, float]] = None,
            shapes: Optional[Mapping[str, Sequence[int]]] = None, function: Optional[str] = None,
            whole_function: bool = False, seed: int = 0, assume_no_alias: bool = False,
            other_sizes: bool = False, default_size: Optional[int] = None, pure: Sequence[str] = (),
            cpp_args: Sequence[str] = (), size_option: str = "--dims") -> Call:
    """The call of the function holding the regions of ``path`` (or ``function``'s) with random inputs.

    ``whole_function`` reads ``function``'s body as the region (``extract(function=...)``) instead of its
    ``#pragma scop`` regions.  ``sizes`` naming nothing of this function are an error (a typo) unless
    ``other_sizes`` (one set of sizes for several functions); an integer parameter without a size is
    ``default_size`` if given (``opt --verify``), else an error naming ``size_option``, the command's option
    that gives sizes (``--dims``, ``opt --tune``'s ``--tune-dims``).  ``pure`` and ``cpp_args`` are
    :func:`extract`'s (the builds get ``cpp_args`` too).  Raises :class:`PolytileError` naming
    whatever cannot be supplied.

    >>> # prepare("gemm.c", sizes={"ni": 64, "nj": 64, "nk": 64}).inputs["C"].shape -> (64, 64)
    """
    path = Path(path)
    sizes = {k: int(v) for k, v in (sizes or {}).items()}
    scalars = {k: float(v) for k, v in (scalars or {}).items()}
    shapes = {k: tuple(int(x) for x in v) for k, v in (shapes or {}).items()}
    fn_arg = function if whole_function else None
    from .frontends.c.source import check_cpp_args

    cpp_args = tuple(check_cpp_args(cpp_args))
    pure = tuple(pure)
    regions = extract(path, function=fn_arg, skip_nonaffine=True, assume_no_alias=assume_no_alias, pure=pure,
                      cpp_args=cpp_args)
    if function is not None and not whole_function:
        regions = [cs for cs in regions if cs.function == function]
    if not regions:
        where = f"in {function}()" if function else "in the file"
        raise PolytileError(f"{path}: no #pragma scop region {where} to run")
    names = sorted({cs.function for cs in regions})
    if len(names) > 1:
        raise PolytileError(f"{path}: regions in several functions ({', '.join(names)}); pick one")
    fname = regions[0].function
    signature = regions[0].signature
    file_macros: Dict[str, int] = {}
    for cs in regions:
        file_macros.update(cs.macros)
    used_macros = {p for cs in regions for p in cs.params if p in file_macros}

    ints = [p.name for p in signature if p.kind == "int"]
    floats = [p.name for p in signature if p.kind == "float"]
    unknown = sorted(set(sizes) - set(ints) - set(file_macros))
    if other_sizes:
        sizes = {k: v for k, v in sizes.items() if k not in unknown}
    elif unknown:
        raise PolytileError(f"{path}: {fname}() has no integer parameter or macro named {', '.join(unknown)} "
                            f"(sizes: {', '.join(ints + sorted(used_macros)) or 'none'})")
    if default_size is not None:
        sizes.update({n: int(default_size) for n in ints if n not in sizes})
    missing = [n for n in ints if n not in sizes]
    if missing:
        raise PolytileError(f"{path}: {fname}() needs a value for {', '.join(missing)}: pass "
                            f"{size_option} {','.join(f'{n}=<int>' for n in missing)}")
    bad_scalars = sorted(set(scalars) - set(floats))
    if other_sizes:
        scalars = {k: v for k, v in scalars.items() if k in floats}
    elif bad_scalars:
        raise PolytileError(f"{path}: {fname}() has no floating-point parameter named {', '.join(bad_scalars)} "
                            f"(it has: {', '.join(floats) or 'none'})")
    for p in signature:
        if p.kind == "other":
            raise PolytileError(f"{path}: {fname}() takes {p.name}, whose type cannot be passed from Python "
                                f"(only integers, floating-point numbers and arrays)")
        if p.kind == "array" and len(p.dims) >= 2 and p.dims[0] is None and p.dims[1] is None:
            raise PolytileError(f"{path}: {fname}() takes {p.name} as a pointer to pointers; only contiguous "
                                f"arrays can be passed")
    values = {**file_macros, **sizes}
    macros = {m: sizes[m] for m in file_macros if m in sizes and sizes[m] != file_macros[m]}
    params = {n: values[n] for cs in regions for n in cs.params if n in values}
    params.update({n: sizes[n] for n in ints})
    concrete = extract(path, function=fn_arg, params=params, skip_nonaffine=True, assume_no_alias=assume_no_alias,
                       pure=pure, cpp_args=cpp_args)
    concrete = [cs for cs in concrete if cs.function == fname]
    accessed: Dict[str, Tuple[Tuple[int, ...], str]] = {}
    for cs in concrete:
        for a in (cs.scop.arrays if cs.scop is not None else ()):
            old = accessed.get(a.name)
            shape = tuple(a.shape) if old is None else tuple(max(x, y) for x, y in zip(old[0], a.shape))
            accessed[a.name] = (shape, a.dtype)

    def shape_of(p: CParam) -> Tuple[int, ...]:
        if p.name in shapes:
            return shapes[p.name]
        out = []
        for k, text in enumerate(p.dims):
            if text is not None:
                try:
                    out.append(eval_extent(text, values))
                    continue
                except KeyError as e:
                    raise PolytileError(f"{path}: extent {text!r} of {p.name} needs {e.args[0]}: pass "
                                        f"--dims {e.args[0]}=<int>") from None
                except ValueError:
                    pass
            got = accessed.get(p.name)
            if got is None or len(got[0]) != len(p.dims) or got[0][k] < 0:
                raise PolytileError(f"{path}: the extent of {p.name} (dimension {k + 1}) is not known: pass "
                                    f"--shape {p.name}={'x'.join(['<n>'] * len(p.dims))}")
            out.append(got[0][k])
        return tuple(max(1, x) for x in out)

    rng = np.random.default_rng(seed)
    inputs: Dict[str, np.ndarray] = {}
    global_names: List[str] = []
    reached: List[CParam] = [p for p in signature if p.kind == "array"]
    params_named = {p.name for p in signature}
    region_scalars = {s for cs in regions for s in cs.scalars}
    touched = [a for a in accessed if a not in params_named and a not in region_scalars]
    if touched:
        glob = {g.name: g for g in file_globals(path, cpp_args)}
        for name in touched:
            if name in glob:
                reached.append(glob[name])
                global_names.append(name)
            elif accessed[name][0]:
                # Its contents before the call are part of the input, and nothing outside the function sees
                # its results: a run could neither be set up nor checked.
                raise PolytileError(f"{path}: {fname}() uses the array {name}, which is neither a parameter nor "
                                    f"an exported file-scope array (a static or local array): it cannot be "
                                    f"set up or compared from outside")
    for p in reached:
        dtype = np.dtype(p.dtype or "float64")
        shape = shape_of(p) if p.kind == "array" else ()
        inputs[p.name] = random_array(shape, dtype, rng)
    return Call(path, fname, signature, {n: values[n] for n in ints + sorted(used_macros)},
                {n: scalars.get(n, DEFAULT_SCALAR) for n in floats}, inputs, tuple(global_names), macros,
                set_macros(path.read_bytes(), macros) if macros else path.read_bytes(), tuple(regions), pure,
                cpp_args)


def random_array(shape: Tuple[int, ...], dtype: np.dtype, rng) -> np.ndarray:
    """Inputs that keep kernels finite: integers in [1, 50); floats in [0.5, 1.5), and square matrices
    diagonally dominant (2n added on the diagonal) so that factorisations (lu, cholesky) stay finite.

    >>> bool(random_array((2, 2), np.dtype("float64"), np.random.default_rng(0)).diagonal().min() > 4)
    True
    """
    if dtype.kind in "iu":
        return rng.integers(1, 50, shape).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(dtype)
    a = rng.uniform(0.5, 1.5, shape)
    if len(shape) == 2 and shape[0] == shape[1]:
        a += 2 * shape[0] * np.eye(shape[0])
    return a.astype(dtype)


def bitwise_difference(name: str, got: np.ndarray, want: np.ndarray) -> Optional[str]:
    """None when ``got`` and ``want`` are identical byte for byte (NaNs included); else what differs.

    >>> bitwise_difference("C", np.zeros(3), np.array([0.0, 1e-16, 0.0]))
    'array C differs in 1 of 3 elements (max |difference| 1e-16)'
    """
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"array {name} is {got.dtype}{list(got.shape)}, the original's {want.dtype}{list(want.shape)}"
    a = np.ascontiguousarray(got).view(np.uint8).reshape(got.size, -1) if got.size else got
    b = np.ascontiguousarray(want).view(np.uint8).reshape(want.size, -1) if want.size else want
    if np.array_equal(a, b):
        return None
    differ = int((a != b).any(axis=1).sum())
    with np.errstate(all="ignore"):
        diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    return (f"array {name} differs in {differ} of {got.size} elements "
            f"(max |difference| {np.nanmax(diff) if np.isfinite(diff).any() else float('nan'):.3g})")


#: Tolerance of a reassociated build (``polytile opt --reassociate``): every element of a
#: floating-point array within REASSOCIATED_REL times the largest magnitude in the original's array.
#: A reordered sum of n terms moves by about n * eps of its largest partial sum (eps = 2.2e-16 for
#: double, 1.2e-7 for float), so this covers n up to ~1e6 doubles; a lost or doubled term does not pass.
REASSOCIATED_REL = {"float64": 1e-9, "float32": 1e-3}


def close_difference(name: str, got: np.ndarray, want: np.ndarray) -> Optional[str]:
    """None when ``got`` matches ``want`` within :data:`REASSOCIATED_REL` (integers: exactly); else what differs.

    >>> close_difference("C", np.array([1.0, 2.0]), np.array([1.0, 2.0 + 1e-15])) is None
    True
    """
    rel = REASSOCIATED_REL.get(str(want.dtype))
    if rel is None or got.shape != want.shape or got.dtype != want.dtype:
        return bitwise_difference(name, got, want)
    with np.errstate(all="ignore"):
        w = want.astype(np.float64)
        diff = np.abs(got.astype(np.float64) - w)
        scale = float(np.nanmax(np.abs(w))) if w.size and not np.isnan(w).all() else 0.0
    bound = rel * (scale or 1.0)
    bad = ~(diff <= bound) & ~(np.isnan(got) & np.isnan(want))
    if not bad.any():
        return None
    return (f"array {name} differs beyond {rel:g} x max|value| = {bound:.3g} in {int(bad.sum())} of {got.size} "
            f"elements (max |difference| {np.nanmax(diff):.3g})")


# ---------------------------------------------------------------------------
# optimised variants
# ---------------------------------------------------------------------------


def optimise(path, *, function: Optional[str] = None, **options) -> Tuple[bytes, List[c_optimiser.RegionResult]]:
    """:func:`polytile.c_optimiser.optimize_regions`, or with ``function`` that function's whole body as the region.

    ``options`` are ``optimize_regions``' keywords (tile, parallel, fusion, hardware, params, schedule,
    skip_nonaffine, assume_no_alias, reassociate, pure, cpp_args, cache).

    >>> # text, results = optimise("gemm.c", fusion="max")
    """
    return c_optimiser.optimize_regions(path, function=function, **options)


@dataclass(frozen=True)
class Variant:
    """A build to compare: ``options`` of :func:`optimise` (None: the original file as written)."""

    name: str
    options: Optional[Mapping[str, Any]] = None
    origin: str = ""

    @property
    def reassociated(self) -> bool:
        """Its reductions may be reordered, so it is checked within a tolerance, not bitwise."""
        return bool(self.options and self.options.get("reassociate"))


def variants(fusion: Sequence[str] = (), *, no_tile: bool = False, no_parallel: bool = False,
             schedules: Sequence[Any] = (), reassociate: bool = False) -> List[Variant]:
    """The original, ``polytile opt``'s default, then one variant per fusion choice, untiled, serial,
    reassociated, file.

    >>> [v.name for v in variants(["none", "smart"], no_tile=True)]
    ['original', 'opt', 'fusion-none', 'no-tile']
    """
    out = [Variant("original", None, "the file as written"),
           Variant("opt", {}, "polytile opt (isl's scheduler, smart fusion, tiled, parallel, simd)")]
    for choice in fusion:
        if choice != "smart":  # smart is the default: the "opt" row
            out.append(Variant(f"fusion-{choice}", {"fusion": choice}, f"polytile opt --fusion {choice}"))
    if no_tile:
        out.append(Variant("no-tile", {"tile": False}, "polytile opt --no-tile"))
    if no_parallel:
        out.append(Variant("no-parallel", {"parallel": False}, "polytile opt --no-parallel"))
    if reassociate:
        out.append(Variant("reassociate", {"reassociate": True}, "polytile opt --reassociate (checked within "
                           f"{REASSOCIATED_REL['float64']:g} x max|value| for doubles)"))
    for s in schedules:
        out.append(Variant(Path(str(s)).stem, {"schedule": s}, f"polytile opt --schedule {s}"))
    return out


#: A variant replaces the fastest so far only when its median is lower by more than this fraction: the
#: spread of timings on a shared machine, so a transformation not measurably a win is not applied.
TUNE_MARGIN = 0.03


def tuning_variants(base: Optional[Mapping[str, Any]] = None) -> List[Variant]:
    """What ``polytile opt --tune`` measures: the original, the default, isl's fusion none and max, untiled
    -- each with the user's other options (``base``: tile, parallel, reassociate, hardware, ...).

    >>> [v.name for v in tuning_variants()]
    ['original', 'opt', 'fusion-none', 'fusion-max', 'no-tile']
    """
    base = dict(base or {})
    return [v if v.options is None else Variant(v.name, {**base, **v.options}, v.origin)
            for v in variants(["none", "max"], no_tile=True)]


def tune_variants(call: Call, candidates: Optional[Sequence[Variant]] = None, *, repeat: int = 5, warmup: int = 1,
                  margin: float = TUNE_MARGIN, **options) -> Tuple[Variant, compare_mod.CompareResult]:
    """The fastest of ``candidates`` on ``call`` that computes what the first one (the original) computes,
    and the comparison (:func:`compare_c`'s rows; ``options`` are its keywords).

    Candidates are taken in order, and one replaces the fastest so far only when it is faster by more
    than ``margin``: the original stays unless a variant is measurably faster, and among variants
    within the margin of each other the earlier (simpler, more default) one wins.

    >>> # best, res = tune_variants(prepare("2mm.c", sizes={"NI": 400}), tuning_variants())
    """
    cands = list(candidates) if candidates is not None else tuning_variants()
    res = compare_c(call, cands, repeat=repeat, warmup=warmup, **options)
    best, best_t = 0, res.rows[0].median
    for k, row in enumerate(res.rows[1:], 1):
        if row.check == "ok" and row.median is not None and best_t is not None and row.median < best_t * (1 - margin):
            best, best_t = k, row.median
    return cands[best], res


def compare_c(call: Call, candidates: Sequence[Variant], *, repeat: int = 10, warmup: int = 2,
              flags: Sequence[str] = DEFAULT_FLAGS, hardware: Any = "host", assume_no_alias: bool = False,
              whole_function: bool = False, progress: Optional[Callable[[str], None]] = None,
              ) -> compare_mod.CompareResult:
    """Build, check and time each variant of ``call``'s file; rows like ``polytile compare``'s.

    The first candidate is the baseline (the original file): every other
    one must leave every array the function reaches bitwise identical to
    it (``check`` ok, else MISMATCH with what differs); speedups are its
    median time over theirs.  A schedule the dependences forbid is a row
    with ``legal`` no; a variant that fails to build is a row with
    ``check`` error.

    >>> # print(compare_c(prepare("gemm.c", sizes=...), variants(["max"])).table())
    """
    say = progress or (lambda text: None)
    rows: List[compare_mod.Row] = []
    want: Optional[Dict[str, np.ndarray]] = None
    base_median: Optional[float] = None
    include = call.path.resolve().parent
    for v in candidates:
        row = compare_mod.Row(v.name, v.origin)
        rows.append(row)
        try:
            if v.options is None:
                text, results = call.source, []
            else:
                say(f"{v.name}: polytile opt")
                opts = {"hardware": hardware, "assume_no_alias": assume_no_alias, "skip_nonaffine": True,
                        "pure": call.pure, "cpp_args": call.cpp_args, **v.options}
                text, results = optimise(call.path, function=call.function if whole_function else None, **opts)
                text = call.with_macros(text)
                row.steps = _steps_of(results)
                left = [f"lines {r.cscop.lines[0]}-{r.cscop.lines[1]} left as written ({_first(r.notes)})"
                        for r in results if r.text is None]
                row.reason = "; ".join(left)
                row.schedule = "\n".join(f"{r.cscop.lines[0]}-{r.cscop.lines[1]}: "
                                         + (" -> ".join(str(s) for s in r.schedule.steps) if r.schedule
                                            else "left as it is") for r in results)
            row.legal = True
            say(f"{v.name}: build")
            lib = build(text, name=f"{call.function}_{v.name}", flags=[*flags, *call.cpp_args], include_dir=include)
            say(f"{v.name}: run")
            got, times = call.run(lib, repeat=repeat, warmup=warmup)
        except IllegalSchedule as e:
            row.check, row.reason = "illegal", compare_mod._reason(e)
            continue
        except PolytileError as e:
            if want is None:
                # Without the baseline's arrays nothing else can be checked.
                raise PolytileError(f"{v.name} ({v.origin}) could not be built and run: {e}") from None
            row.check, row.reason = "error", compare_mod._reason(e)
            continue
        row.times = times
        if want is None:
            want = got
            row.check = "ok"
            base_median = row.median
        else:
            differ = close_difference if v.reassociated else bitwise_difference
            problems = [d for d in (differ(n, got[n], want[n]) for n in want) if d]
            row.check = "MISMATCH" if problems else "ok"
            row.reason = "; ".join(problems + ([row.reason] if row.reason else []))
            if problems:
                row.max_abs_err = _max_abs(got, want)
        if base_median and row.median:
            row.speedup = base_median / row.median
    prov = compare_mod.provenance(
        file=str(call.path), function=call.function, dims=dict(call.sizes), scalars=dict(call.scalars),
        shapes={k: list(a.shape) for k, a in call.inputs.items()}, globals=list(call.globals),
        macros_set=dict(call.macros), flags=list(flags) + list(call.cpp_args) + list(_SHARED),
        baseline=candidates[0].name,
        check="bitwise: every array the function reaches equals the baseline build's, byte for byte"
              + ("; reassociated variants: floats within " + ", ".join(f"{k} {v:g}" for k, v in REASSOCIATED_REL.items())
                 + " x the array's max |value|, integers exactly" if any(v.reassociated for v in candidates) else ""),
        inputs="floats uniform in [0.5, 1.5) (square matrices + 2n on the diagonal), integers in [1, 50)",
        repeat=repeat, warmup=warmup, hardware=str(hardware))
    return compare_mod.CompareResult(rows, prov)


#: Value of an integer parameter ``opt --verify`` is not told: past one 32-wide tile, so that full and
#: partial tiles both run, and small enough that O(n^3) kernels take milliseconds.
VERIFY_SIZE = 37


def verify(path, optimised: bytes, *, function: Optional[str] = None, whole_function: bool = False,
           sizes: Optional[Mapping[str, int]] = None, scalars: Optional[Mapping[str, float]] = None,
           assume_no_alias: bool = False, pure: Sequence[str] = (), cpp_args: Sequence[str] = (),
           reassociated: bool = False, flags: Sequence[str] = DEFAULT_FLAGS, seed: int = 0,
           default_size: int = VERIFY_SIZE) -> List[str]:
    """Build ``path`` as written and ``optimised`` (its ``polytile opt`` output) with the same flags, call each
    function holding a region on the same random inputs, and compare every array it reaches; what differs
    (empty: bitwise identical; ``reassociated``: within :data:`REASSOCIATED_REL`).  This is ``opt --verify``.

    Integer parameters not in ``sizes`` are ``default_size``; macros keep the file's values.

    >>> # verify("gemm.c", Path("gemm.opt.c").read_bytes()) -> []
    """
    names = [function] if whole_function and function else functions(
        path, function=function, assume_no_alias=assume_no_alias, pure=pure, cpp_args=cpp_args)
    problems: List[str] = []
    differ = close_difference if reassociated else bitwise_difference
    for fname in names:
        call = prepare(path, sizes=sizes, scalars=scalars, function=fname, whole_function=whole_function, seed=seed,
                       assume_no_alias=assume_no_alias, other_sizes=True, default_size=default_size, pure=pure,
                       cpp_args=cpp_args)
        include = call.path.resolve().parent
        opt = call.with_macros(optimised)
        # A region versioned on the thread team's pay (polytile.c_optimiser.team) has a parallel and a
        # serial copy; the sizes pick one at run time, so each is built alone and checked.
        want, _ = call.run(build(call.source, name=f"{fname}_original", flags=[*flags, *call.cpp_args],
                                 include_dir=include))
        for copy, force in team_copies(opt):
            got, _ = call.run(build(opt, name=f"{fname}_opt" + (f"-{copy}" if copy else ""),
                                    flags=[*flags, *call.cpp_args, *force], include_dir=include))
            where = f" ({copy} copy)" if copy else ""
            problems += [f"{fname}(){where}: {d}" for d in (differ(n, got[n], want[n]) for n in want) if d]
    return problems


def _steps_of(results: Sequence[c_optimiser.RegionResult]) -> List[Any]:
    """Each region's steps as JSON: the list itself for one region, a list per region for several."""
    per = [[s.to_json() for s in r.schedule.steps] if r.schedule else [] for r in results]
    return per[0] if len(per) == 1 else per


def _max_abs(got: Mapping[str, np.ndarray], want: Mapping[str, np.ndarray]) -> float:
    worst = 0.0
    with np.errstate(all="ignore"):
        for n, w in want.items():
            g = got[n]
            if g.shape != w.shape or not g.size:
                return float("inf")
            d = np.abs(g.astype(np.float64) - w.astype(np.float64))
            worst = max(worst, float(np.nanmax(d)) if not np.isnan(d).all() else float("inf"))
    return worst


def _first(notes: Sequence[str]) -> str:
    return notes[0].splitlines()[0][:160] if notes else "not modelled"
