"""The CPU performance benchmarks against numpy: their shared harness, and a runner of all four.

    python benchmarks/bench_all.py                    # gemm, conv, fused, batched; each shape tuned for 30 s
    python benchmarks/bench_all.py --tune none        # without the autotuner rows
    python benchmarks/bench_all.py --only gemm conv --tune 1m

Run as a script, this runs ``bench_gemm.py``, ``bench_conv.py``,
``bench_fused.py`` and ``bench_batched.py`` one after the other (each in its
own process, their output passed through), then reads their results files and
prints one summary table: every "must reach" row of the performance issue with
the measured value and a verdict.  The summary is also written to
``benchmarks/results/cpu_all.json``.

Imported, it is the harness the four scripts share (what is not already in
``_common``).  One measurement of a workload goes like this:

1. **Inputs**: float32 standard normals (``polytile.compare.random_inputs``, seeded),
   saved as ``.npy`` files so that every process times the very same arrays.
2. **Truth**: the workload's reference computed in float64 from those inputs.
3. **polytile**: ``polytile.compile(tile_file)`` (the default: every
   contraction autotiled for the ``host`` descriptor); with ``--tune`` also
   :func:`polytile.tune.tune` (cache bypassed) and the kernels it is judged
   against: the untuned default ``polytile.compile(tile_file, hardware=None)``
   (program order + outermost parallel loops) and the tuned one
   ``polytile.compile(tile_file, schedule=result.best)``.
4. **numpy baselines** run in two worker processes, because OpenBLAS reads
   ``OPENBLAS_CORETYPE`` when it is loaded: one with the environment as set,
   one with ``OPENBLAS_CORETYPE`` changed (unset when it is set, ``Haswell``
   when it is not).  Each worker reports which BLAS numpy uses
   (``threadpoolctl`` when installed, otherwise ``numpy.show_config()`` and the
   OpenBLAS core name asked through ctypes).
5. **Correctness** before any timing: every kernel's and every baseline's
   output against the float64 truth with
   ``numpy.allclose(out, truth, rtol=1e-4, atol=1e-4 * max|truth|)`` (the
   ``polytile run --check`` rule written as allclose); a failed check is
   reported and that entry is not timed.
6. **Timing**, interleaved: rounds in which every entry has one turn (numpy
   as set, polytile, numpy with the other core type, untuned, tuned; then
   the next round), so that drift on a shared machine hits all of them.  A
   turn is ``inner`` back-to-back calls, each timed on its own: 1 call when a
   call lasts at least ``--min-sample`` seconds, otherwise enough calls to
   fill that (so sub-millisecond kernels get many calls per turn).  There are
   ``--warmup`` untimed rounds, then ``--repeat`` (>= 5) timed ones; an
   entry's time is the **median of all its timed calls** (``repeat`` x
   ``inner`` of them; min, max, per-round medians and every call in the
   JSON).  Before every turn the harness sleeps ``--gap`` seconds so that
   neither OpenBLAS's nor OpenMP's worker threads still spin on the cores when
   the next entry starts.  Every call is a whole user-level call (output
   allocation included, like ``numpy.matmul``'s).
7. **Load**: before measuring anything, the harness waits until the
   1-minute load average is below ``--load-threshold`` (polling
   ``/proc/loadavg`` for at most ``--max-wait`` seconds, then it goes on) and
   records the load before and after every workload.

Ratios are numpy time / polytile time (> 1: polytile is faster), against the
numpy baseline with the environment as set and, in "ratio vs faster", against
the faster of the two core types.  The summary's verdicts use the faster one:
an environment that pins OpenBLAS to older kernels must not flatter polytile.
GFLOP/s count 2 flops per point of the contraction, and the percentage is of
``hardware.load("host").peak_gflops("float32")`` (at the nominal clock
/proc/cpuinfo reports) and, in "% meas. peak", of an FMA loop measured on all
threads at the start of the run (what the cores sustain).
"""
from __future__ import annotations

import contextlib
import io
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

import _common
from _cpu_tables import _f, llvm_table, result_table, spread_table, tune_table
from polytile.compare import format_table, random_inputs, spread, time_calls

#: The tolerance every output is checked with: allclose(out, truth, rtol=RTOL, atol=RTOL * max|truth|).
RTOL = 1e-4
#: The core type the second numpy baseline uses when OPENBLAS_CORETYPE is not set.
ALT_CORETYPE = "Haswell"
WORKER_FLAG = "--baseline-worker"

# ---------------------------------------------------------------------------
# Which BLAS numpy uses
# ---------------------------------------------------------------------------

_CORENAME_SYMBOLS = ("openblas_get_corename", "openblas_get_corename64_", "scipy_openblas_get_corename64_",
                     "scipy_openblas_get_corename")
_THREADS_SYMBOLS = ("openblas_get_num_threads", "openblas_get_num_threads64_",
                    "scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads")


