"""Latency: how soon a kernel is ready (fresh processes, cached and cold), autotile time, and per-call overhead.

    python benchmarks/bench_latency.py                      # everything: about a minute on 2 cores
    python benchmarks/bench_latency.py --repeat 9 --only fresh calls

Rows (issue 15's targets in brackets):

* **fresh, cached** [<= 0.25 s]: a new Python process runs ``import polytile``, ``polytile.compile`` of
  ``examples/matmul.tile`` and the first call on 256x256 float32 inputs, with the kernel already in the
  cache (one untimed run before).  The wall time is measured by this script around the child process
  (interpreter start included); the child reports its own import / compile / first-call split and
  whether it imported islpy, and times a second call (the process's first spread region: see
  ``polytile/runtime/spread.py``; the wall time includes it, about a millisecond).
* **fresh, cold (gcc)** [<= 1.0 s]: the same with an empty cache (a new ``POLYTILE_CACHE_DIR`` each
  run): the whole pipeline and the C compiler.
* **fresh, cold (llvm)** [<= 0.5 s]: the same on the llvm target (in-process JIT, no C compiler run;
  it keeps no compiled kernels on disk, so every new process pays this).
* **python**, **python + numpy**: the interpreter's own start, and with numpy imported, for scale.

The children find polytile's modules compiled to bytecode, as an installed package has them (pip compiles
them at install time): a first, untimed child of each target writes them to a temporary
``PYTHONPYCACHEPREFIX``, also where the environment sets ``PYTHONDONTWRITEBYTECODE``.  ``--no-bytecode``
measures the environment as it is (every process compiles the ~90 modules' source again, ~0.11 s).
* **autotile** [>= 10x faster than before issue 15]: ``polytile.autotile.autotile`` of the default
  schedule for the host descriptor, first call in a fresh process (what a cold compile pays; the
  second call in that process is reported too): matmul 256^3, conv2d 1x56x56x64 3x3x64, and
  matmul+bias+relu 1024^3.
* **call** [<= 4 us of Python per call; 4x4 matmul within 4x numpy]: back-to-back calls of a compiled
  kernel on the same inputs (``k(A, B)``, outputs allocated each call) against ``A @ B``, median of
  ``--repeat`` timeit batches.
* **cold call** (no target; what ``bench_all.py`` measures): a call after 0.2 s of idleness, 256^3 and
  1024^3 float32, interleaved with numpy's, and polytile's split into Python before the thread-count
  estimate, the estimate, the spread region (which wakes the OpenMP worker) and the kernel.

Every fresh-process row is the median of ``--repeat`` (>= 5) runs with min-max; rows interleave (one
run of each per round).  Writes ``benchmarks/results/latency.json`` with the provenance.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from pathlib import Path
from typing import Any, Dict, List, Optional

import _common

ROOT = Path(__file__).resolve().parent.parent

CHILD = """
import time, sys
t0 = time.perf_counter()
import numpy as np, polytile
t1 = time.perf_counter()
k = polytile.compile("examples/matmul.tile", target=sys.argv[1] if len(sys.argv) > 1 else None)
A = np.ones((256, 256), np.float32)
t2 = time.perf_counter()
C = k(A, A)
t3 = time.perf_counter()
assert float(C[0, 0]) == 256.0
k(A, A)
t4 = time.perf_counter()
import json
print(json.dumps({"import": t1 - t0, "compile": t2 - t1, "first_call": t3 - t2, "second_call": t4 - t3,
                  "islpy": "islpy" in sys.modules}))
