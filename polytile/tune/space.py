"""The search space: per contraction statement its candidate values and the annealer's moves
(:class:`_Space`), the cost model as a predictor, and configuration tuples in order of summed score."""
from __future__ import annotations

import dataclasses
import heapq
import math
from typing import Callable, Iterator, List, Optional, Sequence, Tuple

from .. import autotile
from ..autotile import TileConfig
from ..config import debug_log
from ..scheduling import Schedule
from .bench import _error_text

#: The register-block rows ``candidates`` considers (mr); the shapes the annealer moves between.
BLOCK_ROWS = (1, 2, 3, 4, 6, 8, 12, 14)
BLOCK_VECTORS = (1, 2, 3, 4)  # nr = vectors x lanes


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
        return dataclasses.replace(c, mc=mc, nc=nc, kc=kc)

    def moves(self, c: TileConfig, move: str) -> List[TileConfig]:
        """The distinct configurations one ``move`` away from ``c``."""
        def with_(**kw) -> TileConfig:
            return self.normalize(dataclasses.replace(c, **kw))

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
        elif move == "inner":
            out = [with_(inner=o) for o in autotile.INNER if o != c.inner]
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


MOVES = ("mc", "nc", "kc", "block", "order", "inner", "parallel", "regtile", "pack")


def _predictor(hw) -> Tuple[Optional[Callable], str]:
    """``(predict(schedule, cfg) -> seconds, name)`` from the cost model, or (None, stand-in name)."""
    try:
        from .. import cost
    except ImportError:
        return None, "candidate order (no cost model)"
    fn = getattr(cost, "predict_config", None)
    if fn is None:
        return None, "candidate order (cost.predict_config missing)"

    def predict(s: Schedule, cfg: TileConfig) -> Optional[float]:
        try:
            # the same time the default schedule is ranked by (autotile.autotile): the nest and its copies
            t = float(fn(s, cfg, hw).time_s) + autotile.operand_seconds(s, cfg, hw)
        except Exception as e:  # the model not covering a case should not stop tuning
            debug_log(1, "tune", f"cost model failed on {cfg}: {_error_text(e)}")
            return None
        return t if math.isfinite(t) else None

    return predict, "cost.predict_config + autotile.operand_seconds"


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

