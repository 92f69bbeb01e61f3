"""Generated C that GCC 12.2 at -O3 compiles wrongly, and the shapes of code that avoid it.

Each case is differential (kernel = oracle) on integer-valued floats, so sums are exact.  Found by
the program campaign (tests/fuzz/FINDINGS.md, F7): a float reduction into one cell over a 2-D
nest whose inner loop reads backwards (``T[] = +(A[i, N - 1 - j])``) summed the wrong elements
when GCC completely peeled the inner loop and vectorised the outer one; the generated loop now
carries ``#pragma GCC unroll 1`` -- or, for a ``+``, ``*``, max or min (Tile does not order them), runs as a
SIMD reduction over a scalar accumulator.
"""
from __future__ import annotations

import ctypes
import ctypes.util

import numpy as np
import pytest

import polytile

REVERSED = [
    "function (A[N, N]) -> (T) { T[] = +(A[i, N - 1 - j]); }",
    "function (A[N, N, N]) -> (T) { T[] = +(A[i, N - 1 - j, N - 1 - k]); }",
    "function (A[N, N, N]) -> (T) { T[] = +(A[i, N - 1 - j, k]); }",
    "function (A[N, N]) -> (T) { T[] = *(A[N - 1 - i, N - 1 - j]); }",
    "function (A[N, N]) -> (T) { T[] = >(A[i, N - 1 - j]); }",
    "function (A[N, N, N]) -> (T) { T[] = <(A[i, N - 1 - j, N - 1 - k]); }",
    # The campaign's program (seed 5441), reduced: the sum reads a temporary backwards.
    "function (B[N, N, N]) -> (T3) {\n  T2[j + 2, 2*i : N, N] = +(B[(-j + (N - 1)) / 2, j, j] * B[j, i - 1, i]);\n"
    "  T3[] = +(T2[i, -j + (N - 1)]);\n}",
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", [3, 4, 7, 8, 9, 16])
@pytest.mark.parametrize("src", REVERSED, ids=range(len(REVERSED)))
def test_reversed_float_reduction_into_one_cell(src, n, dtype):
    rng = np.random.default_rng(n)
    rank = src.split("(", 2)[1].count(",") + 1
    lo, hi = (1, 2) if "*(" in src else (-4, 5)  # products stay exact with ones and twos
    A = rng.integers(lo, hi + (1 if lo == 1 else 0), (n,) * rank).astype(dtype)
    got = polytile.compile(src)(A)
    want = polytile.reference(src, A)
    np.testing.assert_array_equal(got, want)


def test_the_workaround_is_where_the_reduction_stays_in_one_cell():
    # A float16 reduction into one cell stays a serial chain (no SIMD lanes for float16): the workaround
    # keeps its loop from being peeled.
    for op in "+>":
        k = polytile.compile(f"function (A[N, N]) -> (T, R) {{ T[] = {op}(A[i, N - 1 - j]); R[i, j : N, N] = {op}(A[i, N - 1 - j]); }}")
        text = k.specialize_shapes([(8, 8)], ["float16"], build=False).source.text
        assert text.count("#pragma GCC unroll 1") == 1, text
    # A sum or a max into one cell in float64 runs in SIMD lanes over a scalar accumulator instead
    # (codegen/c_accumulate.py), which test_reversed_float_reduction_into_one_cell checks against the oracle.
    for op, clause in (("+", "+"), (">", "pt_rmax_float64")):
        k = polytile.compile(f"function (A[N, N]) -> (T, R) {{ T[] = {op}(A[i, N - 1 - j]); R[i, j : N, N] = {op}(A[i, N - 1 - j]); }}")
        text = k.specialize_shapes([(8, 8)], ["float64"], build=False).source.text
        assert text.count("#pragma GCC unroll 1") == 0, text
        assert text.count(f"#pragma omp simd reduction({clause}:pt_acc") == 1, text


@pytest.fixture
def omp_threads():
    """Set the OpenMP thread count of this process for one test (libgomp reads OMP_NUM_THREADS once,
    when the first kernel loads, so the environment cannot change it later)."""
    gomp = ctypes.CDLL(ctypes.util.find_library("gomp") or "libgomp.so.1")
    before = gomp.omp_get_max_threads()
    yield gomp.omp_set_num_threads
    gomp.omp_set_num_threads(before)


@pytest.mark.parametrize("agg", ["+", "*", ">", "<"])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_parallel_reduction_into_bool_cells(agg, threads, omp_threads):
    # Found by the campaign (F8): GCC combines the partial results of an OpenMP '+' reduction over
    # a _Bool array modulo 2, so a cell that was already true and gets another true turned false.
    # Each (i, j) is a parallel region over k that updates T[i] again.
    omp_threads(threads)
    src = f"function (A[N, N, N]) -> (T) {{ P = A > 0; T[i : N] = {agg}(P[i, j, k]); }}"
    rng = np.random.default_rng(3)
    A = rng.integers(-1, 3, (5, 5, 5)).astype(np.int32)
    s = polytile.schedule(src, shapes={"A": A.shape}, dtypes=["int32"], parallel=False)
    s = s.parallel("T", "k", reduction=True)
    got = polytile.compile(src, schedule=s)(A)
    want = polytile.reference(src, A)
    assert got.dtype == want.dtype == np.bool_
    np.testing.assert_array_equal(got, want)
