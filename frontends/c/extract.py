"""Polyhedral extraction from C: ``#pragma scop`` regions (or whole functions) become Scops.

A region is a sequence of statements between ``#pragma scop`` and
``#pragma endscop`` in one block (pet's and PPCG's convention), or, with
``function=NAME``, the body of that function after its leading
declarations.  Each region becomes a :class:`CScop`: a Scop whose statements
keep their own C text, with explicit access relations, plus what a
source-to-source driver needs to put generated code back.  Modelled: affine
``for`` loops and ``if`` conditions, assignments (a chained one ``a = b = e``
as one statement per assignment) and declarations calling only
pure functions (:data:`PURE_FUNCTIONS`, ``__attribute__((const|pure))``, or
``pure=[...]``), arrays, region scalars, parameters and integer macros.
Refused (``CFrontendError``, located): anything data-dependent or non-affine,
other control flow and calls, ``volatile``, pointer arithmetic, and pointers
that may alias.  Design (what is modelled and refused, macro guards, names):
docs/c-optimiser.md, "What the C frontend reads".

The extractor is one class made of parts, each in its module:
:mod:`.regions` finds the regions of the parsed file, :class:`_Extractor`
(here) resolves names and walks a region's control flow, :mod:`.loops`
reads ``for`` loops, :mod:`.statements` and :mod:`.accesses` read
statements and their accesses (and check aliasing), and :mod:`.scop_build`
makes the isl objects of the :class:`~.cscop.CScop` (:mod:`.cscop`).
"""
from __future__ import annotations

import re
from typing import Dict, List, Mapping, Optional, Sequence, Set, Tuple

from pycparser import c_ast

from polytile.errors import SourceLocation
from polytile.names import ISL_KEYWORDS, NameTable

from . import affine as A
from .accesses import _Access, _AccessReader
from .cscop import CParam, CScop
from .loops import _Ctx, _Loop, _LoopReader, _Seq
from .regions import _File, _Region
from .scop_build import _ScopBuilder
from .source import CFrontendError, load, option
from .statements import _StatementReader, _Stmt
from .symbols import PURE_FUNCTIONS, _is_integer, _Sym, constant_type, converted, promoted, typename_dtype
from .syntax import _assigned_names, _c, _ids, _nodes


_PREFIX_OPS = ("*", "&", "-", "+", "!", "~", "++", "--")


