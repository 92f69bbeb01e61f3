"""The statements of a region: assignments, ``x++`` and declarations, each a :class:`_Stmt`.

A :class:`_Stmt` keeps its C text (with iterators renamed where isl needs
another name), its write and reads, its domain's conditions and its time
vector.  Declarations inside a region are hoisted to its start
(:meth:`CScop.wrap`) and their initialisers become assignments.
:func:`_reduction_form` recognises the updates ``lhs op= e`` that
``reassociate=True`` may turn into reductions.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import List, Optional, Tuple

from pycparser import c_ast

from . import affine as A
from .accesses import _Access
from .loops import _Ctx, _Seq
from .symbols import _sym_from_decl
from .syntax import _c, _Renamer


@dataclass
class _Stmt:
    name: str
    node: c_ast.Node
    iters: Tuple[str, ...]
    conds: Tuple[A.Formula, ...]
    time: Tuple[str, ...]
    write: _Access
    reads: List[_Access]
    c_text: str
    # ``lhs op= e`` / ``lhs = lhs op e`` (op +, - or *), the update reassociation may reorder:
    # (lhs, "+=" | "-=" | "*=", e) as C text (isl iterator names); ``operand`` are the reads of e alone.
    update: Optional[Tuple[str, str, str]] = None
    operand: Tuple[_Access, ...] = ()


def _reduction_form(node: c_ast.Node) -> Tuple[Optional[str], Optional[c_ast.Node]]:
    """``(op, e)`` when ``node`` updates its left-hand side by ``e`` with an associative operator.

    ``s += e``, ``s -= e``, ``s = s + e``, ``s = e + s``, ``s = s - e`` and
    ``s++``/``s--`` are ``'+'`` updates (a difference is a sum of negated
    terms); ``s *= e``, ``s = s * e``, ``s = e * s`` are ``'*'``.  ``e`` is
    None for ``++``/``--``.  Anything else (``s = e - s``, ``s /= e``) is
    ``(None, None)``.
    """
    if isinstance(node, c_ast.UnaryOp) and node.op in ("++", "--", "p++", "p--"):
        return "+", None
    if not isinstance(node, c_ast.Assignment):
        return None, None
    if node.op in ("+=", "-="):
        return "+", node.rvalue
    if node.op == "*=":
        return "*", node.rvalue
    rv = node.rvalue
    if node.op != "=" or not isinstance(rv, c_ast.BinaryOp) or rv.op not in ("+", "-", "*"):
        return None, None
    lhs = _c(node.lvalue)
    op = "*" if rv.op == "*" else "+"
    if _c(rv.left) == lhs:
        return op, rv.right
    if rv.op != "-" and _c(rv.right) == lhs:
        return op, rv.left
    return None, None


def _update_text(node: c_ast.Node) -> Optional[Tuple[str, str, str]]:
    """``(lhs, op, e)`` of an update in :func:`_reduction_form`, as C text; None for other statements.

    >>> # s -= U[i][j] * x[j]  ->  ("s", "-=", "U[i][j] * x[j]");  s = s * 2  ->  ("s", "*=", "2")
    """
    op, operand = _reduction_form(node)
    if op is None:
        return None
    if isinstance(node, c_ast.UnaryOp):
        return _c(node.expr), ("+=" if "+" in node.op else "-="), "1"
    if node.op in ("+=", "-=", "*="):
        c_op = node.op
    else:
        c_op = {"+": "+=", "-": "-=", "*": "*="}[node.rvalue.op]
    return _c(node.lvalue), c_op, _c(operand)


class _StatementReader:
    """Reading statements, for the extractor (:class:`polytile.frontends.c.extract._Extractor` mixes it in).

    Uses the accesses of :class:`.accesses._AccessReader` (``lvalue``,
    ``reads``) and fills the extractor's ``stmts``, ``accessed``, ``decls``
    and ``region_syms``.
    """

    def declaration(self, decl: c_ast.Decl, ctx: _Ctx, seq: _Seq) -> None:
        if not decl.name:
            raise self.fail(decl, "type definitions inside a scop region are not supported", "declaration")
        if set(decl.storage or []) & {"static", "extern", "register", "typedef"}:
            raise self.fail(decl, f"'{' '.join(decl.storage)}' declaration inside a scop region", "declaration")
        sym = _sym_from_decl(decl, "region", self.file.typedefs)
        if sym.kind not in ("scalar", "array") or sym.pointer:
            raise self.fail(decl, f"declaration of {decl.name} ({sym.describe()}) inside a scop region: only "
                                  "arithmetic scalars and arrays can be declared there", "declaration")
        if decl.name in self.scope:
            raise self.fail(decl, f"{decl.name} declared inside the region shadows an outer {decl.name}: rename it "
                                  "(declarations in a region are hoisted to its start)", "declaration")
        hoisted = copy.deepcopy(decl)
        hoisted.init = None
        hoisted.quals = [q for q in (hoisted.quals or []) if q != "const"]
        t = hoisted.type
        while not isinstance(t, c_ast.TypeDecl):
            t = t.type
        t.quals = [q for q in (t.quals or []) if q != "const"]
        text = _c(hoisted) + ";"
        prev = self.region_syms.get(decl.name)
        if prev is not None:
            if text not in self.decls:
                raise self.fail(decl, f"{decl.name} is declared twice in the region with different types",
                                "declaration")
        else:
            self.region_syms[decl.name] = sym
            self.decls.append(text)
        if decl.init is None:
            return
        if sym.kind == "array" or isinstance(decl.init, c_ast.InitList):
            raise self.fail(decl, f"initialised array {decl.name} inside a scop region", "declaration")
        assign = c_ast.Assignment("=", c_ast.ID(decl.name, decl.coord), decl.init, decl.coord)
        self.statement(assign, decl, ctx, seq)

    def statement(self, node: c_ast.Node, origin: c_ast.Node, ctx: _Ctx, seq: _Seq) -> None:
        reads: List[_Access] = []
        if isinstance(node, c_ast.Assignment):
            write = self.lvalue(node.lvalue, ctx)
            if node.op != "=":
                reads.append(write)
            self.reads(node.rvalue, ctx, reads)
        else:
            write = self.lvalue(node.expr, ctx)
            reads.append(write)
        operand = _reduction_form(node)[1]
        operand_reads: List[_Access] = []
        if operand is not None:
            self.reads(operand, ctx, operand_reads)
        for acc in [write] + reads:
            self.accessed.setdefault(acc.array, acc)
        text_node = copy.deepcopy(node)
        renames = {c: v for c, v in ctx.loops if c != v}
        if renames:
            _Renamer(renames).visit(text_node)
        name = f"S{len(self.stmts)}"
        time = ctx.prefix + (str(seq.next()),)
        self.stmts.append(_Stmt(name, origin, tuple(v for _, v in ctx.loops), ctx.conds, time, write, reads,
                                _c(text_node) + ";", _update_text(text_node), tuple(operand_reads)))
