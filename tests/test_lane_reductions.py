"""Tile sums into one cell run in SIMD lanes (codegen/c_accumulate.py; the llvm target lets LLVM
reassociate them): right on odd sizes for every element type the lanes hold, on both targets, and
applied only where a Tile aggregation may be regrouped (``+`` and ``*``; not ``max``/``min``)."""
from __future__ import annotations

import numpy as np
import pytest

import polytile
from polytile.scheduling.core import SIMD_REDUCTION_DTYPES
from helpers_inputs import small_int_inputs

CASES = {
    # program, dims (odd sizes: lanes split unevenly, a remainder loop runs)
    "matvec": ("examples/matvec.tile", "M=7,N=1031"),
    "row_sum": ("examples/row_sum.tile", "M=5,N=333"),
    "dot": ("examples/dot.tile", "L=4099"),
    "frobenius": ("examples/frobenius.tile", "M=13,N=77"),
}


@pytest.mark.parametrize("target", ["openmp", "llvm"])
@pytest.mark.parametrize("dtype", SIMD_REDUCTION_DTYPES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_lane_sums_match_the_oracle(name, dtype, target):
    program, dims = CASES[name]
    ins = small_int_inputs(program, dims, dtype)
    got = polytile.compile(program, target=target)(*ins)
    want = polytile.reference(program, *ins)
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        if np.dtype(g.dtype).kind == "f" and name == "frobenius":
            np.testing.assert_allclose(g, w, rtol=1e-6)  # its Norm is a square root
        else:
            np.testing.assert_array_equal(g, w)  # small integers: every regrouping is exact


def test_float_sums_stay_within_the_stated_tolerance():
    rng = np.random.default_rng(1)
    A = rng.standard_normal((9, 4099)).astype(np.float32)
    X = rng.standard_normal(4099).astype(np.float32)
    truth = A.astype(np.float64) @ X.astype(np.float64)
    for target in ("openmp", "llvm"):
        got = polytile.compile("examples/matvec.tile", target=target)(A, X)
        np.testing.assert_allclose(got, truth, rtol=1e-4, atol=1e-4 * np.abs(truth).max())


def test_the_c_target_sums_in_lanes_only_where_tile_allows_it():
    text = polytile.compile("examples/matvec.tile").source(shapes=[(64, 64), (64,)])
    assert "#pragma omp simd reduction(+:pt_acc0)" in text and "Y[i] += pt_acc0;" in text
    # A max combines its lanes with the NaN-propagating helper of the serial code (a declared reduction).
    text = polytile.compile("examples/row_max.tile").source(shapes=[(8, 64)])
    assert "#pragma omp simd reduction(pt_rmax_float32:pt_acc0)" in text
    assert "O[i] = pt_max_float32(O[i], pt_acc0);" in text and "pt_acc0 = ((float)-INFINITY);" in text
    # A narrow type keeps its order (conversions at every step).
    assert "omp simd" not in polytile.compile("examples/row_sum.tile").source(shapes=[(8, 64)], dtypes=["int8"])


def test_the_llvm_target_lets_llvm_reassociate_only_those_sums():
    text = polytile.compile("examples/matvec.tile", target="llvm").source(shapes=[(64, 64), (64,)])
    assert "fadd reassoc contract" in text or "fadd contract reassoc" in text
    text = polytile.compile("examples/row_max.tile", target="llvm").source(shapes=[(8, 64)])
    assert "reassoc" not in text and '@"llvm.maximum.f32"' in text


@pytest.mark.parametrize("target", ["openmp", "llvm"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "uint32"])
@pytest.mark.parametrize("program", ["row_max", "masked_max"])
def test_max_and_min_in_lanes_keep_every_nan_and_extreme(program, dtype, target):
    """max/min into one cell run in lanes (issue 14: row max 4096^2 took 6.9 ms, numpy 2.3): a NaN in
    any lane wins as in the serial code and numpy's maximum; rows of only the identity, rows whose
    extreme is the last or the first element, odd lengths.  Exact against the oracle."""
    path = f"examples/{program}.tile"
    M, N = 9, 37
    rng = np.random.default_rng(5)
    X = rng.integers(-50, 50, (M, N)).astype(dtype)
    X[1, -1] = X[1].max() + 7 if dtype != "uint32" else 99
    X[2, 0] = X[2].max() + 3 if dtype != "uint32" else 98
    if dtype.startswith("float"):
        X[3, :] = -np.inf
        X[4, 5] = np.nan
        X[5, -1] = np.nan
        X[6, :] = np.nan
    arrays = [X] if program == "row_max" else [X, rng.integers(0, 2, (M, N)).astype(dtype), np.array(1, dtype)]
    k = polytile.compile(path, target=target)
    got, want = k(*arrays), polytile.reference(path, *arrays)
    np.testing.assert_array_equal(got, want)
    if program == "row_max":
        np.testing.assert_array_equal(got, X.max(axis=1))
    if target == "openmp":
        assert "omp simd reduction(" in k.source(*arrays)


@pytest.mark.parametrize("src", ["function (A[N]) -> (T) { T[] = >(A[i]); }",
                                 "function (A[N, N]) -> (T) { T[i : N] = <(A[i, j]); }"])
def test_float16_max_and_min_compile_and_match(src):
    """A float16 max/min starts from +-inf and combines through the float32 helpers (float16 has none of
    its own): it stopped at an OverflowError printing inf as an integer, then at a missing pt_max_float16."""
    A = np.array([[1, 2.5, -3], [np.nan, 1, 2], [-np.inf, -np.inf, -np.inf]], np.float16)
    if "N, N" not in src:
        A = np.array([1, 2.5, -3, 7.125, -0.5], np.float16)
    got = polytile.compile(src)(A)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, polytile.reference(src, A))


