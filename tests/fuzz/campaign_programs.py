"""Program campaign: random Tile programs, compiled kernel = oracle = independent numpy.

    python tests/fuzz/campaign_programs.py --n 10000 --seed 1 --json out.json [--workers 2] [--timeout 120]

For every program from :func:`gen_programs.generate` (seeds ``seed .. seed+n-1``):

* ``polytile.reference`` must give the generator's numpy result (or raise the
  expected ``CollisionError``);
* ``polytile.compile(text, **opts)(*arrays)`` must give it too, for each of
  ``default``, ``fusion="smart"``, ``fusion="max"`` and ``schedule``: 1-4 random
  schedule steps (tile/interchange/reorder/split/skew/reverse/shift/fuse/
  distribute/parallel/vectorize/unroll) applied to ``polytile.schedule(...)``
  of the program at the input shapes; steps refused with ``ScheduleError`` are
  skipped (legal: that is the API's promise).

Outcomes, per (program, option) and per program: ``pass``; ``mismatch`` (a
value, dtype or shape differs, or only some sides raise); ``crash`` (an
exception that is not a ``PolytileError``: a polytile bug); ``reject`` (a
``PolytileError`` on a program the generator considers valid); ``expected_error``
(the expected error, everywhere); ``timeout`` (the worker took longer than
``--timeout`` seconds and was killed).

Programs run in 2 worker processes ('spawn'), each with its own kernel cache
directory, wiped every 100 programs.  The JSON holds the counts, provenance
(git commit and status, versions, compiler, command, times) and every failure
with its reproducer (program text, inputs, option, message).
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Dict, List

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from workpool import WorkerPool  # noqa: E402

OPTIONS = ("default", "smart", "max", "schedule")
STEP_OPS = ("interchange", "reorder", "tile", "split", "skew", "reverse", "shift", "fuse", "distribute",
            "parallel", "vectorize", "unroll")


def random_schedule(text: str, case, rng: random.Random):
    """``polytile.schedule`` of the program at the inputs' shapes, with 1-4 random steps (refused ones skipped)."""
    import polytile
    from polytile import ScheduleError
    from polytile import scheduling as S

    shapes = {n: a.shape for n, a in case.inputs}
    dtypes = [a.dtype.name for a in case.arrays]
    s = polytile.schedule(text, shapes=shapes, dtypes=dtypes, parallel=rng.random() < 0.5,
                          fusion=rng.choice([None, None, "smart", "max"]))
    applied: List[str] = []
    for _ in range(rng.randint(1, 4)):
        names = [n for n, _ in s.stmts]
        if not names:
            break
        op = rng.choice(STEP_OPS)
        stmt = rng.choice(names)
        loops = s.loop_names(stmt) or ["i"]
        loop = rng.choice(loops)
        if op == "interchange":
            args, kw = (stmt, loop, rng.choice(loops)), {}
        elif op == "reorder":
            sub = rng.sample(loops, rng.randint(1, len(loops)))
            args, kw = (stmt, sub), {}
        elif op == "tile":
            chosen = rng.sample(loops, rng.randint(1, min(3, len(loops))))
            args, kw = (stmt, {lp: (rng.randint(1, 6) if rng.random() < 0.7 else [rng.randint(2, 6), rng.randint(1, 3)])
                               for lp in chosen}), {}
        elif op == "split":
            args, kw = (stmt, loop, rng.randint(1, 5)), {}
        elif op == "skew":
            args, kw = (stmt, loop, rng.choice(loops), rng.randint(-2, 2)), {}
        elif op == "reverse":
            args, kw = (stmt, loop), {}
        elif op == "shift":
            args, kw = (stmt, loop, rng.randint(-3, 3)), {}
        elif op == "fuse":
            other = rng.choice(names)
            common = max(1, min(len(loops), len(s.loop_names(other))))
            args, kw = (stmt, other, rng.choice([rng.randint(1, common), None])), {"before": rng.random() < 0.5}
        elif op == "distribute":
            args, kw = (stmt, rng.randint(0, max(0, len(loops) - 1))), {}
        elif op == "parallel":
            args, kw = (stmt, loop), {"reduction": rng.random() < 0.5}
        elif op == "vectorize":
            args, kw = (stmt, loop), {}
        else:
            args, kw = (stmt, loop, rng.randint(1, 8)), {}
        try:
            s = S.TRANSFORMS[op](s, *args, **kw)
            applied.append(f"{op}{args}{kw or ''}")
        except ScheduleError:
            continue
    return s, applied


