"""The statements of a region: assignments, ``x++`` and declarations, each a :class:`_Stmt`.

A :class:`_Stmt` keeps its C text (with iterators renamed where isl needs
another name), its write and reads, its domain's conditions and its time
vector.  Declarations inside a region are hoisted to its start
(:meth:`CScop.wrap`) and their initialisers become assignments.  A chained
assignment ``a = b = e`` is one statement per assignment, the innermost
first (:meth:`_StatementReader.assignment`).
:func:`_reduction_form` recognises the updates ``lhs op= e`` that
``reassociate=True`` may turn into reductions.
"""
from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from pycparser import c_ast

from . import affine as A
from .accesses import _Access
from .loops import _Ctx, _Seq
from .symbols import _sym_from_decl, constant_type, promoted, typename_dtype
from .syntax import _c, _nodes, _Renamer


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
    ops: int = 1


def _ops(node: c_ast.Node) -> int:
    """Arithmetic operations one execution of statement ``node`` performs: binary and unary operators,
    calls and a compound assignment's own operator; subscripts are address arithmetic and do not
    count (the cost estimate of :mod:`polytile.c_optimiser.team`).

    >>> from pycparser import c_parser
    >>> body = c_parser.CParser().parse("void f(){ B[i] = 0.3 * (A[i-1] + A[i] + A[i+1]); }").ext[0].body
    >>> _ops(body.block_items[0])
    3
    """
    def count(n: c_ast.Node) -> int:
        if isinstance(n, c_ast.ArrayRef):
            return count(n.name)
        own = 1 if isinstance(n, (c_ast.BinaryOp, c_ast.FuncCall)) else 0
        if isinstance(n, c_ast.UnaryOp) and n.op in ("-", "!", "~", "++", "--", "p++", "p--"):
            own = 1
        if isinstance(n, c_ast.Assignment) and n.op != "=":
            own = 1
        kids = [c for _, c in n.children() if not (isinstance(n, c_ast.FuncCall) and c is n.name)]
        if isinstance(n, c_ast.Assignment):
            kids = [n.rvalue]
        return own + sum(count(c) for c in kids)
    return count(node)


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


