"""What a command runs on: sizes, element types and schedule files from the command line and the
file's ``// dims:`` line, resolved into a :class:`Target` (program, shapes, dtypes); random inputs for
it; the memory check before allocating.  The commands (``polytile.cli``) and ``tune`` share these.

    >>> parse_dims("M=64,N=48")
    {'M': 64, 'N': 48}
"""
from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .. import compare as compare_mod
from .. import dtypes as dtypes_mod
from .argtypes import arg_type
from ..memory import available_memory, bytes_text
from ..errors import MissingFileError, PolytileError, SourceLocation

PROG = "polytile"
DTYPES = dtypes_mod.SUPPORTED  # every element type polytile computes in (one table: polytile.dtypes)
FUSION = ("none", "smart", "max")  # polytile.schedule.FUSION, spelled here so --help needs no islpy

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
    """``"M=64,N=64"`` -> ``{"M": 64, "N": 64}``; raises ValueError with the offending item.

    The conversion is :func:`polytile.pipeline.parse_dims` (one parser for
    the API and the command line).  The command line is stricter first:
    a dimension name must be an identifier and a size non-negative, and an
    empty value is an error -- the API takes those as "no dims" or lets
    binding catch them, but a typo on the command line deserves a message
    naming the item (and argparse's exit status 2).
    """
    from .. import pipeline

    items = _items(text)
    if not items:
        raise ValueError("expected NAME=SIZE[,NAME=SIZE...], e.g. M=64,N=48")
    for item in items:
        if not _DIM_ITEM.match(item):
            raise ValueError(f"bad item {item!r}: expected NAME=SIZE with a non-negative integer SIZE, e.g. M=64")
    try:
        return pipeline.parse_dims(",".join(items))
    except PolytileError as exc:  # cannot happen after the check above; keep argparse's reporting if it does
        raise ValueError(exc.message) from None


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
    dims_source: str                                  # "--dims", "the file", "the schedule", or ""
    # the values of the program's size inputs (inputs without dimensions used as sizes), from the dims
    size_values: Dict[str, int] = field(default_factory=dict)


def _read_source(path: Path) -> str:
    # load_program would raise for a missing file, but a directory or a non-UTF-8
    # file would escape as an OSError/UnicodeDecodeError traceback; read it here
    # first (the header comments are needed anyway) and report those cleanly.
    if not path.exists():
        raise MissingFileError(f"no such Tile file: {path}")
    if not path.is_file():
        raise PolytileError(f"not a file: {path}")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise PolytileError(f"{path} is not UTF-8 text (byte {exc.start}): is it a .tile file?") from None
    except OSError as exc:
        raise PolytileError(f"cannot read {path}: {exc.strerror or exc}") from None


def _missing_sizes(program, dims: Dict[str, int], shapes: Dict[str, Tuple[int, ...]],
                   sized: Sequence[str] = ()) -> Tuple[List[str], List[str]]:
    """Dimension names without a size (size inputs, ``sized``, among them) and any-rank inputs without a shape,
    in header order."""
    missing_dims: List[str] = []
    missing_shapes: List[str] = []
    for inp in program.inputs:
        if inp.name in sized:  # its value, whatever gave it a shape (a saved schedule's meta, `// shape:`)
            if inp.name not in dims:
                missing_dims.append(inp.name)
            continue
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


