"""Checking one output against the oracle's and timing calls: what compare, run, tune and their workers share.

    >>> check_output("C", np.ones(3, np.float32), np.ones(3, np.float32)).ok
    True
    >>> spread([3.0, 1.0, 2.0]).median
    2.0
"""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from .errors import PolytileError

#: Relative tolerances for float outputs (integer outputs must match exactly).
#: Relative tolerance of float outputs by dtype (see check_output).  float16: about ten units in the last place
#: (2**-10): the generated C computes _Float16 in float and rounds at each assignment, the reference (numpy)
#: rounds each operation, and a sum of many terms drifts apart by several units.
RTOL = {"float16": 1e-2, "float32": 1e-4, "float64": 1e-5}


@dataclass
class Check:
    """One output compared with the reference: the verdict, the error and the tolerance used.

    ``tol`` is the bound ``err`` was held to, None when the comparison was exact (integer outputs) or
    could not be made (another shape); ``tol_text`` is how the tables print it.
    """

    name: str
    ok: bool
    err: float
    tol_text: str
    detail: str = ""
    tol: Optional[float] = None


def check_output(name: str, got: np.ndarray, want: np.ndarray) -> Check:
    """Compare one compiled output with the oracle's: exact for integers, relative bound for floats.

    Floats pass when ``max_abs_err <= rtol * max(1, max|ref|)`` (rtol from
    :data:`RTOL`): scaling by the largest reference value keeps sums of many
    terms from failing on rounding alone.
    """
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return Check(name, False, math.inf, "-", f"shape {got.shape} but the reference has {want.shape}")
    dtype = np.dtype(want.dtype)
    exact = dtype.kind not in "fc"
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    # Equal infinities and NaN-vs-NaN agree (masked_max gives -inf by design;
    # log of a non-positive input gives nan in both); `inf - inf` would be nan.
    same = (g == w) | (np.isnan(g) & np.isnan(w))
    with np.errstate(invalid="ignore"):  # inf - inf where `same` already decided
        diff = np.where(same, 0.0, np.abs(g - w))
    diff = np.where(np.isnan(diff), np.inf, diff)
    err = float(diff.max()) if diff.size else 0.0
    if exact:
        tol, tol_text = None, "exact"
        bad = ~same if got.dtype == want.dtype else (got != want)
    else:
        rtol = RTOL.get(dtype.name, RTOL["float32"])
        finite = w[np.isfinite(w)]
        scale = max(1.0, float(np.abs(finite).max())) if finite.size else 1.0
        tol = rtol * scale
        tol_text = f"{tol:.3g}"
        bad = diff > tol
    ok = not bool(np.any(bad))
    detail = ""
    if got.dtype != want.dtype:
        ok = False
        detail = f"dtype {got.dtype} but the reference has {want.dtype}"
    elif not ok:
        worst = np.unravel_index(int(np.argmax(diff)), diff.shape) if diff.ndim else ()
        where = "[" + ", ".join(str(int(i)) for i in worst) + "]"
        detail = (f"{int(np.count_nonzero(bad))} of {diff.size} elements differ; worst at {where}: "
                  f"got {got[worst]!r}, expected {want[worst]!r}")
    return Check(name, ok, err, tol_text, detail, tol)


def time_calls(fn: Callable[[], Any], repeat: int, warmup: int = 0) -> List[float]:
    """Seconds per call of ``fn`` over ``repeat`` timed calls, after ``warmup`` untimed ones."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


class Spread(NamedTuple):
    """The median, min and max of some timed calls' seconds (each None when nothing was timed)."""

    median: Optional[float]
    min: Optional[float]
    max: Optional[float]


def spread(times: Sequence[float]) -> Spread:
    """Median, min and max of ``times``: how every measurement here reports its calls."""
    if not times:
        return Spread(None, None, None)
    return Spread(statistics.median(times), min(times), max(times))


def capped_calls(first_s: float, repeat: int, warmup: int, cap_s: float) -> Tuple[int, int]:
    """(warm-up calls, timed calls) still to make of a callable whose first call, the first warm-up,
    took ``first_s`` seconds, so that measuring it takes about ``cap_s`` seconds at most.

    ``(0, 0)`` when that call alone reached the cap: it is the only measurement.  Otherwise the other
    ``warmup - 1`` warm-ups and ``repeat`` timed calls, or, when those would not fit, no more warm-up
    and as many timed calls as fit (at least one).
    """
    if first_s >= cap_s:
        return 0, 0
    extra_warmup = max(0, warmup - 1)
    if first_s * (extra_warmup + repeat) <= cap_s:
        return extra_warmup, repeat
    return 0, max(1, min(repeat, int(cap_s // max(first_s, 1e-9))))


# ---------------------------------------------------------------------------
# Provenance
# ---------------------------------------------------------------------------


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def _reason(exc: PolytileError) -> str:
    """The error's message on one line: what is wrong and the dependence it violates."""
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    return " / ".join(lines[:2])