class _Extractor(_LoopReader, _StatementReader, _AccessReader, _ScopBuilder):
    """One region read into a :class:`CScop`: :meth:`run` walks its C, ``build()`` makes its Scop.

    The walk, name resolution and errors are here; loops, statements,
    accesses and the isl objects come from the mixed-in parts.
    """

    def __init__(self, file: _File, region: _Region, index: int, fixed: Mapping[str, int], assume_no_alias: bool,
                 reassociate: bool = False, pure: Sequence[str] = ()):
        self.file = file
        # Known pure: the documented list (unless the file defines a function of that name itself),
        # what the file declares const/pure, and what the caller vouches for.
        self.pure = (PURE_FUNCTIONS - set(file.functions)) | file.src.pure | set(pure)
        self.reassociate = reassociate
        self.src = file.src
        self.region = region
        self.index = index
        self.fixed = dict(fixed)
        self.assume_no_alias = assume_no_alias
        self.scope = region.scope
        self.region_syms: Dict[str, _Sym] = {}
        self.decls: List[str] = []
        self.stmts: List[_Stmt] = []
        self.loops: List[_Loop] = []
        self.params_used: Dict[str, str] = {}  # name -> origin ("param", "macro", "global", "local")
        self.fixed_vars: Set[str] = set()  # variables (not macros) the region reads, fixed by ``fixed``
        self.notes: List[str] = []
        self.iter_c_names: List[str] = []
        self.active_iters: Dict[str, _Sym] = {}  # C name -> symbol of the enclosing loops' iterators (for_loop)
        self.isl_iter: Dict[str, str] = {}
        self.accessed: Dict[str, _Access] = {}  # first access of each array, in order
        # names taken in the whole file: renamed iterators must not collide with any
        self.names = NameTable(n.name for n in _ids(file.ast))
        self._prepass()

    # -- errors ------------------------------------------------------------------
    def fail(self, node: c_ast.Node, message: str, construct: str) -> CFrontendError:
        coord = getattr(node, "coord", None) or self.region.anchor.coord
        err = self.src.error(coord, message, construct)
        if isinstance(node, c_ast.UnaryOp) and node.op in _PREFIX_OPS and err.loc is not None:
            # pycparser places a prefix operator at its operand; point at the operator itself.
            loc = err.loc
            before = loc.text[: loc.col - 1].rstrip(" \t(")
            if before.endswith(node.op):
                col = len(before) - len(node.op) + 1
                err = CFrontendError(message, SourceLocation(loc.file, loc.line, col, loc.text), construct)
        return err

    # -- prepass: which names are iterators, which scalars are assigned ------------
    def _prepass(self) -> None:
        self.loop_iters: Set[str] = set()
        self.written: Set[str] = set()
        self.declared_here: Set[str] = set()
        self.declared_at: Dict[str, int] = {}  # the line of each name's first declaration in the region

        def visit(node):
            if isinstance(node, c_ast.For):
                name = self._loop_var(node)
                if name:
                    self.loop_iters.add(name)
                for child in (node.cond, node.stmt):
                    if child is not None:
                        visit(child)
                return
            if isinstance(node, c_ast.Decl) and node.name:
                self.declared_here.add(node.name)
                if node.coord is not None:
                    self.declared_at.setdefault(node.name, node.coord.line)
            self.written |= _assigned_names(node) if isinstance(node, (c_ast.Assignment, c_ast.UnaryOp)) else set()
            for _, child in node.children():
                visit(child)

        for it in self.region.items:
            visit(it)

    @staticmethod
    def _loop_var(node: c_ast.For) -> Optional[str]:
        init = node.init
        if isinstance(init, c_ast.DeclList) and len(init.decls) == 1:
            return init.decls[0].name
        if isinstance(init, c_ast.Assignment) and init.op == "=" and isinstance(init.lvalue, c_ast.ID):
            return init.lvalue.name
        return None

    # -- names ---------------------------------------------------------------------
    def lookup(self, name: str) -> Optional[_Sym]:
        return self.region_syms.get(name) or self.scope.get(name)

    def iter_sym(self, name: str) -> Optional[_Sym]:
        """The symbol ``name`` means here: the iterator of an enclosing loop (``for (unsigned i = ...)``
        declares one the function's scope does not have), else :meth:`lookup`'s."""
        return self.active_iters.get(name) or self.lookup(name)

    def not_volatile(self, sym: Optional[_Sym], node: c_ast.Node) -> None:
        """A volatile object's accesses must all happen, in program order (hardware registers, signal
        flags): no schedule may reorder, merge or parallelise them, so the region is refused."""
        if sym is not None and sym.volatile:
            raise self.fail(node, f"{sym.name} is volatile: its accesses cannot be reordered or run in parallel",
                            "volatile")

    def is_region_scalar(self, name: str) -> bool:
        """A scalar the region assigns or declares: modelled as a 0-d array."""
        if name in self.loop_iters:
            return False
        if name in self.region_syms:
            return self.region_syms[name].kind == "scalar"
        sym = self.scope.get(name)
        return name in self.written and sym is not None and sym.kind == "scalar"

    def resolver(self, ctx: _Ctx):
        iters = ctx.iter_map()

        def resolve(name: str, node: c_ast.Node) -> A.Lin:
            if name in iters:
                return A.Lin.var(iters[name])
            if name in self.loop_iters:
                raise A.NotAffine(node, f"loop iterator {name} is used outside its loop (its value there is "
                                        "not modelled)")
            if name in self.file.enums:
                return A.Lin.constant(self.file.enums[name])
            if name in self.declared_here and self.lookup(name) is not None and name not in self.region_syms:
                # Read where an outer name is in scope (a loop bound) while the region also declares one:
                # names are read without C's block scopes here, so the two cannot be told apart.
                line = self.declared_at.get(name)
                raise A.NotAffine(node, f"{name} is also declared inside the region{f' (line {line})' if line else ''}; "
                                        f"names are read without C's block scopes, so the {name} read here cannot "
                                        f"be told from that one: rename one of them")
            if name in self.written or name in self.declared_here:
                raise A.NotAffine(node, f"data-dependent value: {name} is assigned inside the region")
            sym = self.lookup(name)
            if sym is None:
                if name in self.src.macros:
                    return self.param(name, "macro", node)
                if name in self.fixed:
                    return A.Lin.constant(self.fixed[name])
                raise A.NotAffine(node, f"unknown identifier {name}")
            if sym.kind != "scalar" or not _is_integer(sym.dtype):
                raise A.NotAffine(node, f"{name} is not an integer variable (it is a {sym.describe()})")
            if sym.volatile:
                raise A.NotAffine(node, f"{name} is volatile: its value may change between reads")
            return self.param(name, sym.origin, node)

        resolve.unsigned_compare = lambda left, right: converted(self.int_type(left), self.int_type(right))[1]
        return resolve

    def int_type(self, node: c_ast.Node) -> Tuple[int, bool]:
        """``(bits, unsigned)`` of an integer expression's C type after the integer promotions, as far as an
        affine comparison needs it: whether C compares it in an unsigned type (``i < n``, unsigned n)."""
        if isinstance(node, c_ast.ID):
            sym = self.iter_sym(node.name)
            return promoted(sym.dtype if sym is not None else None)
        if isinstance(node, c_ast.Constant):
            return constant_type(node)
        if isinstance(node, c_ast.Cast):
            return promoted(typename_dtype(node.to_type, self.file.typedefs))
        if isinstance(node, c_ast.UnaryOp) and node.op in ("-", "+", "~"):
            return self.int_type(node.expr)
        if isinstance(node, c_ast.BinaryOp) and node.op in ("+", "-", "*", "/", "%", "&", "|", "^"):
            return converted(self.int_type(node.left), self.int_type(node.right))
        if isinstance(node, c_ast.BinaryOp) and node.op in ("<<", ">>"):
            return self.int_type(node.left)
        if isinstance(node, c_ast.TernaryOp):
            return converted(self.int_type(node.iftrue), self.int_type(node.iffalse))
        return (32, False)  # comparisons, !, calls (min/max/floord): int

    def param(self, name: str, origin: str, node: c_ast.Node) -> A.Lin:
        if name in self.fixed:
            if origin != "macro":  # a variable's value is only known at run time: tested there (CScop.wrap)
                self.fixed_vars.add(name)
            return A.Lin.constant(int(self.fixed[name]))
        if name.lower() in ISL_KEYWORDS or not re.match(r"^[A-Za-z_]\w*$", name):
            raise A.NotAffine(node, f"parameter {name} cannot stay symbolic (its name is reserved in isl); "
                                    f"fix its value with {option('params', name=name)}")
        self.params_used.setdefault(name, origin)
        return A.Lin.var(name)

    def pw(self, node: c_ast.Node, ctx: _Ctx, what: str) -> A.Pw:
        try:
            return A.to_pw(node, self.resolver(ctx))
        except A.NotAffine as e:
            raise self.fail(e.node, f"non-affine {what}: {e.message}", what) from None

    def formula(self, node: c_ast.Node, ctx: _Ctx, what: str) -> A.Formula:
        resolve = self.resolver(ctx)
        # A loop condition compared in an unsigned type (i < n - 1, unsigned n) whose two sides differ in
        # sign would run the loop until its signed iterator overflows (undefined): that case is not modelled.
        # (An unsigned iterator runs to its type's maximum instead, past the arrays it indexes.)  Only when the
        # comparison is the whole condition: `j < 10 && j < N - 2` stops at 10 however N - 2 wraps.
        resolve.unsigned_loop = (what == "loop condition" and isinstance(node, c_ast.BinaryOp)
                                 and node.op in A.COMPARISONS)
        try:
            return A.to_formula(node, resolve)
        except A.NotAffine as e:
            raise self.fail(e.node, f"non-affine {what}: {e.message}", what) from None

    # -- the walk --------------------------------------------------------------------
    def run(self) -> None:
        seq = _Seq()
        for it in self.region.items:
            self.item(it, _Ctx(), seq)
        self.check_aliasing()

    def final_values(self) -> str:
        """C code that leaves every loop iterator the function may read after the region at the value
        the region's own loops leave in it: the region's loops and ifs replayed with empty bodies, kept
        only where they set such an iterator (or enclose a loop that does).  Generated code binds its
        iterators in blocks of its own (``const long i = c0;``), so without this ``i`` kept its value
        from before the region: ``for (i = 0; i < n; i++) ...; printf("%d", i);`` printed -1, not n.
        Empty when every iterator is dead after the region (PolyBench's kernels: locals named nowhere
        else).  The C compiler reduces most of these loops to their closed-form final values.

        >>> # for (i = 0; i < n; i++) for (j = 0; j < i; j++) S;   with i read later, j not:
        >>> # -> "for (i = 0; i < n; i++) ;"
        """
        # Only loops that assign a variable of the function (for (i = ...)) can leave a value behind; a
        # for (int i = ...) declares its own i, which also hides the function's i inside that loop.
        assigned = sorted({self._loop_var(n) for n in _nodes(*self.region.items)
                           if isinstance(n, c_ast.For) and isinstance(n.init, c_ast.Assignment)} - {None})
        names = [n for n in assigned if n not in self.declared_here]
        dead = set(self.dead_after(names))
        live = {n for n in names if n not in dead}
        if not live:
            return ""

        def keep(node: c_ast.Node, hidden: frozenset) -> Optional[c_ast.Node]:
            if isinstance(node, c_ast.For):
                own = self._loop_var(node)
                declares = isinstance(node.init, c_ast.DeclList)
                inner = keep(node.stmt, (hidden | {own}) if declares else hidden)
                if inner is None and (declares or own in hidden or own not in live):
                    return None
                return c_ast.For(node.init, node.cond, node.next, inner or c_ast.EmptyStatement(), node.coord)
            if isinstance(node, c_ast.Compound):
                items = [k for k in (keep(x, hidden) for x in node.block_items or []) if k is not None]
                return c_ast.Compound(items, node.coord) if items else None
            if isinstance(node, c_ast.If):
                t = keep(node.iftrue, hidden)
                f = keep(node.iffalse, hidden) if node.iffalse is not None else None
                if t is None and f is None:
                    return None
                return c_ast.If(node.cond, t or c_ast.EmptyStatement(), f, node.coord)
            return None

        kept = [k for k in (keep(x, frozenset()) for x in self.region.items) if k is not None]
        body = "\n".join(_c(k) if not isinstance(k, c_ast.For) else _c(c_ast.Compound([k])) for k in kept)
        names = ", ".join(sorted(live))
        return f"/* polytile opt: the final values of {names}, as the original loops leave them */\n{body}\n"

    def dead_after(self, scalars: Sequence[str]) -> Tuple[str, ...]:
        """The region's scalars whose value at its end no one can read: declared in the region, or locals
        and by-value parameters of the function named nowhere in it outside the region's lines.

        A scalar named outside those lines (read later, or earlier in a loop around the region, or
        its address taken), a ``static`` local and a global may be read after the region, so a transform that stops
        leaving the final value in it must put that value back.  Lines, not syntax, decide (as in
        :meth:`final_values`): a name on a line of the region counts as inside.
        """
        first, last = self.region.lines
        outside = {i.name for i in _ids(self.region.func.body) if i.coord is not None
                   and (not self.src.is_main(i.coord.file) or not first <= i.coord.line <= last)}
        out = []
        for name in scalars:
            sym = self.lookup(name)
            if sym is None or sym.kind != "scalar":
                continue
            static = sym.decl is not None and "static" in (getattr(sym.decl, "storage", None) or [])
            if sym.origin == "region" or (sym.origin in ("local", "param") and not static and name not in outside):
                out.append(name)
        return tuple(out)

    def scalar_types(self, scalars: Sequence[str]) -> Dict[str, str]:
        """The C type each of ``scalars`` is declared with (``double``, ``unsigned long``, a typedef's
        name), without qualifiers: what a generated copy of it (an expanded array) is declared as."""
        out = {}
        for name in scalars:
            sym = self.lookup(name)
            decl = None if sym is None else sym.decl
            if isinstance(decl, c_ast.Decl) and isinstance(decl.type, c_ast.TypeDecl):
                out[name] = _c(decl.type.type)
        return out

    def item(self, node: c_ast.Node, ctx: _Ctx, seq: _Seq) -> None:
        if isinstance(node, c_ast.Compound):
            for it in node.block_items or []:
                self.item(it, ctx, seq)
        elif isinstance(node, c_ast.For):
            self.for_loop(node, ctx, seq)
        elif isinstance(node, c_ast.If):
            cond = self.formula(node.cond, ctx, "if condition")
            self.item(node.iftrue, _Ctx(ctx.loops, ctx.conds + (cond,), ctx.prefix), seq)
            if node.iffalse is not None:
                self.item(node.iffalse, _Ctx(ctx.loops, ctx.conds + (A.negate(cond),), ctx.prefix), seq)
        elif isinstance(node, c_ast.Assignment):
            self.assignment(node, node, ctx, seq)
        elif isinstance(node, c_ast.UnaryOp) and node.op in ("p++", "p--", "++", "--"):
            self.statement(node, node, ctx, seq)
        elif isinstance(node, c_ast.Decl):
            self.declaration(node, ctx, seq)
        elif isinstance(node, c_ast.EmptyStatement):
            pass
        elif isinstance(node, c_ast.Pragma):
            self.notes.append(f"line {node.coord.line}: '#pragma {node.string}' inside the region is dropped "
                              "(generated code carries its own pragmas)")
        elif isinstance(node, (c_ast.While, c_ast.DoWhile)):
            kind = "while" if isinstance(node, c_ast.While) else "do-while"
            raise self.fail(node, f"'{kind}' loop in a scop region: only for loops with affine bounds can be "
                                  "modelled", f"{kind} loop")
        elif isinstance(node, (c_ast.Break, c_ast.Continue, c_ast.Goto, c_ast.Return, c_ast.Label)):
            word = {c_ast.Break: "break", c_ast.Continue: "continue", c_ast.Goto: "goto", c_ast.Return: "return",
                    c_ast.Label: "label"}[type(node)]
            raise self.fail(node, f"'{word}' in a scop region: control flow that leaves a loop or the region "
                                  "early cannot be modelled", word)
        elif isinstance(node, c_ast.Switch):
            raise self.fail(node, "'switch' in a scop region: use if/else with affine conditions", "switch")
        elif isinstance(node, c_ast.FuncCall):
            name = node.name.name if isinstance(node.name, c_ast.ID) else "a function"
            raise self.fail(node, f"call to {name}() as a statement: its side effects cannot be modelled (only "
                                  "calls inside expressions, with scalar arguments, are assumed pure)", "call")
        else:
            raise self.fail(node, f"unsupported statement in a scop region: {_c(node).strip()!r}",
                            type(node).__name__)


