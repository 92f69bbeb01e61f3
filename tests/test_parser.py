"""Tests of the Tile frontend (lexer + parser) and the IR printer it round-trips with."""
from __future__ import annotations

import glob
import math
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polytile.errors import PolytileError, TileSyntaxError
from polytile.frontends.tile import parse, parse_expression, parse_file, tokenize
from polytile.ir import (
    AGGREGATIONS,
    BINARY_OPS,
    Access,
    Assign,
    Attr,
    Binary,
    Call,
    Cond,
    Constraint,
    Contraction,
    DimDef,
    Float,
    Index,
    Input,
    Int,
    Program,
    Ref,
    Unary,
    format_expr,
)

REPO = Path(__file__).resolve().parent.parent

# The examples of the language reference, verbatim.
REFERENCE_EXAMPLES = {
    "matmul": "function (A[M, K], B[K, N]) -> (C) { C[i, j : M, N] = +(A[i, k] * B[k, j]); }",
    "conv2d": """function (I[N, H, W, CI], F[KH, KW, CI, CO]) -> (O) {
  O[n, y, x, co : N, H - KH + 1, W - KW + 1, CO] = +(I[n, y + ky, x + kx, ci] * F[ky, kx, ci, co]);
}""",
    "maxpool": """function (I[N, H, W, C]) -> (O) {
  O[n, y, x, c : N, H / 2, W / 2, C] = >(I[n, 2*y + i, 2*x + j, c]), i < 2, j < 2;
}""",
    "softmax": """function (X[M, N]) -> (Y) {
  Mx[i, 0 : M, 1] = >(X[i, j]);
  E = exp(X - Mx);
  S[i, 0 : M, 1] = +(E[i, j]);
  Y = E / S;
}""",
    "same_conv": "function (I[H, W], F[3, 3]) -> (O) { O[y, x : H, W] = +(I[y + ky - 1, x + kx - 1] * F[ky, kx]); }",
    "transpose": "function (I[M, N]) -> (O) { O[j, i : N, M] = =(I[i, j]); }",
    "sum_axis": "function (I[M, N]) -> (O) { O[n : N] = +(I[m, n]); }",
    "dot": "function (X[L], Y[L]) -> (R) { R[] = +(X[i] * Y[i]); }",
}


def roundtrip(p: Program) -> None:
    """``parse(str(p)) == p`` and printing is a fixed point."""
    text = str(p)
    q = parse(text)
    assert q == p, text
    assert str(q) == text


# ---------------------------------------------------------------------------
# The reference examples
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(REFERENCE_EXAMPLES))
def test_reference_examples_parse_and_roundtrip(name):
    p = parse(REFERENCE_EXAMPLES[name], f"{name}.tile")
    assert p.name == f"{name}.tile"
    roundtrip(p)


def test_matmul_node_by_node():
    src = REFERENCE_EXAMPLES["matmul"]
    p = parse(src, "mm.tile")
    assert p.inputs == (Input("A", ("M", "K")), Input("B", ("K", "N")))
    assert p.outputs == ("C",)
    assert len(p.body) == 1
    c = p.body[0]
    assert isinstance(c, Contraction)
    assert c.output == "C" and c.target == "C"
    assert c.indices == (Index("i"), Index("j"))
    assert c.sizes == (Ref("M"), Ref("N"))
    assert c.agg == "+"
    assert c.combo == "*"
    assert c.operands == (
        Access("A", (Index("i"), Index("k"))),
        Access("B", (Index("k"), Index("j"))),
    )
    assert c.constraints == () and c.default is None and c.no_defract is False and c.attrs == ()
    assert c.index_vars() == ("i", "j", "k")
    # Locations point at first characters, and carry the whole line.
    assert (c.loc.file, c.loc.line, c.loc.col) == ("mm.tile", 1, src.index("C[i") + 1)
    assert c.loc.text == src
    a, b = c.operands
    assert a.loc.col == src.index("A[i") + 1
    assert b.loc.col == src.index("B[k") + 1
    assert b.indices[1].loc.col == src.index("j]);") + 1
    assert c.sizes[1].loc.col == src.index("N] =") + 1
    assert p.inputs[1].loc.col == src.index("B[K") + 1
    assert p.statement("C") is c
    assert str(p) == (
        "function (A[M, K], B[K, N]) -> (C) {\n"
        "  C[i, j : M, N] = +(A[i, k] * B[k, j]);\n"
        "}"
    )


