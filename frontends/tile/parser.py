"""Recursive-descent parser for the Tile language (see ``tile-language.md``).

The parser pulls tokens lazily from :mod:`.lexer` and builds the frozen IR of
:mod:`polytile.ir`.  It checks syntax only; names, shapes and affinity are
:mod:`polytile.sema`'s business, with one exception the grammar itself needs:
``NAME = expr`` is a :class:`~polytile.ir.DimDef` when ``expr`` uses only
integers, known dimension names and ``+ - * /`` (unary ``-`` too), else an
elementwise :class:`~polytile.ir.Assign`.

Locations: every node's ``loc`` points at its first character, except the
operator nodes :class:`~polytile.ir.Binary` and :class:`~polytile.ir.Cond`,
which point at their operator (``*``, ``?``) so that a message about
``i * j`` puts the caret under the multiplication.  A folded negative literal
(``-3``) points at its minus sign; a statement points at its target name (after
any attributes).

Example::

    >>> p = parse("function (A[N]) -> (B) { B[i : N] = +(A[i]); }")
    >>> p.body[0].operands[0].tensor
    'A'
"""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Set, Tuple, Union

from polytile.errors import SourceLocation, TileSyntaxError, recursion_room
from polytile.ir import (
    AGGREGATIONS,
    Access,
    Assign,
    Attr,
    Binary,
    Call,
    Cond,
    Constraint,
    Contraction,
    DimDef,
    Expr,
    Float,
    Index,
    Input,
    Int,
    Program,
    Ref,
    Stmt,
    Unary,
)

from .lexer import EOF, FLOAT, INT, KEYWORD, LOWER, OP, UPPER, Lexer, Source, Token

# Binary operator levels, loosest first (C precedence); all left-associative.
_BINARY_LEVELS: Tuple[Tuple[str, ...], ...] = (
    ("|",),
    ("^",),
    ("&",),
    ("==", "!="),
    ("<", ">", "<=", ">="),
    ("<<", ">>"),
    ("+", "-"),
    ("*", "/"),
)
# Index polynomials and sizes only use the arithmetic levels: a '<' after a
# polynomial is the constraint's bound separator, not a comparison.
_POLY_FIRST_LEVEL = 6

_AGG_LIST = " ".join(AGGREGATIONS)  # "+ * > < ="
#: Limits that keep every later pass (all recursive over the expression tree) far from Python's
#: recursion limit, which polytile's drivers raise to 20,000 while they run (polytile.pipeline).
MAX_DEPTH = 500
MAX_TERMS = 2000
_COMBOS = ("+", "*", "==")


