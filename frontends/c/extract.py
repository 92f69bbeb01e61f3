"""Polyhedral extraction from C: ``#pragma scop`` regions (or whole functions) become Scops.

A region is a sequence of statements between ``#pragma scop`` and
``#pragma endscop`` in one block (pet's and PPCG's convention), or, with
``function=NAME``, the body of that function after its leading
declarations.  Each region becomes a :class:`CScop`: a
:class:`polytile.poly.scop.Scop` whose statements keep their own C text
(``c_text``, iterators as free identifiers) with explicit access relations,
plus what a source-to-source driver needs to put generated code back (the
region's byte range, declarations to hoist).

What is modelled
----------------
* ``for`` loops ``for (i = lb; cond; step)`` (or ``for (int i = ...)``) with
  ``i++``, ``++i``, ``i--``, ``--i``, ``i += c``, ``i -= c``, ``i = i + c``
  for a constant ``c``; ``lb`` and ``cond`` affine in the outer iterators and
  the parameters, with ``min``/``max`` (calls, or ternaries after macro
  expansion), ``?:``, ``floord``/``ceild``, ``/`` and ``%`` by a positive
  constant.  The condition must bound the iterator in the loop's direction
  (checked with isl: the loop must not stop early at a point the domain
  would include, and must be bounded).
* ``if`` with affine conditions (``&&``, ``||``, ``!``, comparisons);
  ``else`` gets the negation.
* statements ``lhs op= expr;``, ``x++;`` and declarations with initialisers:
  the write is the left-hand side (compound assignments and ``++`` also read
  it), the reads are every array element and every region scalar in the
  expression; expressions may use any arithmetic and calls, with scalar
  arguments, of functions known to be pure (their result depends on their
  arguments only, and they change nothing): the math.h functions and
  ``abs``/``labs``/``llabs`` (:data:`PURE_FUNCTIONS`; ``errno`` is not
  treated as an output), functions the file declares
  ``__attribute__((const))`` or ``__attribute__((pure))``, and the names
  given with ``pure=[...]`` (``polytile opt --pure NAME``).  A call of any
  other function (``rand()``, a counter) refuses the region: its side
  effects would be reordered or run in parallel.  A function the file
  *defines* under a math.h name is not assumed to be the library's.
* multi-dimensional arrays ``A[i][j+1]``: global or local arrays, array
  parameters ``double A[n][m]`` and pointers to VLAs ``double (*A)[m]``,
  plain pointers ``double *x``.
* scalars assigned in the region are 0-d arrays ``s[]``; declarations inside
  the region are hoisted (see :meth:`CScop.wrap`).
* parameters: integer variables that the region reads but never assigns
  (function arguments, locals set before the region, globals) and integer
  macros (``#define N 1000``), kept as names by the preprocessing step.
  ``params={"N": 100}`` fixes them (the Scop is then concrete); parameters
  left symbolic get the context ``p >= 1`` when they are function arguments
  or macros, plus affine ``if`` guards enclosing the region.

Assumption: every ``/`` and ``%`` in an affine position has a non-negative
dividend, so C's truncation equals isl's floor (see :mod:`.affine`).

What is refused (``CFrontendError`` with file:line:col and a caret, or the
region returned ``skipped`` with ``skip_nonaffine=True``): data-dependent
bounds, conditions or subscripts (``A[B[i]]``, ``j < idx[i]``), non-affine
products (``i*j``), ``while``/``do``/``switch``, ``break``/``continue``/
``goto``/``return``/labels, calls used as statements, calls with pointer
arguments, calls of functions not known to be pure, ``volatile`` objects,
pointer dereferences and pointer arithmetic, address-of, struct members,
assignments inside expressions, writes to loop iterators, and pointers that
may overlap
(two pointer arrays, or a pointer and a global, without ``restrict`` where
one is written) unless ``assume_no_alias=True``.

Integer macros the region expands whose value is not kept as a name (those
of headers and ``-D``, and file macros fixed by ``params``) are listed in
:attr:`CScop.guards`; :meth:`CScop.wrap` emits an ``#if NAME != value``
``#error`` guard for each, so the optimised file refuses to build with
another value instead of silently computing with the old one.

Generated loop counters (``c0``, ``c1``, ... in isl's AST) get a fresh
prefix when the file uses such a name itself (:attr:`CScop.taken`, used by
:mod:`polytile.copt`).
"""
from __future__ import annotations

