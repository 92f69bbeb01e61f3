"""The ``polytile`` command line: compile, run (and check) and inspect Tile programs.

    polytile compile examples/matmul.tile --dims M=64,N=48,K=32        # generated OpenMP C
    polytile run examples/conv2d.tile --check                         # sizes from the file's `// dims:` line
    polytile show examples/softmax.tile --dims M=4,N=5                 # IR, Scop, dependences, schedule tree

Every subcommand goes through :mod:`polytile.pipeline` (``load_program``,
``shapes_from_dims``, ``compile`` -> ``Kernel.specialize_shapes``,
``run_specialization``); this module only turns command-line text into those
calls and their results into text.  The pipeline is imported lazily so that
``polytile --help`` does not pay for islpy.

Exit codes: 0 success, 1 a user error (any :class:`~polytile.errors.PolytileError`,
a failed ``--check``), 2 bad command-line arguments.  Anything else is a bug
in polytile and keeps its traceback.
"""
from __future__ import annotations

import argparse
import math
import os
import re
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import __version__
from .config import get_config, override
from .errors import PolytileError, SourceLocation

PROG = "polytile"
DTYPES = ("float32", "float64", "int32", "int64")
#: Relative tolerances of ``run --check`` for float outputs (integer outputs must match exactly).
RTOL = {"float32": 1e-4, "float64": 1e-5}
#: Counting a non-box domain with isl scans every point of all but its last
#: dimension (about 1-2 us each); above this many the flop count is skipped
#: rather than making ``run`` wait seconds for a number it only decorates.
COUNT_SCAN_LIMIT = 200_000

# A dimension or input name as the user may type it: the ``#`` sigil (which
# forces the uppercase class in Tile text) is accepted and dropped, since the
# IR stores names without it.
_NAME = r"#?[A-Za-z_][A-Za-z0-9_]*"
_DIM_ITEM = re.compile(rf"^({_NAME})=([0-9]+)$")
_SHAPE_ITEM = re.compile(rf"^({_NAME})=(scalar|[0-9]+(?:x[0-9]+)*)$")
_DTYPE_ITEM = re.compile(rf"^({_NAME})=([A-Za-z0-9_]+)$")
# Header comments of the example files (see examples/README.md).
_HEADER = re.compile(r"^\s*//\s*(dims|shape|inputs)\s*:(.*)$")


class UsageError(Exception):
    """A command-line mistake found after argparse (reported like argparse does, exit 2)."""


# ---------------------------------------------------------------------------
# Option values
# ---------------------------------------------------------------------------


def _items(text: str) -> List[str]:
    """``"M=64, N=48"`` or ``"M=64 N=48"`` -> ``["M=64", "N=48"]``: commas and/or spaces separate."""
    return [t for t in re.split(r"[,\s]+", text.strip()) if t]


def _strip_sigil(name: str) -> str:
    return name[1:] if name.startswith("#") else name


def parse_dims(text: str) -> Dict[str, int]:
    """``"M=64,N=64"`` -> ``{"M": 64, "N": 64}``; raises ValueError with the offending item."""
    out: Dict[str, int] = {}
    items = _items(text)
    if not items:
        raise ValueError("expected NAME=SIZE[,NAME=SIZE...], e.g. M=64,N=48")
    for item in items:
        m = _DIM_ITEM.match(item)
        if not m:
            raise ValueError(f"bad item {item!r}: expected NAME=SIZE with a non-negative integer SIZE, e.g. M=64")
        out[_strip_sigil(m.group(1))] = int(m.group(2))
    return out


