"""The options several commands share: the help formatter, -v, and the timing options of run and compare."""
from __future__ import annotations

import argparse

from .argtypes import nonnegative_int, positive_int


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Keep the hand-formatted epilogs; show defaults where help text asks for them."""


def _common(p: argparse.ArgumentParser, *, sub: bool) -> None:
    # -v is accepted before and after the subcommand.  On subparsers its default
    # is SUPPRESS, or the subparser's default would overwrite a top-level -v.
    p.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS if sub else 0,
                   help="print the pipeline's stages (debug level 1; -vv IR and schedules, -vvv also source)")


def _timing_options(p) -> None:
    """--repeat, --warmup and --seed, as `run` and `compare` take them."""
    p.add_argument("--repeat", type=positive_int, default=10, metavar="N", help="timed runs (default: 10)")
    p.add_argument("--warmup", type=nonnegative_int, default=2, metavar="N", help="untimed runs first (default: 2)")
    p.add_argument("--seed", type=nonnegative_int, default=0, metavar="S",
                   help="random seed for the inputs (default: 0)")
