"""The ``polytile`` argument parser: the top-level options and epilog, and every subcommand in help order.

Each command module defines its own subparser next to its handler; this module only lists them.
"""
from __future__ import annotations

import argparse

from ..version import __version__
from . import compare_command, compile_run, draw_command, model_commands, opt_command, roofline_command, tool_commands
from . import examples as examples_cmd
from .inputs import PROG
from .options import _Formatter, _common


_MAIN_EPILOG = """\
examples:
  polytile compile examples/matmul.tile --dims M=64,N=48,K=32
  polytile run examples/conv2d.tile --check
  polytile show examples/softmax.tile --dims M=4,N=5
  polytile deps examples/matmul.tile --dims M=8,N=8,K=8
  polytile schedule examples/matmul.tile --apply steps.json -o sched.json
  polytile run examples/matmul.tile --schedule sched.json --check
  polytile compare examples/matmul.tile --dims M=256,N=256,K=256 --tile 32,64 --fusion smart
  polytile opt tests/c_kernels/jacobi-2d.c -o jacobi-2d.opt.c        # C: also show, deps, schedule, compare
  polytile draw examples/matmul.tile --dims M=8,N=8,K=8 -o mm.png    # figures: also roofline, compare/tune --plot
  polytile cache verify                                             # re-hash cached kernels, drop bad ones

Sizes: --dims gives every dimension name of the inputs' headers; without it
the first `// dims:` comment line of the file is used.  POLYTILE_DEBUG=1..3
(or -v, -vv, -vvv) prints the pipeline's stages.  Exit codes: 0 ok, 1 error or
failed check, 2 bad arguments, 3 the environment (no compiler, no GPU, an
untrusted or unwritable kernel cache, a bad POLYTILE_* setting), 70 a bug in
polytile (-v shows the traceback), 130 interrupted.  `polytile cache info`
shows the kernel cache.
"""


class ArgumentsRejected(SystemExit):
    """argparse's exit for a bad command line (status 2, the message already on stderr), carrying the
    message, so that ``--json`` can repeat it in its error document."""

    def __init__(self, code, message: str):
        super().__init__(code)
        self.message = message


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose errors raise :class:`ArgumentsRejected` (the subcommands' parsers are
    made of the same class)."""

    def error(self, message: str):
        try:
            super().error(message)
        except SystemExit as exc:
            raise ArgumentsRejected(exc.code, f"{self.prog}: {message}") from None


def build_parser() -> argparse.ArgumentParser:
    """The whole command line's parser.

    >>> build_parser().parse_args(["hw", "list", "--json"]).json
    True
    """
    parser = _Parser(
        prog=PROG, formatter_class=_Formatter, epilog=_MAIN_EPILOG,
        description="polytile: a polyhedral loop optimizer.  Compiles Tile programs (tensor contractions "
                    "and elementwise code) through isl into OpenMP C, runs them, checks them against a "
                    "reference interpreter, and shows the polyhedral model in between.")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    _common(parser, sub=False)
    subs = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")

    compile_run.add_compile_parser(subs, _Formatter, _common)
    compile_run.add_run_parser(subs, _Formatter, _common)
    model_commands.add_show_parser(subs, _Formatter, _common)
    model_commands.add_deps_parser(subs, _Formatter, _common)
    model_commands.add_schedule_parser(subs, _Formatter, _common)
    compare_command.add_parser(subs, _Formatter, _common)
    opt_command.add_parser(subs, _Formatter, _common)

    from .. import tune as tune_mod

    p = subs.add_parser("tune", formatter_class=argparse.RawDescriptionHelpFormatter,
                        help="search tile sizes, loop orders and register blocks by measurement",
                        description="Rank the blocked schedules of every contraction with the cost model, measure "
                                    "the best ones, then anneal around the fastest within a time budget.  Every "
                                    "candidate is checked against the reference interpreter once; results are "
                                    "cached, so a second run is instant.")
    tune_mod.add_arguments(p)
    _common(p, sub=True)
    p.set_defaults(handler=tune_mod.main_tune)

    draw_command.add_parser(subs, _Formatter, _common)
    roofline_command.add_parser(subs, _Formatter, _common)
    tool_commands.add_cache_parser(subs, argparse.RawDescriptionHelpFormatter, _common)
    tool_commands.add_hw_parser(subs, argparse.RawDescriptionHelpFormatter, _common)
    examples_cmd.add_parser(subs, _Formatter, _common)
    return parser
