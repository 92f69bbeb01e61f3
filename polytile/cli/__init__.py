"""The ``polytile`` command line: compile, run (and check), inspect, schedule and compare Tile programs.

    polytile compile examples/matmul.tile --dims M=64,N=48,K=32        # generated OpenMP C
    polytile run examples/conv2d.tile --check                         # sizes from the file's `// dims:` line
    polytile show examples/softmax.tile --dims M=4,N=5                 # IR, Scop, dependences, schedule tree
    polytile deps examples/matmul.tile                                # the dependences, one relation at a time
    polytile schedule examples/matmul.tile --apply steps.json -o s.json   # transform, check, save a schedule
    polytile run examples/matmul.tile --schedule s.json --check       # ... and use it
    polytile compare examples/matmul.tile --tile 32,64 --fusion smart # legality, correctness, speed side by side
    polytile compare tests/c_kernels/gemm.c --dims ni=512,nj=512,nk=512   # C: the file vs polytile opt, bitwise
    polytile draw examples/matmul.tile --dims M=8,N=8,K=8 -o mm.png    # the iteration space, as a figure
    polytile cache verify                                             # re-hash cached kernels, drop bad ones
  polytile examples --copy my-examples                              # the shipped examples, to edit and run

Every subcommand goes through :mod:`polytile.pipeline` (``load_program``,
``shapes_from_dims``, ``parse_dims``, ``schedule``, ``compile`` ->
``Kernel.specialize_shapes``, ``run_specialization``) or :mod:`polytile.compare`;
C files go through :mod:`polytile.c_optimiser` and :mod:`polytile.c_runner` (builds
and calls for ``compare``).  The commands only turn command-line text into those
calls and their results into text.  The pipeline is imported lazily so that
``polytile --help`` does not pay for islpy.

The package: a command module holds each command's subparser next to its
handler -- :mod:`.compile_run` (compile, run), :mod:`.model_commands` (show,
deps, schedule, each with its C half), :mod:`.compare_command`,
:mod:`.opt_command`, :mod:`.draw_command`, :mod:`.roofline_command` (figures, drawn by
:mod:`polytile.plots`), :mod:`.tool_commands` (cache, hw), :mod:`.examples`;
:mod:`.c_files` and :mod:`.options` hold what they share, :mod:`.inputs` what a
command runs on (sizes, dtypes, schedule files), :mod:`.json_output` the
``--json`` envelope and error documents (docs/json-output.md), :mod:`.parser`
lists them (:func:`build_parser`).  This module is the entry point, :func:`main`, and its
error contract:

Exit codes: 0 success, 1 a user error (any :class:`~polytile.errors.PolytileError`,
a failed ``--check``, a missing input file), 2 bad command-line arguments, 3 the
environment (:class:`~polytile.errors.PolytileEnvironmentError`: no compiler, no
GPU, an untrusted or unwritable kernel cache, a bad ``POLYTILE_*`` setting), 70
an internal error (a bug: one line, the traceback only with ``-v`` or
``POLYTILE_DEBUG``), 130 interrupted (Ctrl-C, at any moment, no traceback).
"""
from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path
from typing import Optional, Sequence

from .. import compare as compare_mod
from ..compare import COUNT_SCAN_LIMIT, check_output  # noqa: F401  (check_output: `run --check`'s rule, for tests)
from ..config import get_config, override
from ..errors import PolytileEnvironmentError, PolytileError
from .compare_command import cmd_compare  # noqa: F401  (the handlers, re-exported)
from .compile_run import cmd_compile, cmd_run, count_flops  # noqa: F401
from .inputs import (  # noqa: F401  (re-exported: what a command runs on)
    DTYPES, FUSION, PROG, FileHints, ScheduleFile, Target, UsageError, check_memory, compile_options,
    load_schedule_file, make_inputs, parse_dims, parse_dtypes, parse_shapes, read_hints, resolve,
)
from .model_commands import DEP_RELATIONS, cmd_deps, cmd_schedule, cmd_show  # noqa: F401
from .opt_command import cmd_opt  # noqa: F401
from . import json_output
from .argtypes import same_file
from .parser import ArgumentsRejected, build_parser
from .tool_commands import cmd_cache, cmd_hw  # noqa: F401