"""

FRESH = {
    "fresh, cached": (CHILD, "cached"),
    "fresh, cold (gcc)": (CHILD, "cold"),
    "fresh, cold (llvm)": (CHILD, "cold", "llvm"),
    "python": ("pass", None),
    "python + numpy": ("import numpy", None),
}
TARGET_S = {"fresh, cached": 0.25, "fresh, cold (gcc)": 1.0, "fresh, cold (llvm)": 0.5}


def _child(code: str, cache: str, *argv: str, pycache: Optional[str] = None) -> Dict[str, Any]:
    """Run ``code`` in a new interpreter with kernel cache ``cache``.  With ``pycache``, Python's compiled
    modules are kept there (``PYTHONPYCACHEPREFIX``), even where the environment sets
    ``PYTHONDONTWRITEBYTECODE``: an installed polytile has its bytecode (pip compiles it at install time),
    and compiling its ~90 modules' source again costs a fresh process ~0.11 s (Zen 5 VM)."""
    env = {**os.environ, "POLYTILE_CACHE_DIR": cache}
    if pycache is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = pycache
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code, *argv], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=600)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"child failed:\n{out.stderr}")
    lines = out.stdout.strip().splitlines()
    return {"wall": wall, **(json.loads(lines[-1]) if lines else {})}


def fresh_rows(repeat: int, say, bytecode: bool = True) -> List[Dict[str, Any]]:
    """The fresh-process rows; ``bytecode``: Python's compiled modules cached, as in an installation
    (:func:`_child`), else as the environment has it."""
    runs: Dict[str, List[Dict[str, Any]]] = {name: [] for name in FRESH}
    with tempfile.TemporaryDirectory(prefix="pt_latency_") as tmp:
        warm = os.path.join(tmp, "warm")
        os.mkdir(warm, 0o700)
        pycache = os.path.join(tmp, "pycache") if bytecode else None
        _child(CHILD, warm, pycache=pycache)  # fills the cache of the "cached" row (and the bytecode's)
        _child(CHILD, os.path.join(tmp, "warm_llvm"), "llvm", pycache=pycache)  # the llvm target's modules
        for r in range(repeat):
            say(f"fresh processes, round {r + 1}/{repeat}")
            for name, (code, kind, *argv) in FRESH.items():
                cache = warm
                if kind == "cold":
                    cache = os.path.join(tmp, f"cold{r}_{len(argv)}")
                    os.mkdir(cache, 0o700)
                runs[name].append(_child(code, cache, *argv, pycache=pycache))
    rows = []
    for name, rs in runs.items():
        walls = [x["wall"] for x in rs]
        row = {"row": name, "median_s": statistics.median(walls), "min_s": min(walls), "max_s": max(walls),
               "runs": rs, "target_s": TARGET_S.get(name), "bytecode_cached": bytecode}
        for part in ("import", "compile", "first_call", "second_call"):
            if part in rs[0]:
                row[f"{part}_median_s"] = statistics.median(x[part] for x in rs)
        if "islpy" in rs[0]:
            row["imported_islpy"] = any(x["islpy"] for x in rs)
        rows.append(row)
    return rows


AUTOTILE_CHILD = """
import json, sys, time
import polytile
from polytile import autotile, hardware
hw = hardware.load_once("host")
s = polytile.schedule(sys.argv[1], dims=sys.argv[2])
t0 = time.perf_counter(); _, chosen = autotile.autotile(s, hw); t1 = time.perf_counter()
autotile.autotile(s, hw); t2 = time.perf_counter()
print(json.dumps({"first": t1 - t0, "again": t2 - t1, "chosen": str(chosen)}))
"""


def autotile_rows(repeat: int, say) -> List[Dict[str, Any]]:
    """autotile's first ranking in a fresh process (what a cold compile pays), and a second one in it."""
    cases = [("matmul 256^3", "examples/matmul.tile", "M=256,N=256,K=256"),
             ("conv2d 1x56x56x64 3x3x64", "examples/conv2d.tile", "N=1,H=58,W=58,CI=64,KH=3,KW=3,CO=64"),
             ("matmul+bias+relu 1024^3", "examples/matmul_bias_relu.tile", "M=1024,N=1024,K=1024")]
    rows = []
    for name, path, dims in cases:
        say(f"autotile {name}")
        runs = []
        for _ in range(repeat):
            out = subprocess.run([sys.executable, "-c", AUTOTILE_CHILD, str(ROOT / path), dims], cwd=ROOT,
                                 capture_output=True, text=True, timeout=600)
            if out.returncode != 0:
                raise SystemExit(f"child failed:\n{out.stderr}")
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        first = [r["first"] for r in runs]
        rows.append({"row": f"autotile {name}", "median_s": statistics.median(first), "min_s": min(first),
                     "max_s": max(first), "again_median_s": statistics.median(r["again"] for r in runs),
                     "chosen": runs[0]["chosen"], "same_choice_every_run": len({r["chosen"] for r in runs}) == 1})
    return rows


