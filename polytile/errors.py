"""Error classes.

Two families, as in Halide: *user* errors (``PolytileError`` and its
subclasses) are the user's to fix and carry a message that says how; an
``InternalError`` is polytile's bug.  The CLI prints a user error as one clean
message and exits 1; an internal error keeps its traceback.

Errors that point at source text carry a :class:`SourceLocation` and render
the offending line with a caret::

    matmul.tile:2:27: error: unknown tensor 'Q'
      C[i, j : M, N] = +(A[i, k] * Q[k, j]);
                                   ^
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class SourceLocation:
    """A point in a source file: 1-based line and column, plus the line's text."""

    file: str
    line: int
    col: int
    text: str = ""  # the whole source line, for the caret display

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"

    def caret(self) -> str:
        """The source line and a caret under the column (empty without text)."""
        if not self.text:
            return ""
        line = self.text.rstrip("\n")
        # Keep tabs so the caret lines up under the same characters.
        pad = "".join(ch if ch == "\t" else " " for ch in line[: self.col - 1])
        return f"  {line}\n  {pad}^"


class PolytileError(Exception):
    """Base class of every error the user can fix (bad input, bad options)."""

    def __init__(self, message: str, loc: Optional[SourceLocation] = None):
        self.message = message
        self.loc = loc
        super().__init__(self.render())

    @property
    def line(self) -> Optional[int]:
        return self.loc.line if self.loc else None

    @property
    def col(self) -> Optional[int]:
        return self.loc.col if self.loc else None

    def render(self) -> str:
        if self.loc is None:
            return self.message
        text = f"{self.loc}: error: {self.message}"
        caret = self.loc.caret()
        return f"{text}\n{caret}" if caret else text


class TileSyntaxError(PolytileError):
    """The text is not a Tile program (lexing or parsing failed)."""


class TileSemanticError(PolytileError):
    """The program parses but means nothing: unknown names, double assignment..."""


class NonAffineError(TileSemanticError):
    """An index expression is not affine in the index variables."""


class ShapeError(PolytileError):
    """Arrays given to a kernel do not fit its header (rank, size, dtype, count)."""


class CollisionError(PolytileError):
    """An ``=`` contraction writes some output cell more than once."""


class ScheduleError(PolytileError):
    """A schedule or transformation request is malformed."""


class IllegalSchedule(ScheduleError):
    """A transformation would violate a dependence."""


class CompilerError(PolytileError):
    """The C (or CUDA) compiler rejected generated code."""

    def __init__(self, message: str, source_path: Optional[str] = None, output: str = ""):
        self.source_path = source_path
        self.output = output
        full = message
        if source_path:
            full += f"\n  generated source kept at: {source_path}"
        if output:
            full += "\n  compiler output:\n" + "\n".join("    " + ln for ln in output.rstrip().splitlines())
        super().__init__(full)


class InternalError(Exception):
    """A bug in polytile itself: please report it with the program that caused it."""
