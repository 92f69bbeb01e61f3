"""Selects in generated C: gcc 12 miscompiles `c ? A[i] : X[i]` at -O3 over short inner loops.

Found by the PlaidML conformance suite (Keras' elu, ``R = X < 0 ? exp(X) - 1 : X`` on a
2x2x2x3 tensor): gcc 12.2 at ``-O3 -march=native`` (also ``-O3 -mavx2``) if-converts the
branch into masked loads and returns 0 for lanes that should read ``A``.  The code generator
now renders selects (and max, min, abs, relu) through small inline functions whose operands
are always evaluated, so no masked load is needed; these tests pin the wrong results down.
"""
from __future__ import annotations

import numpy as np
import pytest

import polytile

SHAPES = [(2, 2, 2, 3), (4, 3), (3,), (5, 1, 3), (2, 7)]


@pytest.mark.parametrize("shape", SHAPES)
def test_select_of_a_temporary_is_right_at_default_flags(shape):
    src = "function (X) -> (R, M, N, B, Q) { A = X * 2.0 - 1.0; R = X < 0 ? A : X; " \
          "M = max(X, A); N = min(A, X); B = abs(A); Q = relu(A); }"
    rng = np.random.default_rng(len(shape) * 10 + shape[-1])
    X = rng.integers(-4, 5, size=shape).astype(np.float32) / 2  # exact in float32
    got = polytile.compile(src)(X)
    A = X * 2 - 1
    want = (np.where(X < 0, A, X), np.where(X < A, A, X), np.where(A < X, A, X), np.abs(A), np.where(A < 0, 0, A))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w.astype(np.float32))


def test_elu_as_keras_writes_it():
    src = "function (X) -> (R) { A = exp(X) - 1; R = (X < 0 ? A : X); }"
    X = np.random.default_rng(0).standard_normal((2, 2, 2, 3)).astype(np.float32)
    R = polytile.compile(src)(X)
    np.testing.assert_allclose(R, np.where(X < 0, np.expm1(X), X), rtol=1e-6, atol=1e-7)
    assert (R[X < 0] < 0).all()


def test_selects_are_rendered_as_helper_calls():
    k = polytile.compile("function (X[N], Y[N]) -> (R) { R = X < Y ? X : Y * 2.0; }")
    text = k.source(np.ones(4, np.float32), np.ones(4, np.float32))
    assert "pt_sel_float32(" in text and " ? " not in text.split("int pt_kernel")[1]
