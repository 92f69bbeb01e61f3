"""The Tile-level IR: frozen dataclasses, printed back as valid Tile text.

Every node is immutable and compares by value; source locations ride along
but are excluded from equality, so ``parse(str(p)) == p`` holds for any
parsed program ``p``.

One expression family serves index polynomials, size expressions and
elementwise expressions; which roles a node may play is checked by
:mod:`polytile.sema`, not by the type system.

Example::

    >>> from polytile.frontends.tile import parse
    >>> p = parse("function (A[M, K], B[K, N]) -> (C) { C[i, j : M, N] = +(A[i, k] * B[k, j]); }")
    >>> print(p)
    function (A[M, K], B[K, N]) -> (C) {
      C[i, j : M, N] = +(A[i, k] * B[k, j]);
    }
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Optional, Tuple, Union

from .errors import SourceLocation

Loc = Optional[SourceLocation]


def _loc() -> Loc:
    return field(default=None, compare=False, repr=False, hash=False)


# ---------------------------------------------------------------------------
# Expressions
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Int:
    """An integer literal (the parser folds a leading minus into the value)."""

    value: int
    loc: Loc = _loc()


@dataclass(frozen=True)
class Float:
    """A floating-point literal."""

    value: float
    loc: Loc = _loc()


@dataclass(frozen=True)
class Index:
    """An index variable (lowercase class: ``i``, ``ky``, ``$Name``)."""

    name: str
    loc: Loc = _loc()


@dataclass(frozen=True)
class Ref:
    """A tensor or dimension name (uppercase class: ``A``, ``KH``, ``#name``)."""

    name: str
    loc: Loc = _loc()


@dataclass(frozen=True)
class Unary:
    """``-x`` or ``~x`` (bitwise not)."""

    op: str
    operand: "Expr"
    loc: Loc = _loc()


@dataclass(frozen=True)
class Binary:
    """``lhs op rhs`` with op in ``+ - * / == != < > <= >= & | ^ << >>``."""

    op: str
    lhs: "Expr"
    rhs: "Expr"
    loc: Loc = _loc()


@dataclass(frozen=True)
class Call:
    """A builtin call: ``exp(X)``, ``as_float(X, 32)``, ``index(T, 0)``."""

    func: str
    args: Tuple["Expr", ...]
    loc: Loc = _loc()


@dataclass(frozen=True)
class Cond:
    """``cond ? then : else_`` (elementwise select)."""

    cond: "Expr"
    then: "Expr"
    else_: "Expr"
    loc: Loc = _loc()


Expr = Union[Int, Float, Index, Ref, Unary, Binary, Call, Cond]

BINARY_OPS = ("+", "-", "*", "/", "==", "!=", "<", ">", "<=", ">=", "&", "|", "^", "<<", ">>")
COMPARISONS = ("==", "!=", "<", ">", "<=", ">=")


def walk(e: Expr) -> Iterator[Expr]:
    """Yield ``e`` and every sub-expression, parents first."""
    yield e
    if isinstance(e, Unary):
        yield from walk(e.operand)
    elif isinstance(e, Binary):
        yield from walk(e.lhs)
        yield from walk(e.rhs)
    elif isinstance(e, Call):
        for a in e.args:
            yield from walk(a)
    elif isinstance(e, Cond):
        yield from walk(e.cond)
        yield from walk(e.then)
        yield from walk(e.else_)


def index_names(e: Expr) -> Tuple[str, ...]:
    """Index variables of ``e`` in order of first appearance."""
    seen: dict = {}
    for n in walk(e):
        if isinstance(n, Index):
            seen.setdefault(n.name, None)
    return tuple(seen)


# ---------------------------------------------------------------------------
# Statements
# ---------------------------------------------------------------------------

AGGREGATIONS = {"+": "sum", "*": "prod", ">": "max", "<": "min", "=": "assign"}
COMBINATIONS = {"+": "add", "*": "mul", "==": "eq", "?": "cond"}


@dataclass(frozen=True)
class Access:
    """A tensor indexed by polynomials: ``A[i, k + 1]``."""

    tensor: str
    indices: Tuple[Expr, ...]
    loc: Loc = _loc()


@dataclass(frozen=True)
class Constraint:
    """``expr < bound``, meaning ``0 <= expr < bound``."""

    expr: Expr
    bound: Expr
    loc: Loc = _loc()


@dataclass(frozen=True)
class Attr:
    """``[[name]]`` or ``[[name(arg, ...)]]`` before a statement (kept, printed)."""

    name: str
    args: Tuple[str, ...] = ()
    loc: Loc = _loc()


@dataclass(frozen=True)
class Contraction:
    """``out[indices : sizes] = agg(operands combined by combo), constraints...``.

    ``combo`` is ``None`` for one operand, ``'+' '*' '=='`` for two, and
    ``'?'`` for the ternary ``A == B ? C`` (three operands).
    """

    output: str
    indices: Tuple[Expr, ...]
    sizes: Tuple[Expr, ...]
    agg: str
    combo: Optional[str]
    operands: Tuple[Access, ...]
    constraints: Tuple[Constraint, ...] = ()
    default: Optional[str] = None
    no_defract: bool = False
    attrs: Tuple[Attr, ...] = ()
    loc: Loc = _loc()

    @property
    def target(self) -> str:
        return self.output

    def index_vars(self) -> Tuple[str, ...]:
        """All index variables: output's first, then operands', then constraints'."""
        seen: dict = {}
        exprs = list(self.indices)
        for op in self.operands:
            exprs.extend(op.indices)
        for c in self.constraints:
            exprs.append(c.expr)
        for e in exprs:
            for n in index_names(e):
                seen.setdefault(n, None)
        return tuple(seen)


@dataclass(frozen=True)
class Assign:
    """An elementwise statement ``Y = expr`` (numpy broadcasting)."""

    target: str
    expr: Expr
    attrs: Tuple[Attr, ...] = ()
    loc: Loc = _loc()


@dataclass(frozen=True)
class DimDef:
    """A dimension statement ``HO = (H + 1) / 2`` (integer, floor division)."""

    target: str
    expr: Expr
    attrs: Tuple[Attr, ...] = ()
    loc: Loc = _loc()


Stmt = Union[Contraction, Assign, DimDef]


@dataclass(frozen=True)
class Input:
    """A header input.

    ``dims`` is ``None`` for an input of any rank (``I``), ``()`` for a scalar
    (``I[]``), else a tuple of dimension names (``str``) and fixed sizes (``int``).
    """

    name: str
    dims: Optional[Tuple[Union[str, int], ...]]
    loc: Loc = _loc()


@dataclass(frozen=True)
class Program:
    """A whole Tile function."""

    inputs: Tuple[Input, ...]
    outputs: Tuple[str, ...]
    body: Tuple[Stmt, ...]
    name: str = field(default="<string>", compare=False)  # file name, for messages

    def __str__(self) -> str:
        return format_program(self)

    def statement(self, target: str) -> Stmt:
        for s in self.body:
            if s.target == target:
                return s
        raise KeyError(target)

    @property
    def input_names(self) -> Tuple[str, ...]:
        return tuple(i.name for i in self.inputs)


# ---------------------------------------------------------------------------
# Printing
# ---------------------------------------------------------------------------

# C precedence, higher binds tighter.
_PREC = {"?": 1, "|": 2, "^": 3, "&": 4, "==": 5, "!=": 5, "<": 6, ">": 6, "<=": 6, ">=": 6, "<<": 7, ">>": 7,
         "+": 8, "-": 8, "*": 9, "/": 9}
_UNARY_PREC = 10


# Words the lexer reads as keywords; a lowercase-class name spelled like one
# needs the ``$`` sigil to stay a name.
_KEYWORDS = frozenset({"function", "default", "no_defract"})


def upper_name(name: str) -> str:
    """A tensor/dimension name as Tile text (``#`` forces the uppercase class).

    >>> upper_name("A"), upper_name("out")
    ('A', '#out')
    """
    # Only ASCII A-Z starts an uppercase-class name in the lexer.
    return name if "A" <= name[:1] <= "Z" else "#" + name


def lower_name(name: str) -> str:
    """An index/function name as Tile text (``$`` forces the lowercase class).

    >>> lower_name("i"), lower_name("K"), lower_name("default")
    ('i', '$K', '$default')
    """
    if "A" <= name[:1] <= "Z" or name in _KEYWORDS:
        return "$" + name
    return name


def _format_float(value: float) -> str:
    # repr round-trips exactly; infinities have no Tile spelling of their own,
    # but 1e999 overflows to inf when read back.
    v = float(value)
    if v == float("inf"):
        return "1e999"
    if v == float("-inf"):
        return "-1e999"
    return repr(v)


def _prec(e: Expr) -> int:
    if isinstance(e, Binary):
        return _PREC[e.op]
    if isinstance(e, Cond):
        return _PREC["?"]
    if isinstance(e, Unary):
        return _UNARY_PREC
    if isinstance(e, (Int, Float)) and _format_expr_literal(e).startswith("-"):
        # A negative literal prints as '-3', which reads back as the folded
        # literal only where a unary minus may stand.
        return _UNARY_PREC
    return 99


def _format_expr_literal(e: Union[Int, Float]) -> str:
    return str(e.value) if isinstance(e, Int) else _format_float(e.value)


def format_expr(e: Expr) -> str:
    """Render an expression with the fewest parentheses C precedence allows.

    The text reads back to an equal tree: left-associative operators get
    parentheses on the right only, ``Unary('-', Int(3))`` prints as ``-(3)``
    because ``-3`` is the literal ``Int(-3)``.

    >>> format_expr(Binary("*", Binary("+", Index("i"), Int(1)), Int(-2)))
    '(i + 1) * -2'
    """
    if isinstance(e, (Int, Float)):
        return _format_expr_literal(e)
    if isinstance(e, Index):
        return lower_name(e.name)
    if isinstance(e, Ref):
        return upper_name(e.name)
    if isinstance(e, Unary):
        inner = format_expr(e.operand)
        # Parenthesise a literal operand too: '-3' would read back as the
        # folded literal Int(-3), not Unary('-', Int(3)).
        if _prec(e.operand) < _UNARY_PREC or inner.startswith("-") or isinstance(e.operand, (Int, Float)):
            inner = f"({inner})"
        return f"{e.op}{inner}"
    if isinstance(e, Binary):
        p = _PREC[e.op]
        lhs = format_expr(e.lhs)
        rhs = format_expr(e.rhs)
        if _prec(e.lhs) < p:
            lhs = f"({lhs})"
        if _prec(e.rhs) <= p:
            rhs = f"({rhs})"
        return f"{lhs} {e.op} {rhs}"
    if isinstance(e, Call):
        return f"{lower_name(e.func)}({', '.join(format_expr(a) for a in e.args)})"
    if isinstance(e, Cond):
        p = _PREC["?"]
        c = format_expr(e.cond)
        if _prec(e.cond) <= p:
            c = f"({c})"
        t = format_expr(e.then)
        if _prec(e.then) <= p:
            t = f"({t})"
        f = format_expr(e.else_)
        return f"{c} ? {t} : {f}"
    raise TypeError(f"not an expression: {e!r}")


def format_access(a: Access) -> str:
    """``A[i, k + 1]``.

    >>> format_access(Access("A", (Index("i"), Index("k"))))
    'A[i, k]'
    """
    return f"{upper_name(a.tensor)}[{', '.join(format_expr(i) for i in a.indices)}]"


def _format_attrs(attrs: Tuple[Attr, ...]) -> str:
    out = []
    for a in attrs:
        args = f"({', '.join(a.args)})" if a.args else ""
        out.append(f"[[{a.name}{args}]] ")
    return "".join(out)


def format_stmt(s: Stmt) -> str:
    """Render one statement without the trailing ``;``.

    >>> format_stmt(DimDef("HO", Binary("/", Ref("H"), Int(2))))
    'HO = H / 2'
    """
    attrs = _format_attrs(s.attrs)
    if isinstance(s, Contraction):
        idx = ", ".join(format_expr(i) for i in s.indices)
        if s.sizes:
            idx += " : " + ", ".join(format_expr(z) for z in s.sizes)
        ops = [format_access(o) for o in s.operands]
        if s.combo is None:
            rhs = ops[0]
        elif s.combo == "?":
            rhs = f"{ops[0]} == {ops[1]} ? {ops[2]}"
        else:
            rhs = f" {s.combo} ".join(ops)
        text = f"{upper_name(s.output)}[{idx}] = {s.agg}({rhs})"
        for c in s.constraints:
            text += f", {format_expr(c.expr)} < {format_expr(c.bound)}"
        if s.no_defract:
            text += " no_defract"
        if s.default is not None:
            text += f" default {upper_name(s.default)}"
        return attrs + text
    return f"{attrs}{upper_name(s.target)} = {format_expr(s.expr)}"


def format_input(i: Input) -> str:
    """A header input: ``A``, ``A[]`` or ``A[M, 3]``.

    >>> format_input(Input("A", ("M", 3))), format_input(Input("S", ()))
    ('A[M, 3]', 'S[]')
    """
    if i.dims is None:
        return upper_name(i.name)
    return f"{upper_name(i.name)}[{', '.join(str(d) if isinstance(d, int) else upper_name(d) for d in i.dims)}]"


def format_program(p: Program) -> str:
    """The whole function as Tile text, one statement a line (``str(p)`` calls this).

    >>> print(format_program(Program((Input("X", None),), ("Y",), (Assign("Y", Ref("X")),))))
    function (X) -> (Y) {
      Y = X;
    }
    """
    head = f"function ({', '.join(format_input(i) for i in p.inputs)}) -> ({', '.join(upper_name(o) for o in p.outputs)}) {{"
    lines = [head] + [f"  {format_stmt(s)};" for s in p.body] + ["}"]
    return "\n".join(lines)
