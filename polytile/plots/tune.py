"""``tune --plot``: how a tuning run went -- the best time so far against trials and against seconds,
every trial's measurement, and the cost model's prediction against the measurement per trial.

Reads what :func:`polytile.tune.tune` returns, or the JSON it saves (``polytile tune --json r.json``).
Results of format 2 (before trials carried time stamps) draw everything but the seconds panel.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, List, Mapping, Optional, Tuple

from ..errors import PlotError
from . import _mpl

#: Artist ids: one best-so-far point per trial (against trials, and against seconds where stamped),
#: one measured point per trial that ran, one prediction point per trial with both numbers.
GID_BEST = "best-so-far"
GID_BEST_SECONDS = "best-so-far-seconds"
GID_TRIALS = "trials"
GID_PREDICTION = "prediction"


@dataclass(frozen=True)
class _Trial:
    index: int
    source: str
    predicted: Optional[float]
    measured: Optional[float]  # the median of an ok trial, else None
    failed: bool
    at_s: Optional[float]


def _read(result) -> Tuple[List[_Trial], Optional[float], Mapping[str, Any]]:
    """The trials, the baseline time and the provenance of a TuneResult, its JSON, or that file."""
    result = _mpl.read_document(result, "a tuning result")
    if hasattr(result, "trials") and hasattr(result, "baseline_time_s"):
        raw = [t.to_json() for t in result.trials]
        baseline, info = result.baseline_time_s, dict(result.info)
    elif isinstance(result, Mapping) and isinstance(result.get("trials"), list):
        raw, baseline, info = result["trials"], result.get("baseline_time_s"), result
    else:
        raise PlotError("tuning_curve needs a TuneResult (polytile.tune.tune) or the JSON "
                        "`polytile tune --json result.json` writes")
    trials = []
    for d in raw:
        ok = d.get("median_s") is not None and d.get("error") is None and d.get("ok") is not False
        trials.append(_Trial(int(d["index"]), str(d.get("source", "")), d.get("predicted_s"),
                             d["median_s"] if ok else None, not ok, d.get("at_s")))
    return trials, baseline, info


def _best_so_far(trials: List[_Trial]) -> List[float]:
    """Per trial the fastest ok time up to it (NaN before the first ok trial: nothing to show yet)."""
    best, out = math.inf, []
    for t in trials:
        if t.measured is not None:
            best = min(best, t.measured)
        out.append(best if math.isfinite(best) else math.nan)
    return out


def tuning_curve(result, *, title: Optional[str] = None, path=None):
    """Three panels of a tuning run: the best median time so far after each trial (with every
    trial's own time and the baseline, compile's untuned default); the best so far against the
    seconds the search had run; and the cost model's predicted time against the measured median,
    one point per trial, log-log, with the rank correlation of the two.

    ``result`` is what :func:`polytile.tune.tune` returns, its JSON (``polytile tune --json r.json``)
    as a dict, or that file's path.  Returns the matplotlib Figure; with ``path`` (``.png``,
    ``.svg`` or ``.pdf``) also writes it there.

        >>> from polytile import plots, tune
        >>> r = tune.tune("examples/matmul.tile", "M=256,N=256,K=256", budget_s=20)   # doctest: +SKIP
        >>> fig = plots.tuning_curve(r, path="tune.png")                              # doctest: +SKIP
    """
    from ..cost.ranking import spearman  # the rank correlation docs/cost-model.md reports

    trials, baseline, info = _read(result)
    if not trials:
        raise PlotError("the tuning result has no trials to draw (the budget ran out before the first one, "
                        "or no statement has the blocked form)")
    fig = _mpl.new_figure(14.0, 4.4)
    ax_trials, ax_secs, ax_model = fig.subplots(1, 3)
    ms = 1e3
    best = _best_so_far(trials)
    xs = [t.index for t in trials]

    # 1. against trials: every trial's median, the best so far as a step line, the baseline.
    ok = [t for t in trials if t.measured is not None]
    ax_trials.scatter([t.index for t in ok], [t.measured * ms for t in ok], s=18, color="tab:blue", alpha=0.6,
                      label="trial (median)", gid=GID_TRIALS, zorder=3)
    failed = [t.index for t in trials if t.failed]
    line, = ax_trials.step(xs, [b * ms for b in best], where="post", color="tab:green", linewidth=2,
                           marker=".", label="best so far")
    line.set_gid(GID_BEST)
    if baseline:
        ax_trials.axhline(baseline * ms, color="0.4", linestyle="--", linewidth=1, label="baseline (compile's default)")
    if failed:
        ax_trials.text(0.99, 0.02, f"{len(failed)} failed trial(s) not shown", transform=ax_trials.transAxes,
                       ha="right", va="bottom", fontsize=8, color="firebrick")
    times = [t.measured for t in ok] + ([baseline] if baseline else [])
    if times and max(times) > 5 * min(times):
        ax_trials.set_yscale("log")  # a few very slow trials would otherwise flatten the best-so-far line
    ax_trials.set_xlabel("trial")
    ax_trials.set_ylabel("median time per call (ms)")
    ax_trials.set_title("best time against trials", fontsize=10)
    ax_trials.legend(fontsize=8, loc="upper right")
    ax_trials.grid(alpha=0.3)

    # 2. against seconds of search (format 3 results stamp every trial).
    stamped = [(t.at_s, b) for t, b in zip(trials, best) if t.at_s is not None]
    if stamped:
        line, = ax_secs.step([s for s, _ in stamped], [b * ms for _, b in stamped], where="post", color="tab:green",
                             linewidth=2, marker=".", label="best so far")
        line.set_gid(GID_BEST_SECONDS)
        if baseline:
            ax_secs.axhline(baseline * ms, color="0.4", linestyle="--", linewidth=1, label="baseline")
        budget = (info.get("search") or {}).get("budget_s")
        if budget:
            ax_secs.axvline(budget, color="firebrick", linestyle=":", linewidth=1, label=f"budget {budget:g} s")
        ax_secs.legend(fontsize=8, loc="upper right")
    else:
        ax_secs.text(0.5, 0.5, "no time stamps in this result\n(tuned before results carried them)",
                     transform=ax_secs.transAxes, ha="center", va="center", fontsize=9, color="0.35")
    ax_secs.set_xlabel("seconds of search")
    ax_secs.set_ylabel("best median time so far (ms)")
    ax_secs.set_title("best time against seconds", fontsize=10)
    ax_secs.grid(alpha=0.3)

    # 3. the model against the measurements.
    pairs = [(t.predicted, t.measured) for t in trials if t.predicted and t.measured]
    model = info.get("search", {}).get("model") if isinstance(info.get("search"), Mapping) else None
    if pairs:
        ax_model.scatter([p * ms for p, _ in pairs], [m * ms for _, m in pairs], s=18, color="tab:purple", alpha=0.7,
                         gid=GID_PREDICTION, zorder=3)
        lo = min(min(p, m) for p, m in pairs) * ms / 1.5
        hi = max(max(p, m) for p, m in pairs) * ms * 1.5
        ax_model.plot([lo, hi], [lo, hi], color="0.5", linestyle=":", linewidth=1, label="prediction = measurement")
        ax_model.set_xscale("log")
        ax_model.set_yscale("log")
        ax_model.legend(fontsize=8, loc="upper left")
        rho = spearman([p for p, _ in pairs], [m for _, m in pairs])
        ax_model.set_title(f"model against measurement (Spearman {rho:.2f}, {len(pairs)} trials)"
                           if math.isfinite(rho) else f"model against measurement ({len(pairs)} trials)", fontsize=10)
    else:
        ax_model.text(0.5, 0.5, "no trial has both a prediction and a measurement", transform=ax_model.transAxes,
                      ha="center", va="center", fontsize=9, color="0.35")
        ax_model.set_title("model against measurement", fontsize=10)
    ax_model.set_xlabel("predicted time (ms)" + (f", {model}" if model else ""))
    ax_model.set_ylabel("measured median (ms)")
    ax_model.grid(alpha=0.3, which="both")

    fig.suptitle(title or _title(info), fontsize=11)
    return _mpl.finish(fig, path)


def _title(info: Mapping[str, Any]) -> str:
    inputs = info.get("inputs") or {}
    shapes = ", ".join(f"{n}[{'x'.join(str(x) for x in v.get('shape', []))}]" for n, v in inputs.items()
                       if isinstance(v, Mapping))
    hw = info.get("hardware")
    return "tuning" + (f" {shapes}" if shapes else "") + (f" on {hw}" if hw else "")