class Parser:
    """One parse of one source text; use :func:`parse` rather than this directly.

    >>> Parser("function () -> (X) { X = 1.5; }").parse_program().body[0].expr
    Float(value=1.5)
    """

    def __init__(self, text: str, filename: str = "<string>"):
        self.source = Source(text, filename)
        self._stream = Lexer(self.source).tokens()
        self._buf: List[Token] = []
        self._depth = 0  # open parentheses, calls, unary operators and conditionals

    # -- token plumbing ------------------------------------------------------

    def peek(self, k: int = 0) -> Token:
        """The token ``k`` positions ahead (EOF repeats forever at the end)."""
        while len(self._buf) <= k:
            if self._buf and self._buf[-1].kind == EOF:
                self._buf.append(self._buf[-1])
            else:
                self._buf.append(next(self._stream))
        return self._buf[k]

    def advance(self) -> Token:
        tok = self.peek()
        self._buf.pop(0)
        return tok

    def at(self, *ops: str, k: int = 0) -> bool:
        return self.peek(k).is_op(*ops)

    def loc(self, tok: Token) -> SourceLocation:
        return self.source.location(tok.line, tok.col)

    def error(self, message: str, tok: Token) -> TileSyntaxError:
        return TileSyntaxError(message, self.loc(tok))

    def expect(self, op: str, context: str) -> Token:
        """Consume operator ``op`` or fail with "expected 'op' <context>, found ..."."""
        tok = self.peek()
        if not tok.is_op(op):
            raise self.error(f"expected '{op}' {context}, found {tok.describe()}", tok)
        return self.advance()

    def expect_upper(self, what: str) -> Token:
        """Consume a tensor/dimension-class name, explaining ``#`` if it is lowercase."""
        tok = self.peek()
        if tok.kind == UPPER:
            return self.advance()
        if tok.kind == LOWER:
            raise self.error(
                f"expected {what}, found '{tok.text}': tensor and dimension names start with an "
                f"uppercase letter (write #{tok.value} to force the class)",
                tok,
            )
        raise self.error(f"expected {what}, found {tok.describe()}", tok)

    # -- program ---------------------------------------------------------------

    def parse_program(self) -> Program:
        """``function (inputs) -> (outputs) { stmt; ... }`` followed by end of input."""
        tok = self.peek()
        if not tok.is_keyword("function"):
            raise self.error(f"expected 'function' at the start of the program, found {tok.describe()}", tok)
        self.advance()
        self.expect("(", "after 'function'")
        inputs: List[Input] = []
        if not self.at(")"):
            while True:
                inputs.append(self._input())
                if not self.at(","):
                    break
                self.advance()
        tok = self.peek()
        if not tok.is_op(")"):
            raise self.error(f"expected ',' or ')' after an input, found {tok.describe()}", tok)
        self.advance()
        self.expect("->", "between the inputs and the outputs")
        self.expect("(", "before the output list")
        outputs: List[str] = []
        if self.at(")"):
            raise self.error("a function needs at least one output", self.peek())
        while True:
            outputs.append(self.expect_upper("an output name").value)
            if not self.at(","):
                break
            self.advance()
        tok = self.peek()
        if not tok.is_op(")"):
            raise self.error(f"expected ',' or ')' after an output, found {tok.describe()}", tok)
        self.advance()
        self.expect("{", "to open the function body")

        dims: Set[str] = {d for i in inputs if i.dims for d in i.dims if isinstance(d, str)}
        body: List[Stmt] = []
        while not self.at("}"):
            if self.peek().kind == EOF:
                raise self.error("expected '}' to close the function body, found end of input", self.peek())
            stmt = self._statement(dims)
            if isinstance(stmt, DimDef):
                dims.add(stmt.target)
            body.append(stmt)
            tok = self.peek()
            if not tok.is_op(";"):
                raise self.error(f"missing ';' after statement, found {tok.describe()}", tok)
            self.advance()
        self.advance()  # '}'
        tok = self.peek()
        if tok.kind != EOF:
            raise self.error(f"unexpected {tok.describe()} after the end of the function", tok)
        return Program(tuple(inputs), tuple(outputs), tuple(body), name=self.source.filename)

    def _input(self) -> Input:
        name = self.expect_upper("an input name")
        if not self.at("["):
            return Input(name.value, None, loc=self.loc(name))
        self.advance()
        dims: List[Union[str, int]] = []
        if not self.at("]"):
            while True:
                tok = self.peek()
                if tok.kind == UPPER:
                    dims.append(tok.value)
                elif tok.kind == INT:
                    dims.append(tok.value)
                elif tok.kind == FLOAT:
                    raise self.error(
                        f"header dimension '{tok.text}' is not an integer; write a dimension name or an integer size",
                        tok,
                    )
                elif tok.kind == LOWER:
                    raise self.error(
                        f"dimension names start with an uppercase letter, found '{tok.text}' "
                        f"(write #{tok.value} to force the class)",
                        tok,
                    )
                elif tok.is_op(",", "]"):
                    raise self.error(f"empty dimension slot in input '{name.text}'", tok)
                else:
                    raise self.error(f"expected a dimension name or an integer size, found {tok.describe()}", tok)
                self.advance()
                if not self.at(","):
                    break
                self.advance()
        tok = self.peek()
        if not tok.is_op("]"):
            raise self.error(f"expected ',' or ']' after a dimension of '{name.text}', found {tok.describe()}", tok)
        self.advance()
        return Input(name.value, tuple(dims), loc=self.loc(name))

    # -- statements ----------------------------------------------------------

    def _statement(self, dims: Set[str]) -> Stmt:
        attrs: List[Attr] = []
        while self.at("["):
            attrs.append(self._attribute())
        tok = self.peek()
        if tok.is_op(";"):
            raise self.error("empty statement: expected a tensor name, found ';'", tok)
        target = self.expect_upper("a statement (a tensor name)")
        if self.at("["):
            return self._contraction(target, tuple(attrs))
        if self.at("=="):
            raise self.error(
                f"'{target.text} ==' is not a statement; did you mean '{target.text} = ...'?", self.peek()
            )
        self.expect("=", f"or '[' after '{target.text}'")
        first = self.peek()
        if first.is_op(*AGGREGATIONS) and self.at("(", k=1):
            raise self.error(
                f"a contraction needs an output index list and sizes: {target.text}[i, ... : N, ...] = {first.text}(...)",
                first,
            )
        expr = self.parse_expr()
        kind = DimDef if _is_dim_expr(expr, dims) else Assign
        return kind(target.value, expr, attrs=tuple(attrs), loc=self.loc(target))

    def _attribute(self) -> Attr:
        """``[[name]]`` or ``[[name(arg, ...)]]``; arguments are kept as raw source text."""
        open1 = self.advance()
        if not self.at("["):
            raise self.error(f"expected '[[' to start an attribute, found {self.peek().describe()}", self.peek())
        self.advance()
        tok = self.peek()
        if tok.kind not in (UPPER, LOWER, KEYWORD):
            raise self.error(f"expected an attribute name after '[[', found {tok.describe()}", tok)
        self.advance()
        args: List[str] = []
        if self.at("("):
            paren = self.advance()
            if self.at(")"):
                self.advance()
            else:
                while True:
                    args.append(self._attribute_arg(paren))
                    if self.advance().is_op(")"):  # the separator: ',' or ')'
                        break
        for _ in range(2):
            t = self.peek()
            if not t.is_op("]"):
                raise self.error(f"expected ']]' to close the attribute '{tok.text}', found {t.describe()}", t)
            self.advance()
        return Attr(str(tok.value), tuple(args), loc=self.loc(open1))

    def _attribute_arg(self, paren: Token) -> str:
        """Tokens up to a ',' or ')' at nesting depth 0 (left unconsumed), as source text."""
        depth = 0
        first: Optional[Token] = None
        last: Optional[Token] = None
        while True:
            tok = self.peek()
            if tok.kind == EOF or (tok.is_op(";", "{", "}") and depth == 0):
                raise self.error(f"unterminated attribute arguments: expected ')' for '(' at {paren.line}:{paren.col}", tok)
            if depth == 0 and tok.is_op(",", ")"):
                break
            if tok.is_op("(", "["):
                depth += 1
            elif tok.is_op(")", "]"):
                if depth == 0:
                    raise self.error(
                        f"expected ')' to close the attribute arguments opened at {paren.line}:{paren.col}, "
                        f"found {tok.describe()}",
                        tok,
                    )
                depth -= 1
            first = first or tok
            last = tok
            self.advance()
        if first is None:
            raise self.error("empty attribute argument", self.peek())
        return self.source.text[first.start:last.end]

    def _contraction(self, target: Token, attrs: Tuple[Attr, ...]) -> Contraction:
        name = target.text
        self.advance()  # '['
        indices: List[Expr] = []
        if not self.at("]", ":"):
            indices = self._poly_list("output index", (":", "]"))
        colon: Optional[Token] = None
        sizes: List[Expr] = []
        if self.at(":"):
            colon = self.advance()
            sizes = self._poly_list("output size", ("]",))
        close = self.peek()
        if not close.is_op("]"):
            what = "size" if colon else "index"
            raise self.error(f"expected ']' after the output {what} list, found {close.describe()}", close)
        self.advance()
        if colon is None and indices:
            raise self.error(
                f"outputs must state their sizes after ':' (as in {name}[i, j : M, N]); "
                f"'{name}' has indices but no sizes",
                close,
            )
        if colon is not None and len(indices) != len(sizes):
            raise self.error(
                f"output '{name}' has {len(indices)} ind{'ex' if len(indices) == 1 else 'ices'} "
                f"but {len(sizes)} size{'' if len(sizes) == 1 else 's'}; they must match one to one",
                colon,
            )

        # '=' then the aggregation; '==(' is '=' followed by the assign aggregation.
        eq = self.peek()
        if eq.is_op("=="):
            self.advance()
            agg = "="
        else:
            if not eq.is_op("="):
                raise self.error(f"expected '=' after the output '{name}[...]', found {eq.describe()}", eq)
            self.advance()
            tok = self.peek()
            if tok.is_op(*AGGREGATIONS):
                agg = str(self.advance().value)
            elif tok.kind == OP and not tok.is_op("("):
                raise self.error(f"unknown aggregation '{tok.text}'; expected one of {_AGG_LIST}", tok)
            else:
                raise self.error(
                    f"expected an aggregation (one of {_AGG_LIST}) before the contraction's '(', found {tok.describe()}",
                    tok,
                )
        self.expect("(", f"after the aggregation '{agg}'")

        operands = [self._tensor_ref()]
        combo: Optional[str] = None
        tok = self.peek()
        if tok.is_op(*_COMBOS):
            combo = str(self.advance().value)
            operands.append(self._tensor_ref())
            if combo == "==" and self.at("?"):
                self.advance()
                combo = "?"
                operands.append(self._tensor_ref())
        tok = self.peek()
        if tok.is_op("?"):
            raise self.error(
                "a contraction's ternary must compare two operands with '==': A[...] == B[...] ? C[...]", tok
            )
        if tok.is_op(":") and combo == "?":
            raise self.error(
                "a contraction's ternary has no ':' branch (A[...] == B[...] ? C[...]); "
                "other cells take the aggregation's identity",
                tok,
            )
        if combo is not None and tok.is_op(*_COMBOS):
            raise self.error(
                "a contraction combines at most two operands (or three in A[...] == B[...] ? C[...])", tok
            )
        if combo is None and tok.kind == OP and not tok.is_op(")", ",", ";", "]", "[", "(", "{", "}"):
            raise self.error(f"unknown combination '{tok.text}'; expected one of + * ==", tok)
        if not tok.is_op(")"):
            raise self.error(f"expected ')' after the contraction's operands, found {tok.describe()}", tok)
        self.advance()

        constraints: List[Constraint] = []
        while self.at(","):
            self.advance()
            constraints.append(self._constraint())

        default: Optional[str] = None
        no_defract = False
        while True:
            tok = self.peek()
            if tok.is_keyword("no_defract"):
                self.advance()
                no_defract = True
            elif tok.is_keyword("default"):
                self.advance()
                if default is not None:
                    raise self.error(f"'{name}' has two 'default' tensors", tok)
                default = self.expect_upper("a tensor name after 'default'").value
            elif tok.is_op(","):
                raise self.error("constraints must come before 'no_defract' and 'default'", tok)
            else:
                break
        return Contraction(
            output=target.value,
            indices=tuple(indices),
            sizes=tuple(sizes),
            agg=agg,
            combo=combo,
            operands=tuple(operands),
            constraints=tuple(constraints),
            default=default,
            no_defract=no_defract,
            attrs=attrs,
            loc=self.loc(target),
        )

    def _poly_list(self, what: str, ends: Tuple[str, ...]) -> List[Expr]:
        """``poly {, poly}`` stopping before one of ``ends`` (checked by the caller)."""
        items: List[Expr] = []
        while True:
            tok = self.peek()
            if tok.is_op(",", *ends):
                raise self.error(f"empty {what} slot: expected an expression, found {tok.describe()}", tok)
            items.append(self.parse_poly())
            tok = self.peek()
            if not tok.is_op(","):
                if not tok.is_op(*ends):
                    want = " or ".join(f"'{e}'" for e in (",",) + ends)
                    raise self.error(f"expected {want} after an {what}, found {tok.describe()}", tok)
                return items
            self.advance()

    def _tensor_ref(self) -> Access:
        name = self.expect_upper("a tensor name in the contraction")
        self.expect("[", f"after tensor '{name.text}' (contraction operands are indexed: {name.text}[i, ...])")
        indices: List[Expr] = []
        if not self.at("]"):
            indices = self._poly_list("index", ("]",))
        self.advance()  # ']'
        return Access(name.value, tuple(indices), loc=self.loc(name))

    def _constraint(self) -> Constraint:
        first = self.peek()
        expr = self.parse_poly()
        tok = self.peek()
        if tok.is_op("<=", ">", ">=", "==", "!="):
            raise self.error(
                f"constraints are written 'expr < bound' (meaning 0 <= expr < bound), found '{tok.text}'", tok
            )
        self.expect("<", "in a constraint (expr < bound)")
        bound = self.parse_poly()
        return Constraint(expr, bound, loc=self.loc(first))

    # -- expressions -----------------------------------------------------------

    def parse_expr(self) -> Expr:
        """A full elementwise expression: ``c ? a : b`` (right-assoc) down to primaries."""
        return self._conditional()

    def parse_poly(self) -> Expr:
        """An index polynomial or size expression: ``+ - * /``, unary ``-``, ``INT idx``."""
        return self._binary(_POLY_FIRST_LEVEL, poly=True)

    def _nest(self, tok: Token) -> None:
        """Count one level of nesting; past MAX_DEPTH a located error (not Python's RecursionError)."""
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise self.error(f"expression nests deeper than {MAX_DEPTH} levels; split it into statements", tok)

    def _conditional(self) -> Expr:
        self._nest(self.peek())
        try:
            return self._conditional_inner()
        finally:
            self._depth -= 1

    def _conditional_inner(self) -> Expr:
        cond = self._binary(0, poly=False)
        if not self.at("?"):
            return cond
        q = self.advance()
        then = self._conditional()
        tok = self.peek()
        if not tok.is_op(":"):
            raise self.error(
                f"expected ':' in the conditional expression (for the '?' at {q.line}:{q.col}), found {tok.describe()}",
                tok,
            )
        self.advance()
        else_ = self._conditional()
        return Cond(cond, then, else_, loc=self.loc(q))

    def _binary(self, level: int, poly: bool) -> Expr:
        if level == len(_BINARY_LEVELS):
            return self._unary(poly)
        ops = _BINARY_LEVELS[level]
        lhs = self._binary(level + 1, poly)
        chain = 0
        while self.at(*ops):
            op = self.advance()
            rhs = self._binary(level + 1, poly)
            lhs = Binary(str(op.value), lhs, rhs, loc=self.loc(op))
            chain += 1
            if chain > MAX_TERMS:
                raise self.error(f"more than {MAX_TERMS} '{op.text}' operations in a row; split the expression "
                                 f"into statements", op)
        return lhs

    def _unary(self, poly: bool) -> Expr:
        tok = self.peek()
        if tok.is_op("-", "~", "("):
            self._nest(tok)  # prefix operators and parentheses nest like calls
            try:
                return self._unary_inner(poly)
            finally:
                self._depth -= 1
        return self._unary_inner(poly)

    def _unary_inner(self, poly: bool) -> Expr:
        tok = self.peek()
        if tok.is_op("~") and not poly:
            self.advance()
            return Unary("~", self._unary(poly), loc=self.loc(tok))
        if not tok.is_op("-"):
            return self._primary(poly)
        self.advance()
        num = self.peek()
        if num.kind in (INT, FLOAT):
            # '-3' is the literal -3, not Unary('-', 3): folded right here, so
            # '-(3)' stays a Unary and the printer can tell them apart.
            self.advance()
            lit = self._literal(num, poly, negate_at=tok)
            return self._juxtaposed(lit, poly)
        return Unary("-", self._unary(poly), loc=self.loc(tok))

    def _literal(self, tok: Token, poly: bool, negate_at: Optional[Token] = None) -> Expr:
        where = self.loc(negate_at or tok)
        sign = -1 if negate_at is not None else 1
        if tok.kind == FLOAT:
            if poly:
                raise self.error(
                    f"floating-point number '{tok.text}' in an index or size expression; these are integers", tok
                )
            return Float(sign * float(tok.value), loc=where)
        return Int(sign * int(tok.value), loc=where)

    def _juxtaposed(self, lit: Expr, poly: bool) -> Expr:
        """The reference's ``INT idx`` poly form: ``2i`` is ``2 * i``."""
        if poly and isinstance(lit, Int) and self.peek().kind == LOWER and not self.at("(", k=1):
            idx = self.advance()
            return Binary("*", lit, Index(str(idx.value), loc=self.loc(idx)), loc=lit.loc)
        return lit

    def _primary(self, poly: bool) -> Expr:
        tok = self.peek()
        if tok.kind in (INT, FLOAT):
            self.advance()
            return self._juxtaposed(self._literal(tok, poly), poly)
        if tok.kind == UPPER:
            self.advance()
            nxt = self.peek()
            if nxt.is_op("["):
                if poly:
                    raise self.error(f"tensor access '{tok.text}[...]' inside an index expression", nxt)
                raise self.error(
                    f"'{tok.text}[...]' indexes a tensor inside an elementwise expression; only a contraction's "
                    f"operands are indexed, elementwise statements use whole tensors ('{tok.text}')",
                    nxt,
                )
            if nxt.is_op("("):
                raise self.error(
                    f"'{tok.text}' is not a function: function names start with a lowercase letter", tok
                )
            return Ref(str(tok.value), loc=self.loc(tok))
        if tok.kind == LOWER:
            self.advance()
            if not self.at("("):
                return Index(str(tok.value), loc=self.loc(tok))
            if poly:
                raise self.error(f"function call '{tok.text}(...)' inside an index or size expression", tok)
            return self._call(tok)
        if tok.is_op("("):
            self.advance()
            inner = self._binary(_POLY_FIRST_LEVEL, poly=True) if poly else self.parse_expr()
            close = self.peek()
            if not close.is_op(")"):
                raise self.error(
                    f"expected ')' to close the '(' at {tok.line}:{tok.col}, found {close.describe()}", close
                )
            self.advance()
            return inner
        if tok.kind == KEYWORD:
            raise self.error(f"unexpected keyword '{tok.text}' in an expression", tok)
        what = "an index or size expression" if poly else "an expression"
        raise self.error(f"expected {what}, found {tok.describe()}", tok)

    def _call(self, func: Token) -> Call:
        paren = self.advance()  # '('
        args: List[Expr] = []
        if not self.at(")"):
            while True:
                tok = self.peek()
                if tok.is_op(",", ")"):
                    raise self.error(f"empty argument in the call to '{func.text}', found {tok.describe()}", tok)
                args.append(self.parse_expr())
                if not self.at(","):
                    break
                self.advance()
        close = self.peek()
        if not close.is_op(")"):
            raise self.error(
                f"expected ',' or ')' in the call to '{func.text}' (opened at {paren.line}:{paren.col}), "
                f"found {close.describe()}",
                close,
            )
        self.advance()
        return Call(str(func.value), tuple(args), loc=self.loc(func))