def parse_shapes(text: str) -> Dict[str, Tuple[int, ...]]:
    """``"X=6x1"`` -> ``{"X": (6, 1)}``; ``X=scalar`` is a rank-0 input."""
    out: Dict[str, Tuple[int, ...]] = {}
    items = _items(text)
    if not items:
        raise ValueError("expected NAME=AxBx..., e.g. X=3x4")
    for item in items:
        m = _SHAPE_ITEM.match(item)
        if not m:
            raise ValueError(f"bad item {item!r}: expected NAME=AxBx... (sizes are non-negative integers), "
                             f"e.g. X=3x4, or NAME=scalar")
        value = m.group(2)
        out[_strip_sigil(m.group(1))] = () if value == "scalar" else tuple(int(s) for s in value.split("x"))
    return out


def parse_dtypes(text: str) -> Dict[str, str]:
    """``"A=float64,B=int32"`` -> ``{"A": "float64", "B": "int32"}``."""
    out: Dict[str, str] = {}
    items = _items(text)
    if not items:
        raise ValueError("expected NAME=DTYPE, e.g. A=float64")
    for item in items:
        m = _DTYPE_ITEM.match(item)
        if not m:
            raise ValueError(f"bad item {item!r}: expected NAME=DTYPE, e.g. A=float64")
        if m.group(2) not in DTYPES:
            raise ValueError(f"unknown dtype {m.group(2)!r} for {m.group(1)}; choose from {', '.join(DTYPES)}")
        out[_strip_sigil(m.group(1))] = m.group(2)
    return out


def _arg_type(parse, what: str):
    """Wrap a parser so argparse reports its ValueError as ``argument --x: ...`` (exit 2)."""

    def convert(text: str):
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = what  # argparse names the type in some messages
    return convert


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return value


# ---------------------------------------------------------------------------
# The `// dims:` / `// shape:` / `// inputs:` header comments
# ---------------------------------------------------------------------------


@dataclass
class FileHints:
    """What a .tile file's header comments say about running it."""

    dims: Optional[Dict[str, int]] = None       # the first `// dims:` line
    dims_line: int = 0
    shapes: Dict[str, Tuple[int, ...]] = field(default_factory=dict)  # the first `// shape:` line
    positive: bool = False                       # `// inputs: positive`


def read_hints(path: Path, text: str) -> FileHints:
    """Scan ``//`` comment lines for the machine-readable headers of examples/README.md.

    Only the first ``dims`` and ``shape`` lines count: with several, later
    ones are alternative size sets for the tests, and the first shape line
    pairs with the first dims line.
    """
    hints = FileHints()
    for lineno, line in enumerate(text.splitlines(), start=1):
        m = _HEADER.match(line)
        if not m:
            continue
        key, value = m.group(1), m.group(2)
        try:
            if key == "dims" and hints.dims is None:
                hints.dims, hints.dims_line = parse_dims(value), lineno
            elif key == "shape" and not hints.shapes:
                hints.shapes = parse_shapes(value)
            elif key == "inputs":
                hints.positive = hints.positive or "positive" in _items(value)
        except ValueError as exc:
            # Point at the comment itself: the user has to fix the file, not the command.
            col = line.index(":") + 2
            raise PolytileError(f"bad `// {key}:` line: {exc}", SourceLocation(str(path), lineno, col, line)) from None
    return hints


# ---------------------------------------------------------------------------
# Resolving a command's program, shapes and dtypes
# ---------------------------------------------------------------------------


@dataclass
class Target:
    """A program plus the concrete signature the command specialises it to."""

    path: Path
    program: object
    hints: FileHints
    dims: Dict[str, int]
    shapes: Optional[Tuple[Tuple[int, ...], ...]]   # None: no sizes known (only `show` allows that)
    dtypes: Tuple[str, ...]
    dims_source: str                                  # "--dims", "the file", or "" (none needed/given)


def _read_source(path: Path) -> str:
    # load_program would raise for a missing file, but a directory or a non-UTF-8
    # file would escape as an OSError/UnicodeDecodeError traceback; read it here
    # first (the header comments are needed anyway) and report those cleanly.
    if not path.exists():
        raise PolytileError(f"no such Tile file: {path}")
    if not path.is_file():
        raise PolytileError(f"not a file: {path}")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise PolytileError(f"{path} is not UTF-8 text (byte {exc.start}): is it a .tile file?") from None
    except OSError as exc:
        raise PolytileError(f"cannot read {path}: {exc.strerror or exc}") from None


