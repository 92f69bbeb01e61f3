"""Run every reproduction under papers/: each folder's run.py, one after the other.

    python papers/run_all.py                    # full runs (about 20 minutes on 2 cores), outputs in each folder
    python papers/run_all.py --quick --out DIR  # a smoke run of every script in under 2 minutes (the tests run it)
    python papers/run_all.py --only roofline pluto-time-tiling
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PAPERS = sorted(p.name for p in HERE.iterdir() if (p / "run.py").is_file())
sys.path.insert(0, str(HERE))
import paperlib as C  # noqa: E402


def paper_module(name: str):
    """A paper's run.py as a module (its ``render`` and ``headline``)."""
    spec = importlib.util.spec_from_file_location(f"paper_{name.replace('-', '_')}", HERE / name / "run.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def index(names=PAPERS) -> str:
    """papers/README.md's table: each paper, its headline from the committed results, the command."""
    rows = []
    for name in names:
        mod = paper_module(name)
        res = HERE / name / "results.json"
        head = mod.headline(json.loads(res.read_text())) if res.is_file() else "(not run yet)"
        title = mod.TITLE
        rows.append([f"[{name}]({name}/)", title, head, f"`python papers/{name}/run.py`"])
    return C.table(rows, ["folder", "paper", "headline (this machine)", "rerun"])


def refresh_index() -> None:
    readme = HERE / "README.md"
    text = readme.read_text()
    new = re.sub(re.escape(C.BEGIN) + r"\n.*?" + re.escape(C.END), lambda m: f"{C.BEGIN}\n{index()}{C.END}", text,
                 flags=re.S)
    readme.write_text(new)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smoke runs (tiny sizes) instead of the full experiments")
    ap.add_argument("--out", type=Path, help="write into DIR/<paper>/ instead of each paper's folder "
                                            "(required with --quick: smoke results never replace the committed ones)")
    ap.add_argument("--workers", metavar="local:N", help="pass --workers to every script (Tile measurements on Dask)")
    ap.add_argument("--scheduler", metavar="tcp://HOST:PORT", help="pass --scheduler to every script")
    ap.add_argument("--index", action="store_true", help="only rewrite papers/README.md's table from the committed results")
    ap.add_argument("--only", nargs="+", choices=PAPERS, default=PAPERS, metavar="PAPER", help=f"of {', '.join(PAPERS)}")
    args = ap.parse_args(argv)
    if args.index:
        refresh_index()
        return 0
    if args.quick and args.out is None:
        ap.error("--quick needs --out DIR")
    failed = []
    for name in args.only:
        cmd = [sys.executable, str(HERE / name / "run.py")] + (["--quick"] if args.quick else [])
        if args.out is not None:
            cmd += ["--out", str(args.out / name)]
        cmd += ["--workers", args.workers] if args.workers else []
        cmd += ["--scheduler", args.scheduler] if args.scheduler else []
        print(f"== {name}: {' '.join(cmd[1:])}", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        rc = subprocess.call(cmd)
        print(f"== {name}: exit {rc} after {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
        if rc:
            failed.append(name)
    if args.out is None:
        refresh_index()  # full runs wrote into the paper folders: their headlines changed
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
