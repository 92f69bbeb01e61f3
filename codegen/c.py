"""OpenMP C backend: isl AST of a schedule tree -> C text (via cgen).

The generated unit is one function per kernel following the runtime's calling
convention (``int entry(void *a0, void *a1, ...)``: inputs, outputs,
temporaries; returns 0).  Arrays are re-typed as pointers to fixed-size
arrays, so accesses read like the source: ``C[i][j] += A[i][k] * B[k][j]``.

Schedule-tree marks drive the loop decorations:

* ``parallel`` above a band -> ``#pragma omp parallel for schedule(static)``

A statement instance ``S0(c0, c1, c2)`` of the AST becomes a block binding
the statement's iterators to the AST expressions, then the body::

    { const long i = c0; const long j = c1; const long k = c2;
      C[i][j] += A[i][k] * B[k][j]; }
"""
from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import cgen
import islpy as isl

from polytile import dtypes as D
from polytile.deadline import interrupts_after
from polytile.errors import InternalError, ScheduleError
from polytile.poly import body as B
from polytile.poly.scop import Array, Scop, Statement

from . import microkernel, pack

CTYPE = dict(D.C_TYPES)
_FLOAT = ("float32", "float64")

_INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
_SELECTABLE = ("bool",) + _INTS + ("float32", "float64")


def _typed_helpers() -> str:
    """The prelude's per-dtype helpers, one template each (C types from :mod:`polytile.dtypes`)."""
    t = D.C_TYPES
    out = []
    for n in _INTS:
        out.append(f"static inline {t[n]} pt_max_{n}({t[n]} a, {t[n]} b) {{ return a > b ? a : b; }}")
        out.append(f"static inline {t[n]} pt_min_{n}({t[n]} a, {t[n]} b) {{ return a < b ? a : b; }}")
    out.append("static inline _Bool pt_max_bool(_Bool a, _Bool b) { return a || b; }")
    out.append("static inline _Bool pt_min_bool(_Bool a, _Bool b) { return a && b; }")
    out.append("/* C's integer division (toward zero), pinned down where C leaves it undefined: x / 0 == 0 and "
               "MIN / -1 wraps. */")
    for n in _INTS:
        c = t[n]
        if D.is_unsigned(n):
            out.append(f"static inline {c} pt_div_{n}({c} a, {c} b) {{ return b ? ({c})(a / b) : 0; }}")
        else:
            out.append(f"static inline {c} pt_div_{n}({c} a, {c} b) {{ return b == 0 ? 0 : (b == -1 ? "
                       f"({c})(0 - (u{c})a) : ({c})(a / b)); }}")
    out.append("static inline _Bool pt_div_bool(_Bool a, _Bool b) { return a && b; }")
    out.append("/* float -> integer as PlaidML's kernels convert: truncate to 64 bits, keep the low bits; NaN and "
               "|x| >= 2^63 give 0. */")
    for n in _INTS:
        out.append(f"static inline {t[n]} pt_cvt_{n}(double x) {{ return (x > -9223372036854775808.0 && "
                   f"x < 9223372036854775808.0) ? ({t[n]})(uint64_t)(int64_t)x : 0; }}")
    out.append("static inline _Bool pt_cvt_bool(double x) { return x - x == 0 && (x >= 1.0 || x <= -1.0); }")
    out.append("static inline long pt_clamp(long x, long lo, long hi) { return x < lo ? lo : (x > hi ? hi : x); }")
    out.append("/* Selects as functions: both operands are evaluated (always safe here), so gcc never\n"
               "   if-converts the branch into masked loads -- gcc 12 at -O3 vectorises `c ? A[i] : X[i]`\n"
               "   over short inner loops wrongly (tests/test_codegen_select.py). */")
    for n in _SELECTABLE:
        c = t[n]
        out.append(f"static inline {c} pt_sel_{n}(int k, {c} t, {c} e) {{ return k ? t : e; }}")
        out.append(f"static inline {c} pt_pmax_{n}({c} a, {c} b) {{ return a < b ? b : a; }}")
        out.append(f"static inline {c} pt_pmin_{n}({c} a, {c} b) {{ return a < b ? a : b; }}")
        out.append(f"static inline {c} pt_relu_{n}({c} a) {{ return a < 0 ? 0 : a; }}")
        if n == "bool" or D.is_unsigned(n):
            out.append(f"static inline {c} pt_abs_{n}({c} a) {{ return a; }}")
        else:
            out.append(f"static inline {c} pt_abs_{n}({c} a) {{ return a < 0 ? ({c})(-a) : a; }}")
    return "\n".join(out) + "\n"


_TYPED_HELPERS = _typed_helpers()


PRELUDE = r"""#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* isl AST helpers: floord(n, d) rounds toward -infinity (d > 0). */
#define floord(n, d) (((n) < 0) ? -((-(n) + (d) - 1) / (d)) : (n) / (d))
#define min(a, b) ((a) < (b) ? (a) : (b))
#define max(a, b) ((a) > (b) ? (a) : (b))

static inline long pt_floordiv(long a, long b) { return floord(a, b); }
/* numpy semantics: maximum/minimum propagate NaN. */
static inline float pt_max_float32(float a, float b) { return (a != a || a > b) ? a : b; }
static inline float pt_min_float32(float a, float b) { return (a != a || a < b) ? a : b; }
static inline double pt_max_float64(double a, double b) { return (a != a || a > b) ? a : b; }
static inline double pt_min_float64(double a, double b) { return (a != a || a < b) ? a : b; }
""" + _TYPED_HELPERS + r"""/* PlaidML's round(): half away from zero. */
static inline double pt_round(double x) { return x < 0 ? -floor(-x + 0.5) : floor(x + 0.5); }
static inline float pt_roundf(float x) { return x < 0 ? -floorf(-x + 0.5f) : floorf(x + 0.5f); }
/* numpy integer power (non-negative exponents; negative ones give 0 like C truncation). */
static inline int64_t pt_ipow(int64_t b, int64_t e) {
  int64_t r = 1;
  if (e < 0) return (b == 1) ? 1 : (b == -1 ? ((e & 1) ? -1 : 1) : 0);
  while (e) { if (e & 1) r *= b; b *= b; e >>= 1; }
  return r;
}
"""


