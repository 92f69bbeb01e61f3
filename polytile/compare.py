"""Compare schedules of one program: legality, correctness and speed, with provenance.

    >>> from polytile.compare import compare, default, fusion, tiled
    >>> r = compare("examples/matmul.tile", {"M": 256, "N": 256, "K": 256}, "float32",
    ...             [default(), fusion("smart"), tiled(32)], repeat=5)        # doctest: +SKIP
    >>> print(r.table())                                                       # doctest: +SKIP
    >>> open("mm.csv", "w").write(r.to_csv())                                  # doctest: +SKIP

Every candidate is a *recipe*: the steps that build its schedule from a base
(program order or isl's scheduler).  For the given sizes each one is
replayed -- every step is legality-checked against the dependences, so an
illegal candidate becomes a row saying why instead of a kernel -- then
compiled, run on the same random inputs, checked once against the reference
interpreter, and timed (median/min/max over ``repeat`` calls after
``warmup``).  Speedups are relative to the first candidate that ran, so the
baseline is always measured in the same process, on the same inputs, just
before the others.

The module also holds the pieces ``polytile run``, ``tune`` and the benchmark
scripts share (random inputs, output checks with stated tolerances, flop
counts, the timing loop and its median/min/max, text tables) so the command
line and the API judge and report kernels the same way.  The pipeline is
imported on first use: ``polytile --help`` must not pay for islpy.
"""
from __future__ import annotations

import csv
import datetime
import io
import json
import math
import os
import platform
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from .version import __version__
from .errors import IllegalSchedule, PolytileError, ShapeError
# Checking and timing live in .measure (the compare task on an executor's worker uses them too);
# they stay importable from here, as callers have always imported them.
from .measure import RTOL, Check, Spread, _first_line, _reason, capped_calls, check_output, spread, time_calls  # noqa: F401

#: Counting a non-box domain with isl scans every point of all but its last
#: dimension (about 1-2 us each); above this many the flop count is skipped
#: rather than making a run wait seconds for a number it only decorates.
COUNT_SCAN_LIMIT = 200_000


# ---------------------------------------------------------------------------
# Inputs, checks, flop counts, timing (shared with `polytile run`, tune and the benchmarks)
# ---------------------------------------------------------------------------


def random_inputs(shapes: Sequence[Sequence[int]], dtypes: Sequence[str], kind: str = "int", seed: int = 0,
                  positive: bool = False) -> List[np.ndarray]:
    """Seeded random inputs, one per shape and dtype: small integers (exact in every dtype, so checks can be
    exact) or normals -- the one generator of ``compare``, ``run``, ``tune`` and the benchmarks.

    ``kind="int"``: integers in [-4, 4] ([0, 4] unsigned, {False, True} bool); ``"normal"``: standard normals,
    rounded to integers for integer dtypes (a cast would truncate most of them to 0; their absolute values
    unsigned), ``x > 0`` bool.  ``positive`` (a file's ``// inputs: positive``)
    draws from [1, 4] instead (integers, or uniform reals), for programs taking logs or square roots.
    Each array is drawn directly in its dtype (integers as int8, reals in float32 unless the input is
    float64), so the peak memory is the inputs themselves plus a byte per element, never an
    int64/float64 copy of each.
    """
    if kind not in ("int", "normal"):
        raise PolytileError(f"unknown input kind {kind!r}; use 'int' or 'normal'")
    rng = np.random.default_rng(seed)
    arrays = []
    for shape, dtype in zip(shapes, dtypes):
        dt = np.dtype(dtype)
        shape = tuple(shape)
        if kind == "int":
            lo, hi = (1, 4) if positive else (-4, 4)
            if dt.kind == "u":
                lo = max(lo, 0)  # unsigned: [0, 4] (a negative draw would wrap to 252 in uint8)
            elif dt.kind == "b":
                lo, hi = 0, 1
            a = rng.integers(lo, hi + 1, size=shape, dtype=np.int8).astype(dt, copy=False)
        else:
            fdt = dt if dt in (np.float32, np.float64) else np.dtype(np.float32)
            if positive:
                a = rng.random(size=shape, dtype=fdt)
                a *= 3
                a += 1
            else:
                a = rng.standard_normal(size=shape, dtype=fdt)
            if dt.kind in "iu":
                a = np.rint(a, out=a)
                if dt.kind == "u":
                    a = np.abs(a, out=a)
            elif dt.kind == "b":
                a = a > 0
            a = a.astype(dt, copy=False)
        # np.array, not np.ascontiguousarray: the latter turns a 0-d (scalar input) array into shape (1,).
        arrays.append(np.array(a, dtype=dt, order="C", copy=False) if a.ndim else np.array(a, dtype=dt))
    return arrays