def _is_dim_expr(e: Expr, dims: Set[str]) -> bool:
    """True if ``e`` uses only integers, names in ``dims`` and ``+ - * /`` (a DimDef)."""
    if isinstance(e, Int):
        return True
    if isinstance(e, Ref):
        return e.name in dims
    if isinstance(e, Unary):
        return e.op == "-" and _is_dim_expr(e.operand, dims)
    if isinstance(e, Binary):
        return e.op in ("+", "-", "*", "/") and _is_dim_expr(e.lhs, dims) and _is_dim_expr(e.rhs, dims)
    return False


def parse(text: str, filename: str = "<string>") -> Program:
    """Parse Tile source text into a :class:`~polytile.ir.Program`.

    Raises :class:`~polytile.errors.TileSyntaxError` (with line, column and a
    caret) if the text is not a Tile program.

    >>> p = parse("function (X[L], Y[L]) -> (R) { R[] = +(X[i] * Y[i]); }")
    >>> (p.outputs, p.body[0].combo, p.body[0].sizes)
    (('R',), '*', ())
    """
    with recursion_room():
        return Parser(text, filename).parse_program()


def parse_file(path: Union[str, Path]) -> Program:
    """Parse a ``.tile`` file; the program's ``name`` (used in messages) is ``path``.

    >>> parse_file("examples/matmul.tile").name  # doctest: +SKIP
    'examples/matmul.tile'
    """
    path = Path(path)
    return parse(path.read_text(encoding="utf-8"), str(path))


def parse_expression(text: str, filename: str = "<string>", poly: bool = False) -> Expr:
    """Parse a lone expression (``poly=True``: an index polynomial / size expression).

    Handy for tests and tools that build statements programmatically.

    >>> parse_expression("-3 * x + 1")
    Binary(op='+', lhs=Binary(op='*', lhs=Int(value=-3), rhs=Index(name='x')), rhs=Int(value=1))
    """
    parser = Parser(text, filename)
    expr = parser.parse_poly() if poly else parser.parse_expr()
    tok = parser.peek()
    if tok.kind != EOF:
        raise parser.error(f"unexpected {tok.describe()} after the expression", tok)
    return expr
