"""Normal form of a Tile program: the statement kinds the later stages handle, and nothing else.

PlaidML's op library writes programs whose meaning depends on what each name
*is* (a dimension, a tensor, an integer passed at call time), which the parser
cannot know.  :func:`normalize` settles it with the whole program in view, as
a pure function from Program to Program (idempotent; locations kept):

* **Dimension statements.**  ``Pad = max(0, (HO - 1) * S + K - H) / 2;`` is a
  :class:`~polytile.ir.DimDef` when its right side uses only integers,
  dimensions (header dims, earlier dimension statements, size inputs),
  ``+ - * /``, unary ``-`` and the bind-time functions ``max``, ``min``,
  ``broadcast`` and ``assert_*``.  A header output is never a dimension.
* **Size inputs.**  An input declared without dimensions (``D0``) that is used
  as a size (a contraction's output size, a constraint bound, an index
  polynomial, a dimension statement, or a size argument of ``reshape`` /
  ``prng_step`` / the ``builtin_*`` functions) is a *size input*: its integer
  value at call time binds a dimension, and kernels specialise on it
  (PlaidML's ``ConvolutionTranspose`` passes output sizes this way).
* **Statement-level builtins** (``reshape``, ``gather``, ``shape``,
  ``prng_*``) make a tensor of their own shape; one nested inside a larger
  expression is hoisted into a fresh temporary so that each is a whole
  statement's right side.
* **Inline definitions** (PlaidML's ``InlineDefines``): ``builtin_softmax``,
  ``builtin_logsoftmax`` and ``builtin_binary_crossentropy`` expand into the
  statements PlaidML defines them as; ``reverse_grad(X, s)`` is ``X`` in the
  forward pass.

    >>> from polytile.frontends.tile import parse
    >>> p = normalize(parse("function (I[H]) -> (O) { P = max(0, H - 3) / 2; O[i : H] = +(I[i - P]); }"))
    >>> type(p.body[0]).__name__
    'DimDef'
"""
from __future__ import annotations

import itertools
from typing import Dict, List, Optional, Set, Tuple

from . import ir
from .errors import TileSemanticError
from .ir import Assign, Binary, Call, Cond, Contraction, DimDef, Int, Program, Ref, Unary

__all__ = ["normalize", "size_inputs", "DIM_FUNCTIONS", "SPECIAL", "MACROS"]

#: Functions a dimension statement may call (evaluated when shapes are bound).
DIM_FUNCTIONS = ("max", "min", "broadcast")
#: Statement-level builtins: each must be a whole right side (nested ones are hoisted).
SPECIAL = ("reshape", "gather", "shape", "prng_step", "prng_state", "prng_value")
#: Builtins defined as statements (PlaidML's inline definitions).
MACROS = ("builtin_softmax", "builtin_logsoftmax", "builtin_binary_crossentropy")
#: Arguments of special/macro functions that are sizes (positions), by function.
_SIZE_ARGS = {"reshape": slice(1, None), "prng_step": slice(1, None),
              "builtin_softmax": slice(1, 3), "builtin_logsoftmax": slice(1, 3)}


def _is_assert(name: str) -> bool:
    return name.startswith("assert_")


def _refs(e: ir.Expr) -> Set[str]:
    return {n.name for n in ir.walk(e) if isinstance(n, Ref)}


def _size_exprs(s) -> List[ir.Expr]:
    """The expressions of ``s`` that are sizes or index polynomials."""
    out: List[ir.Expr] = []
    if isinstance(s, Contraction):
        out.extend(s.sizes)
        out.extend(s.indices)
        for op in s.operands:
            out.extend(op.indices)
        for c in s.constraints:
            out.extend((c.expr, c.bound))
    elif isinstance(s, DimDef):
        out.append(s.expr)
    elif isinstance(s, Assign):
        for n in ir.walk(s.expr):
            if isinstance(n, Call) and n.func in _SIZE_ARGS:
                out.extend(n.args[_SIZE_ARGS[n.func]])
    return out


