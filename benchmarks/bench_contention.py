"""polytile and numpy beside 0, 1 and 2 busy processes: how each degrades when it loses cores (issue 14).

    python benchmarks/bench_contention.py                      # 5 workloads x loads 0,1,2 x 3 trials: ~6 minutes
    python benchmarks/bench_contention.py --only conv56        # one workload
    python benchmarks/bench_contention.py --loads 0,1 --calls 40
    OMP_WAIT_POLICY=passive python benchmarks/bench_contention.py --only conv56 sgemm

Workloads (Tile programs of ``examples/`` at the sizes of ``bench_gemm.py``,
``bench_conv.py``, ``bench_fused.py`` and ``bench_batched.py``, float32
standard normal inputs, against the same numpy baselines):

* ``sgemm``: ``matmul.tile`` 1024^3 against ``numpy.matmul``;
* ``conv56``, ``conv28``: ``conv2d.tile`` 1x56x56x64 * 3x3x64x64 and
  1x28x28x128 * 3x3x128x128 against the best of im2col and einsum;
* ``fused``: ``matmul_bias_relu.tile`` 1024^3 against
  ``C = A @ W; C += b; np.maximum(C, 0, out=C)``;
* ``batched``: ``batched_matmul.tile`` 32 x (128x64 @ 64x128) against
  ``numpy.matmul`` on the stacks.

Each workload is compiled once (``polytile.compile``, the default schedule)
and checked against a float64 truth; then for every load level of ``--loads``
that many **busy processes** are started (separate Python processes spinning
on integer arithmetic, nothing else), polytile and numpy are timed
**interleaved** with ``bench_all.measure_interleaved`` (rounds in which every
entry takes one turn; a turn is one call or, for fast kernels, enough
back-to-back calls to last ``--min-sample``; ``--gap`` idle seconds before
every turn), passes of ``--rounds`` rounds are repeated until every entry has
at least ``--calls`` timed calls, and the busy processes are killed.  numpy
runs in a worker process (``bench_all.Worker``), polytile in this one, so
OpenBLAS's and OpenMP's thread pools never share a process.  There are two
workers, one per ``OPENBLAS_CORETYPE`` setting (``bench_all.coretype_envs``);
each workload is timed against the one whose numpy is faster in a quiet probe
before the levels (5 interleaved turns each): an environment that pins
OpenBLAS to older kernels must not set the pace.
The levels are measured ``--trials`` times over (0, 1, 2, 0, 1, 2, ...),
each time with fresh busy processes, because the collapse is intermittent:
in one trial a kernel keeps its quiet speed beside a busy process, in the
next it is 25x slower (where the scheduler puts the threads decides it).

Before each workload the script waits (at most ``--max-wait`` s) until the
machine is idle apart from itself: less than ``--idle-threshold`` cores busy
over a 1 s window of ``/proc/stat``.  During every level it records how much
CPU the machine, this benchmark (main process, numpy worker), the busy
processes and everything else ("foreign") used, and the hypervisor's steal
time.  A level during which others used ``--idle-threshold`` cores or more
is measured again after waiting for idle (at most ``--retries`` times; the
quietest attempt is kept) and, if still so, flagged "noisy" in the table.

The table gives per workload and load level polytile's and numpy's time in
ms (the median of the trials' medians; min and max of all calls), each one's
slowdown against its own time at load 0, the ratio numpy / polytile (> 1:
polytile faster), and at load 1 the issue's two acceptance checks, judged on
the worst trial (its median against the quiet time): polytile slowdown <=
2.5x, and ratio >= 0.8 x the quiet ratio (polytile may not lose more ground
to numpy than numpy's own degradation allows).  Writes
``benchmarks/results/contention.json`` (provenance, per level and trial
every call's time, the CPU accounting and the 1-minute load average at every
round).

Set ``OMP_WAIT_POLICY``, ``GOMP_SPINCOUNT``, ``OMP_NUM_THREADS`` or
``OPENBLAS_NUM_THREADS`` in the environment to measure their effect (they are
recorded in the JSON).
"""
from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

