"""Compile time against program size: generated Tile programs of 10, 30, 100, 300 statements.

    python benchmarks/bench_compile_time.py                          # 10 30 100 300, default and fusion=smart
    python benchmarks/bench_compile_time.py --sizes 10 30 --timeout 60
    python benchmarks/bench_compile_time.py --profile 100            # also cProfile the 100-statement case
    python benchmarks/bench_compile_time.py --dtype float64          # every contraction blocked by the autotiler

Issue 12: compile time grew about cubically with the number of statements (300 statements took 261 s);
the aim is linear growth and under 10 s at 300.

Each program is a chain on small shapes (N = 8): two statements in three are elementwise (``T = A + ...``,
``relu``, a product with a broadcast vector), one in three a contraction (a matrix product with the
input ``B``, or a row sum broadcast back); every statement reads the one before it, so the dependence
graph is a chain with a few longer edges (statement k also reads statement k - 3).  See
:func:`program`.

Each (size, options) is measured in a **fresh Python process** with an **empty kernel cache**
(``POLYTILE_CACHE_DIR`` a new directory): the time of ``polytile.compile(text, **options)`` plus
``Kernel.specialize_shapes(...)`` (bind, lower, dependences, schedule, code generation, the C compiler).
The child runs with ``POLYTILE_DEBUG=1`` and the per-stage times it logs (``[polytile:pipeline] stage
(x ms)``) are kept.  A child that exceeds ``--timeout`` is killed and reported as ``timeout``.
Options: ``default`` (``polytile.compile(text)``: program order, auto-parallel, autotiled for the host)
and ``smart`` (``fusion="smart"``: isl's scheduler).

The growth exponent between consecutive sizes is log(t2 / t1) / log(n2 / n1) (1 = linear, 3 = cubic).

``--profile N`` runs the N-statement case (default options) under cProfile in a fresh process and prints
the top functions by cumulative time.

Writes ``benchmarks/results/compile_time.json`` (provenance, per-run stage times, growth, profile).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _common  # noqa: E402

from polytile.compare import format_table  # noqa: E402

SHAPE_N = 8
OPTIONS = {"default": {}, "smart": {"fusion": "smart"}}


def program(statements: int, n: int = SHAPE_N) -> str:
    """A Tile program of exactly ``statements`` statements (>= 2) on N x N matrices: a chain mixing
    elementwise statements and contractions; the last statement writes the output ``Z``."""
    if statements < 2:
        raise ValueError("at least 2 statements")
    body = ["  T0 = A + B;"]
    last, k = "T0", 1
    while len(body) < statements - 1:
        prev, back = f"T{k - 1}", f"T{max(0, k - 3)}"
        kind = k % 6
        if kind == 4 and len(body) > statements - 3:
            kind = 1  # the row-sum pair needs two slots
        if kind == 0:
            body.append(f"  T{k}[i, j : N, N] = +({prev}[i, l] * B[l, j]);")
        elif kind == 1:
            body.append(f"  T{k} = relu({prev}) + {back} * 0.5;")
        elif kind == 2:
            body.append(f"  T{k} = {prev} * V - {back};")
        elif kind == 3:
            body.append(f"  T{k}[i, j : N, N] = +({prev}[i, l] * {back}[l, j]);")
        elif kind == 4:
            body.append(f"  R{k}[i : N] = +({prev}[i, j]);")
            body.append(f"  T{k}[i, j : N, N] = +({prev}[i, j] + R{k}[i]);")
        else:
            body.append(f"  T{k} = {prev} / (abs({back}) + 1.0);")
        last, k = f"T{k}", k + 1
    body.append(f"  Z = {last} + A;")
    assert len(body) == statements, (len(body), statements)
    return "function (A[N, N], B[N, N], V[N]) -> (Z) {\n" + "\n".join(body) + "\n}\n"


_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import polytile
t_import = time.perf_counter() - t0
text, options, n, dtype = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
t0 = time.perf_counter()
k = polytile.compile(text, **options)
spec = k.specialize_shapes([(n, n), (n, n), (n,)], [dtype] * 3)
total = time.perf_counter() - t0
print("@@RESULT " + json.dumps({"seconds": total, "import_seconds": t_import,
                                "statements_in_scop": len(getattr(spec.scop, "statements", ()) or ()),
                                "source_lines": spec.source.text.count("\n")}), flush=True)
"""

