"""Model-driven vs empirical optimisation (Yotov et al., "A comparison of empirical and model-driven
optimization", PLDI 2003): polytile's cost-model choice vs its autotuner vs a measured grid.

For SGEMM and a convolution: (1) the model's choice -- the schedule `polytile.compile` uses, ranked by
`cost.predict_config` without running anything; (2) the autotuner (`polytile.tune`: the model's top
candidates measured, then annealing) with a fixed trial budget; (3) an "exhaustive" search: a random
sample of the autotiler's whole candidate space (tile sizes, loop orders, register blocks), every
point compiled, checked against the reference interpreter and timed.  Reported: each one's kernel
time, how far the model's choice is from the grid's best, where the grid's best sits in the model's
order, the rank correlation of predicted and measured times, and what each search cost.

    python papers/model-vs-empirical/run.py           # about 7 minutes on 2 cores
    python papers/model-vs-empirical/run.py --quick --out /tmp/yotov
"""
from __future__ import annotations

import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import paperlib as C  # noqa: E402

import numpy as np  # noqa: E402

from polytile import autotile, cost, hardware, pipeline  # noqa: E402
from polytile.tune import tune  # noqa: E402
from polytile.tune.bench import _Bench  # noqa: E402  (the tuner's own compile-check-time harness)
from polytile.tune.search import DEFAULT_STEPS  # noqa: E402

TITLE = "Model-driven vs empirical optimisation (Yotov et al., PLDI 2003)"

CASES = {  # name: (example, full dims, quick dims, grid points full/quick, tuner trials full/quick)
    "SGEMM": ("matmul.tile", "M=1024,N=1024,K=1024", "M=64,N=64,K=64", (120, 6), (40, 4)),
    "conv2d": ("conv2d.tile", "N=1,H=58,W=58,CI=64,KH=3,KW=3,CO=64", "N=1,H=10,W=10,CI=16,KH=3,KW=3,CO=16",
                          (120, 6), (40, 4)),
}


def study(path: Path, dims: str, n_grid: int, n_trials: int, repeat: int, say, executor=None) -> dict:
    hw = hardware.load("host")
    program = pipeline.load_program(path)
    shapes = pipeline.shapes_from_dims(program, pipeline.parse_dims(dims), None)
    dts = ("float32",) * len(shapes)
    shape_map = dict(zip(program.input_names, shapes))
    base = pipeline.schedule(program, shapes=shape_map, dtypes=list(dts), steps=DEFAULT_STEPS)
    bench = _Bench(program, shapes, dts, repeat=repeat, warmup=1, check=True, cap_s=2.0)

    say("model's choice")
    t0 = time.perf_counter()
    default = pipeline.schedule(program, shapes=shape_map, dtypes=list(dts), hardware=hw, min_parallel_work=None)
    model_s = time.perf_counter() - t0
    _, chosen = autotile.autotile(base, hw)
    model = bench.measure(default.steps)[0]

    st = autotile.contraction_statements(base)[0]
    space = autotile.candidates(base, st, hw, limit=10 ** 6, full_blocks=False)
    rng = np.random.default_rng(0)
    grid = [space[k] for k in sorted(rng.choice(len(space), size=min(n_grid, len(space)), replace=False))]
    if chosen and chosen[0] not in grid:
        grid.append(chosen[0])
    points = []
    t0 = time.perf_counter()
    for k, c in enumerate(grid):
        if k % 10 == 0:
            say(f"grid {k}/{len(grid)}")
        pred = cost.predict_config(base, c, hw).time_s
        try:
            out = bench.measure(autotile.apply(base, c).steps)[0]
            median, error = out.median_s, out.error
        except Exception as e:  # an inapplicable point is recorded, not fatal
            median, error = None, str(e).splitlines()[0]
        points.append({"config": c.to_json(), "predicted_s": pred, "median_s": median, "error": error,
                       "model_choice": bool(chosen) and c == chosen[0]})
    grid_s = time.perf_counter() - t0

    say("autotuner")
    t0 = time.perf_counter()
    tuned = tune(path, dims, budget_s=600, max_trials=n_trials, repeat=repeat, cache=False, progress=False,
                 executor=executor)
    tune_s = time.perf_counter() - t0

    ok = [p for p in points if p["median_s"] is not None and p["error"] is None]
    best = min(ok, key=lambda p: p["median_s"]) if ok else None
    order = sorted(ok, key=lambda p: p["predicted_s"])
    return {"dims": dims, "candidates_in_space": len(space), "grid_points": len(grid), "measured_ok": len(ok),
            "model": {"time_s": model.median_s, "search_s": model_s, "config": [c.to_json() for c in chosen]},
            "tuner": {"time_s": tuned.best_time_s, "search_s": tune_s, "trials": len(tuned.trials),
                      "configs": [c.to_json() for c in tuned.best_configs]},
            "grid": {"best_s": best["median_s"] if best else None, "search_s": grid_s,
                     "best_config": best["config"] if best else None,
                     "best_model_rank": order.index(best) + 1 if best else None,
                     "spearman": cost.spearman([p["predicted_s"] for p in ok], [p["median_s"] for p in ok])
                     if len(ok) > 2 else None},
            "points": points}