import copy
import itertools
import re
import types
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Set, Tuple, Union

import islpy as isl
from pycparser import c_ast, c_generator, c_parser

from polytile.errors import InternalError, SourceLocation
from polytile.names import ISL_KEYWORDS, NameTable, is_safe
from polytile.poly import body as B
from polytile.poly.scop import Array, Scop, Statement

from . import affine as A
from .source import _INT_BODY, CFrontendError, Source, find_matching_brace, load, option

# ---------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CParam:
    """A parameter of the function holding the region (for drivers that call it).

    ``kind`` is ``int``, ``float``, ``array`` (arrays and pointers) or
    ``other``; ``dims`` are the C texts of an array's extents (``None`` where
    C does not say, e.g. the first extent of ``double (*A)[m]``).
    """

    name: str
    kind: str
    dtype: Optional[str]
    dims: Tuple[Optional[str], ...] = ()
    restrict: bool = False


@dataclass(frozen=True, eq=False)
class CScop:
    """One extracted region.

    ``start``/``end`` are byte offsets in the original file: from the start
    of the ``#pragma scop`` line to the end of the ``#pragma endscop`` line
    (function mode: from the first statement after the leading declarations
    to the closing brace, or to a final ``return``).  ``scop`` is None when
    the region is ``skipped`` (``reason`` says why); the caller then leaves
    its bytes untouched.
    """

    scop: Optional[Scop]
    path: str
    function: str
    start: int
    end: int
    lines: Tuple[int, int]
    iterators: Tuple[str, ...] = ()  # C names of the region's loop iterators
    scalars: Tuple[str, ...] = ()  # scalars assigned in the region (0-d arrays of the Scop)
    params: Tuple[str, ...] = ()  # parameters left symbolic (isl parameters of the Scop)
    fixed: Mapping[str, int] = field(default_factory=dict)  # parameters substituted by value
    macros: Mapping[str, int] = field(default_factory=dict)  # integer macros of the file and their values
    declarations: Tuple[str, ...] = ()  # declarations made inside the region, hoisted by wrap()
    signature: Tuple[CParam, ...] = ()
    notes: Tuple[str, ...] = ()
    skipped: bool = False
    reason: str = ""
    # integer macros whose value is baked into the optimised code, with that value (see wrap)
    guards: Tuple[Tuple[str, int], ...] = ()
    taken: frozenset = frozenset()  # every identifier of the file (generated names must avoid them)

    def wrap(self, code: str) -> str:
        """The replacement for bytes ``[start, end)``: a block with the hoisted declarations, then ``code``.

        Generated code binds the iterators itself (``const long i = c0;``), so
        only declarations made *inside* the region need to be repeated.  Each
        macro of :attr:`guards` gets an ``#if``/``#error`` pair first: the
        code was generated for that value only.
        """
        body = [f"  {d}" for d in self.declarations] + [code.rstrip("\n")]
        return guard_text(self.guards) + "{\n" + "\n".join(body) + "\n}\n"


def guard_text(guards: Sequence[Tuple[str, int]]) -> str:
    """``#if NAME != value`` / ``#error`` / ``#endif`` for each baked macro.

    >>> print(guard_text([("N", 120)]), end="")
    #if N != 120
    #error "polytile opt: this file was optimised for N=120; re-run polytile opt"
    #endif
    """
    return "".join(f"#if {name} != {value}\n#error \"polytile opt: this file was optimised for {name}={value}; "
                   f"re-run polytile opt\"\n#endif\n" for name, value in guards)


