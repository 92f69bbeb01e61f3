"""The autotuner: measure blocked schedules of a program's contractions and keep the fastest.

    >>> r = tune("examples/matmul.tile", dims="M=512,N=512,K=512", budget_s=30)   # doctest: +SKIP
    >>> print(r.table())                                                           # doctest: +SKIP
    >>> k = polytile.compile("examples/matmul.tile", schedule=r.best)              # doctest: +SKIP

The search space is :mod:`polytile.autotile`'s: one :class:`~polytile.autotile.TileConfig`
per contraction statement of the untuned default schedule (program order,
outermost dependence-free loops parallel).  A point of the search is the
tuple of configurations, one per statement.

1. **Model ranking.**  Every statement's ``autotile.candidates`` are ranked by
   the cost model (``cost.predict_config``; until that module exists, by the
   order ``candidates`` returns them in).  Tuples are enumerated in order of
   their summed predicted time; the first ``top_k`` distinct ones are measured,
   the model's favourite first (source ``"model-top-k"``).
2. **Simulated annealing** from the fastest measured point.  A move changes
   one parameter of one statement's configuration: ``mc``/``nc``/``kc`` doubled,
   halved or set to the neighbouring value the candidate list uses; the
   register block ``mr x nr`` to a neighbouring shape that fits the vector
   registers; the order of the three cache-tile loops (any of
   ``autotile.ORDERS``); the parallel loop (any valid one); the register tile
   on or off.  A slower point is accepted with probability
   ``exp(-(t_new - t_cur) / (T * t_cur))``, ``T`` decaying geometrically from
   0.1 to 0.005 over the budget (elapsed time or trials, whichever is further
   along).  When no unmeasured neighbour is found the search restarts from a
   random candidate (source ``"seed"``).  All randomness comes from
   ``numpy.random.default_rng(seed)``: with the same seed and a trial budget,
   the same measurements give the same sequence of configurations.
3. **Measurement.**  Every distinct schedule is compiled
   (``pipeline.compile(program, schedule=...)``), run once on fixed random
   integer-valued inputs (integers in [-4, 4], or [1, 4] when the oracle
   produces NaN on signed ones) and compared with the reference interpreter
   (``polytile.reference``, run once up front; a plain contraction such as
   matmul goes through its einsum path, under a second at 2048^3, the others
   through its enumeration): integer outputs exactly, float
   outputs with the ``run --check`` tolerance (``polytile.compare.check_output``) (``max_abs_err <= rtol *
   max(1, max|ref|)``, rtol 1e-4 for float32, 1e-5 for float64; with
   integer-valued inputs any wrong element is off by at least 1, far above
   it).  That run doubles as the first warm-up; after ``warmup - 1`` more,
   ``repeat`` timed calls give the median and minimum.  A kernel whose first
   call already takes longer than the per-trial measuring cap
   (``max(2 s, budget / 20)``) is timed with fewer calls (at least that one).
   A candidate that does not apply or is illegal (``IllegalSchedule``), does not
   compile (``CompilerError``) or mismatches the oracle is logged as a failed
   trial and never chosen.

The baseline is what ``polytile.compile`` would run untuned: its default
schedule for the same hardware descriptor (program order, outermost parallel
loops, blocked by the autotiler), measured in the same run; if no tuned schedule
beats it, that default is the answer.  (Measuring against the untiled program
order instead would overstate every gain.)  Results are cached as JSON under ``<cache_dir>/tune/<key>.json``; the
key covers the program text, input shapes and dtypes, the hardware descriptor,
the C compiler and flags, the polytile version and the search parameters that
change the answer (seed, max_trials, budget rounded to a second, top_k,
repeat, check).  A cached result is returned without compiling or measuring
anything: the best schedule is rebuilt by replaying its stored steps.

``polytile tune FILE.tile`` is :func:`add_arguments` + :func:`main_tune`.
"""
from __future__ import annotations

import argparse
import hashlib
import heapq
import json
import math
import os
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from .version import __version__
from . import autotile, pipeline
from . import hardware as hardware_mod
from . import interpreter as reference_mod
from .autotile import TileConfig
from .cli.argtypes import arg_type, nonnegative_int, positive_int
from .config import debug_log, get_config
from .errors import PolytileError
from .scheduling import Schedule, Step

__all__ = ["Trial", "TuneResult", "TuneStats", "TuneInterrupted", "stats", "tune", "cache_path", "parse_budget",
           "add_arguments", "main_tune", "SOURCES"]

#: Format version of the cached/saved result JSON.
FORMAT_VERSION = 2  # 2: configurations carry "pack"
#: Where a trial's configuration came from.
SOURCES = ("model-top-k", "anneal", "seed")
#: The untuned default: program order with the outermost dependence-free loops parallel, no tiling.
DEFAULT_STEPS: Tuple[Step, ...] = (Step.make("base", kind="original"), Step.make("auto_parallel"))
#: Annealing temperature (relative slowdown accepted with probability 1/e) at the start and the end.
T_START, T_END = 0.10, 0.005
#: Proposals tried before the annealer gives up on the current point's neighbourhood and restarts.
MAX_PROPOSALS = 60
#: The register-block rows ``candidates`` considers (mr); the shapes the annealer moves between.
BLOCK_ROWS = (1, 2, 3, 4, 6, 8, 12, 14)
BLOCK_VECTORS = (1, 2, 3, 4)  # nr = vectors x lanes


