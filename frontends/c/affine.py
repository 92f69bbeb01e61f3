"""Affine expressions and conditions read from C syntax trees, printed as isl text.

The C frontend never hands a C expression to isl directly: it first proves
the expression affine by building it here, so anything isl would reject (or,
worse, silently misread) is refused with the node that caused it.

* :class:`Lin` -- ``sum(coeff * key) + const`` with integer coefficients.  A
  key is a variable (iterator or parameter) or an *atom*: an isl
  sub-expression that is affine for isl but not linear for us,
  ``floor((i + 1)/2)`` or ``(i) mod 4``.
* a piecewise value -- a tuple of ``(guard, Lin)`` pairs, what ``min``,
  ``max`` and ``?:`` produce; the guards of one value partition its domain.
* a formula -- ``("ge", lin)`` meaning ``lin >= 0``, ``("eq", lin)``,
  ``("and", parts)``, ``("or", parts)``; negation is pushed to the leaves so
  isl only ever sees ``and``/``or`` of linear constraints.

C semantics vs. isl semantics: C's ``/`` and ``%`` truncate towards zero,
isl's ``floor``/``mod`` round towards minus infinity.  They agree when the
dividend is non-negative; for the rest every ``/`` and ``%`` by a positive
constant in an affine position (loop bounds, subscripts, conditions) is split
on the dividend's sign (:func:`_truncating`), so the model is C's wherever the
dividend may be negative (pet assumes it never is; ``(i - 7) / 3 == 0`` holds
for ``5 <= i <= 9``).  Constant operands are folded with C's own rules, so
``-3/2`` is ``-1``.
"""
from __future__ import annotations

from typing import Callable, Dict, FrozenSet, Iterable, List, Optional, Sequence, Tuple

from pycparser import c_ast


class NotAffine(Exception):
    """``node`` is not an affine expression (``message`` says why); the extractor adds the location."""

    def __init__(self, node: c_ast.Node, message: str):
        super().__init__(message)
        self.node = node
        self.message = message


# ---------------------------------------------------------------------------
# Linear forms
# ---------------------------------------------------------------------------

# The structure behind each atom key, so an atom can be rebuilt as a body
# expression (its text determines it, so sharing one table is harmless).
ATOMS: Dict[str, Tuple[str, "Lin", int]] = {}


class Lin:
    """``sum(c_k * key_k) + const`` (immutable); ``names`` are the variables it reads."""

    __slots__ = ("terms", "const", "names")

    def __init__(self, terms: Dict[str, int], const: int, names: FrozenSet[str]):
        self.terms: Tuple[Tuple[str, int], ...] = tuple(sorted((k, c) for k, c in terms.items() if c))
        self.const = int(const)
        self.names = names

    @staticmethod
    def constant(v: int) -> "Lin":
        return Lin({}, v, frozenset())

    @staticmethod
    def var(name: str) -> "Lin":
        return Lin({name: 1}, 0, frozenset({name}))

    @staticmethod
    def atom(kind: str, inner: "Lin", d: int) -> "Lin":
        """``floor(inner/d)`` (kind ``floor``) or ``inner mod d`` (kind ``mod``) as a single key."""
        text = f"floor(({inner.text()})/{d})" if kind == "floor" else f"({inner.text()}) mod {d}"
        ATOMS[text] = (kind, inner, d)
        return Lin({text: 1}, 0, inner.names)

    @property
    def is_const(self) -> bool:
        return not self.terms

    def add(self, other: "Lin") -> "Lin":
        t = dict(self.terms)
        for k, c in other.terms:
            t[k] = t.get(k, 0) + c
        return Lin(t, self.const + other.const, self.names | other.names)

    def scale(self, k: int) -> "Lin":
        return Lin({key: c * k for key, c in self.terms}, self.const * k, self.names if k else frozenset())

    def sub(self, other: "Lin") -> "Lin":
        return self.add(other.scale(-1))

    def coefficient(self, key: str) -> int:
        return dict(self.terms).get(key, 0)

    def text(self) -> str:
        parts: List[str] = []
        for key, c in self.terms:
            body = key if key.isidentifier() else f"({key})"
            mag = abs(c)
            term = body if mag == 1 else f"{mag}*{body}"
            parts.append(("- " if c < 0 else "+ ") + term)
        if self.const or not parts:
            parts.append(("- " if self.const < 0 else "+ ") + str(abs(self.const)))
        out = " ".join(parts)
        return out[2:] if out.startswith("+ ") else "-" + out[2:]

    def __repr__(self) -> str:
        return f"Lin({self.text()})"