def test_maxpool_structure():
    p = parse(REFERENCE_EXAMPLES["maxpool"])
    c = p.body[0]
    assert c.agg == ">" and c.combo is None
    assert c.sizes[1] == Binary("/", Ref("H"), Int(2))
    assert c.operands[0].indices[1] == Binary("+", Binary("*", Int(2), Index("y")), Index("i"))
    assert c.constraints == (Constraint(Index("i"), Int(2)), Constraint(Index("j"), Int(2)))


def test_softmax_structure():
    p = parse(REFERENCE_EXAMPLES["softmax"])
    kinds = [type(s).__name__ for s in p.body]
    assert kinds == ["Contraction", "Assign", "Contraction", "Assign"]
    mx = p.body[0]
    assert mx.indices == (Index("i"), Int(0)) and mx.sizes == (Ref("M"), Int(1))
    assert p.body[1] == Assign("E", Call("exp", (Binary("-", Ref("X"), Ref("Mx")),)))
    assert p.body[3] == Assign("Y", Binary("/", Ref("E"), Ref("S")))


def test_conv_and_scalar_structure():
    p = parse(REFERENCE_EXAMPLES["conv2d"])
    c = p.body[0]
    assert c.sizes[1] == Binary("+", Binary("-", Ref("H"), Ref("KH")), Int(1))
    assert len(c.indices) == 4 and len(c.operands[0].indices) == 4
    dot = parse(REFERENCE_EXAMPLES["dot"]).body[0]
    assert dot.indices == () and dot.sizes == ()
    same = parse(REFERENCE_EXAMPLES["same_conv"])
    assert same.inputs[1] == Input("F", (3, 3))
    assert same.body[0].operands[0].indices[0] == Binary(
        "-", Binary("+", Index("y"), Index("ky")), Int(1)
    )


# ---------------------------------------------------------------------------
# Lexing details
# ---------------------------------------------------------------------------


def test_tokens_and_name_classes():
    toks = list(tokenize("#out $Idx default no_defract function A _x 2e-3 1.5 42 -> == != <= >= [[ ]]"))
    got = [(t.kind, t.value) for t in toks]
    assert got == [
        ("UPPER", "out"),
        ("LOWER", "Idx"),
        ("KEYWORD", "default"),
        ("KEYWORD", "no_defract"),
        ("KEYWORD", "function"),
        ("UPPER", "A"),
        ("LOWER", "_x"),
        ("FLOAT", 2e-3),
        ("FLOAT", 1.5),
        ("INT", 42),
        ("OP", "->"),
        ("OP", "=="),
        ("OP", "!="),
        ("OP", "<="),
        ("OP", ">="),
        ("OP", "["),
        ("OP", "["),
        ("OP", "]"),
        ("OP", "]"),
        ("EOF", ""),
    ]
    assert [(t.line, t.col) for t in tokenize("a\n  bb")][:2] == [(1, 1), (2, 3)]


def test_comments_are_skipped():
    src = """// leading comment
function (A[N]) -> (B) { /* a block
  comment spanning lines */ B = A * 2; // trailing
}
"""
    p = parse(src)
    assert p.body == (Assign("B", Binary("*", Ref("A"), Int(2))),)
    assert p.body[0].loc.line == 3


def test_forced_name_classes():
    p = parse("function (#a[#n]) -> (#out) { #out[$I : #n] = +(#a[$I]); }")
    c = p.body[0]
    assert p.inputs == (Input("a", ("n",)),)
    assert p.outputs == ("out",) and c.output == "out"
    assert c.indices == (Index("I"),) and c.sizes == (Ref("n"),)
    assert "#out[$I : #n] = +(#a[$I])" in str(p)
    roundtrip(p)
    # A forced name is never a keyword, and prints back with its sigil.
    e = parse_expression("$default + #function * $no_defract")
    assert e == Binary("+", Index("default"), Binary("*", Ref("function"), Index("no_defract")))
    assert format_expr(e) == "$default + #function * $no_defract"