def _tuple(x):
    return x if isinstance(x, tuple) else (x,)


def check_case(case, seed: int, options=OPTIONS) -> Dict:
    """Run the three-way check; returns {'outcome', 'options': {opt: (outcome, detail)}, ...}."""
    import numpy as np  # noqa: F401
    import polytile
    from polytile.errors import PolytileError

    from gen_programs import compare

    arrays = case.arrays
    res: Dict = {"seed": seed, "options": {}, "features": case.features,
                 "nonzero": bool(case.expected and any(np.any(v != 0) for v in case.expected.values()))}

    def judge(fn) -> tuple:
        try:
            out = _tuple(fn())
        except PolytileError as e:
            if case.expect_error and type(e).__name__ == case.expect_error:
                return "expected_error", ""
            if case.expect_error:
                return "mismatch", f"expected {case.expect_error}, got {type(e).__name__}: {e.message}"
            return "reject", f"{type(e).__name__}: {e.message}"
        except Exception as e:  # noqa: BLE001 - the point: anything else is a bug
            return "crash", f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=-6)}"
        if case.expect_error:
            return "mismatch", f"expected {case.expect_error}, got a result"
        if len(out) != len(case.outputs):
            return "mismatch", f"{len(out)} outputs, expected {len(case.outputs)}"
        for name, got in zip(case.outputs, out):
            why = compare(name, got, case.expected[name], case.inexact.get(name, False))
            if why:
                return "mismatch", why
        return "pass", ""

    res["options"]["oracle"] = judge(lambda: polytile.reference(case.text, *arrays))
    rng = random.Random(seed)
    for opt in options:
        def run(opt=opt):
            if opt == "default":
                k = polytile.compile(case.text)
            elif opt in ("smart", "max"):
                k = polytile.compile(case.text, fusion=opt)
            else:
                s, applied = random_schedule(case.text, case, rng)
                res["steps"] = applied
                k = polytile.compile(case.text, schedule=s)
            return k(*arrays)
        res["options"][opt] = judge(run)
    outcomes = [o for o, _ in res["options"].values()]
    for worst in ("crash", "mismatch", "reject", "expected_error", "pass"):
        if worst in outcomes:
            res["outcome"] = worst
            break
    return res


# ---------------------------------------------------------------------------
# workers
# ---------------------------------------------------------------------------


def worker(conn, cache_root: str) -> None:
    import warnings

    warnings.simplefilter("ignore")
    from gen_programs import describe, generate

    done = 0
    cache = tempfile.mkdtemp(prefix="cache-", dir=cache_root)
    os.environ["POLYTILE_CACHE_DIR"] = cache
    while True:
        seed = conn.recv()
        if seed is None:
            break
        t0 = time.time()
        try:
            case = generate(seed)
            res = check_case(case, seed)
            if res["outcome"] not in ("pass", "expected_error"):
                res["reproducer"] = describe(case)
        except Exception as e:  # noqa: BLE001 - the generator itself failed
            res = {"seed": seed, "outcome": "generator_error", "options": {},
                   "detail": f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=-4)}"}
        res["seconds"] = round(time.time() - t0, 3)
        conn.send(res)
        done += 1
        if done % 100 == 0:  # keep the disk use bounded
            shutil.rmtree(cache, ignore_errors=True)
            os.makedirs(cache, mode=0o700, exist_ok=True)


