"""Cost model vs measurement: predicted and measured times of many schedules, and their rank correlation.

    python benchmarks/bench_model.py                         # matmul 512^3 and conv2d 1x56x56x64 -> 64, 3x3
    python benchmarks/bench_model.py --only matmul --count 40 --repeat 7
    python benchmarks/bench_model.py --calibrate             # one thread: the rates behind polytile.cost's constants

For each program the candidates are

* a spread of ``polytile.autotile.candidates`` (a seeded random sample of the
  configurations that fit the host's caches: tile sizes, loop orders), a
  quarter of them also without the register tile (``regtile=False``) and a
  third also with another loop parallel (an outer loop, ``j_t`` or ``i_t``;
  a loop of one iteration runs serially);
* untiled schedules: program order (``ijk``, its auto_parallel loop), the
  reduction loop moved out (``ikj`` / ``ci`` before ``co``), and program order
  tiled by 32 (``tile32``).

Each is predicted by ``polytile.cost.predict`` (any schedule; isl over the time
maps) and, for the autotile configurations, by ``cost.predict_config`` (what
autotile ranks with), then legality-checked and checked against the reference
interpreter by ``polytile.compare.compare``, and timed: ``--warmup`` untimed
calls, then the median of ``--repeat`` timed calls.  The timed calls go in
rounds (one call of every candidate per round) rather than one candidate's
calls in a burst, so a spell of load from other processes on a shared machine
lands on one sample of many candidates instead of every sample of one; and
before each round the script waits (``--pressure``, ``--max-wait``) until
other processes leave the CPUs alone (Linux CPU pressure, 10-second
average), recording what it found in the JSON.  The
score is Spearman's rank correlation between predicted and measured (median)
times, printed with the table and written with everything else (provenance,
steps, predictions, raw times) to ``benchmarks/results/model.json`` (with
``OMP_NUM_THREADS=n`` set: ``model_<n>threads.json``).

The descriptor is the detected host (``polytile.hardware.detect_host``); with
``OMP_NUM_THREADS`` set, its core count is that many.  On a machine shared with
other work, ``OMP_NUM_THREADS=1`` gives the steadier numbers: a kernel on all
cores waits at every barrier for a thread another process has preempted.

``--calibrate`` runs on one thread and prints, per kind of code, the
measured fraction of one core's peak next to the model's: that is how the
constants of ``polytile.cost`` were set (see its docstring).
"""
from __future__ import annotations

import dataclasses
import os
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

import _common

PROGRAMS = {
    "matmul": (_common.EXAMPLES / "matmul.tile", "M=512,N=512,K=512"),
    "conv2d": (_common.EXAMPLES / "conv2d.tile", "N=1,H=56,W=56,CI=64,KH=3,KW=3,CO=64"),
}


def host(threads: int = 0):
    """The detected host; ``threads`` (or OMP_NUM_THREADS) caps its cores at the threads OpenMP will use."""
    from polytile.hardware import detect_host

    hw = detect_host()
    n = threads or int(os.environ.get("OMP_NUM_THREADS", "0") or 0)
    if n and n < hw.cores:
        # Peaks were derived from the core count: derive them again.
        derived = abs(hw.peak_gflops_fp32 - hw.computed_peak_gflops("float32")) < 1e-6
        hw = dataclasses.replace(hw, cores=n, peak_gflops_fp32=None if derived else hw.peak_gflops_fp32 * n / hw.cores,
                                 peak_gflops_fp64=None if derived else hw.peak_gflops_fp64 * n / hw.cores)
    return hw


def untiled(name: str, s, st: str) -> List[Tuple[str, Any, str]]:
    """Program order, the reduction loop moved outward, and program order tiled by 32."""
    from polytile.compare import tile_contractions

    loops = s.loop_names(st)
    out = [("ijk" if name == "matmul" else "program-order", s, "program order + auto_parallel")]
    if name == "matmul":
        out.append(("ikj", s.reorder(st, ["i", "k", "j"]), "k moved outside j"))
    else:
        # The reduction loops (ky, kx, ci) outside the output channel co.
        red = [l for l in loops if l in ("ky", "kx", "ci")]
        order = [l for l in loops if l not in red and l != "co"] + red + ["co"]
        out.append(("ci-before-co", s.reorder(st, order), "reductions outside co (co innermost)"))
    out.append(("tile32", tile_contractions(s, 32), "first two loops tiled by 32, tile loop parallel"))
    return out