def resolve(args, *, need_sizes: bool = True, saved: Optional["ScheduleFile"] = None) -> Target:
    """Load FILE and work out the dims, input shapes and dtypes for this command.

    Sizes come from --dims, else the file's first `// dims:` line, else (with
    ``saved``) the shapes a saved schedule records in its "meta" -- the sizes
    it was made and checked for.
    """
    from .. import pipeline

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
    sized = pipeline.size_inputs(program)
    given = [n for n in explicit_shapes if n in sized]
    if given:
        raise UsageError(f"{given[0]} is a size input of {path} (one integer, used as a size): give its value "
                         f"with --dims {given[0]}=<size>, not --shape")

    if args.dims:
        dims, shapes, source = explicit_dims, explicit_shapes, "--dims"
        header = set(_header_dim_names(program)) | set(sized)
        extra = [d for d in dims if d not in header]
        if extra:
            # Harmless (maybe a typo, maybe a leftover): say so, but run.
            _note(f"--dims: {', '.join(extra)} {'is' if len(extra) == 1 else 'are'} not a dimension of any input "
                  f"of {path} (header dimensions: {', '.join(sorted(header)) or 'none'}); ignored")
    elif (hints.dims is not None or hints.shapes) and _missing_sizes(program, {}, explicit_shapes, sized) != ([], []):
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
    elif saved is not None and saved.shapes is not None and _missing_sizes(program, {}, explicit_shapes, sized) != ([], []):
        if len(saved.shapes) != len(names):
            raise PolytileError(f"{saved.path}: its meta has {len(saved.shapes)} input shape(s) but {path} has "
                                f"{len(names)} input(s); pass --dims")
        dims, source = dict(saved.sizes), "the schedule"
        shapes = {**dict(zip(names, saved.shapes)), **explicit_shapes}
        _note(f"no --dims given: using the input shapes saved in {saved.path}: "
              + ", ".join(f"{n}={saved.sizes[n]}" if n in saved.sizes else f"{n}={_shape_text(shapes[n])}"
                          for n in names))
    else:
        dims, shapes, source = {}, explicit_shapes, ""

    missing_dims, missing_shapes = _missing_sizes(program, dims, shapes, sized)
    if missing_dims or missing_shapes:
        if not need_sizes and not dims and not shapes:
            sizes = None  # `show` without any sizes: the program text only
        else:
            raise PolytileError(_missing_message(path, hints, missing_dims, missing_shapes, source, sized))
    else:
        sizes = pipeline.shapes_from_dims(program, dims, shapes)

    meta_dtypes = saved.dtypes if saved is not None and source == "the schedule" else None
    dtypes = _dtypes(args, program, meta_dtypes, sized)
    if saved is not None and saved.program is not None and saved.program.strip() != str(program).strip():
        _note(f"{saved.path} was saved for a different program text than {path}; its steps are replayed "
              f"and checked on this one")
    values = pipeline.size_values(program, dims)
    for name, dt in zip(names, dtypes):
        if name in values and not np.iinfo(dt).min <= values[name] <= np.iinfo(dt).max:
            raise UsageError(f"size input {name}={values[name]} does not fit its type {dt} (--dtypes {name}=int64)")
    return Target(path, program, hints, dims, sizes, dtypes, source, values)


def _missing_message(path: Path, hints: FileHints, missing_dims: List[str], missing_shapes: List[str],
                     source: str, sized: Sequence[str] = ()) -> str:
    parts = []
    if missing_dims:
        s = "s" if len(missing_dims) > 1 else ""
        example = ",".join(f"{d}=<size>" for d in missing_dims)
        inputs = [d for d in missing_dims if d in sized]
        what = f"dimension{s}" if not inputs else ("size input" if missing_dims == inputs[:1] else
                                                  "dimensions and size inputs" if len(inputs) < len(missing_dims)
                                                  else "size inputs")
        parts.append(f"{what} {', '.join(missing_dims)} of {path} need{'' if s else 's'} a "
                     f"{'value' if inputs == missing_dims else 'size'}: pass --dims {example}")
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


def _dtypes(args, program, fallback: Optional[Sequence[str]] = None, sized: Sequence[str] = ()) -> Tuple[str, ...]:
    """--dtypes per input, else --dtype, else ``fallback`` (a saved schedule's), else float32; a size input
    (``sized``) is an integer: int32 (as PlaidML types an Integer) unless --dtypes names an integer type."""
    per_input: Dict[str, str] = {}
    for d in args.dtypes or ():
        per_input.update(d)
    names = program.input_names
    unknown = [n for n in per_input if n not in names]
    if unknown:
        raise UsageError(f"--dtypes names {', '.join(unknown)}, which {'is' if len(unknown) == 1 else 'are'} "
                         f"not an input; the inputs are {', '.join(names) or '(none)'}")
    floats = [n for n in sized if n in per_input and not per_input[n].startswith(("int", "uint"))]
    if floats:
        raise UsageError(f"--dtypes {floats[0]}={per_input[floats[0]]}: {floats[0]} is a size input, an integer")
    if args.dtype is None and fallback is not None and len(fallback) == len(names):
        base = list(fallback)
    else:
        base = [args.dtype or "float32"] * len(names)
    # A size input is int32 whatever --dtype says of the arrays (--dtypes may name another integer type).
    base = ["int32" if n in sized else b for n, b in zip(names, base)]
    return tuple(per_input.get(n, b) for n, b in zip(names, base))


def _note(text: str) -> None:
    print(f"{PROG}: {text}", file=sys.stderr)