import _common
import bench_all
import bench_batched
import bench_conv
import bench_fused
import bench_gemm
from polytile.compare import format_table, spread

#: The issue's acceptance limits at one busy process.
MAX_SLOWDOWN = 2.5
MIN_RATIO_KEPT = 0.8
#: Fewer timed calls per entry and level than this and a median under load means little.
MIN_CALLS = 20

BASELINES: Dict[str, Callable[..., np.ndarray]] = {
    **bench_gemm.BASELINES, **bench_conv.BASELINES, **bench_fused.BASELINES, **bench_batched.BASELINES}

#: Environment variables that change how either side's threads wait or how many there are.
THREAD_ENV = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_NUM_THREADS", "OMP_PROC_BIND", "OMP_SCHEDULE",
              "OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE", "POLYTILE_NUM_THREADS")


def workloads() -> Dict[str, bench_all.Workload]:
    """The five workloads by their ``--only`` name, built by the per-family scripts at their default sizes."""
    sizes = argparse.Namespace(sizes=[1024], size=1024, batch=32, m=128, k=64, n=128)
    conv56, conv28 = bench_conv.workloads(sizes)
    return {"sgemm": bench_gemm.workloads(sizes)[0], "conv56": conv56, "conv28": conv28,
            "fused": bench_fused.workloads(sizes)[0], "batched": bench_batched.workloads(sizes)[0]}


# ---------------------------------------------------------------------------
# Busy processes and CPU accounting
# ---------------------------------------------------------------------------

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _machine_ticks() -> Dict[str, int]:
    """Busy, idle and steal clock ticks of all CPUs since boot (the ``cpu`` line of /proc/stat)."""
    with open("/proc/stat", encoding="ascii") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    v += [0] * (8 - len(v))
    idle = v[3] + v[4]                      # idle + iowait
    steal = v[7]
    return {"busy": sum(v[:8]) - idle - steal, "steal": steal}


def _process_ticks(pid: int) -> int:
    """User + system ticks of process ``pid`` (all its threads); 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])   # utime, stime (fields 14 and 15 of proc(5))


class CpuMeter:
    """Cores used during a block: by the machine, by our processes, by the busy processes, by the rest."""

    def __init__(self, ours: Sequence[int], busy: Sequence[int] = ()):
        self.ours, self.busy = list(ours), list(busy)

    def __enter__(self) -> "CpuMeter":
        self.t0 = time.monotonic()
        self.m0 = _machine_ticks()
        self.o0 = sum(_process_ticks(p) for p in self.ours)
        self.b0 = sum(_process_ticks(p) for p in self.busy)
        return self

    def __exit__(self, *exc) -> None:
        wall = time.monotonic() - self.t0
        m1 = _machine_ticks()
        ours = sum(_process_ticks(p) for p in self.ours) - self.o0
        busy = sum(_process_ticks(p) for p in self.busy) - self.b0
        machine = m1["busy"] - self.m0["busy"]
        cores = lambda ticks: round(ticks / _TICK / wall, 3) if wall > 0 else None  # noqa: E731
        self.result = {"wall_s": round(wall, 2), "machine_busy_cores": cores(machine), "benchmark_cores": cores(ours),
                       "busy_process_cores": cores(busy), "foreign_cores": cores(max(0, machine - ours - busy)),
                       "steal_cores": cores(m1["steal"] - self.m0["steal"])}


def foreign_cores(ours: Sequence[int], window: float = 1.0) -> float:
    """Cores busy with other people's work over ``window`` seconds."""
    with CpuMeter(ours) as m:
        time.sleep(window)
    return m.result["foreign_cores"] or 0.0