def splice(source: Union[bytes, str], replacements: Sequence[Tuple[CScop, str]]) -> bytes:
    """``source`` (the original file's bytes) with each region's bytes replaced by its text."""
    raw = source.encode("utf-8") if isinstance(source, str) else bytes(source)
    spans = sorted(replacements, key=lambda r: r[0].start)
    for (a, _), (b, _) in zip(spans, spans[1:]):
        if b.start < a.end:
            raise CFrontendError(f"regions at lines {a.lines[0]} and {b.lines[0]} overlap")
    for cs, text in reversed(spans):
        if cs.skipped:
            continue
        raw = raw[:cs.start] + text.encode("utf-8") + raw[cs.end:]
    return raw


# ---------------------------------------------------------------------------
# C types
# ---------------------------------------------------------------------------

_TYPEDEF_DTYPES = {
    "size_t": "uint64", "ssize_t": "int64", "ptrdiff_t": "int64", "intptr_t": "int64", "uintptr_t": "uint64",
    "int8_t": "int8", "int16_t": "int16", "int32_t": "int32", "int64_t": "int64", "uint8_t": "uint8",
    "uint16_t": "uint16", "uint32_t": "uint32", "uint64_t": "uint64", "bool": "bool", "_Bool": "bool",
}


def _dtype(names: Sequence[str], typedefs: Mapping[str, Sequence[str]]) -> Optional[str]:
    """numpy dtype name of a C arithmetic type (``double`` -> float64, ``int`` -> int32, ...)."""
    ws = list(names)
    if len(ws) == 1 and ws[0] in typedefs:
        return _dtype(typedefs[ws[0]], typedefs)
    if len(ws) == 1 and ws[0] in _TYPEDEF_DTYPES:
        return _TYPEDEF_DTYPES[ws[0]]
    unsigned = "unsigned" in ws
    if "double" in ws:
        return "longdouble" if "long" in ws else "float64"
    if "float" in ws:
        return "float32"
    if "_Bool" in ws:
        return "bool"
    if "char" in ws:
        return "uint8" if unsigned else "int8"
    if "short" in ws:
        return "uint16" if unsigned else "int16"
    if "long" in ws:
        return "uint64" if unsigned else "int64"
    if set(ws) <= {"int", "signed", "unsigned"} and ws:
        return "uint32" if unsigned else "int32"
    return None


def _is_integer(dtype: Optional[str]) -> bool:
    return bool(dtype) and (dtype.startswith(("int", "uint")) or dtype == "bool")


@dataclass
class _Sym:
    """What the frontend knows about a declared name."""

    name: str
    kind: str  # "scalar" | "array" | "func" | "other"
    dtype: Optional[str]
    dims: Tuple[Optional[c_ast.Node], ...] = ()  # extents of an array; None where unknown
    restrict: bool = False
    pointer: bool = False  # reached through a pointer (array parameter or pointer variable): may alias
    ptrptr: bool = False  # double **: its rows are pointers too
    origin: str = "local"  # "param" | "global" | "local" | "region"
    decl: Optional[c_ast.Node] = None
    volatile: bool = False  # every access must happen, in program order: never modelled

    def describe(self) -> str:
        if self.kind == "array":
            return f"{'pointer' if self.pointer else 'array'} of {self.dtype or 'unknown type'}"
        if self.kind == "scalar":
            return f"{self.dtype} variable"
        return {"func": "function", "other": "variable of a type the frontend does not model"}[self.kind]


def _is_volatile(decl: c_ast.Decl) -> bool:
    """``volatile`` anywhere in the declaration (the object, its elements, or what a pointer points to)."""
    t: Optional[c_ast.Node] = decl
    while t is not None:
        if "volatile" in (getattr(t, "quals", None) or []) or "volatile" in (getattr(t, "dim_quals", None) or []):
            return True
        t = getattr(t, "type", None)
        if not isinstance(t, c_ast.Node):
            return False
    return False


def _sym_from_decl(decl: c_ast.Decl, origin: str, typedefs: Mapping[str, Sequence[str]]) -> _Sym:
    sym = _sym_from_type(decl, origin, typedefs)
    sym.volatile = _is_volatile(decl)
    return sym


