"""Reading a Tile program and its sizes: text or path -> a checked :class:`~polytile.ir.Program`,
``--dims`` text -> sizes, sizes -> input shapes (and the values of size inputs).

    >>> p = load_program("function (A[M, K]) -> (B) { B = A * 2; }")
    >>> shapes_from_dims(p, parse_dims("M=2,K=3"))
    ((2, 3),)
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, Mapping, Optional, Sequence, Tuple, Union

from . import desugar, ir, sema
from .errors import MissingFileError, OptionError, PolytileError, ShapeError, TileSyntaxError, recursion_room
from .frontends.tile import parse, parse_file

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
            raise MissingFileError(f"no such Tile file: {path}" if not exists else f"not a file: {path}")
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
    sized = None
    for inp in program.inputs:
        if inp.name in shapes:
            out.append(tuple(int(s) for s in shapes[inp.name]))
            continue
        if inp.dims is None:
            sized = size_inputs(program) if sized is None else sized
            if inp.name in sized and inp.name in dims:
                out.append(())  # a size input: one integer, its value in dims (see size_values)
                continue
            if inp.name in sized:
                raise ShapeError(f"size input {inp.name} needs a value: add {inp.name}=<size> to --dims")
            raise ShapeError(f"input {inp.name} has no declared dimensions: give its shape, e.g. --shape {inp.name}=4x5")
        row = []
        for d in inp.dims:
            if isinstance(d, int):
                row.append(d)
            elif d in dims:
                row.append(int(dims[d]))
            else:
                raise ShapeError(f"dimension {d} of input {inp.name} has no size: add {d}=<size> to --dims")
        out.append(tuple(row))
    return tuple(out)


def size_inputs(program: ir.Program) -> Tuple[str, ...]:
    """The program's *size inputs*: inputs declared without dimensions whose integer value is used as a size.

    >>> size_inputs(load_program("function (A[N], D) -> (B) { B[i : D] = +(A[i]); }"))
    ('D',)
    """
    return desugar.size_inputs(desugar.normalize(program))


def size_values(program: ir.Program, dims: Mapping[str, int]) -> Dict[str, int]:
    """The values ``dims`` gives the program's size inputs (a size input is sized like a dimension:
    ``D=3``); a kernel is specialised on them (``Kernel.specialize_shapes(..., sizes=...)``).

    >>> size_values(load_program("function (A[N], D) -> (B) { B[i : D] = +(A[i]); }"), {"N": 8, "D": 3})
    {'D': 3}
    """
    return {n: int(dims[n]) for n in size_inputs(program) if n in dims}


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
            raise OptionError(f"bad dimension {item!r}: write NAME=SIZE, e.g. M=64")
        if name in out and out[name] != int(value):
            raise OptionError(f"dimension {name} is given twice ({name}={out[name]} and {item}): which one is meant?")
        out[name] = int(value)
    return out
