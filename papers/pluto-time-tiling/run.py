"""Pluto (Bondhugula et al., PLDI 2008): time tiling with skewing makes stencils parallel and cache-friendly.

For each time-iterated stencil of tests/c_kernels (jacobi-1d, jacobi-2d, seidel-2d, heat-3d), build and
time with gcc -O3 (both cores): the original; `polytile opt --no-tile` (space loops parallel, no time
tiling: the "space-only" parallelisation Pluto compares against); `polytile opt` (skewed time tiles,
wavefront-parallel); and the same schedule with the time-tile size swept.  Every variant's arrays are
checked bitwise against the original's.

    python papers/pluto-time-tiling/run.py            # about 4 minutes on 2 cores
    python papers/pluto-time-tiling/run.py --quick --out /tmp/pluto
"""
from __future__ import annotations

import copy
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import paperlib as C  # noqa: E402

from polytile import c_runner  # noqa: E402
from polytile.deadline import with_deadline  # noqa: E402

TITLE = "Pluto: time tiling with skewing (Bondhugula et al., PLDI 2008)"

KERNELS = {  # name: (full sizes, quick sizes)
    "jacobi-1d": ({"tsteps": 2000, "n": 100000}, {"tsteps": 6, "n": 300}),
    "jacobi-2d": ({"tsteps": 100, "n": 1200}, {"tsteps": 4, "n": 40}),
    "seidel-2d": ({"tsteps": 20, "n": 1200}, {"tsteps": 3, "n": 30}),
    "heat-3d": ({"TSTEPS": 40, "N": 120}, {"TSTEPS": 2, "N": 12}),
}
TIME_TILES = (2, 4, 8, 16, 32)
CODEGEN_S = 30.0  # seconds of code generation allowed per swept schedule
QUICK = ("jacobi-1d", "jacobi-2d")


def time_tiled_steps(results):
    """The default schedule's steps and the name of its time loop (the skewed tile loop), or None."""
    if len(results) != 1 or results[0].schedule is None:
        return None, None
    steps = [s.to_json() for s in results[0].schedule.steps]
    skew = next((s for s in steps if s["op"] == "skew"), None)
    if skew is None or not skew["loop"].endswith("_t"):
        return steps, None
    return steps, skew["loop"][:-2]


def with_time_tile(steps, loop: str, size: int):
    out = copy.deepcopy(steps)
    for s in out:
        if s["op"] == "tile" and loop in s.get("sizes", {}):
            s["sizes"][loop] = size
    return out


def main(argv=None) -> int:
    args = C.parse(__doc__.splitlines()[0], __file__, argv=argv)
    say = C.say()
    repeat = 2 if args.quick else 5
    kernels = {}
    for name, (full, quick) in KERNELS.items():
        if args.quick and name not in QUICK:
            continue
        path = C.ROOT / "tests" / "c_kernels" / f"{name}.c"
        sizes = quick if args.quick else full
        say(f"{name} {sizes}")
        call = c_runner.prepare(path, sizes=sizes)
        _, results = c_runner.optimise(path)
        steps, loop = time_tiled_steps(results)
        variants = c_runner.variants(no_tile=True)
        default_t, gave_up = None, []
        if loop is not None:
            default_t = next(s["sizes"][loop] for s in steps if s["op"] == "tile" and loop in s.get("sizes", {}))
            for t in ((4,) if args.quick else TIME_TILES):
                sched = with_time_tile(steps, loop, t)
                # isl's AST generation of a replayed schedule has no budget of its own, and grows
                # steeply with the time tile on some nests (jacobi-1d: T=8 5 s, T=16 over 2 minutes).
                if with_deadline(lambda: (c_runner.optimise(path, schedule=sched), "ok")[1], CODEGEN_S) is None:
                    gave_up.append(t)
                    continue
                variants.append(c_runner.Variant(f"T={t}", {"schedule": sched},
                                                 f"polytile opt's schedule with time tiles of {t}"))
        res = c_runner.compare_c(call, variants, repeat=repeat, warmup=1, progress=say)
        rows = {r.name: r.to_json() for r in res.rows}
        kernels[name] = {"sizes": sizes, "time_loop": loop, "default_time_tile": default_t,
                         "schedule": steps, "rows": rows, "codegen_gave_up": gave_up}
    data = {"paper": "Bondhugula, Hartono, Ramanujam, Sadayappan: A practical automatic polyhedral "
                     "parallelizer and locality optimizer, PLDI 2008",
            "quick": args.quick, "kernels": kernels, "codegen_s": CODEGEN_S, "provenance": C.provenance(repeat=repeat)}
    figures = draw(data, args.out)
    C.finish(args, data, render, figures)
    return 0