def _box_count(dom) -> Optional[int]:
    """Points of ``dom`` if it is exactly its bounding box (a product of ranges), else None."""
    import islpy as isl

    n = dom.dim(isl.dim_type.set)
    lows, highs = [], []
    for d in range(n):
        lo, hi = dom.dim_min_val(d), dom.dim_max_val(d)
        if not (lo.is_int() and hi.is_int()):
            return None  # unbounded (cannot happen for a Tile domain) or infinite
        lows.append(lo.to_python())
        highs.append(hi.to_python())
    box = isl.Set.universe(dom.get_space())
    for d in range(n):
        box = box.lower_bound_val(isl.dim_type.set, d, isl.Val.int_from_si(dom.get_ctx(), lows[d]))
        box = box.upper_bound_val(isl.dim_type.set, d, isl.Val.int_from_si(dom.get_ctx(), highs[d]))
    if not box.is_equal(dom):
        return None
    return math.prod(h - lo + 1 for lo, h in zip(lows, highs))


def count_points(dom, scan_limit: Optional[int] = None) -> Optional[int]:
    """The number of integer points of an isl Set, or None when counting would be slow.

    A box (matmul, valid convolutions) is counted from its bounds in no time.
    Otherwise isl's ``count_val`` scans the points of all but the last
    dimension, so it only runs when that bounding box has at most
    ``scan_limit`` (default :data:`COUNT_SCAN_LIMIT`) points.
    """
    import islpy as isl

    limit = COUNT_SCAN_LIMIT if scan_limit is None else scan_limit
    if dom.is_empty():
        return 0
    box = _box_count(dom)
    if box is not None:
        return box
    n = dom.dim(isl.dim_type.set)
    scan = 1
    for d in range(n - 1):
        lo, hi = dom.dim_min_val(d), dom.dim_max_val(d)
        if not (lo.is_int() and hi.is_int()):
            return None
        scan *= hi.to_python() - lo.to_python() + 1
    if scan > limit:
        return None
    return dom.count_val().to_python()


def count_flops(spec, scan_limit: Optional[int] = None) -> Optional[int]:
    """2 x the iteration points of every contraction update (a combine and a fold each)."""
    total = 0
    for s in spec.scop.statements:
        if s.kind != "contract":
            continue
        n = count_points(s.domain, scan_limit)
        if n is None:
            return None
        total += 2 * n
    return total


def cpu_model() -> str:
    """The CPU's marketing name: ``/proc/cpuinfo``'s model name where there is one (Linux).

    Read with the hardware detector's parser, so the descriptor and the provenance agree.
    """
    from .hardware import parse_cpuinfo

    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            info, _ = parse_cpuinfo(f.read())
    except OSError:
        info = {}
    for key in ("model name", "model", "cpu model"):
        if info.get(key):
            return info[key]
    return platform.processor() or platform.machine() or "unknown"