def _missing_sizes(program, dims: Dict[str, int], shapes: Dict[str, Tuple[int, ...]]) -> Tuple[List[str], List[str]]:
    """Dimension names without a size and any-rank inputs without a shape, in header order."""
    missing_dims: List[str] = []
    missing_shapes: List[str] = []
    for inp in program.inputs:
        if inp.name in shapes:
            continue
        if inp.dims is None:
            missing_shapes.append(inp.name)
            continue
        for d in inp.dims:
            if isinstance(d, str) and d not in dims and d not in missing_dims:
                missing_dims.append(d)
    return missing_dims, missing_shapes


def _header_dim_names(program) -> List[str]:
    names: List[str] = []
    for inp in program.inputs:
        for d in inp.dims or ():
            if isinstance(d, str) and d not in names:
                names.append(d)
    return names


def resolve(args, *, need_sizes: bool = True) -> Target:
    """Load FILE and work out the dims, input shapes and dtypes for this command."""
    from . import pipeline

    path = Path(args.file)
    text = _read_source(path)
    program = pipeline.load_program(path)
    hints = read_hints(path, text)

    explicit_dims: Dict[str, int] = {}
    for d in args.dims or ():
        explicit_dims.update(d)
    explicit_shapes: Dict[str, Tuple[int, ...]] = {}
    for s in args.shape or ():
        explicit_shapes.update(s)

    names = program.input_names
    unknown = [n for n in explicit_shapes if n not in names]
    if unknown:
        raise UsageError(f"--shape names {', '.join(unknown)}, which {'is' if len(unknown) == 1 else 'are'} "
                         f"not an input of {path}; the inputs are {', '.join(names)}")

    if args.dims:
        dims, shapes, source = explicit_dims, explicit_shapes, "--dims"
        header = set(_header_dim_names(program))
        extra = [d for d in dims if d not in header]
        if extra:
            # Harmless (maybe a typo, maybe a leftover): say so, but run.
            _note(f"--dims: {', '.join(extra)} {'is' if len(extra) == 1 else 'are'} not a dimension of any input "
                  f"of {path} (header dimensions: {', '.join(sorted(header)) or 'none'}); ignored")
    elif (hints.dims is not None or hints.shapes) and _missing_sizes(program, {}, explicit_shapes) != ([], []):
        # The file's first `// dims:` line (and `// shape:` line) stand in for --dims;
        # explicit --shape values still win over the file's.
        dims = dict(hints.dims or {})
        shapes = {**hints.shapes, **explicit_shapes}
        source = "the file"
        text_dims = ", ".join(f"{k}={v}" for k, v in dims.items())
        text_shapes = "".join(f", {k}={'x'.join(map(str, v)) or 'scalar'}" for k, v in hints.shapes.items()
                              if k not in explicit_shapes)
        where = f"{path}:{hints.dims_line}" if hints.dims is not None else str(path)
        _note(f"no --dims given: using {(text_dims + text_shapes).lstrip(', ')} from {where}")
    else:
        dims, shapes, source = {}, explicit_shapes, ""

    missing_dims, missing_shapes = _missing_sizes(program, dims, shapes)
    if missing_dims or missing_shapes:
        if not need_sizes and not dims and not shapes:
            sizes = None  # `show` without any sizes: the program text only
        else:
            raise PolytileError(_missing_message(path, hints, missing_dims, missing_shapes, source))
    else:
        sizes = pipeline.shapes_from_dims(program, dims, shapes)

    dtypes = _dtypes(args, program)
    return Target(path, program, hints, dims, sizes, dtypes, source)