def test_negative_literals_fold_and_unary_minus_does_not():
    assert parse_expression("-3") == Int(-3)
    assert parse_expression("-2.5") == Float(-2.5)
    assert parse_expression("-(3)") == Unary("-", Int(3))
    assert parse_expression("-x") == Unary("-", Index("x"))
    assert parse_expression("- -3") == Unary("-", Int(-3))
    assert parse_expression("2 - 3") == Binary("-", Int(2), Int(3))
    assert parse_expression("-3 * x") == Binary("*", Int(-3), Index("x"))
    assert format_expr(Unary("-", Int(3))) == "-(3)"
    assert format_expr(Unary("-", Int(-3))) == "-(-3)"
    assert format_expr(Binary("-", Index("x"), Int(-3))) == "x - -3"


def test_precedence_and_associativity():
    assert parse_expression("a - b - c") == Binary("-", Binary("-", Index("a"), Index("b")), Index("c"))
    assert parse_expression("a - (b - c)") == Binary("-", Index("a"), Binary("-", Index("b"), Index("c")))
    assert parse_expression("a + b * c") == Binary("+", Index("a"), Binary("*", Index("b"), Index("c")))
    assert parse_expression("a < b == c > d") == Binary(
        "==", Binary("<", Index("a"), Index("b")), Binary(">", Index("c"), Index("d"))
    )
    # The ternary is right-associative and loosest.
    assert parse_expression("a ? b : c ? d : e") == Cond(
        Index("a"), Index("b"), Cond(Index("c"), Index("d"), Index("e"))
    )
    assert parse_expression("a ? b ? c : d : e") == Cond(
        Index("a"), Cond(Index("b"), Index("c"), Index("d")), Index("e")
    )
    assert parse_expression("x > 0 ? x : 0.5 * x") == Cond(
        Binary(">", Index("x"), Int(0)), Index("x"), Binary("*", Float(0.5), Index("x"))
    )
    for text in ["(a ? b : c) ? d : e", "a ? (b ? c : d) : e", "a ? b : c ? d : e", "-(a + b) * -c",
                 "a == b == c", "a == (b == c)", "a / (b * c)", "f(a ? b : c, -1.5e-07)"]:
        assert format_expr(parse_expression(text)) == text


def test_binary_and_cond_locations_point_at_operator():
    e = parse_expression("ab * cd")
    assert e.loc.col == 4 and e.lhs.loc.col == 1 and e.rhs.loc.col == 6
    c = parse_expression("x ? y : z")
    assert c.loc.col == 3
    n = parse_expression("  -3")
    assert n.loc.col == 3


def test_juxtaposed_coefficient_in_polys():
    p = parse("function (A[N]) -> (B) { B[i : N] = +(A[2i + 1]); }")
    assert p.body[0].operands[0].indices[0] == Binary("+", Binary("*", Int(2), Index("i")), Int(1))
    assert parse_expression("-3k", poly=True) == Binary("*", Int(-3), Index("k"))


def test_floats_and_infinity_print_back():
    for v in [0.5, 1e-05, 1e16, 123456789.125, 2e-300, float("inf")]:
        e = Float(v)
        assert parse_expression(format_expr(e)) == e
    assert parse_expression("1e999") == Float(math.inf)
    assert parse_expression("-1e999") == Float(-math.inf)
    assert parse_expression("2E+3") == Float(2000.0)


def test_dimdef_versus_assign():
    src = """function (X[M, N], S[]) -> (Y, Z) {
  HO = (M + 1) / 2;
  HT = -HO * 3 - N;
  Mean = S / N;
  Y[i : HT] = +(X[i, j]);
  K = 4;
  Z = HO + 0.5;
  W = exp(M);
  V = i;
}"""
    p = parse(src)
    kinds = {s.target: type(s) for s in p.body}
    assert kinds["HO"] is DimDef
    assert kinds["HT"] is DimDef  # uses the earlier DimDef HO
    assert kinds["Mean"] is Assign  # S is a tensor
    assert kinds["K"] is DimDef
    assert kinds["Z"] is Assign  # a float literal
    assert kinds["W"] is Assign  # a call
    assert kinds["V"] is Assign  # an index variable is no dimension
    assert p.statement("HO").expr == Binary("/", Binary("+", Ref("M"), Int(1)), Int(2))
    roundtrip(p)