# ---------------------------------------------------------------------------
# Counters
# ---------------------------------------------------------------------------


@dataclass
class TuneStats:
    """Process-wide counters (tests assert that a cache hit measures nothing).

    ``measurements`` counts kernels run and timed (the baseline included),
    ``trials`` the trials logged, ``cache_hits`` the results served from disk.
    """

    measurements: int = 0
    trials: int = 0
    cache_hits: int = 0

    def reset(self) -> None:
        self.measurements = self.trials = self.cache_hits = 0


stats = TuneStats()


# ---------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------


def _config_from_json(d: Mapping[str, Any]) -> TileConfig:
    return TileConfig(**{k: d[k] for k in TileConfig.__dataclass_fields__ if k in d})


@dataclass(frozen=True)
class Trial:
    """One measured (or failed) point of the search.

    ``ok`` is the oracle check (None when checking was off or the kernel never
    ran); ``error`` says why a failed trial failed; ``runs`` is the number of
    timed calls behind ``median_s``/``min_s``.
    """

    index: int
    configs: Tuple[TileConfig, ...]
    steps: list
    predicted_s: Optional[float]
    median_s: Optional[float]
    min_s: Optional[float]
    ok: Optional[bool]
    error: Optional[str]
    source: str
    runs: int = 0

    @property
    def measured(self) -> bool:
        return self.median_s is not None and self.error is None

    def to_json(self) -> Dict[str, Any]:
        return {"index": self.index, "configs": [c.to_json() for c in self.configs], "steps": list(self.steps),
                "predicted_s": self.predicted_s, "median_s": self.median_s, "min_s": self.min_s,
                "ok": self.ok, "error": self.error, "source": self.source, "runs": self.runs}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Trial":
        return cls(int(d["index"]), tuple(_config_from_json(c) for c in d["configs"]), list(d["steps"]),
                   d.get("predicted_s"), d.get("median_s"), d.get("min_s"), d.get("ok"), d.get("error"),
                   str(d["source"]), int(d.get("runs", 0)))


def _ms(seconds: Optional[float]) -> str:
    if seconds is None:
        return "-"
    if seconds >= 1.0:
        return f"{seconds:.3f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3f} ms"
    return f"{seconds * 1e6:.1f} us"


def _config_text(c: TileConfig) -> str:
    par = c.parallel or "-"
    return (f"{c.stmt} mc={c.mc} nc={c.nc} kc={c.kc} {c.mr}x{c.nr} {c.order} par={par} "
            f"reg={'y' if c.regtile else 'n'}" + ("" if c.pack or not c.regtile else " pack=n"))