def _missing_message(path: Path, hints: FileHints, missing_dims: List[str], missing_shapes: List[str],
                     source: str) -> str:
    parts = []
    if missing_dims:
        s = "s" if len(missing_dims) > 1 else ""
        example = ",".join(f"{d}=<size>" for d in missing_dims)
        parts.append(f"dimension{s} {', '.join(missing_dims)} of {path} need{'' if s else 's'} a size: "
                     f"pass --dims {example}")
    if missing_shapes:
        example = " ".join(f"--shape {n}=<A>x<B>" for n in missing_shapes)
        parts.append(f"input{'s' if len(missing_shapes) > 1 else ''} {', '.join(missing_shapes)} "
                     f"{'are' if len(missing_shapes) > 1 else 'is'} declared without dimensions: pass {example}")
    msg = "; ".join(parts)
    if source == "the file":
        msg += f" (the `// dims:` line at {path}:{hints.dims_line} does not give them)"
    elif not source and hints.dims is None:
        msg += f" ({path} has no `// dims:` line to fall back on)"
    return msg


def _dtypes(args, program) -> Tuple[str, ...]:
    per_input: Dict[str, str] = {}
    for d in args.dtypes or ():
        per_input.update(d)
    names = program.input_names
    unknown = [n for n in per_input if n not in names]
    if unknown:
        raise UsageError(f"--dtypes names {', '.join(unknown)}, which {'is' if len(unknown) == 1 else 'are'} "
                         f"not an input; the inputs are {', '.join(names) or '(none)'}")
    return tuple(per_input.get(n, args.dtype) for n in names)


def _note(text: str) -> None:
    print(f"{PROG}: {text}", file=sys.stderr)


def _shape_text(shape: Sequence[int]) -> str:
    return "x".join(str(s) for s in shape) if len(shape) else "scalar"


def _signature(target: Target) -> str:
    return ", ".join(f"{n} {dt}[{_shape_text(s)}]"
                     for n, s, dt in zip(target.program.input_names, target.shapes, target.dtypes))


def _specialize(target: Target, args, *, build: bool):
    from . import pipeline

    kernel = pipeline.compile(target.program, target=getattr(args, "target", "openmp"))
    return kernel.specialize_shapes(target.shapes, target.dtypes, build=build)


# ---------------------------------------------------------------------------
# compile
# ---------------------------------------------------------------------------


def cmd_compile(args) -> int:
    target = resolve(args)
    spec = _specialize(target, args, build=args.build)
    src = spec.source
    params = ", ".join(f"{p.name}: {p.kind} {p.dtype}[{_shape_text(p.shape)}]" for p in src.params)
    if args.output:
        out = Path(args.output)
        try:
            out.write_text(src.text, encoding="utf-8")
        except OSError as exc:
            raise PolytileError(f"cannot write {out}: {exc.strerror or exc}") from None
        # The C went to a file, so stdout is free for the report.
        report = sys.stdout
        print(f"wrote {out} ({len(src.text.splitlines())} lines of C)", file=report)
    else:
        sys.stdout.write(src.text if src.text.endswith("\n") else src.text + "\n")
        # Keep stdout pure C (so `> kernel.c` works); the rest goes to stderr.
        report = sys.stderr
    print(f"entry: {src.entry}({params})", file=report)
    if args.build:
        print(f"library: {spec.library_path}", file=report)
    return 0


# ---------------------------------------------------------------------------
# run
# ---------------------------------------------------------------------------


