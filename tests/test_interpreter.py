"""The reference interpreter (polytile.reference) against hand-written numpy."""
from __future__ import annotations

import itertools
import subprocess
import sys
import time

import numpy as np
import pytest
from hypothesis import event, given, note, settings
from hypothesis import strategies as st

from polytile import interpreter as reference
from polytile import ir, sema
from polytile.errors import CollisionError, ShapeError, TileSemanticError
from polytile.frontends.tile import parse

RNG = np.random.default_rng(1234)


def ints(*shape, lo=-4, hi=5, dtype=np.float64):
    """Integer-valued data: sums and products stay exact in floating point."""
    return RNG.integers(lo, hi, size=shape).astype(dtype)


def run(src, *arrays, **named):
    return reference.run(parse(src), *arrays, **named)


# ---------------------------------------------------------------------------
# Hand-written numpy equivalents
# ---------------------------------------------------------------------------


def np_conv2d_valid(I, F):
    N, H, W, CI = I.shape
    KH, KW, _, CO = F.shape
    out = np.zeros((N, H - KH + 1, W - KW + 1, CO), dtype=np.result_type(I, F))
    for ky in range(KH):
        for kx in range(KW):
            out += np.einsum("nhwc,cd->nhwd", I[:, ky:ky + H - KH + 1, kx:kx + W - KW + 1, :], F[ky, kx])
    return out


def np_same3x3(I, F):
    P = np.pad(I, 1)
    H, W = I.shape
    out = np.zeros((H, W), dtype=np.result_type(I, F))
    for ky in range(3):
        for kx in range(3):
            out += P[ky:ky + H, kx:kx + W] * F[ky, kx]
    return out


def np_strided(I, F):
    H, W = I.shape
    KH, KW = F.shape
    HO, WO = (H - KH) // 2 + 1, (W - KW) // 2 + 1
    out = np.zeros((HO, WO), dtype=np.result_type(I, F))
    for y in range(HO):
        for x in range(WO):
            out[y, x] = (I[2 * y:2 * y + KH, 2 * x:2 * x + KW] * F).sum()
    return out