def call_rows(repeat: int, say) -> List[Dict[str, Any]]:
    import numpy as np

    import polytile

    k = polytile.compile(str(ROOT / "examples/matmul.tile"))
    rows = []
    for n in (4, 64):
        say(f"calls {n}x{n}")
        A = np.ones((n, n), np.float32)
        assert (k(A, A) == A @ A).all()
        number = 20000 if n == 4 else 2000
        pt = [timeit.timeit(lambda: k(A, A), number=number) / number for _ in range(repeat)]
        np_ = [timeit.timeit(lambda: A @ A, number=number) / number for _ in range(repeat)]
        mp, mn = statistics.median(pt), statistics.median(np_)
        rows.append({"row": f"call matmul {n}x{n}", "polytile_us": mp * 1e6, "numpy_us": mn * 1e6,
                     "ratio_to_numpy": mp / mn, "polytile_min_max_us": [min(pt) * 1e6, max(pt) * 1e6],
                     "numpy_min_max_us": [min(np_) * 1e6, max(np_) * 1e6],
                     "target": "within 4x numpy" if n == 4 else None})
    return rows


def cold_rows(repeat: int, say, gap: float = 0.2) -> List[Dict[str, Any]]:
    """Calls after ``gap`` seconds of idleness (every ``bench_all.py`` sample's case), polytile against numpy,
    and where polytile's time goes: Python before the thread-count estimate, the estimate (procfs reads),
    the spread region (which also wakes the OpenMP worker), the kernel with what follows it."""
    import numpy as np

    import polytile
    from polytile.runtime import threads

    k = polytile.compile(str(ROOT / "examples/matmul.tile"))
    marks: Dict[str, float] = {}
    estimate, spread = threads.call_threads, threads.before_call

    def timed_estimate():
        marks["enter"] = time.perf_counter()
        n = estimate()
        marks["estimated"] = time.perf_counter()
        return n

    def timed_spread(n):
        spread(n)
        marks["spread"] = time.perf_counter()

    rows = []
    threads.call_threads, threads.before_call = timed_estimate, timed_spread
    try:
        for n in (256, 1024):
            say(f"cold calls {n}x{n} after {gap} s idle")
            A = np.random.default_rng(0).standard_normal((n, n)).astype(np.float32)
            for _ in range(5):
                k(A, A), A @ A
            parts: Dict[str, List[float]] = {"pt": [], "np": [], "before": [], "estimate": [], "spread": [],
                                             "kernel": []}
            for _ in range(max(15, 3 * repeat)):
                marks.clear()
                time.sleep(gap)
                t0 = time.perf_counter()
                k(A, A)
                t1 = time.perf_counter()
                time.sleep(gap)
                t2 = time.perf_counter()
                A @ A
                parts["np"].append(time.perf_counter() - t2)
                parts["pt"].append(t1 - t0)
                if "spread" in marks:  # a one-thread call has no spread region
                    parts["before"].append(marks["enter"] - t0)
                    parts["estimate"].append(marks["estimated"] - marks["enter"])
                    parts["spread"].append(marks["spread"] - marks["estimated"])
                    parts["kernel"].append(t1 - marks["spread"])
            med = {key: statistics.median(v) * 1e3 if v else None for key, v in parts.items()}
            rows.append({"row": f"cold call matmul {n}x{n}", "gap_s": gap, "polytile_ms": med["pt"],
                         "numpy_ms": med["np"], "ratio_to_numpy": med["pt"] / med["np"],
                         "polytile_min_max_ms": [min(parts["pt"]) * 1e3, max(parts["pt"]) * 1e3],
                         "split_ms": {key: med[key] for key in ("before", "estimate", "spread", "kernel")},
                         "calls": len(parts["pt"])})
    finally:
        threads.call_threads, threads.before_call = estimate, spread
    return rows