def _between(chain: List[c_ast.Assignment], dtypes: List[Optional[str]]) -> List[str]:
    """Why the outer and inner ends of ``chain`` may store different values, for an error message."""
    why = [f"'{a.op}' on {_c(a.lvalue)}" for a in chain[:-1] if a.op != "="]
    why += [f"{_c(a.lvalue)} between them is {d or 'of unknown type'}" for a, d in zip(chain[1:-1], dtypes[1:-1])
            if d != dtypes[0]]
    return why or [f"{_c(chain[0].lvalue)} is of unknown type"]


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
        self.assignment(assign, decl, ctx, seq)

    def assignment(self, node: c_ast.Assignment, origin: c_ast.Node, ctx: _Ctx, seq: _Seq) -> None:
        """``lhs op= e;``, or a chained ``l1 = l2 = ... = e;`` as one statement per assignment.

        In C the value of ``l2 = e`` is ``l2``'s value after the store (``e``
        converted to ``l2``'s type), so ``l1 = l2 = e`` is ``l2 = e;`` then
        ``l1 = l2;``: the outer statement reads the target just written and the
        C compiler applies the same conversions (``int a; double b; a = b =
        2.5`` leaves ``b == 2.5`` and ``a == 2``).  Compound operators fit the
        same way (``a = b += c`` is ``b += c; a = b;``).  Re-reading ``l2`` in
        the next statement designates the same element: subscripts are affine
        in iterators and parameters, never in a value the region assigns.
        """
        chain = [node]
        while isinstance(chain[-1].rvalue, c_ast.Assignment):
            chain.append(chain[-1].rvalue)
        if len(chain) > 1:
            self.check_chain(chain)
        origins = [origin] + chain[1:]
        self.statement(chain[-1], origins[-1], ctx, seq)
        for k in range(len(chain) - 2, -1, -1):
            outer = chain[k]
            read_back = c_ast.Assignment(outer.op, outer.lvalue, chain[k + 1].lvalue, outer.coord)
            self.statement(read_back, origins[k], ctx, seq)

    def typed_iterators(self, node: c_ast.Node, ctx: _Ctx) -> Dict[str, str]:
        """The loop iterators statement ``node`` must read as their declared C type: C name -> type text.

        Generated code binds every iterator as ``const long`` (its value always fits: it is one the
        original loop took).  Statements compute the same with it except where the type itself shows:
        an unsigned iterator (``-i`` wraps), or a statement with an unsigned operand (``j * 3000000000u``
        is unsigned int arithmetic for an ``int j``, not long) or ``sizeof``/``_Alignof``.  There the
        iterator is read through a cast, ``((int)j)``; elsewhere it stays a plain ``long``, which the C
        compiler indexes arrays with directly.  ``long`` iterators never need one.

        >>> # unsigned i: A[i] = -i;  ->  A[((unsigned)i)] = -((unsigned)i);   int i: B[i] = 2 * i + 1 unchanged
        """
        observed = None
        out: Dict[str, str] = {}
        for c, _ in ctx.loops:
            sym = self.iter_sym(c)
            decl = None if sym is None else sym.decl
            if sym is None or sym.dtype == "int64" or not (isinstance(decl, c_ast.Decl)
                                                            and isinstance(decl.type, c_ast.TypeDecl)):
                continue
            if not (sym.dtype or "").startswith(("uint", "bool")):
                if observed is None:
                    observed = self.observes_int_type(node)
                if not observed:
                    continue
            out[c] = _c(decl.type.type)
        return out

    def typed_sizes(self, node: c_ast.Node) -> Dict[str, str]:
        """The unsigned variables statement ``node`` reads and the region never writes: C name -> type text.

        The generated loops read unsigned parameters as ``long`` (:meth:`CScop.wrap` shadows each, so that
        ``n - 2`` in a loop bound is -1 at ``n = 1``, not 2^32 - 1); the statement reads them through a cast
        to their declared type, computing as it did.

        >>> # unsigned n: A[i] = n - 5;  ->  A[i] = ((unsigned)n) - 5;
        """
        out: Dict[str, str] = {}
        for n in _nodes(node):
            if not isinstance(n, c_ast.ID) or n.name in out:
                continue
            name = n.name
            if name in self.loop_iters or name in self.written or name in self.declared_here:
                continue
            sym = self.lookup(name)
            decl = None if sym is None else sym.decl
            if (sym is None or sym.kind != "scalar" or not (sym.dtype or "").startswith(("uint", "bool"))
                    or not (isinstance(decl, c_ast.Decl) and isinstance(decl.type, c_ast.TypeDecl))):
                continue
            out[name] = _c(decl.type.type)
        return out

    def observes_int_type(self, node: c_ast.Node) -> bool:
        """Whether an int and a long operand could give different results in ``node``: it has an operand of
        unsigned int or unsigned long type after promotion (a variable, array element, cast or constant:
        ``3000000000u``, ``0x80000000``) or asks for a size."""
        for n in _nodes(node):
            if isinstance(n, c_ast.UnaryOp) and n.op in ("sizeof", "_Alignof"):
                return True
            if isinstance(n, c_ast.Constant) and constant_type(n)[1]:
                return True
            if isinstance(n, c_ast.ID):
                sym = self.iter_sym(n.name)
                if sym is not None and promoted(sym.dtype)[1]:
                    return True
            if isinstance(n, c_ast.Typename) and promoted(typename_dtype(n, self.file.typedefs))[1]:
                return True
        return False

    def check_chain(self, chain: List[c_ast.Assignment]) -> None:
        """Refuse a chained assignment whose result would depend on an order C leaves open.

        C orders each store after the value computations of its operands, so
        ``e`` and every subscript are read before any store; but the stores of
        one chain are unsequenced with each other, as is a compound
        assignment's read of its own target with the stores inside it (C11
        6.5.16p3; gcc -Wsequence-point warns of ``a = a = 1``).  Two
        assignments of the chain that may write the same object are accepted
        only when both store the same bits whatever the order: every
        assignment from the outer one down to the inner one is a plain ``=``
        into the same type (``A[i] = A[j] = e``, i == j or not; refused:
        ``x = n = x = e`` with an int n, ``s += s = e``).
        """
        def target(lvalue: c_ast.Node) -> Optional[str]:
            while isinstance(lvalue, c_ast.ArrayRef):
                lvalue = lvalue.name
            return lvalue.name if isinstance(lvalue, c_ast.ID) else None  # other targets are refused later

        names = [target(a.lvalue) for a in chain]
        dtypes = [getattr(self.lookup(n), "dtype", None) if n else None for n in names]
        for k, m in itertools.combinations(range(len(chain)), 2):
            if names[k] is None or names[k] != names[m]:
                continue
            if all(a.op == "=" for a in chain[k:m]) and dtypes[k] is not None \
                    and all(d == dtypes[k] for d in dtypes[k:m + 1]):
                continue
            outer, inner = _c(chain[k].lvalue), _c(chain[m].lvalue)
            same = f"{outer} is assigned twice" if outer == inner or not isinstance(chain[k].lvalue, c_ast.ArrayRef) \
                else f"{outer} and {inner} may be the same element"
            raise self.fail(chain[m].lvalue, f"{same} in one chained assignment, and the two may store different "
                                             f"values ({', '.join(_between(chain[k:m + 1], dtypes[k:m + 1]))}"
                                             "): C leaves the order of the stores open; write the assignments as "
                                             "separate statements", "unsequenced assignments")

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
        for c, t in self.typed_iterators(node, ctx).items():
            renames[c] = f"(({t}){renames.get(c, c)})"
        for c, t in self.typed_sizes(node).items():
            renames.setdefault(c, f"(({t}){c})")
        if renames:
            _Renamer(renames).visit(text_node)
        name = f"S{len(self.stmts)}"
        time = ctx.prefix + (str(seq.next()),)
        self.stmts.append(_Stmt(name, origin, tuple(v for _, v in ctx.loops), ctx.conds, time, write, reads,
                                _c(text_node) + ";", _update_text(text_node), tuple(operand_reads),
                                max(1, _ops(node))))