def size_inputs(program: Program) -> Tuple[str, ...]:
    """Inputs declared without dimensions that are used as sizes (see the module doc).

        >>> from polytile.frontends.tile import parse
        >>> size_inputs(parse("function (A[N], D) -> (O) { O[i : D] = +(A[i]); }"))
        ('D',)
    """
    scalars = {i.name for i in program.inputs if not i.dims}
    if not scalars:
        return ()
    sized: Set[str] = set()
    for s in program.body:
        for e in _size_exprs(s):
            sized |= _refs(e)
    # ``X = D0 + 1`` with X used as a size makes D0 a size too (to a fixpoint).
    names = _header_dims(program) | scalars | {s.target for s in program.body if isinstance(s, (Assign, DimDef))}
    changed = True
    while changed:
        changed = False
        for s in program.body:
            if isinstance(s, Assign) and s.target in sized and s.target not in program.outputs \
                    and _dim_expr(s.expr, names) and not _refs(s.expr) <= sized:
                sized |= _refs(s.expr)
                changed = True
    return tuple(i.name for i in program.inputs if i.name in scalars and i.name in sized)


def _header_dims(program: Program) -> Set[str]:
    return {d for i in program.inputs for d in (i.dims or ()) if isinstance(d, str)}


def _dim_expr(e: ir.Expr, dims: Set[str]) -> bool:
    if isinstance(e, Int):
        return True
    if isinstance(e, Ref):
        return e.name in dims
    if isinstance(e, Unary):
        return e.op == "-" and _dim_expr(e.operand, dims)
    if isinstance(e, Binary):
        return e.op in ("+", "-", "*", "/") and _dim_expr(e.lhs, dims) and _dim_expr(e.rhs, dims)
    if isinstance(e, Call):
        ok_name = e.func in DIM_FUNCTIONS or _is_assert(e.func)
        return ok_name and bool(e.args) and all(_dim_expr(a, dims) or _is_assert(e.func) and _cmp_dims(a, dims)
                                                for a in e.args)
    return False


def _cmp_dims(e: ir.Expr, dims: Set[str]) -> bool:
    """An assertion's condition: comparisons of dimension expressions."""
    if isinstance(e, Binary) and e.op in ir.COMPARISONS:
        return _dim_expr(e.lhs, dims) and _dim_expr(e.rhs, dims)
    return _dim_expr(e, dims)


class _Fresh:
    def __init__(self, program: Program):
        self.taken = {i.name for i in program.inputs} | set(program.outputs) | _header_dims(program)
        self.taken |= {s.target for s in program.body}
        for s in program.body:
            for e in _all_exprs(s):
                self.taken |= _refs(e)
        self.count = itertools.count()

    def __call__(self, hint: str) -> str:
        while True:
            name = f"{hint}_{next(self.count)}"
            if name not in self.taken:
                self.taken.add(name)
                return name


def _all_exprs(s) -> List[ir.Expr]:
    if isinstance(s, Contraction):
        return _size_exprs(s)
    return [s.expr]


def normalize(program: Program) -> Program:
    """The program in normal form (see the module doc); idempotent.

        >>> from polytile.frontends.tile import parse
        >>> p = normalize(parse("function (X[R, C]) -> (Y) { Y = builtin_softmax(X, R, C); }"))
        >>> [type(s).__name__ for s in p.body]
        ['Contraction', 'Assign', 'Contraction', 'Assign']
    """
    dims = _header_dims(program) | set(size_inputs(program))
    fresh = _Fresh(program)
    outputs = set(program.outputs)
    body: List[ir.Stmt] = []
    changed = False
    for s in program.body:
        if isinstance(s, Assign) and s.target not in outputs and _dim_expr(s.expr, dims):
            body.append(DimDef(s.target, s.expr, attrs=s.attrs, loc=s.loc))
            dims.add(s.target)
            changed = True
            continue
        if isinstance(s, DimDef):
            dims.add(s.target)
            body.append(s)
            continue
        if isinstance(s, Assign):
            new = _Rewriter(fresh, dims, s).statement()
            changed = changed or len(new) != 1 or new[0] is not s
            body.extend(new)
            continue
        body.append(s)
    if not changed:
        return program
    return Program(program.inputs, program.outputs, tuple(body), name=program.name)


