#!/usr/bin/env python3
"""ASan + UBSan over every example and every C kernel, at the files' shapes and at odd ones.

Issue 12's proof, part 1.  Every build uses

    -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -O1 -g -fopenmp

(Tile programs: the ``cflags=`` compile option, plus ``-fPIC -shared`` since it replaces the defaults;
C kernels: :func:`polytile.c_runner.build`, which adds them) and runs in a *worker subprocess* started with
``LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libstdc++.so)"`` and
``ASAN_OPTIONS=detect_leaks=0`` (an ASan-built library cannot be dlopen'ed into an uninstrumented Python
otherwise; libstdc++ after libasan, or the first C++ exception islpy throws aborts in ASan's
``__cxa_throw`` interceptor).  The worker drops LD_PRELOAD from
its own environment once started, so the gcc it spawns runs normally.  A sanitizer report aborts the
worker (``-fno-sanitize-recover=all``, ``halt_on_error=1``); the driver records it as a finding with the
case that was running, and restarts a worker on the remaining cases.

Cases
  * Tile: each ``examples/*.tile`` at each ``// dims:`` line and at odd shapes (every size 1, small
    primes, the first line's sizes + 1 and - 1: non-multiples of the tile sizes), float64, float32 and
    int32 (where the program is exact on integers), with the default options (autotiled for the host)
    and with ``fusion="smart", hardware=None``.  Outputs are also compared with ``polytile.reference``.
  * C: each ``tests/c_kernels/*.c`` as written and as ``polytile opt`` writes it (default options),
    at the tests' sizes and at odd ones (all 1, all 2, primes, 33); the optimised build's arrays must be
    bitwise identical to the original build's (both built with the sanitizer flags and
    ``-ffp-contract=off``).

Outcomes per run: ok; mismatch (wrong result vs the oracle / the original); rejected (a located user error,
e.g. a shape the program cannot take: not a finding); error (a Python exception from polytile: a finding);
sanitizer (an ASan/UBSan report: a finding); died (the worker died otherwise: a finding).

    python tests/fuzz/sanitize.py                 # everything (~10 min on 2 cores)
    python tests/fuzz/sanitize.py --quick         # a few cases per file
    python tests/fuzz/sanitize.py --only c --json /tmp/san.json
"""
from __future__ import annotations

import argparse
import faulthandler
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
EXAMPLES = ROOT / "examples"
KERNELS = TESTS / "c_kernels"

SAN_FLAGS = ("-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer",
             "-O1", "-g", "-fopenmp")
#: C kernels: also the bitwise-comparison flag of polytile.c_runner.DEFAULT_FLAGS.
C_FLAGS = SAN_FLAGS + ("-ffp-contract=off",)
TILE_FLAGS = SAN_FLAGS + ("-fPIC", "-shared")

SAN_PATTERNS = re.compile(r"ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:|"
                          r"SUMMARY: (Address|Undefined)|AddressSanitizer:DEADLYSIGNAL")

PRIMES = (7, 3, 5, 11, 13, 2, 17)


# ---------------------------------------------------------------------------
# environment
# ---------------------------------------------------------------------------


def sanitizer_runtime() -> Optional[str]:
    """Path of gcc's libasan.so, or None when the toolchain has no ASan runtime (or no gcc)."""
    gcc = shutil.which("gcc")
    if gcc is None:
        return None
    try:
        out = subprocess.run([gcc, "-print-file-name=libasan.so"], capture_output=True, text=True,
                             timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    # gcc prints the bare name back when it does not have the file.
    if not out or not os.path.isabs(out) or not os.path.exists(out):
        return None
    return os.path.realpath(out)


def sanitizer_works(libasan: str, cache_dir: str) -> Tuple[bool, str]:
    """Build and dlopen an ASan+UBSan library in a preloaded Python: (works, why not)."""
    with tempfile.TemporaryDirectory() as d:
        src, so = Path(d) / "probe.c", Path(d) / "libprobe.so"
        src.write_text("#include <omp.h>\nint probe(int n){int s=0;\n#pragma omp parallel for reduction(+:s)\n"
                       "for(int i=0;i<n;i++) s+=i; return s;}\n")
        r = subprocess.run(["gcc", *TILE_FLAGS, "-o", str(so), str(src)], capture_output=True, text=True)
        if r.returncode != 0:
            return False, f"gcc cannot build with {' '.join(TILE_FLAGS)}: {r.stderr.strip()[:300]}"
        code = f"import ctypes; print(ctypes.CDLL({str(so)!r}).probe(10))"
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=worker_env(libasan, cache_dir), timeout=120)
        if r.returncode != 0 or r.stdout.strip() != "45":
            return False, f"a preloaded Python cannot run an ASan library: {r.stderr.strip()[:300]}"
    return True, ""


