"""Tuning on Dask workers against tuning in-process: wall time, trials per second and the best schedule found.

    python benchmarks/bench_distributed.py                          # matmul 1024^3, 24 trials, all three modes
    python benchmarks/bench_distributed.py --size 128 --trials 6    # a quick check that every mode works
    python benchmarks/bench_distributed.py --modes in-process,local --workers 2

Tunes ``examples/matmul.tile`` at M = N = K = ``--size`` (float32) with a
fixed number of trials (``--trials``; the time budget, ``--budget``, is set
high so the trial count is what stops each run) in each mode:

* ``in-process`` -- ``polytile tune`` as it always ran: one trial after the
  other in this process (batch 1);
* ``local`` -- ``--workers local:N``: a ``distributed.LocalCluster`` of N
  worker processes, one thread each, N trials proposed per search step;
* ``scheduler`` -- ``--scheduler tcp://127.0.0.1:PORT``: a ``dask scheduler``
  and N ``dask worker ... --nthreads 1`` processes started from this script
  on localhost, as the README's "Scaling out with Dask" does by hand.

Each mode starts with an empty kernel cache of its own (a compile saved by an
earlier mode would flatter the later one), and every kernel gets
``cores // N`` OpenMP threads in both Dask modes (``local`` by itself; the
``scheduler`` workers with ``POLYTILE_NUM_THREADS`` in their environment), so
the timed runs of different workers do not share cores.  What the Dask modes
can win on a small machine is overlap: one worker compiles (gcc, the oracle)
while the other times.  The time of a kernel on 1 of 2 cores differs from its
time on both, so the best schedules of the modes are not the same search and
their times are not directly comparable: the table shows them side by side,
with each run's own baseline (compile's default schedule, timed the same way).

The table: mode, workers, executor start-up, tuning wall time, trials per
second, the baseline and the best time (GFLOP/s) and the best trial's
configuration.  ``benchmarks/results/distributed.json`` holds the provenance
(machine, compiler, versions, load average), every run's whole result (every
trial with its worker and hardware fingerprint) and the executors' notes.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, List

import _common
from polytile.compare import format_table

MODES = ("in-process", "local", "scheduler")


def _load() -> list:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def _fresh_cache() -> Iterator[Path]:
    """An empty kernel and tune cache for one mode (environment, so workers started inside inherit it)."""
    from polytile import config

    old = os.environ.get("POLYTILE_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="polytile-bench-dist-") as d:
        os.environ["POLYTILE_CACHE_DIR"] = d
        try:
            with config.override(cache_dir=Path(d)):
                yield Path(d)
        finally:
            if old is None:
                os.environ.pop("POLYTILE_CACHE_DIR", None)
            else:
                os.environ["POLYTILE_CACHE_DIR"] = old


@contextmanager
def _shell_cluster(n: int, threads: int, quiet: bool) -> Iterator[str]:
    """``dask scheduler`` and ``n`` ``dask worker --nthreads 1`` processes on localhost; the scheduler's address."""
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    out = subprocess.DEVNULL if quiet else None
    procs: List[subprocess.Popen] = []
    env = dict(os.environ, POLYTILE_NUM_THREADS=str(threads))
    try:
        procs.append(subprocess.Popen([sys.executable, "-m", "dask", "scheduler", "--host", "127.0.0.1",
                                       "--port", str(port), "--no-dashboard"], stdout=out, stderr=out, env=env))
        for _ in range(n):
            procs.append(subprocess.Popen([sys.executable, "-m", "dask", "worker", address, "--nthreads", "1",
                                           "--no-dashboard"], stdout=out, stderr=out, env=env))
        yield address
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def _wait_for_workers(address: str, n: int, timeout: float = 120.0) -> None:
    import distributed

    deadline = time.monotonic() + timeout
    while True:
        try:
            with distributed.Client(address, timeout=5) as c:
                c.wait_for_workers(n, timeout=max(1.0, deadline - time.monotonic()))
                return
        except (OSError, TimeoutError):
            if time.monotonic() > deadline:
                raise


