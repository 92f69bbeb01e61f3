"""The search itself: :func:`tune` (the model's top k, then simulated annealing, against compile's
default schedule), and the key its results are cached under (namespace ``tune`` of :mod:`polytile.runtime.json_cache`)."""
from __future__ import annotations

import hashlib
import json
import math
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

from ..version import __version__
from .. import autotile, pipeline
from .. import hardware as hardware_mod
from ..autotile import TileConfig
from ..config import debug_log, get_config
from ..errors import PolytileError
from ..runtime.json_cache import json_get, json_path, json_put
from ..scheduling import Step
from .bench import _Bench, _error_text, _Outcome, stats
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

    predict, model_name = _predictor(hw)
    shape_map = dict(zip(program.input_names, in_shapes))
    # The search builds its candidates on the untiled default; the baseline is compile's default.
    base = pipeline.schedule(program, shapes=shape_map, dtypes=list(dts), steps=DEFAULT_STEPS)
    default = pipeline.schedule(program, shapes=shape_map, dtypes=list(dts), hardware=hw, min_parallel_work=None)
    bench = _Bench(program, in_shapes, dts, repeat=repeat, warmup=warmup, check=check,
                   cap_s=max(2.0, budget_s / 20))

    baseline, _ = bench.measure(default.steps)
    if baseline.error or baseline.median_s is None:
        raise PolytileError(f"compile's default schedule does not work, nothing to tune against: {baseline.error}")
    from ..compare import COUNT_SCAN_LIMIT, count_flops  # contraction points counted with isl

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
                  out.error, source, out.runs, time.perf_counter() - search_start)
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
        path = json_put(CACHE_NAMESPACE, key, result.to_json())
        debug_log(1, "tune", f"result cached: {path}")
    return result