@dataclass
class TuneResult:
    """The outcome of :func:`tune`.

    ``best`` is the fastest schedule that matched the oracle (compile's
    default schedule when nothing beat it; then ``best_trial`` is None and
    ``best_configs`` empty).  ``elapsed_s`` is the wall time of the tuning run
    that produced the result (also when it is served from the cache,
    ``from_cache``).  ``info`` holds the provenance written to JSON: program,
    inputs, hardware, search parameters, setup times, the baseline's steps.
    """

    best: Schedule
    best_time_s: float
    baseline_time_s: float
    trials: List[Trial]
    from_cache: bool
    elapsed_s: float
    key: str
    best_configs: Tuple[TileConfig, ...] = ()
    best_trial: Optional[int] = None
    flops: Optional[int] = None
    info: Dict[str, Any] = field(default_factory=dict)

    @property
    def speedup(self) -> float:
        """Baseline time over best time (>= 1 by construction, up to timing noise of the baseline)."""
        return self.baseline_time_s / self.best_time_s if self.best_time_s > 0 else math.inf

    def gflops(self, seconds: Optional[float]) -> Optional[float]:
        if not self.flops or not seconds:
            return None
        return self.flops / seconds / 1e9

    def to_json(self) -> Dict[str, Any]:
        return {
            "polytile_tune": FORMAT_VERSION,
            "key": self.key,
            **self.info,
            "flops": self.flops,
            "elapsed_s": self.elapsed_s,
            "baseline_time_s": self.baseline_time_s,
            "best": {"time_s": self.best_time_s, "trial": self.best_trial,
                     "configs": [c.to_json() for c in self.best_configs],
                     "steps": [s.to_json() for s in self.best.steps]},
            "trials": [t.to_json() for t in self.trials],
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, from_cache: bool = False) -> "TuneResult":
        """Rebuild a result from :meth:`to_json` (the best schedule by replaying its steps; nothing compiled)."""
        if data.get("polytile_tune") != FORMAT_VERSION:
            raise PolytileError(f"not a polytile tune result of format {FORMAT_VERSION} "
                                f"(polytile_tune={data.get('polytile_tune')!r})")
        inputs = data["inputs"]
        best = pipeline.schedule(data["program"], shapes={n: v["shape"] for n, v in inputs.items()},
                                 dtypes=[v["dtype"] for v in inputs.values()], steps=data["best"]["steps"])
        info = {k: v for k, v in data.items()
                if k not in ("polytile_tune", "key", "flops", "elapsed_s", "baseline_time_s", "best", "trials")}
        return cls(best=best, best_time_s=float(data["best"]["time_s"]),
                   baseline_time_s=float(data["baseline_time_s"]),
                   trials=[Trial.from_json(t) for t in data["trials"]], from_cache=from_cache,
                   elapsed_s=float(data["elapsed_s"]), key=str(data["key"]),
                   best_configs=tuple(_config_from_json(c) for c in data["best"]["configs"]),
                   best_trial=data["best"]["trial"], flops=data.get("flops"), info=info)

    def table(self) -> str:
        """The trials as a text table, then the baseline, the best and the speedup."""
        stmts = [c.stmt for c in self.best_configs] or sorted({c.stmt for t in self.trials for c in t.configs})
        head = ["#", "source"] + [f"{s} config" for s in stmts] + ["predicted", "median", "min", "GFLOP/s", "check"]
        rows = [head]
        for t in self.trials:
            by_stmt = {c.stmt: _config_text(c).split(" ", 1)[1] for c in t.configs}
            check = "FAIL" if t.ok is False else ("ok" if t.ok else ("-" if t.error else "unchecked"))
            g = self.gflops(t.median_s) if t.measured else None
            row = [str(t.index) + ("*" if t.index == self.best_trial else ""), t.source] \
                + [by_stmt.get(s, "-") for s in stmts] \
                + [_ms(t.predicted_s), _ms(t.median_s), _ms(t.min_s), f"{g:.2f}" if g else "-", check]
            rows.append(row)
        widths = [max(len(r[c]) for r in rows) for c in range(len(head))]
        lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
        if not self.trials:
            nothing = not self.info.get("search", {}).get("statements", True)
            lines = ["no trials: " + ("no contraction statement has the blocked form; nothing to tune"
                                      if nothing else "the budget ran out before the first one")]
        for t in self.trials:
            if t.error:
                lines.append(f"  trial {t.index}: {t.error.splitlines()[0][:200]}")
        ok = sum(1 for t in self.trials if t.measured and t.ok is not False)
        lines.append(f"{len(self.trials)} trials ({ok} measured ok, {len(self.trials) - ok} failed), "
                     f"tuning took {self.elapsed_s:.1f} s" + (" (result from the cache)" if self.from_cache else ""))
        bg, tg = self.gflops(self.baseline_time_s), self.gflops(self.best_time_s)
        lines.append(f"baseline (compile's default schedule): {_ms(self.baseline_time_s)}"
                     + (f", {bg:.2f} GFLOP/s" if bg else ""))
        which = f"trial {self.best_trial}" if self.best_trial is not None else "compile's default schedule"
        lines.append(f"best: {which}, {_ms(self.best_time_s)}" + (f", {tg:.2f} GFLOP/s" if tg else "")
                     + f", {self.speedup:.2f}x over the baseline")
        return "\n".join(lines)


# ---------------------------------------------------------------------------
# Cache
# ---------------------------------------------------------------------------


def _stable(value: Any) -> Any:
    """Hardware data with volatile detail removed: floats to 2 significant digits, no free-text notes.

    Host detection may read the *current* clock ('cpu MHz'), which wobbles;
    peaks and bandwidths derive from it.
    """
    if isinstance(value, float):
        return float(f"{value:.2g}")
    if isinstance(value, Mapping):
        return {k: _stable(v) for k, v in value.items() if k != "notes"}
    if isinstance(value, (list, tuple)):
        return [_stable(v) for v in value]
    return value


def _cache_key(program_text: str, inputs: Mapping[str, Mapping[str, Any]], hw, search: Mapping[str, Any]) -> str:
    cfg = get_config()
    payload = json.dumps({
        "what": "polytile-tune", "format": FORMAT_VERSION, "baseline": "compile-default", "version": __version__,
        "program": program_text, "inputs": inputs, "hardware": _stable(hardware_mod.to_dict(hw)),
        "cc": cfg.cc, "cflags": list(cfg.cflags), "search": dict(search),
    }, sort_keys=True)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def cache_path(key: str) -> Path:
    """Where the result with ``key`` is (or would be) stored."""
    return get_config().cache_dir / "tune" / f"{key}.json"


def _cache_read(key: str) -> Optional[Dict[str, Any]]:
    from .runtime.cache import check_root

    check_root(get_config().cache_dir)  # results steer what is compiled and run: only from a trusted directory
    path = cache_path(key)
    if path.is_symlink():
        debug_log(1, "tune", f"ignoring cached result {path}: a symbolic link")
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        debug_log(1, "tune", f"ignoring unreadable cached result {path}: {e}")
        return None
    if not isinstance(data, dict) or data.get("key") != key or data.get("polytile_tune") != FORMAT_VERSION:
        debug_log(1, "tune", f"ignoring cached result {path}: wrong key or format")
        return None
    return data


