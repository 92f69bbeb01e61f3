"""argparse value types shared by the command-line entry points (``cli`` and ``tune``'s options).

>>> positive_int("3"), nonnegative_int("0")
(3, 0)
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from ..errors import PolytileError


def positive_int(text: str) -> int:
    """An integer >= 1, or an argparse error naming what was given."""
    return _int_at_least(text, 1, "a positive integer")


def nonnegative_int(text: str) -> int:
    """An integer >= 0, or an argparse error naming what was given."""
    return _int_at_least(text, 0, "an integer >= 0")


def arg_type(parse, what: str):
    """Wrap a parser so argparse reports its ValueError/PolytileError as ``argument --x: ...`` (exit 2).

    >>> arg_type(int, "count")("7")
    7
    """

    def convert(text: str):
        try:
            return parse(text)
        except (ValueError, PolytileError) as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = what  # argparse names the type in some messages
    return convert


def _int_at_least(text: str, low: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    return value


def figure_path(text: str):
    """A file name to draw a figure to: ``.png``, ``.svg`` or ``.pdf`` (:data:`polytile.plots.FORMATS`), checked
    when the command line is parsed, before any work (an argparse error, exit 2, otherwise).

    >>> figure_path("mm.svg").name
    'mm.svg'
    """
    from ..plots._mpl import check_path  # on use: the plots package reads isl; `polytile --help` must not

    return arg_type(check_path, "figure")(text)


def same_file(a, b) -> bool:
    """``a`` and ``b`` name one file (through symlinks, relative paths or hard links).

    >>> same_file("x.tile", "./x.tile")
    True
    """
    a, b = Path(a), Path(b)
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    except OSError:
        pass
    return a.resolve() == b.resolve()