def make_inputs(target: Target, kind: str, seed: int) -> List[np.ndarray]:
    """Random inputs: small integers (exact in every dtype, so checks can be exact) or normals."""
    rng = np.random.default_rng(seed)
    positive = target.hints.positive
    arrays = []
    for shape, dtype in zip(target.shapes, target.dtypes):
        if kind == "int":
            lo, hi = (1, 4) if positive else (-4, 4)
            a = rng.integers(lo, hi + 1, size=shape)
        elif positive:
            a = rng.uniform(1.0, 4.0, size=shape)
        else:
            a = rng.standard_normal(size=shape)
        if np.dtype(dtype).kind in "iu" and kind == "normal":
            a = np.rint(a)  # a cast would truncate most normals to 0
        # np.array, not np.ascontiguousarray: the latter turns a 0-d (scalar input) array into shape (1,).
        arrays.append(np.array(a, dtype=dtype, order="C"))
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
    space = dom.get_space()
    box = isl.Set.universe(space)
    for d in range(n):
        box = box.lower_bound_val(isl.dim_type.set, d, isl.Val.int_from_si(dom.get_ctx(), lows[d]))
        box = box.upper_bound_val(isl.dim_type.set, d, isl.Val.int_from_si(dom.get_ctx(), highs[d]))
    if not box.is_equal(dom):
        return None
    return math.prod(h - lo + 1 for lo, h in zip(lows, highs))


def count_points(dom) -> Optional[int]:
    """The number of integer points of an isl Set, or None when counting would be slow.

    A box (matmul, valid convolutions) is counted from its bounds in no time.
    Otherwise isl's ``count_val`` scans the points of all but the last
    dimension, so it only runs when that bounding box is small.
    """
    import islpy as isl

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
    if scan > COUNT_SCAN_LIMIT:
        return None
    return dom.count_val().to_python()


def count_flops(spec) -> Optional[int]:
    """2 x the iteration points of every contraction update (a combine and a fold each)."""
    total = 0
    for s in spec.scop.statements:
        if s.kind != "contract":
            continue
        n = count_points(s.domain)
        if n is None:
            return None
        total += 2 * n
    return total


@dataclass
class Check:
    name: str
    ok: bool
    err: float
    tol_text: str
    detail: str = ""


