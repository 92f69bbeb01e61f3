"""The memory accesses of a statement: the cell it writes, the array elements and region scalars it reads.

Each is an :class:`_Access`: an array (a region scalar is a 0-d one) and
its subscripts as piecewise affine values.  :class:`_AccessReader` refuses
what an access cannot be modelled as -- pointer values, dereferences and
address-of, side effects inside expressions, calls of functions not known
to be pure -- and arrays of the region that may overlap
(:meth:`_AccessReader.check_aliasing`).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import List, Tuple

from pycparser import c_ast

from . import affine as A
from .loops import _Ctx
from .source import option
from .syntax import _c


@dataclass
class _Access:
    array: str
    index: Tuple[A.Pw, ...]
    node: c_ast.Node


class _AccessReader:
    """Reading accesses, for the extractor (:class:`polytile.frontends.c.extract._Extractor` mixes it in).

    Uses the extractor's names (``lookup``, ``is_region_scalar``,
    ``loop_iters``, ``pure``), ``pw`` for subscripts and ``fail`` for errors;
    :meth:`check_aliasing` looks at everything the region accessed
    (``accessed``) and wrote (``stmts``).
    """

    def lvalue(self, node: c_ast.Node, ctx: _Ctx) -> _Access:
        if isinstance(node, c_ast.ID):
            name = node.name
            if name in self.loop_iters:
                raise self.fail(node, f"assignment to loop iterator {name} inside the region (iterators change "
                                      "only through their loop's increment)", "iterator assignment")
            sym = self.lookup(name)
            if sym is None:
                raise self.fail(node, f"assignment to undeclared {name}", "assignment")
            self.not_volatile(sym, node)
            if sym.kind == "scalar":
                return _Access(name, (), node)
            if sym.kind == "array":
                raise self.fail(node, f"assignment to the array name {name}", "assignment")
            raise self.fail(node, f"assignment to {name}, a {sym.describe()}", "assignment")
        if isinstance(node, c_ast.ArrayRef):
            return self.ref(node, ctx)
        return self.reject_expression(node, "assignment target")

    def ref(self, node: c_ast.ArrayRef, ctx: _Ctx) -> _Access:
        subs: List[c_ast.Node] = []
        base = node
        while isinstance(base, c_ast.ArrayRef):
            subs.append(base.subscript)
            base = base.name
        subs.reverse()
        if not isinstance(base, c_ast.ID):
            return self.reject_expression(base, "subscripted expression")
        name = base.name
        sym = self.lookup(name)
        if sym is None:
            raise self.fail(base, f"unknown array {name}", "array access")
        if sym.kind != "array":
            raise self.fail(base, f"{name} is subscripted but is a {sym.describe()}", "array access")
        self.not_volatile(sym, base)
        rank = len(sym.dims)
        if len(subs) < rank:
            raise self.fail(node, f"{_c(node)} is a pointer into {name} ({rank} dimensions, {len(subs)} "
                                  "subscripts): pointer values cannot be modelled", "partial subscript")
        if len(subs) > rank:
            raise self.fail(node, f"{name} has {rank} dimension(s) but {_c(node)} uses {len(subs)} subscripts",
                            "array access")
        index = tuple(self.pw(s, ctx, f"subscript of {name}") for s in subs)
        return _Access(name, index, node)

    def reads(self, node: c_ast.Node, ctx: _Ctx, out: List[_Access]) -> None:
        """Append every memory read in ``node`` (array elements, region scalars) to ``out``."""
        if isinstance(node, c_ast.Constant):
            if node.type == "string":
                raise self.fail(node, "string literal in a scop statement", "string")
            return
        if isinstance(node, c_ast.ID):
            name = node.name
            if name in ctx.iter_map():
                return
            if name in self.loop_iters:
                raise self.fail(node, f"loop iterator {name} is read outside its loop (its value there is not "
                                      "modelled)", "iterator use")
            if self.is_region_scalar(name):
                out.append(_Access(name, (), node))
                return
            sym = self.lookup(name)
            if sym is not None and sym.kind == "array":
                raise self.fail(node, f"array {name} used as a pointer value", "pointer use")
            self.not_volatile(sym, node)
            return  # read-only scalar, parameter, macro, enumeration constant
        if isinstance(node, c_ast.ArrayRef):
            out.append(self.ref(node, ctx))
            return
        if isinstance(node, c_ast.UnaryOp):
            if node.op == "sizeof":
                return
            if node.op in ("p++", "p--", "++", "--"):
                raise self.fail(node, f"{node.op.strip('p')} inside an expression: a statement may write only its "
                                      "left-hand side", "side effect")
            if node.op in ("&", "*"):
                return self.reject_expression(node, "expression")
            self.reads(node.expr, ctx, out)
            return
        if isinstance(node, c_ast.BinaryOp):
            self.reads(node.left, ctx, out)
            self.reads(node.right, ctx, out)
            return
        if isinstance(node, c_ast.TernaryOp):
            for part in (node.cond, node.iftrue, node.iffalse):
                self.reads(part, ctx, out)
            return
        if isinstance(node, c_ast.Cast):
            if isinstance(node.to_type.type, c_ast.PtrDecl):
                raise self.fail(node, "cast to a pointer type in a scop statement", "pointer cast")
            self.reads(node.expr, ctx, out)
            return
        if isinstance(node, c_ast.FuncCall):
            if not isinstance(node.name, c_ast.ID):
                raise self.fail(node, "call through a function pointer in a scop statement", "call")
            fname = node.name.name
            sym = self.lookup(fname)
            if sym is not None and sym.kind != "func":
                raise self.fail(node, f"call through {fname}, a {sym.describe()}", "call")
            for arg in (node.args.exprs if node.args is not None else []):
                if self.pointer_valued(arg):
                    raise self.fail(arg, f"call to {fname}() with a pointer argument ({_c(arg)}): the callee may "
                                         "read or write through it", "call with pointer argument")
                self.reads(arg, ctx, out)
            if fname not in self.pure:
                # An impure call (rand(), a counter, I/O) would be reordered or run in parallel with
                # itself; refusing the region is the sound choice (skip_nonaffine leaves it as written).
                raise self.fail(node, f"call to {fname}(), which is not known to be pure: its side effects "
                                      f"would be reordered or run in parallel; if it only computes from its "
                                      f"arguments, declare it __attribute__((const)) (or pure) or pass "
                                      f"{option('pure', name=fname)}", "impure call")
            return
        self.reject_expression(node, "expression")

    def pointer_valued(self, node: c_ast.Node) -> bool:
        if isinstance(node, c_ast.ID):
            sym = self.lookup(node.name)
            return sym is not None and sym.kind == "array"
        if isinstance(node, c_ast.ArrayRef):
            n, base = 0, node
            while isinstance(base, c_ast.ArrayRef):
                n, base = n + 1, base.name
            sym = self.lookup(base.name) if isinstance(base, c_ast.ID) else None
            return sym is not None and sym.kind == "array" and n < len(sym.dims)
        if isinstance(node, c_ast.UnaryOp):
            return node.op == "&" or (node.op not in ("*", "sizeof") and self.pointer_valued(node.expr))
        if isinstance(node, c_ast.BinaryOp) and node.op in ("+", "-"):
            return self.pointer_valued(node.left) or self.pointer_valued(node.right)
        if isinstance(node, c_ast.Constant):
            return node.type == "string"
        if isinstance(node, c_ast.Cast):
            return isinstance(node.to_type.type, c_ast.PtrDecl) or self.pointer_valued(node.expr)
        return False

    def reject_expression(self, node: c_ast.Node, where: str):
        if isinstance(node, c_ast.UnaryOp) and node.op == "*":
            raise self.fail(node, f"pointer dereference {_c(node)} in a scop {where}: use array subscripts",
                            "pointer dereference")
        if isinstance(node, c_ast.UnaryOp) and node.op == "&":
            raise self.fail(node, f"address-of {_c(node)} in a scop {where}", "address-of")
        if isinstance(node, c_ast.StructRef):
            raise self.fail(node, f"struct member access {_c(node)} in a scop {where}", "struct member")
        if isinstance(node, c_ast.Assignment):
            raise self.fail(node, f"assignment inside an expression ({_c(node)}): a statement may write only its "
                                  "left-hand side", "nested assignment")
        if isinstance(node, c_ast.ExprList):
            raise self.fail(node, "comma operator in a scop statement", "comma operator")
        raise self.fail(node, f"unsupported {where}: {_c(node)}", type(node).__name__)

    # -- aliasing ----------------------------------------------------------------------------
    def check_aliasing(self) -> None:
        """Refuse arrays that may overlap unless restrict (or assume_no_alias) says they do not.

        Two arrays can share memory when both are reached through pointers
        (array parameters, pointer variables), or one is and the other is a
        global; local arrays and scalars are distinct objects.  Overlap only
        matters when one of them is written.  A ``restrict`` pointer promises
        that what it writes is accessed through it alone.
        """
        if self.assume_no_alias:
            return
        written = {s.write.array for s in self.stmts}
        arrays = [(name, acc, self.lookup(name)) for name, acc in self.accessed.items()]
        for name, acc, sym in arrays:
            if sym is not None and sym.ptrptr:
                raise self.fail(acc.node, f"{name} is a pointer to pointers: its rows may overlap; use a pointer to a "
                                          f"VLA (double (*{name})[m]) or pass {option('assume_no_alias')}",
                                "pointer-to-pointer")
        for (a, acc_a, sa), (b, acc_b, sb) in itertools.combinations(arrays, 2):
            if sa is None or sb is None or (a not in written and b not in written):
                continue
            if sa.restrict or sb.restrict:
                continue
            both_ptr = sa.pointer and sb.pointer
            ptr_global = (sa.pointer and sb.origin == "global") or (sb.pointer and sa.origin == "global")
            if both_ptr or ptr_global:
                acc = acc_a if a in written else acc_b
                kinds = " and ".join(f"{n} ({'pointer parameter' if s.origin == 'param' else s.describe()})"
                                     for n, s in ((a, sa), (b, sb)))
                raise self.fail(acc.node, f"{kinds} may overlap and the region writes {acc.array}: declare the "
                                          "pointers restrict (double A[restrict n][m], double *restrict x) or pass "
                                          f"{option('assume_no_alias')}", "possible alias")