def wait_for_idle(ours: Sequence[int], threshold: float, max_wait: float, say) -> Dict[str, Any]:
    """Wait until fewer than ``threshold`` cores are busy with others' work (at most ``max_wait`` s)."""
    t0 = time.monotonic()
    first = used = foreign_cores(ours)
    if used >= threshold:
        say(f"{used:.2f} cores busy with other work: waiting up to {max_wait:.0f} s for an idle machine")
    while used >= threshold and time.monotonic() - t0 < max_wait:
        time.sleep(2.0)
        used = foreign_cores(ours)
    return {"threshold_cores": threshold, "waited_s": round(time.monotonic() - t0, 1), "foreign_cores_first": first,
            "foreign_cores_when_measuring": used, "idle": used < threshold, "loadavg": bench_all.loadavg()}


# ---------------------------------------------------------------------------
# Measuring
# ---------------------------------------------------------------------------


def measure_level(make_subjects: Callable[[], List[bench_all.Subject]], nbusy: int, args, say,
                  ours: Sequence[int]) -> Dict[str, Any]:
    """Time fresh subjects interleaved beside ``nbusy`` busy processes; stats, rounds' load and CPU use.

    Passes of ``args.rounds`` interleaved rounds (the first after ``args.warmup``
    warm-up rounds) are repeated until every subject has ``args.calls`` timed calls.
    """
    subjects = make_subjects()
    loads: List[List[float]] = []
    with _common.busy_processes(nbusy) as procs, CpuMeter(ours, [p.pid for p in procs]) as meter:
        warmup = args.warmup
        while True:
            loads += bench_all.measure_interleaved(subjects, args.rounds, warmup, args.gap, args.min_sample, {}, say)
            warmup = 0
            if min(len(s.times) for s in subjects) >= args.calls:
                break
    return {"busy_processes": nbusy, "cpu": meter.result, "noisy": meter.result["foreign_cores"] >= args.idle_threshold,
            "load_rounds": loads, "timings": {s.name: s.stats() for s in subjects}}


def measure_level_retrying(make_subjects: Callable[[], List[bench_all.Subject]], nbusy: int, args, say,
                           ours: Sequence[int], name: str) -> Dict[str, Any]:
    """:func:`measure_level`, measured again (after waiting for idle) while others' work made it noisy.

    At most ``args.retries`` more attempts; the one with the fewest foreign cores is kept, and
    the foreign cores of every attempt are recorded with it.
    """
    attempts = []
    for attempt in range(args.retries + 1):
        if attempt:
            say(f"{name}: {nbusy} busy: {attempts[-1]['cpu']['foreign_cores']:.2f} foreign cores, measuring again")
            wait_for_idle(ours, args.idle_threshold, args.max_wait, say)
        say(f"{name}: {nbusy} busy process(es)" + (f", attempt {attempt + 1}" if attempt else ""))
        attempts.append(measure_level(make_subjects, nbusy, args, say, ours))
        if not attempts[-1]["noisy"]:
            break
    kept = min(attempts, key=lambda lv: lv["cpu"]["foreign_cores"])
    kept["attempts_foreign_cores"] = [lv["cpu"]["foreign_cores"] for lv in attempts]
    return kept


def faster_worker(workers: Sequence[bench_all.Worker], key: str, baselines: Sequence[str], seconds: Dict[str, float],
                  rounds: int = 5) -> Tuple[bench_all.Worker, Dict[str, float]]:
    """The worker whose numpy is faster on ``key`` quietly (median over ``rounds`` interleaved turns of its
    best baseline), and every worker's median: an environment that pins OpenBLAS to older kernels
    (``OPENBLAS_CORETYPE=Haswell`` on an AVX-512 machine) must not set the pace polytile is judged by.
    ``seconds``: one call's time per baseline (sizes each turn to ~20 ms of calls)."""
    inner = {b: max(1, min(1000, int(0.02 / max(seconds.get(b, 0.02), 1e-6)))) for b in baselines}
    times: Dict[Tuple[int, str], List[float]] = {}
    for _ in range(rounds):
        for k, wk in enumerate(workers):
            for b in baselines:
                times.setdefault((k, b), []).extend(wk.ask(cmd="time", key=key, baseline=b, inner=inner[b])["times"])
    medians = {wk.label: min(statistics.median(times[(k, b)]) for b in baselines) for k, wk in enumerate(workers)}
    best = min(range(len(workers)), key=lambda k: medians[workers[k].label])
    return workers[best], medians


