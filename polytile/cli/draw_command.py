"""``polytile draw``: one statement's iteration space under a schedule, as a figure -- for a Tile program
(the schedule `polytile compile` runs, a saved one, isl's with --fusion) or a #pragma scop region of a
C file (the schedule `polytile opt` makes, or the file's own order).

The schedule is built exactly as ``polytile schedule`` builds it (Tile: :func:`.inputs.compile_options`;
C: :func:`polytile.c_runner.optimise`), so the figure shows what that command prints; the drawing is
:mod:`polytile.plots`.
"""
from __future__ import annotations

import re
from typing import Dict, List

from ..errors import PolytileError
from .argtypes import arg_type, figure_path, positive_int
from .c_files import (
    _C_PREPROCESSOR, _c_command, _c_options, _c_params, _c_regions, _c_where, _cpp_args, _is_c, _pure,
    _reject_c_options, _reject_tile_options,
)
from .inputs import FUSION, UsageError, _items, _note, _shape_options, compile_options, load_schedule_file, resolve


_DRAW_EPILOG = """\
examples:
  polytile draw examples/matmul.tile --dims M=8,N=8,K=8 --schedule tile4.json -o mm.png
  polytile draw examples/matmul.tile --dims M=8,N=8,K=8 --axes i,k --slice j=2 -o mm-ik.svg
  polytile draw examples/cumsum.tile --dims N=12 -o cumsum.png
  polytile draw examples/matmul_bias_relu.tile --dims M=8,N=6,K=4 --fusion max --stmt S0 -o fused.png
  polytile draw tests/c_kernels/jacobi-2d.c --dims tsteps=16,n=34 -o jacobi.png
  polytile draw tests/c_kernels/jacobi-2d.c --dims tsteps=6,n=10 --original -o jacobi-original.png

where tile4.json holds [{"op": "tile", "stmt": "C", "sizes": {"i": 4, "j": 4}}]
(steps replayed on the default schedule, as `polytile schedule --apply`; or a
schedule saved with `polytile schedule -o`).

What is drawn: one dot per instance of the statement (--stmt; default the
first contraction update, else the first statement with the most loops),
along two of its iterators (--axes; default its two outermost), the others
fixed (--slice; unnamed ones at their smallest value).  The colour is the
order the schedule runs the dots in.  Tiles (loops named *_t by tiling) are
outlined and numbered in the order they start; when the parallel loop is a
tile loop, tiles drawn in one colour run at the same time on different
threads.  Grey arcs join instances the parallel loop runs at the same time
(the r-th instance of each of its iterations, if the threads keep pace).
Red arrows are flow dependences between the drawn instances (the last write
before each read), also through one other statement (a stencil's sweeps).

The schedule is the one `polytile schedule` prints with the same options:
Tile programs the default schedule blocked for --hardware (host; 'none' or
--no-tile: untiled), or --schedule, or isl's with --fusion; C files the one
`polytile opt` makes (--fusion, --no-tile, --no-parallel, --hardware,
--schedule as for opt).  --original draws the program's own order (no
rescheduling, tiling or parallel marks).  A C region's parameters need
values (--dims).  At most --max-points dots (4096): use small sizes.
"""


def add_parser(subs, formatter, common) -> None:
    """Register ``polytile draw`` on the subcommand parser."""
    p = subs.add_parser("draw", formatter_class=formatter, epilog=_DRAW_EPILOG,
                        help="draw a statement's iteration space: execution order, tiles, parallel wavefronts, "
                             "dependences",
                        description="Draw the iteration space of one statement of a Tile program or of a C file's "
                                    "#pragma scop region under a schedule (what `polytile schedule` prints with the "
                                    "same options): a dot per instance coloured by execution order, the tiles "
                                    "outlined, the instances a parallel loop runs together, the dependences as "
                                    "arrows.  PNG, SVG or PDF by the suffix of -o; needs matplotlib "
                                    "(pip install -e '.[plots]').")
    p.add_argument("file", metavar="FILE.tile|FILE.c", help="the Tile program, or a C file with #pragma scop regions")
    p.add_argument("-o", "--output", type=figure_path, required=True, metavar="FIG.png|.svg|.pdf",
                   help="the figure to write")
    g = p.add_argument_group("what to draw")
    g.add_argument("--stmt", metavar="NAME",
                   help="the statement: S0, E1, ... (see `polytile deps`) or a Tile tensor name (its update)")
    g.add_argument("--axes", type=arg_type(_axes, "axes"), metavar="I,J",
                   help="the one or two iterators to draw along (default: the statement's two outermost)")
    g.add_argument("--slice", type=arg_type(_slice, "slice"), action="append", metavar="K=0",
                   help="fix iterators not drawn, e.g. k=3 (repeatable; default: each at its smallest value)")
    g.add_argument("--max-points", type=positive_int, default=None, metavar="N",
                   help="refuse to draw more dots than this (default: 4096)")
    g.add_argument("--region", type=positive_int, default=1, metavar="N",
                   help="C: the N-th #pragma scop region of the file (default: 1)")
    s = p.add_argument_group("schedule")
    s.add_argument("--schedule", metavar="SCHED.json",
                   help="a saved schedule or a JSON list of steps (C: replayed on each region, as opt --schedule)")
    s.add_argument("--fusion", choices=FUSION, help="isl's scheduler with this fusion choice (C: default smart)")
    s.add_argument("--hardware", default=None, metavar="NAME|FILE",
                   help="descriptor guiding the automatic tiling (default: host; Tile: 'none' for no tiling)")
    s.add_argument("--no-tile", action="store_true", help="no automatic tiling")
    s.add_argument("--no-parallel", action="store_true", help="no parallel marks")
    s.add_argument("--original", action="store_true",
                   help="the program's own order: no rescheduling, tiling or parallel marks")
    _c_options(p)
    _shape_options(p)
    common(p, sub=True)
    p.set_defaults(handler=cmd_draw)


