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
    # A max keeps its order (NaN-aware combining); so does a narrow type (conversions at every step).
    assert "omp simd" not in polytile.compile("examples/row_max.tile").source(shapes=[(8, 64)])
    assert "omp simd" not in polytile.compile("examples/row_sum.tile").source(shapes=[(8, 64)], dtypes=["int8"])


def test_the_llvm_target_lets_llvm_reassociate_only_those_sums():
    text = polytile.compile("examples/matvec.tile", target="llvm").source(shapes=[(64, 64), (64,)])
    assert "fadd reassoc contract" in text or "fadd contract reassoc" in text
    text = polytile.compile("examples/row_max.tile", target="llvm").source(shapes=[(8, 64)])
    assert "reassoc" not in text
