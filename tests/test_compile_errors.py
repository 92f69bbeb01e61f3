"""Programs and calls that must fail, with the message a user would see (Halide-style error tests).

Each case names the error class (exactly, not a superclass), a fragment of
the message, and -- where the error points at source text -- the line and
column, found by searching the program for the marked text (a binary
expression is located at its operator, a statement at its first token).  Every failing
compile or call must stop before the C compiler: ``runtime.stats`` (compiles
and cache hits) does not move.  Errors found when lowering (collisions,
unbounded variables, shape errors) come from the first call, and the
reference interpreter must report the same class on the same program.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple, Union

import numpy as np
import pytest

import polytile
from polytile import runtime
from polytile.errors import (CollisionError, NonAffineError, PolytileError, ShapeError, TileSemanticError,
                             TileSyntaxError)


def at(src: str, needle: str, nth: int = 0) -> Tuple[int, int]:
    """1-based (line, column) of the ``nth`` occurrence of ``needle`` in ``src``."""
    pos = -1
    for _ in range(nth + 1):
        pos = src.index(needle, pos + 1)
    line = src.count("\n", 0, pos) + 1
    col = pos - (src.rfind("\n", 0, pos) + 1) + 1
    return line, col


@dataclass
class Case:
    id: str
    src: str
    cls: type
    fragment: str  # a regular expression searched in the message
    where: Union[str, Tuple[int, int], None] = None  # text at the error's location (or line, col)
    args: Optional[Sequence[np.ndarray]] = None  # None: compile() fails; else the call fails
    nth: int = 0

    @property
    def loc(self) -> Optional[Tuple[int, int]]:
        if isinstance(self.where, tuple):
            return self.where
        return at(self.src, self.where, self.nth) if self.where is not None else None


def prog(body: str, header: str = "function (A[N]) -> (B) {") -> str:
    return header + "\n" + body + "\n}"


V4 = np.ones(4)

STATIC = [
    # --- syntax --------------------------------------------------------------
    Case("missing-semicolon", "function (A[N]) -> (B) {\n  B[i : N] = +(A[i])\n}",
         TileSyntaxError, r"missing ';' after statement, found '}'", "}"),
    Case("bad-character", prog("  B[i : N] = %(A[i]);"), TileSyntaxError, r"unexpected character '%'", "%"),
    Case("bad-combination", prog("  B[i : N] = +(A[i] - A[i]);"), TileSyntaxError,
         r"unknown combination '-'; expected one of \+ \* ==", "- A"),
    Case("output-list-parens", "function (A[N]) -> B {\n  B = A;\n}", TileSyntaxError,
         r"expected '\(' before the output list, found 'B'", "B {"),
    Case("unterminated-body", "function (A[N]) -> (B) {\n  B = A;\n", TileSyntaxError,
         r"expected '}' to close the function body, found end of input", (2, 9)),  # just after the last ';'
    Case("float-in-index", prog("  B[i : N] = +(A[i + 0.5]);"), TileSyntaxError,
         r"floating-point number '0\.5' in an index or size expression", "0.5"),
    Case("indexed-elementwise", prog("  B = A[0];"), TileSyntaxError,
         r"'A\[\.\.\.\]' indexes a tensor inside an elementwise expression", "[0]"),
    # --- semantics -----------------------------------------------------------
    Case("unknown-tensor", prog("  B[i : N] = +(A[i] * Q[i]);"), TileSemanticError, r"unknown name 'Q'", "Q"),
    Case("assigned-twice", prog("  B[i : N] = +(A[i]);\n  B = A;"), TileSemanticError,
         r"tensor 'B' is assigned twice \(first at 2:3\)", "B = A"),
    Case("used-before-defined", prog("  B = A + C;\n  C = A;"), TileSemanticError,
         r"'C' is used before it is defined \(at 3:3\)", "C;"),
    Case("output-never-assigned", "function (A[N]) -> (B, C) {\n  B = A;\n}", TileSemanticError,
         r"output 'C' is never assigned", "C)"),
    Case("unknown-function", prog("  B = foo(A);"), TileSemanticError, r"unknown function 'foo' \(builtins: abs,",
         "foo"),
    Case("arity", prog("  B = exp(A, A);"), TileSemanticError, r"exp takes 1 argument, got 2", "exp"),
    Case("access-rank", prog("  B[i : N] = +(A[i, j]);"), TileSemanticError,
         r"'A' has rank 1 but is indexed with 2 indices", "A[i, j]"),
    Case("index-in-size", prog("  B[i : i] = +(A[i]);"), TileSemanticError,
         r"index variable 'i' in an output size", "i]", ),
    Case("index-in-elementwise", prog("  B = A + i;"), TileSemanticError,
         r"index variable 'i' in an elementwise expression", "i;"),
    Case("index-in-constraint-bound", prog("  B[i : N] = +(A[i]), i < j;"), TileSemanticError,
         r"index variable 'j' in a constraint bound", "j;"),
    Case("duplicate-input", "function (A[N], A[M]) -> (B) {\n  B = A;\n}", TileSemanticError,
         r"duplicate input name 'A'", "A[M]"),
    Case("assign-input", prog("  A = A + 1;\n  B = A;"), TileSemanticError, r"input 'A' cannot be assigned", "A = A"),
    Case("dimension-as-tensor", "function (A[N]) -> (N) {\n  N = A;\n}", TileSemanticError,
         r"'N' is a dimension; it cannot also name a tensor", "N = A"),
    Case("as-int-bits", prog("  B = as_int(A, 7);"), TileSemanticError, r"as_int: bits must be one of 8, 16, 32, 64, got 7",
         "7"),
    Case("index-axis", prog("  B = index(A, 1);"), TileSemanticError, r"index: axis 1 is out of range for rank 1",
         "1)"),
    Case("unknown-default", prog("  B[i : N] = +(A[i]) default C;"), TileSemanticError, r"unknown name 'C'", "B[i"),
    # --- not affine ----------------------------------------------------------
    Case("product-of-indices", prog("  B[i : N] = +(A[i * j]);"), NonAffineError,
         r"index expression 'i \* j' is not affine: both factors contain index variables", "* j"),
    Case("divide-by-index", prog("  B[i : N] = +(A[i / j]);"), NonAffineError,
         r"index expression 'i / j' is not affine: the divisor contains index variables", "/ j"),
    Case("product-in-output", prog("  B[i * (j + 1) : N] = +(A[i]), j < 2;"), NonAffineError,
         r"index expression 'i \* \(j \+ 1\)' is not affine", "* (j"),
]

MM = "function (A[M, K], B[K, 3]) -> (C) {\n  C[i, j : M, 3] = +(A[i, k] * B[k, j]);\n}"
A23, B33 = np.ones((2, 3)), np.ones((3, 3))

AT_CALL = [
    # --- collisions ----------------------------------------------------------
    Case("collision-reduction-var", prog("  B[i : N] = =(A[j]);"), CollisionError,
         r"B\[\d+\] twice.*\(i=\d+, j=\d+\).*\(i=\d+, j=\d+\)", "B[i", args=(V4,)),
    Case("collision-window", prog("  B[i : N] = =(A[i + j]), j < 2;"), CollisionError,
         r"B\[\d+\] twice.*\(i=\d+, j=\d+\).*\(i=\d+, j=\d+\)", "B[i", args=(V4,)),
    Case("collision-2d", "function (X[M, N]) -> (O) {\n  O[i + j, 0 : M + N, 1] = =(X[i, j]);\n}", CollisionError,
         r"O\[\d+, 0\] twice.*\(i=\d+, j=\d+\).*\(i=\d+, j=\d+\)", "O[i", args=(np.ones((3, 3)),)),
    # --- domains -------------------------------------------------------------
    Case("unbounded-variable", prog("  B[i : N] = +(A[i + j - k]);"), TileSemanticError,
         r"index variable '[jk]' (of B )?has no finite range", "B[i", args=(V4,)),
    Case("negative-output-size", "function (I[H], F[KH]) -> (O) {\n  O[y : H - KH + 1] = +(I[y + ky] * F[ky]);\n}",
         ShapeError, r"O: size of axis 0 is H - KH \+ 1 = -1 < 0", "+ 1]", args=(np.ones(3), np.ones(5))),
    Case("index-division-by-zero", prog("  B[i : N] = +(A[i / 0]);"), ShapeError,
         r"division by zero in index expression 'i / 0'", "/ 0", args=(V4,)),
    Case("default-shape", "function (A[N], D[M]) -> (B) {\n  B[i : N] = +(A[i]) default D;\n}", ShapeError,
         r"default tensor D has shape \(3,\) but the output has shape \(4,\)", "B[i", args=(V4, np.ones(3))),
    Case("broadcast", "function (A[N], B[M]) -> (C) {\n  C = A + B;\n}", ShapeError,
         r"C: cannot broadcast shapes \(4,\) and \(3,\) in 'A \+ B'", "+ B", args=(V4, np.ones(3))),
    # --- arrays that do not fit the header -----------------------------------
    Case("wrong-rank", MM, ShapeError, r"A: expected rank 2 \[M, K\], got shape \(2, 3, 1\)", "A[M",
         args=(np.ones((2, 3, 1)), B33)),
    Case("repeated-dim-mismatch", MM, ShapeError, r"dimension K: A axis 1 has 3 but B axis 0 has 4", "B[K",
         args=(A23, np.ones((4, 3)))),
    Case("repeated-dim-same-tensor", "function (A[N, N]) -> (B) {\n  B = A;\n}", ShapeError,
         r"dimension N: A axis 0 has 2 but A axis 1 has 3", "A[N", args=(A23,)),
    Case("fixed-dim", MM, ShapeError, r"B: axis 1 is fixed to 3 in the header, got 4 \(shape \(3, 4\)\)", "B[K",
         args=(A23, np.ones((3, 4)))),
    Case("too-few-arrays", MM, ShapeError, r"expected 2 inputs \(A, B\), got 1", args=(A23,)),
    Case("too-many-arrays", MM, ShapeError, r"expected 2 inputs \(A, B\), got 3", args=(A23, B33, B33)),
    Case("complex64", MM, ShapeError,
         r"A: unsupported dtype complex64 \(supported: bool, int8, int16, int32, int64, uint8, uint16, uint32, "
         r"uint64, float16, float32, float64\)",
         args=(np.ones((2, 3), np.complex64), B33)),
    Case("datetime", MM, ShapeError, r"B: unsupported dtype datetime64\[s\]",
         args=(A23, np.zeros((3, 3), "datetime64[s]"))),
    Case("object", MM, ShapeError, r"A: unsupported dtype object", args=(np.ones((2, 3), object), B33)),
]


def test_enough_cases():
    kinds = {c.cls for c in STATIC + AT_CALL}
    assert len(STATIC) + len(AT_CALL) >= 15
    assert kinds == {TileSyntaxError, TileSemanticError, NonAffineError, CollisionError, ShapeError}


def _check(exc: PolytileError, case: Case) -> None:
    assert type(exc) is case.cls, f"{type(exc).__name__} instead of {case.cls.__name__}: {exc}"
    assert re.search(case.fragment, exc.message, re.S), f"message {exc.message!r} lacks /{case.fragment}/"
    if case.loc is not None:
        assert exc.loc is not None, f"no source location on: {exc}"
        assert (exc.line, exc.col) == case.loc, f"at {exc.line}:{exc.col}, expected {case.loc}: {exc}"
        # The rendered message shows the place and the line with a caret under the column.
        text = str(exc)
        assert text.startswith(f"<string>:{exc.line}:{exc.col}: error: ")
        src_line = case.src.splitlines()[exc.line - 1]
        caret = [ln for ln in text.splitlines() if ln.strip() == "^"]
        assert src_line.rstrip() in text and caret and caret[0].index("^") == exc.col - 1 + 2


class NoBuild:
    """Asserts the C compiler (and the kernel cache) is never reached inside the block."""

    def __enter__(self):
        self.before = (runtime.stats.compiles, runtime.stats.cache_hits)
        return self

    def __exit__(self, *exc):
        assert (runtime.stats.compiles, runtime.stats.cache_hits) == self.before, "the C compiler was reached"
        return False


@pytest.mark.parametrize("case", STATIC, ids=lambda c: c.id)
def test_compile_fails(case):
    with NoBuild():
        with pytest.raises(PolytileError) as info:
            polytile.compile(case.src)
    _check(info.value, case)
    # The oracle reads the same program and must refuse it the same way.
    with pytest.raises(PolytileError) as ref_info:
        polytile.reference(case.src, V4)
    _check(ref_info.value, case)


@pytest.mark.parametrize("case", AT_CALL, ids=lambda c: c.id)
def test_call_fails(case):
    with NoBuild():
        k = polytile.compile(case.src)
        with pytest.raises(PolytileError) as info:
            k(*case.args)
        _check(info.value, case)
        # Asking again (the same shapes) fails the same way, still without compiling.
        with pytest.raises(case.cls):
            k(*case.args)
        with pytest.raises(case.cls):
            k.source(*case.args)


@pytest.mark.parametrize("case", [c for c in AT_CALL if c.cls in (CollisionError, TileSemanticError)],
                         ids=lambda c: c.id)
def test_oracle_agrees_on_call_errors(case):
    with pytest.raises(PolytileError) as info:
        polytile.reference(case.src, *case.args)
    _check(info.value, case)


def test_named_argument_errors():
    k = polytile.compile(MM)
    with NoBuild():
        with pytest.raises(ShapeError, match=r"unknown input\(s\) Z; the inputs are A, B"):
            k(A=A23, B=B33, Z=A23)
        with pytest.raises(ShapeError, match=r"missing B"):
            k(A=A23)


def test_error_from_file_names_the_file(tmp_path):
    path = tmp_path / "bad.tile"
    src = prog("  B[i : N] = +(A[i * j]);")
    path.write_text(src)
    with NoBuild(), pytest.raises(NonAffineError) as info:
        polytile.compile(path)
    line, col = at(src, "* j")  # binary expressions point at their operator
    assert str(info.value).startswith(f"{path}:{line}:{col}: error: index expression 'i * j'")


def test_missing_file_is_a_user_error(tmp_path):
    with NoBuild(), pytest.raises(PolytileError, match="no such Tile file"):
        polytile.compile(tmp_path / "nope.tile")
