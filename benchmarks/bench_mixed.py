"""numpy and polytile in one process, one after the other: what each library's idle threads cost the other.

    python benchmarks/bench_mixed.py                  # 3 pipelines x 3 settings x 5 rounds: about a minute
    python benchmarks/bench_mixed.py --rounds 9 --repeat 60

A user's program calls both libraries in one process, e.g. numpy's GEMM feeding a polytile softmax.
Each library keeps its worker threads spinning for a while after a call returns, and the next call
meets them on its cores.  The other benchmarks keep numpy in a process of its own, so they never see
this.  Pipelines (float32, standard normal inputs, outputs checked against numpy):

* ``numpy gemm -> polytile softmax``: ``softmax(X @ W)`` with X 256x1024 and W 1024x1024
  (``examples/softmax.tile``);
* ``numpy sgemm, polytile sgemm``: ``A @ B`` then ``matmul(A, B)``, 1024^3 (``examples/matmul.tile``);
* ``polytile sgemm -> numpy sum``: ``matmul(A, B).sum()`` (numpy's part is single-threaded).

Settings, each in fresh processes (both runtimes read these variables once, when they load):

* ``polytile``: as installed.  polytile loads libgomp with ``GOMP_SPINCOUNT`` =
  ``polytile.runtime.openmp.SPIN_COUNT``;
* ``libgomp default spin``: ``GOMP_SPINCOUNT=300000``, libgomp's own default, as polytile ran before;
* ``+ OPENBLAS_THREAD_TIMEOUT=4``: polytile's setting, plus OpenBLAS's workers sleeping soon after
  a call.  This is a setting the user makes before numpy is imported; polytile does not change it.

Every round runs each setting once, in order, in a new process, so the settings are interleaved.
A process times ``--repeat`` iterations of each pipeline after ``--warmup`` untimed ones, each stage and the whole.
Before that it times each stage alone, back to back, after 0.25 s idle (longer than either library's
threads spin); their sum is what the pipeline would take if
neither library slowed the other.  The table gives per pipeline and setting the median over the rounds
of the processes' medians, with min-max, and the ratio of the ``libgomp default spin`` total to this
setting's total in the same round (> 1: faster than before).  Writes
``benchmarks/results/mixed.json``: provenance, every process's medians and its environment
variables.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import _common

ROOT = Path(__file__).resolve().parent.parent

SETTINGS = {
    "polytile": {},
    "libgomp default spin": {"GOMP_SPINCOUNT": "300000"},
    "+ OPENBLAS_THREAD_TIMEOUT=4": {"OPENBLAS_THREAD_TIMEOUT": "4"},
}
BEFORE = "libgomp default spin"

CHILD = r"""
import json, sys, time
import numpy as np
import polytile

calls, warmup, seed = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(seed)
R = lambda *s: rng.standard_normal(s).astype(np.float32)
X, W, A, B = R(256, 1024), R(1024, 1024), R(1024, 1024), R(1024, 1024)
mm = polytile.compile("examples/matmul.tile")
sm = polytile.compile("examples/softmax.tile")

def np_softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)

assert np.allclose(sm(X @ W), np_softmax(X @ W), rtol=1e-4, atol=1e-6)
assert np.allclose(mm(A, B), A @ B, rtol=1e-3, atol=1e-2 * 32)

PIPELINES = {
    "numpy gemm -> polytile softmax": [("numpy gemm", lambda v: X @ W), ("polytile softmax", sm)],
    "numpy sgemm, polytile sgemm": [("numpy sgemm", lambda v: A @ B), ("polytile sgemm", lambda v: mm(A, B))],
    "polytile sgemm -> numpy sum": [("polytile sgemm", lambda v: mm(A, B)), ("numpy sum", lambda v: v.sum())],
}

def run(stages):
    times, v = [], None
    for _, f in stages:
        t = time.perf_counter(); v = f(v); times.append(time.perf_counter() - t)
    return times