def check_output(name: str, got: np.ndarray, want: np.ndarray) -> Check:
    """Compare one compiled output with the oracle's: exact for integers, relative bound for floats."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return Check(name, False, math.inf, "-", f"shape {got.shape} but the reference has {want.shape}")
    dtype = np.dtype(want.dtype)
    exact = dtype.kind not in "fc"
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    # Equal infinities and NaN-vs-NaN agree (masked_max gives -inf by design;
    # log of a non-positive input gives nan in both); `inf - inf` would be nan.
    same = (g == w) | (np.isnan(g) & np.isnan(w))
    with np.errstate(invalid="ignore"):  # inf - inf where `same` already decided
        diff = np.where(same, 0.0, np.abs(g - w))
    diff = np.where(np.isnan(diff), np.inf, diff)
    err = float(diff.max()) if diff.size else 0.0
    if exact:
        tol, tol_text = 0.0, "exact"
        bad = ~same if got.dtype == want.dtype else (got != want)
        ok = not bool(np.any(bad))
    else:
        rtol = RTOL.get(dtype.name, RTOL["float32"])
        finite = w[np.isfinite(w)]
        scale = max(1.0, float(np.abs(finite).max())) if finite.size else 1.0
        tol = rtol * scale
        tol_text = f"{tol:.3g}"
        bad = diff > tol
        ok = not bool(np.any(bad))
    detail = ""
    if got.dtype != want.dtype:
        ok = False
        detail = f"dtype {got.dtype} but the reference has {want.dtype}"
    elif not ok:
        worst = np.unravel_index(int(np.argmax(diff)), diff.shape) if diff.ndim else ()
        where = "[" + ", ".join(str(int(i)) for i in worst) + "]"
        detail = (f"{int(np.count_nonzero(bad))} of {diff.size} elements differ; worst at {where}: "
                  f"got {got[worst]!r}, expected {want[worst]!r}")
    return Check(name, ok, err, tol_text, detail)


def _table(rows: List[List[str]]) -> str:
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms"


def cmd_run(args) -> int:
    from . import pipeline

    target = resolve(args)
    spec = _specialize(target, args, build=True)
    arrays = make_inputs(target, args.inputs, args.seed)

    def call():
        out = pipeline.run_specialization(spec, arrays)
        return out if isinstance(out, tuple) else (out,)

    for _ in range(args.warmup):
        call()
    times = []
    outs = None
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        outs = call()
        times.append(time.perf_counter() - t0)
    med, best = statistics.median(times), min(times)

    dims = ", ".join(f"{k}={v}" for k, v in spec.bound.dims.items()) or "none"
    values = {"int": "integers in [1, 4]" if target.hints.positive else "integers in [-4, 4]",
              "normal": "uniform in [1, 4]" if target.hints.positive else "standard normal"}[args.inputs]
    print(f"kernel   {spec.source.entry} from {target.path}")
    print(f"dims     {dims}")
    print(f"inputs   {_signature(target) or '(none)'}  ({values}, seed {args.seed})")
    print(f"time     median {_ms(med)}, min {_ms(best)} per call over {args.repeat} run(s) "
          f"after {args.warmup} warm-up")
    flops = count_flops(spec)
    if flops is None:
        print("flops    not counted (a contraction domain is too irregular and large to count quickly)")
    elif flops:
        print(f"flops    {flops} (2 per contraction point): {flops / med / 1e9:.2f} GFLOP/s at the median, "
              f"{flops / best / 1e9:.2f} at the min")

    names = spec.bound.program.outputs
    rows = [["output", "shape", "dtype"]]
    checks: List[Check] = []
    if args.check:
        from . import reference

        rows[0] += ["max_abs_err", "tolerance", "check"]
        ref = reference.run(target.program, *arrays)
        refs = ref if isinstance(ref, tuple) else (ref,)
        checks = [check_output(n, g, w) for n, g, w in zip(names, outs, refs)]
    for k, (name, out) in enumerate(zip(names, outs)):
        row = [name, _shape_text(out.shape), str(out.dtype)]
        if checks:
            c = checks[k]
            row += [f"{c.err:.3g}", c.tol_text, "PASS" if c.ok else "FAIL"]
        rows.append(row)
    print()
    print(_table(rows))
    if not args.check:
        return 0
    for c in checks:
        if c.detail:
            print(f"  {c.name}: {c.detail}")
    kinds = {np.dtype(o.dtype).name for o in outs}
    rules = [f"{dt} max_abs_err <= {RTOL[dt]:g} * max(1, max|ref|)" for dt in sorted(kinds & set(RTOL))]
    if kinds - set(RTOL):
        rules.append("integer/bool outputs exact")
    print("tolerance: " + "; ".join(rules))
    ok = all(c.ok for c in checks)
    print(f"check against the reference interpreter: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


# ---------------------------------------------------------------------------
# show
# ---------------------------------------------------------------------------


def _schedule_yaml(schedule) -> str:
    """The schedule tree as block-style isl YAML (one node per line), falling back to isl's flow style."""
    import islpy as isl

    if not isinstance(schedule, isl.Schedule):
        schedule = schedule.tree()  # a polytile.schedule.Schedule: its equivalent isl tree
    try:
        printer = isl.Printer.to_str(schedule.get_ctx()).set_yaml_style(isl.yaml_style.BLOCK)
        return printer.print_schedule(schedule).get_str().rstrip()
    except (AttributeError, isl.Error):
        return str(schedule)