def _sym_from_type(decl: c_ast.Decl, origin: str, typedefs: Mapping[str, Sequence[str]]) -> _Sym:
    t = decl.type
    if isinstance(t, c_ast.FuncDecl):
        return _Sym(decl.name, "func", None, origin=origin, decl=decl)
    dims: List[Optional[c_ast.Node]] = []
    restrict = pointer = ptrptr = False
    if isinstance(t, c_ast.PtrDecl):
        pointer, restrict = True, "restrict" in (t.quals or [])
        dims.append(None)
        t = t.type
        if isinstance(t, c_ast.PtrDecl):
            ptrptr = True
            dims.append(None)
            t = t.type
    first = True
    while isinstance(t, c_ast.ArrayDecl):
        if first and origin == "param" and not pointer:
            # An array parameter is a pointer (C adjusts its type); restrict goes inside its brackets.
            pointer, restrict = True, "restrict" in (t.dim_quals or [])
        dims.append(t.dim)
        t = t.type
        first = False
    dtype = None
    if isinstance(t, c_ast.TypeDecl):
        if isinstance(t.type, c_ast.IdentifierType):
            dtype = _dtype(t.type.names, typedefs)
        elif isinstance(t.type, c_ast.Enum):
            dtype = "int32"
    if dims:
        return _Sym(decl.name, "array", dtype, tuple(dims), restrict, pointer, ptrptr, origin, decl)
    return _Sym(decl.name, "scalar" if dtype else "other", dtype, origin=origin, decl=decl)


#: Functions a scop statement may call without a declaration saying so: C's math.h functions
#: (double and float versions) and stdlib.h's integer ``abs``.  Their results depend on their
#: arguments only; the one thing they may change, ``errno``, is not treated as an output.
_MATH = ("sqrt cbrt exp exp2 expm1 log log2 log10 log1p logb pow sin cos tan asin acos atan atan2 sinh cosh tanh "
         "asinh acosh atanh fabs floor ceil round trunc rint nearbyint lround llround lrint llrint fmod remainder "
         "fmin fmax fdim fma hypot erf erfc tgamma lgamma copysign nextafter ldexp scalbn ilogb").split()
PURE_FUNCTIONS = frozenset([*_MATH, *(f + "f" for f in _MATH), *(f + "l" for f in _MATH),
                            "abs", "labs", "llabs", "isnan", "isinf", "isfinite", "signbit"])

_GEN = c_generator.CGenerator(reduce_parentheses=True)


def _c(node: c_ast.Node) -> str:
    return _GEN.visit(node)


def _pragma_word(p: c_ast.Pragma) -> str:
    words = (p.string or "").split()
    return words[0] if words else ""


class _Renamer(c_ast.NodeVisitor):
    def __init__(self, mapping: Mapping[str, str]):
        self.mapping = mapping

    def visit_ID(self, node: c_ast.ID) -> None:
        if node.name in self.mapping:
            node.name = self.mapping[node.name]


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


def _ids(node: c_ast.Node) -> List[c_ast.ID]:
    out: List[c_ast.ID] = []

    class V(c_ast.NodeVisitor):
        def visit_ID(self, n):
            out.append(n)

    V().visit(node)
    return out


def _assigned_names(node: c_ast.Node) -> Set[str]:
    """Names assigned (``=``, ``op=``, ``++``, ``--``) anywhere in ``node``."""
    out: Set[str] = set()

    class V(c_ast.NodeVisitor):
        def visit_Assignment(self, n):
            if isinstance(n.lvalue, c_ast.ID):
                out.add(n.lvalue.name)
            self.generic_visit(n)

        def visit_UnaryOp(self, n):
            if n.op in ("p++", "p--", "++", "--") and isinstance(n.expr, c_ast.ID):
                out.add(n.expr.name)
            self.generic_visit(n)

    V().visit(node)
    return out


# ---------------------------------------------------------------------------
# Finding regions
# ---------------------------------------------------------------------------


