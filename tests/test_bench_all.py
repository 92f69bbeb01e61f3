"""bench_all's verdicts: judged against the faster of numpy's two OpenBLAS core types (no timing here)."""
import pytest
from helpers_inputs import bench_module


@pytest.fixture(scope="module")
def bench_all():
    with bench_module("bench_all") as mod:
        yield mod


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


def test_contention_times_numpy_with_the_faster_core_type(bench_all):
    with bench_module("bench_contention") as mod:
        _check_faster_worker(mod)


def _check_faster_worker(mod):
    class FakeWorker:
        def __init__(self, label, per_call):
            self.label, self.per_call, self.asked = label, per_call, []

        def ask(self, **req):
            self.asked.append(req)
            return {"times": [self.per_call[req["baseline"]]] * req["inner"]}

    pinned = FakeWorker("OPENBLAS_CORETYPE=Haswell (as set)", {"matmul": 2e-3, "einsum": 3e-3})
    own = FakeWorker("OPENBLAS_CORETYPE unset", {"matmul": 1e-3, "einsum": 4e-3})
    chosen, medians = mod.faster_worker([pinned, own], "k", ["matmul", "einsum"], {"matmul": 1e-3, "einsum": 1e-2})
    assert chosen is own
    assert medians == {pinned.label: 2e-3, own.label: 1e-3}
    # Each worker timed each baseline in every round, the turn sized to ~20 ms of calls.
    assert [r["inner"] for r in own.asked if r["baseline"] == "matmul"] == [20] * 5
    assert [r["inner"] for r in own.asked if r["baseline"] == "einsum"] == [2] * 5


def test_spread_table_reports_every_subjects_calls_and_min_max(bench_all):
    """Issue 14 asks for the batched kernel's min-max over 20 calls or more: each timed subject's calls,
    median, min and max are printed."""
    timings = {"polytile": {"runs": 2540, "median_s": 1.91e-4, "min_s": 1.88e-4, "max_s": 2.818e-3},
               "numpy[1]:matmul": {"runs": 1890, "median_s": 2.71e-4, "min_s": 2.47e-4, "max_s": 5.21e-4}}
    with bench_module("_cpu_tables") as tables:
        text = tables.spread_table([{"family": "batched matmul", "shape": "32x(128x64 @ 64x128)", "timings": timings}])
    lines = text.splitlines()
    assert "calls" in lines[0] and "min ms" in lines[0] and "max ms" in lines[0]
    row = next(l for l in lines if "polytile" in l).split()
    assert "2540" in row and "0.188" in row and "2.818" in row


def test_bench_gemm_takes_cubes_and_shapes():
    import argparse
    with bench_module("bench_gemm") as mod:
        assert mod.gemm_shape("1500") == (1500, 1500, 1500)
        assert mod.gemm_shape("300x2000x300") == (300, 2000, 300)
        for bad in ("3x4", "0", "ax2x3", "2x2x-1", ""):
            with pytest.raises(argparse.ArgumentTypeError, match="MxNxK"):
                mod.gemm_shape(bad)
        (w,) = mod.workloads(argparse.Namespace(sizes=[(300, 2000, 100)]))
        assert w.dims == "M=300,N=2000,K=100" and w.shapes == [(300, 100), (100, 2000)]
        assert w.flops == 2 * 300 * 2000 * 100 and w.shape == "300x2000x100"