def main(argv=None) -> int:
    ap = _common.parser(__doc__.splitlines()[0], "latency.json")
    ap.add_argument("--only", nargs="+", choices=["fresh", "autotile", "calls", "cold"],
                    default=["fresh", "autotile", "calls", "cold"])
    ap.add_argument("--no-bytecode", action="store_true",
                    help="fresh processes compile polytile's Python source as the environment dictates "
                         "(PYTHONDONTWRITEBYTECODE) instead of finding it compiled, as an installation has it")
    args = ap.parse_args(argv)
    say = _common.progress(args.quiet)
    rows: List[Dict[str, Any]] = []
    if "fresh" in args.only:
        rows += fresh_rows(args.repeat, say, bytecode=not args.no_bytecode)
    if "autotile" in args.only:
        rows += autotile_rows(args.repeat, say)
    if "calls" in args.only:
        rows += call_rows(args.repeat, say)
    if "cold" in args.only:
        rows += cold_rows(args.repeat, say)
    print(f"{'row':<34} {'median':>10} {'min-max':>19}  {'target':<16} notes")
    for r in rows:
        if "split_ms" in r:
            lo, hi = r["polytile_min_max_ms"]
            split = ", ".join(f"{k} {v:.3f}" for k, v in r["split_ms"].items() if v is not None)
            print(f"{r['row']:<34} {r['polytile_ms']:>8.3f}ms {lo:>8.3f}-{hi:<8.3f}ms  {'':<16} numpy "
                  f"{r['numpy_ms']:.3f} ms ({r['ratio_to_numpy']:.2f}x numpy's time); after {r['gap_s']} s idle, "
                  f"ms: {split}")
            continue
        if "polytile_us" in r:
            lo, hi = r["polytile_min_max_us"]
            verdict = ("PASS" if r["ratio_to_numpy"] <= 4 else "FAIL") if r["target"] else ""
            print(f"{r['row']:<34} {r['polytile_us']:>8.2f}us {lo:>8.2f}-{hi:<8.2f}us  "
                  f"{(r['target'] or '') + ' ' + verdict:<16} numpy {r['numpy_us']:.2f} us "
                  f"({r['ratio_to_numpy']:.1f}x numpy)")
            continue
        target = r.get("target_s")
        verdict = "" if target is None else f"<= {target} s " + ("PASS" if r["median_s"] <= target else "FAIL")
        notes = []
        for part in ("import", "compile", "first_call", "second_call"):
            if f"{part}_median_s" in r:
                notes.append(f"{part} {r[f'{part}_median_s']:.3f}")
        if "imported_islpy" in r:
            notes.append("islpy imported" if r["imported_islpy"] else "no islpy")
        if r.get("bytecode_cached") is False:
            notes.append("Python source compiled in every process")
        if "again_median_s" in r:
            notes.append(f"again in the process {r['again_median_s']:.3f}")
        if "chosen" in r:
            notes.append(r["chosen"])
        print(f"{r['row']:<34} {r['median_s']:>9.3f}s {r['min_s']:>8.3f}-{r['max_s']:<8.3f}s  {verdict:<16} "
              + ", ".join(notes))
    print(f"(median of {args.repeat}; fresh-process rows are wall times around the child, interpreter start "
          f"included)")
    _common.write_json(args.out, {"provenance": _common.provenance(benchmark="latency"), "rows": rows})
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
