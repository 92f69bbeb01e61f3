"""bench_all's verdicts: judged against the faster of numpy's two OpenBLAS core types (no timing here)."""
import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def bench_all():
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location("bench_all_under_test", BENCH / "bench_all.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules["bench_all_under_test"] = mod  # its dataclasses look their module up here
        spec.loader.exec_module(mod)
        yield mod
    finally:
        sys.path.remove(str(BENCH))
        sys.modules.pop("bench_all_under_test", None)


def _record(mod, as_set, other, polytile):
    baseline = {"OPENBLAS_CORETYPE=Haswell (as set)": {"best": "matmul", "median_s": as_set},
                "OPENBLAS_CORETYPE unset": {"best": "matmul", "median_s": other}}
    result = {"numpy_median_s": as_set, "polytile_median_s": polytile, "polytile_gflops": 1.0,
              "polytile_peak_pct": 1.0, "ratio": as_set / polytile, **mod.faster_numpy(baseline, polytile)}
    return {"family": "SGEMM", "shape": "1024^3", "target": 1.0, "aim": None, "result": result, "baseline": baseline}


def test_verdict_uses_the_faster_numpy(bench_all):
    # numpy pinned to Haswell kernels takes 2 ms, its own best kernels 1 ms; polytile 1.25 ms:
    # 1.6x the pinned numpy, but 0.8x numpy at its best -- the verdict must say FAIL.
    _, rows = bench_all.summary({"gemm": {"workloads": [_record(bench_all, 2.0e-3, 1.0e-3, 1.25e-3)]}})
    row = rows[0]
    assert row["measured"] == pytest.approx(0.8) and row["baseline_ms"] == 1.0e-3
    assert row["verdict"].startswith("FAIL")
    # With the as-set numpy the faster one, it is the one used.
    _, rows = bench_all.summary({"gemm": {"workloads": [_record(bench_all, 1.0e-3, 3.0e-3, 0.5e-3)]}})
    assert rows[0]["measured"] == pytest.approx(2.0) and rows[0]["verdict"] == "pass"


def test_faster_numpy_without_timings(bench_all):
    out = bench_all.faster_numpy({"a": {"median_s": None}}, 1.0)
    assert out == {"faster_numpy": None, "faster_numpy_median_s": None, "ratio_vs_faster": None}
    _, rows = bench_all.summary({"gemm": {"workloads": [_record(bench_all, 1.0, 1.0, 1.0)]}})
    assert rows[0]["verdict"] == "pass"