@dataclass(frozen=True)
class KernelSource:
    """Generated source plus what the runtime needs to call it."""

    entry: str
    text: str
    params: Tuple[Array, ...]  # in call order: inputs, outputs, temporaries
    lang: str = "c"

    def __str__(self) -> str:
        return self.text


def ctype(dtype: str) -> str:
    try:
        return CTYPE[dtype]
    except KeyError:
        raise InternalError(f"no C type for dtype {dtype}") from None


# ---------------------------------------------------------------------------
# Statement bodies
# ---------------------------------------------------------------------------


def c_const(value, dtype: str) -> str:
    """A C literal of ``dtype`` with the exact value numpy would hold."""
    if dtype == "bool":
        return "1" if value else "0"
    if dtype in _FLOAT:
        v = float(value)
        if math.isnan(v):
            text = "NAN"
        elif math.isinf(v):
            text = "INFINITY" if v > 0 else "-INFINITY"
        else:
            text = repr(v)
        return f"(({ctype(dtype)}){text})"
    v = int(value)
    if dtype.startswith("uint"):
        return f"(({ctype(dtype)}){v}ULL)" if v >= 2 ** 31 else str(v)
    if v == -(2 ** 63):
        return "INT64_MIN"
    if v < 0:
        # Parenthesised: '-(-2)' must never print as '--2'.
        return f"({v})" if -(2 ** 31) < v else f"({v}LL)"
    return str(v) if v < 2 ** 31 else f"{v}LL"


class BodyPrinter:
    """Renders :mod:`polytile.poly.body` nodes as C expressions."""

    def __init__(self, arrays: Dict[str, Array]):
        self.arrays = arrays
        self.locals: Dict[str, str] = {}  # array -> scalar replacing it (array contraction)

    def access(self, array: str, index) -> str:
        if array in self.locals:
            return self.locals[array]
        if not index:
            return f"{array}[0]"
        return array + "".join(f"[{self.expr(i)}]" for i in index)

    def as_type(self, n: B.Node, dtype: str) -> str:
        text = self.expr(n)
        if n.dtype == dtype:
            return text
        if D.is_integer(dtype) and D.is_float(n.dtype):
            return f"pt_cvt_{dtype}({text})"
        return f"(({ctype(dtype)})({text}))"

    def expr(self, n: B.Node) -> str:
        if isinstance(n, B.Iter):
            return n.name
        if isinstance(n, B.Const):
            return c_const(n.value, n.dtype)
        if isinstance(n, B.Load):
            return self.access(n.array, n.index)
        if isinstance(n, B.Neg):
            return self._narrow(f"(-{self.as_type(n.operand, n.dtype)})", n.dtype)
        if isinstance(n, B.Clamp):
            return f"pt_clamp({self.as_type(n.operand, 'int64')}, {n.lo}, {n.hi})"
        if isinstance(n, B.Cast):
            return self.as_type(n.operand, n.dtype)
        if isinstance(n, B.Bin):
            if n.op == "//":
                return f"pt_floordiv({self.expr(n.a)}, {self.expr(n.b)})"
            a, b = self.as_type(n.a, n.dtype), self.as_type(n.b, n.dtype)
            if n.op == "/" and n.dtype not in _FLOAT:  # index arithmetic divides with '//'; '/' is a value's
                return f"pt_div_{n.dtype}({a}, {b})"
            if n.op in ("<<", ">>"):
                # Count modulo the width (the oracle's rule); shift the unsigned bits so '<<' never overflows.
                w = D.width(n.dtype)
                if n.dtype == "bool":
                    return f"((_Bool)((({a}) {n.op} (({b}) & 7)) & 1))"
                u = "u" + n.dtype if not n.dtype.startswith("u") else n.dtype
                return f"(({ctype(n.dtype)})(({ctype(u)})({a}) {n.op} (({b}) & {w - 1})))" if n.op == "<<" \
                    else f"(({ctype(n.dtype)})(({a}) >> (({b}) & {w - 1})))"
            return self._narrow(f"({a} {n.op} {b})", n.dtype)
        if isinstance(n, B.Cmp):
            return f"({self.as_type(n.a, n.operand_dtype)} {n.op} {self.as_type(n.b, n.operand_dtype)})"
        if isinstance(n, B.Select):
            d = _helper_dtype(n.dtype)
            text = f"pt_sel_{d}({self.as_type(n.cond, 'bool')}, {self.as_type(n.then, d)}, {self.as_type(n.else_, d)})"
            return text if d == n.dtype else f"(({ctype(n.dtype)}){text})"
        if isinstance(n, B.Call):
            return self.call(n)
        raise InternalError(f"cannot print body node {n!r}")

    def _narrow(self, text: str, dtype: str) -> str:
        """C computes narrow integers in int: convert back so the value wraps as the oracle's does."""
        if dtype in ("bool", "int8", "int16", "uint8", "uint16"):
            return f"(({ctype(dtype)}){text})"
        return text

    def call(self, n: B.Call) -> str:
        """Builtins with PlaidML's meaning (see :mod:`polytile.elemwise`)."""
        d = n.dtype
        f = n.func
        isf = d in _FLOAT
        suffix = "f" if d == "float32" else ""
        args = [self.as_type(a, d) for a in n.args]
        one = c_const(1, d)
        math_name = {"asin": "asin", "acos": "acos", "atan": "atan", "erf": "erf"}.get(f, f)
        if f in ("exp", "log", "sqrt", "tanh", "sin", "cos", "tan", "sinh", "cosh", "asin", "acos", "atan", "erf",
                 "floor", "ceil", "round", "pow"):
            name = "pt_round" if f == "round" else math_name
            if isf:
                return f"{name}{suffix}({', '.join(args)})"
            # An integer argument: computed in double, truncated back (the oracle's rule).
            dargs = ", ".join(f"(double)({a})" for a in args)
            return f"pt_cvt_{d}({name}({dargs}))"
        h = _helper_dtype(d)
        # Render each argument once, and use helpers that take each once: nested calls must stay
        # linear in size, not duplicate their operands' text.
        hargs = args if h == d else [f"(({ctype(h)})({a}))" for a in args]
        back = (lambda t: t) if h == d else (lambda t: f"(({ctype(d)}){t})")
        if f == "abs":
            return back(f"pt_abs_{h}({hargs[0]})")
        if f == "max":
            return back(f"pt_pmax_{h}({hargs[0]}, {hargs[1]})")
        if f == "min":
            return back(f"pt_pmin_{h}({hargs[0]}, {hargs[1]})")
        if f == "relu":
            return back(f"pt_relu_{h}({hargs[0]})")
        if f == "sigmoid":
            return f"({one} / ({one} + exp{suffix}(-{args[0]})))"
        if f == "recip":
            return f"({one} / {args[0]})" if isf else f"pt_div_{d}({one}, {args[0]})"
        raise InternalError(f"no C rendering of builtin {f}() for {d}")

    def store(self, s: B.Store) -> str:
        arr = self.arrays[s.array]
        target = self.access(s.array, s.index)
        value = self.as_type(s.value, arr.dtype)
        if s.reduce is None:
            return f"{target} = {value};"
        if s.reduce in ("+", "*"):
            if arr.dtype in ("bool", "int8", "int16", "uint8", "uint16"):
                return f"{target} = {self._narrow(f'({target} {s.reduce} {value})', arr.dtype)};"
            return f"{target} {s.reduce}= {value};"
        return f"{target} = pt_{s.reduce}_{arr.dtype}({target}, {value});"


