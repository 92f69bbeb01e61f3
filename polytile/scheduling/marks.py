"""The marks of an isl schedule tree as typed values, and the text they have in the tree.

:mod:`.tree` wraps a schedule's loops in isl ``mark`` nodes (parallel, simd and
unroll loops, register tiles, packed panels, contracted temporaries, and the
``dim N`` tag of every band); isl only keeps a name per mark, so each kind has
a short text.  One frozen dataclass per kind holds the fields, and
:func:`encode` / :func:`decode` turn a mark into its text and back.  They are
exact inverses (``decode`` refuses any text ``encode`` would not write), and
this module is the only place that text is written or read: the tree builds
marks as values, the code generators decode each mark node once and dispatch
on its type.

    >>> encode(Parallel((Reduction("+", "C"), Reduction("max", "M"))))
    'parallel +:C,max:M'
    >>> decode("pack B 1 32")
    Pack(array='B', dim=1, block=32)
    >>> decode(encode(Unroll(4))) == Unroll(4)
    True

The kinds, as text:

* ``Parallel``: ``parallel`` or ``parallel op:A,...``, an OpenMP parallel loop and the reductions it carries
* ``Simd``: ``simd`` or ``simd op:A,...``, an OpenMP simd loop and the reductions it carries
* ``Unroll``: ``unroll N``, ``#pragma GCC unroll N``
* ``RegTile``: ``regtile N i=MR j=NR V``, a register tile (``codegen/microkernel.py``)
* ``Pack``: ``pack A D BLOCK``, a packed panel of array ``A`` (``codegen/pack.py``)
* ``Local``: ``local A``, temporary ``A`` contracted to a scalar inside the mark
* ``Dim``: ``dim N``, the band right below is schedule dimension ``N``

The first five keywords double as the kinds of a schedule's own marks
(``Schedule.marks``; :data:`.core.PARALLEL` and friends are defined from them).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar, Dict, NamedTuple, Tuple, Type, Union

from ..errors import InternalError

# Names (arrays, loops) are identifiers; a reduction operator is any token the
# separators of a reduction list cannot occur in.  Both rules keep every text
# encode writes decodable into the same value.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)
_OP = re.compile(r"[^\s:,]+")
_INT = r"(\d+)"
_ID = r"([A-Za-z_][A-Za-z0-9_]*)"


class Reduction(NamedTuple):
    """One reduction a loop carries: ``op`` (``+``, ``*``, ``max``, ``min``) into ``array``."""

    op: str
    array: str


def _name(mark, field: str) -> None:
    value = getattr(mark, field)
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise InternalError(f"{type(mark).__name__}.{field} must be an identifier, got {value!r}")


def _count(mark, field: str, least: int) -> None:
    value = getattr(mark, field)
    if type(value) is not int or value < least:  # not bool: True would be written "True"
        raise InternalError(f"{type(mark).__name__}.{field} must be an integer >= {least}, got {value!r}")


class _Mark:
    """What every mark kind has: its keyword, and its text after the keyword (none for a bare mark)."""

    keyword: ClassVar[str]
    # The text after "keyword ": a regular expression whose groups _from_groups reads.
    _arg: ClassVar[str] = ""

    def arg(self) -> str:
        """The text after the keyword ('' for a bare mark): ``"4"`` for ``unroll 4``."""
        raise NotImplementedError

    @classmethod
    def _from_groups(cls, groups: Tuple[str, ...]):
        raise NotImplementedError

    @classmethod
    def from_arg(cls, arg: str):
        """The mark of this kind whose text after the keyword is ``arg``: ``RegTile.from_arg("1 i=8 j=32 16")``."""
        mark = decode(f"{cls.keyword} {arg}" if arg else cls.keyword)
        if not isinstance(mark, cls):
            raise InternalError(f"not a {cls.keyword} mark argument: {arg!r}")
        return mark


class _Reductions(_Mark):
    """Parallel and simd loops: ``keyword`` alone, or ``keyword op:A,op:B`` with the reductions carried."""

    reductions: Tuple[Reduction, ...]
    _arg = r"(\S+)"

    def __post_init__(self) -> None:
        reds = self.reductions
        if isinstance(reds, (str, bytes)) or not isinstance(reds, (tuple, list)):
            raise InternalError(f"{type(self).__name__}.reductions must be a tuple of (op, array), got {reds!r}")
        items = []
        for r in reds:
            if not isinstance(r, (tuple, list)) or len(r) != 2:
                raise InternalError(f"{type(self).__name__}: a reduction is (op, array), got {r!r}")
            op, array = r
            if not isinstance(op, str) or not _OP.fullmatch(op):
                raise InternalError(f"{type(self).__name__}: bad reduction operator {op!r}")
            if not isinstance(array, str) or not _NAME.fullmatch(array):
                raise InternalError(f"{type(self).__name__}: a reduction's array must be an identifier, got {array!r}")
            items.append(Reduction(op, array))
        object.__setattr__(self, "reductions", tuple(items))

    def arg(self) -> str:
        return ",".join(f"{op}:{array}" for op, array in self.reductions)

    @classmethod
    def _from_groups(cls, groups):
        items = [item.split(":", 1) for item in groups[0].split(",")]
        if any(len(item) != 2 for item in items):
            raise InternalError(f"not a reduction list: {groups[0]!r}")
        return cls(tuple(Reduction(op, array) for op, array in items))


@dataclass(frozen=True)
class Parallel(_Reductions):
    """``parallel`` / ``parallel +:C,max:M``: an OpenMP parallel loop, with the reductions it carries."""

    keyword: ClassVar[str] = "parallel"
    reductions: Tuple[Reduction, ...] = ()


@dataclass(frozen=True)
class Simd(_Reductions):
    """``simd`` / ``simd +:s``: an OpenMP simd loop, with the reductions it carries."""

    keyword: ClassVar[str] = "simd"
    reductions: Tuple[Reduction, ...] = ()


@dataclass(frozen=True)
class Unroll(_Mark):
    """``unroll 4``: ask the C compiler to unroll the loop ``factor`` times."""

    keyword: ClassVar[str] = "unroll"
    _arg = _INT
    factor: int

    def __post_init__(self) -> None:
        _count(self, "factor", 1)

    def arg(self) -> str:
        return str(self.factor)

    @classmethod
    def _from_groups(cls, groups):
        return cls(int(groups[0]))


#: The loop of a register block's absent role: a one-dimensional block (``regtile 1 i=8 _=1 1``, eight
#: rows of running values; ``regtile 1 _=1 j=32 4``, a row of 32).  Never a loop name (C iterators
#: named ``_`` get no block, :func:`polytile.c_optimiser.register_blocks.block_roles`).
NO_LOOP = "_"


@dataclass(frozen=True)
class RegTile(_Mark):
    """``regtile 1 i=8 j=32 16``: a register tile of ``mr x nr`` accumulators over loops ``rows`` x ``cols``.

    The mark sits on the outermost of ``reduction_loops`` loops that directly
    enclose the block loops; ``lanes`` is the SIMD width in elements.  One of
    ``rows`` and ``cols`` may be :data:`NO_LOOP` (its size then 1): a block
    along one loop, for a cell with one subscript (C statements only).
    """

    keyword: ClassVar[str] = "regtile"
    _arg = rf"{_INT} {_ID}={_INT} {_ID}={_INT} {_INT}"
    reduction_loops: int
    rows: str
    mr: int
    cols: str
    nr: int
    lanes: int

    def __post_init__(self) -> None:
        _count(self, "reduction_loops", 0)
        _name(self, "rows")
        _name(self, "cols")
        for f in ("mr", "nr", "lanes"):
            _count(self, f, 1)
        if (self.rows == NO_LOOP and self.mr != 1) or (self.cols == NO_LOOP and self.nr != 1) or \
                self.rows == self.cols:
            raise InternalError(f"RegTile: an absent role ({NO_LOOP}) has size 1, and the roles differ: {self.arg()!r}")

    def arg(self) -> str:
        return f"{self.reduction_loops} {self.rows}={self.mr} {self.cols}={self.nr} {self.lanes}"

    @classmethod
    def _from_groups(cls, groups):
        n, rows, mr, cols, nr, lanes = groups
        return cls(int(n), rows, int(mr), cols, int(nr), int(lanes))


@dataclass(frozen=True)
class Pack(_Mark):
    """``pack B 1 32``: copy ``array``'s footprint into a buffer blocked by ``block`` along axis ``dim``."""

    keyword: ClassVar[str] = "pack"
    _arg = rf"{_ID} {_INT} {_INT}"
    array: str
    dim: int
    block: int

    def __post_init__(self) -> None:
        _name(self, "array")
        _count(self, "dim", 0)
        _count(self, "block", 1)

    def arg(self) -> str:
        return f"{self.array} {self.dim} {self.block}"

    @classmethod
    def _from_groups(cls, groups):
        return cls(groups[0], int(groups[1]), int(groups[2]))