JAM = {
    "matvec": ("examples/matvec.tile", "M={m},N=37"),
    "row_sum": ("examples/row_sum.tile", "M={m},N=19"),
    "row_max": ("examples/row_max.tile", "M={m},N=33"),
}


@pytest.mark.parametrize("target", ["openmp", "llvm"])
@pytest.mark.parametrize("dtype", SIMD_REDUCTION_DTYPES)
@pytest.mark.parametrize("rows", [8, 9, 23, 3001])
@pytest.mark.parametrize("name", sorted(JAM))
def test_rows_summed_side_by_side_match_the_oracle(name, rows, dtype, target):
    """Eight rows' sums in one SIMD loop (c_accumulate.jam_rows; a matvec of 3001 rows in parallel, by
    thread chunks), with the rows left after the last eight run as before.  Exact on small integers."""
    program, dims = JAM[name]
    ins = small_int_inputs(program, dims.format(m=rows), dtype)
    k = polytile.compile(program, target=target)
    np.testing.assert_array_equal(k(*ins), polytile.reference(program, *ins))
    if target == "openmp" and name == "matvec" and rows == 3001:
        assert "pt_lo) + ((pt_hi) - (pt_lo) + 1) / 8 * 8" in k.source(*ins)


@pytest.mark.parametrize("target", ["openmp", "llvm"])
def test_jammed_float_max_keeps_a_nan_in_any_row(target):
    rng = np.random.default_rng(3)
    X = rng.standard_normal((19, 45)).astype(np.float32)
    X[2, 7] = X[9, 0] = X[17, -1] = np.nan
    X[5, :] = -np.inf
    got = polytile.compile("examples/row_max.tile", target=target)(X)
    np.testing.assert_array_equal(got, X.max(axis=1))


def test_the_c_target_sums_eight_rows_in_one_simd_loop():
    text = polytile.compile("examples/matvec.tile").source(shapes=[(70, 412), (412,)])
    pragma = next(line for line in text.splitlines() if "omp simd" in line)
    assert all(f"reduction(+:pt_acc{r})" in pragma for r in range(8))
    assert "const long pt_j0 = (0) + ((69) - (0) + 1) / 8 * 8;" in text  # the rows left (6) run one by one
    # In parallel, each thread's chunk of rows.
    text = polytile.compile("examples/matvec.tile").source(shapes=[(4096, 1024), (1024,)])
    assert "pt_lo) + ((pt_hi) - (pt_lo) + 1) / 8 * 8" in text and "omp parallel for" in text
    # Fewer than eight rows, or rows that all sum into one cell: as before.
    assert "pt_acc1" not in polytile.compile("examples/matvec.tile").source(shapes=[(7, 412), (412,)])
    assert "pt_j" not in polytile.compile("examples/dot.tile").source(shapes=[(4099,), (4099,)])


def test_the_llvm_target_sums_eight_rows_in_one_loop():
    text = polytile.compile("examples/matvec.tile", target="llvm").source(shapes=[(70, 412), (412,)])
    assert "jam.k.body" in text
    assert "jam.k" not in polytile.compile("examples/matvec.tile", target="llvm").source(shapes=[(7, 412), (412,)])
