"""Spearman's rank correlation, for comparing the model's ranking with measured times."""
from __future__ import annotations

import math
from typing import Iterable, List, Sequence


def _ranks(xs: Sequence[float]) -> List[float]:
    """Ranks 1..n, ties sharing the average of the ranks they span."""
    order = sorted(range(len(xs)), key=lambda k: xs[k])
    ranks = [0.0] * len(xs)
    k = 0
    while k < len(order):
        m = k
        while m + 1 < len(order) and xs[order[m + 1]] == xs[order[k]]:
            m += 1
        avg = (k + m) / 2 + 1
        for q in range(k, m + 1):
            ranks[order[q]] = avg
        k = m + 1
    return ranks


def spearman(xs: Iterable[float], ys: Iterable[float]) -> float:
    """Spearman's rank correlation: Pearson's correlation of the (tie-averaged) ranks.

    NaN when either side is constant (the correlation is undefined).

    >>> spearman([1, 2, 3, 4], [10, 20, 30, 40]), spearman([1, 2, 3], [3, 2, 1])
    (1.0, -1.0)
    """
    xs, ys = list(xs), list(ys)
    if len(xs) != len(ys):
        raise ValueError(f"spearman: {len(xs)} x values but {len(ys)} y values")
    if len(xs) < 2:
        return float("nan")
    rx, ry = _ranks(xs), _ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    if sxx == 0 or syy == 0:
        return float("nan")
    return sxy / math.sqrt(sxx * syy)
