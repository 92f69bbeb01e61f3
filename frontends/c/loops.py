"""The ``for`` loops of a region: iterator, bounds and step read from C, and the check that the condition bounds them.

:class:`_Ctx` is where the extractor's walk stands (enclosing loops and
conditions, the schedule's time vector so far), :class:`_Seq` numbers the
statements at one loop depth, :class:`_Loop` keeps a loop for the check
made once the region's parameters are known (:meth:`_LoopReader.check_loop`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Tuple

import islpy as isl
from pycparser import c_ast

from polytile.names import is_safe

from . import affine as A
from .symbols import _is_integer, _sym_from_decl
from .syntax import _c


@dataclass
class _Loop:
    node: c_ast.For
    iter: str  # isl name
    outer: Tuple[str, ...]
    outer_conds: Tuple[A.Formula, ...]
    lower: A.Formula
    cond: A.Formula
    step: int


@dataclass(frozen=True)
class _Ctx:
    loops: Tuple[Tuple[str, str], ...] = ()  # (C name, isl name), outermost first
    conds: Tuple[A.Formula, ...] = ()
    prefix: Tuple[str, ...] = ()  # time vector so far: beta, alpha, beta, alpha, ...

    def iter_map(self) -> Dict[str, str]:
        return dict(self.loops)


class _Seq:
    """Statement positions at one loop depth (``if`` and ``{}`` share their parent's)."""

    def __init__(self) -> None:
        self.k = 0

    def next(self) -> int:
        self.k += 1
        return self.k - 1


class _LoopReader:
    """The ``for`` loops of the extractor (:class:`polytile.frontends.c.extract._Extractor` mixes it in).

    Uses the extractor's name resolution (``lookup``, ``pw``, ``formula``,
    ``resolver``), errors (``fail``), its walk (``item``) and, for
    :meth:`check_loop`, the isl helpers of :class:`.scop_build._ScopBuilder`.
    """

    def for_loop(self, node: c_ast.For, ctx: _Ctx, seq: _Seq) -> None:
        init = node.init
        if isinstance(init, c_ast.DeclList):
            if len(init.decls) != 1 or init.decls[0].init is None:
                raise self.fail(node, "for loop initialisation must declare and set one iterator "
                                      "(for (int i = lb; ...))", "for loop")
            decl = init.decls[0]
            name, lb_node = decl.name, decl.init
            sym = _sym_from_decl(decl, "region", self.file.typedefs)
            init = decl  # errors about the iterator point at its declaration
        elif isinstance(init, c_ast.Assignment) and init.op == "=" and isinstance(init.lvalue, c_ast.ID):
            name, lb_node = init.lvalue.name, init.rvalue
            sym = self.lookup(name)
            if sym is None:
                raise self.fail(init, f"loop iterator {name} is not declared", "for loop")
        else:
            raise self.fail(init if init is not None else node,
                            "for loop initialisation must set the iterator (i = lb)", "for loop")
        if sym.kind != "scalar" or not _is_integer(sym.dtype):
            raise self.fail(init, f"loop iterator {name} is not an integer variable ({sym.describe()})", "for loop")
        if name in ctx.iter_map():
            raise self.fail(init, f"loop iterator {name} is already the iterator of an enclosing loop", "for loop")
        if node.cond is None:
            raise self.fail(node, "for loop without a condition", "for loop")
        step = self.loop_step(node, name, ctx)
        lower = self.pw(lb_node, ctx, "loop bound")
        isl_name = self.iterator_name(name)
        outer_sym = self.active_iters.get(name)
        self.active_iters[name] = sym  # the condition and the body read this loop's i (its declared type)
        try:
            self.loop_rest(node, ctx, seq, name, isl_name, lower, step)
        finally:
            if outer_sym is None:
                self.active_iters.pop(name, None)
            else:
                self.active_iters[name] = outer_sym

    def loop_rest(self, node: c_ast.For, ctx: _Ctx, seq: _Seq, name: str, isl_name: str, lower, step: int) -> None:
        """The condition and the body of :meth:`for_loop`'s loop, with its iterator ``name`` in scope."""
        inner = _Ctx(ctx.loops + ((name, isl_name),), ctx.conds, ctx.prefix)
        cond = self.formula(node.cond, inner, "loop condition")
        if isl_name not in A.formula_names(cond):
            raise self.fail(node.cond, f"loop condition does not bound the iterator {name}", "loop condition")
        it = A.Lin.var(isl_name)
        parts = []
        for guard, lb in lower:
            dist = it.sub(lb) if step > 0 else lb.sub(it)  # iterations so far times |step|
            stride = A.eq(A.Lin.atom("mod", dist, abs(step))) if abs(step) > 1 else A.TRUE
            parts.append(A.conj([guard, A.ge(dist), stride]))
        low = A.disj(parts)
        self.loops.append(_Loop(node, isl_name, tuple(v for _, v in ctx.loops), ctx.conds, low, cond, step))
        if name not in self.iter_c_names:
            self.iter_c_names.append(name)
        alpha = isl_name if step > 0 else f"-{isl_name}"
        body_ctx = _Ctx(inner.loops, ctx.conds + (low, cond), ctx.prefix + (str(seq.next()), alpha))
        if node.stmt is not None:
            self.item(node.stmt, body_ctx, _Seq())

    def loop_step(self, node: c_ast.For, name: str, ctx: _Ctx) -> int:
        nxt = node.next
        bad = self.fail(nxt if nxt is not None else node,
                        f"loop increment must be {name}++, {name}--, {name} += c or {name} -= c with a constant c",
                        "loop increment")

        def const(e):
            try:
                v = A.pw_const(A.to_pw(e, self.resolver(ctx)))
            except A.NotAffine:
                v = None
            if v is None:
                raise bad
            return v

        def is_it(e):
            return isinstance(e, c_ast.ID) and e.name == name

        step = None
        if isinstance(nxt, c_ast.UnaryOp) and is_it(nxt.expr):
            step = {"p++": 1, "++": 1, "p--": -1, "--": -1}.get(nxt.op)
        elif isinstance(nxt, c_ast.Assignment) and is_it(nxt.lvalue):
            if nxt.op in ("+=", "-="):
                step = const(nxt.rvalue) * (1 if nxt.op == "+=" else -1)
            elif nxt.op == "=" and isinstance(nxt.rvalue, c_ast.BinaryOp) and nxt.rvalue.op in ("+", "-"):
                l, r = nxt.rvalue.left, nxt.rvalue.right
                if is_it(l):
                    step = const(r) * (1 if nxt.rvalue.op == "+" else -1)
                elif is_it(r) and nxt.rvalue.op == "+":
                    step = const(l)
        if not step:
            raise bad
        return step

    def iterator_name(self, c_name: str) -> str:
        """The iterator's name in isl text and in the statement's C text (renamed only if unsafe)."""
        if c_name not in self.isl_iter:
            # isl keywords, C/libm names and the generated c0, c1, ... would break isl text or the
            # generated block that binds the iterator; such iterators get a fresh name everywhere.
            self.isl_iter[c_name] = c_name if is_safe(c_name) else self.names.claim(c_name)
        return self.isl_iter[c_name]

    def check_loop(self, loop: _Loop, context: isl.Set) -> None:
        """The loop condition must bound the iterator in the loop's direction (see :mod:`.extract`).

        With ``L`` the points past the lower bound and ``C`` those satisfying
        the condition, C's loop runs from the start while the condition holds;
        the domain ``L and C`` is right only if no point of it lies beyond a
        point of ``L`` where the condition is already false.
        """
        names = list(loop.outer) + [loop.iter]
        tup = f"[{', '.join(names)}]"
        outer = A.conj(loop.outer_conds)
        cond_f = A.conj([outer, loop.lower, loop.cond])
        low_f = A.conj([outer, loop.lower])
        runs = self.isl(isl.Set, f"{self.hdr}{{ {tup} : {A.formula_text(cond_f)} }}").intersect_params(context)
        past = self.isl(isl.Set, f"{self.hdr}{{ {tup} : {A.formula_text(low_f)} }}").intersect_params(context)
        stopped = past.subtract(runs)
        xs = [f"x{k}" for k in range(len(loop.outer))]
        rel = "<" if loop.step > 0 else ">"
        order = self.isl(isl.Map, f"{self.hdr}{{ [{', '.join(xs + ['a'])}] -> [{', '.join(xs + ['b'])}] : b {rel} a }}")
        early = order.intersect_domain(runs).intersect_range(stopped)
        name = next(c for c, v in self.isl_iter.items() if v == loop.iter)
        if not early.is_empty():
            raise self.fail(loop.node.cond, f"loop condition {_c(loop.node.cond)} is not a bound on {name}: the loop "
                                            "would stop at its first failing iteration, which the polyhedral domain "
                                            "cannot express", "loop condition")
        if not runs.is_bounded():
            direction = "upper" if loop.step > 0 else "lower"
            raise self.fail(loop.node.cond, f"loop over {name} has no {direction} bound (condition "
                                            f"{_c(loop.node.cond)})", "loop condition")
