"""``polytile tune FILE.tile``: its options (:func:`add_arguments`), :func:`main_tune`, and :func:`parse_budget`."""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from .. import executor as executor_mod
from ..cli.argtypes import arg_type, nonnegative_int, positive_int
from .. import plots
from ..errors import PolytileError
from .result import TuneResult, _ms
from .search import TuneInterrupted, cache_path, tune


_BUDGET = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(s|sec|m|min|h)?\s*$", re.IGNORECASE)


def parse_budget(text) -> float:
    """Seconds from ``"60s"``, ``"2m"``, ``"1.5m"``, ``"1h"`` or a plain number of seconds.

    >>> parse_budget("2m"), parse_budget("90"), parse_budget("45s")
    (120.0, 90.0, 45.0)
    """
    if isinstance(text, (int, float)):
        seconds = float(text)
    else:
        m = _BUDGET.match(str(text))
        if not m:
            raise PolytileError(f"bad budget {text!r}: write seconds (90, 60s), minutes (2m) or hours (1h)")
        unit = (m.group(2) or "s").lower()
        seconds = float(m.group(1)) * {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600}[unit]
    if not seconds > 0:
        raise PolytileError(f"the budget must be positive, got {text!r}")
    return seconds


TUNE_EPILOG = """\
examples:
  polytile tune examples/matmul.tile --dims M=1024,N=1024,K=1024 --budget 60s -o best.json
  polytile tune examples/conv2d.tile --budget 2m --trials 100 --hardware x86-avx512
  polytile tune examples/matmul.tile --dims M=1024,N=1024,K=1024 --trials 48 --workers local:2
  polytile tune examples/matmul.tile --dims M=1024,N=1024,K=1024 --scheduler tcp://127.0.0.1:8786

  polytile tune examples/matmul.tile --dims M=512,N=512,K=512 --budget 30s --plot tune.png

The search measures the cost model's top-k blocked schedules of every
contraction, then anneals from the fastest; every schedule is checked against
the reference interpreter before it is timed.  Results are cached (per
program, sizes, dtypes, hardware, compiler and search settings) under
<cache dir>/tune/; --no-cache measures again.  Every trial is written to the
cache as it arrives: after Ctrl-C or a crash the same command resumes, and
measures none of the finished trials again.

--workers local:N measures N schedules at a time on N worker processes of
this machine (each kernel gets its share of the cores); --scheduler uses a
running Dask cluster (README: "Scaling out with Dask").  Both need the
optional extra: pip install -e '.[distributed]'.  Trials timed on another
kind of machine than the baseline are shown but never ranked.

--plot draws the run (PNG, SVG or PDF by the suffix; needs matplotlib:
pip install -e '.[plots]'): the best time so far against trials and against
seconds of search, and the cost model's prediction against the measurement
of every trial.  A result from the cache is drawn as it was measured.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``polytile tune`` to ``parser`` (FILE.tile, sizes, search settings)."""
    from ..cli.argtypes import figure_path
    from ..cli.inputs import _shape_options  # --dims/--shape/--dtype/--dtypes exactly as `run` has them

    if parser.epilog is None:
        parser.epilog = TUNE_EPILOG  # hand-formatted: shows best with a RawDescriptionHelpFormatter
    parser.add_argument("file", metavar="FILE.tile", help="the Tile program")
    _shape_options(parser)
    g = parser.add_argument_group("search")
    g.add_argument("--budget", type=arg_type(parse_budget, "budget"), default=60.0, metavar="TIME",
                   help="search time: 60s, 2m, or seconds (default: 60s; the oracle and baseline come first)")
    g.add_argument("--trials", type=nonnegative_int, default=200, metavar="N",
                   help="stop after N trials (default: 200)")
    g.add_argument("--top-k", dest="top_k", type=positive_int, default=8, metavar="K",
                   help="measure the cost model's K best configurations first (default: 8)")
    g.add_argument("--seed", type=int, default=0, metavar="S", help="random seed of the annealing (default: 0)")
    g.add_argument("--hardware", default="host", metavar="NAME|FILE",
                   help="hardware descriptor: a preset, 'host' (detected; the default) or a .toml/.json file")
    g.add_argument("--repeat", type=positive_int, default=5, metavar="N",
                   help="timed runs per schedule; the median counts (default: 5)")
    g.add_argument("--warmup", type=nonnegative_int, default=1, metavar="N",
                   help="untimed runs first, the oracle check included (default: 1)")
    g.add_argument("--no-cache", dest="no_cache", action="store_true",
                   help="ignore and do not write the cached result for these settings")
    g.add_argument("--no-progress", dest="no_progress", action="store_true", help="no progress bar")
    g.add_argument("--batch", type=positive_int, default=None, metavar="N",
                   help="schedules proposed and measured per search step (default: one per worker)")
    executor_mod.add_arguments(parser)
    out = parser.add_argument_group("output")
    out.add_argument("-o", "--output", metavar="BEST.json",
                     help="save the best schedule (replayable: compile(..., schedule=BEST.json))")
    out.add_argument("--json", dest="json_out", metavar="RESULT.json",
                     help="write the whole result (every trial) as JSON")
    out.add_argument("--plot", type=figure_path, metavar="FIG.png|.svg|.pdf",
                     help="draw the run: best time against trials and seconds, the model against the measurements")