def test_attributes_defaults_and_flags():
    src = """function (A[N], D[N]) -> (O) {
  [[unroll]] [[tile(4, f(2, 3), #X)]] O[i : N] = <(A[i]), i - 1 < N no_defract default D;
}"""
    p = parse(src)
    c = p.body[0]
    assert c.attrs == (Attr("unroll"), Attr("tile", ("4", "f(2, 3)", "#X")))
    assert c.attrs[1].loc.col == 14
    assert c.constraints == (Constraint(Binary("-", Index("i"), Int(1)), Ref("N")),)
    assert c.no_defract and c.default == "D"
    roundtrip(p)


def test_assign_aggregation_written_without_space():
    p = parse("function (I[M, N]) -> (O) { O[j, i : N, M]==(I[i, j]); }")
    assert p.body[0].agg == "="
    assert p == parse(REFERENCE_EXAMPLES["transpose"])


def test_parse_file_sets_name(tmp_path):
    f = tmp_path / "k.tile"
    f.write_text("function (A) -> (B) {\n  B = relu(A);\n}\n")
    p = parse_file(f)
    assert p.name == str(f)
    assert p.body[0].loc.file == str(f) and p.body[0].loc.line == 2
    with pytest.raises(TileSyntaxError) as ei:
        f.write_text("function (A) -> (B) {\n  B = relu(A)\n}\n")
        parse_file(f)
    assert str(ei.value).startswith(f"{f}:3:1: error: missing ';'")


# ---------------------------------------------------------------------------
# Round trips: examples/ and inline programs covering every feature
# ---------------------------------------------------------------------------

EXAMPLE_FILES = sorted(glob.glob(str(REPO / "examples" / "*.tile")))


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=[os.path.basename(p) for p in EXAMPLE_FILES])
def test_example_files_roundtrip(path):
    roundtrip(parse_file(path))


INLINE_PROGRAMS = {
    "aggregations": """function (A[M, N]) -> (S, P, MX, MN, T) {
  S[i : M] = +(A[i, j]);
  P[i : M] = *(A[i, j]);
  MX[i : M] = >(A[i, j]);
  MN[i : M] = <(A[i, j]);
  T[j, i : N, M] = =(A[i, j]);
}""",
    "combinations": """function (A[N], B[N], C[N]) -> (X, Y, Z, W) {
  X[i : N] = +(A[i] + B[i]);
  Y[i : N] = +(A[i] * B[i]);
  Z[i, j : N, N] = +(A[i] == B[j]);
  W[i : N] = >(A[i] == B[j] ? C[j]);
}""",
    "constraints_default_nodefract": """function (I[N], D[H]) -> (O) {
  H = N / 2;
  O[i : H] = +(I[2 * i + k]), k < 2, i - 1 < H - 1 no_defract;
  P[i : H] = =(I[i]) default D;
  Q[i : H] = =(I[i]), i < 3 default D no_defract;
}""",
    "attributes": """function (A[N]) -> (B, C) {
  [[vectorize]] B[i : N] = +(A[i]);
  [[tile(32, 8)]] [[name($a, #B)]] C = B * 2;
}""",
    "dimdefs": """function (I[H, W]) -> (O) {
  HO = (H + 1) / 2;
  WO = W - -1 * 3;
  O[y, x : HO, WO] = +(I[2 * y - HO, x]);
  P = O * HO;
}""",
    "elementwise_all_ops": """function (X[N], Y[N]) -> (Z) {
  A1 = X + Y - X * Y / 2.5;
  A2 = (X == Y) + (X != Y) + (X < Y) + (X > Y) + (X <= Y) + (X >= Y);
  A3 = -X + -(Y * 3) - -2 - -0.125 + -(2);
  A4 = X > 0 ? X : Y < 0 ? -Y : 0;
  A5 = (X > 0 ? X : Y) ? 1 : 2e-3;
  Z = A1 + A2 + A3 + A4 + A5;
}""",
    "builtins": """function (X[N], T[N, M]) -> (R) {
  B1 = exp(X) + log(X) + sqrt(X) + pow(X, 2) + tanh(X) + sigmoid(X);
  B2 = sin(X) + cos(X) + tan(X) + floor(X) + ceil(X) + round(X);
  B3 = abs(X) + recip(X) + max(X, 0) + min(X, 1.5) + relu(X);
  B4 = as_float(as_int(X, 32), 64) + index(T, 1);
  R = B1 + B2 + B3 + B4;
}""",
    "forced_names": """function (#lower[#n], #up) -> (#res) {
  #res[$I : #n] = +(#lower[$I]);
  #tmp = #up * $Up + #res;
}""",
    "scalars_and_any_rank": """function (S[], T, U[]) -> (R, Q) {
  R[] = +(S[]);
  Q = T * U + R;
}""",
    "comments": """/* header */ function (A[N]) -> (B) { // inputs
  // a line comment
  B[i : N] = /* inline */ +(A[i]); /* trailing */
}  // end""",
    "int_header_dims_and_division": """function (A[4, N], V[8]) -> (O, P) {
  O[i / 2, j : 2, N] = +(A[i, j]);
  P[i : 4] = +(V[2 * i + 1 - (i / 2) * 2]);
}""",
    "multiple_outputs": """function (A[M, N], B[N, K]) -> (C, D, E) {
  C[i, k : M, K] = +(A[i, j] * B[j, k]);
  D = C + 1;
  E[] = >(C[i, k]);
}""",
    "negatives_in_polys": """function (A[N]) -> (B) {
  B[-i + N - 1 : N] = =(A[-(i) + 2 * -1 + 2]), -i < 1;
}""",
}