def run_workload(name: str, w: bench_all.Workload, workers: Sequence[bench_all.Worker], args, say,
                 tmp: Path) -> Dict[str, Any]:
    """Compile, check, then every load level; a JSON-able record with the summary per level."""
    import polytile

    arrays, files, truth = bench_all.workload_inputs(w, name, args.seed, tmp)
    rec: Dict[str, Any] = {"name": name, "family": w.family, "shape": w.shape,
                           "program": str(w.tile.relative_to(_common.ROOT)), "dims": w.dims,
                           "input_shapes": [list(s) for s in w.shapes], "flops": w.flops,
                           "baselines": list(w.baselines)}
    say(f"{name}: compiling polytile's default")
    kernel = polytile.compile(w.tile)
    spec = kernel.specialize(*arrays)
    rec["polytile_schedule"] = {"steps": [s.to_json() for s in spec.schedule.steps],
                                "describe": spec.schedule.describe()}
    checks = {"polytile": bench_all.check(kernel(*arrays), truth)}
    seconds: Dict[str, float] = {}
    for wk in workers:
        wk.ask(cmd="load", key=name, files=files)
        for b in w.baselines:
            out_file = str(tmp / f"{name}-out-{b}.npy")
            seconds[b] = wk.ask(cmd="run", key=name, baseline=b, out=out_file)["seconds"]
            checks[f"numpy:{b}" + ("" if wk is workers[0] else f" ({wk.label})")] = bench_all.check(np.load(out_file),
                                                                                                  truth)
    rec["checks"] = checks
    bad = [k for k, c in checks.items() if not c["ok"]]
    if bad:
        say(f"{name}: CHECK FAILED ({', '.join(bad)}): not timed")
        for wk in workers:
            wk.ask(cmd="drop", key=name)
        rec["levels"] = rec["summary"] = []
        return rec
    worker, medians = faster_worker(workers, name, w.baselines, seconds)
    rec["numpy_core_type"] = {"chosen": worker.label, "quiet_probe_median_s": medians}
    say(f"{name}: numpy timed with {worker.label} (quiet probe: "
        + ", ".join(f"{k} {v * 1e3:.3f} ms" for k, v in medians.items()) + ")")
    for wk in workers:
        if wk is not worker:
            wk.ask(cmd="drop", key=name)

    def subjects() -> List[bench_all.Subject]:
        return ([bench_all.Subject(f"numpy:{b}", worker=worker, baseline=b, key=name) for b in w.baselines]
                + [bench_all.Subject("polytile", call=lambda: kernel(*arrays))])

    ours = [os.getpid()] + [wk.proc.pid for wk in workers]
    rec["idle_wait"] = wait_for_idle(ours, args.idle_threshold, args.max_wait, say)
    rec["levels"] = []
    for trial in range(args.trials):
        for nbusy in args.loads:
            level = measure_level_retrying(subjects, nbusy, args, say, ours, f"{name} trial {trial + 1}")
            rec["levels"].append({"trial": trial + 1, **level})
    worker.ask(cmd="drop", key=name)
    rec["summary"] = summarise(rec["levels"], [f"numpy:{b}" for b in w.baselines])
    return rec