def _cache_write(key: str, data: Mapping[str, Any], path: Optional[Path] = None) -> Path:
    from .runtime.cache import check_root

    check_root(get_config().cache_dir)
    path = cache_path(key) if path is None else path
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{key[:16]}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2)
            f.write("\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


# ---------------------------------------------------------------------------
# Measuring
# ---------------------------------------------------------------------------


def _time_runs(call: Callable[[], Any], n: int) -> List[float]:
    """Wall time of ``n`` calls of ``call`` (a separate function so tests can substitute a fake clock)."""
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return times


def _make_inputs(shapes, dtypes, seed: int, positive: bool) -> List[np.ndarray]:
    # Drawn as int8 and converted once: the peak memory is the inputs (plus a byte per element), not an
    # int64 copy of each.
    rng = np.random.default_rng(seed)
    lo, hi = (1, 4) if positive else (-4, 4)
    return [np.array(rng.integers(lo, hi + 1, size=tuple(s), dtype=np.int8), dtype=d, order="C")
            for s, d in zip(shapes, dtypes)]


@dataclass
class _Outcome:
    median_s: Optional[float] = None
    min_s: Optional[float] = None
    ok: Optional[bool] = None
    error: Optional[str] = None
    runs: int = 0
    spec: Any = None


def _error_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


class _Bench:
    """The program at fixed inputs: the oracle's answer, and measuring of schedules."""

    def __init__(self, program, shapes, dtypes, *, repeat: int, warmup: int, check: bool, cap_s: float):
        self.program = program
        self.shapes = shapes
        self.dtypes = dtypes
        self.repeat = repeat
        self.warmup = warmup
        self.check = check
        self.cap_s = cap_s
        self.oracle_s = 0.0
        self.arrays = _make_inputs(shapes, dtypes, 0, positive=False)
        self.expected = None
        if check:
            t0 = time.perf_counter()
            self.expected = self._oracle()
            if any(np.issubdtype(w.dtype, np.floating) and np.isnan(w).any() for w in self.expected):
                # log, sqrt... of signed inputs: use positive ones instead.
                self.arrays = _make_inputs(shapes, dtypes, 0, positive=True)
                self.expected = self._oracle()
            self.oracle_s = time.perf_counter() - t0
        self._done: Dict[str, _Outcome] = {}

    def _oracle(self) -> Tuple[np.ndarray, ...]:
        out = reference_mod.run(self.program, *self.arrays)
        return out if isinstance(out, tuple) else (out,)

    def _compare(self, outs) -> Optional[str]:
        from .compare import check_output  # the `run --check` rule, so every command agrees

        for name, got, want in zip(self.program.outputs, outs, self.expected):
            c = check_output(name, got, want)
            if not c.ok:
                return f"mismatch with the oracle: {name}: {c.detail or f'max_abs_err {c.err:.3g} > {c.tol_text}'}"
        return None

    def measure(self, steps: Sequence[Step]) -> Tuple[_Outcome, bool]:
        """Compile, check and time the schedule ``steps``; (outcome, whether it was reused)."""
        key = json.dumps([s.to_json() for s in steps], sort_keys=True)
        if key in self._done:
            return self._done[key], True
        out = self._measure(steps)
        self._done[key] = out
        return out, False

    def _measure(self, steps: Sequence[Step]) -> _Outcome:
        try:
            kernel = pipeline.compile(self.program, schedule=tuple(steps))
            spec = kernel.specialize_shapes(self.shapes, self.dtypes)
        except PolytileError as e:
            return _Outcome(error=_error_text(e))
        except Exception as e:  # a bug on one candidate must not end the search
            return _Outcome(error=f"internal error: {_error_text(e)}")
        stats.measurements += 1
        t0 = time.perf_counter()
        try:
            outs = pipeline.run_specialization(spec, self.arrays)
        except PolytileError as e:
            return _Outcome(error=_error_text(e), spec=spec)
        first = time.perf_counter() - t0
        outs = outs if isinstance(outs, tuple) else (outs,)
        ok = None
        if self.check:
            problem = self._compare(outs)
            if problem:
                return _Outcome(ok=False, error=problem, spec=spec)
            ok = True
        # The checking call was the first warm-up.  Call the entry point on bound
        # buffers from here on, so the times are the kernel's, not the allocation's.
        args = _bind_buffers(spec, self.arrays)
        call = lambda: spec.function(*args)  # noqa: E731
        if first >= self.cap_s:
            return _Outcome(first, first, ok, None, 1, spec)  # too slow to repeat: its one (warm) run
        extra_warmup = max(0, self.warmup - 1)
        runs = self.repeat
        if first * (extra_warmup + runs) > self.cap_s:
            extra_warmup = 0
            runs = max(1, min(runs, int(self.cap_s // max(first, 1e-9))))
        _time_runs(call, extra_warmup)
        times = _time_runs(call, runs)
        return _Outcome(statistics.median(times), min(times), ok, None, runs, spec)


def _bind_buffers(spec, arrays) -> List[np.ndarray]:
    """The entry point's arguments: the inputs, then fresh outputs and temporaries (the calling convention)."""
    inputs = iter([np.ascontiguousarray(a) for a in arrays])
    return [next(inputs) if p.kind == "input" else np.empty(p.shape, dtype=p.dtype) for p in spec.source.params]


# ---------------------------------------------------------------------------
# The search space
# ---------------------------------------------------------------------------


def _neighbour_values(values: Sequence[int], x: int) -> List[int]:
    below = [v for v in values if v < x]
    above = [v for v in values if v > x]
    return ([max(below)] if below else []) + ([min(above)] if above else [])


class _Space:
    """Per contraction statement: its roles, candidate values and the moves between configurations."""

    def __init__(self, base: Schedule, stmt: str, hw, cands: Sequence[TileConfig]):
        r = autotile.roles(base, stmt)
        self.stmt = stmt
        self.roles = r
        self.ext = r.extents
        self.lanes = cands[0].lanes if cands else 1
        regs = max(int(getattr(hw, "vector_registers", 16)), 8)
        self.values = {p: sorted({getattr(c, p) for c in cands}) for p in ("mc", "nc", "kc")}
        self.blocks = sorted({(mr, nv * self.lanes) for nv in BLOCK_VECTORS for mr in BLOCK_ROWS
                              if mr * nv + nv + 1 <= regs} | {(c.mr, c.nr) for c in cands})
        self.parallel = list(r.outer) + [f"{r.j}_t", f"{r.i}_t"]

    def normalize(self, c: TileConfig) -> TileConfig:
        """Clamp sizes to the extents (bigger tiles are the same schedule) and keep mc, nc whole blocks."""
        def size(x: int, block: int, extent: int) -> int:
            top = max(block, extent)
            x = max(block, min(int(x), top))
            return x if x == top else max(block, (x // block) * block)

        mc = size(c.mc, c.mr, self.ext[c.i])
        nc = size(c.nc, c.nr, self.ext[c.j])
        kc = max(1, min(int(c.kc), self.ext[c.k]))
        if (mc, nc, kc) == (c.mc, c.nc, c.kc):
            return c
        return TileConfig(c.stmt, c.i, c.j, c.k, mc, nc, kc, c.mr, c.nr, c.lanes, c.order, c.parallel, c.regtile,
                          c.pack)

    def moves(self, c: TileConfig, move: str) -> List[TileConfig]:
        """The distinct configurations one ``move`` away from ``c``."""
        def with_(**kw) -> TileConfig:
            d = c.to_json()
            d.update(kw)
            return self.normalize(TileConfig(**d))

        out: List[TileConfig] = []
        if move in ("mc", "nc", "kc"):
            x = getattr(c, move)
            for v in [x * 2, x // 2] + _neighbour_values(self.values[move], x):
                if v >= 1:
                    out.append(with_(**{move: v}))
        elif move == "block":
            rows = sorted({mr for mr, nr in self.blocks if nr == c.nr})
            cols = sorted(nr for mr, nr in self.blocks if mr == c.mr)
            for mr in _neighbour_values(rows, c.mr):
                out.append(with_(mr=mr))
            for nr in _neighbour_values(cols, c.nr):
                out.append(with_(nr=nr))
        elif move == "order":
            out = [with_(order=o) for o in autotile.ORDERS if o != c.order]
        elif move == "parallel":
            out = [with_(parallel=p) for p in self.parallel if p != c.parallel]
        elif move == "regtile":
            out = [with_(regtile=not c.regtile)]
        elif move == "pack":
            out = [with_(pack=not c.pack)] if c.regtile else []
        uniq: List[TileConfig] = []
        for n in out:
            if n != c and n not in uniq:
                uniq.append(n)
        return uniq


MOVES = ("mc", "nc", "kc", "block", "order", "parallel", "regtile", "pack")


def _predictor(hw) -> Tuple[Optional[Callable], str]:
    """``(predict(schedule, cfg) -> seconds, name)`` from the cost model, or (None, stand-in name)."""
    try:
        from . import cost
    except ImportError:
        return None, "candidate order (no cost model)"
    fn = getattr(cost, "predict_config", None)
    if fn is None:
        return None, "candidate order (cost.predict_config missing)"

    def predict(s: Schedule, cfg: TileConfig) -> Optional[float]:
        try:
            t = float(fn(s, cfg, hw).time_s)
        except Exception as e:  # the model not covering a case should not stop tuning
            debug_log(1, "tune", f"cost model failed on {cfg}: {_error_text(e)}")
            return None
        return t if math.isfinite(t) else None

    return predict, "cost.predict_config"


def _ranked_tuples(scores: Sequence[Sequence[float]]) -> Iterator[Tuple[int, ...]]:
    """Index tuples in increasing order of the summed per-statement scores (each list sorted ascending)."""
    n = len(scores)
    if n == 0 or any(len(s) == 0 for s in scores):
        return
    start = (0,) * n
    heap = [(sum(s[0] for s in scores), start)]
    seen = {start}
    while heap:
        total, idx = heapq.heappop(heap)
        yield idx
        for d in range(n):
            if idx[d] + 1 < len(scores[d]):
                nxt = idx[:d] + (idx[d] + 1,) + idx[d + 1:]
                if nxt not in seen:
                    seen.add(nxt)
                    heapq.heappush(heap, (total - scores[d][idx[d]] + scores[d][idx[d] + 1], nxt))


# ---------------------------------------------------------------------------
# tune()
# ---------------------------------------------------------------------------


class TuneInterrupted(KeyboardInterrupt):
    """Ctrl-C during the search: ``result`` holds the best schedule measured so far (never cached).

    A KeyboardInterrupt, so callers that do not know about it still stop.
    """

    def __init__(self, result: "TuneResult"):
        super().__init__("tuning interrupted")
        self.result = result


def _dtypes_for(program, dtypes, n: int) -> Tuple[str, ...]:
    if dtypes is None:
        return tuple("float32" for _ in range(n))
    if isinstance(dtypes, (str, np.dtype, type)):
        return tuple(np.dtype(dtypes).name for _ in range(n))
    if isinstance(dtypes, Mapping):
        return tuple(np.dtype(dtypes.get(name, "float32")).name for name in program.input_names)
    dts = tuple(np.dtype(d).name for d in dtypes)
    if len(dts) != n:
        raise PolytileError(f"{len(dts)} dtypes for {n} inputs ({', '.join(program.input_names)})")
    return dts


def _progress_enabled(progress) -> bool:
    if progress in ("force", "always"):
        return True
    if not progress:
        return False
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def tune(source, dims=None, *, shapes=None, dtypes=None, hardware: Any = "host", budget_s: float = 60.0,
         max_trials: int = 200, top_k: int = 8, seed: int = 0, repeat: int = 5, warmup: int = 1,
         progress: Union[bool, str] = True, cache: bool = True, check: bool = True) -> TuneResult:
    """Find the fastest blocked schedule of ``source`` at the given sizes by measuring (see the module doc).

    ``dims``/``shapes``/``dtypes`` are as for :func:`polytile.schedule`.
    ``hardware`` is a preset name, a descriptor file or a descriptor (the
    candidates' cache fits and the cost model use it; kernels run on this
    machine).  The search stops after ``budget_s`` seconds of searching (the
    oracle and the baseline are measured first, outside the budget) or
    ``max_trials`` trials.  ``progress``: a tqdm bar on stderr when it is a
    terminal; ``"force"`` draws it anyway, False never.
    """
    t_start = time.perf_counter()
    if budget_s is None or not budget_s > 0:
        raise PolytileError(f"the tuning budget must be positive, got {budget_s!r}")
    if max_trials < 0 or top_k < 1 or repeat < 1 or warmup < 0:
        raise PolytileError("tune needs max_trials >= 0, top_k >= 1, repeat >= 1 and warmup >= 0")
    program = pipeline.load_program(source)
    in_shapes = pipeline.shapes_from_dims(program, pipeline.parse_dims(dims), shapes)
    dts = _dtypes_for(program, dtypes, len(in_shapes))
    hw = hardware_mod.load(hardware)
    if not isinstance(hw, hardware_mod.CPUDescriptor):
        raise PolytileError(f"tuning needs a CPU descriptor (kernels are OpenMP C run here); "
                            f"{hw.name!r} is a {hw.kind}")
    inputs = {n: {"shape": list(s), "dtype": d} for n, s, d in zip(program.input_names, in_shapes, dts)}
    search = {"seed": int(seed), "max_trials": int(max_trials), "budget_s": int(round(budget_s)),
              "top_k": int(top_k), "repeat": int(repeat), "check": bool(check)}
    key = _cache_key(str(program), inputs, hw, search)

    if cache:
        data = _cache_read(key)
        if data is not None:
            try:
                result = TuneResult.from_json(data, from_cache=True)
            except (PolytileError, KeyError, TypeError, ValueError) as e:
                debug_log(1, "tune", f"cached result {cache_path(key)} unusable ({_error_text(e)}); tuning again")
            else:
                stats.cache_hits += 1
                debug_log(1, "tune", f"result from the cache: {cache_path(key)}")
                return result

    predict, model_name = _predictor(hw)
    shape_map = dict(zip(program.input_names, in_shapes))
    # The search builds its candidates on the untiled default; the baseline is compile's default.
    base = pipeline.schedule(program, shapes=shape_map, dtypes=list(dts), steps=DEFAULT_STEPS)
    default = pipeline.schedule(program, shapes=shape_map, dtypes=list(dts), hardware=hw)
    bench = _Bench(program, in_shapes, dts, repeat=repeat, warmup=warmup, check=check,
                   cap_s=max(2.0, budget_s / 20))

    baseline, _ = bench.measure(default.steps)
    if baseline.error or baseline.median_s is None:
        raise PolytileError(f"compile's default schedule does not work, nothing to tune against: {baseline.error}")
    from .compare import COUNT_SCAN_LIMIT, count_flops  # contraction points counted with isl

    flops = count_flops(baseline.spec, COUNT_SCAN_LIMIT)

    search_start = time.perf_counter()
    deadline = search_start + budget_s
    rng = np.random.default_rng(seed)
    stmts = autotile.contraction_statements(base)
    spaces: List[_Space] = []
    ranked: List[List[TileConfig]] = []
    scores: List[List[float]] = []
    preds: Dict[TileConfig, Optional[float]] = {}
    for st in stmts:
        cands = autotile.candidates(base, st, hw, full_blocks=False)
        if not cands:
            continue
        space = _Space(base, st, hw, cands)
        normal: List[TileConfig] = []
        for c in cands:
            c = space.normalize(c)
            if c not in normal:
                normal.append(c)
        if predict is not None:
            for c in normal:
                preds[c] = predict(base, c)
            # The model's order with autotile's tie-break, so the first trial is the
            # configuration `polytile compile` would use (the untuned-by-measurement default).
            normal = autotile.rank(base, normal, lambda c: preds[c] if preds[c] is not None else math.inf)
            sc = [preds[c] if preds[c] is not None else math.inf for c in normal]
        else:
            sc = [float(k) for k in range(len(normal))]
        spaces.append(space)
        ranked.append(normal)
        scores.append(sc)
    setup_s = search_start - t_start

    trials: List[Trial] = []
    seen: set = set()
    times: Dict[Tuple[TileConfig, ...], Optional[float]] = {}
    show = _progress_enabled(progress)
    bar = None
    if show:
        from tqdm import tqdm

        bar = tqdm(total=max_trials, desc="tune", unit="trial", file=sys.stderr, dynamic_ncols=True, leave=True)

    def best_so_far() -> Optional[float]:
        ok = [t.median_s for t in trials if t.measured and t.ok is not False]
        return min(ok) if ok else None

    def predicted(point: Tuple[TileConfig, ...]) -> Optional[float]:
        if predict is None:
            return None
        vals = [preds[c] if c in preds else preds.setdefault(c, predict(base, c)) for c in point]
        return None if any(v is None for v in vals) else sum(vals)

    def run_trial(point: Tuple[TileConfig, ...], source: str) -> Trial:
        seen.add(point)
        steps: List[Dict[str, Any]] = []
        try:
            s = base
            for cfg in point:
                s = autotile.apply(s, cfg)
            step_objs = s.steps
            steps = [x.to_json() for x in step_objs]
        except PolytileError as e:
            out, reused = _Outcome(error=_error_text(e)), False
        except Exception as e:
            out, reused = _Outcome(error=f"internal error: {_error_text(e)}"), False
        else:
            out, reused = bench.measure(step_objs)
        t = Trial(len(trials), tuple(point), steps, predicted(point), out.median_s, out.min_s, out.ok,
                  out.error, source, out.runs)
        trials.append(t)
        stats.trials += 1
        times[point] = t.median_s if t.measured and t.ok is not False else None
        debug_log(1, "tune", f"trial {t.index} [{source}] {' | '.join(_config_text(c) for c in point)}: "
                  + (f"{_ms(t.median_s)}" + (" (same schedule as before)" if reused else "") if t.measured
                     else f"failed: {t.error}"))
        if bar is not None:
            b = best_so_far()
            el = time.perf_counter() - search_start
            post = f"best {_ms(b)} ({baseline.median_s / b:.2f}x)" if b else "best -"
            bar.set_postfix_str(f"{post}, {el:.0f}/{budget_s:.0f}s", refresh=False)
            bar.update(1)
        return t

    def stop() -> bool:
        return len(trials) >= max_trials or time.perf_counter() >= deadline

    interrupted = False
    try:
        # 1. the model's top k
        if spaces:
            for idx in _ranked_tuples(scores):
                if stop() or sum(1 for t in trials if t.source == "model-top-k") >= top_k:
                    break
                point = tuple(ranked[d][k] for d, k in enumerate(idx))
                if point not in seen:
                    run_trial(point, "model-top-k")
        # 2. simulated annealing from the best measured point
        current: Optional[Tuple[TileConfig, ...]] = None
        ok_points = [(t.median_s, t.index) for t in trials if t.measured and t.ok is not False]
        if ok_points:
            current = trials[min(ok_points)[1]].configs
        while spaces and not stop():
            frac = max(len(trials) / max(max_trials, 1), (time.perf_counter() - search_start) / budget_s)
            temp = T_START * (T_END / T_START) ** min(1.0, frac)
            proposal, source = None, "anneal"
            if current is not None:
                for _ in range(MAX_PROPOSALS):
                    d = int(rng.integers(len(spaces)))
                    move = MOVES[int(rng.integers(len(MOVES)))]
                    options = spaces[d].moves(current[d], move)
                    if not options:
                        continue
                    cand = current[:d] + (options[int(rng.integers(len(options)))],) + current[d + 1:]
                    if cand not in seen:
                        proposal = cand
                        break
            if proposal is None:  # restart from a random candidate point
                source = "seed"
                for _ in range(MAX_PROPOSALS):
                    cand = tuple(r[int(rng.integers(len(r)))] for r in ranked)
                    if cand not in seen:
                        proposal = cand
                        break
            if proposal is None:
                debug_log(1, "tune", "no unmeasured point found: the search space is exhausted")
                break
            u = float(rng.random())  # drawn every step so the stream does not depend on the outcomes
            t = run_trial(proposal, source)
            new = times.get(proposal)
            if new is None:
                continue
            cur = times.get(current) if current is not None else None
            if source == "seed" or cur is None or new <= cur or u < math.exp(-(new - cur) / (temp * cur)):
                current = proposal
    except KeyboardInterrupt:
        # Ctrl-C: stop searching, but keep what was measured (raised below as TuneInterrupted).
        interrupted = True
    finally:
        if bar is not None:
            bar.close()

    # The answer: the fastest ok trial, or compile's default schedule when nothing beat it.
    best_trial: Optional[Trial] = None
    for t in trials:
        if t.measured and t.ok is not False and (best_trial is None or t.median_s < best_trial.median_s):
            best_trial = t
    if best_trial is not None and best_trial.median_s <= baseline.median_s:
        best_steps, best_time, best_configs, best_index = best_trial.steps, best_trial.median_s, \
            best_trial.configs, best_trial.index
    else:
        best_steps, best_time, best_configs, best_index = [s.to_json() for s in default.steps], baseline.median_s, \
            (), None
    best = pipeline.schedule(program, shapes=dict(zip(program.input_names, in_shapes)), dtypes=list(dts),
                             steps=best_steps)
    elapsed = time.perf_counter() - t_start
    info = {
        "program": str(program),
        "inputs": inputs,
        "hardware": hw.name,
        "version": __version__,
        "search": {**search, "budget_s": float(budget_s), "warmup": int(warmup), "model": model_name,
                   "statements": [sp.stmt for sp in spaces],
                   "candidates": {sp.stmt: len(r) for sp, r in zip(spaces, ranked)}},
        "setup_s": {"oracle": bench.oracle_s, "total": setup_s},
        "search_s": time.perf_counter() - search_start,
        "baseline": {"steps": [s.to_json() for s in default.steps], "median_s": baseline.median_s,
                     "min_s": baseline.min_s, "runs": baseline.runs},
    }
    if interrupted:
        info["interrupted"] = True
    result = TuneResult(best=best, best_time_s=best_time, baseline_time_s=baseline.median_s, trials=trials,
                        from_cache=False, elapsed_s=elapsed, key=key, best_configs=tuple(best_configs),
                        best_trial=best_index, flops=flops, info=info)
    if interrupted:
        # Not cached: a later run with the same settings must search the whole budget.
        raise TuneInterrupted(result)
    if cache:
        path = _cache_write(key, result.to_json())
        debug_log(1, "tune", f"result cached: {path}")
    return result


# ---------------------------------------------------------------------------
# Command line (wired into `polytile tune` by polytile.cli)
# ---------------------------------------------------------------------------

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

The search measures the cost model's top-k blocked schedules of every
contraction, then anneals from the fastest; every schedule is checked against
the reference interpreter before it is timed.  Results are cached (per
program, sizes, dtypes, hardware, compiler and search settings) under
<cache dir>/tune/; --no-cache measures again.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``polytile tune`` to ``parser`` (FILE.tile, sizes, search settings)."""
    from .cli.inputs import _shape_options  # --dims/--shape/--dtype/--dtypes exactly as `run` has them

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
    out = parser.add_argument_group("output")
    out.add_argument("-o", "--output", metavar="BEST.json",
                     help="save the best schedule (replayable: compile(..., schedule=BEST.json))")
    out.add_argument("--json", dest="json_out", metavar="RESULT.json",
                     help="write the whole result (every trial) as JSON")


def main_tune(args) -> int:
    """Run ``polytile tune`` for parsed ``args``; print the trial table and the best schedule.

    Ctrl-C during the search saves the best schedule so far (to -o, else next
    to the cached results) and the partial result (to --json), says where, and
    exits 130.
    """
    from .cli.inputs import check_memory, resolve

    target = resolve(args)
    names = target.program.input_names
    check_memory(list(zip(names, target.shapes, target.dtypes)), "the inputs")  # before any allocation
    sizes = ", ".join(f"{k}={v}" for k, v in target.dims.items()) or \
        ", ".join(f"{n}={'x'.join(map(str, s))}" for n, s in zip(names, target.shapes))
    print(f"polytile: tuning {target.path} ({sizes}) on {args.hardware}, budget {args.budget:g} s, "
          f"at most {args.trials} trials", file=sys.stderr)
    try:
        result = tune(target.program, shapes=dict(zip(names, target.shapes)), dtypes=list(target.dtypes),
                      hardware=args.hardware, budget_s=args.budget, max_trials=args.trials, top_k=args.top_k,
                      seed=args.seed, repeat=args.repeat, warmup=args.warmup,
                      progress=not getattr(args, "no_progress", False), cache=not args.no_cache)
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
    return 0


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
        path.parent.mkdir(parents=True, exist_ok=True)
    _write_best(result, path)
    print(f"polytile: saved the best schedule so far to {path}; replay it with "
          f"`polytile run {target.path} --schedule {path}`", file=sys.stderr)
    if getattr(args, "json_out", None):
        _write_result(result, Path(args.json_out))
        print(f"polytile: saved the partial result (every trial so far) to {args.json_out}", file=sys.stderr)
    return 130
