"""``polytile opt``: source-to-source optimisation of a C file, like Pluto's polycc -- each #pragma scop region
rescheduled, tiled, marked parallel and simd, and written back; ``--verify`` builds both files and compares.

The work is :func:`polytile.c_runner.optimise` (served from the ``opt`` cache when the same file was
optimised with the same options before) and :func:`polytile.c_runner.verify`; this module checks where the
output goes (before any work) and writes it.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Dict, Optional, Tuple

from ..atomicfile import write_atomic
from ..errors import PolytileError
from . import json_output
from .argtypes import arg_type, same_file
from .c_files import _c_command, _cpp_args, _cpp_options, _pure
from .inputs import FUSION, UsageError, _note, parse_dims


_OPT_EPILOG = """\
examples:
  polytile opt tests/c_kernels/jacobi-2d.c -o jacobi-2d.opt.c
  polytile opt tests/c_kernels/gemm.c -o gemm.opt.c --no-tile --fusion max
  polytile opt tests/c_kernels/heat-3d.c -o heat.opt.c --param N=200 --param TSTEPS=50
  polytile opt tests/c_kernels/features.c -o out.c --skip-nonaffine   # regions it cannot model stay as they are
  polytile opt tests/c_kernels/gemm.c --function kernel_gemm       # the whole body, no pragmas needed
  polytile opt tests/c_kernels/2mm.c --tune -o 2mm.opt.c               # measure the variants, keep the fastest
  polytile opt tests/c_kernels/gemver.c --tune --tune-dims n=2000 -o gemver.opt.c
  polytile schedule tests/c_kernels/jacobi-2d.c -o s.json && polytile opt tests/c_kernels/jacobi-2d.c --schedule s.json

Every #pragma scop region is scheduled with isl's scheduler (or the original
order if it fails), its outermost band tiled (sizes from --hardware), the
outermost parallel loop marked (a wavefront over the tile loops when none is
parallel), unit-stride innermost loops marked simd; every step is checked
against the dependences.  Bytes outside the regions are left unchanged.
Compile the output with -fopenmp.

Results: by default every reduction keeps its order, so the output computes
bitwise the same values as the input when both are compiled with
-ffp-contract=off (polytile compare and opt --verify build with
-O3 -march=native -fopenmp -ffp-contract=off).  Without it GCC may contract
a * b + c into one FMA in one loop structure and not in the other, and
results differ in the last bits.

Assumptions, checked or refused: pointers that may overlap are refused unless
restrict or --assume-no-alias; statements may call only pure functions (math.h,
__attribute__((const))/((pure)) declarations, --pure NAME); other calls,
volatile objects, pointer arithmetic and dereferences, struct members, while
loops, break and goto refuse the region (--skip-nonaffine leaves it as written).  An integer
macro that the preprocessor expanded into a region (a header's #define N 120,
-DN=120, or --param N=...) is guarded in the output by
#if N != 120 / #error, so a build with another value stops instead of
computing with the old one; macros defined in the file itself stay symbolic.
Build the output with the same -I/-D/-U flags.  Generated loop counters never
clash with names of the file (only a loop-bound parameter named c<digits> must
be fixed with --param).