def _pooled(levels: Sequence[Dict[str, Any]], name: str) -> Dict[str, Any]:
    """``name`` over all ``levels`` (trials): the median of the trials' medians, min and max of every call.

    Each trial weighs the same: a trial in which the kernel collapsed makes fewer calls (a turn
    fills ``--min-sample``), so the median of all calls would hide it.
    """
    medians = [lv["timings"].get(name, {}).get("median_s") for lv in levels]
    times = [t for lv in levels for t in lv["timings"].get(name, {}).get("times_s", [])]
    sp = spread(times)
    have = [m for m in medians if m is not None]
    return {"median_s": spread(have).median, "min_s": sp.min, "max_s": sp.max, "calls": len(times),
            "trial_medians_s": medians}


def summarise(levels: Sequence[Dict[str, Any]], numpy_names: Sequence[str],
              subject: str = "polytile") -> List[Dict[str, Any]]:
    """Per load level (over its trials): medians, slowdowns against load 0, the ratio and the checks.

    A level's time is the median of its trials' medians; the baseline is the numpy formulation
    with the lowest.  Slowdown and ratio are given pooled and for the **worst trial** (its
    median against the pooled quiet one), and the checks judge the worst trial: a collapse that
    happens in one trial of three is a collapse.
    """
    by_load: Dict[int, List[Dict[str, Any]]] = {}
    for lv in levels:
        by_load.setdefault(lv["busy_processes"], []).append(lv)
    out = []
    quiet = None
    for nbusy in sorted(by_load):
        lvs = by_load[nbusy]
        pt = _pooled(lvs, subject)
        nps = {n: _pooled(lvs, n) for n in numpy_names}
        have = [n for n in numpy_names if nps[n]["median_s"] is not None]
        best = min(have, key=lambda n: nps[n]["median_s"]) if have else None
        npy = nps[best] if best else {}
        s: Dict[str, Any] = {"busy_processes": nbusy, "trials": len(lvs), "numpy_best": best,
                             **{f"polytile_{k}": v for k, v in pt.items()},
                             **{f"numpy_{k}": v for k, v in npy.items()},
                             "foreign_cores": max(lv["cpu"]["foreign_cores"] for lv in lvs),
                             "noisy": any(lv["noisy"] for lv in lvs)}
        s["ratio"] = s["numpy_median_s"] / s["polytile_median_s"] if s.get("numpy_median_s") else None
        if nbusy == 0:
            quiet = s
        if quiet is not None:
            q_pt, q_np = quiet["polytile_median_s"], quiet.get("numpy_median_s")
            s["polytile_slowdown"] = s["polytile_median_s"] / q_pt
            s["numpy_slowdown"] = s["numpy_median_s"] / q_np if q_np and s.get("numpy_median_s") else None
            s["ratio_kept"] = s["ratio"] / quiet["ratio"] if s["ratio"] and quiet["ratio"] else None
            trials = [(p / q_pt, (n / p) / quiet["ratio"] if n and quiet["ratio"] else None)
                      for p, n in zip(pt["trial_medians_s"], npy.get("trial_medians_s", [None] * len(lvs))) if p]
            s["worst_trial_slowdown"] = max(t[0] for t in trials)
            kept = [t[1] for t in trials if t[1] is not None]
            s["worst_trial_ratio_kept"] = min(kept) if kept else None
            if nbusy > 0:
                s["check_slowdown"] = s["worst_trial_slowdown"] <= MAX_SLOWDOWN
                s["check_ratio"] = s["worst_trial_ratio_kept"] is not None \
                    and s["worst_trial_ratio_kept"] >= MIN_RATIO_KEPT
        out.append(s)
    return out


# ---------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------


def _ms_range(med: Optional[float], lo: Optional[float], hi: Optional[float]) -> str:
    if med is None:
        return "-"
    return f"{med * 1e3:.3f} ({lo * 1e3:.3f}-{hi * 1e3:.3f})"


def _x(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:.2f}x"


def _verdict(ok: Optional[bool], acceptance: bool) -> str:
    if ok is None:
        return "-"
    word = "PASS" if ok else "FAIL"
    return word if acceptance else word.lower() + " (info)"


