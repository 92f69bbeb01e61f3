"""Error classes.

Two families, as in Halide: *user* errors (``PolytileError`` and its
subclasses) are the user's to fix and carry a message that says how; an
``InternalError`` is polytile's bug.

The command line maps them to exit codes (see :func:`polytile.cli.main`):

====  =====================================================================
0     success
1     a user error: any ``PolytileError`` not listed below, a failed check
2     bad command-line usage (argparse and :class:`polytile.cli.UsageError`)
3     the environment, not the input: :class:`PolytileEnvironmentError`
      (:class:`ToolchainError` no/broken compiler, :class:`NoDeviceError`
      no GPU, :class:`CacheError` kernel cache unwritable or untrusted,
      :class:`ConfigError` a bad ``POLYTILE_*`` setting,
      :class:`MatplotlibMissingError` a figure asked for without matplotlib)
70    an internal error (a bug): one "this is a bug" line; the traceback
      only with ``-v`` or ``POLYTILE_DEBUG``
130   interrupted (Ctrl-C)
====  =====================================================================

Errors about the *values* given (a bad program, bad shapes, a bad schedule)
are also ``ValueError`` instances, as numpy users expect: ``except ValueError``
catches :class:`TileSyntaxError`, :class:`TileSemanticError`,
:class:`ShapeError`, :class:`CollisionError` and :class:`ScheduleError`.

Errors that point at source text carry a :class:`SourceLocation` and render
the offending line with a caret::

    matmul.tile:2:27: error: unknown tensor 'Q'
      C[i, j : M, N] = +(A[i, k] * Q[k, j]);
                                   ^
"""
from __future__ import annotations

import contextlib
import sys
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


#: What a generated kernel entry returns when it cannot allocate its packing buffers (ENOMEM): the C and
#: LLVM code generators return it, the runtime turns it into an error (runtime.loader.raise_for_return).
ENTRY_ENOMEM = 12


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


class OptionError(PolytileError, ValueError):
    """An argument value polytile does not accept: an unknown target or fusion choice, a negative count."""


class UnknownOptionError(PolytileError, TypeError):
    """A keyword argument no polytile function takes (Python's own calls raise TypeError for these)."""


class MissingFileError(PolytileError, FileNotFoundError):
    """A file the caller named (a Tile program, a schedule) does not exist, or is not a file."""


class TileSyntaxError(PolytileError, ValueError):
    """The text is not a Tile program (lexing or parsing failed)."""


class TileSemanticError(PolytileError, ValueError):
    """The program parses but means nothing: unknown names, double assignment..."""


class NonAffineError(TileSemanticError):
    """An index expression is not affine in the index variables."""


class ShapeError(PolytileError, ValueError):
    """Arrays given to a kernel do not fit its header (rank, size, dtype, count)."""


class CollisionError(PolytileError, ValueError):
    """An ``=`` contraction writes some output cell more than once."""


class ScheduleError(PolytileError, ValueError):
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


class PolytileEnvironmentError(PolytileError):
    """The machine, not the input, is the problem: a missing or broken compiler,
    no GPU, an unusable kernel cache, a bad ``POLYTILE_*`` setting (CLI exit 3)."""


class ToolchainError(PolytileEnvironmentError):
    """The C or CUDA compiler is missing, cannot be run, or does not work."""


class NoDeviceError(PolytileEnvironmentError):
    """A kernel needs a device (a CUDA GPU) that this machine does not have."""


class CacheError(PolytileEnvironmentError):
    """The kernel cache directory cannot be used: unwritable, or not trusted
    (owned by another user, or writable by group/others)."""


class ConfigError(PolytileEnvironmentError, ValueError):
    """A setting has a bad value (a ``POLYTILE_*`` environment variable, or a
    value given to :func:`polytile.config.override`)."""


class PlotError(PolytileError, ValueError):
    """A figure cannot be drawn from what was asked: too many points, an unknown axis or statement,
    a file name whose suffix is not a figure format (``polytile.plots``)."""


class MatplotlibMissingError(PolytileEnvironmentError, ImportError):
    """A figure was asked for but matplotlib, an optional extra, is not installed (CLI exit 3: the
    environment, like a missing C compiler).  The message says how to install it."""


class CacheWarning(UserWarning):
    """A damaged or foreign kernel-cache entry was found and discarded (it is rebuilt)."""


@contextlib.contextmanager
def recursion_room(limit: int = 20000):
    """Raise Python's recursion limit while a pass runs over deep expression trees.

    Every pass over a Tile expression recurses; the parser bounds the depth
    (``MAX_DEPTH`` nesting levels, ``MAX_TERMS`` operations in a row) so that
    a deep but legal program is compiled, and a deeper one is a located
    error, never a ``RecursionError``.  Python 3.11 keeps pure-Python
    recursion off the C stack, so this limit is safe.

        >>> with recursion_room():
        ...     pass
    """
    old = sys.getrecursionlimit()
    if old < limit:
        sys.setrecursionlimit(limit)
    try:
        yield
    finally:
        if old < limit:
            sys.setrecursionlimit(old)
