"""``polytile compare``: candidate schedules of a Tile program, or `polytile opt` variants of a C file against
the file as written, checked, run and timed side by side in one table (-o: CSV or JSON with provenance).

The measuring is :mod:`polytile.compare` (Tile) and :mod:`polytile.c_runner` (C); this module turns the
command line into candidates and the results into text.
"""
from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from .. import compare as compare_mod
from .. import executor as executor_mod
from ..errors import PolytileError
from .argtypes import arg_type, figure_path
from .c_files import (
    _C_PREPROCESSOR, _c_command, _c_options, _c_params, _cpp_args, _is_c, _pure, _reject_c_options,
    _reject_tile_options,
)
from .inputs import (
    FUSION, UsageError, _items, _note, _recipe, _shape_options, _signature, load_schedule_file, resolve,
)
from .options import _timing_options


_COMPARE_EPILOG = """\
examples:
  polytile compare examples/matmul.tile --dims M=256,N=256,K=256 --tile 16,32,64
  polytile compare examples/matmul_bias_relu.tile --fusion none,smart,max -o fusion.csv
  polytile compare examples/matmul.tile --schedules ikj.json tiled.json --repeat 20 -o mm.json
  polytile compare examples/matmul.tile --dims M=1024,N=1024,K=1024 --tile 16,32,64,128 --workers local:2

Candidates, in this order: "default" (what compile does), each --schedules
file (named after it), "isl-<choice>" for each --fusion choice (isl's
scheduler, then auto_parallel), and "tile<T>" for each --tile size (the
default schedule with the first two loops of every contraction tiled by T and
the outermost tile loop parallel).  Each is checked for legality (an illegal
one is listed with the reason and not run), compiled, run on the same random
inputs, checked once against the reference interpreter (ok / MISMATCH; exact
for integer outputs, as `run --check` for floats), then timed: median, min and
max over --repeat calls after --warmup.  GFLOP/s counts 2 flops per
contraction iteration point; speedup is relative to the first candidate.

-o writes CSV or JSON (by the suffix) with the machine, compiler and flags,
versions, date, program, sizes, and every candidate's steps and loop tree.
--plot draws the table (PNG, SVG or PDF by the suffix; needs matplotlib:
pip install -e '.[plots]'): a bar per candidate at its median time, whiskers
from its fastest to its slowest call, its speedup above it.
Exit status 1 if any candidate fails to build or mismatches the reference.

  polytile compare examples/matmul.tile --dims M=256,N=256,K=256 --tile 32,64 --plot mm.png

--workers local:N (N worker processes here) or --scheduler tcp://HOST:PORT (a
running Dask cluster) build, check and time the candidates several at once,
each on one worker; the table is the same, and -o records which worker and
kind of machine timed each.  A candidate timed on another kind of machine
than the baseline gets no speedup.  Needs pip install -e '.[distributed]'.

C files: the function holding the regions is called through ctypes, built
from the file as written ("original", the baseline) and from `polytile opt`
variants: "opt" (the default), "fusion-<c>" per --fusion choice, "no-tile",
"no-parallel", and one per --schedules file.  Every build uses the same
compiler and flags (-O3 -march=native -fopenmp -ffp-contract=off: without
FMA contraction both builds round alike; --cflags to change) and the same
random inputs; every array the function reaches must equal the original
build's bitwise (check MISMATCH and exit status 1 otherwise).

  polytile compare tests/c_kernels/jacobi-2d.c --dims tsteps=50,n=1000 --fusion none,max --no-tile
  polytile compare tests/c_kernels/gemm.c --dims ni=800,nj=800,nk=800 --scalar alpha=1.5 -o gemm.csv
  polytile compare tests/c_kernels/heat-3d.c --dims N=120,TSTEPS=20      # macros rewritten in every build

int parameters need --dims (a missing one is named); macros default to the
file's value; float parameters are 1.5 unless --scalar sets them; arrays take
their declared extents, or the extents the regions access (--shape X=100
overrides); file-scope arrays are reached through the library's symbols.
"""