def table(records: List[Dict[str, Any]], label: str = "polytile") -> str:
    """One row per workload and load level (the checks are the acceptance rows at one busy process)."""
    rows = [["workload", "busy", f"{label} ms (min-max)", "numpy ms (min-max)", f"{label} slowdown (worst trial)",
             "numpy slowdown", "ratio np/pt", "ratio vs quiet (worst trial)", f"slowdown <= {MAX_SLOWDOWN}x",
             f"ratio >= {MIN_RATIO_KEPT}x quiet", "foreign cores"]]
    for r in records:
        for s in r.get("summary", []):
            acceptance = s["busy_processes"] == 1
            several = len(r.get("baselines", ())) > 1 and s["numpy_best"]
            best = f" [{s['numpy_best'].split(':', 1)[1]}]" if several else ""
            worst = s["trials"] > 1 and s["busy_processes"] > 0
            rows.append([f"{r['name']} {r['shape']}", s["busy_processes"],
                         _ms_range(s["polytile_median_s"], s["polytile_min_s"], s["polytile_max_s"]),
                         _ms_range(s.get("numpy_median_s"), s.get("numpy_min_s"), s.get("numpy_max_s")) + best,
                         _x(s.get("polytile_slowdown")) + (f" ({_x(s['worst_trial_slowdown'])})" if worst else ""),
                         _x(s.get("numpy_slowdown")), _x(s["ratio"]),
                         _x(s.get("ratio_kept")) + (f" ({_x(s['worst_trial_ratio_kept'])})" if worst else ""),
                         _verdict(s.get("check_slowdown"), acceptance), _verdict(s.get("check_ratio"), acceptance),
                         f"{s['foreign_cores']:.2f}" + (" noisy" if s["noisy"] else "")])
    return format_table(rows)


def _loads(text: str) -> List[int]:
    try:
        levels = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers such as 0,1,2, got {text!r}") from None
    if not levels or any(n < 0 for n in levels) or len(set(levels)) != len(levels):
        raise argparse.ArgumentTypeError(f"expected distinct non-negative integers such as 0,1,2, got {text!r}")
    return sorted(levels)


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0],
                                epilog="examples:\n" + __doc__.split("\n\n", 2)[1],
                                formatter_class=lambda prog: argparse.RawDescriptionHelpFormatter(prog, width=100))
    d = " (default: %(default)s)"
    p.add_argument("--loads", type=_loads, default="0,1,2",
                   help="busy processes beside the kernels, one level each, e.g. 0,1,2; slowdowns are against 0" + d)
    p.add_argument("--calls", type=_common.at_least(int, MIN_CALLS, "timed calls (a median under load of fewer is noise)"),
                   default=MIN_CALLS,
                   help=f"at least this many timed calls per entry, level and trial (>= {MIN_CALLS})" + d)
    p.add_argument("--only", nargs="+", metavar="NAME", choices=tuple(workloads()),
                   help="run these workloads only: " + ", ".join(workloads()))
    p.add_argument("--trials", type=_common.at_least(int, 1, "trial"), default=3,
                   help="measure every load level this many times (fresh busy processes each; "
                        "the checks judge the worst trial)" + d)
    p.add_argument("--rounds", type=_common._repeat, default=_common.MIN_REPEAT,
                   help="interleaved rounds per pass; passes repeat until --calls is reached" + d)
    p.add_argument("--warmup", type=_common._warmup, default=1, help="untimed rounds at every level first" + d)
    p.add_argument("--gap", type=float, default=0.2, help="idle seconds before every turn" + d)
    p.add_argument("--min-sample", dest="min_sample", type=float, default=0.05,
                   help="a turn repeats a fast call until it lasts this many seconds" + d)
    p.add_argument("--idle-threshold", dest="idle_threshold", type=float, default=0.3,
                   help="cores busy with others' work above which the machine is not idle (wait; flag 'noisy')" + d)
    p.add_argument("--max-wait", dest="max_wait", type=float, default=120.0,
                   help="wait at most this many seconds for an idle machine before each workload" + d)
    p.add_argument("--retries", type=_common.at_least(int, 0, "(0: never measure again)"), default=2,
                   help="measure a level again (after waiting for idle) at most this often while it is noisy" + d)
    p.add_argument("--seed", type=int, default=0, help="random seed of the inputs" + d)
    p.add_argument("--out", type=Path, default=_common.RESULTS / "contention.json", help="JSON results file" + d)
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return p