def spread(s, st: str, hw, count: int, seed: int):
    """``count`` autotile configurations (seeded sample); every fourth also without the register
    tile, every third also with another parallel loop (autotile picks one by its own rule)."""
    import numpy as np

    from polytile import autotile

    cfgs = autotile.candidates(s, st, hw)
    r = autotile.roles(s, st)
    rng = np.random.default_rng(seed)
    pick = sorted(rng.choice(len(cfgs), size=min(count, len(cfgs)), replace=False)) if cfgs else []
    chosen = [cfgs[k] for k in pick]
    out = list(chosen)
    loops = list(r.outer) + [f"{r.j}_t", f"{r.i}_t"] if r is not None else []
    for k, c in enumerate(chosen):
        if k % 4 == 0:
            out.append(dataclasses.replace(c, regtile=False))
        others = [l for l in loops if l != c.parallel]
        if k % 3 == 0 and others:
            out.append(dataclasses.replace(c, parallel=others[(k // 3) % len(others)]))
    seen, uniq = set(), []
    for c in out:
        if c not in seen:
            seen.add(c)
            uniq.append(c)
    return uniq


def cfg_name(c) -> str:
    return (f"{c.order} mc{c.mc} nc{c.nc} kc{c.kc} {c.mr}x{c.nr} par={c.parallel}"
            + ("" if c.regtile else " noreg"))


def run_program(name: str, args, hw) -> Tuple[Dict[str, Any], bool]:
    from polytile import autotile, cost, pipeline
    from polytile.compare import compare, format_table

    path, dims = PROGRAMS[name]
    s = pipeline.schedule(path, dims=dims)
    prog = pipeline.load_program(path)
    st = s.resolve(prog.outputs[0])
    items: List[Dict[str, Any]] = []
    for label, sched, origin in untiled(name, s, st):
        items.append({"name": label, "schedule": sched, "origin": origin, "config": None})
    cfgs = spread(s, st, hw, args.count, args.seed)
    t0 = time.perf_counter()
    cfg_preds = [cost.predict_config(s, c, hw) for c in cfgs]
    cfg_ms = (time.perf_counter() - t0) / max(len(cfgs), 1) * 1e3
    for c, pc in zip(cfgs, cfg_preds):
        items.append({"name": cfg_name(c), "schedule": autotile.apply(s, c), "origin": "autotile.candidates",
                      "config": c, "pred_config": pc})
    t0 = time.perf_counter()
    for it in items:
        it["pred"] = cost.predict(it["schedule"], hw)
    pred_ms = (time.perf_counter() - t0) / len(items) * 1e3

    print(f"== {name}  ({dims}, float32): {len(items)} schedules; predict_config {cfg_ms:.2f} ms/config, "
          f"predict {pred_ms:.1f} ms/schedule", flush=True)
    # Legality and the reference check (one call each); the timing is below, in rounds.
    result = compare(path, dims, "float32", [(it["name"], it["schedule"]) for it in items],
                     repeat=1, warmup=0, seed=args.seed, progress=_common.progress(args.quiet),
                     extra_provenance={"benchmark": f"model: {name}", **_common.run_info()})
    rows = list(zip(items, result.rows))
    waits = timed_in_rounds(path, dims, rows, args)
    measured = [(it, r) for it, r in rows if r.times]
    rho = cost.spearman([it["pred"].time_s for it, _ in measured], [r.median for _, r in measured])
    rho_min = cost.spearman([it["pred"].time_s for it, _ in measured], [r.min for _, r in measured])
    with_cfg = [(it, r) for it, r in measured if it["config"] is not None]
    rho_cfg = cost.spearman([it["pred_config"].time_s for it, _ in with_cfg], [r.median for _, r in with_cfg])

    table = [["schedule", "predicted ms", "config ms", "bound", "threads", "median ms", "min ms", "GFLOP/s", "check"]]
    for it, r in sorted(rows, key=lambda x: x[0]["pred"].time_s):
        p = it["pred"]
        table.append([it["name"], _common.ms(p.time_s),
                      _common.ms(it["pred_config"].time_s) if it["config"] is not None else "-",
                      p.bound, str(p.parallelism), _common.ms(r.median), _common.ms(r.min),
                      "-" if r.gflops is None else f"{r.gflops:.1f}", r.check])
    print(format_table(table))
    print(f"Spearman(predict, median) = {rho:.3f} over {len(measured)} schedules   "
          f"(vs min: {rho_min:.3f}; predict_config on the {len(with_cfg)} configurations: {rho_cfg:.3f})")
    print(flush=True)
    section = {
        "program": name, "dims": dims, "path": str(path.relative_to(_common.ROOT)),
        "spearman_predict_median": rho, "spearman_predict_min": rho_min, "spearman_config_median": rho_cfg,
        "predict_config_ms_per_config": cfg_ms, "predict_ms_per_schedule": pred_ms,
        "schedules": [_row_json(it, r) for it, r in rows],
        "rounds": waits,
        "compare": result.provenance,
    }
    return section, result.ok


def _psi_some(field: str) -> Optional[float]:
    try:
        with open("/proc/pressure/cpu", encoding="ascii") as f:
            for line in f:
                if line.startswith("some"):
                    return float(line.split(f"{field}=")[1].split()[0])
    except (OSError, IndexError, ValueError):
        pass
    return None


def cpu_pressure() -> Optional[float]:
    """Share of the last 10 s in which some runnable task waited for a CPU (Linux PSI), in percent."""
    return _psi_some("avg10")


def cpu_stall_us() -> Optional[float]:
    """Microseconds (since boot) during which some runnable task waited for a CPU (Linux PSI)."""
    return _psi_some("total")


def wait_for_quiet(threshold: float, max_wait: float) -> Dict[str, Any]:
    """Sleep (2 s at a time, at most ``max_wait`` s) until other processes leave the CPUs alone."""
    t0 = time.monotonic()
    first = p = cpu_pressure()
    while p is not None and p > threshold and time.monotonic() - t0 < max_wait:
        time.sleep(2.0)
        p = cpu_pressure()
    return {"pressure_before": first, "pressure_after": p, "waited_s": round(time.monotonic() - t0, 1)}


def timed_in_rounds(path, dims: str, rows, args) -> List[Dict[str, Any]]:
    """Replace each checked row's times by ``args.repeat`` calls timed in rounds, after ``args.warmup`` rounds.

    Before each round the script waits (up to ``args.max_wait`` s) until the CPU
    pressure from other processes is at most ``args.pressure``; a round during
    which tasks waited for a CPU more than ``args.pressure`` percent of the
    time (another process took a core the kernels were using) is measured
    again, up to ``args.repeat`` extra rounds.  Per round: the wait, the stall
    share, and whether it was kept.
    """
    from polytile import kernel as kernel_mod, pipeline
    from polytile.compare import random_inputs, time_calls

    prog = pipeline.load_program(path)
    shapes = pipeline.shapes_from_dims(prog, pipeline.parse_dims(dims))
    dtypes = ["float32"] * len(shapes)
    arrays = random_inputs(shapes, dtypes, "int", args.seed)
    calls = []
    for it, r in rows:
        r.times, r.speedup = [], None  # compare's single call only checked the output
        if r.check != "ok":
            continue
        spec = kernel_mod.compile(prog, schedule=it["schedule"]).specialize_shapes(shapes, dtypes)
        calls.append((r, lambda spec=spec: pipeline.run_specialization(spec, arrays)))
    say = _common.progress(args.quiet)
    say(f"timing {len(calls)} kernels: {args.warmup} warm-up and {args.repeat} timed rounds")
    rounds: List[Dict[str, Any]] = []
    kept = redone = 0
    while kept < args.warmup + args.repeat:
        w = wait_for_quiet(args.pressure, args.max_wait)
        if w["waited_s"] >= 1:
            say(f"round {len(rounds)}: waited {w['waited_s']} s for CPU pressure "
                f"{w['pressure_before']} -> {w['pressure_after']}")
        stall0, wall0 = cpu_stall_us(), time.perf_counter()
        times = [time_calls(call, 1)[0] for _, call in calls]  # interleaved: one call of each per round
        wall = time.perf_counter() - wall0
        stall1 = cpu_stall_us()
        share = None if stall0 is None or stall1 is None else 100 * (stall1 - stall0) / 1e6 / wall
        keep = share is None or share <= args.pressure or redone >= args.repeat
        w.update(stall_percent=None if share is None else round(share, 2), kept=keep, warmup=kept < args.warmup)
        rounds.append(w)
        if not keep:
            redone += 1
            say(f"round {len(rounds) - 1}: tasks waited for a CPU {share:.1f}% of the round; measuring it again")
            continue
        if kept >= args.warmup:
            for (r, _), dt in zip(calls, times):
                r.times.append(dt)
        kept += 1
    return rounds


def _pred_json(p) -> Dict[str, Any]:
    return {"time_s": p.time_s, "compute_s": p.compute_s, "traffic_bytes": p.traffic, "level_time_s": p.level_time_s,
            "flops": p.flops, "parallelism": p.parallelism, "bound": p.bound, "notes": list(p.notes)}


def _row_json(it, r) -> Dict[str, Any]:
    out = {"name": it["name"], "origin": it["origin"], "predict": _pred_json(it["pred"]), "measured": r.to_json()}
    if it["config"] is not None:
        out["config"] = it["config"].to_json()
        out["predict_config"] = _pred_json(it["pred_config"])
    return out


def calibrate(args) -> Dict[str, Any]:
    """One thread: each kind of code's measured fraction of one core's peak, next to the model's.

    The schedules keep their parallel loops (as in the benchmark), so the code
    measured is the code the benchmark runs (parallel bodies are outlined
    into functions of their own, which gcc optimises differently from code
    outside a parallel region).
    """
    from polytile import autotile, cost, pipeline
    from polytile.compare import compare, format_table

    hw = host(1)
    peak = hw.peak_gflops("float32")
    lanes = hw.vector_lanes("float32")
    out_rows, table = [], [["program", "code", "what", "min ms", "GFLOP/s (min)", "measured/peak", "predicted/peak"]]

    def mm_kinds(s):
        def cfg(mr, nr, reg=True):
            return autotile.TileConfig("S0", "i", "j", "k", mc=min(16 * mr, 512), nc=256, kc=256, mr=mr, nr=nr,
                                       lanes=lanes, order="jki", parallel="i_t", regtile=reg)
        kinds = [
            ("ijk", "k innermost: gcc interchanges j and k, vectorises j (EFF_VECTOR)", s),
            ("tile32", "the same in 32^3 tiles (EFF_VECTOR, VECTOR_STARTUP)",
             s.tile("C", i=32, j=32, k=32).parallel("C", "i_t")),
            ("ikj", "vectorised j loop of 512 (EFF_VECTOR)", s.reorder("C", ["i", "k", "j"])),
            ("plain 4x32", "blocked, j loop of 32, 16 vector chains (EFF_VECTOR, VECTOR_STARTUP)",
             autotile.apply(s, cfg(4, 32, False))),
            ("plain 4x16", "blocked, j loop of 16, 8 chains (VECTOR_STARTUP, VECTOR_CHAINS)",
             autotile.apply(s, cfg(4, 16, False))),
        ]
        for mr, nr in ((4, 16), (8, 16), (4, 32), (6, 32), (8, 32), (12, 32), (4, 64), (6, 64)):
            kinds.append((f"regtile {mr}x{nr}",
                          "register micro-kernel (KERNEL_EFF, LOAD_PORTS, OPERAND_FEED, FMA_LATENCY)",
                          autotile.apply(s, cfg(mr, nr))))
        return kinds

    def conv_kinds(s):
        r = autotile.roles(s, "S0")
        loops = s.loop_names("S0")
        red = [l for l in loops if l in ("ky", "kx", "ci")]
        reorder = [l for l in loops if l not in red and l != "co"] + red + ["co"]

        def cfg(mr, nr, reg=True):
            return autotile.TileConfig("S0", r.i, r.j, r.k, mc=48, nc=64, kc=64, mr=mr, nr=nr, lanes=lanes,
                                       order="jki", parallel="y", regtile=reg)
        return [
            ("program order", "ci innermost, a reduction after kx: no interchange (EFF_REDUCTION)", s),
            ("ci-before-co", "vectorised co loop of 64 inside the reductions (EFF_VECTOR)", s.reorder("S0", reorder)),
            ("plain 6x16", "blocked, co loop of 16 (VECTOR_STARTUP, VECTOR_CHAINS)",
             autotile.apply(s, cfg(6, 16, False))),
            ("regtile 6x16", "register micro-kernel", autotile.apply(s, cfg(6, 16))),
            ("regtile 4x64", "register micro-kernel", autotile.apply(s, cfg(4, 64))),
            ("regtile 4x48", "kernel on 3/4 of co, plain loops of 16 on the rest", autotile.apply(s, cfg(4, 48))),
        ]

    for name, build in (("matmul", mm_kinds), ("conv2d", conv_kinds)):
        if args.only and name != args.only:
            continue
        path, dims = PROGRAMS[name]
        kinds = build(pipeline.schedule(path, dims=dims))
        result = compare(path, dims, "float32", [(k, sch) for k, _, sch in kinds], repeat=max(args.repeat, 9),
                         warmup=args.warmup, seed=args.seed, progress=_common.progress(args.quiet), check=False)
        for (k, what, sch), r in zip(kinds, result.rows):
            p = cost.predict(sch, hw)
            meas = p.flops / r.min / 1e9 if r.min else None
            pred = p.flops / p.time_s / 1e9
            table.append([name, k, what, _common.ms(r.min), "-" if meas is None else f"{meas:.1f}",
                          "-" if meas is None else f"{meas / peak:.3f}", f"{pred / peak:.3f}"])
            out_rows.append({"program": name, "code": k, "what": what, "min_s": r.min, "median_s": r.median,
                             "measured_gflops": meas, "measured_fraction": None if meas is None else meas / peak,
                             "predicted_fraction": pred / peak, "steps": r.steps})
    print(f"== calibration: float32, one thread (peak {peak:.1f} GFLOP/s)")
    print(format_table(table))
    print(flush=True)
    return {"calibration": out_rows, "peak_gflops_one_core": peak}


def constants() -> Dict[str, float]:
    from polytile import cost

    return {k: getattr(cost, k) for k in cost.__all__ if k.isupper()}


def main(argv=None) -> int:
    p = _common.parser(__doc__.splitlines()[0], "model.json")
    p.add_argument("--only", choices=tuple(PROGRAMS), help="run one of the programs")
    p.add_argument("--count", type=int, default=28, help="autotile configurations sampled per program")
    p.add_argument("--calibrate", action="store_true", help="one thread: measured rates behind the model's constants")
    p.add_argument("--pressure", type=float, default=5.0,
                   help="before each timing round, wait while other processes keep the CPU pressure "
                        "(/proc/pressure/cpu some avg10, percent) above this")
    p.add_argument("--max-wait", type=float, default=120.0, help="longest wait before a round, seconds")
    args = p.parse_args(argv)
    if args.calibrate:
        # libgomp reads this when the first kernel is loaded, which has not happened yet.
        os.environ["OMP_NUM_THREADS"] = "1"
        data = calibrate(args)
        if args.out == _common.RESULTS / "model.json":
            args.out = _common.RESULTS / "model_calibration.json"
        data = {"provenance": _common.provenance(benchmark="model calibration"), "constants": constants(), **data}
        print(f"wrote {_common.write_json(args.out, data)}")
        return 0

    from polytile.hardware import to_dict

    hw = host()
    threads = os.environ.get("OMP_NUM_THREADS")
    if threads and args.out == _common.RESULTS / "model.json":
        args.out = _common.RESULTS / f"model_{threads}threads.json"
    sections, ok = [], True
    for name in PROGRAMS:
        if args.only and name != args.only:
            continue
        sec, good = run_program(name, args, hw)
        sections.append(sec)
        ok &= good
    summary = {s["program"]: round(s["spearman_predict_median"], 4) for s in sections}
    print(f"Spearman(predicted, measured median) on {hw.cores} thread(s):",
          ", ".join(f"{k} {v:.3f}" for k, v in summary.items()))
    data = {"provenance": _common.provenance(benchmark="model", descriptor=to_dict(hw)), "constants": constants(),
            "spearman": summary, "programs": sections}
    out = _common.write_json(args.out, data)
    print(f"wrote {out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
