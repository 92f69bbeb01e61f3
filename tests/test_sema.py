"""Tests of polytile.sema: static checks, binding to shapes, dtype rules, the builtin table."""
from __future__ import annotations

import numpy as np
import pytest

from polytile import ir, sema
from polytile.errors import NonAffineError, ShapeError, SourceLocation, TileSemanticError
from polytile.frontends.tile import parse, parse_expression

MATMUL = "function (A[M, K], B[K, N]) -> (C) { C[i, j : M, N] = +(A[i, k] * B[k, j]); }"


# ---------------------------------------------------------------------------
# check(): every error with its class, line and column
# ---------------------------------------------------------------------------

# (source, error class, line, column, a piece of the message)
CHECK_ERRORS = [
    # unknown tensor in a contraction operand
    ("function (A[M, K], B[K, N]) -> (C) {\n  C[i, j : M, N] = +(A[i, k] * Q[k, j]);\n}",
     TileSemanticError, 2, 32, "unknown name 'Q'"),
    # used before its definition
    ("function (A[M]) -> (C) {\n  C = B;\n  B = A;\n}", TileSemanticError, 2, 7, "'B' is used before it is defined"),
    # a DimDef used before it exists, in a size
    ("function (A[M]) -> (C) {\n  C[i : HO] = +(A[i]);\n  HO = M / 2;\n}", TileSemanticError, 2, 9, "'HO'"),
    # tensor assigned twice
    ("function (A[M]) -> (C) {\n  C = A;\n  C = A;\n}", TileSemanticError, 3, 3, "assigned twice"),
    # an input assigned
    ("function (A[M]) -> (C) {\n  A = A + 1;\n  C = A;\n}", TileSemanticError, 2, 3, "input 'A' cannot be assigned"),
    # a header output never assigned (points into the header)
    ("function (A[M]) -> (C, D) {\n  C = A;\n}", TileSemanticError, 1, 24, "output 'D' is never assigned"),
    # duplicate input / output names
    ("function (A[M], A[N]) -> (C) {\n  C = A;\n}", TileSemanticError, 1, 17, "duplicate input name 'A'"),
    ("function (A[M]) -> (C, C) {\n  C = A;\n}", TileSemanticError, 1, 24, "duplicate output name 'C'"),
    # index variables where only dimensions may appear
    ("function (A[M]) -> (C) {\n  C[i : M + i] = +(A[i]);\n}", TileSemanticError, 2, 13, "index variable 'i' in an output size"),
    ("function (A[M]) -> (C) {\n  C[i : M] = +(A[i]), i < M + j;\n}", TileSemanticError, 2, 31,
     "index variable 'j' in a constraint bound"),
    ("function (A[M]) -> (C) {\n  X = M + i;\n  C = A;\n}", TileSemanticError, 2, 11, "index variable 'i'"),
    # operands and default must be tensors
    ("function (A[M]) -> (C) {\n  C[i : M] = +(M[i]);\n}", TileSemanticError, 2, 16, "'M' is a dimension, not a tensor"),
    ("function (A[M]) -> (C) {\n  C[i : M] = +(A[i]) default M;\n}", TileSemanticError, 2, 3, "'default' must name tensors"),
    # a tensor used as a dimension in an index
    ("function (A[M], B[M]) -> (C) {\n  C[i : M] = +(A[i + B]);\n}", TileSemanticError, 2, 22, "'B' is a tensor, not a dimension"),
    # rank mismatch against a header input and against an earlier contraction output
    ("function (A[M]) -> (C) {\n  C[i : M] = +(A[i, j]);\n}", TileSemanticError, 2, 16, "rank 1 but is indexed with 2"),
    ("function (A[M]) -> (C) {\n  T[i, j : M, M] = +(A[i]);\n  C[i : M] = +(T[i]);\n}", TileSemanticError, 3, 16,
     "'T' has rank 2"),
    # builtins: unknown, arity, literal arguments
    ("function (A[M]) -> (C) {\n  C = foo(A);\n}", TileSemanticError, 2, 7, "unknown function 'foo'"),
    ("function (A[M]) -> (C) {\n  C = exp(A, A);\n}", TileSemanticError, 2, 7, "exp takes 1 argument, got 2"),
    ("function (A[M]) -> (C) {\n  C = pow(A);\n}", TileSemanticError, 2, 7, "pow takes 2 arguments, got 1"),
    ("function (A[M]) -> (C) {\n  C = index(A, 1);\n}", TileSemanticError, 2, 16, "axis 1 is out of range for rank 1"),
    ("function (A[M]) -> (C) {\n  C = index(A, M);\n}", TileSemanticError, 2, 16, "must be an integer literal"),
    ("function (A[M]) -> (C) {\n  C = as_float(A, 8);\n}", TileSemanticError, 2, 19, "bits must be one of 16, 32, 64"),
    ("function (A[M]) -> (C) {\n  C = as_int(A, 12);\n}", TileSemanticError, 2, 17, "bits must be one of 8, 16, 32, 64"),
    # non-affine index expressions name the expression
    ("function (A[M]) -> (C) {\n  C[i : M] = +(A[i * j]);\n}", NonAffineError, 2, 20, "'i * j' is not affine"),
    ("function (A[M]) -> (C) {\n  C[i : M] = +(A[(i+1)*(k-2)]);\n}", NonAffineError, 2, 23, "'(i + 1) * (k - 2)' is not affine"),
    ("function (A[M]) -> (C) {\n  C[i : M] = +(A[i / j]);\n}", NonAffineError, 2, 20, "'i / j' is not affine"),
    ("function (A[M]) -> (C) {\n  C[i * i : M] = +(A[i]);\n}", NonAffineError, 2, 7, "'i * i'"),
    # a dimension defined twice; a dimension reused as a tensor name
    ("function (A[M]) -> (C) {\n  M = 3;\n  C = A;\n}", TileSemanticError, 2, 3, "dimension 'M' is defined twice"),
    ("function (A[M]) -> (M) {\n  M = A;\n}", TileSemanticError, 2, 3, "'M' is a dimension"),
    # an input named like a dimension
    ("function (A[N], N) -> (C) {\n  C = A;\n}", TileSemanticError, 1, 11, "names both an input tensor and a dimension"),
]