# ---------------------------------------------------------------------------
# Formulas
# ---------------------------------------------------------------------------

Formula = Tuple  # ("ge", Lin) | ("eq", Lin) | ("and", tuple) | ("or", tuple)
TRUE: Formula = ("and", ())
FALSE: Formula = ("or", ())


def ge(lin: Lin) -> Formula:
    """``lin >= 0``, folded when constant."""
    if lin.is_const:
        return TRUE if lin.const >= 0 else FALSE
    return ("ge", lin)


def eq(lin: Lin) -> Formula:
    if lin.is_const:
        return TRUE if lin.const == 0 else FALSE
    return ("eq", lin)


def conj(parts: Iterable[Formula]) -> Formula:
    out: List[Formula] = []
    for p in parts:
        if p == FALSE:
            return FALSE
        if p == TRUE:
            continue
        out.extend(p[1] if p[0] == "and" else (p,))
    return ("and", tuple(out)) if len(out) != 1 else out[0]


def disj(parts: Iterable[Formula]) -> Formula:
    out: List[Formula] = []
    for p in parts:
        if p == TRUE:
            return TRUE
        if p == FALSE:
            continue
        out.extend(p[1] if p[0] == "or" else (p,))
    return ("or", tuple(out)) if len(out) != 1 else out[0]


def negate(f: Formula) -> Formula:
    """``not f`` over the integers: ``not (e >= 0)`` is ``-e - 1 >= 0``."""
    kind = f[0]
    if kind == "ge":
        return ge(f[1].scale(-1).add(Lin.constant(-1)))
    if kind == "eq":
        return disj([ge(f[1].add(Lin.constant(-1))), ge(f[1].scale(-1).add(Lin.constant(-1)))])
    if kind == "and":
        return disj(negate(p) for p in f[1])
    return conj(negate(p) for p in f[1])


def compare(op: str, a: Lin, b: Lin) -> Formula:
    """``a op b`` for a C comparison operator."""
    d = a.sub(b)
    if op == "<":
        return ge(d.scale(-1).add(Lin.constant(-1)))
    if op == "<=":
        return ge(d.scale(-1))
    if op == ">":
        return ge(d.add(Lin.constant(-1)))
    if op == ">=":
        return ge(d)
    if op == "==":
        return eq(d)
    if op == "!=":
        return negate(eq(d))
    raise ValueError(op)


def formula_text(f: Formula) -> str:
    kind = f[0]
    if kind == "ge":
        return f"{f[1].text()} >= 0"
    if kind == "eq":
        return f"{f[1].text()} = 0"
    if not f[1]:
        return "0 = 0" if kind == "and" else "1 = 0"
    joiner = " and " if kind == "and" else " or "
    return joiner.join(f"({formula_text(p)})" for p in f[1])


def formula_names(f: Formula) -> FrozenSet[str]:
    if f[0] in ("ge", "eq"):
        return f[1].names
    out: FrozenSet[str] = frozenset()
    for p in f[1]:
        out |= formula_names(p)
    return out


# ---------------------------------------------------------------------------
# Piecewise values
# ---------------------------------------------------------------------------

Pw = Tuple[Tuple[Formula, Lin], ...]


def pw(lin: Lin) -> Pw:
    return ((TRUE, lin),)


def pw_const(p: Pw) -> Optional[int]:
    """The value if ``p`` is one unconditional constant."""
    if len(p) == 1 and p[0][0] == TRUE and p[0][1].is_const:
        return p[0][1].const
    return None


def pw_combine(a: Pw, b: Pw, fn: Callable[[Lin, Lin], Lin]) -> Pw:
    out = []
    for ga, la in a:
        for gb, lb in b:
            g = conj([ga, gb])
            if g != FALSE:
                out.append((g, fn(la, lb)))
    return tuple(out)


def pw_map(a: Pw, fn: Callable[[Lin], Lin]) -> Pw:
    return tuple((g, fn(l)) for g, l in a)