# ---------------------------------------------------------------------------
# AST walking
# ---------------------------------------------------------------------------


def _c(expr: isl.AstExpr) -> str:
    return expr.to_C_str()


class AstPrinter:
    """Walks an isl AST and builds cgen nodes.

    Marks from the schedule tree (see :mod:`polytile.scheduling.tree`):
    ``parallel [op:array,...]`` -> ``#pragma omp parallel for`` (with
    ``reduction(op:array[sections])``), ``simd`` -> ``#pragma omp simd``,
    ``unroll N`` -> ``#pragma GCC unroll N``, ``local A`` -> a scalar that
    replaces array ``A`` inside the marked subtree (array contraction).
    """

    def __init__(self, scop: Scop, *, outline: bool = True):
        self.outline = outline
        self.scope: List[str] = []  # AST iterators of the enclosing loops
        self.outlined: List[cgen.Generable] = []  # parallel loop bodies as functions
        self.stmts: Dict[str, Statement] = scop.statement_map
        # Statements kept as C text (the C frontend): its 0-d arrays are plain scalar variables.
        self.c_source = any(st.c_text is not None for st in scop.statements)
        self.accumulate: Dict[str, str] = {}  # statement -> scalar accumulator of its SIMD reduction loop
        self.accumulators = 0
        self.arrays = {a.name: a for a in scop.arrays}
        self.body = BodyPrinter(self.arrays)
        self.parallel_loops = 0
        self.locals: set = set()
        self.unsafe_locals: set = set()  # 'local' marks isl's AST repeats: not one scope, keep the array
        self.vector_types: set = set()  # (dtype, lanes) used by register tiles
        self.notes: List[str] = []  # why a requested optimisation was not applied
        # Packing (see codegen/pack.py): boxes isl computed per pack mark, the
        # buffers allocated by the entry function (with whether each is per thread),
        # the packed buffer of each array inside the current subtree, and the C
        # variables (buffer slices, box origins) that outlined functions must receive.
        self.footprints: Dict[str, pack.Footprint] = {}
        self.pack_buffers: List[Tuple[pack.PackBuffer, bool]] = []
        self.packed: Dict[str, pack.PackBuffer] = {}
        self.pack_scope: List[Tuple[str, str]] = []  # (parameter declaration, name)
        self.parallel_depth = 0
        self.allow_packs = outline  # the entry function owns the buffers; regions (C source) have none

    @staticmethod
    def ctype(dtype: str) -> str:
        return ctype(dtype)

    def node(self, n: isl.AstNode, marks: Tuple[str, ...] = ()) -> List:
        t = n.get_type()
        if t == isl.ast_node_type.block:
            out: List = []
            children = n.block_get_children()
            for i in range(children.n_ast_node()):
                out.extend(self.node(children.get_at(i)))
            return out
        if t == isl.ast_node_type.mark:
            name = n.mark_get_id().get_name()
            inner = n.mark_get_node()
            if name.startswith("local "):
                arr = self.arrays[name.split(" ", 1)[1]]
                if arr.name in self.unsafe_locals:
                    return self.node(inner, marks)  # the array stays in memory (see _local_arrays)
                self.locals.add(arr.name)
                local = f"pt_l_{arr.name}"  # pt_*: never a user's name (polytile.names)
                saved = dict(self.body.locals)
                self.body.locals[arr.name] = local
                inside = self.node(inner, marks)
                self.body.locals = saved
                return [cgen.Block([cgen.Line(f"{ctype(arr.dtype)} {local};")] + inside)]
            if name.startswith("pack "):
                return self._pack(n, name, inner, marks)
            if name.startswith("regtile "):
                code = microkernel.emit(self, inner, name, marks, lambda: self.node(inner, marks))
                return code if code is not None else self.node(inner, marks)
            if name.startswith("dim "):
                # The band's own loop must be right here; if isl generated none (one
                # iteration, or a value fixed by outer loops), its marks are dropped
                # rather than passed to an inner loop they were never checked for.
                if inner.get_type() == isl.ast_node_type.for_:
                    return self.node(inner, marks)
                if marks:
                    self.notes.append(f"marks {', '.join(marks)} dropped: isl generated no loop for {name}")
                return self.node(inner)
            return self.node(inner, marks + (name,))
        if t == isl.ast_node_type.for_:
            return self._for(n, marks)
        if t == isl.ast_node_type.if_:
            then = cgen.Block(self.node(n.if_get_then_node()))
            if n.if_has_else_node():
                return [cgen.If(_c(n.if_get_cond()), then, cgen.Block(self.node(n.if_get_else_node())))]
            return [cgen.If(_c(n.if_get_cond()), then)]
        if t == isl.ast_node_type.user:
            return [self._user(n.user_get_expr())]
        raise InternalError(f"unexpected isl AST node type {t}")

    def _pack(self, n: isl.AstNode, name: str, inner: isl.AstNode, marks: Tuple[str, ...]) -> List:
        """Copy the mark's footprint into a blocked buffer, then the subtree reading through it."""
        key = pack.annotation(n)
        fp = self.footprints.get(key) if key else None
        if fp is None or not self.allow_packs:
            self.notes.append(f"{name} not applied: " + ("no footprint" if self.allow_packs else "no buffers in a C region"))
            return self.node(inner, marks)
        arr = self.arrays[fp.array]
        k = len(self.pack_buffers)
        buf = pack.PackBuffer(f"pt_pk{k}", arr, fp.dim, fp.block, fp.size)
        per_thread = self.parallel_depth > 0
        self.pack_buffers.append((buf, per_thread))
        t = ctype(arr.dtype)
        where = f"pt_pkbuf{k}" + (f" + (long)pt_thread_num() * {buf.elements}" if per_thread else "")
        head: List[cgen.Generable] = [cgen.Line(f"{t} *restrict {buf.name} = {where};")]
        head += pack.copy_code(buf, fp, lambda idx: self.body.access(arr.name, tuple(B.Iter(x) for x in idx)),
                               parallel=not per_thread)
        saved_packed, saved_scope = dict(self.packed), list(self.pack_scope)
        self.packed[arr.name] = buf
        self.pack_scope.append((f"{t} *restrict {buf.name}", buf.name))
        self.pack_scope += [(f"const long {buf.origin(d)}", buf.origin(d)) for d in range(len(fp.size))]
        try:
            inside = self.node(inner, marks)
        finally:
            self.packed, self.pack_scope = saved_packed, saved_scope
        return [cgen.Block(head + inside)]

    def _reductions(self, mark: str) -> str:
        """The ``reduction(...)`` clauses of a ``parallel op:A,...`` or ``simd op:s`` mark."""
        clause = ""
        for op, arr in _mark_items(mark):
            if arr in self.arrays and self.arrays[arr].dtype == "bool":
                # GCC combines _Bool partial results of '+' modulo 2 (1 + 1 -> 0), and '*' alike;
                # on truth values the saturating sum is 'or' and the product 'and'.
                op = _BOOL_REDUCTION.get(op, op)
            if arr in self.body.locals:  # contracted to a scalar: reduce the scalar
                clause += f" reduction({op}:{self.body.locals[arr]})"
                continue
            if arr not in self.arrays:  # an accumulator of a SIMD reduction (see _accumulator)
                clause += f" reduction({op}:{arr})"
                continue
            a = self.arrays[arr]
            if not a.shape and self.c_source:  # a C scalar variable, not a pointer to one cell
                clause += f" reduction({op}:{arr})"
                continue
            if any(d < 0 for d in a.shape):
                raise ScheduleError(f"a reduction into {arr} needs its extents, which the source does not give: "
                                    "reduce into a scalar or an array of declared size")
            sections = "".join(f"[0:{d}]" for d in a.shape) or "[0:1]"
            clause += f" reduction({op}:{arr}{sections})"
        return clause

    def _pragmas(self, marks: Tuple[str, ...], cyclic: bool = False) -> List[str]:
        par = [m for m in marks if m.split(" ")[0] == "parallel"]
        simd = [m for m in marks if m.split(" ")[0] == "simd"]
        unroll = [m for m in marks if m.startswith("unroll ")]
        out = []
        if par:
            clause = "omp parallel for"
            if simd:
                clause += " simd"
            clause += (" schedule(static, 1)" if cyclic else " schedule(static)") + self._reductions(par[0])
            out.append(clause)
        elif simd:
            out.append("omp simd" + self._reductions(simd[0]))
        if unroll:
            if out:
                # An OpenMP loop pragma must be followed by its 'for'; GCC rejects another
                # pragma in between, and unrolling a parallel/simd loop is the runtime's job.
                self.notes.append(f"unroll dropped on a loop that is also {out[0].split()[1]}")
            else:
                out.append(f"GCC unroll {unroll[0].split(' ')[1]}")
        return out

    def _accumulator(self, n: isl.AstNode, it: str, marks: Tuple[str, ...]) -> Tuple[Dict[str, str], Tuple, List, List]:
        """A SIMD reduction into an array element (C statements) runs on a scalar accumulator.

        ``for (c5 ...) { const long i = c3; ...; C[i][j] += e; }`` becomes::

            { const long i = c3; const long j = c4;
              double pt_acc = 0;
              #pragma omp simd reduction(+:pt_acc)
              for (c5 ...) { const long i = c3; ...; pt_acc += (e); }
              C[i][j] += pt_acc; }

        (OpenMP array sections would name the cell directly, but GCC 12 miscompiles
        ``reduction(+:C[i:1][j:1])`` on a VLA.)  Returns ``{statement: accumulator}`` for
        :meth:`_user`, the marks, and the lines before and after the loop.  A loop whose
        body is not that one statement, or whose cell moves with the loop, loses its simd
        mark (noted).
        """
        simd = [m for m in marks if m.split(" ")[0] == "simd" and " " in m]
        if not simd or not self.c_source or any(m.split(" ")[0] == "parallel" for m in marks):
            return {}, marks, [], []
        items = _mark_items(simd[0])
        arrays = [a for _, a in items if a not in self.body.locals and self.arrays[a].shape]
        if not arrays:
            return {}, marks, [], []
        body = n.for_get_body()
        if body.get_type() == isl.ast_node_type.block and body.block_get_children().n_ast_node() == 1:
            body = body.block_get_children().get_ast_node(0)
        st = call = None
        if body.get_type() == isl.ast_node_type.user and len(items) == 1:
            call = body.user_get_expr()
            st = self.stmts[call.op_get_arg(0).id_get_id().get_name()]
        kept = tuple(m for m in marks if m not in simd)
        if st is None or st.c_reduction is None or arrays != [st.body.array]:
            self.notes.append(f"simd reduction into {', '.join(arrays)} dropped: the loop body is not one "
                              "statement updating one cell")
            return {}, kept, [], []
        lhs, op, _ = st.c_reduction
        binds = {v: _c(call.op_get_arg(i + 1)) for i, v in enumerate(st.iters)}
        used = [v for v in st.iters if re.search(rf"\b{re.escape(v)}\b", lhs)]
        if any(re.search(rf"\b{re.escape(it)}\b", binds[v]) for v in used):
            self.notes.append(f"simd reduction into {st.body.array} dropped: its cell moves with loop {it}")
            return {}, kept, [], []
        acc = f"pt_acc{self.accumulators}"
        self.accumulators += 1
        before = [f"const long {v} = {binds[v]};" for v in used]
        # The element type for floats; integers sum in long long (written back modulo the cell's
        # width, as the original's wrap-around would): no <stdint.h> needed in the user's file.
        dtype = self.arrays[st.body.array].dtype
        before.append(f"{ {'float32': 'float', 'float64': 'double'}.get(dtype, 'long long')} {acc} = "
                      f"{1 if op == '*=' else 0};")
        clause = f"simd {'*' if op == '*=' else '+'}:{acc}"
        return {st.name: acc}, kept + (clause,), before, [f"{lhs} {'*=' if op == '*=' else '+='} {acc};"]

    def _serial_float_reduction(self, n: isl.AstNode, it: str) -> bool:
        """Innermost loop ``n`` holds a float reduction into a cell that does not move with it.

        GCC 12.2 at -O3 miscompiles such loops when it peels them completely (constant trip count
        up to about 16) and then vectorises the loop around them with a reversed read: ``T[0] +=
        A[i][7 - j]`` over 8 x 8 sums the wrong elements (tests/test_codegen_gcc_workarounds.py).
        ``#pragma GCC unroll 1`` keeps the loop; a strict float reduction is a serial chain of
        adds, so peeling it bought little.
        """
        calls: List[isl.AstExpr] = []
        nested = []

        def visit(x: isl.AstNode) -> bool:
            t = x.get_type()
            if t == isl.ast_node_type.for_ and not x.for_is_degenerate():
                nested.append(x)
            elif t == isl.ast_node_type.user:
                calls.append(x.user_get_expr())
            return not nested  # an inner loop settles it: stop descending
        n.for_get_body().foreach_descendant_top_down(visit)
        if nested:
            return False
        word = re.compile(rf"\b{re.escape(it)}\b")
        for call in calls:
            st = self.stmts.get(call.op_get_arg(0).id_get_id().get_name())
            if st is None or not st.is_reduction or self.arrays[st.body.array].dtype not in D.FLOATS:
                continue
            w = st.write_map().gist_domain(st.domain)  # the domain's bounds would "involve" every iterator
            moving = [k for k in range(len(st.iters))
                      if word.search(_c(call.op_get_arg(k + 1))) and w.involves_dims(isl.dim_type.in_, k, 1)]
            if not moving:
                return True
        return False

    def _cyclic(self, n: isl.AstNode, it: str) -> bool:
        """Deal the iterations of parallel loop ``n`` out cyclically (``schedule(static, 1)``)?

        Yes when it is a loop over tiles (an inner loop starts at ``32 * it``)
        and some statement inside has a domain that is not a box
        (``{ S[i,j] : j <= i }``): its tiles then differ in work (syrk's
        triangle: the last rows do most), and contiguous blocks would give one
        thread most of it.  A loop over single rows or columns stays in
        blocks: neighbouring iterations write neighbouring elements, and
        dealing them out one by one would share cache lines between threads.
        """
        names: set = set()
        tiles = re.compile(rf"\b\d+ \* {re.escape(it)}\b")
        over_tiles = []

        def visit(node: isl.AstNode) -> bool:
            if node.get_type() == isl.ast_node_type.user:
                names.add(node.user_get_expr().op_get_arg(0).id_get_id().get_name())
            elif node.get_type() == isl.ast_node_type.for_:
                if tiles.search(_c(node.for_get_init())) or tiles.search(_c(node.for_get_cond())):
                    over_tiles.append(node)
            return True
        n.foreach_descendant_top_down(visit)
        return bool(over_tiles) and any(not _is_box(self.stmts[x].domain) for x in names if x in self.stmts)

    def _for(self, n: isl.AstNode, marks: Tuple[str, ...]) -> List:
        it = _c(n.for_get_iterator())
        init = _c(n.for_get_init())
        cond = _c(n.for_get_cond()) if not n.for_is_degenerate() else ""
        accumulate, before, after = {}, [], []
        if marks and not n.for_is_degenerate():
            accumulate, marks, before, after = self._accumulator(n, it, marks)
        cyclic = any(m.split(" ")[0] == "parallel" for m in marks) and self._cyclic(n, it)
        pragmas = self._pragmas(marks, cyclic) if marks and not n.for_is_degenerate() else []
        if pragmas and not _canonical(cond, it):
            pragmas = [p for p in pragmas if p.startswith("GCC")]
        if before and not any(p.startswith("omp simd") for p in pragmas):
            accumulate, before, after = {}, [], []  # no simd loop after all: the statement updates its cell
        if not pragmas and not n.for_is_degenerate() and self._serial_float_reduction(n, it):
            pragmas = ["GCC unroll 1"]
        par = any(p.startswith("omp parallel") for p in pragmas)
        self.scope.append(it)
        self.parallel_depth += par
        saved = self.accumulate
        self.accumulate = {**saved, **accumulate}
        try:
            body = self.node(n.for_get_body())
        finally:
            self.scope.pop()
            self.parallel_depth -= par
            self.accumulate = saved
        if n.for_is_degenerate():
            return [cgen.Block([cgen.Line(f"const long {it} = {init};")] + body)]
        inc = _c(n.for_get_inc())
        if par:
            self.parallel_loops += 1
            if self.outline and not self.body.locals:
                body = [self._outline(it, body)]
        loop = cgen.For(f"long {it} = {init}", cond, f"{it} += {inc}", cgen.Block(body))
        code = [cgen.Pragma(p) for p in pragmas] + [loop]
        if before:
            return [cgen.Block([cgen.Line(b) for b in before] + code + [cgen.Line(a) for a in after])]
        return code

    def _outline(self, it: str, body: List) -> cgen.Generable:
        """Move a parallel loop's body into its own function; return the call.

        GCC does not vectorise loops inside the function it outlines for an
        OpenMP region (the arrays become fields of the shared-data record and
        their accesses "complicated"); a separate function whose arrays are
        ``restrict`` parameters vectorises like serial code.
        """
        name = f"pt_par{len(self.outlined)}"
        # Only what the body names is passed: passing every array to every region made the C text
        # (and the C compiler's time) grow with statements x regions, quadratically in program size.
        used = set(_IDENT.findall("\n".join(str(b) for b in body)))
        arrays = [a for a in self.arrays.values() if a.name not in self.locals and a.name in used]
        # Pack buffers the body may slice, and packed views in scope around the loop.
        bufs = [(f"{ctype(b.array.dtype)} *restrict pt_pkbuf{k}", f"pt_pkbuf{k}")
                for k, (b, _) in enumerate(self.pack_buffers)]
        extra = [(d, v) for d, v in bufs + self.pack_scope if v in used]
        params = ([_param_type(a) for a in arrays] + [d for d, _ in extra]
                  + [f"const long {x}" for x in self.scope + [it]])
        fn = cgen.FunctionBody(
            cgen.Line(f"static __attribute__((noinline)) void {name}({', '.join(params) or 'void'})"),
            cgen.Block(body))
        self.outlined.append(fn)
        args = [a.name for a in arrays] + [v for _, v in extra] + self.scope + [it]
        return cgen.Line(f"{name}({', '.join(args)});")

    def _user(self, call: isl.AstExpr) -> cgen.Generable:
        name = call.op_get_arg(0).id_get_id().get_name()
        st = self.stmts[name]
        binds = [f"const long {v} = {_c(call.op_get_arg(i + 1))};" for i, v in enumerate(st.iters)]
        stmt = st.c_text if st.c_text is not None else self.body.store(st.body)
        if name in self.accumulate:  # inside a SIMD reduction loop: update the loop's accumulator
            _, op, operand = st.c_reduction
            stmt = f"{self.accumulate[name]} {op} ({operand});"
        if binds:
            return cgen.Line("{ " + " ".join(binds) + " " + stmt + " }")
        return cgen.Line(stmt)


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