@pytest.mark.parametrize("src, cls, line, col, text", CHECK_ERRORS, ids=[f"e{n}" for n in range(len(CHECK_ERRORS))])
def test_check_errors(src, cls, line, col, text):
    program = parse(src)
    with pytest.raises(cls) as info:
        sema.check(program)
    err = info.value
    assert type(err) is cls
    assert text in err.message
    assert (err.line, err.col) == (line, col), err.render()


def test_enough_semantic_error_programs():
    assert len(CHECK_ERRORS) >= 12


def test_check_accepts_good_programs():
    for src in [
        MATMUL,
        "function (I[N, H, W, C]) -> (O) { O[n, y, x, c : N, H / 2, W / 2, C] = >(I[n, 2*y + i, 2*x + j, c]), i < 2, j < 2; }",
        "function (X[T]) -> (O) { S = 2; O[t : T / S] = +(X[t * S + i]), i < S; }",
        "function (X[T]) -> (O) { O[i : T] = +(X[i / T]); }",
        "function (X[M, N]) -> (Y) { Mx[i, 0 : M, 1] = >(X[i, j]); E = exp(X - Mx); "
        "S[i, 0 : M, 1] = +(E[i, j]); Y = E / S; }",
        "function (X) -> (Y) { Y = index(X, 3) + as_int(X, 8) + as_float(X, 16); }",  # rank of X unknown: fine
    ]:
        sema.check(parse(src))


def _loc(line, col):
    return SourceLocation("hand.tile", line, col, "")


def test_float_literal_in_index_hand_built():
    # The parser already refuses this; sema must too, for hand-built IR.
    i = ir.Index("i")
    c = ir.Contraction("C", (i,), (ir.Ref("M"),), "+", None,
                       (ir.Access("A", (ir.Binary("+", i, ir.Float(1.5, _loc(2, 20))),)),), loc=_loc(2, 3))
    p = ir.Program((ir.Input("A", ("M",)),), ("C",), (c,))
    with pytest.raises(TileSemanticError) as info:
        sema.check(p)
    assert "float literal 1.5" in info.value.message
    assert (info.value.line, info.value.col) == (2, 20)


