"""The search itself: :func:`tune` (the model's top k, then simulated annealing, against compile's
default schedule), and the key its results are cached under (namespace ``tune`` of :mod:`polytile.runtime.json_cache`)."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ..version import __version__
from .. import autotile, pipeline
from .. import hardware as hardware_mod
from ..autotile import TileConfig
from ..config import debug_log, get_config
from ..errors import PolytileError
from ..executor import Executor, WorkerLost, as_executor, local_workers
from ..runtime.json_cache import json_get, json_path, json_put
from ..scheduling import Step
from . import remote
from .bench import _error_text, stats
from .result import FORMAT_VERSION, Trial, TuneResult, _config_text, _ms
from .space import MOVES, _predictor, _ranked_tuples, _Space

#: The untuned default: program order with the outermost dependence-free loops parallel, no tiling.
DEFAULT_STEPS: Tuple[Step, ...] = (Step.make("base", kind="original"), Step.make("auto_parallel"))
#: Annealing temperature (relative slowdown accepted with probability 1/e) at the start and the end.
T_START, T_END = 0.10, 0.005
#: Proposals tried before the annealer gives up on the current point's neighbourhood and restarts.
MAX_PROPOSALS = 60
#: The namespace of tuning results in the cache directory.
CACHE_NAMESPACE = "tune"
#: The key of a run's partial document (its trials as they arrive) is the result's key with this suffix.
PARTIAL_SUFFIX = "-partial"


# ---------------------------------------------------------------------------
# The result cache
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
    return json_path(CACHE_NAMESPACE, key)


# ---------------------------------------------------------------------------
# tune()
# ---------------------------------------------------------------------------


class TuneInterrupted(KeyboardInterrupt):
    """Ctrl-C during the search: ``result`` holds the best schedule measured so far.

    It is not cached as the answer; with the cache on, its trials are in the
    partial document (``result.info["partial_cache"]``) that the next run with
    the same settings resumes from.

    A KeyboardInterrupt, so callers that do not know about it still stop.
    """

    def __init__(self, result: "TuneResult"):
        super().__init__("tuning interrupted")
        self.result = result


def _dtypes_for(program, dtypes, n: int) -> Tuple[str, ...]:
    # A size input is an integer (int32, as PlaidML types an Integer) whatever the arrays' one dtype.
    sized = set(pipeline.size_inputs(program))
    if dtypes is None or isinstance(dtypes, (str, np.dtype, type)):
        one = np.dtype(dtypes or "float32").name
        return tuple("int32" if name in sized else one for name in program.input_names)
    if isinstance(dtypes, Mapping):
        return tuple(np.dtype(dtypes.get(name, "int32" if name in sized else "float32")).name
                     for name in program.input_names)
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


def _known_batch(executor, batch: Optional[int]) -> Optional[int]:
    """The batch size without starting or reaching any worker, when that can be told (None: connect first)."""
    if batch is not None:
        return int(batch)
    if executor is None:
        return 1
    if isinstance(executor, Executor):
        return executor.workers
    if isinstance(executor, str) and executor.strip().lower().startswith("local:"):
        return local_workers(executor)
    return None


def partial_path(key: str) -> Path:
    """Where the trials of an unfinished run with ``key`` are kept as they arrive (see :func:`tune`)."""
    return json_path(CACHE_NAMESPACE, key + PARTIAL_SUFFIX)


def _point_key(point: Tuple[TileConfig, ...]) -> str:
    return json.dumps([c.to_json() for c in point], sort_keys=True)


def tune(source, dims=None, *, shapes=None, dtypes=None, hardware: Any = "host", budget_s: float = 60.0,
         max_trials: int = 200, top_k: int = 8, seed: int = 0, repeat: int = 5, warmup: int = 1,
         progress: Union[bool, str] = True, cache: bool = True, check: bool = True,
         executor: Union[None, str, Executor] = None, batch: Optional[int] = None,
         fake_timer: Optional[int] = None) -> TuneResult:
    """Find the fastest blocked schedule of ``source`` at the given sizes by measuring (see the module doc).

    ``dims``/``shapes``/``dtypes`` are as for :func:`polytile.schedule`.
    ``hardware`` is a preset name, a descriptor file or a descriptor (the
    candidates' cache fits and the cost model use it; kernels run where the
    executor runs them).  The search stops after ``budget_s`` seconds of
    searching (the oracle and the baseline are measured first, outside the
    budget) or ``max_trials`` trials.  ``progress``: a tqdm bar on stderr
    when it is a terminal; ``"force"`` draws it anyway, False never.

    ``executor`` says where each trial is compiled, checked and timed
    (:mod:`polytile.executor`): None for this process, ``"local:N"`` for N
    local Dask workers, a scheduler address, or an :class:`Executor`.  Each
    step of the search proposes ``batch`` schedules (default: one per
    worker) and measures them at once; which worker finishes first never
    changes what is proposed next, so a seed gives the same search on any
    executor with the same ``batch``.  Only trials timed on the baseline's
    kind of machine are ranked (the others are kept and marked).
    ``fake_timer`` (tests): a seed; schedules are still compiled and
    checked, but "timed" by a hash of their steps (:func:`~.bench.fake_time`).

    With ``cache``, each trial is written to the cache as it arrives, so an
    interrupted run (Ctrl-C, a crash) loses nothing measured: the next run
    with the same settings reuses those trials instead of measuring again.

        >>> r = tune("examples/matmul.tile", "M=64,N=64,K=64", max_trials=4, executor="local:2")  # doctest: +SKIP
    """
    t_start = time.perf_counter()
    if budget_s is None or not budget_s > 0:
        raise PolytileError(f"the tuning budget must be positive, got {budget_s!r}")
    if max_trials < 0 or top_k < 1 or repeat < 1 or warmup < 0 or (batch is not None and batch < 1):
        raise PolytileError("tune needs max_trials >= 0, top_k >= 1, repeat >= 1, warmup >= 0 and batch >= 1")
    program = pipeline.load_program(source)
    dim_sizes = pipeline.parse_dims(dims)
    in_shapes = pipeline.shapes_from_dims(program, dim_sizes, shapes)
    dts = _dtypes_for(program, dtypes, len(in_shapes))
    hw = hardware_mod.load(hardware)
    if not isinstance(hw, hardware_mod.CPUDescriptor):
        raise PolytileError(f"tuning needs a CPU descriptor (kernels are OpenMP C run here); "
                            f"{hw.name!r} is a {hw.kind}")
    # A size input's value is part of the signature (and of the cache key): {"shape": [], ..., "value": 3}.
    values = pipeline.size_values(program, dim_sizes)
    inputs = {n: {"shape": list(s), "dtype": d, **({"value": values[n]} if n in values else {})}
              for n, s, d in zip(program.input_names, in_shapes, dts)}
    ex, owned = None, False
    size = _known_batch(executor, batch)
    try:
        if size is None:  # a scheduler address: its workers say how many trials run at once
            ex, owned = as_executor(executor)
            size = ex.workers
        search = {"seed": int(seed), "max_trials": int(max_trials), "budget_s": int(round(budget_s)),
                  "top_k": int(top_k), "repeat": int(repeat), "check": bool(check)}
        # Only when they differ from a plain run's, so the keys of in-process results stay as they were.
        if size != 1:
            search["batch"] = int(size)
        if fake_timer is not None:
            search["fake_timer"] = int(fake_timer)
        key = _cache_key(str(program), inputs, hw, search)

        if cache:
            data = json_get(CACHE_NAMESPACE, key)  # checked: a damaged or foreign file reads as a miss
            if data is not None:
                try:
                    result = TuneResult.from_json(data, from_cache=True)
                except (PolytileError, KeyError, TypeError, ValueError) as e:
                    debug_log(1, "tune", f"cached result {cache_path(key)} unusable ({_error_text(e)}); tuning again")
                else:
                    stats.cache_hits += 1
                    debug_log(1, "tune", f"result from the cache: {cache_path(key)}")
                    return result
        if ex is None:
            ex, owned = as_executor(executor)
        run = _Search(program, in_shapes, dts, hw, hardware, inputs, search, key, ex, size, t_start,
                      budget_s=budget_s, max_trials=max_trials, top_k=top_k, seed=seed, repeat=repeat,
                      warmup=warmup, check=check, cache=cache, progress=progress, fake_timer=fake_timer)
        return run.run()
    finally:
        if owned and ex is not None:
            ex.close()


class _Search:
    """One tuning run after the cache missed: the baseline, the model's top k, then annealing, in batches."""

    def __init__(self, program, in_shapes, dts, hw, hardware, inputs, search, key, ex: Executor, size: int,
                 t_start: float, *, budget_s, max_trials, top_k, seed, repeat, warmup, check, cache, progress,
                 fake_timer):
        self.program, self.in_shapes, self.dts, self.hw = program, in_shapes, dts, hw
        self.hardware, self.inputs, self.search, self.key = hardware, inputs, search, key
        # the size inputs' values (kept with their input in ``inputs``)
        self.size_values = {n: v["value"] for n, v in inputs.items() if "value" in v}
        self.ex, self.size, self.t_start = ex, size, t_start
        self.budget_s, self.max_trials, self.top_k, self.seed = budget_s, max_trials, top_k, seed
        self.repeat, self.warmup, self.check, self.cache, self.progress = repeat, warmup, check, cache, progress
        self.fake_timer = fake_timer
        self.trials: List[Trial] = []
        self.arrived: List[Trial] = []  # in the order they arrived: what the partial document holds
        self.seen: set = set()
        self.times: Dict[Tuple[TileConfig, ...], Optional[float]] = {}
        self.per_worker: Dict[str, int] = {}
        self.resume: Dict[str, Trial] = {}
        self.resumed = 0
        self.baseline: Dict[str, Any] = {}
        self.ranking: Optional[str] = None
        self.bar = None

    # -- the partial document: every trial as it arrives, so nothing measured is lost -------------

    def _load_partial(self) -> None:
        data = json_get(CACHE_NAMESPACE, self.key + PARTIAL_SUFFIX) if self.cache else None
        if not data:
            return
        try:
            if data.get("polytile_tune_partial") != FORMAT_VERSION or data.get("key") != self.key:
                raise ValueError("another format or key")
            trials = [Trial.from_json(t) for t in data["trials"]]
            baseline = dict(data["baseline"])
        except (KeyError, TypeError, ValueError) as e:
            debug_log(1, "tune", f"partial results {partial_path(self.key)} unusable ({_error_text(e)}); ignored")
            return
        self.baseline = baseline
        self.resume = {_point_key(t.configs): t for t in trials}
        debug_log(1, "tune", f"resuming from {partial_path(self.key)}: {len(trials)} trials measured before")

    def _write_partial(self) -> None:
        if not self.cache:
            return
        doc = {"polytile_tune_partial": FORMAT_VERSION, "key": self.key, "baseline": self.baseline,
               "trials": [t.to_json() for t in self.arrived]}
        try:
            json_put(CACHE_NAMESPACE, self.key + PARTIAL_SUFFIX, doc)
        except PolytileError as e:  # a full disk must not end the search; the final write will say so again
            debug_log(1, "tune", f"cannot keep the partial results: {_error_text(e)}")

    # -- measuring ------------------------------------------------------------------------------------

    def _measure_baseline(self, job, default) -> None:
        if not self.baseline:
            steps = [s.to_json() for s in default.steps]
            fut = self.ex.submit(remote.measure_trial, job, steps)
            try:
                res = fut.result()
            except WorkerLost as e:
                raise PolytileError(f"the baseline could not be measured: {e}") from None
            self.baseline = {"steps": steps, "median_s": res["median_s"], "min_s": res["min_s"],
                             "runs": res["runs"], "error": res["error"], "worker": res["worker"]["worker"],
                             "kind": res["kind"], "oracle_s": res["oracle_s"]}
        if self.baseline["error"] or self.baseline["median_s"] is None:
            raise PolytileError(f"compile's default schedule does not work, nothing to tune against: "
                                f"{self.baseline['error']}")
        # Timings are ranked against the baseline's machine.  A descriptor detected from this host
        # names this machine's kind: workers of another kind cannot measure for it.
        self.ranking = self.baseline["kind"]
        if isinstance(self.hardware, str) and self.hardware == "host":
            here = hardware_mod.host_fingerprint()
            if self.ranking != here:
                raise PolytileError(
                    f"the workers are another kind of machine than this one (hardware {self.ranking}, here {here}), "
                    f"so --hardware host describes the wrong machine: tune for theirs with --hardware FILE, "
                    f"a descriptor of a worker's machine (written there by `python -c \"from polytile import "
                    f"hardware as h; print(h.to_toml(h.load('host')))\" > FILE`)")

    def _steps_of(self, point) -> Tuple[List[Dict[str, Any]], Optional[str]]:
        try:
            s = self.base
            for cfg in point:
                s = autotile.apply(s, cfg)
            return [x.to_json() for x in s.steps], None
        except PolytileError as e:
            return [], _error_text(e)
        except Exception as e:
            return [], f"internal error: {_error_text(e)}"

    def _trial(self, index, point, steps, source, res: Mapping[str, Any]) -> Trial:
        worker = res.get("worker") or {}
        return Trial(index, tuple(point), steps, self.predicted(point), res.get("median_s"), res.get("min_s"),
                     res.get("ok"), res.get("error"), source, int(res.get("runs") or 0),
                     worker.get("worker") if isinstance(worker, Mapping) else worker, res.get("kind"),
                     time.perf_counter() - self.search_start)

    def _record(self, t: Trial, reused: bool = False, resumed: bool = False) -> None:
        """A trial has arrived: keep it (partial document), log it, move the bar."""
        stats.trials += 1
        self.arrived.append(t)
        self._write_partial()
        if t.worker and not resumed:  # throughput of this run's workers, not of an earlier run's
            self.per_worker[t.worker] = self.per_worker.get(t.worker, 0) + 1
        debug_log(1, "tune", f"trial {t.index} [{t.source}] {' | '.join(_config_text(c) for c in t.configs)}: "
                  + (f"{_ms(t.median_s)}" + (" (same schedule as before)" if reused else "") if t.measured
                     else f"failed: {t.error}") + (f" on {t.worker}" if t.worker not in (None, "in-process") else ""))
        if self.bar is not None:
            b = self.best_so_far()
            el = time.perf_counter() - self.search_start
            post = f"best {_ms(b)} ({self.baseline['median_s'] / b:.2f}x)" if b else "best -"
            rates = [n / max(el, 1e-9) for _, n in sorted(self.per_worker.items())]
            rate = f"{rates[0]:.2f} trials/s" if len(rates) <= 1 else \
                f"{len(rates)} workers: " + (", ".join(f"{r:.2f}" for r in rates) if len(rates) <= 4 else
                                             f"{min(rates):.2f}..{max(rates):.2f}") + " trials/s each"
            self.bar.set_postfix_str(f"{post}, {el:.0f}/{self.budget_s:.0f}s, {rate}", refresh=False)
            self.bar.update(1)

    def evaluate(self, batch: Sequence[Tuple[Tuple[TileConfig, ...], str]]) -> None:
        """Measure the proposals of one step at once; append their trials in the order proposed."""
        started = time.perf_counter()
        try:
            self._evaluate(batch)
        finally:
            self.last_batch_s = time.perf_counter() - started

    def _evaluate(self, batch: Sequence[Tuple[Tuple[TileConfig, ...], str]]) -> None:
        first = len(self.trials)
        slots: List[Optional[Trial]] = [None] * len(batch)
        pending: Dict[Any, int] = {}
        steps_of: Dict[int, List[Dict[str, Any]]] = {}
        try:
            for i, (point, source) in enumerate(batch):
                self.seen.add(point)
                steps, problem = self._steps_of(point)
                old = self.resume.get(_point_key(point))
                if problem is not None:
                    slots[i] = self._trial(first + i, point, steps, source, {"error": problem})
                    self._record(slots[i])
                elif old is not None:  # measured by an interrupted run with these settings
                    slots[i] = dataclasses.replace(old, index=first + i, source=source)
                    self.resumed += 1
                    self._record(slots[i], resumed=True)
                else:
                    pending[self.ex.submit(remote.measure_trial, self.job, steps)] = i
                    steps_of[i] = steps
            for fut in self.ex.as_completed(list(pending)):
                i = pending.pop(fut)
                try:
                    res = fut.result()
                except WorkerLost as e:  # Dask retried it on other workers and gave up: a failed trial
                    res = {"error": str(e)}
                point, source = batch[i]
                slots[i] = self._trial(first + i, point, steps_of[i], source, res)
                self._record(slots[i], reused=bool(res.get("reused")))
        except KeyboardInterrupt:
            self.ex.cancel(list(pending))
            raise
        finally:
            for t in slots:
                if t is not None:
                    self.trials.append(t)
                    self.times[t.configs] = t.median_s if t.ranked(self.ranking) else None

    # -- the search -----------------------------------------------------------------------------------

    def best_so_far(self) -> Optional[float]:
        ok = [t.median_s for t in self.trials if t.ranked(self.ranking)]
        return min(ok) if ok else None

    def predicted(self, point: Tuple[TileConfig, ...]) -> Optional[float]:
        if self.predict is None:
            return None
        vals = [self.preds[c] if c in self.preds else self.preds.setdefault(c, self.predict(self.base, c))
                for c in point]
        return None if any(v is None for v in vals) else sum(vals)

    def stop(self) -> bool:
        """No more trials: ``max_trials`` reached, or the next batch -- as long as the last one took --
        would end past the deadline (a batch started just before it ran the 120 s budget 1.5 s over)."""
        return (len(self.trials) >= self.max_trials
                or time.perf_counter() + self.last_batch_s >= self.deadline)

    def _setup(self):
        program, hw, dts = self.program, self.hw, self.dts
        self.predict, self.model_name = _predictor(hw)
        shape_map = dict(zip(program.input_names, self.in_shapes))
        values = self.size_values
        # The search builds its candidates on the untiled default; the baseline is compile's default.
        self.base = pipeline.schedule(program, values, shapes=shape_map, dtypes=list(dts), steps=DEFAULT_STEPS)
        self.default = pipeline.schedule(program, values, shapes=shape_map, dtypes=list(dts), hardware=hw,
                                         min_parallel_work=None)
        self.job = remote.job_spec(str(program), self.in_shapes, dts, repeat=self.repeat, warmup=self.warmup,
                                   check=self.check, cap_s=max(2.0, self.budget_s / 20),
                                   threads=getattr(self.ex, "threads_per_kernel", None), fake_timer=self.fake_timer,
                                   sizes=values)
        self._load_partial()
        self._measure_baseline(self.job, self.default)
        from ..compare import COUNT_SCAN_LIMIT, count_flops  # contraction points counted with isl

        self.flops = count_flops(self.default, COUNT_SCAN_LIMIT)
        self.spaces: List[_Space] = []
        self.ranked_cands: List[List[TileConfig]] = []
        self.scores: List[List[float]] = []
        self.preds: Dict[TileConfig, Optional[float]] = {}
        for st in autotile.contraction_statements(self.base):
            cands = autotile.candidates(self.base, st, hw, full_blocks=False)
            if not cands:
                continue
            space = _Space(self.base, st, hw, cands)
            normal: List[TileConfig] = []
            for c in cands:
                c = space.normalize(c)
                if c not in normal:
                    normal.append(c)
            if self.predict is not None:
                for c in normal:
                    self.preds[c] = self.predict(self.base, c)
                # The model's order with autotile's tie-break, so the first trial is the
                # configuration `polytile compile` would use (the untuned-by-measurement default).
                normal = autotile.rank(self.base, normal,
                                       lambda c: self.preds[c] if self.preds[c] is not None else math.inf,
                                       memory=lambda c: self._memory(c, hw))
                sc = [self.preds[c] if self.preds[c] is not None else math.inf for c in normal]
            else:
                sc = [float(k) for k in range(len(normal))]
            self.spaces.append(space)
            self.ranked_cands.append(normal)
            self.scores.append(sc)

    def _memory(self, c: TileConfig, hw) -> float:
        """autotile's tie-break key (:func:`polytile.autotile.memory_time`) for ``c``; inf where the model fails."""
        from .. import cost
        try:
            return autotile.memory_time(cost.predict_config(self.base, c, hw))
        except Exception:  # noqa: BLE001 - the model not covering a case should not stop tuning
            return math.inf

    def _model_top_k(self) -> None:
        """1. the model's top k, ``size`` at a time."""
        tuples = _ranked_tuples(self.scores)
        done = 0
        while not self.stop() and done < self.top_k:
            room = min(self.size, self.top_k - done, self.max_trials - len(self.trials))
            chunk: List[Tuple[TileConfig, ...]] = []
            for idx in tuples:
                point = tuple(self.ranked_cands[d][k] for d, k in enumerate(idx))
                if point not in self.seen and point not in chunk:
                    chunk.append(point)
                    if len(chunk) >= room:
                        break
            if not chunk:
                break
            self.evaluate([(p, "model-top-k") for p in chunk])
            done += len(chunk)

    def _propose(self, current, taken) -> Tuple[Optional[Tuple[TileConfig, ...]], str]:
        rng, spaces = self.rng, self.spaces
        if current is not None:
            for _ in range(MAX_PROPOSALS):
                d = int(rng.integers(len(spaces)))
                move = MOVES[int(rng.integers(len(MOVES)))]
                options = spaces[d].moves(current[d], move)
                if not options:
                    continue
                cand = current[:d] + (options[int(rng.integers(len(options)))],) + current[d + 1:]
                if cand not in taken:
                    return cand, "anneal"
        for _ in range(MAX_PROPOSALS):  # restart from a random candidate point
            cand = tuple(r[int(rng.integers(len(r)))] for r in self.ranked_cands)
            if cand not in taken:
                return cand, "seed"
        return None, "seed"

    def _anneal(self) -> None:
        """2. simulated annealing from the best measured point, ``size`` neighbours per step."""
        current: Optional[Tuple[TileConfig, ...]] = None
        ok_points = [(t.median_s, t.index) for t in self.trials if t.ranked(self.ranking)]
        if ok_points:
            current = self.trials[min(ok_points)[1]].configs
        while self.spaces and not self.stop():
            frac = max(len(self.trials) / max(self.max_trials, 1),
                       (time.perf_counter() - self.search_start) / self.budget_s)
            temp = T_START * (T_END / T_START) ** min(1.0, frac)
            proposals: List[Tuple[Tuple[TileConfig, ...], str, float]] = []
            taken = set(self.seen)
            for _ in range(min(self.size, self.max_trials - len(self.trials))):
                proposal, source = self._propose(current, taken)
                if proposal is None:
                    break
                taken.add(proposal)
                # drawn for every proposal so the stream does not depend on the outcomes
                proposals.append((proposal, source, float(self.rng.random())))
            if not proposals:
                debug_log(1, "tune", "no unmeasured point found: the search space is exhausted")
                break
            self.evaluate([(p, s) for p, s, _ in proposals])
            # Accepted in the order proposed, whatever order they were measured in.
            for proposal, source, u in proposals:
                new = self.times.get(proposal)
                if new is None:
                    continue
                cur = self.times.get(current) if current is not None else None
                if source == "seed" or cur is None or new <= cur or u < math.exp(-(new - cur) / (temp * cur)):
                    current = proposal

    def run(self) -> TuneResult:
        self._setup()
        self.search_start = time.perf_counter()
        self.deadline = self.search_start + self.budget_s
        self.last_batch_s = 0.0  # wall seconds of the last batch evaluated (stop)
        self.rng = np.random.default_rng(self.seed)
        setup_s = self.search_start - self.t_start
        if _progress_enabled(self.progress):
            from tqdm import tqdm

            self.bar = tqdm(total=self.max_trials, desc="tune", unit="trial", file=sys.stderr, dynamic_ncols=True,
                            leave=True)
        interrupted = False
        try:
            if self.spaces:
                self._model_top_k()
                self._anneal()
        except KeyboardInterrupt:
            # Ctrl-C: stop searching, but keep what was measured (raised below as TuneInterrupted).
            interrupted = True
        finally:
            if self.bar is not None:
                self.bar.close()
        if interrupted and any(t.index != k for k, t in enumerate(self.trials)):
            # A batch cut short: number what arrived consecutively (indices name positions).
            self.trials = [dataclasses.replace(t, index=k) for k, t in enumerate(self.trials)]
        return self._result(setup_s, interrupted)

    def _result(self, setup_s: float, interrupted: bool) -> TuneResult:
        program, base_time = self.program, self.baseline["median_s"]
        # The answer: the fastest ranked trial, or compile's default schedule when nothing beat it.
        best_trial: Optional[Trial] = None
        for t in self.trials:
            if t.ranked(self.ranking) and (best_trial is None or t.median_s < best_trial.median_s):
                best_trial = t
        if best_trial is not None and best_trial.median_s <= base_time:
            best_steps, best_time, best_configs, best_index = best_trial.steps, best_trial.median_s, \
                best_trial.configs, best_trial.index
        else:
            best_steps, best_time, best_configs, best_index = self.baseline["steps"], base_time, (), None
        best = pipeline.schedule(program, self.size_values, shapes=dict(zip(program.input_names, self.in_shapes)),
                                 dtypes=list(self.dts), steps=best_steps)
        elapsed = time.perf_counter() - self.t_start
        other = [t.index for t in self.trials if t.measured and t.ok is not False and not t.ranked(self.ranking)]
        info = {
            "program": str(program),
            "inputs": self.inputs,
            "hardware": self.hw.name,
            "version": __version__,
            "search": {**self.search, "budget_s": float(self.budget_s), "warmup": int(self.warmup),
                       "model": self.model_name, "statements": [sp.stmt for sp in self.spaces],
                       "candidates": {sp.stmt: len(r) for sp, r in zip(self.spaces, self.ranked_cands)}},
            "setup_s": {"oracle": self.baseline.get("oracle_s", 0.0), "total": setup_s},
            "search_s": time.perf_counter() - self.search_start,
            "baseline": {k: self.baseline[k] for k in ("steps", "median_s", "min_s", "runs", "worker", "kind")},
            "executor": self.ex.describe(),
            "kinds": {"ranking": self.ranking, "other_kind_trials": other},
        }
        if self.resumed:
            info["resumed_trials"] = self.resumed
        if interrupted:
            info["interrupted"] = True
            if self.cache:
                info["partial_cache"] = str(partial_path(self.key))
        result = TuneResult(best=best, best_time_s=best_time, baseline_time_s=base_time, trials=self.trials,
                            from_cache=False, elapsed_s=elapsed, key=self.key, best_configs=tuple(best_configs),
                            best_trial=best_index, flops=self.flops, info=info)
        if interrupted:
            # Not the answer for these settings: the trials stay in the partial document, which the
            # next run with the same settings resumes from.
            raise TuneInterrupted(result)
        if self.cache:
            path = json_put(CACHE_NAMESPACE, self.key, result.to_json())
            partial_path(self.key).unlink(missing_ok=True)
            debug_log(1, "tune", f"result cached: {path}")
        return result