#: OpenMP reduction operators for bool cells (see AstPrinter._reductions).
_BOOL_REDUCTION = {"+": "|", "*": "&", "max": "|", "min": "&"}


def _helper_dtype(dtype: str) -> str:
    """The prelude's helpers are written per dtype; float16 goes through float32 (exact for these ops)."""
    return "float32" if dtype == "float16" else dtype


def _comment(text: str) -> str:
    """Text safe inside ``/* ... */``."""
    return text.replace("*/", "* /").replace("\\\n", " ")


def _mark_items(mark: str) -> List[Tuple[str, str]]:
    """``[(op, array), ...]`` of a ``parallel +:C,max:M`` or ``simd +:s`` mark (none for a bare one)."""
    parts = mark.split(" ", 1)
    return [tuple(item.split(":")) for item in parts[1].split(",")] if len(parts) > 1 and parts[1] else []


def _is_box(dom: isl.Set) -> bool:
    """``dom`` equals the product of its projections onto each dimension (a rectangle, for any parameters)."""
    n = dom.dim(isl.dim_type.set)
    box = isl.Set.universe(dom.get_space())
    for k in range(n):
        p = dom.project_out(isl.dim_type.set, k + 1, n - k - 1).project_out(isl.dim_type.set, 0, k)
        p = p.insert_dims(isl.dim_type.set, 0, k).add_dims(isl.dim_type.set, n - k - 1)
        box = box.intersect(p.set_tuple_id(dom.get_tuple_id()) if dom.has_tuple_id() else p)
    return box.is_subset(dom)