def cmd_show(args) -> int:
    target = resolve(args, need_sizes=False)
    print(f"// {target.path}")
    print(str(target.program).rstrip())
    if target.shapes is None:
        names = _header_dim_names(target.program)
        if names:
            _note(f"pass --dims {','.join(f'{d}=<size>' for d in names)} to also see the Scop, "
                  f"dependences and schedule tree")
        return 0
    spec = _specialize(target, args, build=False)
    dims = ", ".join(f"{k}={v}" for k, v in spec.bound.dims.items()) or "none"
    print()
    print(f"== specialised to {dims}; inputs {_signature(target) or '(none)'}")
    print()
    print("== scop (domains, accesses)")
    print(spec.scop.describe())
    print()
    print("== dependences")
    print(spec.deps.describe())
    print()
    if hasattr(spec.schedule, "describe"):
        # polytile's own Schedule reads as a loop nest with its marks; isl's tree follows.
        print("== schedule")
        print(spec.schedule.describe())
        print()
    print("== schedule tree (isl)")
    print(_schedule_yaml(spec.schedule))
    return 0


# ---------------------------------------------------------------------------
# The parser
# ---------------------------------------------------------------------------

_MAIN_EPILOG = """\
examples:
  polytile compile examples/matmul.tile --dims M=64,N=48,K=32
  polytile run examples/conv2d.tile --check
  polytile show examples/softmax.tile --dims M=4,N=5

Sizes: --dims gives every dimension name of the inputs' headers; without it
the first `// dims:` comment line of the file is used.  POLYTILE_DEBUG=1..3
(or -v, -vv, -vvv) prints the pipeline's stages.  Exit codes: 0 ok, 1 error or
failed check, 2 bad arguments.
"""

_COMPILE_EPILOG = """\
examples:
  polytile compile examples/matmul.tile --dims M=64,N=48,K=32
  polytile compile examples/conv2d.tile -o conv2d.c --build
  polytile compile examples/gemm.tile --dims "M=32, K=24, N=40" --dtype float64

Without -o the C goes to stdout and the entry point's signature (and, with
--build, the library path) to stderr.
"""

_RUN_EPILOG = """\
examples:
  polytile run examples/matmul.tile --dims M=256,N=256,K=256 --repeat 20
  polytile run examples/conv2d.tile --check
  polytile run examples/elementwise_chain.tile --dims N=32 --shape X=6x1 --inputs normal --check

--check compares every output with the reference interpreter: integer
outputs must match exactly; float outputs must satisfy
max_abs_err <= rtol * max(1, max|ref|) with rtol 1e-4 (float32) or 1e-5
(float64).  A failed check exits with status 1.  Times are per kernel call,
including the allocation of its outputs.
"""