def run_mode(mode: str, args) -> dict:
    from polytile.executor import DaskExecutor, InProcess
    from polytile.tune import parse_budget, tune

    n = args.workers
    cores = os.cpu_count() or 1
    dims = f"M={args.size},N={args.size},K={args.size}"
    print(f"== {mode}" + ("" if mode == "in-process" else f" ({n} workers)") + f": matmul {dims}, "
          f"{args.trials} trials", flush=True)
    load_before = _load()
    with _fresh_cache(), _cluster_for(mode, n, cores, args) as address:
        t0 = time.perf_counter()
        if mode == "in-process":
            ex = InProcess()
        elif mode == "local":
            ex = DaskExecutor(n_workers=n)
        else:
            ex = DaskExecutor(address)
        started = time.perf_counter() - t0
        with ex:
            t1 = time.perf_counter()
            r = tune(_common.EXAMPLES / "matmul.tile", dims, budget_s=parse_budget(args.budget),
                     max_trials=args.trials, top_k=args.top_k, seed=args.seed, repeat=args.repeat,
                     warmup=args.warmup, progress=not args.quiet, cache=False, executor=ex)
            wall = time.perf_counter() - t1
    print(r.table())
    print(flush=True)
    return {
        "mode": mode,
        "workers": 1 if mode == "in-process" else n,
        "batch": r.info["search"].get("batch", 1),
        "startup_s": started,
        "tune_wall_s": wall,
        "trials": len(r.trials),
        "trials_ok": sum(1 for t in r.trials if t.measured and t.ok),
        "trials_per_s": len(r.trials) / wall if wall > 0 else None,
        "baseline_median_s": r.baseline_time_s,
        "best_median_s": r.best_time_s,
        "best_gflops": r.gflops(r.best_time_s),
        "speedup_over_default": r.speedup,
        "best_trial": r.best_trial,
        "best_configs": [str(c) for c in r.best_configs],
        "executor": r.info.get("executor"),
        "load_before": load_before,
        "load_after": _load(),
        "result": r.to_json(),
    }


@contextmanager
def _cluster_for(mode: str, n: int, cores: int, args) -> Iterator[str]:
    """The shell-started cluster of the ``scheduler`` mode (its address); nothing for the others."""
    if mode != "scheduler":
        yield ""
        return
    with _shell_cluster(n, max(1, cores // n), args.quiet) as address:
        _wait_for_workers(address, n)
        yield address


def main(argv=None) -> int:
    p = _common.parser(__doc__.splitlines()[0], "distributed.json")
    p.add_argument("--size", type=_common.at_least(int, 1, "element"), default=1024, help="M = N = K of the matmul")
    p.add_argument("--trials", type=_common.at_least(int, 1, "trial"), default=24, help="trials per mode")
    p.add_argument("--top-k", dest="top_k", type=_common.at_least(int, 1, "pick"), default=4,
                   help="cost-model picks measured first")
    p.add_argument("--workers", type=_common.at_least(int, 1, "worker"), default=2,
                   help="worker processes of the Dask modes")
    p.add_argument("--budget", default="2h", help="search time cap per mode (high: the trial count stops each run)")
    p.add_argument("--modes", default=",".join(MODES),
                   help=f"comma-separated, from {', '.join(MODES)}")
    args = p.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad:
        p.error(f"unknown mode(s) {', '.join(bad)}; choose from {', '.join(MODES)}")

    runs = [run_mode(m, args) for m in modes]
    base = next((r for r in runs if r["mode"] == "in-process"), None)
    rows = [["mode", "workers", "start s", "tune s", "trials ok/all", "trials/s", "vs in-process", "default ms",
             "best ms", "best GF/s", "best/default", "best config"]]
    for r in runs:
        rel = f"{base['tune_wall_s'] / r['tune_wall_s']:.2f}x" if base and r["tune_wall_s"] else "-"
        rows.append([r["mode"], r["workers"], f"{r['startup_s']:.1f}", f"{r['tune_wall_s']:.1f}",
                     f"{r['trials_ok']}/{r['trials']}", f"{r['trials_per_s']:.2f}", rel,
                     _common.ms(r["baseline_median_s"]), _common.ms(r["best_median_s"]),
                     f"{r['best_gflops']:.1f}" if r["best_gflops"] else "-", f"{r['speedup_over_default']:.2f}x",
                     "; ".join(r["best_configs"]) or "compile's default"])
    print(format_table(rows))
    print(f"(machine: {os.cpu_count()} cores; 'vs in-process' is the in-process tuning wall time over this mode's; "
          f"the Dask modes give each kernel {max(1, (os.cpu_count() or 1) // args.workers)} thread(s))")
    data = {"provenance": _common.provenance(benchmark="distributed", load_average=_load(),
                                             size=args.size, trials=args.trials, workers=args.workers),
            "runs": runs}
    out = _common.write_json(args.out, data)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