def _openblas_by_ctypes() -> Dict[str, Any]:
    """Core name and thread count of the OpenBLAS mapped into this process, without threadpoolctl."""
    import ctypes

    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            paths = sorted({line.split()[-1] for line in f if "openblas" in line.lower() and "/" in line})
    except OSError:
        return {}
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        out: Dict[str, Any] = {"filepath": path}
        for sym in _CORENAME_SYMBOLS:
            fn = getattr(lib, sym, None)
            if fn is not None:
                fn.restype = ctypes.c_char_p
                out["architecture"] = fn().decode(errors="replace")
                break
        for sym in _THREADS_SYMBOLS:
            fn = getattr(lib, sym, None)
            if fn is not None:
                fn.restype = ctypes.c_int
                out["num_threads"] = int(fn())
                break
        return out
    return {}


def _show_config_blas() -> Dict[str, Any]:
    """numpy's build-time BLAS section (``numpy.show_config()``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "install pyyaml for better output"
        try:
            cfg = np.show_config(mode="dicts")
            return dict(cfg.get("Build Dependencies", {}).get("blas", {}))
        except TypeError:  # numpy < 1.26: text only
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                np.show_config()
            return {"show_config": buf.getvalue()}


def blas_info() -> Dict[str, Any]:
    """Which BLAS numpy calls in this process, its core type and threads, and OPENBLAS_CORETYPE."""
    info: Dict[str, Any] = {"OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE")}
    try:
        import threadpoolctl
    except ImportError:
        threadpoolctl = None
    if threadpoolctl is not None:
        info["source"] = f"threadpoolctl {threadpoolctl.__version__}"
        keep = ("user_api", "internal_api", "version", "architecture", "num_threads", "threading_layer", "filepath")
        info["libraries"] = [{k: d.get(k) for k in keep} for d in threadpoolctl.threadpool_info()]
        blas = [d for d in info["libraries"] if d.get("user_api") == "blas"]
        if blas:
            b = blas[0]
            info["summary"] = (f"{b.get('internal_api')} {b.get('version')} ({b.get('architecture')} kernels, "
                               f"{b.get('num_threads')} threads)")
    else:
        info["source"] = "numpy.show_config() + ctypes"
        build = _show_config_blas()
        info["build"] = build
        rt = _openblas_by_ctypes()
        info["runtime"] = rt
        name = build.get("name", "?") + (" " + build["version"] if build.get("version") else "")
        if rt:
            info["summary"] = f"{name} ({rt.get('architecture', '?')} kernels, {rt.get('num_threads', '?')} threads)"
        else:
            info["summary"] = f"{name} (core type not queryable)"
    return info


def coretype_envs() -> List[Tuple[str, Dict[str, str]]]:
    """(label, environment) of the two baseline workers: as set first, then OPENBLAS_CORETYPE changed."""
    env = dict(os.environ)
    alt = dict(os.environ)
    current = env.get("OPENBLAS_CORETYPE")
    if current is not None:
        del alt["OPENBLAS_CORETYPE"]
        labels = (f"OPENBLAS_CORETYPE={current} (as set)", "OPENBLAS_CORETYPE unset")
    else:
        alt["OPENBLAS_CORETYPE"] = ALT_CORETYPE
        labels = ("OPENBLAS_CORETYPE unset (as set)", f"OPENBLAS_CORETYPE={ALT_CORETYPE}")
    return [(labels[0], env), (labels[1], alt)]


def faster_numpy(baseline: Mapping[str, Mapping[str, Any]], polytile_s: Optional[float]) -> Dict[str, Any]:
    """The issue's verdicts are against numpy at its best: the faster of the two core types.

    An environment may pin OpenBLAS to older kernels (``OPENBLAS_CORETYPE=Haswell``
    on an AVX-512 machine runs AVX2 code at about half the speed); a ratio against
    that numpy would flatter polytile.

    >>> faster_numpy({"as set": {"median_s": 2.0}, "unset": {"median_s": 1.0}}, 0.5)
    {'faster_numpy': 'unset', 'faster_numpy_median_s': 1.0, 'ratio_vs_faster': 2.0}
    """
    timed = [(b["median_s"], label) for label, b in baseline.items() if b.get("median_s")]
    if not timed:
        return {"faster_numpy": None, "faster_numpy_median_s": None, "ratio_vs_faster": None}
    t, label = min(timed)
    return {"faster_numpy": label, "faster_numpy_median_s": t,
            "ratio_vs_faster": (t / polytile_s) if polytile_s else None}


# ---------------------------------------------------------------------------
# Load
# ---------------------------------------------------------------------------


def loadavg() -> List[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def wait_for_quiet(threshold: float, max_wait: float, say: Callable[[str], None], poll: float = 5.0) -> Dict[str, Any]:
    """Wait until the 1-minute load average is below ``threshold`` (at most ``max_wait`` s); what happened."""
    t0 = time.monotonic()
    first = loadavg()
    load = first
    announced = False
    while load and load[0] >= threshold and time.monotonic() - t0 < max_wait:
        if not announced:
            say(f"1-minute load {load[0]:.2f} >= {threshold}: waiting up to {max_wait:.0f} s for a quieter machine")
            announced = True
        time.sleep(min(poll, max(0.0, max_wait - (time.monotonic() - t0))))
        load = loadavg()
    waited = time.monotonic() - t0
    quiet = bool(load) and load[0] < threshold
    if announced:
        say(f"load now {load[0]:.2f} after {waited:.0f} s" + ("" if quiet else ": measuring anyway (noisy)"))
    return {"threshold": threshold, "max_wait_s": max_wait, "waited_s": round(waited, 1), "load_at_start": first,
            "load_when_measuring": load, "quiet": quiet}


# ---------------------------------------------------------------------------
# Baseline workers (numpy in a subprocess with its own OPENBLAS_CORETYPE)
# ---------------------------------------------------------------------------


def worker_main(baselines: Mapping[str, Callable[..., np.ndarray]]) -> int:
    """The loop of a baseline worker: JSON requests on stdin, one JSON answer per line on stdout."""
    proto = sys.stdout
    sys.stdout = sys.stderr  # nothing a baseline prints may corrupt the protocol
    arrays: Dict[str, List[np.ndarray]] = {}
    for line in sys.stdin:
        req = json.loads(line)
        cmd = req["cmd"]
        try:
            if cmd == "quit":
                break
            if cmd == "info":
                ans: Dict[str, Any] = {"blas": blas_info(), "pid": os.getpid()}
            elif cmd == "load":
                arrays[req["key"]] = [np.ascontiguousarray(np.load(p)) for p in req["files"]]
                ans = {}
            elif cmd == "drop":
                arrays.pop(req["key"], None)
                ans = {}
            elif cmd == "run":  # one call, output saved for the check
                fn = baselines[req["baseline"]]
                t0 = time.perf_counter()
                out = fn(*arrays[req["key"]])
                ans = {"seconds": time.perf_counter() - t0}
                np.save(req["out"], out)
            elif cmd == "time":
                fn = baselines[req["baseline"]]
                args = arrays[req["key"]]
                ans = {"times": time_calls(lambda: fn(*args), int(req["inner"]))}
            else:
                ans = {"error": f"unknown command {cmd!r}"}
        except Exception as e:  # report, keep serving
            ans = {"error": f"{type(e).__name__}: {e}"}
        proto.write(json.dumps(ans) + "\n")
        proto.flush()
    return 0


class Worker:
    """A baseline worker process running ``script --baseline-worker`` with environment ``env``."""

    def __init__(self, script: Path, label: str, env: Mapping[str, str]):
        self.label = label
        self.proc = subprocess.Popen([sys.executable, str(script), WORKER_FLAG], env=dict(env), text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=1)
        self.info = self.ask(cmd="info")

    def ask(self, **req) -> Dict[str, Any]:
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"baseline worker ({self.label}) died (exit code {self.proc.wait()})")
        ans = json.loads(line)
        if "error" in ans:
            raise RuntimeError(f"baseline worker ({self.label}): {ans['error']}")
        return ans

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(json.dumps({"cmd": "quit"}) + "\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


# ---------------------------------------------------------------------------
# Workloads and measuring
# ---------------------------------------------------------------------------


@dataclass
class Workload:
    """One row of a benchmark: a Tile program at fixed shapes against numpy baselines."""

    family: str                      # "SGEMM", "conv2d", ...
    shape: str                       # as shown in the table
    tile: Path                       # the Tile program
    dims: str                        # its sizes, for polytile.tune
    shapes: Sequence[Sequence[int]]  # input shapes, in the program's input order
    truth: Callable[..., np.ndarray]     # float64 reference from the float32 inputs
    baselines: Sequence[str]             # names in the script's BASELINES (best of them is the baseline)
    flops: int                           # 2 x contraction points
    target: float                        # "must reach" ratio (numpy / polytile)
    aim: Optional[float] = None
    fusion_report: bool = False          # report contracted bytes / traffic saved of the default schedule
    inputs: Optional[Callable[[List[np.ndarray]], List[np.ndarray]]] = None  # reshapes the normal draws (masks)


@dataclass
class Subject:
    """Something timed: a local callable (polytile kernels) or a baseline in a worker."""

    name: str
    call: Optional[Callable[[], Any]] = None
    worker: Optional[Worker] = None
    baseline: Optional[str] = None
    key: Optional[str] = None
    inner: int = 1
    times: List[float] = field(default_factory=list)   # every timed call
    rounds: List[List[float]] = field(default_factory=list)  # the same, by round

    def sample(self, inner: Optional[int] = None) -> List[float]:
        """Seconds of each of ``inner`` back-to-back calls."""
        n = self.inner if inner is None else inner
        if self.worker is not None:
            return self.worker.ask(cmd="time", key=self.key, baseline=self.baseline, inner=n)["times"]
        return time_calls(self.call, n)

    @property
    def median(self) -> Optional[float]:
        return spread(self.times).median

    def stats(self) -> Dict[str, Any]:
        t = self.times
        s = spread(t)
        return {"inner": self.inner, "runs": len(t), "median_s": s.median, "min_s": s.min, "max_s": s.max,
                "round_medians_s": [spread(r).median for r in self.rounds], "times_s": t}


def check(out, truth: np.ndarray) -> Dict[str, Any]:
    """allclose against the float64 truth, with the stated tolerance; the error for the record."""
    out = np.asarray(out)
    if out.shape != truth.shape:
        return {"ok": False, "detail": f"shape {out.shape}, expected {truth.shape}"}
    scale = float(np.abs(truth).max()) if truth.size else 0.0
    atol = RTOL * max(scale, 1.0)
    err = float(np.abs(out.astype(np.float64) - truth).max()) if truth.size else 0.0
    ok = bool(np.allclose(out, truth, rtol=RTOL, atol=atol)) and np.isfinite(out).all()
    return {"ok": bool(ok), "max_abs_err": err, "rtol": RTOL, "atol": atol, "max_abs_truth": scale}


#: At most this many calls in one subject's turn of a round.
MAX_INNER = 1000


def measure_interleaved(subjects: List[Subject], repeat: int, warmup: int, gap: float, min_sample: float,
                        first_call_s: Mapping[str, float], say) -> List[List[float]]:
    """``warmup`` untimed rounds, then ``repeat`` timed rounds; in a round each subject has one turn.

    Returns the 1-minute load average at the start of every round.

    A turn is ``inner`` back-to-back calls, each timed: 1 for a call of at
    least ``min_sample`` seconds, else enough calls to fill ``min_sample``
    (judged from the fastest of three calls made here, or of one that takes over 20 ``min_sample``; a
    first, checking call that long is taken as proof enough).  One call alone misleads: a process's
    second parallel call also JIT-compiles the runtime's spread region (~45 ms), which made SGEMM
    1000^3 (5 ms a call) a one-call turn, each call right after the idle gap.
    """
    for s in subjects:
        if first_call_s.get(s.name, 0.0) >= 20 * min_sample:
            s.inner = 1
            continue
        t = min(s.sample(1))
        if t < 20 * min_sample:
            t = min([t] + s.sample(2))
        s.inner = 1 if t >= min_sample else min(MAX_INNER, max(1, math.ceil(min_sample / max(t, 1e-7))))
    rounds = warmup + repeat
    loads = []
    for r in range(rounds):
        timed = r >= warmup
        loads.append(loadavg()[:1])
        say(f"{'timed' if timed else 'warm-up'} round {r - warmup + 1 if timed else r + 1}/{repeat if timed else warmup}"
            f"  load {loads[-1]}")
        for s in subjects:
            time.sleep(gap)
            t = s.sample()
            if timed:
                s.times.extend(t)
                s.rounds.append(t)
    return loads


def _gflops(flops: int, seconds: Optional[float]) -> Optional[float]:
    return None if not seconds else flops / seconds / 1e9


def _kernel_info(kernel, arrays) -> Dict[str, Any]:
    spec = kernel.specialize(*arrays)
    return {"steps": [s.to_json() for s in spec.schedule.steps], "describe": spec.schedule.describe()}


def workload_inputs(w: Workload, key: str, seed: int, tmp: Path):
    """The workload's float32 inputs, their ``.npy`` files in ``tmp`` (for the numpy workers), and the
    float64 answer they are checked against."""
    arrays = random_inputs(w.shapes, ["float32"] * len(w.shapes), "normal", seed)
    if w.inputs is not None:
        arrays = w.inputs(arrays)
    files = []
    for n, a in enumerate(arrays):
        files.append(str(tmp / f"{key}-in{n}.npy"))
        np.save(files[-1], a)
    return arrays, files, w.truth(*[a.astype(np.float64) for a in arrays])


def run_workload(w: Workload, script: Path, workers: List[Worker], args, say, tmp: Path) -> Dict[str, Any]:
    """Everything for one workload: inputs, checks, tuning, the interleaved timing; a JSON-able record."""
    import polytile
    from polytile.tune import parse_budget, tune

    key = f"{w.family}-{w.shape}".replace(" ", "")
    arrays, files, truth = workload_inputs(w, key, args.seed, tmp)
    rec: Dict[str, Any] = {"family": w.family, "shape": w.shape, "program": str(w.tile.relative_to(_common.ROOT)),
                           "dims": w.dims, "input_shapes": [list(s) for s in w.shapes], "flops": w.flops,
                           "baselines": list(w.baselines), "target": w.target, "aim": w.aim,
                           "load_before": loadavg()}
    checks: Dict[str, Any] = {}
    first: Dict[str, float] = {}
    subjects: List[Subject] = []

    def local(name: str, kernel) -> Optional[Subject]:
        t0 = time.perf_counter()
        kernel.specialize(*arrays)  # compile outside the checking call
        rec.setdefault("compile_s", {})[name] = time.perf_counter() - t0
        t0 = time.perf_counter()
        out = kernel(*arrays)
        first[name] = time.perf_counter() - t0
        checks[name] = check(out, truth)
        say(f"{key}: {name} check {'ok' if checks[name]['ok'] else 'FAILED'} (max abs err {checks[name].get('max_abs_err', float('nan')):.3g})")
        if not checks[name]["ok"]:
            return None
        return Subject(name, call=lambda: kernel(*arrays))

    baseline_subjects: List[List[Subject]] = []
    for wk_i, wk in enumerate(workers):
        wk.ask(cmd="load", key=key, files=files)
        group = []
        for b in w.baselines:
            name = f"numpy[{wk_i}]:{b}"
            out_file = str(tmp / f"{key}-out-{wk_i}-{b}.npy")
            first[name] = wk.ask(cmd="run", key=key, baseline=b, out=out_file)["seconds"]
            checks[name] = check(np.load(out_file), truth)
            say(f"{key}: {name} check {'ok' if checks[name]['ok'] else 'FAILED'}")
            if checks[name]["ok"]:
                group.append(Subject(name, worker=wk, baseline=b, key=key))
        baseline_subjects.append(group)

    say(f"{key}: compiling polytile's default")
    default = polytile.compile(w.tile)
    pt = local("polytile", default)
    rec["polytile_schedule"] = _kernel_info(default, arrays)
    if w.fusion_report:
        from polytile.scheduling import contracted_bytes, traffic_saved

        sched = default.specialize(*arrays).schedule
        rec["fusion"] = {"contracted_bytes": contracted_bytes(sched), "traffic_saved_bytes": traffic_saved(sched)}

    # Measuring starts here (the tuner measures too): first let the machine calm down.
    rec["load_wait"] = wait_for_quiet(args.load_threshold, args.max_wait, say)
    tuned_sub = untuned_sub = None
    if args.tune is not None:
        budget = parse_budget(args.tune)
        say(f"{key}: tuning (budget {budget:g} s)")
        t0 = time.perf_counter()
        r = tune(w.tile, w.dims, hardware="host", budget_s=budget, seed=args.seed, repeat=args.repeat,
                 warmup=args.warmup, progress=not args.quiet, cache=False)
        wall = time.perf_counter() - t0
        ok_trials = [t for t in r.trials if t.measured and t.ok]
        rec["tune"] = {"budget_s": budget, "wall_s": wall, "elapsed_s": r.elapsed_s,
                       "search_s": r.info.get("search_s"), "setup_s": r.info.get("setup_s"),
                       "trials": len(r.trials), "trials_ok": len(ok_trials),
                       "best_configs": [str(c) for c in r.best_configs],
                       "best_steps": [s.to_json() for s in r.best.steps], "best_describe": r.best.describe(),
                       "tuner_own": {"untuned_median_s": r.baseline_time_s, "best_median_s": r.best_time_s,
                                     "speedup": r.speedup},
                       "result": r.to_json()}
        say(f"{key}: tuned in {wall:.1f} s, tuner's own speedup {r.speedup:.2f}x; compiling untuned and tuned")
        untuned_sub = local("untuned", polytile.compile(w.tile, hardware=None))
        tuned = polytile.compile(w.tile, schedule=r.best)
        tuned_sub = local("tuned", tuned)
        rec["tuned_schedule"] = _kernel_info(tuned, arrays)

    llvm_sub = None
    if args.llvm:
        say(f"{key}: compiling polytile's default for the llvm target")
        llvm_sub = local("polytile-llvm", polytile.compile(w.tile, target="llvm"))

    # Interleaving order: numpy as set, polytile, (polytile on llvm,) numpy other core type, untuned, tuned.
    subjects = baseline_subjects[0] + ([pt] if pt else []) + ([llvm_sub] if llvm_sub else []) + baseline_subjects[1] \
        + [s for s in (untuned_sub, tuned_sub) if s is not None]
    rec["checks"] = checks
    say(f"{key}: timing {len(subjects)} entries interleaved ({args.warmup} warm-up + {args.repeat} timed rounds)")
    rec["load_rounds"] = measure_interleaved(subjects, args.repeat, args.warmup, args.gap, args.min_sample, first, say)
    rec["load_after"] = loadavg()
    rec["first_call_s"] = first
    rec["timings"] = {s.name: s.stats() for s in subjects}
    for wk in workers:
        wk.ask(cmd="drop", key=key)

    def best_of(group: List[Subject]) -> Tuple[Optional[str], Optional[float]]:
        meds = [(s.median, s.baseline) for s in group if s.times]
        if not meds:
            return None, None
        t, name = min(meds)
        return name, t

    peak = args.peak
    rec["baseline"] = {}
    for (label, _), group in zip(coretype_envs(), baseline_subjects):
        name, t = best_of(group)
        rec["baseline"][label] = {"best": name, "median_s": t}
    base_name, base_t = best_of(baseline_subjects[0])
    alt_name, alt_t = best_of(baseline_subjects[1])
    pt_t = pt.median if pt else None
    mins = [min(s.times) for s in baseline_subjects[0] if s.times]
    base_min = min(mins) if mins else None
    pt_min = min(pt.times) if pt and pt.times else None
    rec["result"] = {
        "numpy_best": base_name, "numpy_median_s": base_t, "numpy_gflops": _gflops(w.flops, base_t),
        "numpy_alt_best": alt_name, "numpy_alt_median_s": alt_t,
        "polytile_median_s": pt_t, "polytile_gflops": _gflops(w.flops, pt_t),
        "polytile_peak_pct": (100 * _gflops(w.flops, pt_t) / peak) if pt_t else None,
        "polytile_measured_peak_pct": (100 * _gflops(w.flops, pt_t) / args.measured_peak)
        if pt_t and args.measured_peak else None,
        "ratio": (base_t / pt_t) if base_t and pt_t else None,
        "ratio_alt": (alt_t / pt_t) if alt_t and pt_t else None,
        **faster_numpy(rec["baseline"], pt_t),
        "numpy_min_s": base_min, "polytile_min_s": pt_min,
        "ratio_of_mins": (base_min / pt_min) if base_min and pt_min else None,
    }
    if llvm_sub is not None:
        lt = llvm_sub.median
        rec["result"].update({"llvm_median_s": lt, "llvm_gflops": _gflops(w.flops, lt),
                              "llvm_ratio": (base_t / lt) if base_t and lt else None,
                              "llvm_vs_openmp": (pt_t / lt) if pt_t and lt else None,
                              "llvm_min_s": min(llvm_sub.times) if llvm_sub.times else None})
    if args.tune is not None:
        fast_t = rec["result"]["faster_numpy_median_s"]
        ut = untuned_sub.median if untuned_sub else None
        tt = tuned_sub.median if tuned_sub else None
        rec["result"].update({
            "untuned_median_s": ut, "tuned_median_s": tt, "tuned_gflops": _gflops(w.flops, tt),
            "tuned_peak_pct": (100 * _gflops(w.flops, tt) / peak) if tt else None,
            "tuned_vs_untuned": (ut / tt) if ut and tt else None,
            "tuned_vs_numpy": (fast_t / tt) if fast_t and tt else None,  # the faster core type, as the verdicts
            "tuned_vs_default": (pt_t / tt) if pt_t and tt else None,
        })
    return rec


def add_arguments(p) -> None:
    """Options of every CPU benchmark script (beyond ``_common.parser``'s)."""
    p.add_argument("--tune", metavar="BUDGET", default=None, type=_common.tune_budget,
                   help="also autotune every shape with this search budget (30s, 2m, or seconds; none: do not)")
    p.add_argument("--llvm", action="store_true",
                   help="also time polytile's default compiled for the llvm target (in-process JIT), interleaved")
    p.add_argument("--gap", type=float, default=0.2,
                   help="idle seconds before every sample (lets OpenBLAS/OpenMP spinning threads go to sleep)")
    p.add_argument("--min-sample", dest="min_sample", type=float, default=0.05,
                   help="a sample repeats a fast call until it lasts this many seconds")
    p.add_argument("--load-threshold", dest="load_threshold", type=float, default=1.0,
                   help="wait for the 1-minute load average to drop below this before measuring")
    p.add_argument("--max-wait", dest="max_wait", type=float, default=120.0,
                   help="wait at most this many seconds for the load to drop, then measure anyway")


def main(script: str, description: str, default_out: str, workloads: Callable[[Any], List[Workload]],
         baselines: Mapping[str, Callable[..., np.ndarray]], argv=None, extra_args=None) -> int:
    """The body of every CPU benchmark script (``script`` is its ``__file__``)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if WORKER_FLAG in argv:
        return worker_main(baselines)
    p = _common.parser(description, default_out)
    add_arguments(p)
    if extra_args:
        extra_args(p)
    args = p.parse_args(argv)
    say = _common.progress(args.quiet)

    from polytile import hardware

    hw = hardware.load("host")
    args.peak = hw.peak_gflops("float32")
    from polytile import probe

    args.measured_peak = probe.fma_peak_gflops()  # what the cores sustain (the descriptor's clock is nominal)
    workers = []
    records = []
    try:
        for label, env in coretype_envs():
            workers.append(Worker(Path(script), label, env))
        with tempfile.TemporaryDirectory(prefix="polytile-bench-") as tmp:
            for w in workloads(args):
                records.append(run_workload(w, Path(script), workers, args, say, Path(tmp)))
    finally:
        for wk in workers:
            wk.close()

    blas = {wk.label: wk.info["blas"] for wk in workers}
    labels = [wk.label for wk in workers]
    print(f"numpy {np.__version__}, BLAS: " + "; ".join(f"{l}: {blas[l].get('summary')}" for l in labels))
    print(f"peak fp32 of the host descriptor: {args.peak:.1f} GFLOP/s ({hw.name}, {hw.cores} cores, "
          f"{hw.clock_ghz:.3g} GHz nominal); measured (FMA loop, all threads, best of 3): "
          + (f"{args.measured_peak:.1f} GFLOP/s" if args.measured_peak else "not measured"))
    for r in records:
        lw = r["load_wait"]
        print(f"{r['family']} {r['shape']}: 1-minute load {lw['load_when_measuring'][:1]} when measuring started"
              + ("" if lw["quiet"] else f" (not below {args.load_threshold} after {lw['waited_s']:.0f} s: noisy)")
              + f", {r['load_after'][:1]} at the end")
    print()
    print(result_table(records, labels))
    print()
    print(spread_table(records))
    if args.llvm:
        print()
        print(llvm_table(records))
    if args.tune is not None:
        print()
        print(tune_table(records))
    print()
    for r in records:
        if "fusion" in r:
            cb = r["fusion"]["contracted_bytes"]
            print(f"{r['family']} {r['shape']}: arrays contracted by the default schedule: "
                  + (", ".join(f"{a} ({b} B)" for a, b in cb.items()) if cb else "none")
                  + f"; memory traffic saved: {r['fusion']['traffic_saved_bytes']} B")
            print(r["polytile_schedule"]["describe"])
            print()
        bad = [n for n, c in r["checks"].items() if not c["ok"]]
        if bad:
            print(f"{r['family']} {r['shape']}: CHECK FAILED (not timed): {', '.join(bad)}")
    print(f"ratio = numpy median / polytile median with the environment as set ({labels[0]}); "
          f"'ratio vs faster' uses the faster of the two numpy columns (the one the issue's targets are judged on); "
          f"every entry the median of its calls in {args.repeat} interleaved rounds after {args.warmup} warm-up round(s); "
          f"outputs checked with allclose(rtol={RTOL:g}, atol={RTOL:g}*max|truth|) against float64; "
          f"'ratio of mins' (fastest call over fastest call) is for reading noisy runs, not a target")

    data = {"provenance": _common.provenance(benchmark=Path(script).stem, load_average_end=loadavg(), blas=blas,
                                             main_process_blas=blas_info(),
                                             peak_gflops_fp32=args.peak, hardware=hw.name,
                                             measured_peak_gflops_fp32=args.measured_peak,
                                             method={"gap_s": args.gap, "min_sample_s": args.min_sample,
                                                     "repeat": args.repeat, "warmup": args.warmup,
                                                     "seed": args.seed, "tune": args.tune, "llvm": args.llvm,
                                                     "check": f"allclose(rtol={RTOL}, atol={RTOL}*max|truth|)",
                                                     "ratio": f"numpy ({labels[0]}) / polytile"}),
            "workloads": records}
    out = _common.write_json(args.out, data)
    print(f"wrote {out}")
    return 0


# ---------------------------------------------------------------------------
# Running all four
# ---------------------------------------------------------------------------

SCRIPTS = {"gemm": "bench_gemm.py", "conv": "bench_conv.py", "fused": "bench_fused.py", "batched": "bench_batched.py"}
#: Issue 15: the llvm target's speed relative to the openmp (gcc) target, same workload, same run.
LLVM_VS_OPENMP = 0.8

#: The issue's targets for the autotuner rows.
TUNE_SPEEDUP, TUNE_SPEEDUP_AIM, TUNE_SECONDS = 1.5, 3.0, 120.0


def _verdict(value: Optional[float], target: float, aim: Optional[float], higher_is_better: bool = True) -> str:
    if value is None:
        return "NOT MEASURED"
    ok = value >= target if higher_is_better else value <= target
    if not ok:
        short = (target - value) / target if higher_is_better else (value - target) / target
        return f"FAIL ({100 * short:.0f}% {'short of' if higher_is_better else 'over'} the target)"
    if aim is not None and value < aim:
        return f"pass (below the aim {aim:g}x)"
    return "pass"


def summary(results: Mapping[str, Optional[Dict[str, Any]]]) -> Tuple[str, List[Dict[str, Any]]]:
    rows: List[Dict[str, Any]] = []
    for fam, data in results.items():
        if data is None:
            rows.append({"row": f"{fam}: script failed", "shape": "-", "verdict": "NOT MEASURED"})
            continue
        for r in data["workloads"]:
            x = r["result"]
            rows.append({"row": f"{r['family']} vs numpy", "shape": r["shape"],
                         "baseline_ms": x["faster_numpy_median_s"], "polytile_ms": x["polytile_median_s"],
                         "measured": x["ratio_vs_faster"], "unit": "x", "gflops": x["polytile_gflops"],
                         "peak_pct": x["polytile_peak_pct"], "target": f">= {r['target']}x"
                         + (f" (aim {r['aim']}x)" if r["aim"] else ""),
                         "verdict": _verdict(x["ratio_vs_faster"], r["target"], r["aim"])})
            if x.get("llvm_vs_openmp") is not None:
                rows.append({"row": f"{r['family']} llvm target vs openmp", "shape": r["shape"],
                             "baseline_ms": x["polytile_median_s"], "polytile_ms": x["llvm_median_s"],
                             "measured": x["llvm_vs_openmp"], "unit": "x", "gflops": x.get("llvm_gflops"),
                             "target": f">= {LLVM_VS_OPENMP}x", "verdict": _verdict(x["llvm_vs_openmp"], LLVM_VS_OPENMP, None)})
        for r in data["workloads"]:
            if not r.get("tune"):
                continue
            x, t = r["result"], r["tune"]
            rows.append({"row": f"{r['family']} autotuned vs untuned default", "shape": r["shape"],
                         "baseline_ms": x.get("untuned_median_s"), "polytile_ms": x.get("tuned_median_s"),
                         "measured": x.get("tuned_vs_untuned"), "unit": "x", "gflops": x.get("tuned_gflops"),
                         "peak_pct": x.get("tuned_peak_pct"), "target": f">= {TUNE_SPEEDUP}x (aim {TUNE_SPEEDUP_AIM:g}x)",
                         "verdict": _verdict(x.get("tuned_vs_untuned"), TUNE_SPEEDUP, TUNE_SPEEDUP_AIM)})
            rows.append({"row": f"{r['family']} tuning time", "shape": r["shape"], "measured": t["wall_s"],
                         "unit": " s", "target": f"<= {TUNE_SECONDS:g} s",
                         "verdict": _verdict(t["wall_s"], TUNE_SECONDS, None, higher_is_better=False)})
    table = [["issue row", "shape", "before ms", "polytile ms", "measured", "GFLOP/s", "% peak", "target", "verdict"]]
    for row in rows:
        m = row.get("measured")
        table.append([row["row"], row["shape"], _common.ms(row.get("baseline_ms")), _common.ms(row.get("polytile_ms")),
                      "-" if m is None else f"{m:.2f}{row.get('unit', '')}", _f(row.get("gflops"), "{:.1f}"),
                      _f(row.get("peak_pct"), "{:.1f}"), row.get("target", "-"), row["verdict"]])
    return format_table(table), rows


def run_all(argv=None) -> int:
    p = _common.parser(__doc__.splitlines()[0], "cpu_all.json")
    add_arguments(p)
    p.set_defaults(tune="30s")
    p.add_argument("--only", nargs="+", choices=tuple(SCRIPTS), help="run these scripts only")
    args = p.parse_args(argv)
    results: Dict[str, Optional[Dict[str, Any]]] = {}
    runs = []
    t_all = time.perf_counter()
    for fam, script in SCRIPTS.items():
        if args.only and fam not in args.only:
            continue
        out = args.out.with_name(f"cpu_{fam}.json")
        cmd = [sys.executable, str(_common.HERE / script), "--repeat", str(args.repeat), "--warmup", str(args.warmup),
               "--seed", str(args.seed), "--out", str(out), "--gap", str(args.gap), "--min-sample", str(args.min_sample),
               "--load-threshold", str(args.load_threshold), "--max-wait", str(args.max_wait)]
        if args.tune is not None:
            cmd += ["--tune", str(args.tune)]
        if args.llvm:
            cmd.append("--llvm")
        if args.quiet:
            cmd.append("--quiet")
        print(f"===== {script}: {' '.join(cmd[1:])}", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.call(cmd)
        runs.append({"script": script, "argv": cmd[1:], "returncode": rc, "wall_s": time.perf_counter() - t0})
        results[fam] = json.loads(out.read_text()) if rc == 0 and out.exists() else None
        print(flush=True)
    text, rows = summary(results)
    print("===== summary (ratios: numpy / polytile, numpy with the faster of its two core types; "
          "'before' is that numpy, or the untuned default for the autotuner rows)")
    print(text)
    data = {"provenance": _common.provenance(benchmark="cpu_all", load_average_end=loadavg(),
                                             wall_s=time.perf_counter() - t_all),
            "runs": runs, "summary": rows}
    print(f"wrote {_common.write_json(args.out, data)}")
    return 0 if all(r["returncode"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(run_all())