def main_tune(args) -> int:
    """Run ``polytile tune`` for parsed ``args``; print the trial table and the best schedule.

    Ctrl-C during the search saves the best schedule so far (to -o, else next
    to the cached results) and the partial result (to --json), says where
    (and where the cache keeps the trials for the next run), and exits 130.
    ``--workers``/``--scheduler`` pick the executor (:mod:`polytile.executor`).
    """
    from ..cli.inputs import check_memory, resolve

    if getattr(args, "plot", None):
        plots.require()  # a missing matplotlib is found now, not after the search
    target = resolve(args)
    names = target.program.input_names
    check_memory(list(zip(names, target.shapes, target.dtypes)), "the inputs")  # before any allocation
    sizes = ", ".join(f"{k}={v}" for k, v in target.dims.items()) or \
        ", ".join(f"{n}={'x'.join(map(str, s))}" for n, s in zip(names, target.shapes))
    ex = executor_mod.from_args(args)  # before the banner: a cluster that cannot be reached is said first
    where = ex.describe()
    print(f"polytile: tuning {target.path} ({sizes}) on {args.hardware}, budget {args.budget:g} s, "
          f"at most {args.trials} trials"
          + ("" if where["executor"] == "in-process" else
             f", on {where['workers']} Dask worker(s) at {where['address']}"), file=sys.stderr)
    try:
        with ex:
            result = tune(target.program, target.size_values, shapes=dict(zip(names, target.shapes)),
                          dtypes=list(target.dtypes),
                          hardware=args.hardware, budget_s=args.budget, max_trials=args.trials, top_k=args.top_k,
                          seed=args.seed, repeat=args.repeat, warmup=args.warmup,
                          progress=not getattr(args, "no_progress", False), cache=not args.no_cache,
                          executor=ex, batch=getattr(args, "batch", None))
    except TuneInterrupted as stopped:
        return _save_interrupted(args, target, stopped.result)
    print(result.table())
    print()
    print("best schedule:")
    print(result.best.describe())
    if args.output:
        _write_best(result, Path(args.output))
        print(f"wrote {args.output}", file=sys.stderr)
    if getattr(args, "json_out", None):
        path = Path(args.json_out)
        _write_result(result, path)
        print(f"wrote {path}", file=sys.stderr)
    _plot(args, target, result)
    return 0


def _plot(args, target, result: TuneResult) -> None:
    """--plot: the run's figure, titled with the file and sizes."""
    if not getattr(args, "plot", None) or not result.trials:
        return
    sizes = ", ".join(f"{k}={v}" for k, v in target.dims.items())
    plots.tuning_curve(result, path=args.plot, title=f"tuning {target.path}" + (f" ({sizes})" if sizes else "")
                       + f" on {result.info.get('hardware', args.hardware)}")
    print(f"wrote {args.plot} (figure)", file=sys.stderr)


def _write_best(result: TuneResult, path: Path) -> None:
    try:
        result.best.save(path)
    except OSError as e:
        raise PolytileError(f"cannot write {path}: {e.strerror or e}") from None


def _write_result(result: TuneResult, path: Path) -> None:
    try:
        path.write_text(result.dumps() + "\n", encoding="utf-8")
    except OSError as e:
        raise PolytileError(f"cannot write {path}: {e.strerror or e}") from None


def _save_interrupted(args, target, result: TuneResult) -> int:
    """Ctrl-C: keep the best schedule measured so far, say where it went, exit 130."""
    if result.trials:
        print(result.table())
    ok = sum(1 for t in result.trials if t.measured and t.ok is not False)
    which = (f"trial {result.best_trial}, {_ms(result.best_time_s)}, {result.speedup:.2f}x over the baseline"
             if result.best_trial is not None else f"compile's default schedule, {_ms(result.best_time_s)}")
    print(f"polytile: tuning interrupted after {len(result.trials)} trials ({ok} measured ok); "
          f"best so far: {which}", file=sys.stderr)
    path = Path(args.output) if args.output else cache_path(result.key).with_suffix(".interrupted.json")
    if not args.output:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o755)  # json_cache refuses a group-writable namespace
    _write_best(result, path)
    print(f"polytile: saved the best schedule so far to {path}; replay it with "
          f"`polytile run {target.path} --schedule {path}`", file=sys.stderr)
    if getattr(args, "json_out", None):
        _write_result(result, Path(args.json_out))
        print(f"polytile: saved the partial result (every trial so far) to {args.json_out}", file=sys.stderr)
    _plot(args, target, result)
    partial = result.info.get("partial_cache")
    if partial:
        print(f"polytile: the {len(result.trials)} trials are kept in {partial}; the same command resumes "
              f"from them", file=sys.stderr)
    return 130