def provenance(**extra) -> Dict[str, Any]:
    """Where and how a measurement was made, so a number can be reproduced or discounted later.

    Machine (host name, CPU model, logical CPUs, OS, ``OMP_NUM_THREADS``),
    the C compiler (path and first line of ``--version``) and flags as the
    runtime uses them, the numpy/islpy/polytile/Python versions and the UTC
    date; ``extra`` items are added as given.
    """
    from .config import get_config

    cfg = get_config()
    compiler: Dict[str, Any] = {"name": cfg.cc}
    try:
        from .runtime import compiler_version, resolve_compiler

        compiler["path"] = resolve_compiler(cfg.cc)
        compiler["version"] = compiler_version(cfg.cc)
    except PolytileError as exc:  # record why rather than lose a finished measurement
        compiler["error"] = str(exc)
    try:
        import islpy

        isl_version = getattr(islpy, "__version__", None) or getattr(islpy, "VERSION_TEXT", "unknown")
    except ImportError:  # pragma: no cover - islpy is a dependency
        isl_version = "not installed"
    out: Dict[str, Any] = {
        "machine": {
            "node": platform.node(),
            "processor": cpu_model(),
            "cpu_count": os.cpu_count(),
            "platform": platform.platform(),
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        },
        "compiler": compiler,
        "flags": list(cfg.cflags),
        "numpy": np.__version__,
        "islpy": str(isl_version),
        "polytile": __version__,
        "python": sys.version.split()[0],
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    out.update(extra)
    return out


# ---------------------------------------------------------------------------
# Candidates
# ---------------------------------------------------------------------------

#: What a candidate's schedule can be given as: None (what compile does by
#: default), a Schedule, a list of steps (Step objects or their JSON dicts), a
#: schedule document (dict with "steps"), a path to a JSON file or JSON text,
#: or a function from the plain schedule (program order + auto_parallel, for
#: the compared sizes) to a Schedule.
ScheduleSpec = Any


@dataclass(frozen=True)
class Candidate:
    """A named schedule to compare; ``origin`` says in words where it comes from."""

    name: str
    spec: ScheduleSpec = None
    origin: str = ""


def base_steps(fusion: Optional[str] = None, parallel: bool = True):
    """Program order (or isl's schedule with ``fusion``), with auto_parallel unless ``parallel`` is false.

    This is the plain schedule ``polytile.schedule(...)`` returns: the base
    that step lists are applied to.  (``polytile.compile``'s own default may
    add more, e.g. autotiling; the :func:`default` candidate is that.)
    """
    from .scheduling import Step

    base = Step.make("base", kind="isl", fusion=fusion) if fusion else Step.make("base", kind="original")
    return (base, Step.make("auto_parallel")) if parallel else (base,)


def recipe(steps, fusion: Optional[str] = None, parallel: bool = True):
    """The complete steps of a schedule given as steps, a document, a file or JSON text.

    Steps that start with a ``base`` step (what ``Schedule.save`` writes)
    are complete and returned as they are; any other list is applied *on
    top of* :func:`base_steps` -- program order, or isl's with ``fusion``,
    with ``auto_parallel`` unless ``parallel`` is false.
    """
    from .pipeline import schedule_steps

    got = schedule_steps(steps)
    if got and got[0].op == "base":
        return tuple(got)
    return base_steps(fusion, parallel) + tuple(got)


def default() -> Candidate:
    """Whatever ``polytile.compile`` does without a schedule, for the compared sizes."""
    return Candidate("default", None, "the schedule polytile.compile uses by default")


def plain(parallel: bool = True) -> Candidate:
    """Program order (the loops as written), with auto_parallel unless ``parallel`` is false."""
    return Candidate("ijk" if not parallel else "program-order", base_steps(None, parallel),
                     "program order" + (" + auto_parallel" if parallel else ", no parallel loops"))


def fusion(choice: str, parallel: bool = True) -> Candidate:
    """isl's scheduler with a fusion choice (``none``, ``smart``, ``max``), then auto_parallel."""
    return Candidate(f"isl-{choice}", base_steps(choice, parallel),
                     f"isl scheduler, fusion={choice}" + (" + auto_parallel" if parallel else ""))


def tile_contractions(schedule, size: int, *, parallel: bool = True):
    """Tile the first two loops of every contraction's main statement by ``size``.

    With ``parallel``, the outermost new tile loop of each is then marked
    parallel (explicitly, so the step list says so even when auto_parallel
    had already put the mark there); if that loop carries a dependence the
    step raises :class:`~polytile.errors.IllegalSchedule` like any other.
    """
    s = schedule
    for st in s.scop.statements:
        if st.kind != "contract":
            continue
        # Address it by tensor name when that picks this statement: readable, and stable across shapes.
        ref = st.origin if st.origin and s.resolve(st.origin) == st.name else st.name
        before = s.loop_names(st.name)
        loops = before[:2]
        if not loops:
            continue  # a scalar contraction of a scalar: nothing to tile
        s = s.tile(ref, {loop: size for loop in loops})
        if parallel:
            new = [loop for loop in s.loop_names(st.name) if loop not in before]
            s = s.parallel(ref, new[0])
    return s


def tiled(size: int, parallel: bool = True) -> Candidate:
    """Program order + auto_parallel with :func:`tile_contractions` applied (named ``tile<size>``)."""
    if not isinstance(size, int) or isinstance(size, bool) or size < 1:
        raise PolytileError(f"tile size must be a positive integer, got {size!r}")
    return Candidate(f"tile{size}", lambda s: tile_contractions(s, size, parallel=parallel),
                     f"program order + auto_parallel, first two loops of each contraction tiled by {size}"
                     + (" + parallel outermost tile loop" if parallel else ""))


def from_file(path, name: Optional[str] = None) -> Candidate:
    """A saved schedule (``polytile schedule -o``) or a JSON list of steps, named after the file."""
    p = Path(path)
    return Candidate(name or p.stem, p, f"file {p}")


def _as_candidates(candidates) -> List[Candidate]:
    if candidates is None:
        return [default()]
    if isinstance(candidates, Mapping):
        candidates = list(candidates.items())
    out: List[Candidate] = []
    for c in candidates:
        if isinstance(c, Candidate):
            out.append(c)
        elif isinstance(c, tuple) and len(c) == 2 and isinstance(c[0], str):
            out.append(Candidate(c[0], c[1], ""))
        else:
            raise PolytileError(f"a candidate is a Candidate or a (name, schedule) pair, got {c!r}")
    # Names key the rows and the output files; make repeats distinct rather than ambiguous.
    seen: Dict[str, int] = {}
    unique = []
    for c in out:
        n = seen.get(c.name, 0)
        seen[c.name] = n + 1
        unique.append(c if n == 0 else Candidate(f"{c.name}#{n + 1}", c.spec, c.origin))
    return unique


# ---------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------


@dataclass
class Row:
    """One candidate's outcome.  Times are seconds per call; ``check`` is ok / MISMATCH / illegal / error."""

    name: str
    origin: str = ""
    legal: bool = False
    check: str = "-"
    reason: str = ""
    max_abs_err: Optional[float] = None
    times: List[float] = field(default_factory=list)
    flops: Optional[int] = None
    speedup: Optional[float] = None
    steps: List[Dict[str, Any]] = field(default_factory=list)
    schedule: str = ""
    contracted_bytes: Dict[str, int] = field(default_factory=dict)
    traffic_saved: int = 0

    @property
    def median(self) -> Optional[float]:
        return spread(self.times).median

    @property
    def min(self) -> Optional[float]:
        return spread(self.times).min

    @property
    def max(self) -> Optional[float]:
        return spread(self.times).max

    @property
    def gflops(self) -> Optional[float]:
        if not self.times or not self.flops or not self.median:
            return None
        return self.flops / self.median / 1e9

    def to_json(self) -> Dict[str, Any]:
        return {
            "name": self.name, "origin": self.origin, "legal": self.legal, "check": self.check,
            "reason": self.reason, "max_abs_err": _finite(self.max_abs_err),
            "median_s": self.median, "min_s": self.min, "max_s": self.max, "times_s": list(self.times),
            "flops": self.flops, "gflops": self.gflops, "speedup": self.speedup,
            "contracted_bytes": dict(self.contracted_bytes), "traffic_saved_bytes": self.traffic_saved,
            "steps": list(self.steps), "schedule": self.schedule,
        }


def _finite(x: Optional[float]):
    # JSON has no inf/nan; an infinite error (shape mismatch, NaN) is written as a string.
    if x is None or math.isfinite(x):
        return x
    return str(x)


def _ms(x: Optional[float]) -> str:
    return "-" if x is None else f"{x * 1e3:.3f}"


def format_table(rows: Sequence[Sequence[Any]], headers: Optional[Sequence[Any]] = None) -> str:
    """``rows`` (after ``headers``, when given) as left-aligned columns separated by two spaces, without
    trailing blanks: the one text-table layout of ``polytile run``, ``compare``, ``tune`` and the
    benchmarks.  Cells are written with ``str``.

        >>> print(format_table([["matmul", 1.5], ["conv", 10]], ["kernel", "ms"]))
        kernel  ms
        matmul  1.5
        conv    10
    """
    table = [[str(cell) for cell in r] for r in ([headers] if headers is not None else []) + list(rows)]
    if not table:
        return ""
    widths = [max(len(r[c]) for r in table) for c in range(len(table[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in table)


CSV_FIELDS = ("name", "origin", "legal", "check", "reason", "max_abs_err", "median_ms", "min_ms", "max_ms",
              "gflops", "speedup", "traffic_saved_bytes", "steps", "schedule")


@dataclass
class CompareResult:
    """Rows (one per candidate, in the order given) and the provenance of the whole measurement."""

    rows: List[Row]
    provenance: Dict[str, Any]

    def row(self, name: str) -> Row:
        for r in self.rows:
            if r.name == name:
                return r
        raise KeyError(name)

    @property
    def ok(self) -> bool:
        """Every legal candidate ran and matched the reference (illegal ones are findings, not failures)."""
        return all(r.check in ("ok", "illegal") for r in self.rows)

    def table(self) -> str:
        head = ["candidate", "legal", "check", "median ms", "min ms", "max ms", "GFLOP/s", "speedup"]
        rows = []
        for r in self.rows:
            rows.append([r.name, "yes" if r.legal else "no", r.check, _ms(r.median), _ms(r.min), _ms(r.max),
                         "-" if r.gflops is None else f"{r.gflops:.2f}",
                         "-" if r.speedup is None else f"{r.speedup:.2f}x"])
        text = format_table(rows, head)
        notes = []
        for r in self.rows:
            if r.reason:
                # The first line says what is wrong; the rest (dependence, example pair) is in the files.
                notes.append(f"  {r.name}: {r.reason}")
        base = self.provenance.get("baseline")
        if base:
            notes.append(f"speedup: median time of {base} / median time of the candidate")
        return text + ("\n" + "\n".join(notes) if notes else "")

    def to_json(self) -> Dict[str, Any]:
        return {"provenance": self.provenance, "rows": [r.to_json() for r in self.rows]}

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2)

    def to_csv(self) -> str:
        """One row per candidate; provenance first as ``# key: <JSON>`` comment lines.

        (``pandas.read_csv(path, comment="#")`` reads the table; the
        ``steps`` column holds JSON and ``schedule`` the multi-line loop tree.)
        """
        buf = io.StringIO()
        for key, value in self.provenance.items():
            buf.write(f"# {key}: {json.dumps(value)}\n")
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(CSV_FIELDS)
        for r in self.rows:
            err = r.max_abs_err
            w.writerow([r.name, r.origin, "yes" if r.legal else "no", r.check, r.reason,
                        "" if err is None else f"{err:.6g}",
                        "" if r.median is None else f"{r.median * 1e3:.6f}",
                        "" if r.min is None else f"{r.min * 1e3:.6f}",
                        "" if r.max is None else f"{r.max * 1e3:.6f}",
                        "" if r.gflops is None else f"{r.gflops:.4f}",
                        "" if r.speedup is None else f"{r.speedup:.4f}",
                        r.traffic_saved, json.dumps(r.steps), r.schedule])
        return buf.getvalue()

    def save(self, path) -> Path:
        """Write CSV (``.csv``) or JSON (``.json``), chosen by the suffix."""
        p = Path(path)
        suffix = p.suffix.lower()
        if suffix == ".csv":
            text = self.to_csv()
        elif suffix == ".json":
            text = self.dumps() + "\n"
        else:
            raise PolytileError(f"cannot tell the format of {p}: name it .csv or .json")
        try:
            p.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise PolytileError(f"cannot write {p}: {exc.strerror or exc}") from None
        return p


# ---------------------------------------------------------------------------
# compare()
# ---------------------------------------------------------------------------


def _shapes_and_dtypes(program, shapes, dtypes) -> Tuple[Tuple[Tuple[int, ...], ...], Tuple[str, ...], Dict[str, int]]:
    """Input shapes and dtypes, and the values of size inputs given with the dimension sizes (``D=3``)."""
    from . import pipeline

    sizes: Dict[str, int] = {}
    if isinstance(shapes, str) or (isinstance(shapes, Mapping) and all(
            isinstance(v, (int, np.integer)) for v in shapes.values())):
        dims = pipeline.parse_dims(shapes)
        in_shapes = pipeline.shapes_from_dims(program, dims)
        sizes = pipeline.size_values(program, dims)
    elif isinstance(shapes, Mapping):  # per-input shapes by name
        in_shapes = pipeline.shapes_from_dims(program, {}, shapes)
    else:
        in_shapes = tuple(tuple(int(x) for x in s) for s in shapes)
    n = len(program.inputs)
    if len(in_shapes) != n:
        raise PolytileError(f"{len(in_shapes)} shape(s) for {n} input(s) ({', '.join(program.input_names)})")
    if dtypes is None or isinstance(dtypes, (str, np.dtype, type)):
        one = np.dtype(dtypes or "float32").name
        # A size input is an integer (int32, as PlaidML types an Integer) whatever the arrays' one dtype.
        sized = set(pipeline.size_inputs(program))
        dts = tuple("int32" if name in sized else one for name in program.input_names)
    else:
        dts = tuple(np.dtype(d).name for d in dtypes)
    if len(dts) != n:
        raise PolytileError(f"{len(dts)} dtype(s) for {n} input(s) ({', '.join(program.input_names)})")
    return in_shapes, dts, sizes


def with_size_values(program, arrays: Sequence[np.ndarray], sizes: Mapping[str, int]) -> List[np.ndarray]:
    """``arrays`` (one per input of ``program``) with each size input named in ``sizes`` holding its value (a
    0-d array of its dtype) instead of a random number.

    >>> from polytile.pipeline import load_program
    >>> p = load_program("function (A[N], D) -> (B) { B[i : D] = +(A[i]); }")
    >>> with_size_values(p, [np.zeros(4), np.array(7, np.int32)], {"D": 3})[1]
    array(3, dtype=int32)
    """
    out = []
    for n, a in zip(program.input_names, arrays):
        if n in sizes:
            if a.dtype.kind not in "iu" or not np.iinfo(a.dtype).min <= sizes[n] <= np.iinfo(a.dtype).max:
                raise ShapeError(f"size input {n}={sizes[n]} does not fit its type {a.dtype}: give it an integer "
                                 f"type that holds it (int32 by default)")
            a = np.array(sizes[n], dtype=a.dtype)
        out.append(a)
    return out


def compare(program, shapes, dtypes=None, candidates=None, *, repeat: int = 10, warmup: int = 2,
            inputs: str = "int", seed: int = 0, positive: bool = False, arrays: Optional[Sequence] = None,
            check: bool = True, progress: Optional[Callable[[str], None]] = None,
            extra_provenance: Optional[Mapping[str, Any]] = None, executor=None,
            sizes: Optional[Mapping[str, int]] = None) -> CompareResult:
    """Check, run and time each candidate schedule of ``program`` for one input signature.

    ``program`` is Tile text, a path or a Program; ``shapes`` the input
    shapes in header order (or dimension sizes: ``{"M": 64, ...}`` or
    ``"M=64,..."``); ``dtypes`` one dtype for every input or one per input
    (default float32).  ``candidates`` are :class:`Candidate` objects (see
    :func:`default`, :func:`fusion`, :func:`tiled`, :func:`from_file`) or
    ``(name, schedule)`` pairs, in the order to report them; default: the
    default schedule alone.  Inputs are random (``inputs="int"``: integers in
    [-4, 4], exact in every dtype; ``"normal"``) unless ``arrays`` gives them.
    A size input (``function (A[N], D) -> ...`` with ``D`` used as a size)
    takes its value from the dimension sizes (``"N=64,D=3"``), from
    ``sizes`` or from ``arrays``.
    ``progress`` receives a line before each candidate's slow parts.
    ``executor`` (:mod:`polytile.executor`: None for this process,
    ``"local:N"``, a scheduler address or an Executor) builds, checks and times
    the legal candidates, several at once on several workers; a candidate
    timed on another kind of machine than the baseline gets no speedup.
    """
    from . import kernel as kernel_mod
    from . import pipeline
    from . import interpreter as reference_mod
    from .compare_task import measure_shared
    from .executor import as_executor
    from .scheduling import contracted_bytes, traffic_saved

    if repeat < 1 or warmup < 0:
        raise PolytileError(f"repeat must be >= 1 and warmup >= 0 (got repeat={repeat}, warmup={warmup})")
    say = progress or (lambda _text: None)
    prog = pipeline.load_program(program)
    in_shapes, dts, given_sizes = _shapes_and_dtypes(prog, shapes, dtypes)
    cands = _as_candidates(candidates)
    if arrays is None:
        arrays = with_size_values(prog, random_inputs(in_shapes, dts, inputs, seed, positive),
                                  {**given_sizes, **(sizes or {})})
        input_text = f"{inputs} (seed {seed}{', positive' if positive else ''})"
    else:
        arrays = [np.asarray(a) for a in arrays]
        input_text = "given by the caller"
    sizes = reference_mod.constants(prog, arrays)  # the size inputs' values: every kernel is specialised on them

    # What compile does by default for these sizes: the "default" candidate, and the
    # source of the dims and flop count (the same for every schedule).
    base_spec = pipeline.specialize(prog, in_shapes, dts, pipeline.Options.make("openmp"), build=False, sizes=sizes)
    flops = count_flops(base_spec)
    plain_schedule = None  # program order + auto_parallel: what callable candidates transform (built once)

    refs: Optional[Tuple[np.ndarray, ...]] = None
    if check:
        say("running the reference interpreter")
        ref = reference_mod.run(prog, *arrays)
        refs = ref if isinstance(ref, tuple) else (ref,)

    # 1. Here: each candidate's steps, replayed and checked for legality (an illegal one is a row, not a kernel).
    rows: List[Row] = []
    legal: List[Row] = []
    for cand in cands:
        row = Row(cand.name, cand.origin, flops=flops)
        rows.append(row)
        say(f"{cand.name}: scheduling")
        try:
            if cand.spec is None:
                steps = base_spec.schedule.steps
            elif callable(cand.spec):
                if plain_schedule is None:
                    plain_schedule = pipeline.replay(base_spec.scop, base_spec.deps, base_steps())
                steps = cand.spec(plain_schedule).steps
            elif hasattr(cand.spec, "steps") and hasattr(cand.spec, "tree"):  # a Schedule
                steps = cand.spec.steps
            else:
                steps = recipe(cand.spec)
            row.steps = [s.to_json() for s in steps]
            kernel = kernel_mod.compile(prog, schedule=steps)
            spec = kernel.specialize_shapes(in_shapes, dts, build=False, sizes=sizes)
            spec.schedule.check(f"schedule {cand.name!r}")  # the marks too, whatever made them
            row.legal = True
            row.schedule = spec.schedule.describe()
            row.contracted_bytes = dict(contracted_bytes(spec.schedule))
            row.traffic_saved = int(traffic_saved(spec.schedule))
        except IllegalSchedule as exc:
            row.check, row.reason = "illegal", _reason(exc)
            continue
        except PolytileError as exc:
            # A step that does not apply (unknown loop, bad size): reported in its row.
            row.check, row.reason = "error", _reason(exc)
            continue
        legal.append(row)

    # 2. On the executor: build, check against the oracle and time each legal candidate.
    ex, owned = as_executor(executor)
    where: Dict[str, Dict[str, Any]] = {}
    try:
        shared = ex.share((list(arrays), refs))
        futures: Dict[Any, Row] = {}

        def fill(fut, row: Row) -> None:
            got = fut.result()
            row.check, row.reason, row.max_abs_err, row.times = got["check"], got["reason"], got["max_abs_err"], \
                list(got["times"])
            where[row.name] = {"worker": got["worker"], "kind": got["kind"]}

        for row in legal:
            say(f"{row.name}: compiling, checking and timing ({warmup} warm-up, {repeat} timed)")
            fut = ex.submit(measure_shared, prog, in_shapes, dts, row.steps, shared, repeat, warmup)
            if ex.workers == 1:
                fill(fut, row)  # one at a time, as the lines above say
            else:
                futures[fut] = row
        for fut in ex.as_completed(list(futures)):
            fill(fut, futures[fut])
        described = ex.describe()
    finally:
        if owned:
            ex.close()

    baseline = next((r for r in rows if r.times), None)
    kind = where[baseline.name]["kind"] if baseline is not None else None
    if baseline is not None:
        for r in rows:
            if r.times and where[r.name]["kind"] == kind:
                r.speedup = baseline.median / r.median
            elif r.times:  # never ranked against a baseline timed on another kind of machine
                r.reason = (r.reason + "; " if r.reason else "") + \
                    f"timed on another kind of machine ({where[r.name]['kind']}) than {baseline.name} ({kind})"
    extra = {} if described["executor"] == "in-process" else {"executor": described, "measured_on": where}
    prov = provenance(
        program=str(prog),
        dims=dict(base_spec.bound.dims),
        shapes=[list(s) for s in in_shapes],
        dtypes=list(dts),
        inputs=input_text,
        repeat=repeat,
        warmup=warmup,
        timing="seconds per kernel call including output allocation; median/min/max over the timed calls",
        flops=flops,
        flops_rule="2 x iteration points of every contraction",
        baseline=baseline.name if baseline is not None else None,
        **extra,
        **dict(extra_provenance or {}),
    )
    return CompareResult(rows, prov)