@dataclass
class _Region:
    func: c_ast.FuncDef
    items: List[c_ast.Node]
    scope: Dict[str, _Sym]
    guards: List[Tuple[c_ast.Node, bool]]
    start: int
    end: int
    lines: Tuple[int, int]
    anchor: c_ast.Node  # where region-level errors point


_SCOP_LINE = re.compile(r"^\s*#\s*pragma\s+scop\b")
_ENDSCOP_LINE = re.compile(r"^\s*#\s*pragma\s+endscop\b")


class _File:
    """A parsed file: symbols at file scope and the regions of its functions."""

    def __init__(self, src: Source):
        self.src = src
        parser = c_parser.CParser()
        name = src.MAIN if src.used_cpp else src.path
        try:
            self.ast = parser.parse(src.parse_text, filename=name)
        except c_parser.ParseError as e:
            raise self._parse_error(str(e)) from None
        self.typedefs: Dict[str, Sequence[str]] = {}
        self.globals: Dict[str, _Sym] = {}
        self.enums: Dict[str, int] = {}
        for ext in self.ast.ext:
            if isinstance(ext, c_ast.Typedef):
                t = ext.type
                if isinstance(t, c_ast.TypeDecl) and isinstance(t.type, c_ast.IdentifierType):
                    self.typedefs[ext.name] = list(t.type.names)
            elif isinstance(ext, c_ast.Decl) and ext.name:
                self.globals[ext.name] = _sym_from_decl(ext, "global", self.typedefs)
        self._collect_enums()
        self.functions = {ext.decl.name: ext for ext in self.ast.ext if isinstance(ext, c_ast.FuncDef)}
        # Every identifier of the file and of what it includes, and every macro name: names generated
        # code introduces must differ from all of them.
        self.taken = frozenset(re.findall(r"[A-Za-z_]\w*", src.parse_text)) | frozenset(
            re.findall(r"[A-Za-z_]\w*", src.raw.decode("utf-8", "replace"))) | frozenset(src.defines)

    def _parse_error(self, msg: str) -> CFrontendError:
        m = re.match(r"^(.*?):(\d+)(?::(\d+))?: (.*)$", msg, re.S)
        if not m:
            detail = msg.split(": ", 1)[-1]
            return CFrontendError(f"{self.src.path}: cannot parse C: {detail}", construct="syntax")
        coord = types.SimpleNamespace(file=m.group(1), line=int(m.group(2)), column=int(m.group(3) or 1))
        return self.src.error(coord, f"cannot parse C: {m.group(4)}", "syntax")

    def _collect_enums(self) -> None:
        """Enumeration constants are integer constants, substituted like literals."""
        enums = self.enums

        def resolve(name, node):
            if name in enums:
                return A.Lin.constant(enums[name])
            raise A.NotAffine(node, "not a constant")

        class V(c_ast.NodeVisitor):
            def visit_Enumerator(self, n):
                if n.value is None:
                    enums[n.name] = V.next
                else:
                    try:
                        v = A.pw_const(A.to_pw(n.value, resolve))
                    except A.NotAffine:
                        v = None
                    if v is None:
                        return
                    enums[n.name] = v
                V.next = enums[n.name] + 1

            def visit_EnumeratorList(self, n):
                V.next = 0
                self.generic_visit(n)

        V.next = 0
        V().visit(self.ast)

    def signature(self, func: c_ast.FuncDef) -> Tuple[CParam, ...]:
        out = []
        args = func.decl.type.args
        for p in (args.params if args is not None else []):
            if not isinstance(p, c_ast.Decl) or not p.name:
                continue
            s = _sym_from_decl(p, "param", self.typedefs)
            if s.kind == "array":
                out.append(CParam(s.name, "array", s.dtype, tuple(None if d is None else _c(d) for d in s.dims),
                                  s.restrict))
            elif s.kind == "scalar":
                out.append(CParam(s.name, "int" if _is_integer(s.dtype) else "float", s.dtype))
            else:
                out.append(CParam(s.name, "other", None))
        return tuple(out)

    def base_scope(self, func: c_ast.FuncDef) -> Dict[str, _Sym]:
        scope = dict(self.globals)
        args = func.decl.type.args
        for p in (args.params if args is not None else []):
            if isinstance(p, c_ast.Decl) and p.name:
                scope[p.name] = _sym_from_decl(p, "param", self.typedefs)
        return scope

    # -- regions ---------------------------------------------------------------
    def pragma_regions(self) -> List[_Region]:
        out: List[_Region] = []
        for func in self.functions.values():
            self._walk_block(func, func.body.block_items or [], self.base_scope(func), [], out)
        return out

    def _walk_block(self, func, items, scope, guards, out) -> None:
        scope = dict(scope)
        k = 0
        while k < len(items):
            it = items[k]
            if isinstance(it, c_ast.Pragma) and _pragma_word(it) == "endscop":
                raise self.src.error(it.coord, "#pragma endscop without a #pragma scop before it in the same block",
                                     "#pragma endscop")
            if isinstance(it, c_ast.Pragma) and _pragma_word(it) == "scop":
                j = next((m for m in range(k + 1, len(items)) if isinstance(items[m], c_ast.Pragma)
                          and _pragma_word(items[m]) == "endscop"), None)
                if j is None:
                    raise self.src.error(it.coord, "#pragma scop without a matching #pragma endscop in the same block",
                                         "#pragma scop")
                out.append(self._pragma_region(func, it, items[j], items[k + 1:j], scope, guards))
                k = j + 1
                continue
            if isinstance(it, c_ast.Decl) and it.name:
                scope[it.name] = _sym_from_decl(it, "local", self.typedefs)
            else:
                self._walk_stmt(func, it, scope, guards, out)
            k += 1

    def _walk_stmt(self, func, node, scope, guards, out) -> None:
        if node is None:
            return
        if isinstance(node, c_ast.Compound):
            self._walk_block(func, node.block_items or [], scope, guards, out)
        elif isinstance(node, c_ast.If):
            self._walk_stmt(func, node.iftrue, scope, guards + [(node.cond, True)], out)
            self._walk_stmt(func, node.iffalse, scope, guards + [(node.cond, False)], out)
        elif isinstance(node, c_ast.For):
            inner = dict(scope)
            if isinstance(node.init, c_ast.DeclList):
                for d in node.init.decls:
                    inner[d.name] = _sym_from_decl(d, "local", self.typedefs)
            self._walk_stmt(func, node.stmt, inner, guards, out)
        elif isinstance(node, (c_ast.While, c_ast.DoWhile, c_ast.Switch, c_ast.Label)):
            self._walk_stmt(func, node.stmt, scope, guards, out)
        elif isinstance(node, (c_ast.Case, c_ast.Default)):
            for s in node.stmts or []:
                self._walk_stmt(func, s, scope, guards, out)
        elif isinstance(node, c_ast.Pragma) and _pragma_word(node) in ("scop", "endscop"):
            raise self.src.error(node.coord, f"#pragma {_pragma_word(node)} must stand in a block ({{ ... }})",
                                 f"#pragma {_pragma_word(node)}")

    def _pragma_region(self, func, open_p, close_p, items, scope, guards) -> _Region:
        src = self.src
        lines = []
        for p, rx in ((open_p, _SCOP_LINE), (close_p, _ENDSCOP_LINE)):
            if not src.is_main(p.coord.file) or not rx.match(src.line_text(p.coord.line)):
                raise src.error(p.coord, f"#pragma {_pragma_word(p)} must be written in the file itself, on its own "
                                         "line (not produced by a macro or an included file)", "#pragma")
            lines.append(p.coord.line)
        for it in items:
            for sub in _walk_nodes(it):
                if isinstance(sub, c_ast.Pragma) and _pragma_word(sub) in ("scop", "endscop"):
                    raise src.error(sub.coord, "nested #pragma scop regions", "#pragma scop")
        return _Region(func, list(items), scope, guards, src.line_starts[lines[0] - 1], src.line_end(lines[1]),
                       (lines[0], lines[1]), open_p)

    def function_region(self, name: str) -> _Region:
        src = self.src
        func = self.functions.get(name)
        if func is None:
            known = ", ".join(sorted(self.functions)) or "none"
            raise CFrontendError(f"{src.path}: no function named {name!r} (functions defined: {known})")
        items = list(func.body.block_items or [])
        scope = self.base_scope(func)
        lead = 0
        while lead < len(items) and isinstance(items[lead], c_ast.Decl):
            if items[lead].name:
                scope[items[lead].name] = _sym_from_decl(items[lead], "local", self.typedefs)
            lead += 1
        body = items[lead:]
        trailing_return = bool(body) and isinstance(body[-1], c_ast.Return)
        if trailing_return:
            body = body[:-1]
        # Marker pragmas mean nothing when the whole body is the region.
        body_items = [it for it in body if not (isinstance(it, c_ast.Pragma) and _pragma_word(it) in ("scop", "endscop"))]
        open_loc = src.location(func.body.coord)
        brace = src.offset(open_loc.line, open_loc.col)
        if src.raw[brace:brace + 1] != b"{":
            raise src.error(func.body.coord, f"cannot find the body of {name} in the original text", "function body")
        close = find_matching_brace(src.raw, brace)
        if close < 0:
            raise src.error(func.body.coord, f"unbalanced braces in the body of {name}", "function body")
        # The region ends at a final 'return' (which stays), else at the closing brace.
        end = self._line_aware_offset(items[-1], None) if trailing_return else self._line_aware_offset(None, close)
        start = self._line_aware_offset(body[0], None) if body else end
        first_line = src.location(body[0].coord).line if body else open_loc.line
        last_line = src.raw[:end].count(b"\n") + (0 if end and src.raw[end - 1:end] == b"\n" else 1)
        return _Region(func, body_items, scope, [], start, end, (first_line, last_line), func.body)

    def _line_aware_offset(self, node: Optional[c_ast.Node], fallback: Optional[int]) -> int:
        """Byte offset where ``node`` starts (its line's start if only blanks precede it); ``fallback`` if None."""
        src = self.src
        if node is None:
            off = fallback
            line_start = src.raw.rfind(b"\n", 0, off) + 1
            return line_start if not src.raw[line_start:off].strip() else off
        loc = src.location(node.coord)
        line_start = src.line_starts[loc.line - 1]
        if isinstance(node, c_ast.Pragma):
            return line_start  # a directive owns its line (pycparser's column is past '#pragma')
        off = src.offset(loc.line, loc.col)
        return line_start if not src.raw[line_start:off].strip() else off