def count_points(dom) -> Optional[int]:
    """Points of an isl Set, or None past :data:`COUNT_SCAN_LIMIT` (see :func:`polytile.compare.count_points`)."""
    # The limit is read here, at call time, so it stays adjustable on this module.
    return compare_mod.count_points(dom, COUNT_SCAN_LIMIT)


def _exit_code(code) -> int:
    # SystemExit carries None (success), an int, or a message (failure).
    if code is None:
        return 0
    return code if isinstance(code, int) else 1


#: Exit codes (the error contract; see :mod:`polytile.errors`).
EXIT_OK, EXIT_USER, EXIT_USAGE, EXIT_ENVIRONMENT, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 70, 130


def _debug_requested(verbose: int) -> bool:
    """-v or POLYTILE_DEBUG >= 1 (read leniently: a bad value must not hide the real error)."""
    if verbose:
        return True
    text = os.environ.get("POLYTILE_DEBUG", "").strip()
    return text.isdigit() and int(text) > 0


def check_output_path(path, option: str = "-o") -> Path:
    """``path`` if a file can be written there, else a PolytileError naming ``option`` -- called before
    any work starts, so a typo in -o does not cost a whole run (and its results).

    >>> check_output_path("/no/such/dir/r.csv")
    Traceback (most recent call last):
    ...
    polytile.errors.PolytileError: cannot write /no/such/dir/r.csv (-o): the directory /no/such/dir does not exist
    """
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise PolytileError(f"cannot write {p} ({option}): is a directory; name a file")
    if not parent.exists():
        raise PolytileError(f"cannot write {p} ({option}): the directory {parent} does not exist")
    if not parent.is_dir():
        raise PolytileError(f"cannot write {p} ({option}): {parent} is not a directory")
    if p.exists() and not os.access(p, os.W_OK):
        raise PolytileError(f"cannot write {p} ({option}): the file is not writable")
    if not p.exists() and not os.access(parent, os.W_OK | os.X_OK):
        raise PolytileError(f"cannot write {p} ({option}): cannot create files in {parent} (permission denied)")
    return p


#: Options of any command that name a file the command writes: (attribute, option text).
_OUTPUT_OPTIONS = (("output", "-o"), ("json_out", "--json"), ("plot", "--plot"))


#: Options of any command that name files the command reads: no output may be one of them.
_INPUT_OPTIONS = ("file", "schedule", "schedules", "apply", "hardware", "kernel", "measured")