def _shape_text(shape: Sequence[int]) -> str:
    return "x".join(str(s) for s in shape) if len(shape) else "scalar"


def _signature(target: Target) -> str:
    return ", ".join(f"{n} {dt} = {target.size_values[n]} (a size)" if n in target.size_values else
                     f"{n} {dt}[{_shape_text(s)}]"
                     for n, s, dt in zip(target.program.input_names, target.shapes, target.dtypes))


def compile_options(target: Target, args, saved: Optional["ScheduleFile"] = None) -> Dict[str, Any]:
    """The ``polytile.compile`` options these arguments ask for: the saved schedule's steps (on top of the
    untiled default), or the default schedule (isl's with --fusion) blocked for --hardware.

    ``compile``, ``run`` and ``schedule`` all build their options here, so ``polytile schedule`` shows
    (and ``-o`` saves) exactly the schedule ``polytile compile`` runs.
    """
    fusion = getattr(args, "fusion", None)
    parallel = not getattr(args, "no_parallel", False)
    options: Dict[str, Any] = {}
    if saved is not None:
        options["schedule"] = _recipe(saved, fusion, parallel=parallel)
    elif fusion is not None:
        options["fusion"] = fusion
    if not parallel:
        options["parallel"] = False
    options.update(_hardware_option(args))
    if getattr(args, "no_tile", False):
        options["hardware"] = None
    if "hardware" not in options and target.shapes and any(0 in tuple(s) for s in target.shapes):
        # Zero-size inputs (e.g. K=0, an empty reduction whose result is 0): there is nothing to tile, and
        # autotile cannot measure an empty loop; compile the untiled default schedule.
        options["hardware"] = None
    return options


def _specialize(target: Target, args, *, build: bool, saved: Optional["ScheduleFile"] = None):
    """Compile for the target's signature with the options of :func:`compile_options`."""
    from .. import kernel as kernel_mod

    kernel = kernel_mod.compile(target.program, target=getattr(args, "target", "openmp"),
                                **compile_options(target, args, saved))
    return kernel.specialize_shapes(target.shapes, target.dtypes, build=build, sizes=target.size_values)


# ---------------------------------------------------------------------------
# Saved schedules (--schedule, --apply, --schedules)
# ---------------------------------------------------------------------------


@dataclass
class ScheduleFile:
    """A schedule read from JSON: its steps and what its "meta" says it was made for."""

    path: Path
    steps: Tuple[Any, ...]                          # polytile.schedule.Step
    shapes: Optional[List[Tuple[int, ...]]] = None  # meta "shapes", one per input
    dtypes: Optional[List[str]] = None              # meta "dtypes"
    program: Optional[str] = None                   # meta "program" (the Tile text)
    sizes: Dict[str, int] = field(default_factory=dict)  # meta "sizes": the size inputs' values

    @property
    def complete(self) -> bool:
        """Starts with a base step (as `Schedule.save` writes): a whole recipe, not additions."""
        return bool(self.steps) and self.steps[0].op == "base"