def test_float_literal_in_size_hand_built():
    c = ir.Contraction("C", (ir.Index("i"),), (ir.Float(2.0, _loc(3, 9)),), "+", None,
                       (ir.Access("A", (ir.Index("i"),)),), loc=_loc(3, 3))
    p = ir.Program((ir.Input("A", ("M",)),), ("C",), (c,))
    with pytest.raises(TileSemanticError) as info:
        sema.check(p)
    assert "float literal" in info.value.message and info.value.line == 3


def test_combination_arity_hand_built():
    i = ir.Index("i")
    c = ir.Contraction("C", (i,), (ir.Ref("M"),), "+", "*", (ir.Access("A", (i,)),), loc=_loc(1, 1))
    with pytest.raises(TileSemanticError, match="takes 2 operands"):
        sema.check(ir.Program((ir.Input("A", ("M",)),), ("C",), (c,)))


def test_dimension_names_are_constants_in_indices():
    # t * S + i and i / S are affine: S is a dimension.
    sema.check(parse("function (X[T], W[S]) -> (O) { O[t : T] = +(X[t * S + i] * W[i]); P[i : T] = +(X[i / S]); }"
                     .replace("-> (O)", "-> (O, P)")))


# ---------------------------------------------------------------------------
# bind(): shape errors name the tensor and the dimension
# ---------------------------------------------------------------------------


def _bind_error(src, shapes, dtypes):
    with pytest.raises(ShapeError) as info:
        sema.bind(parse(src), shapes, dtypes)
    return info.value


def test_bind_wrong_input_count():
    e = _bind_error(MATMUL, [(2, 3), (3, 4), (1,)], ["float32"] * 3)
    assert e.message == "expected 2 inputs (A, B), got 3"


def test_bind_rank_mismatch():
    e = _bind_error(MATMUL, [(3, 4, 5), (4, 2)], ["float32"] * 2)
    assert e.message == "A: expected rank 2 [M, K], got shape (3, 4, 5)"


def test_bind_repeated_dimension_mismatch():
    e = _bind_error(MATMUL, [(2, 64), (32, 4)], ["float32"] * 2)
    assert e.message == "dimension K: A axis 1 has 64 but B axis 0 has 32"


def test_bind_fixed_dimension_mismatch():
    e = _bind_error("function (I[H], F[3]) -> (O) { O[i : H] = +(I[i + k] * F[k]); }", [(5,), (4,)], ["float32"] * 2)
    assert "F: axis 0 is fixed to 3" in e.message and "got 4" in e.message


@pytest.mark.parametrize("dtype", ["complex64", "datetime64[s]", "object"])
def test_bind_unsupported_dtype(dtype):
    e = _bind_error(MATMUL, [(2, 3), (3, 4)], [dtype, "float32"])
    assert e.message.startswith(f"A: unsupported dtype {np.dtype(dtype)}")
    assert "bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, float32, float64" in e.message


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "uint32", "uint64", "int8", "int16", "bool", "float16"])
def test_bind_accepts_plaidml_dtypes(dtype):
    b = sema.bind(parse(MATMUL), [(2, 3), (3, 4)], [dtype, dtype])
    assert b.tensors["A"].dtype == np.dtype(dtype)


def test_bind_negative_output_size_names_statement():
    src = "function (I[H], F[KH]) -> (O) {\n  O[i : H - KH + 1] = +(I[i + k] * F[k]);\n}"
    e = _bind_error(src, [(1,), (4,)], ["float32"] * 2)
    assert e.message == "O: size of axis 0 is H - KH + 1 = -2 < 0"
    assert e.line == 2


