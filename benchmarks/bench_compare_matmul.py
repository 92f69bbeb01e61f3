"""Schedules of one matmul, side by side: loop order, tiling, parallelism, isl's scheduler.

    python benchmarks/bench_compare_matmul.py                 # 1024^3 float32, 5 timed calls each
    python benchmarks/bench_compare_matmul.py --size 512 --repeat 10

Candidates (all built with polytile's schedule API, each legality-checked,
run on the same integer-valued inputs and checked exactly against the
reference interpreter before timing):

=================  ==================================================================
ijk                the loops as written, no parallel loop (the baseline)
ikj                j and k interchanged: B and C are read along rows in the inner loop
tile32, tile64     i and j tiled by 32 / 64 (serial)
tile64+par         tile64 with the outermost tile loop i_t in parallel (OpenMP)
tile64-ikj+par     tile64+par with the point loops j, k interchanged
isl-smart          isl's scheduler (fusion=smart) + the outermost parallel loops
default            what polytile.compile does when given no schedule
=================  ==================================================================

Prints the table and writes ``benchmarks/results/compare_matmul.json``.
"""
from __future__ import annotations

import sys

import _common


def candidates(dims: str):
    """(name, Schedule) pairs, in table order; the first is the baseline."""
    from polytile import pipeline
    from polytile.compare import Candidate

    src = _common.EXAMPLES / "matmul.tile"
    ijk = pipeline.schedule(src, dims=dims, parallel=False)   # no auto_parallel: one thread
    ikj = ijk.interchange("C", "j", "k")
    t32 = ijk.tile("C", i=32, j=32)
    t64 = ijk.tile("C", i=64, j=64)
    t64p = t64.parallel("C", "i_t")
    t64p_ikj = t64p.interchange("C", "j", "k")
    smart = pipeline.schedule(src, dims=dims, fusion="smart")  # isl's scheduler + auto_parallel
    return [
        Candidate("ijk", ijk, "program order, serial"),
        Candidate("ikj", ikj, "program order with j, k interchanged, serial"),
        Candidate("tile32", t32, "i, j tiled by 32, serial"),
        Candidate("tile64", t64, "i, j tiled by 64, serial"),
        Candidate("tile64+par", t64p, "i, j tiled by 64, tile loop i_t parallel"),
        Candidate("tile64-ikj+par", t64p_ikj, "tile64+par with point loops j, k interchanged"),
        Candidate("isl-smart", smart, "isl scheduler (fusion=smart) + auto_parallel"),
        Candidate("default", None, "what polytile.compile uses without a schedule"),
    ]


def main(argv=None) -> int:
    p = _common.parser(__doc__.splitlines()[0], "compare_matmul.json")
    p.add_argument("--size", type=int, default=1024, help="M = N = K")
    p.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    args = p.parse_args(argv)

    from polytile.compare import compare

    n = args.size
    dims = f"M={n},N={n},K={n}"
    src = _common.EXAMPLES / "matmul.tile"
    print(f"matmul {n}x{n}x{n} {args.dtype}: {args.repeat} timed calls after {args.warmup} warm-up per schedule",
          flush=True)
    result = compare(src, dims, args.dtype, candidates(dims), repeat=args.repeat, warmup=args.warmup,
                     seed=args.seed, progress=_common.progress(args.quiet),
                     extra_provenance={"benchmark": "compare_matmul", **_common.run_info()})
    prov = result.provenance
    m, cc = prov["machine"], prov["compiler"]
    print(f"machine: {m['node']}, {m['processor']}, {m['cpu_count']} logical CPUs; "
          f"compiler: {cc.get('version', cc.get('error'))} {' '.join(prov['flags'])}")
    print()
    print(result.table())
    print()
    print("schedules:")
    print("\n".join(_common.summary_lines(result)))
    out = _common.write_json(args.out, result.to_json())
    print(f"\nwrote {out}")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