def load_schedule_file(path) -> ScheduleFile:
    """Read a saved schedule document or a bare JSON list of steps, with errors naming the file.

    The file is read by :func:`polytile.scheduling.saved.read_schedule_file`; this adds a hint to a document
    that holds no steps, and reads what its "meta" says it was made for (shapes, dtypes, program).
    """
    from ..scheduling.saved import read_schedule_file, schedule_steps

    p = Path(path)
    doc = read_schedule_file(p)
    try:
        steps = schedule_steps(doc)
    except PolytileError as exc:
        raise PolytileError(f"{p}: {exc.message}; expected a schedule saved by `polytile schedule -o` or a "
                            f'list of steps like [{{"op": "tile", "stmt": "C", "sizes": {{"i": 32}}}}]') from None
    meta = doc.get("meta") if isinstance(doc, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    shapes = meta.get("shapes")
    try:
        shapes = [tuple(int(x) for x in s) for s in shapes] if shapes is not None else None
    except (TypeError, ValueError):
        raise PolytileError(f"{p}: meta \"shapes\" must be a list of shapes (lists of integers)") from None
    dtypes = meta.get("dtypes")
    if dtypes is not None:
        if not (isinstance(dtypes, list) and all(isinstance(d, str) and d in DTYPES for d in dtypes)):
            raise PolytileError(f"{p}: meta \"dtypes\" must be a list of {', '.join(DTYPES)}")
    program = meta.get("program") if isinstance(meta.get("program"), str) else None
    sizes = meta.get("sizes") or {}
    if not (isinstance(sizes, dict) and all(isinstance(k, str) and isinstance(v, int) for k, v in sizes.items())):
        raise PolytileError(f"{p}: meta \"sizes\" must map size inputs to integers")
    return ScheduleFile(p, tuple(steps), shapes, dtypes, program, dict(sizes))


def _recipe(saved: Optional[ScheduleFile], fusion: Optional[str], parallel: bool) -> Tuple[Any, ...]:
    """The complete steps: a saved schedule as it is, or its steps on top of the default (or isl's) schedule.

    A complete saved schedule already names its base; --fusion or
    --no-parallel contradicting it is a usage error rather than silently ignored.
    """
    if saved is None:
        return compare_mod.base_steps(fusion, parallel)
    if saved.complete:
        base = saved.steps[0].kwargs()
        if fusion is not None and (base.get("kind") != "isl" or base.get("fusion", "smart") != fusion):
            raise UsageError(f"--fusion {fusion}: {saved.path} is a complete schedule whose base is "
                             f"{saved.steps[0]}; drop --fusion, or save the steps without their base step")
        if not parallel and any(s.op == "auto_parallel" for s in saved.steps):
            raise UsageError(f"--no-parallel: {saved.path} is a complete schedule that includes auto_parallel; "
                             f"drop --no-parallel, or remove that step")
        return saved.steps
    return compare_mod.recipe(list(saved.steps), fusion, parallel)


# ---------------------------------------------------------------------------
# compile
# ---------------------------------------------------------------------------


def _saved(args) -> Optional[ScheduleFile]:
    return load_schedule_file(args.schedule) if getattr(args, "schedule", None) else None


def make_inputs(target: Target, kind: str, seed: int) -> List[np.ndarray]:
    """Random inputs for the target's signature (:func:`polytile.compare.random_inputs`; positive ones when
    the file says ``// inputs: positive``); a size input holds its value."""
    arrays = compare_mod.random_inputs(target.shapes, target.dtypes, kind, seed, target.hints.positive)
    if not target.size_values:
        return arrays
    return compare_mod.with_size_values(target.program, arrays, target.size_values)


def check_memory(arrays: Sequence[Tuple[str, Sequence[int], Any]], what: str,
                 available: Optional[int] = None) -> int:
    """Total bytes of ``arrays`` (name, shape, dtype); a PolytileError naming the sizes when they cannot
    fit in the available memory -- checked before anything is allocated."""
    sizes = []
    for name, shape, dtype in arrays:
        n = np.dtype(dtype).itemsize
        for d in shape:
            n *= int(d)
        sizes.append((name, shape, np.dtype(dtype).name, n))
    total = sum(n for *_, n in sizes)
    available = available_memory() if available is None else available
    if available is not None and total > available:
        big = sorted(sizes, key=lambda x: -x[3])[:4]
        parts = ", ".join(f"{nm} {dt}[{_shape_text(sh)}] {bytes_text(n)}" for nm, sh, dt, n in big)
        raise PolytileError(f"{what} need {bytes_text(total)} ({parts}{', ...' if len(sizes) > 4 else ''}), "
                            f"more than the {bytes_text(available)} of memory available; use smaller --dims")
    return total


def _shape_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("sizes and types")
    g.add_argument("--dims", action="append", type=arg_type(parse_dims, "dims"), metavar="M=64,N=64",
                   help="dimension sizes, comma-separated (spaces allowed inside quotes; repeatable), and the "
                        "values of size inputs (`function (A[N], D)` with D used as a size: D=3). "
                        "Default: the file's first `// dims:` line")
    g.add_argument("--shape", action="append", type=arg_type(parse_shapes, "shape"), metavar="X=3x4",
                   help="shape of an input declared without dimensions (repeatable; NAME=scalar for rank 0)")
    # default None: a saved schedule's dtypes apply unless one is given (float32 otherwise)
    g.add_argument("--dtype", default=None, choices=DTYPES,
                   help="element type of every input (default: float32)")
    g.add_argument("--dtypes", action="append", type=arg_type(parse_dtypes, "dtypes"), metavar="A=float64,B=int32",
                   help="element type per input, overriding --dtype")


def _hardware_option(args) -> Dict[str, Any]:
    """``--hardware`` as a compile option (``none``: no autotiling; absent: the default)."""
    hw = getattr(args, "hardware", None)
    if hw is None:
        return {}
    return {"hardware": None if hw.lower() == "none" else hw}