def pw_compare(op: str, a: Pw, b: Pw) -> Formula:
    """``a op b`` for piecewise operands: some pair of pieces applies and compares true."""
    return disj(conj([ga, gb, compare(op, la, lb)]) for ga, la in a for gb, lb in b)


def pw_select(cond: Formula, a: Pw, b: Pw) -> Pw:
    """``cond ? a : b``."""
    out = [(conj([cond, g]), l) for g, l in a] + [(conj([negate(cond), g]), l) for g, l in b]
    return tuple((g, l) for g, l in out if g != FALSE)


def _truncating(a: Pw, d: int, kind: str) -> Pw:
    """C's ``a / d`` (``kind`` floor) or ``a % d`` (``kind`` mod) for a constant ``d > 0``, exactly.

    isl's ``floor`` and ``mod`` round toward minus infinity, C toward zero; they differ where the
    dividend is negative, so each piece splits on its sign (isl drops the half a domain rules out)::

        a / d = a >= 0 ? floor(a/d) : -floor(-a/d)      a % d = a >= 0 ? a mod d : -((-a) mod d)

    >>> # (i - 7) / 3 == 0 holds for 5 <= i <= 9 (C), not only 7 <= i <= 9 (floor)
    """
    out = []
    for g, l in a:
        if l.is_const:
            out.append((g, Lin.constant(_c_div(l.const, d) if kind == "floor" else _c_mod(l.const, d))))
            continue
        below = Lin.atom(kind, l.scale(-1), d).scale(-1)
        for g2, r in pw_select(ge(l), pw(Lin.atom(kind, l, d)), pw(below)):
            both = conj([g, g2])
            if both != FALSE:
                out.append((both, r))
    return tuple(out)


def pw_names(p: Pw) -> FrozenSet[str]:
    out: FrozenSet[str] = frozenset()
    for g, l in p:
        out |= formula_names(g) | l.names
    return out


# ---------------------------------------------------------------------------
# C syntax trees -> piecewise values and formulas
# ---------------------------------------------------------------------------

# Resolves an identifier in an affine position to a linear form (an iterator,
# a parameter or a constant) or raises NotAffine saying why it cannot be one.
Resolver = Callable[[str, c_ast.Node], Lin]

_INT_TYPES = {"int", "long", "short", "char", "signed", "unsigned", "size_t", "ptrdiff_t", "ssize_t",
              "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t",
              "intptr_t", "uintptr_t", "_Bool", "bool", "const", "volatile"}

# Integer helpers found in hand-written and generated (Pluto, CLooG) loop bounds.
_MINMAX = {"min": "min", "max": "max", "MIN": "min", "MAX": "max", "imin": "min", "imax": "max"}


def c_int_literal(text: str) -> Optional[int]:
    """The value of a C integer literal (decimal, hex, octal, binary, with u/l suffixes), else None."""
    t = text.rstrip("uUlL")
    try:
        if t.lower().startswith("0x"):
            return int(t, 16)
        if t.lower().startswith("0b"):
            return int(t, 2)
        if len(t) > 1 and t.startswith("0"):
            return int(t, 8)
        return int(t, 10)
    except ValueError:
        return None


def _char_literal(text: str) -> Optional[int]:
    body = text[1:-1]
    if len(body) == 1:
        return ord(body)
    simple = {"\\n": 10, "\\t": 9, "\\0": 0, "\\\\": 92, "\\'": 39, '\\"': 34, "\\r": 13}
    return simple.get(body)