_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _axes(text: str) -> List[str]:
    names = _items(text.replace(",", " "))
    if not 1 <= len(names) <= 2 or not all(_NAME.match(n) for n in names):
        raise ValueError(f"expected one or two iterator names, e.g. i,j; got {text!r}")
    return names


def _slice(text: str) -> Dict[str, int]:
    out: Dict[str, int] = {}
    for item in _items(text.replace(",", " ")):
        name, sep, value = item.partition("=")
        if not sep or not _NAME.match(name) or not re.fullmatch(r"-?[0-9]+", value):
            raise ValueError(f"bad item {item!r}: expected NAME=INTEGER, e.g. k=3")
        out[name] = int(value)
    if not out:
        raise ValueError("expected NAME=INTEGER[,NAME=INTEGER...], e.g. k=3")
    return out


def _draw(args, schedule, where: str) -> int:
    from .. import plots
    from ..plots.space import MAX_POINTS

    fixed: Dict[str, int] = {}
    for item in args.slice or ():
        fixed.update(item)
    space = plots.statement_space(schedule, args.stmt, axes=args.axes, fixed=fixed,
                                  max_points=args.max_points or MAX_POINTS)
    plots.draw_space(space, path=args.output)
    print(f"{where}: {space.summary()}")
    for note in space.notes:
        print(f"  {note}")
    print(f"wrote {args.output}")
    return 0


def _check_original(args) -> None:
    if args.original:
        clash = [flag for flag, on in (("--schedule", args.schedule), ("--fusion", args.fusion),
                                       ("--hardware", args.hardware), ("--no-tile", args.no_tile))
                 if on]
        if clash:
            raise UsageError(f"--original draws the program's own order; drop {', '.join(clash)}")


def cmd_draw(args) -> int:
    from .. import plots

    plots.require()  # before any scheduling: a missing matplotlib costs nothing but the message
    _check_original(args)
    if _is_c(args):
        return _draw_c(args)
    _reject_c_options(args, "draw", ("function", "assume_no_alias", "reassociate") + _C_PREPROCESSOR)
    if args.region != 1:
        raise UsageError("--region applies to C files only (a Tile program is one region)")
    from .. import compare as compare_mod
    from .. import pipeline

    saved = load_schedule_file(args.schedule) if args.schedule else None
    target = resolve(args, saved=saved)
    shapes = dict(zip(target.program.input_names, target.shapes))
    if args.original:
        sched = pipeline.schedule(target.program, target.size_values, shapes=shapes, dtypes=list(target.dtypes),
                                  steps=compare_mod.base_steps(parallel=False))
    else:
        # The options `polytile schedule` (and compile) would be given: the figure shows that schedule.
        options = compile_options(target, args, saved)
        sched = pipeline.schedule(target.program, target.size_values, shapes=shapes, dtypes=list(target.dtypes),
                                  steps=options.get("schedule"), fusion=options.get("fusion"),
                                  parallel=options.get("parallel", True), hardware=options.get("hardware", "host"))
    dims = ", ".join(f"{k}={v}" for k, v in target.dims.items())
    return _draw(args, sched, f"{target.path}" + (f" ({dims})" if dims else ""))


@_c_command
def _draw_c(args) -> int:
    """`polytile draw FILE.c`: a statement of the --region-th region, under opt's schedule or the file's order."""
    _reject_tile_options(args, "draw", ("shape", "dtype", "dtypes"))
    # The region as the frontend reads it first: a missing parameter value is reported before opt runs.
    cs = _pick(args, _c_regions(args))
    if cs.skipped or cs.scop is None:
        raise PolytileError(f"{_c_where(args.file, cs)} is not modelled: {cs.reason}")
    if cs.params:
        raise PolytileError(f"{_c_where(args.file, cs)} has parameters {', '.join(cs.params)}: give them small "
                            f"values to draw it, e.g. --dims {','.join(f'{p}=8' for p in cs.params)}")
    if args.original:
        from .. import deps as deps_mod
        from ..scheduling import initial

        sched = initial(cs.scop, deps_mod.compute(cs.scop))
    else:
        from .. import c_runner

        _, results = c_runner.optimise(
            args.file, function=args.function, tile=not args.no_tile, parallel=not args.no_parallel,
            fusion=args.fusion or "smart", hardware=args.hardware or "host", params=_c_params(args) or None,
            schedule=args.schedule, skip_nonaffine=True, assume_no_alias=args.assume_no_alias,
            reassociate=args.reassociate, pure=_pure(args), cpp_args=_cpp_args(args))
        r = results[args.region - 1]
        if r.schedule is None:
            raise PolytileError(f"{_c_where(args.file, cs)} is left as written by polytile opt ("
                                + ("; ".join(r.notes) or "not modelled").splitlines()[0]
                                + "); draw the file's own order with --original")
        sched = r.schedule
    return _draw(args, sched, _c_where(args.file, cs))


def _pick(args, items):
    if not items:
        raise PolytileError(f"{args.file}: no #pragma scop region to draw")
    if args.region > len(items):
        raise UsageError(f"--region {args.region}: {args.file} has {len(items)} region(s)")
    if len(items) > 1:
        _note(f"{args.file} has {len(items)} regions; drawing region {args.region} (--region N for another)")
    return items[args.region - 1]