@pytest.mark.parametrize("name", sorted(INLINE_PROGRAMS))
def test_inline_programs_roundtrip(name):
    p = parse(INLINE_PROGRAMS[name])
    roundtrip(p)


def test_inline_program_details():
    combos = parse(INLINE_PROGRAMS["combinations"]).body
    assert [s.combo for s in combos] == ["+", "*", "==", "?"]
    assert len(combos[3].operands) == 3
    aggs = parse(INLINE_PROGRAMS["aggregations"]).body
    assert [s.agg for s in aggs] == list(AGGREGATIONS)
    sc = parse(INLINE_PROGRAMS["scalars_and_any_rank"])
    assert sc.inputs == (Input("S", ()), Input("T", None), Input("U", ()))
    assert sc.body[0].operands == (Access("S", ()),)
    div = parse(INLINE_PROGRAMS["int_header_dims_and_division"])
    assert div.inputs[0].dims == (4, "N")
    assert div.body[0].indices[0] == Binary("/", Index("i"), Int(2))
    q = parse(INLINE_PROGRAMS["constraints_default_nodefract"]).statement("Q")
    assert q.default == "D" and q.no_defract and len(q.constraints) == 1
    el = parse(INLINE_PROGRAMS["elementwise_all_ops"]).statement("A3")
    assert "-(Y * 3) - -2 - -0.125 + -(2)" in format_expr(el.expr)


# ---------------------------------------------------------------------------
# Property tests: random IR -> print -> parse is the identity
# ---------------------------------------------------------------------------

UPPER_NAMES = ["A", "B", "N", "KH", "Out", "x", "_t", "default", "function"]
INDEX_NAMES = ["i", "j", "ky", "x1", "_i", "K", "Default", "default", "no_defract"]
FUNC_NAMES = ["exp", "max", "as_float", "index", "Foo", "default"]
DIMS = ["M", "N", "K", "n"]  # bound by the test header; 'n' needs '#'

ints = st.integers(min_value=-1000, max_value=1000) | st.integers()
floats = st.floats(allow_nan=False)


def _unary(x):
    return Unary("-", x)


expr_leaves = st.one_of(
    ints.map(Int),
    floats.map(Float),
    st.sampled_from(INDEX_NAMES).map(Index),
    st.sampled_from(UPPER_NAMES).map(Ref),
)


def _extend_expr(children):
    return st.one_of(
        children.map(_unary),
        st.builds(Binary, st.sampled_from(BINARY_OPS), children, children),
        st.builds(Call, st.sampled_from(FUNC_NAMES), st.lists(children, max_size=3).map(tuple)),
        st.builds(Cond, children, children, children),
    )