def provenance(args) -> Dict:
    import islpy
    import numpy

    def sh(*cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, cwd=HERE, timeout=30).stdout.strip()
        except Exception as e:  # noqa: BLE001
            return f"unavailable: {e}"

    return {
        "command": " ".join([sys.executable] + sys.argv),
        "git_commit": sh("git", "rev-parse", "HEAD"),
        "git_status": sh("git", "status", "--porcelain", "--", "polytile", "codegen", "frontends"),
        "python": sys.version.split()[0], "numpy": numpy.__version__, "islpy": islpy.__version__,
        "cc": sh(os.environ.get("POLYTILE_CC") or os.environ.get("CC") or "cc", "--version").splitlines()[:1],
        "host": platform.node(), "platform": platform.platform(), "cpus": os.cpu_count(),
        "seed": args.seed, "n": args.n, "workers": args.workers, "timeout_s": args.timeout,
        "generator": "tests/fuzz/gen_programs.py", "options": list(OPTIONS),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=120.0, help="per-program limit in seconds")
    ap.add_argument("--max-minutes", type=float, default=None, help="stop starting programs after this long")
    args = ap.parse_args(argv)

    started = time.time()
    counts = collections.Counter()
    per_option = collections.defaultdict(collections.Counter)
    features = collections.Counter()
    failures: List[Dict] = []
    reject_msgs = collections.Counter()
    state = {"done": 0}
    prov = provenance(args)

    def write(final: bool) -> None:
        if not args.json:
            return
        out = {
            "provenance": {**prov, "started": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)),
                           "elapsed_s": round(time.time() - started, 1), "finished": final},
            "programs": state["done"],
            "program_outcomes": dict(counts),
            "option_runs": sum(sum(c.values()) for k, c in per_option.items() if k != "oracle"),
            "per_option": {k: dict(v) for k, v in per_option.items()},
            "features": dict(features.most_common()),
            "reject_messages": dict(reject_msgs.most_common(50)),
            "failures": failures[:300],
        }
        tmp = args.json + ".tmp"
        with open(tmp, "w") as f:
            json.dump(out, f, indent=1, default=str)
        os.replace(tmp, args.json)

    def on_result(res: Dict) -> None:
        state["done"] += 1
        counts[res["outcome"]] += 1
        if res.get("nonzero"):
            counts["nonzero_expected_output"] += 1
        for f in res.get("features", []):
            features[f] += 1
        for opt, (o, detail) in res["options"].items():
            per_option[opt][o] += 1
            if o == "reject":
                reject_msgs[detail.split("\n")[0][:120]] += 1
        if res["outcome"] not in ("pass", "expected_error"):
            failures.append(res)
            print(f"[{state['done']}] seed {res['seed']}: {res['outcome']}", flush=True)
        if state["done"] % 100 == 0:
            rate = state["done"] / (time.time() - started)
            print(f"{state['done']} programs, {dict(counts)}, {rate:.2f}/s", flush=True)
            write(False)

    seeds = range(args.seed, args.seed + args.n)
    if args.max_minutes:
        deadline = started + 60 * args.max_minutes

        def limited(all_seeds=seeds):
            for s in all_seeds:
                if time.time() > deadline:
                    return
                yield s
        seeds = limited()
    cache_root = tempfile.mkdtemp(prefix="polytile-fuzz-")
    pool = WorkerPool(worker, (cache_root,), args.workers, args.timeout)

    def on_reply(seed, res, failure, seconds) -> None:
        if failure is not None:  # the worker died (a crash) or was killed at the time limit
            res = {"seed": seed, "outcome": "timeout" if failure.startswith("no answer") else "crash",
                   "options": {}, "detail": failure}
        on_result(res)

    try:
        pool.run(seeds, send=lambda seed: seed, on_result=on_reply)  # lazily: --max-minutes stops early
    finally:
        pool.close()
        shutil.rmtree(cache_root, ignore_errors=True)
    write(True)
    print(json.dumps({"programs": state["done"], "outcomes": dict(counts),
                      "per_option": {k: dict(v) for k, v in per_option.items()}}, indent=1))
    bad = sum(counts[k] for k in ("crash", "mismatch", "timeout", "generator_error"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