def add_parser(subs, formatter, common) -> None:
    """Register ``polytile compare`` on the subcommand parser."""
    p = subs.add_parser("compare", formatter_class=formatter, epilog=_COMPARE_EPILOG,
                        help="check, run and time several schedules of one program side by side",
                        description="Build candidate schedules of a Tile program (the default, saved ones, "
                                    "isl's fusion choices, tilings), check each for legality and against the "
                                    "reference interpreter, time them on the same inputs and print one table; "
                                    "-o writes it as CSV or JSON with provenance.  A C file (.c): the file as "
                                    "written against `polytile opt` variants of it, all built with the same "
                                    "compiler and flags, each checked bitwise against the original.")
    p.add_argument("file", metavar="FILE.tile|FILE.c", help="the Tile program, or a C file with #pragma scop regions")
    p.add_argument("--schedules", nargs="+", metavar="SCHED.json", default=[],
                   help="saved schedules (or JSON step lists) to compare")
    p.add_argument("--fusion", type=arg_type(_fusion_list, "fusion"), metavar="none,smart,max",
                   help="isl scheduler candidates, one per fusion choice")
    p.add_argument("--tile", type=arg_type(_size_list, "tile"), metavar="16,32,64",
                   help="tiled candidates, one per size")
    _timing_options(p)
    p.add_argument("--inputs", choices=("int", "normal"), default=None,
                   help="int: integers in [-4, 4] (exact, the default); normal: standard normal")
    p.add_argument("-o", "--output", metavar="RESULTS.csv|.json", help="write the results and provenance here")
    p.add_argument("--plot", type=figure_path, metavar="FIG.png|.svg|.pdf",
                   help="draw the results: median time per candidate with min-max whiskers and speedups "
                        "(C files with several functions: one figure per function, FIG.<function>.png)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    executor_mod.add_arguments(p)
    g = p.add_argument_group("C files")
    g.add_argument("--no-tile", action="store_true", help="also the variant `polytile opt --no-tile`")
    g.add_argument("--no-parallel", action="store_true", help="also the variant `polytile opt --no-parallel`")
    g.add_argument("--hardware", default=None, metavar="NAME|FILE",
                   help="hardware descriptor of the opt variants' tile sizes (default: host)")
    g.add_argument("--scalar", type=_scalar, action="append", metavar="NAME=NUMBER",
                   help="value of a floating-point parameter (repeatable; default 1.5)")
    g.add_argument("--cflags", metavar="FLAGS",
                   help="compiler flags of every build (default: -O3 -march=native -fopenmp -ffp-contract=off)")
    _c_options(p, group=g)
    _shape_options(p)
    common(p, sub=True)
    p.set_defaults(handler=cmd_compare)


def _fusion_list(text: str) -> List[str]:
    out = []
    for item in _items(text.replace(",", " ")):
        if item not in FUSION:
            raise ValueError(f"unknown fusion choice {item!r}; choose from {', '.join(FUSION)}")
        if item not in out:
            out.append(item)
    if not out:
        raise ValueError(f"expected a comma-separated list of {', '.join(FUSION)}")
    return out


def _size_list(text: str) -> List[int]:
    out = []
    items = _items(text.replace(",", " "))
    if not items:
        raise ValueError("expected comma-separated positive integers, e.g. 16,32,64")
    for item in items:
        if not item.isdigit() or int(item) < 1:
            raise ValueError(f"bad tile size {item!r}: expected a positive integer")
        if int(item) not in out:
            out.append(int(item))
    return out


def _scalar(text: str) -> Tuple[str, float]:
    name, sep, value = text.partition("=")
    try:
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name.strip()):
            raise ValueError
        return name.strip(), float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected NAME=NUMBER, got {text!r}") from None


@_c_command
def _compare_c(args, out: Optional[Path]) -> int:
    """`polytile compare FILE.c`: the original build against `polytile opt` variants, checked bitwise, timed."""
    import shlex

    from .. import c_runner

    _reject_tile_options(args, "compare", ("tile", "dtype", "dtypes", "inputs"))
    if getattr(args, "workers", None) or getattr(args, "scheduler", None):
        raise UsageError("--workers and --scheduler apply to Tile programs only (a C file's builds are compared "
                         "in this process)")
    flags = tuple(shlex.split(args.cflags)) if args.cflags else c_runner.DEFAULT_FLAGS
    shapes: Dict[str, Tuple[int, ...]] = {}
    for sh in args.shape or ():
        shapes.update(sh)
    cands = c_runner.variants(args.fusion or (), no_tile=args.no_tile, no_parallel=args.no_parallel,
                          schedules=args.schedules or (), reassociate=args.reassociate)
    names = c_runner.functions(args.file, function=args.function, assume_no_alias=args.assume_no_alias,
                           pure=_pure(args), cpp_args=_cpp_args(args))
    if not names:
        raise PolytileError(f"{args.file}: no #pragma scop region to compare")
    whole = args.function is not None
    ok = True
    results = []
    for k, fname in enumerate(names):
        call = c_runner.prepare(args.file, sizes=_c_params(args), scalars=dict(args.scalar or ()), shapes=shapes,
                            function=fname, whole_function=whole, seed=args.seed,
                            assume_no_alias=args.assume_no_alias, other_sizes=len(names) > 1, pure=_pure(args),
                            cpp_args=_cpp_args(args))

        def progress(text: str, fname=fname) -> None:
            if not args.quiet:
                _note(f"{fname}: {text}")

        result = c_runner.compare_c(call, cands, repeat=args.repeat, warmup=args.warmup, flags=flags,
                                hardware=args.hardware or "host", assume_no_alias=args.assume_no_alias,
                                whole_function=whole, progress=progress)
        results.append(result)
        ok = ok and result.ok
        prov = result.provenance
        machine, cc = prov["machine"], prov["compiler"]
        if k:
            print()
        sizes = ", ".join(f"{n}={v}" for n, v in call.sizes.items()) or "none"
        scalars = ", ".join(f"{n}={v:g}" for n, v in call.scalars.items())
        arrays = ", ".join(f"{n}[{'x'.join(map(str, a.shape)) or 'scalar'}]" + (" (global)" if n in call.globals
                                                                                else "")
                           for n, a in call.inputs.items())
        print(f"program  {args.file}: {fname}()  ({sizes}" + (f"; {scalars}" if scalars else "") + ")")
        print(f"arrays   {arrays or '(none)'}")
        print(f"machine  {machine['node']}: {machine['processor']}, {machine['cpu_count']} logical CPUs"
              + (f", OMP_NUM_THREADS={machine['omp_num_threads']}" if machine.get("omp_num_threads") else ""))
        print(f"compiler {cc.get('path', cc.get('name'))} ({cc.get('version', cc.get('error', '?'))}) "
              f"{' '.join(prov['flags'])}")
        print(f"timing   {args.repeat} timed call(s) after {args.warmup} warm-up per build, each on fresh copies "
              f"of the same random inputs (seed {args.seed})")
        print("check    bitwise: every array above equals the original build's, byte for byte"
              + (f"; 'reassociate' within {c_runner.REASSOCIATED_REL['float64']:g} (double) / "
                 f"{c_runner.REASSOCIATED_REL['float32']:g} (float) x the array's max |value|"
                 if args.reassociate else ""))
        print()
        print(result.table())
    if out is not None:
        paths = _per_function(out, results)
        for r, path in zip(results, paths):
            r.save(path)
        print()
        print(f"wrote {', '.join(map(str, paths))} (with provenance and each variant's steps)")
    if args.plot:
        _plot(results, _per_function(Path(args.plot), results))
    return 0 if ok else 1


