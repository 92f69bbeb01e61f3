"""The autotuner on two contractions: tuning time, tuned vs untuned speedup, GFLOP/s.

    python benchmarks/bench_tune.py                           # matmul 1024^3 and conv2d 56x56x64, 60 s each
    python benchmarks/bench_tune.py --budget 2m --trials 300
    python benchmarks/bench_tune.py --only conv --budget 30s
    python benchmarks/bench_tune.py --issue4 --budget 30s     # every row of issue 4's table (tuning time row)

Programs (float32):

* ``matmul``: ``examples/matmul.tile`` at M = N = K = 1024 (``--size``);
* ``conv``: ``examples/conv2d.tile`` (NHWC input, HWIO filter, "valid"), input
  1x56x56x64, 64 filters of 3x3 (``--conv-size``, ``--channels``).

``--issue4`` tunes instead every workload of issue 4's benchmark table at its
size: SGEMM 1024^3 and 2048^3, conv2d 1x56x56x64 (64 3x3 filters) and
1x28x28x128 (128 3x3 filters), matmul+bias+relu 1024^3 and batched matmul
32x(128x64 @ 64x128); the table's "setup s" column is the time before the
search starts (the oracle's share in parentheses), which the budget does not
bound.

Each is tuned with :func:`polytile.tune.tune` (``--budget`` of search each,
default 60 s; at most ``--trials`` trials; the cost model's ``--top-k`` first,
then simulated annealing).  Inside the tuner every schedule is compiled,
checked against the reference interpreter on integer-valued inputs, then
timed (``--warmup`` calls, then the median of ``--repeat``); the untuned
default (program order, outermost parallel loops, no tiling) is measured in
the same run as the baseline.  The oracle and the baseline run before the
search, so the total tuning time is longer than the budget: the table shows
both.  The tuner's cache is bypassed unless ``--cache`` is given (a cached
result would report another run's measurements).

The table also shows the cost model's own pick (the first trial, which is
what ``polytile.compile`` uses by default) so the gain of measuring over
predicting is visible.  Writes ``benchmarks/results/tune.json`` with the
provenance (machine, compiler and flags, versions, date, load average before
and after: timings on a busy machine are noisy), every trial, the best
schedule's steps and loop tree.
"""
from __future__ import annotations

import os
import sys
import time

import _common
from polytile.compare import format_table


def _load() -> list:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def _gflops(flops, seconds):
    return None if not flops or not seconds else flops / seconds / 1e9


def _g(x) -> str:
    return "-" if x is None else f"{x:.2f}"


#: Issue 4's workloads (name, example file, dims), in the order of its table.
ISSUE4 = (
    ("SGEMM", "matmul.tile", "M=1024,N=1024,K=1024"),
    ("SGEMM", "matmul.tile", "M=2048,N=2048,K=2048"),
    ("conv2d", "conv2d.tile", "N=1,H=56,W=56,CI=64,KH=3,KW=3,CO=64"),
    ("conv2d", "conv2d.tile", "N=1,H=28,W=28,CI=128,KH=3,KW=3,CO=128"),
    ("matmul+bias+relu", "matmul_bias_relu.tile", "M=1024,N=1024,K=1024"),
    ("batched matmul", "batched_matmul.tile", "NB=32,M=128,K=64,N=128"),
)


