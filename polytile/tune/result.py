"""What a tuning run returns: :class:`TuneResult` with its :class:`Trial` s, their JSON form and the trial table."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

from .. import pipeline
from ..autotile import TileConfig
from ..compare import format_table
from ..errors import PolytileError
from ..scheduling import Schedule

#: Format version of the cached/saved result JSON (part of the cache key, so results of an older format are
#: tuned again rather than read without what the newer one records).
FORMAT_VERSION = 4  # 2: configurations carry "pack"; 3: trials carry "at_s"; 4: configurations carry "inner"
#: Formats :meth:`TuneResult.from_json` reads: a format 2 result (a saved --json file) reads with at_s None, and
#: formats before 4 with every configuration's ``inner`` "ji" (the only order their register blocks had).
READABLE_FORMATS = (2, 3, 4)
#: Where a trial's configuration came from.
SOURCES = ("model-top-k", "anneal", "seed")


def _config_from_json(d: Mapping[str, Any]) -> TileConfig:
    return TileConfig(**{k: d[k] for k in TileConfig.__dataclass_fields__ if k in d})


@dataclass(frozen=True)
class Trial:
    """One measured (or failed) point of the search.

    ``ok`` is the oracle check (None when checking was off or the kernel never
    ran); ``error`` says why a failed trial failed; ``runs`` is the number of
    timed calls behind ``median_s``/``min_s``; ``worker`` names the process
    that measured it (``"in-process"`` or a Dask worker's address) and
    ``kind`` is the hardware fingerprint of its machine
    (:func:`polytile.hardware.host_fingerprint`; None for a trial that never
    reached a worker, or from an older cache); ``at_s`` the seconds from the
    start of the search to the trial's arrival (None in results of format 2).
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
    worker: Optional[str] = None
    kind: Optional[str] = None
    at_s: Optional[float] = None

    @property
    def measured(self) -> bool:
        return self.median_s is not None and self.error is None

    def ranked(self, kind: Optional[str]) -> bool:
        """Measured, not wrong, and timed on a machine of ``kind`` (any, when ``kind`` is None): may be the best."""
        return self.measured and self.ok is not False and (kind is None or self.kind in (None, kind))

    def to_json(self) -> Dict[str, Any]:
        return {"index": self.index, "configs": [c.to_json() for c in self.configs], "steps": list(self.steps),
                "predicted_s": self.predicted_s, "median_s": self.median_s, "min_s": self.min_s,
                "ok": self.ok, "error": self.error, "source": self.source, "runs": self.runs,
                "worker": self.worker, "kind": self.kind, "at_s": self.at_s}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Trial":
        return cls(int(d["index"]), tuple(_config_from_json(c) for c in d["configs"]), list(d["steps"]),
                   d.get("predicted_s"), d.get("median_s"), d.get("min_s"), d.get("ok"), d.get("error"),
                   str(d["source"]), int(d.get("runs", 0)), d.get("worker"), d.get("kind"), d.get("at_s"))


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
            f"reg={'y' if c.regtile else 'n'}" + ("" if c.pack or not c.regtile else " pack=n")
            + ("" if c.inner == "ji" else f" inner={c.inner}"))


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
    def ranking_kind(self) -> Optional[str]:
        """The hardware fingerprint whose trials were ranked (the baseline's machine); None in older results."""
        return self.info.get("kinds", {}).get("ranking")

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
        if data.get("polytile_tune") not in READABLE_FORMATS:
            raise PolytileError(f"not a polytile tune result of format {' or '.join(map(str, READABLE_FORMATS))} "
                                f"(polytile_tune={data.get('polytile_tune')!r})")
        inputs = data["inputs"]
        best = pipeline.schedule(data["program"], {n: v["value"] for n, v in inputs.items() if "value" in v},
                                 shapes={n: v["shape"] for n, v in inputs.items()},
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
        rows = []
        for t in self.trials:
            by_stmt = {c.stmt: _config_text(c).split(" ", 1)[1] for c in t.configs}
            check = "FAIL" if t.ok is False else ("ok" if t.ok else ("-" if t.error else "unchecked"))
            if t.measured and t.ok is not False and not t.ranked(self.ranking_kind):
                check += " (other kind)"
            g = self.gflops(t.median_s) if t.measured else None
            row = [str(t.index) + ("*" if t.index == self.best_trial else ""), t.source] \
                + [by_stmt.get(s, "-") for s in stmts] \
                + [_ms(t.predicted_s), _ms(t.median_s), _ms(t.min_s), f"{g:.2f}" if g else "-", check]
            rows.append(row)
        lines = format_table(rows, head).split("\n")
        if not self.trials:
            nothing = not self.info.get("search", {}).get("statements", True)
            lines = ["no trials: " + ("no contraction statement has the blocked form; nothing to tune"
                                      if nothing else "the budget ran out before the first one")]
        for t in self.trials:
            if t.error:
                lines.append(f"  trial {t.index}: {t.error.splitlines()[0][:200]}")
        other = [t for t in self.trials if t.measured and t.ok is not False and not t.ranked(self.ranking_kind)]
        if other:
            lines.append(f"  trials {', '.join(str(t.index) for t in other)}: timed on another kind of machine "
                         f"than the baseline ({', '.join(sorted({str(t.kind) for t in other}))}, not "
                         f"{self.ranking_kind}): kept, but not ranked with the others")
        ok = sum(1 for t in self.trials if t.measured and t.ok is not False)
        ex = self.info.get("executor") or {}
        where = "" if ex.get("executor", "in-process") == "in-process" else \
            f" on {ex.get('workers')} Dask worker(s) ({ex.get('mode')}, {ex.get('address')})"
        resumed = self.info.get("resumed_trials")
        lines.append(f"{len(self.trials)} trials ({ok} measured ok, {len(self.trials) - ok} failed), "
                     f"tuning took {self.elapsed_s:.1f} s{where}"
                     + (f", {resumed} trials resumed from an earlier run" if resumed else "")
                     + (" (result from the cache)" if self.from_cache else ""))
        for note in ex.get("notes", ()):
            lines.append(f"note: {note}")
        bg, tg = self.gflops(self.baseline_time_s), self.gflops(self.best_time_s)
        lines.append(f"baseline (compile's default schedule): {_ms(self.baseline_time_s)}"
                     + (f", {bg:.2f} GFLOP/s" if bg else ""))
        which = f"trial {self.best_trial}" if self.best_trial is not None else "compile's default schedule"
        lines.append(f"best: {which}, {_ms(self.best_time_s)}" + (f", {tg:.2f} GFLOP/s" if tg else "")
                     + f", {self.speedup:.2f}x over the baseline")
        return "\n".join(lines)