Output: -o must not be the input (the #pragma scop regions would be lost);
--in-place rewrites FILE.c and keeps the original as FILE.c.orig.  --verify
builds the input and the output, runs each function holding a region on the
same random inputs (integer parameters 37 unless --verify-dims sets them) and
fails (exit status 1) unless every array is bitwise identical.

Measured choice: --tune builds the file as written and opt's variants, times
each on the same random inputs (integer parameters from --tune-dims, macros as
the file sets them unless --tune-dims names them), checks every variant
against the original bitwise, and writes the fastest; the original stays
unless a variant is more than 3% faster.  The table goes to stderr.
"""


def add_parser(subs, formatter, common) -> None:
    """Register ``polytile opt`` on the subcommand parser."""
    p = subs.add_parser("opt", formatter_class=formatter, epilog=_OPT_EPILOG,
                        help="optimise the #pragma scop regions of a C file (tile, parallelise, vectorise)",
                        description="Source-to-source optimisation of a C file, like Pluto's polycc: each "
                                    "#pragma scop region is rescheduled (isl's scheduler), tiled, marked "
                                    "parallel and simd, and written back into the file.")
    p.add_argument("file", metavar="FILE.c", help="the C file")
    p.add_argument("-o", "--output", metavar="OUT.c", help="write the optimised file here instead of stdout")
    p.add_argument("--tile", action=argparse.BooleanOptionalAction, default=True,
                   help="tile the outermost band of each loop nest (default: on)")
    p.add_argument("--parallel", action=argparse.BooleanOptionalAction, default=True,
                   help="mark OpenMP parallel and simd loops, with wavefronts for tiled stencils (default: on)")
    p.add_argument("--hardware", default="host", metavar="NAME|FILE",
                   help="hardware descriptor for tile sizes (default: host)")
    p.add_argument("--fusion", choices=FUSION, default="smart", help="isl scheduler fusion choice (default: smart)")
    p.add_argument("--schedule", metavar="SCHED.json",
                   help="replay these steps (a saved schedule or a JSON list of steps) on every region instead")
    p.add_argument("--dims", "--param", dest="param", type=_params, action="append", metavar="n=1000,m=800",
                   help="fix parameters (function arguments or macros) to values, comma-separated, as --dims "
                        "of the other commands; --param is the same option (repeatable)")
    p.add_argument("--skip-nonaffine", action="store_true",
                   help="leave regions the frontend cannot model untouched instead of failing")
    p.add_argument("--assume-no-alias", action="store_true",
                   help="assume pointer parameters do not overlap (as with restrict)")
    p.add_argument("--reassociate", action="store_true",
                   help="let the schedule reorder reductions (s += e, s -= e, s *= e whose e never reads the "
                        "updated cell) where that makes their loops vectorisable, e.g. a dot product with one "
                        "partial sum per SIMD lane; results then differ from the original by rounding "
                        "(default: every reduction keeps its order, results are bitwise identical when both "
                        "files are built with -ffp-contract=off)")
    p.add_argument("--function", metavar="NAME",
                   help="optimise the whole body of function NAME as one region (no #pragma scop needed)")
    p.add_argument("--tune", action="store_true",
                   help="measure instead of trusting the model: build the file as written and opt's variants "
                        "(default, --fusion none, --fusion max, --no-tile), run each on the same random inputs "
                        "at --tune-dims, and write the fastest whose results are bitwise the original's; the file "
                        "stays as written unless a variant is more than 3%% faster")
    p.add_argument("--tune-dims", action="append", type=arg_type(parse_dims, "dims"), metavar="n=2000,m=1800",
                   help="sizes --tune times at: integer parameters (required) and macros (default: the file's)")
    p.add_argument("--tune-repeat", type=int, default=5, metavar="N", help="timed calls per variant for --tune")
    p.add_argument("--in-place", action="store_true",
                   help="rewrite FILE.c itself, keeping the original as FILE.c.orig (-o FILE.c is refused without it)")
    p.add_argument("--verify", action="store_true",
                   help="build the input and the output (-O3 -march=native -fopenmp -ffp-contract=off), run them "
                        "on the same random inputs and fail unless the results are bitwise identical")
    p.add_argument("--verify-dims", action="append", type=arg_type(parse_dims, "dims"), metavar="n=100,m=80",
                   help="integer parameters and macros for --verify (default: 37 for parameters, the file's "
                        "value for macros)")
    _cpp_options(p.add_argument_group("C preprocessor and purity"))
    json_output.add_json_option(p, "per region its lines, whether it was optimised, left unchanged or skipped "
                                   "(and why), its schedule steps, notes and cache hit; where the file was "
                                   "written, and without -o/--in-place the optimised file itself as \"text\"")
    common(p, sub=True)
    p.set_defaults(handler=cmd_opt)


def _params(text: str) -> Tuple[Tuple[str, int], ...]:
    out = []
    for item in text.split(","):
        name, sep, value = item.partition("=")
        try:
            if not sep or not name.strip():
                raise ValueError
            out.append((name.strip(), int(value)))
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected NAME=INT[,NAME=INT...], got {text!r}") from None
    return tuple(out)


def _opt_output(args) -> Optional[Path]:
    """Where opt writes (None: stdout), checked before any work: never the input unless --in-place, and a
    file that can be written (its directory exists)."""
    src = Path(args.file)
    if not src.exists():
        raise PolytileError(f"no such C file: {src}")
    if src.is_dir():
        raise PolytileError(f"{src} is a directory, not a C file")
    out = Path(args.output) if args.output else None
    if args.in_place:
        if out is not None and not same_file(out, src):
            raise UsageError(f"--in-place rewrites {src} itself; drop -o {out}")
        out = src
    elif out is not None and same_file(out, src):
        raise PolytileError(f"-o {out} is the input file: writing it would lose the original loops and their "
                            f"#pragma scop markers; write elsewhere, or pass --in-place (which keeps a backup, "
                            f"{src}.orig)")
    if out is None:
        return None
    if out.is_dir():
        raise PolytileError(f"-o {out}: is a directory")
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise PolytileError(f"-o {out}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK) or (out.exists() and not os.access(out, os.W_OK)):
        raise PolytileError(f"-o {out}: not writable")
    return out


@_c_command
def cmd_opt(args) -> int:
    from .. import c_runner

    out_path = _opt_output(args)  # before minutes of scheduling, not after
    params = dict(pair for group in args.param or () for pair in group) or None
    options = dict(tile=args.tile, parallel=args.parallel, fusion=args.fusion, hardware=args.hardware, params=params,
                   schedule=args.schedule, skip_nonaffine=args.skip_nonaffine, assume_no_alias=args.assume_no_alias,
                   reassociate=args.reassociate, pure=_pure(args), cpp_args=_cpp_args(args), cache=True)
    if args.tune:
        options = _tuned_options(args, options, c_runner)
    if options is None:  # --tune: no variant measurably faster than the file as written
        out, results = Path(args.file).read_bytes(), []
    else:
        out, results = c_runner.optimise(args.file, function=args.function, **options)
    for r in results:
        where = f"{args.file}:{r.cscop.lines[0]}-{r.cscop.lines[1]} ({r.cscop.function})"
        if r.text is None:
            _note(f"{where}: left as it is ({'; '.join(r.notes) or 'not modelled'})")
        elif getattr(args, "verbose", 0):
            for n in r.notes:
                _note(f"{where}: {n}")
    verified = None
    if args.verify and any(r.text is not None for r in results):
        sizes: Dict[str, int] = {}
        for d in args.verify_dims or ():
            sizes.update(d)
        problems = c_runner.verify(args.file, out, function=args.function, whole_function=args.function is not None,
                               sizes=sizes, assume_no_alias=args.assume_no_alias, pure=_pure(args),
                               cpp_args=_cpp_args(args), reassociated=args.reassociate)
        if problems:
            raise PolytileError(f"{args.file}: --verify: the optimised file computes different results "
                                f"(please report this as a polytile bug):\n  " + "\n  ".join(problems))
        verified = {"ok": True, "agreement": "tolerance" if args.reassociate else "bitwise",
                    "flags": list(c_runner.DEFAULT_FLAGS)}
        _note(f"{args.file}: --verify: optimised and original builds agree "
              + ("within the reassociation tolerance" if args.reassociate else "bitwise")
              + f" ({' '.join(c_runner.DEFAULT_FLAGS)})")
    if out_path is not None:
        try:
            original = out_path.read_bytes() if args.in_place else None
            if original == out:
                _note(f"{args.file}: nothing was optimised; the file is left as it is")
            else:
                if original is not None:
                    _note(f"{args.file}: the original is kept as {_keep_backup(out_path, original)}")
                write_atomic(out_path, out)
        except OSError as exc:
            raise PolytileError(f"cannot write {out_path}: {exc.strerror or exc}") from None
    elif not getattr(args, "json", False):
        sys.stdout.buffer.write(out) if hasattr(sys.stdout, "buffer") else sys.stdout.write(out.decode())
        sys.stdout.flush()
    if getattr(args, "json", False):
        json_output.emit(_opt_document(args, out, results, out_path, verified, params))
    return 0


def _keep_backup(path: Path, original: bytes) -> Path:
    """Write ``original`` to ``path.orig``, or to ``path.orig.1``, ``.orig.2``, ... when that exists: an
    earlier backup is never overwritten (a second ``--in-place`` run would otherwise replace the user's
    original with the first run's output).  Created exclusively, so two runs cannot take the same name.

    >>> # _keep_backup(Path("k.c"), b"...") -> k.c.orig, then k.c.orig.1 on the next run
    """
    for n in range(1000):
        backup = path.with_name(path.name + ".orig" + (f".{n}" if n else ""))
        try:
            with open(backup, "xb") as f:
                f.write(original)
            return backup
        except FileExistsError:
            continue
    raise PolytileError(f"cannot keep the original of {path}: {path}.orig to {path}.orig.999 all exist")


def _tuned_options(args, options: Dict, c_runner) -> Optional[Dict]:
    """``opt --tune``: build and time the file as written and opt's variants (default, fusion none and
    max, untiled) on random inputs at ``--tune-dims``; the options of the fastest that computes the
    original's bits (within the tolerance with --reassociate), or None when the original stays."""
    if args.schedule is not None:
        raise UsageError("--tune measures opt's own variants; it does not combine with --schedule")
    sizes: Dict[str, int] = {}
    for d in args.tune_dims or ():
        sizes.update(d)
    call = c_runner.prepare(args.file, sizes=sizes, function=args.function, whole_function=args.function is not None,
                            assume_no_alias=args.assume_no_alias, pure=_pure(args), cpp_args=_cpp_args(args),
                            size_option="--tune-dims")
    base = {k: options[k] for k in ("tile", "parallel", "fusion", "params", "reassociate")}
    best, res = c_runner.tune_variants(call, c_runner.tuning_variants(base), repeat=args.tune_repeat, warmup=1,
                                       hardware=args.hardware, assume_no_alias=args.assume_no_alias,
                                       whole_function=args.function is not None,
                                       progress=_note if getattr(args, "verbose", 0) else None)
    _note(res.table())
    _note(f"{args.file}: --tune chose {best.name} ({best.origin})")
    return None if best.options is None else {**options, **best.options}


def _region_status(r) -> str:
    if r.cscop.skipped or r.cscop.scop is None:
        return "skipped"
    return "unchanged" if r.text is None else "optimised"


def _opt_document(args, out: bytes, results, out_path: Optional[Path], verified, params) -> dict:
    """``opt --json``: per region what happened to it, where the file went (or, without -o, the file)."""
    regions = []
    for r in results:
        status = _region_status(r)
        reason = None
        if status == "skipped":
            reason = r.cscop.reason or "not modelled"
        elif status == "unchanged":
            reason = "; ".join(r.notes) or "not modelled"
        regions.append({"lines": list(r.cscop.lines), "function": r.cscop.function, "status": status,
                        "reason": reason, "steps": r.steps_json(), "notes": list(r.notes),
                        "from_cache": r.from_cache})
    cache = None
    if results:
        cache = "hit" if all(r.from_cache for r in results) else "miss"
    return json_output.document(
        "opt", file=str(args.file), output=str(out_path) if out_path is not None else None,
        in_place=bool(args.in_place), cache=cache,
        options={"tile": args.tile, "parallel": args.parallel, "fusion": args.fusion, "hardware": args.hardware,
                 "params": params or {}, "schedule": args.schedule, "function": args.function,
                 "reassociate": args.reassociate, "skip_nonaffine": args.skip_nonaffine,
                 "assume_no_alias": args.assume_no_alias},
        regions=regions, verify=verified,
        # Without -o the optimised file has nowhere else to go: stdout carries this document alone.
        text=out.decode("utf-8", errors="replace") if out_path is None else None)