def test_bind_zero_size_is_allowed():
    b = sema.bind(parse("function (I[H], F[KH]) -> (O) { O[i : H - KH + 1] = +(I[i + k] * F[k]); }"),
                  [(3,), (4,)], ["float32"] * 2)
    assert b.tensors["O"].shape == (0,)


def test_bind_default_shape_mismatch():
    e = _bind_error("function (I, D) -> (O) {\n  O[i : 3] = +(I[i]) default D;\n}", [(3,), (4,)], ["float32"] * 2)
    assert "default tensor D has shape (4,)" in e.message and "(3,)" in e.message


def test_bind_operand_rank_checked_when_known():
    e = _bind_error("function (I) -> (O) {\n  O[i : 3] = +(I[i, j]);\n}", [(3,)], ["float32"])
    assert e.message.startswith("I: indexed with 2 indices") and e.line == 2


def test_bind_broadcast_error_names_statement_and_shapes():
    e = _bind_error("function (I, J) -> (O) {\n  O = I + J;\n}", [(3, 4), (5,)], ["float32"] * 2)
    assert e.message == "O: cannot broadcast shapes (3, 4) and (5,) in 'I + J'"


def test_bind_index_axis_checked_at_bind_for_free_rank():
    with pytest.raises(ShapeError, match="axis 2 is out of range"):
        sema.bind(parse("function (X) -> (O) { O = index(X, 2); }"), [(3, 4)], ["float32"])


def test_bind_rejects_float16_cast():
    with pytest.raises(TileSemanticError, match="float16"):
        sema.bind(parse("function (X[N]) -> (O) { O = as_float(X, 16); }"), [(3,)], ["float32"])


def test_bind_division_by_zero_in_dimdef():
    with pytest.raises(ShapeError, match="division by zero"):
        sema.bind(parse("function (X[N, K]) -> (O) { Z = N / K; O = X; }"), [(3, 0)], ["float32"])


# ---------------------------------------------------------------------------
# Bound: dims, tensors, sizes
# ---------------------------------------------------------------------------


def test_dimdef_evaluation_floor_division():
    src = ("function (I[N, H, W, C], F[KH, KW, C, CO]) -> (O) { HO = (H - KH) / 2 + 1; WO = (W - KW) / 2 + 1; "
           "Neg = (0 - H) / 2; "
           "O[n, y, x, co : N, HO, WO, CO] = +(I[n, 2*y + ky, 2*x + kx, c] * F[ky, kx, c, co]); }")
    b = sema.bind(parse(src), [(1, 9, 8, 2), (3, 3, 2, 4)], ["float32"] * 2)
    assert b.dims["HO"] == 4 and b.dims["WO"] == 3
    assert b.dims["Neg"] == -4  # PlaidML folds sizes in double and truncates toward zero
    assert b.tensors["O"].shape == (1, 4, 3, 4)
    assert dict(b.dims) == {"N": 1, "H": 9, "W": 8, "C": 2, "KH": 3, "KW": 3, "CO": 4, "HO": 4, "WO": 3, "Neg": -4}


def test_size_expressions():
    b = sema.bind(parse(MATMUL), [(7, 3), (3, 4)], ["float32"] * 2)
    assert b.size(parse_expression("(M + 1) / 2")) == 4
    assert b.size(parse_expression("M * K - -N")) == 25
    assert b.size(parse_expression("-M / 2")) == -3  # truncation toward zero, as PlaidML
    assert b.size(parse_expression("max(0, M - 9) + min(M, 2)")) == 2
    with pytest.raises(TileSemanticError):
        b.size(parse_expression("A + 1"))


def test_tensors_order_and_kinds():
    src = ("function (X[M, N]) -> (Y) { Mx[i, 0 : M, 1] = >(X[i, j]); E = exp(X - Mx); "
           "S[i, 0 : M, 1] = +(E[i, j]); Y = E / S; }")
    b = sema.bind(parse(src), [(3, 5)], ["float32"])
    assert list(b.tensors) == ["X", "Mx", "E", "S", "Y"]
    assert [t.kind for t in b.tensors.values()] == ["input", "temp", "temp", "temp", "output"]
    assert b.tensors["Mx"].shape == (3, 1) and b.tensors["Y"].shape == (3, 5)
    assert all(t.dtype == np.float32 for t in b.tensors.values())


