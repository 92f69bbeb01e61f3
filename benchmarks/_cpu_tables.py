"""The per-script tables of the CPU benchmarks against numpy (``bench_all.py`` and the four scripts on it)."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import _common
from polytile.compare import format_table


def _f(x: Optional[float], fmt: str = "{:.2f}") -> str:
    """``x`` formatted, or ``-`` when it was not measured.

    >>> _f(1.234, "{:.1f}x"), _f(None)
    ('1.2x', '-')
    """
    return "-" if x is None else fmt.format(x)


def result_table(records: List[Dict[str, Any]], labels: Sequence[str]) -> str:
    rows = [["workload", "shape", "numpy ms", f"numpy ms ({labels[1]})", "polytile ms", "ratio", "ratio vs faster",
             "numpy GF/s", "GFLOP/s", "% peak", "% meas. peak", "target", "ratio of mins"]]
    for r in records:
        x = r["result"]
        best = f" ({x['numpy_best']})" if len(r["baselines"]) > 1 and x["numpy_best"] else ""
        rows.append([r["family"], r["shape"], _common.ms(x["numpy_median_s"]) + best, _common.ms(x["numpy_alt_median_s"]),
                     _common.ms(x["polytile_median_s"]), _f(x["ratio"], "{:.2f}x"),
                     _f(x.get("ratio_vs_faster"), "{:.2f}x"), _f(x["numpy_gflops"], "{:.1f}"),
                     _f(x["polytile_gflops"], "{:.1f}"), _f(x["polytile_peak_pct"], "{:.1f}"),
                     _f(x.get("polytile_measured_peak_pct"), "{:.1f}"),
                     f">= {r['target']}x" + (f" (aim {r['aim']}x)" if r["aim"] else ""),
                     _f(x.get("ratio_of_mins"), "{:.2f}x")])
    return format_table(rows)


def spread_table(records: List[Dict[str, Any]]) -> str:
    """Every timed subject's calls: how many, their median and their min-max (issue 14 asks for the
    batched kernel's min-max over 20 calls or more; shown for every row).

    >>> # spread_table(records) -> "workload  shape  timed  calls  median ms  min ms  max ms ..."
    """
    rows = [["workload", "shape", "timed", "calls", "median ms", "min ms", "max ms"]]
    for r in records:
        for name, t in r.get("timings", {}).items():
            rows.append([r["family"], r["shape"], name, str(t.get("runs", "-")), _common.ms(t.get("median_s")),
                         _common.ms(t.get("min_s")), _common.ms(t.get("max_s"))])
    return format_table(rows)


def llvm_table(records: List[Dict[str, Any]]) -> str:
    """The llvm target beside the openmp (gcc) one, both against numpy in the same interleaved rounds."""
    rows = [["workload", "shape", "numpy ms", "openmp ms", "llvm ms", "openmp ratio", "llvm ratio", "llvm / openmp speed",
             "llvm GFLOP/s"]]
    for r in records:
        x = r["result"]
        rows.append([r["family"], r["shape"], _common.ms(x["numpy_median_s"]), _common.ms(x["polytile_median_s"]),
                     _common.ms(x.get("llvm_median_s")), _f(x["ratio"], "{:.2f}x"), _f(x.get("llvm_ratio"), "{:.2f}x"),
                     _f(x.get("llvm_vs_openmp"), "{:.2f}x"), _f(x.get("llvm_gflops"), "{:.1f}")])
    return format_table(rows)


def tune_table(records: List[Dict[str, Any]]) -> str:
    rows = [["workload", "shape", "tuning s (search)", "trials ok/all", "untuned ms", "tuned ms", "tuned GF/s",
             "% peak", "tuned/untuned", "tuned/default", "tuned kernel"]]
    for r in records:
        x, t = r["result"], r.get("tune")
        if not t:
            continue
        rows.append([r["family"], r["shape"], f"{t['wall_s']:.1f} ({t['search_s'] or 0:.1f})",
                     f"{t['trials_ok']}/{t['trials']}", _common.ms(x.get("untuned_median_s")),
                     _common.ms(x.get("tuned_median_s")), _f(x.get("tuned_gflops"), "{:.1f}"),
                     _f(x.get("tuned_peak_pct"), "{:.1f}"), _f(x.get("tuned_vs_untuned"), "{:.2f}x"),
                     _f(x.get("tuned_vs_default"), "{:.2f}x"),
                     "; ".join(t["best_configs"]) or "the untuned default"])
    return format_table(rows)
