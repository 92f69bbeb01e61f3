"""A parallel max/min reduction keeps NaN as numpy's maximum/minimum (and the serial code) do, on both back ends.

OpenMP's built-in max/min combine the threads' partial results with C's comparison, which drops a NaN;
the C target declares its own reductions with pt_max_*/pt_min_* (codegen/c.py NAN_REDUCTION_PRELUDE).
"""
from __future__ import annotations

import numpy as np
import pytest

import polytile
from polytile.config import override

PROGRAMS = {"max": ("function (X[M, N]) -> (O) { O[j : N] = >(X[i, j]); }", np.max),
            "min": ("function (X[M, N]) -> (O) { O[j : N] = <(X[i, j]); }", np.min)}


@pytest.mark.parametrize("target", ["openmp", "llvm"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", sorted(PROGRAMS))
def test_nan_survives_a_parallel_reduction(target, dtype, op):
    text, ref = PROGRAMS[op]
    s = polytile.schedule(text, dims="M=6,N=9", parallel=False).reorder("S0", ["i", "j"]).parallel("S0", "i", reduction=True)
    X = np.arange(54, dtype=dtype).reshape(6, 9) - 20
    X[5, 1] = X[0, 4] = X[2, 7] = X[3, 7] = np.nan  # in the first and in the last thread's rows
    k = polytile.compile(text, target=target, schedule=s, min_parallel_work=0)
    with override(num_threads=2):  # two threads, whatever the machine's load: one partial result each
        for _ in range(5):  # the order the partial results are combined in varies from call to call
            got = k(X)
            np.testing.assert_array_equal(got, ref(X, axis=0))
    assert np.isnan(got[[1, 4, 7]]).all()


def test_declared_reduction_only_where_needed():
    text = PROGRAMS["max"][0]
    s = polytile.schedule(text, dims="M=6,N=9", parallel=False).reorder("S0", ["i", "j"]).parallel("S0", "i", reduction=True)
    k = polytile.compile(text, schedule=s, min_parallel_work=0)
    src = k.specialize(np.zeros((6, 9), np.float32)).source.text
    assert "reduction(pt_rmax_float32:" in src and "declare reduction(pt_rmax_float32" in src
    plain = polytile.compile("function (A[N]) -> (B) { B = A + 1; }").specialize(np.zeros(4, np.float32)).source.text
    assert "declare reduction" not in plain