_SHOW_EPILOG = """\
examples:
  polytile show examples/matmul.tile
  polytile show examples/softmax.tile --dims M=4,N=5
  polytile show examples/conv2d_strided.tile --dims N=1,H=9,W=9,CI=2,KH=3,KW=3,CO=4

Without sizes (no --dims and no `// dims:` line) only the program is shown.
"""


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Keep the hand-formatted epilogs; show defaults where help text asks for them."""


def _common(p: argparse.ArgumentParser, *, sub: bool) -> None:
    # -v is accepted before and after the subcommand.  On subparsers its default
    # is SUPPRESS, or the subparser's default would overwrite a top-level -v.
    p.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS if sub else 0,
                   help="print the pipeline's stages (debug level 1; -vv IR and schedules, -vvv also source)")


def _shape_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("sizes and types")
    g.add_argument("--dims", action="append", type=_arg_type(parse_dims, "dims"), metavar="M=64,N=64",
                   help="dimension sizes, comma-separated (spaces allowed inside quotes; repeatable). "
                        "Default: the file's first `// dims:` line")
    g.add_argument("--shape", action="append", type=_arg_type(parse_shapes, "shape"), metavar="X=3x4",
                   help="shape of an input declared without dimensions (repeatable; NAME=scalar for rank 0)")
    g.add_argument("--dtype", default="float32", choices=DTYPES,
                   help="element type of every input (default: float32)")
    g.add_argument("--dtypes", action="append", type=_arg_type(parse_dtypes, "dtypes"), metavar="A=float64,B=int32",
                   help="element type per input, overriding --dtype")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, formatter_class=_Formatter, epilog=_MAIN_EPILOG,
        description="polytile: a polyhedral loop optimizer.  Compiles Tile programs (tensor contractions "
                    "and elementwise code) through isl into OpenMP C, runs them, checks them against a "
                    "reference interpreter, and shows the polyhedral model in between.")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    _common(parser, sub=False)
    subs = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")

    p = subs.add_parser("compile", formatter_class=_Formatter, epilog=_COMPILE_EPILOG,
                        help="print (or write) the generated C for given sizes",
                        description="Generate the scheduled OpenMP C of a Tile program specialised to "
                                    "concrete sizes and dtypes.")
    p.add_argument("file", metavar="FILE.tile", help="the Tile program")
    p.add_argument("-o", "--output", metavar="OUT.c", help="write the C here instead of stdout")
    p.add_argument("--target", default="openmp", help="code generation target (default: openmp)")
    p.add_argument("--build", action="store_true",
                   help="also compile the C into a shared library (cached) and print its path")
    _shape_options(p)
    _common(p, sub=True)
    p.set_defaults(handler=cmd_compile)

    p = subs.add_parser("run", formatter_class=_Formatter, epilog=_RUN_EPILOG,
                        help="compile, run on random inputs, time, and optionally check",
                        description="Compile a Tile program for the given sizes, run it on random inputs "
                                    "(warm-up, then timed repeats) and print each output's shape and dtype, "
                                    "the time per call and GFLOP/s.  With --check, compare the outputs "
                                    "with the reference interpreter.")
    p.add_argument("file", metavar="FILE.tile", help="the Tile program")
    p.add_argument("--target", default="openmp", help="code generation target (default: openmp)")
    p.add_argument("--check", action="store_true", help="compare with the reference interpreter; exit 1 on FAIL")
    p.add_argument("--repeat", type=_positive_int, default=10, metavar="N", help="timed runs (default: 10)")
    p.add_argument("--warmup", type=_count, default=2, metavar="N", help="untimed runs first (default: 2)")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="random seed for the inputs (default: 0)")
    p.add_argument("--inputs", choices=("int", "normal"), default="int",
                   help="int: integers in [-4, 4] (exact, the default); normal: standard normal.  "
                        "A file with `// inputs: positive` gets values in [1, 4] either way")
    _shape_options(p)
    _common(p, sub=True)
    p.set_defaults(handler=cmd_run)

    p = subs.add_parser("show", formatter_class=_Formatter, epilog=_SHOW_EPILOG,
                        help="print the program, and with sizes its Scop, dependences and schedule tree",
                        description="Print a Tile program as polytile reads it.  Given sizes (--dims or the "
                                    "file's `// dims:` line), also print the polyhedral model: iteration "
                                    "domains and access maps, the dependences, and the schedule tree.")
    p.add_argument("file", metavar="FILE.tile", help="the Tile program")
    _shape_options(p)
    _common(p, sub=True)
    p.set_defaults(handler=cmd_show)
    return parser


def _exit_code(code) -> int:
    # SystemExit carries None (success), an int, or a message (failure).
    if code is None:
        return 0
    return code if isinstance(code, int) else 1


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line; returns the exit status (the console script passes it to sys.exit)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or an argparse error (already printed)
        return _exit_code(exc.code)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    sub_prog = f"{PROG} {args.command}"
    level = max(get_config().debug, min(args.verbose or 0, 3))
    try:
        with override(debug=level):
            return args.handler(args)
    except PolytileError as err:
        text = str(err)
        # A located error already reads "file:line:col: error: ..."; don't stack prefixes.
        print(text if err.loc is not None else f"{PROG}: error: {text}", file=sys.stderr)
        return 1
    except UsageError as err:
        print(f"{sub_prog}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `polytile compile ... | head`: the reader left; silence Python's
        # second complaint when it flushes stdout at exit.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 1


if __name__ == "__main__":  # pragma: no cover - `python -m polytile` goes through __main__.py
    sys.exit(main())