def main(argv=None) -> int:
    args = C.parse(__doc__.splitlines()[0], __file__, argv=argv)
    say = C.say()
    repeat = 2 if args.quick else 5
    cases = {}
    for name, (example, full, quick, grid, trials) in CASES.items():
        say(name)
        k = 1 if args.quick else 0
        cases[name] = study(C.ROOT / "examples" / example, quick if args.quick else full, grid[k], trials[k], repeat, say,
                            args.executor)
    data = {"paper": "Yotov, Li, Ren, Garzaran, Padua, Pingali, Stodghill: A comparison of empirical and "
                     "model-driven optimization, PLDI 2003",
            "quick": args.quick, "cases": cases, "provenance": C.provenance(repeat=repeat)}
    figures = draw(data, args.out)
    C.finish(args, data, render, figures)
    return 0


def draw(data, out: Path):
    plt = C.pyplot()
    cases = data["cases"]
    fig, axes = plt.subplots(1, len(cases), figsize=(5 * len(cases), 3.8), squeeze=False)
    for ax, (name, c) in zip(axes[0], cases.items()):
        ok = [p for p in c["points"] if p["median_s"]]
        ax.scatter([p["predicted_s"] * 1e3 for p in ok], [p["median_s"] * 1e3 for p in ok], s=12, alpha=0.6,
                   label=f"grid ({len(ok)} measured)")
        for key, marker, label in (("model", "*", "model's choice"), ("tuner", "D", "autotuner best")):
            if c[key]["time_s"]:
                ax.axhline(c[key]["time_s"] * 1e3, ls="--" if key == "model" else ":", lw=1, color="C1" if key == "model" else "C2",
                           label=f"{label}: {c[key]['time_s'] * 1e3:.3g} ms")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("predicted time (ms)")
        ax.set_ylabel("measured time (ms)")
        rho = c["grid"]["spearman"]
        ax.set_title(f"{name}: Spearman {rho:.2f}" if rho is not None and not math.isnan(rho) else name, fontsize=10)
        ax.legend(fontsize=7)
    figs = [C.save(fig, out, "predicted_vs_measured.png")]
    fig, axes = plt.subplots(1, len(cases), figsize=(5 * len(cases), 3.4), squeeze=False)
    for ax, (name, c) in zip(axes[0], cases.items()):
        times = [p["median_s"] for p in c["points"] if p["median_s"]]
        best = np.minimum.accumulate(times) * 1e3 if times else []
        ax.plot(range(1, len(best) + 1), best, label="grid search, best so far")
        if c["model"]["time_s"]:
            ax.axhline(c["model"]["time_s"] * 1e3, ls="--", color="C1", label="model's choice (0 measurements)")
        if c["tuner"]["time_s"]:
            ax.axhline(c["tuner"]["time_s"] * 1e3, ls=":", color="C2", label=f"autotuner ({c['tuner']['trials']} trials)")
        ax.set_xlabel("configurations measured")
        ax.set_ylabel("best time (ms)")
        ax.set_title(name, fontsize=10)
        ax.legend(fontsize=7)
    figs.append(C.save(fig, out, "search_cost.png"))
    return figs


def render(data) -> str:
    p = data["provenance"]
    rows = []
    for name, c in data["cases"].items():
        g, m, t = c["grid"], c["model"], c["tuner"]
        rows.append([name, c["dims"], f"{m['time_s'] * 1e3:.3f} ms ({m['search_s'] * 1e3:.0f} ms to choose)",
                     f"{t['time_s'] * 1e3:.3f} ms ({t['trials']} trials, {t['search_s']:.0f} s)",
                     f"{g['best_s'] * 1e3:.3f} ms ({c['measured_ok']} of {c['candidates_in_space']}, {g['search_s']:.0f} s)"
                     if g["best_s"] else "-",
                     C.x(g["best_s"] / m["time_s"]) if g["best_s"] and m["time_s"] else "-",
                     f"{g['best_model_rank']} of {c['measured_ok']}" if g["best_model_rank"] else "-",
                     f"{g['spearman']:.2f}" if g["spearman"] is not None and not math.isnan(g["spearman"]) else "-"])
    return (f"{'Quick smoke run' if data['quick'] else 'Run'} on {C.machine_line(p)}; float32, both cores, medians "
            f"of {p.get('repeat')} calls; every measured point checked against the reference interpreter.\n\n"
            + C.table(rows, ["kernel", "dims", "model's choice", "autotuner", "grid best (points measured, time)",
                             "model / grid best (speed)", "grid best's rank in the model's order", "Spearman"]))


def headline(data) -> str:
    """One line for papers/README.md: the model's choice against the measured grid's best."""
    parts = []
    for name, c in data["cases"].items():
        g, m = c["grid"], c["model"]
        if g["best_s"] and m["time_s"]:
            parts.append(f"{name} model at {100 * g['best_s'] / m['time_s']:.0f}% of the grid best's speed "
                         f"({c['measured_ok']} points timed)")
    return "; ".join(parts)


if __name__ == "__main__":
    sys.exit(main())