def _libstdcxx() -> Optional[str]:
    """gcc's libstdc++.so: preloaded after libasan so that ASan's __cxa_throw interceptor finds the real one
    (islpy throws C++ exceptions; without it the first one aborts with 'CHECK failed ... real___cxa_throw')."""
    try:
        out = subprocess.run(["gcc", "-print-file-name=libstdc++.so"], capture_output=True, text=True,
                             timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return os.path.realpath(out) if os.path.isabs(out) and os.path.exists(out) else None


def worker_env(libasan: str, cache_dir: str, threads: int = 2, case_timeout: float = 240.0) -> Dict[str, str]:
    env = dict(os.environ)
    cxx = _libstdcxx()
    env.update({
        "LD_PRELOAD": libasan + (f" {cxx}" if cxx else ""),
        "ASAN_OPTIONS": "detect_leaks=0:halt_on_error=1:abort_on_error=0:allocator_may_return_null=1",
        "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
        "POLYTILE_CACHE_DIR": cache_dir,
        "OMP_NUM_THREADS": str(threads),
        "POLYTILE_SAN_CASE_TIMEOUT": str(case_timeout),
        "PYTHONPATH": os.pathsep.join([str(TESTS), str(ROOT), env.get("PYTHONPATH", "")]),
    })
    env.pop("POLYTILE_CFLAGS", None)
    return env


# ---------------------------------------------------------------------------
# cases
# ---------------------------------------------------------------------------


def _odd_dims(dims: Dict[str, int]) -> List[Tuple[str, Dict[str, int]]]:
    names = list(dims)
    out = [("ones", {n: 1 for n in names}),
           ("primes", {n: PRIMES[i % len(PRIMES)] for i, n in enumerate(names)}),
           ("plus1", {n: dims[n] + 1 for n in names}),
           ("minus1", {n: max(1, dims[n] - 1) for n in names})]
    return out


def _odd_shape(shape, how: str, i: int):
    if how == "ones":
        return [1] * len(shape)
    if how == "primes":
        return [PRIMES[(i + k) % len(PRIMES)] for k in range(len(shape))]
    if how == "plus1":
        return [s + 1 for s in shape]
    return [max(1, s - 1) for s in shape]


def tile_cases(quick: bool = False, options=("default", "smart")) -> List[dict]:
    sys.path.insert(0, str(TESTS))
    import polytile
    from numpy_programs import example_cases, example_paths
    from test_examples_compiled import integer_exact

    cases = []
    for path in example_paths():
        file_cases = example_cases(path)
        program = polytile.load_program(path)
        dtypes = ["float64", "float32"] + (["int32"] if integer_exact(program) else [])
        shape_sets = [(f"line{n}", c["dims"], c.get("named_shapes", {})) for n, c in enumerate(file_cases)]
        first = file_cases[0]
        for how, dims in _odd_dims(first["dims"]):
            named = {k: _odd_shape(v, how, i) for i, (k, v) in enumerate(first.get("named_shapes", {}).items())}
            shape_sets.append((how, dims, named))
        if quick:
            shape_sets = shape_sets[:1] + [s for s in shape_sets if s[0] in ("ones", "primes")]
            dtypes = dtypes[:1]
        for label, dims, named in shape_sets:
            for dt in dtypes:
                for opt in options:
                    cases.append({"kind": "tile", "file": str(path), "label": label, "dims": dims,
                                  "named_shapes": named, "positive": first.get("positive", False),
                                  "dtype": dt, "options": opt})
    return cases


def c_cases(quick: bool = False) -> List[dict]:
    sys.path.insert(0, str(TESTS))
    from test_c_opt import OPT_SIZES, OPT_SCALARS
    from test_c_extract import SPECS

    cases = []
    for path in sorted(KERNELS.glob("*.c")):
        spec = SPECS.get(path.name, {})
        base = OPT_SIZES.get(path.name)
        scalars = OPT_SCALARS.get(path.name) or spec.get("scalars") or {}
        sets: List[Tuple[str, Optional[Dict[str, int]]]] = [("tests", base)]
        if base:  # sizes are parameters: odd values of every one
            names = list(base)
            sets += [("ones", {n: 1 for n in names}), ("twos", {n: 2 for n in names}),
                     ("primes", {n: PRIMES[i % len(PRIMES)] for i, n in enumerate(names)}),
                     ("33", {n: 33 for n in names})]
            # time loops at 33 make stencils slow under ASan
            sets[-1] = ("33", {n: (3 if n in ("tsteps", "tmax") else 33) for n in names})
        else:  # macros sized (2mm, heat-3d): the file's values and odd ones, set through c_runner's #define rewrite
            sets += [("macros-odd", "odd")]
        if quick:
            sets = [s for s in sets if s[0] in ("tests", "primes", "macros-odd")]
        for label, sizes in sets:
            cases.append({"kind": "c", "file": str(path), "label": label, "sizes": sizes, "scalars": scalars,
                          "assume_no_alias": bool(spec.get("assume_no_alias", False))})
    return cases


# ---------------------------------------------------------------------------
# the worker (runs inside the preloaded subprocess)
# ---------------------------------------------------------------------------


def _as_tuple(x):
    return tuple(x) if isinstance(x, tuple) else (x,)


def run_tile_case(case: dict) -> Tuple[str, str]:
    import numpy as np
    import polytile
    from polytile.errors import PolytileError
    from numpy_programs import input_shapes
    from test_examples_compiled import F32_TOL, F64_TOL, float_inexact

    opts = {"cflags": TILE_FLAGS}
    if case["options"] == "smart":
        opts.update(fusion="smart", hardware=None)
    program = polytile.load_program(case["file"])
    dt = np.dtype(case["dtype"])
    c = {"dims": case["dims"], "named_shapes": {k: tuple(v) for k, v in case["named_shapes"].items()}}
    try:
        shapes = input_shapes(program, c)
    except ValueError as e:
        return "rejected", f"no shapes: {e}"
    rng = np.random.default_rng(zlib.crc32(json.dumps(case, sort_keys=True).encode()))
    lo, hi = (1, 4) if case["positive"] else (-4, 4)
    arrays = [np.asarray(rng.integers(lo, hi + 1, size=s)).astype(dt) for s in shapes]
    try:
        want = _as_tuple(polytile.reference(program, *[a.copy() for a in arrays]))
    except (PolytileError, ValueError) as e:
        return "rejected", f"oracle: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
    try:
        k = polytile.compile(program, **opts)
        got = _as_tuple(k(*[a.copy() for a in arrays]))
    except PolytileError as e:  # a shape the oracle runs must compile and run
        return "error", f"the oracle ran it but the kernel raised {type(e).__name__}: {str(e).splitlines()[0][:300]}"
    inexact = float_inexact(program) and case["dtype"] != "int32"
    tol = F32_TOL if case["dtype"] == "float32" else F64_TOL
    problems = []
    for name, g, w in zip(program.outputs, got, want):
        w = np.asarray(w)
        if g.shape != w.shape or g.dtype != w.dtype:
            problems.append(f"{name}: {g.dtype}{g.shape} vs oracle {w.dtype}{w.shape}")
        elif inexact:
            if not np.allclose(g, w, equal_nan=True, **tol):
                problems.append(f"{name}: not within tolerance (max diff {np.nanmax(np.abs(g - w)):.3g})")
        elif not np.array_equal(g, w, equal_nan=True) if g.dtype.kind == "f" else not np.array_equal(g, w):
            problems.append(f"{name}: differs from the oracle in {int((g != w).sum())} of {g.size}")
    if len(got) != len(want):
        problems.append(f"{len(got)} outputs, oracle {len(want)}")
    return ("mismatch", "; ".join(problems)) if problems else ("ok", "")


def run_c_case(case: dict) -> Tuple[str, str]:
    import numpy as np
    from polytile import c_runner
    from polytile.errors import PolytileError

    path = Path(case["file"])
    sizes = case["sizes"]
    if sizes == "odd":  # macro-sized files: every integer macro the regions use -> a prime / 1
        from polytile.frontends.c import extract
        macros = {}
        for cs in extract(path, assume_no_alias=case["assume_no_alias"]):
            macros.update(cs.macros)
        sizes = {m: PRIMES[i % len(PRIMES)] + (30 if i % 2 else 0) for i, m in enumerate(sorted(macros))}
        case["resolved_sizes"] = sizes
    try:
        call = c_runner.prepare(path, sizes=sizes, scalars=case["scalars"], assume_no_alias=case["assume_no_alias"],
                            seed=zlib.crc32(case["label"].encode()))
    except PolytileError as e:
        return "rejected", f"prepare: {str(e).splitlines()[0][:200]}"
    include = path.parent
    orig = c_runner.build(call.source, name=f"{call.function}_orig_san", flags=C_FLAGS, include_dir=include)
    want, _ = call.run(orig)
    text, results = c_runner.optimise(path, assume_no_alias=case["assume_no_alias"], skip_nonaffine=True)
    notes = [f"lines {r.cscop.lines[0]}-{r.cscop.lines[1]} left as written" for r in results if r.text is None]
    opt = c_runner.build(call.with_macros(text), name=f"{call.function}_opt_san", flags=C_FLAGS, include_dir=include)
    got, _ = call.run(opt)
    problems = [d for d in (c_runner.bitwise_difference(n, got[n], want[n]) for n in want) if d]
    changed = any(not np.array_equal(want[n], call.inputs[n]) for n in want)
    detail = "; ".join(problems + notes + ([] if changed else ["(the call changed no array)"]))
    return ("mismatch" if problems else "ok"), detail


def worker(case_file: str) -> int:
    os.environ.pop("LD_PRELOAD", None)  # the runtime is loaded; gcc and friends must not get it
    sys.path.insert(0, str(TESTS))
    from polytile.errors import PolytileError

    cases = json.loads(Path(case_file).read_text())
    # A case that hangs (in isl's scheduler, or in C: a call cannot be interrupted from Python) is ended by
    # faulthandler's watchdog thread: the driver sees "Timeout (" and records a timeout.
    case_timeout = float(os.environ.get("POLYTILE_SAN_CASE_TIMEOUT", "240"))
    for i, case in enumerate(cases):
        print(f"@@BEGIN {i}", flush=True)
        faulthandler.dump_traceback_later(case_timeout, exit=True)
        try:
            status, detail = (run_tile_case if case["kind"] == "tile" else run_c_case)(case)
        except PolytileError as e:
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            # A user error polytile located (ShapeError etc.) is a refusal; a compiler failure is not.
            bad = type(e).__name__ in ("CompilerError", "InternalError", "ToolchainError", "CacheError")
            status, detail = ("error" if bad else "rejected"), f"{type(e).__name__}: {first[:300]}"
        except Exception as e:  # noqa: BLE001 - every exception is a finding
            status, detail = "error", f"{type(e).__name__}: {e}\n{traceback.format_exc()[-1500:]}"
        faulthandler.cancel_dump_traceback_later()
        print(f"@@END {i} {json.dumps({'status': status, 'detail': detail, 'resolved': case.get('resolved_sizes')})}",
              flush=True)
    return 0


# ---------------------------------------------------------------------------
# the driver
# ---------------------------------------------------------------------------


def _describe(case: dict) -> str:
    name = Path(case["file"]).name
    if case["kind"] == "tile":
        dims = ",".join(f"{k}={v}" for k, v in case["dims"].items())
        shp = (" shape " + ",".join(f"{k}={'x'.join(map(str, v))}" for k, v in case["named_shapes"].items())
               if case["named_shapes"] else "")
        return f"{name} [{case['label']}] {dims}{shp} {case['dtype']} options={case['options']}"
    return f"{name} [{case['label']}] sizes={case.get('resolved_sizes') or case['sizes']}"


def run_group(cases: List[dict], env: Dict[str, str], timeout: float, workdir: Path) -> List[dict]:
    """Run ``cases`` in worker subprocesses (a new one after each crash); one record per case."""
    records: List[dict] = []
    todo = list(cases)
    while todo:
        fd, case_file = tempfile.mkstemp(dir=workdir, suffix=".json")
        os.close(fd)
        Path(case_file).write_text(json.dumps(todo))
        t0 = time.perf_counter()
        try:
            p = subprocess.run([sys.executable, __file__, "--worker", case_file], capture_output=True, text=True,
                               env=env, timeout=timeout * len(todo) + 60, cwd=ROOT)
            out, err, rc = p.stdout, p.stderr, p.returncode
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            err = (e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")) + "\n[timeout]"
            rc = None
        done: Dict[int, dict] = {}
        begun = -1
        for line in out.splitlines():
            if line.startswith("@@BEGIN "):
                begun = int(line.split()[1])
            elif line.startswith("@@END "):
                _, idx, payload = line.split(" ", 2)
                done[int(idx)] = json.loads(payload)
        for idx in sorted(done):
            rec = {"case": todo[idx], "status": done[idx]["status"], "detail": done[idx]["detail"]}
            if done[idx].get("resolved"):
                rec["case"] = {**todo[idx], "resolved_sizes": done[idx]["resolved"]}
            records.append(rec)
        if len(done) == len(todo):
            break
        # The worker died in case `begun` (or before the first one).
        crashed = begun if begun >= 0 and begun not in done else (max(done) + 1 if done else 0)
        status = ("sanitizer" if SAN_PATTERNS.search(err) else
                  "timeout" if rc is None or "Timeout (" in err else "died")
        report = _sanitizer_excerpt(err)
        records.append({"case": todo[crashed], "status": status, "detail": f"exit {rc}\n{report}",
                        "seconds": time.perf_counter() - t0})
        todo = todo[crashed + 1:]
    return records


def _sanitizer_excerpt(err: str, limit: int = 4000) -> str:
    lines = err.splitlines()
    for k, line in enumerate(lines):
        if SAN_PATTERNS.search(line):
            return "\n".join(lines[max(0, k - 2):k + 40])[:limit]
    return "\n".join(lines[-40:])[:limit]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--only", choices=("tile", "c"), help="only the Tile examples or only the C kernels")
    ap.add_argument("--quick", action="store_true", help="a few cases per file")
    ap.add_argument("--match", default="", help="only files whose name contains this")
    ap.add_argument("--jobs", type=int, default=max(1, min(4, os.cpu_count() or 1)))
    ap.add_argument("--timeout", type=float, default=240.0, help="seconds per case (then: timeout)")
    ap.add_argument("--json", type=Path, help="write every record here")
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args.worker)

    libasan = sanitizer_runtime()
    if libasan is None:
        print("no ASan runtime (gcc -print-file-name=libasan.so): nothing to do", file=sys.stderr)
        return 3
    cache_dir = tempfile.mkdtemp(prefix="polytile-san-cache-")
    workdir = Path(tempfile.mkdtemp(prefix="polytile-san-"))
    ok, why = sanitizer_works(libasan, cache_dir)
    if not ok:
        print(why, file=sys.stderr)
        return 3
    env = worker_env(libasan, cache_dir, case_timeout=args.timeout)
    cases: List[dict] = []
    if args.only in (None, "tile"):
        cases += tile_cases(args.quick)
    if args.only in (None, "c"):
        cases += c_cases(args.quick)
    cases = [c for c in cases if args.match in Path(c["file"]).name]
    groups: Dict[str, List[dict]] = {}
    for c in cases:
        groups.setdefault(c["file"], []).append(c)
    print(f"{len(cases)} runs in {len(groups)} files, {args.jobs} workers; flags: {' '.join(SAN_FLAGS)}; "
          f"LD_PRELOAD={libasan}", flush=True)
    t0 = time.perf_counter()
    records: List[dict] = []
    with ThreadPoolExecutor(args.jobs) as pool:
        for file, recs in zip(groups, pool.map(lambda g: run_group(g, env, args.timeout, workdir), groups.values())):
            counts = {}
            for r in recs:
                counts[r["status"]] = counts.get(r["status"], 0) + 1
            print(f"  {Path(file).name:24s} " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), flush=True)
            records += recs
    elapsed = time.perf_counter() - t0
    totals: Dict[str, Dict[str, int]] = {}
    for r in records:
        t = totals.setdefault(r["case"]["kind"], {})
        t[r["status"]] = t.get(r["status"], 0) + 1
    findings = [r for r in records if r["status"] in ("sanitizer", "died", "timeout", "error", "mismatch")]
    print(f"\n{len(records)} runs in {elapsed:.0f} s")
    for kind, t in totals.items():
        print(f"  {kind:5s}: " + ", ".join(f"{k} {v}" for k, v in sorted(t.items())))
    rejected = [r for r in records if r["status"] == "rejected"]
    if rejected:
        print(f"\nrejected (user errors, not findings): {len(rejected)}")
        for r in rejected[:40]:
            print(f"  {_describe(r['case'])}: {r['detail'][:160]}")
    print(f"\nfindings: {len(findings)}")
    for r in findings:
        print(f"--- {r['status']}: {_describe(r['case'])}\n{r['detail']}\n")
    if args.json:
        args.json.write_text(json.dumps({"flags": list(SAN_FLAGS), "libasan": libasan, "seconds": elapsed,
                                         "totals": totals, "records": records}, indent=1, default=str))
    shutil.rmtree(cache_dir, ignore_errors=True)
    shutil.rmtree(workdir, ignore_errors=True)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