class _Rewriter:
    """Hoists nested special calls and expands macros inside one Assign."""

    def __init__(self, fresh: _Fresh, dims: Set[str], stmt: Assign):
        self.fresh = fresh
        self.dims = dims
        self.stmt = stmt
        self.pre: List[ir.Stmt] = []

    def statement(self) -> List[ir.Stmt]:
        s = self.stmt
        e = s.expr
        if isinstance(e, Call) and e.func in SPECIAL:
            args = tuple(self.tensor_arg(a) if k == 0 or e.func == "gather" else self.expr(a)
                         for k, a in enumerate(e.args))
            new = Assign(s.target, Call(e.func, args, loc=e.loc), attrs=s.attrs, loc=s.loc)
            if new == s and not self.pre:
                return [s]
            return self.pre + [new]
        if isinstance(e, Call) and e.func in MACROS and e.func != "builtin_binary_crossentropy":
            return self.pre + self.softmax(e, s.target)
        new_e = self.expr(e)
        if new_e is e and not self.pre:
            return [s]
        return self.pre + [Assign(s.target, new_e, attrs=s.attrs, loc=s.loc)]

    def tensor_arg(self, a: ir.Expr) -> ir.Expr:
        """A special call's tensor argument as a name (hoisted if it is an expression)."""
        a = self.expr(a)
        if isinstance(a, Ref):
            return a
        name = self.fresh("T")
        self.pre.append(Assign(name, a, loc=getattr(a, "loc", None) or self.stmt.loc))
        return Ref(name, loc=getattr(a, "loc", None))

    def hoist(self, call: Call) -> Ref:
        name = self.fresh(call.func.split("_")[0].capitalize() or "T")
        inner = _Rewriter(self.fresh, self.dims, Assign(name, call, loc=call.loc or self.stmt.loc))
        self.pre.extend(inner.statement())
        return Ref(name, loc=call.loc)

    def expr(self, e: ir.Expr) -> ir.Expr:
        if isinstance(e, Call):
            if e.func == "reverse_grad" and e.args:
                return self.expr(e.args[0])
            if e.func in SPECIAL or (e.func in MACROS and e.func != "builtin_binary_crossentropy"):
                return self.hoist(e)
            if e.func == "builtin_binary_crossentropy" and len(e.args) == 3:
                # Y = -X2*log(X1) - (1-X2)*log(1-X1); X3 only scales the gradient.
                x1, x2 = (self.expr(a) for a in e.args[:2])
                loc = e.loc
                one = Int(1, loc=loc)
                return Binary("-", Binary("*", Unary("-", x2, loc=loc), Call("log", (x1,), loc=loc), loc=loc),
                              Binary("*", Binary("-", one, x2, loc=loc),
                                     Call("log", (Binary("-", one, x1, loc=loc),), loc=loc), loc=loc), loc=loc)
            args = tuple(self.expr(a) for a in e.args)
            return e if args == e.args and all(x is y for x, y in zip(args, e.args)) else Call(e.func, args, loc=e.loc)
        if isinstance(e, Unary):
            o = self.expr(e.operand)
            return e if o is e.operand else Unary(e.op, o, loc=e.loc)
        if isinstance(e, Binary):
            a, b = self.expr(e.lhs), self.expr(e.rhs)
            return e if a is e.lhs and b is e.rhs else Binary(e.op, a, b, loc=e.loc)
        if isinstance(e, Cond):
            c, t, f = self.expr(e.cond), self.expr(e.then), self.expr(e.else_)
            return e if (c, t, f) == (e.cond, e.then, e.else_) and c is e.cond and t is e.then and f is e.else_ \
                else Cond(c, t, f, loc=e.loc)
        return e

    def softmax(self, e: Call, target: str) -> List[ir.Stmt]:
        """PlaidML's inline definition of builtin_softmax / builtin_logsoftmax over an R x C view."""
        if len(e.args) != 3:
            raise TileSemanticError(f"{e.func} takes 3 arguments (X, rows, cols), got {len(e.args)}", e.loc)
        x = self.tensor_arg(e.args[0])
        rows = self.expr(e.args[1])
        loc = e.loc
        i, j = ir.Index("i", loc=loc), ir.Index("j", loc=loc)
        zero, one = Int(0, loc=loc), Int(1, loc=loc)
        m, ex, n = self.fresh("Max"), self.fresh("Exp"), self.fresh("Sum")
        out = [
            Contraction(m, (i, zero), (rows, one), ">", None, (ir.Access(x.name, (i, j), loc=loc),), loc=loc),
            Assign(ex, Call("exp", (Binary("-", x, Ref(m, loc=loc), loc=loc),), loc=loc), loc=loc),
            Contraction(n, (i, zero), (rows, one), "+", None, (ir.Access(ex, (i, j), loc=loc),), loc=loc),
        ]
        if e.func == "builtin_softmax":
            y = Binary("/", Ref(ex, loc=loc), Ref(n, loc=loc), loc=loc)
        else:
            y = Binary("-", x, Binary("+", Ref(m, loc=loc), Call("log", (Ref(n, loc=loc),), loc=loc), loc=loc),
                       loc=loc)
        out.append(Assign(target, y, attrs=self.stmt.attrs, loc=self.stmt.loc))
        return out
