"""The shape-independent checks of a Tile program: :func:`check`.

Names and definitions, index polynomials (affine, integer), sizes and
dimension definitions, builtin arities and literal arguments, ranks where
they are known statically -- each reported once, with a source location,
before any array is seen (the rules are in docs/tile-language.md, "Checked semantics").
"""
from __future__ import annotations

import re
from typing import Any, Dict, Optional, Tuple

from .. import desugar, ir
from ..errors import InternalError, NonAffineError, SourceLocation, TileSemanticError, recursion_room
from ..ir import (
    Assign,
    Binary,
    Call,
    Cond,
    Contraction,
    DimDef,
    Float,
    Index,
    Int,
    Program,
    Ref,
    Unary,
    format_expr,
)
from .functions import BUILTINS

_INPUT, _DIM, _TENSOR = "input", "dim", "tensor"


def _where(node, fallback) -> Optional[SourceLocation]:
    loc = getattr(node, "loc", None)
    return loc if loc is not None else getattr(fallback, "loc", None)


def _at(loc: Optional[SourceLocation], what: str = "") -> str:
    if loc is None:
        return ""
    return f" ({what} at {loc.line}:{loc.col})" if what else f" (at {loc.line}:{loc.col})"


class _Checker:
    def __init__(self, program: Program):
        self.p = program
        self.sizes = set(desugar.size_inputs(program))
        self.prng: Dict[str, Tuple[ir.Expr, ...]] = {}
        self.kind: Dict[str, str] = {}
        self.defined_at: Dict[str, Optional[SourceLocation]] = {}
        self.rank: Dict[str, Optional[int]] = {}
        # Names defined by any statement, to tell "used before defined" from "unknown".
        self.later: Dict[str, Optional[SourceLocation]] = {}
        for s in program.body:
            self.later.setdefault(s.target, s.loc)

    def header_loc(self, name: str, second: bool = False) -> Optional[SourceLocation]:
        """Where output ``name`` appears in the header (outputs carry no location of their own)."""
        locs = [i.loc for i in self.p.inputs if i.loc is not None]
        locs += [s.loc for s in self.p.body if s.loc is not None]
        if not locs:
            return None
        base = locs[0]
        # The header is usually one line, and every input's location carries its text.
        for loc in locs:
            arrow = loc.text.find("->")
            if arrow < 0:
                continue
            hits = [m.start() for m in re.finditer(rf"(?<![\w#$])#?{re.escape(name)}(?!\w)", loc.text[arrow:])]
            if hits:
                k = hits[1] if second and len(hits) > 1 else hits[0]
                return SourceLocation(loc.file, loc.line, arrow + k + 1, loc.text)
        return base

    def err(self, msg: str, node, stmt=None, cls=TileSemanticError):
        raise cls(msg, _where(node, stmt))

    def define(self, name: str, kind: str, rank: Optional[int], node, stmt=None):
        if name in self.kind:
            old = self.kind[name]
            loc = _where(node, stmt)
            if old == _INPUT:
                raise TileSemanticError(f"input '{name}' cannot be assigned", loc)
            if old == _DIM and kind == _DIM:
                raise TileSemanticError(
                    f"dimension '{name}' is defined twice{_at(self.defined_at[name], 'first')}", loc
                )
            if old == _DIM:
                raise TileSemanticError(f"'{name}' is a dimension; it cannot also name a tensor", loc)
            if kind == _DIM:
                raise TileSemanticError(f"'{name}' is a tensor; it cannot also name a dimension", loc)
            raise TileSemanticError(
                f"tensor '{name}' is assigned twice{_at(self.defined_at[name], 'first')}", loc
            )
        self.kind[name] = kind
        self.defined_at[name] = _where(node, stmt)
        self.rank[name] = rank

    def lookup(self, ref: Ref, stmt, want: str, role: str) -> str:
        """Kind of a used name; ``want`` is 'dim', 'tensor' or 'any'."""
        name = ref.name
        if name not in self.kind:
            if name in self.later:
                self.err(f"'{name}' is used before it is defined{_at(self.later[name])}", ref, stmt)
            self.err(f"unknown name '{name}'", ref, stmt)
        k = self.kind[name]
        if want == _DIM and k != _DIM:
            self.explain_not_dim(name, ref)
            self.err(f"'{name}' is a tensor, not a dimension: {role} may only use dimension names", ref, stmt)
        if want == _TENSOR and k == _DIM:
            self.err(f"'{name}' is a dimension, not a tensor: {role} must name tensors", ref, stmt)
        return k

    def explain_not_dim(self, name: str, used: Ref) -> None:
        """``P = max(0, Q - 1);`` read as a tensor because ``Q`` is no dimension: blame that statement."""
        defn = next((s for s in self.p.body if isinstance(s, Assign) and s.target == name), None)
        if defn is None:
            return
        nodes = list(ir.walk(defn.expr))
        dimlike = all(isinstance(n, (Int, Ref, Unary, Binary)) or
                      (isinstance(n, Call) and (n.func in desugar.DIM_FUNCTIONS or n.func.startswith("assert_")))
                      for n in nodes)
        culprits = [n for n in nodes if isinstance(n, Ref) and self.kind.get(n.name) != _DIM]
        if dimlike and culprits:
            bad = culprits[0]
            what = "a tensor" if bad.name in self.kind else "not defined"
            raise TileSemanticError(
                f"'{name}' is used as a dimension{_at(used.loc)}, but its definition uses '{bad.name}', which is "
                f"{what}: a dimension statement may only use integers, dimensions and "
                f"{', '.join(desugar.DIM_FUNCTIONS)}", _where(bad, defn))

    def lookup_tensor(self, name: str, node, stmt, role: str) -> Optional[int]:
        self.lookup(Ref(name, _where(node, stmt)), stmt, _TENSOR, role)
        return self.rank[name]

    # -- expression roles -------------------------------------------------

    def size_expr(self, e: ir.Expr, stmt, role: str) -> None:
        """Integers and dimension names with + - * / and unary minus."""
        if isinstance(e, Int):
            return
        if isinstance(e, Float):
            self.err(f"float literal {format_expr(e)} in {role}: only integers and dimension names", e, stmt)
        if isinstance(e, Index):
            self.err(f"index variable '{e.name}' in {role}: only integers and dimension names", e, stmt)
        if isinstance(e, Ref):
            self.lookup(e, stmt, _DIM, role)
            return
        if isinstance(e, Unary) and e.op == "-":
            self.size_expr(e.operand, stmt, role)
            return
        if isinstance(e, Binary) and e.op in ("+", "-", "*", "/"):
            self.size_expr(e.lhs, stmt, role)
            self.size_expr(e.rhs, stmt, role)
            return
        if isinstance(e, Binary) and e.op in ir.COMPARISONS and role == "an assertion":
            self.size_expr(e.lhs, stmt, role)
            self.size_expr(e.rhs, stmt, role)
            return
        if isinstance(e, Call) and (e.func in desugar.DIM_FUNCTIONS or e.func.startswith("assert_")):
            want = 1 if e.func.startswith("assert_") else 2
            if len(e.args) != want:
                self.err(f"{e.func} takes {want} argument{'s' if want > 1 else ''} here, got {len(e.args)}", e, stmt)
            for a in e.args:
                self.size_expr(a, stmt, "an assertion" if e.func.startswith("assert_") else role)
            return
        self.err(f"'{format_expr(e)}' is not allowed in {role}: only + - * / of integers and dimensions "
                 f"(and {', '.join(desugar.DIM_FUNCTIONS)})", e, stmt)

    def index_expr(self, e: ir.Expr, stmt) -> bool:
        """Check an index polynomial; return whether it contains index variables."""
        if isinstance(e, Int):
            return False
        if isinstance(e, Float):
            self.err(f"float literal {format_expr(e)} in an index expression", e, stmt)
        if isinstance(e, Index):
            return True
        if isinstance(e, Ref):
            self.lookup(e, stmt, _DIM, "index expressions")
            return False
        if isinstance(e, Unary) and e.op == "-":
            return self.index_expr(e.operand, stmt)
        if isinstance(e, Binary) and e.op in ("+", "-", "*", "/"):
            lhs = self.index_expr(e.lhs, stmt)
            rhs = self.index_expr(e.rhs, stmt)
            if e.op == "*" and lhs and rhs:
                self.err(
                    f"index expression '{format_expr(e)}' is not affine: both factors contain index variables",
                    e, stmt, NonAffineError,
                )
            if e.op == "/" and rhs:
                self.err(
                    f"index expression '{format_expr(e)}' is not affine: the divisor contains index variables",
                    e, stmt, NonAffineError,
                )
            return lhs or rhs
        self.err(f"'{format_expr(e)}' is not allowed in an index expression", e, stmt)
        return False  # unreachable

    def elementwise(self, e: ir.Expr, stmt) -> Optional[int]:
        """Check an elementwise expression; return its rank if statically known."""
        if isinstance(e, (Int, Float)):
            return 0
        if isinstance(e, Index):
            self.err(
                f"index variable '{e.name}' in an elementwise expression (tensors and dimensions start uppercase)",
                e, stmt,
            )
        if isinstance(e, Ref):
            k = self.lookup(e, stmt, "any", "elementwise expressions")
            return 0 if k == _DIM else self.rank[e.name]
        if isinstance(e, Unary):
            if e.op not in ("-", "~"):
                self.err(f"unknown unary operator '{e.op}'", e, stmt)
            return self.elementwise(e.operand, stmt)
        if isinstance(e, Binary):
            if e.op not in ir.BINARY_OPS:
                self.err(f"unknown operator '{e.op}'", e, stmt)
            return _max_rank(self.elementwise(e.lhs, stmt), self.elementwise(e.rhs, stmt))
        if isinstance(e, Cond):
            ranks = [self.elementwise(x, stmt) for x in (e.cond, e.then, e.else_)]
            return _max_rank(*ranks)
        if isinstance(e, Call):
            if e.func in desugar.SPECIAL:
                return self.special(e, stmt)
            b = BUILTINS.get(e.func)
            if b is None:
                if e.func in desugar.DIM_FUNCTIONS or e.func.startswith("assert_"):
                    self.err(f"{e.func}() is evaluated when shapes are bound: its arguments must be integers and "
                             f"dimensions", e, stmt)
                known = sorted(set(BUILTINS) | set(desugar.SPECIAL) | set(desugar.MACROS))
                self.err(f"unknown function '{e.func}' (builtins: {', '.join(known)})", e, stmt)
            if len(e.args) != b.arity:
                plural = "s" if b.arity != 1 else ""
                self.err(f"{b.name} takes {b.arity} argument{plural}, got {len(e.args)}", e, stmt)
            ranks = []
            for pos, a in enumerate(e.args):
                if pos == b.int_arg:
                    if not isinstance(a, Int):
                        self.err(f"{b.name}: argument {pos + 1} must be an integer literal, got '{format_expr(a)}'",
                                 a, stmt)
                    if b.int_choices and a.value not in b.int_choices:
                        choices = ", ".join(map(str, b.int_choices))
                        self.err(f"{b.name}: bits must be one of {choices}, got {a.value}", a, stmt)
                elif b.name == "reverse_grad" and pos == 1:
                    continue  # the gradient scale: unused in the forward pass
                else:
                    ranks.append(self.elementwise(a, stmt))
            if b.name == "index":
                rank, axis = ranks[0], e.args[1].value
                if axis < 0 or (rank is not None and axis >= rank):
                    shown = f"rank {rank}" if rank is not None else "a tensor"
                    self.err(f"index: axis {axis} is out of range for {shown}", e.args[1], stmt)
                return rank
            return _max_rank(*ranks)
        self.err(f"'{format_expr(e)}' is not an elementwise expression", e, stmt)
        return None

    def special(self, e: Call, stmt) -> Optional[int]:
        """reshape / gather / shape / prng_*: whole right sides (normalize() hoisted nested ones)."""
        if not isinstance(stmt, Assign) or stmt.expr is not e:
            self.err(f"{e.func}() must be the whole right side of a statement", e, stmt)
        want = {"gather": 2, "shape": 1, "prng_state": 1, "prng_value": 1}
        if e.func in want and len(e.args) != want[e.func]:
            self.err(f"{e.func} takes {want[e.func]} argument{'s' if want[e.func] > 1 else ''}, got {len(e.args)}",
                     e, stmt)
        if e.func in ("reshape", "prng_step") and not e.args:
            self.err(f"{e.func} needs a tensor argument", e, stmt)
        tensors = e.args if e.func == "gather" else e.args[:1]
        for a in tensors:
            if not isinstance(a, Ref):
                self.err(f"{e.func}: argument '{format_expr(a)}' must name a tensor", a, stmt)
            self.lookup(a, stmt, _TENSOR, f"{e.func}'s tensor arguments")
        for a in e.args[1:] if e.func in ("reshape", "prng_step") else ():
            self.size_expr(a, stmt, f"a size argument of {e.func}")
        if e.func == "shape" or e.func == "prng_value":
            return 1 if e.func == "shape" else len(self.prng.get(e.args[0].name, ())) or None
        if e.func == "prng_step":
            self.prng[stmt.target] = tuple(e.args[1:])
            return 2
        if e.func == "prng_state":
            return 2
        if e.func == "reshape":
            return len(e.args) - 1
        return None

    # -- statements -------------------------------------------------------

    def header(self) -> None:
        seen_in: Dict[str, Any] = {}
        for inp in self.p.inputs:
            if inp.name in seen_in:
                raise TileSemanticError(f"duplicate input name '{inp.name}'", inp.loc)
            seen_in[inp.name] = inp
            if inp.name in self.sizes:  # a size input: its value binds a dimension
                self.define(inp.name, _DIM, None, inp)
                continue
            rank = None if inp.dims is None else len(inp.dims)
            self.define(inp.name, _INPUT, rank, inp)
        for inp in self.p.inputs:
            for d in inp.dims or ():
                if isinstance(d, str):
                    if self.kind.get(d, _DIM) != _DIM:
                        raise TileSemanticError(f"'{d}' names both an input tensor and a dimension", inp.loc)
                    if d not in self.kind:
                        self.define(d, _DIM, None, inp)
                elif not isinstance(d, int) or d < 0:
                    raise TileSemanticError(f"input '{inp.name}': fixed size {d!r} must be a non-negative integer",
                                            inp.loc)
        seen_out = set()
        for o in self.p.outputs:
            if o in seen_out:
                raise TileSemanticError(f"duplicate output name '{o}'", self.header_loc(o, second=True))
            seen_out.add(o)

    def statement(self, s) -> None:
        if isinstance(s, DimDef):
            role = "an assertion" if isinstance(s.expr, Call) and s.expr.func.startswith("assert_") else \
                "a dimension definition"
            self.size_expr(s.expr, s, role)
            self.define(s.target, _DIM, None, s)
        elif isinstance(s, Assign):
            rank = self.elementwise(s.expr, s)
            self.define(s.target, _TENSOR, rank, s)
        elif isinstance(s, Contraction):
            self.contraction(s)
            self.define(s.output, _TENSOR, len(s.indices), s)
        else:
            raise InternalError(f"unknown statement {s!r}")

    def contraction(self, s: Contraction) -> None:
        if s.agg not in ir.AGGREGATIONS:
            self.err(f"unknown aggregation '{s.agg}' (expected one of + * > < =)", s)
        want = {None: 1, "+": 2, "*": 2, "==": 2, "?": 3}
        if s.combo not in want:
            self.err(f"unknown combination '{s.combo}' (expected + * == or a ?: ternary)", s)
        if len(s.operands) != want[s.combo]:
            self.err(f"combination '{s.combo}' takes {want[s.combo]} operands, got {len(s.operands)}", s)
        if len(s.sizes) != len(s.indices):
            self.err(f"'{s.output}' has {len(s.indices)} indices but {len(s.sizes)} sizes", s)
        for e in s.indices:
            self.index_expr(e, s)
        for z in s.sizes:
            self.size_expr(z, s, "an output size")
        for op in s.operands:
            rank = self.lookup_tensor(op.tensor, op, s, "contraction operands")
            if rank is not None and rank != len(op.indices):
                self.err(f"'{op.tensor}' has rank {rank} but is indexed with {len(op.indices)} indices", op, s)
            for e in op.indices:
                self.index_expr(e, s)
        for c in s.constraints:
            self.index_expr(c.expr, s)
            self.size_expr(c.bound, c if c.loc is not None else s, "a constraint bound")
        if s.default is not None:
            rank = self.lookup_tensor(s.default, s, s, "'default'")
            if rank is not None and rank != len(s.indices):
                self.err(f"default '{s.default}' has rank {rank} but '{s.output}' has rank {len(s.indices)}", s)

    def literals(self) -> None:
        """Integer literals must fit 64 bits: C would wrap them silently."""
        for stmt in self.p.body:
            exprs = ([stmt.expr] if not isinstance(stmt, Contraction) else
                     list(stmt.indices) + list(stmt.sizes) + [e for op in stmt.operands for e in op.indices]
                     + [e for c in stmt.constraints for e in (c.expr, c.bound)])
            for e in exprs:
                for n in ir.walk(e):
                    if isinstance(n, Int) and not -2 ** 63 <= n.value < 2 ** 63:
                        self.err(f"integer literal {n.value} does not fit in 64 bits", n, stmt)

    def run(self) -> None:
        self.literals()
        self.header()
        for s in self.p.body:
            self.statement(s)
        for o in self.p.outputs:
            k = self.kind.get(o)
            if k == _INPUT:
                raise TileSemanticError(f"output '{o}' is an input; outputs must be assigned in the body",
                                        self.header_loc(o))
            if k == _DIM:
                raise TileSemanticError(f"output '{o}' is a dimension, not a tensor", self.defined_at[o])
            if k is None:
                raise TileSemanticError(f"output '{o}' is never assigned", self.header_loc(o))


def _max_rank(*ranks: Optional[int]) -> Optional[int]:
    if any(r is None for r in ranks):
        return None
    return max(ranks, default=0)


def check(program: Program) -> None:
    """Shape-independent checks; raise TileSemanticError/NonAffineError with a location.

        >>> bad = Program((ir.Input("A", ("N",)),), ("O",), (Assign("O", Ref("Q")),))
        >>> check(bad)
        Traceback (most recent call last):
        ...
        polytile.errors.TileSemanticError: unknown name 'Q'
    """
    with recursion_room():
        _Checker(desugar.normalize(program)).run()