# ---------------------------------------------------------------------------
# API
# ---------------------------------------------------------------------------


def extract(path, *, function: Optional[str] = None, params: Optional[Mapping[str, int]] = None,
            assume_no_alias: bool = False, skip_nonaffine: bool = False, reassociate: bool = False,
            pure: Sequence[str] = (), cpp_args: Sequence[str] = ()) -> List[CScop]:
    """Every ``#pragma scop`` region of the C file ``path`` (or the body of ``function``) as a :class:`CScop`.

    ``params`` fixes parameters by name (``{"n": 100, "N": 64}``; macros
    too): the Scops are then concrete.  A region the frontend cannot model
    raises :class:`CFrontendError` (file, line, column, the construct, the
    source line with a caret); with ``skip_nonaffine=True`` it is returned
    with ``skipped=True`` and the error text as ``reason`` instead.  Errors
    of the file itself (unreadable, unparsable, unmatched pragmas) always
    raise.

    With ``reassociate=True``, statements ``lhs op= e`` (``+``, ``-``, ``*``)
    whose ``e`` never reads the updated cell become reductions
    (``Store.reduce``): the scheduler may then reorder their updates, which
    changes floating-point rounding (see ``polytile opt --reassociate``).

    ``pure`` names functions the statements may call besides the known pure
    ones (see the module docstring); ``cpp_args`` are preprocessor options
    (``["-I", "utilities", "-DSMALL_DATASET"]``).

    >>> # [cs] = extract("gemm.c", params={"ni": 8, "nj": 8, "nk": 8})
    >>> # cs.scop.statements[1].c_text -> 'C[i][j] += alpha * A[i][k] * B[k][j];'
    """
    bad = [n for n in pure if not re.fullmatch(r"[A-Za-z_]\w*", str(n))]
    if bad:
        raise CFrontendError(f"{option('pure', name=bad[0])}: {bad[0]!r} is not a function name")
    src = load(str(path), cpp_args)
    file = _File(src)
    fixed = {str(k): int(v) for k, v in (params or {}).items()}
    regions = [file.function_region(function)] if function is not None else file.pragma_regions()
    out: List[CScop] = []
    per_function: Dict[str, int] = {}
    for region in regions:
        fname = region.func.decl.name
        index = per_function.get(fname, 0)
        per_function[fname] = index + 1
        try:
            ex = _Extractor(file, region, index, fixed, assume_no_alias, reassociate, pure)
            ex.run()
            out.append(ex.build())
        except CFrontendError as e:
            if not skip_nonaffine:
                raise
            out.append(CScop(None, src.path, fname, region.start, region.end, region.lines, fixed=dict(fixed),
                             macros=dict(src.macros), signature=file.signature(region.func), skipped=True,
                             reason=str(e)))
    return out


def file_globals(path, cpp_args: Sequence[str] = ()) -> Tuple[CParam, ...]:
    """The file-scope variables of the C file ``path``, described like function parameters.

    Drivers that call a region's function need the declared extents of the
    global arrays it touches (the accesses of a region may cover only part
    of an array, and the row length fixes the layout).  ``static`` and
    ``extern`` variables are left out: a shared library built from the file
    does not define them for a caller to reach.

    >>> # file_globals("heat-3d.c") -> (CParam('A', 'array', 'float64', ('N', 'N', 'N')), ...)
    """
    file = _File(load(str(path), cpp_args))
    out = []
    for ext in file.ast.ext:
        if not isinstance(ext, c_ast.Decl) or not ext.name or isinstance(ext.type, c_ast.FuncDecl):
            continue
        if set(ext.storage or []) & {"static", "extern", "typedef"} or not file.src.is_main(ext.coord.file if ext.coord else None):
            continue
        s = file.globals[ext.name]
        if s.kind == "array":
            out.append(CParam(s.name, "array", s.dtype, tuple(None if d is None else _c(d) for d in s.dims)))
        elif s.kind == "scalar":
            out.append(CParam(s.name, "int" if _is_integer(s.dtype) else "float", s.dtype))
    return tuple(out)