def _per_function(path: Path, results) -> List[Path]:
    """Several functions: one file per function, named after it (FILE.<function>.suffix)."""
    if len(results) == 1:
        return [path]
    return [path.with_name(f"{path.stem}.{r.provenance['function']}{path.suffix}") for r in results]


def _plot(results, paths: List[Path]) -> None:
    from .. import plots

    for r, path in zip(results, paths):
        plots.compare_bars(r, path=path)
    print(f"wrote {', '.join(map(str, paths))} (figure)")


def cmd_compare(args) -> int:
    out = Path(args.output) if args.output else None
    if out is not None and out.suffix.lower() not in (".csv", ".json"):
        # Found now, not after minutes of measuring.
        raise UsageError(f"-o {out}: name the results file .csv or .json")
    if args.plot:
        from .. import plots

        plots.require()  # a missing matplotlib is found now, not after the measuring
    if _is_c(args):
        return _compare_c(args, out)
    _reject_c_options(args, "compare", ("function", "assume_no_alias", "reassociate", "no_tile", "no_parallel", "hardware",
                                        "scalar", "cflags") + _C_PREPROCESSOR)
    args.inputs = args.inputs or "int"
    files = [load_schedule_file(f) for f in args.schedules or ()]
    # With no sizes given anywhere else, the first saved schedule's shapes are the ones it was checked for.
    target = resolve(args, saved=next((f for f in files if f.shapes is not None), None))

    cands = [compare_mod.default()]
    for f in files:
        cands.append(compare_mod.Candidate(f.path.stem, _recipe(f, None, parallel=True), f"file {f.path}"))
    for choice in args.fusion or ():
        cands.append(compare_mod.fusion(choice))
    for size in args.tile or ():
        cands.append(compare_mod.tiled(size))

    def progress(text: str) -> None:
        if not args.quiet:
            _note(text)

    with executor_mod.from_args(args) as ex:
        result = compare_mod.compare(target.program, target.shapes, target.dtypes, cands, repeat=args.repeat,
                                     warmup=args.warmup, inputs=args.inputs, seed=args.seed,
                                     positive=target.hints.positive, progress=progress,
                                     extra_provenance={"file": str(target.path)}, executor=ex,
                                     sizes=target.size_values)
    prov = result.provenance
    machine, cc = prov["machine"], prov["compiler"]
    dims = ", ".join(f"{k}={v}" for k, v in prov["dims"].items()) or "none"
    print(f"program  {target.path}  ({dims}; inputs {_signature(target) or '(none)'})")
    print(f"machine  {machine['node']}: {machine['processor']}, {machine['cpu_count']} logical CPUs"
          + (f", OMP_NUM_THREADS={machine['omp_num_threads']}" if machine.get("omp_num_threads") else ""))
    print(f"compiler {cc.get('path', cc.get('name'))} ({cc.get('version', cc.get('error', '?'))}) "
          f"{' '.join(prov['flags'])}")
    flops = prov.get("flops")
    print(f"timing   {args.repeat} timed call(s) after {args.warmup} warm-up per candidate; inputs {prov['inputs']}"
          + (f"; {flops} flops per call" if flops else ""))
    if prov.get("executor"):
        ex_info = prov["executor"]
        print(f"workers  {ex_info['workers']} Dask worker(s) at {ex_info['address']}, one candidate at a time each"
              + "".join(f"; note: {n}" for n in ex_info.get("notes", ())))
    print()
    print(result.table())
    if out is not None:
        result.save(out)
        print()
        print(f"wrote {out} ({len(result.rows)} candidates, with provenance and each schedule)")
    if args.plot:
        _plot([result], [Path(args.plot)])
    return 0 if result.ok else 1