def run_one(name: str, program, dims: str, args) -> dict:
    from polytile.tune import parse_budget, tune

    print(f"== {name}  ({dims}, float32), budget {parse_budget(args.budget):g} s, at most {args.trials} trials",
          flush=True)
    load_before = _load()
    t0 = time.perf_counter()
    r = tune(program, dims, hardware=args.hardware, budget_s=parse_budget(args.budget), max_trials=args.trials,
             top_k=args.top_k, seed=args.seed, repeat=args.repeat, warmup=args.warmup,
             progress=not args.quiet, cache=args.cache)
    wall = time.perf_counter() - t0
    print(r.table())
    print()
    print("best schedule:")
    print(r.best.describe())
    print(flush=True)
    model = next((t for t in r.trials if t.source == "model-top-k"), None)
    ok = [t for t in r.trials if t.measured and t.ok]
    return {
        "name": name,
        "dims": dims,
        "wall_s": wall,
        "tuning_s": r.elapsed_s,
        "search_s": r.info.get("search_s"),
        "setup_s": r.info.get("setup_s"),
        "trials": len(r.trials),
        "trials_ok": len(ok),
        "from_cache": r.from_cache,
        "flops": r.flops,
        "baseline_median_s": r.baseline_time_s,
        "baseline_gflops": _gflops(r.flops, r.baseline_time_s),
        "model_pick_median_s": model.median_s if model else None,
        "model_pick_gflops": _gflops(r.flops, model.median_s) if model and model.measured else None,
        "best_median_s": r.best_time_s,
        "best_gflops": _gflops(r.flops, r.best_time_s),
        "speedup_over_default": r.speedup,
        "speedup_over_model_pick": (model.median_s / r.best_time_s) if model and model.measured else None,
        "best_configs": [str(c) for c in r.best_configs],
        "best_describe": r.best.describe(),
        "load_before": load_before,
        "load_after": _load(),
        "result": r.to_json(),
    }


def main(argv=None) -> int:
    p = _common.parser(__doc__.splitlines()[0], "tune.json")
    p.add_argument("--budget", default="60s", help="search time per program: 60s, 2m, or seconds")
    p.add_argument("--trials", type=int, default=200, help="at most this many trials per program")
    p.add_argument("--top-k", dest="top_k", type=int, default=8, help="cost-model picks measured first")
    p.add_argument("--hardware", default="host", help="hardware descriptor (preset, 'host' or a file)")
    p.add_argument("--size", type=int, default=1024, help="M = N = K of the matmul")
    p.add_argument("--conv-size", type=int, default=56, help="H = W of the conv input (output is size - 2)")
    p.add_argument("--channels", type=int, default=64, help="CI = CO of the convolution")
    p.add_argument("--only", choices=("matmul", "conv"), help="tune one of the two programs")
    p.add_argument("--issue4", action="store_true", help="tune every workload of issue 4's table instead")
    p.add_argument("--cache", action="store_true", help="allow a cached tuning result (default: tune afresh)")
    args = p.parse_args(argv)

    sections = []
    if args.issue4:
        for name, file, dims in ISSUE4:
            sections.append(run_one(name, _common.EXAMPLES / file, dims, args))
    else:
        if args.only in (None, "matmul"):
            n = args.size
            sections.append(run_one("matmul", _common.EXAMPLES / "matmul.tile", f"M={n},N={n},K={n}", args))
        if args.only in (None, "conv"):
            h, c = args.conv_size, args.channels
            sections.append(run_one("conv2d", _common.EXAMPLES / "conv2d.tile",
                                    f"N=1,H={h},W={h},CI={c},KH=3,KW=3,CO={c}", args))

    rows = [["program", "sizes", "wall s", "setup s (oracle)", "tuning s (search)", "trials ok/all", "default ms",
             "default GF/s", "model pick ms", "tuned ms", "tuned GF/s", "tuned/default", "tuned/model"]]
    for s in sections:
        setup = s["setup_s"] or {}
        rows.append([s["name"], s["dims"], f"{s['wall_s']:.1f}",
                     f"{setup.get('total', 0):.1f} ({setup.get('oracle', 0):.1f})",
                     f"{s['tuning_s']:.1f} ({s['search_s'] or 0:.1f})",
                     f"{s['trials_ok']}/{s['trials']}", _common.ms(s["baseline_median_s"]), _g(s["baseline_gflops"]),
                     _common.ms(s["model_pick_median_s"]), _common.ms(s["best_median_s"]), _g(s["best_gflops"]),
                     f"{s['speedup_over_default']:.2f}x",
                     "-" if s["speedup_over_model_pick"] is None else f"{s['speedup_over_model_pick']:.2f}x"])
    print(format_table(rows))
    data = {"provenance": _common.provenance(benchmark="tune", load_average=_load()), "programs": sections}
    out = _common.write_json(args.out, data)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