_STAGE = re.compile(r"\[polytile:pipeline\] (\w+) \(([\d.]+) ms\)")


def measure(statements: int, option: str, timeout: float, dtype: str = "float32") -> Dict[str, Any]:
    """One fresh process, empty cache: {'seconds', 'stages', ...} or {'status': 'timeout'|'error'}."""
    text = program(statements)
    with tempfile.TemporaryDirectory(prefix="polytile-ct-") as cache:
        env = dict(os.environ, POLYTILE_CACHE_DIR=cache, POLYTILE_DEBUG="1")
        env.pop("POLYTILE_CFLAGS", None)
        t0 = time.perf_counter()
        try:
            p = subprocess.run([sys.executable, "-c", _CHILD, text, json.dumps(OPTIONS[option]), str(SHAPE_N),
                                dtype],
                               capture_output=True, text=True, env=env, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
            return {"status": "timeout", "seconds": None, "wall_seconds": time.perf_counter() - t0,
                    "stages": _stages(err)}
    res = next((json.loads(ln[9:]) for ln in p.stdout.splitlines() if ln.startswith("@@RESULT ")), None)
    if p.returncode != 0 or res is None:
        return {"status": "error", "seconds": None, "detail": p.stderr[-2000:]}
    return {"status": "ok", **res, "stages": _stages(p.stderr)}


def _stages(err: str) -> Dict[str, float]:
    out: Dict[str, float] = {}
    for m in _STAGE.finditer(err):
        out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(2)) / 1e3
    return out


_PROFILE_CHILD = r"""
import cProfile, io, json, pstats, sys
import polytile
text, n, top, build, dtype = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1", sys.argv[5]
pr = cProfile.Profile()
pr.enable()
k = polytile.compile(text)
k.specialize_shapes([(n, n), (n, n), (n,)], [dtype] * 3, build=build)
pr.disable()
st = pstats.Stats(pr)
st.sort_stats("cumulative")
rows = []
for func, (cc, nc, tt, ct, callers) in sorted(st.stats.items(), key=lambda kv: -kv[1][3]):
    file, line, name = func
    rows.append({"function": name, "where": f"{file.split('site-packages/')[-1].split('/work/main/')[-1]}:{line}",
                 "ncalls": nc, "tottime": tt, "cumtime": ct})
print("@@PROFILE " + json.dumps({"rows": rows[:200], "total": max(r["cumtime"] for r in rows)}))
"""


def profile(statements: int, timeout: float, top: int, build: bool = False,
            dtype: str = "float32") -> Dict[str, Any]:
    """cProfile of one specialisation in a fresh process; without ``build`` the C compiler is left out
    (its time is the ``build`` column of the table) so the rows are polytile's own Python."""
    text = program(statements)
    with tempfile.TemporaryDirectory(prefix="polytile-ct-") as cache:
        env = dict(os.environ, POLYTILE_CACHE_DIR=cache)
        env.pop("POLYTILE_CFLAGS", None)
        try:
            p = subprocess.run([sys.executable, "-c", _PROFILE_CHILD, text, str(SHAPE_N), str(top), "1" if build else "0",
                                dtype],
                               capture_output=True, text=True, env=env, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"status": "timeout"}
    res = next((json.loads(ln[10:]) for ln in p.stdout.splitlines() if ln.startswith("@@PROFILE ")), None)
    if res is None:
        return {"status": "error", "detail": p.stderr[-2000:]}
    return {"status": "ok", **res}


def _interesting(rows: List[Dict[str, Any]], top: int) -> List[Dict[str, Any]]:
    """The top ``top`` by cumulative time, leaving out the interpreter's and the driver's own frames."""
    skip = ("<built-in method builtins.exec>", "<module>", "compile", "specialize_shapes", "specialize")
    out = [r for r in rows if not (r["function"] in skip and "polytile" not in r["where"]) and
           not r["where"].startswith("~")]
    return out[:top]