out = {}
for name, stages in PIPELINES.items():
    alone = []
    for i, (stage, f) in enumerate(stages):
        v = None  # the stage's input, computed once by the stages before it; then the stage alone
        for _, g in stages[:i]:
            v = g(v)
        time.sleep(0.25)  # the stages before left their threads spinning: alone means after they slept
        for _ in range(warmup):
            f(v)
        ts = []
        for _ in range(calls):
            t = time.perf_counter(); f(v); ts.append(time.perf_counter() - t)
        alone.append(sorted(ts)[calls // 2])
    for _ in range(warmup):
        run(stages)
    per = [run(stages) for _ in range(calls)]
    totals = sorted(sum(p) for p in per)
    out[name] = {"stages": [s for s, _ in stages],
                 "alone_s": alone,
                 "stage_s": [sorted(p[i] for p in per)[calls // 2] for i in range(len(stages))],
                 "total_s": totals[calls // 2]}
print(json.dumps(out))
"""


def child(env_extra: Dict[str, str], calls: int, warmup: int, seed: int) -> Dict[str, Any]:
    """One process of one setting: the medians of every pipeline (``CHILD``)."""
    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY",
                                                            "OPENBLAS_THREAD_TIMEOUT")}
    env.update(env_extra)
    out = subprocess.run([sys.executable, "-c", CHILD, str(calls), str(warmup), str(seed)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise SystemExit(f"child failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = _common.parser(__doc__.splitlines()[0], "mixed.json")
    ap.add_argument("--rounds", type=_common.at_least(int, 3, "rounds"), default=5,
                    help="processes per setting, interleaved (>= 3)")
    ap.set_defaults(repeat=40)  # --repeat: timed iterations of each pipeline (and stage alone) in a process
    args = ap.parse_args(argv)
    say = _common.progress(args.quiet)
    runs: Dict[str, List[Dict[str, Any]]] = {s: [] for s in SETTINGS}
    for r in range(args.rounds):
        for setting, extra in SETTINGS.items():
            say(f"round {r + 1}/{args.rounds}: {setting}")
            runs[setting].append(child(extra, args.repeat, args.warmup, args.seed))
    rows = []
    pipelines = list(runs[BEFORE][0])
    print(f"{'pipeline':<32} {'setting':<28} {'total ms':>9} {'min-max':>15} {'vs before':>9}  stages ms "
          f"(alone, back to back)")
    for p in pipelines:
        for setting in SETTINGS:
            totals = [run[p]["total_s"] for run in runs[setting]]
            speedups = [before[p]["total_s"] / run[p]["total_s"] for before, run in zip(runs[BEFORE], runs[setting])]
            stages = runs[setting][0][p]["stages"]
            stage_ms = [statistics.median(run[p]["stage_s"][i] for run in runs[setting]) * 1e3
                        for i in range(len(stages))]
            alone_ms = [statistics.median(run[p]["alone_s"][i] for run in runs[setting]) * 1e3
                        for i in range(len(stages))]
            row = {"pipeline": p, "setting": setting, "env": SETTINGS[setting],
                   "total_ms": statistics.median(totals) * 1e3,
                   "total_min_max_ms": [min(totals) * 1e3, max(totals) * 1e3],
                   "speedup_vs_before": statistics.median(speedups),
                   "speedup_min_max": [min(speedups), max(speedups)],
                   "stages": stages, "stage_ms": stage_ms, "alone_ms": alone_ms,
                   "runs": [run[p] for run in runs[setting]]}
            rows.append(row)
            parts = ", ".join(f"{s} {t:.2f} ({a:.2f})" for s, t, a in zip(stages, stage_ms, alone_ms))
            lo, hi = row["total_min_max_ms"]
            print(f"{p:<32} {setting:<28} {row['total_ms']:>9.2f} {lo:>7.2f}-{hi:<7.2f} "
                  f"{row['speedup_vs_before']:>8.2f}x  {parts}")
    print(f"(median of {args.rounds} processes' medians of {args.repeat} iterations; 'vs before': the "
          f"'{BEFORE}' total / this total, per round)")
    _common.write_json(args.out, {"provenance": _common.provenance(benchmark="mixed",
                                                                     rounds=args.rounds, calls=args.repeat),
                                  "rows": rows})
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