exprs = st.recursive(expr_leaves, _extend_expr, max_leaves=12)

small = st.integers(min_value=-4, max_value=4)
idx_names = st.sampled_from(["i", "j", "k", "ky", "I"])  # "I" prints as "$I"


@st.composite
def affine_polys(draw):
    """``c1*i + c2*j + ... + offset`` with small coefficients, sometimes a dim or a division."""
    terms = []
    for name in draw(st.lists(idx_names, min_size=1, max_size=3)):
        c = draw(small)
        v = Index(name)
        if c == 1:
            terms.append(v)
        elif c == -1 and draw(st.booleans()):
            terms.append(Unary("-", v))
        else:
            terms.append(Binary("*", Int(c), v) if draw(st.booleans()) else Binary("*", v, Int(c)))
    if draw(st.booleans()):
        terms.append(Ref(draw(st.sampled_from(DIMS))))
    off = draw(small)
    if off:
        terms.append(Int(off))
    e = terms[0]
    for t in terms[1:]:
        e = Binary(draw(st.sampled_from("+-")), e, t)
    if draw(st.integers(0, 5)) == 0:
        e = Binary("/", e, Int(draw(st.integers(1, 4))))
    return e


poly_leaves = st.one_of(small.map(Int), idx_names.map(Index), st.sampled_from(DIMS).map(Ref))
generic_polys = st.recursive(
    poly_leaves,
    lambda ch: st.one_of(ch.map(_unary), st.builds(Binary, st.sampled_from("+-*/"), ch, ch)),
    max_leaves=6,
)
polys = affine_polys() | generic_polys
size_leaves = st.one_of(st.integers(1, 64).map(Int), st.sampled_from(DIMS).map(Ref))
sizes = st.recursive(
    size_leaves,
    lambda ch: st.one_of(ch.map(_unary), st.builds(Binary, st.sampled_from("+-*/"), ch, ch)),
    max_leaves=4,
)
attrs = st.lists(
    st.builds(
        Attr,
        st.sampled_from(["unroll", "tile", "Par", "default"]),
        st.lists(st.sampled_from(["1", "x", "a + b", "f(1, 2)", "#N", "[3]"]), max_size=3).map(tuple),
    ),
    max_size=2,
).map(tuple)


@st.composite
def contractions(draw):
    rank = draw(st.integers(0, 4))
    combo = draw(st.sampled_from([None, "+", "*", "==", "?"]))
    n_ops = {None: 1, "+": 2, "*": 2, "==": 2, "?": 3}[combo]
    operands = tuple(
        Access(draw(st.sampled_from(UPPER_NAMES)), tuple(draw(st.lists(polys, max_size=4))))
        for _ in range(n_ops)
    )
    return Contraction(
        output=draw(st.sampled_from(UPPER_NAMES)),
        indices=tuple(draw(polys) for _ in range(rank)),
        sizes=tuple(draw(sizes) for _ in range(rank)),
        agg=draw(st.sampled_from(list(AGGREGATIONS))),
        combo=combo,
        operands=operands,
        constraints=tuple(draw(st.lists(st.builds(Constraint, polys, sizes), max_size=3))),
        default=draw(st.none() | st.sampled_from(UPPER_NAMES)),
        no_defract=draw(st.booleans()),
        attrs=draw(attrs),
    )


def _is_dim_expr(e, dims):
    # The reference's rule, restated independently of the parser's code.
    if isinstance(e, Int):
        return True
    if isinstance(e, Ref):
        return e.name in dims
    if isinstance(e, Unary):
        return _is_dim_expr(e.operand, dims)
    if isinstance(e, Binary):
        return e.op in "+-*/" and _is_dim_expr(e.lhs, dims) and _is_dim_expr(e.rhs, dims)
    return False