@dataclass(frozen=True)
class Local(_Mark):
    """``local T``: temporary ``array`` lives in a scalar inside the marked subtree (array contraction)."""

    keyword: ClassVar[str] = "local"
    _arg = _ID
    array: str

    def __post_init__(self) -> None:
        _name(self, "array")

    def arg(self) -> str:
        return self.array

    @classmethod
    def _from_groups(cls, groups):
        return cls(groups[0])


@dataclass(frozen=True)
class Dim(_Mark):
    """``dim 3``: the band right under this mark is schedule dimension ``index``.

    The code generator checks that isl emitted a loop for it; the loop marks
    above it are dropped when isl did not.
    """

    keyword: ClassVar[str] = "dim"
    _arg = _INT
    index: int

    def __post_init__(self) -> None:
        _count(self, "index", 0)

    def arg(self) -> str:
        return str(self.index)

    @classmethod
    def _from_groups(cls, groups):
        return cls(int(groups[0]))


#: Any mark.
Mark = Union[Parallel, Simd, Unroll, RegTile, Pack, Local, Dim]

#: Every mark kind, by keyword.
KINDS: Dict[str, Type[_Mark]] = {k.keyword: k for k in (Parallel, Simd, Unroll, RegTile, Pack, Local, Dim)}

#: The marks that decorate the next loop below them (pragmas), as opposed to marks that act where they are.
LOOP_MARKS = (Parallel, Simd, Unroll)