def _check_outputs(args) -> None:
    """Every output option names a writable file that is not one of the command's inputs: ``polytile
    compile mm.tile -o mm.tile`` replaced the program with its C.  (``opt`` checks its own -o, which
    --in-place may point at the input.)"""
    inputs = []  # (option attribute, path)
    for attr in _INPUT_OPTIONS:
        value = getattr(args, attr, None)
        for v in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(v, (str, os.PathLike)) and os.path.isfile(v):
                inputs.append((attr, v))
    for attr, option in _OUTPUT_OPTIONS:
        value = getattr(args, attr, None)
        if isinstance(value, (str, os.PathLike)) and str(value) != "-":
            check_output_path(value, option)
            opt_checks_it = getattr(args, "in_place", None) is not None and attr == "output"
            for source, x in inputs:
                if opt_checks_it and source == "file":
                    continue  # opt's own check: its input with --in-place, else a message naming --in-place
                if same_file(value, x):
                    raise PolytileError(f"cannot write {value} ({option}): it is the input file {x}, which "
                                        f"would be lost; write elsewhere")


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line; returns the exit status (the console script passes it to sys.exit).

    Exit codes: 0 success; 1 a user error (a PolytileError, a failed check, a
    missing input file); 2 bad usage; 3 the environment (no compiler, no GPU,
    untrusted or unwritable cache, bad POLYTILE_* setting); 70 an internal
    error, reported in one line (the traceback with -v or POLYTILE_DEBUG); 130
    interrupted (Ctrl-C), at any moment, without a traceback.  With ``--json``
    (run, show, deps, hw, opt) a failure also prints a JSON error document on
    stdout (docs/json-output.md).

    >>> main(["hw", "list"])  # doctest: +ELLIPSIS
    host
    ...
    0
    """
    interrupted, restore = _watch_interrupts()
    session = json_output.Session()
    try:
        code = _main(argv, session)
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    finally:
        restore()
    if interrupted() and code != EXIT_OK:
        # A Ctrl-C that reached C code (isl) can surface as that library's error instead of
        # KeyboardInterrupt; whatever error followed it, the user interrupted the run.
        if code != EXIT_INTERRUPTED:
            _print_quietly(f"{PROG}: interrupted")
        code = EXIT_INTERRUPTED
    session.finish(code)
    return code


def _watch_interrupts():
    """Record every SIGINT while the command runs (still raising KeyboardInterrupt).

    Returns (whether one came, a function restoring the previous handler).
    """
    seen = [False]
    if threading.current_thread() is not threading.main_thread():
        return (lambda: False), (lambda: None)
    previous = signal.getsignal(signal.SIGINT)

    def handler(signum, frame):
        seen[0] = True
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, handler)
    return (lambda: seen[0]), (lambda: signal.signal(signal.SIGINT, previous))


def _main(argv: Optional[Sequence[str]], session: json_output.Session) -> int:
    sub_prog = PROG
    verbose = 0
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # --help, --version, or an argparse error (already printed)
            command = json_output.command_of(argv) if isinstance(exc, ArgumentsRejected) else None
            if command is not None:
                session.enable(command)
                session.failed(exc, exc.message, "ArgumentError")  # as argparse calls it
            return _exit_code(exc.code)
        if args.command is None:
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        sub_prog = f"{PROG} {args.command}"
        verbose = args.verbose or 0
        if getattr(args, "json", False) is True:  # (tune's --json names a file: not this)
            session.enable(args.command)
        level = max(get_config().debug, min(verbose, 3))  # a bad POLYTILE_DEBUG raises ConfigError here
        _check_outputs(args)
        with override(debug=level), session.capturing():
            return args.handler(args)
    except PolytileEnvironmentError as err:
        session.failed(err)
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return EXIT_ENVIRONMENT
    except PolytileError as err:
        session.failed(err)
        text = str(err)
        # A located error already reads "file:line:col: error: ..."; don't stack prefixes.
        print(text if err.loc is not None else f"{PROG}: error: {text}", file=sys.stderr)
        return EXIT_USER
    except UsageError as err:
        session.failed(err, f"{sub_prog}: {err}")
        print(f"{sub_prog}: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        _print_quietly(f"{PROG}: interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # `polytile compile ... | head`: the reader left; silence Python's
        # second complaint when it flushes stdout at exit.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        session.emitted = True  # nobody is reading stdout any more: no error document either
        return EXIT_USER
    except MemoryError as exc:
        message = "out of memory; try smaller sizes (--dims)"
        session.failed(exc, message)
        print(f"{PROG}: error: {message}", file=sys.stderr)
        return EXIT_USER
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError) as exc:
        if exc.filename is None:
            return _internal_error(exc, verbose, session)
        # A file the user named (or that should be there) is missing or unreadable.
        name = exc.filename if exc.filename2 is None else f"{exc.filename} -> {exc.filename2}"
        session.failed(exc, f"{name}: {exc.strerror or exc}")
        print(f"{PROG}: error: {name}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USER
    except Exception as exc:  # noqa: BLE001 - the last line of defence: no traceback for users
        return _internal_error(exc, verbose, session)


def _print_quietly(text: str) -> None:
    try:
        print(text, file=sys.stderr, flush=True)
    except (OSError, ValueError, KeyboardInterrupt):
        pass


def _internal_error(exc: BaseException, verbose: int, session: Optional[json_output.Session] = None) -> int:
    """Report a bug: one line, or the traceback too when debugging was asked for."""
    import traceback

    if _debug_requested(verbose):
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    first = (str(exc).strip().splitlines() or [""])[0][:300]
    hint = "" if _debug_requested(verbose) else "; run with -v (or POLYTILE_DEBUG=1) to see the traceback"
    message = (f"internal error: {type(exc).__name__}{': ' + first if first else ''} -- this is a bug in "
               f"polytile, please report it with the command line and input file")
    if session is not None:
        session.failed(exc, message)
    print(f"{PROG}: {message}{hint}", file=sys.stderr)
    return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover - `python -m polytile` goes through __main__.py
    sys.exit(main())