@st.composite
def programs(draw):
    inputs = (
        Input("A", ("M", "N")),
        Input("n", ("K", "n", 3)),  # prints as "#n[K, #n, 3]"
        Input("S", ()),
        Input("T", None),
    )
    dims = {"M", "N", "K", "n"}
    body = []
    for _ in range(draw(st.integers(1, 4))):
        if draw(st.booleans()):
            body.append(draw(contractions()))
        else:
            target = draw(st.sampled_from(["Y", "HO", "z"]))
            e = draw(exprs | sizes)
            if _is_dim_expr(e, dims):
                body.append(DimDef(target, e, attrs=draw(attrs)))
                dims.add(target)
            else:
                body.append(Assign(target, e, attrs=draw(attrs)))
    outputs = tuple(draw(st.lists(st.sampled_from(UPPER_NAMES), min_size=1, max_size=3)))
    return Program(inputs, outputs, tuple(body))


PROPERTY = settings(max_examples=200, deadline=None)


@PROPERTY
@given(exprs)
def test_property_expression_roundtrip(e):
    text = format_expr(e)
    back = parse_expression(text)
    assert back == e, text
    assert format_expr(back) == text


@PROPERTY
@given(polys)
def test_property_poly_roundtrip(e):
    assert parse_expression(format_expr(e), poly=True) == e


@PROPERTY
@given(contractions())
def test_property_contraction_roundtrip(c):
    p = Program((Input("A", ("M", "N")),), ("A",), (c,))
    roundtrip(p)


@PROPERTY
@given(programs())
def test_property_program_roundtrip(p):
    roundtrip(p)
    # parse -> print -> parse -> print is a fixed point from the text side too.
    once = str(parse(str(p)))
    assert str(parse(once)) == once


# ---------------------------------------------------------------------------
# Syntax errors: class, exact position, message, caret
# ---------------------------------------------------------------------------

BAD_PROGRAMS = [
    # (id, source, line, col, message fragment)
    ("missing_semicolon", "function (A) -> (B) {\n  B = A\n  C = A;\n}", 3, 3, "missing ';' after statement, found 'C'"),
    ("missing_semicolon_before_brace", "function (A) -> (B) { B = A }", 1, 29, "missing ';' after statement"),
    ("unknown_aggregation", "function (A[N]) -> (B) {\n  B[i : N] = -(A[i]);\n}", 2, 14,
     "unknown aggregation '-'; expected one of + * > < ="),
    ("missing_aggregation", "function (A[N]) -> (B) { B[i : N] = (A[i]); }", 1, 37, "expected an aggregation"),
    ("missing_sizes", "function (A[N]) -> (B) {\n  B[i, j] = +(A[i]);\n}", 2, 9, "must state their sizes after ':'"),
    ("mismatched_counts", "function (A[N]) -> (B) { B[i, j : N] = +(A[i]); }", 1, 33, "has 2 indices but 1 size"),
    ("unbalanced_operands", "function (A[N]) -> (B) { B[i : N] = +(A[i]; }", 1, 43,
     "expected ')' after the contraction's operands, found ';'"),
    ("unbalanced_parens", "function (A) -> (B) {\n  B = (A + (A * 2);\n}", 2, 19, "expected ')' to close the '(' at 2:7"),
    ("unbalanced_index", "function (A[N]) -> (B) { B[i : N = +(A[i]); }", 1, 34, "expected ',' or ']' after an output size"),
    ("bad_character", "function (A) -> (B) {\n  B = A @ 2;\n}", 2, 9, "unexpected character '@'"),
    ("unterminated_comment", "function (A) -> (B) {\n  B = A; /* never\n closed }", 2, 10, "unterminated comment"),
    ("missing_arrow", "function (A) (B) { B = A; }", 1, 14, "expected '->' between the inputs and the outputs, found '('"),
    ("missing_function", "(A) -> (B) { B = A; }", 1, 1, "expected 'function' at the start of the program"),
    ("empty_index_slot", "function (A[N, N, N]) -> (B) { B[i : N] = +(A[i,,j]); }", 1, 49, "empty index slot"),
    ("bad_ternary_combo", "function (A[N]) -> (B) { B[i : N] = +(A[i] + A[i] ? A[i]); }", 1, 51,
     "ternary must compare two operands with '=='"),
    ("ternary_with_else", "function (A[N]) -> (B) { B[i : N] = +(A[i] == A[i] ? A[i] : A[i]); }", 1, 59,
     "has no ':' branch"),
    ("trailing_garbage", "function (A) -> (B) { B = A; }\nextra", 2, 1, "unexpected 'extra' after the end of the function"),
    ("default_without_name", "function (A[N]) -> (B) { B[i : N] = +(A[i]) default; }", 1, 52,
     "expected a tensor name after 'default', found ';'"),
    ("keyword_as_tensor", "function (A) -> (B) { default = A; }", 1, 23, "found keyword 'default'"),
    ("float_header_dim", "function (A[N, 2.5]) -> (B) { B = A; }", 1, 16, "header dimension '2.5' is not an integer"),
    ("question_without_colon", "function (A) -> (B) {\n  B = A > 0 ? A;\n}", 2, 16,
     "expected ':' in the conditional expression (for the '?' at 2:13), found ';'"),
    ("lowercase_output", "function (A) -> (b) { b = A; }", 1, 18, "write #b to force the class"),
    ("unknown_combination", "function (A[N]) -> (B) { B[i : N] = +(A[i] - A[i]); }", 1, 44, "unknown combination '-'"),
    ("access_in_elementwise", "function (A[N]) -> (B) { B = A[i] + 1; }", 1, 31, "only a contraction's operands are indexed"),
    ("unterminated_body", "function (A) -> (B) { B = A;", 1, 29, "expected '}' to close the function body"),
    ("stray_bracket", "function (A[N]) -> (B) { B[i : N]] = +(A[i]); }", 1, 34, "expected '=' after the output 'B[...]', found ']'"),
    ("float_in_index", "function (A[N]) -> (B) { B[i : N] = +(A[i + 0.5]); }", 1, 45, "floating-point number '0.5'"),
    ("lone_dot_number", "function (A) -> (B) { B = A * 1.; }", 1, 31, "malformed number '1.'"),
    ("unclosed_attribute", "function (A) -> (B) { [[fast B = A; }", 1, 30, "expected ']]' to close the attribute 'fast'"),
    ("constraint_le", "function (A[N]) -> (B) { B[i : N] = +(A[i]), i <= 2; }", 1, 48, "constraints are written 'expr < bound'"),
    ("no_outputs", "function (A) -> () { }", 1, 18, "at least one output"),
    ("call_in_index", "function (A[N]) -> (B) { B[i : N] = +(A[abs(i)]); }", 1, 41, "function call 'abs(...)'"),
]