def test_bound_is_immutable():
    b = sema.bind(parse(MATMUL), [(2, 3), (3, 4)], ["float32"] * 2)
    with pytest.raises(AttributeError):
        b.program = None
    with pytest.raises(TypeError):
        b.dims["M"] = 5
    with pytest.raises(TypeError):
        b.tensors["C"] = None


def test_key_is_stable_and_distinguishes():
    p = parse(MATMUL)
    k1 = sema.bind(p, [(2, 3), (3, 4)], ["float32"] * 2).key()
    assert k1 == sema.bind(parse(MATMUL), [(2, 3), (3, 4)], [np.float32, np.dtype("float32")]).key()
    assert k1 != sema.bind(p, [(2, 3), (3, 5)], ["float32"] * 2).key()
    assert k1 != sema.bind(p, [(2, 3), (3, 4)], ["float32", "float64"]).key()
    other = parse(MATMUL.replace("+(", ">("))
    assert k1 != sema.bind(other, [(2, 3), (3, 4)], ["float32"] * 2).key()


# ---------------------------------------------------------------------------
# Types
# ---------------------------------------------------------------------------


def _contraction_out(src, dtypes, shapes=None):
    p = parse(src)
    shapes = shapes or [(3,)] * len(dtypes)
    b = sema.bind(p, shapes, dtypes)
    stmt = p.body[-1]
    assert sema.contraction_dtype(b, stmt) == b.contraction_dtype(stmt) == b.tensors[stmt.target].dtype
    return b.tensors[stmt.target].dtype


@pytest.mark.parametrize("a, b, want", [
    ("int32", "float32", "float32"),   # PlaidML: a float beats any integer, whatever the width
    ("float32", "float32", "float32"),
    ("int32", "int64", "int64"),
    ("float32", "float64", "float64"),
    ("int32", "int32", "int32"),
    ("uint32", "int32", "uint32"),     # equal widths: the first operand's type stays
    ("int8", "uint8", "int8"),
])
def test_contraction_dtype_binary(a, b, want):
    for combo in ("*", "+"):
        src = f"function (A[N], B[N]) -> (O) {{ O[] = +(A[i] {combo} B[i]); }}"
        assert _contraction_out(src, [a, b]) == np.dtype(want)
    src = "function (A[N], B[N]) -> (O) { O[] = +(A[i] == B[i]); }"
    assert _contraction_out(src, [a, b]) == np.dtype(bool)  # '==' is always bool in PlaidML


def test_contraction_dtype_single_and_ternary():
    assert _contraction_out("function (A[N]) -> (O) { O[i : N] = >(A[i]); }", ["int32"]) == np.int32
    src = "function (A[N], B[N], C[N]) -> (O) { O[i : N] = +(A[i] == B[i] ? C[i]); }"
    assert _contraction_out(src, ["int32", "int32", "float32"]) == np.float32
    assert _contraction_out(src, ["int8", "int8", "int16"]) == np.int16