def _walk_nodes(node: c_ast.Node):
    yield node
    for _, child in node.children():
        yield from _walk_nodes(child)


# ---------------------------------------------------------------------------
# Extraction of one region
# ---------------------------------------------------------------------------


@dataclass
class _Access:
    array: str
    index: Tuple[A.Pw, ...]
    node: c_ast.Node


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


_PREFIX_OPS = ("*", "&", "-", "+", "!", "~", "++", "--")


class _Extractor:
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
        self.notes: List[str] = []
        self.iter_c_names: List[str] = []
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

        return resolve

    def param(self, name: str, origin: str, node: c_ast.Node) -> A.Lin:
        if name in self.fixed:
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
        try:
            return A.to_formula(node, self.resolver(ctx))
        except A.NotAffine as e:
            raise self.fail(e.node, f"non-affine {what}: {e.message}", what) from None

    # -- the walk --------------------------------------------------------------------
    def run(self) -> None:
        seq = _Seq()
        for it in self.region.items:
            self.item(it, _Ctx(), seq)
        self.check_aliasing()
        self.note_iterators_used_later()

    def note_iterators_used_later(self) -> None:
        """Generated code binds iterators in its own blocks, so a variable used as an iterator keeps
        its value from before the region; say so if the function reads it after the region."""
        end_line = self.region.lines[1]
        outer = {n for n in self.iter_c_names if n in self.scope}
        later = sorted({i.name for i in _ids(self.region.func.body) if i.name in outer and i.coord is not None
                        and self.src.is_main(i.coord.file) and i.coord.line > end_line})
        for name in later:
            self.notes.append(f"{name} is used after the region, but generated code does not leave it at its "
                              "final loop value")

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
        elif isinstance(node, c_ast.Assignment) and node.op == "=" and isinstance(node.rvalue, c_ast.Assignment) \
                and node.rvalue.op == "=":
            # A chained assignment (deriche's 'a1 = a5 = k;'): the inner one first, then the outer reads the
            # value its target now holds -- C's meaning of 'a1 = (a5 = k)' (converted to a5's type).
            inner = node.rvalue
            self.item(inner, ctx, seq)
            outer = c_ast.Assignment("=", node.lvalue, inner.lvalue, node.coord)
            self.statement(outer, node, ctx, seq)
        elif isinstance(node, c_ast.Assignment):
            self.statement(node, node, ctx, seq)
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

    # -- statements -----------------------------------------------------------------------
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

    # -- isl objects -------------------------------------------------------------------------
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
                                        loc=loc, c_text=s.c_text, c_reduction=s.update if reduce else None,
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
                     guards=self.macro_guards(params), taken=self.file.taken)

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

        ``s`` must have the form ``lhs op= e`` (:func:`_reduction_form`) and
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
        parts: List[A.Formula] = []
        for p in params:
            # Sizes are positive: function arguments, and macros whose own value is (a macro
            # defined as -1 is an offset, not a size).
            origin = self.params_used[p]
            if origin == "param" or (origin == "macro" and self.src.macros.get(p, 1) >= 1):
                parts.append(A.ge(A.Lin.var(p).add(A.Lin.constant(-1))))
        assigned = _assigned_names(self.region.func.body)
        known = set(params) | set(self.fixed)

        def resolve(name, node):
            if name in self.fixed:
                return A.Lin.constant(int(self.fixed[name]))
            if name in self.file.enums:
                return A.Lin.constant(self.file.enums[name])
            if name in params:
                return A.Lin.var(name)
            raise A.NotAffine(node, "not a parameter")

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
        return self.isl(isl.Set, f"{self.hdr}{{ : {A.formula_text(A.conj(parts))} }}")

    def check_loop(self, loop: _Loop, context: isl.Set) -> None:
        """The loop condition must bound the iterator in the loop's direction (see module docstring).

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
                maps: List[isl.Map] = []
                rel.foreach_map(maps.append)
                for m in maps:
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


def show(cscop: CScop) -> str:
    """A readable dump of a region: parameters, arrays, statements with domains and accesses (isl text)."""
    lines = [f"region {cscop.path}:{cscop.lines[0]}-{cscop.lines[1]} in {cscop.function}() "
             f"(bytes {cscop.start}..{cscop.end})"]
    if cscop.skipped:
        lines.append("  skipped: " + cscop.reason.replace("\n", "\n  "))
        return "\n".join(lines)
    scop = cscop.scop
    if cscop.params:
        lines.append(f"  parameters: {', '.join(cscop.params)}   context: {scop.context}")
    if cscop.fixed:
        lines.append("  fixed: " + ", ".join(f"{k}={v}" for k, v in sorted(cscop.fixed.items())))
    if cscop.declarations:
        lines.append("  hoisted declarations: " + " ".join(cscop.declarations))
    lines.append("  arrays:")
    for a in scop.arrays:
        shape = "x".join("?" if d < 0 else str(d) for d in a.shape) or "scalar"
        lines.append(f"    {a.name:<10} {a.dtype:<8} {shape}")
    lines.append("  statements:")
    for s in scop.statements:
        where = f" (line {s.loc.line})" if s.loc is not None else ""
        lines.append(f"    {s.name}{where}: {s.c_text}")
        lines.append(f"      domain: {s.domain}")
        lines.append(f"      write:  {s.write_map()}")
        maps: List[isl.Map] = []
        s.reads().foreach_map(maps.append)
        for m in maps:
            lines.append(f"      read:   {m}")
    lines.append(f"  schedule: {scop.schedule.get_map()}")
    for n in cscop.notes:
        lines.append(f"  note: {n}")
    return "\n".join(lines)


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