_PATTERNS = {kw: re.compile(kind._arg, re.ASCII) for kw, kind in KINDS.items()}


def _bad(text: str):
    kinds = ", ".join(KINDS)
    raise InternalError(f"unknown schedule-tree mark {text!r} (a mark is one of: {kinds}; see polytile/scheduling/marks.py)")


def encode(mark: Mark) -> str:
    """The mark's text in the isl tree: ``encode(Dim(3)) == "dim 3"``."""
    if type(mark) not in KINDS.values():
        raise InternalError(f"not a schedule-tree mark: {mark!r}")
    arg = mark.arg()
    return f"{mark.keyword} {arg}" if arg else mark.keyword


def decode(text: str) -> Mark:
    """The mark whose text is ``text`` (``decode("unroll 4") == Unroll(4)``); InternalError if there is none."""
    if not isinstance(text, str):
        raise InternalError(f"a mark's text is a string, got {text!r}")
    keyword, sep, arg = text.partition(" ")
    kind = KINDS.get(keyword)
    if kind is None:
        _bad(text)
    if not sep and kind in (Parallel, Simd):
        return kind()
    m = _PATTERNS[keyword].fullmatch(arg) if sep else None
    if m is None:
        _bad(text)
    try:
        mark = kind._from_groups(m.groups())
    except InternalError:  # fields out of range ("unroll 0", "parallel :C")
        _bad(text)
    if encode(mark) != text:  # e.g. "unroll 04", "parallel +:C," : not what encode writes
        _bad(text)
    return mark


__all__ = ["NO_LOOP", "Reduction", "Parallel", "Simd", "Unroll", "RegTile", "Pack", "Local", "Dim", "Mark", "KINDS",
           "LOOP_MARKS", "encode", "decode"]