def thread_env() -> Dict[str, Optional[str]]:
    return {k: os.environ.get(k) for k in THREAD_ENV}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if bench_all.WORKER_FLAG in argv:
        return bench_all.worker_main(BASELINES)
    args = make_parser().parse_args(argv)
    say = _common.progress(args.quiet)
    # A plain kill must still run the clean-ups (busy processes, the numpy worker).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    chosen = {k: w for k, w in workloads().items() if not args.only or k in args.only}
    records = []
    workers = [bench_all.Worker(Path(__file__), label, env) for label, env in bench_all.coretype_envs()]
    try:
        with tempfile.TemporaryDirectory(prefix="polytile-contention-") as tmp:
            for name, w in chosen.items():
                records.append(run_workload(name, w, workers, args, say, Path(tmp)))
    finally:
        for wk in workers:
            wk.close()

    for wk in workers:
        print(f"numpy {np.__version__} with {wk.label}, BLAS: {wk.info['blas'].get('summary')}")
    print(f"{os.cpu_count()} logical CPUs; threads: "
          + (", ".join(f"{k}={v}" for k, v in thread_env().items() if v is not None) or "defaults")
          + "; numpy timed with the core type faster on each workload quietly: "
          + ", ".join(f"{r['name']}: {r['numpy_core_type']['chosen']}" for r in records if "numpy_core_type" in r))
    print(table(records))
    print(f"busy = busy processes beside the kernels; ms = median of the medians of {args.trials} trial(s) "
          f"(min-max of all calls), >= {args.calls} calls per entry, level and trial (interleaved rounds); "
          f"slowdown = median / own median at 0 busy (worst trial's median in brackets); ratio = numpy / polytile "
          f"(> 1: polytile faster); acceptance (1 busy process, worst trial): slowdown <= {MAX_SLOWDOWN}x and "
          f"ratio >= {MIN_RATIO_KEPT} x the quiet ratio; foreign cores = most CPU other people's processes used "
          f"during a trial of the level")
    for r in records:
        bad = [k for k, c in r["checks"].items() if not c["ok"]]
        if bad:
            print(f"{r['name']}: CHECK FAILED (not timed): {', '.join(bad)}")
    accept = [s for r in records for s in r.get("summary", []) if s["busy_processes"] == 1]
    verdict = None
    if accept and all("check_slowdown" in s for s in accept):
        verdict = all(s["check_slowdown"] and s["check_ratio"] for s in accept)
        print(f"acceptance at 1 busy process: {'PASS' if verdict else 'FAIL'}")
    data = {"provenance": _common.provenance(benchmark="contention", thread_env=thread_env(),
                                             blas={wk.label: wk.info["blas"] for wk in workers},
                                             load_average_end=bench_all.loadavg(),
                                             method={"calls": args.calls, "rounds": args.rounds,
                                                     "warmup": args.warmup, "gap_s": args.gap,
                                                     "min_sample_s": args.min_sample, "loads": args.loads,
                                                     "idle_threshold_cores": args.idle_threshold,
                                                     "retries": args.retries, "trials": args.trials,
                                                     "seed": args.seed, "busy_process": _common.BUSY_CODE,
                                                     "max_slowdown": MAX_SLOWDOWN, "min_ratio_kept": MIN_RATIO_KEPT,
                                                     "ratio": "numpy (best baseline at the level) / polytile"}),
            "acceptance_pass": verdict, "workloads": records}
    print(f"wrote {_common.write_json(args.out, data)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
