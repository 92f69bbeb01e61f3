"""The isl objects of an extracted region: context, domains, access relations, schedule and arrays, as a Scop.

:class:`_ScopBuilder` turns what the extractor read from the C (statements,
loops, accesses, parameters) into a :class:`polytile.poly.scop.Scop` inside
a :class:`CScop`; on the way it finds the macros whose values the code
bakes in (:meth:`_ScopBuilder.macro_guards`) and, with ``reassociate``, the
reductions whose updates may be reordered.
"""
from __future__ import annotations

import itertools
import re
from typing import List, Optional, Sequence, Set, Tuple

import islpy as isl
from pycparser import c_ast

from polytile.errors import InternalError
from polytile.isl_parts import maps_of
from polytile.poly import body as B
from polytile.poly.scop import Array, Scop, Statement

from . import affine as A
from .accesses import _Access
from .cscop import CScop
from .regions import _ENDSCOP_LINE, _SCOP_LINE
from .source import _INT_BODY
from .statements import _Stmt
from .symbols import converted
from .syntax import _address_taken, _assigned_names, _ids


class _ScopBuilder:
    """Building the Scop, for the extractor (:class:`polytile.frontends.c.extract._Extractor` mixes it in).

    Runs after the walk: reads the extractor's ``stmts``, ``loops``,
    ``accessed``, ``params_used``, ``fixed`` and ``notes``, and checks each
    loop with :meth:`.loops._LoopReader.check_loop`.
    """

    def build(self) -> CScop:
        params = sorted(self.params_used)
        hdr = f"[{', '.join(params)}] -> " if params else ""
        self.hdr = hdr
        context = self.context(params)
        for loop in self.loops:
            self.check_loop(loop, context)
        statements = []
        width = max((len(s.time) for s in self.stmts), default=1)
        sched_parts = []
        for s in self.stmts:
            tup = f"{s.name}[{', '.join(s.iters)}]"
            domain = self.isl(isl.Set, f"{hdr}{{ {tup} : {A.formula_text(A.conj(s.conds))} }}").intersect_params(context)
            write = self.access_map(tup, s.write)
            reads = isl.UnionMap.empty(domain.get_space().params())
            for r in s.reads:
                reads = reads.union(isl.UnionMap.from_map(self.access_map(tup, r)))
            time = list(s.time) + ["0"] * (width - len(s.time))
            sched_parts.append(f"{tup} -> [{', '.join(time)}]")
            sym = self.lookup(s.write.array)
            reduce = self.reduction(s, tup, domain, write) if self.reassociate else None
            body = B.Store(s.write.array, self.index_nodes(s.write), B.Const(0, sym.dtype or "float64"), reduce)
            loc = self.src.location(s.node.coord)
            statements.append(Statement(s.name, s.iters, domain, body, "c", origin=s.write.array, text=s.c_text,
                                        loc=loc, c_text=s.c_text, c_update=s.update, c_ops=s.ops,
                                        reads_override=reads, write_override=write))
        arrays = self.arrays(statements)
        domain = isl.UnionSet.empty(context.get_space())
        for st in statements:
            domain = domain.union(isl.UnionSet.from_set(st.domain))
        tree = None
        if statements:
            umap = self.isl(isl.UnionMap, f"{hdr}{{ {'; '.join(sched_parts)} }}")
            restricted = umap.intersect_domain(domain)
            # When nothing runs at all, the unrestricted maps still give isl the band's space.
            umap = restricted if not restricted.is_empty() else umap
            tree = isl.Schedule.from_domain(domain).insert_partial_schedule(isl.MultiUnionPwAff.from_union_map(umap))
        func = self.region.func.decl.name
        name = func if self.index == 0 else f"{func}_{self.index}"
        scop = Scop.build(name, statements, arrays, context=context, schedule=tree)
        scalars = tuple(a for a in self.accessed if self.lookup(a).kind == "scalar")
        return CScop(scop, self.src.path, func, self.region.start, self.region.end, self.region.lines,
                     tuple(self.iter_c_names), scalars, tuple(params), dict(self.fixed), dict(self.src.macros),
                     tuple(self.decls), self.file.signature(self.region.func), tuple(self.notes),
                     guards=self.macro_guards(params), taken=self.file.taken,
                     dead_after=self.dead_after(scalars), scalar_types=self.scalar_types(scalars),
                     final_values=self.final_values(),
                     # a variable fixed by --dims: the code was generated for that value only
                     assumptions=tuple(self.assumed) + tuple(f"{v} == {int(self.fixed[v])}"
                                                             for v in sorted(self.fixed_vars)),
                     original=self.original_text(),
                     unsigned_params=tuple(p for p in params if self.params_used[p] != "macro" and
                                           (getattr(self.lookup(p), "dtype", None) or "").startswith(("uint",
                                                                                                    "bool"))))

    def original_text(self) -> str:
        """The region's statements as the file wrote them, without its ``#pragma scop``/``endscop`` lines: the
        code :meth:`CScop.wrap` runs where the context's assumptions do not hold."""
        raw = self.src.raw[self.region.start:self.region.end].decode("utf-8", "surrogateescape")
        return "".join(line for line in raw.splitlines(keepends=True)
                       if not (_SCOP_LINE.match(line) or _ENDSCOP_LINE.match(line)))

    def macro_guards(self, params: Sequence[str]) -> Tuple[Tuple[str, int], ...]:
        """Integer macros the region's text reaches (directly or through other macros) whose value the
        generated code bakes in: those cpp expanded (headers, ``-D``) and file macros fixed by ``params``."""
        defines = self.src.defines
        text = self.src.raw[self.region.start:self.region.end].decode("utf-8", "replace")
        todo = [t for t in re.findall(r"[A-Za-z_]\w*", text) if t in defines]
        seen: Set[str] = set()
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            todo += [t for t in re.findall(r"[A-Za-z_]\w*", defines[name][1]) if t in defines and t not in seen]
        out = []
        for name in sorted(seen):
            args, body, where = defines[name]
            if where == "system" or args is not None or name in params:
                continue
            if name in self.src.macros:  # kept as a name: baked only when fixed
                if name in self.fixed:
                    out.append((name, int(self.fixed[name])))
                continue
            m = _INT_BODY.match(body)
            if not m:
                continue  # not an integer (a type, an expression over other macros: those are followed)
            lit = m.group(1).replace(" ", "")
            value = A.c_int_literal(lit.lstrip("+-"))
            if value is not None:
                out.append((name, -value if lit.startswith("-") else value))
        return tuple(out)

    def reduction(self, s: _Stmt, tup: str, domain: isl.Set, write: isl.Map) -> Optional[str]:
        """The operator of ``s`` as a reduction whose updates may be reordered, or None.

        ``s`` must have the form ``lhs op= e`` (:func:`.statements._reduction_form`) and
        ``e`` must never read the cell the same instance writes: with
        ``{ S[x] -> A[w(x)] }`` the write and ``{ S[x] -> A[r(x)] }`` a read
        of ``e``, ``{ S[x] : w(x) = r(x) }`` is empty.  Then the dependences
        between instances that update one cell carry nothing but the running
        value, and a schedule may reorder them (``reassociate=True``).
        """
        if s.update is None:
            return None
        op = "*" if s.update[1] == "*=" else "+"  # a difference is a sum of negated terms
        for r in s.operand:
            if r.array != s.write.array:
                continue
            hit = self.access_map(tup, r).intersect(write).intersect_domain(domain)
            if not hit.is_empty():
                self.notes.append(f"{s.name} (line {self.src.location(s.node.coord).line}) is not reassociated: "
                                  f"its operand reads the cell it updates ({hit.domain().coalesce()})")
                return None
        self.notes.append(f"{s.name} (line {self.src.location(s.node.coord).line}) is a {op}-reduction "
                          f"on {s.write.array}: its updates may be reordered (reassociate)")
        return op

    def isl(self, cls, text: str):
        try:
            return cls(text)
        except isl.Error as e:
            raise InternalError(f"C frontend produced isl text that isl rejects ({e}):\n  {text}") from None

    def context(self, params: Sequence[str]) -> isl.Set:
        """The parameters' values the region is optimised for: what the code shows (unsigned types,
        affine ``if`` guards around the region) and, assumed, ``p >= 1`` for every function argument and
        macro that sizes it.  The assumptions the shown facts do not imply are kept in ``self.assumed``
        (C conditions such as ``n >= 1``): the optimised code runs only where they hold
        (:meth:`CScop.wrap`).

        ``[n] -> { : n >= 1 }`` for ``void f(int n) { ... }``; ``self.assumed == ["n >= 1"]``.
        """
        parts: List[A.Formula] = []
        sizes: List[str] = []
        for p in params:
            # Sizes are positive: function arguments, and macros whose own value is (a macro
            # defined as -1 is an offset, not a size).
            origin = self.params_used[p]
            if origin == "param" or (origin == "macro" and self.src.macros.get(p, 1) >= 1):
                sizes.append(p)
            elif (getattr(self.lookup(p), "dtype", None) or "").startswith("uint"):
                parts.append(A.ge(A.Lin.var(p)))  # an unsigned variable is never negative
        # A guard speaks of the region only if nothing may change its names in between: not assigned in the
        # function, address never taken (shrink(&n)), not a global (any call may change one).
        assigned = _assigned_names(self.region.func.body) | _address_taken(self.region.func.body)
        assigned |= {p for p in params if self.params_used[p] == "global"}
        known = set(params) | set(self.fixed)

        def resolve(name, node):
            if name in self.fixed:
                return A.Lin.constant(int(self.fixed[name]))
            if name in self.file.enums:
                return A.Lin.constant(self.file.enums[name])
            if name in params:
                return A.Lin.var(name)
            raise A.NotAffine(node, "not a parameter")

        # Comparisons C makes in an unsigned type are modelled as such (`if (n - 1 >= 0)` with an unsigned n
        # holds for every n, so it says nothing), as in loop conditions.
        resolve.unsigned_compare = lambda left, right: converted(self.int_type(left), self.int_type(right))[1]
        # Conjuncts of a guard are used one by one (a 'then' branch knows each of them holds); an
        # 'else' branch knows only the negation of the whole condition.
        guards: List[Tuple[c_ast.Node, bool]] = []
        for cond, positive in self.region.guards:
            stack, parts_of = [cond], []
            while stack:
                top = stack.pop()
                if positive and isinstance(top, c_ast.BinaryOp) and top.op == "&&":
                    stack += [top.left, top.right]
                else:
                    parts_of.append(top)
            guards += [(c, positive) for c in parts_of]
        for cond, positive in guards:
            names = {i.name for i in _ids(cond)}
            if names & assigned or not names <= known | set(self.file.enums):
                continue  # the guard may not hold at the region, or speaks of other things
            try:
                f = A.to_formula(cond, resolve)
            except A.NotAffine:
                continue
            parts.append(f if positive else A.negate(f))
        shown = self.isl(isl.Set, f"{self.hdr}{{ : {A.formula_text(A.conj(parts))} }}")
        context = shown
        self.assumed = []
        for p in sizes:
            # { : p >= 1 }, assumed only where what the code shows does not imply it already
            size = self.isl(isl.Set, f"{self.hdr}{{ : {p} >= 1 }}")
            if not shown.is_subset(size):
                self.assumed.append(f"{p} >= 1")
            context = context.intersect(size)
        return context

    def access_map(self, tup: str, acc: _Access) -> isl.Map:
        parts = []
        for combo in itertools.product(*acc.index):
            guard = A.conj(g for g, _ in combo)
            if guard == A.FALSE:
                continue
            idx = ", ".join(l.text() for _, l in combo)
            parts.append(f"{tup} -> {acc.array}[{idx}] : {A.formula_text(guard)}")
        if not parts:
            zeros = ", ".join("0" for _ in acc.index)
            parts.append(f"{tup} -> {acc.array}[{zeros}] : 1 = 0")
        return self.isl(isl.Map, f"{self.hdr}{{ {'; '.join(parts)} }}")

    def index_nodes(self, acc: _Access) -> Tuple[B.Node, ...]:
        """Body index expressions of an access (the first piece when piecewise; for reports only)."""
        return tuple(_lin_node(p[0][1]) for p in acc.index)

    def arrays(self, statements: Sequence[Statement]) -> List[Array]:
        out = []
        concrete = not self.params_used
        for name, acc in self.accessed.items():
            sym = self.lookup(name)
            if not sym.dtype:
                raise self.fail(acc.node, f"{name} has an element type the frontend cannot map to a dtype",
                                "element type")
            if sym.kind == "scalar":
                out.append(Array(name, name, (), sym.dtype, "inout"))
                continue
            shape = []
            for k, d in enumerate(sym.dims):
                size = None
                if d is not None:
                    try:
                        size = A.pw_const(A.to_pw(d, self._shape_resolver()))
                    except A.NotAffine:
                        size = None
                if size is None and concrete and d is None:
                    # Only an extent C leaves open (a pointer's) is read off the accesses; a
                    # declared but unevaluated one (a variable outside the region) stays unknown.
                    size = self.extent(name, k, statements)
                shape.append(-1 if size is None else int(size))
            out.append(Array(name, name, tuple(shape), sym.dtype, "inout"))
        return out

    def _shape_resolver(self):
        def resolve(name, node):
            if name in self.fixed:
                return A.Lin.constant(int(self.fixed[name]))
            if name in self.file.enums:
                return A.Lin.constant(self.file.enums[name])
            raise A.NotAffine(node, "symbolic extent")

        return resolve

    def extent(self, array: str, dim: int, statements: Sequence[Statement]) -> int:
        """Extent C does not declare (``double *x``): one past the largest index the region touches."""
        touched = None
        for st in statements:
            for rel in (isl.UnionMap.from_map(st.write_map()), st.reads()):
                for m in maps_of(rel):
                    if m.get_tuple_name(isl.dim_type.out) == array:
                        r = m.range()
                        touched = r if touched is None else touched.union(r)
        if touched is None or touched.is_empty():
            return 0
        hi = touched.dim_max_val(dim)
        return int(hi.to_python()) + 1


def _lin_node(l: A.Lin) -> B.Node:
    """A body expression for a linear form (iterators, parameters, floor-divisions)."""
    node: Optional[B.Node] = None
    for key, c in l.terms:
        if key in A.ATOMS:
            kind, inner, d = A.ATOMS[key]
            q = B.Bin("//", _lin_node(inner), B.Const(d, B.INDEX), B.INDEX)
            base = q if kind == "floor" else B.Bin("-", _lin_node(inner), B.Bin("*", B.Const(d, B.INDEX), q, B.INDEX),
                                                   B.INDEX)
        else:
            base = B.Iter(key)
        term = base if c == 1 else B.Bin("*", B.Const(c, B.INDEX), base, B.INDEX)
        node = term if node is None else B.Bin("+", node, term, B.INDEX)
    if node is None:
        return B.Const(l.const, B.INDEX)
    return node if not l.const else B.Bin("+", node, B.Const(l.const, B.INDEX), B.INDEX)