def _canonical(cond: str, it: str) -> bool:
    """OpenMP wants ``it <op> bound`` with a loop-invariant bound."""
    m = re.match(rf"^{re.escape(it)} (<=|<) (.*)$", cond)
    return bool(m) and not re.search(rf"\b{re.escape(it)}\b", m.group(2))


def _local_arrays(ast: isl.AstNode) -> Tuple[set, set]:
    """(arrays replaced by local scalars, arrays whose ``local`` mark the AST holds more than once).

    A contracted temporary lives in one scalar declared by its mark.  isl may generate a marked
    subtree more than once (a band split into pieces: ``T = A + 1`` at the first point, the
    consumers in a loop after it); each copy would declare its own scalar and the consumers would
    read one that was never written.  Such an array is not contracted.
    """
    count: Dict[str, int] = {}

    def visit(n: isl.AstNode) -> bool:
        if n.get_type() == isl.ast_node_type.mark:
            name = n.mark_get_id().get_name()
            if name.startswith("local "):
                arr = name.split(" ", 1)[1]
                count[arr] = count.get(arr, 0) + 1
        return True

    ast.foreach_descendant_top_down(visit)
    return {a for a, n in count.items() if n == 1}, {a for a, n in count.items() if n > 1}


def _pointer(a: Array, declarator: str) -> str:
    """``const float *D`` / ``const float (*D)[7]``: the typed pointer an array is used through."""
    t = ctype(a.dtype)
    const = "const " if a.kind == "input" else ""
    if len(a.shape) <= 1:
        return f"{const}{t} *{declarator}"
    return f"{const}{t} (*{declarator}){''.join(f'[{d}]' for d in a.shape[1:])}"


