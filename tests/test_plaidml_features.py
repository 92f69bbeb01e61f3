"""The Tile features PlaidML 0.7.0's op library uses, each against numpy written independently here.

Dimension statements with max/min, assertions, size inputs, Python-number constants, reshape,
gather, shape, bitwise operators, unsigned and bool dtypes, integer division, and PlaidML's
promotion rule -- through the oracle and the compiled kernel, with hypothesis over shapes,
dtypes and values.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polytile
from polytile import dtypes as D
from polytile.errors import ShapeError, TileSemanticError

SETTINGS = dict(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
INT_TYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


def both(src, *args):
    """(compiled, reference) outputs as tuples."""
    got = polytile.compile(src)(*args)
    ref = polytile.reference(src, *args)
    as_t = lambda x: x if isinstance(x, tuple) else (x,)  # noqa: E731
    return as_t(got), as_t(ref)


def same(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    np.testing.assert_array_equal(a, b)


# -- the promotion rule ---------------------------------------------------------------

@pytest.mark.parametrize("a, b, want", [
    ("int8", "int32", "int32"), ("int32", "int8", "int32"), ("uint8", "int8", "uint8"), ("int8", "uint8", "int8"),
    ("int64", "float32", "float32"), ("float32", "int64", "float32"), ("float32", "float64", "float64"),
    ("bool", "int8", "bool"), ("int8", "bool", "int8"), ("bool", "int16", "int16"), ("uint32", "int64", "int64"),
])
def test_promotion_table(a, b, want):
    assert D.promote([a, b]) == want
    src = "function (A[N], B[N]) -> (C) { C = A + B; }"
    A, B = np.ones(3, a), np.ones(3, b)
    got, ref = both(src, A, B)
    assert got[0].dtype == ref[0].dtype == np.dtype(want)


@given(st.sampled_from(INT_TYPES), st.sampled_from(["+", "-", "*", "/", "&", "|", "^", "<<", ">>"]),
       st.integers(1, 7), st.integers(0, 2 ** 32 - 1))
@settings(**SETTINGS)
def test_integer_operators_match_c_semantics(dtype, op, n, seed):
    rng = np.random.default_rng(seed)
    info = np.iinfo(dtype)
    A = rng.integers(info.min, info.max, size=n, dtype=dtype, endpoint=True)
    B = rng.integers(info.min, info.max, size=n, dtype=dtype, endpoint=True)
    if op in ("<<", ">>"):
        B = rng.integers(0, 80, size=n).astype(dtype)
    src = f"function (A[N], B[N]) -> (C) {{ C = A {op} B; }}"
    got, ref = both(src, A, B)
    same(got[0], ref[0])
    # An independent model: Python integers, wrapped to the width as C's conversions do.
    bits = info.bits
    def wrap(v):
        v &= (1 << bits) - 1
        return v - (1 << bits) if info.min < 0 and v >= 1 << (bits - 1) else v
    want = []
    for x, y in zip(A.tolist(), B.tolist()):
        if op == "/":
            r = 0 if y == 0 else (abs(x) // abs(y)) * (1 if (x < 0) == (y < 0) else -1)
        elif op == "<<":
            r = x << (y % bits)
        elif op == ">>":
            r = x >> (y % bits)
        else:
            r = {"+": x + y, "-": x - y, "*": x * y, "&": x & y, "|": x | y, "^": x ^ y}[op]
        want.append(wrap(r))
    np.testing.assert_array_equal(ref[0], np.array(want, dtype=dtype))


def test_literals_and_dimensions_are_int32_and_float32():
    X8 = np.arange(-3, 3, dtype=np.int8)
    F64 = np.linspace(-1, 1, 6)
    got, ref = both("function (X[N], F[N]) -> (A, B, C, E) { A = X + 1; B = F * 0.5; C = X * 0.5; E = X + N; }",
                    X8, F64)
    assert [g.dtype.name for g in got] == ["int32", "float64", "float32", "int32"]
    for g, r in zip(got, ref):
        same(g, r)


def test_integer_division_truncates_and_is_integer():
    X = np.array([-7, 7, -8, 0, 5], np.int32)
    got, ref = both("function (X[N], S[N]) -> (M) { T[] = +(X[i]); M = X / 2; }", X, X)
    same(got[0], ref[0])
    np.testing.assert_array_equal(got[0], [-3, 3, -4, 0, 2])


def test_python_numbers_are_plaidml_constants():
    L = np.array([4, -5, 3], np.int32)
    got, ref = both("function (L, R) -> (O) { O = L * R; }", L, 1.5)
    same(got[0], ref[0])
    np.testing.assert_array_equal(got[0], np.array([6, -7, 4], np.int32))  # int32, computed in double


# -- dimension statements, assertions, size inputs ---------------------------------------

def test_same_padding_dimension_statement():
    src = """function (I[N, L0, C], F[K, C, CO]) -> (O) {
      Pad0 = max(0, ((L0 + 2 - 1) / 2 - 1) * 2 + K - L0) / 2;
      O[n, x, co : N, (L0 + 2 - 1) / 2, CO] = +(I[n, 2*x + k - Pad0, c] * F[k, c, co]);
    }"""
    rng = np.random.default_rng(1)
    I = rng.integers(-3, 4, (1, 7, 2)).astype(np.float32)
    F = rng.integers(-3, 4, (3, 2, 2)).astype(np.float32)
    got, ref = both(src, I, F)
    same(got[0], ref[0])
    pad = np.pad(I, ((0, 0), (1, 1), (0, 0)))
    want = np.stack([np.einsum("kc,kcd->d", pad[0, 2 * x:2 * x + 3], F) for x in range(4)])[None]
    np.testing.assert_array_equal(got[0], want)


def test_error_in_a_dimension_statement_points_at_it():
    src = "function (I[N], T[N]) -> (O) {\n  P = max(0, T - 1);\n  O[i : N] = +(I[i + P]);\n}"
    with pytest.raises(TileSemanticError) as e:
        polytile.compile(src)
    assert e.value.loc.line == 2 and "'T'" in e.value.message


def test_false_assertion_is_a_located_error():
    src = "function (I[G, C]) -> (O) {\n  A = assert_group_count(C == 2 * G);\n  O = I;\n}"
    polytile.reference(src, np.ones((2, 4)))
    with pytest.raises(ShapeError) as e:
        polytile.reference(src, np.ones((2, 3)))
    assert e.value.loc.line == 2 and "assert_group_count" in e.value.message and "C = 3" in e.value.message


@given(st.integers(0, 6), st.integers(1, 5))
@settings(**SETTINGS)
def test_size_inputs_bind_dimensions(d0, n):
    src = "function (X[N], D0) -> (O) { O[i, j : D0, N] = =(X[j]); }"
    X = np.arange(n, dtype=np.int32)
    got, ref = both(src, X, d0)
    same(got[0], ref[0])
    np.testing.assert_array_equal(got[0], np.tile(X, (d0, 1)))


# -- statement-level builtins -------------------------------------------------------------

@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.data())
@settings(**SETTINGS)
def test_reshape_is_row_major(shape, data):
    X = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    n = X.size
    divisors = [d for d in range(1, n + 1) if n % d == 0]
    a = data.draw(st.sampled_from(divisors))
    src = f"function (X) -> (O, P) {{ O = reshape(X, {a}, {n // a}); P = reshape(O, {n}) + 1; }}"
    got, ref = both(src, X)
    for g, r in zip(got, ref):
        same(g, r)
    np.testing.assert_array_equal(got[0], X.reshape(a, n // a))
    np.testing.assert_array_equal(got[1], X.reshape(-1) + 1)


@given(st.integers(1, 6), st.integers(1, 3), st.lists(st.integers(-2, 8), min_size=1, max_size=5))
@settings(**SETTINGS)
def test_gather_picks_rows_and_clamps(rows, cols, idx):
    V = np.arange(rows * cols, dtype=np.float32).reshape(rows, cols)
    I = np.array(idx, np.int32)
    got, ref = both("function (V, I) -> (O) { O = gather(V, I); }", V, I)
    same(got[0], ref[0])
    np.testing.assert_array_equal(got[0], V[np.clip(I, 0, rows - 1)])


def test_gather_reads_are_dependences_of_the_whole_source():
    # T is written, then gathered from, then overwritten into O: the gather must see T.
    src = "function (V[N], I[M]) -> (O) { T = V * 2; G = gather(T, I); O = G + 1; }"
    V = np.arange(5, dtype=np.int32)
    I = np.array([4, 0, 2], np.int32)
    for fusion in (None, "smart", "max"):
        k = polytile.compile(src, fusion=fusion) if fusion else polytile.compile(src)
        np.testing.assert_array_equal(k(V, I), V[I] * 2 + 1)


def test_shape_and_unsigned_bool_inputs():
    X = np.zeros((2, 3, 5), np.uint16)
    B = np.array([True, False, True])
    got, ref = both("function (X, B[N]) -> (S, C) { S = shape(X); C = B == 0; }", X, B)
    same(got[0], ref[0])
    np.testing.assert_array_equal(got[0], np.array([2, 3, 5], np.int32))
    same(got[1], ref[1])
    np.testing.assert_array_equal(got[1], ~B)


def test_a_comparisons_bool_output_feeds_back_in():
    k = polytile.compile("function (X[N]) -> (C) { C = X > 0; }")
    C = k(np.array([-1.0, 2.0], np.float32))
    k2 = polytile.compile("function (C[N], X[N]) -> (Y) { Y = C ? X : 0.0; }")
    np.testing.assert_array_equal(k2(C, np.array([5.0, 6.0], np.float32)), [0.0, 6.0])


@pytest.mark.parametrize("src_dtype, dst, values, want", [
    ("float32", "as_uint(X, 8)", [-3.0, 300.5, 2.9], [253, 44, 2]),
    ("float32", "as_int(X, 8)", [200.0, -1.5], [-56, -1]),
    ("int32", "as_bool(X, 1)", [2, -5, 4, 1], [False, True, False, True]),
    ("float32", "as_bool(X, 1)", [0.5, -1.5, 4.7], [False, True, True]),
])
def test_casts_convert_as_plaidml(src_dtype, dst, values, want):
    X = np.array(values, src_dtype)
    got, ref = both(f"function (X[N]) -> (O) {{ O = {dst}; }}", X)
    same(got[0], ref[0])
    np.testing.assert_array_equal(got[0], np.array(want, dtype=got[0].dtype))


def test_builtin_softmax_and_crossentropy():
    X = np.random.default_rng(3).standard_normal((3, 4)).astype(np.float32)
    got, ref = both("function (X[R, C]) -> (S, L, B) { S = builtin_softmax(X, R, C); "
                    "L = builtin_logsoftmax(X, R, C); B = builtin_binary_crossentropy(S, S, 0.001); }", X)
    e = np.exp(X - X.max(1, keepdims=True))
    np.testing.assert_allclose(got[0], e / e.sum(1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(got[1], np.log(e / e.sum(1, keepdims=True)), rtol=1e-5, atol=1e-6)
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6)


CUDA_CASES = [
    ("function (X[N], Y[N]) -> (A) { A = (X / Y) ^ (X << 2); }",
     lambda: (np.array([7, -9, 4], np.int32), np.array([2, 2, 0], np.int32))),
    ("function (V, I) -> (O) { O = gather(V, I); }",
     lambda: (np.arange(12, dtype=np.float32).reshape(4, 3), np.array([3, 0, 9], np.int32))),
    ("function (X) -> (O) { O = reshape(X, 3, 4); }", lambda: (np.arange(12, dtype=np.uint8).reshape(2, 6),)),
    ("function (X[R, C]) -> (S) { S = builtin_softmax(X, R, C); }",
     lambda: (np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4),)),
    ("function (X[N], D0) -> (O) { O[i, j : D0, N] = =(X[j]); }", lambda: (np.arange(4, dtype=np.int32), 3)),
    ("function (L, R) -> (O) { O = L * R; }", lambda: (np.array([4, -5], np.int32), 1.5)),
    ("function (S) -> (V, N) { T = prng_step(S, 5, 7); N = prng_state(T); V = prng_value(T); }",
     lambda: (np.arange(1, 6145, dtype=np.uint32).reshape(3, 2048) * np.uint32(2654435761),)),
]


@pytest.mark.parametrize("src, make", CUDA_CASES, ids=[c[0][:40] for c in CUDA_CASES])
def test_cuda_emulation_agrees_with_the_oracle(src, make):
    args = make()
    got = polytile.compile(src, target="cuda-emulate")(*args)
    ref = polytile.reference(src, *args)
    got, ref = (got if isinstance(got, tuple) else (got,)), (ref if isinstance(ref, tuple) else (ref,))
    for g, r in zip(got, ref):
        assert g.dtype == r.dtype and g.shape == r.shape
        np.testing.assert_allclose(g.astype(np.float64), r.astype(np.float64), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_round_is_c_round_exactly(dtype):
    """PlaidML's round() is C's round(): half away from zero.  It was floor(x + 0.5) (on the oracle
    too, so no differential test could see it): 0.49999997f + 0.5f rounds to 1, and past 2^23 the
    sum rounds to an even neighbour (round(8388609) gave 8388610).  Expected values come from exact
    rational arithmetic, not from the implementation."""
    import math
    from fractions import Fraction

    f = np.dtype(dtype).type
    halves = np.arange(-300, 301) / 2.0
    big = 2.0 ** (np.finfo(dtype).nmant)  # from here every float is an integer
    x = np.concatenate([halves, np.nextafter(halves.astype(dtype), f(np.inf)), np.nextafter(halves.astype(dtype), f(-np.inf)),
                        [big - 0.5, -(big - 0.5), big + 1, big * 2 + 2, 1e30, -0.3, -0.0, 0.0]]).astype(dtype)

    def exact(v):
        q = Fraction(float(v))
        r = math.floor(abs(q) + Fraction(1, 2))
        return math.copysign(float(r), float(v))

    want = np.array([exact(v) for v in x], dtype)
    src = "function (I) -> (O) { O = round(I); }"
    for got in (polytile.reference(src, x), polytile.compile(src)(x), polytile.compile(src, target="llvm")(x)):
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))  # round(-0.3) is -0.0
    special = np.array([np.inf, -np.inf, np.nan], dtype)
    for got in (polytile.reference(src, special), polytile.compile(src)(special)):
        np.testing.assert_array_equal(got, special)