@pytest.mark.parametrize("src,line,col,fragment", [b[1:] for b in BAD_PROGRAMS], ids=[b[0] for b in BAD_PROGRAMS])
def test_syntax_errors(src, line, col, fragment):
    with pytest.raises(TileSyntaxError) as ei:
        parse(src, "bad.tile")
    err = ei.value
    assert isinstance(err, PolytileError)
    assert (err.loc.file, err.line, err.col) == ("bad.tile", line, col), err.message
    assert fragment in err.message
    text = str(err)
    assert text.startswith(f"bad.tile:{line}:{col}: error: ")
    lines = text.splitlines()
    source_line = src.split("\n")[line - 1]
    assert lines[1] == "  " + source_line
    assert lines[2] == "  " + " " * (col - 1) + "^"


def test_syntax_error_caret_keeps_tabs():
    with pytest.raises(TileSyntaxError) as ei:
        parse("function (A) -> (B) {\n\tB = A ! 2;\n}")
    assert ei.value.col == 8
    assert str(ei.value).splitlines()[2] == "  \t      ^"


def test_parse_expression_rejects_trailing_tokens():
    with pytest.raises(TileSyntaxError) as ei:
        parse_expression("a + b c")
    assert ei.value.col == 7


def test_end_of_input_errors_point_after_the_last_character():
    src = "function (A) -> (B) {\n  B = A;\n\n"
    with pytest.raises(TileSyntaxError) as ei:
        parse(src)
    assert (ei.value.line, ei.value.col) == (2, 9)
    assert "found end of input" in ei.value.message
    assert str(ei.value).splitlines()[1:] == ["    B = A;", "          ^"]
    with pytest.raises(TileSyntaxError) as ei:
        parse("")
    assert (ei.value.line, ei.value.col) == (1, 1)


def test_crlf_sources():
    p = parse("function (A) -> (B) {\r\n  B = A + 1;\r\n}\r\n")
    assert p.body[0].loc.line == 2 and p.body[0].loc.text == "  B = A + 1;"