def _param_type(a: Array) -> str:
    """``const float (*restrict A)[7]``: a parameter of an outlined function."""
    return _pointer(a, f"restrict {a.name}")


def _param_decl(a: Array, k: int) -> str:
    """``const float (*restrict A)[7] = (const float (*)[7])a0;``: the entry's view of its k-th argument."""
    return f"{_param_type(a)} = ({_pointer(a, '')})a{k};"


def generate(scop: Scop, schedule: Optional[isl.Schedule] = None, *, entry: Optional[str] = None,
             header: str = "") -> KernelSource:
    """C source for ``scop`` executed in the order of the schedule tree ``schedule`` (default: original).

    >>> # src = generate(scop, sched); src.text starts with the prelude and holds
    >>> # int <entry>(void *a0, ...) { ... #pragma omp parallel for ... return 0; }
    """
    sched = schedule if schedule is not None else scop.schedule
    entry = entry or f"pt_{scop.name}"
    footprints: Dict[str, pack.Footprint] = {}
    errors: List[str] = []
    build = _counters(isl.AstBuild.from_context(scop.context), sched, fresh_counter_prefix(_names_in(scop)))
    build, hook_handle = build.set_after_each_mark(pack.footprint_hook(scop, footprints, errors))
    with interrupts_after():  # a Ctrl-C must not unwind through isl from the hook
        ast = build.node_from_schedule(sched)
    del hook_handle  # the callback is only called while the AST is built
    printer = AstPrinter(scop)
    printer.footprints = footprints
    printer.notes.extend(errors)
    contracted, repeated = _local_arrays(ast)
    printer.locals |= contracted  # known before any parallel body is outlined
    printer.unsafe_locals |= repeated
    body = printer.node(ast)

    order = {"input": 0, "inout": 1, "output": 2, "temp": 3}
    params = tuple(sorted((a for a in scop.arrays if a.name not in printer.locals), key=lambda a: order[a.kind]))
    decls = [cgen.Line(_param_decl(a, k)) for k, a in enumerate(params)]
    alloc, free = _pack_buffers(printer.pack_buffers)
    sig = ", ".join(f"void *restrict a{k}" for k in range(len(params))) or "void"
    fn = cgen.FunctionBody(
        cgen.Line(f"int {entry}({sig})"),
        cgen.Block(decls + alloc + body + free + [cgen.Line("return 0;")]),
    )
    # User text inside a C comment: '*/' would end it early.
    comments = [f" * {_comment(ln)}" for ln in header.splitlines()] if header else []
    for s in scop.statements:
        comments.append(f" * {s.name}: {_comment(s.text or s.kind)}")
    for note in printer.notes:
        comments.append(f" * note: {_comment(note)}")
    banner = "/* Generated by polytile.\n" + "\n".join(comments) + "\n */\n"
    vtypes = "".join(microkernel.vec_typedef(d, v, ctype(d)) + "\n" for d, v in sorted(printer.vector_types))
    helpers = "".join(str(f) + "\n\n" for f in printer.outlined)
    prelude = PRELUDE + (PACK_PRELUDE if printer.pack_buffers else "")
    text = banner + prelude + vtypes + "\n" + helpers + str(fn) + "\n"
    return KernelSource(entry, text, params)