def _c_div(a: int, b: int) -> int:
    """C's truncating division."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _c_mod(a: int, b: int) -> int:
    return a - b * _c_div(a, b)


def _positive_constant(node: c_ast.Node, p: Pw, what: str) -> int:
    v = pw_const(p)
    if v is None:
        raise NotAffine(node, f"{what} by a non-constant is not affine")
    if v <= 0:
        raise NotAffine(node, f"{what} by {v}: only positive constant divisors are affine")
    return v


def to_pw(node: c_ast.Node, resolve: Resolver) -> Pw:
    """The piecewise affine value of a C integer expression (raises NotAffine)."""
    if isinstance(node, c_ast.Constant):
        if node.type == "char":
            v = _char_literal(node.value)
        elif node.type in ("int", "long int", "unsigned int", "long long int", "unsigned long int",
                           "unsigned long long int", "long", "unsigned") or node.type.endswith("int"):
            v = c_int_literal(node.value)
        else:
            v = None
        if v is None:
            raise NotAffine(node, f"{node.type} constant {node.value} in an affine expression (loop bounds, "
                                  "subscripts and conditions must be integer)")
        return pw(Lin.constant(v))
    if isinstance(node, c_ast.ID):
        return pw(resolve(node.name, node))
    if isinstance(node, c_ast.UnaryOp):
        if node.op == "-":
            return pw_map(to_pw(node.expr, resolve), lambda l: l.scale(-1))
        if node.op == "+":
            return to_pw(node.expr, resolve)
        if node.op == "sizeof":
            raise NotAffine(node, "sizeof in an affine expression")
        if node.op in ("p++", "p--", "++", "--"):
            raise NotAffine(node, f"side effect ({node.op.strip('p')}) inside an affine expression")
        if node.op == "!":
            return pw_select(to_formula(node, resolve), pw(Lin.constant(1)), pw(Lin.constant(0)))
        raise NotAffine(node, f"operator {node.op!r} in an affine expression")
    if isinstance(node, c_ast.Cast):
        tnames = _type_names(node.to_type)
        if tnames is None or not set(tnames) <= _INT_TYPES:
            raise NotAffine(node, "cast to a non-integer type in an affine expression")
        return to_pw(node.expr, resolve)
    if isinstance(node, c_ast.BinaryOp):
        op = node.op
        if op in ("&&", "||", "<", "<=", ">", ">=", "==", "!="):
            return pw_select(to_formula(node, resolve), pw(Lin.constant(1)), pw(Lin.constant(0)))
        a = to_pw(node.left, resolve)
        b = to_pw(node.right, resolve)
        if op == "+":
            return pw_combine(a, b, Lin.add)
        if op == "-":
            return pw_combine(a, b, Lin.sub)
        if op == "*":
            ca, cb = pw_const(a), pw_const(b)
            if ca is not None:
                return pw_map(b, lambda l: l.scale(ca))
            if cb is not None:
                return pw_map(a, lambda l: l.scale(cb))
            raise NotAffine(node, f"product of two non-constant terms ({_names(a)} * {_names(b)}) is not affine")
        if op in ("/", "%"):
            what = "division" if op == "/" else "remainder"
            ca = pw_const(a)
            cb = pw_const(b)
            if ca is not None and cb is not None and cb != 0:
                return pw(Lin.constant(_c_div(ca, cb) if op == "/" else _c_mod(ca, cb)))
            d = _positive_constant(node.right, b, what)
            if d == 1:
                return a if op == "/" else pw(Lin.constant(0))
            return _truncating(a, d, "floor" if op == "/" else "mod")
        if op == "<<":
            cb = pw_const(b)
            if cb is None or cb < 0:
                raise NotAffine(node, "shift by a non-constant is not affine")
            return pw_map(a, lambda l: l.scale(1 << cb))
        raise NotAffine(node, f"operator {op!r} in an affine expression")
    if isinstance(node, c_ast.TernaryOp):
        cond = to_formula(node.cond, resolve)
        return pw_select(cond, to_pw(node.iftrue, resolve), to_pw(node.iffalse, resolve))
    if isinstance(node, c_ast.FuncCall) and isinstance(node.name, c_ast.ID):
        fname = node.name.name
        args = list(node.args.exprs) if node.args is not None else []
        if fname in _MINMAX and len(args) >= 2:
            vals = [to_pw(a, resolve) for a in args]
            acc = vals[0]
            keep = "<=" if _MINMAX[fname] == "min" else ">="
            for v in vals[1:]:
                ca, cv = pw_const(acc), pw_const(v)
                if ca is not None and cv is not None:
                    acc = pw(Lin.constant(min(ca, cv) if keep == "<=" else max(ca, cv)))
                else:
                    acc = pw_select(pw_compare(keep, acc, v), acc, v)
            return acc
        if fname in ("floord", "ceild") and len(args) == 2:
            a = to_pw(args[0], resolve)
            d = _positive_constant(args[1], to_pw(args[1], resolve), "division")
            if fname == "ceild":
                a = pw_map(a, lambda l: l.add(Lin.constant(d - 1)))
            # floord/ceild are exact floor/ceiling, no sign assumption needed.
            return pw_map(a, lambda l: Lin.atom("floor", l, d) if not l.is_const
                          else Lin.constant(l.const // d))
        raise NotAffine(node, f"call to {fname}() in an affine expression (only min/max/floord/ceild are "
                              "understood there)")
    if isinstance(node, c_ast.ArrayRef):
        base = node
        while isinstance(base, c_ast.ArrayRef):
            base = base.name
        name = base.name if isinstance(base, c_ast.ID) else "an array"
        raise NotAffine(node, f"data-dependent value: {name}[...] is read from memory")
    raise NotAffine(node, f"{type(node).__name__} in an affine expression")


def _names(p: Pw) -> str:
    return ", ".join(sorted(pw_names(p))) or "constant"


def _type_names(typename: c_ast.Node) -> Optional[List[str]]:
    t = getattr(typename, "type", None)
    if isinstance(t, c_ast.TypeDecl) and isinstance(t.type, c_ast.IdentifierType):
        return list(t.type.names) + list(t.quals or [])
    return None


_CMP = ("<", "<=", ">", ">=", "==", "!=")
COMPARISONS = _CMP


def to_formula(node: c_ast.Node, resolve: Resolver) -> Formula:
    """An affine condition (``&&``, ``||``, ``!``, comparisons, integers as truth values)."""
    if isinstance(node, c_ast.BinaryOp):
        if node.op == "&&":
            return conj([to_formula(node.left, resolve), to_formula(node.right, resolve)])
        if node.op == "||":
            return disj([to_formula(node.left, resolve), to_formula(node.right, resolve)])
        if node.op in _CMP:
            a, b = to_pw(node.left, resolve), to_pw(node.right, resolve)
            unsigned = getattr(resolve, "unsigned_compare", None)
            if unsigned is not None and unsigned(node.left, node.right):
                return _unsigned_compare(node.op, a, b, loop=getattr(resolve, "unsigned_loop", False))
            return pw_compare(node.op, a, b)
    if isinstance(node, c_ast.UnaryOp) and node.op == "!":
        return negate(to_formula(node.expr, resolve))
    # Any other integer expression is true when non-zero.
    return pw_compare("!=", to_pw(node, resolve), pw(Lin.constant(0)))


def _unsigned_compare(op: str, a: Pw, b: Pw, loop: bool = False) -> Formula:
    """``a op b`` compared as C compares in an unsigned type (``int i < unsigned n``): a negative value
    converts to one above every realistic bound (``-3`` to ``2^32 - 3``), so it is larger than any
    non-negative one; two of the same sign compare as integers.

        a < b  =  (a >= 0 and b >= 0 and a < b) or (a >= 0 and b < 0) or (a < 0 and b < 0 and a < b)

    With ``for (i = -3; i < n; i++)`` the first test already fails (the loop never runs), which the
    extractor's bound check then reports, rather than running i from 0 as a signed model would.

    In a loop condition (``loop``) only operands of one sign are modelled: a side that is negative while
    the other is not either stops the loop (as the formula says) or keeps it running until its signed
    iterator overflows -- ``i < n - 1`` at ``n = 0`` -- which C leaves undefined.
    """
    zero = pw(Lin.constant(0))
    a_ok, b_ok = pw_compare(">=", a, zero), pw_compare(">=", b, zero)
    same = conj([pw_compare(op, a, b), disj([conj([a_ok, b_ok]), conj([negate(a_ok), negate(b_ok)])])])
    if loop and op not in ("==", "!="):
        return same
    parts = [same]
    if op in ("<", "<=", "!="):  # a small (non-negative), b huge (negative, converted)
        parts.append(conj([a_ok, negate(b_ok)]))
    if op in (">", ">=", "!="):
        parts.append(conj([negate(a_ok), b_ok]))
    return disj(parts)


def pieces_text(pieces: Sequence[Tuple[Formula, Sequence[Lin]]]) -> List[Tuple[str, str]]:
    """``[(guard text, "e1, e2, ...")]`` for tuples of linear forms under guards."""
    return [(formula_text(g), ", ".join(l.text() for l in ls)) for g, ls in pieces]
