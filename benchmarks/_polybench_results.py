"""The PolyBench harness's pure helpers (benchmarks/bench_polybench.py): error messages, PolyBench's timer
output, dump comparison, ratios and their summaries.  No processes, no files: tests/test_bench_polybench.py
checks them on strings and numbers."""
from __future__ import annotations

import math
import re
import statistics
from typing import Any, Dict, Iterable, List, Optional, Sequence


def error_line(text: str) -> str:
    """The line that says what went wrong: the first non-empty one, or a traceback's last one."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return "(no message)"
    if lines[0].startswith("Traceback"):
        return lines[-1]
    return lines[0]


def parse_time(stdout: str) -> Optional[float]:
    """PolyBench's kernel time: the last line of a -DPOLYBENCH_TIME run's stdout (seconds), or None."""
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line:
            try:
                value = float(line)
            except ValueError:
                return None
            return value if math.isfinite(value) else None
    return None


_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


def _unit(token: str) -> float:
    """One unit in the last printed digit of a decimal token (0 for an integer: those must match exactly)."""
    if "." not in token or "e" in token.lower():
        return 0.0
    return 10.0 ** -len(token.split(".", 1)[1])


def compare_dumps(a: str, b: str, rtol: Optional[float] = None) -> Dict[str, Any]:
    """Compare two PolyBench dumps (stderr of -DPOLYBENCH_DUMP_ARRAYS runs).

    ``verdict``: ``bitwise`` when the texts are identical; otherwise, with ``rtol``, ``close`` when every
    number of ``a`` is within ``rtol * max(|x|, |y|)`` plus one unit of its last printed digit of the
    number of ``b`` in the same place (and every other token is the same), else ``DIFFERENT``.
    ``max_rel`` is the largest relative difference of two numbers, ``differ`` how many numbers differ
    (of ``values``), ``where`` the array and value index of the first difference (None when identical).
    """
    ta, tb = a.split(), b.split()
    values = sum(1 for x in ta if _NUMBER.match(x))
    if a == b:
        return {"verdict": "bitwise", "max_rel": 0.0, "differ": 0, "values": values, "where": None}
    where = None
    max_rel = 0.0
    differ = 0
    ok = len(ta) == len(tb)
    if not ok:
        where = f"{len(ta)} vs {len(tb)} tokens"
    array, index = "?", 0
    for i, (x, y) in enumerate(zip(ta, tb)):
        if i >= 2 and ta[i - 2] == "begin" and ta[i - 1] == "dump:":
            array, index = x, 0
            continue
        numeric = bool(_NUMBER.match(x)) and bool(_NUMBER.match(y))
        if numeric:
            index += 1
        if x == y:
            continue
        if not numeric:
            ok = False
            where = where or f"{array}: {x!r} vs {y!r}"
            continue
        differ += 1
        fx, fy = float(x), float(y)
        scale = max(abs(fx), abs(fy))
        rel = abs(fx - fy) / scale if scale else 0.0
        max_rel = max(max_rel, rel)
        where = where or f"{array}[{index - 1}]: {x} vs {y}"
        tol = (rtol or 0.0) * scale + max(_unit(x), _unit(y))
        if rtol is None or abs(fx - fy) > tol * (1 + 1e-9):
            ok = False
    verdict = "close" if ok and rtol is not None else "DIFFERENT"
    return {"verdict": verdict, "max_rel": max_rel, "differ": differ, "values": values, "where": where}


def ratio(baseline: Optional[float], other: Optional[float]) -> Optional[float]:
    """baseline / other (> 1: ``other`` is faster), or None when either is missing or not positive."""
    if baseline is None or other is None or baseline <= 0 or other <= 0:
        return None
    return baseline / other


def geomean(values: Iterable[Optional[float]]) -> Optional[float]:
    """Geometric mean of the positive values given (None ones skipped), or None when there are none."""
    xs = [v for v in values if v is not None and v > 0]
    if not xs:
        return None
    return math.exp(sum(math.log(v) for v in xs) / len(xs))


def rotate(seq: Sequence[Any], r: int) -> List[Any]:
    """``seq`` rotated left by ``r``: round r of an interleaved measurement starts at item r."""
    if not seq:
        return []
    r %= len(seq)
    return list(seq[r:]) + list(seq[:r])


def summarise(times: Sequence[Optional[float]]) -> Dict[str, Optional[float]]:
    """Min and median of the rounds that produced a time."""
    ok = [t for t in times if t is not None]
    return {"min": min(ok) if ok else None, "median": statistics.median(ok) if ok else None, "n": len(ok)}