PACK_PRELUDE = r"""#ifdef _OPENMP
#include <omp.h>
static inline int pt_thread_num(void) { return omp_get_thread_num(); }
static inline int pt_max_threads(void) { return omp_get_max_threads(); }
#else
static inline int pt_thread_num(void) { return 0; }
static inline int pt_max_threads(void) { return 1; }
#endif
"""

# Returned by the entry function when a packing buffer cannot be allocated (ENOMEM).
PACK_ENOMEM = 12


def _pack_buffers(buffers) -> Tuple[List[cgen.Generable], List[cgen.Generable]]:
    """Allocation (one slice per thread where the pack runs inside a parallel loop) and release."""
    if not buffers:
        return [], []
    alloc: List[cgen.Generable] = [cgen.Line("const long pt_threads = pt_max_threads();")]
    free: List[cgen.Generable] = []
    names = []
    for k, (buf, per_thread) in enumerate(buffers):
        t = ctype(buf.array.dtype)
        count = f"{buf.elements}L" + (" * pt_threads" if per_thread else "")
        nbytes = f"(({count} * (long)sizeof({t}) + {pack.ALIGN - 1}) / {pack.ALIGN}) * {pack.ALIGN}"
        alloc.append(cgen.Line(f"{t} *restrict pt_pkbuf{k} = ({t} *)aligned_alloc({pack.ALIGN}, {nbytes});"))
        names.append(f"pt_pkbuf{k}")
    frees = " ".join(f"free({x});" for x in names)
    alloc.append(cgen.Line(f"if ({' || '.join('!' + x for x in names)}) {{ {frees} return {PACK_ENOMEM}; }}"))
    free.append(cgen.Line(frees))
    return alloc, free