def _speedup(rows, name):
    r = rows.get(name)
    return r["speedup"] if r and r["check"] == "ok" else None


def draw(data, out: Path):
    plt = C.pyplot()
    names = list(data["kernels"])
    fig, ax = plt.subplots(figsize=(7, 3.6))
    width = 0.38
    for k, (label, row) in enumerate((("space loops parallel (--no-tile)", "no-tile"),
                                      ("time-tiled, skewed (polytile opt)", "opt"))):
        vals = [_speedup(data["kernels"][n]["rows"], row) or 0.0 for n in names]
        bars = ax.bar([i + (k - 0.5) * width for i in range(len(names))], vals, width, label=label)
        ax.bar_label(bars, labels=[f"{v:.1f}x" for v in vals], fontsize=8)
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel("speedup over gcc -O3 (original)")
    ax.set_title("Time tiling vs space-only parallelisation (2 cores)")
    ax.legend(fontsize=8)
    figs = [C.save(fig, out, "speedups.png")]
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for n in names:
        k = data["kernels"][n]
        pts = [(int(r[2:]), _speedup(k["rows"], r)) for r in k["rows"] if r.startswith("T=")]
        pts = [(t, s) for t, s in pts if s]
        if pts:
            ax.plot([t for t, _ in pts], [s for _, s in pts], marker="o", label=f"{n} (default T={k['default_time_tile']})")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("time-tile size T (time steps per tile)")
    ax.set_ylabel("speedup over gcc -O3")
    ax.set_title("Dependence on the time-tile size")
    ax.legend(fontsize=8)
    figs.append(C.save(fig, out, "time_tile_size.png"))
    return figs


def render(data) -> str:
    rows = []
    for n, k in data["kernels"].items():
        r = k["rows"]
        sweep = [(row, _speedup(r, row)) for row in r if row.startswith("T=")]
        sweep = [(row, s) for row, s in sweep if s]
        best = max(sweep, key=lambda x: x[1]) if sweep else None
        checks = "all bitwise" if all(v["check"] == "ok" for v in r.values()) else \
            ", ".join(f"{name}: {v['check']}" for name, v in r.items() if v["check"] != "ok")
        rows.append([n, ", ".join(f"{a}={b}" for a, b in k["sizes"].items()),
                     f"{r['original']['median_s'] * 1e3:.1f} ms", C.x(_speedup(r, "no-tile")),
                     C.x(_speedup(r, "opt")) + (f" (T={k['default_time_tile']})" if k["default_time_tile"] else ""),
                     (f"{C.x(best[1])} ({best[0]})" if best else "-")
                     + (f"; T={', '.join(map(str, k['codegen_gave_up']))}: code generation over "
                        f"{data.get('codegen_s', CODEGEN_S):.0f} s" if k.get("codegen_gave_up") else ""), checks])
    p = data["provenance"]
    head = (f"{'Quick smoke run' if data['quick'] else 'Run'} on {C.machine_line(p)}; medians of "
            f"{p.get('repeat')} calls, speedups over the original built with gcc -O3:\n\n")
    return head + C.table(rows, ["kernel", "sizes", "gcc -O3", "space-only parallel", "time-tiled (default T)",
                                 "best T", "check"])


def headline(data) -> str:
    """One line for papers/README.md."""
    parts = []
    for n, k in data["kernels"].items():
        t, s = _speedup(k["rows"], "opt"), _speedup(k["rows"], "no-tile")
        if t and s:
            parts.append(f"{n} {t:.1f}x ({t / s:.1f}x over space-only)")
    return "time-tiled over gcc -O3: " + ", ".join(parts)


if __name__ == "__main__":
    sys.exit(main())