@pytest.mark.parametrize("expr, want", [
    ("F * 2.5", "float32"),       # a float literal is float32: the float32 tensor keeps its type
    ("I * 2.5", "float32"),       # int tensor times a float literal: the float wins
    ("I / I", "int32"),           # integer division stays integer (truncates)
    ("I / 2", "int32"),
    ("F / N", "float32"),         # a dimension is an int32 value
    ("I + N", "int32"),
    ("F < I", "bool"),
    ("I == 3", "bool"),
    ("index(F, 0)", "int32"),
    ("F * S", "float64"),         # the wider float wins
    ("N * 2", "int32"),           # folded at bind time: an int32 constant
    ("N / 2", "int32"),
    ("I > 0 ? F : 0", "float32"),
    ("sigmoid(I)", "float32"),    # 1.0 / (1.0 + exp(-I)): float32 literals
    ("recip(F)", "float32"),
    ("relu(I)", "float32"),       # I < 0 ? 0.0 : I
    ("as_int(F, 16)", "int16"),
    ("as_uint(F, 8)", "uint8"),
    ("as_float(I, 32)", "float32"),
    ("round(F)", "float32"),
    ("exp(2)", "int32"),          # a constant: exp of an int32 literal folds to an int32
    ("I & 6", "int32"),
    ("~I << 2", "int32"),
])
def test_elementwise_types_follow_numpy(expr, want):
    # A right side of only dimensions and integers is a dimension definition, so type those directly.
    dims_only = expr in ("N * 2", "N / 2")
    src = f"function (F[N], I[N], S[]) -> (O) {{ O = {'F' if dims_only else expr}; }}"
    b = sema.bind(parse(src), [(4,), (4,), ()], ["float32", "int32", "float64"])
    if not dims_only:
        assert b.tensors["O"].dtype == np.dtype(want)
    shape, dtype = b.expr_type(parse_expression(expr))
    assert dtype == np.dtype(want)
    assert shape == (() if expr in ("N * 2", "N / 2", "exp(2)") else (4,))


def test_expr_type_agrees_with_numpy_on_real_values():
    src = "function (F[M, N], I[N], S[]) -> (O) { O = F; }"
    b = sema.bind(parse(src), [(2, 3), (3,), ()], ["float32", "int32", "float64"])
    env = {"F": np.ones((2, 3), np.float32), "I": np.arange(3, dtype=np.int32), "S": np.array(2.0), "M": 2, "N": 3}
    for text in ["F * I", "I - 1", "F + S", "-I / N", "pow(F, 2)", "max(I, F)", "F >= 1 ? I : N", "tanh(F) * M",
                 "abs(-I) + floor(F)", "ceil(I / 2)", "index(F, 1) * I"]:
        e = parse_expression(text)
        real = np.asarray(sema.eval_elementwise(e, env))
        assert b.expr_type(e) == (real.shape, real.dtype), text


def test_identity():
    assert sema.identity("+", "float32") == 0 and sema.identity("+", "float32").dtype == np.float32
    assert sema.identity("*", "int32") == 1
    assert sema.identity(">", "float64") == -np.inf
    assert sema.identity("<", "float32") == np.inf
    assert sema.identity(">", "int32") == np.iinfo(np.int32).min
    assert sema.identity("<", "int64") == np.iinfo(np.int64).max
    assert sema.identity("=", "float32") is None


def test_builtin_table():
    unary = "exp log sqrt tanh sigmoid sin cos tan floor ceil round abs recip relu".split()
    for name in unary:
        assert sema.BUILTINS[name].arity == 1
    for name in ("pow", "max", "min", "as_float", "as_int", "index"):
        assert sema.BUILTINS[name].arity == 2
    x = np.array([-2.0, 0.5, 3.0])
    np.testing.assert_allclose(sema.BUILTINS["sigmoid"].impl(x), 1 / (1 + np.exp(-x)))
    np.testing.assert_array_equal(sema.BUILTINS["relu"].impl(x), [0.0, 0.5, 3.0])
    np.testing.assert_array_equal(sema.BUILTINS["recip"].impl(np.array([2.0, 4.0])), [0.5, 0.25])
    np.testing.assert_array_equal(sema.BUILTINS["recip"].impl(np.array([2, 1])), [0, 1])  # integer recip truncates
    assert sema.BUILTINS["as_int"].int_choices == (8, 16, 32, 64)
    assert set(sema.SUPPORTED_DTYPES) == {np.dtype(t) for t in (
        "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32",
        "float64")}


def test_index_variable_in_dimdef_hand_built():
    d = ir.DimDef("HO", ir.Binary("+", ir.Ref("H"), ir.Index("i", _loc(2, 12))), loc=_loc(2, 3))
    p = ir.Program((ir.Input("A", ("H",)),), ("C",), (d, ir.Assign("C", ir.Ref("A"))))
    with pytest.raises(TileSemanticError) as info:
        sema.check(p)
    assert "index variable 'i' in a dimension definition" in info.value.message
    assert (info.value.line, info.value.col) == (2, 12)