REGION_PRELUDE = """#ifndef floord
#define floord(n, d) (((n) < 0) ? -((-(n) + (d) - 1) / (d)) : (n) / (d))
#endif
#ifndef min
#define min(a, b) ((a) < (b) ? (a) : (b))
#endif
#ifndef max
#define max(a, b) ((a) > (b) ? (a) : (b))
#endif
"""


def fresh_counter_prefix(taken: Sequence[str]) -> str:
    """``c`` when no name of ``taken`` is ``c<digits>``, else the first of ``pt_c``, ``pt_c_``, ... that is free.

    >>> fresh_counter_prefix({"x", "c1"}), fresh_counter_prefix({"x"})
    ('pt_c', 'c')
    """
    for k in itertools.count():
        prefix = "c" if k == 0 else "pt_c" + "_" * (k - 1)
        pat = re.compile(re.escape(prefix) + r"\d+$")
        if not any(pat.match(n) for n in taken):
            return prefix
    raise AssertionError("unreachable")


def _names_in(scop: Scop) -> set:
    """Identifiers the generated code must not shadow: parameters, arrays and the statements' C text."""
    names = {a.name for a in scop.arrays}
    space = scop.domain.get_space()
    names |= {space.get_dim_name(isl.dim_type.param, k) for k in range(space.dim(isl.dim_type.param))}
    for st in scop.statements:
        for text in (st.c_text, *(st.c_reduction or ())):
            if isinstance(text, str):
                names |= set(_IDENT.findall(text))
    return names


def _counters(build: isl.AstBuild, schedule: isl.Schedule, counter: str) -> isl.AstBuild:
    """``build`` naming loop counters ``counter0, counter1, ...`` (isl's own names are ``c0, c1, ...``)."""
    if counter == "c":
        return build
    ctx = build.get_ctx()
    dims = [0]
    schedule.get_map().foreach_map(lambda m: dims.append(m.dim(isl.dim_type.out)))
    ids = isl.IdList.alloc(ctx, 0)
    for k in range(max(dims) + 1):  # one name per schedule dimension
        ids = ids.add(isl.Id(f"{counter}{k}", context=ctx))
    return build.set_iterators(ids)


def generate_region(scop: Scop, schedule: isl.Schedule, counter: Optional[str] = None) -> Tuple[str, List[str]]:
    """Only the loop nest for ``scop`` (source-to-source output), plus notes.

    Statements with ``c_text`` are emitted as their own C code inside a block
    that binds their iterators (``{ const long i = c0; ... A[i][j] = ...; }``),
    so the region drops into the original function where the arrays and
    scalars are already declared.  The AST helper macros are guarded so the
    region can appear several times in one file.
    """
    if counter is None:
        counter = fresh_counter_prefix(_names_in(scop))
    build = _counters(isl.AstBuild.from_context(scop.context), schedule, counter)
    ast = build.node_from_schedule(schedule)
    printer = AstPrinter(scop, outline=False)
    body = printer.node(ast)
    if printer.vector_types:
        raise InternalError("register tiles are not available in source-to-source output")
    return REGION_PRELUDE + str(cgen.Block(body)), printer.notes