def growth(rows: List[Dict[str, Any]]) -> List[Optional[float]]:
    out: List[Optional[float]] = [None]
    for a, b in zip(rows, rows[1:]):
        if a.get("seconds") and b.get("seconds"):
            out.append(math.log(b["seconds"] / a["seconds"]) / math.log(b["statements"] / a["statements"]))
        else:
            out.append(None)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 30, 100, 300], help="statement counts")
    ap.add_argument("--options", nargs="+", choices=sorted(OPTIONS), default=["default", "smart"])
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per (size, options) before 'timeout'")
    ap.add_argument("--profile", type=int, default=None, metavar="N", help="cProfile the N-statement case")
    ap.add_argument("--top", type=int, default=15, help="profile rows to print")
    ap.add_argument("--profile-build", action="store_true", help="profile the C compiler's run too")
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"],
                    help="element type of A, B, V (float64: the autotiler blocks every contraction at N=8)")
    ap.add_argument("--out", type=Path, default=None,
                    help="JSON path (default benchmarks/results/compile_time[_float64].json)")
    ap.add_argument("--show-program", type=int, metavar="N", help="print the N-statement program and exit")
    args = ap.parse_args(argv)
    if args.show_program:
        print(program(args.show_program), end="")
        return 0

    results: Dict[str, List[Dict[str, Any]]] = {}
    for opt in args.options:
        rows = []
        timed_out = False
        for n in sorted(args.sizes):
            if timed_out:  # a larger program would only time out too
                rows.append({"statements": n, "status": "skipped (smaller size timed out)", "seconds": None})
                continue
            print(f"  .. {opt}: {n} statements", file=sys.stderr, flush=True)
            r = {"statements": n, **measure(n, opt, args.timeout, args.dtype)}
            rows.append(r)
            timed_out = r["status"] == "timeout"
        for r, g in zip(rows, growth(rows)):
            r["growth_exponent_from_previous"] = g
        results[opt] = rows

    stage_names = ["bind", "lower", "deps", "schedule", "codegen", "build"]
    table = [["options", "statements", "seconds", "growth", *stage_names]]
    for opt, rows in results.items():
        for r in rows:
            sec = f"{r['seconds']:.2f}" if r.get("seconds") else r["status"]
            g = r.get("growth_exponent_from_previous")
            st = r.get("stages", {})
            table.append([opt, r["statements"], sec, "-" if g is None else f"n^{g:.2f}",
                          *[f"{st[s]:.2f}" if s in st else "-" for s in stage_names]])
    print(f"compile time, {args.dtype} (fresh process, empty cache; seconds; growth = exponent from the previous size)")
    print(format_table(table))
    for opt, rows in results.items():
        last = rows[-1]
        verdict = ("timeout" if last["status"] == "timeout" else
                   f"{last['seconds']:.1f} s" if last.get("seconds") else last["status"])
        print(f"{opt}: {last['statements']} statements -> {verdict} (aim: < 10 s, linear growth)")

    prof = None
    if args.profile:
        print(f"\n  .. profiling {args.profile} statements (default options)", file=sys.stderr, flush=True)
        prof = profile(args.profile, max(args.timeout, 600.0), args.top, build=args.profile_build,
                       dtype=args.dtype)
        if prof["status"] == "ok":
            print(f"\ncProfile, {args.profile} statements, {args.dtype}, default options"
                  f"{'' if args.profile_build else ', without the C compiler (build=False)'}: top {args.top} by cumulative time "
                  f"(total {prof['total']:.1f} s)")
            rows = _interesting(prof["rows"], args.top)
            print(format_table([[f"{r['cumtime']:.2f}", f"{r['tottime']:.2f}", r["ncalls"], r["function"], r["where"]]
                                for r in rows], ["cumtime s", "tottime s", "calls", "function", "where"]))
            prof["top"] = rows
        else:
            print(f"profile: {prof['status']} {prof.get('detail', '')[-500:]}")

    data = {"provenance": _common.provenance(
                shape_n=SHAPE_N, timeout_seconds=args.timeout,
                method="fresh python process per (size, options), empty POLYTILE_CACHE_DIR, time of "
                       f"polytile.compile(text, **options) + Kernel.specialize_shapes ({args.dtype}, N=8), "
                       "stage times from POLYTILE_DEBUG=1",
                options={k: OPTIONS[k] for k in args.options}),
            "results": results, "profile": prof,
            "program_example_10": program(10)}
    out = args.out or _common.RESULTS / f"compile_time{'' if args.dtype == 'float32' else '_' + args.dtype}.json"
    path = _common.write_json(out, data)
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