def np_pool(I, reduce):
    N, H, W, C = I.shape
    v = I[:, :H // 2 * 2, :W // 2 * 2, :].reshape(N, H // 2, 2, W // 2, 2, C)
    return reduce(v, axis=(2, 4))


def np_conv1d(I, F):
    N, L, CI = I.shape
    K, _, CO = F.shape
    out = np.zeros((N, L - K + 1, CO), dtype=np.result_type(I, F))
    for k in range(K):
        out += I[:, k:k + L - K + 1, :] @ F[k]
    return out


def np_softmax(X):
    E = np.exp(X - X.max(axis=1, keepdims=True))
    return E / E.sum(axis=1, keepdims=True)


def np_onehot(L, Z):
    return (L[:, None] == np.arange(Z.shape[0])[None, :]).astype(np.result_type(L, np.int64))


def np_embedding(L, T):
    out = np.zeros((L.shape[0], T.shape[1]), T.dtype)
    for n, label in enumerate(L):
        if 0 <= label < T.shape[0]:
            out[n] = T[int(label)]
    return out


def np_slice_update(Base, P):
    O = Base.copy()
    M, N = Base.shape
    R, C = P.shape
    r, c = min(R, M - 1), min(C, N - 1)
    O[1:1 + r, 1:1 + c] = P[:r, :c]
    return O


def np_cumsum(I):
    return np.cumsum(I)


def np_diag_sum(I):
    # O[p] = sum over i + j = p, i - j = m of I[m], for i, j integers: parity of p and m agree.
    N = I.shape[0]
    out = np.zeros(N, I.dtype)
    for p in range(N):
        out[p] = sum(I[m] for m in range(N) if (p + m) % 2 == 0)
    return out


# (id, source, inputs, numpy function, exact)
PROGRAMS = [
    ("matmul", "function (A[M, K], B[K, N]) -> (C) { C[i, j : M, N] = +(A[i, k] * B[k, j]); }",
     lambda: (ints(5, 7), ints(7, 3)), lambda A, B: A @ B, True),
    ("batched_matmul", "function (X[B, M, K], Y[B, K, N]) -> (Z) { Z[b, i, j : B, M, N] = +(X[b, i, k] * Y[b, k, j]); }",
     lambda: (ints(3, 4, 5), ints(3, 5, 2)), np.matmul, True),
    ("matvec", "function (A[M, N], X[N]) -> (Y) { Y[i : M] = +(A[i, j] * X[j]); }",
     lambda: (ints(6, 4), ints(4)), lambda A, X: A @ X, True),
    ("dot", "function (X[L], Y[L]) -> (R) { R[] = +(X[i] * Y[i]); }",
     lambda: (ints(9), ints(9)), lambda X, Y: np.asarray(X @ Y), True),
    ("outer", "function (X[M], Y[N]) -> (O) { O[i, j : M, N] = =(X[i] * Y[j]); }",
     lambda: (ints(4), ints(6)), np.outer, True),
    ("transpose", "function (I[M, N]) -> (O) { O[j, i : N, M] = =(I[i, j]); }",
     lambda: (ints(3, 5),), lambda I: I.T, True),
    ("row_sum", "function (I[M, N]) -> (O) { O[i : M] = +(I[i, j]); }",
     lambda: (ints(4, 7),), lambda I: I.sum(axis=1), True),
    ("row_max", "function (I[M, N]) -> (O) { O[i : M] = >(I[i, j]); }",
     lambda: (ints(4, 7),), lambda I: I.max(axis=1), True),
    ("col_min", "function (I[M, N]) -> (O) { O[j : N] = <(I[i, j]); }",
     lambda: (ints(4, 7),), lambda I: I.min(axis=0), True),
    ("row_prod", "function (I[M, N]) -> (O) { O[i : M] = *(I[i, j]); }",
     lambda: (ints(4, 3, lo=1, hi=4),), lambda I: I.prod(axis=1), True),
    ("mean", "function (X[M, N]) -> (Mean) { S[i : M] = +(X[i, j]); Mean = S / N; }",
     lambda: (ints(5, 8),), lambda X: X.mean(axis=1), False),
    ("softmax", """function (X[M, N]) -> (Y) {
        Mx[i, 0 : M, 1] = >(X[i, j]);
        E = exp(X - Mx);
        S[i, 0 : M, 1] = +(E[i, j]);
        Y = E / S;
     }""", lambda: (RNG.standard_normal((4, 6)),), np_softmax, False),
    ("conv1d", "function (I[N, L, CI], F[K, CI, CO]) -> (O) "
               "{ O[n, x, co : N, L - K + 1, CO] = +(I[n, x + k, ci] * F[k, ci, co]); }",
     lambda: (ints(2, 9, 3), ints(3, 3, 4)), np_conv1d, True),
    ("conv2d_valid", """function (I[N, H, W, CI], F[KH, KW, CI, CO]) -> (O) {
        O[n, y, x, co : N, H - KH + 1, W - KW + 1, CO] = +(I[n, y + ky, x + kx, ci] * F[ky, kx, ci, co]);
     }""", lambda: (ints(2, 7, 6, 3), ints(3, 2, 3, 4)), np_conv2d_valid, True),
    ("conv2d_same", "function (I[H, W], F[3, 3]) -> (O) { O[y, x : H, W] = +(I[y + ky - 1, x + kx - 1] * F[ky, kx]); }",
     lambda: (ints(6, 5), ints(3, 3)), np_same3x3, True),
    ("conv2d_strided", """function (I[H, W], F[KH, KW]) -> (O) {
        HO = (H - KH) / 2 + 1;
        WO = (W - KW) / 2 + 1;
        O[y, x : HO, WO] = +(I[2*y + ky, 2*x + kx] * F[ky, kx]);
     }""", lambda: (ints(9, 8), ints(3, 2)), np_strided, True),
    ("maxpool", """function (I[N, H, W, C]) -> (O) {
        O[n, y, x, c : N, H / 2, W / 2, C] = >(I[n, 2*y + i, 2*x + j, c]), i < 2, j < 2;
     }""", lambda: (ints(2, 7, 6, 3),), lambda I: np_pool(I, np.max), True),
    ("avgpool", """function (I[N, H, W, C]) -> (O) {
        HO = H / 2;
        WO = W / 2;
        S[n, y, x, c : N, HO, WO, C] = +(I[n, 2*y + i, 2*x + j, c]), i < 2, j < 2;
        O = S / 4;
     }""", lambda: (ints(1, 6, 5, 2),), lambda I: np_pool(I, np.mean), False),
    ("cumsum", "function (I[N]) -> (O) { O[i : N] = +(I[k]), i - k < N; }",
     lambda: (ints(17),), np_cumsum, True),
    ("onehot_eq", "function (L[N], Z[K]) -> (O) { Ids = index(Z, 0); O[n, c : N, K] = =(L[n] == Ids[c]); }",
     lambda: (RNG.integers(-1, 6, size=11), np.zeros(5)), np_onehot, True),
    ("embedding_ternary", """function (L[N], T[V, D]) -> (O) {
        Z[v : V] = =(T[v, 0]);
        Ids = index(Z, 0);
        O[n, d : N, D] = +(L[n] == Ids[v] ? T[v, d]);
     }""", lambda: (RNG.integers(0, 5, size=7), ints(4, 3)), np_embedding, True),
    ("default_tensor", "function (Base[M, N], P[R, C]) -> (O) { O[i + 1, j + 1 : M, N] = =(P[i, j]) default Base; }",
     lambda: (ints(5, 6), ints(3, 8)), np_slice_update, True),
    ("div_index_even", "function (I[N]) -> (O) { O[i / 2 : N] = +(I[i]); }",
     lambda: (ints(7),), lambda I: np.concatenate([I[0::2], np.zeros(7 - len(I[0::2]))]), True),
    ("empty_domain", "function (I[N]) -> (O) { O[i : N] = +(I[i + N]); }",
     lambda: (ints(5),), lambda I: np.zeros(5), True),
    ("fourier_motzkin", "function (I[N]) -> (O) { O[i + j : N] = +(I[i - j]); }",
     lambda: (ints(6),), np_diag_sum, True),
    ("min_plus", "function (A[M, K], B[K, N]) -> (C) { C[i, j : M, N] = <(A[i, k] + B[k, j]); }",
     lambda: (ints(3, 4), ints(4, 5)), lambda A, B: (A[:, :, None] + B[None]).min(axis=1), True),
    ("elementwise", "function (X[M, N], Y[N]) -> (O) { O = X > 0 ? relu(X) * Y : sigmoid(X) + pow(Y, 2) / N; }",
     lambda: (RNG.standard_normal((3, 4)), RNG.standard_normal(4)),
     lambda X, Y: np.where(X > 0, np.maximum(X, 0) * Y, 1 / (1 + np.exp(-X)) + Y ** 2 / 4), False),
]


@pytest.mark.parametrize("name, src, make, want, exact", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_reference_matches_numpy(name, src, make, want, exact):
    arrays = make()
    got = run(src, *[a.copy() for a in arrays])
    expect = np.asarray(want(*[a.copy() for a in arrays]))
    assert got.shape == expect.shape
    if exact:
        np.testing.assert_array_equal(got, expect)
    else:
        np.testing.assert_allclose(got, expect, rtol=1e-12, atol=1e-12)


def test_enough_programs():
    assert len(PROGRAMS) >= 15


# ---------------------------------------------------------------------------
# Integer dtypes: exact, and typed as sema says
# ---------------------------------------------------------------------------


def test_integer_matmul_exact_int32():
    A = RNG.integers(-100, 100, size=(8, 9)).astype(np.int32)
    B = RNG.integers(-100, 100, size=(9, 5)).astype(np.int32)
    C = run("function (A[M, K], B[K, N]) -> (C) { C[i, j : M, N] = +(A[i, k] * B[k, j]); }", A, B)
    assert C.dtype == np.int32
    np.testing.assert_array_equal(C, A @ B)


def test_integer_conv_exact_int64_and_mixed_promotion():
    I = RNG.integers(-50, 50, size=(1, 6, 6, 2)).astype(np.int64)
    F = RNG.integers(-50, 50, size=(3, 3, 2, 2)).astype(np.int32)
    src = """function (I[N, H, W, CI], F[KH, KW, CI, CO]) -> (O) {
        O[n, y, x, co : N, H - KH + 1, W - KW + 1, CO] = +(I[n, y + ky, x + kx, ci] * F[ky, kx, ci, co]); }"""
    O = run(src, I, F)
    assert O.dtype == np.int64
    np.testing.assert_array_equal(O, np_conv2d_valid(I, F.astype(np.int64)))


def test_int32_times_float32_contraction_is_float32():
    # PlaidML: the float operand's type wins over any integer (not numpy's float64).
    A = ints(3, 4, dtype=np.int32)
    B = ints(4, 2, dtype=np.float32)
    C = run("function (A[M, K], B[K, N]) -> (C) { C[i, j : M, N] = +(A[i, k] * B[k, j]); }", A, B)
    assert C.dtype == np.float32
    np.testing.assert_array_equal(C, A.astype(np.float32) @ B)


def test_max_identity_for_integers_where_no_point_matches():
    # Masked max: rows with no match stay at the identity only if reached; the ternary reaches every cell.
    X = RNG.integers(-9, 9, size=(3, 4)).astype(np.int32)
    Key = np.array([[1, 0, 1, 0], [0, 0, 0, 0], [1, 1, 1, 1]], dtype=np.int32)
    V = np.array(1, dtype=np.int32)
    O = run("function (X[M, N], Key[M, N], V[]) -> (O) { O[i : M] = >(Key[i, j] == V[] ? X[i, j]); }", X, Key, V)
    want = np.where(Key == 1, X, np.iinfo(np.int32).min).max(axis=1)
    np.testing.assert_array_equal(O, want)
    assert O.dtype == np.int32


def test_float32_inputs_give_float32():
    X = RNG.standard_normal((3, 4)).astype(np.float32)
    Y = run("function (X[M, N]) -> (Y) { S[i, 0 : M, 1] = +(X[i, j]); Y = X * 2.5 - S; }", X)
    assert Y.dtype == np.float32
    np.testing.assert_allclose(Y, X * 2.5 - X.sum(axis=1, keepdims=True), rtol=1e-5)


# ---------------------------------------------------------------------------
# Collisions, errors, domain details
# ---------------------------------------------------------------------------


def test_assign_collision_names_both_points():
    with pytest.raises(CollisionError) as info:
        run("function (I[N]) -> (O) {\n  O[i : N] = =(I[k]);\n}", ints(3))
    msg = info.value.message
    assert "O[0]" in msg and "(i=0, k=0)" in msg and "(i=0, k=1)" in msg
    assert info.value.line == 2


def test_assign_collision_across_chunks(monkeypatch):
    # Every point writes O[0]: with one point per chunk, the second chunk finds the first's write.
    monkeypatch.setattr(reference, "CHUNK", 1)
    with pytest.raises(CollisionError, match=r"\(k=0\) and \(k=1\)"):
        run("function (I[N]) -> (O) { O[0 : 1] = =(I[k]); }", ints(4))


def test_assign_without_collision_is_fine():
    # upsample: each output cell written exactly once
    I = ints(3, 4)
    O = run("function (I[H, W]) -> (O) { O[2*y + i, 2*x + j : 2*H, 2*W] = =(I[y, x]), i < 2, j < 2; }", I)
    np.testing.assert_array_equal(O, np.repeat(np.repeat(I, 2, axis=0), 2, axis=1))


def test_unbounded_index_variable_is_an_error():
    with pytest.raises(TileSemanticError, match="'j' of O has no finite range"):
        run("function (I[N]) -> (O) { O[i : N] = +(I[i + j - j]); }", ints(4))


def test_exact_division_excludes_non_divisible_points():
    # O[(i + 1) / 2] += I[i]: only odd i contribute, to O[(i + 1) / 2].
    I = np.arange(6.0)
    O = run("function (I[N]) -> (O) { O[(i + 1) / 2 : N] = +(I[i]); }", I)
    np.testing.assert_array_equal(O, [0, 1, 3, 5, 0, 0])


def test_constant_division_in_index_is_floor():
    # KH / 2 with KH = 3 is 1: a centred window.
    I, F = ints(7), ints(3)
    O = run("function (I[N], F[KH]) -> (O) { O[x : N] = +(I[x + k - KH / 2] * F[k]); }", I, F)
    np.testing.assert_array_equal(O, np.convolve(np.pad(I, 1), F[::-1], mode="valid"))


def test_zero_size_output_and_zero_size_operand():
    O = run("function (I[H], F[KH]) -> (O) { O[i : H - KH + 1] = +(I[i + k] * F[k]); }", ints(3), ints(4)[:3])
    assert O.shape == (1,)
    O = run("function (I[H], F[KH]) -> (O) { O[i : H - KH + 1] = +(I[i + k] * F[k]); }", ints(2), ints(3))
    assert O.shape == (0,)
    O = run("function (I[N], J[M]) -> (O) { O[i : N] = +(I[i] * J[j]); }", ints(3), ints(0))
    np.testing.assert_array_equal(O, np.zeros(3))


def test_product_unreached_cells_are_zero():
    # Only rows i < 2 are reached by the constraint; the others stay 0, not the identity 1.
    I = ints(4, 3, lo=1, hi=4)
    O = run("function (I[M, N]) -> (O) { O[i : M] = *(I[i, j]), i < 2; }", I)
    np.testing.assert_array_equal(O, np.concatenate([I[:2].prod(axis=1), [0, 0]]))


def test_evaluate_returns_every_tensor_and_accepts_names():
    src = "function (X[M, N], Y[N]) -> (P, Q) { S[i : M] = +(X[i, j]); P = S * 2; Q = Y + 1; }"
    X, Y = ints(2, 3), ints(3)
    res = reference.evaluate(parse(src), [X], Y=Y)
    assert list(res) == ["X", "Y", "S", "P", "Q"]
    np.testing.assert_array_equal(res["S"], X.sum(axis=1))
    P, Q = run(src, X=X, Y=Y)
    np.testing.assert_array_equal(P, 2 * X.sum(axis=1))
    np.testing.assert_array_equal(Q, Y + 1)
    with pytest.raises(ShapeError, match="missing input Y"):
        run(src, X=X)
    with pytest.raises(ShapeError, match="expected 2 inputs"):
        run(src, X, Y, Y)


def test_outputs_do_not_alias_inputs():
    X = ints(3)
    before = X.copy()
    Y = run("function (X[N]) -> (Y) { Y = X; }", X)
    Y[0] = 99
    np.testing.assert_array_equal(X, before)


@pytest.mark.parametrize("chunk", [1, 5, 64])
def test_chunking_gives_the_same_results(monkeypatch, chunk):
    src = """function (I[N, H, W, C]) -> (O, P) {
        O[n, y, x, c : N, H / 2, W / 2, C] = >(I[n, 2*y + i, 2*x + j, c]), i < 2, j < 2;
        P[y, x : H, W] = +(I[0, y + ky - 1, x + kx - 1, 0]), ky < 3, kx < 3;
     }"""
    I = ints(2, 6, 5, 2)
    want = run(src, I)
    monkeypatch.setattr(reference, "CHUNK", chunk)
    got = run(src, I)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_index_ranges():
    p = parse("function (I[N]) -> (O) { O[i + j : N] = +(I[i - j]); }")
    b = sema.bind(p, [(5,)], ["float64"])
    assert reference.index_ranges(b, p.body[0]) == {"i": (0, 4), "j": (-2, 2)}
    p = parse("function (I[N]) -> (O) { O[i : N] = +(I[i + N]); }")
    assert reference.index_ranges(sema.bind(p, [(5,)], ["float64"]), p.body[0]) is None


def test_reference_does_not_use_isl():
    code = (
        "import sys; sys.modules['islpy'] = None\n"
        "import numpy as np\n"
        "from polytile.interpreter import run\n"
        "from polytile.frontends.tile import parse\n"
        "p = parse('function (A[M, K], B[K, N]) -> (C) { C[i, j : M, N] = +(A[i, k] * B[k, j]); }')\n"
        "print(run(p, np.ones((2, 3)), np.ones((3, 2))).sum())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "12.0"


def test_matmul_256_is_fast_enough():
    A = RNG.standard_normal((256, 256)).astype(np.float32)
    B = RNG.standard_normal((256, 256)).astype(np.float32)
    t = time.perf_counter()
    C = run("function (A[M, K], B[K, N]) -> (C) { C[i, j : M, N] = +(A[i, k] * B[k, j]); }", A, B)
    assert time.perf_counter() - t < 20
    np.testing.assert_allclose(C, A @ B, rtol=1e-3, atol=1e-3)


# ---------------------------------------------------------------------------
# Against a brute-force enumeration written straight from the definition
# ---------------------------------------------------------------------------


def _brute_index(e, point, dims):
    """An index polynomial at a point; None where an exact division fails."""
    if isinstance(e, ir.Int):
        return e.value
    if isinstance(e, ir.Index):
        return point[e.name]
    if isinstance(e, ir.Ref):
        return dims[e.name]
    if isinstance(e, ir.Unary):
        v = _brute_index(e.operand, point, dims)
        return None if v is None else -v
    a, b = _brute_index(e.lhs, point, dims), _brute_index(e.rhs, point, dims)
    if a is None or b is None:
        return None
    if e.op == "+":
        return a + b
    if e.op == "-":
        return a - b
    if e.op == "*":
        return a * b
    if not ir.index_names(e.lhs):
        return a // b  # a constant numerator is floor-divided, like a size
    return a // b if a % b == 0 else None


def _brute(program, arrays, radius):
    """Enumerate every integer point in [-radius, radius]^n and apply the definition literally."""
    b = sema.bind(program, [a.shape for a in arrays], [a.dtype for a in arrays])
    st = program.body[0]
    out = b.tensors[st.output]
    env = dict(zip(program.input_names, arrays))
    ident = sema.identity(st.agg, out.dtype)
    acc = np.full(out.shape, 0 if ident is None else ident, out.dtype)
    reached = np.zeros(out.shape, bool)
    names = st.index_vars()

    def inside(exprs, shape, point):
        idx = [_brute_index(e, point, b.dims) for e in exprs]
        if any(x is None for x in idx) or any(not 0 <= x < n for x, n in zip(idx, shape)):
            return None
        return tuple(idx)

    for values in itertools.product(range(-radius, radius + 1), repeat=len(names)):
        point = dict(zip(names, values))
        cell = inside(st.indices, out.shape, point)
        reads = [inside(op.indices, env[op.tensor].shape, point) for op in st.operands]
        if cell is None or any(r is None for r in reads):
            continue
        if any(inside([c.expr], (b.size(c.bound),), point) is None for c in st.constraints):
            continue
        v = [env[op.tensor][r] for op, r in zip(st.operands, reads)]
        v = v[0] if st.combo is None else (v[0] * v[1] if st.combo == "*" else v[0] + v[1])
        if st.agg == "+":
            acc[cell] += v
        elif st.agg == ">":
            acc[cell] = max(acc[cell], v)
        else:  # '='
            if reached[cell]:
                return "collision"
            acc[cell] = v
        reached[cell] = True
    return np.where(reached, acc, 0)


BRUTE = [
    "function (I[N]) -> (O) { O[(i+j)/3 : N] = +(I[2*i - j]); }",
    "function (I[N]) -> (O) { O[i : N] = +(I[(3*i - 1)/2]), (i + 2*k)/3 < 2; }",
    "function (I[N], J[M]) -> (O) { O[i - j + 2 : 5] = +(I[i] * J[j]); }",
    "function (I[N]) -> (O) { O[-i + N - 1 : N] = =(I[i]); }",
    "function (I[N]) -> (O) { O[i/2 : N] = =(I[i]); }",
    "function (I[N], J[M]) -> (O) { O[i : N] = >(I[i - k] + J[k/2]), k - 1 < 3; }",
    "function (I[N]) -> (O) { O[i/-2 + 3 : N] = +(I[i]); }",
    "function (I[N]) -> (O) { O[i + j : N] = +(I[i - j]), 2*j + 1 < N; }",
    "function (I[N]) -> (O) { O[i : N] = +(I[i + N/4 - 1]); }",
]


@pytest.mark.parametrize("src", BRUTE)
def test_reference_matches_brute_force(src):
    program = parse(src)
    rng = np.random.default_rng(7)
    arrays = [rng.integers(-5, 6, size=(6,)).astype(np.int64) for _ in program.inputs]
    want = _brute(program, arrays, radius=12)
    try:
        got = reference.run(program, *arrays)
    except CollisionError:
        got = "collision"
    if isinstance(want, str) or isinstance(got, str):
        assert got == want
    else:
        np.testing.assert_array_equal(got, want)


def test_evaluate_rejects_a_bare_array():
    with pytest.raises(TypeError, match="sequence of arrays"):
        reference.evaluate(parse("function (X[N, M]) -> (Y) { Y = X; }"), np.ones((2, 3)))


# ---------------------------------------------------------------------------
# The einsum fast path against the enumeration (random contractions)
# ---------------------------------------------------------------------------

FAST_VARS = ("i", "j", "k", "l")
FAST_DTYPES = ("int32", "int64", "float32", "float64")  # the dtypes sema supports
# A change that takes a contraction out of the fast path's shape (None: keep it plain).
BREAKS = (None, None, None, None, "shift", "constraint", "max", "default", "bigger", "diagonal", "unread")


@st.composite
def contractions(draw):
    """(program, arrays, plain): a random ``+`` contraction of 1-2 operands, made non-plain by one BREAK."""
    names = FAST_VARS[:draw(st.integers(1, 4))]
    size = {v: draw(st.integers(0, 4)) for v in names}  # 0: empty axes as well
    ops = [draw(st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True))
           for _ in range(draw(st.integers(1, 2)))]
    read = sorted(set().union(*ops))
    out = draw(st.lists(st.sampled_from(read), max_size=3, unique=True))
    dtypes = [draw(st.sampled_from(FAST_DTYPES)) for _ in ops]
    brk = draw(st.sampled_from(BREAKS))
    seed = draw(st.integers(0, 2 ** 32 - 1))

    shapes = [[size[v] for v in op] for op in ops]
    accesses = [list(op) for op in ops]
    dim = {v: f"D{t}{a}" for t in reversed(range(len(ops))) for a, v in enumerate(ops[t])}  # a dim naming v's size
    sizes = [dim[v] for v in out]
    tail, default = "", ""
    agg = ">" if brk == "max" else "+"
    if brk == "shift":
        accesses[0][0] += " + 1"
    elif brk == "constraint":
        tail = f", {read[0]} < 2"
    elif brk == "bigger":  # a mismatch only if the other operand reads the variable (O's size is D00 itself)
        shapes[0][0] += 1
        if not any(ops[0][0] in t for t in ops[1:]):
            brk = None
    elif brk == "diagonal":
        accesses[0].append(accesses[0][0])
        shapes[0].append(shapes[0][0])
    elif brk == "unread":
        out, sizes = out + ["m"], sizes + ["2"]
    header = [f"X{t}[{', '.join(f'D{t}{a}' for a in range(len(shapes[t])))}]" for t in range(len(ops))]
    if brk == "diagonal":  # the repeated axis has its own dim name (equal size)
        header[0] = f"X0[{', '.join(f'D0{a}' for a in range(len(shapes[0]) - 1))}, E]"
    if brk == "default":
        header.append(f"Z[{', '.join(sizes)}]")
        default = " default Z"
    rhs = " * ".join(f"X{t}[{', '.join(acc)}]" for t, acc in enumerate(accesses))
    lhs = f"O[{', '.join(out)} : {', '.join(sizes)}]" if out else "O[]"
    text = f"function ({', '.join(header)}) -> (O) {{ {lhs} = {agg}({rhs}){tail}{default}; }}"

    rng = np.random.default_rng(seed)
    out_float = np.result_type(*dtypes).kind == "f"
    arrays = []
    for shp, dt in zip(shapes, dtypes):
        if out_float:  # small integers: every sum exact in any order, float32 included
            arrays.append(rng.integers(-4, 5, size=shp).astype(dt))
        else:  # the whole range: products and sums wrap around
            info = np.iinfo(dt)
            arrays.append(rng.integers(info.min, info.max, size=shp, dtype=dt, endpoint=True))
    if brk == "default":
        arrays.append(rng.integers(-4, 5, size=[size[v] for v in out]).astype(np.result_type(*dtypes)))
    return parse(text), arrays, brk is None


@settings(max_examples=max(200, settings().max_examples))
@given(contractions())
def test_einsum_fast_path_equals_the_enumeration(case):
    program, arrays, plain = case
    note(str(program))
    note(repr(arrays))
    event("plain" if plain else "not plain")
    bound = sema.bind(program, [a.shape for a in arrays], [a.dtype for a in arrays])
    stmt = program.body[0]
    env = dict(zip(program.input_names, arrays))
    with np.errstate(all="ignore"):
        want = reference._enumerate_contraction(bound, stmt, env)
        fast = reference._einsum_contraction(bound, stmt, env)
    if plain:
        assert fast is not None, "a plain contraction must take the fast path"
        assert fast.dtype == want.dtype and fast.shape == want.shape
        np.testing.assert_array_equal(fast, want)
    else:
        assert fast is None
    np.testing.assert_array_equal(reference.run(program, *arrays), want)


def test_fast_path_output_does_not_alias_its_input():
    X = ints(3, 4)
    Y = run("function (X[M, N]) -> (Y) { Y[i, j : M, N] = +(X[i, j]); }", X)
    Y[0, 0] = 99
    assert X[0, 0] != 99


def test_fast_path_float32_is_float64_rounded_once():
    # Not integer-valued: the fast path sums in float64 and rounds once, so it is the float64 answer in float32.
    A = RNG.standard_normal((5, 300)).astype(np.float32)
    B = RNG.standard_normal((300, 4)).astype(np.float32)
    C = run("function (A[M, K], B[K, N]) -> (C) { C[i, j : M, N] = +(A[i, k] * B[k, j]); }", A, B)
    assert C.dtype == np.float32
    np.testing.assert_array_equal(C, (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32))
